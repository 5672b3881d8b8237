//! A trace replay's workload, made once the server is up: the dataset's text tokenized by the
//! server, cut into the trace's prompts, sent on the trace's schedule.

use llem_config::ExperimentConfig;
use llem_engines::workload::dataset::LoadedDataset;
use llem_engines::workload::trace::replay;
use llem_engines::workload::{PromptInput, Workload};
use llem_engines::{Engine, EngineError};

use crate::error::HarnessError;
use crate::progress::{Event, Progress};

/// `workload` replaying `cfg`'s trace, or `workload` itself when the config has none.
pub(crate) fn trace_workload(
    cfg: &ExperimentConfig,
    engine: &dyn Engine,
    data: &LoadedDataset,
    workload: Workload,
    progress: &mut dyn Progress,
) -> Result<Workload, HarnessError> {
    let Some(trace_cfg) = cfg.traffic.as_deref().and_then(|t| t.trace.as_ref()) else {
        return Ok(workload);
    };
    let trace = replay::read(trace_cfg).map_err(|e| HarnessError::Config(e.to_string()))?;
    // Every prompt's text and its reference reply (ShareGPT's answer): real text of both
    // kinds, in the dataset's order.
    let texts = data.prompts.iter().flat_map(|p| {
        let prompt = match &p.input {
            PromptInput::Text { text, .. } => Some(text.as_str()),
            _ => None,
        };
        prompt.into_iter().chain(p.reference_output.as_deref())
    });
    let corpus = replay::corpus::<EngineError>(texts, &mut |t| engine.tokenize(t))?;
    let (prompts, r) = replay::build(
        trace_cfg,
        &trace,
        &corpus,
        cfg.random_seed as u64,
        cfg.max_input_tokens,
        cfg.max_output_tokens,
    )
    .map_err(|e| HarnessError::Config(e.to_string()))?;
    let s = &r.summary;
    progress.event(Event::Note(format!(
        "replaying {} requests of {} over {:.1} s ({} sharing a prefix; prompts cut from {} \
         tokens of {} text)",
        s.requests,
        trace_cfg.path,
        s.span_s,
        s.shared_prefix_requests,
        corpus.len(),
        data.name
    )));
    Ok(workload.replaying(prompts, r))
}
