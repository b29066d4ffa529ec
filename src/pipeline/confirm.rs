//! The confirm stage: how sure the run is of its winner. The leading variants are re-timed
//! interleaved and the winner is picked with intervals ([`retime_leaders`]).

use super::build::Built;
use super::job::Ledger;
use super::options::TuneOptions;
use super::outcome::Confidence;
use super::rounds::Measured;
use crate::cuda::gpu::Gpu;
use crate::error::{Error, Result};
use crate::isolate::worker::{run_tasks, Isolation, Job};
use crate::store::record::{Record, RunInfo, Status};
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
        gpus,
        idle_worker,
        ..
    } = m;
    if opts.confirm_rounds > 0 && fatal.is_none() && !built.outcome.interrupted {
        let isolation = match &opts.worker_exe {
            Some(exe) => Some(Isolation::Subprocess {
                exe: exe.clone(),
                watchdog: gpus.watchdog,
                first: idle_worker,
            }),
            None => Gpu::open(opts.device).ok().map(Isolation::InProcess),
        };
        if let Some(isolation) = isolation {
            let mut cjob = job.clone();
            cjob.tasks = all_tasks;
            built.outcome.confidence = retime_leaders(
                &cjob,
                isolation,
                &ledger.task_record,
                &mut ledger.records,
                opts,
            )?;
        }
    } else if let Some(w) = idle_worker {
        w.finish();
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
pub const CONFIRM_TOP: usize = 5;
/// ... and only those within this fraction of the fastest (the runner-up always).
pub const CONFIRM_WITHIN: f64 = 0.10;

/// Re-times the leading variants interleaved, computes each one's interval against the
/// fastest, and picks the winner: the fastest, unless others are statistically tied with it,
/// in which case the tie rule decides (fewest registers, then the first in the space), so
/// repeated runs pick the same configuration whenever the data cannot tell them apart.
fn retime_leaders(
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
        records[*at].confirm = Some(crate::store::record::Confirmed {
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
