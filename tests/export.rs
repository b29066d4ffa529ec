//! `tune best`, `tune export` and `tune report` on the committed H100 results, through the
//! binary as a user runs them and through the Rust API.
//!
//! The CUDA export test compiles every exported kernel with NVRTC and fails (it does not skip)
//! when NVRTC cannot be loaded: run it through scripts/test.sh, or with
//! `export LD_LIBRARY_PATH=$(scripts/nvrtc-env.sh)`. The header tests need gcc and g++. No test
//! needs a GPU.

use cuda_autotune::cuda::compile::{source_key, Compiler};
use cuda_autotune::export::db::{parse_dims, shape_distance, TunedDb};
use cuda_autotune::export::kernel::{applicability, rename_identifier, tuned_source, valid_for};
use cuda_autotune::store::best::{read_best, BestRow};
use cuda_autotune::store::record::Kind;
use std::path::{Path, PathBuf};
use tempfile::TempDir;

mod common;
use common::{cc, repo, text, tune_bin};

/// A temporary folder holding a copy of the snapshot of an H100 best.csv (tests/fixtures/export) as `best.csv`.
fn db_copy() -> (TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("a temporary folder");
    let db = tmp.path().join("best.csv");
    std::fs::copy(repo("tests/fixtures/export/best.csv"), &db)
        .expect("the fixture best.csv exists");
    (tmp, db)
}

fn committed_rows() -> Vec<BestRow> {
    read_best(&repo("tests/fixtures/export/best.csv")).unwrap()
}

/// Runs `tune args`, expects exit code 2 and exactly one `error: ` line; returns it.
fn input_error(args: &[&str]) -> String {
    let out = tune_bin().args(args).output().unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one error line:\n{stderr}");
    assert!(lines[0].starts_with("error: "), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing on stdout on error");
    lines[0].to_string()
}

fn stdout_of(args: &[&str]) -> String {
    let out = tune_bin().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "tune {args:?} failed: {}",
        text(&out.stderr)
    );
    text(&out.stdout)
}

#[test]
fn best_prints_the_stored_configuration() {
    let (_tmp, db) = db_copy();
    let db = db.to_str().unwrap();
    let out = stdout_of(&[
        "best",
        "--op",
        "transpose",
        "--shape",
        "1000x1000",
        "--db",
        db,
    ]);
    for want in [
        "transpose 1000x1000 f32 on NVIDIA H100 80GB HBM3 (cc 9.0, 132 SMs)",
        "TILE_DIM=64 BLOCK_ROWS=16 PAD=1 UNROLL=on BOUNDS=specialized",
        "7.648 µs",
        "1046.0 GB/s, 97.7 % of the roof (copy_vec4)",
        "2026-11-22T23:25:49Z",
        "cuda-autotune 0.1.0, driver for CUDA 13.0, NVRTC 13.0",
    ] {
        assert!(out.contains(want), "missing '{want}' in:\n{out}");
    }
    // --gpu matches a part of the name, ignoring case.
    let out = stdout_of(&[
        "best",
        "--op",
        "matmul",
        "--shape",
        "4096x4096x4096",
        "--gpu",
        "h100",
        "--db",
        db,
    ]);
    assert!(
        out.contains("BLOCK_SIZE=32 UNROLL=on PREFETCH=on BOUNDS=edge"),
        "{out}"
    );
}

#[test]
fn best_of_a_shape_never_tuned_names_the_nearest_shapes() {
    let (_tmp, db) = db_copy();
    let db = db.to_str().unwrap();
    let line = input_error(&[
        "best",
        "--op",
        "transpose",
        "--shape",
        "2000x2000",
        "--db",
        db,
    ]);
    assert!(
        line.contains("transpose 2000x2000 was never tuned")
            && line.contains("nearest tuned transpose shapes: 1000x3000, 1024x1024, 1000x1000"),
        "{line}"
    );
    assert!(
        line.contains("tune --op transpose --shape 2000x2000"),
        "{line}"
    );
    let line = input_error(&[
        "best",
        "--op",
        "matmul",
        "--shape",
        "2048x2048x2048",
        "--db",
        db,
    ]);
    assert!(line.contains("1024x1024x1024, 4096x4096x4096"), "{line}");
    // Tuned, but not on that GPU.
    let line = input_error(&[
        "best",
        "--op",
        "transpose",
        "--shape",
        "1000x1000",
        "--gpu",
        "A100",
        "--db",
        db,
    ]);
    assert!(line.contains("tuned on: NVIDIA H100 80GB HBM3"), "{line}");
    // A malformed shape, an op never tuned, a database that does not exist.
    let line = input_error(&["best", "--op", "transpose", "--shape", "1000", "--db", db]);
    assert!(line.contains("invalid shape '1000'"), "{line}");
    let line = input_error(&["best", "--op", "fft", "--shape", "1024", "--db", db]);
    assert!(line.contains("tuned ops: matmul, transpose"), "{line}");
    let line = input_error(&[
        "best",
        "--op",
        "transpose",
        "--shape",
        "1000x1000",
        "--db",
        "/nonexistent/best.csv",
    ]);
    assert!(
        line.contains("/nonexistent/best.csv does not exist"),
        "{line}"
    );
}

/// Without --db, outside a folder holding results/best.csv, `tune best` reads the database
/// built into the binary (as the tuner's warm start does) and says so in one note; a --db
/// that does not exist stays an error.
#[test]
fn best_without_a_database_here_reads_the_built_in_one() {
    let tmp = tempfile::tempdir().expect("a temporary folder");
    let out = tune_bin()
        .current_dir(tmp.path())
        .args([
            "best",
            "--op",
            "transpose",
            "--shape",
            "1000x1000",
            "--dtype",
            "f32",
        ])
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stdout.contains("transpose 1000x1000 f32 on NVIDIA H100 80GB HBM3"),
        "{stdout}"
    );
    assert_eq!(
        stderr.trim_end(),
        "note: results/best.csv does not exist here; reading the database built into tune \
         (the winners shipped with it; --db FILE reads another)"
    );
    let out = tune_bin()
        .current_dir(tmp.path())
        .args(["best", "--op", "transpose", "--shape", "1000x1000"])
        .args(["--db", "results/best.csv"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("tuning database results/best.csv does not exist"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn csv_export_round_trips() {
    let (tmp, db) = db_copy();
    let rows = committed_rows();
    let out = tmp.path().join("out/export.csv");
    let stdout = stdout_of(&[
        "export",
        "--format",
        "csv",
        "--db",
        db.to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(stdout.is_empty(), "{stdout}");
    assert_eq!(read_best(&out).unwrap(), rows);
    // Written through a temporary file and a rename: nothing else is left in the folder.
    assert_eq!(std::fs::read_dir(out.parent().unwrap()).unwrap().count(), 1);
    // To stdout: the same bytes, and a valid --db itself.
    let stdout = stdout_of(&["export", "--format", "csv", "--db", db.to_str().unwrap()]);
    assert_eq!(stdout, std::fs::read_to_string(&out).unwrap());
    assert_eq!(stdout, std::fs::read_to_string(&db).unwrap());
}

#[test]
fn json_export_parses_to_the_same_rows() {
    let (_tmp, db) = db_copy();
    let out = stdout_of(&["export", "--format", "json", "--db", db.to_str().unwrap()]);
    let back: Vec<BestRow> = serde_json::from_str(&out).unwrap();
    let rows = committed_rows();
    assert_eq!(back.len(), rows.len());
    // Numbers are written in the shortest form that reads back exactly (as in the CSV);
    // serde_json's default float parser may land one ulp off, so compare those closely.
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-15 * a.abs().max(b.abs());
    for (b, r) in back.iter().zip(&rows) {
        assert!(close(b.median_ms, r.median_ms) && close(b.throughput, r.throughput));
        assert!(close(b.frac_of_roof.unwrap(), r.frac_of_roof.unwrap()));
        let exact = BestRow {
            median_ms: r.median_ms,
            throughput: r.throughput,
            frac_of_roof: r.frac_of_roof,
            ..b.clone()
        };
        assert_eq!(&exact, r);
        assert!(out.contains(&format!("\"throughput\": {},", r.throughput)));
    }
    let value: serde_json::Value = serde_json::from_str(&out).unwrap();
    let t = value
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["op"] == "transpose" && r["shape"] == "1000x1000")
        .unwrap();
    assert_eq!(t["dims"], serde_json::json!([1000, 1000]));
    assert_eq!(t["parameters"]["TILE_DIM"], 64);
    assert_eq!(t["parameters"]["BOUNDS"], "specialized");
    assert_eq!(t["frac_of_roof"], 0.976987484956805);
}

#[test]
fn markdown_export_is_one_table_row_per_entry() {
    let (_tmp, db) = db_copy();
    let out = stdout_of(&[
        "export",
        "--format",
        "markdown",
        "--op",
        "transpose",
        "--db",
        db.to_str().unwrap(),
    ]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2 + 6, "{out}");
    assert!(lines[0].starts_with("| op | shape |"));
    assert!(lines.iter().all(|l| l.starts_with('|') && l.ends_with('|')));
    assert!(out.contains(
        "| transpose | 8192x8192 | f32 | NVIDIA H100 80GB HBM3 | `TILE_DIM=64 BLOCK_ROWS=8 PAD=1 UNROLL=on BOUNDS=specialized` | 189.776 µs | 2829.0 GB/s | 96.2 % | memcpy |"
    ), "{out}");
}

#[test]
fn export_filters_by_op_and_gpu() {
    let (_tmp, db) = db_copy();
    let db = db.to_str().unwrap();
    let count = |args: &[&str]| {
        let mut all = vec!["export", "--format", "json", "--db", db];
        all.extend_from_slice(args);
        let rows: Vec<BestRow> = serde_json::from_str(&stdout_of(&all)).unwrap();
        rows
    };
    let t = count(&["--op", "transpose"]);
    assert_eq!(t.len(), 6);
    assert!(t.iter().all(|r| r.op == "transpose"));
    assert_eq!(count(&["--op", "matmul", "--gpu", "h100 80gb"]).len(), 3);
    assert_eq!(count(&["--gpu", "NVIDIA"]).len(), 9);
    let line = input_error(&["export", "--format", "csv", "--db", db, "--gpu", "A100"]);
    assert!(
        line.contains("matches --gpu 'A100'") && line.contains("GPUs: NVIDIA H100 80GB HBM3"),
        "{line}"
    );
    let line = input_error(&["export", "--format", "csv", "--db", db, "--op", "fft"]);
    assert!(line.contains("ops: matmul, transpose"), "{line}");
    let line = input_error(&["export", "--format", "cuda", "--db", db]);
    assert!(line.contains("--output DIR"), "{line}");
}

#[test]
fn rust_api_finds_exact_nearest_and_valid_entries() {
    let db = TunedDb::load(repo("tests/fixtures/export/best.csv")).unwrap();
    assert_eq!(db.rows().len(), 9);
    let best = db.best("transpose", "f32", &[1000, 1000], None).unwrap();
    assert_eq!(
        best.params,
        "TILE_DIM=64;BLOCK_ROWS=16;PAD=1;UNROLL=on;BOUNDS=specialized"
    );
    assert!(db
        .best("transpose", "f32", &[1000, 1000], Some("a100"))
        .is_none());
    assert!(db.best("transpose", "f32", &[2000, 2000], None).is_none());
    assert_eq!(
        db.nearest("transpose", "f32", &[2000, 2000], None)
            .unwrap()
            .shape,
        "1000x3000"
    );
    assert_eq!(
        db.nearest("transpose", "f32", &[8000, 8000], None)
            .unwrap()
            .shape,
        "8191x8191"
    );
    assert!(db.nearest("transpose", "f32", &[1, 2, 3], None).is_none());
    let select = |op: &str, dims: &[u64]| {
        db.select(op, "f32", dims, None, None)
            .unwrap()
            .map(|r| r.shape.clone())
    };
    // Exact first.
    assert_eq!(
        select("transpose", &[1024, 1024]).as_deref(),
        Some("1024x1024")
    );
    // 8000 is a multiple of 64 like 8192 (whose kernel has no bounds checks); 8191's
    // bounds-checked kernel is as near but is not the kernel the tuner makes for 8000x8000.
    assert_eq!(
        select("transpose", &[8000, 8000]).as_deref(),
        Some("8192x8192")
    );
    assert_eq!(
        select("transpose", &[1001, 1001]).as_deref(),
        Some("1000x1000")
    );
    // Neither 1000 nor 1008 is a multiple of 64: the same kernel as at 1000x1000.
    assert_eq!(
        select("transpose", &[1000, 1008]).as_deref(),
        Some("1000x1000")
    );
    assert_eq!(
        select("matmul", &[2000, 2000, 2000]).as_deref(),
        Some("1000x1000x1000")
    );
    // The row the tuner would never have generated for a shape is never valid there.
    let t8192 = db.best("transpose", "f32", &[8192, 8192], None).unwrap();
    assert!(valid_for(t8192, &[4096, 8000], None).unwrap());
    assert!(!valid_for(t8192, &[8191, 8191], None).unwrap());
    assert!(!valid_for(t8192, &[1000], None).unwrap());
    let src = tuned_source(best, None).unwrap();
    assert!(src.contains("#define TILE_W 64") && src.contains("#define EVEN_TILES false"));
    // A row stored before VEC, TILES_PER_BLOCK, ASPECT and CACHE existed: the kernel it had.
    assert!(src.contains("#define VEC 1") && src.contains("#define TILES_PER_BLOCK 1"));
    assert!(src.contains("transpose(float* __restrict__ out"));
    assert_eq!(shape_distance(&[1000, 1000], &[1000, 1000]), Some(0.0));
    assert_eq!(parse_dims("1000x3000"), Some(vec![1000, 3000]));
    assert_eq!(
        rename_identifier(
            "tile_transpose(); transpose();",
            "transpose",
            "transpose_8x8"
        ),
        "tile_transpose(); transpose_8x8();"
    );
}

/// Every shape the portable rule admits (what the header checks) is one the tuner's own rule
/// admits too: checked at pseudo-random shapes near and far from every tuned one.
#[test]
fn the_header_rule_never_admits_a_shape_the_tuner_rule_rejects() {
    let db = TunedDb::load(repo("tests/fixtures/export/best.csv")).unwrap();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for row in db.rows() {
        let rule = applicability(row, None).unwrap();
        assert!(!rule.exact_only(), "{} {}", row.op, row.shape);
        let mut admitted = 0;
        for _ in 0..400 {
            let dims: Vec<u64> = rule
                .dims
                .iter()
                .map(|&d| match next() % 4 {
                    0 => 1 + next() % 64,
                    3 => 64 * (1 + next() % 128),
                    1 => (d / 2 + next() % d.max(2)).max(1),
                    _ => 1 + next() % 20_000,
                })
                .collect();
            if rule.admits(&dims) {
                admitted += 1;
                assert!(
                    valid_for(row, &dims, None).unwrap(),
                    "{} {} admits {dims:?}, which the tuner would render differently",
                    row.op,
                    row.shape
                );
            }
        }
        assert!(admitted > 0, "{} {}: nothing admitted", row.op, row.shape);
    }
}

/// The arguments of `tune export --format cuda --db DB --output DIR`, then `extra`.
fn cuda_export_args<'a>(db: &'a Path, dir: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["export", "--format", "cuda", "--db", db.to_str().unwrap()];
    args.extend(["--output", dir.to_str().unwrap()]);
    args.extend(extra);
    args
}

/// Runs `tune export --format cuda` into a temporary folder; returns it.
fn export_cuda() -> (TempDir, PathBuf) {
    let (tmp, db) = db_copy();
    let dir = tmp.path().join("cuda");
    let out = stdout_of(&cuda_export_args(&db, &dir, &[]));
    assert!(
        out.contains("11 kernel source(s) (9 tuned, 2 safe default(s))"),
        "{out}"
    );
    (tmp, dir)
}

/// Runs a CUDA export that must succeed with a warning line holding `warning` and a summary
/// holding `wrote`; returns that warning line.
fn exported_with_warning(args: &[&str], warning: &str, wrote: &str) -> String {
    let out = tune_bin().args(args).output().unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stdout.contains(wrote), "{stdout}");
    stderr
        .lines()
        .find(|l| l.contains(warning))
        .unwrap_or_else(|| panic!("no warning '{warning}': {stderr}"))
        .to_string()
}

/// A database may hold rows of ops whose spec is not built in (a user's own `--spec` op, or
/// the test ops in results/best.csv). The CUDA export without `--op` skips them with one
/// warning naming them and writes the rest; asked for by `--op`, or with nothing else left,
/// they are an input error (exit 2) that says what to pass.
#[test]
fn cuda_export_skips_rows_of_ops_without_a_spec_and_says_so() {
    let (tmp, db) = db_copy();
    let mut csv = std::fs::read_to_string(&db).unwrap();
    let first = csv.lines().nth(1).unwrap().to_string();
    let op = first.split(',').next().unwrap().to_string();
    let stranger = first.replacen(&op, "my_stencil", 1);
    csv.push_str(&stranger);
    csv.push('\n');
    std::fs::write(&db, &csv).unwrap();
    let dir = tmp.path().join("cuda");
    exported_with_warning(
        &cuda_export_args(&db, &dir, &[]),
        "warning: skipping the rows of ops without a spec here: my_stencil",
        "11 kernel source(s) (9 tuned, 2 safe default(s))",
    );
    let err = input_error(&cuda_export_args(&db, &dir, &["--op", "my_stencil"]));
    assert!(err.contains("unknown op 'my_stencil'"), "{err}");
    let only = tmp.path().join("only.csv");
    let header = csv.lines().next().unwrap();
    std::fs::write(&only, format!("{header}\n{stranger}\n")).unwrap();
    let err = input_error(&cuda_export_args(&only, &dir, &[]));
    assert!(
        err.contains("nothing to export: every row is of ops without a spec here: my_stencil"),
        "{err}"
    );
    let missing = tmp.path().join("no-such-folder");
    let templates = ["--templates", missing.to_str().unwrap()];
    let err = input_error(&cuda_export_args(&db, &dir, &templates));
    assert!(err.contains("no-such-folder: no such folder"), "{err}");
}

/// A stored row whose configuration the op's spec no longer takes (a value a later version
/// dropped, a hand edit) is left out of the CUDA export with a warning naming it, and the
/// other rows are exported; when no row renders, nothing is written and it is an input error.
#[test]
fn cuda_export_skips_a_row_that_does_not_render_and_says_so() {
    let (tmp, db) = db_copy();
    let mut csv = std::fs::read_to_string(&db).unwrap();
    let first = csv.lines().nth(1).unwrap().to_string();
    assert!(first.contains("BOUNDS=always"), "{first}");
    let stale = first
        .replacen("1000x1000x1000", "1000x1000x999", 1)
        .replacen("BOUNDS=always", "BOUNDS=bogus", 1);
    csv.push_str(&stale);
    csv.push('\n');
    std::fs::write(&db, &csv).unwrap();
    let dir = tmp.path().join("cuda");
    let warning = exported_with_warning(
        &cuda_export_args(&db, &dir, &[]),
        "skipping the row matmul 1000x1000x999 f32",
        "11 kernel source(s) (9 tuned, 2 safe default(s))",
    );
    assert!(
        warning.contains("stored parameter BOUNDS=bogus"),
        "{warning}"
    );
    assert!(!warning.contains("--param"), "{warning}");
    let only = tmp.path().join("only.csv");
    let header = csv.lines().next().unwrap();
    std::fs::write(&only, format!("{header}\n{stale}\n")).unwrap();
    let empty = tmp.path().join("empty");
    let err = input_error(&cuda_export_args(&only, &empty, &[]));
    assert!(err.contains("nothing to export: no row renders"), "{err}");
    assert!(!empty.exists(), "nothing written");
}

/// A row timed with a source today's template no longer renders (its `source_hash` names
/// another source: the template changed since it was tuned) is still exported, with a warning
/// naming it and a note in its `.cu` file, and `tune best` notes it too; rows whose hash is
/// their source's today have neither.
#[test]
fn a_row_timed_with_an_earlier_source_is_exported_with_a_note() {
    let (tmp, db) = db_copy();
    let mut rows = read_best(&db).unwrap();
    for r in &mut rows {
        assert_eq!(
            (r.compute_capability.as_str(), r.nvrtc.as_str()),
            ("9.0", "13.0")
        );
        r.source_hash = source_key(&tuned_source(r, None).unwrap(), "sm_90", (13, 0));
    }
    let at = rows
        .iter()
        .position(|r| r.op == "transpose" && r.shape == "1000x1000")
        .expect("a transpose 1000x1000 row");
    rows[at].source_hash = source_key("an earlier template's source", "sm_90", (13, 0));
    let mut w = csv::Writer::from_path(&db).unwrap();
    for r in &rows {
        w.serialize(r).unwrap();
    }
    w.flush().unwrap();
    let dir = tmp.path().join("cuda");
    let warning = exported_with_warning(
        &cuda_export_args(&db, &dir, &[]),
        "the template changed since it was tuned",
        "11 kernel source(s) (9 tuned, 2 safe default(s))",
    );
    assert!(
        warning.contains("transpose 1000x1000 f32 on NVIDIA H100 80GB HBM3"),
        "{warning}"
    );
    let noted: Vec<PathBuf> = cu_files(&dir)
        .into_iter()
        .filter(|f| {
            std::fs::read_to_string(f)
                .unwrap()
                .contains("// Not timed as it reads: the template changed")
        })
        .collect();
    assert_eq!(noted.len(), 1, "{noted:?}");
    assert!(
        noted[0].ends_with("transpose_f32_1000x1000_nvidia_h100_80gb_hbm3.cu"),
        "{noted:?}"
    );
    let db = db.to_str().unwrap();
    let best = stdout_of(&[
        "best",
        "--op",
        "transpose",
        "--shape",
        "1000x1000",
        "--db",
        db,
    ]);
    assert!(
        best.contains("note        the template changed since it was tuned at"),
        "{best}"
    );
    let best = stdout_of(&[
        "best",
        "--op",
        "matmul",
        "--shape",
        "1000x1000x1000",
        "--db",
        db,
    ]);
    assert!(!best.contains("note"), "{best}");
}

/// An op whose every configuration depends on the exact shape (a template that compiles in
/// whether N is under 4096 and a step of N's size) has no safe default: its tuned kernels are exported anyway, and
/// the export says that ca_default has none for it.
#[test]
fn cuda_export_without_a_safe_default_exports_the_tuned_kernels_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let ops = tmp.path().join("ops");
    std::fs::create_dir(&ops).unwrap();
    let example = repo("examples/vector_add");
    let spec = std::fs::read_to_string(example.join("vector_add.toml")).unwrap();
    let spec = spec.replacen(
        "[defines]\n",
        "[defines]\nSMALL = \"N < 4096\"\nLOG = \"if(N > 1000000, 3, if(N > 1000, 2, 1))\"\n",
        1,
    );
    std::fs::write(ops.join("vector_add.toml"), spec).unwrap();
    let template = std::fs::read_to_string(example.join("vector_add.cu.tera")).unwrap();
    let template = template.replacen(
        "#define VECTOR {{ VECTOR }}\n",
        "#define VECTOR {{ VECTOR }}\n#define SMALL {{ SMALL }}\n#define LOGC {{ LOG }}\n",
        1,
    );
    std::fs::write(ops.join("vector_add.cu.tera"), template).unwrap();
    let header = std::fs::read_to_string(repo("tests/fixtures/export/best.csv")).unwrap();
    let header = header.lines().next().unwrap();
    let db = tmp.path().join("best.csv");
    std::fs::write(
        &db,
        format!(
            "{header}\nvector_add,10000000,f32,NVIDIA H100 80GB HBM3,9.0,\
             BLOCK=256;ITEMS=4;VECTOR=4;GRID=exact,0.0076,1046.0,GB/s,0.977,copy_vec4,cold,30,\
             0.1.0,13.0,13.0,2026-11-22T23:25:49Z,,,,,,,false,,132,sm_90\n"
        ),
    )
    .unwrap();
    let dir = tmp.path().join("cuda");
    exported_with_warning(
        &cuda_export_args(&db, &dir, &["--templates", ops.to_str().unwrap()]),
        "no safe default for vector_add f32",
        "1 kernel source(s) (1 tuned, 0 safe default(s))",
    );
    assert!(dir
        .join("vector_add_f32_10000000_nvidia_h100_80gb_hbm3.cu")
        .exists());
}

fn cu_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "cu"))
        .collect();
    files.sort();
    files
}

#[test]
fn cuda_export_compiles_with_nvrtc() {
    let compiler = Compiler::new("sm_90", None).unwrap_or_else(|e| {
        panic!(
            "this test compiles the exported kernels with NVRTC, which could not be loaded ({e}); \
             run the tests through scripts/test.sh, or first: export LD_LIBRARY_PATH=$(scripts/nvrtc-env.sh)"
        )
    });
    let (_tmp, dir) = export_cuda();
    let files = cu_files(&dir);
    assert_eq!(files.len(), 11);
    let mut all = String::new();
    for file in &files {
        let source = std::fs::read_to_string(file).unwrap();
        let kernel = file.file_stem().unwrap().to_str().unwrap();
        assert!(
            source.contains("extern \"C\" __global__") && source.contains(kernel),
            "{}",
            file.display()
        );
        let compiled = compiler
            .compile(&source)
            .unwrap_or_else(|f| panic!("{} does not compile:\n{}", file.display(), f.log));
        // The renamed kernel is the symbol in the cubin.
        let cubin = String::from_utf8_lossy(&compiled.cubin);
        assert!(
            cubin.contains(kernel),
            "{}: no symbol {kernel}",
            file.display()
        );
        all.push_str(&source);
    }
    // Every file in one translation unit: no name is defined twice, no macro leaks.
    compiler
        .compile(&all)
        .unwrap_or_else(|f| panic!("the exported files do not compile together:\n{}", f.log));
}

#[test]
fn header_compiles_as_c_and_cpp_and_selects_like_the_rust_api() {
    let (_tmp, dir) = export_cuda();
    let strict = ["-Wall", "-Wextra", "-Werror", "-pedantic"];
    let header = "cuda_autotune_tuned.h";
    let mut args: Vec<&str> = vec!["-std=c99", "-fsyntax-only", "-x", "c", header];
    args.extend(strict);
    cc("gcc", &args, &dir);
    let mut args: Vec<&str> = vec!["-std=c++11", "-fsyntax-only", "-x", "c++", header];
    args.extend(strict);
    cc("g++", &args, &dir);

    // A program that asks the header, for shapes exact, near and unmatched.
    let queries: &[(&str, &[u64])] = &[
        ("transpose", &[1000, 1000]),
        ("transpose", &[1024, 1024]),
        ("transpose", &[3072, 3072]),
        ("transpose", &[8000, 8000]),
        ("transpose", &[1001, 1001]),
        ("transpose", &[999, 1001]),
        ("transpose", &[1000, 1008]),
        ("transpose", &[2048, 4096]),
        ("transpose", &[100000, 3]),
        // Past int, which the kernels take: 1000 + 2^32 would truncate to 1000.
        ("transpose", &[4294968296, 1000]),
        ("matmul", &[2000, 2000, 2000]),
        // 1000 + 32k rows, as the 1000^3 entry's (BLOCK_SIZE=32): its grid has 65532 rows of
        // blocks, then 65536, one past the device's limit.
        ("matmul", &[2097000, 1000, 1000]),
        ("matmul", &[2097128, 1000, 1000]),
        ("matmul", &[1024, 1024, 2048]),
        ("matmul", &[1024, 1024]),
        ("fft", &[1024]),
    ];
    let mut program = String::from(
        "#include <stdio.h>\n#include \"cuda_autotune_tuned.h\"\n\n\
         static void ask(const char* op, const long long* dims, int n)\n{\n    \
         const ca_tuned_entry* e = ca_select(op, \"f32\", dims, n);\n    \
         printf(\"%s\\n\", e != NULL ? e->shape : \"NULL\");\n}\n\nint main(void)\n{\n",
    );
    for (i, (op, dims)) in queries.iter().enumerate() {
        let list: Vec<String> = dims.iter().map(|d| format!("{d}LL")).collect();
        program.push_str(&format!(
            "    const long long q{i}[] = {{{}}};\n    ask(\"{op}\", q{i}, {});\n",
            list.join(", "),
            dims.len()
        ));
    }
    program.push_str(
        "    {\n        const long long q[] = {1000LL, 1000LL};\n        \
         const ca_tuned_entry* e = ca_select_for(\"transpose\", \"f32\", \"NVIDIA H100 80GB HBM3\", q, 2);\n        \
         const ca_param* t = ca_entry_param(e, \"TILE_DIM\");\n        \
         if (e == NULL || t == NULL || t->int_value != 64 || !t->is_int) return 1;\n        \
         if (ca_select_for(\"transpose\", \"f32\", \"Other GPU\", q, 2) != NULL) return 2;\n        \
         if (strcmp(e->kernel, \"transpose_f32_1000x1000_nvidia_h100_80gb_hbm3\") != 0 || e->block[0] != 64u) return 3;\n        \
         if (strcmp(CA_TRANSPOSE_F32_DEFAULT_KERNEL, \"transpose_f32_default\") != 0) return 4;\n        \
         if (ca_entry_param(ca_default(\"transpose\", \"f32\"), \"BOUNDS\") == NULL) return 5;\n    }\n    \
         {\n        const long long big[] = {2000000000LL, 1000LL, 1000LL};\n        \
         if (ca_select_or_default(\"matmul\", \"f32\", big, 3) != NULL) return 6;\n    }\n    \
         return 0;\n}\n",
    );
    std::fs::write(dir.join("select.c"), &program).unwrap();
    let mut args: Vec<&str> = vec!["-std=c99", "-o", "select", "select.c"];
    args.extend(strict);
    cc("gcc", &args, &dir);
    let mut args: Vec<&str> = vec!["-std=c++11", "-x", "c++", "-o", "select_cpp", "select.c"];
    args.extend(strict);
    cc("g++", &args, &dir);
    let db = TunedDb::load(repo("tests/fixtures/export/best.csv")).unwrap();
    let expected: Vec<String> = queries
        .iter()
        .map(|(op, dims)| {
            db.select(op, "f32", dims, None, None)
                .unwrap()
                .map(|r| r.shape.clone())
                .unwrap_or_else(|| "NULL".into())
        })
        .collect();
    assert_eq!(
        expected,
        [
            "1000x1000",
            "1024x1024",
            "4096x4096",
            "8192x8192",
            "1000x1000",
            "1000x1000",
            "1000x1000",
            "4096x4096",
            "1000x1000",
            "NULL",
            "1000x1000x1000",
            "1000x1000x1000",
            "NULL",
            "1024x1024x1024",
            "NULL",
            "NULL"
        ]
    );
    for exe in ["./select", "./select_cpp"] {
        let out = std::process::Command::new(dir.join(exe))
            .current_dir(&dir)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{exe}: {}", text(&out.stderr));
        let got: Vec<String> = text(&out.stdout).lines().map(str::to_string).collect();
        assert_eq!(got, expected, "{exe} and TunedDb::select disagree");
    }
}

/// A compile-only run's CSV has nothing to plot (nothing ran): the report says so instead of
/// a page whose counts and charts contradict each other.
#[test]
fn report_refuses_a_compile_only_csv_and_says_why() {
    let tmp = tempfile::tempdir().unwrap();
    let csv = tmp
        .path()
        .join("transpose_1000x1000_sm-90-compile-only.csv");
    let text = std::fs::read_to_string(repo(REPORT_RUN)).unwrap();
    std::fs::write(
        &csv,
        text.replace("NVIDIA H100 80GB HBM3", "sm_90 compile-only"),
    )
    .unwrap();
    let html = tmp.path().join("r.html");
    let err = input_error(&[
        "report",
        "--csv",
        csv.to_str().unwrap(),
        "--output",
        html.to_str().unwrap(),
    ]);
    assert!(
        err.contains("a --compile-only run's CSV (sm_90 compile-only): nothing in it ran"),
        "{err}"
    );
    assert!(!html.exists());
}

#[test]
fn report_is_self_contained_html_with_the_plots() {
    let tmp = tempfile::tempdir().unwrap();
    let csv = repo("tests/fixtures/export/transpose_1000x1000_nvidia-h100-80gb-hbm3.csv");
    let out = tmp.path().join("report.html");
    let stdout = stdout_of(&[
        "report",
        "--csv",
        csv.to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(stdout.contains("report.html"), "{stdout}");
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") && html.trim_end().ends_with("</html>"));
    assert_eq!(
        html.matches("<svg").count(),
        3,
        "throughput, fraction, heat map"
    );
    assert_eq!(html.matches("</svg>").count(), 3);
    for want in [
        "transpose 1000x1000 f32 on NVIDIA H100 80GB HBM3",
        "(a) Throughput of every verified configuration",
        "(b) Fraction of the roof per configuration",
        "(c) TILE_DIM × BLOCK_ROWS: best throughput",
        "(d) Top 10",
        "roof: copy_vec4",
        "naive",
        "BOUNDS=specialized",
        "1046",
        "256 verified, 0 failed, 128 pruned",
        "BOUNDS=none needs both dimensions to be tile multiples",
        "v0366",
    ] {
        assert!(html.contains(want), "missing '{want}'");
    }
    // Self-contained: nothing is fetched.
    let outside_svg_ns = html.replace("http://www.w3.org/2000/svg", "");
    for remote in ["<script src", "<link", "http://", "https://"] {
        assert!(
            !outside_svg_ns.contains(remote),
            "report refers to {remote}"
        );
    }
    // The top-10 table has ten rows, fastest first.
    let top = &html[html.find("(d) Top 10").unwrap()..html.find("id=\"counts\"").unwrap()];
    assert_eq!(top.matches("<tr").count(), 11);

    // Another op: the heat map is over its first two parameters.
    let csv = repo("tests/fixtures/export/matmul_1024x1024x1024_nvidia-h100-80gb-hbm3.csv");
    let out = tmp.path().join("matmul.html");
    stdout_of(&[
        "report",
        "--csv",
        csv.to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
    ]);
    let html = std::fs::read_to_string(&out).unwrap();
    assert_eq!(html.matches("<svg").count(), 3);
    assert!(html.contains("BLOCK_SIZE × UNROLL") && html.contains("cublas_sgemm"));

    let line = input_error(&["report", "--csv", "/nonexistent.csv", "--output", "x.html"]);
    assert!(line.contains("/nonexistent.csv"), "{line}");
}

/// A run CSV of the current format, whose leaders were re-timed interleaved: the report
/// names the chosen winner (not merely the fastest median) and shows the intervals.
#[test]
fn report_shows_the_re_timed_winner() {
    use cuda_autotune::store::record::{Confirmed, RunInfo, Status};
    use cuda_autotune::store::run_csv::{read_run_csv, run_csv};
    let csv = repo("tests/fixtures/export/transpose_1000x1000_nvidia-h100-80gb-hbm3.csv");
    let mut records = read_run_csv(&csv).unwrap();
    let mut ok: Vec<usize> = (0..records.len())
        .filter(|&i| records[i].kind == Kind::Variant && records[i].status == Status::Ok)
        .collect();
    ok.sort_by(|&a, &b| {
        records[b]
            .throughput
            .unwrap()
            .total_cmp(&records[a].throughput.unwrap())
    });
    // The second fastest by median won the re-timing; the fastest tied with it.
    let confirm = |winner: bool, pct: f64, tied: bool| Confirmed {
        median_ms: 0.0077,
        vs_winner_pct: pct,
        ci_low_pct: pct - 1.5,
        ci_high_pct: pct + 1.5,
        tied,
        winner,
    };
    records[ok[0]].confirm = Some(confirm(false, 0.4, true));
    records[ok[1]].confirm = Some(confirm(true, 0.0, false));
    records[ok[2]].confirm = Some(confirm(false, 3.2, false));
    let winner = records[ok[1]].label();
    let info = RunInfo {
        op: "transpose".into(),
        shape: "1000x1000".into(),
        dtype: "f32".into(),
        gpu: "NVIDIA H100 80GB HBM3".into(),
        compute_capability: "9.0".into(),
        cache: "cold".into(),
        reps: 30,
        unit: "GB/s".into(),
        roof: "copy_vec4".into(),
        driver: "13.0".into(),
        nvrtc: "13.0".into(),
    };
    let params: Vec<String> = ["TILE_DIM", "BLOCK_ROWS", "PAD", "UNROLL", "BOUNDS"]
        .map(String::from)
        .to_vec();
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("run.csv");
    std::fs::write(&path, run_csv(&info, &params, &records).unwrap()).unwrap();
    let html = cuda_autotune::export::report::render_html(&path).unwrap();
    assert!(
        html.contains(&format!("<b>Best:</b> <code>{winner}</code>"))
            && html.contains("the winner of the interleaved re-timing"),
        "the re-timed winner is the best"
    );
    assert!(html.contains("re-timed vs winner (95 % interval)"));
    assert!(html.contains("+0.4 % [-1.1, +1.9] tied") && html.contains("+3.2 % [+1.7, +4.7]"));
    assert_eq!(html.matches("<svg").count(), 3);
}

/// A REPACK=1 sgemm winner runs a prologue kernel first: its exported file holds that kernel
/// under a name of its own (two such entries compile together, no extern "C" clash), the
/// comments give its launch, and the header's entry names it in `before`.
#[test]
fn cuda_export_carries_the_prologue_kernel_of_a_repacked_sgemm() {
    let params = "BM=64;BN=32;BK=32;TM=8;TN=4;WARP_N=8;VEC=4;PAD=4;STAGES=2;GROUP_M=8;\
                  OCCUPANCY=0;LOAD=async;BOUNDS=specialized;REPACK=1";
    let rows = sgemm_rows(&[("1023x1025x1027", params), ("999x1001x1003", params)]);
    let files = SgemmExport::of(&rows);
    let cu = files.ending("sgemm_f32_1023x1025x1027_nvidia_h100_80gb_hbm3.cu");
    assert!(
        cu.contains(
            "void __launch_bounds__(128)\nsgemm_f32_1023x1025x1027_nvidia_h100_80gb_hbm3_repack("
        ) && !cu.contains("sgemm_repack("),
        "{cu}"
    );
    // 1023 + 1028 block rows of 128 threads, ceil(257 / 128) = 3 blocks across.
    assert!(
        cu.contains("first sgemm_f32_1023x1025x1027_nvidia_h100_80gb_hbm3_repack: block (128, 1, 1), grid (3, 2051, 1)"),
        "{cu}"
    );
    let header = files.ending(".h");
    assert!(
        header.contains("\"sgemm_f32_1023x1025x1027_nvidia_h100_80gb_hbm3_repack\", {128u, 1u, 1u}, {3u, 2051u, 1u}"),
        "{header}"
    );
    // Defines hold no shape's value, so a kernel serves other shapes where its defines and
    // constraints agree: the REPACK=1 kernel at other odd shapes, and the float4 1024^3
    // winner (REPACK=0) at other multiples of its tiles.
    assert!(valid_for(&rows[0], &[2047, 2049, 2051], None).unwrap());
    assert!(!valid_for(&rows[0], &[1024, 1024, 1024], None).unwrap());
    let even = BestRow {
        shape: "1024x1024x1024".into(),
        params: params.replace("REPACK=1", "REPACK=0"),
        ..rows[0].clone()
    };
    assert!(valid_for(&even, &[2048, 2048, 2048], None).unwrap());
    assert!(!applicability(&even, None).unwrap().exact_only());
    files.compile_together();
}

/// sgemm rows of (shape, parameters), the rest of each row copied from the fixture's matmul row.
fn sgemm_rows(rows: &[(&str, &str)]) -> Vec<BestRow> {
    let template = committed_rows()
        .into_iter()
        .find(|r| r.op == "matmul")
        .expect("the fixture has a matmul row");
    rows.iter()
        .map(|(shape, params)| BestRow {
            op: "sgemm".into(),
            shape: shape.to_string(),
            params: params.to_string(),
            ..template.clone()
        })
        .collect()
}

/// What `tune export --format cuda` writes for some rows: (file name, contents).
struct SgemmExport(Vec<(String, String)>);

impl SgemmExport {
    fn of(rows: &[BestRow]) -> SgemmExport {
        let refs: Vec<&BestRow> = rows.iter().collect();
        let files = cuda_autotune::export::cuda::render(&refs, None, "test")
            .unwrap()
            .files;
        SgemmExport(files.into_iter().map(|f| (f.name, f.contents)).collect())
    }

    /// The contents of the file whose name ends with `end`.
    fn ending(&self, end: &str) -> String {
        self.0
            .iter()
            .find(|(name, _)| name.ends_with(end))
            .unwrap_or_else(|| panic!("no *{end}"))
            .1
            .clone()
    }

    /// Every exported .cu file compiles with NVRTC as one source (no extern "C" clash).
    fn compile_together(&self) {
        let compiler = Compiler::new("sm_90", None).unwrap_or_else(|e| {
            panic!("NVRTC could not be loaded ({e}); run the tests through scripts/test.sh")
        });
        let all: String = self
            .0
            .iter()
            .filter(|(name, _)| name.ends_with(".cu"))
            .map(|(_, contents)| contents.clone())
            .collect();
        compiler
            .compile(&all)
            .unwrap_or_else(|f| panic!("the exported files do not compile together:\n{}", f.log));
    }
}

/// An sgemm winner past 48 KB of shared memory (three cp.async stages of a 64x128x32 tile,
/// 72 KB): its exported source declares the buffers `extern __shared__`, and both the file's
/// comments and the header's entry give the bytes a launch must pass (and opt in to).
#[test]
fn cuda_export_carries_the_dynamic_shared_memory_of_a_large_sgemm_tile() {
    let params = "BM=64;BN=128;BK=32;TM=8;TN=8;WARP_N=16;VEC=4;PAD=0;STAGES={S};GROUP_M=8;\
                  OCCUPANCY=0;LOAD=async;BOUNDS=specialized;REPACK=0;WINDOWS=0;ORDER=snakek;\
                  CSTORE=scalar;KSPLIT=1;B_ELEMS=0";
    let (three, two) = (params.replace("{S}", "3"), params.replace("{S}", "2"));
    let files = SgemmExport::of(&sgemm_rows(&[
        ("4096x4096x4096", &three),
        ("2048x2048x2048", &two),
    ]));
    let big = files.ending("sgemm_f32_4096x4096x4096_nvidia_h100_80gb_hbm3.cu");
    assert!(
        big.contains("extern __shared__ __align__(16) float smem[];"),
        "{big}"
    );
    assert!(
        big.contains(
            "= block (128, 1, 1), grid (32, 64, 1), 73728 bytes of dynamic shared memory at \
             4096x4096x4096 (ca_entry_launch() gives them at another shape)."
        ),
        "{big}"
    );
    assert!(
        big.contains("dynamic shared memory = DYN_SMEM bytes"),
        "{big}"
    );
    // Two stages fit in static shared memory: nothing to pass at launch.
    let small = files.ending("sgemm_f32_2048x2048x2048_nvidia_h100_80gb_hbm3.cu");
    assert!(!small.contains("extern __shared__"), "{small}");
    assert!(small.contains("= block (128, 1, 1), grid (16, 32, 1) at 2048x2048x2048 ("));
    let header = files.ending(".h");
    assert!(header.contains("unsigned int shared_bytes;"), "{header}");
    assert!(
        header.contains("{128u, 1u, 1u}, {32u, 64u, 1u}, 73728u,"),
        "{header}"
    );
    assert!(
        header.contains("{128u, 1u, 1u}, {16u, 32u, 1u}, 0u,"),
        "{header}"
    );
    files.compile_together();
}

/// A real run CSV (transpose 1000x1000 on the H100, its verified leaders and a sample of the
/// rest) whose highest search median (v7092) is not the configuration the interleaved
/// re-timing chose (v4620).
const REPORT_RUN: &str = "tests/fixtures/report/transpose_1000x1000.csv";

/// The `<svg>` elements of a report, in order.
fn svgs(html: &str) -> Vec<&str> {
    html.split("<svg")
        .skip(1)
        .map(|s| &s[..s.find("</svg>").unwrap()])
        .collect()
}

/// The value of attribute `name` in an SVG element's text.
fn attr(element: &str, name: &str) -> Option<String> {
    let at = element.find(&format!(" {name}=\""))? + name.len() + 3;
    Some(element[at..].split('"').next()?.to_string())
}

/// (x, y, text) of every `<text>` element of an SVG.
fn svg_texts(svg: &str) -> Vec<(f64, f64, String)> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            let (open, rest) = t.split_once('>')?;
            let body = rest.split("</text>").next()?.trim().to_string();
            let num = |n: &str| attr(open, n)?.parse::<f64>().ok();
            Some((num("x")?, num("y")?, body))
        })
        .collect()
}

/// One winner everywhere: the "Best:" line, the marked table row, the circled dot of (a)
/// and the outlined cell of (c) all name the re-timed winner, and a sentence says why the
/// highest search median is not it.
#[test]
fn report_highlights_the_re_timed_winner_everywhere() {
    use cuda_autotune::export::report::{render_html, Run};
    let csv = repo(REPORT_RUN);
    let run = Run::load(&csv).unwrap();
    assert_eq!(run.winner_name(), Some("v4620"));
    assert_eq!(run.winner_rank(), Some(5));
    let html = render_html(&csv).unwrap();
    let winner = run.records.iter().find(|r| r.name == "v4620").unwrap();
    assert!(html.contains(&format!("<b>Best:</b> <code>{}</code>", winner.label())));
    // The table: exactly one marked row, the winner's.
    assert_eq!(html.matches("<tr class=\"best\">").count(), 1);
    let row = html.split("<tr class=\"best\">").nth(1).unwrap();
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(row.contains("<td>v4620</td>"), "{row}");
    // Why not the first: named, with the re-timing's verdict.
    assert!(
        html.contains("Why not <code>v7092</code>, rank 1 in (a)")
            && html
                .contains("<code>v7092</code> was measurably slower than it (+0.2 % [-1.4, +3.0]")
            && html.contains("the one with the fewest registers, then the first in the space"),
        "no explanation of the winner"
    );
    let plots = svgs(&html);
    assert_eq!(plots.len(), 3);
    // (a): the one large circle sits on the dot of rank 5 (dots are drawn in rank order).
    let circles: Vec<&str> = plots[0].split("<circle").skip(1).collect();
    let at = |c: &str| (attr(c, "cx").unwrap(), attr(c, "cy").unwrap());
    let big: Vec<&&str> = circles.iter().filter(|c| c.contains("r=\"5\"")).collect();
    assert_eq!(big.len(), 1, "one circled dot");
    let dots: Vec<&&str> = circles.iter().filter(|c| c.contains("r=\"2\"")).collect();
    assert_eq!(
        at(big[0]),
        at(dots[4]),
        "the circle is not on the winner's dot"
    );
    assert_ne!(at(big[0]), at(dots[0]));
    // (c): the one thick red outline encloses the column labelled TILE_DIM=32 and the row
    // labelled BLOCK_ROWS=16, the winner's values.
    let (tile, rows) = (
        Run::param_of(winner, "TILE_DIM"),
        Run::param_of(winner, "BLOCK_ROWS"),
    );
    assert_eq!((tile.as_str(), rows.as_str()), ("32", "16"));
    let outline: Vec<&str> = plots[2]
        .split("<polyline")
        .skip(1)
        .filter(|p| p.contains("stroke-width=\"4\""))
        .collect();
    assert_eq!(outline.len(), 1);
    let corners: Vec<(f64, f64)> = attr(outline[0], "points")
        .unwrap()
        .split_whitespace()
        .map(|p| {
            let (x, y) = p.split_once(',').unwrap();
            (x.parse().unwrap(), y.parse().unwrap())
        })
        .collect();
    let (x0, x1) = (
        corners[0].0.min(corners[1].0),
        corners[0].0.max(corners[1].0),
    );
    let (y0, y1) = (
        corners[1].1.min(corners[2].1),
        corners[1].1.max(corners[2].1),
    );
    let texts = svg_texts(plots[2]);
    // Axis labels lie outside the cells: below them (x labels) or left of them (y labels).
    let x_label = texts
        .iter()
        .find(|(_, y, t)| *t == tile && *y > y1)
        .expect("a TILE_DIM label");
    let y_label = texts
        .iter()
        .find(|(x, _, t)| *t == rows && *x < x0)
        .expect("a BLOCK_ROWS label");
    assert!(
        (x0..=x1).contains(&x_label.0),
        "outline {x0}..{x1}, TILE_DIM=32 at {}",
        x_label.0
    );
    assert!(
        (y0..=y1).contains(&y_label.1),
        "outline {y0}..{y1}, BLOCK_ROWS=16 at {}",
        y_label.1
    );
}

/// Plot (b) is coloured by the parameter with the most values among those that vary, never
/// by one with a single value; with no parameter varying, one colour and no legend.
#[test]
fn report_colours_by_the_parameter_with_the_most_values() {
    use cuda_autotune::export::report::{render_run, Run};
    use cuda_autotune::store::record::Status;
    let run = Run::load(&repo(REPORT_RUN)).unwrap();
    let ok: Vec<_> = run
        .records
        .iter()
        .filter(|r| r.kind == Kind::Variant && r.status == Status::Ok)
        .collect();
    let count = |p: &str| {
        let mut v: Vec<String> = ok.iter().map(|r| Run::param_of(r, p)).collect();
        v.sort();
        v.dedup();
        v.len()
    };
    assert_eq!(count("READ"), 1);
    assert_eq!(run.color_parameter(), Some("BLOCK_ROWS"));
    for p in &run.params {
        assert!(count(p) <= count("BLOCK_ROWS"), "{p} has more values");
    }
    let html = render_run(&run, "run.csv").unwrap();
    let fraction = svgs(&html)[1];
    assert!(fraction.contains("BLOCK_ROWS=16") && !fraction.contains("READ="));
    assert!(html.contains("coloured by BLOCK_ROWS, the parameter with the most values"));
    // Parameters with one value in the top ten are said once, not given a column each; the
    // re-timing column wraps (the table fits a 1400 px window).
    assert!(!html.contains("<th>READ</th>") && !html.contains("<th>PAD</th>"));
    assert!(html.contains("The same in all of them: <code>PAD=1 UNROLL=on"));
    assert!(html.contains("<th>BLOCK_ROWS</th>") && !html.contains("nowrap\">"));

    // Only configurations of one TILE_DIM and BLOCK_ROWS: another parameter colours (b).
    let mut narrow = run.clone();
    narrow.records.retain(|r| {
        r.kind != Kind::Variant
            || (Run::param_of(r, "TILE_DIM") == "32" && Run::param_of(r, "BLOCK_ROWS") == "16")
    });
    let chosen = narrow
        .color_parameter()
        .expect("some parameter still varies");
    assert!(
        !["TILE_DIM", "BLOCK_ROWS", "READ", "PAD"].contains(&chosen),
        "{chosen}"
    );
    // One configuration: nothing varies, so one colour and no legend.
    let mut single = run.clone();
    let mut first = true;
    single
        .records
        .retain(|r| r.kind != Kind::Variant || std::mem::take(&mut first));
    assert_eq!(single.color_parameter(), None);
    let html = render_run(&single, "run.csv").unwrap();
    assert!(!svgs(&html)[1].contains("=16") && html.contains("in one colour"));
}

/// The header alone tells a caller what an sgemm entry's scratch arguments (AP, BP) are and how
/// many elements they must hold at the caller's shape, and each entry says whether its kernels
/// use them: a REPACK=1 entry does (its repack kernel fills them), a REPACK=0 one never does.
#[test]
fn cuda_header_states_the_scratch_buffers_and_which_entries_use_them() {
    let repack = "BM=64;BN=32;BK=32;TM=8;TN=4;WARP_N=8;VEC=4;PAD=4;STAGES=2;GROUP_M=8;\
                  OCCUPANCY=0;LOAD=async;BOUNDS=specialized;REPACK=1";
    let plain = "BM=64;BN=128;BK=32;TM=8;TN=8;WARP_N=16;VEC=4;PAD=0;STAGES=2;GROUP_M=8;\
                 OCCUPANCY=0;LOAD=async;BOUNDS=specialized;REPACK=0;WINDOWS=0;ORDER=snakek;\
                 CSTORE=scalar;KSPLIT=1;B_ELEMS=0";
    let files = SgemmExport::of(&sgemm_rows(&[
        ("1023x1025x1027", repack),
        ("2048x2048x2048", plain),
    ]));
    let header = files.ending(".h");
    let rules = &header[header.find("/* Launch rules").expect("launch rules")..];
    let rules = &rules[..rules.find("*/").unwrap()];
    for line in [
        "Scratch buffer AP of the arguments: if(K % 4 == 0, 1, M * ceil_div(K, 4) * 4) elements",
        "Scratch buffer BP of the arguments: if(K % 4 == 0 && N % 4 == 0, 1, \
         ceil_div(K, 4) * 4 * ceil_div(N, 4) * 4) elements",
    ] {
        assert!(rules.contains(line), "{rules}");
    }
    assert!(header.contains("    int scratch;"), "{header}");
    // The last field of an entry's initializer, on a line of its own.
    let scratch_of = |shape: &str| -> String {
        let start = header
            .find(&format!("{{\"sgemm\", \"{shape}\""))
            .unwrap_or_else(|| panic!("no entry of {shape}: {header}"));
        header[start..]
            .lines()
            .map(str::trim)
            .find(|l| *l == "0}," || *l == "1},")
            .expect("the entry's last line")
            .to_string()
    };
    assert_eq!(scratch_of("1023x1025x1027"), "1},");
    assert_eq!(scratch_of("2048x2048x2048"), "0},");
    let cu = files.ending("sgemm_f32_1023x1025x1027_nvidia_h100_80gb_hbm3.cu");
    assert!(
        cu.contains("// Scratch buffer AP of the arguments: if(K % 4 == 0, 1, M * ceil_div(K, 4) * 4) elements"),
        "{cu}"
    );
    files.compile_together();
}

/// Two ops built on one template (the same spec `kernel`) each get a safe default file of
/// their own: the first keeps `<kernel>_<dtype>_default.cu`, the second's name gets `_2`, the
/// header's default entries name those files, and the summary counts the files written.
#[test]
fn cuda_export_gives_two_ops_of_one_template_a_safe_default_each() {
    let (tmp, db) = db_copy();
    let templates = tmp.path().join("templates");
    std::fs::create_dir(&templates).unwrap();
    for f in std::fs::read_dir(repo("templates")).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, templates.join(f.file_name().unwrap())).unwrap();
    }
    let spec = std::fs::read_to_string(templates.join("transpose.toml")).unwrap();
    let v2 = spec
        .replacen("name = \"transpose\"", "name = \"transpose_v2\"", 1)
        .replacen("values = [16, 32, 64]", "values = [16]", 1);
    assert!(v2.contains("name = \"transpose_v2\"") && v2.contains("values = [16]\n"));
    std::fs::write(templates.join("transpose_v2.toml"), v2).unwrap();
    let csv = std::fs::read_to_string(&db).unwrap();
    let header = csv.lines().next().unwrap();
    let row = csv
        .lines()
        .find(|l| l.starts_with("transpose,1000x1000,f32,"))
        .expect("a transpose 1000x1000 f32 row");
    let v2_row =
        row.replacen("transpose,", "transpose_v2,", 1)
            .replacen("TILE_DIM=64", "TILE_DIM=16", 1);
    std::fs::write(&db, format!("{header}\n{row}\n{v2_row}\n")).unwrap();
    let dir = tmp.path().join("cuda");
    let out = stdout_of(&cuda_export_args(
        &db,
        &dir,
        &["--templates", templates.to_str().unwrap()],
    ));
    assert!(
        out.contains("wrote 4 kernel source(s) (2 tuned, 2 safe default(s))"),
        "{out}"
    );
    let names: Vec<String> = cu_files(&dir)
        .iter()
        .map(|p| p.file_name().unwrap().to_str().unwrap().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "transpose_f32_1000x1000_nvidia_h100_80gb_hbm3.cu",
            "transpose_f32_1000x1000_nvidia_h100_80gb_hbm3_2.cu",
            "transpose_f32_default.cu",
            "transpose_f32_default_2.cu",
        ]
    );
    let first = std::fs::read_to_string(dir.join("transpose_f32_default.cu")).unwrap();
    let second = std::fs::read_to_string(dir.join("transpose_f32_default_2.cu")).unwrap();
    assert!(first.contains("// transpose kernel for f32"), "{first}");
    assert!(
        second.contains("// transpose_v2 kernel for f32"),
        "{second}"
    );
    assert!(second.contains("TILE_DIM=16"), "{second}");
    assert!(second.contains("transpose_f32_default_2("), "{second}");
    let h = std::fs::read_to_string(dir.join("cuda_autotune_tuned.h")).unwrap();
    assert!(
        h.contains("#define CA_TRANSPOSE_F32_DEFAULT_SOURCE \"transpose_f32_default.cu\""),
        "{h}"
    );
    assert!(
        h.contains("#define CA_TRANSPOSE_V2_F32_DEFAULT_SOURCE \"transpose_f32_default_2.cu\""),
        "{h}"
    );
    assert!(
        h.contains("\"transpose_f32_default_2\", \"transpose_f32_default_2.cu\""),
        "{h}"
    );
}

/// Four rows of results/best.csv (tests/fixtures/export/applic.csv), among them two f32
/// transposes of transposed shapes (2000x300, 300x2000), equally near to the shapes `Nx300`
/// and `300xN` for N up to 300.
const APPLIC: &str = "tests/fixtures/export/applic.csv";

/// Where two entries are equally near a shape, the header's `ca_select` and
/// `TunedDb::select` pick the same one (the first in file order).
#[test]
fn header_and_rust_api_break_distance_ties_alike() {
    let (tmp, db) = {
        let tmp = tempfile::tempdir().unwrap();
        let db = tmp.path().join("best.csv");
        std::fs::copy(repo(APPLIC), &db).unwrap();
        (tmp, db)
    };
    let dir = tmp.path().join("cuda");
    stdout_of(&cuda_export_args(&db, &dir, &[]));
    let queries: Vec<[u64; 2]> = (1..=300).flat_map(|n| [[n, 300], [300, n]]).collect();
    let mut program = String::from(
        "#include <stdio.h>\n#include \"cuda_autotune_tuned.h\"\n\nint main(void)\n{\n    \
         static const long long q[][2] = {\n",
    );
    for [a, b] in &queries {
        program.push_str(&format!("        {{{a}LL, {b}LL}},\n"));
    }
    program.push_str(
        "    };\n    size_t i;\n    for (i = 0; i < sizeof(q) / sizeof(q[0]); ++i) {\n        \
         const ca_tuned_entry* e = ca_select(\"transpose\", \"f32\", q[i], 2);\n        \
         printf(\"%s\\n\", e != NULL ? e->shape : \"NULL\");\n    }\n    return 0;\n}\n",
    );
    std::fs::write(dir.join("ties.c"), &program).unwrap();
    cc("gcc", &["-std=c99", "-Wall", "-o", "ties", "ties.c"], &dir);
    let out = std::process::Command::new(dir.join("ties"))
        .current_dir(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let got: Vec<String> = text(&out.stdout).lines().map(str::to_string).collect();
    let db = TunedDb::load(&db).unwrap();
    let expected: Vec<String> = queries
        .iter()
        .map(|q| {
            db.select("transpose", "f32", q, None, None)
                .unwrap()
                .map_or_else(|| "NULL".to_string(), |r| r.shape.clone())
        })
        .collect();
    assert!(
        expected.iter().filter(|s| *s != "NULL").count() > 100,
        "{expected:?}"
    );
    // 16x300 is as far from 2000x300 as from 300x2000 (a ratio of 125): the first in the
    // file, 2000x300, by C's arithmetic.
    let at = queries.iter().position(|q| *q == [16, 300]).unwrap();
    assert_eq!(expected[at], "2000x300");
    assert_eq!(got, expected, "ca_select and TunedDb::select disagree");
}

/// Every row kind of the shipped database (tests/fixtures/export/rules.csv: sgemm with
/// split-K, tails, repacks and windows; transposes with slabs, chunks and vectors; matmul).
const RULES: &str = "tests/fixtures/export/rules.csv";

/// The header's `ca_entry_admits`, which runs each entry's rule written out in C, admits
/// exactly the shapes that `Applicability::admits` does, for every tuned entry and safe
/// default, at shapes near, at other residues of and far from the tuned ones; and
/// `ca_entry_launch` gives the launch the tuner evaluates at the first of those it admits.
#[test]
fn header_rules_admit_and_launch_as_the_tuner_does() {
    use cuda_autotune::export::kernel::{
        applicability_of, candidate_for, default_applicability, params_text, safe_default,
        specialize, Applicability, TunedKernel,
    };
    use cuda_autotune::model::shape::Shape;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cuda");
    stdout_of(&cuda_export_args(&repo(RULES), &dir, &[]));
    // Per entry, tuned ones first, then the defaults: its kernel, where it may run.
    let mut entries: Vec<(TunedKernel, Applicability)> = Vec::new();
    let mut defaults: Vec<(TunedKernel, Applicability)> = Vec::new();
    for row in &read_best(&repo(RULES)).unwrap() {
        let tuned = specialize(row, None).unwrap();
        let a = applicability_of(&tuned);
        entries.push((tuned, a));
        let known = defaults.iter().any(|(t, _)| {
            (t.op.name(), t.op.dtype.name()) == (row.op.as_str(), row.dtype.as_str())
        });
        if !known {
            let tuned = safe_default(&row.op, &row.dtype, None).unwrap();
            let a = default_applicability(&tuned).unwrap();
            defaults.push((tuned, a));
        }
    }
    entries.extend(defaults);
    // Per number of dimensions, shapes mixed from values near every tuned one.
    let mut seed = 12345u64;
    let mut next = |n: usize| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((seed >> 33) as usize) % n
    };
    let mut queries: Vec<Vec<u64>> = Vec::new();
    for ndims in [2usize, 3] {
        let tuned_dims = entries
            .iter()
            .map(|(t, _)| &t.shape.dims)
            .filter(|d| d.len() == ndims);
        let mut pool: Vec<u64> = vec![1, 2, 3, 7, 31, 32, 33, 64, 1000, 4096, 65_537, 1 << 22];
        for dims in tuned_dims.clone() {
            for &t in dims {
                pool.extend([
                    t.saturating_sub(2).max(1),
                    t,
                    t + 1,
                    t + 3,
                    t + 64,
                    2 * t + 5,
                ]);
            }
        }
        for _ in 0..600 {
            queries.push((0..ndims).map(|_| pool[next(pool.len())]).collect());
        }
        queries.extend(tuned_dims.cloned());
    }
    // The C program: per entry, a line of 0 and 1 (admits, per query of its number of
    // dimensions), then a line with the launch at each of the first 8 shapes it admits.
    let mut program = String::from(
        "#include <stdio.h>\n#include \"cuda_autotune_tuned.h\"\n\n\
         static const long long q[][4] = {\n",
    );
    for q in &queries {
        let mut dims: Vec<String> = q.iter().map(|d| format!("{d}LL")).collect();
        dims.resize(3, "0LL".into());
        program.push_str(&format!("    {{{}LL, {}}},\n", q.len(), dims.join(", ")));
    }
    program.push_str(
        "};\n\nstatic void row(const ca_tuned_entry* e)\n{\n    size_t i;\n    int n = 0, k;\n    \
         ca_launch l;\n    \
         for (i = 0; i < sizeof(q) / sizeof(q[0]); ++i) {\n        \
         if (q[i][0] == e->ndims) putchar(ca_entry_admits(e, &q[i][1], e->ndims) ? '1' : '0');\n    \
         }\n    putchar('\\n');\n    \
         for (i = 0; i < sizeof(q) / sizeof(q[0]) && n < 8; ++i) {\n        \
         if (q[i][0] != e->ndims || !ca_entry_launch(e, &q[i][1], e->ndims, &l)) continue;\n        \
         ++n;\n        \
         for (k = 0; k < 3; ++k) printf(\"%u %u %u %u \", l.block[k], l.grid[k], l.before_block[k], l.before_grid[k]);\n        \
         printf(\"%u;\", l.shared_bytes);\n    }\n    putchar('\\n');\n}\n\n\
         int main(void)\n{\n    int i;\n    \
         for (i = 0; i < CA_TUNED_COUNT; ++i) row(&ca_tuned_entries[i]);\n    \
         for (i = 0; i < CA_DEFAULT_COUNT; ++i) row(&ca_default_entries[i]);\n    \
         return 0;\n}\n",
    );
    std::fs::write(dir.join("rules.c"), &program).unwrap();
    cc(
        "gcc",
        &[
            "-std=c99", "-Wall", "-Wextra", "-Werror", "-O1", "-o", "rules", "rules.c",
        ],
        &dir,
    );
    let out = std::process::Command::new(dir.join("rules"))
        .current_dir(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let got: Vec<String> = text(&out.stdout).lines().map(str::to_string).collect();
    assert_eq!(
        got.len(),
        2 * entries.len(),
        "lines for the header's entries"
    );
    let (mut ones, mut zeros, mut launches) = (0, 0, 0);
    for (i, (tuned, a)) in entries.iter().enumerate() {
        let mine: Vec<&Vec<u64>> = queries.iter().filter(|q| q.len() == a.dims.len()).collect();
        let bits: String = mine
            .iter()
            .map(|q| if a.admits(q) { '1' } else { '0' })
            .collect();
        ones += bits.matches('1').count();
        zeros += bits.matches('0').count();
        assert_eq!(got[2 * i], bits, "entry {i}: C and Rust admit differently");
        // The launch the tuner evaluates there, with the entry's parameters.
        let params = params_text(tuned);
        let mut want = String::new();
        for q in mine.iter().filter(|q| a.admits(q)).take(8) {
            let shape = Shape { dims: q.to_vec() };
            let c = candidate_for(&tuned.op, &shape, &params, &tuned.limits).unwrap();
            let l = c.launch.unwrap();
            let first = c.prologue.first().map(|(_, d)| *d);
            let rule = a.rule.as_ref().unwrap();
            assert_eq!(rule.launch_at(q), (l, first), "entry {i} at {q:?}");
            let before = first.unwrap_or_default();
            let t = |v: (u32, u32, u32)| [v.0, v.1, v.2];
            for k in 0..3 {
                want.push_str(&format!(
                    "{} {} {} {} ",
                    t(l.block)[k],
                    t(l.grid)[k],
                    t(before.block)[k],
                    t(before.grid)[k]
                ));
            }
            want.push_str(&format!("{};", l.shared));
            launches += 1;
        }
        assert_eq!(
            got[2 * i + 1],
            want,
            "entry {i}: the launch at {:?}",
            a.dims
        );
    }
    assert!(
        ones > 1000 && zeros > 1000,
        "{ones} admitted, {zeros} refused"
    );
    assert!(launches > 500, "{launches} launches");
}
