//! Parquet: the columns and order of ML.ENERGY's compiled `runs/llm.parquet`, plus llem's.

use super::{Exporter, Table};
use crate::RecordsError;

/// Parquet of every field (paths as loaded).
pub struct ParquetExporter;

impl Exporter for ParquetExporter {
    fn serialize(&self, runs: &dyn Table) -> Result<Vec<u8>, RecordsError> {
        let (batch, tag) = runs.record_batch()?;
        llem_results::parquet_io::encode_batch(&batch, &[("llem.records", tag.to_string())])
            .map_err(|e| RecordsError::Usage(format!("cannot encode the runs as Parquet: {e}")))
    }

    fn is_binary(&self) -> bool {
        true
    }
}
