//! Where a chart's captions go: each takes the first of its candidate positions whose box
//! covers no text already placed, so phase names that begin close together stack instead of
//! printing over each other.

/// A text's box, px: left, top, right, bottom.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TextBox {
    /// Left edge.
    pub x0: f64,
    /// Top edge.
    pub y0: f64,
    /// Right edge.
    pub x1: f64,
    /// Bottom edge.
    pub y1: f64,
}

/// Which end of a text its x names (SVG's `text-anchor`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Anchor {
    /// x is where the text begins.
    Start,
    /// x is where the text ends.
    End,
}

/// Width of one character of chart text, in ems: a little over system-ui's widest average
/// (digits and lower case), so an estimated box holds the drawn one.
const EM_PER_CHAR: f64 = 0.62;

impl TextBox {
    /// The box of `text` drawn at `size_px` with its baseline at `y` and `anchor` at `x`.
    pub fn of(text: &str, size_px: f64, (x, y): (f64, f64), anchor: Anchor) -> TextBox {
        let w = text.chars().count() as f64 * size_px * EM_PER_CHAR;
        let x0 = match anchor {
            Anchor::Start => x,
            Anchor::End => x - w,
        };
        // Chromium's box of system-ui text reaches 0.91 em above the baseline and 0.27 em
        // below; a little more of each.
        TextBox {
            x0,
            y0: y - 0.95 * size_px,
            x1: x0 + w,
            y1: y + 0.3 * size_px,
        }
    }

    fn overlaps(&self, o: &TextBox) -> bool {
        self.x0 < o.x1 && o.x0 < self.x1 && self.y0 < o.y1 && o.y0 < self.y1
    }

    fn within(&self, area: &TextBox) -> bool {
        self.x0 >= area.x0 && self.x1 <= area.x1 && self.y0 >= area.y0 && self.y1 <= area.y1
    }
}

/// The text placed so far on a chart, and the area captions must stay in.
#[derive(Debug)]
pub struct Placer {
    taken: Vec<TextBox>,
    area: TextBox,
}

impl Placer {
    /// Nothing placed; captions stay inside `area`.
    pub fn new(area: TextBox) -> Placer {
        Placer {
            taken: Vec::new(),
            area,
        }
    }

    /// The first candidate (x, baseline y, anchor) where `text` covers nothing placed and
    /// stays in the area, else the first candidate; the choice is taken.
    pub fn place(
        &mut self,
        text: &str,
        size_px: f64,
        candidates: &[(f64, f64, Anchor)],
    ) -> Option<(f64, f64, Anchor)> {
        let fits = |&(x, y, a): &(f64, f64, Anchor)| {
            let b = TextBox::of(text, size_px, (x, y), a);
            b.within(&self.area) && !self.taken.iter().any(|t| t.overlaps(&b))
        };
        let chosen = candidates
            .iter()
            .copied()
            .find(fits)
            .or_else(|| candidates.first().copied())?;
        self.taken
            .push(TextBox::of(text, size_px, (chosen.0, chosen.1), chosen.2));
        Some(chosen)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn close_captions_stack_and_a_caption_at_the_edge_turns_left() {
        let area = TextBox {
            x0: 0.0,
            y0: 0.0,
            x1: 200.0,
            y1: 100.0,
        };
        let mut p = Placer::new(area);
        let rows = |x: f64| -> Vec<(f64, f64, Anchor)> {
            (0..4)
                .flat_map(|k| {
                    let y = 12.0 + 14.0 * f64::from(k);
                    [(x + 3.0, y, Anchor::Start), (x - 3.0, y, Anchor::End)]
                })
                .collect()
        };
        assert_eq!(
            p.place("load", 11.0, &rows(10.0)),
            Some((13.0, 12.0, Anchor::Start))
        );
        // Two pixels later: the first row is taken, so the second.
        assert_eq!(
            p.place("warmup", 11.0, &rows(12.0)),
            Some((15.0, 26.0, Anchor::Start))
        );
        // At the right edge the text ends at the line.
        assert_eq!(
            p.place("teardown", 11.0, &rows(195.0)),
            Some((192.0, 12.0, Anchor::End))
        );
        assert_eq!(p.place("x", 11.0, &[]), None);
    }
}
