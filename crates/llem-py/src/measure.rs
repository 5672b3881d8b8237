//! `plan`, `measure` and `study`: `llem::embed` with the GIL released. The work runs on its own
//! thread; this (Python's) thread relays its progress events to a Python callback and checks
//! for Ctrl-C ten times a second, turning it into the run's stop flag.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use llem::embed::{self, EmbedError, Planned};
use pyo3::exceptions::{PyKeyboardInterrupt, PySystemExit};
use pyo3::prelude::*;

use crate::{ConfigError, LlemError};

/// How often Python's signal handlers get a chance to run during a measurement.
const SIGNAL_POLL: Duration = Duration::from_millis(100);

fn to_py(e: EmbedError) -> PyErr {
    match e {
        EmbedError::Config(m) => ConfigError::new_err(m.trim_end().to_string()),
        EmbedError::Cancelled => pyo3::exceptions::PyKeyboardInterrupt::new_err("interrupted"),
        EmbedError::Failed(m) => LlemError::new_err(m.trim_end().to_string()),
    }
}

fn planned(py: Python<'_>, args: Vec<String>) -> PyResult<Planned> {
    py.detach(|| embed::plan(args)).map_err(to_py)
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

/// Plans `args` (as after `llem run`); returns the plan as `llem run --dry-run --json`
/// prints it, and the configuration warnings.
#[pyfunction]
#[pyo3(signature = (args, per_run_config = false))]
fn plan(
    py: Python<'_>,
    args: Vec<String>,
    per_run_config: bool,
) -> PyResult<(String, Vec<String>)> {
    let p = planned(py, args)?;
    let json = py
        .detach(|| embed::plan_json(&p, per_run_config))
        .map_err(to_py)?;
    Ok((json, p.warnings()))
}

/// Measures the one experiment `args` plan, in this process. `on_plan` is given the
/// configuration warnings before anything runs (an exception from it, a warning filtered into
/// an error, stops here). Returns `result.json` as text and the cell directory. Ctrl-C stops
/// the engine at its next step, removes what the run had started to write, then raises
/// `KeyboardInterrupt`.
#[pyfunction]
fn measure(
    py: Python<'_>,
    args: Vec<String>,
    on_event: Bound<'_, PyAny>,
    on_plan: Bound<'_, PyAny>,
) -> PyResult<(String, String)> {
    let p = planned(py, args)?;
    on_plan.call1((p.warnings(),))?;
    let cancel = Arc::new(AtomicBool::new(false));
    let stop = || cancel.store(true, Ordering::SeqCst);
    let (outcome, interrupt) = drive(py, &on_event, &stop, |sink| {
        embed::measure(&p, sink, cancel.clone())
    });
    if let Some(e) = interrupt {
        return Err(e);
    }
    let o = outcome.map_err(to_py)?;
    let json = serde_json::to_string(&o.result).map_err(|e| LlemError::new_err(e.to_string()))?;
    Ok((json, o.cell_dir.display().to_string()))
}

/// Runs (or resumes) the study `args` plan: each cell as `program launcher_args... SPEC` in
/// a child process. `on_plan` is given the configuration warnings before anything runs, as
/// for [`measure`]. Returns the study directory and the final status. Ctrl-C terminates the
/// current cell, checkpoints the manifest (the study is resumable) and raises
/// `KeyboardInterrupt`.
#[pyfunction]
fn study(
    py: Python<'_>,
    args: Vec<String>,
    program: PathBuf,
    launcher_args: Vec<String>,
    on_event: Bound<'_, PyAny>,
    on_plan: Bound<'_, PyAny>,
) -> PyResult<(String, String)> {
    let p = planned(py, args)?;
    on_plan.call1((p.warnings(),))?;
    let launcher = embed::Launcher {
        program,
        args: launcher_args.into_iter().map(OsString::from).collect(),
        env: Vec::new(),
    };
    let interrupts = Arc::new(AtomicUsize::new(0));
    let stop = || {
        interrupts.fetch_add(1, Ordering::SeqCst);
    };
    let (outcome, interrupt) = drive(py, &on_event, &stop, |sink| {
        embed::study(&p, launcher, interrupts.clone(), sink)
    });
    if let Some(e) = interrupt {
        return Err(e);
    }
    let o = outcome.map_err(to_py)?;
    Ok((
        o.dir.display().to_string(),
        o.manifest.status.as_str().to_string(),
    ))
}

/// Adds this module's functions to `m`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(plan, m)?)?;
    m.add_function(wrap_pyfunction!(measure, m)?)?;
    m.add_function(wrap_pyfunction!(study, m)?)?;
    Ok(())
}
