"""The lexer-only cache shared by a vocabulary's grammars (rust/cfg/sharedlex.rs):
bounded, reported by ``Tokenizer.shared_cache_stats()``, and, once full, making
room rather than sharing nothing more. Its entries are caches, so masks must
not change when they are evicted: the oracle tests below (MaskBench labels from
two independent validators, regex oracles over the whole vocabulary) and the
thread tests run again in a process whose bound is small enough that room is
made all the time.
"""

from __future__ import annotations

import os
import subprocess
import sys

from shared_cache_check import ENV, SMALL

import maskpar
from conftest import BYTES, EOS, TESTS

DEFAULT_LIMIT = 512 << 20
ORACLE_TESTS = [
    "test_maskbench.py",
    "test_alike_entries.py",
    "test_divergent_entries.py",
    # Threads filling over shared grammars match a one-thread replay: room is
    # made while other threads read the cache.
    "test_concurrency.py",
    "test_parallel.py",
]


def test_stats_report_what_is_held_and_the_bound() -> None:
    tok = maskpar.Tokenizer.from_vocab(BYTES, [EOS])
    stats = tok.shared_cache_stats()
    assert list(stats) == ["bytes", "limit", "entries", "evictions"]
    assert stats["limit"] == int(os.environ.get(ENV, DEFAULT_LIMIT))
    assert 0 <= stats["bytes"] <= stats["limit"]
    before = stats["entries"]
    g = maskpar.compile_json_schema(tok, {"type": "string", "pattern": "^q[0-9]{3,9}z$"})
    m = maskpar.Matcher(g)
    bitmask = maskpar.allocate_token_bitmask(1, tok.vocab_size)
    for t in b'"q12':
        m.fill_next_token_bitmask(bitmask)
        assert m.consume_token(t)
    assert tok.shared_cache_stats()["entries"] > before


def test_masks_stay_exact_while_room_is_made() -> None:
    # The maskpar this process imported, whatever PYTHONPATH said.
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(maskpar.__file__)))
    path = os.pathsep.join([package_root, *filter(None, [os.environ.get("PYTHONPATH")])])
    env = {**os.environ, ENV: str(SMALL), "PYTHONPATH": path}
    # Last, in the same process: room was made and the bound held
    # (shared_cache_check.py, not collected on its own).
    this = "shared_cache_check.py"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", *ORACLE_TESTS, this],
        cwd=TESTS,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "passed" in out and "failed" not in out, out[-4000:]
