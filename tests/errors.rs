//! Bad input and the messages about it, as a user without a GPU meets them, where a case needs
//! more than the table of tests/bad_input.rs (arguments, exit code, message): the exact text
//! of a long message, NVRTC's own list of architectures, warnings with line numbers, that
//! nothing is written, and that hints name only options the command takes.
//!
//! The `--arch` test asks NVRTC which architectures it compiles for and fails (it does not
//! skip) when NVRTC cannot be loaded: run with `export LD_LIBRARY_PATH=$(scripts/nvrtc-env.sh)`.
//! No test needs a GPU; the one about a machine without one skips where there is a GPU
//! (`common::has_gpu`).

use assert_cmd::Command;
use tempfile::TempDir;

mod common;
use common::{repo, skip_on_a_gpu, text, tmp, tune_cmd, tune_in};

/// Runs `cmd`, expects exit code `code` and exactly one `error: ...` line on stderr (no
/// panic, nothing else); returns that line.
fn one_error(cmd: &mut Command, code: i32) -> String {
    let out = cmd.output().expect("tune runs");
    let stderr = text(&out.stderr);
    assert!(
        !stderr.contains("panicked"),
        "the binary panicked:\n{stderr}"
    );
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one error line, got:\n{stderr}");
    assert!(lines[0].starts_with("error: "), "{stderr}");
    assert_eq!(out.status.code(), Some(code), "{stderr}");
    lines[0].to_string()
}

#[test]
fn report_on_the_tuning_database_is_bad_input() {
    let t = tmp();
    let db = repo("tests/fixtures/export/best.csv");
    let html = t.path().join("r.html");
    let line = one_error(
        tune_cmd(&t)
            .args(["report", "--csv"])
            .arg(&db)
            .arg("--output")
            .arg(&html),
        2,
    );
    assert!(
        line.contains("best.csv") && line.contains("not a run CSV"),
        "{line}"
    );
    assert!(!html.exists(), "no report is written");
}

/// `--param TILE_DIM=7` leaves no transpose configuration: bad input, said the same way with
/// and without `--compile-only` (so before any GPU is looked for), in one line of readable
/// length that names the parameter and the most frequent prune reason with its count.
#[test]
fn params_that_empty_the_space_are_bad_input_before_the_gpu_check() {
    let run = |extra: &[&str]| {
        let t = tmp();
        let line = one_error(
            tune_in(&t)
                .args(["--shape", "1000x1000", "--param", "TILE_DIM=7"])
                .args(extra),
            2,
        );
        assert!(
            !line.contains("GPU") && !line.contains("driver"),
            "{extra:?}: about the input, not the GPU: {line}"
        );
        line
    };
    let line = run(&[]);
    assert_eq!(
        run(&["--compile-only"]),
        line,
        "the same with --compile-only"
    );
    assert!(line.starts_with("error: 1000x1000: "), "{line}");
    assert!(line.contains("with --param TILE_DIM=7"), "{line}");
    assert!(
        line.contains("all 165888 configurations were pruned: 82944 × LAYOUT=slab holds"),
        "{line}"
    );
    // The rest are counted, not spelled out.
    assert!(line.ends_with("36864 × 8 other reason(s)"), "{line}");
    assert!(
        line.chars().count() <= 300,
        "{} characters: {line}",
        line.len()
    );
}

/// `--arch sm_50` (which this NVRTC does not compile for) is one error naming the
/// architectures it does, not a compile failure per variant.
#[test]
fn an_architecture_nvrtc_does_not_know_is_one_error() {
    for extra in [&["--compile-only"][..], &[]] {
        let t = tmp();
        let line = one_error(
            tune_in(&t)
                .args(["--shape", "64x64", "--arch", "sm_50"])
                .args(extra),
            2,
        );
        assert!(line.contains("invalid --arch sm_50: NVRTC"), "{line}");
        assert!(line.contains("sm_90"), "lists what it compiles for: {line}");
    }
}

/// A best.csv with `\r\n` line ends (as the tuner writes it) and lines 5 and 9 damaged: the
/// warnings name lines 5 and 9.
#[test]
fn database_warnings_name_the_files_own_line_numbers() {
    let t = tmp();
    let fixture = std::fs::read_to_string(repo("tests/fixtures/export/best.csv")).unwrap();
    let mut lines: Vec<String> = fixture.lines().map(str::to_string).collect();
    assert!(lines.len() >= 10, "the fixture has 10 lines");
    assert!(lines[8].contains(",cold,"), "{}", lines[8]);
    lines[4] = "garbage,1,2".into();
    lines[8] = lines[8].replacen(",cold,", ",lukewarm,", 1);
    let db = t.path().join("best.csv");
    std::fs::write(&db, lines.join("\r\n")).unwrap();
    let out = tune_cmd(&t)
        .args(["best", "--op", "transpose", "--shape", "1000x1000", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("warning: "))
        .collect();
    assert_eq!(warnings.len(), 2, "{stderr}");
    let at = |n: u32| format!("warning: {}:{n}: ", db.display());
    assert!(warnings[0].starts_with(&at(5)), "{stderr}");
    assert!(warnings[1].starts_with(&at(9)), "{stderr}");
    assert!(warnings[1].contains("lukewarm"), "{stderr}");
}

/// The long options of `tune check --help`.
fn check_options(t: &TempDir) -> Vec<String> {
    let out = tune_cmd(t).args(["check", "--help"]).output().unwrap();
    long_options(&text(&out.stdout))
}

fn long_options(s: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (at, _) in s.match_indices("--") {
        let name: String = s[at + 2..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        if !name.is_empty() && !found.contains(&name) {
            found.push(name);
        }
    }
    found
}

#[test]
fn tune_check_without_a_gpu_hints_only_at_its_own_options() {
    if skip_on_a_gpu("tune_check_without_a_gpu_hints_only_at_its_own_options") {
        return;
    }
    let t = tmp();
    let line = one_error(
        tune_cmd(&t)
            .args(["check", "--db"])
            .arg(repo("tests/fixtures/export/best.csv")),
        1,
    );
    assert!(line.contains("GPU"), "{line}");
    let accepted = check_options(&t);
    assert!(accepted.contains(&"device".to_string()), "{accepted:?}");
    for option in long_options(&line) {
        assert!(
            accepted.contains(&option),
            "the hint names --{option}, which tune check does not accept: {line}"
        );
    }
    assert!(!line.contains("--compile-only"), "{line}");
}

#[test]
fn every_subcommand_help_has_examples() {
    let t = tmp();
    for sub in ["best", "export", "report", "check", "merge", "params"] {
        let out = tune_cmd(&t).args([sub, "--help"]).output().unwrap();
        let help = text(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{sub}: {}", text(&out.stderr));
        assert!(help.contains("Examples:"), "tune {sub} --help:\n{help}");
        assert!(
            help.contains(&format!("tune {sub} ")),
            "tune {sub} --help shows the command:\n{help}"
        );
    }
}

#[test]
fn op_help_lists_every_built_in_op_and_the_watchdog_default_is_the_real_one() {
    let t = tmp();
    let out = tune_cmd(&t).arg("--help").output().unwrap();
    let help = text(&out.stdout);
    let op = help
        .split("--op <OP>")
        .nth(1)
        .and_then(|s| s.split("\n      --").next())
        .expect("--op in --help");
    for name in cuda_autotune::spec::ops::BUILTIN_OPS {
        assert!(op.contains(name), "--op help lacks {name}: {op}");
    }
    assert!(op.contains("sgemm"), "{op}");
    let watchdog = help
        .split("--watchdog <WATCHDOG>")
        .nth(1)
        .and_then(|s| s.split("\n      --").next())
        .expect("--watchdog in --help");
    let default = cuda_autotune::pipeline::options::TuneOptions::default().watchdog_s;
    assert_eq!(
        default,
        cuda_autotune::pipeline::options::DEFAULT_WATCHDOG_S
    );
    assert!(
        watchdog.contains(&format!("[default: {default}]")),
        "{watchdog}"
    );
}

/// The fixture database holds transpose 1024x1024 for f32, f16 and f64; `--dtype f16` prints
/// only the f16 row.
#[test]
fn tune_best_filters_by_dtype() {
    let t = tmp();
    let db = repo("tests/fixtures/db/best.csv");
    let best = |extra: &[&str]| {
        let out = tune_cmd(&t)
            .args(["best", "--op", "transpose", "--shape", "1024x1024", "--db"])
            .arg(&db)
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        // Each block starts with `transpose 1024x1024 <dtype> on <gpu>`.
        text(&out.stdout)
            .lines()
            .filter_map(|l| l.strip_prefix("transpose 1024x1024 "))
            .map(|l| l.split(' ').next().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let all = best(&[]);
    for d in ["f32", "f16", "f64"] {
        assert!(all.iter().any(|x| x == d), "{d} in {all:?}");
    }
    assert_eq!(best(&["--dtype", "f16"]), ["f16"]);
    assert_eq!(best(&["--dtype", "f64"]), ["f64"]);
    // A type never tuned at this shape: bad input naming the types that were.
    let line = one_error(
        tune_cmd(&t)
            .args([
                "best",
                "--op",
                "transpose",
                "--shape",
                "1000x3000",
                "--dtype",
                "f64",
                "--db",
            ])
            .arg(&db),
        2,
    );
    assert!(line.contains("never tuned for f64"), "{line}");
}
