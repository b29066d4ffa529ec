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
}
