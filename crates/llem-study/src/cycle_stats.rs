//! Statistics across cycles: mean, sample standard deviation, coefficient of variation and a
//! 95 % confidence interval of the mean from Student's t with n - 1 degrees of freedom.

pub use llem_results::stats::describe;
use llem_results::{ConfigurationStatistics, ExperimentResult, NamedStatistics};

/// Above this coefficient of variation a metric's cycles disagree enough to warn.
pub const CV_WARN_THRESHOLD: f64 = 0.05;

/// A metric taken from every completed cycle's result.
struct Metric {
    name: &'static str,
    unit: &'static str,
    /// Warn when its CV is above [`CV_WARN_THRESHOLD`] (latency tails are noisy by nature).
    warn_on_cv: bool,
    get: fn(&ExperimentResult) -> Option<f64>,
    /// The measurement's own bound on the value, in its unit (energy metrics).
    bound: Option<fn(&ExperimentResult) -> Option<f64>>,
}

const METRICS: &[Metric] = &[
    Metric {
        name: "total_energy_j",
        unit: "J",
        warn_on_cv: false,
        get: |r| Some(r.total_energy_j),
        bound: Some(|r| r.energy_uncertainty.as_ref().and_then(|u| u.bound_j)),
    },
    Metric {
        name: "energy_adjusted_j",
        unit: "J",
        warn_on_cv: false,
        get: |r| r.energy_adjusted_j,
        bound: None,
    },
    Metric {
        name: "mj_per_tok_total",
        unit: "mJ/tok",
        warn_on_cv: true,
        get: |r| r.mj_per_tok_total,
        bound: Some(|r| r.energy_uncertainty.as_ref().and_then(|u| u.mj_per_tok)),
    },
    Metric {
        name: "mj_per_tok_adjusted",
        unit: "mJ/tok",
        warn_on_cv: true,
        get: |r| r.mj_per_tok_adjusted,
        bound: None,
    },
    Metric {
        name: "system_energy_j",
        unit: "J",
        warn_on_cv: false,
        get: |r| r.system_energy_j,
        bound: None,
    },
    Metric {
        name: "system_mj_per_tok",
        unit: "mJ/tok",
        warn_on_cv: false,
        get: |r| r.system_mj_per_tok,
        bound: None,
    },
    Metric {
        name: "co2_g",
        unit: "gCO2",
        warn_on_cv: false,
        get: |r| r.emissions.as_ref().and_then(|e| e.co2_g),
        bound: None,
    },
    Metric {
        name: "system_co2_g",
        unit: "gCO2",
        warn_on_cv: false,
        get: |r| r.emissions.as_ref().and_then(|e| e.system_co2_g),
        bound: None,
    },
    Metric {
        name: "avg_tokens_per_second",
        unit: "tok/s",
        warn_on_cv: true,
        get: |r| Some(r.avg_tokens_per_second),
        bound: None,
    },
    Metric {
        name: "ttft_p50_ms",
        unit: "ms",
        warn_on_cv: false,
        get: |r| r.latency_stats.as_ref().and_then(|l| l.ttft_median_ms),
        bound: None,
    },
    Metric {
        name: "ttft_p99_ms",
        unit: "ms",
        warn_on_cv: false,
        get: |r| r.latency_stats.as_ref().and_then(|l| l.ttft_p99_ms),
        bound: None,
    },
    Metric {
        name: "itl_p50_ms",
        unit: "ms",
        warn_on_cv: false,
        get: |r| r.latency_stats.as_ref().and_then(|l| l.itl_median_ms),
        bound: None,
    },
    Metric {
        name: "itl_p99_ms",
        unit: "ms",
        warn_on_cv: false,
        get: |r| r.latency_stats.as_ref().and_then(|l| l.itl_p99_ms),
        bound: None,
    },
];

/// The mean of the cycles' measurement bounds; none unless every cycle has one (a cycle
/// measured by an estimate has no bound, and then neither has the mean).
fn mean_bound(bounds: &[Option<f64>]) -> Option<f64> {
    let v: Option<Vec<f64>> = bounds.iter().copied().collect();
    v.filter(|v| !v.is_empty())
        .map(|v| v.iter().sum::<f64>() / v.len() as f64)
}

/// The 95 % interval's half-width plus the measurement bound: the cycles' scatter and what
/// each cycle could not resolve, both held (the bound alone for one cycle).
fn combined(stats: &llem_results::MetricStatistics, bound: Option<f64>) -> Option<f64> {
    bound.map(|b| b + stats.ci95_half_width.unwrap_or(0.0))
}

/// Statistics of one configuration from its completed cycles' results, and the warnings for
/// metrics whose cycles disagree by more than [`CV_WARN_THRESHOLD`].
pub fn configuration_statistics(
    config_hash: &str,
    config_summary: &str,
    n_cycles: u32,
    results: &[&ExperimentResult],
) -> (ConfigurationStatistics, Vec<String>) {
    let mut metrics = Vec::new();
    let mut warnings = Vec::new();
    for m in METRICS {
        let values: Vec<f64> = results.iter().filter_map(|r| (m.get)(r)).collect();
        let Some(stats) = describe(&values) else {
            continue;
        };
        if m.warn_on_cv
            && let Some(cv) = stats.cv
            && cv > CV_WARN_THRESHOLD
        {
            warnings.push(format!(
                "{config_summary} ({config_hash}): {} varies by CV {:.1} % over {} cycles \
                 (> {:.0} %); the cycles did not measure the same thing (thermal state, \
                 background load?)",
                m.name,
                cv * 100.0,
                stats.n,
                CV_WARN_THRESHOLD * 100.0
            ));
        }
        let measurement_bound = m
            .bound
            .and_then(|b| mean_bound(&results.iter().map(|r| b(r)).collect::<Vec<_>>()));
        let combined_half_width = combined(&stats, measurement_bound);
        metrics.push(NamedStatistics {
            metric: m.name.to_string(),
            unit: m.unit.to_string(),
            stats,
            measurement_bound,
            combined_half_width,
        });
    }
    (
        ConfigurationStatistics {
            config_hash: config_hash.to_string(),
            config_summary: config_summary.to_string(),
            n_cycles,
            n_completed: results.len(),
            metrics,
        },
        warnings,
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use llem_results::stats::t_quantile_975;

    /// Two-sided 95 % critical values of Student's t, from published tables (e.g. NIST/SEMATECH
    /// e-Handbook, table 1.3.6.7.2), to 3 decimals.
    const T_TABLE: &[(usize, f64)] = &[
        (1, 12.706),
        (2, 4.303),
        (3, 3.182),
        (4, 2.776),
        (5, 2.571),
        (6, 2.447),
        (7, 2.365),
        (8, 2.306),
        (9, 2.262),
        (10, 2.228),
        (15, 2.131),
        (20, 2.086),
        (29, 2.045),
        (30, 2.042),
        (60, 2.000),
        (120, 1.980),
    ];

    #[test]
    fn t_quantiles_match_the_reference_table() {
        for &(df, t) in T_TABLE {
            let got = t_quantile_975(df).unwrap();
            assert!((got - t).abs() < 5e-4, "df {df}: {got} vs table {t}");
        }
        assert_eq!(t_quantile_975(0), None);
    }

    #[test]
    fn ci_of_known_samples() {
        // 1..=5: mean 3, s = sqrt(2.5), half-width t(4) * s / sqrt(5) = 2.776445 * 0.707107.
        let s = describe(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        assert_eq!(s.n, 5);
        assert!((s.mean - 3.0).abs() < 1e-12);
        assert!((s.std.unwrap() - 2.5f64.sqrt()).abs() < 1e-12);
        assert!((s.ci95_half_width.unwrap() - 1.963_243).abs() < 1e-5);
        assert!((s.ci95_low.unwrap() - 1.036_757).abs() < 1e-5);
        assert!((s.cv.unwrap() - 2.5f64.sqrt() / 3.0).abs() < 1e-12);
        // Three cycles of mJ/tok: 10.0, 10.4, 9.8 -> mean 10.0667, s 0.30551, t(2) 4.302653.
        let s = describe(&[10.0, 10.4, 9.8]).unwrap();
        let half = 4.302_653 * 0.305_505 / 3f64.sqrt();
        assert!((s.ci95_half_width.unwrap() - half).abs() < 1e-4);
        // Ten values: df 9, t = 2.262157 (the DESIGN.md check value).
        let v: Vec<f64> = (0..10).map(f64::from).collect();
        let s = describe(&v).unwrap();
        let sd = s.std.unwrap();
        assert!((s.ci95_half_width.unwrap() - 2.262_157 * sd / 10f64.sqrt()).abs() < 1e-5);
    }

    #[test]
    fn the_interval_and_the_measurement_bound_add_up() {
        let s = describe(&[10.0, 10.4, 9.8]).unwrap();
        let b = mean_bound(&[Some(0.2), Some(0.3), Some(0.4)]).unwrap();
        assert!((b - 0.3).abs() < 1e-12);
        let c = combined(&s, Some(b)).unwrap();
        assert!((c - (s.ci95_half_width.unwrap() + 0.3)).abs() < 1e-12);
        // One cycle: the bound alone; a cycle without a bound (an estimate): none.
        let one = describe(&[10.0]).unwrap();
        assert_eq!(combined(&one, Some(0.3)), Some(0.3));
        assert_eq!(mean_bound(&[Some(0.2), None]), None);
        assert_eq!(combined(&s, None), None);
    }

    #[test]
    fn one_value_has_no_spread_and_empty_has_nothing() {
        let s = describe(&[4.2]).unwrap();
        assert_eq!((s.n, s.mean), (1, 4.2));
        assert!(s.std.is_none() && s.cv.is_none() && s.ci95_half_width.is_none());
        assert!(describe(&[]).is_none());
        assert!(describe(&[1.0, f64::NAN]).is_none());
        // A zero mean has no CV but still an interval.
        let s = describe(&[-1.0, 1.0]).unwrap();
        assert!(s.cv.is_none() && s.ci95_half_width.is_some());
    }
}
