//! Small statistics: mean, percentiles (NumPy's default linear interpolation), CV.

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
