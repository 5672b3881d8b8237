//! JSON: an array of objects with the seed's field names (plus llem's).

use super::{Exporter, Table};
use crate::RecordsError;
use crate::runs::Runs;

/// A pretty-printed JSON array of every run.
pub struct JsonExporter;

/// A JSON array, one object per run with the seed's field names (plus llem's, plus the
/// configuration paths the runs differ in).
pub fn to_json(runs: &Runs) -> serde_json::Value {
    let swept = runs.swept_paths();
    serde_json::Value::Array(
        runs.iter()
            .map(|r| {
                let mut v = r.to_json();
                if let Some(o) = v.as_object_mut() {
                    for p in &swept {
                        let x = r.field(p).map_or(serde_json::Value::Null, |f| f.to_json());
                        o.insert(p.clone(), x);
                    }
                }
                v
            })
            .collect(),
    )
}

impl Exporter for JsonExporter {
    fn serialize(&self, runs: &dyn Table) -> Result<Vec<u8>, RecordsError> {
        let mut out = serde_json::to_vec_pretty(&runs.to_json())
            .map_err(|e| RecordsError::Usage(format!("cannot write JSON: {e}")))?;
        out.push(b'\n');
        Ok(out)
    }
}
