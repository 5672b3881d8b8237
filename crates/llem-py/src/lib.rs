//! `llem._native`: the Rust core as a Python extension module. Conversion only: measuring and
//! planning are `llem_app`, the records are `llem_records`; the seed's Python API
//! (`llem.run_experiment`, `llem.records.LLMRuns`, ...) is the pure-Python layer in `python/llem`.

mod arrow;
mod measure;
mod options;
mod records;

use llem_app::{AppError, ErrorKind};
use pyo3::exceptions::{
    PyFileNotFoundError, PyKeyboardInterrupt, PyPermissionError, PyRuntimeError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

pyo3::create_exception!(
    llem,
    LlemError,
    PyRuntimeError,
    "A measurement, study or load failed; the message is llem's."
);
pyo3::create_exception!(
    llem,
    ConfigError,
    PyValueError,
    "An invalid configuration or option: the message names file:line:col and the nearest valid key."
);

/// A records error as the Python exception a reader expects.
pub(crate) fn records_error(e: llem_records::RecordsError) -> PyErr {
    use llem_records::RecordsError as E;
    match e {
        E::NotFound(_) | E::NothingFound(_) => PyFileNotFoundError::new_err(e.to_string()),
        E::Usage(_) => PyValueError::new_err(e.to_string()),
        E::NoRuns(_) | E::Results(_) | E::Invalid { .. } => LlemError::new_err(e.to_string()),
    }
}

/// The one mapping of llem's errors onto Python's exceptions, chosen by kind: a configuration
/// file that is not there is `FileNotFoundError`, an invalid one `llem.ConfigError` with a
/// structured `.errors` list (file, line, column, message, help), an invalid argument
/// `ValueError`, Ctrl-C `KeyboardInterrupt`, a file llem may not write `PermissionError`,
/// any other failure `llem.LlemError`.
pub(crate) fn app_error(e: AppError) -> PyErr {
    let message = e.to_string().trim_end().to_string();
    let err = match e.kind() {
        ErrorKind::NotFound => {
            let file = match &e {
                AppError::ConfigNotFound { path, .. } => Some(path.display().to_string()),
                _ => None,
            };
            let err = PyFileNotFoundError::new_err((2i32, message));
            Python::attach(|py| {
                let _ = err.value(py).setattr("filename", file);
            });
            err
        }
        ErrorKind::Config => ConfigError::new_err(message),
        ErrorKind::Option => PyValueError::new_err(message),
        ErrorKind::Cancelled => PyKeyboardInterrupt::new_err(message),
        ErrorKind::Failed => match &e {
            AppError::Io { source, .. }
                if source.kind() == std::io::ErrorKind::PermissionDenied =>
            {
                PyPermissionError::new_err(message)
            }
            _ => LlemError::new_err(message),
        },
    };
    if !e.diagnostics().is_empty() || matches!(e.kind(), ErrorKind::Config | ErrorKind::NotFound) {
        Python::attach(|py| {
            if let Ok(list) = diagnostics(py, e.diagnostics()) {
                let _ = err.value(py).setattr("errors", list);
            }
        });
    }
    err
}

/// Configuration diagnostics as a list of dicts.
fn diagnostics<'py>(
    py: Python<'py>,
    ds: &[llem_config::Diagnostic],
) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for d in ds {
        let item = PyDict::new(py);
        let loc = d.location.as_ref();
        item.set_item("file", loc.map(|l| l.file.clone()))?;
        item.set_item("line", loc.map(|l| l.line))?;
        item.set_item("column", loc.map(|l| l.column))?;
        item.set_item(
            "kind",
            serde_json::to_value(d.kind)
                .ok()
                .and_then(|v| v.as_str().map(String::from)),
        )?;
        item.set_item("message", &d.message)?;
        item.set_item("help", d.help.clone())?;
        list.append(item)?;
    }
    Ok(list)
}

/// The version of llem this module was built from.
#[pyfunction]
fn version() -> &'static str {
    llem_app::host::VERSION
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("LlemError", py.get_type::<LlemError>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    measure::register(m)?;
    records::register(m)?;
    Ok(())
}
