//! `llem report`: one self-contained HTML file (inline SVG and CSS, no script, nothing
//! fetched) with the study summary, Pareto frontiers of energy per token against
//! throughput and against tail latency, a power timeline per run with its measurement
//! window shaded, latency CDFs, a table of every run with its warnings, and ML.ENERGY's
//! diffusion runs when the directory holds any; a search study's answer and candidates first.

mod attribution;
mod conversations;
mod device;
mod diffusion;
mod figure;
mod load;
mod node_power;
mod nodes;
mod place;
mod search;
pub(crate) mod svg;

use std::fmt::Write as _;
use std::path::Path;

use crate::compare::{self, Configuration, METRICS};
use crate::extract::power_trace;
use crate::table::short_number;
use crate::{LlmRun, Runs};
use figure::figure;
use llem_results::stats::SPREAD_RULE;
use svg::{Chart, Point, Series, Style, esc};

/// Most power timelines drawn (one per run, in table order); the table lists every run.
pub const MAX_TIMELINES: usize = 24;
/// Most configurations in one CDF chart.
pub const MAX_CDF_SERIES: usize = 8;

/// Indices of the Pareto-optimal points among `(x, y)`: y is minimised, x maximised when
/// `maximize_x`, else minimised. Returned in increasing x.
pub fn pareto_front(points: &[(f64, f64)], maximize_x: bool) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..points.len())
        .filter(|i| {
            points
                .get(*i)
                .is_some_and(|(x, y)| x.is_finite() && y.is_finite())
        })
        .collect();
    let key = |i: &usize| points.get(*i).copied().unwrap_or_default();
    // Best x first; among equal x, lowest y first.
    idx.sort_by(|a, b| {
        let (ax, ay) = key(a);
        let (bx, by) = key(b);
        let ord = if maximize_x {
            bx.total_cmp(&ax)
        } else {
            ax.total_cmp(&bx)
        };
        ord.then(ay.total_cmp(&by))
    });
    let mut best_y = f64::INFINITY;
    let mut front = Vec::new();
    for i in idx {
        let (_, y) = key(&i);
        if y < best_y {
            best_y = y;
            front.push(i);
        }
    }
    front.sort_by(|a, b| key(a).0.total_cmp(&key(b).0));
    front
}

/// The whisker of a configuration's metric: its interval by the one rule tables use too.
fn whisker(values: &[f64]) -> Option<(f64, f64)> {
    llem_results::stats::spread(values).bounds()
}

/// Whether every run of a configuration failed a stability rule, and the first reason.
fn unstable(c: &Configuration) -> Option<String> {
    c.runs.iter().all(|r| !r.is_stable).then(|| {
        c.runs
            .get(0)
            .map(|r| r.unstable_reason.clone())
            .unwrap_or_default()
    })
}

fn pareto_chart(
    id: &str,
    title: &str,
    configs: &[Configuration],
    x_metric: &str,
    x_label: &str,
    maximize_x: bool,
) -> Option<Chart> {
    let metric = |n: &str| METRICS.iter().find(|m| m.name == n);
    let (xm, ym) = (metric(x_metric)?, metric("mj_per_tok_total")?);
    let mut pts = Vec::new();
    let mut names = Vec::new();
    let mut why: Vec<Option<String>> = Vec::new();
    for c in configs {
        let (Some(sx), Some(sy)) = (c.stats(xm), c.stats(ym)) else {
            continue;
        };
        let values =
            |m: &compare::Metric| -> Vec<f64> { c.runs.iter().filter_map(m.get).collect() };
        pts.push(Point {
            x: sx.mean,
            y: sy.mean,
            x_ci: whisker(&values(xm)),
            y_ci: whisker(&values(ym)),
        });
        names.push(c.label.clone());
        why.push(unstable(c));
    }
    if pts.is_empty() {
        return None;
    }
    // The frontier joins stable configurations only (all of them when none is stable): an
    // unstable one would otherwise win by a measurement that cannot be trusted.
    let any_stable = why.iter().any(Option::is_none);
    let eligible: Vec<usize> = (0..pts.len())
        .filter(|i| !any_stable || why.get(*i).is_some_and(Option::is_none))
        .collect();
    let candidates: Vec<Point> = eligible
        .iter()
        .filter_map(|i| pts.get(*i).copied())
        .collect();
    let mut series: Vec<Series> = pts
        .iter()
        .zip(&names)
        .zip(&why)
        .enumerate()
        .map(|(i, ((p, n), w))| Series {
            name: n.clone(),
            points: vec![*p],
            style: Style::Markers,
            color: svg::color(i),
            shape: svg::shape(i),
            hollow: w.is_some(),
            note: w.as_ref().map(|r| format!("unstable: {r}")),
        })
        .collect();
    series.push(frontier(&candidates, maximize_x));
    Some(Chart::new(
        id,
        title,
        (x_label, "energy per output token (mJ)"),
        series,
    ))
}

/// The line joining the Pareto-optimal `points` (lowest y; highest x when `maximize_x`).
fn frontier(points: &[Point], maximize_x: bool) -> Series {
    let xy: Vec<(f64, f64)> = points.iter().map(|p| (p.x, p.y)).collect();
    Series {
        name: "Pareto frontier".into(),
        points: pareto_front(&xy, maximize_x)
            .into_iter()
            .filter_map(|i| points.get(i).copied())
            .collect(),
        style: Style::Line,
        color: "#444444".into(),
        ..Series::default()
    }
}

fn cdf(values: &mut [f64]) -> Vec<Point> {
    values.sort_by(f64::total_cmp);
    let n = values.len() as f64;
    // At most ~400 steps per curve keeps the page small for long runs.
    let stride = (values.len() / 400).max(1);
    values
        .iter()
        .enumerate()
        .filter(|(i, _)| i % stride == 0 || *i + 1 == values.len())
        .map(|(i, v)| Point {
            x: *v,
            y: (i + 1) as f64 / n,
            ..Point::default()
        })
        .collect()
}

/// `f` of every successful request in the run's `requests.parquet` that has it; none when
/// the file is missing or no request has it.
fn per_request(
    r: &LlmRun,
    f: impl Fn(&llem_results::RequestRecord) -> Option<f64>,
) -> Option<Vec<f64>> {
    let p = Path::new(&r.results_path).with_file_name(llem_results::layout::REQUESTS);
    let reqs = llem_results::requests::read_requests(&p).ok()?;
    let v: Vec<f64> = reqs.iter().filter(|q| q.success).filter_map(f).collect();
    (!v.is_empty()).then_some(v)
}

fn ttft_ms(r: &LlmRun) -> Option<Vec<f64>> {
    per_request(r, |q| q.ttft_s().map(|t| t * 1000.0))
}

fn latency_cdfs(configs: &[Configuration]) -> Vec<Chart> {
    let mut itl = Vec::new();
    let mut ttft = Vec::new();
    // Each chart takes the first configurations that have its samples.
    for c in configs {
        if itl.len() >= MAX_CDF_SERIES && ttft.len() >= MAX_CDF_SERIES {
            break;
        }
        let Some(first) = c.runs.get(0) else { continue };
        let one = c.runs.head(1);
        if itl.len() < MAX_CDF_SERIES
            && let Ok(s) = one.inter_token_latencies()
        {
            let mut v: Vec<f64> = s.iter().map(|x| x.itl_s * 1000.0).collect();
            itl.push(Series {
                name: c.label.clone(),
                points: cdf(&mut v),
                style: Style::Step,
                color: svg::color(itl.len()),
                shape: svg::shape(itl.len()),
                ..Series::default()
            });
        }
        if ttft.len() < MAX_CDF_SERIES
            && let Some(mut v) = ttft_ms(first)
        {
            ttft.push(Series {
                name: c.label.clone(),
                points: cdf(&mut v),
                style: Style::Step,
                color: svg::color(ttft.len()),
                shape: svg::shape(ttft.len()),
                ..Series::default()
            });
        }
    }
    let mut out = Vec::new();
    for (id, title, label, series) in [
        (
            "cdf-ttft",
            "Time to first token, CDF (first run of each configuration)",
            "TTFT (ms)",
            ttft,
        ),
        (
            "cdf-itl",
            "Inter-token latency, CDF (smoothed; first run of each configuration)",
            "ITL (ms)",
            itl,
        ),
    ] {
        if !series.is_empty() {
            out.push(Chart::new(
                id,
                title,
                (label, "fraction of samples"),
                series,
            ));
        }
    }
    out
}

const CSS: &str = "body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1400px}\
figure{margin:12px 0}figcaption{font-size:11px}.grid2{display:flex;flex-wrap:wrap;gap:8px}\
.grid2>figure{flex:1 1 48%;min-width:420px}svg.plot{display:block;width:100%;height:auto}\
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ddd;padding:3px 6px;text-align:right;vertical-align:top}\
td.t,th.t{text-align:left}tr.unstable td{background:#fff4e5}.warn{color:#a04000;white-space:pre-wrap;text-align:left}";

/// For "print to PDF": an A4 page, each figure whole on one page at the page's width
/// (scaled, never cut; a tall one shrinks to the page's height), tables in smaller type that
/// wrap within the width, and no download links (they mean nothing on paper).
const PRINT_CSS: &str = "@page{size:A4;margin:14mm}body{margin:0;max-width:none;font-size:10pt}\
figcaption{display:none}figure{break-inside:avoid;page-break-inside:avoid;margin:0 0 6mm}\
.grid2{display:block}.grid2>figure{min-width:0}svg.plot{width:100%;height:auto;max-height:250mm}\
h2{break-after:avoid;page-break-after:avoid;margin-top:8mm}section{break-inside:auto}\
table{font-size:6.5pt;width:100%;table-layout:fixed}td,th{padding:1px 2px;overflow-wrap:anywhere}\
tr{break-inside:avoid;page-break-inside:avoid}";

/// Counts, models, engines, and mean ± CI of every metric per configuration.
fn summary_section(h: &mut String, runs: &Runs, configs: &[Configuration]) {
    let stable = runs.stable().len();
    let engines: std::collections::BTreeSet<&str> = runs
        .iter()
        .filter_map(|r| r.extra.engine.as_deref())
        .collect();
    let models: std::collections::BTreeSet<&str> =
        runs.iter().map(|r| r.model_id.as_str()).collect();
    let _ = write!(
        h,
        "<section id=\"summary\"><h2>Summary</h2><p>{} runs ({} stable, {} unstable) in {} configurations; models: {}; engines: {}. {} runs found but not loaded.</p>",
        runs.len(),
        stable,
        runs.len() - stable,
        configs.len(),
        esc(&models.into_iter().collect::<Vec<_>>().join(", ")),
        esc(&engines.into_iter().collect::<Vec<_>>().join(", ")),
        runs.issues().len()
    );
    let count = |s: &str| {
        runs.iter()
            .filter(|r| r.extra.energy_scope.as_deref() == Some(s))
            .count()
    };
    let (gpu, cpu) = (count("gpu"), count("cpu"));
    if gpu + cpu > 0 {
        let _ = write!(
            h,
            "<p>Energy per token is the energy of the inference device: the engine's GPUs in {gpu} runs, the CPU packages and DRAM in {cpu}; host energy the GPU runs also drew is in the system column, never in the headline.{}</p>",
            if gpu > 0 && cpu > 0 {
                " GPU and CPU runs measure different devices: compare them by system energy."
            } else {
                ""
            }
        );
    }
    let metrics = compare::measured(runs);
    h.push_str("<table><tr><th class=\"t\">configuration</th><th>runs</th>");
    for m in &metrics {
        let _ = write!(
            h,
            "<th title=\"{}\">{} ({})<br>mean and interval</th>",
            m.name, m.words, m.unit
        );
    }
    h.push_str("</tr>");
    for c in configs {
        let _ = write!(
            h,
            "<tr><td class=\"t\">{}</td><td>{}</td>",
            esc(&c.label),
            c.runs.len()
        );
        for m in &metrics {
            let cell = c
                .stats(m)
                .map_or(String::new(), |s| c.spread(m).show(s.mean, short_number));
            let _ = write!(h, "<td>{cell}</td>");
        }
        h.push_str("</tr>");
    }
    let _ = write!(
        h,
        "</table><p class=\"rule\">Here and in every chart, {SPREAD_RULE}.</p></section>"
    );
}

/// Energy per token against throughput and latency, with the Pareto-optimal configurations joined.
fn pareto_section(h: &mut String, runs: &Runs) {
    // Every configuration with a positive energy per token is drawn; those whose runs all
    // failed a stability rule hollow, with the reason, and off the frontier.
    let front_runs = runs.filter(|r| r.energy_per_token_joules > 0.0);
    let front_configs = compare::configurations(&front_runs);
    let left_out = runs.len() - front_runs.len();
    let n_unstable = front_configs
        .iter()
        .filter(|c| unstable(c).is_some())
        .count();
    let which = match (n_unstable, front_configs.len() - n_unstable) {
        (0, _) => String::new(),
        (u, 0) => format!(
            " No configuration passed the stability rules: all {u} are hollow, and the line joins the best of them."
        ),
        (u, _) => format!(
            " Hollow points: {u} configuration(s) whose runs failed a stability rule (why, under the charts); the frontier leaves them out."
        ),
    };
    let dropped = if left_out > 0 {
        format!(" {left_out} run(s) without a positive energy per token are not plotted.")
    } else {
        String::new()
    };
    let _ = write!(
        h,
        "<section id=\"pareto\"><h2>Energy per token against throughput and latency</h2><p>One point per configuration: the mean over its runs; whiskers: the interval the summary table gives. The line joins the Pareto-optimal configurations.{which}{dropped}</p>"
    );
    if let Some(c) = pareto_chart(
        "pareto-throughput",
        "Energy per token vs output throughput",
        &front_configs,
        "output_throughput_tokens_per_sec",
        "output throughput (tokens/s)",
        true,
    ) {
        h.push_str(&figure(&c));
    }
    let has_ttft = front_runs.iter().any(|r| r.extra.ttft_p99_ms.is_some());
    let (metric, label, t) = if has_ttft {
        (
            "ttft_p99_ms",
            "TTFT p99 (ms)",
            "Energy per token vs TTFT p99",
        )
    } else {
        (
            "p99_itl_ms",
            "ITL p99, smoothed (ms)",
            "Energy per token vs ITL p99 (these runs record no TTFT)",
        )
    };
    if let Some(c) = pareto_chart("pareto-latency", t, &front_configs, metric, label, false) {
        h.push_str(&figure(&c));
    }
    // Why each hollow point is hollow, in print too (a hover says nothing on paper).
    let hollow: Vec<(String, String)> = front_configs
        .iter()
        .filter_map(|c| unstable(c).map(|why| (c.label.clone(), why)))
        .collect();
    if !hollow.is_empty() {
        h.push_str("<p>Unstable configurations (hollow):</p><ul class=\"unstable\">");
        for (label, why) in &hollow {
            let _ = write!(h, "<li>{}: {}</li>", esc(label), esc(why));
        }
        h.push_str("</ul>");
    }
    h.push_str("</section>");
}

/// One power timeline per run (the first MAX_TIMELINES), the window shaded.
fn timelines_section(h: &mut String, runs: &Runs) {
    let _ = write!(
        h,
        "<section id=\"timelines\"><h2>Power timelines</h2><p>Each chart says which devices' power it sums and which window is shaded; power starts at zero, and the dashed line is the idle baseline where one was measured. Dotted lines mark where load, warmup, the thermal floor and teardown began (llem runs). {}</p><div class=\"grid2 small\">",
        if runs.len() > MAX_TIMELINES {
            format!("First {MAX_TIMELINES} of {} runs.", runs.len())
        } else {
            String::new()
        }
    );
    for (i, r) in runs.iter().take(MAX_TIMELINES).enumerate() {
        match power_trace(r) {
            Ok((trace, (ws, we))) => {
                // One read of the result for the baseline and the phases.
                let result = llem_result(r);
                let method = r
                    .extra
                    .measurement_methodology
                    .as_deref()
                    .unwrap_or("steady_state");
                let cycle = r
                    .extra
                    .cycle
                    .map(|c| format!(", cycle {c}"))
                    .unwrap_or_default();
                let chart = Chart {
                    id: format!("power-{i}"),
                    title: format!("{}{cycle}", compare::label(r)),
                    x_label: "time since the first sample (s)".into(),
                    y_label: format!("power of {} (W)", trace_words(r)),
                    x_log: false,
                    series: vec![Series {
                        name: "power".into(),
                        points: trace
                            .into_iter()
                            .map(|(x, y)| Point {
                                x,
                                y,
                                ..Point::default()
                            })
                            .collect(),
                        style: Style::Line,
                        color: svg::color(0),
                        shape: svg::shape(0),
                        ..Series::default()
                    }],
                    bands: vec![(ws, we, format!("measurement window ({method})"))],
                    hlines: result
                        .as_ref()
                        .and_then(|v| v.get("baseline_power_w")?.as_f64())
                        .filter(|b| b.is_finite())
                        .map(|b| vec![(b, format!("idle baseline {b:.1} W"))])
                        .unwrap_or_default(),
                    vlines: result
                        .as_ref()
                        .map(|v| phase_starts(v, ws))
                        .unwrap_or_default(),
                    y_from_zero: true,
                };
                h.push_str(&figure(&chart));
            }
            Err(e) => {
                let _ = write!(
                    h,
                    "<p class=\"warn\">{}: no power timeline ({})</p>",
                    esc(&compare::label(r)),
                    esc(&e.to_string())
                );
            }
        }
    }
    h.push_str("</div></section>");
}

/// Latency CDFs per configuration.
fn latency_section(h: &mut String, configs: &[Configuration]) {
    h.push_str("<section id=\"latency\"><h2>Latency distributions</h2>");
    for c in latency_cdfs(configs) {
        h.push_str(&figure(&c));
    }
    h.push_str("</section>");
}

/// Whose power a run's trace sums: its GPUs when it has GPU samples, else the CPU package
/// and DRAM (what `power_trace` takes).
fn trace_words(r: &LlmRun) -> &'static str {
    match r.extra.energy_scope.as_deref() {
        Some("gpu") => "the GPUs",
        Some("cpu") if r.gpu_model == "CPU" => "CPU package + DRAM",
        Some(_) | None => "the measured devices",
    }
}

/// A llem run's `result.json`, for what the records do not carry.
fn llem_result(r: &LlmRun) -> Option<serde_json::Value> {
    if r.extra.source != Some(crate::RunSource::Llem) {
        return None;
    }
    let bytes = llem_config::files::read_record(&r.results_path).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Where load, warmup, the thermal floor and teardown began, from a llem run's result `v`, on a
/// timeline whose measurement window
/// starts at `window_start` (the trace's clock starts at its first sample, the result's at
/// the experiment start).
fn phase_starts(v: &serde_json::Value, window_start: f64) -> Vec<(f64, String)> {
    let Some(abs) = v
        .pointer("/measurement_window_s/0")
        .and_then(serde_json::Value::as_f64)
    else {
        return Vec::new();
    };
    let t0 = abs - window_start;
    v.get("phases")
        .and_then(serde_json::Value::as_array)
        .map(|phases| {
            phases
                .iter()
                .filter_map(|p| {
                    let name = p.get("phase")?.as_str()?;
                    let start = p.get("start_s")?.as_f64()?;
                    // The baseline ran before the trace began; the window is shaded.
                    (name != "measure" && name != "baseline")
                        .then(|| (start - t0, name.replace('_', " ")))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// What a run's energy figures hold, for the tables.
fn scope_words(scope: Option<&str>) -> &'static str {
    match scope {
        Some("gpu") => "GPU",
        Some("cpu") => "CPU + DRAM",
        Some(_) => "other",
        None => "as recorded",
    }
}

/// Every run, and the runs that were found but could not be loaded.
fn runs_section(h: &mut String, runs: &Runs) {
    // A warning every run carries (the same sensors, the same short window) is said once.
    let lines = |r: &LlmRun| -> Vec<String> {
        r.extra
            .warnings
            .as_deref()
            .unwrap_or("")
            .lines()
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect()
    };
    let shared: Vec<String> = match runs.get(0) {
        Some(first) if runs.len() > 1 => lines(first)
            .into_iter()
            .filter(|w| runs.iter().all(|r| lines(r).contains(w)))
            .collect(),
        _ => Vec::new(),
    };
    h.push_str("<section id=\"runs\"><h2>Every run</h2>");
    if !shared.is_empty() {
        h.push_str("<p>Every run warns:</p><ul class=\"warn shared\">");
        for w in &shared {
            let _ = write!(h, "<li>{}</li>", esc(w));
        }
        h.push_str("</ul>");
    }
    h.push_str("<table><tr><th class=\"t\">configuration</th><th>cycle</th><th class=\"t\">source</th><th>mJ/tok</th><th class=\"t\">energy of</th><th>system mJ/tok</th><th>tok/s</th><th>W</th><th>ITL p50, smoothed (ms)</th><th>TTFT p99 (ms)</th><th>batch</th><th class=\"t\">stability</th><th class=\"t\">warnings</th></tr>");
    for r in runs.iter() {
        let opt = |v: Option<f64>| v.map(short_number).unwrap_or_default();
        let _ = write!(
            h,
            "<tr class=\"{}\"><td class=\"t\">{}</td><td>{}</td><td class=\"t\">{}</td><td>{}</td><td class=\"t\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"t\">{}</td><td class=\"warn\">{}</td></tr>",
            if r.is_stable { "stable" } else { "unstable" },
            esc(&compare::label(r)),
            r.extra.cycle.map(|c| c.to_string()).unwrap_or_default(),
            esc(&r.results_path),
            short_number(r.energy_per_token_joules * 1000.0),
            scope_words(r.extra.energy_scope.as_deref()),
            opt(r.system_mj_per_tok()),
            short_number(r.output_throughput_tokens_per_sec),
            short_number(r.avg_power_watts),
            short_number(r.p50_itl_ms),
            opt(r.extra.ttft_p99_ms),
            opt(r.avg_batch_size),
            if r.is_stable {
                "stable".to_string()
            } else {
                esc(&r.unstable_reason)
            },
            esc(&lines(r)
                .into_iter()
                .filter(|w| !shared.contains(w))
                .collect::<Vec<_>>()
                .join("\n"))
        );
    }
    h.push_str("</table>");
    if !runs.issues().is_empty() {
        h.push_str("<h3>Found but not loaded</h3><ul>");
        for i in runs.issues() {
            let _ = write!(
                h,
                "<li>{}: {}</li>",
                esc(&i.path.display().to_string()),
                esc(&i.reason)
            );
        }
        h.push_str("</ul>");
    }
    h.push_str("</section>");
}

/// The report for `runs` (and the diffusion runs found beside them, and a search study's
/// `search.json` document) as one HTML document.
pub fn render(
    runs: &Runs,
    diffusion: &crate::DiffusionRuns,
    search: Option<&serde_json::Value>,
    title: &str,
) -> String {
    let configs = compare::configurations(runs);
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{CSS}</style><style id=\"print-css\" media=\"print\">{PRINT_CSS}</style></head><body>",
        esc(title)
    );
    let _ = write!(h, "<h1>{}</h1>", esc(title));
    search::section(&mut h, search);
    summary_section(&mut h, runs, &configs);
    pareto_section(&mut h, runs);
    timelines_section(&mut h, runs);
    load::section(&mut h, runs);
    conversations::section(&mut h, runs);
    device::section(&mut h, runs);
    node_power::section(&mut h, runs);
    latency_section(&mut h, &configs);
    attribution::section(&mut h, &configs);
    nodes::section(&mut h, &configs);
    runs_section(&mut h, runs);
    diffusion::section(&mut h, diffusion);
    h.push_str("</body></html>\n");
    h
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::pareto_front;

    #[test]
    fn pareto_front_keeps_the_non_dominated() {
        // (throughput, mJ/tok): (10, 5) dominated by (20, 4); (30, 6) and (5, 1) are optimal.
        let pts = [
            (10.0, 5.0),
            (20.0, 4.0),
            (30.0, 6.0),
            (5.0, 1.0),
            (f64::NAN, 0.0),
        ];
        assert_eq!(pareto_front(&pts, true), vec![3, 1, 2]);
        // Minimising both: (5, 1) dominates everything.
        assert_eq!(pareto_front(&pts, false), vec![3]);
    }
}
