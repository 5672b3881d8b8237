//! Cumulative histograms with fixed bounds, as Prometheus and OTLP both carry them.

/// `gen_ai.client.token.usage`'s advised bucket bounds (OpenTelemetry semantic conventions).
pub(crate) const TOKEN_BOUNDS: &[f64] = &[
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0, 67108864.0,
];

/// `gen_ai.server.time_to_first_token`'s advised bucket bounds, s.
pub(crate) const TTFT_BOUNDS_S: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
];

/// `gen_ai.server.time_per_output_token`'s advised bucket bounds, s.
pub(crate) const TPOT_BOUNDS_S: &[f64] = &[
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5,
];

/// Observations counted into buckets (each bucket holds values up to its bound, inclusive;
/// the last, unbounded one the rest).
#[derive(Clone, Debug, PartialEq)]
pub struct Histogram {
    bounds: &'static [f64],
    /// Per bucket, not cumulative; one more than the bounds.
    counts: Vec<u64>,
    sum: f64,
}

impl Histogram {
    /// An empty histogram over `bounds` (ascending).
    pub(crate) fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            counts: vec![0; bounds.len() + 1],
            sum: 0.0,
        }
    }

    /// Counts `v` (non-finite values are not observations).
    pub(crate) fn observe(&mut self, v: f64) {
        if !v.is_finite() {
            return;
        }
        let i = self.bounds.iter().take_while(|b| v > **b).count();
        if let Some(c) = self.counts.get_mut(i) {
            *c += 1;
        }
        self.sum += v;
    }

    /// The bounds.
    pub fn bounds(&self) -> &[f64] {
        self.bounds
    }

    /// Count per bucket (the last unbounded).
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// Observations.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Their sum.
    pub fn sum(&self) -> f64 {
        self.sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_on_a_bound_is_in_that_bucket() {
        let mut h = Histogram::new(&[1.0, 2.0]);
        for v in [0.5, 1.0, 1.5, 3.0, f64::NAN] {
            h.observe(v);
        }
        assert_eq!(h.counts(), &[2, 1, 1]);
        assert_eq!((h.count(), h.sum()), (4, 6.0));
    }
}
