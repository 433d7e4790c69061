"""Property tests: every regex mask equals a brute-force oracle built on
Python's `regex` partial matching (tests/oracle.py), on generated patterns and
vocabularies that include tokens ending inside multi-byte characters."""

from __future__ import annotations

from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

import maskpar
from conftest import allowed_ids, new_bitmask
from oracle import RegexOracle

# Code points the generated patterns and vocabularies are built from: ASCII,
# 2-, 3- and 4-byte UTF-8 characters, and characters that are regex syntax.
ALPHABET = ["a", "b", "c", "z", "0", "7", " ", "\n", ".", "-", "é", "ß", "ж", "中", "€", "😀", "𝄞"]


def lit(c: str) -> str:
    """A literal both Rust's and Python's regex syntax read the same way."""
    if c.isascii() and c.isalnum():
        return c
    cp = ord(c)
    return f"\\u{cp:04X}" if cp <= 0xFFFF else f"\\U{cp:08X}"


@st.composite
def char_class(draw) -> tuple[str, list[int]]:
    items, cuts = [], []
    for _ in range(draw(st.integers(1, 3))):
        a, b = sorted(draw(st.sampled_from(ALPHABET)) for _ in range(2))
        a, b = (a, b) if ord(a) <= ord(b) else (b, a)
        items.append(f"{lit(a)}-{lit(b)}" if a != b else lit(a))
        cuts += [ord(a), ord(b)]
    neg = "^" if draw(st.booleans()) else ""
    return f"[{neg}{''.join(items)}]", cuts


@st.composite
def regex_ast(draw, depth: int = 0) -> tuple[str, list[int]]:
    leaf = depth >= 3 or draw(st.integers(0, 2)) == 0
    if leaf:
        kind = draw(st.sampled_from(["lit", "lit", "word", "class", "dot"]))
        if kind == "lit":
            c = draw(st.sampled_from(ALPHABET))
            return lit(c), [ord(c)]
        if kind == "word":
            w = draw(st.text(alphabet=ALPHABET, min_size=2, max_size=4))
            return "".join(lit(c) for c in w), [ord(c) for c in w]
        if kind == "class":
            return draw(char_class())
        return ".", []
    kind = draw(st.sampled_from(["cat", "alt", "star", "plus", "opt", "rep", "group", "or_empty"]))
    a, ca = draw(regex_ast(depth + 1))
    # Groups and empty branches: the compiler drops the one and keeps one
    # of the other (regex_dfa/simplify.rs), beside repetitions of repetitions.
    if kind == "group":
        return f"({a})", ca
    if kind == "or_empty":
        return f"(?:{a}||)", ca
    if kind in ("cat", "alt"):
        b, cb = draw(regex_ast(depth + 1))
        return (f"(?:{a}{b})" if kind == "cat" else f"(?:{a}|{b})"), ca + cb
    if kind == "rep":
        m = draw(st.integers(0, 3))
        n = draw(st.integers(m, m + 3))
        return f"(?:{a}){{{m},{n}}}", ca
    return f"(?:{a}){ {'star': '*', 'plus': '+', 'opt': '?'}[kind] }".replace(" ", ""), ca


@st.composite
def vocabulary(draw) -> list[bytes]:
    """Tokens cut from UTF-8 text at arbitrary byte offsets, plus odd bytes."""
    text = draw(st.text(alphabet=ALPHABET, min_size=10, max_size=40)).encode()
    tokens = {c.encode() for c in ALPHABET}
    for _ in range(draw(st.integers(5, 25))):
        i = draw(st.integers(0, len(text) - 1))
        j = draw(st.integers(i + 1, min(len(text), i + 6)))
        tokens.add(text[i:j])
    tokens |= {b"\x80", b"\xff", b"\xe4\xb8"}
    return sorted(tokens)


def build(tokens: list[bytes], pattern: str):
    # Two trailing ids: EOS and a special token; plus padding up to vocab_size.
    toks = tokens + [b"<eos>", b"<special>"]
    eos, special = len(tokens), len(tokens) + 1
    tok = maskpar.Tokenizer.from_vocab(toks, [eos], [special], vocab_size=len(toks) + 7)
    return tok, toks, eos, special, maskpar.compile_regex(tok, pattern)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ast=regex_ast(), tokens=vocabulary(), data=st.data())
def test_masks_equal_bruteforce_oracle(ast, tokens, data):
    try:
        check_masks_against_oracle(ast, tokens, data)
    except TimeoutError:
        reject()  # the backtracking oracle cannot judge this pattern in time


def check_masks_against_oracle(ast, tokens, data) -> None:
    pattern, cuts = ast
    tok, toks, eos, special, g = build(tokens, pattern)
    oracle = RegexOracle(pattern, cuts)
    m = maskpar.Matcher(g)
    prefix = b""
    bm = new_bitmask(1, tok.vocab_size)
    for _ in range(6):
        bm.fill(-1)
        m.fill_next_token_bitmask(bm)
        got = allowed_ids(bm)
        want = oracle.allowed(prefix, toks, [eos], {special}, tok.vocab_size)
        assert got == want, (pattern, prefix)
        assert m.is_accepting() == (eos in want)
        text_ids = [t for t in got if t != eos]
        if not text_ids:
            break
        t = data.draw(st.sampled_from(text_ids))
        assert m.consume_token(t)
        prefix += toks[t]
    # Every id the oracle forbids is refused by consume_token, state unchanged.
    want = oracle.allowed(prefix, toks, [eos], {special}, tok.vocab_size)
    forbidden = [t for t in range(tok.vocab_size) if t not in want]
    for t in forbidden[:10]:
        before = m.num_consumed
        assert not m.consume_token(t)
        assert m.num_consumed == before


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ast=regex_ast(), tokens=vocabulary(), data=st.data())
def test_forced_tokens_are_a_prefix_of_every_continuation(ast, tokens, data):
    pattern, cuts = ast
    tok, toks, eos, special, g = build(tokens, pattern)
    oracle = RegexOracle(pattern, cuts)
    m = maskpar.Matcher(g)
    prefix = b""
    for _ in range(data.draw(st.integers(0, 3))):
        want = oracle.allowed(prefix, toks, [eos], {special}, tok.vocab_size)
        ids = [t for t in want if t != eos]
        if not ids:
            break
        t = data.draw(st.sampled_from(ids))
        assert m.consume_token(t)
        prefix += toks[t]
    forced = m.forced_tokens()
    assert m.validate_tokens(forced) == len(forced)
    if forced and forced[-1] == eos:
        # EOS is forced only where the text must end: it is complete and no
        # byte can follow.
        forced = forced[:-1]
        end = prefix + b"".join(toks[t] for t in forced)
        assert oracle.accepts(end), (pattern, prefix)
        assert not any(oracle.live(end + bytes([x])) for x in range(256)), (pattern, prefix)
    assert eos not in forced
    fbytes = b"".join(toks[t] for t in forced)
    # No text may stop or branch before the forced bytes end: at every point
    # inside them EOS is refused and only the forced next byte stays live.
    for k in range(len(fbytes)):
        assert not oracle.accepts(prefix + fbytes[:k]), (pattern, prefix, forced)
        for x in range(256):
            if x != fbytes[k]:
                assert not oracle.live(prefix + fbytes[:k] + bytes([x])), (pattern, prefix, k, x)


def walk_against_oracle(tokens: list[bytes], pattern: str, oracle_pattern: str, texts: list[str]):
    """Walks each text a character at a time through `pattern`'s grammar,
    every mask compared with the oracle's for `oracle_pattern`."""
    tok, toks, eos, special, g = build(tokens, pattern)
    oracle = RegexOracle(oracle_pattern, [])
    bm = new_bitmask(1, tok.vocab_size)
    for text in texts:
        m = maskpar.Matcher(g)
        for i in range(len(text) + 1):
            bm.fill(-1)
            m.fill_next_token_bitmask(bm)
            want = oracle.allowed(text[:i].encode(), toks, [eos], {special}, tok.vocab_size)
            assert allowed_ids(bm) == want, (pattern, text[:i])
            if i == len(text):
                break
            t = toks.index(text[i].encode())
            assert m.consume_token(t) == (t in want), (pattern, text[: i + 1])
            if t not in want:
                break


def test_composed_part_keeps_a_repetition_of_a_repetition():
    # Found by fuzzing: regex-syntax prints `(?:[ab]+)?` as `[ab]+?` (lazy,
    # one or more), and a composed pattern's part went through that print,
    # so "x" was refused by `(?:x(?:(?:a|b)+)?)?`.
    tokens = [c.encode() for c in "abxy"] + [b"ab", b"xa", b"xy"]
    for pattern in ["(?:x(?:(?:a|b)+)?)?", "(?:.(?:(?:(?:a|b))+)?)?", "(?:x(?:(?:a|b)+)?)?y*"]:
        walk_against_oracle(tokens, pattern, pattern, ["x", "xab", "xy", "y", "xby"])


def test_parts_printed_alike_keep_their_own_languages():
    # `x(?:[ab]+)?` and `x[ab]+?` print alike; composed parts are remembered
    # across compiles, so the second pattern must not get the first's part.
    # Both orders, in one process (the oracle is given the greedy form: the
    # `regex` module's partial matches of a lazy `+?` allow too much).
    tokens = [c.encode() for c in "abxc"] + [b"cc", b"xa", b"ab"]
    texts = ["x" + "c" * 12, "xab" + "c" * 13, "xb" + "c" * 12]
    for n, lazy_first in ((12, False), (13, True)):
        optional = f"x(?:[ab]+)?c{{{n}}}"
        lazy, greedy = f"x[ab]+?c{{{n}}}", f"x[ab]+c{{{n}}}"
        order = [(lazy, greedy), (optional, optional)]
        for pattern, oracle_pattern in order if lazy_first else order[::-1]:
            walk_against_oracle(tokens, pattern, oracle_pattern, texts)
