//! Exporters of a [`Runs`] collection, one function per format: CSV and JSON carry every
//! field; Markdown carries the headline columns a reader compares.

use super::run::{FieldValue, all_fields};
use super::runs::Runs;

/// Columns of the Markdown table: what a reviewer reads first.
pub const HEADLINE_FIELDS: &[&str] = &[
    "model_id",
    "engine",
    "task",
    "gpu_model",
    "num_gpus",
    "max_num_seqs",
    "energy_per_token_joules",
    "output_throughput_tokens_per_sec",
    "avg_power_watts",
    "p50_itl_ms",
    "ttft_p99_ms",
    "is_stable",
    "unstable_reason",
];

fn csv_cell(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// RFC 4180 CSV with a header row; every field, empty for missing values.
pub fn to_csv(runs: &Runs) -> String {
    let names: Vec<&str> = all_fields().map(|(n, _)| n).collect();
    let mut out = names.join(",");
    out.push('\n');
    for r in runs.iter() {
        let row: Vec<String> = names
            .iter()
            .map(|n| csv_cell(&r.field(n).unwrap_or(FieldValue::Null).display()))
            .collect();
        out.push_str(&row.join(","));
        out.push('\n');
    }
    out
}

/// A JSON array, one object per run with the seed's field names (plus llem's).
pub fn to_json(runs: &Runs) -> serde_json::Value {
    serde_json::Value::Array(runs.iter().map(|r| r.to_json()).collect())
}

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

/// A GitHub-flavoured Markdown table of the headline columns.
pub fn to_markdown(runs: &Runs) -> String {
    let mut out = format!("| {} |\n", HEADLINE_FIELDS.join(" | "));
    out.push_str(&format!(
        "|{}|\n",
        HEADLINE_FIELDS
            .iter()
            .map(|_| "---")
            .collect::<Vec<_>>()
            .join("|")
    ));
    for r in runs.iter() {
        let cells: Vec<String> = HEADLINE_FIELDS
            .iter()
            .map(|n| cell(r.field(n).unwrap_or(FieldValue::Null)).replace('|', "\\|"))
            .collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out
}
