//! The arrival schedule of a serving run, computed before the first request is sent.
//!
//! Open-loop processes (constant, Poisson, gamma) give every request an absolute send
//! offset from the start; the client sleeps until that instant, never for an interval, so
//! lateness does not accumulate. `all_at_once` sends everything at offset 0. A
//! `max_concurrency` cap is applied at dispatch on top of any of these (closed loop when the
//! arrival is `all_at_once`).

use llem_config::rng::SplitMix64;
use llem_config::{Arrival, TrafficConfig};

/// The resolved traffic of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct TrafficPlan {
    /// Arrival process.
    pub arrival: Arrival,
    /// Mean rate, requests/s (open loop).
    pub rate_qps: Option<f64>,
    /// Gamma coefficient of variation.
    pub burstiness: Option<f64>,
    /// Requests in flight at most.
    pub max_concurrency: Option<std::num::NonZeroU32>,
    /// Stop sending after this many seconds.
    pub duration_s: Option<f64>,
    /// Requests to send (the dataset's size when unset and no duration is given).
    pub n_requests: Option<u32>,
    /// Seed of the draw.
    pub seed: u64,
    /// A replayed trace, whose times are the schedule (the fields above then do not apply).
    pub replay: Option<std::sync::Arc<crate::workload::trace::replay::Replay>>,
    /// Multi-turn conversations, each sending its turns after the replies (the fields above
    /// then do not apply).
    pub conversations: Option<std::sync::Arc<crate::workload::conversation::ConversationPlan>>,
}

/// Hard cap on a duration-limited schedule, so a typo'd rate cannot exhaust memory (the
/// plan refuses such a rate first).
pub const MAX_SCHEDULED: usize = llem_config::TrafficConfig::MAX_REQUESTS as usize;

impl TrafficPlan {
    /// From the config's `traffic:` block (defaults when absent); `default_seed` is the
    /// experiment's `random_seed`.
    pub fn from_config(t: Option<&TrafficConfig>, default_seed: i64) -> TrafficPlan {
        let d = TrafficConfig::default();
        let t = t.unwrap_or(&d);
        TrafficPlan {
            arrival: t.arrival,
            rate_qps: t.rate_qps,
            burstiness: t.burstiness,
            max_concurrency: t.max_concurrency,
            duration_s: t.duration_seconds,
            n_requests: t.n_requests,
            seed: t.seed.unwrap_or(default_seed) as u64,
            replay: None,
            conversations: None,
        }
    }

    /// Everything at once, no cap: warmup.
    pub fn all_at_once(n: u32) -> TrafficPlan {
        TrafficPlan {
            arrival: Arrival::AllAtOnce,
            rate_qps: None,
            burstiness: None,
            max_concurrency: None,
            duration_s: None,
            n_requests: Some(n),
            seed: 0,
            replay: None,
            conversations: None,
        }
    }

    /// Send offsets in seconds from the start, one per request, non-decreasing. For
    /// `all_at_once` with only a duration (closed loop over time), the schedule is open-ended:
    /// `None`, and the dispatcher keeps sending while the duration lasts.
    pub fn offsets(&self, n_prompts: usize) -> Result<Option<Vec<f64>>, crate::TrafficError> {
        if let Some(r) = &self.replay {
            return Ok(Some(r.offsets.clone()));
        }
        let n_cap = self.n_requests.map(|n| n as usize);
        if self.arrival == Arrival::AllAtOnce {
            return Ok(match (n_cap, self.duration_s) {
                (Some(n), _) => Some(vec![0.0; n]),
                (None, Some(_)) => None,
                (None, None) => Some(vec![0.0; n_prompts]),
            });
        }
        let rate = self
            .rate_qps
            .filter(|r| r.is_finite() && *r > 0.0)
            .ok_or(crate::TrafficError::NoRate(self.arrival))?;
        let cv = match self.arrival {
            Arrival::Gamma => self
                .burstiness
                .filter(|b| b.is_finite() && *b > 0.0)
                .ok_or(crate::TrafficError::NoBurstiness)?,
            _ => 1.0,
        };
        let limit = match (n_cap, self.duration_s) {
            (Some(n), _) => n,
            (None, Some(_)) => MAX_SCHEDULED,
            (None, None) => n_prompts,
        };
        let mut rng = SplitMix64::new(self.seed ^ 0x7472_6166_6669_6321);
        let mut out = Vec::with_capacity(limit.min(1 << 20));
        let mut t = 0.0f64;
        while out.len() < limit {
            if let Some(d) = self.duration_s
                && t > d
            {
                break;
            }
            out.push(t);
            let gap = match self.arrival {
                Arrival::Constant => 1.0 / rate,
                Arrival::Poisson => exponential(&mut rng) / rate,
                // Gamma with shape 1/cv^2 and mean 1/rate.
                _ => {
                    let shape = 1.0 / (cv * cv);
                    gamma(&mut rng, shape) / (shape * rate)
                }
            };
            t += gap;
        }
        // The dispatcher turns each offset into a Duration from the start: one that is not
        // finite, or past the longest schedule, would panic it (plan time refuses the configs
        // that produce one; this covers plans built any other way).
        let max_s = llem_config::TrafficConfig::MAX_SCHEDULE_S;
        if let Some((i, bad)) = out
            .iter()
            .enumerate()
            .find(|(_, t)| t.is_nan() || **t > max_s)
        {
            return Err(crate::TrafficError::TooLate {
                index: i,
                at_s: *bad,
                rate_qps: rate,
                burstiness: cv,
                max_s,
            });
        }
        Ok(Some(out))
    }
}

/// Uniform on (0, 1).
fn unit(rng: &mut SplitMix64) -> f64 {
    ((rng.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
}

/// Exponential with mean 1.
fn exponential(rng: &mut SplitMix64) -> f64 {
    -unit(rng).ln()
}

/// Standard normal (Box-Muller; one of the pair is dropped, which is fine for a schedule).
fn normal(rng: &mut SplitMix64) -> f64 {
    let (u, v) = (unit(rng), unit(rng));
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

/// Gamma with scale 1 (Marsaglia and Tsang; shape < 1 by the boost `G(a+1) * U^(1/a)`).
fn gamma(rng: &mut SplitMix64, shape: f64) -> f64 {
    if shape < 1.0 {
        return gamma(rng, shape + 1.0) * unit(rng).powf(1.0 / shape);
    }
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = normal(rng);
        let v = (1.0 + c * x).powi(3);
        if v <= 0.0 {
            continue;
        }
        let u = unit(rng);
        if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
            return d * v;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn plan(arrival: Arrival, rate: f64, n: u32) -> TrafficPlan {
        TrafficPlan {
            arrival,
            rate_qps: Some(rate),
            burstiness: Some(2.0),
            max_concurrency: None,
            duration_s: None,
            n_requests: Some(n),
            seed: 42,
            replay: None,
            conversations: None,
        }
    }

    fn gaps(o: &[f64]) -> Vec<f64> {
        o.windows(2).map(|w| w[1] - w[0]).collect()
    }

    fn mean_cv(g: &[f64]) -> (f64, f64) {
        let n = g.len() as f64;
        let m = g.iter().sum::<f64>() / n;
        let v = g.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0);
        (m, v.sqrt() / m)
    }

    #[test]
    fn poisson_gaps_are_exponential_by_kolmogorov_smirnov() {
        let o = plan(Arrival::Poisson, 5.0, 4001)
            .offsets(0)
            .unwrap()
            .unwrap();
        let mut g = gaps(&o);
        g.sort_by(f64::total_cmp);
        let n = g.len() as f64;
        let d = g
            .iter()
            .enumerate()
            .map(|(i, x)| {
                let cdf = 1.0 - (-5.0 * x).exp();
                (cdf - i as f64 / n)
                    .abs()
                    .max(((i + 1) as f64 / n - cdf).abs())
            })
            .fold(0.0, f64::max);
        // Critical value at alpha = 0.01: 1.628 / sqrt(n).
        assert!(d < 1.628 / n.sqrt(), "KS statistic {d}");
        let (m, cv) = mean_cv(&gaps(&o));
        assert!(
            (m - 0.2).abs() < 0.02 && (cv - 1.0).abs() < 0.06,
            "{m} {cv}"
        );
    }

    #[test]
    fn gamma_has_the_asked_burstiness_and_constant_none() {
        let o = plan(Arrival::Gamma, 10.0, 20001)
            .offsets(0)
            .unwrap()
            .unwrap();
        let (m, cv) = mean_cv(&gaps(&o));
        assert!(
            (m - 0.1).abs() < 0.006 && (cv - 2.0).abs() < 0.12,
            "{m} {cv}"
        );
        let c = plan(Arrival::Constant, 4.0, 9).offsets(0).unwrap().unwrap();
        assert!((c[8] - 2.0).abs() < 1e-12);
    }

    #[test]
    fn seeded_limits_and_errors() {
        let p = plan(Arrival::Poisson, 3.0, 50);
        assert_eq!(p.offsets(0).unwrap(), p.offsets(0).unwrap());
        let other = TrafficPlan {
            seed: 43,
            ..p.clone()
        };
        assert_ne!(p.offsets(0).unwrap(), other.offsets(0).unwrap());
        let timed = TrafficPlan {
            n_requests: None,
            duration_s: Some(10.0),
            ..p.clone()
        };
        let o = timed.offsets(0).unwrap().unwrap();
        assert!(o.last().unwrap() <= &10.0 && o.len() > 10 && o.len() < 60);
        let no_rate = TrafficPlan {
            rate_qps: None,
            ..p
        };
        assert!(
            no_rate
                .offsets(0)
                .unwrap_err()
                .to_string()
                .contains("rate_qps")
        );
        // Rates and burstiness the plan refuses never reach the dispatcher as send times.
        let glacial = plan(Arrival::Poisson, 1e-300, 3);
        let e = glacial.offsets(0).unwrap_err().to_string();
        assert!(
            e.contains("request 1 would be sent") && e.contains("1e-300"),
            "{e}"
        );
        let wild = TrafficPlan {
            burstiness: Some(1e300),
            ..plan(Arrival::Gamma, 2.0, 50)
        };
        assert!(wild.offsets(0).is_err());
        let all = TrafficPlan::all_at_once(3).offsets(10).unwrap().unwrap();
        assert_eq!(all, vec![0.0; 3]);
        let open = TrafficPlan {
            n_requests: None,
            duration_s: Some(5.0),
            ..TrafficPlan::all_at_once(1)
        };
        assert_eq!(open.offsets(10).unwrap(), None);
    }
}
