//! `llem __cell SPEC`: one study cell in a child process. Progress goes to stdout as JSON
//! lines, logs to stderr (the runner points it at the cell's `cell.log`), artefacts into the
//! cell directory. Exit codes as `llem run`: 0, 1 failure, 2 configuration, 130 interrupted.

use std::time::Duration;

use llem_app::{Event, Progress};
use llem_harness::HarnessError;
use llem_study::CellMessage;
use llem_study::child::{emit, read_spec, watch_parent};

use crate::cli::CellArgs;
use crate::exit;

/// Progress as JSON lines on stdout.
struct JsonLines;

impl Progress for JsonLines {
    fn event(&mut self, e: Event) {
        emit(&llem_app::events::cell_message(e));
    }
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
    watch_parent(exit::INTERRUPTED);
    llem_app::logging::init(1);
    let mut spec = match read_spec(&args.spec) {
        Ok(s) => s,
        Err(e) => return fail("SpecError", e, exit::CONFIG),
    };
    // The spec holds the runner URL redacted; the runner passed the real one.
    let credentials = std::env::var(llem_config::credentials::RUNNER_CREDENTIALS_ENV).ok();
    if let Err(e) = llem_config::credentials::restore(&mut spec.config, credentials.as_deref()) {
        return fail("SpecError", e, exit::CONFIG);
    }
    // SIGTERM from the runner (timeout, Ctrl-C) stops at the next decode step; a second one
    // exits at once. SIGINT likewise, for a cell run by hand.
    let cancel = crate::commands::execute::cancel_on_signals();
    // The plan was checked with the user config; a file broken since fails the cell, never
    // quietly measures with defaults.
    let user = match llem_config::UserSettings::load(
        &llem_config::Env::from_process(),
        &mut llem_config::source::SourceMap::new(),
    ) {
        Ok(u) => u.config,
        Err(e) => return fail("ConfigError", e.to_string(), exit::CONFIG),
    };
    let request = llem_app::single::experiment_request(
        llem_app::single::CellTarget {
            config: &spec.config,
            config_hash: &spec.config_hash,
            experiment_id: spec.experiment_id.clone(),
            cell_dir: spec.cell_dir.clone(),
            plan_warnings: spec.plan_warnings.clone(),
        },
        &user,
        spec.baseline_cache_dir.clone(),
        Duration::from_secs_f64((spec.sampling_interval_ms / 1000.0).clamp(0.001, 60.0)),
        cancel,
        // `run_study` checked every configuration before its first cell.
        true,
    );
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
                HarnessError::NothingMeasured(_) => ("NothingMeasured", exit::FAILURE),
                HarnessError::RequestsFailed(_) => ("RequestsFailed", exit::FAILURE),
                HarnessError::Cancelled => ("Interrupted", exit::INTERRUPTED),
            };
            fail(kind, e.to_string(), code)
        }
    }
}
