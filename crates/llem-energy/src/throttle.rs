//! Clock throttling from NVML's throttle-reason bitmask: how long each GPU was held back by
//! heat, by its power cap, or by a hardware slowdown.

use serde::Serialize;

use crate::telemetry::Telemetry;

/// `nvmlClocksThrottleReasonApplicationsClocksSetting`: clocks held by a clock setting
/// (application clocks, or locked clocks).
pub const CLOCKS_SETTING: u64 = 0x2;
/// `nvmlClocksThrottleReasonSwPowerCap`.
pub const SW_POWER_CAP: u64 = 0x4;
/// `nvmlClocksThrottleReasonHwSlowdown`.
pub const HW_SLOWDOWN: u64 = 0x8;
/// `nvmlClocksThrottleReasonSwThermalSlowdown`.
pub const SW_THERMAL: u64 = 0x20;
/// `nvmlClocksThrottleReasonHwThermalSlowdown`.
pub const HW_THERMAL: u64 = 0x40;
/// `nvmlClocksThrottleReasonHwPowerBrakeSlowdown`.
pub const HW_POWER_BRAKE: u64 = 0x80;

/// Throttle time of one domain within a window, s.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Throttle {
    /// Domain name.
    pub domain: String,
    /// Thermal slowdown (software or hardware).
    pub thermal_s: f64,
    /// Software power cap.
    pub power_cap_s: f64,
    /// Hardware slowdown or power brake.
    pub hw_slowdown_s: f64,
    /// Clocks held by a clock setting (locked or application clocks).
    pub clock_setting_s: f64,
    /// Time the reasons were known for, s (the window, where samples cover it).
    pub observed_s: f64,
}

impl Throttle {
    /// True when any throttling was seen.
    pub fn any(&self) -> bool {
        self.thermal_s > 0.0 || self.power_cap_s > 0.0 || self.hw_slowdown_s > 0.0
    }
}

/// Throttle durations per domain over `[start, end]`; a sample's reasons hold until the next
/// sample. Domains without throttle information are left out.
pub fn throttling(t: &Telemetry, start: f64, end: f64) -> Vec<Throttle> {
    let mut out = Vec::new();
    for s in &t.series {
        let with: Vec<(f64, u64)> = (0..s.len())
            .filter_map(|i| Some((*s.t_s.get(i)?, s.throttle_reasons(i)?)))
            .collect();
        if with.is_empty() {
            continue;
        }
        let mut th = Throttle {
            domain: s.domain.name.clone(),
            ..Throttle::default()
        };
        for w in with.windows(2) {
            let [(t0, bits), (t1, _)] = w else { continue };
            let dt = (t1.min(end) - t0.max(start)).max(0.0);
            th.observed_s += dt;
            if bits & CLOCKS_SETTING != 0 {
                th.clock_setting_s += dt;
            }
            if bits & (SW_THERMAL | HW_THERMAL) != 0 {
                th.thermal_s += dt;
            }
            if bits & SW_POWER_CAP != 0 {
                th.power_cap_s += dt;
            }
            if bits & (HW_SLOWDOWN | HW_POWER_BRAKE) != 0 {
                th.hw_slowdown_s += dt;
            }
        }
        out.push(th);
    }
    out
}
