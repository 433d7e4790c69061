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

use numpy::{PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyList;
use rustc_hash::FxHashSet;

use super::functions::{parse_items, run_tree_fill};
use super::int::Int;
use super::lists;
use crate::batch::TreeRequest;
use crate::tree::DraftTree;

/// For each `(matcher, i)`, fills rows `i * N .. (i + 1) * N` of `bitmask`
/// from the tree in row `i` of the `[B, N]` int64 arrays, as SGLang's walk
/// would (see the module docs). Returns, per item, whether its rows were
/// filled (False: its tree is left to SGLang's walk, rows untouched).
/// Matchers are left unchanged.
#[pyfunction]
#[pyo3(signature = (
    requests, retrieve_next_token, retrieve_next_sibling, draft_tokens, bitmask, num_threads=None
))]
pub fn _fill_eagle_trees<'py>(
    py: Python<'py>,
    requests: &Bound<'_, PyAny>,
    retrieve_next_token: PyReadonlyArray2<'_, i64>,
    retrieve_next_sibling: PyReadonlyArray2<'_, i64>,
    draft_tokens: PyReadonlyArray2<'_, i64>,
    bitmask: &Bound<'_, PyAny>,
    num_threads: Option<Int>,
) -> PyResult<Bound<'py, PyList>> {
    let items = parse_items(requests, 2, "(matcher, index)", Some("index"))?;
    let shape = draft_tokens.shape();
    for (name, a) in [
        ("retrieve_next_token", &retrieve_next_token),
        ("retrieve_next_sibling", &retrieve_next_sibling),
    ] {
        if a.shape() != shape {
            return Err(PyValueError::new_err(format!(
                "{name} has shape {:?}, draft_tokens {shape:?}",
                a.shape()
            )));
        }
    }
    let (batch_size, nodes) = (shape[0], shape[1]);
    let (first, sibling, tokens) = (
        retrieve_next_token.as_array(),
        retrieve_next_sibling.as_array(),
        draft_tokens.as_array(),
    );
    let mut filled = vec![false; items.len()];
    let mut reqs: Vec<TreeRequest<'_>> = Vec::with_capacity(items.len());
    let mut seen: FxHashSet<usize> = FxHashSet::default();
    for (k, it) in items.iter().enumerate() {
        let i = it.row;
        if i >= batch_size {
            return Err(PyValueError::new_err(format!(
                "item {k}: index {i} is not a row of the [{batch_size}, {nodes}] tree arrays"
            )));
        }
        if !seen.insert(i) {
            return Err(PyValueError::new_err(format!(
                "item {k}: index {i} appears twice (each request's rows are its own)"
            )));
        }
        let tree = DraftTree::from_first_child_next_sibling(
            &first.row(i).to_vec(),
            &sibling.row(i).to_vec(),
            &tokens.row(i).to_vec(),
            it.matcher.core.grammar().vocab(),
        );
        // Every error of reading a tree is the tree's own (its shape or a
        // token): SGLang's walk decides for those requests.
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
    run_tree_fill(py, &items, &reqs, bitmask, num_threads)?;
    lists::bools(py, &filled)
}
