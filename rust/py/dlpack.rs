//! A torch tensor's layout in one C call, through DLPack's exchange API.
//!
//! Checking a tensor bitmask through Python attributes (`is_cpu`, `dtype`,
//! `layout`, `shape`, `is_contiguous()`, `data_ptr()`) is six trips through
//! torch's Python bindings: about half a microsecond when warm, and 15-25
//! microseconds on the first fill after a compile, when the bindings' code
//! has left the CPU's caches (measured on a structural tag's first mask: 25
//! us with a tensor, 8 us with a numpy array). DLPack 1.3 lets a tensor type
//! publish a table of C functions (`type(t).__dlpack_c_exchange_api__`, a
//! capsule named `dlpack_exchange_api`; torch publishes it in releases
//! from 2026 on, 2.14 and 2.15 checked here), one of
//! which fills a caller's `DLTensor` (data pointer, device, dtype, shape,
//! strides) straight from the tensor: one call, no Python objects made.
//!
//! The table's layout is fixed by its major version (1 here): a header
//! `{version: {major, minor}, prev_api}` and then five function pointers, of
//! which `dltensor_from_py_object_no_sync` is the fourth and may be null.
//! The third, `managed_tensor_to_py_object_no_sync`, goes the other way: it
//! makes a tensor over memory maskpar owns (`tensormask`).
//! It is looked up once on `torch.Tensor` and used only for objects of
//! exactly that type (the spec asks for the type the table came from);
//! anything it does not describe as a host tensor of one or two dimensions,
//! C-contiguous, of a dtype in `HostDtype` (int32 for a bitmask, int64 for
//! SGLang's draft-tree arrays, a float type for logits), goes back to the
//! callers' attribute checks, which also word the errors.

use std::ffi::{c_int, c_void};

use pyo3::exceptions::{PyBufferError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyCapsuleMethods, PyType};

/// `DLPackVersion`.
#[repr(C)]
pub(super) struct Version {
    pub major: u32,
    pub minor: u32,
}

/// `DLDevice`.
#[repr(C)]
pub(super) struct Device {
    pub device_type: i32,
    pub device_id: i32,
}

/// `DLDataType`.
#[repr(C)]
pub(super) struct DataType {
    pub code: u8,
    pub bits: u8,
    pub lanes: u16,
}

/// `DLTensor`: non-owning, valid until control returns to Python.
#[repr(C)]
pub(super) struct DlTensor {
    pub data: *mut c_void,
    pub device: Device,
    pub ndim: i32,
    pub dtype: DataType,
    pub shape: *const i64,
    pub strides: *const i64,
    pub byte_offset: u64,
}

/// `DLManagedTensorVersioned`: a `DLTensor` with its owner's context and
/// the function that frees both (see `tensormask`).
#[repr(C)]
pub(super) struct ManagedTensor {
    pub version: Version,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(*mut ManagedTensor)>,
    pub flags: u64,
    pub dl_tensor: DlTensor,
}

type FromPyObject = unsafe extern "C" fn(py_object: *mut c_void, out: *mut DlTensor) -> c_int;
/// `DLPackManagedTensorToPyObjectNoSync`: takes ownership of `tensor` and
/// returns a new reference to the producer's tensor over it (0), or sets a
/// Python exception (-1).
pub(super) type ToPyObject =
    unsafe extern "C" fn(tensor: *mut ManagedTensor, out: *mut *mut c_void) -> c_int;

/// `DLPackExchangeAPIHeader`: the part of the table every version shares.
#[repr(C)]
struct Header {
    version: Version,
    prev_api: *const c_void,
}

/// `DLPackExchangeAPI` (major version 1). Only the field this module calls is
/// typed; the others are kept as opaque pointers for the layout.
#[repr(C)]
struct ExchangeApi {
    header: Header,
    managed_tensor_allocator: *const c_void,
    managed_tensor_from_py_object_no_sync: *const c_void,
    managed_tensor_to_py_object_no_sync: Option<ToPyObject>,
    dltensor_from_py_object_no_sync: Option<FromPyObject>,
    current_work_stream: *const c_void,
}

pub(super) const CPU: i32 = 1; // kDLCPU
const CUDA_HOST: i32 = 3; // kDLCUDAHost: pinned host memory
pub(super) const INT: u8 = 0; // kDLInt
const FLOAT: u8 = 2; // kDLFloat
const BFLOAT: u8 = 4; // kDLBfloat

/// The element types this module hands on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostDtype {
    Int32,
    /// SGLang's draft-tree arrays (`rust/py/eagle.rs`).
    Int64,
    Float32,
    Float16,
    BFloat16,
}

/// A host tensor's memory: C-contiguous elements of `dtype` from `ptr`, in
/// `shape` (one or two dimensions). Nothing here keeps that memory alive:
/// the tensor owns it, and another thread giving the tensor other memory
/// (`set_`, `.data =`) frees it. So memory read this way is used with the
/// GIL held, or (a fill's bitmask) with the same exposure a data pointer
/// read through the tensor's attributes has always had (docs/security.md).
pub struct HostTensor {
    pub ptr: usize,
    /// The dimensions, in the first `ndim` (no allocation: this is read
    /// on every step, when the allocator's memory is cold).
    dims: [usize; 2],
    ndim: usize,
    pub dtype: HostDtype,
}

impl HostTensor {
    /// The tensor's shape: one or two dimensions.
    pub fn shape(&self) -> &[usize] {
        &self.dims[..self.ndim]
    }

    /// Rows and columns: a 1-D tensor is one row (`Exporter::host` hands
    /// on one or two dimensions only).
    pub fn matrix(&self) -> (usize, usize) {
        match *self.shape() {
            [rows, cols] => (rows, cols),
            [cols] => (1, cols),
            _ => (1, 0),
        }
    }
}

/// The exporter of one tensor type: its `dltensor_from_py_object_no_sync`,
/// and the type, since the function may be given only objects of exactly
/// that type.
pub struct Exporter {
    export: FromPyObject,
    /// The table's import, where it has one (`tensormask`).
    pub(super) import: Option<ToPyObject>,
    ty: Py<PyType>,
}

impl Exporter {
    /// The exporter `ty` publishes, if it publishes one this module can read
    /// (major version 1, the non-owning export present).
    pub fn of(ty: &Bound<'_, PyType>) -> Option<Exporter> {
        let py = ty.py();
        let attr = ty
            .getattr(pyo3::intern!(py, "__dlpack_c_exchange_api__"))
            .ok()?;
        let capsule = attr.cast::<PyCapsule>().ok()?;
        let ptr = capsule.pointer_checked(Some(c"dlpack_exchange_api")).ok()?;
        // SAFETY: the capsule named "dlpack_exchange_api" holds a pointer to
        // the producer's `DLPackExchangeAPI`, which the DLPack spec requires
        // to live as long as the process. Its header (version, then a
        // pointer) is the same in every version, so it is read alone first.
        let header = unsafe { &*(ptr.as_ptr() as *const Header) };
        if header.version.major != 1 {
            return None;
        }
        // SAFETY: as above; with major version 1 the whole table is laid out
        // as `ExchangeApi` spells it.
        let api = unsafe { &*(ptr.as_ptr() as *const ExchangeApi) };
        let export = api.dltensor_from_py_object_no_sync?;
        Some(Exporter {
            export,
            import: api.managed_tensor_to_py_object_no_sync,
            ty: ty.clone().unbind(),
        })
    }

    /// Whether `obj` is of exactly the type this exporter came from.
    pub fn exports(&self, obj: &Bound<'_, PyAny>) -> bool {
        obj.get_type().is(self.ty.bind(obj.py()))
    }

    /// Where `obj`'s words are and how many, if it is of this exporter's
    /// type and a host int32 tensor of one or two dimensions laid out
    /// C-contiguously. None for anything else (see `host`).
    pub fn host_int32(&self, obj: &Bound<'_, PyAny>) -> PyResult<Option<HostTensor>> {
        Ok(self.host(obj)?.filter(|t| t.dtype == HostDtype::Int32))
    }

    /// `obj`'s memory, if it is of this exporter's type and a host tensor
    /// of one or two dimensions laid out C-contiguously, of a dtype in
    /// `HostDtype`. None for anything else, and when the export fails with
    /// an error of the tensor (the caller's attribute checks then say what
    /// is wrong); any other error (an interrupt, out of memory) is raised.
    pub fn host(&self, obj: &Bound<'_, PyAny>) -> PyResult<Option<HostTensor>> {
        if !self.exports(obj) {
            return Ok(None);
        }
        let mut t = DlTensor {
            data: std::ptr::null_mut(),
            device: Device {
                device_type: 0,
                device_id: 0,
            },
            ndim: 0,
            dtype: DataType {
                code: 0,
                bits: 0,
                lanes: 0,
            },
            shape: std::ptr::null(),
            strides: std::ptr::null(),
            byte_offset: 0,
        };
        // SAFETY: the function comes from the table published by `obj`'s
        // type (checked above to be exactly the type it was read from),
        // takes a borrowed `PyObject*` and a caller-owned `DLTensor` to fill,
        // and is called with the GIL held (`obj: Bound` proves it). On
        // failure it returns non-zero with a Python exception set, which is
        // taken below.
        let rc = unsafe { (self.export)(obj.as_ptr() as *mut c_void, &mut t) };
        if rc != 0 {
            let py = obj.py();
            return match PyErr::take(py) {
                Some(e) if !tensor_error(py, &e) => Err(e),
                _ => Ok(None),
            };
        }
        let dtype = match (t.dtype.code, t.dtype.bits, t.dtype.lanes) {
            (INT, 32, 1) => HostDtype::Int32,
            (INT, 64, 1) => HostDtype::Int64,
            (FLOAT, 32, 1) => HostDtype::Float32,
            (FLOAT, 16, 1) => HostDtype::Float16,
            (BFLOAT, 16, 1) => HostDtype::BFloat16,
            _ => return Ok(None),
        };
        if !matches!(t.device.device_type, CPU | CUDA_HOST)
            || !(1..=2).contains(&t.ndim)
            || t.shape.is_null()
            || t.strides.is_null()
        {
            return Ok(None);
        }
        let ndim = t.ndim as usize;
        // SAFETY: a successful export with `ndim` in 1..=2 points `shape`
        // and `strides` (checked non-null) at `ndim` int64s each, owned by
        // the tensor and valid until control returns to Python, which it
        // does not while these slices are used.
        let (dims, strides) = unsafe {
            (
                std::slice::from_raw_parts(t.shape, ndim),
                std::slice::from_raw_parts(t.strides, ndim),
            )
        };
        let mut shape = [0usize; 2];
        for (to, &d) in shape.iter_mut().zip(dims) {
            let Ok(d) = usize::try_from(d) else {
                return Ok(None);
            };
            *to = d;
        }
        if !c_contiguous(&shape[..ndim], strides) {
            return Ok(None);
        }
        // A tensor with elements but no memory exports a null pointer: a
        // functional tensor's wrapper (`torch.func.functionalize`), storage
        // resized to nothing. Its elements cannot be read here (the
        // callers' attribute checks then say what is wrong).
        let elements = shape[..ndim]
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d));
        if t.data.is_null() && elements != Some(0) {
            return Ok(None);
        }
        let ptr = usize::try_from(t.byte_offset)
            .ok()
            .and_then(|offset| (t.data as usize).checked_add(offset));
        Ok(ptr.map(|ptr| HostTensor {
            ptr,
            dims: shape,
            ndim,
            dtype,
        }))
    }
}

/// Whether an export failed because of the tensor (torch raises these for
/// layouts DLPack cannot describe: sparse, meta, quantized, nested,
/// wrapped), rather than an interrupt or a lack of memory.
fn tensor_error(py: Python<'_>, e: &PyErr) -> bool {
    e.is_instance_of::<PyRuntimeError>(py)
        || e.is_instance_of::<PyTypeError>(py)
        || e.is_instance_of::<PyValueError>(py)
        || e.is_instance_of::<PyBufferError>(py)
}

/// Whether elements at `strides` (in elements) over `shape` are laid out
/// row-major without gaps. As torch's `is_contiguous`, a dimension of
/// length one may have any stride, and an empty tensor is contiguous.
fn c_contiguous(shape: &[usize], strides: &[i64]) -> bool {
    if shape.contains(&0) {
        return true;
    }
    let mut expected: i64 = 1;
    for (&len, &stride) in shape.iter().zip(strides).rev() {
        if len != 1 && stride != expected {
            return false;
        }
        let Ok(len) = i64::try_from(len) else {
            return false;
        };
        let Some(next) = expected.checked_mul(len) else {
            return false;
        };
        expected = next;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::c_contiguous;

    #[test]
    fn contiguity_is_torchs() {
        assert!(c_contiguous(&[3, 4], &[4, 1]));
        assert!(c_contiguous(&[4], &[1]));
        assert!(!c_contiguous(&[4], &[2]));
        assert!(!c_contiguous(&[3, 4], &[1, 3])); // a transpose
        assert!(!c_contiguous(&[3, 4], &[8, 1])); // every other row
        assert!(c_contiguous(&[1, 4], &[99, 1])); // a length-one dimension's stride is free
        assert!(c_contiguous(&[3, 1], &[1, 7]));
        assert!(c_contiguous(&[0, 4], &[5, 3])); // empty
        assert!(!c_contiguous(&[2, 2], &[2, -1]));
    }
}
