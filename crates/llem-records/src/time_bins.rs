//! A llem run's window in time bins (`timeline.parquet`, named by its result's `timeline`),
//! read back beside the run.

use std::path::Path;

use llem_results::TimeBin;

use crate::error::RecordsError;
use crate::run::{LlmRun, RunSource};

impl LlmRun {
    /// The run's time bins: `None` for a run that is not llem's or wrote none (a result from
    /// before bins were written).
    pub fn time_bins(&self) -> Result<Option<Vec<TimeBin>>, RecordsError> {
        if self.extra.source != Some(RunSource::Llem) {
            return Ok(None);
        }
        let path = Path::new(&self.results_path);
        let bytes = llem_config::files::read_record(path).map_err(|e| RecordsError::Invalid {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        let v: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| RecordsError::Invalid {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?;
        let Some(file) = v.pointer("/timeline/file").and_then(|f| f.as_str()) else {
            return Ok(None);
        };
        // The sidecar sits beside result.json; a name that leaves the directory is not one.
        if Path::new(file).components().count() != 1 {
            return Err(RecordsError::Invalid {
                path: path.to_path_buf(),
                message: format!("timeline.file `{file}` is not a file beside it"),
            });
        }
        let bins = llem_results::read_timeline(&path.with_file_name(file))?;
        Ok(Some(bins))
    }
}

/// One time bin of one run.
#[derive(Clone, Debug, PartialEq)]
pub struct TimeBinRow {
    /// The run.
    pub run: crate::extract::RunKey,
    /// The bin.
    pub bin: TimeBin,
}

impl crate::Runs {
    /// Every llem run's time bins, in run order (runs without bins add none).
    pub fn time_bins(&self) -> Result<Vec<TimeBinRow>, RecordsError> {
        let mut out = Vec::new();
        for r in self.iter() {
            let key = crate::extract::RunKey::of(r);
            for bin in r.time_bins()?.unwrap_or_default() {
                out.push(TimeBinRow {
                    run: key.clone(),
                    bin,
                });
            }
        }
        Ok(out)
    }
}
