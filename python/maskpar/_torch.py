"""Torch helpers: allocate bitmasks and apply them to logits (CPU or CUDA).

torch is imported on first use so that ``import maskpar`` works without it.
"""

from __future__ import annotations

import functools
import sys
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING

from . import _core, _triton_apply

if TYPE_CHECKING:
    import numpy as np
    import torch


def bitmask_width(vocab_size: int) -> int:
    """Words per bitmask row: ``ceil(vocab_size / 32)``."""
    if vocab_size < 0:
        raise ValueError(f"vocab_size must be >= 0, got {vocab_size}")
    return (vocab_size + 31) // 32


@functools.cache
def _cuda_available() -> bool:
    """``torch.cuda.is_available()``, asked once per process: without a GPU
    it tries to load NVML on every call (about 0.5 ms, which landed in a
    serving framework's first step)."""
    import torch

    return bool(torch.cuda.is_available())


def allocate_token_bitmask(rows: int, vocab_size: int) -> torch.Tensor:
    """An int32 ``[rows, ceil(vocab_size / 32)]`` CPU tensor filled with -1
    (everything allowed), pinned when CUDA is available so it can be copied to
    the GPU asynchronously.

    Without CUDA, the memory of a bitmask of 4 to 256 MiB is recycled: once
    no tensor or array refers to it any more, the next allocation of about
    its size reuses it (up to 256 MiB of idle buffers in all,
    ``MASKPAR_BITMASK_POOL_BYTES`` when maskpar is imported; see
    docs/limits.md), sparing the page faults of fresh memory (SGLang
    allocates a bitmask for every speculative step: 128 requests' trees of
    64 nodes are 132 MB at a 129k vocabulary). Smaller buffers the C
    allocator recycles itself, and pinned ones torch's host allocator.
    Without CUDA no bitmask is filled by torch: torch fills a tensor of more
    than 32k elements on its OpenMP threads, which then spin for a while on
    the cores the mask fill that follows needs."""
    return _allocate(rows, vocab_size, recycle=True)


def _allocate(rows: int, vocab_size: int, *, recycle: bool, filled: bool = True) -> torch.Tensor:
    """``allocate_token_bitmask``; with ``recycle=False``, for a bitmask a
    framework keeps for good (vLLM's manager allocates one, once), a large
    one comes from the C heap as torch's own allocations do: a buffer never
    dropped has nothing to gain from the pool, and a fresh one from the heap
    can reuse memory freed there before. With ``filled=False`` the contents
    are whatever the memory held: for a caller that writes every row itself
    (SGLang's tree step), which a -1 fill would only double."""
    return _allocate_with_view(rows, vocab_size, recycle=recycle, filled=filled)[0]


def _allocate_with_view(
    rows: int, vocab_size: int, *, recycle: bool, filled: bool = True
) -> tuple[torch.Tensor, np.ndarray]:
    """``_allocate``'s tensor and a numpy array over the same memory, for a
    caller that fills it itself: maskpar checks a numpy array through
    numpy's C API, a tensor through six attribute reads, and each call into
    torch is a few microseconds more when its code has gone cold between
    steps (``Tensor.numpy()`` 15-20 us then, as much as the allocation)."""
    import numpy as np
    import torch

    if rows < 0:
        raise ValueError(f"rows must be >= 0, got {rows}")
    shape = (rows, bitmask_width(vocab_size))
    if _cuda_available():
        try:
            bitmask = torch.empty(shape, dtype=torch.int32, pin_memory=True)
        except RuntimeError:
            # Pinning can fail (e.g. locked-memory limits); an unpinned buffer still works.
            bitmask = torch.empty(shape, dtype=torch.int32)
        if filled:
            bitmask.fill_(-1)
        return bitmask, bitmask.numpy()
    words = rows * shape[1]
    if words < _core._MIN_POOLED_BITMASK_WORDS:
        # Under 4 MiB: numpy's allocation (the C heap; numpy advises huge
        # pages only from 4 MiB on), which torch then views: one call into
        # torch rather than two (torch.empty, then .numpy()).
        view = np.empty(shape, dtype=np.int32)
        bitmask = torch.from_numpy(view)
    elif recycle and words <= _core._MAX_POOLED_BITMASK_WORDS:
        view = _core._pooled_bitmask(*shape, filled)
        return torch.from_numpy(view), view
    else:
        # Not numpy's allocation: numpy advises transparent huge pages for
        # arrays of 4 MiB or more, and where the kernel compacts memory to
        # find them, a fresh one took ten times as long.
        bitmask = torch.empty(shape, dtype=torch.int32)
        view = bitmask.numpy()
    if filled:
        # Not torch.full or fill_: past 32k elements torch fills on its
        # OpenMP threads, which then spin on the cores the next fill needs
        # (vLLM's first step after its bitmask was made: 0.1-0.2 ms more,
        # measured).
        view.fill(-1)
    return bitmask, view


def apply_token_bitmask_inplace(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    indices: Sequence[int] | torch.Tensor | None = None,
) -> None:
    """Sets ``logits[r, t] = -inf`` wherever bit ``t`` of ``bitmask[r]`` is 0.

    ``logits`` is ``[rows, vocab]`` (or ``[vocab]``) on any device; ``bitmask``
    is the int32 bitmask (moved to the logits' device if needed). With
    ``indices``, only those rows are masked, each with its own bitmask row
    (``bitmask[i]`` applies to ``logits[i]``). Logit columns beyond the bitmask's
    ``32 * words`` are set to -inf.
    """
    # Plain CPU tensors without indices: checked and masked in one native
    # call (each tensor read in one C call) instead of the checks below.
    if indices is None and _core._apply_token_bitmask_cpu_tensors(logits, bitmask):
        return
    import torch

    if not isinstance(logits, torch.Tensor) or not isinstance(bitmask, torch.Tensor):
        raise TypeError("logits and bitmask must be torch tensors")
    if not logits.is_floating_point():
        raise TypeError(f"logits must be a floating-point tensor, got {logits.dtype}")
    if bitmask.dtype != torch.int32:
        raise TypeError(f"bitmask dtype must be torch.int32, got {bitmask.dtype}")
    if logits.dim() == 1:
        logits = logits.unsqueeze(0)
    if bitmask.dim() == 1:
        bitmask = bitmask.unsqueeze(0)
    if logits.dim() != 2 or bitmask.dim() != 2:
        raise ValueError(
            f"expected 2-D logits and bitmask, got shapes {tuple(logits.shape)} and "
            f"{tuple(bitmask.shape)}"
        )
    rows, vocab = logits.shape
    if indices is None:
        if bitmask.shape[0] != rows:
            raise ValueError(
                f"bitmask has {bitmask.shape[0]} rows but logits have {rows}; pass indices "
                "to mask a subset"
            )
        idx = None
    else:
        idx = torch.as_tensor(indices, dtype=torch.long).flatten()
        if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= min(rows, bitmask.shape[0])):
            raise ValueError(
                f"indices must be in [0, {min(rows, bitmask.shape[0])}), got {idx.tolist()}"
            )
        if idx.numel() == 0:
            return
    if _apply_cpu(logits, bitmask, idx):
        return
    device = logits.device
    bm = bitmask if idx is None else bitmask.index_select(0, idx.to(bitmask.device))
    bm = bm.to(device, non_blocking=True).contiguous()
    if _apply_triton(logits, bm, None if idx is None else idx.to(device)):
        return
    allowed = _unpack_bits(bm, min(vocab, 32 * bm.shape[1]))
    if idx is None:
        _mask_rows(logits, allowed)
    else:
        idx = idx.to(device)
        sub = logits.index_select(0, idx)
        _mask_rows(sub, allowed)
        logits.index_copy_(0, idx, sub)


_triton_failed: str | None = None


def _apply_triton(logits: torch.Tensor, bitmask: torch.Tensor, rows: torch.Tensor | None) -> bool:
    """Masks CUDA logits with the one-launch Triton kernel when it can;
    returns False to fall back to the torch path. A kernel that fails to
    build (a broken Triton install, an unsupported GPU) warns once and is not
    tried again: masking must keep working."""
    global _triton_failed
    if _triton_failed is not None or not _triton_apply.usable(logits):
        return False
    try:
        _triton_apply.apply(logits, bitmask, rows)
    except Exception as e:  # noqa: BLE001 - any build or launch failure falls back
        _triton_failed = f"{type(e).__name__}: {e}"
        warnings.warn(
            f"maskpar: the Triton bitmask kernel failed ({_triton_failed}); "
            "masking CUDA logits with torch operations from now on",
            RuntimeWarning,
            stacklevel=3,
        )
        return False
    return True


def _unpack_bits(bitmask: torch.Tensor, width: int) -> torch.Tensor:
    """Bool ``[rows, width]``: bit ``t`` of each row, least significant first."""
    import torch

    if sys.byteorder != "little":
        shifts32 = torch.arange(32, dtype=torch.int32, device=bitmask.device)
        bits32 = (bitmask.unsqueeze(-1) >> shifts32) & 1
        return bits32.view(bitmask.shape[0], -1)[:, :width].bool()
    # Little-endian byte view: bit t is bit t % 8 of byte t // 8, one byte per
    # 8 tokens, so the temporary is rows x vocab bytes rather than int32s.
    as_bytes = bitmask.view(torch.uint8)
    shifts = torch.arange(8, dtype=torch.uint8, device=bitmask.device)
    bits = (as_bytes.unsqueeze(-1) >> shifts) & 1
    return bits.view(bitmask.shape[0], -1)[:, :width].bool()


def _mask_rows(logits: torch.Tensor, allowed: torch.Tensor) -> None:
    width = allowed.shape[1]
    logits[:, :width].masked_fill_(~allowed, float("-inf"))
    if logits.shape[1] > width:
        logits[:, width:] = float("-inf")


# -inf as raw bits, with the integer dtype of the same width, per float dtype.
_NEG_INF_BITS = {
    "torch.float32": ("int32", -0x800000),
    "torch.float16": ("int16", -0x400),
    "torch.bfloat16": ("int16", -0x80),
}


def _apply_cpu(logits: torch.Tensor, bitmask: torch.Tensor, idx) -> bool:
    """Masks CPU logits in Rust (parallel, no temporaries) when the layout
    allows; returns False to fall back to the torch path."""
    import torch

    spec = _NEG_INF_BITS.get(str(logits.dtype))
    if (
        spec is None
        or logits.device.type != "cpu"
        or bitmask.device.type != "cpu"
        or not logits.is_contiguous()
        or logits.requires_grad
    ):
        return False
    int_dtype, bits = spec
    view = logits.view(getattr(torch, int_dtype)).numpy()  # shares the tensor's memory
    rows = None if idx is None else idx.tolist()
    _core._apply_token_bitmask_cpu(view, bitmask.contiguous().numpy(), rows, bits)
    return True
