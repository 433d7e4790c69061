"""A new grammar's first masks, computed where the grammar is compiled.

maskpar computes a grammar's masks on first use and keeps them, where
xgrammar precomputes its masks while compiling. vLLM and SGLang compile a
request's grammar on a thread pool of their own, away from the step that
waits on the batch's bitmask, so the first mask (the coldest of a request:
its start state meets every first lexeme and parser walk of the grammar) is
best paid there too. It is filled twice: the first fill fills the grammar's
lexer caches, the second keeps the row in the grammar's fill memo (a state's
row is kept the second time it is seen), so the step's own fill of that
state is a copy (a fresh schema's first step, with 2 ms idle before it on
the 2-CPU machine, two runs: median 133-147 us without these fills, 88-103
us after one, 65-71 us after two). Nothing about the matcher changes: a fill
never moves its state.

For a JSON schema or a structural tag the adapters go further
(``warm_up``): they walk a fork of the new matcher along a text like the ones
the model will write (written from the request alone by ``_sample``: an
instance of the schema, or each of the tags once; tokenized by the
framework's tokenizer), filling the mask at every token, twice, so that the
states the request's steps will meet have their lexer entries, parser walks
and memo rows already. Masks are the same either way; only where they are
computed moves. On fresh dev-split schemas (2-CPU machine, 2 ms idle before
each step, step mean as a ratio of llguidance's): one request without
drafts 0.71-0.76x -> 0.33-0.36x, with 4 drafts 0.55-0.59x -> 0.34-0.36x,
16 requests with 4 drafts 0.43-0.54x -> 0.26-0.29x. A walk costs a few
milliseconds of the compile pool's time (xgrammar precomputes for tens to
hundreds of milliseconds there).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import maskpar

from ._sample import json_sample, stag_sample

_scratch = threading.local()

# Tokens of the sample text walked at most (a sample is at most
# ``_sample.MAX_CHARS`` characters).
MAX_WARM_TOKENS = 512


def _scratch_row(words: int) -> np.ndarray:
    """This thread's scratch row of ``words`` words (the compile pool's threads
    each keep one)."""
    row = getattr(_scratch, "row", None)
    if row is None or row.shape[1] != words:
        row = np.empty((1, words), dtype=np.int32)
        _scratch.row = row
    return row


def fill_first_mask(matcher: maskpar.Matcher) -> None:
    """Fills ``matcher``'s next-token mask twice into a scratch row of this
    thread (the compile pool's threads each keep one), for its caches only:
    ``warm_up`` along no tokens. An error (a grammar past a parser bound on
    its first fill) is left for the step's own fill to raise, where the
    framework handles it per request: raised here, it would escape the
    framework's compile path."""
    warm_up(matcher, ())


def warm_up(matcher: maskpar.Matcher, token_ids: Sequence[int], passes: int = 2) -> int:
    """Walks forks of ``matcher`` along ``token_ids`` (at most
    ``MAX_WARM_TOKENS``), filling the mask before each token, ``passes``
    times: the first builds the states' caches, the second keeps rows in the
    grammar's fill memo. A walk stops at the first token the grammar refuses,
    or at an error (left for the request's own steps to raise, as in
    ``fill_first_mask``). ``matcher`` itself is not changed. Returns the
    number of tokens the last walk consumed."""
    row = _scratch_row(maskpar.bitmask_width(matcher.vocab_size))
    walked = 0
    try:
        for _ in range(passes):
            fork, walked = matcher.fork(), 0
            fork.fill_next_token_bitmask(row, 0)
            for t in token_ids[:MAX_WARM_TOKENS]:
                if not fork.consume_token(t):
                    break
                walked += 1
                fork.fill_next_token_bitmask(row, 0)
    except (ValueError, MemoryError):
        pass
    return walked


def warm_json(matcher: maskpar.Matcher, schema: Any, encode: Callable[[str], Sequence[int]]) -> int:
    """``warm_up`` along a sample instance of ``schema`` (``_sample``),
    tokenized by ``encode``; along no tokens (the first mask only) when there
    is no sample or ``encode`` fails (a framework tokenizer raising is not
    the request's error)."""
    return _warm_text(matcher, json_sample(schema), encode)


def _warm_text(
    matcher: maskpar.Matcher, text: str | None, encode: Callable[[str], Sequence[int]]
) -> int:
    ids: Sequence[int] = ()
    if text is not None:
        try:
            ids = list(encode(text))
        except Exception:  # noqa: BLE001 - any tokenizer failure only skips the walk
            pass
    return warm_up(matcher, ids)


def encoder(tokenizer: Any) -> Callable[[str], Sequence[int]]:
    """A framework tokenizer's ``encode`` without special tokens (a leading
    BOS would stop the walk at once)."""

    def encode(text: str) -> Sequence[int]:
        try:
            return tokenizer.encode(text, add_special_tokens=False)
        except TypeError:  # an encode without that keyword
            return tokenizer.encode(text)

    return encode


def warm_stag(matcher: maskpar.Matcher, spec: Any, encode: Callable[[str], Sequence[int]]) -> int:
    """``warm_up`` along a text holding each tag of the structural tag
    ``spec`` once (``_sample.stag_sample``), as ``warm_json`` does."""
    return _warm_text(matcher, stag_sample(spec), encode)
