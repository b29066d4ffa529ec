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
    let mut base = cli.options();
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
    if let Some(spec) = &cli.gpus {
        let gpus = match cuda_autotune::gpu::parse_gpu_list(spec) {
            Ok(g) => g,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(e.exit_code() as u8);
            }
        };
        if gpus.len() > 1 {
            return sweep_on_gpus(&cli, &base, &shapes, &gpus);
        }
        base.device = gpus[0];
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

/// Several GPUs: one thread per GPU pulls the next shape from one queue and tunes it there, so
/// a fast GPU never idles while a slow one has a backlog. Reports print whole, as each shape
/// finishes; the summary comes last, in the order of the shapes.
fn sweep_on_gpus(
    cli: &TuneArgs,
    base: &TuneOptions,
    shapes: &[String],
    gpus: &[usize],
) -> ExitCode {
    use std::sync::Mutex;
    let queue = Mutex::new(
        shapes
            .iter()
            .cloned()
            .enumerate()
            .collect::<std::collections::VecDeque<_>>(),
    );
    let rows = Mutex::new(vec![None; shapes.len()]);
    let worst = Mutex::new(0u8);
    std::thread::scope(|scope| {
        for &g in gpus {
            let (queue, rows, worst) = (&queue, &rows, &worst);
            scope.spawn(move || loop {
                if worker::interrupted() {
                    break;
                }
                let Some((i, shape)) = queue.lock().expect("queue").pop_front() else {
                    break;
                };
                let opts = TuneOptions {
                    shape: shape.clone(),
                    device: g,
                    progress: false,
                    ..base.clone()
                };
                let (code, outcome) = run_one_quietly(cli, &opts, g);
                let mut w = worst.lock().expect("worst");
                *w = (*w).max(code);
                rows.lock().expect("rows")[i] = Some(report::summary_row(
                    &format!("{shape} (GPU {g})"),
                    outcome.as_ref(),
                ));
            });
        }
    });
    let rows: Vec<[String; 4]> = rows
        .into_inner()
        .expect("rows")
        .into_iter()
        .flatten()
        .collect();
    print!("{}", report::summary_table(&rows));
    ExitCode::from(worst.into_inner().expect("worst"))
}

/// Like [`run_one`], but the report is printed in one piece (several GPUs share stdout).
fn run_one_quietly(
    cli: &TuneArgs,
    opts: &TuneOptions,
    gpu: usize,
) -> (u8, Option<tuner::TuneOutcome>) {
    match tuner::tune(opts) {
        Ok(outcome) => {
            let text = report::render(&outcome, cli.top, cli.verbose);
            print!("==== {} on GPU {gpu}\n{text}", opts.shape);
            let code = if outcome.interrupted {
                130
            } else if outcome.best.is_none() {
                1
            } else {
                0
            };
            (code, Some(outcome))
        }
        Err(e) => {
            eprintln!("error: {} on GPU {gpu}: {e}", opts.shape);
            (e.exit_code() as u8, None)
        }
    }
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
