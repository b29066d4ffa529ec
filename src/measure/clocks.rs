//! GPU clocks, temperature and throttle reasons through NVML (loaded at run time by the
//! `nvml-wrapper` crate; no NVML means no readings and a warning, never a failure). The GPU
//! worker samples after every timed variant, so a result measured while the GPU throttled or
//! ran far below its steady clock can be flagged instead of silently ranked.

use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::Nvml;
use serde::{Deserialize, Serialize};

/// One reading.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ClockSample {
    pub sm_mhz: u32,
    pub mem_mhz: u32,
    pub temp_c: u32,
    /// NVML's throttle-reason bit mask.
    pub throttle_bits: u64,
}

/// Reasons that slow the clock for heat or power (idle and application-clock settings are not).
const SLOWDOWN: ThrottleReasons = ThrottleReasons::SW_POWER_CAP
    .union(ThrottleReasons::HW_SLOWDOWN)
    .union(ThrottleReasons::SW_THERMAL_SLOWDOWN)
    .union(ThrottleReasons::HW_THERMAL_SLOWDOWN)
    .union(ThrottleReasons::HW_POWER_BRAKE_SLOWDOWN);

impl ClockSample {
    /// NVML says the GPU is idle (its clocks are low because nothing runs).
    pub fn idle(&self) -> bool {
        self.throttle_bits & ThrottleReasons::GPU_IDLE.bits() != 0
    }

    /// The GPU reported thermal or power throttling.
    pub fn throttled(&self) -> bool {
        self.throttle_bits & SLOWDOWN.bits() != 0
    }
}

/// NVML opened for one device, found by the CUDA device's UUID.
pub struct ClockMonitor {
    nvml: Nvml,
    uuid: String,
}

impl ClockMonitor {
    /// `uuid_hex` is the CUDA UUID as 32 hex digits; NVML names it `GPU-8-4-4-4-12`.
    pub fn open(uuid_hex: &str) -> Result<ClockMonitor, String> {
        let nvml = Nvml::init().map_err(|e| format!("NVML not available ({e})"))?;
        let h = uuid_hex;
        if h.len() != 32 {
            return Err(format!("unexpected UUID '{h}'"));
        }
        let uuid = format!(
            "GPU-{}-{}-{}-{}-{}",
            &h[0..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..32]
        );
        nvml.device_by_uuid(uuid.as_str())
            .map_err(|e| format!("NVML does not know {uuid} ({e})"))?;
        Ok(ClockMonitor { nvml, uuid })
    }

    /// The SM clock now, in MHz (one NVML call: cheap enough to poll while warming up).
    pub fn sm_mhz(&self) -> Option<u32> {
        let d = self.nvml.device_by_uuid(self.uuid.as_str()).ok()?;
        d.clock_info(Clock::SM).ok()
    }

    /// The highest SM clock the GPU may run at (its boost clock): what a warm GPU under load
    /// holds unless power, heat or a clock setting keeps it lower.
    pub fn max_sm_mhz(&self) -> Option<u32> {
        let d = self.nvml.device_by_uuid(self.uuid.as_str()).ok()?;
        d.max_clock_info(Clock::SM).ok().filter(|&m| m > 0)
    }

    /// A reading now, or `None` when NVML fails to answer.
    pub fn sample(&self) -> Option<ClockSample> {
        let d = self.nvml.device_by_uuid(self.uuid.as_str()).ok()?;
        Some(ClockSample {
            sm_mhz: d.clock_info(Clock::SM).ok()?,
            mem_mhz: d.clock_info(Clock::Memory).ok()?,
            temp_c: d.temperature(TemperatureSensor::Gpu).ok()?,
            throttle_bits: d.current_throttle_reasons().map(|r| r.bits()).unwrap_or(0),
        })
    }
}

/// A run's readings, summarized.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClockSummary {
    pub samples: usize,
    /// Median SM clock: the steady value.
    pub steady_sm_mhz: u32,
    pub min_sm_mhz: u32,
    pub max_sm_mhz: u32,
    pub mem_mhz: u32,
    pub max_temp_c: u32,
    /// Readings that reported throttling or an SM clock more than 10 % below steady.
    pub flagged: usize,
}

/// Summarizes readings; `None` without any.
pub fn summarize(samples: &[ClockSample]) -> Option<ClockSummary> {
    if samples.is_empty() {
        return None;
    }
    let mut sm: Vec<u32> = samples.iter().map(|s| s.sm_mhz).collect();
    sm.sort_unstable();
    let steady = sm[sm.len() / 2];
    Some(ClockSummary {
        samples: samples.len(),
        steady_sm_mhz: steady,
        min_sm_mhz: sm[0],
        max_sm_mhz: sm[sm.len() - 1],
        mem_mhz: samples.iter().map(|s| s.mem_mhz).max().unwrap_or(0),
        max_temp_c: samples.iter().map(|s| s.temp_c).max().unwrap_or(0),
        flagged: samples.iter().filter(|s| is_flagged(s, steady)).count(),
    })
}

/// A reading that should not be trusted for ranking.
pub fn is_flagged(s: &ClockSample, steady_sm_mhz: u32) -> bool {
    s.throttled() || (s.sm_mhz as f64) < 0.9 * steady_sm_mhz as f64
}

/// A warm-up ends after this long even when the clock never settles (NVML answering with
/// odd values, a clock still wandering), so a run never waits longer for a steady clock.
pub const WARMUP_CAP_S: f64 = 2.0;
/// Within this fraction of the maximum SM clock counts as at the maximum: boost clocks step
/// in bins of 15 MHz and sit a bin or two below the maximum under some loads.
pub const AT_MAX_FRAC: f64 = 0.95;
/// A clock that stays within this fraction ...
pub const STABLE_WITHIN: f64 = 0.02;
/// ... over this many seconds of readings ...
pub const STABLE_WINDOW_S: f64 = 0.2;
/// ... after at least this long under load is steady although below the maximum (locked
/// clocks, a power cap). Long enough that the idle clock, read in the first milliseconds
/// before the GPU reacts to the load, is not taken for a steady one.
pub const STABLE_MIN_S: f64 = 0.3;

/// How a warm-up ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum WarmupEnd {
    /// The SM clock was already at its maximum: nothing was launched.
    AlreadyWarm,
    /// The SM clock reached its maximum under load.
    AtMax,
    /// The SM clock stopped changing below its maximum (locked clocks, a power cap).
    Stable,
    /// [`WARMUP_CAP_S`] ran out before the clock settled.
    Cap,
}

/// One warm-up of the GPU before its first timed task, as the GPU worker reports it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Warmup {
    pub end: WarmupEnd,
    /// Wall time spent, the clock checks included.
    pub seconds: f64,
    pub before_mhz: u32,
    pub after_mhz: u32,
    /// NVML's maximum SM clock, when it gave one.
    pub max_mhz: Option<u32>,
    /// Launches of the warm-up load.
    pub launches: usize,
}

/// Whether an SM clock reading before any load is already the steady one, so the warm-up
/// can be skipped. Without a known maximum this cannot be told from one reading.
pub fn already_warm(sm_mhz: u32, max_mhz: Option<u32>) -> bool {
    max_mhz.is_some_and(|m| sm_mhz as f64 >= AT_MAX_FRAC * m as f64)
}

/// Whether a warm-up may stop, from the readings taken under load so far (seconds since the
/// warm-up started, reading; in order) and the time now: at the maximum SM clock, steady
/// below it, or out of time; `None`: keep the load going. A reading that still reports the
/// GPU idle (NVML's idle reason) is never part of a steady stretch: the clock has not
/// reacted to the load yet.
pub fn warmup_done(
    readings: &[(f64, ClockSample)],
    max_mhz: Option<u32>,
    now_s: f64,
) -> Option<WarmupEnd> {
    let (_, last) = readings.last()?;
    if already_warm(last.sm_mhz, max_mhz) {
        return Some(WarmupEnd::AtMax);
    }
    if now_s >= STABLE_MIN_S {
        let window: Vec<&ClockSample> = readings
            .iter()
            .filter(|(t, _)| *t >= now_s - STABLE_WINDOW_S)
            .map(|(_, r)| r)
            .collect();
        let lo = window.iter().map(|r| r.sm_mhz).min().unwrap_or(0);
        let hi = window.iter().map(|r| r.sm_mhz).max().unwrap_or(0);
        let busy = window.iter().all(|r| !r.idle());
        if window.len() >= 3 && busy && lo > 0 && hi as f64 <= lo as f64 * (1.0 + STABLE_WITHIN) {
            return Some(WarmupEnd::Stable);
        }
    }
    (now_s >= WARMUP_CAP_S).then_some(WarmupEnd::Cap)
}

/// More than this fraction of a run's clock readings flagged ([`is_flagged`]) and the flagged
/// results are timed again once ([`to_remeasure`]); fewer stay flagged in the CSV only.
pub const REMEASURE_ABOVE: f64 = 0.10;

/// Which results to time again after a run: those whose reading is flagged against the run's
/// steady clock, when they are more than [`REMEASURE_ABOVE`] of all readings (a GPU that
/// throttled for a while, not one odd reading); otherwise none. `readings` pairs each timed
/// result (any key: a record index) with the NVML reading taken right after it.
pub fn to_remeasure<K: Copy>(readings: &[(K, ClockSample)], steady_sm_mhz: u32) -> Vec<K> {
    let flagged: Vec<K> = readings
        .iter()
        .filter(|(_, s)| is_flagged(s, steady_sm_mhz))
        .map(|(k, _)| *k)
        .collect();
    if flagged.len() as f64 > REMEASURE_ABOVE * readings.len() as f64 {
        flagged
    } else {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(sm: u32, bits: u64) -> ClockSample {
        ClockSample {
            sm_mhz: sm,
            mem_mhz: 2619,
            temp_c: 50,
            throttle_bits: bits,
        }
    }

    #[test]
    fn throttle_flags_from_recorded_readings() {
        // Idle (bit 0x1) and application-clock settings (0x2) are not throttling.
        assert!(!s(1980, 0x1).throttled());
        assert!(!s(1980, 0x2).throttled());
        assert!(s(1980, ThrottleReasons::SW_POWER_CAP.bits()).throttled());
        assert!(s(1980, ThrottleReasons::HW_THERMAL_SLOWDOWN.bits()).throttled());
        let readings = [
            s(1980, 0),
            s(1980, 0),
            s(1965, 0),
            s(1700, 0),
            s(1980, ThrottleReasons::SW_THERMAL_SLOWDOWN.bits()),
        ];
        let sum = summarize(&readings).unwrap();
        assert_eq!(
            (sum.steady_sm_mhz, sum.min_sm_mhz, sum.max_sm_mhz),
            (1980, 1700, 1980)
        );
        assert_eq!(sum.flagged, 2, "one far below steady, one throttled");
        assert!(summarize(&[]).is_none());
    }

    #[test]
    fn a_warm_gpu_is_not_warmed_up() {
        assert!(already_warm(1980, Some(1980)));
        assert!(already_warm(1890, Some(1980)), "a bin or two below the max");
        assert!(!already_warm(345, Some(1980)), "an idle H100");
        assert!(
            !already_warm(1980, None),
            "no maximum: one reading cannot tell"
        );
    }

    /// Readings every 20 ms from the start; a clock written as `-345` is read with NVML's
    /// idle reason set.
    fn trace(mhz: &[i64]) -> Vec<(f64, ClockSample)> {
        let idle = ThrottleReasons::GPU_IDLE.bits();
        mhz.iter()
            .enumerate()
            .map(|(i, &m)| {
                let r = s(m.unsigned_abs() as u32, if m < 0 { idle } else { 0 });
                (0.02 * i as f64, r)
            })
            .collect()
    }

    /// Runs the stopping rule over a trace as the worker does, reading by reading.
    fn ends(readings: &[(f64, ClockSample)], max: Option<u32>) -> Option<(f64, WarmupEnd)> {
        (1..=readings.len()).find_map(|n| {
            let now = readings[n - 1].0;
            warmup_done(&readings[..n], max, now).map(|e| (now, e))
        })
    }

    #[test]
    fn an_idle_gpu_warms_until_its_maximum() {
        // Idle clock for the first readings, then the climb to the 1980 MHz boost clock.
        let t = trace(&[-345, -345, 345, 810, 1410, 1755, 1965, 1980]);
        assert_eq!(ends(&t, Some(1980)), Some((0.12, WarmupEnd::AtMax)));
    }

    #[test]
    fn the_idle_clock_before_the_climb_is_not_taken_for_steady() {
        // Half a second still reported idle, then the climb: the stability rule must not
        // fire on the idle clock.
        let mut mhz = vec![-345; 25];
        mhz.extend([1200, 1980]);
        let t = trace(&mhz);
        assert_eq!(ends(&t, Some(1980)), Some((0.52, WarmupEnd::AtMax)));
        // The same without a known maximum: steady once 1980 MHz held for the window.
        let mut mhz = vec![-345; 25];
        mhz.extend([1200; 1]);
        mhz.extend([1980; 15]);
        let (at, end) = ends(&trace(&mhz), None).unwrap();
        assert_eq!(end, WarmupEnd::Stable);
        assert!((0.52 + STABLE_WINDOW_S..0.8).contains(&at), "{at}");
    }

    #[test]
    fn locked_clocks_end_the_warm_up_once_stable() {
        // `nvidia-smi -lgc 1410`: the clock holds 1410 MHz, 28 % below the maximum.
        let t = trace(&[1410; 40]);
        let (at, end) = ends(&t, Some(1980)).unwrap();
        assert_eq!(end, WarmupEnd::Stable);
        assert!((STABLE_MIN_S..STABLE_MIN_S + 0.05).contains(&at), "{at}");
        // A clock still wandering by more than 2 % is not stable: the cap ends it.
        let wandering: Vec<i64> = (0..120)
            .map(|i| if i % 2 == 0 { 1400 } else { 1500 })
            .collect();
        assert_eq!(
            ends(&trace(&wandering), Some(1980)).map(|e| e.1),
            Some(WarmupEnd::Cap)
        );
        // So does an idle reason that never clears (the load does not reach the GPU).
        assert_eq!(
            ends(&trace(&[-345; 120]), Some(1980)),
            Some((WARMUP_CAP_S, WarmupEnd::Cap))
        );
        assert!(
            warmup_done(&[], Some(1980), 5.0).is_none(),
            "no reading, no verdict"
        );
    }

    /// The H100 sgemm 4096^3 run committed in results/ (257 timed variants): 20 readings were
    /// taken under the software power cap (bit 0x4), 16 of them at 1965 MHz and 4 at 1980 MHz;
    /// the other 237 were clean at the 1980 MHz steady clock.
    fn h100_sgemm_4096() -> Vec<(usize, ClockSample)> {
        let cap = ThrottleReasons::SW_POWER_CAP.bits();
        (0..257)
            .map(|i| match i % 13 {
                0 if i < 16 * 13 => (i, s(1965, cap)),
                0 => (i, s(1980, cap)),
                _ => (i, s(1980, 0)),
            })
            .collect()
    }

    #[test]
    fn a_few_flagged_readings_are_not_re_measured() {
        let readings = h100_sgemm_4096();
        let flagged = readings.iter().filter(|(_, r)| is_flagged(r, 1980)).count();
        assert_eq!(flagged, 20);
        assert!(
            to_remeasure(&readings, 1980).is_empty(),
            "20 of 257 is under 10 %"
        );
        // Exactly 10 % is not more than 10 %.
        let mut ten: Vec<(usize, ClockSample)> = (0..90).map(|i| (i, s(1980, 0))).collect();
        ten.extend((90..100).map(|i| (i, s(1500, 0))));
        assert!(to_remeasure(&ten, 1980).is_empty());
    }

    #[test]
    fn a_throttled_stretch_is_re_measured() {
        // The same run, had the GPU slowed down for heat over 30 variants in the middle: those
        // and the power-capped readings are re-timed, nothing else.
        let thermal = ThrottleReasons::SW_THERMAL_SLOWDOWN.bits();
        let mut readings = h100_sgemm_4096();
        for r in &mut readings[100..130] {
            r.1 = s(1605, thermal);
        }
        let again = to_remeasure(&readings, 1980);
        assert!(again.windows(2).all(|w| w[0] < w[1]), "in run order");
        assert!((100..130).all(|i| again.contains(&i)));
        let capped = readings
            .iter()
            .filter(|(i, r)| !(100..130).contains(i) && r.throttled())
            .count();
        assert_eq!(again.len(), 30 + capped);
        // A clock far below steady without any throttle bit (the GPU dropped to a lower
        // clock between variants) counts as well.
        let mut slow: Vec<(usize, ClockSample)> = (0..50).map(|i| (i, s(1980, 0))).collect();
        slow.extend((50..60).map(|i| (i, s(1110, 0))));
        assert_eq!(to_remeasure(&slow, 1980), (50..60).collect::<Vec<_>>());
        assert!(to_remeasure::<usize>(&[], 1980).is_empty());
    }
}
