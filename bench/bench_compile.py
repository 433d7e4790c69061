"""Benchmark: compile time per MaskBench schema, maskpar vs llguidance
(issue 26 item 3: mean and p99 at or below llguidance's on the files both
compile, and no file over 100 ms that llguidance compiles in under 10 ms).

Each dev-split file's schema is compiled once by each engine, fresh (the
first compile of that text in the process: maskpar keeps compiled grammars,
so a second compile would time its cache), timed with perf_counter, in one
process, maskpar first. A file counts when both engines compile it.
llguidance's compile includes building its matcher, where it checks the
grammar; maskpar's includes its `Matcher`.

Run: ``python bench/bench_compile.py [--sample N] [--key-order any|schema]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_regex import load_vocab  # noqa: E402
from maskbench import DEFAULT_DATA, LLGuidanceEngine, MaskparEngine, load_files  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=DEFAULT_DATA)
    ap.add_argument("--sample", type=int, default=None, help="files (default: all)")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--match", default=None, help="only files whose name contains this")
    ap.add_argument("--key-order", default="any", choices=["any", "schema"])
    ap.add_argument("--worst", type=int, default=12, help="files listed by time over llguidance")
    args = ap.parse_args()
    vocab = load_vocab()
    engines = {
        "maskpar": MaskparEngine(vocab, args.key_order),
        "llguidance": LLGuidanceEngine(vocab, "any"),
    }
    files = load_files(args.data, args.sample, args.seed, args.match)
    rows = []
    for rec in files:
        schema = json.dumps(rec["schema"])
        took = {}
        for name, engine in engines.items():
            t0 = time.perf_counter()
            try:
                engine.compile(schema)
            except Exception:  # noqa: BLE001 - a refusal, whatever the engine raises
                continue
            took[name] = time.perf_counter() - t0
        rows.append((rec["file"], took.get("maskpar"), took.get("llguidance")))
    both = [(f, m * 1e3, g * 1e3) for f, m, g in rows if m is not None and g is not None]
    mp = np.array([m for _, m, _ in both])
    lg = np.array([g for _, _, g in both])
    print(f"{len(files)} files, {len(both)} compiled by both; ms, maskpar / llguidance")
    for what, f in (("mean", np.mean), ("p50", np.median), ("p99", lambda x: np.percentile(x, 99))):
        a, b = float(f(mp)), float(f(lg))
        print(f"  {what:5} {a:8.2f} {b:8.2f}  ratio {a / b:.2f}")
    print(f"  max   {mp.max():8.2f} {lg.max():8.2f}")
    over = [(f, m, g) for f, m, g in both if m > 100 and g < 10]
    print(f"files over 100 ms that llguidance compiles in under 10 ms: {len(over)}")
    for f, m, g in over:
        print(f"  {f}: {m:.1f} ms against {g:.1f} ms")
    print(f"the {args.worst} files furthest over llguidance (maskpar - llguidance):")
    for f, m, g in sorted(both, key=lambda r: r[2] - r[1])[: args.worst]:
        print(f"  {f:55} {m:8.2f} {g:8.2f}")
    total_mp, total_lg = statistics.fsum(mp) / 1e3, statistics.fsum(lg) / 1e3
    print(f"total compile s: maskpar {total_mp:.1f}, llguidance {total_lg:.1f}")


if __name__ == "__main__":
    main()
