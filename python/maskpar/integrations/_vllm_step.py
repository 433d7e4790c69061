"""vLLM's per-step bitmask as one parallel maskpar call.

``StructuredOutputManager.grammar_bitmask`` (vLLM 0.33) gives each request a
block of ``K + 1`` rows (K = ``num_speculative_tokens``) and, with speculation,
fills them in a serial Python loop: fill a row, accept the draft, fill the next
row, ..., then roll the grammar back. :func:`grammar_bitmask` computes the very
same rows with one ``fill_next_token_bitmask_par_with_draft_tokens`` call over
all requests (``fill_next_token_bitmask_par`` without drafts), GIL released,
and leaves every grammar's state untouched.

The rules of vLLM's loop, for a request with drafts ``d[0..n)`` in block rows
``0..n`` (row ``n`` is the bonus row), ``p`` the index of the first ``-1``
padding draft (``n`` if none), and ``(gs, cs)`` the manager's constraint
bounds (drafts from ``gs`` on are fed to the grammar, rows from ``cs`` on are
constrained; rows before are still reasoning):

* row ``i <= p`` with ``i >= cs``: the grammar's mask after ``d[gs:i]``, or all
  ones (-1) if the grammar has terminated there;
* row ``i <= p`` with ``i < cs``: a reasoning row, all ones except the
  manager's masked reasoning-end ids;
* rows after the padding: all ones;
* if the grammar refuses a fed draft ``d[j]`` (or has terminated before it),
  every later row of the block, bonus included, is a copy of row ``j``;
* rows past ``n`` in the block are not written.

maskpar's draft chains read vLLM's ``-1`` padding as vLLM does (the drafts
end there; the rows after it are -1) and differ in three places, reconciled
here: after a
refused draft maskpar writes -1 rows (vLLM copies the last valid row); a
terminated matcher's row is its end-token set (vLLM writes -1); and a
terminated matcher still takes end tokens (vLLM refuses any token once the
grammar has terminated).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

import maskpar
from maskpar._core import _is_view_of

from .vllm import MaskparGrammar

if TYPE_CHECKING:
    from vllm.v1.request import Request
    from vllm.v1.structured_output import StructuredOutputManager


def _clear_ids(row: np.ndarray, token_ids: Sequence[int]) -> None:
    """Clears the bits of ``token_ids`` in one int32 bitmask row (as vLLM does)."""
    words = row.view(np.uint32)
    for token_id in token_ids:
        words[token_id >> 5] &= ~np.uint32(1 << (token_id & 31))


class _Block:
    """One request's rows and what must be fixed after maskpar has written them."""

    __slots__ = ("base", "n", "p", "gs", "cs", "masked", "grammar", "drafts")

    def __init__(
        self,
        base: int,
        n: int,
        p: int,
        gs: int,
        cs: int,
        masked: Sequence[int],
        grammar: MaskparGrammar,
        drafts: list[int] | None,
    ) -> None:
        self.base, self.n, self.p = base, n, p
        self.gs, self.cs, self.masked = gs, cs, masked
        self.grammar = grammar
        self.drafts = drafts  # the drafts fed to the grammar; None: no row is constrained

    def finish(self, bm: np.ndarray, accepted: int) -> None:
        """Turns maskpar's rows into vLLM's (see the module doc)."""
        base, n, p, cs = self.base, self.n, self.p, self.cs
        if self.drafts is None:
            last, failed = p, False
        else:
            count, terminated = _outcome(self.grammar, self.drafts, accepted)
            last = self.gs + count
            failed = count < len(self.drafts)
            if terminated and last >= cs:
                bm[base + last] = -1
        for i in range(min(cs, last + 1)):  # reasoning rows
            bm[base + i] = -1
            if self.masked:
                _clear_ids(bm[base + i], self.masked)
        _later_rows(bm, base, n, p, last, failed)


def _later_rows(bm: np.ndarray, base: int, n: int, p: int, last: int, refused: bool) -> None:
    """A block's rows after ``last``, the last one vLLM's loop fills: copies
    of row ``last`` after a refused draft, else -1 from the padding on."""
    if refused:
        bm[base + last + 1 : base + n + 1] = bm[base + last]
    elif p < n:
        bm[base + p + 1 : base + n + 1] = -1


def _outcome(grammar: MaskparGrammar, drafts: Sequence[int], accepted: int) -> tuple[int, bool]:
    """How far vLLM's loop gets along ``drafts`` of which maskpar's chain
    took ``accepted``: the drafts its grammar accepts, and whether the grammar
    has terminated there. A terminated maskpar matcher still takes end
    tokens; vLLM's grammar refuses every token once it has terminated."""
    if grammar.matcher.is_terminated():
        return 0, True
    eos = grammar.eos_token_ids
    if accepted and not eos.isdisjoint(drafts[:accepted]):
        for j in range(accepted):
            if drafts[j] in eos:
                return j + 1, True
    return accepted, False


def _unbounded(manager: StructuredOutputManager) -> bool:
    """Whether every request's constraint bounds are ``(0, 0)``: vLLM 0.33's
    ``_get_constraint_bounds`` answers so before reading the request when
    structured output is enabled inside reasoning or no reasoning parser is
    configured. Asked once per step instead of once per request; False
    where the manager lacks either attribute, so that each request is
    asked."""
    if getattr(manager, "enable_in_reasoning", False):
        return True
    return getattr(manager, "reasoner_cls", True) is None


def _numpy_view(manager: StructuredOutputManager, bitmask: Any) -> np.ndarray:
    """The numpy view of the manager's bitmask tensor, made again only when
    the tensor, its memory or its layout changed (``Tensor.numpy()`` is about
    a microsecond, a tenth of a one-request step). The kept view is checked
    every call: ``_core._is_view_of`` reads the tensor in one C call (a torch
    with DLPack's exchange API); otherwise its data pointer, shape and
    strides are compared (three tensor attributes, about 0.7 us). With the
    same address and layout, the kept view covers exactly the memory a new
    one would, and it keeps the tensor (owner of that memory) alive; vLLM
    allocates the tensor once and never changes it."""
    cached = getattr(manager, "_maskpar_bitmask_view", None)
    if cached is None:
        # The view made with the bitmask when the backend started (`prime`).
        take = getattr(getattr(manager, "backend", None), "_take_first_view", None)
        cached = take(bitmask) if take is not None else None
        if cached is not None:
            manager._maskpar_bitmask_view = cached
    if cached is not None and cached[0] is bitmask:
        same = _is_view_of(cached[2], bitmask)
        if same is None:
            same = cached[1] == (bitmask.data_ptr(), bitmask.shape, bitmask.stride())
        if same:
            return cached[2]
    view = bitmask.numpy()
    manager._maskpar_bitmask_view = _kept_view(bitmask, view)
    return view


def _kept_view(bitmask: Any, view: np.ndarray) -> tuple[Any, Any, np.ndarray]:
    """``view`` of ``bitmask`` as ``_numpy_view`` keeps it: the tensor, its
    layout, the view."""
    return (bitmask, (bitmask.data_ptr(), bitmask.shape, bitmask.stride()), view)


def prime(bitmask: Any, tokenizer: maskpar.Tokenizer) -> tuple[Any, Any, np.ndarray]:
    """Takes, once, the paths a step takes on ``bitmask`` (the manager's
    bitmask tensor, made when the backend starts): the tensor's numpy view
    and layout, a fill of a numpy row, alone and in parallel. Returns the
    view as ``_numpy_view`` keeps it, for the first step to take over.
    ``bitmask`` itself is not written. (A process's first step took these
    paths for the first time: 0.1-0.2 ms, its worst step.)"""
    view = bitmask.numpy()
    _is_view_of(view, bitmask)
    kept = _kept_view(bitmask, view)
    try:
        matcher = maskpar.Matcher(maskpar.compile_regex(tokenizer, "a"))
        scratch = np.full((2, view.shape[1]), -1, dtype=np.int32)
        matcher.fill_next_token_bitmask(scratch, 0)
        maskpar.fill_next_token_bitmask_par([(matcher, 1)], scratch)
    except (ValueError, RuntimeError, MemoryError):  # only a first step's time is at stake
        pass
    return kept


def grammar_bitmask(
    manager: StructuredOutputManager,
    requests: dict[str, Request],
    structured_output_request_ids: list[str],
    scheduled_spec_decode_tokens: dict[str, list[int]],
) -> Any:
    """The manager's ``grammar_bitmask`` for maskpar grammars, or
    ``NotImplemented`` where vLLM's own loop must run (diffusion models,
    grammars of another backend, draft ids below -1 or more drafts than K)."""
    if not structured_output_request_ids:
        return None
    config = manager.vllm_config
    if config.model_config.is_diffusion:
        return NotImplemented
    k = config.num_speculative_tokens
    stride = k + 1
    batch = []
    drafted = False
    for req_id in structured_output_request_ids:
        request = requests[req_id]
        so = request.structured_output_request
        # The compiled grammar itself when it is one (the property checks
        # for a pending compile first: a quarter of this loop's time).
        grammar = getattr(so, "_grammar", None)
        if not isinstance(grammar, MaskparGrammar):
            grammar = so.grammar
        tokens = scheduled_spec_decode_tokens.get(req_id, ())
        if not isinstance(grammar, MaskparGrammar) or len(tokens) > k:
            return NotImplemented
        if tokens:
            if min(tokens) < -1:
                return NotImplemented
            drafted = True
        batch.append((request, grammar, tokens))

    if manager._grammar_bitmask is None:
        manager._grammar_bitmask = manager.backend.allocate_token_bitmask(
            config.scheduler_config.max_num_seqs * stride
        )
    # The numpy view, which vLLM gets back, is also what maskpar checks
    # fastest (numpy's C API; a tensor takes six attribute reads).
    bm = _numpy_view(manager, manager._grammar_bitmask)
    unbounded = _unbounded(manager)
    # A step without drafts in which no request is reasoning: each row is
    # its grammar's mask, or -1 once the grammar has terminated, with none
    # of the lists and blocks below (about 1 us of a 5-6 us one-request
    # step). Where some request may be reasoning, its bounds are asked for
    # once, here, and the path below reads them when one is. (One loop, no
    # comprehension: each of those cost the step about 0.3 us.)
    no_draft_bounds = None
    if not drafted:
        if unbounded:
            rows: list[tuple[maskpar.Matcher, int]] | None = [
                (grammar.matcher, index * stride) for index, (_, grammar, _) in enumerate(batch)
            ]
        else:
            no_draft_bounds = []
            rows = []
            for index, (request, grammar, _) in enumerate(batch):
                gs, cs = bounds = manager._get_constraint_bounds(request, ())
                no_draft_bounds.append(bounds)
                if gs or cs:
                    rows = None
                elif rows is not None:
                    rows.append((grammar.matcher, index * stride))
        if rows is not None:
            maskpar.fill_next_token_bitmask_par(rows, bm)
            for matcher, base in rows:
                if matcher.is_terminated():
                    bm[base] = -1
            return bm[: len(structured_output_request_ids) * stride]
    blocks: list[_Block] = []
    chains: list[tuple[maskpar.Matcher, int, Sequence[int]]] = []
    # Per chain of a request past its reasoning (most requests): what vLLM's
    # rules need once maskpar has written its rows, with no block (each
    # block and its finish cost a one-request step about 1.5 us). Reasoning
    # requests' chains come after these, in `blocks` order.
    fed: list[tuple[MaskparGrammar, int, int, int]] = []
    with_drafts = False
    for index, (request, grammar, tokens) in enumerate(batch):
        base = index * stride
        n = len(tokens)
        # Draft ids are -1 or token ids (checked above), so vLLM's
        # `strip_speculative_padding` is the drafts before the first -1.
        p = tokens.index(-1) if -1 in tokens else n
        if unbounded:
            gs = cs = 0
        elif no_draft_bounds is not None:
            gs, cs = no_draft_bounds[index]
        else:
            gs, cs = manager._get_constraint_bounds(request, tokens[:p])
        if gs == cs == 0:
            # The drafts as they are: maskpar reads a -1 as padding and
            # writes the rows after it as vLLM does (-1), in the parallel
            # call instead of here (writing them here was a sixth of a
            # 16-request step).
            chains.append((grammar.matcher, base, tokens))
            fed.append((grammar, base, n, p))
            with_drafts = with_drafts or n > 0
            continue
        masked = manager._masked_reasoning_ends(request) if cs else ()
        blocks.append(
            _Block(base, n, p, gs, cs, masked, grammar, list(tokens[gs:p]) if gs <= p else None)
        )
    owned = [b for b in blocks if b.drafts is not None] if blocks else blocks
    for block in owned:
        chains.append((block.grammar.matcher, block.base + block.gs, block.drafts))
        with_drafts = with_drafts or bool(block.drafts)

    if with_drafts:
        accepted = maskpar.fill_next_token_bitmask_par_with_draft_tokens(chains, bm)
    else:
        accepted = [0] * len(chains)
        if chains:
            maskpar.fill_next_token_bitmask_par([(m, row) for m, row, _ in chains], bm)
    for (grammar, base, n, p), (_, _, drafts), count in zip(fed, chains, accepted):
        last, terminated = _outcome(grammar, drafts, count)
        if terminated:
            bm[base + last] = -1
        if last < p:  # a refused draft: vLLM repeats row `last`
            _later_rows(bm, base, n, p, last, True)
    if blocks:
        for block, count in zip(owned, accepted[len(fed) :]):
            block.finish(bm, count)
        for block in blocks:
            if block.drafts is None:
                block.finish(bm, 0)

    # A new view each step: the kept one never leaves this module.
    return bm[: len(structured_output_request_ids) * stride]
