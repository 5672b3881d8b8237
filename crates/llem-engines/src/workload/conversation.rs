//! Multi-turn conversations as a served run's traffic: which messages each conversation
//! sends, and when it starts. The replies are the server's, threaded in as they arrive, so
//! only the user side is planned here.

use llem_config::ConversationsConfig;

use super::{Prompt, PromptInput};

/// One conversation.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionPlan {
    /// Its index.
    pub session_id: u32,
    /// When its first message is sent, s from the start.
    pub start_s: f64,
    /// Its user messages, in order (each with its own output limit).
    pub turns: Vec<Prompt>,
}

/// Every conversation of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct ConversationPlan {
    /// The conversations.
    pub sessions: Vec<SessionPlan>,
    /// Pause between a reply's end and the next message, s.
    pub think_time_s: f64,
    /// Gap between the starts of consecutive conversations, s.
    pub session_interval_s: f64,
}

/// The conversations of `cfg` over the dataset's `prompts`: a ShareGPT conversation per
/// session (its first message and later human turns, at most `turns`), or, for synthetic
/// prompts, `turns` consecutive prompts per session.
pub fn plan(cfg: &ConversationsConfig, prompts: &[Prompt]) -> ConversationPlan {
    let synthetic = prompts
        .first()
        .is_some_and(|p| matches!(p.input, PromptInput::Tokens { .. }));
    let turns = cfg.turns as usize;
    let sessions = (0..cfg.sessions as usize)
        .map_while(|s| {
            let messages: Vec<Prompt> = if synthetic {
                prompts.get(s * turns..(s + 1) * turns)?.to_vec()
            } else {
                let first = prompts.get(s)?;
                let later = first.follow_ups.iter().map(|text| Prompt {
                    dataset_index: first.dataset_index,
                    input: PromptInput::Text {
                        text: text.clone(),
                        chat: true,
                    },
                    group: first.group.clone(),
                    reference_output: None,
                    output_tokens: None,
                    ignore_eos: false,
                    follow_ups: Vec::new(),
                });
                std::iter::once(first.clone())
                    .chain(later)
                    .take(turns)
                    .collect()
            };
            Some(SessionPlan {
                session_id: u32::try_from(s).unwrap_or(u32::MAX),
                start_s: s as f64 * cfg.session_interval_seconds,
                turns: messages,
            })
        })
        .collect();
    ConversationPlan {
        sessions,
        think_time_s: cfg.think_time_seconds,
        session_interval_s: cfg.session_interval_seconds,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn text(t: &str, later: &[&str]) -> Prompt {
        Prompt {
            dataset_index: 0,
            input: PromptInput::Text {
                text: t.into(),
                chat: true,
            },
            group: None,
            reference_output: None,
            output_tokens: None,
            ignore_eos: false,
            follow_ups: later.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn sharegpt_sessions_take_their_later_turns_and_synthetic_ones_consecutive_prompts() {
        let cfg = ConversationsConfig {
            sessions: 2,
            turns: 2,
            think_time_seconds: 0.5,
            session_interval_seconds: 3.0,
        };
        let p = plan(
            &cfg,
            &[text("a", &["a2", "a3"]), text("b", &[]), text("c", &[])],
        );
        assert_eq!(p.sessions.len(), 2);
        assert_eq!(p.sessions[0].turns.len(), 2);
        assert_eq!(p.sessions[0].turns[1].input, text("a2", &[]).input);
        assert_eq!(p.sessions[1].turns.len(), 1);
        assert_eq!((p.sessions[0].start_s, p.sessions[1].start_s), (0.0, 3.0));
        let synth: Vec<Prompt> = (0..4)
            .map(|i| Prompt {
                input: PromptInput::Tokens {
                    n_tokens: 8,
                    seed: i,
                },
                ..text("", &[])
            })
            .collect();
        let p = plan(&cfg, &synth);
        assert_eq!(p.sessions[1].turns[0], synth[2]);
        assert_eq!(p.sessions[1].turns[1], synth[3]);
    }
}
