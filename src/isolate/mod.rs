//! Worker processes: GPU work and compilation run in child processes so that a faulting or
//! hanging kernel, or a crashing compiler, costs one task and not the run.
//!
//! [`device`] is the seam every GPU call goes through (the CUDA device, or a simulated one in
//! tests); [`worker`] runs a job's tasks (in GPU worker processes or in this one) and is what the
//! layers above use; [`protocol`] is what travels to and from a GPU worker, [`session`] the
//! GPU side of a job, [`compile_pool`] the compile workers, [`interrupt`] the stop request.

pub mod compile_pool;
pub mod device;
pub mod interrupt;
pub mod protocol;
pub mod session;
#[cfg(feature = "simulated")]
pub mod simulated;
pub mod worker;

/// Called first in a worker process: ends it as soon as its parent is gone, and leaves the
/// stop signals to the parent. A worker blocked in a hung kernel reads no more requests, so
/// it would not see its stdin close; without this, a parent killed by a second Ctrl-C or
/// `kill -9` would leave it holding the GPU. Checked every [`PARENT_POLL`] by a thread of its
/// own; the exit skips the CUDA driver's exit handlers, which would wait for the hung kernel.
///
/// SIGINT, SIGTERM and SIGHUP are ignored: a batch system stops a job by sending SIGTERM to
/// every process of it, and a worker that died of it would have its variant recorded as
/// failed (and kept so by `--resume`), where the parent, told the same, finishes that variant
/// and ends its workers itself (by SIGKILL, which no process can ignore).
pub(crate) fn follow_parent() {
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: setting a signal's disposition to "ignore" installs no handler code.
        unsafe { libc::signal(signal, libc::SIG_IGN) };
    }
    let parent = std::os::unix::process::parent_id();
    std::thread::spawn(move || loop {
        std::thread::sleep(PARENT_POLL);
        if std::os::unix::process::parent_id() != parent {
            // SAFETY: `_exit` ends the process at once; nothing here is left half-done that
            // another process reads (the parent that would read it is gone).
            unsafe { libc::_exit(crate::error::EXIT_INTERRUPTED.into()) }
        }
    });
}

/// How often a worker checks that its parent is alive ([`follow_parent`]).
const PARENT_POLL: std::time::Duration = std::time::Duration::from_millis(250);

/// A worker process of this executable, as both kinds start (the caller adds the arguments):
/// NVRTC's environment, a process group of its own (the terminal's Ctrl-C reaches only the
/// parent, which ends its workers: [`interrupt`]), requests on stdin, replies on stdout,
/// messages to the user's stderr.
fn worker_command(exe: &std::path::Path) -> std::process::Command {
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    let mut command = std::process::Command::new(exe);
    command
        .envs(crate::cuda::compile::NVRTC_ENV)
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    command
}
