//! A bitmask in a pooled buffer, as a numpy array (which
//! `maskpar.allocate_token_bitmask` hands to `torch.from_numpy`).
//!
//! The array's memory belongs to a `PooledMask`, set as the array's base
//! object: numpy keeps its base alive as long as the array (and torch keeps
//! the array alive as long as any tensor over its memory), so the owner is
//! dropped only after the last of them, and gives the buffer back to
//! `bitmaskpool` then, for the next allocation to refill.

use std::ptr::NonNull;

use numpy::ndarray::ArrayView2;
use numpy::PyArray2;
use pyo3::exceptions::{PyMemoryError, PyValueError};
use pyo3::prelude::*;

use super::int::Int;
use crate::bitmaskpool;

/// Owns one pooled buffer; no Rust reference to its words exists while it
/// lives (numpy reads and writes them through the array's data pointer), so
/// the buffer is held as a raw pointer and turned back into a `Box` only
/// when dropped.
#[pyclass(frozen, module = "maskpar._core")]
pub struct PooledMask {
    ptr: NonNull<u32>,
    len: usize,
}

// SAFETY: a `PooledMask` is the sole owner of a plain heap buffer of `u32`s
// (no thread affinity, no interior Rust references); moving or dropping it
// on another thread is moving or freeing a `Box<[u32]>`, which is `Send`
// and `Sync`.
unsafe impl Send for PooledMask {}
unsafe impl Sync for PooledMask {}

impl Drop for PooledMask {
    fn drop(&mut self) {
        let slice = std::ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), self.len);
        // SAFETY: `ptr`/`len` came from `Box::into_raw` in `pooled_bitmask`
        // and are turned back into a box exactly once, here. The owner is
        // dropped only once no numpy array has it as base, i.e. once nothing
        // reads or writes the buffer through the pointer numpy was given.
        let buf = unsafe { Box::from_raw(slice) };
        bitmaskpool::give_back(buf);
    }
}

/// A `[rows, words]` int32 array of -1 (every token allowed) over a pooled
/// buffer (see `bitmaskpool`); with `all_ones` false, a recycled buffer
/// keeps what it held (for a caller that writes every row).
#[pyfunction]
#[pyo3(signature = (rows, words, all_ones=true))]
pub fn _pooled_bitmask(
    py: Python<'_>,
    rows: Int,
    words: Int,
    all_ones: bool,
) -> PyResult<Bound<'_, PyAny>> {
    // `Int`, as every maskpar integer: a negative or huge size is a
    // ValueError, not pyo3's OverflowError.
    let (rows, words) = (rows.non_negative("rows")?, words.non_negative("words")?);
    // Only sizes the pool could keep: a larger mask is torch's to allocate
    // (with its own error past the machine's memory).
    let most = bitmaskpool::max_pooled_words();
    let len = rows
        .checked_mul(words)
        .filter(|&n| n <= most)
        .ok_or_else(|| {
            PyValueError::new_err(format!(
                "a {rows} x {words} bitmask is more than the pool's {most} words"
            ))
        })?;
    pooled_array(py, rows, words, len, all_ones)
}

/// A `[rows, words]` int32 array for a caller that writes every row itself:
/// under `MIN_POOLED_WORDS` words numpy's own (the C heap recycles those),
/// else over a buffer of the pool (what it held, or all ones if fresh), as
/// `maskpar._torch._allocate_with_view(..., filled=False)` makes it without
/// CUDA. MemoryError if there is no memory for it.
pub fn unfilled_bitmask(
    py: Python<'_>,
    rows: usize,
    words: usize,
) -> PyResult<Bound<'_, PyArray2<i32>>> {
    let len = rows
        .checked_mul(words)
        .ok_or_else(|| PyMemoryError::new_err(format!("a {rows} x {words} bitmask")))?;
    if len < bitmaskpool::MIN_POOLED_WORDS {
        // SAFETY: numpy allocates `rows * words` int32s that this array
        // owns; they are uninitialised, as `numpy.empty`'s are, and every
        // bit pattern is an int32: the caller writes every row before
        // anything reads them.
        return Ok(unsafe { PyArray2::<i32>::new(py, [rows, words], false) });
    }
    Ok(pooled_array(py, rows, words, len, false)?.cast_into::<PyArray2<i32>>()?)
}

/// The array over a buffer of `len >= rows * words` words from the pool.
fn pooled_array(
    py: Python<'_>,
    rows: usize,
    words: usize,
    len: usize,
    all_ones: bool,
) -> PyResult<Bound<'_, PyAny>> {
    let buf = py
        .detach(|| bitmaskpool::take(len, all_ones))
        .map_err(|e| PyMemoryError::new_err(format!("a {rows} x {words} bitmask: {e}")))?;
    let words_held = buf.len();
    let raw = Box::into_raw(buf) as *mut u32;
    // A `Box<[u32]>` of length 0 has a dangling, non-null, aligned pointer.
    let ptr = NonNull::new(raw).expect("Box::into_raw is never null");
    let owner = Bound::new(
        py,
        PooledMask {
            ptr,
            len: words_held,
        },
    )?;
    // SAFETY: `ptr` points at `words_held >= rows * words` initialised u32s,
    // aligned for i32 (same size and alignment), owned by `owner` until it
    // is dropped; the view covers the first `rows * words`, row-major.
    let view = unsafe { ArrayView2::from_shape_ptr((rows, words), ptr.as_ptr() as *const i32) };
    // SAFETY: `owner` becomes the array's base object, so the array never
    // outlives it, and the buffer is never reallocated while `owner` lives
    // (its pointer is only turned back into a box in `Drop`).
    let array = unsafe { PyArray2::borrow_from_array(&view, owner.into_any()) };
    Ok(array.into_any())
}
