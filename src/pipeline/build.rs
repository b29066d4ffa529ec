//! The build stage: render the candidates of a round and compile every unique source once
//! ([`Prepared`], in a compile pool that lives for the run); [`build`] starts the first round
//! and the run's [`TuneOutcome`].

use super::options::TuneOptions;
use super::outcome::{Phases, TuneOutcome};
use super::plan::Setup;
use super::progress::bar;
use super::search::Search;
use crate::cuda::compile::Compiler;
use crate::error::{Error, Result};
use crate::isolate::compile_pool::{CompilePool, PoolReply};
use crate::isolate::protocol::{PreLaunch, Task, Work};
use crate::model::task::TaskId;
use crate::spec::codegen::Renderer;
use crate::spec::ops::{one_line, Op};
use crate::spec::space::Candidate;
use crate::store::files::write_atomic;
use crate::store::journal::JournalKey;
use crate::store::record::{Kind, Note, Record, RunInfo, Status};
use crate::store::run_csv::{run_csv, run_csv_path, run_csv_path_of};
use indicatif::ProgressBar;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The first round built: the search (when a strategy picks what is measured), the folder
/// the sources and images are written to, what was compiled, and the outcome so far.
pub(super) struct Built {
    pub setup: Setup,
    pub search: Option<Search>,
    pub work_dir: tempfile::TempDir,
    /// The sources so far; the first round's are compiling.
    pub prep: Prepared,
    /// The first round's candidates, in the order the search hears them
    /// ([`BuildEnv::heard_order`]).
    pub first_round: Round,
    pub outcome: TuneOutcome,
}

/// Picks the first round (every live candidate, or the search's first proposals), renders
/// it and starts compiling it (identical sources once); the GPU stages take each candidate
/// as its source finishes.
pub(super) fn build(opts: &TuneOptions, mut setup: Setup) -> Result<Built> {
    // The compile pool whose workers the setup started, when it did.
    let pool = setup.pool.take();
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
    let mut prep = Prepared::with_pool(pool);
    let first_env = env(opts, &setup, work_dir.path());
    let first_round = match &mut search {
        None => Round {
            order: setup.live.clone(),
            heavy: 0,
        },
        Some(s) => first_env.heard_order(s.ask(&setup.candidates))?,
    };
    prep.start(&first_env, &first_round.order)?;
    let compile_s = t_compile.elapsed().as_secs_f64();
    let outcome = start_outcome(opts, &setup, &prep, compile_s);
    Ok(Built {
        setup,
        search,
        work_dir,
        prep,
        first_round,
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
        shape: &setup.shape,
        base: &setup.base,
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
/// spent or Ctrl-C; then a record for every shown configuration, with what compiling it gave,
/// written to the run's CSV ([`super::persist::write_compile_only`]). `t0` is the run's start.
///
/// A round is queued when the compile workers are about to run out of work, not all at once:
/// without measurements no round waits for another's results, only for a free worker, and
/// the search keeps deciding what is compiled. A time budget ends the proposals when it runs
/// out, and the sources queued but not started then are abandoned (recorded as not run, with
/// [`Note::BudgetSpent`]); the compiles under way finish.
pub(super) fn compile_only(opts: &TuneOptions, built: Built, t0: Instant) -> Result<TuneOutcome> {
    let Built {
        setup,
        mut search,
        work_dir,
        mut prep,
        mut outcome,
        ..
    } = built;
    let t = Instant::now();
    let env = env(opts, &setup, work_dir.path());
    if let Some(at) = search.as_ref().and_then(Search::deadline) {
        prep.abandon_after(at);
    }
    let pb = bar(prep.submitted, "compile", opts.progress);
    prep.bar = Some(pb.clone());
    let mut builds = Vec::new();
    // Whether the search may still propose, and whether Ctrl-C ended it before it was spent.
    let (mut proposing, mut cut_short) = (search.is_some(), false);
    loop {
        while proposing && prep.compiling() < opts.jobs.max(1) {
            if crate::isolate::interrupt::interrupted() {
                (proposing, cut_short) = (false, true);
                break;
            }
            let next = search
                .as_mut()
                .map(|s| s.ask(&setup.candidates))
                .unwrap_or_default();
            if next.is_empty() {
                proposing = false;
                break;
            }
            prep.start(&env, &next)?;
            pb.set_length(prep.submitted as u64);
        }
        if !prep.busy() && !proposing {
            break;
        }
        builds.extend(prep.wait_ready());
    }
    pb.finish_and_clear();
    outcome.phases.compile_s += t.elapsed().as_secs_f64();
    outcome.search = search.as_ref().map(|s| s.summary("proposed"));
    prep.count_into(&mut outcome);
    outcome.interrupted = crate::isolate::interrupt::interrupted();
    let skipped = match &search {
        Some(s) if cut_short => s.interrupted_reason(),
        Some(s) => s.skipped_reason(),
        None => String::new(),
    };
    let by_candidate: HashMap<usize, &Build> = builds.iter().map(|b| (b.candidate, b)).collect();
    outcome.records = (0..setup.candidates.len())
        .filter(|&at| setup.shown(at))
        .map(|at| {
            let c = &setup.candidates[at];
            compile_only_record(c, by_candidate.get(&at).copied(), &skipped)
        })
        .collect();
    write_compile_only(opts, &setup, &mut outcome)?;
    outcome.phases.total_s = t0.elapsed().as_secs_f64();
    Ok(outcome)
}

/// Writes a compile-only run's CSV: a row for every configuration the run shows, with what
/// compiling it gave (a GPU run's columns, without times), as
/// `<op>_<shape>[_<dtype>]_<arch>-compile-only.csv` in the `--out` folder (its `gpu` column
/// says `<arch> compile-only`; a shard's name ends `-shard-K-of-N-compile-only.csv`, so the
/// shards of one prebuild into one folder keep their own files), and notes the path in
/// `outcome`. best.csv is not touched.
fn write_compile_only(opts: &TuneOptions, setup: &Setup, outcome: &mut TuneOutcome) -> Result<()> {
    let op = &setup.op;
    let (major, minor) = setup.compiler.version();
    let info = RunInfo {
        op: op.name().to_string(),
        shape: setup.shape.to_string(),
        dtype: op.dtype.name().to_string(),
        gpu: crate::store::run_csv::compile_only_gpu(&setup.arch),
        compute_capability: String::new(),
        cache: String::new(),
        reps: 0,
        unit: op.spec.metric.amount().1.to_string(),
        roof: String::new(),
        driver: String::new(),
        nvrtc: format!("{major}.{minor}"),
    };
    // A shard's file is named as if its label were `<arch> shard-K-of-N compile-only`.
    let path = match &opts.shard {
        None => run_csv_path(&opts.out_dir, &info),
        Some(slice) => {
            let (k, n) = (slice.shard.k, slice.shard.n);
            let label = format!("{} shard-{k}-of-{n}", setup.arch);
            let gpu = crate::store::run_csv::compile_only_gpu(&label);
            run_csv_path_of(&opts.out_dir, &info.op, &info.shape, &info.dtype, &gpu)
        }
    };
    let csv = run_csv(&info, &outcome.param_names, &outcome.records)?;
    write_atomic(&path, &csv)?;
    outcome.csv_path = Some(path);
    Ok(())
}

/// A compiled image on disk, or why there is none (render or compile error text).
type CubinResult = std::result::Result<PathBuf, String>;

/// One unique source after compiling.
#[derive(Clone)]
pub(super) struct CompiledSource {
    /// `None`: never compiled (the run was stopped first, or NVRTC ran past the limit).
    result: Option<CubinResult>,
    millis: f64,
    from_cache: bool,
    /// Why there is no result, when it is not the stop.
    not_compiled: Option<Note>,
}

/// Reads `source`'s image from the cubin cache into `cubin` when it is there: starting a
/// worker's compile costs more than reading a small file.
fn from_cache(
    compiler: &Compiler,
    cache: Option<&Path>,
    source: &str,
    cubin: &Path,
) -> Result<Option<CompiledSource>> {
    let t = Instant::now();
    let Some(bytes) =
        cache.and_then(|dir| crate::cuda::compile::read_cache(dir, &compiler.key(source)))
    else {
        return Ok(None);
    };
    std::fs::write(cubin, bytes).map_err(|e| Error::io("cannot write", cubin, e))?;
    Ok(Some(CompiledSource {
        result: Some(Ok(cubin.to_path_buf())),
        millis: t.elapsed().as_secs_f64() * 1e3,
        from_cache: true,
        not_compiled: None,
    }))
}

/// Compiles `source` in this process into `cubin` (no worker executable, or one job);
/// nothing after a stop, or after `deadline`.
fn compile_here(
    compiler: &Compiler,
    source: &str,
    cubin: &Path,
    deadline: Option<Instant>,
) -> Result<CompiledSource> {
    if crate::isolate::interrupt::interrupted() {
        return Ok(NOT_COMPILED);
    }
    if deadline.is_some_and(|at| Instant::now() >= at) {
        return Ok(budget_spent());
    }
    Ok(match compiler.compile(source) {
        Ok(done) => {
            std::fs::write(cubin, &done.cubin).map_err(|e| Error::io("cannot write", cubin, e))?;
            CompiledSource {
                result: Some(Ok(cubin.to_path_buf())),
                millis: done.millis,
                from_cache: done.from_cache,
                not_compiled: None,
            }
        }
        Err(f) => CompiledSource {
            result: Some(Err(format!("compile: {}", f.log))),
            millis: f.millis,
            from_cache: false,
            not_compiled: None,
        },
    })
}

/// The kernels the image at `path` defines, or why they cannot be read.
fn image_kernels(path: &Path) -> std::result::Result<Vec<String>, String> {
    let cubin = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    crate::cuda::compile::kernel_names(&cubin)
}

/// A source the run was stopped before compiling.
const NOT_COMPILED: CompiledSource = CompiledSource {
    result: None,
    millis: 0.0,
    from_cache: false,
    not_compiled: None,
};

/// A source abandoned because the run's time budget ran out before its compile started.
fn budget_spent() -> CompiledSource {
    CompiledSource {
        not_compiled: Some(Note::BudgetSpent),
        ..NOT_COMPILED
    }
}

/// The result of rendering and compiling one live candidate.
pub(super) struct Build {
    pub(super) candidate: usize,
    /// `None`: not compiled (the run was stopped first, or NVRTC ran past the limit).
    cubin: Option<CubinResult>,
    compile_ms: f64,
    /// Why there is no image, when it is not the stop.
    not_compiled: Option<Note>,
}

/// The file name an emitted source gets: op, shape, element type and the variant's index
/// (`transpose_1000x1000_f32_v0042.cu`), so that runs of several shapes or element types
/// into one `--emit` folder keep each source under its own name.
fn emit_name(op: &Op, shape: &crate::model::shape::Shape, index: usize) -> String {
    format!("{}_{shape}_{}_v{index:04}.cu", op.name(), op.dtype)
}

/// What building a round needs, bundled so rounds after the first build the same way.
pub(super) struct BuildEnv<'a> {
    pub(super) candidates: &'a [Candidate],
    renderer: &'a Renderer,
    compiler: &'a Compiler,
    opts: &'a TuneOptions,
    op: &'a Op,
    /// The run's shape, part of the names of emitted sources.
    shape: &'a crate::model::shape::Shape,
    /// The shape's and the device's variables, for the spec's `compile_cost`.
    base: &'a crate::spec::expr::Vars,
    dir: &'a Path,
    cache: Option<&'a Path>,
}

impl BuildEnv<'_> {
    /// A search round in the order the search is to hear it, and its sources compile in:
    /// the costliest compiles last (stable, so equal costs keep the proposal order), with
    /// the number of its heavy ones ([`heavy`]). The next round is asked for while the last
    /// few of a round still compile ([`super::rounds`]): the heavy ones and at least a few
    /// more, rather than whichever the search happened to propose last. Which results the
    /// search has heard when it is asked again depends on the spec alone, never on compile
    /// times, so a command still proposes the same configurations every time.
    pub(super) fn heard_order(&self, round: Vec<usize>) -> Result<Round> {
        if self.op.spec.compile_cost.is_none() {
            return Ok(Round {
                order: round,
                heavy: 0,
            });
        }
        let mut costed = round
            .into_iter()
            .map(|c| Ok((self.candidates[c].compile_cost(self.op, self.base)?, c)))
            .collect::<Result<Vec<_>>>()?;
        costed.sort_by_key(|&(cost, _)| cost);
        let costs: Vec<i64> = costed.iter().map(|&(cost, _)| cost).collect();
        Ok(Round {
            order: costed.into_iter().map(|(_, c)| c).collect(),
            heavy: heavy(&costs),
        })
    }
}

/// A search round, in the order the search hears it.
pub(super) struct Round {
    pub order: Vec<usize>,
    /// How many of its last are heavy compiles ([`heavy`]).
    pub heavy: usize,
}

/// How many of `costs` (sorted, cheapest first) are heavy
/// ([`crate::search::space::heavy`] among the round's median): fewer than half of them (the
/// search fits the next round on the rest), and the search may be asked for the next round
/// while they still compile.
fn heavy(costs: &[i64]) -> usize {
    let median = crate::search::space::median_cost(costs);
    costs
        .iter()
        .rev()
        .take_while(|&&c| crate::search::space::heavy(c, median))
        .count()
}

/// Every source rendered so far in this run (identical sources share one compile), what
/// compiling each gave, and the candidates still waiting for theirs.
///
/// Compiles run in a [`CompilePool`] that lives for the whole run: [`Prepared::start`]
/// queues a round and returns at once, and [`Prepared::ready`] hands out each candidate as
/// its source finishes, so the GPU measures what compiled while the rest compiles.
#[derive(Default)]
pub(super) struct Prepared {
    sources: Vec<String>,
    seen: HashMap<String, usize>,
    source_of: HashMap<usize, std::result::Result<usize, String>>,
    /// What compiling each source gave; `None` while it compiles.
    compiled: Vec<Option<CompiledSource>>,
    /// Where each source's image is written.
    cubins: Vec<PathBuf>,
    /// Candidates handed to [`Prepared::start`] and not yet out of [`Prepared::ready`].
    waiting: Vec<usize>,
    /// The kernels each waiting candidate launches (the op's kernel, then its prologue's):
    /// its source's image must define them.
    kernels: HashMap<usize, Vec<String>>,
    /// The kernels each compiled source's image defines, or why they cannot be read; read
    /// once per source, when its first candidate is handed out.
    defined: HashMap<usize, std::result::Result<Vec<String>, String>>,
    pool: Option<CompilePool>,
    /// Sources handed to the compile pool so far.
    pub(super) submitted: usize,
    /// No compile starts after this ([`Prepared::abandon_after`]).
    deadline: Option<Instant>,
    /// Ticked once per source the pool finishes (the compile-only run's bar).
    pub(super) bar: Option<ProgressBar>,
}

impl Prepared {
    /// Nothing rendered yet; the sources that miss the cache go to `pool` when there is one
    /// (its workers started as the run's setup began, [`super::plan::compile_pool`]), else
    /// to a pool started at the first miss.
    pub(super) fn with_pool(pool: Option<CompilePool>) -> Prepared {
        Prepared {
            pool,
            ..Prepared::default()
        }
    }

    pub(super) fn cache_hits(&self) -> usize {
        self.compiled
            .iter()
            .flatten()
            .filter(|c| c.from_cache)
            .count()
    }

    /// Writes how many unique sources were compiled, and how many came from the cache, into
    /// `outcome` (after the last round).
    pub(super) fn count_into(&self, outcome: &mut TuneOutcome) {
        outcome.compiled = self
            .compiled
            .iter()
            .flatten()
            .filter(|c| c.result.is_some())
            .count();
        outcome.from_cache = self.cache_hits();
    }

    /// Starts no compile after `at`: sources queued and not started by then are answered
    /// as abandoned, with [`Note::BudgetSpent`]; the compiles under way finish.
    pub(super) fn abandon_after(&mut self, at: Instant) {
        self.deadline = Some(at);
        if let Some(pool) = &self.pool {
            pool.abandon_after(at);
        }
    }

    /// Sources queued in the pool and not compiled yet.
    pub(super) fn compiling(&self) -> usize {
        self.pool.as_ref().map_or(0, CompilePool::in_flight)
    }

    /// Candidates given to [`Prepared::start`] that have not come out of [`Prepared::ready`].
    pub(super) fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// True while a candidate given to [`Prepared::start`] has not come out of
    /// [`Prepared::ready`].
    pub(super) fn busy(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// Renders the candidates `subset` (indices into `env.candidates`) and queues their new
    /// sources: images in the cubin cache are read at once, the rest go to the compile pool
    /// (or, without a worker executable or with one job, compile here before this returns).
    pub(super) fn start(&mut self, env: &BuildEnv, subset: &[usize]) -> Result<()> {
        let first_new = self.sources.len();
        for &i in subset {
            let c = &env.candidates[i];
            let slot = env.renderer.render(c).map(|source| {
                if let Some(dir) = &env.opts.emit {
                    let path = dir.join(emit_name(env.op, env.shape, c.index));
                    write_atomic(&path, source.as_bytes())?;
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
            let kernels = std::iter::once(&env.op.spec.kernel)
                .chain(c.prologue.iter().map(|(name, _)| name))
                .cloned()
                .collect();
            self.kernels.insert(i, kernels);
        }
        let pooled = env.opts.compile_worker_exe().is_some();
        for k in first_new..self.sources.len() {
            let path = env.dir.join(format!("s{k:04}.cu"));
            let cubin = path.with_extension("cubin");
            let src = &self.sources[k];
            std::fs::write(&path, src).map_err(|e| Error::io("cannot write", &path, e))?;
            // In this process the compiler reads the cache itself; for the pool, hits are read
            // here and only misses go to a worker.
            let hit = match pooled {
                true => from_cache(env.compiler, env.cache, src, &cubin)?,
                false => None,
            };
            let done = match hit {
                Some(hit) => Some(hit),
                None if pooled => {
                    let exe = env.opts.compile_worker_exe().expect("pooled");
                    let deadline = self.deadline;
                    let pool = self.pool.get_or_insert_with(|| {
                        let pool = CompilePool::new(
                            exe,
                            env.compiler.arch(),
                            env.cache,
                            env.opts.jobs,
                            env.opts.compile_limit,
                        );
                        if let Some(at) = deadline {
                            pool.abandon_after(at);
                        }
                        pool
                    });
                    pool.submit(k, path)?;
                    self.submitted += 1;
                    None
                }
                None => Some(compile_here(env.compiler, src, &cubin, self.deadline)?),
            };
            self.compiled.push(done);
            self.cubins.push(cubin);
        }
        self.waiting.extend_from_slice(subset);
        Ok(())
    }

    /// The waiting candidates whose source has finished (compiled, failed, stopped, or never
    /// rendered), without waiting.
    pub(super) fn ready(&mut self) -> Vec<Build> {
        self.take_replies(Some(std::time::Duration::ZERO));
        self.hand_out()
    }

    /// [`Prepared::ready`], waiting for the compiler until at least one candidate is ready
    /// (or none waits).
    pub(super) fn wait_ready(&mut self) -> Vec<Build> {
        loop {
            self.take_replies(Some(std::time::Duration::ZERO));
            let out = self.hand_out();
            if !out.is_empty() || self.waiting.is_empty() || self.compiling() == 0 {
                return out;
            }
            self.take_replies(None);
        }
    }

    /// Takes the pool's replies in: one, waiting at most `wait` (`None`: until it comes),
    /// then whatever else has arrived.
    fn take_replies(&mut self, wait: Option<std::time::Duration>) {
        let Some(pool) = self.pool.as_mut() else {
            return;
        };
        let mut next = pool.recv(wait);
        while let Some((k, reply)) = next {
            let cubin = self.cubins[k].clone();
            self.compiled[k] = Some(match reply {
                PoolReply::Done(r) => CompiledSource {
                    result: Some(if r.ok {
                        Ok(cubin)
                    } else {
                        Err(format!("compile: {}", r.log))
                    }),
                    millis: r.millis,
                    from_cache: r.from_cache,
                    not_compiled: None,
                },
                PoolReply::TimedOut(seconds) => CompiledSource {
                    millis: seconds * 1e3,
                    not_compiled: Some(Note::PastLimit { seconds }),
                    ..NOT_COMPILED
                },
                PoolReply::Stopped => NOT_COMPILED,
                PoolReply::Abandoned => budget_spent(),
            });
            if let Some(pb) = &self.bar {
                pb.inc(1);
            }
            next = pool.recv(Some(std::time::Duration::ZERO));
        }
    }

    /// Moves the waiting candidates whose source is done out, as builds. An image that lacks
    /// a kernel the candidate launches makes it a failed build, with the kernel named.
    fn hand_out(&mut self) -> Vec<Build> {
        let mut out = Vec::new();
        let (compiled, source_of) = (&self.compiled, &self.source_of);
        let (kernels, defined) = (&mut self.kernels, &mut self.defined);
        self.waiting.retain(|&i| {
            let (cubin, compile_ms, not_compiled) = match &source_of[&i] {
                Err(e) => (Some(Err(e.clone())), 0.0, None),
                Ok(k) => match &compiled[*k] {
                    None => return true,
                    Some(c) => (c.result.clone(), c.millis, c.not_compiled),
                },
            };
            let wanted = kernels.remove(&i).unwrap_or_default();
            let cubin = match (cubin, &source_of[&i]) {
                (Some(Ok(path)), Ok(k)) => {
                    let names = defined.entry(*k).or_insert_with(|| image_kernels(&path));
                    let found = names
                        .as_ref()
                        .map_err(Clone::clone)
                        .and_then(|d| crate::cuda::compile::check_kernels(d, &wanted));
                    Some(
                        found
                            .map(|()| path)
                            .map_err(|why| format!("compile: {why}")),
                    )
                }
                (other, _) => other,
            };
            out.push(Build {
                candidate: i,
                cubin,
                compile_ms,
                not_compiled,
            });
            false
        });
        out
    }

    /// The GPU task for a built candidate (its record now says "not run"), or `None` with the
    /// record marked failed when it did not render or compile.
    pub(super) fn task(
        &self,
        env: &BuildEnv,
        build: &Build,
        records: &mut [Record],
        task_record: &HashMap<usize, usize>,
        task_key: &mut HashMap<usize, JournalKey>,
    ) -> Option<Task> {
        let c = &env.candidates[build.candidate];
        let id = TaskId::variant(c.index).number();
        let rec = &mut records[task_record[&id]];
        rec.compile_ms = Some(build.compile_ms);
        let path = match &build.cubin {
            Some(Err(e)) => {
                rec.status = Status::Failed;
                rec.set_error(one_line(e));
                return None;
            }
            None => {
                not_compiled(rec, build, "not compiled");
                return None;
            }
            Some(Ok(path)) => path,
        };
        let dims = c.launch.expect("live candidates have launch dims");
        if let Some(Ok(k)) = self.source_of.get(&build.candidate) {
            task_key.insert(
                id,
                JournalKey::variant(env.compiler.key(&self.sources[*k]), &dims, &c.prologue),
            );
        }
        rec.status = Status::NotRun;
        rec.error.clear();
        Some(Task {
            id,
            label: rec.label(),
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

/// Marks `rec` not run for want of an image, with the reason `build` gives (`otherwise` when
/// it gives none: the stop kept the source from compiling).
fn not_compiled(rec: &mut Record, build: &Build, otherwise: &str) {
    rec.status = Status::NotRun;
    match build.not_compiled {
        Some(note) => rec.set_note(note),
        None => rec.set_error(otherwise),
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
        .texts()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let mut rec = Record::new(Kind::Variant, &format!("v{:04}", c.index), params);
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
    match &build.cubin {
        Some(Err(e)) => {
            rec.status = Status::Failed;
            rec.set_error(e.clone());
        }
        None => not_compiled(&mut rec, build, crate::isolate::interrupt::STOPPED),
        Some(Ok(_)) => {
            rec.status = Status::Ok;
            rec.error.clear();
        }
    }
    rec.compile_ms = Some(build.compile_ms);
    rec
}

#[cfg(test)]
mod tests {
    use super::heavy;

    #[test]
    fn compiles_of_eight_times_the_median_cost_are_heavy() {
        assert_eq!(heavy(&[]), 0);
        assert_eq!(heavy(&[8, 8, 16, 32, 64, 64, 512, 1024]), 2);
        assert_eq!(heavy(&[8, 16, 16, 100]), 0);
        assert_eq!(heavy(&[1, 1, 1, 1, 1, 64, 64, 64, 64]), 4);
        // Half the round at the top cost: the median is that cost, nothing is heavy.
        assert_eq!(heavy(&[1, 1, 1, 64, 64, 64]), 0);
        // Costs of 0 (no expression, or undefined at the point) make nothing heavy.
        assert_eq!(heavy(&[0, 0, 0, 5]), 0);
    }
}
