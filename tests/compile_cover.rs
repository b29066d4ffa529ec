//! The real NVRTC compiles an all-pairs covering set of every built-in op's default space, at
//! the shapes each bounds mode and load path needs: every value of every parameter, and every
//! pair of values of any two parameters that a runnable configuration holds together, is
//! compiled (see `cuda_autotune::spec::cover`). No GPU needed: NVRTC comes from
//! `scripts/nvrtc-env.sh`, and the tool's own compile workers (`tune __compile-worker`) run it.
//!
//! Levers outside the default sweep (chunk reads, KSPLIT, FFMA orders and C stores) get the
//! same guarantee over the space they open. The whole cartesian products (thousands of sgemm
//! sources, an hour on two cores) are the ignored tests `every_default_*` in tests/cli.rs:
//! `bash scripts/test.sh --all` runs them.

use cuda_autotune::isolate::compile_pool::{CompileLimit, CompilePool, PoolReply};
use cuda_autotune::model::limits::DeviceLimits;
use cuda_autotune::model::shape::Shape;
use cuda_autotune::spec::codegen::Renderer;
use cuda_autotune::spec::cover;
use cuda_autotune::spec::ops::Op;
use cuda_autotune::spec::space::{enumerate_space, parse_override, Candidate};
use std::path::Path;

/// Renders an all-pairs covering set of `op`'s space (its default space narrowed or widened
/// by `params`, as `--param` takes them) over the element types `dtypes` and the `shapes`,
/// and compiles every distinct source; returns (sources compiled, runnable configurations).
///
/// The element type and the shape are two more parameters of the cover: every value of every
/// parameter is compiled in every element type and at every shape where it is runnable, and
/// every pair of values of two parameters at least once.
fn compile_cover(
    op: &str,
    dtypes: &[Option<&str>],
    shapes: &[&str],
    params: &[&str],
) -> (usize, usize) {
    let mut renderers = Vec::new();
    // Every runnable point of every (dtype, shape) space; `renderer_of[i]` is the element type
    // (its renderer) of `points[i]`, and `rows[i]` its values with the dtype and shape in front,
    // one id per (parameter, value), for the cover.
    let mut points: Vec<Candidate> = Vec::new();
    let mut renderer_of: Vec<usize> = Vec::new();
    let mut rows: Vec<Vec<u32>> = Vec::new();
    let mut ids: std::collections::HashMap<(usize, String), u32> = Default::default();
    let mut id = |slot: usize, value: String| {
        let next = ids.len() as u32;
        *ids.entry((slot, value)).or_insert(next)
    };
    for dtype in dtypes {
        let op = Op::load(op, None).unwrap().with_dtype(*dtype).unwrap();
        let overrides: Vec<_> = params
            .iter()
            .map(|p| parse_override(&op, p).unwrap())
            .collect();
        for s in shapes {
            let shape = Shape::parse(s, &op.spec.dims).unwrap();
            // Valid points only: the pruned ones are skipped by the subtree, never listed.
            let valid =
                enumerate_space(&op, &shape, &DeviceLimits::SM90_DEFAULT, &overrides, false)
                    .unwrap()
                    .candidates;
            let before = points.len();
            for c in valid {
                let mut row = vec![id(0, op.dtype.name().to_string()), id(1, s.to_string())];
                row.extend(
                    c.config
                        .values()
                        .enumerate()
                        .map(|(k, (_, v))| id(k + 2, v.to_string())),
                );
                rows.push(row);
                points.push(c);
                renderer_of.push(renderers.len());
            }
            assert!(
                points.len() > before,
                "{} at {s}: nothing runnable",
                op.name()
            );
        }
        renderers.push(Renderer::new(&op).unwrap());
    }
    // Keyed by the source: configurations that render the same kernel compile once.
    let mut sources = std::collections::BTreeMap::new();
    for i in cover::pairwise_rows(&rows) {
        let c = &points[i];
        let src = renderers[renderer_of[i]]
            .render(c)
            .unwrap_or_else(|e| panic!("{}: {e}", c.config.label()));
        sources.entry(src).or_insert_with(|| c.config.label());
    }
    let runnable = points.len();
    let sources: Vec<(String, String)> = sources.into_iter().collect();
    // The tool's own compile workers (`tune __compile-worker`, one process per core) compile
    // them, as a tuning run does; NVRTC never loads in this process.
    let dir = tempfile::tempdir().unwrap();
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut pool = CompilePool::new(
        Path::new(env!("CARGO_BIN_EXE_tune")),
        "sm_90",
        None,
        threads,
        CompileLimit::Off,
    );
    for (i, (src, _)) in sources.iter().enumerate() {
        let path = dir.path().join(format!("{i}.cu"));
        std::fs::write(&path, src).unwrap();
        pool.submit(i, path).unwrap();
    }
    let mut failures = Vec::new();
    while let Some((i, reply)) = pool.recv(None) {
        let why = match reply {
            PoolReply::Done(r) if r.ok => continue,
            PoolReply::Done(r) => r.log.lines().next().unwrap_or("").to_string(),
            other => format!("{other:?}"),
        };
        failures.push(format!("{}: {why}", sources[i].1));
    }
    assert!(
        failures.is_empty(),
        "{} of {} sources failed:\n{}",
        failures.len(),
        sources.len(),
        failures.join("\n")
    );
    println!(
        "{op}: {} sources compiled for {runnable} runnable configurations",
        sources.len()
    );
    (sources.len(), runnable)
}

/// Tile multiples (every bounds mode, vectors everywhere), odd strides (rows start inside a
/// vector, partial edge tiles, RUNS=sector and chunk), and thin shapes of one partial tile.
const TRANSPOSE_SHAPES: [&str; 4] = ["256x512", "999x1001", "64x4097", "4096x33"];

const DTYPES: [Option<&str>; 3] = [Some("f32"), Some("f64"), Some("f16")];

/// bf16 renders the f16 kernels with another storage type (the f16 cover compiles the same
/// code): one short side, where both layouts are searched.
#[test]
fn transpose_cover_compiles_in_bf16() {
    compile_cover("transpose", &[Some("bf16")], &["5x3001"], &[]);
}

/// The slab layout: short rows and short columns, at long sides that are not a multiple of
/// any VEC (the shuffled, realigned runs).
#[test]
fn transpose_slab_cover_compiles_in_every_dtype() {
    let (_, runnable) = compile_cover(
        "transpose",
        &DTYPES,
        &["6x3001", "3001x6"],
        &["LAYOUT=slab"],
    );
    assert!(runnable > 0);
}

#[test]
fn transpose_cover_compiles_in_every_dtype() {
    let (compiled, runnable) = compile_cover("transpose", &DTYPES, &TRANSPOSE_SHAPES, &[]);
    assert!(compiled * 20 < runnable, "{compiled} of {runnable}");
}

#[test]
fn matmul_cover_compiles() {
    compile_cover("matmul", &[None], &["1024x1024x1024", "1000x999x1001"], &[]);
}

/// All tile multiples (every configuration runnable); both of K and N odd (scalar loads,
/// repacked float4, windows); only N odd; only K odd; the 4-byte async path at M >= BM with
/// odd everything; and a shape smaller than the big tiles.
#[test]
fn sgemm_cover_compiles_at_every_edge_shape() {
    let (compiled, runnable) = compile_cover(
        "sgemm",
        &[None],
        &[
            "4096x4096x4096",
            "1023x1025x1027",
            "1000x1001x1000",
            "1000x1000x1003",
            "999x1001x1003",
            "100x68x52",
        ],
        // TAIL=1 (a finishing value of the default sweep) has a cover of its own, below.
        &["TAIL=0"],
    );
    assert!(compiled * 100 < runnable, "{compiled} of {runnable}");
}

/// READ=chunk (rows of in read as the aligned 16-byte chunks that hold them) on every
/// sector-aligned tile (RUNS=sector, VEC=1) in every element type, at an odd stride where
/// rows start at every offset within a chunk.
#[test]
fn transpose_chunk_read_cover_compiles_in_every_dtype() {
    let chunk = ["VEC=1", "RUNS=sector", "READ=chunk"];
    let (_, runnable) = compile_cover("transpose", &DTYPES, &["999x1001"], &chunk);
    // Every sector-aligned tile of the default sweep, both OCCUPANCY, CACHE and BLOCK_ORDER
    // values.
    assert_eq!(runnable, 3872);
}

/// KSPLIT (groups of warps splitting each slice's k steps, partial tiles summed through shared
/// memory) over the whole default space otherwise, where M, N and K are all odd (scalar and
/// float4 loads, repack and windows) and where everything is a tile multiple.
#[test]
fn sgemm_ksplit_cover_compiles() {
    let shapes = ["1023x1025x1027", "1024x1024x1024"];
    compile_cover("sgemm", &[None], &shapes, &["KSPLIT=2,4"]);
}

/// Every FFMA order and both ways of storing C, with the rest of the default space, at a shape
/// that is no tile multiple (the default sweep compiles only snakek with scalar stores).
#[test]
fn sgemm_fma_order_and_c_store_cover_compiles() {
    let orders = ["ORDER=row,snake,snakek", "CSTORE=vec4,scalar"];
    compile_cover("sgemm", &[None], &["100x68x52"], &orders);
}

/// Split-K across blocks (SPLITK > 1: a cluster of blocks per tile, partial tiles summed
/// through distributed shared memory) with every pair of the rest of the default space, where
/// M, N and K are all odd (scalar and float4 loads, repack and windows) and where everything is
/// a tile multiple. The default space holds SPLITK too, but only as one value among others.
#[test]
fn sgemm_splitk_cover_compiles() {
    let shapes = ["333x555x777", "512x512x512"];
    compile_cover("sgemm", &[None], &shapes, &["SPLITK=2,3,4,5,8"]);
}

/// The split of the last wave (TAIL=1: sgemm_lead computes the whole waves' tiles, then a
/// cluster of blocks splits each tile past them) with every pair of the rest of the default
/// space, at a tile multiple and where M, N and K are all odd (scalar and float4 loads,
/// repack and windows). The edge-shape cover above pins TAIL=0.
#[test]
fn sgemm_tail_cover_compiles() {
    let shapes = ["4096x4096x4096", "4095x4097x4099"];
    // TAIL=1 needs SPLITK=1: pinned, the cover enumerates a sixth of the points.
    compile_cover("sgemm", &[None], &shapes, &["TAIL=1", "SPLITK=1"]);
}
