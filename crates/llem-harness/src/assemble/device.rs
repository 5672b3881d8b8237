//! `result.json` `device_settings`: what was set, read back and put back, and whether it held
//! each device back during the window; a cap that never engaged is said.

use llem_energy::Telemetry;
use llem_results::result::DeviceSettingsRecord;

use crate::device_settings::Restored;

/// The record of `d` over the window `window` summarises, with a warning per limit that
/// never acted.
pub(super) fn record(
    telemetry: &Telemetry,
    window: &llem_energy::WindowSummary,
    d: &Restored,
    warnings: &mut Vec<String>,
) -> DeviceSettingsRecord {
    let mut devices: Vec<&str> = d.records.iter().map(|r| r.device.as_str()).collect();
    devices.dedup();
    let mut binding = Vec::new();
    for device in devices {
        let limit = d
            .limits_w
            .iter()
            .find(|(name, _)| name == device)
            .map(|(_, w)| *w);
        let Some(b) = llem_energy::binding::binding(
            telemetry,
            (&window.energy, &window.throttle),
            device,
            limit,
        ) else {
            continue;
        };
        if let (Some(limit), Some(share)) = (limit, b.power_cap_share)
            && share == 0.0
        {
            warnings.push(format!(
                "device: the {limit} W power limit of {device} never engaged in the window \
                 (mean {} W, peak {} W): this run measures the device unconstrained, not the \
                 limit",
                fmt_w(b.mean_power_w),
                fmt_w(b.peak_power_w)
            ));
        }
        binding.push(b);
    }
    DeviceSettingsRecord {
        settings: d.records.clone(),
        restored: d.ok,
        binding,
    }
}

fn fmt_w(w: Option<f64>) -> String {
    w.map_or_else(|| "-".into(), |w| format!("{w:.1}"))
}
