//! Production traces as a source of requests: each record of a trace file (Azure, BurstGPT,
//! Mooncake, or any CSV/JSONL with its columns named) becomes a request with the trace's
//! arrival time, input length, output length and prefix blocks; a slice of the trace
//! (`start_s`, `duration_s`) is replayed with its gaps scaled by `time_scale`.
//!
//! The file is read as a stream (a week of Azure's trace is a gigabyte): arrival times are
//! measured from its first record, the records must be in time order (a slice of an unsorted
//! trace would be another trace), and reading stops once the slice is past.

mod csv;
pub mod formats;
pub mod prompts;
pub mod replay;

use std::collections::HashMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};

pub use formats::{Columns, Layout, TimeUnit, TraceFormat};

use crate::error::TraceError;

/// One request of a trace.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceRequest {
    /// When it is sent, s from the start of the replay (the slice's start, scaled).
    pub arrival_s: f64,
    /// Prompt tokens.
    pub input_tokens: u32,
    /// Tokens to generate.
    pub output_tokens: u32,
    /// The prompt's leading blocks (Mooncake's `hash_ids`): requests whose lists begin alike
    /// share that many blocks of prefix.
    pub hash_ids: Vec<u64>,
    /// The file's line.
    pub line: usize,
}

/// Which part of a trace to replay, and how fast.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceSlice {
    /// Skip this much of the trace, s from its first record.
    pub start_s: f64,
    /// Replay this much of it, s of trace time; `None` to its end.
    pub duration_s: Option<f64>,
    /// Gaps between arrivals are multiplied by this (0.5 replays twice as fast).
    pub time_scale: f64,
    /// Keep only the requests of this model (a trace with a model column, e.g. BurstGPT's
    /// `ChatGPT` or `GPT-4`).
    pub model: Option<String>,
    /// Stop after this many requests.
    pub max_requests: Option<usize>,
}

impl Default for TraceSlice {
    fn default() -> Self {
        TraceSlice {
            start_s: 0.0,
            duration_s: None,
            time_scale: 1.0,
            model: None,
            max_requests: None,
        }
    }
}

/// Records of the slice left out, and why.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Another model's requests.
    pub other_model: usize,
    /// Requests with no prompt tokens.
    pub no_input: usize,
    /// Requests that generated nothing (BurstGPT's failed requests).
    pub no_output: usize,
}

/// The requests of a slice of a trace.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    /// The file.
    pub path: PathBuf,
    /// Its format's name.
    pub format: &'static str,
    /// The requests, in arrival order.
    pub requests: Vec<TraceRequest>,
    /// The replay's length, s: the slice's duration scaled (to the last arrival when the
    /// slice runs to the trace's end).
    pub span_s: f64,
    /// Left out, and why.
    pub skipped: Skipped,
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> TraceError + '_ {
    move |source| TraceError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A value as shown in an error: at most 40 characters.
fn shown(v: &str) -> String {
    let mut s: String = v.chars().take(40).collect();
    if v.chars().count() > 40 {
        s.push('…');
    }
    s
}

/// `column` of `line` is `value`, not what it should be.
fn value_err(
    path: &Path,
    line: usize,
    column: &str,
    value: &str,
    expected: &'static str,
) -> TraceError {
    TraceError::Value {
        path: path.to_path_buf(),
        line,
        column: column.to_string(),
        value: shown(value),
        expected,
    }
}

/// One record's fields by column name, before they are checked.
struct Raw<'a> {
    line: usize,
    get: &'a dyn Fn(&str) -> Option<RawValue>,
}

/// A field as the file has it.
enum RawValue {
    Text(String),
    Json(serde_json::Value),
}

impl RawValue {
    fn text(&self) -> String {
        match self {
            RawValue::Text(t) => t.clone(),
            RawValue::Json(serde_json::Value::String(s)) => s.clone(),
            RawValue::Json(v) => v.to_string(),
        }
    }
}

/// Reads the slice of `path` in `format`.
pub fn read_trace(
    path: &Path,
    format: &TraceFormat,
    slice: &TraceSlice,
) -> Result<Trace, TraceError> {
    check_slice(slice)?;
    let columns = format.columns();
    if let (Some(m), None) = (&slice.model, &columns.model) {
        return Err(TraceError::Setting {
            what: format!(
                "model `{m}`: a {} trace has no model column to keep it by",
                format.name()
            ),
        });
    }
    let file = std::fs::File::open(path).map_err(io(path))?;
    let input = std::io::BufReader::with_capacity(1 << 20, file);
    let mut out = Slicer::new(path, format.name(), slice);
    match columns.layout {
        Layout::Csv => read_csv(path, &columns, input, &mut out)?,
        Layout::Jsonl => read_jsonl(path, &columns, input, &mut out)?,
    }
    out.finish()
}

fn check_slice(s: &TraceSlice) -> Result<(), TraceError> {
    let bad = |what: String| Err(TraceError::Setting { what });
    if !(s.start_s.is_finite() && s.start_s >= 0.0) {
        return bad(format!("start_s must be 0 or more, not {}", s.start_s));
    }
    if let Some(d) = s.duration_s
        && !(d.is_finite() && d > 0.0)
    {
        return bad(format!("duration_s must be more than 0, not {d}"));
    }
    if !(s.time_scale.is_finite() && s.time_scale > 0.0) {
        return bad(format!(
            "time_scale must be more than 0, not {}",
            s.time_scale
        ));
    }
    Ok(())
}

/// Keeps the records of the slice, in order.
struct Slicer<'a> {
    path: &'a Path,
    format: &'static str,
    slice: &'a TraceSlice,
    /// The first record's time, ns.
    first_ns: Option<i64>,
    /// The latest record's time and line, for the order check.
    last: Option<(i64, usize)>,
    requests: Vec<TraceRequest>,
    skipped: Skipped,
    /// The slice is past: reading can stop.
    done: bool,
}

impl<'a> Slicer<'a> {
    fn new(path: &'a Path, format: &'static str, slice: &'a TraceSlice) -> Slicer<'a> {
        Slicer {
            path,
            format,
            slice,
            first_ns: None,
            last: None,
            requests: Vec::new(),
            skipped: Skipped::default(),
            done: false,
        }
    }

    /// Takes one record.
    fn take(&mut self, c: &Columns, raw: &Raw<'_>) -> Result<(), TraceError> {
        let path = self.path;
        let field = |name: &str| -> Result<RawValue, TraceError> {
            (raw.get)(name).ok_or_else(|| value_err(path, raw.line, name, "", "a value"))
        };
        let ts_text = field(&c.timestamp)?.text();
        let t = formats::timestamp_ns(&ts_text, c.unit).ok_or_else(|| {
            value_err(
                path,
                raw.line,
                &c.timestamp,
                &ts_text,
                match c.unit {
                    TimeUnit::DateTime => "a date and time, YYYY-MM-DD HH:MM:SS.fraction",
                    _ => "a number",
                },
            )
        })?;
        if let Some((prev, _)) = self.last
            && t < prev
        {
            return Err(TraceError::NotInOrder {
                path: self.path.to_path_buf(),
                line: raw.line,
                back_s: (prev - t) as f64 / 1e9,
            });
        }
        self.last = Some((t, raw.line));
        let first = *self.first_ns.get_or_insert(t);
        let since_s = (t - first) as f64 / 1e9;
        if since_s < self.slice.start_s {
            return Ok(());
        }
        if let Some(d) = self.slice.duration_s
            && since_s >= self.slice.start_s + d
        {
            self.done = true;
            return Ok(());
        }
        if let (Some(want), Some(col)) = (&self.slice.model, &c.model)
            && field(col)?.text() != *want
        {
            self.skipped.other_model += 1;
            return Ok(());
        }
        let tokens = |name: &str| -> Result<u32, TraceError> {
            let v = field(name)?;
            let text = v.text();
            let n: f64 = text
                .trim()
                .parse()
                .map_err(|_| value_err(path, raw.line, name, &text, "a whole number of tokens"))?;
            if !(n >= 0.0 && n.fract() == 0.0 && n <= f64::from(u32::MAX)) {
                return Err(value_err(
                    path,
                    raw.line,
                    name,
                    &text,
                    "a whole number of tokens",
                ));
            }
            Ok(n as u32)
        };
        let input_tokens = tokens(&c.input_tokens)?;
        let output_tokens = tokens(&c.output_tokens)?;
        if input_tokens == 0 {
            self.skipped.no_input += 1;
            return Ok(());
        }
        if output_tokens == 0 {
            self.skipped.no_output += 1;
            return Ok(());
        }
        let hash_ids = match &c.hash_ids {
            Some(col) => self.hash_ids(raw.line, col, &field(col)?)?,
            None => Vec::new(),
        };
        self.requests.push(TraceRequest {
            arrival_s: (since_s - self.slice.start_s) * self.slice.time_scale,
            input_tokens,
            output_tokens,
            hash_ids,
            line: raw.line,
        });
        if self
            .slice
            .max_requests
            .is_some_and(|m| self.requests.len() >= m)
        {
            self.done = true;
        }
        Ok(())
    }

    fn hash_ids(&self, line: usize, col: &str, v: &RawValue) -> Result<Vec<u64>, TraceError> {
        let path = self.path;
        const EXPECTED: &str = "a list of whole numbers";
        match v {
            RawValue::Json(serde_json::Value::Array(items)) => items
                .iter()
                .map(|x| {
                    x.as_u64()
                        .ok_or_else(|| value_err(path, line, col, &x.to_string(), EXPECTED))
                })
                .collect(),
            RawValue::Json(serde_json::Value::Null) => Ok(Vec::new()),
            RawValue::Json(other) => Err(value_err(path, line, col, &other.to_string(), EXPECTED)),
            RawValue::Text(t) => t
                .split([' ', ';'])
                .filter(|s| !s.is_empty())
                .map(|s| {
                    s.parse::<u64>()
                        .map_err(|_| value_err(path, line, col, t, EXPECTED))
                })
                .collect(),
        }
    }

    fn finish(self) -> Result<Trace, TraceError> {
        if self.requests.is_empty() {
            return Err(TraceError::Setting {
                what: format!(
                    "{}: no request in the slice (start_s {}, duration_s {}){}",
                    self.path.display(),
                    self.slice.start_s,
                    self.slice
                        .duration_s
                        .map_or_else(|| "to the end".into(), |d| d.to_string()),
                    match (&self.slice.model, self.skipped.other_model) {
                        (Some(m), n) if n > 0 =>
                            format!("; {n} requests of other models were left out, none of `{m}`"),
                        _ => String::new(),
                    }
                ),
            });
        }
        let last = self.requests.last().map_or(0.0, |r| r.arrival_s);
        let span_s = match self.slice.duration_s {
            Some(d) if self.slice.max_requests.is_none() => d * self.slice.time_scale,
            _ => last,
        };
        Ok(Trace {
            path: self.path.to_path_buf(),
            format: self.format,
            requests: self.requests,
            span_s,
            skipped: self.skipped,
        })
    }
}

/// The header's position of each column the format reads; an error naming the nearest
/// column for one that is missing.
fn header_positions(
    path: &Path,
    c: &Columns,
    header: &[String],
) -> Result<HashMap<String, usize>, TraceError> {
    let mut wanted = vec![&c.timestamp, &c.input_tokens, &c.output_tokens];
    wanted.extend(c.hash_ids.iter());
    wanted.extend(c.model.iter());
    let mut out = HashMap::new();
    for w in wanted {
        // BurstGPT's header has spaces after commas in some copies: names are compared trimmed.
        match header.iter().position(|h| h.trim() == w.as_str()) {
            Some(i) => {
                out.insert(w.clone(), i);
            }
            None => {
                let trimmed: Vec<&str> = header.iter().map(|h| h.trim()).collect();
                let hint = llem_config::did_you_mean(w, trimmed.iter().copied())
                    .map(|n| format!("; did you mean `{n}`?"))
                    .unwrap_or_default();
                return Err(TraceError::MissingColumn {
                    path: path.to_path_buf(),
                    column: w.clone(),
                    found: trimmed
                        .iter()
                        .map(|h| format!("`{h}`"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    hint,
                });
            }
        }
    }
    Ok(out)
}

fn csv_err(path: &Path, e: csv::CsvError) -> TraceError {
    match e {
        csv::CsvError::Io(source) => TraceError::Io {
            path: path.to_path_buf(),
            source,
        },
        csv::CsvError::Unterminated { line } => TraceError::Record {
            path: path.to_path_buf(),
            line,
            message: "a quoted field that never closes".into(),
        },
        csv::CsvError::AfterQuote { line, column } => TraceError::Record {
            path: path.to_path_buf(),
            line,
            message: format!("column {column}: text after a closing quote"),
        },
    }
}

fn read_csv(
    path: &Path,
    c: &Columns,
    input: impl BufRead,
    out: &mut Slicer<'_>,
) -> Result<(), TraceError> {
    let mut reader = csv::Reader::new(input);
    let header = match reader.next_record() {
        Some(r) => r.map_err(|e| csv_err(path, e))?,
        None => {
            return Err(TraceError::Record {
                path: path.to_path_buf(),
                line: 1,
                message: format!("empty file; a {} trace starts with its header", out.format),
            });
        }
    };
    let positions = header_positions(path, c, &header.fields)?;
    while !out.done {
        let Some(record) = reader.next_record() else {
            break;
        };
        let record = record.map_err(|e| csv_err(path, e))?;
        let get = |name: &str| -> Option<RawValue> {
            let i = *positions.get(name)?;
            record.fields.get(i).map(|t| RawValue::Text(t.clone()))
        };
        out.take(
            c,
            &Raw {
                line: record.line,
                get: &get,
            },
        )?;
    }
    Ok(())
}

fn read_jsonl(
    path: &Path,
    c: &Columns,
    input: impl BufRead,
    out: &mut Slicer<'_>,
) -> Result<(), TraceError> {
    for (i, line) in input.lines().enumerate() {
        if out.done {
            break;
        }
        let line_no = i + 1;
        let text = line.map_err(io(path))?;
        if text.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| TraceError::Record {
            path: path.to_path_buf(),
            line: line_no,
            message: format!("not a JSON object: {e}"),
        })?;
        let Some(obj) = v.as_object() else {
            return Err(TraceError::Record {
                path: path.to_path_buf(),
                line: line_no,
                message: "a JSON value that is not an object".into(),
            });
        };
        let get = |name: &str| obj.get(name).map(|v| RawValue::Json(v.clone()));
        out.take(
            c,
            &Raw {
                line: line_no,
                get: &get,
            },
        )?;
    }
    Ok(())
}

/// Blocks of prefix request `i` shares with any earlier request of the trace: the longest
/// leading run of its `hash_ids` that an earlier request began with too.
pub fn shared_prefix_blocks(requests: &[TraceRequest]) -> Vec<usize> {
    let mut seen: std::collections::HashSet<&[u64]> = std::collections::HashSet::new();
    requests
        .iter()
        .map(|r| {
            let shared = (1..=r.hash_ids.len())
                .rev()
                .find(|&k| r.hash_ids.get(..k).is_some_and(|p| seen.contains(p)))
                .unwrap_or(0);
            for k in 1..=r.hash_ids.len() {
                if let Some(p) = r.hash_ids.get(..k) {
                    seen.insert(p);
                }
            }
            shared
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn write(name: &str, text: &str) -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(name);
        std::fs::write(&p, text).unwrap();
        (d, p)
    }

    fn arrivals(t: &Trace) -> Vec<f64> {
        t.requests
            .iter()
            .map(|r| (r.arrival_s * 1e6).round() / 1e6)
            .collect()
    }

    const AZURE: &str = "TIMESTAMP,ContextTokens,GeneratedTokens\n\
        2023-11-16 18:15:46.6805900,374,44\n\
        2023-11-16 18:15:50.9951690,396,109\n\
        2023-11-16 18:15:51.0000000,879,31\n\
        2023-11-16 18:16:02.5000000,91,0\n\
        2023-11-16 18:16:10.6805900,1200,7\n";

    #[test]
    fn an_azure_slice_is_timed_from_the_first_record_and_scaled() {
        let (_d, p) = write("azure.csv", AZURE);
        let all = read_trace(&p, &TraceFormat::Azure, &TraceSlice::default()).unwrap();
        assert_eq!(arrivals(&all), [0.0, 4.314579, 4.31941, 24.0]);
        assert_eq!(all.requests[0].input_tokens, 374);
        assert_eq!(all.requests[0].output_tokens, 44);
        assert_eq!(all.requests[0].line, 2);
        // The row that generated nothing is counted, not replayed.
        assert_eq!(all.skipped.no_output, 1);
        assert_eq!(all.span_s, 24.0);

        // From 4 s, 10 s of it, at half speed: the slice's own clock starts at its start.
        let slice = TraceSlice {
            start_s: 4.0,
            duration_s: Some(10.0),
            time_scale: 2.0,
            ..TraceSlice::default()
        };
        let s = read_trace(&p, &TraceFormat::Azure, &slice).unwrap();
        assert_eq!(arrivals(&s), [0.629158, 0.63882]);
        assert_eq!(s.span_s, 20.0);
        let first_two = TraceSlice {
            max_requests: Some(2),
            ..TraceSlice::default()
        };
        assert_eq!(
            read_trace(&p, &TraceFormat::Azure, &first_two)
                .unwrap()
                .requests
                .len(),
            2
        );
    }

    #[test]
    fn burstgpt_by_model_with_its_failed_rows_counted() {
        let text = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n\
            5,ChatGPT,472,18,490,Conversation log\n\
            45,ChatGPT,1087,0,1087,Conversation log\n\
            118,GPT-4,417,217,634,Conversation log\n\
            134,ChatGPT,1360,274,1634,API log\n";
        let (_d, p) = write("burst.csv", text);
        let slice = TraceSlice {
            model: Some("ChatGPT".into()),
            ..TraceSlice::default()
        };
        let t = read_trace(&p, &TraceFormat::BurstGpt, &slice).unwrap();
        assert_eq!(arrivals(&t), [0.0, 129.0]);
        assert_eq!(
            t.skipped,
            Skipped {
                other_model: 1,
                no_input: 0,
                no_output: 1
            }
        );
        let none = TraceSlice {
            model: Some("Claude".into()),
            ..TraceSlice::default()
        };
        let e = read_trace(&p, &TraceFormat::BurstGpt, &none)
            .unwrap_err()
            .to_string();
        assert!(e.contains("none of `Claude`"), "{e}");
    }

    #[test]
    fn mooncake_keeps_its_blocks_and_shared_prefixes_are_found() {
        let text = "{\"timestamp\": 0, \"input_length\": 1024, \"output_length\": 12, \"hash_ids\": [0, 1]}\n\
            {\"timestamp\": 250, \"input_length\": 1536, \"output_length\": 5, \"hash_ids\": [0, 1, 2]}\n\
            \n\
            {\"timestamp\": 1250, \"input_length\": 600, \"output_length\": 3, \"hash_ids\": [0, 7]}\n\
            {\"timestamp\": 1300, \"input_length\": 512, \"output_length\": 3, \"hash_ids\": [9]}\n";
        let (_d, p) = write("mooncake.jsonl", text);
        let t = read_trace(&p, &TraceFormat::Mooncake, &TraceSlice::default()).unwrap();
        assert_eq!(arrivals(&t), [0.0, 0.25, 1.25, 1.3]);
        assert_eq!(t.requests[1].hash_ids, [0, 1, 2]);
        assert_eq!(t.requests[2].line, 4);
        assert_eq!(shared_prefix_blocks(&t.requests), [0, 2, 1, 0]);
    }

    #[test]
    fn a_mapped_csv_with_ids_in_a_column() {
        let text = "t_us,prompt,completion,blocks\n0,100,10,1;2\n1500000,300,20,1 2 3\n";
        let (_d, p) = write("mine.csv", text);
        let f = TraceFormat::Mapped(Columns {
            layout: Layout::Csv,
            timestamp: "t_us".into(),
            unit: TimeUnit::Microseconds,
            input_tokens: "prompt".into(),
            output_tokens: "completion".into(),
            hash_ids: Some("blocks".into()),
            model: None,
        });
        let t = read_trace(&p, &f, &TraceSlice::default()).unwrap();
        assert_eq!(arrivals(&t), [0.0, 1.5]);
        assert_eq!(t.requests[1].hash_ids, [1, 2, 3]);
    }

    #[test]
    fn bad_traces_say_where_and_what() {
        let cases: [(&str, TraceFormat, &str, &str); 6] = [
            (
                "a.csv",
                TraceFormat::Azure,
                "TIMESTAMP,ContextToken,GeneratedTokens\n",
                "no column `ContextTokens` in the header (it has `TIMESTAMP`, `ContextToken`, `GeneratedTokens`); did you mean `ContextToken`?",
            ),
            (
                "b.csv",
                TraceFormat::Azure,
                "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.1,12.5,3\n",
                "b.csv:2: `ContextTokens` is \"12.5\", expected a whole number of tokens",
            ),
            (
                "c.csv",
                TraceFormat::Azure,
                "TIMESTAMP,ContextTokens,GeneratedTokens\nnoon,1,3\n",
                "c.csv:2: `TIMESTAMP` is \"noon\", expected a date and time",
            ),
            (
                "d.csv",
                TraceFormat::BurstGpt,
                "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n9,m,1,1,2,x\n3,m,1,1,2,x\n",
                "d.csv:3: this request arrives 6.000 s before the one above it",
            ),
            (
                "e.jsonl",
                TraceFormat::Mooncake,
                "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 1}\nnot json\n",
                "e.jsonl:1: `hash_ids` is \"\", expected a value",
            ),
            (
                "f.csv",
                TraceFormat::Azure,
                "",
                "f.csv:1: empty file; a azure trace starts with its header",
            ),
        ];
        for (name, format, text, want) in cases {
            let (_d, p) = write(name, text);
            let e = read_trace(&p, &format, &TraceSlice::default())
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{name}: {e}");
        }
        let (_d, p) = write("g.csv", AZURE);
        let e = read_trace(
            &p,
            &TraceFormat::Azure,
            &TraceSlice {
                time_scale: 0.0,
                ..TraceSlice::default()
            },
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("time_scale must be more than 0"), "{e}");
        let e = read_trace(
            &p,
            &TraceFormat::Azure,
            &TraceSlice {
                model: Some("GPT-4".into()),
                ..TraceSlice::default()
            },
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("a azure trace has no model column"), "{e}");
    }
}
