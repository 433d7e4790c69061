use std::sync::Arc;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyList, PyType};

use super::int::{values, Int};
use super::lists;
use super::{detached, to_py_err};
use crate::bitmask::words_for;
use crate::vocab::Vocab;
use crate::warmup;

/// A tokenizer vocabulary: exact bytes per token id, EOS and special ids, and
/// the model's logits width. Immutable and shareable across threads.
#[pyclass(frozen, subclass, module = "maskpar._core", name = "Tokenizer")]
pub struct PyTokenizer {
    pub vocab: Arc<Vocab>,
}

/// The most bytes `decode_bytes` returns: the result is built in one Python
/// bytes object, and a short list of ids of long tokens could otherwise ask
/// for any amount of memory.
const MAX_DECODE_BYTES: usize = 1 << 30;

/// Ids as u32, refused as `Vocab::new` refuses ids past the `num_tokens` tokens.
fn ids(list: Vec<Int>, what: &str, num_tokens: usize) -> PyResult<Vec<u32>> {
    values(list)
        .into_iter()
        .map(|i| {
            u32::try_from(i).map_err(|_| {
                PyValueError::new_err(format!(
                    "{what} id {i} is out of range (the vocabulary has {num_tokens} tokens)"
                ))
            })
        })
        .collect()
}

/// A Python bytes object of `len` bytes written by `fill`; MemoryError (not
/// a panic, as `PyBytes::new` would) when Python cannot allocate it.
fn new_bytes<'py>(
    py: Python<'py>,
    len: usize,
    fill: impl FnOnce(&mut [u8]),
) -> PyResult<Bound<'py, PyBytes>> {
    PyBytes::new_with(py, len, |buf| {
        fill(buf);
        Ok(())
    })
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
        eos_token_ids: Vec<Int>,
        special_token_ids: Option<Vec<Int>>,
        vocab_size: Option<Int>,
    ) -> PyResult<Self> {
        let tokens = token_list(tokens)?;
        let n = tokens.len();
        let eos = ids(eos_token_ids, "EOS token", n)?;
        let special = ids(special_token_ids.unwrap_or_default(), "special token", n)?;
        let vocab_size = vocab_size
            .map(|v| v.non_negative("vocab_size"))
            .transpose()?;
        super::buffer::warm_up(py);
        let vocab = detached(py, || {
            let vocab = Arc::new(Vocab::new(tokens, &eos, &special, vocab_size)?);
            // Off every request's path: see `warmup`.
            warmup::warm_up(&vocab);
            Ok::<_, crate::Error>(vocab)
        })?
        .map_err(to_py_err)?;
        Ok(PyTokenizer { vocab })
    }

    /// Builds a tokenizer from each id's exact bytes (`tokens[i]` is id `i`).
    #[classmethod]
    #[pyo3(signature = (tokens, eos_token_ids, special_token_ids=None, vocab_size=None))]
    fn from_vocab<'py>(
        cls: &Bound<'py, PyType>,
        tokens: &Bound<'py, PyAny>,
        eos_token_ids: &Bound<'py, PyAny>,
        special_token_ids: Option<&Bound<'py, PyAny>>,
        vocab_size: Option<&Bound<'py, PyAny>>,
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

    /// What the lexer-only cache shared by this vocabulary's grammars holds:
    /// `bytes` charged now, their bound `limit` (512 MiB, or
    /// `MASKPAR_SHARED_LEX_CACHE_BYTES` as read when the cache was made),
    /// `entries` kept, and `evictions` (how many times a full cache made room).
    fn shared_cache_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = crate::cfg::shared_lex_stats(&self.vocab).unwrap_or_default();
        let stats = PyDict::new(py);
        stats.set_item("bytes", s.bytes)?;
        stats.set_item("limit", s.limit)?;
        stats.set_item("entries", s.entries)?;
        stats.set_item("evictions", s.evictions)?;
        Ok(stats)
    }

    /// The exact bytes of `token_id` (b"" for padding ids).
    fn token_bytes<'py>(&self, py: Python<'py>, token_id: Int) -> PyResult<Bound<'py, PyBytes>> {
        let id = self.vocab.check_token_id(token_id.0).map_err(to_py_err)?;
        let bytes = self.vocab.token_bytes(id).unwrap_or(&[]);
        new_bytes(py, bytes.len(), |buf| buf.copy_from_slice(bytes))
    }

    /// The bytes the given ids spell (special and EOS ids included as their
    /// bytes). ValueError past 1 GiB (`MAX_DECODE_BYTES`) in all.
    fn decode_bytes<'py>(
        &self,
        py: Python<'py>,
        token_ids: Vec<Int>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let mut pieces = Vec::with_capacity(token_ids.len());
        let mut total = 0usize;
        for t in token_ids {
            let id = self.vocab.check_token_id(t.0).map_err(to_py_err)?;
            let piece = self.vocab.token_bytes(id).unwrap_or(&[]);
            total += piece.len();
            if total > MAX_DECODE_BYTES {
                return Err(PyValueError::new_err(format!(
                    "decode_bytes would return more than {MAX_DECODE_BYTES} bytes (1 GiB); \
                     decode fewer ids at a time"
                )));
            }
            pieces.push(piece);
        }
        new_bytes(py, total, |buf| {
            let mut at = 0;
            for piece in pieces {
                buf[at..at + piece.len()].copy_from_slice(piece);
                at += piece.len();
            }
        })
    }

    /// Splits `data` into this vocabulary's text tokens by longest match from
    /// the left (not necessarily the tokenizer's own merges). ValueError if
    /// some byte starts no token. MemoryError (not a crash) when the list
    /// does not fit in memory.
    fn encode_greedy<'py>(&self, py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyList>> {
        let vocab = &self.vocab;
        let ids = detached(py, || vocab.encode_greedy(data))?.map_err(to_py_err)?;
        lists::ints(py, &ids)
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
