//! The report's device-settings section: for the runs measured under `device:` settings, the
//! energy and speed each setting gave, with what bound (the power cap's share of the window,
//! the clock setting's, the mean power against the limit and the SM clock): the study-level
//! view of a power-limit or clock sweep.

use std::fmt::Write;

use serde_json::Value;

use super::svg::{self, Chart, Point, Series, esc};
use super::{figure, llem_result};
use crate::compare;

fn num(x: Option<f64>, digits: usize) -> String {
    x.filter(|v| v.is_finite())
        .map_or_else(|| "—".to_string(), |v| format!("{v:.digits$}"))
}

fn pct(x: Option<f64>) -> String {
    x.filter(|v| v.is_finite())
        .map_or_else(|| "—".to_string(), |v| format!("{:.0} %", v * 100.0))
}

/// One row per run and device: the settings asked for, then the figures.
pub(super) fn rows(label: &str, r: &Value) -> String {
    let Some(d) = r.get("device_settings").filter(|d| !d.is_null()) else {
        return String::new();
    };
    let f = |v: &Value, k: &str| v.get(k).and_then(Value::as_f64);
    let settings = d.get("settings").and_then(Value::as_array);
    let asked: Vec<String> = settings
        .into_iter()
        .flatten()
        .filter_map(|s| {
            Some(format!(
                "{} {} {}",
                s.get("device")?.as_str()?,
                s.get("setting")?.as_str()?,
                s.get("applied")?.as_str()?
            ))
        })
        .collect();
    let restored = d.get("restored").and_then(Value::as_bool) == Some(true);
    let ttft = r.get("latency_stats").and_then(|l| f(l, "ttft_median_ms"));
    let mut h = String::new();
    let binding = d.get("binding").and_then(Value::as_array);
    let empty = Vec::new();
    let devices = binding.unwrap_or(&empty);
    let n = devices.len().max(1);
    for (i, b) in devices
        .iter()
        .map(Some)
        .chain(std::iter::once(None))
        .take(n)
        .enumerate()
    {
        h.push_str("<tr>");
        if i == 0 {
            let _ = write!(
                h,
                "<td class=\"t\" rowspan=\"{n}\">{}</td><td class=\"t\" rowspan=\"{n}\">{}{}</td>\
                 <td rowspan=\"{n}\">{}</td><td rowspan=\"{n}\">{}</td><td rowspan=\"{n}\">{}</td>",
                esc(label),
                esc(&asked.join("; ")),
                if restored {
                    ""
                } else {
                    " <b>(NOT restored)</b>"
                },
                num(f(r, "mj_per_tok_total"), 2),
                num(f(r, "avg_tokens_per_second"), 1),
                num(ttft, 1),
            );
        }
        let g = |k: &str| b.and_then(|b| f(b, k));
        let _ = write!(
            h,
            "<td class=\"t\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(b.and_then(|b| b.get("domain")?.as_str()).unwrap_or("—")),
            num(g("power_limit_w"), 0),
            num(g("mean_power_w"), 1),
            pct(g("power_cap_share")),
            pct(g("clock_setting_share")),
            num(g("mean_sm_clock_mhz"), 0),
            match b.and_then(|b| b.get("binding")?.as_bool()) {
                Some(true) => "yes",
                Some(false) => "no",
                None => "—",
            },
        );
    }
    h
}

/// One run's place on the power-limit chart: (the other settings, limit W, `energy` mJ/tok,
/// whether the limit engaged); `None` without a power limit or that energy per token.
fn limit_point(r: &Value, energy: &str) -> Option<(String, f64, f64, bool)> {
    let d = r.get("device_settings").filter(|d| !d.is_null())?;
    let b = d
        .get("binding")?
        .as_array()?
        .iter()
        .find(|b| b.get("power_limit_w").and_then(Value::as_f64).is_some())?;
    let limit = b.get("power_limit_w")?.as_f64()?;
    let mj = r.get(energy)?.as_f64()?;
    let engaged = b
        .get("power_cap_share")
        .and_then(Value::as_f64)
        .is_some_and(|s| s > 0.0);
    let mut others: Vec<String> = d
        .get("settings")?
        .as_array()?
        .iter()
        .filter_map(|s| {
            let name = s.get("setting")?.as_str()?;
            let applied = s.get("applied")?.as_str()?;
            (!name.ends_with("power_limit_w")).then(|| format!("{name} {applied}"))
        })
        .collect();
    others.sort();
    others.dedup();
    let group = if others.is_empty() {
        "power limit only".to_string()
    } else {
        others.join(", ")
    };
    Some((group, limit, mj, engaged))
}

/// A run on the chart: (limit W, mJ/tok, whether the limit engaged).
type LimitPoint = (f64, f64, bool);

/// Energy per token against the power limit, a series per combination of the other settings;
/// hollow where the limit never engaged. The headline's energy where every run has one, else
/// the system's (a CPU engine's headline is the CPU's, which a GPU limit does not move);
/// `None` with fewer than two limits.
pub(super) fn limit_chart(results: &[Value]) -> Option<Chart> {
    let all = |key: &str| results.iter().all(|r| limit_point(r, key).is_some());
    let (key, label) = if all("mj_per_tok_total") {
        ("mj_per_tok_total", "mJ per output token")
    } else if all("system_mj_per_tok") {
        ("system_mj_per_tok", "mJ per output token (system)")
    } else {
        ("mj_per_tok_total", "mJ per output token")
    };
    let mut groups: Vec<(String, Vec<LimitPoint>)> = Vec::new();
    for (g, x, y, engaged) in results.iter().filter_map(|r| limit_point(r, key)) {
        match groups.iter_mut().find(|(name, _)| *name == g) {
            Some((_, pts)) => pts.push((x, y, engaged)),
            None => groups.push((g, vec![(x, y, engaged)])),
        }
    }
    let limits = groups
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.0.to_bits()));
    if limits.collect::<std::collections::BTreeSet<u64>>().len() < 2 {
        return None;
    }
    let mut series = Vec::new();
    for (k, (name, mut pts)) in groups.into_iter().enumerate() {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        for hollow in [false, true] {
            let points: Vec<Point> = pts
                .iter()
                .filter(|p| p.2 != hollow)
                .map(|p| Point {
                    x: p.0,
                    y: p.1,
                    ..Point::default()
                })
                .collect();
            if points.is_empty() {
                continue;
            }
            series.push(Series {
                name: if hollow {
                    format!("{name} (limit never engaged)")
                } else {
                    name.clone()
                },
                points,
                color: svg::color(k),
                shape: svg::shape(k),
                hollow,
                note: hollow.then(|| "the power limit never engaged in the window".into()),
                ..Series::default()
            });
        }
    }
    Some(Chart::new(
        "device-limit-energy",
        "Energy per token against the power limit",
        ("power limit (W)", label),
        series,
    ))
}

/// The section; nothing when no run set device settings.
pub(super) fn section(h: &mut String, runs: &crate::Runs) {
    let mut body = String::new();
    let mut results = Vec::new();
    for r in runs.iter() {
        if let Some(v) = llem_result(r) {
            body.push_str(&rows(&compare::label(r), &v));
            results.push(v);
        }
    }
    if body.is_empty() {
        return;
    }
    let chart = limit_chart(&results)
        .map(|c| figure(&c))
        .unwrap_or_default();
    let _ = write!(
        h,
        "<section id=\"device-settings\"><h2>Device settings</h2><p>Runs measured under \
         power limits, locked clocks or CPU frequency settings (<code>device:</code>), each \
         put back after its run. <i>Cap</i> is the share of the window the power limit held \
         the device back (GPUs: NVML's software power cap reason; CPU packages: power at 97 % \
         of the limit or more, over 100 ms stretches); <i>clock setting</i> the share its clocks were held by a \
         clock setting. A limit that never engaged measured the unconstrained device.</p>\
         <table><tr><th class=\"t\">configuration</th><th class=\"t\">settings</th>\
         <th>mJ/tok</th><th>tok/s</th><th>TTFT p50 ms</th><th class=\"t\">device</th>\
         <th>limit W</th><th>mean W</th><th>cap</th><th>clock setting</th><th>SM MHz</th>\
         <th>binding</th></tr>{body}</table>{chart}</section>"
    );
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn a_row_per_device_with_the_settings_and_what_bound() {
        let r = serde_json::json!({
            "mj_per_tok_total": 12.5, "avg_tokens_per_second": 100.0,
            "latency_stats": {"ttft_median_ms": 30.0},
            "device_settings": {
                "restored": false,
                "settings": [{"device": "gpu0", "setting": "gpu_power_limit_w",
                    "original": "700 W", "requested": "250 W", "applied": "250 W",
                    "restored": null}],
                "binding": [{"domain": "gpu0", "power_limit_w": 250.0, "mean_power_w": 249.6,
                    "power_cap_share": 0.98, "clock_setting_share": 0.0,
                    "mean_sm_clock_mhz": 1650.0, "binding": true}]
            }
        });
        let h = rows("limit=250", &r);
        assert!(h.contains("gpu0 gpu_power_limit_w 250 W"), "{h}");
        assert!(h.contains("NOT restored"), "{h}");
        assert!(
            h.contains("<td>98 %</td>") && h.contains("<td>yes</td>"),
            "{h}"
        );
        assert!(h.contains(">12.50</td>"), "{h}");
        assert!(rows("x", &serde_json::json!({})).is_empty());
    }

    fn run(limit: f64, clocks: &str, mj: f64, cap: f64) -> Value {
        serde_json::json!({
            "mj_per_tok_total": mj,
            "device_settings": {
                "restored": true,
                "settings": [
                    {"device": "gpu0", "setting": "gpu_power_limit_w", "applied": format!("{limit} W")},
                    {"device": "gpu0", "setting": "gpu_locked_clocks_mhz", "applied": clocks}
                ],
                "binding": [{"domain": "gpu0", "power_limit_w": limit, "power_cap_share": cap}]
            }
        })
    }

    #[test]
    fn the_chart_has_a_series_per_clock_setting_and_hollow_points_where_the_cap_never_bit() {
        let runs = [
            run(250.0, "900-1200 MHz", 10.0, 0.0),
            run(400.0, "900-1200 MHz", 10.1, 0.0),
            run(250.0, "1980 MHz", 8.0, 0.95),
            run(400.0, "1980 MHz", 9.0, 0.0),
        ];
        let c = limit_chart(&runs).unwrap();
        let named: Vec<(&str, usize, bool)> = c
            .series
            .iter()
            .map(|s| (s.name.as_str(), s.points.len(), s.hollow))
            .collect();
        assert_eq!(
            named,
            [
                (
                    "gpu_locked_clocks_mhz 900-1200 MHz (limit never engaged)",
                    2,
                    true
                ),
                ("gpu_locked_clocks_mhz 1980 MHz", 1, false),
                (
                    "gpu_locked_clocks_mhz 1980 MHz (limit never engaged)",
                    1,
                    true
                ),
            ]
        );
        assert_eq!(
            (c.series[1].points[0].x, c.series[1].points[0].y),
            (250.0, 8.0)
        );
        // One limit is no axis.
        assert!(limit_chart(&runs[..1]).is_none());
    }
}
