//! The report's diffusion section: ML.ENERGY's text-to-image and text-to-video runs, energy
//! per generation against throughput (one chart per task, a series per model, the Pareto
//! frontier), and a table of every run.

use std::fmt::Write;

use super::svg::{self, Chart, Point, Series, Style, esc};
use crate::DiffusionRuns;
use crate::export::{DIFFUSION_HEADLINE, Record};
use crate::table::cell;

/// One chart per task.
fn charts(runs: &DiffusionRuns) -> Vec<Chart> {
    let Ok(tasks) = runs.group_by(&["task"]) else {
        return Vec::new();
    };
    tasks
        .iter()
        .map(|t| {
            let task = t.key.first().cloned().unwrap_or_default();
            let models = t.runs.group_by(&["nickname"]).unwrap_or_default();
            let mut series: Vec<Series> = models
                .iter()
                .enumerate()
                .map(|(i, m)| Series {
                    name: m.key.first().cloned().unwrap_or_default(),
                    points: m
                        .runs
                        .iter()
                        .map(|r| Point {
                            x: r.throughput_generations_per_sec,
                            y: r.energy_per_generation_joules,
                            ..Point::default()
                        })
                        .collect(),
                    style: Style::Markers,
                    color: svg::color(i),
                    shape: svg::shape(i),
                    ..Series::default()
                })
                .collect();
            let all: Vec<Point> = series.iter().flat_map(|s| s.points.clone()).collect();
            series.push(super::frontier(&all, true));
            Chart::new(
                format!("diffusion-{task}"),
                format!("{task}: energy per generation against throughput"),
                ("throughput (generations/s)", "energy per generation (J)"),
                series,
            )
        })
        .collect()
}

/// The section, when there are diffusion runs.
pub fn section(h: &mut String, runs: &DiffusionRuns) {
    if runs.is_empty() {
        return;
    }
    let _ = write!(
        h,
        "<section id=\"diffusion\"><h2>Diffusion runs</h2><p>{} ML.ENERGY text-to-image and \
         text-to-video runs, one point each: GPU energy per generated image or video against \
         generations per second (ML.ENERGY's own figures; no stability rules apply to them).</p>",
        runs.len()
    );
    for c in charts(runs) {
        h.push_str(&super::figure(&c));
    }
    h.push_str("<table><tr>");
    for f in DIFFUSION_HEADLINE {
        let _ = write!(h, "<th>{}</th>", esc(f));
    }
    h.push_str("</tr>");
    for r in runs.iter() {
        h.push_str("<tr>");
        for f in DIFFUSION_HEADLINE {
            let _ = write!(h, "<td>{}</td>", esc(&cell(r.value(f))));
        }
        h.push_str("</tr>");
    }
    h.push_str("</table></section>");
}
