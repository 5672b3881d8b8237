//! What every Parquet sidecar shares: zstd, file-level metadata, atomic replacement, and
//! typed column lookup when reading back.

use std::path::Path;

use arrow_array::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

use crate::ResultsError;
use crate::atomic::write_atomic_with;

/// A Parquet error about `path`.
pub fn parquet_error(path: &Path, message: String) -> ResultsError {
    ResultsError::Parquet {
        path: path.to_path_buf(),
        message,
    }
}

/// zstd compression and `metadata` as key/value pairs: how llem writes every Parquet file.
fn properties(metadata: &[(&str, String)]) -> WriterProperties {
    let kv: Vec<KeyValue> = metadata
        .iter()
        .map(|(k, v)| KeyValue::new((*k).to_string(), v.clone()))
        .collect();
    WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_key_value_metadata(Some(kv))
        .build()
}

/// Writes `batch` to `path` atomically, zstd-compressed, with `metadata` as key/value pairs.
pub fn write_batch(
    path: &Path,
    batch: &RecordBatch,
    metadata: &[(&str, String)],
) -> Result<(), ResultsError> {
    let props = properties(metadata);
    write_atomic_with(path, |file| {
        let mut w = ArrowWriter::try_new(file, batch.schema(), Some(props))
            .map_err(std::io::Error::other)?;
        w.write(batch).map_err(std::io::Error::other)?;
        w.close().map_err(std::io::Error::other)?;
        Ok(())
    })
}

/// The bytes of a Parquet file holding `batch`, written as [`write_batch`] writes them.
pub fn encode_batch(
    batch: &RecordBatch,
    metadata: &[(&str, String)],
) -> Result<Vec<u8>, parquet::errors::ParquetError> {
    let mut w = ArrowWriter::try_new(Vec::new(), batch.schema(), Some(properties(metadata)))?;
    w.write(batch)?;
    w.into_inner()
}

/// The record batches of `path`, read whole.
pub fn open(path: &Path) -> Result<std::vec::IntoIter<Batch>, ResultsError> {
    let file = llem_config::files::open_regular(path).map_err(|source| ResultsError::Io {
        what: "cannot open",
        path: path.to_path_buf(),
        source,
    })?;
    // The parquet crate asserts (panics) on some corrupt metadata instead of returning an
    // error (fuzzing found "column start and length should not be negative"): a corrupt
    // file in a results tree is an error of that file, not a crash of `llem results`.
    let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        ParquetRecordBatchReaderBuilder::try_new(file)
            .and_then(ParquetRecordBatchReaderBuilder::build)
            .map(|r: ParquetRecordBatchReader| {
                // Up to the first error: a corrupt file's reader may yield errors forever.
                let mut out: Vec<Batch> = Vec::new();
                for b in r {
                    let failed = b.is_err();
                    out.push(b);
                    if failed {
                        break;
                    }
                }
                out
            })
    }))
    .map_err(|_| parquet_error(path, "the Parquet reader failed on corrupt data".into()))?;
    read.map(Vec::into_iter)
        .map_err(|e| parquet_error(path, e.to_string()))
}

/// One record batch as the reader yields it.
type Batch = Result<RecordBatch, arrow_schema::ArrowError>;

/// A column a reader needs that a file does not have as it should.
#[derive(Debug, thiserror::Error)]
pub enum ColumnError {
    /// No column of that name.
    #[error("missing column {0}")]
    Missing(String),
    /// The column holds another type.
    #[error("column {0} has an unexpected type")]
    WrongType(String),
}

/// The column `name` of `batch` as array type `T`.
pub fn column<'a, T: 'static>(batch: &'a RecordBatch, name: &str) -> Result<&'a T, ColumnError> {
    batch
        .column_by_name(name)
        .ok_or_else(|| ColumnError::Missing(name.to_string()))?
        .as_any()
        .downcast_ref::<T>()
        .ok_or_else(|| ColumnError::WrongType(name.to_string()))
}
