//! Markdown: a GitHub-flavoured table of the headline columns a reviewer reads first.

use super::Exporter;
use super::Table;
use crate::RecordsError;
use crate::table::cell;

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
    fn serialize(&self, runs: &dyn Table) -> Result<Vec<u8>, RecordsError> {
        let fields = runs.headline();
        let mut out = format!("| {} |\n", fields.join(" | "));
        let rule: Vec<&str> = fields.iter().map(|_| "---").collect();
        out.push_str(&format!("|{}|\n", rule.join("|")));
        for r in runs.rows() {
            let cells: Vec<String> = fields
                .iter()
                .map(|n| cell(r.value(n)).replace('|', "\\|"))
                .collect();
            out.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
        Ok(out.into_bytes())
    }
}
