//! Text rendering of a plan for the terminal.

use std::fmt::Write;

use llem_config::plan::PlanKind;
use llem_config::schema::fmt_num;
use llem_config::{ExperimentOrder, StudyPlan};

/// Most runs listed in full before the middle is elided.
const MAX_RUN_ROWS: usize = 60;

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Aligns rows into columns separated by two spaces.
fn table(out: &mut dyn Write, header: &[&str], rows: &[Vec<String>]) {
    table_of(out, header, rows.len(), &|i| {
        rows.get(i).cloned().unwrap_or_default()
    });
}

/// A table of `n` rows made on demand by `row`, twice (widths, then lines), so a plan of
/// 100 000 configurations is printed without holding 600 000 cells at once.
fn table_of(out: &mut dyn Write, header: &[&str], n: usize, row: &dyn Fn(usize) -> Vec<String>) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for i in 0..n {
        for (w, c) in widths.iter_mut().zip(&row(i)) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let n = cells.len();
        let mut s = String::from("  ");
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            s.push_str(c);
            if i + 1 < n {
                s.push_str(&" ".repeat(w.saturating_sub(c.chars().count()) + 2));
            }
        }
        s.trim_end().to_string()
    };
    let _ = writeln!(out, "{}", line(header.to_vec()));
    for i in 0..n {
        let r = row(i);
        let _ = writeln!(out, "{}", line(r.iter().map(String::as_str).collect()));
    }
}

/// One line per distinct engine the plan chose for configurations that name none, with why
/// (at most three, then how many more).
fn inferred_engines(plan: &StudyPlan) -> Vec<String> {
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for c in &plan.configs {
        if let Some(why) = c.engine_inferred.as_deref() {
            let pair = (c.config.engine.as_str(), why);
            if !seen.contains(&pair) {
                seen.push(pair);
            }
        }
    }
    let mut lines: Vec<String> = seen
        .iter()
        .take(3)
        .map(|(e, why)| format!("{e}, inferred: {why} (no `engine:` given)"))
        .collect();
    if seen.len() > 3 {
        lines.push(format!("... and {} more inferred engines", seen.len() - 3));
    }
    lines
}

/// The header: name, hash, counts, order, pacing.
pub fn plan_summary(plan: &StudyPlan) -> String {
    let mut out = String::new();
    let e = &plan.execution;
    let kind = match plan.kind {
        PlanKind::Experiment => "experiment",
        PlanKind::Study => "study",
    };
    let source = plan
        .source
        .as_ref()
        .map_or_else(|| "command line".to_string(), |p| p.display().to_string());
    let _ = writeln!(out, "llem {kind}: {} ({source})", plan.study_name);
    let _ = writeln!(out, "  study design hash  {}", plan.study_design_hash());
    if plan.dialect == llem_config::dialect07::Dialect::Llem07 {
        let _ = writeln!(out, "  dialect            {}", plan.dialect.describe());
    }
    let seed = match (e.experiment_order, plan.shuffle_seed, e.shuffle_seed) {
        (ExperimentOrder::Shuffle, Some(s), Some(_)) => format!(" (shuffle_seed {s})"),
        (ExperimentOrder::Shuffle, Some(s), None) => {
            format!(" (seed {s:#018x}, from the design hash)")
        }
        _ => String::new(),
    };
    let _ = writeln!(
        out,
        "  plan               {} x {} = {}, order {}{seed}",
        plural(plan.configs.len(), "configuration", "configurations"),
        plural(e.n_cycles as usize, "cycle", "cycles"),
        plural(plan.runs.len(), "run", "runs"),
        e.experiment_order
    );
    if let Some(search) = &plan.search {
        let budget = search.budget.runs(plan.runs.len());
        let _ = writeln!(
            out,
            "  search             {}; at most {} of the grid's {} (confidence {}, tolerance {} %, \
             seed {}): the configurations below are the candidates, measured as the search \
             proposes",
            search.describe(),
            plural(budget as usize, "run", "runs"),
            plural(plan.runs.len(), "run", "runs"),
            fmt_num(search.confidence),
            fmt_num(search.tolerance * 100.0),
            search.seed
        );
    }
    if plan.runs.len() > 1 {
        let _ = writeln!(
            out,
            "  pacing             {} s between experiments, {} s between cycles",
            fmt_num(e.experiment_gap_seconds),
            fmt_num(e.cycle_gap_seconds)
        );
    }
    for line in inferred_engines(plan) {
        let _ = writeln!(out, "  engine             {line}");
    }
    let breaker = match e.max_consecutive_failures {
        0 => "circuit breaker off".to_string(),
        1 => "stop at the first failure".to_string(),
        n => format!(
            "circuit breaker after {n} failures in a row (cooldown {} s)",
            fmt_num(e.circuit_breaker_cooldown_seconds)
        ),
    };
    let wall = e
        .wall_clock_timeout_hours
        .map(|h| format!(", study limit {} h", fmt_num(h)))
        .unwrap_or_default();
    let derived = e
        .experiment_timeout_derivation
        .as_ref()
        .map(|d| format!(" ({d})"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "  limits             {} s per experiment{derived}, {breaker}{wall}",
        fmt_num(e.experiment_timeout_seconds)
    );
    let d = plan.duration();
    let _ = writeln!(
        out,
        "  duration           at least {} of fixed waits (baselines, thermal floors, gaps{}) plus \
         the inference of {} prompts; at most {} (every run at its timeout)",
        crate::study_view::human(d.fixed_s),
        if d.timed_traffic {
            ", timed traffic"
        } else {
            ""
        },
        d.prompts,
        crate::study_view::human(d.upper_s)
    );
    let _ = writeln!(out, "  results            {}", plan.output_dir);
    out
}

/// What the memory column holds, and why a `?` is one (each reason once).
fn memory_notes(out: &mut dyn Write, plan: &StudyPlan) {
    let mut unknown: Vec<&str> = Vec::new();
    let mut basis: Vec<&str> = Vec::new();
    for m in plan.configs.iter().filter_map(|c| c.memory.as_deref()) {
        let list = if m.total_gib.is_some() {
            &mut basis
        } else {
            &mut unknown
        };
        if !list.contains(&m.basis.as_str()) {
            list.push(&m.basis);
        }
    }
    if basis.is_empty() && unknown.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "  memory: weights + KV cache at the configured batch and lengths; activations, the \
         CUDA context and engine reservations (vLLM's gpu_memory_utilization) are not in it"
    );
    for b in basis.iter().take(3) {
        let _ = writeln!(out, "    from {b}");
    }
    for u in unknown.iter().take(3) {
        let _ = writeln!(out, "    ? {u}");
    }
}

/// The whole plan: header, configurations, execution order, skipped points, warnings.
/// Written as it is made: the text of a 100 000-cell plan is tens of MB, and the terminal
/// needs none of it held.
pub fn plan_to(plan: &StudyPlan, out: &mut dyn Write) -> std::fmt::Result {
    out.write_str(&plan_summary(plan))?;
    let _ = writeln!(out, "\nConfigurations");
    let config_row = |i: usize| {
        let Some(c) = plan.configs.get(i) else {
            return Vec::new();
        };
        vec![
            format!("#{}", i + 1),
            c.digest.short(),
            c.config.engine.to_string(),
            c.config
                .runner()
                .map(ToString::to_string)
                .unwrap_or_default(),
            c.config.model.clone(),
            memory_cell(c.memory.as_deref()),
            c.label.clone(),
        ]
    };
    table_of(
        out,
        &["#", "hash", "engine", "runner", "model", "memory", "varies"],
        plan.configs.len(),
        &config_row,
    );
    memory_notes(out, plan);

    if plan.search.is_some() {
        // A search has no order to show: its runs are chosen as it measures.
        let _ = writeln!(
            out,
            "\nExecution order: chosen by the search as it measures (search.json says why)"
        );
        skipped_and_warnings(plan, out);
        return Ok(());
    }
    let _ = writeln!(out, "\nExecution order");
    let run_row = |r: &llem_config::plan::PlannedRun| {
        let c = plan.configs.get(r.config);
        vec![
            format!("{:03}", r.index),
            format!("c{}", r.cycle),
            format!("#{}", r.config + 1),
            c.map(|c| c.digest.short()).unwrap_or_default(),
            c.map(|c| c.label.clone()).unwrap_or_default(),
        ]
    };
    let mut rows: Vec<Vec<String>> = Vec::new();
    let n = plan.runs.len();
    if n > MAX_RUN_ROWS {
        let head = MAX_RUN_ROWS - 10;
        rows.extend(plan.runs.iter().take(head).map(run_row));
        rows.push(vec![
            "...".into(),
            String::new(),
            String::new(),
            String::new(),
            format!("{} more runs (--json lists all)", n - head - 10),
        ]);
        rows.extend(plan.runs.iter().skip(n - 10).map(run_row));
    } else {
        rows.extend(plan.runs.iter().map(run_row));
    }
    table(out, &["run", "cycle", "config", "hash", "varies"], &rows);

    skipped_and_warnings(plan, out);
    Ok(())
}

/// The skipped grid points and the plan's warnings.
fn skipped_and_warnings(plan: &StudyPlan, out: &mut dyn Write) {
    if !plan.skipped.is_empty() {
        let _ = writeln!(
            out,
            "\nSkipped ({})",
            plural(
                plan.skipped.len(),
                "invalid grid point",
                "invalid grid points"
            )
        );
        for s in &plan.skipped {
            let _ = writeln!(
                out,
                "  - {}",
                if s.label.is_empty() {
                    "(unnamed)"
                } else {
                    &s.label
                }
            );
            for d in &s.errors {
                let _ = writeln!(out, "      {}", d.one_line());
            }
        }
    }
    if !plan.duplicates.is_empty() {
        let _ = writeln!(out, "\nDuplicates (run once)");
        for d in &plan.duplicates {
            let _ = writeln!(
                out,
                "  - {} = #{} ({})",
                d.label,
                d.duplicate_of + 1,
                d.config_hash
            );
        }
    }
    if !plan.warnings.is_empty() {
        let _ = writeln!(out, "\nWarnings");
        for w in &plan.warnings {
            let _ = writeln!(out, "  - {w}");
        }
    }
}

/// Text written straight to an [`std::io::Write`]: a closed pipe ends the writing.
pub struct IoText<'a, W: std::io::Write>(pub &'a mut W);

impl<W: std::io::Write> Write for IoText<'_, W> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.write_all(s.as_bytes()).map_err(|_| std::fmt::Error)
    }
}

/// `1.23 GiB`, or `?` when unknown.
fn memory_cell(m: Option<&llem_config::plan::MemoryView>) -> String {
    match m.and_then(|m| m.total_gib) {
        Some(g) if g >= 10.0 => format!("{g:.1} GiB"),
        Some(g) => format!("{g:.2} GiB"),
        None => "?".into(),
    }
}
