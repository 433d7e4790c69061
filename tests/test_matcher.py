"""Matcher behaviour a caller relies on: consume/validate/rollback/fork laws,
EOS and termination, forced tokens, and masks on the real Llama-3 vocabulary
checked against a brute-force oracle."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import maskpar
from conftest import LLAMA3_EOS, allowed_ids, llama3_vocab, new_bitmask
from oracle import RegexOracle

TOKENS = [b"a", b"b", b"ab", b"ba", b"c", b"<eos>", b"<sep>"]
EOS, SEP = 5, 6


@pytest.fixture(scope="module")
def small():
    tok = maskpar.Tokenizer.from_vocab(TOKENS, [EOS], [SEP], vocab_size=40)
    return tok, maskpar.compile_regex(tok, "(ab|ba)+c?")


def mask(m: maskpar.Matcher, vocab_size: int = 40):
    bm = new_bitmask(1, vocab_size, fill=-1)
    m.fill_next_token_bitmask(bm)
    return allowed_ids(bm)


def test_consume_refuses_and_keeps_state(small):
    _, g = small
    m = maskpar.Matcher(g)
    assert not m.consume_token(4)
    assert m.num_consumed == 0
    assert m.consume_token(2)
    assert not m.consume_token(SEP)  # special tokens are never allowed
    assert not m.consume_token(39)  # padding is never allowed
    assert m.num_consumed == 1


def test_eos_termination_and_rollback(small):
    _, g = small
    m = maskpar.Matcher(g)
    assert not m.consume_token(EOS)  # "" is not in the language
    assert m.consume_tokens([2, 3])
    assert m.is_accepting() and EOS in mask(m)
    assert m.consume_token(EOS)
    assert m.is_terminated() and m.is_accepting()
    assert mask(m) == [EOS]  # a terminated matcher allows EOS only
    assert not m.consume_token(0)
    m.rollback(1)
    assert not m.is_terminated()
    assert set(mask(m)) == {0, 1, 2, 3, 4, EOS}


def test_consume_tokens_is_all_or_nothing(small):
    _, g = small
    m = maskpar.Matcher(g)
    assert not m.consume_tokens([2, 3, 4, 0])
    assert m.num_consumed == 0
    assert m.validate_tokens([2, 3, 4, 0]) == 3
    assert m.num_consumed == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 39), max_size=12), st.integers(0, 12))
def test_validate_rollback_fork_laws(small, tokens, back):
    _, g = small
    m = maskpar.Matcher(g)
    n = m.validate_tokens(tokens)
    assert m.num_consumed == 0
    assert m.consume_tokens(tokens[:n])
    assert m.num_consumed == n
    if n < len(tokens):
        assert not m.consume_token(tokens[n])
    f = m.fork()
    before = mask(m)
    back = min(back, n)
    m.rollback(back)
    assert m.num_consumed == n - back
    assert mask(f) == before  # the fork is independent
    fresh = maskpar.Matcher(g)
    fresh.consume_tokens(tokens[: n - back])
    assert mask(m) == mask(fresh)  # rollback == replaying the shorter prefix
    m.reset()
    assert m.num_consumed == 0 and mask(m) == mask(maskpar.Matcher(g))


def test_rollback_past_history_raises(small):
    _, g = small
    m = maskpar.Matcher(g)
    m.consume_token(2)
    with pytest.raises(ValueError, match="only 1 have been consumed"):
        m.rollback(2)
    with pytest.raises(ValueError):
        m.rollback(-1)
    assert m.num_consumed == 1


def test_shared_grammar_many_matchers(small):
    _, g = small
    ms = [maskpar.Matcher(g) for _ in range(100)]
    for i, m in enumerate(ms):
        m.consume_tokens([2] * (i % 3))
    assert all(mask(m) == mask(ms[i % 3]) for i, m in enumerate(ms))


LLAMA_CASES = [
    (r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z", "2026-11-22T01:44:00Z"),
    (
        r"\{\"name\": \"[A-Za-zäöüß ]{1,20}\", \"age\": [0-9]{1,3}\}",
        '{"name": "Jürgen Groß", "age": 42}',
    ),
    (r"(?:中文|日本語|😀)+ ok", "中文😀日本語 ok"),
    (r"[a-z]+@[a-z]+\.(com|org)", "ada@lovelace.org"),
]


@pytest.mark.parametrize("pattern,text", LLAMA_CASES)
def test_llama3_masks_match_oracle_along_real_text(llama3, pattern, text):
    enc, tok = llama3
    _, tokens, special = llama3_vocab()
    assert re.fullmatch(pattern, text)
    cuts = [ord(c) for c in pattern + "09AZaz"]
    oracle = RegexOracle(pattern, cuts)
    g = maskpar.compile_regex(tok, pattern)
    m = maskpar.Matcher(g)
    ids = enc.encode(text)
    never = set(special)
    prefix = b""
    checkpoints = {0, len(ids) // 2, len(ids)}
    for i, t in enumerate(ids + [LLAMA3_EOS[1]]):
        if i in checkpoints:
            got = mask(m, tok.vocab_size)
            want = oracle.allowed(prefix, tokens, LLAMA3_EOS, never, tok.vocab_size)
            assert got == want, (pattern, prefix)
        assert m.consume_token(t), (pattern, prefix, t)
        if i < len(ids):
            prefix += tokens[t]
    assert m.is_terminated()


def test_llama3_partial_utf8_tokens(llama3):
    """Byte-level tokens that end inside a character are allowed exactly when
    the character can still be completed within the language."""
    enc, tok = llama3
    g = maskpar.compile_regex(tok, "中+")
    allowed = set(mask(maskpar.Matcher(g), tok.vocab_size))
    for i in range(enc.n_vocab):
        b = tok.token_bytes(i)
        # 中 is E4 B8 AD; any prefix of a repetition of it is live.
        want = bool(b) and not enc.is_special_token(i) and ("中" * 8).encode().startswith(b)
        assert (i in allowed) == want, (i, b)
    assert any(len(tok.token_bytes(i)) < 3 for i in allowed)  # partial tokens exist


def test_forced_tokens_on_real_vocab(llama3):
    enc, tok = llama3
    g = maskpar.compile_regex(tok, r'\{"name": "[a-z]+"\}')
    m = maskpar.Matcher(g)
    forced = m.forced_tokens()
    assert forced and tok.decode_bytes(forced) == b'{"name": "'[: len(tok.decode_bytes(forced))]
    assert m.consume_tokens(forced)
    assert m.forced_tokens() == [] or tok.decode_bytes(m.forced_tokens()).startswith(b'"')
