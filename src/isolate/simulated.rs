//! A simulated GPU, for tests only: built with the `simulated` feature (the crate's tests
//! enable it; a release build has no such code) and chosen by [`SIMULATE_ENV`] naming a
//! [`Model`] file. It stands behind the same [`Device`] seam as the CUDA device, in this
//! process or in GPU worker processes, so the pipeline's rounds, settling, confirmation, tie
//! rule, ranking, persisting, resume and the workers' fault handling run without a GPU.
//!
//! A task's kernel image is real (NVRTC compiled it): it must exist and define the kernels the
//! task launches. Its time is made up: a deterministic time per configuration, from the model,
//! times a per-launch noise factor from a seeded generator. Failures are planted by
//! configuration: wrong results, sticky faults, hangs, throttled clock readings.

use super::device::{Device, SIMULATE_ENV};
use super::interrupt::interrupted;
use super::protocol::{deliver, failed, failed_with, Job, Task, TaskResult, Work};
use crate::cuda::gpu::DeviceInfo;
use crate::error::{Error, Result};
use crate::measure::bench::{
    adaptive_cutoff, adaptive_samples, batch_size, contest_batches, Stats,
};
use crate::measure::clocks::ClockSample;
use crate::model::limits::DeviceLimits;
use rand::{Rng, SeedableRng};
use serde::Deserialize;
use std::collections::HashMap;
use std::path::PathBuf;

/// What the simulated device is and how its tasks behave (a JSON file).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Model {
    /// Devices the simulated machine has (`--gpus`).
    pub devices: usize,
    pub name: String,
    pub compute_capability: (i32, i32),
    /// Its number of SMs (132, an H100's, by default).
    pub num_sms: i64,
    pub free_mem: u64,
    /// A configuration's time before its rules: `base_ms` times a factor in
    /// `[1, 1 + spread)` drawn from a hash of its label, so configurations differ.
    pub base_ms: f64,
    pub spread: f64,
    /// Baseline times by baseline name (`copy`, `cublas`); `base_ms` where absent.
    pub baselines: HashMap<String, f64>,
    /// Every rule whose `when` matches a label multiplies its time by `factor` and may set
    /// its registers.
    pub rules: Vec<Rule>,
    /// Per-launch noise: a uniform factor in `[1 - noise_pct/100, 1 + noise_pct/100]`.
    pub noise_pct: f64,
    /// Seed of the noise (runs with different seeds see different noise).
    pub seed: u64,
    /// Real time each launch takes, in microseconds (so a run lasts long enough to stop).
    pub launch_us: u64,
    /// What a launch timed alone adds to its time, in ms (its start-up; a batch of launches
    /// captured in a graph does not pay it).
    pub startup_ms: f64,
    /// Configurations whose output is wrong.
    pub wrong: Vec<String>,
    /// Configurations that fault and leave the device unusable.
    pub fault: Vec<String>,
    /// Configurations that never finish (run them in workers: the watchdog ends them).
    pub hang: Vec<String>,
    /// Configurations whose output is right in their first `checks` checks in a process and
    /// wrong after (a race that shows now and then): a leader that fails the confirmation's
    /// check, a throttled result that fails its re-measure.
    pub wrong_after: Vec<WrongAfter>,
    /// Configurations whose first `times` measurements in a process read as throttled.
    pub throttle: Vec<Throttle>,
    /// Shapes (`64x64`) whose job set-up fails with a CUDA error, as a failed allocation or
    /// reference would: an error of the job, not of the device.
    pub setup_error: Vec<String>,
}

/// A time factor (and optionally the register count) for the configurations it matches.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub when: String,
    #[serde(default = "one")]
    pub factor: f64,
    #[serde(default)]
    pub registers: Option<i32>,
}

/// A configuration whose output turns wrong after its first `checks` checks.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WrongAfter {
    pub when: String,
    #[serde(default = "one_time")]
    pub checks: usize,
}

/// Throttled clock readings planted on matching configurations.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Throttle {
    pub when: String,
    #[serde(default = "one_time")]
    pub times: usize,
}

fn one() -> f64 {
    1.0
}

fn one_time() -> usize {
    1
}

impl Default for Model {
    fn default() -> Model {
        Model {
            devices: 1,
            name: "Simulated GPU".into(),
            compute_capability: (9, 0),
            num_sms: DeviceLimits::SM90_DEFAULT.num_sms,
            free_mem: 80 << 30,
            base_ms: 0.05,
            spread: 0.5,
            baselines: HashMap::new(),
            rules: Vec::new(),
            noise_pct: 0.0,
            seed: 1,
            launch_us: 0,
            startup_ms: 0.0,
            wrong: Vec::new(),
            fault: Vec::new(),
            hang: Vec::new(),
            wrong_after: Vec::new(),
            throttle: Vec::new(),
            setup_error: Vec::new(),
        }
    }
}

/// The clock a simulated device runs at, and the one a throttled reading shows.
const STEADY_MHZ: u32 = 1980;
const THROTTLED_MHZ: u32 = 1100;
/// NVML's software power-cap throttle-reason bit.
const POWER_CAP_BIT: u64 = 0x4;

/// FNV-1a: a stable hash of a label (the same in every process and Rust version).
fn stable_hash(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in *part {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Whether every `K=V` token of `pattern` is a token of `label` (a baseline's label is its
/// name, matched the same way).
pub fn matches(pattern: &str, label: &str) -> bool {
    let tokens: Vec<&str> = label.split_whitespace().collect();
    pattern.split_whitespace().all(|p| tokens.contains(&p))
}

impl Model {
    /// The model [`SIMULATE_ENV`] names, when it names one.
    pub fn from_env() -> Result<Option<Model>> {
        let Some(path) = std::env::var_os(SIMULATE_ENV).map(PathBuf::from) else {
            return Ok(None);
        };
        let text =
            std::fs::read_to_string(&path).map_err(|e| Error::io("cannot read", &path, e))?;
        serde_json::from_str(&text).map(Some).map_err(|e| {
            Error::Usage(format!(
                "{}: not a simulated-device model: {e}",
                path.display()
            ))
        })
    }

    /// The time of one launch of `label` without noise, in milliseconds.
    pub fn time_ms(&self, label: &str, baseline: bool) -> f64 {
        let base = if baseline {
            self.baselines.get(label).copied().unwrap_or(self.base_ms)
        } else {
            let u = stable_hash(&[label.as_bytes()]) as f64 / u64::MAX as f64;
            self.base_ms * (1.0 + self.spread * u)
        };
        self.rules
            .iter()
            .filter(|r| matches(&r.when, label))
            .fold(base, |t, r| t * r.factor)
    }

    /// Registers the configuration reports: the last matching rule's, else 24 to 87 from a
    /// hash of its label.
    pub fn registers(&self, label: &str) -> i32 {
        self.rules
            .iter()
            .rev()
            .find_map(|r| r.registers.filter(|_| matches(&r.when, label)))
            .unwrap_or(24 + (stable_hash(&[b"registers", label.as_bytes()]) % 64) as i32)
    }

    fn planted(list: &[String], label: &str) -> bool {
        list.iter().any(|p| matches(p, label))
    }
}

/// One simulated device.
pub struct Simulated {
    model: Model,
    info: DeviceInfo,
    /// The median of the fastest contender so far (adaptive repetitions), as a session keeps.
    best_ms: f64,
    prepared: Option<String>,
    /// Launches so far per label: the noise of each launch is drawn anew.
    launches: HashMap<String, u64>,
    /// Throttled readings handed out so far per throttle rule.
    throttled: Vec<usize>,
    /// Checks so far per label (for [`Model::wrong_after`]).
    checks: HashMap<String, usize>,
}

impl Simulated {
    pub fn open(model: Model, ordinal: usize) -> Result<Simulated> {
        if ordinal >= model.devices {
            return Err(Error::NoGpu(format!(
                "--device {ordinal} does not exist: this machine has {} CUDA device(s), 0..{}",
                model.devices,
                model.devices.saturating_sub(1)
            )));
        }
        let info = DeviceInfo {
            ordinal,
            name: model.name.clone(),
            uuid: format!("{:032x}", stable_hash(&[b"uuid", &ordinal.to_le_bytes()])),
            compute_capability: model.compute_capability,
            limits: DeviceLimits {
                num_sms: model.num_sms,
                ..DeviceLimits::SM90_DEFAULT
            },
            l2_bytes: 50 << 20,
            total_mem: model.free_mem as usize,
            driver_version: 13000,
        };
        let throttled = vec![0; model.throttle.len()];
        Ok(Simulated {
            model,
            info,
            best_ms: f64::INFINITY,
            prepared: None,
            launches: HashMap::new(),
            throttled,
            checks: HashMap::new(),
        })
    }

    /// `n` noisy launch times of `label`.
    fn launch(&mut self, label: &str, baseline: bool, n: usize) -> Vec<f64> {
        let t = self.model.time_ms(label, baseline);
        let count = self.launches.entry(label.to_string()).or_insert(0);
        let mut rng = rand::rngs::StdRng::seed_from_u64(stable_hash(&[
            &self.model.seed.to_le_bytes(),
            &self.info.ordinal.to_le_bytes(),
            label.as_bytes(),
            &count.to_le_bytes(),
        ]));
        *count += 1;
        let a = self.model.noise_pct / 100.0;
        if self.model.launch_us > 0 {
            std::thread::sleep(std::time::Duration::from_micros(
                self.model.launch_us * n as u64,
            ));
        }
        (0..n)
            .map(|_| {
                t * (1.0
                    + if a > 0.0 {
                        rng.random_range(-a..=a)
                    } else {
                        0.0
                    })
            })
            .collect()
    }

    /// `n` launches of `label` timed one by one: each pays the start-up.
    fn single(&mut self, label: &str, baseline: bool, n: usize) -> Vec<f64> {
        let startup = self.model.startup_ms;
        self.launch(label, baseline, n)
            .into_iter()
            .map(|t| t + startup)
            .collect()
    }

    /// `n` samples of `label`, each the mean of `batch` noisy launches (batched timing).
    fn batches(&mut self, label: &str, baseline: bool, n: usize, batch: usize) -> Vec<f64> {
        if batch <= 1 {
            return self.single(label, baseline, n);
        }
        self.launch(label, baseline, n * batch)
            .chunks(batch)
            .map(|c| c.iter().sum::<f64>() / c.len() as f64)
            .collect()
    }

    /// The clock reading after a task: steady, or throttled where a rule plants it.
    fn clock(&mut self, label: &str) -> ClockSample {
        let hit = self
            .model
            .throttle
            .iter()
            .enumerate()
            .find(|(i, t)| matches(&t.when, label) && self.throttled[*i] < t.times)
            .map(|(i, _)| i);
        let throttled = hit.is_some();
        if let Some(i) = hit {
            self.throttled[i] += 1;
        }
        ClockSample {
            sm_mhz: if throttled { THROTTLED_MHZ } else { STEADY_MHZ },
            mem_mhz: 2619,
            temp_c: if throttled { 88 } else { 55 },
            throttle_bits: if throttled { POWER_CAP_BIT } else { 0 },
        }
    }

    /// Loads and verifies a task, as the CUDA session does before timing it: its image must
    /// define what it launches, and its planted failures happen here.
    fn check(&mut self, task: &Task, out_len: usize) -> std::result::Result<(), (String, bool)> {
        if let Work::Kernel {
            cubin,
            kernel,
            before,
            ..
        } = &task.work
        {
            let image = std::fs::read(cubin)
                .map_err(|e| (format!("cannot read {}: {e}", cubin.display()), false))?;
            let defined = crate::cuda::compile::kernel_names(&image).map_err(|e| (e, false))?;
            let wanted: Vec<String> = before
                .iter()
                .map(|p| p.kernel.clone())
                .chain(std::iter::once(kernel.clone()))
                .collect();
            crate::cuda::compile::check_kernels(&defined, &wanted).map_err(|e| (e, false))?;
        }
        let label = &task.label;
        if Model::planted(&self.model.hang, label) {
            loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            }
        }
        if Model::planted(&self.model.fault, label) {
            return Err((
                "simulated fault: an illegal memory access was encountered \
                 (CUDA_ERROR_ILLEGAL_ADDRESS)"
                    .into(),
                true,
            ));
        }
        let checked = self.checks.entry(label.clone()).or_insert(0);
        *checked += 1;
        let turned = self
            .model
            .wrong_after
            .iter()
            .any(|w| matches(&w.when, label) && *checked > w.checks);
        if turned {
            return Err((
                format!("wrong result: 1 of {out_len} elements differ from the reference"),
                false,
            ));
        }
        if Model::planted(&self.model.wrong, label) {
            return Err((
                format!(
                    "wrong result: {out_len} of {out_len} elements differ from the reference \
                     (0 NaN, i.e. never written)"
                ),
                false,
            ));
        }
        Ok(())
    }

    /// Verifies, then times one task the way the session does: warm-up launches, then
    /// `reps` timed ones, cut short after [`PROBE_REPS`] when the adaptive cutoff says so.
    fn run_one(&mut self, job: &Job, task: &Task, out_len: usize) -> TaskResult {
        let mut r = failed(task.id, String::new());
        let baseline = !task.contender;
        if let Err((why, sticky)) = self.check(task, out_len) {
            return failed_with(task.id, why, sticky);
        }
        if matches!(task.work, Work::Kernel { .. }) {
            r.registers = Some(self.model.registers(&task.label));
        }
        let cutoff = adaptive_cutoff(job.adaptive_cutoff, task.contender, self.best_ms);
        let warmup = self.single(&task.label, baseline, job.bench.warmup.max(1));
        let batch = batch_size(Stats::from_samples(&warmup).map_or(f64::NAN, |s| s.median_ms));
        let samples = adaptive_samples(job.bench.reps.max(1), cutoff, |range| {
            Ok::<_, std::convert::Infallible>(self.batches(
                &task.label,
                baseline,
                range.len(),
                batch,
            ))
        })
        .unwrap_or_else(|never| match never {});
        let stats = Stats::from_batches(&samples, batch).expect("reps >= 1");
        if task.contender && stats.median_ms < self.best_ms {
            self.best_ms = stats.median_ms;
        }
        r.timing_s = samples.iter().sum::<f64>() / 1e3;
        r.stats = Some(stats);
        r.clock = Some(self.clock(&task.label));
        r
    }

    /// A confirmation job: every task verified, then one launch of each per round (the
    /// leaders and, beside them, the roof baselines).
    fn run_interleaved(&mut self, job: &Job, tasks: &[Task], out_len: usize) -> Vec<TaskResult> {
        let mut results = Vec::new();
        let mut timed = Vec::new();
        for task in tasks {
            match self.check(task, out_len) {
                Ok(()) => timed.push(task),
                Err((why, sticky)) => {
                    results.push(TaskResult {
                        check_failed: true,
                        ..failed_with(task.id, why, sticky)
                    });
                    if sticky {
                        // The device is lost: nothing more runs on it.
                        return results;
                    }
                }
            }
        }
        let mut samples = vec![Vec::new(); timed.len()];
        // Warm-up rounds of single launches pick the tasks' batches, as on a GPU.
        let warmup = job.bench.warmup.max(1);
        let per_launch: Vec<f64> = timed
            .iter()
            .map(|t| {
                let warm = self.single(&t.label, !t.contender, warmup);
                Stats::from_samples(&warm).map_or(f64::NAN, |s| s.median_ms)
            })
            .collect();
        let batches = contest_batches(&per_launch);
        for _round in 0..job.confirm_rounds {
            for (i, task) in timed.iter().enumerate() {
                samples[i].extend(self.batches(&task.label, !task.contender, 1, batches[i]));
            }
        }
        for ((task, s), batch) in timed.iter().zip(samples).zip(batches) {
            let mut r = failed(task.id, String::new());
            if matches!(task.work, Work::Kernel { .. }) {
                r.registers = Some(self.model.registers(&task.label));
            }
            r.stats = Stats::from_batches(&s, batch);
            r.samples = s;
            r.clock = Some(self.clock(&task.label));
            results.push(r);
        }
        results
    }
}

impl Device for Simulated {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn free_mem(&self) -> Result<u64> {
        Ok(self.model.free_mem)
    }

    fn prepare(&mut self, job: &Job) -> Result<()> {
        let shape: Vec<String> = job.shape.iter().map(u64::to_string).collect();
        if self.model.setup_error.contains(&shape.join("x")) {
            return Err(Error::Cuda {
                during: "the job's set-up".into(),
                why: "CUDA_ERROR_OUT_OF_MEMORY (simulated)".into(),
            });
        }
        let key = job.data_key();
        if self.prepared.as_deref() != Some(key.as_str()) {
            self.prepared = Some(key);
        }
        Ok(())
    }

    fn run(&mut self, job: &Job, tasks: &[Task], sink: &mut dyn FnMut(TaskResult)) -> Result<bool> {
        self.prepare(job)?;
        // The adaptive cutoff starts from the run's best, as a CUDA session's does.
        self.best_ms = job.best_ms.unwrap_or(f64::INFINITY);
        let out_len = job
            .buffers
            .iter()
            .find(|b| b.name == job.output)
            .map_or(0, |b| b.len);
        if job.confirm_rounds > 0 {
            return Ok(deliver(self.run_interleaved(job, tasks, out_len), sink));
        }
        for task in tasks {
            if interrupted() {
                break;
            }
            let r = self.run_one(job, task, out_len);
            let sticky = r.sticky;
            sink(r);
            if sticky {
                self.prepared = None;
                return Ok(true);
            }
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_match_by_whole_tokens() {
        assert!(matches("TILE_DIM=32", "TILE_DIM=32 BLOCK_ROWS=8"));
        assert!(matches(
            "BLOCK_ROWS=8 TILE_DIM=32",
            "TILE_DIM=32 BLOCK_ROWS=8"
        ));
        assert!(!matches("TILE_DIM=3", "TILE_DIM=32 BLOCK_ROWS=8"));
        assert!(matches("copy", "copy"));
    }

    #[test]
    fn times_are_deterministic_and_rules_scale_them() {
        let mut m = Model::default();
        let a = m.time_ms("TILE_DIM=32 BLOCK_ROWS=8", false);
        assert_eq!(a, m.time_ms("TILE_DIM=32 BLOCK_ROWS=8", false));
        assert!((0.05..0.075).contains(&a), "{a}");
        m.rules.push(Rule {
            when: "TILE_DIM=32".into(),
            factor: 0.5,
            registers: Some(40),
        });
        assert_eq!(m.time_ms("TILE_DIM=32 BLOCK_ROWS=8", false), a * 0.5);
        assert_eq!(m.registers("TILE_DIM=32 BLOCK_ROWS=8"), 40);
        assert_eq!(m.time_ms("copy", true), 0.05);
    }

    #[test]
    fn noise_stays_within_its_bound_and_follows_the_seed() {
        let model = Model {
            noise_pct: 10.0,
            spread: 0.0,
            ..Model::default()
        };
        let mut a = Simulated::open(model.clone(), 0).unwrap();
        let mut b = Simulated::open(model.clone(), 0).unwrap();
        let xs = a.launch("X=1", false, 200);
        assert_eq!(xs, b.launch("X=1", false, 200));
        assert!(xs.iter().all(|t| (0.045..=0.055).contains(t)), "{xs:?}");
        let mut c = Simulated::open(Model { seed: 2, ..model }, 0).unwrap();
        assert_ne!(xs, c.launch("X=1", false, 200));
        assert!(Simulated::open(Model::default(), 1).is_err());
    }
}
