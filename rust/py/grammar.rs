use std::sync::Arc;

use pyo3::prelude::*;

use super::tokenizer::PyTokenizer;
use super::{detached, to_py_err};
use crate::cfg::{gbnf, lark};
use crate::grammar::CompiledGrammar;
use pyo3::exceptions::PyValueError;

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

    /// The grammar's syntax: "regex" or "gbnf".
    #[getter]
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    /// The same grammar over another tokenizer: automata and parser tables
    /// are shared, only the token tables are built. Matchers can move between
    /// the two with `Matcher.fork(grammar=...)`.
    fn for_tokenizer(&self, py: Python<'_>, tokenizer: &PyTokenizer) -> PyResult<PyGrammar> {
        let vocab = tokenizer.vocab.clone();
        let g = detached(py, || self.inner.for_vocab(vocab))?;
        Ok(PyGrammar { inner: Arc::new(g) })
    }

    fn __repr__(&self) -> String {
        let src = self.inner.source();
        let short: String = src.chars().take(60).collect();
        let more = if short.len() < src.len() { "..." } else { "" };
        format!(
            "Grammar(kind={:?}, source={:?}{more}, size={})",
            self.inner.kind(),
            short,
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

/// Compiles a context-free grammar. `syntax` is "gbnf" (llama.cpp's format;
/// the start rule is `root`), "lark" (start rule `start`) or "auto", which
/// takes text with `::=` rules for GBNF and anything else for Lark.
#[pyfunction]
#[pyo3(signature = (tokenizer, source, syntax="auto"))]
pub fn compile_grammar(
    py: Python<'_>,
    tokenizer: &PyTokenizer,
    source: &str,
    syntax: &str,
) -> PyResult<PyGrammar> {
    let syntax: &'static str = match syntax {
        "auto" if source.contains("::=") => "gbnf",
        "auto" | "lark" => "lark",
        "gbnf" => "gbnf",
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown syntax {other:?}; expected 'auto', 'gbnf' or 'lark'"
            )))
        }
    };
    let vocab = tokenizer.vocab.clone();
    let g = detached(py, || {
        let ast = if syntax == "gbnf" {
            gbnf::parse(source)?
        } else {
            lark::parse(source)?
        };
        CompiledGrammar::from_ast(vocab, &ast, syntax, source)
    })?
    .map_err(to_py_err)?;
    Ok(PyGrammar { inner: Arc::new(g) })
}
