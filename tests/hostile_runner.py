"""Runs one hostile-input case in this process and prints its outcome.

``python hostile_runner.py CASE`` caps this process's address space, imports
maskpar, runs the case and prints one line ``HOSTILE-RESULT {json}`` with
``outcome`` ("ok" or "exception"), the exception's ``type`` and ``message``,
whether it is ``clean`` (a ValueError or TypeError, subclasses included),
the case's ``seconds`` and the peak resident memory ``max_rss_mib``.

A crash (signal, abort), a hang or an allocation past the cap shows up in the
parent (tests/test_hostile.py) as a return code or a timeout, never as a
line here: that is why each case runs in its own process.

Every case uses the public Python API only. A case is a function that runs
the hostile call and returns a short JSON-able detail; it may assert what a
correct answer must look like (an AssertionError is a failure, like any
exception other than ValueError/TypeError).

``CASES`` maps a case name to ``(function, expected outcomes)``: the outcomes
each case may end with ("ok", "ValueError", "TypeError"), chosen by what the
input deserves, not by what maskpar happens to do today.
"""

from __future__ import annotations

import json
import resource
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

# The address-space cap every case runs under (the parent can override it).
MEMORY_CAP_BYTES = 4 << 30

OK = frozenset({"ok"})
VALUE = frozenset({"ValueError"})
TYPE = frozenset({"TypeError"})
OK_OR_VALUE = frozenset({"ok", "ValueError"})
CLEAN = frozenset({"ok", "ValueError", "TypeError"})
# A result sized by the input that does not fit under the cap: the call
# fails with MemoryError, the process goes on (never an abort or a panic).
OK_OR_MEMORY = frozenset({"ok", "MemoryError"})

CASES: dict[str, tuple[Callable[[], Any], frozenset[str], int]] = {}


def peak_rss_mib() -> int:
    """This process's own peak resident memory (Linux's VmHWM, which starts
    afresh at exec). ``ru_maxrss`` is kept across fork and exec: a case
    started from a test process that had grown to 2 GiB (large enums
    compiled before it) reported 2 GiB whatever it did."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def case(
    name: str,
    expect: frozenset[str] = OK_OR_VALUE,
    cap: int = MEMORY_CAP_BYTES,
    imports_torch: bool = False,
):
    """Registers a case under ``name`` with the outcomes it may end with and
    its address-space cap (torch alone maps more than 4 GiB of it);
    ``imports_torch``: the runner imports torch before the case, and the
    parent gives that import time of its own (``IMPORTS_TORCH``)."""

    def register(fn: Callable[[], Any]) -> Callable[[], Any]:
        assert name not in CASES, name
        CASES[name] = (fn, expect, cap)
        if imports_torch:
            IMPORTS_TORCH.add(name)
        return fn

    return register


# Cases whose process imports torch first: a cold import (torch's libraries
# out of the page cache, the 2-core machine loaded) took over the 10 s limit
# once in CI, a time that is not maskpar's.
IMPORTS_TORCH: set[str] = set()


# --------------------------------------------------------------------------
# Shared inputs (built lazily: importing this module must stay cheap).

BYTES = [bytes([i]) for i in range(256)] + [b"<eos>"]
EOS = 256
DEEP = 100_000
CHAIN = 50_000


def mp():
    import maskpar

    return maskpar


def tok():
    return mp().Tokenizer.from_vocab(BYTES, [EOS])


def bitmask(rows: int = 1, vocab_size: int = len(BYTES)):
    import numpy as np

    return np.zeros((rows, (vocab_size + 31) // 32), dtype=np.int32)


def allowed(bm, row: int = 0) -> list[int]:
    import numpy as np

    bits = np.unpackbits(bm[row].view(np.uint8), bitorder="little")
    return np.flatnonzero(bits).tolist()


def regex_grammar(pattern: str = "[ab]*c"):
    return mp().compile_regex(tok(), pattern)


def gbnf(src: str):
    return mp().compile_grammar(tok(), src, "gbnf")


def lark(src: str):
    return mp().compile_grammar(tok(), src, "lark")


def schema(s: Any, **kw: Any):
    return mp().compile_json_schema(tok(), s, **kw)


def matcher(pattern: str = "[ab]*c"):
    return mp().Matcher(regex_grammar(pattern))


def size(g) -> dict[str, Any]:
    return {"kind": g.kind, "num_states": g.num_states}


def nested_json(key: str, depth: int, leaf: str = '{"type": "string"}') -> str:
    return f'{{"{key}": ' * depth + leaf + "}" * depth


def ref_chain(n: int, link: Callable[[str], str], leaf: str = '{"type": "string"}') -> str:
    """A flat ``$defs`` of n schemas, d_i built by ``link`` from d_{i+1}'s ref."""
    defs = [f'"d{i}": {link(f"#/$defs/d{i + 1}")}' for i in range(n)]
    defs.append(f'"d{n}": {leaf}')
    return '{"$ref": "#/$defs/d0", "$defs": {' + ", ".join(defs) + "}}"


# --------------------------------------------------------------------------
# Text encodings: invalid UTF-8, NUL bytes, lone surrogates.


@case("regex_nul_byte", OK)
def _():
    m = matcher("a\x00b")
    return m.consume_bytes(b"a\x00b") and m.is_accepting()


@case("regex_lone_surrogate", VALUE)
def _():
    return size(regex_grammar("a\ud800"))


@case("regex_bytes_pattern", TYPE)
def _():
    return size(mp().compile_regex(tok(), b"\xff\xfe"))  # type: ignore[arg-type]


@case("regex_byte_class_non_utf8")
def _():
    return size(regex_grammar(r"(?-u:\xff)+"))


@case("gbnf_nul_in_literal", OK)
def _():
    g = gbnf('root ::= "a\x00b"')
    m = mp().Matcher(g)
    return m.consume_bytes(b"a\x00b") and m.is_accepting()


@case("gbnf_hex_escape_non_utf8")
def _():
    return size(gbnf(r'root ::= "\xff\xfe" [\x80-\xff]'))


@case("gbnf_lone_surrogate", VALUE)
def _():
    return size(gbnf('root ::= "\ud800"'))


@case("gbnf_surrogate_escape")
def _():
    return size(gbnf(r'root ::= "\ud800" | [\ud800-\udfff]'))


@case("lark_nul_in_literal", OK)
def _():
    return size(lark('start: "a\x00b"'))


@case("lark_lone_surrogate", VALUE)
def _():
    return size(lark('start: "\udc80"'))


@case("schema_nul_in_const", OK)
def _():
    return size(schema({"const": "a\x00b"}))


@case("schema_lone_surrogate_key")
def _():
    return size(schema({"type": "object", "properties": {"\ud800": {"type": "string"}}}))


@case("schema_text_lone_surrogate", VALUE)
def _():
    return size(schema('{"const": "\ud800"}'))


@case("schema_escaped_lone_surrogate")
def _():
    return size(schema(r'{"const": "\ud800", "pattern": "\udfff"}'))


@case("consume_bytes_invalid_utf8", OK)
def _():
    m = matcher(".*")
    return [m.consume_bytes(b"\xff\xfe\xc0\x80"), m.consume_bytes(b"\xed\xa0\x80")]


@case("consume_bytes_lone_surrogate_str", VALUE)
def _():
    return matcher(".*").consume_bytes("\ud800")


@case("consume_bytes_wrong_type", TYPE)
def _():
    return matcher(".*").consume_bytes(12)  # type: ignore[arg-type]


@case("tokenizer_invalid_utf8_tokens", OK)
def _():
    toks = [b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"<eos>"]
    t = mp().Tokenizer.from_vocab(toks, [4])
    g = mp().compile_regex(t, ".*")
    m = mp().Matcher(g)
    bm = bitmask(1, 5)
    m.fill_next_token_bitmask(bm)
    # None of these byte strings can start valid UTF-8 text.
    assert allowed(bm) == [4], allowed(bm)
    return allowed(bm)


# --------------------------------------------------------------------------
# Huge numbers and counts.


@case("regex_count_2_pow_32", VALUE)
def _():
    return size(regex_grammar("a{1,4294967296}"))


@case("regex_count_u32_max", VALUE)
def _():
    return size(regex_grammar("a{4294967295}"))


@case("regex_count_million")
def _():
    return size(regex_grammar("a{1000000}"))


@case("gbnf_count_2_pow_32", VALUE)
def _():
    return size(gbnf('root ::= "a"{1,4294967296}'))


@case("gbnf_count_20_digits", VALUE)
def _():
    return size(gbnf('root ::= "a"{99999999999999999999}'))


@case("lark_count_2_pow_32", VALUE)
def _():
    return size(lark('start: "a"~1..4294967296'))


@case("lark_count_reversed", VALUE)
def _():
    return size(lark('start: "a"~10..1'))


@case("schema_min_items_1e9")
def _():
    return size(schema({"type": "array", "minItems": 1000000000}))


@case("schema_min_items_float_1e9")
def _():
    return size(schema('{"type": "array", "minItems": 1e9}'))


@case("schema_max_items_2_pow_40")
def _():
    return size(schema({"type": "array", "maxItems": 2**40, "items": {"type": "integer"}}))


@case("schema_max_length_2_pow_40")
def _():
    return size(schema({"type": "string", "maxLength": 2**40}))


@case("schema_min_length_2_pow_40")
def _():
    return size(schema({"type": "string", "minLength": 2**40}))


@case("schema_min_length_2_pow_64")
def _():
    return size(schema('{"type": "string", "minLength": 18446744073709551617}'))


@case("schema_min_length_million")
def _():
    return size(schema({"type": "string", "minLength": 1_000_000}))


@case("schema_min_properties_1e9")
def _():
    return size(schema({"type": "object", "minProperties": 1000000000}))


@case("schema_nested_min_items_product")
def _():
    inner = {"type": "array", "items": {"type": "integer"}, "minItems": 1000}
    return size(schema({"type": "array", "items": inner, "minItems": 1000}))


@case("schema_minimum_10k_digits")
def _():
    big = "1" + "0" * 10_000
    return size(schema(f'{{"type": "integer", "minimum": -{big}, "maximum": {big}}}'))


@case("schema_number_bounds_10k_digits")
def _():
    big = "9" * 10_000
    return size(schema(f'{{"type": "number", "exclusiveMinimum": -{big}.5}}'))


@case("schema_const_1e10000")
def _():
    return size(schema('{"const": 1e10000}'))


@case("schema_enum_10k_digit_number")
def _():
    return size(schema('{"enum": [%s, 1]}' % ("7" * 10_000)))


@case("schema_multiple_of_1e-300")
def _():
    return size(schema({"type": "number", "multipleOf": 1e-300}))


@case("schema_multiple_of_1e-300_bounded")
def _():
    return size(schema({"type": "number", "multipleOf": 1e-300, "minimum": 0, "maximum": 1}))


@case("schema_integer_multiple_of_1e300")
def _():
    return size(schema({"type": "integer", "multipleOf": 1e300}))


@case("schema_integer_range_1e300")
def _():
    return size(schema({"type": "integer", "minimum": -1e300, "maximum": 1e300}))


@case("schema_integer_tiny_range_huge_offset")
def _():
    return size(schema({"type": "integer", "minimum": 10**300, "maximum": 10**300 + 7}))


@case("schema_python_int_5000_digits")
def _():
    # json.dumps refuses ints past sys.get_int_max_str_digits: a ValueError.
    return size(schema({"type": "integer", "maximum": 10**5000}))


# --------------------------------------------------------------------------
# Deep nesting (100,000 levels).


@case("regex_nested_groups_100k", VALUE)
def _():
    return size(regex_grammar("(" * DEEP + "a" + ")" * DEEP))


@case("regex_nested_noncapture_100k", VALUE)
def _():
    return size(regex_grammar("(?:" * DEEP + "a" + ")" * DEEP))


@case("gbnf_nested_groups_100k")
def _():
    return size(gbnf("root ::= " + "(" * DEEP + '"a"' + ")" * DEEP))


@case("gbnf_unclosed_groups_100k", VALUE)
def _():
    return size(gbnf("root ::= " + "(" * DEEP))


@case("gbnf_nested_groups_1k")
def _():
    return size(gbnf("root ::= " + "(" * 1000 + '"a"' + ")" * 1000))


@case("gbnf_nested_class_in_groups_10k")
def _():
    return size(gbnf("root ::= " + "(" * 10_000 + "[a-z]*" + ")*" * 10_000))


@case("lark_nested_groups_100k")
def _():
    return size(lark("start: " + "(" * DEEP + '"a"' + ")" * DEEP))


@case("lark_nested_optional_100k")
def _():
    return size(lark("start: " + "[" * DEEP + '"a"' + "]" * DEEP))


@case("lark_nested_regex_groups_100k")
def _():
    return size(lark("start: /" + "(" * DEEP + "a" + ")" * DEEP + "/"))


# Trees deeper than their groups: postfix operators on nested groups (each a
# level of the tree), terminals inlined into terminals, template bodies and
# arguments substituted into each other, %extend after %extend, and the
# lookaround rewriter's own regex parser. Each segfaulted before its depth
# was counted (ast::MAX_NODE_DEPTH, cursor peaks).


def stacked_operators(inner: str) -> str:
    """``inner`` in 198 nested groups with 2..199 ``*`` after each: every
    group stays under 200 open, but the tree is about 20,000 levels deep."""
    for level in range(198, 0, -1):
        inner = "(" + inner + ")" + "*" * (200 - level)
    return inner


@case("gbnf_operators_on_nested_groups", VALUE)
def _():
    return size(gbnf("root ::= " + stacked_operators("x") + '\nx ::= "a"\n'))


@case("lark_operators_on_nested_groups", VALUE)
def _():
    return size(lark("start: " + stacked_operators('"a"') + "\n"))


@case("lark_terminal_chain_of_deep_bodies", VALUE)
def _():
    terms = "".join(f"T{k}: {stacked_operators(f'T{k + 1}')}\n" for k in range(40))
    return size(lark("start: T0\n" + terms + 'T40: "a"\n'))


@case("lark_terminal_chain_200_deep")
def _():
    # Each body a group of one level: 200 terminals deep in all.
    terms = "".join(f"T{k}: (T{k + 1})+\n" for k in range(199))
    return size(lark("start: T0\n" + terms + 'T199: "a"\n'))


@case("lark_template_chain_of_deep_bodies", VALUE)
def _():
    calls = "".join(f"t{k}{{x}}: {stacked_operators(f't{k - 1}{{x}}')}\n" for k in range(1, 9))
    return size(lark('start: t8{"a"}\nt0{x}: x\n' + calls))


@case("lark_template_arguments_nest_per_level")
def _():
    # Each level wraps its argument once more: 60 levels of 2 nodes.
    calls = "".join(f"t{k}{{x}}: t{k - 1}{{(x)+}}\n" for k in range(1, 60))
    return size(lark('start: t59{"a"}\nt0{x}: x\n' + calls))


@case("lark_template_arguments_nest_past_the_tree_bound", VALUE)
def _():
    # Ten levels a template, sixty templates: 600 levels once substituted.
    calls = "".join(f"t{k}{{x}}: t{k - 1}{{{'(' * 10}x{')+' * 10}}}\n" for k in range(1, 60))
    return size(lark('start: t59{"a"}\nt0{x}: x\n' + calls))


@case("lark_extend_20k")
def _():
    return size(lark('start: "a"\n' + '%extend start: "b"\n' * 20_000))


@case("lark_lookaround_nested_groups_300k", VALUE)
def _():
    return size(lark("start: /(?=a)" + "(" * 300_000 + "a" + ")" * 300_000 + "/\n"))


@case("lark_verbose_regex_comment_of_groups_300k", VALUE)
def _():
    return size(lark("start: /(?x)a#" + "(" * 300_000 + "/\n"))


@case("fill_token_of_65535_one_byte_lexemes")
def _():
    # Every byte of the token ends a lexeme: the fill's cache-and-boundary
    # splits nested once per byte (a stack overflow on the 2 MiB threads of
    # the parallel fill).
    t = mp().Tokenizer.from_vocab(BYTES[:256] + [b"a" * 65_535, b"<eos>"], [257])
    g = mp().compile_grammar(t, 'root ::= x*\nx ::= "a" | "a" "a"', syntax="gbnf")
    ms = [mp().Matcher(g) for _ in range(4)]
    bm = bitmask(4, t.vocab_size)
    mp().fill_next_token_bitmask_par([(m, i) for i, m in enumerate(ms)], bm)
    assert all(256 in allowed(bm, i) and ord("a") in allowed(bm, i) for i in range(4))
    return {"allowed": len(allowed(bm, 0))}


@case("schema_text_nested_items_100k", VALUE)
def _():
    return size(schema(nested_json("items", DEEP)))


@case("schema_text_nested_anyof_100k", VALUE)
def _():
    return size(schema('{"anyOf": [' * DEEP + "{}" + "]}" * DEEP))


@case("schema_text_nested_not_10k", VALUE)
def _():
    return size(schema(nested_json("not", 10_000)))


@case("schema_text_nested_items_100")
def _():
    return size(schema(nested_json("items", 100)))


@case("schema_text_nested_properties_60")
def _():
    leaf = '{"type": "integer"}'
    text = '{"type": "object", "properties": {"a": ' * 60 + leaf + "}}" * 60
    return size(schema(text))


def nested_dict(key: str, depth: int) -> dict[str, Any]:
    d: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        d = {key: d}
    return d


@case("schema_dict_nested_items_100k", VALUE)
def _():
    return size(schema(nested_dict("items", DEEP)))


@case("schema_dict_nested_items_2k", VALUE)
def _():
    return size(schema(nested_dict("items", 2_000)))


@case("schema_dict_cyclic", VALUE)
def _():
    d: dict[str, Any] = {"type": "array"}
    d["items"] = d
    return size(schema(d))


@case("schema_dict_nan", VALUE)
def _():
    return size(schema({"type": "number", "maximum": float("nan")}))


@case("schema_dict_unserialisable", TYPE)
def _():
    return size(schema({"enum": [{1, 2}]}))


@case("schema_dict_non_str_keys")
def _():
    return size(schema({"type": "object", "properties": {1: {"type": "string"}}}))


@case("schema_wrong_types", TYPE)
def _():
    return size(schema([{"type": "string"}]))  # type: ignore[arg-type]


@case("schema_json_list_text", VALUE)
def _():
    return size(schema("[1, 2]"))


# --------------------------------------------------------------------------
# not / allOf / anyOf / $ref chains 10,000 long; $ref cycles.


@case("schema_ref_chain_10k")
def _():
    return size(schema(ref_chain(10_000, lambda r: '{"$ref": "' + r + '"}')))


@case("schema_allof_chain_10k")
def _():
    return size(schema(ref_chain(10_000, lambda r: '{"allOf": [{"$ref": "' + r + '"}]}')))


@case("schema_anyof_chain_10k")
def _():
    link = '{"anyOf": [{"$ref": "%s"}, {"type": "null"}]}'
    return size(schema(ref_chain(10_000, lambda r: link % r)))


@case("schema_not_chain_10k")
def _():
    return size(schema(ref_chain(10_000, lambda r: '{"not": {"$ref": "' + r + '"}}')))


@case("schema_items_chain_10k")
def _():
    link = '{"type": "array", "items": {"$ref": "%s"}}'
    return size(schema(ref_chain(10_000, lambda r: link % r)))


@case("schema_ref_self")
def _():
    return size(schema({"$ref": "#"}))


@case("schema_ref_mutual_cycle")
def _():
    s = {
        "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
        "$ref": "#/$defs/a",
    }
    return size(schema(s))


@case("schema_allof_self")
def _():
    return size(schema({"allOf": [{"$ref": "#"}], "type": "object"}))


@case("schema_not_self")
def _():
    return size(schema({"not": {"$ref": "#"}}))


@case("schema_anyof_self_only")
def _():
    return size(schema({"anyOf": [{"$ref": "#"}]}))


@case("schema_recursive_array_walk", OK)
def _():
    g = schema({"type": "array", "items": {"$ref": "#"}}, whitespace="compact")
    m = mp().Matcher(g)
    text = "[" * 500 + "]" * 500
    return m.consume_bytes(text.encode()) and m.is_accepting()


@case("schema_ref_missing", VALUE)
def _():
    return size(schema({"$ref": "#/$defs/nowhere"}))


@case("schema_ref_remote", VALUE)
def _():
    return size(schema({"$ref": "http://169.254.169.254/latest/meta-data"}))


@case("schema_ref_pointer_garbage")
def _():
    return size(schema({"$ref": "#/../../~2~~/%zz/" + "a/" * 10_000}))


# --------------------------------------------------------------------------
# Exponential automata.


@case("regex_exponential_ab_20")
def _():
    return size(regex_grammar("(a|b)*a(a|b){20}"))


@case("regex_exponential_class_30")
def _():
    return size(regex_grammar("[ab]*a[ab]{30}"))


@case("schema_pattern_exponential_30")
def _():
    return size(schema({"type": "string", "pattern": "^[ab]*a[ab]{30}$"}))


@case("schema_pattern_unanchored_exponential")
def _():
    return size(schema({"type": "string", "pattern": "a[ab]{30}"}))


@case("regex_fuzz_wide_dot_counts_after_loops", VALUE)
def _():
    # Found by the long fuzz run of 2026-11-26 (a timeout without the
    # budget): `.{34}` after a loop, twice, is the exponential class above.
    return size(regex_grammar("\x00\x00\x00\x00\x00+\x00*.{34}\tz+\x00*.{34}\tz\x00\x00\x02:c|"))


@case("regex_fuzz_counted_loops_in_a_large_nfa", OK)
def _():
    # Found by the long fuzz run of 2026-11-27 on the 16-core GPU machine (a
    # timeout without the budget): 33,333 counted copies of a loop, behind an
    # alternative that adds byte classes. 66,684 NFA states and 16 classes:
    # the budget ran out only after 3-4 s until a large NFA's lookups were
    # charged per class (regex_dfa/lazy.rs). Since 2026-11-29 the loop in a
    # count is simplified to `\x01{33333,}` (regex_dfa/simplify.rs), a
    # linear DFA in 0.05 s; the next case keeps the large NFA.
    return size(regex_grammar("\x00\x00-\x00\x00r|z\x00]\x00mo\x01+{033333}"))


@case("regex_counted_loops_that_do_not_simplify_in_a_large_nfa", VALUE)
def _():
    return size(regex_grammar("\x00\x00-\x00\x00r|z\x00]\x00mo(?:\x01+\x02?){33333}"))


@case("regex_fuzz_counted_optional_in_a_large_nfa", OK)
def _():
    # The same run: `(,?){30033}`, 60,076 NFA states and 9 classes; now
    # `,{0,30033}` (as above).
    return size(regex_grammar("\x00\x12\x00\x00},?{30033}"))


@case("regex_counted_optionals_that_do_not_simplify_in_a_large_nfa", VALUE)
def _():
    return size(regex_grammar("\x00\x12\x00\x00}(?:,?;?){30033}"))


@case("regex_fuzz_wide_count_after_loops", VALUE)
def _():
    # The same run: `.{1408}` as nested counts after two loops.
    return size(regex_grammar("\r+d\x00+.{4}{44}{8}UUU\x05U\x05\x00"))


# Found by the long fuzz run of 2026-11-29 (slow without a budget, 2-6 s in
# the fuzz build; no crash, no wrong mask in 32 minutes of every target):
# counts of counts after a star, a count after `.*`, and long counts of
# literals after loops. Under the default budget each is answered in under
# a second (0.2-1.0 s on the 2-CPU machine).


@case("regex_fuzz_count_of_a_count_after_a_star", VALUE)
def _():
    return size(regex_grammar("}\x00\x00\x00*\x00\x00\x00\x00\x00{361}{361}"))


@case("regex_fuzz_count_after_dot_star", VALUE)
def _():
    return size(regex_grammar("\x03\x00\x00\x00\x18*.*1?}{7186}\x00"))


@case("regex_fuzz_count_after_lazy_loops", OK)
def _():
    return size(regex_grammar("\x00\x000\x00w\x00\x7f\x00?\x00+?\x00+{3434}"))


@case("regex_fuzz_count_after_optionals", OK)
def _():
    return size(regex_grammar("\x00\x00\x00\x00\x00\x00\x00\x07\x05&\x02???{2727}"))


@case("regex_fuzz_long_count_of_a_literal", OK)
def _():
    return size(regex_grammar("\x00\x00\x00\x00\x00\x00\x00\x00\x00Fp\x00{893893}"))


@case("gbnf_fuzz_counted_classes_in_an_unclosed_string", VALUE)
def _():
    # Found by the long fuzz run of 2026-11-26 13:50 (a timeout without the
    # budget): counted character classes `{0,20}` and `{0,15}` after loops
    # in one lexeme, the exponential determinization class; under the
    # budget, a clean ValueError in about a second.
    src = (
        'root   ::=\n  "\\"" (\n    [Z"\\\\\\x0FxCCCCCCC\x01\x00\x00\x00F%x00\x00\x00\x00\x00E]'
        " [-+]? [0\x0c-9][\\x5F%x00\x00\x00\x00\x00E] [-+]? [0\x0c-9][ 1-9\x00\x00\x009][\\x5F%"
        'x0 | " " |[ \\"n?CC: ltieral chars w= | " " |[ \\"n?CC: literal chars when allowedCCn?'
        'CC: ltieral chars w= | " " |[ \\"n?CC: literal chars when allowedCC  Tt]{0,20}\n [-+]?'
        " [0\x0c-9][ 1-9\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00[ 1-9"
        "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
        "\x00]{0,15})? ws\n\n# ,20}\n"
    )
    return size(gbnf(src))


@case("regex_many_accepting_states_match_shuffle")
def _():
    # Found by the long fuzz run of 2026-11-26 (in a GBNF `number` rule):
    # 300,000 DFA states, nearly all accepting, sat for minutes in
    # regex-automata's match-state shuffle; built as the pattern then a
    # sentinel byte, about a second.
    return size(regex_grammar("(?:-?(?:[4-9]|[1-9][\\--9]{0,15}))*"))


@case("lark_20000_string_rules", OK)
def _():
    # A rule per string: Lark's string-in-pattern check looked at every
    # pair of lexemes (3 s); now only at the patterns.
    alts = " | ".join(f"x{i}" for i in range(20_000))
    rules = "\n".join(f'x{i}: "k{i}"' for i in range(20_000))
    return size(lark(f"start: {alts}\n{rules}"))


@case("lark_20000_lark_blocks", OK)
def _():
    # A %lark block per alternative: a lexer context each.
    alts = " | ".join(f"x{i}" for i in range(20_000))
    rules = "\n".join(f'x{i}: %lark {{ start: "k{i}" }}' for i in range(20_000))
    return size(lark(f"start: {alts}\n{rules}"))


@case("lark_blocks_nested_past_the_bound", VALUE)
def _():
    n = 17
    return size(lark("start: " + '"a" %lark { start: ' * n + '"b"' + " }" * n))


@case("schema_fuzz_pattern_property_dots", VALUE)
def _():
    # Found by the fuzz run of 2026-11-26 08:00 (a timeout without the
    # budget): an unanchored `patternProperties` alternative with 79 `.`s,
    # the exponential class as a key pattern; under the budget, ~0.8 s here
    # (1.8 s before determinization was charged per byte class too).
    key = (
        "^\u14e0lllllll|lllllllllllllllllllllmll|lllllll"
        + "." * 79
        + "llllollllll%ll"
        + "Q" * 80
        + "lllllllllllll-l"
    )
    return size(schema({"patternProperties": {key: {}}}))


@case("gbnf_exponential_30")
def _():
    return size(gbnf('root ::= [ab]* "a" [ab]{30}'))


# Found by the long fuzz run of 2026-11-29: a Lark terminal with runs of up
# to 41 stars after `.` (`.*****`), then a rule that names an undefined
# `expr`. 3.2 s: each transition of the terminal's DFA walked the chain of
# nested loops, work the budget did not charge, and the terminal was built
# before the undefined name was found.
FUZZ_LARK_STAR_RUNS = (
    "start: invariants\n\ninvariants: (invariant /\\n+/)+ -> multlipe_invaniants\n\ninvaria"
    'nt: "l(?!oos/+p\\, "/ \x1b\x1b\x1bIIIIII-IIIIIIIIIIIIII->II\x15II]IIIIIIIII\tIIIIIIIII'
    "IIIIIIIIIIIHIII:IIIIIIaaaaaaIIIIIIIIIIIIIIIII:IIIIIIaaaaaaaaIIIIIIIIIIIIII:IIIIIIaaaaa"
    "aaaa..aaaaaaaaaaaaaaaaaaaaaaaaaaaaa\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
    "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
    "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
    "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00 *****aaaaaaacaaaa"
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.*****************************************aaaa"
    "aaaaaaaaaaaaaaaaaaaaaaaacaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.\x00.."
    "......................................................................................"
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.\x00..............."
    ".............................................**********************\x00\x00\x00\x00"
    "\x00\x00\x00\x00\x00 *****aaaaaaacaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.*******"
    "**********************************\x00\x00\x00\x00\x00\x00\x00\x00\x00 *****aaaaaaaaaa"
    "aaa\x00\x00\x00\x00\x00\x00\x00\x00aaaaaaaaaaaaaaaaaaaaaaaaZaaaaa e||||||||||||\x7f|||"
    "||||||||s+/ expr\n"
)


@case("lark_fuzz_star_runs_then_an_undefined_rule", VALUE)
def _():
    # Names are checked before any terminal is built (0.3 ms).
    return size(lark(FUZZ_LARK_STAR_RUNS))


@case("lark_fuzz_star_runs_in_a_terminal", OK)
def _():
    # With the name defined, the terminal is built: nested loops are one
    # loop (regex_dfa/simplify.rs), about 0.5 s.
    return size(lark(FUZZ_LARK_STAR_RUNS + 'expr: "x"\n'))


@case("regex_empty_branches_in_a_loop", VALUE)
def _():
    # 3,000 empty branches folded into one union, walked by every
    # transition (3.5 s); now one empty branch, and the exponential tail
    # ends in the budget's error.
    return size(regex_grammar("(?:." + "|" * 3000 + ")*[ab]*a[ab]{25}"))


@case("regex_long_closures_in_a_loop", VALUE)
def _():
    # 300 copies of `.*` in a loop: every closure walks the later copies'
    # unions, more than the states' sets show (1.9 s); charged per ε-edge.
    return size(regex_grammar("(?:" + "(?:.*)" * 300 + "x)*.{20}"))


@case("lark_nested_groups_with_empty_branches", VALUE)
def _():
    # Groups keep nested alternations apart, each with an empty branch: a
    # chain of unions after every `.`. Flattened to one empty branch.
    n = 100
    chain = "(" * n + ".*" + "|)" * n
    return size(lark(f"start: /{chain}a{chain}[ab]*a[ab]{{25}}/"))


@case("lark_exponential_regex_30")
def _():
    return size(lark("start: /[ab]*a[ab]{30}/"))


@case("regex_unicode_word_repeat")
def _():
    return size(regex_grammar(r"\w{100}"))


@case("regex_unicode_any_repeat_1000")
def _():
    return size(regex_grammar(r"(?s:.){1000}"))


# --------------------------------------------------------------------------
# Nested counted repetitions.


@case("regex_nested_counts_100")
def _():
    return size(regex_grammar("((a{1,100}){1,100}){1,100}"))


@case("regex_nested_counts_20")
def _():
    return size(regex_grammar("((a{1,20}){1,20}){1,20}"))


@case("schema_pattern_nested_counts_100")
def _():
    return size(schema({"type": "string", "pattern": "^((a{1,100}){1,100}){1,100}$"}))


@case("gbnf_nested_counts_100")
def _():
    return size(gbnf('root ::= (("a"{1,100}){1,100}){1,100}'))


@case("lark_nested_counts_100")
def _():
    return size(lark('start: (("a"~1..100)~1..100)~1..100'))


@case("regex_nested_counts_alternation")
def _():
    return size(regex_grammar("((a|bc){1,50}(d|ef){1,50}){1,50}"))


# --------------------------------------------------------------------------
# Long rule chains (50,000 rules).


@case("gbnf_rule_chain_50k")
def _():
    rules = [f"r{i} ::= r{i + 1}" for i in range(CHAIN)]
    return size(gbnf("root ::= r0\n" + "\n".join(rules) + f'\nr{CHAIN} ::= "a"'))


@case("gbnf_rule_chain_with_literals_50k")
def _():
    rules = [f'r{i} ::= "x" r{i + 1} | "y"' for i in range(CHAIN)]
    return size(gbnf("root ::= r0\n" + "\n".join(rules) + f'\nr{CHAIN} ::= "a"'))


@case("lark_rule_chain_50k")
def _():
    rules = [f"r{i}: r{i + 1}" for i in range(CHAIN)]
    return size(lark("start: r0\n" + "\n".join(rules) + f'\nr{CHAIN}: "a"'))


@case("lark_terminal_chain_10k")
def _():
    terms = [f"T{i}: T{i + 1}" for i in range(10_000)]
    return size(lark("start: T0\n" + "\n".join(terms) + '\nT10000: "a"'))


@case("gbnf_left_recursion_only")
def _():
    return size(gbnf("root ::= root"))


@case("gbnf_undefined_rule", VALUE)
def _():
    return size(gbnf("root ::= missing"))


# --------------------------------------------------------------------------
# Huge alternations and enums.

WORDS = 100_000


@case("gbnf_alternation_100k")
def _():
    return size(gbnf("root ::= " + " | ".join(f'"w{i}"' for i in range(WORDS))))


@case("lark_alternation_100k", OK)
def _():
    return size(lark("start: " + " | ".join(f'"w{i}"' for i in range(WORDS))))


@case("lark_terminal_alternation_100k", OK)
def _():
    return size(lark("start: W\nW: " + " | ".join(f'"w{i}"' for i in range(WORDS))))


@case("regex_alternation_100k")
def _():
    return size(regex_grammar("|".join(f"w{i}" for i in range(WORDS))))


@case("schema_enum_strings_100k")
def _():
    return size(schema({"enum": [f"w{i}" for i in range(WORDS)]}))


@case("schema_enum_numbers_100k")
def _():
    return size(schema({"enum": list(range(WORDS))}))


# Enums of arrays and of objects in schema order are one lexeme
# (cfg::valueunion), its states past the values' shared prefixes kept as
# lists (regex_dfa::sparse): they compile up to the 64 MiB automaton bound,
# about 100,000 objects, and past it end in the bound's ValueError. Objects
# in any member order are one record automaton (regex_dfa::records) within
# its bounds, and spelled out (a rule per value) past them.
@case("schema_enum_objects_10k", OK)
def _():
    return size(schema({"enum": [{"k": i, "v": [i, str(i)]} for i in range(10_000)]}))


@case("schema_enum_objects_50k", OK)
def _():
    return size(schema({"enum": [{"k": i, "v": str(i)} for i in range(50_000)]}))


@case("schema_enum_objects_100k_schema_order", OK)
def _():
    values = [{"k": i, "v": str(i)} for i in range(100_000)]
    return size(schema({"enum": values}, key_order="schema"))


@case("schema_enum_objects_100k", OK)
def _():
    # Flat objects in any order: one record automaton (regex_dfa::records).
    return size(schema({"enum": [{"k": i, "v": str(i)} for i in range(100_000)]}))


@case("schema_enum_records_of_16_members_10k", VALUE)
def _():
    # 2^16 contexts of each record's members pass the 2^32 state numbers:
    # spelled out instead (member sets), past the lexeme bound.
    values = [{f"k{j}": i * 16 + j for j in range(16)} for i in range(10_000)]
    return size(schema({"enum": values}))


@case("schema_enum_records_sharing_15_of_16_members", VALUE)
def _():
    # Groups of 64 records alike but for one member: 2^15 shared contexts a
    # group, past the search's bound on listed members; spelled out instead.
    values = [{**{f"k{j}": i // 64 for j in range(15)}, "k15": i} for i in range(10_000)]
    return size(schema({"enum": values}))


@case("schema_enum_records_of_17_members_10k", VALUE)
def _():
    # Past the 16 members a record may have: spelled out, past the lexeme
    # bound (a clean refusal in well under a second).
    values = [{f"k{j}": i * 17 + j for j in range(17)} for i in range(10_000)]
    return size(schema({"enum": values}))


@case("schema_enum_records_holding_five_member_objects_10k", VALUE)
def _():
    # A member whose value is an object of five members in any order (120
    # orders) is not a record's member text: spelled out, past the lexeme bound.
    values = [{"id": i, "inner": {f"m{j}": i + j for j in range(5)}} for i in range(10_000)]
    return size(schema({"enum": values}))


@case("schema_enum_arrays_50k", OK)
def _():
    return size(schema({"enum": [[i, str(i), {"a": i}] for i in range(50_000)]}))


@case("schema_enum_objects_10k_schema_order", OK)
def _():
    values = [{"k": i, "v": [i, str(i)]} for i in range(10_000)]
    return size(schema({"enum": values}, key_order="schema"))


@case("schema_many_properties_10k")
def _():
    props = {f"p{i}": {"type": "integer"} for i in range(10_000)}
    return size(schema({"type": "object", "properties": props, "required": list(props)}))


@case("schema_prefix_items_10k")
def _():
    return size(schema({"type": "array", "prefixItems": [{"const": i} for i in range(10_000)]}))


# --------------------------------------------------------------------------
# Ambiguous grammars walked for many tokens: each parser step is bounded
# (earley::MAX_CLOSURE_WORK), so a long walk either finishes or stops with a
# ValueError naming the bound, in time either way.


def walk_a(g, steps: int) -> int:
    """Consumes "a" ``steps`` times, filling the mask before each."""
    m = mp().Matcher(g)
    bm = bitmask(1, g.vocab_size)
    for i in range(steps):
        m.fill_next_token_bitmask(bm)
        assert ord("a") in allowed(bm), f"'a' refused after {i} steps"
        assert m.consume_token(ord("a")), i
    assert m.is_accepting()
    return m.num_consumed


@case("gbnf_ambiguous_walk_2000", OK_OR_VALUE)
def _():
    return walk_a(gbnf('root ::= x*\nx ::= "a" | "a" "a" | x x'), 2000)


@case("lark_ambiguous_walk_2000", OK_OR_VALUE)
def _():
    return walk_a(lark('start: x*\nx: "a" | "a" "a" | x x'), 2000)


@case("gbnf_catalan_walk_2000", OK_OR_VALUE)
def _():
    return walk_a(gbnf('root ::= x\nx ::= x x | x x x | "a" | ""'), 2000)


@case("gbnf_ambiguous_walk_rollback_fork", OK_OR_VALUE)
def _():
    g = gbnf('root ::= x*\nx ::= "a" | "aa" | x x')
    m = mp().Matcher(g)
    bm = bitmask(1, g.vocab_size)
    for i in range(1000):
        assert m.consume_token(ord("a"))
        if i % 100 == 99:
            f = m.fork()
            f.rollback(50)
            f.fill_next_token_bitmask(bm)
    return m.num_consumed


# --------------------------------------------------------------------------
# Huge and negative token ids to every Matcher method and batch function.

BAD_IDS = {"2_pow_31": 2**31, "minus_1": -1, "2_pow_63": 2**63, "257": 257, "2_pow_64": 2**64}


def _id_cases() -> None:
    for label, bad in BAD_IDS.items():
        calls: dict[str, Callable[[Any, Any], Any]] = {
            "consume_token": lambda m, b: m.consume_token(b),
            "consume_tokens": lambda m, b: m.consume_tokens([ord("a"), b]),
            "validate_tokens": lambda m, b: m.validate_tokens([ord("a"), b]),
            "rollback": lambda m, b: m.rollback(b),
            "fill_index": lambda m, b: m.fill_next_token_bitmask(bitmask(1), b),
            "par_row": lambda m, b: mp().fill_next_token_bitmask_par([(m, b)], bitmask(1)),
            "drafts": lambda m, b: mp().fill_next_token_bitmask_par_with_draft_tokens(
                [(m, 0, [ord("a"), b])], bitmask(3)
            ),
            "draft_row": lambda m, b: mp().fill_next_token_bitmask_par_with_draft_tokens(
                [(m, b, [ord("a")])], bitmask(2)
            ),
            "tree_tokens": lambda m, b: mp().fill_next_token_bitmask_par_with_draft_tree(
                [(m, 0, ([0, b], [-1, 0]))], bitmask(2)
            ),
            "tree_parents": lambda m, b: mp().fill_next_token_bitmask_par_with_draft_tree(
                [(m, 0, ([0, ord("a")], [-1, b]))], bitmask(2)
            ),
            "eagle_tokens": lambda m, b: mp().fill_next_token_bitmask_par_with_draft_tree(
                [(m, 0, ([1, -1], [-1, -1], [0, b]))], bitmask(2)
            ),
            "eagle_next": lambda m, b: mp().fill_next_token_bitmask_par_with_draft_tree(
                [(m, 0, ([b, -1], [-1, -1], [0, ord("a")]))], bitmask(2)
            ),
            "aware_drafts": lambda m, b: mp().grammar_aware_drafts([(m, [ord("a"), b])], 4),
            "max_drafts": lambda m, b: mp().grammar_aware_drafts([(m, [ord("a")])], b),
            "num_threads": lambda m, b: mp().fill_next_token_bitmask_par(
                [(m, 0)], bitmask(1), num_threads=b
            ),
            "token_bytes": lambda m, b: tok().token_bytes(b),
            "decode_bytes": lambda m, b: tok().decode_bytes([ord("a"), b]),
        }
        for method, call in calls.items():
            expect = VALUE
            if method == "max_drafts" and bad > 0:
                expect = frozenset({"ok", "ValueError"})  # a huge cap is just a cap
            if method == "num_threads" and bad == 257:
                expect = OK
            if method == "drafts" and bad == -1:
                expect = OK  # vLLM's padding: the drafts end there

            def run(call=call, bad=bad) -> Any:
                m = matcher("[ab]*c")
                m.consume_token(ord("a"))
                before = m.num_consumed
                try:
                    return repr(call(m, bad))[:80]
                finally:
                    assert m.num_consumed == before, "state changed by a refused call"

            case(f"token_id_{label}_{method}", expect)(run)


_id_cases()


@case("set_num_threads_zero", VALUE)
def _():
    return mp().set_num_threads(0)


@case("set_num_threads_2_pow_63", VALUE)
def _():
    return mp().set_num_threads(2**63)


@case("rollback_past_start", VALUE)
def _():
    m = matcher()
    m.consume_token(ord("a"))
    return m.rollback(2)


@case("token_id_wrong_type", TYPE)
def _():
    return matcher().consume_token("a")  # type: ignore[arg-type]


@case("token_id_float", TYPE)
def _():
    return matcher().consume_token(97.0)  # type: ignore[arg-type]


@case("consume_tokens_huge_list", OK)
def _():
    m = matcher("a*")
    return m.consume_tokens([ord("a")] * 1_000_000)


@case("fork_wrong_grammar_vocab", VALUE)
def _():
    other = mp().Tokenizer.from_vocab([b"a", b"b", b"<eos>"], [2])
    g = mp().compile_regex(other, "[ab]*c")
    m = matcher()
    m.consume_token(ord("a"))
    return repr(m.fork(g))


# --------------------------------------------------------------------------
# Malformed bitmask buffers.


def fill(bm: Any) -> Any:
    return matcher().fill_next_token_bitmask(bm)


def par_fill(bm: Any) -> Any:
    return mp().fill_next_token_bitmask_par([(matcher(), 0)], bm)


def _buffer_cases() -> None:
    import numpy as np

    w = (len(BYTES) + 31) // 32
    buffers: dict[str, tuple[Callable[[], Any], frozenset[str]]] = {
        "int64": (lambda: np.zeros((1, w), np.int64), TYPE),
        "uint32": (lambda: np.zeros((1, w), np.uint32), TYPE),
        "float32": (lambda: np.zeros((1, w), np.float32), TYPE),
        "big_endian_int32": (lambda: np.zeros((1, w), ">i4"), TYPE),
        "list": (lambda: [[0] * w], TYPE),
        "none": (lambda: None, TYPE),
        "bytearray": (lambda: bytearray(4 * w), TYPE),
        "three_dims": (lambda: np.zeros((1, 1, w), np.int32), VALUE),
        "zero_dims": (lambda: np.zeros((), np.int32), VALUE),
        "too_narrow": (lambda: np.zeros((1, w - 1), np.int32), VALUE),
        "too_wide": (lambda: np.zeros((1, w + 1), np.int32), VALUE),
        "zero_rows": (lambda: np.zeros((0, w), np.int32), VALUE),
        "non_contiguous": (lambda: np.zeros((2, 2 * w), np.int32)[:, ::2], VALUE),
        "transposed": (lambda: np.zeros((w, 2), np.int32).T, VALUE),
        "negative_stride": (lambda: np.zeros((2, w), np.int32)[::-1], VALUE),
        "read_only": (lambda: _read_only(np.zeros((1, w), np.int32)), VALUE),
        "misaligned": (lambda: _misaligned(w), VALUE),
    }
    for label, (make, expect) in buffers.items():
        for how, run in (("fill", fill), ("par_fill", par_fill)):

            def go(make=make, run=run) -> Any:
                return run(make())

            case(f"buffer_{label}_{how}", expect)(go)


def _read_only(a: Any) -> Any:
    a.setflags(write=False)
    return a


def _misaligned(w: int) -> Any:
    import numpy as np

    raw = np.zeros(4 * w + 1, np.uint8)[1:]
    return raw.view(np.int32).reshape(1, w)


_buffer_cases()


@case("schema_order_dependencies_crossing_over_20000_members", VALUE)
def _():
    # Schema order carries dependentRequired in its rules: 2,000
    # dependencies reaching over each other would make 2^2000 chain states;
    # the bound (4096) sends them to member sets, which refuse 20,000 members.
    names = [f"p{i}" for i in range(20_000)]
    deps = {f"p{i}": [f"p{i + 3000}"] for i in range(2000)}
    s = {"properties": {n: {} for n in names}, "dependentRequired": deps}
    return size(schema(s, key_order="schema"))


@case("schema_order_counts_on_20000_members", VALUE)
def _():
    # The count is part of each rule: 4 million rules, refused before they
    # are written (building them ran out of memory under the cap).
    names = [f"p{i}" for i in range(20_000)]
    s = {"properties": {n: {} for n in names}, "minProperties": 150, "maxProperties": 200}
    return size(schema(s, key_order="schema"))


@case("stag_json_max_whitespace_cnt_huge", VALUE)
def _():
    spec = {
        "type": "structural_tag",
        "format": {"type": "json_schema", "json_schema": {}, "max_whitespace_cnt": 4_000_000_000},
    }
    return size(mp().compile_structural_tag(tok(), spec))


@case("buffer_torch_variants", OK, cap=32 << 30, imports_torch=True)
def _():
    import torch

    out = {}
    w = (len(BYTES) + 31) // 32
    tensors = {
        "int64": torch.zeros((1, w), dtype=torch.int64),
        "non_contiguous": torch.zeros((2, 2 * w), dtype=torch.int32)[:, ::2],
        "too_narrow": torch.zeros((1, w - 1), dtype=torch.int32),
        "zero_rows": torch.zeros((0, w), dtype=torch.int32),
        "sparse": torch.zeros((1, w), dtype=torch.int32).to_sparse(),
        "meta": torch.zeros((1, w), dtype=torch.int32, device="meta"),
        "requires_grad": torch.zeros((1, w), dtype=torch.float32, requires_grad=True),
        "expanded": torch.zeros((1, w), dtype=torch.int32).expand(3, w),
    }
    for name, t in tensors.items():
        try:
            fill(t)
            out[name] = "ok"
        except (ValueError, TypeError) as e:
            out[name] = type(e).__name__
    refused = {k: v for k, v in out.items() if v == "ok"}
    assert not refused, f"accepted malformed tensors: {refused}"
    return out


@case("pooled_bitmask_past_the_pool", VALUE)
def _():
    # The recycled-bitmask path takes only sizes its pool could keep; past
    # them, a ValueError at once (allocate_token_bitmask leaves those to torch).
    return mp()._core._pooled_bitmask(10**9, 4048)


@case("pooled_bitmask_negative_and_huge_sizes", OK)
def _():
    # Sizes outside every Rust integer type: a ValueError naming the argument,
    # never pyo3's OverflowError.
    core = mp()._core
    out = {}
    for rows, words in ((-1, 4048), (1, -4048), (2**64, 1), (1, -(2**70))):
        try:
            core._pooled_bitmask(rows, words)
            out[(rows, words)] = "ok"
        except ValueError as e:
            out[(rows, words)] = str(e)
    assert all(v != "ok" for v in out.values()), out
    assert "rows must be >= 0" in out[(-1, 4048)], out
    assert "words must be >= 0" in out[(1, -4048)], out
    return out


@case("pooled_bitmasks_allocated_and_dropped_under_the_cap", OK, cap=32 << 30, imports_torch=True)
def _():
    # Bitmasks the pool recycles, allocated and dropped many times over (and
    # a few held at once): the pool's idle buffers stay within its bound, so
    # the process does not grow past what is held.
    import torch  # noqa: F401  (allocate_token_bitmask's tensors)

    rows = -(-mp()._core._MIN_POOLED_BITMASK_WORDS // 4048)
    held = []
    # 20 rounds (2.5 GB written): 40 took over the 10 s limit on the 2-CPU
    # machine while other work loaded it.
    for i in range(20):
        bm = mp().allocate_token_bitmask(rows * (1 + i % 3), 129_536)
        assert int(bm[-1, -1]) == -1
        bm.fill_(0)
        if i % 5 == 0:
            held.append(bm)
    del held, bm
    peak_mib = peak_rss_mib()
    assert peak_mib < 2048, f"peak RSS {peak_mib} MiB"
    return "ok"


@case("par_rows_out_of_range", VALUE)
def _():
    return mp().fill_next_token_bitmask_par([(matcher(), 0), (matcher(), 5)], bitmask(2))


@case("par_rows_overlap", VALUE)
def _():
    return mp().fill_next_token_bitmask_par([(matcher(), 1), (matcher(), 1)], bitmask(2))


@case("par_draft_rows_overlap", VALUE)
def _():
    reqs = [(matcher(), 0, [ord("a"), ord("b")]), (matcher(), 2, [])]
    return mp().fill_next_token_bitmask_par_with_draft_tokens(reqs, bitmask(3))


@case("par_tree_rows_overlap", VALUE)
def _():
    tree = ([0, ord("a"), ord("b")], [-1, 0, 0])
    reqs = [(matcher(), 0, tree), (matcher(), 2, tree)]
    return mp().fill_next_token_bitmask_par_with_draft_tree(reqs, bitmask(5))


@case("par_same_matcher_twice", VALUE)
def _():
    m = matcher()
    return mp().fill_next_token_bitmask_par([(m, 0), (m, 1)], bitmask(2))


@case("par_zero_requests_zero_rows", OK)
def _():
    return mp().fill_next_token_bitmask_par([], bitmask(0))


@case("par_item_not_tuple", TYPE)
def _():
    return mp().fill_next_token_bitmask_par([matcher()], bitmask(1))  # type: ignore[list-item]


@case("par_item_wrong_arity", TYPE)
def _():
    return mp().fill_next_token_bitmask_par([(matcher(), 0, 0, 0)], bitmask(1))


@case("par_not_a_matcher", TYPE)
def _():
    return mp().fill_next_token_bitmask_par([("m", 0)], bitmask(1))  # type: ignore[list-item]


@case("par_mixed_vocab_widths", VALUE)
def _():
    other = mp().Tokenizer.from_vocab(BYTES, [EOS], vocab_size=4096)
    m2 = mp().Matcher(mp().compile_regex(other, "a"))
    return mp().fill_next_token_bitmask_par([(matcher(), 0), (m2, 1)], bitmask(2))


@case("par_many_matchers_100k", OK)
def _():
    g = regex_grammar()
    reqs = [(mp().Matcher(g), i) for i in range(100_000)]
    return mp().fill_next_token_bitmask_par(reqs, bitmask(100_000))


@case("par_generator_raises", VALUE)
def _():
    def items():
        yield (matcher(), 0)
        raise ValueError("caller's own error")

    return mp().fill_next_token_bitmask_par(items(), bitmask(2))


@case("par_drafts_tolist_touches_matcher")
def _():
    m = matcher()

    class Evil:
        def tolist(self) -> list[int]:
            m.consume_token(ord("a"))  # the call holds m: must raise, not corrupt
            return [ord("a")]

    try:
        return mp().fill_next_token_bitmask_par_with_draft_tokens([(m, 0, Evil())], bitmask(2))
    except RuntimeError as e:
        assert "in use" in str(e), e
        return "RuntimeError: in use"


# --------------------------------------------------------------------------
# Malformed draft trees.


def tree_fill(tree: Any, rows: int = 4) -> Any:
    return mp().fill_next_token_bitmask_par_with_draft_tree([(matcher(), 0, tree)], bitmask(rows))


A, B = ord("a"), ord("b")

TREES: dict[str, tuple[Any, int, frozenset[str]]] = {
    "parents_cycle": (([0, A, B], [-1, 2, 1]), 3, VALUE),
    "parent_self": (([0, A], [-1, 1]), 2, VALUE),
    "parent_forward": (([0, A, B], [-1, 2, 0]), 3, VALUE),
    "parent_out_of_range": (([0, A], [-1, 7]), 2, VALUE),
    "parent_negative": (([0, A], [-1, -2]), 2, VALUE),
    "root_has_parent": (([0, A], [0, 0]), 2, VALUE),
    "two_roots": (([0, A], [-1, -1]), 2, VALUE),
    "lengths_mismatch": (([0, A, B], [-1, 0]), 3, VALUE),
    "empty": (([], []), 1, VALUE),
    "not_ints": ((["x", "y"], [-1, 0]), 2, TYPE),
    "not_a_tuple": ([0, A], 2, TYPE),
    "too_few_rows": (([0, A, B], [-1, 0, 1]), 2, VALUE),
    "eagle_next_cycle": (([1, 0], [-1, -1], [0, A]), 2, VALUE),
    "eagle_sibling_cycle": (([1, -1, -1], [-1, 2, 1], [0, A, B]), 3, VALUE),
    "eagle_self_child": (([0, -1], [-1, -1], [0, A]), 2, VALUE),
    "eagle_unreachable": (([-1, -1, -1], [-1, -1, -1], [0, A, B]), 3, CLEAN),
    "eagle_two_parents": (([1, 1], [-1, -1], [0, A]), 2, VALUE),
    "eagle_out_of_range": (([9, -1], [-1, -1], [0, A]), 2, VALUE),
    "eagle_lengths_mismatch": (([1, -1], [-1], [0, A]), 2, VALUE),
    "eagle_root_sibling": (([1, -1], [1, -1], [0, A]), 2, VALUE),
}

for _label, (_tree, _rows, _expect) in TREES.items():
    case(f"tree_{_label}", _expect)(lambda t=_tree, r=_rows: tree_fill(t, r))


# SGLang's batch form (the private entry its adapter calls): the same trees
# as [1, N] arrays, where a tree maskpar cannot read is reported, not raised.


def eagle_fill(items: Any, arrays: Any, rows: int) -> Any:
    return mp()._core._fill_eagle_trees(items, *arrays, bitmask(rows))


def eagle_arrays(*rows: Any) -> Any:
    import numpy as np

    return [np.asarray([r], dtype=np.int64) for r in rows]


def eagle_unread(tree: Any, rows: int, arrays: Callable[..., Any] = eagle_arrays) -> Any:
    """A malformed tree in the batch form (``arrays`` makes the three arrays
    from its rows): not filled, rows untouched."""
    bm = bitmask(rows)
    bm.fill(7)
    got = mp()._core._fill_eagle_trees([(matcher(), 0)], *arrays(*tree), bm)
    assert got == [False] and (bm == 7).all(), got
    return got


for _label, (_tree, _rows, _expect) in TREES.items():
    if _label.startswith("eagle_") and _expect == VALUE and len({len(x) for x in _tree}) == 1:
        case(f"eagle_batch_{_label[6:]}", OK)(lambda t=_tree, r=_rows: eagle_unread(t, r))


@case("eagle_batch_index_past_the_batch", VALUE)
def _():
    return eagle_fill([(matcher(), 2**63)], eagle_arrays([1, -1], [-1, -1], [0, A]), 2)


@case("eagle_batch_negative_index", VALUE)
def _():
    return eagle_fill([(matcher(), -1)], eagle_arrays([1, -1], [-1, -1], [0, A]), 2)


@case("eagle_batch_token_past_the_vocabulary", OK)
def _():
    return eagle_fill([(matcher(), 0)], eagle_arrays([1, -1], [-1, -1], [0, 2**62]), 2)


@case("eagle_batch_zero_nodes", OK)
def _():
    import numpy as np

    empty = [np.zeros((1, 0), dtype=np.int64)] * 3
    return eagle_fill([(matcher(), 0)], empty, 1)


@case("eagle_batch_one_dimensional_arrays", TYPE)
def _():
    import numpy as np

    return eagle_fill([(matcher(), 0)], [np.asarray([1, -1], dtype=np.int64)] * 3, 2)


@case("eagle_batch_int32_arrays", TYPE)
def _():
    return eagle_fill(
        [(matcher(), 0)], [a.astype("int32") for a in eagle_arrays([1, -1], [-1, -1], [0, A])], 2
    )


@case("eagle_batch_shapes_differ", VALUE)
def _():
    first, sibling, tokens = eagle_arrays([1, -1], [-1, -1], [0, A])
    return eagle_fill([(matcher(), 0)], (first, sibling[:, :1], tokens), 2)


@case("eagle_batch_bitmask_too_short", VALUE)
def _():
    return eagle_fill([(matcher(), 0)], eagle_arrays([1, -1, -1], [-1, 2, -1], [0, A, B]), 2)


@case("eagle_batch_huge_batch_of_empty_trees", OK)
def _():
    # [2**40, 0] arrays hold no ids (numpy makes them without memory): the
    # batch size alone must not size anything. Its one listed tree is empty
    # (no root): reported unread.
    import numpy as np

    arrays = [np.empty((2**40, 0), dtype=np.int64) for _ in range(3)]
    got = eagle_fill([(matcher(), 0)], arrays, 2)
    assert got == [False], got
    return got


# SGLang's whole tree step (`_fill_eagle_step`): requests are any objects
# with a `grammar` attribute, that grammar an object of the type passed whose
# `matcher` attribute is a maskpar Matcher.


class StepGrammar:
    def __init__(self, m: Any = None) -> None:
        self.matcher = matcher() if m is None else m


class Req:
    def __init__(self, grammar: Any) -> None:
        self.grammar = grammar


def eagle_step(reqs: Any, rows: int, kind: Any = StepGrammar, batch: int = 0) -> Any:
    """The step over `batch` (else `len(reqs)`) trees of 2 nodes: returns its
    result, having checked that it wrote nothing when it declined."""
    import numpy as np

    trees = eagle_arrays([1, -1], [-1, -1], [0, A])
    arrays = [np.repeat(a, batch or len(reqs), axis=0) for a in trees]
    bm = bitmask(rows)
    bm.fill(7)
    got = mp()._core._fill_eagle_step(reqs, kind, *arrays, bm)
    assert got is not None or (bm == 7).all(), got
    return got


@case("eagle_step_grammar_of_another_type", OK)
def _():
    class Other:
        matcher = None

    got = eagle_step([Req(StepGrammar()), Req(Other())], 4)
    assert got is None, got
    return got


@case("eagle_step_no_grammar_at_all", OK)
def _():
    got = eagle_step([Req(None), Req(None)], 4)
    assert got is None, got
    return got


@case("eagle_step_matcher_not_a_matcher", TYPE)
def _():
    return eagle_step([Req(StepGrammar("not a matcher"))], 2)


@case("eagle_step_one_matcher_twice", VALUE)
def _():
    shared = matcher()
    return eagle_step([Req(StepGrammar(shared)), Req(StepGrammar(shared))], 4)


@case("eagle_step_requests_lie_about_their_length", OK)
def _():
    # The length is a hint for reserving room, never trusted: a huge one
    # reserves no memory for it, a raising one is ignored.
    class Lying(list):
        def __init__(self, items: Any, length: Any) -> None:
            super().__init__(items)
            self.length = length

        def __len__(self) -> Any:
            if isinstance(self.length, Exception):
                raise self.length
            return self.length

    for length in (sys.maxsize, 2**40, 0, ValueError("no length")):
        got = eagle_step(Lying([Req(StepGrammar()), Req(None)], length), 4, batch=2)
        assert got is not None and got[1] == [], got
    return got[1]


@case("eagle_step_requests_not_iterable", TYPE)
def _():
    return eagle_step(5, 2, batch=1)


@case("eagle_step_grammar_type_not_a_type", TYPE)
def _():
    return eagle_step([Req(StepGrammar())], 2, kind="StepGrammar")


@case("eagle_step_grammar_attribute_raises", CLEAN)
def _():
    class Raising:
        @property
        def grammar(self) -> Any:
            raise TypeError("no grammar here")

    return eagle_step([Raising()], 2)


@case("eagle_step_batch_size_differs", VALUE)
def _():
    arrays = eagle_arrays([1, -1], [-1, -1], [0, A])
    reqs = [Req(StepGrammar()), Req(StepGrammar())]
    return mp()._core._fill_eagle_step(reqs, StepGrammar, *arrays, bitmask(4))


@case("eagle_step_bitmask_too_short", VALUE)
def _():
    return eagle_step([Req(StepGrammar()), Req(None)], 3)


@case("eagle_step_generator_of_requests", OK)
def _():
    got = eagle_step((Req(g) for g in (None, StepGrammar())), 4, batch=2)
    assert got is not None and got[1] == [], got
    return got[1]


@case("eagle_step_allocates_from_vocab_size", OK)
def _():
    arrays = eagle_arrays([1, -1], [-1, -1], [0, A])
    got = mp()._core._fill_eagle_step([Req(None)], StepGrammar, *arrays, vocab_size=len(BYTES))
    assert got is None, got  # no grammar: nothing allocated
    rows, unread, grammar = mp()._core._fill_eagle_step(
        [Req(StepGrammar())], StepGrammar, *arrays, vocab_size=len(BYTES)
    )
    assert rows.shape == (2, (len(BYTES) + 31) // 32) and unread == [], rows.shape
    return rows.shape


@case("eagle_step_negative_vocab_size", VALUE)
def _():
    arrays = eagle_arrays([1, -1], [-1, -1], [0, A])
    return mp()._core._fill_eagle_step([Req(StepGrammar())], StepGrammar, *arrays, vocab_size=-1)


@case("eagle_step_huge_vocab_size", CLEAN | {"MemoryError"})
def _():
    arrays = eagle_arrays([1, -1], [-1, -1], [0, A])
    return mp()._core._fill_eagle_step([Req(StepGrammar())], StepGrammar, *arrays, vocab_size=2**62)


@case("eagle_step_bitmask_and_vocab_size", TYPE)
def _():
    arrays = eagle_arrays([1, -1], [-1, -1], [0, A])
    reqs = [Req(StepGrammar())]
    return mp()._core._fill_eagle_step(reqs, StepGrammar, *arrays, bitmask(2), vocab_size=257)


@case("eagle_step_neither_bitmask_nor_vocab_size", TYPE)
def _():
    arrays = eagle_arrays([1, -1], [-1, -1], [0, A])
    return mp()._core._fill_eagle_step([Req(StepGrammar())], StepGrammar, *arrays)


# The same batch form with the arrays as SGLang holds them: CPU int64
# tensors, read through torch's DLPack exporter (exact tensors) or their
# numpy view (anything else).


def eagle_tensors(*rows: Any) -> Any:
    import torch

    return [torch.tensor([r], dtype=torch.int64) for r in rows]


for _label in ("next_cycle", "self_child", "out_of_range", "root_sibling"):
    _tree, _rows, _ = TREES[f"eagle_{_label}"]
    case(f"eagle_tensor_{_label}", OK, cap=32 << 30, imports_torch=True)(
        lambda t=_tree, r=_rows: eagle_unread(t, r, eagle_tensors)
    )


@case("eagle_tensor_huge_and_negative_ids", OK, cap=32 << 30, imports_torch=True)
def _():
    # Children past i64's half, below -1, and a token id below any
    # vocabulary: each tree is reported unread (SGLang's walk takes it);
    # nothing raised.
    for tree in (
        ([2**62, -1], [-1, -1], [0, A]),
        ([-(2**63), -1], [-1, -1], [0, A]),
        ([1, -1], [-7, -1], [0, A]),
    ):
        eagle_unread(tree, 2, eagle_tensors)
    return eagle_unread(([1, -1], [-1, -1], [0, -(2**63)]), 2, eagle_tensors)


@case("eagle_tensor_subclass", OK, cap=32 << 30, imports_torch=True)
def _():
    import torch

    class Tracked(torch.Tensor):
        pass

    arrays = [t.as_subclass(Tracked) for t in eagle_tensors([1, -1], [-1, -1], [0, A])]
    got = eagle_fill([(matcher(), 0)], arrays, 2)
    assert got == [True], got
    return got


@case("eagle_tensor_subclass_numpy_raises", TYPE, cap=32 << 30, imports_torch=True)
def _():
    import torch

    class Hostile(torch.Tensor):
        def numpy(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("no numpy for you")

    arrays = [t.as_subclass(Hostile) for t in eagle_tensors([1, -1], [-1, -1], [0, A])]
    return eagle_fill([(matcher(), 0)], arrays, 2)


@case("eagle_tensor_wrong_dtypes", TYPE, cap=32 << 30, imports_torch=True)
def _():
    import torch

    first, sibling, tokens = eagle_tensors([1, -1], [-1, -1], [0, A])
    for dtype in (torch.int32, torch.uint8, torch.bool, torch.float64):
        try:
            eagle_fill([(matcher(), 0)], (first, sibling, tokens.to(dtype)), 2)
        except TypeError:
            continue
        raise AssertionError(f"{dtype} tokens were read")
    return eagle_fill([(matcher(), 0)], (first, sibling, tokens.to(torch.int16)), 2)


@case("eagle_tensor_transposed_and_zero_strided", OK, cap=32 << 30, imports_torch=True)
def _():
    import torch

    first = torch.tensor([[1], [-1]], dtype=torch.int64).t()
    sibling = torch.tensor([-1], dtype=torch.int64).expand(1, 2)
    tokens = torch.tensor([[0, A]], dtype=torch.int64)
    got = eagle_fill([(matcher(), 0)], (first, sibling, tokens), 2)
    assert got == [True], got
    return got


# `as_tensor=True`: the step's bitmask made by torch over maskpar's memory
# (DLPack's import, rust/py/tensormask.rs), freed by the deleter torch calls
# when the last tensor over it goes, on whatever thread that is.


def eagle_step_arrays(batch: int) -> Any:
    import numpy as np

    return [np.repeat(a, batch, axis=0) for a in eagle_arrays([1, -1], [-1, -1], [0, A])]


def eagle_step_tensor(reqs: Any) -> Any:
    """The step with `as_tensor`, checked against the same step's numpy
    array: a torch tensor, int32, C-contiguous, the same rows."""
    import torch

    arrays = eagle_step_arrays(len(reqs))
    step = mp()._core._fill_eagle_step
    got = step(reqs, StepGrammar, *arrays, vocab_size=len(BYTES), as_tensor=True)
    as_array = step(reqs, StepGrammar, *arrays, vocab_size=len(BYTES))
    assert type(got[0]) is torch.Tensor, type(got[0])
    assert got[0].dtype == torch.int32 and got[0].is_contiguous(), got[0]
    assert got[0].shape == as_array[0].shape, (got[0].shape, as_array[0].shape)
    assert (got[0].numpy() == as_array[0]).all() and got[1] == as_array[1]
    return got


@case("eagle_step_tensor_outlives_the_call", OK, cap=32 << 30, imports_torch=True)
def _():
    import gc

    reqs = [Req(StepGrammar()), Req(None), Req(StepGrammar())]
    got = eagle_step_tensor(reqs)
    expected = got[0].clone()
    # A view keeps the memory: the tensor the call made, its tuple and
    # every other reference gone, the view still reads the same words.
    view = got[0][2:]
    del got
    gc.collect()
    # Another step's tensor, made meanwhile, has memory of its own.
    other = eagle_step_tensor(reqs)[0]
    other.fill_(0)
    assert (view == expected[2:]).all()
    assert (view[:2] == -1).all()  # request 1 (no grammar): all ones
    return view.shape


@case("eagle_step_tensor_recycled_buffer_is_rewritten", OK, cap=32 << 30, imports_torch=True)
def _():
    import gc

    # A consumer scribbles over a step's bitmask and drops it: the next
    # step of that size gets the same memory back, and writes every word.
    reqs = [Req(StepGrammar()), Req(None), Req(StepGrammar())]
    for _ in range(3):
        got = eagle_step_tensor(reqs)  # checked against the numpy array's rows
        address = got[0].data_ptr()
        got[0].fill_(0x1234)
        del got
        gc.collect()
    again = eagle_step_tensor(reqs)
    assert again[0].data_ptr() == address, "the buffer was not recycled"
    return again[0].shape


@case("eagle_step_tensor_freed_on_another_thread", OK, cap=32 << 30, imports_torch=True)
def _():
    import threading

    # Past 4 MiB the memory comes from (and goes back to) maskpar's buffer
    # pool: many requests without a grammar, whose rows are all ones.
    reqs = [Req(StepGrammar())] + [Req(None)] * 70_000
    got = eagle_step_tensor(reqs)
    rows = got[0]
    assert rows.numel() * 4 >= 4 << 20, rows.shape
    assert (rows[2:] == -1).all()
    held = [rows]
    del got, rows
    worker = threading.Thread(target=held.clear)
    worker.start()
    worker.join()
    # The pool hands the buffer out again: the next step's rows are its own.
    again = eagle_step_tensor(reqs)
    assert (again[0][2:] == -1).all()
    return again[0].shape


# The native SGLang step (`_sglang_tree_step`, what the adapter installs as
# `generate_token_bitmask`): what a caller's objects do there. Anything the
# step declines goes to `general`, told whether the fill ran.


def sglang_step(reqs: Any, vocab_size: Any, cuda: Any = lambda: False) -> Any:
    calls: list[Any] = []
    arrays = eagle_step_arrays(len(reqs))

    def general(*args: Any) -> Any:
        calls.append(args[-2:])  # (done, tried)
        return "general"

    got = mp()._core._sglang_tree_step(StepGrammar, cuda, general, reqs, *arrays, vocab_size)
    return got, calls


@case("sglang_step_negative_vocab_size", OK, cap=32 << 30, imports_torch=True)
def _():
    got, calls = sglang_step([Req(StepGrammar())], -1)
    assert got == "general" and calls == [(None, True)], calls
    return calls


@case("sglang_step_vocab_size_not_an_int", OK, cap=32 << 30, imports_torch=True)
def _():
    got, calls = sglang_step([Req(StepGrammar())], object())
    assert got == "general" and calls == [(None, False)], calls
    return calls


@case("sglang_step_huge_vocab_size", CLEAN | {"MemoryError"}, cap=32 << 30, imports_torch=True)
def _():
    return sglang_step([Req(StepGrammar())], 2**62)


RUNTIME = frozenset({"RuntimeError"})


@case("sglang_step_cuda_check_raises", RUNTIME, cap=32 << 30, imports_torch=True)
def _():
    def cuda() -> bool:
        raise RuntimeError("no driver")

    return sglang_step([Req(StepGrammar())], len(BYTES), cuda)


@case("sglang_step_cuda_check_not_a_bool", TYPE, cap=32 << 30, imports_torch=True)
def _():
    class NoTruth:
        def __bool__(self) -> bool:
            raise TypeError("no truth value")

    return sglang_step([Req(StepGrammar())], len(BYTES), NoTruth)


@case("sglang_step_shared_matcher", OK, cap=32 << 30, imports_torch=True)
def _():
    g = StepGrammar()
    got, calls = sglang_step([Req(g), Req(StepGrammar(g.matcher))], len(BYTES))
    assert got == "general" and calls == [(None, True)], calls
    return calls


@case("eagle_step_tensor_without_torch_is_an_array", OK)
def _():
    # torch not imported: as_tensor gives the numpy array it always gave.
    import sys

    import numpy as np

    assert "torch" not in sys.modules
    arrays = eagle_arrays([1, -1], [-1, -1], [0, A])
    got = mp()._core._fill_eagle_step(
        [Req(StepGrammar())], StepGrammar, *arrays, vocab_size=len(BYTES), as_tensor=True
    )
    assert type(got[0]) is np.ndarray and got[0].shape == (2, (len(BYTES) + 31) // 32)
    return got[0].shape


# Tree arrays whose length says nothing of their memory, or whose memory
# cannot be read as it is described: refused (or read), never an abort.


@case("eagle_batch_broadcast_tree_arrays", TYPE)
def _():
    # One id standing for 2**40 (a broadcast view costs no memory): copying
    # it asked for 8 TiB and aborted, even with no request listed.
    import numpy as np

    a = np.broadcast_to(np.int64(-1), (1, 2**40))
    return mp()._core._fill_eagle_trees([], a, a, a, bitmask(1))


@case("eagle_batch_rows_broadcast_over_the_batch", TYPE)
def _():
    import numpy as np

    a = np.broadcast_to(np.asarray([[1, -1]], dtype=np.int64), (2**40, 2))
    return mp()._core._fill_eagle_trees([], a, a, a, bitmask(1))


@case("eagle_step_expanded_tensor_arrays", TYPE, cap=32 << 30, imports_torch=True)
def _():
    # DLPack refuses the expanded tensor (not contiguous); its `.numpy()`
    # is the zero-stride view above.
    import torch

    a = torch.full((1, 1), -1, dtype=torch.int64).expand(1, 2**40)
    return mp()._core._fill_eagle_step([Req(StepGrammar())], StepGrammar, a, a, a, None, len(BYTES))


@case("eagle_batch_misaligned_tree_arrays", TYPE)
def _():
    import numpy as np

    a = np.ndarray((1, 2), np.int64, buffer=bytearray(17), offset=1)
    return mp()._core._fill_eagle_trees([(matcher(), 0)], a, a, a, bitmask(2))


@case("eagle_batch_tree_arrays_of_odd_strides", TYPE)
def _():
    # Elements 12 bytes apart: numpy reads each at its own address, and a
    # view made of it would read other bytes.
    import numpy as np

    a = np.ndarray((1, 2), np.int64, buffer=bytearray(48), strides=(24, 12))
    return mp()._core._fill_eagle_trees([(matcher(), 0)], a, a, a, bitmask(2))


@case("eagle_batch_strided_and_fortran_tree_arrays", OK)
def _():
    # Views that name each id once, in any order, are read as they are.
    import numpy as np

    trees = eagle_arrays([1, -1, -1], [-1, 2, -1], [0, A, B])
    arrays = [np.repeat(t, 3, axis=0) for t in trees]
    expected = bitmask(9)
    mp()._core._fill_eagle_trees([(matcher(), 0), (matcher(), 2)], *arrays, expected)
    for view in (
        [np.asfortranarray(a) for a in arrays],
        [np.repeat(a, 2, axis=1)[:, ::2] for a in arrays],
        [np.ascontiguousarray(a[::-1])[::-1] for a in arrays],
    ):
        got = bitmask(9)
        valid = mp()._core._fill_eagle_trees([(matcher(), 0), (matcher(), 2)], *view, got)
        assert valid == [True, True] and (got == expected).all(), valid
    return valid


@case("eagle_batch_functional_tensor_arrays", OK, cap=32 << 30, imports_torch=True)
def _():
    # Inside torch.func.functionalize a tensor's memory is not its own: its
    # export has a null data pointer, which was read as ids (a segfault).
    import numpy as np
    import torch

    seen = []

    def f(nxt, sib, tok):
        seen.append(mp()._core._fill_eagle_trees([(matcher(), 0)], nxt, sib, tok, bitmask(2)))
        return tok

    arrays = [torch.tensor([r], dtype=torch.int64) for r in ([1, -1], [-1, -1], [0, A])]
    torch.func.functionalize(f)(*arrays)
    assert len(seen) == 1 and isinstance(seen[0], list), seen
    # And as logits: refused or masked, never read at address 0.
    logits = torch._to_functional_tensor(torch.zeros((1, len(BYTES))))
    try:
        mp().apply_token_bitmask_inplace(logits, np.zeros((1, 9), np.int32))
    except (TypeError, ValueError):
        pass
    return seen[0]


@case("eagle_batch_tree_storage_resized_away", OK, cap=32 << 30, imports_torch=True)
def _():
    import torch

    arrays = [torch.tensor([r], dtype=torch.int64) for r in ([1, -1], [-1, -1], [0, A])]
    arrays[2].untyped_storage().resize_(0)
    got = mp()._core._fill_eagle_trees([(matcher(), 0)], *arrays, bitmask(2))
    assert isinstance(got, list) and len(got) == 1, got
    return got


@case("bitmask_array_and_tensor_over_it_written_at_once", OK, cap=32 << 30, imports_torch=True)
def _():
    # rust-numpy refuses a second borrow of one array, but a tensor over
    # the same memory (torch.from_numpy) is another object: both fills
    # wrote the rows at once. The second call is refused while the first
    # (a long fill, GIL released) writes.
    import itertools
    import threading
    import time

    import numpy as np
    import torch

    maskpar = mp()
    # 20,000 tokens (2.5 KB a row), 60,000 rows: a fill of about 0.3 s.
    letters = itertools.product(b"abcdefgh", repeat=5)
    vocab = BYTES[:256] + [bytes(t) for t in itertools.islice(letters, 20_000)] + [b"<eos>"]
    g = maskpar.compile_regex(maskpar.Tokenizer.from_vocab(vocab, [len(vocab) - 1]), "[a-h]*!")
    rows = 60_000
    arr = np.zeros((rows, (len(vocab) + 31) // 32), np.int32)
    drafts = [97] * (rows - 1)

    def fill(target: Any) -> None:
        maskpar.fill_next_token_bitmask_par_with_draft_tokens(
            [(maskpar.Matcher(g), 0, drafts)], target, num_threads=1
        )

    started, outcome = threading.Event(), {}

    def first() -> None:
        started.set()
        t = time.perf_counter()
        fill(arr)
        outcome["first"] = time.perf_counter() - t

    worker = threading.Thread(target=first)
    worker.start()
    started.wait()
    time.sleep(0.02)
    try:
        fill(torch.from_numpy(arr))
        outcome["second"] = "written"
    except ValueError as e:
        assert "in use" in str(e), e
        outcome["second"] = "refused"
    worker.join()
    # Only a first fill already over may have let the second one write.
    assert outcome["second"] == "refused" or outcome["first"] < 0.02, outcome
    return outcome["second"]


@case("tree_chain_1m_nodes", OK)
def _():
    import numpy as np

    n = 1_000_000
    tokens = np.full(n, A, dtype=np.int64)
    parents = np.arange(-1, n - 1, dtype=np.int64)
    valid = tree_fill((tokens, parents), n)[0]
    assert all(valid), "every 'a' in [ab]*c is valid"
    return len(valid)


@case("tree_star_1m_nodes", OK)
def _():
    import numpy as np

    n = 1_000_000
    tokens = np.where(np.arange(n) % 2 == 0, A, ord("z"))
    parents = np.zeros(n, dtype=np.int64)
    parents[0] = -1
    valid = tree_fill((tokens, parents), n)[0]
    return sum(valid)


@case("tree_eagle_chain_1m_nodes", OK)
def _():
    import numpy as np

    n = 1_000_000
    nxt = np.arange(1, n + 1, dtype=np.int64)
    nxt[-1] = -1
    sib = np.full(n, -1, dtype=np.int64)
    tokens = np.full(n, A, dtype=np.int64)
    return sum(tree_fill((nxt, sib, tokens), n)[0])


@case("drafts_1m_tokens", OK)
def _():
    drafts = [A] * 1_000_000
    return mp().fill_next_token_bitmask_par_with_draft_tokens(
        [(matcher(), 0, drafts)], bitmask(1_000_001)
    )


@case("grammar_aware_drafts_huge_max", OK)
def _():
    m = mp().Matcher(regex_grammar("a{0,5}" + "x" * 100_000))
    return len(mp().grammar_aware_drafts([(m, [A] * 5)], 2**62)[0])


# --------------------------------------------------------------------------
# Tokenizer constructors with hostile vocabularies.


def tokenizer(tokens: Any, eos: Any = (0,), **kw: Any) -> Any:
    t = mp().Tokenizer.from_vocab(tokens, list(eos), **kw)
    return {"vocab_size": t.vocab_size, "num_tokens": t.num_tokens}


@case("tokenizer_empty", VALUE)
def _():
    return tokenizer([], [])


@case("tokenizer_duplicates", OK)
def _():
    t = mp().Tokenizer.from_vocab([b"a", b"a", b"ab", b"ab", b"<e>"], [4])
    m = mp().Matcher(mp().compile_regex(t, "ab"))
    bm = bitmask(1, 5)
    m.fill_next_token_bitmask(bm)
    assert allowed(bm) == [0, 1, 2, 3], allowed(bm)
    return allowed(bm)


@case("tokenizer_1mb_token")
def _():
    return tokenizer([b"<e>", b"a" * (1 << 20)])


@case("encode_greedy_past_the_cap_in_rust", OK_OR_MEMORY, cap=1 << 30)
def _():
    # 200M one-byte tokens: the ids (4 bytes each) outgrow the cap while
    # the core collects them.
    return len(mp().Tokenizer.from_vocab(BYTES, [EOS]).encode_greedy(b"\x00" * 200_000_000))


@case("encode_greedy_past_the_cap_in_the_list", OK_OR_MEMORY, cap=1 << 30)
def _():
    # 60M ids fit in the core; their Python list (8 bytes an item) does not.
    return len(mp().Tokenizer.from_vocab(BYTES, [EOS]).encode_greedy(b"\x00" * 60_000_000))


@case("tokenizer_eos_out_of_range", VALUE)
def _():
    return tokenizer([b"a", b"b"], [2])


@case("tokenizer_eos_negative", VALUE)
def _():
    return tokenizer([b"a", b"b"], [-1])


@case("tokenizer_eos_2_pow_64", VALUE)
def _():
    return tokenizer([b"a", b"b"], [2**64])


@case("tokenizer_special_out_of_range", VALUE)
def _():
    return tokenizer([b"a", b"b"], [0], special_token_ids=[2**40])


@case("tokenizer_vocab_size_too_small", VALUE)
def _():
    return tokenizer([b"a", b"b", b"c"], [0], vocab_size=2)


@case("tokenizer_vocab_size_2_pow_31", VALUE)
def _():
    return tokenizer([b"a", b"b"], [0], vocab_size=2**31)


@case("tokenizer_vocab_size_negative", VALUE)
def _():
    return tokenizer([b"a", b"b"], [0], vocab_size=-1)


@case("tokenizer_vocab_size_2_pow_30_fill")
def _():
    t = mp().Tokenizer.from_vocab(BYTES, [EOS], vocab_size=2**30)
    m = mp().Matcher(mp().compile_regex(t, "[ab]*c"))
    bm = bitmask(1, 2**30)
    m.fill_next_token_bitmask(bm)
    # a, b, c are ids 97..99: bits 1..3 of word 3; every other id is refused.
    assert bm[0, 3] == 0b1110 and bm[0, :3].sum() == 0, bm[0, :4]
    assert not bm[0, 4:].any(), "padding ids allowed"
    return int(bm[0, 3])


@case("tokenizer_str_tokens", TYPE)
def _():
    return tokenizer(["a", "b"])


@case("tokenizer_none_token", TYPE)
def _():
    return tokenizer([b"a", None])


@case("tokenizer_empty_tokens_only", OK)
def _():
    t = mp().Tokenizer.from_vocab([b"", b"", b"<e>"], [2])
    m = mp().Matcher(mp().compile_regex(t, "a*"))
    bm = bitmask(1, 3)
    m.fill_next_token_bitmask(bm)
    assert allowed(bm) == [2], allowed(bm)
    return allowed(bm)


@case("tokenizer_only_eos", OK)
def _():
    t = mp().Tokenizer.from_vocab([b"<e>"], [0])
    return size(mp().compile_regex(t, "abc"))


@case("tokenizer_200k_tokens", OK)
def _():
    toks = [i.to_bytes(3, "little") for i in range(200_000)] + [b"<e>"]
    t = mp().Tokenizer.from_vocab(toks, [200_000])
    m = mp().Matcher(mp().compile_regex(t, "(?s:.)*"))
    bm = bitmask(1, len(toks))
    m.fill_next_token_bitmask(bm)
    return len(allowed(bm))


@case("tokenizer_eos_is_text", OK)
def _():
    t = mp().Tokenizer.from_vocab([b"a", b"b"], [0])
    m = mp().Matcher(mp().compile_regex(t, "a*"))
    return [m.consume_token(0), m.is_terminated()]


# --------------------------------------------------------------------------
# Other malformed requests.


@case("regex_empty", OK)
def _():
    return size(regex_grammar(""))


@case("regex_invalid", VALUE)
def _():
    return size(regex_grammar("(a"))


@case("regex_backreference", VALUE)
def _():
    return size(regex_grammar(r"(a)\1"))


@case("regex_lookahead", VALUE)
def _():
    return size(regex_grammar(r"a(?=b)"))


@case("regex_empty_class")
def _():
    m = matcher(r"[^\x00-\x{10FFFF}]")
    bm = bitmask()
    m.fill_next_token_bitmask(bm)
    return allowed(bm)


@case("regex_1mb_literal")
def _():
    return size(regex_grammar("a" * (1 << 20)))


@case("regex_10mb_comment")
def _():
    return size(regex_grammar("(?x)a#" + "x" * (10 << 20)))


@case("gbnf_empty", VALUE)
def _():
    return size(gbnf(""))


@case("gbnf_1mb_literal")
def _():
    return size(gbnf('root ::= "' + "a" * (1 << 20) + '"'))


@case("gbnf_10mb_comments")
def _():
    return size(gbnf('root ::= "a"\n' + ("# " + "x" * 1000 + "\n") * 10_000))


@case("grammar_unknown_syntax", VALUE)
def _():
    return size(mp().compile_grammar(tok(), 'root ::= "a"', "bnf"))


@case("grammar_start_missing", VALUE)
def _():
    return size(mp().compile_grammar(tok(), 'root ::= "a"', "gbnf", start="nope"))


@case("grammar_start_nul", VALUE)
def _():
    return size(mp().compile_grammar(tok(), 'root ::= "a"', "gbnf", start="\x00"))


@case("lark_import_file", VALUE)
def _():
    return size(lark("%import /etc/passwd\nstart: WORD"))


@case("lark_template_recursion", VALUE)
def _():
    return size(lark("start: t{start}\nt{x}: t{t{x}}"))


@case("lark_empty", VALUE)
def _():
    return size(lark(""))


@case("schema_whitespace_unknown", VALUE)
def _():
    return size(schema({"type": "string"}, whitespace="some"))


@case("schema_indent_huge", VALUE)
def _():
    return size(schema({"type": "array"}, indent=2**63))


@case("schema_indent_negative")
def _():
    return size(schema({"type": "array"}, indent=-1))


@case("schema_indent_not_whitespace", VALUE)
def _():
    return size(schema({"type": "array"}, indent="xx"))


@case("schema_separators_garbage", VALUE)
def _():
    return size(schema({"type": "array"}, separators=("x", "y")))


@case("schema_invalid_pattern", VALUE)
def _():
    return size(schema({"type": "string", "pattern": "(a"}))


@case("schema_type_garbage", VALUE)
def _():
    return size(schema({"type": 7}))


@case("schema_text_trailing_garbage", VALUE)
def _():
    return size(schema('{"type": "string"} {"type": "integer"}'))


@case("schema_text_10mb_whitespace", OK)
def _():
    return size(schema(" " * (10 << 20) + '{"type": "string"}'))


# --------------------------------------------------------------------------
# The adapters' warm-up (maskpar.integrations._warm): a server's compile pool
# writes a sample from the request and walks the new grammar along it, so a
# hostile schema or spec reaches the sample writer and the walk too. The
# sample is bounded (depth, nodes, $ref hops, length) and the walk stops at
# 512 tokens; the grammar refusing the schema ends the case before any walk.


def warm_schema(schema_text: str) -> dict[str, Any]:
    from maskpar.integrations._warm import warm_json

    m = mp().Matcher(mp().compile_json_schema(tok(), schema_text, key_order="schema"))
    walked = warm_json(m, schema_text, lambda text: list(text.encode("utf-8")))
    assert m.num_consumed == 0, "the warm-up moved the matcher"
    return {"walked": walked}


def warm_spec(spec_text: str) -> dict[str, Any]:
    from maskpar.integrations._sample import stag_sample

    text = stag_sample(spec_text)
    assert text is None or len(text) <= 4 * 2048
    return {"chars": 0 if text is None else len(text)}


@case("warm_up_recursive_tree_schema")
def _():
    return warm_schema(
        '{"type": "object", "properties": {"kids": {"type": "array", '
        '"items": {"$ref": "#"}, "minItems": 2}, "name": {"type": "string"}}}'
    )


@case("warm_up_deep_items_schema")
def _():
    # Just under the compiler's nesting limit (100 levels; DEEP is refused
    # before any walk): the sample stops at its own depth bound.
    return warm_schema('{"type": "array", "items": ' * 90 + "{}" + "}" * 90)


@case("warm_up_ref_cycle_schema")
def _():
    return warm_schema(
        '{"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}'
    )


@case("warm_up_many_min_items_schema")
def _():
    return warm_schema('{"type": "array", "minItems": 5000, "items": {"type": "integer"}}')


@case("warm_up_wide_object_schema")
def _():
    props = ", ".join(f'"p{i}": {{"type": "string"}}' for i in range(5_000))
    return warm_schema('{"type": "object", "properties": {' + props + "}}")


@case("warm_up_huge_const_schema")
def _():
    return warm_schema('{"const": "' + "x" * (10 << 20) + '"}')


@case("warm_up_deep_structural_tag", OK)
def _():
    return warm_spec(
        '{"type": "structural_tag", "format": '
        + '{"type": "optional", "content": ' * DEEP
        + '{"type": "const_string", "value": "x"}'
        + "}" * (DEEP + 1)
    )


@case("warm_up_structural_tag_many_tags", OK)
def _():
    tag = (
        '{"type": "tag", "begin": "<f>", "end": "</f>", '
        '"content": {"type": "json_schema", "json_schema": {"type": "string"}}}'
    )
    return warm_spec(
        '{"type": "structural_tag", "format": {"type": "triggered_tags", '
        '"triggers": ["<f"], "tags": [' + ", ".join([tag] * 100_000) + "]}}"
    )


@case("matcher_warm_up_huge_token_id", VALUE)
def _():
    m = mp().Matcher(mp().compile_regex(tok(), "a+"))
    return m.warm_up([97, 2**62])


@case("matcher_warm_up_non_int_ids", TYPE)
def _():
    m = mp().Matcher(mp().compile_regex(tok(), "a+"))
    return m.warm_up([97, "a"])


@case("matcher_warm_up_million_tokens_of_a_grammar", OK)
def _():
    # The public walk has no cap of its own (the adapters cut at 512): a
    # million tokens along a string lexeme are walked in bounded memory (one
    # scratch row, the memo's bounds, no state kept per token: the walk kept
    # each token's state for a rollback it never made, 186 MiB at its peak)
    # and time, like consume_tokens.
    g = mp().compile_grammar(tok(), 'root ::= "\\"" [a-z]* "\\""', syntax="gbnf")
    walked = mp().Matcher(g).warm_up([34] + [97] * 1_000_000)
    assert walked == 1_000_001, walked
    assert peak_rss_mib() < 128, f"{peak_rss_mib()} MiB"
    return walked


def split_walk(extra: list[bytes], grammar: str, ids: list[int]) -> int:
    """A split warm-up walk along ``ids`` over the byte tokens plus
    ``extra`` (ids from 257 on), which must walk all of them."""
    vocab = BYTES + extra
    g = mp().compile_grammar(mp().Tokenizer.from_vocab(vocab, [EOS]), grammar, syntax="gbnf")
    walked = mp().Matcher(g).warm_up(ids, split_tokens=True)
    assert walked == len(ids), walked
    return walked


@case("matcher_warm_up_split_tokens_of_long_prefix_chains", OK)
def _():
    # Each token walked has 39 shorter tokens as prefixes (a, aa, ...): the
    # split walk fills at most 16 of them per token, so 100,000 tokens cost
    # bounded time and the one scratch row, whatever the chain's length.
    chain = [b"a" * k for k in range(2, 41)]
    longest = len(BYTES) + len(chain) - 1
    return split_walk(chain, 'root ::= "\\"" [a-z]* "\\""', [34] + [longest] * 100_000)


@case("matcher_warm_up_split_tokens_of_a_lexeme_per_byte", OK)
def _():
    # Each byte of these tokens ends a lexeme, so the chart grows by a set
    # per byte. Each prefix is consumed and rolled back on the walk's own
    # chart; a fork per prefix made the walk grow faster than its length
    # (each chunk a fork completed copied the shared chart's index: 4,000
    # tokens of 32 bytes took 6.9 s, 4.0 s now).
    pairs = [b"ab" * k for k in range(1, 9)]
    longest = len(BYTES) + len(pairs) - 1
    return split_walk(pairs, 'root ::= item*\nitem ::= "a" | "b" "a"? | "b"', [longest] * 2_000)


# --------------------------------------------------------------------------
# Harness self-checks: these must fail in the parent (see test_hostile.py).


def _decode_60kb_token(times: int) -> int:
    # Decoding one 60 kB token many times builds the bytes in Rust (through
    # mimalloc) before Python copies them.
    t = mp().Tokenizer.from_vocab([b"<e>", b"a" * 60_000], [0])
    return len(t.decode_bytes([1] * times))


def _vocab_of_60kb_tokens(n: int) -> int:
    # The token trie of n distinct 60 kB tokens is built in Rust (through
    # mimalloc): about three times the tokens' bytes.
    tokens = [bytes([i]) for i in range(256)]
    tokens += [bytes([65 + i % 26]) * 60_000 + i.to_bytes(4, "little") for i in range(n)]
    return mp().Tokenizer.from_vocab(tokens, [0]).vocab_size


@case("tokenizer_decode_bytes_1_2_gb")
def _():
    return _decode_60kb_token(20_000)


SELF_TESTS: dict[str, Callable[[], Any]] = {
    "allocate_past_cap": lambda: bytearray(6 << 30),
    "rust_allocates_200_mb": lambda: _vocab_of_60kb_tokens(2_000),
    "rust_allocates_1_gb": lambda: _vocab_of_60kb_tokens(10_000),
    "sleep": lambda: time.sleep(3600),
    "abort": lambda: __import__("os").abort(),
}


def _outcome(fn: Callable[[], Any]) -> dict[str, Any]:
    start = time.perf_counter()
    try:
        detail = fn()
        out: dict[str, Any] = {"outcome": "ok", "detail": repr(detail)[:200]}
    except BaseException as e:  # noqa: B036 - every escape is reported, then judged
        out = {
            "outcome": "exception",
            "type": type(e).__name__,
            "clean": isinstance(e, (ValueError, TypeError)),
            "message": str(e)[:300],
            "traceback": "".join(traceback.format_exception(type(e), e, e.__traceback__))[-1500:],
        }
    out["seconds"] = round(time.perf_counter() - start, 3)
    out["max_rss_mib"] = peak_rss_mib()
    return out


def main(argv: list[str]) -> int:
    name = argv[1]
    cap = int(argv[2]) if len(argv) > 2 else MEMORY_CAP_BYTES
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    fn = SELF_TESTS[name] if name in SELF_TESTS else CASES[name][0]
    mp()  # import outside the timed part
    if name in IMPORTS_TORCH:
        import torch  # noqa: F401  (likewise; the parent allows for it)
    out = _outcome(fn)
    sys.stdout.write("HOSTILE-RESULT " + json.dumps(out) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
