"""Torch helpers: allocation and applying bitmasks to logits, on CPU and (when
present) CUDA, checked against a per-element reference."""

from __future__ import annotations

import pytest

import maskpar

torch = pytest.importorskip("torch")
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def reference_apply(logits, bitmask, indices=None):
    out = logits.clone()
    rows = range(out.shape[0]) if indices is None else indices
    words = bitmask.shape[1]
    for r in rows:
        for t in range(out.shape[1]):
            ok = t < 32 * words and (int(bitmask[r, t // 32]) >> (t % 32)) & 1
            if not ok:
                out[r, t] = float("-inf")
    return out


def test_allocate_token_bitmask():
    bm = maskpar.allocate_token_bitmask(3, 100)
    assert bm.shape == (3, 4) and bm.dtype == torch.int32 and bm.device.type == "cpu"
    assert (bm == -1).all()
    assert bm.is_pinned() == torch.cuda.is_available()
    with pytest.raises(ValueError):
        maskpar.allocate_token_bitmask(-1, 100)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("vocab", [70, 96, 130])  # narrower, equal, wider than 32*words=96
def test_apply_matches_reference(device, dtype, vocab):
    gen = torch.Generator().manual_seed(vocab)
    bitmask = torch.randint(-(2**31), 2**31 - 1, (4, 3), dtype=torch.int32, generator=gen)
    logits = torch.randn(4, vocab, generator=gen).to(dtype)
    want = reference_apply(logits.float(), bitmask)
    got = logits.to(device)
    maskpar.apply_token_bitmask_inplace(got, bitmask)
    assert torch.equal(got.float().cpu(), want.to(dtype).float())
    got = logits.to(device)
    maskpar.apply_token_bitmask_inplace(got, bitmask, indices=[0, 2])
    assert torch.equal(
        got.float().cpu(), reference_apply(logits.float(), bitmask, [0, 2]).to(dtype).float()
    )


def test_apply_with_real_mask(llama3):
    _, tok = llama3
    g = maskpar.compile_regex(tok, "[0-9]+")
    bm = maskpar.allocate_token_bitmask(1, tok.vocab_size)
    maskpar.Matcher(g).fill_next_token_bitmask(bm)
    logits = torch.zeros(1, tok.vocab_size)
    maskpar.apply_token_bitmask_inplace(logits, bm)
    allowed = torch.isfinite(logits[0]).nonzero().flatten().tolist()
    assert allowed and all(tok.token_bytes(t).isdigit() for t in allowed)


def test_apply_errors():
    bm = torch.zeros(2, 1, dtype=torch.int32)
    with pytest.raises(ValueError, match="rows"):
        maskpar.apply_token_bitmask_inplace(torch.zeros(3, 32), bm)
    with pytest.raises(TypeError):
        maskpar.apply_token_bitmask_inplace(torch.zeros(2, 32), bm.long())
    with pytest.raises(TypeError):
        maskpar.apply_token_bitmask_inplace(torch.zeros(2, 32, dtype=torch.long), bm)
    with pytest.raises(ValueError, match="indices"):
        maskpar.apply_token_bitmask_inplace(torch.zeros(2, 32), bm, indices=[5])


def test_fill_writes_through_torch_views():
    """A torch bitmask is written in place at its own offset (a row slice of a
    larger tensor), never copied, and other rows keep their contents."""
    tok = maskpar.Tokenizer.from_vocab([b"a", b"b", b"<eos>"], [2], vocab_size=40)
    m = maskpar.Matcher(maskpar.compile_regex(tok, "a+"))
    base = torch.full((4, 2), 0x11223344, dtype=torch.int32)
    view = base[1:3]
    m.fill_next_token_bitmask(view, 1)
    assert base[2].tolist() == [0b001, 0]
    assert (base[[0, 1, 3]] == 0x11223344).all()
    flat = torch.full((2,), -1, dtype=torch.int32)
    m.consume_token(0)
    m.fill_next_token_bitmask(flat)
    assert flat.tolist() == [0b101, 0]
    with pytest.raises(ValueError, match="strided"):
        m.fill_next_token_bitmask(torch.zeros(1, 2, dtype=torch.int32).to_sparse())
