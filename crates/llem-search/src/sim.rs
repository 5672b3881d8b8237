//! Response surfaces with known optima, and the three ways of finding the best feasible
//! configuration on them that the benchmark compares: the search, random search at the same
//! budget, and the full grid. Used by `bench/search.sh` and by the tests; nothing here runs in
//! a study.

use llem_config::rng::SplitMix64;
use llem_config::search::{Bound, Direction};
use serde_json::{Value, json};

use crate::draw::{gauss, unit};
use crate::goal::{Goal, Limit};
use crate::search::{Next, Observation, Search, Settings, Status, StopReason};
use crate::space::Space;

/// A surface: the candidates, the goal, the true value of every figure at every candidate,
/// and how runs scatter around it.
#[derive(Clone, Debug)]
pub struct Surface {
    /// What it is, for the table.
    pub name: String,
    /// The candidates.
    pub space: Space,
    /// The goal (objective first).
    pub goal: Goal,
    /// `truth[c][f]`: figure `f` of candidate `c`, the mean of many runs.
    pub truth: Vec<Vec<f64>>,
    /// How a run of a candidate comes out.
    pub runs: Runs,
}

/// How runs scatter.
#[derive(Clone, Debug)]
pub enum Runs {
    /// Lognormal around the truth with this coefficient of variation per figure.
    Lognormal(Vec<f64>),
    /// Recorded runs: each run of candidate `c` is one of `recorded[c]` (its figures), drawn
    /// at random.
    Replay(Vec<Vec<Vec<f64>>>),
}

fn pick<'a, T>(rng: &mut SplitMix64, items: &'a [T]) -> Option<&'a T> {
    items.get(rng.below(items.len() as u64) as usize)
}

impl Surface {
    /// A synthetic deployment grid drawn from `seed`: engine and precision (categorical),
    /// batch size (1-64, log), threads and a flag, of which a random subset is swept (24-288
    /// candidates); energy per token falls with batch size and saturates, ITL rises with it,
    /// with engine- and precision-specific slopes, interactions and a little roughness; the ITL
    /// limit is drawn between the 25th and 75th percentile of the candidates' ITL, so the
    /// unconstrained optimum is usually infeasible and the answer sits near the boundary. Runs
    /// scatter by a CV drawn from 2-10 % (energy) and 1.5 times that (ITL p90).
    pub fn synthetic(seed: u64) -> Surface {
        let mut rng = SplitMix64::new(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0x5EED);
        let engines = ["llamacpp", "vllm", "sglang"];
        let precisions = ["f16", "q8_0", "q4_k"];
        let n_eng = *pick(&mut rng, &[1usize, 2, 3]).unwrap_or(&2);
        let n_prec = *pick(&mut rng, &[2usize, 3]).unwrap_or(&2);
        let batches: Vec<u32> = {
            let top = *pick(&mut rng, &[4u32, 5, 6, 7]).unwrap_or(&6);
            (0..top).map(|i| 1 << i).collect()
        };
        let threads: Vec<u32> = if unit(&mut rng) < 0.5 {
            vec![4, 8]
        } else {
            vec![8]
        };
        let flags: Vec<bool> = if unit(&mut rng) < 0.5 {
            vec![false, true]
        } else {
            vec![false]
        };
        // Effects on ln(energy) and ln(ITL).
        let eng_e: Vec<f64> = (0..3).map(|_| 0.25 * gauss(&mut rng)).collect();
        let eng_l: Vec<f64> = (0..3).map(|_| 0.2 * gauss(&mut rng)).collect();
        let eng_slope: Vec<f64> = (0..3).map(|_| 0.08 * gauss(&mut rng)).collect();
        let prec_e = [
            0.0,
            -0.25 + 0.05 * gauss(&mut rng),
            -0.45 + 0.08 * gauss(&mut rng),
        ];
        let prec_l = [
            0.0,
            -0.15 + 0.05 * gauss(&mut rng),
            -0.2 + 0.08 * gauss(&mut rng),
        ];
        let e_slope = 0.45 + 0.1 * unit(&mut rng);
        let e_curve = 0.04 + 0.03 * unit(&mut rng);
        let l_slope = 0.25 + 0.15 * unit(&mut rng);
        let thr_e = 0.1 * gauss(&mut rng);
        let flag_e = 0.06 * gauss(&mut rng);
        let flag_l = 0.06 * gauss(&mut rng);
        let mut cands = Vec::new();
        let mut truth = Vec::new();
        for e in 0..n_eng {
            for p in 0..n_prec {
                for (bi, &b) in batches.iter().enumerate() {
                    for &t in &threads {
                        for &fl in &flags {
                            let lb = f64::from(b).ln();
                            let rough_e = 0.02 * gauss(&mut rng);
                            let rough_l = 0.02 * gauss(&mut rng);
                            let energy =
                                3.0 + eng_e.get(e).unwrap_or(&0.0) + prec_e.get(p).unwrap_or(&0.0)
                                    - (e_slope + eng_slope.get(e).unwrap_or(&0.0)) * lb
                                    + e_curve * lb * lb
                                    + if t == 4 { thr_e } else { 0.0 }
                                    + if fl { flag_e } else { 0.0 }
                                    + rough_e;
                            let itl = 3.0
                                + eng_l.get(e).unwrap_or(&0.0)
                                + prec_l.get(p).unwrap_or(&0.0)
                                + l_slope * lb
                                + if t == 4 { 0.05 } else { 0.0 }
                                + if fl { flag_l } else { 0.0 }
                                + rough_l;
                            let _ = bi;
                            cands.push(vec![
                                ("engine".to_string(), json!(engines.get(e).unwrap_or(&"x"))),
                                (
                                    "dtype".to_string(),
                                    json!(precisions.get(p).unwrap_or(&"x")),
                                ),
                                ("batch".to_string(), json!(b)),
                                ("threads".to_string(), json!(t)),
                                ("flash_attn".to_string(), Value::Bool(fl)),
                            ]);
                            truth.push(vec![energy.exp(), itl.exp()]);
                        }
                    }
                }
            }
        }
        let mut itls: Vec<f64> = truth.iter().filter_map(|t| t.get(1).copied()).collect();
        itls.sort_by(f64::total_cmp);
        // A limit is a round number a person chose, not a candidate's value: drawn on a
        // continuous scale between the candidates' 25th and 75th percentile ITL.
        let at = |q: f64| {
            itls.get(((itls.len() - 1) as f64 * q).round() as usize)
                .copied()
                .unwrap_or(1.0)
                .ln()
        };
        let (lo, hi) = (at(0.25), at(0.75));
        let threshold = (lo + (hi - lo) * unit(&mut rng)).exp();
        let cv = 0.02 + 0.08 * unit(&mut rng);
        let space = Space::new(&cands);
        Surface {
            name: format!(
                "synthetic-{seed} ({} candidates, CV {:.0} %)",
                space.len(),
                cv * 100.0
            ),
            space,
            goal: Goal {
                figures: vec!["mj_per_tok_total".into(), "itl_p90_ms".into()],
                direction: Direction::Minimize,
                limits: vec![Limit {
                    bound: Bound::AtMost,
                    threshold,
                }],
                log_scale: vec![true, true],
                confidence: 0.95,
                tolerance: 0.02,
            },
            truth,
            runs: Runs::Lognormal(vec![cv, 1.5 * cv]),
        }
    }

    /// A recorded sweep replayed: `candidates` as [`Space::new`] takes them, `recorded[c]`
    /// the figures of each recorded run of candidate `c` (in `goal`'s order); the truth is
    /// their mean.
    pub fn replay(
        name: String,
        candidates: &[Vec<(String, Value)>],
        recorded: Vec<Vec<Vec<f64>>>,
        goal: Goal,
    ) -> Surface {
        let n = goal.figures.len();
        let truth = recorded
            .iter()
            .map(|runs| {
                (0..n)
                    .map(|f| {
                        let v: Vec<f64> = runs.iter().filter_map(|r| r.get(f).copied()).collect();
                        v.iter().sum::<f64>() / v.len().max(1) as f64
                    })
                    .collect()
            })
            .collect();
        Surface {
            name,
            space: Space::new(candidates),
            goal,
            truth,
            runs: Runs::Replay(recorded),
        }
    }

    /// The candidate of lowest true cost whose true figures meet every limit.
    pub fn best_feasible(&self) -> Option<usize> {
        (0..self.truth.len())
            .filter(|&c| self.feasible(c))
            .min_by(|&a, &b| self.cost(a).total_cmp(&self.cost(b)))
    }

    /// True when candidate `c`'s true figures meet every limit.
    pub fn feasible(&self, c: usize) -> bool {
        let Some(t) = self.truth.get(c) else {
            return false;
        };
        self.goal
            .limits
            .iter()
            .enumerate()
            .all(|(i, l)| t.get(i + 1).is_some_and(|v| l.bound.holds(*v, l.threshold)))
    }

    /// The true objective of `c`, turned so that smaller is better.
    pub fn cost(&self, c: usize) -> f64 {
        let v = self
            .truth
            .get(c)
            .and_then(|t| t.first())
            .copied()
            .unwrap_or(f64::INFINITY);
        match self.goal.direction {
            Direction::Minimize => v,
            Direction::Maximize => -v,
        }
    }

    /// Run `k` (0-based, per candidate) of candidate `c`.
    pub fn run(&self, c: usize, k: usize, rng: &mut SplitMix64) -> Observation {
        let figures = match &self.runs {
            Runs::Lognormal(cv) => self
                .truth
                .get(c)
                .map(|t| {
                    t.iter()
                        .zip(cv)
                        .map(|(v, cv)| {
                            // Lognormal with mean v and this CV.
                            let s2 = (1.0 + cv * cv).ln();
                            Some(v * (s2.sqrt() * gauss(rng) - s2 / 2.0).exp())
                        })
                        .collect()
                })
                .unwrap_or_default(),
            Runs::Replay(recorded) => {
                let _ = k;
                recorded
                    .get(c)
                    .and_then(|runs| runs.get(rng.below(runs.len().max(1) as u64) as usize))
                    .map(|r| r.iter().map(|v| Some(*v)).collect())
                    .unwrap_or_default()
            }
        };
        Observation {
            candidate: c,
            figures,
            own_sd: Vec::new(),
        }
    }
}

/// What one method chose on one surface.
#[derive(Clone, Debug)]
pub struct Trial {
    /// The chosen candidate.
    pub chosen: Option<usize>,
    /// It is the true best feasible one.
    pub exact: bool,
    /// It is truly feasible and within the tolerance of the true best.
    pub within_tolerance: bool,
    /// The true best's objective lies within the answer's interval (the search's only).
    pub best_in_interval: Option<bool>,
    /// Runs used.
    pub runs: u32,
    /// Distinct candidates measured.
    pub distinct: usize,
    /// Why the search stopped.
    pub reason: Option<StopReason>,
    /// The true best's runs and how the search judged it at the end (the search's only).
    pub best_judged: Option<(u32, Status, f64)>,
}

fn score(s: &Surface, chosen: Option<usize>) -> (bool, bool) {
    let best = s.best_feasible();
    let exact = chosen == best;
    let within = match (chosen, best) {
        (Some(c), Some(b)) => {
            s.feasible(c) && (s.cost(c) - s.cost(b)).abs() <= s.goal.tolerance * s.cost(b).abs()
        }
        (None, None) => true,
        _ => false,
    };
    (exact, within || exact)
}

/// Mean of each figure over `obs` of candidate `c`; `None` without a complete run.
fn means(obs: &[Observation], c: usize, n: usize) -> Option<Vec<f64>> {
    let runs: Vec<&Observation> = obs
        .iter()
        .filter(|o| o.candidate == c && !o.is_failure(n))
        .collect();
    if runs.is_empty() {
        return None;
    }
    Some(
        (0..n)
            .map(|f| {
                runs.iter()
                    .filter_map(|o| o.figures.get(f).copied().flatten())
                    .sum::<f64>()
                    / runs.len() as f64
            })
            .collect(),
    )
}

/// The candidate whose measured means are best among those meeting every limit.
fn best_measured(s: &Surface, obs: &[Observation]) -> Option<usize> {
    let n = s.goal.figures.len();
    (0..s.truth.len())
        .filter_map(|c| means(obs, c, n).map(|m| (c, m)))
        .filter(|(_, m)| {
            s.goal
                .limits
                .iter()
                .enumerate()
                .all(|(i, l)| m.get(i + 1).is_some_and(|v| l.bound.holds(*v, l.threshold)))
        })
        .min_by(|a, b| {
            let c = |m: &Vec<f64>| {
                let v = m.first().copied().unwrap_or(f64::INFINITY);
                if s.goal.direction == Direction::Minimize {
                    v
                } else {
                    -v
                }
            };
            c(&a.1).total_cmp(&c(&b.1))
        })
        .map(|(c, _)| c)
}

fn distinct(obs: &[Observation]) -> usize {
    let mut seen: Vec<usize> = obs.iter().map(|o| o.candidate).collect();
    seen.sort_unstable();
    seen.dedup();
    seen.len()
}

/// Runs the search on `s` to its end, measuring from `rng`.
pub fn run_search(s: &Surface, settings: Settings, rng: &mut SplitMix64) -> Trial {
    let search = Search::new(s.space.clone(), s.goal.clone(), settings);
    let mut obs: Vec<Observation> = Vec::new();
    let mut counts = vec![0usize; s.truth.len()];
    let reason = loop {
        let step = search.step(&obs, &[]);
        match &step.next {
            Next::Done(r) => break (*r, step),
            Next::Measure(cands) if cands.is_empty() => break (StopReason::BudgetSpent, step),
            Next::Measure(cands) => {
                for &c in cands {
                    let k = counts.get(c).copied().unwrap_or(0);
                    if let Some(n) = counts.get_mut(c) {
                        *n += 1;
                    }
                    obs.push(s.run(c, k, rng));
                }
            }
        }
    };
    let (reason, step) = reason;
    let chosen = step.incumbent;
    let (exact, within) = score(s, chosen);
    let best_in_interval = match (chosen, s.best_feasible()) {
        (Some(c), Some(b)) => {
            let values: Vec<f64> = obs
                .iter()
                .filter(|o| o.candidate == c)
                .filter_map(|o| o.figures.first().copied().flatten())
                .collect();
            let truth = s
                .truth
                .get(b)
                .and_then(|t| t.first())
                .copied()
                .unwrap_or(f64::NAN);
            let inside = llem_results::stats::spread(&values)
                .bounds()
                .is_some_and(|(lo, hi)| truth >= lo && truth <= hi);
            Some(inside || exact)
        }
        _ => None,
    };
    Trial {
        chosen,
        exact,
        within_tolerance: within,
        best_in_interval,
        runs: obs.len() as u32,
        distinct: distinct(&obs),
        reason: Some(reason),
        best_judged: s
            .best_feasible()
            .and_then(|b| step.judgements.get(b))
            .map(|j| (j.runs, j.status, j.p_feasible)),
    }
}

/// Random search: `budget` distinct candidates drawn at random, one run each, the best
/// measured feasible one chosen.
pub fn run_random(s: &Surface, budget: u32, rng: &mut SplitMix64) -> Trial {
    let mut order: Vec<usize> = (0..s.truth.len()).collect();
    for i in (1..order.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        order.swap(i, j);
    }
    let obs: Vec<Observation> = order
        .iter()
        .take(budget as usize)
        .map(|&c| s.run(c, 0, rng))
        .collect();
    best_of_means(s, &obs)
}

/// The trial of a method that chooses the best measured mean meeting every limit.
fn best_of_means(s: &Surface, obs: &[Observation]) -> Trial {
    let chosen = best_measured(s, obs);
    let (exact, within) = score(s, chosen);
    Trial {
        chosen,
        exact,
        within_tolerance: within,
        best_in_interval: None,
        runs: obs.len() as u32,
        distinct: distinct(obs),
        reason: None,
        best_judged: None,
    }
}

/// The full grid: every candidate `n_cycles` times, the best mean feasible one chosen.
pub fn run_grid(s: &Surface, n_cycles: u32, rng: &mut SplitMix64) -> Trial {
    let mut obs = Vec::new();
    for k in 0..n_cycles as usize {
        for c in 0..s.truth.len() {
            obs.push(s.run(c, k, rng));
        }
    }
    best_of_means(s, &obs)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn the_search_finds_the_best_feasible_configuration_of_a_noisy_grid_within_its_budget() {
        let mut right = 0;
        let trials = 6;
        for seed in 0..trials {
            let s = Surface::synthetic(seed);
            let budget = (0.3 * s.space.len() as f64 * 3.0).ceil() as u32;
            let settings = Settings {
                budget_runs: budget,
                n_cycles: 3,
                batch: 1,
                seed,
            };
            let t = run_search(&s, settings, &mut SplitMix64::new(seed + 100));
            assert!(
                t.runs <= budget,
                "{}: {} runs for a budget of {budget}",
                s.name,
                t.runs
            );
            if t.within_tolerance {
                right += 1;
            }
        }
        // Mechanics, not the benchmark's rate: most of a handful of grids come out right.
        assert!(right >= trials - 2, "{right} of {trials}");
    }

    #[test]
    fn the_same_seed_and_measurements_give_the_same_proposals() {
        let s = Surface::synthetic(3);
        let settings = Settings {
            budget_runs: 30,
            n_cycles: 3,
            batch: 1,
            seed: 9,
        };
        let a = run_search(&s, settings, &mut SplitMix64::new(1));
        let b = run_search(&s, settings, &mut SplitMix64::new(1));
        assert_eq!(a.chosen, b.chosen);
        assert_eq!(a.runs, b.runs);
    }
}
