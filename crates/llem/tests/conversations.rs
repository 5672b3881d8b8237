//! Multi-turn conversations on a real `llama-server` serving SmolLM2: each turn's prompt is
//! the conversation so far with the server's own replies, sent after the reply before it and
//! the think time; the server's prompt cache serves what a conversation repeats; the
//! conversations' energies add up to their requests'.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::collections::BTreeMap;

use llem_results::{ExperimentResult, RequestRecord, read_requests};

use crate::common;

#[test]
fn conversations_thread_the_servers_replies_and_add_up_per_session_and_turn() {
    let _machine = common::exclusive();
    let home = tempfile::tempdir().unwrap();
    let (stop, writer) = common::rapl_zone(&home.path().join("powercap"), 20.0);
    let cfg = home.path().join("conversations.yaml");
    // Synthetic messages of 40 tokens asking for exactly 12 tokens each: 3 conversations of
    // 3 turns, started 0.2 s apart, 0.5 s of think time.
    std::fs::write(
        &cfg,
        "model: SmolLM2-135M-Instruct.Q4_1.gguf\n\
         engine: llamacpp\n\
         runners: {llamacpp: local}\n\
         dataset: {source: synthetic, n_prompts: 9, synthetic: {input_tokens: 40, output_tokens: 12, distribution: fixed}}\n\
         max_output_tokens: 64\n\
         llamacpp: {batch_size: 3, n_threads: 2, n_ctx: 3072}\n\
         traffic: {conversations: {sessions: 3, turns: 3, think_time_seconds: 0.5, session_interval_seconds: 0.2}}\n\
         measurement: {methodology: total}\n\
         warmup: {n_warmup: 1, thermal_floor_seconds: 0}\n\
         baseline: {enabled: false}\n",
    )
    .unwrap();
    let out = home.path().join("results");
    let o = common::llem_in(home.path())
        .args(["run", cfg.to_str().unwrap(), "-q", "--output"])
        .arg(&out)
        .output()
        .unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let lag_s = writer.join().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let result = common::result_file(&out);
    let r: ExperimentResult = serde_json::from_slice(&std::fs::read(&result).unwrap()).unwrap();
    assert_eq!(r.traffic.as_ref().unwrap().arrival, "conversations");
    let reqs = read_requests(&result.with_file_name("requests.parquet")).unwrap();
    assert_eq!(reqs.len(), 9);
    let mut sessions: BTreeMap<u32, Vec<&RequestRecord>> = BTreeMap::new();
    for q in &reqs {
        assert!(q.success, "{:?}", q.error);
        assert_eq!(q.output_tokens, 12, "exactly the synthetic length");
        sessions
            .entry(q.session.unwrap().session_id)
            .or_default()
            .push(q);
    }
    assert_eq!(sessions.len(), 3);
    for (id, turns) in &mut sessions {
        turns.sort_by_key(|q| q.session.unwrap().turn);
        let order: Vec<u32> = turns.iter().map(|q| q.session.unwrap().turn).collect();
        assert_eq!(order, [0, 1, 2], "session {id}");
        for w in turns.windows(2) {
            let (a, b) = (w[0], w[1]);
            // Due the think time after the reply before it ended, and sent then or later.
            let due = b.scheduled_s.unwrap();
            assert!(due >= a.end_s + 0.5 - 1e-6, "session {id}: {a:?} {b:?}");
            assert!(b.submit_s >= due - 1e-6, "session {id}: {b:?}");
            // The prompt holds the conversation so far: the earlier prompt, the server's
            // reply (re-tokenized, give or take a token at the seams) and a new message.
            assert!(
                b.input_tokens >= a.input_tokens + a.output_tokens - 4 + 40 - 4,
                "session {id}: {} then {} tokens",
                a.input_tokens,
                b.input_tokens
            );
            // The server's prompt cache held the conversation so far when its slot was free.
            let idle = reqs
                .iter()
                .filter(|o| o.session.unwrap().session_id != *id)
                .all(|o| o.end_s < b.submit_s || o.submit_s > b.end_s);
            if idle {
                let cached = b.cached_input_tokens.unwrap();
                assert!(
                    cached >= a.input_tokens / 2,
                    "session {id}: {cached} cached"
                );
            }
        }
    }
    // Per session and per turn, adding up to the requests.
    let c = r.conversations.as_ref().unwrap();
    assert_eq!((c.sessions, c.turns), (3, 9));
    assert_eq!(c.by_turn.len(), 3);
    let requests_j: f64 = reqs.iter().map(|q| q.energy.unwrap().energy_j).sum();
    let sessions_j: f64 = c.by_session.iter().map(|s| s.energy_j.unwrap()).sum();
    assert!(
        (requests_j - sessions_j).abs() <= 1e-9 * requests_j,
        "{requests_j} vs {sessions_j}"
    );
    let tolerance_j = common::cut_tolerance_j(&r, 20.0, lag_s);
    assert!(
        (sessions_j - r.total_energy_j).abs() <= tolerance_j,
        "sessions {sessions_j} J, window {} J, tolerance {tolerance_j} J",
        r.total_energy_j
    );
    for s in &c.by_session {
        let own: f64 = sessions[&s.session_id]
            .iter()
            .map(|q| q.energy.unwrap().energy_j)
            .sum();
        assert!((own - s.energy_j.unwrap()).abs() < 1e-9);
        assert_eq!(s.turns, 3);
    }
    // Later turns repeat the conversation so far: most of their prompt comes from the cache.
    assert!(
        c.by_turn[2].mean_input_tokens > c.by_turn[0].mean_input_tokens + 80.0,
        "{:?}",
        c.by_turn
    );
    assert!(c.later_turn_cache_hit_rate.unwrap() > 0.3, "{c:?}");
    // The report has the conversations: a row per turn position.
    let page = common::report_page(home.path(), &out);
    let section = &page[page.find("<section id=\"conversations\">").unwrap()..];
    let section = &section[..section.find("</section>").unwrap()];
    assert_eq!(section.matches("<tr>").count(), 1 + 3, "{section}");
    assert!(section.contains("3 conversations, 9 turns"));
}
