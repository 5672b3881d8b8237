//! `llem results list|show|compare|export|query`: thin wrappers over `llem_records`.

use std::path::{Path, PathBuf};

use llem_records::compare;
use llem_records::export::{self, Exporter};
use llem_records::query::{self, Query};
use llem_records::runs::Group;
use llem_records::table::{fit_table, short_number};
use llem_records::{DiffusionRuns, FieldValue, LlmRun, RecordsError, Runs, load_any};
use llem_results::{MetricStatistics, layout};

use crate::cli::{ExportFormat, ResultsArgs, ResultsCommand};
use crate::exit;

/// Writes to stdout; a reader that went away (`| head`) ends the program quietly.
pub fn emit(s: &str) {
    use std::io::Write;
    if let Err(e) = std::io::stdout().lock().write_all(s.as_bytes())
        && e.kind() == std::io::ErrorKind::BrokenPipe
    {
        std::process::exit(exit::OK);
    }
}

macro_rules! out {
    ($($t:tt)*) => { emit(&format!($($t)*)) };
}

macro_rules! outln {
    () => { emit("\n") };
    ($($t:tt)*) => { emit(&(format!($($t)*) + "\n")) };
}

/// Runs `llem results ...` and returns the exit code.
pub fn run(args: &ResultsArgs) -> i32 {
    let out = match &args.command {
        ResultsCommand::List { dir, json } => {
            list(dir.as_deref().unwrap_or(Path::new("results")), *json)
        }
        ResultsCommand::Show { target, json } => show(target, *json),
        ResultsCommand::Compare {
            a,
            b,
            by,
            pick,
            json,
        } => match (b, by) {
            (Some(b), _) => compare_dirs(a, b, *json),
            (None, Some(by)) => compare_by(a, by, *json),
            (None, None) => compare_picked(a, pick, *json),
        },
        ResultsCommand::Export {
            dir,
            format,
            output,
            diffusion,
            task,
            band_edges,
            label,
        } => {
            let score = ScoreOptions {
                task,
                band_edges,
                label: label.as_deref(),
            };
            export_runs(dir, *format, output.as_deref(), *diffusion, &score)
        }
        ResultsCommand::Query {
            dir,
            conditions,
            group_by,
            stable,
            json,
            diffusion,
        } => match (*diffusion, *stable) {
            (false, _) => query(dir, conditions, group_by, *stable, *json),
            (true, true) => Err(RecordsError::Usage(
                "--stable: no stability rules apply to diffusion runs".into(),
            )),
            (true, false) => load_both(dir).and_then(|(_, d)| {
                super::results_diffusion::query(&d, conditions, group_by, *json)
            }),
        },
    };
    match out {
        Ok(()) => exit::OK,
        Err(e @ RecordsError::Usage(_)) => {
            eprintln!("error: {e}");
            exit::CONFIG
        }
        Err(e) => {
            eprintln!("error: {e}");
            exit::FAILURE
        }
    }
}

/// The terminal's width, or 120 columns when output is not a terminal.
pub fn terminal_width() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .or_else(|| {
            console::Term::stdout()
                .size_checked()
                .map(|(_, w)| usize::from(w))
        })
        .unwrap_or(120)
}

/// Loads `dir`'s LLM runs; diffusion runs found there are counted on stderr with where to see
/// them, never dropped without a word.
pub fn load(dir: &Path) -> Result<Runs, RecordsError> {
    let (runs, diffusion) = load_both(dir)?;
    if !diffusion.is_empty() {
        eprintln!(
            "note: {} diffusion run(s) under {} are not in this LLM view: `llem results list` \
             shows them, `llem results query|export ... --diffusion` works on them",
            diffusion.len(),
            dir.display()
        );
    }
    Ok(runs)
}

/// Loads `dir`'s LLM and diffusion runs and reports runs that were found but not loaded on
/// stderr (with `--json` too: stdout stays machine-readable, and a dropped run is never
/// silent).
pub fn load_both(dir: &Path) -> Result<(Runs, DiffusionRuns), RecordsError> {
    let l = load_any(&[dir.to_path_buf()])?;
    if !l.issues.is_empty() {
        eprintln!(
            "warning: {} run(s) under {} not loaded:",
            l.issues.len(),
            dir.display()
        );
        for i in l.issues.iter().take(10) {
            eprintln!("  {}: {}", i.path.display(), i.reason);
        }
        if l.issues.len() > 10 {
            eprintln!("  ... and {} more", l.issues.len() - 10);
        }
    }
    Ok((Runs::new(l.runs, l.issues), DiffusionRuns::new(l.diffusion)))
}

fn print_json(v: &serde_json::Value) {
    outln!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

fn run_row(r: &LlmRun) -> Vec<String> {
    vec![
        compare::label(r),
        r.extra.cycle.map(|c| c.to_string()).unwrap_or_default(),
        short_number(r.energy_per_token_joules * 1000.0),
        short_number(r.output_throughput_tokens_per_sec),
        if r.is_stable {
            "stable".into()
        } else {
            r.unstable_reason.clone()
        },
        short_number(r.avg_power_watts),
        short_number(r.p50_itl_ms),
        r.extra.ttft_p99_ms.map(short_number).unwrap_or_default(),
        r.extra.engine.clone().unwrap_or_default(),
        r.model_id.clone(),
        r.task.clone(),
    ]
}

/// The run table, most important first: what `fit_table` drops, it drops from the right
/// (after the columns that are the same in every row).
const RUN_HEADERS: &[&str] = &[
    "configuration",
    "cycle",
    "mJ/tok",
    "tok/s",
    "stability",
    "W",
    "ITL p50 ms (smoothed)",
    "TTFT p99 ms",
    "engine",
    "model",
    "task",
];

/// The goodput columns, beside throughput, where a run of the table set an SLO.
const GOODPUT_HEADERS: &[&str] = &["within SLO", "J/good req"];

fn print_runs(runs: &Runs) {
    let slo = runs.iter().any(|r| r.extra.goodput_fraction.is_some());
    let mut headers = RUN_HEADERS.to_vec();
    let at = 4; // after tok/s
    if slo {
        headers.splice(at..at, GOODPUT_HEADERS.iter().copied());
    }
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            let mut row = run_row(r);
            if slo {
                row.splice(at..at, goodput_cells(r));
            }
            row
        })
        .collect();
    out!("{}", fit_table(&headers, &rows, terminal_width()));
}

/// A run's share of requests within its SLO and energy per such request (empty where it set
/// none).
fn goodput_cells(r: &LlmRun) -> [String; 2] {
    [
        r.extra
            .goodput_fraction
            .map(|f| format!("{} %", short_number(f * 100.0)))
            .unwrap_or_default(),
        r.extra
            .energy_per_good_request_joules
            .map(short_number)
            .unwrap_or_default(),
    ]
}

fn list(dir: &Path, json: bool) -> Result<(), RecordsError> {
    let (runs, diffusion) = load_both(dir)?;
    if json {
        // One array; `domain` (`llm`, `diffusion`) tells the records apart.
        let mut all = match export::to_json(&runs) {
            serde_json::Value::Array(a) => a,
            _ => Vec::new(),
        };
        if let serde_json::Value::Array(d) = diffusion.to_json() {
            all.extend(d);
        }
        print_json(&serde_json::Value::Array(all));
        return Ok(());
    }
    let studies = runs.group_by(&["study"])?;
    for g in studies {
        let study = g.key.first().cloned().unwrap_or_default();
        let header = if study.is_empty() {
            "ML.ENERGY / compiled runs".to_string()
        } else {
            let status = study_status(dir, &study).unwrap_or_default();
            format!("study {study}{status}")
        };
        outln!(
            "{header}: {} runs, {} stable",
            g.runs.len(),
            g.runs.stable().len()
        );
        print_runs(&g.runs);
        outln!();
    }
    super::results_diffusion::list(&diffusion);
    Ok(())
}

/// ` (completed, 9 cells)` from the study's manifest, when it can be found.
fn study_status(dir: &Path, study: &str) -> Option<String> {
    let h = llem_app::status::results_heading(dir, study)?;
    Some(format!(" ({}, {} cells)", h.status, h.cells))
}

/// `--json`: the runs, with the manifest and the effective config when the target has them.
fn show_json(target: &Path, runs: &Runs) {
    let mut v = serde_json::Map::new();
    v.insert("runs".into(), export::to_json(runs));
    for (key, file) in [
        ("manifest", layout::MANIFEST),
        ("config", layout::EFFECTIVE_CONFIG),
        ("search", llem_study::runner::SEARCH_FILE),
    ] {
        if let Some(x) = llem_config::files::read_record(target.join(file))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        {
            v.insert(key.into(), x);
        }
    }
    print_json(&serde_json::Value::Object(v));
}

/// The headline lines of one run.
fn cell_rows(r: &LlmRun) -> Vec<(&'static str, String)> {
    vec![
        ("engine", r.extra.engine.clone().unwrap_or_default()),
        ("model", r.model_id.clone()),
        ("task / dataset", r.task.clone()),
        (
            "device",
            // A CPU run has no GPUs to count: "CPU x0" read as no device at all.
            if r.num_gpus == 0 {
                r.gpu_model.clone()
            } else {
                format!("{} x{}", r.gpu_model, r.num_gpus)
            },
        ),
        ("batch (max_num_seqs)", r.max_num_seqs.to_string()),
        (
            "window",
            format!(
                "{} s ({})",
                short_number(r.steady_state_duration_seconds),
                r.extra.measurement_methodology.clone().unwrap_or_default()
            ),
        ),
        (
            "energy",
            format!(
                "{} J ({}), adjusted {} J",
                short_number(r.steady_state_energy_joules),
                r.extra.energy_source.clone().unwrap_or_default(),
                r.extra
                    .energy_adjusted_joules
                    .map(short_number)
                    .unwrap_or_else(|| "-".into())
            ),
        ),
        (
            "energy per token",
            format!(
                "{} mJ/tok (mj_per_tok_total), adjusted {} mJ/tok (mj_per_tok_adjusted)",
                r.mj_per_tok_total()
                    .map(short_number)
                    .unwrap_or_else(|| "-".into()),
                r.extra
                    .mj_per_tok_adjusted
                    .map(short_number)
                    .unwrap_or_else(|| "-".into())
            ),
        ),
        (
            "throughput",
            format!("{} tok/s", short_number(r.output_throughput_tokens_per_sec)),
        ),
        (
            "average power",
            format!("{} W", short_number(r.avg_power_watts)),
        ),
        ("goodput", goodput_words(r)),
        (
            "TTFT p50 / p99",
            format!(
                "{} / {} ms",
                r.extra.ttft_median_ms.map(short_number).unwrap_or_default(),
                r.extra.ttft_p99_ms.map(short_number).unwrap_or_default()
            ),
        ),
        (
            "ITL mean / p50 / p99 (smoothed)",
            format!(
                "{} / {} / {} ms",
                short_number(r.mean_itl_ms),
                short_number(r.p50_itl_ms),
                short_number(r.p99_itl_ms)
            ),
        ),
        (
            "stability",
            if r.is_stable {
                "stable".into()
            } else {
                r.unstable_reason.clone()
            },
        ),
    ]
}

/// Goodput in words, or that no SLO was set.
fn goodput_words(r: &LlmRun) -> String {
    let x = &r.extra;
    match x.goodput_fraction {
        None => "- (no SLO set)".into(),
        Some(f) => format!(
            "{} % of requests within the SLO, {} req/s, {} J per request within it",
            short_number(f * 100.0),
            x.goodput_req_per_sec
                .map(short_number)
                .unwrap_or_else(|| "-".into()),
            x.energy_per_good_request_joules
                .map(short_number)
                .unwrap_or_else(|| "-".into())
        ),
    }
}

fn show(target: &Path, json: bool) -> Result<(), RecordsError> {
    let runs = load(target)?;
    if json {
        show_json(target, &runs);
        return Ok(());
    }
    if !target.join(layout::RESULT).is_file() {
        if let Some(s) = target
            .file_name()
            .and_then(|n| study_status(target, &n.to_string_lossy()))
        {
            outln!("study {}{s}", target.display());
        }
        print_runs(&runs);
        print_configurations(&runs);
        print_search(target);
        return Ok(());
    }
    let Some(r) = runs.get(0) else {
        return Err(RecordsError::NothingFound(target.to_path_buf()));
    };
    outln!("{}", compare::label(r));
    for (k, v) in cell_rows(r) {
        outln!("  {k:<22} {v}");
    }
    if let Some(w) = &r.extra.warnings {
        outln!("warnings:");
        for line in w.lines() {
            outln!("  - {line}");
        }
    }
    if let Ok(b) = llem_config::files::read_record(target.join(layout::EFFECTIVE_CONFIG)) {
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap_or_default();
        outln!("configuration ({}):", layout::EFFECTIVE_CONFIG);
        if let Some(m) = v.as_object() {
            for (k, v) in m.iter().filter(|(_, v)| !v.is_null()) {
                outln!("  {k}: {v}");
            }
        }
    }
    Ok(())
}

/// A search study's answer, from its `search.json`.
fn print_search(dir: &Path) {
    let s = match llem_records::search_doc::read(dir) {
        Ok(Some(s)) => s,
        Ok(None) => return,
        Err(e) => {
            eprintln!("warning: {e}; the search's answer cannot be shown");
            return;
        }
    };
    use llem_records::search_doc::{answer_words, at, goal_words, objective_unit, stop_words};
    outln!("\nsearch: {}: {}", goal_words(&s), stop_words(&s));
    let unit = objective_unit(&s);
    let answer = |a: &serde_json::Value| answer_words(a, unit);
    if let Some(a) = answer(at(&s, "answer")) {
        outln!("  answer     {a}");
    }
    if let Some(a) = answer(at(&s, "runner_up")) {
        outln!("  runner-up  {a}");
    }
    let hours = at(&s, "gpu_hours_saved_estimate")
        .as_f64()
        .map(|h| format!(", about {h:.2} GPU-hours"))
        .or_else(|| {
            at(&s, "hours_saved_estimate")
                .as_f64()
                .map(|h| format!(", about {h:.2} hours"))
        })
        .unwrap_or_default();
    outln!(
        "  runs       {} of a budget of {} (the whole study: {}); {} runs saved{hours}",
        at(&s, "runs_used"),
        at(&s, "budget_runs"),
        at(&s, "grid_runs"),
        at(&s, "runs_saved")
    );
    let count = |k: &str| at(&s, k).as_array().map_or(0, Vec::len);
    outln!(
        "  measured   {} of {} configurations; {} feasible at the search's confidence, {} on the Pareto frontier ({})",
        at(&s, "candidates").as_array().map_or(0, |c| c
            .iter()
            .filter(|c| at(c, "runs").as_u64().unwrap_or(0) > 0)
            .count()),
        at(&s, "grid_configurations"),
        count("feasible"),
        count("pareto"),
        llem_study::runner::SEARCH_FILE
    );
}

fn stat_cell(s: &Option<MetricStatistics>) -> String {
    match s {
        Some(s) => match s.ci95_half_width {
            Some(h) => format!("{} ± {} (n={})", short_number(s.mean), short_number(h), s.n),
            None => format!("{} (n={})", short_number(s.mean), s.n),
        },
        None => "-".into(),
    }
}

fn print_configurations(runs: &Runs) {
    let configs = compare::configurations(runs);
    if configs.len() == runs.len() {
        return;
    }
    outln!(
        "\nper configuration (mean and interval over cycles; {}):",
        llem_results::stats::SPREAD_RULE
    );
    let mut headers = vec!["configuration"];
    let metrics = compare::measured(runs);
    headers.extend(metrics.iter().map(|m| m.name));
    let rows: Vec<Vec<String>> = configs
        .iter()
        .map(|c| {
            let mut row = vec![c.label.clone()];
            row.extend(metrics.iter().map(|m| {
                c.stats(m).map_or("-".into(), |s| {
                    format!("{} (n={})", c.spread(m).show(s.mean, short_number), s.n)
                })
            }));
            row
        })
        .collect();
    out!("{}", fit_table(&headers, &rows, terminal_width()));
}

fn compare_dirs(a: &Path, b: &Path, json: bool) -> Result<(), RecordsError> {
    let ra = load(a)?;
    let rb = load(b)?;
    // A comparison against nothing is no comparison: every figure would read "-".
    for (dir, runs) in [(a, &ra), (b, &rb)] {
        if runs.is_empty() {
            return Err(RecordsError::NoRuns(dir.to_path_buf()));
        }
    }
    compare_sets(
        (&a.display().to_string(), &ra),
        (&b.display().to_string(), &rb),
        json,
    )
}

/// The configurations of `dir` grouped by `field`, each group against the first.
fn compare_by(dir: &Path, field: &str, json: bool) -> Result<(), RecordsError> {
    let runs = load(dir)?;
    let (field, groups) = query::groups_to_compare(&runs, field, dir)?;
    let name = |g: &Group| format!("{field}={}", g.key.first().cloned().unwrap_or_default());
    let Some((first, rest)) = groups.split_first() else {
        return Ok(());
    };
    for g in rest {
        compare_sets((&name(first), &first.runs), (&name(g), &g.runs), json)?;
        if !json {
            outln!();
        }
    }
    Ok(())
}

/// Two configurations of `dir`, picked by label or configuration hash (prefix).
fn compare_picked(dir: &Path, picks: &[String], json: bool) -> Result<(), RecordsError> {
    let [a, b] = picks else {
        return Err(RecordsError::Usage(
            "compare within one directory needs --by FIELD, or --pick A --pick B (a label or \
             configuration hash each), or a second directory"
                .into(),
        ));
    };
    let runs = load(dir)?;
    let (ra, rb) = (
        query::configuration(&runs, a)?,
        query::configuration(&runs, b)?,
    );
    compare_sets((a, &ra), (b, &rb), json)
}

/// Compares run set B against A, metric by metric.
fn compare_sets(
    (a, ra): (&str, &Runs),
    (b, rb): (&str, &Runs),
    json: bool,
) -> Result<(), RecordsError> {
    let rows = compare::compare(ra, rb);
    let mismatch = compare::scope_mismatch(ra, rb);
    if json {
        let arr: Vec<serde_json::Value> = rows
            .iter()
            .map(|m| {
                serde_json::json!({
                    "metric": m.name, "unit": m.unit, "a": m.a, "b": m.b,
                    "ratio_b_over_a": m.ratio, "cis_disjoint": m.distinct, "better": m.better,
                })
            })
            .collect();
        print_json(&serde_json::json!({
            "a": a, "b": b, "a_runs": ra.len(), "b_runs": rb.len(), "metrics": arr,
            "warnings": mismatch.iter().collect::<Vec<_>>(),
        }));
        return Ok(());
    }
    outln!("A: {a} ({} runs)\nB: {b} ({} runs)", ra.len(), rb.len());
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|m| {
            vec![
                format!("{} ({})", m.name, m.unit),
                stat_cell(&m.a),
                stat_cell(&m.b),
                m.ratio
                    .map(|r| format!("{r:.3}"))
                    .unwrap_or_else(|| "-".into()),
                match (m.distinct, m.better) {
                    (Some(true), Some(x)) => format!("{x} better (CIs disjoint)"),
                    (Some(false), _) => "CIs overlap".into(),
                    _ => "needs >= 2 runs per side".into(),
                },
            ]
        })
        .collect();
    out!(
        "{}",
        fit_table(
            &["metric", "A", "B", "B/A", "verdict"],
            &table,
            terminal_width()
        )
    );
    if let Some(w) = mismatch {
        outln!("warning: {w}");
    }
    Ok(())
}

/// The AI Energy Score options of `llem results export`.
struct ScoreOptions<'a> {
    task: &'a str,
    band_edges: &'a [f64],
    label: Option<&'a Path>,
}

/// `--format ai-energy-score`: the figures, and the label when asked for.
fn export_ai_energy_score(
    dir: &Path,
    output: Option<&Path>,
    o: &ScoreOptions<'_>,
) -> Result<(), RecordsError> {
    let bands = (!o.band_edges.is_empty())
        .then(|| export::Bands::new(o.band_edges))
        .transpose()?;
    let exporter = export::AiEnergyScoreExporter {
        task: o.task.to_string(),
        bands,
    };
    let runs = load(dir)?;
    let entries = exporter.entries(&runs)?;
    if let Some(path) = o.label {
        let [entry] = entries.as_slice() else {
            return Err(RecordsError::Usage(format!(
                "--label draws one configuration's label; {} holds {} (export them without \
                 --label, or point at one study's directory)",
                dir.display(),
                entries.len()
            )));
        };
        let svg = export::ai_energy_score_label(entry)?;
        llem_results::write_atomic(path, svg.as_bytes())?;
        eprintln!("wrote the label to {}", path.display());
    }
    for e in &entries {
        for w in e["warnings"].as_array().into_iter().flatten() {
            eprintln!("warning: {}", w.as_str().unwrap_or_default());
        }
    }
    let bytes = export::ai_energy_score_bytes(&entries)?;
    let what = format!(
        "{} configuration(s) from {} runs",
        entries.len(),
        runs.len()
    );
    write_export(output, &bytes, &what)
}

/// An export's bytes to `output` (atomically, saying what went there), else to stdout.
fn write_export(output: Option<&Path>, bytes: &[u8], what: &str) -> Result<(), RecordsError> {
    match output {
        Some(p) => {
            llem_results::write_atomic(p, bytes)?;
            eprintln!("wrote {what} to {}", p.display());
        }
        None => out!("{}", String::from_utf8_lossy(bytes)),
    }
    Ok(())
}

fn export_runs(
    dir: &Path,
    format: ExportFormat,
    output: Option<&Path>,
    diffusion: bool,
    score: &ScoreOptions<'_>,
) -> Result<(), RecordsError> {
    if format != ExportFormat::AiEnergyScore
        && (!score.band_edges.is_empty() || score.label.is_some())
    {
        return Err(RecordsError::Usage(
            "--band-edges and --label apply to --format ai-energy-score".into(),
        ));
    }
    let exporter: Box<dyn Exporter> = match format {
        ExportFormat::Csv => export::Format::Csv,
        ExportFormat::Json => export::Format::Json,
        ExportFormat::Markdown => export::Format::Markdown,
        ExportFormat::Parquet => export::Format::Parquet,
        ExportFormat::Boamps => export::Format::Boamps,
        ExportFormat::AiEnergyScore if diffusion => {
            return Err(RecordsError::Usage(
                "--format ai-energy-score scores LLM runs; --diffusion is not supported".into(),
            ));
        }
        ExportFormat::AiEnergyScore => return export_ai_energy_score(dir, output, score),
    }
    .exporter();
    if exporter.is_binary() && output.is_none() {
        return Err(RecordsError::Usage(
            "--format parquet needs -o FILE (Parquet is binary)".into(),
        ));
    }
    let (bytes, n) = if diffusion {
        let (_, d) = load_both(dir)?;
        (exporter.serialize(&d)?, d.len())
    } else {
        let runs = load(dir)?;
        (exporter.serialize(&runs)?, runs.len())
    };
    let what = if diffusion { "diffusion runs" } else { "runs" };
    write_export(output, &bytes, &format!("{n} {what}"))
}

fn query(
    dir: &Path,
    conditions: &[String],
    group_by: &[String],
    stable: bool,
    json: bool,
) -> Result<(), RecordsError> {
    let q = Query::parse(conditions, group_by, stable)?;
    let groups = q.run(&load(dir)?)?;
    let names = q.field_names();
    if json {
        let mut arr = Vec::new();
        for g in &groups {
            for r in g.runs.iter() {
                let mut v = r.to_json();
                if !names.is_empty() {
                    let key: serde_json::Map<String, serde_json::Value> = names
                        .iter()
                        .map(|n| {
                            let val = r.field(n).unwrap_or(FieldValue::Null);
                            ((*n).to_string(), val.to_json())
                        })
                        .collect();
                    if let Some(o) = v.as_object_mut() {
                        o.insert("group".into(), serde_json::Value::Object(key));
                    }
                }
                arr.push(v);
            }
        }
        print_json(&serde_json::Value::Array(arr));
        return Ok(());
    }
    for g in &groups {
        if !names.is_empty() {
            let key: Vec<String> = names
                .iter()
                .zip(&g.key)
                .map(|(n, v)| format!("{n}={v}"))
                .collect();
            outln!("{} ({} runs)", key.join(", "), g.runs.len());
        }
        print_runs(&g.runs);
        let e: Vec<f64> = g
            .runs
            .iter()
            .map(|r| r.energy_per_token_joules * 1000.0)
            .filter(|v| v.is_finite())
            .collect();
        if let Some(s) = llem_results::stats::describe(&e)
            && !names.is_empty()
        {
            outln!(
                "  energy per token: mean {} mJ/tok{}",
                short_number(s.mean),
                s.ci95_half_width
                    .map(|h| format!(" ± {} (95 % CI, n={})", short_number(h), s.n))
                    .unwrap_or_default()
            );
        }
        outln!();
    }
    Ok(())
}

/// The directory of a results tree that `llem report` names the page after.
pub fn display_name(dir: &Path) -> String {
    let abs = std::fs::canonicalize(dir).unwrap_or_else(|_| PathBuf::from(dir));
    abs.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string())
}
