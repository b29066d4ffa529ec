//! What a tuning run produced: [`TuneOutcome`] and the parts it reports.

use crate::cuda::gpu::DeviceInfo;
use crate::store::record::{Record, RunInfo};
use std::path::PathBuf;

/// Wall time of each phase, in seconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct Phases {
    pub setup_s: f64,
    /// Compiling, as far as nothing else ran meanwhile: a GPU run measures what compiled
    /// while the rest compiles, so this is the time its GPU waited for the compiler.
    pub compile_s: f64,
    pub verify_s: f64,
    pub timing_s: f64,
    /// Re-timing the leaders interleaved (the confirm stage).
    pub confirm_s: f64,
    /// The search choosing its next rounds.
    pub search_s: f64,
    /// GPU jobs from sending to the last result, of which `verify_s` and `timing_s` are part;
    /// the rest starts the worker and its context, makes the inputs and the expected output,
    /// warms the GPU up, loads and launches the kernels.
    pub gpu_s: f64,
    /// Writing the run CSV, best.csv and the report.
    pub write_s: f64,
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
    /// Where the search's model first ranked the winner among the live configurations:
    /// (rank from 1, of how many), for a strategy with a model (`model`).
    pub model_rank: Option<(usize, usize)>,
}

/// How sure the run is of its winner.
#[derive(Debug, Clone)]
pub struct Confidence {
    pub rounds: usize,
    /// Records (indices) that took part, the winner included.
    pub candidates: Vec<usize>,
    /// Record index of the chosen winner.
    pub winner: usize,
    /// Records tied with the fastest candidate, other than the winner.
    pub tied_with: Vec<usize>,
    /// The winner is the stored one (best.csv), kept because it is in the tie set.
    pub kept_stored: bool,
    /// The tie band, in percent: leaders whose medians lie this close to the fastest are tied.
    pub band_pct: f64,
    /// The fastest other candidate and how much slower it is than the winner.
    pub runner_up: Option<(usize, crate::measure::stats::Comparison)>,
    /// The winner's own noise over the rounds: IQR / median, in percent.
    pub winner_iqr_pct: f64,
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
