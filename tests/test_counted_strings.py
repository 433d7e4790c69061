"""Strings near their ``maxLength``, whose entries take the text tokens by
character count and walk only the others (``slices::TextSlices::counted``,
``cfg::textreach::TextReach::dies_after``), checked against Python ``regex``
partial matching of the JSON string language.

Near its limit a string survives every text of the characters it has left
and dies on every longer one, so the text tokens it allows are known by
their characters alone. The vocabularies here mix text tokens of every
length up to past the limits with the tokens that are not text: quotes
inside and at the ends, escapes (each one character of the count), raw
newlines (never allowed inside a string) and multi-byte characters. Every
token's bit along random walks that reach each count up to the limit is
compared with whether the text so far plus the token is a prefix of the
language.
"""

from __future__ import annotations

import random

import pytest
import regex

import maskpar
from conftest import walk_checking_rows

# One character of a JSON string: unescaped text, or an escape.
CHAR = r'(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})'

ALPHABET = "ab é€x-"
# Tokens that are not text: quotes, escapes, newlines, and mixtures.
OTHERS = [
    '"',
    '",',
    'a"',
    'ab"',
    'é"}',
    "\\n",
    "\\u00e9",
    '\\"',
    "\\\\",
    "a\\n",
    "ab\\t",
    "\n",
    "a\nb",
    '"a',
    "\\",
]


def vocabulary(rng: random.Random) -> list[str]:
    """Every character, the tokens that are not text, 1,200 random texts of
    2 to 30 characters, and 100 of them closed by a quote: a state that
    needs a few more characters than another is told from it only by such
    a token."""
    texts = set(ALPHABET) | set(OTHERS)
    lengths = [2, 3, 4, 5, 7, 9, 12, 16, 22, 30]
    while len(texts) < 1200 + len(OTHERS):
        texts.add("".join(rng.choice(ALPHABET) for _ in range(rng.choice(lengths))))
    closed = set()
    while len(closed) < 100:
        n = rng.randint(1, 30)
        closed.add("".join(rng.choice(ALPHABET) for _ in range(n)) + rng.choice(['"', '",']))
    return sorted(texts | closed)


def compiled(schema: dict, rng: random.Random) -> tuple[list[str], int, maskpar.Grammar]:
    """``schema`` compiled over a fresh ``vocabulary`` with an EOS token
    last: the texts, the EOS id and the grammar."""
    texts = vocabulary(rng)
    vocab = [t.encode() for t in texts] + [b"<eos>"]
    eos = len(vocab) - 1
    tok = maskpar.Tokenizer.from_vocab(vocab, [eos])
    return texts, eos, maskpar.compile_json_schema(tok, schema)


@pytest.mark.parametrize(
    ("schema", "low", "high"),
    [
        ({"type": "string", "maxLength": 6}, 0, 6),
        ({"type": "string", "maxLength": 20}, 0, 20),
        ({"type": "string", "minLength": 3, "maxLength": 13}, 3, 13),
        ({"type": "string", "minLength": 17, "maxLength": 40}, 17, 40),
        # Far below its minLength each state is new and walks alike to its
        # neighbours only up to the characters it still needs: entries copied
        # from an alike state or built from a text slice, whichever walks less.
        ({"type": "string", "minLength": 45, "maxLength": 70}, 45, 70),
    ],
)
def test_masks_of_strings_near_their_max_length_match_a_regex_oracle(schema, low, high):
    rng = random.Random(high)
    texts, eos, g = compiled(schema, rng)
    pattern = regex.compile(f'"{CHAR}{{{low},{high}}}"')

    chars = regex.compile(CHAR)
    deepest = 0

    def choose(allowed: list[int], prefix: str) -> int:
        # Mostly one or two characters at a time and no closing quote, so
        # that every count up to the limit is met.
        nonlocal deepest
        deepest = max(deepest, len(chars.findall(prefix[1:])))
        going = [x for x in allowed if '"' not in texts[x][-1:] or texts[x] == '\\"']
        short = [x for x in going if len(texts[x]) <= 2]
        r = rng.random()
        pool = short if short and r < 0.8 else going if going and r < 0.95 else allowed
        return rng.choice(pool)

    checked = walk_checking_rows(g, texts, eos, pattern, schema, 30, choose)
    assert checked > 100
    assert deepest == high, "the walks reach the limit"


@pytest.mark.parametrize(
    ("schema", "chars", "high"),
    [
        ({"type": "string", "pattern": "^[abx ]*$", "maxLength": 200}, "abx ", 200),
        ({"type": "string", "pattern": "^[a-z é€]*$", "maxLength": 150}, "a-z é€", 150),
    ],
)
def test_masks_of_pattern_strings_with_a_long_max_length_match_a_regex_oracle(schema, chars, high):
    """A pattern with a large ``maxLength`` is a long count no text slice
    covers: its far copies share the entry of the count's first copy
    (``ByteDfa::first_alike_copy``), and its last copies each walk. Walks
    from the start to the limit, checked against ``regex``."""
    rng = random.Random(high)
    texts, eos, g = compiled(schema, rng)
    pattern = regex.compile(f'"[{chars}]{{0,{high}}}"')
    deepest = 0

    def choose(allowed: list[int], prefix: str) -> int | None:
        nonlocal deepest
        deepest = max(deepest, len(prefix) - 1)
        going = [x for x in allowed if '"' not in texts[x]]
        # Long tokens far from the limit, short ones near it, so that the
        # walks reach every count near the limit.
        room = high - (len(prefix) - 1)
        fit = [x for x in going if len(texts[x]) <= max(2, room // 4)]
        pool = fit or going or allowed
        return rng.choice(pool) if pool else None

    checked = walk_checking_rows(g, texts, eos, pattern, schema, 12, choose)
    assert checked > 100
    assert deepest >= high - 2, "the walks reach the limit"


@pytest.mark.parametrize("high", [160])
def test_masks_of_plain_strings_far_from_their_max_length_match_a_regex_oracle(high):
    """A plain ``maxLength`` string is in a new DFA state at every token,
    and while it has more characters left than the trie is deep, each state
    walks the trie like the last: the fill memo keeps their row under the
    key of one of them (``LexCache::root_alike``), so most rows far from
    the limit are that copy. Walks from the start to the limit, every row
    checked against ``regex``, twice over one grammar (the second time the
    memo holds the first walks' rows)."""
    rng = random.Random(high)
    schema = {"type": "string", "maxLength": high}
    texts, eos, g = compiled(schema, rng)
    pattern = regex.compile(f'"{CHAR}{{0,{high}}}"')
    chars = regex.compile(CHAR)
    deepest = 0

    def choose(allowed: list[int], prefix: str) -> int | None:
        nonlocal deepest
        count = len(chars.findall(prefix[1:]))
        deepest = max(deepest, count)
        going = [x for x in allowed if '"' not in texts[x] or texts[x] == '\\"']
        room = high - count
        fit = [x for x in going if len(texts[x]) <= max(2, room // 4)]
        pool = fit or going or allowed
        return rng.choice(pool) if pool else None

    checked = walk_checking_rows(g, texts, eos, pattern, schema, 4, choose)
    checked += walk_checking_rows(g, texts, eos, pattern, schema, 4, choose)
    assert checked > 100
    assert deepest >= high - 2, "the walks reach the limit"
