//! Where a study stands, read-only (`llem study status`): a Slurm study is compiled from its
//! tasks' files, `squeue` and `sacct` (nothing is written: the compile job and `--resume` are
//! the manifest's writers); a local one is its manifest. The CLI prints the report.

use std::collections::BTreeMap;
use std::path::Path;

use llem_results::{CellStatus, Manifest};
use llem_study::slurm::record::NodeControl;
use serde::Serialize;

use crate::AppError;

/// One node's share of the study.
#[derive(Debug, Default, Serialize)]
pub struct NodeRow {
    /// Cells completed on it.
    pub completed: usize,
    /// Cells failed on it.
    pub failed: usize,
    /// Cells interrupted on it (Ctrl-C, a killed runner): not failures, `--resume` runs them.
    pub interrupted: usize,
    /// Cells running on it.
    pub running: usize,
    /// Mean seconds of its completed cells.
    pub mean_cell_s: Option<f64>,
}

/// A cell that did not complete, and why.
#[derive(Debug, Serialize)]
pub struct FailedCell {
    /// Its index in the manifest.
    pub index: usize,
    /// Its cycle.
    pub cycle: u32,
    /// Its directory, relative to the study's.
    pub cell_dir: String,
    /// The node it ran on (Slurm).
    pub node: Option<String>,
    /// Its Slurm array task.
    pub slurm_job: Option<String>,
    /// What kind of failure.
    pub error_type: Option<String>,
    /// What went wrong.
    pub error_message: Option<String>,
}

/// A study's status.
#[derive(Debug, Serialize)]
pub struct StatusReport {
    /// The study directory.
    pub study_dir: String,
    /// The study's name.
    pub study_name: String,
    /// `local` or `slurm`.
    pub executor: &'static str,
    /// The study's state, as the manifest spells it.
    pub status: String,
    /// Cells completed.
    pub completed: usize,
    /// Cells running.
    pub running: usize,
    /// Cells waiting.
    pub pending: usize,
    /// Cells failed.
    pub failed: usize,
    /// Cells interrupted (Ctrl-C, a killed runner, a cancelled job): `--resume` runs them.
    pub interrupted: usize,
    /// Cells skipped.
    pub skipped: usize,
    /// Every cell.
    pub total: usize,
    /// Each node's share (the host's, for a local study).
    pub nodes: BTreeMap<String, NodeRow>,
    /// The cells that did not complete.
    pub not_completed: Vec<FailedCell>,
    /// Seconds until the last cell ends, at the pace of the cells done so far.
    pub eta_s: Option<f64>,
    /// Cells running at once, for the ETA.
    pub parallel: usize,
    /// Each node's control cell (`node_control`).
    pub node_controls: Vec<NodeControl>,
    /// The circuit breaker, when not closed.
    pub circuit_breaker: Option<String>,
}

/// A study's status and, for a Slurm study, which Slurm command said how tasks that left no
/// record ended (`sacct`), when one was asked.
pub struct Status {
    /// The report.
    pub report: StatusReport,
    /// The Slurm command asked, if any.
    pub asked_slurm: Option<&'static str>,
}

/// How a study runs, for its report.
struct Execution {
    executor: &'static str,
    /// Cells at once (`max_parallel`), when limited.
    max_parallel: Option<u32>,
    /// Pause before each cell, s.
    gap_s: f64,
    node_controls: Vec<NodeControl>,
    circuit_breaker: Option<String>,
}

/// The status of the study in `dir`, local or on Slurm; writes nothing.
pub fn study_status(dir: &Path) -> Result<Status, AppError> {
    if llem_study::slurm::record::slurm_dir(dir).exists() {
        let c = llem_study::slurm::compile(dir)?;
        let sub = c.jobs.latest();
        let x = Execution {
            executor: "slurm",
            max_parallel: sub.and_then(|s| s.options.max_parallel),
            gap_s: sub.filter(|s| !s.no_gaps).map_or(0.0, |s| s.gaps_s.0),
            node_controls: c.controls,
            circuit_breaker: c.breaker,
        };
        return Ok(Status {
            report: report(dir, &c.manifest, x),
            asked_slurm: c.asked_slurm,
        });
    }
    let m = llem_study::load_manifest(dir)?;
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
    Ok(Status {
        report: report(dir, &m, x),
        asked_slurm: None,
    })
}

/// A study as `llem results list` heads its runs.
#[derive(Clone, Debug, PartialEq)]
pub struct ResultsHeading {
    /// The manifest's status; a study the manifest says is running but whose runner is
    /// gone (killed: it never wrote the end) reads as interrupted.
    pub status: String,
    /// Its cells.
    pub cells: usize,
}

/// The heading of study `study` found under `dir` (its directory, or `dir` itself), from its
/// manifest; `None` when there is none to read.
pub fn results_heading(dir: &Path, study: &str) -> Option<ResultsHeading> {
    let candidates = [dir.join(study), dir.to_path_buf()];
    let study_dir = candidates
        .iter()
        .find(|d| d.join(llem_results::layout::MANIFEST).is_file())?;
    let m = llem_study::load_manifest(study_dir).ok()?;
    let mut status = m.status.as_str().to_string();
    // The runner's lock tells the truth about a manifest that still says running.
    if m.status == llem_results::StudyStatus::Running
        && llem_study::study_runner_alive(study_dir) != Some(true)
    {
        status = "interrupted: its runner is gone, --resume continues it".into();
    }
    Some(ResultsHeading {
        status,
        cells: m.experiments.len(),
    })
}

/// Remaining time from the mean duration of the cells that ran, plus the pauses, with
/// `parallel` cells at a time; `None` until a cell has run.
pub fn eta(m: &Manifest, gap_s: f64, parallel: usize) -> Option<f64> {
    let ran: Vec<f64> = m
        .experiments
        .iter()
        .filter_map(|e| e.elapsed_seconds)
        .collect();
    if ran.is_empty() {
        return None;
    }
    let mean = ran.iter().sum::<f64>() / ran.len() as f64;
    let left = (m.summary.pending + m.summary.running) as f64;
    Some((left / parallel.max(1) as f64).ceil() * (mean + gap_s))
}

/// Seconds left in a phase that has done `done` of `total` units in `elapsed_s`: the rest at
/// the phase's mean rate so far (its whole elapsed time, so one slow or quick unit moves it
/// little). `None` until it means something: before the first unit, in the phase's first
/// 5 s, or under 2 % of the work.
pub fn phase_eta(done: u64, total: u64, elapsed_s: f64) -> Option<f64> {
    if done == 0
        || total == 0
        || elapsed_s.is_nan()
        || elapsed_s < 5.0
        || done.saturating_mul(50) < total
    {
        return None;
    }
    Some(elapsed_s * total.saturating_sub(done) as f64 / done as f64)
}

/// Each node's completed, failed and running cells and mean cell time, and the cells that
/// did not complete. A local study's cells are its host's; a Slurm cell that failed before
/// a node took it counts on no node.
fn nodes_and_failures(
    m: &Manifest,
    executor: &str,
) -> (BTreeMap<String, NodeRow>, Vec<FailedCell>) {
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
                    let row = nodes.entry(node).or_default();
                    if e.status == CellStatus::Failed {
                        row.failed += 1;
                    } else {
                        row.interrupted += 1;
                    }
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
    (nodes, not_completed)
}

fn report(dir: &Path, m: &Manifest, x: Execution) -> StatusReport {
    let (nodes, not_completed) = nodes_and_failures(m, x.executor);
    let s = &m.summary;
    let running = s.running;
    let parallel = match x.max_parallel {
        Some(p) => (p as usize).max(running).max(1),
        None => running.max(1),
    };
    let left = s.pending + running;
    StatusReport {
        study_dir: dir.display().to_string(),
        study_name: m.study_name.clone(),
        executor: x.executor,
        status: m.status.as_str().to_string(),
        completed: s.completed,
        running,
        pending: s.pending,
        failed: s.failed,
        interrupted: s.interrupted,
        skipped: s.skipped,
        total: s.total_experiments,
        nodes,
        not_completed,
        eta_s: if left == 0 {
            Some(0.0)
        } else {
            eta(m, x.gap_s, parallel)
        },
        parallel,
        node_controls: x.node_controls,
        circuit_breaker: x.circuit_breaker,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn a_phase_eta_is_hidden_until_it_means_something_then_follows_the_mean_rate() {
        // The first seconds, nothing done, or one batch of a long phase: no figure.
        assert_eq!(phase_eta(0, 100, 90.0), None);
        assert_eq!(phase_eta(10, 100, 4.0), None);
        assert_eq!(phase_eta(1, 100, 60.0), None);
        assert_eq!(phase_eta(5, 100, f64::NAN), None);
        // 20 of 100 in 40 s: 80 more at 2 s each.
        assert_eq!(phase_eta(20, 100, 40.0), Some(160.0));
        // A pause between completions lengthens it smoothly, never by orders of magnitude.
        let (a, b) = (
            phase_eta(20, 100, 40.0).unwrap(),
            phase_eta(20, 100, 44.0).unwrap(),
        );
        assert!(b > a && b / a < 1.2);
        assert_eq!(phase_eta(100, 100, 200.0), Some(0.0));
        assert_eq!(phase_eta(120, 100, 200.0), Some(0.0));
    }

    /// A manifest of `cells`: (status, node, elapsed s).
    fn manifest(cells: &[(&str, Option<&str>, Option<f64>)]) -> Manifest {
        let experiments: Vec<serde_json::Value> = cells
            .iter()
            .enumerate()
            .map(|(i, (status, node, elapsed))| {
                serde_json::json!({
                    "index": i, "config_hash": "h", "config_summary": "c", "cycle": 1,
                    "status": status, "cell_dir": format!("cell-{i}"), "node": node,
                    "elapsed_seconds": elapsed,
                    "error_type": (*status == "failed").then_some("EngineError"),
                })
            })
            .collect();
        let mut m: Manifest = serde_json::from_value(serde_json::json!({
            "schema_version": "1", "study_name": "s", "study_design_hash": "d",
            "llem_version": "0", "source_file": null, "start_time": "t", "end_time": null,
            "status": "running", "runner_pid": null, "host": "here",
            "measurement_protocol": {"experiment_gap_seconds": 5.0},
            "experiments": experiments,
            "summary": {"total_experiments": 0, "completed": 0, "failed": 0, "skipped": 0,
                        "interrupted": 0, "pending": 0, "running": 0,
                        "total_wall_time_s": 0.0, "total_energy_j": 0.0, "warnings": []},
        }))
        .unwrap();
        m.recount();
        m
    }

    fn local() -> Execution {
        Execution {
            executor: "local",
            max_parallel: Some(1),
            gap_s: 5.0,
            node_controls: Vec::new(),
            circuit_breaker: None,
        }
    }

    #[test]
    fn the_eta_is_the_cells_left_at_the_mean_pace_with_their_gaps() {
        let m = manifest(&[
            ("completed", None, Some(10.0)),
            ("completed", None, Some(20.0)),
            ("pending", None, None),
            ("pending", None, None),
            ("pending", None, None),
        ]);
        // Three cells left, one at a time, each 15 s plus a 5 s gap.
        assert_eq!(eta(&m, 5.0, 1), Some(60.0));
        // Two at a time: two rounds.
        assert_eq!(eta(&m, 5.0, 2), Some(40.0));
        let r = report(Path::new("/s"), &m, local());
        assert_eq!(r.eta_s, Some(60.0));
        assert_eq!((r.completed, r.pending, r.total), (2, 3, 5));
    }

    #[test]
    fn no_eta_until_a_cell_ran_and_zero_once_none_is_left() {
        let waiting = manifest(&[("pending", None, None)]);
        assert_eq!(report(Path::new("/s"), &waiting, local()).eta_s, None);
        let done = manifest(&[("completed", None, Some(3.0)), ("failed", None, None)]);
        assert_eq!(report(Path::new("/s"), &done, local()).eta_s, Some(0.0));
    }

    #[test]
    fn nodes_count_their_cells_and_failures_are_listed_with_their_node() {
        let m = manifest(&[
            ("completed", Some("n1"), Some(10.0)),
            ("completed", Some("n1"), Some(30.0)),
            ("running", Some("n2"), None),
            ("failed", Some("n2"), Some(1.0)),
            // Failed before a node took it: on no node's row, but listed.
            ("failed", None, None),
            ("skipped", None, None),
        ]);
        let slurm = Execution {
            executor: "slurm",
            max_parallel: Some(4),
            ..local()
        };
        let r = report(Path::new("/s"), &m, slurm);
        assert_eq!(r.nodes.len(), 2);
        let n1 = &r.nodes["n1"];
        assert_eq!((n1.completed, n1.failed, n1.running), (2, 0, 0));
        assert_eq!(n1.mean_cell_s, Some(20.0));
        let n2 = &r.nodes["n2"];
        assert_eq!((n2.completed, n2.failed, n2.running), (0, 1, 1));
        let listed: Vec<(usize, Option<&str>)> = r
            .not_completed
            .iter()
            .map(|f| (f.index, f.node.as_deref()))
            .collect();
        assert_eq!(listed, [(3, Some("n2")), (4, None), (5, None)]);
        // Four at a time, one running.
        assert_eq!(r.parallel, 4);
        // A local study's failed cell counts on its host.
        let r = report(
            Path::new("/s"),
            &manifest(&[("failed", None, None)]),
            local(),
        );
        assert_eq!(r.nodes["here"].failed, 1);
        // An interrupted cell is not a failure: counted apart, listed with the cells left.
        let r = report(
            Path::new("/s"),
            &manifest(&[("interrupted", None, None), ("completed", None, Some(1.0))]),
            local(),
        );
        assert_eq!((r.failed, r.interrupted), (0, 1));
        assert_eq!(
            (r.nodes["here"].failed, r.nodes["here"].interrupted),
            (0, 1)
        );
        assert_eq!(r.not_completed.len(), 1);
    }

    #[test]
    fn a_running_study_whose_runner_is_gone_heads_its_runs_as_interrupted() {
        let d = tempfile::tempdir().unwrap();
        let study = d.path().join("s");
        std::fs::create_dir(&study).unwrap();
        let mut m = manifest(&[("completed", None, Some(1.0)), ("pending", None, None)]);
        let write = |m: &Manifest| {
            let text = serde_json::to_vec(m).unwrap();
            std::fs::write(study.join(llem_results::layout::MANIFEST), text).unwrap();
        };
        write(&m);
        // No runner holds the study's lock: it was killed before it could write the end.
        let h = results_heading(d.path(), "s").unwrap();
        assert!(h.status.starts_with("interrupted"), "{}", h.status);
        assert_eq!(h.cells, 2);
        m.status = llem_results::StudyStatus::Completed;
        write(&m);
        // Found from the study's own directory too.
        let h = results_heading(&study, "other").unwrap();
        assert_eq!(h.status, "completed");
        assert_eq!(results_heading(d.path(), "missing"), None);
    }
}
