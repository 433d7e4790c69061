"""Warm-up samples of ``pattern`` strings (maskpar.integrations._regex_sample).

The oracle is Python's ``re`` (and ``jsonschema`` for whole samples): a
sample of a pattern made of literals, classes, loops, groups, alternations
and back-references must be matched by it, within the length bounds asked
for when a filling fits them; any pattern, hostile ones included, must give
a bounded text (or None) quickly, without ever running the pattern.
"""

from __future__ import annotations

import json
import re
import time
import warnings

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from maskpar.integrations._regex_sample import (
    MAX_CHARS,
    MAX_PATTERN_CHARS,
    _parser_would_warn,
    regex_sample,
)
from maskpar.integrations._sample import json_sample

REAL = [
    r"^[0-9]{2,5}-?[0-9]{1,4}-?[0-9]{4}$",
    r"^[^:\s]+:[^:\s]+(:[^\s]+)?$",
    r"^$|^[a-z]+(\.[a-z]+)*$",
    r"^[A-Z]{2}$",
    r"^#[0-9a-fA-F]{6}$",
    r"^v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$",
    r"^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$",
    r"^arn:aws:[a-z0-9-]+:\S*$",
    r"^(\d+)-\1$",
    r"^(?!x)[a-z]+$",
    r"^[^\x00-\x1f]*$",
    r"^\w+(?:\s\w+)*$",
    r"[a-z]",
    r"^(GET|POST|PUT)$",
    r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$",
    r"^(https?|ftp)://[^\s/$.?#].[^\s]*$",
]


@pytest.mark.parametrize("pattern", REAL)
def test_samples_of_real_patterns_match_them(pattern):
    text = regex_sample(pattern)
    assert text is not None and re.search(pattern, text), (pattern, text)


def test_a_sample_writes_something_and_reads_like_text():
    """``^$|...`` is filled in, as a model fills a field; classes of letters
    take letters of a word, of digits digits of a number."""
    assert regex_sample(r"^$|^[a-z]+$") == "sample"
    assert regex_sample(r"^[0-9]{4}$") == "2024"
    assert regex_sample(r"^[a-z]{2}-[0-9]{2}$") == "sa-20"


@pytest.mark.parametrize(
    ("pattern", "least", "most"),
    [
        (r"^[0-9]{2,5}-?[0-9]{1,4}-?[0-9]{4}$", 10, 13),
        (r"^[a-z]+$", 0, 3),
        (r"^[a-z]{2,40}$", 3, 3),
        (r"^(ab)+$", 0, 2),
    ],
)
def test_length_bounds_pick_a_filling_that_fits(pattern, least, most):
    text = regex_sample(pattern, least, most)
    assert text is not None and re.search(pattern, text)
    assert least <= len(text) <= most, text


def test_bounds_no_filling_meets_give_the_usual_filling():
    assert regex_sample(r"^[a-z]{2,40}$", 20, 20) == "sample"


def test_patterns_this_module_cannot_read_give_no_sample():
    for pattern in [r"\p{L}+", r"^[^]$", r"(?<name>a)", "(", 7, None]:
        assert regex_sample(pattern) is None


# Each under ``MAX_PATTERN_CHARS`` (longer ones are refused unread), so each
# is parsed and walked: the work budget must end them.
BIG_CLASS = "[" + "".join(chr(0x4E00 + i) for i in range(4000)) + "é]{48}"
HOSTILE = {
    "empty_loop": "(?:){1000000000}",
    "empty_alternatives_looped": "(?:" + "|" * 4000 + "){99999}",
    "huge_count": "a{1000000}",
    "nested_counts": "((a{1000}){1000}){1000}",
    "nested_optional_counts": "(?:(?:(?:a?){50}){50}){50}",
    "catastrophic": "^(a+)+$",
    "deep_groups": "(" * 1000 + ")" * 1000,
    "wide_alternation": "|".join(f"w{i}" for i in range(700)),
    "many_empty_branches": "(?:a|b|)" * 500,
    "big_class": BIG_CLASS,
    "long": "a" * 4000,
}


@pytest.mark.parametrize(
    "pattern", ["^[a--z]$", "[[a-z]]", "[a&&b]+", "[a~~b]", "[a||b]", "x[0-9--]y"]
)
def test_patterns_the_parser_warns_about_give_no_sample_and_no_warning(pattern):
    """Python's parser warns (FutureWarning) about possible set operations
    and nested sets in a class; a server would log that for each schema.
    Such patterns give no sample, and nothing is warned, even when warnings
    are errors."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert regex_sample(pattern) is None
    # The pattern does make the parser warn: the check above is not vacuous.
    assert _warns(pattern)


def _warns(pattern: str) -> bool:
    """Whether compiling ``pattern`` makes Python's parser warn (the oracle)."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            re.compile(pattern)
        except re.error:
            pass
    return any(issubclass(w.category, FutureWarning) for w in seen)


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet="ab-&~|[]^\\(", max_size=10))
def test_every_pattern_the_parser_warns_about_is_caught_before_parsing(pattern):
    assert not _warns(pattern) or _parser_would_warn(pattern)


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_patterns_give_a_bounded_sample_quickly(name):
    assert len(HOSTILE[name]) <= MAX_PATTERN_CHARS
    t0 = time.perf_counter()
    text = regex_sample(HOSTILE[name], 5, 7)
    assert time.perf_counter() - t0 < 0.5
    assert text is None or len(text) <= MAX_CHARS


def test_many_hostile_patterns_in_one_schema_share_one_budget():
    """300 members behind one ``$ref`` to a hostile pattern, or each with
    its own: the sample's patterns share one work budget."""
    worst = HOSTILE["empty_alternatives_looped"]
    one = {"type": "string", "pattern": worst, "minLength": 5}

    def members(make):
        return {"type": "object", "properties": {f"p{i}": make(i) for i in range(300)}}

    schemas = [
        {**members(lambda i: {"$ref": "#/$defs/s"}), "$defs": {"s": one}},
        members(lambda i: {**one, "pattern": worst + "x" * i}),
        members(lambda i: {"type": "string", "pattern": BIG_CLASS[:4000] + "x" * i}),
    ]
    for schema in schemas:
        t0 = time.perf_counter()
        text = json_sample(schema)
        assert time.perf_counter() - t0 < 1.0
        assert text is not None and len(text) <= 2048


# Patterns built from the node kinds the writer knows, as Python's parser
# reads them; every sample must be matched by its pattern.
ATOMS = st.sampled_from(
    [
        "a",
        r"\.",
        "-",
        "[a-z]",
        "[A-Z0-9]",
        "[^:/]",
        r"\d",
        r"\w",
        r"\s",
        r"\S",
        "[^a-z]",
        "[_x-z]",
        ".",
        "é",
    ]
)


def _quantified(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    counts = st.sampled_from(["", "?", "*", "+", "{2}", "{1,3}", "{0,2}", "{3,}"])
    return st.tuples(inner, counts).map(lambda p: p[0] + p[1])


PATTERNS = st.recursive(
    _quantified(ATOMS),
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=4).map("".join),
        st.lists(inner, min_size=1, max_size=3).map(lambda alts: "(?:" + "|".join(alts) + ")"),
        _quantified(inner.map(lambda p: "(" + p + ")")),
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(PATTERNS, st.booleans())
def test_samples_of_generated_patterns_match_them(body, anchored):
    pattern = f"^{body}$" if anchored else body
    text = regex_sample(pattern)
    assert text is not None
    if len(text) < MAX_CHARS:  # a text cut at the bound need not match
        assert re.search(pattern, text), (pattern, text)


SCHEMAS = [
    {
        "type": "object",
        "properties": {
            "tel": {
                "type": "string",
                "pattern": r"^[0-9]{2,5}-?[0-9]{1,4}-?[0-9]{4}$",
                "minLength": 10,
                "maxLength": 13,
            },
            "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
            "gln": {"type": "string", "minLength": 13, "maxLength": 13},
            "long": {"type": "string", "minLength": 40},
            "n": {"type": "integer", "minimum": 5, "maximum": 5},
            "x": {"type": "number", "exclusiveMinimum": 2},
            "m": {"type": "integer", "multipleOf": 7},
            "neg": {"type": "integer", "maximum": -3},
            "url": {"type": "string", "format": "uri"},
        },
        "required": ["tel", "code", "gln", "long", "n", "x", "m", "neg", "url"],
    },
    {"type": "string", "pattern": "^[0-9]+$", "example": "not this"},
    {"type": "string", "pattern": r"\p{Lu}\d", "examples": ["A1"]},
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=range(len(SCHEMAS)))
def test_samples_of_constrained_strings_and_numbers_are_instances(schema):
    text = json_sample(schema)
    assert text is not None
    if "\\p" in json.dumps(schema):
        # Python's ``re`` cannot read the pattern: the schema's own example.
        assert json.loads(text) == "A1"
        return
    jsonschema.validate(json.loads(text), schema, format_checker=jsonschema.FormatChecker())


def test_a_pattern_no_longer_ends_the_warm_up_walk(llama3):
    """The sample of a schema whose first member is a ``pattern`` string is
    walked to its end (before, its ``"some text"`` was refused there and
    every later member stayed cold)."""
    import maskpar
    from maskpar.integrations._warm import warm_json

    enc, tok = llama3
    schema = {
        "type": "object",
        "properties": {
            "id": {"type": "string", "pattern": "^[a-z]{2}-[0-9]{4}$"},
            "name": {"type": "string"},
            "size": {"type": "integer", "minimum": 10},
        },
        "required": ["id", "name", "size"],
    }
    text = json_sample(schema)
    g = maskpar.compile_json_schema(tok, json.dumps(schema), key_order="schema")
    assert warm_json(maskpar.Matcher(g), schema, enc.encode) == len(enc.encode(text))
