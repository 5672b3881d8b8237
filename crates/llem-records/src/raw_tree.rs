//! The ML.ENERGY raw result tree (reference §2–§9): discovery of `results.json` files,
//! parsing in parallel, stability over every discovered run of every root, and one
//! [`LlmRun`] per run that builds. Runs that do not build are reported with the reason.

use std::collections::{BTreeSet, HashMap};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::itl::{self, ItlStats};
use super::lenient::{NumberList, RawPrometheus, RawResults};
use super::parallelism::{self, Parallelism};
use super::raw_names::{self, ModelFacts, RunConfigName};
use super::run::{self, LlemFields, LlmRun, RunSource};
use super::stability::{self, RunFacts};
use super::{LoadIssue, RecordsError};
use crate::RunError;

/// Tasks the benchmark defines (used only to describe a tree; any task name is accepted).
pub const KNOWN_TASKS: &[&str] = &[
    "gpqa",
    "lm-arena-chat",
    "sourcegraph-fim",
    "image-chat",
    "video-chat",
];

/// How to load a raw tree.
#[derive(Clone, Debug, Default)]
pub struct RawOptions {
    /// Keep only these tasks.
    pub tasks: Option<BTreeSet<String>>,
    /// The config directory (`.../configs/vllm`); default: the first root that has one.
    pub config_dir: Option<PathBuf>,
    /// Parser threads; default: the machine's parallelism.
    pub workers: Option<usize>,
}

/// The runs that built and the ones that did not.
#[derive(Clone, Debug, Default)]
pub struct RawLoad {
    /// Records, in collection order (§10).
    pub runs: Vec<LlmRun>,
    /// Runs left out, with why.
    pub issues: Vec<LoadIssue>,
}

/// Where a results file sits, read from its path below the benchmark root (§2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunPath {
    /// Benchmark task.
    pub task: String,
    /// Organisation (first half of the model id).
    pub org: String,
    /// Model directory (second half; default nickname).
    pub model: String,
    /// GPU SKU directory, case preserved.
    pub gpu_sku: String,
    /// The run directory name.
    pub run_config: String,
}

impl RunPath {
    /// `org/model`.
    pub fn model_id(&self) -> String {
        format!("{}/{}", self.org, self.model)
    }

    /// `<configs>/<task>/<org>/<model>`: the model's directory in a config tree, holding
    /// `model_info.json` and a directory per GPU SKU.
    pub fn model_config_dir(&self, configs: &Path) -> PathBuf {
        configs.join(&self.task).join(&self.org).join(&self.model)
    }

    /// The facts of `model_info.json` in the model's config directory.
    pub(super) fn model_facts(&self, configs: &Path) -> Result<ModelFacts, RunError> {
        let f = self.model_config_dir(configs).join("model_info.json");
        let v: serde_json::Value =
            read_json(&f).map_err(|e| RunError::file(f.display().to_string(), e))?;
        raw_names::model_facts(&v, &self.model_id(), &self.model)
    }
}

/// The components after `<domain>/` of a path below a benchmark root, when the path is in
/// that domain's `current` snapshot and has at least `min` of them (read by position, as
/// the reference parser does).
pub(crate) fn snapshot_components<'a>(
    rel: &'a Path,
    domain: &str,
    min: usize,
) -> Option<Vec<&'a str>> {
    let parts: Vec<&str> = rel
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => s.to_str(),
            _ => None,
        })
        .collect();
    let (first, rest) = parts.split_first()?;
    (*first == domain && rest.len() >= min && rest.get(1) == Some(&"current"))
        .then(|| rest.to_vec())
}

/// Reads the components after `llm/` by position, as the reference parser does; `None`
/// when the path is not an LLM `current` snapshot or has too few components.
pub fn parse_run_path(rel: &Path) -> Option<RunPath> {
    let rest = snapshot_components(rel, "llm", 11)?;
    let at = |i: usize| rest.get(i).map(|s| (*s).to_string());
    Some(RunPath {
        task: at(4)?,
        org: at(6)?,
        model: at(7)?,
        gpu_sku: at(8)?,
        run_config: at(9)?,
    })
}

/// Every file named `name` below `dir`, in name order (symbolic links to directories
/// followed, except back up the tree).
pub(crate) fn find_files(dir: &Path, name: &str, out: &mut Vec<PathBuf>) {
    let mut found = vec![Vec::new()];
    find_files_named(dir, &[name], &[], &mut found);
    out.extend(found.into_iter().flatten());
}

/// The files below `dir` named each of `names` (`out[i]` for `names[i]`), in one walk that
/// does not enter the directories in `skip` (roots another loader reads).
pub(crate) fn find_files_named(
    dir: &Path,
    names: &[&str],
    skip: &[PathBuf],
    out: &mut [Vec<PathBuf>],
) {
    let canon = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mut found = Vec::new();
    let walk = Walk {
        names,
        sibling: None,
        skip,
    };
    walk.dir(dir, &canon, &mut found);
    for f in found {
        if let Some(v) = out.get_mut(f.name) {
            v.push(f.path);
        }
    }
}

/// One discovered results file.
#[derive(Clone, Debug)]
struct Candidate {
    results: PathBuf,
    root: PathBuf,
    path: RunPath,
    /// The file's canonical path, which identifies it across roots.
    key: PathBuf,
    /// Whether `prometheus.json` is beside it.
    prometheus: bool,
}

/// A file the walk found.
struct Found {
    /// Which of the names looked for.
    name: usize,
    path: PathBuf,
    /// Its canonical path.
    key: PathBuf,
    /// Whether the sibling asked for is beside it.
    sibling: bool,
}

/// A walk for files by name.
struct Walk<'a> {
    /// The file names looked for.
    names: &'a [&'a str],
    /// A file whose presence beside a found one is noted.
    sibling: Option<&'a str>,
    /// Directories not entered.
    skip: &'a [PathBuf],
}

impl Walk<'_> {
    /// Every file named one of `names` below `dir`, whose canonical path is `canon`, in name
    /// order. One directory read per directory and no call per file: canonical paths are
    /// built while walking (a symbolic link to a directory is resolved once, where it is
    /// followed; one back up the tree is skipped), and whether `sibling` is beside a found
    /// file comes from the same listing. Loading 10 000 raw runs canonicalised every path (a
    /// readlink per component) and probed every directory for `prometheus.json` before.
    fn dir(&self, dir: &Path, canon: &Path, out: &mut Vec<Found>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut entries: Vec<_> = entries.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        // (is a directory, is a symbolic link). Anything else named as looked for is found,
        // whatever it is: the reader refuses what is not a regular file (a FIFO, a dangling
        // link) and the load reports it, rather than the walk skipping it unsaid.
        let kind = |e: &std::fs::DirEntry| {
            let t = e.file_type().ok()?;
            if t.is_symlink() {
                Some((std::fs::metadata(e.path()).is_ok_and(|m| m.is_dir()), true))
            } else {
                Some((t.is_dir(), false))
            }
        };
        let has_sibling = self
            .sibling
            .is_some_and(|sib| entries.iter().any(|e| e.file_name() == sib));
        let named = |e: &std::fs::DirEntry| self.names.iter().position(|n| e.file_name() == *n);
        for e in &entries {
            let Some((is_dir, link)) = kind(e) else {
                continue;
            };
            let p = e.path();
            match (is_dir, named(e)) {
                // A directory where the file should be: found, so the reader reports it.
                (true, Some(name)) => out.push(Found {
                    name,
                    path: p,
                    key: canon.join(e.file_name()),
                    sibling: has_sibling,
                }),
                (true, None) => {
                    if self.skip.contains(&p) {
                        continue;
                    }
                    let c = if link {
                        match std::fs::canonicalize(&p) {
                            // A link back up the tree would be walked forever.
                            Ok(c) if canon.starts_with(&c) => continue,
                            Ok(c) => c,
                            Err(_) => continue,
                        }
                    } else {
                        canon.join(e.file_name())
                    };
                    self.dir(&p, &c, out);
                }
                (false, Some(name)) => {
                    let key = if link {
                        std::fs::canonicalize(&p).unwrap_or_else(|_| canon.join(e.file_name()))
                    } else {
                        canon.join(e.file_name())
                    };
                    out.push(Found {
                        name,
                        path: p,
                        key,
                        sibling: has_sibling,
                    });
                }
                (false, None) => {}
            }
        }
    }
}

/// The `results.json` files below `dir` (canonical path `canon`), noting a `prometheus.json`
/// beside each.
fn walk_results(dir: &Path, canon: &Path, out: &mut Vec<Found>) {
    Walk {
        names: &["results.json"],
        sibling: Some("prometheus.json"),
        skip: &[],
    }
    .dir(dir, canon, out);
}

/// The benchmark root a directory inside a tree belongs to (§2.1 sub-roots).
fn infer_root(dir: &Path) -> Option<PathBuf> {
    if dir.file_name().is_some_and(|n| n == "run") {
        return dir.ancestors().nth(4).map(Path::to_path_buf);
    }
    dir.ancestors()
        .find(|a| a.join("llm").is_dir() || a.join("diffusion").is_dir())
        .map(Path::to_path_buf)
}

fn discover(root: &Path, tasks: Option<&BTreeSet<String>>) -> Vec<Candidate> {
    let keep = |p: &RunPath| tasks.is_none_or(|t| t.contains(&p.task));
    let canon_root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let candidates = |files: Vec<Found>, base: &Path| -> Vec<Candidate> {
        files
            .into_iter()
            .filter_map(|f| {
                let path = parse_run_path(f.path.strip_prefix(base).ok()?)?;
                keep(&path).then(|| Candidate {
                    results: f.path,
                    root: base.to_path_buf(),
                    path,
                    key: f.key,
                    prometheus: f.sibling,
                })
            })
            .collect()
    };
    let mut files = Vec::new();
    if let Ok(families) = std::fs::read_dir(root.join("llm")) {
        let mut families: Vec<_> = families.flatten().map(|e| e.file_name()).collect();
        families.sort();
        for fam in families {
            let rel = Path::new("llm").join(fam).join("current").join("run");
            walk_results(&root.join(&rel), &canon_root.join(&rel), &mut files);
        }
    }
    if !files.is_empty() {
        return candidates(files, root);
    }
    // A directory inside a tree (§2.1 sub-roots): its runs, named from the tree's root.
    let Some(base) = infer_root(root) else {
        return Vec::new();
    };
    walk_results(root, &canon_root, &mut files);
    candidates(files, &base)
}

/// What the parallel pass reads from one run's files.
struct Parsed {
    results: Result<RawResults, RunError>,
    /// `Ok(None)`: no file; `Err`: a file that is not JSON.
    prometheus: Result<Option<RawPrometheus>, RunError>,
    itl: Option<ItlStats>,
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, RunError> {
    let bytes = llem_config::files::read_record(path).map_err(|e| RunError::Read(e.to_string()))?;
    serde_json::from_slice(&bytes).map_err(|e| RunError::Read(e.to_string()))
}

/// Pooled smoothed ITLs of successful requests; `None` when a successful request has an
/// unconvertible entry or nothing usable is left (§6.2, §8).
fn itl_stats(r: &RawResults) -> Option<ItlStats> {
    let reqs = r.results.as_ref()?;
    let mut lists: Vec<&[f64]> = Vec::with_capacity(reqs.len());
    for q in reqs.iter().filter(|q| q.ok()) {
        match &q.itl {
            NumberList::Values(v) => lists.push(v),
            NumberList::Missing => {}
            NumberList::Invalid => return None,
        }
    }
    itl::run_stats(lists)
}

fn parse_one(c: &Candidate) -> Parsed {
    let results = read_json::<RawResults>(&c.results);
    let prometheus = if c.prometheus {
        read_json::<RawPrometheus>(&c.results.with_file_name("prometheus.json")).map(Some)
    } else {
        Ok(None)
    };
    let itl = results.as_ref().ok().and_then(itl_stats);
    Parsed {
        results,
        prometheus,
        itl,
    }
}

/// Runs `f` over `items` on `workers` threads, results in input order.
pub(crate) fn parallel_map<T: Sync, R: Send>(
    items: &[T],
    workers: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let workers = workers.clamp(1, items.len().max(1));
    let mut chunks: Vec<Vec<(usize, R)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        out.push((i, f(item)));
                    }
                    out
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    let mut all: Vec<(usize, R)> = chunks.drain(..).flatten().collect();
    all.sort_by_key(|(i, _)| *i);
    all.into_iter().map(|(_, r)| r).collect()
}

/// Default worker count.
pub(crate) fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// Model and parallelism configuration, read once per (task, model, SKU).
#[derive(Default)]
struct ConfigCache {
    dir: Option<PathBuf>,
    models: HashMap<(String, String), Result<ModelFacts, RunError>>,
    servers: HashMap<(String, String, String), Result<String, RunError>>,
}

impl ConfigCache {
    fn dir(&self) -> Result<PathBuf, RunError> {
        self.dir.clone().ok_or(RunError::NoConfigDir)
    }

    fn model(&mut self, p: &RunPath) -> Result<ModelFacts, RunError> {
        let dir = self.dir()?;
        let key = (p.task.clone(), p.model_id());
        self.models
            .entry(key)
            .or_insert_with(|| p.model_facts(&dir))
            .clone()
    }

    fn parallelism(&mut self, p: &RunPath, num_gpus: i64) -> Result<Parallelism, RunError> {
        let dir = self.dir()?;
        let key = (p.task.clone(), p.model_id(), p.gpu_sku.clone());
        let text = self
            .servers
            .entry(key)
            .or_insert_with(|| {
                let f = p
                    .model_config_dir(&dir)
                    .join(&p.gpu_sku)
                    .join("monolithic.config.yaml");
                llem_config::files::read_record_string(&f)
                    .map_err(|e| RunError::file(f.display().to_string(), e))
            })
            .clone()?;
        parallelism::from_monolithic_config(&text, num_gpus)
            .map_err(|e| RunError::file("monolithic.config.yaml", e))
    }
}

/// Loads every LLM run under `roots` (benchmark roots or directories inside one).
pub fn load_raw(roots: &[PathBuf], opts: &RawOptions) -> Result<RawLoad, RecordsError> {
    let mut seen = BTreeSet::new();
    let mut cands = Vec::new();
    for root in roots {
        if !root.is_dir() {
            return Err(RecordsError::NotFound(root.clone()));
        }
        for c in discover(root, opts.tasks.as_ref()) {
            if seen.insert(c.key.clone()) {
                cands.push(c);
            }
        }
    }
    let config_dir = opts.config_dir.clone().or_else(|| {
        roots
            .iter()
            .chain(cands.iter().map(|c| &c.root))
            .map(|r| r.join("configs").join("vllm"))
            .find(|d| d.is_dir())
    });
    let parsed = parallel_map(
        &cands,
        opts.workers.unwrap_or_else(default_workers),
        parse_one,
    );

    let mut issues = Vec::new();
    let mut members: Vec<(usize, RunConfigName, RunFacts)> = Vec::new();
    for (i, (c, p)) in cands.iter().zip(&parsed).enumerate() {
        let cfg = raw_names::parse_run_config(&c.path.run_config);
        let (Some(num_gpus), Some(_)) = (cfg.num_gpus, cfg.max_num_seqs) else {
            let missing = if cfg.max_num_seqs.is_none() {
                "max_num_seqs"
            } else {
                "num_gpus"
            };
            issues.push(LoadIssue::new(
                &c.results,
                format!(
                    "run directory name {:?} has no integer {missing}",
                    c.path.run_config
                ),
            ));
            continue;
        };
        let avg_batch = match &p.prometheus {
            Ok(Some(pr)) => pr
                .steady_state_stats
                .as_ref()
                .and_then(|s| s.num_requests_running.0),
            _ => None,
        };
        let facts = RunFacts {
            model_id: c.path.model_id(),
            task: c.path.task.clone(),
            gpu_model: c.path.gpu_sku.to_uppercase(),
            num_gpus,
            max_num_seqs: cfg.max_num_seqs,
            load_error: p.results.as_ref().err().map(ToString::to_string),
            steady_state_duration_s: p
                .results
                .as_ref()
                .ok()
                .and_then(|r| r.steady_state_duration.0),
            energy_per_token_j: p.results.as_ref().ok().and_then(|r| r.energy_per_token()),
            avg_batch_size: avg_batch,
            variant: String::new(),
        };
        members.push((i, cfg, facts));
    }
    let facts: Vec<RunFacts> = members.iter().map(|(_, _, f)| f.clone()).collect();
    let verdicts = stability::judge(&facts);

    let mut configs = ConfigCache {
        dir: config_dir,
        ..ConfigCache::default()
    };
    let mut runs = Vec::new();
    for ((i, cfg, f), verdict) in members.iter().zip(verdicts) {
        let (Some(c), Some(p)) = (cands.get(*i), parsed.get(*i)) else {
            continue;
        };
        match build(c, p, cfg, f, &mut configs) {
            Ok(mut r) => {
                r.is_stable = verdict.is_stable;
                r.unstable_reason = verdict.unstable_reason;
                runs.push(r);
            }
            Err(reason) => issues.push(LoadIssue::new(&c.results, reason.to_string())),
        }
    }
    sort_runs(&mut runs);
    Ok(RawLoad { runs, issues })
}

/// The reference order (§10), ties broken by seed and path so loads are deterministic.
pub fn sort_runs(runs: &mut [LlmRun]) {
    runs.sort_by(|a, b| {
        a.sort_key()
            .cmp(&b.sort_key())
            .then(a.seed.cmp(&b.seed))
            .then(a.results_path.cmp(&b.results_path))
    });
}

fn build(
    c: &Candidate,
    p: &Parsed,
    cfg: &RunConfigName,
    f: &RunFacts,
    configs: &mut ConfigCache,
) -> Result<LlmRun, RunError> {
    let r = p
        .results
        .as_ref()
        .map_err(|e| RunError::file("results.json", e))?;
    if let Err(e) = &p.prometheus {
        return Err(RunError::file("prometheus.json", e));
    }
    let d = r
        .steady_state_duration
        .0
        .filter(|d| *d > 0.0)
        .ok_or(RunError::Unusable(
            "steady_state_duration missing or not positive",
        ))?;
    let e_total = r
        .steady_state_energy
        .0
        .ok_or(RunError::Unusable("steady_state_energy missing"))?;
    let e = r.energy_per_token().ok_or(RunError::Unusable(
        "steady_state_energy_per_token and energy_per_token_joules both missing",
    ))?;
    let derived = run::derive(
        e_total,
        d,
        e,
        r.output_throughput.0,
        r.completed.0,
        r.total_output_tokens.0,
    )
    .ok_or(RunError::Unusable(
        "energy per token <= 0 and no output_throughput to fall back on",
    ))?;
    let model = configs.model(&c.path)?;
    let par = configs.parallelism(&c.path, f.num_gpus)?;
    let itl = p.itl.ok_or(RunError::Unusable(
        "no usable inter-token latency in any successful request",
    ))?;
    let prom = c.results.with_file_name("prometheus.json");
    Ok(LlmRun {
        domain: "llm".into(),
        task: c.path.task.clone(),
        model_id: f.model_id.clone(),
        nickname: model.nickname,
        architecture: model.architecture,
        total_params_billions: model.total_params_billions,
        activated_params_billions: model.activated_params_billions,
        weight_precision: model.weight_precision,
        gpu_model: f.gpu_model.clone(),
        num_gpus: f.num_gpus,
        max_num_seqs: cfg.max_num_seqs.unwrap_or_default(),
        seed: cfg.seed,
        num_request_repeats: cfg.num_request_repeats,
        tensor_parallel: par.tensor,
        expert_parallel: par.expert,
        data_parallel: par.data,
        steady_state_energy_joules: e_total,
        steady_state_duration_seconds: d,
        energy_per_token_joules: e,
        energy_per_request_joules: derived.energy_per_request_joules,
        output_throughput_tokens_per_sec: derived.output_throughput_tokens_per_sec,
        request_throughput_req_per_sec: derived.request_throughput_req_per_sec,
        avg_power_watts: derived.avg_power_watts,
        total_output_tokens: r.total_output_tokens.0,
        completed_requests: r.completed.0,
        avg_output_len: derived.avg_output_len,
        mean_itl_ms: itl.mean_ms,
        median_itl_ms: itl.p50_ms,
        p50_itl_ms: itl.p50_ms,
        p90_itl_ms: itl.p90_ms,
        p95_itl_ms: itl.p95_ms,
        p99_itl_ms: itl.p99_ms,
        avg_batch_size: f.avg_batch_size,
        is_stable: true,
        unstable_reason: String::new(),
        results_path: c.results.to_string_lossy().into_owned(),
        prometheus_path: prom.to_string_lossy().into_owned(),
        extra: LlemFields {
            source: Some(RunSource::MlEnergyRaw),
            engine: Some("vllm".into()),
            ..LlemFields::default()
        },
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn run_paths_by_position() {
        let p = parse_run_path(Path::new(
            "llm/h100/current/run/llm/gpqa/results/Qwen/Qwen3-8B/H100/num_gpus+1+max_num_seqs+64/results.json",
        ))
        .unwrap();
        assert_eq!(p.task, "gpqa");
        assert_eq!(p.model_id(), "Qwen/Qwen3-8B");
        assert_eq!(p.gpu_sku, "H100");
        assert_eq!(p.run_config, "num_gpus+1+max_num_seqs+64");
        assert!(
            parse_run_path(Path::new(
                "llm/h100/old/run/llm/gpqa/results/Q/M/H100/x/results.json"
            ))
            .is_none()
        );
        assert!(parse_run_path(Path::new("llm/h100/current/run/llm/gpqa/results.json")).is_none());
    }

    #[test]
    fn parallel_map_keeps_order() {
        let v: Vec<u32> = (0..1000).collect();
        let out = parallel_map(&v, 4, |x| x * 2);
        assert_eq!(out, v.iter().map(|x| x * 2).collect::<Vec<_>>());
        assert!(parallel_map(&Vec::<u32>::new(), 4, |x| *x).is_empty());
    }
}
