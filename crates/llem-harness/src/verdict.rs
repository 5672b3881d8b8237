//! Whether the requests of a run add up to a measurement.
//!
//! A cell is measured when at least one request succeeded with a token and the share of
//! failed requests is within `measurement.max_failed_request_fraction` (null = 0: any failed
//! request fails the cell). Anything else would publish figures that describe the errors,
//! not the deployment.

use llem_results::RequestRecord;

use crate::error::HarnessError;

/// Errors quoted when a run fails: the first few distinct ones, each cut to a line's length
/// (a server may answer with a whole HTML page).
const QUOTED_ERRORS: usize = 3;
const QUOTED_ERROR_CHARS: usize = 200;

/// Fails a run that measured nothing, or in which more requests failed than allowed.
pub(crate) fn check_requests(
    records: &[RequestRecord],
    max_failed_fraction: Option<f64>,
) -> Result<(), HarnessError> {
    let failed = records.iter().filter(|r| !r.success).count();
    if !records.iter().any(|r| r.success && r.output_tokens > 0) {
        let what = if records.is_empty() {
            "no request was completed".to_string()
        } else if failed == records.len() {
            format!("all {failed} requests failed")
        } else {
            format!(
                "{} requests returned no token ({failed} failed)",
                records.len()
            )
        };
        return Err(HarnessError::NothingMeasured(format!(
            "nothing was measured: {what}{}",
            first_errors(records)
        )));
    }
    let allowed = max_failed_fraction.unwrap_or(0.0);
    let fraction = failed as f64 / records.len() as f64;
    if fraction > allowed {
        return Err(HarnessError::RequestsFailed(format!(
            "{failed} of {} requests failed ({:.1} %), more than \
             measurement.max_failed_request_fraction = {allowed} allows{}",
            records.len(),
            fraction * 100.0,
            first_errors(records)
        )));
    }
    Ok(())
}

/// Fails a run whose chosen window holds no output token: every per-token and per-second
/// figure of it would be 0 or a division by nothing, not a measurement.
pub(crate) fn check_window(
    records: &[RequestRecord],
    window: &crate::window::Window,
    workload_span: (f64, f64),
) -> Result<(), HarnessError> {
    let shares =
        crate::window::window_shares(records, (window.start_s, window.end_s), workload_span);
    let (_, output) = crate::window::tokens_of(&shares);
    if output > 0 {
        return Ok(());
    }
    Err(HarnessError::NothingMeasured(format!(
        "nothing was measured: the {} window [{:.3}, {:.3}] s holds no output token \
         (the workload ran over [{:.3}, {:.3}] s){}",
        window.methodology,
        window.start_s,
        window.end_s,
        workload_span.0,
        workload_span.1,
        if window.warnings.is_empty() {
            String::new()
        } else {
            format!("; {}", window.warnings.join("; "))
        }
    )))
}

/// `; first errors: a | b | c`, or nothing when no request carried an error.
fn first_errors(records: &[RequestRecord]) -> String {
    let mut quoted: Vec<String> = Vec::new();
    for e in records.iter().filter_map(|r| r.error.as_deref()) {
        let cut: String = e.chars().take(QUOTED_ERROR_CHARS).collect();
        let cut = if cut.len() < e.len() {
            cut + "…"
        } else {
            cut
        };
        if !quoted.contains(&cut) {
            quoted.push(cut);
        }
        if quoted.len() == QUOTED_ERRORS {
            break;
        }
    }
    if quoted.is_empty() {
        String::new()
    } else {
        format!("; first errors: {}", quoted.join(" | "))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use llem_results::FinishReason;

    fn rec(id: u32, success: bool, tokens: u32, error: Option<&str>) -> RequestRecord {
        RequestRecord {
            session: None,
            energy: None,
            request_id: id,
            batch_index: None,
            input_tokens: 4,
            output_tokens: tokens,
            reference_output_tokens: None,
            cached_input_tokens: None,
            scheduled_s: None,
            submit_s: 0.0,
            first_token_s: None,
            end_s: 1.0,
            success,
            error: error.map(String::from),
            finish_reason: if success {
                FinishReason::Stop
            } else {
                FinishReason::Error
            },
            token_times_s: Vec::new(),
        }
    }

    #[test]
    fn a_run_without_a_single_token_measured_nothing() {
        let all_failed: Vec<RequestRecord> = (0..4)
            .map(|i| {
                rec(
                    i,
                    false,
                    0,
                    Some(if i < 3 { "HTTP 500: boom" } else { "stalled" }),
                )
            })
            .collect();
        let e = check_requests(&all_failed, Some(1.0)).unwrap_err();
        assert!(matches!(e, HarnessError::NothingMeasured(_)));
        assert_eq!(
            e.to_string(),
            "nothing was measured: all 4 requests failed; first errors: HTTP 500: boom | stalled"
        );
        // Successes that carried no token (a 200 with an empty or non-stream body) are
        // nothing measured either, whatever share of failures is allowed.
        let empty = vec![
            rec(0, true, 0, None),
            rec(1, false, 0, Some("x".repeat(300).as_str())),
        ];
        let msg = check_requests(&empty, Some(1.0)).unwrap_err().to_string();
        assert!(
            msg.contains("2 requests returned no token (1 failed)"),
            "{msg}"
        );
        assert!(msg.ends_with('…') && msg.len() < 320, "{msg}");
        assert!(check_requests(&[], Some(1.0)).is_err());
    }

    #[test]
    fn failed_requests_fail_the_run_unless_a_share_is_allowed() {
        let mut run: Vec<RequestRecord> = (0..9).map(|i| rec(i, true, 3, None)).collect();
        run.push(rec(9, false, 0, Some("HTTP 429: slow down")));
        // Default: strict.
        let e = check_requests(&run, None).unwrap_err();
        assert!(matches!(e, HarnessError::RequestsFailed(_)));
        assert_eq!(
            e.to_string(),
            "1 of 10 requests failed (10.0 %), more than \
             measurement.max_failed_request_fraction = 0 allows; first errors: HTTP 429: slow down"
        );
        assert!(check_requests(&run, Some(0.05)).is_err());
        assert!(check_requests(&run, Some(0.1)).is_ok());
        assert!(check_requests(&run[..9], None).is_ok());
    }

    #[test]
    fn a_window_that_holds_no_token_measured_nothing() {
        // Tokens at 1.0, 1.5 and 2.0 s; a steady state chosen after them holds none.
        let mut r = rec(0, true, 3, None);
        r.first_token_s = Some(1.0);
        r.token_times_s = vec![1.0, 1.5, 2.0];
        let records = [r];
        let window = |start_s: f64, end_s: f64| crate::window::Window {
            start_s,
            end_s,
            methodology: "steady_state",
            info: None,
            warnings: vec!["batch utilisation 34 % is below 85 %".into()],
        };
        let e = check_window(&records, &window(2.5, 3.0), (0.0, 3.0)).unwrap_err();
        assert!(matches!(e, HarnessError::NothingMeasured(_)));
        let msg = e.to_string();
        assert!(
            msg.contains("steady_state window [2.500, 3.000] s holds no output token")
                && msg.contains("batch utilisation 34 %"),
            "{msg}"
        );
        assert!(check_window(&records, &window(1.2, 3.0), (0.0, 3.0)).is_ok());
        // The whole run counts by the counts, stamped or not.
        let mut unstamped = records[0].clone();
        unstamped.token_times_s.clear();
        assert!(check_window(&[unstamped], &window(0.0, 3.0), (0.0, 3.0)).is_ok());
    }
}
