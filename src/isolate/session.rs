//! The GPU side of a job: one CUDA context with the inputs, the expected output, the checker
//! and the timer ([`Session`]), the tasks run on it, and the GPU worker process's entry point.

use super::device::Device;
use super::interrupt::interrupted;
use super::protocol::{
    deliver, failed, failed_with, ArgDesc, Job, PreLaunch, Task, TaskResult, Work,
};
use crate::cuda::gpu::{Arg, Buffer, DeviceInfo, Gpu, GpuFault, GpuResult};
use crate::error::{Error, Result};
use crate::measure::bench::{Enqueue, Stats, Timer};
use crate::measure::verify::{self, Checker, NAN_BITS};
use crate::model::limits::LaunchDims;
use crate::model::shape::Shape;
use crate::spec::ops::Compare;
use std::time::{Duration, Instant};

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

/// A task's launch on the buffers of timing slot `s` (see [`Session::launcher`]).
type Launcher<'s> = Box<dyn Fn(usize) -> GpuResult<()> + 's>;

/// Why a task cannot be launched: a fault loading its kernel (which may have cost the
/// context), or a plain reason.
enum Unready {
    Fault(GpuFault),
    Why(String),
}

/// Host-side data of a job: inputs and, when computed on the CPU, the expected output, as
/// raw bytes of the job's element type.
struct HostData {
    pub inputs: Vec<Vec<u8>>,
    pub reference: Option<Vec<u8>>,
}

impl HostData {
    fn new(job: &Job) -> Result<HostData> {
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
                Some(crate::spec::reference::compute(
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
    /// The cuBLAS handle, made when a task first calls cuBLAS: a session serves every later
    /// job with its data, whatever tasks the job that opened it had.
    blas: std::cell::OnceCell<std::result::Result<crate::cuda::gpu::Blas, String>>,
    /// Median of the fastest verified variant so far (for adaptive repetitions).
    best_ms: std::cell::Cell<f64>,
    /// NVML for this device, when it can be loaded.
    clocks: Option<crate::measure::clocks::ClockMonitor>,
    /// This job's warm-up is done (or was not needed): set by its first verified task.
    warmed: std::cell::Cell<bool>,
    /// Slots 1.. of batched timing with a cold cache: each a copy of every buffer of the job,
    /// in the order of `buffers` (slot 0 is `buffers` itself; see [`crate::measure::bench`]).
    copies: std::cell::RefCell<Vec<Vec<Buffer>>>,
}

/// The most device memory the copies of a job's buffers for batched timing may take.
const SLOT_BYTES_MAX: usize = 4 << 30;

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
                // Poisoned first, so an element the reference never writes is seen as such
                // rather than passing every variant that misses it too.
                gpu.fill_u32(&expected, verify::NAN_BITS)?;
                kernel.enqueue(&gpu, &ref_args)?;
                gpu.synchronize("computing the GPU reference")?;
                let on_gpu = gpu.download(&expected)?;
                let missed = verify::unwritten(&on_gpu, job.dtype.bytes());
                if missed > 0 {
                    return Err(Error::Usage(format!(
                        "the reference ({}) left {missed} of {out_len} elements of the output \
                         '{}' unwritten: it cannot be the answer",
                        job.reference, job.output
                    )));
                }
                let refs: Vec<&[u8]> = host.inputs.iter().map(Vec::as_slice).collect();
                // A reference configuration of a user's op is the answer by definition;
                // built-in GPU references are checked against the CPU first.
                if job.reference != "config" {
                    crate::spec::reference::spot_check(
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
            blas: std::cell::OnceCell::new(),
            best_ms: std::cell::Cell::new(f64::INFINITY),
            clocks: crate::measure::clocks::ClockMonitor::open(&gpu_uuid).ok(),
            warmed: std::cell::Cell::new(false),
            copies: std::cell::RefCell::new(Vec::new()),
        })
    }

    /// Makes up to `n` slots of the job's buffers available (copies of slot 0, inputs
    /// included), as many as fit in a quarter of free memory and [`SLOT_BYTES_MAX`]; returns
    /// how many there are.
    fn slots(&self, n: usize) -> GpuResult<usize> {
        let mut copies = self.copies.borrow_mut();
        if copies.len() + 1 < n {
            let footprint: usize = self.buffers.iter().map(|(_, b)| b.bytes()).sum();
            let room = (self.gpu.free_mem()? / 4).min(SLOT_BYTES_MAX);
            let fit = room / footprint.max(1);
            'sets: while copies.len() + 1 < n && copies.len() < fit {
                let mut set = Vec::with_capacity(self.buffers.len());
                for (name, b) in &self.buffers {
                    // Memory the driver will not give means fewer slots, not a failed task.
                    let Ok(c) = self.gpu.alloc(b.len, b.elem_bytes, name) else {
                        break 'sets;
                    };
                    self.gpu.copy(c.ptr, b.ptr, b.bytes())?;
                    set.push(c);
                }
                copies.push(set);
            }
        }
        Ok(copies.len() + 1)
    }

    /// The address in slot `slot` of the job buffer at `ptr` (other pointers unchanged).
    fn slot_ptr(&self, ptr: u64, slot: usize) -> u64 {
        if slot == 0 {
            return ptr;
        }
        let copies = self.copies.borrow();
        self.buffers
            .iter()
            .position(|(_, b)| b.ptr == ptr)
            .and_then(|i| copies.get(slot - 1).map(|set| set[i].ptr))
            .unwrap_or(ptr)
    }

    /// The kernel arguments with every buffer in slot `slot`.
    fn slot_args(&self, slot: usize) -> std::borrow::Cow<'_, [Arg]> {
        if slot == 0 {
            return std::borrow::Cow::Borrowed(&self.args);
        }
        self.args
            .iter()
            .map(|a| match a {
                Arg::Ptr(p) => Arg::Ptr(self.slot_ptr(*p, slot)),
                other => *other,
            })
            .collect()
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

    /// The buffer a task's output must equal and how it is compared: the expected output
    /// (the job's comparison), or the input buffer it copies (bit-exact).
    fn expect_of(&self, job: &Job, task: &Task) -> std::result::Result<(&Buffer, Compare), String> {
        if task.expect == "reference" {
            return Ok((&self.expected, job.compare));
        }
        self.buffer(&task.expect)
            .map(|b| (b, Compare::Exact))
            .ok_or_else(|| format!("expect names no buffer {}", task.expect))
    }

    /// What a task launches, ready to enqueue on the buffers of any timing slot, and its
    /// kernel's register count (none for a copy or cuBLAS).
    fn launcher(&self, task: &Task) -> std::result::Result<(Launcher<'_>, Option<i32>), Unready> {
        match &task.work {
            Work::Memcpy { from, to } => match (self.buffer(from), self.buffer(to)) {
                (Some(f), Some(t)) => {
                    let (src, dst, bytes) = (f.ptr, t.ptr, f.bytes().min(t.bytes()));
                    let copy = move |s: usize| {
                        self.gpu
                            .copy(self.slot_ptr(dst, s), self.slot_ptr(src, s), bytes)
                    };
                    Ok((Box::new(copy), None))
                }
                _ => Err(Unready::Why(format!(
                    "memcpy names an unknown buffer ({from} → {to})"
                ))),
            },
            Work::Sgemm { a, b, c, m, n, k } => {
                match (
                    self.blas.get_or_init(|| self.gpu.blas()),
                    self.buffer(a),
                    self.buffer(b),
                    self.buffer(c),
                ) {
                    (Err(why), ..) => Err(Unready::Why(why.clone())),
                    (Ok(blas), Some(a), Some(b), Some(c)) => {
                        let (a, b, c, m, n, k) = (a.ptr, b.ptr, c.ptr, *m, *n, *k);
                        let gemm = move |s: usize| {
                            let at = |p| self.slot_ptr(p, s);
                            self.gpu.sgemm(blas, at(a), at(b), at(c), m, n, k)
                        };
                        Ok((Box::new(gemm), None))
                    }
                    _ => Err(Unready::Why("sgemm names an unknown buffer".into())),
                }
            }
            Work::Kernel {
                cubin,
                kernel,
                launch,
                before,
            } => {
                let image = std::fs::read(cubin)
                    .map_err(|e| Unready::Why(format!("cannot read {}: {e}", cubin.display())))?;
                let k = Loaded::new(&self.gpu, &image, kernel, *launch, before)
                    .map_err(Unready::Fault)?;
                let registers = k.registers();
                let run = move |s: usize| k.enqueue(&self.gpu, &self.slot_args(s));
                Ok((Box::new(run), Some(registers)))
            }
        }
    }

    /// Verifies each task, then times them interleaved, one launch of each per round, so
    /// clock drift and other slow changes hit every candidate alike.
    fn run_interleaved(&self, job: &Job, tasks: &[Task]) -> Vec<TaskResult> {
        let mut results: Vec<TaskResult> = Vec::new();
        // Every kind of task takes part (the roof baselines run in the rounds beside the
        // leaders); each is verified first, as in its first timing.
        let mut loaded: Vec<(usize, Launcher<'_>, Option<i32>)> = Vec::new();
        // A failure, and whether it cost the context.
        let fault = |f: GpuFault| (f.to_string(), f.sticky);
        for task in tasks {
            let ready = self
                .expect_of(job, task)
                .map_err(|why| (why, false))
                .and_then(|(expect, mode)| {
                    let (launch, registers) = self.launcher(task).map_err(|u| match u {
                        Unready::Fault(f) => fault(f),
                        Unready::Why(why) => (why, false),
                    })?;
                    let out = &self.buffers[self.output].1;
                    self.poison().map_err(fault)?;
                    launch(0).map_err(fault)?;
                    self.gpu.synchronize("running the kernel").map_err(fault)?;
                    let cmp = self
                        .checker
                        .compare(&self.gpu, out, expect)
                        .map_err(fault)?;
                    cmp.judge(mode, job.rtol, out.len as u64)
                        .map_err(|why| (why, false))?;
                    Ok((launch, registers))
                });
            match ready {
                Ok((launch, registers)) => loaded.push((task.id, launch, registers)),
                Err((why, sticky)) => {
                    results.push(TaskResult {
                        check_failed: true,
                        ..failed_with(task.id, why, sticky)
                    });
                    if sticky {
                        // The context is lost: nothing more runs in it.
                        return results;
                    }
                }
            }
        }
        let rounds = job.confirm_rounds;
        let enqueues: Vec<&Launcher<'_>> = loaded.iter().map(|(_, l, _)| l).collect();
        let timed = (|| -> GpuResult<(Vec<Vec<f64>>, Vec<usize>)> {
            let events = self.gpu.timing_events(loaded.len())?;
            let mut samples = vec![Vec::with_capacity(rounds); loaded.len()];
            // Rounds of single launches first, as many as a first timing's warm-up: every
            // task warm, the clocks up, and the median of each task's launches picks how its
            // samples are taken, all alike (`contest_batches`).
            let mut warm = vec![Vec::new(); loaded.len()];
            for round in 0..job.bench.warmup.max(1) {
                self.timer.launch_timed(
                    &self.gpu,
                    &events,
                    round * loaded.len(),
                    "interleaved launches",
                    |i| enqueues[i](0),
                )?;
                for (w, pair) in warm.iter_mut().zip(&events) {
                    w.push(crate::cuda::gpu::elapsed_ms(pair)?);
                }
            }
            let per_launch: Vec<f64> = warm
                .iter()
                .map(|w| Stats::from_samples(w).map_or(f64::NAN, |s| s.median_ms))
                .collect();
            let samplers = crate::measure::bench::contest_batches(&per_launch)
                .into_iter()
                .zip(&enqueues)
                .map(|(batch, e)| {
                    self.timer
                        .sampler_of(&self.gpu, batch, e, &|n| self.slots(n))
                })
                .collect::<GpuResult<Vec<_>>>()?;
            let first_round = job.bench.warmup.max(1) * loaded.len();
            for round in 1..=rounds {
                self.timer.launch_timed(
                    &self.gpu,
                    &events,
                    first_round + round * loaded.len(),
                    "interleaved launches",
                    |i| samplers[i].enqueue(&self.gpu, &enqueues[i]),
                )?;
                for (i, pair) in events.iter().enumerate() {
                    let ms = crate::cuda::gpu::elapsed_ms(pair)?;
                    samples[i].push(ms / samplers[i].batch as f64);
                }
            }
            Ok((samples, samplers.iter().map(|s| s.batch).collect()))
        })();
        match timed {
            Ok((samples, batches)) => {
                for (((id, _, registers), s), batch) in loaded.iter().zip(samples).zip(batches) {
                    let mut r = failed(*id, String::new());
                    r.registers = *registers;
                    r.stats = Stats::from_batches(&s, batch);
                    r.samples = s;
                    r.clock = self.clocks.as_ref().and_then(|c| c.sample());
                    results.push(r);
                }
            }
            Err(f) => {
                for (id, ..) in &loaded {
                    results.push(failed_with(
                        *id,
                        format!("interleaved timing: {f}"),
                        f.sticky,
                    ));
                }
            }
        }
        results
    }

    fn run(&self, job: &Job, task: &Task) -> TaskResult {
        let mut r = failed(task.id, String::new());
        let outcome =
            self.expect_of(job, task)
                .and_then(|(expect, mode)| match self.launcher(task) {
                    Ok((launch, registers)) => {
                        r.registers = registers;
                        self.check_and_time(job, task, expect, mode, &mut r, &*launch)
                    }
                    Err(Unready::Fault(f)) => Err(self.fault(&mut r, f)),
                    Err(Unready::Why(why)) => Err(why),
                });
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
    fn warm_up(&self, enqueue: Enqueue) -> GpuResult<Option<crate::measure::clocks::Warmup>> {
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
                    enqueue(0)?;
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
        enqueue: Enqueue,
    ) -> std::result::Result<Stats, String> {
        let t = Instant::now();
        let out = &self.buffers[self.output].1;
        let verified = (|| {
            self.poison()?;
            enqueue(0)?;
            self.gpu.synchronize("running the kernel")?;
            self.checker.compare(&self.gpu, out, expect)
        })();
        r.verify_s = t.elapsed().as_secs_f64();
        let cmp = verified.map_err(|f| self.fault(r, f))?;
        cmp.judge(mode, job.rtol, out.len as u64)?;
        if !self.warmed.replace(true) {
            r.warmup = self.warm_up(enqueue).map_err(|f| self.fault(r, f))?;
        }
        let cutoff = crate::measure::bench::adaptive_cutoff(
            job.adaptive_cutoff,
            task.contender,
            self.best_ms.get(),
        );
        let t = Instant::now();
        let slots = |n| self.slots(n);
        let stats = self
            .timer
            .measure(&self.gpu, enqueue, &slots, cutoff)
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
    session.best_ms.set(job.best_ms.unwrap_or(f64::INFINITY));
    if job.confirm_rounds > 0 {
        return deliver(session.run_interleaved(job, tasks), sink);
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

/// The GPU through CUDA: the device, and the session of the last job's data, which the next
/// job with the same data reuses (inputs, expected output and buffers stay on the device).
pub struct CudaDevice {
    info: DeviceInfo,
    /// The device while no session holds it.
    idle: Option<Gpu>,
    session: Option<(String, Session)>,
}

impl CudaDevice {
    pub fn open(ordinal: usize) -> Result<CudaDevice> {
        let gpu = Gpu::open(ordinal)?;
        Ok(CudaDevice {
            info: gpu.info.clone(),
            idle: Some(gpu),
            session: None,
        })
    }
}

impl Device for CudaDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn free_mem(&self) -> Result<u64> {
        let gpu = match (&self.idle, &self.session) {
            (Some(g), _) => g,
            (None, Some((_, s))) => &s.gpu,
            (None, None) => return Ok(0),
        };
        Ok(gpu.free_mem()? as u64)
    }

    fn prepare(&mut self, job: &Job) -> Result<()> {
        let key = job.data_key();
        if self.session.as_ref().is_none_or(|(k, _)| *k != key) {
            // The device comes back from the last session, or is opened again when a failed
            // set-up or a fault took it.
            let gpu = match (self.session.take(), self.idle.take()) {
                (Some((_, s)), _) => s.into_gpu(),
                (None, Some(g)) => g,
                (None, None) => Gpu::open(self.info.ordinal)?,
            };
            let session = HostData::new(job).and_then(|host| Session::open(gpu, job, &host))?;
            self.session = Some((key, session));
        }
        Ok(())
    }

    fn run(&mut self, job: &Job, tasks: &[Task], sink: &mut dyn FnMut(TaskResult)) -> Result<bool> {
        self.prepare(job)?;
        let (_, session) = self.session.as_ref().expect("prepared");
        let sticky = run_on(session, job, tasks, sink);
        if sticky {
            // The context is poisoned: the next job opens the device again.
            self.session = None;
        }
        Ok(sticky)
    }
}
