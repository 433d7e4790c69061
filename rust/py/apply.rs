//! Binding for the CPU path of `apply_token_bitmask_inplace`: the Python side
//! passes logits viewed as int16 (float16/bfloat16) or int32 (float32) numpy
//! arrays that share the tensor's memory, plus the -inf bit pattern.

use numpy::{PyArray2, PyArrayMethods, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use super::detached;
use super::int::{values, Int};
use crate::apply::apply_bitmask;

fn check_rows(rows: &[i64], limit: usize) -> PyResult<Vec<usize>> {
    rows.iter()
        .map(|&r| {
            usize::try_from(r)
                .ok()
                .filter(|&r| r < limit)
                .ok_or_else(|| {
                    PyValueError::new_err(format!("indices must be in [0, {limit}), got {r}"))
                })
        })
        .collect()
}

fn run<T: numpy::Element + Copy + Send + Sync>(
    py: Python<'_>,
    logits: &Bound<'_, PyArray2<T>>,
    bitmask: &PyReadonlyArray2<'_, i32>,
    rows: Option<Vec<Int>>,
    neg_inf: T,
) -> PyResult<()> {
    let mut lg = logits
        .try_readwrite()
        .map_err(|e| PyValueError::new_err(format!("logits are not writable: {e}")))?;
    let (n, vocab) = (lg.shape()[0], lg.shape()[1]);
    let (mrows, words) = (bitmask.shape()[0], bitmask.shape()[1]);
    let rows = match rows {
        Some(r) => check_rows(&values(r), n.min(mrows))?,
        None if mrows == n => (0..n).collect(),
        None => {
            return Err(PyValueError::new_err(format!(
                "bitmask has {mrows} rows but logits have {n}; pass indices to mask a subset"
            )))
        }
    };
    let lg = lg
        .as_slice_mut()
        .map_err(|_| PyValueError::new_err("logits must be C-contiguous and aligned"))?;
    let bm = bitmask
        .as_slice()
        .map_err(|_| PyValueError::new_err("bitmask must be C-contiguous and aligned"))?;
    let bm: &[u32] = bytemuck::cast_slice(bm);
    detached(py, || apply_bitmask(lg, vocab, bm, words, &rows, neg_inf))
}

/// Masks CPU logits in place (see maskpar.apply_token_bitmask_inplace).
#[pyfunction]
#[pyo3(signature = (logits_bits, bitmask, indices, neg_inf_bits))]
pub fn _apply_token_bitmask_cpu(
    py: Python<'_>,
    logits_bits: &Bound<'_, PyAny>,
    bitmask: PyReadonlyArray2<'_, i32>,
    indices: Option<Vec<Int>>,
    neg_inf_bits: Int,
) -> PyResult<()> {
    // The bit pattern of -inf in the logits' integer view (a private argument
    // from maskpar's own wrapper; only its low bits matter).
    let Int(neg_inf_bits) = neg_inf_bits;
    if let Ok(a) = logits_bits.cast::<PyArray2<i16>>() {
        return run(py, a, &bitmask, indices, neg_inf_bits as i16);
    }
    if let Ok(a) = logits_bits.cast::<PyArray2<i32>>() {
        return run(py, a, &bitmask, indices, neg_inf_bits as i32);
    }
    Err(PyTypeError::new_err(
        "logits_bits must be a 2-D int16 or int32 numpy array",
    ))
}
