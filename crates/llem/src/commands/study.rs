//! `llem run` for a study: each cell in a child process, with the live view and the final
//! table; also what `llem schedule` runs each time.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use llem_config::StudyPlan;
use llem_results::StudyStatus;
use llem_study::{Execution, Executor, Launcher, ResumeFrom, StudyError, StudyOptions};

use crate::cli::RunArgs;
use crate::exit;
use crate::study_view::{StudyView, summary_table};

/// Between SIGTERM and SIGKILL for a cell being stopped: long enough for the harness to finish
/// its decode step and remove its partial files.
const KILL_GRACE: Duration = Duration::from_secs(10);

/// Counts SIGINT/SIGTERM for the whole process (a schedule runs many studies).
pub fn interrupt_counter() -> Arc<AtomicUsize> {
    static COUNTER: std::sync::OnceLock<Arc<AtomicUsize>> = std::sync::OnceLock::new();
    COUNTER
        .get_or_init(|| {
            let n = Arc::new(AtomicUsize::new(0));
            let seen = n.clone();
            match signal_hook::iterator::Signals::new([
                signal_hook::consts::SIGINT,
                signal_hook::consts::SIGTERM,
            ]) {
                Ok(mut signals) => {
                    std::thread::spawn(move || {
                        for _ in signals.forever() {
                            let k = seen.fetch_add(1, Ordering::SeqCst) + 1;
                            if k == 1 {
                                eprintln!(
                                    "\nllem: stopping after the current cell is terminated; \
                                     Ctrl-C again to kill it at once"
                                );
                            }
                        }
                    });
                }
                Err(e) => eprintln!("llem: warning: cannot handle Ctrl-C ({e})"),
            }
            n
        })
        .clone()
}

/// Devices the cells of `plan` use on this machine, to lock.
pub fn lock_resources(plan: &StudyPlan) -> Vec<String> {
    llem_harness::devices::lock_resources(plan.configs.iter().map(|pc| &pc.config))
}

/// Applies `--fail-fast`, `--no-circuit-breaker` and `--timeout` to the plan's execution block.
pub fn apply_overrides(plan: &mut StudyPlan, args: &RunArgs) {
    let x = &mut plan.execution;
    if args.fail_fast {
        x.max_consecutive_failures = 1;
    }
    if args.no_circuit_breaker {
        x.max_consecutive_failures = 0;
    }
    if let Some(h) = args.timeout {
        x.wall_clock_timeout_hours = Some(h);
    }
}

/// How a study ended, as an exit code.
pub fn exit_code(status: StudyStatus) -> i32 {
    match status {
        StudyStatus::Completed => exit::OK,
        StudyStatus::Interrupted => exit::INTERRUPTED,
        StudyStatus::Running
        | StudyStatus::Failed
        | StudyStatus::CircuitBreaker
        | StudyStatus::TimedOut => exit::FAILURE,
    }
}

/// Why a study could not start.
pub struct NotStarted {
    /// What to tell the user.
    pub message: String,
    /// The exit code.
    pub code: i32,
}

/// The options a study runs with: cells launched by `launcher`, stopped when `interrupts`
/// counts up. Refuses, before any cell starts, a plan with a configuration that cannot run
/// on this machine (a typo in a model path would otherwise fail every cell overnight).
pub fn study_options(
    plan: &StudyPlan,
    args: &RunArgs,
    resume: ResumeFrom,
    launcher: Launcher,
    interrupts: Arc<AtomicUsize>,
) -> Result<StudyOptions, NotStarted> {
    let assets = crate::paths::assets_dir();
    let python = crate::commands::execute::user_config().python;
    let mut problems: Vec<String> = Vec::new();
    for pc in &plan.configs {
        if let Err(e) =
            llem_harness::lifecycle::check_runnable(&pc.config, &assets, python.as_deref())
        {
            let line = e.to_string();
            if !problems.contains(&line) {
                problems.push(line);
            }
        }
    }
    if !problems.is_empty() {
        let mut message = "this study cannot run; nothing was started:".to_string();
        for p in &problems {
            message.push_str("\n  - ");
            message.push_str(p);
        }
        return Err(NotStarted {
            message,
            code: exit::CONFIG,
        });
    }
    let resources = lock_resources(plan);
    Ok(StudyOptions {
        launcher,
        results_dir: plan.output_dir.clone().into(),
        resume,
        lock_dir: (!args.no_lock).then(|| crate::paths::cache_dir().join("locks")),
        environment: llem_harness::environment::snapshot(
            &resources,
            env!("CARGO_PKG_VERSION"),
            Some(env!("LLEM_GIT_COMMIT")),
        ),
        host: llem_harness::environment::hostname(),
        lock_resources: resources,
        no_gaps: args.no_gaps,
        kill_grace: KILL_GRACE,
        sampling_interval: args.interval,
        llem_version: env!("CARGO_PKG_VERSION").to_string(),
        interrupts,
    })
}

/// Runs a study (or resumes one), here or on Slurm; returns the exit code.
pub fn run_study(plan: &StudyPlan, args: &RunArgs, resume: ResumeFrom) -> i32 {
    let slurm = match super::slurm::resolve(plan, args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("llem: {e}");
            return exit::CONFIG;
        }
    };
    let slurm = match (slurm, args.executor) {
        (None, None) => super::slurm::recorded_options(plan, &resume),
        (s, _) => s,
    };
    let executor: Box<dyn Executor> = match slurm {
        Some(options) => match super::slurm::executor(options) {
            Ok(e) => Box::new(e),
            Err(e) => {
                eprintln!("llem: {e}");
                return exit::FAILURE;
            }
        },
        None => Box::new(llem_study::Local),
    };
    let program = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("llem: cannot find the llem executable to run cells with: {e}");
            return exit::FAILURE;
        }
    };
    let launcher = Launcher {
        program,
        args: vec!["__cell".into()],
        env: Vec::new(),
    };
    let opts = match study_options(plan, args, resume, launcher, interrupt_counter()) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("llem: {}", e.message);
            return e.code;
        }
    };
    if !args.quiet {
        for line in plan_warnings(plan) {
            eprintln!("llem: warning: {line}");
        }
    }
    let gap = if args.no_gaps {
        0.0
    } else {
        plan.execution.experiment_gap_seconds
    };
    let mut view = StudyView::new(args.quiet, gap);
    let outcome = executor.execute(plan, &opts, &mut view);
    drop(view);
    match outcome {
        Ok(Execution::Submitted(s)) => super::slurm::print_submission(&s, args),
        Ok(Execution::Finished(o)) => {
            let m = &o.manifest;
            let s = &m.summary;
            eprint!("{}", summary_table(&o.result));
            // A long study's warnings stay in the manifest; the terminal gets the first few.
            for w in s.warnings.iter().take(SHOWN_WARNINGS) {
                eprintln!(" warning: {w}");
            }
            if s.warnings.len() > SHOWN_WARNINGS {
                eprintln!(
                    " ... and {} more warnings in {}",
                    s.warnings.len() - SHOWN_WARNINGS,
                    o.dir.join(llem_results::layout::MANIFEST).display()
                );
            }
            eprintln!(
                "\n study {}: {} of {} cells completed, {} failed, {} interrupted, {} skipped, {} left; {:.0} s\n {}",
                m.status.as_str(),
                s.completed,
                s.total_experiments,
                s.failed,
                s.interrupted,
                s.skipped,
                s.pending,
                s.total_wall_time_s,
                o.dir.display()
            );
            if s.completed > 0 {
                let g = |v: Option<f64>, unit: &str| {
                    v.map_or_else(|| "-".to_string(), |x| format!("{x:.3} {unit}"))
                };
                eprintln!(
                    " measured energy {:.1} J (headline scope), {} system; CO2 {} ({} system)",
                    s.total_energy_j,
                    g(s.total_system_energy_j, "J"),
                    g(s.total_co2_g, "g"),
                    g(s.total_system_co2_g, "g")
                );
                if let Some(l) = s.total_lifecycle_energy_j {
                    eprintln!(
                        " the study used {l:.1} J on those devices in all (baselines, loads, \
                         warmups, floors, teardowns), {:.1} J of it in measurement windows",
                        s.total_energy_j
                    );
                }
            }
            if matches!(
                m.status,
                StudyStatus::Interrupted
                    | StudyStatus::Failed
                    | StudyStatus::TimedOut
                    | StudyStatus::CircuitBreaker
            ) {
                eprintln!(" resume with: {}", resume_command(args, &o.dir));
            }
            if args.json {
                let v = serde_json::json!({
                    "study_dir": o.dir,
                    "status": m.status,
                    "summary": s,
                    "statistics": o.result.statistics,
                });
                println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
            }
            exit_code(m.status)
        }
        Err(e) => {
            eprintln!("llem: {e}");
            match e {
                StudyError::Drift { .. } | StudyError::NothingToResume { .. } => exit::CONFIG,
                _ => exit::FAILURE,
            }
        }
    }
}

/// The command that resumes a study: its own file, or the same options when it had none.
fn resume_command(args: &RunArgs, dir: &std::path::Path) -> String {
    let quote = |p: &std::path::Path| {
        let s = p.display().to_string();
        if s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+,=:@".contains(c))
        {
            s
        } else {
            format!("'{}'", s.replace('\'', r"'\''"))
        }
    };
    match &args.config {
        Some(file) => format!("llem run {} --resume-dir {}", quote(file), quote(dir)),
        None => format!("llem run <the same options> --resume-dir {}", quote(dir)),
    }
}

/// Warnings printed at the end of a study; the rest are in its manifest.
const SHOWN_WARNINGS: usize = 3;

/// The plan's warnings, each once: with the configurations it applies to, or "every
/// configuration" when it applies to all.
pub fn plan_warnings(plan: &StudyPlan) -> Vec<String> {
    collapse_warnings(
        plan.configs
            .iter()
            .map(|pc| (pc.label.as_str(), pc.warnings.as_slice())),
    )
}

/// `(label, warnings)` of each configuration → each warning once, saying where it applies.
fn collapse_warnings<'a>(configs: impl Iterator<Item = (&'a str, &'a [String])>) -> Vec<String> {
    let mut by_text: Vec<(&str, Vec<&str>)> = Vec::new();
    let mut n = 0usize;
    for (label, warnings) in configs {
        n += 1;
        for w in warnings {
            match by_text.iter_mut().find(|(t, _)| *t == w.as_str()) {
                Some((_, labels)) => labels.push(label),
                None => by_text.push((w.as_str(), vec![label])),
            }
        }
    }
    by_text
        .into_iter()
        .map(|(w, labels)| {
            if n > 1 && labels.len() == n {
                format!("{w} (every configuration)")
            } else if labels.len() > 3 {
                format!("{w} ({} configurations)", labels.len())
            } else {
                let named: Vec<&str> = labels.into_iter().filter(|l| !l.is_empty()).collect();
                if named.is_empty() {
                    w.to_string()
                } else {
                    format!("{}: {w}", named.join("; "))
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_of_every_configuration_is_said_once() {
        let floor = vec!["thermal floor below 30 s".to_string()];
        let both = vec![
            "thermal floor below 30 s".to_string(),
            "dtype has no effect".to_string(),
        ];
        let configs = [("batch=1", floor.as_slice()), ("batch=4", both.as_slice())];
        assert_eq!(
            collapse_warnings(configs.into_iter()),
            [
                "thermal floor below 30 s (every configuration)",
                "batch=4: dtype has no effect"
            ]
        );
    }
}
