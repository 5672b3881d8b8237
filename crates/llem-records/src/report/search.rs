//! The report's search section, for a study with a `search:` block: what it looked for, why
//! it stopped and its answer with the interval of the answer's runs; the candidate map (every
//! candidate on the objective against the first constraint's figure: measured ones where
//! their runs put them, the others where the model predicts them, with the model's interval,
//! and the constraint's threshold); and a table of measured against predicted figures.
//! Read from the study's `search.json` as written, so a report of an old study shows what
//! its search said then.

use std::fmt::Write as _;

use serde_json::Value;

use super::figure::figure;
use super::svg::{self, Chart, Point, Series, Shape, Style, esc};
use crate::search_doc::{answer_words, at, goal_words, list, objective_unit, stop_words};
use crate::table::short_number;

/// Unmeasured candidates listed in the table, best predicted first; the rest are counted.
pub const MAX_UNMEASURED_ROWS: usize = 20;

/// The figures the search judges: the objective, then each constraint's `(field, bound,
/// threshold)`.
struct Goal<'a> {
    objective: &'a str,
    maximize: bool,
    constraints: Vec<(&'a str, &'a str, f64)>,
}

impl<'a> Goal<'a> {
    fn of(s: &'a Value) -> Goal<'a> {
        let spec = at(s, "spec");
        Goal {
            objective: at(spec, "objective").as_str().unwrap_or("objective"),
            maximize: at(spec, "direction").as_str() == Some("maximize"),
            constraints: list(at(spec, "constraints"))
                .iter()
                .filter_map(|c| {
                    Some((
                        at(c, "field").as_str()?,
                        at(c, "bound").as_str()?,
                        at(c, "threshold").as_f64()?,
                    ))
                })
                .collect(),
        }
    }
}

/// Each candidate's measured mean of `figure` over its completed runs.
fn measured_means(s: &Value, figure: &str) -> std::collections::HashMap<u64, f64> {
    let mut sums: std::collections::HashMap<u64, (f64, usize)> = Default::default();
    for e in list(at(s, "evaluations")) {
        let (Some(c), Some(v)) = (
            at(e, "candidate").as_u64(),
            at(at(e, "figures"), figure).as_f64(),
        ) else {
            continue;
        };
        let x = sums.entry(c).or_default();
        x.0 += v;
        x.1 += 1;
    }
    sums.into_iter()
        .map(|(c, (sum, n))| (c, sum / n as f64))
        .collect()
}

fn estimate(c: &Value, figure: &str) -> Option<(f64, f64, f64)> {
    let e = at(at(c, "predicted"), figure);
    Some((
        at(e, "mean").as_f64()?,
        at(e, "low").as_f64()?,
        at(e, "high").as_f64()?,
    ))
}

/// The candidate map: objective against the first constraint's figure.
fn map_chart(s: &Value, goal: &Goal<'_>) -> Option<Chart> {
    let &(cfield, bound, threshold) = goal.constraints.first()?;
    let objective = measured_means(s, goal.objective);
    let constraint = measured_means(s, cfield);
    let answer = at(at(s, "answer"), "candidate").as_u64();
    let (mut measured, mut predicted, mut chosen) = (Vec::new(), Vec::new(), Vec::new());
    for c in list(at(s, "candidates")) {
        let Some(i) = at(c, "index").as_u64() else {
            continue;
        };
        let runs = at(c, "runs").as_u64().unwrap_or(0);
        if runs > 0 {
            let (Some(&x), Some(&y)) = (constraint.get(&i), objective.get(&i)) else {
                continue;
            };
            let p = Point {
                x,
                y,
                ..Point::default()
            };
            if Some(i) == answer {
                chosen.push(p);
            } else {
                measured.push(p);
            }
        } else if let (Some((x, xl, xh)), Some((y, yl, yh))) =
            (estimate(c, cfield), estimate(c, goal.objective))
        {
            predicted.push(Point {
                x,
                y,
                x_ci: Some((xl, xh)),
                y_ci: Some((yl, yh)),
            });
        }
    }
    if measured.is_empty() && predicted.is_empty() && chosen.is_empty() {
        return None;
    }
    let series = |name: &str, points: Vec<Point>, i: usize, shape: Shape, hollow: bool| Series {
        name: name.into(),
        points,
        style: Style::Markers,
        color: svg::color(i),
        shape,
        hollow,
        note: None,
    };
    let mut all = vec![
        series(
            "measured (mean of its runs)",
            measured,
            0,
            Shape::Circle,
            false,
        ),
        series(
            "not measured (the model's prediction and interval)",
            predicted,
            1,
            Shape::Square,
            true,
        ),
    ];
    if !chosen.is_empty() {
        all.push(series("the answer", chosen, 3, Shape::Diamond, false));
    }
    all.retain(|s| !s.points.is_empty());
    let with_unit = |f: &str| match llem_config::search::search_field(f).map(|x| x.unit) {
        Some(u) if !u.is_empty() => format!("{f} ({u})"),
        _ => f.to_string(),
    };
    let mut chart = Chart::new(
        "search-map",
        format!("Candidates: {} against {cfield}", goal.objective),
        (&with_unit(cfield), &with_unit(goal.objective)),
        all,
    );
    chart.vlines = vec![(
        threshold,
        format!("{cfield} {bound} {}", short_number(threshold)),
    )];
    Some(chart)
}

/// The table of candidates: the measured ones, then the best predicted of the rest.
fn table(h: &mut String, s: &Value, goal: &Goal<'_>) {
    let axes: Vec<&str> = list(at(s, "axes"))
        .iter()
        .filter_map(|a| at(a, "name").as_str())
        .collect();
    let figures: Vec<&str> = std::iter::once(goal.objective)
        .chain(goal.constraints.iter().map(|c| c.0))
        .collect();
    let measured: Vec<std::collections::HashMap<u64, f64>> =
        figures.iter().map(|f| measured_means(s, f)).collect();
    let sign = if goal.maximize { -1.0 } else { 1.0 };
    let key = |c: &Value| estimate(c, goal.objective).map_or(f64::INFINITY, |e| sign * e.0);
    let mut rows: Vec<&Value> = list(at(s, "candidates")).iter().collect();
    // Measured first; the answer, then those that could still beat it, then the rest.
    let rank = |c: &Value| -> (bool, u8) {
        let status = match at(c, "status").as_str() {
            Some("incumbent") => 0,
            Some("competitor") => 1,
            Some("open") => 2,
            Some("beaten") => 3,
            Some("infeasible") => 4,
            _ => 5,
        };
        (at(c, "runs").as_u64().unwrap_or(0) == 0, status)
    };
    rows.sort_by(|a, b| rank(a).cmp(&rank(b)).then(key(a).total_cmp(&key(b))));
    let unmeasured = rows
        .iter()
        .filter(|c| at(c, "runs").as_u64().unwrap_or(0) == 0)
        .count();
    let shown_unmeasured = unmeasured.min(MAX_UNMEASURED_ROWS);
    rows.truncate(rows.len() - unmeasured + shown_unmeasured);
    h.push_str("<table id=\"search-candidates\"><tr><th class=\"t\">configuration</th>");
    for a in &axes {
        let _ = write!(h, "<th class=\"t\">{}</th>", esc(a));
    }
    h.push_str("<th>runs</th><th class=\"t\">status</th><th>P(meets constraints)</th>");
    for f in &figures {
        let _ = write!(
            h,
            "<th>{0}<br>measured</th><th>{0}<br>predicted [interval]</th>",
            esc(f)
        );
    }
    h.push_str("</tr>");
    for c in rows {
        let i = at(c, "index").as_u64().unwrap_or(u64::MAX);
        let _ = write!(
            h,
            "<tr class=\"{}\"><td class=\"t\">{}</td>",
            esc(at(c, "status").as_str().unwrap_or("")),
            esc(at(c, "label").as_str().unwrap_or("?"))
        );
        for a in &axes {
            let v = at(at(c, "values"), a);
            let text = match v {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            let _ = write!(h, "<td class=\"t\">{}</td>", esc(&text));
        }
        let _ = write!(
            h,
            "<td>{}</td><td class=\"t\">{}</td><td>{}</td>",
            at(c, "runs").as_u64().unwrap_or(0),
            esc(at(c, "status").as_str().unwrap_or("")),
            at(c, "p_feasible")
                .as_f64()
                .map_or_else(String::new, |p| format!("{p:.2}"))
        );
        for (f, m) in figures.iter().zip(&measured) {
            let got = m.get(&i).map_or_else(String::new, |v| short_number(*v));
            let pred = estimate(c, f).map_or_else(String::new, |(m, lo, hi)| {
                format!(
                    "{} [{}, {}]",
                    short_number(m),
                    short_number(lo),
                    short_number(hi)
                )
            });
            let _ = write!(h, "<td>{got}</td><td>{pred}</td>");
        }
        h.push_str("</tr>");
    }
    h.push_str("</table>");
    if unmeasured > shown_unmeasured {
        let _ = write!(
            h,
            "<p>{} more unmeasured candidates are in search.json.</p>",
            unmeasured - shown_unmeasured
        );
    }
}

/// The section for the study's `search.json` document, or nothing without one.
pub(super) fn section(h: &mut String, search: Option<&Value>) {
    let Some(s) = search else { return };
    let goal = Goal::of(s);
    let unit = objective_unit(s);
    let _ = write!(
        h,
        "<section id=\"search\"><h2>Search</h2><p>The study searched its {} configurations \
         ({} runs as a grid) for the best one: {}. It stopped: {}. It used {} of its budget of \
         {} runs ({} runs saved against the whole grid).</p>",
        at(s, "grid_configurations"),
        at(s, "grid_runs"),
        esc(&goal_words(s)),
        esc(&stop_words(s)),
        at(s, "runs_used"),
        at(s, "budget_runs"),
        at(s, "runs_saved"),
    );
    match answer_words(at(s, "answer"), unit) {
        Some(a) => {
            let _ = write!(h, "<p id=\"search-answer\">Answer: {}.", esc(&a));
            if let Some(r) = answer_words(at(s, "runner_up"), unit) {
                let _ = write!(h, " Runner-up: {}.", esc(&r));
            }
            h.push_str(" Intervals are those of the answer's own runs.</p>");
        }
        None => h.push_str("<p id=\"search-answer\">No answer: no configuration measured is known to meet the constraints.</p>"),
    }
    if let Some(c) = map_chart(s, &goal) {
        h.push_str(&figure(&c));
        h.push_str(
            "<p>Filled: measured candidates at the mean of their runs. Hollow: candidates the \
             search did not measure, where its model puts them, with the model's interval at \
             the search's confidence. The dotted line is the first constraint's threshold.</p>",
        );
    }
    table(h, s, &goal);
    h.push_str("</section>");
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn doc() -> Value {
        serde_json::json!({
            "spec": {"objective": "mj_per_tok_total", "direction": "minimize",
                     "constraints": [{"field": "itl_p90_ms", "bound": "<=", "threshold": 50.0}]},
            "grid_configurations": 3, "grid_runs": 6, "budget_runs": 4, "runs_used": 3,
            "runs_saved": 3, "stop_reason": "identified",
            "axes": [{"name": "llamacpp.batch_size"}],
            "answer": {"candidate": 0, "label": "b=1", "config_hash": "aaaa", "runs": 2,
                       "objective_mean": 2.0, "objective_low": 1.5, "objective_high": 2.5,
                       "p_feasible": 0.99},
            "candidates": [
                {"index": 0, "label": "b=1", "values": {"llamacpp.batch_size": 1}, "runs": 2,
                 "status": "incumbent", "p_feasible": 0.99,
                 "predicted": {"mj_per_tok_total": {"mean": 2.0, "low": 1.8, "high": 2.2},
                               "itl_p90_ms": {"mean": 30.0, "low": 28.0, "high": 32.0}}},
                {"index": 1, "label": "b=2", "values": {"llamacpp.batch_size": 2}, "runs": 1,
                 "status": "infeasible", "p_feasible": 0.01,
                 "predicted": {"mj_per_tok_total": {"mean": 1.0, "low": 0.9, "high": 1.1},
                               "itl_p90_ms": {"mean": 70.0, "low": 65.0, "high": 75.0}}},
                {"index": 2, "label": "b=4", "values": {"llamacpp.batch_size": 4}, "runs": 0,
                 "status": "beaten", "p_feasible": 0.2,
                 "predicted": {"mj_per_tok_total": {"mean": 0.8, "low": 0.5, "high": 1.1},
                               "itl_p90_ms": {"mean": 90.0, "low": 60.0, "high": 120.0}}}
            ],
            "evaluations": [
                {"candidate": 0, "figures": {"mj_per_tok_total": 1.9, "itl_p90_ms": 29.0}},
                {"candidate": 0, "figures": {"mj_per_tok_total": 2.1, "itl_p90_ms": 31.0}},
                {"candidate": 1, "figures": {"mj_per_tok_total": 1.0, "itl_p90_ms": 70.0}}
            ]
        })
    }

    #[test]
    fn the_section_says_the_answer_maps_every_candidate_and_tables_measured_against_predicted() {
        let mut h = String::new();
        section(&mut h, Some(&doc()));
        assert!(
            h.contains("minimise mj_per_tok_total subject to itl_p90_ms &lt;= 50"),
            "{h}"
        );
        assert!(
            h.contains("It used 3 of its budget of 4 runs (3 runs saved"),
            "{h}"
        );
        assert!(
            h.contains("Answer: b=1 (aaaa): 2.000 mJ/tok [1.500, 2.500] over 2 runs"),
            "{h}"
        );
        // The map: two measured (one the answer), one predicted, the threshold marked.
        let chart = map_chart(&doc(), &Goal::of(&doc())).unwrap();
        let names: Vec<(&str, usize)> = chart
            .series
            .iter()
            .map(|s| (s.name.as_str(), s.points.len()))
            .collect();
        assert_eq!(
            names,
            [
                ("measured (mean of its runs)", 1),
                ("not measured (the model's prediction and interval)", 1),
                ("the answer", 1)
            ]
        );
        assert_eq!(chart.series[2].points[0].y, 2.0);
        assert_eq!(chart.series[2].points[0].x, 30.0);
        assert_eq!(chart.series[1].points[0].x_ci, Some((60.0, 120.0)));
        assert_eq!(chart.vlines[0].0, 50.0);
        // The table: measured first (the answer first), then the unmeasured.
        let b1 = h.find("<td class=\"t\">b=1</td>").unwrap();
        let b2 = h.find("<td class=\"t\">b=2</td>").unwrap();
        let b4 = h.find("<td class=\"t\">b=4</td>").unwrap();
        assert!(b1 < b2 && b2 < b4, "{h}");
        assert!(
            h.contains("<td>2.000</td><td>2.000 [1.800, 2.200]</td>"),
            "{h}"
        );
    }

    #[test]
    fn no_search_no_section_and_no_answer_is_said() {
        let mut h = String::new();
        section(&mut h, None);
        assert!(h.is_empty());
        let mut d = doc();
        d["answer"] = Value::Null;
        d["stop_reason"] = "nothing_feasible".into();
        section(&mut h, Some(&d));
        assert!(h.contains("no configuration meets the constraints"), "{h}");
        assert!(h.contains("No answer"), "{h}");
    }
}
