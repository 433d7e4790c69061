"""llguidance's nested grammars inside Lark grammars (issue 23, item 5).
`%json {schema}`: the block's text is the schema's JSON exactly (members in
`properties` order, as llguidance generates them), checked against
`jsonschema` and the schema-order oracle, and walks agree with llguidance's
masks. `%lark { grammar }`: a grammar of its own names and `%ignore`. For
both, whose `%ignore` applies where is checked case by case against
llguidance."""

from __future__ import annotations

import itertools
import json
import random
import re
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schema_order import Pairs, in_schema_order, pairs_to_value
from test_json_key_order import schemas

import maskpar
from conftest import (
    BYTES,
    EOS,
    accepts,
    check_row_by_partial_match,
    llguidance_bytes_tokenizer,
    new_bitmask,
    random_walk,
)


@pytest.fixture(scope="module")
def tok() -> maskpar.Tokenizer:
    return maskpar.Tokenizer.from_vocab(BYTES, [EOS])


def lark(tok: maskpar.Tokenizer, src: str) -> maskpar.Grammar:
    return maskpar.compile_grammar(tok, src, syntax="lark")


def block_value(text: str, ignored: bool) -> str:
    """The block's text in a walk of `"<" %json S ">" "!"`: what lies
    between "<" and the last ">" (with ignored blanks around them)."""
    text = text.lstrip(" ") if ignored else text
    assert text.startswith("<"), text
    body = text[1:].rstrip(" ") if ignored else text[1:]
    assert body.endswith("!"), text
    body = body[:-1].rstrip(" ") if ignored else body[:-1]
    assert body.endswith(">"), text
    return body[:-1]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=schemas, ignored=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_walks_through_a_block_validate_in_schema_order(tok, schema, ignored, seed):
    src = f'start: "<" %json {json.dumps(schema)} ">" "!"'
    if ignored:
        src += '\n%ignore " "'
    try:
        g = lark(tok, src)
    except ValueError as e:
        assert "no value satisfies" in str(e) or "matches no string" in str(e), e
        return
    rng = random.Random(seed)
    for _ in range(3):
        text = random_walk(g, rng, 300)
        if text is None:
            continue
        value_text = block_value(text, ignored)
        # The grammar's %ignore never reaches into the block's start.
        assert not value_text.startswith(" "), text
        pairs = json.loads(value_text, object_pairs_hook=Pairs)
        jsonschema.Draft202012Validator(schema).validate(pairs_to_value(pairs))
        assert in_schema_order(pairs, schema), (schema, text)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=schemas, seed=st.integers(0, 2**32 - 1))
def test_a_grammar_that_is_one_block_masks_as_the_block_does(tok, schema, seed):
    """`start: %json S` alone compiles as the schema (all splits at once);
    the same block behind a rule (`start: x`, `x: %json S`) is lexed as a
    block inside a longest-match grammar. Along walks that follow the first,
    both masks are equal at every byte, and the texts validate in schema
    order."""
    body = json.dumps(schema)
    try:
        alone = lark(tok, f"start: %json {body}")
        behind = lark(tok, f"start: x\nx: %json {body}")
    except ValueError as e:
        assert "no value satisfies" in str(e) or "matches no string" in str(e), e
        return
    direct = maskpar.compile_json_schema(tok, schema, key_order="schema")
    assert alone.num_states == direct.num_states  # the schema's own grammar
    rng = random.Random(seed)
    for _ in range(2):
        m, n = maskpar.Matcher(alone), maskpar.Matcher(behind)
        a, b = new_bitmask(1, tok.vocab_size), new_bitmask(1, tok.vocab_size)
        text = b""
        for _ in range(300):
            m.fill_next_token_bitmask(a)
            n.fill_next_token_bitmask(b)
            assert (a == b).all(), (schema, text)
            ids = [i for i in range(tok.vocab_size) if a[0, i >> 5] >> (i & 31) & 1]
            t = rng.choice(ids)
            if t == EOS:
                break
            assert m.consume_token(t) and n.consume_token(t)
            text += BYTES[t]
        else:
            continue
        pairs = json.loads(text, object_pairs_hook=Pairs)
        jsonschema.Draft202012Validator(schema).validate(pairs_to_value(pairs))
        assert in_schema_order(pairs, schema), (schema, text)


# Each alternative must stay alive on its own: the values below are read
# only by the branch whose `a` is the constant (`b`) or only by the one
# whose `a` is any string (`c`), and both `a` values end at the same byte.
OVERLAPPING = {
    "anyOf": [
        {
            "type": "object",
            "properties": {"a": {"const": "x"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {"a": {"type": "string"}, "c": {"type": "string"}},
            "required": ["a", "c"],
            "additionalProperties": False,
        },
    ]
}


@pytest.mark.parametrize(
    "value",
    [
        '{"a":"x","b":1}',
        '{"a":"x","c":"y"}',
        '{"a":"xy","c":"y"}',
        '{"a":"xy","b":1}',
        '{"a":"x"}',
        '{ "a" : "x" , "b" : 12 }',
    ],
)
def test_overlapping_alternatives_in_a_block_match_jsonschema(tok, value):
    g = lark(tok, f'start: "<" %json {json.dumps(OVERLAPPING)} ">"')
    valid = jsonschema.Draft202012Validator(OVERLAPPING).is_valid(json.loads(value))
    assert accepts(g, f"<{value}>") == valid, value


S = (
    '{"type":"object","properties":{"a":{"type":"integer"}},'
    '"required":["a"],"additionalProperties":false}'
)

LARK_OWN_IGNORE = 'start: "a" sub "c"\nsub: %lark {\nstart: B+\nB: "b"\n%ignore " "\n}'
LARK_OUTER_IGNORE = 'start: "a" sub "c"\nsub: %lark {\nstart: B+\nB: "b"\n}\n%ignore " "'
LARK_BOTH = (
    'start: "(" sub ")"\nsub: %lark {\nstart: NAME ("," NAME)*\nNAME: /[a-z]+/\n'
    '%ignore " "\n}\n%ignore "\\n"'
)
LARK_JSON_INSIDE = (
    'start: "<" sub ">"\nsub: %lark {\nstart: "x" j\nj: %json {"type":"integer"}\n%ignore " "\n}'
)

# (grammar, text, accepted): each as llguidance 1.x reads it (checked below
# when llguidance is installed).
AS_LLGUIDANCE = [
    (f'start: "<" %json {S} ">"', '<{"a":1}>', True),
    (f'start: "<" %json {S} ">"', '< {"a":1}>', False),
    (f'start: "<" %json {S} ">"', '<{"a":1} >', False),
    (f'start: "<" %json {S} ">"', '<{ "a" : 1 }>', True),
    (f'start: "<" %json {S} ">"\n%ignore /[ \\t]+/', '< {"a":1}>', False),
    (f'start: "<" %json {S} ">"\n%ignore /[ \\t]+/', '<{"a":1} >', True),
    (f'start: "<" %json {S} ">"\n%ignore /[ \\t]+/', '<{\t"a":1}\t>', True),
    ('start: x "," x\nx: %json {"type":"integer"}', "1,2", True),
    ('start: x "," x\nx: %json {"type":"integer"}', "1 ,2", False),
    ('start: %json {"type":"string"}', '"ab"', True),
    ('start: %json {"type":"string"}', ' "ab"', False),
    ('start: %json {"type":"string"}', '"ab" ', False),
    ('start: WORD | %json {"type":"integer"}\nWORD: /[a-z0-9]+/', "12", True),
    ('start: "<" x ">"\nx: %json {"type":"object"}', '<{\n"a":[1, 2]}>', True),
    (
        'start: "<" x ">"\nx: %json {"type":"object","properties":{"b":{},"a":{}}}',
        '<{"a":1,"b":2}>',
        False,
    ),
    (
        'start: "<" x ">"\nx: %json {"type":"object","properties":{"b":{},"a":{}}}',
        '<{"b":2,"a":1}>',
        True,
    ),
    ('start: "<" x ">" x\nx: %json {"type":"integer"}', "<1>2", True),
    ('start: "<" x y\nx: %json {"type":"integer"}\ny: %json {"type":"string"}', '<1"a"', True),
    # %lark blocks: their own %ignore after their first terminal, the
    # grammar's own where only its terminals may come next.
    (LARK_OWN_IGNORE, "abbc", True),
    (LARK_OWN_IGNORE, "ab bc", True),
    (LARK_OWN_IGNORE, "a bbc", False),
    (LARK_OWN_IGNORE, "abb c", True),
    (LARK_OUTER_IGNORE, "abbc", True),
    (LARK_OUTER_IGNORE, "ab bc", False),
    (LARK_OUTER_IGNORE, "abb c", False),
    ('start: "a" sub "c"\nsub: %lark {\nstart: B+\nB: "b" | "bb"\n}', "abbbc", True),
    (LARK_BOTH, "(a, b)", True),
    (LARK_BOTH, "( a,b)", False),
    (LARK_BOTH, "(a,b )", True),
    (LARK_BOTH, "(a,b\n)", False),
    (LARK_BOTH, "(a\n,b)", False),
    (LARK_JSON_INSIDE, "<x1>", True),
    (LARK_JSON_INSIDE, "<x 1>", False),
    (LARK_JSON_INSIDE, "<x1 >", False),
    # llguidance's options header (SGLang and llama.cpp mark its grammars
    # with it): no effect on the language.
    ('%llguidance {}\nstart: "a" %json {"type":"integer"}', "a1", True),
    ('%llguidance {"no_forcing": true}\nstart: "a" | "b"', "b", True),
    # ... but its allow_initial_skip: without it no ignored text comes first.
    ('%llguidance {}\nstart: "a" "b"\n%ignore " "', " ab", False),
    ('%llguidance {}\nstart: "a" "b"\n%ignore " "', "a b", True),
    ('%llguidance {"allow_initial_skip": true}\nstart: "a" "b"\n%ignore " "', " ab", True),
    # A terminal also ignored is ignored text only where that may come.
    (
        'start: "a" sub\nsub: %lark {\nstart: WS? "b" | "c"\nWS: " "\n%ignore WS\n}',
        "a c",
        False,
    ),
    (
        'start: "a" sub\nsub: %lark {\nstart: WS? "b" | "c"\nWS: " "\n%ignore WS\n}',
        "a  b",
        True,
    ),
    ('start: WS "c" | x\nx: %json {"type":"integer"}\nWS: " "\n%ignore WS', " 1", False),
    ('start: WS "c" | x\nx: %json {"type":"integer"}\nWS: " "\n%ignore WS', " c", True),
    # A block's names are its own.
    ('start: A sub\nA: "a"\nsub: %lark {\nstart: A\nA: "b"\n}', "ab", True),
    ('start: A sub\nA: "a"\nsub: %lark {\nstart: A\nA: "b"\n}', "aa", False),
    (
        'start: TEXT | call\nTEXT: /[^{](.|\\n)*/\ncall: %json {"type":"object",'
        '"properties":{"name":{"const":"get_weather"}},"required":["name"]}',
        '{ "name" : "get_weather" }',
        True,
    ),
    (
        'start: TEXT | call\nTEXT: /[^{](.|\\n)*/\ncall: %json {"type":"object",'
        '"properties":{"name":{"const":"get_weather"}},"required":["name"]}',
        '{"name":"x"}',
        False,
    ),
]


@pytest.mark.parametrize(("grammar", "text", "ok"), AS_LLGUIDANCE)
def test_blocks_read_text_as_llguidance_does(tok, grammar, text, ok):
    assert accepts(lark(tok, grammar), text) == ok
    assert llguidance_takes(grammar, text) == ok


def llguidance_takes(grammar: str, text: str) -> bool:
    """Whether llguidance's Lark reading of `grammar` takes `text` whole."""
    llguidance = pytest.importorskip("llguidance")
    llt = llguidance_bytes_tokenizer()
    m = llguidance.LLMatcher(llt, llguidance.LLMatcher.grammar_from_lark(grammar), log_level=0)
    return m.consume_tokens(list(text.encode())) and not m.is_error() and m.is_accepting()


def test_known_differences_from_llguidance(tok):
    """Where llguidance's JSON lexer runs on past a block's end, maskpar
    keeps to the grammar: JSON whitespace between two blocks (llguidance
    takes `<1 "a"`), and two blocks whose values could run together split
    every way the rules allow (llguidance reads `1 2` as two integers and
    refuses `12`; maskpar takes `12` as 1 then 2, and refuses `1 2`)."""
    g = lark(tok, 'start: "<" x y\nx: %json {"type":"integer"}\ny: %json {"type":"string"}')
    assert not accepts(g, '<1 "a"')
    g = lark(tok, 'start: x x\nx: %json {"type":"integer"}')
    assert accepts(g, "12") and not accepts(g, "1 2")


# (grammar, text, maskpar, llguidance): the documented differences in where
# ignored text may come (docs/semantics.md, `%lark` blocks).
IGNORED_TEXT_DIFFERENCES = [
    # Ignored by both the grammar and the block, before the block's first
    # terminal: llguidance takes it, maskpar does not.
    ('start: "a" %lark {\nstart: "b"\n%ignore " "\n}\n%ignore " "', "a b", False, True),
    # At the very end of the text: maskpar takes it (as Lark does),
    # llguidance never does.
    ('start: "a" "b"\n%ignore " "', "ab ", True, False),
    # Where both agree, beside them.
    ('start: "a" %lark {\nstart: "b"\n%ignore " "\n}\n%ignore " "', "ab", True, True),
    ('start: "a" "b"\n%ignore " "', "a b", True, True),
]


@pytest.mark.parametrize(("grammar", "text", "ours", "theirs"), IGNORED_TEXT_DIFFERENCES)
def test_ignored_text_differences_from_llguidance(tok, grammar, text, ours, theirs):
    assert accepts(lark(tok, grammar), text) == ours
    assert llguidance_takes(grammar, text) == theirs


INTEGER = re.compile(r"-?(?:0|[1-9][0-9]*)")


def test_adjacent_blocks_keep_every_split():
    """Two integer blocks back to back: a text is taken iff some split of it
    is two JSON integers (brute force), and each token's bit equals whether
    consume takes it (tokens that cross the split point included)."""
    vocab = [bytes([i]) for i in range(256)]
    vocab += [b"12", b"01", b"1-", b"-1", b"00", b"10", b"-0", b"0-1", b"<eos>"]
    eos = len(vocab) - 1
    tok = maskpar.Tokenizer.from_vocab(vocab, [eos])
    g = lark(tok, 'start: x x\nx: %json {"type":"integer"}')
    bm = new_bitmask(1, len(vocab))
    for n in range(1, 5):
        for chars in itertools.product("01-2", repeat=n):
            text = "".join(chars)
            want = any(
                INTEGER.fullmatch(text[:i]) and INTEGER.fullmatch(text[i:])
                for i in range(1, len(text))
            )
            assert accepts(g, text) == want, text
    for prefix in ["", "1", "-", "12", "0", "-1"]:
        m = maskpar.Matcher(g)
        assert m.consume_bytes(prefix.encode())
        m.fill_next_token_bitmask(bm)
        for x in range(len(vocab)):
            took = m.consume_token(x)
            if took:
                m.rollback(1)
            assert bool((int(bm[0][x >> 5]) >> (x & 31)) & 1) == took, (prefix, vocab[x])


@pytest.mark.parametrize(
    ("grammar", "message"),
    [
        ('start: "a" %json {"type": "integer"', "JSON Schema object"),
        ('start: "a" %json [1, 2]', "JSON Schema object"),
        ('start: %json {"type": "nope"}', "%json block at"),
        ('start: "a" %lark { start: "b"', "no closing"),
        ('start: "a" %lark { begin: "b" }', "no start rule"),
        ('start: "a" %lark { start: "b" \n %declare _INDENT }', "declares terminals"),
        ("start: %lark start", "in braces"),
        ('%llguidance {"allow_invalid_utf8": true}\nstart: "a"', "allow_invalid_utf8"),
        ('%llguidance [1]\nstart: "a"', "JSON object of options"),
        ('start: A\nA: "a" %json {"type": "integer"}', "terminal"),
    ],
)
def test_bad_blocks_are_refused_clearly(tok, grammar, message):
    with pytest.raises(ValueError, match=message):
        lark(tok, grammar)


def _dev_schemas(files: list[str]) -> list[Any]:
    import gzip

    from conftest import MASKBENCH_SAMPLE

    with gzip.open(MASKBENCH_SAMPLE, "rt") as f:
        rows = [json.loads(line) for line in f]
    return [r["schema"] for r in rows if r["file"] in files]


@pytest.mark.parametrize(
    "schema",
    _dev_schemas(
        [
            "BFCL_simple_242.json",
            "Glaiveai2K---calculate_area_63d8c1b9.json",
            "Snowplow---sp_295_Normalized.json",
        ]
    ),
)
def test_block_walks_agree_with_llguidance(schema):
    """Real tokens (Llama 3) through a block between tags, against
    llguidance's masks both ways. The opening tag is read as llguidance's
    canonical tokens: it allows only those for text a grammar forces (a
    known difference), and its lexer reads text from a `/.../` pattern with
    differences of its own."""
    llguidance = pytest.importorskip("llguidance")
    from test_dialects import VOCAB
    from test_special_tokens import _llama3_tokenizer, _llg_allowed, _llg_tokenizer, allowed

    from conftest import LLAMA3_EOS

    s = json.dumps(schema)
    llt = _llg_tokenizer()
    rng = random.Random(11)
    grammar = f'start: "<tool>" %json {s} "</tool>"'
    ours = maskpar.compile_grammar(_llama3_tokenizer(), grammar, syntax="lark")
    lark_json = llguidance.LLMatcher.grammar_from_lark(grammar)
    for direction in ["maskpar", "reference"] * 2:
        m = maskpar.Matcher(ours)
        ref = llguidance.LLMatcher(llt, lark_json, log_level=0)
        for t in llt.tokenize_str("<tool>"):
            assert m.consume_token(t) and ref.consume_token(t)
        for _ in range(25):
            mine = allowed(m, VOCAB) - set(LLAMA3_EOS)
            theirs = _llg_allowed(ref, VOCAB) - set(LLAMA3_EOS)
            pool = sorted(mine if direction == "maskpar" else theirs)
            if not pool:
                break
            t = rng.choice(pool)
            assert t in mine, (direction, t)
            assert ref.consume_token(t) and not ref.is_error(), (direction, t)
            assert m.consume_token(t)
            assert m.is_accepting() == ref.is_accepting(), (direction, t)


def test_valid_instances_are_allowed_token_by_token(llama3):
    """Every token of the dev sample's valid instances (members in schema
    order) is allowed by the mask of `start: %json <schema>`, and the text
    may end there: a number's `0` then `.` (a lexeme reading on past an
    accepting state) was once forbidden by the mask though consumed."""
    import gzip

    from schema_order import reorder

    from conftest import MASKBENCH_SAMPLE, new_bitmask

    enc, tok = llama3
    with gzip.open(MASKBENCH_SAMPLE, "rt") as f:
        rows = [json.loads(line) for line in f]
    rows = random.Random(2).sample(rows, 40)
    checked = 0
    for r in rows:
        s = json.dumps(r["schema"])
        try:
            g = maskpar.compile_grammar(tok, f"start: %json {s}", syntax="lark")
        except ValueError:
            continue  # refused as compile_json_schema refuses it
        bm = new_bitmask(1, g.vocab_size)
        for t in r["tests"]:
            if not t["valid"]:
                continue
            text = json.dumps(reorder(t["data"], r["schema"]), ensure_ascii=False)
            m = maskpar.Matcher(g)
            for i, x in enumerate(enc.encode(text)):
                m.fill_next_token_bitmask(bm)
                assert (int(bm[0][x >> 5]) >> (x & 31)) & 1, (r["file"], text, i)
                assert m.consume_token(x)
            assert m.is_accepting(), (r["file"], text)
            checked += 1
    assert checked >= 40


def _fragment_vocab(texts: list[str], n: int, seed: int) -> list[bytes]:
    """Every byte, then `n` substrings (2 to 6 bytes) of `texts`: tokens
    that cross a block's lexemes and its edges in every way."""
    rng = random.Random(seed)
    data = [t.encode() for t in texts]
    frags: set[bytes] = set()
    while len(frags) < n:
        d = rng.choice(data)
        if len(d) < 2:
            continue
        i = rng.randrange(len(d) - 1)
        frags.add(d[i : i + rng.randint(2, 6)])
    return [bytes([i]) for i in range(256)] + sorted(frags)


@pytest.mark.parametrize("ignored", [False, True])
def test_block_masks_match_consume_on_every_token(ignored):
    """Along valid instances wrapped in a block, each token's bit equals
    whether consume takes it: the lexer-only entries (each alone scan its
    own, none stopping at back-off points) against the parser's step."""
    import gzip

    from schema_order import reorder

    from conftest import MASKBENCH_SAMPLE, new_bitmask

    with gzip.open(MASKBENCH_SAMPLE, "rt") as f:
        rows = [json.loads(line) for line in f]
    rows = [r for r in random.Random(8).sample(rows, 30) if any(t["valid"] for t in r["tests"])]
    texts = []
    for r in rows:
        for t in r["tests"]:
            if t["valid"]:
                texts.append(json.dumps(reorder(t["data"], r["schema"]), ensure_ascii=False))
    wrapped = [f"<{t}>" if not ignored else f"<{t} >" for t in texts]
    vocab = _fragment_vocab(wrapped, 1500, 3) + [b"<eos>"]
    eos = len(vocab) - 1
    tok = maskpar.Tokenizer.from_vocab(vocab, [eos])
    bm = new_bitmask(1, len(vocab))
    rng = random.Random(4)
    checked = 0
    for r in rows[:8]:
        src = f'start: "<" %json {json.dumps(r["schema"])} ">"'
        if ignored:
            src += '\n%ignore " "'
        try:
            g = maskpar.compile_grammar(tok, src, syntax="lark")
        except ValueError:
            continue
        for t in r["tests"]:
            if not t["valid"]:
                continue
            text = f"<{json.dumps(reorder(t['data'], r['schema']), ensure_ascii=False)}>"
            m = maskpar.Matcher(g)
            for b in text.encode():
                m.fill_next_token_bitmask(bm)
                words = bm[0]
                for x in rng.sample(range(len(vocab)), 120) + [b]:
                    bit = (int(words[x >> 5]) >> (x & 31)) & 1
                    took = m.consume_token(x)
                    if took:
                        m.rollback(1)
                    assert bool(bit) == took, (r["file"], text, vocab[x])
                assert m.consume_token(b)
                checked += 1
    assert checked > 300


def test_a_block_after_a_backed_off_terminal_keeps_its_splits(tok):
    """`A` may read on (`a1x`) or end after `a`: the integer blocks after
    the shorter `A` still split every way (the longer match's guard rides
    along with each block scan, and dies at `2`)."""
    g = lark(tok, 'start: A x x\nA: /a(1x)?/\nx: %json {"type":"integer"}')
    for text, ok in [
        ("a12", True),
        ("a123", True),
        ("a1x12", True),
        ("a1x1", False),
        ("a1", False),
    ]:
        assert accepts(g, text) == ok, text


def test_repeated_splitting_blocks_stay_linear():
    """`x+` of integer blocks: every digit may end a block, so the ends of
    all blocks at one byte make one set (a set per branch doubled the scans
    with every digit: 16 digits passed the frontier bound, and a fill with
    long digit tokens ran out of memory)."""
    import time

    vocab = [bytes([i]) for i in range(256)] + [b"1" * k for k in range(2, 17)] + [b"<eos>"]
    tok = maskpar.Tokenizer.from_vocab(vocab, [len(vocab) - 1])
    g = lark(tok, 'start: x+\nx: %json {"type":"integer"}')
    bm = new_bitmask(1, len(vocab))
    start = time.perf_counter()
    m = maskpar.Matcher(g)
    for _ in range(40):
        m.fill_next_token_bitmask(bm)
        assert all((int(bm[0][x >> 5]) >> (x & 31)) & 1 for x in range(256, len(vocab) - 1))
        assert m.consume_token(ord("1"))
    assert m.is_accepting()
    assert time.perf_counter() - start < 5


# Grammars whose blocks end greedily (a number or a string is over where the
# next byte cannot continue it), next to their language as a regex: the
# mask's ends of a block lexeme before bytes that nothing after it reads are
# dropped without a parser walk, which must keep exactly the bytes that the
# grammar's own terminals, its `%ignore` and other blocks start with.
GREEDY_BLOCKS = [
    (
        'start: "<" %json {"type": "integer"} ("," NAME)*\nNAME: /[a-z]+/\n%ignore " "',
        r" *<-?(?:0|[1-9][0-9]*)(?: *, *[a-z]+)* *",
        "<-0123,ab ",
    ),
    (
        'start: %json {"type": "string", "maxLength": 3} (";" %json {"type": "boolean"})*',
        r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"(?:;(?:true|false))*',
        '"a\\;truefls',
    ),
    (
        'start: "[" %json {"type": "number"} ("," %json {"type": "integer"})* "]"',
        # A JSON Schema integer may be written with a zero fraction (`1.0`).
        r"\[-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?(?:,-?(?:0|[1-9][0-9]*)(?:\.0+)?)*\]",
        "[]-0.15e+,",
    ),
]


@pytest.mark.parametrize(("grammar", "language", "alphabet"), GREEDY_BLOCKS)
def test_greedy_block_ends_match_a_regex_oracle(grammar, language, alphabet):
    """Every token's bit along random walks equals whether the text so far
    plus the token is a prefix of the language (Python `regex` partial
    matching), with tokens of one to three bytes that cross a block's end."""
    import regex

    if "maxLength" in grammar:
        language = language.replace(')*"', '){0,3}"', 1)
    pattern = regex.compile(language)
    rng = random.Random(5)
    grams = {a + b for a in alphabet for b in alphabet}
    grams |= {"".join(rng.choice(alphabet) for _ in range(3)) for _ in range(300)}
    texts = sorted(set(alphabet) | grams)
    vocab = [t.encode() for t in texts] + [b"<eos>"]
    eos = len(vocab) - 1
    tok = maskpar.Tokenizer.from_vocab(vocab, [eos])
    g = maskpar.compile_grammar(tok, grammar, syntax="lark")
    bm = new_bitmask(1, len(vocab))
    checked = 0
    for _ in range(12):
        m = maskpar.Matcher(g)
        prefix = ""
        for _ in range(14):
            m.fill_next_token_bitmask(bm)
            allowed = check_row_by_partial_match(bm[0], texts, eos, pattern, prefix, grammar)
            checked += 1
            if not allowed:
                break
            x = rng.choice(allowed)
            assert m.consume_token(x)
            prefix += texts[x]
    assert checked > 60
