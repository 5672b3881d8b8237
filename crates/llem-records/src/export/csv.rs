//! CSV: RFC 4180 with a header row, every field, empty for missing values.

use super::Exporter;
use super::Table;
use crate::RecordsError;

/// CSV of every field.
pub struct CsvExporter;

impl Exporter for CsvExporter {
    fn serialize(&self, runs: &dyn Table) -> Result<Vec<u8>, RecordsError> {
        let names = runs.columns();
        let mut out = names
            .iter()
            .map(|n| csv_cell(n))
            .collect::<Vec<_>>()
            .join(",");
        out.push('\n');
        for r in runs.rows() {
            let row: Vec<String> = names
                .iter()
                .map(|n| csv_cell(&r.value(n).display()))
                .collect();
            out.push_str(&row.join(","));
            out.push('\n');
        }
        Ok(out.into_bytes())
    }
}

/// One RFC 4180 field: quoted when it holds a comma, quote or line break.
pub(crate) fn csv_cell(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_what_needs_quoting() {
        assert_eq!(csv_cell("a,b"), "\"a,b\"");
        assert_eq!(csv_cell("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_cell("plain"), "plain");
    }
}
