//! A new bitmask handed to Python as a torch tensor over memory maskpar
//! owns, made in one C call.
//!
//! A function that allocates the bitmask it fills (SGLang's tree step,
//! `eagle::_fill_eagle_step`) returned a numpy array, which the adapter then
//! wrapped with `torch.from_numpy`. Between two steps of a server torch's
//! code leaves the CPU's caches, and that one call then cost 18-25 us on
//! the 2-CPU development machine (1.3 us warm), as much as the tree masks of
//! a small batch. DLPack's exchange API (`dlpack`) has torch make a tensor
//! from a `DLManagedTensorVersioned` directly: no Python arguments to
//! parse, no numpy array to read.
//!
//! The tensor's memory is a recycled buffer (`bitmaskpool::take_any_size`,
//! small ones included) or a new one, owned by an `Owner` that the
//! managed tensor points at; torch calls the managed tensor's deleter once
//! the last tensor over the memory is gone, on whatever thread drops it,
//! and the deleter gives the buffer back to its pool (which frees it if
//! it is full).

use std::ffi::c_void;
use std::ptr::NonNull;

use pyo3::exceptions::PyMemoryError;
use pyo3::prelude::*;

use super::buffer::torch_exporter;
use super::dlpack::{DataType, Device, DlTensor, ManagedTensor, Version, CPU, INT};
use crate::bitmaskpool;

/// What the managed tensor owns: the struct torch is handed (first, so a
/// pointer to it is a pointer to the whole), the shape and strides it
/// points at, and the buffer.
#[repr(C)]
struct Owner {
    managed: ManagedTensor,
    shape: [i64; 2],
    strides: [i64; 2],
    /// The buffer, as raw parts: torch and the filling code write it
    /// through `managed.dl_tensor.data`, so no Rust reference to it is
    /// kept; it becomes a `Box` again only in `delete`.
    buf: NonNull<u32>,
    len: usize,
}

/// The deleter torch calls, once, when no tensor uses the memory any more.
///
/// # Safety
/// `managed` must be the pointer `unfilled_tensor` handed to torch, called
/// once.
unsafe extern "C" fn delete(managed: *mut ManagedTensor) {
    // No panic may cross into torch's C++: freeing cannot panic, and the
    // pool's lock recovers from poisoning; a panic anyway would abort.
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: `managed` is the first field of a `#[repr(C)]` `Owner`
        // that `unfilled_tensor` leaked with `Box::into_raw`, and torch
        // calls this exactly once, after the last use of the memory.
        let owner = unsafe { Box::from_raw(managed as *mut Owner) };
        let slice = std::ptr::slice_from_raw_parts_mut(owner.buf.as_ptr(), owner.len);
        // SAFETY: `buf`/`len` came from `Box::into_raw` of the pool's
        // buffer and are made a box again exactly once, here.
        bitmaskpool::give_back_any_size(unsafe { Box::from_raw(slice) });
    });
}

/// A new `[rows, words]` int32 CPU torch tensor whose contents the caller
/// writes (all ones, or whatever a recycled buffer held), with a pointer to
/// its `rows * words` words; None when torch is not imported, does not
/// publish DLPack's import, or fails to import (the caller then makes a
/// numpy array as before: a server's step should not fail for it). No
/// Python code has seen the tensor: until the caller returns it, the
/// pointer is the only way to its memory.
pub fn unfilled_tensor(
    py: Python<'_>,
    rows: usize,
    words: usize,
) -> PyResult<Option<(Bound<'_, PyAny>, NonNull<u32>)>> {
    let Some(import) = torch_exporter(py)?.and_then(|e| e.import) else {
        return Ok(None);
    };
    let too_large = || PyMemoryError::new_err(format!("a {rows} x {words} bitmask"));
    let len = rows.checked_mul(words).ok_or_else(too_large)?;
    let dims = (i64::try_from(rows), i64::try_from(words));
    let (Ok(r), Ok(w)) = dims else {
        return Err(too_large());
    };
    let buf = py
        .detach(|| bitmaskpool::take_any_size(len))
        .map_err(|e| PyMemoryError::new_err(format!("a {rows} x {words} bitmask: {e}")))?;
    let held = buf.len();
    let buf = NonNull::new(Box::into_raw(buf) as *mut u32).expect("Box::into_raw is never null");
    let owner = Box::into_raw(Box::new(Owner {
        managed: ManagedTensor {
            version: Version { major: 1, minor: 0 },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete),
            flags: 0,
            dl_tensor: DlTensor {
                data: buf.as_ptr() as *mut c_void,
                device: Device {
                    device_type: CPU,
                    device_id: 0,
                },
                ndim: 2,
                dtype: DataType {
                    code: INT,
                    bits: 32,
                    lanes: 1,
                },
                shape: std::ptr::null(),
                strides: std::ptr::null(),
                byte_offset: 0,
            },
        },
        shape: [r, w],
        strides: [w, 1],
        buf,
        len: held,
    }));
    // SAFETY: `owner` is a live, leaked box; its shape and strides fields
    // are pointed at in place, and the box never moves again.
    unsafe {
        (*owner).managed.dl_tensor.shape = (*owner).shape.as_ptr();
        (*owner).managed.dl_tensor.strides = (*owner).strides.as_ptr();
    }
    let mut out: *mut c_void = std::ptr::null_mut();
    // SAFETY: `import` is torch's `managed_tensor_to_py_object_no_sync`
    // from the table it published (`dlpack::Exporter::of`), called with the
    // GIL held and a complete managed tensor whose ownership it takes: on
    // success it returns a new reference, on failure -1 with an exception
    // set (the managed tensor is torch's either way: the spec has the
    // importer steal it, so it is not freed here; at worst, if torch did
    // not free it, one buffer is lost).
    let rc = unsafe { import(owner as *mut ManagedTensor, &mut out) };
    if rc != 0 || out.is_null() {
        // Cleared, not raised: the caller falls back to a numpy array.
        drop(PyErr::take(py));
        return Ok(None);
    }
    // SAFETY: a new (owned) reference to the tensor torch made.
    let tensor = unsafe { Bound::from_owned_ptr(py, out as *mut pyo3::ffi::PyObject) };
    Ok(Some((tensor, buf)))
}
