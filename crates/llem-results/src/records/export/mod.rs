//! Exporters of a [`Runs`] collection behind one trait, one file per format: CSV, JSON and
//! Parquet carry every field; Markdown carries the headline columns a reader compares.

mod csv;
mod json;
mod markdown;
mod parquet;

pub use csv::CsvExporter;
pub use json::{JsonExporter, to_json};
pub use markdown::{HEADLINE_FIELDS, MarkdownExporter};
pub use parquet::ParquetExporter;

use super::RecordsError;
use super::runs::Runs;

/// Turns a collection of runs into the bytes of one file format.
pub trait Exporter {
    /// The file's contents.
    fn serialize(&self, runs: &Runs) -> Result<Vec<u8>, RecordsError>;
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
}

impl Format {
    /// The exporter of this format.
    pub fn exporter(self) -> Box<dyn Exporter> {
        match self {
            Format::Csv => Box::new(CsvExporter),
            Format::Json => Box::new(JsonExporter),
            Format::Markdown => Box::new(MarkdownExporter),
            Format::Parquet => Box::new(ParquetExporter),
        }
    }
}
