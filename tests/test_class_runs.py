"""Masks inside counted runs of one byte class (`[0-9a-f]{8}`, a UUID's
parts), whose lexer entries come from the vocabulary's class-run tables
(`rust/classruns.rs`, `rust/cfg/classentry.rs`) instead of a walk: every
row of random walks checked against Python's `regex` with partial
matching, over a vocabulary rich in tokens of those classes, of several
lengths, and of class bytes followed by dashes and quotes (where a run's
exits lie)."""

from __future__ import annotations

import random

import pytest
import regex

import maskpar
from conftest import walk_checking_rows

CLASS_ALPHABETS = ["0123456789abcdef", "0123456789ABCDEF", "09afAFgzGZ", "0123456789"]
TAILS = ["-", '"', '",', "-0", "-a", '"}', "_", " "]


def vocabulary(rng: random.Random) -> list[str]:
    """Every ASCII letter and digit, tokens of 2-9 bytes of each class
    alphabet, and such tokens followed by a dash, quote or other byte."""
    texts = set('0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-"_ ,}')
    for alphabet in CLASS_ALPHABETS:
        for _ in range(250):
            n = rng.randint(2, 9)
            texts.add("".join(rng.choice(alphabet) for _ in range(n)))
        for _ in range(80):
            n = rng.randint(1, 8)
            texts.add("".join(rng.choice(alphabet) for _ in range(n)) + rng.choice(TAILS))
    for _ in range(40):
        texts.add(rng.choice(TAILS) + "".join(rng.choice("0123456789abcdef") for _ in range(3)))
    return sorted(texts)


@pytest.mark.parametrize(
    ("pattern", "text_regex"),
    [
        ("^[0-9a-f]{8}-[0-9a-f]{4}$", "[0-9a-f]{8}-[0-9a-f]{4}"),
        ("^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}$", "[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){2}"),
        ("^[0-9A-Za-z]{3,6}$", "[0-9A-Za-z]{3,6}"),
        ("^[A-Z]{2}[0-9]{3}$", "[A-Z]{2}[0-9]{3}"),
        ("^[0-9]{4}-[0-9]{2}$", "[0-9]{4}-[0-9]{2}"),
        ("^[a-z]{2,4}_[0-9a-f]{6}$", "[a-z]{2,4}_[0-9a-f]{6}"),
    ],
)
def test_masks_inside_class_runs_match_a_regex_oracle(pattern, text_regex):
    rng = random.Random(pattern)
    texts = vocabulary(rng)
    vocab = [t.encode() for t in texts] + [b"<eos>"]
    eos = len(vocab) - 1
    tok = maskpar.Tokenizer.from_vocab(vocab, [eos])
    g = maskpar.compile_json_schema(tok, {"type": "string", "pattern": pattern})
    oracle = regex.compile(f'"{text_regex}"')

    def choose(allowed: list[int], prefix: str) -> int:
        # Short tokens mostly, so that every place of every run is met.
        short = [x for x in allowed if len(texts[x]) <= 2]
        return rng.choice(short if short and rng.random() < 0.7 else allowed)

    checked = walk_checking_rows(g, texts, eos, oracle, pattern, 25, choose)
    assert checked > 100
