//! The real NVRTC compiles an all-pairs covering set of every built-in op's default space, at
//! the shapes each bounds mode and load path needs: every value of every parameter, and every
//! pair of values of any two parameters that a runnable configuration holds together, is
//! compiled (see `cuda_autotune::spec::cover`). No GPU needed; NVRTC comes from `scripts/nvrtc-env.sh`.
//!
//! The whole cartesian products (thousands of sgemm sources, an hour on two cores) are the
//! ignored tests `every_default_*` in tests/cli.rs: `bash scripts/test.sh --all` runs them.

use cuda_autotune::cuda::compile::Compiler;
use cuda_autotune::model::shape::Shape;
use cuda_autotune::spec::codegen::Renderer;
use cuda_autotune::spec::cover;
use cuda_autotune::spec::ops::Op;
use cuda_autotune::spec::space::{enumerate, DeviceLimits};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Renders the covering set of `op` (in `dtype`) at each shape and compiles every distinct
/// source; returns (sources compiled, runnable configurations in the spaces).
fn compile_cover(op: &str, dtype: Option<&str>, shapes: &[&str]) -> (usize, usize) {
    let op = Op::load(op, None).unwrap().with_dtype(dtype).unwrap();
    let renderer = Renderer::new(&op).unwrap();
    // Keyed by the source: configurations that render the same kernel compile once.
    let mut sources = std::collections::BTreeMap::new();
    let mut runnable = 0;
    for s in shapes {
        let shape = Shape::parse(s, &op.spec.dims).unwrap();
        let all = enumerate(&op, &shape, &DeviceLimits::SM90_DEFAULT, &[]).unwrap();
        runnable += all.iter().filter(|c| c.pruned.is_none()).count();
        let chosen = cover::pairwise(&all);
        assert!(!chosen.is_empty(), "{} at {s}: nothing runnable", op.name());
        for i in chosen {
            let src = renderer
                .render(&all[i])
                .unwrap_or_else(|e| panic!("{} at {s}: {e}", all[i].config.label()));
            sources
                .entry(src)
                .or_insert_with(|| format!("{s} {}", all[i].config.label()));
        }
    }
    let sources: Vec<(String, String)> = sources.into_iter().collect();
    let compiler = Compiler::new("sm_90", None).expect("NVRTC (scripts/nvrtc-env.sh)");
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((src, label)) = sources.get(i) else {
                    break;
                };
                if let Err(e) = compiler.compile(src) {
                    let first = e.log.lines().next().unwrap_or("").to_string();
                    failures.lock().unwrap().push(format!("{label}: {first}"));
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} of {} sources failed:\n{}",
        failures.len(),
        sources.len(),
        failures.join("\n")
    );
    println!(
        "{}: {} sources compiled for {runnable} runnable configurations",
        op.name(),
        sources.len()
    );
    (sources.len(), runnable)
}

/// Tile multiples (every bounds mode, vectors everywhere), odd strides (rows start inside a
/// vector, partial edge tiles, RUNS=sector and chunk), and thin shapes of one partial tile.
const TRANSPOSE_SHAPES: [&str; 4] = ["256x512", "999x1001", "64x4097", "4096x33"];

#[test]
fn transpose_cover_compiles_in_every_dtype() {
    for dtype in ["f32", "f64", "f16"] {
        let (compiled, runnable) = compile_cover("transpose", Some(dtype), &TRANSPOSE_SHAPES);
        assert!(compiled * 4 < runnable, "{dtype}: {compiled} of {runnable}");
    }
}

#[test]
fn matmul_cover_compiles() {
    compile_cover("matmul", None, &["1024x1024x1024", "1000x999x1001"]);
}

/// All tile multiples (every configuration runnable); both of K and N odd (scalar loads,
/// repacked float4, windows); only N odd; only K odd; the 4-byte async path at M >= BM with
/// odd everything; and a shape smaller than the big tiles.
#[test]
fn sgemm_cover_compiles_at_every_edge_shape() {
    let (compiled, runnable) = compile_cover(
        "sgemm",
        None,
        &[
            "4096x4096x4096",
            "1023x1025x1027",
            "1000x1001x1000",
            "1000x1000x1003",
            "999x1001x1003",
            "100x68x52",
        ],
    );
    assert!(compiled * 10 < runnable, "{compiled} of {runnable}");
}
