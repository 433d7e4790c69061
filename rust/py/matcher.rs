use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList, PyString};

use super::buffer::Bitmask;
use super::grammar::PyGrammar;
use super::int::{values, Int};
use super::lists;
use super::{detached, to_py_err};
use crate::matcher::MatcherCore;

/// Per-request grammar state. Not shareable across threads at the same time:
/// concurrent use raises instead of corrupting state.
#[pyclass(module = "maskpar._core", name = "Matcher")]
pub struct PyMatcher {
    pub core: MatcherCore,
}

pub(crate) const IN_USE: &str =
    "Matcher is in use by another thread (or a fill call running now); use one matcher per thread";

fn mutable<'py>(slf: &Bound<'py, PyMatcher>) -> PyResult<PyRefMut<'py, PyMatcher>> {
    slf.try_borrow_mut()
        .map_err(|_| PyRuntimeError::new_err(IN_USE))
}

fn shared<'py>(slf: &Bound<'py, PyMatcher>) -> PyResult<PyRef<'py, PyMatcher>> {
    slf.try_borrow()
        .map_err(|_| PyRuntimeError::new_err(IN_USE))
}

#[pymethods]
impl PyMatcher {
    #[new]
    fn new(grammar: &PyGrammar) -> Self {
        PyMatcher {
            core: MatcherCore::new(grammar.inner.clone()),
        }
    }

    /// Writes the mask of allowed next tokens into row `index` of `bitmask`.
    #[pyo3(signature = (bitmask, index=Int(0)), text_signature = "($self, bitmask, index=0)")]
    fn fill_next_token_bitmask(
        slf: &Bound<'_, Self>,
        bitmask: &Bound<'_, PyAny>,
        index: Int,
    ) -> PyResult<()> {
        let Int(index) = index;
        let this = shared(slf)?;
        let mut bm = Bitmask::new(bitmask, Some(this.core.grammar().vocab().vocab_size()))?;
        if index < 0 || index as usize >= bm.rows {
            return Err(PyValueError::new_err(format!(
                "index {index} is out of range for a bitmask of {} rows",
                bm.rows
            )));
        }
        let (words, i) = (bm.words, index as usize);
        let row = &mut bm.words_mut()[i * words..(i + 1) * words];
        let core = &this.core;
        detached(slf.py(), || core.fill_row(row))?.map_err(to_py_err)
    }

    /// Walks a copy of this matcher along `token_ids`, filling the mask at
    /// the start and after each token and keeping the rows in the grammar's
    /// memo (the matcher's own at once, the walk's while the memo has room);
    /// stops at the first refused token and returns how many were consumed.
    /// With `split_tokens`, also fills the state after each token that is a
    /// proper prefix of the next one (where draft trees split the text).
    /// This matcher and every mask are unchanged: only where masks are
    /// computed moves (to a compile pool, off the decoding step).
    #[pyo3(signature = (token_ids, split_tokens=false))]
    fn warm_up(slf: &Bound<'_, Self>, token_ids: Vec<Int>, split_tokens: bool) -> PyResult<usize> {
        let this = shared(slf)?;
        let ids = this.core.check_ids(&values(token_ids)).map_err(to_py_err)?;
        let core = &this.core;
        detached(slf.py(), || core.warm_up(&ids, split_tokens))?.map_err(to_py_err)
    }

    /// Consumes `token_id` if the grammar allows it; returns False and leaves
    /// the state unchanged if not. Ids outside [0, vocab_size) raise ValueError.
    fn consume_token(slf: &Bound<'_, Self>, token_id: Int) -> PyResult<bool> {
        let mut this = mutable(slf)?;
        let id = this
            .core
            .grammar()
            .vocab()
            .check_token_id(token_id.0)
            .map_err(to_py_err)?;
        this.core.consume_token(id).map_err(to_py_err)
    }

    /// Consumes all tokens, or none (returning False) if any is not allowed.
    fn consume_tokens(slf: &Bound<'_, Self>, token_ids: Vec<Int>) -> PyResult<bool> {
        let mut this = mutable(slf)?;
        let ids = this.core.check_ids(&values(token_ids)).map_err(to_py_err)?;
        this.core.consume_tokens(&ids).map_err(to_py_err)
    }

    /// Number of leading tokens the grammar would accept; never changes state.
    fn validate_tokens(slf: &Bound<'_, Self>, token_ids: Vec<Int>) -> PyResult<usize> {
        let this = shared(slf)?;
        let ids = this.core.check_ids(&values(token_ids)).map_err(to_py_err)?;
        this.core.validate_tokens(&ids).map_err(to_py_err)
    }

    /// Undoes the last `num_tokens` consumed tokens (EOS included).
    fn rollback(slf: &Bound<'_, Self>, num_tokens: Int) -> PyResult<()> {
        let mut this = mutable(slf)?;
        let num_tokens = num_tokens.non_negative("num_tokens")?;
        this.core.rollback(num_tokens).map_err(to_py_err)
    }

    /// Back to the start state with an empty history.
    fn reset(slf: &Bound<'_, Self>) -> PyResult<()> {
        mutable(slf)?.core.reset();
        Ok(())
    }

    /// An independent copy with the same state and rollback history. With
    /// `grammar` (this grammar for another tokenizer, from
    /// `Grammar.for_tokenizer`), the copy masks and consumes that tokenizer's ids.
    #[pyo3(signature = (grammar=None))]
    fn fork(slf: &Bound<'_, Self>, grammar: Option<&PyGrammar>) -> PyResult<PyMatcher> {
        let this = shared(slf)?;
        let core = match grammar {
            None => this.core.clone(),
            Some(g) => this.core.fork_onto(g.inner.clone()).map_err(to_py_err)?,
        };
        Ok(PyMatcher { core })
    }

    /// Consumes raw text (bytes, or str as UTF-8) if the grammar allows all of
    /// it, e.g. text another vocabulary's tokens spell; returns False and
    /// leaves the state unchanged if not. One call is one `rollback` step.
    fn consume_bytes(slf: &Bound<'_, Self>, data: &Bound<'_, PyAny>) -> PyResult<bool> {
        let bytes: Vec<u8> = if let Ok(b) = data.cast::<PyBytes>() {
            b.as_bytes().to_vec()
        } else if let Ok(b) = data.cast::<PyByteArray>() {
            b.to_vec()
        } else if data.is_instance_of::<PyString>() {
            data.extract::<String>()?.into_bytes()
        } else {
            return Err(PyTypeError::new_err(format!(
                "consume_bytes takes bytes, bytearray or str, got {}",
                data.get_type()
            )));
        };
        let mut this = mutable(slf)?;
        let core = &mut this.core;
        detached(slf.py(), || core.consume_bytes(&bytes))?.map_err(to_py_err)
    }

    /// True if the text consumed so far is in the language (EOS is allowed).
    fn is_accepting(slf: &Bound<'_, Self>) -> PyResult<bool> {
        Ok(shared(slf)?.core.is_accepting())
    }

    /// True once EOS has been consumed (until it is rolled back).
    fn is_terminated(slf: &Bound<'_, Self>) -> PyResult<bool> {
        Ok(shared(slf)?.core.is_terminated())
    }

    /// Tokens the grammar forces next; each is allowed in turn, so they can be
    /// used as drafts that the mask always accepts.
    fn forced_tokens<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyList>> {
        let forced = shared(slf)?.core.forced_tokens().map_err(to_py_err)?;
        lists::ints(slf.py(), &forced)
    }

    /// Number of consumed tokens: the most `rollback` can undo.
    #[getter]
    fn num_consumed(slf: &Bound<'_, Self>) -> PyResult<usize> {
        Ok(shared(slf)?.core.num_consumed())
    }

    /// The grammar's logits width.
    #[getter]
    fn vocab_size(slf: &Bound<'_, Self>) -> PyResult<usize> {
        Ok(shared(slf)?.core.grammar().vocab().vocab_size())
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let this = shared(slf)?;
        Ok(format!(
            "Matcher(consumed={}, accepting={}, terminated={})",
            this.core.num_consumed(),
            this.core.is_accepting(),
            this.core.is_terminated()
        ))
    }
}
