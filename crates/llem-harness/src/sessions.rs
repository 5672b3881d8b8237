//! A multi-turn run per conversation and per turn: each session's energy is the sum of its
//! requests' attributed energies (so the sessions add up to the requests), its prompt tokens
//! and how many came from the prefix cache; each turn position's means.

use std::collections::BTreeMap;

use llem_config::ExperimentConfig;
use llem_results::RequestRecord;
use llem_results::result::{ConversationsSummary, Distribution, SessionSummary, TurnSummary};

/// The conversations of a run whose traffic was conversations; `None` otherwise.
pub(crate) fn summary(
    cfg: &ExperimentConfig,
    records: &[RequestRecord],
) -> Option<ConversationsSummary> {
    let c = cfg.traffic.as_deref()?.conversations.as_ref()?;
    let mut by_session: BTreeMap<u32, Vec<&RequestRecord>> = BTreeMap::new();
    let mut by_turn: BTreeMap<u32, Vec<&RequestRecord>> = BTreeMap::new();
    for r in records {
        if let Some(s) = r.session {
            by_session.entry(s.session_id).or_default().push(r);
            by_turn.entry(s.turn).or_default().push(r);
        }
    }
    let sessions: Vec<SessionSummary> = by_session
        .iter()
        .map(|(&id, turns)| session(id, turns))
        .collect();
    let energies: Vec<f64> = sessions.iter().filter_map(|s| s.energy_j).collect();
    let later: Vec<&RequestRecord> = by_turn
        .range(1..)
        .flat_map(|(_, rs)| rs.iter().copied())
        .collect();
    let later_cached: Option<u64> = later
        .iter()
        .map(|r| r.cached_input_tokens.map(u64::from))
        .sum();
    let later_input: u64 = later.iter().map(|r| u64::from(r.input_tokens)).sum();
    Some(ConversationsSummary {
        sessions: u32::try_from(sessions.len()).unwrap_or(u32::MAX),
        turns: u32::try_from(by_session.values().map(Vec::len).sum::<usize>()).unwrap_or(u32::MAX),
        think_time_seconds: c.think_time_seconds,
        session_interval_seconds: c.session_interval_seconds,
        energy_per_session_j: (energies.len() == sessions.len())
            .then(|| Distribution::of(energies))
            .flatten(),
        later_turn_cache_hit_rate: later_cached
            .filter(|_| later_input > 0)
            .map(|c| c as f64 / later_input as f64),
        by_turn: by_turn.iter().map(|(&t, rs)| turn(t, rs)).collect(),
        by_session: sessions,
    })
}

fn session(session_id: u32, turns: &[&RequestRecord]) -> SessionSummary {
    let input_tokens: u64 = turns.iter().map(|r| u64::from(r.input_tokens)).sum();
    let cached: Option<u64> = turns
        .iter()
        .map(|r| r.cached_input_tokens.map(u64::from))
        .sum();
    SessionSummary {
        session_id,
        turns: u32::try_from(turns.len()).unwrap_or(u32::MAX),
        failed_turns: u32::try_from(turns.iter().filter(|r| !r.success).count())
            .unwrap_or(u32::MAX),
        input_tokens,
        output_tokens: turns.iter().map(|r| u64::from(r.output_tokens)).sum(),
        cached_input_tokens: cached,
        cache_hit_rate: cached
            .filter(|_| input_tokens > 0)
            .map(|c| c as f64 / input_tokens as f64),
        energy_j: turns.iter().map(|r| r.energy.map(|e| e.energy_j)).sum(),
    }
}

fn turn(turn: u32, rs: &[&RequestRecord]) -> TurnSummary {
    let n = rs.len().max(1) as f64;
    let mean = |v: Option<f64>| v.map(|x| x / n);
    TurnSummary {
        turn,
        requests: u32::try_from(rs.len()).unwrap_or(u32::MAX),
        mean_input_tokens: rs.iter().map(|r| f64::from(r.input_tokens)).sum::<f64>() / n,
        mean_cached_input_tokens: mean(
            rs.iter()
                .map(|r| r.cached_input_tokens.map(f64::from))
                .sum(),
        ),
        mean_energy_j: mean(rs.iter().map(|r| r.energy.map(|e| e.energy_j)).sum()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use llem_results::{FinishReason, RequestEnergy, SessionTurn};

    fn rec(id: u32, session_id: u32, turn: u32, input: u32, cached: u32, j: f64) -> RequestRecord {
        RequestRecord {
            session: Some(SessionTurn { session_id, turn }),
            energy: Some(RequestEnergy {
                energy_j: j,
                prefill_energy_j: j / 2.0,
                decode_energy_j: j / 2.0,
                node_energy_j: None,
            }),
            request_id: id,
            batch_index: None,
            input_tokens: input,
            output_tokens: 10,
            reference_output_tokens: None,
            cached_input_tokens: Some(cached),
            scheduled_s: None,
            submit_s: 0.0,
            first_token_s: None,
            end_s: 1.0,
            success: true,
            error: None,
            finish_reason: FinishReason::Stop,
            token_times_s: Vec::new(),
        }
    }

    #[test]
    fn sessions_add_up_to_their_requests_and_turns_average_over_sessions() {
        let cfg: ExperimentConfig = serde_json::from_value(serde_json::json!({
            "model": "m", "engine": "vllm",
            "traffic": {"conversations": {"sessions": 2, "turns": 2}}
        }))
        .unwrap();
        let rs = [
            rec(0, 0, 0, 100, 0, 2.0),
            rec(1, 1, 0, 50, 0, 1.0),
            rec(2, 0, 1, 300, 200, 3.0),
            rec(3, 1, 1, 100, 40, 1.5),
        ];
        let s = summary(&cfg, &rs).unwrap();
        assert_eq!((s.sessions, s.turns), (2, 4));
        assert_eq!(s.by_session[0].energy_j, Some(5.0));
        assert_eq!(s.by_session[1].energy_j, Some(2.5));
        let total: f64 = rs.iter().map(|r| r.energy.unwrap().energy_j).sum();
        let sessions: f64 = s.by_session.iter().map(|x| x.energy_j.unwrap()).sum();
        assert_eq!(total, sessions);
        assert_eq!(s.by_session[0].cache_hit_rate, Some(0.5));
        assert_eq!(s.later_turn_cache_hit_rate, Some(240.0 / 400.0));
        assert_eq!(s.by_turn[1].mean_input_tokens, 200.0);
        assert_eq!(s.by_turn[1].mean_energy_j, Some(2.25));
        assert_eq!(s.energy_per_session_j.unwrap().n, 2);
        // A turn without energy leaves its session's energy unknown, not smaller.
        let mut partial = rs.clone();
        partial[3].energy = None;
        let p = summary(&cfg, &partial).unwrap();
        assert_eq!(p.by_session[1].energy_j, None);
        assert!(p.energy_per_session_j.is_none());
    }
}
