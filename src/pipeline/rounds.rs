//! The measuring stages: [`rounds`] runs the job on the GPU, each variant as soon as its
//! source compiles, one round per batch of a search (a single round when every live
//! candidate is measured), journaling every result;
//! [`settle`] flags and re-times what was measured while the GPU throttled and marks what
//! never ran.

use super::build::{env, Built, Round};
use super::job::{Ledger, Staged};
use super::options::TuneOptions;
use super::outcome::{Remeasured, TuneOutcome};
use super::progress::bar;
use super::search::Search;
use crate::error::{Error, Result};
use crate::isolate::device::Device;
use crate::isolate::protocol::{Job, Task, TaskResult};
use crate::isolate::worker::{run_tasks, GpuWorker, Runner};
use crate::measure::clocks::ClockSample;
use crate::spec::ops::one_line;
use crate::store::journal::{Journal, JournalKey};
use crate::store::record::{Kind, Note, Record, RunInfo, Status};
use indicatif::ProgressBar;
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Where GPU work runs: worker processes of `exe` (killed after `watchdog` without an
/// answer), or this process's device.
pub(super) struct Gpus {
    exe: Option<PathBuf>,
    device: usize,
    watchdog: Duration,
    /// This process's device (without workers), opened when first needed.
    local: Option<Box<dyn Device>>,
    /// The worker the last job left idle, with its session: the next job reuses it.
    idle: Option<GpuWorker>,
}

impl Gpus {
    /// Runs `job`'s tasks, calling `on_result` as each finishes; returns the number of
    /// worker restarts.
    pub fn run(&mut self, job: &Job, on_result: &mut dyn FnMut(TaskResult)) -> Result<usize> {
        let runner = match &self.exe {
            Some(exe) => Runner::Workers {
                exe: exe.clone(),
                watchdog: self.watchdog,
                first: self.idle.take(),
            },
            None => {
                if self.local.is_none() {
                    self.local = Some(crate::isolate::worker::open_device(self.device)?);
                }
                Runner::Local(self.local.as_deref_mut().expect("opened above"))
            }
        };
        let (restarts, idle) = run_tasks(job, runner, on_result)?;
        self.idle = idle;
        Ok(restarts)
    }

    /// The worker the last job left idle, if any: the caller keeps it for a next run or
    /// drops it (which ends it).
    pub fn into_idle(self) -> Option<GpuWorker> {
        self.idle
    }
}

/// The job measured: every record has its result, or says why it has none.
pub(super) struct Measured {
    pub built: Built,
    pub info: RunInfo,
    pub work: f64,
    pub ledger: Ledger,
    pub n_baselines: usize,
    pub job: Job,
    /// Every task of every round.
    pub all_tasks: Vec<Task>,
    /// The NVML reading taken after each fresh result, with its record's index.
    pub clock_samples: Vec<(usize, ClockSample)>,
    /// The run's journal, still open: a result that fails a later check (a re-measure, the
    /// confirmation) is journaled too, so that `--resume` does not bring its first timing back.
    pub journal: Journal,
    pub journal_error: Option<Error>,
    /// What stopped the rounds, when something did.
    pub fatal: Option<Error>,
    pub gpus: Gpus,
}

/// What taking the results in keeps beside the records.
struct Tally {
    journal: Journal,
    journal_error: Option<Error>,
    clock_samples: Vec<(usize, ClockSample)>,
    /// The fastest variant median so far: the progress bar shows it, and each job's
    /// adaptive cutoff starts from it ([`Job::best_ms`]).
    best_ms: f64,
    pb: ProgressBar,
    work: f64,
    unit: &'static str,
}

impl Tally {
    /// Takes one task's result into its record; a `fresh` one (not reused from the journal)
    /// is journaled, and its clock reading and warm-up are kept.
    fn take(&mut self, ledger: &mut Ledger, outcome: &mut TuneOutcome, r: TaskResult, fresh: bool) {
        let Some(&at) = ledger.task_record.get(&r.id) else {
            return;
        };
        if fresh {
            if let Some(key) = ledger.task_key.get(&r.id) {
                if let Err(e) = self.journal.append(key, &r) {
                    self.journal_error.get_or_insert(e);
                }
            }
        }
        if let (Some(c), true) = (r.clock, fresh) {
            self.clock_samples.push((at, c));
        }
        if let (Some(w), true) = (r.warmup, fresh) {
            outcome.warmups.push((ledger.records[at].label(), w));
        }
        let rec = &mut ledger.records[at];
        rec.registers = r.registers.or(rec.registers);
        outcome.phases.verify_s += r.verify_s;
        outcome.phases.timing_s += r.timing_s;
        match r.stats {
            Some(stats) => {
                rec.status = Status::Ok;
                rec.error.clear();
                rec.throughput = Some(self.work / (stats.median_ms * 1e-3) / 1e9);
                rec.stats = Some(stats);
                if rec.kind == Kind::Variant && stats.median_ms < self.best_ms {
                    self.best_ms = stats.median_ms;
                    let unit = self.unit;
                    self.pb.set_message(format!(
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
        self.pb.inc(1);
    }
}

/// Runs the rounds: results from an earlier run's journal are reused, the rest run on the
/// GPU; after each round the search hears what it measured and proposes the next, which is
/// built and run in turn, until the search or its budget is spent or Ctrl-C. A failure of the
/// GPU path ends the rounds and is kept in [`Measured::fatal`].
pub(super) fn rounds(opts: &TuneOptions, staged: Staged) -> Result<Measured> {
    let Staged {
        mut built,
        info,
        work,
        unit,
        mut ledger,
        n_baselines,
        mut job,
        journal,
        earlier,
    } = staged;
    let mut gpus = Gpus {
        exe: opts.isolation.worker_exe().map(PathBuf::from),
        device: opts.device,
        watchdog: Duration::from_secs_f64(opts.watchdog_s.max(0.1)),
        local: built.setup.local_device.take(),
        idle: built.setup.first_worker.take(),
    };
    let mut all_tasks: Vec<Task> = Vec::new();
    let pb = bar(
        job.tasks.len() + built.prep.waiting() + built.search.as_ref().map_or(0, Search::remaining),
        "tune",
        opts.progress,
    );
    let mut tally = Tally {
        journal,
        journal_error: None,
        clock_samples: Vec::new(),
        best_ms: f64::INFINITY,
        pb,
        work,
        unit,
    };
    let mut fatal = None;
    // Worker processes keep their session from job to job, so what compiled is measured
    // while the rest compiles; in this process each job opens a context, so a round runs
    // once all of it has compiled.
    let stream = gpus.exe.is_some();
    // What the search hears, and when, is fixed by the order of its rounds (see [`Told`]),
    // not by the order sources finish compiling.
    let mut told = Told::new(&built.first_round);
    // Set once the search proposes nothing more (its budget is spent).
    let mut search_done = built.search.is_none();
    let may_ask = |search_done: bool, told: &Told| {
        !search_done && !crate::isolate::interrupt::interrupted() && told.ready().is_some()
    };
    loop {
        let may_ask_now = may_ask(search_done, &told);
        let t = Instant::now();
        let builds = if !stream {
            let mut all = Vec::new();
            while built.prep.busy() {
                all.extend(built.prep.wait_ready());
            }
            all
        } else if job.tasks.is_empty() && !may_ask_now {
            built.prep.wait_ready()
        } else {
            built.prep.ready()
        };
        // Time the GPU waited for the compiler.
        built.outcome.phases.compile_s += t.elapsed().as_secs_f64();
        let env = env(opts, &built.setup, built.work_dir.path());
        for b in &builds {
            told.done.insert(b.candidate, None);
        }
        for (task, candidate) in tasks_of(&built.prep, &env, &builds, &mut ledger) {
            told.done.insert(candidate, Some(task.id));
            job.tasks.push(task);
        }
        if crate::isolate::interrupt::interrupted() {
            job.tasks.clear(); // their records say "not run"
        }
        if !job.tasks.is_empty() {
            let t = Instant::now();
            let ran = run_job(
                &mut job,
                &mut gpus,
                &mut all_tasks,
                &earlier,
                &mut ledger,
                &mut tally,
                &mut built.outcome,
            );
            built.outcome.phases.gpu_s += t.elapsed().as_secs_f64();
            if let Err(e) = ran {
                fatal = Some(e);
                break;
            }
            continue;
        }
        // Again: the builds just taken (say, the last of a round, all failed to compile) may
        // have emptied the round.
        if !may_ask(search_done, &told) {
            if built.prep.busy() && built.prep.compiling() > 0 {
                continue;
            }
            break;
        }
        let s = built.search.as_mut().expect("a search until it is done");
        let t = Instant::now();
        let next = next_round(s, &mut told, &ledger, &env);
        built.outcome.phases.search_s += t.elapsed().as_secs_f64();
        let next = match next {
            Ok(next) => next,
            Err(e) => {
                fatal = Some(e);
                break;
            }
        };
        if next.is_empty() {
            search_done = true;
            continue;
        }
        let t = Instant::now();
        let started = built.prep.start(&env, &next);
        built.outcome.phases.compile_s += t.elapsed().as_secs_f64();
        if let Err(e) = started {
            // What was measured stays; the round that could not start is not run.
            fatal = Some(e);
            break;
        }
        let pb = &tally.pb;
        pb.set_length(pb.position() + next.len() as u64 + s.remaining() as u64);
    }
    tally.pb.finish_and_clear();
    built.prep.count_into(&mut built.outcome);
    built.outcome.search = built.search.as_ref().map(|s| s.summary("measured"));
    Ok(Measured {
        built,
        info,
        work,
        ledger,
        n_baselines,
        job,
        all_tasks,
        clock_samples: tally.clock_samples,
        journal: tally.journal,
        journal_error: tally.journal_error,
        fatal,
        gpus,
    })
}

/// The GPU tasks (with their candidates) of the sources just built; a source that did not
/// render or compile gets its failure in its record instead.
fn tasks_of(
    prep: &super::build::Prepared,
    env: &super::build::BuildEnv,
    builds: &[super::build::Build],
    ledger: &mut Ledger,
) -> Vec<(Task, usize)> {
    builds
        .iter()
        .filter_map(|b| {
            prep.task(
                env,
                b,
                &mut ledger.records,
                &ledger.task_record,
                &mut ledger.task_key,
            )
            .map(|t| (t, b.candidate))
        })
        .collect()
}

/// Tells the search what the proposals [`Told::ready`] allows measured (in the order it
/// hears them; a source that did not compile is not told), then asks it for the next round,
/// which joins the proposals in the order the search is to hear them
/// ([`super::build::BuildEnv::heard_order`]); empty when its budget is spent.
fn next_round(
    s: &mut Search,
    told: &mut Told,
    ledger: &Ledger,
    env: &super::build::BuildEnv,
) -> Result<Vec<usize>> {
    for (candidate, task) in told.take_ready() {
        let Some(id) = task else {
            continue;
        };
        let rec = &ledger.records[ledger.task_record[&id]];
        s.tell(
            candidate,
            rec.stats
                .filter(|_| rec.status == Status::Ok)
                .map(|st| st.median_ms),
        );
    }
    let next = env.heard_order(s.ask(env.candidates))?;
    told.proposed(&next);
    Ok(next.order)
}

/// The search's proposals not yet told to it, and what became of each that finished.
///
/// The next round may be asked for while a few sources of the latest still compile (a round
/// would otherwise wait for its slowest compile), but which results the search has heard by
/// then must not depend on which sources happened to finish first: that would make two runs
/// of the same command propose different configurations. So the search hears each round in a
/// fixed order (proposal order, the spec's costliest compiles last:
/// [`super::build::BuildEnv::heard_order`]), and is asked again once all of it but the
/// latest round's last [`STRAGGLERS`] (or its heavy compiles, where they are more) have
/// finished; those are told before the round after.
struct Told {
    /// Proposed and not yet told, in the order the search hears them.
    untold: std::collections::VecDeque<usize>,
    /// How many of the latest round's last may still compile when the search is asked.
    excused: usize,
    /// Untold candidates whose source finished: their task id, or `None` where there was no
    /// task to run (it did not render or compile).
    done: HashMap<usize, Option<usize>>,
}

impl Told {
    fn new(first_round: &Round) -> Told {
        Told {
            untold: first_round.order.iter().copied().collect(),
            excused: excused(first_round),
            done: HashMap::new(),
        }
    }

    /// How many of the untold proposals (from the first) the search hears now, when it may
    /// be asked again: all but the latest round's excused last ones, once those before them
    /// have all finished. `None` while one of them is still compiling.
    fn ready(&self) -> Option<usize> {
        let n = self.untold.len().saturating_sub(self.excused);
        self.untold
            .iter()
            .take(n)
            .all(|c| self.done.contains_key(c))
            .then_some(n)
    }

    /// The proposals [`Told::ready`] allows, in the order heard, each with its task id (`None`:
    /// it had no task); they are told from here on, and forgotten here. None while one of
    /// them is unfinished.
    fn take_ready(&mut self) -> Vec<(usize, Option<usize>)> {
        let n = self.ready().unwrap_or(0);
        self.untold
            .drain(..n)
            .map(|c| (c, self.done.remove(&c).flatten()))
            .collect()
    }

    /// A new round, to be heard in its order.
    fn proposed(&mut self, round: &Round) {
        self.untold.extend(&round.order);
        self.excused = excused(round);
    }
}

/// Runs `job`'s tasks (results in an earlier run's journal are reused instead) and takes
/// each result in; the job's task list is empty afterwards. A failure of the GPU path is
/// returned (results so far were taken in).
#[allow(clippy::too_many_arguments)]
fn run_job(
    job: &mut Job,
    gpus: &mut Gpus,
    all_tasks: &mut Vec<Task>,
    earlier: &HashMap<JournalKey, TaskResult>,
    ledger: &mut Ledger,
    tally: &mut Tally,
    outcome: &mut TuneOutcome,
) -> Result<()> {
    all_tasks.extend(job.tasks.iter().cloned());
    let mut reused = Vec::new();
    job.tasks.retain(
        |t| match ledger.task_key.get(&t.id).and_then(|k| earlier.get(k)) {
            Some(r) => {
                reused.push(TaskResult {
                    id: t.id,
                    ..r.clone()
                });
                false
            }
            None => true,
        },
    );
    outcome.reused += reused.len();
    for r in reused {
        tally.take(ledger, outcome, r, false);
    }
    if job.tasks.is_empty() {
        return Ok(());
    }
    job.best_ms = Some(tally.best_ms).filter(|b| b.is_finite());
    let run = gpus.run(job, &mut |r| tally.take(ledger, outcome, r, true));
    job.tasks.clear();
    outcome.context_restarts += run?;
    Ok(())
}

/// Flags the results measured while the GPU throttled or ran far below its steady clock,
/// re-times them when they are too many, reports a journal that could not be written, and
/// says why the records that never ran did not (Ctrl-C, or the failure that ended the rounds).
pub(super) fn settle(m: Measured) -> Measured {
    let mut m = m;
    let outcome = &mut m.built.outcome;
    let records = &mut m.ledger.records;
    // Results measured while the GPU throttled or ran far below its steady clock are flagged.
    let readings: Vec<ClockSample> = m.clock_samples.iter().map(|(_, c)| *c).collect();
    outcome.clocks = crate::measure::clocks::summarize(&readings);
    if let Some(sum) = outcome.clocks {
        for (at, c) in &m.clock_samples {
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
    if m.fatal.is_none() && !crate::isolate::interrupt::interrupted() {
        outcome.remeasured = remeasure_throttled(
            &m.job,
            &m.all_tasks,
            &m.clock_samples,
            &m.ledger.task_record,
            &m.ledger.task_key,
            records,
            m.work,
            &mut m.gpus,
            &mut m.journal,
        );
    }
    if let Some(e) = &m.journal_error {
        eprintln!("warning: the journal could not be written, so this run cannot be resumed: {e}");
    }
    outcome.interrupted = crate::isolate::interrupt::interrupted();
    // Why what never ran did not: the stop, the failure that ended the rounds, or (for a
    // source the stop kept from compiling) the stop too.
    let why = match (&m.fatal, outcome.interrupted) {
        (Some(e), _) => Some(e.to_string()),
        (None, true) => Some(crate::isolate::interrupt::STOPPED.to_string()),
        (None, false) => None,
    };
    if let Some(why) = why {
        for rec in records.iter_mut().filter(|r| {
            r.status == Status::NotRun && !matches!(r.note, Some(Note::PastLimit { .. }))
        }) {
            rec.set_error(why.clone());
        }
    }
    m
}

/// Journals a later result of a task already journaled (a re-measure, or the failure of a
/// later check): a resumed run reads the last entry of a key, so it takes this one, not the
/// first. A task without a key is not journaled; a journal that cannot be written is a
/// warning (the run's CSV has the result).
pub(super) fn journal_again(journal: &mut Journal, key: Option<&JournalKey>, result: &TaskResult) {
    if let Some(key) = key {
        if let Err(e) = journal.append(key, result) {
            eprintln!("warning: a later result could not be journaled: {e}");
        }
    }
}

/// How many of `round`'s last proposals may still compile when the search is asked again: its
/// heavy compiles or [`STRAGGLERS`], whichever are more.
fn excused(round: &Round) -> usize {
    round.heavy.max(STRAGGLERS).min(round.order.len())
}

/// How many of a search round's proposals, the last in the order heard, may still be compiling
/// when the next round is asked for (the GPU has measured the rest; see [`Told`]): compiles at
/// the end of a round then overlap the next. Few, because the search fits the next round
/// without them: a first model round fitted without the last several results of the all-pairs
/// round can miss the fastest region for good, though more stragglers would spare each round
/// the wait for a slow source. A round's heavy compiles, by the spec's `compile_cost`, are
/// excused however many they are ([`excused`]): the spec says they are the slow ones.
pub const STRAGGLERS: usize = 4;

// The search hears at least the first proposals of each round before the next is asked.
const _: () = assert!(STRAGGLERS < super::search::SEARCH_BATCH);

/// Times again, once, the results measured while the GPU throttled or ran far below its
/// steady clock, when they are too many to leave flagged ([`crate::measure::clocks::to_remeasure`]):
/// after [`REMEASURE_PAUSE`], the same tasks go through the same worker path as a second job,
/// and a new result replaces the first only when its own clock reading is clean. `isolation`
/// runs the second job. Returns what it did; a failure of the second job is a warning (the
/// first results stand). A new result, and a variant that fails its second check, are
/// journaled after the first, so that a resumed run takes them.
#[allow(clippy::too_many_arguments)]
fn remeasure_throttled(
    job: &Job,
    all_tasks: &[Task],
    clock_samples: &[(usize, crate::measure::clocks::ClockSample)],
    task_record: &HashMap<usize, usize>,
    task_key: &HashMap<usize, JournalKey>,
    records: &mut [Record],
    work: f64,
    gpus: &mut Gpus,
    journal: &mut Journal,
) -> Option<Remeasured> {
    // The steady clock of every reading, as the CSV's flags use; the timed results' readings.
    let all: Vec<crate::measure::clocks::ClockSample> =
        clock_samples.iter().map(|(_, c)| *c).collect();
    let sum = crate::measure::clocks::summarize(&all)?;
    let readings: Vec<(usize, crate::measure::clocks::ClockSample)> = clock_samples
        .iter()
        .filter(|(at, _)| records[*at].status == Status::Ok)
        .copied()
        .collect();
    let again = crate::measure::clocks::to_remeasure(&readings, sum.steady_sm_mhz);
    if again.is_empty() {
        return None;
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
    std::thread::sleep(super::options::REMEASURE_PAUSE);
    let mut fresh: Vec<(usize, TaskResult)> = Vec::new();
    let run = gpus.run(&rjob, &mut |r| {
        if let Some(&at) = task_record.get(&r.id) {
            fresh.push((at, r));
        }
    });
    if let Err(e) = run {
        eprintln!(
            "warning: re-measuring {} throttled results failed: {e}",
            done.retimed
        );
    }
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
                journal_again(journal, task_key.get(&r.id), &r);
            }
            // A variant that fails its second check is not verified, whatever its first
            // timing was.
            (None, _, _) if !r.error.is_empty() && rec.kind == Kind::Variant => {
                done.still_flagged -= 1;
                rec.fail_after_timing(format!("failed when re-measured: {}", r.error));
                let failure = crate::isolate::protocol::failed(r.id, rec.error.clone());
                journal_again(journal, task_key.get(&r.id), &failure);
            }
            _ => rec.error.push_str("; re-measured once, still flagged"),
        }
    }
    Some(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A round of the candidates `range`, none of them heavy.
    fn round(range: std::ops::Range<usize>) -> Round {
        Round {
            order: range.collect(),
            heavy: 0,
        }
    }

    /// A first round of the candidates `first`, whose finished ones are `done`.
    fn told(first: std::ops::Range<usize>, done: &[usize]) -> Told {
        let mut t = Told::new(&round(first));
        for &c in done {
            t.done.insert(c, Some(c));
        }
        t
    }

    /// A first round of [`N`] proposals and a next of [`M`], each longer than the stragglers.
    const N: usize = STRAGGLERS + 6;
    const M: usize = STRAGGLERS + 2;

    #[test]
    fn the_search_hears_the_same_proposals_whichever_stragglers_finished() {
        // N proposed; the last STRAGGLERS may still compile when the next round is asked.
        let head: Vec<usize> = (0..N - STRAGGLERS).collect();
        let mut early = head.clone();
        early.extend([N - 1, N - 3]);
        let mut late = head.clone();
        late.push(N - STRAGGLERS);
        for done in [&head, &early, &late] {
            assert_eq!(told(0..N, done).ready(), Some(N - STRAGGLERS), "{done:?}");
        }
        // One of the others still compiling: not yet, however many of the tail finished.
        let mut missing: Vec<usize> = (0..N).collect();
        missing.remove(2);
        assert_eq!(told(0..N, &missing).ready(), None);
    }

    #[test]
    fn a_rounds_stragglers_are_heard_first_at_the_next_ask() {
        let mut t = told(0..N, &(0..N - STRAGGLERS).collect::<Vec<_>>());
        let heard: Vec<usize> = t.take_ready().into_iter().map(|(c, _)| c).collect();
        assert_eq!(heard, (0..N - STRAGGLERS).collect::<Vec<_>>());
        // The next round: N..N + M. Its head is not enough while the last round's tail is
        // unfinished; once it finishes, the tail and the head are heard, in proposal order,
        // a tail source that had no task (it did not compile) without one.
        t.proposed(&round(N..N + M));
        for c in N..N + M {
            t.done.insert(c, Some(c));
        }
        assert_eq!(t.ready(), None);
        assert!(t.take_ready().is_empty());
        for c in N - STRAGGLERS..N {
            t.done.insert(c, (c != N - 1).then_some(c));
        }
        let heard = t.take_ready();
        let want: Vec<(usize, Option<usize>)> = (N - STRAGGLERS..N)
            .chain(N..N + M - STRAGGLERS)
            .map(|c| (c, (c != N - 1).then_some(c)))
            .collect();
        assert_eq!(heard, want);
        // The round's own tail waits for the next ask.
        assert_eq!(t.untold, (N + M - STRAGGLERS..N + M).collect::<Vec<_>>());
    }

    #[test]
    fn a_rounds_heavy_compiles_may_all_be_pending_when_they_outnumber_the_stragglers() {
        let heavy = STRAGGLERS + 3;
        let first = Round {
            heavy,
            ..round(0..N + heavy)
        };
        let mut t = Told::new(&first);
        for c in 0..N {
            t.done.insert(c, Some(c));
        }
        assert_eq!(t.ready(), Some(N));
        // A heavy one finished too: the search still hears the same N.
        t.done.insert(N + 1, Some(N + 1));
        assert_eq!(t.ready(), Some(N));
    }

    #[test]
    fn a_round_smaller_than_the_stragglers_may_all_be_pending() {
        let t = told(0..3, &[]);
        assert_eq!(t.ready(), Some(0));
    }
}
