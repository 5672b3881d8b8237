//! Plain-text tables for a terminal: numbers shortened, columns fitted to the width.

use super::run::FieldValue;

/// A number as a table shows it: four significant digits, no trailing noise.
pub fn short_number(v: f64) -> String {
    if !v.is_finite() {
        return String::new();
    }
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if !(1e-3..1e6).contains(&a) {
        format!("{v:.3e}")
    } else {
        let decimals = (3 - a.log10().floor() as i32).clamp(0, 6) as usize;
        format!("{v:.decimals$}")
    }
}

/// A field's value as a table cell.
pub fn cell(v: FieldValue<'_>) -> String {
    match v {
        FieldValue::Float(f) => short_number(f),
        other => other.display(),
    }
}

/// A plain-text table fitted to `width` columns. When it is too wide, columns whose value is
/// the same in every row go first (said once, in a line above the table), then columns from
/// the right (so order them most important first); the first (name) column is cut with `…`
/// to at most three fifths of the width.
pub fn fit_table(headers: &[&str], rows: &[Vec<String>], width: usize) -> String {
    let constant = |c: usize| {
        rows.len() > 1
            && rows
                .iter()
                .all(|r| r.get(c) == rows.first().and_then(|f| f.get(c)))
    };
    let full = layout(headers, rows, width);
    if !full.dropped || headers.len() < 3 {
        return full.text;
    }
    let keep: Vec<usize> = (0..headers.len())
        .filter(|c| *c == 0 || !constant(*c))
        .collect();
    if keep.len() == headers.len() {
        return full.text;
    }
    let shared: Vec<String> = (1..headers.len())
        .filter(|c| !keep.contains(c))
        .filter_map(|c| {
            let v = rows.first()?.get(c)?;
            let h = headers.get(c)?;
            (!v.is_empty()).then(|| format!("{h} {v}"))
        })
        .collect();
    let h: Vec<&str> = keep
        .iter()
        .filter_map(|c| headers.get(*c).copied())
        .collect();
    let r: Vec<Vec<String>> = rows
        .iter()
        .map(|row| keep.iter().filter_map(|c| row.get(*c).cloned()).collect())
        .collect();
    let mut out = String::new();
    if !shared.is_empty() {
        // Wrapped, not cut: these values are the table's too.
        let mut lines: Vec<String> = vec!["all rows:".into()];
        for item in &shared {
            let Some(last) = lines.last_mut() else { break };
            let first_on_line = last == "all rows:";
            let add = if first_on_line {
                format!(" {item}")
            } else {
                format!(" · {item}")
            };
            if !first_on_line && last.chars().count() + add.chars().count() > width.max(16) {
                lines.push(format!("  {item}"));
            } else {
                last.push_str(&add);
            }
        }
        for l in lines {
            out.push_str(&l);
            out.push('\n');
        }
    }
    out.push_str(&layout(&h, &r, width).text);
    out
}

/// A laid-out table, and whether columns had to be dropped.
struct Laid {
    text: String,
    dropped: bool,
}

fn layout(headers: &[&str], rows: &[Vec<String>], width: usize) -> Laid {
    let n = headers.len();
    let mut widths: Vec<usize> = (0..n)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .chain(headers.get(c).map(|h| h.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    if let Some(w0) = widths.first_mut() {
        // The name column may take three fifths: its text is what tells rows apart.
        *w0 = (*w0).min((width * 3 / 5).max(16));
    }
    let mut keep = n;
    while keep > 1 && widths.iter().take(keep).sum::<usize>() + 2 * (keep - 1) > width {
        keep -= 1;
    }
    let first_max = if keep == 1 {
        width.max(8)
    } else {
        widths.first().copied().unwrap_or(0)
    };
    let fmt_row = |cells: Vec<&str>| -> String {
        let mut line = String::new();
        for (c, cell) in cells.iter().enumerate().take(keep) {
            let w = if c == 0 {
                first_max.min(widths.first().copied().unwrap_or(0))
            } else {
                widths.get(c).copied().unwrap_or(0)
            };
            let mut text: String = cell.chars().collect();
            if text.chars().count() > w {
                text = text.chars().take(w.saturating_sub(1)).collect::<String>() + "…";
            }
            if c > 0 {
                line.push_str("  ");
            }
            // Text left-aligned in the first column, numbers right-aligned elsewhere.
            if c == 0 {
                line.push_str(&format!("{text:<w$}"));
            } else {
                line.push_str(&format!("{text:>w$}"));
            }
        }
        line.trim_end().to_string()
    };
    let mut out = fmt_row(headers.to_vec());
    out.push('\n');
    for r in rows {
        out.push_str(&fmt_row(r.iter().map(String::as_str).collect()));
        out.push('\n');
    }
    Laid {
        text: out,
        dropped: keep < n,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn tables_fit_the_terminal() {
        let rows = vec![
            vec![
                "a long configuration name".to_string(),
                "1.5".into(),
                "200".into(),
            ],
            vec!["short".to_string(), "10.25".into(), "3".into()],
        ];
        let wide = fit_table(&["config", "mJ/tok", "tok/s"], &rows, 80);
        assert!(wide.lines().next().unwrap().contains("tok/s"));
        let narrow = fit_table(&["config", "mJ/tok", "tok/s"], &rows, 28);
        assert!(!narrow.contains("tok/s") && narrow.contains("mJ/tok"));
        assert!(narrow.lines().all(|l| l.chars().count() <= 28));
        let tiny = fit_table(&["config", "mJ/tok"], &rows, 10);
        assert!(tiny.lines().all(|l| l.chars().count() <= 16), "{tiny}");
    }

    #[test]
    fn constant_columns_go_first_and_are_said_once() {
        let rows: Vec<Vec<String>> = [("batch=1", "10.5", "4.0"), ("batch=4", "7.25", "9.5")]
            .iter()
            .map(|(a, b, c)| {
                vec![
                    a.to_string(),
                    "llamacpp".into(),
                    b.to_string(),
                    c.to_string(),
                    "SmolLM2-135M-Instruct".into(),
                ]
            })
            .collect();
        let h = ["run", "engine", "mJ/tok", "tok/s", "model"];
        // Wide enough: nothing moves.
        let wide = fit_table(&h, &rows, 120);
        assert!(wide.starts_with("run"), "{wide}");
        // Too narrow for all: the constant engine and model go, the metrics stay.
        let narrow = fit_table(&h, &rows, 32);
        assert!(
            narrow.starts_with("all rows: engine llamacpp\n  model SmolLM2"),
            "{narrow}"
        );
        let header = narrow.lines().nth(2).unwrap();
        assert!(
            header.contains("mJ/tok") && header.contains("tok/s"),
            "{narrow}"
        );
        assert!(!header.contains("engine"), "{narrow}");
        assert!(narrow.lines().all(|l| l.chars().count() <= 32), "{narrow}");
    }

    #[test]
    fn numbers_are_short() {
        assert_eq!(short_number(0.123456), "0.1235");
        assert_eq!(short_number(1234.5), "1234");
        assert_eq!(short_number(f64::NAN), "");
    }
}
