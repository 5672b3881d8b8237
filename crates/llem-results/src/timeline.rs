//! `timeline.parquet`: a run's measurement window in fixed-width time bins, one row per bin:
//! `start_s` and `end_s` (from the window's start), `energy_j` (headline devices),
//! `idle_energy_j` (the part spent with no request in flight), `power_w`, `output_tokens`,
//! `requests_started`, `requests_finished` and `mean_in_flight`. The bins add up to the
//! window's energy.

use std::path::Path;
use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, RecordBatch, UInt32Array, UInt64Array};
use arrow_schema::{DataType, Field, Schema};
use serde::{Deserialize, Serialize};

use crate::ResultsError;
use crate::parquet_io::{column, open, parquet_error, write_batch};

/// One bin of the window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimeBin {
    /// Its start, s from the window's start.
    pub start_s: f64,
    /// Its end, s from the window's start.
    pub end_s: f64,
    /// Energy in it, J.
    pub energy_j: f64,
    /// The part of it spent with no request in flight, J.
    pub idle_energy_j: f64,
    /// Mean power, W.
    pub power_w: f64,
    /// Output tokens that arrived in it.
    pub output_tokens: u64,
    /// Requests sent in it.
    pub requests_started: u32,
    /// Requests that ended in it.
    pub requests_finished: u32,
    /// Requests in flight, averaged over the bin.
    pub mean_in_flight: f64,
}

fn schema() -> Schema {
    let f = |n: &str, t: DataType| Field::new(n, t, false);
    Schema::new(vec![
        f("start_s", DataType::Float64),
        f("end_s", DataType::Float64),
        f("energy_j", DataType::Float64),
        f("idle_energy_j", DataType::Float64),
        f("power_w", DataType::Float64),
        f("output_tokens", DataType::UInt64),
        f("requests_started", DataType::UInt32),
        f("requests_finished", DataType::UInt32),
        f("mean_in_flight", DataType::Float64),
    ])
}

/// Writes the bins atomically (zstd-compressed Parquet) with file-level metadata.
pub fn write_timeline(
    path: &Path,
    bins: &[TimeBin],
    metadata: &[(&str, String)],
) -> Result<(), ResultsError> {
    let f64s = |g: fn(&TimeBin) -> f64| -> ArrayRef {
        Arc::new(Float64Array::from_iter_values(bins.iter().map(g)))
    };
    let columns: Vec<ArrayRef> = vec![
        f64s(|b| b.start_s),
        f64s(|b| b.end_s),
        f64s(|b| b.energy_j),
        f64s(|b| b.idle_energy_j),
        f64s(|b| b.power_w),
        Arc::new(UInt64Array::from_iter_values(
            bins.iter().map(|b| b.output_tokens),
        )),
        Arc::new(UInt32Array::from_iter_values(
            bins.iter().map(|b| b.requests_started),
        )),
        Arc::new(UInt32Array::from_iter_values(
            bins.iter().map(|b| b.requests_finished),
        )),
        f64s(|b| b.mean_in_flight),
    ];
    let batch = RecordBatch::try_new(Arc::new(schema()), columns)
        .map_err(|e| parquet_error(path, e.to_string()))?;
    write_batch(path, &batch, metadata)
}

/// Reads a file written by [`write_timeline`].
pub fn read_timeline(path: &Path) -> Result<Vec<TimeBin>, ResultsError> {
    let err = |e: &dyn std::fmt::Display| parquet_error(path, e.to_string());
    let mut out = Vec::new();
    for batch in open(path)? {
        let b = batch.map_err(|e| err(&e))?;
        let f = |n: &str| column::<Float64Array>(&b, n).map_err(|e| err(&e));
        let (start, end, energy, idle, power, in_flight) = (
            f("start_s")?,
            f("end_s")?,
            f("energy_j")?,
            f("idle_energy_j")?,
            f("power_w")?,
            f("mean_in_flight")?,
        );
        let tokens = column::<UInt64Array>(&b, "output_tokens").map_err(|e| err(&e))?;
        let started = column::<UInt32Array>(&b, "requests_started").map_err(|e| err(&e))?;
        let finished = column::<UInt32Array>(&b, "requests_finished").map_err(|e| err(&e))?;
        for i in 0..b.num_rows() {
            out.push(TimeBin {
                start_s: start.value(i),
                end_s: end.value(i),
                energy_j: energy.value(i),
                idle_energy_j: idle.value(i),
                power_w: power.value(i),
                output_tokens: tokens.value(i),
                requests_started: started.value(i),
                requests_finished: finished.value(i),
                mean_in_flight: in_flight.value(i),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("timeline.parquet");
        let bins = vec![
            TimeBin {
                start_s: 0.0,
                end_s: 10.0,
                energy_j: 1500.0,
                idle_energy_j: 600.0,
                power_w: 150.0,
                output_tokens: 5,
                requests_started: 2,
                requests_finished: 2,
                mean_in_flight: 0.8,
            },
            TimeBin {
                start_s: 10.0,
                end_s: 15.0,
                energy_j: 750.0,
                idle_energy_j: 750.0,
                power_w: 150.0,
                output_tokens: 0,
                requests_started: 0,
                requests_finished: 0,
                mean_in_flight: 0.0,
            },
        ];
        write_timeline(&p, &bins, &[("bin_seconds", "10".into())]).unwrap();
        assert_eq!(read_timeline(&p).unwrap(), bins);
    }
}
