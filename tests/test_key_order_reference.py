"""``key_order="schema"`` against the engines it must agree with, xgrammar
and llguidance, on the MaskBench sample (``tests/data/maskbench``):

* the sample's valid instances, members re-ordered into schema order
  (``schema_order.reorder``, computed from the schema alone) and written by
  ``json.dumps``: what a reference accepts, maskpar accepts;
* texts sampled by following maskpar's masks: every reference that compiled
  the schema accepts them.

Each engine reads a byte vocabulary, so tokenization plays no part. The
differences that remain are listed in ``KNOWN`` with their reason, and the
test checks that the list stays exact (a fixed case must leave it).
"""

from __future__ import annotations

import gzip
import json
import random
import re

import pytest
from schema_order import reorder

import maskpar
from conftest import BYTES, EOS, MASKBENCH_SAMPLE, accepts, llguidance_bytes_tokenizer, random_walk

xgrammar = pytest.importorskip("xgrammar")
llguidance = pytest.importorskip("llguidance")

# Files of the sample checked (the first ones, for a modest run time).
FILES = 150
WALKS = 2

# (engine, file, what) -> why. "refused" a reference refuses a text sampled
# from maskpar's masks; "rejected" maskpar rejects a re-ordered instance a
# reference accepts.
KNOWN: dict[tuple[str, str, str], str] = {
    ("xgrammar", "Github_easy---o70328.json", "refused"): (
        "no `type`: xgrammar reads a schema with `properties` as an object schema, "
        "JSON Schema (and maskpar) let any non-object value through, such as 6"
    ),
}


@pytest.fixture(scope="module")
def engines():
    tok = maskpar.Tokenizer.from_vocab(BYTES, [EOS])
    info = xgrammar.TokenizerInfo(
        BYTES[:256] + [b""], vocab_type=xgrammar.VocabType.RAW, stop_token_ids=[EOS]
    )
    xg = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False)
    return tok, xg, llguidance_bytes_tokenizer()


def xgrammar_accepts(compiled, text: str) -> bool:
    m = xgrammar.GrammarMatcher(compiled)
    return m.accept_string(text) and m.accept_token(EOS)


def llguidance_accepts(llt, grammar: str, text: str) -> bool:
    m = llguidance.LLMatcher(llt, grammar, log_level=0)
    ok = m.consume_tokens(list(text.encode())) and not m.is_error()
    return ok and m.is_accepting()


def comparable(text: str | None) -> str | None:
    """The walk's value as ``json.dumps`` writes it (members in the walk's
    order), or None if it holds what the engines are known to write
    differently, order aside: escapes, control or non-ASCII characters in
    strings, and numbers with a fraction or an exponent (xgrammar and
    llguidance refuse ``8.0`` for an integer, and bound digits and
    exponents their own ways)."""
    if text is None:
        return None
    value = json.loads(text, object_pairs_hook=dict)
    again = json.dumps(value, ensure_ascii=False)
    outside = re.sub(r'"[ !#-\[\]-~]*"', '""', again)
    if '"' in outside or re.search(r"[.eE]", outside):
        return None
    return again


def load() -> list[dict]:
    with gzip.open(MASKBENCH_SAMPLE, "rt") as f:
        return [json.loads(line) for line in f][:FILES]


def test_schema_order_agrees_with_xgrammar_and_llguidance(engines):
    tok, xg, llt = engines
    found: dict[tuple[str, str, str], str] = {}
    compared = 0
    for rec in load():
        schema, name = rec["schema"], rec["file"]
        try:
            g = maskpar.compile_json_schema(tok, schema, key_order="schema")
        except ValueError:
            continue
        refs = {}
        try:
            compiled = xg.compile_json_schema(
                json.dumps(schema), any_whitespace=True, strict_mode=False
            )
            refs["xgrammar"] = lambda text, c=compiled: xgrammar_accepts(c, text)
        except Exception:  # a reference's refusal: nothing to compare
            pass
        lark = llguidance.LLMatcher.grammar_from_json_schema(
            json.dumps(schema), defaults={"whitespace_flexible": True}
        )
        if not llguidance.LLMatcher(llt, lark, log_level=0).is_error():
            refs["llguidance"] = lambda text, gr=lark: llguidance_accepts(llt, gr, text)
        rng = random.Random(name)
        walks = [random_walk(g, rng, 400) for _ in range(WALKS)]
        walks = [t for t in map(comparable, walks) if t is not None and accepts(g, t)]
        for ref, ref_accepts in refs.items():
            for test in rec["tests"]:
                if not test["valid"]:
                    continue
                text = json.dumps(reorder(test["data"], schema), ensure_ascii=False)
                compared += 1
                if ref_accepts(text) and not accepts(g, text):
                    found[(ref, name, "rejected")] = text[:200]
            for text in walks:
                if not ref_accepts(text):
                    found[(ref, name, "refused")] = text[:200]
    assert compared > 100
    unexplained = {k: v for k, v in found.items() if k not in KNOWN}
    assert not unexplained, json.dumps([[*k, v] for k, v in unexplained.items()], indent=1)
    assert set(KNOWN) <= set(found), set(KNOWN) - set(found)


MERGES = [
    # allOf members first, then the schema's own properties.
    (
        {
            "type": "object",
            "allOf": [{"properties": {"b": {}}}, {"properties": {"a": {}, "c": {}}}],
            "properties": {"c": {}, "d": {}},
        },
        [
            '{"b":1,"a":2,"c":3,"d":4}',
            '{"c":1,"d":2,"b":3,"a":4}',
            '{"b":1,"d":2}',
            '{"d":1,"b":2}',
        ],
    ),
    # A $ref's properties before its siblings'.
    (
        {
            "$defs": {"X": {"properties": {"b": {}, "a": {}}}},
            "type": "object",
            "$ref": "#/$defs/X",
            "properties": {"c": {}},
        },
        ['{"b":1,"a":2,"c":3}', '{"c":1,"b":2,"a":3}'],
    ),
    # anyOf branches after the schema's own properties (xgrammar puts them first).
    (
        {
            "type": "object",
            "properties": {"a": {}, "b": {}},
            "anyOf": [
                {"properties": {"c": {}}, "required": ["c"]},
                {"properties": {"d": {}}, "required": ["d"]},
            ],
        },
        ['{"a":1,"b":2,"c":3}', '{"c":3,"a":1}', '{"a":1,"d":3}'],
    ),
    # Names only `required` lists, in its order (xgrammar takes any order).
    (
        {"type": "object", "properties": {"b": {}, "a": {}}, "required": ["z", "y", "a"]},
        ['{"b":1,"a":2,"z":3,"y":4}', '{"b":1,"a":2,"y":3,"z":4}', '{"z":1,"y":2,"b":1,"a":2}'],
    ),
    # Pattern members after the listed ones (xgrammar takes them anywhere).
    (
        {
            "type": "object",
            "properties": {"b": {}, "a": {}},
            "patternProperties": {"^x": {"type": "integer"}},
        },
        ['{"b":1,"a":2,"x":3}', '{"x":3,"b":1}', '{"b":1,"x":"s"}'],
    ),
]


@pytest.mark.parametrize(("schema", "texts"), MERGES)
def test_merged_schemas_order_members_as_llguidance_does(engines, schema, texts):
    tok, _, llt = engines
    g = maskpar.compile_json_schema(tok, schema, key_order="schema")
    lark = llguidance.LLMatcher.grammar_from_json_schema(
        json.dumps(schema), defaults={"whitespace_flexible": True}
    )
    for text in texts:
        assert accepts(g, text) == llguidance_accepts(llt, lark, text), text
