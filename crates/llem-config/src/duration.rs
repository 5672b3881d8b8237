//! What a plan's running time can be said to be before it runs (`--dry-run`, text and JSON
//! alike): the waits no engine speed changes, and every run at its cell limit.

use serde::Serialize;

use crate::plan::StudyPlan;

/// A plan's running time, before it runs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct DurationEstimate {
    /// Waits that do not depend on the engine's speed, s: baselines (each run when fresh,
    /// once when cached), thermal floors, the gaps between runs and cycles, and traffic sent
    /// for a fixed time. The least the plan can take.
    pub fixed_s: f64,
    /// Whether timed traffic is part of `fixed_s`.
    pub timed_traffic: bool,
    /// Prompts (or requests) whose inference comes on top of `fixed_s`.
    pub prompts: u64,
    /// Every run at its cell limit, plus the gaps, s: the most the plan can take.
    pub upper_s: f64,
}

impl StudyPlan {
    /// Estimates the plan's running time: the fixed waits, and an upper bound.
    pub fn duration(&self) -> DurationEstimate {
        let e = &self.execution;
        let mut fixed = 0.0;
        let mut timed_traffic = false;
        let mut prompts = 0u64;
        let mut baseline_cached = false;
        for r in &self.runs {
            let Some(c) = self.configs.get(r.config) else {
                continue;
            };
            let cfg = &c.config;
            if let Some(b) = cfg.baseline_seconds() {
                // A cached baseline is measured once, by the first run that needs it.
                let fresh = cfg.baseline.strategy == crate::BaselineStrategy::Fresh;
                if fresh || !baseline_cached {
                    fixed += b;
                }
                baseline_cached |= !fresh;
            }
            fixed += cfg.thermal_floor_seconds();
            match cfg.timed_traffic_seconds() {
                Some(d) => {
                    fixed += d;
                    timed_traffic = true;
                }
                None => {
                    let requests = cfg
                        .is_served()
                        .then(|| cfg.effective_traffic().n_requests)
                        .flatten();
                    prompts += u64::from(requests.unwrap_or(cfg.dataset.n_prompts));
                }
            }
        }
        let n = self.runs.len() as f64;
        if let Some(search) = &self.search {
            // A search runs at most its budget, drawn from the same configurations: their mean
            // fixed wait per run, and the gaps between consecutive cells.
            let budget = f64::from(search.budget.runs(self.runs.len())).min(n);
            let share = budget / n.max(1.0);
            let gaps = (budget - 1.0).max(0.0) * e.experiment_gap_seconds;
            let fixed_s = fixed * share + gaps;
            return DurationEstimate {
                fixed_s,
                timed_traffic,
                prompts: (prompts as f64 * share).round() as u64,
                upper_s: (budget * e.experiment_timeout_seconds + gaps).max(fixed_s),
            };
        }
        let cycles = f64::from(e.n_cycles.max(1));
        let gaps = (n - cycles).max(0.0) * e.experiment_gap_seconds
            + (cycles - 1.0).max(0.0) * e.cycle_gap_seconds;
        let fixed_s = fixed + gaps;
        DurationEstimate {
            fixed_s,
            timed_traffic,
            prompts,
            // A single experiment has no cell limit; its least is then its most known.
            upper_s: (n * e.experiment_timeout_seconds + gaps).max(fixed_s),
        }
    }
}
