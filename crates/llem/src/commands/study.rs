//! `llem run` for a study: each cell in a child process, with the live view and the final
//! table; also what `llem schedule` runs each time.

use llem_app::{Execution, Launcher, ResumeFrom};
use llem_config::StudyPlan;
use llem_results::StudyStatus;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::cli::RunArgs;
use crate::exit;
use crate::study_view::{StudyView, summary_table};

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

/// Runs a study (or resumes one), here or on Slurm; returns the exit code.
pub fn run_study(plan: &StudyPlan, args: &RunArgs, resume: ResumeFrom) -> i32 {
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
    let mut opts = crate::options::study(args, resume, launcher);
    // The cells run on Slurm as run_study will decide (a conflict is its to report).
    let on_slurm = matches!(
        llem_app::slurm::resolve(plan, &opts.executor, &opts.slurm),
        Ok(Some(_))
    );
    // The cells push to a gateway themselves; the endpoint and OTLP belong to this process.
    let mut live_opts = args.live.options();
    opts.metrics_push = live_opts.push_gateway.take();
    if let Some(url) = &opts.metrics_push
        && let Err(e) = llem_app::live::gateway::check(url)
    {
        return super::live::refuse(e);
    }
    if on_slurm && live_opts.enabled() {
        eprintln!(
            "llem: --metrics-listen and --otlp-endpoint serve a study from this process, which \
             a Slurm study's cells (on other nodes) cannot report to: use --metrics-push URL of \
             a Pushgateway the nodes reach"
        );
        return exit::CONFIG;
    }
    let live = match super::live::start(&live_opts, "study", &plan.study_name, &[]) {
        Ok(l) => l,
        Err(code) => return code,
    };
    if let Some(l) = &live {
        l.metrics.plan(plan);
        l.metrics
            .staleness(args.interval + llem_app::live::CELL_REPORT_INTERVAL);
        opts.live_reports = true;
    }
    if !args.quiet {
        for line in llem_app::plan::warnings(plan) {
            eprintln!("llem: warning: {line}");
        }
    }
    let gap = if args.no_gaps {
        0.0
    } else {
        plan.execution.experiment_gap_seconds
    };
    let mut view = StudyView::new(args.quiet, gap)
        .searching(plan.search.as_ref().map(|s| s.budget.runs(plan.runs.len())));
    let outcome = match &live {
        Some(l) => {
            let mut tee = llem_app::live::ObserverTee {
                inner: &mut view,
                metrics: &l.metrics,
            };
            llem_app::run_study(plan, &opts, &mut tee, interrupt_counter())
        }
        None => llem_app::run_study(plan, &opts, &mut view, interrupt_counter()),
    };
    drop(view);
    super::live::finish(live);
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
                if let Some(n) = s.total_node_energy_j {
                    eprintln!(
                        " whole node {n:.1} J, {} of it beside the measured components",
                        g(s.total_unattributed_j, "J")
                    );
                }
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
            exit::of(&e)
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
