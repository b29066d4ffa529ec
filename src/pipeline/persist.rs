//! The last stages: [`rank`] finds the roof and the winner, [`persist`] writes the run CSV
//! and best.csv and returns the outcome.

use super::build::Built;
use super::confirm::Measurements;
use super::job::Ledger;
use super::options::TuneOptions;
use super::outcome::TuneOutcome;
use crate::error::{Error, Result};
use crate::spec::ops::Op;
use crate::store::best::{upsert_best, BestRow, Keep, Upserted};
use crate::store::files::write_atomic;
use crate::store::journal::JournalKey;
use crate::store::record::{fastest_roof, set_fracs_of_roof, Kind, Record, RunInfo, Status};
use crate::store::run_csv::{run_csv, run_csv_path};
use crate::store::tuned::{renders_as_timed, specialize_op};
use std::collections::HashMap;
use std::time::Instant;

/// The records ranked and moved into the outcome.
pub(super) struct Ranked {
    /// The run's op (in its element type): best.csv's stored row of its key is rendered with
    /// it for `--keep-best`.
    pub op: Op,
    pub outcome: TuneOutcome,
    pub info: RunInfo,
    /// Task id → record index, and each task's journal key (for the winner's source hash).
    pub task_record: HashMap<usize, usize>,
    pub task_key: HashMap<usize, JournalKey>,
    pub fatal: Option<Error>,
    /// The folder of sources and images, removed when the run's outcome is returned.
    pub work_dir: tempfile::TempDir,
}

/// Ranks the records ([`rank_records`]).
pub(super) fn rank(m: Measurements) -> Ranked {
    let Measurements {
        built,
        mut info,
        work,
        ledger,
        n_baselines,
        fatal,
        idle: _,
    } = m;
    let Built {
        setup,
        work_dir,
        mut outcome,
        search,
        ..
    } = built;
    let Ledger {
        records,
        task_record,
        task_key,
    } = ledger;
    rank_records(
        &setup.op,
        &mut info,
        &mut outcome,
        records,
        n_baselines,
        work,
    );
    // How good the search's model was: where it first ranked the winner.
    let winner = outcome.best.and_then(|at| {
        let (&id, _) = task_record.iter().find(|(_, &i)| i == at)?;
        setup.position(crate::model::task::TaskId::from_number(id).candidate()?)
    });
    outcome.model_rank = search
        .as_ref()
        .zip(winner)
        .and_then(|(s, c)| s.first_rank(c));
    Ranked {
        op: setup.op,
        outcome,
        info,
        task_record,
        task_key,
        fatal,
        work_dir,
    }
}

/// Writes the results ([`write_results`]) and finishes the outcome; the run's error, when
/// the rounds failed, is returned after the results are written. `t0` is the run's start.
pub(super) fn persist(opts: &TuneOptions, r: Ranked, t0: Instant) -> Result<TuneOutcome> {
    let Ranked {
        op,
        mut outcome,
        info,
        task_record,
        task_key,
        fatal,
        work_dir,
    } = r;
    // The source hash of a record: the source its task's journal key names.
    let source_hash = |i: usize| {
        task_record
            .iter()
            .find(|(_, &at)| at == i)
            .and_then(|(id, _)| task_key.get(id))
            .map(|k| k.source().to_string())
            .unwrap_or_default()
    };
    let t = std::time::Instant::now();
    write_results(opts, &op, &info, &mut outcome, &source_hash)?;
    outcome.phases.write_s = t.elapsed().as_secs_f64();
    outcome.info = Some(info);
    outcome.phases.total_s = t0.elapsed().as_secs_f64();
    drop(work_dir);
    match fatal {
        Some(e) => Err(e),
        None => Ok(outcome),
    }
}

/// The roof (the fastest verified baseline marked `roof`, each at its faster median:
/// [`fastest_roof`]) and every record's fraction of it ([`set_fracs_of_roof`]), then the
/// winner: the confirmed one, else the fastest verified variant. The records move into
/// `outcome`.
fn rank_records(
    op: &Op,
    info: &mut RunInfo,
    outcome: &mut TuneOutcome,
    mut records: Vec<Record>,
    n_baselines: usize,
    work: f64,
) {
    let roof = fastest_roof(
        op.spec
            .baselines
            .iter()
            .zip(&records[..n_baselines])
            .filter(|(b, _)| b.roof)
            .map(|(_, r)| r),
    );
    if let Some(roof) = &roof {
        info.roof = roof.name.clone();
        outcome.roof_throughput = Some(work / (roof.ms * 1e-3) / 1e9);
        set_fracs_of_roof(&mut records, roof);
    }
    let fastest = records
        .iter()
        .enumerate()
        .filter(|(_, r)| r.kind == Kind::Variant && r.status == Status::Ok)
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

/// Keeps the run CSV at `path` as `NAME.bak` (or `.bak.N`) before it is replaced, when it
/// holds a measured row that `rows` drop, or cannot be read: a re-run over another `--param`
/// set, one stopped before it re-timed the last run's leaders, or one that did not read the
/// last run (`--no-warm-start`) would otherwise take those results with it. A timed row is
/// dropped when this run has no row of its configuration, or one neither measured nor
/// carried forward (`not timed again: ...`); a failed row when this run has no row of it (a
/// re-run does not carry failures forward, it compiles and runs them again). A re-run of
/// the same space carries every timed row forward, and keeps no copy.
pub(crate) fn keep_what_this_run_drops(path: &std::path::Path, rows: &[Record]) -> Result<()> {
    if !path.is_file() {
        return Ok(());
    }
    let dropped = match crate::store::run_csv::read_run_csv(path) {
        Ok(old) => Some({
            let now: HashMap<String, &Record> = rows.iter().map(|r| (r.label(), r)).collect();
            let kept = |r: &Record| {
                matches!(r.status, Status::Ok | Status::Failed)
                    || r.error.starts_with(super::search::NOT_TIMED_AGAIN)
            };
            old.iter()
                .filter(|r| match (r.status, now.get(&r.label())) {
                    (Status::Ok, Some(new)) => !kept(new),
                    (Status::Ok | Status::Failed, None) => true,
                    _ => false,
                })
                .count()
        }),
        // Unreadable: whatever it holds is not this run's to throw away.
        Err(_) => None,
    };
    crate::store::files::keep_dropped(path, dropped, "measured row(s) this run does not")
}

/// Writes the run CSV (always) and this run's row of best.csv (when a variant won, the run
/// was not interrupted and is not a shard's share), and notes both paths in `outcome`.
/// `source_hash` gives a record's source hash (for best.csv).
fn write_results(
    opts: &TuneOptions,
    op: &Op,
    info: &RunInfo,
    outcome: &mut TuneOutcome,
    source_hash: &dyn Fn(usize) -> String,
) -> Result<()> {
    // Results: the run CSV always, best.csv when something verified.
    let csv_path = run_csv_path(&opts.out_dir, info);
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
    keep_what_this_run_drops(&csv_path, rows)?;
    write_atomic(&csv_path, &run_csv(info, &outcome.param_names, rows)?)?;
    outcome.csv_path = Some(csv_path);
    if let Some(i) = outcome
        .best
        .filter(|_| !outcome.interrupted && opts.shard.is_none())
    {
        let r = &outcome.records[i];
        let runner_up = outcome.confidence.as_ref().and_then(|c| c.runner_up);
        // Rounds too noisy to rank the leaders claim no margin (the report says so too).
        let margin = runner_up.filter(|_| {
            outcome.confidence.as_ref().is_none_or(|c| {
                super::summary::too_noisy_to_rank(
                    c.winner_iqr_pct,
                    c.runner_up.as_ref().map(|(_, cmp)| cmp),
                    c.rounds,
                )
                .is_none()
            })
        });
        let best_path = crate::store::best::best_path(&opts.out_dir);
        let num_sms = outcome.device.as_ref().map(|d| d.limits.num_sms);
        // --keep-best keeps a faster stored row only while today's templates render the
        // source it timed; one that no longer renders at all is not today's kernel either. The
        // stored row is of this run's key, so of this GPU: what it does not record (rows
        // written before `num_sms` and `arch`) is read as this run's, and, for the arch, also
        // as the GPU's own.
        let current = |stored: &BestRow| {
            let mut row = stored.clone();
            if row.num_sms.is_none() {
                row.num_sms = num_sms;
            }
            let renders = |row: &BestRow| {
                specialize_op(op.clone(), row)
                    .is_ok_and(|tuned| renders_as_timed(row, &tuned) != Some(false))
            };
            renders(&row)
                || (row.arch.is_empty() && {
                    row.arch = outcome.arch.clone();
                    renders(&row)
                })
        };
        let keep = if opts.keep_best {
            Keep::Fastest { current: &current }
        } else {
            Keep::Newest
        };
        let upserted = upsert_best(
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
                margin_pct: margin.map(|(_, c)| c.slower_pct),
                margin_ci_low_pct: margin.map(|(_, c)| c.ci_low_pct),
                margin_ci_high_pct: margin.map(|(_, c)| c.ci_high_pct),
                tie: outcome
                    .confidence
                    .as_ref()
                    .is_some_and(|c| !c.tied_with.is_empty()),
                tied_with: outcome
                    .confidence
                    .as_ref()
                    .map(|c| {
                        c.tied_with
                            .iter()
                            .map(|&at| params_text(&outcome.records[at]))
                            .collect::<Vec<_>>()
                            .join(" | ")
                    })
                    .unwrap_or_default(),
                num_sms,
                arch: outcome.arch.clone(),
            },
            keep,
        )?;
        match upserted {
            Upserted::KeptStored { stored_median_ms } => eprintln!(
                "{}: kept the stored row, faster ({stored_median_ms:.5} ms) than this run's \
                 best (--keep-best)",
                best_path.display()
            ),
            Upserted::ReplacedStale { stored_median_ms } => eprintln!(
                "{}: replaced the stored row although it was faster ({stored_median_ms:.5} \
                 ms): its figures are of a source today's templates no longer render \
                 (--keep-best keeps only a row of today's kernel)",
                best_path.display()
            ),
            Upserted::Added | Upserted::Replaced => {}
        }
        outcome.best_path = Some(best_path);
    }
    Ok(())
}

/// `NAME=value;NAME=value`, the parameter form of best.csv.
fn params_text(r: &Record) -> String {
    r.params
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(";")
}
