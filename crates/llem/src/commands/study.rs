//! `llem run` for a study: each cell in a child process, with the live view and the final
//! table; also what `llem schedule` runs each time.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use llem_config::StudyPlan;
use llem_results::StudyStatus;
use llem_study::{Launcher, ResumeFrom, StudyError, StudyOptions};

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

/// Runs a study (or resumes one); returns the exit code.
pub fn run_study(plan: &StudyPlan, args: &RunArgs, resume: ResumeFrom) -> i32 {
    let program = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("llem: cannot find the llem executable to run cells with: {e}");
            return exit::FAILURE;
        }
    };
    // A typo in a model path would otherwise fail every cell, one by one, overnight.
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
        eprintln!("llem: this study cannot run; nothing was started:");
        for p in &problems {
            eprintln!("  - {p}");
        }
        return exit::CONFIG;
    }
    let resources = lock_resources(plan);
    let opts = StudyOptions {
        launcher: Launcher {
            program,
            args: vec!["__cell".into()],
        },
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
        interrupts: interrupt_counter(),
    };
    for (pc, w) in plan
        .configs
        .iter()
        .flat_map(|pc| pc.warnings.iter().map(move |w| (pc, w)))
    {
        if !args.quiet {
            eprintln!("llem: warning: {}: {w}", pc.label);
        }
    }
    let gap = if args.no_gaps {
        0.0
    } else {
        plan.execution.experiment_gap_seconds
    };
    let mut view = StudyView::new(args.quiet, gap);
    let outcome = llem_study::run_study(plan, &opts, &mut view);
    drop(view);
    match outcome {
        Ok(o) => {
            let m = &o.manifest;
            let s = &m.summary;
            eprint!("{}", summary_table(&o.result));
            for w in &s.warnings {
                eprintln!(" warning: {w}");
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
            }
            if matches!(
                m.status,
                StudyStatus::Interrupted
                    | StudyStatus::Failed
                    | StudyStatus::TimedOut
                    | StudyStatus::CircuitBreaker
            ) {
                eprintln!(
                    " resume with: llem run <study.yaml> --resume-dir {}",
                    o.dir.display()
                );
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
