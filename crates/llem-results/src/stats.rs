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
}
