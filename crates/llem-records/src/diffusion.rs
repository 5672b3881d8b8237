//! Diffusion runs (seed 002 `DiffusionRun`, reference §13): text-to-image and text-to-video
//! benchmark runs from a raw tree or `runs/diffusion.parquet`. No stability rules apply.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::lenient::Lenient;
use super::raw_tree::{default_workers, find_files, parallel_map};
use super::run::{FieldKind, FieldValue};
use super::{LoadIssue, RecordsError, compiled, raw_names};
use llem_results::parquet_io;

/// One diffusion benchmark run.
#[derive(Clone, Debug, PartialEq)]
pub struct DiffusionRun {
    /// Always `diffusion`.
    pub domain: String,
    /// `text-to-image` or `text-to-video`.
    pub task: String,
    /// `org/model`.
    pub model_id: String,
    /// Display name.
    pub nickname: String,
    /// Total parameters, billions.
    pub total_params_billions: f64,
    /// Active parameters, billions.
    pub activated_params_billions: f64,
    /// Weight precision.
    pub weight_precision: String,
    /// GPU model (the family directory, upper-cased).
    pub gpu_model: String,
    /// GPUs (Ulysses × ring).
    pub num_gpus: i64,
    /// Generations per batch.
    pub batch_size: i64,
    /// Denoising steps.
    pub inference_steps: Option<i64>,
    /// Output height, px.
    pub height: i64,
    /// Output width, px.
    pub width: i64,
    /// Video frames.
    pub num_frames: Option<i64>,
    /// Video frames per second.
    pub fps: Option<i64>,
    /// Ulysses sequence-parallel degree.
    pub ulysses_degree: Option<i64>,
    /// Ring-attention degree.
    pub ring_degree: Option<i64>,
    /// torch.compile on.
    pub use_torch_compile: Option<bool>,
    /// Mean batch latency, s.
    pub batch_latency_s: f64,
    /// Mean power, W.
    pub avg_power_watts: f64,
    /// Energy per generated image or video, J.
    pub energy_per_generation_joules: f64,
    /// Generations per second.
    pub throughput_generations_per_sec: f64,
    /// The raw `results.json`.
    pub results_path: String,
}

/// The diffusion fields in column order.
pub const DIFFUSION_FIELDS: &[(&str, FieldKind)] = &[
    ("domain", FieldKind::Str),
    ("task", FieldKind::Str),
    ("model_id", FieldKind::Str),
    ("nickname", FieldKind::Str),
    ("total_params_billions", FieldKind::Float),
    ("activated_params_billions", FieldKind::Float),
    ("weight_precision", FieldKind::Str),
    ("gpu_model", FieldKind::Str),
    ("num_gpus", FieldKind::Int),
    ("batch_size", FieldKind::Int),
    ("inference_steps", FieldKind::OptInt),
    ("height", FieldKind::Int),
    ("width", FieldKind::Int),
    ("num_frames", FieldKind::OptInt),
    ("fps", FieldKind::OptInt),
    ("ulysses_degree", FieldKind::OptInt),
    ("ring_degree", FieldKind::OptInt),
    ("use_torch_compile", FieldKind::OptStr),
    ("batch_latency_s", FieldKind::Float),
    ("avg_power_watts", FieldKind::Float),
    ("energy_per_generation_joules", FieldKind::Float),
    ("throughput_generations_per_sec", FieldKind::Float),
    ("results_path", FieldKind::Str),
];

impl DiffusionRun {
    /// The value of field `name`.
    pub fn field(&self, name: &str) -> Option<FieldValue<'_>> {
        use FieldValue::{Float, Int, Null, Str};
        let oi = |v: Option<i64>| v.map_or(Null, Int);
        Some(match name {
            "domain" => Str(&self.domain),
            "task" => Str(&self.task),
            "model_id" => Str(&self.model_id),
            "nickname" => Str(&self.nickname),
            "total_params_billions" => Float(self.total_params_billions),
            "activated_params_billions" => Float(self.activated_params_billions),
            "weight_precision" => Str(&self.weight_precision),
            "gpu_model" => Str(&self.gpu_model),
            "num_gpus" => Int(self.num_gpus),
            "batch_size" => Int(self.batch_size),
            "inference_steps" => oi(self.inference_steps),
            "height" => Int(self.height),
            "width" => Int(self.width),
            "num_frames" => oi(self.num_frames),
            "fps" => oi(self.fps),
            "ulysses_degree" => oi(self.ulysses_degree),
            "ring_degree" => oi(self.ring_degree),
            // Stored as text so pandas readers see "true"/"false"/null alike.
            "use_torch_compile" => self
                .use_torch_compile
                .map_or(Null, |b| Str(if b { "true" } else { "false" })),
            "batch_latency_s" => Float(self.batch_latency_s),
            "avg_power_watts" => Float(self.avg_power_watts),
            "energy_per_generation_joules" => Float(self.energy_per_generation_joules),
            "throughput_generations_per_sec" => Float(self.throughput_generations_per_sec),
            "results_path" => Str(&self.results_path),
            _ => return None,
        })
    }

    /// Whether this is a text-to-image run.
    pub fn is_text_to_image(&self) -> bool {
        self.task == "text-to-image"
    }

    /// Whether this is a text-to-video run.
    pub fn is_text_to_video(&self) -> bool {
        self.task == "text-to-video"
    }
}

#[derive(Debug, Default, Deserialize)]
struct Iteration {
    #[serde(default)]
    gpu_energy: Option<serde_json::Value>,
    #[serde(default)]
    time: Lenient,
}

#[derive(Debug, Default, Deserialize)]
struct RawDiffusion {
    #[serde(default)]
    batch_size: Lenient,
    #[serde(default)]
    ulysses_degree: Lenient,
    #[serde(default)]
    ring_degree: Lenient,
    #[serde(default)]
    num_frames: Lenient,
    #[serde(default)]
    fps: Lenient,
    #[serde(default)]
    iteration_energy_measurements: Vec<Iteration>,
}

struct DPath {
    family: String,
    task: String,
    org: String,
    model: String,
    run_config: String,
}

fn parse_path(rel: &Path) -> Option<DPath> {
    let rest = super::raw_tree::snapshot_components(rel, "diffusion", 9)?;
    let at = |i: usize| rest.get(i).map(|s| (*s).to_string());
    Some(DPath {
        family: at(0)?,
        task: at(4)?,
        org: at(5)?,
        model: at(6)?,
        run_config: at(7)?,
    })
}

fn as_int(x: Option<f64>) -> Option<i64> {
    x.filter(|v| v.is_finite()).map(|v| v as i64)
}

fn build(file: &Path, p: &DPath, cfg_dir: &Path) -> Result<DiffusionRun, crate::RunError> {
    use crate::RunError;
    let bytes = llem_config::files::read_record(file).map_err(|e| RunError::Read(e.to_string()))?;
    let raw: RawDiffusion =
        serde_json::from_slice(&bytes).map_err(|e| RunError::file("results.json", e))?;
    let kv: BTreeMap<&str, &str> = p
        .run_config
        .split('+')
        .filter_map(|t| t.split_once('-'))
        .collect();
    let int = |k: &str| kv.get(k).and_then(|v| raw_names::python_int(v));
    let batch = int("batch")
        .or(as_int(raw.batch_size.0))
        .ok_or(RunError::Unusable(
            "no batch size (run name `batch-N` or results.batch_size)",
        ))?;
    let uly = int("uly").or(as_int(raw.ulysses_degree.0));
    let ring = int("ring").or(as_int(raw.ring_degree.0));
    let (height, width) = kv
        .get("size")
        .and_then(|s| s.split_once('x'))
        .and_then(|(h, w)| Some((raw_names::python_int(h)?, raw_names::python_int(w)?)))
        .ok_or(RunError::Unusable("no size-HxW in the run directory name"))?;
    let mut energies = Vec::new();
    let mut times = Vec::new();
    for it in &raw.iteration_energy_measurements {
        let (Some(serde_json::Value::Object(g)), Some(t)) = (&it.gpu_energy, it.time.0) else {
            continue;
        };
        if t <= 0.0 {
            continue;
        }
        energies.push(g.values().filter_map(super::raw_number).sum::<f64>());
        times.push(t);
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    if times.is_empty() {
        return Err(RunError::Unusable(
            "no iteration_energy_measurements with a positive time",
        ));
    }
    let (e, t) = (mean(&energies), mean(&times));
    let model_id = format!("{}/{}", p.org, p.model);
    let info_path = cfg_dir
        .join(&p.task)
        .join(&p.org)
        .join(&p.model)
        .join("model_info.json");
    let info: serde_json::Value = serde_json::from_slice(
        &llem_config::files::read_record(&info_path)
            .map_err(|e| RunError::file(info_path.display().to_string(), e))?,
    )
    .map_err(|e| RunError::file(info_path.display().to_string(), e))?;
    let m = raw_names::model_facts(&info, &model_id, &p.model)?;
    let weight_precision = info
        .get("weight_precision")
        .and_then(|v| v.as_str())
        .unwrap_or("bfloat16")
        .to_string();
    Ok(DiffusionRun {
        domain: "diffusion".into(),
        task: p.task.clone(),
        model_id,
        nickname: m.nickname,
        total_params_billions: m.total_params_billions,
        activated_params_billions: m.activated_params_billions,
        weight_precision,
        gpu_model: p.family.to_uppercase(),
        num_gpus: uly.unwrap_or(1) * ring.unwrap_or(1),
        batch_size: batch,
        inference_steps: int("steps"),
        height,
        width,
        num_frames: as_int(raw.num_frames.0),
        fps: as_int(raw.fps.0),
        ulysses_degree: uly,
        ring_degree: ring,
        use_torch_compile: kv.get("tc").map(|v| v.to_lowercase() == "true"),
        batch_latency_s: t,
        avg_power_watts: e / t,
        energy_per_generation_joules: e / batch as f64,
        throughput_generations_per_sec: batch as f64 / t,
        results_path: file.to_string_lossy().into_owned(),
    })
}

/// Loads the diffusion runs under raw roots; `config_dir` defaults to `ROOT/configs/xdit`.
pub fn load_raw(
    roots: &[PathBuf],
    config_dir: Option<&Path>,
) -> Result<(Vec<DiffusionRun>, Vec<LoadIssue>), RecordsError> {
    let mut cands = Vec::new();
    for root in roots {
        let mut files = Vec::new();
        find_files(&root.join("diffusion"), "results.json", &mut files);
        for f in files {
            if let Some(p) = f.strip_prefix(root).ok().and_then(parse_path) {
                cands.push((f, p));
            }
        }
    }
    let cfg = config_dir.map(Path::to_path_buf).or_else(|| {
        roots
            .iter()
            .map(|r| r.join("configs").join("xdit"))
            .find(|d| d.is_dir())
    });
    let Some(cfg) = cfg else {
        let issues = cands
            .iter()
            .map(|(f, _)| LoadIssue::new(f, "no config directory (configs/xdit)"))
            .collect();
        return Ok((Vec::new(), issues));
    };
    let built = parallel_map(&cands, default_workers(), |(f, p)| build(f, p, &cfg));
    let mut runs = Vec::new();
    let mut issues = Vec::new();
    for ((f, _), b) in cands.iter().zip(built) {
        match b {
            Ok(r) => runs.push(r),
            Err(e) => issues.push(LoadIssue::new(f, e.to_string())),
        }
    }
    runs.sort_by(|a, b| {
        (&a.task, &a.model_id, &a.gpu_model, a.num_gpus, a.batch_size).cmp(&(
            &b.task,
            &b.model_id,
            &b.gpu_model,
            b.num_gpus,
            b.batch_size,
        ))
    });
    Ok((runs, issues))
}

/// Writes diffusion runs as Parquet (paths relative to `base` when given).
pub fn write_parquet(
    runs: &[&DiffusionRun],
    path: &Path,
    base: Option<&Path>,
) -> Result<(), RecordsError> {
    let batch =
        compiled::record_batch(runs, DIFFUSION_FIELDS, base, |r, n| r.field(n)).map_err(|e| {
            RecordsError::Invalid {
                path: path.to_path_buf(),
                message: e.to_string(),
            }
        })?;
    parquet_io::write_batch(path, &batch, &[("llem.records", "diffusion".to_string())])?;
    Ok(())
}

/// Reads `runs/diffusion.parquet`.
pub fn read_parquet(path: &Path, base: Option<&Path>) -> Result<Vec<DiffusionRun>, RecordsError> {
    let invalid = |message: String| RecordsError::Invalid {
        path: path.to_path_buf(),
        message,
    };
    let mut out = Vec::new();
    for batch in parquet_io::open(path)? {
        let batch = batch.map_err(|e| invalid(e.to_string()))?;
        let req: Vec<_> = DIFFUSION_FIELDS
            .iter()
            .copied()
            .filter(|(n, _)| *n != "use_torch_compile")
            .collect();
        let t = compiled::Table::read(&batch, &req, &[]).map_err(|e| invalid(e.to_string()))?;
        // `use_torch_compile` is a boolean in pandas-written files and text in ours.
        let tc: Vec<Option<bool>> = match batch.column_by_name("use_torch_compile") {
            Some(a) => match compiled::read_col("use_torch_compile", a.as_ref(), FieldKind::Bool) {
                Ok(compiled::Col::Bool(v)) => v,
                _ => match compiled::read_col("use_torch_compile", a.as_ref(), FieldKind::OptStr) {
                    Ok(compiled::Col::Str(v)) => {
                        v.into_iter().map(|s| s.map(|s| s == "true")).collect()
                    }
                    _ => vec![None; batch.num_rows()],
                },
            },
            None => vec![None; batch.num_rows()],
        };
        for i in 0..batch.num_rows() {
            let s = |n: &str| t.s(n, i).unwrap_or_default();
            let req_i = |n: &str| {
                t.i(n, i)
                    .ok_or_else(|| invalid(format!("row {i}: {n} is null")))
            };
            out.push(DiffusionRun {
                domain: s("domain"),
                task: s("task"),
                model_id: s("model_id"),
                nickname: s("nickname"),
                total_params_billions: t.fl("total_params_billions", i),
                activated_params_billions: t.fl("activated_params_billions", i),
                weight_precision: s("weight_precision"),
                gpu_model: s("gpu_model"),
                num_gpus: req_i("num_gpus")?,
                batch_size: req_i("batch_size")?,
                inference_steps: t.i("inference_steps", i),
                height: req_i("height")?,
                width: req_i("width")?,
                num_frames: t.i("num_frames", i),
                fps: t.i("fps", i),
                ulysses_degree: t.i("ulysses_degree", i),
                ring_degree: t.i("ring_degree", i),
                use_torch_compile: tc.get(i).copied().flatten(),
                batch_latency_s: t.fl("batch_latency_s", i),
                avg_power_watts: t.fl("avg_power_watts", i),
                energy_per_generation_joules: t.fl("energy_per_generation_joules", i),
                throughput_generations_per_sec: t.fl("throughput_generations_per_sec", i),
                results_path: compiled::resolve(t.s("results_path", i), base),
            });
        }
    }
    Ok(out)
}
