"""Lexer-only entries copied from a state that differs on few trie paths
(``cfg::divergent``), checked against Python ``regex`` partial matching.

An object that lists properties and allows others reads an additional
member's name with a lexeme "any string but the listed names"; inside a name
that begins like a listed one, each character is a new DFA state, whose
entry is copied from a recent state's and changed only where the two walks
differ. The vocabularies here are cut from valid texts (as a tokenizer's
merges would be) plus random texts, so that walks stop inside listed names,
and every token's bit along random walks is compared with whether the text
so far plus the token is a prefix of the language.
"""

from __future__ import annotations

import json
import random

import pytest
import regex

import maskpar
from conftest import walk_checking_rows

NAMES = ["ab", "aab", "ca", "abc"]
# The vocabularies' characters: no backslash, so no escape in a name.
ALPHABET = 'abcx"{}:, 0129-truefls<>'
CONTENT = ALPHABET.replace('"', "")
WS = "[ \\t\\n\\r]*"


def other_names(names: list[str], content: str) -> str:
    """A regex of every string over ``content`` but ``names``: the proper
    prefixes of names that are no name, and every string that leaves the
    names' trie at some character (then anything)."""
    prefixes = {n[:i] for n in names for i in range(len(n) + 1)}
    exact = [p for p in prefixes if p not in names]
    leave = []
    for p in sorted(prefixes):
        nexts = {q[len(p)] for q in prefixes if len(q) == len(p) + 1 and q.startswith(p)}
        others = "".join(c for c in content if c not in nexts)
        if others:
            leave.append(f"{regex.escape(p)}[{regex.escape(others)}][{regex.escape(content)}]*")
    return "(?:" + "|".join([regex.escape(p) for p in exact] + leave) + ")"


def pieces(texts: list[str], rng: random.Random, count: int) -> set[str]:
    """Random cuts of ``texts`` into pieces of 1 to 6 characters (``count``
    tries)."""
    out: set[str] = set()
    for _ in range(count):
        t = rng.choice(texts)
        i = rng.randrange(len(t))
        out.add(t[i : i + rng.randint(1, 6)])
    return out


def vocabulary(samples: list[str], alphabet: str, rng: random.Random) -> list[str]:
    texts = set(alphabet) | pieces(samples, rng, 900)
    assert set("".join(texts)) <= set(alphabet)
    while len(texts) < 1300:
        n = rng.choice([2, 3, 4, 6, 9])
        texts.add("".join(rng.choice(alphabet) for _ in range(n)))
    return sorted(texts)


def schema_case(rng: random.Random) -> tuple[str, str, list[str]]:
    """An object of at most one member: a listed name with a boolean, or
    any other name with an integer. The source, the language, samples."""
    schema = {
        "type": "object",
        "properties": {n: {"type": "boolean"} for n in NAMES},
        "additionalProperties": {"type": "integer"},
        "maxProperties": 1,
    }
    listed = "(?:" + "|".join(regex.escape(n) for n in NAMES) + ")"
    integer = "-?(?:0|[1-9][0-9]*)"
    other = other_names(NAMES, CONTENT)
    member = f'(?:"{listed}"{WS}:{WS}(?:true|false)|"{other}"{WS}:{WS}{integer})'
    language = f"\\{{{WS}(?:{member}{WS})?\\}}"
    samples = []
    for _ in range(60):
        name = rng.choice(NAMES + ["a", "aa", "c", "abca", "aabx", "xab", "cab"])
        # Integers of the alphabet's digits only.
        integers = [0, 1, 2, 9, 10, 12, 19, 20, 91, 120, -1, -9, -20]
        value = rng.choice([True, False]) if name in NAMES else rng.choice(integers)
        samples.append(json.dumps({name: value}))
    return json.dumps(schema), language, samples


def lark_case(rng: random.Random) -> tuple[str, str, list[str]]:
    """A Lark terminal with the same memory: a listed name, or another
    string that has an ``x``. Lark matches with Python ``re``, whose
    alternation takes the first branch that matches: ordered so that the
    first is the longest, the oracle's language is the same."""
    names = "|".join(sorted(NAMES, key=lambda n: (-len(n), n)))
    source = f'start: "<" NAME ">"\nNAME: /([abc]*x[abcx]*|{names})/\n'
    language = f"<(?:[abc]*x[abcx]*|{names})>"
    samples = [f"<{rng.choice(NAMES + ['abx', 'aax', 'cax', 'abcabx', 'x'])}>" for _ in range(60)]
    return source, language, samples


@pytest.mark.parametrize("case", ["schema", "lark"])
def test_masks_inside_listed_names_match_a_regex_oracle(case):
    rng = random.Random(5)
    source, language, samples = (schema_case if case == "schema" else lark_case)(rng)
    pattern = regex.compile(language)
    texts = vocabulary(samples, ALPHABET, rng)
    vocab = [t.encode() for t in texts] + [b"<eos>"]
    eos = len(vocab) - 1
    tok = maskpar.Tokenizer.from_vocab(vocab, [eos])
    if case == "schema":
        g = maskpar.compile_json_schema(tok, source)
    else:
        g = maskpar.compile_grammar(tok, source, syntax="lark")

    def choose(allowed: list[int], prefix: str) -> int | None:
        if pattern.fullmatch(prefix) and rng.random() < 0.5:
            return None
        # Mostly short tokens, so that walks stop inside names.
        short = [x for x in allowed if len(texts[x]) == 1]
        return rng.choice(short if short and rng.random() < 0.6 else allowed)

    checked = walk_checking_rows(g, texts, eos, pattern, source, 40, choose)
    assert checked > 150
