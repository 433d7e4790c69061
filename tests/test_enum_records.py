"""Enums of many flat objects ("records") in any key order: one computed
automaton (``regex_dfa::records``), whose size follows the records' text,
not their 2^m orders and subsets.

Checked three ways, none of them maskpar's records code:

* every bitmask row along random walks equals the ``regex`` module's partial
  matching against the union of every order of every record (a vocabulary
  of JSON-shaped multi-byte tokens, so tokens cross keys, glue and values);
* rows along walks equal those of the same records written as an ``anyOf``
  of ``const``s (each spelled out order by order, or read with member sets
  past four members: the construction that came before), in every layout;
* ``jsonschema`` on walks with the Llama-3 vocabulary, and on each record
  written in shuffled key orders and changed in one place, at 10,000 and
  100,000 records.
"""

from __future__ import annotations

import itertools
import json
import random
import time
from typing import Any

import jsonschema
import numpy as np
import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import maskpar
from conftest import EOS, accepts, allowed_ids, new_bitmask, walk_checking_rows

KEYS = ["a", "b", "ab", "c", "é"]
SCALARS = [0, 2, 20, -1, 2.0, 2.5, 2.05, 1e20, -0.5, "", "x", "xy", 'q"\\', True, False, None]
# Values with whitespace runs inside: arrays, and objects (in any order).
NESTED = [[], [2], [2, "x"], [2.5, [0]], {}, {"a": 2}, {"a": [1], "b": None}]
WS = "[ \\t\\n\\r]*"

# Single characters of JSON text, and tokens that cross its parts.
TOKENS = sorted(
    set(' \t\n{}[],:"\\-.0123456789abcdefghijklmnopqrstuvwxyzé+E')
    | {'{"', '":', '": ', '", "', ', "', '"a', '"ab', 'b"', '":"', ".0", "00", "0}", '"}', "}}"}
    | {"true", "false", "null", "20", "2.", ".05", "e+", ' "', "  ", '"x"', '"é"'}
)


def record_strategy(max_members: int) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(
        st.sampled_from(KEYS),
        st.sampled_from(SCALARS + NESTED),
        min_size=1,
        max_size=max_members,
    )


def value_regex(v: Any) -> str:
    """The texts json.dumps may write for scalar ``v``: an integral number as
    an int or a float with any number of zeros (and its repr if that has an
    exponent), anything else as json.dumps writes it."""
    if isinstance(v, list):
        if not v:
            return f"\\[{WS}\\]"
        return f"\\[{WS}" + f"{WS},{WS}".join(value_regex(x) for x in v) + f"{WS}\\]"
    if isinstance(v, dict):
        if not v:
            return f"\\{{{WS}\\}}"
        orders = itertools.permutations(v.items())
        return "(?:" + "|".join(object_regex(order) for order in orders) + ")"
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return regex.escape(json.dumps(v, ensure_ascii=False))
    if float(v).is_integer() and abs(v) < 1e300:
        ints = "-?0" if v == 0 else regex.escape(str(int(v)))
        forms = [f"{ints}(?:\\.0+)?"]
        if "e" in json.dumps(v):
            forms.append(regex.escape(json.dumps(v)))
        return "(?:" + "|".join(forms) + ")"
    return regex.escape(json.dumps(v))


def object_regex(order: tuple[tuple[str, Any], ...]) -> str:
    """One order of an object's members, with flexible whitespace."""
    members = [
        f"{regex.escape(json.dumps(k, ensure_ascii=False))}{WS}:{WS}{value_regex(v)}"
        for k, v in order
    ]
    return f"\\{{{WS}" + f"{WS},{WS}".join(members) + f"{WS}\\}}"


def orders_pattern(records: list[dict[str, Any]]) -> Any:
    alts = [object_regex(order) for r in records for order in itertools.permutations(r.items())]
    return regex.compile("(?:" + "|".join(alts) + ")")


def distinct(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One of each record, by JSON Schema equality (True is not 1)."""
    out: list[dict[str, Any]] = []
    for r in records:
        if not any(jsonschema.Draft202012Validator({"const": o}).is_valid(r) for o in out):
            out.append(r)
    return out


@pytest.fixture(scope="module")
def token_tok() -> maskpar.Tokenizer:
    return maskpar.Tokenizer.from_vocab([t.encode() for t in TOKENS] + [b"<eos>"], [len(TOKENS)])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(record_strategy(3), min_size=16, max_size=22),
    seed=st.integers(0, 2**32 - 1),
)
def test_rows_equal_partial_matches_of_every_order(token_tok, records, seed):
    records = distinct(records)
    g = maskpar.compile_json_schema(token_tok, {"enum": records})
    pattern = orders_pattern(records)
    rng = random.Random(seed)

    def choose(allowed: list[int], prefix: str) -> int | None:
        if len(TOKENS) in allowed and (len(allowed) == 1 or rng.random() < 0.3):
            return None
        if len(prefix) > 120:
            return None
        return rng.choice([x for x in allowed if x != len(TOKENS)] or [None])

    walk_checking_rows(g, TOKENS, len(TOKENS), pattern, records, 3, choose)


def walk_both(a: maskpar.Grammar, b: maskpar.Grammar, rng: random.Random, steps: int) -> None:
    """Follows ``a``'s masks and asserts ``b``'s rows are the same."""
    ma, mb = maskpar.Matcher(a), maskpar.Matcher(b)
    ra, rb = new_bitmask(1, a.vocab_size), new_bitmask(1, b.vocab_size)
    for _ in range(steps):
        ma.fill_next_token_bitmask(ra)
        mb.fill_next_token_bitmask(rb)
        assert np.array_equal(ra, rb)
        ids = allowed_ids(ra)
        if not ids:
            return
        text_ids = [t for t in ids if t < 128]
        t = rng.choice(text_ids if text_ids and rng.random() < 0.9 else ids)
        if t == EOS or t >= a.vocab_size - 1:
            return
        assert ma.consume_token(t) and mb.consume_token(t)


LAYOUTS = [
    {},
    {"whitespace": "compact"},
    {"separators": (", ", ": ")},
    {"indent": 2},
    {"max_whitespace": 2},
    {"whitespace_pattern": "[ ]?"},
    {"indent": "\t", "separators": (",", ": ")},
]


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda d: json.dumps(d))
def test_rows_equal_the_spelled_out_orders_in_every_layout(llama3, layout):
    _, tok = llama3
    rng = random.Random(11)
    records = distinct(
        [{k: rng.choice(SCALARS) for k in rng.sample(KEYS, rng.randint(1, 5))} for _ in range(60)]
    )
    assert len(records) >= 16
    as_enum = maskpar.compile_json_schema(tok, {"enum": records}, **layout)
    spelled = maskpar.compile_json_schema(tok, {"anyOf": [{"const": r} for r in records]}, **layout)
    for _ in range(12):
        walk_both(as_enum, spelled, rng, 80)


def shuffled_text(r: dict[str, Any], rng: random.Random) -> str:
    items = list(r.items())
    rng.shuffle(items)
    seps = rng.choice([(", ", ": "), (",", ":"), (" ,\n", " :  ")])
    return json.dumps(dict(items), ensure_ascii=False, separators=seps)


def nested_table(count: int) -> list[dict[str, Any]]:
    """Rows whose members hold arrays and objects (their members in any
    order too)."""
    return [
        {
            "id": i,
            "tags": ["a", i % 5],
            "size": {"w": i % 7, "h": 2.5},
            "name": f"n{i}",
            "ok": i % 2 == 0,
            "dims": [[i % 3], []],
        }
        for i in range(count)
    ]


def reordered(x: Any, rng: random.Random) -> Any:
    """``x`` with every object's members shuffled."""
    if isinstance(x, dict):
        items = [(k, reordered(v, rng)) for k, v in x.items()]
        rng.shuffle(items)
        return dict(items)
    if isinstance(x, list):
        return [reordered(v, rng) for v in x]
    return x


def test_records_holding_arrays_and_objects_scale(llama3):
    """Members that are arrays or objects are texts with whitespace runs
    inside: 20,000 such rows are one records automaton too."""
    enc, tok = llama3
    records = nested_table(20_000)
    start = time.perf_counter()
    g = maskpar.compile_json_schema(tok, {"enum": records})
    assert time.perf_counter() - start < 10
    assert g.num_states < 10
    rng = random.Random(5)
    for i in rng.sample(range(len(records)), 15):
        text = json.dumps(reordered(records[i], rng), indent=rng.choice([None, 1]))
        assert accepts_tokens(g, enc.encode(text)), text
        changed = json.loads(json.dumps(records[i]))
        changed["size"]["h"] = 3
        assert not accepts_tokens(g, enc.encode(json.dumps(changed))), changed
        changed = json.loads(json.dumps(records[i]))
        changed["dims"] = [[i % 3]]
        assert not accepts_tokens(g, enc.encode(json.dumps(changed))), changed


def table(count: int, fields: int) -> list[dict[str, Any]]:
    """A product table: ids, names, a few kinds, numbers, flags, prices."""
    names = ["id", "name", "kind", "size", "live", "code", "price", "city"][:fields]
    make = [
        lambda i: i,
        lambda i: f"item {i}",
        lambda i: "abc"[i % 3],
        lambda i: i * 7 % 1000,
        lambda i: i % 2 == 0,
        lambda i: f"C{i:06d}",
        lambda i: round(i * 0.25 + 0.1, 2),
        lambda i: ["Paris", "Lyon", "Nice"][i % 3],
    ]
    return [{k: make[j](i) for j, k in enumerate(names)} for i in range(count)]


@pytest.mark.parametrize(("count", "fields"), [(10_000, 6), (100_000, 2), (20_000, 8)])
def test_large_record_enums_compile_and_stay_exact(llama3, count, fields):
    """10,000 six-field rows were refused before (a rule of member sets per
    row passed the lexeme bound); here they compile in about 0.1 s on this
    machine (the bound leaves room for a loaded CI machine)."""
    enc, tok = llama3
    records = table(count, fields)
    start = time.perf_counter()
    g = maskpar.compile_json_schema(tok, {"enum": records})
    assert time.perf_counter() - start < 10
    assert g.num_states < 10  # one lexeme, not a rule per record
    rng = random.Random(count)
    schema = {"enum": records}
    for i in rng.sample(range(count), 15):
        text = shuffled_text(records[i], rng)
        assert accepts_tokens(g, enc.encode(text)), text
        changed = dict(records[i])
        k = rng.choice(list(changed))
        changed[k] = "other" if not isinstance(changed[k], str) else changed[k] + "!"
        assert not accepts_tokens(g, enc.encode(json.dumps(changed))), changed
        fewer = dict(list(records[i].items())[1:])
        assert accepts_tokens(g, enc.encode(json.dumps(fewer))) == (fewer in records)
    eos = set(tok.eos_token_ids)
    for _ in range(3):
        m = maskpar.Matcher(g)
        row = new_bitmask(1, g.vocab_size)
        out: list[int] = []
        while True:
            m.fill_next_token_bitmask(row)
            ids = allowed_ids(row)
            text_ids = [x for x in ids if x not in eos]
            if eos & set(ids) and (not text_ids or rng.random() < 0.5):
                break
            # Mostly not whitespace, so walks end.
            inked = [x for x in text_ids if enc.decode_single_token_bytes(x).strip()]
            t = rng.choice(inked if inked and rng.random() < 0.95 else text_ids)
            assert m.consume_token(t)
            out.append(t)
            assert len(out) < 400
        jsonschema.validate(json.loads(enc.decode(out)), schema)


def accepts_tokens(g: maskpar.Grammar, ids: list[int]) -> bool:
    m = maskpar.Matcher(g)
    return m.consume_tokens(ids) and m.is_accepting()


def test_records_beside_other_values(token_tok):
    """Records, an empty object, nested objects and strings in one enum:
    each kind keeps its own way, the language is their union."""
    records = [{"a": i, "b": str(i)} for i in range(20)]
    values = records + [{}, {"a": {"b": 1}}, "s", [1, {"c": 2}]]
    g = maskpar.compile_json_schema(token_tok, {"enum": values})
    for text in ['{"b":"3","a":3.00}', "{ }", '{"a":{"b":1.0}}', '"s"', '[1,{"c":2}]']:
        assert accepts(g, text), text
    for text in ['{"b":"3","a":4}', '{"a":3}', '{"a":{"b":2}}', '{"a":3,"b":"3","a":3}']:
        assert not accepts(g, text), text
