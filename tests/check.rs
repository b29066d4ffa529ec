//! `tune check` with a mocked GPU: the re-timing of stored configurations is replaced by
//! recorded times (the only GPU work `tune check` does), while everything it decides (which
//! rows, the margin rule, the messages, pass or fail) runs as in the binary. `command` maps
//! `report`'s verdict to the exit code: all passed → 0, any failure → 1, an error → its own
//! code (2 for input the user can fix).

use cuda_autotune::check::{run, CheckOptions, Retimer};
use cuda_autotune::error::Result;
use cuda_autotune::store::best::{upsert_best, BestRow};
use std::collections::HashMap;
use std::path::Path;

const GPU: &str = "NVIDIA H100 80GB HBM3";

/// Times per stored configuration (`NAME=value;...`); a configuration with an `Err` no longer
/// verifies; one not listed fails as a mock would never be asked for it.
struct Recorded {
    gpu: String,
    times: HashMap<String, std::result::Result<f64, String>>,
    asked: Vec<String>,
}

impl Recorded {
    fn new(times: &[(&str, std::result::Result<f64, &str>)]) -> Recorded {
        Recorded {
            gpu: GPU.into(),
            times: times
                .iter()
                .map(|(p, t)| (p.to_string(), t.map_err(str::to_string)))
                .collect(),
            asked: Vec::new(),
        }
    }
}

impl Retimer for Recorded {
    fn gpu_name(&mut self) -> Result<String> {
        Ok(self.gpu.clone())
    }

    fn retime(&mut self, row: &BestRow, params: &str) -> std::result::Result<f64, String> {
        self.asked
            .push(format!("{} {} {params}", row.op, row.shape));
        self.times
            .get(params)
            .cloned()
            .unwrap_or_else(|| panic!("the mock was not given {params}"))
    }
}

fn row(shape: &str, params: &str, ms: f64, runner_up: &str, gpu: &str) -> BestRow {
    BestRow {
        op: "transpose".into(),
        shape: shape.into(),
        dtype: "f32".into(),
        gpu: gpu.into(),
        compute_capability: "9.0".into(),
        params: params.into(),
        median_ms: ms,
        throughput: 1000.0,
        unit: "GB/s".into(),
        frac_of_roof: Some(0.97),
        roof: "copy_vec4".into(),
        cache: "cold".into(),
        reps: 30,
        tool_version: env!("CARGO_PKG_VERSION").into(),
        driver: "580.159.04".into(),
        nvrtc: "13.0".into(),
        tuned_at: "2025-01-01T00:00:00Z".into(),
        gpu_uuid: String::new(),
        source_hash: String::new(),
        runner_up: runner_up.into(),
        margin_pct: None,
        margin_ci_low_pct: None,
        margin_ci_high_pct: None,
        tie: false,
    }
}

/// A best.csv of three H100 winners (two with a runner-up) and one row of another GPU.
fn db(dir: &Path) -> CheckOptions {
    let path = dir.join("best.csv");
    for r in [
        row(
            "1000x1000",
            "TILE_DIM=64;BLOCK_ROWS=16",
            0.0076,
            "TILE_DIM=32;BLOCK_ROWS=8",
            GPU,
        ),
        row("4096x4096", "TILE_DIM=32;BLOCK_ROWS=8", 0.1016, "", GPU),
        row(
            "8192x8192",
            "TILE_DIM=64;BLOCK_ROWS=4",
            0.1900,
            "TILE_DIM=64;BLOCK_ROWS=8",
            GPU,
        ),
        row(
            "1000x1000",
            "TILE_DIM=16;BLOCK_ROWS=4",
            0.0090,
            "",
            "NVIDIA H200",
        ),
    ] {
        upsert_best(&path, r, false).unwrap();
    }
    CheckOptions {
        db: path,
        op: None,
        shape: None,
        margin_pct: 10.0,
        device: 0,
        reps: 30,
        worker_exe: None,
        templates: None,
    }
}

/// `tune check` on recorded times: what it prints and its exit code, mapped as `main` maps
/// `check::command`'s result.
fn check(opts: &CheckOptions, mock: &mut Recorded) -> (String, i32) {
    match run(opts, mock) {
        Ok((text, passed)) => (text, if passed { 0 } else { 1 }),
        Err(e) => (format!("error: {e}\n"), e.exit_code()),
    }
}

#[test]
fn every_winner_within_the_margin_exits_0() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = db(tmp.path());
    let mut mock = Recorded::new(&[
        ("TILE_DIM=64;BLOCK_ROWS=16", Ok(0.0081)), // 6.6 % slower: within 10 %
        ("TILE_DIM=32;BLOCK_ROWS=8", Ok(0.0950)),  // faster than stored (and a runner-up)
        ("TILE_DIM=64;BLOCK_ROWS=4", Ok(0.1890)),
        ("TILE_DIM=64;BLOCK_ROWS=8", Ok(0.1920)),
    ]);
    let (text, code) = check(&opts, &mut mock);
    assert_eq!(code, 0, "{text}");
    assert_eq!(
        text.lines().filter(|l| l.starts_with("PASS ")).count(),
        3,
        "{text}"
    );
    assert!(
        text.ends_with("3 checked, 0 failed (margin 10%)\n"),
        "{text}"
    );
    // Only this GPU's rows; each winner and its runner-up re-timed once.
    assert!(!text.contains("TILE_DIM=16"), "{text}");
    assert_eq!(mock.asked.len(), 5, "{:?}", mock.asked);
}

#[test]
fn a_winner_slower_than_stored_by_more_than_the_margin_exits_1() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = db(tmp.path());
    let mut mock = Recorded::new(&[
        ("TILE_DIM=64;BLOCK_ROWS=16", Ok(0.0076)),
        ("TILE_DIM=32;BLOCK_ROWS=8", Ok(0.1220)), // 20.1 % slower than the stored 0.1016 ms
        ("TILE_DIM=64;BLOCK_ROWS=4", Ok(0.1900)),
        ("TILE_DIM=64;BLOCK_ROWS=8", Ok(0.1900)),
    ]);
    let (text, code) = check(&opts, &mut mock);
    assert_eq!(code, 1, "{text}");
    let fail: Vec<&str> = text.lines().filter(|l| l.starts_with("FAIL ")).collect();
    assert_eq!(
        fail,
        [
            "FAIL transpose 4096x4096 TILE_DIM=32 BLOCK_ROWS=8: now 0.1220 ms, 20.1% slower \
             than the stored 0.1016 ms (margin 10%)"
        ],
        "{text}"
    );
    assert!(
        text.ends_with("3 checked, 1 failed (margin 10%)\n"),
        "{text}"
    );
    // A wider margin lets it pass.
    let wide = CheckOptions {
        margin_pct: 25.0,
        ..opts
    };
    assert_eq!(check(&wide, &mut mock).1, 0);
}

#[test]
fn a_winner_now_slower_than_its_runner_up_exits_1() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = db(tmp.path());
    let mut mock = Recorded::new(&[
        ("TILE_DIM=64;BLOCK_ROWS=16", Ok(0.0076)),
        ("TILE_DIM=32;BLOCK_ROWS=8", Ok(0.0060)), // the runner-up is now 27 % faster
        ("TILE_DIM=64;BLOCK_ROWS=4", Ok(0.1900)),
        ("TILE_DIM=64;BLOCK_ROWS=8", Ok(0.1900)),
    ]);
    let (text, code) = check(&opts, &mut mock);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(
            "FAIL transpose 1000x1000 TILE_DIM=64 BLOCK_ROWS=16: now 0.0076 ms, 26.7% slower \
             than its runner-up TILE_DIM=32 BLOCK_ROWS=8 (0.0060 ms)"
        ),
        "{text}"
    );
}

#[test]
fn a_winner_that_no_longer_verifies_exits_1() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = CheckOptions {
        shape: Some("8192x8192".into()),
        ..db(tmp.path())
    };
    let mut mock = Recorded::new(&[
        (
            "TILE_DIM=64;BLOCK_ROWS=4",
            Err("wrong result: 1024 of 67108864 elements differ"),
        ),
        ("TILE_DIM=64;BLOCK_ROWS=8", Ok(0.1900)),
    ]);
    let (text, code) = check(&opts, &mut mock);
    assert_eq!(code, 1, "{text}");
    assert_eq!(
        text,
        "FAIL transpose 8192x8192 TILE_DIM=64 BLOCK_ROWS=4: no longer verifies or runs: \
         wrong result: 1024 of 67108864 elements differ\n1 checked, 1 failed (margin 10%)\n"
    );
}

#[test]
fn nothing_to_check_is_bad_input_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let mut mock = Recorded::new(&[]);
    // A shape no GPU has a winner for: said before the GPU is asked for its name, with the
    // shapes that are stored.
    let opts = CheckOptions {
        shape: Some("123x456".into()),
        ..db(tmp.path())
    };
    mock.gpu = "never asked".into();
    let (text, code) = check(&opts, &mut mock);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains(
            "holds no stored winner for shape 123x456 (stored shapes: 1000x1000, 4096x4096, \
             8192x8192)"
        ),
        "{text}"
    );
    // So is an op that is not stored.
    let nosuch = CheckOptions {
        op: Some("nosuch".into()),
        ..db(tmp.path())
    };
    let (text, code) = check(&nosuch, &mut mock);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("holds no stored winner for op nosuch (stored ops: transpose)"),
        "{text}"
    );
    // A shape stored for another GPU only: no stored winner of this GPU for the filter.
    let h100_only = CheckOptions {
        shape: Some("4096x4096".into()),
        ..db(tmp.path())
    };
    mock.gpu = "NVIDIA H200".into();
    let (text, code) = check(&h100_only, &mut mock);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("holds no stored winner for NVIDIA H200, shape 4096x4096"),
        "{text}"
    );
    // No database at all: said without asking the GPU.
    let missing = CheckOptions {
        db: tmp.path().join("nothing.csv"),
        ..opts
    };
    mock.gpu = "never asked".into();
    let (text, code) = check(&missing, &mut mock);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("holds no stored winners (missing or empty)"),
        "{text}"
    );
    assert!(mock.asked.is_empty());
}

/// The binary itself on a missing database: exit 2 and one error line, no GPU needed.
#[test]
fn the_binary_rejects_a_missing_database() {
    let tmp = tempfile::tempdir().unwrap();
    let out = assert_cmd::Command::cargo_bin("tune")
        .unwrap()
        .args(["check", "--db"])
        .arg(tmp.path().join("best.csv"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with("error: ") && stderr.contains("holds no stored winners"),
        "{stderr}"
    );
}

/// `check` re-times stored winners: it has no search, so the search options of `tune` are
/// usage errors here rather than options that silently do nothing.
#[test]
fn search_options_are_not_check_options() {
    for args in [["--strategy", "anneal"], ["--budget", "100"]] {
        let out = assert_cmd::Command::cargo_bin("tune")
            .unwrap()
            .arg("check")
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("unexpected argument"), "{stderr}");
    }
}
