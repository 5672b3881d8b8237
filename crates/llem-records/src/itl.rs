//! Inter-token latencies as a streaming client records them, smoothed for chunked prefill:
//! a chunk of several tokens is logged as its whole latency on the first token and `0` on
//! the others; the reader spreads that latency evenly over the chunk's tokens.

use llem_results::stats::{percentile, sorted};

/// One request's smoothed ITLs, appended to `out` (seconds). Leading zeros and negative
/// values before the first positive value are dropped; a positive value followed by `k`
/// exact zeros becomes `k + 1` copies of `value / (k + 1)`; other non-positive values are
/// skipped (a negative value ends a run of zeros).
pub fn smooth_into(raw: &[f64], out: &mut Vec<f64>) {
    let Some(start) = raw.iter().position(|v| *v > 0.0) else {
        return;
    };
    let rest = raw.get(start..).unwrap_or_default();
    let mut i = 0;
    while let Some(&v) = rest.get(i) {
        i += 1;
        if v.is_nan() || v <= 0.0 {
            continue;
        }
        let zeros = rest
            .get(i..)
            .unwrap_or_default()
            .iter()
            .take_while(|z| **z == 0.0)
            .count();
        let share = v / (zeros + 1) as f64;
        out.extend(std::iter::repeat_n(share, zeros + 1));
        i += zeros;
    }
}

/// Gaps between consecutive token timestamps: the `itl` list a streaming client records
/// (tokens of one chunk share a timestamp, so their gaps are the zeros [`smooth`] spreads).
pub fn gaps(token_times_s: &[f64]) -> Vec<f64> {
    token_times_s
        .iter()
        .zip(token_times_s.iter().skip(1))
        .map(|(a, b)| b - a)
        .collect()
}

/// [`smooth_into`] into a new vector.
#[cfg(test)]
pub fn smooth(raw: &[f64]) -> Vec<f64> {
    let mut out = Vec::with_capacity(raw.len());
    smooth_into(raw, &mut out);
    out
}

/// ITL statistics of a run, milliseconds: mean and the 50th, 90th, 95th and 99th
/// percentiles of the pooled smoothed ITLs of its successful requests.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ItlStats {
    /// Arithmetic mean, ms.
    pub mean_ms: f64,
    /// Median, ms.
    pub p50_ms: f64,
    /// 90th percentile, ms.
    pub p90_ms: f64,
    /// 95th percentile, ms.
    pub p95_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
}

/// The statistics over the requests' raw ITL lists (seconds), or `None` when no value
/// survives smoothing (the reference reader then leaves the run out).
pub fn run_stats<'a>(requests: impl IntoIterator<Item = &'a [f64]>) -> Option<ItlStats> {
    let mut pool = Vec::new();
    for r in requests {
        smooth_into(r, &mut pool);
    }
    if pool.is_empty() {
        return None;
    }
    let mean = pool.iter().sum::<f64>() / pool.len() as f64;
    let s = sorted(pool);
    let p = |q: f64| percentile(&s, q).map_or(f64::NAN, |v| v * 1000.0);
    Some(ItlStats {
        mean_ms: mean * 1000.0,
        p50_ms: p(50.0),
        p90_ms: p(90.0),
        p95_ms: p(95.0),
        p99_ms: p(99.0),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-15)
    }

    #[test]
    fn the_reference_examples() {
        assert_eq!(smooth(&[0.01, 0.01]), vec![0.01, 0.01]);
        assert!(close(
            &smooth(&[0.03, 0.0, 0.0, 0.02]),
            &[0.01, 0.01, 0.01, 0.02]
        ));
        assert_eq!(smooth(&[0.0, 0.0, 0.02, 0.03]), vec![0.02, 0.03]);
        let t = 0.04 / 3.0;
        assert_eq!(smooth(&[0.01, 0.04, 0.0, 0.0]), vec![0.01, t, t, t]);
        assert!(smooth(&[0.0, 0.0, 0.0]).is_empty());
        assert!(smooth(&[]).is_empty());
    }

    #[test]
    fn negatives_and_their_zeros() {
        // Negatives before the first positive are dropped with the leading zeros; a negative
        // later is skipped and the zeros after it are not absorbed.
        assert_eq!(smooth(&[-0.5, 0.0, 0.02]), vec![0.02]);
        assert_eq!(smooth(&[0.02, -0.01, 0.0, 0.0, 0.04]), vec![0.02, 0.04]);
        assert_eq!(smooth(&[0.02, 0.0, -0.01, 0.0]), vec![0.01, 0.01]);
        // The sum of kept positives is preserved.
        let raw = [0.0, 0.05, 0.0, 0.0, 0.0, 0.07, 0.0];
        let s = smooth(&raw);
        assert_eq!(s.len(), 6);
        assert!((s.iter().sum::<f64>() - 0.12).abs() < 1e-15);
    }

    #[test]
    fn pooled_statistics_in_milliseconds() {
        let a = [0.01, 0.03, 0.0];
        let b = [0.02];
        let none: [f64; 2] = [0.0, 0.0];
        let st = run_stats([&a[..], &b[..], &none[..]]).unwrap();
        // Pool: 0.01, 0.015, 0.015, 0.02 -> mean 15 ms; numpy median 15 ms.
        assert!((st.mean_ms - 15.0).abs() < 1e-9);
        assert!((st.p50_ms - 15.0).abs() < 1e-9);
        // numpy.percentile([10, 15, 15, 20], 99) = 19.85
        assert!((st.p99_ms - 19.85).abs() < 1e-9);
        assert_eq!(run_stats([&none[..]]), None);
    }
}
