use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use super::buffer::Bitmask;
use super::grammar::{compile_grammar, compile_json_schema, compile_regex, schema_cache_info};
use super::int::{values, Int};
use super::lists;
use super::matcher::{PyMatcher, IN_USE};
use super::{detached, to_py_err};
use rustc_hash::FxHashSet;
use std::ops::Range;
use std::sync::Arc;

use rayon::ThreadPool;

use crate::batch::{self, DraftRequest, Span};
use crate::tree::DraftTree;
use crate::treefill::{self, TreeRequest};

/// Sets the default number of threads for parallel fills and starts their pool.
#[pyfunction]
fn set_num_threads(n: Int) -> PyResult<()> {
    batch::set_num_threads(num_threads(n)?).map_err(to_py_err)
}

/// A thread count as a `usize`; the core checks the upper bound.
fn num_threads(n: Int) -> PyResult<usize> {
    usize::try_from(n.0).map_err(|_| {
        PyValueError::new_err(format!(
            "num_threads must be in [1, {}], got {}",
            batch::MAX_THREADS,
            n.0
        ))
    })
}

/// The default number of threads for parallel fills: the count last passed
/// to `set_num_threads`, else the cores this process may use (its CPU quota
/// and affinity, read once per process).
#[pyfunction]
fn get_num_threads() -> usize {
    batch::get_num_threads()
}

/// One `(matcher, row, ...)` item of a fill call, checked.
pub(super) struct Item<'py> {
    pub matcher: PyRef<'py, PyMatcher>,
    pub row: usize,
    /// The elements after `row`.
    pub rest: Vec<Bound<'py, PyAny>>,
}

/// The elements of a plain tuple or list, read in place (a Python iterator
/// over them is an allocation and a call per element, on every fill's
/// path); None for anything else, subclasses included (they iterate their
/// own way).
fn plain_parts<'py>(obj: &Bound<'py, PyAny>) -> Option<Vec<Bound<'py, PyAny>>> {
    if let Ok(t) = obj.cast_exact::<PyTuple>() {
        Some(t.iter().collect())
    } else {
        obj.cast_exact::<PyList>().ok().map(|l| l.iter().collect())
    }
}

/// The elements of a tuple or list; TypeError `what()` for anything else.
fn tuple_parts<'py>(
    obj: &Bound<'py, PyAny>,
    what: impl FnOnce() -> String,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    if let Some(parts) = plain_parts(obj) {
        Ok(parts)
    } else if obj.is_instance_of::<PyTuple>() || obj.is_instance_of::<PyList>() {
        obj.try_iter()?.collect()
    } else {
        Err(PyTypeError::new_err(what()))
    }
}

/// Reads `[(matcher, row, ...), ...]` where each item has `arity` elements
/// (`shape` names them for errors), checking matchers and rows. `row` names
/// the int after the matcher (a row, or a request's index in a batch
/// array); without one, items are `(matcher, ...)` and every row is 0.
pub(super) fn parse_items<'py>(
    items: &Bound<'py, PyAny>,
    arity: usize,
    shape: &str,
    row: Option<&str>,
) -> PyResult<Vec<Item<'py>>> {
    // Anything but a plain list or tuple (a subclass, a generator) through
    // its own iterator, once.
    let items = match plain_parts(items) {
        Some(items) => items,
        None => items.try_iter()?.collect::<PyResult<_>>()?,
    };
    let mut out = Vec::with_capacity(items.len());
    let mut seen: FxHashSet<usize> = FxHashSet::default();
    for (i, item) in items.iter().enumerate() {
        let mut parts = tuple_parts(item, || format!("item {i} must be a tuple {shape}"))?;
        if parts.len() != arity {
            return Err(PyTypeError::new_err(format!(
                "item {i} must be a tuple {shape}, got {} elements",
                parts.len()
            )));
        }
        let m = parts[0].cast::<PyMatcher>().map_err(|_| {
            PyTypeError::new_err(format!(
                "item {i}: expected a maskpar.Matcher, got {}",
                parts[0].get_type()
            ))
        })?;
        let ptr = m.as_ptr() as usize;
        if !seen.insert(ptr) {
            return Err(PyValueError::new_err(format!(
                "item {i}: the same Matcher appears twice in one call; fork() it for a second request"
            )));
        }
        let value = match row {
            Some(name) => parts[1]
                .extract::<Int>()
                .map_err(|_| PyTypeError::new_err(format!("item {i}: {name} must be an int")))?
                .non_negative_named(|| format!("item {i}: {name}"))?,
            None => 0,
        };
        let matcher = m
            .try_borrow()
            .map_err(|_| PyRuntimeError::new_err(format!("item {i}: {IN_USE}")))?;
        out.push(Item {
            matcher,
            row: value,
            rest: parts.split_off(1 + row.is_some() as usize),
        });
    }
    Ok(out)
}

/// A sequence of ints: a list, tuple, numpy array or CPU tensor (anything
/// with `tolist()` is converted through it, which is fast for arrays).
fn int_seq(obj: &Bound<'_, PyAny>, i: usize, what: &str) -> PyResult<Vec<i64>> {
    let py = obj.py();
    // Lists and tuples are read as they are: `hasattr` on them raises and
    // clears an AttributeError, about a sixth of a warm one-row fill's time.
    let plain = obj.is_exact_instance_of::<PyList>() || obj.is_exact_instance_of::<PyTuple>();
    let list = if !plain && obj.hasattr("tolist")? {
        obj.call_method0("tolist")?
    } else {
        obj.clone()
    };
    list.extract::<Vec<Int>>().map(values).map_err(|e: PyErr| {
        // Keep errors raised by the caller's own sequence (e.g. it touched a
        // matcher that this call holds); reword only plain type mismatches.
        if e.is_instance_of::<PyTypeError>(py) {
            PyTypeError::new_err(format!("item {i}: {what} must be a sequence of ints"))
        } else {
            e
        }
    })
}

fn thread_pool(threads: Option<Int>) -> PyResult<Arc<ThreadPool>> {
    let threads = threads.map(num_threads).transpose()?;
    batch::pool(threads).map_err(to_py_err)
}

/// The bitmask of a fill call, checked against the first request's vocabulary
/// (with no requests there is no width to check, but the buffer still must be valid).
fn fill_bitmask<'py>(
    bitmask: &Bound<'py, PyAny>,
    items: &[Item<'_>],
    spans: &[Span<'_>],
) -> PyResult<Bitmask<'py>> {
    let bm = items_bitmask(bitmask, items)?;
    batch::check_layout(spans, bm.rows, bm.words).map_err(to_py_err)?;
    Ok(bm)
}

/// `bitmask` read as the bitmask of `items`' vocabulary; its layout
/// against their rows is the caller's to check.
fn items_bitmask<'py>(bitmask: &Bound<'py, PyAny>, items: &[Item<'_>]) -> PyResult<Bitmask<'py>> {
    let vocab_size = items
        .first()
        .map(|it| it.matcher.core.grammar().vocab().vocab_size());
    Bitmask::new(bitmask, vocab_size)
}

/// The id that pads a request's drafts (vLLM's `-1` slots): it and the
/// ids after it are not drafts, and their rows are all ones.
const PADDING_ID: i64 = -1;

/// Draft requests from items whose element after the row (if any) is the
/// drafts, checked against each matcher's vocabulary; where `padded`, up to
/// the first `PADDING_ID` (a draft fill's rows), else all of them.
fn draft_requests<'a>(items: &'a [Item<'_>], padded: bool) -> PyResult<Vec<DraftRequest<'a>>> {
    let mut reqs = Vec::with_capacity(items.len());
    for (i, it) in items.iter().enumerate() {
        let (drafts, padding) = match it.rest.first() {
            Some(d) => {
                let ids = int_seq(d, i, "drafts")?;
                let p = (ids.iter())
                    .position(|&t| padded && t == PADDING_ID)
                    .unwrap_or(ids.len());
                let drafts = (it.matcher.core.check_ids(&ids[..p]))
                    .map_err(|e| PyValueError::new_err(format!("item {i}: draft {e}")))?;
                (drafts, ids.len() - p)
            }
            None => (Vec::new(), 0),
        };
        reqs.push(DraftRequest {
            matcher: &it.matcher.core,
            row: it.row,
            drafts,
            padding,
        });
    }
    Ok(reqs)
}

fn run_fill(
    py: Python<'_>,
    items: &Bound<'_, PyAny>,
    bitmask: &Bound<'_, PyAny>,
    num_threads: Option<Int>,
    with_drafts: bool,
) -> PyResult<Vec<usize>> {
    let (arity, shape) = if with_drafts {
        (3, "(matcher, row, drafts)")
    } else {
        (2, "(matcher, row)")
    };
    let items = parse_items(items, arity, shape, Some("row"))?;
    let reqs = draft_requests(&items, true)?;
    let pool = thread_pool(num_threads)?;
    let spans: Vec<Span<'_>> = reqs.iter().map(DraftRequest::span).collect();
    let mut bm = fill_bitmask(bitmask, &items, &spans)?;
    let words = bm.words;
    let buf = bm.words_mut();
    detached(py, || batch::fill_with_drafts(&reqs, buf, words, &pool))?.map_err(to_py_err)
}

/// Reads a tree: `(tokens, parents)` or SGLang's
/// `(retrieve_next_token, retrieve_next_sibling, draft_tokens)`.
fn parse_tree(tree: &Bound<'_, PyAny>, i: usize, m: &PyMatcher) -> PyResult<DraftTree> {
    const SHAPE: &str = "(tokens, parents) or (retrieve_next_token, retrieve_next_sibling, \
                         draft_tokens)";
    let parts = tuple_parts(tree, || {
        format!("item {i}: the tree must be a tuple {SHAPE}")
    })?;
    let vocab = m.core.grammar().vocab();
    let tree = match parts.as_slice() {
        [tokens, parents] => DraftTree::from_parents(
            &int_seq(tokens, i, "tokens")?,
            &int_seq(parents, i, "parents")?,
            vocab,
        ),
        [next, sibling, tokens] => DraftTree::from_first_child_next_sibling(
            &int_seq(next, i, "retrieve_next_token")?,
            &int_seq(sibling, i, "retrieve_next_sibling")?,
            &int_seq(tokens, i, "draft_tokens")?,
            vocab,
        ),
        _ => {
            return Err(PyTypeError::new_err(format!(
                "item {i}: the tree must be a tuple {SHAPE}, got {} elements",
                parts.len()
            )))
        }
    };
    tree.map_err(|e| PyValueError::new_err(format!("item {i}: {e}")))
}

/// Fills row `row` of `bitmask` for each `(matcher, row)`, in parallel.
#[pyfunction]
#[pyo3(signature = (matchers, bitmask, num_threads=None))]
fn fill_next_token_bitmask_par(
    py: Python<'_>,
    matchers: &Bound<'_, PyAny>,
    bitmask: &Bound<'_, PyAny>,
    num_threads: Option<Int>,
) -> PyResult<()> {
    run_fill(py, matchers, bitmask, num_threads, false).map(|_| ())
}

/// For each `(matcher, row, drafts)`, fills rows `row .. row + len(drafts)`:
/// row `row + i` is the mask after `drafts[:i]`. Rows after a rejected draft
/// are set to all ones (-1). A draft of -1 is padding (vLLM's): the drafts
/// end before it, and the rows after it are all ones. Returns the number of
/// accepted drafts per request; matchers are left unchanged.
#[pyfunction]
#[pyo3(signature = (matchers, bitmask, num_threads=None))]
fn fill_next_token_bitmask_par_with_draft_tokens<'py>(
    py: Python<'py>,
    matchers: &Bound<'_, PyAny>,
    bitmask: &Bound<'_, PyAny>,
    num_threads: Option<Int>,
) -> PyResult<Bound<'py, PyList>> {
    let accepted = run_fill(py, matchers, bitmask, num_threads, true)?;
    lists::usizes(py, &accepted)
}

/// For each `(matcher, row, tree)`, fills row `row + i` with the mask for
/// the children of tree node i (node 0 is the last verified token). A tree is
/// `(tokens, parents)` with `parents[0] == -1` and `parents[i] < i`, or
/// SGLang's EAGLE `(retrieve_next_token, retrieve_next_sibling, draft_tokens)`.
/// Nodes whose token the grammar refuses, and their descendants, get rows of
/// -1. Returns, per request, a list saying which nodes are grammar-valid;
/// matchers are left unchanged.
#[pyfunction]
#[pyo3(signature = (requests, bitmask, num_threads=None))]
fn fill_next_token_bitmask_par_with_draft_tree<'py>(
    py: Python<'py>,
    requests: &Bound<'_, PyAny>,
    bitmask: &Bound<'_, PyAny>,
    num_threads: Option<Int>,
) -> PyResult<Bound<'py, PyList>> {
    let items = parse_items(requests, 3, "(matcher, row, tree)", Some("row"))?;
    let mut reqs: Vec<TreeRequest<'_>> = Vec::with_capacity(items.len());
    for (i, it) in items.iter().enumerate() {
        reqs.push(TreeRequest {
            matcher: &it.matcher.core,
            row: it.row,
            tree: parse_tree(&it.rest[0], i, &it.matcher)?,
            ones_after_end: false,
        });
    }
    let valid = run_tree_fill(py, &items, &reqs, bitmask, num_threads)?;
    lists::bool_rows(py, &valid)
}

/// The tree fill of `reqs` (read from `items`) into `bitmask`, checked
/// against the first item's vocabulary, GIL released.
pub(super) fn run_tree_fill(
    py: Python<'_>,
    items: &[Item<'_>],
    reqs: &[TreeRequest<'_>],
    bitmask: &Bound<'_, PyAny>,
    num_threads: Option<Int>,
) -> PyResult<Vec<Vec<bool>>> {
    run_tree_fill_and_ones(py, items, reqs, &[], bitmask, num_threads)
}

/// `run_tree_fill`, and every row in `ones` (row ranges, none overlapping a
/// request's rows) set to all ones.
pub(super) fn run_tree_fill_and_ones(
    py: Python<'_>,
    items: &[Item<'_>],
    reqs: &[TreeRequest<'_>],
    ones: &[Range<usize>],
    bitmask: &Bound<'_, PyAny>,
    num_threads: Option<Int>,
) -> PyResult<Vec<Vec<bool>>> {
    // `fill_tree_rows` checks the layout.
    let mut bm = items_bitmask(bitmask, items)?;
    let (rows, words) = (bm.rows, bm.words);
    fill_tree_rows(py, reqs, ones, bm.words_mut(), rows, words, num_threads)
}

/// The tree fill of `reqs` into `buf` (`rows` rows of `words` words), and
/// every row in `ones` set to all ones, GIL released.
pub(super) fn fill_tree_rows(
    py: Python<'_>,
    reqs: &[TreeRequest<'_>],
    ones: &[Range<usize>],
    buf: &mut [u32],
    rows: usize,
    words: usize,
    num_threads: Option<Int>,
) -> PyResult<Vec<Vec<bool>>> {
    let pool = thread_pool(num_threads)?;
    let spans: Vec<Span<'_>> = reqs.iter().map(TreeRequest::span).collect();
    batch::check_layout(&spans, rows, words).map_err(to_py_err)?;
    if let Some(r) = ones.iter().find(|r| r.start > r.end || r.end > rows) {
        return Err(PyValueError::new_err(format!(
            "rows {r:?} are not rows of the bitmask ({rows} rows)"
        )));
    }
    for r in ones {
        buf[r.start * words..r.end * words].fill(u32::MAX);
    }
    detached(py, || treefill::fill_with_tree(reqs, buf, words, &pool))?.map_err(to_py_err)
}

/// Grammar-aware drafts: for each `(matcher, drafts)`, the drafts up to the
/// first one the grammar refuses, then the tokens the grammar forces after
/// them, at most `max_drafts` in all. Every returned list is accepted by the
/// matcher as a whole; matchers are left unchanged.
#[pyfunction]
#[pyo3(signature = (requests, max_drafts, num_threads=None))]
fn grammar_aware_drafts<'py>(
    py: Python<'py>,
    requests: &Bound<'_, PyAny>,
    max_drafts: Int,
    num_threads: Option<Int>,
) -> PyResult<Bound<'py, PyList>> {
    let max_drafts = max_drafts.non_negative("max_drafts")?;
    let items = parse_items(requests, 2, "(matcher, drafts)", None)?;
    let reqs = draft_requests(&items, false)?;
    let pool = thread_pool(num_threads)?;
    let drafts = detached(py, || batch::grammar_aware_drafts(&reqs, max_drafts, &pool))?
        .map_err(to_py_err)?;
    lists::int_rows(py, &drafts)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(set_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(get_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(compile_regex, m)?)?;
    m.add_function(wrap_pyfunction!(compile_grammar, m)?)?;
    m.add_function(wrap_pyfunction!(compile_json_schema, m)?)?;
    m.add_function(wrap_pyfunction!(schema_cache_info, m)?)?;
    m.add_function(wrap_pyfunction!(fill_next_token_bitmask_par, m)?)?;
    m.add_function(wrap_pyfunction!(
        fill_next_token_bitmask_par_with_draft_tokens,
        m
    )?)?;
    m.add_function(wrap_pyfunction!(
        fill_next_token_bitmask_par_with_draft_tree,
        m
    )?)?;
    m.add_function(wrap_pyfunction!(grammar_aware_drafts, m)?)?;
    Ok(())
}
