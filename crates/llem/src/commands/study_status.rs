//! `llem study status DIR`: prints where a study stands (`llem_app::status` reads it).

use llem_app::status::StatusReport;

use crate::cli::{StudyArgs, StudyCommand};
use crate::exit;
use crate::study_view::human;

fn print_text(r: &StatusReport, asked: Option<&str>) {
    println!("{} ({}, {})", r.study_name, r.executor, r.study_dir);
    println!(
        "  {}: {} of {} cells completed, {} running, {} pending, {} failed, {} interrupted, {} skipped",
        r.status, r.completed, r.total, r.running, r.pending, r.failed, r.interrupted, r.skipped
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
            "  {:<24} {:>9} {:>7} {:>11} {:>7} {:>10}",
            "node", "completed", "failed", "interrupted", "running", "mean cell"
        );
        for (n, row) in &r.nodes {
            println!(
                "  {:<24} {:>9} {:>7} {:>11} {:>7} {:>10}",
                n,
                row.completed,
                row.failed,
                row.interrupted,
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
    let status = match llem_app::status::study_status(dir) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("llem: {e}");
            return exit::FAILURE;
        }
    };
    if *json {
        println!(
            "{}",
            serde_json::to_string_pretty(&status.report).unwrap_or_default()
        );
    } else {
        print_text(&status.report, status.asked_slurm);
    }
    exit::OK
}
