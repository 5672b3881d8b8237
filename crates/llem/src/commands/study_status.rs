//! `llem study status DIR`: where a study stands, read-only. A Slurm study is compiled from
//! its tasks' files, `squeue` and `sacct` (nothing is written: the compile job and `--resume`
//! are the manifest's writers); a local one is its manifest.

use std::collections::BTreeMap;

use llem_results::{CellStatus, Manifest};
use serde::Serialize;

use crate::cli::{StudyArgs, StudyCommand};
use crate::exit;
use crate::study_view::human;

/// One node's share of the study.
#[derive(Debug, Default, Serialize)]
struct NodeRow {
    completed: usize,
    failed: usize,
    running: usize,
    /// Mean seconds of its completed cells.
    mean_cell_s: Option<f64>,
}

/// A cell that did not complete, and why.
#[derive(Debug, Serialize)]
struct FailedCell {
    index: usize,
    cycle: u32,
    cell_dir: String,
    node: Option<String>,
    slurm_job: Option<String>,
    error_type: Option<String>,
    error_message: Option<String>,
}

/// The status report.
#[derive(Debug, Serialize)]
struct Report {
    study_dir: String,
    study_name: String,
    executor: &'static str,
    status: String,
    completed: usize,
    running: usize,
    pending: usize,
    failed: usize,
    skipped: usize,
    total: usize,
    nodes: BTreeMap<String, NodeRow>,
    not_completed: Vec<FailedCell>,
    /// Seconds until the last cell ends, at the pace of the cells done so far.
    eta_s: Option<f64>,
    /// Cells running at once, for the ETA.
    parallel: usize,
    /// Each node's control cell (`node_control`).
    node_controls: Vec<llem_study::slurm::record::NodeControl>,
    /// The circuit breaker, when not closed.
    circuit_breaker: Option<String>,
}

/// How a study runs, for its report.
struct Execution {
    executor: &'static str,
    /// Cells at once (`max_parallel`), when limited.
    max_parallel: Option<u32>,
    /// Pause before each cell, s.
    gap_s: f64,
    node_controls: Vec<llem_study::slurm::record::NodeControl>,
    circuit_breaker: Option<String>,
}

fn report(dir: &std::path::Path, m: &Manifest, x: Execution) -> Report {
    let executor = x.executor;
    let mut nodes: BTreeMap<String, NodeRow> = BTreeMap::new();
    let mut sums: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    let mut not_completed = Vec::new();
    for e in &m.experiments {
        let node = e.node.clone().unwrap_or_else(|| m.host.clone());
        match e.status {
            CellStatus::Completed => {
                let row = nodes.entry(node.clone()).or_default();
                row.completed += 1;
                if let Some(s) = e.elapsed_seconds {
                    let x = sums.entry(node).or_default();
                    x.0 += s;
                    x.1 += 1;
                }
            }
            CellStatus::Running => nodes.entry(node).or_default().running += 1,
            CellStatus::Failed | CellStatus::Interrupted => {
                if e.node.is_some() || executor == "local" {
                    nodes.entry(node).or_default().failed += 1;
                }
            }
            CellStatus::Pending | CellStatus::Skipped => {}
        }
        if matches!(
            e.status,
            CellStatus::Failed | CellStatus::Interrupted | CellStatus::Skipped
        ) {
            not_completed.push(FailedCell {
                index: e.index,
                cycle: e.cycle,
                cell_dir: e.cell_dir.clone(),
                node: e.node.clone(),
                slurm_job: e.slurm_job.clone(),
                error_type: e.error_type.clone(),
                error_message: e.error_message.clone(),
            });
        }
    }
    for (n, (sum, k)) in sums {
        if let Some(row) = nodes.get_mut(&n) {
            row.mean_cell_s = (k > 0).then(|| sum / k as f64);
        }
    }
    let s = &m.summary;
    let running = s.running;
    let parallel = match x.max_parallel {
        Some(p) => (p as usize).max(running).max(1),
        None => running.max(1),
    };
    let left = s.pending + running;
    Report {
        study_dir: dir.display().to_string(),
        study_name: m.study_name.clone(),
        executor,
        status: m.status.as_str().to_string(),
        completed: s.completed,
        running,
        pending: s.pending,
        failed: s.failed + s.interrupted,
        skipped: s.skipped,
        total: s.total_experiments,
        nodes,
        not_completed,
        eta_s: if left == 0 {
            Some(0.0)
        } else {
            crate::study_view::eta(m, x.gap_s, parallel)
        },
        parallel,
        node_controls: x.node_controls,
        circuit_breaker: x.circuit_breaker,
    }
}

fn print_text(r: &Report, asked: Option<&str>) {
    println!("{} ({}, {})", r.study_name, r.executor, r.study_dir);
    println!(
        "  {}: {} of {} cells completed, {} running, {} pending, {} failed, {} skipped",
        r.status, r.completed, r.total, r.running, r.pending, r.failed, r.skipped
    );
    match r.eta_s {
        Some(s) if s > 0.0 => println!(
            "  ETA: about {} ({} at a time, at the pace of the cells done)",
            human(s),
            r.parallel
        ),
        Some(_) => {}
        None => println!("  ETA: unknown until a cell completes"),
    }
    if !r.nodes.is_empty() {
        println!(
            "  {:<24} {:>9} {:>7} {:>7} {:>10}",
            "node", "completed", "failed", "running", "mean cell"
        );
        for (n, row) in &r.nodes {
            println!(
                "  {:<24} {:>9} {:>7} {:>7} {:>10}",
                n,
                row.completed,
                row.failed,
                row.running,
                row.mean_cell_s.map_or_else(|| "-".into(), human)
            );
        }
    }
    for f in &r.not_completed {
        println!(
            "  #{:03} cycle {}{}{}: {} {}",
            f.index,
            f.cycle,
            f.slurm_job
                .as_deref()
                .map_or_else(String::new, |j| format!(" (job {j})")),
            f.node
                .as_deref()
                .map_or_else(String::new, |n| format!(" on {n}")),
            f.error_type.as_deref().unwrap_or("-"),
            f.error_message.as_deref().unwrap_or("")
        );
    }
    if !r.node_controls.is_empty() {
        println!("  node controls (the same configuration, measured once on each node):");
        for c in &r.node_controls {
            let fig = |v: Option<f64>, unit: &str| {
                v.map_or_else(|| "-".to_string(), |x| format!("{x:.3} {unit}"))
            };
            println!(
                "    {:<24} {:>14} {:>14}  {}{}",
                c.node,
                fig(c.mj_per_tok, "mJ/tok"),
                fig(c.tokens_per_s, "tok/s"),
                format!("{:?}", c.state).to_lowercase(),
                c.error_message
                    .as_deref()
                    .map_or_else(String::new, |m| format!(": {m}"))
            );
        }
    }
    if let Some(b) = &r.circuit_breaker {
        println!("  circuit breaker {b}");
    }
    if let Some(a) = asked {
        println!("  (how tasks that left no record ended: Slurm's {a})");
    }
}

/// `llem study ...`; returns the exit code.
pub fn run(a: &StudyArgs) -> i32 {
    let StudyCommand::Status { dir, json } = &a.command;
    let slurm = llem_study::slurm::record::slurm_dir(dir).exists();
    let (manifest, x, asked) = if slurm {
        match llem_study::slurm::compile(dir) {
            Ok(c) => {
                let sub = c.jobs.latest();
                let x = Execution {
                    executor: "slurm",
                    max_parallel: sub.and_then(|s| s.options.max_parallel),
                    gap_s: sub.filter(|s| !s.no_gaps).map_or(0.0, |s| s.gaps_s.0),
                    node_controls: c.controls,
                    circuit_breaker: c.breaker,
                };
                (c.manifest, x, c.asked_slurm)
            }
            Err(e) => {
                eprintln!("llem: {e}");
                return exit::FAILURE;
            }
        }
    } else {
        match llem_study::load_manifest(dir) {
            Ok(m) => {
                let gap_s = m
                    .measurement_protocol
                    .get("experiment_gap_seconds")
                    .and_then(serde_json::Value::as_f64)
                    .unwrap_or(0.0);
                let x = Execution {
                    executor: "local",
                    max_parallel: Some(1),
                    gap_s,
                    node_controls: Vec::new(),
                    circuit_breaker: None,
                };
                (m, x, None)
            }
            Err(e) => {
                eprintln!("llem: {e}");
                return exit::FAILURE;
            }
        }
    };
    let r = report(dir, &manifest, x);
    if *json {
        println!("{}", serde_json::to_string_pretty(&r).unwrap_or_default());
    } else {
        print_text(&r, asked);
    }
    exit::OK
}
