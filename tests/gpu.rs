//! GPU integration tests: run the real pipeline on the GPU. Each test prints that it was
//! skipped when no GPU is present. They share one process and the device's primary context,
//! and the fault test resets that context, so they run one at a time under a lock.
//! `scripts/gpu.sh tests` runs them in the parts its table names, each test in a process of its
//! own; tests/gpu_parts.rs fails until a new test here is added to one part.

use cuda_autotune::measure::bench::{BenchSettings, CacheState};
use cuda_autotune::pipeline::options::{Isolation, TuneOptions};
use cuda_autotune::pipeline::outcome::TuneOutcome;
use cuda_autotune::pipeline::tuner::tune;
use cuda_autotune::store::record::{Kind, Record, Status};
use cuda_autotune::store::run_csv::read_run_csv;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

mod common;
use common::{skip, tune_exe};

static GPU: Mutex<()> = Mutex::new(());

fn options(shape: &str, out: &Path) -> TuneOptions {
    TuneOptions {
        shape: shape.into(),
        bench: BenchSettings {
            warmup: 1,
            reps: 3,
            cache: CacheState::Warm,
        },
        out_dir: out.to_path_buf(),
        isolation: Isolation::Workers(tune_exe()),
        jobs: 4,
        watchdog_s: 20.0,
        seed: 7,
        confirm_rounds: 10,
        ..TuneOptions::default()
    }
}

fn param<'a>(r: &'a Record, name: &str) -> &'a str {
    r.params
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
        .unwrap_or("")
}

fn variants(o: &TuneOutcome) -> impl Iterator<Item = &Record> {
    o.records.iter().filter(|r| r.kind == Kind::Variant)
}

/// Fails the test with every failed record of the run (`what` names the run).
fn assert_none_failed(o: &TuneOutcome, what: &str) {
    let failed: Vec<String> = o
        .records
        .iter()
        .filter(|r| r.status == Status::Failed)
        .map(|r| format!("{} {}: {}", r.name, r.label(), r.error))
        .collect();
    assert!(
        failed.is_empty(),
        "{what}: failures:\n{}",
        failed.join("\n")
    );
}

/// A copy of templates/ with the transpose template edited, for planted faults.
fn templates_with(edit: impl Fn(String) -> String) -> (tempfile::TempDir, PathBuf) {
    templates_with_edited("transpose.cu.tera", edit)
}

/// `text` with a planted change: `from` (which must still be in the template: a test whose
/// fault silently failed to plant would pass for the wrong reason) replaced by `to`.
fn plant(text: &str, from: &str, to: &str) -> String {
    assert!(
        text.contains(from),
        "the template no longer contains {from:?}: update the planted fault"
    );
    text.replace(from, to)
}

/// A copy of templates/ with the template `file` edited.
fn templates_with_edited(
    file: &str,
    edit: impl Fn(String) -> String,
) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("templates");
    for entry in std::fs::read_dir(&root).unwrap() {
        let path = entry.unwrap().path();
        let mut text = std::fs::read_to_string(&path).unwrap();
        if path.file_name().unwrap() == file {
            text = edit(text);
        }
        std::fs::write(dir.path().join(path.file_name().unwrap()), text).unwrap();
    }
    let p = dir.path().to_path_buf();
    (dir, p)
}

#[test]
fn every_variant_verifies_on_multiple_and_odd_shapes() {
    if skip("every_variant_verifies_on_multiple_and_odd_shapes") {
        return;
    }
    let _lock = GPU.lock().unwrap_or_else(|e| e.into_inner());
    for shape in ["1000x1000", "1024x1024", "999x1001", "33x4097"] {
        let out = tempfile::tempdir().unwrap();
        let mut opts = options(shape, out.path());
        opts.strategy = "exhaustive".into();
        let o = tune(&opts).unwrap();
        assert_none_failed(&o, shape);
        let ok = variants(&o).filter(|r| r.status == Status::Ok).count();
        assert!(ok >= 200, "{shape}: only {ok} variants verified");
        assert!(o
            .records
            .iter()
            .filter(|r| r.kind == Kind::Baseline)
            .all(|r| r.status == Status::Ok));
        let best = &o.records[o.best.expect("a best variant")];
        assert!(best.frac_of_roof.unwrap() > 0.0);
        // The CSV on disk holds the same rows.
        let back = read_run_csv(o.csv_path.as_ref().unwrap()).unwrap();
        assert_eq!(back.len(), o.records.len());
        println!(
            "{shape}: {ok} verified, best {} at {:.1} GB/s",
            best.label(),
            best.throughput.unwrap()
        );
    }
}

/// Every default transpose variant of the other element types verifies: at an odd shape
/// (vectors peeled per row, partial tiles) and at shapes where vectors are aligned, tiles
/// partial (1000) or whole (1024). The copy baselines (the roof) verify too, and the files
/// are named by the dtype.
#[test]
fn every_variant_verifies_in_f64_and_f16() {
    if skip("every_variant_verifies_in_f64_and_f16") {
        return;
    }
    let _lock = GPU.lock().unwrap_or_else(|e| e.into_inner());
    for dtype in ["f64", "f16"] {
        for shape in ["33x4097", "1000x1000", "1024x1024"] {
            let out = tempfile::tempdir().unwrap();
            let mut opts = options(shape, out.path());
            opts.dtype = Some(dtype.into());
            opts.strategy = "exhaustive".into();
            let o = tune(&opts).unwrap();
            assert_none_failed(&o, &format!("{dtype} {shape}"));
            let ok: Vec<&Record> = variants(&o).filter(|r| r.status == Status::Ok).collect();
            assert!(
                ok.len() >= 200,
                "{dtype} {shape}: only {} verified",
                ok.len()
            );
            // Vectors at every shape: at the odd stride each row is peeled to aligned vectors.
            let vectors = ok.iter().filter(|r| param(r, "VEC") != "1").count();
            assert!(vectors > 0, "{dtype} {shape}: no VEC>1 variant verified");
            assert!(o
                .records
                .iter()
                .filter(|r| r.kind == Kind::Baseline)
                .all(|r| r.status == Status::Ok));
            let info = o.info.as_ref().unwrap();
            assert_eq!(info.dtype, dtype);
            let csv = o.csv_path.as_ref().unwrap();
            assert!(
                csv.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .contains(&format!("_{shape}_{dtype}_")),
                "{}",
                csv.display()
            );
            let best = &o.records[o.best.expect("a best variant")];
            println!(
                "{dtype} {shape}: {} verified, best {} at {:.1} GB/s ({:.1} % of {})",
                ok.len(),
                best.label(),
                best.throughput.unwrap(),
                best.frac_of_roof.unwrap_or(0.0) * 100.0,
                info.roof
            );
        }
    }
}

/// Shapes whose rows start at every offset within a chunk and whose edges cut tiles, chunks
/// and sectors: one row, one column, thin and wide.
const ODD_SHAPES: [&str; 6] = ["7x5", "1x9", "9x1", "33x4097", "4097x33", "999x1001"];

/// Runs `params` at `shapes` in every element type: none fails, at least `min_ok` verify, and
/// every one has `NAME=value` of `only`.
fn verify_in_every_dtype(shapes: &[&str], params: &[&str], min_ok: usize, only: (&str, &str)) {
    verify_in(&["f32", "f64", "f16"], shapes, params, min_ok, only)
}

/// As [`verify_in_every_dtype`], in the element types `dtypes`.
fn verify_in(dtypes: &[&str], shapes: &[&str], params: &[&str], min_ok: usize, only: (&str, &str)) {
    let _lock = GPU.lock().unwrap_or_else(|e| e.into_inner());
    for &dtype in dtypes {
        for &shape in shapes {
            let out = tempfile::tempdir().unwrap();
            let mut opts = options(shape, out.path());
            opts.dtype = Some(dtype.into());
            opts.params = params.iter().map(|p| p.to_string()).collect();
            opts.strategy = "exhaustive".into();
            let o = tune(&opts).unwrap();
            let what = format!("{dtype} {shape}");
            assert_none_failed(&o, &what);
            let ok: Vec<&Record> = variants(&o).filter(|r| r.status == Status::Ok).collect();
            assert!(ok.len() >= min_ok, "{what}: only {} verified", ok.len());
            assert!(
                ok.iter().all(|r| param(r, only.0) == only.1),
                "{what}: only {}={} was asked for",
                only.0,
                only.1
            );
        }
    }
}

/// READ=chunk: rows of in read as aligned 16-byte chunks and placed element by element: every
/// variant verifies bit for bit at the odd shapes in every element type.
#[test]
fn chunk_read_transpose_variants_verify_at_odd_shapes_in_every_dtype() {
    if skip("chunk_read_transpose_variants_verify_at_odd_shapes_in_every_dtype") {
        return;
    }
    verify_in_every_dtype(
        &ODD_SHAPES,
        // One cache hint: the L2 hint changes the load instruction, not what it reads, and
        // the RUNS=chunk test below verifies both.
        &[
            "VEC=1",
            "RUNS=sector",
            "READ=chunk",
            "BOUNDS=always,edge",
            "CACHE=default",
            // The block order moves whole tiles, not what a tile reads: the RUNS=chunk test
            // below verifies both orders.
            "BLOCK_ORDER=columns",
        ],
        200,
        ("READ", "chunk"),
    );
}

/// RUNS=chunk: every global access an aligned 16-byte vector (rows of in read as the chunks
/// that hold them, runs of out gathered a chunk at a time from sector boundaries, heads and
/// tails element by element): every variant verifies bit for bit at the odd shapes in every
/// element type, and where only the rows of `in` are odd (rows of `out` whole sectors, so
/// every run starts at its tile's first row), in both block orders (the edge tiles, which
/// check bounds, are found from the tile a block takes, not from its place in the grid).
#[test]
fn chunk_runs_transpose_variants_verify_at_odd_shapes_in_every_dtype() {
    if skip("chunk_runs_transpose_variants_verify_at_odd_shapes_in_every_dtype") {
        return;
    }
    let shapes = [&ODD_SHAPES[..], &["64x4097", "4096x33"]].concat();
    verify_in_every_dtype(
        &shapes,
        &["RUNS=chunk", "BOUNDS=always,edge"],
        70,
        ("RUNS", "chunk"),
    );
}

/// LAYOUT=slab: a short side held in registers. Every slab variant verifies bit for bit in
/// every element type with the short side as rows and as columns, at long sides that are and
/// are not multiples of every VEC (rows that start inside a vector), with a partial last warp,
/// and at a short side of one element.
#[test]
fn slab_transpose_variants_verify_at_short_sides_in_every_dtype() {
    if skip("slab_transpose_variants_verify_at_short_sides_in_every_dtype") {
        return;
    }
    verify_in(
        &["f32", "f64", "f16", "bf16"],
        &["3x4096", "7x1001", "1001x5", "4099x17", "1x999", "32x333"],
        &["LAYOUT=slab"],
        8,
        ("LAYOUT", "slab"),
    );
}

/// A matrix with more groups of tile rows than grid.y may hold (65535): the rest go to
/// grid.z, one group a block. Every run layout, with one and (but RUNS=chunk) two tiles a
/// block, in both block orders, verifies.
#[test]
fn tall_matrices_past_65535_tile_rows_verify() {
    if skip("tall_matrices_past_65535_tile_rows_verify") {
        return;
    }
    let _lock = GPU.lock().unwrap_or_else(|e| e.into_inner());
    // 4200001 rows: 131251 tiles of 32 rows, 262501 of 16.
    let out = tempfile::tempdir().unwrap();
    let mut opts = options("4200001x3", out.path());
    opts.params = [
        "TILE_DIM=16,32",
        "BLOCK_ROWS=4",
        "RUNS=tile,sector,chunk",
        "VEC=1,2",
        "BOUNDS=always,edge",
        "ASPECT=square",
        "TILES_PER_BLOCK=1,2",
        "OCCUPANCY=0",
        "BLOCK_ORDER=rows,columns",
    ]
    .map(String::from)
    .to_vec();
    let o = tune(&opts).unwrap();
    assert_none_failed(&o, "4200001x3");
    let ok: Vec<&Record> = variants(&o).filter(|r| r.status == Status::Ok).collect();
    for (name, value) in [
        ("RUNS", "tile"),
        ("RUNS", "sector"),
        ("RUNS", "chunk"),
        ("BLOCK_ORDER", "rows"),
        ("BLOCK_ORDER", "columns"),
    ] {
        assert!(
            ok.iter().any(|r| param(r, name) == value),
            "no {name}={value} variant verified"
        );
    }
    assert!(ok.len() >= 20, "only {} verified", ok.len());
}

/// Without `--pruned-rows` (the default) pruned configurations are left out of the run CSV
/// and nothing else: the measured rows are the same as in a full CSV, and the outcome still
/// counts them by reason.
#[test]
fn pruned_rows_can_be_left_out_of_the_run_csv() {
    if skip("pruned_rows_can_be_left_out_of_the_run_csv") {
        return;
    }
    let _lock = GPU.lock().unwrap_or_else(|e| e.into_inner());
    let csv_rows = |pruned_rows: bool| {
        let out = tempfile::tempdir().unwrap();
        let mut opts = options("1000x1000", out.path());
        opts.pruned_rows = pruned_rows;
        // BOUNDS=none is pruned at 1000x1000 (not a multiple of 32).
        opts.params = ["TILE_DIM=32", "BLOCK_ROWS=8", "BOUNDS=none,always"]
            .iter()
            .map(|p| p.to_string())
            .collect();
        opts.params.extend(common::classic_transpose_params());
        let o = tune(&opts).unwrap();
        assert_eq!(
            o.prune_reasons.iter().map(|(_, n)| n).sum::<usize>(),
            1,
            "the summary still counts the pruned configuration"
        );
        assert_eq!(
            variants(&o).filter(|r| r.status == Status::Pruned).count(),
            usize::from(pruned_rows)
        );
        read_run_csv(o.csv_path.as_ref().unwrap()).unwrap()
    };
    let names = |rows: &[Record], status: Status| -> Vec<String> {
        rows.iter()
            .filter(|r| r.status == status)
            .map(|r| format!("{} {}", r.kind, r.name))
            .collect()
    };
    let full = csv_rows(true);
    let lean = csv_rows(false);
    assert_eq!(names(&full, Status::Pruned).len(), 1);
    assert!(names(&lean, Status::Pruned).is_empty());
    assert_eq!(names(&lean, Status::Ok), names(&full, Status::Ok));
    assert_eq!(lean.len() + 1, full.len());
}

#[test]
fn wrong_results_are_failed_never_best() {
    if skip("wrong_results_are_failed_never_best") {
        return;
    }
    let _lock = GPU.lock().unwrap_or_else(|e| e.into_inner());
    // PAD=1 variants flip the lowest bit of what they write: the comparison of raw bits must
    // catch it for elements of every size.
    let (_keep, dir) = templates_with(|t| {
        plant(
            &t,
            "STORE(&out[oy * rows + ox], tile[ox_in_tile][oy0_in_tile + j]);",
            "STORE(&out[oy * rows + ox], tile[ox_in_tile][oy0_in_tile + j]{% if PAD == 1 %} ^ 1u{% endif %});",
        )
    });
    for dtype in ["f32", "f64", "f16"] {
        let out = tempfile::tempdir().unwrap();
        let mut opts = options("512x768", out.path());
        opts.templates = Some(dir.clone());
        opts.cubin_cache = false;
        opts.dtype = Some(dtype.into());
        opts.params = vec!["TILE_DIM=16,32".into(), "PAD=0,1".into()];
        opts.params.extend(common::classic_transpose_params());
        let o = tune(&opts).unwrap();
        for r in variants(&o).filter(|r| r.status != Status::Pruned) {
            if param(r, "PAD") == "1" {
                assert_eq!(r.status, Status::Failed, "{dtype} {}", r.label());
                assert!(r.error.contains("wrong result"), "{}", r.error);
            } else {
                assert_eq!(r.status, Status::Ok, "{dtype} {}: {}", r.label(), r.error);
            }
        }
        assert_eq!(param(&o.records[o.best.unwrap()], "PAD"), "0");
    }
}

#[test]
fn a_faulting_kernel_is_recorded_and_the_run_goes_on() {
    if skip("a_faulting_kernel_is_recorded_and_the_run_goes_on") {
        return;
    }
    let _lock = GPU.lock().unwrap_or_else(|e| e.into_inner());
    // UNROLL=on variants write far out of bounds: an illegal address that kills the context.
    // PAD=1 variants declare __launch_bounds__(32) but launch 256 threads: the launch fails.
    let (_keep, dir) = templates_with(|t| {
        let t = plant(
            &t,
            "__launch_bounds__(THREADS{%",
            "__launch_bounds__({% if PAD == 1 %}32{% else %}THREADS{% endif %}{%",
        );
        plant(
            &t,
            "    __shared__ tile_t tile;\n    const long long tiles_y",
            "    __shared__ tile_t tile;\n{% if UNROLL == \"on\" %}    out[1ll << 40] = 1;\n{% endif %}    const long long tiles_y",
        )
    });
    let out = tempfile::tempdir().unwrap();
    let mut opts = options("256x256", out.path());
    opts.templates = Some(dir);
    opts.cubin_cache = false;
    opts.params = vec![
        "TILE_DIM=32".into(),
        "BLOCK_ROWS=8".into(),
        "PAD=0,1".into(),
        "UNROLL=off,on".into(),
    ];
    opts.params.extend(common::classic_transpose_params());
    let o = tune(&opts).unwrap();
    let live: Vec<&Record> = variants(&o)
        .filter(|r| r.status != Status::Pruned)
        .collect();
    assert!(live.len() >= 8);
    for r in &live {
        if param(r, "PAD") == "1" {
            assert_eq!(r.status, Status::Failed, "{}", r.label());
            assert!(r.error.contains("launching the kernel"), "{}", r.error);
        } else if param(r, "UNROLL") == "on" {
            assert_eq!(r.status, Status::Failed, "{}", r.label());
            assert!(r.error.contains("context lost"), "{}", r.error);
        } else {
            assert_eq!(r.status, Status::Ok, "{}: {}", r.label(), r.error);
        }
    }
    assert!(o.context_restarts >= 1);
    let best = &o.records[o.best.unwrap()];
    assert_eq!((param(best, "UNROLL"), param(best, "PAD")), ("off", "0"));
}

#[test]
fn a_hanging_kernel_is_killed_by_the_watchdog() {
    if skip("a_hanging_kernel_is_killed_by_the_watchdog") {
        return;
    }
    let _lock = GPU.lock().unwrap_or_else(|e| e.into_inner());
    // UNROLL=on variants spin forever.
    let (_keep, dir) = templates_with(|t| {
        plant(
            &t,
            "    __shared__ tile_t tile;\n    const long long tiles_y",
            "    __shared__ tile_t tile;\n{% if UNROLL == \"on\" %}    while (((volatile const float*)in)[0] < 2.0f) {}\n{% endif %}    const long long tiles_y",
        )
    });
    let out = tempfile::tempdir().unwrap();
    let mut opts = options("256x256", out.path());
    opts.templates = Some(dir);
    opts.cubin_cache = false;
    opts.watchdog_s = 2.0;
    opts.params = vec![
        "TILE_DIM=32".into(),
        "BLOCK_ROWS=8".into(),
        "BOUNDS=always".into(),
        "PAD=0,1".into(),
        "UNROLL=off,on".into(),
    ];
    opts.params.extend(common::classic_transpose_params());
    let start = std::time::Instant::now();
    let o = tune(&opts).unwrap();
    let live: Vec<&Record> = variants(&o)
        .filter(|r| r.status != Status::Pruned)
        .collect();
    assert_eq!(live.len(), 4);
    for r in &live {
        if param(r, "UNROLL") == "on" {
            assert_eq!(r.status, Status::Failed, "{}", r.label());
            assert!(r.error.contains("watchdog"), "{}", r.error);
        } else {
            assert_eq!(r.status, Status::Ok, "{}: {}", r.label(), r.error);
        }
    }
    // Two hangs, each bounded by the watchdog (plus a worker start).
    assert!(
        start.elapsed().as_secs_f64() < 60.0,
        "took {:?}",
        start.elapsed()
    );
}

#[test]
fn matmul_variants_verify_against_the_reference_and_cublas() {
    if skip("matmul_variants_verify_against_the_reference_and_cublas") {
        return;
    }
    let _lock = GPU.lock().unwrap_or_else(|e| e.into_inner());
    for shape in ["256x128x192", "200x136x333"] {
        let out = tempfile::tempdir().unwrap();
        let mut opts = options(shape, out.path());
        opts.op = "matmul".into();
        let o = tune(&opts).unwrap();
        assert_none_failed(&o, shape);
        let cublas = o.records.iter().find(|r| r.name == "cublas_sgemm").unwrap();
        assert_eq!(cublas.status, Status::Ok);
        assert_eq!(o.info.as_ref().unwrap().roof, "cublas_sgemm");
        assert!(variants(&o).filter(|r| r.status == Status::Ok).count() >= 36);
    }
    // A variant that drops the last k-tile is caught by the tolerance check.
    let (_keep, dir) = templates_with_edited("matmul.cu.tera", |t| {
        plant(
            &t,
            "const int tiles = (K + BS - 1) / BS;",
            "const int tiles = (K + BS - 1) / BS{% if UNROLL == \"on\" %} - 1{% endif %};",
        )
    });
    let out = tempfile::tempdir().unwrap();
    let mut opts = options("128x128x256", out.path());
    opts.op = "matmul".into();
    opts.templates = Some(dir);
    opts.cubin_cache = false;
    let o = tune(&opts).unwrap();
    for r in variants(&o).filter(|r| r.status != Status::Pruned) {
        if param(r, "UNROLL") == "on" {
            assert!(
                r.error.contains("relative error"),
                "{}: {}",
                r.label(),
                r.error
            );
        } else {
            assert_eq!(r.status, Status::Ok, "{}: {}", r.label(), r.error);
        }
    }
}

#[test]
fn sgemm_searches_verify_every_measured_variant_at_odd_and_even_shapes() {
    if skip("sgemm_searches_verify_every_measured_variant_at_odd_and_even_shapes") {
        return;
    }
    let _lock = GPU.lock().unwrap_or_else(|e| e.into_inner());
    // A random sample of the register-tiled space (the whole of it takes minutes to
    // compile), with every bounds mode, at shapes that are and are not tile multiples.
    for (shape, strategy) in [
        ("97x65x47", "random"),
        ("256x256x128", "anneal"),
        ("100x132x64", "genetic"),
    ] {
        let out = tempfile::tempdir().unwrap();
        let mut opts = options(shape, out.path());
        opts.op = "sgemm".into();
        opts.params = vec!["BOUNDS=none,always,specialized,edge".into()];
        opts.strategy = strategy.into();
        opts.budget = Some(cuda_autotune::search::budget::Budget::Variants(48));
        let o = tune(&opts).unwrap();
        let measured: Vec<&Record> = variants(&o)
            .filter(|r| !matches!(r.status, Status::Pruned | Status::Skipped))
            .collect();
        assert_eq!(
            measured.len(),
            48,
            "{shape}: the budget is what gets measured"
        );
        let failed: Vec<String> = measured
            .iter()
            .filter(|r| r.status != Status::Ok)
            .map(|r| format!("{} {}: {}", r.name, r.label(), r.error))
            .collect();
        assert!(
            failed.is_empty(),
            "{shape}: failures:\n{}",
            failed.join("\n")
        );
        assert!(
            o.search.as_deref().unwrap_or("").starts_with(strategy),
            "{:?}",
            o.search
        );
        assert_eq!(o.info.as_ref().unwrap().roof, "cublas_sgemm");
    }
}

/// REPACK=1 variants run a prologue kernel (sgemm_repack) that fills the scratch buffers the
/// GEMM reads; the worker fills scratch with NaN before each verifying run, so a prologue
/// that did not run, missed rows or left the padding unzeroed fails verification here.
/// WINDOWS=1 variants read the same misaligned rows without a copy (aligned windows read
/// back shifted, blocks of A rows of one alignment, checked first and last slices): a wrong
/// shift, window or row mapping gives wrong sums.
#[test]
fn repacked_and_windowed_sgemm_variants_verify_where_k_or_n_is_not_a_multiple_of_4() {
    if skip("repacked_and_windowed_sgemm_variants_verify_where_k_or_n_is_not_a_multiple_of_4") {
        return;
    }
    let _lock = GPU.lock().unwrap_or_else(|e| e.into_inner());
    // K odd and N odd; K % 4 == 2 with N a multiple of 4 (only A's rows misaligned; C's rows
    // aligned, stored as float4 with CSTORE=vec4); K a multiple of 4 with N odd (only B is
    // copied, A read as it is); K % 4 == 1 with N % 4 == 3 (the other shifts); a tiny one,
    // smaller than any tile, whose padded rows are mostly padding.
    // (WINDOWS=1 needs N >= BN + 4: its tiny shape is 9x37x5.)
    for (shape, ways) in [
        ("97x65x47", &["REPACK=1", "WINDOWS=1"][..]),
        ("130x64x66", &["REPACK=1", "WINDOWS=1"]),
        ("96x66x64", &["REPACK=1", "WINDOWS=1"]),
        ("70x131x257", &["REPACK=1", "WINDOWS=1"]),
        ("9x7x5", &["REPACK=1"]),
        ("9x37x5", &["WINDOWS=1"]),
        ("1023x1025x1027", &["REPACK=1", "WINDOWS=1"]),
    ] {
        for &way in ways {
            let out = tempfile::tempdir().unwrap();
            let mut opts = options(shape, out.path());
            opts.op = "sgemm".into();
            opts.params = vec![
                way.into(),
                "BOUNDS=none,always,specialized,edge".into(),
                "CSTORE=vec4,scalar".into(),
            ];
            opts.strategy = "random".into();
            opts.budget = Some(cuda_autotune::search::budget::Budget::Variants(16));
            let o = tune(&opts).unwrap();
            assert_none_failed(&o, &format!("{shape} {way}"));
            let measured: Vec<&Record> = variants(&o).filter(|r| r.status == Status::Ok).collect();
            assert_eq!(
                measured.len(),
                16,
                "{shape} {way}: the budget is what gets measured"
            );
            let (name, value) = way.split_once('=').unwrap();
            assert!(
                measured
                    .iter()
                    .all(|r| param(r, name) == value && param(r, "VEC") == "4"),
                "{shape}: only {way} float4 variants were asked for"
            );
        }
    }
}

/// A random search of 24 sgemm variants at `shape` with `params` pinned, on the GPU: fails on
/// any failed record and unless the budget is what got measured.
fn random_sgemm_search(shape: &str, params: &[&str]) -> TuneOutcome {
    let out = tempfile::tempdir().unwrap();
    let mut opts = options(shape, out.path());
    opts.op = "sgemm".into();
    opts.params = params.iter().map(|p| p.to_string()).collect();
    opts.strategy = "random".into();
    opts.budget = Some(cuda_autotune::search::budget::Budget::Variants(24));
    let o = tune(&opts).unwrap();
    assert_none_failed(&o, shape);
    let measured = variants(&o).filter(|r| r.status == Status::Ok).count();
    assert_eq!(measured, 24, "{shape}: the budget is what gets measured");
    o
}

/// B_ELEMS=1 (B copied element by element under WINDOWS=1) where only N is odd and where only
/// K is odd, with edge blocks in M and N: every measured variant verifies against the float64
/// reference.
#[test]
fn element_wise_b_sgemm_variants_verify_where_only_k_or_n_is_odd() {
    if skip("element_wise_b_sgemm_variants_verify_where_only_k_or_n_is_odd") {
        return;
    }
    let _lock = GPU.lock().unwrap_or_else(|e| e.into_inner());
    for shape in ["97x65x48", "130x131x64", "96x64x67", "70x128x257"] {
        let o = random_sgemm_search(
            shape,
            &[
                "B_ELEMS=1",
                "BM=32,64",
                "BN=32,64",
                "BOUNDS=always,specialized,edge",
            ],
        );
        assert!(
            variants(&o)
                .filter(|r| r.status == Status::Ok)
                .all(|r| param(r, "B_ELEMS") == "1" && param(r, "WINDOWS") == "1"),
            "{shape}: B_ELEMS=1 lives under WINDOWS=1 only"
        );
    }
}

/// LOAD=async with VEC=1 (4-byte cp.async copies, A transposed on the way) checks no copy past
/// M or N: edge blocks move inward over their neighbours, and K is covered from k = -sa so that
/// only slice 0 is checked. A block moved too far or not at all, a wrong lead, a first slice
/// left unzeroed or a wrong transposed row gives wrong sums or a fault. Shapes: odd in all
/// three, M and N exactly one tile with K under one slice, K = 1, one row past a tile, and a
/// multiple of everything; every bounds mode and both KSPLIT values.
#[test]
fn four_byte_async_sgemm_variants_verify_at_any_shape() {
    if skip("four_byte_async_sgemm_variants_verify_at_any_shape") {
        return;
    }
    let _lock = GPU.lock().unwrap_or_else(|e| e.into_inner());
    for shape in [
        "999x1001x1003",
        "64x128x7",
        "128x128x1",
        "65x129x33",
        "97x65x47",
        "256x256x128",
    ] {
        let o = random_sgemm_search(
            shape,
            &[
                "VEC=1",
                "LOAD=async",
                "BOUNDS=none,always,specialized,edge",
                "KSPLIT=1,2",
            ],
        );
        assert!(
            variants(&o)
                .filter(|r| r.status == Status::Ok)
                .all(|r| param(r, "VEC") == "1" && param(r, "LOAD") == "async"),
            "{shape}: only 4-byte cp.async variants were asked for"
        );
    }
}

/// Tiles past 48 KB of shared memory (three cp.async stages of 64x128x32 and 128x128x32: 72 to
/// 104 KB) run with dynamic shared memory, which the launcher must opt in to per kernel: a
/// missing opt-in fails the launch, a wrong size or a buffer laid out past the bytes passed
/// gives wrong sums or a fault. Every load path that reaches those sizes, aligned and odd
/// shapes (the repack's prologue and the windows included), every measured variant verified.
#[test]
fn sgemm_variants_past_48_kb_of_shared_memory_verify() {
    if skip("sgemm_variants_past_48_kb_of_shared_memory_verify") {
        return;
    }
    let _lock = GPU.lock().unwrap_or_else(|e| e.into_inner());
    let op = cuda_autotune::spec::ops::Op::load("sgemm", None).unwrap();
    for shape in ["256x256x128", "257x300x131", "999x1001x1003"] {
        let o = random_sgemm_search(
            shape,
            &[
                "BM=64,128",
                "BN=128",
                "BK=32",
                "STAGES=3",
                "BOUNDS=always,specialized,edge",
            ],
        );
        let at = cuda_autotune::model::shape::Shape::parse(shape, &op.spec.dims).unwrap();
        for r in variants(&o).filter(|r| r.status == Status::Ok) {
            let params: Vec<String> = r.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let c = cuda_autotune::export::kernel::candidate_for(
                &op,
                &at,
                &params.join(";"),
                &cuda_autotune::model::limits::DeviceLimits::SM90_DEFAULT,
            )
            .unwrap();
            let shared = c.launch.expect("measured, so not pruned").shared;
            assert!(
                shared > 48 * 1024,
                "{shape}: {} has {shared} bytes of dynamic shared memory",
                params.join(" ")
            );
        }
    }
}

/// KSPLIT > 1: groups of warps each sum a share of every slice's k steps and the partial C
/// tiles are added up through shared memory (reusing the slice buffers) before group 0
/// stores C; a wrong share, a missing barrier or a group left out gives wrong sums. Every
/// load path (registers, cp.async, float4 with the repack or the windows) at odd shapes.
#[test]
fn ksplit_sgemm_variants_verify_on_every_load_path() {
    if skip("ksplit_sgemm_variants_verify_on_every_load_path") {
        return;
    }
    let _lock = GPU.lock().unwrap_or_else(|e| e.into_inner());
    for shape in ["97x65x47", "70x131x257", "128x128x128"] {
        let o = random_sgemm_search(
            shape,
            &[
                "KSPLIT=2,4",
                "BM=32,64",
                "BN=32,64",
                "BOUNDS=always,edge",
                "WINDOWS=0,1",
                "REPACK=0,1",
            ],
        );
        assert!(
            variants(&o)
                .filter(|r| r.status == Status::Ok)
                .all(|r| param(r, "KSPLIT") != "1"),
            "{shape}: only KSPLIT 2 and 4 were asked for"
        );
    }
}

/// TAIL=1: sgemm_lead computes the tiles of the whole waves and sgemm splits each tile past
/// them over a cluster whose blocks add up their partial tiles; a tile computed twice or not
/// at all, a wrong tile index or a wrong share of k gives wrong sums. Grids of more than a
/// wave (K kept small): tile multiples, and odd shapes (every load path: 4-byte copies, the
/// repack's prologue before sgemm_lead, windows), every measured variant verified.
#[test]
fn tail_split_sgemm_variants_verify_on_every_load_path() {
    if skip("tail_split_sgemm_variants_verify_on_every_load_path") {
        return;
    }
    let _lock = GPU.lock().unwrap_or_else(|e| e.into_inner());
    for shape in ["2048x2048x256", "2047x2049x259", "2049x2051x256"] {
        let o = random_sgemm_search(
            shape,
            &["TAIL=1", "BM=64,128", "BOUNDS=always,specialized,edge"],
        );
        assert!(
            variants(&o)
                .filter(|r| r.status == Status::Ok)
                .all(|r| param(r, "TAIL") == "1"),
            "{shape}: only TAIL=1 was asked for"
        );
    }
}

/// TAIL=1 is a finishing value: the default search's leaders try it, outside the budget,
/// each a measured leader's own configuration, and every one verifies. The tile is pinned
/// where every configuration has a TAIL=1 one (2560x5120 in 64x128 tiles: 1600 tiles, 16
/// past the whole waves at two, three or four blocks an SM); no stored winner takes part.
#[test]
fn the_search_leaders_try_the_tail_split_and_it_verifies() {
    if skip("the_search_leaders_try_the_tail_split_and_it_verifies") {
        return;
    }
    let _lock = GPU.lock().unwrap_or_else(|e| e.into_inner());
    let out = tempfile::tempdir().unwrap();
    let mut opts = options("2560x5120x256", out.path());
    opts.op = "sgemm".into();
    opts.params = ["BM=64", "BN=128", "BK=16", "TM=8", "TN=8", "SPLITK=1"]
        .map(String::from)
        .to_vec();
    opts.budget = Some(cuda_autotune::search::budget::Budget::Variants(24));
    opts.warm_start = false;
    let o = tune(&opts).unwrap();
    assert_none_failed(&o, "2560x5120x256");
    // Every proposal measured: the budget's and the leaders' (a TAIL=1 one not measured
    // leaves the summary's count of them above `split`'s).
    let measured: Vec<&Record> = variants(&o).filter(|r| r.status == Status::Ok).collect();
    let split: Vec<&&Record> = measured
        .iter()
        .filter(|r| param(r, "TAIL") == "1")
        .collect();
    assert!(
        (1..=4).contains(&split.len()),
        "{} with TAIL=1",
        split.len()
    );
    assert_eq!(measured.len(), 24 + split.len());
    let without_tail = |r: &Record| -> Vec<(String, String)> {
        r.params
            .iter()
            .filter(|(k, _)| k != "TAIL")
            .cloned()
            .collect()
    };
    for t in &split {
        assert!(
            measured
                .iter()
                .any(|r| param(r, "TAIL") == "0" && without_tail(r) == without_tail(t)),
            "{}: not a measured configuration's own",
            t.label()
        );
    }
    let search = o.search.as_deref().unwrap_or("");
    assert!(
        search.contains(&format!(
            "{} of them the leaders' finishing values (TAIL=1)",
            split.len()
        )),
        "{search}"
    );
}

/// The warm start: a search measures the stored winner of another shape (in the --out
/// folder's best.csv) before its own proposals. A first exhaustive run at one shape stores a
/// winner; an anneal with a budget of one variant at another shape, over a space of a few
/// dozen that holds that configuration, measures that one.
#[test]
fn a_search_measures_the_stored_winners_first() {
    if skip("a_search_measures_the_stored_winners_first") {
        return;
    }
    let _lock = GPU.lock().unwrap_or_else(|e| e.into_inner());
    let out = tempfile::tempdir().unwrap();
    let fixed = [
        "TM=8",
        "TN=4",
        "VEC=4",
        "PAD=0",
        "LOAD=async",
        "BOUNDS=specialized",
    ];
    let mut first = options("256x256x256", out.path());
    first.op = "sgemm".into();
    first.strategy = "exhaustive".into();
    first.params = fixed.iter().map(|p| p.to_string()).collect();
    first.params.extend([
        "BM=32,64".into(),
        "BN=64".into(),
        "BK=16".into(),
        "WARP_N=16".into(),
        "STAGES=2".into(),
    ]);
    tune(&first).unwrap();
    let stored = cuda_autotune::store::best::read_best(&out.path().join("best.csv")).unwrap();
    assert_eq!(stored.len(), 1);
    let winner = |r: &Record| {
        stored[0]
            .params
            .split(';')
            .filter_map(|kv| kv.split_once('='))
            .all(|(k, v)| param(r, k) == v)
    };
    let mut search = options("512x512x512", out.path());
    search.op = "sgemm".into();
    search.strategy = "anneal".into();
    search.budget = Some(cuda_autotune::search::budget::Budget::Variants(1));
    search.params = fixed.iter().map(|p| p.to_string()).collect();
    search.params.extend([
        "BM=32,64,128".into(),
        "BN=32,64,128".into(),
        "BK=16,32".into(),
        "WARP_N=16".into(),
        "STAGES=2,3".into(),
    ]);
    let o = tune(&search).unwrap();
    assert_none_failed(&o, "warm");
    let measured: Vec<&Record> = variants(&o).filter(|r| r.status == Status::Ok).collect();
    assert_eq!(measured.len(), 1);
    assert!(
        winner(measured[0]),
        "the stored winner {} was not measured: {:?}",
        stored[0].params,
        measured.iter().map(|r| r.label()).collect::<Vec<_>>()
    );
}

#[test]
fn resume_reuses_the_journal_and_measures_only_what_is_missing() {
    if skip("resume_reuses_the_journal_and_measures_only_what_is_missing") {
        return;
    }
    let _lock = GPU.lock().unwrap_or_else(|e| e.into_inner());
    let out = tempfile::tempdir().unwrap();
    let mut opts = options("512x512", out.path());
    // 72 valid configurations, under the default budget of 80: every one is measured and
    // journaled, so the journal's length is known.
    opts.params = vec![
        "TILE_DIM=16,32".into(),
        "BOUNDS=none,edge".into(),
        "TILES_PER_BLOCK=1".into(),
        "ASPECT=square".into(),
        "CACHE=default".into(),
        "BLOCK_ORDER=rows".into(),
    ];
    let first = tune(&opts).unwrap();
    let journal = first.journal_path.clone().unwrap();
    let lines = std::fs::read_to_string(&journal).unwrap().lines().count();
    let tasks = first
        .records
        .iter()
        .filter(|r| r.status != Status::Pruned)
        .count();
    assert_eq!(lines, 1 + tasks, "header + one line per finished task");

    // Everything journaled: a resumed run measures nothing and reports the same numbers.
    opts.resume = true;
    let again = tune(&opts).unwrap();
    assert_eq!(again.reused, tasks);
    let stats = |o: &TuneOutcome| {
        o.records
            .iter()
            .map(|r| r.stats.map(|s| s.median_ms))
            .collect::<Vec<_>>()
    };
    assert_eq!(stats(&again), stats(&first));

    // A run killed after 5 tasks: the journal keeps them, the rest is measured.
    let text = std::fs::read_to_string(&journal).unwrap();
    let kept: Vec<&str> = text.lines().take(6).collect();
    std::fs::write(&journal, kept.join("\n") + "\n{\"key\":\"torn").unwrap();
    let resumed = tune(&opts).unwrap();
    assert_eq!(resumed.reused, 5);
    assert_eq!(
        resumed
            .records
            .iter()
            .filter(|r| r.status == Status::Ok)
            .count(),
        tasks
    );
}

#[test]
fn ctrl_c_writes_what_was_measured_and_resume_finishes() {
    if skip("ctrl_c_writes_what_was_measured_and_resume_finishes") {
        return;
    }
    let _lock = GPU.lock().unwrap_or_else(|e| e.into_inner());
    let out = tempfile::tempdir().unwrap();
    let args = [
        "--op",
        "transpose",
        "--shape",
        "4096x4096",
        "--reps",
        "200",
        "--out",
    ];
    let child = std::process::Command::new(tune_exe())
        .args(args)
        .arg(out.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until a few variants are journaled, then press Ctrl-C.
    let journal = out
        .path()
        .join("transpose_4096x4096_nvidia-h100-80gb-hbm3.journal.jsonl");
    let start = std::time::Instant::now();
    let journaled = |p: &Path| {
        std::fs::read_to_string(p)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    };
    let pattern = out.path().to_path_buf();
    let find = || {
        std::fs::read_dir(&pattern)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| p.to_string_lossy().ends_with(".journal.jsonl"))
    };
    let journal = loop {
        if let Some(p) = find().filter(|p| journaled(p) >= 12) {
            break p;
        }
        assert!(
            start.elapsed().as_secs() < 120,
            "no journal appeared; expected near {}",
            journal.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let done = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&done.stderr).to_string();
    assert_eq!(done.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("--resume"), "{stderr}");
    let csv = journal.to_string_lossy().replace(".journal.jsonl", ".csv");
    let rows = read_run_csv(Path::new(&csv)).unwrap();
    let measured = rows.iter().filter(|r| r.status == Status::Ok).count();
    assert!(measured >= 11, "{measured} measured before Ctrl-C");
    assert!(rows.iter().any(|r| r.error.contains("interrupted")));
    assert!(
        !out.path().join("best.csv").exists(),
        "an interrupted run does not touch best.csv"
    );

    let resumed = std::process::Command::new(tune_exe())
        .args(args)
        .arg(out.path())
        .arg("--resume")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&resumed.stdout).to_string();
    assert_eq!(resumed.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("Resumed:"), "{stdout}");
    assert!(out.path().join("best.csv").exists());
}

#[test]
fn the_vector_add_example_tunes_end_to_end_from_its_spec() {
    if skip("the_vector_add_example_tunes_end_to_end_from_its_spec") {
        return;
    }
    let _lock = GPU.lock().unwrap_or_else(|e| e.into_inner());
    let out = tempfile::tempdir().unwrap();
    let mut opts = options("1000003", out.path());
    opts.spec = Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/vector_add"));
    let o = tune(&opts).unwrap();
    assert_none_failed(&o, "vector_add 1000003");
    assert!(variants(&o).filter(|r| r.status == Status::Ok).count() >= 80);
    assert!(o.best.is_some());
}

/// A reference configuration that leaves an element of the output unwritten is refused: its
/// output cannot be the answer (poison left there would pass every variant that misses the
/// same element).
#[test]
fn a_reference_that_leaves_elements_unwritten_is_refused() {
    if skip("a_reference_that_leaves_elements_unwritten_is_refused") {
        return;
    }
    let _lock = GPU.lock().unwrap_or_else(|e| e.into_inner());
    let spec = tempfile::tempdir().unwrap();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/vector_add");
    for name in ["vector_add.toml", "vector_add.cu.tera"] {
        let mut text = std::fs::read_to_string(example.join(name)).unwrap();
        if name.ends_with(".tera") {
            // The reference (BLOCK=256, VECTOR=1) skips the last element.
            text = plant(
                &text,
                "if (i < nvec) cv[i]",
                "if (i < nvec - (BLOCK == 256 && VECTOR == 1)) cv[i]",
            );
        }
        std::fs::write(spec.path().join(name), text).unwrap();
    }
    let out = tempfile::tempdir().unwrap();
    let mut opts = options("1000003", out.path());
    opts.spec = Some(spec.path().to_path_buf());
    opts.params = vec!["BLOCK=128,256".into(), "VECTOR=1".into(), "ITEMS=1".into()];
    let err = tune(&opts).expect_err("the reference is refused");
    // The spec's fault, not the GPU's: a usage error, exit 2.
    assert_eq!(err.exit_code(), 2, "{err}");
    assert!(
        err.to_string().starts_with(
            "the reference (config) left 1 of 1000003 elements of the output 'c' unwritten"
        ),
        "{err}"
    );
}

#[test]
fn the_winner_comes_with_a_confidence_interval() {
    if skip("the_winner_comes_with_a_confidence_interval") {
        return;
    }
    let _lock = GPU.lock().unwrap_or_else(|e| e.into_inner());
    let out = tempfile::tempdir().unwrap();
    let mut opts = options("2048x2048", out.path());
    opts.params = vec!["TILE_DIM=8,32".into(), "BOUNDS=none".into(), "PAD=1".into()];
    opts.confirm_rounds = 30;
    let o = tune(&opts).unwrap();
    let c = o.confidence.as_ref().expect("leaders were re-timed");
    assert_eq!(o.best, Some(c.winner));
    assert!(c.candidates.len() >= 2);
    let w = o.records[c.winner].confirm.unwrap();
    // Tied or not is what the rounds measured; the record and the outcome must agree on it.
    assert!(w.winner);
    assert_eq!(w.tied, !c.tied_with.is_empty());
    for &at in &c.candidates {
        let conf = o.records[at].confirm.unwrap();
        assert!(conf.ci_low_pct <= conf.vs_winner_pct && conf.vs_winner_pct <= conf.ci_high_pct);
    }
    // The CSV carries the interval; the roof ran in the rounds too, and the winner's % of it
    // divides the roof's faster median by the winner's over the rounds.
    let back = read_run_csv(o.csv_path.as_ref().unwrap()).unwrap();
    assert_eq!(
        back.iter()
            .filter(|r| r.kind == Kind::Variant && r.confirm.is_some())
            .count(),
        c.candidates.len()
    );
    let info = o.info.as_ref().unwrap();
    let roof = back
        .iter()
        .find(|r| r.kind == Kind::Baseline && r.name == info.roof)
        .expect("the roof's row");
    let in_rounds = roof.confirm.expect("the roof ran in the rounds").median_ms;
    let faster = in_rounds.min(roof.stats.unwrap().median_ms);
    let frac = o.records[c.winner].frac_of_roof.unwrap();
    assert!((frac - faster / w.median_ms).abs() < 1e-9 * frac);
}

#[test]
fn the_gpu_is_warmed_up_before_the_first_timed_task() {
    use cuda_autotune::measure::clocks::{WarmupEnd, AT_MAX_FRAC, WARMUP_CAP_S};
    if skip("the_gpu_is_warmed_up_before_the_first_timed_task") {
        return;
    }
    let _lock = GPU.lock().unwrap_or_else(|e| e.into_inner());
    let out = tempfile::tempdir().unwrap();
    let mut opts = options("1000x1000", out.path());
    opts.params = vec!["TILE_DIM=32".into(), "BLOCK_ROWS=8".into()];
    let o = tune(&opts).unwrap();
    let text = cuda_autotune::pipeline::summary::render(&o, 3, false);
    let line = text.lines().find(|l| l.starts_with("Warm-up: "));
    if o.clocks.is_none() {
        // No NVML: nothing to wait for, and nothing claimed.
        assert!(o.warmups.is_empty() && line.is_none(), "{text}");
        return;
    }
    eprintln!("{}", line.expect("a warm-up line with NVML"));
    // One warm-up per GPU job; the first serves the run's first timed task (a baseline).
    let (load, w) = &o.warmups[0];
    assert_eq!(load, "memcpy", "the first task to verify");
    assert!(w.seconds < WARMUP_CAP_S + 1.0, "{w:?}");
    match w.end {
        WarmupEnd::AlreadyWarm => assert_eq!(w.launches, 0),
        WarmupEnd::AtMax => {
            let max = w.max_mhz.expect("at the max means a known max");
            assert!(w.after_mhz as f64 >= AT_MAX_FRAC * max as f64, "{w:?}");
            assert!(w.launches > 0);
        }
        WarmupEnd::Stable | WarmupEnd::Cap => assert!(w.launches > 0, "{w:?}"),
    }
}
