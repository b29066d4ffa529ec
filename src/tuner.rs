//! The pipeline: space → render → compile → verify → time → record. Every configuration
//! ends as a [`Record`] (ok, failed with the reason, or pruned with the reason); a failing
//! variant never stops the run, and a fault that poisons the CUDA context is survived by
//! opening a fresh context and carrying on with the next variant.

use crate::bench::{BenchSettings, Stats, Timer};
use crate::codegen::Renderer;
use crate::compile::{default_cache_dir, Compiler};
use crate::error::{Error, Result};
use crate::expr::Vars;
use crate::gpu::{reset_device, Arg, Buffer, DeviceInfo, Gpu, GpuFault};
use crate::ops::{one_line, BaselineKind, Compare, Op, Role};
use crate::results::{self, BestRow, Record, RunInfo, Status};
use crate::shape::Shape;
use crate::space::{self, Candidate, DeviceLimits, LaunchDims};
use crate::verify::{self, Checker, NAN_BITS};
use indicatif::{ProgressBar, ProgressStyle};
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

/// Everything a tuning run needs, as plain data (the CLI builds it; nothing below reads argv).
#[derive(Debug, Clone)]
pub struct TuneOptions {
    pub op: String,
    /// Read op specs and templates from here instead of the built-in ones.
    pub templates: Option<PathBuf>,
    pub shape: String,
    /// `NAME=v1,v2,...` overrides.
    pub params: Vec<String>,
    pub bench: BenchSettings,
    pub out_dir: PathBuf,
    pub compile_only: bool,
    /// Target architecture; defaults to the GPU's own, or sm_90 without a GPU.
    pub arch: Option<String>,
    pub emit: Option<PathBuf>,
    pub device: usize,
    /// Use the on-disk cubin cache.
    pub cubin_cache: bool,
    pub rtol: Option<f64>,
    pub seed: u64,
}

/// Wall time of each phase, in seconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct Phases {
    pub setup_s: f64,
    pub compile_s: f64,
    pub verify_s: f64,
    pub timing_s: f64,
    pub total_s: f64,
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct TuneOutcome {
    pub info: Option<RunInfo>,
    pub device: Option<DeviceInfo>,
    pub arch: String,
    pub param_names: Vec<String>,
    pub records: Vec<Record>,
    /// Index into `records` of the fastest verified variant.
    pub best: Option<usize>,
    pub roof_throughput: Option<f64>,
    pub prune_reasons: Vec<(String, usize)>,
    pub compiled: usize,
    pub from_cache: usize,
    pub context_restarts: usize,
    pub csv_path: Option<PathBuf>,
    pub best_path: Option<PathBuf>,
    pub phases: Phases,
}

/// A compiled image, or why there is none (render or compile error text).
type CubinResult = std::result::Result<std::sync::Arc<Vec<u8>>, String>;

/// The result of rendering and compiling one live candidate.
struct Build {
    candidate: usize,
    cubin: CubinResult,
    compile_ms: f64,
}

fn bar(len: usize, prefix: &'static str) -> ProgressBar {
    let pb = ProgressBar::new(len as u64);
    pb.set_style(
        ProgressStyle::with_template("{prefix:>9} [{bar:32}] {pos}/{len} {elapsed_precise} {msg}")
            .expect("static template")
            .progress_chars("=> "),
    );
    pb.set_prefix(prefix);
    pb
}

/// Runs the whole pipeline for one op and shape.
pub fn tune(opts: &TuneOptions) -> Result<TuneOutcome> {
    let t0 = Instant::now();
    // Everything the user typed is checked before any GPU or compiler is touched.
    let op = Op::load(&opts.op, opts.templates.as_deref())?;
    let shape = Shape::parse(&opts.shape, &op.spec.dims)?;
    let overrides = opts
        .params
        .iter()
        .map(|p| space::parse_override(&op, p))
        .collect::<Result<Vec<_>>>()?;
    if let Some(arch) = &opts.arch {
        crate::compile::check_arch(arch)?;
    }
    if opts.bench.reps == 0 {
        return Err(Error::Usage("--reps must be at least 1".into()));
    }
    let renderer = Renderer::new(&op)?;

    let gpu = if opts.compile_only {
        None
    } else {
        Some(Gpu::open(opts.device)?)
    };
    let limits = gpu
        .as_ref()
        .map(|g| g.info.limits)
        .unwrap_or(DeviceLimits::SM90_DEFAULT);
    let arch = match (&opts.arch, &gpu) {
        (Some(a), _) => a.clone(),
        (None, Some(g)) => g.info.arch(),
        (None, None) => "sm_90".to_string(),
    };
    let candidates = space::enumerate(&op, &shape, &limits, &overrides)?;
    let prune_reasons = space::prune_summary(&candidates);
    let live: Vec<usize> = candidates
        .iter()
        .filter(|c| c.pruned.is_none())
        .map(|c| c.index)
        .collect();
    if live.is_empty() {
        let reasons: Vec<String> = prune_reasons
            .iter()
            .map(|(r, n)| format!("{n} × {r}"))
            .collect();
        return Err(Error::EmptySpace(format!(
            "all {} configurations were pruned ({})",
            candidates.len(),
            reasons.join("; ")
        )));
    }
    let base = space::base_vars(&op, &shape, &limits);
    let layout = BufferLayout::new(&op, &base)?;
    if let Some(g) = &gpu {
        layout.check_memory(g)?;
    }
    let cache_dir = if opts.cubin_cache {
        default_cache_dir()
    } else {
        None
    };
    let compiler = Compiler::new(&arch, cache_dir)?;
    let setup_s = t0.elapsed().as_secs_f64();

    // Render and compile. Identical sources (e.g. BOUNDS=specialized vs none on a tile
    // multiple) are compiled once.
    let t_compile = Instant::now();
    let pb = bar(live.len(), "compile");
    let mut by_source: HashMap<String, (CubinResult, f64)> = HashMap::new();
    let (mut compiled, mut from_cache) = (0, 0);
    let mut builds = Vec::with_capacity(live.len());
    for &i in &live {
        let c = &candidates[i];
        let (cubin, compile_ms) = match renderer.render(c) {
            Err(e) => (Err(e), 0.0),
            Ok(source) => {
                if let Some(dir) = &opts.emit {
                    let path = dir.join(format!("{}_v{:04}.cu", op.name(), c.index));
                    results::write_atomic(&path, source.as_bytes())?;
                }
                by_source
                    .entry(source)
                    .or_insert_with_key(|source| match compiler.compile(source) {
                        Ok(done) => {
                            compiled += 1;
                            from_cache += usize::from(done.from_cache);
                            (Ok(std::sync::Arc::new(done.cubin)), done.millis)
                        }
                        Err(fail) => (Err(format!("compile: {}", fail.log)), fail.millis),
                    })
                    .clone()
            }
        };
        builds.push(Build {
            candidate: i,
            cubin,
            compile_ms,
        });
        pb.inc(1);
    }
    pb.finish_and_clear();
    let compile_s = t_compile.elapsed().as_secs_f64();

    let param_names: Vec<String> = op.spec.params.iter().map(|p| p.name.clone()).collect();
    let mut outcome = TuneOutcome {
        info: None,
        device: gpu.as_ref().map(|g| g.info.clone()),
        arch: arch.clone(),
        param_names,
        records: Vec::new(),
        best: None,
        roof_throughput: None,
        prune_reasons,
        compiled,
        from_cache,
        context_restarts: 0,
        csv_path: None,
        best_path: None,
        phases: Phases {
            setup_s,
            compile_s,
            ..Phases::default()
        },
    };
    let Some(gpu) = gpu else {
        outcome.records = candidates
            .iter()
            .map(|c| compile_only_record(c, &builds))
            .collect();
        outcome.phases.total_s = t0.elapsed().as_secs_f64();
        return Ok(outcome);
    };

    let (version_major, version_minor) = compiler.version();
    let (unit_expr, unit) = op.spec.metric.amount();
    let work = base.eval_int(unit_expr, &format!("{} metric", op.origin))? as f64;
    let info = RunInfo {
        op: op.name().to_string(),
        shape: shape.to_string(),
        dtype: op.spec.dtype.clone(),
        gpu: gpu.info.name.clone(),
        compute_capability: format!(
            "{}.{}",
            gpu.info.compute_capability.0, gpu.info.compute_capability.1
        ),
        cache: opts.bench.cache.as_str().to_string(),
        reps: opts.bench.reps,
        unit: unit.to_string(),
        roof: String::new(),
        driver: gpu.info.driver_string(),
        nvrtc: format!("{version_major}.{version_minor}"),
    };
    let throughput = |stats: &Stats| work / (stats.median_ms * 1e-3) / 1e9;

    // Reference data, made once and reused by every variant (and every fresh context).
    let inputs = layout.random_inputs(opts.seed);
    let input_refs: Vec<&[f32]> = inputs.iter().map(Vec::as_slice).collect();
    let reference = verify::cpu_reference(&op.spec.reference, &shape, &input_refs)?;
    let checker_cubin = compiler
        .compile(verify::COMPARE_SOURCE)
        .map_err(|f| Error::Cuda {
            during: "compiling the comparison kernel".into(),
            why: one_line(&f.log),
        })?
        .cubin;
    let rtol = opts.rtol.or(op.spec.rtol).unwrap_or(0.0);
    let ctx = RunContext {
        op: &op,
        layout: &layout,
        inputs: &inputs,
        reference: &reference,
        checker_cubin: &checker_cubin,
        bench: opts.bench,
        rtol,
    };

    let mut session = Some(Session::open(gpu, &ctx)?);
    let mut phases = outcome.phases;

    // Baselines: the classic kernels and the copy roof.
    let baseline_src = renderer.render_baselines(&op)?;
    let baseline_cubin = match &baseline_src {
        Some(src) => Some(compiler.compile(src).map_err(|f| {
            Error::Template {
                template: op
                    .spec
                    .baseline_source
                    .as_ref()
                    .map(|b| b.template.clone())
                    .unwrap_or_default(),
                why: format!("baseline kernels do not compile: {}", one_line(&f.log)),
            }
        })?),
        None => None,
    };
    let mut records = Vec::new();
    for b in &op.spec.baselines {
        let s = session.as_ref().expect("session is open");
        let expect = if b.expect == "reference" {
            &s.expected
        } else {
            s.buffer(&b.expect)
        };
        let result = match b.kind {
            BaselineKind::Memcpy => {
                let (from, to) = (
                    s.buffer(b.from.as_deref().unwrap_or("")),
                    s.buffer(b.to.as_deref().unwrap_or("")),
                );
                let bytes = from.len.min(to.len) * 4;
                let (src, dst) = (from.ptr, to.ptr);
                s.check_and_time(&ctx, expect, &mut phases, &|| s.gpu.copy(dst, src, bytes))
            }
            BaselineKind::Kernel => {
                let kernel = b.kernel.as_deref().unwrap_or_default();
                let cubin = baseline_cubin
                    .as_ref()
                    .map(|c| c.cubin.as_slice())
                    .unwrap_or_default();
                match (
                    s.gpu.load(cubin, kernel),
                    baseline_launch(&base, b, &limits, &op)?,
                ) {
                    (Ok(k), Ok(dims)) => s.check_and_time(&ctx, expect, &mut phases, &|| {
                        s.gpu.launch(&k, dims, &s.args)
                    }),
                    (Err(f), _) => Err(Failure::Fault(f)),
                    (_, Err(why)) => Err(Failure::Wrong(why)),
                }
            }
        };
        let mut rec = Record {
            kind: "baseline".into(),
            name: b.name.clone(),
            params: vec![],
            status: Status::Ok,
            error: String::new(),
            stats: None,
            throughput: None,
            frac_of_roof: None,
            compile_ms: None,
            registers: None,
        };
        apply(
            &mut rec,
            result,
            &throughput,
            &mut session,
            opts.device,
            &mut outcome.context_restarts,
        );
        records.push(rec);
        if session.is_none() {
            session = Some(Session::open(Gpu::open(opts.device)?, &ctx)?);
        }
    }
    let roof = op
        .spec
        .baselines
        .iter()
        .zip(&records)
        .filter(|(b, r)| b.roof && r.status == Status::Ok)
        .filter_map(|(b, r)| r.stats.map(|s| (b.name.clone(), s.median_ms)))
        .min_by(|a, b| a.1.total_cmp(&b.1));

    // The tuned space.
    let pb = bar(builds.len(), "tune");
    let mut best_ms = f64::INFINITY;
    let mut pending: HashMap<usize, Build> = builds.into_iter().map(|b| (b.candidate, b)).collect();
    let mut fatal: Option<Error> = None;
    for c in &candidates {
        let mut rec = Record {
            kind: "variant".into(),
            name: format!("v{:04}", c.index),
            params: c
                .config
                .values
                .iter()
                .map(|(k, v)| (k.clone(), v.to_string()))
                .collect(),
            status: Status::Pruned,
            error: c.pruned.clone().unwrap_or_default(),
            stats: None,
            throughput: None,
            frac_of_roof: None,
            compile_ms: None,
            registers: None,
        };
        if let Some(build) = pending.remove(&c.index) {
            rec.compile_ms = Some(build.compile_ms);
            rec.status = Status::Failed;
            if let Some(e) = &fatal {
                rec.error = format!("not run: {e}");
            } else {
                if session.is_none() {
                    match Gpu::open(opts.device).and_then(|g| Session::open(g, &ctx)) {
                        Ok(s) => session = Some(s),
                        Err(e) => {
                            rec.error = format!("not run: {e}");
                            fatal = Some(e);
                        }
                    }
                }
                if let Some(s) = session.as_ref() {
                    let result = match &build.cubin {
                        Err(e) => Err(Failure::Wrong(e.clone())),
                        Ok(cubin) => match s.gpu.load(cubin, &op.spec.kernel) {
                            Err(f) => Err(Failure::Fault(f)),
                            Ok(k) => {
                                rec.registers = Some(k.registers);
                                let dims = c.launch.expect("live candidates have launch dims");
                                s.check_and_time(&ctx, &s.expected, &mut phases, &|| {
                                    s.gpu.launch(&k, dims, &s.args)
                                })
                            }
                        },
                    };
                    apply(
                        &mut rec,
                        result,
                        &throughput,
                        &mut session,
                        opts.device,
                        &mut outcome.context_restarts,
                    );
                }
            }
            pb.inc(1);
            if let Some(st) = rec.stats.filter(|_| rec.status == Status::Ok) {
                if st.median_ms < best_ms {
                    best_ms = st.median_ms;
                    pb.set_message(format!(
                        "best {:.1} {unit} ({})",
                        work / (best_ms * 1e-3) / 1e9,
                        rec.label()
                    ));
                }
            }
        }
        records.push(rec);
    }
    pb.finish_and_clear();
    drop(session);

    let mut info = info;
    if let Some((name, ms)) = &roof {
        info.roof = name.clone();
        outcome.roof_throughput = Some(work / (ms * 1e-3) / 1e9);
        for r in &mut records {
            r.frac_of_roof = r
                .stats
                .filter(|_| r.status == Status::Ok)
                .map(|s| ms / s.median_ms);
        }
    }
    outcome.best = records
        .iter()
        .enumerate()
        .filter(|(_, r)| r.kind == "variant" && r.status == Status::Ok)
        .min_by(|a, b| {
            let (x, y) = (
                a.1.stats.map(|s| s.median_ms),
                b.1.stats.map(|s| s.median_ms),
            );
            x.unwrap_or(f64::INFINITY)
                .total_cmp(&y.unwrap_or(f64::INFINITY))
        })
        .map(|(i, _)| i);
    outcome.records = records;

    // Results: the run CSV always, best.csv when something verified.
    let csv_path = results::run_csv_path(&opts.out_dir, &info);
    results::write_atomic(
        &csv_path,
        &results::run_csv(&info, &outcome.param_names, &outcome.records)?,
    )?;
    outcome.csv_path = Some(csv_path);
    if let Some(i) = outcome.best {
        let r = &outcome.records[i];
        let best_path = opts.out_dir.join("best.csv");
        results::upsert_best(
            &best_path,
            BestRow {
                op: info.op.clone(),
                shape: info.shape.clone(),
                dtype: info.dtype.clone(),
                gpu: info.gpu.clone(),
                compute_capability: info.compute_capability.clone(),
                params: r
                    .params
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(";"),
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
            },
        )?;
        outcome.best_path = Some(best_path);
    }
    outcome.info = Some(info);
    phases.total_s = t0.elapsed().as_secs_f64();
    outcome.phases = phases;
    match fatal {
        Some(e) => Err(e),
        None => Ok(outcome),
    }
}

fn compile_only_record(c: &Candidate, builds: &[Build]) -> Record {
    let build = builds.iter().find(|b| b.candidate == c.index);
    let (status, error) = match (&c.pruned, build.map(|b| &b.cubin)) {
        (Some(reason), _) => (Status::Pruned, reason.clone()),
        (None, Some(Err(e))) => (Status::Failed, e.clone()),
        _ => (Status::Ok, String::new()),
    };
    Record {
        kind: "variant".into(),
        name: format!("v{:04}", c.index),
        params: c
            .config
            .values
            .iter()
            .map(|(k, v)| (k.clone(), v.to_string()))
            .collect(),
        status,
        error,
        stats: None,
        throughput: None,
        frac_of_roof: None,
        compile_ms: build.map(|b| b.compile_ms),
        registers: None,
    }
}

fn baseline_launch(
    base: &Vars,
    b: &crate::ops::Baseline,
    limits: &DeviceLimits,
    op: &Op,
) -> Result<std::result::Result<LaunchDims, String>> {
    let (Some(block), Some(grid)) = (&b.block, &b.grid) else {
        return Ok(Err("baseline has no launch geometry".into()));
    };
    space::eval_launch(
        base,
        block,
        grid,
        limits,
        &format!("{} baselines.{}", op.origin, b.name),
    )
}

/// Why a variant did not produce a time.
enum Failure {
    Wrong(String),
    Fault(GpuFault),
}

/// Fills a record from a measurement; after a sticky fault it closes the session so the
/// caller opens a fresh context for the next variant.
fn apply(
    rec: &mut Record,
    result: std::result::Result<Stats, Failure>,
    throughput: &dyn Fn(&Stats) -> f64,
    session: &mut Option<Session>,
    device: usize,
    restarts: &mut usize,
) {
    match result {
        Ok(stats) => {
            rec.status = Status::Ok;
            rec.error.clear();
            rec.throughput = Some(throughput(&stats));
            rec.stats = Some(stats);
        }
        Err(Failure::Wrong(why)) => {
            rec.status = Status::Failed;
            rec.error = one_line(&why);
        }
        Err(Failure::Fault(f)) => {
            rec.status = Status::Failed;
            rec.error = f.to_string();
            if f.sticky {
                *session = None;
                reset_device(device);
                *restarts += 1;
            }
        }
    }
}

/// Sizes of the op's buffers for this shape.
struct BufferLayout {
    buffers: Vec<(String, Role, usize)>,
    args: Vec<ArgSpec>,
}

enum ArgSpec {
    Buffer(String),
    Int(i32),
}

impl BufferLayout {
    fn new(op: &Op, base: &Vars) -> Result<BufferLayout> {
        let mut buffers = Vec::new();
        for b in &op.spec.buffers {
            let n = base.eval_int(
                &b.elements,
                &format!("{} buffers.{}.elements", op.origin, b.name),
            )?;
            let n = usize::try_from(n)
                .ok()
                .filter(|n| n.checked_mul(4).is_some())
                .ok_or_else(|| Error::Expr {
                    expr: b.elements.clone(),
                    context: format!("{} buffers.{}", op.origin, b.name),
                    why: format!("{n} elements is not a valid buffer size"),
                })?;
            buffers.push((b.name.clone(), b.role, n));
        }
        let mut args = Vec::new();
        for a in &op.spec.args {
            if buffers.iter().any(|(n, _, _)| n == a) {
                args.push(ArgSpec::Buffer(a.clone()));
            } else {
                let v = base.eval_int(a, &format!("{} args", op.origin))?;
                let v = i32::try_from(v).map_err(|_| Error::Expr {
                    expr: a.clone(),
                    context: format!("{} args", op.origin),
                    why: format!("{v} does not fit a 32-bit int argument"),
                })?;
                args.push(ArgSpec::Int(v));
            }
        }
        Ok(BufferLayout { buffers, args })
    }

    fn output(&self) -> (&str, usize) {
        self.buffers
            .iter()
            .find(|(_, r, _)| *r == Role::Output)
            .map(|(n, _, len)| (n.as_str(), *len))
            .expect("specs are checked to have an output")
    }

    /// Device bytes a run needs: the buffers, the expected output, and the L2 flush buffer.
    fn check_memory(&self, gpu: &Gpu) -> Result<()> {
        let elems: usize = self.buffers.iter().map(|b| b.2).sum::<usize>() + self.output().1;
        let need = elems as u64 * 4 + (gpu.info.l2_bytes as u64 * 2).max(64 << 20) + (64 << 20);
        let free = gpu.free_mem()? as u64;
        if need > free {
            return Err(Error::OutOfMemory {
                need_mib: need >> 20,
                free_mib: free >> 20,
            });
        }
        Ok(())
    }

    fn random_inputs(&self, seed: u64) -> Vec<Vec<f32>> {
        self.buffers
            .iter()
            .enumerate()
            .filter(|(_, b)| b.1 == Role::Input)
            .map(|(i, b)| verify::random_input(b.2, seed.wrapping_add(i as u64)))
            .collect()
    }
}

/// Read-only data of a run that a fresh context needs to be rebuilt.
struct RunContext<'a> {
    op: &'a Op,
    layout: &'a BufferLayout,
    inputs: &'a [Vec<f32>],
    reference: &'a [f32],
    checker_cubin: &'a [u8],
    bench: BenchSettings,
    rtol: f64,
}

/// One CUDA context with the inputs uploaded, the expected output, the checker and timer.
struct Session {
    gpu: Gpu,
    buffers: Vec<(String, Buffer)>,
    expected: Buffer,
    output: usize,
    args: Vec<Arg>,
    checker: Checker,
    timer: Timer,
}

impl Session {
    fn open(gpu: Gpu, ctx: &RunContext) -> Result<Session> {
        let mut buffers = Vec::new();
        let mut inputs = ctx.inputs.iter();
        for (name, role, len) in &ctx.layout.buffers {
            let mut buf = gpu.alloc(*len, name)?;
            if *role == Role::Input {
                gpu.upload(
                    inputs.next().expect("one host input per input buffer"),
                    &mut buf,
                )?;
            }
            buffers.push((name.clone(), buf));
        }
        let (out_name, out_len) = ctx.layout.output();
        let mut expected = gpu.alloc(out_len, "the expected output")?;
        gpu.upload(ctx.reference, &mut expected)?;
        let output = buffers
            .iter()
            .position(|(n, _)| n == out_name)
            .expect("output exists");
        let args = ctx
            .layout
            .args
            .iter()
            .map(|a| match a {
                ArgSpec::Buffer(name) => Arg::Ptr(
                    buffers
                        .iter()
                        .find(|(n, _)| n == name)
                        .expect("checked")
                        .1
                        .ptr,
                ),
                ArgSpec::Int(v) => Arg::I32(*v),
            })
            .collect();
        let checker = Checker::new(&gpu, ctx.checker_cubin)?;
        let timer = Timer::new(&gpu, ctx.bench)?;
        gpu.synchronize("uploading inputs")?;
        Ok(Session {
            gpu,
            buffers,
            expected,
            output,
            args,
            checker,
            timer,
        })
    }

    fn buffer(&self, name: &str) -> &Buffer {
        &self
            .buffers
            .iter()
            .find(|(n, _)| n == name)
            .expect("spec names are checked")
            .1
    }

    /// Poisons the output, runs once, verifies on the GPU, then times it.
    fn check_and_time(
        &self,
        ctx: &RunContext,
        expect: &Buffer,
        phases: &mut Phases,
        enqueue: &dyn Fn() -> crate::gpu::GpuResult<()>,
    ) -> std::result::Result<Stats, Failure> {
        let t = Instant::now();
        let out = &self.buffers[self.output].1;
        let verified = (|| {
            self.gpu.fill_u32(out, NAN_BITS)?;
            enqueue()?;
            self.gpu.synchronize("running the kernel")?;
            self.checker.compare(&self.gpu, out, expect)
        })();
        phases.verify_s += t.elapsed().as_secs_f64();
        let cmp = verified.map_err(Failure::Fault)?;
        let mode = if std::ptr::eq(expect, &self.expected) {
            ctx.op.spec.compare
        } else {
            Compare::Exact
        };
        cmp.judge(mode, ctx.rtol, out.len as u64)
            .map_err(Failure::Wrong)?;
        let t = Instant::now();
        let stats = self
            .timer
            .measure(&self.gpu, enqueue)
            .map_err(Failure::Fault);
        phases.timing_s += t.elapsed().as_secs_f64();
        stats
    }
}
