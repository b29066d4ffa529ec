//! The compile pool: NVRTC serializes compiles inside one process, so compiles run in child
//! processes (`tune __compile-worker`), one per core, fed from one queue for the whole run.

use super::protocol::COMPILE_WORKER_ARG;
use crate::cuda::compile::Compiler;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout};
use std::sync::{mpsc, Arc, Mutex};

use super::interrupt::interrupted;

/// Outcome of compiling one source file in a worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CompileReply {
    pub ok: bool,
    pub millis: f64,
    pub from_cache: bool,
    /// Compiler log when `ok` is false.
    pub log: String,
}

/// Entry point of `tune __compile-worker ARCH CACHE_DIR|-`: reads source paths on stdin,
/// writes `PATH.cubin` for each and answers one [`CompileReply`] line per path. Before it
/// reads the first path it compiles a one-line kernel ([`Compiler::warm_up`]), so NVRTC's
/// first-compile costs are paid while the run still prepares when the pool starts its
/// workers early ([`CompilePool::start_workers`]).
pub fn compile_worker_main(args: &[String]) -> i32 {
    super::follow_parent();
    let (Some(arch), Some(cache)) = (args.first(), args.get(1)) else {
        eprintln!("usage: tune {COMPILE_WORKER_ARG} ARCH CACHE_DIR|-");
        return 2;
    };
    let cache = (cache != "-").then(|| PathBuf::from(cache));
    let compiler = match Compiler::new(arch, cache) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    compiler.warm_up();
    let stdout = std::io::stdout();
    for line in std::io::stdin().lock().lines().map_while(|l| l.ok()) {
        let path = PathBuf::from(line.trim());
        let reply = match std::fs::read_to_string(&path) {
            Err(e) => CompileReply {
                ok: false,
                millis: 0.0,
                from_cache: false,
                log: format!("cannot read {}: {e}", path.display()),
            },
            Ok(source) => match compiler.compile(&source) {
                Ok(done) => match std::fs::write(path.with_extension("cubin"), &done.cubin) {
                    Ok(()) => CompileReply {
                        ok: true,
                        millis: done.millis,
                        from_cache: done.from_cache,
                        log: done.log,
                    },
                    Err(e) => CompileReply {
                        ok: false,
                        millis: done.millis,
                        from_cache: false,
                        log: format!("cannot write the cubin: {e}"),
                    },
                },
                Err(f) => CompileReply {
                    ok: false,
                    millis: f.millis,
                    from_cache: false,
                    log: f.log,
                },
            },
        };
        let mut out = stdout.lock();
        let _ = writeln!(
            out,
            "{}",
            serde_json::to_string(&reply).expect("serializable")
        );
        let _ = out.flush();
    }
    0
}

/// A source handed to the pool: the caller's tag (given back with the reply) and its path.
type Item = (usize, PathBuf);

/// What became of a source handed to the pool.
#[derive(Debug, Clone)]
pub enum PoolReply {
    /// The worker's answer: compiled, failed, or the worker died on it.
    Done(CompileReply),
    /// Stopped by the compile time limit ([`CompileLimit`]) after this many seconds.
    TimedOut(f64),
    /// Never compiled: the run was stopped (Ctrl-C).
    Stopped,
    /// Never compiled: no worker had taken it when the pool's deadline
    /// ([`CompilePool::abandon_after`]) passed.
    Abandoned,
}

/// A reply: the tag and what became of its source.
pub type Reply = (usize, PoolReply);

/// How long one source may take in NVRTC before its worker is killed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CompileLimit {
    /// No limit.
    Off,
    /// A fixed limit.
    Seconds(f64),
    /// [`AUTO_LIMIT_FACTOR`] times the run's median compile, at least [`AUTO_LIMIT_FLOOR_S`]:
    /// a few configurations of a space (loops fully unrolled over a large tile) take 10-40
    /// times the typical compile, and a search round waits for its slowest source. The
    /// median counts the compiles still running as longer than any finished one (the first
    /// to finish are the short ones), so there is no limit until more than half of the
    /// compiles started have finished, and at least [`AUTO_LIMIT_AFTER`].
    Auto,
}

/// The automatic limit, in multiples of the median compile.
pub const AUTO_LIMIT_FACTOR: f64 = 15.0;
/// The automatic limit's floor, in seconds. Where the median compile is short (simple
/// transpose tiles, a tenth of a second or so), 15 times it would stop sources that take about
/// a second for good reason (a 64-wide tile unrolled over 16 rows, two tiles per block), so
/// which configurations a search saw would hinge on small differences in compile speed
/// between machines. The loops fully unrolled over a 64-wide tile with one or two rows per
/// thread take several seconds and are still stopped, holding up their round by the limit at
/// most.
pub const AUTO_LIMIT_FLOOR_S: f64 = 1.5;
/// Finished compiles before the automatic limit applies.
pub const AUTO_LIMIT_AFTER: usize = 8;

impl CompileLimit {
    /// The limit now, given the milliseconds of the compiles finished so far and how many
    /// are running.
    fn now(self, finished_ms: &[f64], running: usize) -> Option<std::time::Duration> {
        let seconds = match self {
            CompileLimit::Off => return None,
            CompileLimit::Seconds(s) => s,
            CompileLimit::Auto => {
                // The running ones sort after every finished one.
                let middle = (finished_ms.len() + running) / 2;
                if finished_ms.len() < AUTO_LIMIT_AFTER || middle >= finished_ms.len() {
                    return None;
                }
                let mut ms = finished_ms.to_vec();
                ms.sort_by(f64::total_cmp);
                (AUTO_LIMIT_FACTOR * ms[middle] / 1e3).max(AUTO_LIMIT_FLOOR_S)
            }
        };
        Some(std::time::Duration::from_secs_f64(seconds))
    }
}

/// Compile worker processes that live as long as the pool, fed from one queue: a search
/// compiles round after round, and starting a worker (a process that loads NVRTC) for every
/// round would cost each round that much again. Sources are submitted one at a time and
/// their replies arrive as each finishes ([`CompilePool::recv`]), so the caller can run what
/// compiled while the rest compiles.
///
/// Every submitted source gets exactly one reply: a worker that dies (NVRTC crashed) fails
/// its source and is started again for the next one; a worker past the [`CompileLimit`] is
/// killed the same way. A stop request (Ctrl-C, [`super::interrupt::interrupted`]) kills
/// the workers within [`STOP_POLL`]; what they were compiling, and everything still queued,
/// is answered [`PoolReply::Stopped`].
pub struct CompilePool {
    exe: PathBuf,
    args: [String; 2],
    /// The most workers the pool starts; it starts them as sources queue up, or all at once
    /// ([`CompilePool::start_workers`]).
    max_workers: usize,
    queue: Option<mpsc::Sender<Item>>,
    shared_queue: Arc<Mutex<mpsc::Receiver<Item>>>,
    replies_tx: mpsc::Sender<Reply>,
    replies: mpsc::Receiver<Reply>,
    /// Each worker's current process, for the watch and for dropping the pool.
    slots: Slots,
    /// How long each finished compile took (milliseconds), for the automatic limit.
    finished_ms: Arc<Mutex<Vec<f64>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
    in_flight: usize,
    /// Dropped with the pool: the watch then ends at once instead of at its next poll.
    closed: Option<mpsc::Sender<()>>,
    watch: Option<std::thread::JoinHandle<()>>,
    /// After this, sources a worker takes off the queue are answered
    /// [`PoolReply::Abandoned`] instead of compiled.
    deadline: Arc<Mutex<Option<std::time::Instant>>>,
}

/// One worker: its process (`None` between a death and the next start), since when it
/// compiles the source in hand, and whether the limit killed it.
#[derive(Default)]
struct Worker {
    child: Option<Child>,
    since: Option<std::time::Instant>,
    timed_out: bool,
}

type Slot = Arc<Mutex<Worker>>;

/// Every worker's slot.
type Slots = Arc<Mutex<Vec<Slot>>>;

impl CompilePool {
    /// A pool of up to `workers` processes `exe __compile-worker ARCH CACHE`, each compile
    /// held to `limit`; none is started before the first [`CompilePool::submit`] or
    /// [`CompilePool::start_workers`].
    pub fn new(
        exe: &Path,
        arch: &str,
        cache: Option<&Path>,
        workers: usize,
        limit: CompileLimit,
    ) -> CompilePool {
        let cache_arg = cache
            .map(|c| c.display().to_string())
            .unwrap_or_else(|| "-".into());
        let (tx, rx) = mpsc::channel();
        let (replies_tx, replies) = mpsc::channel();
        let slots: Slots = Arc::default();
        let finished_ms: Arc<Mutex<Vec<f64>>> = Arc::default();
        let (closed, closing) = mpsc::channel::<()>();
        // The watch: workers block in a compile, so a stop or a compile past the limit must
        // kill them.
        let watch = {
            let (slots, finished_ms) = (slots.clone(), finished_ms.clone());
            std::thread::spawn(move || loop {
                if interrupted() {
                    // Again each poll: a worker started or held at the first try.
                    kill_all(&slots);
                } else if let Some(limit) = limit_now(limit, &slots, &finished_ms) {
                    for slot in slots.lock().expect("slots lock").iter() {
                        let mut w = slot.lock().expect("slot lock");
                        if w.since.is_some_and(|t| t.elapsed() > limit) {
                            w.timed_out = true;
                            w.since = None;
                            if let Some(c) = w.child.as_mut() {
                                let _ = c.kill();
                            }
                        }
                    }
                }
                // Polls every STOP_POLL until the pool is dropped (its sender with it).
                if closing.recv_timeout(STOP_POLL) != Err(mpsc::RecvTimeoutError::Timeout) {
                    break;
                }
            })
        };
        CompilePool {
            exe: exe.to_path_buf(),
            args: [arch.to_string(), cache_arg],
            max_workers: workers.max(1),
            queue: Some(tx),
            shared_queue: Arc::new(Mutex::new(rx)),
            replies_tx,
            replies,
            slots,
            finished_ms,
            threads: Vec::new(),
            in_flight: 0,
            closed: Some(closed),
            watch: Some(watch),
            deadline: Arc::default(),
        }
    }

    /// Compiles no source that a worker has not started by `at`: each is answered
    /// [`PoolReply::Abandoned`] as a worker takes it, and the compiles under way finish. A
    /// run with a time budget stops there instead of compiling all it queued.
    pub fn abandon_after(&self, at: std::time::Instant) {
        *self.deadline.lock().expect("deadline lock") = Some(at);
    }

    /// Starts every worker the pool may have now, instead of as sources queue up: a worker
    /// spends its first moments loading NVRTC and compiling its warm-up kernel, which a run
    /// that starts them before its first source is rendered overlaps with that work. The
    /// workers then wait for sources; dropping the pool ends them whether or not any came.
    /// At most `wanted` are started (a run that can compile only so many sources needs no
    /// more); `submit` starts the rest if sources queue up. Fails only when no worker can be
    /// started at all.
    pub fn start_workers(&mut self, wanted: usize) -> Result<()> {
        while self.threads.len() < self.max_workers.min(wanted.max(1)) {
            let before = self.threads.len();
            self.start_worker()?;
            if self.threads.len() == before {
                // Started again, it would most likely fail again; the running ones drain
                // the queue, and `submit` tries again as sources queue up.
                break;
            }
        }
        Ok(())
    }

    /// The worker processes started so far (a dead one started again counts once).
    pub fn workers(&self) -> usize {
        self.threads.len()
    }

    /// Queues `path` for compiling (its reply carries `tag`), starting a worker when every
    /// worker has a source already. Fails only when no worker can be started at all.
    pub fn submit(&mut self, tag: usize, path: PathBuf) -> Result<()> {
        if self.threads.len() < self.max_workers && self.in_flight >= self.threads.len() {
            self.start_worker()?;
        }
        self.in_flight += 1;
        self.queue
            .as_ref()
            .expect("open until dropped")
            .send((tag, path))
            .expect("the workers hold the queue until the pool is dropped");
        Ok(())
    }

    /// Sources submitted and not yet answered by [`CompilePool::recv`].
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// The next reply, waiting for it at most `wait` (`None`: until one comes); `None` when
    /// nothing is in flight or the wait ran out.
    pub fn recv(&mut self, wait: Option<std::time::Duration>) -> Option<Reply> {
        if self.in_flight == 0 {
            return None;
        }
        let reply = match wait {
            None => self.replies.recv().ok(),
            Some(d) => self.replies.recv_timeout(d).ok(),
        };
        if reply.is_some() {
            self.in_flight -= 1;
        }
        reply
    }

    /// Starts one more worker. A failed start is an error only while no worker runs: with
    /// workers running, the queue still drains; without any, nothing would.
    fn start_worker(&mut self) -> Result<()> {
        match spawn_worker(&self.exe, &self.args) {
            Ok(child) => self.add_worker(child),
            Err(e) if self.threads.is_empty() => {
                return Err(Error::io("cannot start compile worker", &self.exe, e))
            }
            Err(_) => {}
        }
        Ok(())
    }

    fn add_worker(&mut self, child: Child) {
        let slot: Slot = Arc::new(Mutex::new(Worker {
            child: Some(child),
            ..Worker::default()
        }));
        self.slots.lock().expect("slots lock").push(slot.clone());
        let (queue, out) = (self.shared_queue.clone(), self.replies_tx.clone());
        let (exe, args) = (self.exe.clone(), self.args.clone());
        let (finished_ms, deadline) = (self.finished_ms.clone(), self.deadline.clone());
        self.threads.push(std::thread::spawn(move || {
            serve(&slot, &queue, &out, &finished_ms, &deadline, &|| {
                spawn_worker(&exe, &args)
            })
        }));
    }
}

impl Drop for CompilePool {
    /// Ends the workers: nothing is waited for (a dropped pool's replies have no reader).
    fn drop(&mut self) {
        drop(self.queue.take());
        kill_all(&self.slots);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        drop(self.closed.take());
        if let Some(w) = self.watch.take() {
            let _ = w.join();
        }
    }
}

/// `limit` now, from the compiles finished so far and the number running.
fn limit_now(
    limit: CompileLimit,
    slots: &Mutex<Vec<Slot>>,
    finished_ms: &Mutex<Vec<f64>>,
) -> Option<std::time::Duration> {
    let running = slots
        .lock()
        .expect("slots lock")
        .iter()
        .filter(|w| w.lock().expect("slot lock").since.is_some())
        .count();
    limit.now(&finished_ms.lock().expect("times lock"), running)
}

fn spawn_worker(exe: &Path, args: &[String; 2]) -> std::io::Result<Child> {
    super::worker_command(exe)
        .arg(COMPILE_WORKER_ARG)
        .args(args)
        .spawn()
}

/// One worker's loop: takes a source off the shared queue, has the worker process compile
/// it and sends the reply; a dead or killed process is started again (`spawn`) for the
/// next one. Past `deadline`, sources are answered without compiling. Ends when the pool
/// drops the queue.
fn serve(
    slot: &Mutex<Worker>,
    queue: &Mutex<mpsc::Receiver<Item>>,
    out: &mpsc::Sender<Reply>,
    finished_ms: &Mutex<Vec<f64>>,
    deadline: &Mutex<Option<std::time::Instant>>,
    spawn: &dyn Fn() -> std::io::Result<Child>,
) {
    let mut pipes = take_pipes(slot);
    loop {
        let item = queue.lock().expect("queue lock").recv();
        let Ok((tag, path)) = item else { break };
        if interrupted() {
            let _ = out.send((tag, PoolReply::Stopped));
            continue;
        }
        let past_deadline = deadline
            .lock()
            .expect("deadline lock")
            .is_some_and(|at| std::time::Instant::now() >= at);
        if past_deadline {
            let _ = out.send((tag, PoolReply::Abandoned));
            continue;
        }
        if pipes.is_none() {
            reap(slot);
            match spawn() {
                Ok(child) => {
                    slot.lock().expect("slot lock").child = Some(child);
                    pipes = take_pipes(slot);
                }
                Err(e) => {
                    let why = format!("compile worker could not be started again: {e}");
                    let _ = out.send((tag, PoolReply::Done(failed(why))));
                    continue;
                }
            }
        }
        let (stdin, stdout) = pipes.as_mut().expect("started above");
        let started = std::time::Instant::now();
        {
            let mut w = slot.lock().expect("slot lock");
            w.since = Some(started);
            w.timed_out = false;
        }
        let mut line = String::new();
        let answered = writeln!(stdin, "{}", path.display()).is_ok()
            && stdin.flush().is_ok()
            && stdout.read_line(&mut line).map(|n| n > 0).unwrap_or(false);
        let timed_out = {
            let mut w = slot.lock().expect("slot lock");
            w.since = None;
            std::mem::take(&mut w.timed_out)
        };
        let reply = if answered {
            let r: CompileReply = serde_json::from_str(&line)
                .unwrap_or_else(|e| failed(format!("bad reply from compile worker: {e}")));
            if !r.from_cache {
                finished_ms.lock().expect("times lock").push(r.millis);
            }
            PoolReply::Done(r)
        } else if interrupted() {
            PoolReply::Stopped // killed by the stop: not compiled, not a failure
        } else if timed_out {
            PoolReply::TimedOut(started.elapsed().as_secs_f64())
        } else {
            PoolReply::Done(failed("compile worker died (NVRTC crashed?)".into()))
        };
        // A worker killed by the limit as it answered is gone all the same.
        if !answered || timed_out {
            pipes = None;
        }
        let _ = out.send((tag, reply));
    }
    drop(pipes);
    reap(slot);
}

type Pipes = (ChildStdin, BufReader<ChildStdout>);

fn take_pipes(slot: &Mutex<Worker>) -> Option<Pipes> {
    let mut guard = slot.lock().expect("slot lock");
    let c = guard.child.as_mut()?;
    Some((c.stdin.take()?, BufReader::new(c.stdout.take()?)))
}

/// Waits for the worker process of `slot` to end (its stdin is closed or it was killed).
fn reap(slot: &Mutex<Worker>) {
    if let Some(mut c) = slot.lock().expect("slot lock").child.take() {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// Kills every worker process; killing one that has exited does nothing.
fn kill_all(slots: &Mutex<Vec<Slot>>) {
    for slot in slots.lock().expect("slots lock").iter() {
        if let Some(c) = slot.lock().expect("slot lock").child.as_mut() {
            let _ = c.kill();
        }
    }
}

/// How often the compile pool checks for a stop request.
pub const STOP_POLL: std::time::Duration = std::time::Duration::from_millis(50);

fn failed(log: String) -> CompileReply {
    CompileReply {
        ok: false,
        millis: 0.0,
        from_cache: false,
        log,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};
    use std::time::Duration;

    /// The automatic limit waits until more than half of the compiles started (and at least
    /// a few) have finished, the running ones counted as the longest; then it is 15 times
    /// the median, with a floor. A fixed limit holds from the start; `Off` never limits.
    #[test]
    fn the_automatic_limit_follows_the_median_compile() {
        let auto = CompileLimit::Auto;
        let ms: Vec<f64> = (0..10).map(|i| 100.0 * (i + 1) as f64).collect();
        assert_eq!(auto.now(&ms[..AUTO_LIMIT_AFTER - 1], 0), None);
        // 10 finished and 10 running: the median is a running one.
        assert_eq!(auto.now(&ms, 10), None);
        // 10 finished and 6 running: the 9th of 16 is the 900 ms compile.
        assert_eq!(
            auto.now(&ms, 6),
            Some(Duration::from_secs_f64(AUTO_LIMIT_FACTOR * 0.9))
        );
        assert_eq!(
            auto.now(&[20.0; 10], 0),
            Some(Duration::from_secs_f64(AUTO_LIMIT_FLOOR_S))
        );
        assert_eq!(
            CompileLimit::Seconds(2.5).now(&[], 3),
            Some(Duration::from_secs_f64(2.5))
        );
        assert_eq!(CompileLimit::Off.now(&[1.0; 10], 0), None);
    }

    /// A stand-in for `tune __compile-worker ARCH CACHE` in `dir`: it writes its process id,
    /// and the value of NVRTC's cache switch it was started with, into the folder given as
    /// CACHE as it starts, then answers every path with a successful compile. Run once before
    /// it is returned, so no test thread still holds the file open for writing when the pool
    /// starts it (which would fail with "text file busy").
    fn fake_worker(dir: &Path) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let exe = dir.join("fake-worker");
        let script = "#!/bin/sh\n\
            [ -d \"$3\" ] && echo \"nvrtc-cache-off=$CUDA_CACHE_DISABLE\" > \"$3/env.$$\"\n\
            [ -d \"$3\" ] && echo $$ > \"$3/worker.$$\"\n\
            while read -r path; do\n\
              echo '{\"ok\":true,\"millis\":1.0,\"from_cache\":false,\"log\":\"\"}'\n\
            done\n";
        std::fs::write(&exe, script).expect("write the fake worker");
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        for _ in 0..100 {
            match Command::new(&exe).stdin(Stdio::null()).status() {
                Ok(status) => {
                    assert!(status.success(), "the fake worker fails: {status}");
                    return exe;
                }
                Err(e) if e.raw_os_error() == Some(26) => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Err(e) => panic!("cannot run the fake worker: {e}"),
            }
        }
        panic!("the fake worker stays busy");
    }

    /// The process ids the fake workers wrote into `marks`.
    fn started(marks: &Path) -> Vec<u32> {
        std::fs::read_dir(marks)
            .expect("marks folder")
            .filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok())
            .filter_map(|t| t.trim().parse().ok())
            .collect()
    }

    /// Workers started before any source run before the first source is submitted (each has
    /// started its process, with NVRTC's own cache off), the pool starts no more for the
    /// sources that follow, every source is answered exactly once, and dropping the pool ends
    /// the processes.
    #[test]
    fn workers_started_early_run_before_any_source_and_answer_each_once() {
        let dir = tempfile::tempdir().expect("temp dir");
        let exe = fake_worker(dir.path());
        let marks = dir.path().join("marks");
        std::fs::create_dir(&marks).expect("marks folder");
        let mut pool = CompilePool::new(&exe, "sm_90", Some(&marks), 3, CompileLimit::Off);
        assert_eq!(pool.workers(), 0, "nothing starts before it is asked to");
        pool.start_workers(2).expect("workers start");
        assert_eq!(pool.workers(), 2, "no more than wanted");
        pool.start_workers(8).expect("workers start");
        assert_eq!(pool.workers(), 3, "no more than the pool's size");
        let until = std::time::Instant::now() + Duration::from_secs(20);
        while started(&marks).len() < 3 && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        let pids = started(&marks);
        assert_eq!(pids.len(), 3, "every worker process runs before any source");
        for pid in &pids {
            let env = std::fs::read_to_string(marks.join(format!("env.{pid}"))).expect("env mark");
            assert_eq!(
                env.trim(),
                "nvrtc-cache-off=1",
                "worker {pid} runs with NVRTC's cache on"
            );
        }
        const SOURCES: usize = 20;
        for tag in 0..SOURCES {
            let path = dir.path().join(format!("s{tag:04}.cu"));
            pool.submit(tag, path).expect("submit");
        }
        assert_eq!(pool.workers(), 3, "no worker started for the sources");
        let mut tags = Vec::new();
        while let Some((tag, reply)) = pool.recv(Some(Duration::from_secs(20))) {
            assert!(
                matches!(reply, PoolReply::Done(CompileReply { ok: true, .. })),
                "source {tag}: {reply:?}"
            );
            tags.push(tag);
        }
        tags.sort_unstable();
        assert_eq!(tags, (0..SOURCES).collect::<Vec<_>>());
        assert_eq!(pool.in_flight(), 0);
        assert_eq!(started(&marks).len(), 3, "no worker process started again");
        drop(pool);
        for pid in pids {
            let proc = PathBuf::from(format!("/proc/{pid}"));
            assert!(!proc.exists(), "worker {pid} outlives the pool");
        }
    }

    /// Starting the workers fails, with the executable named, when none can be started.
    #[test]
    fn starting_workers_that_cannot_start_is_an_error() {
        let exe = Path::new("/nonexistent/tune");
        let mut pool = CompilePool::new(exe, "sm_90", None, 2, CompileLimit::Off);
        let err = pool.start_workers(4).expect_err("no worker can start");
        assert!(err.to_string().contains("/nonexistent/tune"), "{err}");
        assert_eq!(pool.workers(), 0);
    }
}
