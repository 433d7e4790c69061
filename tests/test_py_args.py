"""Argument conversion at the Python boundary (issue 22): every entry point
answers any int with a result or a ValueError naming the argument and its
range (never pyo3's OverflowError), any non-int with a TypeError; unaligned
bitmask views, oversized results and long request lists are refused or
handled without a panic, before anything is written or changed."""

from __future__ import annotations

import time

import numpy as np
import pytest

import maskpar
from conftest import BYTES, EOS, new_bitmask
from maskpar import _core

A = ord("a")
VOCAB = len(BYTES)
WIDTH = (VOCAB + 31) // 32
SENTINEL = 0x11223344

# Ints outside i64 (and so outside u32 and usize) on both sides, and the
# i64 extremes themselves, which must give the same answers.
HUGE = [2**63, 2**64, 2**100, 2**63 - 1]
HUGE_NEGATIVE = [-(2**63) - 1, -(2**64), -(2**63)]
OUT_OF_I64 = HUGE + HUGE_NEGATIVE


@pytest.fixture(scope="module")
def tok():
    return maskpar.Tokenizer.from_vocab(BYTES, [EOS])


@pytest.fixture()
def m(tok):
    """A matcher for [ab]*c that has consumed one "a"."""
    matcher = maskpar.Matcher(maskpar.compile_regex(tok, "[ab]*c"))
    assert matcher.consume_token(A)
    return matcher


def sentinel_bitmask(rows: int) -> np.ndarray:
    return new_bitmask(rows, VOCAB, SENTINEL)


def untouched(bm: np.ndarray) -> bool:
    return bool((bm == SENTINEL).all())


class Index:
    """Not an int, but an int through ``__index__`` (as numpy scalars are)."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value


# --------------------------------------------------------------------------
# Ints outside i64: ValueError naming the argument and its range.


@pytest.mark.parametrize("bad", OUT_OF_I64 + [Index(2**64), Index(-(2**70))])
def test_token_ids_out_of_i64(m, tok, bad):
    token_range = rf"token id -?\d+ is out of range \[0, {VOCAB}\)"
    for call in (
        lambda: m.consume_token(bad),
        lambda: m.consume_tokens([A, bad]),
        lambda: m.validate_tokens([A, bad]),
        lambda: tok.token_bytes(bad),
        lambda: tok.decode_bytes([A, bad]),
    ):
        with pytest.raises(ValueError, match=token_range):
            call()
    assert m.num_consumed == 1


@pytest.mark.parametrize("bad", OUT_OF_I64)
def test_rollback_out_of_i64(m, bad):
    msg = "cannot roll back" if bad > 0 else "num_tokens must be >= 0"
    with pytest.raises(ValueError, match=msg):
        m.rollback(bad)
    assert m.num_consumed == 1


@pytest.mark.parametrize("bad", OUT_OF_I64)
def test_fill_index_out_of_i64(m, bad):
    bm = sentinel_bitmask(2)
    with pytest.raises(ValueError, match=r"index -?\d+ is out of range for a bitmask of 2 rows"):
        m.fill_next_token_bitmask(bm, bad)
    assert untouched(bm)


@pytest.mark.parametrize("bad", OUT_OF_I64)
def test_batch_rows_out_of_i64(m, bad):
    msg = "row" if bad > 0 else r"item 0: row must be >= 0"
    calls = [
        lambda bm: maskpar.fill_next_token_bitmask_par([(m, bad)], bm),
        lambda bm: maskpar.fill_next_token_bitmask_par_with_draft_tokens([(m, bad, [A])], bm),
        lambda bm: maskpar.fill_next_token_bitmask_par_with_draft_tree([(m, bad, ([A], [-1]))], bm),
    ]
    for call in calls:
        bm = sentinel_bitmask(2)
        with pytest.raises(ValueError, match=msg):
            call(bm)
        assert untouched(bm)
    assert m.num_consumed == 1


@pytest.mark.parametrize("bad", OUT_OF_I64)
def test_batch_token_sequences_out_of_i64(m, bad):
    par = maskpar.fill_next_token_bitmask_par_with_draft_tree
    calls = {
        "draft": lambda bm: maskpar.fill_next_token_bitmask_par_with_draft_tokens(
            [(m, 0, [A, bad])], bm
        ),
        "tree tokens": lambda bm: par([(m, 0, ([0, bad], [-1, 0]))], bm),
        "tree parents": lambda bm: par([(m, 0, ([0, A], [-1, bad]))], bm),
        "EAGLE draft_tokens": lambda bm: par([(m, 0, ([1, -1], [-1, -1], [0, bad]))], bm),
        "EAGLE retrieve_next_token": lambda bm: par([(m, 0, ([bad, -1], [-1, -1], [0, A]))], bm),
        "EAGLE retrieve_next_sibling": lambda bm: par([(m, 0, ([1, -1], [-1, bad], [0, A]))], bm),
    }
    for name, call in calls.items():
        bm = sentinel_bitmask(3)
        with pytest.raises(ValueError, match="item 0: "):
            call(bm)
        assert untouched(bm), name
    with pytest.raises(ValueError, match=rf"draft token id -?\d+ is out of range \[0, {VOCAB}\)"):
        maskpar.grammar_aware_drafts([(m, [A, bad])], 4)
    assert m.num_consumed == 1


def test_batch_sequences_from_numpy_out_of_i64(m):
    """Sequences converted through ``tolist()`` take the same path: a uint64
    array holding 2**64 - 1 is refused like the Python int."""
    bm = sentinel_bitmask(3)
    drafts = np.array([A, 2**64 - 1], dtype=np.uint64)
    with pytest.raises(ValueError, match=r"draft token id \d+ is out of range"):
        maskpar.fill_next_token_bitmask_par_with_draft_tokens([(m, 0, drafts)], bm)
    assert untouched(bm)


@pytest.mark.parametrize("bad", OUT_OF_I64)
def test_max_drafts_out_of_i64(m, bad):
    if bad > 0:  # a huge cap is just a cap
        assert maskpar.grammar_aware_drafts([(m, [A])], bad) == [[A]]
    else:
        with pytest.raises(ValueError, match=r"max_drafts must be >= 0, got -\d+"):
            maskpar.grammar_aware_drafts([(m, [A])], bad)
    assert m.num_consumed == 1


@pytest.mark.parametrize("bad", OUT_OF_I64 + [0, -1, 1025])
def test_num_threads_out_of_range(m, bad):
    before = maskpar.get_num_threads()
    in_range = r"num_threads must be in \[1, 1024\], got -?\d+"
    with pytest.raises(ValueError, match=in_range):
        maskpar.set_num_threads(bad)
    assert maskpar.get_num_threads() == before
    bm = sentinel_bitmask(1)
    with pytest.raises(ValueError, match=in_range):
        maskpar.fill_next_token_bitmask_par([(m, 0)], bm, num_threads=bad)
    assert untouched(bm)
    with pytest.raises(ValueError, match=in_range):
        maskpar.grammar_aware_drafts([(m, [A])], 2, num_threads=bad)


@pytest.mark.parametrize("bad", OUT_OF_I64)
def test_tokenizer_ids_out_of_i64(bad):
    tokens = [b"a", b"b"]
    msg = r"id -?\d+ is out of range \(the vocabulary has 2 tokens\)"
    with pytest.raises(ValueError, match="EOS token " + msg):
        maskpar.Tokenizer.from_vocab(tokens, [bad])
    with pytest.raises(ValueError, match="EOS token " + msg):
        maskpar.Tokenizer(tokens, [0, bad])
    with pytest.raises(ValueError, match="special token " + msg):
        maskpar.Tokenizer.from_vocab(tokens, [0], special_token_ids=[bad])


@pytest.mark.parametrize("bad", OUT_OF_I64 + [-1])
def test_tokenizer_vocab_size_out_of_range(bad):
    msg = "exceeds the supported maximum" if bad > 0 else r"vocab_size must be >= 0, got -\d+"
    with pytest.raises(ValueError, match=msg):
        maskpar.Tokenizer.from_vocab([b"a", b"b"], [0], vocab_size=bad)


@pytest.mark.parametrize("bad", OUT_OF_I64)
def test_apply_indices_out_of_i64(bad):
    logits = np.zeros((2, 64), dtype=np.int32)
    bm = np.zeros((2, 2), dtype=np.int32)
    with pytest.raises(ValueError, match=r"indices must be in \[0, 2\), got -?\d+"):
        _core._apply_token_bitmask_cpu(logits, bm, [0, bad], -0x800000)
    assert not logits.any()


def test_in_range_ints_of_any_int_type_still_work(m, tok):
    """numpy scalars, ``__index__`` objects and bools are ints."""
    assert m.validate_tokens([np.int64(A), np.uint32(ord("b")), Index(ord("c"))]) == 3
    assert tok.token_bytes(np.uint64(A)) == b"a"
    assert tok.decode_bytes([Index(A), np.int8(ord("b"))]) == b"ab"
    bm = new_bitmask(2, VOCAB)
    m.fill_next_token_bitmask(bm, np.int64(1))
    m.fill_next_token_bitmask(bm, True)
    assert bm[0].sum() == 0 and bm[1].any()
    assert maskpar.grammar_aware_drafts([(m, [A])], np.uint64(2**64 - 1)) == [[A]]
    m.rollback(np.int32(1))
    assert m.num_consumed == 0


@pytest.mark.parametrize("bad", ["1", 1.0, None, b"1"])
def test_non_ints_are_type_errors(m, tok, bad):
    for call in (
        lambda: m.consume_token(bad),
        lambda: m.consume_tokens([A, bad]),
        lambda: m.rollback(bad),
        lambda: m.fill_next_token_bitmask(new_bitmask(1, VOCAB), bad),
        lambda: tok.token_bytes(bad),
        lambda: tok.decode_bytes([bad]),
        lambda: maskpar.set_num_threads(bad),
        lambda: maskpar.grammar_aware_drafts([(m, [A])], bad),
        lambda: maskpar.grammar_aware_drafts([(m, [A, bad])], 2),
        lambda: maskpar.fill_next_token_bitmask_par([(m, bad)], new_bitmask(1, VOCAB)),
        lambda: maskpar.Tokenizer.from_vocab([b"a"], [bad]),
    ) + ((lambda: maskpar.Tokenizer.from_vocab([b"a"], [0], vocab_size=bad)),) * (bad is not None):
        with pytest.raises(TypeError):
            call()
    assert m.num_consumed == 1


def test_fill_index_default_is_zero_in_signature():
    assert "index=0" in (maskpar.Matcher.fill_next_token_bitmask.__text_signature__ or "")


# --------------------------------------------------------------------------
# Unaligned bitmask views.


def unaligned_numpy(rows: int) -> np.ndarray:
    raw = np.zeros(4 * rows * WIDTH + 1, np.uint8)[1:]
    bm = raw.view(np.int32).reshape(rows, WIDTH)
    bm[:] = SENTINEL
    assert not bm.flags.aligned
    return bm


def test_unaligned_numpy_bitmask_is_a_value_error(m):
    for fill in (
        lambda bm: m.fill_next_token_bitmask(bm),
        lambda bm: maskpar.fill_next_token_bitmask_par([(m, 0)], bm),
        lambda bm: maskpar.fill_next_token_bitmask_par_with_draft_tokens([(m, 0, [A])], bm),
        lambda bm: maskpar.fill_next_token_bitmask_par_with_draft_tree([(m, 0, ([A], [-1]))], bm),
    ):
        bm = unaligned_numpy(2)
        with pytest.raises(ValueError, match="aligned"):
            fill(bm)
        assert untouched(bm)


def test_unaligned_empty_numpy_bitmask_is_fine():
    """Zero words need no alignment: an empty call on an empty view is a no-op."""
    raw = np.zeros(1, np.uint8)[1:]
    maskpar.fill_next_token_bitmask_par([], raw.view(np.int32).reshape(0, WIDTH))


def test_unaligned_torch_bitmask_is_a_value_error(m):
    torch = pytest.importorskip("torch")
    # torch refuses unaligned dtype views of its own tensors, but a tensor
    # over a caller's buffer at an odd byte offset is unaligned.
    buf = bytearray(4 * 2 * WIDTH + 1)
    bm = torch.frombuffer(buf, dtype=torch.int32, offset=1, count=2 * WIDTH).reshape(2, WIDTH)
    assert bm.data_ptr() % 4 != 0
    for fill in (
        lambda: m.fill_next_token_bitmask(bm),
        lambda: maskpar.fill_next_token_bitmask_par([(m, 0)], bm),
    ):
        with pytest.raises(ValueError, match="aligned"):
            fill()
    assert not any(buf)


def test_unaligned_logits_for_apply_are_a_value_error():
    raw = np.zeros(4 * 64 + 1, np.uint8)[1:]
    logits = raw.view(np.int32).reshape(1, 64)
    with pytest.raises(ValueError, match="aligned"):
        _core._apply_token_bitmask_cpu(logits, np.zeros((1, 2), np.int32), None, -0x800000)
    assert not raw.any()


# --------------------------------------------------------------------------
# decode_bytes: a bounded result, counted before anything is built.


def test_decode_bytes_is_bounded_before_building():
    big = maskpar.Tokenizer.from_vocab([b"<e>", b"x" * 60_000], [0])
    start = time.perf_counter()
    with pytest.raises(ValueError, match="more than 1073741824 bytes"):
        big.decode_bytes([1] * 17_900)  # 1.074 GB: just past 1 GiB
    # Refused from the lengths alone: nothing of a gigabyte was copied.
    assert time.perf_counter() - start < 0.5


def test_decode_bytes_content_below_the_bound():
    t = maskpar.Tokenizer.from_vocab([b"<e>", b"xy" * 30_000, b"z"], [0])
    out = t.decode_bytes([1, 2, 0, 2, 1])
    assert out == b"xy" * 30_000 + b"z<e>z" + b"xy" * 30_000
    assert t.decode_bytes([]) == b""
    assert t.token_bytes(1) == b"xy" * 30_000


# --------------------------------------------------------------------------
# Many matchers in one call: the duplicate check is linear.


def test_duplicate_matcher_check_is_linear(tok):
    g = maskpar.compile_regex(tok, "[ab]*c")
    n = 400_000
    items = [(maskpar.Matcher(g), i) for i in range(n)]
    items.append((items[0][0], n))  # found only after every other item is read
    bm = new_bitmask(1, VOCAB)  # never reached: the duplicate is refused first
    start = time.perf_counter()
    with pytest.raises(ValueError, match=f"item {n}: the same Matcher appears twice"):
        maskpar.fill_next_token_bitmask_par(items, bm)
    # Linear: ~0.2 s; the old quadratic scan took 3.5 s at half this size.
    assert time.perf_counter() - start < 2.0


class _Items(list):
    """A list whose own ``__iter__`` yields what the call must read (and
    counts how often it is asked)."""

    def __init__(self, real: list) -> None:
        super().__init__()
        self.real = real
        self.iterations = 0

    def __iter__(self):
        self.iterations += 1
        return iter(self.real)


class _Boom(list):
    def __iter__(self):
        raise RuntimeError("boom")


def test_fill_items_as_any_iterable(m, tok):
    """Plain lists and tuples are read in place; any other iterable (a
    generator, a list subclass with its own ``__iter__``) through its
    iterator, exactly once; its exception reaches the caller as it is."""
    want = new_bitmask(1, VOCAB)
    m.fill_next_token_bitmask(want, 0)
    other = maskpar.Matcher(maskpar.compile_regex(tok, "[ab]*c"))
    assert other.consume_token(ord("c"))  # its row (EOS only) is not m's
    for items in ([(m, 0)], ((m, 0),), (it for it in [(m, 0)])):
        bm = sentinel_bitmask(1)
        maskpar.fill_next_token_bitmask_par(items, bm)
        assert np.array_equal(bm, want)
    sub = _Items([(m, 0)])
    sub.append((other, 0))  # what a plain read of the list would see
    bm = sentinel_bitmask(1)
    maskpar.fill_next_token_bitmask_par(sub, bm)
    assert np.array_equal(bm, want)
    assert sub.iterations == 1
    bm = sentinel_bitmask(1)
    with pytest.raises(RuntimeError, match="boom"):
        maskpar.fill_next_token_bitmask_par(_Boom([(m, 0)]), bm)
    assert untouched(bm)
