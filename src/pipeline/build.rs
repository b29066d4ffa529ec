//! The build stage: render the candidates of a round and compile every unique source once
//! ([`Prepared`]); [`build`] does the first round and starts the run's [`TuneOutcome`].

use super::options::TuneOptions;
use super::outcome::{Phases, TuneOutcome};
use super::plan::Setup;
use super::search::Search;
use crate::cuda::compile::Compiler;
use crate::error::{Error, Result};
use crate::isolate::worker::{compile_parallel, PreLaunch, Task, Work};
use crate::model::task::TaskId;
use crate::spec::codegen::Renderer;
use crate::spec::ops::{one_line, Op};
use crate::spec::space::Candidate;
use crate::store::results::{self, Record, Status};
use indicatif::{ProgressBar, ProgressStyle};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The first round built: the search (when a strategy picks what is measured), the folder
/// the sources and images are written to, what was compiled, and the outcome so far.
pub(super) struct Built {
    pub setup: Setup,
    pub search: Option<Search>,
    pub work_dir: tempfile::TempDir,
    pub prep: Prepared,
    /// The first round's candidates, rendered and compiled.
    pub builds: Vec<Build>,
    pub outcome: TuneOutcome,
}

/// Picks the first round (every live candidate, or the search's first proposals), renders
/// and compiles it; identical sources are compiled once.
pub(super) fn build(opts: &TuneOptions, setup: Setup) -> Result<Built> {
    let mut search = super::search::start(opts, &setup)?;
    let t_compile = Instant::now();
    let work_dir = tempfile::Builder::new()
        .prefix("cuda-autotune-")
        .tempdir()
        .map_err(|e| {
            Error::io(
                "cannot create a temporary folder in",
                std::env::temp_dir(),
                e,
            )
        })?;
    let mut prep = Prepared::default();
    let first_round = match &mut search {
        None => setup.live.clone(),
        Some(s) => s.ask(),
    };
    let builds = prep.build(&env(opts, &setup, work_dir.path()), &first_round)?;
    let compile_s = t_compile.elapsed().as_secs_f64();
    let outcome = start_outcome(opts, &setup, &prep, compile_s);
    Ok(Built {
        setup,
        search,
        work_dir,
        prep,
        builds,
        outcome,
    })
}

/// What building a round needs from the setup, for rounds after the first too.
pub(super) fn env<'a>(opts: &'a TuneOptions, setup: &'a Setup, dir: &'a Path) -> BuildEnv<'a> {
    BuildEnv {
        candidates: &setup.candidates,
        renderer: &setup.renderer,
        compiler: &setup.compiler,
        opts,
        op: &setup.op,
        dir,
        cache: setup.cache_dir.as_deref(),
    }
}

/// The outcome as far as the setup and the first build know it; the later stages fill in
/// the records, the timings and the results.
fn start_outcome(
    opts: &TuneOptions,
    setup: &Setup,
    prep: &Prepared,
    compile_s: f64,
) -> TuneOutcome {
    let op = &setup.op;
    let param_names: Vec<String> = op.spec.params.iter().map(|p| p.name.clone()).collect();
    TuneOutcome {
        info: None,
        device: setup.device.clone(),
        arch: setup.arch.clone(),
        param_names,
        records: Vec::new(),
        best: None,
        roof_throughput: None,
        prune_reasons: setup.prune_reasons.clone(),
        compiled: prep.compiled.len(),
        from_cache: prep.cache_hits(),
        context_restarts: 0,
        csv_path: None,
        best_path: None,
        phases: Phases {
            setup_s: setup.setup_s,
            compile_s,
            ..Phases::default()
        },
        verification: match (op.spec.compare, &op.spec.reference_kernel) {
            (crate::spec::ops::Compare::Exact, _) => format!("exact comparison with the CPU '{}' reference", op.spec.reference),
            (_, Some(_)) => format!(
                "relative error <= {:.0e} against a float64 GPU reference that is spot-checked against float64 CPU rows",
                opts.rtol.or(op.spec.rtol).unwrap_or(0.0)
            ),
            (_, None) => format!(
                "relative error <= {:.0e} against the float64 CPU reference",
                opts.rtol.or(op.spec.rtol).unwrap_or(0.0)
            ),
        },
        interrupted: false,
        reused: 0,
        journal_path: None,
        confidence: None,
        clocks: None,
        warmups: Vec::new(),
        remeasured: None,
        search: None,
        model_rank: None,
    }
}

/// The outcome of a `--compile-only` run: the search's proposals, round after round, compiled
/// as a GPU run would compile them (without measurements to learn from, a search proposes
/// what it would propose first: the warm start, then its own order), until its budget is
/// spent or Ctrl-C; then a record for every shown configuration, with what compiling it gave.
/// `t0` is the run's start.
pub(super) fn compile_only(opts: &TuneOptions, built: Built, t0: Instant) -> Result<TuneOutcome> {
    let Built {
        setup,
        mut search,
        work_dir,
        mut prep,
        mut builds,
        mut outcome,
    } = built;
    if let Some(s) = search.as_mut() {
        let t = Instant::now();
        while !crate::isolate::worker::interrupted() {
            let next = s.ask();
            if next.is_empty() {
                break;
            }
            builds.extend(prep.build(&env(opts, &setup, work_dir.path()), &next)?);
        }
        outcome.phases.compile_s += t.elapsed().as_secs_f64();
        outcome.search = Some(s.summary("compiled"));
    }
    prep.count_into(&mut outcome);
    outcome.interrupted = crate::isolate::worker::interrupted();
    let skipped = search
        .as_ref()
        .map(Search::skipped_reason)
        .unwrap_or_default();
    let by_candidate: HashMap<usize, &Build> = builds.iter().map(|b| (b.candidate, b)).collect();
    outcome.records = setup
        .candidates
        .iter()
        .filter(|c| setup.shown(c))
        .map(|c| compile_only_record(c, by_candidate.get(&c.index).copied(), &skipped))
        .collect();
    outcome.phases.total_s = t0.elapsed().as_secs_f64();
    Ok(outcome)
}

/// A compiled image on disk, or why there is none (render or compile error text).
type CubinResult = std::result::Result<PathBuf, String>;

/// One unique source after compiling.
#[derive(Clone)]
pub(super) struct CompiledSource {
    /// `None`: never compiled (the run was stopped first).
    result: Option<CubinResult>,
    millis: f64,
    from_cache: bool,
}

/// Compiles every unique source into `dir/sNNNN.cubin`: in parallel worker processes when an
/// executable is known, else serially in this process.
fn compile_all(
    compiler: &Compiler,
    opts: &TuneOptions,
    sources: &[String],
    first: usize,
    dir: &Path,
    cache: Option<&Path>,
) -> Result<Vec<CompiledSource>> {
    let pb = bar(sources.len(), "compile", opts.progress);
    let mut paths = Vec::with_capacity(sources.len());
    for (k, src) in sources.iter().enumerate() {
        let path = dir.join(format!("s{:04}.cu", first + k));
        std::fs::write(&path, src).map_err(|e| Error::io("cannot write", &path, e))?;
        paths.push(path);
    }
    let out = match &opts.worker_exe {
        Some(exe) if sources.len() > 1 && opts.jobs > 1 => {
            // Cache hits are read here: starting worker processes costs more than reading a
            // few hundred small files. Only the misses go to the workers.
            let mut out: Vec<Option<CompiledSource>> = Vec::with_capacity(sources.len());
            let mut misses = Vec::new();
            for (k, (src, path)) in sources.iter().zip(&paths).enumerate() {
                let t = Instant::now();
                let hit =
                    cache.and_then(|dir| crate::cuda::compile::read_cache(dir, &compiler.key(src)));
                match hit {
                    Some(cubin) => {
                        let file = path.with_extension("cubin");
                        std::fs::write(&file, cubin)
                            .map_err(|e| Error::io("cannot write", &file, e))?;
                        let millis = t.elapsed().as_secs_f64() * 1e3;
                        out.push(Some(CompiledSource {
                            result: Some(Ok(file)),
                            millis,
                            from_cache: true,
                        }));
                        pb.inc(1);
                    }
                    None => {
                        out.push(None);
                        misses.push(k);
                    }
                }
            }
            if !misses.is_empty() {
                let miss_paths: Vec<PathBuf> = misses.iter().map(|&k| paths[k].clone()).collect();
                let replies =
                    compile_parallel(exe, compiler.arch(), cache, &miss_paths, opts.jobs, &|| {
                        pb.inc(1)
                    })?;
                for (&k, r) in misses.iter().zip(replies) {
                    out[k] = Some(match r {
                        Some(r) => CompiledSource {
                            result: Some(if r.ok {
                                Ok(paths[k].with_extension("cubin"))
                            } else {
                                Err(format!("compile: {}", r.log))
                            }),
                            millis: r.millis,
                            from_cache: r.from_cache,
                        },
                        None => NOT_COMPILED,
                    });
                }
            }
            out.into_iter()
                .map(|c| c.expect("every source is a hit or a compiled miss"))
                .collect()
        }
        _ => {
            let mut out = Vec::with_capacity(sources.len());
            for (src, path) in sources.iter().zip(&paths) {
                if crate::isolate::worker::interrupted() {
                    out.push(NOT_COMPILED);
                    continue;
                }
                let one = match compiler.compile(src) {
                    Ok(done) => {
                        let cubin = path.with_extension("cubin");
                        std::fs::write(&cubin, &done.cubin)
                            .map_err(|e| Error::io("cannot write", &cubin, e))?;
                        CompiledSource {
                            result: Some(Ok(cubin)),
                            millis: done.millis,
                            from_cache: done.from_cache,
                        }
                    }
                    Err(f) => CompiledSource {
                        result: Some(Err(format!("compile: {}", f.log))),
                        millis: f.millis,
                        from_cache: false,
                    },
                };
                out.push(one);
                pb.inc(1);
            }
            out
        }
    };
    pb.finish_and_clear();
    Ok(out)
}

/// A source the run was stopped before compiling.
const NOT_COMPILED: CompiledSource = CompiledSource {
    result: None,
    millis: 0.0,
    from_cache: false,
};

/// The result of rendering and compiling one live candidate.
pub(super) struct Build {
    pub(super) candidate: usize,
    /// `None`: not compiled (the run was stopped first).
    cubin: Option<CubinResult>,
    compile_ms: f64,
}

pub(super) fn bar(len: usize, prefix: &'static str, show: bool) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(len as u64);
    pb.set_style(
        ProgressStyle::with_template("{prefix:>9} [{bar:32}] {pos}/{len} {elapsed_precise} {msg}")
            .expect("static template")
            .progress_chars("=> "),
    );
    pb.set_prefix(prefix);
    pb
}

/// What building a round needs, bundled so rounds after the first build the same way.
pub(super) struct BuildEnv<'a> {
    candidates: &'a [Candidate],
    renderer: &'a Renderer,
    compiler: &'a Compiler,
    opts: &'a TuneOptions,
    op: &'a Op,
    dir: &'a Path,
    cache: Option<&'a Path>,
}

/// Every source rendered so far in this run (identical sources share one compile) and what
/// compiling each gave.
#[derive(Default)]
pub(super) struct Prepared {
    sources: Vec<String>,
    seen: HashMap<String, usize>,
    source_of: HashMap<usize, std::result::Result<usize, String>>,
    pub(super) compiled: Vec<CompiledSource>,
}

impl Prepared {
    pub(super) fn cache_hits(&self) -> usize {
        self.compiled.iter().filter(|c| c.from_cache).count()
    }

    /// Writes how many unique sources were compiled, and how many came from the cache, into
    /// `outcome` (after the last round).
    pub(super) fn count_into(&self, outcome: &mut TuneOutcome) {
        outcome.compiled = self.compiled.len();
        outcome.from_cache = self.cache_hits();
    }

    /// Renders and compiles the candidates `subset` (indices into `env.candidates`).
    pub(super) fn build(&mut self, env: &BuildEnv, subset: &[usize]) -> Result<Vec<Build>> {
        let first_new = self.sources.len();
        for &i in subset {
            let c = &env.candidates[i];
            let slot = env.renderer.render(c).map(|source| {
                if let Some(dir) = &env.opts.emit {
                    let path = dir.join(format!("{}_v{:04}.cu", env.op.name(), c.index));
                    results::write_atomic(&path, source.as_bytes())?;
                }
                let next = self.sources.len();
                let k = *self.seen.entry(source.clone()).or_insert(next);
                if k == next {
                    self.sources.push(source);
                }
                Ok::<usize, Error>(k)
            });
            let slot = match slot {
                Ok(Ok(k)) => Ok(k),
                Ok(Err(e)) => return Err(e),
                Err(e) => Err(e),
            };
            self.source_of.insert(i, slot);
        }
        let done = compile_all(
            env.compiler,
            env.opts,
            &self.sources[first_new..],
            first_new,
            env.dir,
            env.cache,
        )?;
        self.compiled.extend(done);
        Ok(subset
            .iter()
            .map(|&i| {
                let (cubin, compile_ms) = match &self.source_of[&i] {
                    Err(e) => (Some(Err(e.clone())), 0.0),
                    Ok(k) => {
                        let c = &self.compiled[*k];
                        (c.result.clone(), c.millis)
                    }
                };
                Build {
                    candidate: i,
                    cubin,
                    compile_ms,
                }
            })
            .collect())
    }

    /// The GPU task for a built candidate (its record now says "not run"), or `None` with the
    /// record marked failed when it did not render or compile.
    pub(super) fn task(
        &self,
        env: &BuildEnv,
        build: &Build,
        records: &mut [Record],
        task_record: &HashMap<usize, usize>,
        task_key: &mut HashMap<usize, String>,
    ) -> Option<Task> {
        let c = &env.candidates[build.candidate];
        let id = TaskId::variant(c.index).number();
        let rec = &mut records[task_record[&id]];
        rec.compile_ms = Some(build.compile_ms);
        let path = match &build.cubin {
            Some(Err(e)) => {
                rec.status = Status::Failed;
                rec.error = one_line(e);
                return None;
            }
            None => {
                rec.status = Status::NotRun;
                rec.error = "not compiled".into();
                return None;
            }
            Some(Ok(path)) => path,
        };
        let dims = c.launch.expect("live candidates have launch dims");
        if let Some(Ok(k)) = self.source_of.get(&build.candidate) {
            task_key.insert(
                id,
                format!(
                    "{} {:?} {:?}{}{}",
                    env.compiler.key(&self.sources[*k]),
                    dims.grid,
                    dims.block,
                    // Only where there is any, so that journals written before keep their keys.
                    if dims.shared > 0 {
                        format!(" shared {}", dims.shared)
                    } else {
                        String::new()
                    },
                    c.prologue
                        .iter()
                        .map(|(name, d)| format!(" after {name} {:?} {:?}", d.grid, d.block))
                        .collect::<String>()
                ),
            );
        }
        rec.status = Status::NotRun;
        rec.error.clear();
        Some(Task {
            id,
            work: Work::Kernel {
                cubin: path.clone(),
                kernel: env.op.spec.kernel.clone(),
                launch: dims,
                before: pre_launches(c),
            },
            expect: "reference".into(),
            contender: true,
        })
    }
}

/// The prologue launches of a configuration, as a task carries them.
pub(super) fn pre_launches(c: &Candidate) -> Vec<PreLaunch> {
    c.prologue
        .iter()
        .map(|(kernel, d)| PreLaunch {
            kernel: kernel.clone(),
            launch: *d,
        })
        .collect()
}

/// A configuration's record before anything ran: pruned with the reason, or, when live,
/// skipped with `skipped` (why a search left it out) until a round takes it.
pub(super) fn shown_record(c: &Candidate, skipped: &str) -> Record {
    let params = c
        .config
        .values()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let mut rec = Record::new("variant", &format!("v{:04}", c.index), params);
    match &c.pruned {
        Some(reason) => {
            rec.status = Status::Pruned;
            rec.error = reason.to_string();
        }
        None => {
            rec.status = Status::Skipped;
            rec.error = skipped.to_string();
        }
    }
    rec
}

/// A configuration's record after a compile-only run; `build` is `None` when the search never
/// proposed it (`skipped` says why).
fn compile_only_record(c: &Candidate, build: Option<&Build>, skipped: &str) -> Record {
    let mut rec = shown_record(c, skipped);
    let Some(build) = build.filter(|_| c.pruned.is_none()) else {
        return rec;
    };
    (rec.status, rec.error) = match &build.cubin {
        Some(Err(e)) => (Status::Failed, e.clone()),
        None => (Status::NotRun, "interrupted (Ctrl-C)".into()),
        Some(Ok(_)) => (Status::Ok, String::new()),
    };
    rec.compile_ms = Some(build.compile_ms);
    rec
}
