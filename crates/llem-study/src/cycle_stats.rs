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
}

const METRICS: &[Metric] = &[
    Metric {
        name: "total_energy_j",
        unit: "J",
        warn_on_cv: false,
        get: |r| Some(r.total_energy_j),
    },
    Metric {
        name: "energy_adjusted_j",
        unit: "J",
        warn_on_cv: false,
        get: |r| r.energy_adjusted_j,
    },
    Metric {
        name: "mj_per_tok_total",
        unit: "mJ/tok",
        warn_on_cv: true,
        get: |r| r.mj_per_tok_total,
    },
    Metric {
        name: "mj_per_tok_adjusted",
        unit: "mJ/tok",
        warn_on_cv: true,
        get: |r| r.mj_per_tok_adjusted,
    },
    Metric {
        name: "system_energy_j",
        unit: "J",
        warn_on_cv: false,
        get: |r| r.system_energy_j,
    },
    Metric {
        name: "system_mj_per_tok",
        unit: "mJ/tok",
        warn_on_cv: false,
        get: |r| r.system_mj_per_tok,
    },
    Metric {
        name: "co2_g",
        unit: "gCO2",
        warn_on_cv: false,
        get: |r| r.emissions.as_ref().and_then(|e| e.co2_g),
    },
    Metric {
        name: "system_co2_g",
        unit: "gCO2",
        warn_on_cv: false,
        get: |r| r.emissions.as_ref().and_then(|e| e.system_co2_g),
    },
    Metric {
        name: "avg_tokens_per_second",
        unit: "tok/s",
        warn_on_cv: true,
        get: |r| Some(r.avg_tokens_per_second),
    },
    Metric {
        name: "ttft_p50_ms",
        unit: "ms",
        warn_on_cv: false,
        get: |r| r.latency_stats.as_ref().and_then(|l| l.ttft_median_ms),
    },
    Metric {
        name: "ttft_p99_ms",
        unit: "ms",
        warn_on_cv: false,
        get: |r| r.latency_stats.as_ref().and_then(|l| l.ttft_p99_ms),
    },
    Metric {
        name: "itl_p50_ms",
        unit: "ms",
        warn_on_cv: false,
        get: |r| r.latency_stats.as_ref().and_then(|l| l.itl_median_ms),
    },
    Metric {
        name: "itl_p99_ms",
        unit: "ms",
        warn_on_cv: false,
        get: |r| r.latency_stats.as_ref().and_then(|l| l.itl_p99_ms),
    },
];

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
        metrics.push(NamedStatistics {
            metric: m.name.to_string(),
            unit: m.unit.to_string(),
            stats,
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
