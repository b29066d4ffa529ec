//! `tune check` with a mocked GPU: the re-timing of stored configurations is replaced by
//! recorded runs (the only GPU work `tune check` does), while everything it decides (which
//! rows, the margins from measured noise, the messages, pass or fail) runs as in the binary.
//! `command` maps `report`'s verdict to the exit code: all passed → 0, any failure → 1, an
//! error → its own code (2 for input the user can fix).

use cuda_autotune::check::{run, CheckOptions, Retimer, Timing};
use cuda_autotune::cuda::compile::source_key;
use cuda_autotune::error::Result;
use cuda_autotune::pipeline::options::Isolation;
use cuda_autotune::store::best::{upsert_best, BestRow, Keep};
use std::collections::HashMap;
use std::path::Path;

const GPU: &str = "NVIDIA H100 80GB HBM3";

/// A run's median (ms) and the spread of its launches (%), over 30 launches.
fn t(median_ms: f64, spread_pct: f64) -> Timing {
    Timing {
        median_ms,
        spread_pct,
        samples: 30,
    }
}

/// Runs per stored configuration, keyed `SHAPE NAME=value;...`: the runs in turn (the last
/// one repeats), or why it no longer verifies; one not listed fails as a mock would never be
/// asked for it.
struct Recorded {
    gpu: String,
    runs: HashMap<String, std::result::Result<Vec<Timing>, String>>,
    asked: Vec<String>,
}

impl Recorded {
    fn new(runs: &[(&str, std::result::Result<Vec<Timing>, &str>)]) -> Recorded {
        Recorded {
            gpu: GPU.into(),
            runs: runs
                .iter()
                .map(|(p, t)| (p.to_string(), t.clone().map_err(str::to_string)))
                .collect(),
            asked: Vec::new(),
        }
    }
}

impl Retimer for Recorded {
    fn gpu_name(&mut self) -> Result<String> {
        Ok(self.gpu.clone())
    }

    fn retime(&mut self, row: &BestRow, params: &str) -> std::result::Result<Timing, String> {
        let key = format!("{} {params}", row.shape);
        let round = self.asked.iter().filter(|k| **k == key).count();
        self.asked.push(key.clone());
        let runs = self
            .runs
            .get(&key)
            .cloned()
            .unwrap_or_else(|| panic!("the mock was not given {key}"))?;
        Ok(runs[round.min(runs.len() - 1)])
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
        tied_with: String::new(),
        num_sms: None,
        arch: String::new(),
    }
}

/// A best.csv of three H100 winners (two with a runner-up) and one row of another GPU: a
/// 7.6 µs transpose and two of 0.1-0.2 ms.
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
        upsert_best(&path, r, Keep::Newest).unwrap();
    }
    CheckOptions {
        db: path,
        op: None,
        shape: None,
        margin_pct: None,
        rounds: 3,
        device: 0,
        reps: 30,
        isolation: Isolation::InProcess,
        templates: None,
        progress: false,
    }
}

/// `tune check` on recorded runs: what it prints and its exit code, mapped as `main` maps
/// `check::command`'s result.
fn check(opts: &CheckOptions, mock: &mut Recorded) -> (String, i32) {
    match run(opts, mock) {
        Ok((text, passed)) => (text, if passed { 0 } else { 1 }),
        Err(e) => (format!("error: {e}\n"), e.exit_code()),
    }
}

/// Runs of the stored configurations as the H100 times them: the 7.6 µs winner 9 % slower
/// than stored, its launches spread 10 %; the others within 3 %, spread 1-2 %.
fn today() -> Vec<(&'static str, std::result::Result<Vec<Timing>, &'static str>)> {
    vec![
        (
            "1000x1000 TILE_DIM=64;BLOCK_ROWS=16",
            Ok(vec![t(0.0083, 10.0)]),
        ),
        (
            "1000x1000 TILE_DIM=32;BLOCK_ROWS=8",
            Ok(vec![t(0.0095, 10.0)]),
        ),
        (
            "4096x4096 TILE_DIM=32;BLOCK_ROWS=8",
            Ok(vec![t(0.1040, 2.0)]),
        ),
        (
            "8192x8192 TILE_DIM=64;BLOCK_ROWS=4",
            Ok(vec![t(0.1920, 1.0)]),
        ),
        (
            "8192x8192 TILE_DIM=64;BLOCK_ROWS=8",
            Ok(vec![t(0.1930, 1.0)]),
        ),
    ]
}

/// `today()` with one configuration's runs replaced.
fn today_but(key: &'static str, runs: std::result::Result<Vec<Timing>, &'static str>) -> Recorded {
    let mut all = today();
    all.iter_mut().find(|(k, _)| *k == key).unwrap().1 = runs;
    Recorded::new(&all)
}

#[test]
fn every_winner_within_its_noise_margin_exits_0() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = db(tmp.path());
    let mut mock = Recorded::new(&today());
    let (text, code) = check(&opts, &mut mock);
    assert_eq!(code, 0, "{text}");
    // The noisy µs row is allowed its 9 %; the quiet ones get margins near the 3 % floor.
    assert_eq!(
        text.lines().collect::<Vec<_>>(),
        [
            "PASS transpose 1000x1000 TILE_DIM=64 BLOCK_ROWS=16: stored 0.0076 ms, now 0.0083 ms \
             (margin 12.3% from measured noise); runner-up 0.0095 ms (margin 10.7% from \
             measured noise)",
            "PASS transpose 4096x4096 TILE_DIM=32 BLOCK_ROWS=8: stored 0.1016 ms, now 0.1040 ms \
             (margin 4.9% from measured noise)",
            "PASS transpose 8192x8192 TILE_DIM=64 BLOCK_ROWS=4: stored 0.1900 ms, now 0.1920 ms \
             (margin 3.9% from measured noise); runner-up 0.1930 ms (margin 3.8% from measured \
             noise)",
            "3 checked, 0 failed (margins from measured noise, 3.8..12.3%)",
        ],
        "{text}"
    );
    // Only this GPU's rows; each winner and its runner-up re-timed 3 times, alternating.
    assert!(!text.contains("TILE_DIM=16"), "{text}");
    assert_eq!(mock.asked.len(), 15, "{:?}", mock.asked);
    assert_eq!(
        mock.asked[..6],
        [
            "1000x1000 TILE_DIM=64;BLOCK_ROWS=16",
            "1000x1000 TILE_DIM=32;BLOCK_ROWS=8",
            "1000x1000 TILE_DIM=64;BLOCK_ROWS=16",
            "1000x1000 TILE_DIM=32;BLOCK_ROWS=8",
            "1000x1000 TILE_DIM=64;BLOCK_ROWS=16",
            "1000x1000 TILE_DIM=32;BLOCK_ROWS=8",
        ]
    );
}

/// A 15 % regression fails both a noisy µs row (launches spread 10 %) and a quiet one.
#[test]
fn a_15_percent_regression_exits_1_on_noisy_and_quiet_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = db(tmp.path());
    for (key, runs, want) in [
        (
            "1000x1000 TILE_DIM=64;BLOCK_ROWS=16",
            vec![t(0.0076 * 1.15, 10.0)],
            "FAIL transpose 1000x1000 TILE_DIM=64 BLOCK_ROWS=16: now 0.0087 ms, 15.0% slower \
             than the stored 0.0076 ms (margin 12.3% from measured noise)",
        ),
        (
            "8192x8192 TILE_DIM=64;BLOCK_ROWS=4",
            vec![t(0.19 * 1.15, 1.0)],
            "FAIL transpose 8192x8192 TILE_DIM=64 BLOCK_ROWS=4: now 0.2185 ms, 15.0% slower \
             than the stored 0.1900 ms (margin 3.9% from measured noise)",
        ),
        (
            "4096x4096 TILE_DIM=32;BLOCK_ROWS=8",
            vec![t(0.1016 * 1.15, 2.0)],
            "FAIL transpose 4096x4096 TILE_DIM=32 BLOCK_ROWS=8: now 0.1168 ms, 15.0% slower \
             than the stored 0.1016 ms (margin 4.9% from measured noise)",
        ),
    ] {
        let (text, code) = check(&opts, &mut today_but(key, Ok(runs)));
        assert_eq!(code, 1, "{text}");
        let fail: Vec<&str> = text.lines().filter(|l| l.starts_with("FAIL ")).collect();
        assert_eq!(fail, [want], "{text}");
        assert!(
            text.contains("3 checked, 1 failed (margins from measured noise, "),
            "{text}"
        );
    }
}

/// A winner now faster than stored by more than its margin passes, and its line says so (the
/// stored time misstates the kernel); one faster within its margin says nothing more.
#[test]
fn a_winner_faster_than_stored_beyond_its_margin_passes_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = db(tmp.path());
    let (text, code) = check(
        &opts,
        &mut today_but(
            "4096x4096 TILE_DIM=32;BLOCK_ROWS=8",
            Ok(vec![t(0.0800, 2.0)]),
        ),
    );
    assert_eq!(code, 0, "{text}");
    let line = text
        .lines()
        .find(|l| l.contains("4096x4096"))
        .unwrap_or_default();
    assert_eq!(
        line,
        "PASS transpose 4096x4096 TILE_DIM=32 BLOCK_ROWS=8: stored 0.1016 ms, now 0.0800 ms \
         (margin 4.9% from measured noise); 21.3% faster than stored, beyond the margin: a \
         re-tune stores today's time",
        "{text}"
    );
    // 3 % faster: within the 4.9 % margin.
    let (text, _) = check(
        &opts,
        &mut today_but(
            "4096x4096 TILE_DIM=32;BLOCK_ROWS=8",
            Ok(vec![t(0.0986, 2.0)]),
        ),
    );
    assert!(!text.contains("faster than stored"), "{text}");
    assert!(
        text.ends_with("3 checked, 0 failed (margins from measured noise, 3.8..12.3%)\n"),
        "{text}"
    );
}

/// What is noise for one row is a regression for another: 9 % slower passes the 7.6 µs row
/// (above) but fails the 4096x4096 one, whose launches spread 2 %.
#[test]
fn each_row_is_judged_by_its_own_noise() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = db(tmp.path());
    let mut mock = today_but(
        "4096x4096 TILE_DIM=32;BLOCK_ROWS=8",
        Ok(vec![t(0.1016 * 1.09, 2.0)]),
    );
    let (text, code) = check(&opts, &mut mock);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("PASS transpose 1000x1000"), "{text}");
    assert!(
        text.contains("9.0% slower than the stored 0.1016 ms (margin 4.9% from measured noise)"),
        "{text}"
    );
}

/// `--margin` fixes one margin for every row, as given; the summary says so.
#[test]
fn a_given_margin_overrides_the_measured_noise() {
    let tmp = tempfile::tempdir().unwrap();
    let five = CheckOptions {
        margin_pct: Some(5.0),
        ..db(tmp.path())
    };
    let (text, code) = check(&five, &mut Recorded::new(&today()));
    assert_eq!(code, 1, "{text}");
    let fail: Vec<&str> = text.lines().filter(|l| l.starts_with("FAIL ")).collect();
    assert_eq!(
        fail,
        [
            "FAIL transpose 1000x1000 TILE_DIM=64 BLOCK_ROWS=16: now 0.0083 ms, 9.2% slower \
             than the stored 0.0076 ms (margin 5%)"
        ],
        "{text}"
    );
    assert!(
        text.contains(
            "PASS transpose 4096x4096 TILE_DIM=32 BLOCK_ROWS=8: stored 0.1016 ms, now 0.1040 ms \
             (margin 5%)\n"
        ),
        "{text}"
    );
    assert!(
        text.ends_with("3 checked, 1 failed (margin 5%)\n"),
        "{text}"
    );
    // A wider margin lets it pass; so would 15 % for a regression of 15 %.
    let wide = CheckOptions {
        margin_pct: Some(25.0),
        ..five
    };
    let (text, code) = check(&wide, &mut Recorded::new(&today()));
    assert_eq!(code, 0, "{text}");
    assert!(
        text.ends_with("3 checked, 0 failed (margin 25%)\n"),
        "{text}"
    );
}

/// The median of the runs is compared: one slow run of three (a clock dip, a busy GPU) is no
/// failure; with a single run it would be.
#[test]
fn one_slow_run_of_three_does_not_fail() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = db(tmp.path());
    let runs = vec![t(0.0095, 10.0), t(0.0077, 10.0), t(0.0078, 10.0)];
    let key = "1000x1000 TILE_DIM=64;BLOCK_ROWS=16";
    let (text, code) = check(&opts, &mut today_but(key, Ok(runs.clone())));
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("stored 0.0076 ms, now 0.0078 ms"), "{text}");
    let once = CheckOptions { rounds: 1, ..opts };
    let (text, code) = check(&once, &mut today_but(key, Ok(runs)));
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("25.0% slower than the stored 0.0076 ms"),
        "{text}"
    );
}

#[test]
fn a_winner_now_slower_than_its_runner_up_exits_1() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = db(tmp.path());
    let mut mock = today_but(
        "1000x1000 TILE_DIM=32;BLOCK_ROWS=8", // the runner-up is now 27 % faster
        Ok(vec![t(0.0060, 10.0)]),
    );
    mock.runs.insert(
        "1000x1000 TILE_DIM=64;BLOCK_ROWS=16".into(),
        Ok(vec![t(0.0076, 10.0)]),
    );
    let (text, code) = check(&opts, &mut mock);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(
            "FAIL transpose 1000x1000 TILE_DIM=64 BLOCK_ROWS=16: now 0.0076 ms, 26.7% slower \
             than its runner-up TILE_DIM=32 BLOCK_ROWS=8 (0.0060 ms; margin 10.7% from measured \
             noise)"
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
    let mut mock = today_but(
        "8192x8192 TILE_DIM=64;BLOCK_ROWS=4",
        Err("wrong result: 1024 of 67108864 elements differ"),
    );
    let (text, code) = check(&opts, &mut mock);
    assert_eq!(code, 1, "{text}");
    assert_eq!(
        text,
        "FAIL transpose 8192x8192 TILE_DIM=64 BLOCK_ROWS=4: no longer verifies or runs: \
         wrong result: 1024 of 67108864 elements differ\n1 checked, 1 failed (margins from \
         measured noise)\n"
    );
    // Not timed again once it failed, and its runner-up not at all.
    assert_eq!(mock.asked, ["8192x8192 TILE_DIM=64;BLOCK_ROWS=4"]);
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
        text.contains("holds no stored winners (no such file)"),
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

/// `--rounds` is at least 1: 0 is bad input, exit 2, before any database or GPU is read.
#[test]
fn zero_rounds_is_bad_input() {
    let out = assert_cmd::Command::cargo_bin("tune")
        .unwrap()
        .args(["check", "--rounds", "0", "--db", "/nonexistent/best.csv"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("invalid value '0' for '--rounds <ROUNDS>': must be at least 1"),
        "{stderr}"
    );
}

/// A row whose `source_hash` is not the source its template renders today was timed with an
/// earlier template: it is re-timed and judged as any other, and its line is followed by a
/// note saying the stored figures are of that earlier source. A row whose hash is today's
/// source's, or that records none, gets no note.
#[test]
fn a_row_timed_with_an_earlier_source_is_noted() {
    let tmp = tempfile::tempdir().unwrap();
    let mut opts = db(tmp.path());
    opts.db = tmp.path().join("renderable.csv");
    let params = "TILE_DIM=32;BLOCK_ROWS=8;PAD=1;UNROLL=on;BOUNDS=edge";
    for (shape, hash) in [
        ("1000x1000", "today"),
        ("4096x4096", "earlier"),
        ("8192x8192", ""),
    ] {
        let mut r = row(shape, params, 0.1, "", GPU);
        let today = cuda_autotune::export::kernel::tuned_source(&r, None).unwrap();
        r.source_hash = match hash {
            "today" => source_key(&today, "sm_90", (13, 0)),
            "earlier" => source_key("an earlier template's source", "sm_90", (13, 0)),
            _ => String::new(),
        };
        upsert_best(&opts.db, r, Keep::Newest).unwrap();
    }
    let runs: Vec<(String, std::result::Result<Vec<Timing>, &str>)> =
        ["1000x1000", "4096x4096", "8192x8192"]
            .iter()
            .map(|s| (format!("{s} {params}"), Ok(vec![t(0.1, 1.0)])))
            .collect();
    let runs: Vec<(&str, _)> = runs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    let (text, code) = check(&opts, &mut Recorded::new(&runs));
    assert_eq!(code, 0, "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{text}");
    assert!(lines[1].starts_with("PASS transpose 4096x4096 "), "{text}");
    assert!(
        lines[2].starts_with(
            "  note: the template changed since it was tuned at 2025-01-01T00:00:00Z: the \
             stored figures are of the source it rendered then"
        ),
        "{text}"
    );
    assert!(
        lines[4]
            .ends_with("; 1 timed a source their template renders differently now (notes above)"),
        "{text}"
    );
    assert_eq!(text.matches("note").count(), 2, "{text}");
}
