//! Using a tuned configuration from Rust: look up the best transpose for a shape in
//! results/best.csv (or the nearest tuned shape whose kernel is valid for it), render its
//! source, compile it with NVRTC and, when a CUDA GPU is present, run it once and check the
//! output against a CPU transpose.
//!
//! ```sh
//! export LD_LIBRARY_PATH=$(scripts/nvrtc-env.sh)   # without the CUDA toolkit
//! cargo run --example tuned_transpose                # 1000x1000, results/best.csv
//! cargo run --example tuned_transpose -- 1001x1001 path/to/best.csv
//! ```

use cuda_autotune::compile::Compiler;
use cuda_autotune::error::{Error, Result};
use cuda_autotune::export::{candidate_for, format_ms, specialize, TunedDb};
use cuda_autotune::gpu::{gpu_available, Arg, Gpu};
use cuda_autotune::shape::Shape;
use cuda_autotune::verify;
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}

fn run() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let shape_text = args.first().map(String::as_str).unwrap_or("1000x1000");
    let db_path = args
        .get(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("results/best.csv"));

    // 1. Look the shape up: exact, else the nearest tuned shape whose kernel serves it.
    let db = TunedDb::load(&db_path)?;
    let op = cuda_autotune::ops::Op::load("transpose", None)?;
    let shape = Shape::parse(shape_text, &op.spec.dims)?;
    let row = db
        .select("transpose", &shape.dims, None, None)?
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
    let launch = candidate_for(&tuned.op, &shape, &row.params)?
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
        println!("no CUDA GPU here: skipped the run");
        return Ok(());
    };
    let (rows, cols) = (shape.dims[0] as usize, shape.dims[1] as usize);
    let input = verify::random_input(rows * cols, 1);
    let mut d_in = gpu.alloc(rows * cols, "in")?;
    gpu.upload(&input, &mut d_in)?;
    let d_out = gpu.alloc(rows * cols, "out")?;
    gpu.fill_u32(&d_out, verify::NAN_BITS)?;
    let kernel = gpu.load(&compiled.cubin, tuned.kernel_name())?;
    let mut kernel_args = Vec::new();
    for name in &tuned.op.spec.args {
        kernel_args.push(match name.as_str() {
            "out" => Arg::Ptr(d_out.ptr),
            "in" => Arg::Ptr(d_in.ptr),
            "ROWS" => Arg::I32(rows as i32),
            "COLS" => Arg::I32(cols as i32),
            other => return Err(Error::Usage(format!("unexpected kernel argument {other}"))),
        });
    }
    gpu.launch(&kernel, launch, &kernel_args)?;
    gpu.synchronize("running the tuned transpose")?;
    let out = gpu.download(&d_out)?;
    let expected = verify::transpose(&input, rows, cols);
    let wrong = out
        .iter()
        .zip(&expected)
        .filter(|(a, b)| a.to_bits() != b.to_bits())
        .count();
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
    Ok(())
}
