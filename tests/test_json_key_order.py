"""``key_order="schema"`` and the flexible-whitespace options of
compile_json_schema: examples, then walks that follow maskpar's masks,
judged by ``jsonschema`` and by an order computed from the schema alone
(``schema_order``)."""

from __future__ import annotations

import itertools
import json
import random
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schema_order import Pairs, in_schema_order, pairs_to_value

import maskpar
from conftest import BYTES, EOS, accepts, random_walk

jsonschema = pytest.importorskip("jsonschema")


@pytest.fixture(scope="module")
def tok():
    return maskpar.Tokenizer.from_vocab(BYTES, [EOS])


PERSON = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string"},
        "answer": {"type": "integer"},
        "note": {"type": "boolean"},
    },
    "required": ["answer", "id"],
}


@pytest.mark.parametrize(
    ("schema", "text", "ok"),
    [
        (PERSON, '{"reasoning": "r", "answer": 1, "id": 0}', True),
        (PERSON, '{"answer": 1, "id": 0}', True),
        (PERSON, '{"answer": 1, "reasoning": "r", "id": 0}', False),  # out of order
        (PERSON, '{"id": 0, "answer": 1}', False),  # required-only names come after
        (PERSON, '{"answer": 1, "id": 0, "x": [1]}', True),  # additional members last
        (PERSON, '{"answer": 1, "x": [1], "id": 0}', False),
        (PERSON, '{"answer": 1, "id": 0, "x": 1, "y": 2}', True),
        (PERSON, '{"answer": 1, "id": 0, "y": 1, "x": 2}', True),  # in any order
        (PERSON, '{"answer": 1, "id": 0, "answer": 2}', False),
        (PERSON, '{"reasoning": "r", "id": 0}', False),  # answer is required
        (
            {**PERSON, "required": ["answer"], "additionalProperties": False},
            '{"answer": 1, "x": 1}',
            False,
        ),
        (
            {**PERSON, "required": ["answer"], "additionalProperties": False},
            '{"answer": 1, "note": true}',
            True,
        ),
        ({"required": ["b", "a"]}, '{"b": 1, "a": 2}', True),  # required's own order
        ({"required": ["b", "a"]}, '{"a": 1, "b": 2}', False),
        ({"const": {"b": 1, "a": [{"d": 1, "c": 2}]}}, '{"b": 1, "a": [{"d": 1, "c": 2}]}', True),
        ({"const": {"b": 1, "a": 2}}, '{"a": 2, "b": 1}', False),  # the value's own order
        ({"enum": [{"b": 1, "a": 2}, 3]}, '{"b":1,"a":2}', True),
        # Counted and dependent members go through member sets, in order too.
        ({**PERSON, "minProperties": 3}, '{"answer": 1, "id": 0}', False),
        ({**PERSON, "minProperties": 3}, '{"answer": 1, "note": true, "id": 0}', True),
        ({**PERSON, "minProperties": 3}, '{"answer": 1, "id": 0, "z": 0}', True),
        ({**PERSON, "minProperties": 3}, '{"answer": 1, "id": 0, "note": true}', False),
        ({**PERSON, "maxProperties": 2}, '{"answer": 1, "id": 0}', True),
        ({**PERSON, "maxProperties": 2}, '{"reasoning": "", "answer": 1, "id": 0}', False),
        (
            {**PERSON, "dependentRequired": {"note": ["reasoning"]}},
            '{"answer": 1, "note": true, "id": 0}',
            False,
        ),
        (
            {**PERSON, "dependentRequired": {"note": ["reasoning"]}},
            '{"reasoning": "", "answer": 1, "note": true, "id": 0}',
            True,
        ),
        (
            {"properties": {"a": {}, "bbb": {}}, "propertyNames": {"maxLength": 2}},
            '{"a": 1, "bbb": 0}',
            False,
        ),
        (
            {"properties": {"a": {}, "bbb": {}}, "propertyNames": {"maxLength": 2}},
            '{"a": 1, "zz": 0}',
            True,
        ),
        (
            {"properties": {"a": {}, "b": {}}, "patternProperties": {"^x": {"type": "integer"}}},
            '{"a": 1, "x1": 2, "q": 3}',
            True,
        ),
        (
            {"properties": {"a": {}, "b": {}}, "patternProperties": {"^x": {"type": "integer"}}},
            '{"x1": 2, "a": 1}',
            False,
        ),
        (
            {"properties": {"a": {}, "b": {}}, "patternProperties": {"^x": {"type": "integer"}}},
            '{"a": 1, "x1": "s"}',
            False,
        ),
    ],
)
def test_schema_order_examples(tok, schema, text, ok):
    g = maskpar.compile_json_schema(tok, schema, key_order="schema")
    assert accepts(g, text) == ok
    if ok:
        assert jsonschema.Draft202012Validator(schema).is_valid(json.loads(text))


def test_schema_order_has_no_property_count_limit(tok):
    names = [f"p{i}" for i in range(1000)]
    schema = {
        "type": "object",
        "properties": {n: {"type": "integer"} for n in names},
        "required": ["p999"],
    }
    with pytest.raises(ValueError, match="at most 128"):
        maskpar.compile_json_schema(tok, schema)
    g = maskpar.compile_json_schema(tok, schema, key_order="schema")
    assert accepts(g, '{"p3": 1, "p500": 2, "p999": 3}')
    assert not accepts(g, '{"p500": 1, "p3": 2, "p999": 3}')
    assert not accepts(g, '{"p3": 1}')
    big_const = {"const": {n: 1 for n in names}}
    g = maskpar.compile_json_schema(tok, big_const, key_order="schema")
    assert accepts(g, json.dumps(big_const["const"]))


def test_schema_order_counted_objects_have_no_property_count_limit(tok):
    """Member counts in schema order need no member set: 300 listed
    properties with a minimum and a maximum compile, and count exactly."""
    names = [f"p{i}" for i in range(300)]
    schema = {
        "type": "object",
        "properties": {n: {"type": "integer"} for n in names},
        "required": ["p7", "p250"],
        "minProperties": 3,
        "maxProperties": 4,
        "additionalProperties": {"type": "boolean"},
    }
    g = maskpar.compile_json_schema(tok, schema, key_order="schema")
    assert accepts(g, '{"p3": 1, "p7": 2, "p250": 3}')
    assert accepts(g, '{"p7": 2, "p250": 3, "z": true}')
    assert accepts(g, '{"p7": 2, "p100": 0, "p250": 3, "p299": 4}')
    assert not accepts(g, '{"p7": 2, "p250": 3}')  # two: at least three
    assert not accepts(g, '{"p1": 1, "p7": 2, "p9": 1, "p250": 3, "z": true}')  # five
    assert not accepts(g, '{"p7": 2, "p3": 1, "p250": 3}')  # out of order
    assert not accepts(g, '{"p7": 2, "z": true, "p250": 3}')  # unlisted before listed
    # Only `required` and a minimum: counts past it are not told apart.
    at_least = {"properties": {n: {} for n in names}, "minProperties": 2}
    g = maskpar.compile_json_schema(tok, at_least, key_order="schema")
    assert accepts(g, json.dumps({n: 1 for n in names[::7]}))
    assert not accepts(g, '{"p5": 1}')
    with pytest.raises(ValueError, match="member counts above 200"):
        maskpar.compile_json_schema(tok, {**at_least, "maxProperties": 201}, key_order="schema")


def _counted_schemas(rng: random.Random, count: int):
    """Small objects with member counts or dependencies, in every
    combination of the parts they meet: listed members (some required, some
    never allowed), unlisted ones allowed, refused or typed, a minimum, a
    maximum, `dependentRequired` between listed and other names."""
    extras = [None, False, {"type": "integer"}, {"type": "string"}]
    for _ in range(count):
        n = rng.randrange(4)
        props = {f"p{i}": rng.choice([{"type": "integer"}, {}, False]) for i in range(n)}
        schema = {"type": "object", "properties": props}
        required = [k for k in props if rng.random() < 0.3]
        if required:
            schema["required"] = required
        extra = rng.choice(extras)
        if extra is not None:
            schema["additionalProperties"] = extra
        lo = rng.choice([0, 0, 1, 2, 3])
        hi = rng.choice([None, 0, 1, 2, 3, 4])
        if lo:
            schema["minProperties"] = lo
        if hi is not None:
            schema["maxProperties"] = hi
        # Between listed names (a name only `dependentRequired` mentions is
        # placed as a listed one: a documented difference, pinned below).
        names = list(props)
        deps = {
            s: sorted(rng.sample([t for t in names if t != s], rng.randrange(1, n)))
            for s in rng.sample(names, rng.choice([0, 0, 1, 2]) if n >= 2 else 0)
        }
        if deps:
            schema["dependentRequired"] = deps
        if lo or hi is not None or deps:
            yield schema


def test_schema_order_counts_and_dependencies_equal_the_oracle_on_small_objects(tok):
    """Every text of up to five members (three listed names and two others,
    in every order) is accepted exactly when `jsonschema` validates it and
    its members come in schema order (`schema_order`); walks along the
    masks never stall and end in such texts."""
    keys = ["p0", "p1", "p2", "x", "y"]
    texts = [
        "{" + ", ".join(f'"{k}": 1' for k in combo) + "}"
        for size in range(len(keys) + 1)
        for combo in itertools.permutations(keys, size)
    ]
    rng = random.Random(5)
    checked = 0
    for schema in _counted_schemas(rng, 240):
        try:
            g = maskpar.compile_json_schema(tok, schema, key_order="schema")
        except ValueError as e:  # only a schema that no value satisfies
            assert re.search("matches no string|no value satisfies", str(e)), (schema, e)
            assert not any(
                jsonschema.Draft202012Validator(schema).is_valid(json.loads(t)) for t in texts
            )
            continue
        validator = jsonschema.Draft202012Validator(schema)
        for text in texts:
            value = json.loads(text, object_pairs_hook=Pairs)
            want = validator.is_valid(pairs_to_value(value)) and in_schema_order(value, schema)
            assert accepts(g, text) == want, json.dumps([schema, text])
        for _ in range(4):
            walked = random_walk(g, rng, 200)
            if walked is not None:
                value = json.loads(walked, object_pairs_hook=Pairs)
                assert validator.is_valid(pairs_to_value(value)), (schema, walked)
                assert in_schema_order(value, schema), (schema, walked)
        checked += 1
    assert checked > 80


def test_schema_order_dependencies_have_no_property_count_limit(tok):
    """`dependentRequired` in schema order: the chain carries the members
    dependencies name, so 300 properties compile; an object whose
    dependencies would take too many chain states keeps the member sets
    (up to 119 members) or is refused past them, with the reason."""
    names = [f"p{i}" for i in range(300)]
    schema = {
        "type": "object",
        "properties": {n: {"type": "integer"} for n in names},
        "dependentRequired": {"p10": ["p200"], "p250": ["p3", "p260"]},
        "maxProperties": 3,
    }
    g = maskpar.compile_json_schema(tok, schema, key_order="schema")
    assert accepts(g, '{"p10": 1, "p200": 2}')
    assert not accepts(g, '{"p10": 1, "p199": 2}')  # p10 needs p200
    assert accepts(g, '{"p3": 1, "p250": 2, "p260": 3}')
    assert not accepts(g, '{"p250": 2, "p260": 3}')  # p250 needs p3, before it
    assert not accepts(g, '{"p3": 1, "p10": 1, "p200": 2, "p250": 2}')  # four
    # Twenty dependencies reaching over each other: 2^20 chain states.
    crossing = {f"p{i}": [f"p{i + 40}"] for i in range(20)}
    few = {"properties": {n: {} for n in names[:100]}, "dependentRequired": crossing}
    g = maskpar.compile_json_schema(tok, few, key_order="schema")  # member sets
    assert accepts(g, '{"p0": 1, "p5": 1, "p40": 1, "p45": 1}')
    assert not accepts(g, '{"p0": 1, "p5": 1, "p40": 1}')
    many = {"properties": {n: {} for n in names[:150]}, "dependentRequired": crossing}
    with pytest.raises(ValueError, match="150 members with `dependentRequired`"):
        maskpar.compile_json_schema(tok, many, key_order="schema")


def test_names_only_dependencies_mention_come_after_the_listed_ones(tok):
    """A documented difference from the order the issue's references would
    give (neither reads `dependentRequired`): a name only
    `dependentRequired` mentions is placed after `properties` and the
    names only `required` lists, in its order, not among the unlisted
    members in any order."""
    schema = {
        "type": "object",
        "properties": {"p0": {}},
        "additionalProperties": {"type": "integer"},
        "dependentRequired": {"p2": ["x"]},
    }
    g = maskpar.compile_json_schema(tok, schema, key_order="schema")
    assert accepts(g, '{"p0": 1, "p2": 1, "x": 1, "y": 2}')
    assert accepts(g, '{"x": 1, "y": 2}')
    assert not accepts(g, '{"y": 2, "x": 1}')  # the oracle takes it: any order
    assert not accepts(g, '{"p2": 1}')  # x is required by p2


def test_counted_objects_take_many_unlisted_members_in_order(tok):
    # The count of unlisted members sits in the set's top byte: past 16 of
    # them its bits must not be read as listed members.
    schema = {"properties": {"a": {}, "b": {}}, "minProperties": 1, "maxProperties": 40}
    g = maskpar.compile_json_schema(tok, schema, key_order="schema")
    many = {"a": 0, **{f"x{i}": i for i in range(37)}}
    assert accepts(g, json.dumps(many))
    assert accepts(g, json.dumps({**many, "y": 1, "z": 2}))  # 40 members
    assert not accepts(g, json.dumps({**many, "y": 1, "z": 2, "w": 3}))  # at most 40
    assert not accepts(g, json.dumps({"x": 1, "a": 0}))


def test_refusals_are_clear(tok):
    with pytest.raises(ValueError, match="key_order must be 'any' or 'schema'"):
        maskpar.compile_json_schema(tok, {}, key_order="sorted")
    witness = {
        "type": "object",
        "properties": {"a": {}},
        "not": {"additionalProperties": {"type": "string"}},
    }
    with pytest.raises(ValueError, match="schema key order is not supported"):
        maskpar.compile_json_schema(tok, witness, key_order="schema")
    for bad in [r"\s*", "x?", " *|,", r"[ \x0b]*"]:
        with pytest.raises(ValueError, match="other than JSON whitespace"):
            maskpar.compile_json_schema(tok, {}, whitespace_pattern=bad)
    with pytest.raises(ValueError, match="whitespace_pattern"):
        maskpar.compile_json_schema(tok, {}, whitespace_pattern="(")
    with pytest.raises(ValueError, match="not both"):
        maskpar.compile_json_schema(tok, {}, whitespace_pattern=" *", max_whitespace=2)
    with pytest.raises(ValueError, match="flexible whitespace"):
        maskpar.compile_json_schema(tok, {}, whitespace="compact", max_whitespace=2)
    with pytest.raises(ValueError, match="flexible whitespace"):
        maskpar.compile_json_schema(tok, {}, indent=2, whitespace_pattern=" ?")
    for n in (-1, 10_001, 2**70):
        with pytest.raises(ValueError, match="max_whitespace must be from 0 to 10000"):
            maskpar.compile_json_schema(tok, {}, max_whitespace=n)


# -- walks -------------------------------------------------------------------

names = st.sampled_from(["a", "b", "c", "id", "zz", "k1"])
leaf = st.sampled_from(
    [
        {"type": "integer"},
        {"type": "string", "maxLength": 3},
        {"type": "boolean"},
        {},
        {"enum": [1, "x", None]},
    ]
)


def objects(children):
    def build(props, required, extra, counts, deps):
        schema: dict = {"type": "object", "properties": dict(props)}
        if required:
            schema["required"] = required
        if extra is not None:
            schema["additionalProperties"] = extra
        if counts is not None:
            lo, hi = sorted(counts)
            schema["minProperties"], schema["maxProperties"] = lo, hi
        elif deps and len(props) > 1:
            first, second = list(dict(props))[:2]
            schema["dependentRequired"] = {second: [first]}
        return schema

    return st.builds(
        build,
        st.lists(st.tuples(names, children), max_size=5, unique_by=lambda p: p[0]),
        st.lists(names, max_size=3, unique=True),
        st.one_of(st.none(), st.just(False), leaf),
        st.one_of(st.none(), st.tuples(st.integers(0, 4), st.integers(0, 5))),
        st.booleans(),
    )


schemas = st.recursive(leaf, objects, max_leaves=8).filter(lambda s: s.get("type") == "object")


def whitespace_runs(text: str) -> list[str]:
    """The whitespace between the text's JSON tokens (strings skipped)."""
    outside = re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)
    return re.findall(r"[ \t\n\r]+", outside)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=schemas, seed=st.integers(0, 2**32 - 1))
def test_walks_in_schema_order_validate_and_keep_the_order(tok, schema, seed):
    try:
        g = maskpar.compile_json_schema(tok, schema, key_order="schema", max_whitespace=2)
    except ValueError as e:
        assert "no value satisfies" in str(e) or "matches no string" in str(e), e
        return
    rng = random.Random(seed)
    for _ in range(3):
        text = random_walk(g, rng, 300)
        if text is None:
            continue
        pairs = json.loads(text, object_pairs_hook=Pairs)
        value = pairs_to_value(pairs)
        jsonschema.Draft202012Validator(schema).validate(value)
        assert in_schema_order(pairs, schema), (schema, text)
        assert all(len(run) <= 2 for run in whitespace_runs(text)), text


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pattern=st.sampled_from([" ?", "[ \\n]{0,3}", "\\n? *", "(?:\\t\\t)*", " {2}|"]),
    max_ws=st.sampled_from([None, 0, 1, 3]),
    seed=st.integers(0, 2**32 - 1),
)
def test_whitespace_options_are_honoured(tok, pattern, max_ws, seed):
    schema = {
        "type": "object",
        "properties": {"a": {"type": "array", "items": {"type": "integer"}}, "b": {}},
    }
    options = {"max_whitespace": max_ws} if max_ws is not None else {"whitespace_pattern": pattern}
    g = maskpar.compile_json_schema(tok, schema, key_order="schema", **options)
    rng = random.Random(seed)
    for _ in range(3):
        text = random_walk(g, rng, 200)
        if text is None:
            continue
        jsonschema.Draft202012Validator(schema).validate(json.loads(text))
        for run in whitespace_runs(text):
            if max_ws is not None:
                assert len(run) <= max_ws, text
            else:
                assert re.fullmatch(pattern, run), (pattern, text)


def test_whitespace_runs_past_the_bound_are_refused(tok):
    g = maskpar.compile_json_schema(tok, {"type": "array"}, max_whitespace=2)
    assert accepts(g, "[  1,  2  ]") and accepts(g, "[\n\t1]")
    assert not accepts(g, "[   1]")
    assert not accepts(g, "[1,   2]")
    assert accepts(g, '["   "]')  # inside strings whitespace is content
    g = maskpar.compile_json_schema(tok, {"type": "array"}, max_whitespace=0)
    assert accepts(g, "[1,2]") and not accepts(g, "[1, 2]")
    g = maskpar.compile_json_schema(tok, {"type": "object"}, whitespace_pattern="\\n? ?")
    assert (
        accepts(g, '{\n "a":\n 1}')
        and not accepts(g, '{  "a": 1}')
        and not accepts(g, '{ \n"a": 1}')
    )


@pytest.mark.parametrize(
    "layout", [{"indent": 2}, {"separators": (",", ":")}, {"whitespace": "compact"}, {}]
)
def test_schema_order_in_every_layout(tok, layout):
    schema = {
        **PERSON,
        "properties": {**PERSON["properties"], "nested": {"properties": {"y": {}, "x": {}}}},
    }
    g = maskpar.compile_json_schema(tok, schema, key_order="schema", **layout)
    dumps = {k: v for k, v in layout.items() if k != "whitespace"}
    if layout.get("whitespace") == "compact":
        dumps = {"separators": (",", ":")}
    good = {"reasoning": "r", "answer": 1, "nested": {"y": [], "x": {}}, "id": 0, "more": [1]}
    assert accepts(g, json.dumps(good, **dumps))
    for bad in (
        {"answer": 1, "reasoning": "r", "id": 0},
        {"answer": 1, "nested": {"x": 1, "y": 2}, "id": 0},
        {"answer": 1, "more": 1, "id": 0},
    ):
        assert not accepts(g, json.dumps(bad, **dumps))
    assert accepts(g, json.dumps({"answer": 1, "id": 0}, **dumps))


def test_the_harness_order_reads_a_root_reference_inside_a_branch(tok):
    """``schema_order`` (the harness the order tests and MaskBench's
    ``--key-order schema`` use) judges an ``anyOf`` branch with its
    ``$ref: "#"`` resolved against the whole schema, not the branch: an
    array of objects is the second branch here, and its objects come out in
    ``properties`` order, as maskpar requires."""
    from schema_order import reorder

    schema = {
        "anyOf": [
            {"type": "object", "properties": {"b": {}, "a": {}}},
            {"type": "array", "items": {"$ref": "#"}},
        ]
    }
    value = [{"a": 1, "b": 2}, [{"a": 3}]]
    ordered = reorder(value, schema)
    assert json.dumps(ordered) == '[{"b": 2, "a": 1}, [{"a": 3}]]'
    g = maskpar.compile_json_schema(tok, schema, key_order="schema")
    assert accepts(g, json.dumps(ordered))
    assert not accepts(g, json.dumps(value))


def test_the_harness_order_reads_pattern_members_schemas(tok):
    """``schema_order`` orders the inside of a member that only
    ``patternProperties`` describes by that pattern's schema."""
    from schema_order import reorder

    schema = {
        "type": "object",
        "patternProperties": {"^s": {"properties": {"b": {}, "a": {}}}},
        "additionalProperties": {"properties": {"y": {}, "x": {}}},
    }
    value = {"s1": {"a": 1, "b": 2}, "t": {"x": 1, "y": 2}}
    ordered = reorder(value, schema)
    assert json.dumps(ordered) == '{"s1": {"b": 2, "a": 1}, "t": {"y": 2, "x": 1}}'
    g = maskpar.compile_json_schema(tok, schema, key_order="schema")
    assert accepts(g, json.dumps(ordered))
    assert not accepts(g, json.dumps(value))
