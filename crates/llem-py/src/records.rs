//! `NativeRuns`: the Rust records collections (`Runs`, `DiffusionRuns`) for the seed-002
//! classes of `llem.records`. Loads and filters run with the GIL released; rows, columns and
//! tables are converted here and nowhere else.

use std::collections::BTreeSet;
use std::path::PathBuf;

use llem_records::diffusion::{self, DIFFUSION_FIELDS};
use llem_records::diffusion_runs::resolve_diffusion_field;
use llem_records::extract::RunKey;
use llem_records::raw_tree::RawOptions;
use llem_records::runs::{Condition, resolve_field};
use llem_records::{
    DiffusionRun, DiffusionRuns, FieldKind, FieldValue, LlmRun, LoadIssue, RecordsError, Runs,
};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::arrow::{ArrowTable, batch_of};
use crate::{LlemError, records_error};

/// Either kind of collection.
#[derive(Clone)]
enum Kind {
    Llm(Runs),
    Diffusion(DiffusionRuns),
}

/// What a load gives Python: the LLM runs, the diffusion runs, and `(path, reason)` of each
/// run found but not loaded.
type Loaded = (NativeRuns, NativeRuns, Vec<(String, String)>);

/// An immutable collection of LLM or diffusion runs.
#[pyclass(frozen, module = "llem._native")]
pub struct NativeRuns {
    kind: Kind,
}

fn issues_of(issues: &[LoadIssue]) -> Vec<(String, String)> {
    issues
        .iter()
        .map(|i| (i.path.display().to_string(), i.reason.clone()))
        .collect()
}

fn value_to_py<'py>(py: Python<'py>, v: FieldValue<'_>) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        FieldValue::Str(s) => s.into_pyobject(py)?.into_any(),
        FieldValue::Int(i) => i.into_pyobject(py)?.into_any(),
        FieldValue::Float(f) => f.into_pyobject(py)?.into_any(),
        FieldValue::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
        FieldValue::Null => py.None().into_bound(py),
    })
}

/// The diffusion fields as Python sees them: `use_torch_compile` a boolean (or None).
fn diffusion_fields() -> Vec<(&'static str, FieldKind)> {
    DIFFUSION_FIELDS
        .iter()
        .map(|&(n, k)| {
            if n == "use_torch_compile" {
                (n, FieldKind::Bool)
            } else {
                (n, k)
            }
        })
        .collect()
}

fn kind_name(k: FieldKind) -> &'static str {
    match k {
        FieldKind::Str => "str",
        FieldKind::OptStr => "str?",
        FieldKind::Int => "int",
        FieldKind::OptInt => "int?",
        FieldKind::Float => "float",
        FieldKind::OptFloat => "float?",
        FieldKind::Bool => "bool",
    }
}

fn llm(runs: Runs) -> NativeRuns {
    NativeRuns {
        kind: Kind::Llm(runs),
    }
}

fn diffusion(runs: DiffusionRuns) -> NativeRuns {
    NativeRuns {
        kind: Kind::Diffusion(runs),
    }
}

impl NativeRuns {
    fn with(&self, keep: impl Fn(&dyn Fields) -> bool) -> Self {
        match &self.kind {
            Kind::Llm(r) => llm(r.filter(|x: &LlmRun| keep(x))),
            Kind::Diffusion(r) => diffusion(r.filter(|x: &DiffusionRun| keep(x))),
        }
    }

    fn resolve<'a>(&self, name: &'a str) -> PyResult<&'a str> {
        match &self.kind {
            Kind::Llm(_) => resolve_field(name),
            Kind::Diffusion(_) => resolve_diffusion_field(name),
        }
        .map_err(records_error)
    }

    /// The field names and kinds of a row, in column order.
    fn fields(&self) -> Vec<(String, FieldKind)> {
        match &self.kind {
            Kind::Llm(r) => {
                let mut v: Vec<(String, FieldKind)> = llem_records::run::all_fields()
                    .map(|(n, k)| (n.to_string(), k))
                    .collect();
                v.extend(r.swept_paths().into_iter().map(|p| (p, FieldKind::OptStr)));
                v
            }
            Kind::Diffusion(_) => diffusion_fields()
                .into_iter()
                .map(|(n, k)| (n.to_string(), k))
                .collect(),
        }
    }

    fn value(&self, i: usize, field: &str) -> FieldValue<'_> {
        let v = match &self.kind {
            Kind::Llm(r) => r.get(i).and_then(|x| x.field(field)),
            Kind::Diffusion(r) => r.get(i).and_then(|x| x.field(field)).map(|v| match v {
                // Text in llem's Parquet (as pandas writes it, "true"/"false"), a bool in
                // Python as in the reference's record.
                FieldValue::Str(s) if field == "use_torch_compile" => FieldValue::Bool(s == "true"),
                v => v,
            }),
        };
        v.unwrap_or(FieldValue::Null)
    }

    fn count(&self) -> usize {
        match &self.kind {
            Kind::Llm(r) => r.len(),
            Kind::Diffusion(r) => r.len(),
        }
    }
}

/// A record's fields by name, for the filters both kinds share.
trait Fields {
    fn get(&self, field: &str) -> Option<FieldValue<'_>>;
}

impl Fields for LlmRun {
    fn get(&self, field: &str) -> Option<FieldValue<'_>> {
        self.field(field)
    }
}

impl Fields for DiffusionRun {
    fn get(&self, field: &str) -> Option<FieldValue<'_>> {
        self.field(field)
    }
}

fn in_range(v: Option<FieldValue<'_>>, exact: &[i64], min: Option<i64>, max: Option<i64>) -> bool {
    let Some(FieldValue::Int(x)) = v else {
        return false;
    };
    (exact.is_empty() || exact.contains(&x))
        && min.is_none_or(|m| x >= m)
        && max.is_none_or(|m| x <= m)
}

#[pymethods]
impl NativeRuns {
    /// Loads the LLM (or, with `diffusion`, the diffusion) runs of ML.ENERGY raw result
    /// trees: `(runs, issues)`.
    #[staticmethod]
    #[pyo3(signature = (roots, tasks = None, config_dir = None, n_workers = None, diffusion = false))]
    fn from_raw_results(
        py: Python<'_>,
        roots: Vec<PathBuf>,
        tasks: Option<Vec<String>>,
        config_dir: Option<PathBuf>,
        n_workers: Option<usize>,
        diffusion: bool,
    ) -> PyResult<(Self, Vec<(String, String)>)> {
        let tasks = tasks.map(|t| t.into_iter().collect::<BTreeSet<String>>());
        let loaded = py.detach(|| -> Result<_, RecordsError> {
            for r in &roots {
                if !r.exists() {
                    return Err(RecordsError::NotFound(r.clone()));
                }
            }
            if diffusion {
                let (mut d, issues) = diffusion::load_raw(&roots, config_dir.as_deref())?;
                if let Some(t) = &tasks {
                    d.retain(|r| t.contains(&r.task));
                }
                Ok((self::diffusion(DiffusionRuns::new(d)), issues_of(&issues)))
            } else {
                let opts = RawOptions {
                    tasks,
                    config_dir,
                    workers: n_workers,
                };
                let runs = Runs::from_raw_results(&roots, &opts)?;
                let issues = issues_of(runs.issues());
                Ok((llm(runs), issues))
            }
        });
        loaded.map_err(records_error)
    }

    /// Loads whatever `root` holds (compiled data, a raw tree, llem studies, llem 0.7
    /// bundles): `(llm, diffusion, issues)`.
    #[staticmethod]
    fn from_directory(py: Python<'_>, root: PathBuf) -> PyResult<Loaded> {
        let l = py
            .detach(|| llem_records::load_any(std::slice::from_ref(&root)))
            .map_err(records_error)?;
        let issues = issues_of(&l.issues);
        Ok((
            llm(Runs::new(l.runs, l.issues)),
            diffusion(DiffusionRuns::new(l.diffusion)),
            issues,
        ))
    }

    /// Reads a compiled `llm.parquet` (`diffusion=False`) or `diffusion.parquet`.
    #[staticmethod]
    #[pyo3(signature = (path, base_dir = None, diffusion = false))]
    fn from_parquet(
        py: Python<'_>,
        path: PathBuf,
        base_dir: Option<PathBuf>,
        diffusion: bool,
    ) -> PyResult<Self> {
        if !path.is_file() {
            return Err(pyo3::exceptions::PyFileNotFoundError::new_err(format!(
                "{}: no such file",
                path.display()
            )));
        }
        py.detach(|| {
            if diffusion {
                diffusion::read_parquet(&path, base_dir.as_deref())
                    .map(|d| self::diffusion(DiffusionRuns::new(d)))
            } else {
                Runs::from_parquet(&path, base_dir.as_deref()).map(llm)
            }
        })
        .map_err(records_error)
    }

    /// An empty collection of LLM (`diffusion=False`) or diffusion runs.
    #[staticmethod]
    fn empty(diffusion: bool) -> Self {
        if diffusion {
            self::diffusion(DiffusionRuns::default())
        } else {
            llm(Runs::default())
        }
    }

    /// These runs, then `other`'s (the records are copied once into the new collection).
    fn concat(&self, other: &Self) -> PyResult<Self> {
        match (&self.kind, &other.kind) {
            (Kind::Llm(a), Kind::Llm(b)) => {
                let mut issues = a.issues().to_vec();
                issues.extend_from_slice(b.issues());
                Ok(llm(Runs::new(
                    a.iter().chain(b.iter()).cloned().collect(),
                    issues,
                )))
            }
            (Kind::Diffusion(a), Kind::Diffusion(b)) => Ok(diffusion(DiffusionRuns::new(
                a.iter().chain(b.iter()).cloned().collect(),
            ))),
            _ => Err(pyo3::exceptions::PyTypeError::new_err(
                "cannot join LLM and diffusion runs",
            )),
        }
    }

    fn __len__(&self) -> usize {
        self.count()
    }

    /// Whether these are diffusion runs.
    #[getter]
    fn is_diffusion(&self) -> bool {
        matches!(self.kind, Kind::Diffusion(_))
    }

    /// The runs at `indices`, in that order.
    fn select(&self, indices: Vec<usize>) -> PyResult<Self> {
        let n = self.count();
        if let Some(bad) = indices.iter().find(|&&i| i >= n) {
            return Err(pyo3::exceptions::PyIndexError::new_err(format!(
                "run index {bad} out of range for {n} runs"
            )));
        }
        Ok(match &self.kind {
            Kind::Llm(r) => llm(r.pick(&indices)),
            Kind::Diffusion(r) => diffusion(r.pick(&indices)),
        })
    }

    /// Runs whose text `field` is one of `values`.
    fn one_of(&self, field: &str, values: Vec<String>) -> PyResult<Self> {
        let f = self.resolve(field)?;
        Ok(self.with(
            |get| matches!(get.get(f), Some(FieldValue::Str(s)) if values.iter().any(|v| v == s)),
        ))
    }

    /// Runs whose integer `field` is one of `exact` (any, when empty) and within
    /// `[min, max]`.
    #[pyo3(signature = (field, exact, min = None, max = None))]
    fn int_range(
        &self,
        field: &str,
        exact: Vec<i64>,
        min: Option<i64>,
        max: Option<i64>,
    ) -> PyResult<Self> {
        let f = self.resolve(field)?;
        Ok(self.with(|get| in_range(get.get(f), &exact, min, max)))
    }

    /// Runs meeting every condition (`max_num_seqs>=8`, `model_id~Qwen`: what `llem results query
    /// --where` takes).
    fn matching(&self, conditions: Vec<String>) -> PyResult<Self> {
        let parsed = conditions
            .iter()
            .map(|c| match &self.kind {
                Kind::Llm(_) => Condition::parse(c),
                Kind::Diffusion(_) => Condition::parse_with(c, resolve_diffusion_field),
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(records_error)?;
        Ok(self.with(|get| parsed.iter().all(|c| c.matches_value(get.get(&c.field)))))
    }

    /// Stable (`True`) or unstable runs.
    fn stability(&self, stable: bool) -> Self {
        self.with(|get| matches!(get.get("is_stable"), Some(FieldValue::Bool(b)) if b == stable))
    }

    /// Groups by `fields`: `[(key, runs)]` in order of first appearance, each key a tuple of
    /// typed values.
    fn group_by<'py>(
        &self,
        py: Python<'py>,
        fields: Vec<String>,
    ) -> PyResult<Vec<(Bound<'py, PyTuple>, Self)>> {
        let names: Vec<&str> = fields.iter().map(String::as_str).collect();
        let groups: Vec<NativeRuns> = match &self.kind {
            Kind::Llm(r) => r
                .group_by(&names)
                .map_err(records_error)?
                .into_iter()
                .map(|g| llm(g.runs))
                .collect(),
            Kind::Diffusion(r) => r
                .group_by(&names)
                .map_err(records_error)?
                .into_iter()
                .map(|g| diffusion(g.runs))
                .collect(),
        };
        let resolved: Vec<&str> = names
            .iter()
            .map(|n| self.resolve(n))
            .collect::<PyResult<_>>()?;
        let mut out = Vec::with_capacity(groups.len());
        for g in groups {
            let key: Vec<Bound<'py, PyAny>> = resolved
                .iter()
                .map(|f| value_to_py(py, g.value(0, f)))
                .collect::<PyResult<_>>()?;
            out.push((PyTuple::new(py, key)?, g));
        }
        Ok(out)
    }

    /// The field names of a row, in column order, with their kinds (`float?` may be None).
    fn schema(&self) -> Vec<(String, &'static str)> {
        self.fields()
            .into_iter()
            .map(|(n, k)| (n, kind_name(k)))
            .collect()
    }

    /// Every run as a dict of its fields.
    fn rows<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let fields = self.fields();
        let out = PyList::empty(py);
        for i in 0..self.count() {
            let d = PyDict::new(py);
            for (name, _) in &fields {
                d.set_item(name, value_to_py(py, self.value(i, name))?)?;
            }
            out.append(d)?;
        }
        Ok(out)
    }

    /// One field's values, in run order.
    fn column<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyList>> {
        let f = match &self.kind {
            Kind::Llm(_) if llem_records::run::is_config_path(name) => name,
            _ => self.resolve(name)?,
        };
        let out = PyList::empty(py);
        for i in 0..self.count() {
            out.append(value_to_py(py, self.value(i, f))?)?;
        }
        Ok(out)
    }

    /// The runs as one Arrow table, a column per field.
    fn table(&self, py: Python<'_>) -> PyResult<ArrowTable> {
        let batch = match &self.kind {
            Kind::Llm(r) => py.detach(|| r.to_record_batch()).map_err(records_error)?,
            Kind::Diffusion(_) => {
                let fields = diffusion_fields();
                batch_of(&fields, self.count(), |i, j| {
                    fields
                        .get(j)
                        .map_or(FieldValue::Null, |(name, _)| self.value(i, name))
                })?
            }
        };
        Ok(ArrowTable::new(batch))
    }

    /// Per-request output lengths (`results_path, task, model_id, num_gpus, max_num_seqs,
    /// output_len, success`).
    fn output_lengths(&self, py: Python<'_>, include_unsuccessful: bool) -> PyResult<ArrowTable> {
        let r = self.llm_only("output_lengths")?;
        let rows = py
            .detach(|| r.output_lengths(include_unsuccessful))
            .map_err(records_error)?;
        let fields = [("output_len", FieldKind::Int), ("success", FieldKind::Bool)];
        per_run_table(
            &rows,
            |x| &x.run,
            &fields,
            |x, j| match j {
                0 => FieldValue::Int(x.output_len),
                _ => FieldValue::Bool(x.success),
            },
        )
    }

    /// Inter-token latency samples, seconds (`results_path, task, model_id, num_gpus,
    /// max_num_seqs, itl_s`).
    fn inter_token_latencies(&self, py: Python<'_>) -> PyResult<ArrowTable> {
        let r = self.llm_only("inter_token_latencies")?;
        let rows = py
            .detach(|| r.inter_token_latencies())
            .map_err(records_error)?;
        let fields = [("itl_s", FieldKind::Float)];
        per_run_table(
            &rows,
            |x| &x.run,
            &fields,
            |x, _| FieldValue::Float(x.itl_s),
        )
    }

    /// Each llem run's measurement window in time bins (`results_path, task, model_id,
    /// num_gpus, max_num_seqs, start_s, end_s, energy_j, idle_energy_j, power_w,
    /// output_tokens, requests_started, requests_finished, mean_in_flight`); runs without
    /// bins (not llem's) add no rows.
    fn time_bins(&self, py: Python<'_>) -> PyResult<ArrowTable> {
        let r = self.llm_only("time_bins")?;
        let rows = py.detach(|| r.time_bins()).map_err(records_error)?;
        let fields = [
            ("start_s", FieldKind::Float),
            ("end_s", FieldKind::Float),
            ("energy_j", FieldKind::Float),
            ("idle_energy_j", FieldKind::Float),
            ("power_w", FieldKind::Float),
            ("output_tokens", FieldKind::Int),
            ("requests_started", FieldKind::Int),
            ("requests_finished", FieldKind::Int),
            ("mean_in_flight", FieldKind::Float),
        ];
        per_run_table(
            &rows,
            |x| &x.run,
            &fields,
            |x, j| {
                let b = &x.bin;
                match j {
                    0 => FieldValue::Float(b.start_s),
                    1 => FieldValue::Float(b.end_s),
                    2 => FieldValue::Float(b.energy_j),
                    3 => FieldValue::Float(b.idle_energy_j),
                    4 => FieldValue::Float(b.power_w),
                    5 => FieldValue::Int(i64::try_from(b.output_tokens).unwrap_or(i64::MAX)),
                    6 => FieldValue::Int(i64::from(b.requests_started)),
                    7 => FieldValue::Int(i64::from(b.requests_finished)),
                    _ => FieldValue::Float(b.mean_in_flight),
                }
            },
        )
    }

    /// Power or temperature timelines (`results_path, task, model_id, num_gpus,
    /// max_num_seqs, domain, batch_size, timestamp, relative_time_s, value, metric`).
    /// For diffusion runs the series is whole and `max_num_seqs` is the batch size.
    fn timelines(&self, py: Python<'_>, metric: &str) -> PyResult<ArrowTable> {
        let (domain, rows) = match &self.kind {
            Kind::Llm(r) => ("llm", py.detach(|| r.timelines(metric))),
            Kind::Diffusion(r) => ("diffusion", py.detach(|| r.timelines(metric))),
        };
        let rows = rows.map_err(records_error)?;
        let fields = [
            ("domain", FieldKind::Str),
            ("batch_size", FieldKind::Int),
            ("timestamp", FieldKind::Float),
            ("relative_time_s", FieldKind::Float),
            ("value", FieldKind::Float),
            ("metric", FieldKind::Str),
        ];
        per_run_table(
            &rows,
            |x| &x.run,
            &fields,
            |x, j| match j {
                0 => FieldValue::Str(domain),
                1 => FieldValue::Int(x.run.max_num_seqs),
                2 => FieldValue::Float(x.timestamp),
                3 => FieldValue::Float(x.relative_time_s),
                4 => FieldValue::Float(x.value),
                _ => FieldValue::Str(&x.metric),
            },
        )
    }
}

/// Rows extracted from runs' raw files as a table: the run's key columns (`results_path,
/// task, model_id, num_gpus, max_num_seqs`), then `fields`, the `j`-th of row `x` being
/// `value(x, j)`.
fn per_run_table<'a, T>(
    rows: &'a [T],
    key: impl Fn(&'a T) -> &'a RunKey,
    fields: &[(&str, FieldKind)],
    value: impl Fn(&'a T, usize) -> FieldValue<'a>,
) -> PyResult<ArrowTable> {
    let mut all = vec![
        ("results_path", FieldKind::Str),
        ("task", FieldKind::Str),
        ("model_id", FieldKind::Str),
        ("num_gpus", FieldKind::Int),
        ("max_num_seqs", FieldKind::Int),
    ];
    let n_key = all.len();
    all.extend_from_slice(fields);
    let batch = batch_of(&all, rows.len(), |i, j| {
        let Some(x) = rows.get(i) else {
            return FieldValue::Null;
        };
        let k = key(x);
        match j {
            0 => FieldValue::Str(&k.results_path),
            1 => FieldValue::Str(&k.task),
            2 => FieldValue::Str(&k.model_id),
            3 => FieldValue::Int(k.num_gpus),
            4 => FieldValue::Int(k.max_num_seqs),
            j => value(x, j - n_key),
        }
    })?;
    Ok(ArrowTable::new(batch))
}

impl NativeRuns {
    fn llm_only(&self, what: &str) -> PyResult<&Runs> {
        match &self.kind {
            Kind::Llm(r) => Ok(r),
            Kind::Diffusion(_) => Err(LlemError::new_err(format!(
                "{what} reads LLM runs' per-request files; diffusion runs have none"
            ))),
        }
    }
}

/// Adds this module's classes to `m`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeRuns>()?;
    m.add_class::<ArrowTable>()?;
    Ok(())
}
