"""llguidance's Lark and xgrammar's EBNF forms (issue 23, item 5), walked
against the engines they come from: tokens sampled from maskpar's masks are
accepted by the reference, tokens sampled from the reference's masks are
allowed by maskpar, and both agree on whether the text may end."""

from __future__ import annotations

import random
from typing import Any, Callable

import numpy as np
import pytest
from test_special_tokens import _llama3_tokenizer, _llg_allowed, _llg_tokenizer, allowed

import maskpar
from conftest import LLAMA3_EOS, llama3_vocab

VOCAB = 128256


def _walks(
    ours: maskpar.Grammar,
    make_ref: Callable[[], Any],
    ref_allowed: Callable[[Any], set[int]],
    ref_consume: Callable[[Any, int], bool],
    ref_accepting: Callable[[Any], bool],
    steps: int = 30,
) -> None:
    rng = random.Random(3)
    for direction in ["maskpar", "reference"] * 5:
        m = maskpar.Matcher(ours)
        ref = make_ref()
        for _ in range(steps):
            mine = allowed(m, VOCAB) - set(LLAMA3_EOS)
            theirs = ref_allowed(ref) - set(LLAMA3_EOS)
            pool = sorted(mine if direction == "maskpar" else theirs)
            if not pool:
                break
            t = rng.choice(pool)
            assert t in mine, (direction, t)
            assert ref_consume(ref, t), (direction, t)
            assert m.consume_token(t)
            assert m.is_accepting() == ref_accepting(ref), (direction, t)


LARK_DIALECT = [
    'start: item{2,3} ("," item){,2}\nitem: /[a-z]{1,3}/',
    'start: "<" NUM{1} ">" x-y{2,}\nx-y: "ab" | "c"\nNUM: /[0-9]/{1,4}',
    '// a comment\nstart: A "x" # another\nA: /a*/',
    # A table: counted rows of counted cells.
    'start: row{1,3}\nrow: cell ("," cell){2} "\\n"\ncell: /[a-z0-9]{1,5}/',
    # Optional names, dashed rule names with digits, a terminal that may be
    # empty (the terminal becomes optional).
    'start: greet-1 name{,2} E "!"\ngreet-1: "hello" | "hi"\nname: " " /[A-Z][a-z]+/\nE: /[?]*/',
    # Numbers with a counted fraction, and alternatives of counted groups.
    'start: NUM ("." /[0-9]/{2})? (" " unit){0,1}\nNUM: /-?[1-9][0-9]{0,3}/\nunit: "kg" | "m"',
    # A JSON block inside a call, as tool-calling grammars write it.
    'start: "<call>" %json {"type": "object", "properties": {"name": {"enum": ["a", "b"]}, '
    '"n": {"type": "integer"}}, "required": ["name", "n"]} "</call>"',
]


@pytest.mark.parametrize("grammar", LARK_DIALECT)
def test_lark_dialect_agrees_with_llguidance(grammar: str) -> None:
    llguidance = pytest.importorskip("llguidance")
    tok = _llama3_tokenizer()
    llt = _llg_tokenizer()
    lark_json = llguidance.LLMatcher.grammar_from_lark(grammar)

    def make() -> Any:
        ref = llguidance.LLMatcher(llt, lark_json)
        assert not ref.is_error(), ref.get_error()
        return ref

    _walks(
        maskpar.compile_grammar(tok, grammar, syntax="lark"),
        make,
        lambda r: _llg_allowed(r, VOCAB),
        lambda r, t: r.consume_token(t) and not r.is_error(),
        lambda r: r.is_accepting(),
    )


EBNF = [
    # A lookahead that holds (its intended use).
    'root ::= item ("," item)* ";"\nitem ::= [a-z]+ (= [,;])',
    # Escapes, dashed and dotted rule names, and [^].
    'root ::= "\\u00e9" [\\x41-\\x43]{1,3} rule-a.b\nrule-a.b ::= "\\U0001F600" | "z" [^]',
    'root ::= ("a" | "\\x62")+ end.x\nend.x ::= "\\u0021"',
    # JSON-like text, with whitespace rules.
    'root ::= "{" ws "\\"k\\"" ws ":" ws num ws "}"\nnum ::= "-"? [0-9]+\nws ::= [ \\t\\n]*',
    # Counted repetitions, and a class with escapes.
    'root ::= [0-9]{2,4} ("-" [0-9]{2}){0,2} [\\t\\x2E]?',
    'root ::= "a"* "b"+ "c"? item.list\nitem.list ::= ("[" [^\\]\\n]{1,3} "]")*',
]


def _xgr_info() -> Any:
    xgrammar = pytest.importorskip("xgrammar")
    _, tokens, special = llama3_vocab()
    special_set = set(special) - set(LLAMA3_EOS)
    encoded = [b"" if i in special_set else t for i, t in enumerate(tokens)]
    return xgrammar.TokenizerInfo(
        encoded,
        vocab_type=xgrammar.VocabType.RAW,
        vocab_size=VOCAB,
        stop_token_ids=list(LLAMA3_EOS),
    )


@pytest.mark.parametrize("grammar", EBNF)
def test_ebnf_agrees_with_xgrammar(grammar: str) -> None:
    xgrammar = pytest.importorskip("xgrammar")
    info = _xgr_info()
    compiled = xgrammar.GrammarCompiler(info, cache_enabled=False).compile_grammar(grammar)
    tok = _llama3_tokenizer()

    def ref_allowed(r: Any) -> set[int]:
        bm = xgrammar.allocate_token_bitmask(1, VOCAB)
        r.fill_next_token_bitmask(bm)
        row = bm[0].numpy().view(np.uint32)
        bits = np.unpackbits(row.view(np.uint8), bitorder="little")[:VOCAB]
        return set(np.nonzero(bits)[0].tolist())

    _walks(
        maskpar.compile_grammar(tok, grammar, syntax="ebnf"),
        lambda: xgrammar.GrammarMatcher(compiled),
        ref_allowed,
        lambda r, t: r.accept_token(t),
        lambda r: r.is_completed(),
    )


def test_xgrammar_lookahead_is_a_hint_as_in_xgrammar(llama3: Any) -> None:
    """xgrammar's `(= ...)` constrains nothing in its parser (accept_string
    takes text that breaks it; only its mask cache reads it, for tokens that
    cross the rule's end). maskpar reads and drops it: where it holds, walks
    agree with xgrammar; where it does not, maskpar accepts what xgrammar's
    parser accepts (xgrammar's masks then refuse some tokenizations of it)."""
    pytest.importorskip("xgrammar")
    from xgrammar.testing import _is_grammar_accept_string

    enc, tok = llama3
    false_hint = 'root ::= x ";" | x ","\nx ::= ([a-z] x) | [a-z] (= ";")'
    g = maskpar.compile_grammar(tok, false_hint, syntax="ebnf")
    for text in ["ab,", "a;", "abc;"]:
        assert _is_grammar_accept_string(false_hint, text)
        m = maskpar.Matcher(g)
        assert m.consume_tokens(enc.encode(text)) and m.is_accepting(), text
    for bad in ['root ::= ("a" (= "b"))', 'root ::= "a" (= "b") "c"']:
        with pytest.raises(ValueError, match="lookahead"):
            maskpar.compile_grammar(tok, bad, syntax="ebnf")
