"""Torch helpers: allocation and applying bitmasks to logits, on CPU and (when
present) CUDA, checked against a per-element reference."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import maskpar
from maskpar._torch import _allocate, _allocate_with_view

torch = pytest.importorskip("torch")
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
HAS_EXCHANGE_API = hasattr(torch.Tensor, "__dlpack_c_exchange_api__")


def _attribute_read(*_args):
    """Stands in for a tensor attribute a one-C-call path must not read."""
    raise AssertionError("a Python attribute was read")


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
    # A bitmask a framework keeps for good (vLLM's manager's): from torch's heap.
    kept = _allocate(2 * POOLED_ROWS, 129_536, recycle=False)
    assert kept.shape == (2 * POOLED_ROWS, 4048) and (kept == -1).all()
    assert kept.is_pinned() == torch.cuda.is_available()


@pytest.mark.parametrize("recycle", [True, False])
@pytest.mark.parametrize("size", ["small", "pooled"])
@pytest.mark.parametrize("filled", [True, False])
def test_allocate_with_view_is_one_memory(recycle, size, filled):
    rows = 8 if size == "small" else POOLED_ROWS
    bm, view = _allocate_with_view(rows, 129_536, recycle=recycle, filled=filled)
    assert bm.shape == view.shape == (rows, 4048)
    assert bm.dtype == torch.int32 and str(view.dtype) == "int32"
    assert bm.is_contiguous() and view.flags.c_contiguous and view.flags.writeable
    assert view.ctypes.data == bm.data_ptr()
    assert bm.is_pinned() == torch.cuda.is_available()
    if filled:
        assert (bm == -1).all()
    # Written through either, read through the other.
    view[rows - 1, 4047] = 7
    bm[0, 0] = 9
    assert int(bm[rows - 1, 4047]) == 7 and int(view[0, 0]) == 9
    # The view alone keeps the memory: the tensor dropped, it is still the
    # buffer (a pooled one is not handed out again while the view is held).
    address = bm.data_ptr()
    del bm
    other = _allocate(rows, 129_536, recycle=recycle)
    assert other.data_ptr() != address
    other.fill_(0)
    assert int(view[rows - 1, 4047]) == 7 and int(view[0, 0]) == 9


# Rows of a 129k-vocabulary bitmask (4,048 words) from which, without CUDA,
# allocate_token_bitmask recycles the buffer (4 MiB).
POOLED_ROWS = -(-maskpar._core._MIN_POOLED_BITMASK_WORDS // 4048)
needs_pool = pytest.mark.skipif(
    torch.cuda.is_available(), reason="with CUDA bitmasks are pinned by torch's allocator"
)


@needs_pool
def test_a_large_bitmask_is_recycled_once_nothing_refers_to_it():
    # The pool is the process's: a size no other test leaves idle (about
    # 67 MB), so that the buffer handed back is the one taken next.
    rows = 16 * POOLED_ROWS + 3
    bm = maskpar.allocate_token_bitmask(rows, 129_536)
    assert bm.shape == (rows, 4048) and bm.dtype == torch.int32
    assert bm.is_contiguous() and (bm == -1).all()
    address = bm.data_ptr()
    bm.fill_(5)
    del bm
    again = maskpar.allocate_token_bitmask(rows, 129_536)
    assert again.data_ptr() == address  # the same memory, written -1 again
    assert (again == -1).all()
    # A smaller request (over half the size) takes it too; its rows are -1 again.
    again.fill_(5)
    del again
    smaller = maskpar.allocate_token_bitmask(rows * 3 // 4, 129_536)
    assert smaller.data_ptr() == address and (smaller == -1).all()


@needs_pool
@pytest.mark.parametrize("keep", ["view", "numpy", "tensor"])
def test_a_bitmask_still_referred_to_is_never_handed_out(keep):
    bm = maskpar.allocate_token_bitmask(POOLED_ROWS, 129_536)
    bm[7, 3] = 12345
    if keep == "view":
        held = bm[5:9]
    elif keep == "numpy":
        held = bm.numpy()
    else:
        held = bm.view(bm.shape)  # another tensor object over the same storage
    address = bm.data_ptr()
    del bm
    others = [maskpar.allocate_token_bitmask(POOLED_ROWS, 129_536) for _ in range(2)]
    assert all(o.data_ptr() != address for o in others)
    for o in others:
        o.fill_(0)
    assert int(held[7 - 5 if keep == "view" else 7, 3]) == 12345
    del held, others


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


@pytest.mark.skipif(not HAS_EXCHANGE_API, reason="torch without DLPack's C exchange API")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("vocab", [70, 96, 130])
def test_apply_on_plain_cpu_tensors_is_one_native_call(monkeypatch, dtype, vocab):
    """Plain CPU logits and bitmask without indices are masked by one native
    call that reads both tensors through DLPack: it works with the tensors'
    Python attributes made to raise (all but ``requires_grad``, which it
    reads), 2-D and 1-D, and agrees with the per-element reference."""
    gen = torch.Generator().manual_seed(vocab + 1)
    bitmask = torch.randint(-(2**31), 2**31 - 1, (4, 3), dtype=torch.int32, generator=gen)
    logits = torch.randn(4, vocab, generator=gen).to(dtype)
    want = reference_apply(logits.float(), bitmask).to(dtype)
    want_row = reference_apply(logits[2:3].float(), bitmask[2:3]).to(dtype)
    got, row = logits.clone(), logits[2].clone()

    for name in ("is_cpu", "dtype", "layout", "shape", "device"):
        monkeypatch.setattr(torch.Tensor, name, property(_attribute_read))
    for name in ("is_contiguous", "data_ptr", "dim", "is_floating_point", "numpy", "view"):
        monkeypatch.setattr(torch.Tensor, name, _attribute_read)
    maskpar.apply_token_bitmask_inplace(got, bitmask)
    maskpar.apply_token_bitmask_inplace(row, bitmask[2])
    monkeypatch.undo()
    assert torch.equal(got, want)
    assert torch.equal(row, want_row[0])


def test_apply_leaves_other_tensors_to_the_torch_checks():
    """What the native call does not take (anything but plain, contiguous,
    non-overlapping CPU tensors of as many rows, logits not requiring grad)
    it leaves untouched and says so; the wrapper's own path then masks or
    raises as it always did."""
    from maskpar import _core

    bitmask = torch.tensor([[0b1010, 0], [0b0101, 0]], dtype=torch.int32)
    wide = torch.zeros(2, 70)

    class Sub(torch.Tensor):
        pass

    cases = [
        ("columns", wide[:, :40], bitmask),
        ("requires grad", torch.zeros(2, 40, requires_grad=True), bitmask),
        ("row count", torch.zeros(3, 40), bitmask),
        ("bitmask strided", torch.zeros(2, 40), torch.zeros(2, 4, dtype=torch.int32)[:, ::2]),
        ("subclass", torch.zeros(2, 40).as_subclass(Sub), bitmask),
        ("float64", torch.zeros(2, 40, dtype=torch.float64), bitmask),
        ("int logits", torch.zeros(2, 40, dtype=torch.int32), bitmask),
        ("empty", torch.zeros(0, 40), torch.zeros(0, 2, dtype=torch.int32)),
        ("negated logits", torch._neg_view(torch.zeros(2, 40)), bitmask),
        ("negated bitmask", torch.zeros(2, 40), torch._neg_view(bitmask)),
        # Masked in parallel with the GIL released: the wrapper's views hold
        # the memory then (see the next test).
        ("large", torch.zeros(8, 1 << 17), torch.zeros(8, 1 << 12, dtype=torch.int32)),
    ]
    for name, logits, bm in cases:
        before = logits.detach().clone()
        assert _core._apply_token_bitmask_cpu_tensors(logits, bm) is False, name
        assert torch.equal(logits.detach(), before), name
    shared = torch.zeros(1, 64)  # a (contiguous) bitmask over the logits' own memory
    assert _core._apply_token_bitmask_cpu_tensors(shared, shared.view(torch.int32)[:, :2]) is False
    assert _core._apply_token_bitmask_cpu_tensors([0.0], bitmask) is False
    # The wrapper masks the column slice through its torch path.
    maskpar.apply_token_bitmask_inplace(wide[:, :40], bitmask)
    assert torch.isfinite(wide[0, :40]).nonzero().flatten().tolist() == [1, 3]
    assert torch.isfinite(wide[:, 40:]).all()


UNDER_SET = r"""
import sys, threading, time, torch, maskpar
rows, vocab = int(sys.argv[1]), int(sys.argv[2])
for _ in range(10):
    logits = torch.zeros(rows, vocab)
    bitmask = torch.zeros(rows, (vocab + 31) // 32, dtype=torch.int32)
    go = threading.Event()
    def swap():
        go.wait()
        time.sleep(0.0002)
        logits.set_(torch.empty(0))  # drops the tensor's memory
    t = threading.Thread(target=swap)
    t.start()
    go.set()
    maskpar.apply_token_bitmask_inplace(logits, bitmask)
    t.join()
print("ok")
"""


@pytest.mark.parametrize("rows,vocab", [(4, 4096), (64, 1 << 17)])
def test_apply_survives_another_thread_dropping_the_logits_memory(rows, vocab):
    """Another thread giving the logits other memory (``set_``) while they
    are masked: the fast path holds the GIL (so that thread waits), larger
    masks go through views that keep the memory. It used to crash."""
    out = subprocess.run(
        [sys.executable, "-c", UNDER_SET, str(rows), str(vocab)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


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


@pytest.mark.skipif(not HAS_EXCHANGE_API, reason="torch without DLPack's C exchange API")
def test_a_plain_tensor_is_read_without_its_python_attributes(monkeypatch):
    """With DLPack's exchange API (recent torch), a torch.Tensor's pointer,
    dtype, device, shape and strides come from one C call: the fill works
    with every Python attribute it would otherwise read made to raise. A
    subclass (the exchange API is for the exact type) and every tensor the
    C call does not describe as a host int32 tensor, 1-D or 2-D and
    C-contiguous, still go through the attributes, which word the errors."""
    tok = maskpar.Tokenizer.from_vocab([b"a", b"b", b"<eos>"], [2], vocab_size=40)
    m = maskpar.Matcher(maskpar.compile_regex(tok, "a+"))
    base = torch.full((4, 2), 0x11223344, dtype=torch.int32)
    wide = torch.zeros((2, 5), dtype=torch.int32)
    cube = torch.zeros((1, 1, 2), dtype=torch.int32)
    floats = torch.zeros((1, 2), dtype=torch.float32)

    class Sub(torch.Tensor):
        pass

    sub = torch.zeros((1, 2), dtype=torch.int32).as_subclass(Sub)

    for name in ("is_cpu", "dtype", "layout", "shape"):
        monkeypatch.setattr(torch.Tensor, name, property(_attribute_read))
    for name in ("is_contiguous", "data_ptr"):
        monkeypatch.setattr(torch.Tensor, name, _attribute_read)
    m.fill_next_token_bitmask(base[1:3], 1)  # a view at an offset
    for bad in (wide[:, :2], cube, floats, sub):  # the attribute path: it raises
        with pytest.raises(AssertionError, match="attribute was read"):
            m.fill_next_token_bitmask(bad)
    monkeypatch.undo()
    assert base[2].tolist() == [0b001, 0]
    assert (base[[0, 1, 3]] == 0x11223344).all()
    with pytest.raises(ValueError, match="contiguous"):
        m.fill_next_token_bitmask(wide[:, :2])
    with pytest.raises(ValueError, match="dimensions"):
        m.fill_next_token_bitmask(cube)
    with pytest.raises(TypeError, match="int32"):
        m.fill_next_token_bitmask(floats)
    m.fill_next_token_bitmask(sub)
    assert sub.tolist() == [[0b001, 0]]


TRITON_CHECK = r"""
import torch
from maskpar import _triton_apply

def reference(logits, bitmask, rows):
    out = logits.clone()
    words = bitmask.shape[1]
    for i, r in enumerate(rows):
        for t in range(out.shape[1]):
            if not (t < 32 * words and (int(bitmask[i, t // 32]) >> (t % 32)) & 1):
                out[r, t] = float("-inf")
    return out

gen = torch.Generator().manual_seed(7)
lo, hi = -(2**31), 2**31 - 1
checked = 0
for dtype in (torch.float32, torch.float16, torch.bfloat16):
    # vocab narrower than, equal to and wider than 32 * words, and one past a
    # kernel block (4,096 tokens), so a row spans two programs.
    for vocab, words in ((70, 3), (96, 3), (130, 3), (4100, 129), (4100, 100)):
        for rows in (None, [3, 0]):
            n = 4 if rows is None else len(rows)
            bitmask = torch.randint(lo, hi, (n, words), dtype=torch.int32, generator=gen)
            bitmask[0, 0] = 0  # a word with no bit set
            bitmask[-1, -1] = -1  # and one with every bit set
            # Rows of a wider tensor: the row stride is not the vocabulary.
            base = torch.randn(4, vocab + 5, generator=gen).to(dtype)
            logits = base[:, 2 : 2 + vocab]
            want = reference(logits, bitmask, range(4) if rows is None else rows)
            index = None if rows is None else torch.tensor(rows, dtype=torch.long)
            _triton_apply.apply(logits, bitmask, index)
            assert torch.equal(logits, want), (dtype, vocab, words, rows)
            # Nothing outside the logits' columns was written.
            assert torch.isfinite(base[:, :2]).all() and torch.isfinite(base[:, 2 + vocab :]).all()
            checked += 1
print("checked", checked)
"""


def test_triton_kernel_matches_reference_in_interpreter():
    """The CUDA kernel, run by Triton's interpreter on CPU tensors (the same
    program a GPU runs, so CI checks it without one)."""
    pytest.importorskip("triton")
    env = dict(os.environ, TRITON_INTERPRET="1")
    out = subprocess.run(
        [sys.executable, "-c", TRITON_CHECK], env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "checked 30" in out.stdout


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_apply_uses_the_triton_kernel():
    pytest.importorskip("triton")
    from maskpar import _torch

    gen = torch.Generator().manual_seed(3)
    bitmask = torch.randint(-(2**31), 2**31 - 1, (5, 4008), dtype=torch.int32, generator=gen)
    logits = torch.randn(5, 128256, generator=gen)
    want = reference_apply_fast(logits, bitmask)
    got = logits.cuda()
    maskpar.apply_token_bitmask_inplace(got, bitmask.pin_memory())
    assert _torch._triton_failed is None
    assert torch.equal(got.cpu(), want)
    got = logits.cuda().to(torch.bfloat16)
    maskpar.apply_token_bitmask_inplace(got, bitmask, indices=[4, 1])
    assert torch.equal(
        got.float().cpu(), reference_apply_fast(logits.to(torch.bfloat16).float(), bitmask, [4, 1])
    )
    got = logits.cuda().half()
    maskpar.apply_token_bitmask_inplace(got, bitmask.cuda(), indices=torch.tensor([2]))
    assert torch.equal(got.float().cpu(), reference_apply_fast(logits.half().float(), bitmask, [2]))
    assert _torch._triton_failed is None


def reference_apply_fast(logits, bitmask, indices=None):
    """reference_apply for wide rows: numpy's unpackbits reads the little-endian
    bits of each row (tokens past 32 * words stay forbidden)."""
    import numpy as np

    out = logits.clone()
    vocab = out.shape[1]
    for r in range(out.shape[0]) if indices is None else indices:
        bits = np.unpackbits(bitmask[r].numpy().view(np.uint8), bitorder="little")
        allowed = np.zeros(vocab, dtype=bool)
        allowed[: min(vocab, bits.size)] = bits[:vocab].astype(bool)
        out[r, torch.from_numpy(~allowed)] = float("-inf")
    return out


def test_is_view_of_compares_memory_and_layout():
    """``_core._is_view_of(view, tensor)``: True exactly when the numpy array
    covers the tensor's memory (same address, shape, int32, C-contiguous);
    None where it cannot read the tensor in one C call."""
    from maskpar import _core

    t = torch.zeros((3, 4), dtype=torch.int32)
    if not HAS_EXCHANGE_API:
        assert _core._is_view_of(t.numpy(), t) is None
        return
    assert _core._is_view_of(t.numpy(), t) is True
    assert _core._is_view_of(t[1:].numpy(), t) is False  # another address
    assert _core._is_view_of(t[:2].numpy(), t) is False  # same address, fewer rows
    assert _core._is_view_of(t.numpy().reshape(4, 3), t) is False
    assert _core._is_view_of(t.numpy().view("float32"), t) is False
    assert _core._is_view_of(t.numpy()[:, ::2], t[:, :2]) is False  # strided
    assert _core._is_view_of(torch.zeros_like(t).numpy(), t) is False
    assert _core._is_view_of([0] * 12, t) is False
    assert _core._is_view_of(t.t().contiguous().numpy(), t.t()) is False  # a transpose
    assert _core._is_view_of(t[1:].numpy(), t[1:]) is True

    class Sub(torch.Tensor):
        pass

    assert _core._is_view_of(t.numpy(), t.as_subclass(Sub)) is None
