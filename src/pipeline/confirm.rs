//! The confirm stage: how sure the run is of its winner. The leading variants are re-timed
//! interleaved, in halving stages ([`retime_leaders`]), and the winner is picked by the tie
//! rule ([`pick`]), so runs that cannot tell their leaders apart give the same answer.

use super::build::Built;
use super::job::Ledger;
use super::options::TuneOptions;
use super::outcome::Confidence;
use super::rounds::{Gpus, Measured};
use crate::error::{Error, Result};
use crate::isolate::protocol::Job;
use crate::store::results::{Kind, Record, RunInfo, Status};
use std::collections::HashMap;

/// The measuring done, the winner confirmed when it could be: what ranking needs.
pub(super) struct Measurements {
    pub built: Built,
    pub info: RunInfo,
    pub work: f64,
    pub ledger: Ledger,
    pub n_baselines: usize,
    pub fatal: Option<Error>,
}

/// Re-times the leaders interleaved (`--confirm-rounds`), unless the rounds failed or were
/// interrupted; the idle worker is finished either way.
pub(super) fn confirm(opts: &TuneOptions, m: Measured) -> Result<Measurements> {
    let Measured {
        mut built,
        info,
        work,
        mut ledger,
        n_baselines,
        job,
        all_tasks,
        fatal,
        mut gpus,
        ..
    } = m;
    if opts.confirm_rounds > 0 && fatal.is_none() && !built.outcome.interrupted {
        let mut cjob = job.clone();
        cjob.tasks = all_tasks;
        let stored = stored_winner(opts, &built.setup.op, &info, &ledger.records);
        let confidence = retime_leaders(
            &cjob,
            &mut gpus,
            &ledger.task_record,
            &mut ledger.records,
            opts,
            stored,
        );
        gpus.finish();
        built.outcome.confidence = confidence?;
    } else {
        gpus.finish();
    }
    Ok(Measurements {
        built,
        info,
        work,
        ledger,
        n_baselines,
        fatal,
    })
}

/// At most this many leading variants are re-timed interleaved ...
pub const CONFIRM_TOP: usize = 8;
/// ... and only those within this fraction of the fastest (the runner-up always).
pub const CONFIRM_WITHIN: f64 = 0.10;
/// Leaders whose confirmed medians lie within this fraction of the fastest are tied with it
/// even where the intervals tell them apart: a difference this small moves from run to run
/// (clocks, memory placement, the other tenants of a shared GPU), so ranking on it would
/// change the winner with every run.
pub const TIE_WITHIN: f64 = 0.015;
/// Interleaved rounds of each halving stage, at least: a stage's rounds are a quarter of
/// `--confirm-rounds`.
const MIN_STAGE_ROUNDS: usize = 5;

/// The record a stored winner names: this run's configuration with the parameters of the
/// row for this op, shape, element type and GPU in the run's best.csv (or, for a built-in op
/// without one, in the shipped database), when it was measured.
pub(super) fn stored_winner(
    opts: &TuneOptions,
    op: &crate::spec::ops::Op,
    info: &RunInfo,
    records: &[Record],
) -> Option<usize> {
    let mut rows = crate::store::results::read_best_checked(&opts.out_dir.join("best.csv"))
        .map(|f| f.rows)
        .unwrap_or_default();
    if op.is_builtin() {
        rows.extend(crate::store::results::shipped_best());
    }
    let row = rows.into_iter().find(|r| {
        (
            r.op.as_str(),
            r.shape.as_str(),
            r.dtype.as_str(),
            r.gpu.as_str(),
        ) == (
            info.op.as_str(),
            info.shape.as_str(),
            info.dtype.as_str(),
            info.gpu.as_str(),
        )
    })?;
    let mut want = crate::store::results::stored_params(op, &row.params);
    want.sort();
    records.iter().position(|r| {
        let mut have = r.params.clone();
        have.sort();
        r.kind == Kind::Variant && r.status == Status::Ok && have == want
    })
}

/// Re-times the leading variants interleaved, computes each one's interval against the
/// fastest, and picks the winner by the tie rule ([`pick`]).
///
/// Successive halving spends the rounds where they decide something: every leader gets a
/// stage of interleaved rounds, then those clearly slower than the fastest (slower by more
/// than [`TIE_WITHIN`] at 95 % confidence) drop out and the rest get another stage, until
/// `--confirm-rounds` rounds are spent or one leader is left.
fn retime_leaders(
    job: &Job,
    gpus: &mut Gpus,
    task_record: &HashMap<usize, usize>,
    records: &mut [Record],
    opts: &TuneOptions,
    stored: Option<usize>,
) -> Result<Option<Confidence>> {
    let median = |at: usize| {
        records[at]
            .stats
            .map(|s| s.median_ms)
            .unwrap_or(f64::INFINITY)
    };
    let mut leaders: Vec<(usize, usize)> = task_record
        .iter()
        .filter(|(_, &at)| records[at].kind == Kind::Variant && records[at].status == Status::Ok)
        .map(|(&id, &at)| (id, at))
        .collect();
    leaders.sort_by(|a, b| median(a.1).total_cmp(&median(b.1)).then(a.1.cmp(&b.1)));
    let Some(&(_, first)) = leaders.first() else {
        return Ok(None);
    };
    let limit = median(first) * (1.0 + CONFIRM_WITHIN);
    let mut picked: Vec<(usize, usize)> = leaders
        .iter()
        .enumerate()
        .filter(|(rank, (_, at))| *rank < 2 || median(*at) <= limit)
        .map(|(_, x)| *x)
        .take(CONFIRM_TOP)
        .collect();
    // The stored winner takes part whenever it is close, so it can keep its place.
    if let Some(&(id, at)) = leaders.iter().find(|(_, at)| Some(*at) == stored) {
        if median(at) <= limit && !picked.iter().any(|(_, p)| *p == at) {
            picked.push((id, at));
        }
    }
    if picked.len() < 2 {
        return Ok(None);
    }
    let seed = opts.seed ^ 0xC0_FFEE;
    let stage = (opts.confirm_rounds / 4).max(MIN_STAGE_ROUNDS);
    let mut samples: HashMap<usize, Vec<f64>> = HashMap::new();
    let mut alive: Vec<(usize, usize)> = picked.clone();
    let mut spent = 0;
    while spent < opts.confirm_rounds && alive.len() > 1 {
        let rounds = stage.min(opts.confirm_rounds - spent);
        let mut cjob = job.clone();
        cjob.tasks = job
            .tasks
            .iter()
            .filter(|t| alive.iter().any(|(id, _)| *id == t.id))
            .cloned()
            .collect();
        cjob.confirm_rounds = rounds;
        cjob.adaptive_cutoff = None;
        let mut got: HashMap<usize, Vec<f64>> = HashMap::new();
        gpus.run(&cjob, &mut |r| {
            if r.samples.len() >= 2 {
                got.insert(r.id, r.samples);
            }
        })?;
        spent += rounds;
        // A leader that failed to re-time leaves the contest.
        alive.retain(|(id, _)| got.contains_key(id));
        for (id, s) in got {
            samples.entry(id).or_default().extend(s);
        }
        let Some(fastest) = alive
            .iter()
            .map(|(id, _)| &samples[id])
            .min_by(|a, b| med(a).total_cmp(&med(b)))
            .cloned()
        else {
            break;
        };
        alive.retain(|(id, _)| {
            let cmp = crate::measure::stats::compare(&fastest, &samples[id], 2000, seed);
            cmp.ci_low_pct <= TIE_WITHIN * 100.0
        });
    }
    let timed: Vec<(usize, Vec<f64>)> = picked
        .iter()
        .filter_map(|(id, at)| samples.remove(id).map(|s| (*at, s)))
        .collect();
    if timed.len() < 2 {
        return Ok(None);
    }
    Ok(Some(pick(&timed, records, stored, seed, spent)))
}

fn med(s: &[f64]) -> f64 {
    crate::measure::stats::median(s)
}

/// The tie rule. The tie set is the fastest leader and every leader tied with it: its 95 %
/// interval spans zero, or its median is within [`TIE_WITHIN`] of the fastest. The winner is
/// the stored winner when it is in the tie set (a re-run keeps its answer while the data
/// cannot tell it apart), else the tie set's member with the fewest registers, then the
/// first in the space. Nothing of it depends on which member the noise made fastest.
fn pick(
    timed: &[(usize, Vec<f64>)],
    records: &mut [Record],
    stored: Option<usize>,
    seed: u64,
    rounds: usize,
) -> Confidence {
    let leader = timed
        .iter()
        .min_by(|a, b| med(&a.1).total_cmp(&med(&b.1)))
        .expect("two or more");
    let lead = med(&leader.1);
    let tied: Vec<usize> = timed
        .iter()
        .filter(|(at, s)| {
            *at == leader.0
                || med(s) <= lead * (1.0 + TIE_WITHIN)
                || crate::measure::stats::compare(&leader.1, s, 2000, seed).tied()
        })
        .map(|(at, _)| *at)
        .collect();
    let kept = stored.filter(|at| tied.contains(at));
    let winner = kept.unwrap_or_else(|| {
        *tied
            .iter()
            .min_by_key(|&&at| (records[at].registers.unwrap_or(i32::MAX), at))
            .expect("the leader is tied with itself")
    });
    let winner_samples = &timed.iter().find(|(at, _)| *at == winner).expect("timed").1;
    let mut runner_up: Option<(usize, crate::measure::stats::Comparison)> = None;
    for (at, s) in timed {
        let cmp = crate::measure::stats::compare(winner_samples, s, 2000, seed);
        let mine = *at == winner;
        records[*at].confirm = Some(crate::store::results::Confirmed {
            median_ms: med(s),
            vs_winner_pct: if mine { 0.0 } else { cmp.slower_pct },
            ci_low_pct: if mine { 0.0 } else { cmp.ci_low_pct },
            ci_high_pct: if mine { 0.0 } else { cmp.ci_high_pct },
            tied: tied.contains(at),
            winner: mine,
        });
        if !mine
            && runner_up.is_none_or(|(r, _)| {
                med(s) < med(&timed.iter().find(|(a, _)| *a == r).expect("timed").1)
            })
        {
            runner_up = Some((*at, cmp));
        }
    }
    Confidence {
        rounds,
        candidates: timed.iter().map(|(at, _)| *at).collect(),
        winner,
        tied_with: tied.into_iter().filter(|&at| at != winner).collect(),
        kept_stored: kept.is_some(),
        runner_up,
        winner_iqr_pct: crate::measure::stats::rel_iqr_pct(winner_samples),
    }
}
