//! Warmup before the measured window: `warmup.n_warmup` **prompts** (seed 003), or prompts
//! until the per-token latency of the last `window_size` prompts has a CV under
//! `cv_threshold` (at least `min_prompts`, at most `max_prompts`).
//!
//! Prompts go in batches of the measurement's batch size, so warmup exercises the same
//! kernels (batch shape) the measurement will; the last batch holds what is left. Each
//! prompt's end-to-end time is recorded; the CV is judged over **batches** (each batch's mean
//! latency per output token, so sampled replies of varying lengths still converge): the
//! prompts of one batch share its passes, so their latencies are one observation, and a CV
//! over them would be near 0 by construction. The window holds the batches of the last
//! `window_size` prompts, and never fewer than two.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use llem_config::ExperimentConfig;
use llem_engines::{RequestSink, Session, Workload};
use llem_results::result::WarmupResult;
use llem_results::{RequestRecord, stats};

use crate::error::HarnessError;
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
    fn of(cfg: &ExperimentConfig, batch: NonZeroU32) -> Rule {
        let w = &cfg.warmup;
        let fixed = !w.convergence_detection;
        Rule {
            fixed,
            limit: if fixed { w.n_warmup } else { w.max_prompts },
            min_prompts: w.min_prompts as usize,
            // The batches holding the last `window_size` prompts, at least two.
            window: w.window_size.div_ceil(batch.get()).max(2) as usize,
            threshold: w.cv_threshold,
        }
    }

    /// CV of the last window of batches' per-token latencies (null with fewer than two
    /// batches), and whether it is under the target after enough prompts. In fixed mode the
    /// same judgement is reported; it does not end the warmup.
    fn judge(&self, per_batch_ms: &[f64], prompts: usize) -> (Option<f64>, bool) {
        if per_batch_ms.len() < 2 {
            return (None, false);
        }
        let recent = per_batch_ms
            .get(per_batch_ms.len().saturating_sub(self.window)..)
            .unwrap_or_default();
        let cv = stats::cv(recent);
        let converged = per_batch_ms.len() >= self.window
            && (self.fixed || prompts >= self.min_prompts)
            && cv.is_some_and(|cv| cv < self.threshold);
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
    let batch_size = session.batching().batch_size;
    let rule = Rule::of(cfg, batch_size);
    let batch = batch_size.get() as usize;
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
    let (mut latencies_ms, mut per_batch_ms) = (Vec::new(), Vec::new());
    let (mut final_cv, mut converged) = (None, false);
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
        let mut per_token: Vec<f64> = Vec::with_capacity(sink.records.len());
        for r in &sink.records {
            let ms = (r.end_s - r.submit_s).max(0.0) * 1000.0;
            latencies_ms.push(ms);
            per_token.push(ms / f64::from(r.output_tokens.max(1)));
        }
        if !per_token.is_empty() {
            per_batch_ms.push(per_token.iter().sum::<f64>() / per_token.len() as f64);
        }
        sent += n;
        (final_cv, converged) = rule.judge(&per_batch_ms, sent);
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
    let cv_text = final_cv.map_or_else(
        || "CV not measured (one batch)".to_string(),
        |cv| format!("CV {cv:.3} over batches"),
    );
    progress.event(Event::Finish {
        phase: Phase::Warmup,
        summary: format!(
            "{done} prompts, {cv_text}{}",
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
#[allow(clippy::unwrap_used)]
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
    fn convergence_needs_min_prompts_and_a_steady_window_of_batches() {
        let r = rule(false);
        // Steady, but fewer than min_prompts prompts (batches of one).
        assert!(!r.judge(&[10.0, 10.0, 10.0, 10.0], 4).1);
        assert!(r.judge(&[10.0, 10.0, 10.0, 10.0, 10.0], 5).1);
        // Five batches, the last three spread too far.
        let (cv, ok) = r.judge(&[10.0, 10.0, 5.0, 10.0, 15.0], 5);
        assert!(!ok && cv.unwrap() > 0.05, "{cv:?}");
        // Fixed mode reports the same judgement; it is not converged by definition.
        assert_eq!(rule(true).judge(&[1.0, 9.0], 2), (Some(0.8), false));
    }

    /// The batched embedded engine gives every prompt of a batch its batch's latency: one
    /// batch is one observation, so a window inside it cannot converge (its CV over prompts
    /// would be 0.000 by construction).
    #[test]
    fn one_batch_is_one_sample_and_cannot_converge() {
        let cfg: ExperimentConfig = serde_json::from_value(serde_json::json!({
            "model": "m.gguf",
            "warmup": {"convergence_detection": true, "window_size": 3, "min_prompts": 3}
        }))
        .unwrap();
        let r = Rule::of(&cfg, NonZeroU32::new(8).unwrap());
        assert_eq!(
            r.window, 2,
            "the last 3 prompts lie in at most 2 batches of 8"
        );
        assert_eq!(r.judge(&[12.5], 8), (None, false));
        let (cv, ok) = r.judge(&[12.5, 12.5], 16);
        assert!(ok && cv == Some(0.0));
        // A fixed warmup of one batch says nothing about convergence either.
        let fixed = Rule::of(
            &serde_json::from_value(serde_json::json!({"model": "m.gguf"})).unwrap(),
            NonZeroU32::new(4).unwrap(),
        );
        assert_eq!(fixed.judge(&[12.5], 4), (None, false));
    }
}
