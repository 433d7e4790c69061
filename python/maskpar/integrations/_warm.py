"""The first mask of a new grammar, computed where the grammar is compiled.

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
"""

from __future__ import annotations

import threading

import numpy as np

import maskpar

_scratch = threading.local()


def fill_first_mask(matcher: maskpar.Matcher) -> None:
    """Fills ``matcher``'s next-token mask twice into a scratch row of this
    thread (the compile pool's threads each keep one), for its caches only. An
    error (a grammar past a parser bound on its first fill) is left for the
    step's own fill to raise, where the framework handles it per request:
    raised here, it would escape the framework's compile path."""
    words = maskpar.bitmask_width(matcher.vocab_size)
    row = getattr(_scratch, "row", None)
    if row is None or row.shape[1] != words:
        row = np.empty((1, words), dtype=np.int32)
        _scratch.row = row
    try:
        for _ in range(2):
            matcher.fill_next_token_bitmask(row, 0)
    except (ValueError, MemoryError):
        pass
