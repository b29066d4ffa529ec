//! The compile pool: NVRTC serializes compiles inside one process, so compiles run in child
//! processes (`tune __compile-worker`), one per core, fed from one queue.

use super::protocol::COMPILE_WORKER_ARG;
use crate::cuda::compile::Compiler;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use super::interrupt::interrupted;

/// Outcome of compiling one source file in a worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CompileReply {
    pub ok: bool,
    pub millis: f64,
    pub from_cache: bool,
    /// Compiler log when `ok` is false.
    pub log: String,
}

/// Entry point of `tune __compile-worker ARCH CACHE_DIR|-`: reads source paths on stdin,
/// writes `PATH.cubin` for each and answers one [`CompileReply`] line per path.
pub fn compile_worker_main(args: &[String]) -> i32 {
    let (Some(arch), Some(cache)) = (args.first(), args.get(1)) else {
        eprintln!("usage: tune {COMPILE_WORKER_ARG} ARCH CACHE_DIR|-");
        return 2;
    };
    let cache = (cache != "-").then(|| PathBuf::from(cache));
    let compiler = match Compiler::new(arch, cache) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    let stdout = std::io::stdout();
    for line in std::io::stdin().lock().lines().map_while(|l| l.ok()) {
        let path = PathBuf::from(line.trim());
        let reply = match std::fs::read_to_string(&path) {
            Err(e) => CompileReply {
                ok: false,
                millis: 0.0,
                from_cache: false,
                log: format!("cannot read {}: {e}", path.display()),
            },
            Ok(source) => match compiler.compile(&source) {
                Ok(done) => match std::fs::write(path.with_extension("cubin"), &done.cubin) {
                    Ok(()) => CompileReply {
                        ok: true,
                        millis: done.millis,
                        from_cache: done.from_cache,
                        log: done.log,
                    },
                    Err(e) => CompileReply {
                        ok: false,
                        millis: done.millis,
                        from_cache: false,
                        log: format!("cannot write the cubin: {e}"),
                    },
                },
                Err(f) => CompileReply {
                    ok: false,
                    millis: f.millis,
                    from_cache: false,
                    log: f.log,
                },
            },
        };
        let mut out = stdout.lock();
        let _ = writeln!(
            out,
            "{}",
            serde_json::to_string(&reply).expect("serializable")
        );
        let _ = out.flush();
    }
    0
}

/// Compiles the `.cu` files in `paths` with `workers` child processes pulling from one
/// queue; each success leaves `X.cubin` beside `X.cu`. `progress` is called per file.
///
/// A stop request (Ctrl-C, [`super::interrupt::interrupted`]) kills the workers within a
/// poll interval ([`STOP_POLL`]) instead of letting the queue drain: a source never compiled
/// has `None`, what finished before keeps its reply.
pub fn compile_parallel(
    exe: &Path,
    arch: &str,
    cache: Option<&Path>,
    paths: &[PathBuf],
    workers: usize,
    progress: &(dyn Fn() + Sync),
) -> Result<Vec<Option<CompileReply>>> {
    let queue = Mutex::new((0..paths.len()).collect::<std::collections::VecDeque<usize>>());
    let replies = Mutex::new(vec![None::<CompileReply>; paths.len()]);
    let cache_arg = cache
        .map(|c| c.display().to_string())
        .unwrap_or_else(|| "-".into());
    let workers = workers.clamp(1, paths.len().max(1));
    let mut children = Vec::with_capacity(workers);
    for _ in 0..workers {
        use std::os::unix::process::CommandExt;
        let spawned = Command::new(exe)
            .args([COMPILE_WORKER_ARG, arch, &cache_arg])
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn();
        match spawned {
            Ok(child) => children.push(Mutex::new(child)),
            Err(e) => {
                for c in &children {
                    kill(c);
                    let _ = c.lock().expect("child lock").wait();
                }
                return Err(Error::io("cannot start compile worker", exe, e));
            }
        }
    }
    let running = AtomicUsize::new(children.len());
    std::thread::scope(|scope| {
        for child in &children {
            let (queue, replies, running) = (&queue, &replies, &running);
            scope.spawn(move || {
                let (mut stdin, mut stdout) = {
                    let mut c = child.lock().expect("child lock");
                    (
                        c.stdin.take().expect("piped"),
                        BufReader::new(c.stdout.take().expect("piped")),
                    )
                };
                while !interrupted() {
                    let Some(i) = queue.lock().expect("queue lock").pop_front() else {
                        break;
                    };
                    let mut line = String::new();
                    let answered = writeln!(stdin, "{}", paths[i].display()).is_ok()
                        && stdin.flush().is_ok()
                        && stdout.read_line(&mut line).map(|n| n > 0).unwrap_or(false);
                    if !answered && interrupted() {
                        break; // killed by the stop: not compiled, not a failure
                    }
                    let reply = if answered {
                        serde_json::from_str(&line).unwrap_or_else(|e| {
                            failed(format!("bad reply from compile worker: {e}"))
                        })
                    } else {
                        failed("compile worker died (NVRTC crashed?)".into())
                    };
                    replies.lock().expect("replies lock")[i] = Some(reply);
                    progress();
                    if !answered {
                        break;
                    }
                }
                drop(stdin);
                let _ = child.lock().expect("child lock").wait();
                running.fetch_sub(1, Ordering::SeqCst);
            });
        }
        // The stop watch: workers block in a compile, so a stop must kill them to be prompt.
        scope.spawn(|| {
            while running.load(Ordering::SeqCst) > 0 {
                if interrupted() {
                    // Again each poll: a worker whose lock was held at the first try.
                    for c in &children {
                        kill(c);
                    }
                }
                std::thread::sleep(STOP_POLL);
            }
        });
    });
    let mut out = replies.into_inner().expect("replies lock");
    if !interrupted() {
        // A worker that died left its queue share unanswered: those are failures.
        for r in out.iter_mut().filter(|r| r.is_none()) {
            *r = Some(failed("not compiled: its worker died earlier".into()));
        }
    }
    Ok(out)
}

/// How often the compile pool checks for a stop request.
pub const STOP_POLL: std::time::Duration = std::time::Duration::from_millis(50);

fn failed(log: String) -> CompileReply {
    CompileReply {
        ok: false,
        millis: 0.0,
        from_cache: false,
        log,
    }
}

/// Kills a worker unless its thread holds it (taking its pipes, or reaping it); killing one
/// that has exited does nothing.
fn kill(child: &Mutex<Child>) {
    if let Ok(mut c) = child.try_lock() {
        let _ = c.kill();
    }
}
