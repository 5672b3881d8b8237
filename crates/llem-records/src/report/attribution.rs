//! The report's attribution section: where each configuration's window energy went
//! (prefill, decode, time between passes: the mean over its runs, as a stacked bar beside the
//! numbers) and the distribution of energy per request (a CDF from the first run of each
//! configuration's `requests.parquet`).

use std::fmt::Write;

use super::svg::{self, Chart, Series, Style, esc};
use super::{MAX_CDF_SERIES, cdf, figure, per_request};
use crate::compare::Configuration;
use crate::run::LlmRun;

/// Mean of `f` over the runs that have it.
fn mean_of(c: &Configuration, f: impl Fn(&LlmRun) -> Option<f64>) -> Option<f64> {
    let v: Vec<f64> = c
        .runs
        .iter()
        .filter_map(f)
        .filter(|x| x.is_finite())
        .collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// A bar of the three parts, 240 px wide.
fn bar(parts: [f64; 3]) -> String {
    let total: f64 = parts.iter().sum();
    let mut s = String::from("<svg width=\"240\" height=\"12\" role=\"img\">");
    let mut x = 0.0;
    for (i, p) in parts.iter().enumerate() {
        let w = if total > 0.0 { p / total * 240.0 } else { 0.0 };
        let _ = write!(
            s,
            "<rect x=\"{x:.1}\" y=\"0\" width=\"{w:.1}\" height=\"12\" fill=\"{}\"/>",
            svg::color(i)
        );
        x += w;
    }
    s.push_str("</svg>");
    s
}

/// Energy of each successful request of `r` with an attribution, J.
fn request_energies(r: &LlmRun) -> Option<Vec<f64>> {
    per_request(r, |q| q.energy.map(|e| e.energy_j))
}

/// The section; nothing when no configuration has an attribution.
pub(super) fn section(h: &mut String, configs: &[Configuration]) {
    let mut rows = String::new();
    let mut without = 0usize;
    for c in configs {
        let x = |f: fn(&LlmRun) -> Option<f64>| mean_of(c, f);
        let (Some(p), Some(d), Some(i)) = (
            x(|r| r.extra.prefill_energy_joules),
            x(|r| r.extra.decode_energy_joules),
            x(|r| r.extra.idle_energy_joules),
        ) else {
            without += 1;
            continue;
        };
        let total = (p + d + i).max(f64::MIN_POSITIVE);
        let opt = |v: Option<f64>| v.map_or_else(|| "—".to_string(), |v| format!("{v:.3}"));
        let difference = match (
            x(|r| r.extra.difference_prefill_energy_joules),
            x(|r| r.extra.difference_decode_energy_joules),
        ) {
            (Some(dp), Some(dd)) => format!("{dp:.2} / {dd:.2}"),
            _ => "—".into(),
        };
        let _ = write!(
            rows,
            "<tr><td class=\"t\">{}</td><td>{p:.2}</td><td>{:.0} %</td><td>{d:.2}</td><td>{:.0} %</td><td>{i:.2}</td><td>{difference}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"t\">{}</td></tr>",
            esc(&c.label),
            p / total * 100.0,
            d / total * 100.0,
            opt(x(|r| r.energy_per_request_joules)),
            opt(x(|r| r.extra.energy_per_request_p50_joules)),
            opt(x(|r| r.extra.energy_per_request_p99_joules)),
            bar([p, d, i]),
        );
    }
    if rows.is_empty() {
        return;
    }
    let _ = write!(
        h,
        "<section id=\"attribution\"><h2>Where the energy went</h2><p>The window's energy of each configuration (mean over its runs), split by the engine's own log of its passes (embedded and transformers engines) or, for servers, by the requests in flight: prefill (<span style=\"color:{}\">■</span>), decode (<span style=\"color:{}\">■</span>) and the time between passes or with nothing in flight (<span style=\"color:{}\">■</span>). Energy per request: the requests wholly inside the window, each with its share of the time between passes, so they add up to the window.{}</p>",
        svg::color(0),
        svg::color(1),
        svg::color(2),
        if without > 0 {
            format!(
                " {without} configuration(s) have no split (results from before llem attributed energy, or from other tools)."
            )
        } else {
            String::new()
        }
    );
    let _ = write!(
        h,
        "<table><tr><th class=\"t\">configuration</th><th>prefill J</th><th>share</th><th>decode J</th><th>share</th><th>idle J</th><th>difference method: prefill / decode J</th><th>J / request</th><th>p50</th><th>p99</th><th class=\"t\">split</th></tr>{rows}</table>"
    );
    let series: Vec<Series> = configs
        .iter()
        .filter_map(|c| Some((c, request_energies(c.runs.get(0)?)?)))
        .take(MAX_CDF_SERIES)
        .enumerate()
        .map(|(k, (c, mut v))| Series {
            name: c.label.clone(),
            points: cdf(&mut v),
            style: Style::Step,
            color: svg::color(k),
            shape: svg::shape(k),
            ..Series::default()
        })
        .collect();
    if !series.is_empty() {
        h.push_str(&figure(&Chart::new(
            "cdf-request-energy",
            "Energy per request, CDF (first run of each configuration)",
            ("energy per request (J)", "fraction of requests"),
            series,
        )));
    }
    h.push_str("</section>");
}
