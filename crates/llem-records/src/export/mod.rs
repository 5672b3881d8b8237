//! Exporters of a run collection ([`Runs`], [`DiffusionRuns`]) behind one trait, one file per
//! format: CSV, JSON and Parquet carry every field; Markdown carries the headline columns a
//! reader compares; BoAmps writes Boavizta's energy report per run; AI Energy Score gives
//! Hugging Face's GPU Wh per 1,000 queries and its star rating per configuration.

mod ai_energy_score;
mod boamps;
pub(crate) mod csv;
mod json;
mod markdown;
mod parquet;

pub use ai_energy_score::{
    AiEnergyScoreExporter, Bands, label_svg as ai_energy_score_label,
    to_bytes as ai_energy_score_bytes,
};
pub use boamps::{
    BoampsExporter, FORMAT_VERSION as BOAMPS_FORMAT_VERSION, report as boamps_report,
};
pub use csv::CsvExporter;
pub use json::{JsonExporter, to_json};
pub use markdown::{HEADLINE_FIELDS, MarkdownExporter};
pub use parquet::ParquetExporter;

use super::RecordsError;
use super::diffusion::{DIFFUSION_FIELDS, DiffusionRun};
use super::diffusion_runs::DiffusionRuns;
use super::run::{FieldValue, LlmRun};
use super::runs::Runs;

/// One row of a collection, by column name.
pub trait Record {
    /// The value of `column` (null when the row has none).
    fn value(&self, column: &str) -> FieldValue<'_>;
}

/// A text field of a row, `None` when null or empty.
fn text(r: &dyn Record, k: &str) -> Option<String> {
    match r.value(k) {
        FieldValue::Str(s) if !s.is_empty() => Some(s.to_string()),
        _ => None,
    }
}

/// A finite number of a row.
fn num(r: &dyn Record, k: &str) -> Option<f64> {
    r.value(k).as_f64().filter(|v| v.is_finite())
}

/// A count as an integer when it is whole (records keep counts as floats).
fn count(v: f64) -> serde_json::Value {
    if v >= 0.0 && v.fract() == 0.0 && v < 9.0e15 {
        serde_json::json!(v as u64)
    } else {
        serde_json::json!(v)
    }
}

/// A llem run's `result.json`, parsed; `None` for other sources or an unreadable file.
fn llem_result(r: &dyn Record) -> Option<serde_json::Value> {
    if text(r, "source").as_deref() != Some("llem") {
        return None;
    }
    let path = text(r, "results_path")?;
    let bytes = llem_config::files::read_record(std::path::Path::new(&path)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

impl Record for LlmRun {
    fn value(&self, column: &str) -> FieldValue<'_> {
        self.field(column).unwrap_or(FieldValue::Null)
    }
}

impl Record for DiffusionRun {
    fn value(&self, column: &str) -> FieldValue<'_> {
        self.field(column).unwrap_or(FieldValue::Null)
    }
}

/// What an exporter reads: a collection's columns and rows.
pub trait Table {
    /// Every column, in order.
    fn columns(&self) -> Vec<String>;
    /// The columns of the Markdown summary.
    fn headline(&self) -> &'static [&'static str];
    /// The rows, in order.
    fn rows(&self) -> Vec<&dyn Record>;
    /// The rows as a JSON array of objects.
    fn to_json(&self) -> serde_json::Value;
    /// The rows as one Arrow batch, and the `llem.records` tag of its Parquet file.
    fn record_batch(&self) -> Result<(arrow_array::RecordBatch, &'static str), RecordsError>;
}

impl Table for Runs {
    fn columns(&self) -> Vec<String> {
        self.column_names()
    }
    fn headline(&self) -> &'static [&'static str] {
        HEADLINE_FIELDS
    }
    fn rows(&self) -> Vec<&dyn Record> {
        self.iter().map(|r| r as &dyn Record).collect()
    }
    fn to_json(&self) -> serde_json::Value {
        to_json(self)
    }
    fn record_batch(&self) -> Result<(arrow_array::RecordBatch, &'static str), RecordsError> {
        Ok((self.to_record_batch()?, "llm"))
    }
}

/// Columns of the Markdown table of diffusion runs.
pub const DIFFUSION_HEADLINE: &[&str] = &[
    "task",
    "nickname",
    "gpu_model",
    "num_gpus",
    "batch_size",
    "inference_steps",
    "height",
    "width",
    "energy_per_generation_joules",
    "throughput_generations_per_sec",
    "batch_latency_s",
    "avg_power_watts",
];

impl Table for DiffusionRuns {
    fn columns(&self) -> Vec<String> {
        DIFFUSION_FIELDS
            .iter()
            .map(|(n, _)| (*n).to_string())
            .collect()
    }
    fn headline(&self) -> &'static [&'static str] {
        DIFFUSION_HEADLINE
    }
    fn rows(&self) -> Vec<&dyn Record> {
        self.iter().map(|r| r as &dyn Record).collect()
    }
    fn to_json(&self) -> serde_json::Value {
        DiffusionRuns::to_json(self)
    }
    fn record_batch(&self) -> Result<(arrow_array::RecordBatch, &'static str), RecordsError> {
        let v: Vec<&DiffusionRun> = self.iter().collect();
        let batch = super::compiled::record_batch(&v, DIFFUSION_FIELDS, None, |r, n| r.field(n))
            .map_err(|e| RecordsError::Usage(e.to_string()))?;
        Ok((batch, "diffusion"))
    }
}

/// Turns a collection of runs into the bytes of one file format.
pub trait Exporter {
    /// The file's contents.
    fn serialize(&self, runs: &dyn Table) -> Result<Vec<u8>, RecordsError>;
    /// True for formats that are not text (they go to a file, never to a terminal).
    fn is_binary(&self) -> bool {
        false
    }
}

/// The export formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// RFC 4180 CSV, every field.
    Csv,
    /// A JSON array, every field.
    Json,
    /// A Markdown table of the headline fields.
    Markdown,
    /// `runs/llm.parquet`-style Parquet, every field.
    Parquet,
    /// Boavizta's BoAmps energy report (1.1.0), one per run, as a JSON array.
    Boamps,
}

impl Format {
    /// The exporter of this format.
    pub fn exporter(self) -> Box<dyn Exporter> {
        match self {
            Format::Csv => Box::new(CsvExporter),
            Format::Json => Box::new(JsonExporter),
            Format::Markdown => Box::new(MarkdownExporter),
            Format::Parquet => Box::new(ParquetExporter),
            Format::Boamps => Box::new(BoampsExporter),
        }
    }
}
