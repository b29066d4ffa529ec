//! Replays every search strategy against a run CSV written by an exhaustive tuning run: each
//! strategy asks for variants and is told the cost the run measured, for several budgets and
//! seeds. Prints a markdown table (and writes it with --out): how close to the exhaustive best
//! each strategy gets, how often it gets within 5 %, and after how many evaluations.
//!
//! ```sh
//! cargo run --release --example strategy_replay -- results/transpose_1000x1000_nvidia-h100-80gb-hbm3.csv
//! cargo run --release --example strategy_replay -- RUN.csv --seeds 20 --budgets 25,50,100,200 --batch 16 --out replay.md
//! ```

use clap::Parser;
use cuda_autotune::error::{Error, Result};
use cuda_autotune::search::registry::STRATEGIES;
use cuda_autotune::search::replay::{markdown, table, Landscape};
use cuda_autotune::store::files::write_atomic;
use cuda_autotune::store::run_csv::read_run_csv;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(about = "Replay search strategies against an exhaustive run CSV")]
struct Args {
    /// A run CSV (results/<op>_<shape>_<gpu>.csv) of a run that measured every variant.
    csv: PathBuf,
    /// Seeds per strategy and budget (0..N).
    #[arg(long, default_value_t = 20)]
    seeds: u64,
    /// Variant budgets, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "25,50,100,200")]
    budgets: Vec<usize>,
    /// Variants asked for at a time (the tuner's parallel batch).
    #[arg(long, default_value_t = 16)]
    batch: usize,
    /// Also write the table to this markdown file.
    #[arg(long)]
    out: Option<PathBuf>,
}

fn run(args: &Args) -> Result<()> {
    if args.seeds == 0 || args.batch == 0 || args.budgets.contains(&0) {
        return Err(Error::Usage(
            "--seeds, --batch and every budget must be at least 1".into(),
        ));
    }
    let land = Landscape::from_records(&read_run_csv(&args.csv)?)?;
    let rows = table(&land, STRATEGIES, &args.budgets, args.seeds, args.batch)?;
    let text = markdown(
        &args.csv.display().to_string(),
        &land,
        &rows,
        args.seeds,
        args.batch,
    );
    print!("{text}");
    if let Some(out) = &args.out {
        write_atomic(out, text.as_bytes())?;
    }
    Ok(())
}

fn main() -> ExitCode {
    match run(&Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}
