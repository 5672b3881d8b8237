//! `plan`, `measure` and `study`: `llem_app` with the GIL released. The work runs on its own
//! thread; this (Python's) thread relays its progress events to a Python callback and checks
//! for Ctrl-C ten times a second, turning it into the run's stop flag.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use llem_app::{AppError, PlanOptions, StudyEvent};
use llem_config::{Env, StudyPlan};
use pyo3::exceptions::{PyKeyboardInterrupt, PySystemExit};
use pyo3::prelude::*;

use crate::options as opt;
use crate::{ConfigError, LlemError, app_error};

/// How often Python's signal handlers get a chance to run during a measurement.
const SIGNAL_POLL: Duration = Duration::from_millis(100);

/// Plans `config` (a file; `config_dir` resolves its relative paths) with the overrides
/// given.
fn planned(
    py: Python<'_>,
    config: PathBuf,
    config_dir: Option<PathBuf>,
    overrides: llem_config::Overrides,
) -> PyResult<StudyPlan> {
    let opts = PlanOptions {
        config: Some(config),
        config_dir,
        overrides,
        dedup: true,
    };
    py.detach(|| llem_app::plan(&opts, &Env::from_process()))
        .map_err(app_error)
}

/// Harness progress as JSON objects (the lines a study's cell prints), to `sink`.
struct JsonEvents<'a>(&'a mut dyn FnMut(String));

impl llem_app::Progress for JsonEvents<'_> {
    fn event(&mut self, e: llem_app::Event) {
        if let Ok(s) = serde_json::to_string(&llem_app::events::cell_message(e)) {
            (self.0)(s);
        }
    }
}

/// Study events as JSON objects, to `sink`.
struct StudyEvents<'a>(&'a mut dyn FnMut(String));

impl llem_app::Observer for StudyEvents<'_> {
    fn event(&mut self, e: StudyEvent<'_>) {
        let v = match e {
            StudyEvent::Started {
                dir,
                manifest,
                resumed,
            } => serde_json::json!({
                "event": "study_started",
                "dir": dir,
                "total": manifest.summary.total_experiments,
                "resumed": resumed,
            }),
            StudyEvent::CellStarted { entry, .. } => serde_json::json!({
                "event": "cell_started",
                "index": entry.index,
                "cycle": entry.cycle,
                "label": entry.config_summary,
            }),
            StudyEvent::Cell { entry, message } => serde_json::json!({
                "event": "cell",
                "index": entry.index,
                "message": message,
            }),
            StudyEvent::CellFinished { entry, .. } => serde_json::json!({
                "event": "cell_finished",
                "index": entry.index,
                "status": entry.status,
                "error": entry.error_message,
            }),
            StudyEvent::Waiting { reason, seconds } => serde_json::json!({
                "event": "waiting",
                "reason": format!("{reason:?}"),
                "seconds": seconds,
            }),
            StudyEvent::WaitLeft { left_s, .. } => {
                serde_json::json!({ "event": "wait_left", "left_s": left_s })
            }
            StudyEvent::Note(n) => serde_json::json!({ "event": "note", "message": n }),
        };
        (self.0)(v.to_string());
    }
}

/// Refuses a plan whose cells are to run on Slurm: Python runs them on this host only, and
/// running them here would ignore what the file asks.
fn here_only(plan: &StudyPlan) -> PyResult<()> {
    let slurm = llem_app::slurm::resolve(
        plan,
        &llem_app::ExecutorChoice::AsPlanned,
        &llem_app::SlurmOverrides::default(),
    )
    .map_err(app_error)?;
    match slurm {
        None => Ok(()),
        Some(_) => Err(ConfigError::new_err(
            "this study runs on Slurm (study_execution.executor); submit it with the `llem run` \
             command: from Python, studies run on this host only",
        )),
    }
}

/// Runs `work` on a thread of its own and, until it ends, hands each event it emits to
/// `on_event` and polls for signals. The first `KeyboardInterrupt` (or `SystemExit`), from
/// the signal check or raised inside `on_event`, calls `stop` and is kept, to be raised once `work` has cleaned up; any other exception from `on_event` (a
/// broken progress bar) is printed once and does not stop the measurement.
fn drive<T: Send>(
    py: Python<'_>,
    on_event: &Bound<'_, PyAny>,
    stop: &(dyn Fn() + Sync),
    work: impl FnOnce(&mut dyn FnMut(String)) -> T + Send,
) -> (T, Option<PyErr>) {
    let (tx, rx) = mpsc::channel::<String>();
    // Waited on with the GIL released, which asks for `Sync`.
    let rx = std::sync::Mutex::new(rx);
    std::thread::scope(|scope| {
        let worker = scope.spawn(move || {
            let mut send = |e: String| {
                let _ = tx.send(e);
            };
            work(&mut send)
        });
        let mut interrupt: Option<PyErr> = None;
        let mut callback_failed = false;
        loop {
            let got = py.detach(|| match rx.lock() {
                Ok(r) => r.recv_timeout(SIGNAL_POLL),
                Err(_) => Err(mpsc::RecvTimeoutError::Disconnected),
            });
            match got {
                Ok(event) => {
                    if !callback_failed && let Err(e) = on_event.call1((event,)) {
                        // Python runs its signal handlers inside the callback too: Ctrl-C
                        // may surface there rather than from check_signals below.
                        if e.is_instance_of::<PyKeyboardInterrupt>(py)
                            || e.is_instance_of::<PySystemExit>(py)
                        {
                            if interrupt.is_none() {
                                stop();
                                interrupt = Some(e);
                            }
                        } else {
                            callback_failed = true;
                            e.print(py);
                        }
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
            if let Err(e) = py.check_signals()
                && interrupt.is_none()
            {
                stop();
                interrupt = Some(e);
            }
        }
        let out = match py.detach(|| worker.join()) {
            Ok(v) => v,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        (out, interrupt)
    })
}

/// Plans `config`; returns the plan as `llem run --dry-run --json` prints it, and the
/// configuration warnings.
#[pyfunction]
#[pyo3(signature = (config, config_dir = None, *, cycles = None, order = None, per_run_config = None))]
fn plan(
    py: Python<'_>,
    config: PathBuf,
    config_dir: Option<PathBuf>,
    cycles: Option<Bound<'_, PyAny>>,
    order: Option<Bound<'_, PyAny>>,
    per_run_config: Option<Bound<'_, PyAny>>,
) -> PyResult<(String, Vec<String>)> {
    let overrides = llem_config::Overrides {
        cycles: opt::count("cycles", cycles.as_ref())?,
        order: opt::order("order", order.as_ref())?,
        ..llem_config::Overrides::default()
    };
    let per_run_config = opt::flag("per_run_config", per_run_config.as_ref(), false)?;
    let p = planned(py, config, config_dir, overrides)?;
    let json = py
        .detach(|| llem_app::plan::to_json(&p, per_run_config))
        .map_err(app_error)?;
    Ok((json, llem_app::plan::warnings(&p)))
}

/// Measures the one experiment `config` plans, in this process. `on_plan` is given the
/// configuration warnings before anything runs (an exception from it, a warning filtered into
/// an error, stops here). Returns `result.json` as text and the cell directory. Ctrl-C stops
/// the engine at its next step, removes what the run had started to write, then raises
/// `KeyboardInterrupt`.
#[pyfunction]
#[pyo3(signature = (config, config_dir, on_event, on_plan, *, lock = None, sampling_interval = None, verbose = None))]
#[allow(clippy::too_many_arguments)]
fn measure(
    py: Python<'_>,
    config: PathBuf,
    config_dir: Option<PathBuf>,
    on_event: Bound<'_, PyAny>,
    on_plan: Bound<'_, PyAny>,
    lock: Option<Bound<'_, PyAny>>,
    sampling_interval: Option<Bound<'_, PyAny>>,
    verbose: Option<Bound<'_, PyAny>>,
) -> PyResult<(String, String)> {
    let run = llem_app::RunOptions {
        lock: opt::flag("lock", lock.as_ref(), true)?,
        wait_for_devices: false,
        sampling_interval: opt::interval("sampling_interval", sampling_interval.as_ref())?,
        live: None,
    };
    let verbose = opt::level("verbose", verbose.as_ref())?;
    let p = planned(py, config, config_dir, llem_config::Overrides::default())?;
    if !llem_app::plan::is_single(&p) {
        return Err(ConfigError::new_err(format!(
            "this configuration plans {} runs (a study): use run_study",
            p.runs.len()
        )));
    }
    here_only(&p)?;
    on_plan.call1((llem_app::plan::warnings(&p),))?;
    llem_app::logging::init(verbose);
    let cancel = Arc::new(AtomicBool::new(false));
    let stop = || cancel.store(true, Ordering::SeqCst);
    let (outcome, interrupt) = drive(py, &on_event, &stop, |sink| {
        llem_app::run_one(&p, &run, &mut JsonEvents(sink), cancel.clone())
    });
    if let Some(e) = interrupt {
        return Err(e);
    }
    let o = outcome.map_err(app_error)?;
    let json = serde_json::to_string(&o.result).map_err(|e| LlemError::new_err(e.to_string()))?;
    Ok((json, o.cell_dir.display().to_string()))
}

/// Runs (or resumes) the study `config` plans: each cell as `program launcher_args... SPEC` in
/// a child process. `on_plan` is given the configuration warnings before anything runs, as
/// for [`measure`]. Returns the study directory and the final status. Ctrl-C terminates the
/// current cell, checkpoints the manifest (the study is resumable) and raises
/// `KeyboardInterrupt`.
#[pyfunction]
#[pyo3(signature = (
    config, config_dir, program, launcher_args, on_event, on_plan, *,
    cycles = None, order = None, output_dir = None, resume = None, resume_dir = None,
    fail_fast = None, circuit_breaker = None, timeout_hours = None, gaps = None, lock = None,
    sampling_interval = None,
))]
#[allow(clippy::too_many_arguments)]
fn study(
    py: Python<'_>,
    config: PathBuf,
    config_dir: Option<PathBuf>,
    program: PathBuf,
    launcher_args: Vec<String>,
    on_event: Bound<'_, PyAny>,
    on_plan: Bound<'_, PyAny>,
    cycles: Option<Bound<'_, PyAny>>,
    order: Option<Bound<'_, PyAny>>,
    output_dir: Option<Bound<'_, PyAny>>,
    resume: Option<Bound<'_, PyAny>>,
    resume_dir: Option<Bound<'_, PyAny>>,
    fail_fast: Option<Bound<'_, PyAny>>,
    circuit_breaker: Option<Bound<'_, PyAny>>,
    timeout_hours: Option<Bound<'_, PyAny>>,
    gaps: Option<Bound<'_, PyAny>>,
    lock: Option<Bound<'_, PyAny>>,
    sampling_interval: Option<Bound<'_, PyAny>>,
) -> PyResult<(String, String)> {
    let overrides = llem_config::Overrides {
        cycles: opt::count("cycles", cycles.as_ref())?,
        order: opt::order("order", order.as_ref())?,
        output_dir: opt::path("output_dir", output_dir.as_ref())?.map(|p| p.display().to_string()),
        ..llem_config::Overrides::default()
    };
    let resume_latest = opt::flag("resume", resume.as_ref(), false)?;
    let resume_dir = opt::path("resume_dir", resume_dir.as_ref())?;
    let resume = match (resume_latest, resume_dir) {
        (true, Some(_)) => {
            return Err(app_error(AppError::option(
                "resume_dir",
                "give resume=True (the latest unfinished study) or resume_dir=, not both",
            )));
        }
        (_, Some(d)) => llem_app::ResumeFrom::Dir(d),
        (true, None) => llem_app::ResumeFrom::Latest,
        (false, None) => llem_app::ResumeFrom::New,
    };
    let fail_fast = opt::flag("fail_fast", fail_fast.as_ref(), false)?;
    let circuit_breaker = opt::flag("circuit_breaker", circuit_breaker.as_ref(), true)?;
    if fail_fast && !circuit_breaker {
        return Err(app_error(AppError::option(
            "fail_fast",
            "fail_fast=True stops at the first failure, circuit_breaker=False never stops: \
             give one",
        )));
    }
    let mut opts = llem_app::StudyOptions::new(llem_app::Launcher {
        program,
        args: launcher_args.into_iter().map(OsString::from).collect(),
        env: Vec::new(),
    });
    opts.resume = resume;
    opts.fail_fast = fail_fast;
    opts.circuit_breaker = circuit_breaker;
    opts.timeout_hours = opt::hours("timeout_hours", timeout_hours.as_ref())?;
    opts.gaps = opt::flag("gaps", gaps.as_ref(), true)?;
    opts.lock = opt::flag("lock", lock.as_ref(), true)?;
    opts.sampling_interval = opt::interval("sampling_interval", sampling_interval.as_ref())?;
    let p = planned(py, config, config_dir, overrides)?;
    here_only(&p)?;
    on_plan.call1((llem_app::plan::warnings(&p),))?;
    let interrupts = Arc::new(AtomicUsize::new(0));
    let stop = || {
        interrupts.fetch_add(1, Ordering::SeqCst);
    };
    let (outcome, interrupt) = drive(py, &on_event, &stop, |sink| {
        llem_app::run_study(&p, &opts, &mut StudyEvents(sink), interrupts.clone())
    });
    if let Some(e) = interrupt {
        return Err(e);
    }
    match outcome.map_err(app_error)? {
        llem_app::Execution::Finished(o) => Ok((
            o.dir.display().to_string(),
            o.manifest.status.as_str().to_string(),
        )),
        llem_app::Execution::Submitted(_) => Err(LlemError::new_err(
            "the study was submitted to Slurm, not run here",
        )),
    }
}

/// Adds this module's functions to `m`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(plan, m)?)?;
    m.add_function(wrap_pyfunction!(measure, m)?)?;
    m.add_function(wrap_pyfunction!(study, m)?)?;
    Ok(())
}
