//! The device seam: everything the tuner asks of a GPU goes through [`Device`], one job at a
//! time. The CUDA implementation (`session::CudaDevice`) loads each task's cubin, verifies
//! its output against the reference, times its launches with events and reads the clocks
//! after it; a fault that poisons its context is reported as sticky. Tests build the crate
//! with the `simulated` feature, and `CUDA_AUTOTUNE_SIMULATE` then names a model file that
//! stands in for the GPU (`simulated`), so the stages that decide the answer run without one.
//! `worker::open_device` picks the implementation.

use super::protocol::{Job, Task, TaskResult};
use crate::cuda::gpu::DeviceInfo;
use crate::error::Result;

/// A GPU the tuner runs jobs on.
pub trait Device {
    /// What the device is (name, architecture, limits).
    fn info(&self) -> &DeviceInfo;

    /// Free device memory in bytes, for checking a job's buffers fit before it starts.
    fn free_mem(&self) -> Result<u64>;

    /// Sets up `job`'s data on the device (inputs, expected output, buffers), unless the
    /// last job had the same data.
    fn prepare(&mut self, job: &Job) -> Result<()>;

    /// Runs `tasks` of `job` (prepared first when it is not) in order (interleaved for a confirmation job), handing each
    /// result to `sink` as it finishes. Returns true when a fault left the device unusable
    /// (the rest of the tasks did not run); fails only when the job cannot be set up.
    fn run(&mut self, job: &Job, tasks: &[Task], sink: &mut dyn FnMut(TaskResult)) -> Result<bool>;
}

/// The environment variable that, in a build with the `simulated` feature, names the model
/// file of a simulated device used instead of the GPU.
pub const SIMULATE_ENV: &str = "CUDA_AUTOTUNE_SIMULATE";
