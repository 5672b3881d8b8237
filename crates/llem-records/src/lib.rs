//! `llem-records`: results read back. The records API (seed 002): `LlmRun`/`DiffusionRun`
//! records, loaders for llem study directories and ML.ENERGY raw and compiled data, the `Runs`
//! collection (filters, grouping, columns, Arrow/Parquet/CSV), per-request extraction; the
//! exporters (`export/`, one file per format) and the HTML report (`report/`). Derivations follow the reference
//! reader `mlenergy-data` 0.4.0 (`../shared/reference/mlenergy-raw-format.md`).

mod collection;
pub mod compare;
pub(crate) mod compiled;
pub mod diffusion;
pub mod diffusion_runs;
pub mod export;
pub mod extract;
pub(crate) mod itl;
pub mod labels;
pub(crate) mod lenient;
pub mod llem07;
pub(crate) mod llem_cells;
pub mod load;
pub(crate) mod parallelism;
pub(crate) mod pyfloat;
pub mod query;
pub(crate) mod raw_names;
pub mod raw_tree;
pub mod run;
pub mod runs;
pub mod search_doc;
pub(crate) mod stability;
pub mod table;
pub mod time_bins;

mod error;
pub mod report;

use std::path::{Path, PathBuf};

use serde_json::Value;

pub use diffusion::DiffusionRun;
pub use diffusion_runs::{DiffusionGroup, DiffusionRuns};
pub use error::{RecordsError, RunError};
pub use load::{Loaded, load_any};
pub use run::{FieldKind, FieldValue, LlmRun, RunSource};
pub use runs::Runs;

/// A run that was found but not loaded, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadIssue {
    /// Its results file.
    pub path: PathBuf,
    /// What is wrong.
    pub reason: String,
}

impl LoadIssue {
    /// An issue about `path`.
    pub fn new(path: &Path, reason: impl Into<String>) -> Self {
        Self {
            path: path.to_path_buf(),
            reason: reason.into(),
        }
    }
}

/// The reference reader's number conversion (§5.1): JSON numbers, strings holding a
/// decimal number, and booleans (1.0 / 0.0) convert; null, objects, arrays and other
/// strings are missing.
pub fn raw_number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => {
            // Python's float(): surrounding whitespace, and `_` between digits, allowed.
            let t = s.trim();
            t.parse::<f64>().ok().or_else(|| {
                let ok = t.contains('_')
                    && !t.contains("__")
                    && !t.starts_with('_')
                    && !t.ends_with('_');
                ok.then(|| t.replace('_', "").parse().ok()).flatten()
            })
        }
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        _ => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::raw_number;
    use serde_json::json;

    #[test]
    fn number_conversion_as_the_reference_reader() {
        assert_eq!(raw_number(&json!(3)), Some(3.0));
        assert_eq!(raw_number(&json!(45.5)), Some(45.5));
        assert_eq!(raw_number(&json!(" 45.5 ")), Some(45.5));
        assert_eq!(raw_number(&json!("1_000.5")), Some(1000.5));
        assert_eq!(raw_number(&json!("1e-3")), Some(0.001));
        assert_eq!(raw_number(&json!(true)), Some(1.0));
        assert_eq!(raw_number(&json!(false)), Some(0.0));
        for missing in [
            json!(null),
            json!("abc"),
            json!([1]),
            json!({"a": 1}),
            json!("1__0"),
        ] {
            assert_eq!(raw_number(&missing), None, "{missing}");
        }
    }
}
