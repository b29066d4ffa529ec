//! The compile pool: NVRTC serializes compiles inside one process, so compiles run in child
//! processes (`tune __compile-worker`), one per core, fed from one queue.

use super::protocol::COMPILE_WORKER_ARG;
use crate::cuda::compile::Compiler;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

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
pub fn compile_parallel(
    exe: &Path,
    arch: &str,
    cache: Option<&Path>,
    paths: &[PathBuf],
    workers: usize,
    progress: &(dyn Fn() + Sync),
) -> Result<Vec<CompileReply>> {
    let queue =
        std::sync::Mutex::new((0..paths.len()).collect::<std::collections::VecDeque<usize>>());
    let replies = std::sync::Mutex::new(vec![None::<CompileReply>; paths.len()]);
    let cache_arg = cache
        .map(|c| c.display().to_string())
        .unwrap_or_else(|| "-".into());
    let workers = workers.clamp(1, paths.len().max(1));
    std::thread::scope(|scope| -> Result<()> {
        let mut handles = Vec::new();
        for _ in 0..workers {
            use std::os::unix::process::CommandExt;
            let mut child = Command::new(exe)
                .args([COMPILE_WORKER_ARG, arch, &cache_arg])
                .process_group(0)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .map_err(|e| Error::io("cannot start compile worker", exe, e))?;
            let (queue, replies) = (&queue, &replies);
            handles.push(scope.spawn(move || {
                let mut stdin = child.stdin.take().expect("piped");
                let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
                loop {
                    let Some(i) = queue.lock().expect("queue lock").pop_front() else {
                        break;
                    };
                    let mut line = String::new();
                    let answered = writeln!(stdin, "{}", paths[i].display()).is_ok()
                        && stdin.flush().is_ok()
                        && stdout.read_line(&mut line).map(|n| n > 0).unwrap_or(false);
                    let reply = if answered {
                        serde_json::from_str(&line).unwrap_or_else(|e| CompileReply {
                            ok: false,
                            millis: 0.0,
                            from_cache: false,
                            log: format!("bad reply from compile worker: {e}"),
                        })
                    } else {
                        CompileReply {
                            ok: false,
                            millis: 0.0,
                            from_cache: false,
                            log: "compile worker died (NVRTC crashed?)".into(),
                        }
                    };
                    replies.lock().expect("replies lock")[i] = Some(reply);
                    progress();
                    if !answered {
                        break;
                    }
                }
                drop(stdin);
                let _ = child.wait();
            }));
        }
        for h in handles {
            let _ = h.join();
        }
        Ok(())
    })?;
    Ok(replies
        .into_inner()
        .expect("replies lock")
        .into_iter()
        .map(|r| {
            r.unwrap_or(CompileReply {
                ok: false,
                millis: 0.0,
                from_cache: false,
                log: "not compiled: its worker died earlier".into(),
            })
        })
        .collect())
}
