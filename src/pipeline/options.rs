//! What a tuning run is asked to do: [`TuneOptions`], as plain data, and its defaults.

use crate::measure::bench::{BenchSettings, CacheState};
use crate::search::budget::Budget;
use std::path::PathBuf;

/// Everything a tuning run needs, as plain data (the CLI builds it; nothing below reads argv).
#[derive(Debug, Clone)]
pub struct TuneOptions {
    pub op: String,
    /// Read op specs and templates from here instead of the built-in ones.
    pub templates: Option<PathBuf>,
    /// A user-written op: spec file or folder (overrides `op` and `templates`).
    pub spec: Option<PathBuf>,
    /// A template file that replaces the one the spec names.
    pub template: Option<PathBuf>,
    pub shape: String,
    /// Element type (`f32`, `f64`, `f16`); `None`: the op's default. One the op's templates do
    /// not support is bad input ([`crate::spec::ops::Op::with_dtype`]).
    pub dtype: Option<String>,
    /// `NAME=v1,v2,...` overrides.
    pub params: Vec<String>,
    pub bench: BenchSettings,
    pub out_dir: PathBuf,
    pub compile_only: bool,
    /// Target architecture; defaults to the GPU's own, or sm_90 without a GPU.
    pub arch: Option<String>,
    pub emit: Option<PathBuf>,
    pub device: usize,
    /// Use the on-disk cubin cache.
    pub cubin_cache: bool,
    pub rtol: Option<f64>,
    pub seed: u64,
    /// Where compiles and GPU work run: in worker processes, or in this one.
    pub isolation: Isolation,
    /// Compile worker processes.
    pub jobs: usize,
    /// How long one source may take in NVRTC (compile workers only).
    pub compile_limit: crate::isolate::compile_pool::CompileLimit,
    /// Seconds a GPU task may take before its worker is killed and it is recorded as hung.
    pub watchdog_s: f64,
    /// Reuse the results in a matching journal from an earlier, unfinished run.
    pub resume: bool,
    /// Cut timing short for variants clearly slower than the best so far.
    pub adaptive: bool,
    /// Interleaved rounds re-timing the leading candidates (0: none).
    pub confirm_rounds: usize,
    /// Progress bars on stderr (off when several runs share the terminal).
    pub progress: bool,
    /// Keep the stored best.csv row when it is faster than this run's best (lower median,
    /// same cache state) instead of replacing it ([`crate::store::best::upsert_best`]).
    pub keep_best: bool,
    /// Keep a record (and a run CSV row) for every configuration a constraint pruned, with the
    /// reason; off (the default), the outcome counts them by reason only
    /// ([`super::outcome::TuneOutcome::prune_reasons`]). Most of a space is pruned at any one
    /// shape (1,280,424 of sgemm's 1,327,104 points at 4096^3), and a record for each was most of
    /// a run's setup time and memory.
    pub pruned_rows: bool,
    /// `auto` (a [`super::search::AUTO_SEARCH`] search, exhaustive where the space is no larger than its budget) or
    /// one of [`crate::search::registry::STRATEGIES`].
    pub strategy: String,
    /// How much a search may measure; `None`: [`super::search::default_budget`] variants for a search, all
    /// of them for `exhaustive`.
    pub budget: Option<Budget>,
    /// `--shard K/N`: measure only this shard's share of the variants (see `cluster::shard`); a
    /// sharded run never writes best.csv (its winner is partial until `tune merge`).
    pub shard: Option<crate::model::slice::Slice>,
    /// A search (random, model, anneal, genetic) measures first, for each stored winner of this op in
    /// the run's best.csv, the configuration of this space nearest to it ([`super::search::warm_start`]),
    /// and the tie rule keeps the stored winner unless it is clearly beaten. `false` (`--no-warm-start`):
    /// neither, so a re-tune after the space changed judges the stored winner like any other.
    pub warm_start: bool,
}

/// Where a run's compiles and GPU tasks run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Isolation {
    /// In this process: serial compiles, and a kernel that faults or hangs ends the run.
    InProcess,
    /// In worker processes of this `tune` executable: a faulting, hanging or crashing task
    /// costs only its own record.
    Workers(PathBuf),
}

impl Isolation {
    /// The worker executable, when there are workers.
    pub fn worker_exe(&self) -> Option<&std::path::Path> {
        match self {
            Isolation::InProcess => None,
            Isolation::Workers(exe) => Some(exe),
        }
    }
}

impl TuneOptions {
    /// The compile workers' executable when compiles run in a pool of worker processes: with
    /// worker processes and more than one job. `None`: sources compile in this process.
    pub fn compile_worker_exe(&self) -> Option<&std::path::Path> {
        self.isolation.worker_exe().filter(|_| self.jobs > 1)
    }
}

// The defaults of a run's settings, each written once: `TuneOptions::default` and the
// command line's default values (`crate::cli`) both read these.

/// The op tuned when none is named (`--op`).
pub const DEFAULT_OP: &str = "transpose";
/// Timed launches per variant (`--reps`).
pub const DEFAULT_REPS: usize = 30;
/// Untimed launches before timing (`--warmup`).
pub const DEFAULT_WARMUP: usize = 3;
/// The L2 state during timing (`--cache`).
pub const DEFAULT_CACHE: CacheState = CacheState::Cold;
/// The folder results are written to (`--out`).
pub const DEFAULT_OUT_DIR: &str = "results";
/// The database `tune check`, `tune export`, `tune best` and `tune report` read (`--db`): the
/// default folder's `best.csv` (a test checks the two agree).
pub const DEFAULT_DB: &str = "results/best.csv";
/// How many of the fastest configurations the report lists (`--top`).
pub const DEFAULT_TOP: usize = 10;
/// The CUDA device index (`--device`).
pub const DEFAULT_DEVICE: usize = 0;
/// The seed of the random inputs (`--seed`).
pub const DEFAULT_SEED: u64 = 1;
/// Seconds a GPU task may run beyond its expected time before it is killed (`--watchdog`).
pub const DEFAULT_WATCHDOG_S: f64 = 10.0;
/// Interleaved rounds re-timing the leading candidates (`--confirm-rounds`).
pub const DEFAULT_CONFIRM_ROUNDS: usize = 50;
/// How the configurations to measure are chosen (`--strategy`).
pub const DEFAULT_STRATEGY: &str = "auto";

/// Compile worker processes when `--jobs` is not given: one per CPU core.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

impl Default for TuneOptions {
    /// The CLI's defaults, with work in this process ([`Isolation::InProcess`]): a library
    /// user sets `op`, `shape` and, to survive faulting kernels, [`Isolation::Workers`] with
    /// a `tune` binary.
    fn default() -> Self {
        TuneOptions {
            op: DEFAULT_OP.into(),
            templates: None,
            spec: None,
            template: None,
            shape: String::new(),
            dtype: None,
            params: Vec::new(),
            bench: BenchSettings {
                warmup: DEFAULT_WARMUP,
                reps: DEFAULT_REPS,
                cache: DEFAULT_CACHE,
            },
            out_dir: PathBuf::from(DEFAULT_OUT_DIR),
            compile_only: false,
            arch: None,
            emit: None,
            device: DEFAULT_DEVICE,
            cubin_cache: true,
            rtol: None,
            seed: DEFAULT_SEED,
            isolation: Isolation::InProcess,
            compile_limit: crate::isolate::compile_pool::CompileLimit::Auto,
            jobs: default_jobs(),
            watchdog_s: DEFAULT_WATCHDOG_S,
            resume: false,
            adaptive: true,
            confirm_rounds: DEFAULT_CONFIRM_ROUNDS,
            progress: true,
            keep_best: false,
            pruned_rows: false,
            strategy: DEFAULT_STRATEGY.into(),
            budget: None,
            shard: None,
            warm_start: true,
        }
    }
}

/// A variant whose first timed launches ([`crate::measure::bench::PROBE_REPS`]) are all
/// slower than this factor times the best median so far is not a contender: it is timed no
/// further. This is the first stage of the run's successive halving (the leaders are then
/// re-timed interleaved in halving stages, `super::confirm`): a few launches for every
/// candidate, the full `--reps` only for those within reach of the best. A contender's
/// fastest launch is at or below its own median, so 5 % still leaves room for noise, while
/// most of a sgemm search's proposals, which lie within 1.5x of each other, are judged on their
/// probe alone.
pub const ADAPTIVE_CUTOFF: f64 = 1.05;

/// At most this many leading variants are re-timed interleaved (the confirm stage), and a
/// re-run times again at most this many of the last run's leaders besides its tie set ...
pub const CONFIRM_TOP: usize = 8;
/// ... and only those within this fraction of the fastest (the runner-up always).
pub const CONFIRM_WITHIN: f64 = 0.10;
/// Leaders whose confirmed medians lie within this fraction of the fastest are tied with it
/// even where the intervals tell them apart: a difference this small moves from run to run
/// (clocks, memory placement, the other tenants of a shared GPU), so ranking on it would
/// change the winner with every run. Noisy leaders widen it (`confirm::tie_band`).
pub const TIE_WITHIN: f64 = 0.015;

/// How long the GPU rests before throttled results are timed again.
pub const REMEASURE_PAUSE: std::time::Duration = std::time::Duration::from_secs(1);

#[cfg(test)]
mod tests {
    use super::*;

    /// `--db`'s default is the default `--out` folder's database, written as one literal
    /// because clap's defaults are string constants.
    #[test]
    fn the_default_database_is_the_default_folders() {
        assert_eq!(
            std::path::Path::new(DEFAULT_DB),
            crate::store::best::best_path(std::path::Path::new(DEFAULT_OUT_DIR))
        );
    }
}
