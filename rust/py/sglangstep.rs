//! SGLang's `spec_utils.generate_token_bitmask`, as a CPU server calls it,
//! without a Python frame in front of the fill.
//!
//! The SGLang adapter (`maskpar.integrations._sglang_tree`) replaces that
//! function with `functools.partial(_sglang_tree_step, grammar_type,
//! cuda_available, general)`: a C object, called straight from SGLang's
//! step. A Python function between SGLang's call and `_fill_eagle_step`
//! (deciding the allocation, unpacking the result) cost 1-2 us of a 22-64
//! us step at batch size one, its bytecode cold between steps (paired on
//! fresh grammars: 0.93 / 0.97 / 0.92 of the time at 8 / 16 / 64 nodes).
//!
//! Only the common case stays here: no CUDA (maskpar allocates the bitmask
//! and hands it over as a torch tensor), every request's grammar maskpar's
//! or None, every tree read. Anything else, the pinned bitmask of a GPU
//! server included, is `general`'s, the adapter's Python path, which
//! decides exactly as before.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyTuple, PyType};

use super::eagle::{eagle_step, Target};
use super::int::Int;

/// SGLang's `generate_token_bitmask(reqs, retrieve_next_token,
/// retrieve_next_sibling, draft_tokens, vocab_size)` for maskpar grammars of
/// `grammar_type`: `(bitmask, the last request's grammar)`. Where
/// `cuda_available()` is true, or the batch is not all maskpar's, or a tree
/// is not maskpar's to read, or the fill refuses the call, it returns
/// `general(reqs, retrieve_next_token, retrieve_next_sibling, draft_tokens,
/// vocab_size, done, tried)`, with `done` None (nothing written) or, for
/// trees left to SGLang's walk or a bitmask that is not a tensor,
/// `_fill_eagle_step`'s `(bitmask, unread, last grammar)`; `tried` says
/// whether this call ran that fill (so a declined or refused batch is not
/// filled a second time).
#[pyfunction]
#[pyo3(signature = (
    grammar_type, cuda_available, general,
    reqs, retrieve_next_token, retrieve_next_sibling, draft_tokens, vocab_size
))]
#[allow(clippy::too_many_arguments)]
pub fn _sglang_tree_step<'py>(
    py: Python<'py>,
    grammar_type: &Bound<'py, PyType>,
    cuda_available: &Bound<'py, PyAny>,
    general: &Bound<'py, PyAny>,
    reqs: &Bound<'py, PyAny>,
    retrieve_next_token: &Bound<'py, PyAny>,
    retrieve_next_sibling: &Bound<'py, PyAny>,
    draft_tokens: &Bound<'py, PyAny>,
    vocab_size: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let arrays = [retrieve_next_token, retrieve_next_sibling, draft_tokens];
    // `tried`: this call ran the fill already (and it declined, or left
    // `done`), so `general` does not run it again.
    let rest = |done: Option<Bound<'py, PyTuple>>, tried: bool| {
        let [a, b, c] = arrays;
        general.call1((reqs, a, b, c, vocab_size, done, tried))
    };
    if cuda_available.call0()?.is_truthy()? {
        return rest(None, false);
    }
    let Ok(vocab) = vocab_size.extract::<Int>() else {
        return rest(None, false);
    };
    let target = Target::New {
        vocab_size: vocab,
        as_tensor: true,
    };
    let step = match eagle_step(py, reqs, grammar_type, arrays, target, None) {
        Ok(step) => step,
        // What `general` does with a request maskpar refuses: its own path.
        Err(e) if e.is_instance_of::<PyValueError>(py) || e.is_instance_of::<PyTypeError>(py) => {
            None
        }
        Err(e) => return Err(e),
    };
    match step {
        Some(s) if s.tensor && s.unread.is_empty() => {
            Ok(PyTuple::new(py, [s.bitmask, s.last])?.into_any())
        }
        Some(s) => rest(Some(s.into_tuple(py)?), true),
        None => rest(None, true),
    }
}
