//! Keyword arguments into `llem-app`'s typed options. A value of the wrong type is a
//! `TypeError`, a value out of range a `ValueError`, each naming the argument as the caller
//! wrote it; nothing becomes a command-line string.

use std::path::PathBuf;
use std::time::Duration;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyString};

use crate::app_error;

/// `None` for an argument left out or given as `None`.
fn given<'a, 'py>(v: Option<&'a Bound<'py, PyAny>>) -> Option<&'a Bound<'py, PyAny>> {
    v.filter(|v| !v.is_none())
}

fn type_name(v: &Bound<'_, PyAny>) -> String {
    v.get_type()
        .name()
        .map_or_else(|_| "?".to_string(), |n| n.to_string())
}

fn wrong_type(name: &str, wanted: &str, v: &Bound<'_, PyAny>) -> PyErr {
    PyTypeError::new_err(format!("{name} must be {wanted}, not {}", type_name(v)))
}

/// A whole number of at least one (`cycles`).
pub fn count(name: &str, v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<u32>> {
    let Some(v) = given(v) else { return Ok(None) };
    if v.is_instance_of::<PyBool>() || !v.is_instance_of::<PyInt>() {
        return Err(wrong_type(name, "an int", v));
    }
    let n: i64 = v.extract().map_err(|_| {
        PyValueError::new_err(format!("{name}: {v} is not a whole number from 1 up"))
    })?;
    llem_app::options::positive_count(name, n)
        .map(Some)
        .map_err(app_error)
}

/// A whole number from 0 (`verbose`).
pub fn level(name: &str, v: Option<&Bound<'_, PyAny>>) -> PyResult<u8> {
    let Some(v) = given(v) else { return Ok(0) };
    if v.is_instance_of::<PyBool>() || !v.is_instance_of::<PyInt>() {
        return Err(wrong_type(name, "an int", v));
    }
    let n: i64 = v.extract().unwrap_or(-1);
    u8::try_from(n)
        .map(|n| n.min(3))
        .map_err(|_| PyValueError::new_err(format!("{name}: {n} is not a level from 0 up")))
}

/// `True` or `False`, `default` when left out.
pub fn flag(name: &str, v: Option<&Bound<'_, PyAny>>, default: bool) -> PyResult<bool> {
    let Some(v) = given(v) else {
        return Ok(default);
    };
    if !v.is_instance_of::<PyBool>() {
        return Err(wrong_type(name, "True or False", v));
    }
    v.extract()
}

/// A string.
pub fn text(name: &str, v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<String>> {
    let Some(v) = given(v) else { return Ok(None) };
    if !v.is_instance_of::<PyString>() {
        return Err(wrong_type(name, "a str", v));
    }
    v.extract().map(Some)
}

/// A path: a `str` or an `os.PathLike`.
pub fn path(name: &str, v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<PathBuf>> {
    let Some(v) = given(v) else { return Ok(None) };
    let os = v.py().import("os")?;
    let p = os
        .call_method1("fspath", (v,))
        .map_err(|_| wrong_type(name, "a str or os.PathLike", v))?;
    if !p.is_instance_of::<PyString>() {
        return Err(wrong_type(name, "a str or os.PathLike of str", v));
    }
    let s: String = p.extract()?;
    if s.is_empty() {
        return Err(PyValueError::new_err(format!("{name}: the path is empty")));
    }
    Ok(Some(PathBuf::from(s)))
}

/// Hours of wall clock, above 0 and at most a year.
pub fn hours(name: &str, v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<f64>> {
    let Some(v) = given(v) else { return Ok(None) };
    if v.is_instance_of::<PyBool>()
        || !(v.is_instance_of::<PyInt>() || v.is_instance_of::<PyFloat>())
    {
        return Err(wrong_type(name, "a number of hours", v));
    }
    let h: f64 = v.extract()?;
    llem_app::options::positive_hours(name, h)
        .map(Some)
        .map_err(app_error)
}

/// A sampling interval written as the CLI takes it (`"100ms"`, `"0.5s"`).
pub fn interval(name: &str, v: Option<&Bound<'_, PyAny>>) -> PyResult<Duration> {
    match text(name, v)? {
        None => Ok(llem_app::options::DEFAULT_SAMPLING_INTERVAL),
        Some(s) => llem_app::options::interval(name, &s).map_err(app_error),
    }
}

/// A cell order by name.
pub fn order(
    name: &str,
    v: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<llem_config::ExperimentOrder>> {
    match text(name, v)? {
        None => Ok(None),
        Some(s) => llem_app::options::order(name, &s)
            .map(Some)
            .map_err(app_error),
    }
}
