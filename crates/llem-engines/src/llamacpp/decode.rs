//! Batched decode: the sequences of a batch share one llama.cpp batch per step (one KV
//! stream each), stop independently on end-of-generation or their token limit, and free
//! their KV cells as they finish.

use std::time::Instant;

use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token::logit_bias::LlamaLogitBias;
use llem_results::{FinishReason, RequestRecord};

use super::LlamaCppSession;
use super::prompt::Tokenized;
use crate::engine::{EngineError, RequestSink, RunSummary, Step, StepKind};
use crate::sampling::SamplingParams;
use crate::workload::{Workload, batching};

/// A sink that only keeps time (tests, `complete`).
pub(super) struct Collect {
    epoch: Instant,
}

impl Default for Collect {
    fn default() -> Self {
        Collect {
            epoch: Instant::now(),
        }
    }
}

impl RequestSink for Collect {
    fn now_s(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64()
    }
    fn on_tokens(&mut self, _: u32, _: f64, _: u32) {}
    fn on_done(&mut self, _: RequestRecord) {}
}

/// The sampler chain of one request, in Hugging Face's order (penalty, temperature, top-k,
/// top-p, min-p, then the draw), seeded per request so its tokens do not depend on the batch.
/// `never` lists tokens that may not be drawn at all (end-of-generation for ignore_eos).
fn sampler(
    p: &SamplingParams,
    n_vocab: i32,
    request_id: u32,
    history: usize,
    never: &[LlamaToken],
) -> LlamaSampler {
    let mut chain = Vec::new();
    if !never.is_empty() {
        let bias: Vec<LlamaLogitBias> = never
            .iter()
            .map(|&t| LlamaLogitBias::new(t, f32::NEG_INFINITY))
            .collect();
        chain.push(LlamaSampler::logit_bias(n_vocab, &bias));
    }
    if (p.repetition_penalty - 1.0).abs() > f64::EPSILON {
        let last_n = i32::try_from(history).unwrap_or(i32::MAX);
        chain.push(LlamaSampler::penalties(
            n_vocab,
            last_n,
            p.repetition_penalty as f32,
            0.0,
            0.0,
        ));
    }
    if p.greedy {
        chain.push(LlamaSampler::greedy());
    } else {
        chain.push(LlamaSampler::temp(p.temperature as f32));
        if p.top_k > 0 {
            chain.push(LlamaSampler::top_k(
                i32::try_from(p.top_k).unwrap_or(i32::MAX),
            ));
        }
        if p.top_p < 1.0 {
            chain.push(LlamaSampler::top_p(p.top_p as f32, 1));
        }
        if let Some(m) = p.min_p.filter(|m| *m > 0.0) {
            chain.push(LlamaSampler::min_p(m as f32, 1));
        }
        // u32::MAX asks llama.cpp for a random seed; keep runs reproducible.
        let seed = (p.seed.wrapping_add(u64::from(request_id)) as u32).min(u32::MAX - 1);
        chain.push(LlamaSampler::dist(seed));
    }
    LlamaSampler::chain_simple(chain)
}

struct Slot {
    request: usize,
    seq: i32,
    pos: i32,
    input_tokens: u32,
    limit: u32,
    ignore_eos: bool,
    min_new: u32,
    sampler: LlamaSampler,
    generated: Vec<LlamaToken>,
    times: Vec<f64>,
    submit_s: f64,
    logits_at: i32,
    done: Option<FinishReason>,
}

fn record(
    s: &Slot,
    batch_index: u32,
    reference: Option<u32>,
    end_s: f64,
    finish: FinishReason,
) -> RequestRecord {
    RequestRecord {
        session: None,
        energy: None,
        request_id: u32::try_from(s.request).unwrap_or(u32::MAX),
        batch_index: Some(batch_index),
        input_tokens: s.input_tokens,
        output_tokens: u32::try_from(s.generated.len()).unwrap_or(u32::MAX),
        reference_output_tokens: reference,
        cached_input_tokens: None,
        scheduled_s: None,
        submit_s: s.submit_s,
        first_token_s: s.times.first().copied(),
        end_s,
        success: true,
        error: None,
        finish_reason: finish,
        token_times_s: s.times.clone(),
    }
}

fn inference(e: impl std::fmt::Display) -> EngineError {
    EngineError::Inference(e.to_string())
}

/// Picks the next token of `slot` from its logits; end-of-generation tokens are masked while
/// the slot must go on. ignore_eos is a logit bias inside the slot's sampler chain (the fast
/// path synthetic benchmarks take); min_new_tokens masks a copy of the logits per token.
fn next_token(sess: &LlamaCppSession<'_>, slot: &mut Slot) -> LlamaToken {
    let mask = !slot.ignore_eos && (slot.generated.len() as u32) < slot.min_new;
    if !mask {
        return slot.sampler.sample(&sess.ctx, slot.logits_at);
    }
    let mut arr = sess.ctx.token_data_array_ith(slot.logits_at);
    for d in &mut arr.data {
        if sess.engine.eog.contains(&d.id()) {
            d.set_logit(f32::NEG_INFINITY);
        }
    }
    arr.apply_sampler(&mut slot.sampler);
    let t = arr
        .selected_token()
        .or_else(|| arr.data.first().map(|d| d.id()))
        .unwrap_or(LlamaToken(0));
    slot.sampler.accept(t);
    t
}

/// Takes the token just sampled for `slot` at time `t`; returns true when one was emitted.
fn take(sess: &LlamaCppSession<'_>, slot: &mut Slot, t: f64, limit_pos: i32) -> bool {
    let token = next_token(sess, slot);
    if !slot.ignore_eos && sess.engine.model.vocab().is_eog(token) {
        slot.done = Some(FinishReason::Stop);
        return false;
    }
    slot.generated.push(token);
    slot.times.push(t);
    if slot.generated.len() as u32 >= slot.limit || slot.pos >= limit_pos {
        slot.done = Some(FinishReason::Length);
    }
    true
}

/// The prompts of a workload, tokenised once, with their reference output lengths.
struct Inputs {
    prompts: Vec<Tokenized>,
    references: Vec<Option<u32>>,
}

fn tokenize(sess: &LlamaCppSession<'_>, wl: &Workload) -> Inputs {
    let engine = sess.engine;
    Inputs {
        prompts: wl
            .prompts
            .iter()
            .map(|p| engine.tokenize_prompt(p, wl.max_input_tokens))
            .collect(),
        references: wl
            .prompts
            .iter()
            .map(|p| {
                p.reference_output
                    .as_ref()
                    .map(|r| u32::try_from(engine.tokenize(r).len()).unwrap_or(u32::MAX))
            })
            .collect(),
    }
}

/// Why a prompt cannot be decoded in a slot of `per_slot` tokens: an empty prompt has no
/// position to take logits from; a too-long one does not fit.
fn unfit(n_in: usize, per_slot: i32) -> Option<String> {
    if n_in == 0 {
        Some("empty prompt: nothing to decode".to_string())
    } else if n_in as i64 >= i64::from(per_slot) {
        Some(format!(
            "prompt of {n_in} tokens does not fit the {per_slot}-token context slot \
             (set max_input_tokens or llamacpp.n_ctx)"
        ))
    } else {
        None
    }
}

/// One slot per member of batch `bi` that fits; a member that does not fails alone (its
/// record goes to the sink), and the rest of the batch goes on.
fn open_slots(
    sess: &LlamaCppSession<'_>,
    wl: &Workload,
    inputs: &Inputs,
    members: &[usize],
    bi: u32,
    sink: &mut dyn RequestSink,
) -> Vec<Slot> {
    let plan = sess.plan;
    let per_slot = i32::try_from(plan.tokens_per_slot).unwrap_or(i32::MAX);
    let n_vocab = sess.engine.model.n_vocab();
    let submit_s = sink.now_s();
    let mut slots: Vec<Slot> = Vec::with_capacity(members.len());
    for (k, &req) in members.iter().enumerate() {
        let Some(p) = inputs.prompts.get(req) else {
            continue;
        };
        let prompt = wl.prompts.get(req);
        let n_in = p.tokens.len();
        if let Some(error) = unfit(n_in, per_slot) {
            sink.on_done(RequestRecord {
                session: None,
                energy: None,
                request_id: u32::try_from(req).unwrap_or(u32::MAX),
                batch_index: Some(bi),
                input_tokens: u32::try_from(n_in).unwrap_or(u32::MAX),
                output_tokens: 0,
                reference_output_tokens: inputs.references.get(req).copied().flatten(),
                cached_input_tokens: None,
                scheduled_s: None,
                submit_s,
                first_token_s: None,
                end_s: sink.now_s(),
                success: false,
                error: Some(error),
                finish_reason: FinishReason::Error,
                token_times_s: Vec::new(),
            });
            continue;
        }
        let room = (per_slot as usize - n_in) as u32;
        let ignore_eos = prompt.is_some_and(|p| p.ignore_eos);
        let never: &[LlamaToken] = if ignore_eos { &sess.engine.eog } else { &[] };
        let mut s = sampler(
            &wl.sampling,
            n_vocab,
            req as u32,
            plan.tokens_per_slot as usize,
            never,
        );
        if (wl.sampling.repetition_penalty - 1.0).abs() > f64::EPSILON {
            // Hugging Face penalises tokens of the prompt too.
            s.accept_many(p.tokens.iter());
        }
        slots.push(Slot {
            request: req,
            seq: i32::try_from(k).unwrap_or(0),
            pos: 0,
            input_tokens: u32::try_from(n_in).unwrap_or(u32::MAX),
            limit: wl.output_limit_within(prompt, room),
            ignore_eos,
            min_new: wl.sampling.min_new_tokens.unwrap_or(0),
            sampler: s,
            generated: Vec::new(),
            times: Vec::new(),
            submit_s,
            logits_at: -1,
            done: None,
        });
    }
    slots
}

/// Prefill: every prompt of the batch, packed into as few decode calls as fit; each slot's
/// first token is sampled as its prompt completes.
fn prefill(
    sess: &mut LlamaCppSession<'_>,
    batch: &mut LlamaBatch,
    slots: &mut [Slot],
    prompts: &[Tokenized],
    sink: &mut dyn RequestSink,
) -> Result<(), EngineError> {
    let n_batch = sess.n_batch as usize;
    let per_slot = i32::try_from(sess.plan.tokens_per_slot).unwrap_or(i32::MAX);
    let mut queue: Vec<(usize, usize)> = (0..slots.len()).map(|i| (i, 0)).collect();
    let mut qi = 0;
    while qi < queue.len() {
        batch.clear();
        let mut finishing: Vec<usize> = Vec::new();
        let mut shares: Vec<(u32, u32)> = Vec::new();
        while qi < queue.len() && (batch.n_tokens() as usize) < n_batch {
            let Some((si, start)) = queue.get(qi).copied() else {
                break;
            };
            let Some(slot) = slots.get_mut(si) else { break };
            let tokens = &prompts
                .get(slot.request)
                .map(|p| &p.tokens[..])
                .unwrap_or_default();
            let space = n_batch - batch.n_tokens() as usize;
            let end = (start + space).min(tokens.len());
            for (j, &tok) in tokens.iter().enumerate().take(end).skip(start) {
                let last = j + 1 == tokens.len();
                batch
                    .add(tok, i32::try_from(j).unwrap_or(0), &[slot.seq], last)
                    .map_err(inference)?;
                if last {
                    slot.logits_at = batch.n_tokens() - 1;
                }
            }
            slot.pos = i32::try_from(end).unwrap_or(0);
            shares.push((
                slot.request as u32,
                u32::try_from(end - start).unwrap_or(u32::MAX),
            ));
            if end == tokens.len() {
                finishing.push(si);
                qi += 1;
            } else if let Some(q) = queue.get_mut(qi) {
                q.1 = end;
            }
        }
        if sink.cancelled() {
            return Err(EngineError::Cancelled);
        }
        let start_s = sink.now_s();
        sess.ctx.decode(batch).map_err(inference)?;
        let t = sink.now_s();
        for si in finishing {
            if let Some(slot) = slots.get_mut(si)
                && take(sess, slot, t, per_slot)
            {
                sink.on_tokens(slot.request as u32, t, 1);
            }
        }
        sink.on_step(Step {
            kind: StepKind::Prefill,
            start_s,
            end_s: sink.now_s(),
            tokens: shares,
        });
    }
    Ok(())
}

/// Reports every slot that finished since the last step and frees its KV cells.
fn retire_finished(
    sess: &mut LlamaCppSession<'_>,
    slots: &mut [Slot],
    bi: u32,
    references: &[Option<u32>],
    outputs: &mut [Vec<LlamaToken>],
    sink: &mut dyn RequestSink,
) -> Result<(), EngineError> {
    for slot in slots
        .iter_mut()
        .filter(|s| s.done.is_some() && s.logits_at >= 0)
    {
        let reason = slot.done.unwrap_or(FinishReason::Length);
        sess.ctx
            .clear_kv_cache_seq(Some(u32::try_from(slot.seq).unwrap_or(0)), None, None)
            .map_err(inference)?;
        let reference = references.get(slot.request).copied().flatten();
        // A sequence that stopped ends now (the stop token was sampled); one that hit its
        // limit ended with its last token.
        let end = if reason == FinishReason::Stop {
            sink.now_s()
        } else {
            slot.times.last().copied().unwrap_or_else(|| sink.now_s())
        };
        sink.on_done(record(slot, bi, reference, end, reason));
        if let Some(o) = outputs.get_mut(slot.request) {
            *o = std::mem::take(&mut slot.generated);
        }
        slot.logits_at = -1;
    }
    Ok(())
}

/// One decode step: one token for each of the `active` slots.
fn decode_step(
    sess: &mut LlamaCppSession<'_>,
    batch: &mut LlamaBatch,
    slots: &mut [Slot],
    active: &[usize],
    sink: &mut dyn RequestSink,
) -> Result<(), EngineError> {
    let per_slot = i32::try_from(sess.plan.tokens_per_slot).unwrap_or(i32::MAX);
    batch.clear();
    for &i in active {
        let Some(slot) = slots.get_mut(i) else {
            continue;
        };
        let last = *slot.generated.last().unwrap_or(&LlamaToken(0));
        batch
            .add(last, slot.pos, &[slot.seq], true)
            .map_err(inference)?;
        slot.logits_at = batch.n_tokens() - 1;
        slot.pos += 1;
    }
    let start_s = sink.now_s();
    sess.ctx.decode(batch).map_err(inference)?;
    let t = sink.now_s();
    for &i in active {
        if let Some(slot) = slots.get_mut(i)
            && take(sess, slot, t, per_slot)
        {
            sink.on_tokens(slot.request as u32, t, 1);
        }
    }
    sink.on_step(Step {
        kind: StepKind::Decode,
        start_s,
        end_s: sink.now_s(),
        tokens: active
            .iter()
            .filter_map(|&i| slots.get(i).map(|s| (s.request as u32, 1)))
            .collect(),
    });
    Ok(())
}

/// What a run has produced so far: each request's tokens, and its slot-steps — all of them,
/// and those a sequence was decoding in (their ratio is the padding overhead).
struct Produced {
    outputs: Vec<Vec<LlamaToken>>,
    slot_steps: u64,
    busy_steps: u64,
}

/// Decodes batch `bi` to its end: one token per unfinished sequence per step.
fn decode_batch(
    sess: &mut LlamaCppSession<'_>,
    batch: &mut LlamaBatch,
    slots: &mut [Slot],
    bi: u32,
    references: &[Option<u32>],
    produced: &mut Produced,
    sink: &mut dyn RequestSink,
) -> Result<(), EngineError> {
    loop {
        retire_finished(sess, slots, bi, references, &mut produced.outputs, sink)?;
        let active: Vec<usize> = (0..slots.len())
            .filter(|&i| slots.get(i).is_some_and(|s| s.done.is_none()))
            .collect();
        if active.is_empty() {
            return Ok(());
        }
        if sink.cancelled() {
            return Err(EngineError::Cancelled);
        }
        decode_step(sess, batch, slots, &active, sink)?;
        produced.slot_steps += slots.len() as u64;
        produced.busy_steps += active.len() as u64;
    }
}

/// Runs the workload; returns the summary and every request's generated tokens.
pub(super) fn run(
    sess: &mut LlamaCppSession<'_>,
    wl: &Workload,
    sink: &mut dyn RequestSink,
) -> Result<(RunSummary, Vec<Vec<LlamaToken>>), EngineError> {
    // The batches come from the plan the context was opened for: never more sequences than
    // it holds.
    let plan = sess.plan;
    let inputs = tokenize(sess, wl);
    let lengths: Vec<u32> = inputs
        .prompts
        .iter()
        .map(|p| u32::try_from(p.tokens.len()).unwrap_or(u32::MAX))
        .collect();
    let batches = batching::plan(&plan.batching, &lengths);
    let mut batch = LlamaBatch::new(
        sess.n_batch as usize,
        i32::try_from(plan.batching.batch_size.get()).unwrap_or(i32::MAX),
    );
    let mut produced = Produced {
        outputs: vec![Vec::new(); inputs.prompts.len()],
        slot_steps: 0,
        busy_steps: 0,
    };
    let mut summary = RunSummary {
        num_batches: u32::try_from(batches.len()).unwrap_or(u32::MAX),
        truncated_prompts: u32::try_from(inputs.prompts.iter().filter(|p| p.truncated).count())
            .unwrap_or(u32::MAX),
        ..RunSummary::default()
    };
    for (bi, members) in batches.iter().enumerate() {
        let bi = u32::try_from(bi).unwrap_or(u32::MAX);
        let mut slots = open_slots(sess, wl, &inputs, members, bi, sink);
        summary.effective_batch_size += slots.len() as f64;
        for s in &slots {
            sess.ctx
                .clear_kv_cache_seq(Some(u32::try_from(s.seq).unwrap_or(0)), None, None)
                .map_err(inference)?;
        }
        prefill(sess, &mut batch, &mut slots, &inputs.prompts, sink)?;
        produced.slot_steps += slots.len() as u64;
        produced.busy_steps += slots.len() as u64;
        decode_batch(
            sess,
            &mut batch,
            &mut slots,
            bi,
            &inputs.references,
            &mut produced,
            sink,
        )?;
    }
    if !batches.is_empty() {
        summary.effective_batch_size /= batches.len() as f64;
    }
    summary.padding_overhead = if produced.slot_steps > 0 {
        1.0 - produced.busy_steps as f64 / produced.slot_steps as f64
    } else {
        0.0
    };
    Ok((summary, produced.outputs))
}
