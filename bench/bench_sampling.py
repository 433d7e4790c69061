"""Benchmark: grammar-masked verification of speculative drafts
(``maskpar.sampling``) on the logits' device, against the floor any sampler
pays: apply the bitmask, softmax, draw one token per position.

For B requests with K drafts each, the target logits are ``[B, K + 1, V]``
and the bitmask ``[B * (K + 1), ceil(V / 32)]`` sits in a pinned CPU buffer,
as a serving step leaves it. Random bitmasks allow about half the tokens;
every request drafts K tokens, each allowed by its row, so chains run long.
Timed with CUDA events on CUDA (perf_counter on the CPU), after warm-up:

* ``rejection_sample``: masked speculative rejection sampling, temperature 1,
  deterministic drafts (n-gram style, no draft probabilities);
* ``greedy_verify``: the temperature-0 version;
* floor: ``apply_token_bitmask_inplace`` then ``softmax`` and one
  ``multinomial`` draw for every position (what plain masked sampling of all
  B x (K+1) rows costs, with no acceptance logic).

Run: ``python bench/bench_sampling.py [--batch 1 16 64] [--drafts 4]``
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

import maskpar
from maskpar.sampling import greedy_verify, rejection_sample


def timed(fn: Callable[[], object], device: str, reps: int) -> float:
    """Mean ms of ``fn`` after three warm-up calls."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        if device == "cuda":
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.mean(times)


def case(b: int, k: int, vocab: int, dtype: torch.dtype, device: str, seed: int):
    gen = torch.Generator().manual_seed(seed)
    words = (vocab + 31) // 32
    bitmask = torch.randint(-(2**31), 2**31 - 1, (b * (k + 1), words), dtype=torch.int32)
    drafts = torch.empty(b, k, dtype=torch.long)
    for i in range(b):
        for j in range(k):
            row = bitmask[i * (k + 1) + j]
            while True:  # an allowed token, so the draft can be accepted
                t = int(torch.randint(0, vocab, (1,), generator=gen))
                if (int(row[t // 32]) >> (t % 32)) & 1:
                    drafts[i, j] = t
                    break
    if torch.cuda.is_available():
        bitmask = bitmask.pin_memory()
    logits = torch.randn(b, k + 1, vocab, generator=gen).to(dtype).to(device)
    return logits, drafts.to(device), bitmask


def time_case(
    b: int, k: int, vocab: int, dtype: torch.dtype, device: str, reps: int
) -> tuple[float, float, float]:
    """Mean ms of rejection_sample, greedy_verify and the floor on one case."""
    logits, drafts, bitmask = case(b, k, vocab, dtype, device, b * 31 + k)
    n = torch.full((b,), k, dtype=torch.long, device=device)
    gen = torch.Generator(device=device).manual_seed(0)

    def reject() -> object:
        return rejection_sample(logits, drafts, n, bitmask, temperature=1.0, generator=gen)

    def greedy() -> object:
        return greedy_verify(logits, drafts, n, bitmask)

    def floor() -> object:
        x = logits.reshape(b * (k + 1), -1).clone()
        maskpar.apply_token_bitmask_inplace(x, bitmask)
        p = torch.softmax(x.float(), dim=-1)
        return torch.multinomial(p, 1, generator=gen)

    return timed(reject, device, reps), timed(greedy, device, reps), timed(floor, device, reps)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 16, 64])
    ap.add_argument("--drafts", type=int, nargs="+", default=[4])
    ap.add_argument("--dtype", nargs="+", default=["float32", "bfloat16"])
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--devices", nargs="+", default=None, help="default: cpu, and cuda if present")
    args = ap.parse_args()
    devices = args.devices or ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    print(f"torch {torch.__version__}, maskpar {maskpar.__version__}, vocab {args.vocab}")
    print("ms per call (mean); ratio = rejection_sample / floor")
    head = f"{'device':6} {'dtype':8} {'B':>4} {'K':>2} {'rows':>5}"
    print(f"{head} {'rejection':>10} {'greedy':>10} {'floor':>10}  ratio")
    for device in devices:
        for dtype_name in args.dtype:
            dtype = getattr(torch, dtype_name)
            for k in args.drafts:
                for b in args.batch:
                    t_rej, t_greedy, t_floor = time_case(b, k, args.vocab, dtype, device, args.reps)
                    print(
                        f"{device:6} {dtype_name:8} {b:4d} {k:2d} {b * (k + 1):5d} "
                        f"{t_rej:10.3f} {t_greedy:10.3f} {t_floor:10.3f}  {t_rej / t_floor:.2f}",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
