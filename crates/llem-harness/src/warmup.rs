//! Warmup before the measured window: `warmup.n_warmup` **prompts** (seed 003), or prompts
//! until the per-token latency of the last `window_size` prompts has a CV under
//! `cv_threshold` (at least `min_prompts`, at most `max_prompts`).
//!
//! Prompts go in batches of the measurement's batch size, so warmup exercises the same
//! kernels (batch shape) the measurement will; the last batch holds what is left. Each
//! prompt is one latency sample: its end-to-end time, and per output token for the CV, so
//! sampled replies of varying lengths still converge.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use llem_config::ExperimentConfig;
use llem_engines::{RequestSink, Session, Workload};
use llem_results::result::WarmupResult;
use llem_results::{RequestRecord, stats};

use crate::lifecycle::HarnessError;
use crate::progress::{Event, Phase, Progress};

/// Collects a warmup batch's records.
pub(crate) struct Batch<'a> {
    pub(crate) epoch: Instant,
    pub(crate) records: Vec<RequestRecord>,
    pub(crate) cancel: &'a AtomicBool,
}

impl RequestSink for Batch<'_> {
    fn now_s(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64()
    }
    fn on_tokens(&mut self, _: u32, _: f64, _: u32) {}
    fn on_done(&mut self, r: RequestRecord) {
        self.records.push(r);
    }
    fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
}

/// The stopping rule: how many prompts at most, and whether the CV may end it sooner.
struct Rule {
    fixed: bool,
    limit: u32,
    min_prompts: usize,
    window: usize,
    threshold: f64,
}

impl Rule {
    fn of(cfg: &ExperimentConfig) -> Rule {
        let w = &cfg.warmup;
        let fixed = !w.convergence_detection;
        Rule {
            fixed,
            limit: if fixed { w.n_warmup } else { w.max_prompts },
            min_prompts: w.min_prompts as usize,
            window: (w.window_size as usize).max(2),
            threshold: w.cv_threshold,
        }
    }

    /// CV of the last window of per-token latencies, and whether it converged.
    fn judge(&self, per_token_ms: &[f64]) -> (f64, bool) {
        if per_token_ms.len() < 2 {
            return (0.0, self.fixed);
        }
        let recent = per_token_ms
            .get(per_token_ms.len().saturating_sub(self.window)..)
            .unwrap_or_default();
        let cv = stats::cv(recent).unwrap_or(0.0);
        let converged = self.fixed
            || (per_token_ms.len() >= self.min_prompts.max(self.window) && cv < self.threshold);
        (cv, converged)
    }
}

/// Runs the warmup of `cfg` on `session`; `None` when warmup is disabled.
pub(crate) fn run(
    session: &mut dyn Session,
    cfg: &ExperimentConfig,
    workload: &Workload,
    epoch: Instant,
    progress: &mut dyn Progress,
    cancel: &AtomicBool,
) -> Result<Option<WarmupResult>, HarnessError> {
    let w = &cfg.warmup;
    if !w.enabled || workload.prompts.is_empty() {
        return Ok(None);
    }
    let rule = Rule::of(cfg);
    let batch = (workload.batching.batch_size as usize).max(1);
    progress.event(Event::Start {
        phase: Phase::Warmup,
        total: Some(u64::from(rule.limit)),
        detail: if rule.fixed {
            format!("{} prompts in batches of {batch}", rule.limit)
        } else {
            format!(
                "until the latency CV < {} (at most {} prompts)",
                rule.threshold, rule.limit
            )
        },
    });
    let (mut latencies_ms, mut per_token_ms) = (Vec::new(), Vec::new());
    let (mut final_cv, mut converged) = (0.0, rule.fixed);
    let mut sent = 0usize;
    while sent < rule.limit as usize {
        if cancel.load(Ordering::Relaxed) {
            return Err(HarnessError::Cancelled);
        }
        let n = batch.min(rule.limit as usize - sent);
        // The workload's first prompts, cycled when warmup asks for more than it has.
        let prompts = (sent..sent + n)
            .filter_map(|i| workload.prompts.get(i % workload.prompts.len()).cloned())
            .collect();
        let mut sink = Batch {
            epoch,
            records: Vec::new(),
            cancel,
        };
        session.run(&workload.with_prompts(prompts), &mut sink)?;
        sink.records.sort_by_key(|r| r.request_id);
        for r in &sink.records {
            let ms = (r.end_s - r.submit_s).max(0.0) * 1000.0;
            latencies_ms.push(ms);
            per_token_ms.push(ms / f64::from(r.output_tokens.max(1)));
        }
        sent += n;
        (final_cv, converged) = rule.judge(&per_token_ms);
        progress.event(Event::Advance {
            done: sent as u64,
            tokens: 0,
            elapsed_s: 0.0,
            power_w: None,
        });
        if converged && !rule.fixed {
            break;
        }
    }
    let done = u32::try_from(sent).unwrap_or(u32::MAX);
    progress.event(Event::Finish {
        phase: Phase::Warmup,
        summary: format!(
            "{done} prompts, CV {final_cv:.3}{}",
            if rule.fixed {
                ""
            } else if converged {
                " (converged)"
            } else {
                " (did not converge)"
            }
        ),
    });
    Ok(Some(WarmupResult {
        converged,
        final_cv,
        iterations_completed: done,
        target_cv: w.cv_threshold,
        max_prompts: w.max_prompts,
        latencies_ms,
        thermal_floor_wait_s: 0.0,
        gate: None,
        mode: if rule.fixed {
            "fixed"
        } else {
            "cv_convergence"
        }
        .into(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(fixed: bool) -> Rule {
        Rule {
            fixed,
            limit: 20,
            min_prompts: 5,
            window: 3,
            threshold: 0.05,
        }
    }

    #[test]
    fn convergence_needs_min_prompts_and_a_steady_window() {
        let r = rule(false);
        // Steady, but fewer than min_prompts samples.
        assert!(!r.judge(&[10.0, 10.0, 10.0, 10.0]).1);
        assert!(r.judge(&[10.0, 10.0, 10.0, 10.0, 10.0]).1);
        // Five samples, the last three spread too far.
        let (cv, ok) = r.judge(&[10.0, 10.0, 5.0, 10.0, 15.0]);
        assert!(!ok && cv > 0.05, "{cv}");
        // Fixed mode is done whenever its prompts are.
        assert!(rule(true).judge(&[1.0, 9.0]).1);
    }
}
