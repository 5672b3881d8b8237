//! Markdown: a GitHub-flavoured table of the headline columns a reviewer reads first.

use super::Exporter;
use crate::records::RecordsError;
use crate::records::run::FieldValue;
use crate::records::runs::Runs;
use crate::records::table::cell;

/// Columns of the Markdown table: what a reviewer reads first.
pub const HEADLINE_FIELDS: &[&str] = &[
    "label",
    "cycle",
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

/// A Markdown table of [`HEADLINE_FIELDS`].
pub struct MarkdownExporter;

impl Exporter for MarkdownExporter {
    fn serialize(&self, runs: &Runs) -> Result<Vec<u8>, RecordsError> {
        let mut out = format!("| {} |\n", HEADLINE_FIELDS.join(" | "));
        let rule: Vec<&str> = HEADLINE_FIELDS.iter().map(|_| "---").collect();
        out.push_str(&format!("|{}|\n", rule.join("|")));
        for r in runs.iter() {
            let cells: Vec<String> = HEADLINE_FIELDS
                .iter()
                .map(|n| cell(r.field(n).unwrap_or(FieldValue::Null)).replace('|', "\\|"))
                .collect();
            out.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
        Ok(out.into_bytes())
    }
}
