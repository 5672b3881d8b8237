//! Records end to end: a real study (SmolLM2 through the embedded engine) loads into `Runs`
//! as `LlmRun` views, survives a Parquet round trip unchanged, answers `llem results`
//! queries and exports, and `llem report` writes a page that headless Chromium renders
//! with its plots and without console errors.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use llem_testkit::mlenergy_tree as tree;

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::assets;
use llem_records::runs::Condition;
use llem_records::{Runs, load_any};

fn llem(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_llem"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("XDG_CACHE_HOME", home.join("cache"))
        .env("LLEM_CONFIG_PATH", home.join("no-user-config.yaml"))
        .env("LLEM_ASSETS", assets())
        .env("LLEM_POWERCAP_ROOT", home.join("powercap"))
        .env("LLEM_SYSFS_ROOT", home.join("sys"))
        .env("COLUMNS", "200")
        .args(args)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs the 2 × 2 sweep of issue 21 (batch size × decoder preset) over 2 cycles and returns
/// its directory.
fn study(home: &Path) -> PathBuf {
    for d in ["powercap", "sys", "cache"] {
        std::fs::create_dir_all(home.join(d)).unwrap();
    }
    let yaml = home.join("s.yaml");
    std::fs::write(
        &yaml,
        "name: rec\nmodel: SmolLM2-135M-Instruct.Q4_1.gguf\n\
         dataset: {source: synthetic, n_prompts: 4, synthetic: {input_tokens: 16, output_tokens: 6}}\n\
         warmup: {enabled: false}\nbaseline: {enabled: false}\n\
         sweep:\n  llamacpp.batch_size: [1, 2]\n  decoder.preset: [deterministic, creative]\n\
         study_execution: {n_cycles: 2, experiment_gap_seconds: 0, cycle_gap_seconds: 0}\n",
    )
    .unwrap();
    let out = home.join("results");
    let o = llem(
        home,
        &["run", yaml.to_str().unwrap(), "-o", out.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let said = text(&o.stderr);
    assert!(
        said.contains("8 cells (4 configurations x 2 cycles)"),
        "{said}"
    );
    let dirs: Vec<PathBuf> = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(dirs.len(), 1);
    dirs[0].clone()
}

/// `llem report DIR` into `home/report.html`, which must succeed: the file and its text.
fn report(home: &Path, dir: &Path) -> (PathBuf, String) {
    let html = home.join("report.html");
    let o = llem(
        home,
        &[
            "report",
            dir.to_str().unwrap(),
            "-o",
            html.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    (html, page)
}

fn chromium() -> PathBuf {
    let found = std::env::var_os("LLEM_CHROMIUM")
        .map(PathBuf::from)
        .or_else(|| {
            let path = std::env::var_os("PATH").unwrap_or_default();
            let dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
            ["chromium", "chromium-browser", "google-chrome"]
                .iter()
                .flat_map(|n| dirs.iter().map(move |d| d.join(n)))
                .find(|p| p.is_file())
        });
    found.expect("headless Chromium is needed for the report test: run scripts/install-chromium.sh")
}

#[test]
fn study_cells_load_round_trip_query_export_and_report() {
    let _machine = common::exclusive();
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let dir = study(home);

    // The LlemRun view of each cell.
    let runs = Runs::from_directory(&dir).unwrap();
    assert_eq!(runs.len(), 8, "{:?}", runs.issues());
    assert!(runs.issues().is_empty());
    for r in runs.iter() {
        let res: llem_results::ExperimentResult =
            serde_json::from_slice(&std::fs::read(&r.results_path).unwrap()).unwrap();
        // The phases on the experiment's clock: load, the measurement (warmup is off), the
        // teardown; each with its energy, the lifecycle their sum.
        let names: Vec<&str> = res.phases.iter().map(|p| p.phase.as_str()).collect();
        assert_eq!(names, ["load", "measure", "teardown"]);
        assert!(res.phases[0].end_s <= res.phases[1].start_s + 1e-9);
        assert!(res.phases[1].end_s <= res.phases[2].start_s + 1e-9);
        let sum: f64 = res.phases.iter().map(|p| p.energy_j.unwrap()).sum();
        assert!((res.lifecycle_energy_j.unwrap() - sum).abs() < 1e-9);
        assert_eq!(r.extra.engine.as_deref(), Some("llamacpp"));
        assert_eq!(r.model_id, "SmolLM2-135M-Instruct.Q4_1.gguf");
        assert_eq!(r.task, "synthetic");
        assert_eq!(r.gpu_model, "CPU");
        assert_eq!(r.completed_requests, Some(4.0));
        assert_eq!(r.total_output_tokens, Some(res.total_output_tokens as f64));
        assert_eq!(r.energy_per_token_joules, res.avg_energy_per_token_j);
        assert_eq!(r.steady_state_energy_joules, res.total_energy_j);
        assert_eq!(
            r.extra.config_hash.as_deref(),
            Some(res.measurement_config_hash.as_str())
        );
        assert!(r.mean_itl_ms > 0.0 && r.p99_itl_ms >= r.p50_itl_ms);
        // A few seconds of CPU decoding is no steady state by the seed's rules. A run that a
        // loaded machine stretched past 20 s passes that rule: it is stable, or unstable by
        // the cascade from a short run of its batch size or a smaller one.
        if r.steady_state_duration_seconds < 20.0 {
            assert!(
                r.unstable_reason.starts_with("short_steady_state:"),
                "{} s: {}",
                r.steady_state_duration_seconds,
                r.unstable_reason
            );
        } else {
            assert!(
                r.unstable_reason.is_empty()
                    || r.unstable_reason
                        .starts_with("cascade_from_unstable_batch:"),
                "{} s: {}",
                r.steady_state_duration_seconds,
                r.unstable_reason
            );
        }
    }
    assert_eq!(runs.batch(2).len(), 4);
    assert_eq!(
        runs.data().max_num_seqs.iter().filter(|b| **b == 1).count(),
        4
    );
    let cycles: Vec<i64> = runs.iter().filter_map(|r| r.extra.cycle).collect();
    assert_eq!(cycles.iter().filter(|c| **c == 0).count(), 4);
    assert_eq!(runs.group_by(&["config_hash"]).unwrap().len(), 4);
    // Labelled by what the sweep varied, as the plan named them.
    let mut labels: Vec<String> = runs
        .iter()
        .map(|r| r.extra.label.clone().unwrap())
        .collect();
    labels.sort();
    labels.dedup();
    assert_eq!(
        labels,
        [
            "llamacpp.batch_size=1, decoder.preset=creative",
            "llamacpp.batch_size=1, decoder.preset=deterministic",
            "llamacpp.batch_size=2, decoder.preset=creative",
            "llamacpp.batch_size=2, decoder.preset=deterministic",
        ]
    );
    // The swept field as written is a field.
    let c = Condition::parse("decoder.preset=creative").unwrap();
    assert_eq!(runs.filter(|r| c.matches(r)).len(), 4);

    // llem cells -> Runs -> Parquet -> Runs, equal; of the configuration, Parquet keeps the
    // swept paths (the whole stays in each cell's result.json).
    let pq = home.join("runs.parquet");
    runs.write_parquet(&pq, None).unwrap();
    let back = Runs::from_parquet(&pq, None).unwrap();
    assert_eq!(back.len(), runs.len());
    let swept = runs.swept_paths();
    assert!(
        swept.contains(&"llamacpp.batch_size".to_string())
            && swept.contains(&"decoder.preset".to_string()),
        "{swept:?}"
    );
    for (a, b) in runs.iter().zip(back.iter()) {
        for p in &swept {
            assert_eq!(a.field(p), b.field(p), "{p}");
        }
        let strip = |r: &llem_records::LlmRun| {
            let mut r = r.clone();
            r.extra.config = None;
            r
        };
        assert_eq!(strip(a), strip(b));
    }
    let c = Condition::parse("llamacpp.batch_size=2").unwrap();
    assert_eq!(back.filter(|r| c.matches(r)).len(), 4);
    // Per-request extraction from llem cells.
    assert_eq!(runs.output_lengths(false).unwrap().len(), 32);
    assert!(!runs.inter_token_latencies().unwrap().is_empty());
    assert!(!runs.timelines("power.device_instant").unwrap().is_empty());

    // query --json: one object per run, the seed's field names.
    let d = dir.to_str().unwrap();
    let o = llem(
        home,
        &[
            "results",
            "query",
            d,
            "--where",
            "max_num_seqs>=2",
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let arr = v.as_array().unwrap();
    assert_eq!(arr.len(), 4);
    for obj in arr {
        assert_eq!(obj["max_num_seqs"], 2);
        for k in [
            "energy_per_token_joules",
            "p99_itl_ms",
            "is_stable",
            "unstable_reason",
            "engine",
        ] {
            assert!(obj.get(k).is_some(), "{k}");
        }
    }
    let o = llem(home, &["results", "query", d, "--stable", "--json"]);
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap(),
        serde_json::json!([])
    );
    let o = llem(home, &["results", "query", d, "--where", "batchh>=2"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("did you mean"),
        "{}",
        text(&o.stderr)
    );
    // One name for a figure: `batch` was a second one for `max_num_seqs`.
    let o = llem(home, &["results", "query", d, "--where", "batch>=2"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("write `max_num_seqs`"),
        "{}",
        text(&o.stderr)
    );
    let o = llem(home, &["results", "query", d, "--group-by", "max_num_seqs"]);
    assert!(
        text(&o.stdout).contains("max_num_seqs=1 (4 runs)"),
        "{}",
        text(&o.stdout)
    );

    // Exports.
    let o = llem(home, &["results", "export", d, "--format", "csv"]);
    let csv = text(&o.stdout);
    // Records start with the domain; warnings spanning lines stay inside quotes.
    assert_eq!(csv.lines().filter(|l| l.starts_with("llm,")).count(), 8);
    assert!(csv.starts_with("domain,task,model_id,"));
    let md = home.join("t.md");
    let o = llem(
        home,
        &[
            "results",
            "export",
            d,
            "--format",
            "markdown",
            "-o",
            md.to_str().unwrap(),
        ],
    );
    assert!(o.status.success());
    assert_eq!(std::fs::read_to_string(&md).unwrap().lines().count(), 10);
    let o = llem(home, &["results", "export", d, "--format", "parquet"]);
    assert_eq!(o.status.code(), Some(2));

    // list / show / compare.
    let o = llem(
        home,
        &["results", "list", home.join("results").to_str().unwrap()],
    );
    assert!(
        text(&o.stdout).contains("study rec_"),
        "{}",
        text(&o.stdout)
    );
    let cells: Vec<String> = runs
        .iter()
        .map(|r| {
            Path::new(&r.results_path)
                .parent()
                .unwrap()
                .display()
                .to_string()
        })
        .collect();
    let o = llem(home, &["results", "show", &cells[0]]);
    let shown = text(&o.stdout);
    assert!(
        shown.contains("energy per token")
            && shown.contains("configuration (effective_config.json)"),
        "{shown}"
    );
    // A CPU run names its device without a GPU count.
    assert!(
        shown
            .lines()
            .any(|l| l.contains("device") && l.trim_end().ends_with("CPU")),
        "{shown}"
    );
    let o = llem(
        home,
        &["results", "compare", &cells[0], &cells[1], "--json"],
    );
    let c: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(c["metrics"][0]["metric"], "mj_per_tok_total");
    assert!(c["metrics"][0]["ratio_b_over_a"].as_f64().unwrap() > 0.0);

    // A tree holding an ML.ENERGY raw tree and the llem study loads both.
    let mixed = home.join("results");
    tree::write_parity_tree(&mixed.join("mlenergy"));
    let l = load_any(std::slice::from_ref(&mixed)).unwrap();
    assert_eq!(l.runs.len(), 8 + 18);

    // The report, rendered by headless Chromium.
    let (html, page) = report(home, &mixed);
    assert!(
        !page.contains("http://")
            || page
                .matches("http://")
                .all(|_| page.contains("xmlns=\"http://www.w3.org/2000/svg\""))
    );
    let browser = chromium();
    let flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--enable-logging=stderr",
        "--v=0",
    ];
    let profile = home.join("chromium-profile");
    let url = format!("file://{}", html.display());
    let dom = Command::new(&browser)
        .args(flags)
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(["--dump-dom", &url])
        .output()
        .unwrap();
    assert!(dom.status.success(), "{}", text(&dom.stderr));
    let dom_text = text(&dom.stdout);
    for id in [
        "pareto-throughput",
        "pareto-latency",
        "power-0",
        "cdf-ttft",
        "cdf-itl",
        "cdf-request-energy",
    ] {
        assert!(
            dom_text.contains(&format!("id=\"{id}\"")),
            "plot {id} missing from the DOM"
        );
    }
    assert!(dom_text.matches("<svg").count() >= 10);
    // Where each configuration's energy went: a row per configuration, with its split.
    let split = dom_text
        .split("<section id=\"attribution\">")
        .nth(1)
        .expect("the attribution section")
        .split("</section>")
        .next()
        .unwrap();
    for l in &labels {
        assert!(
            split.contains(&l.replace('&', "&amp;")),
            "{l} has no split row"
        );
    }
    report_shows_every_configuration_apart(&dom_text, &labels);
    // The summary table's headers are words with units; the field names are their titles.
    let summary = dom_text
        .split("<section id=\"summary\">")
        .nth(1)
        .expect("the summary section")
        .split("</table>")
        .next()
        .unwrap();
    assert!(
        summary.contains("title=\"mj_per_tok_total\">energy per output token (mJ/tok)"),
        "{summary}"
    );
    assert!(!summary.contains(">mj_per_tok_total"), "{summary}");
    // Why a configuration is hollow is printed under the charts, not only on hover.
    let pareto = dom_text
        .split("<section id=\"pareto\">")
        .nth(1)
        .expect("the Pareto section")
        .split("</section>")
        .next()
        .unwrap();
    let html_escape = |t: &str| {
        t.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    for c in llem_records::compare::configurations(&runs) {
        if c.runs.iter().all(|r| !r.is_stable) {
            let why = &c.runs.get(0).unwrap().unstable_reason;
            let item = format!("<li>{}: {}</li>", html_escape(&c.label), html_escape(why));
            assert!(pareto.contains(&item), "{item} not in {pareto}");
        }
    }
    let errors: Vec<&str> = text(&dom.stderr)
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught"))
        .map(|_| "console message")
        .collect();
    assert!(errors.is_empty(), "{}", text(&dom.stderr));
    let shot = home.join("report.png");
    let s = Command::new(&browser)
        .args(flags)
        .arg(format!("--user-data-dir={}", profile.display()))
        .args([
            "--window-size=1200,3000",
            &format!("--screenshot={}", shot.display()),
            &url,
        ])
        .output()
        .unwrap();
    assert!(s.status.success(), "{}", text(&s.stderr));
    assert!(std::fs::metadata(&shot).unwrap().len() > 20_000);
    if let Some(keep) = std::env::var_os("LLEM_KEEP_REPORT") {
        let keep = PathBuf::from(keep);
        std::fs::copy(&shot, keep.join("report.png")).unwrap();
        std::fs::copy(&html, keep.join("report.html")).unwrap();
    }
}

/// The chart with id `id` in the DOM, from `<svg id=...>` to its end.
fn chart<'a>(dom: &'a str, id: &str) -> &'a str {
    let start = dom
        .find(&format!("<svg id=\"{id}\""))
        .unwrap_or_else(|| panic!("{id}"));
    let end = dom[start..].find("</svg>").unwrap() + start;
    &dom[start..end]
}

/// The `data-name` of every series of a chart with a point drawn.
fn plotted(svg: &str) -> Vec<String> {
    svg.split("<g class=\"series\" data-name=\"")
        .skip(1)
        .filter(|g| g.contains("class=\"point"))
        .map(|g| g.split('"').next().unwrap().replace("&amp;", "&"))
        .collect()
}

/// Issue 21's bar for the report: every llem configuration on both Pareto charts under its
/// own label (hollow when unstable, with the reason), no whisker below zero, distinct power
/// timeline titles.
fn report_shows_every_configuration_apart(dom: &str, labels: &[String]) {
    // The frame's bottom edge is y = 0 (the axis starts at zero); a whisker below zero would
    // reach past it.
    const BOTTOM_PX: f64 = 400.0 - 52.0;
    for id in ["pareto-throughput", "pareto-latency"] {
        let svg = chart(dom, id);
        let names = plotted(svg);
        for l in labels {
            assert!(
                names.contains(l),
                "{id}: {l} not plotted; plotted: {names:?}"
            );
        }
        for w in svg.split("class=\"whisker\"").skip(1) {
            for attr in ["y1=\"", "y2=\""] {
                let v: f64 = w
                    .split(attr)
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap();
                assert!(
                    v <= BOTTOM_PX + 0.05,
                    "{id}: a whisker reaches {v} px, below zero"
                );
            }
        }
        // These short CPU runs fail the steady-state rule: drawn hollow, the reason on hover.
        assert!(
            svg.contains("point hollow") && svg.contains("unstable: short_steady_state"),
            "{id}"
        );
    }
    // llem runs mark where their load began (warmup is off in this study).
    let timelines: Vec<&str> = (0..24)
        .filter_map(|i| {
            dom.find(&format!("<svg id=\"power-{i}\""))
                .map(|_| chart(dom, &format!("power-{i}")))
        })
        .collect();
    assert!(
        timelines
            .iter()
            .any(|svg| svg.contains("class=\"vline\"") && svg.contains(">load</text>")),
        "no phase marker on any power timeline"
    );
    let titles: Vec<String> = (0..8)
        .map(|i| {
            let svg = chart(dom, &format!("power-{i}"));
            // The title's lines, each a <tspan>.
            let title = svg
                .split("class=\"title\">")
                .nth(1)
                .unwrap()
                .split("</text>")
                .next()
                .unwrap();
            title
                .split('>')
                .filter_map(|t| t.split('<').next())
                .collect::<String>()
        })
        .collect();
    let mut distinct = titles.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), 8, "power timeline titles: {titles:?}");
}

/// Measures, in the page, every chart's text as the browser lays it out, on screen and then
/// with the print stylesheet on an A4 page's printable width (182 mm × 269 mm), and writes
/// what it found wrong into `<pre id="layout-check">` as a JSON list.
const LAYOUT_CHECK: &str = r#"<script>
(function () {
  const found = [];
  const apart = (a, b) =>
    Math.min(a.right, b.right) - Math.max(a.left, b.left) <= 0.5 ||
    Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) <= 0.5;
  const inside = (a, o) =>
    a.left >= o.left - 0.5 && a.right <= o.right + 0.5 && a.top >= o.top - 0.5 && a.bottom <= o.bottom + 0.5;
  let texts = 0;
  function charts(media) {
    for (const svg of document.querySelectorAll("svg.plot")) {
      const frame = svg.getBoundingClientRect();
      const boxes = [...svg.querySelectorAll("text")]
        .map((t) => ({ text: t.textContent.slice(0, 60), r: t.getBoundingClientRect() }))
        .filter((b) => b.r.width > 0);
      texts += boxes.length;
      boxes.forEach((a, i) => {
        if (!inside(a.r, frame)) found.push(`${media} ${svg.id}: "${a.text}" is cut by the chart's edge`);
        for (const b of boxes.slice(i + 1))
          if (!apart(a.r, b.r)) found.push(`${media} ${svg.id}: "${a.text}" overlaps "${b.text}"`);
      });
    }
  }
  charts("screen");
  document.getElementById("print-css").media = "all";
  document.body.style.width = "182mm";
  const page = document.body.getBoundingClientRect();
  const pageHeight = (269 * 96) / 25.4;
  charts("print");
  for (const f of document.querySelectorAll("figure")) {
    const r = f.getBoundingClientRect();
    if (r.right > page.right + 0.5) found.push(`print: a figure is ${r.width} px wide on a ${page.width} px page`);
    if (r.height > pageHeight) found.push(`print: a figure is ${r.height} px tall on a ${pageHeight} px page`);
  }
  for (const t of document.querySelectorAll("table"))
    if (t.getBoundingClientRect().right > page.right + 0.5) found.push("print: a table is wider than the page");
  const pre = document.createElement("pre");
  pre.id = "layout-check";
  pre.dataset.texts = texts;
  pre.textContent = JSON.stringify(found);
  document.body.appendChild(pre);
})();
</script>"#;

/// Issue 35's bar for the report's layout: a sweep of 12 configurations with long labels
/// (3 × 2 × 2, warmup and an idle baseline on, so phase markers begin close together beside
/// a baseline line) gives a report in which, as headless Chromium lays it out, no two text
/// boxes of a chart overlap and none is cut by its chart's edge, on screen and printed on
/// A4; each configuration has a look of its own; every chart can be downloaded as SVG and
/// as CSV; the summary table and the whiskers follow one interval rule.
#[test]
fn a_twelve_configuration_report_has_no_overlapping_or_cut_text_on_screen_or_paper() {
    let _machine = common::exclusive();
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    for d in ["sys", "cache"] {
        std::fs::create_dir_all(home.join(d)).unwrap();
    }
    let (stop, writer) = common::rapl_zone(&home.join("powercap"), 20.0);
    let yaml = home.join("wide.yaml");
    std::fs::write(
        &yaml,
        "name: wide\nmodel: SmolLM2-135M-Instruct.Q4_1.gguf\nenergy_sampler: rapl\n\
         dataset: {source: synthetic, n_prompts: 2, synthetic: {input_tokens: 16, output_tokens: 4}}\n\
         warmup: {n_warmup: 1, thermal_floor_seconds: 0}\n\
         baseline: {enabled: true, strategy: cached, duration_seconds: 5}\n\
         sweep:\n  llamacpp.batch_size: [1, 2, 4]\n  decoder.preset: [deterministic, creative]\n  \
         dataset.synthetic.input_tokens: [16, 24]\n\
         study_execution: {n_cycles: 1, experiment_gap_seconds: 0, cycle_gap_seconds: 0}\n",
    )
    .unwrap();
    let out = home.join("results");
    let o = llem(
        home,
        &["run", yaml.to_str().unwrap(), "-o", out.to_str().unwrap()],
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let runs = Runs::from_directory(&out).unwrap();
    let configs = llem_records::compare::configurations(&runs);
    assert_eq!(configs.len(), 12);
    assert!(
        configs.iter().all(|c| c.label.chars().count() > 60),
        "{:?}",
        configs[0].label
    );

    let (_, page) = report(home, &out);
    // RAPL records a counter and no power: each run's timeline is the counter's rise.
    assert!(
        !page.contains("no power timeline"),
        "a run has no power timeline"
    );
    for i in 0..12 {
        assert!(
            page.contains(&format!("<svg id=\"power-{i}\"")),
            "power-{i}"
        );
    }
    // Every chart downloads as SVG and as the CSV of what it plots.
    let figures = page.matches("<figure>").count();
    assert!(figures >= 12 + 4, "{figures} figures");
    assert_eq!(page.matches("download SVG</a>").count(), figures);
    assert_eq!(page.matches("download data (CSV)</a>").count(), figures);
    assert!(
        page.contains(
            "href=\"data:text/csv;charset=utf-8,kind,name,x,y,x_low,x_high,y_low,y_high%0A"
        )
    );
    // One interval rule, said once, for the table and the whiskers.
    assert_eq!(
        page.matches("clipped at zero; for two runs, the range")
            .count(),
        1
    );
    assert!(page.contains("whiskers: the interval the summary table gives"));

    let checked = home.join("checked.html");
    std::fs::write(
        &checked,
        page.replace("</body>", &format!("{LAYOUT_CHECK}</body>")),
    )
    .unwrap();
    let dom = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1280,1000",
        ])
        .arg(format!(
            "--user-data-dir={}",
            home.join("profile").display()
        ))
        .args(["--dump-dom", &format!("file://{}", checked.display())])
        .output()
        .unwrap();
    assert!(dom.status.success(), "{}", text(&dom.stderr));
    let dom = text(&dom.stdout);
    let report = dom
        .split("<pre id=\"layout-check\"")
        .nth(1)
        .expect("the layout check ran in the page");
    let texts: usize = report
        .split("data-texts=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    // Two passes over every chart's titles, ticks, captions and legends.
    assert!(texts > 2 * figures * 10, "only {texts} text boxes measured");
    let found = report
        .split('>')
        .nth(1)
        .unwrap()
        .split("</pre")
        .next()
        .unwrap();
    assert_eq!(
        found,
        "[]",
        "layout faults: {}",
        found.replace("&quot;", "\"")
    );

    // On the Pareto chart each configuration has its own colour and shape.
    let pareto = chart(&dom, "pareto-throughput");
    let mut looks: Vec<(String, String)> = pareto
        .split("<g class=\"series\" data-name=\"")
        .skip(1)
        .filter(|g| g.contains("class=\"point"))
        .map(|g| {
            let point = g.split("class=\"point").next().unwrap();
            let shape = point.rsplit('<').next().unwrap().split(' ').next().unwrap();
            let color = g
                .split("stroke=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap();
            (shape.to_string(), color.to_string())
        })
        .collect();
    assert_eq!(looks.len(), 12);
    looks.sort();
    looks.dedup();
    assert_eq!(looks.len(), 12, "{looks:?}");
}

/// `llem` with a deadline: a command that blocks (on a FIFO, say) is killed and reported.
fn llem_within(home: &Path, args: &[&str], limit: std::time::Duration) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_llem"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("XDG_CACHE_HOME", home.join("cache"))
        .env("LLEM_CONFIG_PATH", home.join("no-user-config.yaml"))
        .env("COLUMNS", "200")
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!("llem {args:?} hung past {limit:?}: {}", text(&o.stderr));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// FIFOs where a results tree has files (a cell's result, a study's manifest, a
/// timeseries) hang no command: each is skipped with a warning that says what it is.
#[test]
fn fifos_in_a_results_tree_hang_no_command() {
    let _machine = common::exclusive();
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let dir = study(home);
    let cells: Vec<PathBuf> = common::walk(&dir)
        .into_iter()
        .filter(|p| p.ends_with("result.json"))
        .map(|p| p.parent().unwrap().to_path_buf())
        .collect();
    assert_eq!(cells.len(), 8);
    let fifo = |p: &Path| {
        std::fs::remove_file(p).unwrap();
        assert!(Command::new("mkfifo").arg(p).status().unwrap().success());
    };
    fifo(&cells[0].join("result.json"));
    fifo(&cells[1].join("timeseries.parquet"));
    fifo(&cells[2].join("effective_config.json"));
    let d = dir.to_str().unwrap();
    let limit = std::time::Duration::from_secs(10);
    let report = home.join("report.html");
    for args in [
        vec!["results", "list", d],
        vec!["results", "show", d],
        vec!["results", "query", d, "--json"],
        vec![
            "results",
            "export",
            d,
            "--format",
            "csv",
            "-o",
            home.join("all.csv").to_str().unwrap(),
        ],
        vec!["report", d, "-o", report.to_str().unwrap()],
    ] {
        let o = llem_within(home, &args, limit);
        let err = text(&o.stderr);
        assert!(
            err.contains("a FIFO, not a regular file"),
            "{args:?} said nothing of the FIFO (exit {:?}): {err}",
            o.status.code()
        );
    }
    // The study's manifest as a FIFO: refused, not waited on.
    fifo(&dir.join("manifest.json"));
    let o = llem_within(home, &["results", "list", d], limit);
    assert!(text(&o.stderr).contains("FIFO"), "{}", text(&o.stderr));
}

/// Bad files in a results tree are each reported and the rest load: a junk compiled
/// `runs/llm.parquet`, a result.json with impossible figures (flagged, kept out of every
/// statistic), a result.json that is a directory. A comparison against a side with no
/// loadable run fails, and a mistyped configuration path is an error with the nearest key.
#[test]
fn bad_files_are_reported_one_by_one_and_the_rest_load() {
    let _machine = common::exclusive();
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let dir = study(home);
    let mut cells: Vec<PathBuf> = common::walk(&dir)
        .into_iter()
        .filter(|p| p.ends_with("result.json"))
        .map(|p| p.parent().unwrap().to_path_buf())
        .collect();
    cells.sort();
    assert_eq!(cells.len(), 8);
    std::fs::create_dir_all(dir.join("runs")).unwrap();
    std::fs::write(dir.join("runs/llm.parquet"), b"not a parquet file").unwrap();
    let edited = cells[0].join("result.json");
    let mut r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&edited).unwrap()).unwrap();
    r["total_energy_j"] = serde_json::json!(-735.0);
    r["total_inference_time_sec"] = serde_json::json!(-1.0);
    std::fs::write(&edited, serde_json::to_vec(&r).unwrap()).unwrap();
    let as_dir = cells[1].join("result.json");
    std::fs::remove_file(&as_dir).unwrap();
    std::fs::create_dir(&as_dir).unwrap();

    let l = load_any(std::slice::from_ref(&dir)).unwrap();
    assert_eq!(l.runs.len(), 6, "{:?}", l.issues);
    let issue = |path: &Path| {
        l.issues
            .iter()
            .find(|i| i.path == path)
            .unwrap_or_else(|| panic!("{} not reported: {:?}", path.display(), l.issues))
    };
    issue(&dir.join("runs/llm.parquet"));
    let bad = issue(&edited);
    assert!(
        bad.reason.contains("impossible values")
            && bad.reason.contains("total_energy_j = -735")
            && bad.reason.contains("total_inference_time_sec = -1"),
        "{}",
        bad.reason
    );
    issue(&as_dir);

    let d = dir.to_str().unwrap();
    for args in [
        vec!["results", "list", d],
        vec!["results", "show", d],
        vec!["results", "query", d, "--json"],
    ] {
        let o = llem(home, &args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
        assert!(
            err.contains("llm.parquet") && err.contains("impossible values"),
            "{args:?}: {err}"
        );
    }
    // Nothing loadable on one side of a comparison.
    let empty = home.join("empty");
    std::fs::create_dir_all(empty.join("runs")).unwrap();
    std::fs::write(empty.join("runs/llm.parquet"), b"junk").unwrap();
    let o = llem(home, &["results", "compare", d, empty.to_str().unwrap()]);
    assert_ne!(o.status.code(), Some(0), "{}", text(&o.stdout));
    assert!(
        text(&o.stderr).contains("no run could be loaded"),
        "{}",
        text(&o.stderr)
    );
    // A mistyped dotted field.
    let o = llem(
        home,
        &["results", "query", d, "--where", "decoder.presett=creative"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stdout));
    assert!(
        text(&o.stderr).contains("did you mean `decoder.preset`?"),
        "{}",
        text(&o.stderr)
    );
    let o = llem(
        home,
        &[
            "results",
            "query",
            d,
            "--where",
            "decoder.preset=creative",
            "--json",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

/// `llem results export DIR --format boamps` into `home/name`, checked against the schema:
/// the reports.
fn exported_boamps(home: &Path, dir: &Path, name: &str) -> serde_json::Value {
    let file = home.join(name);
    let o = llem(
        home,
        &[
            "results",
            "export",
            dir.to_str().unwrap(),
            "--format",
            "boamps",
            "-o",
            file.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    validate_boamps(&file);
    serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap()
}

/// Validates each report in the JSON array `file` against the vendored BoAmps schemas
/// (their `$ref`s to Boavizta's URLs resolved to the files), with the Python `jsonschema`
/// that `make test` installs into target/pyenv.
fn validate_boamps(file: &Path) {
    let Some(python) = common::checks_python() else {
        return;
    };
    let schemas = Path::new(env!("CARGO_MANIFEST_DIR")).join("../llem-records/assets/boamps");
    let script = r#"
import json, sys, pathlib
from jsonschema import Draft4Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT4
d = pathlib.Path(sys.argv[2])
base = "https://raw.githubusercontent.com/Boavizta/BoAmps/main/model/"
schemas = {p.name: json.loads(p.read_text()) for p in d.glob("*_schema.json")}
registry = Registry().with_resources(
    [(base + n, Resource.from_contents(s, default_specification=DRAFT4)) for n, s in schemas.items()])
validator = Draft4Validator(schemas["report_schema.json"], registry=registry)
reports = json.loads(pathlib.Path(sys.argv[1]).read_text())
assert isinstance(reports, list) and reports, "no reports"
for r in reports:
    errors = sorted(validator.iter_errors(r), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)
    # The $refs were followed: a bad measure must fail.
    bad = json.loads(json.dumps(r)); bad["measures"][0].pop("powerConsumption")
    assert list(validator.iter_errors(bad)), "the measure schema was not applied"
print(len(reports), "valid")
"#;
    let o = Command::new(&python)
        .args(["-c", script])
        .arg(file)
        .arg(&schemas)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}{}", text(&o.stdout), text(&o.stderr));
}

/// BoAmps reports of a llem run (a RAPL package at 20 W, a configured grid intensity) and of
/// ML.ENERGY runs validate against the BoAmps 1.1.0 schema, and hold the run's figures.
#[test]
fn boamps_reports_of_llem_and_mlenergy_runs_validate_against_the_schema() {
    let _machine = common::shared();
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    std::fs::create_dir_all(home.join("sys")).unwrap();
    let (stop, writer) = common::rapl_zone(&home.join("powercap"), 20.0);
    let yaml = home.join("b.yaml");
    std::fs::write(
        &yaml,
        "name: boamps\nmodel: SmolLM2-135M-Instruct.Q4_1.gguf\nenergy_sampler: rapl\n\
         dataset: {source: synthetic, n_prompts: 4, synthetic: {input_tokens: 16, output_tokens: 8}}\n\
         warmup: {enabled: false}\nbaseline: {enabled: false}\n",
    )
    .unwrap();
    let out = home.join("results");
    let o = common::llem_in(home)
        .env("LLEM_CARBON_INTENSITY", "300")
        .args([
            "run",
            yaml.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "-q",
        ])
        .output()
        .unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let reports = exported_boamps(home, &out, "boamps.json");
    let b = &reports[0];
    let r: llem_results::ExperimentResult =
        serde_json::from_str(&std::fs::read_to_string(common::result_file(&out)).unwrap()).unwrap();
    // The measure is the headline energy of the window, in kWh, over its duration.
    let m = &b["measures"][0];
    assert_eq!(m["measurementMethod"], "llem");
    assert_eq!(m["cpuTrackingMode"], "rapl");
    let kwh = m["powerConsumption"].as_f64().unwrap();
    assert!((kwh - r.total_energy_j / 3.6e6).abs() < 1e-15, "{kwh}");
    assert_eq!(
        m["measurementDuration"].as_f64().unwrap(),
        r.total_inference_time_sec
    );
    let t = &b["task"];
    assert_eq!(t["taskStage"], "inference");
    assert_eq!(t["nbRequest"], 4);
    assert_eq!(t["dataset"][0]["dataQuantity"], r.total_input_tokens);
    assert_eq!(t["dataset"][1]["dataQuantity"], r.total_output_tokens);
    assert_eq!(t["algorithms"][0]["framework"], "llamacpp");
    assert_eq!(b["environment"]["powerSourceCarbonIntensity"], 300.0);
    assert_eq!(b["header"]["formatVersion"], "1.1.0");
    assert!(
        b["quality"].is_string(),
        "a counter-measured window has a quality class: {b}"
    );

    // ML.ENERGY runs: what their records hold, and valid all the same.
    let ml = home.join("mlenergy");
    tree::write_parity_tree(&ml);
    let reports = exported_boamps(home, &ml, "ml.json");
    let runs = Runs::from_directory(&ml).unwrap();
    assert_eq!(reports.as_array().unwrap().len(), runs.len());
    for (b, run) in reports.as_array().unwrap().iter().zip(runs.iter()) {
        assert_eq!(
            b["measures"][0]["measurementMethod"],
            "ML.ENERGY benchmark (Zeus)"
        );
        let kwh = b["measures"][0]["powerConsumption"].as_f64().unwrap();
        assert!((kwh - run.steady_state_energy_joules / 3.6e6).abs() < 1e-15);
        assert_eq!(b["infrastructure"]["components"][0]["componentType"], "gpu");
    }
}

/// AI Energy Score of a two-cycle study served by an external OpenAI server on a host whose
/// GPU (the NVML stand-in) draws 350 W and whose CPU package (a powercap tree) draws 20 W:
/// GPU Wh per 1,000 queries is the mean over the runs of 350 W x the window / the queries,
/// as computed here by hand; the star rating follows the given range's five bands and the
/// label shows it; a steady-state collection (ML.ENERGY's) is refused with the reason.
#[test]
fn ai_energy_score_of_a_study_matches_a_hand_computation_and_rates_it() {
    let _machine = common::shared();
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    std::fs::create_dir_all(home.join("sys")).unwrap();
    const GPU_W: f64 = 350.0;
    const CPU_W: f64 = 20.0;
    const QUERIES: f64 = 5.0;
    let standin = llem_testkit::nvml_standin::StandIn::new(Some(&format!(
        "driver 550.54.15\ngpu uuid=GPU-aaaa-1111 name=NVIDIA_H100_80GB_HBM3 power_w={GPU_W}\n"
    )));
    let url = llem_testkit::fake_openai::spawn(llem_testkit::fake_openai::FakeConfig {
        first_token_ms: 20,
        gap_ms: 5,
        ..llem_testkit::fake_openai::FakeConfig::default()
    });
    let (stop, writer) = common::rapl_zone(&home.join("powercap"), CPU_W);
    let yaml = home.join("aies.yaml");
    std::fs::write(
        &yaml,
        format!(
            "name: aies\nmodel: fake-model\nengine: openai\n\
             runners: {{openai: \"external:{url}\"}}\n\
             dataset: {{source: synthetic, n_prompts: {QUERIES}, synthetic: {{input_tokens: 16, output_tokens: 10, distribution: fixed}}}}\n\
             traffic: {{max_concurrency: 1}}\n\
             measurement: {{methodology: total}}\n\
             warmup: {{enabled: false}}\nbaseline: {{enabled: false}}\n\
             study_execution: {{n_cycles: 2, experiment_gap_seconds: 0, cycle_gap_seconds: 0}}\n"
        ),
    )
    .unwrap();
    let out = home.join("results");
    let o = common::llem_in(home)
        .envs(standin.env())
        .args([
            "run",
            yaml.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "-q",
        ])
        .output()
        .unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));

    // By hand, from each run's window: the GPU and the package draw constant power.
    let results: Vec<serde_json::Value> = common::walk(&out)
        .into_iter()
        .filter(|p| p.ends_with("result.json"))
        .map(|p| serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap())
        .collect();
    assert_eq!(results.len(), 2);
    let per_1000_wh = |j: f64| j / 3600.0 / QUERIES * 1000.0;
    let window = |r: &serde_json::Value| {
        let w = &r["measurement_window_s"];
        w[1].as_f64().unwrap() - w[0].as_f64().unwrap()
    };
    let physical: Vec<f64> = results
        .iter()
        .map(|r| per_1000_wh(GPU_W * window(r)))
        .collect();
    let measured: Vec<f64> = results
        .iter()
        .map(|r| per_1000_wh(r["energy_breakdown"]["gpu"]["energy_j"].as_f64().unwrap()))
        .collect();
    let cpu_measured: Vec<f64> = results
        .iter()
        .map(|r| {
            per_1000_wh(
                r["energy_breakdown"]["cpu_package"]["energy_j"]
                    .as_f64()
                    .unwrap(),
            )
        })
        .collect();
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let hand = mean(&measured);
    // The range puts the hand figure at 45 % of it: the third band, three stars.
    let hi = hand / 0.45;
    let file = home.join("aies.json");
    let label = home.join("label.svg");
    let o = llem(
        home,
        &[
            "results",
            "export",
            out.to_str().unwrap(),
            "--format",
            "ai-energy-score",
            "--band-edges",
            &format!("0,{hi}"),
            "--label",
            label.to_str().unwrap(),
            "-o",
            file.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let entries: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let e = &entries[0];
    assert_eq!(entries.as_array().unwrap().len(), 1, "one configuration");
    assert_eq!(e["runs"], 2);
    assert_eq!(e["task"], "text_generation");
    let gpu = e["gpu_energy_wh_per_1000_queries"].as_f64().unwrap();
    assert!((gpu - hand).abs() <= hand * 1e-12, "{gpu} vs {hand} Wh");
    // The measured GPU energy is the stand-in's power over the window.
    let truth = mean(&physical);
    assert!((gpu - truth).abs() / truth < 0.02, "{gpu} vs {truth} Wh");
    let cpu = e["cpu_energy_wh_per_1000_queries"].as_f64().unwrap();
    assert!((cpu - mean(&cpu_measured)).abs() <= cpu * 1e-12);
    let cpu_truth = mean(
        &results
            .iter()
            .map(|r| per_1000_wh(CPU_W * window(r)))
            .collect::<Vec<_>>(),
    );
    assert!(
        (cpu - cpu_truth).abs() / cpu_truth < 0.05,
        "{cpu} vs {cpu_truth}"
    );
    assert!(
        e["ram_energy_wh_per_1000_queries"].is_null(),
        "no DRAM zone"
    );
    assert_eq!(e["stars"], 3);
    assert_eq!(
        e["model_class"],
        serde_json::Value::Null,
        "no parameter count"
    );
    // Five queries and two runs are not the protocol's 1,000 and 10; batch 1 and an H100 are.
    let deviations = e["protocol_deviations"].to_string();
    assert_eq!(e["follows_protocol"], false);
    assert_eq!(
        e["protocol_deviations"].as_array().unwrap().len(),
        2,
        "{deviations}"
    );
    assert!(deviations.contains("1000") && deviations.contains("10"));
    let svg = std::fs::read_to_string(&label).unwrap();
    assert!(
        svg.contains("data-stars=\"3\"") && svg.contains("fake-model"),
        "{svg}"
    );
    assert!(svg.contains(&format!("{gpu:.4} Wh")));

    // ML.ENERGY's runs measured a steady-state window: no score, and why.
    let ml = home.join("mlenergy");
    tree::write_parity_tree(&ml);
    let o = llem(
        home,
        &[
            "results",
            "export",
            ml.to_str().unwrap(),
            "--format",
            "ai-energy-score",
        ],
    );
    assert_ne!(o.status.code(), Some(0));
    let err = text(&o.stderr);
    assert!(
        err.contains("steady-state window leaves the ramps out"),
        "{err}"
    );
    // Band edges belong to this format only.
    let o = llem(
        home,
        &[
            "results",
            "export",
            out.to_str().unwrap(),
            "--format",
            "json",
            "--band-edges",
            "0,1",
        ],
    );
    assert_ne!(o.status.code(), Some(0));
    assert!(text(&o.stderr).contains("apply to --format ai-energy-score"));
}
