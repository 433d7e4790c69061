"""Parallel fills: bit-identical to the sequential API for any thread count,
exact draft-chain semantics, matchers unchanged, zero-copy buffers, GIL
released while masks are computed."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import maskpar
from conftest import new_bitmask

TOKENS = [b"a", b"b", b"ab", b"ba", b"c", b"1", b"12", b"<eos>", b"<pad>"]
EOS = 7
VOCAB = 70  # padded: ids 9..69 have no bytes
SENTINEL = 0x5A5A5A5A
PATTERNS = ["(ab|ba)+c?", "[ab]*c1+", "a(b|12)*c", "(?:a|b|1)*"]


@pytest.fixture(scope="module")
def grammars():
    tok = maskpar.Tokenizer.from_vocab(TOKENS, [EOS], [8], vocab_size=VOCAB)
    return [maskpar.compile_regex(tok, p) for p in PATTERNS]


def sequential_rows(m: maskpar.Matcher, drafts, words):
    """The reference: fill, consume, ..., on a fork; -1 after a rejection."""
    f = m.fork()
    rows = np.full((len(drafts) + 1, words), -1, dtype=np.int32)
    accepted = len(drafts)
    for i in range(len(drafts) + 1):
        f.fill_next_token_bitmask(rows, i)
        if i < len(drafts) and not f.consume_token(drafts[i]):
            accepted = i
            break
    return rows, accepted


# Each drawn request taken once or eight times over (fresh matchers, the same
# history): a call of fewer than 48 rows runs on the calling thread alone
# (rust/batch.rs, ALONE_BELOW_ROWS), eight copies bring the pool's threads in.
copies = st.sampled_from([1, 8])

request = st.tuples(
    st.integers(0, len(PATTERNS) - 1),
    st.lists(st.integers(0, VOCAB - 1), max_size=5),  # history to consume
    st.lists(st.integers(0, VOCAB - 1), max_size=6),  # drafts
    st.integers(0, 2),  # gap before this request's rows
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    reqs=st.lists(request, max_size=8),
    n=copies,
    threads=st.sampled_from([1, 2, 3, 8]),
    use_torch=st.booleans(),
)
def test_draft_fill_equals_sequential(grammars, reqs, n, threads, use_torch):
    words = (VOCAB + 31) // 32
    items, row = [], 0
    for gi, hist, drafts, gap in reqs * n:
        m = maskpar.Matcher(grammars[gi])
        m.consume_tokens(hist[: m.validate_tokens(hist)])
        row += gap
        items.append((m, row, drafts))
        row += len(drafts) + 1
    total = row + 1
    bm = np.full((total, words), SENTINEL, dtype=np.int32)
    before = [(m.num_consumed, m.is_accepting(), m.forced_tokens()) for m, _, _ in items]
    target = bm
    if use_torch:
        torch = pytest.importorskip("torch")
        target = torch.from_numpy(bm)  # shares memory with bm
    got = maskpar.fill_next_token_bitmask_par_with_draft_tokens(items, target, num_threads=threads)
    covered = np.zeros(total, dtype=bool)
    for (m, r, drafts), acc in zip(items, got):
        rows, want_acc = sequential_rows(m, drafts, words)
        assert acc == want_acc
        assert np.array_equal(bm[r : r + len(drafts) + 1], rows)
        covered[r : r + len(drafts) + 1] = True
    assert (bm[~covered] == SENTINEL).all()  # rows of no request are untouched
    after = [(m.num_consumed, m.is_accepting(), m.forced_tokens()) for m, _, _ in items]
    assert after == before


@settings(max_examples=30, deadline=None)
@given(
    reqs=st.lists(
        st.tuples(st.integers(0, 3), st.lists(st.integers(0, 8), max_size=4)), max_size=10
    ),
    n=copies,
    threads=st.sampled_from([1, 2, 4]),
)
def test_row_fill_equals_single_fills(grammars, reqs, n, threads):
    words = (VOCAB + 31) // 32
    ms = []
    for gi, hist in reqs * n:
        m = maskpar.Matcher(grammars[gi])
        m.consume_tokens(hist[: m.validate_tokens(hist)])
        ms.append(m)
    rows = list(range(len(ms)))[::-1]  # any row order
    bm = new_bitmask(len(ms), VOCAB, fill=SENTINEL)
    maskpar.fill_next_token_bitmask_par(list(zip(ms, rows)), bm, num_threads=threads)
    for m, r in zip(ms, rows):
        one = new_bitmask(1, VOCAB)
        m.fill_next_token_bitmask(one)
        assert np.array_equal(bm[r], one[0])
    assert words == bm.shape[1]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    reqs=st.lists(
        st.tuples(
            st.integers(0, len(PATTERNS) - 1),
            st.lists(st.integers(0, VOCAB - 1), max_size=4),  # drafts before the padding
            st.lists(st.integers(-1, VOCAB - 1), max_size=3),  # after the first -1
        ),
        max_size=6,
    ),
    n=copies,
    threads=st.sampled_from([1, 2, 4]),
)
def test_padding_drafts_end_the_chain_with_all_ones_rows(grammars, reqs, n, threads):
    """vLLM's -1 padding: the chain of the drafts before the first -1 (the
    sequential reference), then -1 rows up to ``len(drafts)``; ids after the
    first -1 are not read."""
    words = (VOCAB + 31) // 32
    reqs = reqs * n
    items, row = [], 0
    for gi, real, tail in reqs:
        items.append((maskpar.Matcher(grammars[gi]), row, [*real, -1, *tail]))
        row += len(real) + 2 + len(tail)
    bm = np.full((row + 1, words), SENTINEL, dtype=np.int32)
    got = maskpar.fill_next_token_bitmask_par_with_draft_tokens(items, bm, num_threads=threads)
    for (m, r, drafts), acc, (_, real, _) in zip(items, got, reqs):
        rows, want_acc = sequential_rows(m, real, words)
        assert acc == want_acc
        assert np.array_equal(bm[r : r + len(real) + 1], rows)
        assert (bm[r + len(real) + 1 : r + len(drafts) + 1] == -1).all()
        assert m.num_consumed == 0
    assert (bm[row] == SENTINEL).all()


def test_negative_drafts_other_than_padding_are_refused(grammars):
    m = maskpar.Matcher(grammars[0])
    bm = new_bitmask(4, VOCAB, fill=SENTINEL)
    with pytest.raises(ValueError, match=r"item 0: draft token id -2 is out of range"):
        maskpar.fill_next_token_bitmask_par_with_draft_tokens([(m, 0, [2, -2, -1])], bm)
    assert (bm == SENTINEL).all()
    # Padding rows count against the bitmask's rows like drafts do.
    with pytest.raises(ValueError):
        maskpar.fill_next_token_bitmask_par_with_draft_tokens([(m, 1, [2, -1, -1])], bm)
    assert (bm == SENTINEL).all()


def test_rejected_drafts_and_eos_rows(grammars):
    m = maskpar.Matcher(grammars[0])  # (ab|ba)+c?
    bm = new_bitmask(6, VOCAB, fill=SENTINEL)
    # "ab", "c", EOS accepted; then "a" after EOS is rejected -> one -1 row.
    acc = maskpar.fill_next_token_bitmask_par_with_draft_tokens([(m, 0, [2, 4, EOS, 0, 1])], bm)
    assert acc == [3]
    eos_only = new_bitmask(1, VOCAB)
    eos_only[0, EOS // 32] = 1 << (EOS % 32)
    assert np.array_equal(bm[3], eos_only[0])  # after EOS: EOS only
    assert (bm[4:] == -1).all()  # after the rejected draft: all ones, written
    assert m.num_consumed == 0


def test_empty_draft_lists_and_empty_batch(grammars):
    m = maskpar.Matcher(grammars[1])
    bm = new_bitmask(2, VOCAB, fill=SENTINEL)
    assert maskpar.fill_next_token_bitmask_par_with_draft_tokens([(m, 1, [])], bm) == [0]
    assert (bm[0] == SENTINEL).all() and not (bm[1] == SENTINEL).all()
    assert maskpar.fill_next_token_bitmask_par_with_draft_tokens([], bm) == []


def test_zero_copy_into_callers_buffers(grammars):
    torch = pytest.importorskip("torch")
    m = maskpar.Matcher(grammars[0])
    t = maskpar.allocate_token_bitmask(3, VOCAB)
    ptr = t.data_ptr()
    maskpar.fill_next_token_bitmask_par([(m, 1)], t)
    assert t.data_ptr() == ptr
    assert t[1].tolist() != [-1] * t.shape[1] and t[0].tolist() == [-1] * t.shape[1]
    a = np.full((2, 3), -1, dtype=np.int32)
    view = a[1:]  # a contiguous view: writes must land in `a`
    m.fill_next_token_bitmask(view, 0)
    assert (a[1] != -1).any() and (a[0] == -1).all()
    if torch.cuda.is_available():
        pinned = torch.full((1, 3), -1, dtype=torch.int32).pin_memory()
        m.fill_next_token_bitmask(pinned)
        assert pinned[0].tolist() == a[1].tolist()


def test_thread_count_settings():
    n = maskpar.get_num_threads()
    try:
        maskpar.set_num_threads(3)
        assert maskpar.get_num_threads() == 3
        with pytest.raises(ValueError):
            maskpar.set_num_threads(0)
        assert maskpar.get_num_threads() == 3
    finally:
        maskpar.set_num_threads(n)


POOL_THREADS_SCRIPT = """
import os, time, maskpar

def pool_threads():
    names = []
    for t in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{t}/comm") as f:
            names.append(f.read().strip())
    return sum(n.startswith("maskpar-") for n in names)

def settled(n):  # a thread names itself once it runs
    for _ in range(300):
        if pool_threads() >= n:
            break
        time.sleep(0.01)
    return pool_threads()

before = pool_threads()
maskpar.Tokenizer([b"a", b"b"], eos_token_ids=[1])
n = maskpar.get_num_threads()
with_default = settled(n)
maskpar.set_num_threads(n + 2)
with_both = settled(2 * n + 2)
print(before, with_default - n, with_both - with_default - (n + 2))
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux's /proc")
def test_thread_pools_start_off_the_request_path():
    """No fill starts threads: ``set_num_threads`` starts its pool, and a
    ``Tokenizer`` the default one (its first fill would otherwise pay for
    starting them, 0.2 ms)."""
    out = subprocess.run(
        [sys.executable, "-c", POOL_THREADS_SCRIPT], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["0", "0", "0"]


def test_gil_is_released_during_fills(llama3):
    """Another Python thread keeps running while a long fill is in progress:
    with the GIL held it could run at most one switch interval (5 ms) after
    the call starts, so we look for its ticks well inside the call."""
    import time

    _, tok = llama3
    reqs = []
    for b in range(48):
        # A fresh grammar per request, so every mask is a cold trie walk.
        g = maskpar.compile_regex(tok, f"(?s:.*)x{{{b}}}|[a-z ]*")
        reqs.append((maskpar.Matcher(g), b * 9, [64] * 8))
    bm = maskpar.allocate_token_bitmask(48 * 9, tok.vocab_size)
    ticks = []
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            ticks.append(time.perf_counter())

    th = threading.Thread(target=spin)
    th.start()
    t0 = time.perf_counter()
    maskpar.fill_next_token_bitmask_par_with_draft_tokens(reqs, bm, num_threads=1)
    t1 = time.perf_counter()
    stop.set()
    th.join()
    assert t1 - t0 > 0.03, "the fill was too quick to observe"
    late = [t for t in ticks if t0 + 0.02 < t < t1]
    assert late, "no other Python thread ran during the fill"
