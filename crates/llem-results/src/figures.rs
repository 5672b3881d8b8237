//! A result's numeric figures by name, for a search's objective and constraints
//! (`llem_config::search::SEARCH_FIELDS` names them; a test holds the two lists equal), each with
//! the measurement's own standard uncertainty where the result states one.

use crate::ExperimentResult;
use crate::result::LatencyStatistics;

/// √3: a worst-case bound ±b of a uniformly distributed error has standard deviation b/√3.
const BOUND_TO_SD: f64 = 1.732_050_807_568_877_2;

fn latency(r: &ExperimentResult, get: fn(&LatencyStatistics) -> Option<f64>) -> Option<f64> {
    r.latency_stats.as_ref().and_then(get)
}

/// Reads one figure of a result.
pub type Getter = fn(&ExperimentResult) -> Option<f64>;

/// The reader of figure `name`; `None` for a name that is not a figure.
pub fn getter(name: &str) -> Option<Getter> {
    let g: Getter = match name {
        "mj_per_tok_total" => |r| r.mj_per_tok_total,
        "mj_per_tok_adjusted" => |r| r.mj_per_tok_adjusted,
        "system_mj_per_tok" => |r| r.system_mj_per_tok,
        "total_energy_j" => |r| Some(r.total_energy_j),
        "energy_adjusted_j" => |r| r.energy_adjusted_j,
        "energy_per_request_j" => |r| r.energy_per_request_j.as_ref().map(|d| d.mean),
        "energy_per_response_token_mj" => {
            |r| r.energy_per_response_token_mj.as_ref().map(|d| d.mean)
        }
        "tokens_per_joule" => |r| Some(r.tokens_per_joule),
        // The records' name of the same figure: output tokens per second of the window.
        "avg_tokens_per_second" | "output_throughput_tokens_per_sec" => {
            |r| Some(r.avg_tokens_per_second)
        }
        "avg_total_tokens_per_second" => |r| Some(r.avg_total_tokens_per_second),
        "ttft_mean_ms" => |r| latency(r, |l| l.ttft_mean_ms),
        "ttft_median_ms" => |r| latency(r, |l| l.ttft_median_ms),
        "ttft_p90_ms" => |r| latency(r, |l| l.ttft_p90_ms),
        "ttft_p95_ms" => |r| latency(r, |l| l.ttft_p95_ms),
        "ttft_p99_ms" => |r| latency(r, |l| l.ttft_p99_ms),
        "itl_mean_ms" => |r| latency(r, |l| l.itl_mean_ms),
        "itl_median_ms" => |r| latency(r, |l| l.itl_median_ms),
        "itl_p90_ms" => |r| latency(r, |l| l.itl_p90_ms),
        "itl_p95_ms" => |r| latency(r, |l| l.itl_p95_ms),
        "itl_p99_ms" => |r| latency(r, |l| l.itl_p99_ms),
        "tpot_mean_ms" => |r| latency(r, |l| l.tpot_mean_ms),
        "tpot_median_ms" => |r| latency(r, |l| l.tpot_median_ms),
        "tpot_p90_ms" => |r| latency(r, |l| l.tpot_p90_ms),
        "tpot_p99_ms" => |r| latency(r, |l| l.tpot_p99_ms),
        "e2e_mean_ms" => |r| latency(r, |l| l.e2e_mean_ms),
        "e2e_median_ms" => |r| latency(r, |l| l.e2e_median_ms),
        "e2e_p90_ms" => |r| latency(r, |l| l.e2e_p90_ms),
        "e2e_p99_ms" => |r| latency(r, |l| l.e2e_p99_ms),
        "goodput_fraction" => |r| r.goodput.as_ref().map(|g| g.goodput_fraction),
        "goodput_req_per_s" => |r| r.goodput.as_ref().and_then(|g| g.goodput_req_per_s),
        "energy_per_good_request_j" => {
            |r| r.goodput.as_ref().and_then(|g| g.energy_per_good_request_j)
        }
        _ => return None,
    };
    Some(g)
}

/// Figure `name` of `r`; `None` when it is not a figure or the result has no finite value.
pub fn value(r: &ExperimentResult, name: &str) -> Option<f64> {
    getter(name).and_then(|g| g(r)).filter(|v| v.is_finite())
}

/// The measurement's own standard uncertainty of figure `name` (from the energy bound, taken
/// as a uniform error); `None` where the result states none.
pub fn own_sd(r: &ExperimentResult, name: &str) -> Option<f64> {
    let u = r.energy_uncertainty.as_ref()?;
    let bound = match name {
        "mj_per_tok_total" => u.mj_per_tok,
        "total_energy_j" => u.bound_j,
        _ => None,
    };
    bound.filter(|b| b.is_finite()).map(|b| b / BOUND_TO_SD)
}

#[cfg(test)]
mod tests {
    use super::*;
    use llem_config::search::SEARCH_FIELDS;

    #[test]
    fn every_search_field_has_a_reader_and_nothing_else_does() {
        let unread: Vec<&str> = SEARCH_FIELDS
            .iter()
            .map(|f| f.name)
            .filter(|n| getter(n).is_none())
            .collect();
        assert!(unread.is_empty(), "no reader for {unread:?}");
        assert!(getter("itl_p90").is_none());
        assert!(getter("experiment_id").is_none());
    }
}
