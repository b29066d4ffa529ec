//! What a tuning run is asked to do: [`TuneOptions`], as plain data, and its defaults.

use crate::measure::bench::BenchSettings;
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
    /// The `tune` executable to run compile and GPU workers from; `None` runs everything in
    /// this process (serial compiles, and a faulting kernel ends the run).
    pub worker_exe: Option<PathBuf>,
    /// Compile worker processes.
    pub jobs: usize,
    /// How long one source may take in NVRTC (compile workers only).
    pub compile_limit: crate::isolate::worker::CompileLimit,
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
    /// shape (853,616 of sgemm's 884,736 points at 4096^3), and a record for each was most of
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
    /// the run's best.csv, the configuration of this space nearest to it ([`super::search::warm_start`]).
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
            compile_limit: crate::isolate::worker::CompileLimit::Auto,
            jobs: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            watchdog_s: DEFAULT_WATCHDOG_S,
            resume: false,
            adaptive: true,
            confirm_rounds: 50,
            progress: true,
            keep_best: false,
            pruned_rows: false,
            strategy: "auto".into(),
            budget: None,
            shard: None,
            warm_start: true,
        }
    }
}

/// A variant whose first timed launches ([`crate::measure::bench::PROBE_REPS`]) are all
/// slower than this factor times the best median so far is not a contender: it is timed no
/// further. A contender's fastest launch is at or below its own median, so 15 % leaves room
/// for noise while a sgemm search, whose proposals mostly lie within 1.5x of each other,
/// spends its 30 launches on the close ones only.
pub const ADAPTIVE_CUTOFF: f64 = 1.15;
