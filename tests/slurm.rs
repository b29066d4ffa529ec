//! deploy/slurm/tune-array.sh on a real Slurm. scripts/slurm-local.sh installs Slurm where
//! it is missing (apt-get, as root) and starts a single-node Slurm (munged, slurmctld, slurmd)
//! in a temporary folder; the test submits the script's prebuild mode for a small sweep
//! (compile-only CPU tasks into a shared cubin cache, then the GPU array, then the merge),
//! waits for the jobs and checks what Slurm and the files say. The daemons are stopped when
//! the test ends, also when an assertion fails.
//!
//! The test skips (a `SKIPPED` line) where a local Slurm cannot run: not root, or Slurm not
//! installed and not installable. It needs NVRTC (run it through scripts/test.sh). With
//! `SLURM_PREFIX=.slurm` it runs the daemons from the unpacked packages of
//! `scripts/slurm-local.sh prefix` instead of the system's.
//!
//! Also here, without Slurm: the script refuses bad input before it submits anything.

use clap::Parser;
use cuda_autotune::cli::Cli;
use cuda_autotune::store::record::Status;
use cuda_autotune::store::run_csv::{read_run_csv, read_run_file};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

mod common;
use common::{has_gpu, repo, skipped, text, tmp, tune_exe};

/// The sweep: 2 small shapes, 8 variants each (the classic kernel's parameters pinned), so
/// compiling it takes seconds on 2 cores.
const SHAPES: &str = "64x64,96x80";
const PREBUILD_TASKS: usize = 3;
const SHARDS: usize = 2;

fn sweep_args() -> Vec<String> {
    let mut args: Vec<String> = ["--op", "transpose", "--shape", SHAPES]
        .map(String::from)
        .to_vec();
    args.extend(common::classic_transpose_pins());
    for p in [
        "TILE_DIM=16,32",
        "BLOCK_ROWS=4,8",
        "PAD=0,1",
        "BOUNDS=always",
    ] {
        args.extend(["--param".to_string(), p.to_string()]);
    }
    args
}

/// A local Slurm started by scripts/slurm-local.sh in its own folder; dropping it stops the
/// daemons and cancels what is left of the jobs.
struct LocalSlurm {
    dir: PathBuf,
}

impl LocalSlurm {
    /// `Err(why)` where Slurm cannot run here (the script's exit status 3).
    fn start(dir: &Path) -> Result<LocalSlurm, String> {
        let script = repo("scripts/slurm-local.sh");
        let install = Command::new("bash")
            .arg(&script)
            .arg("install")
            .output()
            .expect("bash runs");
        if install.status.code() == Some(3) {
            return Err(last_line(&install.stderr));
        }
        assert!(
            install.status.success(),
            "slurm-local.sh install:\n{}",
            text(&install.stderr)
        );
        let t0 = Instant::now();
        let start = Command::new("bash")
            .arg(&script)
            .arg("start")
            .arg(dir)
            .output()
            .expect("bash runs");
        if start.status.code() == Some(3) {
            return Err(last_line(&start.stderr));
        }
        // From here on the daemons may be running: stop them however this ends.
        let slurm = LocalSlurm {
            dir: dir.to_path_buf(),
        };
        assert!(
            start.status.success(),
            "slurm-local.sh start:\n{}{}",
            text(&start.stdout),
            text(&start.stderr)
        );
        eprint!("{}", text(&start.stdout));
        eprintln!("slurm started in {:.1} s", t0.elapsed().as_secs_f64());
        Ok(slurm)
    }

    /// `program args` with the Slurm's environment (DIR/env.sh: SLURM_CONF, and PATH and
    /// LD_LIBRARY_PATH into a prefix).
    fn cmd(&self, program: &str) -> Command {
        let mut cmd = Command::new("bash");
        cmd.args(["-c", "source \"$0\" && exec \"$@\""])
            .arg(self.dir.join("env.sh"))
            .arg(program);
        cmd
    }

    fn run(&self, program: &str, args: &[&str]) -> String {
        let out = self.cmd(program).args(args).output().expect("runs");
        assert!(
            out.status.success(),
            "{program} {args:?}:\n{}",
            text(&out.stderr)
        );
        text(&out.stdout)
    }

    /// Waits until none of `jobs` is pending or running (at most `limit`).
    fn wait(&self, jobs: &[String], limit: Duration) {
        let t0 = Instant::now();
        let list = jobs.join(",");
        loop {
            let left = self.run("squeue", &["-h", "-o", "%i %T %r", "-j", &list]);
            if left.trim().is_empty() {
                return;
            }
            assert!(
                t0.elapsed() < limit,
                "jobs still queued after {limit:?}:\n{left}"
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// Every record of job (or job array) `id`: its fields, one map per array task.
    fn records(&self, id: &str) -> Vec<BTreeMap<String, String>> {
        self.run("scontrol", &["show", "job", "-o", id])
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                l.split_whitespace()
                    .filter_map(|kv| kv.split_once('='))
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            })
            .collect()
    }

    /// (array task, state, reason) of every record of `id`, by task.
    fn states(&self, id: &str) -> Vec<(String, String, String)> {
        let mut out: Vec<(String, String, String)> = self
            .records(id)
            .iter()
            .map(|r| {
                let field = |k: &str| r.get(k).cloned().unwrap_or_default();
                (field("ArrayTaskId"), field("JobState"), field("Reason"))
            })
            .collect();
        out.sort();
        out
    }
}

impl Drop for LocalSlurm {
    fn drop(&mut self) {
        let out = Command::new("bash")
            .arg(repo("scripts/slurm-local.sh"))
            .arg("stop")
            .arg(&self.dir)
            .output();
        match out {
            Ok(o) => eprint!("{}{}", text(&o.stdout), text(&o.stderr)),
            Err(e) => eprintln!("slurm-local.sh stop did not run: {e}"),
        }
    }
}

fn last_line(bytes: &[u8]) -> String {
    text(bytes)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("(no message)")
        .trim_start_matches("slurm-local: ")
        .to_string()
}

/// The job ids tune-array.sh printed, by stage (`prebuild: job array 12, ...`).
fn job_ids(stdout: &str) -> BTreeMap<String, String> {
    stdout
        .lines()
        .filter_map(|l| {
            let (stage, rest) = l.split_once(": job ")?;
            let id = rest.trim_start_matches("array ").split([',', ' ']).next()?;
            Some((stage.to_string(), id.to_string()))
        })
        .collect()
}

/// The names of the cubins in a cache folder (every file of `cubin/`, so a leftover temporary
/// file shows).
fn cache_files(cache: &Path) -> BTreeSet<String> {
    std::fs::read_dir(cache.join("cubin"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// (shape, variant name) of every compiled variant in the compile-only CSVs of `dir` (a
/// shard's CSV or an unsharded run's).
fn compiled_variants(dir: &Path) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = e.unwrap().path();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        if !file.ends_with("-compile-only.csv") {
            continue;
        }
        let run = read_run_file(&path).expect("a compile-only CSV");
        for r in run.records {
            if r.kind == cuda_autotune::store::record::Kind::Variant && r.status == Status::Ok {
                out.insert((run.labels.shape.clone(), r.name));
            }
        }
    }
    out
}

fn submit(slurm: &LocalSlurm, run: &Path, only: Option<&str>) -> BTreeMap<String, String> {
    let mut cmd = slurm.cmd("bash");
    cmd.arg(repo("deploy/slurm/tune-array.sh"))
        .arg(SHARDS.to_string())
        .arg(run)
        .args(sweep_args())
        .env("STAGES", "prebuild,shards,merge")
        .env("TUNE", tune_exe())
        .env("TUNE_ARCH", "sm_90")
        .env("PREBUILD_TASKS", PREBUILD_TASKS.to_string())
        .env("PREBUILD_CPUS", "1")
        .env("SHARD_CPUS", "1")
        // The cache is the script's default, RUN_DIR/cache.
        .env_remove("CUDA_AUTOTUNE_CACHE")
        .env_remove("ONLY");
    if let Some(k) = only {
        cmd.env("ONLY", k);
    }
    let out: Output = cmd.output().expect("bash runs");
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "tune-array.sh:\n{stdout}{}",
        text(&out.stderr)
    );
    eprint!("{stdout}");
    let ids = job_ids(&stdout);
    assert_eq!(
        ids.keys().map(String::as_str).collect::<Vec<_>>(),
        ["merge", "prebuild", "shards"],
        "{stdout}"
    );
    ids
}

fn log(run: &Path, name: &str) -> String {
    std::fs::read_to_string(run.join("logs").join(name)).unwrap_or_default()
}

fn logs_of(run: &Path, prefix: &str) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(run.join("logs"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .collect();
    out.sort();
    out
}

#[test]
fn the_slurm_prebuild_fills_the_cache_once_and_a_failed_task_stops_the_jobs_after_it() {
    let name = "the_slurm_prebuild_fills_the_cache_once_and_a_failed_task_stops_the_jobs_after_it";
    let _one = ONE_SLURM.lock().unwrap_or_else(|e| e.into_inner());
    let t = tmp();
    let t0 = Instant::now();
    let slurm = match LocalSlurm::start(&t.path().join("slurm")) {
        Ok(s) => s,
        Err(why) => {
            skipped(name, &format!("no local Slurm here: {why}"));
            return;
        }
    };
    let limit = Duration::from_secs(120);

    // What the sweep compiles, from one unsharded compile-only run with a cache of its own.
    let reference_cache = t.path().join("reference-cache");
    let reference = t.path().join("reference");
    let out = Command::new(tune_exe())
        .args(sweep_args())
        .args(["--compile-only", "--arch", "sm_90", "--out"])
        .arg(&reference)
        .env("CUDA_AUTOTUNE_CACHE", &reference_cache)
        .output()
        .expect("tune runs");
    assert!(
        out.status.success(),
        "the unsharded compile-only run (is NVRTC on LD_LIBRARY_PATH? scripts/test.sh):\n{}",
        text(&out.stderr)
    );
    let every_variant = compiled_variants(&reference);
    let every_cubin = cache_files(&reference_cache);
    assert_eq!(every_variant.len(), 2 * 8, "{every_variant:?}");
    assert!(!every_cubin.is_empty());

    // 1. Prebuild task 1 cannot write its output folder (a file is in the way): it fails,
    // and neither the GPU array nor the merge ever starts.
    let run = t.path().join("run");
    std::fs::create_dir_all(run.join("prebuild")).unwrap();
    std::fs::write(run.join("prebuild/shard-1"), "in the way").unwrap();
    let first = submit(&slurm, &run, None);
    slurm.wait(&first.values().cloned().collect::<Vec<_>>(), limit);
    let prebuild = slurm.states(&first["prebuild"]);
    eprintln!("prebuild {}: {prebuild:?}", first["prebuild"]);
    let tasks = |states: &[(String, String, String)]| -> Vec<(String, String)> {
        states
            .iter()
            .map(|(k, s, _)| (k.clone(), s.clone()))
            .collect()
    };
    assert_eq!(
        tasks(&prebuild),
        [("0", "COMPLETED"), ("1", "FAILED"), ("2", "COMPLETED")]
            .map(|(k, s)| (k.into(), s.into()))
    );
    assert!(
        log(&run, &format!("prebuild-1-{}.out", first["prebuild"]))
            .contains("is a file, not a folder"),
        "{}",
        log(&run, &format!("prebuild-1-{}.out", first["prebuild"]))
    );
    for stage in ["shards", "merge"] {
        let states = slurm.states(&first[stage]);
        eprintln!("{stage} {}: {states:?}", first[stage]);
        assert!(!states.is_empty());
        for (_, state, reason) in &states {
            assert_eq!(
                (state.as_str(), reason.as_str()),
                ("CANCELLED", "DependencyNeverSatisfied"),
                "{stage}: {states:?}"
            );
        }
    }
    assert!(logs_of(&run, "shard-").is_empty() && logs_of(&run, "merge-").is_empty());

    // 2. With the folder free, ONLY=1 resubmits prebuild task 1, then the GPU array and the
    // merge whole.
    std::fs::remove_file(run.join("prebuild/shard-1")).unwrap();
    let second = submit(&slurm, &run, Some("1"));
    slurm.wait(&second.values().cloned().collect::<Vec<_>>(), limit);
    let prebuild = slurm.states(&second["prebuild"]);
    eprintln!("prebuild {} (ONLY=1): {prebuild:?}", second["prebuild"]);
    assert_eq!(
        tasks(&prebuild),
        [("1".to_string(), "COMPLETED".to_string())]
    );
    let shards = slurm.states(&second["shards"]);
    let merge = slurm.states(&second["merge"]);
    eprintln!("shards {}: {shards:?}", second["shards"]);
    eprintln!("merge {}: {merge:?}", second["merge"]);
    // The GPU array ran once the prebuild succeeded: every task, each on its shard.
    assert_eq!(
        logs_of(&run, "shard-"),
        (0..SHARDS)
            .map(|k| format!("shard-{k}-{}.out", second["shards"]))
            .collect::<Vec<_>>()
    );
    if has_gpu() {
        assert!(
            shards.iter().all(|(_, s, _)| s == "COMPLETED"),
            "{shards:?}"
        );
        assert_eq!(merge[0].1, "COMPLETED", "{merge:?}");
    } else {
        // Without a GPU every shard fails, saying why, and the merge never starts.
        for k in 0..SHARDS {
            let text = log(&run, &format!("shard-{k}-{}.out", second["shards"]));
            assert!(text.contains("no CUDA GPU is usable"), "shard {k}:\n{text}");
        }
        assert_eq!(
            tasks(&shards),
            (0..SHARDS)
                .map(|k| (k.to_string(), "FAILED".to_string()))
                .collect::<Vec<_>>()
        );
        assert_eq!(
            (merge[0].1.as_str(), merge[0].2.as_str()),
            ("CANCELLED", "DependencyNeverSatisfied")
        );
        assert!(logs_of(&run, "merge-").is_empty());
    }

    // 3. Every prebuild task compiled its own share: the shares are disjoint and together
    // the whole sweep, and the shared cache holds every source of the sweep exactly once (the
    // same images as the unsharded run's cache, nothing else).
    let mut union = BTreeSet::new();
    for k in 0..PREBUILD_TASKS {
        let mine = compiled_variants(&run.join(format!("prebuild/shard-{k}")));
        assert!(!mine.is_empty(), "prebuild task {k} compiled nothing");
        for v in mine {
            assert!(union.insert(v.clone()), "{v:?} compiled by two tasks");
        }
    }
    assert_eq!(union, every_variant);
    assert_eq!(cache_files(&run.join("cache")), every_cubin);
    eprintln!(
        "{} variants in {PREBUILD_TASKS} prebuild tasks, {} cubins in the shared cache; {:.1} s",
        union.len(),
        every_cubin.len(),
        t0.elapsed().as_secs_f64()
    );
}

/// tune-array.sh checks its input before it submits anything: a stand-in `sbatch` on PATH
/// records any call, and none comes.
#[test]
fn the_slurm_script_refuses_bad_input_before_submitting() {
    let t = tmp();
    let bin = t.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let calls = t.path().join("sbatch-calls");
    write_script(
        &bin.join("sbatch"),
        &format!("#!/bin/sh\necho \"$@\" >> '{}'\necho 1\n", calls.display()),
    );
    let path = path_with(&bin);
    let run = t.path().join("run");
    let run = run.to_str().unwrap();
    // (environment, arguments, what the one line of stderr says)
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a [&'a str], &'a str);
    let cases: &[Case] = &[
        (
            &[],
            &["0", run, "--op", "transpose"],
            "N must be a positive number",
        ),
        (
            &[],
            &["x", run, "--op", "transpose"],
            "N must be a positive number",
        ),
        (&[], &["2", run], "usage:"),
        (
            &[("STAGES", "merge,shards")],
            &["2", run, "--op", "transpose"],
            "STAGES must be",
        ),
        (
            &[("STAGES", "prebuild,shards,merge")],
            &["2", run, "--op", "transpose"],
            "needs TUNE_ARCH",
        ),
        (
            &[("STAGES", "prebuild"), ("TUNE_ARCH", "90")],
            &["2", run, "--op", "transpose"],
            "needs TUNE_ARCH",
        ),
        (
            &[
                ("STAGES", "prebuild"),
                ("TUNE_ARCH", "sm_90"),
                ("PREBUILD_TASKS", "0"),
            ],
            &["2", run, "--op", "transpose"],
            "PREBUILD_TASKS must be a positive number",
        ),
        (
            &[("STAGES", "merge"), ("ONLY", "1")],
            &["2", run],
            "STAGES=merge has none",
        ),
        (
            &[("TUNE_ROLE", "gpu")],
            &["2", run],
            "TUNE_ROLE must be prebuild, shard or merge",
        ),
        (
            &[],
            &["2", run, "--op", "transpose", "--out", "foo"],
            "TUNE_ARGS may not hold --out",
        ),
        (
            &[],
            &["2", run, "--op", "transpose", "--resume"],
            "TUNE_ARGS may not hold --resume",
        ),
        (
            &[("ONLY", "2")],
            &["2", run, "--op", "transpose"],
            "ONLY lists tasks of an array of 2",
        ),
        (
            &[("ONLY", "0,x")],
            &["2", run, "--op", "transpose"],
            "ONLY lists tasks of an array of 2",
        ),
        (
            &[
                ("STAGES", "prebuild,shards"),
                ("TUNE_ARCH", "sm_90"),
                ("PREBUILD_TASKS", "3"),
                ("ONLY", "1-3"),
            ],
            &["2", run, "--op", "transpose"],
            "ONLY lists tasks of an array of 3",
        ),
        // The prebuild adds --compile-only and --arch: in TUNE_ARGS the prebuild would get
        // them twice (tune refuses), and the GPU tasks would compile only, or for another
        // architecture than the prebuild's.
        (
            &[("STAGES", "prebuild,shards,merge"), ("TUNE_ARCH", "sm_90")],
            &["2", run, "--op", "transpose", "--arch", "sm_90"],
            "with the prebuild, TUNE_ARGS may not hold --arch: ",
        ),
        (
            &[("STAGES", "prebuild"), ("TUNE_ARCH", "sm_90")],
            &["2", run, "--op", "transpose", "--arch=sm_80"],
            "with the prebuild, TUNE_ARGS may not hold --arch: ",
        ),
        (
            &[("STAGES", "prebuild,shards"), ("TUNE_ARCH", "sm_90")],
            &["2", run, "--compile-only", "--op", "transpose"],
            "with the prebuild, TUNE_ARGS may not hold --compile-only: ",
        ),
        (
            &[
                ("STAGES", "prebuild,shards,merge"),
                ("TUNE_ARCH", "sm_90"),
                ("PREBUILD_TUNE_ARGS", "--budget 1000 --arch sm_90"),
            ],
            &["2", run, "--op", "transpose"],
            "PREBUILD_TUNE_ARGS may not hold --arch: ",
        ),
        (
            &[
                ("STAGES", "prebuild,shards,merge"),
                ("TUNE_ARCH", "sm_90"),
                ("PREBUILD_TUNE_ARGS", "--compile-only"),
            ],
            &["2", run, "--op", "transpose"],
            "PREBUILD_TUNE_ARGS may not hold --compile-only: ",
        ),
        (
            &[
                ("STAGES", "prebuild,shards,merge"),
                ("TUNE_ARCH", "sm_90"),
                ("PREBUILD_TUNE_ARGS", "--out=/x"),
            ],
            &["2", run, "--op", "transpose"],
            "PREBUILD_TUNE_ARGS may not hold --out: ",
        ),
    ];
    for (env, args, message) in cases {
        let mut cmd = tune_array_cmd(&path, args);
        cmd.env_remove("STAGES")
            .env_remove("TUNE_ARCH")
            .env_remove("ONLY")
            .env_remove("TUNE_ROLE")
            .env_remove("PREBUILD_TASKS")
            .env_remove("PREBUILD_TUNE_ARGS");
        for (k, v) in *env {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("bash runs");
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{env:?} {args:?}: {stderr}");
        assert!(stderr.contains(message), "{env:?} {args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        assert!(!calls.exists(), "{env:?} {args:?} submitted a job");
    }
    // The stand-in does record a submission that passes the checks (so the check above can
    // fail): a merge alone is one sbatch call.
    let out = tune_array_cmd(&path, &["2", run])
        .env("STAGES", "merge")
        .env_remove("ONLY")
        .env_remove("TUNE_ROLE")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let recorded = std::fs::read_to_string(&calls).unwrap();
    assert_eq!(recorded.lines().count(), 1, "{recorded}");
    assert!(recorded.contains("TUNE_ROLE=merge"), "{recorded}");
    assert!(!recorded.contains("--dependency"), "{recorded}");
    // A % in the run folder's name is no sbatch replacement symbol in the log's path.
    std::fs::remove_file(&calls).unwrap();
    let odd = t.path().join("run%x");
    let out = tune_array_cmd(&path, &["2", odd.to_str().unwrap(), "--op", "transpose"])
        .env("ONLY", "1")
        .env_remove("STAGES")
        .env_remove("TUNE_ROLE")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let recorded = std::fs::read_to_string(&calls).unwrap();
    assert!(
        recorded.contains("run%%x/logs/shard-%a-%A.out"),
        "{recorded}"
    );
    assert!(recorded.contains("--array=1 "), "{recorded}");
}

/// Serializes the tests that start a Slurm (each its own, on this machine's few cores).
static ONE_SLURM: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `scripts/gpu.sh slurm --no-gpu`, the GPU machine's Slurm run without its GPU part: Slurm
/// starts, the prebuild array fills the cache, an unsharded compile-only run finds every
/// source there, and the daemons are stopped.
#[test]
fn the_gpu_machine_slurm_run_works_up_to_the_gpu() {
    let name = "the_gpu_machine_slurm_run_works_up_to_the_gpu";
    let _one = ONE_SLURM.lock().unwrap_or_else(|e| e.into_inner());
    let t = tmp();
    // Only where a local Slurm can run at all (the script's own check, without starting it).
    let probe = Command::new("bash")
        .arg(repo("scripts/slurm-local.sh"))
        .arg("install")
        .output()
        .expect("bash runs");
    if probe.status.code() == Some(3) {
        skipped(
            name,
            &format!("no local Slurm here: {}", last_line(&probe.stderr)),
        );
        return;
    }
    let root = Command::new("id").arg("-u").output().expect("id runs");
    if text(&root.stdout).trim() != "0" {
        skipped(name, "no local Slurm here: a local Slurm needs root");
        return;
    }
    let exe = tune_exe();
    let out = Command::new("bash")
        .arg(repo("scripts/gpu.sh"))
        .args(["slurm", "--no-gpu"])
        .env("GPU_BIN", exe.parent().unwrap())
        .env("OUT", t.path())
        .env_remove("CUDA_AUTOTUNE_CACHE")
        .output()
        .expect("bash runs");
    let stdout = text(&out.stdout);
    eprint!("{stdout}");
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    let log = std::fs::read_to_string(t.path().join("slurm.log")).expect("$OUT/slurm.log");
    assert!(log.contains("prebuild (job 1): "), "{log}");
    assert_eq!(
        log.matches("=COMPLETED").count(),
        4,
        "4 prebuild tasks: {log}"
    );
    assert_eq!(
        log.lines()
            .filter(|l| l.starts_with(
                "compile-only for sm_90: 14 variants compiled (14 unique sources, 14 from cache)"
            ))
            .count(),
        4,
        "every shape's sources from the cache: {log}"
    );
    assert!(log.contains("every source of the sweep was in the prebuilt cache"));
    assert!(log.contains("slurm-local: stopped the daemons"), "{log}");
}

/// `scripts/gpu-slurm.sh compare`: the merged winners against the unsharded run's, on the
/// H100 run fixtures. A winner the unsharded run reports as tied is a tie, another one a
/// difference (exit 1), and the same configuration the same.
#[test]
fn the_gpu_machine_comparison_tells_same_winners_ties_and_differences() {
    let t = tmp();
    let unsharded = t.path().join("unsharded");
    let merged = t.path().join("merged");
    std::fs::create_dir_all(&unsharded).unwrap();
    std::fs::create_dir_all(&merged).unwrap();
    for e in std::fs::read_dir(repo("tests/fixtures/runs")).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, unsharded.join(p.file_name().unwrap())).unwrap();
    }
    let best = std::fs::read_to_string(unsharded.join("best.csv")).unwrap();
    let params_of = |shape: &str, pick: &dyn Fn(&cuda_autotune::store::record::Record) -> bool| {
        let csv = unsharded.join(format!("transpose_{shape}_nvidia-h100-80gb-hbm3.csv"));
        let r = read_run_csv(&csv)
            .unwrap()
            .into_iter()
            .find(|r| r.kind == cuda_autotune::store::record::Kind::Variant && pick(r))
            .expect("a matching row");
        r.params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(";")
    };
    let winner_of = |shape: &str| -> String {
        best.lines()
            .find(|l| l.starts_with(&format!("transpose,{shape},")))
            .unwrap()
            .split(',')
            .nth(5)
            .unwrap()
            .to_string()
    };
    // 1000x1000: a leader the confirmation found tied, not the winner.
    let tied = params_of("1000x1000", &|r| {
        r.confirm.is_some_and(|c| c.tied && !c.winner)
    });
    // 1000x3000: a variant that took no part in the confirmation.
    let other = params_of("1000x3000", &|r| {
        r.status == Status::Ok && r.confirm.is_none()
    });
    let with = |swaps: &[(&str, &str)]| {
        let mut csv = best.clone();
        for (shape, params) in swaps {
            csv = csv.replacen(
                &format!("{shape},f32,NVIDIA H100 80GB HBM3,9.0,{}", winner_of(shape)),
                &format!("{shape},f32,NVIDIA H100 80GB HBM3,9.0,{params}"),
                1,
            );
        }
        std::fs::write(merged.join("best.csv"), csv).unwrap();
        let out = Command::new("bash")
            .arg(repo("scripts/gpu-slurm.sh"))
            .arg("compare")
            .arg(&unsharded)
            .arg(&merged)
            .output()
            .expect("bash runs");
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    let rows = best.lines().count() - 1;
    let (code, stdout, stderr) = with(&[]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains(&format!(
            "winners: {rows} same, 0 reported ties, 0 different, 0 missing"
        )),
        "{stdout}"
    );

    let (code, stdout, stderr) = with(&[("1000x1000", &tied)]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("transpose 1000x1000 f32") && stdout.contains("tie: the merged winner"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "winners: {} same, 1 reported ties, 0 different",
            rows - 1
        )),
        "{stdout}"
    );

    let (code, stdout, stderr) = with(&[("1000x1000", &tied), ("1000x3000", &other)]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("transpose 1000x3000 f32") && stdout.contains("DIFFERENT: merged"),
        "{stdout}"
    );
    assert!(
        stdout.contains("its median in the unsharded run is +"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "winners: {} same, 1 reported ties, 1 different",
            rows - 2
        )),
        "{stdout}"
    );
}

/// A stand-in `sbatch` in `dir/bin`; returns a PATH with it first. It appends the arguments
/// of each job it takes as one line to `dir/sbatch-calls` and answers as `--parsable` does
/// (`ID;cluster`, IDs 101, 102, ...). With SBATCH_REQUIRES set it refuses, as a cluster
/// refuses a job without an account, every call that lacks that argument (sbatch's message,
/// exit 1). With SBATCH_RUN_TASK0 set it runs task 0 of each job it takes right away: the
/// script in the role that --export names, with SLURM_ARRAY_TASK_ID=0, its output in
/// `dir/task-ROLE.out`.
fn stand_in_sbatch(dir: &Path) -> String {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    write_script(
        &bin.join("sbatch"),
        &format!(
            r#"#!/usr/bin/env bash
set -u
dir='{}'
if [[ -n "${{SBATCH_REQUIRES:-}}" && " $* " != *" $SBATCH_REQUIRES "* ]]; then
    echo "sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified" >&2
    exit 1
fi
echo "$*" >>"$dir/sbatch-calls"
id=$((100 + $(wc -l <"$dir/sbatch-calls")))
if [[ -n "${{SBATCH_RUN_TASK0:-}}" ]]; then
    role=
    while (($#)) && [[ "$1" == -* ]]; do
        case "$1" in --export=*TUNE_ROLE=*) role=${{1##*TUNE_ROLE=}} ;; esac
        shift
    done
    TUNE_ROLE=$role SLURM_ARRAY_TASK_ID=0 bash "$@" >"$dir/task-$role.out" 2>&1
fi
echo "$id;cluster"
"#,
            dir.display()
        ),
    );
    path_with(&bin)
}

/// Writes `script` to `path` and makes it executable: a stand-in program for a test.
fn write_script(path: &Path, script: &str) {
    std::fs::write(path, script).unwrap();
    Command::new("chmod").arg("+x").arg(path).status().unwrap();
}

/// This process's PATH with `bin` first, so the stand-ins there are found before the real
/// programs.
fn path_with(bin: &Path) -> String {
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// `bash deploy/slurm/tune-array.sh args` with `path` as its PATH; the caller sets the rest of
/// its environment.
fn tune_array_cmd(path: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new("bash");
    cmd.arg(repo("deploy/slurm/tune-array.sh"))
        .args(args)
        .env("PATH", path);
    cmd
}

/// A stand-in `tune` in `dir`: it writes its arguments, one a line, to `dir/argv-ROLE`.
fn stand_in_tune(dir: &Path) -> PathBuf {
    let tune = dir.join("tune");
    write_script(
        &tune,
        &format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" >'{}/argv-'\"$TUNE_ROLE\"\n",
            dir.display()
        ),
    );
    tune
}

/// tune-array.sh with `env` and `args`, the stand-ins of `dir` on PATH, and nothing of the
/// caller's Slurm settings.
fn tune_array(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = tune_array_cmd(&stand_in_sbatch(dir), args);
    cmd.env("TUNE", stand_in_tune(dir));
    for k in [
        "STAGES",
        "TUNE_ARCH",
        "ONLY",
        "TUNE_ROLE",
        "PREBUILD_TASKS",
        "PREBUILD_ARGS",
        "PREBUILD_TUNE_ARGS",
        "SBATCH_ARGS",
        "MERGE_ARGS",
        "SBATCH_REQUIRES",
        "SBATCH_RUN_TASK0",
        "CUDA_AUTOTUNE_CACHE",
    ] {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("bash runs")
}

/// The arguments the stand-in tune got in `role`'s task 0, and what tune's parser makes of
/// them (as tune does before it starts).
fn task_argv(dir: &Path, role: &str) -> (Vec<String>, Result<Cli, String>) {
    let argv: Vec<String> = std::fs::read_to_string(dir.join(format!("argv-{role}")))
        .unwrap_or_else(|e| {
            let log = std::fs::read_to_string(dir.join(format!("task-{role}.out")));
            panic!("{role} task 0 ran no tune ({e}): {log:?}")
        })
        .lines()
        .map(String::from)
        .collect();
    let cli = Cli::try_parse_from(std::iter::once("tune".to_string()).chain(argv.clone()))
        .map_err(|e| e.to_string())
        .and_then(|cli| match cli.tune.options() {
            Ok(_) => Ok(cli),
            Err(e) => Err(e.to_string()),
        });
    (argv, cli)
}

/// PREBUILD_TUNE_ARGS gives the prebuild tasks other values than TUNE_ARGS gives every task
/// (a larger --budget, another --strategy): its options replace the same options of
/// TUNE_ARGS there, with their values, where tune would refuse an option given twice; the GPU
/// tasks keep TUNE_ARGS. Driven through a stand-in sbatch that runs task 0 of each stage.
#[test]
fn the_prebuild_tune_args_replace_the_same_options_of_tune_args() {
    let t = tmp();
    let dir = t.path();
    let run = dir.join("run");
    let run = run.to_str().unwrap();
    let sweep = [
        "--op",
        "transpose",
        "--shape",
        "64x64",
        "--strategy",
        "model",
    ];
    // (TUNE_ARGS after the sweep, PREBUILD_TUNE_ARGS, what the prebuild's tune gets after
    // the sweep's first 4 words and before --compile-only)
    type Case<'a> = (&'a [&'a str], &'a str, &'a [&'a str]);
    let cases: &[Case] = &[
        (
            &["--budget", "200", "--no-warm-start"],
            "--budget 1000 --no-warm-start",
            &["--strategy", "model", "--budget", "1000", "--no-warm-start"],
        ),
        (
            &["--budget=200"],
            "--budget=1000 --strategy exhaustive",
            &["--budget=1000", "--strategy", "exhaustive"],
        ),
        (
            &["--budget", "200"],
            "--strategy=exhaustive",
            &["--budget", "200", "--strategy=exhaustive"],
        ),
        (
            &["--budget", "200"],
            "",
            &["--strategy", "model", "--budget", "200"],
        ),
    ];
    for (tune_args, prebuild_tune_args, expected) in cases {
        let _ = std::fs::remove_file(dir.join("sbatch-calls"));
        let mut args = vec!["2", run];
        args.extend(sweep);
        args.extend(*tune_args);
        let out = tune_array(
            dir,
            &[
                ("STAGES", "prebuild,shards,merge"),
                ("TUNE_ARCH", "sm_90"),
                ("PREBUILD_TASKS", "3"),
                ("PREBUILD_TUNE_ARGS", prebuild_tune_args),
                ("SBATCH_RUN_TASK0", "1"),
            ],
            &args,
        );
        let what = format!("TUNE_ARGS {tune_args:?}, PREBUILD_TUNE_ARGS {prebuild_tune_args:?}");
        assert!(out.status.success(), "{what}: {}", text(&out.stderr));

        let (argv, cli) = task_argv(dir, "prebuild");
        let cli =
            cli.unwrap_or_else(|e| panic!("{what}: tune refuses the prebuild's {argv:?}: {e}"));
        let mut want: Vec<String> = sweep[..4].iter().map(|s| s.to_string()).collect();
        want.extend(expected.iter().map(|s| s.to_string()));
        let prebuild_dir = format!("{run}/prebuild/shard-0");
        want.extend(
            [
                "--compile-only",
                "--arch",
                "sm_90",
                "--shard",
                "0/3",
                "--out",
                &prebuild_dir,
            ]
            .map(String::from),
        );
        assert_eq!(argv, want, "{what}");
        assert!(cli.tune.compile_only, "{what}");
        assert_eq!(cli.tune.arch.as_deref(), Some("sm_90"), "{what}");

        // The GPU task keeps TUNE_ARGS as they are.
        let (argv, cli) = task_argv(dir, "shard");
        let cli = cli.unwrap_or_else(|e| panic!("{what}: tune refuses the shard's {argv:?}: {e}"));
        assert_eq!(cli.tune.budget.as_deref(), Some("200"), "{what}");
        assert_eq!(cli.tune.strategy, "model", "{what}");
        assert!(!cli.tune.compile_only && cli.tune.arch.is_none(), "{what}");
        let shard_dir = format!("{run}/shard-0");
        let mut want: Vec<String> = sweep.iter().map(|s| s.to_string()).collect();
        want.extend(tune_args.iter().map(|s| s.to_string()));
        want.extend(["--shard", "0/2", "--out", &shard_dir, "--resume"].map(String::from));
        assert_eq!(argv, want, "{what}");
    }

    // Without a prebuild, TUNE_ARGS may hold --arch: nothing adds another.
    let _ = std::fs::remove_file(dir.join("sbatch-calls"));
    let out = tune_array(
        dir,
        &[("SBATCH_RUN_TASK0", "1")],
        &[
            "2",
            run,
            "--op",
            "transpose",
            "--shape",
            "64x64",
            "--arch",
            "sm_90",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (argv, cli) = task_argv(dir, "shard");
    assert!(cli.is_ok(), "{argv:?}: {cli:?}", cli = cli.err());
}

/// The merge job gets the cluster's sbatch options (an account, a partition): MERGE_ARGS,
/// SBATCH_ARGS where MERGE_ARGS is not set. Where sbatch refuses a stage after earlier ones
/// were queued, one line names them and how to cancel them. The stand-in sbatch refuses, as
/// such a cluster does, every job without --account=lab.
#[test]
fn the_merge_gets_the_sbatch_options_and_a_refused_stage_names_what_was_queued() {
    let t = tmp();
    let dir = t.path();
    let run = dir.join("run");
    let run = run.to_str().unwrap();
    let args = ["2", run, "--op", "transpose"];
    let calls = dir.join("sbatch-calls");
    let submit = |env: &[(&str, &str)]| -> (Output, Vec<String>) {
        let _ = std::fs::remove_file(&calls);
        let mut all = vec![
            ("SBATCH_REQUIRES", "--account=lab"),
            ("STAGES", "prebuild,shards,merge"),
            ("TUNE_ARCH", "sm_90"),
        ];
        all.extend(env);
        let out = tune_array(dir, &all, &args);
        let calls = std::fs::read_to_string(&calls)
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect();
        (out, calls)
    };
    let merge_call = |calls: &[String]| -> String {
        calls
            .iter()
            .find(|c| c.contains("TUNE_ROLE=merge"))
            .cloned()
            .unwrap_or_else(|| panic!("no merge job: {calls:?}"))
    };

    // MERGE_ARGS unset: the merge gets SBATCH_ARGS.
    let (out, calls) = submit(&[
        ("PREBUILD_ARGS", "--account=lab --partition=cpu"),
        ("SBATCH_ARGS", "--account=lab --partition=gpu"),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert!(
        merge_call(&calls).contains(" --account=lab --partition=gpu "),
        "{calls:?}"
    );
    assert_eq!(
        job_ids(&text(&out.stdout)).keys().collect::<Vec<_>>(),
        ["merge", "prebuild", "shards"]
    );

    // MERGE_ARGS set: its own options only.
    let (out, calls) = submit(&[
        ("PREBUILD_ARGS", "--account=lab --partition=cpu"),
        ("SBATCH_ARGS", "--account=lab --partition=gpu"),
        ("MERGE_ARGS", "--account=lab --partition=short"),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let merge = merge_call(&calls);
    assert!(
        merge.contains(" --account=lab --partition=short ") && !merge.contains("gpu"),
        "{merge}"
    );

    // MERGE_ARGS set and empty: none, and this cluster refuses the merge after the prebuild
    // and the shards were queued.
    let (out, calls) = submit(&[
        ("PREBUILD_ARGS", "--account=lab"),
        ("SBATCH_ARGS", "--account=lab"),
        ("MERGE_ARGS", ""),
    ]);
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert_eq!(calls.len(), 2, "{calls:?}");
    let ids = job_ids(&stdout);
    assert_eq!(
        ids.keys().collect::<Vec<_>>(),
        ["prebuild", "shards"],
        "{stdout}"
    );
    let (p, s) = (&ids["prebuild"], &ids["shards"]);
    assert_eq!(
        stderr.lines().collect::<Vec<_>>(),
        [
            "sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified",
            &format!(
                "error: sbatch refused the merge job (its message above); already queued: \
                 prebuild job {p}, shards job {s}; cancel them with: scancel {p} {s}"
            ),
        ]
    );

    // The shards refused after the prebuild: the prebuild is named.
    let (out, calls) = submit(&[("PREBUILD_ARGS", "--account=lab")]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(calls.len(), 1, "{calls:?}");
    let p = &job_ids(&text(&out.stdout))["prebuild"];
    assert!(
        stderr.ends_with(&format!(
            "error: sbatch refused the shards job (its message above); already queued: \
             prebuild job {p}; cancel them with: scancel {p}\n"
        )),
        "{stderr}"
    );

    // The first stage refused: nothing to cancel.
    let (out, calls) = submit(&[("SBATCH_ARGS", "--account=lab")]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(calls.is_empty(), "{calls:?}");
    assert!(
        stderr.ends_with(
            "error: sbatch refused the prebuild job (its message above); nothing was queued\n"
        ),
        "{stderr}"
    );
    assert!(text(&out.stdout).is_empty(), "{}", text(&out.stdout));
}

/// `tune --help` recommends for Slurm what tune-array.sh does: a fixed N with an array of
/// 0..N-1, not SLURM_ARRAY_TASK_COUNT, which counts only the tasks of one submission (1 for
/// a task resubmitted alone) and is off by one for an array that starts at 1.
#[test]
fn the_shard_help_recommends_a_fixed_count_as_the_slurm_script_uses() {
    use clap::CommandFactory;
    let cmd = Cli::command();
    let shard = cmd
        .get_arguments()
        .find(|a| a.get_id() == "shard")
        .expect("tune --shard");
    let help = format!(
        "{} {}",
        shard.get_help().map(|h| h.to_string()).unwrap_or_default(),
        shard
            .get_long_help()
            .map(|h| h.to_string())
            .unwrap_or_default()
    );
    assert!(
        help.contains("$SLURM_ARRAY_TASK_ID/N with --array=0-(N-1)"),
        "{help}"
    );
    assert!(!help.contains("SLURM_ARRAY_TASK_COUNT"), "{help}");
    let script = std::fs::read_to_string(repo("deploy/slurm/tune-array.sh")).unwrap();
    assert!(script.contains("--shard \"$k/$n\""));
    assert!(script.contains("array=0-$(($1 - 1))"));
}
