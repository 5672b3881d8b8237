//! Hugging Face's AI Energy Score (<https://huggingface.github.io/AIEnergyScore/>): the GPU
//! energy of 1,000 queries of a task, in Wh, averaged over a configuration's runs, and its
//! star rating against a task's published energy range (five equal bands; 5 stars = least
//! energy). CPU and RAM energy per 1,000 queries go alongside, as the score's own results
//! carry them; only the GPU figure is rated.
//!
//! The score sums every phase of inference (preprocess, prefill, decode), so only runs whose
//! window spans all of it are scored: llem's `total` methodology, whose window holds every
//! measured query from the first tokenisation to the last token. A steady-state window (and
//! ML.ENERGY's, which is one) leaves the ramps out and is refused.

use serde_json::{Map, Value, json};

use super::{Exporter, Record, Table, count, llem_result, num, text};
use crate::RecordsError;

/// Where the methodology is specified.
const METHODOLOGY_URI: &str = "https://huggingface.github.io/AIEnergyScore/#evaluating-models";

/// Where ratings are verified (the label must link back to it).
const LEADERBOARD_URI: &str = "https://huggingface.co/spaces/AIEnergyScore/Leaderboard";

/// The protocol: queries per run, batch size, runs per configuration.
const PROTOCOL_QUERIES: f64 = 1000.0;
const PROTOCOL_BATCH: f64 = 1.0;
const PROTOCOL_RUNS: usize = 10;

/// A task's star bands: six ascending edges, GPU Wh per 1,000 queries.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bands {
    edges: [f64; 6],
}

impl Bands {
    /// From the published range (`[min, max]`: five equal bands) or six explicit edges.
    pub fn new(values: &[f64]) -> Result<Bands, RecordsError> {
        let edges: [f64; 6] = match values {
            [lo, hi] => std::array::from_fn(|i| lo + (hi - lo) * i as f64 / 5.0),
            [a, b, c, d, e, f] => [*a, *b, *c, *d, *e, *f],
            _ => {
                return Err(RecordsError::Usage(format!(
                    "--band-edges takes the task's range MIN,MAX (five equal bands) or six edges \
                     E0,...,E5 in GPU Wh per 1,000 queries; got {} value(s)",
                    values.len()
                )));
            }
        };
        let ascending = edges.iter().zip(edges.iter().skip(1)).all(|(a, b)| a < b);
        if !ascending || edges.iter().any(|e| !e.is_finite() || *e < 0.0) {
            return Err(RecordsError::Usage(format!(
                "--band-edges must be finite, non-negative and strictly ascending: {edges:?}"
            )));
        }
        Ok(Bands { edges })
    }

    /// The edges, ascending.
    pub fn edges(&self) -> [f64; 6] {
        self.edges
    }

    /// Stars for `wh` (5 in the lowest band, 1 in the highest; a value on an inner edge
    /// belongs to the band above it), and a note when it lies outside the published range:
    /// such a value is rated by the band it extends, and the next leaderboard would widen
    /// the range.
    pub fn stars(&self, wh: f64) -> (u8, Option<String>) {
        let e = self.edges;
        let band = e[1..5].iter().filter(|edge| wh >= **edge).count();
        let stars = 5 - band as u8;
        let outside = if wh < e[0] {
            Some(format!(
                "{wh:.6} Wh is below the published range ({:.6}-{:.6} Wh): rated 5 stars, \
                 as less energy than every model rated",
                e[0], e[5]
            ))
        } else if wh > e[5] {
            Some(format!(
                "{wh:.6} Wh is above the published range ({:.6}-{:.6} Wh): rated 1 star",
                e[0], e[5]
            ))
        } else {
            None
        };
        (stars, outside)
    }
}

/// The AI Energy Score figures of every configuration of a collection, as a JSON array.
pub struct AiEnergyScoreExporter {
    /// The score's task (`text_generation`, `summarization`, ...).
    pub task: String,
    /// The task's bands, for a star rating.
    pub bands: Option<Bands>,
}

/// What one run contributes.
struct RunFigures {
    gpu_j: Option<f64>,
    cpu_j: Option<f64>,
    ram_j: Option<f64>,
    queries: f64,
    date: Option<String>,
}

/// The energy of the GPUs the run computed on (its scope's GPU domains), J; `None` when it
/// computed on the CPU.
fn scope_gpu_j(result: &Value) -> Option<f64> {
    if result.get("energy_scope").and_then(Value::as_str) != Some("gpu") {
        return None;
    }
    let b = result.get("energy_breakdown")?;
    let scope: Vec<&str> = b
        .get("scope_domains")?
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let gpus: Vec<f64> = b
        .get("domains")?
        .as_array()?
        .iter()
        .filter(|d| d.get("kind").and_then(Value::as_str) == Some("gpu"))
        .filter(|d| {
            d.get("name")
                .and_then(Value::as_str)
                .is_some_and(|n| scope.contains(&n))
        })
        .filter_map(|d| d.get("energy_j").and_then(Value::as_f64))
        .collect();
    (!gpus.is_empty()).then(|| gpus.iter().sum())
}

/// Why a run cannot be scored, or its figures.
fn run_figures(r: &dyn Record) -> Result<RunFigures, String> {
    let result = llem_result(r).ok_or_else(|| {
        "not a llem run with a readable result.json (the score needs every phase's energy; \
         ML.ENERGY's steady-state window leaves the ramps out)"
            .to_string()
    })?;
    let methodology = result
        .get("measurement_methodology")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    if methodology != "total" {
        return Err(format!(
            "measured with methodology `{methodology}`: the score sums preprocess, prefill and \
             decode over every query, so the run needs `measurement: {{methodology: total}}`"
        ));
    }
    let queries = num(r, "completed_requests")
        .filter(|q| *q > 0.0)
        .ok_or("no completed query")?;
    let kind = |k: &str| {
        result
            .pointer(&format!("/energy_breakdown/{k}/energy_j"))
            .and_then(Value::as_f64)
            .filter(|v| v.is_finite())
    };
    Ok(RunFigures {
        gpu_j: scope_gpu_j(&result),
        cpu_j: kind("cpu_package"),
        ram_j: kind("dram"),
        queries,
        date: result
            .get("start_time")
            .and_then(Value::as_str)
            .and_then(|t| t.get(0..10))
            .map(str::to_string),
    })
}

/// Wh per 1,000 queries.
fn per_1000_wh(j: f64, queries: f64) -> f64 {
    j / 3600.0 / queries * 1000.0
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// Sample standard deviation; `None` below two values.
fn std_dev(v: &[f64]) -> Option<f64> {
    (v.len() >= 2).then(|| {
        let m = mean(v);
        (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
    })
}

/// The text-generation class of a model by its size (the score's Table 2: A up to 20 B
/// parameters, B up to 66 B, C beyond); stars are rated within a class.
fn model_class(params_b: Option<f64>) -> Option<&'static str> {
    let p = params_b?;
    Some(if p <= 20.0 {
        "A"
    } else if p <= 66.0 {
        "B"
    } else {
        "C"
    })
}

/// A kind's Wh per 1,000 queries in each run, and their mean when every run has it.
fn kind_figures(
    runs: &[RunFigures],
    pick: impl Fn(&RunFigures) -> Option<f64>,
) -> (Option<f64>, Vec<Option<f64>>) {
    let per_run: Vec<Option<f64>> = runs
        .iter()
        .map(|f| pick(f).map(|j| per_1000_wh(j, f.queries)))
        .collect();
    let all: Option<Vec<f64>> = per_run.iter().copied().collect();
    (all.map(|v| mean(&v)), per_run)
}

/// The warning for a kind some runs did not measure.
fn unmeasured(what: &str, per_run: &[Option<f64>]) -> Option<String> {
    let missing = per_run.iter().filter(|x| x.is_none()).count();
    (missing > 0).then(|| {
        format!(
            "{what} energy not measured in {missing} of {} run(s): its figure is null",
            per_run.len()
        )
    })
}

/// The entry of one configuration (`rows` are its runs).
fn entry(task: &str, bands: Option<&Bands>, rows: &[&dyn Record]) -> Result<Value, String> {
    let first = rows.first().ok_or("no run")?;
    let mut figures = Vec::new();
    for r in rows {
        let where_ = text(*r, "results_path").unwrap_or_else(|| "a run".into());
        figures.push(run_figures(*r).map_err(|e| format!("{where_}: {e}"))?);
    }
    let (gpu, gpu_runs) = kind_figures(&figures, |f| f.gpu_j);
    let (cpu, cpu_runs) = kind_figures(&figures, |f| f.cpu_j);
    let (ram, ram_runs) = kind_figures(&figures, |f| f.ram_j);
    let mut warnings = Vec::new();
    if gpu_runs.iter().all(Option::is_none) {
        warnings.push(
            "the runs computed on the CPU: the score is GPU energy, so it is null (CPU and RAM \
             are given alongside)"
                .to_string(),
        );
    } else {
        warnings.extend(unmeasured("GPU", &gpu_runs));
    }
    warnings.extend(unmeasured("CPU", &cpu_runs));
    warnings.extend(unmeasured("RAM", &ram_runs));
    let gpu_values: Vec<f64> = gpu_runs.iter().flatten().copied().collect();

    let params_b = num(*first, "total_params_billions");
    let gpu_model = text(*first, "gpu_model");
    let num_gpus = num(*first, "num_gpus").unwrap_or(0.0);
    let batch = num(*first, "max_num_seqs");
    let mut deviations = Vec::new();
    let queries: Vec<f64> = figures.iter().map(|f| f.queries).collect();
    if queries.iter().any(|q| *q != PROTOCOL_QUERIES) {
        let listed: Vec<String> = queries.iter().map(|q| q.to_string()).collect();
        deviations.push(format!(
            "queries per run {}, the protocol's is {PROTOCOL_QUERIES}",
            listed.join(", ")
        ));
    }
    if batch != Some(PROTOCOL_BATCH) {
        deviations.push(format!(
            "batch size {}, the protocol's is 1",
            batch.map_or_else(|| "unknown".into(), |b| b.to_string())
        ));
    }
    if rows.len() != PROTOCOL_RUNS {
        deviations.push(format!(
            "{} run(s), the protocol averages {PROTOCOL_RUNS}",
            rows.len()
        ));
    }
    if !gpu_model.as_deref().is_some_and(|g| g.contains("H100")) {
        deviations.push(format!(
            "measured on {}: ratings are comparable on NVIDIA H100 GPUs only",
            gpu_model.as_deref().unwrap_or("an unknown device")
        ));
    }

    let (stars, edges) = match (bands, gpu) {
        (Some(b), Some(wh)) => {
            let (stars, outside) = b.stars(wh);
            warnings.extend(outside);
            (Some(stars), Some(b.edges()))
        }
        (Some(b), None) => {
            warnings.push("no star rating: the GPU figure is null".into());
            (None, Some(b.edges()))
        }
        (None, _) => (None, None),
    };
    let class = (task == "text_generation")
        .then(|| model_class(params_b))
        .flatten();

    let mut e = Map::new();
    e.insert("task".into(), json!(task));
    e.insert("model".into(), json!(text(*first, "model_id")));
    e.insert("model_class".into(), json!(class));
    e.insert("engine".into(), json!(text(*first, "engine")));
    e.insert("label".into(), json!(text(*first, "label")));
    e.insert("config_hash".into(), json!(text(*first, "config_hash")));
    e.insert("gpu_model".into(), json!(gpu_model));
    e.insert("num_gpus".into(), json!(num_gpus as u64));
    e.insert("runs".into(), json!(rows.len()));
    e.insert(
        "queries_per_run".into(),
        Value::Array(queries.iter().map(|q| count(*q)).collect()),
    );
    e.insert("batch_size".into(), batch.map_or(Value::Null, count));
    e.insert("gpu_energy_wh_per_1000_queries".into(), json!(gpu));
    e.insert(
        "gpu_energy_wh_per_1000_queries_per_run".into(),
        json!(gpu_runs),
    );
    e.insert(
        "gpu_energy_wh_per_1000_queries_std".into(),
        json!(gpu.and_then(|_| std_dev(&gpu_values))),
    );
    e.insert("cpu_energy_wh_per_1000_queries".into(), json!(cpu));
    e.insert("ram_energy_wh_per_1000_queries".into(), json!(ram));
    e.insert("stars".into(), json!(stars));
    e.insert("band_edges_wh_per_1000_queries".into(), json!(edges));
    e.insert("follows_protocol".into(), json!(deviations.is_empty()));
    e.insert("protocol_deviations".into(), json!(deviations));
    e.insert(
        "scoring_date".into(),
        json!(figures.iter().filter_map(|f| f.date.clone()).max()),
    );
    e.insert("methodology".into(), json!(METHODOLOGY_URI));
    e.insert("warnings".into(), json!(warnings));
    Ok(Value::Object(e))
}

impl AiEnergyScoreExporter {
    /// One entry per configuration (runs of the same model and configuration hash, in the
    /// order first met).
    pub fn entries(&self, runs: &dyn Table) -> Result<Vec<Value>, RecordsError> {
        if runs.columns().iter().all(|c| c != "model_id") {
            return Err(RecordsError::Usage(
                "AI Energy Score figures are written for LLM runs, not diffusion runs".into(),
            ));
        }
        let mut groups: Vec<(String, Vec<&dyn Record>)> = Vec::new();
        for r in runs.rows() {
            let key = format!(
                "{}\u{1f}{}",
                text(r, "model_id").unwrap_or_default(),
                text(r, "config_hash")
                    .or_else(|| text(r, "results_path"))
                    .unwrap_or_default()
            );
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, v)) => v.push(r),
                None => groups.push((key, vec![r])),
            }
        }
        if groups.is_empty() {
            return Err(RecordsError::Usage("no runs to score".into()));
        }
        let mut out = Vec::new();
        let mut refused = Vec::new();
        for (_, rows) in &groups {
            match entry(&self.task, self.bands.as_ref(), rows) {
                Ok(v) => out.push(v),
                Err(e) => refused.push(e),
            }
        }
        if !refused.is_empty() {
            return Err(RecordsError::Usage(format!(
                "no AI Energy Score for {} configuration(s):\n  {}",
                refused.len(),
                refused.join("\n  ")
            )));
        }
        Ok(out)
    }
}

/// The file of `entries`: a pretty JSON array and a newline.
pub fn to_bytes(entries: &[Value]) -> Result<Vec<u8>, RecordsError> {
    let mut bytes = serde_json::to_vec_pretty(entries)
        .map_err(|e| RecordsError::Usage(format!("AI Energy Score JSON: {e}")))?;
    bytes.push(b'\n');
    Ok(bytes)
}

impl Exporter for AiEnergyScoreExporter {
    fn serialize(&self, runs: &dyn Table) -> Result<Vec<u8>, RecordsError> {
        to_bytes(&self.entries(runs)?)
    }
}

/// The most characters of a model's name the label's width holds at its font size.
const MODEL_CHARS: usize = 34;

/// A five-pointed star centred at (`cx`, `cy`) with outer radius `r`, as SVG points.
fn star_points(cx: f64, cy: f64, r: f64) -> String {
    (0..10)
        .map(|i| {
            let radius = if i % 2 == 0 { r } else { r * 0.4 };
            let a = std::f64::consts::PI * (f64::from(i) / 5.0 - 0.5);
            format!("{:.2},{:.2}", cx + radius * a.cos(), cy + radius * a.sin())
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The label of a rated entry as an SVG (260 x 364, the score's display size): model, task,
/// stars, GPU Wh per 1,000 queries, hardware, date, and the leaderboard that explains the
/// rating. It says that llem measured it and which bands rated it: a self-measured label is
/// not the leaderboard's until submitted there.
pub fn label_svg(entry: &Value) -> Result<String, RecordsError> {
    let stars = entry.get("stars").and_then(Value::as_u64).ok_or_else(|| {
        RecordsError::Usage(
            "a label needs a star rating: give --band-edges and a run with GPU energy".into(),
        )
    })?;
    let wh = entry
        .get("gpu_energy_wh_per_1000_queries")
        .and_then(Value::as_f64)
        .unwrap_or(f64::NAN);
    let s = |k: &str| {
        entry
            .get(k)
            .and_then(Value::as_str)
            .map_or_else(|| "unknown".to_string(), crate::report::svg::esc)
    };
    let edges: Vec<f64> = entry
        .get("band_edges_wh_per_1000_queries")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default();
    let range = match (edges.first(), edges.last()) {
        (Some(lo), Some(hi)) => format!("{lo:.4}-{hi:.4} Wh"),
        _ => "unknown".into(),
    };
    let gpus = entry.get("num_gpus").and_then(Value::as_u64).unwrap_or(0);
    // The board's name, without the UUID the records add in parentheses.
    let board = s("gpu_model")
        .split(" (")
        .next()
        .unwrap_or_default()
        .to_string();
    let mut svg = String::new();
    svg.push_str(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"260\" height=\"364\" \
         viewBox=\"0 0 260 364\" font-family=\"Helvetica, Arial, sans-serif\" \
         role=\"img\" aria-label=\"AI Energy Score label\">\n",
    );
    svg.push_str(
        "<rect x=\"1\" y=\"1\" width=\"258\" height=\"362\" rx=\"10\" fill=\"#fff\" \
         stroke=\"#222\" stroke-width=\"2\"/>\n",
    );
    svg.push_str(
        "<text x=\"130\" y=\"32\" text-anchor=\"middle\" font-size=\"20\" \
         font-weight=\"bold\">AI Energy Score</text>\n",
    );
    // A long Hub id keeps its end (the model's own name) within the label's width.
    let model = entry
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    let chars: Vec<char> = model.chars().collect();
    let shown = match chars.len().checked_sub(MODEL_CHARS) {
        Some(cut) if cut > 0 => {
            let tail: String = chars.iter().skip(cut + 1).collect();
            format!("\u{2026}{tail}")
        }
        _ => model.to_string(),
    };
    svg.push_str(&format!(
        "<text x=\"130\" y=\"60\" text-anchor=\"middle\" font-size=\"13\" \
         font-weight=\"bold\">{}</text>\n",
        crate::report::svg::esc(&shown)
    ));
    svg.push_str(&format!(
        "<text x=\"130\" y=\"80\" text-anchor=\"middle\" font-size=\"11\">Task: {}</text>\n",
        s("task")
    ));
    svg.push_str(&format!("<g id=\"stars\" data-stars=\"{stars}\">\n"));
    for i in 0..5u32 {
        let fill = if u64::from(i) < stars {
            "#f2b01e"
        } else {
            "#ddd"
        };
        svg.push_str(&format!(
            "<polygon points=\"{}\" fill=\"{fill}\" stroke=\"#555\" stroke-width=\"0.8\"/>\n",
            star_points(50.0 + 40.0 * f64::from(i), 122.0, 17.0)
        ));
    }
    svg.push_str("</g>\n");
    svg.push_str(&format!(
        "<text x=\"130\" y=\"190\" text-anchor=\"middle\" font-size=\"26\" \
         font-weight=\"bold\">{wh:.4} Wh</text>\n"
    ));
    svg.push_str(
        "<text x=\"130\" y=\"210\" text-anchor=\"middle\" font-size=\"11\">GPU energy per \
         1,000 queries</text>\n",
    );
    let rows = [
        format!("Hardware: {gpus} x {board}"),
        format!("Date: {}", s("scoring_date")),
        format!("Rated against {range}"),
        "Self-measured with llem".to_string(),
    ];
    for (i, row) in rows.iter().enumerate() {
        svg.push_str(&format!(
            "<text x=\"20\" y=\"{}\" font-size=\"11\">{row}</text>\n",
            248 + 18 * i
        ));
    }
    svg.push_str(&format!(
        "<text x=\"130\" y=\"346\" text-anchor=\"middle\" font-size=\"8\" \
         fill=\"#246\">{LEADERBOARD_URI}</text>\n"
    ));
    svg.push_str("</svg>\n");
    Ok(svg)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn five_equal_bands_five_stars_for_the_least_energy() {
        let b = Bands::new(&[1.0, 11.0]).unwrap();
        assert_eq!(b.edges(), [1.0, 3.0, 5.0, 7.0, 9.0, 11.0]);
        assert_eq!(b.stars(1.0), (5, None));
        assert_eq!(b.stars(2.99).0, 5);
        // An inner edge belongs to the band above it.
        assert_eq!(b.stars(3.0).0, 4);
        assert_eq!(b.stars(6.0).0, 3);
        assert_eq!(b.stars(8.5).0, 2);
        assert_eq!(b.stars(11.0), (1, None));
        let (s, note) = b.stars(0.5);
        assert_eq!(s, 5);
        assert!(note.unwrap().contains("below the published range"));
        let (s, note) = b.stars(12.0);
        assert_eq!(s, 1);
        assert!(note.unwrap().contains("above"));
        let six = Bands::new(&[0.0, 1.0, 2.0, 4.0, 8.0, 16.0]).unwrap();
        assert_eq!(six.stars(5.0).0, 2);
        assert!(Bands::new(&[3.0, 1.0]).is_err());
        assert!(Bands::new(&[1.0, 2.0, 3.0]).is_err());
        assert!(Bands::new(&[f64::NAN, 2.0]).is_err());
    }

    #[test]
    fn classes_follow_the_model_size() {
        assert_eq!(model_class(Some(0.135)), Some("A"));
        assert_eq!(model_class(Some(20.0)), Some("A"));
        assert_eq!(model_class(Some(32.0)), Some("B"));
        assert_eq!(model_class(Some(70.0)), Some("C"));
        assert_eq!(model_class(None), None);
    }

    #[test]
    fn a_label_shows_its_stars_and_escapes_the_model_name() {
        let e = json!({
            "model": "acme/<tiny>", "task": "text_generation", "stars": 3,
            "gpu_energy_wh_per_1000_queries": 1.5, "num_gpus": 1,
            "gpu_model": "NVIDIA H100", "scoring_date": "2026-11-28",
            "band_edges_wh_per_1000_queries": [0.0, 1.0, 2.0, 3.0, 4.0, 5.0],
        });
        let svg = label_svg(&e).unwrap();
        assert!(svg.contains("acme/&lt;tiny&gt;"));
        assert_eq!(svg.matches("fill=\"#f2b01e\"").count(), 3);
        assert_eq!(svg.matches("fill=\"#ddd\"").count(), 2);
        assert!(svg.contains("1.5000 Wh") && svg.contains(LEADERBOARD_URI));
        assert!(label_svg(&json!({"stars": null})).is_err());
        let long = json!({"model": "an-organisation/a-very-long-model-name-Instruct-2507-FP8",
                          "stars": 1, "gpu_energy_wh_per_1000_queries": 1.0});
        let svg = label_svg(&long).unwrap();
        assert!(
            svg.contains("\u{2026}long-model-name-Instruct-2507-FP8<"),
            "{svg}"
        );
    }
}
