//! `DiffusionRuns` (seed 002): an immutable collection of [`DiffusionRun`]s with the seed's
//! filters (task, model, GPU, GPU count, nickname, batch, precision, `where`) and groupings.

use std::ops::RangeBounds;

use super::RecordsError;
use super::collection::Collection;
use super::diffusion::{DIFFUSION_FIELDS, DiffusionRun};
use super::run::FieldValue;
use super::runs::Choices;

/// A collection of diffusion runs (cheap to clone and filter).
#[derive(Clone, Debug, Default)]
pub struct DiffusionRuns {
    runs: Collection<DiffusionRun>,
}

/// One group of [`DiffusionRuns::group_by`]: the key (one text per field) and its runs.
#[derive(Clone, Debug)]
pub struct DiffusionGroup {
    /// The fields' values, as text.
    pub key: Vec<String>,
    /// The runs with that key, in collection order.
    pub runs: DiffusionRuns,
}

/// Short names earlier versions accepted for diffusion fields (refused now, with the field).
pub const DIFFUSION_SHORT_NAMES: &[(&str, &str)] = &[
    ("batch", "batch_size"),
    ("gpu", "gpu_model"),
    ("model", "model_id"),
    ("precision", "weight_precision"),
    ("gpus", "num_gpus"),
    ("steps", "inference_steps"),
];

/// The diffusion field `name` names (checked), or an error naming the nearest.
pub fn resolve_diffusion_field(name: &str) -> Result<&str, RecordsError> {
    if let Some(e) = crate::runs::short_name_refused(name, DIFFUSION_SHORT_NAMES) {
        return Err(e);
    }
    if DIFFUSION_FIELDS.iter().any(|(n, _)| *n == name) {
        return Ok(name);
    }
    let nearest = DIFFUSION_FIELDS
        .iter()
        .map(|(n, _)| (strsim::jaro_winkler(n, name), *n))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map_or("task", |(_, n)| n);
    Err(RecordsError::Usage(format!(
        "unknown diffusion field {name:?} (did you mean {nearest:?}?)"
    )))
}

impl DiffusionRuns {
    /// A collection of `runs`, in the given order.
    pub fn new(runs: Vec<DiffusionRun>) -> Self {
        Self {
            runs: Collection::new(runs),
        }
    }

    /// Number of runs.
    pub fn len(&self) -> usize {
        self.runs.len()
    }

    /// True when there are no runs.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// The runs, in order.
    pub fn iter(&self) -> impl Iterator<Item = &DiffusionRun> + '_ {
        self.runs.iter()
    }

    /// The `i`-th run.
    pub fn get(&self, i: usize) -> Option<&DiffusionRun> {
        self.runs.get(i)
    }

    /// The runs at `positions`, in that order; positions past the end are skipped.
    pub fn pick(&self, positions: &[usize]) -> Self {
        Self {
            runs: self.runs.pick(positions),
        }
    }

    /// The runs for which `keep` is true (the seed's `where`).
    pub fn filter(&self, keep: impl Fn(&DiffusionRun) -> bool) -> Self {
        Self {
            runs: self.runs.filter(keep),
        }
    }

    /// Runs of these tasks (`text-to-image`, `text-to-video`).
    pub fn task(&self, t: impl Choices) -> Self {
        self.filter(|r| t.has(&r.task))
    }
    /// Runs of these model ids.
    pub fn model(&self, m: impl Choices) -> Self {
        self.filter(|r| m.has(&r.model_id))
    }
    /// Runs on these GPU models.
    pub fn gpu(&self, g: impl Choices) -> Self {
        self.filter(|r| g.has(&r.gpu_model))
    }
    /// Runs with these nicknames.
    pub fn nickname(&self, n: impl Choices) -> Self {
        self.filter(|r| n.has(&r.nickname))
    }
    /// Runs with these weight precisions.
    pub fn precision(&self, p: impl Choices) -> Self {
        self.filter(|r| p.has(&r.weight_precision))
    }
    /// Runs on exactly `n` GPUs.
    pub fn num_gpus(&self, n: i64) -> Self {
        self.filter(|r| r.num_gpus == n)
    }
    /// Runs whose GPU count is in `range`.
    pub fn num_gpus_range(&self, range: impl RangeBounds<i64>) -> Self {
        self.filter(|r| range.contains(&r.num_gpus))
    }
    /// Runs with batch size exactly `b`.
    pub fn batch(&self, b: i64) -> Self {
        self.filter(|r| r.batch_size == b)
    }
    /// Runs whose batch size is in `range`.
    pub fn batch_range(&self, range: impl RangeBounds<i64>) -> Self {
        self.filter(|r| range.contains(&r.batch_size))
    }

    /// Groups by one or more fields; groups in order of first appearance.
    pub fn group_by(&self, fields: &[&str]) -> Result<Vec<DiffusionGroup>, RecordsError> {
        let fields: Vec<&str> = fields
            .iter()
            .map(|f| resolve_diffusion_field(f))
            .collect::<Result<_, _>>()?;
        Ok(self
            .runs
            .group_by_key(|r| {
                fields
                    .iter()
                    .map(|f| r.field(f).map(|v| v.display()).unwrap_or_default())
                    .collect::<Vec<String>>()
            })
            .into_iter()
            .map(|(key, runs)| DiffusionGroup {
                key,
                runs: DiffusionRuns { runs },
            })
            .collect())
    }

    /// One field's values, in order (the seed's `data.<field>`).
    pub fn column(&self, name: &str) -> Result<Vec<FieldValue<'_>>, RecordsError> {
        let f = resolve_diffusion_field(name)?;
        Ok(self
            .iter()
            .map(|r| r.field(f).unwrap_or(FieldValue::Null))
            .collect())
    }

    /// The runs as JSON objects, every field (the seed's `to_dataframe`, one row per run).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::Value::Array(
            self.iter()
                .map(|r| {
                    serde_json::Value::Object(
                        DIFFUSION_FIELDS
                            .iter()
                            .map(|(n, _)| {
                                let v = r.field(n).map_or(serde_json::Value::Null, |v| v.to_json());
                                ((*n).to_string(), v)
                            })
                            .collect(),
                    )
                })
                .collect(),
        )
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn run(task: &str, nick: &str, gpus: i64, batch: i64) -> DiffusionRun {
        DiffusionRun {
            domain: "diffusion".into(),
            task: task.into(),
            model_id: format!("org/{nick}"),
            nickname: nick.into(),
            total_params_billions: 12.0,
            activated_params_billions: 12.0,
            weight_precision: "bfloat16".into(),
            gpu_model: "H100".into(),
            num_gpus: gpus,
            batch_size: batch,
            inference_steps: Some(28),
            height: 1024,
            width: 1024,
            num_frames: None,
            fps: None,
            ulysses_degree: None,
            ring_degree: None,
            use_torch_compile: None,
            batch_latency_s: 2.0,
            avg_power_watts: 500.0,
            energy_per_generation_joules: 250.0 / batch as f64,
            throughput_generations_per_sec: batch as f64 / 2.0,
            results_path: String::new(),
        }
    }

    #[test]
    fn the_seed_filters_and_groupings() {
        let runs = DiffusionRuns::new(vec![
            run("text-to-image", "flux", 1, 1),
            run("text-to-image", "flux", 2, 4),
            run("text-to-video", "wan", 4, 1),
        ]);
        assert_eq!(runs.task("text-to-image").len(), 2);
        assert_eq!(runs.num_gpus_range(2..).len(), 2);
        assert_eq!(runs.batch(4).nickname("flux").len(), 1);
        assert_eq!(runs.model(["org/wan", "org/x"]).len(), 1);
        let g = runs.group_by(&["nickname"]).unwrap();
        assert_eq!((g[0].key[0].as_str(), g[0].runs.len()), ("flux", 2));
        let e = runs.column("energy_per_generation_joules").unwrap();
        assert_eq!(e[1].as_f64(), Some(62.5));
        assert!(
            runs.group_by(&["nickame"])
                .unwrap_err()
                .to_string()
                .contains("nickname")
        );
        assert_eq!(runs.to_json()[2]["task"], "text-to-video");
    }
}
