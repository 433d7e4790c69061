"""Benchmark: applying a token bitmask to logits (maskpar vs xgrammar vs
llguidance), CPU and CUDA, same inputs in one run; results are cross-checked.

Each engine masks ``logits[rows, vocab]`` in place with an int32 bitmask
``[rows, ceil(vocab / 32)]`` (a pinned CPU buffer, as serving frameworks
allocate it). On CUDA the timing includes moving the bitmask to the device and
is taken with CUDA events after warm-up; on the CPU with perf_counter.

Run: ``python bench/bench_apply.py [--vocab 128256] [--rows 1 32 288]
[--dtype float32 bfloat16]``
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable

import torch

import maskpar


def engines(device: str) -> dict[str, Callable[[torch.Tensor, torch.Tensor], None]]:
    """The engines' apply functions, each moving the (pinned CPU) bitmask to
    the logits' device itself, as a serving step must. On CUDA, maskpar runs
    twice: its default (the Triton kernel) and its portable torch path; and
    xgrammar's two GPU kernels, Triton and CUDA, are timed apart."""
    out: dict[str, Callable[[torch.Tensor, torch.Tensor], None]] = {
        "maskpar": maskpar.apply_token_bitmask_inplace
    }
    if device == "cuda":
        out["maskpar-torch"] = apply_without_triton
    try:
        import xgrammar

        backends = ["triton", "cuda"] if device == "cuda" else ["cpu"]
        for backend in backends:
            out[f"xgrammar-{backend}"] = lambda logits, bm, backend=backend: (
                xgrammar.apply_token_bitmask_inplace(
                    logits, bm.to(logits.device, non_blocking=True), backend=backend
                )
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


def apply_without_triton(logits: torch.Tensor, bm: torch.Tensor) -> None:
    """maskpar's portable torch path (what runs where Triton is missing)."""
    from maskpar import _torch

    saved, _torch._triton_failed = _torch._triton_failed, "disabled by the benchmark"
    try:
        maskpar.apply_token_bitmask_inplace(logits, bm)
    finally:
        _torch._triton_failed = saved


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
    ap.add_argument("--dtype", nargs="+", default=["bfloat16"])
    ap.add_argument("--devices", nargs="+", default=None, help="default: cpu, and cuda if present")
    args = ap.parse_args()
    devices = args.devices or ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    print(f"torch {torch.__version__}, devices {devices}, vocab {args.vocab}")
    print("ms per call (mean), bitmask moved from a pinned CPU buffer inside the call;")
    print("ratio = maskpar / the best other engine, on the mean and on the worst call")
    gen = torch.Generator().manual_seed(0)
    for device in devices:
        eng = engines(device)
        for dtype_name in args.dtype:
            dtype = getattr(torch, dtype_name)
            print(f"\n{device} {dtype_name}")
            names = list(eng)
            print(f"{'rows':>5} " + " ".join(f"{n:>16}" for n in names) + "  ratio  worst")
            for rows in args.rows:
                words = (args.vocab + 31) // 32
                bm = torch.randint(
                    -(2**31), 2**31 - 1, (rows, words), dtype=torch.int32, generator=gen
                )
                if torch.cuda.is_available():
                    bm = bm.pin_memory()
                logits = torch.randn(rows, args.vocab, generator=gen).to(dtype).to(device)
                results, means, worst = {}, {}, {}
                for name, fn in list(eng.items()):
                    x = logits.clone()
                    try:
                        fn(x, bm)
                    except Exception as e:  # noqa: BLE001 - a reference that cannot run here
                        print(f"  !! {name} failed, left out: {type(e).__name__}: {e}"[:400])
                        del eng[name]
                        continue
                    results[name] = x
                    times = time_one(fn, logits, bm, device, args.reps)
                    means[name], worst[name] = statistics.mean(times), max(times)
                ref = results["maskpar"]
                for name, x in results.items():
                    if not torch.equal(x, ref):
                        print(f"  !! {name} result differs from maskpar on {device} rows={rows}")
                cells = " ".join(f"{means.get(n, float('nan')):16.3f}" for n in names)
                print(f"{rows:5d} {cells}  {ratio_to_best(means):.2f}  {ratio_to_best(worst):5.2f}")


def ratio_to_best(by_engine: dict[str, float]) -> float:
    """maskpar's figure over the best other engine's (maskpar's own variants
    are not references)."""
    best = min(
        (v for k, v in by_engine.items() if not k.startswith("maskpar")), default=float("nan")
    )
    return by_engine["maskpar"] / best


if __name__ == "__main__":
    main()
