//! Split-K across blocks in the sgemm space (`SPLITK`): the SPLITK blocks that share a tile
//! are grid z (one thread block cluster), each takes at least one slice of K, their partial
//! tile fits the block's shared memory, and SPLITK=1 renders the kernel without split-K. The
//! split of the last wave only (`TAIL`): sgemm_lead's grid covers the whole waves and
//! sgemm's the tiles past them, and TAIL=0 renders the kernel without it. No GPU needed (the
//! kernels themselves are compiled by tests/compile_cover.rs).

use cuda_autotune::model::limits::DeviceLimits;
use cuda_autotune::model::shape::Shape;
use cuda_autotune::spec::codegen::Renderer;
use cuda_autotune::spec::expr::Value;
use cuda_autotune::spec::ops::Op;
use cuda_autotune::spec::space::{enumerate, parse_override, Candidate};

/// A 64x64 tile of 4x4 thread tiles copied by 4-byte cp.async (every shape as it is).
const COPY4_TILE: [&str; 15] = [
    "BM=64",
    "BN=64",
    "BK=16",
    "TM=4",
    "TN=4",
    "WARP_N=16",
    "VEC=1",
    "PAD=4",
    "STAGES=2",
    "LOAD=async",
    "BOUNDS=edge",
    "REPACK=0",
    "WINDOWS=0",
    "ORDER=snakek",
    "B_ELEMS=0",
];

/// The one sgemm point at `shape` that `tile` and `extra` (together pinning every parameter
/// with more than one default value; TAIL is 0 unless they give it) leave.
fn point(shape: &str, tile: &[&str], extra: &[&str]) -> Candidate {
    let op = Op::load("sgemm", None).unwrap();
    let pins: Vec<_> = ["TAIL=0"]
        .iter()
        .chain(tile)
        .chain(extra)
        .map(|t| parse_override(&op, t).unwrap())
        .collect();
    let shape = Shape::parse(shape, &op.spec.dims).unwrap();
    let mut all = enumerate(&op, &shape, &DeviceLimits::SM90_DEFAULT, &pins).unwrap();
    assert_eq!(all.len(), 1, "{extra:?}");
    all.remove(0)
}

#[test]
fn split_k_blocks_are_grid_z_over_the_same_tiles() {
    // 333x555x777 in 64x64 tiles: 9 tile columns, 6 tile rows.
    for split in [1, 2, 3, 4, 5, 8] {
        let c = point("333x555x777", &COPY4_TILE, &[&format!("SPLITK={split}")]);
        assert_eq!(c.pruned, None, "SPLITK={split}");
        let launch = c.launch.unwrap();
        assert_eq!(launch.grid, (9, 6, split), "SPLITK={split}");
        assert_eq!(launch.block, (256, 1, 1), "SPLITK={split}");
        // The partial tiles are summed in the kernel: no prologue (no zeroed C).
        assert!(c.prologue.is_empty(), "SPLITK={split}");
    }
}

#[test]
fn every_block_of_a_split_takes_a_slice_of_k() {
    // K = 52 in slices of 16: 4 slices, so at most 4 blocks share a tile.
    let at = |split: &str| point("100x68x52", &COPY4_TILE, &[split]);
    assert_eq!(at("SPLITK=4").pruned, None);
    let why = at("SPLITK=8").pruned.unwrap();
    assert!(why.contains("at least one BK-deep slice of K"), "{why}");
    // Past the portable cluster size, whatever K.
    let why = point("4096x4096x4096", &COPY4_TILE, &["SPLITK=16"])
        .pruned
        .unwrap();
    assert!(why.contains("1 to 8 blocks"), "{why}");
    let why = point("4096x4096x4096", &COPY4_TILE, &["SPLITK=0"])
        .pruned
        .unwrap();
    assert!(why.contains("1 to 8 blocks"), "{why}");
}

#[test]
fn the_partial_tile_fits_the_blocks_shared_memory() {
    // 128x128 tile, one stage of 8-deep slices through registers: 2048 floats of slices,
    // static. With SPLITK > 1 the block's partial tile (128 rows of 128 + 4 floats) reuses
    // them and needs more: 67584 bytes, past the static 48 KB, so dynamic.
    let tile = [
        "BM=128",
        "BN=128",
        "BK=8",
        "TM=8",
        "TN=8",
        "WARP_N=8",
        "VEC=4",
        "PAD=0",
        "STAGES=1",
        "LOAD=regs",
        "BOUNDS=specialized",
        "REPACK=0",
        "WINDOWS=0",
        "ORDER=snakek",
        "B_ELEMS=0",
    ];
    let one = point("4096x4096x4096", &tile, &["SPLITK=1"]);
    assert_eq!(one.var("SMEM_FLOATS"), Some(&Value::Int(2 * 8 * 128)));
    assert_eq!(one.launch.unwrap().shared, 0);
    let two = point("4096x4096x4096", &tile, &["SPLITK=2"]);
    assert_eq!(two.var("SMEM_FLOATS"), Some(&Value::Int(128 * 132)));
    assert_eq!(two.launch.unwrap().shared, 128 * 132 * 4);
}

#[test]
fn split_k_one_renders_the_kernel_without_split_k() {
    let op = Op::load("sgemm", None).unwrap();
    let renderer = Renderer::new(&op).unwrap();
    let render = |split: &str| {
        renderer
            .render(&point("333x555x777", &COPY4_TILE, &[split]))
            .unwrap()
    };
    let one = render("SPLITK=1");
    for split_k_only in ["SPLITK", "cluster", "t0"] {
        assert!(
            !one.contains(split_k_only),
            "SPLITK=1 source holds {split_k_only}"
        );
    }
    let four = render("SPLITK=4");
    assert!(four.lines().next().unwrap().ends_with(" SPLITK=4"));
    assert!(four.contains("#define SPLITK 4\n"));
    assert!(four.contains("__cluster_dims__(1, 1, SPLITK)\nsgemm("));
    // 555 % 4 != 0: C's rows are not 16-byte aligned, so the sums are stored as scalars;
    // at 512 columns they are float4 stores.
    assert!(four.contains("C[r * NC + gc + j] = e[j]"));
    let aligned = renderer
        .render(&point("333x512x777", &COPY4_TILE, &["SPLITK=4"]))
        .unwrap();
    assert!(aligned.contains("*reinterpret_cast<float4*>(C + r * NC + gc) = s;"));
}

/// A 64x128 tile of 8x8 thread tiles (128 threads) loaded as float4s by cp.async.
const FLOAT4_TILE: [&str; 15] = [
    "BM=64",
    "BN=128",
    "BK=16",
    "TM=8",
    "TN=8",
    "WARP_N=4",
    "VEC=4",
    "PAD=4",
    "STAGES=2",
    "LOAD=async",
    "BOUNDS=specialized",
    "REPACK=0",
    "WINDOWS=0",
    "ORDER=snakek",
    "B_ELEMS=0",
];

#[test]
fn the_tiles_past_the_last_whole_wave_are_split_over_clusters() {
    // 4096^3 in 64x128 tiles: 64 x 32 = 2048 tiles. 8x8 thread tiles with float4 cp.async
    // hold an estimated 136 registers, so 3 blocks of 128 threads an SM: a wave is 396
    // blocks on 132 SMs, 5 whole waves are 1980 tiles, and the 68 left over are split over
    // clusters of 396 / 68 = 5 blocks.
    let c = point("4096x4096x4096", &FLOAT4_TILE, &["SPLITK=1", "TAIL=1"]);
    assert_eq!(c.pruned, None);
    assert_eq!(c.var("WAVE"), Some(&Value::Int(396)));
    assert_eq!(c.var("TAIL_SPLIT"), Some(&Value::Int(5)));
    let launch = c.launch.unwrap();
    assert_eq!((launch.grid, launch.block), ((68, 1, 5), (128, 1, 1)));
    assert_eq!(c.prologue.len(), 1);
    let (kernel, lead) = &c.prologue[0];
    assert_eq!(kernel, "sgemm_lead");
    assert_eq!((lead.grid, lead.block), ((1980, 1, 1), (128, 1, 1)));
    // Its partial tile (64 rows of 128 + 4 floats) is more than the two stages of slices.
    assert_eq!(c.var("SMEM_FLOATS"), Some(&Value::Int(64 * 132)));
    assert_eq!(launch.shared, 0);
    // TAIL=0: the whole grid in one launch.
    let whole = point("4096x4096x4096", &FLOAT4_TILE, &["SPLITK=1", "TAIL=0"]);
    assert_eq!(whole.launch.unwrap().grid, (32, 64, 1));
    assert!(whole.prologue.is_empty());
}

#[test]
fn a_tail_split_needs_a_wave_and_at_most_half_a_wave_left_over() {
    let why = |shape: &str, extra: &[&str]| {
        point(shape, &FLOAT4_TILE, extra)
            .pruned
            .map(|w| w.to_string())
            .unwrap_or_default()
    };
    // 1024^3: 128 tiles, not a wave.
    assert!(why("1024x1024x1024", &["SPLITK=1", "TAIL=1"]).contains("more than a wave"));
    // 1408x4096: 22 x 32 = 704 tiles, 308 past the first wave: more than half a wave.
    assert!(why("1408x4096x4096", &["SPLITK=1", "TAIL=1"]).contains("at most half a wave"));
    // 4224x4096: 66 x 32 = 2112 tiles, 5 waves and 132 past them.
    assert_eq!(why("4224x4096x4096", &["SPLITK=1", "TAIL=1"]), "");
    // A switch: 0 or 1.
    assert!(why("4096x4096x4096", &["SPLITK=1", "TAIL=2"]).contains("0 (one launch) or 1"));
    // The split of every tile and of the last wave's do not combine.
    assert!(why("4096x4096x4096", &["SPLITK=2", "TAIL=1"]).contains("one or the other"));
}

#[test]
fn tail_zero_renders_the_kernel_without_the_split() {
    let op = Op::load("sgemm", None).unwrap();
    let renderer = Renderer::new(&op).unwrap();
    let render = |tail: &str| {
        renderer
            .render(&point("4096x4096x4096", &FLOAT4_TILE, &["SPLITK=1", tail]))
            .unwrap()
    };
    let zero = render("TAIL=0");
    for split_only in ["TAIL", "SPLITK", "cluster", "sgemm_lead", "t0"] {
        assert!(
            !zero.contains(split_only),
            "TAIL=0 source holds {split_only}"
        );
    }
    let one = render("TAIL=1");
    assert!(one.lines().next().unwrap().ends_with(" TAIL=1"));
    assert!(one.contains("#define SPLITK 5\n"));
    assert!(one.contains(") __cluster_dims__(1, 1, SPLITK)\nsgemm("));
    assert!(one.contains("\nsgemm_lead("));
}

/// Thread block clusters (SPLITK > 1, TAIL=1) need compute capability 9.0 and cp.async
/// (LOAD=async) 8.0: a compile target without them prunes those configurations, saying why,
/// and keeps the rest.
#[test]
fn clusters_and_cp_async_are_pruned_for_targets_without_them() {
    let op = Op::load("sgemm", None).unwrap();
    let shape = Shape::parse("4096x4096x4096", &op.spec.dims).unwrap();
    let why = |arch: &str, extra: &[&str]| {
        let pins: Vec<_> = FLOAT4_TILE
            .iter()
            .filter(|t| !t.starts_with("LOAD="))
            .chain(extra)
            .map(|t| parse_override(&op, t).unwrap())
            .collect();
        let limits = DeviceLimits::for_arch(arch).unwrap();
        let mut all = enumerate(&op, &shape, &limits, &pins).unwrap();
        assert_eq!(all.len(), 1, "{extra:?}");
        all.remove(0)
            .pruned
            .map(|w| w.to_string())
            .unwrap_or_default()
    };
    let async_copies = ["LOAD=async", "SPLITK=1", "TAIL=0"];
    let clusters = [
        ["LOAD=async", "SPLITK=2", "TAIL=0"],
        ["LOAD=async", "SPLITK=1", "TAIL=1"],
    ];
    for extra in clusters {
        assert_eq!(why("sm_90", &extra), "");
        assert_eq!(why("sm_100", &extra), "");
        assert!(
            why("sm_80", &extra).contains("thread block clusters"),
            "{extra:?}"
        );
    }
    assert_eq!(why("sm_80", &async_copies), "");
    assert!(why("sm_75", &async_copies).contains("cp.async"));
    assert_eq!(why("sm_75", &["LOAD=regs", "SPLITK=1", "TAIL=0"]), "");
}
