//! `tune`: parse arguments, run the tuner, print the report; errors become one line on
//! stderr and a non-zero exit code (`cuda_autotune::error::EXIT_*`: 2 bad input; 1 environment,
//! GPU, or nothing verified; 130 interrupted, partial results written).

use cuda_autotune::cli::{Cli, Command};
use cuda_autotune::cluster::{merge, sweep};
use cuda_autotune::error::{EXIT_FAILED, EXIT_INTERRUPTED};
use cuda_autotune::isolate::{compile_pool, interrupt, protocol, worker};
use cuda_autotune::pipeline::options::TuneOptions;
use cuda_autotune::pipeline::plan::load_op;
use cuda_autotune::{check, export};
use std::io::Write;
use std::process::ExitCode;

/// mimalloc instead of glibc's malloc: a run allocates and frees millions of small strings.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `tune params`: the op's parameters, read from its spec, on stdout.
fn params(opts: &TuneOptions, json: bool) -> cuda_autotune::error::Result<()> {
    let op = load_op(opts)?;
    let text = if json {
        let doc = cuda_autotune::spec::describe::params_doc(&op);
        serde_json::to_string_pretty(&doc).expect("plain data serializes") + "\n"
    } else {
        cuda_autotune::spec::describe::params_text(&op)
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| cuda_autotune::error::Error::io("cannot write", "<stdout>", e))
}

fn main() -> ExitCode {
    // Before any thread starts: compiles in this process (`--jobs 1`) skip NVRTC's own cache
    // like the worker processes do.
    for (name, value) in cuda_autotune::cuda::compile::NVRTC_ENV {
        std::env::set_var(name, value);
    }
    // The same binary serves as its own compile and GPU worker processes.
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some(protocol::GPU_WORKER_ARG) => {
            return ExitCode::from(worker::gpu_worker_main(&args[1..]) as u8)
        }
        Some(protocol::COMPILE_WORKER_ARG) => {
            return ExitCode::from(compile_pool::compile_worker_main(&args[1..]) as u8)
        }
        _ => {}
    }
    let cli = Cli::parse_args();
    if let Some(command) = &cli.command {
        // Ok(false): the command ran and found a problem it reports itself (exit code 1).
        let done = match command {
            Command::Best(args) => export::best(&args.query()).map(|()| true),
            Command::Export(args) => export::export(&args.options()).map(|()| true),
            Command::Report(args) => export::report(&args.options()).map(|()| true),
            Command::Check(args) => check::command(&args.options()),
            Command::Merge(args) => merge::command(&args.options()),
            Command::Params(args) => params(&args.options(), args.json).map(|()| true),
        };
        return match done {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::from(EXIT_FAILED),
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(e.exit_code() as u8)
            }
        };
    }
    let cli = cli.tune;
    // First Ctrl-C (or SIGTERM, SIGHUP): finish the variant in flight, write what was
    // measured, say how to resume. Second: stop at once (the journal still holds every
    // finished variant).
    let _ = ctrlc::set_handler(|| {
        if interrupt::interrupted() {
            std::process::exit(EXIT_INTERRUPTED.into());
        }
        interrupt::request_stop();
        eprintln!(
            "\ninterrupted: stopping after the variant in flight (a second Ctrl-C or SIGTERM \
             quits now)"
        );
    });
    let run = cli.sweep_options(std::env::args().collect());
    match run.and_then(|opts| sweep::sweep(&opts)) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            let e = cli.explain(e);
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}
