//! One measured run on a loaded worker: tokenize through it, plan batches with the
//! workload's strategy, send one `generate()` per batch and turn its events into request
//! records on the experiment clock.

use std::collections::HashMap;

use llem_results::{FinishReason, RequestRecord};

use super::TransformersEngine;
use super::process::{Wait, WorkerProcess};
use super::protocol::{Event, Op, PromptOp, RequestOp};
use crate::engine::{EngineError, EngineMemory, RequestSink, RunSummary, Session, Step, StepKind};
use crate::workload::{BatchingSpec, Prompt, PromptInput, Workload, batching};

/// Runs workloads on a loaded worker, batched as its plan says.
pub struct TransformersSession<'e> {
    engine: &'e TransformersEngine,
    batching: BatchingSpec,
}

/// Seconds between CLOCK_MONOTONIC and the sink's clock: worker time minus this is
/// experiment time.
fn clock_offset(sink: &dyn RequestSink) -> f64 {
    let mono = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| t.tv_sec() as f64 + t.tv_nsec() as f64 * 1e-9)
        .unwrap_or(0.0);
    mono - sink.now_s()
}

/// What the worker tokenizes for `p`: its text (chat-templated or not) or a synthetic
/// prompt of `n_tokens` drawn with `seed`.
fn prompt_op(p: &Prompt) -> Result<PromptOp, EngineError> {
    let (text, chat, tokens, seed) = match &p.input {
        PromptInput::Text { text, chat } => (Some(text.clone()), *chat, None, None),
        PromptInput::Tokens { n_tokens, seed } => (None, false, Some(*n_tokens), Some(*seed)),
        // Only a trace replay makes these, and the plan sends a replay to servers alone.
        PromptInput::TokenIds(_) => {
            return Err(EngineError::Config(
                "token-id prompts (a trace replay) are sent to servers only".into(),
            ));
        }
    };
    Ok(PromptOp {
        text,
        chat,
        tokens,
        seed,
        reference: p.reference_output.clone(),
    })
}

/// The worker's tokenization of a workload.
struct Prepared {
    input_tokens: Vec<u32>,
    truncated: Vec<bool>,
    reference_tokens: Vec<Option<u32>>,
}

/// A request finished by the worker, waiting for its batch's timing.
struct Finished {
    request: u32,
    output_tokens: u32,
    finish: FinishReason,
    end_t: f64,
    ids: Option<Vec<i64>>,
}

/// What one `generate()` call sent back, on the experiment clock.
struct BatchOutcome {
    t0: f64,
    t1: f64,
    steps: u32,
    /// When each forward pass ended, on the harness's clock.
    step_ends: Vec<f64>,
    device_peak_bytes: Option<u64>,
    rss_peak_bytes: Option<u64>,
    finished: Vec<Finished>,
    /// Streamed token times per request.
    token_times: HashMap<u32, Vec<f64>>,
}

impl<'e> TransformersSession<'e> {
    /// A session batching as `batching` says, one request at a time when the engine streams
    /// (a streamed token maps to one request).
    pub(super) fn new(engine: &'e TransformersEngine, mut batching: BatchingSpec) -> Self {
        if engine.stream {
            batching.batch_size = std::num::NonZeroU32::MIN;
        }
        TransformersSession { engine, batching }
    }

    /// Words an event that is not the reply expected.
    fn unexpected(&self, ev: Event, expected: &str) -> EngineError {
        EngineError::Inference(super::unexpected(&self.engine.python, ev, expected))
    }

    /// Tokenizes every prompt in the worker.
    fn prepare(&self, worker: &mut WorkerProcess, wl: &Workload) -> Result<Prepared, EngineError> {
        worker.send(&Op::Prepare {
            prompts: wl.prompts.iter().map(prompt_op).collect::<Result<_, _>>()?,
            max_input_tokens: wl.max_input_tokens,
        })?;
        let prepared = match worker.reply(Wait::Silence(self.engine.load_timeout))? {
            Event::Prepared {
                input_tokens,
                truncated,
                reference_tokens,
            } => Prepared {
                input_tokens,
                truncated,
                reference_tokens,
            },
            other => return Err(self.unexpected(other, "prepared")),
        };
        if prepared.input_tokens.len() != wl.prompts.len() {
            return Err(EngineError::Inference(format!(
                "the worker tokenized {} prompts of {}",
                prepared.input_tokens.len(),
                wl.prompts.len()
            )));
        }
        worker.send(&Op::Mark)?;
        match worker.reply(Wait::Silence(self.engine.silence))? {
            Event::Marked => Ok(prepared),
            other => Err(self.unexpected(other, "marked")),
        }
    }

    /// Each member's output limit: its own (synthetic), else the workload's, never past the
    /// context left after its prompt.
    fn request_ops(&self, wl: &Workload, lengths: &[u32], members: &[usize]) -> Vec<RequestOp> {
        members
            .iter()
            .map(|&i| {
                let prompt = wl.prompts.get(i);
                let input = lengths.get(i).copied().unwrap_or(0);
                let room = self.engine.context_length.saturating_sub(input).max(1);
                let limit = wl.output_limit_within(prompt, room).max(1);
                RequestOp {
                    index: u32::try_from(i).unwrap_or(u32::MAX),
                    max_new_tokens: limit,
                    ignore_eos: prompt.is_some_and(|p| p.ignore_eos),
                }
            })
            .collect()
    }

    /// Reads one batch's events until `batch_done`, passing streamed tokens to the sink as
    /// they come.
    fn receive_batch(
        &self,
        worker: &mut WorkerProcess,
        offset: f64,
        sink: &mut dyn RequestSink,
    ) -> Result<BatchOutcome, EngineError> {
        let mut finished = Vec::new();
        let mut token_times: HashMap<u32, Vec<f64>> = HashMap::new();
        loop {
            match worker.recv(Wait::Silence(self.engine.silence))? {
                Event::Token { request, t } => {
                    let t = t - offset;
                    token_times.entry(request).or_default().push(t);
                    sink.on_tokens(request, t, 1);
                }
                Event::RequestDone {
                    request,
                    output_tokens,
                    finish_reason,
                    token_ids,
                    end_t,
                } => finished.push(Finished {
                    request,
                    output_tokens,
                    finish: if finish_reason == "stop" {
                        FinishReason::Stop
                    } else {
                        FinishReason::Length
                    },
                    end_t: end_t - offset,
                    ids: token_ids,
                }),
                Event::BatchDone {
                    t0,
                    t1,
                    steps,
                    step_ends,
                    device_peak_bytes,
                    rss_peak_bytes,
                } => {
                    return Ok(BatchOutcome {
                        t0: t0 - offset,
                        t1: t1 - offset,
                        steps,
                        step_ends: step_ends.into_iter().map(|t| t - offset).collect(),
                        device_peak_bytes,
                        rss_peak_bytes,
                        finished,
                        token_times,
                    });
                }
                Event::Progress { .. } | Event::Unknown => {}
                other => return Err(self.unexpected(other, "a token or batch_done")),
            }
        }
    }

    /// The peak the worker saw: torch's allocator on a GPU, else its resident set.
    fn memory(&self, device_peak: Option<u64>, rss_peak: Option<u64>) -> Option<EngineMemory> {
        let mib = |b: u64| b as f64 / 1_048_576.0;
        match device_peak {
            Some(p) if self.engine.on_gpu => Some(EngineMemory {
                peak_mib: mib(p),
                total_mib: self.engine.device_total_bytes.map(mib),
                source: "torch_cuda_max_memory_allocated",
            }),
            _ => rss_peak.map(|p| EngineMemory {
                peak_mib: mib(p),
                total_mib: None,
                source: "worker_rss",
            }),
        }
    }

    /// The warnings of a profiled run.
    fn streaming_warnings(&self) -> Vec<String> {
        let e = self.engine;
        let mut warnings = Vec::new();
        if e.stream {
            if e.configured_batch > 1 {
                warnings.push(format!(
                    "measurement.latency_profiling streams every token, one request at a \
                     time: transformers.batch_size {} ran as 1",
                    e.configured_batch
                ));
            }
            warnings.push(
                "latency profiling timed every token (streamer): energy and throughput are not \
                 comparable with non-profiled runs"
                    .into(),
            );
        }
        warnings
    }

    pub(super) fn run_inner(
        &mut self,
        wl: &Workload,
        sink: &mut dyn RequestSink,
    ) -> Result<(RunSummary, Vec<Vec<i64>>), EngineError> {
        let e = self.engine;
        let mut worker = e
            .worker
            .lock()
            .map_err(|_| EngineError::Inference("the worker handle was poisoned".into()))?;
        let offset = clock_offset(sink);
        let prepared = self.prepare(&mut worker, wl)?;
        let lengths = &prepared.input_tokens;
        let reference = |i: usize| prepared.reference_tokens.get(i).copied().flatten();

        let warnings = self.streaming_warnings();
        let batches = batching::plan(&self.batching, lengths);
        let mut summary = RunSummary {
            num_batches: u32::try_from(batches.len()).unwrap_or(u32::MAX),
            truncated_prompts: u32::try_from(prepared.truncated.iter().filter(|t| **t).count())
                .unwrap_or(u32::MAX),
            latency_mode: Some(if e.stream {
                "true_streaming"
            } else {
                "per_request_batch"
            }),
            warnings,
            ..RunSummary::default()
        };
        let mut ids_out: Vec<Vec<i64>> = vec![Vec::new(); wl.prompts.len()];
        let (mut slot_steps, mut busy_steps) = (0u64, 0u64);
        let (mut device_peak, mut rss_peak) = (None, None);
        for (bi, members) in batches.iter().enumerate() {
            if sink.cancelled() {
                return Err(EngineError::Cancelled);
            }
            let bi = u32::try_from(bi).unwrap_or(u32::MAX);
            // An empty prompt has nothing to condition on: it fails alone, as in llama.cpp.
            let (empty, members): (Vec<usize>, Vec<usize>) = members
                .iter()
                .partition(|&&i| lengths.get(i).copied().unwrap_or(0) == 0);
            for i in empty {
                sink.on_done(empty_prompt(i, bi, sink.now_s(), reference(i)));
            }
            if members.is_empty() {
                continue;
            }
            let first = members.first().copied().unwrap_or(0) as u64;
            worker.send(&Op::Generate {
                batch: bi,
                requests: self.request_ops(wl, lengths, &members),
                stream: e.stream,
                seed: wl.sampling.seed.wrapping_add(first),
                return_ids: e.return_ids,
            })?;
            let mut batch = self.receive_batch(&mut worker, offset, sink)?;
            device_peak = device_peak.max(batch.device_peak_bytes);
            rss_peak = rss_peak.max(batch.rss_peak_bytes);
            summary.effective_batch_size += members.len() as f64;
            slot_steps += u64::from(batch.steps) * members.len() as u64;
            let passes: Vec<(u32, u32, u32)> = batch
                .finished
                .iter()
                .map(|f| {
                    let input = lengths.get(f.request as usize).copied().unwrap_or(0);
                    // A sequence that stopped computed its end-of-generation token too.
                    let n = f.output_tokens + u32::from(f.finish == FinishReason::Stop);
                    (f.request, input, n.max(1))
                })
                .collect();
            for step in batch_steps(batch.t0, &batch.step_ends, &passes) {
                sink.on_step(step);
            }
            for f in batch.finished {
                let mut token_times = batch.token_times.remove(&f.request).unwrap_or_default();
                busy_steps += u64::from(f.output_tokens);
                if !e.stream {
                    // One generate() call: every request of the batch waited for all of it.
                    sink.on_tokens(f.request, batch.t1, f.output_tokens);
                }
                token_times.truncate(f.output_tokens as usize);
                let idx = f.request as usize;
                if let (Some(ids), Some(slot)) = (f.ids, ids_out.get_mut(idx)) {
                    *slot = ids;
                }
                sink.on_done(RequestRecord {
                    session: None,
                    energy: None,
                    request_id: f.request,
                    batch_index: Some(bi),
                    input_tokens: lengths.get(idx).copied().unwrap_or(0),
                    output_tokens: f.output_tokens,
                    reference_output_tokens: reference(idx),
                    cached_input_tokens: None,
                    scheduled_s: None,
                    submit_s: batch.t0,
                    first_token_s: token_times.first().copied(),
                    end_s: if e.stream { f.end_t } else { batch.t1 },
                    success: true,
                    error: None,
                    finish_reason: f.finish,
                    token_times_s: token_times,
                });
            }
        }
        if !batches.is_empty() {
            summary.effective_batch_size /= batches.len() as f64;
        }
        summary.padding_overhead = if slot_steps > 0 {
            (1.0 - busy_steps as f64 / slot_steps as f64).max(0.0)
        } else {
            0.0
        };
        summary.memory = self.memory(device_peak, rss_peak);
        Ok((summary, ids_out))
    }
}

/// The failed record of empty prompt `i` of batch `batch`, at `now_s`.
fn empty_prompt(i: usize, batch: u32, now_s: f64, reference: Option<u32>) -> RequestRecord {
    RequestRecord {
        session: None,
        energy: None,
        request_id: u32::try_from(i).unwrap_or(u32::MAX),
        batch_index: Some(batch),
        input_tokens: 0,
        output_tokens: 0,
        reference_output_tokens: reference,
        cached_input_tokens: None,
        scheduled_s: None,
        submit_s: now_s,
        first_token_s: None,
        end_s: now_s,
        success: false,
        error: Some("empty prompt: nothing to decode".into()),
        finish_reason: FinishReason::Error,
        token_times_s: Vec::new(),
    }
}

impl Session for TransformersSession<'_> {
    fn run(
        &mut self,
        workload: &Workload,
        sink: &mut dyn RequestSink,
    ) -> Result<RunSummary, EngineError> {
        self.run_inner(workload, sink).map(|(s, _)| s)
    }
    fn kv_cache_bytes(&self) -> Option<u64> {
        None
    }
    fn batching(&self) -> BatchingSpec {
        self.batching
    }
}

/// The forward passes of one `generate()` call from the times they ended: the prefill (from
/// the call's start to the first end, each request by its prompt tokens), then one decode
/// pass per later end, shared by the requests still generating in it. `members` holds
/// (request, prompt tokens, passes it took part in).
fn batch_steps(t0: f64, ends: &[f64], members: &[(u32, u32, u32)]) -> Vec<Step> {
    let mut steps = Vec::with_capacity(ends.len());
    let mut start_s = t0;
    for (k, &end_s) in ends.iter().enumerate() {
        let k = u32::try_from(k).unwrap_or(u32::MAX);
        let (kind, tokens) = if k == 0 {
            let t = members.iter().map(|&(r, input, _)| (r, input)).collect();
            (StepKind::Prefill, t)
        } else {
            let mut t: Vec<(u32, u32)> = members
                .iter()
                .filter(|&&(_, _, passes)| k < passes)
                .map(|&(r, _, _)| (r, 1))
                .collect();
            if t.is_empty() {
                // A pass over padding alone (the call ran on for a row the worker counts
                // differently): the batch's requests share it.
                t = members.iter().map(|&(r, _, _)| (r, 1)).collect();
            }
            (StepKind::Decode, t)
        };
        steps.push(Step {
            kind,
            start_s,
            end_s,
            tokens,
        });
        start_s = end_s;
    }
    steps
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn a_generate_call_is_one_prefill_then_a_decode_pass_per_later_token() {
        // Request 7 (12 prompt tokens) took 3 passes, request 9 (4 tokens) 1.
        let steps = batch_steps(1.0, &[1.5, 1.6, 1.7], &[(7, 12, 3), (9, 4, 1)]);
        assert_eq!(steps.len(), 3);
        assert_eq!(steps[0].kind, StepKind::Prefill);
        assert_eq!((steps[0].start_s, steps[0].end_s), (1.0, 1.5));
        assert_eq!(steps[0].tokens, vec![(7, 12), (9, 4)]);
        assert_eq!(steps[1].kind, StepKind::Decode);
        assert_eq!((steps[1].start_s, steps[1].end_s), (1.5, 1.6));
        assert_eq!(steps[1].tokens, vec![(7, 1)]);
        assert_eq!(steps[2].tokens, vec![(7, 1)]);
        // A worker that does not report its passes gives none.
        assert!(batch_steps(1.0, &[], &[(7, 12, 3)]).is_empty());
    }
}
