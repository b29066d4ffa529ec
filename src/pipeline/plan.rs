//! The first stages of a run: [`plan`] checks the input and the space before any GPU or
//! compiler is touched; [`device`] finds the device, the space at its limits and the compiler.
//! Also the input checks a sweep runs once before it starts ([`check_inputs`]).

use super::options::{Isolation, TuneOptions};
use crate::cuda::compile::{default_cache_dir, Compiler};
use crate::cuda::gpu::DeviceInfo;
use crate::error::{Error, Result};
use crate::isolate::compile_pool::CompilePool;
use crate::isolate::device::Device;
use crate::isolate::worker::{GpuWorker, KeptWorker, Starting};
use crate::model::limits::DeviceLimits;
use crate::model::shape::Shape;
use crate::spec::codegen::Renderer;
use crate::spec::expr::Vars;
use crate::spec::ops::{Op, Role};
use crate::spec::space::{self, Candidate};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The checked input: the op, the shape and the space at [`CHECK_LIMITS`].
pub(super) struct Plan {
    pub op: Op,
    pub overrides: Vec<space::ParamOverride>,
    pub shape: Shape,
    /// The space at [`CHECK_LIMITS`] (it has a live configuration).
    pub checked: space::Space,
    pub renderer: Renderer,
}

/// Everything user input can get wrong is checked here, the space included: parameters that
/// leave no configuration are bad input with or without a GPU. `loaded` is the op when the
/// caller has loaded it already (a sweep loads it once for all its shapes); else it is loaded
/// here.
pub(super) fn plan(opts: &TuneOptions, loaded: Option<&Op>) -> Result<Plan> {
    let (op, overrides) = match loaded {
        Some(op) => {
            check_settings_and_folders(opts)?;
            (op.clone(), check_op_inputs(opts, op)?)
        }
        None => check_inputs(opts)?,
    };
    let shape = Shape::parse(&opts.shape, &op.spec.dims)?;
    let checked = live_space(&op, &shape, &CHECK_LIMITS, &overrides, opts)?;
    let renderer = Renderer::new(&op)?;
    Ok(Plan {
        op,
        overrides,
        shape,
        checked,
        renderer,
    })
}

/// The device, the space at its limits, the buffers and the compiler.
pub(super) struct Setup {
    pub op: Op,
    pub shape: Shape,
    pub renderer: Renderer,
    /// `None` with `--compile-only`.
    pub device: Option<DeviceInfo>,
    /// The first GPU worker (with a worker executable), already started.
    pub first_worker: Option<GpuWorker>,
    /// The device opened in this process (without worker processes).
    pub local_device: Option<Box<dyn Device>>,
    pub limits: DeviceLimits,
    pub arch: String,
    /// The valid configurations (and the pruned ones with `--pruned-rows`), in space order;
    /// a candidate's position here is not its point index.
    pub candidates: Vec<Candidate>,
    pub prune_reasons: Vec<(String, usize)>,
    /// The live candidates (positions in `candidates`) this run owns: all, or a shard's share.
    pub live: Vec<usize>,
    /// The parameters whose finishing values only the search's leaders try, with those
    /// values ([`space::finishing`]).
    pub finish: Vec<(String, Vec<crate::spec::expr::Value>)>,
    pub base: Vars,
    pub layout: BufferLayout,
    /// The metric's amount of work at this shape (bytes or flops), evaluated here so that a
    /// spec whose metric does not evaluate is refused by a compile-only run too.
    pub work: f64,
    pub cache_dir: Option<PathBuf>,
    pub compiler: Compiler,
    /// The compile pool, its workers started ([`compile_pool`]); the build stage takes it.
    pub pool: Option<CompilePool>,
    /// Pruned candidates get records ([`TuneOptions::pruned_rows`]).
    pub pruned_rows: bool,
    /// Seconds from the start of the run to here.
    pub setup_s: f64,
}

impl Setup {
    /// Whether the candidate at `at` gets a record: pruned ones (with their reason, kept only
    /// with `--pruned-rows`), and the live ones this run owns; with `--shard`, the other
    /// shards' live ones get none.
    pub fn shown(&self, at: usize) -> bool {
        match self.candidates[at].pruned {
            Some(_) => self.pruned_rows,
            None => self.live.binary_search(&at).is_ok(),
        }
    }

    /// The position in `candidates` of the configuration with point index `index` (the
    /// number in its name and task id), when it was kept.
    pub fn position(&self, index: usize) -> Option<usize> {
        self.candidates
            .binary_search_by_key(&index, |c| c.index)
            .ok()
    }
}

/// The first GPU worker of a run with workers: the one an earlier run kept for this device,
/// or one started now, before [`plan`], so that its driver and context start while the space
/// is enumerated; bad input still ends the run (and, dropped, the worker) before a GPU is
/// asked for. [`device`] reads its report.
pub(super) fn first_worker(opts: &TuneOptions, kept: &mut KeptWorker) -> Result<Option<Starting>> {
    match &opts.isolation {
        Isolation::Workers(exe) if !opts.compile_only => match kept.take_for(exe, opts.device) {
            Some(worker) => Ok(Some(worker)),
            None => Ok(Some(GpuWorker::spawn(exe, opts.device)?)),
        },
        _ => Ok(None),
    }
}

/// The architecture compiled for when it is known without a device: `--arch`, or sm_90 for
/// a `--compile-only` run without it. `None`: the GPU's own, once [`device`] knows it.
fn arch_without_device(opts: &TuneOptions) -> Option<String> {
    match &opts.arch {
        Some(a) => Some(a.clone()),
        None if opts.compile_only => Some("sm_90".to_string()),
        None => None,
    }
}

/// The cubin cache a run reads and writes, `None` with `--no-cache`.
fn cache_dir(opts: &TuneOptions) -> Option<PathBuf> {
    opts.cubin_cache.then(default_cache_dir).flatten()
}

/// The compile pool of a run whose compiles run in worker processes
/// ([`TuneOptions::compile_worker_exe`]), with its workers started now for `compiler`'s
/// architecture and cache: each loads NVRTC and compiles a warm-up kernel while this process
/// enumerates the space, ranks it and renders the first round, instead of after the first
/// source is queued. At most `sources` workers start now (the configurations the run could
/// compile, where it knows them); the pool starts the rest if more sources queue up. Workers
/// that get no source (every source was in the cubin cache) idle until the run ends or stops
/// on an error, which drops the pool and ends them.
///
/// `None` without compile workers, and where no process can be started (the first source
/// that misses the cache starts the pool again and reports why it cannot).
fn compile_pool(opts: &TuneOptions, compiler: &Compiler, sources: usize) -> Option<CompilePool> {
    let exe = opts.compile_worker_exe()?;
    let mut pool = CompilePool::new(
        exe,
        compiler.arch(),
        compiler.cache_dir(),
        opts.jobs,
        opts.compile_limit,
    );
    pool.start_workers(sources).ok()?;
    Some(pool)
}

/// The compile pool of a run whose architecture is known without a device (`--arch`,
/// `--compile-only`), started before its input is checked ([`compile_pool`], up to `--jobs`
/// workers). `None` also where NVRTC cannot be loaded or the architecture is malformed (what
/// a worker checks as it starts): the run reports that once, later, not each worker.
pub(super) fn early_compile_pool(opts: &TuneOptions) -> Option<CompilePool> {
    opts.compile_worker_exe()?;
    let compiler = Compiler::new(&arch_without_device(opts)?, cache_dir(opts)).ok()?;
    compile_pool(opts, &compiler, opts.jobs)
}

/// The device: described by the first GPU worker (started now, so the driver's start
/// overlaps compiling; this process then needs no CUDA context), or opened here when running
/// in-process; none with `--compile-only`. Then the space at the device's limits, the buffer
/// layout (checked against the free device memory) and the compiler. `pool`: the compile
/// pool when its workers were started before the device was known ([`early_compile_pool`]);
/// else they start here, as soon as the architecture is known ([`compile_pool`]). `t0` is
/// the run's start.
pub(super) fn device(
    opts: &TuneOptions,
    plan: Plan,
    starting: Option<Starting>,
    pool: Option<CompilePool>,
    t0: Instant,
) -> Result<Setup> {
    let Plan {
        op,
        overrides,
        shape,
        checked,
        renderer,
    } = plan;
    let (device, free_mem, first_worker, local_device) = match &opts.isolation {
        _ if opts.compile_only => (None, 0, None, None),
        Isolation::Workers(_) => {
            // [`first_worker`] started it: a run with workers and a GPU always has one.
            let (w, info, free) = starting
                .ok_or_else(|| Error::Internal("the first GPU worker was not started".into()))?
                .ready()?;
            (Some(info), free, Some(w), None)
        }
        Isolation::InProcess => {
            let d = crate::isolate::worker::open_device(opts.device)?;
            let free = d.free_mem()?;
            (Some(d.info().clone()), free, None, Some(d))
        }
    };
    let arch = match (arch_without_device(opts), &device) {
        (Some(a), _) => a,
        (None, Some(g)) => g.arch(),
        (None, None) => {
            return Err(Error::Internal(
                "no architecture: neither --arch, --compile-only nor a device".into(),
            ))
        }
    };
    // The device's own limits, or a compile-only target's; what the code may use is the
    // compile target's (an --arch older than the GPU rules out what it lacks).
    let mut limits = match &device {
        Some(d) => d.limits,
        None => DeviceLimits::for_arch(&arch).unwrap_or(DeviceLimits::SM90_DEFAULT),
    };
    if let Some(cc) = crate::model::limits::arch_compute_capability(&arch) {
        limits.compute_capability = cc;
    }
    // The GPU's own architecture, which NVRTC may be too old to know: one error, not one
    // per variant (an --arch given was checked above, as input).
    if opts.arch.is_none() {
        if let Some((version, supported)) = crate::cuda::compile::unsupported_arch(&arch) {
            return Err(Error::NoNvrtc(format!(
                "NVRTC {}.{} cannot compile for this GPU's {arch} (it compiles for {supported}); \
                 install a newer CUDA toolkit",
                version.0, version.1
            )));
        }
    }
    // The compiler, whose failure (no NVRTC) is reported after the space's and the memory's
    // checks below; its pool starts now (unless it started early), sized by the
    // configurations the checks left.
    let compiler = Compiler::new(&arch, cache_dir(opts));
    let pool = pool.or_else(|| {
        let compiler = compiler.as_ref().ok()?;
        let configurations = checked
            .candidates
            .iter()
            .filter(|c| c.pruned.is_none())
            .count();
        compile_pool(opts, compiler, configurations)
    });
    let space = if limits == CHECK_LIMITS {
        checked
    } else {
        live_space(&op, &shape, &limits, &overrides, opts)?
    };
    let (candidates, prune_reasons) = (space.candidates, space.prune_reasons);
    let live: Vec<usize> = candidates
        .iter()
        .enumerate()
        .filter(|(_, c)| c.pruned.is_none())
        .map(|(at, _)| at)
        .collect();
    // --shard K/N: this shard's share of the live variants; the others get no row here.
    let live = crate::model::slice::owned(live, opts.shard.as_ref());
    let base = space::base_vars(&op, &shape, &limits);
    let layout = BufferLayout::new(&op, &base)?;
    let metric = op.spec.metric.amount().0;
    let work = base.eval_int(metric, &format!("{} metric", op.at(metric)))? as f64;
    if let Some(d) = &device {
        layout.check_memory(d, free_mem)?;
    }
    let compiler = compiler?;
    let cache_dir = compiler.cache_dir().map(Path::to_path_buf);
    let setup_s = t0.elapsed().as_secs_f64();
    let finish = space::finishing(&op, &overrides);
    Ok(Setup {
        op,
        shape,
        renderer,
        device,
        first_worker,
        local_device,
        limits,
        arch,
        candidates,
        prune_reasons,
        live,
        finish,
        base,
        layout,
        work,
        cache_dir,
        compiler,
        pool,
        pruned_rows: opts.pruned_rows,
        setup_s,
    })
}

/// The op the options name (a user's spec, or a built-in or `--templates` op), for the
/// element type they name. A `--spec`, `--template` or `--templates` path that does not exist
/// is bad input, said as such before anything reads it.
pub fn load_op(opts: &TuneOptions) -> Result<Op> {
    let missing = |flag: &str, path: &Path, what: &str| {
        Error::Usage(format!("{flag} {}: no such {what}", path.display()))
    };
    if let Some(p) = opts.spec.as_deref().filter(|p| !p.exists()) {
        return Err(missing("--spec", p, "file or folder"));
    }
    if let Some(p) = opts.template.as_deref() {
        if let Some(why) = crate::error::not_a_file(p) {
            return Err(Error::Usage(format!("--template {}: {why}", p.display())));
        }
    }
    if let Some(p) = opts.templates.as_deref().filter(|p| !p.is_dir()) {
        return Err(missing("--templates", p, "folder"));
    }
    match &opts.spec {
        Some(spec) => Op::load_spec(spec, opts.template.as_deref()),
        None => Op::load(&opts.op, opts.templates.as_deref()),
    }?
    .with_dtype(opts.dtype.as_deref())
}

/// The shapes of a sweep of `op`: `--shape A,B,C` or `--shapes FILE`, all checked against
/// the op before anything is tuned. A `--shapes` file that does not exist, is a folder or is
/// not text is bad input. A shape listed twice (`10x10,10x10`, or `10x10` and `010x10`) is
/// tuned once, with a note on stderr.
pub fn shape_list(opts: &TuneOptions, op: &Op, file: Option<&Path>) -> Result<Vec<String>> {
    if let Some(f) = file {
        if let Some(why) = crate::error::not_a_file(f) {
            return Err(Error::Usage(format!("--shapes {}: {why}", f.display())));
        }
    }
    let shapes = match file {
        Some(f) => crate::model::shape::read_file(f, &op.spec.dims)?,
        None => crate::model::shape::parse_list(&opts.shape, &op.spec.dims)?,
    };
    let mut once: Vec<String> = Vec::with_capacity(shapes.len());
    let mut repeated: Vec<String> = Vec::new();
    for shape in shapes.iter().map(Shape::to_string) {
        if !once.contains(&shape) {
            once.push(shape);
        } else if !repeated.contains(&shape) {
            repeated.push(shape);
        }
    }
    if !repeated.is_empty() {
        let from = match file {
            Some(f) => format!("--shapes {}", f.display()),
            None => "--shape".to_string(),
        };
        eprintln!(
            "note: {from} lists {} more than once; each shape is tuned once",
            repeated.join(", ")
        );
    }
    Ok(once)
}

/// Checks the settings that do not depend on the op: each number within its domain
/// ([`crate::model::domain`]; the command line refuses the same values as it parses them),
/// and the search strategy's name.
pub fn check_settings(opts: &TuneOptions) -> Result<()> {
    use crate::model::domain;
    fn usage(option: &'static str) -> impl Fn(String) -> Error {
        move |why| Error::Usage(format!("{option} {why}"))
    }
    domain::timed_launches(opts.bench.reps).map_err(usage("--reps"))?;
    domain::launches(opts.bench.warmup).map_err(usage("--warmup"))?;
    domain::at_least_one(opts.jobs).map_err(|why| {
        Error::Usage(format!(
            "--jobs {why} (leave it out for one compile worker per CPU core)"
        ))
    })?;
    domain::seconds(opts.watchdog_s).map_err(usage("--watchdog"))?;
    domain::confirm_rounds(opts.confirm_rounds).map_err(usage("--confirm-rounds"))?;
    if let crate::isolate::compile_pool::CompileLimit::Seconds(s) = opts.compile_limit {
        // `Off` is the command line's 0.
        domain::seconds(s).map_err(usage("--compile-timeout"))?;
    }
    if let Some(rtol) = opts.rtol {
        domain::non_negative(rtol).map_err(usage("--rtol"))?;
    }
    // `auto` is the tuner's own rule; any other name must be a strategy of the registry.
    if opts.strategy != "auto" {
        crate::search::registry::lookup(&opts.strategy)?;
    }
    Ok(())
}

/// Everything about a run's input that holds for every shape, checked once before a sweep
/// starts and again by [`super::tuner::tune`]: the settings, the op (spec, template, dtype), the
/// `--param` overrides and `--arch` (its form, and that this NVRTC compiles for it). Returns
/// the op and the parsed overrides. A sweep keeps the op for all its shapes
/// ([`super::tuner::tune_keeping`]), which check the rest again but do not load it again.
pub fn check_inputs(opts: &TuneOptions) -> Result<(Op, Vec<space::ParamOverride>)> {
    check_settings_and_folders(opts)?;
    let op = load_op(opts)?;
    let overrides = check_op_inputs(opts, &op)?;
    Ok((op, overrides))
}

/// [`check_settings`], and that the folders written into are not files.
fn check_settings_and_folders(opts: &TuneOptions) -> Result<()> {
    check_settings(opts)?;
    // The folders written into: bad input, said before any work, when they cannot be folders.
    crate::store::files::check_output_folder("--out", &opts.out_dir)?;
    if let Some(emit) = &opts.emit {
        crate::store::files::check_output_folder("--emit", emit)?;
    }
    Ok(())
}

/// The input checked against the op: the `--param` overrides (parsed, none given twice) and
/// `--arch`. Returns the overrides.
fn check_op_inputs(opts: &TuneOptions, op: &Op) -> Result<Vec<space::ParamOverride>> {
    let overrides = opts
        .params
        .iter()
        .map(|p| space::parse_override(op, p))
        .collect::<Result<Vec<_>>>()?;
    // A parameter given twice is refused rather than one list silently replacing the other.
    for (i, o) in overrides.iter().enumerate() {
        if let Some(first) = overrides[..i].iter().position(|e| e.name == o.name) {
            let mut values: Vec<String> = Vec::new();
            for v in overrides[first].values.iter().chain(&o.values) {
                if !values.contains(&v.to_string()) {
                    values.push(v.to_string());
                }
            }
            return Err(Error::ParamSyntax {
                input: opts.params[i].clone(),
                why: format!(
                    "{} is given twice (--param {} before it); give its values in one list: \
                     --param {}={}",
                    o.name,
                    opts.params[first],
                    o.name,
                    values.join(",")
                ),
            });
        }
    }
    if let Some(arch) = &opts.arch {
        crate::cuda::compile::check_arch(arch)?;
        if let Some((version, supported)) = crate::cuda::compile::unsupported_arch(arch) {
            return Err(Error::Usage(format!(
                "invalid --arch {arch}: NVRTC {}.{} compiles for {supported}",
                version.0, version.1
            )));
        }
    }
    Ok(overrides)
}

/// The limits the space is checked against before the device is known. They allow at least
/// what any CUDA GPU so far allows (1024 threads and 48 KB of static shared memory per block;
/// 227 KB of opt-in shared memory, the most of any GPU), so a space they empty is empty on
/// every GPU, and bad input is reported before a GPU is looked for. The GPU's own limits
/// may prune more later.
const CHECK_LIMITS: DeviceLimits = DeviceLimits::SM90_DEFAULT;

/// The configurations of the space at `limits`; none left is bad input, reported with the
/// `--param` values given and the leading prune reasons (see [`crate::error::empty_space_summary`]).
fn live_space(
    op: &Op,
    shape: &Shape,
    limits: &DeviceLimits,
    overrides: &[space::ParamOverride],
    opts: &TuneOptions,
) -> Result<space::Space> {
    let space = space::enumerate_space(op, shape, limits, overrides, opts.pruned_rows)?;
    if space.candidates.iter().all(|c| c.pruned.is_some()) {
        return Err(Error::EmptySpace(crate::error::empty_space_summary(
            space.points,
            &opts.params,
            &space.prune_reasons,
        )));
    }
    Ok(space)
}

/// Sizes of the op's buffers for this shape, in elements of `elem_bytes` bytes.
pub(super) struct BufferLayout {
    pub(super) buffers: Vec<(String, Role, usize, crate::spec::ops::Fill)>,
    pub(super) args: Vec<ArgSpec>,
    elem_bytes: usize,
}

pub(super) enum ArgSpec {
    Buffer(String),
    Int(i32),
}

impl BufferLayout {
    fn new(op: &Op, base: &Vars) -> Result<BufferLayout> {
        let mut buffers = Vec::new();
        let elem_bytes = op.dtype.bytes();
        for b in &op.spec.buffers {
            let n = base.eval_int(
                &b.elements,
                &format!("{} buffers.{}.elements", op.at(&b.elements), b.name),
            )?;
            let n = usize::try_from(n)
                .ok()
                .filter(|n| n.checked_mul(elem_bytes).is_some())
                .ok_or_else(|| Error::Expr {
                    expr: b.elements.clone(),
                    context: format!("{} buffers.{}", op.origin, b.name),
                    why: format!("{n} elements is not a valid buffer size"),
                })?;
            buffers.push((b.name.clone(), b.role, n, b.fill));
        }
        let mut args = Vec::new();
        for a in &op.spec.args {
            if buffers.iter().any(|(n, ..)| n == a) {
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
        Ok(BufferLayout {
            buffers,
            args,
            elem_bytes,
        })
    }

    pub(super) fn output(&self) -> (&str, usize) {
        self.buffers
            .iter()
            .find(|(_, r, ..)| *r == Role::Output)
            .map(|(n, _, len, _)| (n.as_str(), *len))
            .expect("specs are checked to have an output")
    }

    /// Device bytes a run needs: the buffers, the expected output, and the L2 flush buffer.
    fn check_memory(&self, device: &DeviceInfo, free: u64) -> Result<()> {
        let elems: usize = self.buffers.iter().map(|b| b.2).sum::<usize>() + self.output().1;
        let need = elems as u64 * self.elem_bytes as u64
            + crate::measure::bench::flush_bytes(device.l2_bytes) as u64
            + (64 << 20);
        if need > free {
            return Err(Error::OutOfMemory {
                need_mib: need >> 20,
                free_mib: free >> 20,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isolate::compile_pool::CompileLimit;

    /// A library caller's settings are held to the domains the command line's parsers use:
    /// each value outside one is bad input naming its option; the defaults pass.
    #[test]
    fn settings_outside_their_domains_are_bad_input() {
        assert!(check_settings(&TuneOptions::default()).is_ok());
        type Set = fn(&mut TuneOptions);
        let cases: [(&str, Set); 7] = [
            ("--reps must be at least 1", |o| o.bench.reps = 0),
            ("--jobs must be at least 1 (leave it out", |o| o.jobs = 0),
            ("--watchdog must be a positive number", |o| {
                o.watchdog_s = f64::NAN
            }),
            ("--watchdog must be a positive number", |o| {
                o.watchdog_s = 1e30
            }),
            ("--compile-timeout must be a positive", |o| {
                o.compile_limit = CompileLimit::Seconds(0.0)
            }),
            ("--rtol must be a finite number", |o| o.rtol = Some(-1.0)),
            ("--rtol must be a finite number", |o| {
                o.rtol = Some(f64::NAN)
            }),
        ];
        for (want, set) in cases {
            let mut opts = TuneOptions::default();
            set(&mut opts);
            let err = check_settings(&opts).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{err}");
            assert!(err.to_string().starts_with(want), "{want}: {err}");
        }
    }
}
