//! The records of a run: one per configuration or baseline, with its status and result, and
//! the run's description ([`RunInfo`]).

use crate::measure::bench::Stats;
use serde::{Deserialize, Serialize};

/// Outcome of one configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Compiled, verified and timed.
    Ok,
    /// Render, compile, launch or verification failed; `error` says which and why.
    Failed,
    /// Removed by a constraint before compiling; `error` holds the reason.
    Pruned,
    /// Valid, but a search strategy did not propose it within its budget.
    Skipped,
    /// Proposed, but never compiled or run: the run was stopped (Ctrl-C) or its GPU path
    /// failed first; `error` says which.
    NotRun,
}

impl Status {
    pub fn as_str(&self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Failed => "failed",
            Status::Pruned => "pruned",
            Status::Skipped => "skipped",
            Status::NotRun => "not_run",
        }
    }

    pub(super) fn parse(s: &str) -> Option<Status> {
        match s {
            "ok" => Some(Status::Ok),
            "failed" => Some(Status::Failed),
            "pruned" => Some(Status::Pruned),
            "skipped" => Some(Status::Skipped),
            "not_run" => Some(Status::NotRun),
            _ => None,
        }
    }
}

/// One row of a run's CSV.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// "variant" for the tuned space, "baseline" for the reference kernels.
    pub kind: String,
    /// `v0042` (index in the space) or the baseline's name.
    pub name: String,
    pub params: Vec<(String, String)>,
    pub status: Status,
    pub error: String,
    pub stats: Option<Stats>,
    pub throughput: Option<f64>,
    pub frac_of_roof: Option<f64>,
    pub compile_ms: Option<f64>,
    pub registers: Option<i32>,
    /// The interleaved re-timing of the leading candidates, for those that took part.
    pub confirm: Option<Confirmed>,
}

/// A leading candidate re-timed interleaved with the others, against the chosen winner.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Confirmed {
    pub median_ms: f64,
    /// How much slower than the winner (negative: faster), in percent, with its 95 % interval.
    pub vs_winner_pct: f64,
    pub ci_low_pct: f64,
    pub ci_high_pct: f64,
    /// Statistically tied with the fastest candidate (its interval spans zero).
    pub tied: bool,
    pub winner: bool,
}

impl Record {
    /// A record with no outcome yet (status `pruned`, no error): callers fill in the rest.
    pub fn new(kind: &str, name: &str, params: Vec<(String, String)>) -> Record {
        Record {
            kind: kind.into(),
            name: name.into(),
            params,
            status: Status::Pruned,
            error: String::new(),
            stats: None,
            throughput: None,
            frac_of_roof: None,
            compile_ms: None,
            registers: None,
            confirm: None,
        }
    }

    pub fn label(&self) -> String {
        if self.params.is_empty() {
            return self.name.clone();
        }
        let parts: Vec<String> = self
            .params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        parts.join(" ")
    }
}

/// What a run measured: the same for every row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    pub op: String,
    pub shape: String,
    pub dtype: String,
    pub gpu: String,
    pub compute_capability: String,
    pub cache: String,
    pub reps: usize,
    pub unit: String,
    /// Name of the baseline whose time is the roof (e.g. "memcpy").
    pub roof: String,
    /// The CUDA version the driver supports (`13.0`), as `best.csv`'s `driver` column.
    pub driver: String,
    pub nvrtc: String,
}
