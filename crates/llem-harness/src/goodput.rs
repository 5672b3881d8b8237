//! Goodput: the requests that met the configured latency objectives, and what each cost.
//!
//! Counted over the requests that finished inside the measured window (all of them for
//! methodology total), so the energy it is divided into is the window's. Latencies run from
//! the scheduled send time when there is one (a request that waited in the client queue
//! waited for the user too), else from dispatch.

use llem_config::SloConfig;
use llem_results::RequestRecord;
use llem_results::result::Goodput;

/// True when `r` meets every bound set in `slo`.
pub fn meets(r: &RequestRecord, slo: &SloConfig) -> bool {
    if !r.success {
        return false;
    }
    let origin = r.scheduled_s.unwrap_or(r.submit_s);
    let ms = |s: f64| s * 1000.0;
    let ttft_ok = slo
        .ttft_ms
        .is_none_or(|b| r.first_token_s.is_some_and(|f| ms(f - origin) <= b));
    let tpot_ok = slo.tpot_ms.is_none_or(|b| {
        match (r.token_times_s.first(), r.token_times_s.last()) {
            (Some(a), Some(z)) if r.token_times_s.len() >= 2 => {
                ms((z - a) / (r.token_times_s.len() - 1) as f64) <= b
            }
            // One token: no time per output token to miss.
            _ => true,
        }
    });
    let e2e_ok = slo.e2e_ms.is_none_or(|b| ms(r.end_s - origin) <= b);
    ttft_ok && tpot_ok && e2e_ok
}

/// Goodput of the requests ending in `[start, end]`, with `energy_j` spent in that window.
pub fn goodput(
    records: &[RequestRecord],
    slo: &SloConfig,
    (start, end): (f64, f64),
    energy_j: Option<f64>,
) -> Goodput {
    let inside: Vec<&RequestRecord> = records
        .iter()
        .filter(|r| r.end_s >= start && r.end_s <= end)
        .collect();
    let good = inside.iter().filter(|r| meets(r, slo)).count() as u32;
    let n = inside.len() as u32;
    let duration = end - start;
    Goodput {
        slo_ttft_ms: slo.ttft_ms,
        slo_tpot_ms: slo.tpot_ms,
        slo_e2e_ms: slo.e2e_ms,
        from_schedule: inside.iter().any(|r| r.scheduled_s.is_some()),
        requests: n,
        requests_meeting_slo: good,
        goodput_fraction: if n > 0 {
            f64::from(good) / f64::from(n)
        } else {
            0.0
        },
        goodput_req_per_s: (duration > 0.0).then(|| f64::from(good) / duration),
        energy_per_good_request_j: energy_j
            .filter(|e| *e > 0.0 && good > 0)
            .map(|e| e / f64::from(good)),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use llem_results::FinishReason;

    fn rec(sched: f64, submit: f64, times: &[f64], ok: bool) -> RequestRecord {
        RequestRecord {
            session: None,
            energy: None,
            request_id: 0,
            batch_index: None,
            input_tokens: 1,
            output_tokens: times.len() as u32,
            reference_output_tokens: None,
            cached_input_tokens: None,
            scheduled_s: Some(sched),
            submit_s: submit,
            first_token_s: times.first().copied(),
            end_s: *times.last().unwrap_or(&submit),
            success: ok,
            error: None,
            finish_reason: FinishReason::Stop,
            token_times_s: times.to_vec(),
        }
    }

    #[test]
    fn bounds_count_from_the_schedule() {
        let slo = SloConfig {
            ttft_ms: Some(200.0),
            tpot_ms: Some(50.0),
            e2e_ms: None,
        };
        // Sent late: 100 ms of client queueing counts against the TTFT bound.
        let late = rec(0.0, 0.15, &[0.25, 0.28, 0.31], true);
        let fine = rec(1.0, 1.0, &[1.1, 1.14, 1.18], true);
        let slow_tpot = rec(2.0, 2.0, &[2.1, 2.3, 2.5], true);
        let failed = rec(3.0, 3.0, &[3.1], false);
        assert!(!meets(&late, &slo));
        assert!(meets(&fine, &slo));
        assert!(!meets(&slow_tpot, &slo));
        let g = goodput(
            &[late, fine, slow_tpot, failed],
            &slo,
            (0.0, 10.0),
            Some(40.0),
        );
        assert_eq!((g.requests, g.requests_meeting_slo), (4, 1));
        assert_eq!(g.goodput_fraction, 0.25);
        assert_eq!(g.energy_per_good_request_j, Some(40.0));
        assert!(g.from_schedule);
    }
}
