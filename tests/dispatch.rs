//! The dispatch key of the exported kernels is (op, dtype, shape), end to end: a database of
//! transpose (f32, f16, f64), sgemm and matmul rows (tests/fixtures/export/dispatch.csv, rows
//! of an H100 tuning database) is exported with `tune export --format cuda`; a C program built
//! with the system gcc and g++ against the header asks the dispatch for every (op, dtype) at
//! exact, nearby and far shapes, and every exported kernel is compiled with NVRTC.
//!
//! The NVRTC test fails (it does not skip) when NVRTC cannot be loaded: run it through
//! scripts/test.sh, or with `export LD_LIBRARY_PATH=$(scripts/nvrtc-env.sh)`. No test needs a
//! GPU or a CUDA installation: the header is plain C.

use assert_cmd::Command;
use cuda_autotune::cuda::compile::Compiler;
use cuda_autotune::export::best_rows;
use cuda_autotune::export::db::TunedDb;
use cuda_autotune::export::kernel::{
    params_text, rename_identifier, safe_default, specialize, valid_for,
};
use cuda_autotune::store::best::BestRow;
use std::path::PathBuf;
use tempfile::TempDir;

mod common;
use common::{cc, repo, text};

const FIXTURE: &str = "tests/fixtures/export/dispatch.csv";

fn db() -> TunedDb {
    TunedDb::load(repo(FIXTURE)).unwrap()
}

/// `tune export --format cuda` of the fixture into a temporary folder; returns it.
fn export_cuda() -> (TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cuda");
    let out = Command::cargo_bin("tune")
        .unwrap()
        .args(["export", "--format", "cuda", "--db"])
        .arg(repo(FIXTURE))
        .arg("--output")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    // 17 rows of 5 (op, dtype) pairs: one safe default each.
    assert!(
        text(&out.stdout).contains("22 kernel source(s) (17 tuned, 5 safe default(s))"),
        "{}",
        text(&out.stdout)
    );
    (tmp, dir)
}

/// Exact, nearby and far shapes of every tuned row's number of dimensions.
fn queries_of(dims: usize) -> Vec<Vec<u64>> {
    let two: &[&[u64]] = &[
        &[1000, 1000],
        &[1024, 1024],
        &[2000, 2000],
        &[6000, 6004],
        &[1001, 999],
        &[8192, 8192],
        &[100_000, 3],
        &[7, 7],
    ];
    let three: &[&[u64]] = &[
        &[1000, 1000, 1000],
        &[999, 1001, 1003],
        &[1024, 1024, 1024],
        &[777, 555, 333],
        &[2048, 2048, 2048],
        &[4096, 4096, 4100],
        &[65536, 16, 9],
        &[1, 1, 1],
    ];
    let list = if dims == 2 { two } else { three };
    list.iter().map(|d| d.to_vec()).collect()
}

/// The (op, dtype, number of dimensions) of every tuned pair, in file order.
fn pairs(db: &TunedDb) -> Vec<(String, String, usize)> {
    db.op_dtypes()
        .into_iter()
        .map(|(op, dtype)| {
            let row = db.rows().iter().find(|r| r.op == op).unwrap();
            let n = row.shape.split('x').count();
            (op.to_string(), dtype.to_string(), n)
        })
        .collect()
}

/// The Rust API never hands out a row of another dtype, and falls back within the dtype.
#[test]
fn rust_select_keys_on_op_dtype_and_shape() {
    let db = db();
    let select = |op: &str, dtype: &str, dims: &[u64]| -> Option<&BestRow> {
        db.select(op, dtype, dims, None, None).unwrap()
    };
    // Exact: each dtype its own row.
    for dtype in ["f32", "f16", "f64"] {
        let row = select("transpose", dtype, &[1000, 1000]).unwrap();
        assert_eq!(
            (row.shape.as_str(), row.dtype.as_str()),
            ("1000x1000", dtype)
        );
    }
    // Nearby: the nearest valid shape of the same dtype, even where another dtype's row is
    // nearer or is the only exact one.
    for (dims, dtype, shape) in [
        (&[2000u64, 2000][..], "f32", "1000x1000"),
        (&[2000, 2000], "f16", "1000x1000"),
        (&[6000, 6004], "f64", "6000x6000"),
    ] {
        let row = select("transpose", dtype, dims).unwrap_or_else(|| panic!("{dtype} {dims:?}"));
        assert_eq!(
            (row.dtype.as_str(), row.shape.as_str()),
            (dtype, shape),
            "{dims:?}"
        );
        assert!(
            valid_for(row, dims, None).unwrap(),
            "{dims:?} {}",
            row.shape
        );
    }
    // No f64 kernel serves 6001x6003: none, though an f32 one does (it reads 4-byte
    // elements).
    assert!(select("transpose", "f64", &[6001, 6003]).is_none());
    assert!(select("transpose", "f32", &[6001, 6003]).is_some());
    assert_eq!(
        select("transpose", "f64", &[8192, 8192]).unwrap().dtype,
        "f64"
    );
    assert!(db.best("transpose", "f16", &[8192, 8192], None).is_none());
    assert_eq!(
        db.nearest("transpose", "f16", &[8192, 8192], None)
            .unwrap()
            .shape,
        "6000x6000"
    );
    // A dtype that was never tuned has nothing, not another dtype's row.
    assert!(select("transpose", "bf16", &[1000, 1000]).is_none());
    assert!(select("sgemm", "f64", &[1000, 1000, 1000]).is_none());
    // Every dtype of the same shape through the unfiltered lookup (what `tune best` lists).
    assert_eq!(db.exact("transpose", None, &[1000, 1000], None).len(), 3);
    assert_eq!(
        db.exact("transpose", Some("f16"), &[1000, 1000], None)
            .len(),
        1
    );
    // The lookup of `tune best`: one dtype when given, and a shape tuned only for other
    // dtypes names them.
    let rows = best_rows(&db, "transpose", Some("f16"), "1000x1000", None).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].dtype, "f16");
    assert_eq!(
        best_rows(&db, "transpose", None, "1000x1000", None)
            .unwrap()
            .len(),
        3
    );
    let err = best_rows(&db, "transpose", Some("f16"), "8192x8192", None)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("transpose 8192x8192 was never tuned for f16")
            && err.contains("tuned for: f64"),
        "{err}"
    );
}

/// Every (op, dtype) gets a safe default derived from its spec: bounds checks on, the
/// parameters' `missing` values, and valid (the same kernel) at shapes of every kind.
#[test]
fn safe_defaults_come_from_the_spec_and_serve_every_shape() {
    let db = db();
    for (op, dtype, n) in pairs(&db) {
        let tuned = safe_default(&op, &dtype, None).unwrap();
        let params = params_text(&tuned);
        assert!(params.contains("BOUNDS=always"), "{op} {dtype}: {params}");
        let row = BestRow {
            op: op.clone(),
            shape: tuned.shape.to_string(),
            dtype: dtype.clone(),
            params: params.clone(),
            ..db.rows()[0].clone()
        };
        for dims in queries_of(n) {
            // A valid configuration there, rendering the same kernel.
            let at = BestRow {
                shape: dims
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join("x"),
                ..row.clone()
            };
            let there = specialize(&at, None)
                .unwrap_or_else(|e| panic!("{op} {dtype} default {params} at {dims:?}: {e}"));
            same_code(
                &tuned.source,
                &there.source,
                &format!("{op} {dtype} {dims:?}"),
            );
        }
    }
    // The transpose default is the classic bounds-checked tile: middle tile and row counts of
    // the spec's lists, the parameters added later at their original values.
    assert_eq!(
        params_text(&safe_default("transpose", "f32", None).unwrap()),
        "TILE_DIM=32;BLOCK_ROWS=8;PAD=1;UNROLL=on;BOUNDS=always;VEC=1;TILES_PER_BLOCK=1;\
         ASPECT=square;CACHE=default;RUNS=tile;OCCUPANCY=0;READ=elem;LAYOUT=tile;STAGE=none;BLOCK_ORDER=rows"
    );
    assert!(safe_default("transpose", "f8", None).is_err());
}

/// What a safe default fixes is what the spec's `safe` attributes say, for any parameter: a
/// copy of the templates whose transpose also marks `UNROLL = off` safe gets that value too,
/// and one whose BOUNDS marks none leaves BOUNDS to the search for a valid configuration.
#[test]
fn safe_values_come_from_the_spec_attribute() {
    let tmp = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(repo("templates")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), tmp.path().join(entry.file_name())).unwrap();
    }
    let spec = tmp.path().join("transpose.toml");
    let shipped = std::fs::read_to_string(&spec).unwrap();
    let unroll = "name = \"UNROLL\"\n";
    assert!(shipped.contains(unroll));
    std::fs::write(
        &spec,
        shipped.replace(unroll, &format!("{unroll}safe = \"off\"\n")),
    )
    .unwrap();
    let params = params_text(&safe_default("transpose", "f32", Some(tmp.path())).unwrap());
    assert!(params.contains(";UNROLL=off;BOUNDS=always;"), "{params}");
    // Without `safe`, BOUNDS is searched from the middle of its sweep (`specialized`, which
    // compiles to another kernel at tile multiples) to the nearest valid value.
    assert_eq!(shipped.matches("safe = \"always\"\n").count(), 1);
    std::fs::write(&spec, shipped.replace("safe = \"always\"\n", "")).unwrap();
    let params = params_text(&safe_default("transpose", "f32", Some(tmp.path())).unwrap());
    assert!(!params.contains("BOUNDS=specialized"), "{params}");
    assert!(params.contains(";UNROLL=on;"), "{params}");
}

/// Panics unless `a` and `b` differ at most in `#define NAME` lines whose NAME the code
/// never uses (outside comments): sources that compile to the same kernel.
fn same_code(a: &str, b: &str, what: &str) {
    let (la, lb): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    assert_eq!(la.len(), lb.len(), "{what}: different sources");
    for (x, y) in la.iter().zip(&lb).filter(|(x, y)| x != y) {
        let name = |l: &str| {
            l.trim_start()
                .strip_prefix("#define ")
                .and_then(|r| r.split_whitespace().next())
                .map(str::to_string)
        };
        let n = name(x).filter(|n| Some(n) == name(y).as_ref());
        let n = n.unwrap_or_else(|| panic!("{what}: '{x}' vs '{y}'"));
        let rest: String = a.lines().filter(|l| l != x).collect::<Vec<_>>().join("\n");
        assert_eq!(
            rename_identifier(&rest, &n, "USED"),
            rest,
            "{what}: {n} differs and is used"
        );
    }
}

/// The header compiled into a C (and C++) program that calls ca_select and
/// ca_select_or_default for every (op, dtype) at exact, nearby and far shapes: every entry
/// returned is of the op and dtype asked for, the same as the Rust API's choice, and the
/// fallback is that pair's safe default.
#[test]
fn header_dispatch_keys_on_op_dtype_and_shape() {
    let (_tmp, dir) = export_cuda();
    let db = db();
    let mut program = String::from(
        "#include <stdio.h>\n#include \"cuda_autotune_tuned.h\"\n\n\
         static void ask(const char* op, const char* dtype, const long long* dims, int n)\n{\n    \
         const ca_tuned_entry* e = ca_select(op, dtype, dims, n);\n    \
         const ca_tuned_entry* d = ca_select_or_default(op, dtype, dims, n);\n    \
         printf(\"%s %s %s %s %s | %s %s\\n\", op, dtype, e ? e->op : \"-\", e ? e->dtype : \"-\",\n           \
         e ? e->kernel : \"NULL\", d ? d->dtype : \"-\", d ? d->kernel : \"NULL\");\n}\n\n\
         int main(void)\n{\n",
    );
    // Per query: op, dtype, shape, the Rust API's choice (shape and dtype) and the fallback.
    type Expected = (String, String, String, Option<(String, String)>, String);
    let mut expected: Vec<Expected> = Vec::new();
    let mut i = 0;
    for (op, dtype, n) in pairs(&db) {
        let fallback = format!(
            "{}_{dtype}_default",
            cuda_autotune::spec::ops::Op::load(&op, None)
                .unwrap()
                .spec
                .kernel
        );
        for dims in queries_of(n) {
            let list: Vec<String> = dims.iter().map(|d| format!("{d}LL")).collect();
            program.push_str(&format!(
                "    const long long q{i}[] = {{{}}};\n    ask(\"{op}\", \"{dtype}\", q{i}, {n});\n",
                list.join(", ")
            ));
            i += 1;
            let chosen = db
                .select(&op, &dtype, &dims, None, None)
                .unwrap()
                .map(|r| (r.shape.clone(), r.dtype.clone()));
            let shape: Vec<String> = dims.iter().map(u64::to_string).collect();
            expected.push((
                op.clone(),
                dtype.clone(),
                shape.join("x"),
                chosen,
                fallback.clone(),
            ));
        }
    }
    program.push_str(
        "    {\n        const long long q[] = {1000LL, 1000LL};\n        \
         const ca_tuned_entry* e = ca_select(\"transpose\", \"f32\", q, 2);\n        \
         if (ca_select(\"transpose\", NULL, q, 2) != NULL) return 1;\n        \
         if (ca_select(\"transpose\", \"bf16\", q, 2) != NULL) return 2;\n        \
         if (ca_select_or_default(\"transpose\", \"bf16\", q, 2) != NULL) return 3;\n        \
         if (ca_select_or_default(\"transpose\", \"f32\", q, 3) != NULL) return 4;\n        \
         if (e == NULL || ca_select_for(\"transpose\", \"f32\", \"Other GPU\", q, 2) != NULL) return 5;\n        \
         if (e != ca_select_for(\"transpose\", \"f32\", \"NVIDIA H100 80GB HBM3\", q, 2)) return 6;\n        \
         if (strcmp(CA_TRANSPOSE_F32_DEFAULT_KERNEL, \"transpose_f32_default\") != 0) return 7;\n        \
         if (ca_default(\"sgemm\", \"f32\") == NULL || ca_default(\"sgemm\", \"f32\")->median_ms != -1.0) return 8;\n    }\n    \
         return 0;\n}\n",
    );
    std::fs::write(dir.join("select.c"), &program).unwrap();
    let strict = ["-Wall", "-Wextra", "-Werror", "-pedantic"];
    let mut args: Vec<&str> = vec!["-std=c99", "-o", "select", "select.c"];
    args.extend(strict);
    cc("gcc", &args, &dir);
    let mut args: Vec<&str> = vec!["-std=c++11", "-x", "c++", "-o", "select_cpp", "select.c"];
    args.extend(strict);
    cc("g++", &args, &dir);
    let mut outputs = Vec::new();
    for exe in ["./select", "./select_cpp"] {
        let out = std::process::Command::new(dir.join(exe))
            .current_dir(&dir)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{exe}: {}", text(&out.stderr));
        outputs.push(text(&out.stdout));
    }
    assert_eq!(outputs[0], outputs[1], "C and C++ disagree");
    let lines: Vec<&str> = outputs[0].lines().collect();
    assert_eq!(lines.len(), expected.len());
    let mut fell_back = 0;
    for (line, (op, dtype, _, chosen, fallback)) in lines.iter().zip(&expected) {
        let (tuned, default) = line.split_once(" | ").unwrap();
        let f: Vec<&str> = tuned.split(' ').collect();
        let g: Vec<&str> = default.split(' ').collect();
        assert_eq!((f[0], f[1]), (op.as_str(), dtype.as_str()));
        // The fallback never leaves the op and dtype asked for.
        assert_eq!(g[0], dtype, "{line}");
        match chosen {
            Some((shape, want_dtype)) => {
                assert_eq!((f[2], f[3]), (op.as_str(), want_dtype.as_str()), "{line}");
                assert_eq!(want_dtype, dtype);
                let want = format!("{op}_{dtype}_{shape}_");
                assert!(f[4].starts_with(&want), "{line}: Rust chose {shape}");
                assert_eq!(g[1], f[4], "{line}");
            }
            None => {
                assert_eq!(f[4], "NULL", "{line}: the Rust API found nothing");
                assert_eq!(g[1], fallback, "{line}");
                fell_back += 1;
            }
        }
    }
    assert!(fell_back > 0, "no query fell back to a safe default");
    // The three calls of the original report, as a C user writes them.
    let three = [
        ("transpose", "f32", "2000x2000"),
        ("transpose", "f32", "6000x6004"),
        ("transpose", "f32", "1000x1000"),
    ];
    for (op, dtype, shape) in three {
        let at = expected
            .iter()
            .position(|(o, d, s, _, _)| (o.as_str(), d.as_str(), s.as_str()) == (op, dtype, shape))
            .unwrap();
        let kernel = lines[at].split(' ').nth(4).unwrap();
        let fallback = lines[at].rsplit(' ').next().unwrap();
        // The entry is of the dtype asked for: f32, not the f16 or f64 of the same shapes;
        // where no f32 kernel serves the shape, none, and the f32 safe default after it.
        assert!(
            kernel.starts_with("transpose_f32_") || kernel == "NULL",
            "{}",
            lines[at]
        );
        assert!(fallback.starts_with("transpose_f32_"), "{}", lines[at]);
        println!(
            "ca_select(\"{op}\", \"{dtype}\", {{{dims}}}, 2) -> {kernel}; \
             ca_select_or_default(\"{op}\", \"{dtype}\", {{{dims}}}, 2) -> {fallback}",
            dims = shape.replace('x', ",")
        );
    }
    // sgemm at a shape no tuned kernel serves: NULL from ca_select, the safe default after.
    let sgemm = lines
        .iter()
        .find(|l| l.starts_with("sgemm f32 - - NULL"))
        .expect("an sgemm query falls back");
    assert!(sgemm.ends_with("f32 sgemm_f32_default"), "{sgemm}");
}

/// Every exported kernel compiles with NVRTC, alone and all in one translation unit; file and
/// kernel names follow one scheme and the renaming left comments alone.
#[test]
fn every_exported_kernel_compiles_with_nvrtc() {
    let compiler = Compiler::new("sm_90", None).unwrap_or_else(|e| {
        panic!(
            "this test compiles the exported kernels with NVRTC, which could not be loaded ({e}); \
             run the tests through scripts/test.sh, or first: export LD_LIBRARY_PATH=$(scripts/nvrtc-env.sh)"
        )
    });
    let (_tmp, dir) = export_cuda();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "cu"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 22);
    let mut all = String::new();
    for file in &files {
        let source = std::fs::read_to_string(file).unwrap();
        let kernel = file.file_stem().unwrap().to_str().unwrap();
        // <kernel>_<dtype>_<shape>_<gpu> or <kernel>_<dtype>_default, nothing else.
        let parts: Vec<&str> = kernel.splitn(3, '_').collect();
        assert!(
            ["transpose", "sgemm", "matmul"].contains(&parts[0])
                && ["f32", "f16", "f64"].contains(&parts[1])
                && (parts[2] == "default"
                    || parts[2].ends_with("_nvidia_h100_80gb_hbm3")
                        && parts[2].split('_').next().unwrap().contains('x')),
            "{kernel}: not <kernel>_<dtype>_<shape>_<gpu> nor <kernel>_<dtype>_default"
        );
        assert!(
            source.contains("extern \"C\" __global__")
                && (source.contains(&format!("\n{kernel}("))
                    || source.contains(&format!(" {kernel}("))),
            "{}: no kernel {kernel}",
            file.display()
        );
        if parts[0] == "transpose" {
            assert!(
                source.contains("(a transpose does no arithmetic)"),
                "{kernel}: the comment was rewritten"
            );
        }
        let compiled = compiler
            .compile(&source)
            .unwrap_or_else(|f| panic!("{} does not compile:\n{}", file.display(), f.log));
        let cubin = String::from_utf8_lossy(&compiled.cubin);
        assert!(
            cubin.contains(kernel),
            "{}: no symbol {kernel}",
            file.display()
        );
        all.push_str(&source);
    }
    compiler
        .compile(&all)
        .unwrap_or_else(|f| panic!("the exported files do not compile together:\n{}", f.log));
}
