//! What travels between the tuner and its GPU worker processes: the job (buffers, arguments,
//! reference, tasks) as JSON on the worker's stdin, and one [`Line`] per event on its stdout.

use crate::cuda::gpu::DeviceInfo;
use crate::measure::bench::{BenchSettings, Stats};
use crate::model::limits::LaunchDims;
use crate::spec::ops::Compare;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// First argument that turns the `tune` binary into a GPU worker.
pub const GPU_WORKER_ARG: &str = "__gpu-worker";
/// First argument that turns the `tune` binary into a compile worker.
pub const COMPILE_WORKER_ARG: &str = "__compile-worker";

/// A device buffer of the job.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BufferDesc {
    pub name: String,
    pub input: bool,
    pub len: usize,
    #[serde(default)]
    pub fill: crate::spec::ops::Fill,
}

/// A kernel argument: a buffer's address or a 32-bit integer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ArgDesc {
    Buffer(String),
    Int(i32),
}

// What a task runs is plain data the spec layer builds too (a baseline's work): defined in
// the model, used here under its protocol name.
pub use crate::model::work::{PreLaunch, Work};

/// A kernel that computes the expected output on the GPU (launched with the op's arguments,
/// the output replaced by the expected buffer), spot-checked on the CPU before use.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReferenceKernel {
    pub cubin: PathBuf,
    pub kernel: String,
    pub launch: LaunchDims,
    /// Prologue kernels of a reference configuration, launched first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub before: Vec<PreLaunch>,
}

/// One thing to verify and time.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Task {
    pub id: usize,
    pub work: Work,
    /// "reference" or the name of an input buffer the output must equal (copies).
    pub expect: String,
    /// A variant of the tuned space (baselines are not): only these compete for best, and
    /// only these may be cut short by adaptive repetitions.
    #[serde(default)]
    pub contender: bool,
}

/// Everything a worker needs; inputs and the reference are re-made from the seed, so nothing
/// large crosses the pipe.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    pub device: usize,
    pub bench: BenchSettings,
    pub seed: u64,
    /// Element type of every buffer (the run's `--dtype`).
    #[serde(default)]
    pub dtype: crate::model::dtype::Dtype,
    pub reference: String,
    pub reference_kernel: Option<ReferenceKernel>,
    pub shape: Vec<u64>,
    pub buffers: Vec<BufferDesc>,
    pub args: Vec<ArgDesc>,
    pub output: String,
    pub compare: Compare,
    pub rtol: f64,
    pub checker_cubin: PathBuf,
    /// Stop timing a variant after a few launches when it is clearly slower than the best
    /// variant so far (slower than `adaptive_cutoff` times its median).
    pub adaptive_cutoff: Option<f64>,
    /// When non-zero, the tasks are not timed one after another but interleaved (A B C A B
    /// C ...) for this many rounds, and every launch time comes back in `samples`.
    #[serde(default)]
    pub confirm_rounds: usize,
    pub tasks: Vec<Task>,
}

/// A task's outcome, as streamed by the worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskResult {
    pub id: usize,
    pub stats: Option<Stats>,
    pub error: String,
    pub registers: Option<i32>,
    /// The fault left the context (and the worker) unusable.
    pub sticky: bool,
    pub verify_s: f64,
    pub timing_s: f64,
    /// Every timed launch, in order (interleaved confirmation rounds only).
    #[serde(default)]
    pub samples: Vec<f64>,
    /// Clocks, temperature and throttle reasons right after the task (NVML, when present).
    #[serde(default)]
    pub clock: Option<crate::measure::clocks::ClockSample>,
    /// The warm-up this task's launches served as, when it was the job's first to verify.
    #[serde(default)]
    pub warmup: Option<crate::measure::clocks::Warmup>,
}

/// A line on the worker's stdout.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Line {
    Result(TaskResult),
    /// Setup failed before any task ran (no GPU, out of memory...).
    Fatal(String),
    /// First line of every worker: the device it opened and its free memory in bytes.
    Device(DeviceInfo, u64),
    /// The session is set up (inputs, reference, context): task clocks start now.
    Ready,
}

impl Job {
    /// Everything but the tasks and how they are timed: consecutive jobs with the same data
    /// share one session (inputs, expected output, buffers) in a worker.
    pub(crate) fn data_key(&self) -> String {
        let mut j = self.clone();
        j.tasks.clear();
        j.confirm_rounds = 0;
        j.adaptive_cutoff = None;
        serde_json::to_string(&j).expect("serializable")
    }
}

pub(crate) fn failed(id: usize, error: String) -> TaskResult {
    TaskResult {
        id,
        stats: None,
        error,
        registers: None,
        sticky: false,
        verify_s: 0.0,
        timing_s: 0.0,
        samples: Vec::new(),
        clock: None,
        warmup: None,
    }
}
