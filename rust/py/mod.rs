//! PyO3 bindings. Every argument is checked here, with a Python exception,
//! before any state or buffer is touched; all grammar work runs with the GIL
//! released.

mod buffer;
mod functions;
mod grammar;
mod matcher;
mod tokenizer;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::error::Error;

pub(crate) fn to_py_err(e: Error) -> PyErr {
    PyValueError::new_err(e.to_string())
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<tokenizer::PyTokenizer>()?;
    m.add_class::<grammar::PyGrammar>()?;
    m.add_class::<matcher::PyMatcher>()?;
    functions::register(m)?;
    Ok(())
}
