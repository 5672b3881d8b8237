//! A search study's planner: the study's configurations become the search's candidates, each
//! finished cell one of its measurements, and each of its proposals a new manifest entry. After
//! every cell the search's state is written to `search.json` (atomically), so a study killed at
//! any point resumes the same search: the proposals are a function of the seed and the
//! measurements in the manifest's order.

use std::collections::HashMap;
use std::path::Path;

use llem_config::plan::PlannedConfig;
use llem_config::search::SearchSpec;
use llem_config::{ExperimentConfig, StudyPlan};
use llem_results::{CellStatus, ExperimentResult, Manifest, figures};
use llem_search::{Goal, Next, Observation, Search, Settings, Space, Status, Step, StopReason};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::prepare::{pending_entry, read_result};
use crate::StudyError;

/// `search.json` in the study directory.
pub const SEARCH_FILE: &str = "search.json";
/// Its schema version.
pub const SEARCH_SCHEMA_VERSION: &str = "1.0";

/// Keys of a configuration that say what it is called or where it writes, not what it
/// measures: never axes of the search.
const NOT_AXES: &[&str] = &["name", "output_dir", "label"];

/// The configuration's leaves as `(dotted.path, value)`; lists are single values.
fn leaves(prefix: &str, v: &Value, out: &mut Vec<(String, Value)>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if prefix.is_empty() && NOT_AXES.contains(&k.as_str()) {
                    continue;
                }
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                leaves(&path, x, out);
            }
        }
        other => out.push((prefix.to_string(), other.clone())),
    }
}

/// What a search needs of its plan. Saved beside a Slurm study, so that the job that picks
/// the next batch needs neither the study file nor the command line it was planned with.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SearchDesign {
    /// The `search:` block.
    pub spec: SearchSpec,
    /// `n_cycles`: how often the winner and the runner-up are measured in the end.
    pub n_cycles: u32,
    /// Runs of the full grid, for the runs saved.
    pub grid_runs: usize,
    /// The candidates, in plan order.
    pub configs: Vec<SearchConfig>,
}

/// One candidate of a saved search.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SearchConfig {
    /// The resolved configuration.
    pub config: ExperimentConfig,
    /// Its `measurement_config_hash`, checked against the configuration when read back.
    pub config_hash: String,
    /// Its label.
    pub label: String,
    /// Its plan warnings.
    pub warnings: Vec<String>,
}

impl SearchDesign {
    /// The search of `plan`, or `None` when it has no `search:` block.
    pub fn of(plan: &StudyPlan) -> Option<SearchDesign> {
        Some(SearchDesign {
            spec: plan.search.clone()?,
            n_cycles: plan.execution.n_cycles,
            grid_runs: plan.runs.len(),
            configs: plan
                .configs
                .iter()
                .map(|pc| SearchConfig {
                    config: pc.config.clone(),
                    config_hash: pc.digest.short(),
                    label: pc.label.clone(),
                    warnings: pc.warnings.clone(),
                })
                .collect(),
        })
    }

    /// The planned configurations again; an error when a configuration no longer hashes to
    /// the hash it was saved with (the file was edited, or llem's hashing changed under it).
    fn planned(&self) -> Result<Vec<PlannedConfig>, StudyError> {
        self.configs
            .iter()
            .map(|c| {
                let digest = llem_config::digest_of(&c.config);
                if digest.short() != c.config_hash {
                    return Err(StudyError::Refused(format!(
                        "the saved search's configuration {} now hashes to {}; it cannot be \
                         continued with this llem",
                        c.config_hash,
                        digest.short()
                    )));
                }
                Ok(PlannedConfig {
                    config: c.config.clone(),
                    digest,
                    label: c.label.clone(),
                    warnings: c.warnings.clone(),
                    engine_inferred: None,
                    memory: None,
                })
            })
            .collect()
    }
}

/// The measurements in a manifest, in its order.
struct Measured {
    /// One per finished cell.
    observations: Vec<Observation>,
    /// The manifest position of each.
    entries: Vec<usize>,
    /// Candidates of the cells not finished yet.
    pending: Vec<usize>,
}

/// The search of a plan with a `search:` block.
pub(crate) struct SearchPlanner {
    spec: SearchSpec,
    configs: Vec<PlannedConfig>,
    grid_runs: usize,
    search: Search,
    /// Candidate index → configuration hash (the plan's configurations, in order).
    hashes: Vec<String>,
    /// Each candidate's value on each axis, as its configuration writes it.
    axis_values: Vec<Map<String, Value>>,
    /// Observations read so far, by manifest index.
    seen: HashMap<usize, Observation>,
    /// GPUs a cell holds, for the GPU-hours saved.
    gpus: usize,
    /// Why it stopped, once it has.
    pub(crate) stopped: Option<StopReason>,
}

impl SearchPlanner {
    /// The planner of `plan`, or `None` when it has no `search:` block.
    pub(crate) fn of(plan: &StudyPlan, gpus: usize) -> Option<SearchPlanner> {
        let spec = plan.search.clone()?;
        Some(SearchPlanner::new(
            spec,
            plan.configs.clone(),
            plan.runs.len(),
            plan.execution.n_cycles,
            gpus,
        ))
    }

    /// The planner of a saved search.
    pub(crate) fn of_design(
        design: &SearchDesign,
        gpus: usize,
    ) -> Result<SearchPlanner, StudyError> {
        Ok(SearchPlanner::new(
            design.spec.clone(),
            design.planned()?,
            design.grid_runs,
            design.n_cycles,
            gpus,
        ))
    }

    fn new(
        spec: SearchSpec,
        configs: Vec<PlannedConfig>,
        grid_runs: usize,
        n_cycles: u32,
        gpus: usize,
    ) -> SearchPlanner {
        let candidates: Vec<Vec<(String, Value)>> = configs
            .iter()
            .map(|pc| {
                let mut out = Vec::new();
                leaves(
                    "",
                    &serde_json::to_value(&pc.config).unwrap_or_default(),
                    &mut out,
                );
                out
            })
            .collect();
        let settings = Settings {
            budget_runs: spec.budget.runs(grid_runs),
            n_cycles: n_cycles.max(1),
            batch: spec.batch,
            seed: spec.seed,
        };
        let space = Space::new(&candidates);
        let axis_values = candidates
            .iter()
            .map(|leaves| {
                space
                    .axes
                    .iter()
                    .map(|a| {
                        let v = leaves
                            .iter()
                            .find(|(k, _)| *k == a.name)
                            .map_or(Value::Null, |(_, v)| v.clone());
                        (a.name.clone(), v)
                    })
                    .collect()
            })
            .collect();
        let goal = Goal::from_spec(&spec);
        SearchPlanner {
            hashes: configs.iter().map(|c| c.digest.short()).collect(),
            search: Search::new(space, goal, settings),
            spec,
            configs,
            grid_runs,
            axis_values,
            seen: HashMap::new(),
            gpus,
            stopped: None,
        }
    }

    /// The candidates' configurations.
    pub(crate) fn configs(&self) -> &[PlannedConfig] {
        &self.configs
    }

    /// The measurements in the manifest, in its order: a completed cell's figures, a failed
    /// cell as a failure; cells not finished are not measurements.
    fn observations(&mut self, manifest: &Manifest, dir: &Path) -> Measured {
        let mut m = Measured {
            observations: Vec::new(),
            entries: Vec::new(),
            pending: Vec::new(),
        };
        for (pos, e) in manifest.experiments.iter().enumerate() {
            let Some(candidate) = self.hashes.iter().position(|h| *h == e.config_hash) else {
                continue;
            };
            let o = match e.status {
                CellStatus::Completed => match self.seen.get(&e.index) {
                    Some(o) => o.clone(),
                    None => {
                        let o = match e
                            .result_file
                            .as_ref()
                            .and_then(|f| read_result(&dir.join(f)))
                        {
                            Some(r) => self.observe(candidate, &r),
                            None => Observation::failed(candidate),
                        };
                        self.seen.insert(e.index, o.clone());
                        o
                    }
                },
                CellStatus::Failed => Observation::failed(candidate),
                _ => {
                    m.pending.push(candidate);
                    continue;
                }
            };
            m.observations.push(o);
            m.entries.push(pos);
        }
        m
    }

    fn observe(&self, candidate: usize, r: &ExperimentResult) -> Observation {
        Observation {
            candidate,
            figures: self
                .search
                .goal
                .figures
                .iter()
                .map(|f| figures::value(r, f))
                .collect(),
            own_sd: self
                .search
                .goal
                .figures
                .iter()
                .map(|f| figures::own_sd(r, f))
                .collect(),
        }
    }

    /// Appends the search's next proposals to `manifest`; false when the search is over (or
    /// waits for cells still pending). Writes `search.json` either way.
    pub(crate) fn extend(&mut self, manifest: &mut Manifest, dir: &Path) -> bool {
        let measured = self.observations(manifest, dir);
        let step = self.search.step(&measured.observations, &measured.pending);
        let mut added = false;
        match &step.next {
            Next::Measure(cands) => {
                for &c in cands {
                    let (Some(pc), Some(hash)) = (self.configs.get(c), self.hashes.get(c)) else {
                        continue;
                    };
                    let cycle = manifest
                        .experiments
                        .iter()
                        .filter(|e| e.config_hash == *hash)
                        .count() as u32
                        + 1;
                    let index = manifest.experiments.len();
                    manifest.experiments.push(pending_entry(pc, index, cycle));
                    added = true;
                }
            }
            Next::Done(reason) => self.stopped = Some(*reason),
        }
        manifest.recount();
        self.write(dir, manifest, &measured, &step);
        added
    }

    /// Writes `search.json`; a failed write is warned about, as a manifest checkpoint is.
    fn write(&self, dir: &Path, manifest: &Manifest, measured: &Measured, step: &Step) {
        let doc = self.document(manifest, measured, step);
        if let Err(e) = llem_results::write_json_atomic(&dir.join(SEARCH_FILE), &doc) {
            tracing::warn!("cannot write {SEARCH_FILE}: {e}");
        }
    }

    fn label(&self, c: usize) -> String {
        self.configs.get(c).map(super::label_of).unwrap_or_default()
    }

    /// What `search.json` holds.
    fn document(
        &self,
        manifest: &Manifest,
        measured: &Measured,
        step: &Step,
    ) -> SearchDocument<'_> {
        let goal = &self.search.goal;
        let obs = &measured.observations;
        let grid_runs = self.grid_runs;
        let candidates = step
            .judgements
            .iter()
            .map(|j| {
                let values = self
                    .axis_values
                    .get(j.candidate)
                    .cloned()
                    .unwrap_or_default();
                CandidateView {
                    index: j.candidate,
                    config_hash: self.hashes.get(j.candidate).cloned().unwrap_or_default(),
                    label: self.label(j.candidate),
                    values,
                    runs: j.runs,
                    status: j.status,
                    p_feasible: j.p_feasible,
                    predicted: goal
                        .figures
                        .iter()
                        .zip(&j.figures)
                        .map(|(f, e)| (f.clone(), *e))
                        .collect(),
                }
            })
            .collect::<Vec<_>>();
        let evaluations = measured
            .entries
            .iter()
            .filter_map(|&pos| manifest.experiments.get(pos))
            .zip(obs)
            .map(|(e, o)| EvaluationView {
                entry: e.index,
                candidate: o.candidate,
                cell_dir: e.cell_dir.clone(),
                status: e.status.as_str(),
                figures: goal
                    .figures
                    .iter()
                    .enumerate()
                    .map(|(i, f)| (f.clone(), o.figures.get(i).copied().flatten()))
                    .collect(),
                own_sd: goal
                    .figures
                    .iter()
                    .enumerate()
                    .map(|(i, f)| (f.clone(), o.own_sd.get(i).copied().flatten()))
                    .collect(),
            })
            .collect::<Vec<_>>();
        let runs_used = obs.len();
        let mean_cell_s = {
            let t: Vec<f64> = manifest
                .experiments
                .iter()
                .filter_map(|e| e.elapsed_seconds)
                .collect();
            (!t.is_empty()).then(|| t.iter().sum::<f64>() / t.len() as f64)
        };
        let gpus = self.gpus;
        let saved = grid_runs.saturating_sub(runs_used);
        SearchDocument {
            schema_version: SEARCH_SCHEMA_VERSION,
            spec: &self.spec,
            budget_runs: self.search.settings.budget_runs,
            grid_configurations: self.configs.len(),
            grid_runs,
            axes: &self.search.space.axes,
            phase: step.phase,
            stop_reason: self.stopped,
            answer: step.incumbent.map(|w| self.answer(w, step, obs)),
            runner_up: step.runner_up.map(|c| self.answer(c, step, obs)),
            feasible: step
                .judgements
                .iter()
                .filter(|j| j.runs > 0 && j.p_feasible >= goal.confidence)
                .map(|j| j.candidate)
                .collect(),
            pareto: pareto(&candidates, goal),
            runs_used,
            runs_saved: saved,
            hours_saved_estimate: mean_cell_s.map(|s| s * saved as f64 / 3600.0),
            gpu_hours_saved_estimate: mean_cell_s
                .filter(|_| gpus > 0)
                .map(|s| s * saved as f64 * gpus as f64 / 3600.0),
            candidates,
            evaluations,
        }
    }

    /// Candidate `c` as an answer: its measured objective with the interval of its runs.
    fn answer(&self, c: usize, step: &Step, obs: &[Observation]) -> AnswerView {
        let values: Vec<f64> = obs
            .iter()
            .filter(|o| o.candidate == c)
            .filter_map(|o| o.figures.first().copied().flatten())
            .collect();
        let mean = llem_results::stats::mean(&values);
        let bounds = llem_results::stats::spread(&values).bounds();
        let j = step.judgements.get(c);
        AnswerView {
            candidate: c,
            config_hash: self.hashes.get(c).cloned().unwrap_or_default(),
            label: self.label(c),
            runs: values.len(),
            objective_mean: mean,
            objective_low: bounds.map(|b| b.0),
            objective_high: bounds.map(|b| b.1),
            interval_rule: llem_results::stats::SPREAD_RULE,
            p_feasible: j.map(|j| j.p_feasible),
            identified: step.identified && step.incumbent == Some(c),
        }
    }
}

/// The measured candidates no other beats on both the objective and the first constraint's
/// figure (the energy–latency frontier when the constraint is a latency), by predicted means.
fn pareto(cands: &[CandidateView], goal: &Goal) -> Vec<usize> {
    let Some(second) = goal.figures.get(1) else {
        return Vec::new();
    };
    let sign = |i: usize| -> f64 {
        match (i, goal.direction, goal.limits.first().map(|l| l.bound)) {
            (0, llem_config::search::Direction::Maximize, _) => -1.0,
            (1, _, Some(llem_config::search::Bound::AtLeast)) => -1.0,
            _ => 1.0,
        }
    };
    let point = |c: &CandidateView| -> Option<(f64, f64)> {
        let a = c.predicted.get(goal.figures.first()?)?.mean * sign(0);
        let b = c.predicted.get(second)?.mean * sign(1);
        Some((a, b))
    };
    let measured: Vec<(usize, (f64, f64))> = cands
        .iter()
        .filter(|c| c.runs > 0 && c.status != Status::Failed)
        .filter_map(|c| point(c).map(|p| (c.index, p)))
        .collect();
    let mut front: Vec<usize> = measured
        .iter()
        .filter(|(_, (a, b))| {
            !measured
                .iter()
                .any(|(_, (x, y))| x <= a && y <= b && (x < a || y < b))
        })
        .map(|(i, _)| *i)
        .collect();
    front.sort_unstable();
    front
}

#[derive(Serialize)]
struct SearchDocument<'a> {
    schema_version: &'static str,
    spec: &'a SearchSpec,
    budget_runs: u32,
    grid_configurations: usize,
    grid_runs: usize,
    axes: &'a [llem_search::Axis],
    phase: &'static str,
    stop_reason: Option<StopReason>,
    answer: Option<AnswerView>,
    runner_up: Option<AnswerView>,
    feasible: Vec<usize>,
    pareto: Vec<usize>,
    runs_used: usize,
    runs_saved: usize,
    hours_saved_estimate: Option<f64>,
    gpu_hours_saved_estimate: Option<f64>,
    candidates: Vec<CandidateView>,
    evaluations: Vec<EvaluationView>,
}

#[derive(Serialize)]
struct CandidateView {
    index: usize,
    config_hash: String,
    label: String,
    values: Map<String, Value>,
    runs: u32,
    status: Status,
    p_feasible: f64,
    predicted: std::collections::BTreeMap<String, llem_search::Estimate>,
}

#[derive(Serialize)]
struct EvaluationView {
    entry: usize,
    candidate: usize,
    cell_dir: String,
    status: &'static str,
    figures: std::collections::BTreeMap<String, Option<f64>>,
    own_sd: std::collections::BTreeMap<String, Option<f64>>,
}

#[derive(Serialize)]
struct AnswerView {
    candidate: usize,
    config_hash: String,
    label: String,
    runs: usize,
    objective_mean: Option<f64>,
    objective_low: Option<f64>,
    objective_high: Option<f64>,
    interval_rule: &'static str,
    p_feasible: Option<f64>,
    identified: bool,
}
