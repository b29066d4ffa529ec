//! Timing with CUDA events: warm-up launches, then `reps` timed launches, each between its own
//! pair of events, all enqueued before one synchronize so host overhead stays out of the
//! numbers. With a cold cache, a buffer larger than L2 is written before every timed launch,
//! outside the timed region, so each launch reads from DRAM as a one-off call would.

use crate::cuda::gpu::{elapsed_ms, Buffer, EventPair, Gpu, GpuResult};

/// Whether L2 is flushed between timed launches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheState {
    /// Flush L2 before each timed launch (DRAM-bound numbers; the default).
    Cold,
    /// Back-to-back launches: data that fits in L2 stays there.
    Warm,
}

impl CacheState {
    pub fn as_str(&self) -> &'static str {
        match self {
            CacheState::Cold => "cold",
            CacheState::Warm => "warm",
        }
    }
}

#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct BenchSettings {
    pub warmup: usize,
    pub reps: usize,
    pub cache: CacheState,
}

/// Summary of one variant's timed launches.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Stats {
    pub median_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    /// (p90 - p10) / median, in percent: run-to-run noise of this variant.
    pub spread_pct: f64,
    pub samples: usize,
}

impl Stats {
    /// Statistics of a set of samples; `None` when there are none.
    pub fn from_samples(samples: &[f64]) -> Option<Stats> {
        if samples.is_empty() {
            return None;
        }
        let mut s = samples.to_vec();
        s.sort_by(f64::total_cmp);
        let q = |p: f64| {
            let pos = p * (s.len() - 1) as f64;
            let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
            s[lo] + (s[hi] - s[lo]) * (pos - lo as f64)
        };
        let median = q(0.5);
        Some(Stats {
            median_ms: median,
            min_ms: s[0],
            max_ms: s[s.len() - 1],
            spread_pct: if median > 0.0 {
                (q(0.9) - q(0.1)) / median * 100.0
            } else {
                0.0
            },
            samples: s.len(),
        })
    }
}

/// Timed launches looked at before deciding that a variant is clearly slower than the best.
pub const PROBE_REPS: usize = 5;

/// Bytes of the L2 flush buffer for a GPU with `l2_bytes` of L2: twice L2 (at least 64 MiB),
/// so nothing of the previous launch survives writing it.
pub fn flush_bytes(l2_bytes: usize) -> usize {
    (l2_bytes * 2).max(64 << 20)
}

/// Events and the flush buffer, made once per context and reused for every variant.
pub struct Timer {
    settings: BenchSettings,
    events: Vec<EventPair>,
    flush: Option<Buffer>,
}

impl Timer {
    pub fn new(gpu: &Gpu, settings: BenchSettings) -> GpuResult<Timer> {
        let events = gpu.timing_events(settings.reps.max(1))?;
        let flush = match settings.cache {
            CacheState::Cold => {
                let bytes = flush_bytes(gpu.info.l2_bytes);
                Some(gpu.alloc(bytes / 4, 4, "the L2 flush buffer")?)
            }
            CacheState::Warm => None,
        };
        Ok(Timer {
            settings,
            events,
            flush,
        })
    }

    pub fn settings(&self) -> BenchSettings {
        self.settings
    }

    /// Writes the flush buffer (cold cache) or does nothing (warm).
    pub fn flush(&self, gpu: &Gpu, round: usize) -> GpuResult<()> {
        match &self.flush {
            Some(buf) => gpu.fill_u32(buf, round as u32),
            None => Ok(()),
        }
    }

    /// The timing loop: for each pair of `events`, the flush (its round is `first_round` plus
    /// the pair's place), then `enqueue(place)` between the pair's two events; then one wait
    /// for all of them (`during` names it in an error). Read the times with [`elapsed_ms`].
    pub fn launch_timed(
        &self,
        gpu: &Gpu,
        events: &[EventPair],
        first_round: usize,
        during: &str,
        mut enqueue: impl FnMut(usize) -> GpuResult<()>,
    ) -> GpuResult<()> {
        for (i, pair) in events.iter().enumerate() {
            self.flush(gpu, first_round + i)?;
            gpu.record(&pair.0)?;
            enqueue(i)?;
            gpu.record(&pair.1)?;
        }
        gpu.synchronize(during)
    }

    /// Times `enqueue` (which must only enqueue work on the GPU's stream).
    ///
    /// With `cutoff_ms`, the first [`PROBE_REPS`] timed launches are checked first: when even
    /// their fastest is slower than the cutoff, the variant is clearly not a contender and
    /// its statistics come from those launches alone (`samples` says how many).
    pub fn measure(
        &self,
        gpu: &Gpu,
        mut enqueue: impl FnMut() -> GpuResult<()>,
        cutoff_ms: Option<f64>,
    ) -> GpuResult<Stats> {
        for i in 0..self.settings.warmup {
            self.flush(gpu, i)?;
            enqueue()?;
        }
        let samples = adaptive_samples(self.settings.reps, cutoff_ms, |range| {
            let events = &self.events[range.clone()];
            self.launch_timed(gpu, events, range.start, "timed launches", |_| enqueue())?;
            events.iter().map(elapsed_ms).collect()
        })?;
        Ok(Stats::from_samples(&samples).expect("reps >= 1"))
    }
}

/// The cutoff of adaptive repetitions for a task: `factor` times the best contender's median
/// so far, for a contender once there is a best; `None` (all `--reps`) otherwise.
pub fn adaptive_cutoff(factor: Option<f64>, contender: bool, best_ms: f64) -> Option<f64> {
    match factor {
        Some(f) if contender && best_ms.is_finite() => Some(best_ms * f),
        _ => None,
    }
}

/// The timed launches of one task, as every device takes them: with a cutoff, the first
/// [`PROBE_REPS`] go first and the rest of the `reps` only when the fastest of those is within
/// the cutoff; without one, all `reps`. `launch(range)` times the launches of `range`.
pub fn adaptive_samples<E>(
    reps: usize,
    cutoff_ms: Option<f64>,
    mut launch: impl FnMut(std::ops::Range<usize>) -> Result<Vec<f64>, E>,
) -> Result<Vec<f64>, E> {
    let probe = if cutoff_ms.is_some() {
        PROBE_REPS.min(reps)
    } else {
        reps
    };
    let mut samples = launch(0..probe)?;
    let fastest = samples.iter().copied().fold(f64::INFINITY, f64::min);
    if probe < reps && cutoff_ms.is_none_or(|c| fastest <= c) {
        samples.extend(launch(probe..reps)?);
    }
    Ok(samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flush_buffer_is_twice_l2_and_at_least_64_mib() {
        assert_eq!(flush_bytes(50 << 20), 100 << 20);
        assert_eq!(flush_bytes(4 << 20), 64 << 20);
    }

    #[test]
    fn stats_of_known_samples() {
        let s = Stats::from_samples(&[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!(
            (s.median_ms, s.min_ms, s.max_ms, s.samples),
            (3.0, 1.0, 5.0, 5)
        );
        // p10 = 1.4, p90 = 4.6 → spread 3.2 / 3 = 106.7 %
        assert!((s.spread_pct - 106.666).abs() < 0.01, "{}", s.spread_pct);
        let even = Stats::from_samples(&[1.0, 2.0, 3.0, 10.0]).unwrap();
        assert_eq!(even.median_ms, 2.5);
        assert!(Stats::from_samples(&[]).is_none());
    }
}
