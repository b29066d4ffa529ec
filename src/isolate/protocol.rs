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
    /// What the task measures, as its record names it (`TILE_DIM=32 BLOCK_ROWS=8 ...`, or a
    /// baseline's name): for messages, and for a simulated device's model.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub label: String,
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
    /// The fastest contender median the run had measured before this job: the adaptive cutoff
    /// starts from it (and tightens as the job's own contenders finish), and the watchdog
    /// scales its first task's limit by it. The run holds it, not the worker, so a worker kept
    /// from an earlier run does not cut by that run's best. A confirmation job, which has no
    /// cutoff, holds its slowest task's median instead: its limit covers all its launches.
    #[serde(default)]
    pub best_ms: Option<f64>,
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
    /// In a confirmation job: the task's own check failed (a wrong output, or a fault while
    /// verifying it), as opposed to a failure the job's tasks share (the rounds' timing, the
    /// watchdog or a lost worker, which an interleaved job cannot pin on one task).
    #[serde(default)]
    pub check_failed: bool,
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
    /// The device could not be opened or used (no GPU, a lost device): an error of the device
    /// ([`crate::error::Error::is_device`]), which the next job would meet too.
    Fatal(String),
    /// The job could not be set up or run for a reason of its own (a CUDA call that failed
    /// for its shape): the job's error line. The device is left for the next job.
    Failed(String),
    /// The job cannot be set up for a reason of its input, not of the GPU (a reference whose
    /// output is not an answer, a job naming a buffer it lacks): a usage error.
    Refused(String),
    /// First line of every worker: the device it opened and its free memory in bytes.
    Device(DeviceInfo, u64),
    /// The session is set up (inputs, reference, context): task clocks start now.
    Ready,
}

impl Job {
    /// Everything but the tasks and how they are timed: consecutive jobs with the same data
    /// share one session (inputs, expected output, buffers) in a worker, also jobs of runs in
    /// a row. Each run compiles its checker and reference into a folder of its own, so the
    /// key holds what those files hold, not where they are.
    pub(crate) fn data_key(&self) -> String {
        let mut j = self.clone();
        j.tasks.clear();
        j.confirm_rounds = 0;
        j.adaptive_cutoff = None;
        j.best_ms = None;
        j.checker_cubin = content_key(&j.checker_cubin);
        if let Some(r) = &mut j.reference_kernel {
            r.cubin = content_key(&r.cubin);
        }
        serde_json::to_string(&j).expect("serializable")
    }
}

/// A file's content as a key (a hash: the key is compared within one worker only); its path
/// where it cannot be read (opening the session then says why).
fn content_key(path: &std::path::Path) -> PathBuf {
    use std::hash::{Hash, Hasher};
    match std::fs::read(path) {
        Ok(bytes) => {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            bytes.hash(&mut h);
            PathBuf::from(format!("content:{:016x}:{}", h.finish(), bytes.len()))
        }
        Err(_) => path.to_path_buf(),
    }
}

/// A failed result that, when `sticky`, cost the device its context (the worker is replaced).
pub(crate) fn failed_with(id: usize, error: String, sticky: bool) -> TaskResult {
    TaskResult {
        sticky,
        ..failed(id, error)
    }
}

/// Hands a confirmation job's results, taken all at once, to `sink`; true when one of them
/// cost the device its context.
pub(crate) fn deliver(results: Vec<TaskResult>, sink: &mut dyn FnMut(TaskResult)) -> bool {
    let sticky = results.iter().any(|r| r.sticky);
    for r in results {
        sink(r);
    }
    sticky
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
        check_failed: false,
        clock: None,
        warmup: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::bench::CacheState;
    use crate::measure::clocks::{ClockSample, Warmup, WarmupEnd};
    use crate::model::dtype::Dtype;

    fn dims(shared: u32) -> LaunchDims {
        LaunchDims {
            grid: (2, 8, 1),
            block: (32, 8, 1),
            shared,
        }
    }

    /// A job with one task of each kind of work, as the tuner sends it to a GPU worker.
    fn job() -> Job {
        let kernel = Task {
            id: 1_000_004,
            label: "X=2 Y=2 BROKEN=0".into(),
            work: Work::Kernel {
                cubin: PathBuf::from("/tmp/s0004.cubin"),
                kernel: "transpose".into(),
                launch: dims(4096),
                before: vec![PreLaunch {
                    kernel: "pack".into(),
                    launch: dims(0),
                }],
            },
            expect: "reference".into(),
            contender: true,
        };
        let copy = Task {
            id: 0,
            label: "copy".into(),
            work: Work::Memcpy {
                from: "in".into(),
                to: "out".into(),
            },
            expect: "in".into(),
            contender: false,
        };
        let sgemm = Task {
            id: 1,
            label: String::new(),
            work: Work::Sgemm {
                a: "a".into(),
                b: "b".into(),
                c: "c".into(),
                m: 64,
                n: 32,
                k: 16,
            },
            expect: "reference".into(),
            contender: false,
        };
        Job {
            device: 1,
            bench: BenchSettings {
                warmup: 3,
                reps: 30,
                cache: CacheState::Warm,
            },
            seed: 7,
            dtype: Dtype::F16,
            reference: "transpose".into(),
            reference_kernel: Some(ReferenceKernel {
                cubin: PathBuf::from("/tmp/reference.cubin"),
                kernel: "reference".into(),
                launch: dims(0),
                before: Vec::new(),
            }),
            shape: vec![64, 64],
            buffers: vec![BufferDesc {
                name: "in".into(),
                input: true,
                len: 4096,
                fill: crate::spec::ops::Fill::Iota,
            }],
            args: vec![ArgDesc::Buffer("out".into()), ArgDesc::Int(-64)],
            output: "out".into(),
            compare: Compare::Tolerance,
            rtol: 1e-5,
            checker_cubin: PathBuf::from("/tmp/checker.cubin"),
            adaptive_cutoff: Some(1.15),
            confirm_rounds: 0,
            best_ms: Some(0.5),
            tasks: vec![kernel, copy, sgemm],
        }
    }

    /// A job survives the trip to the worker unchanged: what is serialized again from what
    /// was read is what was sent, every kind of work included.
    #[test]
    fn a_job_round_trips_through_its_json_line() {
        let sent = serde_json::to_string(&job()).unwrap();
        assert!(!sent.contains('\n'), "one line per job");
        let read: Job = serde_json::from_str(&sent).unwrap();
        assert_eq!(serde_json::to_string(&read).unwrap(), sent);
        assert_eq!(read.tasks.len(), 3);
        match &read.tasks[0].work {
            Work::Kernel {
                kernel,
                launch,
                before,
                ..
            } => {
                assert_eq!(kernel, "transpose");
                assert_eq!(*launch, dims(4096));
                assert_eq!(before.len(), 1);
                assert_eq!(before[0].kernel, "pack");
            }
            other => panic!("expected a kernel, read {other:?}"),
        }
        assert!(matches!(
            read.tasks[2].work,
            Work::Sgemm {
                m: 64,
                n: 32,
                k: 16,
                ..
            }
        ));
        assert!(matches!(read.args[1], ArgDesc::Int(-64)));
        assert_eq!(
            (read.dtype, read.bench.cache),
            (Dtype::F16, CacheState::Warm)
        );
        // Empty fields are left out of the line: no label, no prologue, no dynamic shared memory.
        assert!(!sent.contains(r#""label":"""#), "{sent}");
        assert_eq!(sent.matches(r#""before""#).count(), 1, "{sent}");
        assert_eq!(sent.matches(r#""shared""#).count(), 1, "{sent}");
    }

    /// A job line without the fields added over time (element type, label, contender,
    /// prologue, confirmation rounds) reads with their defaults.
    #[test]
    fn a_job_without_the_optional_fields_reads_with_their_defaults() {
        let mut value = serde_json::to_value(job()).unwrap();
        let obj = value.as_object_mut().unwrap();
        obj.remove("dtype");
        obj.remove("confirm_rounds");
        for task in obj["tasks"].as_array_mut().unwrap() {
            let task = task.as_object_mut().unwrap();
            task.remove("label");
            task.remove("contender");
            if let Some(k) = task["work"].get_mut("Kernel") {
                k.as_object_mut().unwrap().remove("before");
            }
        }
        let read: Job = serde_json::from_value(value).unwrap();
        assert_eq!(read.dtype, Dtype::F32);
        assert_eq!(read.confirm_rounds, 0);
        assert!(read
            .tasks
            .iter()
            .all(|t| t.label.is_empty() && !t.contender));
        assert!(matches!(&read.tasks[0].work, Work::Kernel { before, .. } if before.is_empty()));
    }

    /// Every line a worker writes reads back as what it wrote: results (with statistics,
    /// samples, clocks and warm-up), a fatal error, the device report and the ready mark.
    #[test]
    fn worker_lines_round_trip() {
        let mut r = failed(1_000_004, String::new());
        r.stats = crate::measure::bench::Stats::from_samples(&[0.03, 0.031, 0.029]);
        r.registers = Some(40);
        r.samples = vec![0.03, 0.031, 0.029];
        r.timing_s = 0.09;
        r.clock = Some(ClockSample {
            sm_mhz: 1100,
            mem_mhz: 2619,
            temp_c: 88,
            throttle_bits: 0x4,
        });
        r.warmup = Some(Warmup {
            end: WarmupEnd::AtMax,
            seconds: 0.2,
            before_mhz: 345,
            after_mhz: 1980,
            max_mhz: Some(1980),
            launches: 4095,
        });
        let mut sticky = failed(3, "an illegal memory access was encountered".into());
        sticky.sticky = true;
        let info = DeviceInfo {
            ordinal: 1,
            name: "Simulated GPU".into(),
            uuid: "0".repeat(32),
            compute_capability: (9, 0),
            limits: crate::model::limits::DeviceLimits::SM90_DEFAULT,
            l2_bytes: 50 << 20,
            total_mem: 80 << 30,
            driver_version: 13000,
        };
        for line in [
            Line::Result(r.clone()),
            Line::Result(sticky),
            Line::Fatal("no CUDA GPU is usable: none found".into()),
            Line::Failed("CUDA error during the job's set-up: out of memory".into()),
            Line::Refused("the reference's output is not an answer".into()),
            Line::Device(info, 80 << 30),
            Line::Ready,
        ] {
            let text = serde_json::to_string(&line).unwrap();
            let read: Line = serde_json::from_str(&text).unwrap();
            assert_eq!(serde_json::to_string(&read).unwrap(), text);
        }
        let text = serde_json::to_string(&Line::Result(r.clone())).unwrap();
        let Line::Result(read) = serde_json::from_str(&text).unwrap() else {
            panic!("not a result: {text}");
        };
        assert_eq!(read.stats, r.stats);
        assert_eq!(read.clock, r.clock);
        assert_eq!(read.warmup, r.warmup);
        assert_eq!(read.samples, r.samples);
        // A result line written before samples, clocks and warm-ups existed still reads.
        let old = r#"{"Result":{"id":5,"stats":null,"error":"wrong result","registers":null,"sticky":false,"verify_s":0.0,"timing_s":0.0}}"#;
        let Line::Result(read) = serde_json::from_str(old).unwrap() else {
            panic!("not a result");
        };
        assert_eq!((read.id, read.error.as_str()), (5, "wrong result"));
        assert!(read.samples.is_empty() && read.clock.is_none() && read.warmup.is_none());
    }

    /// Jobs that differ only in their tasks and in how they are timed share a session's
    /// data; any difference in the data (here the seed of the inputs) does not.
    #[test]
    fn the_data_key_ignores_tasks_and_timing_only() {
        let a = job();
        let mut b = job();
        b.tasks.truncate(1);
        b.confirm_rounds = 50;
        b.adaptive_cutoff = None;
        b.best_ms = None;
        assert_eq!(a.data_key(), b.data_key());
        let mut c = job();
        c.seed += 1;
        assert_ne!(a.data_key(), c.data_key());
    }

    /// Two runs' jobs whose checker and reference images lie in different folders share a
    /// session when the images are the same bytes, and do not when a reference differs.
    #[test]
    fn the_data_key_holds_the_images_not_their_paths() {
        let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
        let job_in = |dir: &std::path::Path, reference: &[u8]| {
            let mut j = job();
            j.checker_cubin = dir.join("checker.cubin");
            std::fs::write(&j.checker_cubin, b"checker image").unwrap();
            let r = j.reference_kernel.as_mut().unwrap();
            r.cubin = dir.join("reference.cubin");
            std::fs::write(&r.cubin, reference).unwrap();
            j
        };
        let a = job_in(dirs[0].path(), b"reference image");
        let b = job_in(dirs[1].path(), b"reference image");
        assert_eq!(a.data_key(), b.data_key());
        let c = job_in(dirs[1].path(), b"another reference");
        assert_ne!(a.data_key(), c.data_key());
    }
}
