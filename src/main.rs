//! `tune`: parse arguments, run the tuner, print the report; errors become one line on
//! stderr and a non-zero exit code (2: bad input, 1: environment, GPU, or nothing verified).

use clap::Parser;
use cuda_autotune::cli::{Cli, Command, TuneArgs};
use cuda_autotune::results::Status;
use cuda_autotune::tuner::TuneOptions;
use cuda_autotune::{check, export, report, tuner, worker};
use std::process::ExitCode;

fn main() -> ExitCode {
    // The same binary serves as its own compile and GPU worker processes.
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some(worker::GPU_WORKER_ARG) => {
            return ExitCode::from(worker::gpu_worker_main(&args[1..]) as u8)
        }
        Some(worker::COMPILE_WORKER_ARG) => {
            return ExitCode::from(worker::compile_worker_main(&args[1..]) as u8)
        }
        _ => {}
    }
    let cli = Cli::parse();
    if let Some(Command::Check(args)) = &cli.command {
        return match check::command(args) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::from(1),
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(e.exit_code() as u8)
            }
        };
    }
    if let Some(command) = &cli.command {
        let done = match command {
            Command::Best(args) => export::best(args),
            Command::Export(args) => export::export(args),
            Command::Report(args) => export::report(args),
            Command::Check(_) => unreachable!("handled above"),
        };
        return match done {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(e.exit_code() as u8)
            }
        };
    }
    let cli = cli.tune;
    // First Ctrl-C: finish the variant in flight, write what was measured, say how to resume.
    // Second Ctrl-C: stop at once (the journal still holds every finished variant).
    let _ = ctrlc::set_handler(|| {
        if worker::interrupted() {
            std::process::exit(130);
        }
        worker::request_stop();
        eprintln!("\ninterrupted: stopping after the variant in flight (Ctrl-C again to quit now)");
    });
    let base = cli.options();
    let shapes = match tuner::shape_list(&base, cli.shapes.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(e.exit_code() as u8);
        }
    };
    if shapes.len() == 1 {
        let opts = TuneOptions {
            shape: shapes[0].clone(),
            ..base
        };
        return ExitCode::from(run_one(&cli, &opts).0);
    }
    // A sweep: each shape tuned as if alone, then one summary table.
    let mut rows = Vec::new();
    let mut worst = 0u8;
    for shape in &shapes {
        println!("==== {shape}");
        let opts = TuneOptions {
            shape: shape.clone(),
            ..base.clone()
        };
        let (code, outcome) = run_one(&cli, &opts);
        worst = worst.max(code);
        rows.push(report::summary_row(shape, outcome.as_ref()));
        if code == 130 {
            break;
        }
    }
    print!("{}", report::summary_table(&rows));
    ExitCode::from(worst)
}

/// Tunes one shape and prints its report; the exit code it calls for, and the outcome.
fn run_one(cli: &TuneArgs, opts: &TuneOptions) -> (u8, Option<tuner::TuneOutcome>) {
    match tuner::tune(opts) {
        Ok(outcome) => {
            print!("{}", report::render(&outcome, cli.top, cli.verbose));
            if outcome.interrupted {
                let args: Vec<String> = std::env::args()
                    .skip(1)
                    .filter(|a| a != "--resume")
                    .collect();
                eprintln!(
                    "interrupted: partial results written; resume with: tune {} --resume",
                    args.join(" ")
                );
                return (130, Some(outcome));
            }
            let failed_compiles = outcome
                .records
                .iter()
                .filter(|r| r.status == Status::Failed)
                .count();
            if cli.compile_only && failed_compiles > 0 {
                eprintln!("error: {failed_compiles} variant(s) failed to compile");
                return (1, Some(outcome));
            }
            if !cli.compile_only && outcome.best.is_none() {
                eprintln!(
                    "error: no configuration verified; see {}",
                    outcome
                        .csv_path
                        .as_ref()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default()
                );
                return (1, Some(outcome));
            }
            (0, Some(outcome))
        }
        Err(e) => {
            eprintln!("error: {}: {e}", opts.shape);
            (e.exit_code() as u8, None)
        }
    }
}
