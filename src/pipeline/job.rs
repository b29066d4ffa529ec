//! The job stage: the run's description ([`RunInfo`]), a record for every baseline and shown
//! configuration, the GPU job (buffers, reference, the baselines' tasks) and the journal.

use super::build::{pre_launches, Built};
use super::options::{TuneOptions, ADAPTIVE_CUTOFF};
use super::plan::{ArgSpec, Setup};
use super::search::Search;
use crate::cuda::compile::Compiler;
use crate::cuda::gpu::DeviceInfo;
use crate::error::{Error, Result};
use crate::isolate::protocol::{ArgDesc, BufferDesc, Job, ReferenceKernel, Task, TaskResult};
use crate::measure::verify;
use crate::model::limits::DeviceLimits;
use crate::model::shape::Shape;
use crate::model::task::TaskId;
use crate::spec::baseline;
use crate::spec::codegen::Renderer;
use crate::spec::ops::{one_line, Op, Role};
use crate::spec::space;
use crate::store::journal::{Journal, JournalKey};
use crate::store::record::{Kind, Record, RunInfo, Status};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Every record of the run and what ties each GPU task to its record.
pub(super) struct Ledger {
    pub records: Vec<Record>,
    /// Task id → index into `records`.
    pub task_record: HashMap<usize, usize>,
    /// What identifies a task's result across runs (for the journal): the compiled source and
    /// its launch geometry; for baselines their name and source.
    pub task_key: HashMap<usize, JournalKey>,
}

/// The run ready to measure: the baselines' tasks are in `job`; the first round's variants
/// join as they compile.
pub(super) struct Staged {
    pub built: Built,
    pub info: RunInfo,
    /// The metric's amount of work for this shape (bytes or flops).
    pub work: f64,
    /// The metric's unit (`GB/s`, `GFLOP/s`).
    pub unit: &'static str,
    pub ledger: Ledger,
    /// The baselines' records come first in `ledger.records`: this many.
    pub n_baselines: usize,
    pub job: Job,
    pub journal: Journal,
    /// The results of a matching journal from an earlier run (`--resume`), by task key.
    pub earlier: HashMap<JournalKey, TaskResult>,
}

/// The job: the baselines' tasks (the variants join as they compile, ids: [`TaskId`]), all
/// sharing the inputs and the expected output. The workers open their own contexts; this
/// process only read the device's properties.
pub(super) fn job(opts: &TuneOptions, mut built: Built, dev: &DeviceInfo) -> Result<Staged> {
    let setup = &built.setup;
    let dir = built.work_dir.path();
    let (info, work, unit) = run_info(opts, setup, dev)?;
    let checker_path = compile_checker(&setup.compiler, dir)?;
    let mut ledger = Ledger {
        records: Vec::new(),
        task_record: HashMap::new(),
        task_key: HashMap::new(),
    };
    let mut tasks: Vec<Task> = Vec::new();
    let (baseline_key, baseline_cubin) = compile_baselines(setup, dir)?;
    baseline_tasks(
        setup,
        &baseline_key,
        baseline_cubin.as_deref(),
        &mut ledger,
        &mut tasks,
    )?;
    let n_baselines = ledger.records.len();
    let reference_kernel = reference_kernel(setup, baseline_cubin.as_deref(), dir)?;
    variant_records(setup, built.search.as_ref(), &mut ledger);
    let job = job_desc(opts, setup, reference_kernel, checker_path, tasks);
    // The journal: every finished task is appended as it finishes; --resume reuses a matching
    // journal's results instead of measuring again.
    let journal_path = Journal::path_for(&opts.out_dir, &info);
    let header = serde_json::json!({
        "tool": env!("CARGO_PKG_VERSION"), "op": info.op, "shape": info.shape, "gpu": info.gpu,
        "cache": info.cache, "reps": opts.bench.reps, "warmup": opts.bench.warmup, "seed": opts.seed,
        "rtol": job.rtol, "device_uuid": built.outcome.device.as_ref().map(|d| d.uuid.clone()),
    });
    let (journal, earlier) = Journal::open::<TaskResult>(&journal_path, &header, opts.resume)?;
    let earlier: HashMap<JournalKey, TaskResult> = earlier.into_iter().collect();
    built.outcome.journal_path = Some(journal_path);
    Ok(Staged {
        built,
        info,
        work,
        unit,
        ledger,
        n_baselines,
        job,
        journal,
        earlier,
    })
}

/// The run's description for the CSV, the metric's amount of work and its unit.
fn run_info(
    opts: &TuneOptions,
    setup: &Setup,
    dev: &DeviceInfo,
) -> Result<(RunInfo, f64, &'static str)> {
    let op = &setup.op;
    let (version_major, version_minor) = setup.compiler.version();
    let unit = op.spec.metric.amount().1;
    let work = setup.work;
    let info = RunInfo {
        op: op.name().to_string(),
        shape: setup.shape.to_string(),
        dtype: op.dtype.name().to_string(),
        gpu: dev.name.clone(),
        compute_capability: dev.cc_string(),
        cache: opts.bench.cache.as_str().to_string(),
        reps: opts.bench.reps,
        unit: unit.to_string(),
        roof: String::new(),
        driver: dev.driver_string(),
        nvrtc: format!("{version_major}.{version_minor}"),
    };
    Ok((info, work, unit))
}

/// Compiles the kernel that compares outputs on the GPU into `dir/checker.cubin`.
fn compile_checker(compiler: &Compiler, dir: &Path) -> Result<PathBuf> {
    let checker_path = dir.join("checker.cubin");
    let checker = compiler
        .compile(verify::COMPARE_SOURCE)
        .map_err(|f| Error::Cuda {
            during: "compiling the comparison kernel".into(),
            why: one_line(&f.log),
        })?;
    std::fs::write(&checker_path, &checker.cubin)
        .map_err(|e| Error::io("cannot write", &checker_path, e))?;
    Ok(checker_path)
}

/// Compiles the op's baseline kernels, when it has any, into `dir/baselines.cubin`. Returns
/// their source's cache key (empty without) and the image.
fn compile_baselines(setup: &Setup, dir: &Path) -> Result<(String, Option<PathBuf>)> {
    let (op, compiler) = (&setup.op, &setup.compiler);
    let baseline_source = setup.renderer.render_baselines(op)?;
    let baseline_key = baseline_source
        .as_deref()
        .map(|s| compiler.key(s))
        .unwrap_or_default();
    let baseline_cubin = match baseline_source {
        Some(src) => {
            let done = compiler.compile(&src).map_err(|f| Error::Template {
                template: op
                    .spec
                    .baseline_source
                    .as_ref()
                    .map(|b| b.template.clone())
                    .unwrap_or_default(),
                why: format!("baseline kernels do not compile: {}", one_line(&f.log)),
            })?;
            let path = dir.join("baselines.cubin");
            std::fs::write(&path, &done.cubin).map_err(|e| Error::io("cannot write", &path, e))?;
            Some(path)
        }
        None => None,
    };
    Ok((baseline_key, baseline_cubin))
}

/// A record for every baseline, and a task for each that can run (ids 0..); one without a
/// launch is a failed record with the reason.
fn baseline_tasks(
    setup: &Setup,
    baseline_key: &str,
    baseline_cubin: Option<&Path>,
    ledger: &mut Ledger,
    tasks: &mut Vec<Task>,
) -> Result<()> {
    let op = &setup.op;
    let eval_launch = |block: &[String; 3], grid: &[String; 3], site: &str| {
        space::eval_launch(&setup.base, block, grid, None, &setup.limits, site)
    };
    let at = baseline::RunContext {
        origin: &op.origin,
        dims: &setup.shape.dims,
        eval_launch: &eval_launch,
        cubin: baseline_cubin,
    };
    for (i, b) in op.spec.baselines.iter().enumerate() {
        let mut rec = Record::new(Kind::Baseline, &b.name, vec![]);
        let work = baseline::work(b, &at)?;
        match work {
            Ok(work) => {
                let id = TaskId::baseline(i).number();
                ledger.task_record.insert(id, ledger.records.len());
                ledger.task_key.insert(
                    id,
                    JournalKey::Baseline {
                        name: b.name.clone(),
                        source: baseline_key.to_string(),
                    },
                );
                tasks.push(Task {
                    id,
                    label: b.name.clone(),
                    work,
                    expect: b.expect.clone(),
                    contender: false,
                });
                rec.status = Status::NotRun;
                rec.error.clear();
            }
            Err(why) => {
                rec.status = Status::Failed;
                rec.error = why;
            }
        }
        ledger.records.push(rec);
    }
    Ok(())
}

/// The kernel whose output is the expected one, when the op has one: its `reference_kernel`
/// (in the baselines' image), or its `reference_config`, rendered and compiled on its own (it
/// may lie outside a --param-narrowed space); it runs first.
fn reference_kernel(
    setup: &Setup,
    baseline_cubin: Option<&Path>,
    dir: &Path,
) -> Result<Option<ReferenceKernel>> {
    let (op, base, limits) = (&setup.op, &setup.base, &setup.limits);
    let reference_kernel = match (
        &op.spec.reference_kernel,
        &op.spec.reference_launch,
        baseline_cubin,
    ) {
        (Some(kernel), Some(launch), Some(cubin)) => {
            let launch = space::eval_launch(
                base,
                &launch.block,
                &launch.grid,
                launch.shared.as_deref(),
                limits,
                &format!("{} reference_launch", op.origin),
            )?
            .map_err(|why| Error::Spec {
                file: op.origin.clone(),
                why: format!("reference_launch: {why}"),
            })?;
            Some(ReferenceKernel {
                cubin: cubin.to_path_buf(),
                kernel: kernel.clone(),
                launch,
                before: Vec::new(),
            })
        }
        _ => None,
    };
    Ok(match &op.spec.reference_config {
        None => reference_kernel,
        Some(cfg) => Some(reference_config_kernel(
            op,
            &setup.shape,
            limits,
            cfg,
            &setup.renderer,
            &setup.compiler,
            dir,
        )?),
    })
}

/// A record for every shown configuration: pruned ones with their reason, live ones
/// "skipped" until a round submits them (a search leaves the ones it never proposed skipped).
fn variant_records(setup: &Setup, search: Option<&Search>, ledger: &mut Ledger) {
    // One text for what the search did not propose (a space may show tens of thousands).
    let skipped = search.map(Search::skipped_reason).unwrap_or_default();
    for at in (0..setup.candidates.len()).filter(|&at| setup.shown(at)) {
        let c = &setup.candidates[at];
        let why = search
            .and_then(|s| s.not_timed_again(at))
            .unwrap_or(&skipped);
        let rec = super::build::shown_record(c, why);
        ledger
            .task_record
            .insert(TaskId::variant(c.index).number(), ledger.records.len());
        ledger.records.push(rec);
    }
}

/// The GPU job: the inputs and how to check outputs, shared by every task, and `tasks`.
fn job_desc(
    opts: &TuneOptions,
    setup: &Setup,
    reference_kernel: Option<ReferenceKernel>,
    checker_cubin: PathBuf,
    tasks: Vec<Task>,
) -> Job {
    let (op, layout) = (&setup.op, &setup.layout);
    Job {
        device: opts.device,
        bench: opts.bench,
        seed: opts.seed,
        dtype: op.dtype,
        reference: op.spec.reference.clone(),
        reference_kernel,
        shape: setup.shape.dims.clone(),
        buffers: layout
            .buffers
            .iter()
            .map(|(n, r, len, fill)| BufferDesc {
                name: n.clone(),
                input: *r == Role::Input,
                len: *len,
                fill: *fill,
            })
            .collect(),
        args: layout
            .args
            .iter()
            .map(|a| match a {
                ArgSpec::Buffer(n) => ArgDesc::Buffer(n.clone()),
                ArgSpec::Int(v) => ArgDesc::Int(*v),
            })
            .collect(),
        output: layout.output().0.to_string(),
        compare: op.spec.compare,
        rtol: opts.rtol.or(op.spec.rtol).unwrap_or(0.0),
        checker_cubin,
        adaptive_cutoff: opts.adaptive.then_some(ADAPTIVE_CUTOFF),
        confirm_rounds: 0,
        best_ms: None,
        tasks,
    }
}

/// Renders and compiles the spec's `reference_config` into a [`ReferenceKernel`].
fn reference_config_kernel(
    op: &Op,
    shape: &Shape,
    limits: &DeviceLimits,
    cfg: &toml::Table,
    renderer: &Renderer,
    compiler: &Compiler,
    dir: &Path,
) -> Result<ReferenceKernel> {
    let bad = |why: String| Error::Spec {
        file: op.at("reference_config"),
        why: format!("reference_config: {why}"),
    };
    let overrides: Vec<space::ParamOverride> = cfg
        .iter()
        .map(|(k, v)| space::ParamOverride {
            name: k.clone(),
            values: vec![crate::spec::ops::toml_to_value(v)],
        })
        .collect();
    let candidates = space::enumerate(op, shape, limits, &overrides)?;
    let [c] = candidates.as_slice() else {
        return Err(bad(format!(
            "names {} configurations, expected one",
            candidates.len()
        )));
    };
    if let Some(reason) = &c.pruned {
        return Err(bad(format!(
            "{} is pruned for this shape: {reason}",
            c.config.label()
        )));
    }
    let source = renderer.render(c).map_err(bad)?;
    let done = compiler
        .compile(&source)
        .map_err(|f| bad(format!("does not compile: {}", one_line(&f.log))))?;
    let path = dir.join("reference_config.cubin");
    std::fs::write(&path, &done.cubin).map_err(|e| Error::io("cannot write", &path, e))?;
    Ok(ReferenceKernel {
        cubin: path,
        kernel: op.spec.kernel.clone(),
        launch: c.launch.expect("live candidates have launch dims"),
        before: pre_launches(c),
    })
}
