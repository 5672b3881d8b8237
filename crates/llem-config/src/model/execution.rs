//! `study_execution:` — cycles, order, pacing and robustness limits of a study.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::names::ExperimentOrder;

/// `study_execution:` as written; unset fields are filled by [`StudyExecution`] resolution
/// (command line > YAML > user config > defaults).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct StudyExecutionConfig {
    /// Times the whole list of configurations is run (default: 3 for studies, 1 for a
    /// single experiment).
    #[schemars(range(min = 1))]
    pub n_cycles: Option<u32>,
    /// sequential, interleave, shuffle, reverse, latin_square (default: shuffle for studies).
    pub experiment_order: Option<ExperimentOrder>,
    /// Seed of the shuffle order (null = derived from study_design_hash).
    pub shuffle_seed: Option<i64>,
    /// Pause between experiments in seconds (default: user config, else 60; at most a day).
    #[schemars(range(min = 0.0, max = 86400.0))]
    pub experiment_gap_seconds: Option<f64>,
    /// Pause between cycles in seconds (default: user config, else 300; at most a day).
    #[schemars(range(min = 0.0, max = 86400.0))]
    pub cycle_gap_seconds: Option<f64>,
    /// Circuit breaker: stop after this many failures in a row (0 = off, 1 = fail fast;
    /// default 10).
    pub max_consecutive_failures: Option<u32>,
    /// Pause before the circuit breaker's probe experiment, in seconds (default 60; at most a
    /// day).
    #[schemars(range(min = 0.0, max = 86400.0))]
    pub circuit_breaker_cooldown_seconds: Option<f64>,
    /// Hard limit for the whole study in hours (null = none; at most a year).
    #[schemars(extend("exclusiveMinimum" = 0), range(max = 8760.0))]
    pub wall_clock_timeout_hours: Option<f64>,
    /// Per-experiment limit in seconds; the cell is killed past it (default 600, or 1800
    /// when a cell launches a server: its 1200 s readiness wait comes first; at most 30 days).
    #[schemars(extend("exclusiveMinimum" = 0), range(max = 2592000.0))]
    pub experiment_timeout_seconds: Option<f64>,
    /// Run configurations with equal measurement_config_hash once (default true).
    pub deduplicate_equivalent: Option<bool>,
    /// Where the cells run: `local` (child processes on this host, the default), or
    /// `{slurm: {partition, gres, time, account, max_parallel, extra}}` (a job array on a
    /// Slurm cluster; docs/cluster.md).
    pub executor: Option<ExecutorConfig>,
    /// Slurm studies: measure the study's first configuration once on each node, before that
    /// node's first cell, so node-to-node differences are measurable (default false).
    pub node_control: Option<bool>,
}

/// `study_execution.executor`: `local`, `slurm`, or `{slurm: {...}}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ExecutorConfig {
    /// Child processes on this host, one cell at a time.
    #[default]
    Local,
    /// One Slurm job array per cycle on an existing cluster.
    Slurm(SlurmConfig),
}

/// `study_execution.executor.slurm`: what `sbatch` is given (the command line's `--partition`,
/// `--gres`, ... override each field).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct SlurmConfig {
    /// `sbatch --partition` (null = the cluster's default partition).
    pub partition: Option<String>,
    /// `sbatch --gres` per cell, e.g. `gpu:1` (null = none).
    pub gres: Option<String>,
    /// `sbatch --time` per cell: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS (null =
    /// the partition's limit).
    pub time: Option<String>,
    /// `sbatch --account` (null = the user's default account).
    pub account: Option<String>,
    /// Cells running at once, the `%M` of `--array=0-N%M` (null = as many as Slurm allows).
    #[schemars(range(min = 1))]
    pub max_parallel: Option<u32>,
    /// Further `sbatch` arguments, passed as written (e.g. `--constraint=h100`, `--qos=high`).
    pub extra: Vec<String>,
}

impl<'de> Deserialize<'de> for ExecutorConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = ExecutorConfig;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("`local`, `slurm`, or a mapping `{slurm: {partition: ..., gres: ...}}`")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ExecutorConfig, E> {
                match v {
                    "local" => Ok(ExecutorConfig::Local),
                    "slurm" => Ok(ExecutorConfig::Slurm(SlurmConfig::default())),
                    _ => Err(E::unknown_variant(v, &["local", "slurm"])),
                }
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<ExecutorConfig, A::Error> {
                let Some(key) = m.next_key::<String>()? else {
                    return Err(serde::de::Error::invalid_length(0, &self));
                };
                let out = match key.as_str() {
                    "slurm" => ExecutorConfig::Slurm(
                        m.next_value::<Option<SlurmConfig>>()?.unwrap_or_default(),
                    ),
                    "local" => {
                        m.next_value::<serde::de::IgnoredAny>()?;
                        ExecutorConfig::Local
                    }
                    other => return Err(serde::de::Error::unknown_field(other, &["slurm"])),
                };
                if let Some(k) = m.next_key::<String>()? {
                    return Err(serde::de::Error::custom(format!(
                        "one executor only; `{k}` is a second one"
                    )));
                }
                Ok(out)
            }
        }
        d.deserialize_any(V)
    }
}

/// Seconds in a Slurm `--time` value (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS);
/// `UNLIMITED`/`INFINITE` is `None`.
pub fn slurm_time_seconds(s: &str) -> Result<Option<u64>, crate::error::ValueError> {
    use crate::error::{ValueError, ValueKind};
    let t = s.trim();
    if t.eq_ignore_ascii_case("unlimited") || t.eq_ignore_ascii_case("infinite") {
        return Ok(None);
    }
    let bad = || {
        ValueError::new(
            ValueKind::SlurmTime,
            s,
            format!(
                "`{s}` is not a Slurm time (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS)"
            ),
        )
    };
    let num = |p: &str| -> Result<u64, ValueError> {
        if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) || p.len() > 6 {
            return Err(bad());
        }
        p.parse::<u64>().map_err(|_| bad())
    };
    let (days, rest) = match t.split_once('-') {
        Some((d, r)) => (Some(num(d)?), r),
        None => (None, t),
    };
    let parts: Vec<u64> = rest.split(':').map(num).collect::<Result<_, _>>()?;
    let secs = match (days, parts.as_slice()) {
        (None, [m]) => m * 60,
        (None, [m, s]) => m * 60 + s,
        (None, [h, m, s]) => h * 3600 + m * 60 + s,
        (Some(d), [h]) => d * 86400 + h * 3600,
        (Some(d), [h, m]) => d * 86400 + h * 3600 + m * 60,
        (Some(d), [h, m, s]) => d * 86400 + h * 3600 + m * 60 + s,
        _ => return Err(bad()),
    };
    if secs == 0 {
        return Err(ValueError::new(
            ValueKind::SlurmTime,
            s,
            format!("`{s}` is no time at all; give the limit of one cell"),
        ));
    }
    Ok(Some(secs))
}

/// Resolved execution settings: every value concrete.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StudyExecution {
    /// Cycles.
    pub n_cycles: u32,
    /// Order across cycles.
    pub experiment_order: ExperimentOrder,
    /// Shuffle seed as configured (null = derived from the design hash).
    pub shuffle_seed: Option<i64>,
    /// Pause between experiments, seconds.
    pub experiment_gap_seconds: f64,
    /// Pause between cycles, seconds.
    pub cycle_gap_seconds: f64,
    /// Circuit breaker threshold.
    pub max_consecutive_failures: u32,
    /// Circuit breaker cooldown, seconds.
    pub circuit_breaker_cooldown_seconds: f64,
    /// Study wall-clock limit, hours.
    pub wall_clock_timeout_hours: Option<f64>,
    /// Per-experiment limit, seconds.
    pub experiment_timeout_seconds: f64,
    /// How the per-experiment limit was derived when it was not written (plans that launch
    /// a server add its readiness wait), for the plan to say.
    #[serde(skip)]
    pub experiment_timeout_derivation: Option<String>,
    /// Deduplicate equivalent configurations.
    pub deduplicate_equivalent: bool,
    /// Where the cells run.
    pub executor: ExecutorConfig,
    /// A control cell per node (Slurm).
    pub node_control: bool,
}

/// How long llem waits for a server it launched to become healthy, s: a cold vLLM start
/// downloads, loads and compiles for many minutes. The serving engines use this value.
pub const SERVER_READY_TIMEOUT_S: f64 = 1200.0;
/// Built-in per-experiment limit beyond any server start, s.
pub const DEFAULT_EXPERIMENT_TIMEOUT_S: f64 = 600.0;

/// Built-in pause between experiments when neither YAML nor user config sets one.
pub const DEFAULT_EXPERIMENT_GAP_SECONDS: f64 = 60.0;
/// Built-in pause between cycles when neither YAML nor user config sets one.
pub const DEFAULT_CYCLE_GAP_SECONDS: f64 = 300.0;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn slurm_times_in_every_form_sbatch_takes() {
        let t = |s| slurm_time_seconds(s);
        assert_eq!(t("90"), Ok(Some(5400)));
        assert_eq!(t("1:30"), Ok(Some(90)));
        assert_eq!(t("02:00:00"), Ok(Some(7200)));
        assert_eq!(t("1-2"), Ok(Some(93600)));
        assert_eq!(t("1-02:30"), Ok(Some(95400)));
        assert_eq!(t("1-00:00:10"), Ok(Some(86410)));
        assert_eq!(t("UNLIMITED"), Ok(None));
        for bad in [
            "",
            "2h",
            "1:2:3:4",
            "-1",
            "1-",
            "0",
            "00:00",
            "1-2:3:4:5",
            " : ",
        ] {
            assert!(t(bad).is_err(), "{bad}");
        }
    }
}
