//! The confirm stage: how sure the run is of its winner. The leading variants are re-timed
//! interleaved, in halving stages ([`retime_leaders`]), and the winner is picked by the tie
//! rule ([`pick`]), so runs that cannot tell their leaders apart give the same answer.

use super::build::Built;
use super::job::Ledger;
use super::options::{TuneOptions, CONFIRM_TOP, CONFIRM_WITHIN, TIE_WITHIN};
use super::outcome::Confidence;
use super::rounds::{Gpus, Measured};
use crate::error::{Error, Result};
use crate::isolate::protocol::Job;
use crate::isolate::worker::GpuWorker;
use crate::store::journal::{Journal, JournalKey};
use crate::store::record::{Kind, Record, RunInfo, Status};
use std::collections::HashMap;

/// The measuring done, the winner confirmed when it could be: what ranking needs.
pub(super) struct Measurements {
    pub built: Built,
    pub info: RunInfo,
    pub work: f64,
    pub ledger: Ledger,
    pub n_baselines: usize,
    pub fatal: Option<Error>,
    /// The GPU worker the measuring left idle, for a next run to reuse
    /// ([`crate::isolate::worker::KeptWorker`]).
    pub idle: Option<GpuWorker>,
}

/// Re-times the leaders interleaved (`--confirm-rounds`), unless the rounds failed or were
/// interrupted; the idle worker is handed on either way.
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
        mut journal,
        ..
    } = m;
    if opts.confirm_rounds > 0 && fatal.is_none() && !built.outcome.interrupted {
        let mut cjob = job.clone();
        cjob.tasks = all_tasks;
        // `--no-warm-start` asks for a fresh contest: no stored answer is preferred either.
        let stored = opts
            .warm_start
            .then(|| stored_winner(opts, &built.setup.op, &info, &ledger.records))
            .flatten();
        let roofs: Vec<usize> = (0..n_baselines)
            .filter(|&at| {
                built
                    .setup
                    .op
                    .spec
                    .baselines
                    .get(at)
                    .is_some_and(|b| b.roof)
                    && ledger.records[at].status == Status::Ok
            })
            .collect();
        let t = std::time::Instant::now();
        let confidence = retime_leaders(
            &cjob,
            &mut gpus,
            (&ledger.task_record, &ledger.task_key),
            &mut ledger.records,
            opts,
            (stored, &roofs),
            &mut journal,
        );
        built.outcome.phases.confirm_s = t.elapsed().as_secs_f64();
        // Ctrl-C during the contest stops the run like any other: no winner is claimed and
        // best.csv is left alone; every measured row is kept.
        if crate::isolate::interrupt::interrupted() {
            built.outcome.interrupted = true;
        } else {
            built.outcome.confidence = confidence?;
        }
    }
    Ok(Measurements {
        built,
        info,
        work,
        ledger,
        n_baselines,
        fatal,
        idle: gpus.into_idle(),
    })
}

/// The tie band grows to this fraction of the fastest leader's spread over the rounds (IQR
/// / median): the medians of microsecond kernels, whose launches spread by 10 % and more,
/// move by several percent from one run to the next.
const BAND_OF_SPREAD: f64 = 0.5;

/// The widest tie band: a few outlying launches must not make every leader tied.
const MAX_BAND: f64 = 0.05;
/// The stored winner stays unless the rounds show it slower than the fastest by more than
/// this many tie bands: a challenger must beat the incumbent clearly, not by the few percent
/// the rankings of microsecond kernels move by from one process to the next.
const KEEP_BANDS: f64 = 2.0;

/// The tie band of a contest, as a fraction of the fastest median: [`TIE_WITHIN`], or half
/// the fastest leader's relative IQR where that is wider, at most [`MAX_BAND`].
fn tie_band(fastest: &[f64]) -> f64 {
    TIE_WITHIN
        .max(BAND_OF_SPREAD * crate::measure::stats::rel_iqr_pct(fastest) / 100.0)
        .min(MAX_BAND)
}
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
    let mut rows =
        crate::store::best::read_best_checked(&crate::store::best::best_path(&opts.out_dir))
            .map(|f| f.rows)
            .unwrap_or_default();
    if op.is_builtin() {
        // The shipped row stands in only where the run's best.csv has none for its key (a
        // row of the other --cache state included).
        let shipped: Vec<_> = crate::store::best::shipped_best()
            .into_iter()
            .filter(|s| !rows.iter().any(|r| r.key() == s.key()))
            .collect();
        rows.extend(shipped);
    }
    // A winner stored under another --cache state won another contest.
    let row = rows.into_iter().find(|r| {
        r.shape == info.shape
            && r.cache == info.cache
            && super::search::stored_for(r, op, Some(&info.gpu))
    })?;
    let mut want = crate::store::best::stored_params(op, &row.params);
    want.sort();
    records.iter().position(|r| {
        let mut have = r.params.clone();
        have.sort();
        r.kind == Kind::Variant && r.status == Status::Ok && have == want
    })
}

/// Re-times the leading variants interleaved, computes each one's interval against the
/// fastest, and picks the winner by the tie rule ([`pick`]). The roof baselines (`roofs`,
/// record positions) run in every round too, without competing: a leader's % of roof then
/// compares its median over the rounds with the roof's, the roof taken at the faster of that
/// and its first timing ([`crate::store::record::roof_median`]).
///
/// Successive halving spends the rounds where they decide something: every leader gets a
/// stage of interleaved rounds, then those clearly slower than the fastest (slower by more
/// than the tie band at 95 % confidence) drop out and the rest get another stage, until
/// `--confirm-rounds` rounds are spent, one leader is left, or every one left is surely
/// within the band (tied whatever more rounds would show).
///
/// Each task's record and journal key come in `(task_record, task_key)`; the stored winner and
/// the roofs in `(stored, roofs)`. A leader whose own check fails is failed and journaled so.
fn retime_leaders(
    job: &Job,
    gpus: &mut Gpus,
    (task_record, task_key): (&HashMap<usize, usize>, &HashMap<usize, JournalKey>),
    records: &mut [Record],
    opts: &TuneOptions,
    (stored, roofs): (Option<usize>, &[usize]),
    journal: &mut Journal,
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
    // The stored winner always takes part, so only the contest can take its place: one run's
    // first pass can time a microsecond kernel 10 % off.
    if let Some(&(id, at)) = leaders.iter().find(|(_, at)| Some(*at) == stored) {
        if !picked.iter().any(|(_, p)| *p == at) {
            picked.push((id, at));
        }
    }
    if picked.len() < 2 {
        return Ok(None);
    }
    let seed = opts.seed ^ 0xC0_FFEE;
    let ids: Vec<usize> = picked.iter().map(|(id, _)| *id).collect();
    let kept = picked
        .iter()
        .find(|(_, at)| Some(*at) == stored)
        .map(|(id, _)| *id);
    let roof_ids: Vec<(usize, usize)> = task_record
        .iter()
        .filter(|(_, at)| roofs.contains(at))
        .map(|(&id, &at)| (id, at))
        .collect();
    let slowest = picked
        .iter()
        .map(|(_, at)| *at)
        .chain(roof_ids.iter().map(|(_, at)| *at))
        .map(median)
        .filter(|m| m.is_finite())
        .reduce(f64::max);
    // Leaders whose own check failed in a stage: they leave the contest and lose their
    // verified status below.
    let mut failed: Vec<(usize, String)> = Vec::new();
    let halved = halving(&ids, kept, opts.confirm_rounds, seed, |alive, rounds| {
        let mut cjob = job.clone();
        cjob.tasks = job
            .tasks
            .iter()
            .filter(|t| alive.contains(&t.id) || roof_ids.iter().any(|(id, _)| *id == t.id))
            .cloned()
            .collect();
        cjob.confirm_rounds = rounds;
        cjob.adaptive_cutoff = None;
        // The worker's time limit for the whole interleaved job scales with this speed: the
        // slowest task's, so that no task of the job runs longer than the limit assumes.
        cjob.best_ms = slowest;
        let mut got: HashMap<usize, Vec<f64>> = HashMap::new();
        gpus.run(&cjob, &mut |r| {
            if r.samples.len() >= 2 {
                got.insert(r.id, r.samples);
            } else if r.check_failed && alive.contains(&r.id) {
                failed.push((r.id, r.error));
            }
        })?;
        Ok(got)
    });
    // Recorded even when a later stage ended the contest with an error.
    for (id, why) in &failed {
        if let Some(&(_, at)) = picked.iter().find(|(i, _)| i == id) {
            let rec = &mut records[at];
            let first_ms = rec.stats.map_or(f64::NAN, |s| s.median_ms);
            rec.fail_after_timing(format!(
                "failed when re-run for the confirmation (first timed at {first_ms:.4} ms): {why}"
            ));
            let failure = crate::isolate::protocol::failed(*id, rec.error.clone());
            super::rounds::journal_again(journal, task_key.get(id), &failure);
        }
    }
    let (mut samples, spent) = halved?;
    for (id, _) in &failed {
        // Samples of the stages it passed do not make it a candidate.
        samples.remove(id);
    }
    let timed: Vec<(usize, Vec<f64>)> = picked
        .iter()
        .filter_map(|(id, at)| samples.remove(id).map(|s| (*at, s)))
        .collect();
    if timed.len() < 2 {
        return Ok(None);
    }
    let confidence = pick(&timed, records, stored, seed, spent);
    let winner = &timed
        .iter()
        .find(|(at, _)| *at == confidence.winner)
        .expect("the winner was timed")
        .1;
    for (id, at) in roof_ids {
        if let Some(s) = samples.remove(&id) {
            let cmp = crate::measure::stats::compare(winner, &s, 2000, seed);
            records[at].confirm = Some(confirmed(&s, &cmp, false, false));
        }
    }
    Ok(Some(confidence))
}

/// The halving schedule over the leaders `ids` (task ids): stages of a quarter of `total`
/// interleaved rounds (at least [`MIN_STAGE_ROUNDS`]), each timed by `time(alive, rounds)`;
/// after each, the leaders slower than the fastest by more than the tie band at 95 %
/// confidence drop out, and the contest ends when the rounds are spent, one leader is left,
/// or none is undecided (each left is surely within the band), or the stored winner `kept`
/// is surely within [`KEEP_BANDS`] bands of the fastest (the tie rule keeps it, so more
/// rounds would not change the winner). A leader that failed to re-time leaves. Returns
/// every leader's samples, in round order, and the rounds spent.
fn halving(
    ids: &[usize],
    kept: Option<usize>,
    total: usize,
    seed: u64,
    mut time: impl FnMut(&[usize], usize) -> Result<HashMap<usize, Vec<f64>>>,
) -> Result<(HashMap<usize, Vec<f64>>, usize)> {
    let stage = (total / 4).max(MIN_STAGE_ROUNDS);
    let mut samples: HashMap<usize, Vec<f64>> = HashMap::new();
    let mut alive: Vec<usize> = ids.to_vec();
    let mut spent = 0;
    while spent < total && alive.len() > 1 {
        // A remainder too short to compare (under two rounds) joins this stage.
        let rounds = match total - spent {
            left if left < stage + 2 => left,
            _ => stage,
        };
        let got = time(&alive, rounds)?;
        if crate::isolate::interrupt::interrupted() {
            break;
        }
        spent += rounds;
        alive.retain(|id| got.contains_key(id));
        for (id, s) in got {
            samples.entry(id).or_default().extend(s);
        }
        let Some(fastest) = alive
            .iter()
            .map(|id| &samples[id])
            .min_by(|a, b| med(a).total_cmp(&med(b)))
            .cloned()
        else {
            break;
        };
        let band = tie_band(&fastest) * 100.0;
        let surely_kept = kept.filter(|k| alive.contains(k)).is_some_and(|k| {
            crate::measure::stats::compare(&fastest, &samples[&k], 2000, seed).ci_high_pct
                <= KEEP_BANDS * band
        });
        if surely_kept {
            break;
        }
        let mut undecided = false;
        alive.retain(|id| {
            let cmp = crate::measure::stats::compare(&fastest, &samples[id], 2000, seed);
            undecided |= cmp.ci_low_pct <= band && cmp.ci_high_pct > band;
            cmp.ci_low_pct <= band
        });
        if !undecided {
            break;
        }
    }
    Ok((samples, spent))
}

/// What a record keeps of its rounds: its median there and `cmp`, its comparison with the
/// winner (none for the winner itself).
fn confirmed(
    samples: &[f64],
    cmp: &crate::measure::stats::Comparison,
    tied: bool,
    winner: bool,
) -> crate::store::record::Confirmed {
    let (vs, low, high) = if winner {
        (0.0, 0.0, 0.0)
    } else {
        (cmp.slower_pct, cmp.ci_low_pct, cmp.ci_high_pct)
    };
    crate::store::record::Confirmed {
        median_ms: med(samples),
        vs_winner_pct: vs,
        ci_low_pct: low,
        ci_high_pct: high,
        tied,
        winner,
    }
}

fn med(s: &[f64]) -> f64 {
    crate::measure::stats::median(s)
}

/// The tie rule. The tie set is the fastest leader and every leader tied with it: one the
/// rounds cannot show to be slower by more than the tie band ([`tie_band`]) at 95 %
/// confidence (its median within the band, or the low end of its interval) — the leaders
/// the halving could not separate. The winner is the stored winner while the rounds cannot
/// show it slower than the fastest by more than [`KEEP_BANDS`] bands (a re-run keeps its
/// answer unless a challenger is clearly faster), else the tie set's member with the fewest
/// registers, then the first in the space. Nothing of it depends on which member the noise
/// made fastest.
fn pick(
    timed: &[(usize, Vec<f64>)],
    records: &mut [Record],
    stored: Option<usize>,
    seed: u64,
    rounds: usize,
) -> Confidence {
    // The leader is the fastest of those timed in every round: a leader the halving dropped
    // was timed only in the first stages, and its median over them does not compare with a
    // median over all the rounds (the GPU may run slower or faster later on).
    let full = timed
        .iter()
        .map(|(_, s)| s.len())
        .max()
        .expect("two or more");
    let leader = timed
        .iter()
        .filter(|(_, s)| s.len() == full)
        .min_by(|a, b| med(&a.1).total_cmp(&med(&b.1)))
        .expect("two or more");
    let band = tie_band(&leader.1);
    // Each comparison is over the rounds both were timed in (`compare` pairs them by round).
    let tied: Vec<usize> = timed
        .iter()
        .filter(|(at, s)| {
            let cmp = crate::measure::stats::compare(&leader.1, s, 2000, seed);
            *at == leader.0 || cmp.slower_pct <= band * 100.0 || cmp.ci_low_pct <= band * 100.0
        })
        .map(|(at, _)| *at)
        .collect();
    let kept = stored.filter(|at| {
        tied.contains(at)
            || timed.iter().find(|(t, _)| t == at).is_some_and(|(_, s)| {
                crate::measure::stats::compare(&leader.1, s, 2000, seed).ci_low_pct
                    <= KEEP_BANDS * band * 100.0
            })
    });
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
        // The winner is in its own tie set; it is tied only when others are.
        let is_tied = tied.len() > 1 && tied.contains(at);
        records[*at].confirm = Some(confirmed(s, &cmp, is_tied, mine));
        if !mine && runner_up.is_none_or(|(_, r)| cmp.slower_pct < r.slower_pct) {
            runner_up = Some((*at, cmp));
        }
    }
    Confidence {
        rounds,
        candidates: timed.iter().map(|(at, _)| *at).collect(),
        winner,
        tied_with: tied.into_iter().filter(|&at| at != winner).collect(),
        kept_stored: kept.is_some(),
        band_pct: band * 100.0,
        runner_up,
        winner_iqr_pct: crate::measure::stats::rel_iqr_pct(winner_samples),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::record::Record;

    /// `n` samples around `ms`: a fixed up-and-down pattern of +-`noise` (a fraction).
    fn around(ms: f64, noise: f64, n: usize, phase: usize) -> Vec<f64> {
        (0..n)
            .map(|i| ms * (1.0 + noise * (((i + phase) * 7 % 11) as f64 / 5.0 - 1.0)))
            .collect()
    }

    /// A fake device for the schedule: leader `id` takes `means[id]`, with noise.
    fn timer(
        means: Vec<f64>,
        noise: f64,
        log: &mut Vec<(Vec<usize>, usize)>,
    ) -> impl FnMut(&[usize], usize) -> Result<HashMap<usize, Vec<f64>>> + '_ {
        let mut round = 0;
        move |alive: &[usize], rounds: usize| {
            log.push((alive.to_vec(), rounds));
            let got = alive
                .iter()
                .map(|&id| (id, around(means[id], noise, rounds, round + id)))
                .collect();
            round += rounds;
            Ok(got)
        }
    }

    #[test]
    fn halving_drops_the_clearly_slower_and_spends_the_rest_on_the_undecided() {
        // 0 and 1 are 2 % apart in 5 % noise (the band is about 2.5 %): undecided, so they go
        // on to the last round; 2 and 3 are 30 % slower and drop after the first stage.
        let mut log = Vec::new();
        let (samples, spent) = halving(
            &[0, 1, 2, 3],
            None,
            50,
            7,
            timer(vec![1.0, 1.02, 1.3, 1.3], 0.05, &mut log),
        )
        .unwrap();
        assert_eq!(spent, 50);
        assert_eq!(log[0], (vec![0, 1, 2, 3], 12));
        assert!(
            log[1..].iter().all(|(alive, _)| alive == &vec![0, 1]),
            "{log:?}"
        );
        assert_eq!((samples[&2].len(), samples[&3].len()), (12, 12));
        assert_eq!((samples[&0].len(), samples[&1].len()), (50, 50));
    }

    #[test]
    fn halving_stops_once_nothing_is_undecided() {
        // Quiet leaders: 0 and 1 surely tied (0.1 % apart), 2 surely out (10 %): one stage.
        let mut log = Vec::new();
        let (samples, spent) = halving(
            &[0, 1, 2],
            None,
            50,
            7,
            timer(vec![1.0, 1.001, 1.1], 0.001, &mut log),
        )
        .unwrap();
        assert_eq!((spent, log.len()), (12, 1));
        assert_eq!(samples[&0].len(), 12);
        // Too few rounds for a quarter: stages of the minimum.
        let mut log = Vec::new();
        halving(&[0, 1], None, 8, 7, timer(vec![1.0, 1.02], 0.05, &mut log)).unwrap();
        assert_eq!(log.iter().map(|(_, r)| *r).collect::<Vec<_>>(), vec![5, 3]);
        // A last stage of one round would compare nothing: it joins the stage before it.
        let mut log = Vec::new();
        let (_, spent) =
            halving(&[0, 1], None, 21, 7, timer(vec![1.0, 1.02], 0.05, &mut log)).unwrap();
        assert_eq!(spent, 21);
        assert_eq!(
            log.iter().map(|(_, r)| *r).collect::<Vec<_>>(),
            vec![5, 5, 5, 6]
        );
    }

    #[test]
    fn a_leader_dropped_early_is_compared_over_its_own_rounds() {
        // The GPU runs 10 % slower after the first stage (12 rounds). Leader 1 (fewest
        // registers) was 6 % slower than 0 over that stage and dropped out; its median over
        // those fast rounds is below the others' medians over all 50. It is neither the
        // fastest nor tied: over the rounds both ran, it is 6 % slower.
        let drift = |ms: f64, phase: usize| -> Vec<f64> {
            around(ms, 0.005, 50, phase)
                .into_iter()
                .enumerate()
                .map(|(i, t)| if i < 12 { t } else { t * 1.1 })
                .collect()
        };
        let timed = vec![
            (0, drift(1.0, 0)),
            (1, around(1.06, 0.005, 12, 1)),
            (2, drift(1.012, 2)),
        ];
        assert!(
            med(&timed[1].1) < med(&timed[0].1),
            "the unpaired medians mislead"
        );
        let mut recs = records(&[64, 16, 48]);
        let c = pick(&timed, &mut recs, None, 7, 50);
        // 0 and 2 are tied (1.2 % apart): 2 wins on registers.
        assert_eq!((c.winner, c.tied_with.clone()), (2, vec![0]), "{c:?}");
        let one = recs[1].confirm.expect("re-timed");
        assert!(!one.tied && one.vs_winner_pct > 4.0, "{one:?}");
    }

    #[test]
    fn halving_stops_once_the_stored_winner_is_surely_kept() {
        // 0 and 1 are 0.5 % apart in 2 % noise: undecided against the band, so without a
        // stored winner every round is spent; with 1 stored, it is surely within two bands
        // after the first stage and the contest ends there.
        let means = vec![1.0, 1.005, 1.3];
        let mut log = Vec::new();
        let (_, spent) = halving(
            &[0, 1, 2],
            None,
            50,
            7,
            timer(means.clone(), 0.02, &mut log),
        )
        .unwrap();
        assert!(spent > 12, "undecided without a stored winner: {log:?}");
        let mut log = Vec::new();
        let (samples, spent) =
            halving(&[0, 1, 2], Some(1), 50, 7, timer(means, 0.02, &mut log)).unwrap();
        assert_eq!((spent, log.len()), (12, 1), "{log:?}");
        assert_eq!(samples[&1].len(), 12);
        // A stored winner shown slower than two bands decides nothing: the contest goes on.
        let mut log = Vec::new();
        let (_, spent) = halving(
            &[0, 1, 2],
            Some(2),
            50,
            7,
            timer(vec![1.0, 1.005, 1.3], 0.02, &mut log),
        )
        .unwrap();
        assert!(spent > 12, "{log:?}");
    }

    fn records(registers: &[i32]) -> Vec<Record> {
        registers
            .iter()
            .enumerate()
            .map(|(i, &r)| {
                let mut rec = Record::new(Kind::Variant, &format!("v{i:04}"), vec![]);
                rec.registers = Some(r);
                rec
            })
            .collect()
    }

    #[test]
    fn the_tie_rule_ignores_which_tied_leader_the_noise_made_fastest() {
        // Record 2 is fastest by 1 % (inside the band): 1 wins on registers, whichever of
        // the three is fastest; record 3, 20 % slower, is not in the tie set.
        for fastest in [0, 1, 2] {
            let mut recs = records(&[40, 32, 48, 16]);
            let timed: Vec<(usize, Vec<f64>)> = (0..4)
                .map(|at| {
                    let ms = match at {
                        3 => 1.2,
                        _ if at == fastest => 0.99,
                        _ => 1.0,
                    };
                    (at, around(ms, 0.001, 30, at))
                })
                .collect();
            let c = pick(&timed, &mut recs, None, 1, 30);
            assert_eq!(c.winner, 1, "fastest {fastest}");
            let mut tied = c.tied_with.clone();
            tied.sort();
            assert_eq!(tied, vec![0, 2]);
            assert!(!c.kept_stored);
            assert!(recs[1].confirm.unwrap().winner && !recs[3].confirm.unwrap().tied);
        }
    }

    #[test]
    fn the_stored_winner_stays_while_it_is_tied_and_not_beyond() {
        let timed = vec![
            (0, around(1.0, 0.001, 30, 0)),
            (1, around(1.01, 0.001, 30, 1)),
        ];
        let c = pick(&timed, &mut records(&[16, 64]), Some(1), 1, 30);
        assert_eq!((c.winner, c.kept_stored), (1, true));
        // 2.5 % slower in quiet data: outside the 1.5 % band, inside two: still kept.
        let timed = vec![
            (0, around(1.0, 0.001, 30, 0)),
            (1, around(1.025, 0.001, 30, 1)),
        ];
        let c = pick(&timed, &mut records(&[16, 64]), Some(1), 1, 30);
        assert_eq!(
            (c.winner, c.kept_stored, c.tied_with.clone()),
            (1, true, vec![0])
        );
        // 5 % slower: clearly beaten, so the rule no longer keeps it.
        let timed = vec![
            (0, around(1.0, 0.001, 30, 0)),
            (1, around(1.05, 0.001, 30, 1)),
        ];
        let c = pick(&timed, &mut records(&[16, 64]), Some(1), 1, 30);
        assert_eq!((c.winner, c.kept_stored), (0, false));
        assert!(c.tied_with.is_empty());
    }

    #[test]
    fn noisy_leaders_widen_the_tie_band() {
        assert_eq!(tie_band(&around(1.0, 0.001, 30, 0)), TIE_WITHIN);
        let noisy = around(1.0, 0.06, 30, 0);
        let want = 0.5 * crate::measure::stats::rel_iqr_pct(&noisy) / 100.0;
        assert!(want > TIE_WITHIN && tie_band(&noisy) == want, "{want}");
        // A few wild launches do not tie everything: the band stops at 5 %.
        assert_eq!(tie_band(&around(1.0, 0.5, 30, 0)), MAX_BAND);
    }
}
