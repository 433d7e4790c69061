"""Hypothesis fuzzing of the Python API (issue 22).

- Random grammar text drawn from each syntax's own alphabet (regex, GBNF,
  Lark) and random small JSON Schemas: every input compiles or raises
  ValueError/TypeError, nothing else; what compiles is walked a few tokens
  with each mask checked against ``consume_token``, and schema walks that end
  give JSON that ``jsonschema`` validates.
- Random call sequences on a Matcher over a regex grammar (consume, rollback,
  fork, reset, validate, fill, batch fills) checked step by step against the
  brute-force oracle of tests/oracle.py (Python's ``regex`` partial matching).
"""

from __future__ import annotations

import json
import random
import re
from types import SimpleNamespace
from typing import Any

import jsonschema
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_regex_oracle import regex_ast, vocabulary

import maskpar
from conftest import BYTES, EOS, allowed_ids, new_bitmask
from oracle import RegexOracle

FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


def byte_tokenizer() -> maskpar.Tokenizer:
    return maskpar.Tokenizer.from_vocab(BYTES, [EOS])


TOK = byte_tokenizer()


def clean_compile(compile_fn, *args: Any, **kw: Any) -> maskpar.Grammar | None:
    """The grammar, or None after a ValueError/TypeError; any other exception propagates."""
    try:
        return compile_fn(*args, **kw)
    except (ValueError, TypeError):
        return None


def checked_walk(g: maskpar.Grammar, rng: random.Random, steps: int) -> bytes | None:
    """Follows the mask; each mask must agree with ``consume_token`` on every
    id. Returns the text if the walk ended with EOS."""
    m = maskpar.Matcher(g)
    bm = new_bitmask(1, g.vocab_size)
    out = bytearray()
    for _ in range(steps):
        m.fill_next_token_bitmask(bm)
        ids = set(allowed_ids(bm))
        for t in range(g.vocab_size):
            f = m.fork()
            assert f.consume_token(t) == (t in ids), (t, bytes(out))
        if not ids:
            return None
        t = rng.choice(sorted(ids))
        assert m.consume_token(t)
        if t == EOS:
            assert m.is_terminated()
            return bytes(out)
        out += BYTES[t]
    return None


# Each syntax's alphabet, weighted towards its operators.
REGEX_ALPHABET = "ab()[]{}|*+?.^$\\-,019:=!<>PpdDwWsSuxn\n é\x00"
GBNF_ALPHABET = 'ab()[]{}|*+?.^\\-,019:=" \n#xroot'
LARK_ALPHABET = 'abAB()[]{}|*+?.~/\\-,019:" \n_%ignoreimportdeclarestart'


@FUZZ
@given(st.text(REGEX_ALPHABET, max_size=24), st.randoms(use_true_random=False))
def test_random_regex_text(pattern: str, rng: random.Random) -> None:
    g = clean_compile(maskpar.compile_regex, TOK, pattern)
    if g is not None:
        checked_walk(g, rng, 3)


@FUZZ
@given(
    st.sampled_from(["root ::= ", "root ::= x\nx ::= ", ""]),
    st.text(GBNF_ALPHABET, max_size=30),
    st.randoms(use_true_random=False),
)
def test_random_gbnf_text(head: str, body: str, rng: random.Random) -> None:
    g = clean_compile(maskpar.compile_grammar, TOK, head + body, "gbnf")
    if g is not None:
        checked_walk(g, rng, 3)


@FUZZ
@given(
    st.sampled_from(["start: ", "start: x\nx: ", "start: X\nX: ", ""]),
    st.text(LARK_ALPHABET, max_size=30),
    st.randoms(use_true_random=False),
)
def test_random_lark_text(head: str, body: str, rng: random.Random) -> None:
    g = clean_compile(maskpar.compile_grammar, TOK, head + body, "lark")
    if g is not None:
        checked_walk(g, rng, 3)


@FUZZ
@given(st.binary(max_size=40))
def test_random_bytes_as_text(data: bytes) -> None:
    text = data.decode("utf-8", errors="surrogateescape")  # lone surrogates included
    for fn, args in (
        (maskpar.compile_regex, (TOK, text)),
        (maskpar.compile_grammar, (TOK, text, "gbnf")),
        (maskpar.compile_grammar, (TOK, text, "lark")),
        (maskpar.compile_json_schema, (TOK, text)),
    ):
        clean_compile(fn, *args)
    m = maskpar.Matcher(maskpar.compile_regex(TOK, "(?s:.)*"))
    try:
        m.consume_bytes(text)
    except (ValueError, TypeError):
        pass
    assert m.consume_bytes(data) in (True, False)


# ----- JSON Schemas ---------------------------------------------------------

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-1000, 1000),
    st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
    st.text('ab"\\é\n', max_size=4),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text("abc", max_size=2), inner, max_size=3)
    ),
    max_leaves=6,
)
PATTERNS = ["^a+$", "b", "^[ab]{0,3}$", "^(ab|ba)*$", "é", "^\\d+$"]
TYPES = ["null", "boolean", "integer", "number", "string", "array", "object"]


def schema_strategy() -> st.SearchStrategy[dict[str, Any]]:
    def keywords(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
        kw = {
            "type": st.one_of(st.sampled_from(TYPES), st.lists(st.sampled_from(TYPES), max_size=3)),
            "enum": st.lists(json_values, min_size=1, max_size=4),
            "const": json_values,
            "minimum": st.integers(-50, 50),
            "maximum": st.integers(-50, 50),
            "exclusiveMinimum": st.floats(-50, 50, allow_nan=False),
            "multipleOf": st.sampled_from([1, 2, 0.5, 3]),
            "minLength": st.integers(0, 4),
            "maxLength": st.integers(0, 6),
            "pattern": st.sampled_from(PATTERNS),
            "items": inner,
            "prefixItems": st.lists(inner, max_size=2),
            "minItems": st.integers(0, 3),
            "maxItems": st.integers(0, 4),
            "properties": st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=2),
            "required": st.lists(st.sampled_from(["a", "b", "c"]), max_size=2, unique=True),
            "additionalProperties": st.one_of(st.booleans(), inner),
            "anyOf": st.lists(inner, min_size=1, max_size=2),
            "oneOf": st.lists(inner, min_size=1, max_size=2),
            "allOf": st.lists(inner, min_size=1, max_size=2),
            "not": inner,
            "$ref": st.just("#"),
        }
        return st.fixed_dictionaries({}, optional=kw)  # type: ignore[arg-type]

    leaf = st.one_of(st.booleans(), keywords(st.just({})))
    return st.recursive(leaf, keywords, max_leaves=4)  # type: ignore[return-value]


@FUZZ
@given(
    schema_strategy(),
    st.sampled_from(["flexible", "compact"]),
    st.booleans(),
    st.randoms(use_true_random=False),
)
def test_random_schemas(schema: Any, whitespace: str, as_text: bool, rng: random.Random) -> None:
    src = json.dumps(schema) if as_text else schema
    g = clean_compile(maskpar.compile_json_schema, TOK, src, whitespace=whitespace)
    if g is None:
        return
    text = checked_walk(g, rng, 40)
    if text is None:
        return
    # The walk ended: the text is JSON that the schema validates.
    value = json.loads(text.decode("utf-8"))
    validator = jsonschema.Draft202012Validator(schema if isinstance(schema, dict) else {})
    if isinstance(schema, bool):
        assert schema, f"a false schema let {text!r} through"
        return
    try:
        errors = list(validator.iter_errors(value))
    except RecursionError:
        assume(False)  # jsonschema loops on some `$ref` cycles: not judged
        return
    exact = json.loads(text.decode("utf-8"), parse_float=str, parse_int=str)
    errors = [e for e in errors if not float_rounding_only(e, exact)]
    assert not errors, f"{text!r} does not validate: {errors[0].message}"


def float_rounding_only(error: Any, exact: Any) -> bool:
    """Whether a `multipleOf` error is jsonschema's float rounding: the
    number as written (`exact`, its text) is a multiple, in integer
    arithmetic (`1E+1000000000000000000` is past even Decimal's exponents)."""
    if error.validator != "multipleOf":
        return False
    for key in error.absolute_path:
        exact = exact[key]
    x, ex = decimal_parts(str(exact))
    d, ed = decimal_parts(str(error.validator_value))
    if x == 0:
        return True
    if ex >= ed:
        return x * pow(10, ex - ed, d) % d == 0
    # x / (d * 10^(ed - ex)) is an integer only if x has that many digits.
    return ed - ex <= len(str(abs(x))) and x % (d * 10 ** (ed - ex)) == 0


def test_the_float_rounding_check_is_exact_arithmetic():
    def multiple(text: str, divisor: float) -> bool:
        error = SimpleNamespace(validator="multipleOf", absolute_path=[], validator_value=divisor)
        return float_rounding_only(error, text)

    assert multiple("0.3", 0.1) and multiple("1E+1000000000000000000", 0.5)
    assert multiple("-7.5e1", 2.5) and multiple("0", 0.7) and multiple("4.0", 2)
    assert not multiple("0.35", 0.1) and not multiple("1e-1000000000000000000", 0.5)
    assert not multiple("3", 2) and not multiple("1.25", 0.5)


def decimal_parts(text: str) -> tuple[int, int]:
    """``(c, e)`` with the number written as ``text`` equal to ``c * 10**e``."""
    m = re.fullmatch(r"(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?", text)
    assert m, text
    sign, whole, frac, exp = m.groups()
    frac = frac or ""
    c = int(sign + whole + frac)
    return c, int(exp or 0) - len(frac)


# ----- Matcher call sequences against the oracle -------------------------------

OPS = ["fill", "consume", "consume_any", "consume_tokens", "rollback", "fork", "reset",
       "validate", "consume_bytes", "drafts", "tree"]  # fmt: skip


class Model:
    """The oracle's view of a matcher: bytes consumed, EOS consumed, history."""

    def __init__(self, oracle: RegexOracle, tokens: list[bytes], eos: int, never: set[int], n: int):
        self.oracle, self.tokens, self.eos, self.never, self.n = oracle, tokens, eos, never, n
        self.text, self.done = b"", False
        self.history: list[tuple[bytes, bool]] = []

    def allowed(self) -> list[int]:
        if self.done:
            return [self.eos]
        return self.oracle.allowed(self.text, self.tokens, [self.eos], self.never, self.n)

    def consume(self, t: int) -> bool:
        if t not in self.allowed():
            return False
        self.history.append((self.text, self.done))
        if t == self.eos:
            self.done = True
        else:
            self.text += self.tokens[t]
        return True

    def copy(self) -> Model:
        c = Model(self.oracle, self.tokens, self.eos, self.never, self.n)
        c.text, c.done, c.history = self.text, self.done, list(self.history)
        return c


@settings(FUZZ, max_examples=120)
@given(
    regex_ast(),
    vocabulary(),
    st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 2**16)), max_size=25),
)
def test_matcher_call_sequences_match_oracle(
    ast: tuple[str, list[int]], tokens: list[bytes], ops: list[tuple[str, int]]
) -> None:
    pattern, cuts = ast
    toks = tokens + [b"<eos>"]
    eos = len(toks) - 1
    n = len(toks)
    tok = maskpar.Tokenizer.from_vocab(toks, [eos])
    try:
        oracle = RegexOracle(pattern, cuts)
    except Exception:  # noqa: BLE001 - a pattern Python's regex cannot read: not judged
        assume(False)
    g = clean_compile(maskpar.compile_regex, tok, pattern)
    assume(g is not None)
    m = maskpar.Matcher(g)
    model = Model(oracle, toks, eos, set(), n)
    bm = new_bitmask(1, n)
    try:
        for op, arg in ops:
            rng = random.Random(arg)
            if op == "fill":
                m.fill_next_token_bitmask(bm)
                assert allowed_ids(bm) == model.allowed(), (pattern, model.text)
                assert m.is_accepting() == (model.done or oracle.accepts(model.text))
                assert m.is_terminated() == model.done
            elif op in ("consume", "consume_any"):
                allowed = model.allowed()
                t = rng.choice(allowed) if op == "consume" and allowed else arg % n
                assert m.consume_token(t) == model.consume(t), (pattern, model.text, t)
            elif op == "consume_tokens":
                seq = [rng.randrange(n) for _ in range(rng.randint(1, 3))]
                probe = model.copy()
                k = 0
                while k < len(seq) and probe.consume(seq[k]):
                    k += 1
                assert m.validate_tokens(seq) == k
                assert m.consume_tokens(seq) == (k == len(seq))
                if k == len(seq):
                    model = probe
            elif op == "rollback":
                k = arg % (len(model.history) + 1)
                m.rollback(k)
                if k:
                    model.text, model.done = model.history[-k]
                    del model.history[-k:]
                assert m.num_consumed == len(model.history)
            elif op == "fork":
                m = m.fork()
            elif op == "reset":
                m.reset()
                model = Model(oracle, toks, eos, set(), n)
            elif op == "validate":
                seq = [rng.randrange(n) for _ in range(rng.randint(1, 4))]
                probe = model.copy()
                k = 0
                while k < len(seq) and probe.consume(seq[k]):
                    k += 1
                assert m.validate_tokens(seq) == k
            elif op == "consume_bytes":
                data = bytes(rng.choice(b"abcz07 .-\xc3\xa9\xe4\xb8\xad") for _ in range(arg % 4))
                want = not model.done and oracle.live(model.text + data)
                assert m.consume_bytes(data) == want, (pattern, model.text, data)
                if want:
                    model.history.append((model.text, model.done))
                    model.text += data
            elif op == "drafts":
                # Rows after each accepted draft equal the oracle's masks.
                drafts = [rng.randrange(n) for _ in range(rng.randint(0, 3))]
                rows = new_bitmask(len(drafts) + 1, n)
                (acc,) = maskpar.fill_next_token_bitmask_par_with_draft_tokens(
                    [(m, 0, drafts)], rows
                )
                probe = model.copy()
                for i in range(acc + 1):
                    assert allowed_ids(rows, i) == probe.allowed(), (pattern, probe.text)
                    if i < acc:
                        assert probe.consume(drafts[i])
                assert acc == len(drafts) or not probe.consume(drafts[acc])
                assert (rows[acc + 1 :] == -1).all()
            else:  # tree
                k = rng.randint(1, 4)
                tree_tokens = [0] + [rng.randrange(n) for _ in range(k)]
                parents = [-1] + [rng.randrange(i) for i in range(1, k + 1)]
                rows = new_bitmask(k + 1, n)
                (valid,) = maskpar.fill_next_token_bitmask_par_with_draft_tree(
                    [(m, 0, (tree_tokens, parents))], rows
                )
                states: list[Model | None] = [model.copy()]
                for i in range(1, k + 1):
                    parent = states[parents[i]]
                    child = parent.copy() if parent is not None else None
                    if child is not None and not child.consume(tree_tokens[i]):
                        child = None
                    states.append(child)
                assert valid == [s is not None for s in states]
                for i, s in enumerate(states):
                    if s is None:
                        assert (rows[i] == -1).all()
                    else:
                        assert allowed_ids(rows, i) == s.allowed()
    except TimeoutError:
        assume(False)  # the backtracking oracle gave up: not judged


@FUZZ
@given(
    st.lists(
        st.one_of(
            st.integers(-(2**70), 2**70),
            st.sampled_from([-1, 0, 2**31, 2**32, 2**63 - 1, 2**63, 2**64]),
            st.floats(allow_nan=True),
            st.text(max_size=2),
            st.none(),
        ),
        min_size=1,
        max_size=4,
    ),
    st.sampled_from(
        [
            "consume_token",
            "consume_tokens",
            "validate_tokens",
            "rollback",
            "fill",
            "drafts",
            "tree",
            "aware",
        ]  # fmt: skip
    ),
)
def test_hostile_arguments_raise_value_or_type_error(values: list[Any], method: str) -> None:
    """Any argument values: a result, ValueError or TypeError (never
    OverflowError or another exception), and a refused call changes nothing."""
    m = maskpar.Matcher(maskpar.compile_regex(TOK, "[ab]*c"))
    m.consume_token(ord("a"))
    v = values[0]
    calls = {
        "consume_token": lambda: m.consume_token(v),
        "consume_tokens": lambda: m.consume_tokens(values),
        "validate_tokens": lambda: m.validate_tokens(values),
        "rollback": lambda: m.rollback(v),
        "fill": lambda: m.fill_next_token_bitmask(new_bitmask(2, len(BYTES)), v),
        "drafts": lambda: maskpar.fill_next_token_bitmask_par_with_draft_tokens(
            [(m, v, values)], new_bitmask(8, len(BYTES))
        ),
        "tree": lambda: maskpar.fill_next_token_bitmask_par_with_draft_tree(
            [(m, 0, (values, [-1] + [v] * (len(values) - 1)))], new_bitmask(8, len(BYTES))
        ),
        "aware": lambda: maskpar.grammar_aware_drafts([(m, values)], v),
    }
    before = m.num_consumed
    try:
        calls[method]()
    except (ValueError, TypeError):
        assert m.num_consumed == before
    assert isinstance(m.num_consumed, int)
