//! `server_metrics.parquet`: the serving engine's Prometheus series as scraped during a run,
//! one row per sample: `t_s` (seconds since the experiment start), `metric` (the exposition
//! name, `vllm:num_requests_running`), `labels` (the label set as written, `{a="b"}`, empty
//! when none) and `value`.

use std::path::Path;
use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use serde::{Deserialize, Serialize};

use crate::ResultsError;
use crate::parquet_io::{column, open, parquet_error, write_batch};

/// One scraped sample.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricSample {
    /// When the scrape's response arrived, s since the experiment start.
    pub t_s: f64,
    /// Metric name.
    pub metric: String,
    /// Label set as written (`{model_name="x"}`), empty when none.
    pub labels: String,
    /// Sample value.
    pub value: f64,
}

fn schema() -> Schema {
    Schema::new(vec![
        Field::new("t_s", DataType::Float64, false),
        Field::new("metric", DataType::Utf8, false),
        Field::new("labels", DataType::Utf8, false),
        Field::new("value", DataType::Float64, false),
    ])
}

/// Writes the samples atomically (zstd-compressed Parquet) with file-level metadata.
pub fn write_server_metrics(
    path: &Path,
    rows: &[MetricSample],
    metadata: &[(&str, String)],
) -> Result<(), ResultsError> {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.t_s))),
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| r.metric.as_str()),
        )),
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| r.labels.as_str()),
        )),
        Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.value))),
    ];
    let batch = RecordBatch::try_new(Arc::new(schema()), columns)
        .map_err(|e| parquet_error(path, e.to_string()))?;
    write_batch(path, &batch, metadata)
}

/// Reads a file written by [`write_server_metrics`].
pub fn read_server_metrics(path: &Path) -> Result<Vec<MetricSample>, ResultsError> {
    let err = |e: &dyn std::fmt::Display| parquet_error(path, e.to_string());
    let mut out = Vec::new();
    for batch in open(path)? {
        let b = batch.map_err(|e| err(&e))?;
        let t = column::<Float64Array>(&b, "t_s").map_err(|e| err(&e))?;
        let m = column::<StringArray>(&b, "metric").map_err(|e| err(&e))?;
        let l = column::<StringArray>(&b, "labels").map_err(|e| err(&e))?;
        let v = column::<Float64Array>(&b, "value").map_err(|e| err(&e))?;
        for i in 0..b.num_rows() {
            out.push(MetricSample {
                t_s: t.value(i),
                metric: m.value(i).to_string(),
                labels: l.value(i).to_string(),
                value: v.value(i),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("server_metrics.parquet");
        let rows = vec![
            MetricSample {
                t_s: 1.5,
                metric: "vllm:num_requests_running".into(),
                labels: r#"{model_name="m"}"#.into(),
                value: 7.0,
            },
            MetricSample {
                t_s: 2.5,
                metric: "llamacpp:requests_processing".into(),
                labels: String::new(),
                value: 2.0,
            },
        ];
        write_server_metrics(&p, &rows, &[]).unwrap();
        assert_eq!(read_server_metrics(&p).unwrap(), rows);
    }
}
