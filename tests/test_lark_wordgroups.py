"""Large Lark alternations of strings (issue 22): a rule's many anonymous
strings, and a terminal that is only strings, compile as trie-shaped
lexemes, and lex exactly as lark does, checked against the real ``lark``
package on generated grammars where the strings interleave with patterns
and other strings in lark's terminal order (priority, maximum width,
pattern length)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_lark import OVERLAPPING, assume_no_name_ties, check_against_lark, lalr_oracle

import maskpar

# Every string over "ab" of 1 to 5 characters: enough for the alternations
# to be grouped (wordgroups::MIN_GROUP is 16) and to collide with the
# patterns and strings around them.
WORDS = ["".join(p) for n in range(1, 6) for p in itertools.product("ab", repeat=n)]


@st.composite
def word_group_grammars(draw):
    """A rule `words` of 16 to 40 strings (or a terminal `W` of them), next
    to a few overlapping terminals of priority 0 or 1 (patterns, strings,
    alternations), in slots that expect some of each."""
    words = draw(st.lists(st.sampled_from(WORDS), min_size=16, max_size=40, unique=True))
    as_terminal = draw(st.booleans())
    n = draw(st.integers(1, 3))
    item = st.one_of(
        st.sampled_from(OVERLAPPING).map(lambda p: f"/{p}/"),
        st.sampled_from(WORDS).map(lambda t: f'"{t}"'),
    )
    bodies = draw(st.lists(item, min_size=n, max_size=n, unique=True))
    terms = [f"T{i}" for i in range(n)]
    group = "W" if as_terminal else "words"
    slots = []
    for _ in range(draw(st.integers(1, 3))):
        alts = draw(st.lists(st.sampled_from([group, *terms]), min_size=1, max_size=3, unique=True))
        slots.append("(" + " | ".join(alts) + ")" + draw(st.sampled_from(["", "+", "?"])))
    assume(any(group in s for s in slots))
    alternation = " | ".join(f'"{w}"' for w in words)
    lines = ["start: " + " ".join(slots)]
    lines.append(f"W: {alternation}" if as_terminal else f"words: {alternation}")
    lines += [f"T{i}.{draw(st.sampled_from([0, 0, 1]))}: {b}" for i, b in enumerate(bodies)]
    return "\n".join(lines) + "\n"


@settings(max_examples=250, deadline=None, derandomize=True)
@given(src=word_group_grammars(), data=st.data())
def test_word_groups_agree_with_lark(llama3, src, data):
    """Left out, as in test_lark: a pattern tied with another terminal on
    priority, width and text length, which lark orders by name."""
    oracle = lalr_oracle(src)
    assume_no_name_ties(oracle)
    check_against_lark(llama3, src, oracle, data)


def grammar_of_words(n: int, as_terminal: bool) -> str:
    words = " | ".join(f'"w{i:06d}x"' for i in range(n))
    if as_terminal:
        return f'start: W+\nW: {words}\n%ignore " "\n'
    return f'start: word+\nword: {words}\n%ignore " "\n'


@pytest.mark.parametrize("as_terminal", [False, True])
def test_100000_strings_compile_and_mask_exactly(as_terminal):
    """100,000 strings compile (no "more than 20000 lexemes"), and the
    masks after a prefix allow exactly the bytes some word continues with."""
    tok = maskpar.Tokenizer.from_vocab([bytes([i]) for i in range(256)] + [b"<eos>"], [256])
    g = maskpar.compile_grammar(tok, grammar_of_words(100_000, as_terminal), syntax="lark")
    m = maskpar.Matcher(g)
    bm = maskpar.allocate_token_bitmask(1, g.vocab_size).numpy()

    def allowed() -> set[int]:
        m.fill_next_token_bitmask(bm, 0)
        return {t for t in range(g.vocab_size) if (int(bm[0, t // 32]) >> (t % 32)) & 1}

    # A word, or the ignored space (anywhere between tokens).
    assert allowed() == {ord("w"), ord(" ")}
    assert m.consume_bytes(b"w0999")
    assert allowed() == {ord(c) for c in "0123456789"}
    assert m.consume_bytes(b"99x")
    # After a whole word: another word, the ignored space, or the end.
    assert allowed() == {ord("w"), ord(" "), 256}
    assert m.consume_bytes(b" w000000x") and m.is_accepting()
    assert not maskpar.Matcher(g).consume_bytes(b"w100000x")
