"""JSON Schema layouts: `indent=` and `separators=` take exactly the text
`json.dumps` writes with the same arguments, for exactly the values the
schema validates (`jsonschema` is the oracle), and masks never lead
anywhere else (random walks are laid out again by `json.dumps`)."""

from __future__ import annotations

import json
import random
import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import maskpar
from conftest import BYTES, EOS, accepts, random_walk

KEYS = ["name", "age", "tags", "v", "kids", "x", "a", "b", "p1"]

# Schemas and a few values each validates (generated values rarely do).
LAYOUT_SCHEMAS: list[tuple[object, list[object]]] = [
    (
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "maxLength": 4},
                "age": {"type": "integer"},
                "tags": {"type": "array", "items": {"enum": ["a", 3, None, []]}},
            },
            "required": ["name"],
            "additionalProperties": False,
        },
        [{"name": "x"}, {"age": 2, "name": "", "tags": ["a", [], None]}, {"name": "a", "tags": []}],
    ),
    (
        {
            "$defs": {
                "node": {
                    "type": "object",
                    "properties": {
                        "v": {"type": "integer"},
                        "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                    },
                    "additionalProperties": False,
                }
            },
            "$ref": "#/$defs/node",
        },
        [{}, {"v": 1, "kids": [{"kids": [{"v": 2}, {}]}, {"v": 3, "kids": []}]}],
    ),
    (
        {"anyOf": [{"const": {"x": [1, {"a": []}, {}]}}, {"type": "array", "maxItems": 0}]},
        [{"x": [1, {"a": []}, {}]}, []],
    ),
    (
        {
            "type": "array",
            "prefixItems": [{"type": "integer"}, {"type": "object"}],
            "items": {"type": "array"},
        },
        [[], [1], [1, {"a": [1, 2]}], [1, {}, [], [[3]]]],
    ),
    (
        {"type": "array", "contains": {"type": "object"}, "maxItems": 3},
        [[{}], [1, {"a": 1}], [[], {}, None]],
    ),
    ({}, [None, [1, [2, {"a": {"b": []}}]], {"x": {}, "y": [True]}]),
    ({"enum": [[], {}, [1, [2]], {"a": {"b": []}}]}, [[], {}, [1, [2]], {"a": {"b": []}}]),
    (
        {
            "type": "object",
            "patternProperties": {"^p": {"type": "integer"}},
            "additionalProperties": {"type": "array"},
            "required": ["a"],
            "minProperties": 2,
        },
        [{"a": [], "p1": 3}, {"p1": 1, "a": [{}], "x": []}],
    ),
]

LAYOUTS: list[dict] = [
    {"indent": 2},
    {"indent": "\t"},
    {"indent": 0},
    {"indent": 3, "separators": (" ,", " :  ")},
    {"separators": (",", ":")},
]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(KEYS),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=3)
    ),
    max_leaves=8,
)


@pytest.fixture(scope="module")
def byte_tok():
    return maskpar.Tokenizer.from_vocab(BYTES, [EOS])


@pytest.fixture(scope="module")
def compiled(byte_tok):
    """Each schema compiled in each layout, once."""
    return {
        (i, j): maskpar.compile_json_schema(byte_tok, schema, **layout)
        for i, (schema, _) in enumerate(LAYOUT_SCHEMAS)
        for j, layout in enumerate(LAYOUTS)
    }


def text_validator(jsonschema):
    """Draft 2020-12 with integers as maskpar writes them (docs/json-schema.md).

    JSON Schema counts `1e+16` (how `json.dumps` writes the float 1e16) as an
    integer; maskpar's integers take no exponent, as the reference engines'
    do, so a float counts as an integer here only where its text has none.
    """
    base = jsonschema.Draft202012Validator
    plain = base.TYPE_CHECKER.is_type

    def integer(checker, value) -> bool:
        if isinstance(value, float) and "e" in repr(value):
            return False
        return plain(value, "integer")

    checker = base.TYPE_CHECKER.redefine("integer", integer)
    return jsonschema.validators.extend(base, type_checker=checker)


def test_an_integer_with_an_exponent_is_not_taken(byte_tok):
    jsonschema = pytest.importorskip("jsonschema")
    schema = {"type": "integer"}
    g = maskpar.compile_json_schema(byte_tok, schema)
    for value in (1e16, -1e17, 16.0, 3):
        text = json.dumps(value)
        assert accepts(g, text) == text_validator(jsonschema)(schema).is_valid(value), text
    assert jsonschema.Draft202012Validator(schema).is_valid(1e16)
    assert not accepts(g, "1e+16") and accepts(g, "10000000000000000")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(which=st.integers(0, len(LAYOUT_SCHEMAS) - 1), generated=json_values, pick=st.integers(0, 7))
@example(which=3, generated=[1e16], pick=7)  # `[1e+16]`: an integer to jsonschema, not to maskpar
def test_layouts_take_exactly_what_json_dumps_writes(compiled, which, generated, pick):
    jsonschema = pytest.importorskip("jsonschema")
    schema, valid_values = LAYOUT_SCHEMAS[which]
    value = valid_values[pick] if pick < len(valid_values) else generated
    valid = text_validator(jsonschema)(schema).is_valid(value)
    texts = [json.dumps(value, ensure_ascii=False, **layout) for layout in LAYOUTS]
    for j, text in enumerate(texts):
        g = compiled[(which, j)]
        assert accepts(g, text) == valid, (schema, LAYOUTS[j], text)
        for other in set(texts + [json.dumps(value)]) - {text}:
            assert not accepts(g, other), (schema, LAYOUTS[j], other)


JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|-?[0-9][0-9.eE+-]*|[\[\]{},:]|true|false|null|\s+')


def layout_of(text: str) -> list[str]:
    """The text's tokens with every string and number alike: its layout."""
    tokens = JSON_TOKEN.findall(text)
    assert "".join(tokens) == text, text
    return ['""' if t.startswith('"') else "0" if t[0] in "-0123456789" else t for t in tokens]


def no_duplicate_keys(pairs: list[tuple[str, object]]) -> dict:
    keys = [k for k, _ in pairs]
    if len(set(keys)) < len(keys):
        raise ValueError("duplicate keys")  # json.dumps could not lay it out again
    return dict(pairs)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    which=st.integers(0, len(LAYOUT_SCHEMAS) - 1),
    layout=st.integers(0, len(LAYOUTS) - 1),
    seed=st.integers(0, 2**32 - 1),
)
def test_walks_that_follow_the_mask_are_laid_out_as_json_dumps_would(compiled, which, layout, seed):
    jsonschema = pytest.importorskip("jsonschema")
    schema, _ = LAYOUT_SCHEMAS[which]
    text = random_walk(compiled[(which, layout)], random.Random(seed), 400)
    if text is None:
        return  # the walk did not finish within the length budget
    try:
        # Numbers as zeros: json.dumps would write 1e999 as Infinity.
        shape = json.loads(text, object_pairs_hook=no_duplicate_keys, parse_float=lambda _: 0.0)
    except ValueError:
        return
    jsonschema.Draft202012Validator(schema).validate(json.loads(text))
    again = json.dumps(shape, ensure_ascii=False, **LAYOUTS[layout])
    assert layout_of(text) == layout_of(again), (text, again)


def nested_arrays(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_indented_containers_nest_up_to_the_documented_bound(byte_tok):
    g = maskpar.compile_json_schema(byte_tok, {}, indent=1)
    bound = maskpar.MAX_INDENT_DEPTH
    assert accepts(g, json.dumps(nested_arrays(bound + 1), indent=1))  # the innermost is empty
    assert not accepts(g, json.dumps(nested_arrays(bound + 2), indent=1))
    # A recursive schema at the bound: each tree level is an object and its array.
    tree = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}}
    g = maskpar.compile_json_schema(byte_tok, tree, indent=2)
    value: dict = {}
    for _ in range(bound // 2):
        value = {"kids": [value]}
    assert accepts(g, json.dumps(value, indent=2))


def test_negative_and_zero_indents_and_json_whitespace_strings(byte_tok):
    schema = {"type": "array", "items": {"type": "integer"}}
    for indent, same_as in [(-3, 0), (0, ""), (2, "  "), ("\r\n", "\r\n")]:
        g = maskpar.compile_json_schema(byte_tok, schema, indent=indent)
        assert accepts(g, json.dumps([1, 2], indent=same_as))


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"indent": "--"}, ValueError, "JSON whitespace"),
        ({"indent": 1.5}, TypeError, "indent must be"),
        ({"indent": 10**30}, ValueError, "at most 64"),
        ({"separators": (";", ":")}, ValueError, "item separator"),
        ({"separators": (",", " ")}, ValueError, "key separator"),
        ({"separators": (",,", ":")}, ValueError, "item separator"),
    ],
)
def test_bad_layouts_are_refused_clearly(byte_tok, options, error, message):
    with pytest.raises(error, match=message):
        maskpar.compile_json_schema(byte_tok, {}, **options)
