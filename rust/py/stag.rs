//! The `compile_structural_tag` binding: the spec (a dict, JSON text or an
//! object with pydantic's `model_dump_json`, like xgrammar's
//! `StructuralTag`) to JSON text, then the core's `stag` compiler.

use std::sync::Arc;

use pyo3::exceptions::{PyRecursionError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use super::grammar::{steps, PyGrammar};
use super::int::Int;
use super::tokenizer::PyTokenizer;
use super::{detached, to_py_err};
use crate::budget;
use crate::grammar::CompiledGrammar;

/// The spec as JSON text.
fn spec_text(py: Python<'_>, spec: &Bound<'_, PyAny>) -> PyResult<String> {
    if spec.is_instance_of::<PyString>() {
        return spec.extract();
    }
    let text = if spec.is_instance_of::<PyDict>() {
        py.import("json")?.call_method1("dumps", (spec,))
    } else if spec.hasattr("model_dump_json")? {
        spec.call_method1("model_dump_json", ())
    } else {
        return Err(PyTypeError::new_err(format!(
            "a structural tag must be a dict or JSON text, got {}",
            spec.get_type()
        )));
    };
    text.map_err(|e| {
        // A dict nested past Python's recursion limit is bad content.
        if e.is_instance_of::<PyRecursionError>(py) {
            PyValueError::new_err("the structural tag nests too deeply to be written as JSON")
        } else {
            e
        }
    })?
    .extract()
}

/// Compiles a structural tag (xgrammar's format, current or legacy).
#[pyfunction]
#[pyo3(signature = (tokenizer, spec, *, max_compile_steps=None))]
pub fn compile_structural_tag(
    py: Python<'_>,
    tokenizer: &PyTokenizer,
    spec: &Bound<'_, PyAny>,
    max_compile_steps: Option<Int>,
) -> PyResult<PyGrammar> {
    let limit = steps(max_compile_steps)?;
    let text = spec_text(py, spec)?;
    let vocab = tokenizer.vocab.clone();
    let g = detached(py, || {
        budget::with_budget(limit, || {
            let ast = crate::stag::compile(&text, &vocab)?;
            CompiledGrammar::from_ast(vocab, &ast, "structural_tag", &text)
        })
    })?
    .map_err(to_py_err)?;
    Ok(PyGrammar { inner: Arc::new(g) })
}
