"""Run by test_shared_cache.py in a process whose shared lexer cache has the
small bound below, after the oracle tests: room was made, and the bound held.
Not collected on its own (no ``test_`` prefix)."""

from __future__ import annotations

import os

ENV = "MASKPAR_SHARED_LEX_CACHE_BYTES"
# A few dozen Llama-3 entries: the MaskBench sample alone needs tens of MiB.
SMALL = 256 << 10


def test_a_small_bound_holds_and_room_is_made(llama3) -> None:
    assert os.environ.get(ENV) == str(SMALL), "run it through test_shared_cache.py"
    _, tok = llama3
    stats = tok.shared_cache_stats()
    assert stats["limit"] == SMALL
    assert stats["bytes"] <= SMALL
    assert stats["evictions"] > 0, stats
