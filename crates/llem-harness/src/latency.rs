//! Latency statistics from the per-request records: TTFT, ITL (trimmed and full), TPOT and
//! end-to-end latency, all from true per-token timestamps.

use llem_results::RequestRecord;
use llem_results::result::{LatencyStatistics, RequestLatencyMetrics};

use llem_results::stats::{mean, percentile, sorted};

/// Inter-token intervals of every request, all and trimmed (the first and last interval of
/// each request dropped when it has at least three; shorter requests contribute none to the
/// trimmed set), in seconds.
pub fn intervals(records: &[RequestRecord]) -> (Vec<f64>, Vec<f64>) {
    let mut full = Vec::new();
    let mut trimmed = Vec::new();
    for r in records.iter().filter(|r| r.success) {
        let d: Vec<f64> = r
            .token_times_s
            .windows(2)
            .map(|w| match w {
                [a, b] => b - a,
                _ => 0.0,
            })
            .collect();
        if d.len() >= 3 {
            trimmed.extend_from_slice(d.get(1..d.len() - 1).unwrap_or_default());
        }
        full.extend(d);
    }
    (full, trimmed)
}

/// Time per output token after the first, per request with at least two tokens, s.
pub fn tpot(records: &[RequestRecord]) -> Vec<f64> {
    records
        .iter()
        .filter(|r| r.success && r.token_times_s.len() >= 2)
        .filter_map(|r| {
            let (a, b) = (r.token_times_s.first()?, r.token_times_s.last()?);
            Some((b - a) / (r.token_times_s.len() - 1) as f64)
        })
        .collect()
}

fn ms(v: Option<f64>) -> Option<f64> {
    v.map(|x| x * 1000.0)
}

/// The statistics, or `None` when no request produced a token. `mode` is how token times
/// were obtained (`true_streaming` when the engine timed every token).
pub fn statistics(records: &[RequestRecord], mode: Option<&str>) -> Option<LatencyStatistics> {
    let ok: Vec<&RequestRecord> = records.iter().filter(|r| r.success).collect();
    let ttft = sorted(ok.iter().filter_map(|r| r.ttft_s()));
    if ttft.is_empty() {
        return None;
    }
    let (full, trimmed) = intervals(records);
    let (full, trimmed) = (sorted(full), sorted(trimmed));
    let tp = sorted(tpot(records));
    let e2e = sorted(ok.iter().map(|r| r.e2e_s()));
    // From the schedule: what a user arriving at the scheduled time waited, including any
    // time the request spent queued in the client (coordinated-omission safe).
    let s_ttft = sorted(
        ok.iter()
            .filter_map(|r| Some(r.first_token_s? - r.scheduled_s?)),
    );
    let s_e2e = sorted(ok.iter().filter_map(|r| Some(r.end_s - r.scheduled_s?)));
    let p = |v: &[f64], q: f64| ms(percentile(v, q));
    Some(LatencyStatistics {
        ttft_mean_ms: ms(mean(&ttft)),
        ttft_median_ms: p(&ttft, 50.0),
        ttft_p90_ms: p(&ttft, 90.0),
        ttft_p95_ms: p(&ttft, 95.0),
        ttft_p99_ms: p(&ttft, 99.0),
        ttft_min_ms: ms(ttft.first().copied()),
        ttft_max_ms: ms(ttft.last().copied()),
        ttft_samples: ttft.len(),
        itl_mean_ms: ms(mean(&trimmed)),
        itl_median_ms: p(&trimmed, 50.0),
        itl_p90_ms: p(&trimmed, 90.0),
        itl_p95_ms: p(&trimmed, 95.0),
        itl_p99_ms: p(&trimmed, 99.0),
        itl_samples: trimmed.len(),
        itl_full_mean_ms: ms(mean(&full)),
        itl_full_p99_ms: p(&full, 99.0),
        itl_full_samples: full.len(),
        tpot_mean_ms: ms(mean(&tp)),
        tpot_median_ms: p(&tp, 50.0),
        tpot_p90_ms: p(&tp, 90.0),
        tpot_p95_ms: p(&tp, 95.0),
        tpot_p99_ms: p(&tp, 99.0),
        tpot_samples: tp.len(),
        e2e_mean_ms: ms(mean(&e2e)),
        e2e_median_ms: p(&e2e, 50.0),
        e2e_p90_ms: p(&e2e, 90.0),
        e2e_p95_ms: p(&e2e, 95.0),
        e2e_p99_ms: p(&e2e, 99.0),
        e2e_samples: e2e.len(),
        measurement_mode: mode.unwrap_or("true_streaming").into(),
        scheduled_ttft_median_ms: p(&s_ttft, 50.0),
        scheduled_ttft_p99_ms: p(&s_ttft, 99.0),
        scheduled_e2e_median_ms: p(&s_e2e, 50.0),
        scheduled_e2e_p99_ms: p(&s_e2e, 99.0),
    })
}

/// `extended_metrics.request_latency`.
pub fn request_latency(records: &[RequestRecord]) -> RequestLatencyMetrics {
    let e2e = sorted(
        records
            .iter()
            .filter(|r| r.success)
            .map(RequestRecord::e2e_s),
    );
    RequestLatencyMetrics {
        e2e_latency_mean_ms: ms(mean(&e2e)),
        e2e_latency_median_ms: ms(percentile(&e2e, 50.0)),
        e2e_latency_p95_ms: ms(percentile(&e2e, 95.0)),
        e2e_latency_p99_ms: ms(percentile(&e2e, 99.0)),
        e2e_latency_samples: e2e.len(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use llem_results::FinishReason;

    fn rec(submit: f64, times: &[f64]) -> RequestRecord {
        RequestRecord {
            session: None,
            energy: None,
            request_id: 0,
            batch_index: Some(0),
            input_tokens: 5,
            output_tokens: times.len() as u32,
            reference_output_tokens: None,
            cached_input_tokens: None,
            scheduled_s: None,
            submit_s: submit,
            first_token_s: times.first().copied(),
            end_s: *times.last().unwrap_or(&submit),
            success: true,
            error: None,
            finish_reason: FinishReason::Length,
            token_times_s: times.to_vec(),
        }
    }

    #[test]
    fn trimmed_itl_drops_first_and_last_interval() {
        let r = vec![
            rec(0.0, &[0.5, 0.6, 0.8, 1.1, 1.5]), // intervals .1 .2 .3 .4 -> trimmed .2 .3
            rec(0.0, &[0.2, 0.3, 0.4]),           // two intervals -> none trimmed
        ];
        let (full, trimmed) = intervals(&r);
        assert_eq!(full.len(), 6);
        let t: Vec<f64> = trimmed.iter().map(|x| (x * 10.0).round() / 10.0).collect();
        assert_eq!(t, vec![0.2, 0.3]);
        let s = statistics(&r, None).unwrap();
        assert_eq!(s.ttft_samples, 2);
        assert!((s.ttft_mean_ms.unwrap() - 350.0).abs() < 1e-9);
        assert!((s.itl_mean_ms.unwrap() - 250.0).abs() < 1e-9);
        // TPOT: (1.5-0.5)/4 = 250 ms and (0.4-0.2)/2 = 100 ms.
        assert!((s.tpot_mean_ms.unwrap() - 175.0).abs() < 1e-9);
        assert_eq!(s.e2e_samples, 2);
        assert!((s.e2e_mean_ms.unwrap() - 950.0).abs() < 1e-9);
    }
}
