//! A Gaussian process over the mixed space: a product kernel (Matérn 5/2 on numeric axes, an
//! exchangeable kernel on categorical ones: two levels are correlated ρ = e^(-1/ℓ)), a constant
//! mean, and noise in two parts: each measurement's own (known) variance plus a run-to-run
//! variance the fit learns. Hyperparameters are the maximum of the marginal likelihood times
//! weak priors (a handful of measurements cannot pin seven length scales down), found by a
//! seeded random start and coordinate search: deterministic for a seed and the same data.

use llem_config::rng::SplitMix64;

use crate::linalg::{cholesky, solve_lower, solve_upper_t};
use crate::space::{AxisKind, Space};

/// One measured figure at one candidate, in the model's scale (a logarithm for positive
/// figures).
#[derive(Clone, Copy, Debug)]
pub struct Point {
    /// The candidate.
    pub candidate: usize,
    /// The value.
    pub y: f64,
    /// The measurement's own variance of `y` (0 when it has none).
    pub own_var: f64,
}

/// Hyperparameters, all as natural logarithms.
#[derive(Clone, Debug, PartialEq)]
pub struct Hyper {
    /// Signal variance over the standardised data.
    pub ln_signal_var: f64,
    /// A length scale per axis.
    pub ln_length: Vec<f64>,
    /// Run-to-run noise standard deviation, in the figure's scale.
    pub ln_noise_sd: f64,
}

/// Where the priors are centred, in the figure's scale.
#[derive(Clone, Copy, Debug)]
pub struct Prior {
    /// The run-to-run noise standard deviation (0.04 on a log scale: 4 % between runs).
    pub noise_sd: f64,
    /// How far candidates are expected to differ before any is measured (0.5 on a log scale:
    /// a factor 1.6); pooled with the measured spread, so two similar first values do not
    /// make the model sure that every candidate is like them.
    pub spread_sd: f64,
}

/// Weight of the prior spread, in measurements.
const PRIOR_SPREAD_WEIGHT: f64 = 3.0;

const PRIOR_SD: f64 = 1.0;
/// Smallest signal variance over the standardised data: a few similar first values must not
/// make the model sure that the whole space is flat.
const MIN_LN_SIGNAL_VAR: f64 = -1.4;
/// Smallest run-to-run noise, relative: keeps the factorisation stable with repeats.
const MIN_NOISE_SD: f64 = 1e-3;
const RANDOM_STARTS: usize = 24;
const SEARCH_ROUNDS: usize = 4;

/// A fitted process: ready to predict any candidate.
#[derive(Clone, Debug)]
pub struct Gp {
    hyper: Hyper,
    mean: f64,
    scale: f64,
    xs: Vec<usize>,
    chol: Vec<f64>,
    alpha: Vec<f64>,
}

fn matern52(r: f64) -> f64 {
    let s = 5f64.sqrt() * r;
    (1.0 + s + s * s / 3.0) * (-s).exp()
}

/// The correlation of two candidates under `ln_length`.
fn correlation(space: &Space, ln_length: &[f64], a: usize, b: usize) -> f64 {
    let (Some(pa), Some(pb)) = (space.points.get(a), space.points.get(b)) else {
        return 0.0;
    };
    let mut k = 1.0;
    for ((axis, l), (x, y)) in space.axes.iter().zip(ln_length).zip(pa.iter().zip(pb)) {
        let len = l.exp();
        k *= match axis.kind {
            AxisKind::Numeric { .. } => matern52((x - y).abs() / len),
            AxisKind::Categorical if x == y => 1.0,
            AxisKind::Categorical => (-1.0 / len).exp(),
        };
    }
    k
}

fn mean_and_scale(points: &[Point], prior: Prior) -> (f64, f64) {
    let n = points.len() as f64;
    let mean = points.iter().map(|p| p.y).sum::<f64>() / n.max(1.0);
    let sum_sq = points.iter().map(|p| (p.y - mean).powi(2)).sum::<f64>();
    let pooled =
        (sum_sq + PRIOR_SPREAD_WEIGHT * prior.spread_sd.powi(2)) / (n + PRIOR_SPREAD_WEIGHT);
    (mean, pooled.sqrt().max(1e-9))
}

impl Gp {
    /// The process through `points` with `hyper`; `None` when the kernel matrix cannot be
    /// factorised.
    pub fn condition(space: &Space, points: &[Point], hyper: &Hyper, prior: Prior) -> Option<Gp> {
        let (mean, scale) = mean_and_scale(points, prior);
        Self::condition_scaled(space, points, hyper, mean, scale)
    }

    fn condition_scaled(
        space: &Space,
        points: &[Point],
        hyper: &Hyper,
        mean: f64,
        scale: f64,
    ) -> Option<Gp> {
        let n = points.len();
        let signal = hyper.ln_signal_var.max(MIN_LN_SIGNAL_VAR).exp();
        let noise = (hyper.ln_noise_sd.exp().max(MIN_NOISE_SD) / scale).powi(2);
        let mut k = vec![0.0; n * n];
        for (i, pi) in points.iter().enumerate() {
            for (j, pj) in points.iter().enumerate().take(i + 1) {
                let c = signal * correlation(space, &hyper.ln_length, pi.candidate, pj.candidate);
                let v = if i == j {
                    c + noise + pi.own_var / (scale * scale)
                } else {
                    c
                };
                if let Some(a) = k.get_mut(i * n + j) {
                    *a = v;
                }
                if let Some(a) = k.get_mut(j * n + i) {
                    *a = v;
                }
            }
        }
        let chol = cholesky(&k, n)?;
        let z: Vec<f64> = points.iter().map(|p| (p.y - mean) / scale).collect();
        let alpha = solve_upper_t(&chol, n, &solve_lower(&chol, n, &z));
        Some(Gp {
            hyper: hyper.clone(),
            mean,
            scale,
            xs: points.iter().map(|p| p.candidate).collect(),
            chol,
            alpha,
        })
    }

    /// The negative log posterior of `hyper` given `points` (smaller is better).
    fn objective(space: &Space, points: &[Point], hyper: &Hyper, prior: Prior) -> f64 {
        let Some(gp) = Self::condition(space, points, hyper, prior) else {
            return f64::INFINITY;
        };
        let n = points.len();
        let z: Vec<f64> = points.iter().map(|p| (p.y - gp.mean) / gp.scale).collect();
        let fit = 0.5 * z.iter().zip(&gp.alpha).map(|(a, b)| a * b).sum::<f64>();
        let log_det: f64 = (0..n)
            .filter_map(|i| gp.chol.get(i * n + i))
            .map(|d| d.ln())
            .sum();
        let pen = |v: f64, centre: f64| 0.5 * ((v - centre) / PRIOR_SD).powi(2);
        let mut penalty =
            pen(hyper.ln_signal_var, 0.0) + pen(hyper.ln_noise_sd, prior.noise_sd.ln());
        for l in &hyper.ln_length {
            penalty += pen(*l, 0.0);
        }
        fit + log_det + penalty
    }

    /// Fits the hyperparameters to `points` and conditions on them; `None` without points.
    pub fn fit(space: &Space, points: &[Point], prior: Prior, seed: u64) -> Option<Gp> {
        if points.is_empty() {
            return None;
        }
        let d = space.axes.len();
        let centre = Hyper {
            ln_signal_var: 0.0,
            ln_length: vec![0.0; d],
            ln_noise_sd: prior.noise_sd.ln(),
        };
        let f = |h: &Hyper| Self::objective(space, points, h, prior);
        let mut best = centre.clone();
        let mut best_f = f(&best);
        let mut rng = SplitMix64::new(seed);
        let mut normal = || crate::draw::gauss(&mut rng);
        for _ in 0..RANDOM_STARTS {
            let h = Hyper {
                ln_signal_var: centre.ln_signal_var + PRIOR_SD * normal(),
                ln_length: centre
                    .ln_length
                    .iter()
                    .map(|c| c + PRIOR_SD * normal())
                    .collect(),
                ln_noise_sd: centre.ln_noise_sd + PRIOR_SD * normal(),
            };
            let v = f(&h);
            if v < best_f {
                best = h;
                best_f = v;
            }
        }
        let mut step = 0.5;
        for _ in 0..SEARCH_ROUNDS {
            for coord in 0..d + 2 {
                for sign in [1.0, -1.0] {
                    let mut h = best.clone();
                    match coord {
                        0 => h.ln_signal_var += sign * step,
                        c if c == d + 1 => h.ln_noise_sd += sign * step,
                        c => {
                            if let Some(l) = h.ln_length.get_mut(c - 1) {
                                *l += sign * step;
                            }
                        }
                    }
                    let v = f(&h);
                    if v < best_f {
                        best = h;
                        best_f = v;
                    }
                }
            }
            step /= 2.0;
        }
        Self::condition(space, points, &best, prior)
    }

    /// The same hyperparameters and scale conditioned on `points` (the fitted ones plus
    /// believed values for proposals not measured yet).
    pub fn refit_with(&self, space: &Space, points: &[Point]) -> Option<Gp> {
        Self::condition_scaled(space, points, &self.hyper, self.mean, self.scale)
    }

    /// The fitted hyperparameters.
    pub fn hyper(&self) -> &Hyper {
        &self.hyper
    }

    /// Mean and standard deviation of the figure's true value at `candidate` (without the
    /// run-to-run noise: what repeated runs would average to).
    pub fn predict(&self, space: &Space, candidate: usize) -> (f64, f64) {
        let n = self.xs.len();
        let signal = self.hyper.ln_signal_var.max(MIN_LN_SIGNAL_VAR).exp();
        let kstar: Vec<f64> = self
            .xs
            .iter()
            .map(|&x| signal * correlation(space, &self.hyper.ln_length, candidate, x))
            .collect();
        let mu: f64 = kstar.iter().zip(&self.alpha).map(|(a, b)| a * b).sum();
        let v = solve_lower(&self.chol, n, &kstar);
        let var = (signal - v.iter().map(|x| x * x).sum::<f64>()).max(0.0);
        (self.mean + self.scale * mu, self.scale * var.sqrt())
    }

    /// The run-to-run noise standard deviation the fit found, in the figure's scale.
    pub fn noise_sd(&self) -> f64 {
        self.hyper.ln_noise_sd.exp().max(MIN_NOISE_SD)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn it_interpolates_a_smooth_curve_and_is_unsure_far_from_its_data() {
        let cands: Vec<Vec<(String, serde_json::Value)>> = (0..9)
            .map(|i| vec![("batch".to_string(), json!(1 << i))])
            .collect();
        let space = Space::new(&cands);
        // ln energy falls with ln batch, flattening: measured at 1, 4, 16, 64, 256.
        let truth = |i: usize| 3.0 - 0.4 * (i as f64) + 0.03 * (i as f64).powi(2);
        let points: Vec<Point> = [0, 2, 4, 6, 8]
            .iter()
            .map(|&i| Point {
                candidate: i,
                y: truth(i),
                own_var: 0.0,
            })
            .collect();
        let prior = Prior {
            noise_sd: 0.01,
            spread_sd: 0.5,
        };
        let gp = Gp::fit(&space, &points, prior, 1).unwrap();
        for i in 0..9 {
            let (m, s) = gp.predict(&space, i);
            assert!((m - truth(i)).abs() < 0.05, "{i}: {m} vs {}", truth(i));
            assert!(s < 0.1, "{i}: sd {s}");
        }
        // Deterministic for a seed.
        let again = Gp::fit(&space, &points, prior, 1).unwrap();
        assert_eq!(gp.hyper(), again.hyper());
        // One point: the rest are barely known.
        let one = Gp::fit(&space, &points[..1], prior, 1).unwrap();
        assert!(one.predict(&space, 8).1 > one.predict(&space, 0).1 * 5.0);
    }
}
