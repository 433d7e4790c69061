"""Shared fixtures: real vocabularies from PyPI packages and bitmask helpers."""

from __future__ import annotations

import functools
import os

import numpy as np
import pytest

import maskpar

LLAMA3_EOS = [128001, 128009]

# The workplace's shared test data (grammar corpora) sits beside the checkout;
# MASKPAR_SHARED_DATA points elsewhere. Tests that need it skip without it.
SHARED_DATA = os.environ.get("MASKPAR_SHARED_DATA") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data"
)
GRAMMARS = os.path.join(SHARED_DATA, "grammars")


def corpus_text(path: str) -> str:
    """The text of a shared-data file; skips the test if the corpus is absent."""
    if not os.path.exists(path):
        pytest.skip(f"shared grammar corpus not found at {path} (set MASKPAR_SHARED_DATA)")
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


def new_bitmask(rows: int, vocab_size: int, fill: int = 0) -> np.ndarray:
    return np.full((rows, (vocab_size + 31) // 32), fill, dtype=np.int32)
