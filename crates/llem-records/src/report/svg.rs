//! A small SVG chart writer: linear or log axes with round ticks, markers with error
//! whiskers, lines, step lines and shaded x-ranges. Text is escaped; nothing is fetched.

use std::fmt::Write as _;

use super::place::{Anchor, Placer, TextBox};

/// Colours for series, distinguishable in print and for common colour blindness.
pub const PALETTE: &[&str] = &[
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000",
];

/// The colour of series `i` (the palette, repeated; [`shape`] tells the rounds apart).
pub fn color(i: usize) -> String {
    PALETTE
        .get(i % PALETTE.len())
        .copied()
        .unwrap_or("#000000")
        .to_string()
}

/// The marker shape of a series, and the dash of its line: series sharing a colour (the
/// ninth and the first) differ in shape.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Shape {
    /// A circle; a solid line.
    #[default]
    Circle,
    /// A square; a dashed line.
    Square,
    /// A triangle; a dotted line.
    Triangle,
    /// A diamond; a dash-dot line.
    Diamond,
}

/// The shape of series `i`: circles for the first round of the palette, then squares,
/// triangles and diamonds (32 series apart in all).
pub fn shape(i: usize) -> Shape {
    match (i / PALETTE.len()) % 4 {
        0 => Shape::Circle,
        1 => Shape::Square,
        2 => Shape::Triangle,
        _ => Shape::Diamond,
    }
}

impl Shape {
    /// The SVG element of this marker centred at (x, y), `r` px across half its width.
    fn element(self, (x, y): (f64, f64), r: f64) -> String {
        match self {
            Shape::Circle => format!(r#"circle cx="{x:.1}" cy="{y:.1}" r="{r}""#),
            Shape::Square => format!(
                r#"rect x="{:.1}" y="{:.1}" width="{}" height="{}""#,
                x - r * 0.9,
                y - r * 0.9,
                r * 1.8,
                r * 1.8
            ),
            Shape::Triangle => format!(
                r#"polygon points="{x:.1},{:.1} {:.1},{:.1} {:.1},{:.1}""#,
                y - r * 1.1,
                x + r,
                y + r * 0.8,
                x - r,
                y + r * 0.8
            ),
            Shape::Diamond => format!(
                r#"polygon points="{x:.1},{:.1} {:.1},{y:.1} {x:.1},{:.1} {:.1},{y:.1}""#,
                y - r * 1.2,
                x + r,
                y + r * 1.2,
                x - r
            ),
        }
    }

    /// The tag name of [`Shape::element`], to close it.
    fn tag(self) -> &'static str {
        match self {
            Shape::Circle => "circle",
            Shape::Square => "rect",
            Shape::Triangle | Shape::Diamond => "polygon",
        }
    }

    /// The `stroke-dasharray` attribute (with its leading space) of a line of this shape's
    /// series; empty for a solid line.
    fn dash(self) -> &'static str {
        match self {
            Shape::Circle => "",
            Shape::Square => r#" stroke-dasharray="7 3""#,
            Shape::Triangle => r#" stroke-dasharray="2 2""#,
            Shape::Diamond => r#" stroke-dasharray="8 3 2 3""#,
        }
    }
}

/// How a series is drawn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Style {
    /// Circles, with whiskers where points have intervals.
    #[default]
    Markers,
    /// A polyline.
    Line,
    /// A staircase (for CDFs).
    Step,
}

/// One point, with optional 95 % intervals on either axis.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Point {
    /// x.
    pub x: f64,
    /// y.
    pub y: f64,
    /// x interval.
    pub x_ci: Option<(f64, f64)>,
    /// y interval.
    pub y_ci: Option<(f64, f64)>,
}

/// A named series.
#[derive(Clone, Debug, Default)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// Points, drawn in order.
    pub points: Vec<Point>,
    /// Drawing style.
    pub style: Style,
    /// CSS colour.
    pub color: String,
    /// Marker shape and line dash (see [`shape`]).
    pub shape: Shape,
    /// Markers drawn hollow (a configuration that failed a stability rule).
    pub hollow: bool,
    /// Said on hover over each point and the legend entry (why it is hollow).
    pub note: Option<String>,
}

/// A chart.
#[derive(Clone, Debug)]
pub struct Chart {
    /// Element id (for tests and links).
    pub id: String,
    /// Title.
    pub title: String,
    /// x-axis label with unit.
    pub x_label: String,
    /// y-axis label with unit.
    pub y_label: String,
    /// Logarithmic x axis.
    pub x_log: bool,
    /// Series.
    pub series: Vec<Series>,
    /// Shaded x ranges with a caption.
    pub bands: Vec<(f64, f64, String)>,
    /// Horizontal reference lines (a baseline power) with a caption.
    pub hlines: Vec<(f64, String)>,
    /// Vertical markers (where a phase began) with a caption.
    pub vlines: Vec<(f64, String)>,
    /// The y axis starts at zero (power, energy), so a small change does not fill the height.
    pub y_from_zero: bool,
}

/// The chart's own style, inside the `<svg>`: a chart downloaded on its own looks as it does
/// in the report. Every selector starts at `svg.plot`, so inline in a page it styles charts only.
const SVG_CSS: &str = "svg.plot{font-family:system-ui,sans-serif;background:#fff}\
svg.plot .title{font-size:14px;font-weight:600}svg.plot .tick,svg.plot .legend{font-size:11px}\
svg.plot .label{font-size:12px}svg.plot .grid{stroke:#eee}svg.plot .frame{fill:none;stroke:#999}\
svg.plot .band{fill:#2a7ab0;fill-opacity:0.12}svg.plot .line{stroke-width:1.6}\
svg.plot .whisker{stroke-width:1.2}svg.plot .hline{stroke:#555;stroke-dasharray:5 4}\
svg.plot .vline{stroke:#999;stroke-dasharray:2 3}";

const W: f64 = 820.0;
const H: f64 = 400.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 280.0;
const TOP: f64 = 36.0;
const BOTTOM: f64 = 52.0;

/// Escapes text for XML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Round tick positions covering `[lo, hi]` (steps of 1, 2 or 5 × 10^k).
pub fn ticks(lo: f64, hi: f64, target: usize) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite()) || hi <= lo {
        return vec![lo];
    }
    let raw = (hi - lo) / target.max(1) as f64;
    let exp = raw.log10().floor() as i32;
    let mag = 10f64.powi(exp);
    let mult = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .find(|m| m * mag >= raw)
        .unwrap_or(10.0);
    // Ticks are k × mult × 10^exp; dividing by 10^-exp (not multiplying by a rounded
    // power) keeps 0.3 from printing as 0.30000000000000004.
    let at = |k: f64| {
        if exp < 0 {
            k * mult / 10f64.powi(-exp)
        } else {
            k * mult * mag
        }
    };
    let step = mult * mag;
    let first = (lo / step).ceil();
    (0..50)
        .map(|i| at(first + f64::from(i)))
        .take_while(|t| *t <= hi + step * 1e-9)
        .collect()
}

fn fmt_tick(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if !(1e-3..1e5).contains(&a) {
        format!("{v:.0e}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

struct Axis {
    lo: f64,
    hi: f64,
    log: bool,
    px0: f64,
    px1: f64,
}

impl Axis {
    fn new(values: impl Iterator<Item = f64>, log: bool, px0: f64, px1: f64) -> Self {
        let vals: Vec<f64> = values
            .filter(|v| v.is_finite() && (!log || *v > 0.0))
            .map(|v| if log { v.log10() } else { v })
            .collect();
        let (mut lo, mut hi) = vals
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
                (a.min(*v), b.max(*v))
            });
        if !lo.is_finite() {
            (lo, hi) = (0.0, 1.0);
        }
        if hi - lo < 1e-12 {
            let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
            (lo, hi) = (lo - pad, hi + pad);
        } else {
            let pad = (hi - lo) * 0.05;
            (lo, hi) = (lo - pad, hi + pad);
        }
        Self {
            lo,
            hi,
            log,
            px0,
            px1,
        }
    }

    fn px(&self, v: f64) -> Option<f64> {
        let v = if self.log {
            if v <= 0.0 {
                return None;
            }
            v.log10()
        } else {
            v
        };
        v.is_finite()
            .then(|| self.px0 + (v - self.lo) / (self.hi - self.lo) * (self.px1 - self.px0))
    }

    fn ticks(&self) -> Vec<f64> {
        if self.log {
            let (a, b) = (self.lo.floor() as i32, self.hi.ceil() as i32);
            (a..=b)
                .map(|e| 10f64.powi(e))
                .filter(|t| (self.lo..=self.hi).contains(&t.log10()))
                .collect()
        } else {
            ticks(self.lo, self.hi, 6)
        }
    }
}

impl Chart {
    /// A chart of `series` on linear axes with y from zero, and no bands or marker lines.
    pub fn new(
        id: impl Into<String>,
        title: impl Into<String>,
        (x_label, y_label): (&str, &str),
        series: Vec<Series>,
    ) -> Chart {
        Chart {
            id: id.into(),
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            x_log: false,
            series,
            bands: Vec::new(),
            hlines: Vec::new(),
            vlines: Vec::new(),
            y_from_zero: true,
        }
    }

    /// The chart as an inline `<svg>` element.
    pub fn render(&self) -> String {
        let all = || self.series.iter().flat_map(|s| s.points.iter());
        let xs = all()
            .flat_map(|p| [Some(p.x), p.x_ci.map(|c| c.0), p.x_ci.map(|c| c.1)])
            .flatten()
            .chain(self.bands.iter().flat_map(|b| [b.0, b.1]))
            .chain(self.vlines.iter().map(|v| v.0));
        let ys = all()
            .flat_map(|p| [Some(p.y), p.y_ci.map(|c| c.0), p.y_ci.map(|c| c.1)])
            .flatten()
            .chain(self.hlines.iter().map(|h| h.0))
            .chain(self.y_from_zero.then_some(0.0));
        let x = Axis::new(xs, self.x_log, LEFT, W - RIGHT);
        let mut y = Axis::new(ys, false, H - BOTTOM, TOP);
        if self.y_from_zero && y.lo < 0.0 {
            y.lo = 0.0;
        }
        let legends: Vec<Vec<String>> = self.series.iter().map(|s| legend_lines(&s.name)).collect();
        let legend_px: f64 = legends
            .iter()
            .map(|l| LEGEND_LINE * l.len() as f64 + LEGEND_GAP)
            .sum();
        // A long title takes more lines; the plot moves down by them.
        let title = wrap(&self.title, TITLE_CHARS);
        let drop = TITLE_LINE * (title.len().max(1) - 1) as f64;
        // The plot keeps its size; a long legend lengthens the picture below it.
        let total_h = drop + H.max(TOP + 14.0 + legend_px);
        let mut s = String::new();
        let _ = write!(
            s,
            r#"<svg id="{}" class="plot" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {total_h}" width="{W}" height="{total_h}" role="img" aria-label="{}">"#,
            esc(&self.id),
            esc(&self.title)
        );
        let _ = write!(s, "<style>{SVG_CSS}</style>");
        let _ = write!(s, r#"<text x="{LEFT}" y="20" class="title">"#);
        for (k, l) in title.iter().enumerate() {
            let _ = write!(
                s,
                r#"<tspan x="{LEFT}" dy="{}">{}</tspan>"#,
                if k == 0 { 0.0 } else { TITLE_LINE },
                esc(l)
            );
        }
        s.push_str("</text>");
        let _ = write!(s, r#"<g transform="translate(0 {drop})">"#);
        self.bands(&mut s, &x);
        self.axes(&mut s, &x, &y);
        self.captions(&mut s, &x, &y);
        let mut ly = TOP + 14.0;
        for (ser, lines) in self.series.iter().zip(&legends) {
            let c = esc(&ser.color);
            let _ = write!(s, r#"<g class="series" data-name="{}">"#, esc(&ser.name));
            match ser.style {
                Style::Markers => markers(&mut s, ser, (&x, &y), &c),
                Style::Line | Style::Step => line(&mut s, ser, (&x, &y), &c),
            }
            legend(&mut s, ser, lines, ly, &c);
            ly += LEGEND_LINE * lines.len() as f64 + LEGEND_GAP;
        }
        s.push_str("</g></svg>");
        s
    }

    /// The reference lines (baselines) and phase markers with their captions, each caption
    /// where it covers no other: a baseline's above or below its line at either end, a
    /// phase's beside its line in the first free row, turned left at the plot's right edge.
    fn captions(&self, s: &mut String, x: &Axis, y: &Axis) {
        let mut placer = Placer::new(TextBox {
            x0: LEFT,
            y0: TOP,
            x1: W - RIGHT,
            y1: H - BOTTOM,
        });
        for (v, caption) in &self.hlines {
            let Some(py) = y.px(*v) else { continue };
            let _ = write!(
                s,
                r#"<line class="hline" x1="{LEFT}" y1="{py:.1}" x2="{}" y2="{py:.1}"><title>{}</title></line>"#,
                W - RIGHT,
                esc(caption)
            );
            let (above, below) = (py - 5.0, py + 14.0);
            let at = [
                (W - RIGHT - 4.0, above, Anchor::End),
                (W - RIGHT - 4.0, below, Anchor::End),
                (LEFT + 4.0, above, Anchor::Start),
                (LEFT + 4.0, below, Anchor::Start),
            ];
            if let Some(p) = placer.place(caption, TICK_PX, &at) {
                caption_text(s, p, caption);
            }
        }
        for (v, caption) in &self.vlines {
            let Some(px) = x.px(*v) else { continue };
            let _ = write!(
                s,
                r#"<line class="vline" x1="{px:.1}" y1="{TOP}" x2="{px:.1}" y2="{}"><title>{}</title></line>"#,
                H - BOTTOM,
                esc(caption)
            );
            let at: Vec<(f64, f64, Anchor)> = (0..8)
                .flat_map(|k| {
                    let row = TOP + 12.0 + CAPTION_ROW * f64::from(k);
                    [(px + 3.0, row, Anchor::Start), (px - 3.0, row, Anchor::End)]
                })
                .collect();
            if let Some(p) = placer.place(caption, TICK_PX, &at) {
                caption_text(s, p, caption);
            }
        }
    }

    /// The shaded bands (measurement windows), with their captions as tooltips.
    fn bands(&self, s: &mut String, x: &Axis) {
        for (a, b, caption) in &self.bands {
            if let (Some(pa), Some(pb)) = (x.px(*a), x.px(*b)) {
                let _ = write!(
                    s,
                    r#"<rect class="band" x="{pa:.1}" y="{TOP}" width="{:.1}" height="{:.1}"><title>{}</title></rect>"#,
                    (pb - pa).max(0.5),
                    H - BOTTOM - TOP,
                    esc(caption)
                );
            }
        }
    }

    /// Grid lines and ticks of both axes, the frame, and the axis labels.
    fn axes(&self, s: &mut String, x: &Axis, y: &Axis) {
        for t in x.ticks() {
            if let Some(p) = x.px(t) {
                let _ = write!(
                    s,
                    r#"<line class="grid" x1="{p:.1}" y1="{TOP}" x2="{p:.1}" y2="{}"/><text x="{p:.1}" y="{}" class="tick" text-anchor="middle">{}</text>"#,
                    H - BOTTOM,
                    H - BOTTOM + 18.0,
                    fmt_tick(t)
                );
            }
        }
        for t in y.ticks() {
            if let Some(p) = y.px(t) {
                let _ = write!(
                    s,
                    r#"<line class="grid" x1="{LEFT}" y1="{p:.1}" x2="{}" y2="{p:.1}"/><text x="{}" y="{:.1}" class="tick" text-anchor="end">{}</text>"#,
                    W - RIGHT,
                    LEFT - 8.0,
                    p + 4.0,
                    fmt_tick(t)
                );
            }
        }
        let _ = write!(
            s,
            r#"<rect class="frame" x="{LEFT}" y="{TOP}" width="{}" height="{}"/>"#,
            W - RIGHT - LEFT,
            H - BOTTOM - TOP
        );
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{}" class="label" text-anchor="middle">{}</text><text x="16" y="{:.1}" class="label" text-anchor="middle" transform="rotate(-90 16 {:.1})">{}</text>"#,
            (LEFT + W - RIGHT) / 2.0,
            H - 12.0,
            esc(&self.x_label),
            (TOP + H - BOTTOM) / 2.0,
            (TOP + H - BOTTOM) / 2.0,
            esc(&self.y_label)
        );
    }
}

/// A series as points with their confidence whiskers.
fn markers(s: &mut String, ser: &Series, (x, y): (&Axis, &Axis), c: &str) {
    for p in &ser.points {
        let (Some(px), Some(py)) = (x.px(p.x), y.px(p.y)) else {
            continue;
        };
        if let Some((lo, hi)) = p.y_ci
            && let (Some(a), Some(b)) = (y.px(lo), y.px(hi))
        {
            let _ = write!(
                s,
                r#"<line class="whisker" x1="{px:.1}" y1="{a:.1}" x2="{px:.1}" y2="{b:.1}" stroke="{c}"/>"#
            );
        }
        if let Some((lo, hi)) = p.x_ci
            && let (Some(a), Some(b)) = (x.px(lo), x.px(hi))
        {
            let _ = write!(
                s,
                r#"<line class="whisker" x1="{a:.1}" y1="{py:.1}" x2="{b:.1}" y2="{py:.1}" stroke="{c}"/>"#
            );
        }
        let (fill, class) = if ser.hollow {
            ("none", "point hollow")
        } else {
            (c, "point")
        };
        let note = ser
            .note
            .as_deref()
            .map(|n| format!(" ({})", esc(n)))
            .unwrap_or_default();
        let _ = write!(
            s,
            r#"<{} class="{class}" fill="{fill}" stroke="{c}" stroke-width="1.6"><title>{}: x={}, y={}{note}</title></{}>"#,
            ser.shape.element((px, py), 4.0),
            esc(&ser.name),
            fmt_tick(p.x),
            fmt_tick(p.y),
            ser.shape.tag()
        );
    }
}

/// A series as a line, or a staircase for [`Style::Step`]; points off the axes are skipped.
fn line(s: &mut String, ser: &Series, (x, y): (&Axis, &Axis), c: &str) {
    let mut d = String::new();
    let mut prev_y: Option<f64> = None;
    for p in &ser.points {
        let (Some(px), Some(py)) = (x.px(p.x), y.px(p.y)) else {
            continue;
        };
        match (d.is_empty(), ser.style, prev_y) {
            (true, _, _) => {
                let _ = write!(d, "M{px:.1},{py:.1}");
            }
            (false, Style::Step, Some(last)) => {
                let _ = write!(d, " L{px:.1},{last:.1} L{px:.1},{py:.1}");
            }
            _ => {
                let _ = write!(d, " L{px:.1},{py:.1}");
            }
        }
        prev_y = Some(py);
    }
    if !d.is_empty() {
        let dash = ser.shape.dash();
        let _ = write!(
            s,
            r#"<path class="line" d="{d}" stroke="{c}" fill="none"{dash}/>"#
        );
    }
}

/// A caption of a reference line or phase marker at its placed position.
fn caption_text(s: &mut String, (x, y, anchor): (f64, f64, Anchor), caption: &str) {
    let a = match anchor {
        Anchor::Start => "start",
        Anchor::End => "end",
    };
    let _ = write!(
        s,
        r#"<text x="{x:.1}" y="{y:.1}" class="tick caption" text-anchor="{a}">{}</text>"#,
        esc(caption)
    );
}

/// Size of tick, caption and legend text, px (the style's 11px).
const TICK_PX: f64 = 11.0;
/// Distance between rows of phase captions, px: a caption's box is under 14 px tall.
const CAPTION_ROW: f64 = 14.0;
/// Line height of the title, px, and the characters of it that fit on one line.
const TITLE_LINE: f64 = 18.0;
const TITLE_CHARS: usize = 80;

/// Height of a legend line and the gap between entries, px.
const LEGEND_LINE: f64 = 14.0;
const LEGEND_GAP: f64 = 4.0;
/// Characters of legend text that fit beside the plot on one line (the 250 px right of
/// the swatch at the estimated width of a character).
const LEGEND_CHARS: usize = 36;

/// A legend name in lines that fit beside the plot.
fn legend_lines(name: &str) -> Vec<String> {
    wrap(name, LEGEND_CHARS)
}

/// `text` in lines of at most `width` characters: broken after `, ` where it can be (a
/// label's parts stay whole, so the part that tells two configurations apart is never cut),
/// else at the width.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut cur = String::new();
    for part in text.split_inclusive(", ") {
        if !cur.is_empty() && cur.chars().count() + part.trim_end().chars().count() > width {
            lines.push(cur.trim_end().to_string());
            cur = String::new();
        }
        cur.push_str(part);
        while cur.chars().count() > width {
            let head: String = cur.chars().take(width).collect();
            cur = cur.chars().skip(width).collect();
            lines.push(head);
        }
    }
    if !cur.trim().is_empty() || lines.is_empty() {
        lines.push(cur.trim_end().to_string());
    }
    lines
}

/// The legend entry of a series at `ly`, closing its group: every line of its name, the
/// whole (with its note) on hover.
fn legend(s: &mut String, ser: &Series, lines: &[String], ly: f64, c: &str) {
    let lx = W - RIGHT + 12.0;
    let fill = if ser.hollow { "none" } else { c };
    let whole = match &ser.note {
        Some(n) => format!("{} ({n})", ser.name),
        None => ser.name.clone(),
    };
    // The swatch is what the series draws: its marker, or a stretch of its line.
    match ser.style {
        Style::Markers => {
            let _ = write!(
                s,
                r#"<{} class="swatch" fill="{fill}" stroke="{c}" stroke-width="1.6"/>"#,
                ser.shape.element((lx + 5.0, ly - 4.0), 4.0)
            );
        }
        Style::Line | Style::Step => {
            let dash = ser.shape.dash();
            let _ = write!(
                s,
                r#"<line class="swatch" x1="{lx}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{c}" stroke-width="2"{dash}/>"#,
                ly - 4.0,
                lx + 10.0,
                ly - 4.0
            );
        }
    }
    let _ = write!(
        s,
        r#"<text x="{:.1}" y="{ly:.1}" class="legend"><title>{}</title>"#,
        lx + 14.0,
        esc(&whole)
    );
    for (k, l) in lines.iter().enumerate() {
        let _ = write!(
            s,
            r#"<tspan x="{:.1}" dy="{}">{}</tspan>"#,
            lx + 14.0,
            if k == 0 { 0.0 } else { LEGEND_LINE },
            esc(l)
        );
    }
    s.push_str("</text></g>");
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn legend_names_wrap_at_their_parts_and_never_lose_one() {
        assert_eq!(
            legend_lines("llamacpp.batch_size=1, decoder.preset=deterministic"),
            ["llamacpp.batch_size=1,", "decoder.preset=deterministic"]
        );
        assert_eq!(legend_lines("short"), ["short"]);
        let long = "x".repeat(90);
        let l = legend_lines(&long);
        assert_eq!(l.concat(), long);
        assert!(l.iter().all(|x| x.chars().count() <= LEGEND_CHARS));
    }

    #[test]
    fn round_ticks() {
        assert_eq!(ticks(0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(ticks(0.13, 0.52, 4), vec![0.2, 0.3, 0.4, 0.5]);
        assert_eq!(ticks(3.0, 3.0, 4), vec![3.0]);
    }

    #[test]
    fn renders_escaped_text_points_and_bands() {
        let c = Chart {
            id: "p".into(),
            title: "a <b> & c".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            x_log: false,
            series: vec![Series {
                name: "s\"1".into(),
                points: vec![
                    Point {
                        x: 1.0,
                        y: 2.0,
                        y_ci: Some((1.5, 2.5)),
                        ..Point::default()
                    },
                    Point {
                        x: 2.0,
                        y: f64::NAN,
                        ..Point::default()
                    },
                ],
                style: Style::Markers,
                color: color(0),
                ..Series::default()
            }],
            bands: vec![(0.5, 1.5, "window".into())],
            hlines: Vec::new(),
            vlines: Vec::new(),
            y_from_zero: false,
        };
        let svg = c.render();
        assert!(svg.contains("a &lt;b&gt; &amp; c"));
        assert!(svg.contains("s&quot;1"));
        assert_eq!(svg.matches("class=\"point\"").count(), 1);
        assert_eq!(svg.matches("class=\"whisker\"").count(), 1);
        assert!(svg.contains("class=\"band\""));
        assert!(!svg.contains("NaN"));
    }

    #[test]
    fn twelve_series_look_twelve_ways() {
        let looks: std::collections::BTreeSet<(String, String)> = (0..12)
            .map(|i| (color(i), format!("{:?}", shape(i))))
            .collect();
        assert_eq!(looks.len(), 12);
        assert_eq!(shape(8), Shape::Square);
        let c = Chart::new(
            "p",
            "t",
            ("x", "y"),
            (0..12)
                .map(|i| Series {
                    name: format!("s{i}"),
                    points: vec![Point {
                        x: i as f64,
                        y: 1.0,
                        ..Point::default()
                    }],
                    color: color(i),
                    shape: shape(i),
                    ..Series::default()
                })
                .collect(),
        );
        let svg = c.render();
        // Each point and its legend swatch in the series' shape.
        assert_eq!(svg.matches("<circle cx").count(), 16);
        assert_eq!(svg.matches("<rect x=").count(), 8);
    }

    #[test]
    fn phase_captions_that_begin_together_do_not_print_over_each_other() {
        let mut c = Chart::new(
            "p",
            "a title long enough to need a second line, because it names every field that sets the configuration apart",
            ("x", "y"),
            vec![Series {
                name: "power".into(),
                points: (0..100)
                    .map(|i| Point {
                        x: f64::from(i),
                        y: 18.0,
                        ..Point::default()
                    })
                    .collect(),
                style: Style::Line,
                ..Series::default()
            }],
        );
        c.hlines.push((18.8, "idle baseline 18.8 W".into()));
        c.vlines = vec![
            (1.0, "load".into()),
            (1.5, "warmup".into()),
            (2.0, "thermal floor".into()),
            (98.5, "teardown".into()),
        ];
        let svg = c.render();
        let captions: Vec<TextBox> = svg
            .split("<text ")
            .filter(|t| t.contains("class=\"tick caption\""))
            .map(|t| {
                let attr = |a: &str| -> f64 {
                    t.split(&format!("{a}=\""))
                        .nth(1)
                        .unwrap()
                        .split('"')
                        .next()
                        .unwrap()
                        .parse()
                        .unwrap()
                };
                let text = t.split('>').nth(1).unwrap().split('<').next().unwrap();
                let anchor = if t.contains("text-anchor=\"end\"") {
                    Anchor::End
                } else {
                    Anchor::Start
                };
                TextBox::of(text, TICK_PX, (attr("x"), attr("y")), anchor)
            })
            .collect();
        assert_eq!(captions.len(), 5);
        for (i, a) in captions.iter().enumerate() {
            assert!(a.x0 >= LEFT && a.x1 <= W - RIGHT, "{a:?} leaves the plot");
            for b in captions.iter().skip(i + 1) {
                let apart = a.x1 <= b.x0 || b.x1 <= a.x0 || a.y1 <= b.y0 || b.y1 <= a.y0;
                assert!(apart, "{a:?} and {b:?} overlap");
            }
        }
        // The title took two lines and the plot moved down by one.
        assert_eq!(svg.matches("<tspan x=\"70\"").count(), 2);
        assert!(svg.contains("<g transform=\"translate(0 18)\">"));
    }
}
