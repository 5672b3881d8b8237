//! A configured trace made into a served run's workload: its slice read, every request given a
//! prompt of the trace's input length (token ids cut from the dataset's text, tokenized by the
//! server) and the trace's output length, and sent at the trace's scaled time.

use std::sync::Arc;

use llem_config::{TraceConfig, TraceFormatName, TraceTimeUnit};
use llem_results::result::TraceReplaySummary;

use super::prompts::{BLOCK_TOKENS, PromptCutter};
use super::{Columns, Layout, TimeUnit, Trace, TraceFormat, TraceSlice};
use crate::error::TraceError;
use crate::workload::{Prompt, PromptInput};

/// Tokens of dataset text tokenized for the corpus prompts are cut from: enough that
/// prompts drawn at random places rarely overlap, few enough to tokenize in a moment.
pub const CORPUS_TOKENS: usize = 1 << 16;

/// The schedule of a replay and what its result says about it.
#[derive(Clone, Debug, PartialEq)]
pub struct Replay {
    /// Send offsets, s from the start, one per prompt.
    pub offsets: Vec<f64>,
    /// The replay as known before it is sent (the session adds what it observed).
    pub summary: TraceReplaySummary,
}

/// The format `cfg` names.
pub fn format_of(cfg: &TraceConfig) -> TraceFormat {
    match (cfg.format, &cfg.columns) {
        (TraceFormatName::Azure, _) => TraceFormat::Azure,
        (TraceFormatName::BurstGpt, _) => TraceFormat::BurstGpt,
        (TraceFormatName::Mooncake, _) => TraceFormat::Mooncake,
        (f @ (TraceFormatName::Csv | TraceFormatName::Jsonl), c) => {
            // The plan refuses csv / jsonl without columns; these names then match nothing
            // and the reader says which column is missing.
            let c = c.clone().unwrap_or_else(|| llem_config::TraceColumns {
                timestamp: "timestamp".into(),
                time_unit: TraceTimeUnit::Seconds,
                input_tokens: "input_tokens".into(),
                output_tokens: "output_tokens".into(),
                hash_ids: None,
                model: None,
            });
            TraceFormat::Mapped(Columns {
                layout: if f == TraceFormatName::Csv {
                    Layout::Csv
                } else {
                    Layout::Jsonl
                },
                timestamp: c.timestamp,
                unit: match c.time_unit {
                    TraceTimeUnit::Seconds => TimeUnit::Seconds,
                    TraceTimeUnit::Milliseconds => TimeUnit::Milliseconds,
                    TraceTimeUnit::Microseconds => TimeUnit::Microseconds,
                    TraceTimeUnit::DateTime => TimeUnit::DateTime,
                },
                input_tokens: c.input_tokens,
                output_tokens: c.output_tokens,
                hash_ids: c.hash_ids,
                model: c.model,
            })
        }
    }
}

/// The slice `cfg` asks for.
pub fn slice_of(cfg: &TraceConfig) -> TraceSlice {
    TraceSlice {
        start_s: cfg.start_seconds,
        duration_s: cfg.duration_seconds,
        time_scale: cfg.time_scale,
        model: cfg.model.clone(),
        max_requests: cfg.max_requests.map(|n| n as usize),
    }
}

/// Reads the slice `cfg` names (at plan time to check it, and again to replay it).
pub fn read(cfg: &TraceConfig) -> Result<Trace, TraceError> {
    super::read_trace(
        std::path::Path::new(&cfg.path),
        &format_of(cfg),
        &slice_of(cfg),
    )
}

/// The token ids prompts are cut from: `texts` tokenized in turn by `tokenize` until
/// [`CORPUS_TOKENS`] are gathered (or the texts run out).
pub fn corpus<'a, E>(
    texts: impl IntoIterator<Item = &'a str>,
    tokenize: &mut dyn FnMut(&str) -> Result<Vec<u32>, E>,
) -> Result<Vec<u32>, E> {
    let mut out = Vec::with_capacity(CORPUS_TOKENS);
    for t in texts {
        if out.len() >= CORPUS_TOKENS {
            break;
        }
        if !t.trim().is_empty() {
            out.extend(tokenize(t)?);
        }
    }
    Ok(out)
}

/// The prompts and schedule of `trace`: request `i` gets the trace's input length (cut to
/// `max_input_tokens`) from `corpus`, its output length, and end of sequence ignored.
pub fn build(
    cfg: &TraceConfig,
    trace: &Trace,
    corpus: &[u32],
    seed: u64,
    max_input_tokens: Option<u32>,
    max_output_tokens: Option<u32>,
) -> Result<(Vec<Prompt>, Replay), TraceError> {
    let cutter = PromptCutter::new(corpus, seed);
    let shared = super::shared_prefix_blocks(&trace.requests);
    let mut prompts = Vec::with_capacity(trace.requests.len());
    let mut inputs_capped = 0u32;
    let mut shared_tokens = 0u64;
    for (i, (r, blocks)) in trace.requests.iter().zip(&shared).enumerate() {
        let n = max_input_tokens.map_or(r.input_tokens, |m| r.input_tokens.min(m));
        inputs_capped += u32::from(n < r.input_tokens);
        let ids = cutter
            .prompt(i as u64, &r.hash_ids, n as usize)
            .map_err(|e| TraceError::Setting {
                what: format!(
                    "prompts cannot be cut: the dataset's text is {} tokens, at least {} are \
                     needed (use a larger dataset, e.g. `dataset: sharegpt`, or more \
                     `dataset.n_prompts`)",
                    e.have, e.need
                ),
            })?;
        shared_tokens += (*blocks * BLOCK_TOKENS).min(n as usize) as u64;
        prompts.push(Prompt {
            dataset_index: u32::try_from(i).unwrap_or(u32::MAX),
            input: PromptInput::TokenIds(Arc::new(ids)),
            group: None,
            reference_output: None,
            output_tokens: Some(r.output_tokens),
            ignore_eos: true,
            follow_ups: Vec::new(),
        });
    }
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    let summary = TraceReplaySummary {
        path: cfg.path.clone(),
        format: cfg.format.to_string(),
        start_seconds: cfg.start_seconds,
        duration_seconds: cfg.duration_seconds,
        time_scale: cfg.time_scale,
        model: cfg.model.clone(),
        requests: count(trace.requests.len()),
        span_s: trace.span_s,
        skipped_other_model: count(trace.skipped.other_model),
        skipped_no_input: count(trace.skipped.no_input),
        skipped_no_output: count(trace.skipped.no_output),
        inputs_capped,
        outputs_capped: count(
            trace
                .requests
                .iter()
                .filter(|r| max_output_tokens.is_some_and(|m| r.output_tokens > m))
                .count(),
        ),
        shared_prefix_requests: count(shared.iter().filter(|b| **b > 0).count()),
        shared_prefix_tokens: shared_tokens,
        inputs_inexact: None,
        short_replies: 0,
        cached_prompt_tokens: None,
        kept_up: true,
        late_threshold_ms: LATE_THRESHOLD_MS,
    };
    let offsets = trace.requests.iter().map(|r| r.arrival_s).collect();
    Ok((prompts, Replay { offsets, summary }))
}

/// A replay whose 99th-percentile lateness exceeds this no longer has the trace's arrivals:
/// bursts a few milliseconds apart are what a trace replay is for.
pub const LATE_THRESHOLD_MS: f64 = 50.0;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]
mod tests {
    use super::*;

    fn cfg(path: &std::path::Path, format: TraceFormatName) -> TraceConfig {
        TraceConfig {
            path: path.display().to_string(),
            format,
            columns: None,
            start_seconds: 0.0,
            duration_seconds: None,
            time_scale: 0.5,
            model: None,
            max_requests: None,
        }
    }

    #[test]
    fn mooncake_requests_get_exact_lengths_and_their_shared_blocks() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("m.jsonl");
        std::fs::write(
            &p,
            "{\"timestamp\": 0, \"input_length\": 700, \"output_length\": 5, \"hash_ids\": [1, 2]}\n\
             {\"timestamp\": 1000, \"input_length\": 600, \"output_length\": 9, \"hash_ids\": [1, 3]}\n\
             {\"timestamp\": 3000, \"input_length\": 40, \"output_length\": 900, \"hash_ids\": [7]}\n",
        )
        .unwrap();
        let c = cfg(&p, TraceFormatName::Mooncake);
        let trace = read(&c).unwrap();
        let corpus: Vec<u32> = (0..5000).collect();
        let (prompts, replay) = build(&c, &trace, &corpus, 7, Some(650), Some(512)).unwrap();
        let ids = |i: usize| match &prompts[i].input {
            PromptInput::TokenIds(ids) => ids.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!((ids(0).len(), ids(1).len(), ids(2).len()), (650, 600, 40));
        // Block 1 is the same 512 tokens in both; what follows differs.
        assert_eq!(ids(0)[..512], ids(1)[..512]);
        assert_ne!(ids(0)[512..600], ids(1)[512..600]);
        assert_eq!(prompts[2].output_tokens, Some(900));
        assert!(prompts.iter().all(|p| p.ignore_eos));
        assert_eq!(replay.offsets, [0.0, 0.5, 1.5]);
        let s = &replay.summary;
        assert_eq!((s.requests, s.inputs_capped, s.outputs_capped), (3, 1, 1));
        assert_eq!((s.shared_prefix_requests, s.shared_prefix_tokens), (1, 512));
        assert_eq!(s.format, "mooncake");
        let tiny = build(&c, &trace, &corpus[..100], 7, None, None).unwrap_err();
        assert!(tiny.to_string().contains("100 tokens"), "{tiny}");
    }

    /// The example traces read as their YAML files replay them.
    #[test]
    fn the_example_traces_read_in_their_formats() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/traces");
        let mut c = cfg(&dir.join("azure-conv-sample.csv"), TraceFormatName::Azure);
        c.time_scale = 1.0;
        assert_eq!(read(&c).unwrap().requests.len(), 16);
        let mut b = cfg(&dir.join("burstgpt-sample.csv"), TraceFormatName::BurstGpt);
        b.model = Some("ChatGPT".into());
        let t = read(&b).unwrap();
        assert_eq!(t.requests.len(), 14);
        assert_eq!((t.skipped.other_model, t.skipped.no_output), (4, 2));
        let m = cfg(
            &dir.join("mooncake-sample.jsonl"),
            TraceFormatName::Mooncake,
        );
        let t = read(&m).unwrap();
        assert_eq!(t.requests.len(), 12);
        assert!(
            super::super::shared_prefix_blocks(&t.requests)
                .iter()
                .any(|b| *b > 0)
        );
        let mut g = cfg(&dir.join("gateway-sample.csv"), TraceFormatName::Csv);
        g.columns = Some(llem_config::TraceColumns {
            timestamp: "arrived_ms".into(),
            time_unit: TraceTimeUnit::Milliseconds,
            input_tokens: "prompt_len".into(),
            output_tokens: "reply_len".into(),
            hash_ids: Some("blocks".into()),
            model: None,
        });
        let t = read(&g).unwrap();
        assert_eq!(t.requests.len(), 10);
        assert_eq!(t.requests[1].hash_ids, [11, 12, 31]);
        assert_eq!(super::super::shared_prefix_blocks(&t.requests)[2], 2);
    }

    #[test]
    fn the_corpus_stops_once_it_is_large_enough() {
        let texts = ["a"; 10];
        let mut calls = 0;
        let mut tok = |_: &str| -> Result<Vec<u32>, ()> {
            calls += 1;
            Ok(vec![1; CORPUS_TOKENS / 3 + 1])
        };
        let c = corpus(texts.iter().copied(), &mut tok).unwrap();
        assert_eq!(calls, 3);
        assert!(c.len() >= CORPUS_TOKENS);
    }
}
