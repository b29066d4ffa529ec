//! Using a tuned configuration from Rust: look up the best transpose for a shape in
//! results/best.csv (or the nearest tuned shape whose kernel is valid for it), render its
//! source, compile it with NVRTC and, when a CUDA GPU is present, run it once and check the
//! output against a CPU transpose.
//!
//! Then, as a check of the export against the database: with a GPU, the stored kernel of
//! every transpose entry is verified and timed at its own shape the way the tuner times
//! (`bench::Timer`, 3 warm-up + 30 timed launches, L2 flushed before each), one line per entry:
//! `shape, db GB/s, measured GB/s, ratio`. The exit code is 1 when any kernel does not compile
//! or gives a wrong result. Without a GPU every entry is compiled and the runs are skipped.
//!
//! ```sh
//! export LD_LIBRARY_PATH=$(scripts/nvrtc-env.sh)   # without the CUDA toolkit
//! cargo run --example tuned_transpose                # 1000x1000, results/best.csv
//! cargo run --example tuned_transpose -- 1001x1001 path/to/best.csv
//! cargo run --example tuned_transpose -- 1001x1001 --db path/to/best.csv
//! ```

use cuda_autotune::cuda::compile::Compiler;
use cuda_autotune::cuda::gpu::{gpu_available, Arg, Buffer, Gpu, Kernel};
use cuda_autotune::error::{Error, Result};
use cuda_autotune::export::db::TunedDb;
use cuda_autotune::export::format_ms;
use cuda_autotune::export::kernel::{candidate_for, specialize, TunedKernel};
use cuda_autotune::measure::bench::{BenchSettings, CacheState, Timer};
use cuda_autotune::measure::verify;
use cuda_autotune::model::limits::LaunchDims;
use cuda_autotune::model::shape::Shape;
use cuda_autotune::spec::reference::transpose::transpose_bytes;
use cuda_autotune::store::best::BestRow;
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}

const USAGE: &str =
    "usage: tuned_transpose [SHAPE] [DB | --db DB] (default 1000x1000, results/best.csv)";

/// `[SHAPE] [DB]`, with the database also as `--db DB` (the form `tune` and the database's
/// own messages use).
fn parse_args(mut args: impl Iterator<Item = String>) -> Result<(String, PathBuf)> {
    let mut positional = Vec::new();
    let mut db = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--db" => {
                db = Some(PathBuf::from(args.next().ok_or_else(|| {
                    Error::Usage(format!("--db needs a file; {USAGE}"))
                })?))
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            _ => match a.strip_prefix("--db=") {
                Some(path) => db = Some(PathBuf::from(path)),
                None if a.starts_with("--") => {
                    return Err(Error::Usage(format!("unknown option {a}; {USAGE}")))
                }
                None => positional.push(a),
            },
        }
    }
    if positional.len() > 2 || (db.is_some() && positional.len() > 1) {
        return Err(Error::Usage(format!("too many arguments; {USAGE}")));
    }
    let mut positional = positional.into_iter();
    let shape = positional.next().unwrap_or_else(|| "1000x1000".into());
    let db = db
        .or_else(|| positional.next().map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("results/best.csv"));
    Ok((shape, db))
}

/// Ok(false) when a kernel of the database failed to compile or to verify.
fn run() -> Result<bool> {
    let (shape_text, db_path) = parse_args(std::env::args().skip(1))?;
    let shape_text = shape_text.as_str();

    // 1. Look the shape up: exact, else the nearest tuned shape whose kernel serves it.
    let db = TunedDb::load(&db_path)?;
    let op = cuda_autotune::spec::ops::Op::load("transpose", None)?;
    let shape = Shape::parse(shape_text, &op.spec.dims)?;
    let row = db
        .select("transpose", "f32", &shape.dims, None, None)?
        .ok_or_else(|| {
            Error::Usage(format!(
                "no tuned transpose kernel in {} is valid for {shape}: use the safe default \
                 (TILE_DIM=32 BLOCK_ROWS=8 PAD=1 BOUNDS=always)",
                db_path.display()
            ))
        })?;
    let how = if row.shape == shape.to_string() {
        "tuned for this shape"
    } else {
        "the nearest tuned shape whose kernel is valid here"
    };
    println!(
        "transpose {shape}: {} from {} ({how}), {:.1} {} on {} at {}",
        row.params.replace(';', " "),
        row.shape,
        row.throughput,
        row.unit,
        row.gpu,
        format_ms(row.median_ms)
    );

    // 2. Its source, and the launch geometry for *our* shape (same parameters).
    let tuned = specialize(row, None)?;
    let launch = candidate_for(&tuned.op, &shape, &row.params, &tuned.limits)?
        .launch
        .ok_or_else(|| Error::Usage(format!("{} is pruned at {shape}", row.params)))?;

    // 3. Compile for the GPU in front of us (sm_90 without one).
    let gpu = if gpu_available() {
        Some(Gpu::open(0)?)
    } else {
        None
    };
    let arch = gpu
        .as_ref()
        .map(|g| g.info.arch())
        .unwrap_or_else(|| "sm_90".to_string());
    let compiler = Compiler::new(&arch, None)?;
    let compiled = compiler
        .compile(&tuned.source)
        .map_err(|f| Error::Usage(format!("NVRTC rejected the tuned source: {}", f.log)))?;
    println!(
        "compiled {} ({} lines) to a {} byte cubin for {arch} with NVRTC {}.{} in {:.0} ms",
        tuned.kernel_name(),
        tuned.source.lines().count(),
        compiled.cubin.len(),
        compiler.version().0,
        compiler.version().1,
        compiled.millis
    );

    // 4. Run it once and compare with the CPU.
    let Some(gpu) = gpu else {
        // Without a GPU, still check that every transpose kernel of the database compiles.
        let prepared = prepare_entries(&db, &compiler);
        let compiled = prepared.iter().filter(|(_, p)| p.is_ok()).count();
        for (row, p) in &prepared {
            if let Err(e) = p {
                println!("{}: {e}", row.shape);
            }
        }
        println!(
            "no CUDA GPU here: skipped the run, and the timing of the {} transpose entries of {} \
             ({compiled} compiled)",
            prepared.len(),
            db_path.display()
        );
        return Ok(compiled == prepared.len());
    };
    let (rows, cols) = (shape.dims[0] as usize, shape.dims[1] as usize);
    let kernel = gpu.load(&compiled.cubin, tuned.kernel_name())?;
    let bufs = Buffers::new(&gpu, &tuned, rows, cols)?;
    let wrong = bufs.run_and_check(&gpu, &kernel, launch)?;
    if wrong > 0 {
        return Err(Error::Usage(format!(
            "{wrong} of {} elements differ from the CPU transpose",
            rows * cols
        )));
    }
    println!(
        "ran on {} with grid {:?} and block {:?}: all {} elements equal the CPU transpose",
        gpu.info.name,
        launch.grid,
        launch.block,
        rows * cols
    );

    // 5. Time the stored kernel of every transpose entry at its own shape, as the tuner does.
    Ok(time_entries(&gpu, &db, &compiler)? == 0)
}

/// A database entry's own kernel at its own shape, compiled.
struct Prepared {
    tuned: TunedKernel,
    launch: LaunchDims,
    cubin: Vec<u8>,
}

/// Renders and compiles the kernel of every transpose entry of `db`, in file order.
fn prepare_entries<'a>(
    db: &'a TunedDb,
    compiler: &Compiler,
) -> Vec<(&'a BestRow, Result<Prepared>)> {
    db.filter(Some("transpose"), None)
        .into_iter()
        .map(|row| {
            let prepared = (|| {
                let tuned = specialize(row, None)?;
                let launch = tuned.candidate.launch.ok_or_else(|| {
                    Error::Usage(format!("{} is pruned at {}", row.params, row.shape))
                })?;
                let cubin = compiler
                    .compile(&tuned.source)
                    .map_err(|f| Error::Usage(format!("NVRTC rejected the source: {}", f.log)))?
                    .cubin;
                Ok(Prepared {
                    tuned,
                    launch,
                    cubin,
                })
            })();
            (row, prepared)
        })
        .collect()
}

/// Verifies and times the kernel of every transpose entry of `db` at the entry's own shape
/// with the tuner's timer and settings (3 warm-up and 30 timed launches, L2 flushed before
/// each), and prints `shape, db GB/s, measured GB/s, ratio` per entry. Returns how many
/// entries failed (did not compile, gave a wrong result or faulted).
fn time_entries(gpu: &Gpu, db: &TunedDb, compiler: &Compiler) -> Result<usize> {
    let settings = BenchSettings {
        warmup: 3,
        reps: 30,
        cache: CacheState::Cold,
    };
    let timer = Timer::new(gpu, settings)?;
    let prepared = prepare_entries(db, compiler);
    let elsewhere = prepared
        .iter()
        .filter(|(r, _)| r.gpu != gpu.info.name)
        .count();
    if elsewhere > 0 {
        println!(
            "note: {elsewhere} of the {} transpose entries were tuned on another GPU than this {}",
            prepared.len(),
            gpu.info.name
        );
    }
    for (row, p) in &prepared {
        if let Ok(p) = p {
            if !row.source_hash.is_empty() && compiler.key(&p.tuned.source) != row.source_hash {
                println!(
                    "note: {}: the source compiled here is not the one tuned (its hash differs: \
                     another template, NVRTC or arch?)",
                    row.shape
                );
            }
        }
    }
    println!(
        "the stored kernel of each transpose entry at its own shape, timed as the tuner does \
         (L2 {}, {} warm-up + {} timed launches, median):",
        settings.cache.as_str(),
        settings.warmup,
        settings.reps
    );
    println!("shape, db GB/s, measured GB/s, ratio");
    let mut failures = 0;
    for (row, p) in prepared {
        let measured = p.and_then(|p| time_entry(gpu, &timer, &p));
        match measured {
            Ok(gbs) => println!(
                "{}, {:.1}, {:.1}, {:.3}",
                row.shape,
                row.throughput,
                gbs,
                gbs / row.throughput
            ),
            Err(e) => {
                failures += 1;
                println!("{}, {:.1}, FAILED: {e}, -", row.shape, row.throughput);
            }
        }
    }
    if failures > 0 {
        eprintln!(
            "error: {failures} of the {} transpose entries failed",
            db.filter(Some("transpose"), None).len()
        );
    }
    Ok(failures)
}

/// One entry: run once and compare with the CPU, then time; its throughput in GB/s by the
/// op's own metric (bytes read + written).
fn time_entry(gpu: &Gpu, timer: &Timer, p: &Prepared) -> Result<f64> {
    let dims = &p.tuned.shape.dims;
    let (rows, cols) = (dims[0] as usize, dims[1] as usize);
    let kernel = gpu.load(&p.cubin, p.tuned.kernel_name())?;
    let bufs = Buffers::new(gpu, &p.tuned, rows, cols)?;
    let wrong = bufs.run_and_check(gpu, &kernel, p.launch)?;
    if wrong > 0 {
        return Err(Error::Usage(format!(
            "wrong result: {wrong} of {} elements differ from the CPU transpose",
            rows * cols
        )));
    }
    // One set of buffers (one slot): with a cold cache, every launch is timed on its own.
    let launch = |_slot: usize| gpu.launch(&kernel, p.launch, &bufs.args);
    let stats = timer.measure(gpu, &launch, &|_| Ok(1), None)?;
    let (bytes_expr, unit) = p.tuned.op.spec.metric.amount();
    if unit != "GB/s" {
        return Err(Error::Usage(format!("the metric is {unit}, not GB/s")));
    }
    let base = cuda_autotune::spec::space::base_vars(&p.tuned.op, &p.tuned.shape, &p.tuned.limits);
    let bytes = p
        .tuned
        .candidate
        .vars(&base)
        .eval_int(bytes_expr, "metric")? as f64;
    Ok(bytes / (stats.median_ms * 1e-3) / 1e9)
}

/// Input, output and kernel arguments of a transpose of `rows` x `cols`, of the element type
/// the entry was tuned for (raw bytes: a transpose only moves bits).
struct Buffers {
    input: Vec<u8>,
    elem_bytes: usize,
    d_out: Buffer,
    _d_in: Buffer,
    rows: usize,
    cols: usize,
    args: Vec<Arg>,
}

impl Buffers {
    fn new(gpu: &Gpu, tuned: &TunedKernel, rows: usize, cols: usize) -> Result<Buffers> {
        let dtype = tuned.op.dtype;
        let elem_bytes = dtype.bytes();
        let input = verify::random_bytes(dtype, rows * cols, 1);
        let mut d_in = gpu.alloc(rows * cols, elem_bytes, "in")?;
        gpu.upload(&input, &mut d_in)?;
        let d_out = gpu.alloc(rows * cols, elem_bytes, "out")?;
        let mut args = Vec::new();
        for name in &tuned.op.spec.args {
            args.push(match name.as_str() {
                "out" => Arg::Ptr(d_out.ptr),
                "in" => Arg::Ptr(d_in.ptr),
                "ROWS" => Arg::I32(rows as i32),
                "COLS" => Arg::I32(cols as i32),
                other => return Err(Error::Usage(format!("unexpected kernel argument {other}"))),
            });
        }
        Ok(Buffers {
            input,
            elem_bytes,
            d_out,
            _d_in: d_in,
            rows,
            cols,
            args,
        })
    }

    /// Poisons the output with NaN, launches once and counts the elements that differ
    /// (bitwise) from a CPU transpose.
    fn run_and_check(&self, gpu: &Gpu, kernel: &Kernel, launch: LaunchDims) -> Result<usize> {
        gpu.fill_u32(&self.d_out, verify::NAN_BITS)?;
        gpu.launch(kernel, launch, &self.args)?;
        gpu.synchronize("running the tuned transpose")?;
        let out = gpu.download(&self.d_out)?;
        let expected = transpose_bytes(&self.input, self.rows, self.cols, self.elem_bytes);
        Ok(out
            .chunks(self.elem_bytes)
            .zip(expected.chunks(self.elem_bytes))
            .filter(|(a, b)| a != b)
            .count())
    }
}
