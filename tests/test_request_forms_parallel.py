"""The request formats serving frameworks forward (structural tags in both
formats, schema-ordered JSON with counted members and whitespace bounds,
llguidance's `%json` / `%lark` blocks and special tokens, xgrammar's EBNF)
through the parallel machinery: batch fills, draft chains and draft trees
(parent arrays and SGLang's EAGLE arrays). Every row is compared with the
matcher's own one-row fill after consuming the same tokens one at a time
(the sequential API), rows the grammar refuses must be -1, and the matchers
must be unchanged."""

from __future__ import annotations

import json
import random
from typing import Any

import numpy as np
import pytest
from test_draft_tree import to_first_child_next_sibling

import maskpar

CALL_BEGIN = 128010  # <|reserved_special_token_5|> in this vocabulary
CALL_END = 128008  # <|reserved_special_token_4|>

TOOLS = {
    "get_weather": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
        "required": ["city"],
    },
    "set_timer": {
        "type": "object",
        "properties": {"seconds": {"type": "integer", "minimum": 0}},
        "required": ["seconds"],
    },
}

STAG_CURRENT = {
    "type": "structural_tag",
    "format": {
        "type": "triggered_tags",
        "triggers": ["<function="],
        "tags": [
            {
                "type": "tag",
                "begin": f"<function={name}>",
                "content": {"type": "json_schema", "json_schema": schema},
                "end": "</function>",
            }
            for name, schema in TOOLS.items()
        ],
    },
}

STAG_LEGACY = {
    "type": "structural_tag",
    "structures": [
        {"begin": f"<function={name}>", "schema": schema, "end": "</function>"}
        for name, schema in TOOLS.items()
    ],
    "triggers": ["<function="],
}

COUNTED = {
    "type": "object",
    "properties": {
        "b": {"type": "integer"},
        "a": {"type": "string"},
        "c": {"type": "boolean"},
    },
    "required": ["a"],
    "minProperties": 2,
    "additionalProperties": {"type": "number"},
}

BLOCKS = (
    'start: "Answer: " data " " rest\n'
    'data: %json {"type": "object", "properties": {"n": {"type": "integer"}}, '
    '"required": ["n"]}\n'
    'rest: %lark {\nstart: WORD ("," WORD){1,3}\nWORD: /[a-z]+/\n}'
)

EBNF = 'root ::= item-a.b ("," item-a.b)* ";"\nitem-a.b ::= [a-z\\u00e9]+ (= [,;])'

SPECIALS = 'start: "hi " <[128010]> call <[128008]>\ncall: /[a-z]+\\(/ "x" ")"'


def _cases(enc: Any, tok: maskpar.Tokenizer) -> list[tuple[str, maskpar.Grammar, list[int]]]:
    """(name, grammar, the tokens of a text it accepts)."""
    call = '<function=get_weather>{"city": "Paris", "unit": "c"}</function>'
    stag_text = f"Let me check.{call} And <function=set_timer>" + '{"seconds": 30}</function>'
    return [
        ("stag", maskpar.compile_structural_tag(tok, STAG_CURRENT), enc.encode(stag_text)),
        (
            "stag-legacy",
            maskpar.compile_structural_tag(tok, json.dumps(STAG_LEGACY)),
            enc.encode(call),
        ),
        (
            "json-schema-order",
            maskpar.compile_json_schema(tok, COUNTED, key_order="schema", max_whitespace=2),
            enc.encode('{"b": 1, "a": "x y",  "z": 2.5}'),
        ),
        (
            "lark-blocks",
            maskpar.compile_grammar(tok, BLOCKS, syntax="lark"),
            enc.encode('Answer: {"n": 12} ab,cd,e'),
        ),
        (
            "ebnf",
            maskpar.compile_grammar(tok, EBNF, syntax="ebnf"),
            enc.encode("ab,\u00e9t\u00e9,c;"),
        ),
        (
            "lark-specials",
            maskpar.compile_grammar(tok, SPECIALS, syntax="lark"),
            [*enc.encode("hi "), CALL_BEGIN, *enc.encode("f(x)"), CALL_END],
        ),
    ]


@pytest.fixture(scope="module")
def cases(llama3: Any) -> list[tuple[str, maskpar.Grammar, list[int]]]:
    enc, tok = llama3
    out = _cases(enc, tok)
    for name, g, text in out:  # each text is the grammar's, whole
        m = maskpar.Matcher(g)
        assert m.consume_tokens(text) and m.is_accepting(), name
    return out


def _row(m: maskpar.Matcher, path: list[int], words: int) -> np.ndarray | None:
    """The sequential API's row after `path`, or None if a token is refused."""
    f = m.fork()
    if not all(f.consume_token(t) for t in path):
        return None
    row = np.zeros((1, words), dtype=np.int32)
    f.fill_next_token_bitmask(row, 0)
    return row[0]


def _state(m: maskpar.Matcher, words: int) -> np.ndarray:
    row = np.zeros((1, words), dtype=np.int32)
    m.fill_next_token_bitmask(row, 0)
    return row[0]


def _pool(text: list[int], rng: random.Random, vocab: int) -> list[int]:
    """Tokens for drafts: the text's own, and a few others."""
    return text + [rng.randrange(vocab) for _ in range(4)] + [CALL_BEGIN, CALL_END]


@pytest.mark.parametrize("threads", [1, 3])
def test_batch_fills_equal_sequential_fills(cases: Any, llama3: Any, threads: int) -> None:
    _, tok = llama3
    words = (tok.vocab_size + 31) // 32
    for name, g, text in cases:
        matchers = []
        for i in range(len(text) + 1):
            m = maskpar.Matcher(g)
            assert m.consume_tokens(text[:i])
            matchers.append(m)
        bm = np.full((len(matchers), words), 0x5A5A5A5A, dtype=np.int32)
        maskpar.fill_next_token_bitmask_par(
            [(m, i) for i, m in enumerate(matchers)], bm, num_threads=threads
        )
        for i, m in enumerate(matchers):
            want = _row(m, [], words)
            assert want is not None
            assert np.array_equal(bm[i], want), (name, i)


@pytest.mark.parametrize("seed", range(3))
def test_draft_chains_equal_sequential_walks(cases: Any, llama3: Any, seed: int) -> None:
    _, tok = llama3
    words = (tok.vocab_size + 31) // 32
    rng = random.Random(seed)
    for name, g, text in cases:
        pool = _pool(text, rng, tok.vocab_size)
        requests, expect = [], []
        row = 0
        for start in range(0, len(text) + 1, 2):
            m = maskpar.Matcher(g)
            assert m.consume_tokens(text[:start])
            drafts = text[start : start + rng.randrange(1, 6)]
            if drafts and rng.random() < 0.5:  # a draft the grammar may refuse
                drafts[rng.randrange(len(drafts))] = rng.choice(pool)
            before = _state(m, words)
            requests.append((m, row, drafts))
            expect.append((m, row, drafts, before))
            row += len(drafts) + 1
        bm = np.full((row, words), 0x5A5A5A5A, dtype=np.int32)
        accepted = maskpar.fill_next_token_bitmask_par_with_draft_tokens(
            requests, bm, num_threads=2
        )
        for (m, at, drafts, before), n in zip(expect, accepted):
            assert np.array_equal(_state(m, words), before), name  # unchanged
            for i in range(len(drafts) + 1):
                want = _row(m, drafts[:i], words)
                if want is None:
                    assert i > n and (bm[at + i] == -1).all(), (name, drafts, i)
                else:
                    assert i <= n and np.array_equal(bm[at + i], want), (name, drafts, i)


def _tree(
    rng: random.Random, pool: list[int], text: list[int], size: int
) -> tuple[list[int], list[int]]:
    """A draft tree whose first branch follows `text` (so deep nodes are
    valid) and whose other nodes hang anywhere with tokens from `pool`."""
    tokens, parents = [0], [-1]
    for t in text[: size // 2]:
        parents.append(len(tokens) - 1)
        tokens.append(t)
    while len(tokens) < size:
        parents.append(rng.randrange(len(tokens)))
        p = parents[-1]
        # Often the text's next token after the parent's depth: a valid branch.
        depth, q = 0, p
        while q > 0:
            depth, q = depth + 1, parents[q]
        following = text[depth] if depth < len(text) else None
        tokens.append(
            following if following is not None and rng.random() < 0.5 else rng.choice(pool)
        )
    return tokens, parents


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("form", ["parents", "sglang"])
def test_draft_trees_equal_sequential_walks(cases: Any, llama3: Any, seed: int, form: str) -> None:
    _, tok = llama3
    words = (tok.vocab_size + 31) // 32
    rng = random.Random(seed)
    for name, g, text in cases:
        pool = _pool(text, rng, tok.vocab_size)
        requests, expect, row = [], [], 0
        for start in (0, len(text) // 3, len(text) // 2):
            m = maskpar.Matcher(g)
            assert m.consume_tokens(text[:start])
            tokens, parents = _tree(rng, pool, text[start:], rng.randrange(2, 14))
            if form == "parents":
                tree: Any = (tokens, parents)
            else:  # SGLang's first-child / next-sibling arrays of the same tree
                identity = list(range(len(parents)))
                tree = (*to_first_child_next_sibling(parents, identity), tokens)
            requests.append((m, row, tree))
            expect.append((m, row, tokens, parents, _state(m, words)))
            row += len(tokens)
        bm = np.full((row, words), 0x5A5A5A5A, dtype=np.int32)
        valid = maskpar.fill_next_token_bitmask_par_with_draft_tree(requests, bm, num_threads=3)
        for (m, at, tokens, parents, before), ok in zip(expect, valid):
            assert np.array_equal(_state(m, words), before), name
            for i in range(len(tokens)):
                path, q = [], i
                while q > 0:
                    path.append(tokens[q])
                    q = parents[q]
                want = _row(m, path[::-1], words)
                assert ok[i] == (want is not None), (name, i)
                if want is None:
                    assert (bm[at + i] == -1).all(), (name, i)
                else:
                    assert np.array_equal(bm[at + i], want), (name, tokens, parents, i)
