//! End-to-end tests of the `tune` binary as a user runs it: bad input, a machine without a
//! GPU, compiling the whole default space with NVRTC, `--emit`, the cubin cache, broken
//! templates and `--help`.
//!
//! The compile tests need NVRTC and fail (they do not skip) when it cannot be loaded: run
//! them through scripts/test.sh, or with `export LD_LIBRARY_PATH=$(scripts/nvrtc-env.sh)`.
//! No test needs a GPU. Every run points `CUDA_AUTOTUNE_CACHE` at a temporary folder, so the
//! user's cubin cache is never read or written.

use assert_cmd::Command;
use cuda_autotune::model::limits::DeviceLimits;
use cuda_autotune::model::shape::Shape;
use cuda_autotune::spec::ops::Op;
use cuda_autotune::spec::space::{enumerate, parse_override, prune_summary};
use predicates::prelude::*;
use std::path::{Path, PathBuf};
use tempfile::TempDir;

mod common;
use common::{
    count_before, cubin_count, has_gpu, interrupt_after_first_cubin, skip_on_a_gpu, text, tmp, tune,
};

/// Asserts that stderr is exactly one line `error: ...` and holds no panic; returns the line.
fn one_error_line(stderr: &[u8]) -> String {
    let stderr = text(stderr);
    assert!(
        !stderr.contains("panicked"),
        "the binary panicked:\n{stderr}"
    );
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(
        lines.len(),
        1,
        "expected one error line on stderr, got:\n{stderr}"
    );
    assert!(
        lines[0].starts_with("error: "),
        "stderr does not start with 'error: ':\n{stderr}"
    );
    lines[0].to_string()
}

/// Runs `tune` with `args`, expects exit code 2 and one `error:` line; returns that line.
fn input_error(args: &[&str]) -> String {
    let tmp = tmp();
    let out = tune(&tmp).args(args).output().expect("tune runs");
    let line = one_error_line(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "tune {args:?}: expected exit code 2 (bad input), stderr: {line}"
    );
    assert!(
        out.stdout.is_empty(),
        "tune {args:?}: nothing belongs on stdout after bad input, got:\n{}",
        text(&out.stdout)
    );
    line
}

/// Bad input is reported the same way whether or not the run would need a GPU, because it is
/// checked before any GPU or compiler is touched: with `--compile-only`, without it (this
/// exercises the GPU path on a machine without one), and without NVRTC on the library path.
fn input_error_everywhere(args: &[&str]) -> String {
    let line = input_error_compile_only(args);
    assert_eq!(
        input_error(args),
        line,
        "the message must not depend on --compile-only"
    );
    line
}

/// Like [`input_error_everywhere`], for input whose check needs the device limits (which
/// come from the GPU in a tuning run): only with `--compile-only`, with and without NVRTC.
fn input_error_compile_only(args: &[&str]) -> String {
    let with = [args, &["--compile-only"]].concat();
    let line = input_error(&with);
    let tmp = tmp();
    let out = tune(&tmp)
        .args(&with)
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .expect("tune runs");
    assert_eq!(
        out.status.code(),
        Some(2),
        "without NVRTC, tune {with:?} must still fail as bad input: {}",
        text(&out.stderr)
    );
    assert_eq!(one_error_line(&out.stderr), line);
    line
}

// ---------------------------------------------------------------------------------------
// 1. Bad input: one line, exit code 2, no panic.
// ---------------------------------------------------------------------------------------

#[test]
fn malformed_shapes_are_rejected() {
    for (shape, why) in [
        ("1000", "expected 2 dimensions"),
        ("0x10", "at least 1"),
        ("-5x3", "must be positive"),
        ("axb", "positive integer"),
        ("1000x1000x5", "expected 2 dimensions"),
        ("3000000000x2", "exceeds the 32-bit kernel limit"),
        ("x10", "empty"),
        ("10x", "empty"),
    ] {
        // `--shape=` so that `-5x3` reaches the shape parser instead of clap's flag parser.
        let line = input_error_everywhere(&[&format!("--shape={shape}")]);
        assert!(
            line.contains(&format!("invalid shape '{shape}'")) && line.contains(why),
            "shape {shape}: {line}"
        );
    }
}

#[test]
fn negative_shape_after_a_space_is_a_usage_error_not_a_panic() {
    // `--shape -5x3` (with a space) is parsed by clap as the flag `-5`; it must still be
    // rejected as bad input without a panic.
    let tmp = tmp();
    let out = tune(&tmp)
        .args(["--shape", "-5x3", "--compile-only"])
        .output()
        .expect("tune runs");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn unknown_op_lists_the_known_ops() {
    let line = input_error_everywhere(&["--op", "fft", "--shape", "64x64"]);
    assert!(line.contains("unknown op 'fft'"), "{line}");
    assert!(
        line.contains("transpose"),
        "the known ops are listed: {line}"
    );
}

#[test]
fn unknown_parameter_lists_the_known_parameters() {
    let line = input_error_everywhere(&["--shape", "64x64", "--param", "TILES=4"]);
    assert!(line.contains("unknown parameter 'TILES'"), "{line}");
    for known in ["TILE_DIM", "BLOCK_ROWS", "PAD", "UNROLL", "BOUNDS"] {
        assert!(line.contains(known), "{known} is not listed: {line}");
    }
}

#[test]
fn bad_parameter_values_are_rejected() {
    let line = input_error_everywhere(&["--shape", "64x64", "--param", "TILE_DIM="]);
    assert!(
        line.contains("TILE_DIM=") && line.contains("empty value"),
        "{line}"
    );

    let line = input_error_everywhere(&["--shape", "64x64", "--param", "TILE_DIM=32,,64"]);
    assert!(line.contains("empty value"), "{line}");

    let line = input_error_everywhere(&["--shape", "64x64", "--param", "TILE_DIM"]);
    assert!(line.contains("NAME=v1,v2"), "{line}");

    let line = input_error_everywhere(&["--shape", "64x64", "--param", "TILE_DIM=big"]);
    assert!(line.contains("integers"), "{line}");

    let line = input_error_everywhere(&["--shape", "64x64", "--param", "BOUNDS=sometimes"]);
    assert!(line.contains("BOUNDS=sometimes"), "{line}");
    for known in ["none", "always", "specialized", "edge"] {
        assert!(
            line.contains(known),
            "allowed word {known} not listed: {line}"
        );
    }
}

#[test]
fn bad_arch_is_rejected() {
    for arch in ["compute_90", "90", "sm_", "sm_9x"] {
        let line = input_error_everywhere(&["--shape", "64x64", "--arch", arch]);
        assert!(
            line.contains(&format!("invalid --arch '{arch}'")) && line.contains("sm_90"),
            "{arch}: {line}"
        );
    }
}

#[test]
fn a_space_emptied_by_the_constraints_is_rejected() {
    // 64 x 32 = 2048 threads per block (one element per thread): every configuration is
    // over the limit. The limits are the GPU's in a tuning run, so only --compile-only (sm_90
    // limits) needs no GPU.
    let line = input_error_compile_only(&[
        "--shape",
        "64x64",
        "--param",
        "TILE_DIM=64",
        "--param",
        "BLOCK_ROWS=32",
        "--param",
        "VEC=1",
        "--param",
        "LAYOUT=tile",
    ]);
    assert!(line.contains("pruned"), "{line}");
    assert!(
        line.contains("more threads per block than the device allows"),
        "the reason is given: {line}"
    );
}

// ---------------------------------------------------------------------------------------
// 2. No GPU.
// ---------------------------------------------------------------------------------------

#[test]
fn without_a_gpu_a_tuning_run_says_so_and_points_to_compile_only() {
    if skip_on_a_gpu("without_a_gpu_a_tuning_run_says_so_and_points_to_compile_only") {
        return;
    }
    let tmp = tmp();
    let out = tune(&tmp)
        .args(["--shape", "64x64"])
        .output()
        .expect("tune runs");
    let line = one_error_line(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "environment error: {line}");
    assert!(
        line.contains("driver") || line.contains("GPU"),
        "names the driver or the GPU: {line}"
    );
    assert!(
        line.contains("--compile-only"),
        "suggests --compile-only: {line}"
    );
    assert!(
        !tmp.path().join("results").exists(),
        "no results are written without a GPU"
    );
}

// ---------------------------------------------------------------------------------------
// 3.-5. NVRTC: compile the space, emit sources, the cubin cache.
// ---------------------------------------------------------------------------------------

/// The counts on the first line of a compile-only report:
/// `compile-only for sm_90: N variants compiled (U unique sources, C from cache), F failed,
/// P pruned, in S s`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Summary {
    compiled: usize,
    unique: usize,
    from_cache: usize,
    failed: usize,
    pruned: usize,
}

fn summary(stdout: &str) -> Summary {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("compile-only for "))
        .unwrap_or_else(|| panic!("no compile-only summary on stdout:\n{stdout}"));
    Summary {
        compiled: count_before(line, " variants compiled"),
        unique: count_before(line, " unique sources"),
        from_cache: count_before(line, " from cache"),
        failed: count_before(line, " failed"),
        pruned: count_before(line, " pruned"),
    }
}

/// What a compile-only run printed.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `tune --compile-only --arch sm_90 ARGS`. Fails the test, with what to do, when NVRTC
/// cannot be loaded: these tests are the proof that every variant compiles and must not
/// silently pass on a machine without NVRTC.
fn compile_only(tmp: &TempDir, args: &[&str]) -> Run {
    let started = std::time::Instant::now();
    let out = tune(tmp)
        .args(["--compile-only", "--arch", "sm_90"])
        .args(args)
        .output()
        .expect("tune runs");
    let took = started.elapsed();
    let run = Run {
        code: out.status.code(),
        stdout: text(&out.stdout),
        stderr: text(&out.stderr),
    };
    if run.stderr.contains("NVRTC is not available") {
        panic!(
            "NVRTC could not be loaded, so the compile tests cannot prove that the kernels \
             compile. Run the tests with scripts/test.sh (or `export \
             LD_LIBRARY_PATH=$(scripts/nvrtc-env.sh)` first).\n{}",
            run.stderr
        );
    }
    assert!(!run.stderr.contains("panicked"), "panic:\n{}", run.stderr);
    // stderr is a pipe here, not a terminal: the compile phase prints a plain progress line
    // every 10 s, and none in a run shorter than that. (A run of over 30 s spent at most a
    // few seconds before its compile phase.)
    let progress = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("compile: ") && l.contains(" done in "))
        .count();
    if took.as_secs_f64() < 9.5 {
        assert_eq!(progress, 0, "{took:?}:\n{}", run.stderr);
    }
    if took.as_secs_f64() > 30.0 {
        assert!(
            progress >= 1,
            "no progress line in {took:?}:\n{}",
            run.stderr
        );
    }
    run
}

/// Runs compile-only and expects every live variant to compile.
fn compiles_cleanly(tmp: &TempDir, args: &[&str]) -> Summary {
    let run = compile_only(tmp, args);
    assert_eq!(
        run.code,
        Some(0),
        "tune --compile-only {args:?} failed:\nstdout:\n{}\nstderr:\n{}",
        run.stdout,
        run.stderr
    );
    assert!(
        run.stdout.contains(", 0 failed,"),
        "not all variants compiled:\n{}",
        run.stdout
    );
    assert!(
        !run.stdout.contains("FAILED"),
        "failed variants listed:\n{}",
        run.stdout
    );
    let s = summary(&run.stdout);
    assert_eq!(s.failed, 0);
    s
}

/// `--op sgemm --shape SHAPE` and a `--param` before each of `params`.
fn sgemm_args<'a>(shape: &'a str, params: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["--op", "sgemm", "--shape", shape];
    for p in params {
        args.extend(["--param", p]);
    }
    args
}

/// Every default transpose variant of every element type compiles, at a shape that is a
/// multiple of every tile (all bounds modes, vectors everywhere)...
#[test]
#[ignore = "exhaustive compile: bash scripts/test.sh --all"]
fn every_default_variant_compiles_for_a_tile_multiple_shape() {
    let tmp = tmp();
    for (dtype, live) in [("f32", 6720), ("f64", 4032), ("f16", 7360)] {
        let s = compiles_cleanly(
            &tmp,
            &["--shape", "256x512", "--dtype", dtype, "--no-cache"],
        );
        assert_eq!(s.compiled, live, "{dtype}: {s:?}");
        // RUNS=sector and RUNS=chunk are pruned: rows of out are whole sectors and rows of in
        // whole chunks here; so is the slab layout (no short side).
        assert_eq!(
            s.compiled + s.pruned,
            497664,
            "{dtype}: the default space: {s:?}"
        );
        assert_eq!(s.from_cache, 0, "--no-cache reads no cache: {s:?}");
        assert_eq!(
            s.unique, s.compiled,
            "{dtype}: every variant is its own source: {s:?}"
        );
    }
    assert!(
        !tmp.path().join("cache").exists(),
        "--no-cache must not write the cache"
    );
}

/// ... and at odd strides, where rows start inside a vector (VEC > 1 peels each row: the
/// template's other vector path) and the right and bottom tiles are partial.
#[test]
#[ignore = "exhaustive compile: bash scripts/test.sh --all"]
fn every_default_variant_compiles_for_a_non_multiple_shape() {
    let tmp = tmp();
    for (dtype, live) in [("f32", 9168), ("f64", 6384), ("f16", 9648)] {
        let s = compiles_cleanly(
            &tmp,
            &["--shape", "999x1001", "--dtype", dtype, "--no-cache"],
        );
        assert_eq!(s.compiled, live, "{dtype}: {s:?}");
        // BOUNDS=none needs tile multiples: all pruned here; RUNS=sector and chunk live here only.
        assert_eq!(s.compiled + s.pruned, 497664, "{dtype}: {s:?}");
        assert_eq!(s.from_cache, 0, "{s:?}");
    }
}

#[test]
fn dtypes_an_op_does_not_support_are_rejected() {
    for op in [
        ["--op", "matmul", "--shape", "64x64x64"],
        ["--op", "sgemm", "--shape", "64x64x64"],
    ] {
        let line = input_error_everywhere(&[&op[..], &["--dtype", "f64"]].concat());
        assert!(
            line.contains("--dtype f64")
                && line.contains(&format!("op {} supports f32 only", op[1])),
            "{line}"
        );
    }
    let line = input_error_everywhere(&["--shape", "64x64", "--dtype", "f8"]);
    assert!(
        line.contains("op transpose supports f32, f64, f16, bf16 only")
            && line.contains("'f8' is not an element type"),
        "{line}"
    );
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    files.sort();
    files
}

/// The choices outside the default sweep compile too: the L2 prefetch-size hints on every
/// load width (one element, 8- and 16-byte vectors, realigned or not), with and without
/// sector-aligned runs, in every element type.
#[test]
fn cache_hint_choices_compile_on_every_load_path() {
    let tmp = tmp();
    for dtype in ["f32", "f64", "f16"] {
        for shape in ["256x512", "999x1001"] {
            let s = compiles_cleanly(
                &tmp,
                &[
                    "--shape",
                    shape,
                    "--dtype",
                    dtype,
                    "--no-cache",
                    "--param",
                    "TILE_DIM=32",
                    "--param",
                    "BLOCK_ROWS=8",
                    "--param",
                    "BOUNDS=edge",
                    "--param",
                    "TILES_PER_BLOCK=1",
                    "--param",
                    "ASPECT=square",
                    "--param",
                    "CACHE=l2_128,l2_256",
                    "--param",
                    "OCCUPANCY=0",
                    "--param",
                    "READ=elem",
                    "--param",
                    "LAYOUT=tile",
                    "--param",
                    "BLOCK_ORDER=rows",
                ],
            );
            // Two hints x (VEC 1, 2 and, but for f64, 4: VEC=8 leaves too few rows of vectors
            // for 8 rows of threads; plus, at the odd shape, RUNS=sector with VEC=1 and
            // RUNS=chunk with VEC=1, whose 16-byte loads take the hint too).
            let vecs = if dtype == "f64" { 2 } else { 3 };
            let odd_runs = if shape == "999x1001" { 2 } else { 0 };
            assert_eq!(s.compiled, 2 * (vecs + odd_runs), "{dtype} {shape}: {s:?}");
        }
    }
}

/// READ=chunk is pruned, with its reason, where runs of out are whole sectors (so no tile is
/// sector-aligned): `tune` refuses the emptied space, and the space names the reason for every
/// sector tile; tests/compile_cover.rs compiles it where it applies.
#[test]
fn chunk_reads_are_pruned_where_no_tile_is_sector_aligned() {
    let tmp = tmp();
    let run = compile_only(&tmp, &["--shape", "1024x1024", "--param", "READ=chunk"]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("with --param READ=chunk: all 248832 configurations were pruned"),
        "{}",
        run.stderr
    );
    let op = Op::load("transpose", None).unwrap();
    let shape = Shape::parse("1024x1024", &op.spec.dims).unwrap();
    let chunk = [parse_override(&op, "READ=chunk").unwrap()];
    let space = enumerate(&op, &shape, &DeviceLimits::SM90_DEFAULT, &chunk).unwrap();
    let reasons = prune_summary(&space);
    assert!(
        reasons
            .iter()
            .any(|(r, _)| r.contains("READ=chunk is the read of RUNS=sector tiles only")),
        "{reasons:?}"
    );
}

/// A small transpose space on a ragged shape: 16-wide tiles, two BLOCK_ROWS, both PADs,
/// `unroll` (an `UNROLL=...` setting), the classic kernel's other parameters (`pins`), no cache.
fn small_transpose<'a>(pins: &'a [String], unroll: &'a str) -> Vec<&'a str> {
    let mut args = vec![
        "--shape",
        "999x1001",
        "--no-cache",
        "--param",
        "TILE_DIM=16",
        "--param",
        "BLOCK_ROWS=4,8",
        "--param",
        "PAD=0,1",
        "--param",
        unroll,
    ];
    args.extend(pins.iter().map(String::as_str));
    args
}

/// A compile past `--compile-timeout` is stopped and its variant recorded as not compiled,
/// not as a compile error; `--compile-timeout 0` waits for every compile. No NVRTC compile of
/// a transpose takes under 10 ms, so with that limit none compiles, and the compile-only run,
/// which left every source unbuilt, exits 1 saying so.
#[test]
fn compiles_past_the_time_limit_are_stopped_and_fail_a_compile_only_run() {
    let tmp = tmp();
    let pins = common::classic_transpose_pins();
    let args = small_transpose(&pins, "UNROLL=on");
    let mut limited = args.clone();
    limited.extend(["--compile-timeout", "0.01", "--jobs", "2"]);
    let run = compile_only(&tmp, &limited);
    assert_eq!(run.code, Some(1), "{}\n{}", run.stdout, run.stderr);
    assert_eq!(
        run.stderr.trim(),
        "error: 999x1001: no variant compiled (12 ran past the compile time limit; \
         --compile-timeout 0 waits for every compile)",
    );
    let s = summary(&run.stdout);
    assert_eq!((s.compiled, s.failed), (0, 0), "{}", run.stdout);
    assert_eq!(
        count_before(&run.stdout, " past the compile time limit"),
        12,
        "2 BLOCK_ROWS x 2 PAD x 3 BOUNDS:\n{}",
        run.stdout
    );
    let mut unlimited = args.clone();
    unlimited.extend(["--compile-timeout", "0", "--jobs", "2"]);
    assert_eq!(compiles_cleanly(&tmp, &unlimited).compiled, 12);
}

#[test]
fn emit_writes_one_source_per_compiled_variant() {
    let tmp = tmp();
    // A folder that does not exist yet, as in `--emit gen/`.
    let emit = tmp.path().join("gen").join("sources");
    let emit_arg = emit.to_str().expect("a UTF-8 temp path");
    let pins = common::classic_transpose_pins();
    let mut args = small_transpose(&pins, "UNROLL=off,on");
    args.extend(["--emit", emit_arg]);
    let s = compiles_cleanly(&tmp, &args);
    // 2 BLOCK_ROWS x 2 PAD x 2 UNROLL x 3 BOUNDS (none is pruned on a ragged shape).
    assert_eq!(s.compiled, 24, "{s:?}");
    let files = files_in(&emit);
    assert_eq!(
        files.len(),
        s.compiled,
        "one .cu per compiled variant: {files:?}"
    );
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        assert!(
            name.starts_with("transpose_999x1001_f32_v") && name.ends_with(".cu"),
            "unexpected file {name}"
        );
        let src = std::fs::read_to_string(f).expect("emitted source is UTF-8");
        for needle in [
            "#define TILE_W 16",
            "#define BLOCK_ROWS",
            "#define PAD",
            "__global__",
        ] {
            assert!(src.contains(needle), "{name} lacks '{needle}'");
        }
        assert!(
            !src.contains("{{") && !src.contains("{%"),
            "{name} is not fully rendered"
        );
    }
}

/// Runs of several shapes and element types into one `--emit` folder keep every source:
/// each file's name carries the shape and the element type, not only the variant's index.
#[test]
fn emit_names_carry_the_shape_and_the_dtype() {
    let tmp = tmp();
    let emit = tmp.path().join("gen");
    let emit_arg = emit.to_str().expect("a UTF-8 temp path");
    let pins = common::classic_transpose_pins();
    let mut args = small_transpose(&pins, "UNROLL=off");
    (args[1], args[6], args[8]) = ("999x1001,1001x999", "BLOCK_ROWS=4", "PAD=0");
    args.extend(["--emit", emit_arg]);
    let first = compile_only(&tmp, &args);
    assert_eq!(
        first.code,
        Some(0),
        "{}
{}",
        first.stdout,
        first.stderr
    );
    args.extend(["--dtype", "f64"]);
    let second = compile_only(&tmp, &args);
    assert_eq!(
        second.code,
        Some(0),
        "{}
{}",
        second.stdout,
        second.stderr
    );
    let names: Vec<String> = files_in(&emit)
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().to_string())
        .collect();
    for prefix in [
        "transpose_999x1001_f32_v",
        "transpose_1001x999_f32_v",
        "transpose_999x1001_f64_v",
        "transpose_1001x999_f64_v",
    ] {
        let mine: Vec<&String> = names.iter().filter(|n| n.starts_with(prefix)).collect();
        assert!(!mine.is_empty(), "no {prefix}*.cu in {names:?}");
        for name in mine {
            let src = std::fs::read_to_string(emit.join(name)).expect("emitted source is UTF-8");
            let dtype = if prefix.contains("f64") { "f64" } else { "f32" };
            let header = format!("transpose variant ({dtype})");
            assert!(src.contains(&header), "{name} is not the {dtype} source");
        }
    }
}

#[test]
fn the_cubin_cache_is_reused_and_a_damaged_entry_is_rebuilt() {
    let tmp = tmp();
    let pins = common::classic_transpose_pins();
    let mut args = vec![
        "--shape",
        "1000x1000",
        "--param",
        "TILE_DIM=16,32",
        "--param",
        "BLOCK_ROWS=4,8",
        "--param",
        "PAD=0,1",
        "--param",
        "UNROLL=on",
        "--param",
        "BOUNDS=always",
    ];
    args.extend(pins.iter().map(String::as_str));
    let first = compiles_cleanly(&tmp, &args);
    assert_eq!(first.compiled, 8, "{first:?}");
    assert_eq!(first.from_cache, 0, "the cache starts empty: {first:?}");
    let cubins = tmp.path().join("cache").join("cubin");
    let entries = files_in(&cubins);
    assert_eq!(
        entries.len(),
        first.unique,
        "one cache entry per unique source: {entries:?}"
    );

    let second = compiles_cleanly(&tmp, &args);
    assert_eq!(second.compiled, first.compiled);
    assert_eq!(second.unique, first.unique);
    assert_eq!(
        second.from_cache, second.unique,
        "the second run reads everything from the cache: {second:?}"
    );

    // Flip one byte of one entry: it must be detected and compiled again, not loaded.
    let victim = &entries[0];
    let mut bytes = std::fs::read(victim).expect("cache entry readable");
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(victim, &bytes).expect("cache entry writable");

    let third = compiles_cleanly(&tmp, &args);
    assert_eq!(third.compiled, first.compiled);
    assert_eq!(
        third.from_cache,
        third.unique - 1,
        "exactly the damaged entry is rebuilt: {third:?}"
    );

    // The rebuilt entry was written back, so the next run is all from the cache again.
    let fourth = compiles_cleanly(&tmp, &args);
    assert_eq!(fourth.from_cache, fourth.unique, "{fourth:?}");
    assert_eq!(files_in(&cubins).len(), first.unique, "no stray files left");
}

// ---------------------------------------------------------------------------------------
// 6. --templates with broken templates.
// ---------------------------------------------------------------------------------------

/// A copy of the built-in templates/ whose transpose.cu.tera is `edit`ed.
fn templates_with(edit: impl Fn(&str) -> String) -> TempDir {
    let dir = tmp();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("templates");
    for f in files_in(&src) {
        let name = f.file_name().unwrap();
        let text = std::fs::read_to_string(&f).expect("template readable");
        let text = if name == "transpose.cu.tera" {
            let edited = edit(&text);
            assert_ne!(edited, text, "the edit must change the template");
            edited
        } else {
            text
        };
        std::fs::write(dir.path().join(name), text).expect("template copy writable");
    }
    dir
}

#[test]
fn a_tera_syntax_error_names_the_template() {
    let templates = templates_with(|t| {
        t.replacen(
            "    __shared__ tile_t tile",
            "{% if %}\n    __shared__ tile_t tile",
            1,
        )
    });
    let dir = templates.path().to_str().expect("a UTF-8 temp path");
    let line = input_error_everywhere(&["--shape", "64x64", "--templates", dir]);
    assert!(line.contains("transpose.cu.tera"), "{line}");
}

#[test]
fn cuda_that_does_not_compile_for_one_value_fails_only_those_variants() {
    let templates = templates_with(|t| {
        t.replacen(
            "    __shared__ tile_t tile",
            "{% if PAD == 1 %}this is not cuda;{% endif %}\n    __shared__ tile_t tile",
            1,
        )
    });
    let tmp = tmp();
    let pins = common::classic_transpose_pins();
    let mut args = vec![
        "--shape",
        "64x64",
        "--no-cache",
        "--templates",
        templates.path().to_str().expect("a UTF-8 temp path"),
        "--param",
        "TILE_DIM=32",
        "--param",
        "BLOCK_ROWS=8",
        "--param",
        "PAD=0,1",
        "--param",
        "UNROLL=on",
        "--param",
        "BOUNDS=always,edge",
    ];
    args.extend(pins.iter().map(String::as_str));
    let run = compile_only(&tmp, &args);
    assert_eq!(
        run.code,
        Some(1),
        "a variant that does not compile fails the run:\n{}\n{}",
        run.stdout,
        run.stderr
    );
    let line = one_error_line(run.stderr.as_bytes());
    assert!(line.contains("2 variant(s) failed to compile"), "{line}");

    let s = summary(&run.stdout);
    assert_eq!((s.compiled, s.failed, s.pruned), (2, 2, 0), "{s:?}");
    let failed: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("FAILED "))
        .collect();
    assert_eq!(failed.len(), 2, "two FAILED lines:\n{}", run.stdout);
    for l in &failed {
        assert!(l.contains("PAD=1"), "only PAD=1 fails: {l}");
        assert!(!l.contains("PAD=0"), "{l}");
        assert!(
            l.contains("compile:") && l.contains("error"),
            "the compiler's message is shown: {l}"
        );
    }
    assert!(
        failed.iter().any(|l| l.contains("BOUNDS=always")),
        "{failed:?}"
    );
    assert!(
        failed.iter().any(|l| l.contains("BOUNDS=edge")),
        "{failed:?}"
    );
    assert!(
        run.stdout.contains("this is not cuda"),
        "the offending line is quoted:\n{}",
        run.stdout
    );
}

// ---------------------------------------------------------------------------------------
// 7. --help.
// ---------------------------------------------------------------------------------------

#[test]
fn help_shows_the_options_and_examples() {
    Command::cargo_bin("tune")
        .expect("the tune binary is built")
        .arg("--help")
        .assert()
        .success()
        .stdout(
            predicate::str::contains("Examples:")
                .and(predicate::str::contains("--param"))
                .and(predicate::str::contains("--compile-only"))
                .and(predicate::str::contains("--dtype"))
                .and(predicate::str::contains("--dtype f16"))
                .and(predicate::str::contains("--shape"))
                .and(predicate::str::contains(
                    "tune --op transpose --shape 1000x1000",
                ))
                .and(predicate::str::contains("results/best.csv")),
        )
        .stderr(predicate::str::is_empty());
}

/// The help's first example and the README's quick start say how many configurations of the
/// default transpose space are valid at 1000x1000: the number a run of it reports, so neither
/// drifts when the space changes.
#[test]
fn the_help_and_readme_give_the_valid_count_a_run_reports() {
    let tmp = tmp();
    let run = compile_only(
        &tmp,
        &["--op", "transpose", "--shape", "1000x1000", "--budget", "1"],
    );
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    let line = run
        .stdout
        .lines()
        .chain(run.stderr.lines())
        .find(|l| l.starts_with("transpose 1000x1000: ") && l.contains(" valid configurations;"))
        .unwrap_or_else(|| {
            panic!(
                "no count of valid configurations:\n{}\n{}",
                run.stdout, run.stderr
            )
        });
    let live = count_before(line, "valid configurations;");
    let help = text(&common::tune_bin().arg("--help").output().unwrap().stdout);
    assert!(
        help.contains(&format!("80 of its {live} valid configurations")),
        "the help's example must say {live} valid configurations:\n{help}"
    );
    let readme = std::fs::read_to_string(common::repo("README.md")).unwrap();
    assert!(
        readme.contains(&format!("{live} valid here")),
        "the README's quick start must say {live} valid"
    );
}

#[test]
fn every_default_matmul_variant_compiles_for_multiple_and_odd_shapes() {
    let tmp = tmp();
    let s = compiles_cleanly(
        &tmp,
        &["--op", "matmul", "--shape", "1024x1024x1024", "--no-cache"],
    );
    assert_eq!(s.compiled, 3 * 2 * 2 * 4, "{s:?}");
    let s = compiles_cleanly(
        &tmp,
        &["--op", "matmul", "--shape", "1000x999x1001", "--no-cache"],
    );
    // Not a multiple of any tile: every BOUNDS=none variant is pruned.
    assert_eq!(s.pruned, 3 * 2 * 2, "{s:?}");
    assert_eq!(s.compiled, 3 * 2 * 2 * 3, "{s:?}");
}

/// The register-tiled family: every default variant at a shape where all of them are valid
/// (each one also holds the checked code path its BOUNDS mode can take), then every bounds
/// mode at a shape that is a multiple of nothing: scalar loads, float4 loads after a repack,
/// and float4 loads without one (WINDOWS=1).
#[test]
#[ignore = "exhaustive compile: bash scripts/test.sh --all"]
fn every_default_sgemm_variant_compiles() {
    let tmp = tmp();
    let s = compiles_cleanly(&tmp, &["--op", "sgemm", "--shape", "4096x4096x4096"]);
    assert!(
        s.compiled >= 5000,
        "thousands of valid configurations: {s:?}"
    );
    // Scalar loads over two tile sizes each way; then REPACK=1 (float4 kernels reading
    // repacked copies, the sgemm_repack prologue in the same source) on one tile (CI time).
    for (tiles, repack) in [
        (["BM=64,128", "BN=64,128"], "REPACK=0"),
        (["BM=64", "BN=64"], "REPACK=1"),
    ] {
        let args = sgemm_args(
            "1023x1025x1027",
            &[
                "BOUNDS=none,always,specialized,edge",
                tiles[0],
                tiles[1],
                repack,
            ],
        );
        let s = compiles_cleanly(&tmp, &args);
        assert!(s.compiled > 0 && s.pruned > 0, "{repack}: {s:?}");
    }
    // WINDOWS=1 (no copy) with every bounds mode where K and N are odd (A's rows in blocks of
    // one alignment, B copied element by element), only N is odd (B's shifted windows) and
    // only K is odd (B aligned); in the last two B element by element too (B_ELEMS=1, which
    // where both are odd is the same kernel as B_ELEMS=0 and pruned).
    for (shape, b_ways) in [
        ("1023x1025x1027", 1),
        ("1000x1001x1000", 2),
        ("1000x1000x1003", 2),
    ] {
        let args = sgemm_args(
            shape,
            &[
                "WINDOWS=1",
                "REPACK=0",
                "BOUNDS=none,always,specialized,edge",
                "BM=64",
                "BN=64",
                "BK=16",
                "TM=8",
                "TN=4",
                "WARP_N=8,16",
                "PAD=0",
                "B_ELEMS=0,1",
            ],
        );
        let s = compiles_cleanly(&tmp, &args);
        assert!(
            s.compiled >= 12 * b_ways && s.pruned > 0,
            "WINDOWS=1 at {shape}: {s:?}"
        );
        assert_eq!(s.unique, s.compiled, "{shape}: {s:?}");
    }
}

/// Every FFMA order (ORDER) and both ways of storing C (CSTORE) compile through `tune` on both
/// load paths, with and without bounds checks, at a shape that is no tile multiple; each
/// combination is its own source (the default sweep compiles only snakek with scalar
/// stores), and values that do not exist are refused with the accepted ones.
#[test]
fn every_sgemm_fma_order_and_c_store_compiles_on_both_load_paths() {
    let tmp = tmp();
    let base = [
        "--op",
        "sgemm",
        "--shape",
        "100x68x52",
        "--param",
        "BM=64",
        "--param",
        "BN=64",
        "--param",
        "BK=16",
        "--param",
        "TM=8",
        "--param",
        "TN=4,8",
        "--param",
        "WARP_N=8",
        "--param",
        "VEC=4",
        "--param",
        "PAD=4",
        "--param",
        "STAGES=2",
        "--param",
        "LOAD=regs,async",
        "--param",
        "BOUNDS=always,edge",
        // Split-K across blocks with every order and store: tests/compile_cover.rs.
        "--param",
        "SPLITK=1",
    ];
    let with = |extra: &[&'static str]| {
        let mut args = base.to_vec();
        args.extend(extra);
        args
    };
    let one = compiles_cleanly(&tmp, &with(&["--param", "ORDER=snakek"]));
    let all = compiles_cleanly(
        &tmp,
        &with(&[
            "--param",
            "ORDER=row,snake,snakek",
            "--param",
            "CSTORE=vec4,scalar",
        ]),
    );
    assert!(one.compiled > 0, "{one:?}");
    assert_eq!(all.compiled, 6 * one.compiled, "{all:?} vs {one:?}");
    assert_eq!(
        all.unique,
        6 * one.unique,
        "one source each: {all:?} vs {one:?}"
    );
    for (bad, says) in [
        (
            "ORDER=diagonal",
            "ORDER=diagonal is not one of row, snake, snakek",
        ),
        ("CSTORE=float2", "CSTORE=float2 is not one of vec4, scalar"),
    ] {
        let run = compile_only(&tmp, &with(&["--param", bad]));
        assert_eq!(run.code, Some(2), "{bad}: stderr:\n{}", run.stderr);
        assert!(run.stderr.contains(says), "{bad}: stderr:\n{}", run.stderr);
    }
}

/// Asserts that a compile-only run was refused (exit 2) with `reason` on stderr: a space its
/// constraints pruned to nothing.
#[track_caller]
fn expect_pruned(run: &Run, reason: &str) {
    assert_eq!(run.code, Some(2), "stderr:\n{}", run.stderr);
    assert!(run.stderr.contains(reason), "stderr:\n{}", run.stderr);
}

/// KSPLIT shares that do not split a slice's k steps evenly are pruned with the reason, and a
/// space that only holds those says which constraint emptied it (tests/compile_cover.rs
/// compiles KSPLIT where it applies).
#[test]
fn ksplit_uneven_shares_and_pads_are_pruned_with_the_reason() {
    let tmp = tmp();
    // LOAD=async steps k in fours: BK=8 cannot be shared by 4 groups.
    let run = compile_only(
        &tmp,
        &sgemm_args("1023x1025x1027", &["KSPLIT=4", "BK=8", "LOAD=async"]),
    );
    expect_pruned(
        &run,
        "each of the KSPLIT groups takes an equal share of a slice's k steps",
    );
    // Shared-memory rows are read as float4s: with a pad that is not a multiple of 4 floats
    // those reads would be misaligned, so it is pruned with the reason.
    let run = compile_only(&tmp, &sgemm_args("1024x1024x1024", &["PAD=1,2"]));
    expect_pruned(&run, "PAD must be a multiple of 4");
}

#[test]
fn matmul_block_size_shorthand_and_bad_shapes() {
    let tmp = tmp();
    let s = compiles_cleanly(
        &tmp,
        &[
            "--op",
            "matmul",
            "--shape",
            "512x512x512",
            "--block-size",
            "16,32",
            "--no-cache",
        ],
    );
    assert_eq!(s.compiled, 2 * 2 * 2 * 4, "{s:?}");
    for shape in ["1024x1024", "1024x1024x1024x2", "0x4x4", "4x-4x4", "axbxc"] {
        let err = input_error_compile_only(&["--op", "matmul", "--shape", shape]);
        assert!(err.contains("invalid shape"), "{shape}: {err}");
    }
    // A 64x64x64 matmul with `--block-size value`: the error it is refused with.
    let block_size_error = |value: &str| {
        input_error_compile_only(&[
            "--op",
            "matmul",
            "--shape",
            "64x64x64",
            "--block-size",
            value,
        ])
    };
    let err = block_size_error("16,x");
    assert!(err.contains("BLOCK_SIZE"), "{err}");
    // 64 x 64 = 4096 threads per block exceed every device's limit: pruned, nothing left.
    let err = block_size_error("64");
    assert!(err.contains("threads per block"), "{err}");
}

#[test]
fn gpus_and_shape_files_are_checked() {
    let tmp = tmp();
    // A shapes file with a bad line: reported with its line number before anything runs.
    let file = tmp.path().join("shapes.txt");
    std::fs::write(&file, "# sweep\n1000x1000\n\n4096x\n").unwrap();
    let out = tune(&tmp)
        .args(["--shapes", file.to_str().unwrap(), "--compile-only"])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("shapes.txt:4"), "{err}");
    // A list of shapes compiles each in turn and prints one summary.
    let out = tune(&tmp)
        .args([
            "--shape",
            "64x64,96x32",
            "--param",
            "TILE_DIM=32",
            "--param",
            "BLOCK_ROWS=8",
            "--compile-only",
        ])
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("==== 64x64")
            && stdout.contains("==== 96x32")
            && stdout.contains("Summary:"),
        "{stdout}"
    );
    // --gpus without a GPU: one clear line, exit 1 (skipped where a GPU exists).
    if !has_gpu() {
        let out = tune(&tmp)
            .args(["--shape", "64x64,32x32", "--gpus", "all"])
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains("--gpus"), "{err}");
    }
}

/// Ctrl-C during the compile phase (a compile-only sgemm search of 64 variants, minutes of
/// NVRTC work on two cores): the process ends within two seconds of the signal, with exit
/// code 130, and loses nothing it finished. Every source it reports compiled is in the cubin
/// cache, and the variants it never reached are reported as not compiled, not as failed.
/// The block tile is pinned (64x64: about 7,000 valid configurations instead of 47,000) so
/// that what is timed is the stop, not a debug build writing a record for every
/// configuration of the space while other tests share the two cores.
#[test]
fn ctrl_c_in_the_compile_phase_stops_within_two_seconds_and_keeps_what_compiled() {
    use std::process::Stdio;
    use std::time::Duration;
    let tmp = tmp();
    let cache = tmp.path().join("cache");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tune"))
        .env("CUDA_AUTOTUNE_CACHE", &cache)
        .env_remove("XDG_CACHE_HOME")
        .current_dir(tmp.path())
        .args([
            "--op",
            "sgemm",
            "--shape",
            "4096x4096x4096",
            "--compile-only",
            "--strategy",
            "random",
            "--budget",
            "64",
            "--jobs",
            "2",
            "--param",
            "BM=64",
            "--param",
            "BN=64",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Interrupt once the first source has compiled: the pool is busy with the next ones.
    let signalled = interrupt_after_first_cubin(&mut child, &cache, Duration::from_secs(120));
    let out = child.wait_with_output().unwrap();
    let took = signalled.elapsed();
    let stdout = text(&out.stdout);
    assert!(took < Duration::from_secs(2), "{took:?} after Ctrl-C");
    assert_eq!(out.status.code(), Some(130), "{stdout}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with("compile-only for"))
        .unwrap_or_else(|| panic!("no summary: {stdout}"));
    let compiled = count_before(line, "variants compiled");
    let not_compiled = count_before(line, "not compiled (interrupted)");
    assert!(compiled >= 1 && not_compiled >= 1, "{line}");
    assert!(compiled + not_compiled <= 64, "{line}");
    assert!(line.contains(" 0 failed"), "{line}");
    // A worker killed between writing the cache and answering leaves one more.
    assert!(
        cubin_count(&cache) >= compiled,
        "every compiled source is in the cache: {line}"
    );
}
