//! Bad input as a user meets it, in one table: each case is the arguments of a `tune` run,
//! the exit code the README documents for it (2: bad input, 1: the machine cannot do the
//! work, 0: done) and a fragment of what it says. Every case must end without a panic, with
//! exactly one `error:` line on stderr when it fails (notes and warnings may come before it)
//! and nothing on stdout, and with the fragment on stderr (on stdout for a case that
//! succeeds).
//!
//! No case needs a GPU or compiles a kernel: each fails (or, for `tune params`, answers)
//! before that. Cases about a machine without a GPU (exit 1) are left out where there is a
//! GPU (`common::has_gpu`). Arguments starting with `@/` name files of this repository; the
//! others resolve in a temporary folder that holds the bad files the table names
//! ([`bad_files`]).

use std::path::Path;
use std::process::Output;

mod common;
use common::{has_gpu, repo, text, tmp, tune_bin};

/// One case: the arguments, the exit code, a fragment of the message.
type Case = (&'static [&'static str], i32, &'static str);

/// A tuning database of every built-in op on one GPU, several element types.
const DB: &str = "@/tests/fixtures/db/best.csv";

#[rustfmt::skip]
const CASES: &[Case] = &[
    // --- Shapes -------------------------------------------------------------------------
    (&["--shape", "1000"], 2, "invalid shape '1000': expected 2 dimensions as ROWSxCOLS, got 1"),
    (&["--shape=0x10"], 2, "ROWS must be at least 1"),
    (&["--shape=-5x3"], 2, "ROWS must be positive, got -5"),
    (&["--shape", "-5x3"], 2, "invalid shape '-5x3'"),
    (&["--shape", "axb"], 2, "ROWS must be a positive integer, got 'a'"),
    (&["--shape", "1000x1000x5"], 2, "expected 2 dimensions as ROWSxCOLS, got 3"),
    (&["--shape", "3000000000x2"], 2, "exceeds the 32-bit kernel limit"),
    (&["--shape", "x10"], 2, "ROWS is empty (expected ROWSxCOLS)"),
    (&["--shape", "10x"], 2, "COLS is empty (expected ROWSxCOLS)"),
    (&["--shape", ""], 2, "invalid shape '': no shape given (expected ROWSxCOLS)"),
    (&["--shape", "10x10,"], 2, "invalid shape '10x10,': the list has an empty entry"),
    (&["--shape", "10x10,,20x20"], 2, "the list has an empty entry"),
    (&["--shape", "10x10,20"], 2, "invalid shape '20'"),
    (&["--op", "matmul", "--shape", "1024x1024"], 2, "expected 3 dimensions as MxNxK, got 2"),
    (&["--op", "matmul", "--shape", "1024x1024x1024x2"], 2, "expected 3 dimensions as MxNxK, got 4"),
    (&["--op", "matmul", "--shape", "0x4x4"], 2, "M must be at least 1"),
    (&["--op", "matmul", "--shape", "4x-4x4"], 2, "N must be positive, got -4"),
    (&["--op", "matmul", "--shape", "axbxc"], 2, "M must be a positive integer"),
    (&["--op", "sgemm", "--shape", "10x10"], 2, "expected 3 dimensions as MxNxK"),
    (&[], 2, "the following required arguments were not provided"),
    (&["--shape", "64x64", "--shapes", "shapes.txt"], 2, "cannot be used with"),
    // A shape listed twice is tuned once, with a note (here before the error that ends it).
    (&["--shape", "64x64,64x64", "--param", "TILE_DIM=7", "--compile-only"], 2,
        "note: --shape lists 64x64 more than once; each shape is tuned once"),
    (&["--shapes", "twice.txt", "--param", "TILE_DIM=7", "--compile-only"], 2,
        "note: --shapes twice.txt lists 64x64 more than once"),
    // --- --shapes FILE ------------------------------------------------------------------
    (&["--shapes", "no_such_shapes.txt"], 2, "--shapes no_such_shapes.txt: no such file"),
    (&["--shapes", "folder"], 2, "--shapes folder: is a folder, not a file"),
    (&["--shapes", "binary.bin"], 2, "--shapes binary.bin: not UTF-8 text (line 2"),
    (&["--shapes", "/dev/null"], 2, "error: --shapes /dev/null: the file lists no shape"),
    (&["--shapes", "empty.txt"], 2, "error: --shapes empty.txt: the file lists no shape"),
    (&["--shapes", "comments.txt"], 2, "error: --shapes comments.txt: the file lists no shape"),
    (&["--shapes", "bad_line.txt"], 2, "--shapes bad_line.txt:4: invalid shape"),
    // --- Ops and specs ------------------------------------------------------------------
    (&["--op", "fft", "--shape", "64x64"], 2, "unknown op 'fft' (known ops: transpose, matmul, sgemm)"),
    (&["--op", "", "--shape", "64x64"], 2, "unknown op ''"),
    (&["--spec", "no_such_spec.toml", "--shape", "1000"], 2, "--spec no_such_spec.toml: no such file"),
    (&["--spec", "latin1.toml", "--shape", "100"], 2, "op spec latin1.toml: not UTF-8 text (line 1"),
    (&["--spec", "no_template", "--shape", "100"], 2, "template no_template/missing.cu.tera: no such file"),
    (&["--spec", "folder", "--shape", "100"], 2, "folder holds no .toml spec"),
    (&["--spec", "two_specs", "--shape", "100"], 2, "holds several .toml specs; name one with --spec FILE"),
    (&["--spec", "bad_metric", "--shape", "100", "--compile-only"], 2, "bad_metric/op.toml:18 metric: An operator expected"),
    (&["--spec", "bad_syntax", "--shape", "100"], 2, "op spec bad_syntax/op.toml: TOML parse error"),
    (&["--spec", "unknown_field", "--shape", "100"], 2, "unknown field `colour`"),
    (&["--spec", "@/examples/vector_add", "--shape", "10x10"], 2, "expected 1 dimensions as N, got 2"),
    (&["--spec", "@/examples/vector_add", "--shape", "100", "--dtype", "f64"], 2,
        "--dtype f64: op vector_add supports f32 only"),
    (&["--spec", "@/examples/vector_add", "--shape", "100", "-p", "NOPE=1"], 2,
        "unknown parameter 'NOPE' for op vector_add (known parameters: BLOCK, ITEMS, VECTOR, GRID)"),
    (&["--spec", "@/examples/vector_add", "--shape", "100", "-p", "GRID=huge"], 2,
        "GRID=huge is not one of exact, waves"),
    (&["--template", "x.cu.tera", "--shape", "100"], 2, "--spec <FILE|DIR>"),
    (&["--spec", "@/examples/vector_add", "--template", "no_such.cu.tera", "--shape", "100"], 2,
        "--template no_such.cu.tera: no such file"),
    (&["--spec", "@/examples/vector_add", "--template", "folder", "--shape", "100"], 2,
        "--template folder: is a folder, not a file"),
    (&["--spec", "@/examples/vector_add", "--template", "/dev/null", "--shape", "100"], 2,
        "template /dev/null: is empty"),
    (&["--spec", "@/examples/vector_add", "--template", "binary.bin", "--shape", "100"], 2,
        "template binary.bin: not UTF-8 text"),
    (&["--templates", "no_such_folder", "--shape", "64x64"], 2, "--templates no_such_folder: no such folder"),
    (&["--templates", "empty_folder", "--shape", "64x64"], 2,
        "--templates empty_folder holds no op spec"),
    (&["--templates", "latin1_templates", "--shape", "64x64"], 2,
        "latin1_templates/transpose.toml: not UTF-8 text"),
    (&["--templates", "spec_only", "--shape", "64x64"], 2, "template file transpose.cu.tera not found"),
    (&["--templates", "spec_only", "--op", "fft", "--shape", "64x64"], 2,
        "unknown op 'fft' (known ops: transpose)"),
    // Without --op, the op is --op's default, which the message says.
    (&["--templates", "scale_only", "--shape", "64"], 2,
        "unknown op 'transpose' (known ops: scale); --op was not given and defaults to \
         transpose: name the op with --op\n"),
    (&["--templates", "scale_only", "--op", "transpose", "--shape", "64"], 2,
        "unknown op 'transpose' (known ops: scale)\n"),
    // A --spec op reads nothing of a --templates folder.
    (&["--spec", "@/examples/vector_add", "--templates", "folder", "--shape", "100"], 2,
        "the argument '--spec <FILE|DIR>' cannot be used with '--templates <DIR>'"),
    (&["--dtype", "f8", "--shape", "64x64"], 2, "'f8' is not an element type"),
    (&["--op", "matmul", "--dtype", "f64", "--shape", "64x64x64"], 2, "op matmul supports f32 only"),
    // --- --param ------------------------------------------------------------------------
    (&["--shape", "64x64", "--param", "TILES=4"], 2,
        "unknown parameter 'TILES' for op transpose (known parameters: TILE_DIM, BLOCK_ROWS"),
    (&["--shape", "64x64", "--param", "TILE_DIM="], 2, "empty value in the list for TILE_DIM"),
    (&["--shape", "64x64", "--param", "TILE_DIM=32,,64"], 2, "empty value in the list for TILE_DIM"),
    (&["--shape", "64x64", "--param", "TILE_DIM"], 2, "expected NAME=v1,v2,..."),
    (&["--shape", "64x64", "--param", "TILE_DIM=big"], 2, "TILE_DIM takes integers, got 'big'"),
    (&["--shape", "64x64", "--param", "TILE_DIM=99999999999999999999"], 2, "TILE_DIM takes integers"),
    (&["--shape", "64x64", "--param", "BOUNDS=sometimes"], 2,
        "BOUNDS=sometimes is not one of none, always, specialized, edge"),
    (&["--shape", "64x64", "--param", "=4"], 2, "unknown parameter ''"),
    (&["--shape", "64x64", "-p", "TILE_DIM=32", "-p", "TILE_DIM=16"], 2,
        "TILE_DIM is given twice (--param TILE_DIM=32 before it); give its values in one list: --param TILE_DIM=32,16"),
    // Named as typed: --block-size is no --param to the user.
    (&["--op", "matmul", "--shape", "64x64x64", "--block-size", "16", "-p", "BLOCK_SIZE=32"], 2,
        "--block-size 16 and --param BLOCK_SIZE=32 both give BLOCK_SIZE; give its values in one \
         list: --block-size 32,16"),
    (&["--op", "matmul", "--shape", "64x64x64", "--block-size", "16,x"], 2, "BLOCK_SIZE takes integers"),
    // A value that leaves an expression undefined prunes its configurations with the reason.
    (&["--shape", "64x64", "-p", "TILE_DIM=0", "--compile-only"], 2,
        "all 165888 configurations were pruned: 165888 × defines.EVEN_TILES divides by zero"),
    (&["--shape", "64x64", "-p", "BLOCK_ROWS=0", "--compile-only"], 2,
        "82944 × defines.MIN_BLOCKS divides by zero"),
    (&["--shape", "64x64", "-p", "VEC=0", "--compile-only"], 2, "defines.PEEL divides by zero"),
    (&["--op", "matmul", "--shape", "64x64x64", "--block-size", "0", "--compile-only"], 2,
        "defines.EVEN_MN divides by zero"),
    (&["--spec", "@/examples/vector_add", "--shape", "100", "-p", "BLOCK=0", "--compile-only"], 2,
        "20 × grid.x ceil_div by a divisor below 1"),
    (&["--shape", "1000x1000", "--param", "TILE_DIM=7", "--compile-only"], 2,
        "with --param TILE_DIM=7: all 165888 configurations were pruned"),
    (&["--shape", "64x64", "--param", "TILE_DIM=64", "--param", "BLOCK_ROWS=32", "--param", "VEC=1",
       "--param", "LAYOUT=tile", "--compile-only"], 2, "more threads per block than the device allows"),
    (&["--op", "matmul", "--shape", "64x64x64", "--block-size", "64", "--compile-only"], 2,
        "threads per block"),
    // --- Numbers and words of the options -----------------------------------------------
    (&["--shape", "64x64", "--reps", "0"], 2, "invalid value '0' for '--reps <REPS>': must be at least 1"),
    (&["--shape", "64x64", "--reps", "18446744073709551615"], 2, "invalid value '18446744073709551615' for '--reps <REPS>': must be at most 1000000"),
    (&["--shape", "64x64", "--warmup", "1000001"], 2, "invalid value '1000001' for '--warmup <WARMUP>': must be at most 1000000"),
    (&["check", "--reps", "1000001", "--db", DB], 2, "invalid value '1000001' for '--reps <REPS>': must be at most 1000000"),
    (&["--shape", "64x64", "--jobs", "0"], 2, "invalid value '0' for '--jobs <JOBS>': must be at least 1"),
    (&["--shape", "64x64", "--jobs", "-1"], 2, "invalid value '-1' for '--jobs <JOBS>': must be at least 1"),
    (&["--shape", "64x64", "--jobs", "two"], 2, "invalid value 'two' for '--jobs <JOBS>': is not a whole number"),
    (&["--shape", "64x64", "--seed", "-1"], 2, "invalid value '-1' for '--seed <SEED>': must not be negative"),
    (&["--shape", "64x64", "--seed", "1.5"], 2, "invalid value '1.5' for '--seed <SEED>': is not a whole number"),
    (&["--shape", "64x64", "--top", "-1"], 2, "invalid value '-1' for '--top <TOP>': must not be negative"),
    (&["--shape", "64x64", "--top", "99999999999999999999999"], 2, "at most 18446744073709551615"),
    (&["--shape", "64x64", "--strategy", "random", "--budget", "-1"], 2, "invalid budget '-1'"),
    (&["--shape", "64x64", "--strategy", "random", "--budget", "0"], 2, "zero variants measure nothing"),
    (&["--shape", "64x64", "--budget", "5x"], 2, "invalid budget '5x': unknown time unit"),
    (&["--shape", "64x64", "--watchdog", "-1"], 2, "invalid value '-1' for '--watchdog <WATCHDOG>': must be a positive number of seconds"),
    (&["--shape", "64x64", "--watchdog", "0"], 2, "invalid value '0' for '--watchdog <WATCHDOG>': must be a positive number of seconds"),
    (&["--shape", "64x64", "--watchdog", "nan"], 2, "invalid value 'nan' for '--watchdog <WATCHDOG>'"),
    // Options that would switch a safeguard off.
    (&["check", "--margin", "nan", "--db", DB], 2, "invalid value 'nan' for '--margin <MARGIN>'"),
    (&["check", "--margin", "inf", "--db", DB], 2, "invalid value 'inf' for '--margin <MARGIN>'"),
    (&["check", "--margin", "-5", "--db", DB], 2, "invalid value '-5' for '--margin <MARGIN>'"),
    (&["--shape", "64x64", "--rtol", "-1"], 2, "invalid value '-1' for '--rtol <RTOL>'"),
    (&["--shape", "64x64", "--rtol", "nan"], 2, "invalid value 'nan' for '--rtol <RTOL>'"),
    (&["--shape", "64x64", "--compile-timeout", "-1"], 2, "invalid value '-1' for '--compile-timeout <SECONDS>': must be a positive number of seconds"),
    (&["--shape", "64x64", "--strategy", "bogus"], 2, "invalid value 'bogus' for '--strategy <STRATEGY>'"),
    (&["--shape", "64x64", "--cache", "lukewarm"], 2, "invalid value 'lukewarm' for '--cache <CACHE>'"),
    (&["--shape", "64x64", "--arch", "compute_90"], 2, "invalid --arch 'compute_90'"),
    (&["--shape", "64x64", "--arch", "90"], 2, "invalid --arch '90'"),
    (&["--shape", "64x64", "--arch", "sm_"], 2, "invalid --arch 'sm_'"),
    (&["--shape", "64x64", "--arch", "sm_9x"], 2, "invalid --arch 'sm_9x'"),
    (&["--shape", "64x64", "--shard", "1/0"], 2, "--shard '1/0': N must be at least 1"),
    (&["--shape", "64x64", "--shard", "4/4"], 2, "K must be below N (shards are 0..3)"),
    (&["--shape", "64x64", "--shard", "abc"], 2, "--shard 'abc': no '/'"),
    (&["--shape", "64x64", "--shard", "-1/4"], 2, "K must not be negative"),
    (&["--shape", "64x64", "--shard", "0/4611686018427387904"], 2, "N must be at most 100000"),
    (&["--shape", "64x64", "--gpus", "abc"], 2, "--gpus: 'abc' is not a device index"),
    (&["--shape", "64x64", "--gpus", "0,0"], 2, "--gpus: device 0 is listed twice"),
    (&["--shape", "64x64", "--foo"], 2, "unexpected argument '--foo' found"),
    (&["--shape", "64x64", "--pruned-rows", "--no-pruned-rows"], 2, "cannot be used with"),
    (&["--shape", "64x64", "--out", "file.txt", "--compile-only"], 2, "--out file.txt: is a file, not a folder"),
    (&["--shape", "64x64", "--emit", "file.txt", "--compile-only"], 2, "--emit file.txt: is a file, not a folder"),
    (&["--shape", "64x64", "--out", "file.txt/runs", "--compile-only"], 2,
        "--out file.txt/runs: file.txt is a file, not a folder"),
    (&["--shape", "64x64", "--out", "dangling", "--compile-only"], 2,
        "--out dangling: a link to gone, which does not exist"),
    // --- A machine without a GPU (skipped where there is one) ---------------------------
    (&["--shape", "64x64"], 1, "use --compile-only"),
    (&["check", "--db", DB], 1, "tune check re-times the stored winners"),
    // --- tune best ----------------------------------------------------------------------
    (&["best", "--shape", "1000x1000"], 2, "--op <OP>"),
    (&["best", "--op", "transpose", "--shape", "1000x1000", "--db", "missing.csv"], 2,
        "tuning database missing.csv does not exist"),
    (&["best", "--op", "transpose", "--shape", "1000x1000", "--db", "folder"], 2,
        "tuning database folder: is a folder, not a file"),
    (&["best", "--op", "transpose", "--shape", "10xx", "--db", DB], 2, "invalid shape '10xx'"),
    (&["best", "--op", "nosuch", "--shape", "10x10", "--db", DB], 2, "no op 'nosuch' in"),
    (&["best", "--op", "transpose", "--shape", "1000x3000", "--dtype", "f64", "--db", DB], 2,
        "never tuned for f64"),
    // The hint tunes the type asked for; the op's own type needs no --dtype.
    (&["best", "--op", "transpose", "--shape", "2000x2000", "--dtype", "f16", "--db", DB], 2,
        "tune it with: tune --op transpose --shape 2000x2000 --dtype f16"),
    (&["best", "--op", "matmul", "--shape", "8x8x8", "--dtype", "f32", "--db", DB], 2,
        "tune it with: tune --op matmul --shape 8x8x8\n"),
    (&["best", "--op", "transpose", "--shape", "1000x1000", "--dtype", "int8", "--db", DB], 2,
        "--dtype int8: 'int8' is not an element type (f32, f64, f16, bf16)"),
    // The GPU is named once, however many dtypes it was tuned for.
    (&["best", "--op", "transpose", "--shape", "1000x1000", "--gpu", "A100", "--db", DB], 2,
        "it was tuned on: NVIDIA H100 80GB HBM3 (leave out --gpu to see it)"),
    (&["best", "--op", "transpose", "--shape", "1000x1000", "--db", "binary.bin"], 2,
        "was never tuned in binary.bin"),
    // --- tune export --------------------------------------------------------------------
    (&["export", "--db", DB], 2, "--format <FORMAT>"),
    (&["export", "--format", "xml", "--db", DB], 2, "invalid value 'xml' for '--format <FORMAT>'"),
    (&["export", "--format", "json", "--db", "folder"], 2, "tuning database folder: is a folder, not a file"),
    (&["export", "--format", "json", "--db", "missing.csv"], 2, "tuning database missing.csv does not exist"),
    (&["export", "--format", "cuda", "--db", DB], 2, "--format cuda writes a folder: pass --output DIR"),
    (&["export", "--format", "json", "--op", "nosuch", "--db", DB], 2, "matches --op nosuch"),
    (&["export", "--format", "csv", "--gpu", "A100", "--db", DB], 2, "matches --gpu 'A100'"),
    (&["export", "--format", "json", "--db", "empty.csv"], 2, "the database is empty"),
    (&["export", "--format", "json", "--db", "latin1.toml"], 2, "no usable row"),
    // --- tune report --------------------------------------------------------------------
    (&["report"], 2, "--csv <CSV>"),
    (&["report", "--csv", "missing.csv"], 2, "run CSV missing.csv: no such file"),
    (&["report", "--csv", "folder"], 2, "run CSV folder: is a folder, not a file"),
    (&["report", "--csv", "/dev/null"], 2, "the file is empty, not a run CSV"),
    (&["report", "--csv", "empty.csv"], 2, "the file is empty, not a run CSV"),
    (&["report", "--csv", "@/tests/fixtures/export/best.csv"], 2, "not a run CSV"),
    (&["report", "--csv", "binary.bin"], 2, "CSV binary.bin"),
    // --- tune check: everything but the GPU is checked before the GPU ---------------------
    (&["check", "--op", "nosuch", "--db", DB], 2,
        "holds no stored winner for op nosuch (stored ops: matmul, sgemm, transpose)"),
    (&["check", "--op", "transpose", "--shape", "7x7", "--db", DB], 2,
        "holds no stored winner for op transpose at shape 7x7 (its stored shapes: 1000x1000"),
    (&["check", "--shape", "7x7", "--db", DB], 2, "holds no stored winner for shape 7x7"),
    (&["check", "--db", "missing.csv"], 2, "missing.csv holds no stored winners (no such file)"),
    (&["check", "--db", "empty.csv"], 2, "holds no stored winners (empty, or no usable row)"),
    (&["check", "--db", "folder"], 2, "tuning database folder: is a folder, not a file"),
    (&["check", "--db", DB, "--templates", "@/tests/fixtures/sim"], 2,
        "tests/fixtures/sim holds sim): pass --templates DIR, the folder of their specs"),
    // --- tune merge ---------------------------------------------------------------------
    (&["merge"], 2, "<DIR>..."),
    (&["merge", "no_such_folder"], 2, "merge: no_such_folder is not a folder"),
    (&["merge", "empty_folder"], 2, "it holds no shard manifest (shard-K-of-N.json)"),
    (&["merge", "empty_folder", "--out", "file.txt"], 2, "merge: --out file.txt: is a file, not a folder"),
    (&["merge", "empty_folder", "--out", "file.txt/merged"], 2,
        "merge: --out file.txt/merged: file.txt is a file, not a folder"),
    // --- tune params --------------------------------------------------------------------
    (&["params"], 2, "--op <OP>"),
    (&["params", "--op", "fft"], 2, "unknown op 'fft' (known ops: transpose, matmul, sgemm)"),
    (&["params", "--op", "transpose", "--spec", "x.toml"], 2, "cannot be used with"),
    (&["params", "--spec", "no_such_spec.toml"], 2, "--spec no_such_spec.toml: no such file"),
    (&["params", "--spec", "@/examples/vector_add", "--templates", "folder"], 2,
        "the argument '--spec <FILE|DIR>' cannot be used with '--templates <DIR>'"),
    (&["params", "--templates", "empty_folder", "--op", "x"], 2, "holds no op spec"),
    (&["params", "--op", "transpose"], 0, "default sweep: 16, 32, 64; accepts: any integer"),
    (&["params", "--op", "sgemm", "--templates", "@/templates"], 0, "sgemm: "),
    (&["params", "--spec", "@/examples/vector_add"], 0, "GRID\n    default sweep: exact, waves"),
];

/// The bad files the table names, in `dir`.
fn bad_files(dir: &Path) {
    let write = |name: &str, bytes: &[u8]| {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    };
    let vector_add = std::fs::read_to_string(repo("examples/vector_add/vector_add.toml")).unwrap();
    let template = std::fs::read(repo("examples/vector_add/vector_add.cu.tera")).unwrap();
    for d in ["folder", "empty_folder"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    write("file.txt", b"a file, not a folder\n");
    std::os::unix::fs::symlink("gone", dir.join("dangling")).unwrap();
    write("empty.txt", b"");
    write("empty.csv", b"");
    write("binary.bin", b"64x64\n\x00\x9f\x92\x96\xff\xfe binary\n");
    write("comments.txt", b"# only comments\n\n   # and blanks\n");
    write("bad_line.txt", b"# sweep\n1000x1000\n\n4096x\n");
    write("twice.txt", b"64x64\n# again\n64x64\n");
    // A spec in Latin-1 (`é` is one byte, 0xE9), as an editor set to another encoding saves it.
    write("latin1.toml", b"name = \"caf\xe9\"\n");
    write(
        "no_template/op.toml",
        vector_add
            .replace(
                "template = \"vector_add.cu.tera\"",
                "template = \"missing.cu.tera\"",
            )
            .as_bytes(),
    );
    write("two_specs/a.toml", vector_add.as_bytes());
    write("two_specs/b.toml", vector_add.as_bytes());
    write("bad_syntax/op.toml", b"name = \"unterminated\n");
    write(
        "unknown_field/op.toml",
        vector_add
            .replacen("summary", "colour = \"red\"\nsummary", 1)
            .as_bytes(),
    );
    write("unknown_field/vector_add.cu.tera", &template);
    write(
        "bad_metric/op.toml",
        vector_add
            .replace("bytes = \"3 * N * 4\"", "bytes = \"3 * N * \"")
            .as_bytes(),
    );
    write("bad_metric/vector_add.cu.tera", &template);
    write(
        "latin1_templates/transpose.toml",
        b"name = \"transpos\xe9\"\n",
    );
    write(
        "scale_only/scale.toml",
        vector_add
            .replace("name = \"vector_add\"", "name = \"scale\"")
            .as_bytes(),
    );
    write(
        "spec_only/transpose.toml",
        &std::fs::read(repo("templates/transpose.toml")).unwrap(),
    );
}

/// `args` with `@/` replaced by the repository's path.
fn resolved(args: &[&str]) -> Vec<String> {
    let root = repo("");
    args.iter()
        .map(|a| match a.strip_prefix("@/") {
            Some(rest) => root.join(rest).display().to_string(),
            None => a.to_string(),
        })
        .collect()
}

/// What is wrong with case `case`'s run, if anything.
fn judge(case: &Case, out: &Output) -> Option<String> {
    let (args, code, says) = case;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    let mut wrong = Vec::new();
    if stderr.contains("panicked") {
        wrong.push("it panicked".to_string());
    }
    if out.status.code() != Some(*code) {
        wrong.push(format!("exit code {:?}, not {code}", out.status.code()));
    }
    if *code == 0 {
        if !stdout.contains(says) {
            wrong.push(format!("stdout lacks '{says}'"));
        }
    } else {
        let errors = stderr.lines().filter(|l| l.starts_with("error: ")).count();
        if errors != 1 {
            wrong.push(format!("{errors} 'error:' lines, not 1"));
        }
        if !stderr.contains(says) {
            wrong.push(format!("stderr lacks '{says}'"));
        }
        if !stdout.is_empty() {
            wrong.push("it printed on stdout".to_string());
        }
    }
    if wrong.is_empty() {
        return None;
    }
    Some(format!(
        "tune {}: {}\n  stdout: {}\n  stderr: {}",
        args.join(" "),
        wrong.join("; "),
        stdout.trim_end().replace('\n', "\n          "),
        stderr.trim_end().replace('\n', "\n          ")
    ))
}

/// Every case of the table, four at a time; all that go wrong are reported together.
#[test]
fn every_bad_input_gets_its_exit_code_and_message() {
    assert!(CASES.len() >= 100, "{} cases", CASES.len());
    let t = tmp();
    bad_files(t.path());
    let gpu = has_gpu();
    let cases: Vec<&Case> = CASES
        .iter()
        .filter(|(_, code, _)| !(gpu && *code == 1))
        .collect();
    let run = |case: &Case| {
        let out = tune_bin()
            .env("CUDA_AUTOTUNE_CACHE", t.path().join("cache"))
            .env_remove("XDG_CACHE_HOME")
            .current_dir(t.path())
            .args(resolved(case.0))
            .output()
            .expect("tune runs");
        judge(case, &out)
    };
    let chunk = cases.len().div_ceil(4);
    let failures: Vec<String> = std::thread::scope(|s| {
        let workers: Vec<_> = cases
            .chunks(chunk)
            .map(|part| {
                let run = &run;
                s.spawn(move || part.iter().filter_map(|c| run(c)).collect::<Vec<_>>())
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("a worker thread"))
            .collect()
    });
    assert!(
        failures.is_empty(),
        "{} of {} cases went wrong:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    assert!(!t.path().join("results").exists(), "no case writes results");
}
