//! Command-line definitions (clap). Turned into [`TuneOptions`] here; nothing deeper reads
//! argv.

use crate::check::CheckOptions;
use crate::cluster::merge::MergeOptions;
use crate::cluster::sweep::SweepOptions;
use crate::error::{Error, Result};
use crate::export::{self, BestQuery, ExportOptions, ReportOptions};
use crate::isolate::compile_pool::CompileLimit;
use crate::measure::bench::{BenchSettings, CacheState};
use crate::pipeline::options::{
    default_jobs, Isolation, TuneOptions, DEFAULT_CACHE, DEFAULT_CONFIRM_ROUNDS, DEFAULT_DB,
    DEFAULT_DEVICE, DEFAULT_OP, DEFAULT_OUT_DIR, DEFAULT_REPS, DEFAULT_SEED, DEFAULT_STRATEGY,
    DEFAULT_TOP, DEFAULT_WARMUP, DEFAULT_WATCHDOG_S,
};
use crate::pipeline::search::{default_budget, AUTO_SEARCH};
use crate::search::budget::DEFAULT_BUDGET;
use crate::search::registry::REGISTRY;
use crate::spec::ops::BUILTIN_OPS;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

mod values;

const EXAMPLES: &str = "\
Examples:
  tune --op transpose --shape 1000x1000
      tune the default transpose space for a 1000x1000 float matrix (a model search over
      80 of its 5040 valid configurations; --strategy exhaustive times them all)
  tune --op transpose --shape 8192x8192 --param TILE_DIM=32,64 --param BOUNDS=none,edge
      narrow the space; --param replaces a parameter's default values
  tune --op transpose --shape 4096x4096 --cache warm --reps 100
      time with L2 kept warm between launches, 100 timed launches per variant
  tune --op transpose --shape 8192x8192 --dtype f16
      tune for another element type (f32, f64, f16, bf16; default: the op's, f32 for the built-in
      ops); the roof is the copy of the same bytes
  tune --op matmul --shape 1024x1024x1024 --block-size 16,32
      tune the tiled matmul (C = A·B, MxNxK) at block sizes 16 and 32 against cuBLAS
  tune --spec examples/vector_add --shape 10000000
      tune your own kernel: a spec (parameters, constraints, launch, buffers) + a Tera template
  tune --op transpose --shape 1000x1000 --compile-only --arch sm_90 --emit gen/
      render and compile with NVRTC what a GPU run would measure, no GPU needed, and keep
      the sources
  tune --op transpose --shapes shapes.txt --shard 0/4 --out run/shard-0
      run shard 0 of 4 of a sweep (e.g. a Slurm array task); then, once all are done:
  tune merge run/shard-0 run/shard-1 run/shard-2 run/shard-3 --out results
  tune params --op sgemm
      list an op's parameters: default values, accepted values, what each does

Shapes: transpose takes ROWSxCOLS, matmul MxNxK (C is MxN, A is MxK, B is KxN). Results go to results/<op>_<shape>_<gpu>.csv (every
configuration, with why it failed or was pruned; <op>_<shape>_<dtype>_<gpu>.csv for a
--dtype other than f32) and results/best.csv (one row per op,
shape, dtype and GPU; a new run of the same key replaces the row, except that with
--keep-best a stored row of today's kernel that is faster at the same --cache state stays).";

const BEST_EXAMPLES: &str = "\
Examples:
  tune best --op transpose --shape 1000x1000
      the stored winner of every dtype and GPU tuned at 1000x1000
  tune best --op transpose --shape 8192x8192 --dtype f16 --gpu H100
      only the f16 winner on a GPU whose name contains H100
  tune best --op sgemm --shape 1024x1024x1024 --db run/best.csv
      read another tuning database";

const EXPORT_EXAMPLES: &str = "\
Examples:
  tune export --format markdown
      every stored winner as a Markdown table on stdout
  tune export --format json --op transpose --output transpose.json
      the transpose winners as JSON
  tune export --format csv --gpu H100 --db run/best.csv --output h100.csv
      the winners of one GPU from another database
  tune export --format cuda --output tuned/
      one specialized .cu per winner plus a header with a dispatch function";

const REPORT_EXAMPLES: &str = "\
Examples:
  tune report --csv results/transpose_1000x1000_<gpu>.csv
      write report.html about that run
  tune report --csv results/sgemm_1024x1024x1024_<gpu>.csv --output sgemm.html
      another run, another file
--csv takes a run CSV (results/<op>_<shape>_<gpu>.csv), not results/best.csv.";

const CHECK_EXAMPLES: &str = "\
Examples:
  tune check
      re-time every stored winner of this GPU in results/best.csv, 3 runs each; each
      row's margin comes from its measured noise
  tune check --op transpose --shape 1000x1000 --margin 5
      one entry, failing at more than 5 % slower
  tune check --db ci/best.csv --device 1 --reps 100
      another database, on GPU 1, with 100 timed launches
Needs a GPU: it times the kernels. Exit codes: 0 all pass, 1 a check failed (or no GPU),
2 bad input.";

const PARAMS_EXAMPLES: &str = "\
Examples:
  tune params --op transpose
      every transpose parameter: its default sweep, what --param accepts, its help
  tune params --op myop --templates my/templates
      the parameters of an op of your own templates folder
  tune params --spec examples/vector_add
      the parameters of a spec of your own (a .toml or the folder holding it)
  tune params --op sgemm --json
      the same as JSON, e.g. for a script that completes a stored row's parameters";

const MERGE_EXAMPLES: &str = "\
Examples:
  tune merge run/shard-0 run/shard-1 run/shard-2 run/shard-3 --out results
      join the four shards of `tune --shard K/4 --out run/shard-K`
  tune merge run/shard-* --out merged --partial
      merge what finished, although some shards are missing or unfinished";

/// `--op`'s help, naming the built-in ops from [`BUILTIN_OPS`].
fn op_help() -> String {
    format!(
        "Op to tune (built in: {}; more with --templates or --spec)",
        BUILTIN_OPS.join(", ")
    )
}

/// Finds the fastest correct CUDA kernel for an op and a shape on this GPU.
#[derive(Debug, Parser)]
#[command(
    name = "tune",
    version,
    about,
    after_help = EXAMPLES,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    #[command(flatten)]
    pub tune: TuneArgs,
}

impl Cli {
    /// The command line, parsed as [`Parser::parse`] does (exiting on bad usage), with
    /// [`TuneArgs::op_given`] set.
    pub fn parse_args() -> Cli {
        use clap::{parser::ValueSource, CommandFactory, FromArgMatches};
        let matches = Cli::command().get_matches();
        let mut cli = Cli::from_arg_matches(&matches)
            .unwrap_or_else(|e| e.format(&mut Cli::command()).exit());
        cli.tune.op_given = matches.value_source("op") == Some(ValueSource::CommandLine);
        cli
    }
}

/// Commands that work on stored results instead of tuning.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the stored best configuration for an op and shape, without tuning.
    #[command(after_help = BEST_EXAMPLES)]
    Best(BestArgs),
    /// Write the tuning database as CSV, JSON or Markdown, or as CUDA sources plus a header.
    #[command(after_help = EXPORT_EXAMPLES)]
    Export(ExportArgs),
    /// Write a self-contained HTML report with plots of a tuning run.
    #[command(after_help = REPORT_EXAMPLES)]
    Report(ReportArgs),
    /// Re-time the stored winners on this GPU; exit 1 when one is slower than stored (or than
    /// its runner-up) by more than its margin (from its measured noise, or --margin), or no
    /// longer verifies. For CI on a GPU runner.
    #[command(after_help = CHECK_EXAMPLES)]
    Check(CheckArgs),
    /// Merge the output folders of `tune --shard K/N` runs into one results folder and one
    /// best.csv: refuses shards of different GPU models, code versions, cache states or sweep
    /// arguments, and missing or unfinished shards (unless --partial). Merging again changes
    /// nothing.
    #[command(after_help = MERGE_EXAMPLES)]
    Merge(MergeArgs),
    /// List an op's parameters as its spec declares them: each one's default sweep, the values
    /// --param accepts, the value rows stored before it existed stand for, and its help.
    #[command(after_help = PARAMS_EXAMPLES)]
    Params(ParamsArgs),
}

#[derive(Debug, Args)]
pub struct ParamsArgs {
    /// The op (built in, or in --templates DIR).
    #[arg(long, required_unless_present = "spec", conflicts_with = "spec")]
    pub op: Option<String>,
    /// Read op specs and templates from DIR instead of the built-in ones.
    #[arg(long, value_name = "DIR", conflicts_with = "spec")]
    pub templates: Option<PathBuf>,
    /// A spec of your own (.toml), or a folder holding one spec and its template.
    #[arg(long, value_name = "FILE|DIR")]
    pub spec: Option<PathBuf>,
    /// The same facts as JSON, for scripts: op, summary, dims, dtypes, and per parameter its
    /// values, accepts (null: any integer), missing (null: none) and help.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The --out folders of the shards (each holds a shard-K-of-N.json manifest).
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Folder for the merged run CSVs, journals and best.csv (not one of the shard folders).
    #[arg(long, default_value = DEFAULT_OUT_DIR)]
    pub out: PathBuf,
    /// Merge what is there although shards are missing or unfinished: their shapes get run
    /// CSVs of what was measured, but no best.csv row.
    #[arg(long)]
    pub partial: bool,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The tuning database whose winners to check.
    #[arg(long, default_value = DEFAULT_DB)]
    pub db: PathBuf,
    /// Only entries of this op.
    #[arg(long)]
    pub op: Option<String>,
    /// Only entries of this shape.
    #[arg(long, allow_hyphen_values = true)]
    pub shape: Option<String>,
    /// Allowed slowdown in percent before a check fails, for every row (a finite number, 0 or
    /// more). Default: each row's own, from its measured noise (3 % + 3 standard deviations
    /// of the difference, one run's median taken to vary by a quarter of its launches' spread).
    #[arg(long, value_parser = values::non_negative, allow_hyphen_values = true)]
    pub margin: Option<f64>,
    /// Separate timed runs per configuration; the median of their medians is compared.
    #[arg(
        long,
        default_value_t = crate::check::DEFAULT_ROUNDS,
        value_parser = values::at_least_one,
        allow_negative_numbers = true
    )]
    pub rounds: usize,
    /// CUDA device index.
    #[arg(
        long,
        default_value_t = DEFAULT_DEVICE,
        value_parser = values::count,
        allow_negative_numbers = true
    )]
    pub device: usize,
    /// Timed launches per configuration (at least the stored run's).
    #[arg(
        long,
        default_value_t = DEFAULT_REPS,
        value_parser = values::reps,
        allow_negative_numbers = true
    )]
    pub reps: usize,
    /// Read op specs and templates from DIR instead of the built-in ones.
    #[arg(long, value_name = "DIR")]
    pub templates: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct BestArgs {
    /// Op whose best configuration to print.
    #[arg(long)]
    pub op: String,
    /// Shape as tuned, e.g. 1000x1000.
    #[arg(long, allow_hyphen_values = true)]
    pub shape: String,
    /// GPU name to match (default: any; with several, every match is printed).
    #[arg(long)]
    pub gpu: Option<String>,
    /// Element type to match: f32, f64, f16 or bf16 (default: any; every match is printed).
    #[arg(long, value_name = "TYPE")]
    pub dtype: Option<String>,
    /// The tuning database [default: results/best.csv; where that file does not exist, the
    /// database built into tune].
    #[arg(long)]
    pub db: Option<PathBuf>,
}

/// `--cache`: whether L2 is flushed between timed launches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CacheArg {
    /// Flush L2 before each timed launch (DRAM-bound numbers; the default).
    Cold,
    /// Back-to-back launches: data that fits in L2 stays there.
    Warm,
}

impl From<CacheState> for CacheArg {
    fn from(c: CacheState) -> CacheArg {
        match c {
            CacheState::Cold => CacheArg::Cold,
            CacheState::Warm => CacheArg::Warm,
        }
    }
}

impl From<CacheArg> for CacheState {
    fn from(c: CacheArg) -> CacheState {
        match c {
            CacheArg::Cold => CacheState::Cold,
            CacheArg::Warm => CacheState::Warm,
        }
    }
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    #[arg(long, value_parser = format_values())]
    pub format: String,
    /// Only entries of this op.
    #[arg(long)]
    pub op: Option<String>,
    /// Only entries whose GPU name contains this text.
    #[arg(long)]
    pub gpu: Option<String>,
    #[arg(long, help = output_help())]
    pub output: Option<PathBuf>,
    /// The tuning database.
    #[arg(long, default_value = DEFAULT_DB)]
    pub db: PathBuf,
    /// Read op specs and templates from DIR instead of the built-in ones (for cuda).
    #[arg(long, value_name = "DIR")]
    pub templates: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A run CSV written by `tune` (results/OP_SHAPE_GPU.csv).
    #[arg(long)]
    pub csv: PathBuf,
    /// The HTML file to write (`-`: stdout).
    #[arg(long, default_value = "report.html")]
    pub output: PathBuf,
}

/// Arguments of a tuning run (the default command).
#[derive(Debug, Args)]
pub struct TuneArgs {
    #[arg(long, default_value = DEFAULT_OP, help = op_help())]
    pub op: String,

    /// Problem shape: ROWSxCOLS for transpose (1000x1000), MxNxK for matmul and sgemm
    /// (1024x1024x1024).
    /// A list tunes each shape in turn: --shape 1000x1000,4096x512.
    #[arg(
        long,
        allow_hyphen_values = true,
        required_unless_present = "shapes",
        conflicts_with = "shapes"
    )]
    pub shape: Option<String>,

    /// Tune every shape listed in FILE (one per line; # comments and blank lines allowed).
    #[arg(long, value_name = "FILE")]
    pub shapes: Option<PathBuf>,

    /// Element type of the data: f32, f64, f16 or bf16 (default: the op's). Ops list the types
    /// their templates support (transpose: all four; matmul, sgemm: f32), e.g. --dtype bf16.
    #[arg(long, value_name = "TYPE")]
    pub dtype: Option<String>,

    /// Replace a parameter's values: NAME=v1,v2,... (repeatable).
    #[arg(long = "param", short = 'p', value_name = "NAME=V1,V2")]
    pub params: Vec<String>,

    /// Shorthand for --param BLOCK_SIZE=LIST (matmul), e.g. --block-size 16,32.
    #[arg(long, value_name = "LIST")]
    pub block_size: Option<String>,

    /// Timed samples per variant, at most: the median is reported. A contender stops early
    /// once its median is pinned down to 0.15 %, a variant clearly slower than the best after
    /// its first 2 to 5.
    #[arg(
        long,
        default_value_t = DEFAULT_REPS,
        value_parser = values::reps,
        allow_negative_numbers = true
    )]
    pub reps: usize,

    /// Untimed launches before timing (at least one; one when it takes a millisecond or
    /// more).
    #[arg(
        long,
        default_value_t = DEFAULT_WARMUP,
        value_parser = values::warmup,
        allow_negative_numbers = true
    )]
    pub warmup: usize,

    /// L2 state during timing: cold flushes L2 before every timed launch.
    #[arg(long, value_enum, default_value_t = CacheArg::from(DEFAULT_CACHE))]
    pub cache: CacheArg,

    /// Folder for the CSV files.
    #[arg(long, default_value = DEFAULT_OUT_DIR)]
    pub out: PathBuf,

    /// Render and compile what a GPU run would measure (the search's proposals within its
    /// --budget; every valid variant with --strategy exhaustive), then stop (no GPU needed).
    #[arg(long)]
    pub compile_only: bool,

    /// NVRTC target, e.g. sm_90 (default: the GPU's own, or sm_90 without a GPU). What the
    /// code may use follows it (thread block clusters from sm_90, cp.async from sm_80); with
    /// --compile-only so does the shared memory a block may opt into (grids sized for 132 SMs).
    #[arg(long)]
    pub arch: Option<String>,

    /// Write each variant's generated CUDA source to DIR/OP_SHAPE_DTYPE_vNNNN.cu
    /// (e.g. transpose_1000x1000_f32_v0042.cu).
    #[arg(long, value_name = "DIR")]
    pub emit: Option<PathBuf>,

    /// CUDA device index.
    #[arg(
        long,
        default_value_t = DEFAULT_DEVICE,
        value_parser = values::count,
        allow_negative_numbers = true
    )]
    pub device: usize,

    /// Spread a sweep's shapes over these GPUs (`all` or `0,1`), one worker per GPU pulling
    /// shapes from one queue; each shape is tuned entirely on one GPU.
    #[arg(long, value_name = "all|LIST")]
    pub gpus: Option<String>,

    /// Run shard K of N (K = 0..N-1, e.g. $SLURM_ARRAY_TASK_ID/N with --array=0-(N-1), or
    /// $JOB_COMPLETION_INDEX/N): a fixed share of the sweep (of every shape's variants, or of
    /// the shapes when there are at least 4 per shard). Writes shard-K-of-N.json beside the
    /// results and leaves best.csv alone; `tune merge` joins the shards.
    #[arg(long, value_name = "K/N", allow_hyphen_values = true)]
    pub shard: Option<String>,

    /// Do not read or write the on-disk cubin cache.
    #[arg(long)]
    pub no_cache: bool,

    /// Relative-error tolerance for ops compared by tolerance (default: the op's; a finite
    /// number, 0 or more).
    #[arg(long, value_parser = values::non_negative, allow_hyphen_values = true)]
    pub rtol: Option<f64>,

    /// Seed of the random inputs.
    #[arg(
        long,
        default_value_t = DEFAULT_SEED,
        value_parser = values::seed,
        allow_negative_numbers = true
    )]
    pub seed: u64,

    /// How many of the fastest configurations to print.
    #[arg(
        long,
        default_value_t = DEFAULT_TOP,
        value_parser = values::count,
        allow_negative_numbers = true
    )]
    pub top: usize,

    /// Print every failure and the prune reasons.
    #[arg(long, short = 'v')]
    pub verbose: bool,

    /// Compile worker processes, at least 1 (default: one per CPU core).
    #[arg(long, value_parser = values::at_least_one, allow_negative_numbers = true)]
    pub jobs: Option<usize>,

    /// Seconds NVRTC may spend on one variant before it is stopped and the variant recorded
    /// as not compiled; 0: no limit. Default: 15x the run's median compile, at least 1.5 s,
    /// once 8 and more than half of the compiles started have finished (a few configurations of a
    /// space, loops fully unrolled over a large tile, take 10-40x the typical compile and
    /// would hold up their round). With --jobs 1 compiles run in this process and no limit
    /// applies. Under --compile-only, a run that compiled nothing exits 1.
    #[arg(
        long,
        value_name = "SECONDS",
        value_parser = values::seconds_or_zero,
        allow_hyphen_values = true
    )]
    pub compile_timeout: Option<f64>,

    /// Seconds one variant may run on the GPU before it is killed and recorded as hung,
    /// on top of 100x the time its launches would take at the fastest speed seen so far.
    #[arg(
        long,
        default_value_t = DEFAULT_WATCHDOG_S,
        value_parser = values::seconds,
        allow_hyphen_values = true
    )]
    pub watchdog: f64,

    /// Run compiles and GPU work in this process: no worker processes, so a faulting kernel
    /// ends the run (for debugging with cuda-gdb or compute-sanitizer).
    #[arg(long)]
    pub in_process: bool,

    /// Time every variant with all --reps launches, even those whose first 5 launches are
    /// all over 1.05x slower than the best so far (by default those stop after 5).
    #[arg(long)]
    pub no_adaptive: bool,

    /// Interleaved rounds that re-time the leading configurations (the two fastest, and up
    /// to 8 within 10 % of the fastest, in halving stages) to put a confidence interval on the
    /// winner; 0 skips it, else at least 2.
    #[arg(
        long,
        default_value_t = DEFAULT_CONFIRM_ROUNDS,
        value_parser = values::confirm_rounds,
        allow_negative_numbers = true
    )]
    pub confirm_rounds: usize,

    /// Keep the stored row of best.csv when it is faster than this run's best (a lower
    /// median at the same --cache state) and its template still renders the source it timed.
    /// Without it the newer run replaces the row.
    #[arg(long)]
    pub keep_best: bool,

    /// Also write a row for every configuration a constraint pruned, with the reason, into
    /// the run CSV (by default the summary counts them by reason; at one shape they are most
    /// of a space: 1,280,424 of sgemm's 1,327,104 at 4096^3).
    #[arg(long)]
    pub pruned_rows: bool,

    /// The default (no rows for pruned configurations), accepted so a script can say so.
    #[arg(long, hide = true, conflicts_with = "pruned_rows")]
    pub no_pruned_rows: bool,

    /// Reuse the results journaled by an earlier unfinished run of the same op, shape, GPU,
    /// cache state and settings, and measure only what is missing.
    #[arg(long)]
    pub resume: bool,

    /// How to choose the configurations to measure; a search (every strategy but exhaustive)
    /// learns from each round of 24 (the model's all-pairs first round comes at once).
    /// Example: --op sgemm --strategy anneal --budget 300.
    #[arg(long, default_value = DEFAULT_STRATEGY, value_parser = strategy_values())]
    pub strategy: String,

    // What a search may spend; the help names each strategy's default from the registry
    // ([`budget_help`]). Taken as text (a leading `-` included) and parsed in `options`, so a
    // bad value is one line about the budget rather than clap's "unexpected argument".
    #[arg(long, value_name = "N|TIME", allow_hyphen_values = true, help = budget_help())]
    pub budget: Option<String>,

    // Turns off measuring the stored winners first; the help names the searches from the
    // registry ([`no_warm_start_help`]).
    #[arg(long, help = no_warm_start_help())]
    pub no_warm_start: bool,

    /// Read op specs and templates from DIR instead of the built-in ones.
    #[arg(long, value_name = "DIR", conflicts_with = "spec")]
    pub templates: Option<PathBuf>,

    /// Tune your own kernel: its spec (.toml), or a folder holding one spec and its template.
    /// The op's name comes from the spec; --op is ignored.
    #[arg(long, value_name = "FILE|DIR")]
    pub spec: Option<PathBuf>,

    /// The kernel template (.cu.tera) to use instead of the one the spec names.
    #[arg(long, value_name = "FILE", requires = "spec")]
    pub template: Option<PathBuf>,

    /// Whether `--op` was typed (set by [`Cli::parse_args`]): where it was not, an unknown op
    /// is the default one, and the error says so.
    #[arg(skip)]
    pub op_given: bool,
}

impl TuneArgs {
    /// The options of the run; fails on a value that clap takes as text but that does not
    /// parse (`--budget`).
    pub fn options(&self) -> Result<TuneOptions> {
        let budget = self
            .budget
            .as_deref()
            .map(crate::search::budget::parse_budget)
            .transpose()?;
        self.check_block_size()?;
        Ok(TuneOptions {
            op: self.op.clone(),
            templates: self.templates.clone(),
            spec: self.spec.clone(),
            template: self.template.clone(),
            shape: self.shape.clone().unwrap_or_default(),
            dtype: self.dtype.clone(),
            params: self
                .params
                .iter()
                .cloned()
                .chain(self.block_size.iter().map(|b| format!("BLOCK_SIZE={b}")))
                .collect(),
            bench: BenchSettings {
                warmup: self.warmup,
                reps: self.reps,
                cache: self.cache.into(),
            },
            out_dir: self.out.clone(),
            compile_only: self.compile_only,
            arch: self.arch.clone(),
            emit: self.emit.clone(),
            device: self.device,
            cubin_cache: !self.no_cache,
            rtol: self.rtol,
            seed: self.seed,
            isolation: match std::env::current_exe() {
                Ok(exe) if !self.in_process => Isolation::Workers(exe),
                _ => Isolation::InProcess,
            },
            jobs: self.jobs.unwrap_or_else(default_jobs),
            watchdog_s: self.watchdog,
            compile_limit: match self.compile_timeout {
                None => CompileLimit::Auto,
                Some(0.0) => CompileLimit::Off,
                Some(s) => CompileLimit::Seconds(s),
            },
            resume: self.resume,
            adaptive: !self.no_adaptive,
            confirm_rounds: self.confirm_rounds,
            progress: true,
            keep_best: self.keep_best,
            pruned_rows: self.pruned_rows,
            strategy: self.strategy.clone(),
            budget,
            warm_start: !self.no_warm_start,
            shard: None,
        })
    }
}

impl TuneArgs {
    /// `e` with what the command line adds to it: an unknown op that is `--op`'s default,
    /// where `--op` was not typed (a `--templates` folder without that op), says so.
    pub fn explain(&self, e: Error) -> Error {
        match &e {
            Error::UnknownOp { name, .. }
                if !self.op_given && self.spec.is_none() && name == DEFAULT_OP =>
            {
                Error::Usage(format!(
                    "{e}; --op was not given and defaults to {DEFAULT_OP}: name the op with --op"
                ))
            }
            _ => e,
        }
    }

    /// `--block-size LIST` is `--param BLOCK_SIZE=LIST`: given with a `--param` of
    /// BLOCK_SIZE too, it is refused here, where both options can be named as typed (later
    /// checks see two `--param`s).
    fn check_block_size(&self) -> Result<()> {
        let Some(block_size) = &self.block_size else {
            return Ok(());
        };
        let param = self.params.iter().find_map(|p| {
            let (name, list) = p.split_once('=')?;
            (name.trim() == "BLOCK_SIZE").then_some((p, list))
        });
        let Some((param, list)) = param else {
            return Ok(());
        };
        let mut values: Vec<&str> = Vec::new();
        for v in list.split(',').chain(block_size.split(',')).map(str::trim) {
            if !v.is_empty() && !values.contains(&v) {
                values.push(v);
            }
        }
        Err(Error::Usage(format!(
            "--block-size {block_size} and --param {param} both give BLOCK_SIZE; give its \
             values in one list: --block-size {}",
            values.join(",")
        )))
    }

    /// The options of the whole run: the per-shape tuning options plus what the sweep over
    /// shapes, GPUs and shards needs. `command_line` is the program and its arguments as given
    /// (for the resume hint after Ctrl-C).
    pub fn sweep_options(&self, command_line: Vec<String>) -> Result<SweepOptions> {
        Ok(SweepOptions {
            base: self.options()?,
            shapes: self.shapes.clone(),
            shard: self.shard.clone(),
            gpus: self.gpus.clone(),
            top: self.top,
            verbose: self.verbose,
            compile_only: self.compile_only,
            command_line,
        })
    }
}

impl BestArgs {
    pub fn query(&self) -> BestQuery {
        BestQuery {
            op: self.op.clone(),
            shape: self.shape.clone(),
            gpu: self.gpu.clone(),
            dtype: self.dtype.clone(),
            db: self.db.clone(),
        }
    }
}

impl ExportArgs {
    pub fn options(&self) -> ExportOptions {
        ExportOptions {
            format: self.format.clone(),
            op: self.op.clone(),
            gpu: self.gpu.clone(),
            output: self.output.clone(),
            db: self.db.clone(),
            templates: self.templates.clone(),
        }
    }
}

impl ReportArgs {
    pub fn options(&self) -> ReportOptions {
        ReportOptions {
            csv: self.csv.clone(),
            output: self.output.clone(),
        }
    }
}

impl CheckArgs {
    /// The check's options; its GPU worker processes are this executable.
    pub fn options(&self) -> CheckOptions {
        CheckOptions {
            db: self.db.clone(),
            op: self.op.clone(),
            shape: self.shape.clone(),
            margin_pct: self.margin,
            rounds: self.rounds,
            device: self.device,
            reps: self.reps,
            isolation: match std::env::current_exe() {
                Ok(exe) => Isolation::Workers(exe),
                Err(_) => Isolation::InProcess,
            },
            templates: self.templates.clone(),
            progress: true,
        }
    }
}

impl ParamsArgs {
    /// The options that name the op (the rest are the defaults; nothing is tuned).
    pub fn options(&self) -> TuneOptions {
        TuneOptions {
            op: self.op.clone().unwrap_or_default(),
            templates: self.templates.clone(),
            spec: self.spec.clone(),
            ..TuneOptions::default()
        }
    }
}

impl MergeArgs {
    pub fn options(&self) -> MergeOptions {
        MergeOptions {
            dirs: self.dirs.clone(),
            out: self.out.clone(),
            partial: self.partial,
        }
    }
}

/// `--strategy`'s values and their help: `auto` (the tuner's rule), then every strategy of
/// the search registry ([`crate::search::registry::REGISTRY`]) with its line.
fn strategy_values() -> clap::builder::PossibleValuesParser {
    use clap::builder::PossibleValue;
    let auto = PossibleValue::new("auto").help(format!(
        "{AUTO_SEARCH} search over {} configurations; exhaustive where there are no more valid ones",
        default_budget(AUTO_SEARCH)
    ));
    let known = REGISTRY
        .iter()
        .map(|s| PossibleValue::new(s.name).help(s.about));
    clap::builder::PossibleValuesParser::new(std::iter::once(auto).chain(known))
}

/// The registered strategies that search (all but `exhaustive`, which times every
/// configuration), as `random, model, ...`.
fn search_names() -> String {
    let names: Vec<&str> = REGISTRY
        .iter()
        .map(|s| s.name)
        .filter(|&n| n != "exhaustive")
        .collect();
    names.join(", ")
}

/// `--budget`'s help, with each search's default budget from its registry entry.
fn budget_help() -> String {
    let own: Vec<String> = REGISTRY
        .iter()
        .filter(|s| s.name != "exhaustive" && s.budget != DEFAULT_BUDGET)
        .map(|s| {
            let auto = if s.name == AUTO_SEARCH {
                " (and auto)"
            } else {
                ""
            };
            format!("{} variants for {}{auto}, ", s.budget, s.name)
        })
        .collect();
    format!(
        "What a search may spend: a number of variants (300) or a time (90s, 5m); default {}{DEFAULT_BUDGET} for the other searches, everything for exhaustive. With --compile-only, what is compiled ahead",
        own.concat()
    )
}

/// `--no-warm-start`'s help, naming the searches from the registry.
fn no_warm_start_help() -> String {
    format!(
        "A search ({}) first measures, for each stored winner of this op in the --out folder's best.csv (this shape's row first, then other shapes', same GPU and dtype), the configuration of this space nearest to it (at most {} parameters apart), using at most a quarter of a variant budget (at least one); anneal starts chains from them; and the tie rule keeps a stored winner unless it is clearly beaten. This turns both off: a fresh search and a fresh contest",
        search_names(),
        crate::pipeline::search::WARM_START_NEAR
    )
}

/// `tune export --format`'s values: every registered export format ([`export::FORMATS`]),
/// with its help line where it has one.
fn format_values() -> clap::builder::PossibleValuesParser {
    use clap::builder::PossibleValue;
    clap::builder::PossibleValuesParser::new(export::FORMATS.iter().map(|f| {
        let value = PossibleValue::new(f.name);
        match f.about {
            "" => value,
            about => value.help(about),
        }
    }))
}

/// `tune export --output`'s help, naming the registered formats by what they write.
fn output_help() -> String {
    let names = |folder: bool| {
        export::FORMATS
            .iter()
            .filter(|f| matches!(f.writes, export::Writes::Folder(_)) == folder)
            .map(|f| f.name)
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "File to write ({}; default or `-`: stdout) or folder ({}, required)",
        names(false),
        names(true)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::builder::TypedValueParser;
    use clap::CommandFactory;

    /// Help written as doc comments cannot interpolate the constants it names: this holds
    /// each such help to the value the code uses.
    #[test]
    fn help_names_the_values_the_code_uses() {
        use crate::isolate::compile_pool::{
            AUTO_LIMIT_AFTER, AUTO_LIMIT_FACTOR, AUTO_LIMIT_FLOOR_S,
        };
        use crate::measure::bench::{PROBE_FIRST, PROBE_REPS, SETTLED_PCT};
        use crate::pipeline::options::{ADAPTIVE_CUTOFF, CONFIRM_TOP, CONFIRM_WITHIN};
        use crate::pipeline::search::SEARCH_BATCH;
        let cmd = Cli::command();
        let help = |id: &str| {
            let arg = cmd.get_arguments().find(|a| a.get_id() == id);
            let text = arg.and_then(|a| a.get_help()).map(|h| h.to_string());
            text.unwrap_or_else(|| panic!("--{id} has help"))
        };
        for (id, says) in [
            ("reps", format!("{SETTLED_PCT} %")),
            ("reps", format!("first {PROBE_FIRST} to {PROBE_REPS}")),
            ("no_adaptive", format!("first {PROBE_REPS} launches")),
            ("no_adaptive", format!("{ADAPTIVE_CUTOFF}x")),
            ("no_adaptive", format!("stop after {PROBE_REPS}")),
            ("confirm_rounds", format!("up to {CONFIRM_TOP} within")),
            ("confirm_rounds", format!("{} %", CONFIRM_WITHIN * 100.0)),
            ("strategy", format!("round of {SEARCH_BATCH}")),
            ("compile_timeout", format!("{AUTO_LIMIT_FACTOR}x")),
            (
                "compile_timeout",
                format!("at least {AUTO_LIMIT_FLOOR_S} s"),
            ),
            ("compile_timeout", format!("once {AUTO_LIMIT_AFTER} and")),
        ] {
            let text = help(id);
            assert!(text.contains(&says), "--{id}'s help lacks {says:?}: {text}");
        }
    }

    /// A run given nothing but its shape gets the settings of `TuneOptions::default()`: the
    /// command line's defaults and the library's are the same. Every field is named (no
    /// `..`), so a new option does not compile here until it is compared.
    #[test]
    fn the_command_lines_defaults_are_the_default_options() {
        let cli = Cli::try_parse_from(["tune", "--shape", "64x64"]).expect("parses");
        assert!(cli.command.is_none());
        let want = TuneOptions::default();
        let TuneOptions {
            op,
            templates,
            spec,
            template,
            shape,
            dtype,
            params,
            bench,
            out_dir,
            compile_only,
            arch,
            emit,
            device,
            cubin_cache,
            rtol,
            seed,
            isolation,
            jobs,
            compile_limit,
            watchdog_s,
            resume,
            adaptive,
            confirm_rounds,
            progress,
            keep_best,
            pruned_rows,
            strategy,
            budget,
            shard,
            warm_start,
        } = cli.tune.options().expect("options");
        assert_eq!(op, want.op);
        assert_eq!(templates, want.templates);
        assert_eq!(spec, want.spec);
        assert_eq!(template, want.template);
        assert_eq!(shape, "64x64");
        assert_eq!(dtype, want.dtype);
        assert_eq!(params, want.params);
        assert_eq!(bench.reps, want.bench.reps);
        assert_eq!(bench.warmup, want.bench.warmup);
        assert_eq!(bench.cache, want.bench.cache);
        assert_eq!(out_dir, want.out_dir);
        assert_eq!(compile_only, want.compile_only);
        assert_eq!(arch, want.arch);
        assert_eq!(emit, want.emit);
        assert_eq!(device, want.device);
        assert_eq!(cubin_cache, want.cubin_cache);
        assert_eq!(rtol, want.rtol);
        assert_eq!(seed, want.seed);
        // The one difference on purpose: the command line runs its work in worker processes
        // of its own executable, the library in the calling process.
        assert!(matches!(isolation, Isolation::Workers(_)), "{isolation:?}");
        assert_eq!(want.isolation, Isolation::InProcess);
        assert_eq!(jobs, want.jobs);
        assert_eq!(compile_limit, want.compile_limit);
        assert_eq!(watchdog_s, want.watchdog_s);
        assert_eq!(resume, want.resume);
        assert_eq!(adaptive, want.adaptive);
        assert_eq!(confirm_rounds, want.confirm_rounds);
        assert_eq!(progress, want.progress);
        assert_eq!(keep_best, want.keep_best);
        assert_eq!(pruned_rows, want.pruned_rows);
        assert_eq!(strategy, want.strategy);
        assert_eq!(budget, want.budget);
        assert_eq!(shard, want.shard);
        assert_eq!(warm_start, want.warm_start);
    }

    /// `--format` offers every registered export format, in the registry's order.
    #[test]
    fn export_formats_are_the_registry() {
        let values: Vec<clap::builder::PossibleValue> = super::format_values()
            .possible_values()
            .expect("a fixed list")
            .collect();
        let names: Vec<&str> = values.iter().map(|v| v.get_name()).collect();
        let registered: Vec<&str> = crate::export::FORMATS.iter().map(|f| f.name).collect();
        assert_eq!(names, registered);
        assert_eq!(names, ["csv", "json", "markdown", "cuda"]);
        assert!(super::output_help().contains("(csv, json, markdown; default"));
    }

    /// `--strategy` offers `auto` and every registered strategy, each with its help line.
    #[test]
    fn strategy_values_are_auto_then_the_registry() {
        let values: Vec<clap::builder::PossibleValue> = super::strategy_values()
            .possible_values()
            .expect("a fixed list")
            .collect();
        let names: Vec<&str> = values.iter().map(|v| v.get_name()).collect();
        let mut expected = vec!["auto"];
        expected.extend(crate::search::registry::STRATEGIES);
        assert_eq!(names, expected);
        assert!(values.iter().all(|v| v.get_help().is_some()));
    }
}
