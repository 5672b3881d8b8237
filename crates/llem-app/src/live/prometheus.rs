//! The Prometheus text exposition (format 0.0.4) of the live state: OpenTelemetry's names
//! as Prometheus spells them (dots to underscores, the unit and `_total` appended).

use std::fmt::Write as _;

use super::State;
use super::histogram::Histogram;

/// A label value, escaped.
fn esc(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A sample value.
fn num(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v}")
    }
}

/// `{k="v",...}` of `labels`.
fn labels(labels: &[(&str, &str)]) -> String {
    let inner: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", esc(v)))
        .collect();
    format!("{{{}}}", inner.join(","))
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn histogram(out: &mut String, name: &str, base: &[(&str, &str)], h: &Histogram) {
    let mut cumulative = 0;
    for (i, c) in h.counts().iter().enumerate() {
        cumulative += c;
        let le = h
            .bounds()
            .get(i)
            .map_or_else(|| "+Inf".to_string(), |b| num(*b));
        let mut l = base.to_vec();
        l.push(("le", &le));
        let _ = writeln!(out, "{name}_bucket{} {cumulative}", labels(&l));
    }
    let _ = writeln!(out, "{name}_sum{} {}", labels(base), num(h.sum()));
    let _ = writeln!(out, "{name}_count{} {}", labels(base), h.count());
}

/// The whole exposition.
pub(crate) fn render(s: &State) -> String {
    let mut out = String::new();
    let devices = s.devices();
    let (node, parts): (Vec<_>, Vec<_>) = devices.iter().partition(|d| d.hw_type.is_none());

    header(
        &mut out,
        "hw_energy_joules_total",
        "counter",
        "Energy the device used while llem measured it (OpenTelemetry hw.energy), J.",
    );
    for d in &parts {
        let l = labels(&[("hw_id", &d.id), ("hw_type", d.hw_type.unwrap_or(""))]);
        let _ = writeln!(out, "hw_energy_joules_total{l} {}", num(d.energy_j));
    }
    header(
        &mut out,
        "hw_power_watts",
        "gauge",
        "The device's latest power (OpenTelemetry hw.power), W.",
    );
    for d in parts.iter().filter(|d| d.power_w.is_some()) {
        let l = labels(&[("hw_id", &d.id), ("hw_type", d.hw_type.unwrap_or(""))]);
        let _ = writeln!(
            out,
            "hw_power_watts{l} {}",
            num(d.power_w.unwrap_or(f64::NAN))
        );
    }
    if !node.is_empty() {
        header(
            &mut out,
            "hw_host_energy_joules_total",
            "counter",
            "Energy the whole node used while llem measured it, from its BMC or wall meter \
             (OpenTelemetry hw.host.energy), J.",
        );
        for d in &node {
            let l = labels(&[("hw_id", &d.id)]);
            let _ = writeln!(out, "hw_host_energy_joules_total{l} {}", num(d.energy_j));
        }
        header(
            &mut out,
            "hw_host_power_watts",
            "gauge",
            "The whole node's latest power (OpenTelemetry hw.host.power), W.",
        );
        for d in node.iter().filter(|d| d.power_w.is_some()) {
            let l = labels(&[("hw_id", &d.id)]);
            let _ = writeln!(
                out,
                "hw_host_power_watts{l} {}",
                num(d.power_w.unwrap_or(f64::NAN))
            );
        }
    }

    let hist =
        |out: &mut String,
         name: &str,
         help: &str,
         pick: &dyn Fn(&super::RequestStats) -> Vec<(&'static str, Histogram)>| {
            header(out, name, "histogram", help);
            for (label, r) in &s.requests {
                for (token_type, h) in pick(r) {
                    let mut l = vec![
                        ("llem_config", label.as_str()),
                        ("gen_ai_request_model", r.model.as_str()),
                    ];
                    if !token_type.is_empty() {
                        l.push(("gen_ai_token_type", token_type));
                    }
                    histogram(out, name, &l, &h);
                }
            }
        };
    hist(
        &mut out,
        "gen_ai_client_token_usage",
        "Tokens per measured request, input and output (OpenTelemetry gen_ai.client.token.usage).",
        &|r| {
            vec![
                ("input", r.input_tokens.clone()),
                ("output", r.output_tokens.clone()),
            ]
        },
    );
    hist(
        &mut out,
        "gen_ai_server_time_to_first_token_seconds",
        "Time to first token of the measured requests (OpenTelemetry gen_ai.server.time_to_first_token), s.",
        &|r| vec![("", r.ttft_s.clone())],
    );
    hist(
        &mut out,
        "gen_ai_server_time_per_output_token_seconds",
        "Time per output token after the first, of the measured requests (OpenTelemetry gen_ai.server.time_per_output_token), s.",
        &|r| vec![("", r.tpot_s.clone())],
    );
    header(
        &mut out,
        "llem_requests_total",
        "counter",
        "Measured requests by outcome.",
    );
    for (label, r) in &s.requests {
        for (outcome, n) in [("success", r.succeeded), ("failure", r.failed)] {
            let l = labels(&[("llem_config", label), ("outcome", outcome)]);
            let _ = writeln!(out, "llem_requests_total{l} {n}");
        }
    }
    header(
        &mut out,
        "llem_energy_per_output_token_joules",
        "gauge",
        "Energy of the measured devices (the node excepted) over the measurement window so \
         far, per output token, J: the running figure, not the result's (which has its scope, \
         baseline and bound).",
    );
    let per_token = s.energy_per_token();
    for (label, (j, _)) in &per_token {
        let l = labels(&[("llem_config", label)]);
        let _ = writeln!(out, "llem_energy_per_output_token_joules{l} {}", num(*j));
    }
    header(
        &mut out,
        "llem_energy_per_output_token_bound_joules",
        "gauge",
        "How far the running J/token may be off because the energy at each end of the window \
         was read up to one sampler tick (plus a cell's report interval) late: the power then \
         over that time, per output token, J.",
    );
    for (label, (_, bound)) in &per_token {
        let l = labels(&[("llem_config", label)]);
        let _ = writeln!(
            out,
            "llem_energy_per_output_token_bound_joules{l} {}",
            num(*bound)
        );
    }
    header(
        &mut out,
        "llem_run_info",
        "gauge",
        "What llem runs: the study or experiment, the configuration and its phase (1).",
    );
    let (label, hash) = s
        .config
        .as_ref()
        .map_or(("-", "-"), |c| (c.0.as_str(), c.1.as_str()));
    let phase = s.phase.as_deref().unwrap_or("-");
    let l = labels(&[
        ("kind", s.run_kind),
        ("name", &s.name),
        ("llem_config", label),
        ("config_hash", hash),
        ("phase", phase),
    ]);
    let _ = writeln!(out, "llem_run_info{l} 1");
    if s.run_kind == "study" {
        header(
            &mut out,
            "llem_study_cells",
            "gauge",
            "The study's cells by state (planned counts them all).",
        );
        for (state, n) in [
            ("planned", s.cells_planned),
            ("completed", s.cells_completed),
            ("failed", s.cells_failed),
        ] {
            let _ = writeln!(out, "llem_study_cells{} {n}", labels(&[("state", state)]));
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped_and_buckets_cumulative() {
        assert_eq!(esc("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        let mut h = Histogram::new(&[1.0, 2.0]);
        h.observe(0.5);
        h.observe(1.5);
        let mut out = String::new();
        histogram(&mut out, "x", &[("k", "v")], &h);
        assert!(out.contains("x_bucket{k=\"v\",le=\"1\"} 1\n"), "{out}");
        assert!(out.contains("x_bucket{k=\"v\",le=\"2\"} 2\n"), "{out}");
        assert!(out.contains("x_bucket{k=\"v\",le=\"+Inf\"} 2\n"), "{out}");
        assert!(out.contains("x_count{k=\"v\"} 2\n"), "{out}");
    }
}
