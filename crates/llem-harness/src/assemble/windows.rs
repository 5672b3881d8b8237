//! Methodology `windows`: the figures of each window after the ramp, their statistics across
//! windows, and whether the windows agree closely enough for the cell to be valid.

use llem_config::Methodology;
use llem_energy::WindowEnergy;
use llem_results::result::{WindowResult, WindowsResult};
use llem_results::stats;

use super::Measured;
use super::energy::Energies;
use crate::window::tokens_in;

/// The windows of `m`'s run; null unless its methodology is `windows` and it was applied.
pub(super) fn windows(m: &Measured<'_>) -> Option<WindowsResult> {
    let cfg = m.request.config;
    if cfg.measurement.methodology != Methodology::Windows || m.methodology != "windows" {
        return None;
    }
    let w = cfg.measurement.windows_or_default();
    let first = m.workload_span.0 + w.ramp_exclusion_seconds;
    let each: Vec<WindowResult> = (0..w.n_windows)
        .map(|i| {
            let start = first + f64::from(i) * w.window_seconds;
            let summary = llem_energy::window(m.telemetry, start, start + w.window_seconds, None);
            one(m, i, &summary.energy, w.window_seconds)
        })
        .collect();
    let figure =
        |f: fn(&WindowResult) -> Option<f64>| -> Option<Vec<f64>> { each.iter().map(f).collect() };
    let mj = figure(|x| x.mj_per_tok);
    let mj_stats = mj.as_deref().and_then(stats::describe);
    let invalid_reason = match (&mj, &mj_stats) {
        (None, _) => {
            let missing: Vec<String> = each
                .iter()
                .filter(|x| x.mj_per_tok.is_none())
                .map(|x| x.index.to_string())
                .collect();
            format!(
                "window {} has no energy per token (no energy measured, or no token)",
                missing.join(", ")
            )
        }
        (Some(_), Some(s)) => match s.cv {
            Some(cv) if cv <= w.cov_threshold => String::new(),
            Some(cv) => format!(
                "the windows' energy per token varies by CoV {cv:.3}, above {}",
                w.cov_threshold
            ),
            None => "the windows' energy per token has no CoV (a zero mean)".into(),
        },
        (Some(_), None) => "the windows' energy per token is not finite".into(),
    };
    Some(WindowsResult {
        n_windows: w.n_windows,
        window_seconds: w.window_seconds,
        ramp_exclusion_seconds: w.ramp_exclusion_seconds,
        cov_threshold: w.cov_threshold,
        valid: invalid_reason.is_empty(),
        invalid_reason,
        mj_per_tok: mj_stats,
        tokens_per_second: figure(|x| Some(x.tokens_per_second))
            .as_deref()
            .and_then(stats::describe),
        avg_power_w: figure(|x| x.avg_power_w)
            .as_deref()
            .and_then(stats::describe),
        windows: each,
    })
}

/// Window `index` of `seconds` from its energy.
fn one(m: &Measured<'_>, index: u32, energy: &WindowEnergy, seconds: f64) -> WindowResult {
    let (start, end) = (energy.start_s, energy.end_s);
    let head = Energies::of(m, energy).head;
    let (_, output) = tokens_in(m.records, start, end);
    let requests_completed = m
        .records
        .iter()
        .filter(|r| r.success && r.end_s >= start && r.end_s < end)
        .count() as u64;
    WindowResult {
        index,
        start_s: start,
        end_s: end,
        energy_j: head.energy_j,
        energy_source: head.energy_source.map(|s| s.as_str().to_string()),
        output_tokens: output,
        requests_completed,
        mj_per_tok: head
            .energy_j
            .filter(|_| output > 0)
            .map(|j| j / output as f64 * 1000.0),
        tokens_per_second: output as f64 / seconds,
        avg_power_w: head.energy_j.map(|j| j / seconds),
    }
}

/// The warning of an invalid windows cell: kept, and said.
pub(super) fn warning(w: &WindowsResult) -> Option<String> {
    (!w.valid).then(|| {
        format!(
            "methodology windows: not valid, {}; the result is kept with windows.valid = false",
            w.invalid_reason
        )
    })
}
