//! Numeric options held to their domains, and `--compile-only` runs that tell the truth: a
//! spec whose kernel is not in the compiled image fails each variant naming the kernel, a
//! time budget ends the run within the budget plus the compiles under way, and the summary's
//! counts are those of the CSV the run writes (after Ctrl-C too, with no `--resume` hint, as a
//! compile-only run has nothing to resume). Also the compile worker's warm-up compile, which
//! leaves nothing behind.
//!
//! The compile tests need NVRTC and fail (they do not skip) when it cannot be loaded: run
//! them through scripts/test.sh, or with `export LD_LIBRARY_PATH=$(scripts/nvrtc-env.sh)`.
//! No test needs a GPU. Every run's cubin cache and results are in a temporary folder.

use cuda_autotune::store::record::{Record, Status};

use cuda_autotune::store::run_csv::read_run_csv;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

mod common;
use common::{cubin_count, interrupt_after_first_cubin, repo, signal_when, text, tmp, tune_cmd};

fn require_nvrtc() {
    assert!(
        cuda_autotune::cuda::compile::nvrtc_version().is_ok(),
        "NVRTC cannot be loaded: run the tests with scripts/test.sh (or `export \
         LD_LIBRARY_PATH=$(scripts/nvrtc-env.sh)` first)"
    );
}

// ---------------------------------------------------------------------------------------
// Numeric options
// ---------------------------------------------------------------------------------------

/// Every numeric option of `tune` and `tune check`, given a value outside its domain: exit
/// code 2 (clap's usage error, before anything runs), a first line `error: ...` that names
/// the option and says what the value must be, nothing on stdout, no panic.
#[test]
fn numeric_options_refuse_values_outside_their_domain() {
    const FINITE: &str = "must be a finite number, 0 or more";
    const SECONDS: &str = "must be a positive number of seconds, at most 86400";
    const AT_LEAST_ONE: &str = "must be at least 1";
    const NEGATIVE: &str = "must not be negative";
    let cases: &[(&[&str], &str, &str)] = &[
        // The regression gate of `tune check`.
        (&["check", "--margin", "nan"], "--margin", FINITE),
        (&["check", "--margin", "NaN"], "--margin", FINITE),
        (&["check", "--margin", "inf"], "--margin", FINITE),
        (&["check", "--margin", "-inf"], "--margin", FINITE),
        (&["check", "--margin", "-5"], "--margin", FINITE),
        (&["check", "--margin", "ten"], "--margin", "is not a number"),
        (&["check", "--reps", "0"], "--reps", AT_LEAST_ONE),
        (&["check", "--reps", "-1"], "--reps", AT_LEAST_ONE),
        (&["check", "--device", "-1"], "--device", NEGATIVE),
        // Tolerances.
        (&["--rtol", "-1"], "--rtol", FINITE),
        (&["--rtol", "nan"], "--rtol", FINITE),
        (&["--rtol", "inf"], "--rtol", FINITE),
        (&["--rtol", "1e-4x"], "--rtol", "is not a number"),
        // Counts.
        (&["--reps", "0"], "--reps", AT_LEAST_ONE),
        (&["--reps", "-3"], "--reps", AT_LEAST_ONE),
        (&["--reps", "2.5"], "--reps", "is not a whole number"),
        (&["--jobs", "0"], "--jobs", AT_LEAST_ONE),
        (&["--jobs", "-1"], "--jobs", AT_LEAST_ONE),
        (&["--warmup", "-1"], "--warmup", NEGATIVE),
        (&["--device", "-1"], "--device", NEGATIVE),
        (&["--seed", "-1"], "--seed", NEGATIVE),
        (&["--seed", "1e3"], "--seed", "is not a whole number"),
        (&["--top", "-1"], "--top", NEGATIVE),
        (&["--top", "x"], "--top", "is not a whole number"),
        (&["--confirm-rounds", "-1"], "--confirm-rounds", NEGATIVE),
        (
            &["--confirm-rounds", "1"],
            "--confirm-rounds",
            "must be 0 (no confirmation) or at least 2",
        ),
        (
            &["--confirm-rounds", "99999999999999999999999"],
            "--confirm-rounds",
            "must be at most",
        ),
        // Time limits.
        (&["--watchdog", "0"], "--watchdog", SECONDS),
        (&["--watchdog", "-1"], "--watchdog", SECONDS),
        (&["--watchdog", "nan"], "--watchdog", SECONDS),
        (&["--watchdog", "1e30"], "--watchdog", SECONDS),
        (
            &["--compile-timeout", "-1"],
            "--compile-timeout",
            "(0: no limit)",
        ),
        (
            &["--compile-timeout", "nan"],
            "--compile-timeout",
            "(0: no limit)",
        ),
        (
            &["--compile-timeout", "inf"],
            "--compile-timeout",
            "(0: no limit)",
        ),
        (
            &["--compile-timeout", "-inf"],
            "--compile-timeout",
            "(0: no limit)",
        ),
    ];
    let t = tmp();
    for (args, option, why) in cases {
        // A tuning run also gets a valid shape, so the bad number is the only fault.
        let mut cmd = tune_cmd(&t);
        if args[0] != "check" {
            cmd.args(["--shape", "64x64", "--compile-only"]);
        }
        let out = cmd.args(*args).output().expect("tune runs");
        let stderr = text(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?} panicked:\n{stderr}");
        assert_eq!(out.status.code(), Some(2), "{args:?}:\n{stderr}");
        assert!(out.stdout.is_empty(), "{args:?}: {}", text(&out.stdout));
        let first = stderr.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("error: ") && first.contains(option) && first.contains(why),
            "{args:?}: expected '{option}' and '{why}' in: {first}"
        );
        assert!(
            first.contains(&format!("'{}'", args[args.len() - 1])),
            "{first}"
        );
    }
}

/// The edges of the domains are accepted: each value parses (then `--help` ends the run
/// with exit code 0 before anything runs).
#[test]
fn numeric_options_accept_the_edges_of_their_domains() {
    let t = tmp();
    for args in [
        &["check", "--margin", "0", "--reps", "1", "--device", "0"][..],
        &["check", "--margin", "250.5"],
        &[
            "--rtol",
            "0",
            "--reps",
            "1",
            "--jobs",
            "1",
            "--warmup",
            "0",
            "--top",
            "0",
            "--confirm-rounds",
            "0",
            "--seed",
            "18446744073709551615",
        ],
        &["--compile-timeout", "0", "--watchdog", "86400"],
        &[
            "--compile-timeout",
            "0.01",
            "--watchdog",
            "0.5",
            "--rtol",
            "1e-4",
        ],
    ] {
        let out = tune_cmd(&t).args(args).arg("--help").output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}

// ---------------------------------------------------------------------------------------
// The kernel named by a spec must be in the compiled image
// ---------------------------------------------------------------------------------------

/// The kernels read from an NVRTC image are its entry points by the names a launch looks up:
/// an `extern "C"` kernel by its name, a C++ kernel by its mangled name, and no device
/// function.
#[test]
fn the_kernels_of_an_image_are_its_entry_points() {
    require_nvrtc();
    use cuda_autotune::cuda::compile::{check_kernels, kernel_names, Compiler};
    let source = r#"
extern "C" __device__ __noinline__ float twice(float x) { return 2.0f * x; }
extern "C" __global__ void scale(float* a) { a[threadIdx.x] = twice(a[threadIdx.x]); }
__global__ void cpp_kernel(float* a) { a[0] = 1.0f; }
"#;
    let image = Compiler::new("sm_90", None)
        .unwrap()
        .compile(source)
        .unwrap_or_else(|f| panic!("{}", f.log));
    let mut names = kernel_names(&image.cubin).unwrap();
    names.sort();
    assert_eq!(names, ["_Z10cpp_kernelPf", "scale"]);
    assert_eq!(check_kernels(&names, &["scale".to_string()]), Ok(()));
    let why = check_kernels(&names, &["scale".into(), "twice".into()]).unwrap_err();
    assert!(
        why.contains("no kernel 'twice'") && why.contains("_Z10cpp_kernelPf, scale"),
        "{why}"
    );
}

/// A copy of the vector_add example whose spec names `kernel` (the template defines
/// `vector_add`).
fn vector_add_naming(kernel: &str) -> tempfile::TempDir {
    let dir = tmp();
    let example = repo("examples/vector_add");
    let spec = std::fs::read_to_string(example.join("vector_add.toml")).unwrap();
    let line = "kernel = \"vector_add\"";
    assert!(spec.contains(line), "the example's kernel line changed");
    std::fs::write(
        dir.path().join("vector_add.toml"),
        spec.replacen(line, &format!("kernel = \"{kernel}\""), 1),
    )
    .unwrap();
    std::fs::copy(
        example.join("vector_add.cu.tera"),
        dir.path().join("vector_add.cu.tera"),
    )
    .unwrap();
    dir
}

/// The one run CSV in `dir`.
fn the_csv(dir: &Path) -> (PathBuf, Vec<Record>) {
    let csvs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "csv"))
        .collect();
    assert_eq!(csvs.len(), 1, "{csvs:?}");
    let records = read_run_csv(&csvs[0]).unwrap();
    (csvs[0].clone(), records)
}

/// A spec whose kernel (`vector_addx`) is not a kernel of its template: every variant
/// compiles, but each is a failure whose reason names the kernel and the ones the image
/// defines, in the summary and in the CSV; the exit code is 1 (a compile failure). The same
/// sources with the right name pass, read back from the cubin cache (the check holds for
/// cached images and for both compile paths: in this process and in the worker pool).
#[test]
fn a_spec_whose_kernel_is_not_in_the_image_fails_every_variant_naming_it() {
    require_nvrtc();
    let t = tmp();
    let six_variants = [
        "--shape", "1000", "--param", "BLOCK=64", "--param", "ITEMS=1",
    ];
    let run = |spec: &Path, jobs: &str, out: &str| -> Output {
        tune_cmd(&t)
            .arg("--spec")
            .arg(spec)
            .args(six_variants)
            .args(["--compile-only", "--arch", "sm_90", "--jobs", jobs])
            .args(["--out", out])
            .output()
            .unwrap()
    };
    let wrong = vector_add_naming("vector_addx");
    let out = run(wrong.path(), "1", "wrong");
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    let line = summary_line(&stdout);
    assert_eq!(count(line, " variants compiled"), 0, "{line}");
    assert_eq!(count(line, " failed"), 6, "{line}");
    let failed: Vec<&str> = stdout.lines().filter(|l| l.contains("FAILED")).collect();
    assert_eq!(failed.len(), 6, "{stdout}");
    for l in failed {
        assert!(
            l.contains("no kernel 'vector_addx' in the compiled image (it defines vector_add"),
            "{l}"
        );
    }
    let (_, records) = the_csv(&t.path().join("wrong"));
    assert_eq!(records.len(), 6);
    assert!(
        records
            .iter()
            .all(|r| r.status == Status::Failed && r.error.contains("'vector_addx'")),
        "{records:?}"
    );
    let right = vector_add_naming("vector_add");
    let out = run(right.path(), "2", "right");
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let line = summary_line(&stdout);
    assert_eq!(count(line, " variants compiled"), 6, "{line}");
    assert_eq!(count(line, " from cache"), 6, "{line}");
}

// ---------------------------------------------------------------------------------------
// The compile worker
// ---------------------------------------------------------------------------------------

/// `tune __compile-worker sm_90 CACHE` given `input` on stdin, run to its end.
fn compile_worker(cache: &Path, input: &str) -> Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tune"))
        .args(["__compile-worker", "sm_90"])
        .arg(cache)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// A compile worker compiles a warm-up kernel of its own before it reads a source, and that
/// compile leaves no trace: with no source it ends with nothing written (no reply, no
/// message, nothing in the cubin cache); given one source it answers that source alone,
/// compiled by NVRTC, and the cache then holds that one image.
#[test]
fn a_compile_worker_warms_up_without_touching_the_cache() {
    use cuda_autotune::isolate::compile_pool::CompileReply;
    require_nvrtc();
    let t = tmp();
    let cache = t.path().join("cache");
    std::fs::create_dir(&cache).unwrap();
    let out = compile_worker(&cache, "");
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert_eq!((stdout.as_str(), stderr.as_str()), ("", ""));
    let entries: Vec<_> = std::fs::read_dir(&cache).unwrap().collect();
    assert!(entries.is_empty(), "the warm-up wrote {entries:?}");

    let source = t.path().join("s0000.cu");
    std::fs::write(
        &source,
        "extern \"C\" __global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }\n",
    )
    .unwrap();
    let out = compile_worker(&cache, &format!("{}\n", source.display()));
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let replies: Vec<CompileReply> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(replies.len(), 1, "{stdout}");
    assert!(replies[0].ok && !replies[0].from_cache, "{:?}", replies[0]);
    assert!(source.with_extension("cubin").is_file());
    assert_eq!(common::cubin_count(&cache), 1);
}

// ---------------------------------------------------------------------------------------
// Budgets and summaries
// ---------------------------------------------------------------------------------------

/// The first line of a compile-only report.
fn summary_line(stdout: &str) -> &str {
    stdout
        .lines()
        .find(|l| l.starts_with("compile-only for "))
        .unwrap_or_else(|| panic!("no compile-only summary:\n{stdout}"))
}

/// The count written before `label` in `line`, 0 when the line does not mention it (the
/// summary leaves out the counts that are 0, but for compiled, failed and pruned).
fn count(line: &str, label: &str) -> usize {
    if line.contains(label) {
        common::count_before(line, label)
    } else {
        0
    }
}

/// How many records have `status`.
fn with(records: &[Record], status: Status) -> usize {
    records.iter().filter(|r| r.status == status).count()
}

/// The summary's counts are the CSV's: compiled = ok rows, failed = failed rows, not proposed
/// = skipped rows, and the not-compiled counts (interrupted, past the time limit, not started
/// within the budget) add up to the not_run rows. The search line's proposals are every row
/// the search reached. Returns the summary line.
fn summary_agrees_with_csv<'a>(stdout: &'a str, records: &[Record]) -> &'a str {
    let line = summary_line(stdout);
    assert_eq!(
        count(line, " variants compiled"),
        with(records, Status::Ok),
        "{line}"
    );
    assert_eq!(
        count(line, " failed"),
        with(records, Status::Failed),
        "{line}"
    );
    assert_eq!(
        count(line, " not proposed"),
        with(records, Status::Skipped),
        "{line}"
    );
    let not_compiled = count(line, " not compiled (interrupted)")
        + count(line, " past the compile time limit")
        + count(line, " not started within the time budget");
    assert_eq!(not_compiled, with(records, Status::NotRun), "{line}");
    let search = stdout
        .lines()
        .find(|l| l.starts_with("Search: "))
        .unwrap_or_else(|| panic!("no search line:\n{stdout}"));
    let proposed: usize = search
        .split(": ")
        .nth(2)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no proposal count in: {search}"));
    assert!(
        search.contains(" valid configurations proposed ("),
        "{search}"
    );
    assert_eq!(
        proposed,
        records.len() - with(records, Status::Skipped),
        "every proposal has its row: {search}\n{line}"
    );
    line
}

/// The seconds of the compile phase, from `... in S s` at the end of the summary line.
fn compile_seconds(line: &str) -> f64 {
    line.rsplit(" in ")
        .next()
        .and_then(|s| s.strip_suffix(" s"))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no time in: {line}"))
}

/// An exhaustive sweep cut by `--budget` says it takes the first configurations in the
/// space's order, not that it times them all.
#[test]
fn an_exhaustive_sweep_with_a_budget_says_what_it_takes() {
    require_nvrtc();
    let t = tmp();
    let out = tune_cmd(&t)
        .args(["--op", "transpose", "--shape", "64x64", "--compile-only"])
        .args([
            "--strategy",
            "exhaustive",
            "--budget",
            "3",
            "--out",
            "results",
        ])
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(
            "searching with exhaustive (budget 3 variants); in the space's order; without \
             --budget it times them all"
        ),
        "{stderr}"
    );
    let (_, records) = the_csv(&t.path().join("results"));
    assert_eq!(with(&records, Status::Ok), 3);
}

/// `--compile-only --budget 3s` over a space of 9168 valid configurations that takes minutes
/// to compile whole: the run stops proposing when the 3 s are spent, abandons what is queued
/// and not started, and returns once the compiles under way finish; its compile phase lasts
/// at most the budget plus the longest compile (and a second for the bookkeeping). The
/// summary and the CSV agree, and the CSV has a row for every valid configuration.
#[test]
fn a_time_budget_ends_a_compile_only_run_within_the_budget_plus_the_compiles_under_way() {
    require_nvrtc();
    let t = tmp();
    let started = Instant::now();
    let out = tune_cmd(&t)
        .args([
            "--op",
            "transpose",
            "--shape",
            "8191x8191",
            "--compile-only",
        ])
        .args([
            "--arch",
            "sm_90",
            "--budget",
            "3s",
            "--no-cache",
            "--jobs",
            "2",
        ])
        .args(["--out", "results"])
        .output()
        .unwrap();
    let wall = started.elapsed();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(wall < Duration::from_secs(30), "{wall:?}:\n{stdout}");
    let (path, records) = the_csv(&t.path().join("results"));
    assert!(
        path.ends_with("transpose_8191x8191_sm-90-compile-only.csv"),
        "{}",
        path.display()
    );
    assert!(
        stdout.contains("Results: results/transpose_8191x8191_sm-90-compile-only.csv"),
        "{stdout}"
    );
    assert_eq!(records.len(), 9168, "a row for every valid configuration");
    let line = summary_agrees_with_csv(&stdout, &records);
    assert!(
        line.contains("in ") && stdout.contains("(budget 3 s,"),
        "{stdout}"
    );
    assert!(
        with(&records, Status::Skipped) > 900,
        "the budget, not the space, ended the run: {line}"
    );
    let longest_s = records
        .iter()
        .filter_map(|r| r.compile_ms)
        .fold(0.0, f64::max)
        / 1e3;
    let took = compile_seconds(line);
    assert!(
        took <= 3.0 + longest_s + 1.0,
        "compiling took {took} s, more than the 3 s budget plus the longest compile \
         ({longest_s:.2} s):\n{stdout}"
    );
    // What was abandoned says why; nothing is a failure for having been left out.
    for r in records.iter().filter(|r| r.status == Status::NotRun) {
        let why = r.reason();
        assert!(
            why.contains("--budget time ran out") || why.contains("compile time limit"),
            "{}: {why}",
            r.name
        );
    }
    assert_eq!(with(&records, Status::Failed), 0, "{line}");
}

/// A compile-only random search of `budget` transposes at `shape` on two compile workers,
/// started in `dir` (its cubin cache in `dir/cache`, results in `dir/results`), its output
/// piped.
fn spawn_random_compiles(dir: &Path, shape: &str, budget: &str) -> std::process::Child {
    use std::process::Stdio;
    std::process::Command::new(env!("CARGO_BIN_EXE_tune"))
        .env("CUDA_AUTOTUNE_CACHE", dir.join("cache"))
        .env_remove("XDG_CACHE_HOME")
        .current_dir(dir)
        .args(["--op", "transpose", "--shape", shape, "--compile-only"])
        .args([
            "--arch",
            "sm_90",
            "--strategy",
            "random",
            "--budget",
            budget,
        ])
        .args(["--jobs", "2", "--out", "results"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A batch system's stop (Slurm at the time limit) sends SIGTERM to every process of the job.
/// The parent decides what a stop means (it finishes the variant in flight); a worker ignores
/// it, so no variant it has in hand is recorded as failed for a signal meant for the run.
/// Here only the workers are sent it, mid-compile: the run goes on and fails nothing.
#[test]
fn a_stop_signal_sent_to_the_workers_fails_no_variant() {
    require_nvrtc();
    let t = tmp();
    let cache = t.path().join("cache");
    let mut child = spawn_random_compiles(t.path(), "1000x1000", "24");
    let pid = child.id();
    let children = || {
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_string)
            .collect::<Vec<String>>()
    };
    // Once the workers compile (a cubin is in the cache), each worker, twice.
    let started = std::time::Instant::now();
    while cubin_count(&cache) == 0 || children().is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no compiled image"
        );
        assert!(child.try_wait().unwrap().is_none(), "tune ended first");
        std::thread::sleep(Duration::from_millis(10));
    }
    for signal in ["-TERM", "-HUP"] {
        let _ = std::process::Command::new("kill")
            .arg(signal)
            .args(children())
            .status();
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    let (_, records) = the_csv(&t.path().join("results"));
    let failed: Vec<&Record> = records
        .iter()
        .filter(|r| r.status == Status::Failed)
        .collect();
    assert!(failed.is_empty(), "failed by the signal: {:?}", failed[0]);
    summary_agrees_with_csv(&stdout, &records);
}

/// A prebuild shares the GPU run's arguments: `--gpus` is left unused (said once) and the
/// sweep compiles; its summary says what each shape compiled, not that nothing verified.
#[test]
fn a_compile_only_sweep_leaves_gpus_unused_and_sums_up_its_compiles() {
    require_nvrtc();
    let t = tmp();
    std::fs::write(t.path().join("shapes.txt"), "64x64\n96x96\n").unwrap();
    let out = tune_cmd(&t)
        .args([
            "--op",
            "transpose",
            "--shapes",
            "shapes.txt",
            "--compile-only",
        ])
        .args(["--arch", "sm_90", "--strategy", "random", "--budget", "3"])
        .args(["--gpus", "0,1", "--out", "results"])
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert_eq!(
        stderr.matches("--gpus 0,1 is left unused").count(),
        1,
        "{stderr}"
    );
    for shape in ["64x64", "96x96"] {
        let row = stdout
            .lines()
            .find(|l| l.trim_start().starts_with(shape) && l.contains("compile-only"))
            .unwrap_or_else(|| panic!("no summary row for {shape}: {stdout}"));
        assert!(
            row.contains("(compile-only: 3 compiled, 0 failed)"),
            "{row}"
        );
    }
}

/// A stop ends a sweep of many shapes even when each shape fails at once (here every
/// configuration is pruned), so no shape's own run sees it: exit 130, the rest not started.
#[test]
fn a_stop_ends_a_sweep_whose_shapes_fail_at_once() {
    use std::io::BufRead;
    use std::process::Stdio;
    let t = tmp();
    let shapes: String = (0..200)
        .map(|i| format!("{}x1001\n", 1003 + 2 * i))
        .collect();
    let file = t.path().join("shapes.txt");
    std::fs::write(&file, shapes).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tune"))
        .env("CUDA_AUTOTUNE_CACHE", t.path().join("cache"))
        .current_dir(t.path())
        .args(["--op", "transpose", "--compile-only", "--arch", "sm_90"])
        .arg("--shapes")
        .arg(&file)
        .args(["--param", "BOUNDS=none", "--out", "results"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut started = 0;
        for line in std::io::BufReader::new(stdout).lines() {
            if line.unwrap().starts_with("==== ") {
                started += 1;
                let _ = tx.send(());
            }
        }
        started
    });
    // The first shape has started (its error is on the way): then the stop.
    rx.recv_timeout(Duration::from_secs(60))
        .expect("a first shape");
    signal_when(&mut child, Duration::from_secs(1), "", "TERM", || true);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the sweep went on after the stop");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(130));
    let started = reader.join().unwrap();
    assert!(
        started < 20,
        "{started} of 200 shapes started after the stop"
    );
}

/// Ctrl-C while a compile-only search compiles: the summary's counts agree with the CSV
/// (whose search line says how many it proposed, not that all compiled), the exit code is
/// 130, and the hint is to run the same command again (the cubin cache holds what compiled),
/// not a `--resume` that would do nothing.
#[test]
fn after_ctrl_c_a_compile_only_summary_agrees_with_its_csv_and_offers_no_resume() {
    require_nvrtc();
    let t = tmp();
    let cache = t.path().join("cache");
    let mut child = spawn_random_compiles(t.path(), "8191x8191", "200");
    interrupt_after_first_cubin(&mut child, &cache, Duration::from_secs(60));
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(130), "{stdout}{stderr}");
    let (_, records) = the_csv(&t.path().join("results"));
    let line = summary_agrees_with_csv(&stdout, &records);
    assert!(count(line, " variants compiled") >= 1, "{line}");
    assert!(!stderr.contains("--resume"), "{stderr}");
    assert!(
        stderr.contains("the same command again compiles only the rest"),
        "{stderr}"
    );
}

/// What the code may use follows the compile target: a split-K sgemm tile (a thread block
/// cluster) compiles for sm_90 and is pruned for sm_80, the error naming why; the help says
/// so, and that `--jobs 1` compiles with no time limit.
#[test]
fn the_compile_target_decides_what_code_may_use() {
    require_nvrtc();
    let help = text(&common::tune_bin().arg("--help").output().unwrap().stdout);
    let flat = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("thread block clusters from sm_90, cp.async from sm_80"),
        "{help}"
    );
    assert!(
        flat.contains("With --jobs 1 compiles run in this process and no limit"),
        "{help}"
    );
    let dir = tmp();
    let tile = "BM=64 BN=128 BK=16 TM=8 TN=8 WARP_N=4 VEC=4 PAD=4 STAGES=2 LOAD=async \
                BOUNDS=specialized REPACK=0 WINDOWS=0 ORDER=snakek B_ELEMS=0 GROUP_M=8 \
                OCCUPANCY=0 CSTORE=scalar KSPLIT=1 SPLITK=2 TAIL=0";
    let run = |arch: &str| {
        let mut cmd = tune_cmd(&dir);
        cmd.args(["--op", "sgemm", "--shape", "512x512x1024", "--compile-only"]);
        cmd.args(["--arch", arch]);
        for p in tile.split_whitespace() {
            cmd.args(["-p", p]);
        }
        cmd.output().unwrap()
    };
    let ok = run("sm_90");
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok.stderr));
    assert!(
        text(&ok.stdout).contains("1 variants compiled"),
        "{}",
        text(&ok.stdout)
    );
    let pruned = run("sm_80");
    let stderr = text(&pruned.stderr);
    assert_eq!(pruned.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("thread block clusters (SPLITK > 1, TAIL=1) need compute capability 9.0"),
        "{stderr}"
    );
}
