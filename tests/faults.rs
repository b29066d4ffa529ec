//! No tuning run loses a measured result: a test-only op with planted faults
//! (tests/fixtures/faults) and real kills.
//!
//! * CPU (CI; needs NVRTC, and FAILS with what to do when it cannot be loaded):
//!   - a compile-only run of the `faults` op reports exactly the `compile_error` variants as
//!     failed, each with the compiler's message, and compiles every other variant;
//!   - `tune --compile-only --emit DIR` killed with SIGKILL at several moments never leaves a
//!     truncated source or a temporary file under a final name;
//!   - `files::write_atomic` never leaves a truncated destination, with leftover temporary
//!     files of a crashed writer present, when it fails before the rename, or while a reader
//!     reads the destination concurrently.
//! * GPU (skips with a note on stderr where there is no GPU): one tuning run of the `faults`
//!   op records every planted fault with its reason (compile error, illegal address, endless
//!   loop, wrong result, failed launch), keeps every good variant, picks a good one as best,
//!   ends in a time bounded by the watchdog, and writes all of it to the run CSV.
//!
//! Every run points `CUDA_AUTOTUNE_CACHE` (and the temporary folder of killed runs) at a
//! temporary folder, so nothing of the user's is read or written.

use clap::Parser;
use cuda_autotune::cli::Cli;
use cuda_autotune::measure::bench::{BenchSettings, CacheState};
use cuda_autotune::pipeline::options::{Isolation, TuneOptions};
use cuda_autotune::pipeline::tuner::tune;
use cuda_autotune::spec::ops::Op;
use cuda_autotune::store::files::write_atomic;
use cuda_autotune::store::record::{Kind, Record, Status};
use cuda_autotune::store::run_csv::read_run_csv;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tempfile::TempDir;

mod common;
use common::{count_before, skip, text, tmp, tune_exe};

/// The fixture folder holding faults.toml and faults.cu.tera: in the source tree this test
/// was built from, else (a test binary copied to another machine and run from the
/// repository's root) relative to the working folder.
fn fixtures() -> PathBuf {
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURES);
    if built.join("faults.toml").is_file() {
        built
    } else {
        PathBuf::from(FIXTURES)
    }
}

const FIXTURES: &str = "tests/fixtures/faults";

/// `tune` with its cubin cache, results and temporary folder inside `tmp`.
fn tune_cmd(tmp: &TempDir) -> std::process::Command {
    let work = tmp.path().join("tmp");
    std::fs::create_dir_all(&work).expect("a work folder");
    let mut cmd = std::process::Command::new(tune_exe());
    cmd.env("CUDA_AUTOTUNE_CACHE", tmp.path().join("cache"))
        .env_remove("XDG_CACHE_HOME")
        .env("TMPDIR", work)
        .arg("--out")
        .arg(tmp.path().join("results"));
    cmd
}

/// Fails the test, with what to do, when NVRTC could not be loaded: these tests must not
/// pass silently on a machine without it.
fn require_nvrtc(stderr: &str) {
    if stderr.contains("NVRTC is not available") {
        panic!(
            "NVRTC could not be loaded, so the fault tests cannot run. Run the tests with \
             scripts/test.sh (or `export LD_LIBRARY_PATH=$(scripts/nvrtc-env.sh)` first).\n{stderr}"
        );
    }
    assert!(
        !stderr.contains("panicked"),
        "the binary panicked:\n{stderr}"
    );
}

/// The values of a parameter of the fixture op, as the tuner renders them.
fn fixture_values(param: &str) -> Vec<String> {
    let op = Op::load("faults", Some(&fixtures())).expect("the faults fixture loads");
    let p = op
        .spec
        .params
        .iter()
        .find(|p| p.name == param)
        .unwrap_or_else(|| panic!("faults.toml has no parameter {param}"));
    p.default_values().iter().map(|v| v.to_string()).collect()
}

fn param<'a>(r: &'a Record, name: &str) -> &'a str {
    r.params
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
        .unwrap_or("")
}

/// What the error of a variant with this planted fault must contain (`None`: it must pass).
fn expected_failure(fault: &str) -> Option<&'static str> {
    match fault {
        "fine" => None,
        "compile_error" => Some("compile"),
        "out_of_bounds" => Some("context lost"),
        "endless_loop" => Some("watchdog"),
        "wrong_result" => Some("wrong result"),
        "too_many_threads" => Some("launching the kernel"),
        other => panic!("faults.toml has a FAULT value this test does not know: {other}"),
    }
}

// ---------------------------------------------------------------------------------------
// CPU: compile-only.
// ---------------------------------------------------------------------------------------

#[test]
fn compile_only_fails_exactly_the_compile_error_variants() {
    let tmp = tmp();
    let out = tune_cmd(&tmp)
        .args(["--op", "faults", "--templates"])
        .arg(fixtures())
        .args(["--shape", "256x256", "--compile-only"])
        .output()
        .expect("tune runs");
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    require_nvrtc(&stderr);
    let variants = fixture_values("VARIANT");
    let faults = fixture_values("FAULT");
    assert!(
        variants.len() >= 2,
        "want several good copies: {variants:?}"
    );
    assert!(faults.iter().any(|f| f == "compile_error"), "{faults:?}");
    let total = variants.len() * faults.len();
    let bad = variants.len();

    assert_eq!(
        out.status.code(),
        Some(1),
        "a compile failure under --compile-only exits 1:\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stderr.contains(&format!("{bad} variant(s) failed to compile")),
        "stderr:\n{stderr}"
    );
    let summary = stdout
        .lines()
        .find(|l| l.starts_with("compile-only for "))
        .unwrap_or_else(|| panic!("no compile-only summary on stdout:\n{stdout}"));
    assert_eq!(
        count_before(summary, " variants compiled"),
        total - bad,
        "every variant but the compile errors compiles: {summary}"
    );
    assert_eq!(count_before(summary, " failed"), bad, "{summary}");
    assert_eq!(count_before(summary, " pruned"), 0, "{summary}");

    // The FAILED lines name exactly the compile_error variants, each with NVRTC's message.
    let failed: BTreeMap<String, String> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("  FAILED "))
        .map(|l| {
            let (label, why) = l
                .split_once(": ")
                .unwrap_or_else(|| panic!("a FAILED line without a reason: {l}"));
            (label.to_string(), why.to_string())
        })
        .collect();
    let want: BTreeSet<String> = variants
        .iter()
        .map(|v| format!("VARIANT={v} FAULT=compile_error"))
        .collect();
    assert_eq!(
        failed.keys().cloned().collect::<BTreeSet<_>>(),
        want,
        "stdout:\n{stdout}"
    );
    for (label, why) in &failed {
        assert!(
            why.starts_with("compile: ") && why.contains("error"),
            "{label}: not a compiler message: {why}"
        );
        assert!(
            why.contains("this_identifier_is_not_declared_anywhere"),
            "{label}: the compiler message does not name the planted error: {why}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// CPU: atomic writes under a real kill.
// ---------------------------------------------------------------------------------------

/// `DIR/name` → content, for every entry of `dir` (a missing folder is empty).
fn read_dir_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return BTreeMap::new();
    };
    entries
        .map(|e| e.expect("a directory entry"))
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let bytes = std::fs::read(e.path())
                .unwrap_or_else(|err| panic!("cannot read {}: {err}", e.path().display()));
            (name, bytes)
        })
        .collect()
}

fn count_entries(dir: &Path) -> usize {
    std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0)
}

/// `transpose_2000x2000_f32_v0042.cu` (or `..._v10080.cu` past 9999): the final name of an
/// emitted source.
fn is_final_name(name: &str) -> bool {
    name.strip_prefix("transpose_2000x2000_f32_v")
        .and_then(|rest| rest.strip_suffix(".cu"))
        .is_some_and(|n| n.len() >= 4 && n.bytes().all(|b| b.is_ascii_digit()))
}

/// A compile-only run of some 640 transpose sources (the tile layout without the occupancy
/// cap), long enough to be killed at every moment below.
const EMIT_ARGS: [&str; 11] = [
    "--compile-only",
    "--strategy",
    "exhaustive",
    "--shape",
    "2000x2000",
    "--param",
    "LAYOUT=tile",
    "--param",
    "OCCUPANCY=0",
    "--no-cache",
    "--emit",
];

/// When to kill a run.
#[derive(Debug, Clone, Copy)]
enum KillAt {
    /// Once the emit folder holds this many entries (mid-emission).
    Entries(usize),
    /// This long after the start (emission done, compiling).
    After(Duration),
}

#[test]
fn emitted_sources_survive_kill_9() {
    // A finished run: the content every emitted file must have.
    let reference = tmp();
    let ref_dir = reference.path().join("gen");
    let out = tune_cmd(&reference)
        .args(EMIT_ARGS)
        .arg(&ref_dir)
        .output()
        .expect("tune runs");
    require_nvrtc(&text(&out.stderr));
    assert_eq!(
        out.status.code(),
        Some(0),
        "the reference run failed:\n{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let expected = read_dir_files(&ref_dir);
    assert!(expected.len() > 100, "too few sources: {}", expected.len());
    for (name, bytes) in &expected {
        assert!(
            is_final_name(name),
            "unexpected file {name} in a finished run"
        );
        assert!(
            text(bytes).trim_end().ends_with('}'),
            "{name} does not end with the template's last line"
        );
    }
    let n = expected.len();

    let moments = [
        KillAt::Entries(1),
        KillAt::Entries(n / 3),
        KillAt::Entries(2 * n / 3),
        KillAt::Entries(n - 5),
        KillAt::After(Duration::from_millis(200)),
        KillAt::After(Duration::from_millis(600)),
        KillAt::After(Duration::from_millis(1500)),
    ];
    for at in moments {
        let tmp = tmp();
        let dir = tmp.path().join("gen");
        let mut child = tune_cmd(&tmp)
            .args(EMIT_ARGS)
            .arg(&dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("tune starts");
        let start = Instant::now();
        let mut finished = None;
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                finished = Some(status);
                break;
            }
            let due = match at {
                KillAt::Entries(k) => count_entries(&dir) >= k,
                KillAt::After(d) => start.elapsed() >= d,
            };
            if due {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "{at:?}: the run neither finished nor reached the moment"
            );
            std::thread::sleep(Duration::from_micros(200));
        }
        let killed_after = start.elapsed();
        if finished.is_none() {
            child.kill().expect("SIGKILL"); // Child::kill sends SIGKILL on Unix
            let status = child.wait().expect("wait");
            if status.code().is_some() {
                finished = Some(status); // it finished just before the signal
            }
        }
        let found = read_dir_files(&dir);
        let (mut complete, mut temps) = (0, Vec::new());
        for (name, bytes) in &found {
            if is_final_name(name) {
                let want = expected
                    .get(name)
                    .unwrap_or_else(|| panic!("{at:?}: {name} is not a file of a finished run"));
                assert!(
                    bytes == want,
                    "{at:?}: {name} is incomplete or different ({} of {} bytes) after kill -9 \
                     at {killed_after:?}",
                    bytes.len(),
                    want.len()
                );
                complete += 1;
            } else {
                // Anything else must be recognizably temporary: hidden and ending in .tmp.
                assert!(
                    name.starts_with('.') && name.ends_with(".tmp"),
                    "{at:?}: {name} is neither a final source name nor a temporary file"
                );
                temps.push(name.clone());
            }
        }
        println!(
            "kill -9 {at:?} at {killed_after:?} ({}): {complete}/{n} sources complete, {} temporary file(s) left {temps:?}",
            match finished {
                Some(s) => format!("had already exited: {s}"),
                None => "killed".into(),
            },
            temps.len(),
        );
    }
}

#[test]
fn write_atomic_never_leaves_a_truncated_destination() {
    let tmp = tmp();
    let dir = tmp.path();
    let name = "results.csv";
    let dest = dir.join(name);
    let old: Vec<u8> = b"old,complete\n".repeat(1000);
    let new: Vec<u8> = b"new,complete,longer\n".repeat(3000);
    // The temporary name this process would use (src/results.rs), and one of another process.
    let own_tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let other_tmp = dir.join(format!(".{name}.999999999.tmp"));

    // 1. A crashed writer left half-written temporary files, one of them under the name this
    //    process uses: the destination still ends up complete.
    std::fs::write(&dest, &old).unwrap();
    std::fs::write(&own_tmp, &new[..new.len() / 2]).unwrap();
    std::fs::write(&other_tmp, &new[..10]).unwrap();
    write_atomic(&dest, &new).expect("write_atomic over leftovers");
    assert!(
        std::fs::read(&dest).unwrap() == new,
        "destination not complete"
    );
    assert!(
        std::fs::read(&other_tmp).unwrap() == new[..10],
        "another writer's temporary file is not ours to touch"
    );
    std::fs::remove_file(&other_tmp).unwrap();
    let _ = std::fs::remove_file(&own_tmp);

    // 2. A crash before the rename (here: the temporary file cannot be written because a
    //    folder is in its way): the destination keeps its old, complete content.
    std::fs::write(&dest, &old).unwrap();
    std::fs::create_dir(&own_tmp).unwrap();
    let r = write_atomic(&dest, &new);
    let now = std::fs::read(&dest).unwrap();
    match &r {
        Err(e) => assert!(now == old, "a failed write changed the destination: {e}"),
        // The temporary name is an implementation detail: when it differs, the write goes
        // through, and the destination must then be the new content, complete.
        Ok(()) => assert!(now == new, "destination neither old nor new"),
    }
    std::fs::remove_dir(&own_tmp).unwrap();

    // 3. The same with no destination yet: nothing appears under the final name.
    let fresh = dir.join("best.csv");
    let fresh_tmp = dir.join(format!(".best.csv.{}.tmp", std::process::id()));
    std::fs::create_dir(&fresh_tmp).unwrap();
    match write_atomic(&fresh, &new) {
        Err(_) => assert!(!fresh.exists(), "a failed write created the destination"),
        Ok(()) => assert!(std::fs::read(&fresh).unwrap() == new),
    }
    std::fs::remove_dir(&fresh_tmp).unwrap();

    // 4. A reader never sees anything but a whole old or a whole new file while it is
    //    replaced over and over (a truncate-and-write would show partial files here).
    let a: Vec<u8> = vec![b'a'; 1 << 20];
    let b: Vec<u8> = vec![b'b'; (1 << 20) + 4096];
    write_atomic(&dest, &a).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let mut reads = 0usize;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let seen = std::fs::read(&dest).expect("the destination always exists");
                assert!(
                    seen == a || seen == b,
                    "a reader saw a partial file of {} bytes",
                    seen.len()
                );
                reads += 1;
            }
            reads
        });
        for i in 0..200 {
            write_atomic(&dest, if i % 2 == 0 { &b } else { &a }).unwrap();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let reads = reader.join().expect("the reader saw only whole files");
        println!("{reads} reads during 200 replacements, each a whole file");
    });
    let left: Vec<String> = read_dir_files(dir)
        .into_keys()
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "temporary files left behind: {left:?}");
}

// ---------------------------------------------------------------------------------------
// GPU: every planted fault is recorded, the run goes on.
// ---------------------------------------------------------------------------------------

const WATCHDOG_S: f64 = 3.0;

/// The options of a plain `tune --shape 1x1` as the CLI makes them; the test then sets every
/// field it relies on, so fields added to [`TuneOptions`] later keep their CLI defaults.
fn options_from_defaults() -> TuneOptions {
    Cli::try_parse_from(["tune", "--shape", "1x1"])
        .expect("the CLI parses")
        .tune
        .options()
        .expect("the default options are valid")
}
/// Extra allowance of the first task of every fresh worker (src/worker.rs, task_limit).
const FIRST_TASK_ALLOWANCE_S: f64 = 60.0;

#[test]
fn every_planted_fault_is_recorded_and_the_run_goes_on() {
    if skip("every_planted_fault_is_recorded_and_the_run_goes_on") {
        return;
    }
    // A fresh results folder: no journal of an earlier run can be reused.
    let out = tmp();
    let mut opts = options_from_defaults();
    opts.op = "faults".into();
    opts.templates = Some(fixtures());
    opts.shape = "256x256".into();
    opts.params = vec![];
    opts.bench = BenchSettings {
        warmup: 1,
        reps: 3,
        cache: CacheState::Warm,
    };
    opts.out_dir = out.path().to_path_buf();
    opts.compile_only = false;
    opts.arch = None;
    opts.emit = None;
    opts.device = 0;
    opts.cubin_cache = false;
    opts.rtol = None;
    opts.seed = 7;
    opts.isolation = Isolation::Workers(tune_exe());
    opts.jobs = 4;
    opts.watchdog_s = WATCHDOG_S;
    opts.resume = false;
    opts.adaptive = false;
    let start = Instant::now();
    let o = tune(&opts).expect("a run with planted faults completes");
    let elapsed = start.elapsed().as_secs_f64();

    let variants = fixture_values("VARIANT");
    let faults = fixture_values("FAULT");
    let records: Vec<&Record> = o
        .records
        .iter()
        .filter(|r| r.kind == Kind::Variant)
        .collect();
    assert_eq!(records.len(), variants.len() * faults.len());
    let mut report = Vec::new();
    for r in &records {
        let fault = param(r, "FAULT");
        report.push(format!(
            "{} {}: {} {}",
            r.name,
            r.label(),
            r.status.as_str(),
            r.error
        ));
        match expected_failure(fault) {
            None => assert_eq!(r.status, Status::Ok, "{}: {}", r.label(), r.error),
            Some(why) => {
                assert_eq!(r.status, Status::Failed, "{}: {}", r.label(), r.error);
                assert!(
                    r.error.contains(why),
                    "{}: the error should say '{why}': {}",
                    r.label(),
                    r.error
                );
            }
        }
    }
    let best = &o.records[o.best.expect("a best variant")];
    assert_eq!(param(best, "FAULT"), "fine", "best: {}", best.label());

    // Each illegal address and each hang costs a worker; the last task may end the run
    // without a restart.
    let killers = records
        .iter()
        .filter(|r| matches!(param(r, "FAULT"), "out_of_bounds" | "endless_loop"))
        .count();
    assert!(
        o.context_restarts + 1 >= killers,
        "{} worker restarts for {killers} fatal variants",
        o.context_restarts
    );

    // Every hang is bounded by the watchdog (plus the first-task allowance when a hang is the
    // first task of a fresh worker); the rest is fast.
    let hangs = faults.iter().filter(|f| *f == "endless_loop").count() * variants.len();
    let bound = hangs as f64 * (WATCHDOG_S + FIRST_TASK_ALLOWANCE_S) + 60.0;
    println!(
        "faults run: {elapsed:.1} s (bound {bound:.0} s), {} worker restarts, best {}\n{}",
        o.context_restarts,
        best.label(),
        report.join("\n")
    );
    assert!(
        elapsed < bound,
        "the run took {elapsed:.1} s, over {bound:.0} s"
    );

    // The CSV on disk lists every variant with the same status and reason.
    let csv = o.csv_path.as_ref().expect("a run CSV");
    let back = read_run_csv(csv).expect("the run CSV reads back");
    assert_eq!(back.len(), o.records.len(), "{}", csv.display());
    for r in &records {
        let row = back
            .iter()
            .find(|b| b.kind == Kind::Variant && b.name == r.name)
            .unwrap_or_else(|| panic!("{} is missing from {}", r.name, csv.display()));
        assert_eq!(param(row, "FAULT"), param(r, "FAULT"), "{}", r.name);
        assert_eq!(param(row, "VARIANT"), param(r, "VARIANT"), "{}", r.name);
        assert_eq!(row.status, r.status, "{}", r.name);
        if let Some(why) = expected_failure(param(r, "FAULT")) {
            assert!(
                row.error.contains(why),
                "{} in the CSV: the error should say '{why}': {}",
                r.label(),
                row.error
            );
        }
    }
}
