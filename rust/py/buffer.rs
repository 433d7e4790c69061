//! Zero-copy access to a caller's bitmask: a numpy int32 array, or a torch CPU
//! int32 tensor (viewed through `Tensor.numpy()`, which shares its memory).

use numpy::{
    dtype, BorrowError, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyReadwriteArrayDyn,
    PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::bitmask::words_for;

/// A checked, writable bitmask: `rows` rows of `words` int32 words, C-contiguous.
pub struct Bitmask<'py> {
    array: PyReadwriteArrayDyn<'py, i32>,
    pub rows: usize,
    pub words: usize,
}

impl Bitmask<'_> {
    /// The whole buffer as words; rows are `words` apart.
    pub fn words_mut(&mut self) -> &mut [u32] {
        let slice = self
            .array
            .as_slice_mut()
            .expect("contiguity checked in Bitmask::new");
        bytemuck::cast_slice_mut(slice)
    }
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

fn is_torch_tensor(obj: &Bound<'_, PyAny>) -> bool {
    let module = obj
        .get_type()
        .getattr("__module__")
        .and_then(|m| m.extract::<String>())
        .unwrap_or_default();
    module == "torch" || module.starts_with("torch.")
}

/// Returns a numpy view of `obj` that shares its memory, or an exception.
fn as_ndarray<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyUntypedArray>> {
    if let Ok(arr) = obj.cast::<PyUntypedArray>() {
        return Ok(arr.clone());
    }
    if is_torch_tensor(obj) {
        let device = obj.getattr("device")?.str()?.to_string();
        if !device.starts_with("cpu") {
            return Err(PyValueError::new_err(format!(
                "bitmask must be a CPU tensor (pinned is fine), got one on device {device}"
            )));
        }
        let dt = obj.getattr("dtype")?.str()?.to_string();
        if dt != "torch.int32" {
            return Err(PyTypeError::new_err(format!(
                "bitmask dtype must be torch.int32, got {dt}"
            )));
        }
        let arr = obj.call_method0("numpy")?;
        return Ok(arr.cast::<PyUntypedArray>()?.clone());
    }
    Err(PyTypeError::new_err(format!(
        "bitmask must be a numpy.ndarray or a torch.Tensor of dtype int32, got {}",
        type_name(obj)
    )))
}

impl<'py> Bitmask<'py> {
    /// Checks dtype, dimensions, contiguity, writability and width (`vocab_size`
    /// bits per row; None when there is nothing to check it against) and
    /// borrows the buffer for writing.
    pub fn new(obj: &Bound<'py, PyAny>, vocab_size: Option<usize>) -> PyResult<Self> {
        let arr = as_ndarray(obj)?;
        let py = obj.py();
        if !arr.dtype().is_equiv_to(&dtype::<i32>(py)) {
            return Err(PyTypeError::new_err(format!(
                "bitmask dtype must be int32, got {}",
                arr.dtype().str()?
            )));
        }
        let shape = arr.shape().to_vec();
        let (rows, words) = match shape.as_slice() {
            [w] => (1, *w),
            [r, w] => (*r, *w),
            _ => {
                return Err(PyValueError::new_err(format!(
                    "bitmask must have 1 or 2 dimensions [rows, words], got shape {shape:?}"
                )))
            }
        };
        if let Some(vocab_size) = vocab_size.filter(|&v| words_for(v) != words) {
            let want = words_for(vocab_size);
            return Err(PyValueError::new_err(format!(
                "bitmask rows must have ceil(vocab_size / 32) = {want} words (vocab_size {vocab_size}), \
                 got {words}"
            )));
        }
        if !arr.is_c_contiguous() {
            return Err(PyValueError::new_err(
                "bitmask must be C-contiguous (it is written in place, never copied)",
            ));
        }
        let typed = arr.cast::<PyArrayDyn<i32>>()?;
        let array = typed.try_readwrite().map_err(|e| match e {
            BorrowError::NotWriteable => {
                PyValueError::new_err("bitmask is read-only; pass a writable buffer")
            }
            other => PyValueError::new_err(format!(
                "bitmask is in use elsewhere (another thread or call is writing it): {other}"
            )),
        })?;
        Ok(Bitmask { array, rows, words })
    }
}
