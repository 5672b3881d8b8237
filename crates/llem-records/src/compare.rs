//! Configurations (runs that differ only by cycle or seed) summarised with a mean and a 95 %
//! confidence interval per metric, and two collections compared metric by metric.

use super::run::LlmRun;
use super::runs::Runs;
use llem_results::MetricStatistics;
use llem_results::stats::{Spread, describe, spread};

/// A metric the summaries and comparisons report.
pub struct Metric {
    /// Short name.
    pub name: &'static str,
    /// Unit as printed.
    pub unit: &'static str,
    /// What it is, in words, for a reader of the report (the name is the field's).
    pub words: &'static str,
    /// True when smaller is better.
    pub lower_is_better: bool,
    /// The value of one run, when it has one.
    pub get: fn(&LlmRun) -> Option<f64>,
}

fn finite(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

/// The metrics, in the order tables show them. Each is named as its record field (and, for
/// energy, as `result.json` names it), in that field's unit: one name and one unit per figure
/// in comparisons, `--where`, exports and `result.json`.
pub const METRICS: &[Metric] = &[
    Metric {
        name: "mj_per_tok_total",
        unit: "mJ/tok",
        words: "energy per output token",
        lower_is_better: true,
        get: LlmRun::mj_per_tok_total,
    },
    Metric {
        name: "mj_per_tok_adjusted",
        unit: "mJ/tok",
        words: "energy per output token above idle",
        lower_is_better: true,
        get: |r| r.extra.mj_per_tok_adjusted,
    },
    Metric {
        name: "system_mj_per_tok",
        unit: "mJ/tok",
        words: "system energy per output token",
        lower_is_better: true,
        get: LlmRun::system_mj_per_tok,
    },
    Metric {
        name: "output_throughput_tokens_per_sec",
        unit: "tok/s",
        words: "output throughput",
        lower_is_better: false,
        get: |r| finite(r.output_throughput_tokens_per_sec),
    },
    Metric {
        name: "avg_power_watts",
        unit: "W",
        words: "average power",
        lower_is_better: true,
        get: |r| finite(r.avg_power_watts),
    },
    Metric {
        name: "ttft_p99_ms",
        unit: "ms",
        words: "time to first token, p99",
        lower_is_better: true,
        get: |r| r.extra.ttft_p99_ms,
    },
    Metric {
        name: "p50_itl_ms",
        unit: "ms",
        words: "inter-token latency, median",
        lower_is_better: true,
        get: |r| finite(r.p50_itl_ms),
    },
    Metric {
        name: "p99_itl_ms",
        unit: "ms",
        words: "inter-token latency, p99",
        lower_is_better: true,
        get: |r| finite(r.p99_itl_ms),
    },
    Metric {
        name: "goodput_fraction",
        unit: "share",
        words: "share of requests within the SLO",
        lower_is_better: false,
        get: |r| r.extra.goodput_fraction,
    },
    Metric {
        name: "energy_per_good_request_joules",
        unit: "J",
        words: "energy per request within the SLO",
        lower_is_better: true,
        get: |r| r.extra.energy_per_good_request_joules,
    },
];

/// The metrics at least one of `runs` carries, in [`METRICS`] order: tables leave out the
/// columns nothing measured (goodput where no SLO was set).
pub fn measured(runs: &Runs) -> Vec<&'static Metric> {
    METRICS
        .iter()
        .filter(|m| runs.iter().any(|r| (m.get)(r).is_some()))
        .collect()
}

/// One configuration: its runs (cycles, seeds) and a label.
#[derive(Clone, Debug)]
pub struct Configuration {
    /// What distinguishes it, for people.
    pub label: String,
    /// Its runs.
    pub runs: Runs,
}

impl Configuration {
    /// The statistics of `metric` over the configuration's runs.
    pub fn stats(&self, metric: &Metric) -> Option<MetricStatistics> {
        describe(&self.values(metric))
    }

    /// The interval of `metric` over the configuration's runs, by the rule tables and
    /// charts share.
    pub fn spread(&self, metric: &Metric) -> Spread {
        spread(&self.values(metric))
    }

    fn values(&self, metric: &Metric) -> Vec<f64> {
        self.runs.iter().filter_map(metric.get).collect()
    }
}

/// A run's configuration label: what sets it apart in its study (llem runs), else model,
/// engine, task, GPUs, batch.
pub fn label(r: &LlmRun) -> String {
    if let Some(l) = &r.extra.label {
        return l.clone();
    }
    let engine = r.extra.engine.as_deref().unwrap_or("?");
    let gpus = if r.num_gpus > 0 {
        format!("{}x{}", r.num_gpus, r.gpu_model)
    } else {
        r.gpu_model.clone()
    };
    format!(
        "{} {engine} {} {gpus} b={}",
        r.nickname, r.task, r.max_num_seqs
    )
}

/// Groups runs into configurations: llem cells by configuration hash (the cycles of one
/// configuration), other runs by model, engine, task, GPU model and count, and batch.
pub fn configurations(runs: &Runs) -> Vec<Configuration> {
    runs.group_by_key(|r| match &r.extra.config_hash {
        Some(h) => format!("hash:{h}"),
        None => label(r),
    })
    .into_iter()
    .map(|(_, runs)| Configuration {
        label: runs.get(0).map(label).unwrap_or_default(),
        runs,
    })
    .collect()
}

/// One metric of a comparison.
#[derive(Clone, Debug)]
pub struct ComparedMetric {
    /// Metric name.
    pub name: &'static str,
    /// Unit.
    pub unit: &'static str,
    /// Statistics of side A.
    pub a: Option<MetricStatistics>,
    /// Statistics of side B.
    pub b: Option<MetricStatistics>,
    /// Mean B / mean A.
    pub ratio: Option<f64>,
    /// Whether the two 95 % intervals are disjoint (`None` without intervals on both sides).
    pub distinct: Option<bool>,
    /// Which side is better when distinct (`"A"` or `"B"`).
    pub better: Option<&'static str>,
}

/// The energy scopes (`gpu`, `cpu`) of a collection's runs, sorted, unknown ones left out.
fn scopes(runs: &Runs) -> Vec<String> {
    let mut s: Vec<String> = runs
        .iter()
        .filter_map(|r| r.extra.energy_scope.clone())
        .collect();
    s.sort();
    s.dedup();
    s
}

/// Why the energy rows of `compare(a, b)` compare different devices, when they do: one side
/// measured GPUs and the other the CPU (or either mixes both).
pub fn scope_mismatch(a: &Runs, b: &Runs) -> Option<String> {
    let (sa, sb) = (scopes(a), scopes(b));
    (sa.len() > 1 || sb.len() > 1 || (!sa.is_empty() && !sb.is_empty() && sa != sb)).then(|| {
        format!(
            "energy scopes differ (A: {}, B: {}): energy_per_token measures different devices \
             on each side; system_energy_per_token (every measured domain) is the comparable row",
            if sa.is_empty() {
                "unknown".into()
            } else {
                sa.join("+")
            },
            if sb.is_empty() {
                "unknown".into()
            } else {
                sb.join("+")
            },
        )
    })
}

/// Compares every metric over all runs of `a` and of `b` that either side measured.
pub fn compare(a: &Runs, b: &Runs) -> Vec<ComparedMetric> {
    METRICS
        .iter()
        .filter(|m| a.iter().chain(b.iter()).any(|r| (m.get)(r).is_some()))
        .map(|m| {
            let sa = describe(&a.iter().filter_map(m.get).collect::<Vec<_>>());
            let sb = describe(&b.iter().filter_map(m.get).collect::<Vec<_>>());
            let ratio = match (&sa, &sb) {
                (Some(x), Some(y)) if x.mean != 0.0 => Some(y.mean / x.mean),
                _ => None,
            };
            let distinct = match (&sa, &sb) {
                (Some(x), Some(y)) => match (x.ci95_low, x.ci95_high, y.ci95_low, y.ci95_high) {
                    (Some(al), Some(ah), Some(bl), Some(bh)) => Some(ah < bl || bh < al),
                    _ => None,
                },
                _ => None,
            };
            let better = match (distinct, &sa, &sb) {
                (Some(true), Some(x), Some(y)) => Some(if (y.mean < x.mean) == m.lower_is_better {
                    "B"
                } else {
                    "A"
                }),
                _ => None,
            };
            ComparedMetric {
                name: m.name,
                unit: m.unit,
                a: sa,
                b: sb,
                ratio,
                distinct,
                better,
            }
        })
        .collect()
}
