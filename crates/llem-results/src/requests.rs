//! `requests.parquet`: one row per request of the measurement window.
//!
//! Columns: `request_id`, `batch_index`, `input_tokens`, `output_tokens`,
//! `reference_output_tokens` (the dataset's own reply length, when it has one),
//! `cached_input_tokens` (prompt tokens a server answered from its prefix cache), `submit_s`,
//! `first_token_s`, `end_s` (seconds since the experiment start), `success`, `error`,
//! `finish_reason` (`stop`, `length`, `error`), `token_times_s`, a list column with the
//! arrival time of every output token, and the headline energy attributed to the request:
//! `energy_j`, `prefill_energy_j`, `decode_energy_j` (null when it could not be attributed).

use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{Float64Builder, ListBuilder};
use arrow_array::{
    Array, ArrayRef, BooleanArray, Float64Array, ListArray, RecordBatch, StringArray, UInt32Array,
};
use arrow_schema::{DataType, Field, Schema};
use serde::{Deserialize, Serialize};

use crate::ResultsError;
use crate::parquet_io::{column, open, parquet_error, write_batch};

/// How a request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// An end-of-generation token.
    Stop,
    /// The output token limit (or the context) was reached.
    Length,
    /// The request failed.
    Error,
}

impl FinishReason {
    /// The name written to files.
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::Error => "error",
        }
    }

    fn parse(s: &str) -> Option<FinishReason> {
        match s {
            "stop" => Some(FinishReason::Stop),
            "length" => Some(FinishReason::Length),
            "error" => Some(FinishReason::Error),
            _ => None,
        }
    }
}

/// One request as the engine served it; times are seconds since the experiment start.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// Position of the request in the workload.
    pub request_id: u32,
    /// The batch it was decoded in (null for engines without batches).
    pub batch_index: Option<u32>,
    /// Prompt tokens after truncation.
    pub input_tokens: u32,
    /// Generated tokens.
    pub output_tokens: u32,
    /// Tokens of the dataset's reference reply (ShareGPT), when known.
    pub reference_output_tokens: Option<u32>,
    /// Prompt tokens the server answered from its prefix cache
    /// (`usage.prompt_tokens_details.cached_tokens`); null when it does not say.
    #[serde(default)]
    pub cached_input_tokens: Option<u32>,
    /// When the traffic schedule said to send it (serving engines; null offline). Latency
    /// from this time counts queueing in the client too, so it is coordinated-omission safe.
    pub scheduled_s: Option<f64>,
    /// When the request entered the engine (sent, for serving engines).
    pub submit_s: f64,
    /// When its first output token arrived.
    pub first_token_s: Option<f64>,
    /// When it finished.
    pub end_s: f64,
    /// False when the request failed.
    pub success: bool,
    /// Why it failed.
    pub error: Option<String>,
    /// How it ended.
    pub finish_reason: FinishReason,
    /// Arrival time of every output token.
    pub token_times_s: Vec<f64>,
    /// The window's energy attributed to this request (set by the harness after the run).
    #[serde(default)]
    pub energy: Option<RequestEnergy>,
    /// The conversation and turn it belongs to (multi-turn traffic); null otherwise.
    #[serde(default)]
    pub session: Option<SessionTurn>,
}

/// Where a request sits in a multi-turn conversation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionTurn {
    /// The conversation.
    pub session_id: u32,
    /// The turn, 0 for its first message.
    pub turn: u32,
}

/// The headline energy one request is attributed, J.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestEnergy {
    /// Everything attributed to it: its prefill and decode shares and its share of the
    /// window's time between passes, so the requests' energies add up to the window's.
    pub energy_j: f64,
    /// Its share of the prefill passes it was in (served: while awaiting its first token).
    pub prefill_energy_j: f64,
    /// Its share of the decode passes it was in (served: while streaming).
    pub decode_energy_j: f64,
    /// The whole node's energy attributed the same way (a node power sensor's readings,
    /// interpolated between its polls); null without one.
    #[serde(default)]
    pub node_energy_j: Option<f64>,
}

impl RequestRecord {
    /// Time to first token, s.
    pub fn ttft_s(&self) -> Option<f64> {
        self.first_token_s.map(|f| f - self.submit_s)
    }

    /// End-to-end latency, s.
    pub fn e2e_s(&self) -> f64 {
        self.end_s - self.submit_s
    }
}

fn schema() -> Schema {
    let f = |name: &str, t: DataType, nullable: bool| Field::new(name, t, nullable);
    Schema::new(vec![
        f("request_id", DataType::UInt32, false),
        f("batch_index", DataType::UInt32, true),
        f("input_tokens", DataType::UInt32, false),
        f("output_tokens", DataType::UInt32, false),
        f("reference_output_tokens", DataType::UInt32, true),
        f("cached_input_tokens", DataType::UInt32, true),
        f("scheduled_s", DataType::Float64, true),
        f("submit_s", DataType::Float64, false),
        f("first_token_s", DataType::Float64, true),
        f("end_s", DataType::Float64, false),
        f("success", DataType::Boolean, false),
        f("error", DataType::Utf8, true),
        f("finish_reason", DataType::Utf8, false),
        f(
            "token_times_s",
            DataType::List(Arc::new(Field::new("item", DataType::Float64, true))),
            false,
        ),
        f("energy_j", DataType::Float64, true),
        f("prefill_energy_j", DataType::Float64, true),
        f("decode_energy_j", DataType::Float64, true),
        f("session_id", DataType::UInt32, true),
        f("turn", DataType::UInt32, true),
        f("node_energy_j", DataType::Float64, true),
    ])
}

fn batch(rows: &[RequestRecord]) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let u32s = |f: &dyn Fn(&RequestRecord) -> u32| -> ArrayRef {
        Arc::new(UInt32Array::from_iter_values(rows.iter().map(f)))
    };
    let opt_u32s = |f: &dyn Fn(&RequestRecord) -> Option<u32>| -> ArrayRef {
        Arc::new(rows.iter().map(f).collect::<UInt32Array>())
    };
    let energy = |f: &dyn Fn(&RequestEnergy) -> f64| -> ArrayRef {
        Arc::new(
            rows.iter()
                .map(|r| r.energy.as_ref().map(f))
                .collect::<Float64Array>(),
        )
    };
    let mut times = ListBuilder::new(Float64Builder::new());
    for r in rows {
        times.values().append_slice(&r.token_times_s);
        times.append(true);
    }
    let columns: Vec<ArrayRef> = vec![
        u32s(&|r| r.request_id),
        opt_u32s(&|r| r.batch_index),
        u32s(&|r| r.input_tokens),
        u32s(&|r| r.output_tokens),
        opt_u32s(&|r| r.reference_output_tokens),
        opt_u32s(&|r| r.cached_input_tokens),
        Arc::new(rows.iter().map(|r| r.scheduled_s).collect::<Float64Array>()),
        Arc::new(Float64Array::from_iter_values(
            rows.iter().map(|r| r.submit_s),
        )),
        Arc::new(
            rows.iter()
                .map(|r| r.first_token_s)
                .collect::<Float64Array>(),
        ),
        Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.end_s))),
        Arc::new(
            rows.iter()
                .map(|r| Some(r.success))
                .collect::<BooleanArray>(),
        ),
        Arc::new(
            rows.iter()
                .map(|r| r.error.as_deref())
                .collect::<StringArray>(),
        ),
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| r.finish_reason.as_str()),
        )),
        Arc::new(times.finish()),
        energy(&|e| e.energy_j),
        energy(&|e| e.prefill_energy_j),
        energy(&|e| e.decode_energy_j),
        opt_u32s(&|r| r.session.map(|s| s.session_id)),
        opt_u32s(&|r| r.session.map(|s| s.turn)),
        Arc::new(
            rows.iter()
                .map(|r| r.energy.and_then(|e| e.node_energy_j))
                .collect::<Float64Array>(),
        ),
    ];
    // The builder's list field is nullable-item "item"; the schema says the same.
    RecordBatch::try_new(Arc::new(schema()), columns)
}

/// Writes the request log atomically (zstd-compressed Parquet) with file-level metadata.
pub fn write_requests(
    path: &Path,
    rows: &[RequestRecord],
    metadata: &[(&str, String)],
) -> Result<(), ResultsError> {
    let batch = batch(rows).map_err(|e| parquet_error(path, e.to_string()))?;
    write_batch(path, &batch, metadata)
}

/// Reads a request log written by [`write_requests`].
pub fn read_requests(path: &Path) -> Result<Vec<RequestRecord>, ResultsError> {
    let err = |e: &dyn std::fmt::Display| parquet_error(path, e.to_string());
    let reader = open(path)?;
    let mut out = Vec::new();
    for batch in reader {
        let b = batch.map_err(|e| err(&e))?;
        let id = column::<UInt32Array>(&b, "request_id").map_err(|e| err(&e))?;
        let bi = column::<UInt32Array>(&b, "batch_index").map_err(|e| err(&e))?;
        let inp = column::<UInt32Array>(&b, "input_tokens").map_err(|e| err(&e))?;
        let outp = column::<UInt32Array>(&b, "output_tokens").map_err(|e| err(&e))?;
        let refo = column::<UInt32Array>(&b, "reference_output_tokens").map_err(|e| err(&e))?;
        // Logs written before cached-token accounting have no such column.
        let cached = column::<UInt32Array>(&b, "cached_input_tokens").ok();
        // Logs written before serving engines existed have no schedule column.
        let sched = column::<Float64Array>(&b, "scheduled_s").ok();
        let sub = column::<Float64Array>(&b, "submit_s").map_err(|e| err(&e))?;
        let first = column::<Float64Array>(&b, "first_token_s").map_err(|e| err(&e))?;
        let end = column::<Float64Array>(&b, "end_s").map_err(|e| err(&e))?;
        let ok = column::<BooleanArray>(&b, "success").map_err(|e| err(&e))?;
        let e = column::<StringArray>(&b, "error").map_err(|e| err(&e))?;
        let fr = column::<StringArray>(&b, "finish_reason").map_err(|e| err(&e))?;
        let times = column::<ListArray>(&b, "token_times_s").map_err(|e| err(&e))?;
        // Logs written before energy attribution have no energy columns.
        let ej = column::<Float64Array>(&b, "energy_j").ok();
        let pj = column::<Float64Array>(&b, "prefill_energy_j").ok();
        let dj = column::<Float64Array>(&b, "decode_energy_j").ok();
        // Logs written before multi-turn traffic have no session columns.
        let sid = column::<UInt32Array>(&b, "session_id").ok();
        let turn = column::<UInt32Array>(&b, "turn").ok();
        // Logs written before node power have no node column.
        let nj = column::<Float64Array>(&b, "node_energy_j").ok();
        for i in 0..b.num_rows() {
            let at = |c: Option<&Float64Array>| c.filter(|c| c.is_valid(i)).map(|c| c.value(i));
            let energy = match (at(ej), at(pj), at(dj)) {
                (Some(energy_j), Some(prefill_energy_j), Some(decode_energy_j)) => {
                    Some(RequestEnergy {
                        energy_j,
                        prefill_energy_j,
                        decode_energy_j,
                        node_energy_j: at(nj),
                    })
                }
                _ => None,
            };
            let t = times.value(i);
            let t = t
                .as_any()
                .downcast_ref::<Float64Array>()
                .ok_or_else(|| err(&"token_times_s items are not float64"))?;
            let valid = |c: Option<&UInt32Array>| c.filter(|c| c.is_valid(i)).map(|c| c.value(i));
            let session = match (valid(sid), valid(turn)) {
                (Some(session_id), Some(turn)) => Some(SessionTurn { session_id, turn }),
                _ => None,
            };
            out.push(RequestRecord {
                energy,
                session,
                request_id: id.value(i),
                batch_index: bi.is_valid(i).then(|| bi.value(i)),
                input_tokens: inp.value(i),
                output_tokens: outp.value(i),
                reference_output_tokens: refo.is_valid(i).then(|| refo.value(i)),
                cached_input_tokens: cached.filter(|c| c.is_valid(i)).map(|c| c.value(i)),
                scheduled_s: sched.filter(|c| c.is_valid(i)).map(|c| c.value(i)),
                submit_s: sub.value(i),
                first_token_s: first.is_valid(i).then(|| first.value(i)),
                end_s: end.value(i),
                success: ok.value(i),
                error: e.is_valid(i).then(|| e.value(i).to_string()),
                finish_reason: FinishReason::parse(fr.value(i))
                    .ok_or_else(|| err(&format!("unknown finish_reason {:?}", fr.value(i))))?,
                token_times_s: t.values().to_vec(),
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
        let p = dir.path().join("requests.parquet");
        let rows = vec![
            RequestRecord {
                session: Some(SessionTurn {
                    session_id: 3,
                    turn: 1,
                }),
                energy: Some(RequestEnergy {
                    energy_j: 2.5,
                    prefill_energy_j: 1.0,
                    decode_energy_j: 1.25,
                    node_energy_j: Some(7.5),
                }),
                request_id: 0,
                batch_index: Some(0),
                input_tokens: 12,
                output_tokens: 3,
                reference_output_tokens: Some(40),
                cached_input_tokens: Some(5),
                scheduled_s: Some(0.9),
                submit_s: 1.0,
                first_token_s: Some(1.2),
                end_s: 1.4,
                success: true,
                error: None,
                finish_reason: FinishReason::Stop,
                token_times_s: vec![1.2, 1.3, 1.4],
            },
            RequestRecord {
                session: None,
                energy: None,
                request_id: 1,
                batch_index: None,
                input_tokens: 7,
                output_tokens: 0,
                reference_output_tokens: None,
                cached_input_tokens: None,
                scheduled_s: None,
                submit_s: 1.0,
                first_token_s: None,
                end_s: 1.1,
                success: false,
                error: Some("decode failed".into()),
                finish_reason: FinishReason::Error,
                token_times_s: vec![],
            },
        ];
        write_requests(&p, &rows, &[("llem.version", "x".into())]).unwrap();
        assert_eq!(read_requests(&p).unwrap(), rows);
        assert!((rows[0].ttft_s().unwrap() - 0.2).abs() < 1e-12);
    }
}
