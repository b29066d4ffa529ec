//! Worker processes. A kernel that faults (illegal address, trap) poisons not only its CUDA
//! context but, in practice, the whole process: the driver refuses new contexts afterwards.
//! A kernel that never finishes blocks its process for good. So GPU work runs in a child
//! process (`tune __gpu-worker`) that streams one JSON line per finished task; the parent
//! records each result as it arrives and, when the child dies or hangs past the watchdog,
//! records the task in flight as failed and starts a fresh child for the rest.
//!
//! NVRTC serializes compiles inside one process, so compiles also run in child processes
//! (`tune __compile-worker`), one per core, fed from one queue.

use crate::cuda::compile::Compiler;
use crate::cuda::gpu::{Arg, Buffer, DeviceInfo, Gpu, GpuFault, GpuResult};
use crate::error::{Error, Result};
use crate::measure::bench::{BenchSettings, Stats, Timer};
use crate::measure::verify::{self, Checker, NAN_BITS};
use crate::model::limits::LaunchDims;
use crate::model::shape::Shape;
use crate::spec::ops::Compare;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Asks the run to stop after the variant in flight (Ctrl-C). Workers run in their own
/// process group, so the terminal's SIGINT reaches only the parent, which ends them itself.
pub fn request_stop() {
    INTERRUPTED.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// True once [`request_stop`] was called.
pub fn interrupted() -> bool {
    INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst)
}

/// First argument that turns the `tune` binary into a GPU worker.
pub const GPU_WORKER_ARG: &str = "__gpu-worker";
/// First argument that turns the `tune` binary into a compile worker.
pub const COMPILE_WORKER_ARG: &str = "__compile-worker";

/// A device buffer of the job.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BufferDesc {
    pub name: String,
    pub input: bool,
    pub len: usize,
    #[serde(default)]
    pub fill: crate::spec::ops::Fill,
}

/// A kernel argument: a buffer's address or a 32-bit integer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ArgDesc {
    Buffer(String),
    Int(i32),
}

/// What one task runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Work {
    Kernel {
        cubin: PathBuf,
        kernel: String,
        /// Grid, block and dynamic shared memory (the spec's `[launch]`).
        launch: LaunchDims,
        /// Kernels of the same cubin launched first, in the same timed region (the spec's
        /// prologue for this configuration).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        before: Vec<PreLaunch>,
    },
    Memcpy {
        from: String,
        to: String,
    },
    /// cuBLAS SGEMM on row-major buffers: C (m x n) = A (m x k) · B (k x n).
    Sgemm {
        a: String,
        b: String,
        c: String,
        m: i32,
        n: i32,
        k: i32,
    },
}

/// A prologue kernel of a task: launched with the op's arguments before the task's kernel.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PreLaunch {
    pub kernel: String,
    pub launch: LaunchDims,
}

/// A kernel task loaded on the device: its prologue launches, then its kernel.
struct Loaded {
    launches: Vec<(crate::cuda::gpu::Kernel, LaunchDims)>,
}

impl Loaded {
    /// Loads the cubin once and finds every kernel the task launches.
    fn new(
        gpu: &Gpu,
        image: &[u8],
        kernel: &str,
        launch: LaunchDims,
        before: &[PreLaunch],
    ) -> GpuResult<Loaded> {
        let mut names: Vec<&str> = before.iter().map(|p| p.kernel.as_str()).collect();
        names.push(kernel);
        let kernels = gpu.load_all(image, &names)?;
        let mut dims: Vec<_> = before.iter().map(|p| p.launch).collect();
        dims.push(launch);
        Ok(Loaded {
            launches: kernels.into_iter().zip(dims).collect(),
        })
    }

    /// Registers of the task's own kernel (the last launch), the figure the CSV reports.
    fn registers(&self) -> i32 {
        self.launches.last().map_or(0, |(k, _)| k.registers)
    }

    fn enqueue(&self, gpu: &Gpu, args: &[Arg]) -> GpuResult<()> {
        for (k, dims) in &self.launches {
            gpu.launch(k, *dims, args)?;
        }
        Ok(())
    }
}

/// A kernel that computes the expected output on the GPU (launched with the op's arguments,
/// the output replaced by the expected buffer), spot-checked on the CPU before use.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReferenceKernel {
    pub cubin: PathBuf,
    pub kernel: String,
    pub launch: LaunchDims,
    /// Prologue kernels of a reference configuration, launched first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub before: Vec<PreLaunch>,
}

/// One thing to verify and time.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Task {
    pub id: usize,
    pub work: Work,
    /// "reference" or the name of an input buffer the output must equal (copies).
    pub expect: String,
    /// A variant of the tuned space (baselines are not): only these compete for best, and
    /// only these may be cut short by adaptive repetitions.
    #[serde(default)]
    pub contender: bool,
}

/// Everything a worker needs; inputs and the reference are re-made from the seed, so nothing
/// large crosses the pipe.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    pub device: usize,
    pub bench: BenchSettings,
    pub seed: u64,
    /// Element type of every buffer (the run's `--dtype`).
    #[serde(default)]
    pub dtype: crate::model::dtype::Dtype,
    pub reference: String,
    pub reference_kernel: Option<ReferenceKernel>,
    pub shape: Vec<u64>,
    pub buffers: Vec<BufferDesc>,
    pub args: Vec<ArgDesc>,
    pub output: String,
    pub compare: Compare,
    pub rtol: f64,
    pub checker_cubin: PathBuf,
    /// Stop timing a variant after a few launches when it is clearly slower than the best
    /// variant so far (slower than `adaptive_cutoff` times its median).
    pub adaptive_cutoff: Option<f64>,
    /// When non-zero, the tasks are not timed one after another but interleaved (A B C A B
    /// C ...) for this many rounds, and every launch time comes back in `samples`.
    #[serde(default)]
    pub confirm_rounds: usize,
    pub tasks: Vec<Task>,
}

/// A task's outcome, as streamed by the worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskResult {
    pub id: usize,
    pub stats: Option<Stats>,
    pub error: String,
    pub registers: Option<i32>,
    /// The fault left the context (and the worker) unusable.
    pub sticky: bool,
    pub verify_s: f64,
    pub timing_s: f64,
    /// Every timed launch, in order (interleaved confirmation rounds only).
    #[serde(default)]
    pub samples: Vec<f64>,
    /// Clocks, temperature and throttle reasons right after the task (NVML, when present).
    #[serde(default)]
    pub clock: Option<crate::measure::clocks::ClockSample>,
    /// The warm-up this task's launches served as, when it was the job's first to verify.
    #[serde(default)]
    pub warmup: Option<crate::measure::clocks::Warmup>,
}

/// A line on the worker's stdout.
#[derive(Debug, Serialize, Deserialize)]
enum Line {
    Result(TaskResult),
    /// Setup failed before any task ran (no GPU, out of memory...).
    Fatal(String),
    /// First line of every worker: the device it opened and its free memory in bytes.
    Device(DeviceInfo, u64),
    /// The session is set up (inputs, reference, context): task clocks start now.
    Ready,
}

/// Host-side data of a job: inputs and, when computed on the CPU, the expected output, as
/// raw bytes of the job's element type.
pub struct HostData {
    pub inputs: Vec<Vec<u8>>,
    pub reference: Option<Vec<u8>>,
}

impl HostData {
    pub fn new(job: &Job) -> Result<HostData> {
        let inputs: Vec<Vec<u8>> = job
            .buffers
            .iter()
            .enumerate()
            .filter(|(_, b)| b.input)
            .map(|(i, b)| {
                verify::fill_input(b.fill, job.dtype, b.len, job.seed.wrapping_add(i as u64))
            })
            .collect();
        let reference = match job.reference_kernel {
            Some(_) => None,
            None => {
                let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
                Some(verify::cpu_reference(
                    &job.reference,
                    &Shape {
                        dims: job.shape.clone(),
                    },
                    job.dtype,
                    &refs,
                )?)
            }
        };
        Ok(HostData { inputs, reference })
    }
}

/// One CUDA context with the inputs uploaded, the expected output, the checker and timer.
struct Session {
    gpu: Gpu,
    buffers: Vec<(String, Buffer)>,
    expected: Buffer,
    output: usize,
    /// Buffers that are neither inputs nor the output (a spec's scratch): poisoned with the
    /// output before every verifying run, so a kernel that reads scratch it did not write
    /// (or that an earlier variant left behind) fails instead of passing on stale data.
    scratch: Vec<usize>,
    args: Vec<Arg>,
    checker: Checker,
    timer: Timer,
    blas: std::result::Result<crate::cuda::gpu::Blas, String>,
    /// Median of the fastest verified variant so far (for adaptive repetitions).
    best_ms: std::cell::Cell<f64>,
    /// NVML for this device, when it can be loaded.
    clocks: Option<crate::measure::clocks::ClockMonitor>,
    /// This job's warm-up is done (or was not needed): set by its first verified task.
    warmed: std::cell::Cell<bool>,
}

impl Session {
    fn open(gpu: Gpu, job: &Job, host: &HostData) -> Result<Session> {
        let gpu_uuid = gpu.info.uuid.clone();
        let mut buffers = Vec::new();
        let mut inputs = host.inputs.iter();
        for b in &job.buffers {
            let mut buf = gpu.alloc(b.len, job.dtype.bytes(), &b.name)?;
            if b.input {
                gpu.upload(
                    inputs.next().expect("one host input per input buffer"),
                    &mut buf,
                )?;
            }
            buffers.push((b.name.clone(), buf));
        }
        let output = buffers
            .iter()
            .position(|(n, _)| *n == job.output)
            .ok_or_else(|| Error::Usage("job output buffer missing".into()))?;
        let out_len = buffers[output].1.len;
        let mut expected = gpu.alloc(out_len, job.dtype.bytes(), "the expected output")?;
        let find = |name: &str| buffers.iter().find(|(n, _)| n == name).map(|(_, b)| b.ptr);
        let args = job
            .args
            .iter()
            .map(|a| match a {
                ArgDesc::Buffer(name) => find(name)
                    .map(Arg::Ptr)
                    .ok_or_else(|| Error::Usage(format!("job names no buffer {name}"))),
                ArgDesc::Int(v) => Ok(Arg::I32(*v)),
            })
            .collect::<Result<Vec<Arg>>>()?;
        let cubin = std::fs::read(&job.checker_cubin)
            .map_err(|e| Error::io("cannot read", &job.checker_cubin, e))?;
        let checker = Checker::new(&gpu, &cubin)?;
        let timer = Timer::new(&gpu, job.bench)?;
        match (&host.reference, &job.reference_kernel) {
            (Some(reference), _) => gpu.upload(reference, &mut expected)?,
            (None, Some(rk)) => {
                let image =
                    std::fs::read(&rk.cubin).map_err(|e| Error::io("cannot read", &rk.cubin, e))?;
                let kernel = Loaded::new(&gpu, &image, &rk.kernel, rk.launch, &rk.before)?;
                let out_ptr = buffers[output].1.ptr;
                let ref_args: Vec<Arg> = args
                    .iter()
                    .map(|a| match a {
                        Arg::Ptr(p) if *p == out_ptr => Arg::Ptr(expected.ptr),
                        other => *other,
                    })
                    .collect();
                kernel.enqueue(&gpu, &ref_args)?;
                gpu.synchronize("computing the GPU reference")?;
                let on_gpu = gpu.download(&expected)?;
                let refs: Vec<&[u8]> = host.inputs.iter().map(Vec::as_slice).collect();
                // A reference configuration of a user's op is the answer by definition;
                // built-in GPU references are checked against the CPU first.
                if job.reference != "config" {
                    verify::spot_check(
                        &job.reference,
                        &Shape {
                            dims: job.shape.clone(),
                        },
                        &refs,
                        &on_gpu,
                        job.seed,
                    )?;
                }
            }
            (None, None) => return Err(Error::Usage("the job has no reference".into())),
        }
        gpu.synchronize("uploading inputs")?;
        let blas = if job
            .tasks
            .iter()
            .any(|t| matches!(t.work, Work::Sgemm { .. }))
        {
            gpu.blas()
        } else {
            Err("not needed".into())
        };
        let scratch = job
            .buffers
            .iter()
            .enumerate()
            .filter(|(i, b)| !b.input && *i != output)
            .map(|(i, _)| i)
            .collect();
        Ok(Session {
            gpu,
            buffers,
            expected,
            output,
            scratch,
            args,
            checker,
            timer,
            blas,
            best_ms: std::cell::Cell::new(f64::INFINITY),
            clocks: crate::measure::clocks::ClockMonitor::open(&gpu_uuid).ok(),
            warmed: std::cell::Cell::new(false),
        })
    }

    /// Gives the device back, releasing the session's buffers.
    fn into_gpu(self) -> Gpu {
        self.gpu
    }

    /// NaN into the output and every scratch buffer, before a verifying run.
    fn poison(&self) -> GpuResult<()> {
        for i in std::iter::once(self.output).chain(self.scratch.iter().copied()) {
            self.gpu.fill_u32(&self.buffers[i].1, NAN_BITS)?;
        }
        Ok(())
    }

    fn buffer(&self, name: &str) -> Option<&Buffer> {
        self.buffers.iter().find(|(n, _)| n == name).map(|(_, b)| b)
    }

    /// Verifies each task, then times them interleaved, one launch of each per round, so
    /// clock drift and other slow changes hit every candidate alike.
    fn run_interleaved(&self, job: &Job, tasks: &[Task]) -> Vec<TaskResult> {
        let mut results: Vec<TaskResult> = Vec::new();
        let mut loaded = Vec::new();
        for task in tasks {
            let Work::Kernel {
                cubin,
                kernel,
                launch,
                before,
            } = &task.work
            else {
                results.push(failed(
                    task.id,
                    "only kernels are re-timed interleaved".into(),
                ));
                continue;
            };
            let out = &self.buffers[self.output].1;
            let ready = std::fs::read(cubin)
                .map_err(|e| e.to_string())
                .and_then(|image| {
                    let k = Loaded::new(&self.gpu, &image, kernel, *launch, before)
                        .map_err(|f| f.to_string())?;
                    self.poison().map_err(|f| f.to_string())?;
                    k.enqueue(&self.gpu, &self.args)
                        .map_err(|f| f.to_string())?;
                    self.gpu
                        .synchronize("running the kernel")
                        .map_err(|f| f.to_string())?;
                    let cmp = self
                        .checker
                        .compare(&self.gpu, out, &self.expected)
                        .map_err(|f| f.to_string())?;
                    cmp.judge(job.compare, job.rtol, out.len as u64)?;
                    Ok(k)
                });
            match ready {
                Ok(k) => loaded.push((task.id, k)),
                Err(e) => results.push(failed(task.id, e)),
            }
        }
        let rounds = job.confirm_rounds;
        let timed = (|| -> GpuResult<Vec<Vec<f64>>> {
            let events = self.gpu.timing_events(loaded.len())?;
            let mut samples = vec![Vec::with_capacity(rounds); loaded.len()];
            // One untimed round first: every kernel warm, the clocks up.
            for round in 0..=rounds {
                self.timer.launch_timed(
                    &self.gpu,
                    &events,
                    round * loaded.len(),
                    "interleaved launches",
                    |i| loaded[i].1.enqueue(&self.gpu, &self.args),
                )?;
                if round > 0 {
                    for (i, pair) in events.iter().enumerate() {
                        samples[i].push(crate::cuda::gpu::elapsed_ms(pair)?);
                    }
                }
            }
            Ok(samples)
        })();
        match timed {
            Ok(samples) => {
                for ((id, k), s) in loaded.iter().zip(samples) {
                    let mut r = failed(*id, String::new());
                    r.registers = Some(k.registers());
                    r.stats = Stats::from_samples(&s);
                    r.samples = s;
                    r.clock = self.clocks.as_ref().and_then(|c| c.sample());
                    results.push(r);
                }
            }
            Err(f) => {
                for (id, ..) in &loaded {
                    results.push(failed(*id, format!("interleaved timing: {f}")));
                }
            }
        }
        results
    }

    fn run(&self, job: &Job, task: &Task) -> TaskResult {
        let mut r = failed(task.id, String::new());
        let (expect, mode) = if task.expect == "reference" {
            (&self.expected, job.compare)
        } else {
            match self.buffer(&task.expect) {
                Some(b) => (b, Compare::Exact),
                None => {
                    r.error = format!("expect names no buffer {}", task.expect);
                    return r;
                }
            }
        };
        let outcome = match &task.work {
            Work::Memcpy { from, to } => match (self.buffer(from), self.buffer(to)) {
                (Some(f), Some(t)) => {
                    let (src, dst, bytes) = (f.ptr, t.ptr, f.bytes().min(t.bytes()));
                    self.check_and_time(job, task, expect, mode, &mut r, &|| {
                        self.gpu.copy(dst, src, bytes)
                    })
                }
                _ => Err(format!("memcpy names an unknown buffer ({from} → {to})")),
            },
            Work::Sgemm { a, b, c, m, n, k } => {
                match (&self.blas, self.buffer(a), self.buffer(b), self.buffer(c)) {
                    (Err(why), ..) => Err(why.clone()),
                    (Ok(blas), Some(a), Some(b), Some(c)) => {
                        let (a, b, c, m, n, k) = (a.ptr, b.ptr, c.ptr, *m, *n, *k);
                        self.check_and_time(job, task, expect, mode, &mut r, &|| {
                            self.gpu.sgemm(blas, a, b, c, m, n, k)
                        })
                    }
                    _ => Err("sgemm names an unknown buffer".into()),
                }
            }
            Work::Kernel {
                cubin,
                kernel,
                launch,
                before,
            } => match std::fs::read(cubin) {
                Err(e) => Err(format!("cannot read {}: {e}", cubin.display())),
                Ok(image) => match Loaded::new(&self.gpu, &image, kernel, *launch, before) {
                    Err(f) => Err(self.fault(&mut r, f)),
                    Ok(k) => {
                        r.registers = Some(k.registers());
                        self.check_and_time(job, task, expect, mode, &mut r, &|| {
                            k.enqueue(&self.gpu, &self.args)
                        })
                    }
                },
            },
        };
        match outcome {
            Ok(stats) => {
                if task.contender && stats.median_ms < self.best_ms.get() {
                    self.best_ms.set(stats.median_ms);
                }
                r.stats = Some(stats)
            }
            Err(e) => r.error = e,
        }
        r.clock = self.clocks.as_ref().and_then(|c| c.sample());
        r
    }

    fn fault(&self, r: &mut TaskResult, f: GpuFault) -> String {
        r.sticky |= f.sticky;
        f.to_string()
    }

    /// Launches `enqueue` (a task that just verified) back to back until NVML shows the SM
    /// clock at its steady value, so the first timed tasks do not run at the idle clock an
    /// idle GPU drops to ([`crate::measure::clocks::warmup_done`] says when). One NVML read first: a
    /// GPU already at its maximum clock is not loaded at all. `None` without NVML (nothing to
    /// wait for: the cap would be the only end).
    fn warm_up(
        &self,
        enqueue: &dyn Fn() -> GpuResult<()>,
    ) -> GpuResult<Option<crate::measure::clocks::Warmup>> {
        use crate::measure::clocks::{already_warm, warmup_done, Warmup, WarmupEnd};
        let Some(nvml) = &self.clocks else {
            return Ok(None);
        };
        let t = Instant::now();
        let Some(before) = nvml.sample() else {
            return Ok(None);
        };
        let max_mhz = nvml.max_sm_mhz();
        let mut w = Warmup {
            end: WarmupEnd::AlreadyWarm,
            seconds: 0.0,
            before_mhz: before.sm_mhz,
            after_mhz: before.sm_mhz,
            max_mhz,
            launches: 0,
        };
        if !already_warm(before.sm_mhz, max_mhz) {
            // Until a rule below says otherwise: ended without a steady reading.
            w.end = WarmupEnd::Cap;
            let mut readings = Vec::new();
            // Batches grow until one takes ~20 ms: short kernels reach the clock check often
            // enough without a synchronize after every launch.
            let mut batch = 1usize;
            loop {
                let b = Instant::now();
                for _ in 0..batch {
                    enqueue()?;
                }
                self.gpu.synchronize("warming up the GPU")?;
                w.launches += batch;
                if b.elapsed() < Duration::from_millis(20) && batch < 1 << 16 {
                    batch *= 2;
                }
                let now = t.elapsed().as_secs_f64();
                // NVML stopped answering: nothing more to wait for.
                let Some(r) = nvml.sample() else {
                    break;
                };
                w.after_mhz = r.sm_mhz;
                readings.push((now, r));
                if let Some(end) = warmup_done(&readings, max_mhz, now) {
                    w.end = end;
                    break;
                }
            }
        }
        w.seconds = t.elapsed().as_secs_f64();
        Ok(Some(w))
    }

    /// Poisons the output, runs once, verifies on the GPU, then times it.
    fn check_and_time(
        &self,
        job: &Job,
        task: &Task,
        expect: &Buffer,
        mode: Compare,
        r: &mut TaskResult,
        enqueue: &dyn Fn() -> GpuResult<()>,
    ) -> std::result::Result<Stats, String> {
        let t = Instant::now();
        let out = &self.buffers[self.output].1;
        let verified = (|| {
            self.poison()?;
            enqueue()?;
            self.gpu.synchronize("running the kernel")?;
            self.checker.compare(&self.gpu, out, expect)
        })();
        r.verify_s = t.elapsed().as_secs_f64();
        let cmp = verified.map_err(|f| self.fault(r, f))?;
        cmp.judge(mode, job.rtol, out.len as u64)?;
        if !self.warmed.replace(true) {
            r.warmup = self.warm_up(enqueue).map_err(|f| self.fault(r, f))?;
        }
        let best = self.best_ms.get();
        let cutoff = match job.adaptive_cutoff {
            Some(factor) if task.contender && best.is_finite() => Some(best * factor),
            _ => None,
        };
        let t = Instant::now();
        let stats = self
            .timer
            .measure(&self.gpu, enqueue, cutoff)
            .map_err(|f| self.fault(r, f));
        r.timing_s = t.elapsed().as_secs_f64();
        stats
    }
}

/// Runs `tasks` on an open session, in order (or interleaved, for a confirmation job),
/// handing each result to `sink`. Returns true when a fault poisoned the context.
fn run_on(session: &Session, job: &Job, tasks: &[Task], sink: &mut dyn FnMut(TaskResult)) -> bool {
    // Every job checks the clock again: the GPU idled while the next search round compiled.
    session.warmed.set(false);
    if job.confirm_rounds > 0 {
        for result in session.run_interleaved(job, tasks) {
            sink(result);
        }
        return false;
    }
    for task in tasks {
        if interrupted() {
            break;
        }
        let result = session.run(job, task);
        let sticky = result.sticky;
        sink(result);
        if sticky {
            return true;
        }
    }
    false
}

/// Runs `tasks` in this process on `gpu`; stops after a fault that poisons the context.
/// Fails only when the session cannot be set up.
pub fn run_in_process(
    gpu: Gpu,
    job: &Job,
    host: &HostData,
    tasks: &[Task],
    sink: &mut dyn FnMut(TaskResult),
) -> Result<()> {
    let session = Session::open(gpu, job, host)?;
    run_on(&session, job, tasks, sink);
    Ok(())
}

impl Job {
    /// Everything but the tasks and how they are timed: consecutive jobs with the same data
    /// share one session (inputs, expected output, buffers) in a worker.
    fn data_key(&self) -> String {
        let mut j = self.clone();
        j.tasks.clear();
        j.confirm_rounds = 0;
        j.adaptive_cutoff = None;
        serde_json::to_string(&j).expect("serializable")
    }
}

/// Entry point of `tune __gpu-worker DEVICE`: opens the device at once and reports it (so
/// the parent never needs a CUDA context of its own, and the driver's start overlaps the
/// parent's compiling), then reads a [`Job`] as JSON on stdin and streams `Line`s.
pub fn gpu_worker_main(args: &[String]) -> i32 {
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
    let device = args.first().and_then(|d| d.parse().ok()).unwrap_or(0);
    let gpu = match Gpu::open(device) {
        Ok(gpu) => gpu,
        Err(e) => {
            emit(&Line::Fatal(e.to_string()));
            return 1;
        }
    };
    let free = gpu.free_mem().unwrap_or(0) as u64;
    emit(&Line::Device(gpu.info.clone(), free));
    // One job per line; jobs with the same data reuse the session. EOF ends the worker.
    let mut idle = Some(gpu);
    let mut session: Option<(String, Session)> = None;
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
        let key = job.data_key();
        if session.as_ref().is_none_or(|(k, _)| *k != key) {
            let gpu = match session.take() {
                Some((_, s)) => s.into_gpu(),
                None => idle.take().expect("the device is idle or in a session"),
            };
            match HostData::new(&job).and_then(|host| Session::open(gpu, &job, &host)) {
                Ok(s) => session = Some((key, s)),
                Err(e) => {
                    emit(&Line::Fatal(e.to_string()));
                    return 1;
                }
            }
        }
        emit(&Line::Ready);
        let (_, s) = session.as_ref().expect("opened above");
        if run_on(s, &job, &job.tasks, &mut |r| emit(&Line::Result(r))) {
            return 3;
        }
    }
    0
}

/// A started GPU worker process that has opened its device and waits for a job.
pub struct GpuWorker {
    child: Child,
    rx: mpsc::Receiver<String>,
    reader: std::thread::JoinHandle<()>,
}

impl GpuWorker {
    /// Starts `exe __gpu-worker DEVICE` and waits for its device report.
    pub fn start(exe: &Path, device: usize) -> Result<(GpuWorker, DeviceInfo, u64)> {
        use std::os::unix::process::CommandExt;
        let mut child = Command::new(exe)
            .args([GPU_WORKER_ARG, &device.to_string()])
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
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
        let worker = GpuWorker { child, rx, reader };
        loop {
            match worker.rx.recv_timeout(Duration::from_secs(120)) {
                Ok(text) => match serde_json::from_str::<Line>(&text) {
                    Ok(Line::Device(info, free)) => return Ok((worker, info, free)),
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

    /// Ends the worker (closing its stdin ends an idle one) and reaps it.
    pub fn finish(mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = self.reader.join();
    }
}

/// How GPU tasks are isolated from each other.
pub enum Isolation {
    /// In this process, on this context: a fault ends the run (remaining tasks fail).
    InProcess(Gpu),
    /// In child processes of this executable (`tune`): faults and hangs are survived. The
    /// first worker may already be running (started early to overlap its start).
    Subprocess {
        exe: PathBuf,
        /// Floor of the per-task time limit, in seconds.
        watchdog: Duration,
        first: Option<GpuWorker>,
    },
}

/// Runs every task of `job`, calling `on_result` as each finishes. Returns the number of
/// worker restarts, or the error that stopped the run (results so far were delivered).
pub fn run_tasks(
    job: &Job,
    isolation: Isolation,
    on_result: &mut dyn FnMut(TaskResult),
) -> Result<(usize, Option<GpuWorker>)> {
    match isolation {
        Isolation::InProcess(gpu) => {
            let host = HostData::new(job)?;
            let mut done = std::collections::BTreeSet::new();
            let mut lost = None;
            run_in_process(gpu, job, &host, &job.tasks, &mut |r| {
                done.insert(r.id);
                if r.sticky {
                    lost = Some(r.error.clone());
                }
                on_result(r);
            })?;
            if let Some(why) = lost {
                for t in job.tasks.iter().filter(|t| !done.contains(&t.id)) {
                    on_result(failed(
                        t.id,
                        format!("not run: an earlier variant faulted ({why}); in-process runs cannot recover"),
                    ));
                }
            }
            Ok((0, None))
        }
        Isolation::Subprocess {
            exe,
            watchdog,
            first,
        } => run_subprocess(job, &exe, watchdog, first, on_result),
    }
}

fn failed(id: usize, error: String) -> TaskResult {
    TaskResult {
        id,
        stats: None,
        error,
        registers: None,
        sticky: false,
        verify_s: 0.0,
        timing_s: 0.0,
        samples: Vec::new(),
        clock: None,
        warmup: None,
    }
}

/// The time a task may take before the watchdog fires: the floor, plus a hundred times what
/// its launches would take at the speed of the fastest task so far, plus a minute for the
/// first task of a worker (it also builds the inputs, the reference and the context).
fn task_limit(job: &Job, floor: Duration, fastest_ms: f64, first: bool) -> Duration {
    let launches = (job.bench.warmup + job.bench.reps + 2) as f64;
    let scaled = if fastest_ms.is_finite() {
        100.0 * launches * fastest_ms / 1e3
    } else {
        0.0
    };
    floor
        + Duration::from_secs_f64(scaled)
        + if first {
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
    let mut fastest_ms = f64::INFINITY;
    while !remaining.is_empty() {
        let mut worker = match next.take() {
            Some(w) => w,
            None => GpuWorker::start(exe, job.device)?.0,
        };
        let mut part = job.clone();
        part.tasks = remaining.iter().cloned().collect();
        worker
            .send(&part)
            .map_err(|e| Error::io("cannot send the job to", exe, e))?;
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
/// writes `PATH.cubin` for each and answers one [`CompileReply`] line per path.
pub fn compile_worker_main(args: &[String]) -> i32 {
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

/// Compiles the `.cu` files in `paths` with `workers` child processes pulling from one
/// queue; each success leaves `X.cubin` beside `X.cu`. `progress` is called per file.
pub fn compile_parallel(
    exe: &Path,
    arch: &str,
    cache: Option<&Path>,
    paths: &[PathBuf],
    workers: usize,
    progress: &(dyn Fn() + Sync),
) -> Result<Vec<CompileReply>> {
    let queue =
        std::sync::Mutex::new((0..paths.len()).collect::<std::collections::VecDeque<usize>>());
    let replies = std::sync::Mutex::new(vec![None::<CompileReply>; paths.len()]);
    let cache_arg = cache
        .map(|c| c.display().to_string())
        .unwrap_or_else(|| "-".into());
    let workers = workers.clamp(1, paths.len().max(1));
    std::thread::scope(|scope| -> Result<()> {
        let mut handles = Vec::new();
        for _ in 0..workers {
            use std::os::unix::process::CommandExt;
            let mut child = Command::new(exe)
                .args([COMPILE_WORKER_ARG, arch, &cache_arg])
                .process_group(0)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .map_err(|e| Error::io("cannot start compile worker", exe, e))?;
            let (queue, replies) = (&queue, &replies);
            handles.push(scope.spawn(move || {
                let mut stdin = child.stdin.take().expect("piped");
                let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
                loop {
                    let Some(i) = queue.lock().expect("queue lock").pop_front() else {
                        break;
                    };
                    let mut line = String::new();
                    let answered = writeln!(stdin, "{}", paths[i].display()).is_ok()
                        && stdin.flush().is_ok()
                        && stdout.read_line(&mut line).map(|n| n > 0).unwrap_or(false);
                    let reply = if answered {
                        serde_json::from_str(&line).unwrap_or_else(|e| CompileReply {
                            ok: false,
                            millis: 0.0,
                            from_cache: false,
                            log: format!("bad reply from compile worker: {e}"),
                        })
                    } else {
                        CompileReply {
                            ok: false,
                            millis: 0.0,
                            from_cache: false,
                            log: "compile worker died (NVRTC crashed?)".into(),
                        }
                    };
                    replies.lock().expect("replies lock")[i] = Some(reply);
                    progress();
                    if !answered {
                        break;
                    }
                }
                drop(stdin);
                let _ = child.wait();
            }));
        }
        for h in handles {
            let _ = h.join();
        }
        Ok(())
    })?;
    Ok(replies
        .into_inner()
        .expect("replies lock")
        .into_iter()
        .map(|r| {
            r.unwrap_or(CompileReply {
                ok: false,
                millis: 0.0,
                from_cache: false,
                log: "not compiled: its worker died earlier".into(),
            })
        })
        .collect())
}
