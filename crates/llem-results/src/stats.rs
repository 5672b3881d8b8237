//! Small statistics: mean, percentiles (NumPy's default linear interpolation), CV, and a
//! sample's 95 % confidence interval of the mean (Student's t, n - 1 degrees of freedom).

use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::MetricStatistics;

/// Mean, or `None` for no values.
pub fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// The `q`-th percentile (0..=100) of `sorted`, interpolating linearly between closest
/// ranks as NumPy's `percentile(..., method="linear")` does.
pub fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let rank = (q / 100.0).clamp(0.0, 1.0) * (n - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    let (a, b) = (*sorted.get(lo)?, *sorted.get(hi)?);
    Some(a + (b - a) * (rank - lo as f64))
}

/// Values sorted ascending (NaNs dropped).
pub fn sorted(v: impl IntoIterator<Item = f64>) -> Vec<f64> {
    let mut s: Vec<f64> = v.into_iter().filter(|x| x.is_finite()).collect();
    s.sort_by(f64::total_cmp);
    s
}

/// Coefficient of variation (population standard deviation / mean).
pub fn cv(v: &[f64]) -> Option<f64> {
    let m = mean(v)?;
    if m == 0.0 {
        return None;
    }
    let var = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / v.len() as f64;
    Some(var.sqrt() / m)
}

/// The two-sided 95 % quantile t(0.975, df); `None` for df = 0.
pub fn t_quantile_975(df: usize) -> Option<f64> {
    if df == 0 {
        return None;
    }
    let t = StudentsT::new(0.0, 1.0, df as f64).ok()?;
    Some(t.inverse_cdf(0.975))
}

/// Statistics of a sample; `None` when it is empty or has a non-finite value.
pub fn describe(values: &[f64]) -> Option<MetricStatistics> {
    if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let n = values.len();
    let mean = values.iter().sum::<f64>() / n as f64;
    if n == 1 {
        return Some(MetricStatistics {
            n,
            mean,
            std: None,
            cv: None,
            ci95_low: None,
            ci95_high: None,
            ci95_half_width: None,
        });
    }
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let std = var.sqrt();
    let cv = (mean != 0.0).then(|| std / mean.abs());
    let half = t_quantile_975(n - 1).map(|t| t * std / (n as f64).sqrt());
    Some(MetricStatistics {
        n,
        mean,
        std: Some(std),
        cv,
        ci95_low: half.map(|h| mean - h),
        ci95_high: half.map(|h| mean + h),
        ci95_half_width: half,
    })
}

/// The interval tables and charts show around a mean of non-negative figures (energy,
/// throughput, latency): one rule for both, said by [`SPREAD_RULE`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Spread {
    /// One run: no interval.
    None,
    /// Two runs: their range (a t interval of two, t = 12.7, says little and runs far
    /// below zero).
    Range(f64, f64),
    /// Three runs or more: the 95 % Student-t interval, its low end clipped at zero.
    Ci95 {
        /// Low end, at least zero.
        low: f64,
        /// High end.
        high: f64,
        /// Whether the low end was raised to zero.
        clipped: bool,
    },
}

/// [`Spread`]'s rule in words, for a report or a table footer.
pub const SPREAD_RULE: &str = "intervals are 95 % confidence intervals (Student t) from three runs on, clipped at zero; for two runs, the range of the two; none for one";

/// The spread of `values` by [`Spread`]'s rule; `None` (no interval) for an empty or
/// non-finite sample as for one run.
pub fn spread(values: &[f64]) -> Spread {
    match values.len() {
        0 | 1 => Spread::None,
        2 => {
            let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            if lo.is_finite() && hi.is_finite() {
                Spread::Range(lo, hi)
            } else {
                Spread::None
            }
        }
        _ => match describe(values) {
            Some(MetricStatistics {
                ci95_low: Some(low),
                ci95_high: Some(high),
                ..
            }) => Spread::Ci95 {
                low: low.max(0.0),
                high,
                clipped: low < 0.0,
            },
            _ => Spread::None,
        },
    }
}

impl Spread {
    /// The interval's ends, when there is one.
    pub fn bounds(&self) -> Option<(f64, f64)> {
        match *self {
            Spread::None => None,
            Spread::Range(lo, hi)
            | Spread::Ci95 {
                low: lo, high: hi, ..
            } => Some((lo, hi)),
        }
    }

    /// `mean` with the interval, each number through `num`: `m ± h` for a symmetric
    /// interval, `m [lo, hi]` for a range or a clipped one.
    pub fn show(&self, mean: f64, num: impl Fn(f64) -> String) -> String {
        match *self {
            Spread::None => num(mean),
            Spread::Ci95 {
                high,
                clipped: false,
                ..
            } => format!("{} ± {}", num(mean), num(high - mean)),
            Spread::Range(lo, hi)
            | Spread::Ci95 {
                low: lo, high: hi, ..
            } => {
                format!("{} [{}, {}]", num(mean), num(lo), num(hi))
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_match_numpy_linear() {
        let s = sorted([15.0, 20.0, 35.0, 40.0, 50.0]);
        // numpy.percentile([15, 20, 35, 40, 50], [0, 40, 50, 95, 100])
        assert_eq!(percentile(&s, 0.0), Some(15.0));
        assert_eq!(percentile(&s, 40.0), Some(29.0));
        assert_eq!(percentile(&s, 50.0), Some(35.0));
        assert!((percentile(&s, 95.0).unwrap_or(0.0) - 48.0).abs() < 1e-12);
        assert_eq!(percentile(&s, 100.0), Some(50.0));
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(mean(&[1.0, 2.0, 6.0]), Some(3.0));
        assert!((cv(&[1.0, 1.0, 1.0]).unwrap_or(1.0)).abs() < 1e-12);
    }

    #[test]
    fn one_rule_for_the_interval_of_one_two_and_three_runs() {
        let f = |v: f64| format!("{v}");
        assert_eq!(spread(&[5.0]), Spread::None);
        assert_eq!(spread(&[5.0]).show(5.0, f), "5");
        assert_eq!(spread(&[4.0, 6.0]), Spread::Range(4.0, 6.0));
        assert_eq!(spread(&[4.0, 6.0]).show(5.0, f), "5 [4, 6]");
        let s = spread(&[4.0, 5.0, 6.0]);
        let h = t_quantile_975(2).unwrap() / 3f64.sqrt();
        assert_eq!(s.bounds(), Some((5.0 - h, 5.0 + h)));
        assert_eq!(s.show(5.0, |v| format!("{v:.2}")), format!("5.00 ± {h:.2}"));
        // Far apart: the t interval would go below zero and is clipped there.
        let s = spread(&[0.1, 10.0, 20.0]);
        assert!(
            matches!(
                s,
                Spread::Ci95 {
                    low: 0.0,
                    clipped: true,
                    ..
                }
            ),
            "{s:?}"
        );
        assert!(s.show(10.0, f).starts_with("10 [0, "));
    }
}
