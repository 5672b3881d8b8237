//! Whether a run's steady state can be trusted (the reference reader's rules, checked in
//! order, first failure wins) and the cascade across batch sizes: in a group of runs of one
//! model, task, GPU model and GPU count, every run at or above the smallest batch size that
//! failed a rule is unstable too.

use std::collections::BTreeMap;

use super::pyfloat;

/// Shortest steady state that passes, s (20.0 itself passes).
pub const MIN_STEADY_STATE_S: f64 = 20.0;
/// Lowest batch utilisation that passes (0.85 itself passes).
pub const MIN_BATCH_UTILISATION: f64 = 0.85;

/// What the stability rules look at for one run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunFacts {
    /// HF model id (`org/model`).
    pub model_id: String,
    /// Benchmark task.
    pub task: String,
    /// GPU model, upper-cased.
    pub gpu_model: String,
    /// GPUs of the run.
    pub num_gpus: i64,
    /// Further grouping for llem cells (the engine), so one engine's failure does not
    /// cascade onto another's; empty for ML.ENERGY runs.
    pub variant: String,
    /// The batch limit, when the run directory name gives one.
    pub max_num_seqs: Option<i64>,
    /// Why `results.json` could not be read, when it could not.
    pub load_error: Option<String>,
    /// Steady-state duration `D`, s.
    pub steady_state_duration_s: Option<f64>,
    /// Energy per token `e`, J.
    pub energy_per_token_j: Option<f64>,
    /// Mean running requests in the steady state (Prometheus), when known.
    pub avg_batch_size: Option<f64>,
}

type GroupKey<'a> = (&'a str, &'a str, &'a str, i64, &'a str);

impl RunFacts {
    /// The cascade group: model, task, GPU model, GPU count (and the llem variant).
    fn group(&self) -> GroupKey<'_> {
        (
            &self.model_id,
            &self.task,
            &self.gpu_model,
            self.num_gpus,
            &self.variant,
        )
    }
}

/// The verdict on one run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stability {
    /// True when no rule failed and no cascade reached it.
    pub is_stable: bool,
    /// `rule:detail`, empty when stable (consumers key on the text before the first `:`).
    pub unstable_reason: String,
}

fn opt_repr(x: Option<f64>) -> String {
    x.map_or_else(|| "None".to_string(), pyfloat::repr)
}

/// The first per-run rule `f` fails, as its reason text.
pub fn per_run_reason(f: &RunFacts) -> Option<String> {
    if let Some(e) = &f.load_error {
        return Some(format!("failed_to_load_results:{e}"));
    }
    match f.steady_state_duration_s {
        Some(d) if d >= MIN_STEADY_STATE_S => {}
        d => return Some(format!("short_steady_state:{}", opt_repr(d))),
    }
    match f.energy_per_token_j {
        Some(e) if e > 0.0 => {}
        e => return Some(format!("invalid_energy_per_token:{}", opt_repr(e))),
    }
    if let (Some(b), Some(avg)) = (f.max_num_seqs.filter(|b| *b > 0), f.avg_batch_size) {
        let u = avg / b as f64;
        if u < MIN_BATCH_UTILISATION {
            return Some(format!("low_batch_utilization:{u:.6}"));
        }
    }
    None
}

/// The verdicts of `runs`, in order, with the cascade applied across all of them (callers
/// pass every discovered run of every root, including ones later left out).
pub fn judge(runs: &[RunFacts]) -> Vec<Stability> {
    let reasons: Vec<Option<String>> = runs.iter().map(per_run_reason).collect();
    // Smallest failing batch size per group.
    let mut threshold: BTreeMap<GroupKey<'_>, i64> = BTreeMap::new();
    for (f, r) in runs.iter().zip(&reasons) {
        if let (Some(b), Some(_)) = (f.max_num_seqs, r) {
            let key = f.group();
            threshold
                .entry(key)
                .and_modify(|t| *t = (*t).min(b))
                .or_insert(b);
        }
    }
    runs.iter()
        .zip(reasons)
        .map(|(f, own)| {
            let cascade = f.max_num_seqs.and_then(|b| {
                let key = f.group();
                threshold.get(&key).filter(|t| b >= **t).copied()
            });
            match (own, cascade) {
                (Some(r), _) => Stability {
                    is_stable: false,
                    unstable_reason: r,
                },
                (None, Some(t)) => Stability {
                    is_stable: false,
                    unstable_reason: format!("cascade_from_unstable_batch:{t}"),
                },
                (None, None) => Stability {
                    is_stable: true,
                    unstable_reason: String::new(),
                },
            }
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn run(model: &str, gpus: i64, b: i64, d: f64, e: f64, avg: Option<f64>) -> RunFacts {
        RunFacts {
            model_id: model.into(),
            task: "gpqa".into(),
            gpu_model: "H100".into(),
            num_gpus: gpus,
            max_num_seqs: Some(b),
            load_error: None,
            steady_state_duration_s: Some(d),
            energy_per_token_j: Some(e),
            avg_batch_size: avg,
            variant: String::new(),
        }
    }

    #[test]
    fn rules_in_order_with_their_texts_and_boundaries() {
        assert_eq!(per_run_reason(&run("m", 1, 8, 20.0, 0.1, Some(6.8))), None);
        assert_eq!(
            per_run_reason(&run("m", 1, 8, 19.5, -1.0, None)).unwrap(),
            "short_steady_state:19.5"
        );
        assert_eq!(
            per_run_reason(&run("m", 1, 8, 17.0, 0.1, None)).unwrap(),
            "short_steady_state:17.0"
        );
        assert_eq!(
            per_run_reason(&run("m", 1, 8, 30.0, -0.25, None)).unwrap(),
            "invalid_energy_per_token:-0.25"
        );
        let mut missing = run("m", 1, 8, 30.0, 0.1, None);
        missing.energy_per_token_j = None;
        assert_eq!(
            per_run_reason(&missing).unwrap(),
            "invalid_energy_per_token:None"
        );
        missing.steady_state_duration_s = None;
        assert_eq!(per_run_reason(&missing).unwrap(), "short_steady_state:None");
        assert_eq!(
            per_run_reason(&run("m", 1, 8, 30.0, 0.1, Some(5.7))).unwrap(),
            "low_batch_utilization:0.712500"
        );
        // Exactly 0.85 passes; no Prometheus figure skips the rule.
        assert_eq!(
            per_run_reason(&run("m", 1, 20, 30.0, 0.1, Some(17.0))),
            None
        );
        assert_eq!(per_run_reason(&run("m", 1, 8, 30.0, 0.1, None)), None);
        let mut broken = run("m", 1, 8, 30.0, 0.1, None);
        broken.load_error = Some("Expecting value: line 1 column 1 (char 0)".into());
        assert!(
            per_run_reason(&broken)
                .unwrap()
                .starts_with("failed_to_load_results:Expecting")
        );
    }

    #[test]
    fn the_cascade_reaches_larger_batches_of_the_same_group_only() {
        let runs = vec![
            run("a/m", 1, 8, 30.0, 0.1, Some(8.0)),
            run("a/m", 1, 16, 30.0, 0.1, Some(10.0)), // under-utilised: fails
            run("a/m", 1, 32, 30.0, 0.1, Some(32.0)),
            run("a/m", 1, 64, 10.0, 0.1, Some(64.0)), // short: keeps its own reason
            run("a/m", 2, 32, 30.0, 0.1, Some(32.0)), // two GPUs: another group
            run("b/m", 1, 32, 30.0, 0.1, Some(32.0)), // another model
        ];
        let v = judge(&runs);
        assert!(v[0].is_stable);
        assert_eq!(v[1].unstable_reason, "low_batch_utilization:0.625000");
        assert_eq!(v[2].unstable_reason, "cascade_from_unstable_batch:16");
        assert_eq!(v[3].unstable_reason, "short_steady_state:10.0");
        assert!(v[4].is_stable && v[5].is_stable);
        // A run whose batch size is unknown is in no group and never checked by rule 3.
        let mut odd = run("a/m", 1, 8, 30.0, 0.1, Some(1.0));
        odd.max_num_seqs = None;
        assert!(judge(&[odd])[0].is_stable);
    }
}
