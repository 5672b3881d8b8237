//! A chart as a report figure: the inline SVG with two downloads beside it, the SVG itself
//! and the data it plots as CSV, both data URIs so the report stays one self-contained file.

use std::fmt::Write as _;

use super::svg::{Chart, esc};
use crate::export::csv::csv_cell;

/// The chart with links that download it as SVG and its plotted data as CSV.
pub fn figure(c: &Chart) -> String {
    let svg = c.render();
    format!(
        "<figure>{svg}<figcaption><a class=\"svg\" download=\"{id}.svg\" href=\"{}\">download SVG</a> \
         <a class=\"csv\" download=\"{id}.csv\" href=\"{}\">download data (CSV)</a></figcaption></figure>",
        data_uri("image/svg+xml", &svg),
        data_uri("text/csv", &plotted_csv(c)),
        id = esc(&c.id),
    )
}

/// What a chart draws, one row per drawn thing: each point of each series with its
/// interval, each shaded band, reference line and phase marker, in the chart's units (its
/// axis labels head the x and y columns' meaning in the `axis` rows).
pub fn plotted_csv(c: &Chart) -> String {
    let mut out = String::from("kind,name,x,y,x_low,x_high,y_low,y_high\n");
    let num = |v: Option<f64>| v.filter(|v| v.is_finite()).map(|v| v.to_string());
    let mut row = |kind: &str, name: &str, cells: [Option<f64>; 6]| {
        let cells: Vec<String> = cells
            .into_iter()
            .map(|v| num(v).unwrap_or_default())
            .collect();
        let _ = writeln!(out, "{kind},{},{}", csv_cell(name), cells.join(","));
    };
    row(
        "axis",
        &format!("x: {}; y: {}", c.x_label, c.y_label),
        [None; 6],
    );
    for s in &c.series {
        for p in &s.points {
            row(
                "point",
                &s.name,
                [
                    Some(p.x),
                    Some(p.y),
                    p.x_ci.map(|i| i.0),
                    p.x_ci.map(|i| i.1),
                    p.y_ci.map(|i| i.0),
                    p.y_ci.map(|i| i.1),
                ],
            );
        }
    }
    for (a, b, caption) in &c.bands {
        row(
            "band",
            caption,
            [None, None, Some(*a), Some(*b), None, None],
        );
    }
    for (y, caption) in &c.hlines {
        row("hline", caption, [None, Some(*y), None, None, None, None]);
    }
    for (x, caption) in &c.vlines {
        row("vline", caption, [Some(*x), None, None, None, None, None]);
    }
    out
}

/// `text` as a percent-encoded `data:` URI of type `mime`.
fn data_uri(mime: &str, text: &str) -> String {
    let mut uri = format!("data:{mime};charset=utf-8,");
    uri.reserve(text.len() * 5 / 4);
    for ch in text.chars() {
        match ch {
            'A'..='Z'
            | 'a'..='z'
            | '0'..='9'
            | '-'
            | '_'
            | '.'
            | '='
            | ':'
            | '/'
            | ','
            | ';'
            | '('
            | ')' => uri.push(ch),
            _ => {
                let mut buf = [0u8; 4];
                for b in ch.encode_utf8(&mut buf).bytes() {
                    let _ = write!(uri, "%{b:02X}");
                }
            }
        }
    }
    uri
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::report::svg::{Point, Series};

    #[test]
    fn the_csv_holds_every_drawn_point_interval_and_marker() {
        let mut c = Chart::new(
            "p",
            "t",
            ("x (s)", "y (W)"),
            vec![Series {
                name: "a, b".into(),
                points: vec![Point {
                    x: 1.0,
                    y: 2.5,
                    y_ci: Some((2.0, 3.0)),
                    ..Point::default()
                }],
                ..Series::default()
            }],
        );
        c.hlines.push((18.8, "idle baseline 18.8 W".into()));
        c.vlines.push((0.5, "load".into()));
        let csv = plotted_csv(&c);
        assert_eq!(
            csv.lines().collect::<Vec<_>>(),
            [
                "kind,name,x,y,x_low,x_high,y_low,y_high",
                "axis,x: x (s); y: y (W),,,,,,",
                "point,\"a, b\",1,2.5,,,2,3",
                "hline,idle baseline 18.8 W,,18.8,,,,",
                "vline,load,0.5,,,,,",
            ]
        );
        let f = figure(&c);
        assert!(f.contains(
            "download=\"p.csv\" href=\"data:text/csv;charset=utf-8,kind,name,x,y,x_low,x_high,y_low,y_high%0Aaxis,x:%20x%20(s)"
        ));
        assert!(f.contains("download=\"p.svg\""));
    }
}
