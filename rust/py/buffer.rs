//! Zero-copy access to a caller's bitmask: a numpy int32 array (borrowed
//! through rust-numpy), or a torch CPU int32 tensor (written through its
//! data pointer, after the same checks; `Tensor.numpy()` would cost a few
//! microseconds per call, as much as a warm mask).

use std::sync::Mutex;

use numpy::{
    dtype, BorrowError, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyReadwriteArrayDyn,
    PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyType};

use super::dlpack::Exporter;
use crate::bitmask::words_for;

/// A checked, writable bitmask: `rows` rows of `words` int32 words, C-contiguous.
pub struct Bitmask<'py> {
    storage: Storage<'py>,
    pub rows: usize,
    pub words: usize,
}

enum Storage<'py> {
    /// The array's own borrow (rust-numpy refuses a second one of the same
    /// array), and its memory registered in `BEING_WRITTEN`: a torch tensor
    /// over the same memory (`torch.from_numpy`, `.numpy()`) is another
    /// object, which only the address range tells apart.
    Numpy {
        array: PyReadwriteArrayDyn<'py, i32>,
        _writing: Writing,
    },
    Torch(TorchBorrow<'py>),
}

impl Bitmask<'_> {
    /// The whole buffer as words; rows are `words` apart.
    pub fn words_mut(&mut self) -> &mut [u32] {
        match &mut self.storage {
            Storage::Numpy { array, .. } => {
                let slice = array
                    .as_slice_mut()
                    .expect("contiguity and alignment checked in Bitmask::new");
                bytemuck::cast_slice_mut(slice)
            }
            Storage::Torch(t) => t.words_mut(),
        }
    }
}

pub(super) fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// The torch objects the checks compare against, looked up once torch is
/// imported (a tensor cannot exist before that, so maskpar never imports it).
struct TorchTypes {
    tensor: Py<PyType>,
    int32: Py<PyAny>,
    strided: Py<PyAny>,
    /// `torch.Tensor`'s DLPack exporter (recent torch; see `dlpack`).
    exporter: Option<Exporter>,
}

static TORCH: PyOnceLock<TorchTypes> = PyOnceLock::new();

fn torch_types(py: Python<'_>) -> PyResult<Option<&'static TorchTypes>> {
    if let Some(t) = TORCH.get(py) {
        return Ok(Some(t));
    }
    let modules = py.import("sys")?.getattr("modules")?;
    let Some(torch) = modules.cast::<PyDict>()?.get_item("torch")? else {
        return Ok(None);
    };
    let tensor = torch.getattr("Tensor")?.cast_into::<PyType>()?;
    let types = TorchTypes {
        exporter: Exporter::of(&tensor),
        tensor: tensor.unbind(),
        int32: torch.getattr("int32")?.unbind(),
        strided: torch.getattr("strided")?.unbind(),
    };
    Ok(Some(TORCH.get_or_init(py, || types)))
}

/// Looks up, off any request's path, what the first bitmask check in a
/// process would otherwise look up inside a fill: numpy's C API (rust-numpy
/// imports it on first use: about 0.2 ms, as much as five fresh schemas'
/// first masks) and torch's types when torch is imported. numpy is a
/// dependency; were it missing, the API is left alone and a fill's check
/// reports it as before.
pub fn warm_up(py: Python<'_>) {
    if py.import("numpy").is_ok() {
        let _ = py.None().bind(py).cast::<PyUntypedArray>();
    }
    let _ = torch_types(py);
}

/// Start and end addresses of the buffers being written now, torch tensors'
/// and numpy arrays' alike: a second call on an overlapping buffer (another
/// thread, GIL released; a tensor and an array over the same memory) is
/// refused, as rust-numpy refuses a second writable borrow of one array.
static BEING_WRITTEN: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

/// A torch tensor's memory, registered in `BEING_WRITTEN` until dropped.
struct TorchBorrow<'py> {
    /// Keeps the tensor (and, unless another thread gives it other memory
    /// meanwhile, its memory) alive while the words are written.
    _tensor: Bound<'py, PyAny>,
    _writing: Writing,
    ptr: usize,
    len: usize,
}

impl<'py> TorchBorrow<'py> {
    fn new(tensor: &Bound<'py, PyAny>, ptr: usize, len: usize) -> PyResult<Self> {
        Ok(TorchBorrow {
            _tensor: tensor.clone(),
            _writing: Writing::new(ptr, ptr + len * 4, "bitmask")?,
            ptr,
            len,
        })
    }

    fn words_mut(&mut self) -> &mut [u32] {
        if self.len == 0 {
            return &mut [];
        }
        // SAFETY: `ptr` is the data pointer of a CPU tensor checked to be
        // strided, C-contiguous, int32 (4-byte aligned) and of exactly `len`
        // elements, so `ptr .. ptr + 4 * len` is its live, initialised memory;
        // `_tensor` keeps the tensor alive for the borrow's lifetime, and
        // `BEING_WRITTEN` refuses any other maskpar borrow of an overlapping
        // range until this one is dropped, so this is the only Rust reference
        // to that memory. Every bit pattern is a valid u32.
        unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut u32, self.len) }
    }
}

/// Registers `start .. end` in `BEING_WRITTEN`, or says `what` is in use.
/// An empty range overlaps nothing and is not registered.
fn register(start: usize, end: usize, what: &str) -> PyResult<()> {
    if start >= end {
        return Ok(());
    }
    let mut in_use = BEING_WRITTEN.lock().unwrap_or_else(|e| e.into_inner());
    if in_use.iter().any(|&(a, b)| start < b && a < end) {
        return Err(PyValueError::new_err(format!(
            "{what} is in use elsewhere (another thread or call is writing it)"
        )));
    }
    in_use.push((start, end));
    Ok(())
}

/// Removes the range `register` added (registered ranges never overlap, so
/// there is at most one).
fn unregister(start: usize, end: usize) {
    let mut in_use = BEING_WRITTEN.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(i) = in_use.iter().position(|&r| r == (start, end)) {
        in_use.swap_remove(i);
    }
}

/// Bytes `start .. end` that maskpar writes (a bitmask's words, numpy's or
/// torch's; the logits of `apply_token_bitmask_inplace`), registered in
/// `BEING_WRITTEN` until dropped, so that no other maskpar call writes them
/// meanwhile.
pub(super) struct Writing {
    start: usize,
    end: usize,
}

impl Writing {
    pub(super) fn new(start: usize, end: usize, what: &str) -> PyResult<Self> {
        register(start, end, what)?;
        Ok(Writing { start, end })
    }
}

impl Drop for Writing {
    fn drop(&mut self) {
        unregister(self.start, self.end);
    }
}

/// torch's DLPack exporter, if torch is imported and publishes one.
pub(super) fn torch_exporter(py: Python<'_>) -> PyResult<Option<&'static Exporter>> {
    Ok(torch_types(py)?.and_then(|t| t.exporter.as_ref()))
}

/// Rows and words per row of a bitmask of shape `shape`, checked against
/// `vocab_size` (None when there is nothing to check it against).
fn layout(shape: &[usize], vocab_size: Option<usize>) -> PyResult<(usize, usize)> {
    let (rows, words) = match shape {
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
    Ok((rows, words))
}

const NOT_CONTIGUOUS: &str = "bitmask must be C-contiguous (it is written in place, never copied)";
const NOT_ALIGNED: &str =
    "bitmask memory must be aligned to 4 bytes (int32 words); it is a view at an unaligned offset";

impl<'py> Bitmask<'py> {
    /// Checks dtype, device, dimensions, contiguity, writability and width
    /// (`vocab_size` bits per row; None when there is nothing to check it
    /// against) and borrows the buffer for writing.
    pub fn new(obj: &Bound<'py, PyAny>, vocab_size: Option<usize>) -> PyResult<Self> {
        if let Ok(arr) = obj.cast::<PyUntypedArray>() {
            return Self::numpy(arr, vocab_size);
        }
        if let Some(torch) = torch_types(obj.py())? {
            if obj.is_instance(torch.tensor.bind(obj.py()))? {
                return Self::torch(obj, torch, vocab_size);
            }
        }
        Err(PyTypeError::new_err(format!(
            "bitmask must be a numpy.ndarray or a torch.Tensor of dtype int32, got {}",
            type_name(obj)
        )))
    }

    fn numpy(arr: &Bound<'py, PyUntypedArray>, vocab_size: Option<usize>) -> PyResult<Self> {
        if !arr.dtype().is_equiv_to(&dtype::<i32>(arr.py())) {
            return Err(PyTypeError::new_err(format!(
                "bitmask dtype must be int32, got {}",
                arr.dtype().str()?
            )));
        }
        let (rows, words) = layout(arr.shape(), vocab_size)?;
        if !arr.is_c_contiguous() {
            return Err(PyValueError::new_err(NOT_CONTIGUOUS));
        }
        // A view at an odd byte offset (e.g. `uint8_array[1:].view(int32)`)
        // cannot be written as u32 words; numpy says so in its ALIGNED flag.
        if rows * words > 0 && !arr.is_aligned() {
            return Err(PyValueError::new_err(NOT_ALIGNED));
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
        let start = typed.data() as usize;
        let writing = Writing::new(start, start + rows * words * 4, "bitmask")?;
        Ok(Bitmask {
            storage: Storage::Numpy {
                array,
                _writing: writing,
            },
            rows,
            words,
        })
    }

    fn torch(
        obj: &Bound<'py, PyAny>,
        torch: &TorchTypes,
        vocab_size: Option<usize>,
    ) -> PyResult<Self> {
        let py = obj.py();
        // One C call describes a plain tensor; its fields are checked there.
        if let Some(exporter) = &torch.exporter {
            if let Some(host) = exporter.host_int32(obj)? {
                let (rows, words) = layout(host.shape(), vocab_size)?;
                return Self::torch_memory(obj, host.ptr, rows, words);
            }
        }
        if !obj.getattr(intern!(py, "is_cpu"))?.extract::<bool>()? {
            return Err(PyValueError::new_err(format!(
                "bitmask must be a CPU tensor (pinned is fine), got one on device {}",
                obj.getattr(intern!(py, "device"))?.str()?
            )));
        }
        let dt = obj.getattr(intern!(py, "dtype"))?;
        if !dt.is(torch.int32.bind(py)) {
            return Err(PyTypeError::new_err(format!(
                "bitmask dtype must be torch.int32, got {}",
                dt.str()?
            )));
        }
        if !obj
            .getattr(intern!(py, "layout"))?
            .is(torch.strided.bind(py))
        {
            return Err(PyValueError::new_err(
                "bitmask must be a dense (strided) tensor, not a sparse one",
            ));
        }
        let shape: Vec<usize> = obj.getattr(intern!(py, "shape"))?.extract()?;
        let (rows, words) = layout(&shape, vocab_size)?;
        if !obj
            .call_method0(intern!(py, "is_contiguous"))?
            .extract::<bool>()?
        {
            return Err(PyValueError::new_err(NOT_CONTIGUOUS));
        }
        let ptr: usize = obj.call_method0(intern!(py, "data_ptr"))?.extract()?;
        Self::torch_memory(obj, ptr, rows, words)
    }

    /// The checked tensor `obj`'s `rows x words` words at `ptr`, borrowed.
    fn torch_memory(
        obj: &Bound<'py, PyAny>,
        ptr: usize,
        rows: usize,
        words: usize,
    ) -> PyResult<Self> {
        let len = rows * words;
        if len > 0 && ptr == 0 {
            return Err(PyValueError::new_err("bitmask tensor has no storage"));
        }
        if len > 0 && ptr % std::mem::align_of::<u32>() != 0 {
            return Err(PyValueError::new_err(NOT_ALIGNED));
        }
        let borrow = TorchBorrow::new(obj, ptr, len)?;
        Ok(Bitmask {
            storage: Storage::Torch(borrow),
            rows,
            words,
        })
    }
}

/// Whether the numpy array `view` covers exactly the memory of the torch
/// tensor `tensor`: both int32 and C-contiguous, same address, same shape.
/// The tensor is read in one C call (`dlpack`); None where that call is not
/// available (an older torch, or not a plain `torch.Tensor`) and the
/// caller must compare through the tensor's attributes. The vLLM adapter
/// asks this each step of the numpy view it keeps of the manager's bitmask
/// (three tensor attributes cost it about 0.7 us a step).
#[pyfunction]
pub fn _is_view_of(view: &Bound<'_, PyAny>, tensor: &Bound<'_, PyAny>) -> PyResult<Option<bool>> {
    let py = view.py();
    let Some(torch) = torch_types(py)? else {
        return Ok(None);
    };
    let Some(exporter) = &torch.exporter else {
        return Ok(None);
    };
    if !exporter.exports(tensor) {
        return Ok(None);
    }
    let Ok(array) = view.cast::<PyArrayDyn<i32>>() else {
        return Ok(Some(false));
    };
    let Some(host) = exporter.host_int32(tensor)? else {
        return Ok(Some(false));
    };
    Ok(Some(
        array.is_c_contiguous()
            && array.shape() == host.shape()
            && array.data() as usize == host.ptr,
    ))
}
