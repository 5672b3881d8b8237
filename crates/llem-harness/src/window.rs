//! Which slice of a run the headline figures describe: the whole run (`total`), the
//! steady state (`steady_state`, the ML.ENERGY rule, on every engine whose requests carry
//! first-token times), or an explicit window (`windowed`); and whether that slice can be
//! trusted.

use llem_config::{ExperimentConfig, Methodology};
use llem_engines::registry;
use llem_engines::serving::prometheus::Gauge;
use llem_results::result::SteadyStateInfo;
use llem_results::{MetricSample, RequestRecord};

/// Shortest steady state the methodology trusts, s.
pub const MIN_STEADY_STATE_S: f64 = 20.0;
/// Lowest batch utilisation the methodology trusts.
pub const MIN_BATCH_UTILISATION: f64 = 0.85;

/// The chosen window.
#[derive(Clone, Debug, PartialEq)]
pub struct Window {
    /// Start, s since the experiment start.
    pub start_s: f64,
    /// End, s since the experiment start.
    pub end_s: f64,
    /// `total`, `steady_state` or `windowed` — what was actually measured.
    pub methodology: &'static str,
    /// Window details and stability (null for total).
    pub info: Option<SteadyStateInfo>,
    /// Why the asked methodology could not be applied, if it could not.
    pub warnings: Vec<String>,
}

/// What one successful request contributed to a window: its prompt, when its prefill ended
/// inside (its first token arrived there), and a run of its output tokens by position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenShare {
    /// Prompt length of the request (where its output positions start).
    pub prompt_len: u64,
    /// True when the prompt's prefill is counted in the window.
    pub prefill: bool,
    /// Index in the reply of the first output token the window holds.
    pub output_from: u64,
    /// Output tokens the window holds (consecutive from `output_from`).
    pub output_n: u64,
}

/// Each successful request's share of `[start, end]`, or of the whole run when `window` is
/// `None` (then by the counts, without relying on every engine stamping every token). Token
/// times are stamped in arrival order, so a window holds a consecutive run of each reply.
pub fn shares(records: &[RequestRecord], window: Option<(f64, f64)>) -> Vec<TokenShare> {
    records
        .iter()
        .filter(|r| r.success)
        .map(|r| {
            let prompt_len = u64::from(r.input_tokens);
            match window {
                None => TokenShare {
                    prompt_len,
                    prefill: true,
                    output_from: 0,
                    output_n: u64::from(r.output_tokens),
                },
                Some((start, end)) => TokenShare {
                    prompt_len,
                    prefill: r.first_token_s.is_some_and(|t| t >= start && t <= end),
                    output_from: r.token_times_s.iter().filter(|t| **t < start).count() as u64,
                    output_n: r
                        .token_times_s
                        .iter()
                        .filter(|t| **t >= start && **t <= end)
                        .count() as u64,
                },
            }
        })
        .collect()
}

/// Each request's share of the measured `window`: by arrival time inside a sub-window, and
/// by the counts when the window is the whole workload span (not every engine stamps every
/// token). What the headline's tokens, its FLOPs and the empty-window check all count.
pub fn window_shares(
    records: &[RequestRecord],
    window: (f64, f64),
    workload_span: (f64, f64),
) -> Vec<TokenShare> {
    shares(records, (window != workload_span).then_some(window))
}

/// Input and output tokens of a set of shares.
pub fn tokens_of(shares: &[TokenShare]) -> (u64, u64) {
    shares.iter().fold((0, 0), |(i, o), s| {
        (i + if s.prefill { s.prompt_len } else { 0 }, o + s.output_n)
    })
}

/// Input and output tokens inside `[start, end]`: output tokens by arrival time, input
/// tokens of requests whose first token arrived inside (their prefill ended there).
pub fn tokens_in(records: &[RequestRecord], start: f64, end: f64) -> (u64, u64) {
    tokens_of(&shares(records, Some((start, end))))
}

/// Time-averaged number of requests between their first token and their end (decoding),
/// over `[start, end]`, as the client saw them.
pub fn client_concurrency(records: &[RequestRecord], start: f64, end: f64) -> Option<f64> {
    if end <= start {
        return None;
    }
    let busy: f64 = records
        .iter()
        .filter_map(|r| {
            let a = r.first_token_s?.max(start);
            let b = r.end_s.min(end);
            (b > a).then_some(b - a)
        })
        .sum();
    Some(busy / (end - start))
}

/// Mean over the scrapes inside `[start, end]` of a gauge, summed over its label sets
/// (one series per engine replica or model).
pub fn gauge_mean(samples: &[MetricSample], gauge: Gauge, start: f64, end: f64) -> Option<f64> {
    let mut per_scrape: Vec<(f64, f64)> = Vec::new();
    for s in samples
        .iter()
        .filter(|s| s.t_s >= start && s.t_s <= end && registry::gauge_of(&s.metric) == Some(gauge))
    {
        if !s.value.is_finite() {
            continue;
        }
        match per_scrape.last_mut() {
            Some((t, v)) if *t == s.t_s => *v += s.value,
            _ => per_scrape.push((s.t_s, s.value)),
        }
    }
    (!per_scrape.is_empty())
        .then(|| per_scrape.iter().map(|(_, v)| v).sum::<f64>() / per_scrape.len() as f64)
}

/// Sequences the server was running on average over `[start, end]`, and where the figure
/// comes from: its own running gauge when scraped (`prometheus`), else the requests between
/// first token and end as the client saw them (`client`).
pub fn avg_batch(
    records: &[RequestRecord],
    metrics: &[MetricSample],
    start: f64,
    end: f64,
) -> Option<(f64, &'static str)> {
    gauge_mean(metrics, Gauge::Running, start, end)
        .map(|v| (v, "prometheus"))
        .or_else(|| client_concurrency(records, start, end).map(|v| (v, "client")))
}

/// Prefix-cache hit rate over `[start, end]`: the change of vLLM's hit and query counters,
/// else the mean of a hit-rate gauge.
pub fn prefix_hit_rate(samples: &[MetricSample], start: f64, end: f64) -> Option<f64> {
    let inside = || samples.iter().filter(|s| s.t_s >= start && s.t_s <= end);
    let delta = |hits: bool| -> Option<f64> {
        let v: Vec<&MetricSample> = inside()
            .filter(|s| registry::prefix_cache_counter(&s.metric) == Some(hits))
            .collect();
        Some(v.last()?.value - v.first()?.value)
    };
    if let (Some(h), Some(q)) = (delta(true), delta(false))
        && q > 0.0
    {
        return Some(h / q);
    }
    let g: Vec<f64> = inside()
        .filter(|s| registry::is_prefix_hit_rate_gauge(&s.metric) && s.value.is_finite())
        .map(|s| s.value)
        .collect();
    (!g.is_empty()).then(|| g.iter().sum::<f64>() / g.len() as f64)
}

/// True when requests produced tokens but none carries their times (an engine that times
/// whole batches): no window can count tokens inside it.
fn untimed(records: &[RequestRecord]) -> bool {
    let producing = || records.iter().filter(|r| r.success && r.output_tokens > 0);
    producing().next().is_some() && producing().all(|r| r.token_times_s.is_empty())
}

/// The window for `cfg`'s methodology over a run whose workload ran in `[t0, t1]`.
/// `target` is the concurrency B of the steady-state rule.
pub fn select(
    cfg: &ExperimentConfig,
    records: &[RequestRecord],
    metrics: &[MetricSample],
    target: Option<u32>,
    (t0, t1): (f64, f64),
) -> Window {
    let total = |warnings: Vec<String>, info: Option<SteadyStateInfo>| Window {
        start_s: t0,
        end_s: t1,
        methodology: "total",
        info,
        warnings,
    };
    match cfg.measurement.methodology {
        Methodology::Total => total(Vec::new(), None),
        // The same request-counting rule on every engine: its requests' first-token and end
        // times are all it needs; an engine that timed whole batches has none.
        Methodology::SteadyState if untimed(records) => total(
            vec![
                "methodology steady_state needs per-request first-token times, and this \
                 engine timed whole batches (set measurement.latency_profiling): measured the \
                 whole run"
                    .into(),
            ],
            None,
        ),
        Methodology::SteadyState => steady_state(records, metrics, target, (t0, t1)),
        Methodology::Windowed if untimed(records) => total(
            vec![
                "methodology windowed needs per-token times, and this engine timed whole \
                 batches (set measurement.latency_profiling): measured the whole run"
                    .into(),
            ],
            None,
        ),
        Methodology::Windows if untimed(records) => total(
            vec![
                "methodology windows needs per-token times, and this engine timed whole \
                 batches: measured the whole run"
                    .into(),
            ],
            None,
        ),
        Methodology::Windows => windows(cfg, records, metrics, target, (t0, t1)),
        Methodology::Windowed => {
            let Some([a, b]) = cfg.measurement.window else {
                return total(
                    vec![
                        "methodology windowed without measurement.window: measured the whole run"
                            .into(),
                    ],
                    None,
                );
            };
            let (start, end) = (t0 + a, (t0 + b).min(t1));
            if !(a >= 0.0 && end > start) {
                return total(
                    vec![format!(
                        "measurement.window [{a}, {b}] lies outside the {:.1} s workload: \
                         measured the whole run",
                        t1 - t0
                    )],
                    None,
                );
            }
            let mut w = judged(records, metrics, target, (start, end), "windowed");
            if t0 + b > t1 {
                w.warnings.push(format!(
                    "measurement.window ends at {b} s but the workload ended at {:.1} s",
                    t1 - t0
                ));
            }
            w
        }
    }
}

/// Methodology `windows`: from the end of the ramp to the end of the last window. Whether
/// the windows agree is judged with their energy ([`crate::assemble`]); the batch rule of
/// steady state does not apply (an open-loop rate need not fill the server).
fn windows(
    cfg: &ExperimentConfig,
    records: &[RequestRecord],
    metrics: &[MetricSample],
    target: Option<u32>,
    (t0, t1): (f64, f64),
) -> Window {
    let w = cfg.measurement.windows_or_default();
    let (start, end) = (t0 + w.ramp_exclusion_seconds, t0 + w.span_s());
    let mut chosen = judged(records, metrics, target, (start, end.min(t1)), "windows");
    if end > t1 + 1e-6 {
        chosen.warnings.push(format!(
            "methodology windows: the traffic ended {:.1} s after its start, before the last \
             window ({:.1} s)",
            t1 - t0,
            w.span_s()
        ));
    }
    chosen
}

fn steady_state(
    records: &[RequestRecord],
    metrics: &[MetricSample],
    target: Option<u32>,
    (t0, t1): (f64, f64),
) -> Window {
    let fallback = |reason: String| Window {
        start_s: t0,
        end_s: t1,
        methodology: "total",
        info: Some(SteadyStateInfo {
            rule: "steady_state".into(),
            start_s: t0,
            end_s: t1,
            duration_s: t1 - t0,
            target_concurrency: target,
            requests: records.len() as u32,
            is_stable: false,
            unstable_reason: reason.clone(),
            ..SteadyStateInfo::default()
        }),
        warnings: vec![format!(
            "no steady state: {reason}; the whole run was measured"
        )],
    };
    let Some(b) = target.filter(|b| *b > 0) else {
        return fallback(
            "the concurrency that defines it is unknown (set traffic.max_concurrency or the \
             engine's batch limit)"
                .into(),
        );
    };
    let n = records.len();
    let b_us = b as usize;
    let mut firsts: Vec<f64> = records.iter().filter_map(|r| r.first_token_s).collect();
    let mut ends: Vec<f64> = records
        .iter()
        .filter(|r| r.success)
        .map(|r| r.end_s)
        .collect();
    firsts.sort_by(f64::total_cmp);
    ends.sort_by(f64::total_cmp);
    // Opens when B requests have their first token; closes when N - B - 1 have finished.
    let (Some(&start), Some(&end)) = (
        firsts.get(b_us.saturating_sub(1)),
        n.checked_sub(b_us + 1)
            .filter(|k| *k >= 1)
            .and_then(|k| ends.get(k - 1)),
    ) else {
        let short = (b_us + 2).saturating_sub(n);
        return fallback(format!(
            "{n} requests at concurrency {b} never fill and drain the engine (need at least \
             B + 2 = {} requests{}, and B of them answered)",
            b_us + 2,
            if short > 0 {
                format!(", {short} more than this run")
            } else {
                String::new()
            }
        ));
    };
    if end <= start {
        return fallback(format!(
            "the server drained ({end:.2} s) before it filled ({start:.2} s)"
        ));
    }
    judged(records, metrics, Some(b), (start, end), "steady_state")
}

/// The window `[start, end]` under `rule`, with the tokens, batch and verdict inside it. The
/// steady-state verdict (length, batch utilisation) is not the `windows` rule's: its windows
/// are judged by their energy per token instead, in the result.
fn judged(
    records: &[RequestRecord],
    metrics: &[MetricSample],
    target: Option<u32>,
    (start, end): (f64, f64),
    rule: &'static str,
) -> Window {
    let (_, out) = tokens_in(records, start, end);
    let batch = avg_batch(records, metrics, start, end);
    let avg = batch.map(|(v, _)| v);
    let util = avg
        .zip(target.filter(|b| *b > 0))
        .map(|(a, b)| a / f64::from(b));
    let duration = end - start;
    let mut reasons = Vec::new();
    let batch_rules = rule != "windows";
    if batch_rules && duration < MIN_STEADY_STATE_S {
        reasons.push(format!(
            "window of {duration:.1} s is shorter than {MIN_STEADY_STATE_S} s"
        ));
    }
    if let Some(u) = util.filter(|_| batch_rules)
        && u < MIN_BATCH_UTILISATION
    {
        reasons.push(format!(
            "batch utilisation {:.0} % is below {:.0} %",
            u * 100.0,
            MIN_BATCH_UTILISATION * 100.0
        ));
    }
    let reason = reasons.join("; ");
    Window {
        start_s: start,
        end_s: end,
        methodology: rule,
        warnings: if reason.is_empty() {
            Vec::new()
        } else {
            vec![format!("unstable {rule} window: {reason}")]
        },
        info: Some(SteadyStateInfo {
            rule: rule.into(),
            start_s: start,
            end_s: end,
            duration_s: duration,
            target_concurrency: target,
            requests: records.len() as u32,
            output_tokens_in_window: out,
            avg_batch_size: avg,
            avg_batch_size_source: batch.map(|(_, source)| source.into()),
            batch_utilisation: util,
            is_stable: reason.is_empty(),
            unstable_reason: reason,
        }),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use llem_results::FinishReason;

    fn rec(first: f64, end: f64) -> RequestRecord {
        RequestRecord {
            session: None,
            energy: None,
            request_id: 0,
            batch_index: None,
            input_tokens: 10,
            output_tokens: 2,
            reference_output_tokens: None,
            cached_input_tokens: None,
            scheduled_s: Some(0.0),
            submit_s: 0.0,
            first_token_s: Some(first),
            end_s: end,
            success: true,
            error: None,
            finish_reason: FinishReason::Stop,
            token_times_s: vec![first, end],
        }
    }

    #[test]
    fn a_window_over_batch_timed_requests_falls_back_to_the_whole_run() {
        let cfg: ExperimentConfig = serde_json::from_value(serde_json::json!({
            "model": "m", "measurement": {"methodology": "windowed", "window": [1.0, 2.0]}
        }))
        .unwrap();
        let mut untimed = rec(0.5, 3.0);
        untimed.first_token_s = None;
        untimed.token_times_s.clear();
        let w = select(&cfg, &[untimed], &[], Some(1), (0.0, 3.0));
        assert_eq!((w.methodology, w.start_s, w.end_s), ("total", 0.0, 3.0));
        assert!(
            w.warnings[0].contains("latency_profiling"),
            "{:?}",
            w.warnings
        );
        // Timed requests get their window.
        let w = select(&cfg, &[rec(0.5, 3.0)], &[], Some(1), (0.0, 3.0));
        assert_eq!(w.methodology, "windowed");
    }

    #[test]
    fn steady_state_applies_to_the_embedded_engine_when_its_requests_are_timed() {
        // The default engine is the embedded llama.cpp: not served.
        let cfg: ExperimentConfig = serde_json::from_value(serde_json::json!({
            "model": "m", "measurement": {"methodology": "steady_state"}
        }))
        .unwrap();
        assert!(!cfg.is_served());
        let r: Vec<RequestRecord> = (0..8).map(|i| rec(i as f64, i as f64 + 2.0)).collect();
        let w = select(&cfg, &r, &[], Some(2), (0.0, 10.0));
        assert_eq!(
            (w.methodology, w.start_s, w.end_s),
            ("steady_state", 1.0, 6.0)
        );
        // Too few requests: the whole run, and by how much it fell short.
        let w = select(&cfg, r.get(..2).unwrap(), &[], Some(2), (0.0, 10.0));
        assert_eq!(w.methodology, "total");
        assert!(
            w.warnings[0].contains("need at least B + 2 = 4 requests, 2 more than this run"),
            "{:?}",
            w.warnings
        );
        // Batch-timed requests have no first tokens to count.
        let mut untimed = rec(0.5, 3.0);
        untimed.first_token_s = None;
        untimed.token_times_s.clear();
        let w = select(&cfg, &[untimed], &[], Some(1), (0.0, 3.0));
        assert_eq!(w.methodology, "total");
        assert!(
            w.warnings[0].contains("latency_profiling"),
            "{:?}",
            w.warnings
        );
    }

    #[test]
    fn the_ml_energy_rule_opens_at_b_first_tokens_and_closes_at_n_minus_b_minus_1_ends() {
        // 8 requests, B = 2: opens at the 2nd first token (1.0), closes at the 5th end (50).
        let r: Vec<RequestRecord> = [
            (0.5, 10.0),
            (1.0, 20.0),
            (10.0, 30.0),
            (20.0, 40.0),
            (30.0, 50.0),
            (40.0, 60.0),
            (50.0, 70.0),
            (60.0, 80.0),
        ]
        .iter()
        .map(|&(a, b)| rec(a, b))
        .collect();
        let w = steady_state(&r, &[], Some(2), (0.0, 80.0));
        assert_eq!(
            (w.start_s, w.end_s, w.methodology),
            (1.0, 50.0, "steady_state")
        );
        let info = w.info.unwrap();
        assert!(info.is_stable, "{}", info.unstable_reason);
        assert_eq!(info.avg_batch_size_source.as_deref(), Some("client"));
        // Too few requests: whole run, flagged.
        let w = steady_state(r.get(..3).unwrap(), &[], Some(2), (0.0, 80.0));
        assert_eq!(w.methodology, "total");
        assert!(!w.info.unwrap().is_stable);
    }

    #[test]
    fn short_or_underused_windows_are_unstable_and_prometheus_wins() {
        let r: Vec<RequestRecord> = (0..6).map(|i| rec(i as f64, i as f64 + 1.5)).collect();
        let w = judged(&r, &[], Some(4), (1.0, 5.0), "steady_state");
        let info = w.info.unwrap();
        assert!(!info.is_stable);
        assert!(info.unstable_reason.contains("shorter than 20"));
        assert!(info.unstable_reason.contains("utilisation"));
        let m: Vec<MetricSample> = [2.0, 3.0, 4.0]
            .iter()
            .map(|&t| MetricSample {
                t_s: t,
                metric: "vllm:num_requests_running".into(),
                labels: String::new(),
                value: 4.0,
            })
            .collect();
        let w = judged(&r, &m, Some(4), (1.0, 5.0), "steady_state");
        let info = w.info.unwrap();
        assert_eq!(
            (info.avg_batch_size, info.batch_utilisation),
            (Some(4.0), Some(1.0))
        );
        assert_eq!(info.avg_batch_size_source.as_deref(), Some("prometheus"));
    }

    #[test]
    fn hit_rate_from_counters() {
        let s = |t: f64, m: &str, v: f64| MetricSample {
            t_s: t,
            metric: m.into(),
            labels: String::new(),
            value: v,
        };
        let m = vec![
            s(1.0, "vllm:prefix_cache_hits_total", 10.0),
            s(1.0, "vllm:prefix_cache_queries_total", 100.0),
            s(2.0, "vllm:prefix_cache_hits_total", 40.0),
            s(2.0, "vllm:prefix_cache_queries_total", 200.0),
        ];
        assert_eq!(prefix_hit_rate(&m, 0.0, 3.0), Some(0.3));
    }
}
