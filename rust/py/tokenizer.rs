use std::sync::Arc;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyType};

use super::{detached, to_py_err};
use crate::bitmask::words_for;
use crate::vocab::Vocab;

/// A tokenizer vocabulary: exact bytes per token id, EOS and special ids, and
/// the model's logits width. Immutable and shareable across threads.
#[pyclass(frozen, subclass, module = "maskpar._core", name = "Tokenizer")]
pub struct PyTokenizer {
    pub vocab: Arc<Vocab>,
}

fn ids(list: &[i64], what: &str) -> PyResult<Vec<u32>> {
    list.iter()
        .map(|&i| {
            u32::try_from(i).map_err(|_| {
                pyo3::exceptions::PyValueError::new_err(format!("{what} id {i} is out of range"))
            })
        })
        .collect()
}

fn token_list(tokens: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    for (i, item) in tokens.try_iter()?.enumerate() {
        let item = item?;
        if let Ok(b) = item.cast::<PyBytes>() {
            out.push(b.as_bytes().to_vec());
        } else if let Ok(b) = item.cast::<PyByteArray>() {
            out.push(b.to_vec());
        } else {
            return Err(PyTypeError::new_err(format!(
                "tokens[{i}] must be bytes (the token's exact byte string), got {}",
                item.get_type().name()?
            )));
        }
    }
    Ok(out)
}

#[pymethods]
impl PyTokenizer {
    #[new]
    #[pyo3(signature = (tokens, eos_token_ids, special_token_ids=None, vocab_size=None))]
    fn new(
        py: Python<'_>,
        tokens: &Bound<'_, PyAny>,
        eos_token_ids: Vec<i64>,
        special_token_ids: Option<Vec<i64>>,
        vocab_size: Option<usize>,
    ) -> PyResult<Self> {
        let tokens = token_list(tokens)?;
        let eos = ids(&eos_token_ids, "EOS token")?;
        let special = ids(&special_token_ids.unwrap_or_default(), "special token")?;
        let vocab =
            detached(py, || Vocab::new(tokens, &eos, &special, vocab_size))?.map_err(to_py_err)?;
        Ok(PyTokenizer {
            vocab: Arc::new(vocab),
        })
    }

    /// Builds a tokenizer from each id's exact bytes (`tokens[i]` is id `i`).
    #[classmethod]
    #[pyo3(signature = (tokens, eos_token_ids, special_token_ids=None, vocab_size=None))]
    fn from_vocab<'py>(
        cls: &Bound<'py, PyType>,
        tokens: &Bound<'py, PyAny>,
        eos_token_ids: Vec<i64>,
        special_token_ids: Option<Vec<i64>>,
        vocab_size: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        cls.call1((tokens, eos_token_ids, special_token_ids, vocab_size))
    }

    /// The model's logits width: bitmask rows cover this many ids.
    #[getter]
    fn vocab_size(&self) -> usize {
        self.vocab.vocab_size()
    }

    /// Number of ids with bytes; ids from here to `vocab_size` are padding.
    #[getter]
    fn num_tokens(&self) -> usize {
        self.vocab.num_tokens()
    }

    /// Words per bitmask row: ceil(vocab_size / 32).
    #[getter]
    fn bitmask_width(&self) -> usize {
        words_for(self.vocab.vocab_size())
    }

    /// The ids that end generation, sorted: allowed exactly when the text so
    /// far is complete.
    #[getter]
    fn eos_token_ids(&self) -> Vec<u32> {
        self.vocab.eos_token_ids().to_vec()
    }

    /// Ids marked special: never allowed by a grammar (EOS ids excepted,
    /// allowed where the text may end), sorted.
    #[getter]
    fn special_token_ids(&self) -> Vec<u32> {
        self.vocab.special_token_ids()
    }

    /// The exact bytes of `token_id` (b"" for padding ids).
    fn token_bytes<'py>(&self, py: Python<'py>, token_id: i64) -> PyResult<Bound<'py, PyBytes>> {
        let id = self.vocab.check_token_id(token_id).map_err(to_py_err)?;
        Ok(PyBytes::new(py, self.vocab.token_bytes(id).unwrap_or(&[])))
    }

    /// The bytes the given ids spell (special and EOS ids included as their bytes).
    fn decode_bytes<'py>(
        &self,
        py: Python<'py>,
        token_ids: Vec<i64>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let mut out = Vec::new();
        for t in token_ids {
            let id = self.vocab.check_token_id(t).map_err(to_py_err)?;
            out.extend_from_slice(self.vocab.token_bytes(id).unwrap_or(&[]));
        }
        Ok(PyBytes::new(py, &out))
    }

    /// Splits `data` into this vocabulary's text tokens by longest match from
    /// the left (not necessarily the tokenizer's own merges). ValueError if
    /// some byte starts no token.
    fn encode_greedy(&self, py: Python<'_>, data: &[u8]) -> PyResult<Vec<u32>> {
        let vocab = &self.vocab;
        detached(py, || vocab.encode_greedy(data))?.map_err(to_py_err)
    }

    fn __repr__(&self) -> String {
        format!(
            "Tokenizer(num_tokens={}, vocab_size={}, eos_token_ids={:?})",
            self.vocab.num_tokens(),
            self.vocab.vocab_size(),
            self.vocab.eos_token_ids()
        )
    }
}
