//! A sweep split over a cluster's own scheduler: `--shard K/N` and `tune merge`, all on the
//! CPU (CI, no GPU).
//!
//! * bad input: `--shard`, `--gpus` and shape files, each one `error:` line and a non-zero
//!   exit, with nothing written;
//! * sharding is a partition and stable: the N shards of a compile-only run emit exactly the
//!   sources of the unsharded run, none twice, and a shard run twice emits the same files
//!   (needs NVRTC: run through scripts/test.sh or with `LD_LIBRARY_PATH=$(scripts/nvrtc-env.sh)`);
//! * merge: shard folders made by splitting H100 run CSVs (tests/fixtures/runs) by the shard policy merge
//!   back into the same CSVs byte for byte, with the same winners and best.csv rows; merging
//!   again changes no byte; missing, unfinished and foreign shards are refused;
//! * a journal writer killed with SIGKILL loses no finished entry.

use cuda_autotune::cluster::shard::{self, Manifest, ShardOutput, Sweep, MANIFEST_FORMAT};

use cuda_autotune::model::slice::{Shard, Split};
use cuda_autotune::spec::ops::Op;
use cuda_autotune::store::best::{read_best, BestRow};
use cuda_autotune::store::files::write_atomic;
use cuda_autotune::store::journal::{Journal, JournalKey};
use cuda_autotune::store::record::{Confirmed, Kind, Record, RunInfo, Status};
use cuda_autotune::store::run_csv::{read_run_csv, run_csv, run_csv_path};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;
use common::{has_gpu, repo, text, tmp, tune_output};

/// Asserts one `error:` line on stderr, no panic, the exit code; returns the line.
fn one_error(out: &Output, code: i32) -> String {
    let stderr = text(&out.stderr);
    assert!(!stderr.contains("panicked"), "panic:\n{stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one error line expected:\n{stderr}");
    assert!(lines[0].starts_with("error: "), "{stderr}");
    assert_eq!(out.status.code(), Some(code), "{stderr}");
    lines[0].to_string()
}

/// Every file under `dir` (relative name → bytes); an absent folder is empty.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries {
            let p = e.unwrap().path();
            if p.is_file() {
                out.insert(
                    p.file_name().unwrap().to_string_lossy().into_owned(),
                    std::fs::read(&p).unwrap(),
                );
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// Bad input
// ---------------------------------------------------------------------------------------

#[test]
fn bad_shard_gpu_and_shape_file_arguments_are_one_line_errors() {
    let t = tmp();
    let out_dir = t.path().join("results");
    let o = out_dir.to_str().unwrap();
    for (shard, why) in [
        ("2/2", "K must be below N"),
        ("1/0", "N must be at least 1"),
        ("a/b", "is not a whole number"),
        ("-1/2", "must not be negative"),
        ("", "no '/'"),
        ("3", "no '/'"),
    ] {
        let out = tune_output(
            t.path(),
            &[
                "--shape",
                "64x64",
                "--shard",
                shard,
                "--out",
                o,
                "--compile-only",
            ],
        );
        let line = one_error(&out, 2);
        assert!(
            line.contains("--shard") && line.contains(why),
            "{shard}: {line}"
        );
        assert!(out.stdout.is_empty(), "{shard}: {}", text(&out.stdout));
    }
    // --gpus typos are input errors, with or without a GPU.
    for (gpus, why) in [
        ("0,0", "listed twice"),
        ("0,a", "'a' is not a device index"),
        ("", "'' is not a device index"),
    ] {
        let out = tune_output(
            t.path(),
            &["--shape", "64x64,32x32", "--gpus", gpus, "--out", o],
        );
        let line = one_error(&out, 2);
        assert!(line.contains(why), "{gpus}: {line}");
    }
    // An index beyond the devices (or no GPU at all): one line, non-zero, even for one shape.
    let out = tune_output(t.path(), &["--shape", "64x64", "--gpus", "99", "--out", o]);
    let line = one_error(&out, if has_gpu() { 2 } else { 1 });
    assert!(line.contains("--gpus"), "{line}");
    // Shape files: missing, empty (only comments), a malformed line.
    let missing = t.path().join("missing.txt");
    let out = tune_output(
        t.path(),
        &[
            "--shapes",
            missing.to_str().unwrap(),
            "--compile-only",
            "--out",
            o,
        ],
    );
    let line = one_error(&out, 2);
    assert!(line.contains("missing.txt"), "{line}");
    let empty = t.path().join("empty.txt");
    std::fs::write(&empty, "# nothing yet\n\n").unwrap();
    let out = tune_output(
        t.path(),
        &[
            "--shapes",
            empty.to_str().unwrap(),
            "--compile-only",
            "--out",
            o,
        ],
    );
    let line = one_error(&out, 2);
    assert!(
        line.contains("empty.txt") && line.contains("no shape"),
        "{line}"
    );
    let bad = t.path().join("bad.txt");
    std::fs::write(&bad, "64x64\n64by64\n").unwrap();
    let out = tune_output(
        t.path(),
        &[
            "--shapes",
            bad.to_str().unwrap(),
            "--shard",
            "0/2",
            "--compile-only",
            "--out",
            o,
        ],
    );
    let line = one_error(&out, 2);
    assert!(line.contains("bad.txt:2"), "{line}");
    assert!(!out_dir.exists(), "nothing is written after bad input");
}

// ---------------------------------------------------------------------------------------
// Sharding is a partition, and stable (compile-only, needs NVRTC)
// ---------------------------------------------------------------------------------------

/// Runs a compile-only `tune` and fails with what to do when NVRTC is missing.
fn compile_only(tmp: &Path, args: &[&str]) -> Output {
    let out = tune_output(
        tmp,
        &[&["--compile-only", "--arch", "sm_90", "--no-cache"], args].concat(),
    );
    let stderr = text(&out.stderr);
    if stderr.contains("NVRTC is not available") {
        panic!(
            "NVRTC could not be loaded: run the tests with scripts/test.sh (or `export \
             LD_LIBRARY_PATH=$(scripts/nvrtc-env.sh)` first).\n{stderr}"
        );
    }
    assert_eq!(out.status.code(), Some(0), "tune {args:?}:\n{stderr}");
    out
}

#[test]
fn the_shards_of_a_compile_only_run_emit_exactly_the_unsharded_sources() {
    let t = tmp();
    // A ragged shape, so BOUNDS=none is pruned: pruned variants are in no shard's output.
    let space = [
        "--shape",
        "999x1001",
        "--param",
        "TILE_DIM=16,32",
        "--param",
        "BLOCK_ROWS=2,4,8",
        "--param",
        "PAD=0,1",
        "--param",
        "UNROLL=off,on",
    ];
    let pins = common::classic_transpose_pins();
    let emit = |name: &str| t.path().join(name);
    let run = |dir: &str, shard: Option<&str>| {
        let d = emit(dir);
        let mut args: Vec<&str> = space.to_vec();
        args.extend(pins.iter().map(String::as_str));
        args.extend(["--emit", d.to_str().unwrap()]);
        if let Some(s) = shard {
            args.extend(["--shard", s]);
        }
        compile_only(t.path(), &args);
        files(&d)
    };
    let whole = run("whole", None);
    assert_eq!(whole.len(), 2 * 3 * 2 * 2 * 3, "{:?}", whole.keys());
    let mut union = BTreeMap::new();
    let mut sizes = Vec::new();
    for k in 0..3 {
        let part = run(&format!("shard{k}"), Some(&format!("{k}/3")));
        sizes.push(part.len());
        for (name, bytes) in part {
            assert!(
                union.insert(name.clone(), bytes).is_none(),
                "{name} emitted by two shards"
            );
        }
    }
    assert_eq!(
        union, whole,
        "the shards together emit exactly the unsharded sources"
    );
    assert!(
        sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1,
        "{sizes:?}"
    );
    // Stable: the same shard again emits the same files.
    assert_eq!(run("again", Some("1/3")), files(&emit("shard1")));
    // The shards' CSVs, written into one folder, are each their own file.
    let csvs: Vec<String> = files(&t.path().join("results")).into_keys().collect();
    assert_eq!(
        csvs,
        [
            "transpose_999x1001_sm-90-compile-only.csv",
            "transpose_999x1001_sm-90-shard-0-of-3-compile-only.csv",
            "transpose_999x1001_sm-90-shard-1-of-3-compile-only.csv",
            "transpose_999x1001_sm-90-shard-2-of-3-compile-only.csv",
        ]
    );
}

#[test]
fn a_sweep_of_many_shapes_is_split_by_whole_shapes() {
    let t = tmp();
    let shapes: Vec<String> = (1..=12).map(|i| format!("{}x{}", 32 * i, 64)).collect();
    let list = shapes.join(",");
    let one_variant = [
        "--param",
        "TILE_DIM=32",
        "--param",
        "BLOCK_ROWS=8",
        "--param",
        "PAD=1",
        "--param",
        "UNROLL=on",
        "--param",
        "BOUNDS=edge",
    ];
    let pins = common::classic_transpose_pins();
    let mut seen: Vec<String> = Vec::new();
    for k in 0..3 {
        let shard = format!("{k}/3");
        let mut args = [
            &["--shape", list.as_str(), "--shard", shard.as_str()],
            &one_variant[..],
        ]
        .concat();
        args.extend(pins.iter().map(String::as_str));
        let shapes_of = |out: &Output| -> Vec<String> {
            text(&out.stdout)
                .lines()
                .filter_map(|l| l.strip_prefix("==== "))
                .map(str::to_string)
                .collect()
        };
        let out = compile_only(t.path(), &args);
        let stdout = text(&out.stdout);
        let mine = shapes_of(&out);
        assert!(mine.len() >= 3, "shard {k}: {mine:?}");
        // Every variant of a shape it owns: one compiled per shape.
        assert_eq!(
            stdout.matches("1 variants compiled").count(),
            mine.len(),
            "{stdout}"
        );
        assert_eq!(shapes_of(&compile_only(t.path(), &args)), mine, "stable");
        seen.extend(mine);
    }
    let unique: BTreeSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len(), "a shape in two shards: {seen:?}");
    assert_eq!(unique, shapes.iter().collect(), "every shape in some shard");
}

// ---------------------------------------------------------------------------------------
// Merge (shard folders made from the H100 run fixtures)
// ---------------------------------------------------------------------------------------

const GPU_SLUG: &str = "nvidia-h100-80gb-hbm3";

fn fixture_csv(shape: &str) -> PathBuf {
    repo(&format!(
        "tests/fixtures/runs/transpose_{shape}_{GPU_SLUG}.csv"
    ))
}

/// The fixture best.csv row of a transpose shape in f32 (the dtype of the run
/// CSVs these tests split; f16 and f64 rows of the same shape may come first in the file).
fn fixture_best(shape: &str) -> BestRow {
    read_best(&repo("tests/fixtures/runs/best.csv"))
        .unwrap()
        .into_iter()
        .find(|r| r.op == "transpose" && r.shape == shape && r.dtype == "f32")
        .unwrap_or_else(|| panic!("no fixture best row for {shape}"))
}

/// The fixture best.csv row of a transpose shape and the rows of its run CSV: what a test
/// edits before it splits them into shards.
fn fixture_run(shape: &str) -> (BestRow, Vec<Record>) {
    (
        fixture_best(shape),
        read_run_csv(&fixture_csv(shape)).unwrap(),
    )
}

/// Merges every shard of `dirs` into `tmp/merged`, asserts that the merge exited 0 (with its
/// output as the message) and returns that folder.
fn merge_all(tmp: &Path, dirs: &[PathBuf]) -> PathBuf {
    let out = tmp.join("merged");
    let o = merge(tmp, dirs, &out, &[]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    out
}

/// Asserts that `tune` exited 0, with its stderr as the message.
#[track_caller]
fn assert_success(o: &Output) {
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

/// The run info of a fixture CSV, from its best.csv row and its rows.
fn run_info(shape: &str) -> RunInfo {
    let b = fixture_best(shape);
    RunInfo {
        op: b.op,
        shape: b.shape,
        dtype: b.dtype,
        gpu: b.gpu,
        compute_capability: b.compute_capability,
        cache: b.cache,
        reps: b.reps,
        unit: b.unit,
        roof: b.roof,
        driver: b.driver,
        nvrtc: b.nvrtc,
    }
}

/// The parameter columns of a run CSV.
fn param_names(csv: &Path) -> Vec<String> {
    let head = std::fs::read_to_string(csv).unwrap();
    let cols: Vec<&str> = head.lines().next().unwrap().split(',').collect();
    let status = cols.iter().position(|c| *c == "status").unwrap();
    cols[2..status].iter().map(|c| c.to_string()).collect()
}

fn sweep(shapes: &[&str]) -> Sweep {
    let op = Op::load("transpose", None).unwrap();
    Sweep {
        op: "transpose".into(),
        op_fingerprint: shard::op_fingerprint(&op),
        shapes: shapes.iter().map(|s| s.to_string()).collect(),
        dtype: None,
        params: vec![],
        reps: 30,
        warmup: 3,
        cache: "cold".into(),
        seed: 1,
        rtol: None,
        adaptive: true,
        confirm_rounds: 50,
        strategy: "auto".into(),
        budget: Some("80".into()),
        warm_start: true,
    }
}

/// One shard's output for a shape, its CSV and a journal written into `dir`: `records` as the
/// CSV, a journal entry per measured variant whose key starts with its source hash (the
/// committed hash for the committed winner), and, with `torn`, half a line at the end as a
/// killed run leaves it.
fn write_output(dir: &Path, shape: &str, records: &[Record], torn: bool) -> ShardOutput {
    let info = run_info(shape);
    let names = param_names(&fixture_csv(shape));
    let best = fixture_best(shape);
    let csv = run_csv_path(dir, &info);
    write_atomic(&csv, &run_csv(&info, &names, records).unwrap()).unwrap();
    let journal = Journal::path_for(dir, &info);
    let mut lines = vec![serde_json::json!({"op": "transpose", "shape": shape}).to_string()];
    for r in records
        .iter()
        .filter(|r| r.kind == Kind::Variant && r.stats.is_some())
    {
        let index: u64 = r.name[1..].parse().unwrap();
        let params: String = r
            .params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(";");
        let hash = if params == best.params {
            best.source_hash.clone()
        } else {
            format!("hash{index}")
        };
        lines.push(
            serde_json::json!({"key": format!("{hash} (1, 1, 1) (32, 8, 1)"),
                               "result": {"id": 10_000 + index}})
            .to_string(),
        );
    }
    let mut body = lines.join("\n") + "\n";
    if torn {
        body.push_str("{\"key\":\"torn");
    }
    std::fs::write(&journal, body).unwrap();
    ShardOutput {
        shape: shape.into(),
        complete: true,
        error: String::new(),
        csv: Some(csv.file_name().unwrap().to_string_lossy().into_owned()),
        journal: Some(journal.file_name().unwrap().to_string_lossy().into_owned()),
        run: Some(info),
        param_names: names,
        gpu_uuid: best.gpu_uuid.clone(),
        tuned_at: best.tuned_at.clone(),
        num_sms: best.num_sms,
        arch: best.arch.clone(),
    }
}

fn write_manifest(
    dir: &Path,
    k: usize,
    n: usize,
    split: Split,
    sw: &Sweep,
    outputs: Vec<ShardOutput>,
) {
    Manifest {
        format: MANIFEST_FORMAT,
        tool_version: env!("CARGO_PKG_VERSION").into(),
        k,
        n,
        split,
        sweep: sw.clone(),
        shapes: outputs.iter().map(|o| o.shape.clone()).collect(),
        complete: true,
        outputs,
    }
    .write(dir)
    .unwrap();
}

/// Splits the committed 1000x1000 run by the variant policy into `n` shard folders under
/// `root`, as `tune --shard K/N` would write them (one shape, so by variants); returns them.
fn variant_shards(root: &Path, n: usize) -> Vec<PathBuf> {
    let shape = "1000x1000";
    let sw = sweep(&[shape]);
    let records = read_run_csv(&fixture_csv(shape)).unwrap();
    let mut dirs = Vec::new();
    for k in 0..n {
        let plan = shard::plan(Some(Shard { k, n }), &sw.shapes, &[1.0]);
        let slice = plan[0].slice.expect("a slice");
        assert_eq!(slice.split, Split::Variants);
        // Live = every variant that was not pruned, in space order: position p → its shard.
        let mut p = 0;
        let mine: Vec<Record> = records
            .iter()
            .filter(|r| {
                if r.kind != Kind::Variant || r.status == Status::Pruned {
                    return true;
                }
                p += 1;
                slice.owns(p - 1)
            })
            .cloned()
            .collect();
        let dir = root.join(format!("shard-{k}"));
        let out = write_output(&dir, shape, &mine, k == n - 1);
        write_manifest(&dir, k, n, Split::Variants, &sw, vec![out]);
        dirs.push(dir);
    }
    dirs
}

fn merge(tmp: &Path, dirs: &[PathBuf], out: &Path, extra: &[&str]) -> Output {
    let mut args: Vec<String> = vec!["merge".into()];
    args.extend(dirs.iter().map(|d| d.display().to_string()));
    args.extend(["--out".into(), out.display().to_string()]);
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    tune_output(tmp, &args)
}

#[test]
fn merging_variant_shards_gives_back_the_unsharded_run_and_is_idempotent() {
    let t = tmp();
    let dirs = variant_shards(t.path(), 3);
    // Each shard holds a third of the measured variants, and every pruned row and baseline.
    let original = read_run_csv(&fixture_csv("1000x1000")).unwrap();
    let measured = |rs: &[Record]| {
        rs.iter()
            .filter(|r| r.kind == Kind::Variant && r.status != Status::Pruned)
            .count()
    };
    let parts: Vec<Vec<Record>> = dirs
        .iter()
        .map(|d| read_run_csv(&d.join(format!("transpose_1000x1000_{GPU_SLUG}.csv"))).unwrap())
        .collect();
    assert_eq!(
        parts.iter().map(|p| measured(p)).sum::<usize>(),
        measured(&original)
    );
    for p in &parts {
        assert_eq!(p.len() - measured(p), original.len() - measured(&original));
    }

    let out = merge_all(t.path(), &dirs);
    let merged_csv = out.join(format!("transpose_1000x1000_{GPU_SLUG}.csv"));
    // The same rows, the same winner: byte for byte the committed CSV.
    assert_eq!(read_run_csv(&merged_csv).unwrap(), original);
    assert_eq!(
        std::fs::read(&merged_csv).unwrap(),
        std::fs::read(fixture_csv("1000x1000")).unwrap()
    );
    // The best.csv row is the one the unsharded run stored (winner, runner-up, tie, hash).
    assert_eq!(
        read_best(&out.join("best.csv")).unwrap(),
        vec![fixture_best("1000x1000")]
    );
    // The journals are joined; the torn last line of the killed shard is dropped.
    let journal =
        std::fs::read_to_string(out.join(format!("transpose_1000x1000_{GPU_SLUG}.journal.jsonl")))
            .unwrap();
    assert!(journal.starts_with("{\"merged\":["), "{journal:.80}");
    assert_eq!(
        journal.lines().count(),
        1 + measured(&original) - count_unmeasured(&original)
    );
    assert!(!journal.contains("torn"));

    // Merging again (into the same folder) changes no byte; so does a folder given twice.
    let before = files(&out);
    let again = merge(
        t.path(),
        &[dirs.clone(), vec![dirs[0].clone()]].concat(),
        &out,
        &[],
    );
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
    assert_eq!(files(&out), before);

    // A reader that stopped reading (`tune merge ... | head -1`) neither stops nor fails it.
    let piped = t.path().join("piped");
    let args = [
        vec![PathBuf::from("merge")],
        dirs.clone(),
        vec!["--out".into(), piped.clone()],
    ];
    let o = common::tune_with_stdout_closed(args.concat());
    assert_success(&o);
    assert_eq!(files(&piped), before);
}

/// A run whose roof also ran in the interleaved rounds (as every run's does): merging its
/// shards keeps the re-timed variants as the runner-up and tie set (the roof does not compete),
/// and the winner's % of roof takes the roof at the faster of its two medians.
#[test]
fn a_roof_re_timed_in_the_rounds_is_neither_runner_up_nor_tied_after_a_merge() {
    let t = tmp();
    let shape = "1000x1000";
    let (best, mut records) = fixture_run(shape);
    let roof_at = records
        .iter()
        .position(|r| r.kind == Kind::Baseline && r.name == best.roof)
        .expect("the fixture's roof row");
    // Faster over the rounds than every leader, as a roof usually is.
    let in_rounds = median_of(&records[roof_at]) * 0.9;
    records[roof_at].confirm = Some(Confirmed {
        median_ms: in_rounds,
        vs_winner_pct: -20.0,
        ci_low_pct: -21.0,
        ci_high_pct: -19.0,
        tied: false,
        winner: false,
    });
    let sw = sweep(&[shape]);
    let dir = t.path().join("shard-0");
    let out = write_output(&dir, shape, &records, false);
    write_manifest(&dir, 0, 1, Split::Shapes, &sw, vec![out]);
    let merged = t.path().join("merged");
    let o = merge(t.path(), &[dir], &merged, &[]);
    assert_success(&o);
    let row = read_best(&merged.join("best.csv")).unwrap().remove(0);
    assert_eq!(
        (row.runner_up.as_str(), row.tie, row.tied_with.as_str()),
        (best.runner_up.as_str(), best.tie, best.tied_with.as_str())
    );
    assert_eq!(row.margin_pct, best.margin_pct);
    let winner = records
        .iter()
        .find(|r| r.confirm.is_some_and(|c| c.winner))
        .expect("the fixture's winner");
    let frac = in_rounds / winner.confirm.unwrap().median_ms;
    assert!((row.frac_of_roof.unwrap() - frac).abs() < 1e-9, "{row:?}");
}

fn median_of(r: &Record) -> f64 {
    r.stats.expect("timed").median_ms
}

/// Variants that were compiled but have no time (failed): no journal entry in these fixtures.
fn count_unmeasured(rs: &[Record]) -> usize {
    rs.iter()
        .filter(|r| r.kind == Kind::Variant && r.status != Status::Pruned && r.stats.is_none())
        .count()
}

#[test]
fn merging_shape_shards_keeps_each_shapes_csv_and_winner() {
    let t = tmp();
    let shapes = [
        "1000x1000",
        "1000x3000",
        "2000x300",
        "2048x8192",
        "300x2000",
        "4096x1024",
        "4096x4096",
        "512x512",
    ];
    let sw = sweep(&shapes);
    let op = Op::load("transpose", None).unwrap();
    let work = shard::estimated_work(&op, &sw.shapes).unwrap();
    let n = 2;
    let mut dirs = Vec::new();
    let mut loads = Vec::new();
    for k in 0..n {
        let plan = shard::plan(Some(Shard { k, n }), &sw.shapes, &work);
        assert!(plan.iter().all(|a| a.slice.unwrap().split == Split::Shapes));
        loads.push(plan.iter().map(|a| a.work).sum::<f64>());
        let dir = t.path().join(format!("s{k}"));
        let outs = plan
            .iter()
            .map(|a| {
                let recs = read_run_csv(&fixture_csv(&a.shape)).unwrap();
                write_output(&dir, &a.shape, &recs, false)
            })
            .collect();
        write_manifest(&dir, k, n, Split::Shapes, &sw, outs);
        dirs.push(dir);
    }
    // Balanced by work: the larger shard has at most the largest shape more.
    let largest = work.iter().cloned().fold(0.0, f64::max);
    assert!((loads[0] - loads[1]).abs() <= largest, "{loads:?}");
    let out = merge_all(t.path(), &dirs);
    let best = read_best(&out.join("best.csv")).unwrap();
    assert_eq!(best.len(), shapes.len());
    for s in shapes {
        let merged = out.join(format!("transpose_{s}_{GPU_SLUG}.csv"));
        assert_eq!(
            std::fs::read(&merged).unwrap(),
            std::fs::read(fixture_csv(s)).unwrap(),
            "{s}"
        );
        let row = best.iter().find(|r| r.shape == s).unwrap();
        let want = fixture_best(s);
        assert_eq!(
            (&row.params, row.median_ms, &row.runner_up, row.tie),
            (&want.params, want.median_ms, &want.runner_up, want.tie),
            "{s}"
        );
    }
    let before = files(&out);
    assert_eq!(merge(t.path(), &dirs, &out, &[]).status.code(), Some(0));
    assert_eq!(files(&out), before, "merging twice changes nothing");
}

/// A record of a made-up run: `(name, median, registers)`, ok.
fn timed(kind: Kind, name: &str, ms: f64, regs: Option<i32>) -> Record {
    let params = if kind == Kind::Variant {
        vec![("TILE_DIM".to_string(), name[1..].to_string())]
    } else {
        vec![]
    };
    Record {
        status: Status::Ok,
        stats: Some(cuda_autotune::measure::bench::Stats {
            median_ms: ms,
            min_ms: ms,
            max_ms: ms,
            spread_pct: 0.0,
            samples: 30,
            batch: 1,
        }),
        throughput: Some(1.0 / ms),
        frac_of_roof: Some(0.5),
        registers: regs,
        ..Record::new(kind, name, params)
    }
}

#[test]
fn across_variant_shards_the_fastest_median_wins_with_the_tuners_tie_rule() {
    let t = tmp();
    let sw = Sweep {
        shapes: vec!["64x64".into()],
        ..sweep(&[])
    };
    let info = |roof: &str| RunInfo {
        roof: roof.into(),
        shape: "64x64".into(),
        ..run_info("1000x1000")
    };
    let confirmed = |mut r: Record| {
        r.confirm = Some(Confirmed {
            median_ms: 1.0,
            vs_winner_pct: 0.0,
            ci_low_pct: 0.0,
            ci_high_pct: 0.0,
            tied: true,
            winner: true,
        });
        r
    };
    // Each shard timed the baselines itself (shard 1's copy was slower, so its roof was
    // memcpy), and confirmed its own partial winner. v0001 and v0003 tie on the median; v0003
    // needs fewer registers.
    let shards: [(&str, Vec<Record>); 2] = [
        (
            "copy",
            vec![
                timed(Kind::Baseline, "memcpy", 2.5, None),
                timed(Kind::Baseline, "copy", 2.0, None),
                confirmed(timed(Kind::Variant, "v0001", 4.0, Some(40))),
                timed(Kind::Variant, "v0002", 5.0, Some(20)),
            ],
        ),
        (
            "memcpy",
            vec![
                timed(Kind::Baseline, "memcpy", 2.4, None),
                timed(Kind::Baseline, "copy", 3.0, None),
                timed(Kind::Variant, "v0000", 4.5, Some(10)),
                confirmed(timed(Kind::Variant, "v0003", 4.0, Some(32))),
            ],
        ),
    ];
    let mut dirs = Vec::new();
    for (k, (roof, records)) in shards.into_iter().enumerate() {
        let dir = t.path().join(format!("shard-{k}"));
        let info = info(roof);
        let names = vec!["TILE_DIM".to_string()];
        let csv = run_csv_path(&dir, &info);
        write_atomic(&csv, &run_csv(&info, &names, &records).unwrap()).unwrap();
        let out = ShardOutput {
            shape: "64x64".into(),
            complete: true,
            error: String::new(),
            csv: Some(csv.file_name().unwrap().to_string_lossy().into_owned()),
            journal: None,
            run: Some(info),
            param_names: names,
            gpu_uuid: format!("GPU-{k}"),
            tuned_at: format!("2026-11-2{k}T00:00:00Z"),
            num_sms: Some(132),
            arch: "sm_90".into(),
        };
        write_manifest(&dir, k, 2, Split::Variants, &sw, vec![out]);
        dirs.push(dir);
    }
    let out = t.path().join("merged");
    let o = merge(t.path(), &dirs, &out, &[]);
    assert_success(&o);
    assert!(text(&o.stdout).contains("partial confirmations were dropped"));
    let merged = read_run_csv(&out.join(format!("transpose_64x64_{GPU_SLUG}.csv"))).unwrap();
    let names: Vec<&str> = merged.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names,
        ["memcpy", "copy", "v0000", "v0001", "v0002", "v0003"]
    );
    // Each baseline's fastest row; the roof is the fastest of them (copy, 2.0 ms).
    let ms: Vec<f64> = merged.iter().map(|r| r.stats.unwrap().median_ms).collect();
    assert_eq!(ms[..2], [2.4, 2.0]);
    for r in &merged {
        assert_eq!(
            r.frac_of_roof,
            Some(2.0 / r.stats.unwrap().median_ms),
            "{}",
            r.name
        );
        assert_eq!(r.confirm, None, "{}", r.name);
    }
    let best = read_best(&out.join("best.csv")).unwrap();
    assert_eq!(best.len(), 1);
    let b = &best[0];
    // v0001 and v0003 tie at 4.0 ms: fewest registers wins, with its shard's stamp and GPU.
    assert_eq!(
        (
            b.params.as_str(),
            b.median_ms,
            b.roof.as_str(),
            b.frac_of_roof
        ),
        ("TILE_DIM=0003", 4.0, "copy", Some(0.5))
    );
    assert_eq!(
        (b.gpu_uuid.as_str(), b.tuned_at.as_str()),
        ("GPU-1", "2026-11-21T00:00:00Z")
    );
    assert_eq!(
        (b.runner_up.as_str(), b.margin_pct, b.tie),
        ("", None, false)
    );
}

/// A change to a manifest.
type Edit = dyn Fn(&mut Manifest);

/// Edits shard `k`'s manifest with `f`.
fn edit_manifest(dir: &Path, k: usize, n: usize, f: impl FnOnce(&mut Manifest)) {
    let path = shard::manifest_path(dir, Shard { k, n });
    let mut m = Manifest::read(&path).unwrap();
    f(&mut m);
    m.write(dir).unwrap();
}

#[test]
fn missing_unfinished_and_foreign_shards_are_refused_and_nothing_is_written() {
    let t = tmp();
    let dirs = variant_shards(t.path(), 3);
    let out = t.path().join("merged");
    let refused = |dirs: &[PathBuf], extra: &[&str], why: &str| {
        let o = merge(t.path(), dirs, &out, extra);
        let line = one_error(&o, 2);
        assert!(line.contains(why), "expected '{why}': {line}");
        assert!(!out.exists(), "a refused merge writes nothing");
        line
    };
    // A missing shard.
    refused(&dirs[..2], &[], "shard(s) 2 of 3 missing");
    // An empty folder, a folder that is not a shard's, a path that is no folder.
    let empty = t.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    refused(std::slice::from_ref(&empty), &[], "is empty");
    refused(&[repo("results")], &[], "is not a shard's output folder");
    refused(&[t.path().join("nowhere")], &[], "is not a folder");
    // The output folder may not be a shard's folder.
    let o = merge(t.path(), &dirs, &dirs[0], &[]);
    assert!(one_error(&o, 2).contains("is the folder of shard 0"));

    // An unfinished shard: refused, or merged without a best.csv row with --partial.
    edit_manifest(&dirs[1], 1, 3, |m| {
        m.complete = false;
        m.outputs[0].complete = false;
        m.outputs[0].error = "interrupted".into();
    });
    refused(&dirs, &[], "unfinished: shard 1 (1000x1000: interrupted)");
    let o = merge(t.path(), &dirs, &out, &["--partial"]);
    assert_success(&o);
    assert!(text(&o.stdout).contains("partial: shard(s) 1 did not finish it"));
    assert!(out
        .join(format!("transpose_1000x1000_{GPU_SLUG}.csv"))
        .is_file());
    assert!(
        !out.join("best.csv").exists(),
        "no best row from a partial shape"
    );
    std::fs::remove_dir_all(&out).unwrap();
    edit_manifest(&dirs[1], 1, 3, |m| {
        m.complete = true;
        m.outputs[0].complete = true;
    });

    // Another GPU model, NVRTC, cache state, code version or sweep.
    let foreign: [(&str, Box<Edit>); 9] = [
        (
            "different GPU models",
            Box::new(|m| m.outputs[0].run.as_mut().unwrap().gpu = "NVIDIA H200".into()),
        ),
        (
            "different NVRTC versions",
            Box::new(|m| m.outputs[0].run.as_mut().unwrap().nvrtc = "12.8".into()),
        ),
        (
            "different cache states",
            Box::new(|m| m.sweep.cache = "warm".into()),
        ),
        (
            "different code versions",
            Box::new(|m| m.sweep.op_fingerprint = "0".repeat(64)),
        ),
        (
            "different code versions",
            Box::new(|m| m.tool_version = "0.0.9".into()),
        ),
        (
            "different sweeps (reps: 30 vs 100)",
            Box::new(|m| m.sweep.reps = 100),
        ),
        (
            "different sweeps (budget: \"80\" vs \"400\")",
            Box::new(|m| m.sweep.budget = Some("400".into())),
        ),
        (
            "different sweeps (budget: \"80\" vs null)",
            Box::new(|m| m.sweep.budget = None),
        ),
        (
            "different sweeps (warm_start: true vs false)",
            Box::new(|m| m.sweep.warm_start = false),
        ),
    ];
    for (why, edit) in foreign {
        let saved = std::fs::read(shard::manifest_path(&dirs[2], Shard { k: 2, n: 3 })).unwrap();
        edit_manifest(&dirs[2], 2, 3, edit);
        refused(&dirs, &[], why);
        std::fs::write(shard::manifest_path(&dirs[2], Shard { k: 2, n: 3 }), saved).unwrap();
    }
    // A shard of another split, and the same shard twice.
    let other = t.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::copy(
        shard::manifest_path(&dirs[0], Shard { k: 0, n: 3 }),
        other.join("shard-0-of-3.json"),
    )
    .unwrap();
    refused(
        &[dirs.clone(), vec![other]].concat(),
        &[],
        "shard 0 of 3 appears twice",
    );
    // After all that, the shards still merge.
    let o = merge(t.path(), &dirs, &out, &[]);
    assert_success(&o);
}

#[test]
fn a_shard_refuses_an_out_folder_holding_another_shards_results() {
    let t = tmp();
    let dirs = variant_shards(t.path(), 3);
    let o = dirs[0].to_str().unwrap();
    let before = files(&dirs[0]);
    let out = tune_output(
        t.path(),
        &["--shape", "1000x1000", "--shard", "1/3", "--out", o],
    );
    let line = one_error(&out, 2);
    assert!(
        line.contains("already holds the results of shard 0/3"),
        "{line}"
    );
    assert_eq!(files(&dirs[0]), before, "nothing of shard 0 is touched");
}

// ---------------------------------------------------------------------------------------
// A killed writer loses nothing it finished
// ---------------------------------------------------------------------------------------

const WRITER_ENV: &str = "CUDA_AUTOTUNE_TEST_JOURNAL_WRITER";

/// Not a test on its own: run by [`a_journal_writer_killed_mid_run_loses_no_finished_entry`]
/// as a child process (with the variable set) that appends journal entries until killed.
#[test]
fn journal_writer_child() {
    let Some(path) = std::env::var_os(WRITER_ENV) else {
        return;
    };
    let header = serde_json::json!({"op": "transpose", "shape": "64x64"});
    let (mut j, _) = Journal::open::<u64>(Path::new(&path), &header, true).unwrap();
    for i in 0u64.. {
        // Long entries, so a kill often lands inside one.
        let key = JournalKey::Baseline {
            name: format!("{i:06}-{}", "x".repeat(4000)),
            source: String::new(),
        };
        j.append(&key, &i).unwrap();
    }
}

#[test]
fn a_journal_writer_killed_mid_run_loses_no_finished_entry() {
    let t = tmp();
    let path = t.path().join("run.journal.jsonl");
    // Newlines in the journal: whole lines, plus a torn one closed by a resume.
    let lines = || {
        std::fs::read(&path)
            .map(|b| b.iter().filter(|&&c| c == b'\n').count())
            .unwrap_or(0)
    };
    for round in 0..3 {
        let before = lines();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "journal_writer_child",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(WRITER_ENV, &path)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        // At least 300 more entries (and the header in the first round).
        while lines() < before + 301 {
            assert!(
                std::time::Instant::now() < deadline,
                "the writer wrote too little"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        child.kill().unwrap(); // SIGKILL: no destructor, no flush
        child.wait().unwrap();
        let raw = std::fs::read_to_string(&path).unwrap();
        // Lines written whole (a torn line of an earlier round was closed with a newline by
        // the resume, but is no JSON; a last entry killed just before its newline is whole).
        let whole = raw
            .split_inclusive('\n')
            .filter(|l| serde_json::from_str::<serde_json::Value>(l).is_ok())
            .count();
        let header = serde_json::json!({"op": "transpose", "shape": "64x64"});
        let (_, entries) = Journal::open::<u64>(&path, &header, true).unwrap();
        // Every line written whole but the header comes back; only a torn tail is lost.
        assert_eq!(entries.len(), whole - 1, "round {round}");
        assert!(
            entries.len() >= 300 * (round + 1),
            "round {round}: {}",
            entries.len()
        );
        // Each writer (resuming the journal) counts from 0: the values are 0, 1, 2, ... per
        // writer, with no gap, so nothing finished went missing.
        let mut writers = 0;
        for (i, (key, v)) in entries.iter().enumerate() {
            let JournalKey::Baseline { name, .. } = key else {
                panic!("round {round}: a key the writer did not write: {key:?}");
            };
            if *v == 0 {
                writers += 1;
            } else {
                assert_eq!(
                    *v,
                    entries[i - 1].1 + 1,
                    "round {round}: a gap before {name:.6}"
                );
            }
            assert!(name.starts_with(&format!("{v:06}-")), "{name:.10}");
        }
        assert_eq!(writers, round + 1, "round {round}");
    }
}

// ---------------------------------------------------------------------------------------
// What a merge writes over, and what it takes for a shard's results
// ---------------------------------------------------------------------------------------

/// The run CSV and journal of the 1000x1000 fixture run in `dir`.
fn csv_and_journal(dir: &Path) -> [PathBuf; 2] {
    let csv = dir.join(format!("transpose_1000x1000_{GPU_SLUG}.csv"));
    let journal = csv.with_extension("journal.jsonl");
    [csv, journal]
}

/// `path` with `.bak` added to its name.
fn bak(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap().to_os_string();
    name.push(".bak");
    path.with_file_name(name)
}

#[test]
fn a_merge_refuses_an_out_folder_that_holds_a_shards_results() {
    let t = tmp();
    let dirs = variant_shards(t.path(), 3);
    let before = files(&dirs[2]);
    // Shard 2's folder, although shard 2 is not merged: its CSV and journal would be replaced.
    let o = merge(t.path(), &dirs[..2], &dirs[2], &["--partial"]);
    let line = one_error(&o, 2);
    assert!(
        line.contains("holds the results of shard 2/3 (shard-2-of-3.json)"),
        "{line}"
    );
    assert_eq!(files(&dirs[2]), before, "nothing of shard 2 is touched");
    let out = t.path().join("merged");
    let o = merge(t.path(), &dirs, &out, &[]);
    assert_success(&o);
}

#[test]
fn a_shard_whose_folder_holds_rows_not_its_own_is_refused_by_name() {
    let t = tmp();
    let dirs = variant_shards(t.path(), 3);
    let own = files(&dirs[2]);
    let restore = || {
        for (name, bytes) in &own {
            std::fs::write(dirs[2].join(name), bytes).unwrap();
        }
    };
    // What a merge of shards 0 and 1 into shard 2's folder would write there.
    let partial = t.path().join("partial");
    let o = merge(t.path(), &dirs[..2], &partial, &["--partial"]);
    assert_success(&o);
    let out = t.path().join("merged");
    let refused = |why: &str| {
        let o = merge(t.path(), &dirs, &out, &[]);
        let line = one_error(&o, 2);
        assert!(line.contains(why), "expected '{why}': {line}");
        assert!(!out.exists(), "a refused merge writes nothing");
    };
    // Its CSV and journal: the journal's header says a merge wrote them.
    for f in csv_and_journal(&partial) {
        std::fs::copy(&f, dirs[2].join(f.file_name().unwrap())).unwrap();
    }
    refused("is the journal of a merge, not of shard 2/3");
    // Its CSV alone: the variants of shards 0 and 1 are in shard 2's CSV too.
    restore();
    let [merged_csv, _] = csv_and_journal(&partial);
    std::fs::copy(&merged_csv, csv_and_journal(&dirs[2])[0].as_path()).unwrap();
    refused("and shard 2 (");
    // A CSV without two variants of its share.
    restore();
    let [csv, _] = csv_and_journal(&dirs[2]);
    let mut rows = read_run_csv(&csv).unwrap();
    for _ in 0..2 {
        let at = rows
            .iter()
            .rposition(|r| r.kind == Kind::Variant && r.status != Status::Pruned)
            .unwrap();
        rows.remove(at);
    }
    let info = run_info("1000x1000");
    let names = param_names(&fixture_csv("1000x1000"));
    write_atomic(&csv, &run_csv(&info, &names, &rows).unwrap()).unwrap();
    refused("the run CSV of shard 2 (");
    // Its own files again: the shards merge.
    restore();
    let o = merge(t.path(), &dirs, &out, &[]);
    assert_success(&o);
}

#[test]
fn a_merge_keeps_the_run_csv_and_journal_whose_rows_it_would_drop() {
    let t = tmp();
    let dirs = variant_shards(t.path(), 3);
    let out = t.path().join("merged");
    let o = merge(t.path(), &dirs, &out, &[]);
    assert_success(&o);
    let [csv, journal] = csv_and_journal(&out);
    let (whole_csv, whole_journal) = (
        std::fs::read(&csv).unwrap(),
        std::fs::read(&journal).unwrap(),
    );
    // Two of the three shards hold two thirds of the variants: what was there is kept.
    let o = merge(t.path(), &dirs[..2], &out, &["--partial"]);
    assert_success(&o);
    assert_ne!(std::fs::read(&csv).unwrap(), whole_csv);
    assert_eq!(std::fs::read(bak(&csv)).unwrap(), whole_csv);
    assert_eq!(std::fs::read(bak(&journal)).unwrap(), whole_journal);
    let stderr = text(&o.stderr);
    for f in [&csv, &journal] {
        assert!(
            stderr.contains(&format!("kept as {}", bak(f).display())),
            "{stderr}"
        );
    }
    // The same merge again drops nothing: no second copy, no byte changed.
    let before = files(&out);
    let o = merge(t.path(), &dirs[..2], &out, &["--partial"]);
    assert_success(&o);
    assert_eq!(files(&out), before);
}

#[test]
fn a_merged_best_row_claims_no_margin_where_the_rounds_are_too_noisy_to_rank() {
    use cuda_autotune::measure::stats::Comparison;
    use cuda_autotune::pipeline::summary::{too_noisy_to_rank, NOISY_RANK_PCT};
    let t = tmp();
    let shape = "1000x1000";
    let (best, mut records) = fixture_run(shape);
    let params = |r: &Record| {
        r.params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(";")
    };
    let at = records
        .iter()
        .position(|r| r.kind == Kind::Variant && params(r) == best.runner_up)
        .expect("the fixture's runner-up");
    assert!(best.margin_pct.is_some(), "the fixture's rounds rank");
    // The runner-up's interval against the winner, wider than a single run ranks by.
    let c = records[at].confirm.expect("re-timed in the rounds");
    let half = NOISY_RANK_PCT + 2.0;
    let wide = Confirmed {
        ci_low_pct: c.vs_winner_pct - half,
        ci_high_pct: c.vs_winner_pct + half,
        tied: true,
        ..c
    };
    records[at].confirm = Some(wide);
    let vs_winner = Comparison {
        slower_pct: wide.vs_winner_pct,
        ci_low_pct: wide.ci_low_pct,
        ci_high_pct: wide.ci_high_pct,
    };
    assert!(too_noisy_to_rank(1.0, Some(&vs_winner), 50).is_some());
    let dir = t.path().join("shard-0");
    let out = write_output(&dir, shape, &records, false);
    write_manifest(&dir, 0, 1, Split::Shapes, &sweep(&[shape]), vec![out]);
    let merged = t.path().join("merged");
    let o = merge(t.path(), &[dir], &merged, &[]);
    assert_success(&o);
    let row = read_best(&merged.join("best.csv")).unwrap().remove(0);
    assert_eq!((row.params, row.runner_up), (best.params, best.runner_up));
    assert_eq!(
        (
            row.margin_pct,
            row.margin_ci_low_pct,
            row.margin_ci_high_pct
        ),
        (None, None, None)
    );
    assert!(
        text(&o.stdout).contains("no margin in best.csv: timings too noisy to rank the leaders"),
        "{}",
        text(&o.stdout)
    );
}

/// Runs the test op `sim` on the simulated device (tests/fixtures/sim, 12 variants of one
/// shape) as shard K of N into `dir`.
fn sim_shard(tmp: &Path, k: usize, n: usize, dir: &Path) {
    let model = tmp.join("model.json");
    std::fs::write(
        &model,
        serde_json::json!({"baselines": {"copy": 0.04}}).to_string(),
    )
    .unwrap();
    let out = Command::new(common::tune_exe())
        .env("CUDA_AUTOTUNE_SIMULATE", &model)
        .env("CUDA_AUTOTUNE_CACHE", tmp.join("cache"))
        .env_remove("XDG_CACHE_HOME")
        .current_dir(tmp)
        .arg("--templates")
        .arg(repo("tests/fixtures/sim"))
        .args(["--op", "sim", "--shape", "64x64"])
        .args(["--shard", &format!("{k}/{n}"), "--out"])
        .arg(dir)
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert!(
        !stderr.contains("NVRTC is not available"),
        "NVRTC could not be loaded: run the tests with scripts/test.sh (or `export \
         LD_LIBRARY_PATH=$(scripts/nvrtc-env.sh)` first).\n{stderr}"
    );
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}

#[test]
fn shards_record_their_build_and_shards_of_different_builds_are_refused() {
    let t = tmp();
    let n = 2;
    let dirs: Vec<PathBuf> = (0..n)
        .map(|k| t.path().join(format!("shard-{k}")))
        .collect();
    for (k, dir) in dirs.iter().enumerate() {
        sim_shard(t.path(), k, n, dir);
    }
    let recorded = |k: usize| {
        Manifest::read(&shard::manifest_path(&dirs[k], Shard { k, n }))
            .unwrap()
            .tool_version
    };
    // The crate's version, then the identity of the build.
    let this = recorded(0);
    let id = this
        .strip_prefix(concat!(env!("CARGO_PKG_VERSION"), "+src."))
        .unwrap_or_else(|| panic!("no build identity in the manifest: {this}"));
    assert!(
        id.len() == 16 && id.chars().all(|c| c.is_ascii_hexdigit()),
        "{this}"
    );
    assert_eq!(recorded(1), this);
    assert_eq!(this, cuda_autotune::cluster::merge::TOOL_VERSION);
    let out = t.path().join("merged");
    let o = merge(t.path(), &dirs, &out, &[]);
    assert_success(&o);
    // best.csv has the crate's version, as a single run writes it.
    let rows = read_best(&out.join("best.csv")).unwrap();
    assert_eq!(rows[0].tool_version, env!("CARGO_PKG_VERSION"));
    std::fs::remove_dir_all(&out).unwrap();

    let refused = |a: &str, b: &str| {
        let line = one_error(&merge(t.path(), &dirs, &out, &[]), 2);
        assert!(
            line.contains(&format!("by tune {a} but"))
                && line.contains(&format!("by tune {b}:"))
                && line.contains("different code versions"),
            "{line}"
        );
        assert!(!out.exists(), "a refused merge writes nothing");
    };
    // Another build of the same version.
    let other = format!("{}+src.0123456789abcdef", env!("CARGO_PKG_VERSION"));
    edit_manifest(&dirs[1], 1, n, |m| m.tool_version = other.clone());
    refused(&this, &other);
    // A manifest that records no build identity, with one that does: refused.
    let bare = env!("CARGO_PKG_VERSION");
    edit_manifest(&dirs[1], 1, n, |m| m.tool_version = bare.into());
    refused(&this, bare);
    // Manifests that record none merge with each other.
    edit_manifest(&dirs[0], 0, n, |m| m.tool_version = bare.into());
    let o = merge(t.path(), &dirs, &out, &[]);
    assert_success(&o);
}
