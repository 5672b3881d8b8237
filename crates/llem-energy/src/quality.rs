//! Warnings about how far a measurement can be trusted.

use crate::sensor::EnergySource;
use crate::telemetry::{Telemetry, WindowEnergy};
use crate::throttle::Throttle;

/// Shortest window whose energy is not dominated by sampling and edge error, s.
pub const MIN_WINDOW_S: f64 = 10.0;
/// Fewest samples per domain for a trustworthy integral.
pub const MIN_SAMPLES: usize = 10;
/// Temperature change within a window that signals thermal drift, °C.
pub const MAX_TEMPERATURE_DRIFT_C: f32 = 10.0;

/// Everything that weakens the measurement of `window`.
pub fn warnings(t: &Telemetry, window: &WindowEnergy, throttle: &[Throttle]) -> Vec<String> {
    let mut out = Vec::new();
    let d = window.duration_s();
    if d < MIN_WINDOW_S {
        out.push(format!(
            "the measured window is {d:.1} s; under {MIN_WINDOW_S:.0} s, sampling and edge \
             effects weigh on the energy"
        ));
    }
    if let Some(min) = window.domains.iter().map(|d| d.n_samples).min()
        && min < MIN_SAMPLES
    {
        out.push(format!(
            "only {min} samples in the window (fewer than {MIN_SAMPLES}); use a shorter \
                 --interval or a longer run"
        ));
    }
    for s in &t.series {
        let temps: Vec<f32> = s
            .t_s
            .iter()
            .zip(&s.temperature_c)
            .filter(|(ts, v)| **ts >= window.start_s && **ts <= window.end_s && !v.is_nan())
            .map(|(_, v)| *v)
            .collect();
        if let (Some(lo), Some(hi)) = (
            temps.iter().copied().reduce(f32::min),
            temps.iter().copied().reduce(f32::max),
        ) && hi - lo > MAX_TEMPERATURE_DRIFT_C
        {
            out.push(format!(
                "{}: temperature drifted {:.0} °C during the window ({lo:.0} -> {hi:.0} °C); \
                     warm up longer for steady-state numbers",
                s.domain.name,
                hi - lo
            ));
        }
        if s.errors > 0 {
            out.push(format!(
                "{}: {} reads failed (first: {})",
                s.domain.name,
                s.errors,
                s.first_error.as_deref().unwrap_or("unknown")
            ));
        }
        out.extend(s.notes.iter().cloned());
    }
    if t.stats.long_gaps > 0 {
        out.push(format!(
            "{} gaps between samples exceeded twice the {:.0} ms interval (longest {:.0} ms): \
             the machine was too busy for the sampler",
            t.stats.long_gaps,
            t.stats.interval_s * 1000.0,
            t.stats.max_gap_s * 1000.0
        ));
    }
    let estimated: Vec<&str> = window
        .domains
        .iter()
        .filter(|d| d.energy_source == EnergySource::Estimate)
        .map(|d| d.name.as_str())
        .collect();
    if !estimated.is_empty() {
        out.push(format!(
            "energy of {} is an estimate (CPU: TDP x utilisation; DRAM: per GiB), not a \
             measurement, with no bound",
            estimated.join(", ")
        ));
    }
    for th in throttle.iter().filter(|t| t.any()) {
        out.push(format!(
            "{} was throttled: thermal {:.1} s, power cap {:.1} s, hardware slowdown {:.1} s",
            th.domain, th.thermal_s, th.power_cap_s, th.hw_slowdown_s
        ));
    }
    out.extend(window.warnings.iter().cloned());
    out
}
