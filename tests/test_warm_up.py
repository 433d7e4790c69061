"""The adapters' warm-up walk (maskpar.integrations._warm, _sample).

Warming a grammar must change no mask and no matcher, whatever the text
walked; the sample writer must answer any schema (hostile ones included)
quickly with a bounded text; and its samples of ordinary schemas must be
instances of them (checked with ``jsonschema``, an independent validator).
"""

from __future__ import annotations

import gzip
import json
import re
import time

import jsonschema
import numpy as np
import pytest

import maskpar
from conftest import LLAMA3_EOS, MASKBENCH_SAMPLE
from maskpar.integrations._sample import (
    ANY_TEXT,
    FREE_STRING,
    MAX_CHARS,
    json_sample,
    stag_sample,
)
from maskpar.integrations._warm import MAX_WARM_TOKENS, encoder, warm_json, warm_stag, warm_up

ORDINARY = [
    {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}},
    {
        "type": "object",
        "properties": {
            "when": {"type": "string", "format": "date-time"},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
            "score": {"type": "number"},
            "ok": {"type": "boolean"},
            "none": {"type": "null"},
        },
        "required": ["when", "tags"],
    },
    {"enum": ["red", "green"]},
    {"const": {"k": [1, 2]}},
    {"anyOf": [{"type": "integer"}, {"type": "string"}]},
    {
        "$defs": {"pt": {"type": "object", "properties": {"x": {"type": "number"}}}},
        "type": "array",
        "items": {"$ref": "#/$defs/pt"},
    },
    {
        "allOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}},
            {"properties": {"b": {"type": "integer"}}, "required": ["b"]},
        ]
    },
    {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
    {"type": ["string", "null"]},
    {"type": "array", "items": {"type": "integer"}, "maxItems": 1},
    {"type": "array", "items": {"type": "string"}, "maxItems": 0},
    True,
    {"type": "object", "additionalProperties": {"type": "integer"}},
    {"type": "object", "patternProperties": {"^x-[a-z]+$": {"type": "boolean"}}},
    {"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 1},
    {"type": "object", "additionalProperties": False},
]


@pytest.mark.parametrize("schema", ORDINARY, ids=range(len(ORDINARY)))
def test_samples_of_ordinary_schemas_are_instances(schema):
    text = json_sample(schema)
    assert text is not None
    jsonschema.validate(json.loads(text), schema)
    assert json_sample(json.dumps(schema)) == text  # JSON text or dict alike


def test_maps_get_three_members():
    """An object that lists no properties but takes others gets three
    members (as array items, see below), within its bounds and its key
    pattern."""
    assert list(json.loads(json_sample({"type": "object"}))) == ["key", "name", "id"]
    integers = {"type": "object", "additionalProperties": {"type": "integer"}}
    assert list(json.loads(json_sample(integers)).values()) == [1, 1, 1]
    one = json_sample({"type": "object", "additionalProperties": {}, "maxProperties": 1})
    assert len(json.loads(one)) == 1
    patterned = {"type": "object", "patternProperties": {"^x-[a-z]+$": {}}}
    keys = list(json.loads(json_sample(patterned)))
    assert len(keys) == 3 and re.fullmatch("x-[a-z]+", keys[0])
    # Listed properties, or no others allowed: no extra members.
    assert json_sample({"type": "object", "properties": {"a": {"const": 1}}}) == '{"a": 1}'
    assert json_sample({"type": "object", "additionalProperties": False}) == "{}"


def test_free_strings_hold_an_escape_that_splits_from_its_letter(llama3):
    """A string without a format or pattern holds ``.\\n``, which Llama-3
    splits as ``.\\`` then ``n``: the walk meets the state after a backslash
    (a lone ``\\n`` is one token, and the state is never filled at). A
    ``maxLength`` below it gets a plain cut string."""
    enc, _ = llama3
    text = json_sample({"type": "string"})
    assert json.loads(text) == FREE_STRING
    assert b".\\" in [enc.decode_single_token_bytes(t) for t in enc.encode(text)]
    assert json.loads(json_sample({"type": "string", "maxLength": 4})) == "some"
    # A pattern gets a text it matches (tests/test_regex_sample.py).
    pattern = "^[a-z ]+$"
    assert re.search(pattern, json.loads(json_sample({"type": "string", "pattern": pattern})))


def test_array_samples_hold_three_items_where_three_are_allowed():
    """The second item follows a comma after the first, the third a comma
    after a repeat: each one's states are new (a fourth item's are the
    third's), so a sample warms all three."""
    assert json.loads(json_sample({"type": "array", "items": {"type": "integer"}})) == [1, 1, 1]
    capped = {"type": "array", "items": {"type": "integer"}, "maxItems": 2}
    assert json.loads(json_sample(capped)) == [1, 1]
    capped = {"type": "array", "items": {"type": "integer"}, "maxItems": 1}
    assert json.loads(json_sample(capped)) == [1]


def nested(depth: int, make) -> dict:
    s: dict = {"type": "string"}
    for _ in range(depth):
        s = make(s)
    return s


HOSTILE = {
    "deep_items": nested(100_000, lambda s: {"type": "array", "items": s}),
    "deep_properties": nested(100_000, lambda s: {"type": "object", "properties": {"a": s}}),
    "deep_any_of": nested(100_000, lambda s: {"anyOf": [s]}),
    "ref_to_itself": {"$ref": "#"},
    "ref_cycle": {
        "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
        "$ref": "#/$defs/a",
    },
    "recursive_tree": {
        "type": "object",
        "properties": {"kids": {"type": "array", "items": {"$ref": "#"}, "minItems": 2}},
    },
    "wide_object": {
        "type": "object",
        "properties": {f"p{i}": {"properties": {"q": {}}} for i in range(100_000)},
    },
    "wide_all_of": {"allOf": [{"properties": {f"p{i}": {}}} for i in range(100_000)]},
    "huge_min_items": {"type": "array", "minItems": 10**12, "items": {"type": "integer"}},
    "huge_const": {"const": "x" * 1_000_000},
    "bad_ref": {"$ref": "#/nowhere/at/all"},
    "remote_ref": {"$ref": "https://example.com/schema.json"},
    "not_a_schema": [1, 2, 3],
    "odd_keywords": {"type": 7, "properties": [], "required": {}, "items": 3, "enum": []},
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_schemas_give_a_bounded_sample_quickly(name):
    t0 = time.perf_counter()
    text = json_sample(HOSTILE[name])
    assert time.perf_counter() - t0 < 1.0
    assert text is None or (isinstance(text, str) and len(text) <= MAX_CHARS)


def test_past_the_depth_bound_a_sample_holds_empty_values_not_null():
    """Nested past ``MAX_DEPTH``, an object or array is written empty (valid
    where nothing is required), so the walk goes on to the next member; a
    ``null`` there ended it."""
    schema = nested(
        9,
        lambda s: {
            "type": "object",
            "properties": {"a": s, "b": {"type": "array", "items": s}, "n": {"type": "integer"}},
        },
    )
    text = json_sample(schema)
    assert "null" not in text
    jsonschema.validate(json.loads(text), schema)


BOUNDED_NUMBERS = [
    {"type": "integer", "multipleOf": 7, "minimum": 10},
    {"type": "number", "exclusiveMinimum": 2, "exclusiveMaximum": 2.2},
    {"type": "integer", "minimum": 0, "exclusiveMinimum": 10},
    {"type": "integer", "minimum": 5, "maximum": 5},
    {"type": "number", "maximum": -3},
    {"type": "integer", "exclusiveMaximum": -3},
    {"type": "number", "minimum": 1.5},
    {"type": "integer", "minimum": 2.5, "maximum": 3.5},
]


@pytest.mark.parametrize("schema", BOUNDED_NUMBERS, ids=range(len(BOUNDED_NUMBERS)))
def test_numbers_keep_within_their_bounds(schema):
    jsonschema.validate(json.loads(json_sample(schema)), schema)


def test_draft4_exclusive_bounds_are_kept():
    for schema in [
        {"type": "integer", "minimum": 5, "exclusiveMinimum": True},
        {"type": "number", "minimum": 1.5, "exclusiveMinimum": True},
        {"type": "number", "maximum": 1.5, "exclusiveMaximum": True},
    ]:
        jsonschema.Draft4Validator(schema).validate(json.loads(json_sample(schema)))


def test_text_that_is_not_json_gives_no_sample():
    assert json_sample("{not json") is None
    assert json_sample(b"\xff\xfe") is None


def maskbench_cases(n: int) -> list[tuple[dict, str]]:
    out = []
    with gzip.open(MASKBENCH_SAMPLE, "rt", encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            valid = [t for t in rec["tests"] if t.get("valid")]
            if valid:
                out.append((rec["schema"], json.dumps(valid[0]["data"], ensure_ascii=False)))
            if len(out) == n:
                break
    return out


def masks_along(g: maskpar.Grammar, ids: list[int]) -> list[np.ndarray] | None:
    m = maskpar.Matcher(g)
    row = np.zeros((1, maskpar.bitmask_width(m.vocab_size)), dtype=np.int32)
    out = []
    for t in [*ids, None]:
        m.fill_next_token_bitmask(row, 0)
        out.append(row[0].copy())
        if t is not None and not m.consume_token(t):
            return None
    return out


@pytest.mark.parametrize("split_tokens", [False, True])
def test_warming_changes_no_mask(llama3, split_tokens):
    """Masks along each schema's own instance, tokenized two ways (the
    tokenizer's, and greedy longest-match, which splits the text elsewhere,
    as draft-tree tokens do): a grammar warmed along its sample, the same
    schema compiled cold (a ``$comment`` makes it a compile of its own, not
    the warmed grammar from the schema cache), and maskpar's sequential API
    on both; the sample is never the instance."""
    enc, tok = llama3
    checked = 0
    for schema, instance in maskbench_cases(40):
        if not isinstance(schema, dict):
            continue
        before = maskpar.schema_cache_info()["misses"]
        try:
            cold = maskpar.compile_json_schema(
                tok, {**schema, "$comment": f"cold {split_tokens}"}, key_order="schema"
            )
            warm = maskpar.compile_json_schema(
                tok, {**schema, "$comment": f"warm {split_tokens}"}, key_order="schema"
            )
        except ValueError:
            continue
        assert maskpar.schema_cache_info()["misses"] == before + 2, "a compile came from the cache"
        walked = warm_json(maskpar.Matcher(warm), schema, enc.encode, split_tokens)
        for ids in (enc.encode(instance), tok.encode_greedy(instance.encode())):
            want = masks_along(cold, ids)
            if want is None:
                continue  # an instance out of schema order: refused alike, not this test's business
            got = masks_along(warm, ids)
            assert got is not None and len(got) == len(want)
            for i, (a, b) in enumerate(zip(got, want)):
                assert np.array_equal(a, b), f"schema {checked}: mask {i} differs after warm-up"
        checked += walked > 0
    assert checked >= 10, "too few schemas were warmed to say anything"


def test_split_walk_leaves_the_matcher_alone_and_counts_whole_tokens(llama3):
    """``split_tokens`` fills more states, not a different walk: the count is
    of the sample's own tokens, and the matcher does not move."""
    enc, tok = llama3
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    m = maskpar.Matcher(maskpar.compile_json_schema(tok, {**schema, "$comment": "split"}))
    ids = enc.encode('{"name": "Photo Editor, v2"}')
    assert m.warm_up(ids, split_tokens=True) == m.warm_up(ids) == len(ids)
    assert m.num_consumed == 0 and not m.is_terminated()
    assert m.consume_tokens(ids)


def test_warm_up_leaves_the_matcher_alone(llama3):
    enc, tok = llama3
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    g = maskpar.compile_json_schema(tok, schema)
    m = maskpar.Matcher(g)
    assert m.consume_token(enc.encode("{")[0])
    before = m.num_consumed
    ids = enc.encode('"a": "hello"}')
    assert warm_up(m, ids) == len(ids)
    assert m.num_consumed == before
    assert m.validate_tokens(ids) == len(ids)


def test_warm_up_stops_at_a_refused_token_and_at_its_bound(llama3):
    enc, tok = llama3
    g = maskpar.compile_regex(tok, "a+")
    m = maskpar.Matcher(g)
    a, b = enc.encode("a")[0], enc.encode("b")[0]
    assert warm_up(m, [a, a, b, a]) == 2
    assert warm_up(m, [a] * (MAX_WARM_TOKENS + 50)) == MAX_WARM_TOKENS


def test_matcher_warm_up_checks_ids_and_stops_after_the_end(llama3):
    """The native walk: ids outside the vocabulary raise before anything is
    walked; after EOS nothing more is consumed; a mid-text matcher walks
    on from where it stands and stays there."""
    enc, tok = llama3
    m = maskpar.Matcher(maskpar.compile_json_schema(tok, {"type": "integer"}))
    with pytest.raises(ValueError):
        m.warm_up([5, m.vocab_size])
    with pytest.raises(TypeError):
        m.warm_up(["1"])
    eos = LLAMA3_EOS[0]
    one = enc.encode("1")
    assert m.warm_up([*one, eos, *one]) == len(one) + 1
    assert m.warm_up([]) == 0 and m.num_consumed == 0
    assert m.consume_tokens(one)
    assert m.warm_up(one) == len(one) and m.num_consumed == len(one)


def test_the_walk_stops_at_an_id_the_model_lacks(llama3):
    """A tokenizer with more ids than the model: the walk goes up to the
    first such id (``Matcher.warm_up`` itself refuses the whole list)."""
    enc, tok = llama3
    g = maskpar.compile_regex(tok, "a+")
    a = enc.encode("a")[0]
    m = maskpar.Matcher(g)
    assert warm_up(m, [a, a, m.vocab_size + 5, a]) == 2
    assert warm_up(m, [-1, a]) == 0


def test_a_failing_tokenizer_only_skips_the_warm_up(llama3):
    _, tok = llama3
    m = maskpar.Matcher(maskpar.compile_json_schema(tok, {"type": "integer"}))

    def broken(text: str) -> list[int]:
        raise RuntimeError("tokenizer down")

    assert warm_json(m, {"type": "integer"}, broken) == 0
    assert m.num_consumed == 0


def test_encoder_drops_special_tokens_where_the_tokenizer_can():
    class HF:
        def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
            return ([1] if add_special_tokens else []) + [ord(c) for c in text]

    class Plain:
        def encode(self, text: str) -> list[int]:
            return [ord(c) for c in text]

    assert encoder(HF())("ab") == [97, 98]
    assert encoder(Plain())("ab") == [97, 98]


TOOLS = {
    "get_weather": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["city"],
    },
    "set_timer": {
        "type": "object",
        "properties": {"seconds": {"type": "integer"}, "label": {"type": "string"}},
    },
}


def tool_tags(typed: bool = True) -> list[dict]:
    """The tools as tags; ``typed=False`` leaves out ``"type": "tag"``, as
    xgrammar's tag model (and so many requests) allow."""
    return [
        {
            **({"type": "tag"} if typed else {}),
            "begin": f"<function={name}>",
            "content": {"type": "json_schema", "json_schema": schema},
            "end": "</function>",
        }
        for name, schema in TOOLS.items()
    ]


def triggered(**flags: bool) -> dict:
    return {
        "type": "structural_tag",
        "format": {
            "type": "triggered_tags",
            "triggers": ["<function="],
            "tags": tool_tags(typed=False),
            **flags,
        },
    }


STAGS = {
    "triggered": {
        "type": "structural_tag",
        "format": {"type": "triggered_tags", "triggers": ["<function="], "tags": tool_tags()},
    },
    "triggered_untyped_tags": triggered(),
    "triggered_at_least_one": triggered(at_least_one=True),
    "legacy": {
        "type": "structural_tag",
        "structures": [
            {"begin": f"<function={n}>", "schema": s, "end": "</function>"}
            for n, s in TOOLS.items()
        ],
        "triggers": ["<function="],
    },
    "think_then_calls": {
        "type": "structural_tag",
        "format": {
            "type": "sequence",
            "elements": [
                {
                    "type": "tag",
                    "begin": "<think>",
                    "content": {"type": "any_text"},
                    "end": "</think>",
                },
                {"type": "tags_with_separator", "tags": tool_tags(), "separator": "\n"},
            ],
        },
    },
}


def test_structural_tag_samples_hold_free_text_where_it_may_come(llama3):
    """Free text before triggered tags unless ``at_least_one`` asks for a tag
    first, after them unless ``stop_after_first``; inside an ``any_text``
    tag, a few words. Every sample is one the grammar takes whole."""
    enc, tok = llama3
    specs = {
        "plain": triggered(),
        "at_least_one": triggered(at_least_one=True),
        "stop_after_first": triggered(stop_after_first=True),
    }
    texts = {k: stag_sample(v) for k, v in specs.items()}
    assert texts["plain"].startswith(ANY_TEXT) and texts["plain"].endswith(ANY_TEXT)
    assert texts["at_least_one"].startswith("<function=")
    assert texts["at_least_one"].endswith(ANY_TEXT)
    assert texts["stop_after_first"].startswith(ANY_TEXT)
    assert texts["stop_after_first"].count("<function=") == 1
    assert texts["stop_after_first"].endswith("</function>")
    think = stag_sample(STAGS["think_then_calls"])
    assert think.startswith(f"<think>{ANY_TEXT}</think>")
    for name, spec in specs.items():
        m = maskpar.Matcher(maskpar.compile_structural_tag(tok, spec))
        assert warm_stag(m, spec, enc.encode) == len(enc.encode(texts[name])), name


@pytest.mark.parametrize("name", sorted(STAGS))
def test_structural_tag_samples_are_walked_whole(llama3, name):
    """The sample holds every tool call once and the grammar accepts all of
    it; warming along it changes no mask along another text."""
    enc, tok = llama3
    spec = STAGS[name]
    text = stag_sample(spec)
    assert text is not None and all(f"<function={n}>" in text for n in TOOLS)
    warm = maskpar.compile_structural_tag(tok, spec)
    assert warm_stag(maskpar.Matcher(warm), json.dumps(spec), enc.encode) == len(enc.encode(text))
    cold = maskpar.compile_structural_tag(tok, spec)
    other = '<function=set_timer>{"seconds": 300, "label": "tea"}</function>'
    if name == "think_then_calls":
        other = "<think>Two calls.</think>" + other
    ids = enc.encode(other)
    want = masks_along(cold, ids)
    assert want is not None
    got = masks_along(warm, ids)
    assert got is not None and all(np.array_equal(a, b) for a, b in zip(got, want))


def nested_format(depth: int) -> dict:
    f: dict = {"type": "const_string", "value": "x"}
    for _ in range(depth):
        f = {"type": "optional", "content": f}
    return {"type": "structural_tag", "format": f}


HOSTILE_STAGS = {
    "deep": nested_format(100_000),
    "deep_text": '{"type": "structural_tag", "format": '
    + '{"type": "optional", "content": ' * 100_000
    + '{"type": "const_string", "value": "x"}'
    + "}" * 100_001,
    "many_tags": {
        "type": "structural_tag",
        "format": {"type": "triggered_tags", "triggers": ["<"], "tags": tool_tags() * 50_000},
    },
    "odd_fields": {"type": "structural_tag", "format": {"type": "tag", "begin": 3, "end": [None]}},
    "not_an_object": [1, 2],
    "no_format": {"type": "structural_tag"},
}


@pytest.mark.parametrize("name", sorted(HOSTILE_STAGS))
def test_hostile_structural_tags_give_a_bounded_sample_quickly(name):
    t0 = time.perf_counter()
    text = stag_sample(HOSTILE_STAGS[name])
    assert time.perf_counter() - t0 < 1.0
    assert text is None or (isinstance(text, str) and len(text) <= 4 * MAX_CHARS)
