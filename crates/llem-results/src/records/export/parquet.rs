//! Parquet: the columns and order of ML.ENERGY's compiled `runs/llm.parquet`, plus llem's.

use super::Exporter;
use crate::records::RecordsError;
use crate::records::runs::Runs;

/// Parquet of every field (paths as loaded).
pub struct ParquetExporter;

impl Exporter for ParquetExporter {
    fn serialize(&self, runs: &Runs) -> Result<Vec<u8>, RecordsError> {
        let batch = runs.to_record_batch()?;
        crate::parquet_io::encode_batch(&batch, &[("llem.records", "llm".to_string())])
            .map_err(RecordsError::Usage)
    }

    fn is_binary(&self) -> bool {
        true
    }
}
