//! `Runs`: an immutable collection of [`LlmRun`]s. Filters keep indices into one shared
//! vector (no record is copied), keep order, and chain; groups are collections too.

use std::ops::RangeBounds;
use std::path::PathBuf;
use std::sync::Arc;

use super::collection::Collection;
use super::run::{FieldValue, LlmRun, all_fields, field_kind, is_config_path};
use super::{LoadIssue, RecordsError};

/// A collection of runs (cheap to clone and filter).
#[derive(Clone, Debug, Default)]
pub struct Runs {
    runs: Collection<LlmRun>,
    issues: Arc<[LoadIssue]>,
}

/// Accepted values of a text filter: one (`"gpqa"`) or several (`&["gpqa", "lm-arena-chat"]`).
pub trait Choices {
    /// Whether `s` is one of the values.
    fn has(&self, s: &str) -> bool;
}

impl Choices for &str {
    fn has(&self, s: &str) -> bool {
        *self == s
    }
}
impl Choices for String {
    fn has(&self, s: &str) -> bool {
        self == s
    }
}
impl Choices for &[&str] {
    fn has(&self, s: &str) -> bool {
        self.contains(&s)
    }
}
impl<const N: usize> Choices for [&str; N] {
    fn has(&self, s: &str) -> bool {
        self.contains(&s)
    }
}
impl Choices for Vec<String> {
    fn has(&self, s: &str) -> bool {
        self.iter().any(|x| x == s)
    }
}

/// One group of [`Runs::group_by`]: the key (one text per field) and its runs.
#[derive(Clone, Debug)]
pub struct Group {
    /// The fields' values, as text.
    pub key: Vec<String>,
    /// The runs with that key, in collection order.
    pub runs: Runs,
}

impl Runs {
    /// A collection of `runs` (kept in the given order) with the load's issues.
    pub fn new(runs: Vec<LlmRun>, issues: Vec<LoadIssue>) -> Self {
        Self {
            runs: Collection::new(runs),
            issues: issues.into(),
        }
    }

    /// Loads ML.ENERGY raw result trees (reference §2).
    pub fn from_raw_results(
        roots: &[PathBuf],
        opts: &super::raw_tree::RawOptions,
    ) -> Result<Self, RecordsError> {
        let l = super::raw_tree::load_raw(roots, opts)?;
        Ok(Self::new(l.runs, l.issues))
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
    pub fn iter(&self) -> impl Iterator<Item = &LlmRun> + '_ {
        self.runs.iter()
    }

    /// The `i`-th run.
    pub fn get(&self, i: usize) -> Option<&LlmRun> {
        self.runs.get(i)
    }

    /// Runs that were found but not loaded, with the reason.
    pub fn issues(&self) -> &[LoadIssue] {
        &self.issues
    }

    /// The runs for which `keep` is true (the seed's `where`).
    pub fn filter(&self, keep: impl Fn(&LlmRun) -> bool) -> Self {
        self.with(self.runs.filter(keep))
    }

    /// The runs at `positions`, in that order (Python's indexing and slicing); positions past
    /// the end are skipped. No record is copied.
    pub fn pick(&self, positions: &[usize]) -> Self {
        self.with(self.runs.pick(positions))
    }

    fn with(&self, runs: Collection<LlmRun>) -> Self {
        Self {
            runs,
            issues: self.issues.clone(),
        }
    }

    /// Runs of these tasks.
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
    /// Runs with these weight precisions.
    pub fn precision(&self, p: impl Choices) -> Self {
        self.filter(|r| p.has(&r.weight_precision))
    }
    /// Runs with these architectures.
    pub fn architecture(&self, a: impl Choices) -> Self {
        self.filter(|r| a.has(&r.architecture))
    }
    /// Runs with these nicknames.
    pub fn nickname(&self, n: impl Choices) -> Self {
        self.filter(|r| n.has(&r.nickname))
    }
    /// Runs of these engines.
    pub fn engine(&self, e: impl Choices) -> Self {
        self.filter(|r| r.extra.engine.as_deref().is_some_and(|x| e.has(x)))
    }
    /// Runs on exactly `n` GPUs.
    pub fn num_gpus(&self, n: i64) -> Self {
        self.filter(|r| r.num_gpus == n)
    }
    /// Runs whose GPU count is in `range` (inclusive bounds as written).
    pub fn num_gpus_range(&self, range: impl RangeBounds<i64>) -> Self {
        self.filter(|r| range.contains(&r.num_gpus))
    }
    /// Runs with batch limit (`max_num_seqs`) exactly `b`.
    pub fn batch(&self, b: i64) -> Self {
        self.filter(|r| r.max_num_seqs == b)
    }
    /// Runs whose batch limit is in `range`.
    pub fn batch_range(&self, range: impl RangeBounds<i64>) -> Self {
        self.filter(|r| range.contains(&r.max_num_seqs))
    }
    /// Stable runs.
    pub fn stable(&self) -> Self {
        self.filter(|r| r.is_stable)
    }
    /// Unstable runs.
    pub fn unstable(&self) -> Self {
        self.filter(|r| !r.is_stable)
    }

    /// Groups by one or more fields (names of [`all_fields`]); groups in order of first
    /// appearance, runs in collection order within each.
    pub fn group_by(&self, fields: &[&str]) -> Result<Vec<Group>, RecordsError> {
        for f in fields {
            check_field(f)?;
        }
        Ok(self
            .group_by_key(|r| {
                fields
                    .iter()
                    .map(|f| r.field(f).map(|v| v.display()).unwrap_or_default())
                    .collect::<Vec<String>>()
            })
            .into_iter()
            .map(|(key, runs)| Group { key, runs })
            .collect())
    }

    /// Groups by a key computed from each run, in one pass; groups in order of first
    /// appearance, runs in collection order within each.
    pub fn group_by_key<K: std::hash::Hash + Eq + Clone>(
        &self,
        key: impl Fn(&LlmRun) -> K,
    ) -> Vec<(K, Runs)> {
        self.runs
            .group_by_key(key)
            .into_iter()
            .map(|(k, c)| (k, self.with(c)))
            .collect()
    }

    /// The first `n` runs.
    pub fn head(&self, n: usize) -> Self {
        self.with(self.runs.head(n))
    }

    /// Checks configuration paths against what is here: a dotted name that is no path of
    /// llem's configuration and that no run's configuration holds (another dialect's paths,
    /// such as llem 0.7's, are read from the runs) is a typo, with the nearest key named; a
    /// filter on it would match nothing and say nothing.
    pub fn check_paths<'a>(
        &self,
        names: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), RecordsError> {
        for name in names {
            if field_kind(name).is_some() || !name.contains('.') {
                continue;
            }
            let Some(why) = llem_config::schema::experiment_path_error(name) else {
                continue;
            };
            let held = self
                .iter()
                .any(|r| !matches!(r.field(name), Some(FieldValue::Null) | None));
            if !held {
                return Err(RecordsError::Usage(format!(
                    "unknown field {name:?}: {why}, and no run's configuration has it"
                )));
            }
        }
        Ok(())
    }

    /// One field's values, in order (any name of [`all_fields`]).
    pub fn column(&self, name: &str) -> Result<Vec<FieldValue<'_>>, RecordsError> {
        check_field(name)?;
        Ok(self
            .iter()
            .map(|r| r.field(name).unwrap_or(FieldValue::Null))
            .collect())
    }

    /// Typed per-field access: `runs.data().energy_per_token_joules`.
    pub fn data(&self) -> RunColumns {
        RunColumns::of(self.iter(), self.len())
    }

    /// The configuration paths whose values differ between these runs (what a sweep swept),
    /// in path order; each is a field (`decoder.preset`) and an export column.
    pub fn swept_paths(&self) -> Vec<String> {
        super::labels::varying_paths(self.iter().filter_map(|r| r.extra.config.as_deref()))
    }

    /// Every field name an export writes: the record's, then [`Runs::swept_paths`].
    pub fn column_names(&self) -> Vec<String> {
        all_fields()
            .map(|(n, _)| n.to_string())
            .chain(self.swept_paths())
            .collect()
    }
}

/// An error naming the nearest field when `name` is neither a record field nor a
/// configuration path.
pub(crate) fn check_field(name: &str) -> Result<(), RecordsError> {
    if field_kind(name).is_some() || is_config_path(name) {
        return Ok(());
    }
    let nearest = all_fields()
        .map(|(f, _)| (strsim::jaro_winkler(f, name), f))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, f)| f)
        .unwrap_or("task");
    Err(RecordsError::Usage(format!(
        "unknown field {name:?} (did you mean {nearest:?}, or a configuration path such as \
         `decoder.preset`?)"
    )))
}

macro_rules! run_columns {
    ($($name:ident: $ty:ty),* $(,)?) => {
        /// Every public field as a typed vector, one element per run, in collection order.
        #[derive(Clone, Debug, Default, PartialEq)]
        pub struct RunColumns {
            $(
                #[doc = concat!("`", stringify!($name), "` of each run.")]
                pub $name: Vec<$ty>,
            )*
        }

        impl RunColumns {
            fn of<'a>(runs: impl Iterator<Item = &'a LlmRun>, n: usize) -> Self {
                let mut c = Self { $($name: Vec::with_capacity(n),)* };
                for r in runs {
                    $(c.$name.push(r.$name.clone());)*
                }
                c
            }
        }
    };
}

run_columns! {
    domain: String, task: String, model_id: String, nickname: String, architecture: String,
    total_params_billions: f64, activated_params_billions: f64, weight_precision: String,
    gpu_model: String, num_gpus: i64, max_num_seqs: i64, seed: Option<i64>,
    num_request_repeats: Option<i64>, tensor_parallel: i64, expert_parallel: i64,
    data_parallel: i64, steady_state_energy_joules: f64, steady_state_duration_seconds: f64,
    energy_per_token_joules: f64, energy_per_request_joules: Option<f64>,
    output_throughput_tokens_per_sec: f64, request_throughput_req_per_sec: Option<f64>,
    avg_power_watts: f64, total_output_tokens: Option<f64>, completed_requests: Option<f64>,
    avg_output_len: Option<f64>, mean_itl_ms: f64, median_itl_ms: f64, p50_itl_ms: f64,
    p90_itl_ms: f64, p95_itl_ms: f64, p99_itl_ms: f64, avg_batch_size: Option<f64>,
    is_stable: bool, unstable_reason: String, results_path: String, prometheus_path: String,
}

/// A comparison in `--where`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `=` / `==`.
    Eq,
    /// `!=`.
    Ne,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `~`: text contains.
    Contains,
}

/// One `--where` condition: `field op value`.
#[derive(Clone, Debug, PartialEq)]
pub struct Condition {
    /// The record field (aliases resolved).
    pub field: String,
    /// The comparison.
    pub op: Op,
    /// The value as written.
    pub value: String,
}

/// Short names earlier versions accepted for record fields, and the field each meant. A
/// figure has one name everywhere (`--where`, `--group-by`, JSON, exports), so these are
/// refused with the field to write instead.
pub const FORMER_SHORT_NAMES: &[(&str, &str)] = &[
    ("batch", "max_num_seqs"),
    ("gpu", "gpu_model"),
    ("model", "model_id"),
    ("precision", "weight_precision"),
    ("gpus", "num_gpus"),
    ("stable", "is_stable"),
];

/// The refusal of a former short name: which field to write, under the one name it has.
pub(crate) fn short_name_refused(name: &str, table: &[(&str, &str)]) -> Option<RecordsError> {
    let (_, field) = table.iter().find(|(a, _)| *a == name)?;
    Some(RecordsError::Usage(format!(
        "unknown field {name:?}: write `{field}`, the name the field has in JSON and exports too"
    )))
}

/// The record field `name` names (checked), as written: fields have one name.
pub fn resolve_field(name: &str) -> Result<&str, RecordsError> {
    if let Some(e) = short_name_refused(name, FORMER_SHORT_NAMES) {
        return Err(e);
    }
    check_field(name)?;
    Ok(name)
}

impl Condition {
    /// Parses `engine=candle`, `max_num_seqs>=8`, `model_id~Qwen` (fields of an LLM run).
    pub fn parse(text: &str) -> Result<Self, RecordsError> {
        Self::parse_with(text, resolve_field)
    }

    /// Parses `FIELD OP VALUE`, the field named through `resolve` (aliases, checks).
    pub fn parse_with(
        text: &str,
        resolve: impl Fn(&str) -> Result<&str, RecordsError>,
    ) -> Result<Self, RecordsError> {
        const OPS: &[(&str, Op)] = &[
            ("!=", Op::Ne),
            (">=", Op::Ge),
            ("<=", Op::Le),
            ("==", Op::Eq),
            ("=", Op::Eq),
            (">", Op::Gt),
            ("<", Op::Lt),
            ("~", Op::Contains),
        ];
        let (pos, tok, op) = OPS
            .iter()
            .filter_map(|(t, op)| text.find(t).map(|p| (p, *t, *op)))
            .min_by_key(|(p, t, _)| (*p, std::cmp::Reverse(t.len())))
            .ok_or_else(|| {
                RecordsError::Usage(format!(
                    "--where {text:?}: expected FIELD OP VALUE with OP one of = != > >= < <= ~"
                ))
            })?;
        let field = text.get(..pos).unwrap_or_default().trim();
        let value = text.get(pos + tok.len()..).unwrap_or_default().trim();
        let field =
            resolve(field).map_err(|e| RecordsError::Usage(format!("--where {text:?}: {e}")))?;
        Ok(Self {
            field: field.to_string(),
            op,
            value: value.to_string(),
        })
    }

    /// Whether `r` satisfies the condition (numbers compare as numbers, else as text).
    pub fn matches(&self, r: &LlmRun) -> bool {
        self.matches_value(r.field(&self.field))
    }

    /// Whether a record whose field has value `v` (`None`: no such field) satisfies it.
    pub fn matches_value(&self, v: Option<FieldValue<'_>>) -> bool {
        let Some(v) = v else {
            return false;
        };
        if self.op == Op::Contains {
            return v.display().contains(&self.value);
        }
        let ord = match (v.as_f64(), self.value.parse::<f64>().ok(), v) {
            (_, _, FieldValue::Bool(b)) => Some(b.to_string().cmp(&self.value.to_lowercase())),
            (Some(a), Some(b), _) => a.partial_cmp(&b),
            (_, _, FieldValue::Null) => {
                return matches!(self.op, Op::Eq if self.value.is_empty() || self.value == "null")
                    || matches!(self.op, Op::Ne if !(self.value.is_empty() || self.value == "null"));
            }
            _ => Some(v.display().as_str().cmp(self.value.as_str())),
        };
        let Some(o) = ord else { return false };
        use std::cmp::Ordering::{Equal, Greater, Less};
        match self.op {
            Op::Eq => o == Equal,
            Op::Ne => o != Equal,
            Op::Gt => o == Greater,
            Op::Ge => o != Less,
            Op::Lt => o == Less,
            Op::Le => o != Greater,
            Op::Contains => false,
        }
    }
}
