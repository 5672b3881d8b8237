//! From a configuration file (or command-line options alone) to a [`StudyPlan`]: every
//! configuration typed, validated, hashed, deduplicated and put in execution order.
//!
//! Precedence of values, highest first: command line > YAML (explicit entry > sweep value >
//! study fields > `base:` > `_extends` parents) > `LLEM_*` variables > user config file >
//! built-in defaults.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use crate::canonical::{CanonicalWriter, ConfigDigest, design_digest};
use crate::error::{ConfigError, Diagnostic, ErrorKind, did_you_mean};
use crate::load::{EXTENDS_KEY, Loader};
use crate::model::{
    Engine, ExperimentConfig, ExperimentOrder, Preset, RunnerSpec, StudyExecution,
    StudyExecutionConfig, execution,
};
use crate::order::{execution_order, williams_row_count};
use crate::schema::{Violation, experiment_rules, study_execution_rules};
use crate::source::{SourceKind, SourceMap, Span};
use crate::sweep::{self, OnPoint, Point};
use crate::user_config::{Env, UserConfig, UserSettings};
use crate::yaml::{Map, Node, deep_merge};

/// Keys that belong to a study file rather than to its experiments.
pub const STUDY_KEYS: &[&str] = &[
    "sweep",
    "experiments",
    "study_execution",
    "base",
    "name",
    "schedule",
    "search",
];

/// Keys stripped from a `base:` file (seed 003), plus `images` which is environment like
/// `runners`.
const BASE_STRIPPED: &[&str] = &[
    "sweep",
    "experiments",
    "study_execution",
    "base",
    "name",
    "schedule",
    "search",
    "runners",
    "images",
];

/// Values given on the command line; they override the YAML for every configuration.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// `-m/--model`.
    pub model: Option<String>,
    /// `-e/--engine`.
    pub engine: Option<Engine>,
    /// `-n/--n-prompts`.
    pub n_prompts: Option<u32>,
    /// `-o/--output`.
    pub output_dir: Option<String>,
    /// `--cycles`.
    pub cycles: Option<u32>,
    /// `--order`.
    pub order: Option<ExperimentOrder>,
}

/// What to plan.
#[derive(Clone, Debug)]
pub struct PlanRequest<'a> {
    /// The experiment or study file; `None` plans a single experiment from overrides alone.
    pub config: Option<&'a Path>,
    /// Where the file's relative paths (`base:`, `_extends`) resolve when not beside it: a
    /// file written out for a caller (Python's dict), whose paths are the caller's.
    pub config_dir: Option<&'a Path>,
    /// Command-line values.
    pub overrides: Overrides,
    /// False for `--no-dedup`.
    pub dedup: bool,
    /// Environment (user config location, `LLEM_*`).
    pub env: &'a Env,
}

/// Whether the file was a single experiment or a study.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanKind {
    /// No `sweep:` or `experiments:`.
    Experiment,
    /// `sweep:` and/or `experiments:`.
    Study,
}

/// A valid, unique configuration.
#[derive(Clone, Debug)]
pub struct PlannedConfig {
    /// The resolved configuration.
    pub config: ExperimentConfig,
    /// Its digest (`measurement_config_hash` is the short form).
    pub digest: ConfigDigest,
    /// What distinguishes it within the study.
    pub label: String,
    /// Settings that will not act as written.
    pub warnings: Vec<String>,
    /// Why the engine is what it is, when the configuration does not name one.
    /// Shared between the configurations that give the same reason.
    pub engine_inferred: Option<std::sync::Arc<str>>,
    /// Device memory it is estimated to need, filled for `--dry-run` by the binary (which
    /// knows the engines); `None` until then. Shared: a sweep of 100 000 configurations has a
    /// handful of distinct estimates.
    pub memory: Option<std::sync::Arc<MemoryView>>,
}

/// A configuration's estimated device memory, or why there is none.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MemoryView {
    /// Weights plus KV cache, GiB; null when it cannot be estimated.
    pub total_gib: Option<f64>,
    /// Weights, GiB.
    pub weights_gib: Option<f64>,
    /// KV cache at the configured batch and lengths, GiB.
    pub kv_cache_gib: Option<f64>,
    /// Tokens the KV cache holds.
    pub kv_tokens: Option<u64>,
    /// What the estimate rests on, or why there is none.
    pub basis: String,
}

/// One run: a configuration in a cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlannedRun {
    /// 1-based position in execution order.
    pub index: usize,
    /// Cycle, from 0.
    pub cycle: u32,
    /// Index into [`StudyPlan::configs`].
    pub config: usize,
}

/// A grid point that failed validation.
#[derive(Clone, Debug, Serialize)]
pub struct SkippedPoint {
    /// What distinguishes it.
    pub label: String,
    /// The merged configuration as written (before typing).
    pub config: Value,
    /// One line per problem, with location.
    pub reason: String,
    /// The problems.
    pub errors: Vec<Diagnostic>,
}

/// A configuration dropped because an earlier one has the same hash.
#[derive(Clone, Debug, Serialize)]
pub struct Duplicate {
    /// What distinguishes it.
    pub label: String,
    /// Its hash (equal to the kept one's).
    pub config_hash: String,
    /// Index (from 0) of the configuration that is kept.
    pub duplicate_of: usize,
}

/// Everything `llem run` needs to execute a study, in order.
#[derive(Clone, Debug)]
pub struct StudyPlan {
    /// Experiment or study.
    pub kind: PlanKind,
    /// Name used for the results directory.
    pub study_name: String,
    /// The file planned, if any.
    pub source: Option<PathBuf>,
    /// Digest of the ordered configuration list.
    pub design: ConfigDigest,
    /// Resolved execution settings.
    pub execution: StudyExecution,
    /// The seed actually used for `shuffle`.
    pub shuffle_seed: Option<u64>,
    /// Results directory.
    pub output_dir: String,
    /// Unique valid configurations, in expansion order.
    pub configs: Vec<PlannedConfig>,
    /// Runs in execution order.
    pub runs: Vec<PlannedRun>,
    /// Grid points skipped with reasons.
    pub skipped: Vec<SkippedPoint>,
    /// Configurations dropped as duplicates.
    pub duplicates: Vec<Duplicate>,
    /// Plan-level warnings (each configuration's warnings summarised).
    pub warnings: Vec<String>,
    /// The file's enabled `schedule:` block: the study is to run again and again.
    pub schedule: Option<crate::schedule::ScheduleSpec>,
    /// The file's `search:` block: the study looks for the best configuration of its grid
    /// under constraints instead of measuring every one (`runs` is then the grid, unrun).
    pub search: Option<crate::search::SearchSpec>,
    /// The YAML dialect the file is written in.
    pub dialect: crate::dialect07::Dialect,
    /// The user config the plan was made with (`LLEM_*` variables applied): the cells run
    /// with the same one, read once.
    pub user: UserConfig,
}

impl StudyPlan {
    /// `study_design_hash`.
    pub fn study_design_hash(&self) -> String {
        self.design.short()
    }
}

struct CliNodes {
    model: Option<Node>,
    engine: Option<Node>,
    n_prompts: Option<Node>,
    output_dir: Option<Node>,
}

impl CliNodes {
    fn new(o: &Overrides, sources: &mut SourceMap) -> CliNodes {
        let mut mk = |flag: &str, text: Option<String>, quoted: bool| {
            text.map(|t| {
                let span = Span::whole(sources.add_synthetic(flag, SourceKind::CommandLine));
                if quoted {
                    Node::string(&t, span)
                } else {
                    Node::plain(&t, span)
                }
            })
        };
        CliNodes {
            model: mk("--model", o.model.clone(), true),
            engine: mk("--engine", o.engine.map(|e| e.as_str().to_string()), false),
            n_prompts: mk("--n-prompts", o.n_prompts.map(|n| n.to_string()), false),
            output_dir: mk("--output", o.output_dir.clone(), true),
        }
    }
}

enum Outcome {
    Valid(Box<PlannedConfig>),
    Skipped(SkippedPoint),
}

fn set(tree: &mut Node, path: &[&str], node: &Node) {
    // Paths here are fixed top-level keys, which are mappings or absent after decoding
    // checks; a conflict simply leaves the tree for the decoder to report.
    let _ = tree.set_path(path, node.clone());
}

fn missing(tree: &Node, path: &[&str]) -> bool {
    tree.get_path(path).is_none()
}

/// Applies command line, user defaults and presets, then types, resolves, validates and
/// hashes one point.
fn finish(
    point: Point,
    cli: &CliNodes,
    user: &UserSettings,
    sources: &SourceMap,
    writer: &mut CanonicalWriter,
) -> Result<Outcome, ConfigError> {
    let Point {
        mut tree, label, ..
    } = point;
    if let Some(n) = &cli.model {
        set(&mut tree, &["model"], n);
    }
    if let Some(n) = &cli.engine {
        set(&mut tree, &["engine"], n);
    }
    if let Some(n) = &cli.n_prompts {
        set(&mut tree, &["dataset", "n_prompts"], n);
    }
    if let Some(n) = &cli.output_dir {
        set(&mut tree, &["output_dir"], n);
    }
    crate::aliases::normalize_keys(&mut tree, sources)?;

    let mut engine_inferred = None;
    let engine = match tree.get_path(&["engine"]) {
        Some(n) if !n.is_null() => n.as_str().and_then(Engine::from_name),
        _ => {
            let inferred = crate::infer::infer_engine(&tree);
            let span = tree.get_path(&["model"]).map_or(tree.span, |n| n.span);
            set(
                &mut tree,
                &["engine"],
                &Node::plain(inferred.engine.as_str(), span),
            );
            engine_inferred = Some(std::sync::Arc::<str>::from(inferred.reason));
            Some(inferred.engine)
        }
    };
    if let Some(e) = engine {
        for section in ["runners", "images"] {
            if let Some(n) = user.node(&[section, e.as_str()])
                && missing(&tree, &[section, e.as_str()])
            {
                set(&mut tree, &[section, e.as_str()], n);
            }
        }
    }
    if let Some(n) = user.node(&["measurement", "energy_sampler"])
        && missing(&tree, &["energy_sampler"])
    {
        set(&mut tree, &["energy_sampler"], n);
    }
    if let Some(n) = user.node(&["output", "results_dir"])
        && missing(&tree, &["output_dir"])
    {
        set(&mut tree, &["output_dir"], n);
    }
    if let Some(p) = tree.get_path(&["decoder", "preset"]).cloned()
        && let Some(preset) = p.as_str().and_then(Preset::from_name)
    {
        for (key, value) in preset.values() {
            if missing(&tree, &["decoder", key]) {
                set(&mut tree, &["decoder", key], &Node::plain(value, p.span));
            }
        }
    }

    let mut config: ExperimentConfig =
        crate::de::from_node(&tree).map_err(|e| ConfigError::from(e.into_diagnostic(sources)))?;
    let mut warnings = Vec::new();
    crate::rules::resolve(&mut config, &mut warnings);
    let ranges = experiment_rules().check(&config);
    let mut rules = Vec::new();
    crate::rules::check(&config, &mut rules, &mut warnings);
    if !ranges.is_empty() || !rules.is_empty() {
        let locate = |v: &Violation, kind: ErrorKind| {
            Diagnostic::new(kind, v.message.clone()).at(sources.location(tree.locate(&v.path)))
        };
        let errors: Vec<Diagnostic> = ranges
            .iter()
            .map(|v| locate(v, ErrorKind::Range))
            .chain(rules.iter().map(|v| locate(v, ErrorKind::Rule)))
            .collect();
        let reason = errors
            .iter()
            .map(Diagnostic::one_line)
            .collect::<Vec<_>>()
            .join("; ");
        return Ok(Outcome::Skipped(SkippedPoint {
            label,
            config: tree.to_json(),
            reason,
            errors,
        }));
    }
    let digest = crate::canonical::config_digest(writer, &config);
    Ok(Outcome::Valid(Box::new(PlannedConfig {
        config,
        digest,
        label,
        warnings,
        engine_inferred,
        memory: None,
    })))
}

/// Unknown top-level keys reported by name at most; the rest are counted.
const MAX_UNKNOWN_KEYS_REPORTED: usize = 10;

fn check_root_keys(root: &Node, sources: &SourceMap) -> Result<(), ConfigError> {
    let Some(map) = root.as_map() else {
        return Ok(());
    };
    let mut diagnostics: Vec<Diagnostic> = Vec::new();
    let mut unknown = 0usize;
    for e in &map.entries {
        let k = &*e.key;
        if ExperimentConfig::KEYS.contains(&k)
            || STUDY_KEYS.contains(&k)
            || crate::aliases::ROOT_ALIAS_KEYS.contains(&k)
        {
            continue;
        }
        unknown += 1;
        if diagnostics.len() == MAX_UNKNOWN_KEYS_REPORTED {
            continue;
        }
        let candidates = ExperimentConfig::KEYS
            .iter()
            .chain(STUDY_KEYS)
            .copied()
            .chain([EXTENDS_KEY]);
        let mut d = Diagnostic::new(ErrorKind::UnknownKey, format!("unknown key `{k}`"))
            .at(sources.location(e.key_span));
        if let Some(c) = did_you_mean(k, candidates) {
            d = d.with_help(format!("did you mean `{c}`?"));
        } else if let Some(hint) = section_hint(k) {
            d = d.with_help(hint);
        }
        diagnostics.push(d);
    }
    if unknown > diagnostics.len() {
        diagnostics.push(Diagnostic::new(
            ErrorKind::UnknownKey,
            format!(
                "and {} more unknown top-level keys (the first {} are listed)",
                unknown - diagnostics.len(),
                diagnostics.len()
            ),
        ));
    }
    if diagnostics.is_empty() {
        Ok(())
    } else {
        Err(ConfigError { diagnostics })
    }
}

/// "`batch_size` is a key of `llamacpp`, `transformers`" for keys written at the wrong level.
fn section_hint(key: &str) -> Option<String> {
    let schema = crate::schema::experiment_schema();
    let defs = schema.get("$defs")?.as_object()?;
    let props = schema.get("properties")?.as_object()?;
    let mut owners: Vec<String> = Vec::new();
    for (field, sub) in props {
        let def = sub
            .get("$ref")
            .or_else(|| {
                sub.get("anyOf")
                    .and_then(Value::as_array)
                    .and_then(|a| a.iter().find_map(|b| b.get("$ref")))
            })
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix("#/$defs/"))
            .and_then(|n| defs.get(n));
        if def
            .and_then(|d| d.get("properties"))
            .and_then(Value::as_object)
            .is_some_and(|p| p.contains_key(key))
            && !crate::aliases::KEY_ALIASES
                .iter()
                .any(|a| a.parent.is_empty() && a.alias == field)
        {
            owners.push(format!("`{field}.{key}`"));
        }
    }
    (!owners.is_empty()).then(|| format!("`{key}` belongs in a section: {}", owners.join(", ")))
}

fn study_name(root: &Node, path: Option<&Path>, overrides: &Overrides) -> String {
    if let Some(n) = root.get_path(&["name"]).and_then(Node::as_str) {
        return n.to_string();
    }
    if let Some(stem) = path.and_then(Path::file_stem) {
        return stem.to_string_lossy().into_owned();
    }
    overrides
        .model
        .as_deref()
        .and_then(|m| Path::new(m).file_stem())
        .map_or_else(|| "llem".to_string(), |s| s.to_string_lossy().into_owned())
}

fn summarise_warnings(configs: &[PlannedConfig], out: &mut Vec<String>) {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for c in configs {
        for w in &c.warnings {
            match counts.iter_mut().find(|(m, _)| m == w) {
                Some((_, n)) => *n += 1,
                None => counts.push((w.clone(), 1)),
            }
        }
    }
    let total = configs.len();
    for (msg, n) in counts {
        if n == total {
            out.push(msg);
        } else {
            out.push(format!("{msg} ({n} of {total} configurations)"));
        }
    }
}

/// The root of the plan: the file, or an empty map for a command-line-only experiment; and
/// the directory relative paths are resolved against.
fn load_root(
    req: &PlanRequest<'_>,
    sources: &mut SourceMap,
) -> Result<(Node, PathBuf), ConfigError> {
    match req.config {
        Some(path) => {
            let dir = req.config_dir.map_or_else(
                || path.parent().map(Path::to_path_buf).unwrap_or_default(),
                Path::to_path_buf,
            );
            let mut loader = Loader::new(sources);
            let root = loader.load_in(path, &dir, None, &mut Vec::new())?;
            Ok((root, dir))
        }
        None => {
            if req.overrides.model.is_none() {
                return Err(Diagnostic::new(
                    ErrorKind::Missing,
                    "nothing to run: give a configuration file or `--model`",
                )
                .into());
            }
            let id = sources.add_synthetic("<command line>", SourceKind::CommandLine);
            Ok((Node::empty_map(Span::whole(id)), PathBuf::new()))
        }
    }
}

/// `study_execution:` as written, range-checked; and `name:` checked to be a string.
fn execution_block(
    root_map: &Map,
    sources: &SourceMap,
) -> Result<StudyExecutionConfig, ConfigError> {
    let exec_yaml: StudyExecutionConfig = match root_map.get("study_execution") {
        Some(n) => {
            crate::de::from_node(n).map_err(|e| ConfigError::from(e.into_diagnostic(sources)))?
        }
        None => StudyExecutionConfig::default(),
    };
    if let Some(n) = root_map.get("study_execution")
        && let Some(v) = study_execution_rules().check(&exec_yaml).first()
    {
        return Err(
            Diagnostic::new(ErrorKind::Range, format!("study_execution: {}", v.message))
                .at(sources.location(n.locate(&v.path)))
                .into(),
        );
    }
    if let (Some(n), Some(crate::ExecutorConfig::Slurm(sl))) =
        (root_map.get("study_execution"), &exec_yaml.executor)
    {
        let at = |key: &str, message: String| -> ConfigError {
            Diagnostic::new(ErrorKind::Range, message)
                .at(sources.location(n.locate(&["executor", "slurm", key])))
                .into()
        };
        if let Some(t) = &sl.time
            && let Err(m) = crate::slurm_time_seconds(t)
        {
            return Err(at(
                "time",
                format!("study_execution.executor.slurm.time: {m}"),
            ));
        }
    }
    if let Some(n) = root_map.get("name")
        && n.as_str().is_none()
    {
        return Err(Diagnostic::new(
            ErrorKind::Type,
            format!("`name` must be a string, found {}", n.describe()),
        )
        .at(sources.location(n.span))
        .into());
    }
    Ok(exec_yaml)
}

/// The experiment fields of the root (study-level keys dropped), over its `base:` file.
fn with_base(
    root: &Node,
    root_map: &Map,
    kind: PlanKind,
    dir: &Path,
    sources: &mut SourceMap,
) -> Result<Node, ConfigError> {
    let mut fixed = root.clone();
    if let Some(m) = fixed.as_map_mut() {
        let drop: &[&str] = match kind {
            PlanKind::Study => STUDY_KEYS,
            PlanKind::Experiment => &["study_execution", "base", "schedule"],
        };
        for k in drop {
            m.remove(k);
        }
    }
    let Some(base) = root_map.entry("base") else {
        return Ok(fixed);
    };
    let Some(rel) = base.value.as_str() else {
        return Err(
            Diagnostic::new(ErrorKind::Inheritance, "`base:` takes a file path")
                .at(sources.location(base.value.span))
                .into(),
        );
    };
    let mut loader = Loader::new(sources);
    let mut base_tree = loader.load(&dir.join(rel), Some(base.value.span), &mut Vec::new())?;
    if let Some(m) = base_tree.as_map_mut() {
        for k in BASE_STRIPPED {
            m.remove(k);
        }
    }
    let span = fixed.span;
    let mut merged = deep_merge(&base_tree, &fixed);
    merged.span = span;
    Ok(merged)
}

/// The points of the plan, each handed to `on_point` as it is built: the sweep and
/// `experiments:` of a study, or the one experiment (labelled by its `name:`). Returns how
/// many there were.
fn expand_points(
    fixed: &Node,
    root_map: &Map,
    kind: PlanKind,
    dir: &Path,
    sources: &mut SourceMap,
    on_point: &mut OnPoint<'_>,
) -> Result<usize, ConfigError> {
    let mut loader = Loader::new(sources);
    match kind {
        PlanKind::Study => sweep::expand(
            fixed,
            root_map.get("sweep"),
            root_map.get("experiments"),
            &mut loader,
            dir,
            on_point,
        ),
        PlanKind::Experiment => {
            let label = root_map
                .get("name")
                .and_then(Node::as_str)
                .unwrap_or_default()
                .to_string();
            let mut labelled = |mut p: Point, s: &SourceMap| {
                if p.label.is_empty() {
                    p.label.clone_from(&label);
                }
                on_point(p, s)
            };
            sweep::expand(fixed, None, None, &mut loader, dir, &mut labelled)
        }
    }
}

/// The valid configurations of the points, the skipped points, and the duplicates dropped
/// (when `dedup`).
struct Finished {
    configs: Vec<PlannedConfig>,
    skipped: Vec<SkippedPoint>,
    duplicates: Vec<Duplicate>,
}

/// Types, validates, hashes and deduplicates points one at a time.
struct Finisher<'a> {
    cli: &'a CliNodes,
    user: &'a UserSettings,
    dedup: bool,
    seen: HashMap<ConfigDigest, usize>,
    reasons: std::collections::HashSet<std::sync::Arc<str>>,
    writer: CanonicalWriter,
    out: Finished,
}

impl<'a> Finisher<'a> {
    fn new(cli: &'a CliNodes, user: &'a UserSettings, dedup: bool) -> Self {
        Finisher {
            cli,
            user,
            dedup,
            seen: HashMap::new(),
            reasons: std::collections::HashSet::new(),
            writer: CanonicalWriter::new(),
            out: Finished {
                configs: Vec::new(),
                skipped: Vec::new(),
                duplicates: Vec::new(),
            },
        }
    }

    fn add(&mut self, point: Point, sources: &SourceMap) -> Result<(), ConfigError> {
        match finish(point, self.cli, self.user, sources, &mut self.writer)? {
            Outcome::Skipped(s) => self.out.skipped.push(s),
            Outcome::Valid(mut c) => {
                if let Some(why) = c.engine_inferred.take() {
                    // One copy per distinct reason, not one per configuration.
                    let shared = match self.reasons.get(&why) {
                        Some(s) => std::sync::Arc::clone(s),
                        None => {
                            self.reasons.insert(std::sync::Arc::clone(&why));
                            why
                        }
                    };
                    c.engine_inferred = Some(shared);
                }
                if self.dedup {
                    if let Some(&first) = self.seen.get(&c.digest) {
                        self.out.duplicates.push(Duplicate {
                            label: c.label,
                            config_hash: c.digest.short(),
                            duplicate_of: first,
                        });
                        return Ok(());
                    }
                    self.seen.insert(c.digest, self.out.configs.len());
                }
                let configs = &mut self.out.configs;
                if configs.len() == configs.capacity() {
                    // Grown by an eighth, not doubled: a configuration is ~700 bytes, and a
                    // doubled list of 100 000 would hold 20 MB of slack at its peak.
                    configs.reserve_exact((configs.len() / 8).max(64));
                }
                configs.push(*c);
            }
        }
        Ok(())
    }
}

/// Most runs (configurations x cycles) one plan may hold: past it a study would take years
/// and its plan alone gigabytes, so a typo in `n_cycles` is refused before anything is
/// allocated.
pub const MAX_RUNS: u64 = 1_000_000;

/// Refuses a plan of more than [`MAX_RUNS`] runs, pointing at `n_cycles` when it is written.
fn check_run_count(
    configs: usize,
    n_cycles: u32,
    root_map: &Map,
    sources: &SourceMap,
) -> Result<(), ConfigError> {
    let runs = (configs as u64).saturating_mul(u64::from(n_cycles));
    if runs <= MAX_RUNS {
        return Ok(());
    }
    let d = Diagnostic::new(
        ErrorKind::Rule,
        format!(
            "the plan has {runs} runs ({configs} configurations x {n_cycles} cycles); llem \
             plans at most {MAX_RUNS}"
        ),
    )
    .with_help("split the study, or lower `study_execution.n_cycles`");
    Err(at_execution_key(d, root_map, sources, "n_cycles").into())
}

/// `d` located at `study_execution.<key>` when the file writes it there.
fn at_execution_key(d: Diagnostic, root_map: &Map, sources: &SourceMap, key: &str) -> Diagnostic {
    match root_map
        .get("study_execution")
        .and_then(|e| e.as_map())
        .and_then(|m| m.get(key))
    {
        Some(n) => d.at(sources.location(n.span)),
        None => d,
    }
}

/// A cell limit shorter than what a cell must wait whatever the engine's speed would kill
/// every cell by design: refused, naming both numbers.
fn check_cell_limit(
    execution: &StudyExecution,
    fixed_cell_s: f64,
    root_map: &Map,
    sources: &SourceMap,
) -> Result<(), ConfigError> {
    let limit = execution.experiment_timeout_seconds;
    if limit > fixed_cell_s {
        return Ok(());
    }
    let d = Diagnostic::new(
        ErrorKind::Rule,
        format!(
            "study_execution.experiment_timeout_seconds is {} s, but a cell waits at least {} s \
             whatever the engine's speed (baseline, thermal floor, and traffic sent for a fixed \
             time: methodology `windows` sends for its ramp and every window): every cell would \
             be killed",
            crate::schema::fmt_num(limit),
            crate::schema::fmt_num(fixed_cell_s)
        ),
    )
    .with_help(format!(
        "raise it above {} s (leave it out and llem derives it), or shorten the windows",
        crate::schema::fmt_num(fixed_cell_s)
    ));
    Err(at_execution_key(d, root_map, sources, "experiment_timeout_seconds").into())
}

/// The error of a plan with no valid configuration: every distinct problem, at most 12.
fn all_invalid(kind: PlanKind, n_points: usize, skipped: &[SkippedPoint]) -> ConfigError {
    let mut diagnostics: Vec<Diagnostic> = Vec::new();
    for s in skipped {
        for d in &s.errors {
            if !diagnostics.contains(d) {
                diagnostics.push(d.clone());
            }
        }
    }
    if kind == PlanKind::Study && n_points > 1 {
        let mut first = Diagnostic::new(
            ErrorKind::Rule,
            format!("all {n_points} configurations of the study are invalid"),
        );
        first.help = Some("each problem is listed below".into());
        diagnostics.insert(0, first);
    }
    diagnostics.truncate(12);
    ConfigError { diagnostics }
}

/// How the study runs: flags over `study_execution:` over the user config over defaults.
fn resolve_execution(
    req: &PlanRequest<'_>,
    exec_yaml: &StudyExecutionConfig,
    uc: &UserConfig,
    study: bool,
    dedup: bool,
    launches_server: bool,
    fixed_cell_s: f64,
) -> StudyExecution {
    // A cell that launches a server must be allowed the server's start on top of the
    // measurement, or a cold start is killed as a timeout; and every cell its fixed waits
    // (a `windows` run sends for the ramp and every window), or each is killed by design.
    let mut parts: Vec<String> = Vec::new();
    let mut timeout = execution::DEFAULT_EXPERIMENT_TIMEOUT_S;
    if launches_server {
        timeout += execution::SERVER_READY_TIMEOUT_S;
        parts.push(format!(
            "server start up to {} s",
            crate::schema::fmt_num(execution::SERVER_READY_TIMEOUT_S)
        ));
    }
    if fixed_cell_s > 0.0 {
        timeout += fixed_cell_s;
        parts.push(format!(
            "{} s of fixed waits (baseline, thermal floor, timed traffic)",
            crate::schema::fmt_num(fixed_cell_s)
        ));
    }
    let (timeout, derivation) = match exec_yaml.experiment_timeout_seconds {
        Some(t) => (t, None),
        None if parts.is_empty() => (timeout, None),
        None => {
            parts.push(format!(
                "{} s",
                crate::schema::fmt_num(execution::DEFAULT_EXPERIMENT_TIMEOUT_S)
            ));
            (timeout, Some(parts.join(" + ")))
        }
    };
    StudyExecution {
        n_cycles: req
            .overrides
            .cycles
            .or(exec_yaml.n_cycles)
            .unwrap_or(if study { 3 } else { 1 }),
        experiment_order: req
            .overrides
            .order
            .or(exec_yaml.experiment_order)
            .unwrap_or(if study {
                ExperimentOrder::Shuffle
            } else {
                ExperimentOrder::Sequential
            }),
        shuffle_seed: exec_yaml.shuffle_seed,
        experiment_gap_seconds: exec_yaml
            .experiment_gap_seconds
            .or(uc.execution.experiment_gap_seconds)
            .unwrap_or(execution::DEFAULT_EXPERIMENT_GAP_SECONDS),
        cycle_gap_seconds: exec_yaml
            .cycle_gap_seconds
            .or(uc.execution.cycle_gap_seconds)
            .unwrap_or(execution::DEFAULT_CYCLE_GAP_SECONDS),
        max_consecutive_failures: exec_yaml.max_consecutive_failures.unwrap_or(10),
        circuit_breaker_cooldown_seconds: exec_yaml
            .circuit_breaker_cooldown_seconds
            .unwrap_or(60.0),
        wall_clock_timeout_hours: exec_yaml.wall_clock_timeout_hours,
        experiment_timeout_seconds: timeout,
        experiment_timeout_derivation: derivation,
        deduplicate_equivalent: dedup,
        executor: exec_yaml.executor.clone().unwrap_or_default(),
        node_control: exec_yaml.node_control.unwrap_or(false),
    }
}

/// The runs in execution order, and the shuffle seed used (shuffled orders only).
fn planned_runs(
    execution: &StudyExecution,
    k: usize,
    design: &ConfigDigest,
) -> (Vec<PlannedRun>, Option<u64>) {
    let shuffle_seed = (execution.experiment_order == ExperimentOrder::Shuffle).then(|| {
        execution
            .shuffle_seed
            .map_or_else(|| design.seed(), |s| s as u64)
    });
    let runs = execution_order(
        k,
        execution.n_cycles,
        execution.experiment_order,
        shuffle_seed.unwrap_or(0),
    )
    .into_iter()
    .enumerate()
    .map(|(i, s)| PlannedRun {
        index: i + 1,
        cycle: s.cycle,
        config: s.config,
    })
    .collect();
    (runs, shuffle_seed)
}

/// What the plan as a whole warns about: an unbalanced latin square, skipped points,
/// duplicates, and the configurations' own warnings, each once.
fn plan_warnings(
    execution: &StudyExecution,
    n_points: usize,
    finished: &Finished,
    warnings: &mut Vec<String>,
) {
    let k = finished.configs.len();
    if execution.experiment_order == ExperimentOrder::LatinSquare && k > 1 {
        let rows = williams_row_count(k);
        if !(execution.n_cycles as usize).is_multiple_of(rows) {
            warnings.push(format!(
                "latin_square: {k} configurations need a multiple of {rows} cycles for full \
                 carryover balance; {} cycles use {} of the {rows} rows",
                execution.n_cycles,
                (execution.n_cycles as usize).min(rows)
            ));
        }
    }
    if !finished.skipped.is_empty() {
        warnings.push(format!(
            "{} of {n_points} grid points skipped (invalid combinations, listed below)",
            finished.skipped.len()
        ));
    }
    if !finished.duplicates.is_empty() {
        warnings.push(format!(
            "{} configurations have the same measurement_config_hash as an earlier one and run \
             once (--no-dedup runs them all)",
            finished.duplicates.len()
        ));
    }
    summarise_warnings(&finished.configs, warnings);
}

/// A search needs candidates to choose between, and an SLO wherever it reads goodput.
fn check_search(
    spec: &crate::search::SearchSpec,
    configs: &[PlannedConfig],
    root: &Map,
    sources: &SourceMap,
) -> Result<(), ConfigError> {
    let at = |c: Option<&crate::source::Location>| {
        c.cloned()
            .or_else(|| root.entry("search").map(|e| sources.location(e.key_span)))
    };
    if configs.len() < 2 {
        let mut d = Diagnostic::new(
            ErrorKind::Rule,
            format!(
                "`search` chooses among the study's configurations, and it has {}: sweep at \
                 least one field over two or more values",
                configs.len()
            ),
        );
        if let Some(l) = at(None) {
            d = d.at(l);
        }
        return Err(d.into());
    }
    let without_slo = configs
        .iter()
        .filter(|c| {
            c.config
                .traffic
                .as_ref()
                .and_then(|t| t.slo.as_ref())
                .is_none()
        })
        .count();
    if without_slo == 0 {
        return Ok(());
    }
    let objective = std::iter::once((spec.objective.as_str(), None));
    let constraints = spec
        .constraints
        .iter()
        .map(|c| (c.field.as_str(), c.location.as_ref()));
    for (field, location) in objective.chain(constraints) {
        if crate::search::search_field(field).is_some_and(|f| f.needs_slo) {
            let mut d = Diagnostic::new(
                ErrorKind::Rule,
                format!(
                    "`{field}` counts requests within an SLO, and {without_slo} of the {} \
                     configurations set none",
                    configs.len()
                ),
            )
            .with_help("set traffic.slo (ttft_ms, tpot_ms or e2e_ms) for every configuration");
            if let Some(l) = at(location) {
                d = d.at(l);
            }
            return Err(d.into());
        }
    }
    Ok(())
}

/// Plans a file (or a command-line-only experiment).
pub fn plan(req: &PlanRequest<'_>) -> Result<StudyPlan, ConfigError> {
    let mut sources = SourceMap::new();
    let user = UserSettings::load(req.env, &mut sources)?;
    let mut warnings = user.warnings.clone();

    let (root, dir) = load_root(req, &mut sources)?;
    let (root, dialect) = crate::dialect07::to_llem(&root, &sources)?;
    check_root_keys(&root, &sources)?;
    let root_map = root.as_map().cloned().unwrap_or_default();
    let rate_levels = root_map
        .get("traffic")
        .and_then(Node::as_map)
        .and_then(|t| t.get("rate_qps"))
        .is_some_and(|r| matches!(r.kind, crate::yaml::NodeKind::Seq(_)));
    let kind = if root_map.contains("sweep") || root_map.contains("experiments") || rate_levels {
        PlanKind::Study
    } else {
        PlanKind::Experiment
    };
    let exec_yaml = execution_block(&root_map, &sources)?;
    let schedule = crate::schedule::from_root(&root_map, &sources)?;
    let search = crate::search::from_root(&root_map, &sources)?;
    if let (Some(_), PlanKind::Experiment, Some(e)) = (&search, kind, root_map.entry("search")) {
        return Err(Diagnostic::new(
            ErrorKind::Rule,
            "`search` looks among a study's configurations, and this file defines one: add a \
             `sweep:` (or `experiments:`) with the candidates",
        )
        .at(sources.location(e.key_span))
        .into());
    }
    let fixed = with_base(&root, &root_map, kind, &dir, &mut sources)?;
    let cli = CliNodes::new(&req.overrides, &mut sources);
    let dedup = req.dedup && exec_yaml.deduplicate_equivalent.unwrap_or(true);
    let mut finisher = Finisher::new(&cli, &user, dedup);
    let n_points = expand_points(&fixed, &root_map, kind, &dir, &mut sources, &mut |p, s| {
        finisher.add(p, s)
    })?;
    // The dedup index goes now, and the list gives back its growth slack: a 100 000-cell
    // plan must stay well under 150 MB.
    let mut finished = {
        let f = finisher;
        f.out
    };
    finished.configs.shrink_to_fit();
    if finished.configs.is_empty() {
        return Err(all_invalid(kind, n_points, &finished.skipped));
    }

    let digests: Vec<ConfigDigest> = finished.configs.iter().map(|c| c.digest).collect();
    let design = match &search {
        Some(spec) => crate::canonical::search_design_digest(
            &design_digest(&digests),
            &serde_json::to_value(spec).unwrap_or_default(),
        ),
        None => design_digest(&digests),
    };
    let uc = &user.config;
    let launches_server = finished.configs.iter().any(|c| {
        c.config.is_served() && !matches!(c.config.runner(), Some(RunnerSpec::External { .. }))
    });
    let fixed_cell_s = finished
        .configs
        .iter()
        .map(|c| c.config.fixed_cell_seconds())
        .fold(0.0, f64::max);
    let execution = resolve_execution(
        req,
        &exec_yaml,
        uc,
        kind == PlanKind::Study,
        dedup,
        launches_server,
        fixed_cell_s,
    );
    // A single experiment runs in this process, without a cell limit.
    if kind == PlanKind::Study {
        check_cell_limit(&execution, fixed_cell_s, &root_map, &sources)?;
    }
    if launches_server
        && execution.experiment_timeout_derivation.is_none()
        && execution.experiment_timeout_seconds <= execution::SERVER_READY_TIMEOUT_S
    {
        warnings.push(format!(
            "study_execution.experiment_timeout_seconds ({} s) is no longer than the wait for a \
             launched server to become ready ({} s): a cold server start may be killed as a \
             timeout",
            crate::schema::fmt_num(execution.experiment_timeout_seconds),
            crate::schema::fmt_num(execution::SERVER_READY_TIMEOUT_S)
        ));
    }
    check_run_count(
        finished.configs.len(),
        execution.n_cycles,
        &root_map,
        &sources,
    )?;
    if let Some(spec) = &search {
        check_search(spec, &finished.configs, &root_map, &sources)?;
    }
    let (runs, shuffle_seed) = planned_runs(&execution, finished.configs.len(), &design);
    plan_warnings(&execution, n_points, &finished, &mut warnings);

    let output_dir = req
        .overrides
        .output_dir
        .clone()
        .or_else(|| {
            root_map
                .get("output_dir")
                .and_then(Node::as_str)
                .map(str::to_string)
        })
        .or_else(|| uc.output.results_dir.clone())
        .unwrap_or_else(|| crate::rules::DEFAULT_OUTPUT_DIR.to_string());

    Ok(StudyPlan {
        kind,
        study_name: study_name(&root, req.config, &req.overrides),
        source: req.config.map(Path::to_path_buf),
        design,
        execution,
        shuffle_seed,
        output_dir,
        configs: finished.configs,
        runs,
        skipped: finished.skipped,
        duplicates: finished.duplicates,
        warnings,
        schedule,
        search,
        dialect,
        user: user.config,
    })
}

#[derive(Serialize)]
struct RunView<'a> {
    index: usize,
    cycle: u32,
    config_index: usize,
    config_hash: String,
    engine: Engine,
    model: &'a str,
    label: &'a str,
    /// With `--per-run-config` only: the configuration again, whole.
    #[serde(skip_serializing_if = "Option::is_none")]
    config: Option<&'a ExperimentConfig>,
}

#[derive(Serialize)]
struct ConfigurationView<'a> {
    index: usize,
    config_hash: String,
    engine: Engine,
    /// Why the engine is what it is when the configuration does not name one.
    #[serde(skip_serializing_if = "Option::is_none")]
    engine_inferred: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    memory_estimate: Option<&'a MemoryView>,
    model: &'a str,
    label: &'a str,
    warnings: &'a [String],
    config: &'a ExperimentConfig,
}

#[derive(Serialize)]
struct PlanView<'a> {
    llem_version: &'static str,
    kind: PlanKind,
    study_name: &'a str,
    source: Option<String>,
    study_design_hash: String,
    unique_configurations: usize,
    n_cycles: u32,
    total_runs: usize,
    experiment_order: ExperimentOrder,
    shuffle_seed: Option<u64>,
    output_dir: &'a str,
    execution: &'a StudyExecution,
    duration_estimate: crate::duration::DurationEstimate,
    configurations: ConfigurationsView<'a>,
    runs: RunsView<'a>,
    skipped: &'a [SkippedPoint],
    duplicates: &'a [Duplicate],
    warnings: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    schedule: Option<&'a crate::schedule::ScheduleSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    search: Option<SearchView<'a>>,
    dialect: &'static str,
}

/// A search in the JSON plan: the block, and its budget in runs.
#[derive(Serialize)]
struct SearchView<'a> {
    #[serde(flatten)]
    spec: &'a crate::search::SearchSpec,
    budget_runs: u32,
    grid_runs: usize,
}

/// Each configuration once, whole, serialised as it is written.
struct ConfigurationsView<'a>(&'a StudyPlan);

impl Serialize for ConfigurationsView<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(
            self.0
                .configs
                .iter()
                .enumerate()
                .map(|(index, c)| ConfigurationView {
                    index,
                    config_hash: c.digest.short(),
                    engine: c.config.engine,
                    engine_inferred: c.engine_inferred.as_deref(),
                    memory_estimate: c.memory.as_deref(),
                    model: &c.config.model,
                    label: &c.label,
                    warnings: &c.warnings,
                    config: &c.config,
                }),
        )
    }
}

/// The runs, each serialised as it is written (a plan's JSON can be hundreds of MB; its
/// views are never all built at once); each names its configuration by index, and carries
/// it whole only when asked.
struct RunsView<'a> {
    plan: &'a StudyPlan,
    per_run_config: bool,
}

impl Serialize for RunsView<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let plan = self.plan;
        s.collect_seq(plan.runs.iter().filter_map(|r| {
            let c = plan.configs.get(r.config)?;
            Some(RunView {
                index: r.index,
                cycle: r.cycle,
                config_index: r.config,
                config_hash: c.digest.short(),
                engine: c.config.engine,
                model: &c.config.model,
                label: &c.label,
                config: self.per_run_config.then_some(&c.config),
            })
        }))
    }
}

/// The plan as `--dry-run --json` prints it (and `_study-artefacts/plan.json` holds it):
/// `configurations` once each, `runs` by configuration index; with `per_run_config` every
/// run also carries its configuration whole (the JSON of a 100 000-cell, 3-cycle plan grows
/// from ~0.3 GB to ~0.9 GB).
pub struct PlanJson<'a> {
    /// The plan.
    pub plan: &'a StudyPlan,
    /// Repeat the configuration in every run.
    pub per_run_config: bool,
}

impl Serialize for PlanJson<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let p = self.plan;
        PlanView {
            llem_version: env!("CARGO_PKG_VERSION"),
            kind: p.kind,
            study_name: &p.study_name,
            source: p.source.as_ref().map(|x| x.display().to_string()),
            study_design_hash: p.design.short(),
            unique_configurations: p.configs.len(),
            n_cycles: p.execution.n_cycles,
            total_runs: p.runs.len(),
            experiment_order: p.execution.experiment_order,
            shuffle_seed: p.shuffle_seed,
            output_dir: &p.output_dir,
            execution: &p.execution,
            duration_estimate: p.duration(),
            configurations: ConfigurationsView(p),
            runs: RunsView {
                plan: p,
                per_run_config: self.per_run_config,
            },
            skipped: &p.skipped,
            duplicates: &p.duplicates,
            warnings: &p.warnings,
            schedule: p.schedule.as_ref(),
            search: p.search.as_ref().map(|spec| SearchView {
                spec,
                budget_runs: spec.budget.runs(p.runs.len()),
                grid_runs: p.runs.len(),
            }),
            dialect: match p.dialect {
                crate::dialect07::Dialect::Llem => "llem",
                crate::dialect07::Dialect::Llem07 => "llem07",
                crate::dialect07::Dialect::Seed004 => "seed004",
            },
        }
        .serialize(s)
    }
}

impl Serialize for StudyPlan {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        PlanJson {
            plan: self,
            per_run_config: false,
        }
        .serialize(s)
    }
}
