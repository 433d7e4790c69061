"""Benchmark: large `enum`s (issue 22 item 4), maskpar vs llguidance and xgrammar.

A JSON Schema `{"enum": [...]}` of 100,000 strings, numbers, arrays or
objects (product codes, ids, records: real requests) compiled fresh by each
engine, then one value (the middle one, as json.dumps writes it compactly,
which every engine's language holds, in the Llama-3 vocabulary's tokens)
walked token by token with a mask before each token. Reported per engine:
the compile (to a matcher), the first mask, and the mean and worst mask
along the value, with the same walk over a 16-value enum of the same kind
beside it (a large enum should mask as fast as a small one).

Each (engine, enum) runs in a process of its own with a time limit (both
references take minutes on some of these), one thread for the compile and
the masks. llguidance and xgrammar write an enum value as its JSON text;
maskpar is run with `key_order="schema"` (the same language) and, for
objects, also with `"any"` (the default: members in any order; 16 or more
flat objects are then one record automaton, `regex_dfa::records`, whose
states are computed from their numbers: 2^m contexts per m-member value
cost no memory). The references write each object in its own order only.

Run: ``python bench/bench_enum.py [--count N] [--timeout S] [--only NAME]
[--engines maskpar,llguidance,xgrammar]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

KINDS = {
    "strings": lambda i: f"product-{i:06d}",
    "numbers": lambda i: i * 3 + 0.5,
    "arrays2": lambda i: [i, f"s{i}"],
    "objects1": lambda i: {"id": i},
    "objects2": lambda i: {"id": i, "name": f"user {i}"},
    "objects4": lambda i: {"id": i, "name": f"user {i}", "age": i % 90, "active": i % 3 == 0},
    "objects5": lambda i: {
        "id": i,
        "name": f"user {i}",
        "age": i % 90,
        "active": i % 3 == 0,
        "team": f"t{i % 40}",
    },
    # A product table: ids, names, a few kinds, sizes shared by many rows,
    # flags, codes, prices and cities (shared contexts after the kinds,
    # sizes and cities).
    "records8": lambda i: {
        "id": i,
        "name": f"item {i}",
        "kind": "abc"[i % 3],
        "size": i * 7 % 1000,
        "live": i % 2 == 0,
        "code": f"C{i:06d}",
        "price": round(i * 0.25 + 0.1, 2),
        "city": ["Paris", "Lyon", "Nice"][i % 3],
    },
    # Rows holding arrays and objects (whitespace runs inside the values).
    "nested6": lambda i: {
        "id": i,
        "tags": ["a", i % 5],
        "size": {"w": i % 7, "h": 2.5},
        "name": f"n{i}",
        "ok": i % 2 == 0,
        "dims": [[i % 3], []],
    },
}

# (name, kind, count scale, engines, maskpar key order)
CASES = [
    ("strings", "strings", 1.0, ("maskpar", "llguidance", "xgrammar"), "schema"),
    ("numbers", "numbers", 1.0, ("maskpar", "llguidance", "xgrammar"), "schema"),
    ("arrays2", "arrays2", 1.0, ("maskpar", "llguidance", "xgrammar"), "schema"),
    ("objects1", "objects1", 1.0, ("maskpar", "llguidance", "xgrammar"), "schema"),
    ("objects2", "objects2", 1.0, ("maskpar", "llguidance", "xgrammar"), "schema"),
    ("objects1 any order", "objects1", 1.0, ("maskpar",), "any"),
    ("objects2 any order", "objects2", 1.0, ("maskpar",), "any"),
    # Members in any order, four and more: the record automaton (before it,
    # 24 spelled orders per value or member sets: 10,000 four-member objects
    # passed the compile budget, 10,000 of five the lexeme bound). The
    # references beside, in schema order.
    ("objects4 any order", "objects4", 1.0, ("maskpar",), "any"),
    ("objects5", "objects5", 0.1, ("maskpar", "llguidance", "xgrammar"), "schema"),
    ("objects5 any order", "objects5", 0.1, ("maskpar",), "any"),
    ("objects5 any order", "objects5", 1.0, ("maskpar",), "any"),
    ("records8", "records8", 0.1, ("maskpar", "llguidance", "xgrammar"), "schema"),
    ("records8 any order", "records8", 0.1, ("maskpar",), "any"),
    ("records8 any order", "records8", 1.0, ("maskpar",), "any"),
    ("nested6", "nested6", 0.1, ("maskpar", "llguidance", "xgrammar"), "schema"),
    ("nested6 any order", "nested6", 0.1, ("maskpar",), "any"),
    ("nested6 any order", "nested6", 1.0, ("maskpar",), "any"),
]


def engine(name: str, key_order: str) -> Any:
    from bench_regex import load_vocab, xgrammar_tokenizer_info
    from maskbench import LLGuidanceEngine, MaskparEngine, XGrammarEngine

    vocab = load_vocab()
    if name == "maskpar":
        e = MaskparEngine(vocab, key_order)
        e.mp.set_num_threads(1)
    elif name == "llguidance":
        e = LLGuidanceEngine(vocab, "any")
    else:
        e = XGrammarEngine(vocab)
        e.compiler = e.xgr.GrammarCompiler(
            xgrammar_tokenizer_info(vocab), max_threads=1, cache_enabled=False
        )
    return e, vocab


def walk(e: Any, m: Any, tokens: list[int]) -> list[float]:
    """Seconds of each mask along `tokens` (and one after the last)."""
    import torch
    from bench_regex import VOCAB_SIZE

    bitmask = torch.zeros((1, (VOCAB_SIZE + 31) // 32), dtype=torch.int32)
    took = []
    for t in [*tokens, None]:
        t0 = time.perf_counter()
        e.fill(m, bitmask)
        took.append(time.perf_counter() - t0)
        word = int(bitmask[0, t // 32]) if t is not None else 0
        assert t is None or (word >> (t % 32)) & 1, f"token {t} of the value is masked"
        if t is not None:
            assert e.consume(m, t), f"token {t} of the value was refused"
    return took


def worker(engine_name: str, kind: str, count: int, key_order: str) -> dict[str, Any]:
    e, vocab = engine(engine_name, key_order)
    make = KINDS[kind]
    out: dict[str, Any] = {}
    for label, n in (("small", 16), ("large", count)):
        values = [make(i) for i in range(n)]
        schema = json.dumps({"enum": values})
        t0 = time.perf_counter()
        m = e.compile(schema)
        compile_s = time.perf_counter() - t0
        tokens = vocab.encode(json.dumps(values[n // 2], separators=(",", ":")))
        took = walk(e, m, tokens)
        out[label] = {
            "compile_s": compile_s,
            "first_ms": took[0] * 1e3,
            "mean_us": sum(took) / len(took) * 1e6,
            "worst_us": max(took) * 1e6,
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=100_000)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per engine and enum")
    ap.add_argument("--only", default=None, help="only the enum with this name")
    ap.add_argument("--engines", default="maskpar,llguidance,xgrammar", help="comma-separated")
    ap.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        name, kind, count, key_order = args.worker
        print(json.dumps(worker(name, kind, int(count), key_order)))
        return
    import maskpar

    print(f"# bench_enum.py: {args.count:,}-value enums, 1 thread, Llama-3 vocabulary")
    print(f"# maskpar {maskpar.__version__}; each engine and enum in its own process")
    print(
        f"{'enum':20} {'engine':16} {'count':>7} {'compile s':>10} {'first ms':>9} "
        f"{'mean us':>8} {'worst us':>9} | {'16 values: mean us':>18}"
    )
    for name, kind, scale, engines, key_order in CASES:
        if args.only and name != args.only:
            continue
        count = int(args.count * scale)
        for eng in [e for e in engines if e in args.engines.split(",")]:
            label = eng if eng != "maskpar" else f"maskpar/{key_order}"
            cmd = [sys.executable, __file__, "--worker", eng, kind, str(count), key_order]
            try:
                run = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
            except subprocess.TimeoutExpired:
                limit = f"> {int(args.timeout)}"
                print(f"{name:20} {label:16} {count:>7} {limit:>10}  (time limit)")
                continue
            lines = run.stdout.strip().splitlines()
            if run.returncode != 0 or not lines:
                err = run.stderr.strip().splitlines() or ["?"]
                why = next((x for x in reversed(err) if "Error" in x), err[-1])[:90]
                print(f"{name:20} {label:16} {count:>7} {'refused':>10}  {why}")
                continue
            r = json.loads(lines[-1])
            big, small = r["large"], r["small"]
            print(
                f"{name:20} {label:16} {count:>7} {big['compile_s']:>10.3f} "
                f"{big['first_ms']:>9.3f} {big['mean_us']:>8.1f} {big['worst_us']:>9.1f} | "
                f"{small['mean_us']:>18.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
