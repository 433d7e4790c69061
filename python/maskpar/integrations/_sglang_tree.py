"""SGLang's speculative draft-tree mask in one parallel maskpar call.

With EAGLE or n-gram speculation, SGLang verifies a *tree* of draft tokens per
request. Before the verify step it needs one bitmask row per tree node: the
tokens allowed after the path from the root to that node. SGLang computes them
in ``spec_utils.generate_token_bitmask`` by a recursive Python walk per request
(``traverse_tree``: accept the node's token, fill its row, visit its children,
roll back), holding the GIL on the scheduler thread. The tree arrives in EAGLE's
layout: per request, ``retrieve_next_token[i]`` is node i's first child,
``retrieve_next_sibling[i]`` its next sibling (-1 for none) and
``draft_tokens[i]`` its token; node 0 is the last verified token.

:func:`install_draft_tree_fill` replaces ``generate_token_bitmask`` with a
version that hands every request whose grammar is maskpar's to
:func:`maskpar.fill_next_token_bitmask_par_with_draft_tree` at once, in that very
layout, and leaves everything else (other backends, a reasoning wrapper still
inside the reasoning, trees maskpar refuses) to SGLang's own walk. The rows are
exactly what SGLang's walk writes; two cases need reconciling:

- a node whose token ends the text (EOS): SGLang's walk stops there, leaving the
  node's row and every descendant's row as allocated (all ones); maskpar, whose
  terminated matcher allows EOS only, would write that and walk on. Those rows
  are reset to all ones afterwards.
- draft token ids outside ``[0, vocab_size)``: SGLang's walk treats them as
  forbidden; maskpar refuses the call. Such requests take SGLang's walk.

Rows of nodes the grammar forbids (and of their descendants) are all ones in
both. Grammars are left as they were (SGLang's walk also rolls back, but leaves
``current_token`` at the last draft it visited; this path does not touch it).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import logging
import os
import time
from collections.abc import Sequence
from typing import Any, Callable

import numpy as np
import torch

import maskpar

from .sglang import _unwrap

logger = logging.getLogger(__name__)

# SGLang versions whose tree walk this replacement was checked against, with a
# digest of ``traverse_tree``'s and ``generate_token_bitmask``'s source: a change
# in either could change the rows, so anything else is refused by name.
CHECKED_VERSIONS = {
    "0.5.23": ("ade4b1cee6a7b22b", "1ba2d02e64d5e4be"),
}

# Set to "0" to keep SGLang's own tree walk even where this fill applies.
DISABLE_ENV = "MASKPAR_SGLANG_DRAFT_TREE"


def _source_digest(fn: Callable) -> str:
    return hashlib.sha256(inspect.getsource(fn).encode()).hexdigest()[:16]


def _refusal(version: str, detail: str) -> RuntimeError:
    checked = ", ".join(sorted(CHECKED_VERSIONS))
    return RuntimeError(
        f"maskpar: SGLang {version} {detail} (checked: {checked}); the parallel "
        "draft-tree fill is NOT installed and SGLang's own walk stays in use. "
        f"Set {DISABLE_ENV}=0 to silence this."
    )


def _sglang_version() -> str:
    import sglang

    return getattr(sglang, "__version__", "unknown")


def check_version_name() -> None:
    """Raises RuntimeError unless this SGLang's version is one the tree fill was
    checked against (cheap: does not import SGLang's speculative modules)."""
    if os.environ.get(DISABLE_ENV, "1") == "0":
        return
    version = _sglang_version()
    if version not in CHECKED_VERSIONS:
        raise _refusal(version, "is not a version it was checked against")


def _check_version(spec_utils: Any) -> None:
    check_version_name()
    found = (
        _source_digest(spec_utils.traverse_tree),
        _source_digest(spec_utils.generate_token_bitmask),
    )
    version = _sglang_version()
    if CHECKED_VERSIONS[version] != found:
        raise _refusal(version, "has changed its tree walk since it was checked")


def install_draft_tree_fill() -> bool:
    """Replaces ``sglang.srt.speculative.spec_utils.generate_token_bitmask``
    (idempotent). Returns True if the parallel fill is in place. Raises
    RuntimeError naming the version when SGLang's tree code is not one it was
    checked against."""
    if os.environ.get(DISABLE_ENV, "1") == "0":
        return False
    from sglang.srt.speculative import spec_utils

    current = spec_utils.generate_token_bitmask
    if getattr(current, "_maskpar_original", None) is not None:
        return True
    _check_version(spec_utils)
    original = current

    @functools.wraps(original)
    def generate_token_bitmask(
        reqs,
        retrieve_next_token_cpu: torch.Tensor,
        retrieve_next_sibling_cpu: torch.Tensor,
        draft_tokens_cpu: torch.Tensor,
        vocab_size: int,
    ):
        return fill_draft_tree_masks(
            reqs,
            retrieve_next_token_cpu,
            retrieve_next_sibling_cpu,
            draft_tokens_cpu,
            vocab_size,
            original=original,
            traverse_tree=spec_utils.traverse_tree,
            time_threshold=getattr(spec_utils, "TREE_TRAVERSE_TIME_THRESHOLD", None),
        )

    generate_token_bitmask._maskpar_original = original
    spec_utils.generate_token_bitmask = generate_token_bitmask
    return True


def uninstall_draft_tree_fill() -> None:
    """Puts SGLang's own ``generate_token_bitmask`` back (for tests and benches)."""
    from sglang.srt.speculative import spec_utils

    original = getattr(spec_utils.generate_token_bitmask, "_maskpar_original", None)
    if original is not None:
        spec_utils.generate_token_bitmask = original


def fill_draft_tree_masks(
    reqs: Sequence[Any],
    retrieve_next_token: torch.Tensor,
    retrieve_next_sibling: torch.Tensor,
    draft_tokens: torch.Tensor,
    vocab_size: int,
    *,
    original: Callable,
    traverse_tree: Callable,
    time_threshold: float | None = None,
) -> tuple[torch.Tensor | None, Any]:
    """``generate_token_bitmask`` with maskpar's requests filled in one call;
    returns what it returns: ``(bitmask or None, the last request's grammar)``."""
    grammars = [req.grammar for req in reqs]
    unwrapped = [_unwrap(g) if g is not None else (None, False) for g in grammars]
    if not any(inner is not None and live for inner, live in unwrapped):
        return original(reqs, retrieve_next_token, retrieve_next_sibling, draft_tokens, vocab_size)
    assert len(reqs) == retrieve_next_token.shape[0]

    num_nodes = draft_tokens.shape[-1]
    # numpy views of SGLang's CPU arrays: on arrays this small, numpy's
    # element-wise checks and row indexing cost a fraction of torch's.
    first_child = retrieve_next_token.numpy()
    next_sibling = retrieve_next_sibling.numpy()
    tokens = draft_tokens.numpy()
    drafts = tokens[:, 1:]  # node 0's token is never read
    bitmask = None
    grammar = None
    fast: list[tuple[int, Any]] = []  # (request index, MaskparGrammar)
    slow: list[int] = []
    out_of_range = _out_of_range_rows(drafts, vocab_size)
    for i, (g, (inner, live)) in enumerate(zip(grammars, unwrapped)):
        if g is None:
            continue  # rows stay all ones, as in SGLang
        if bitmask is None:
            bitmask = g.allocate_vocab_mask(
                vocab_size=vocab_size, batch_size=tokens.size, device="cpu"
            )
        grammar = g
        if inner is None or not live or out_of_range[i]:
            slow.append(i)
        elif not inner.is_terminated():  # a terminated root: SGLang writes nothing
            fast.append((i, inner))

    calls = [
        (inner.matcher, i * num_nodes, (first_child[i], next_sibling[i], tokens[i]))
        for i, inner in fast
    ]
    valid = _fill_trees(calls, bitmask)
    eos_rows = _eos_rows(drafts, [inner for _, inner in fast])
    for (i, inner), nodes in zip(fast, valid):
        if nodes is None:
            slow.append(i)
        elif eos_rows.get(tuple(inner.tokenizer.eos_token_ids), _NONE)[i]:
            _reset_after_eos(
                bitmask,
                i * num_nodes,
                nodes,
                inner.tokenizer.eos_token_ids,
                first_child[i],
                next_sibling[i],
                tokens[i],
            )

    for i in sorted(slow):
        start = time.perf_counter()
        traverse_tree(
            retrieve_next_token[i],
            retrieve_next_sibling[i],
            draft_tokens[i],
            grammars[i],
            bitmask[i * num_nodes : (i + 1) * num_nodes],
            vocab_size=vocab_size,
        )
        elapsed = time.perf_counter() - start
        if time_threshold is not None and elapsed > time_threshold:
            logger.warning(
                f"Bit mask generation took {elapsed} seconds with grammar: {grammars[i]}"
            )
    return bitmask, grammar


def _out_of_range_rows(drafts: np.ndarray, vocab_size: int) -> Sequence[bool]:
    """Per request: is a draft (nodes 1 on) outside ``[0, vocab_size)``?
    SGLang's walk forbids those; maskpar refuses them. One bound check over
    the whole batch first: a server's drafts are in range."""
    if drafts.size == 0:
        return _NONE
    low, high = drafts.min(), drafts.max()
    if low >= 0 and (not vocab_size or high < vocab_size):
        return _NONE
    bad = drafts < 0
    if vocab_size:
        bad |= drafts >= vocab_size
    return bad.any(axis=1).tolist()


def _fill_trees(calls: list, bitmask: torch.Tensor | None) -> list[list[bool] | None]:
    """One parallel call; if maskpar refuses the batch (a tree it cannot read,
    e.g. a node no path reaches), each request alone, None where refused."""
    if not calls:
        return []
    # The tensor's numpy view: maskpar checks an array through numpy's C API,
    # a tensor through six attribute reads.
    bitmask = bitmask.numpy()
    try:
        return maskpar.fill_next_token_bitmask_par_with_draft_tree(calls, bitmask)
    except ValueError:
        pass
    valid: list[list[bool] | None] = []
    for call in calls:
        try:
            valid.append(maskpar.fill_next_token_bitmask_par_with_draft_tree([call], bitmask)[0])
        except ValueError as e:
            logger.debug("maskpar: draft tree refused, SGLang's walk fills it: %s", e)
            valid.append(None)
    return valid


class _NoRows:
    """Rows of a batch check that found nothing: False for every request."""

    def __getitem__(self, i: int) -> bool:
        return False


_NONE = _NoRows()


def _eos_rows(drafts: np.ndarray, grammars: Sequence[Any]) -> dict:
    """Per EOS set: which requests have an EOS among their drafts (one batch
    comparison per EOS id of each distinct set; a server has one set). Sets
    found nowhere are left out."""
    rows = {}
    for g in grammars:
        eos = tuple(g.tokenizer.eos_token_ids)
        if not eos or eos in rows:
            continue
        hit = drafts == eos[0]
        for e in eos[1:]:
            hit |= drafts == e
        rows[eos] = hit.any(axis=1).tolist() if hit.any() else _NONE
    return rows


def _reset_after_eos(
    bitmask: torch.Tensor,
    base_row: int,
    nodes: list[bool],
    eos_token_ids: Sequence[int],
    first_child: Any,
    next_sibling: Any,
    tokens: Any,
) -> None:
    """Rows of an accepted EOS node and of its subtree back to all ones, where
    SGLang's walk stops."""
    eos = set(eos_token_ids)
    tokens = tokens.tolist()
    first = first_child.tolist()
    sibling = next_sibling.tolist()
    stack = [j for j in range(1, len(tokens)) if nodes[j] and tokens[j] in eos]
    reset = set()
    while stack:
        node = stack.pop()
        if node in reset:
            continue
        reset.add(node)
        child = first[node]
        while child != -1:
            stack.append(child)
            child = sibling[child]
    if reset:
        # Through numpy: a tensor's index_put on a large mask costs milliseconds.
        bitmask.numpy()[[base_row + node for node in sorted(reset)]] = -1
