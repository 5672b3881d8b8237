//! The energy parts of a result: per-domain records, the breakdown with its baseline, the
//! per-process entry, and throttling — all read from the window's one
//! [`llem_energy::WindowSummary`].

use llem_energy::baseline::BaselineOrigin;
use llem_energy::{DomainKind, Telemetry, WindowEnergy};
use llem_results::result::{
    DomainEnergyRecord, EnergyBreakdown, ProcessResult, ThermalThrottleInfo,
};

use super::Measured;

fn name_of<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

/// One record per measured domain, as `energy_breakdown.domains` lists them.
pub(super) fn domain_records(window: &WindowEnergy) -> Vec<DomainEnergyRecord> {
    window
        .domains
        .iter()
        .map(|d| DomainEnergyRecord {
            name: d.name.clone(),
            kind: name_of(&d.kind),
            sensor: name_of(&d.sensor),
            energy_j: d.energy_j,
            energy_source: d.energy_source.as_str().into(),
            counter_j: d.counter_j,
            integrated_j: d.integrated_j,
            disagreement: d.disagreement,
            avg_power_w: d.avg_power_w,
            peak_power_w: d.peak_power_w,
            n_samples: d.n_samples,
        })
        .collect()
}

/// Energy of every domain of `kind`, J.
pub(super) fn kind_j(window: &WindowEnergy, kind: DomainKind) -> f64 {
    window
        .domains
        .iter()
        .filter(|d| d.kind == kind)
        .fold(0.0, |a, d| a + d.energy_j)
}

/// Energy of each GPU, J (`energy_per_device_j`); null when no GPU was measured.
pub(super) fn per_gpu_j(window: &WindowEnergy) -> Option<Vec<f64>> {
    let gpu_j: Vec<f64> = window
        .domains
        .iter()
        .filter(|d| d.kind == DomainKind::Gpu)
        .map(|d| d.energy_j)
        .collect();
    (!gpu_j.is_empty()).then_some(gpu_j)
}

/// `energy_breakdown`: raw and adjusted energy, the baseline and how it was obtained.
pub(super) fn breakdown(
    m: &Measured<'_>,
    window: &WindowEnergy,
    adjusted_j: Option<f64>,
) -> EnergyBreakdown {
    EnergyBreakdown {
        raw_j: window.total_j,
        adjusted_j,
        baseline_power_w: m.baseline.map(|b| b.record.total_power_w),
        baseline_method: m.baseline.map(|b| {
            let how = match b.origin {
                BaselineOrigin::Fresh => "measured",
                BaselineOrigin::Cached => "cached",
                BaselineOrigin::Validated => "cached, spot-checked",
                BaselineOrigin::Remeasured => "re-measured after drift",
            };
            format!("{} ({how})", m.request.config.baseline.strategy)
        }),
        baseline_timestamp: m
            .baseline
            .map(|b| llem_results::time::iso8601_utc(b.record.measured_at_unix_s)),
        baseline_cache_age_sec: m.baseline.and_then(|b| b.age_s),
        domains: domain_records(window),
    }
}

/// The one process of an in-process or single-server run.
pub(super) fn process_result(
    m: &Measured<'_>,
    window: &WindowEnergy,
    (input, output): (u64, u64),
    duration: f64,
) -> ProcessResult {
    ProcessResult {
        process_index: 0,
        gpu_id: (m.offloaded() && !m.gpus.is_empty()).then_some(0),
        input_tokens: input,
        output_tokens: output,
        inference_time_sec: duration,
        energy_j: window.total_j,
        gpu_energy_j: kind_j(window, DomainKind::Gpu),
        cpu_energy_j: kind_j(window, DomainKind::CpuPackage),
        ram_energy_j: kind_j(window, DomainKind::Dram),
    }
}

pub(super) fn throttle_info(
    t: &Telemetry,
    start: f64,
    end: f64,
    throttle: &[llem_energy::throttle::Throttle],
) -> ThermalThrottleInfo {
    use llem_energy::throttle::{
        HW_POWER_BRAKE, HW_SLOWDOWN, HW_THERMAL, SW_POWER_CAP, SW_THERMAL,
    };
    let mut info = ThermalThrottleInfo::default();
    for s in &t.series {
        for i in 0..s.len() {
            let Some(&ts) = s.t_s.get(i) else { continue };
            if ts < start || ts > end {
                continue;
            }
            if let Some(temp) = s.temperature_c.get(i).copied().filter(|v| !v.is_nan()) {
                let temp = f64::from(temp);
                info.max_temperature_c = Some(info.max_temperature_c.map_or(temp, |m| m.max(temp)));
            }
            let Some(bits) = s.throttle_reasons(i) else {
                continue;
            };
            info.sw_thermal |= bits & SW_THERMAL != 0;
            info.hw_thermal |= bits & HW_THERMAL != 0;
            info.hw_power |= bits & (HW_POWER_BRAKE | HW_SLOWDOWN) != 0;
            info.power |= bits & (SW_POWER_CAP | HW_POWER_BRAKE) != 0;
            if bits & (SW_THERMAL | HW_THERMAL | SW_POWER_CAP | HW_POWER_BRAKE | HW_SLOWDOWN) != 0 {
                info.throttle_timestamps.push(ts);
            }
        }
    }
    info.thermal = info.sw_thermal || info.hw_thermal;
    info.throttle_duration_sec = throttle
        .iter()
        .map(|th| th.thermal_s.max(th.power_cap_s).max(th.hw_slowdown_s))
        .fold(0.0, f64::max);
    info.detected = info.thermal || info.power || info.hw_power;
    info
}
