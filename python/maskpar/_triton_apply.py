"""Applying a bitmask to CUDA logits with one Triton kernel.

The portable torch path (``_torch._unpack_bits``) expands the bitmask into a
``[rows, vocab]`` boolean tensor and masks with it: half a dozen kernel
launches and temporaries the size of the logits. On a GPU the work is tiny
(one bit read per logit, a write only where a token is forbidden), so launches
and temporaries are the whole cost. This kernel does it in one launch and no
temporaries: each program takes ``BLOCK`` tokens of one row, loads the
``BLOCK / 32`` bitmask words that cover them and the logits, and writes the
logits back with ``-inf`` at the tokens whose bit is 0 and at every token past
the mask's ``32 * words`` columns (the bitmask contract forbids those).

Triton is used when it imports and the logits are a CUDA tensor whose last
dimension is contiguous; everything else takes the torch path. Triton
compiles the kernel on first use per dtype (about a second), then caches it.
Under ``TRITON_INTERPRET=1`` the same kernel runs on CPU tensors, which is how
the tests check it on machines without a GPU.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

# Tokens per program: 32 words of bitmask per 1,024 tokens; 4,096 keeps a
# 128k-vocabulary row to 32 programs and each program's loads coalesced.
BLOCK = 4096


@functools.cache
def kernel() -> Any:
    """The compiled-on-demand kernel, or None when Triton is not installed."""
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def apply_bitmask(
        logits_ptr,
        bitmask_ptr,
        rows_ptr,
        vocab,
        mask_width,
        logits_stride,
        bitmask_stride,
        HAS_ROWS: tl.constexpr,
        BLOCK: tl.constexpr,
    ):
        # Program (i, j): bitmask row i, tokens [j * BLOCK, (j + 1) * BLOCK).
        # The logits row is i, or rows[i] when only some rows are masked.
        i = tl.program_id(0).to(tl.int64)
        if HAS_ROWS:
            row = tl.load(rows_ptr + i).to(tl.int64)
        else:
            row = i
        tokens = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        words = tl.load(
            bitmask_ptr + i * bitmask_stride + tokens // 32, mask=tokens < mask_width, other=0
        )
        # Arithmetic shifts of negative words bring in ones above bit 31 - t % 32;
        # `& 1` keeps only bit t % 32. Past mask_width the word is 0: forbidden.
        allowed = ((words >> (tokens % 32)) & 1) != 0
        # Every logit is read and written back (-inf where forbidden): whole
        # memory sectors are written. Storing only the forbidden logits
        # writes partial sectors and measured 1.3-1.7x slower on an H100
        # (bench/results/gpu-h100-16cpu.txt).
        ptrs = logits_ptr + row * logits_stride + tokens
        in_row = tokens < vocab
        x = tl.load(ptrs, mask=in_row)
        # The select is done in float32 and stored back in the logits' dtype
        # (exact both ways for fp16, bf16 and -inf): a -inf constant of the
        # logits' own dtype is not built by every Triton's interpreter
        # (3.6's has no bf16 constants), which is what CI tests the kernel on.
        masked = tl.where(allowed, x.to(tl.float32), float("-inf"))
        tl.store(ptrs, masked.to(x.dtype), mask=in_row)

    return apply_bitmask


def usable(logits: torch.Tensor) -> bool:
    """Whether the Triton path can mask these logits (2-D, CUDA, rows apart,
    tokens contiguous, a float dtype Triton stores)."""
    import torch

    return (
        logits.device.type == "cuda"
        and logits.dtype in (torch.float32, torch.float16, torch.bfloat16)
        and logits.stride(1) == 1
        and not logits.requires_grad
        and kernel() is not None
    )


def apply(logits: torch.Tensor, bitmask: torch.Tensor, rows: torch.Tensor | None) -> None:
    """Masks ``logits[rows[i]]`` (or ``logits[i]``) with ``bitmask[i]``.

    ``bitmask`` is int32 ``[n, words]`` on the logits' device with contiguous
    rows; ``rows`` is None (then ``n`` is the number of logit rows) or ``n``
    int64 row indices on the logits' device.
    """
    n, words = bitmask.shape
    vocab = logits.shape[1]
    if n == 0 or vocab == 0:
        return
    grid = (n, (vocab + BLOCK - 1) // BLOCK)
    kernel()[grid](
        logits,
        bitmask,
        bitmask if rows is None else rows,
        vocab,
        min(vocab, 32 * words),
        logits.stride(0),
        bitmask.stride(0),
        HAS_ROWS=rows is not None,
        BLOCK=BLOCK,
    )
