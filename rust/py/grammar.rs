use std::sync::Arc;

use pyo3::prelude::*;

use super::tokenizer::PyTokenizer;
use super::{detached, to_py_err};
use crate::grammar::CompiledGrammar;

/// A compiled grammar: immutable, thread-safe, shared by any number of matchers.
#[pyclass(frozen, module = "maskpar._core", name = "Grammar")]
pub struct PyGrammar {
    pub inner: Arc<CompiledGrammar>,
}

#[pymethods]
impl PyGrammar {
    /// The model's logits width this grammar's masks cover.
    #[getter]
    fn vocab_size(&self) -> usize {
        self.inner.vocab().vocab_size()
    }

    /// The pattern or grammar text it was compiled from.
    #[getter]
    fn source(&self) -> &str {
        self.inner.source()
    }

    /// Number of automaton states (a measure of the grammar's size).
    #[getter]
    fn num_states(&self) -> usize {
        self.inner.num_states()
    }

    fn __repr__(&self) -> String {
        format!(
            "Grammar(regex={:?}, num_states={})",
            self.inner.source(),
            self.inner.num_states()
        )
    }
}

/// Compiles a regular expression (Rust `regex` syntax) for full-match use.
#[pyfunction]
pub fn compile_regex(
    py: Python<'_>,
    tokenizer: &PyTokenizer,
    pattern: &str,
) -> PyResult<PyGrammar> {
    let vocab = tokenizer.vocab.clone();
    let g = detached(py, || CompiledGrammar::from_regex(vocab, pattern))?.map_err(to_py_err)?;
    Ok(PyGrammar { inner: Arc::new(g) })
}
