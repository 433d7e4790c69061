"""Shared fixtures: real vocabularies from PyPI packages and bitmask helpers."""

from __future__ import annotations

import functools
import os
import random
from typing import Any

import numpy as np
import pytest

import maskpar

LLAMA3_EOS = [128001, 128009]

TESTS = os.path.dirname(os.path.abspath(__file__))
# The test data lives beside the tests, in tests/data (origins and licences in
# tests/data/SOURCES.md): grammar corpora, the JSON Schema Test Suite and a
# MaskBench sample. MASKPAR_SHARED_DATA points the grammar corpora and the
# Test Suite at another folder of the same layout (the workplace's full copy).
DATA = os.environ.get("MASKPAR_SHARED_DATA") or os.path.join(TESTS, "data")
GRAMMARS = os.path.join(DATA, "grammars")
JSON_SCHEMA_TEST_SUITE = os.path.join(DATA, "json-schema-test-suite")
# The sample is always the committed one (tests/data/maskbench/make_sample.py).
MASKBENCH_SAMPLE = os.path.join(TESTS, "data", "maskbench", "dev-sample.jsonl.gz")


def corpus_text(path: str) -> str:
    """The text of a test-data file (a missing file fails the test: the data
    is part of the repository)."""
    with open(path, encoding="utf-8") as f:
        return f.read()


@functools.cache
def llama3_vocab():
    import quicktok

    enc = quicktok.get_encoding("llama3")
    tokens = [enc.decode_single_token_bytes(i) for i in range(enc.n_vocab)]
    special = [i for i in range(enc.n_vocab) if enc.is_special_token(i)]
    return enc, tokens, special


@pytest.fixture(scope="session")
def llama3():
    """(quicktok encoding, maskpar.Tokenizer) for the Llama-3 128k vocabulary."""
    enc, tokens, special = llama3_vocab()
    return enc, maskpar.Tokenizer.from_vocab(tokens, LLAMA3_EOS, special)


@pytest.fixture(scope="session")
def qwen3():
    """(quicktok encoding, maskpar.Tokenizer) for the Qwen3 151k vocabulary."""
    import quicktok

    enc = quicktok.get_encoding("qwen3")
    tokens = [enc.decode_single_token_bytes(i) for i in range(enc.n_vocab)]
    special = [i for i in range(enc.n_vocab) if enc.is_special_token(i)]
    return enc, maskpar.Tokenizer.from_vocab(tokens, [enc.eot_token], special)


def allowed_ids(bitmask: np.ndarray, row: int = 0) -> list[int]:
    """Ids whose bit is set in a bitmask row (numpy int32)."""
    bits = np.unpackbits(bitmask[row].view(np.uint8), bitorder="little")
    return np.flatnonzero(bits).tolist()


def check_row_by_partial_match(
    row: np.ndarray, texts: list[str], eos: int, pattern: Any, prefix: str, context: Any
) -> list[int]:
    """Checks a bitmask row over a vocabulary of ``texts`` (id = index) and
    ``eos``: a token's bit must say whether ``prefix`` plus its text is a
    prefix of the language of ``pattern`` (a compiled ``regex`` pattern,
    partial matching), EOS's whether ``prefix`` is in it. Returns the ids
    allowed; ``context`` goes into the assertion messages."""
    allowed = []
    for x, t in enumerate(texts):
        bit = (int(row[x >> 5]) >> (x & 31)) & 1
        ok = pattern.fullmatch(prefix + t, partial=True) is not None
        assert bool(bit) == ok, (context, prefix, t)
        if ok:
            allowed.append(x)
    end_bit = (int(row[eos >> 5]) >> (eos & 31)) & 1
    assert bool(end_bit) == (pattern.fullmatch(prefix) is not None), (context, prefix)
    return allowed


def walk_checking_rows(
    grammar: Any,
    texts: list[str],
    eos: int,
    pattern: Any,
    context: Any,
    walks: int,
    choose: Any,
) -> int:
    """``walks`` walks from the start of ``grammar`` (over a vocabulary of
    ``texts`` and ``eos``), checking every row with
    ``check_row_by_partial_match``. ``choose(allowed, prefix)`` picks the next
    token among those allowed, or None to end the walk. Returns the number
    of rows checked."""
    import maskpar

    bm = new_bitmask(1, len(texts) + 1)
    checked = 0
    for _ in range(walks):
        m = maskpar.Matcher(grammar)
        prefix = ""
        while True:
            m.fill_next_token_bitmask(bm)
            allowed = check_row_by_partial_match(bm[0], texts, eos, pattern, prefix, context)
            checked += 1
            x = choose(allowed, prefix) if allowed else None
            if x is None:
                break
            assert m.consume_token(x)
            prefix += texts[x]
    return checked


def new_bitmask(rows: int, vocab_size: int, fill: int = 0) -> np.ndarray:
    return np.full((rows, (vocab_size + 31) // 32), fill, dtype=np.int32)


# One token per byte: grammar acceptance without tokenization effects.
BYTES = [bytes([i]) for i in range(256)] + [b"<eos>"]
EOS = 256


def llguidance_bytes_tokenizer():
    """llguidance's tokenizer of ``BYTES`` (one token per byte, EOS last)."""
    import llguidance

    return llguidance.LLTokenizer.from_tiktoken(
        encoder={b: i for i, b in enumerate(BYTES[:256])},
        special_tokens={"<eos>": EOS},
        pattern=r"[\s\S]",
        eos_token=EOS,
        n_vocab=EOS + 1,
    )


def accepts(g: maskpar.Grammar, text: str) -> bool:
    """Whether the grammar takes the whole text (fed as bytes) and may end there."""
    m = maskpar.Matcher(g)
    return m.consume_bytes(text.encode()) and m.is_accepting()


def random_walk(g: maskpar.Grammar, rng: random.Random, max_len: int) -> str | None:
    """Follows the mask (bytes, EOS with probability 1/3 when allowed)."""
    m = maskpar.Matcher(g)
    bm = new_bitmask(1, g.vocab_size)
    out = bytearray()
    while len(out) < max_len:
        m.fill_next_token_bitmask(bm)
        ids = allowed_ids(bm)
        if EOS in ids and (len(ids) == 1 or rng.random() < 0.33):
            return out.decode("utf-8")
        # Bias towards ASCII so walks close their brackets.
        ascii_ids = [t for t in ids if t < 128 and t != EOS]
        t = rng.choice(ascii_ids if ascii_ids and rng.random() < 0.95 else ids)
        if t == EOS:
            return out.decode("utf-8")
        assert m.consume_token(t)
        out.append(t)
    return None
