//! Whether a device setting held a device back during a window: for a GPU, the share of the
//! window under each of NVML's clock-event reasons, its mean SM clock and power against the
//! limit; for a CPU package, how much of the window its power sat at the RAPL limit (RAPL
//! gives no reason bits, so reaching the limit is the only sign of it acting).

use llem_results::result::BindingRecord;

use crate::telemetry::{Series, Telemetry, WindowEnergy};
use crate::throttle;

/// A package's stretch counts as capped at this share of the limit or above: RAPL holds the
/// running average at the limit, so stretches sit just under it.
pub const CPU_CAP_SHARE: f64 = 0.97;

fn share(part: f64, whole: f64) -> Option<f64> {
    (whole > 0.0).then(|| (part / whole).clamp(0.0, 1.0))
}

fn mean_finite(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (mut sum, mut n) = (0.0, 0usize);
    for v in values.filter(|v| v.is_finite()) {
        sum += v;
        n += 1;
    }
    (n > 0).then(|| sum / n as f64)
}

/// RAPL holds a package's power averaged over its time window (about a second by default),
/// so single reads wander around the limit; power is judged over stretches of this length.
pub const CPU_CAP_STRETCH_S: f64 = 0.1;

/// Power over consecutive stretches of at least [`CPU_CAP_STRETCH_S`] inside `[start, end]`,
/// `(seconds, W)`, from the counter's updates or the power samples.
fn stretch_powers(s: &Series, start: f64, end: f64) -> Vec<(f64, f64)> {
    // (t, cumulative J) points inside the window.
    let updates = if s.has_counter {
        s.counter_updates()
    } else {
        Vec::new()
    };
    let pts: Vec<(f64, f64)> = if updates.len() >= 2 {
        updates
    } else {
        let mut acc = 0.0;
        let mut out = Vec::new();
        let mut prev: Option<(f64, f64)> = None;
        for (t, p) in s.power_points() {
            if let Some((t0, p0)) = prev {
                acc += (t - t0) * (p + p0) / 2.0;
            }
            prev = Some((t, p));
            out.push((t, acc));
        }
        out
    };
    let inside: Vec<(f64, f64)> = pts
        .into_iter()
        .filter(|(t, _)| (start..=end).contains(t))
        .collect();
    let mut out = Vec::new();
    let Some(&(mut t0, mut e0)) = inside.first() else {
        return out;
    };
    for &(t, e) in inside.iter().skip(1) {
        if t - t0 >= CPU_CAP_STRETCH_S {
            out.push((t - t0, (e - e0) / (t - t0)));
            (t0, e0) = (t, e);
        }
    }
    out
}

/// What held `domain` back over the window `energy` was taken over, under `limit_w` (when a
/// limit was set), as `result.json` records it; `throttle` is the window's
/// [`throttle::throttling`] (both already computed for the result).
pub fn binding(
    t: &Telemetry,
    (energy, throttle): (&WindowEnergy, &[throttle::Throttle]),
    domain: &str,
    limit_w: Option<f64>,
) -> Option<BindingRecord> {
    let (start, end) = (energy.start_s, energy.end_s);
    let s = t.series.iter().find(|s| s.domain.name == domain)?;
    let de = energy.domains.iter().find(|d| d.name == domain);
    let mut b = BindingRecord {
        domain: domain.to_string(),
        power_limit_w: limit_w,
        mean_power_w: de.map(|d| d.avg_power_w),
        peak_power_w: de.and_then(|d| d.peak_power_w),
        ..BindingRecord::default()
    };
    let in_window = |i: usize| s.t_s.get(i).is_some_and(|t| (start..=end).contains(t));
    b.mean_sm_clock_mhz = mean_finite(
        (0..s.len())
            .filter(|&i| in_window(i))
            .filter_map(|i| s.sm_clock_mhz.get(i).map(|v| f64::from(*v))),
    );
    if let Some(th) = throttle.iter().find(|th| th.domain == domain) {
        b.power_cap_share = share(th.power_cap_s, th.observed_s);
        b.thermal_share = share(th.thermal_s, th.observed_s);
        b.hw_slowdown_share = share(th.hw_slowdown_s, th.observed_s);
        b.clock_setting_share = share(th.clock_setting_s, th.observed_s);
    } else if let Some(limit) = limit_w.filter(|l| *l > 0.0) {
        let powers = stretch_powers(s, start, end);
        let whole: f64 = powers.iter().map(|(dt, _)| dt).sum();
        let capped: f64 = powers
            .iter()
            .filter(|(_, p)| *p >= CPU_CAP_SHARE * limit)
            .map(|(dt, _)| dt)
            .sum();
        b.power_cap_share = share(capped, whole);
    }
    b.binding = b.power_cap_share.is_some_and(|s| s > 0.0)
        || b.clock_setting_share.is_some_and(|s| s > 0.0);
    Some(b)
}
