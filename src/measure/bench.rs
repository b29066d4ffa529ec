//! Timing with CUDA events: warm-up launches, then `reps` timed samples, each between its own
//! pair of events, all enqueued before one synchronize so host overhead stays out of the
//! numbers. With a cold cache, a buffer larger than L2 is written before every timed sample,
//! outside the timed region, so each launch reads from DRAM as a one-off call would.
//!
//! A launch shorter than [`BATCH_BELOW_MS`] is near the resolution of CUDA events and the
//! host's launch overhead, so each sample is then a batch of launches captured in a CUDA
//! graph and the sample is the batch's time divided by its launches. With a cold cache, launch
//! `s` of a batch works on its own copy `s` of the job's buffers (a *slot*; slot 0 is the
//! job's own): every batch still follows a flush and touches each copy once, so no launch finds
//! its own data in L2, as with one flush per launch.

use crate::cuda::gpu::{elapsed_ms, Batch, Buffer, EventPair, Gpu, GpuResult};

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
    /// Launches per sample: 1, or the size of the batches a short kernel was timed in (its
    /// statistics are then of per-launch means over a batch).
    #[serde(default = "one")]
    pub batch: usize,
}

fn one() -> usize {
    1
}

impl Stats {
    /// Statistics of a set of samples; `None` when there are none.
    pub fn from_samples(samples: &[f64]) -> Option<Stats> {
        if samples.is_empty() {
            return None;
        }
        let mut s = samples.to_vec();
        s.sort_by(f64::total_cmp);
        let q = |p: f64| super::stats::quantile_sorted(&s, p);
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
            batch: 1,
        })
    }

    /// [`Stats::from_samples`] of per-launch samples, each a mean over `batch` launches.
    pub fn from_batches(samples: &[f64], batch: usize) -> Option<Stats> {
        Stats::from_samples(samples).map(|s| Stats { batch, ..s })
    }
}

/// How long one batch should take on the GPU, in ms: long enough that the events' resolution
/// (about half a microsecond) is under 1 % of it.
pub const BATCH_MS: f64 = 0.100;
/// Launches shorter than this (in ms) are timed in batches: every launch shorter than one
/// batch. Timed alone, a launch also pays its start-up (2-3 µs on an H100), which a batch
/// spreads over its launches; with one threshold for kernels and baselines alike, two launches
/// on either side of it differ in that share by at most half a start-up (about 1 % at 0.1
/// ms), where a lower threshold would compare a batched kernel with a roof that pays its
/// whole start-up.
pub const BATCH_BELOW_MS: f64 = BATCH_MS;
/// The most launches in one batch.
pub const MAX_BATCH: usize = 32;

/// Launches per timed sample for a kernel whose single launch takes `per_launch_ms`.
pub fn batch_size(per_launch_ms: f64) -> usize {
    if per_launch_ms.is_nan() || per_launch_ms <= 0.0 || per_launch_ms >= BATCH_BELOW_MS {
        return 1;
    }
    batch_of(per_launch_ms)
}

/// Launches in a batch of about [`BATCH_MS`], for a launch of `per_launch_ms`.
fn batch_of(per_launch_ms: f64) -> usize {
    ((BATCH_MS / per_launch_ms).ceil() as usize).clamp(2, MAX_BATCH)
}

/// Launches per sample for the tasks of one interleaved contest, by their single launches:
/// [`batch_size`] each, except that once one is batched, all are (but a task without a usable
/// single-launch time, which stays unbatched as in its first timing). A batch times launches back
/// to back, a single launch also its start-up: the leaders and the roof beside them must be
/// timed alike, or a roof whose launches straddle [`BATCH_BELOW_MS`] compares its single
/// launches with the leaders' batches.
pub fn contest_batches(per_launch_ms: &[f64]) -> Vec<usize> {
    let batches: Vec<usize> = per_launch_ms.iter().map(|&ms| batch_size(ms)).collect();
    if batches.iter().all(|&b| b == 1) {
        return batches;
    }
    per_launch_ms
        .iter()
        .zip(batches)
        .map(|(&ms, b)| match b {
            1 if ms > 0.0 => batch_of(ms),
            b => b,
        })
        .collect()
}

/// Timed launches looked at before deciding that a variant is clearly slower than the best.
pub const PROBE_REPS: usize = 5;
/// The first launches of the probe: when they already agree within [`PROBE_AGREE_PCT`] and
/// are both over the cutoff, the variant is out without the rest of the probe.
pub const PROBE_FIRST: usize = 2;
/// How closely the first launches of the probe must agree (in percent) to decide alone.
pub const PROBE_AGREE_PCT: f64 = 1.0;
/// A first warm-up launch this long (ms) ends the warm-up.
pub const WARM_ENOUGH_MS: f64 = 1.0;

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

/// Enqueues one launch of a task on slot `s` of the job's buffers.
pub type Enqueue<'a> = &'a dyn Fn(usize) -> GpuResult<()>;
/// Makes up to `n` slots available; returns how many there are.
pub type Slots<'a> = &'a dyn Fn(usize) -> GpuResult<usize>;

/// How a task's samples are taken: one launch each, or a captured batch.
pub struct Sampler {
    pub batch: usize,
    graph: Option<Batch>,
}

impl Sampler {
    /// One launch per sample.
    fn single() -> Sampler {
        Sampler {
            batch: 1,
            graph: None,
        }
    }

    /// Enqueues one sample: the batch, or one launch on slot 0.
    pub fn enqueue(&self, gpu: &Gpu, enqueue: Enqueue) -> GpuResult<()> {
        match &self.graph {
            Some(g) => gpu.launch_batch(g),
            None => enqueue(0),
        }
    }
}

impl Timer {
    pub fn new(gpu: &Gpu, settings: BenchSettings) -> GpuResult<Timer> {
        let events = gpu.timing_events(settings.reps.max(settings.warmup).max(1))?;
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

    /// The sampler for a task whose single launch takes `per_launch_ms`: a batch captured in
    /// a CUDA graph when the launch is short (as many launches as [`batch_size`] says, at most
    /// as many as there are slots with a cold cache), else single launches. A capture the
    /// driver refuses falls back to single launches; a sticky fault is returned.
    pub fn sampler(
        &self,
        gpu: &Gpu,
        per_launch_ms: f64,
        enqueue: Enqueue,
        slots: Slots,
    ) -> GpuResult<Sampler> {
        self.sampler_of(gpu, batch_size(per_launch_ms), enqueue, slots)
    }

    /// The sampler for batches of `batch` launches (at most as many as there are slots with a
    /// cold cache; 1: single launches), as [`Timer::sampler`].
    pub fn sampler_of(
        &self,
        gpu: &Gpu,
        mut batch: usize,
        enqueue: Enqueue,
        slots: Slots,
    ) -> GpuResult<Sampler> {
        let cold = self.settings.cache == CacheState::Cold;
        if batch > 1 && cold {
            batch = batch.min(slots(batch)?);
        }
        if batch <= 1 {
            return Ok(Sampler::single());
        }
        let slot = |s: usize| if cold { s } else { 0 };
        match gpu.capture(|| (0..batch).try_for_each(|s| enqueue(slot(s)))) {
            Ok(graph) => Ok(Sampler {
                batch,
                graph: Some(graph),
            }),
            Err(f) if !f.sticky => Ok(Sampler::single()),
            Err(f) => Err(f),
        }
    }

    /// Times `enqueue` (which must only enqueue work on the GPU's stream).
    ///
    /// The warm-up launches are timed one by one, and their median picks the [`Sampler`]. With
    /// `cutoff_ms`, the first [`PROBE_REPS`] timed samples are checked first: when even
    /// their fastest is slower than the cutoff, the variant is clearly not a contender and
    /// its statistics come from those samples alone (`samples` says how many).
    pub fn measure(
        &self,
        gpu: &Gpu,
        enqueue: Enqueue,
        slots: Slots,
        cutoff_ms: Option<f64>,
    ) -> GpuResult<Stats> {
        // The first warm-up launch alone first: one of a millisecond or more is warm-up
        // enough (the verifying launch before it loaded the kernel).
        let mut warm = Vec::new();
        for range in [0..1, 1..self.settings.warmup.max(1)] {
            if range.is_empty() || warm.first().is_some_and(|&ms| ms >= WARM_ENOUGH_MS) {
                break;
            }
            let events = &self.events[range.clone()];
            self.launch_timed(gpu, events, range.start, "warm-up launches", |_| enqueue(0))?;
            for e in events {
                warm.push(elapsed_ms(e)?);
            }
        }
        let per_launch = Stats::from_samples(&warm).map_or(f64::NAN, |s| s.median_ms);
        let sampler = self.sampler(gpu, per_launch, enqueue, slots)?;
        self.sample(gpu, enqueue, &sampler, cutoff_ms)
    }

    /// `--reps` samples taken by `sampler` (cut short by `cutoff_ms`, [`adaptive_samples`]).
    fn sample(
        &self,
        gpu: &Gpu,
        enqueue: Enqueue,
        sampler: &Sampler,
        cutoff_ms: Option<f64>,
    ) -> GpuResult<Stats> {
        let samples = adaptive_samples(self.settings.reps, cutoff_ms, |range| {
            let events = &self.events[range.clone()];
            self.launch_timed(gpu, events, range.start, "timed launches", |_| {
                sampler.enqueue(gpu, enqueue)
            })?;
            events
                .iter()
                .map(|e| elapsed_ms(e).map(|ms| ms / sampler.batch as f64))
                .collect()
        })?;
        Ok(Stats::from_batches(&samples, sampler.batch).expect("reps >= 1"))
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

/// Samples after which a contender's median may be precise enough to stop ([`settled`]).
pub const SETTLE_MIN: usize = 10;
/// The half-width of a median's 95 % confidence interval, in percent of the median, at which a
/// contender stops taking samples: a tenth of the narrowest tie band.
pub const SETTLED_PCT: f64 = 0.15;

/// Whether `samples` pin their median down to [`SETTLED_PCT`]: at least [`SETTLE_MIN`] of them,
/// and 1.58 IQR / sqrt(n) (the half-width of the usual notch around a median) that narrow.
pub fn settled(samples: &[f64]) -> bool {
    samples.len() >= SETTLE_MIN
        && 1.58 * crate::measure::stats::rel_iqr_pct(samples) / (samples.len() as f64).sqrt()
            <= SETTLED_PCT
}

/// The timed launches of one task, as every device takes them: with a cutoff, the first
/// [`PROBE_REPS`] go first (and stop at [`PROBE_FIRST`] when those agree and are over the
/// cutoff: steady launches need no five to show it), the rest only when the fastest of those
/// is within the cutoff,
/// in stages (to [`SETTLE_MIN`], to twice that, to `reps`) that stop once the median is
/// [`settled`]: a contender whose launches barely vary needs no 30 to be ranked. Without a
/// cutoff (baselines, the first contender, `--no-adaptive`), all `reps`. `launch(range)`
/// times the launches of `range`.
pub fn adaptive_samples<E>(
    reps: usize,
    cutoff_ms: Option<f64>,
    mut launch: impl FnMut(std::ops::Range<usize>) -> Result<Vec<f64>, E>,
) -> Result<Vec<f64>, E> {
    let Some(cutoff) = cutoff_ms else {
        return launch(0..reps);
    };
    let mut samples = launch(0..PROBE_FIRST.min(reps))?;
    let (lo, hi) = samples
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        });
    if lo > cutoff && hi <= lo * (1.0 + PROBE_AGREE_PCT / 100.0) {
        return Ok(samples);
    }
    samples.extend(launch(samples.len()..PROBE_REPS.min(reps))?);
    let fastest = samples.iter().copied().fold(f64::INFINITY, f64::min);
    if fastest > cutoff {
        return Ok(samples);
    }
    for end in [SETTLE_MIN, 2 * SETTLE_MIN, reps] {
        let end = end.min(reps);
        if samples.len() >= end {
            continue;
        }
        samples.extend(launch(samples.len()..end)?);
        if settled(&samples) {
            break;
        }
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
    fn launches_shorter_than_a_batch_are_batched_to_a_tenth_of_a_millisecond() {
        assert_eq!(batch_size(0.5), 1);
        assert_eq!(batch_size(BATCH_BELOW_MS), 1);
        // Just under the threshold: two launches, so a launch pays half a start-up.
        assert_eq!(batch_size(0.099), 2);
        assert_eq!(batch_size(0.030), 4);
        assert_eq!(batch_size(0.019), 6);
        assert_eq!(batch_size(0.006), 17);
        assert_eq!(batch_size(0.0005), MAX_BATCH);
        assert_eq!(batch_size(0.0), 1);
        assert_eq!(batch_size(f64::NAN), 1);
        // A contest times all its tasks in batches once one is batched.
        assert_eq!(contest_batches(&[0.015, 0.021]), vec![7, 5]);
        assert_eq!(contest_batches(&[0.095, 0.105, 2.0]), vec![2, 2, 2]);
        assert_eq!(contest_batches(&[0.101, 0.4]), vec![1, 1]);
        assert_eq!(contest_batches(&[f64::NAN, 0.01]), vec![1, 10]);
    }

    /// Stages of an adaptive task: the probe alone when it is out of reach; otherwise on to
    /// 10, 20 and all reps, stopping at the first stage whose median is settled.
    #[test]
    fn adaptive_samples_stop_where_the_median_is_settled() {
        let run = |cutoff: Option<f64>, noise: f64| {
            let mut ranges = Vec::new();
            let samples = adaptive_samples(30, cutoff, |r: std::ops::Range<usize>| {
                ranges.push((r.start, r.end));
                Ok::<_, ()>(r.map(|i| 1.0 + noise * ((i * 7) % 10) as f64).collect())
            })
            .unwrap();
            (samples.len(), ranges)
        };
        assert_eq!(
            run(None, 0.0),
            (30, vec![(0, 30)]),
            "no cutoff: every rep at once"
        );
        assert_eq!(
            run(Some(0.5), 0.0),
            (2, vec![(0, 2)]),
            "steady and over the cutoff"
        );
        // The first two differ by 7 %: the whole probe decides (its fastest is 1.0).
        assert_eq!(
            run(Some(0.5), 0.01),
            (5, vec![(0, 2), (2, 5)]),
            "noisy, over"
        );
        assert_eq!(
            run(Some(2.0), 0.0),
            (10, vec![(0, 2), (2, 5), (5, 10)]),
            "steady: 10 settle"
        );
        // IQR 0.5 % of the median: 1.58 * 0.5 / sqrt(20) = 0.18 % > 0.15 %, unsettled at 20.
        assert_eq!(
            run(Some(2.0), 0.001),
            (30, vec![(0, 2), (2, 5), (5, 10), (10, 20), (20, 30)]),
            "noisy: all reps"
        );
        assert!(settled(&[1.0; 10]));
        assert!(!settled(&[1.0; 9]), "too few to judge");
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
