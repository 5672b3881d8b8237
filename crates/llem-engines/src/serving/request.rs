//! The request bodies of a serving run: standard OpenAI fields, the engine's extensions and
//! its section's per-request fields, one body per prompt, serialised before the first send.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::client::{
    self, Api, BodyParams, Endpoint, Prepared, PreparedSession, PreparedTurn, PromptBody,
    SessionsPlan,
};
use super::engines::ServerSpec;
use crate::workload::{Prompt, PromptInput, Workload};

/// Every request of `workload`, ready to send to `endpoint`.
pub(super) fn prepare(
    endpoint: &Endpoint,
    spec: Option<&ServerSpec>,
    cfg: &llem_config::ExperimentConfig,
    workload: &Workload,
) -> Vec<Prepared> {
    let section = spec.map(|s| (s.request_fields)(cfg)).unwrap_or_default();
    // The server cuts each prompt to its last `max_input_tokens` tokens itself.
    let truncate = workload
        .max_input_tokens
        .filter(|_| spec.is_some_and(|s| s.truncates_prompts));
    let replay = workload
        .traffic
        .as_ref()
        .is_some_and(|t| t.replay.is_some());
    workload
        .prompts
        .iter()
        .map(|p| {
            let mut params = body_params(workload, p, &section);
            if let Some(n) = truncate {
                params
                    .extended
                    .insert("truncate_prompt_tokens".into(), json!(n));
            }
            // A replay keeps the server's prompt cache on: its shared prefixes hitting the
            // cache are part of what production traffic costs.
            if let Some(field) = spec.and_then(|s| s.prompt_cache_off).filter(|_| !replay) {
                params.extended.insert(field.into(), json!(false));
            }
            let synthetic;
            let (api, prompt) = match &p.input {
                PromptInput::Text { text, chat: true } => (Api::Chat, PromptBody::Text(text)),
                PromptInput::Text { text, chat: false } => {
                    (Api::Completions, PromptBody::Text(text))
                }
                PromptInput::Tokens { n_tokens, seed } => {
                    synthetic = synthetic_text(*n_tokens, *seed);
                    (Api::Completions, PromptBody::Text(&synthetic))
                }
                PromptInput::TokenIds(ids) => (Api::Completions, PromptBody::Ids(ids)),
            };
            Prepared {
                api,
                body: Arc::new(client::body(endpoint, api, prompt, &params)),
                max_tokens: params.max_tokens,
                prompt_tokens: match &p.input {
                    PromptInput::TokenIds(ids) => u32::try_from(ids.len()).ok(),
                    _ => None,
                },
                exact_output: p.ignore_eos && params.max_tokens.is_some(),
                keep_reply: false,
            }
        })
        .collect()
}

/// The conversations of `workload`, ready to send (null when it has none): each turn's
/// message and decoding fields; the server's prompt cache stays on, as a conversation's
/// later turns repeat its earlier ones.
pub(super) fn prepare_sessions(
    spec: Option<&ServerSpec>,
    cfg: &llem_config::ExperimentConfig,
    workload: &Workload,
) -> Option<SessionsPlan> {
    let plan = workload.traffic.as_ref()?.conversations.as_ref()?;
    let section = spec.map(|s| (s.request_fields)(cfg)).unwrap_or_default();
    let sessions = plan
        .sessions
        .iter()
        .map(|s| PreparedSession {
            session_id: s.session_id,
            start_s: s.start_s,
            turns: s
                .turns
                .iter()
                .map_while(|p| {
                    let message = match &p.input {
                        PromptInput::Text { text, .. } => text.clone(),
                        PromptInput::Tokens { n_tokens, seed } => synthetic_text(*n_tokens, *seed),
                        // A chat message is text; conversations are planned from the dataset's
                        // text or synthetic messages, never from a trace's token ids.
                        PromptInput::TokenIds(_) => return None,
                    };
                    let params = body_params(workload, p, &section);
                    Some(PreparedTurn {
                        message,
                        exact_output: p.ignore_eos && params.max_tokens.is_some(),
                        params,
                    })
                })
                .collect(),
        })
        .collect();
    Some(SessionsPlan {
        sessions,
        think_time_s: plan.think_time_s,
    })
}

/// The decoding fields of one request: the workload's sampling, then the engine section's
/// per-request fields over them.
fn body_params(workload: &Workload, prompt: &Prompt, section: &Map<String, Value>) -> BodyParams {
    let s = &workload.sampling;
    let mut standard = Map::new();
    if s.greedy {
        standard.insert("temperature".into(), json!(0.0));
    } else {
        standard.insert("temperature".into(), json!(s.temperature));
        if s.top_p < 1.0 {
            standard.insert("top_p".into(), json!(s.top_p));
        }
    }
    standard.insert("seed".into(), json!(s.seed));
    let mut extended = Map::new();
    if !s.greedy && s.top_k > 0 {
        extended.insert("top_k".into(), json!(s.top_k));
    }
    if let Some(p) = s.min_p.filter(|_| !s.greedy) {
        extended.insert("min_p".into(), json!(p));
    }
    if (s.repetition_penalty - 1.0).abs() > f64::EPSILON {
        extended.insert("repetition_penalty".into(), json!(s.repetition_penalty));
    }
    if let Some(m) = s.min_new_tokens {
        extended.insert("min_tokens".into(), json!(m));
    }
    if prompt.ignore_eos {
        extended.insert("ignore_eos".into(), Value::Bool(true));
    }
    extended.extend(section.iter().map(|(k, v)| (k.clone(), v.clone())));
    BodyParams {
        max_tokens: workload.output_limit(Some(prompt)),
        standard,
        extended,
    }
}

/// A prompt of about `n` tokens for a server whose vocabulary llem does not hold: common
/// words that are one token each in the usual BPE vocabularies. The server's usage gives the
/// exact count.
fn synthetic_text(n: u32, seed: u64) -> String {
    const WORDS: &[&str] = &[
        " the", " of", " and", " to", " in", " is", " that", " for", " it", " as", " with", " was",
        " on", " be", " at", " by", " this", " had", " not", " are", " but", " from", " or",
        " have", " an", " they", " which", " one", " you", " were",
    ];
    let mut rng = llem_config::rng::SplitMix64::new(seed);
    let mut s = String::with_capacity(n as usize * 5);
    for _ in 0..n {
        let i = rng.below(WORDS.len() as u64) as usize;
        s.push_str(WORDS.get(i).copied().unwrap_or(" the"));
    }
    s
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    /// vLLM enforces `max_input_tokens` itself: every request carries
    /// `truncate_prompt_tokens`; servers that cannot cut prompts get no such field.
    #[test]
    fn max_input_tokens_reaches_vllm_as_truncate_prompt_tokens() {
        let endpoint = Endpoint {
            base_url: "http://127.0.0.1:1".into(),
            api_key: None,
            model: "m".into(),
            continuous_usage: true,
            stall_timeout: std::time::Duration::from_secs(1),
        };
        let cfg: llem_config::ExperimentConfig =
            serde_json::from_value(json!({"model": "m", "engine": "vllm"})).unwrap();
        let prompt = Prompt {
            dataset_index: 0,
            input: PromptInput::Text {
                text: "hello".into(),
                chat: true,
            },
            group: None,
            reference_output: None,
            output_tokens: None,
            ignore_eos: false,
            follow_ups: Vec::new(),
        };
        let mut workload = crate::registry::workload(&cfg, vec![prompt]);
        workload.max_input_tokens = Some(64);
        let body = |spec: &ServerSpec| {
            let p = prepare(&endpoint, Some(spec), &cfg, &workload);
            serde_json::from_slice::<Value>(p[0].body.as_ref()).unwrap()
        };
        let v = body(&crate::serving::engines::vllm::SPEC);
        assert_eq!(v["truncate_prompt_tokens"], 64, "{v}");
        let s = body(&crate::serving::engines::sglang::SPEC);
        assert!(s.get("truncate_prompt_tokens").is_none(), "{s}");
    }

    #[test]
    fn synthetic_text_is_seeded_and_sized() {
        let a = synthetic_text(50, 1);
        assert_eq!(a, synthetic_text(50, 1));
        assert_ne!(a, synthetic_text(50, 2));
        assert_eq!(a.split_whitespace().count(), 50);
    }
}
