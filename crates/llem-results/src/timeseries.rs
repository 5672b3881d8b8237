//! `timeseries.parquet`: one row per telemetry sample per energy domain.
//!
//! Columns: `t` (seconds since the experiment start), `domain` (`gpu0`, `package-0`,
//! `dram-0`), `gpu_idx` (the GPU index of GPU rows, null for the others), `device_index` (GPU
//! or package index), `power_w`, `energy_j` (cumulative since the start of the recording),
//! `temperature_c`, `memory_used_mib`, `memory_total_mib`, `sm_clock_mhz`, `sm_util_pct`,
//! `mem_util_pct`, `throttle_reasons` (NVML bitmask), `power_avg_w` (the device's own 1-s
//! average power where it reports one beside the instant `power_w`: NVML's
//! `NVML_FI_DEV_POWER_AVERAGE`). Missing values are null. `t`, `gpu_idx`,
//! `power_w`, `temperature_c`, `memory_used_mib` and `sm_clock_mhz` are seed 001's names, so a
//! notebook written for the Python llem's sidecar reads this one; files written before the
//! rename (`t_s`, no `gpu_idx`) are still read.

use std::path::Path;
use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, Float64Array, Int32Array, RecordBatch, StringArray, UInt64Array,
};
use arrow_schema::{DataType, Field, Schema};

use crate::ResultsError;
use crate::parquet_io::{column, open, parquet_error, write_batch};

/// The columns of a timeseries, all of equal length.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TimeseriesColumns {
    /// Seconds since the experiment start (monotonic clock).
    pub t_s: Vec<f64>,
    /// Energy domain name.
    pub domain: Vec<String>,
    /// GPU index for GPU domains, `None` for CPU and DRAM domains (seed 001's `gpu_idx`).
    pub gpu_idx: Vec<Option<i32>>,
    /// Device index within the domain kind (GPU index, CPU package index).
    pub device_index: Vec<i32>,
    /// Power in watts.
    pub power_w: Vec<Option<f64>>,
    /// Energy in joules, cumulative since the recording started.
    pub energy_j: Vec<Option<f64>>,
    /// Temperature in degrees Celsius.
    pub temperature_c: Vec<Option<f64>>,
    /// Device memory in use, MiB.
    pub memory_used_mib: Vec<Option<f64>>,
    /// Device memory, MiB.
    pub memory_total_mib: Vec<Option<f64>>,
    /// SM (graphics) clock, MHz.
    pub sm_clock_mhz: Vec<Option<f64>>,
    /// SM (compute) utilisation, percent.
    pub sm_util_pct: Vec<Option<f64>>,
    /// Memory-controller utilisation, percent.
    pub mem_util_pct: Vec<Option<f64>>,
    /// Clock throttle reasons (NVML bitmask).
    pub throttle_reasons: Vec<Option<u64>>,
    /// The device's 1-s average power, W, where it reports one beside the instant power.
    pub power_avg_w: Vec<Option<f64>>,
}

impl TimeseriesColumns {
    /// Number of rows.
    pub fn len(&self) -> usize {
        self.t_s.len()
    }

    /// True when there are no rows.
    pub fn is_empty(&self) -> bool {
        self.t_s.is_empty()
    }

    fn schema() -> Schema {
        let f = |name: &str, t: DataType, nullable: bool| Field::new(name, t, nullable);
        Schema::new(vec![
            f("t", DataType::Float64, false),
            f("domain", DataType::Utf8, false),
            f("gpu_idx", DataType::Int32, true),
            f("device_index", DataType::Int32, false),
            f("power_w", DataType::Float64, true),
            f("energy_j", DataType::Float64, true),
            f("temperature_c", DataType::Float64, true),
            f("memory_used_mib", DataType::Float64, true),
            f("memory_total_mib", DataType::Float64, true),
            f("sm_clock_mhz", DataType::Float64, true),
            f("sm_util_pct", DataType::Float64, true),
            f("mem_util_pct", DataType::Float64, true),
            f("throttle_reasons", DataType::UInt64, true),
            f("power_avg_w", DataType::Float64, true),
        ])
    }

    fn batch(&self) -> Result<RecordBatch, arrow_schema::ArrowError> {
        let n = self.len();
        let lens = [
            self.domain.len(),
            self.gpu_idx.len(),
            self.device_index.len(),
            self.power_w.len(),
            self.energy_j.len(),
            self.temperature_c.len(),
            self.memory_used_mib.len(),
            self.memory_total_mib.len(),
            self.sm_clock_mhz.len(),
            self.sm_util_pct.len(),
            self.mem_util_pct.len(),
            self.throttle_reasons.len(),
            self.power_avg_w.len(),
        ];
        if lens.iter().any(|&l| l != n) {
            return Err(arrow_schema::ArrowError::InvalidArgumentError(format!(
                "columns of unequal length ({n} vs {lens:?})"
            )));
        }
        let f64s = |v: &Vec<Option<f64>>| -> ArrayRef { Arc::new(Float64Array::from(v.clone())) };
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Float64Array::from(self.t_s.clone())),
            Arc::new(StringArray::from_iter_values(self.domain.iter())),
            Arc::new(Int32Array::from(self.gpu_idx.clone())),
            Arc::new(Int32Array::from(self.device_index.clone())),
            f64s(&self.power_w),
            f64s(&self.energy_j),
            f64s(&self.temperature_c),
            f64s(&self.memory_used_mib),
            f64s(&self.memory_total_mib),
            f64s(&self.sm_clock_mhz),
            f64s(&self.sm_util_pct),
            f64s(&self.mem_util_pct),
            Arc::new(UInt64Array::from(self.throttle_reasons.clone())),
            f64s(&self.power_avg_w),
        ];
        RecordBatch::try_new(Arc::new(Self::schema()), columns)
    }
}

/// Writes a timeseries atomically (zstd-compressed Parquet), with `metadata` as file-level
/// key/value pairs (sampler, interval, llem version, ...).
pub fn write_timeseries(
    path: &Path,
    columns: &TimeseriesColumns,
    metadata: &[(&str, String)],
) -> Result<(), ResultsError> {
    let batch = columns
        .batch()
        .map_err(|e| parquet_error(path, e.to_string()))?;
    write_batch(path, &batch, metadata)
}

fn opt_f64(a: &Float64Array, i: usize) -> Option<f64> {
    a.is_valid(i).then(|| a.value(i))
}

/// Reads a timeseries written by [`write_timeseries`].
pub fn read_timeseries(path: &Path) -> Result<TimeseriesColumns, ResultsError> {
    let err = |e: &dyn std::fmt::Display| parquet_error(path, e.to_string());
    let reader = open(path)?;
    let mut out = TimeseriesColumns::default();
    for batch in reader {
        let batch = batch.map_err(|e| err(&e))?;
        // `t_s` is the name llem wrote before it took seed 001's `t`.
        let time_name = if batch.schema().column_with_name("t").is_some() {
            "t"
        } else {
            "t_s"
        };
        let t = column::<Float64Array>(&batch, time_name).map_err(|e| err(&e))?;
        let d = column::<StringArray>(&batch, "domain").map_err(|e| err(&e))?;
        let gpu = match batch.schema().column_with_name("gpu_idx") {
            Some(_) => Some(column::<Int32Array>(&batch, "gpu_idx").map_err(|e| err(&e))?),
            None => None,
        };
        let idx = column::<Int32Array>(&batch, "device_index").map_err(|e| err(&e))?;
        let cols: Vec<&Float64Array> = [
            "power_w",
            "energy_j",
            "temperature_c",
            "memory_used_mib",
            "memory_total_mib",
            "sm_clock_mhz",
            "sm_util_pct",
            "mem_util_pct",
        ]
        .iter()
        .map(|n| column::<Float64Array>(&batch, n))
        .collect::<Result<_, _>>()
        .map_err(|e| err(&e))?;
        let thr = column::<UInt64Array>(&batch, "throttle_reasons").map_err(|e| err(&e))?;
        // Files written before llem kept the average power apart have no such column.
        let avg = column::<Float64Array>(&batch, "power_avg_w").ok();
        for i in 0..batch.num_rows() {
            out.t_s.push(t.value(i));
            out.domain.push(d.value(i).to_string());
            out.gpu_idx
                .push(gpu.and_then(|g| g.is_valid(i).then(|| g.value(i))));
            out.device_index.push(idx.value(i));
            let targets: [&mut Vec<Option<f64>>; 8] = [
                &mut out.power_w,
                &mut out.energy_j,
                &mut out.temperature_c,
                &mut out.memory_used_mib,
                &mut out.memory_total_mib,
                &mut out.sm_clock_mhz,
                &mut out.sm_util_pct,
                &mut out.mem_util_pct,
            ];
            for (target, col) in targets.into_iter().zip(&cols) {
                target.push(opt_f64(col, i));
            }
            out.throttle_reasons
                .push(thr.is_valid(i).then(|| thr.value(i)));
            out.power_avg_w.push(avg.and_then(|a| opt_f64(a, i)));
        }
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn sample() -> TimeseriesColumns {
        TimeseriesColumns {
            t_s: vec![0.0, 0.1, 0.0],
            domain: vec!["gpu0".into(), "gpu0".into(), "package-0".into()],
            gpu_idx: vec![Some(0), Some(0), None],
            device_index: vec![0, 0, 0],
            power_w: vec![Some(100.0), Some(120.5), Some(30.0)],
            energy_j: vec![Some(0.0), Some(11.0), None],
            temperature_c: vec![Some(40.0), Some(41.0), None],
            memory_used_mib: vec![Some(1000.0), Some(1000.0), None],
            memory_total_mib: vec![Some(81559.0), Some(81559.0), None],
            sm_clock_mhz: vec![Some(1980.0), None, None],
            sm_util_pct: vec![Some(99.0), None, None],
            mem_util_pct: vec![Some(50.0), None, None],
            throttle_reasons: vec![Some(0), Some(4), None],
            power_avg_w: vec![Some(98.0), Some(101.0), None],
        }
    }

    #[test]
    fn round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("timeseries.parquet");
        write_timeseries(&p, &sample(), &[("llem.sampler", "auto".into())]).unwrap();
        assert_eq!(read_timeseries(&p).unwrap(), sample());
    }

    #[test]
    fn files_from_before_the_seed_names_still_read() {
        // The layout llem wrote before `t` and `gpu_idx`: `t_s`, no GPU index column.
        let c = sample();
        let batch = c.batch().unwrap();
        let keep: Vec<usize> = (0..batch.num_columns()).filter(|&i| i != 2).collect();
        let old = batch.project(&keep).unwrap();
        let mut fields: Vec<Field> = old
            .schema()
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        fields[0] = Field::new("t_s", DataType::Float64, false);
        let old =
            RecordBatch::try_new(Arc::new(Schema::new(fields)), old.columns().to_vec()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("old.parquet");
        write_batch(&p, &old, &[]).unwrap();
        let got = read_timeseries(&p).unwrap();
        assert_eq!(got.t_s, c.t_s);
        assert_eq!(got.gpu_idx, [None, None, None]);
        assert_eq!(got.power_w, c.power_w);
    }

    #[test]
    fn unequal_columns_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = sample();
        c.power_w.pop();
        assert!(write_timeseries(&dir.path().join("t.parquet"), &c, &[]).is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
