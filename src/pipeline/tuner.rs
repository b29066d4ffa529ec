//! The pipeline: space → render → compile → verify → time → record. Every configuration
//! ends as a [`Record`] (ok, failed with the reason, or pruned with the reason); a failing
//! variant never stops the run. GPU work runs in worker processes (see [`crate::isolate::worker`]), so
//! a kernel that faults or hangs costs only its own record.

use crate::cuda::compile::{default_cache_dir, Compiler};
use crate::cuda::gpu::{DeviceInfo, Gpu};
use crate::error::{Error, Result};
use crate::isolate::worker::{
    compile_parallel, run_tasks, ArgDesc, BufferDesc, GpuWorker, Isolation, Job, PreLaunch,
    ReferenceKernel, Task, TaskResult, Work,
};
use crate::measure::bench::BenchSettings;
use crate::measure::verify;
use crate::model::shape::Shape;
use crate::search::Budget;
use crate::spec::codegen::Renderer;
use crate::spec::expr::Vars;
use crate::spec::ops::{one_line, BaselineKind, Op, Role};
use crate::spec::space::{self, Candidate, DeviceLimits, LaunchDims};
use crate::store::results::{self, BestRow, Record, RunInfo, Status};
use indicatif::{ProgressBar, ProgressStyle};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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
    /// not support is bad input ([`Op::with_dtype`]).
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
    /// The `tune` executable to run compile and GPU workers from; `None` runs everything in
    /// this process (serial compiles, and a faulting kernel ends the run).
    pub worker_exe: Option<PathBuf>,
    /// Compile worker processes.
    pub jobs: usize,
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
    /// same cache state) instead of replacing it ([`results::upsert_best`]).
    pub keep_best: bool,
    /// Write a row for every configuration a constraint pruned (with the reason) into the run
    /// CSV; off, the CSV holds baselines and the live configurations only. Most of a default
    /// transpose space is pruned at any one shape (6780 of 7776 rows at 8191^2), which is most
    /// of a run CSV's size.
    pub pruned_rows: bool,
    /// `auto` (exhaustive up to [`AUTO_EXHAUSTIVE_MAX`] live configurations, else anneal) or
    /// one of [`crate::search::STRATEGIES`].
    pub strategy: String,
    /// How much a search may measure; `None`: [`DEFAULT_BUDGET`] variants for a search, all
    /// of them for `exhaustive`.
    pub budget: Option<Budget>,
    /// `--shard K/N`: measure only this shard's share of the variants (see `cluster::shard`); a
    /// sharded run never writes best.csv (its winner is partial until `tune merge`).
    pub shard: Option<crate::model::slice::Slice>,
    /// A search (random, anneal, genetic) measures first, for each stored winner of this op in
    /// the run's best.csv, the configuration of this space nearest to it ([`warm_start`]).
    pub warm_start: bool,
}

/// Seconds a GPU task may run beyond its expected time before it is killed (`--watchdog`).
pub const DEFAULT_WATCHDOG_S: f64 = 10.0;

impl Default for TuneOptions {
    /// The CLI's defaults, with work in this process (`worker_exe: None`): a library user
    /// sets `op`, `shape` and, to survive faulting kernels, `worker_exe` to a `tune` binary.
    fn default() -> Self {
        TuneOptions {
            op: "transpose".into(),
            templates: None,
            spec: None,
            template: None,
            shape: String::new(),
            dtype: None,
            params: Vec::new(),
            bench: BenchSettings {
                warmup: 3,
                reps: 30,
                cache: crate::measure::bench::CacheState::Cold,
            },
            out_dir: PathBuf::from("results"),
            compile_only: false,
            arch: None,
            emit: None,
            device: 0,
            cubin_cache: true,
            rtol: None,
            seed: 1,
            worker_exe: None,
            jobs: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            watchdog_s: DEFAULT_WATCHDOG_S,
            resume: false,
            adaptive: true,
            confirm_rounds: 50,
            progress: true,
            keep_best: false,
            pruned_rows: true,
            strategy: "auto".into(),
            budget: None,
            shard: None,
            warm_start: true,
        }
    }
}

/// A variant whose first timed launches are all slower than this factor times the best
/// median so far is not a contender: it is timed no further.
pub const ADAPTIVE_CUTOFF: f64 = 1.5;

/// Wall time of each phase, in seconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct Phases {
    pub setup_s: f64,
    pub compile_s: f64,
    pub verify_s: f64,
    pub timing_s: f64,
    pub total_s: f64,
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct TuneOutcome {
    pub info: Option<RunInfo>,
    pub device: Option<DeviceInfo>,
    pub arch: String,
    pub param_names: Vec<String>,
    pub records: Vec<Record>,
    /// Index into `records` of the fastest verified variant.
    pub best: Option<usize>,
    pub roof_throughput: Option<f64>,
    pub prune_reasons: Vec<(String, usize)>,
    pub compiled: usize,
    pub from_cache: usize,
    pub context_restarts: usize,
    pub csv_path: Option<PathBuf>,
    pub best_path: Option<PathBuf>,
    pub phases: Phases,
    /// How outputs were checked, for the report.
    pub verification: String,
    /// Stopped by Ctrl-C: the CSV holds what was measured, best.csv was not touched.
    pub interrupted: bool,
    /// Results taken from the journal of an earlier run (`--resume`).
    pub reused: usize,
    pub journal_path: Option<PathBuf>,
    /// The interleaved re-timing of the leaders, when it ran.
    pub confidence: Option<Confidence>,
    /// NVML readings taken after every variant; `None` when NVML was not available.
    pub clocks: Option<crate::measure::clocks::ClockSummary>,
    /// Each GPU job's warm-up to a steady clock, in order, with the label of the task whose
    /// launches served as the load (the first is the run's start; later ones follow pauses
    /// such as a search round's compiling). Empty without NVML.
    pub warmups: Vec<(String, crate::measure::clocks::Warmup)>,
    /// The re-timing of results measured while the GPU throttled, when it ran.
    pub remeasured: Option<Remeasured>,
    /// What the search did, when a strategy chose the configurations measured.
    pub search: Option<String>,
}

/// How sure the run is of its winner.
#[derive(Debug, Clone)]
pub struct Confidence {
    pub rounds: usize,
    /// Records (indices) that took part, the winner included.
    pub candidates: Vec<usize>,
    /// Record index of the chosen winner.
    pub winner: usize,
    /// Records statistically tied with the fastest candidate, other than the winner.
    pub tied_with: Vec<usize>,
    /// The fastest other candidate and how much slower it is than the winner.
    pub runner_up: Option<(usize, crate::measure::stats::Comparison)>,
    /// The winner's own noise over the rounds: IQR / median, in percent.
    pub winner_iqr_pct: f64,
}

/// At most this many leading variants are re-timed interleaved ...
pub const CONFIRM_TOP: usize = 5;
/// ... and only those within this fraction of the fastest (the runner-up always).
pub const CONFIRM_WITHIN: f64 = 0.10;

/// Re-times the leading variants interleaved, computes each one's interval against the
/// fastest, and picks the winner: the fastest, unless others are statistically tied with it,
/// in which case the tie rule decides (fewest registers, then the first in the space), so
/// repeated runs pick the same configuration whenever the data cannot tell them apart.
fn confirm(
    job: &Job,
    isolation: Isolation,
    task_record: &HashMap<usize, usize>,
    records: &mut [Record],
    opts: &TuneOptions,
) -> Result<Option<Confidence>> {
    let median = |at: usize| {
        records[at]
            .stats
            .map(|s| s.median_ms)
            .unwrap_or(f64::INFINITY)
    };
    let mut leaders: Vec<(usize, usize)> = task_record
        .iter()
        .filter(|(_, &at)| records[at].kind == "variant" && records[at].status == Status::Ok)
        .map(|(&id, &at)| (id, at))
        .collect();
    leaders.sort_by(|a, b| median(a.1).total_cmp(&median(b.1)).then(a.1.cmp(&b.1)));
    let Some(&(_, first)) = leaders.first() else {
        return Ok(None);
    };
    let limit = median(first) * (1.0 + CONFIRM_WITHIN);
    let picked: Vec<(usize, usize)> = leaders
        .iter()
        .enumerate()
        .filter(|(rank, (_, at))| *rank < 2 || median(*at) <= limit)
        .map(|(_, x)| *x)
        .take(CONFIRM_TOP)
        .collect();
    if picked.len() < 2 {
        return Ok(None);
    }
    let mut cjob = job.clone();
    cjob.tasks = job
        .tasks
        .iter()
        .filter(|t| picked.iter().any(|(id, _)| *id == t.id))
        .cloned()
        .collect();
    cjob.confirm_rounds = opts.confirm_rounds;
    cjob.adaptive_cutoff = None;
    let mut samples: HashMap<usize, Vec<f64>> = HashMap::new();
    let (_, idle) = run_tasks(&cjob, isolation, &mut |r| {
        if r.samples.len() >= 2 {
            samples.insert(r.id, r.samples);
        }
    })?;
    if let Some(w) = idle {
        w.finish();
    }
    let timed: Vec<(usize, Vec<f64>)> = picked
        .iter()
        .filter_map(|(id, at)| samples.remove(id).map(|s| (*at, s)))
        .collect();
    if timed.len() < 2 {
        return Ok(None);
    }
    let seed = opts.seed ^ 0xC0_FFEE;
    let med = |s: &Vec<f64>| crate::measure::stats::median(s);
    let leader = timed
        .iter()
        .min_by(|a, b| med(&a.1).total_cmp(&med(&b.1)))
        .expect("two or more");
    let tied: Vec<usize> = timed
        .iter()
        .filter(|(at, s)| {
            *at == leader.0 || crate::measure::stats::compare(&leader.1, s, 2000, seed).tied()
        })
        .map(|(at, _)| *at)
        .collect();
    // The tie rule: fewest registers, then the configuration that comes first in the space.
    let winner = *tied
        .iter()
        .min_by_key(|&&at| (records[at].registers.unwrap_or(i32::MAX), at))
        .expect("the leader is tied with itself");
    let winner_samples = &timed.iter().find(|(at, _)| *at == winner).expect("timed").1;
    let mut runner_up: Option<(usize, crate::measure::stats::Comparison)> = None;
    for (at, s) in &timed {
        let cmp = crate::measure::stats::compare(winner_samples, s, 2000, seed);
        records[*at].confirm = Some(crate::store::results::Confirmed {
            median_ms: med(s),
            vs_winner_pct: if *at == winner { 0.0 } else { cmp.slower_pct },
            ci_low_pct: if *at == winner { 0.0 } else { cmp.ci_low_pct },
            ci_high_pct: if *at == winner { 0.0 } else { cmp.ci_high_pct },
            tied: tied.contains(at),
            winner: *at == winner,
        });
        if *at != winner
            && runner_up.is_none_or(|(r, _)| {
                med(s)
                    < records[r]
                        .confirm
                        .map(|c| c.median_ms)
                        .unwrap_or(f64::INFINITY)
            })
        {
            runner_up = Some((*at, cmp));
        }
    }
    Ok(Some(Confidence {
        rounds: opts.confirm_rounds,
        candidates: timed.iter().map(|(at, _)| *at).collect(),
        winner,
        tied_with: tied.into_iter().filter(|&at| at != winner).collect(),
        runner_up,
        winner_iqr_pct: crate::measure::stats::rel_iqr_pct(winner_samples),
    }))
}

/// What re-timing the results measured while the GPU throttled did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Remeasured {
    /// Timed results whose first reading was flagged, and all timed results with a reading.
    pub flagged: usize,
    pub readings: usize,
    /// Results timed again ...
    pub retimed: usize,
    /// ... and those whose new reading is flagged too (or that failed to time again): they
    /// keep their first result and its warning.
    pub still_flagged: usize,
}

/// How long the GPU rests before throttled results are timed again.
pub const REMEASURE_PAUSE: Duration = Duration::from_secs(1);

/// Times again, once, the results measured while the GPU throttled or ran far below its
/// steady clock, when they are too many to leave flagged ([`crate::measure::clocks::to_remeasure`]):
/// after [`REMEASURE_PAUSE`], the same tasks go through the same worker path as a second job,
/// and a new result replaces the first only when its own clock reading is clean. `isolation`
/// is called only when there is something to re-time. Returns what it did and the worker it
/// left idle; a failure of the second job is a warning (the first results stand).
fn remeasure_throttled(
    job: &Job,
    all_tasks: &[Task],
    clock_samples: &[(usize, crate::measure::clocks::ClockSample)],
    task_record: &HashMap<usize, usize>,
    records: &mut [Record],
    work: f64,
    isolation: impl FnOnce() -> Result<Isolation>,
) -> (Option<Remeasured>, Option<GpuWorker>) {
    // The steady clock of every reading, as the CSV's flags use; the timed results' readings.
    let all: Vec<crate::measure::clocks::ClockSample> =
        clock_samples.iter().map(|(_, c)| *c).collect();
    let Some(sum) = crate::measure::clocks::summarize(&all) else {
        return (None, None);
    };
    let readings: Vec<(usize, crate::measure::clocks::ClockSample)> = clock_samples
        .iter()
        .filter(|(at, _)| records[*at].status == Status::Ok)
        .copied()
        .collect();
    let again = crate::measure::clocks::to_remeasure(&readings, sum.steady_sm_mhz);
    if again.is_empty() {
        return (None, None);
    }
    let mut rjob = job.clone();
    let wanted: std::collections::HashSet<usize> = again.iter().copied().collect();
    rjob.tasks = all_tasks
        .iter()
        .filter(|t| task_record.get(&t.id).is_some_and(|at| wanted.contains(at)))
        .cloned()
        .collect();
    let mut done = Remeasured {
        flagged: again.len(),
        readings: readings.len(),
        retimed: rjob.tasks.len(),
        still_flagged: rjob.tasks.len(),
    };
    std::thread::sleep(REMEASURE_PAUSE);
    let mut fresh: Vec<(usize, TaskResult)> = Vec::new();
    let run = isolation().and_then(|iso| {
        run_tasks(&rjob, iso, &mut |r| {
            if let Some(&at) = task_record.get(&r.id) {
                fresh.push((at, r));
            }
        })
    });
    let idle = match run {
        Ok((_, idle)) => idle,
        Err(e) => {
            eprintln!(
                "warning: re-measuring {} throttled results failed: {e}",
                done.retimed
            );
            None
        }
    };
    for (at, r) in fresh {
        let clean = r
            .clock
            .is_some_and(|c| !crate::measure::clocks::is_flagged(&c, sum.steady_sm_mhz));
        let first = readings.iter().find(|(i, _)| *i == at).map(|(_, c)| *c);
        let rec = &mut records[at];
        match (r.stats, clean, first) {
            (Some(stats), true, Some(first)) => {
                done.still_flagged -= 1;
                rec.stats = Some(stats);
                rec.throughput = Some(work / (stats.median_ms * 1e-3) / 1e9);
                rec.registers = r.registers.or(rec.registers);
                rec.error = format!(
                    "re-measured: first timed at {} MHz (steady {} MHz), throttle bits {:#x}",
                    first.sm_mhz, sum.steady_sm_mhz, first.throttle_bits
                );
            }
            _ => rec.error.push_str("; re-measured once, still flagged"),
        }
    }
    (Some(done), idle)
}

/// A compiled image on disk, or why there is none (render or compile error text).
type CubinResult = std::result::Result<PathBuf, String>;

/// One unique source after compiling.
#[derive(Clone)]
struct CompiledSource {
    result: CubinResult,
    millis: f64,
    from_cache: bool,
}

/// Compiles every unique source into `dir/sNNNN.cubin`: in parallel worker processes when an
/// executable is known, else serially in this process.
fn compile_all(
    compiler: &Compiler,
    opts: &TuneOptions,
    sources: &[String],
    first: usize,
    dir: &Path,
    cache: Option<&Path>,
) -> Result<Vec<CompiledSource>> {
    let pb = bar(sources.len(), "compile", opts.progress);
    let mut paths = Vec::with_capacity(sources.len());
    for (k, src) in sources.iter().enumerate() {
        let path = dir.join(format!("s{:04}.cu", first + k));
        std::fs::write(&path, src).map_err(|e| Error::io("cannot write", &path, e))?;
        paths.push(path);
    }
    let out = match &opts.worker_exe {
        Some(exe) if sources.len() > 1 && opts.jobs > 1 => {
            // Cache hits are read here: starting worker processes costs more than reading a
            // few hundred small files. Only the misses go to the workers.
            let mut out: Vec<Option<CompiledSource>> = Vec::with_capacity(sources.len());
            let mut misses = Vec::new();
            for (k, (src, path)) in sources.iter().zip(&paths).enumerate() {
                let t = Instant::now();
                let hit =
                    cache.and_then(|dir| crate::cuda::compile::read_cache(dir, &compiler.key(src)));
                match hit {
                    Some(cubin) => {
                        let file = path.with_extension("cubin");
                        std::fs::write(&file, cubin)
                            .map_err(|e| Error::io("cannot write", &file, e))?;
                        let millis = t.elapsed().as_secs_f64() * 1e3;
                        out.push(Some(CompiledSource {
                            result: Ok(file),
                            millis,
                            from_cache: true,
                        }));
                        pb.inc(1);
                    }
                    None => {
                        out.push(None);
                        misses.push(k);
                    }
                }
            }
            if !misses.is_empty() {
                let miss_paths: Vec<PathBuf> = misses.iter().map(|&k| paths[k].clone()).collect();
                let replies =
                    compile_parallel(exe, compiler.arch(), cache, &miss_paths, opts.jobs, &|| {
                        pb.inc(1)
                    })?;
                for (&k, r) in misses.iter().zip(replies) {
                    out[k] = Some(CompiledSource {
                        result: if r.ok {
                            Ok(paths[k].with_extension("cubin"))
                        } else {
                            Err(format!("compile: {}", r.log))
                        },
                        millis: r.millis,
                        from_cache: r.from_cache,
                    });
                }
            }
            out.into_iter()
                .map(|c| c.expect("every source is a hit or a compiled miss"))
                .collect()
        }
        _ => {
            let mut out = Vec::with_capacity(sources.len());
            for (src, path) in sources.iter().zip(&paths) {
                let one = match compiler.compile(src) {
                    Ok(done) => {
                        let cubin = path.with_extension("cubin");
                        std::fs::write(&cubin, &done.cubin)
                            .map_err(|e| Error::io("cannot write", &cubin, e))?;
                        CompiledSource {
                            result: Ok(cubin),
                            millis: done.millis,
                            from_cache: done.from_cache,
                        }
                    }
                    Err(f) => CompiledSource {
                        result: Err(format!("compile: {}", f.log)),
                        millis: f.millis,
                        from_cache: false,
                    },
                };
                out.push(one);
                pb.inc(1);
            }
            out
        }
    };
    pb.finish_and_clear();
    Ok(out)
}

/// The result of rendering and compiling one live candidate.
struct Build {
    candidate: usize,
    cubin: CubinResult,
    compile_ms: f64,
}

fn bar(len: usize, prefix: &'static str, show: bool) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(len as u64);
    pb.set_style(
        ProgressStyle::with_template("{prefix:>9} [{bar:32}] {pos}/{len} {elapsed_precise} {msg}")
            .expect("static template")
            .progress_chars("=> "),
    );
    pb.set_prefix(prefix);
    pb
}

/// The op the options name (a user's spec, or a built-in or `--templates` op), for the
/// element type they name. A `--spec`, `--template` or `--templates` path that does not exist
/// is bad input, said as such before anything reads it.
pub fn load_op(opts: &TuneOptions) -> Result<Op> {
    let missing = |flag: &str, path: &Path, what: &str| {
        Error::Usage(format!("{flag} {}: no such {what}", path.display()))
    };
    if let Some(p) = opts.spec.as_deref().filter(|p| !p.exists()) {
        return Err(missing("--spec", p, "file or folder"));
    }
    if let Some(p) = opts.template.as_deref().filter(|p| !p.is_file()) {
        return Err(missing("--template", p, "file"));
    }
    if let Some(p) = opts.templates.as_deref().filter(|p| !p.is_dir()) {
        return Err(missing("--templates", p, "folder"));
    }
    match &opts.spec {
        Some(spec) => Op::load_spec(spec, opts.template.as_deref()),
        None => Op::load(&opts.op, opts.templates.as_deref()),
    }?
    .with_dtype(opts.dtype.as_deref())
}

/// The shapes of a sweep: `--shape A,B,C` or `--shapes FILE`, all checked against the op
/// before anything is tuned. A `--shapes` file that does not exist is bad input.
pub fn shape_list(opts: &TuneOptions, file: Option<&Path>) -> Result<Vec<String>> {
    if let Some(f) = file.filter(|f| !f.is_file()) {
        return Err(Error::Usage(format!(
            "--shapes {}: no such file",
            f.display()
        )));
    }
    let op = load_op(opts)?;
    let shapes = match file {
        Some(f) => crate::model::shape::read_file(f, &op.spec.dims)?,
        None => crate::model::shape::parse_list(&opts.shape, &op.spec.dims)?,
    };
    Ok(shapes.iter().map(Shape::to_string).collect())
}

/// Checks the settings that do not depend on the op: counts and times that must be positive.
pub fn check_settings(opts: &TuneOptions) -> Result<()> {
    if opts.bench.reps == 0 {
        return Err(Error::Usage("--reps must be at least 1".into()));
    }
    if opts.jobs == 0 {
        return Err(Error::Usage(
            "--jobs must be at least 1 (leave it out for one compile worker per CPU core)".into(),
        ));
    }
    if !(opts.watchdog_s.is_finite() && opts.watchdog_s > 0.0) {
        return Err(Error::Usage(format!(
            "--watchdog must be a positive number of seconds, not {}",
            opts.watchdog_s
        )));
    }
    Ok(())
}

/// Everything about a run's input that holds for every shape, checked once before a sweep
/// starts and again by [`tune`]: the settings, the op (spec, template, dtype), the `--param`
/// overrides and `--arch` (its form, and that this NVRTC compiles for it). Returns the op and
/// the parsed overrides.
pub fn check_inputs(opts: &TuneOptions) -> Result<(Op, Vec<space::ParamOverride>)> {
    check_settings(opts)?;
    let op = load_op(opts)?;
    let overrides = opts
        .params
        .iter()
        .map(|p| space::parse_override(&op, p))
        .collect::<Result<Vec<_>>>()?;
    if let Some(arch) = &opts.arch {
        crate::cuda::compile::check_arch(arch)?;
        if let Some((version, supported)) = nvrtc_archs() {
            if !supported.contains(&arch_number(arch)) {
                return Err(Error::Usage(format!(
                    "invalid --arch {arch}: NVRTC {}.{} compiles for {}",
                    version.0,
                    version.1,
                    arch_list(&supported)
                )));
            }
        }
    }
    Ok((op, overrides))
}

/// `sm_90a` → 90.
fn arch_number(arch: &str) -> i32 {
    arch.trim_start_matches("sm_")
        .trim_end_matches('a')
        .parse()
        .unwrap_or(0)
}

/// `sm_75, sm_80, ...`.
fn arch_list(archs: &[i32]) -> String {
    archs
        .iter()
        .map(|a| format!("sm_{a}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// NVRTC's version and the architectures it compiles for (`[75, 80, ...]`), or `None` when the
/// library cannot be loaded (compiling then fails with its own error, [`Error::NoNvrtc`]).
/// Asked once, so an unsupported architecture is one error instead of one per variant.
fn nvrtc_archs() -> Option<((i32, i32), Vec<i32>)> {
    use cudarc::nvrtc::sys;
    let version = crate::cuda::compile::nvrtc_version().ok()?;
    let mut n: std::ffi::c_int = 0;
    unsafe { sys::nvrtcGetNumSupportedArchs(&mut n) }
        .result()
        .ok()?;
    let mut archs: Vec<std::ffi::c_int> = vec![0; usize::try_from(n).ok()?];
    unsafe { sys::nvrtcGetSupportedArchs(archs.as_mut_ptr()) }
        .result()
        .ok()?;
    Some((version, archs))
}

/// The limits the space is checked against before the device is known. They allow at least
/// what any CUDA GPU so far allows (1024 threads and 48 KB of static shared memory per block;
/// 227 KB of opt-in shared memory, the most of any GPU), so a space they empty is empty on
/// every GPU, and bad input is reported before a GPU is looked for. The GPU's own limits
/// may prune more later.
const CHECK_LIMITS: DeviceLimits = DeviceLimits::SM90_DEFAULT;

/// The configurations of the space at `limits`; none left is bad input, reported with the
/// `--param` values given and the leading prune reasons (see [`crate::error::empty_space_summary`]).
fn live_space(
    op: &Op,
    shape: &Shape,
    limits: &DeviceLimits,
    overrides: &[space::ParamOverride],
    params: &[String],
) -> Result<Vec<Candidate>> {
    let candidates = space::enumerate(op, shape, limits, overrides)?;
    if candidates.iter().all(|c| c.pruned.is_some()) {
        return Err(Error::EmptySpace(crate::error::empty_space_summary(
            candidates.len(),
            params,
            &space::prune_summary(&candidates),
        )));
    }
    Ok(candidates)
}

/// Runs the whole pipeline for one op and shape.
pub fn tune(opts: &TuneOptions) -> Result<TuneOutcome> {
    let t0 = Instant::now();
    // Everything the user typed is checked before any GPU or compiler is touched, the space
    // included: parameters that leave no configuration are bad input with or without a GPU.
    let (op, overrides) = check_inputs(opts)?;
    let shape = Shape::parse(&opts.shape, &op.spec.dims)?;
    let checked = live_space(&op, &shape, &CHECK_LIMITS, &overrides, &opts.params)?;
    let renderer = Renderer::new(&op)?;

    // The device: described by the first GPU worker (started now, so the driver's start
    // overlaps compiling; this process then needs no CUDA context), or opened here when
    // running in-process.
    let (device, free_mem, first_worker, local_gpu) = if opts.compile_only {
        (None, 0, None, None)
    } else if let Some(exe) = &opts.worker_exe {
        let (w, info, free) = GpuWorker::start(exe, opts.device)?;
        (Some(info), free, Some(w), None)
    } else {
        let g = Gpu::open(opts.device)?;
        let free = g.free_mem()? as u64;
        (Some(g.info.clone()), free, None, Some(g))
    };
    let limits = device
        .as_ref()
        .map(|d| d.limits)
        .unwrap_or(DeviceLimits::SM90_DEFAULT);
    let arch = match (&opts.arch, &device) {
        (Some(a), _) => a.clone(),
        (None, Some(g)) => g.arch(),
        (None, None) => "sm_90".to_string(),
    };
    // The GPU's own architecture, which NVRTC may be too old to know: one error, not one
    // per variant (an --arch given was checked above, as input).
    if opts.arch.is_none() {
        if let Some((version, supported)) = nvrtc_archs() {
            if !supported.contains(&arch_number(&arch)) {
                return Err(Error::NoNvrtc(format!(
                    "NVRTC {}.{} cannot compile for this GPU's {arch} (it compiles for {}); \
                     install a newer CUDA toolkit",
                    version.0,
                    version.1,
                    arch_list(&supported)
                )));
            }
        }
    }
    let candidates = if limits == CHECK_LIMITS {
        checked
    } else {
        live_space(&op, &shape, &limits, &overrides, &opts.params)?
    };
    let prune_reasons = space::prune_summary(&candidates);
    let live: Vec<usize> = candidates
        .iter()
        .filter(|c| c.pruned.is_none())
        .map(|c| c.index)
        .collect();
    // --shard K/N: this shard's share of the live variants; the others get no row here.
    let live = crate::model::slice::owned(live, opts.shard.as_ref());
    let shown = |c: &&Candidate| c.pruned.is_some() || live.binary_search(&c.index).is_ok();
    let base = space::base_vars(&op, &shape, &limits);
    let layout = BufferLayout::new(&op, &base)?;
    if let Some(d) = &device {
        layout.check_memory(d, free_mem)?;
    }
    let cache_dir = if opts.cubin_cache {
        default_cache_dir()
    } else {
        None
    };
    let compiler = Compiler::new(&arch, cache_dir.clone())?;
    let setup_s = t0.elapsed().as_secs_f64();

    // Which live candidates are measured: every one (exhaustive), or those a search strategy
    // proposes, batch by batch, within its budget (see [`Search`]).
    let mut search = if opts.compile_only {
        None
    } else {
        let gpu = device.as_ref().map(|d| d.name.as_str());
        // Read only when a search will use it, and quietly: a damaged database is reported
        // where the run writes to it; here it only means fewer or no stored winners.
        let seeds = || {
            let stored = results::read_best_checked(&opts.out_dir.join("best.csv"))
                .map(|f| f.rows)
                .unwrap_or_default();
            warm_start(&op, &shape, gpu, &candidates, &live, &stored)
        };
        Search::new(opts, &op, &shape, &candidates, &live, seeds)?
    };

    // Render the first round's candidates; identical sources are compiled once.
    let t_compile = Instant::now();
    let work_dir = tempfile::Builder::new()
        .prefix("cuda-autotune-")
        .tempdir()
        .map_err(|e| {
            Error::io(
                "cannot create a temporary folder in",
                std::env::temp_dir(),
                e,
            )
        })?;
    let mut prep = Prepared::default();
    let first_round = match &mut search {
        None => live.clone(),
        Some(s) => s.ask(),
    };
    let env = BuildEnv {
        candidates: &candidates,
        renderer: &renderer,
        compiler: &compiler,
        opts,
        op: &op,
        dir: work_dir.path(),
        cache: cache_dir.as_deref(),
    };
    let builds = prep.build(&env, &first_round)?;
    let compile_s = t_compile.elapsed().as_secs_f64();

    let param_names: Vec<String> = op.spec.params.iter().map(|p| p.name.clone()).collect();
    let mut outcome = TuneOutcome {
        info: None,
        device: device.clone(),
        arch: arch.clone(),
        param_names,
        records: Vec::new(),
        best: None,
        roof_throughput: None,
        prune_reasons,
        compiled: prep.compiled.len(),
        from_cache: prep.cache_hits(),
        context_restarts: 0,
        csv_path: None,
        best_path: None,
        phases: Phases {
            setup_s,
            compile_s,
            ..Phases::default()
        },
        verification: match (op.spec.compare, &op.spec.reference_kernel) {
            (crate::spec::ops::Compare::Exact, _) => format!("exact comparison with the CPU '{}' reference", op.spec.reference),
            (_, Some(_)) => format!(
                "relative error <= {:.0e} against a float64 GPU reference that is spot-checked against float64 CPU rows",
                opts.rtol.or(op.spec.rtol).unwrap_or(0.0)
            ),
            (_, None) => format!(
                "relative error <= {:.0e} against the float64 CPU reference",
                opts.rtol.or(op.spec.rtol).unwrap_or(0.0)
            ),
        },
        interrupted: false,
        reused: 0,
        journal_path: None,
        confidence: None,
        clocks: None,
        warmups: Vec::new(),
        remeasured: None,
        search: None,
    };
    let Some(dev) = device else {
        outcome.records = candidates
            .iter()
            .filter(shown)
            .map(|c| compile_only_record(c, &builds))
            .collect();
        outcome.phases.total_s = t0.elapsed().as_secs_f64();
        return Ok(outcome);
    };

    let (version_major, version_minor) = compiler.version();
    let (unit_expr, unit) = op.spec.metric.amount();
    let work = base.eval_int(unit_expr, &format!("{} metric", op.at(unit_expr)))? as f64;
    let mut info = RunInfo {
        op: op.name().to_string(),
        shape: shape.to_string(),
        dtype: op.dtype.name().to_string(),
        gpu: dev.name.clone(),
        compute_capability: format!("{}.{}", dev.compute_capability.0, dev.compute_capability.1),
        cache: opts.bench.cache.as_str().to_string(),
        reps: opts.bench.reps,
        unit: unit.to_string(),
        roof: String::new(),
        driver: dev.driver_string(),
        nvrtc: format!("{version_major}.{version_minor}"),
    };
    // The workers open their own contexts; this one only read the device's properties.

    // The job: baselines first (ids 0..), then the compiled variants (ids from 10000 +
    // candidate index), all sharing the inputs and the expected output.
    let checker_path = work_dir.path().join("checker.cubin");
    let checker = compiler
        .compile(verify::COMPARE_SOURCE)
        .map_err(|f| Error::Cuda {
            during: "compiling the comparison kernel".into(),
            why: one_line(&f.log),
        })?;
    std::fs::write(&checker_path, &checker.cubin)
        .map_err(|e| Error::io("cannot write", &checker_path, e))?;
    let mut records: Vec<Record> = Vec::new();
    let mut tasks: Vec<Task> = Vec::new();
    let mut task_record: HashMap<usize, usize> = HashMap::new();
    // What identifies a task's result across runs (for the journal): the compiled source and
    // its launch geometry; for baselines their name and source.
    let mut task_key: HashMap<usize, String> = HashMap::new();
    let baseline_source = renderer.render_baselines(&op)?;
    let baseline_key = baseline_source
        .as_deref()
        .map(|s| compiler.key(s))
        .unwrap_or_default();
    let baseline_cubin = match baseline_source {
        Some(src) => {
            let done = compiler.compile(&src).map_err(|f| Error::Template {
                template: op
                    .spec
                    .baseline_source
                    .as_ref()
                    .map(|b| b.template.clone())
                    .unwrap_or_default(),
                why: format!("baseline kernels do not compile: {}", one_line(&f.log)),
            })?;
            let path = work_dir.path().join("baselines.cubin");
            std::fs::write(&path, &done.cubin).map_err(|e| Error::io("cannot write", &path, e))?;
            Some(path)
        }
        None => None,
    };
    for (i, b) in op.spec.baselines.iter().enumerate() {
        let mut rec = Record::new("baseline", &b.name, vec![]);
        let work = match b.kind {
            BaselineKind::Memcpy => Ok(Work::Memcpy {
                from: b.from.clone().unwrap_or_default(),
                to: b.to.clone().unwrap_or_default(),
            }),
            BaselineKind::CublasSgemm => {
                let ops = b.operands.clone().unwrap_or_default();
                let dim = |i: usize| i32::try_from(shape.dims[i]).unwrap_or(i32::MAX);
                Ok(Work::Sgemm {
                    a: ops[0].clone(),
                    b: ops[1].clone(),
                    c: ops[2].clone(),
                    m: dim(0),
                    n: dim(1),
                    k: dim(2),
                })
            }
            BaselineKind::Kernel => {
                baseline_launch(&base, b, &limits, &op)?.map(|launch| Work::Kernel {
                    cubin: baseline_cubin.clone().unwrap_or_default(),
                    kernel: b.kernel.clone().unwrap_or_default(),
                    launch,
                    before: Vec::new(),
                })
            }
        };
        match work {
            Ok(work) => {
                task_record.insert(i, records.len());
                task_key.insert(i, format!("baseline {} {baseline_key}", b.name));
                tasks.push(Task {
                    id: i,
                    work,
                    expect: b.expect.clone(),
                    contender: false,
                });
                rec.status = Status::Failed;
                rec.error = "not run".into();
            }
            Err(why) => {
                rec.status = Status::Failed;
                rec.error = why;
            }
        }
        records.push(rec);
    }
    let n_baselines = records.len();
    let reference_kernel = match (
        &op.spec.reference_kernel,
        &op.spec.reference_launch,
        &baseline_cubin,
    ) {
        (Some(kernel), Some(launch), Some(cubin)) => {
            let launch = space::eval_launch(
                &base,
                &launch.block,
                &launch.grid,
                launch.shared.as_deref(),
                &limits,
                &format!("{} reference_launch", op.origin),
            )?
            .map_err(|why| Error::Spec {
                file: op.origin.clone(),
                why: format!("reference_launch: {why}"),
            })?;
            Some(ReferenceKernel {
                cubin: cubin.clone(),
                kernel: kernel.clone(),
                launch,
                before: Vec::new(),
            })
        }
        _ => None,
    };
    // A user's op may name a configuration whose output is the answer: it is rendered and
    // compiled on its own (it may lie outside a --param-narrowed space) and runs first.
    let reference_kernel = match &op.spec.reference_config {
        None => reference_kernel,
        Some(cfg) => Some(reference_config_kernel(
            &op,
            &shape,
            &limits,
            cfg,
            &renderer,
            &compiler,
            work_dir.path(),
        )?),
    };
    // A record for every configuration: pruned ones with their reason, live ones "skipped"
    // until a round submits them (a search leaves the ones it never proposed skipped).
    for c in candidates.iter().filter(shown) {
        let params = c
            .config
            .values
            .iter()
            .map(|(k, v)| (k.clone(), v.to_string()))
            .collect();
        let mut rec = Record::new("variant", &format!("v{:04}", c.index), params);
        rec.error = c.pruned.clone().unwrap_or_default();
        if c.pruned.is_none() {
            rec.status = Status::Skipped;
            rec.error = search
                .as_ref()
                .map(Search::skipped_reason)
                .unwrap_or_default();
        }
        task_record.insert(10_000 + c.index, records.len());
        records.push(rec);
    }
    for build in &builds {
        if let Some(task) = prep.task(&env, build, &mut records, &task_record, &mut task_key) {
            tasks.push(task);
        }
    }
    let job = Job {
        device: opts.device,
        bench: opts.bench,
        seed: opts.seed,
        dtype: op.dtype,
        reference: op.spec.reference.clone(),
        reference_kernel,
        shape: shape.dims.clone(),
        buffers: layout
            .buffers
            .iter()
            .map(|(n, r, len, fill)| BufferDesc {
                name: n.clone(),
                input: *r == Role::Input,
                len: *len,
                fill: *fill,
            })
            .collect(),
        args: layout
            .args
            .iter()
            .map(|a| match a {
                ArgSpec::Buffer(n) => ArgDesc::Buffer(n.clone()),
                ArgSpec::Int(v) => ArgDesc::Int(*v),
            })
            .collect(),
        output: layout.output().0.to_string(),
        compare: op.spec.compare,
        rtol: opts.rtol.or(op.spec.rtol).unwrap_or(0.0),
        checker_cubin: checker_path,
        adaptive_cutoff: opts.adaptive.then_some(ADAPTIVE_CUTOFF),
        confirm_rounds: 0,
        tasks,
    };
    let watchdog = Duration::from_secs_f64(opts.watchdog_s.max(0.1));
    let mut local_gpu = local_gpu;
    let mut idle_worker = first_worker;
    // Where the next round runs: the worker left idle by the last round, a fresh one, or this
    // process's GPU (reopened after the first round: a round consumes it).
    let mut isolation = |idle: Option<GpuWorker>| -> Result<Isolation> {
        Ok(match (&opts.worker_exe, local_gpu.take()) {
            (Some(exe), _) => Isolation::Subprocess {
                exe: exe.clone(),
                watchdog,
                first: idle,
            },
            (None, Some(gpu)) => Isolation::InProcess(gpu),
            (None, None) => Isolation::InProcess(Gpu::open(opts.device)?),
        })
    };

    // The journal: every finished task is appended as it finishes; --resume reuses a matching
    // journal's results instead of measuring again.
    let journal_path = results::Journal::path_for(&opts.out_dir, &info);
    let header = serde_json::json!({
        "tool": env!("CARGO_PKG_VERSION"), "op": info.op, "shape": info.shape, "gpu": info.gpu,
        "cache": info.cache, "reps": opts.bench.reps, "warmup": opts.bench.warmup, "seed": opts.seed,
        "rtol": job.rtol, "device_uuid": outcome.device.as_ref().map(|d| d.uuid.clone()),
    });
    let (mut journal, earlier) =
        results::Journal::open::<TaskResult>(&journal_path, &header, opts.resume)?;
    let earlier: HashMap<String, TaskResult> = earlier.into_iter().collect();
    let mut job = job;
    let mut all_tasks: Vec<Task> = Vec::new();
    outcome.journal_path = Some(journal_path);

    let pb = bar(
        job.tasks.len() + search.as_ref().map_or(0, Search::remaining),
        "tune",
        opts.progress,
    );
    let mut best_ms = f64::INFINITY;
    let mut phases = outcome.phases;
    let mut journal_error = None;
    let mut clock_samples: Vec<(usize, crate::measure::clocks::ClockSample)> = Vec::new();
    let mut fatal = None;
    // One round per batch of a search; a single round when every live candidate is measured.
    loop {
        all_tasks.extend(job.tasks.iter().cloned());
        let round_ids: Vec<usize> = job.tasks.iter().map(|t| t.id).collect();
        let mut reused = Vec::new();
        job.tasks
            .retain(|t| match task_key.get(&t.id).and_then(|k| earlier.get(k)) {
                Some(r) => {
                    reused.push(TaskResult {
                        id: t.id,
                        ..r.clone()
                    });
                    false
                }
                None => true,
            });
        outcome.reused += reused.len();
        let mut handle = |r: TaskResult, fresh: bool| {
            let Some(&at) = task_record.get(&r.id) else {
                return;
            };
            if fresh {
                if let Some(key) = task_key.get(&r.id) {
                    if let Err(e) = journal.append(key, &r) {
                        journal_error.get_or_insert(e);
                    }
                }
            }
            if let (Some(c), true) = (r.clock, fresh) {
                clock_samples.push((at, c));
            }
            if let (Some(w), true) = (r.warmup, fresh) {
                outcome.warmups.push((records[at].label(), w));
            }
            let rec = &mut records[at];
            rec.registers = r.registers.or(rec.registers);
            phases.verify_s += r.verify_s;
            phases.timing_s += r.timing_s;
            match r.stats {
                Some(stats) => {
                    rec.status = Status::Ok;
                    rec.error.clear();
                    rec.throughput = Some(work / (stats.median_ms * 1e-3) / 1e9);
                    rec.stats = Some(stats);
                    if rec.kind == "variant" && stats.median_ms < best_ms {
                        best_ms = stats.median_ms;
                        pb.set_message(format!(
                            "best {:.1} {unit} ({})",
                            rec.throughput.unwrap_or_default(),
                            rec.label()
                        ));
                    }
                }
                None => {
                    rec.status = Status::Failed;
                    rec.error = one_line(&r.error);
                }
            }
            pb.inc(1);
        };
        for r in reused {
            handle(r, false);
        }
        let run = if job.tasks.is_empty() {
            Ok((0, idle_worker.take()))
        } else {
            isolation(idle_worker.take())
                .and_then(|iso| run_tasks(&job, iso, &mut |r| handle(r, true)))
        };
        match run {
            Ok((restarts, idle)) => {
                outcome.context_restarts += restarts;
                idle_worker = idle;
            }
            Err(e) => {
                fatal = Some(e);
                break;
            }
        }
        let Some(s) = search.as_mut() else { break };
        // Tell the strategy what this round measured, then ask for the next round.
        for id in round_ids.iter().filter(|&&id| id >= 10_000) {
            let rec = &records[task_record[id]];
            s.tell(
                id - 10_000,
                rec.stats
                    .filter(|_| rec.status == Status::Ok)
                    .map(|st| st.median_ms),
            );
        }
        if crate::isolate::worker::interrupted() {
            break;
        }
        let next = s.ask();
        if next.is_empty() {
            break;
        }
        let t = Instant::now();
        let builds = prep.build(&env, &next)?;
        phases.compile_s += t.elapsed().as_secs_f64();
        job.tasks = builds
            .iter()
            .filter_map(|b| prep.task(&env, b, &mut records, &task_record, &mut task_key))
            .collect();
        pb.set_length(pb.position() + job.tasks.len() as u64 + s.remaining() as u64);
    }
    pb.finish_and_clear();
    outcome.compiled = prep.compiled.len();
    outcome.from_cache = prep.cache_hits();
    outcome.search = search.as_ref().map(Search::summary);
    // Results measured while the GPU throttled or ran far below its steady clock are flagged.
    let readings: Vec<crate::measure::clocks::ClockSample> =
        clock_samples.iter().map(|(_, c)| *c).collect();
    outcome.clocks = crate::measure::clocks::summarize(&readings);
    if let Some(sum) = outcome.clocks {
        for (at, c) in &clock_samples {
            let rec = &mut records[*at];
            if rec.status == Status::Ok && crate::measure::clocks::is_flagged(c, sum.steady_sm_mhz)
            {
                rec.error = format!(
                    "warning: measured while the GPU ran at {} MHz (steady {} MHz), throttle bits {:#x}",
                    c.sm_mhz, sum.steady_sm_mhz, c.throttle_bits
                );
            }
        }
    }
    // Too many of them: rest the GPU, then time the flagged ones again once.
    if fatal.is_none() && !crate::isolate::worker::interrupted() {
        let (done, idle) = remeasure_throttled(
            &job,
            &all_tasks,
            &clock_samples,
            &task_record,
            &mut records,
            work,
            || isolation(idle_worker.take()),
        );
        outcome.remeasured = done;
        idle_worker = idle.or(idle_worker);
    }
    if let Some(e) = journal_error {
        eprintln!("warning: the journal could not be written, so this run cannot be resumed: {e}");
    }
    outcome.interrupted = crate::isolate::worker::interrupted();
    if outcome.interrupted {
        for rec in records
            .iter_mut()
            .filter(|r| r.status == Status::Failed && r.error == "not run")
        {
            rec.error = "not run: interrupted (Ctrl-C)".into();
        }
    }
    if let Some(e) = &fatal {
        for rec in records
            .iter_mut()
            .filter(|r| r.status == Status::Failed && r.error == "not run")
        {
            rec.error = format!("not run: {e}");
        }
    }

    // How sure are we? Re-time the leaders interleaved and pick the winner with intervals.
    if opts.confirm_rounds > 0 && fatal.is_none() && !outcome.interrupted {
        let isolation = match &opts.worker_exe {
            Some(exe) => Some(Isolation::Subprocess {
                exe: exe.clone(),
                watchdog,
                first: idle_worker,
            }),
            None => Gpu::open(opts.device).ok().map(Isolation::InProcess),
        };
        if let Some(isolation) = isolation {
            let mut cjob = job.clone();
            cjob.tasks = all_tasks;
            outcome.confidence = confirm(&cjob, isolation, &task_record, &mut records, opts)?;
        }
    } else if let Some(w) = idle_worker {
        w.finish();
    }

    rank(&op, &mut info, &mut outcome, records, n_baselines, work);
    // The source hash of a record: the first word of its task's journal key.
    let source_hash = |i: usize| {
        task_record
            .iter()
            .find(|(_, &at)| at == i)
            .and_then(|(id, _)| task_key.get(id))
            .and_then(|k| k.split_whitespace().next())
            .unwrap_or_default()
            .to_string()
    };
    persist(opts, &info, &mut outcome, &source_hash)?;
    outcome.info = Some(info);
    phases.total_s = t0.elapsed().as_secs_f64();
    outcome.phases = phases;
    match fatal {
        Some(e) => Err(e),
        None => Ok(outcome),
    }
}

/// The roof (the fastest verified baseline marked `roof`) and every record's fraction of it,
/// then the winner: the confirmed one, else the fastest verified variant. The records move
/// into `outcome`.
fn rank(
    op: &Op,
    info: &mut RunInfo,
    outcome: &mut TuneOutcome,
    mut records: Vec<Record>,
    n_baselines: usize,
    work: f64,
) {
    let roof = op
        .spec
        .baselines
        .iter()
        .zip(&records[..n_baselines])
        .filter(|(b, r)| b.roof && r.status == Status::Ok)
        .filter_map(|(b, r)| r.stats.map(|s| (b.name.clone(), s.median_ms)))
        .min_by(|a, b| a.1.total_cmp(&b.1));
    if let Some((name, ms)) = &roof {
        info.roof = name.clone();
        outcome.roof_throughput = Some(work / (ms * 1e-3) / 1e9);
        for r in &mut records {
            r.frac_of_roof = r
                .stats
                .filter(|_| r.status == Status::Ok)
                .map(|s| ms / s.median_ms);
        }
    }
    let fastest = records
        .iter()
        .enumerate()
        .filter(|(_, r)| r.kind == "variant" && r.status == Status::Ok)
        .min_by(|a, b| {
            let (x, y) = (
                a.1.stats.map(|s| s.median_ms),
                b.1.stats.map(|s| s.median_ms),
            );
            x.unwrap_or(f64::INFINITY)
                .total_cmp(&y.unwrap_or(f64::INFINITY))
        })
        .map(|(i, _)| i);
    outcome.best = outcome.confidence.as_ref().map(|c| c.winner).or(fastest);
    outcome.records = records;
}

/// Writes the run CSV (always) and this run's row of best.csv (when a variant won, the run
/// was not interrupted and is not a shard's share), and notes both paths in `outcome`.
/// `source_hash` gives a record's source hash (for best.csv).
fn persist(
    opts: &TuneOptions,
    info: &RunInfo,
    outcome: &mut TuneOutcome,
    source_hash: &dyn Fn(usize) -> String,
) -> Result<()> {
    // Results: the run CSV always, best.csv when something verified.
    let csv_path = results::run_csv_path(&opts.out_dir, info);
    let kept: Vec<Record>;
    let rows: &[Record] = if opts.pruned_rows {
        &outcome.records
    } else {
        kept = outcome
            .records
            .iter()
            .filter(|r| r.status != Status::Pruned)
            .cloned()
            .collect();
        &kept
    };
    results::write_atomic(
        &csv_path,
        &results::run_csv(info, &outcome.param_names, rows)?,
    )?;
    outcome.csv_path = Some(csv_path);
    if let Some(i) = outcome
        .best
        .filter(|_| !outcome.interrupted && opts.shard.is_none())
    {
        let r = &outcome.records[i];
        let runner_up = outcome.confidence.as_ref().and_then(|c| c.runner_up);
        let best_path = opts.out_dir.join("best.csv");
        let upserted = results::upsert_best(
            &best_path,
            BestRow {
                op: info.op.clone(),
                shape: info.shape.clone(),
                dtype: info.dtype.clone(),
                gpu: info.gpu.clone(),
                compute_capability: info.compute_capability.clone(),
                params: params_text(r),
                median_ms: r.stats.map(|s| s.median_ms).unwrap_or_default(),
                throughput: r.throughput.unwrap_or_default(),
                unit: info.unit.clone(),
                frac_of_roof: r.frac_of_roof,
                roof: info.roof.clone(),
                cache: info.cache.clone(),
                reps: info.reps,
                tool_version: env!("CARGO_PKG_VERSION").to_string(),
                driver: info.driver.clone(),
                nvrtc: info.nvrtc.clone(),
                tuned_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now())
                    .to_string(),
                gpu_uuid: outcome
                    .device
                    .as_ref()
                    .map(|d| d.uuid.clone())
                    .unwrap_or_default(),
                source_hash: source_hash(i),
                runner_up: runner_up
                    .map(|(at, _)| params_text(&outcome.records[at]))
                    .unwrap_or_default(),
                margin_pct: runner_up.map(|(_, c)| c.slower_pct),
                margin_ci_low_pct: runner_up.map(|(_, c)| c.ci_low_pct),
                margin_ci_high_pct: runner_up.map(|(_, c)| c.ci_high_pct),
                tie: outcome
                    .confidence
                    .as_ref()
                    .is_some_and(|c| !c.tied_with.is_empty()),
            },
            opts.keep_best,
        )?;
        if let results::Upserted::KeptStored { stored_median_ms } = upserted {
            eprintln!(
                "{}: kept the stored row, faster ({stored_median_ms:.5} ms) than this run's \
                 best (--keep-best)",
                best_path.display()
            );
        }
        outcome.best_path = Some(best_path);
    }
    Ok(())
}

/// With `--strategy auto`, spaces up to this many live configurations are timed whole;
/// larger ones are searched.
pub const AUTO_EXHAUSTIVE_MAX: usize = 1024;
/// The variant budget of a search when none is given.
pub const DEFAULT_BUDGET: usize = 256;
/// Configurations per search round: enough to keep 16 compile workers busy while the
/// strategy still learns from every round.
pub const SEARCH_BATCH: usize = 16;

/// Live candidates (indices) to measure before a search: for each stored winner of `op` in
/// `stored` (a best.csv) of the same element type, measured on this GPU (`gpu`, or any
/// without one), the live configuration that differs from it in the fewest parameters, at
/// most [`WARM_START_NEAR`] (parameters added since the row was stored take their `missing`
/// values); this shape's own row first, then the others in the file's order.
///
/// Why: the anneal measures a few hundred of thousands of configurations and can miss the
/// winner a previous run, or a neighbouring shape, found, so a re-run could come out slower
/// than what is stored. Measured first, this shape's own stored winner (when it is a
/// configuration of the space) bounds the result from below, up to timing noise, and the
/// others give the search good starts. Nearest, not only equal: a winner at 1024^3 (REPACK=0)
/// is a configuration at 1023x1025x1027 only with REPACK=1, and a row stored with a choice
/// outside the default values (ORDER=row) is worth its tile in the default space. The seeds
/// depend on what best.csv holds, so two runs with the same `--seed` propose the same only
/// over the same database.
pub fn warm_start(
    op: &Op,
    shape: &Shape,
    gpu: Option<&str>,
    candidates: &[Candidate],
    live: &[usize],
    stored: &[BestRow],
) -> Vec<usize> {
    let here = shape.to_string();
    let mut rows: Vec<&BestRow> = stored
        .iter()
        .filter(|r| {
            r.op == op.name() && r.dtype == op.dtype.name() && gpu.is_none_or(|g| r.gpu == g)
        })
        .collect();
    rows.sort_by_key(|r| r.shape != here);
    let mut seeds = Vec::new();
    for r in rows {
        let given = results::parse_params(&r.params);
        if !op
            .spec
            .params
            .iter()
            .any(|p| given.iter().any(|(n, _)| *n == p.name))
        {
            continue; // names none of this op's parameters: no configuration to stand for
        }
        let pairs = results::stored_params(op, &r.params);
        let wanted: HashMap<&str, crate::spec::expr::Value> = pairs
            .iter()
            .map(|(n, v)| (n.as_str(), crate::spec::expr::Value::parse(v)))
            .collect();
        // Fewest differing parameters; among those, the one whose first difference comes
        // latest in the spec's order (the tile before REPACK, ORDER or CSTORE), then the first.
        let nearest = live
            .iter()
            .map(|&i| {
                let values = &candidates[i].config.values;
                let differ: Vec<usize> = (0..values.len())
                    .filter(|&k| wanted.get(values[k].0.as_str()) != Some(&values[k].1))
                    .collect();
                let first = differ.first().copied().unwrap_or(usize::MAX);
                (differ.len(), std::cmp::Reverse(first), i)
            })
            .min();
        if let Some((differ, _, i)) = nearest {
            if differ <= WARM_START_NEAR && !seeds.contains(&i) {
                seeds.push(i);
            }
        }
    }
    seeds
}

/// How many parameters a warm-start configuration may differ in from the stored winner it
/// stands for ([`warm_start`]).
pub const WARM_START_NEAR: usize = 2;

/// A search over the live configurations: asks the strategy for a round at a time and keeps
/// the budget (variants, or seconds since the search started).
struct Search {
    strategy: Box<dyn crate::search::Strategy>,
    /// Search points measured before the strategy's own proposals (the warm start).
    first: std::collections::VecDeque<usize>,
    name: String,
    budget: Budget,
    /// Search point → candidate index, and back.
    candidate_of: Vec<usize>,
    point_of: HashMap<usize, usize>,
    asked: usize,
    live: usize,
    started: Instant,
}

impl Search {
    /// `None` when every live configuration is to be measured.
    fn new(
        opts: &TuneOptions,
        op: &Op,
        shape: &Shape,
        candidates: &[Candidate],
        live: &[usize],
        seeds: impl FnOnce() -> Vec<usize>,
    ) -> Result<Option<Search>> {
        // The space is the live configurations this run owns (all, or a shard's share).
        let (space, candidate_of) = crate::search::SearchSpace::from_candidates(candidates, live)?;
        let live = live.len();
        let name = match (opts.strategy.as_str(), opts.budget) {
            ("auto", None) if live <= AUTO_EXHAUSTIVE_MAX => return Ok(None),
            ("auto", _) => "anneal",
            ("exhaustive", None) => return Ok(None),
            (other, _) => other,
        };
        let budget = opts.budget.unwrap_or(Budget::Variants(DEFAULT_BUDGET));
        let hint = match budget {
            Budget::Variants(n) => Some(n),
            Budget::Seconds(_) => None,
        };
        let mut strategy = crate::search::strategy(name, &space, opts.seed, hint)?;
        let point_of: HashMap<usize, usize> = candidate_of
            .iter()
            .enumerate()
            .map(|(p, &c)| (c, p))
            .collect();
        // At most a quarter of a variant budget (at least one) goes to stored winners, the rest
        // to the search; with a time budget, as many as a quarter of the default budget. An
        // exhaustive sweep with a budget stays the in-order reference: no warm start.
        let room = match budget {
            Budget::Variants(n) => (n / 4).max(1),
            Budget::Seconds(_) => DEFAULT_BUDGET / 4,
        };
        let seeds = if opts.warm_start && name != "exhaustive" {
            seeds()
        } else {
            Vec::new()
        };
        let first: std::collections::VecDeque<usize> = seeds
            .iter()
            .filter_map(|c| point_of.get(c).copied())
            .filter(|&p| strategy.take(p))
            .take(room)
            .collect();
        let search = Search {
            strategy,
            first,
            name: name.to_string(),
            budget,
            candidate_of,
            point_of,
            asked: 0,
            live,
            started: Instant::now(),
        };
        let warm = match search.first.len() {
            0 => String::new(),
            n => format!(", {n} stored winner(s) from best.csv first (--no-warm-start: none)"),
        };
        eprintln!(
            "{} {shape}: {live} valid configurations; searching with {} ({}{warm}); \
             --strategy exhaustive times them all",
            op.name(),
            search.name,
            search.budget_text()
        );
        Ok(Some(search))
    }

    fn budget_text(&self) -> String {
        match self.budget {
            Budget::Variants(n) => format!("budget {n} variants"),
            Budget::Seconds(s) => format!("budget {s:.0} s"),
        }
    }

    /// The next round's candidate indices; empty when the budget or the strategy is spent.
    fn ask(&mut self) -> Vec<usize> {
        let n = match self.budget {
            Budget::Variants(b) => b.saturating_sub(self.asked).min(SEARCH_BATCH),
            Budget::Seconds(s) if self.started.elapsed().as_secs_f64() >= s => 0,
            Budget::Seconds(_) => SEARCH_BATCH,
        };
        if n == 0 {
            return Vec::new();
        }
        let mut points: Vec<usize> = (0..n).map_while(|_| self.first.pop_front()).collect();
        if points.len() < n {
            points.extend(self.strategy.ask(n - points.len()));
        }
        points.truncate(n);
        self.asked += points.len();
        points.iter().map(|&p| self.candidate_of[p]).collect()
    }

    fn tell(&mut self, candidate: usize, cost: Option<f64>) {
        if let Some(&p) = self.point_of.get(&candidate) {
            self.strategy.tell(p, cost);
        }
    }

    /// Variants still to come, as far as the budget says (for the progress bar).
    fn remaining(&self) -> usize {
        match self.budget {
            Budget::Variants(b) => b.min(self.live).saturating_sub(self.asked),
            Budget::Seconds(_) => 0,
        }
    }

    fn skipped_reason(&self) -> String {
        format!(
            "not measured: --strategy {} ({}) did not propose it",
            self.name,
            self.budget_text()
        )
    }

    fn summary(&self) -> String {
        format!(
            "{}: {} of {} valid configurations measured ({}, {:.1} s)",
            self.name,
            self.asked,
            self.live,
            self.budget_text(),
            self.started.elapsed().as_secs_f64()
        )
    }
}

/// What building a round needs, bundled so rounds after the first build the same way.
struct BuildEnv<'a> {
    candidates: &'a [Candidate],
    renderer: &'a Renderer,
    compiler: &'a Compiler,
    opts: &'a TuneOptions,
    op: &'a Op,
    dir: &'a Path,
    cache: Option<&'a Path>,
}

/// Every source rendered so far in this run (identical sources share one compile) and what
/// compiling each gave.
#[derive(Default)]
struct Prepared {
    sources: Vec<String>,
    seen: HashMap<String, usize>,
    source_of: HashMap<usize, std::result::Result<usize, String>>,
    compiled: Vec<CompiledSource>,
}

impl Prepared {
    fn cache_hits(&self) -> usize {
        self.compiled.iter().filter(|c| c.from_cache).count()
    }

    /// Renders and compiles the candidates `subset` (indices into `env.candidates`).
    fn build(&mut self, env: &BuildEnv, subset: &[usize]) -> Result<Vec<Build>> {
        let first_new = self.sources.len();
        for &i in subset {
            let c = &env.candidates[i];
            let slot = env.renderer.render(c).map(|source| {
                if let Some(dir) = &env.opts.emit {
                    let path = dir.join(format!("{}_v{:04}.cu", env.op.name(), c.index));
                    results::write_atomic(&path, source.as_bytes())?;
                }
                let next = self.sources.len();
                let k = *self.seen.entry(source.clone()).or_insert(next);
                if k == next {
                    self.sources.push(source);
                }
                Ok::<usize, Error>(k)
            });
            let slot = match slot {
                Ok(Ok(k)) => Ok(k),
                Ok(Err(e)) => return Err(e),
                Err(e) => Err(e),
            };
            self.source_of.insert(i, slot);
        }
        let done = compile_all(
            env.compiler,
            env.opts,
            &self.sources[first_new..],
            first_new,
            env.dir,
            env.cache,
        )?;
        self.compiled.extend(done);
        Ok(subset
            .iter()
            .map(|&i| {
                let (cubin, compile_ms) = match &self.source_of[&i] {
                    Err(e) => (Err(e.clone()), 0.0),
                    Ok(k) => {
                        let c = &self.compiled[*k];
                        (c.result.clone(), c.millis)
                    }
                };
                Build {
                    candidate: i,
                    cubin,
                    compile_ms,
                }
            })
            .collect())
    }

    /// The GPU task for a built candidate (its record now says "not run"), or `None` with the
    /// record marked failed when it did not render or compile.
    fn task(
        &self,
        env: &BuildEnv,
        build: &Build,
        records: &mut [Record],
        task_record: &HashMap<usize, usize>,
        task_key: &mut HashMap<usize, String>,
    ) -> Option<Task> {
        let c = &env.candidates[build.candidate];
        let id = 10_000 + c.index;
        let rec = &mut records[task_record[&id]];
        rec.compile_ms = Some(build.compile_ms);
        let path = match &build.cubin {
            Err(e) => {
                rec.status = Status::Failed;
                rec.error = one_line(e);
                return None;
            }
            Ok(path) => path,
        };
        let dims = c.launch.expect("live candidates have launch dims");
        if let Some(Ok(k)) = self.source_of.get(&build.candidate) {
            task_key.insert(
                id,
                format!(
                    "{} {:?} {:?}{}{}",
                    env.compiler.key(&self.sources[*k]),
                    dims.grid,
                    dims.block,
                    // Only where there is any, so that journals written before keep their keys.
                    if dims.shared > 0 {
                        format!(" shared {}", dims.shared)
                    } else {
                        String::new()
                    },
                    c.prologue
                        .iter()
                        .map(|(name, d)| format!(" after {name} {:?} {:?}", d.grid, d.block))
                        .collect::<String>()
                ),
            );
        }
        rec.status = Status::Failed;
        rec.error = "not run".into();
        Some(Task {
            id,
            work: Work::Kernel {
                cubin: path.clone(),
                kernel: env.op.spec.kernel.clone(),
                launch: dims,
                before: pre_launches(c),
            },
            expect: "reference".into(),
            contender: true,
        })
    }
}

/// Renders and compiles the spec's `reference_config` into a [`ReferenceKernel`].
fn reference_config_kernel(
    op: &Op,
    shape: &Shape,
    limits: &DeviceLimits,
    cfg: &toml::Table,
    renderer: &Renderer,
    compiler: &Compiler,
    dir: &Path,
) -> Result<ReferenceKernel> {
    let bad = |why: String| Error::Spec {
        file: op.at("reference_config"),
        why: format!("reference_config: {why}"),
    };
    let overrides: Vec<space::ParamOverride> = cfg
        .iter()
        .map(|(k, v)| space::ParamOverride {
            name: k.clone(),
            values: vec![crate::spec::ops::toml_to_value(v)],
        })
        .collect();
    let candidates = space::enumerate(op, shape, limits, &overrides)?;
    let [c] = candidates.as_slice() else {
        return Err(bad(format!(
            "names {} configurations, expected one",
            candidates.len()
        )));
    };
    if let Some(reason) = &c.pruned {
        return Err(bad(format!(
            "{} is pruned for this shape: {reason}",
            c.config.label()
        )));
    }
    let source = renderer.render(c).map_err(bad)?;
    let done = compiler
        .compile(&source)
        .map_err(|f| bad(format!("does not compile: {}", one_line(&f.log))))?;
    let path = dir.join("reference_config.cubin");
    std::fs::write(&path, &done.cubin).map_err(|e| Error::io("cannot write", &path, e))?;
    Ok(ReferenceKernel {
        cubin: path,
        kernel: op.spec.kernel.clone(),
        launch: c.launch.expect("live candidates have launch dims"),
        before: pre_launches(c),
    })
}

/// The prologue launches of a configuration, as a task carries them.
fn pre_launches(c: &Candidate) -> Vec<PreLaunch> {
    c.prologue
        .iter()
        .map(|(kernel, d)| PreLaunch {
            kernel: kernel.clone(),
            launch: *d,
        })
        .collect()
}

/// `NAME=value;NAME=value`, the parameter form of best.csv.
fn params_text(r: &Record) -> String {
    r.params
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(";")
}

fn compile_only_record(c: &Candidate, builds: &[Build]) -> Record {
    let build = builds.iter().find(|b| b.candidate == c.index);
    let (status, error) = match (&c.pruned, build.map(|b| &b.cubin)) {
        (Some(reason), _) => (Status::Pruned, reason.clone()),
        (None, Some(Err(e))) => (Status::Failed, e.clone()),
        _ => (Status::Ok, String::new()),
    };
    Record {
        status,
        error,
        compile_ms: build.map(|b| b.compile_ms),
        ..Record::new(
            "variant",
            &format!("v{:04}", c.index),
            c.config
                .values
                .iter()
                .map(|(k, v)| (k.clone(), v.to_string()))
                .collect(),
        )
    }
}

fn baseline_launch(
    base: &Vars,
    b: &crate::spec::ops::Baseline,
    limits: &DeviceLimits,
    op: &Op,
) -> Result<std::result::Result<LaunchDims, String>> {
    let (Some(block), Some(grid)) = (&b.block, &b.grid) else {
        return Ok(Err("baseline has no launch geometry".into()));
    };
    space::eval_launch(
        base,
        block,
        grid,
        None,
        limits,
        &format!("{} baselines.{}", op.origin, b.name),
    )
}

/// Sizes of the op's buffers for this shape, in elements of `elem_bytes` bytes.
struct BufferLayout {
    buffers: Vec<(String, Role, usize, crate::spec::ops::Fill)>,
    args: Vec<ArgSpec>,
    elem_bytes: usize,
}

enum ArgSpec {
    Buffer(String),
    Int(i32),
}

impl BufferLayout {
    fn new(op: &Op, base: &Vars) -> Result<BufferLayout> {
        let mut buffers = Vec::new();
        let elem_bytes = op.dtype.bytes();
        for b in &op.spec.buffers {
            let n = base.eval_int(
                &b.elements,
                &format!("{} buffers.{}.elements", op.at(&b.elements), b.name),
            )?;
            let n = usize::try_from(n)
                .ok()
                .filter(|n| n.checked_mul(elem_bytes).is_some())
                .ok_or_else(|| Error::Expr {
                    expr: b.elements.clone(),
                    context: format!("{} buffers.{}", op.origin, b.name),
                    why: format!("{n} elements is not a valid buffer size"),
                })?;
            buffers.push((b.name.clone(), b.role, n, b.fill));
        }
        let mut args = Vec::new();
        for a in &op.spec.args {
            if buffers.iter().any(|(n, ..)| n == a) {
                args.push(ArgSpec::Buffer(a.clone()));
            } else {
                let v = base.eval_int(a, &format!("{} args", op.origin))?;
                let v = i32::try_from(v).map_err(|_| Error::Expr {
                    expr: a.clone(),
                    context: format!("{} args", op.origin),
                    why: format!("{v} does not fit a 32-bit int argument"),
                })?;
                args.push(ArgSpec::Int(v));
            }
        }
        Ok(BufferLayout {
            buffers,
            args,
            elem_bytes,
        })
    }

    fn output(&self) -> (&str, usize) {
        self.buffers
            .iter()
            .find(|(_, r, ..)| *r == Role::Output)
            .map(|(n, _, len, _)| (n.as_str(), *len))
            .expect("specs are checked to have an output")
    }

    /// Device bytes a run needs: the buffers, the expected output, and the L2 flush buffer.
    fn check_memory(&self, device: &DeviceInfo, free: u64) -> Result<()> {
        let elems: usize = self.buffers.iter().map(|b| b.2).sum::<usize>() + self.output().1;
        let need = elems as u64 * self.elem_bytes as u64
            + (device.l2_bytes as u64 * 2).max(64 << 20)
            + (64 << 20);
        if need > free {
            return Err(Error::OutOfMemory {
                need_mib: need >> 20,
                free_mib: free >> 20,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stored sgemm winners as warm-start configurations at an odd shape: a 1024^3 winner
    /// (REPACK=0 WINDOWS=0, which needs aligned rows) stands for its tile with WINDOWS=1 (as
    /// near as REPACK=1; the tie goes to the later parameter); this shape's
    /// row, stored with ORDER=snake and without CSTORE (both outside the default values),
    /// stands for its tile with the defaults and comes first; rows of another op, another
    /// dtype, another GPU (when the GPU is known), without parameters, or too far from any
    /// live configuration give nothing.
    #[test]
    fn warm_start_maps_stored_winners_to_the_nearest_live_configurations() {
        let op = Op::load("sgemm", None).unwrap();
        let shape = Shape::parse("1023x1025x1027", &op.spec.dims).unwrap();
        let candidates = space::enumerate(&op, &shape, &DeviceLimits::SM90_DEFAULT, &[]).unwrap();
        let live: Vec<usize> = candidates
            .iter()
            .filter(|c| c.pruned.is_none())
            .map(|c| c.index)
            .collect();
        // Any stored row as a template for the columns the warm start does not read.
        let template =
            results::read_best(Path::new("tests/fixtures/runs/best.csv")).unwrap()[0].clone();
        let h100 = "NVIDIA H100 80GB HBM3";
        let row = |op: &str, shape: &str, dtype: &str, gpu: &str, params: &str| BestRow {
            op: op.into(),
            shape: shape.into(),
            dtype: dtype.into(),
            gpu: gpu.into(),
            params: params.into(),
            ..template.clone()
        };
        let tile = "BM=32;BN=64;BK=32;TM=8;TN=4;WARP_N=16;VEC=4;PAD=0;STAGES=3;GROUP_M=8;\
                    OCCUPANCY=0;LOAD=async;BOUNDS=specialized";
        let cube = format!("{tile};REPACK=0;ORDER=snakek;CSTORE=scalar");
        let own = "BM=64;BN=32;BK=32;TM=8;TN=4;WARP_N=8;VEC=4;PAD=4;STAGES=2;GROUP_M=8;\
                   OCCUPANCY=0;LOAD=async;BOUNDS=edge;REPACK=1;ORDER=snake";
        let rows = vec![
            row(
                "transpose",
                "1000x1000",
                "f32",
                h100,
                "TILE_DIM=32;BLOCK_ROWS=8",
            ),
            row("sgemm", "1024x1024x1024", "f32", h100, &cube),
            row(
                "sgemm",
                "512x512x512",
                "f32",
                "NVIDIA A100-SXM4-80GB",
                &cube.replace("STAGES=3", "STAGES=2"),
            ),
            row(
                "sgemm",
                "256x256x256",
                "f64",
                h100,
                &cube.replace("BK=32", "BK=16"),
            ),
            row("sgemm", "128x128x128", "f32", h100, "FOO=1"),
            row(
                "sgemm",
                "64x64x64",
                "f32",
                h100,
                &cube.replace("BM=32;BN=64;BK=32", "BM=999;BN=999;BK=999"),
            ),
            row("sgemm", "1023x1025x1027", "f32", h100, own),
        ];
        let text = |i: usize| candidates[i].config.label();
        let texts = |seeds: &[usize]| seeds.iter().map(|&i| text(i)).collect::<Vec<_>>();
        let seeds = warm_start(&op, &shape, Some(h100), &candidates, &live, &rows);
        assert_eq!(
            texts(&seeds),
            [
                // This shape's row first: its tile, ORDER, CSTORE, KSPLIT and B_ELEMS at the
                // default values.
                "BM=64 BN=32 BK=32 TM=8 TN=4 WARP_N=8 VEC=4 PAD=4 STAGES=2 GROUP_M=8 \
                 OCCUPANCY=0 LOAD=async BOUNDS=edge REPACK=1 WINDOWS=0 ORDER=snakek CSTORE=scalar KSPLIT=1 \
                 B_ELEMS=0",
                // The 1024^3 winner's tile, windowed (not REPACK=1 nor VEC=1, also one
                // parameter away).
                "BM=32 BN=64 BK=32 TM=8 TN=4 WARP_N=16 VEC=4 PAD=0 STAGES=3 GROUP_M=8 \
                 OCCUPANCY=0 LOAD=async BOUNDS=specialized REPACK=0 WINDOWS=1 ORDER=snakek \
                 CSTORE=scalar KSPLIT=1 B_ELEMS=0",
            ]
        );
        // Without a GPU name every GPU's rows count: the A100 row's configuration joins.
        let any = warm_start(&op, &shape, None, &candidates, &live, &rows);
        assert_eq!(any.len(), 3, "{:?}", texts(&any));
        assert_eq!(any[..2], seeds[..]);
        assert!(text(any[2]).contains("STAGES=2") && text(any[2]).contains("BN=64 BK=32"));
        assert!(warm_start(&op, &shape, None, &candidates, &live, &[]).is_empty());
    }
}
