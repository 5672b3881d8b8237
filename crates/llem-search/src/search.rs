//! The search itself: from the measurements so far to the next candidates to measure, or to
//! the answer. A pure function of the measurements (and the seed): the same measurements give
//! the same proposals, so a search resumed after `kill -9` goes on as it would have.
//!
//! Each step fits one Gaussian process per figure, then judges every candidate at the stated
//! confidence c (z = Φ⁻¹(c)):
//! - **infeasible** when the chance that all its constraints hold is below 1 - c (it is never
//!   measured again; a candidate whose run failed is out as well);
//! - the **incumbent** is the measured candidate of lowest predicted cost among those more
//!   likely feasible than not (what the full grid would choose from its means);
//! - a **competitor** is any other candidate not infeasible whose optimistic cost (mean - zσ,
//!   widened for one never measured) is below the incumbent's pessimistic cost (mean + zσ) by
//!   more than the tolerance.
//!
//! The best configuration is identified when the incumbent is feasible with chance ≥ c and
//! there is no competitor. Until then the step measures, as LUCB does for best-arm
//! identification, the one of {incumbent, strongest challenger} that is less certain, the
//! challenger being the competitor of highest constrained expected improvement. The first
//! measurements are spread over the space (greedy max-min distance from a seeded start). Once
//! identified, or when what is left of the budget is only enough for it, the winner and the
//! runner-up are measured until each has `n_cycles` runs: the answer's interval comes from
//! those repeats, not from the model.

use llem_config::rng::SplitMix64;
use serde::Serialize;
use statrs::distribution::{Continuous, ContinuousCDF, Normal};

use crate::goal::Goal;
use crate::gp::{Gp, Point, Prior};
use crate::space::Space;

/// One finished run of a candidate.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct Observation {
    /// The candidate.
    pub candidate: usize,
    /// The goal's figures (objective first), in their units; `None` for a figure the run did
    /// not produce. A failed run has none.
    pub figures: Vec<Option<f64>>,
    /// Each figure's own standard uncertainty, in its unit, where the measurement states one.
    pub own_sd: Vec<Option<f64>>,
}

impl Observation {
    /// A run that measured nothing.
    pub fn failed(candidate: usize) -> Observation {
        Observation {
            candidate,
            figures: Vec::new(),
            own_sd: Vec::new(),
        }
    }

    /// True unless every figure of `n` is there.
    pub fn is_failure(&self, n: usize) -> bool {
        self.figures.len() < n || self.figures.iter().take(n).any(Option::is_none)
    }
}

/// How much the search may do.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Settings {
    /// Runs it may use, confirmation included.
    pub budget_runs: u32,
    /// Runs of the winner and of the runner-up at the end.
    pub n_cycles: u32,
    /// Candidates proposed at once.
    pub batch: u32,
    /// Seed of the first measurements and of the model fits.
    pub seed: u64,
}

/// What a candidate is, at this step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// A run of it failed: not measured again.
    Failed,
    /// Its constraints hold with chance below 1 - confidence.
    Infeasible,
    /// The best so far.
    Incumbent,
    /// Could still beat the incumbent by more than the tolerance.
    Competitor,
    /// Cannot beat the incumbent by more than the tolerance.
    Beaten,
    /// Not judged yet (no incumbent).
    Open,
}

/// A figure's prediction at a candidate, in the figure's unit.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Estimate {
    /// The model's central value.
    pub mean: f64,
    /// The interval at the search's confidence.
    pub low: f64,
    /// Its upper end.
    pub high: f64,
}

/// One candidate, judged.
#[derive(Clone, Debug, Serialize)]
pub struct Judgement {
    /// The candidate.
    pub candidate: usize,
    /// Finished runs of it.
    pub runs: u32,
    /// Its status.
    pub status: Status,
    /// Chance that all constraints hold.
    pub p_feasible: f64,
    /// Each figure predicted (objective first); empty before any fit.
    pub figures: Vec<Estimate>,
    /// Cost (model scale, smaller better): mean and standard deviation.
    #[serde(skip)]
    cost: (f64, f64),
}

/// Why the search stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The best feasible configuration is known at the stated confidence.
    Identified,
    /// The budget ran out first; the answer is the best found.
    BudgetSpent,
    /// Every candidate failed or is infeasible.
    NothingFeasible,
    /// The candidates still in contention were measured as often as is worth it and differ
    /// from the answer by less than the runs' scatter resolves.
    Unresolved,
}

impl StopReason {
    /// In words, for the terminal.
    pub fn describe(self) -> &'static str {
        match self {
            StopReason::Identified => "the best configuration is identified",
            StopReason::BudgetSpent => "the budget is spent; the answer is the best found",
            StopReason::NothingFeasible => "no configuration meets the constraints",
            StopReason::Unresolved => {
                "the configurations left differ from the answer by less than the runs resolve"
            }
        }
    }
}

/// What to do next.
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    /// Measure these candidates (a repeat is a candidate listed again).
    Measure(Vec<usize>),
    /// The search is over.
    Done(StopReason),
}

/// The state of a search at one step: what was judged and what comes next.
#[derive(Clone, Debug)]
pub struct Step {
    /// What comes next.
    pub next: Next,
    /// The phase the proposals belong to: `explore`, `confirm` or `done`.
    pub phase: &'static str,
    /// Every candidate judged.
    pub judgements: Vec<Judgement>,
    /// The incumbent.
    pub incumbent: Option<usize>,
    /// The runner-up (the next best measured feasible candidate).
    pub runner_up: Option<usize>,
    /// The best is identified at this step.
    pub identified: bool,
}

/// A search over `space` for `goal`.
#[derive(Clone, Debug)]
pub struct Search {
    /// The candidates.
    pub space: Space,
    /// The goal.
    pub goal: Goal,
    /// The limits.
    pub settings: Settings,
}

/// Run-to-run scatter the model starts from: 4 % on a log scale, 0.04 for a share.
const PRIOR_NOISE: f64 = 0.04;
/// Spread between candidates expected before any is measured: a factor 1.6 on a log scale,
/// 0.2 for a share.
const PRIOR_SPREAD_LOG: f64 = 0.5;
const PRIOR_SPREAD_SHARE: f64 = 0.2;
/// A candidate is measured at most this many times per cycle of the study while searching:
/// beyond that, what separates it from the incumbent is below what runs can resolve.
const MAX_REPEATS_PER_CYCLE: u32 = 5;
/// How much wider an unmeasured candidate's interval is taken when ruling it out.
const UNMEASURED_WIDENING: f64 = 1.5;
/// The incumbent must be more likely feasible than not.
const INCUMBENT_MIN_P_FEASIBLE: f64 = 0.5;

fn normal() -> Normal {
    // Standard normal: parameters are valid constants.
    Normal::standard()
}

impl Search {
    /// A search; the settings' budget is in runs.
    pub fn new(space: Space, goal: Goal, settings: Settings) -> Search {
        Search {
            space,
            goal,
            settings,
        }
    }

    /// How many spread-out candidates are measured before the model decides.
    pub fn initial_count(&self) -> usize {
        let d = self.space.axes.len();
        (d + 1)
            .clamp(3, 10)
            .min((self.settings.budget_runs as usize / 3).max(1))
            .min(self.space.len())
    }

    fn runs_of(observations: &[Observation], n: usize) -> Vec<u32> {
        let mut runs = vec![0u32; n];
        for o in observations {
            if let Some(r) = runs.get_mut(o.candidate) {
                *r += 1;
            }
        }
        runs
    }

    /// The first measurements: the seed picks one, then each next is the candidate farthest
    /// from all chosen (and measured) ones.
    fn spread(&self, taken: &[usize], want: usize) -> Vec<usize> {
        let n = self.space.len();
        let mut chosen: Vec<usize> = taken.to_vec();
        let mut out = Vec::new();
        let mut rng = SplitMix64::new(self.settings.seed);
        if chosen.is_empty() && n > 0 {
            let first = rng.below(n as u64) as usize;
            chosen.push(first);
            out.push(first);
        }
        while out.len() < want {
            let best = (0..n)
                .filter(|c| !chosen.contains(c))
                .map(|c| {
                    let d = chosen
                        .iter()
                        .map(|&k| self.space.distance(c, k))
                        .fold(f64::INFINITY, f64::min);
                    (c, d)
                })
                .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)));
            let Some((c, _)) = best else { break };
            chosen.push(c);
            out.push(c);
        }
        out
    }

    /// Model points of figure `f` from the successful observations (and believed values).
    fn points(&self, observations: &[Observation], f: usize) -> Vec<Point> {
        let nf = self.goal.figures.len();
        observations
            .iter()
            .filter(|o| !o.is_failure(nf))
            .filter_map(|o| {
                let v = o.figures.get(f).copied().flatten()?;
                let y = self.goal.to_model(f, v);
                let own = o
                    .own_sd
                    .get(f)
                    .copied()
                    .flatten()
                    .map(|sd| {
                        if self.goal.log_scale.get(f).copied().unwrap_or(false) {
                            (sd / v.abs().max(f64::MIN_POSITIVE)).powi(2)
                        } else {
                            sd * sd
                        }
                    })
                    .unwrap_or(0.0);
                Some(Point {
                    candidate: o.candidate,
                    y,
                    own_var: own,
                })
            })
            .collect()
    }

    fn fit(&self, observations: &[Observation]) -> Vec<Option<Gp>> {
        (0..self.goal.figures.len())
            .map(|f| {
                let points = self.points(observations, f);
                let seed = self.settings.seed ^ (f as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                let spread_sd = if self.goal.log_scale.get(f).copied().unwrap_or(false) {
                    PRIOR_SPREAD_LOG
                } else {
                    PRIOR_SPREAD_SHARE
                };
                let prior = Prior {
                    noise_sd: PRIOR_NOISE,
                    spread_sd,
                };
                Gp::fit(&self.space, &points, prior, seed)
            })
            .collect()
    }

    /// Every candidate judged under `models`.
    fn judge(&self, models: &[Option<Gp>], observations: &[Observation]) -> Vec<Judgement> {
        let z = normal().inverse_cdf(self.goal.confidence);
        let nf = self.goal.figures.len();
        let runs = Self::runs_of(observations, self.space.len());
        let failed: Vec<bool> = (0..self.space.len())
            .map(|c| {
                observations
                    .iter()
                    .any(|o| o.candidate == c && o.is_failure(nf))
            })
            .collect();
        (0..self.space.len())
            .map(|c| {
                let preds: Vec<Option<(f64, f64)>> = models
                    .iter()
                    .map(|m| m.as_ref().map(|m| m.predict(&self.space, c)))
                    .collect();
                let figures = preds
                    .iter()
                    .enumerate()
                    .filter_map(|(f, p)| {
                        let (m, s) = (*p)?;
                        let a = self.goal.from_model(f, m - z * s);
                        let b = self.goal.from_model(f, m + z * s);
                        Some(Estimate {
                            mean: self.goal.from_model(f, m),
                            low: a.min(b),
                            high: a.max(b),
                        })
                    })
                    .collect();
                let mut p_feasible = 1.0;
                for (i, limit) in self.goal.limits.iter().enumerate() {
                    let p = match preds.get(i + 1).copied().flatten() {
                        // No model yet: a coin toss.
                        None => 0.5,
                        Some((m, s)) => {
                            let t = self.goal.to_model(i + 1, limit.threshold);
                            let gap = match limit.bound {
                                llem_config::search::Bound::AtMost => t - m,
                                llem_config::search::Bound::AtLeast => m - t,
                            };
                            if s > 0.0 {
                                normal().cdf(gap / s)
                            } else if gap >= 0.0 {
                                1.0
                            } else {
                                0.0
                            }
                        }
                    };
                    p_feasible *= p;
                }
                let cost = match preds.first().copied().flatten() {
                    Some((m, s)) => (self.goal.cost(m), s),
                    None => (0.0, f64::INFINITY),
                };
                let failed = failed.get(c).copied().unwrap_or(false);
                Judgement {
                    candidate: c,
                    runs: runs.get(c).copied().unwrap_or(0),
                    status: if failed {
                        Status::Failed
                    } else if p_feasible < 1.0 - self.goal.confidence {
                        Status::Infeasible
                    } else {
                        Status::Open
                    },
                    p_feasible: if failed { 0.0 } else { p_feasible },
                    figures,
                    cost,
                }
            })
            .collect()
    }

    /// Marks the incumbent, competitors and beaten candidates; returns the incumbent.
    fn rank(&self, js: &mut [Judgement]) -> Option<usize> {
        let z = normal().inverse_cdf(self.goal.confidence);
        // The best of those more likely feasible than not, as the full grid would choose by
        // its means; its chance of feasibility is stated with the answer, and it is only
        // "identified" once that chance reaches the confidence.
        let best_with = |p: f64| {
            js.iter()
                .filter(|j| j.runs > 0 && j.status == Status::Open && j.p_feasible >= p)
                .min_by(|a, b| a.cost.0.total_cmp(&b.cost.0))
                .map(|j| (j.candidate, j.cost))
        };
        let incumbent = best_with(INCUMBENT_MIN_P_FEASIBLE)?;
        let (inc, (m_inc, s_inc)) = incumbent;
        let tol = if self.goal.log_scale.first().copied().unwrap_or(false) {
            (1.0 + self.goal.tolerance).ln()
        } else {
            self.goal.tolerance * m_inc.abs()
        };
        for j in js.iter_mut() {
            if j.status != Status::Open {
                continue;
            }
            // An unmeasured candidate is judged by the model alone: its interval is widened,
            // as the model's own form may be wrong far from any measurement.
            let widen = if j.runs == 0 {
                UNMEASURED_WIDENING
            } else {
                1.0
            };
            j.status = if j.candidate == inc {
                Status::Incumbent
            } else if j.cost.0 - z * widen * j.cost.1 < m_inc + z * s_inc - tol {
                Status::Competitor
            } else {
                Status::Beaten
            };
        }
        Some(inc)
    }

    /// The measured candidate, feasible with chance ≥ confidence, next best after `winner`.
    fn runner_up(&self, js: &[Judgement], winner: usize) -> Option<usize> {
        js.iter()
            .filter(|j| {
                j.candidate != winner
                    && j.runs > 0
                    && !matches!(j.status, Status::Failed | Status::Infeasible)
                    && j.p_feasible >= self.goal.confidence
            })
            .min_by(|a, b| a.cost.0.total_cmp(&b.cost.0))
            .map(|j| j.candidate)
    }

    /// Constrained expected improvement of `j` over cost `best` (both model scale).
    fn cei(j: &Judgement, best: f64) -> f64 {
        let (m, s) = j.cost;
        let gain = best - m;
        let ei = if s > 0.0 {
            let u = gain / s;
            gain * normal().cdf(u) + s * normal().pdf(u)
        } else {
            gain.max(0.0)
        };
        j.p_feasible * ei
    }

    /// One proposal from judged candidates; `None` when every candidate that could still
    /// matter has been measured as often as is worth it.
    fn pick(&self, js: &[Judgement], incumbent: Option<usize>) -> Option<usize> {
        let cap = self.settings.n_cycles.max(1) * MAX_REPEATS_PER_CYCLE;
        let open = |j: &&Judgement| {
            !matches!(j.status, Status::Failed | Status::Infeasible) && j.runs < cap
        };
        let Some(inc) = incumbent.and_then(|i| js.get(i)) else {
            // Nothing known feasible yet: the likeliest feasible, then the cheapest.
            return js
                .iter()
                .filter(open)
                .max_by(|a, b| {
                    a.p_feasible
                        .total_cmp(&b.p_feasible)
                        .then(b.cost.0.total_cmp(&a.cost.0))
                })
                .map(|j| j.candidate);
        };
        let inc_open = inc.runs < cap;
        let challenger = js
            .iter()
            .filter(|j| j.status == Status::Competitor && j.runs < cap)
            .max_by(|a, b| {
                Self::cei(a, inc.cost.0)
                    .total_cmp(&Self::cei(b, inc.cost.0))
                    .then(b.cost.0.total_cmp(&a.cost.0))
            });
        match challenger {
            Some(ch) if inc_open && inc.cost.1 > ch.cost.1 => Some(inc.candidate),
            Some(ch) => Some(ch.candidate),
            // No challenger left to measure: the incumbent, while its feasibility is in doubt.
            None if inc_open && inc.p_feasible < self.goal.confidence => Some(inc.candidate),
            None => None,
        }
    }

    /// Runs the winner and runner-up still lack of `n_cycles`.
    fn confirm_needs(&self, runs: &[u32], winner: usize, runner_up: Option<usize>) -> Vec<usize> {
        let want = self.settings.n_cycles.max(1);
        let mut out = Vec::new();
        for c in std::iter::once(winner).chain(runner_up) {
            let have = runs.get(c).copied().unwrap_or(0);
            for _ in have..want {
                out.push(c);
            }
        }
        out
    }

    /// The next step after `observations` (in the order they finished), with `pending`
    /// proposals still running (believed at their predicted values).
    pub fn step(&self, observations: &[Observation], pending: &[usize]) -> Step {
        let used = observations.len() + pending.len();
        let budget = self.settings.budget_runs as usize;
        let batch = (self.settings.batch.max(1) as usize).min(budget.saturating_sub(used));
        let runs = Self::runs_of(observations, self.space.len());
        let measured: Vec<usize> = (0..self.space.len())
            .filter(|&c| runs.get(c).copied().unwrap_or(0) > 0 || pending.contains(&c))
            .collect();
        let models = self.fit(observations);
        let mut judgements = self.judge(&models, observations);
        let incumbent = self.rank(&mut judgements);
        let runner_up = incumbent.and_then(|w| self.runner_up(&judgements, w));
        let identified = incumbent.is_some_and(|w| {
            judgements
                .get(w)
                .is_some_and(|j| j.p_feasible >= self.goal.confidence)
                && !judgements.iter().any(|j| j.status == Status::Competitor)
        });
        let mut step = Step {
            next: Next::Measure(Vec::new()),
            phase: "explore",
            judgements,
            incumbent,
            runner_up,
            identified,
        };
        let initial = self.initial_count();
        if measured.len() < initial && batch > 0 {
            let want = (initial - measured.len()).min(batch);
            step.next = Next::Measure(self.spread(&measured, want));
            return step;
        }
        let Some(winner) = incumbent else {
            let nothing_open = step
                .judgements
                .iter()
                .all(|j| matches!(j.status, Status::Failed | Status::Infeasible));
            if nothing_open {
                // "Nothing is feasible" is said only once the likeliest candidate was measured:
                // the model alone, from a few runs, does not rule out a whole grid.
                let likeliest = step
                    .judgements
                    .iter()
                    .filter(|j| j.status != Status::Failed)
                    .max_by(|a, b| a.p_feasible.total_cmp(&b.p_feasible));
                match likeliest {
                    Some(j) if j.runs == 0 && batch > 0 && !pending.contains(&j.candidate) => {
                        step.next = Next::Measure(vec![j.candidate]);
                        return step;
                    }
                    _ => return self.finish(step, pending, StopReason::NothingFeasible),
                }
            }
            let proposals = if batch == 0 {
                Vec::new()
            } else {
                self.propose(
                    observations,
                    pending,
                    &models,
                    &step.judgements,
                    None,
                    batch,
                )
            };
            if proposals.is_empty() {
                let reason = if batch == 0 {
                    StopReason::BudgetSpent
                } else {
                    StopReason::NothingFeasible
                };
                return self.finish(step, pending, reason);
            }
            step.next = Next::Measure(proposals);
            return step;
        };
        let mut needs = self.confirm_needs(&runs, winner, runner_up);
        for p in pending {
            if let Some(i) = needs.iter().position(|c| c == p) {
                needs.remove(i);
            }
        }
        if identified {
            return self.confirm(step, pending, needs, batch, StopReason::Identified);
        }
        if used + needs.len() >= budget || batch == 0 {
            return self.confirm(step, pending, needs, batch, StopReason::BudgetSpent);
        }
        let proposals = self.propose(
            observations,
            pending,
            &models,
            &step.judgements,
            incumbent,
            batch.min(budget - used - needs.len()),
        );
        if proposals.is_empty() {
            return self.confirm(step, pending, needs, batch, StopReason::Unresolved);
        }
        step.next = Next::Measure(proposals);
        step
    }

    /// The confirmation runs still needed, or the end once there are none.
    fn confirm(
        &self,
        mut step: Step,
        pending: &[usize],
        mut needs: Vec<usize>,
        batch: usize,
        reason: StopReason,
    ) -> Step {
        if needs.is_empty() || batch == 0 {
            return self.finish(step, pending, reason);
        }
        needs.truncate(batch);
        step.phase = "confirm";
        step.next = Next::Measure(needs);
        step
    }

    /// The end, once nothing is running any more.
    fn finish(&self, mut step: Step, pending: &[usize], reason: StopReason) -> Step {
        if pending.is_empty() {
            step.phase = "done";
            step.next = Next::Done(reason);
        } else {
            step.phase = "confirm";
            step.next = Next::Measure(Vec::new());
        }
        step
    }

    /// Up to `batch` proposals: each next one chosen as if the earlier ones (and the pending)
    /// had measured exactly their predicted values (the kriging believer).
    fn propose(
        &self,
        observations: &[Observation],
        pending: &[usize],
        models: &[Option<Gp>],
        judgements: &[Judgement],
        incumbent: Option<usize>,
        batch: usize,
    ) -> Vec<usize> {
        let mut out = Vec::new();
        let mut believed: Vec<usize> = pending.to_vec();
        let mut js = judgements.to_vec();
        let mut inc = incumbent;
        while out.len() < batch {
            if !believed.is_empty() {
                let mut obs = observations.to_vec();
                for &c in &believed {
                    let figures = models
                        .iter()
                        .enumerate()
                        .map(|(f, m)| {
                            m.as_ref()
                                .map(|m| self.goal.from_model(f, m.predict(&self.space, c).0))
                        })
                        .collect();
                    obs.push(Observation {
                        candidate: c,
                        figures,
                        own_sd: Vec::new(),
                    });
                }
                let refit: Vec<Option<Gp>> = models
                    .iter()
                    .enumerate()
                    .map(|(f, m)| {
                        m.as_ref()
                            .and_then(|m| m.refit_with(&self.space, &self.points(&obs, f)))
                    })
                    .collect();
                js = self.judge(&refit, observations);
                inc = self.rank(&mut js);
            }
            let Some(c) = self.pick(&js, inc) else { break };
            out.push(c);
            believed.push(c);
        }
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]
mod tests {
    use super::*;
    use crate::sim::Surface;

    fn settings(budget: u32, batch: u32) -> Settings {
        Settings {
            budget_runs: budget,
            n_cycles: 3,
            batch,
            seed: 5,
        }
    }

    /// Runs `search` on `s` to its end; every run of a candidate in `broken` fails.
    fn drive(search: &Search, s: &Surface, broken: &[usize]) -> (Vec<Observation>, Step) {
        let mut rng = SplitMix64::new(11);
        let mut obs: Vec<Observation> = Vec::new();
        loop {
            let step = search.step(&obs, &[]);
            let Next::Measure(cands) = &step.next else {
                return (obs, step);
            };
            assert!(!cands.is_empty(), "nothing to measure and not done");
            for &c in cands {
                obs.push(if broken.contains(&c) {
                    Observation::failed(c)
                } else {
                    s.run(c, 0, &mut rng)
                });
            }
        }
    }

    #[test]
    fn a_failed_configuration_is_never_measured_again_and_the_budget_holds() {
        let s = Surface::synthetic(2);
        let search = Search::new(s.space.clone(), s.goal.clone(), settings(30, 1));
        let first = match search.step(&[], &[]).next {
            Next::Measure(c) => c[0],
            other => panic!("{other:?}"),
        };
        let (obs, step) = drive(&search, &s, &[first]);
        assert!(obs.len() <= 30);
        assert_eq!(obs.iter().filter(|o| o.candidate == first).count(), 1);
        assert_eq!(step.judgements[first].status, Status::Failed);
        assert_ne!(step.incumbent, Some(first));
    }

    #[test]
    fn a_batch_proposes_several_and_leaves_the_pending_ones_to_finish() {
        let s = Surface::synthetic(7);
        let search = Search::new(s.space.clone(), s.goal.clone(), settings(60, 4));
        let step = search.step(&[], &[]);
        let Next::Measure(first) = step.next else {
            panic!("{:?}", step.next)
        };
        assert_eq!(first.len(), 4);
        let mut distinct = first.clone();
        distinct.dedup();
        assert_eq!(distinct.len(), 4, "the spread-out start repeats nothing");
        // Two of the four finished: the next proposals add to the two still running.
        let mut rng = SplitMix64::new(3);
        let done: Vec<Observation> = first[..2].iter().map(|&c| s.run(c, 0, &mut rng)).collect();
        let step = search.step(&done, &first[2..]);
        let Next::Measure(more) = step.next else {
            panic!("{:?}", step.next)
        };
        assert!(!more.is_empty() && more.len() <= 4);
        assert!(
            more.iter()
                .all(|c| !first[2..].contains(c) || s.space.len() < 8)
        );
        let (obs, _) = drive(&search, &s, &[]);
        assert!(obs.len() <= 60);
    }

    #[test]
    fn an_impossible_limit_ends_with_nothing_feasible() {
        let mut s = Surface::synthetic(4);
        s.goal.limits[0].threshold = 1e-6;
        let search = Search::new(s.space.clone(), s.goal.clone(), settings(40, 1));
        let (obs, step) = drive(&search, &s, &[]);
        assert_eq!(step.next, Next::Done(StopReason::NothingFeasible));
        assert_eq!(step.incumbent, None);
        assert!(
            obs.len() < 40,
            "it stops without spending the budget: {}",
            obs.len()
        );
    }

    #[test]
    fn a_figure_to_maximise_is_maximised() {
        // Throughput (the inverse of energy per token here) under the same ITL limit: the best
        // is the same configuration.
        let s = Surface::synthetic(1);
        let mut t = s.clone();
        t.goal.direction = llem_config::search::Direction::Maximize;
        for row in &mut t.truth {
            row[0] = 1000.0 / row[0];
        }
        assert_eq!(s.best_feasible(), t.best_feasible());
        let budget = (0.3 * s.space.len() as f64 * 3.0).ceil() as u32;
        let (_, step) = drive(
            &Search::new(t.space.clone(), t.goal.clone(), settings(budget, 1)),
            &t,
            &[],
        );
        let chosen = step.incumbent.unwrap();
        assert!(t.feasible(chosen));
        assert!(
            t.cost(chosen) <= t.cost(t.best_feasible().unwrap()) * 0.9,
            "{chosen}"
        );
    }
}
