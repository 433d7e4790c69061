"""Benchmark: applying a token bitmask to logits (maskpar vs xgrammar vs
llguidance), CPU and CUDA, same inputs in one run; results are cross-checked.

Each engine masks ``logits[rows, vocab]`` in place with an int32 bitmask
``[rows, ceil(vocab / 32)]`` (a pinned CPU buffer, as serving frameworks
allocate it). On CUDA the timing includes moving the bitmask to the device and
is taken with CUDA events after warm-up; on the CPU with perf_counter.

Run: ``python bench/bench_apply.py [--vocab 128256] [--rows 1 32 288]``
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable

import torch

import maskpar


def engines() -> dict[str, Callable[[torch.Tensor, torch.Tensor], None]]:
    out: dict[str, Callable[[torch.Tensor, torch.Tensor], None]] = {
        "maskpar": maskpar.apply_token_bitmask_inplace
    }
    try:
        import xgrammar

        out["xgrammar"] = lambda logits, bm: xgrammar.apply_token_bitmask_inplace(
            logits, bm.to(logits.device, non_blocking=True)
        )
    except ImportError:
        pass
    try:
        import llguidance.torch as llt

        out["llguidance"] = lambda logits, bm: llt.apply_token_bitmask_inplace(
            logits, bm.to(logits.device, non_blocking=True)
        )
    except ImportError:
        pass
    return out


def time_one(fn, logits, bm, device: str, reps: int) -> list[float]:
    times = []
    for _ in range(3):
        fn(logits.clone(), bm)
    for _ in range(reps):
        x = logits.clone()
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            fn(x, bm)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn(x, bm)
            times.append((time.perf_counter() - t0) * 1e3)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 32, 288])
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--dtype", default="bfloat16")
    args = ap.parse_args()
    dtype = getattr(torch, args.dtype)
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    eng = engines()
    print(f"torch {torch.__version__}, devices {devices}, vocab {args.vocab}, dtype {args.dtype}")
    print(f"{'device':6} {'rows':>5} " + " ".join(f"{n + ' ms':>14}" for n in eng) + "  ratio")
    gen = torch.Generator().manual_seed(0)
    for device in devices:
        for rows in args.rows:
            words = (args.vocab + 31) // 32
            bm = torch.randint(-(2**31), 2**31 - 1, (rows, words), dtype=torch.int32, generator=gen)
            if torch.cuda.is_available():
                bm = bm.pin_memory()
            logits = torch.randn(rows, args.vocab, generator=gen).to(dtype).to(device)
            results, means = {}, {}
            for name, fn in eng.items():
                x = logits.clone()
                fn(x, bm)
                results[name] = x
                means[name] = statistics.mean(time_one(fn, logits, bm, device, args.reps))
            ref = results["maskpar"]
            for name, x in results.items():
                if not torch.equal(x, ref):
                    print(f"  !! {name} result differs from maskpar on {device} rows={rows}")
            best = min((v for k, v in means.items() if k != "maskpar"), default=float("nan"))
            cells = " ".join(f"{means[n]:14.3f}" for n in eng)
            print(f"{device:6} {rows:5d} {cells}  {means['maskpar'] / best:.2f}")


if __name__ == "__main__":
    main()
