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

/// A plain-text table fitted to `width` columns: the first (name) column is cut with `…`
/// to at most a third of the width, then columns are dropped from the right until the rest
/// fit.
pub fn fit_table(headers: &[&str], rows: &[Vec<String>], width: usize) -> String {
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
        *w0 = (*w0).min((width / 3).max(16));
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
    out
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
    fn numbers_are_short() {
        assert_eq!(short_number(0.123456), "0.1235");
        assert_eq!(short_number(1234.5), "1234");
        assert_eq!(short_number(f64::NAN), "");
    }
}
