//! PyO3 bindings. Every argument is checked here, with a Python exception,
//! before any state or buffer is touched; all grammar work runs with the GIL
//! released.

mod apply;
mod buffer;
mod dlpack;
mod eagle;
mod functions;
mod grammar;
mod int;
mod lists;
mod matcher;
mod pooledmask;
mod sglangstep;
mod stag;
mod tensormask;
mod tokenizer;

use pyo3::exceptions::{PyMemoryError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use crate::error::Error;

pub(crate) fn to_py_err(e: Error) -> PyErr {
    match e {
        Error::OutOfMemory(m) => PyMemoryError::new_err(m),
        e => PyValueError::new_err(shortened(e.to_string())),
    }
}

/// Messages longer than this many characters keep their start and end.
const MAX_MESSAGE_CHARS: usize = 4000;

/// `m` cut in the middle when long: errors quote the grammar text they are
/// about (a regex, a rule), and a hostile request's text is megabytes that
/// a server would log; the cause is said at the end, the place at the start.
fn shortened(m: String) -> String {
    let n = m.chars().count();
    if n <= MAX_MESSAGE_CHARS {
        return m;
    }
    let head: String = m.chars().take(MAX_MESSAGE_CHARS / 2).collect();
    let tail: String = m.chars().skip(n - MAX_MESSAGE_CHARS / 4).collect();
    let cut = n - head.chars().count() - tail.chars().count();
    format!("{head}[... {cut} characters ...]{tail}")
}

/// Runs `f` with the GIL released. A panic would be a bug in maskpar; it is
/// caught here and raised as a RuntimeError rather than unwinding into Python.
/// All arguments were checked before, so no half-written state is visible to
/// callers other than the rows of the buffer being filled.
pub(crate) fn detached<T: Send>(py: Python<'_>, f: impl FnOnce() -> T + Send) -> PyResult<T> {
    py.detach(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)))
        .map_err(internal_error)
}

/// `f`'s result, a panic inside it reported as `detached` reports one, with
/// the GIL kept (for work that must not let other Python threads run).
pub(crate) fn attached<T>(f: impl FnOnce() -> T) -> PyResult<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(internal_error)
}

fn internal_error(panic: Box<dyn std::any::Any + Send>) -> PyErr {
    let msg = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    PyRuntimeError::new_err(format!("maskpar internal error (please report): {msg}"))
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("MAX_INDENT_DEPTH", crate::schema::MAX_INDENT_DEPTH)?;
    m.add(
        "DEFAULT_COMPILE_STEPS",
        crate::budget::DEFAULT_COMPILE_STEPS,
    )?;
    m.add_class::<tokenizer::PyTokenizer>()?;
    m.add_class::<grammar::PyGrammar>()?;
    m.add_class::<matcher::PyMatcher>()?;
    functions::register(m)?;
    m.add_function(wrap_pyfunction!(stag::compile_structural_tag, m)?)?;
    m.add_function(wrap_pyfunction!(apply::_apply_token_bitmask_cpu, m)?)?;
    m.add_function(wrap_pyfunction!(
        apply::_apply_token_bitmask_cpu_tensors,
        m
    )?)?;
    m.add_function(wrap_pyfunction!(pooledmask::_pooled_bitmask, m)?)?;
    m.add_function(wrap_pyfunction!(eagle::_fill_eagle_trees, m)?)?;
    m.add_function(wrap_pyfunction!(eagle::_fill_eagle_step, m)?)?;
    m.add_function(wrap_pyfunction!(sglangstep::_sglang_tree_step, m)?)?;
    m.add_function(wrap_pyfunction!(buffer::_is_view_of, m)?)?;
    m.add(
        "_MIN_POOLED_BITMASK_WORDS",
        crate::bitmaskpool::MIN_POOLED_WORDS,
    )?;
    m.add(
        "_MAX_POOLED_BITMASK_WORDS",
        crate::bitmaskpool::max_pooled_words(),
    )?;
    Ok(())
}
