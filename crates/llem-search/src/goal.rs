//! What the search is after, in the model's terms: the figures it reads (the objective first,
//! then each constraint's), which are modelled on a log scale, and the thresholds.

use llem_config::search::{Bound, Direction, SearchSpec, search_field};
use serde::Serialize;

/// One constraint in the model's scale.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Limit {
    /// `<=` or `>=`.
    pub bound: Bound,
    /// The threshold as written, in the figure's unit.
    pub threshold: f64,
}

/// The objective and constraints of a search.
#[derive(Clone, Debug, Serialize)]
pub struct Goal {
    /// The figures' names: the objective, then each constraint's.
    pub figures: Vec<String>,
    /// Which way the objective goes.
    pub direction: Direction,
    /// One per constraint (figure `i + 1`).
    pub limits: Vec<Limit>,
    /// Per figure: modelled by its logarithm (positive quantities whose changes are ratios:
    /// energy, latency, throughput); shares are modelled as they are.
    pub log_scale: Vec<bool>,
    /// Confidence of every judgement.
    pub confidence: f64,
    /// Relative difference below which two configurations are equally good.
    pub tolerance: f64,
}

impl Goal {
    /// The goal of a study's `search:` block.
    pub fn from_spec(spec: &SearchSpec) -> Goal {
        let mut figures = vec![spec.objective.clone()];
        figures.extend(spec.constraints.iter().map(|c| c.field.clone()));
        let thresholds =
            std::iter::once(None).chain(spec.constraints.iter().map(|c| Some(c.threshold)));
        let log_scale = figures
            .iter()
            .zip(thresholds)
            .map(|(f, t)| {
                search_field(f).is_none_or(|f| f.unit != "share") && t.is_none_or(|t| t > 0.0)
            })
            .collect();
        Goal {
            figures,
            direction: spec.direction,
            limits: spec
                .constraints
                .iter()
                .map(|c| Limit {
                    bound: c.bound,
                    threshold: c.threshold,
                })
                .collect(),
            log_scale,
            confidence: spec.confidence,
            tolerance: spec.tolerance,
        }
    }

    /// `value` of figure `i` in the model's scale.
    pub fn to_model(&self, i: usize, value: f64) -> f64 {
        if self.log_scale.get(i).copied().unwrap_or(false) {
            value.max(f64::MIN_POSITIVE).ln()
        } else {
            value
        }
    }

    /// A model-scale value of figure `i` back in the figure's unit.
    pub fn from_model(&self, i: usize, y: f64) -> f64 {
        if self.log_scale.get(i).copied().unwrap_or(false) {
            y.exp()
        } else {
            y
        }
    }

    /// The objective in the model's scale, turned so that smaller is better.
    pub fn cost(&self, y: f64) -> f64 {
        match self.direction {
            Direction::Minimize => y,
            Direction::Maximize => -y,
        }
    }
}
