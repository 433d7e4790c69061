"""Benchmark: every single-row mask along fresh JSON schemas' instances,
maskpar vs llguidance, and where the worst ones are (issue 26's worst step).

Method
------
Schemas arrive as in ``bench_serving.py`` (the dev split in a fixed-seed
order, each text used once, joining only if every engine compiles it and
accepts its instance). Each is walked to its end, one token at a time: at
every position each engine fills one row (``fill_next_token_bitmask_par``
with one request, one thread), timed alone, then consumes the token. The
engines alternate at each position, ``--gap-ms`` apart (default 0.3), so
both meet each state cold in the same process conditions.

Python's cyclic garbage collector is off while timing (frozen after the
setup, collected between schemas): a collection starting inside a timed
call charges its pause to whichever engine it hit.

Reported per engine: mean, p99, p99.9 and worst step over all positions,
and the number of steps over 1 ms; then the ``--top`` slowest maskpar steps
with llguidance's time for the same position and how to find it again
(schema number in the run, position, the text just before it), to be
reproduced in a process of its own (``--only N``).

Run: ``python bench/bench_steps.py [--schemas 150] [--top 10] [--only N]``.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from collections.abc import Sequence

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_regex import load_vocab, versions  # noqa: E402
from bench_serving import (  # noqa: E402
    DEFAULT_DATA,
    SAMPLE_DATA,
    WORDS,
    add_key_order,
    load_schemas,
    make_engines,
)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--data", default=None, help="MaskBench .jsonl.gz (default: the dev split, else the sample)"
    )
    ap.add_argument("--schemas", type=int, default=150, help="fresh schemas to walk")
    ap.add_argument("--gap-ms", type=float, default=0.3, help="pause after each timed fill")
    ap.add_argument("--top", type=int, default=10, help="slowest maskpar steps to list")
    ap.add_argument("--only", type=int, default=None, help="walk only schema N of the run")
    ap.add_argument("--seed", type=int, default=0)
    add_key_order(ap)
    args = ap.parse_args(argv)
    if args.data is None:
        args.data = DEFAULT_DATA if os.path.exists(DEFAULT_DATA) else SAMPLE_DATA
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    vocab = load_vocab()
    schemas = load_schemas(args.data, args.seed, vocab, args.key_order)
    engines = make_engines(vocab, 1, ["maskpar", "llguidance"], args.key_order, warm_up=False)
    rows = {name: torch.full((1, WORDS), -1, dtype=torch.int32) for name in engines}
    times: dict[str, list[float]] = {name: [] for name in engines}
    where: list[tuple[int, int, bytes]] = []
    print(
        f"single-row steps along {args.schemas} fresh schemas from "
        f"{os.path.basename(args.data)}, maskpar key order {args.key_order}, 1 thread, "
        f"{args.gap_ms:g} ms gaps; {versions()}",
        flush=True,
    )
    gc.collect()
    gc.freeze()
    gc.disable()
    for n in range(args.schemas):
        req = schemas.arrive(engines)
        if args.only is not None and n != args.only:
            continue
        for pos, token in enumerate(req.tokens):
            for name, eng in engines.items():
                eng.prepare(rows[name])
                t0 = time.perf_counter()
                eng.fill([(req.matchers[name], 0, [])], rows[name])
                times[name].append(time.perf_counter() - t0)
                time.sleep(args.gap_ms / 1e3)
            before = b"".join(vocab.tokens[t] for t in req.tokens[max(0, pos - 8) : pos])
            where.append((n, pos, before[-40:]))
            for name, eng in engines.items():
                eng.consume(req.matchers[name], [token])
        del req
        gc.collect()
    gc.enable()
    print(f"\n{len(where)} steps; ms: mean / p99 / p99.9 / worst, steps over 1 ms")
    for name, ts in times.items():
        a = np.array(ts) * 1e3
        print(
            f"  {name:10} {a.mean():.3f} / {np.percentile(a, 99):.3f} / "
            f"{np.percentile(a, 99.9):.3f} / {a.max():.2f}, {(a > 1).sum()}"
        )
    mp, ll = np.array(times["maskpar"]), np.array(times["llguidance"])
    print("\nslowest maskpar steps (ms; llguidance at the same position):")
    for i in np.argsort(-mp)[: args.top]:
        n, pos, before = where[i]
        at = f"schema {n} position {pos} after {before!r}"
        print(f"  {mp[i] * 1e3:6.2f} {ll[i] * 1e3:6.2f}  {at}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
