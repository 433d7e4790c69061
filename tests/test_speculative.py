"""Grammar-aware drafts (truncate at the first refused draft, extend with
forced tokens) and drafts from a model with another tokenizer (one grammar
for several vocabularies, raw-text consumption, token translation), on the
real Llama-3 and Qwen3 vocabularies."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import maskpar
from conftest import allowed_ids, new_bitmask

PERSON = r'\{"name": "[a-zA-Z ]{1,12}", "age": [0-9]{1,3}, "tags": \[("[a-z]{1,6}"(, )?){0,3}\]\}'
ARITH = 'root ::= expr\nexpr ::= term ("+" term)*\nterm ::= [0-9]+ | "(" expr ")"'


def mask_of(m: maskpar.Matcher) -> list[int]:
    bm = new_bitmask(1, m.vocab_size)
    m.fill_next_token_bitmask(bm)
    return allowed_ids(bm)


# ---- grammar-aware drafts ----------------------------------------------------

SMALL = [b"{", b'"', b'{"', b"na", b"name", b'":', b" ", b"1", b"12", b"}", b"x", b"<eos>"]
SMALL_EOS = 11


@pytest.fixture(scope="module")
def small_grammar():
    tok = maskpar.Tokenizer.from_vocab(SMALL, [SMALL_EOS])
    return maskpar.compile_grammar(tok, 'root ::= "{\\"name\\":" " "? [0-9]+ "}"')


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    history=st.lists(st.integers(0, len(SMALL) - 1), max_size=6),
    drafts=st.lists(st.integers(0, len(SMALL) - 1), max_size=8),
    max_drafts=st.integers(0, 8),
)
def test_grammar_aware_drafts_truncate_then_extend(small_grammar, history, drafts, max_drafts):
    m = maskpar.Matcher(small_grammar)
    m.consume_tokens(history[: m.validate_tokens(history)])
    before = (m.num_consumed, mask_of(m))
    (out,) = maskpar.grammar_aware_drafts([(m, drafts)], max_drafts)
    assert (m.num_consumed, mask_of(m)) == before  # unchanged
    assert len(out) <= max_drafts
    assert m.validate_tokens(out) == len(out)  # accepted as a whole
    keep = min(m.validate_tokens(drafts), max_drafts)
    assert out[:keep] == drafts[:keep]
    if len(out) > keep:  # the rest is what the grammar forces after the kept drafts
        f = m.fork()
        assert f.consume_tokens(drafts[:keep])
        assert out[keep:] == f.forced_tokens()[: max_drafts - keep]
    elif keep < max_drafts:
        f = m.fork()
        f.consume_tokens(drafts[:keep])
        assert f.forced_tokens() == []


def test_grammar_aware_drafts_on_llama3(llama3):
    enc, tok = llama3
    g = maskpar.compile_regex(tok, PERSON)
    m1, m2, m3 = maskpar.Matcher(g), maskpar.Matcher(g), maskpar.Matcher(g)
    good = enc.encode('{"name": "Ada Lovelace", "age')
    bad = enc.encode('{"name": "Ada", "AGE": 3}')
    assert m3.consume_tokens(enc.encode('{"name": "Ada", "age": 36, "tags": []'))
    out = maskpar.grammar_aware_drafts([(m1, good), (m2, bad), (m3, [])], max_drafts=32)
    # A valid draft is kept and extended with the forced '": '.
    assert out[0][: len(good)] == good
    assert tok.decode_bytes(out[0]) == b'{"name": "Ada Lovelace", "age": '
    # The refused draft is cut where '"AGE' fails; '"age": ' is forced after ', '.
    kept = m2.validate_tokens(bad)
    assert out[1][:kept] == bad[:kept] and kept < len(bad)
    assert tok.decode_bytes(out[1]).startswith(b'{"name": "Ada", "age": ')
    # After the closing bracket only "}" can follow; then the text must end,
    # but Llama-3 has two EOS ids, so no EOS token is forced.
    assert tok.decode_bytes(out[2]) == b"}"
    assert maskpar.grammar_aware_drafts([(m1, good)], max_drafts=3) == [good[:3]]
    with pytest.raises(ValueError, match="max_drafts"):
        maskpar.grammar_aware_drafts([(m1, good)], max_drafts=-1)
    with pytest.raises(ValueError, match="item 0: draft token id"):
        maskpar.grammar_aware_drafts([(m1, [tok.vocab_size])], max_drafts=2)
    with pytest.raises(TypeError, match=r"\(matcher, drafts\)"):
        maskpar.grammar_aware_drafts([(m1, 0, good)], max_drafts=2)


# ---- drafts from another vocabulary -------------------------------------------


@pytest.fixture(scope="module")
def person(llama3, qwen3):
    g_llama = maskpar.compile_regex(llama3[1], PERSON)
    return g_llama, g_llama.for_tokenizer(qwen3[1])


def test_for_tokenizer_masks_equal_a_fresh_compile(llama3, qwen3):
    (_, l_tok), (_, q_tok) = llama3, qwen3
    text = '{"name": "Grace", "age": 85, "tags": ["navy", "cobol"]}'
    for compile_ in (
        lambda tok: maskpar.compile_regex(tok, PERSON),
        lambda tok: maskpar.compile_grammar(tok, ARITH),
    ):
        g = compile_(l_tok)
        shared, fresh = g.for_tokenizer(q_tok), compile_(q_tok)
        assert shared.vocab_size == q_tok.vocab_size and shared.source == g.source
        a, b = maskpar.Matcher(shared), maskpar.Matcher(fresh)
        sample = text if g.kind == "regex" else "(1+23)+(4+(5))"
        for i in range(0, len(sample), 3):
            assert mask_of(a) == mask_of(b), (sample, i)
            assert a.consume_bytes(sample[i : i + 3]) and b.consume_bytes(sample[i : i + 3])
        assert a.is_accepting() and b.is_accepting()


def follow_mask(m: maskpar.Matcher, rng: random.Random, max_tokens: int) -> list[int]:
    """A random walk that samples only tokens the mask allows (EOS included)."""
    out: list[int] = []
    while len(out) < max_tokens and not m.is_terminated():
        t = rng.choice(mask_of(m))
        assert m.consume_token(t)
        out.append(t)
    return out


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("direction", ["qwen->llama", "llama->qwen"])
def test_text_from_one_vocabulary_is_accepted_by_the_other(llama3, qwen3, person, seed, direction):
    (l_enc, l_tok), (q_enc, q_tok) = llama3, qwen3
    g_llama, g_qwen = person
    if direction == "qwen->llama":
        src, dst, dst_enc = (q_tok, g_qwen), (l_tok, g_llama), l_enc
    else:
        src, dst, dst_enc = (l_tok, g_llama), (q_tok, g_qwen), q_enc
    walk = follow_mask(maskpar.Matcher(src[1]), random.Random(seed), 200)
    assert walk[-1] in src[0].eos_token_ids  # the bounded grammar always ends
    for encode in (None, dst_enc.encode):
        ids = maskpar.translate_tokens(walk, src[0], dst[0], encode=encode)
        assert dst[0].decode_bytes(ids[:-1]) == src[0].decode_bytes(walk[:-1])
        m = maskpar.Matcher(dst[1])
        assert m.consume_tokens(ids) and m.is_terminated()
    # Canonical: the target's own encoder gives the same ids.
    text = src[0].decode_bytes(walk[:-1]).decode("utf-8")
    assert maskpar.translate_tokens(walk, src[0], dst[0], encode=dst_enc.encode)[:-1] == (
        dst_enc.encode(text)
    )


def test_a_draft_matcher_follows_the_target_state(llama3, qwen3, person):
    (l_enc, _), (q_enc, q_tok) = llama3, qwen3
    g_llama, g_qwen = person
    target = maskpar.Matcher(g_llama)
    assert target.consume_tokens(l_enc.encode('{"name": "Linus", "a'))
    draft = target.fork(grammar=g_qwen)  # same state, Qwen ids
    by_text = maskpar.Matcher(g_qwen)
    assert by_text.consume_bytes(b'{"name": "Linus", "a')
    assert mask_of(draft) == mask_of(by_text)
    # The draft model continues in its vocabulary; the target follows the text.
    cont = q_enc.encode('ge": 55, "tags": ["kernel"]}')
    assert draft.consume_tokens(cont) and draft.is_accepting()
    assert target.consume_bytes(q_tok.decode_bytes(cont)) and target.is_accepting()
    target.rollback(1)  # one consume_bytes call is one step
    prefix = l_enc.encode('{"name": "Linus", "a')
    assert target.num_consumed == len(prefix)
    again = maskpar.Matcher(g_llama)
    assert again.consume_tokens(prefix)
    assert mask_of(target) == mask_of(again)


def test_cross_vocabulary_errors(llama3, qwen3, person):
    (_, l_tok), (_, q_tok) = llama3, qwen3
    g_llama, g_qwen = person
    m = maskpar.Matcher(g_llama)
    other = maskpar.compile_regex(q_tok, PERSON)  # same text, compiled apart
    with pytest.raises(ValueError, match="for_tokenizer"):
        m.fork(grammar=other)
    with pytest.raises(TypeError, match="bytes, bytearray or str"):
        m.consume_bytes(12)
    assert not m.consume_bytes(b'{"nome"') and m.num_consumed == 0
    assert m.consume_bytes(bytearray(b'{"na')) and m.num_consumed == 1
    special = [t for t in l_tok.special_token_ids if t not in l_tok.eos_token_ids][0]
    with pytest.raises(ValueError, match="special token"):
        maskpar.translate_tokens([special], l_tok, q_tok)
    with pytest.raises(ValueError, match="no token of this vocabulary"):
        maskpar.Tokenizer.from_vocab([b"a", b"<eos>"], [1]).encode_greedy(b"ab")
    assert np.array_equal(q_tok.encode_greedy(b""), [])
