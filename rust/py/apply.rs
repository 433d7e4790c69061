//! Binding for the CPU path of `apply_token_bitmask_inplace`: the Python side
//! passes logits viewed as int16 (float16/bfloat16) or int32 (float32) numpy
//! arrays that share the tensor's memory, plus the -inf bit pattern.

use numpy::{PyArray2, PyArrayMethods, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;

use super::buffer::{torch_exporter, Writing};
use super::dlpack::{HostDtype, HostTensor};
use super::int::{values, Int};
use super::{attached, detached};
use crate::apply::{apply_bitmask, PARALLEL_FROM};

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

/// `apply_token_bitmask_inplace(logits, bitmask)` without `indices`, for
/// plain CPU tensors, both read in one C call each (`dlpack`): float32,
/// float16 or bfloat16 logits and an int32 bitmask, each of one or two
/// C-contiguous dimensions, aligned, not overlapping, as many bitmask rows
/// as logit rows, logits that do not require grad, neither a negated view,
/// fewer than `PARALLEL_FROM` logits in all (masked with the GIL held, see
/// `masked`). Returns False, having written nothing, for anything else (an
/// older torch, a subclass, another layout, a larger mask); the Python
/// wrapper then checks and masks as before.
#[pyfunction]
pub fn _apply_token_bitmask_cpu_tensors(
    py: Python<'_>,
    logits: &Bound<'_, PyAny>,
    bitmask: &Bound<'_, PyAny>,
) -> PyResult<bool> {
    let Some(exporter) = torch_exporter(py)? else {
        return Ok(false);
    };
    let Some(lg) = exporter.host(logits)? else {
        return Ok(false);
    };
    let Some(bm) = exporter.host_int32(bitmask)? else {
        return Ok(false);
    };
    let ((rows, vocab), (mask_rows, words)) = (lg.matrix(), bm.matrix());
    // Masked on this thread with the GIL kept (see `masked`): only sizes
    // the kernel masks serially anyway; larger ones take the wrapper's
    // path, which releases the GIL over views that hold the memory.
    if rows == 0 || vocab == 0 || mask_rows != rows || rows.saturating_mul(vocab) >= PARALLEL_FROM {
        return Ok(false);
    }
    // An in-place write under autograd is torch's to refuse (the wrapper's
    // torch path does).
    if logits.getattr(intern!(py, "requires_grad"))?.is_truthy()? {
        return Ok(false);
    }
    // A negated view (`torch._neg_view`) exports its raw memory: -inf's
    // bits would read as +inf through it, and its bitmask words as their
    // negation. The wrapper's path refuses both.
    for tensor in [logits, bitmask] {
        if tensor.call_method0(intern!(py, "is_neg"))?.is_truthy()? {
            return Ok(false);
        }
    }
    match lg.dtype {
        HostDtype::Float32 => masked::<u32>(py, &lg, rows, vocab, bm.ptr, words, 0xff80_0000),
        HostDtype::Float16 => masked::<u16>(py, &lg, rows, vocab, bm.ptr, words, 0xfc00),
        HostDtype::BFloat16 => masked::<u16>(py, &lg, rows, vocab, bm.ptr, words, 0xff80),
        HostDtype::Int32 | HostDtype::Int64 => Ok(false),
    }
}

/// The fast path's masking, once `T` (the logits' bit pattern type) and
/// -inf's bits are known.
#[allow(clippy::too_many_arguments)]
fn masked<T: Copy + Send + Sync>(
    // Held throughout: what keeps the memory the tensors' (SAFETY below).
    _gil: Python<'_>,
    lg: &HostTensor,
    rows: usize,
    vocab: usize,
    bm_ptr: usize,
    words: usize,
    neg_inf: T,
) -> PyResult<bool> {
    let size = std::mem::size_of::<T>();
    let (Some(lg_bytes), Some(bm_bytes)) = (
        rows.checked_mul(vocab).and_then(|n| n.checked_mul(size)),
        rows.checked_mul(words).and_then(|n| n.checked_mul(4)),
    ) else {
        return Ok(false);
    };
    let (Some(lg_end), Some(bm_end)) = (lg.ptr.checked_add(lg_bytes), bm_ptr.checked_add(bm_bytes))
    else {
        return Ok(false);
    };
    if lg.ptr % std::mem::align_of::<T>() != 0
        || bm_ptr % 4 != 0
        || (bm_bytes > 0 && bm_ptr == 0)
        || (lg.ptr < bm_end && bm_ptr < lg_end)
    {
        return Ok(false);
    }
    // Logits another maskpar call is writing now: the wrapper's path.
    let Ok(_writing) = Writing::new(lg.ptr, lg_end, "logits") else {
        return Ok(false);
    };
    // SAFETY: `lg.ptr` is the data pointer of a host tensor of exactly
    // `rows x vocab` C-contiguous elements of `T`'s size (checked by its
    // export: dtype, device, shape, strides), aligned for `T` (checked), so
    // `lg.ptr .. lg_end` is its initialised memory. The tensor owns that
    // memory and only Python code can make it let go (`set_`, `.data =`):
    // the GIL is held until the slices are gone, so none runs meanwhile.
    // `Writing` keeps the other maskpar writers of torch memory (fills
    // into tensors, which release the GIL) off it, and the bitmask's range
    // does not overlap it (checked). Every bit pattern is a valid `T`.
    let lg_slice = unsafe { std::slice::from_raw_parts_mut(lg.ptr as *mut T, rows * vocab) };
    // SAFETY: likewise for the bitmask: `rows x words` C-contiguous int32s
    // (checked by its export), alive while the GIL is held, 4-byte aligned
    // (checked), not overlapping the logits; only read. With no words the
    // slice is empty and not read.
    let bm_slice: &[u32] = if bm_bytes == 0 {
        &[]
    } else {
        unsafe { std::slice::from_raw_parts(bm_ptr as *const u32, rows * words) }
    };
    let all: Vec<usize> = (0..rows).collect();
    attached(|| apply_bitmask(lg_slice, vocab, bm_slice, words, &all, neg_inf))?;
    Ok(true)
}
