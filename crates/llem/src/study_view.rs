//! What a running study looks like: a study line (cells done/failed/left, ETA), the current
//! cell (phase, tok/s, watts), and at the end one row per configuration with mean ± 95 % CI.

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::Path;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use llem_results::{CellStatus, Manifest, ManifestEntry, MetricStatistics, StudyResult};
use llem_study::runner::WaitReason;
use llem_study::{CellMessage, Observer, StudyEvent};

/// Renders study events on stderr.
pub struct StudyView {
    quiet: bool,
    tty: bool,
    multi: MultiProgress,
    study: Option<ProgressBar>,
    cell: Option<ProgressBar>,
    /// Seconds of pause between cells, for the ETA.
    gap_s: f64,
    phase: String,
    /// Units of the cell's current phase (seconds for the idle phases).
    phase_total: Option<u64>,
    /// A search's budget of runs: its cells are added as it proposes them.
    search_budget: Option<u32>,
}

impl StudyView {
    /// A view; `quiet` shows only failures and the final table.
    pub fn new(quiet: bool, gap_s: f64) -> StudyView {
        let tty = std::io::stderr().is_terminal();
        StudyView {
            quiet,
            tty,
            multi: MultiProgress::with_draw_target(ProgressDrawTarget::stderr()),
            study: None,
            cell: None,
            gap_s,
            phase: String::new(),
            phase_total: None,
            search_budget: None,
        }
    }

    /// The study is a search with this budget of runs.
    pub fn searching(mut self, budget_runs: Option<u32>) -> StudyView {
        self.search_budget = budget_runs;
        self
    }

    fn say(&self, line: &str) {
        if let Some(b) = &self.study {
            b.println(line);
        } else {
            eprintln!("{line}");
        }
    }

    fn status_line(&self, m: &Manifest) -> String {
        let s = &m.summary;
        if let Some(budget) = self.search_budget {
            // What a search has left is at most its budget: no ETA can be said for it.
            return format!(
                "{} done, {} failed, at most {} of the budget's {budget} runs left",
                s.completed,
                s.failed + s.interrupted,
                (budget as usize).saturating_sub(s.completed + s.failed)
            );
        }
        let left = s.pending + s.running;
        format!(
            "{} done, {} failed, {} left{}",
            s.completed,
            s.failed + s.interrupted,
            left,
            llem_app::status::eta(m, self.gap_s, 1)
                .map_or_else(String::new, |e| format!(", ETA {}", human(e)))
        )
    }
}

/// A duration for people: `2h05m`, `3m20s`, `45s`.
pub fn human(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

fn cell_name(e: &ManifestEntry) -> String {
    format!("#{:03} c{} {}", e.index, e.cycle, e.config_summary)
}

fn outcome_line(e: &ManifestEntry) -> String {
    match e.status {
        CellStatus::Completed => {
            let mj = match (e.mj_per_tok_adjusted, e.mj_per_tok) {
                (Some(a), Some(r)) if llem_results::result::adjusted_is_degenerate(a, r) => {
                    format!("{r:.2} mJ/tok raw (adjusted {a:.2}: near idle)")
                }
                (Some(a), _) => format!("{a:.2} mJ/tok"),
                (None, Some(r)) => format!("{r:.2} mJ/tok"),
                (None, None) => "-".into(),
            };
            let tps = e
                .throughput_tok_s
                .map_or_else(|| "-".into(), |v| format!("{v:.1} tok/s"));
            format!(
                "  done   {}  {tps}, {mj} ({})",
                cell_name(e),
                human(e.elapsed_seconds.unwrap_or_default())
            )
        }
        _ => format!(
            "  {:<6} {}  {}: {}",
            e.status.as_str(),
            cell_name(e),
            e.error_type.as_deref().unwrap_or("?"),
            e.error_message.as_deref().unwrap_or("")
        ),
    }
}

impl StudyView {
    fn started(&mut self, dir: &Path, manifest: &Manifest, resumed: bool) {
        let verb = if resumed { "resuming" } else { "study" };
        let s = &manifest.summary;
        if !self.quiet
            && let Some(budget) = self.search_budget
        {
            eprintln!(
                "llem: {} search '{}' ({}): among {} configurations, at most {budget} runs; {} measured so far\n      {}",
                if resumed { "resuming" } else { "starting" },
                manifest.study_name,
                manifest.study_design_hash,
                s.unique_configurations.unwrap_or_default(),
                s.completed + s.failed,
                dir.display()
            );
        } else if !self.quiet {
            let cycles = manifest
                .experiments
                .iter()
                .map(|e| e.cycle)
                .collect::<std::collections::BTreeSet<_>>()
                .len();
            eprintln!(
                "llem: {verb} '{}' ({}): {} cells ({} configurations x {cycles} cycles), {} already done\n      {}",
                manifest.study_name,
                manifest.study_design_hash,
                s.total_experiments,
                s.unique_configurations.unwrap_or_default(),
                s.completed,
                dir.display()
            );
        }
        if self.tty && !self.quiet {
            let total = self
                .search_budget
                .map_or(s.total_experiments as u64, u64::from);
            let bar = self.multi.add(ProgressBar::new(total));
            bar.set_style(
                ProgressStyle::with_template(
                    "{prefix:>8.bold} [{bar:30.green/blue}] {pos}/{len} {msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            bar.set_prefix("study");
            bar.set_position(s.completed as u64);
            bar.set_message(self.status_line(manifest));
            self.study = Some(bar);
        }
    }

    fn cell_started(&mut self, entry: &ManifestEntry, manifest: &Manifest) {
        self.phase.clear();
        if let Some(b) = &self.study {
            b.set_message(self.status_line(manifest));
        }
        if self.quiet {
            return;
        }
        if self.tty {
            let bar = self.multi.add(ProgressBar::new_spinner());
            bar.set_style(
                ProgressStyle::with_template("{spinner:.cyan} {prefix:.bold} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.set_prefix(cell_name(entry));
            bar.enable_steady_tick(Duration::from_millis(120));
            self.cell = Some(bar);
        } else {
            eprintln!(
                "llem: start  {} (pid {})",
                cell_name(entry),
                entry.pid.unwrap_or(0)
            );
        }
    }

    fn cell_message(&mut self, entry: &ManifestEntry, message: &CellMessage) {
        match message {
            CellMessage::Phase {
                phase,
                detail,
                total,
            } => {
                self.phase.clone_from(phase);
                self.phase_total = *total;
                if let Some(b) = &self.cell {
                    b.set_message(format!("{phase}: {detail}"));
                } else if !self.quiet && !self.tty {
                    eprintln!("llem:   {} {phase} {detail}", cell_name(entry));
                }
            }
            CellMessage::Advance {
                done,
                tokens,
                elapsed_s,
                power_w,
            } => {
                if let Some(b) = &self.cell {
                    b.set_message(advance_message(
                        &self.phase,
                        self.phase_total,
                        *done,
                        *tokens,
                        *elapsed_s,
                        *power_w,
                    ));
                }
            }
            CellMessage::Note { message } if !self.quiet => {
                self.say(&format!("  note    {}: {message}", cell_name(entry)));
            }
            _ => {}
        }
    }

    fn cell_finished(&mut self, entry: &ManifestEntry, manifest: &Manifest) {
        if let Some(b) = self.cell.take() {
            b.finish_and_clear();
            self.multi.remove(&b);
        }
        if let Some(b) = &self.study {
            b.set_position((manifest.summary.completed + manifest.summary.failed) as u64);
            b.set_message(self.status_line(manifest));
        }
        if !self.quiet || entry.status != CellStatus::Completed {
            self.say(&outcome_line(entry));
        }
    }

    fn waiting(&mut self, reason: WaitReason, seconds: f64) {
        if self.quiet {
            return;
        }
        match &self.study {
            Some(b) => b.set_message(wait_message(reason, seconds, seconds)),
            None => eprintln!("llem: {} {}", reason_words(reason), secs(seconds)),
        }
    }

    /// A pause's countdown: only the live bar shows it (a log gets the pause once).
    fn wait_left(&mut self, reason: WaitReason, left_s: f64, seconds: f64) {
        if let (false, Some(b)) = (self.quiet, &self.study) {
            b.set_message(wait_message(reason, left_s, seconds));
        }
    }
}

fn reason_words(reason: WaitReason) -> &'static str {
    match reason {
        WaitReason::ExperimentGap => "experiment gap",
        WaitReason::CycleGap => "cycle gap",
        WaitReason::Cooldown => "circuit breaker cooldown",
    }
}

fn secs(s: f64) -> String {
    if s < 10.0 {
        format!("{s:.1} s")
    } else {
        format!("{s:.0} s")
    }
}

/// The study bar's message during a pause: what it is for and how long is left of it.
fn wait_message(reason: WaitReason, left_s: f64, seconds: f64) -> String {
    if left_s >= seconds {
        format!("{}: {}", reason_words(reason), secs(seconds))
    } else {
        format!(
            "{}: {} left of {}",
            reason_words(reason),
            secs(left_s.max(0.0)),
            secs(seconds)
        )
    }
}

/// The cell bar's message for progress within a phase: a countdown for the idle phases
/// (counted in seconds), throughput and power for the others.
fn advance_message(
    phase: &str,
    total: Option<u64>,
    done: u64,
    tokens: u64,
    elapsed_s: f64,
    power_w: Option<f64>,
) -> String {
    if let (true, Some(total)) = (matches!(phase, "baseline" | "thermal floor"), total) {
        return format!(
            "{phase}: {} s left of {total} s",
            total.saturating_sub(done)
        );
    }
    let tps = if elapsed_s > 0.0 {
        tokens as f64 / elapsed_s
    } else {
        0.0
    };
    let w = power_w.map_or_else(|| "- W".into(), |w| format!("{w:.1} W"));
    format!("{phase}: {done} done, {tps:.1} tok/s, {w}")
}

impl Observer for StudyView {
    fn event(&mut self, e: StudyEvent<'_>) {
        match e {
            StudyEvent::Started {
                dir,
                manifest,
                resumed,
            } => self.started(dir, manifest, resumed),
            StudyEvent::CellStarted { entry, manifest } => self.cell_started(entry, manifest),
            StudyEvent::Cell { entry, message } => self.cell_message(entry, message),
            StudyEvent::CellFinished { entry, manifest } => self.cell_finished(entry, manifest),
            StudyEvent::Waiting { reason, seconds } => self.waiting(reason, seconds),
            StudyEvent::WaitLeft {
                reason,
                left_s,
                seconds,
            } => self.wait_left(reason, left_s, seconds),
            StudyEvent::Note(n) => self.say(&format!("llem: {n}")),
        }
    }
}

impl Drop for StudyView {
    fn drop(&mut self) {
        if let Some(b) = self.cell.take() {
            b.finish_and_clear();
        }
        if let Some(b) = self.study.take() {
            b.finish_and_clear();
        }
    }
}

fn pm(s: Option<&MetricStatistics>, digits: usize) -> String {
    match s {
        None => "-".into(),
        Some(s) => match s.ci95_half_width {
            Some(h) => format!("{:.digits$} ± {:.digits$}", s.mean, h),
            None => format!("{:.digits$}", s.mean),
        },
    }
}

/// The end-of-study table: per configuration, mean ± 95 % CI over cycles and the CV, fitted
/// to the terminal.
pub fn summary_table(r: &StudyResult) -> String {
    summary_table_in(r, crate::commands::results::terminal_width())
}

/// [`summary_table`] for `width` columns.
pub fn summary_table_in(r: &StudyResult, width: usize) -> String {
    let mut out = String::new();
    if r.statistics.is_empty() {
        return out;
    }
    let mut degenerate = false;
    let rows: Vec<Vec<String>> = r
        .statistics
        .iter()
        .map(|c| {
            let raw = c.metric("mj_per_tok_total");
            // Adjusted leads unless it is mostly subtraction noise (see the results' warning).
            let (mj_name, mj) = match (c.metric("mj_per_tok_adjusted"), raw) {
                (Some(a), Some(r))
                    if llem_results::result::adjusted_is_degenerate(a.mean, r.mean) =>
                {
                    degenerate = true;
                    ("raw*", Some(r))
                }
                (Some(a), _) => ("adj", Some(a)),
                (None, _) => ("raw", raw),
            };
            let cv = mj
                .and_then(|s| s.cv)
                .map_or_else(|| "-".into(), |v| format!("{:.1} %", v * 100.0));
            // Raw mJ/tok with the cycles' scatter and each cycle's measurement bound together.
            let bounded = c
                .metrics
                .iter()
                .find(|m| m.metric == "mj_per_tok_total")
                .and_then(|m| m.combined_half_width.map(|h| (m.stats.mean, h)))
                .map_or_else(|| "-".into(), |(mean, h)| format!("{mean:.2} ± {h:.2}"));
            vec![
                format!("{} ({})", c.config_summary, c.config_hash),
                format!("{} {mj_name}", pm(mj, 2)),
                bounded,
                pm(c.metric("avg_tokens_per_second"), 1),
                format!("{}/{}", c.n_completed, c.n_cycles),
                cv,
                pm(c.metric("ttft_p50_ms"), 1),
            ]
        })
        .collect();
    let head = [
        "configuration",
        "mJ/tok",
        "raw ± CI+bound",
        "tok/s",
        "n",
        "CV mJ/tok",
        "TTFT p50 ms",
    ];
    let _ = writeln!(out, "\n mean ± 95 % CI over cycles (Student t):");
    out.push_str(&llem_records::table::fit_table(&head, &rows, width));
    let _ = writeln!(
        out,
        " raw ± CI+bound: the interval and each cycle's measurement bound (resolution, coverage, \
         documented sensor accuracy) added; - where a cycle's energy is an estimate"
    );
    if degenerate {
        let _ = writeln!(
            out,
            " raw*: baseline-adjusted energy under {:.0} % of raw (near idle), so raw is shown",
            llem_results::result::DEGENERATE_ADJUSTED_SHARE * 100.0
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_and_idle_phases_read_as_countdowns() {
        assert_eq!(
            wait_message(WaitReason::CycleGap, 300.0, 300.0),
            "cycle gap: 300 s"
        );
        assert_eq!(
            wait_message(WaitReason::ExperimentGap, 41.6, 60.0),
            "experiment gap: 42 s left of 60 s"
        );
        assert_eq!(
            advance_message("baseline", Some(30), 12, 0, 12.0, None),
            "baseline: 18 s left of 30 s"
        );
        assert_eq!(
            advance_message("thermal floor", Some(60), 61, 0, 61.0, None),
            "thermal floor: 0 s left of 60 s"
        );
        assert_eq!(
            advance_message("measure", Some(20), 4, 100, 2.0, Some(12.34)),
            "measure: 4 done, 50.0 tok/s, 12.3 W"
        );
    }
}
