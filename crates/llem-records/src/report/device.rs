//! The report's device-settings section: for the runs measured under `device:` settings, the
//! energy and speed each setting gave, with what bound (the power cap's share of the window,
//! the clock setting's, the mean power against the limit and the SM clock): the study-level
//! view of a power-limit or clock sweep.

use std::fmt::Write;

use serde_json::Value;

use super::llem_result;
use super::svg::esc;
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

/// The section; nothing when no run set device settings.
pub(super) fn section(h: &mut String, runs: &crate::Runs) {
    let mut body = String::new();
    for r in runs.iter() {
        if let Some(v) = llem_result(r) {
            body.push_str(&rows(&compare::label(r), &v));
        }
    }
    if body.is_empty() {
        return;
    }
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
         <th>binding</th></tr>{body}</table></section>"
    );
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
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
}
