//! Python lists whose length follows the input, built fallibly.
//!
//! pyo3's own `Vec<T> -> list` conversion panics when CPython cannot
//! allocate the list or one of its ints (it treats a NULL from
//! `PyList_New` / `PyLong_FromLong` as a bug), and the panic surfaces as a
//! `pyo3_runtime.PanicException`. A list sized by the caller's input (the
//! tokens of `encode_greedy`, the rows of a batch) can be large enough for
//! that to happen under a memory cap, so these build the list with the C
//! API and turn each NULL into the `MemoryError` CPython set: the call
//! fails, the process and every other request go on.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyList;

/// A new list of `len` items, the `i`th made by `item(i)`; the first
/// failure (a `MemoryError` from CPython, or `item`'s) is returned and the
/// partly filled list freed.
fn list_of<'py>(
    py: Python<'py>,
    len: usize,
    mut item: impl FnMut(usize) -> PyResult<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyList>> {
    let n = ffi::Py_ssize_t::try_from(len)
        .map_err(|_| pyo3::exceptions::PyMemoryError::new_err("list too long"))?;
    // SAFETY: PyList_New returns a new reference or NULL with an exception
    // set; from_owned_ptr_or_err takes either.
    let list = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyList_New(n))? };
    for i in 0..len {
        let value = item(i)?;
        // SAFETY: `list` is a fresh list of length `n` and slot `i` (< n)
        // is still empty; PyList_SetItem steals the reference `into_ptr`
        // hands over and cannot fail for an in-range index.
        unsafe {
            ffi::PyList_SetItem(list.as_ptr(), i as ffi::Py_ssize_t, value.into_ptr());
        }
    }
    // SAFETY: it was made by PyList_New.
    Ok(unsafe { list.cast_into_unchecked() })
}

/// A Python int from `v`, or the `MemoryError` CPython raised.
fn int<'py>(py: Python<'py>, v: u64) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: PyLong_FromUnsignedLongLong returns a new reference or NULL
    // with an exception set.
    unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyLong_FromUnsignedLongLong(v)) }
}

/// `values` as a list of ints.
pub fn ints<'py, T: Copy + Into<u64>>(
    py: Python<'py>,
    values: &[T],
) -> PyResult<Bound<'py, PyList>> {
    list_of(py, values.len(), |i| int(py, values[i].into()))
}

/// `values` (counts or indices) as a list of ints.
pub fn usizes<'py>(py: Python<'py>, values: &[usize]) -> PyResult<Bound<'py, PyList>> {
    list_of(py, values.len(), |i| int(py, values[i] as u64))
}

/// `rows` as a list of lists of ints.
pub fn int_rows<'py>(py: Python<'py>, rows: &[Vec<u32>]) -> PyResult<Bound<'py, PyList>> {
    list_of(py, rows.len(), |i| ints(py, &rows[i]).map(Bound::into_any))
}

/// `values` as a list of bools (`True` and `False` are shared objects:
/// only the list is allocated).
pub fn bools<'py>(py: Python<'py>, values: &[bool]) -> PyResult<Bound<'py, PyList>> {
    use pyo3::types::PyBool;
    list_of(py, values.len(), |i| {
        Ok(PyBool::new(py, values[i]).to_owned().into_any())
    })
}

/// `rows` as a list of lists of bools.
pub fn bool_rows<'py>(py: Python<'py>, rows: &[Vec<bool>]) -> PyResult<Bound<'py, PyList>> {
    list_of(py, rows.len(), |i| bools(py, &rows[i]).map(Bound::into_any))
}
