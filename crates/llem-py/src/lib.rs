//! `llem._native`: the Rust core as a Python extension module. Conversion only: measuring and
//! planning are `llem::embed`, the records are `llem_results::records`; the seed's Python API
//! (`llem.run_experiment`, `llem.records.LLMRuns`, ...) is the pure-Python layer in `python/llem`.

mod arrow;
mod measure;
mod records;

use pyo3::exceptions::{PyFileNotFoundError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;

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
pub(crate) fn records_error(e: llem_results::records::RecordsError) -> PyErr {
    use llem_results::records::RecordsError as E;
    match e {
        E::NotFound(_) | E::NothingFound(_) => PyFileNotFoundError::new_err(e.to_string()),
        E::Usage(_) => PyValueError::new_err(e.to_string()),
        E::NoRuns(_) | E::Results(_) | E::Invalid { .. } => LlemError::new_err(e.to_string()),
    }
}

/// Runs the `llem` command line on `argv` (program name first) with the GIL released;
/// returns its exit code. What `python -m llem` and the `llem` script call.
#[pyfunction]
fn cli(py: Python<'_>, argv: Vec<String>) -> i32 {
    py.detach(|| llem::cli_main(argv))
}

/// The version of llem this module was built from.
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("LlemError", py.get_type::<LlemError>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add_function(wrap_pyfunction!(cli, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    measure::register(m)?;
    records::register(m)?;
    Ok(())
}
