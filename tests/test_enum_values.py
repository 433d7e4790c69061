"""Enums of arrays and objects, many values as one lexeme (``cfg::valueunion``).

From 16 values that are arrays or objects (or other non-string,
non-integer values) a rule's alternatives are lexed as one automaton, the
union of the values' texts with flexible whitespace between their tokens.
Checked against ``jsonschema`` (an instance is valid iff it equals one of the
values) and, under ``key_order="schema"``, the value's own member order:

* every value, written by ``json.dumps`` compact, spaced and indented (and
  with its keys reversed, which any order accepts), is accepted iff the
  oracle says it is valid;
* other values (the values of another enum, values changed in one place)
  likewise;
* random walks that follow the masks end in texts the oracle accepts, and
  every byte the mask allows is consumed.
"""

from __future__ import annotations

import json
import random
import time
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import maskpar
from conftest import BYTES, EOS, accepts, random_walk

SCALARS = st.one_of(
    st.integers(-30, 10**6),
    st.sampled_from([0, -0.0, 0.5, -2.25, 3.0, 1e20, 1.5e-7, True, False, None]),
    st.text(alphabet='ab "\\é\n', max_size=3),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(alphabet="abk", min_size=1, max_size=2), inner, max_size=3)
    ),
    max_leaves=6,
)
CONTAINERS = st.one_of(
    st.lists(VALUES, max_size=3),
    st.dictionaries(st.text(alphabet="abk", min_size=1, max_size=2), VALUES, max_size=4),
)


@pytest.fixture(scope="module")
def byte_tok() -> maskpar.Tokenizer:
    return maskpar.Tokenizer.from_vocab(BYTES, [EOS])


def same_order(x: Any, v: Any) -> bool:
    """Whether every object in ``x`` lists its keys as ``v`` does there."""
    if isinstance(x, dict) and isinstance(v, dict):
        return list(x) == list(v) and all(same_order(x[k], v[k]) for k in x)
    if isinstance(x, list) and isinstance(v, list):
        return len(x) == len(v) and all(same_order(a, b) for a, b in zip(x, v))
    return True


def valid(x: Any, values: list[Any], key_order: str) -> bool:
    """The oracle: ``x`` equals a value (JSON Schema equality), in its order."""
    return any(
        jsonschema.Draft202012Validator({"const": v}).is_valid(x)
        and (key_order == "any" or same_order(x, v))
        for v in values
    )


def reversed_keys(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: reversed_keys(x[k]) for k in reversed(list(x))}
    if isinstance(x, list):
        return [reversed_keys(a) for a in x]
    return x


def changed(x: Any, rng: random.Random) -> Any:
    """``x`` with one scalar or one member changed."""
    if isinstance(x, list) and x:
        i = rng.randrange(len(x))
        return x[:i] + [changed(x[i], rng)] + x[i + 1 :]
    if isinstance(x, dict) and x:
        k = rng.choice(list(x))
        if rng.random() < 0.3:
            return {a: b for a, b in x.items() if a != k}
        return {**x, k: changed(x[k], rng)}
    return rng.choice([0, 1, "a", None, [], {}, 2.5, x if x != 7 else 8, 7])


def texts(x: Any, key_order: str) -> list[str]:
    out = [
        json.dumps(x, ensure_ascii=False),
        json.dumps(x, ensure_ascii=False, separators=(",", ":")),
        json.dumps(x, ensure_ascii=False, indent=1),
    ]
    if key_order == "any":
        out.append(json.dumps(reversed_keys(x), ensure_ascii=False, separators=(",", ":")))
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=st.lists(CONTAINERS, min_size=16, max_size=30),
    others=st.lists(VALUES, min_size=1, max_size=8),
    key_order=st.sampled_from(["any", "schema"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_many_container_values_are_exact(byte_tok, values, others, key_order, seed):
    rng = random.Random(seed)
    g = maskpar.compile_json_schema(byte_tok, {"enum": values}, key_order=key_order)
    candidates = values + others + [changed(v, rng) for v in values[:8]]
    candidates += [reversed_keys(v) for v in values[:8]]
    for x in candidates:
        want = valid(x, values, key_order)
        for text in texts(x, key_order):
            assert accepts(g, text) == want, (text, key_order)
    for _ in range(6):
        out = random_walk(g, rng, 400)
        if out is not None:
            assert valid(json.loads(out), values, key_order), (out, key_order)


def test_a_reordered_object_is_a_different_text_in_schema_order(byte_tok):
    values = [{"a": i, "b": [i, str(i)]} for i in range(40)]
    any_order = maskpar.compile_json_schema(byte_tok, {"enum": values})
    in_order = maskpar.compile_json_schema(byte_tok, {"enum": values}, key_order="schema")
    for text in ('{"b": [7, "7"], "a": 7}', '{ "b":[7,"7"] ,"a" : 7.0 }'):
        assert accepts(any_order, text)
        assert not accepts(in_order, text)
    for text in ('{"a": 7, "b": [7, "7"]}', '{"a":7.00,"b":[7,"7"]}'):
        assert accepts(any_order, text) and accepts(in_order, text)
    for text in ('{"a": 7, "b": [7, "8"]}', '{"a": 7, "b": [7, "7"], "a": 7}', '{"a": 7}'):
        assert not accepts(any_order, text) and not accepts(in_order, text)


@pytest.mark.parametrize(
    ("count", "key_order", "make"),
    [
        (10_000, "schema", lambda i: {"k": i, "v": [i, str(i)]}),
        (10_000, "any", lambda i: [i, str(i), {"a": i}]),
        # Both orders of each object: two million automaton states, nearly
        # all kept as lists (regex_dfa::sparse).
        (50_000, "any", lambda i: {"k": i, "v": str(i)}),
    ],
)
def test_many_container_values_compile_and_mask(byte_tok, count, key_order, make):
    """10,000 values: one lexeme, compiled in about a second on this machine,
    50,000 objects in under three (the bound here leaves room for a loaded CI
    machine); values and only values are accepted."""
    values = [make(i) for i in range(count)]
    start = time.perf_counter()
    g = maskpar.compile_json_schema(byte_tok, {"enum": values}, key_order=key_order)
    assert time.perf_counter() - start < 15
    assert g.num_states < 10  # one lexeme, not a rule per value
    rng = random.Random(7)
    for i in rng.sample(range(count), 20):
        assert accepts(g, json.dumps(values[i]))
        assert not accepts(g, json.dumps(make(i + count)))
        if isinstance(values[i], dict):
            reordered = dict(reversed(list(values[i].items())))
            assert accepts(g, json.dumps(reordered)) == (key_order == "any")
    for _ in range(5):
        out = random_walk(g, rng, 200)
        assert out is not None
        x = json.loads(out)
        assert x in values
        assert key_order == "any" or list(x) == ["k", "v"]


def test_past_the_automaton_bound_an_enum_is_refused_clearly(byte_tok):
    """100,000 three-item arrays need more than the 64 MiB automaton bound
    (``docs/limits.md``): a ValueError that says so, not a rule per value.
    (Objects in any order are records, ``test_enum_records.py``.)"""
    values = [[i, str(i), {"a": i}] for i in range(100_000)]
    with pytest.raises(ValueError, match="64 MiB bound"):
        maskpar.compile_json_schema(byte_tok, {"enum": values})
