"""Bad input raises a clear Python exception before anything is written or
changed; nothing a caller sends crashes or hangs the process."""

from __future__ import annotations

import json

import numpy as np
import pytest

import maskpar
from conftest import new_bitmask

TOKENS = [b"a", b"b", b"ab", b"<eos>"]
VOCAB = 40
SENTINEL = 0x11223344


@pytest.fixture(scope="module")
def g():
    tok = maskpar.Tokenizer.from_vocab(TOKENS, [3], vocab_size=VOCAB)
    return maskpar.compile_regex(tok, "a+b")


@pytest.mark.parametrize(
    "pattern,msg",
    [
        ("a(", "invalid regex"),
        ("[z-a]", "invalid regex"),
        ("[^\\x00-\\x{10FFFF}]", "matches no string"),
        ("\\b\\w+\\b", "[Uu]nicode word boundar"),
    ],
)
def test_invalid_regex(g, pattern, msg):
    tok = maskpar.Tokenizer.from_vocab(TOKENS, [3])
    with pytest.raises(ValueError, match=msg):
        maskpar.compile_regex(tok, pattern)


def test_regex_size_is_bounded():
    tok = maskpar.Tokenizer.from_vocab(TOKENS, [3])
    # With work to spare, the automaton's size bound refuses it...
    with pytest.raises(ValueError, match="64 MiB|size limit"):
        maskpar.compile_regex(tok, "[ab]*a[ab]{24}", max_compile_steps=10**12)
    # ...and so does the default work budget, or a tight one (a server's
    # 100 ms, 10**8 steps) with the bound that names it.
    with pytest.raises(ValueError, match="steps of work|64 MiB|size limit"):
        maskpar.compile_regex(tok, "[ab]*a[ab]{24}")
    with pytest.raises(ValueError, match="steps of work"):
        maskpar.compile_regex(tok, "[ab]*a[ab]{24}", max_compile_steps=10**8)


@pytest.mark.parametrize("steps", [0, -1, -(2**70)])
def test_compile_budget_must_be_positive(steps):
    tok = maskpar.Tokenizer.from_vocab(TOKENS, [3])
    with pytest.raises(ValueError, match="max_compile_steps"):
        maskpar.compile_regex(tok, "a", max_compile_steps=steps)


def bad_buffers():
    torch = pytest.importorskip("torch")
    words = (VOCAB + 31) // 32
    ro = np.zeros((2, words), dtype=np.int32)
    ro.flags.writeable = False
    return [
        (np.zeros((2, words), dtype=np.int64), TypeError, "int32"),
        (np.zeros((2, words), dtype=np.uint32), TypeError, "int32"),
        (np.zeros((2, words + 1), dtype=np.int32), ValueError, "words"),
        (np.zeros((2, words, 1), dtype=np.int32), ValueError, "dimensions"),
        (np.zeros((words, 2), dtype=np.int32).T, ValueError, "contiguous"),
        (np.zeros((2, 2 * words), dtype=np.int32)[:, ::2], ValueError, "contiguous"),
        (ro, ValueError, "read-only"),
        ([[0] * words] * 2, TypeError, "numpy.ndarray or a torch.Tensor"),
        (torch.zeros((2, words), dtype=torch.float32), TypeError, "int32"),
        (torch.zeros((2, words), dtype=torch.int64), TypeError, "int32"),
        (torch.zeros((words, 2), dtype=torch.int32).t(), ValueError, "contiguous"),
    ]


def test_bad_bitmasks(g):
    m = maskpar.Matcher(g)
    for buf, exc, msg in bad_buffers():
        with pytest.raises(exc, match=msg):
            m.fill_next_token_bitmask(buf)
        with pytest.raises(exc, match=msg):
            maskpar.fill_next_token_bitmask_par_with_draft_tokens([(m, 0, [])], buf)


@pytest.mark.skipif(
    not __import__("importlib").util.find_spec("torch"), reason="torch not installed"
)
def test_cuda_bitmask_is_refused(g):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    with pytest.raises(ValueError, match="CPU"):
        maskpar.Matcher(g).fill_next_token_bitmask(
            torch.zeros((1, 2), dtype=torch.int32, device="cuda")
        )


def test_bad_index_and_token_ids(g):
    m = maskpar.Matcher(g)
    bm = new_bitmask(2, VOCAB, fill=SENTINEL)
    for idx in (2, -1):
        with pytest.raises(ValueError, match="index"):
            m.fill_next_token_bitmask(bm, idx)
    for t in (VOCAB, -1, 2**40):
        with pytest.raises((ValueError, OverflowError)):
            m.consume_token(t)
        with pytest.raises((ValueError, OverflowError)):
            m.consume_tokens([0, t])
        with pytest.raises((ValueError, OverflowError)):
            m.validate_tokens([t])
    assert m.num_consumed == 0
    assert (bm == SENTINEL).all()


def par_errors(g):
    m1, m2 = maskpar.Matcher(g), maskpar.Matcher(g)
    other = maskpar.compile_regex(maskpar.Tokenizer.from_vocab(TOKENS, [3], vocab_size=200), "a")
    return [
        ([(m1, 0, [0, 0]), (m2, 2, [])], ValueError, "overlap"),
        ([(m1, 3, [0])], ValueError, "do not fit"),
        ([(m1, -1, [])], ValueError, "row must be >= 0"),
        ([(m1, 0, []), (m1, 2, [])], ValueError, "same Matcher appears twice"),
        ([(m1, 0, [VOCAB])], ValueError, "out of range"),
        ([(m1, 0, [-2])], ValueError, "out of range"),
        ([(m1, 0, "ab")], TypeError, "drafts"),
        ([(m1, 0)], TypeError, "elements"),
        ([("m1", 0, [])], TypeError, "Matcher"),
        ([m1], TypeError, "tuple"),
        ([(m1, 0, []), (maskpar.Matcher(other), 2, [])], ValueError, "words per row"),
    ]


def test_bad_parallel_calls_write_nothing(g):
    for items, exc, msg in par_errors(g):
        bm = new_bitmask(4, VOCAB, fill=SENTINEL)
        with pytest.raises(exc, match=msg):
            maskpar.fill_next_token_bitmask_par_with_draft_tokens(items, bm)
        assert (bm == SENTINEL).all(), msg
    m = maskpar.Matcher(g)
    bm = new_bitmask(4, VOCAB, fill=SENTINEL)
    with pytest.raises(ValueError, match="num_threads"):
        maskpar.fill_next_token_bitmask_par([(m, 0)], bm, num_threads=0)
    with pytest.raises(ValueError, match="num_threads"):
        maskpar.fill_next_token_bitmask_par([(m, 0)], bm, num_threads=-3)
    with pytest.raises(TypeError):
        maskpar.fill_next_token_bitmask_par([(m, 0, [])], bm)
    assert (bm == SENTINEL).all()


def test_matcher_busy_in_another_call_raises(g):
    """A matcher held by a running fill refuses mutation with a clear error,
    and the failed call writes nothing."""
    from collections.abc import Sequence

    m0, m1 = maskpar.Matcher(g), maskpar.Matcher(g)

    class Evil(Sequence):
        """Drafts that try to mutate another request's matcher mid-call."""

        def __len__(self):
            return 1

        def __getitem__(self, i):
            if i:
                raise IndexError
            m0.consume_token(0)
            return 0

    bm = new_bitmask(4, VOCAB, fill=SENTINEL)
    with pytest.raises(RuntimeError, match="in use"):
        maskpar.fill_next_token_bitmask_par_with_draft_tokens([(m0, 0, []), (m1, 1, Evil())], bm)
    assert m0.num_consumed == 0
    assert (bm == SENTINEL).all()


def test_wrong_argument_types(g):
    with pytest.raises(TypeError):
        maskpar.Matcher("not a grammar")
    with pytest.raises(TypeError):
        maskpar.compile_regex("not a tokenizer", "a")
    with pytest.raises(TypeError):
        maskpar.compile_regex(maskpar.Tokenizer.from_vocab(TOKENS, [3]), 5)


@pytest.mark.parametrize(
    "keyword, value",
    [("maxLength", 99999999999999999999999), ("minItems", 2**64), ("minLength", 5_000_000_000)],
)
def test_counts_past_the_bound_are_named_as_too_large(keyword: str, value: int) -> None:
    tok = maskpar.Tokenizer.from_vocab(TOKENS, [3], vocab_size=VOCAB)
    schema = {"type": "array" if "Items" in keyword else "string", keyword: value}
    with pytest.raises(ValueError, match=f"`{keyword}` is .*, more than the largest count"):
        maskpar.compile_json_schema(tok, json.dumps(schema))
