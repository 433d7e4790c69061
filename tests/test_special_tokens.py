"""Special tokens and token ids as grammar symbols (issue 23, item 4).

Lark `<|name|>`, `<[id]>`, `<[a-b,c]>` (llguidance's forms) and GBNF
`<[id]>`, `<name>`, `!<...>` (llama.cpp's) on the Llama-3 vocabulary: a
special token is allowed exactly where a grammar names it; masks agree with
`consume`, draft chains, forks and rollbacks; and walks agree with
llguidance in both directions.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import maskpar
from conftest import LLAMA3_EOS, llama3_vocab

# quicktok's Llama-3 names these (3.1's <|python_tag|> is reserved there).
PYTHON_TAG = 128006
EOM = 128007
EOT = 128009
END_OF_TEXT = 128001


def allowed(m: maskpar.Matcher, vocab_size: int) -> set[int]:
    bm = maskpar.allocate_token_bitmask(1, vocab_size)
    m.fill_next_token_bitmask(bm)
    row = np.asarray(bm[0]).view(np.uint32)
    bits = np.unpackbits(row.view(np.uint8), bitorder="little")
    return set(np.nonzero(bits)[0].tolist())


def specials(tok_special: list[int], ids: set[int]) -> set[int]:
    return ids & set(tok_special)


TOOL_CALL = r"""
start: TEXT? (<|start_header_id|> call <|end_header_id|>)?
call: "{" NAME "}"
NAME: /[a-z]{1,8}/
TEXT: /[a-z ]{1,20}/
"""


def test_lark_special_tokens_are_allowed_exactly_where_named(llama3: Any) -> None:
    enc, tok = llama3
    _, _, special = llama3_vocab()
    g = maskpar.compile_grammar(tok, TOOL_CALL, syntax="lark")
    m = maskpar.Matcher(g)
    n = tok.vocab_size
    # At the start: the tag, or text, or the end (EOS).
    first = allowed(m, n)
    assert specials(special, first) == {PYTHON_TAG, *LLAMA3_EOS}
    assert m.consume_tokens(enc.encode("hello world"))
    # After text: the tag or the end, never another special.
    assert specials(special, allowed(m, n)) == {PYTHON_TAG, *LLAMA3_EOS}
    assert m.consume_token(PYTHON_TAG)
    assert specials(special, allowed(m, n)) == set()
    assert m.consume_tokens(enc.encode("{get}"))
    assert specials(special, allowed(m, n)) == {EOM}
    assert m.forced_tokens() == [EOM, LLAMA3_EOS[0]] or m.forced_tokens()[0] == EOM
    assert m.consume_token(EOM)
    assert allowed(m, n) == set(LLAMA3_EOS)
    m.rollback(1)
    assert specials(special, allowed(m, n)) == {EOM}


def test_token_ids_and_ranges_in_lark_and_gbnf(llama3: Any) -> None:
    enc, tok = llama3
    n = tok.vocab_size
    g = maskpar.compile_grammar(tok, 'start: "a" <[128010-128012,128008]> "b"', syntax="lark")
    m = maskpar.Matcher(g)
    assert m.consume_tokens(enc.encode("a"))
    assert allowed(m, n) == {128008, 128010, 128011, 128012}
    for src in [
        "root ::= <[128006]> [a-z]+ <|end_header_id|>",
        "root ::= <|start_header_id|> [a-z]+ <[128007]>",
    ]:
        m = maskpar.Matcher(maskpar.compile_grammar(tok, src, syntax="gbnf"))
        assert allowed(m, n) == {PYTHON_TAG}
        assert m.consume_token(PYTHON_TAG) and m.consume_tokens(enc.encode("abc"))
        assert EOM in allowed(m, n) and PYTHON_TAG not in allowed(m, n)
        assert m.consume_token(EOM) and m.is_accepting()


def test_gbnf_negated_token_reads_any_other_token(llama3: Any) -> None:
    enc, tok = llama3
    n = tok.vocab_size
    # llama.cpp's reasoning idiom: anything but the closing token, then it.
    src = "root ::= <|start_header_id|> (!<|end_header_id|>)* <|end_header_id|>"
    m = maskpar.Matcher(maskpar.compile_grammar(tok, src, syntax="gbnf"))
    assert m.consume_token(PYTHON_TAG)
    row = allowed(m, n)
    # Every real token but EOS ids (which a complement never takes) is allowed.
    assert row == set(range(128256)) - set(LLAMA3_EOS)
    assert m.consume_tokens([*enc.encode("any text"), 128011, *enc.encode(" more")])
    assert m.consume_token(EOM) and m.is_accepting()


def test_unknown_names_and_ids_are_clear_errors(llama3: Any) -> None:
    _, tok = llama3
    with pytest.raises(ValueError, match="no token"):
        maskpar.compile_grammar(tok, "start: <|no_such_token|>", syntax="lark")
    with pytest.raises(ValueError, match="out of range"):
        maskpar.compile_grammar(tok, "root ::= <[999999]>", syntax="gbnf")
    with pytest.raises(ValueError, match="use it in a rule"):
        maskpar.compile_grammar(tok, 'start: A\nA: "x" <|eot_id|>', syntax="lark")
    g = maskpar.compile_grammar(tok, "start: <|end_header_id|>", syntax="lark")
    with pytest.raises(ValueError, match="compile it again"):
        g.for_tokenizer(tok)


def test_draft_chains_through_special_tokens_match_sequential_fills(llama3: Any) -> None:
    enc, tok = llama3
    n = tok.vocab_size
    g = maskpar.compile_grammar(tok, TOOL_CALL, syntax="lark")
    drafts = [*enc.encode("hi"), PYTHON_TAG, *enc.encode("{ab}"), EOM, LLAMA3_EOS[1]]
    m = maskpar.Matcher(g)
    bm = maskpar.allocate_token_bitmask(len(drafts) + 1, n)
    accepted = maskpar.fill_next_token_bitmask_par_with_draft_tokens([(m, 0, drafts)], bm)
    assert accepted == [len(drafts)]
    seq = maskpar.Matcher(g)
    for i, t in enumerate(drafts):
        one = maskpar.allocate_token_bitmask(1, n)
        seq.fill_next_token_bitmask(one)
        assert np.array_equal(np.asarray(one[0]), np.asarray(bm[i])), i
        assert seq.consume_token(t)
    # A special where it is not named stops the chain.
    bad = [*enc.encode("hi"), EOM]
    bm = maskpar.allocate_token_bitmask(len(bad) + 1, n)
    assert maskpar.fill_next_token_bitmask_par_with_draft_tokens([(m, 0, bad)], bm) == [
        len(bad) - 1
    ]


HEADER = (
    'start: (WORD " ")* <|start_header_id|> "[" WORD ("," WORD)* "]" <|end_header_id|>\n'
    "WORD: /[a-z]{1,6}/"
)

WALK_GRAMMARS = [
    ("lark", TOOL_CALL),
    ("lark", HEADER),
    ("lark", 'start: ("x" | <[128002-128004]>){1,4} "y"?'),
    # GBNF, as llama.cpp writes token references: by name and by id.
    ("gbnf", 'root ::= ([a-z]+ " ")* <|start_header_id|> "{" [a-z]{1,6} "}" <[128007]>'),
    ("gbnf", 'root ::= ("x" | <[128002]> | <|reserved_special_token_1|>){1,4} "y"?'),
]


@settings(max_examples=50, deadline=None)
@given(grammar=st.sampled_from(WALK_GRAMMARS), seed=st.integers(0, 2**32 - 1))
def test_specials_are_allowed_only_where_named(grammar: tuple[str, str], seed: int) -> None:
    enc, tokens, special = llama3_vocab()
    tok = _llama3_tokenizer()
    g = maskpar.compile_grammar(tok, grammar[1], syntax=grammar[0])
    named = {PYTHON_TAG, EOM, 128002, 128003, 128004}
    rng = random.Random(seed)
    m = maskpar.Matcher(g)
    for _ in range(30):
        row = allowed(m, tok.vocab_size)
        sp = specials(special, row)
        assert sp <= named | set(LLAMA3_EOS)
        if m.is_accepting():
            assert set(LLAMA3_EOS) <= row
        else:
            assert not (set(LLAMA3_EOS) & row)
        if not row:
            break
        # Prefer specials and short tokens, so walks reach them.
        choices = sorted(row)
        pick = rng.choice(sorted(sp)) if sp and rng.random() < 0.5 else rng.choice(choices)
        assert m.consume_token(pick)
        if m.is_terminated():
            break


_TOK: list[maskpar.Tokenizer] = []


def _llama3_tokenizer() -> maskpar.Tokenizer:
    if not _TOK:
        _, tokens, special = llama3_vocab()
        _TOK.append(maskpar.Tokenizer.from_vocab(tokens, LLAMA3_EOS, special))
    return _TOK[0]


# --- differential tests against llguidance -------------------------------

LLAMA3_PAT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def _llg_tokenizer() -> Any:
    llguidance = pytest.importorskip("llguidance")
    enc, tokens, special = llama3_vocab()
    special_map = {tokens[i].decode("utf-8"): i for i in special}
    special_set = set(special)
    return llguidance.LLTokenizer.from_tiktoken(
        encoder={t: i for i, t in enumerate(tokens) if i not in special_set},
        special_tokens=special_map,
        pattern=LLAMA3_PAT,
        eos_token=LLAMA3_EOS[1],
        n_vocab=128256,
    )


def _llg_allowed(m: Any, n: int) -> set[int]:
    mask = np.frombuffer(m.compute_bitmask(), dtype=np.uint8)
    bits = np.unpackbits(mask, bitorder="little")[:n]
    return set(np.nonzero(bits)[0].tolist())


DIFF_GRAMMARS = [
    TOOL_CALL,
    'start: "a" <[128010-128012,128008]> "b"',
    HEADER,
    'start: ("x" | <[128002-128004]>){1,4} "y"',
    'start: <[64-70]> "x"',
]


@pytest.mark.parametrize("grammar", DIFF_GRAMMARS)
def test_walks_agree_with_llguidance(grammar: str) -> None:
    llguidance = pytest.importorskip("llguidance")
    enc, tokens, special = llama3_vocab()
    tok = _llama3_tokenizer()
    llt = _llg_tokenizer()
    g = maskpar.compile_grammar(tok, grammar, syntax="lark")
    lark_json = llguidance.LLMatcher.grammar_from_lark(grammar)
    rng = random.Random(7)
    text_specials = set(special) - set(LLAMA3_EOS)
    for direction in ["maskpar", "llguidance"] * 6:
        m = maskpar.Matcher(g)
        ref = llguidance.LLMatcher(llt, lark_json)
        assert not ref.is_error(), ref.get_error()
        for _ in range(25):
            ours = allowed(m, tok.vocab_size)
            theirs = _llg_allowed(ref, 128256)
            # Where a special token may come, both say so.
            assert ours & text_specials == theirs & text_specials, (grammar, direction)
            source = ours if direction == "maskpar" else theirs
            # llguidance's EOS bit is its single EOS id; ours are both.
            pool = sorted(source - set(LLAMA3_EOS))
            if not pool:
                break
            sp = sorted(source & text_specials)
            t = rng.choice(sp) if sp and rng.random() < 0.4 else rng.choice(pool)
            assert t in ours, (grammar, direction, t)
            assert ref.consume_token(t) and not ref.is_error(), (t, ref.get_error())
            assert m.consume_token(t)
        assert m.is_accepting() == ref.is_accepting(), grammar


def test_draft_trees_and_grammar_aware_drafts_through_specials(llama3: Any) -> None:
    enc, tok = llama3
    n = tok.vocab_size
    g = maskpar.compile_grammar(tok, TOOL_CALL, syntax="lark")
    m = maskpar.Matcher(g)
    assert m.consume_tokens(enc.encode("hi"))
    # Node 0 is the current state; 1: the tag (valid), 2: EOM (refused
    # here), 3: "{" after the tag, 4: EOM after the tag (refused).
    tokens = [0, PYTHON_TAG, EOM, *enc.encode("{"), EOM]
    parents = [-1, 0, 0, 1, 1]
    bm = maskpar.allocate_token_bitmask(len(tokens), n)
    valid = maskpar.fill_next_token_bitmask_par_with_draft_tree([(m, 0, (tokens, parents))], bm)
    assert valid == [[True, True, False, True, False]]
    for node, path in [(0, []), (1, [PYTHON_TAG]), (3, [PYTHON_TAG, tokens[3]])]:
        seq = m.fork()
        assert seq.consume_tokens(path)
        one = maskpar.allocate_token_bitmask(1, n)
        seq.fill_next_token_bitmask(one)
        assert np.array_equal(np.asarray(one[0]), np.asarray(bm[node])), node
    for refused in (2, 4):
        assert (np.asarray(bm[refused]) == -1).all()
    # Forced tokens after the call's text: the closing special, then EOS
    # is not forced (two EOS ids).
    assert m.consume_tokens([PYTHON_TAG, *enc.encode("{ab}")])
    drafts = maskpar.grammar_aware_drafts([(m, [])], max_drafts=4)
    assert drafts == [[EOM]]


def test_a_text_token_matched_by_ids_is_read_both_ways_unlike_llguidance() -> None:
    """Token 64 is "a": here it may be the id terminal or the text "a".
    maskpar takes both readings (an Earley parser keeps every parse);
    llguidance reads it as the id only and then forces "x". A documented
    difference: this test pins both behaviours."""
    llguidance = pytest.importorskip("llguidance")
    grammar = 'start: <[64-70]> "x" | "a" <[64]> "y"'
    tok = _llama3_tokenizer()
    m = maskpar.Matcher(maskpar.compile_grammar(tok, grammar, syntax="lark"))
    assert m.consume_token(64)
    ours = allowed(m, 128256)
    assert 64 in ours and 87 in ours  # "a" read as text then <[64]>; "x" (id 87)
    ref = llguidance.LLMatcher(_llg_tokenizer(), llguidance.LLMatcher.grammar_from_lark(grammar))
    assert ref.consume_token(64)
    theirs = _llg_allowed(ref, 128256)
    assert 64 not in theirs and 87 in theirs
