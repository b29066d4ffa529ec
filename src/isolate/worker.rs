//! Worker processes. A kernel that faults (illegal address, trap) poisons not only its CUDA
//! context but, in practice, the whole process: the driver refuses new contexts afterwards.
//! A kernel that never finishes blocks its process for good. So GPU work runs in a child
//! process (`tune __gpu-worker`) that streams one JSON line per finished task; the parent
//! records each result as it arrives and, when the child dies or hangs past the watchdog,
//! records the task in flight as failed and starts a fresh child for the rest.
//!
//! This module runs a job's tasks ([`run_tasks`]) on this process's device or in workers.

use super::device::Device;
use super::interrupt::interrupted;
use super::protocol::{failed, Job, Line, Task, TaskResult, GPU_WORKER_ARG};
use crate::cuda::gpu::{preload_blas, DeviceInfo};
use crate::error::{Error, Result};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::mpsc;
use std::time::Duration;

/// A started GPU worker process that has opened its device and waits for a job. Dropped, it
/// is ended and reaped.
pub struct GpuWorker {
    child: Child,
    rx: mpsc::Receiver<String>,
    reader: Option<std::thread::JoinHandle<()>>,
    /// The executable and device it was started with: a kept worker serves only runs that
    /// name both.
    exe: PathBuf,
    device: usize,
    /// Its device report (the device and its free memory before any job), once read.
    report: Option<Box<(DeviceInfo, u64)>>,
}

/// A GPU worker started but not yet heard from ([`GpuWorker::spawn`]): its driver and context
/// start while this process does other work. Or a worker kept from an earlier run, whose
/// report is already known ([`KeptWorker`]). Dropped unread, it is killed.
pub struct Starting(GpuWorker);

impl Starting {
    /// The worker itself, to keep for a later run (a run that ends before it needs the GPU
    /// hands it back).
    pub fn into_worker(self) -> GpuWorker {
        self.0
    }

    /// Waits for the worker's device report (at once for a kept worker).
    pub fn ready(self) -> Result<(GpuWorker, DeviceInfo, u64)> {
        let mut worker = self.0;
        if let Some((info, free)) = worker.report.as_deref().cloned() {
            return Ok((worker, info, free));
        }
        loop {
            match worker.rx.recv_timeout(Duration::from_secs(120)) {
                Ok(text) => match serde_json::from_str::<Line>(&text) {
                    Ok(Line::Device(info, free)) => {
                        worker.report = Some(Box::new((info.clone(), free)));
                        return Ok((worker, info, free));
                    }
                    Ok(Line::Fatal(why)) => {
                        worker.finish();
                        // The worker's message is already a whole error line; keep it as is.
                        let why = why
                            .strip_prefix("no CUDA GPU is usable: ")
                            .unwrap_or(&why)
                            .to_string();
                        return Err(Error::NoGpu(why));
                    }
                    _ => {}
                },
                Err(_) => {
                    worker.finish();
                    return Err(Error::NoGpu(
                        "the GPU worker did not report its device (driver hung or crashed?)".into(),
                    ));
                }
            }
        }
    }
}

impl GpuWorker {
    /// Starts `exe __gpu-worker DEVICE` and waits for its device report.
    pub fn start(exe: &Path, device: usize) -> Result<(GpuWorker, DeviceInfo, u64)> {
        Self::spawn(exe, device)?.ready()
    }

    /// Starts `exe __gpu-worker DEVICE` without waiting for it ([`Starting::ready`] does).
    pub fn spawn(exe: &Path, device: usize) -> Result<Starting> {
        let mut child = super::worker_command(exe)
            .args([GPU_WORKER_ARG, &device.to_string()])
            .spawn()
            .map_err(|e| Error::io("cannot start worker", exe, e))?;
        let stdout = child.stdout.take().expect("piped");
        let (tx, rx) = mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Starting(GpuWorker {
            child,
            rx,
            reader: Some(reader),
            exe: exe.to_path_buf(),
            device,
            report: None,
        }))
    }

    /// Sends one job (one JSON line); the worker answers with `Line`s.
    fn send(&mut self, job: &Job) -> std::io::Result<()> {
        let stdin = self
            .child
            .stdin
            .as_mut()
            .ok_or(std::io::ErrorKind::BrokenPipe)?;
        let mut line = serde_json::to_vec(job).expect("serializable");
        line.push(b'\n');
        stdin.write_all(&line)?;
        stdin.flush()
    }

    /// Ends the worker and reaps it (what dropping it does, said where it is meant).
    pub fn finish(self) {}
}

impl Drop for GpuWorker {
    /// Closes its stdin, kills it (an idle worker would end on the closed stdin; one still
    /// running would not) and reaps it.
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

/// The idle GPU worker one run left, kept for the next run on the same device: runs in a row
/// (the pinned runs of `tune check`, the shapes of a sweep on one GPU) then skip starting a
/// process and a CUDA context, and a run with the same data as the last one (the same
/// [`Job::data_key`](super::protocol::Job): op, shape, dtype, seed, buffers, cache state,
/// comparison, and checker and reference images) reuses its inputs and reference on the
/// device too. The device report it keeps (the free memory before any job) is from its start.
#[derive(Default)]
pub struct KeptWorker(Option<GpuWorker>);

impl KeptWorker {
    /// The kept worker, when it was started from `exe` for `device`; a worker kept for
    /// another is ended.
    pub fn take_for(&mut self, exe: &Path, device: usize) -> Option<Starting> {
        self.0
            .take()
            .filter(|w| w.exe == exe && w.device == device)
            .map(Starting)
    }

    /// Keeps `worker` for the next run (one that never reported its device is ended).
    pub fn keep(&mut self, worker: Option<GpuWorker>) {
        self.0 = worker.filter(|w| w.report.is_some());
    }
}

/// Where a job's tasks run.
pub enum Runner<'a> {
    /// This process's device: a fault that poisons it ends the run (remaining tasks fail).
    Local(&'a mut dyn Device),
    /// Child processes of this executable (`tune`): faults and hangs are survived. The
    /// first worker may already be running (started early to overlap its start).
    Workers {
        exe: PathBuf,
        /// Floor of the per-task time limit.
        watchdog: Duration,
        first: Option<GpuWorker>,
    },
}

/// Runs every task of `job`, calling `on_result` as each finishes. Returns the number of
/// worker restarts and the worker left idle, or the error that stopped the run (results so
/// far were delivered).
pub fn run_tasks(
    job: &Job,
    runner: Runner<'_>,
    on_result: &mut dyn FnMut(TaskResult),
) -> Result<(usize, Option<GpuWorker>)> {
    match runner {
        Runner::Local(device) => {
            let mut lost = None;
            device.run(job, &job.tasks, &mut |r| {
                if r.sticky {
                    lost = Some(r.error.clone());
                }
                on_result(r);
            })?;
            // The tasks after the fault never ran: the error that ends the run says why, and
            // they stay without a result (a resumed run measures them).
            match lost {
                Some(why) => Err(Error::NoGpu(format!(
                    "a variant faulted ({why}) and left this process's CUDA context unusable; \
                     without --in-process each variant runs in a worker process that survives this"
                ))),
                None => Ok((0, None)),
            }
        }
        Runner::Workers {
            exe,
            watchdog,
            first,
        } => run_subprocess(job, &exe, watchdog, first, on_result),
    }
}

/// The time a task may take before the watchdog fires: the floor, plus a hundred times what
/// its launches would take at the speed of the fastest task so far, plus a minute for the
/// first task of a worker (it also builds the inputs, the reference and the context) or while
/// no speed is known (a first task of a few hundred milliseconds a launch must not be taken
/// for a hang). An interleaved job answers once, after every round of every task, so its
/// launches are all of theirs (its `best_ms` is its slowest task's speed).
fn task_limit(job: &Job, floor: Duration, fastest_ms: f64, first: bool) -> Duration {
    let launches = if job.confirm_rounds > 0 {
        // Each task is verified, warmed up, then timed once a round (a short kernel as a
        // batch of launches, which the hundredfold margin and the floor cover).
        job.bench
            .warmup
            .saturating_add(job.confirm_rounds)
            .saturating_add(2)
            .saturating_mul(job.tasks.len())
    } else {
        job.bench
            .warmup
            .saturating_add(job.bench.reps)
            .saturating_add(2)
    } as f64;
    // Capped at the longest time limit any option takes: the counts are bounded where they
    // are parsed, and a library caller's are not.
    let scaled = if fastest_ms.is_finite() {
        (100.0 * launches * fastest_ms / 1e3).clamp(0.0, crate::model::domain::MAX_SECONDS)
    } else {
        0.0
    };
    floor
        + Duration::from_secs_f64(scaled)
        + if first || !fastest_ms.is_finite() {
            Duration::from_secs(60)
        } else {
            Duration::ZERO
        }
}

fn run_subprocess(
    job: &Job,
    exe: &Path,
    watchdog: Duration,
    mut next: Option<GpuWorker>,
    on_result: &mut dyn FnMut(TaskResult),
) -> Result<(usize, Option<GpuWorker>)> {
    let mut remaining: std::collections::VecDeque<Task> = job.tasks.iter().cloned().collect();
    let mut restarts = 0;
    // The run's fastest contender so far: a job's first task is limited by it too.
    let mut fastest_ms = job.best_ms.unwrap_or(f64::INFINITY);
    while !remaining.is_empty() {
        let (mut worker, reused) = match next.take() {
            Some(w) => (w, true),
            None => (GpuWorker::start(exe, job.device)?.0, false),
        };
        let mut part = job.clone();
        part.tasks = remaining.iter().cloned().collect();
        if let Err(e) = worker.send(&part) {
            // A worker kept idle may have ended since its last job: a fresh one takes over.
            if reused {
                continue;
            }
            return Err(Error::io("cannot send the job to", exe, e));
        }
        // Until the worker is set up, its first task also pays for the inputs, the reference
        // and the context: the watchdog allows a minute more for that phase only.
        let mut setting_up = true;
        let mut last_sticky = false;
        let mut alive = true;
        while let Some(in_flight) = remaining.front().map(|t| t.id) {
            let limit = task_limit(job, watchdog, fastest_ms, setting_up);
            match worker.rx.recv_timeout(limit) {
                Ok(text) => match serde_json::from_str::<Line>(&text) {
                    Ok(Line::Result(r)) => {
                        setting_up = false;
                        last_sticky = r.sticky;
                        if let Some(s) = r.stats {
                            fastest_ms = fastest_ms.min(s.median_ms);
                        }
                        if let Some(at) = remaining.iter().position(|t| t.id == r.id) {
                            remaining.remove(at);
                        }
                        on_result(r);
                        if interrupted() {
                            worker.finish();
                            return Ok((restarts, None));
                        }
                    }
                    Ok(Line::Ready) => setting_up = false,
                    Ok(Line::Fatal(why)) => {
                        worker.finish();
                        return Err(Error::NoGpu(format!("GPU worker could not start: {why}")));
                    }
                    Ok(Line::Refused(why)) => {
                        worker.finish();
                        return Err(Error::Usage(why));
                    }
                    Ok(Line::Failed(why)) => {
                        worker.finish();
                        return Err(Error::Job(why));
                    }
                    _ => {} // a device report, or stray output
                },
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    remaining.pop_front();
                    on_result(failed(
                        in_flight,
                        format!(
                            "watchdog: no result after {:.1} s (kernel hung?); worker killed",
                            limit.as_secs_f64()
                        ),
                    ));
                    restarts += 1;
                    alive = false;
                    break;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = worker
                        .child
                        .wait()
                        .map(|s| s.to_string())
                        .unwrap_or_else(|e| e.to_string());
                    if !last_sticky {
                        remaining.pop_front();
                        on_result(failed(
                            in_flight,
                            format!("GPU worker died while running it ({status})"),
                        ));
                    }
                    restarts += 1;
                    alive = false;
                    break;
                }
            }
        }
        if alive && !last_sticky {
            next = Some(worker); // idle, with its session: reused for the next job
        } else {
            worker.finish();
        }
    }
    Ok((restarts, next))
}

/// Opens device `ordinal`: the GPU, or the simulated device where the build (feature
/// `simulated`) and the environment ([`super::device::SIMULATE_ENV`]) ask for one.
pub fn open_device(ordinal: usize) -> Result<Box<dyn Device>> {
    #[cfg(feature = "simulated")]
    if let Some(model) = super::simulated::Model::from_env()? {
        return Ok(Box::new(super::simulated::Simulated::open(model, ordinal)?));
    }
    Ok(Box::new(super::session::CudaDevice::open(ordinal)?))
}

/// How many devices [`open_device`] can open.
pub fn device_count() -> Result<usize> {
    #[cfg(feature = "simulated")]
    if let Some(model) = super::simulated::Model::from_env()? {
        return Ok(model.devices);
    }
    crate::cuda::gpu::device_count()
}

/// Entry point of `tune __gpu-worker DEVICE`: opens the device at once and reports it (so
/// the parent never needs a CUDA context of its own, and the driver's start overlaps the
/// parent's compiling), then reads a [`Job`] as JSON on stdin and streams `Line`s. Exits 3
/// after a fault that left the device unusable (the parent starts a fresh worker).
pub fn gpu_worker_main(args: &[String]) -> i32 {
    super::follow_parent();
    let stdout = std::io::stdout();
    let emit = |line: &Line| {
        let mut out = stdout.lock();
        let _ = writeln!(
            out,
            "{}",
            serde_json::to_string(line).expect("serializable")
        );
        let _ = out.flush();
    };
    let ordinal = args.first().and_then(|d| d.parse().ok()).unwrap_or(0);
    let mut device = match open_device(ordinal) {
        Ok(device) => device,
        Err(e) => {
            emit(&Line::Fatal(e.to_string()));
            return 1;
        }
    };
    let free = device.free_mem().unwrap_or(0);
    emit(&Line::Device(device.info().clone(), free));
    std::thread::spawn(preload_blas);
    // One job per line. EOF ends the worker.
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        let job: Job = match serde_json::from_str(&line) {
            Ok(job) => job,
            Err(e) => {
                emit(&Line::Fatal(format!("parsing the job: {e}")));
                return 1;
            }
        };
        if let Err(e) = device.prepare(&job) {
            emit(&failure_line(e));
            return 1;
        }
        emit(&Line::Ready);
        let ran = device.run(&job, &job.tasks, &mut |r| emit(&Line::Result(r)));
        match ran {
            Ok(true) => return 3,
            Ok(false) => {}
            Err(e) => {
                emit(&failure_line(e));
                return 1;
            }
        }
    }
    0
}

/// The line that reports a job's error: refused input, an error of the device, or one of the
/// job alone, so that the parent classifies it as the in-process run would.
fn failure_line(e: Error) -> Line {
    match e {
        Error::Usage(why) => Line::Refused(why),
        e if e.is_device() => Line::Fatal(e.to_string()),
        e => Line::Failed(e.to_string()),
    }
}
