//! The report's energy-and-load-over-time section: for each served llem run (a replayed trace
//! above all), its window in time bins (`timeline.parquet`) as two charts on one time axis —
//! the mean power of each bin with the part spent with no request in flight, and the requests
//! in flight and sent — so the idle stretches between bursts, and what they cost, show.

use std::fmt::Write;

use llem_results::TimeBin;

use super::svg::{self, Chart, Point, Series, Style, esc};
use super::{MAX_TIMELINES, figure, llem_result};
use crate::compare;

/// A step series over the bins: each bin's value from its start to its end.
fn steps(name: &str, i: usize, bins: &[TimeBin], y: impl Fn(&TimeBin) -> f64) -> Series {
    let mut points: Vec<Point> = bins
        .iter()
        .map(|b| Point {
            x: b.start_s,
            y: y(b),
            ..Point::default()
        })
        .collect();
    if let Some(last) = bins.last() {
        points.push(Point {
            x: last.end_s,
            y: y(last),
            ..Point::default()
        });
    }
    Series {
        name: name.into(),
        points,
        style: Style::Step,
        color: svg::color(i),
        shape: svg::shape(i),
        ..Series::default()
    }
}

/// Width of a bin, s (never 0: an empty bin draws as nothing).
fn width(b: &TimeBin) -> f64 {
    (b.end_s - b.start_s).max(f64::MIN_POSITIVE)
}

/// The two charts of run `idx` (`label`), its bins and the idle share its result states.
pub(super) fn charts(
    idx: usize,
    label: &str,
    bins: &[TimeBin],
    idle_share: Option<f64>,
) -> [Chart; 2] {
    let bin_s = bins.first().map_or(0.0, width);
    let share = idle_share.map_or_else(
        || "idle share not known".to_string(),
        |s| format!("{:.0} % of its energy with no request in flight", s * 100.0),
    );
    let x_label = "time in the measurement window (s)".to_string();
    let power = Chart {
        id: format!("load-power-{idx}"),
        title: format!("{label}: power per {bin_s:.3} s bin ({share})"),
        x_label: x_label.clone(),
        y_label: "mean power over the bin (W)".into(),
        x_log: false,
        series: vec![
            steps("power", 0, bins, |b| b.power_w),
            steps("idle part (no request in flight)", 1, bins, |b| {
                b.idle_energy_j / width(b)
            }),
        ],
        bands: Vec::new(),
        hlines: Vec::new(),
        vlines: Vec::new(),
        y_from_zero: true,
    };
    let load = Chart {
        id: format!("load-requests-{idx}"),
        title: format!("{label}: requests per {bin_s:.3} s bin"),
        x_label,
        y_label: "requests".into(),
        x_log: false,
        series: vec![
            steps("in flight (mean over the bin)", 0, bins, |b| {
                b.mean_in_flight
            }),
            steps("sent", 2, bins, |b| f64::from(b.requests_started)),
        ],
        bands: Vec::new(),
        hlines: Vec::new(),
        vlines: Vec::new(),
        y_from_zero: true,
    };
    [power, load]
}

/// The section: served llem runs with time bins (the first [`MAX_TIMELINES`]); nothing
/// when there are none.
pub(super) fn section(h: &mut String, runs: &crate::Runs) {
    let mut body = String::new();
    let mut shown = 0usize;
    for r in runs.iter() {
        if shown == MAX_TIMELINES {
            break;
        }
        let Some(result) = llem_result(r) else {
            continue;
        };
        if result.get("traffic").is_none_or(serde_json::Value::is_null) {
            continue;
        }
        let label = compare::label(r);
        match r.time_bins() {
            Ok(Some(bins)) if !bins.is_empty() => {
                let share = result
                    .pointer("/timeline/idle_energy_share")
                    .and_then(serde_json::Value::as_f64);
                let replay = result
                    .pointer("/traffic/trace/path")
                    .and_then(serde_json::Value::as_str)
                    .map(|p| format!(" — replay of {p}"))
                    .unwrap_or_default();
                let _ = write!(body, "<h3>{}{}</h3>", esc(&label), esc(&replay));
                for c in charts(shown, &label, &bins, share) {
                    body.push_str(&figure(&c));
                }
                shown += 1;
            }
            Ok(_) => {}
            Err(e) => {
                let _ = write!(
                    body,
                    "<p class=\"warn\">{}: no time bins ({})</p>",
                    esc(&label),
                    esc(&e.to_string())
                );
            }
        }
    }
    if body.is_empty() {
        return;
    }
    let _ = write!(
        h,
        "<section id=\"load\"><h2>Energy and load over time</h2><p>Each served run's \
         measurement window in time bins (<code>timeline.parquet</code>): the mean power of \
         each bin and the part of it spent with no request in flight, and the requests in \
         flight and sent. The bins add up to the window's energy.</p><div class=\"grid2 small\">{body}</div></section>"
    );
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn bin(start: f64, power: f64, idle_j: f64, in_flight: f64, sent: u32) -> TimeBin {
        TimeBin {
            start_s: start,
            end_s: start + 2.0,
            energy_j: power * 2.0,
            idle_energy_j: idle_j,
            power_w: power,
            output_tokens: 0,
            requests_started: sent,
            requests_finished: 0,
            mean_in_flight: in_flight,
        }
    }

    #[test]
    fn the_charts_step_through_every_bin_to_the_windows_end() {
        let bins = [bin(0.0, 30.0, 0.0, 2.0, 3), bin(2.0, 10.0, 20.0, 0.0, 0)];
        let [power, load] = charts(3, "run", &bins, Some(0.5));
        assert_eq!(power.id, "load-power-3");
        assert!(power.title.contains("2.000 s bin") && power.title.contains("50 %"));
        let xs: Vec<f64> = power.series[0].points.iter().map(|p| p.x).collect();
        assert_eq!(xs, [0.0, 2.0, 4.0]);
        let ys: Vec<f64> = power.series[0].points.iter().map(|p| p.y).collect();
        assert_eq!(ys, [30.0, 10.0, 10.0]);
        // The idle part is the bin's idle energy over its width: all of the second bin.
        let idle: Vec<f64> = power.series[1].points.iter().map(|p| p.y).collect();
        assert_eq!(idle, [0.0, 10.0, 10.0]);
        let sent: Vec<f64> = load.series[1].points.iter().map(|p| p.y).collect();
        assert_eq!(sent, [3.0, 0.0, 0.0]);
        let [none, _] = charts(0, "run", &bins, None);
        assert!(none.title.contains("idle share not known"));
    }
}
