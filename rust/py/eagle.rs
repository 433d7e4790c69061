//! SGLang's EAGLE step in one call.
//!
//! SGLang builds the grammar mask of a speculative step for a whole batch
//! of draft trees at once: request `i`'s tree is row `i` of three `[B, N]`
//! arrays (`retrieve_next_token`, `retrieve_next_sibling`, `draft_tokens`),
//! and row `i * N + j` of one bitmask is the mask for the children of its
//! node `j`. SGLang's own walk (`traverse_tree`) does that request by
//! request, node by node, in Python.
//!
//! `_fill_eagle_trees` takes the arrays as SGLang holds them and fills the
//! rows of every listed request in one parallel fill. Reading the batch
//! arrays here, rather than a tree per request, spares the adapter a row
//! view and a list conversion per array and request (each costs about what
//! a warm row does). Two rules are the walk's, not the general tree fill's:
//!
//! * **The end of the text.** Once a node's token is EOS the walk stops: it
//!   fills no row for that node or below it, so they keep the all-ones they
//!   were allocated with. Here they are written all ones.
//! * **Trees maskpar cannot read** (malformed arrays, or a token outside the
//!   grammar's vocabulary, for which SGLang's walk has rules of its own) are
//!   not filled: their rows are left untouched and the result says so, for
//!   the adapter to hand those requests to SGLang's walk.

use numpy::{PyArrayMethods, PyReadonlyArray2, PyUntypedArray, PyUntypedArrayMethods};
use std::ops::Range;

use pyo3::exceptions::{PyMemoryError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple, PyType};

use super::buffer::{torch_exporter, type_name};
use super::dlpack::HostDtype;
use super::functions::{fill_tree_rows, parse_items, run_tree_fill, run_tree_fill_and_ones, Item};
use super::int::Int;
use super::lists;
use super::matcher::{PyMatcher, IN_USE};
use super::pooledmask::unfilled_bitmask;
use super::tensormask::unfilled_tensor;
use crate::strided::names_memory_twice;
use crate::tree::DraftTree;
use crate::treefill::TreeRequest;

/// For each `(matcher, i)`, fills rows `i * N .. (i + 1) * N` of `bitmask`
/// from the tree in row `i` of the `[B, N]` int64 arrays (numpy arrays or
/// CPU tensors), as SGLang's walk would (see the module docs). Returns, per
/// item, whether its rows were filled (False: its tree is left to SGLang's
/// walk, rows untouched). Matchers are left unchanged.
#[pyfunction]
#[pyo3(signature = (
    requests, retrieve_next_token, retrieve_next_sibling, draft_tokens, bitmask, num_threads=None
))]
pub fn _fill_eagle_trees<'py>(
    py: Python<'py>,
    requests: &Bound<'_, PyAny>,
    retrieve_next_token: &Bound<'_, PyAny>,
    retrieve_next_sibling: &Bound<'_, PyAny>,
    draft_tokens: &Bound<'_, PyAny>,
    bitmask: &Bound<'_, PyAny>,
    num_threads: Option<Int>,
) -> PyResult<Bound<'py, PyList>> {
    let items = parse_items(requests, 2, "(matcher, index)", Some("index"))?;
    let arrays = TreeArrays::read(retrieve_next_token, retrieve_next_sibling, draft_tokens)?;
    let (reqs, filled) = tree_requests(&items, &arrays)?;
    run_tree_fill(py, &items, &reqs, bitmask, num_threads)?;
    lists::bools(py, &filled)
}

/// SGLang's whole `generate_token_bitmask` step in one call, for a batch in
/// which every request's `grammar` is None or of exactly `grammar_type`
/// (maskpar's SGLang grammar, whose `matcher` attribute is its
/// `maskpar.Matcher`). Every row of the step's bitmask is written: `bitmask`
/// (`[B * N, words]`, its contents not read), or, given `vocab_size`
/// instead, a new int32 array of `ceil(vocab_size / 32)` words per row (as
/// maskpar allocates one without CUDA: numpy's, or a recycled buffer from
/// 4 MiB on), or with `as_tensor` a CPU torch tensor where torch publishes
/// DLPack's import (`tensormask`; a numpy array otherwise). A request's
/// rows are its tree's masks, or all ones where SGLang's walk writes
/// nothing (no grammar, a grammar already terminated) or where maskpar
/// cannot read its tree. Returns `(the bitmask, indices of
/// the trees not read, for SGLang's walk to fill, the last request's
/// grammar that is not None)`, or None, having written nothing, when some
/// grammar is of another type or no request has one (the adapter's general
/// path decides those batches). Matchers are left unchanged.
#[pyfunction]
#[pyo3(signature = (
    requests, grammar_type, retrieve_next_token, retrieve_next_sibling, draft_tokens,
    bitmask=None, vocab_size=None, num_threads=None, as_tensor=false
))]
#[allow(clippy::too_many_arguments)]
pub fn _fill_eagle_step<'py>(
    py: Python<'py>,
    requests: &Bound<'py, PyAny>,
    grammar_type: &Bound<'py, PyType>,
    retrieve_next_token: &Bound<'py, PyAny>,
    retrieve_next_sibling: &Bound<'py, PyAny>,
    draft_tokens: &Bound<'py, PyAny>,
    bitmask: Option<Bound<'py, PyAny>>,
    vocab_size: Option<Int>,
    num_threads: Option<Int>,
    as_tensor: bool,
) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let arrays = [retrieve_next_token, retrieve_next_sibling, draft_tokens];
    let target = match (bitmask, vocab_size) {
        (Some(b), None) => Target::Bitmask(b),
        (None, Some(v)) => Target::New {
            vocab_size: v,
            as_tensor,
        },
        _ => {
            return Err(PyTypeError::new_err(
                "give either bitmask or vocab_size (the bitmask to allocate)",
            ))
        }
    };
    let Some(step) = eagle_step(py, requests, grammar_type, arrays, target, num_threads)? else {
        return Ok(None);
    };
    step.into_tuple(py).map(Some)
}

/// Where `eagle_step` writes the step's rows.
pub(super) enum Target<'py> {
    /// The caller's `[B * N, words]` bitmask (its contents not read).
    Bitmask(Bound<'py, PyAny>),
    /// A new one of `ceil(vocab_size / 32)` words per row (see
    /// `_fill_eagle_step`).
    New { vocab_size: Int, as_tensor: bool },
}

/// A step `eagle_step` filled.
pub(super) struct EagleStep<'py> {
    /// The bitmask, every row written.
    pub bitmask: Bound<'py, PyAny>,
    /// Whether `bitmask` is a torch tensor maskpar made (else the caller's
    /// object, or a numpy array).
    pub tensor: bool,
    /// Indices of the requests whose trees maskpar did not read (SGLang's
    /// walk fills those).
    pub unread: Vec<usize>,
    /// The last request's grammar that is not None.
    pub last: Bound<'py, PyAny>,
}

impl<'py> EagleStep<'py> {
    /// `(bitmask, unread, last)`, as `_fill_eagle_step` returns it.
    pub(super) fn into_tuple(self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let unread = lists::usizes(py, &self.unread)?;
        PyTuple::new(py, [self.bitmask, unread.into_any(), self.last])
    }
}

/// `_fill_eagle_step`'s work: the step's rows into `target`, or None,
/// having written nothing (see there).
pub(super) fn eagle_step<'py>(
    py: Python<'py>,
    requests: &Bound<'py, PyAny>,
    grammar_type: &Bound<'py, PyType>,
    [retrieve_next_token, retrieve_next_sibling, draft_tokens]: [&Bound<'py, PyAny>; 3],
    target: Target<'py>,
    num_threads: Option<Int>,
) -> PyResult<Option<EagleStep<'py>>> {
    let Some(StepBatch { items, idle, last }) = step_batch(py, requests, grammar_type)? else {
        return Ok(None);
    };
    let arrays = TreeArrays::read(retrieve_next_token, retrieve_next_sibling, draft_tokens)?;
    let [batch_size, nodes] = arrays.shape;
    let count = items.len() + idle.len();
    if count != batch_size {
        return Err(PyValueError::new_err(format!(
            "{count} requests, but tree arrays of shape [{batch_size}, {nodes}]"
        )));
    }
    let (reqs, filled) = tree_requests(&items, &arrays)?;
    let unread: Vec<usize> = (items.iter().zip(&filled))
        .filter(|(_, &ok)| !ok)
        .map(|(it, _)| it.row)
        .collect();
    let ones: Vec<Range<usize>> = (idle.iter().chain(&unread))
        .map(|&i| i * nodes..(i + 1) * nodes)
        .collect();
    let (bitmask, tensor) = match target {
        Target::Bitmask(b) => {
            run_tree_fill_and_ones(py, &items, &reqs, &ones, &b, num_threads)?;
            (b, false)
        }
        Target::New {
            vocab_size,
            as_tensor,
        } => {
            let words = vocab_size.non_negative("vocab_size")?.div_ceil(32);
            let rows = batch_size * nodes;
            let made = if as_tensor {
                unfilled_tensor(py, rows, words)?
            } else {
                None
            };
            let tensor = made.is_some();
            let (bitmask, data) = match made {
                Some((tensor, data)) => (tensor, data.as_ptr()),
                None => {
                    let array = unfilled_bitmask(py, rows, words)?;
                    let data = array.data() as *mut u32;
                    (array.into_any(), data)
                }
            };
            // SAFETY: `bitmask` was made just above over `rows` x `words`
            // int32s at `data` (u32's size and alignment), C-contiguous,
            // and no Python code has seen it yet, so nothing else reads or
            // writes its memory until this call returns it: the slice is
            // its only user. Written only (every row, below), never read
            // first.
            let buf: &mut [u32] = match rows * words {
                0 => &mut [],
                len => unsafe { std::slice::from_raw_parts_mut(data, len) },
            };
            fill_tree_rows(py, &reqs, &ones, buf, rows, words, num_threads)?;
            (bitmask, tensor)
        }
    };
    Ok(Some(EagleStep {
        bitmask,
        tensor,
        unread,
        last,
    }))
}

/// The most requests a batch's length may reserve room for before they are
/// read (SGLang's batches are a few hundred at most).
const MAX_SIZE_HINT: usize = 1 << 12;

/// A step's requests as `_fill_eagle_step` reads them.
struct StepBatch<'py> {
    /// The requests to fill (`row`: the request's index).
    items: Vec<Item<'py>>,
    /// Requests whose rows SGLang's walk leaves all ones: no grammar, or
    /// one already terminated.
    idle: Vec<usize>,
    /// The last grammar that is not None.
    last: Bound<'py, PyAny>,
}

/// The batch's requests, or None when a grammar is not exactly of
/// `grammar_type` or no request has one.
fn step_batch<'py>(
    py: Python<'py>,
    requests: &Bound<'py, PyAny>,
    grammar_type: &Bound<'py, PyType>,
) -> PyResult<Option<StepBatch<'py>>> {
    // Sized from the batch where it has a length (a list: SGLang's), so
    // that no push reallocates (memory that is cold between steps); only
    // a hint, bounded: `__len__` is the caller's to lie with.
    let hint = requests.len().unwrap_or(0).min(MAX_SIZE_HINT);
    let mut items: Vec<Item<'py>> = Vec::with_capacity(hint);
    let mut idle: Vec<usize> = Vec::new();
    let mut last = None;
    // (matcher's address, request): no two requests may share a matcher.
    let mut matchers: Vec<(usize, usize)> = Vec::with_capacity(hint);
    for (i, req) in requests.try_iter()?.enumerate() {
        let grammar = req?.getattr(intern!(py, "grammar"))?;
        if grammar.is_none() {
            idle.push(i);
            continue;
        }
        if !grammar.get_type().is(grammar_type) {
            return Ok(None);
        }
        let matcher = grammar.getattr(intern!(py, "matcher"))?;
        let matcher = matcher.cast_into::<PyMatcher>().map_err(|e| {
            PyTypeError::new_err(format!("request {i}: its grammar's matcher: {e}"))
        })?;
        matchers.push((matcher.as_ptr() as usize, i));
        let matcher = (matcher.try_borrow())
            .map_err(|_| PyRuntimeError::new_err(format!("request {i}: {IN_USE}")))?;
        last = Some(grammar);
        if matcher.core.is_terminated() {
            idle.push(i);
        } else {
            items.push(Item {
                matcher,
                row: i,
                rest: Vec::new(),
            });
        }
    }
    if let Some(i) = first_repeat(&mut matchers) {
        return Err(PyValueError::new_err(format!(
            "request {i}: its matcher is another request's too"
        )));
    }
    Ok(last.map(|last| StepBatch { items, idle, last }))
}

/// The first position whose key an earlier position has too, from `(key,
/// position)` pairs (reordered): a request sharing another's matcher, an
/// item naming another's row. Sorting beats a hash set here: no table to
/// allocate, in memory that is cold between steps.
fn first_repeat(pairs: &mut [(usize, usize)]) -> Option<usize> {
    pairs.sort_unstable();
    (pairs.windows(2))
        .filter(|w| w[0].0 == w[1].0)
        .map(|w| w[1].1)
        .min()
}

/// SGLang's three `[B, N]` tree arrays, read and checked to share a shape.
struct TreeArrays {
    shape: [usize; 2],
    first: TreeArray,
    sibling: TreeArray,
    tokens: TreeArray,
}

impl TreeArrays {
    fn read(
        retrieve_next_token: &Bound<'_, PyAny>,
        retrieve_next_sibling: &Bound<'_, PyAny>,
        draft_tokens: &Bound<'_, PyAny>,
    ) -> PyResult<TreeArrays> {
        let tokens = TreeArray::read(draft_tokens, "draft_tokens")?;
        let first = TreeArray::read(retrieve_next_token, "retrieve_next_token")?;
        let sibling = TreeArray::read(retrieve_next_sibling, "retrieve_next_sibling")?;
        let shape = tokens.shape;
        for (name, a) in [
            ("retrieve_next_token", &first),
            ("retrieve_next_sibling", &sibling),
        ] {
            if a.shape != shape {
                return Err(PyValueError::new_err(format!(
                    "{name} has shape {:?}, draft_tokens {shape:?}",
                    a.shape
                )));
            }
        }
        Ok(TreeArrays {
            shape,
            first,
            sibling,
            tokens,
        })
    }
}

/// The tree request of each item (`row`: its index in the batch arrays),
/// and per item whether its tree could be read: every error of reading a
/// tree is the tree's own (its shape or a token), and SGLang's walk decides
/// for those requests.
fn tree_requests<'a>(
    items: &'a [Item<'_>],
    arrays: &TreeArrays,
) -> PyResult<(Vec<TreeRequest<'a>>, Vec<bool>)> {
    let [batch_size, nodes] = arrays.shape;
    let mut filled = vec![false; items.len()];
    let mut reqs: Vec<TreeRequest<'a>> = Vec::with_capacity(items.len());
    // Sized by the items, never by the batch: `[2**40, 0]` arrays hold no
    // ids at all.
    let mut rows: Vec<(usize, usize)> = items
        .iter()
        .enumerate()
        .map(|(k, it)| (it.row, k))
        .collect();
    let repeat = first_repeat(&mut rows);
    for (k, it) in items.iter().enumerate() {
        let i = it.row;
        if i >= batch_size {
            return Err(PyValueError::new_err(format!(
                "item {k}: index {i} is not a row of the [{batch_size}, {nodes}] tree arrays"
            )));
        }
        // The first item whose index an earlier one has (an index out of
        // range is reported above, at its first item).
        if repeat == Some(k) {
            return Err(PyValueError::new_err(format!(
                "item {k}: index {i} appears twice (each request's rows are its own)"
            )));
        }
        let tree = DraftTree::from_first_child_next_sibling(
            arrays.first.row(i),
            arrays.sibling.row(i),
            arrays.tokens.row(i),
            it.matcher.core.grammar().vocab(),
        );
        if let Ok(tree) = tree {
            filled[k] = true;
            reqs.push(TreeRequest {
                matcher: &it.matcher.core,
                row: i * nodes,
                tree,
                ones_after_end: true,
            });
        }
    }
    Ok((reqs, filled))
}

/// One of SGLang's `[B, N]` int64 tree arrays, copied out of the caller's
/// object (B x N ids: a few KB).
struct TreeArray {
    shape: [usize; 2],
    values: Vec<i64>,
}

impl TreeArray {
    /// Reads a numpy array, or a torch tensor through its DLPack exporter
    /// (SGLang holds the arrays as CPU tensors: a `.numpy()` call per array
    /// is a trip through torch's bindings, 5-10 us each when their code has
    /// gone cold between steps), or, for a tensor DLPack does not describe,
    /// what its `.numpy()` gives.
    fn read(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<TreeArray> {
        if let Some(exporter) = torch_exporter(obj.py())? {
            if let Some(t) = exporter.host(obj)? {
                if let (HostDtype::Int64, &[b, n]) = (t.dtype, t.shape()) {
                    let len = b.checked_mul(n).ok_or_else(|| too_large(name))?;
                    let mut values = ids_for(len, name)?;
                    if len > 0 {
                        // SAFETY: a successful export of a host tensor of
                        // `[b, n]` int64 elements, C-contiguous (checked by
                        // `host`, which also refuses a null pointer for a
                        // tensor with elements), points at `b * n * 8`
                        // readable bytes that the tensor owns; the GIL is
                        // held from the export to the end of this copy, so
                        // no Python code can free or move them meanwhile.
                        // Read as bytes: no alignment is assumed.
                        let bytes =
                            unsafe { std::slice::from_raw_parts(t.ptr as *const u8, len * 8) };
                        values.extend(
                            (bytes.chunks_exact(8))
                                .map(|b| i64::from_ne_bytes(b.try_into().expect("8 bytes"))),
                        );
                    }
                    return Ok(TreeArray {
                        shape: [b, n],
                        values,
                    });
                }
            }
        }
        let wrong = |why: String| {
            PyTypeError::new_err(format!(
                "{name} must be a [B, N] int64 numpy array or CPU tensor ({why})"
            ))
        };
        let array = if obj.cast::<PyUntypedArray>().is_ok() || !obj.hasattr("numpy")? {
            obj.clone()
        } else {
            // A tensor DLPack did not describe (not contiguous, an older
            // torch): its numpy view, or its own error (a GPU tensor).
            obj.call_method0("numpy")
                .map_err(|e| wrong(e.to_string()))?
        };
        let array = (array.extract::<PyReadonlyArray2<'_, i64>>())
            .map_err(|_| wrong(format!("got {}", describe(&array))))?;
        let (b, n) = (array.shape()[0], array.shape()[1]);
        // Checked before the view is made: ndarray's view of misaligned
        // elements would read them through misaligned references.
        if b > 0 && n > 0 && !array.is_aligned() {
            return Err(wrong("its elements are not aligned".into()));
        }
        let len = b.checked_mul(n).ok_or_else(|| too_large(name))?;
        let strides = [array.strides()[0], array.strides()[1]];
        if len > MAX_VIEW_IDS && names_memory_twice(strides, b, n, 8) {
            return Err(wrong(format!(
                "a view of {len} ids that overlap in memory (a broadcast view): \
                 pass a copy, or at most {MAX_VIEW_IDS} ids"
            )));
        }
        let mut values = ids_for(len, name)?;
        values.extend(array.as_array().iter().copied());
        Ok(TreeArray {
            shape: [b, n],
            values,
        })
    }

    fn row(&self, i: usize) -> &[i64] {
        let n = self.shape[1];
        &self.values[i * n..(i + 1) * n]
    }
}

/// What a wrong tree array is, for the error: an array's dimensions and
/// dtype, else its type.
fn describe(obj: &Bound<'_, PyAny>) -> String {
    match obj.cast::<PyUntypedArray>() {
        Ok(a) => format!("a {}-dimensional array of {}", a.ndim(), a.dtype()),
        Err(_) => type_name(obj),
    }
}

/// The most ids a tree array whose elements overlap in memory (a broadcast
/// or expanded view, see `strided`) may claim: 128 MiB copied. Any other
/// array holds the memory of the ids it claims, so copying it at most
/// doubles that.
const MAX_VIEW_IDS: usize = 1 << 24;

/// Room for `len` ids of `name`, or a MemoryError: the arrays' length is
/// the caller's, and a failed allocation must not abort the process.
fn ids_for(len: usize, name: &str) -> PyResult<Vec<i64>> {
    let mut values = Vec::new();
    values
        .try_reserve_exact(len)
        .map_err(|_| PyMemoryError::new_err(format!("{name}: no memory for {len} ids")))?;
    Ok(values)
}

fn too_large(name: &str) -> PyErr {
    PyValueError::new_err(format!("{name} is too large"))
}
