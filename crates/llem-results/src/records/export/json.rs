//! JSON: an array of objects with the seed's field names (plus llem's).

use super::Exporter;
use crate::records::RecordsError;
use crate::records::runs::Runs;

/// A pretty-printed JSON array of every run.
pub struct JsonExporter;

/// A JSON array, one object per run with the seed's field names (plus llem's).
pub fn to_json(runs: &Runs) -> serde_json::Value {
    serde_json::Value::Array(runs.iter().map(|r| r.to_json()).collect())
}

impl Exporter for JsonExporter {
    fn serialize(&self, runs: &Runs) -> Result<Vec<u8>, RecordsError> {
        let mut out = serde_json::to_vec_pretty(&to_json(runs))
            .map_err(|e| RecordsError::Usage(format!("cannot write JSON: {e}")))?;
        out.push(b'\n');
        Ok(out)
    }
}
