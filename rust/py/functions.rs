use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use super::buffer::Bitmask;
use super::grammar::{compile_grammar, compile_regex};
use super::matcher::{PyMatcher, IN_USE};
use super::{detached, to_py_err};
use crate::batch::{self, DraftRequest};

/// Sets the default number of threads for parallel fills.
#[pyfunction]
fn set_num_threads(n: i64) -> PyResult<()> {
    let n = usize::try_from(n)
        .map_err(|_| PyValueError::new_err(format!("num_threads must be >= 1, got {n}")))?;
    batch::set_num_threads(n).map_err(to_py_err)
}

/// The default number of threads for parallel fills.
#[pyfunction]
fn get_num_threads() -> usize {
    batch::get_num_threads()
}

struct Parsed<'py> {
    matchers: Vec<PyRef<'py, PyMatcher>>,
    rows: Vec<usize>,
    drafts: Vec<Vec<u32>>,
}

/// Reads `[(matcher, row[, drafts]), ...]`, checking every element.
fn parse_requests<'py>(items: &Bound<'py, PyAny>, with_drafts: bool) -> PyResult<Parsed<'py>> {
    let arity = if with_drafts { 3 } else { 2 };
    let shape = if with_drafts {
        "(matcher, row, drafts)"
    } else {
        "(matcher, row)"
    };
    let mut out = Parsed {
        matchers: Vec::new(),
        rows: Vec::new(),
        drafts: Vec::new(),
    };
    let mut seen: Vec<usize> = Vec::new();
    for (i, item) in items.try_iter()?.enumerate() {
        let item = item?;
        let parts: Vec<Bound<'py, PyAny>> =
            if item.is_instance_of::<PyTuple>() || item.is_instance_of::<PyList>() {
                item.try_iter()?.collect::<PyResult<_>>()?
            } else {
                return Err(PyTypeError::new_err(format!(
                    "item {i} must be a tuple {shape}"
                )));
            };
        if parts.len() != arity {
            return Err(PyTypeError::new_err(format!(
                "item {i} must be a tuple {shape}, got {} elements",
                parts.len()
            )));
        }
        let m = parts[0].cast::<PyMatcher>().map_err(|_| {
            PyTypeError::new_err(format!(
                "item {i}: expected a maskpar.Matcher, got {}",
                parts[0].get_type()
            ))
        })?;
        let ptr = m.as_ptr() as usize;
        if seen.contains(&ptr) {
            return Err(PyValueError::new_err(format!(
                "item {i}: the same Matcher appears twice in one call; fork() it for a second request"
            )));
        }
        seen.push(ptr);
        let row: i64 = parts[1]
            .extract()
            .map_err(|_| PyTypeError::new_err(format!("item {i}: row must be an int")))?;
        if row < 0 {
            return Err(PyValueError::new_err(format!(
                "item {i}: row must be >= 0, got {row}"
            )));
        }
        let mref = m
            .try_borrow()
            .map_err(|_| PyRuntimeError::new_err(format!("item {i}: {IN_USE}")))?;
        let drafts = if with_drafts {
            let raw: Vec<i64> = parts[2].extract().map_err(|e: PyErr| {
                // Keep errors raised by the caller's own sequence (e.g. it touched a
                // matcher that this call holds); reword only plain type mismatches.
                if e.is_instance_of::<PyTypeError>(item.py()) {
                    PyTypeError::new_err(format!("item {i}: drafts must be a sequence of ints"))
                } else {
                    e
                }
            })?;
            mref.core
                .check_ids(&raw)
                .map_err(|e| PyValueError::new_err(format!("item {i}: draft {e}")))?
        } else {
            Vec::new()
        };
        out.matchers.push(mref);
        out.rows.push(row as usize);
        out.drafts.push(drafts);
    }
    Ok(out)
}

fn run_fill(
    py: Python<'_>,
    items: &Bound<'_, PyAny>,
    bitmask: &Bound<'_, PyAny>,
    num_threads: Option<i64>,
    with_drafts: bool,
) -> PyResult<Vec<usize>> {
    let parsed = parse_requests(items, with_drafts)?;
    let threads = match num_threads {
        Some(n) => Some(
            usize::try_from(n)
                .map_err(|_| PyValueError::new_err(format!("num_threads must be >= 1, got {n}")))?,
        ),
        None => None,
    };
    let pool = batch::pool(threads).map_err(to_py_err)?;
    // With no requests there is no width to check, but the buffer still must be valid.
    let vocab_size = parsed
        .matchers
        .first()
        .map(|m| m.core.grammar().vocab().vocab_size());
    let mut bm = Bitmask::new(bitmask, vocab_size)?;
    let reqs: Vec<DraftRequest<'_>> = parsed
        .matchers
        .iter()
        .zip(parsed.rows)
        .zip(parsed.drafts)
        .map(|((m, row), drafts)| DraftRequest {
            matcher: &m.core,
            row,
            drafts,
        })
        .collect();
    let (rows, words) = (bm.rows, bm.words);
    batch::check_layout(&reqs, rows, words).map_err(to_py_err)?;
    let buf = bm.words_mut();
    detached(py, || batch::fill_with_drafts(&reqs, buf, words, &pool))?.map_err(to_py_err)
}

/// Fills row `row` of `bitmask` for each `(matcher, row)`, in parallel.
#[pyfunction]
#[pyo3(signature = (matchers, bitmask, num_threads=None))]
fn fill_next_token_bitmask_par(
    py: Python<'_>,
    matchers: &Bound<'_, PyAny>,
    bitmask: &Bound<'_, PyAny>,
    num_threads: Option<i64>,
) -> PyResult<()> {
    run_fill(py, matchers, bitmask, num_threads, false).map(|_| ())
}

/// For each `(matcher, row, drafts)`, fills rows `row .. row + len(drafts)`:
/// row `row + i` is the mask after `drafts[:i]`. Rows after a rejected draft
/// are set to all ones (-1). Returns the number of accepted drafts per request;
/// matchers are left unchanged.
#[pyfunction]
#[pyo3(signature = (matchers, bitmask, num_threads=None))]
fn fill_next_token_bitmask_par_with_draft_tokens(
    py: Python<'_>,
    matchers: &Bound<'_, PyAny>,
    bitmask: &Bound<'_, PyAny>,
    num_threads: Option<i64>,
) -> PyResult<Vec<usize>> {
    run_fill(py, matchers, bitmask, num_threads, true)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(set_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(get_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(compile_regex, m)?)?;
    m.add_function(wrap_pyfunction!(compile_grammar, m)?)?;
    m.add_function(wrap_pyfunction!(fill_next_token_bitmask_par, m)?)?;
    m.add_function(wrap_pyfunction!(
        fill_next_token_bitmask_par_with_draft_tokens,
        m
    )?)?;
    Ok(())
}
