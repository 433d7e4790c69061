"""Grammar-masked verification of speculative drafts, in torch (CPU or CUDA).

A request drafts ``n`` tokens ``x_0 .. x_{n-1}``; the target model scores
positions ``0 .. K`` in one pass (position ``i`` is the distribution after the
first ``i`` drafts), and a grammar bitmask row per position says which tokens
may come next. :func:`rejection_sample` keeps the longest prefix of drafts that
modified rejection sampling (Leviathan et al. 2023, Chen et al. 2023) accepts
and emits one more token, so that every emitted token is distributed exactly as
the *masked* target distribution; :func:`greedy_verify` is the argmax version.

Bitmask contract (shared with xgrammar and llguidance): int32 ``[rows, W]``;
token ``t`` is allowed in a row iff bit ``t % 32`` of word ``t // 32`` is set.
Tokens with id ``>= 32 * W`` are forbidden; mask words beyond the logits'
width are ignored. The bitmask may sit on the CPU while the logits are on CUDA.

This module imports torch; ``import maskpar`` does not import it.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Sequence

import torch

from ._torch import apply_token_bitmask_inplace

__all__ = ["greedy_verify", "rejection_sample"]

_TINY = torch.finfo(torch.float32).tiny


def rejection_sample(
    target_logits: torch.Tensor,
    draft_tokens: torch.Tensor,
    num_drafts: torch.Tensor | Sequence[int],
    bitmask: torch.Tensor | None = None,
    draft_probs: torch.Tensor | None = None,
    *,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Verifies a batch of draft chains by masked speculative rejection sampling.

    Args:
        target_logits: float ``[B, K + 1, V]`` (any float dtype; the math is
            done in float32). Position ``i`` of request ``b`` holds the target
            model's logits after the first ``i`` drafts.
        draft_tokens: integer ``[B, K]``. Entries at or beyond
            ``num_drafts[b]`` are ignored (e.g. ``-1`` padding); real drafts
            must be token ids in ``[0, V)``.
        num_drafts: int ``[B]`` tensor (on the logits' device or the CPU) or a
            sequence of ints, each in ``[0, K]``: how many drafts request ``b``
            really has.
        bitmask: ``None`` (no grammar) or int32 ``[B, K + 1, W]`` or
            ``[B * (K + 1), W]``; row ``b * (K + 1) + i`` masks position ``i``
            of request ``b``. It may be on the CPU or on the logits' device.
        draft_probs: ``None`` when the drafts are deterministic guesses (n-gram
            or greedy drafters: ``q_i`` is one-hot on ``x_i``), or float
            ``[B, K, V]``: the distributions the drafts were sampled from.
            They may put mass on masked tokens.
        temperature: ``> 0`` scales the logits before the softmax; ``0`` means
            greedy verification (:func:`greedy_verify`; ``draft_probs`` and
            ``generator`` are then unused).
        generator: a ``torch.Generator`` on the logits' device, for
            reproducible results; ``None`` uses torch's default generator.

    With ``p_i`` the target distribution at position ``i`` restricted to the
    allowed tokens (``softmax(logits_i / temperature)`` over them), draft
    ``x_i`` is accepted with probability ``min(1, p_i(x_i) / q_i(x_i))``, in
    order, for ``i < num_drafts[b]``; a draft with ``p_i(x_i) = 0`` (masked, or
    zero probability) is always rejected. At the first rejection, at position
    ``i``, a token is drawn from ``norm(max(0, p_i - q_i))`` (from ``p_i`` if
    that has no mass) and the chain stops; if every draft is accepted, a bonus
    token is drawn from ``p_{num_drafts[b]}``. Each emitted token is then
    distributed as the masked target distribution, and never a masked token.

    Returns:
        ``(output_tokens, num_accepted)``: int64 ``[B, K + 1]`` holding the
        accepted drafts followed by the one emitted token, padded with ``-1``,
        and int64 ``[B]``; both on the logits' device. Request ``b`` emits
        ``num_accepted[b] + 1`` tokens.

    Raises:
        TypeError: wrong types or dtypes.
        ValueError: inconsistent shapes or devices, ``num_drafts`` or draft
            ids out of range, ``temperature < 0`` (or not finite), negative or
            non-finite ``draft_probs`` for real drafts, or a position in use
            (``i <= num_drafts[b]``) where no allowed token has nonzero
            probability (or the logits are NaN / +inf there).

    Everything is validated before any random number is drawn. Validation reads
    a few flags back from the device (one synchronisation on CUDA).
    """
    temperature = _check_temperature(temperature)
    drafts, n = _check_inputs(target_logits, draft_tokens, num_drafts, bitmask, draft_probs)
    _check_generator(generator, target_logits.device)
    greedy = temperature == 0.0
    scores = _masked_scores(target_logits, bitmask, 1.0 if greedy else temperature)
    _check_values(scores, drafts, n, None if greedy else draft_probs)
    if greedy:
        return _greedy(scores, drafts, n)
    return _rejection(scores, drafts, n, draft_probs, generator)


def greedy_verify(
    target_logits: torch.Tensor,
    draft_tokens: torch.Tensor,
    num_drafts: torch.Tensor | Sequence[int],
    bitmask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Verifies a batch of draft chains greedily under a grammar mask.

    The target token at position ``i`` is the argmax of the masked logits
    (the first one on ties). Drafts are accepted while they equal it; the
    argmax at the first mismatch, or at position ``num_drafts[b]`` when all
    drafts match, is emitted. Arguments, output format and errors are those of
    :func:`rejection_sample`.

    Returns:
        ``(output_tokens, num_accepted)``: int64 ``[B, K + 1]`` (accepted
        drafts, then the emitted token, then ``-1``) and int64 ``[B]``.
    """
    drafts, n = _check_inputs(target_logits, draft_tokens, num_drafts, bitmask, None)
    scores = _masked_scores(target_logits, bitmask, 1.0)
    _check_values(scores, drafts, n, None)
    return _greedy(scores, drafts, n)


# ---------------------------------------------------------------------------
# Math


def _greedy(
    scores: torch.Tensor, drafts: torch.Tensor, n: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy verification on validated masked scores ``[B, K + 1, V]``."""
    k = drafts.shape[1]
    target = scores.argmax(dim=-1)  # [B, K + 1]
    real = _real_drafts(n, k)
    match = real & (drafts == target[:, :k])
    num_accepted = _prefix_length(match)
    emitted = target.gather(1, num_accepted.unsqueeze(1)).squeeze(1)
    return _assemble(drafts, num_accepted, emitted), num_accepted


def _rejection(
    scores: torch.Tensor,
    drafts: torch.Tensor,
    n: torch.Tensor,
    draft_probs: torch.Tensor | None,
    generator: torch.Generator | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rejection sampling on validated, temperature-scaled masked scores."""
    b, k1, _ = scores.shape
    k = k1 - 1
    device = scores.device
    p = torch.softmax(scores, dim=-1)  # masked tokens get exactly 0
    del scores
    real = _real_drafts(n, k)
    x = torch.where(real, drafts, torch.zeros_like(drafts))  # safe gather indices
    p_x = p[:, :k].gather(2, x.unsqueeze(2)).squeeze(2)  # [B, K]
    q = None if draft_probs is None else draft_probs.detach().to(torch.float32)
    if q is None:
        q_x = torch.ones_like(p_x)
    else:
        q_x = q.gather(2, x.unsqueeze(2)).squeeze(2)
    u = torch.rand((b, k), dtype=torch.float32, device=device, generator=generator)
    # u < p/q  <=>  u*q < p (u in [0, 1)): p >= q always accepts, p == 0 never does.
    accept = real & (u * q_x < p_x)
    num_accepted = _prefix_length(accept)

    rows = torch.arange(b, device=device)
    dist = p[rows, num_accepted]  # [B, V]: the emitting position's distribution
    if k > 0:
        at = num_accepted.clamp(max=k - 1)
        if q is None:
            residual = dist.scatter(1, x[rows, at].unsqueeze(1), 0.0)
        else:
            residual = (dist - q[rows, at]).clamp_min_(0.0)
        rejected = num_accepted < n
        use_residual = rejected & (residual.sum(dim=-1) > 0)
        dist = torch.where(use_residual.unsqueeze(1), residual, dist)
    emitted = _sample(dist, generator)
    return _assemble(drafts, num_accepted, emitted), num_accepted


def _sample(weights: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """One index per row of nonnegative ``weights`` ``[B, V]`` (not necessarily
    normalised, each row with positive mass), proportionally to the weights.

    Gumbel-max (``argmax(log w - log E)``, ``E ~ Exp(1)``) in log space: no
    host synchronisation, and a zero weight scores ``-inf``, so it can never
    win against a positive one however small.
    """
    u = torch.rand(weights.shape, dtype=torch.float32, device=weights.device, generator=generator)
    exp1 = u.clamp_min_(_TINY).log_().neg_().clamp_min_(_TINY)  # Exp(1), in (0, 88]
    return (weights.log() - exp1.log_()).argmax(dim=-1)


def _real_drafts(n: torch.Tensor, k: int) -> torch.Tensor:
    """Bool ``[B, K]``: position ``i`` holds a real draft (``i < n[b]``)."""
    return torch.arange(k, device=n.device) < n.unsqueeze(1)


def _prefix_length(ok: torch.Tensor) -> torch.Tensor:
    """Int64 ``[B]``: the number of leading True entries in each row."""
    return ok.to(torch.int64).cumprod(dim=1).sum(dim=1)


def _assemble(
    drafts: torch.Tensor, num_accepted: torch.Tensor, emitted: torch.Tensor
) -> torch.Tensor:
    """``[B, K + 1]``: accepted drafts, the emitted token, then -1."""
    b, k = drafts.shape
    pos = torch.arange(k + 1, device=drafts.device)
    padded = torch.cat([drafts, drafts.new_full((b, 1), -1)], dim=1)
    out = torch.where(pos < num_accepted.unsqueeze(1), padded, torch.full_like(padded, -1))
    out.scatter_(1, num_accepted.unsqueeze(1), emitted.unsqueeze(1))
    return out


def _masked_scores(
    target_logits: torch.Tensor, bitmask: torch.Tensor | None, temperature: float
) -> torch.Tensor:
    """Float32 contiguous copy of ``target_logits / temperature`` with masked
    tokens (and ids ``>= 32 * W``) set to -inf."""
    b, k1, v = target_logits.shape
    scores = torch.empty((b, k1, v), dtype=torch.float32, device=target_logits.device)
    scores.copy_(target_logits.detach())
    if temperature != 1.0:
        scores.div_(temperature)
    if bitmask is not None and scores.numel() > 0:
        rows = scores.view(b * k1, v)
        apply_token_bitmask_inplace(rows, bitmask.reshape(b * k1, bitmask.shape[-1]))
    return scores


# ---------------------------------------------------------------------------
# Validation


def _check_temperature(temperature: float) -> float:
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real):
        raise TypeError(f"temperature must be a real number, got {type(temperature).__name__}")
    t = float(temperature)
    if not math.isfinite(t) or t < 0:
        raise ValueError(f"temperature must be finite and >= 0, got {temperature}")
    return t


def _check_generator(generator: torch.Generator | None, device: torch.device) -> None:
    if generator is None:
        return
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    gdev = torch.device(generator.device)
    if gdev.type != device.type or (
        gdev.index is not None and device.index is not None and gdev.index != device.index
    ):
        raise ValueError(f"generator is on {gdev} but target_logits are on {device}")


def _check_inputs(
    target_logits: torch.Tensor,
    draft_tokens: torch.Tensor,
    num_drafts: torch.Tensor | Sequence[int],
    bitmask: torch.Tensor | None,
    draft_probs: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Checks types, dtypes, shapes and devices (no values, no device sync).

    Returns ``draft_tokens`` as int64 and ``num_drafts`` as an int64 tensor,
    both on the logits' device.
    """
    if not isinstance(target_logits, torch.Tensor):
        raise TypeError(f"target_logits must be a torch.Tensor, got {type(target_logits).__name__}")
    if not target_logits.is_floating_point():
        raise TypeError(f"target_logits must be floating-point, got {target_logits.dtype}")
    if target_logits.dim() != 3:
        raise ValueError(
            f"target_logits must be [B, K + 1, V], got shape {tuple(target_logits.shape)}"
        )
    b, k1, v = target_logits.shape
    if k1 < 1 or v < 1:
        raise ValueError(
            f"target_logits needs K + 1 >= 1 positions and V >= 1 tokens, got shape "
            f"{tuple(target_logits.shape)}"
        )
    k = k1 - 1
    device = target_logits.device

    if not isinstance(draft_tokens, torch.Tensor):
        raise TypeError(f"draft_tokens must be a torch.Tensor, got {type(draft_tokens).__name__}")
    if not _is_integer(draft_tokens):
        raise TypeError(f"draft_tokens must have an integer dtype, got {draft_tokens.dtype}")
    if tuple(draft_tokens.shape) != (b, k):
        raise ValueError(
            f"draft_tokens must be [B, K] = [{b}, {k}] to match target_logits "
            f"{tuple(target_logits.shape)}, got {tuple(draft_tokens.shape)}"
        )
    _check_same_device("draft_tokens", draft_tokens, device)

    if isinstance(num_drafts, torch.Tensor):
        if not _is_integer(num_drafts):
            raise TypeError(f"num_drafts must have an integer dtype, got {num_drafts.dtype}")
        if tuple(num_drafts.shape) != (b,):
            raise ValueError(f"num_drafts must be [B] = [{b}], got {tuple(num_drafts.shape)}")
        if num_drafts.device.type != "cpu":
            _check_same_device("num_drafts", num_drafts, device)
        n = num_drafts.to(device=device, dtype=torch.int64)
    else:
        if isinstance(num_drafts, (str, bytes)) or not isinstance(num_drafts, Sequence):
            raise TypeError(
                "num_drafts must be a tensor or a sequence of ints, got "
                f"{type(num_drafts).__name__}"
            )
        try:
            values = [operator.index(x) for x in num_drafts]
        except TypeError:
            raise TypeError("num_drafts must contain ints") from None
        if len(values) != b:
            raise ValueError(f"num_drafts has {len(values)} entries, expected B = {b}")
        for i, x in enumerate(values):
            if not 0 <= x <= k:
                raise ValueError(f"num_drafts[{i}] = {x} is outside [0, K] = [0, {k}]")
        n = torch.tensor(values, dtype=torch.int64).to(device)

    if bitmask is not None:
        if not isinstance(bitmask, torch.Tensor):
            raise TypeError(f"bitmask must be a torch.Tensor, got {type(bitmask).__name__}")
        if bitmask.dtype != torch.int32:
            raise TypeError(f"bitmask dtype must be torch.int32, got {bitmask.dtype}")
        shape = tuple(bitmask.shape)
        if not (
            (bitmask.dim() == 3 and shape[:2] == (b, k1))
            or (bitmask.dim() == 2 and shape[0] == b * k1)
        ):
            raise ValueError(
                f"bitmask must be [B, K + 1, W] = [{b}, {k1}, W] or [B * (K + 1), W] = "
                f"[{b * k1}, W], got {shape}"
            )
        if bitmask.device.type != "cpu":
            _check_same_device("bitmask", bitmask, device)

    if draft_probs is not None:
        if not isinstance(draft_probs, torch.Tensor):
            raise TypeError(f"draft_probs must be a torch.Tensor, got {type(draft_probs).__name__}")
        if not draft_probs.is_floating_point():
            raise TypeError(f"draft_probs must be floating-point, got {draft_probs.dtype}")
        if tuple(draft_probs.shape) != (b, k, v):
            raise ValueError(
                f"draft_probs must be [B, K, V] = [{b}, {k}, {v}], got {tuple(draft_probs.shape)}"
            )
        _check_same_device("draft_probs", draft_probs, device)

    return draft_tokens.to(torch.int64), n


def _is_integer(t: torch.Tensor) -> bool:
    return not (t.dtype == torch.bool or t.is_floating_point() or t.is_complex())


def _check_same_device(name: str, t: torch.Tensor, device: torch.device) -> None:
    if t.device != device:
        raise ValueError(f"{name} is on {t.device} but target_logits are on {device}")


def _check_values(
    scores: torch.Tensor,
    drafts: torch.Tensor,
    n: torch.Tensor,
    draft_probs: torch.Tensor | None,
) -> None:
    """Value checks, computed on the device and read back in one go."""
    k1 = scores.shape[1]
    k = k1 - 1
    v = scores.shape[2]
    n_bad = (n < 0) | (n > k)
    nc = n.clamp(0, k)
    real = _real_drafts(nc, k)
    tok_bad = real & ((drafts < 0) | (drafts >= v))
    in_use = torch.arange(k1, device=n.device) <= nc.unsqueeze(1)  # positions 0..n_b
    row_max = scores.amax(dim=-1)
    row_bad = in_use & ~torch.isfinite(row_max)
    checks = [n_bad.any(), tok_bad.any(), row_bad.any()]
    if draft_probs is not None:
        ok = (draft_probs >= 0) & (draft_probs < math.inf)  # False for NaN too
        checks.append((real & ~ok.all(dim=-1)).any())
    flags = torch.stack(checks).tolist()
    if not any(flags):
        return
    if flags[0]:
        i = int(n_bad.nonzero()[0, 0])
        raise ValueError(f"num_drafts[{i}] = {int(n[i])} is outside [0, K] = [0, {k}]")
    if flags[1]:
        r, i = (int(x) for x in tok_bad.nonzero()[0])
        raise ValueError(
            f"draft_tokens[{r}, {i}] = {int(drafts[r, i])} is not a token id in [0, V) = "
            f"[0, {v}) (request {r} has {int(n[r])} drafts)"
        )
    if flags[2]:
        r, i = (int(x) for x in row_bad.nonzero()[0])
        m = float(row_max[r, i])
        if m == -math.inf:
            why = "every allowed token has zero probability (all-zero mask or -inf logits)"
        else:
            why = "the logits (divided by the temperature) are NaN or +inf"
        raise ValueError(f"request {r}, position {i}: {why}")
    r, i = (int(x) for x in (real & ~ok.all(dim=-1)).nonzero()[0])
    raise ValueError(f"draft_probs[{r}, {i}] has negative, NaN or infinite entries")
