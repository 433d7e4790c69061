"""Context-free grammars (GBNF): masks equal a slow independent Earley
recognizer on generated grammars and vocabularies; the llama.cpp grammar
corpus compiles and its accept/reject cases hold on the Llama-3 vocabulary;
matcher laws and parallel fills hold for grammars as for regexes."""

from __future__ import annotations

import glob
import json
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import maskpar
from cfg_oracle import Grammar, Recognizer, render
from conftest import GRAMMARS, LLAMA3_EOS, allowed_ids, corpus_text, new_bitmask

CHARS = "ab(+"


@st.composite
def node(draw, names, depth=0):
    leaf = depth >= 3 or draw(st.integers(0, 2)) == 0
    if leaf:
        kind = draw(st.sampled_from(["lit", "lit", "class", "ref", "ref"]))
        if kind == "lit":
            return ("lit", draw(st.text(alphabet=CHARS, min_size=1, max_size=3)))
        if kind == "class":
            chars = draw(st.text(alphabet=CHARS, min_size=0, max_size=3))
            return ("class", "".join(sorted(set(chars))), draw(st.booleans()))
        return ("ref", draw(st.sampled_from(names)))
    kind = draw(st.sampled_from(["seq", "alt", "rep"]))
    if kind == "rep":
        lo = draw(st.integers(0, 2))
        hi = draw(st.sampled_from([None, lo, lo + 1, lo + 2]))
        return ("rep", draw(node(names, depth + 1)), lo, hi)
    items = draw(st.lists(node(names, depth + 1), min_size=1 if kind == "alt" else 0, max_size=3))
    return (kind, items)


@st.composite
def grammars(draw):
    names = ["root"] + [f"r{i}" for i in range(draw(st.integers(0, 2)))]
    return {n: draw(node(names)) for n in names}


@st.composite
def vocabularies(draw):
    toks = set(CHARS) | set(
        draw(st.lists(st.text(alphabet=CHARS, min_size=2, max_size=4), max_size=15))
    )
    toks = sorted(t.encode() for t in toks)
    return toks + ["é".encode(), b"\xc3"]


def gbnf(rules) -> str:
    return "\n".join(f"{name} ::= {render(body)}" for name, body in rules.items())


def build(tokens, rules):
    toks = tokens + [b"<eos>", b"<sp>"]
    eos, special = len(tokens), len(tokens) + 1
    tok = maskpar.Tokenizer.from_vocab(toks, [eos], [special], vocab_size=len(toks) + 3)
    return tok, toks, eos, special


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules=grammars(), tokens=vocabularies(), data=st.data())
def test_masks_equal_reference_recognizer(rules, tokens, data):
    oracle_g = Grammar(rules)
    tok, toks, eos, special = build(tokens, rules)
    src = gbnf(rules)
    if "root" not in oracle_g.alts:
        with pytest.raises(ValueError, match="matches no string"):
            maskpar.compile_grammar(tok, src)
        return
    bm = new_bitmask(1, tok.vocab_size)
    # Another grammar walked first on the same vocabulary fills the lexer
    # cache its grammars share: the masks checked below must not notice.
    warm = data.draw(grammars(), label="warm-up grammar")
    if "root" in Grammar(warm).alts:
        w = maskpar.Matcher(maskpar.compile_grammar(tok, gbnf(warm)))
        for _ in range(4):
            w.fill_next_token_bitmask(bm)
            text = [t for t in allowed_ids(bm) if t != eos]
            if not text or not w.consume_token(data.draw(st.sampled_from(text))):
                break
    g = maskpar.compile_grammar(tok, src)
    m = maskpar.Matcher(g)
    rec = Recognizer(oracle_g)
    for _ in range(6):
        bm.fill(-1)
        m.fill_next_token_bitmask(bm)
        got = allowed_ids(bm)
        want = rec.allowed(toks, eos, frozenset([special]), tok.vocab_size)
        assert got == want, src
        assert m.is_accepting() == rec.accepting()
        text = [t for t in got if t != eos]
        if not text:
            break
        t = data.draw(st.sampled_from(text))
        assert m.consume_token(t)
        assert rec.feed(toks[t])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules=grammars(), tokens=vocabularies(), data=st.data())
def test_draft_fill_rollback_fork_on_grammars(rules, tokens, data):
    if "root" not in Grammar(rules).alts:
        return
    tok, toks, eos, special = build(tokens, rules)
    g = maskpar.compile_grammar(tok, gbnf(rules))
    m = maskpar.Matcher(g)
    walk = data.draw(st.lists(st.integers(0, len(toks) - 1), max_size=8))
    n = m.validate_tokens(walk)
    assert m.consume_tokens(walk[:n]) and m.num_consumed == n
    drafts = data.draw(st.lists(st.integers(0, tok.vocab_size - 1), max_size=5))
    f = m.fork()
    rows = new_bitmask(len(drafts) + 1, tok.vocab_size, fill=7)
    acc = maskpar.fill_next_token_bitmask_par_with_draft_tokens([(m, 0, drafts)], rows)[0]
    assert acc == m.validate_tokens(drafts)
    one = new_bitmask(1, tok.vocab_size)
    for i in range(len(drafts) + 1):
        if i <= acc:
            f.fill_next_token_bitmask(one)
            assert np.array_equal(rows[i], one[0])
            if i < acc:
                assert f.consume_token(drafts[i])
        else:
            assert (rows[i] == -1).all()
    assert m.num_consumed == n
    back = data.draw(st.integers(0, n))
    m.rollback(back)
    fresh = maskpar.Matcher(g)
    fresh.consume_tokens(walk[: n - back])
    a, b = new_bitmask(1, tok.vocab_size), new_bitmask(1, tok.vocab_size)
    m.fill_next_token_bitmask(a)
    fresh.fill_next_token_bitmask(b)
    assert np.array_equal(a, b)


def gbnf_files():
    return sorted(glob.glob(os.path.join(GRAMMARS, "llama.cpp", "grammars", "*.gbnf")))


@pytest.mark.parametrize("path", gbnf_files(), ids=os.path.basename)
def test_llama_cpp_grammars_compile(llama3, path):
    _, tok = llama3
    g = maskpar.compile_grammar(tok, corpus_text(path))
    assert g.kind == "gbnf"
    bm = maskpar.allocate_token_bitmask(1, tok.vocab_size)
    maskpar.Matcher(g).fill_next_token_bitmask(bm)


def integration_cases():
    path = os.path.join(GRAMMARS, "llama.cpp", "test-grammar-integration.cases.jsonl")
    with open(path, encoding="utf-8") as f:
        cases = [json.loads(line) for line in f]
    return [c for c in cases if c["kind"] == "gbnf"]


def accepts(tok, enc, g, text: str) -> bool:
    m = maskpar.Matcher(g)
    for t in enc.encode(text):
        if not m.consume_token(t):
            return False
    return m.consume_token(LLAMA3_EOS[1])


@pytest.mark.parametrize("case", integration_cases(), ids=lambda c: c["description"])
def test_llama_cpp_integration_cases(llama3, case):
    enc, tok = llama3
    src = case.get("grammar") or case.get("schema")
    if "<[" in src:
        # Token ids (llama.cpp's cases read token(N) literals the extractor
        # dropped): both grammars start with <[10]> and read !<[11]> after it.
        m = maskpar.Matcher(maskpar.compile_grammar(tok, src))
        assert m.validate_tokens([10, 5, 99, 12]) == 4
        assert not m.consume_token(11)
        return
    g = maskpar.compile_grammar(tok, src)
    for text in case["valid"]:
        assert accepts(tok, enc, g, text), text
    for text in case["invalid"]:
        assert not accepts(tok, enc, g, text), text


def test_json_grammar_on_real_text_and_forced_tokens(llama3):
    enc, tok = llama3
    json_gbnf = corpus_text(os.path.join(GRAMMARS, "llama.cpp", "grammars", "json.gbnf"))
    g = maskpar.compile_grammar(tok, json_gbnf)
    text = '{"name": "Zoë", "tags": [1, -2.5e3, true, null], "o": {"k": "v\\n"}}'
    m = maskpar.Matcher(g)
    # "{" is forced, but tokens such as '{"' extend past it: nothing is certain.
    assert m.forced_tokens() == []
    bm = maskpar.allocate_token_bitmask(1, tok.vocab_size)
    for t in enc.encode(text):
        m.fill_next_token_bitmask(bm)
        assert allowed_ids(bm.numpy()).count(t) == 1
        assert m.consume_token(t)
    assert m.is_accepting()
    assert not maskpar.Matcher(g).consume_tokens(enc.encode('{"a": tru}'))
    # Forced text across lexeme and rule boundaries becomes free drafts.
    g = maskpar.compile_grammar(tok, 'root ::= "{" ws "\\"name\\":" ws [0-9]+ "}"\nws ::= ""')
    m = maskpar.Matcher(g)
    forced = m.forced_tokens()
    assert forced and b'{"name":'.startswith(tok.decode_bytes(forced))
    assert len(tok.decode_bytes(forced)) >= 6
    assert m.consume_tokens(forced)


def test_masks_of_recurring_states_equal_fresh_masks(llama3):
    """A grammar keeps masks of parser states it met before, found by a name
    that ignores where in the text a state is. Alike places at other depths
    or other positions in an object must not share a mask; each mask of a
    grammar that has seen the text twice must equal the mask a new grammar
    computes there."""
    enc, tok = llama3
    json_gbnf = corpus_text(os.path.join(GRAMMARS, "llama.cpp", "grammars", "json.gbnf"))
    text = (
        '{"a": 1, "b": {"c": 2, "d": [3, {"e": 4}], "f": {"g": ""}}, "h": [6, 7], '
        '"i": {"c": 2, "d": [3, {"e": 4}]}, "j": [[1], [2, [3]]], "k": true}'
    )
    ids = enc.encode(text) + [LLAMA3_EOS[0]]
    g = maskpar.compile_grammar(tok, json_gbnf)
    bm = new_bitmask(1, tok.vocab_size)
    m = maskpar.Matcher(g)
    for t in ids:  # the first pass: states are seen, rows kept
        m.fill_next_token_bitmask(bm, 0)
        assert m.consume_token(t)
    m = maskpar.Matcher(g)
    for i, t in enumerate(ids):
        m.fill_next_token_bitmask(bm, 0)
        fresh = maskpar.Matcher(maskpar.compile_grammar(tok, json_gbnf))
        assert fresh.consume_tokens(ids[:i])
        want = new_bitmask(1, tok.vocab_size)
        fresh.fill_next_token_bitmask(want, 0)
        assert np.array_equal(bm, want), (i, enc.decode(ids[:i])[-30:])
        assert m.consume_token(t)


@pytest.mark.parametrize(
    "src,msg",
    [
        ("root ::= x", "undefined rule 'x'"),
        ('root ::= ("a"', "expected '\\)'"),
        ('root = "a"', "'::='"),
        ('a ::= "a"', "no start rule"),
        ('root ::= root "a"', "matches no string"),
        ("root ::= [a-", "unterminated"),
    ],
)
def test_grammar_errors(src, msg):
    tok = maskpar.Tokenizer.from_vocab([b"a", b"<e>"], [1])
    with pytest.raises(ValueError, match=msg):
        maskpar.compile_grammar(tok, src, syntax="gbnf")
    with pytest.raises(ValueError, match="Lark syntax error at line 1"):
        maskpar.compile_grammar(tok, 'start: ("a"', syntax="lark")
    with pytest.raises(ValueError, match="unknown syntax"):
        maskpar.compile_grammar(tok, src, syntax="yaml")


@pytest.mark.parametrize(
    "src,syntax,msg",
    [
        # Repetition that would expand into a huge lexeme or grammar.
        ('root ::= "a"{10000}{10000}', "gbnf", "heap usage|limit|exceed"),
        ('root ::= ("a"{100} b){1000}{1000}\nb ::= "x" | b b', "gbnf", "more than 200000 rules"),
        ('root ::= "a"{100000}', "gbnf", "exceeds the limit 10000"),
        ('start: A\nA: "a" ~ 99999', "lark", "exceeds the limit 10000"),
        # A lexeme whose DFA would need 2^40 states.
        # The work budget stops the determinization before its size bound.
        ('root ::= [ab]* "a" [ab]{40}', "gbnf", "limit|exceed|steps of work"),
        # Templates that instantiate themselves forever.
        ('start: t{"a"}\nt{x}: t{t{x}}', "lark", "nest deeper than 64"),
    ],
    ids=["nested-counts", "rule-explosion", "gbnf-count", "lark-count", "dfa-blowup", "templates"],
)
def test_hostile_grammars_hit_documented_bounds(src, syntax, msg):
    """Grammars built to exhaust memory or time fail fast with a ValueError
    naming the bound, instead of hanging or crashing the process."""
    tok = maskpar.Tokenizer.from_vocab([b"a", b"x", b"<e>"], [2])
    with pytest.raises(ValueError, match=msg):
        maskpar.compile_grammar(tok, src, syntax=syntax)


def test_ambiguous_grammars_hit_the_item_bound_while_parsing():
    """Each `a` adds an item per rule and origin, and each item completes
    against the items of earlier sets: the parser refuses a step that looks
    at more than 100,000 items (docs/limits.md) after a few bytes, before
    a set reaches the 200,000-item bound. Each of those bytes stays cheap:
    completions find the items waiting for a nonterminal through the set's
    index (reading whole sets took minutes per byte here, short of the
    bound)."""
    rules = 4000
    src = "root ::= " + " | ".join(f"r{i}" for i in range(rules)) + "\n"
    src += "\n".join(f'r{i} ::= r{i} r{i} | "a"' for i in range(rules))
    tok = maskpar.Tokenizer.from_vocab([b"a", b"<e>"], [1])
    m = maskpar.Matcher(maskpar.compile_grammar(tok, src, syntax="gbnf"))
    with pytest.raises(ValueError, match="more than 100000 item completions"):
        for _ in range(1000):
            assert m.consume_token(0)
    assert 2 < m.num_consumed < 30


def test_lexemes_in_progress_are_bounded():
    """`[a]* "b"` may start at every `a`, and none of those scans can end
    before a `b`: past 20,000 scans in progress (README, limits) the parser
    refuses with a ValueError, the matcher is left where it was, and masks
    still work."""
    tok = maskpar.Tokenizer.from_vocab([b"a", b"b", b"a" * 64, b"<e>"], [3])
    g = maskpar.compile_grammar(tok, 'root ::= s*\ns ::= [a]* "b" | "a"', syntax="gbnf")
    m = maskpar.Matcher(g)
    with pytest.raises(ValueError, match="more than 20000 lexemes in progress"):
        for _ in range(1000):
            assert m.consume_token(2)
    consumed = m.num_consumed
    assert 300 <= consumed <= 20000 // 64
    bm = maskpar.allocate_token_bitmask(1, tok.vocab_size)
    m.fill_next_token_bitmask(bm)
    assert m.num_consumed == consumed
    assert m.consume_token(1)  # a "b" ends every scan at once
