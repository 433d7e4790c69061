"""Lexer-only entries copied from a state that walks alike to some depth
(``cfg::nearentry``), checked against Python ``regex`` partial matching.

Near the end of a counted string (``maxLength``, or ``{0,n}`` in a grammar)
each character read is a new DFA state, and its entry is built from the
entry of an earlier state for the tokens shorter than the depth to which
the two states agree, and a walk of the longer tokens only. The
vocabularies here have tokens of 1 to 40 bytes, so that the trie is deeper
than the depths at which the states near the limit part: every depth from
the trie's height down to a few bytes is met. Every token's bit along
random walks is compared with whether the text so far plus the token is a
prefix of the language.
"""

from __future__ import annotations

import random

import pytest
import regex

import maskpar
from conftest import walk_checking_rows

# (how the grammar is compiled, its source, its language, the characters of
# the vocabulary). A schema string's characters are one block of copies of
# a character automaton (`regex_dfa::periodic`); the grammar's count is a
# table of rows, told apart by a search.
# The last item is the character that closes the count.
CASES = [
    (
        "schema",
        '{"type": "string", "maxLength": 70, "pattern": "^[ab][^.]*$"}',
        r'"[ab][abc]{0,69}"',
        'abc."',
    ),
    # Any text keeps the string live until its last characters: the fill
    # takes a text slice, whose check follows the block's copies by jumps
    # (`cfg::textreach`).
    (
        "schema",
        '{"type": "string", "maxLength": 300}',
        r'"[^"]{0,300}"',
        'xyé ."',
    ),
    (
        "gbnf",
        'root ::= "<" [ab] [abc]{0,40} ">" ";" [ab]{1,30} ";"',
        r"<[ab][abc]{0,40}>;[ab]{1,30};",
        "abc<>;",
    ),
]
CLOSERS = {"schema": '"', "gbnf": ">"}


def vocabulary(alphabet: str, rng: random.Random) -> list[str]:
    """Every character, and 1,500 random texts of 2 to 40 characters."""
    texts = set(alphabet)
    while len(texts) < 1500:
        n = rng.choice([2, 3, 4, 6, 9, 12, 16, 20, 25, 32, 40])
        texts.add("".join(rng.choice(alphabet) for _ in range(n)))
    return sorted(texts)


@pytest.mark.parametrize(("syntax", "source", "language", "alphabet"), CASES)
def test_masks_near_a_count_limit_match_a_regex_oracle(syntax, source, language, alphabet):
    rng = random.Random(3)
    pattern = regex.compile(language)
    texts = vocabulary(alphabet, rng)
    vocab = [t.encode() for t in texts] + [b"<eos>"]
    eos = len(vocab) - 1
    tok = maskpar.Tokenizer.from_vocab(vocab, [eos])
    if syntax == "schema":
        g = maskpar.compile_json_schema(tok, source)
    else:
        g = maskpar.compile_grammar(tok, source, syntax=syntax)

    def choose(allowed: list[int], prefix: str) -> int:
        # Mostly one character at a time and not the closing one, so
        # that every count up to the limit is met.
        going = [x for x in allowed if CLOSERS[syntax] not in texts[x]]
        short = [x for x in going if len(texts[x]) == 1]
        r = rng.random()
        pool = short if short and r < 0.85 else going if going and r < 0.95 else allowed
        return rng.choice(pool)

    checked = walk_checking_rows(g, texts, eos, pattern, source, 10, choose)
    assert checked > 300
