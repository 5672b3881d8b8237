//! `llem __cell SPEC`: one study cell in a child process. Progress goes to stdout as JSON
//! lines, logs to stderr (the runner points it at the cell's `cell.log`), artefacts into the
//! cell directory. Exit codes as `llem run`: 0, 1 failure, 2 configuration, 130 interrupted.

use std::io::Write;
use std::time::Duration;

use llem_energy::SensorEnv;
use llem_harness::{Event, ExperimentRequest, HarnessError, Progress};
use llem_study::{CellMessage, CellSpec, PARENT_PID_ENV};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::{getpgrp, getppid};

use crate::cli::CellArgs;
use crate::exit;

/// Progress as JSON lines on stdout, flushed per line so the runner sees them live.
struct JsonLines;

fn emit(m: &CellMessage) {
    let mut out = std::io::stdout().lock();
    // A runner that went away is handled by the watchdog, not here.
    let _ = writeln!(out, "{}", m.to_line());
    let _ = out.flush();
}

impl Progress for JsonLines {
    fn event(&mut self, e: Event) {
        let m = match e {
            Event::Start {
                phase,
                total,
                detail,
            } => CellMessage::Phase {
                phase: phase.as_str().to_string(),
                total,
                detail,
            },
            Event::Advance {
                done,
                tokens,
                elapsed_s,
                power_w,
            } => CellMessage::Advance {
                done,
                tokens,
                elapsed_s,
                power_w,
            },
            Event::Finish { phase, summary } => CellMessage::PhaseDone {
                phase: phase.as_str().to_string(),
                summary,
            },
            Event::Note(message) => CellMessage::Note { message },
            Event::ServerStarted { pgid, container } => CellMessage::Server { pgid, container },
        };
        emit(&m);
    }
}

/// When the runner dies (even by SIGKILL) the cell must not live on as an orphan holding the
/// GPU: a thread watches the parent and kills the cell's whole process group once it changes.
fn watch_parent() {
    let Some(expected) = std::env::var(PARENT_PID_ENV)
        .ok()
        .and_then(|s| s.parse::<i32>().ok())
    else {
        return;
    };
    let orphaned = move || getppid().as_raw() != expected;
    if orphaned() {
        let _ = killpg(getpgrp(), Signal::SIGKILL);
    }
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_millis(200));
            if orphaned() {
                let _ = killpg(getpgrp(), Signal::SIGKILL);
                std::process::exit(exit::INTERRUPTED);
            }
        }
    });
}

fn fail(error_type: &str, message: String, code: i32) -> i32 {
    eprintln!("llem: {message}");
    emit(&CellMessage::Failed {
        error_type: error_type.to_string(),
        message,
    });
    code
}

/// Runs one cell; returns the exit code.
pub fn run(args: &CellArgs) -> i32 {
    watch_parent();
    crate::commands::execute::init_logging(1);
    let text = match std::fs::read_to_string(&args.spec) {
        Ok(t) => t,
        Err(e) => {
            return fail(
                "SpecError",
                format!("cannot read {}: {e}", args.spec.display()),
                exit::CONFIG,
            );
        }
    };
    let spec: CellSpec = match serde_json::from_str(&text) {
        Ok(s) => s,
        Err(e) => {
            return fail(
                "SpecError",
                format!("{} is not a cell spec: {e}", args.spec.display()),
                exit::CONFIG,
            );
        }
    };
    // SIGTERM from the runner (timeout, Ctrl-C) stops at the next decode step; a second one
    // exits at once. SIGINT likewise, for a cell run by hand.
    let cancel = crate::commands::execute::cancel_on_signals();
    let user = crate::commands::execute::user_config();
    let request = ExperimentRequest {
        config: &spec.config,
        config_hash: &spec.config_hash,
        experiment_id: spec.experiment_id.clone(),
        cell_dir: spec.cell_dir.clone(),
        assets_dir: crate::paths::assets_dir(),
        cache_dir: spec.baseline_cache_dir.clone(),
        sensor_env: SensorEnv::from_process(user.measurement.cpu_tdp_w),
        sampling_interval: Duration::from_secs_f64(
            (spec.sampling_interval_ms / 1000.0).clamp(0.001, 60.0),
        ),
        llem_version: env!("CARGO_PKG_VERSION"),
        git_commit: Some(env!("LLEM_GIT_COMMIT")),
        cancel,
        python: user.python.clone(),
        model_cache_dir: crate::commands::execute::model_cache_dir(&user),
        // `run_study` checked every configuration before its first cell.
        runnable_checked: true,
    };
    match llem_harness::run_experiment(&request, &mut JsonLines) {
        Ok(_) => {
            emit(&CellMessage::Completed {
                result_file: llem_results::layout::RESULT.to_string(),
            });
            exit::OK
        }
        Err(e) => {
            let (kind, code) = match &e {
                HarnessError::Config(_) => ("ConfigError", exit::CONFIG),
                HarnessError::Dataset(_) => ("DatasetError", exit::CONFIG),
                HarnessError::Engine(_) => ("EngineError", exit::FAILURE),
                HarnessError::Energy(_) => ("EnergyError", exit::FAILURE),
                HarnessError::Results(_) => ("ResultsError", exit::FAILURE),
                HarnessError::Cancelled => ("Interrupted", exit::INTERRUPTED),
            };
            fail(kind, e.to_string(), code)
        }
    }
}
