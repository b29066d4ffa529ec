//! A tuning run over a list of shapes: one shape, a sweep on one GPU, a sweep spread over
//! several GPUs through one work queue, or one shard of any of them (with its manifest).

use super::shard::{self, Assignment, Manifest, ShardOutput, Sweep};
use crate::error::{Error, Result, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK};
use crate::isolate::interrupt;
use crate::isolate::worker::KeptWorker;
use crate::model::slice::{Shard, Split};
use crate::pipeline::options::TuneOptions;
use crate::pipeline::outcome::TuneOutcome;
use crate::pipeline::plan::{check_inputs, shape_list};
use crate::pipeline::summary;
use crate::pipeline::tuner::tune_keeping;
use crate::spec::ops::Op;
use crate::store::files::print_out;
use crate::store::record::{Kind, Status};
use std::path::PathBuf;
use std::sync::Mutex;

/// What a sweep needs besides the per-shape tuning options.
#[derive(Debug, Clone)]
pub struct SweepOptions {
    /// The options every shape starts from (its `shape` is replaced per shape).
    pub base: TuneOptions,
    /// `--shapes`: a file of shapes, one a line (else `base.shape`, a list).
    pub shapes: Option<PathBuf>,
    /// `--shard K/N`, as given.
    pub shard: Option<String>,
    /// `--gpus`, as given (`all` or `0,1`).
    pub gpus: Option<String>,
    /// Rows of the ranking a report shows.
    pub top: usize,
    /// Reports list every variant.
    pub verbose: bool,
    /// Compile only: nothing is timed. Failed compiles fail the run, except a prebuild's (with
    /// `shard`), which records them and fails only when nothing of its share compiled.
    pub compile_only: bool,
    /// The program and arguments the run was started with, for the resume hint after Ctrl-C.
    pub command_line: Vec<String>,
}

/// A tuning run: one shape, a sweep, a sweep over several GPUs, or a shard of any of them.
/// Every argument is checked (settings, op, `--param`, `--arch`, shapes, `--shard`, `--gpus`)
/// before anything is tuned, so bad input is one error, not one per shape. The op is loaded
/// once, here, and every shape is tuned with it.
pub fn sweep(cli: &SweepOptions) -> Result<u8> {
    let mut base = cli.base.clone();
    let (op, _) = check_inputs(&base)?;
    let op = &op;
    let shapes = shape_list(&base, op, cli.shapes.as_deref())?;
    let shard = cli.shard.as_deref().map(Shard::parse).transpose()?;
    let gpus = match &cli.gpus {
        // Compiling needs no GPU: a prebuild that shares a GPU run's arguments keeps --gpus.
        Some(spec) if cli.compile_only => {
            crate::cuda::gpu::parse_gpu_spec(spec)?;
            eprintln!("note: --compile-only uses no GPU; --gpus {spec} is left unused");
            Vec::new()
        }
        Some(spec) => {
            // The list's syntax first, so a typo is reported as such without a GPU.
            let listed = crate::cuda::gpu::parse_gpu_spec(spec)?;
            let count = crate::isolate::worker::device_count().map_err(|e| match e {
                crate::error::Error::NoGpu(why) => {
                    crate::error::Error::NoGpu(format!("--gpus: {why}"))
                }
                e => e,
            })?;
            crate::cuda::gpu::gpus_present(listed, count)?
        }
        None => Vec::new(),
    };
    // The estimated work per shape orders a multi-GPU queue and balances shards by shapes.
    let work = if shard.is_some() || gpus.len() > 1 {
        shard::estimated_work(op, &shapes)?
    } else {
        vec![0.0; shapes.len()]
    };
    let plan = shard::plan(shard, &shapes, &work);
    let recorder = match shard {
        Some(s) if !cli.compile_only => Some(Recorder::start(&base, op, s, &shapes, &plan)?),
        _ => None,
    };
    if let Some(&g) = gpus.first() {
        base.device = g;
    }
    // What a prebuild's share compiled, over all its shapes.
    let built = Mutex::new(Built::default());
    let record = |a: &Assignment, result: &std::result::Result<TuneOutcome, String>| {
        if let Some(r) = &recorder {
            r.done(a, result);
        }
        if let Ok(o) = result {
            built.lock().expect("built").add(o);
        }
    };
    let code = if plan.len() == 1 {
        let (code, result) = run_one(
            cli,
            &job_options(&base, &plan[0]),
            op,
            &mut KeptWorker::default(),
        );
        record(&plan[0], &result);
        code
    } else if gpus.len() > 1 {
        sweep_on_gpus(cli, &base, op, &plan, &gpus, &record)
    } else {
        // A sweep: each shape tuned as if alone (on the GPU worker the last shape left), then
        // one summary table.
        let mut rows = Vec::new();
        let mut worst = 0u8;
        let mut kept = KeptWorker::default();
        for a in &plan {
            // A stop that came while no shape ran (each failing at once) ends the sweep too.
            if interrupt::interrupted() {
                break;
            }
            print_out(format_args!("==== {}\n", a.shape));
            let (code, result) = run_one(cli, &job_options(&base, a), op, &mut kept);
            record(a, &result);
            worst = worst.max(code);
            rows.push(summary::summary_row(&a.shape, result.as_ref().ok()));
            if code == EXIT_INTERRUPTED {
                break;
            }
        }
        print_out(summary::summary_table(&rows));
        worst
    };
    if let Some(r) = recorder {
        r.finish()?;
    }
    let code = match shard {
        Some(s) if cli.compile_only && !interrupt::interrupted() => {
            code.max(built.into_inner().expect("built").prebuild_code(s))
        }
        _ => code,
    };
    // Stopped: the sweep says so whatever its shapes did before.
    Ok(if interrupt::interrupted() {
        code.max(EXIT_INTERRUPTED)
    } else {
        code
    })
}

/// The options of one shape of the plan. A shard that holds only a share of a shape's
/// variants skips the interleaved confirmation: its leaders are not the shape's leaders, and
/// the merge ranks all shards' variants by median.
fn job_options(base: &TuneOptions, a: &Assignment) -> TuneOptions {
    let by_variants = a.slice.is_some_and(|s| s.split == Split::Variants);
    TuneOptions {
        shape: a.shape.clone(),
        shard: a.slice,
        confirm_rounds: if by_variants { 0 } else { base.confirm_rounds },
        ..base.clone()
    }
}

/// Each GPU's share of the `--jobs` compile workers: the GPUs of a sweep compile at the same
/// time, each with its own pool, so `jobs` each would put GPUs x jobs NVRTC processes on the
/// host's cores.
fn jobs_per_gpu(jobs: usize, gpus: usize) -> usize {
    (jobs / gpus.max(1)).max(1)
}

/// Several GPUs: one thread per GPU pulls the next shape from one queue and tunes it there, so
/// a fast GPU never idles while a slow one has a backlog. The queue is ordered by estimated
/// work, largest first (longest-processing-time first), so the sweep does not end with one GPU
/// finishing a large shape while the others idle. Reports print whole, as each shape
/// finishes; the summary comes last, in the order of the shapes.
///
/// Each GPU's thread keeps its GPU worker process (and CUDA context) from shape to shape. An
/// error of one shape (too large for the GPU's free memory, refused by the op) fails that
/// shape, and the GPU goes on with the next; an error of the device ([`Error::is_device`])
/// takes the GPU out of the sweep.
fn sweep_on_gpus(
    cli: &SweepOptions,
    base: &TuneOptions,
    op: &Op,
    plan: &[Assignment],
    gpus: &[usize],
    record: &(dyn Fn(&Assignment, &std::result::Result<TuneOutcome, String>) + Sync),
) -> u8 {
    let work: Vec<f64> = plan.iter().map(|a| a.work).collect();
    let queue = Mutex::new(
        shard::longest_first(&work)
            .into_iter()
            .collect::<std::collections::VecDeque<_>>(),
    );
    let rows = Mutex::new(vec![None; plan.len()]);
    let worst = Mutex::new(0u8);
    // A GPU whose run fails with an error of the device (its worker cannot start, the device
    // is lost) hands its shape back to the queue, once, and takes no more work, so the sweep
    // finishes on the other GPUs. The last GPU left is never taken out: its shapes fail with
    // the reason.
    let dead = Mutex::new(std::collections::HashSet::new());
    let handed_back = Mutex::new(std::collections::HashSet::new());
    // Tunes shape i on GPU g (on the worker in `kept`); false when the shape went back to
    // the queue instead.
    let run = |i: usize, g: usize, may_hand_back: bool, kept: &mut KeptWorker| -> bool {
        let a = &plan[i];
        let opts = TuneOptions {
            device: g,
            progress: false,
            jobs: jobs_per_gpu(base.jobs, gpus.len()),
            ..job_options(base, a)
        };
        let (code, result) = run_one_quietly(cli, &opts, op, g, kept);
        if let Err(why) = &result {
            let mut dead = dead.lock().expect("dead");
            if may_hand_back
                && why.is_device()
                && dead.len() + 1 < gpus.len()
                && handed_back.lock().expect("handed back").insert(i)
            {
                dead.insert(g);
                eprintln!(
                    "GPU {g}: {} failed ({why}); the shape goes back to the queue and GPU {g} \
                     takes no more work",
                    a.shape
                );
                queue.lock().expect("queue").push_front(i);
                return false;
            }
        }
        let result = result.map_err(|e| e.to_string());
        record(a, &result);
        let mut w = worst.lock().expect("worst");
        *w = (*w).max(code);
        rows.lock().expect("rows")[i] = Some(summary::summary_row(
            &format!("{} (GPU {g})", a.shape),
            result.as_ref().ok(),
        ));
        true
    };
    std::thread::scope(|scope| {
        for &g in gpus {
            let (queue, run) = (&queue, &run);
            scope.spawn(move || {
                let mut kept = KeptWorker::default();
                loop {
                    if interrupt::interrupted() {
                        break;
                    }
                    let Some(i) = queue.lock().expect("queue").pop_front() else {
                        break;
                    };
                    if !run(i, g, true, &mut kept) {
                        break;
                    }
                }
            });
        }
    });
    // A shape handed back after the other GPUs had found the queue empty runs here, on a GPU
    // that has not failed.
    let left: Vec<usize> = queue.lock().expect("queue").drain(..).collect();
    let survivor = {
        let dead = dead.lock().expect("dead");
        gpus.iter().copied().find(|g| !dead.contains(g))
    };
    let mut kept = KeptWorker::default();
    for i in left {
        if interrupt::interrupted() {
            break;
        }
        run(i, survivor.unwrap_or(gpus[0]), false, &mut kept);
    }
    let rows: Vec<[String; 4]> = rows
        .into_inner()
        .expect("rows")
        .into_iter()
        .flatten()
        .collect();
    print_out(summary::summary_table(&rows));
    worst.into_inner().expect("worst")
}

/// Like [`run_one`], but the report is printed in one piece (several GPUs share stdout), and
/// the error is kept whole, for [`Error::is_device`].
fn run_one_quietly(
    cli: &SweepOptions,
    opts: &TuneOptions,
    op: &Op,
    gpu: usize,
    kept: &mut KeptWorker,
) -> (u8, Result<TuneOutcome>) {
    match tune_keeping(opts, Some(op), kept) {
        Ok(outcome) => {
            let text = summary::render(&outcome, cli.top, cli.verbose);
            print_out(format_args!("==== {} on GPU {gpu}\n{text}", opts.shape));
            (outcome_code(cli, opts, &outcome), Ok(outcome))
        }
        Err(e) => {
            eprintln!("error: {} on GPU {gpu}: {e}", opts.shape);
            (e.exit_code() as u8, Err(e))
        }
    }
}

/// Tunes one shape of `op` and prints its report; the exit code it calls for, and the outcome
/// (or the error, already printed).
fn run_one(
    cli: &SweepOptions,
    opts: &TuneOptions,
    op: &Op,
    kept: &mut KeptWorker,
) -> (u8, std::result::Result<TuneOutcome, String>) {
    match tune_keeping(opts, Some(op), kept) {
        Ok(outcome) => {
            print_out(summary::render(&outcome, cli.top, cli.verbose));
            (outcome_code(cli, opts, &outcome), Ok(outcome))
        }
        Err(e) => {
            eprintln!("error: {}: {e}", opts.shape);
            (e.exit_code() as u8, Err(e.to_string()))
        }
    }
}

/// The command that resumes a stopped run: its arguments (`--resume` once, at the end),
/// quoted for the shell so that the line pastes back as it ran (a folder with a space). An
/// argument with a NUL byte cannot have come from a shell: it is left as it is.
fn resume_command(command_line: &[String]) -> String {
    // The program as it was started (`tune`, or `./target/release/tune`), then its arguments.
    let program = command_line.first().map_or("tune", String::as_str);
    let args: Vec<&str> = std::iter::once(program)
        .chain(
            command_line
                .iter()
                .skip(1)
                .map(String::as_str)
                .filter(|a| *a != "--resume"),
        )
        .collect();
    let line = shlex::try_join(args.iter().copied()).unwrap_or_else(|_| args.join(" "));
    format!("{line} --resume")
}

/// The exit code a finished shape calls for, with the line that says why on stderr: 130 when
/// interrupted (and how to go on), 1 when an unsharded compile-only run had compiles fail or
/// compiled nothing, or a run verified nothing, else 0. One rule for a shape on one GPU and
/// for shapes spread over several. A prebuild's share is judged whole, by [`Built`].
fn outcome_code(cli: &SweepOptions, opts: &TuneOptions, outcome: &TuneOutcome) -> u8 {
    if outcome.interrupted && cli.compile_only {
        // Nothing to resume: a compile-only run journals nothing, and the same command again
        // finds what compiled in the cubin cache.
        eprintln!(
            "interrupted: partial results written; {}",
            if opts.cubin_cache {
                "the compiled images are in the cubin cache, so the same command again \
                 compiles only the rest"
            } else {
                "with --no-cache, the same command again compiles everything"
            }
        );
        return EXIT_INTERRUPTED;
    }
    if outcome.interrupted {
        eprintln!(
            "interrupted: partial results written; resume with: {}",
            resume_command(&cli.command_line)
        );
        return EXIT_INTERRUPTED;
    }
    let failed_compiles = outcome
        .records
        .iter()
        .filter(|r| r.status == Status::Failed)
        .count();
    // A compile-only run prebuilds. A source past the compile time limit is one a GPU run
    // under the same limit would stop too, so it is reported (the summary counts them) and
    // does not fail the run; a run (other than a shard's share, which may be empty) that
    // compiled nothing at all built nothing, and fails.
    let compiled = outcome
        .records
        .iter()
        .filter(|r| r.status == Status::Ok)
        .count();
    if cli.compile_only && opts.shard.is_some() {
        // A prebuild: the GPU shard of the same arguments records these variants as failed
        // and goes on, so the prebuild does too (its failure would cancel the GPU shards
        // that depend on it).
        if failed_compiles > 0 {
            eprintln!(
                "warning: {}: {failed_compiles} variant(s) failed to compile (recorded in the \
                 compile-only CSV, as a GPU run records them)",
                opts.shape
            );
        }
        return EXIT_OK;
    }
    if cli.compile_only && failed_compiles > 0 {
        eprintln!(
            "error: {}: {failed_compiles} variant(s) failed to compile",
            opts.shape
        );
        return EXIT_FAILED;
    }
    if cli.compile_only && compiled == 0 {
        let past = match summary::past_limit(outcome) {
            0 => String::new(),
            n => format!(
                " ({n} ran past the compile time limit; --compile-timeout 0 waits for every \
                 compile)"
            ),
        };
        eprintln!("error: {}: no variant compiled{past}", opts.shape);
        return EXIT_FAILED;
    }
    if !cli.compile_only && outcome.best.is_none() {
        if opts.shard.is_some() {
            // A share may hold no variant, or none that verifies: the merge decides.
            print_out(
                "(no variant of this shard's share verified; `tune merge` ranks all shards)\n",
            );
            return EXIT_OK;
        }
        eprintln!(
            "error: {}: no configuration verified; see {}",
            opts.shape,
            outcome
                .csv_path
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        );
        return EXIT_FAILED;
    }
    EXIT_OK
}

/// What the variants of a prebuild's share (`--compile-only --shard K/N`) came to, over its
/// shapes. A prebuild fails only when its share had variants to compile and none compiled:
/// a share may be empty (more shards than variants), and one shape's share may be all
/// variants that do not compile, which its GPU shard records as failed and goes on.
#[derive(Debug, Default)]
struct Built {
    compiled: usize,
    failed: usize,
    past_limit: usize,
    /// Proposed, but not started within the time budget.
    not_started: usize,
}

impl Built {
    fn add(&mut self, outcome: &TuneOutcome) {
        let mut not_run = 0;
        for r in outcome.records.iter().filter(|r| r.kind == Kind::Variant) {
            match r.status {
                Status::Ok => self.compiled += 1,
                Status::Failed => self.failed += 1,
                Status::NotRun => not_run += 1,
                Status::Pruned | Status::Skipped => {}
            }
        }
        // Not run: past the compile time limit, or not started within the time budget (a
        // stopped run is not judged).
        let past = summary::past_limit(outcome).min(not_run);
        self.past_limit += past;
        self.not_started += not_run - past;
    }

    /// The exit code of prebuild shard `s`, with the line that says why on stderr.
    fn prebuild_code(&self, s: Shard) -> u8 {
        let unbuilt = self.failed + self.past_limit + self.not_started;
        if self.compiled > 0 || unbuilt == 0 {
            return EXIT_OK;
        }
        let why: Vec<String> = [
            (self.failed, "failed to compile"),
            (
                self.past_limit,
                "ran past the compile time limit; --compile-timeout 0 waits for every compile",
            ),
            (self.not_started, "not started within the time budget"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
        eprintln!(
            "error: shard {s} compiled none of its {unbuilt} variant(s) ({})",
            why.join(", ")
        );
        EXIT_FAILED
    }
}

/// Keeps a sharded run's manifest (`shard-K-of-N.json`) up to date: written unfinished before
/// the first shape, again after every shape, and finished at the end, so a shard that is
/// killed leaves a manifest that says so.
pub struct Recorder {
    dir: PathBuf,
    shard: Shard,
    manifest: Mutex<Manifest>,
}

impl Recorder {
    pub fn start(
        base: &TuneOptions,
        op: &Op,
        s: Shard,
        shapes: &[String],
        plan: &[Assignment],
    ) -> Result<Self> {
        // Shards sharing a folder would overwrite each other's run CSVs and journals.
        if base.out_dir.is_dir() {
            if let Some((other, _)) = shard::manifests_in(&base.out_dir)?
                .into_iter()
                .find(|(o, _)| *o != s)
            {
                return Err(Error::Usage(format!(
                    "--out {} already holds the results of shard {other}; give every shard \
                     its own --out folder (e.g. {}/shard-{})",
                    base.out_dir.display(),
                    base.out_dir.display(),
                    s.k
                )));
            }
        }
        // The settings, op and --param values were checked by `sweep` before this.
        let manifest = Manifest {
            format: shard::MANIFEST_FORMAT,
            tool_version: super::merge::TOOL_VERSION.to_string(),
            k: s.k,
            n: s.n,
            split: shard::split_for(s.n, shapes.len()),
            sweep: Sweep {
                op: op.name().to_string(),
                op_fingerprint: shard::op_fingerprint(op),
                shapes: shapes.to_vec(),
                dtype: base.dtype.clone(),
                // In name order: the same overrides in another order are the same space.
                params: {
                    let mut params = base.params.clone();
                    params.sort();
                    params
                },
                reps: base.bench.reps,
                warmup: base.bench.warmup,
                cache: base.bench.cache.as_str().to_string(),
                seed: base.seed,
                rtol: base.rtol,
                adaptive: base.adaptive,
                confirm_rounds: base.confirm_rounds,
                strategy: base.strategy.clone(),
                budget: base.budget.map(|b| b.to_string()),
                warm_start: base.warm_start,
            },
            shapes: plan.iter().map(|a| a.shape.clone()).collect(),
            complete: false,
            outputs: Vec::new(),
        };
        manifest.write(&base.out_dir)?;
        Ok(Recorder {
            dir: base.out_dir.clone(),
            shard: s,
            manifest: Mutex::new(manifest),
        })
    }

    /// Records one finished (or failed) shape; a manifest that cannot be written is a warning
    /// (the CSV and journal are on disk; rerunning the shard rewrites the manifest).
    pub fn done(&self, a: &Assignment, result: &std::result::Result<TuneOutcome, String>) {
        let name = |p: &Option<PathBuf>| {
            p.as_ref()
                .and_then(|p| p.file_name())
                .map(|n| n.to_string_lossy().into_owned())
        };
        let out = match result {
            Ok(o) => ShardOutput {
                shape: a.shape.clone(),
                complete: !o.interrupted,
                error: if o.interrupted {
                    "interrupted".into()
                } else {
                    String::new()
                },
                csv: name(&o.csv_path),
                journal: name(&o.journal_path),
                run: o.info.clone(),
                param_names: o.param_names.clone(),
                gpu_uuid: o
                    .device
                    .as_ref()
                    .map(|d| d.uuid.clone())
                    .unwrap_or_default(),
                tuned_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now())
                    .to_string(),
                num_sms: o.device.as_ref().map(|d| d.limits.num_sms),
                arch: o.arch.clone(),
            },
            Err(e) => ShardOutput {
                shape: a.shape.clone(),
                complete: false,
                error: e.clone(),
                csv: None,
                journal: None,
                run: None,
                param_names: Vec::new(),
                gpu_uuid: String::new(),
                tuned_at: String::new(),
                num_sms: None,
                arch: String::new(),
            },
        };
        let mut m = self.manifest.lock().expect("manifest");
        m.outputs.retain(|o| o.shape != a.shape);
        m.outputs.push(out);
        if let Err(e) = m.write(&self.dir) {
            eprintln!("warning: the shard manifest could not be written: {e}");
        }
    }

    /// Marks the manifest finished when every shape of the share finished, and says how to
    /// merge.
    pub fn finish(self) -> Result<()> {
        let mut m = self.manifest.into_inner().expect("manifest");
        let finished = m.outputs.iter().filter(|o| o.complete).count();
        m.complete = finished == m.shapes.len();
        let path = m.write(&self.dir)?;
        let s = self.shard;
        if !m.complete {
            eprintln!(
                "shard {s} unfinished: {finished} of {} shape(s) done ({}); run it again \
                 (with --resume) before merging",
                m.shapes.len(),
                path.display()
            );
            return Ok(());
        }
        // `out/shard-3` suggests `out/shard-*` for the others.
        let dir = self.dir.display().to_string();
        let glob = dir
            .strip_suffix(&s.k.to_string())
            .filter(|p| !p.ends_with(|c: char| c.is_ascii_digit()) && !p.ends_with('/'))
            .map(|p| format!("{p}*"));
        let merged = self
            .dir
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map(|p| p.join("merged").display().to_string())
            .unwrap_or_else(|| "merged".into());
        print_out(format_args!(
            "shard {s} done: {finished} shape(s), manifest {}. Once all {} shards are done: \
             tune merge {} --out {merged}\n",
            path.display(),
            s.n,
            glob.unwrap_or_else(|| format!("<the {} shards' --out folders>", s.n))
        ));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{jobs_per_gpu, resume_command};
    use crate::error::Error;

    #[test]
    fn the_resume_command_pastes_back_as_it_ran() {
        let args = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        assert_eq!(
            resume_command(&args(&[
                "tune", "--shape", "64x64", "--out", "runs/a b", "--resume"
            ])),
            "tune --shape 64x64 --out 'runs/a b' --resume"
        );
        assert_eq!(
            resume_command(&args(&["tune", "--shape", "1000x1000", "-p", "X=1,2"])),
            "tune --shape 1000x1000 -p 'X=1,2' --resume"
        );
        assert_eq!(
            resume_command(&args(&["tune", "--out", "it's"])),
            "tune --out \"it's\" --resume"
        );
        // The program as it was started, not one assumed on PATH.
        assert_eq!(
            resume_command(&args(&["./target/release/tune", "--shape", "64x64"])),
            "./target/release/tune --shape 64x64 --resume"
        );
        assert_eq!(
            resume_command(&args(&["/opt/my tools/tune", "--shape", "64x64"])),
            "'/opt/my tools/tune' --shape 64x64 --resume"
        );
    }

    #[test]
    fn the_gpus_of_a_sweep_share_the_compile_workers() {
        assert_eq!(jobs_per_gpu(16, 1), 16);
        assert_eq!(jobs_per_gpu(16, 2), 8);
        assert_eq!(jobs_per_gpu(16, 3), 5);
        // Never none: with more GPUs than jobs each compiles in its own process.
        assert_eq!(jobs_per_gpu(4, 8), 1);
    }

    #[test]
    fn only_the_devices_errors_take_a_gpu_out_of_a_sweep() {
        assert!(Error::is_device(&Error::NoGpu(
            "GPU worker could not start: no device".into()
        )));
        for e in [
            Error::OutOfMemory {
                need_mib: 932,
                free_mib: 300,
            },
            Error::Cuda {
                during: "checking the GPU float64 reference".into(),
                why: "row 3 differs".into(),
            },
            Error::Usage("the op refuses this shape".into()),
            Error::NoNvrtc("not found".into()),
        ] {
            assert!(!e.is_device(), "{e}");
        }
    }
}
