//! Helpers shared by the integration tests (each test crate that uses them says `mod common;`
//! and imports the ones it needs).

// Every test crate compiles this module; each uses only some of the helpers.
#![allow(dead_code)]

use assert_cmd::Command;
use cuda_autotune::cuda::gpu::gpu_available;
use cuda_autotune::spec::ops::Op;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;
use tempfile::TempDir;

/// `--param NAME=value` for every transpose parameter whose spec names the value it had
/// before it existed (`missing`: VEC=1, TILES_PER_BLOCK=1, ASPECT=square, CACHE=default,
/// RUNS=tile). With them pinned, a test's space is the classic kernel's parameters it sets
/// itself, so its variant counts do not move when the op gains a parameter.
pub fn classic_transpose_pins() -> Vec<String> {
    classic_transpose_params()
        .into_iter()
        .flat_map(|p| ["--param".to_string(), p])
        .collect()
}

/// The same pins as `NAME=value` overrides (`TuneOptions::params`).
pub fn classic_transpose_params() -> Vec<String> {
    Op::load("transpose", None)
        .expect("the built-in transpose op")
        .assumed_params(&[])
}

/// A path inside the repository this test was built from.
pub fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// A fresh temporary folder, removed when dropped.
pub fn tmp() -> TempDir {
    tempfile::tempdir().expect("a temporary folder")
}

/// Process output as text (lossy: a test reads it, it never fails on it).
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The `tune` binary as cargo built it, with nothing set.
pub fn tune_bin() -> Command {
    Command::cargo_bin("tune").expect("the tune binary is built")
}

/// Runs `tune args` with its standard output closed before it writes (`tune ... | head`
/// after the reader left), to its end.
pub fn tune_with_stdout_closed<S: AsRef<std::ffi::OsStr>>(
    args: impl IntoIterator<Item = S>,
) -> Output {
    use std::process::Stdio;
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("tune"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tune starts");
    drop(child.stdout.take());
    child.wait_with_output().expect("tune runs")
}

/// The `tune` binary with its cubin cache in `tmp` and results in `tmp/results`, run from
/// the test's working folder.
pub fn tune(tmp: &TempDir) -> Command {
    let mut cmd = tune_bin();
    cmd.env("CUDA_AUTOTUNE_CACHE", tmp.path().join("cache"))
        .env_remove("XDG_CACHE_HOME")
        .arg("--out")
        .arg(tmp.path().join("results"));
    cmd
}

/// The `tune` binary with its cubin cache in `tmp`, run from `tmp` (relative paths in the
/// arguments resolve there).
pub fn tune_cmd(tmp: &TempDir) -> Command {
    let mut cmd = tune_bin();
    cmd.env("CUDA_AUTOTUNE_CACHE", tmp.path().join("cache"))
        .env_remove("XDG_CACHE_HOME")
        .current_dir(tmp.path());
    cmd
}

/// [`tune_cmd`] with results in `tmp/results`.
pub fn tune_in(tmp: &TempDir) -> Command {
    let mut cmd = tune_cmd(tmp);
    cmd.arg("--out").arg(tmp.path().join("results"));
    cmd
}

/// Runs `tune args` with its cubin cache in `tmp/cache`, from `tmp` (so what a run writes to
/// a relative default, such as `results/`, lands there), and returns what it printed.
pub fn tune_output(tmp: &Path, args: &[&str]) -> Output {
    tune_bin()
        .env("CUDA_AUTOTUNE_CACHE", tmp.join("cache"))
        .env_remove("XDG_CACHE_HOME")
        .current_dir(tmp)
        .args(args)
        .output()
        .expect("tune runs")
}

/// [`tune_output`] as (exit code, stdout, stderr).
pub fn tune_text(tmp: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = tune_output(tmp, args);
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

/// The `tune` binary for worker processes and subprocess runs: `$TUNE_EXE` where the test
/// binary was copied to another machine, else the one cargo built beside this test.
pub fn tune_exe() -> PathBuf {
    std::env::var_os("TUNE_EXE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_tune")))
}

/// The number written just before `label` in `line` (`"12 compiled"` → 12).
pub fn count_before(line: &str, label: &str) -> usize {
    let at = line
        .find(label)
        .unwrap_or_else(|| panic!("'{label}' not found in: {line}"));
    let word = line[..at]
        .rsplit(|c: char| c.is_whitespace() || c == '(')
        .find(|w| !w.is_empty())
        .unwrap_or_default();
    word.parse()
        .unwrap_or_else(|_| panic!("no count before '{label}' in: {line}"))
}

/// Whether this machine has a CUDA GPU: the library's own detector (a loadable driver that
/// reports at least one device), so the tests that need a GPU and the tests that need none
/// agree on which machine they are on, and agree with `tune`.
pub fn has_gpu() -> bool {
    static FOUND: OnceLock<bool> = OnceLock::new();
    *FOUND.get_or_init(gpu_available)
}

/// Writes `SKIPPED <name>: <why>` as one line on stderr, past the harness's capture so it
/// shows in every run. scripts/test.sh and scripts/gpu.sh count the tests that print it, so
/// every test that skips uses this form. The line goes out in one write, so the harness's
/// own lines from other threads cannot land inside it.
pub fn skipped(name: &str, why: &str) {
    let line = format!("SKIPPED {name}: {why}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
}

/// True (after one `SKIPPED` line) when there is no CUDA GPU here: a GPU test returns.
pub fn skip(name: &str) -> bool {
    if has_gpu() {
        return false;
    }
    skipped(name, "no CUDA GPU on this machine (run on the GPU machine)");
    true
}

/// True (after one `SKIPPED` line) when there is a CUDA GPU here: a test of what a user without
/// a GPU meets returns.
pub fn skip_on_a_gpu(name: &str) -> bool {
    if !has_gpu() {
        return false;
    }
    skipped(
        name,
        "this machine has a CUDA GPU (the test is about a machine without one)",
    );
    true
}

/// Compiles `args` with `tool` (gcc or g++) in `dir`, panicking with its output on failure.
pub fn cc(tool: &str, args: &[&str], dir: &Path) {
    let out = std::process::Command::new(tool)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{tool} is needed for this test: {e}"));
    assert!(
        out.status.success(),
        "{tool} {args:?} failed:\n{}",
        text(&out.stderr)
    );
}

/// Compiled images (`cubin/*.bin`) in the cubin cache folder `cache`.
pub fn cubin_count(cache: &Path) -> usize {
    std::fs::read_dir(cache.join("cubin"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.path().extension().is_some_and(|x| x == "bin"))
                .count()
        })
        .unwrap_or(0)
}

/// Waits until the cubin cache folder `cache` holds a compiled image (`cubin/*.bin`) while
/// `child` still runs, at most `limit`, then sends `child` one SIGINT: a compile-only run
/// interrupted with its compile pool busy. Returns when the signal was about to be sent.
pub fn interrupt_after_first_cubin(
    child: &mut std::process::Child,
    cache: &Path,
    limit: std::time::Duration,
) -> std::time::Instant {
    interrupt_when(
        child,
        limit,
        "compiled image (is NVRTC on LD_LIBRARY_PATH? scripts/nvrtc-env.sh)",
        || cubin_count(cache) > 0,
    )
}

/// Waits until `ready` says so while `child` still runs, at most `limit` (`what` names what it
/// waits for, in the failure message), then sends `child` one SIGINT: a run interrupted at
/// a chosen moment. Returns when the signal was about to be sent.
pub fn interrupt_when(
    child: &mut std::process::Child,
    limit: std::time::Duration,
    what: &str,
    ready: impl FnMut() -> bool,
) -> std::time::Instant {
    signal_when(child, limit, what, "INT", ready)
}

/// As [`interrupt_when`], with the signal `signal` (`kill -<signal>`: INT, TERM, HUP).
pub fn signal_when(
    child: &mut std::process::Child,
    limit: std::time::Duration,
    what: &str,
    signal: &str,
    mut ready: impl FnMut() -> bool,
) -> std::time::Instant {
    let started = std::time::Instant::now();
    while !ready() {
        assert!(started.elapsed() < limit, "no {what} in {limit:?}");
        assert!(
            child.try_wait().unwrap().is_none(),
            "tune ended before {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let signalled = std::time::Instant::now();
    let kill = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    signalled
}

/// The names of the entries directly under `dir`, sorted.
pub fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}
