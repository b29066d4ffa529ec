//! `tune check`: a regression check for CI on a GPU runner. Every stored winner of this GPU
//! is re-tuned with its parameters pinned (and so is its recorded runner-up), then compared
//! with the stored figures: a winner that no longer verifies, got slower than the stored time
//! by more than the margin, or is now slower than its runner-up by more than the margin fails.

use crate::error::{Error, Result};
use crate::measure::bench::{BenchSettings, CacheState};
use crate::pipeline::tuner::{tune, Isolation, TuneOptions, DEFAULT_WARMUP};
use crate::store::results::{read_best, BestRow, Kind, Status};
use std::path::PathBuf;

/// What `tune check` compares and how strictly.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    pub db: PathBuf,
    pub op: Option<String>,
    pub shape: Option<String>,
    /// Allowed slowdown, in percent.
    pub margin_pct: f64,
    pub device: usize,
    pub reps: usize,
    pub isolation: Isolation,
    pub templates: Option<PathBuf>,
}

/// The verdict on one stored winner.
#[derive(Debug, Clone)]
pub struct CheckResult {
    pub row: BestRow,
    pub now_ms: Option<f64>,
    pub runner_up_ms: Option<f64>,
    /// `None` when it passes, else why it fails.
    pub failure: Option<String>,
}

/// Pure verdict from the measured times, so the rule is testable without a GPU.
pub fn verdict(
    row: &BestRow,
    now_ms: Option<f64>,
    runner_up_ms: Option<f64>,
    margin_pct: f64,
    why_not: &str,
) -> Option<String> {
    let Some(now) = now_ms else {
        return Some(format!("no longer verifies or runs: {why_not}"));
    };
    let limit = row.median_ms * (1.0 + margin_pct / 100.0);
    if now > limit {
        return Some(format!(
            "now {now:.4} ms, {:.1}% slower than the stored {:.4} ms (margin {margin_pct}%)",
            (now / row.median_ms - 1.0) * 100.0,
            row.median_ms
        ));
    }
    if let Some(ru) = runner_up_ms {
        if now > ru * (1.0 + margin_pct / 100.0) {
            return Some(format!(
                "now {now:.4} ms, {:.1}% slower than its runner-up {} ({ru:.4} ms)",
                (now / ru - 1.0) * 100.0,
                row.runner_up.replace(';', " ")
            ));
        }
    }
    None
}

fn pinned(opts: &CheckOptions, row: &BestRow, params: &str, out: &std::path::Path) -> TuneOptions {
    let mut params: Vec<String> = params
        .split(';')
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect();
    // Parameters added to the op after the row was stored take the values it had then, so
    // the pin stays one configuration (an op that does not load fails in `tune` itself).
    if let Ok(op) = crate::spec::ops::Op::load(&row.op, opts.templates.as_deref()) {
        let given: Vec<&str> = params
            .iter()
            .filter_map(|p| p.split_once('=').map(|(n, _)| n.trim()))
            .collect();
        let assumed = op.assumed_params(&given);
        params.extend(assumed);
    }
    TuneOptions {
        op: row.op.clone(),
        templates: opts.templates.clone(),
        shape: row.shape.clone(),
        dtype: Some(row.dtype.clone()).filter(|d| !d.is_empty()),
        params,
        bench: BenchSettings {
            warmup: DEFAULT_WARMUP,
            reps: opts.reps.max(row.reps),
            cache: if row.cache == "warm" {
                CacheState::Warm
            } else {
                CacheState::Cold
            },
        },
        out_dir: out.to_path_buf(),
        device: opts.device,
        isolation: opts.isolation.clone(),
        confirm_rounds: 0,
        adaptive: false,
        ..TuneOptions::default()
    }
}

/// What `tune check` needs from the GPU, apart from everything it decides: the GPU's name
/// (only its stored rows are checked) and a fresh time for a stored configuration. The real
/// one is [`GpuRetimer`]; tests give recorded times, so the comparison and the exit code are
/// tested without a GPU.
pub trait Retimer {
    /// The name of the GPU the configurations are re-timed on, as best.csv stores it.
    fn gpu_name(&mut self) -> Result<String>;
    /// The median time in ms of `params` (a `NAME=value;...` configuration of `row`'s op and
    /// shape) measured now, or why there is none (does not verify, does not compile, pruned
    /// on this GPU).
    fn retime(&mut self, row: &BestRow, params: &str) -> std::result::Result<f64, String>;
}

/// Re-times on the GPU: a `tune` run per configuration with its parameters pinned.
pub struct GpuRetimer<'a> {
    opts: &'a CheckOptions,
    /// Where the pinned runs write their files (made on first use, removed on drop).
    scratch: Option<tempfile::TempDir>,
}

impl<'a> GpuRetimer<'a> {
    pub fn new(opts: &'a CheckOptions) -> GpuRetimer<'a> {
        GpuRetimer {
            opts,
            scratch: None,
        }
    }
}

impl Retimer for GpuRetimer<'_> {
    fn gpu_name(&mut self) -> Result<String> {
        let name = match self.opts.isolation.worker_exe() {
            Some(exe) => crate::isolate::worker::GpuWorker::start(exe, self.opts.device).map(
                |(w, info, _)| {
                    w.finish();
                    info.name
                },
            ),
            None => crate::isolate::device::open(self.opts.device).map(|d| d.info().name.clone()),
        };
        name.map_err(|e| match e {
            Error::NoGpu(why) => Error::NoGpu(without_gpu(&why)),
            e => e,
        })
    }

    fn retime(&mut self, row: &BestRow, params: &str) -> std::result::Result<f64, String> {
        let scratch = match &mut self.scratch {
            Some(dir) => dir,
            none => none.insert(tempfile::tempdir().map_err(|e| {
                format!(
                    "cannot create a temporary folder in {}: {e}",
                    std::env::temp_dir().display()
                )
            })?),
        };
        time_of(pinned(self.opts, row, params, scratch.path()))
    }
}

/// Time of the single pinned configuration, or why there is none.
fn time_of(opts: TuneOptions) -> std::result::Result<f64, String> {
    let o = tune(&opts).map_err(|e| e.to_string())?;
    let r = o
        .records
        .iter()
        .find(|r| r.kind == Kind::Variant && r.status != Status::Pruned)
        .ok_or("pruned on this GPU")?;
    match (r.status, r.stats) {
        (Status::Ok, Some(s)) => Ok(s.median_ms),
        _ => Err(r.reason().into_owned()),
    }
}

/// Re-times every stored winner of the GPU in front of us that matches the filters.
pub fn check(opts: &CheckOptions) -> Result<Vec<CheckResult>> {
    check_with(opts, &mut GpuRetimer::new(opts))
}

/// Why there is no GPU, as `tune check` says it. The reason the driver or device gave is kept;
/// the advice a tuning run gives (`--compile-only`, `--arch`: options of `tune` itself, which
/// `tune check` does not accept, and compiling is no check) is replaced by what `tune check`
/// needs.
pub fn without_gpu(why: &str) -> String {
    let reason = [
        ", or use --compile-only",
        " (use --compile-only",
        "; use --compile-only",
    ]
    .iter()
    .filter_map(|hint| why.find(hint))
    .min()
    .map_or(why, |at| &why[..at]);
    format!(
        "{}; tune check re-times the stored winners, so run it on a machine with the GPU they \
         were tuned on (pick one with --device)",
        reason.trim_end_matches(['.', ';', ','])
    )
}

/// [`check`] with the re-timing given: reads the stored rows, keeps those of the retimer's GPU
/// that match the filters, re-times each winner (and its runner-up) and judges it.
pub fn check_with(opts: &CheckOptions, retimer: &mut dyn Retimer) -> Result<Vec<CheckResult>> {
    // The command line refuses these as it parses them; a library caller gets the same.
    crate::model::domain::non_negative(opts.margin_pct)
        .map_err(|why| Error::Usage(format!("--margin {why}")))?;
    crate::model::domain::at_least_one(opts.reps)
        .map_err(|why| Error::Usage(format!("--reps {why}")))?;
    let rows = read_best(&opts.db)?;
    // Said before the GPU is touched: in CI a missing database is the likelier mistake.
    if rows.is_empty() {
        return Err(Error::Usage(format!(
            "{} holds no stored winners (missing or empty): tune first, e.g. `tune --op transpose --shape 1000x1000`, or pass --db",
            opts.db.display()
        )));
    }
    // The filters, too, are checked against the rows of every GPU before the GPU is touched:
    // a mistyped --op or --shape is bad input wherever it runs.
    let wanted = |r: &BestRow| {
        opts.op.as_ref().is_none_or(|op| &r.op == op)
            && opts.shape.as_ref().is_none_or(|s| &r.shape == s)
    };
    if !rows.iter().any(wanted) {
        let distinct = |values: &mut dyn Iterator<Item = &str>| {
            let mut out: Vec<&str> = Vec::new();
            for v in values {
                if !out.contains(&v) {
                    out.push(v);
                }
            }
            // A database of many shapes would make a line of hundreds of characters.
            const SHOWN: usize = 12;
            if out.len() > SHOWN {
                format!("{}, ... ({} in all)", out[..SHOWN].join(", "), out.len())
            } else {
                out.join(", ")
            }
        };
        let what = match (&opts.op, &opts.shape) {
            (Some(op), Some(s)) if rows.iter().any(|r| &r.op == op) => format!(
                "op {op} at shape {s} (its stored shapes: {})",
                distinct(
                    &mut rows
                        .iter()
                        .filter(|r| &r.op == op)
                        .map(|r| r.shape.as_str())
                )
            ),
            (Some(op), _) => format!(
                "op {op} (stored ops: {})",
                distinct(&mut rows.iter().map(|r| r.op.as_str()))
            ),
            (None, s) => format!(
                "shape {} (stored shapes: {})",
                s.as_deref().unwrap_or_default(),
                distinct(&mut rows.iter().map(|r| r.shape.as_str()))
            ),
        };
        return Err(Error::Usage(format!(
            "{} holds no stored winner for {what}",
            opts.db.display()
        )));
    }
    let gpu = retimer.gpu_name()?;
    let selected: Vec<BestRow> = rows
        .into_iter()
        .filter(|r| r.gpu == gpu)
        .filter(wanted)
        .collect();
    if selected.is_empty() {
        return Err(Error::Usage(format!(
            "{} holds no stored winner for {gpu}{}{}",
            opts.db.display(),
            opts.op
                .as_ref()
                .map(|o| format!(", op {o}"))
                .unwrap_or_default(),
            opts.shape
                .as_ref()
                .map(|s| format!(", shape {s}"))
                .unwrap_or_default()
        )));
    }
    let mut out = Vec::new();
    for row in selected {
        let now = retimer.retime(&row, &row.params);
        let runner_up = if row.runner_up.is_empty() {
            None
        } else {
            retimer.retime(&row, &row.runner_up).ok()
        };
        let why_not = now.as_ref().err().cloned().unwrap_or_default();
        let now_ms = now.ok();
        let failure = verdict(&row, now_ms, runner_up, opts.margin_pct, &why_not);
        out.push(CheckResult {
            row,
            now_ms,
            runner_up_ms: runner_up,
            failure,
        });
    }
    Ok(out)
}

/// What `tune check` prints: a PASS or FAIL line per stored winner and a summary line; and
/// whether all passed (the binary then exits 0, else 1).
pub fn report(results: &[CheckResult], margin_pct: f64) -> (String, bool) {
    use std::fmt::Write;
    let mut s = String::new();
    for r in results {
        let now = r
            .now_ms
            .map(|m| format!("{m:.4} ms"))
            .unwrap_or_else(|| "-".into());
        let _ = match &r.failure {
            None => writeln!(
                s,
                "PASS {} {} {}: stored {:.4} ms, now {now}",
                r.row.op,
                r.row.shape,
                r.row.params.replace(';', " "),
                r.row.median_ms
            ),
            Some(why) => writeln!(
                s,
                "FAIL {} {} {}: {why}",
                r.row.op,
                r.row.shape,
                r.row.params.replace(';', " ")
            ),
        };
    }
    let failed = results.iter().filter(|r| r.failure.is_some()).count();
    let _ = writeln!(
        s,
        "{} checked, {failed} failed (margin {margin_pct}%)",
        results.len()
    );
    (s, failed == 0)
}

/// `tune check`: runs [`check`] and prints one line per stored winner. `Ok(false)` when any
/// check failed (the binary exits 1).
pub fn command(opts: &CheckOptions) -> Result<bool> {
    let (text, passed) = run(opts, &mut GpuRetimer::new(opts))?;
    print!("{text}");
    Ok(passed)
}

/// All of `tune check` but the printing, with the re-timing given: what it prints and whether
/// every stored winner passed (`command` returns that: the binary exits 0, else 1; an error
/// exits with its own code, 2 for input the user can fix).
pub fn run(opts: &CheckOptions, retimer: &mut dyn Retimer) -> Result<(String, bool)> {
    Ok(report(&check_with(opts, retimer)?, opts.margin_pct))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Re-times nothing: a check refused before the GPU is asked must not reach it.
    struct Untouched;

    impl Retimer for Untouched {
        fn gpu_name(&mut self) -> Result<String> {
            panic!("the GPU was asked for its name")
        }
        fn retime(&mut self, _: &BestRow, _: &str) -> std::result::Result<f64, String> {
            panic!("a configuration was re-timed")
        }
    }

    /// A margin that would switch the gate off (NaN, infinite) or invert it (negative), and
    /// zero repetitions, are bad input before the database or the GPU is read.
    #[test]
    fn a_margin_or_reps_outside_its_domain_is_refused_first() {
        let opts = |margin_pct: f64, reps: usize| CheckOptions {
            db: PathBuf::from("/nonexistent/best.csv"),
            op: None,
            shape: None,
            margin_pct,
            device: 0,
            reps,
            isolation: Isolation::InProcess,
            templates: None,
        };
        for (margin, reps, want) in [
            (f64::NAN, 30, "--margin must be a finite number, 0 or more"),
            (f64::INFINITY, 30, "--margin must be a finite number"),
            (-5.0, 30, "--margin must be a finite number"),
            (10.0, 0, "--reps must be at least 1"),
        ] {
            let err = check_with(&opts(margin, reps), &mut Untouched).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{err}");
            assert!(err.to_string().starts_with(want), "{want}: {err}");
        }
    }

    #[test]
    fn the_no_gpu_reason_keeps_the_cause_and_drops_the_tuning_advice() {
        for why in [
            "libcuda.so (the NVIDIA driver) could not be loaded; install the NVIDIA driver, or use --compile-only --arch sm_XX to compile without a GPU",
            "cuInit failed with CUDA_ERROR_NO_DEVICE (use --compile-only to compile without a GPU)",
            "the driver reports no CUDA device (use --compile-only to compile without a GPU)",
        ] {
            let said = without_gpu(why);
            assert!(!said.contains("--compile-only") && !said.contains("--arch"), "{said}");
            assert!(said.starts_with(&why[..20]), "{said}");
            assert!(said.contains("--device"), "{said}");
        }
        let other = "--device 3 does not exist: this machine has 1 CUDA device(s), 0..0";
        assert!(without_gpu(other).starts_with(other));
    }

    fn row(ms: f64, runner_up: &str) -> BestRow {
        BestRow {
            op: "transpose".into(),
            shape: "1000x1000".into(),
            dtype: "f32".into(),
            gpu: "GPU".into(),
            compute_capability: "9.0".into(),
            params: "TILE_DIM=32;BLOCK_ROWS=8".into(),
            median_ms: ms,
            throughput: 1.0,
            unit: "GB/s".into(),
            frac_of_roof: None,
            roof: "memcpy".into(),
            cache: "cold".into(),
            reps: 30,
            tool_version: "0".into(),
            driver: "13.0".into(),
            nvrtc: "13.0".into(),
            tuned_at: String::new(),
            gpu_uuid: String::new(),
            source_hash: String::new(),
            runner_up: runner_up.into(),
            margin_pct: None,
            margin_ci_low_pct: None,
            margin_ci_high_pct: None,
            tie: false,
            tied_with: String::new(),
        }
    }

    #[test]
    fn within_the_margin_passes() {
        assert_eq!(verdict(&row(1.0, ""), Some(1.05), None, 10.0, ""), None);
        assert_eq!(verdict(&row(1.0, ""), Some(0.8), None, 10.0, ""), None);
    }

    #[test]
    fn a_stored_winner_claimed_20_percent_too_fast_fails() {
        // The database says 0.8 ms; the kernel really takes 1.0 ms: 25 % slower than stored.
        let why = verdict(&row(0.8, ""), Some(1.0), None, 10.0, "").unwrap();
        assert!(
            why.contains("25.0% slower than the stored 0.8000 ms"),
            "{why}"
        );
    }

    #[test]
    fn a_winner_now_slower_than_its_runner_up_fails() {
        let why = verdict(
            &row(1.0, "TILE_DIM=64;BLOCK_ROWS=16"),
            Some(1.05),
            Some(0.9),
            10.0,
            "",
        )
        .unwrap();
        assert!(why.contains("runner-up TILE_DIM=64 BLOCK_ROWS=16"), "{why}");
        assert_eq!(
            verdict(&row(1.0, "X=1"), Some(1.0), Some(0.95), 10.0, ""),
            None
        );
    }

    #[test]
    fn a_winner_that_no_longer_verifies_fails() {
        let why = verdict(
            &row(1.0, ""),
            None,
            None,
            10.0,
            "wrong result: 3 of 10 elements differ",
        )
        .unwrap();
        assert!(
            why.contains("no longer verifies") && why.contains("wrong result"),
            "{why}"
        );
    }
}
