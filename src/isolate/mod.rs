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
