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
version that hands every request whose grammar is maskpar's to one parallel
maskpar call, which reads SGLang's ``[B, N]`` arrays as they are, and leaves
everything else (other backends, a reasoning wrapper still inside the
reasoning) to SGLang's own walk. A maskpar server's batch (every grammar
maskpar's, or None) is the whole step in that call, allocation included
(``_core._fill_eagle_step``; on a server without CUDA the installed
function is itself native, ``_core._sglang_tree_step``, with no Python
frame before the fill); any other batch takes the general path
(:func:`fill_draft_tree_masks`, with ``_core._fill_eagle_trees``). The rows are exactly
what SGLang's walk writes, its two rules included:

- a node whose token ends the text (EOS): SGLang's walk stops there, leaving the
  node's row and every descendant's row as allocated (all ones); maskpar writes
  them all ones (a terminated matcher's own mask would allow EOS only).
- draft token ids outside the grammar's vocabulary: SGLang's walk has its own
  rule for them (an id past ``vocab_size`` is forbidden); maskpar does not read
  such a tree, and that request takes SGLang's walk.

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
from maskpar import _core
from maskpar._torch import _allocate_with_view, _cuda_available

from .sglang import MaskparGrammar, _unwrap

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

    def general(
        reqs,
        retrieve_next_token_cpu: torch.Tensor,
        retrieve_next_sibling_cpu: torch.Tensor,
        draft_tokens_cpu: torch.Tensor,
        vocab_size: int,
        done: tuple[Any, list[int], Any] | None = None,
        tried: bool = False,
    ):
        # What the native step below leaves to Python: ``done``, its fill
        # with trees left to SGLang's walk or a bitmask that is not a
        # tensor, or None: the whole step here (``tried``: the native step
        # ran the fill already and it declined or refused the batch). A
        # maskpar server's batch (every grammar maskpar's, or None) is
        # still one call, which also allocates the bitmask unless it must
        # be pinned.
        allocated = None
        if done is None and not tried:
            if _cuda_available():
                allocated = _allocate_with_view(
                    draft_tokens_cpu.numel(), vocab_size, recycle=True, filled=False
                )
                target = (allocated[1], None)  # the bitmask, pinned
            else:
                target = (None, vocab_size)  # maskpar allocates it
            try:
                # Positional: keyword names cost the call a few microseconds
                # more when its code has gone cold.
                done = _core._fill_eagle_step(
                    reqs,
                    MaskparGrammar,
                    retrieve_next_token_cpu,
                    retrieve_next_sibling_cpu,
                    draft_tokens_cpu,
                    *target,  # bitmask, vocab_size
                    None,  # num_threads: maskpar's
                    True,  # as_tensor: a tensor where maskpar allocates it
                )
            except (ValueError, TypeError):
                done = None  # a request maskpar refuses: request by request below
        if done is None:
            return fill_draft_tree_masks(
                reqs,
                retrieve_next_token_cpu,
                retrieve_next_sibling_cpu,
                draft_tokens_cpu,
                vocab_size,
                original=original,
                traverse_tree=spec_utils.traverse_tree,
                time_threshold=getattr(spec_utils, "TREE_TRAVERSE_TIME_THRESHOLD", None),
                allocated=allocated,
            )
        rows, unread, grammar = done
        if allocated:
            bitmask = allocated[0]
        elif type(rows) is torch.Tensor:
            bitmask = rows  # made by torch through DLPack (rust/py/tensormask.rs)
        else:
            bitmask = torch.from_numpy(rows)  # a torch without DLPack's import
        if unread:
            _walk_trees(
                unread,
                [req.grammar for req in reqs],
                (retrieve_next_token_cpu, retrieve_next_sibling_cpu, draft_tokens_cpu),
                bitmask,
                vocab_size,
                spec_utils.traverse_tree,
                getattr(spec_utils, "TREE_TRAVERSE_TIME_THRESHOLD", None),
            )
        return bitmask, grammar

    # What SGLang calls: a C object over the native step
    # (rust/py/sglangstep.rs), which returns at once in the common case (no
    # CUDA, every tree maskpar's) and calls ``general`` for the rest: a
    # Python frame in front of every step cost 3-8% of a cold step at B = 1.
    generate_token_bitmask = functools.partial(
        _core._sglang_tree_step, MaskparGrammar, _cuda_available, general
    )
    functools.update_wrapper(generate_token_bitmask, original)
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
    allocated: tuple[torch.Tensor, np.ndarray] | None = None,
) -> tuple[torch.Tensor | None, Any]:
    """``generate_token_bitmask`` with maskpar's requests filled in one call;
    returns what it returns: ``(bitmask or None, the last request's grammar)``.
    ``allocated``: a bitmask of the step's size and its numpy view, contents
    unset, to use where maskpar would allocate one."""
    grammars = [req.grammar for req in reqs]
    unwrapped = [_unwrap(g) if g is not None else (None, False) for g in grammars]
    if not any(inner is not None and live for inner, live in unwrapped):
        return original(reqs, retrieve_next_token, retrieve_next_sibling, draft_tokens, vocab_size)
    assert len(reqs) == retrieve_next_token.shape[0]

    bitmask = None
    rows: np.ndarray | None = None  # its numpy view, where maskpar made it
    grammar = None
    fast: list[tuple[maskpar.Matcher, int]] = []  # (matcher, request index)
    slow: list[int] = []
    for i, (g, (inner, live)) in enumerate(zip(grammars, unwrapped)):
        if g is None:
            continue  # rows stay all ones, as in SGLang
        if bitmask is None:
            if inner is not None:
                # What this grammar's allocate_vocab_mask gives, but not
                # filled: maskpar writes every row of its requests, and the
                # others' rows are set to all ones below.
                bitmask, rows = allocated or _allocate_with_view(
                    draft_tokens.numel(), vocab_size, recycle=True, filled=False
                )
            else:
                bitmask = g.allocate_vocab_mask(
                    vocab_size=vocab_size, batch_size=draft_tokens.numel(), device="cpu"
                )
        grammar = g
        if inner is None or not live:
            slow.append(i)
        elif not inner.is_terminated():  # a terminated root: SGLang writes nothing
            fast.append((inner.matcher, i))

    num_nodes = draft_tokens.shape[-1]
    ours = rows is not None  # the bitmask is maskpar's, not filled yet
    if fast or ours:
        if rows is None:
            rows = bitmask.numpy()
        left = _fill_trees(fast, retrieve_next_token, retrieve_next_sibling, draft_tokens, rows)
        slow += left
        if ours:
            written = {i for _, i in fast}.difference(left)
            for i in range(len(reqs)):
                if i not in written:
                    rows[i * num_nodes : (i + 1) * num_nodes] = -1

    arrays = (retrieve_next_token, retrieve_next_sibling, draft_tokens)
    _walk_trees(sorted(slow), grammars, arrays, bitmask, vocab_size, traverse_tree, time_threshold)
    return bitmask, grammar


def _walk_trees(
    indices: Sequence[int],
    grammars: Sequence[Any],
    arrays: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    bitmask: torch.Tensor,
    vocab_size: int,
    traverse_tree: Callable,
    time_threshold: float | None,
) -> None:
    """SGLang's own walk (``traverse_tree``) for the requests at ``indices``,
    into their rows of ``bitmask`` (all ones before), with SGLang's warning
    for a walk slower than ``time_threshold``."""
    num_nodes = arrays[2].shape[-1]
    for i in indices:
        start = time.perf_counter()
        traverse_tree(
            arrays[0][i],
            arrays[1][i],
            arrays[2][i],
            grammars[i],
            bitmask[i * num_nodes : (i + 1) * num_nodes],
            vocab_size=vocab_size,
        )
        elapsed = time.perf_counter() - start
        if time_threshold is not None and elapsed > time_threshold:
            logger.warning(
                f"Bit mask generation took {elapsed} seconds with grammar: {grammars[i]}"
            )


def _fill_trees(
    items: list[tuple[maskpar.Matcher, int]],
    retrieve_next_token: torch.Tensor,
    retrieve_next_sibling: torch.Tensor,
    draft_tokens: torch.Tensor,
    rows: np.ndarray,
) -> list[int]:
    """Fills the rows of every ``(matcher, request index)`` of ``rows`` (the
    bitmask's numpy view) in one parallel call; returns the indices left to
    SGLang's walk: trees maskpar cannot read (a token outside its
    vocabulary, which SGLang has its own rule for) and, should maskpar
    refuse a call (a parser bound), the requests it refuses alone. Their
    rows are not maskpar's: the caller sets them to all ones (a tree not
    read leaves them as they were)."""
    if not items:
        return []
    # SGLang's CPU tensors as they are: maskpar reads them through torch's
    # DLPack exporter in one C call each (a ``.numpy()`` call per array cost
    # 5-10 us when torch's bindings had gone cold between steps).
    arrays = (retrieve_next_token, retrieve_next_sibling, draft_tokens)
    try:
        filled = _core._fill_eagle_trees(items, *arrays, rows)
        return [i for (_, i), ok in zip(items, filled) if not ok]
    except (ValueError, TypeError):
        pass
    num_nodes = arrays[2].shape[-1]
    left = []
    for item in items:
        i = item[1]
        mine = rows[i * num_nodes : (i + 1) * num_nodes]
        mine.fill(-1)  # the refused call may have written some of them
        try:
            if _core._fill_eagle_trees([item], *arrays, rows)[0]:
                continue
        except (ValueError, TypeError) as e:
            logger.debug("maskpar: draft tree refused, SGLang's walk fills it: %s", e)
            mine.fill(-1)
        left.append(i)
    return left
