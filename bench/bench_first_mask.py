"""Benchmark: the first mask of a fresh grammar in a permissive state, maskpar
vs llguidance and xgrammar, on the Llama-3 vocabulary.

Method
------
A state that allows most of the vocabulary (free text, a string's interior)
met for the first time costs an engine a walk of the whole token trie. Each
case below is compiled ``--reps`` times with a different number in it, so no
engine's caches have seen the grammar (maskpar's vocabulary-wide cache keys
on the language left, which the number changes):

* ``regex``: ``([^<]|<[^f]|<f[^u])*<fu{n}>``, free text up to a trigger,
  its first mask at the start;
* ``maxLength``: ``{"type": "string", "maxLength": 2000 + n}``, after the
  opening quote (every position of a counted string is a new state);
* ``pattern``: ``{"type": "string", "pattern": "^[a-z ]*{n}$"}``, after the
  opening quote;
* ``nearLimit``: ``{"type": "string", "maxLength": 24 + n}``, after the
  opening quote and 20 characters (4 to 4 + reps characters left: fewer
  than the longest token has, so the limit shapes the mask);
* ``uriLimit``: ``{"type": "string", "format": "uri", "maxLength": 300 + n}``,
  31 characters into a URL (a format with a long count: every token meets a
  new copy of the count, and no text slice applies);
* ``emailLimit``: ``{"type": "string", "format": "email", "maxLength":
  100 + n}``, 14 characters into an address.

Per engine and case, timed with ``time.perf_counter``: the compile (grammar
and matcher), and the first fill of one row after the prefix (consumed
untimed). Engines take turns on each grammar, so the machine's noise falls
on all of them alike. xgrammar precomputes masks in its compile, so its
first mask is cheap and its compile is not: compare "compile + first".

Run: ``python bench/bench_first_mask.py [--reps N] [--engines ...]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_regex import (  # noqa: E402
    VOCAB_SIZE,
    LLGuidanceEngine,
    MaskparEngine,
    XGrammarEngine,
    load_vocab,
    print_aligned,
    versions,
)
from bench_serving import LLGuidanceServing, MaskparServing, XGrammarLoop  # noqa: E402

WORDS = (VOCAB_SIZE + 31) // 32
# An engine whose compiles take longer than this (xgrammar on a 2,000-copy
# count: seconds each) is measured this many times only.
SLOW_COMPILE_S = 1.0
SLOW_REPS = 3
ENGINES = ("maskpar", "llguidance", "xgrammar")


class XGrammarRegex(XGrammarEngine):
    def fill(self, items: Any, bitmask: torch.Tensor) -> list[int] | None:
        return self.fill_loop(items, bitmask)


REGEX = {"maskpar": MaskparEngine, "llguidance": LLGuidanceEngine, "xgrammar": XGrammarRegex}
SCHEMA = {"maskpar": MaskparServing, "llguidance": LLGuidanceServing, "xgrammar": XGrammarLoop}

# name -> (engine classes, grammar text for number n, prefix text)
CASES: dict[str, tuple[dict[str, type], Callable[[int], str], str]] = {
    "regex": (REGEX, lambda n: f"([^<]|<[^f]|<f[^u])*<fu{n}>", ""),
    "maxLength": (
        SCHEMA,
        lambda n: json.dumps({"type": "string", "maxLength": 2000 + n}),
        '"',
    ),
    "pattern": (
        SCHEMA,
        lambda n: json.dumps({"type": "string", "pattern": f"^[a-z ]*{n}$"}),
        '"',
    ),
    "nearLimit": (
        SCHEMA,
        lambda n: json.dumps({"type": "string", "maxLength": 24 + n}),
        '"Living room, unit 42',
    ),
    "uriLimit": (
        SCHEMA,
        lambda n: json.dumps({"type": "string", "format": "uri", "maxLength": 300 + n}),
        '"https://docs.example.org/guide/',
    ),
    "emailLimit": (
        SCHEMA,
        lambda n: json.dumps({"type": "string", "format": "email", "maxLength": 100 + n}),
        '"jane.doe.smith@',
    ),
}


def run_case(
    name: str, vocab: Any, engines: Sequence[str], reps: int, seed: int
) -> dict[str, tuple[list[float], list[float]]]:
    classes, grammar_of, prefix = CASES[name]
    engs = {e: classes[e](vocab, 1) for e in engines}
    prefix_tokens = vocab.encode(prefix) if prefix else []
    out: dict[str, tuple[list[float], list[float]]] = {e: ([], []) for e in engines}
    bitmask = torch.full((1, WORDS), -1, dtype=torch.int32)
    for i in range(reps):
        text = grammar_of(seed + i)
        for e, eng in engs.items():
            if len(out[e][0]) >= SLOW_REPS and statistics.mean(out[e][0]) > SLOW_COMPILE_S:
                continue
            t0 = time.perf_counter()
            m = eng.matcher(eng.compile(text))
            compiled = time.perf_counter() - t0
            if prefix_tokens:
                eng.consume(m, prefix_tokens)
            eng.prepare(bitmask)
            t0 = time.perf_counter()
            eng.fill([(m, 0, [])], bitmask)
            first = time.perf_counter() - t0
            out[e][0].append(compiled)
            out[e][1].append(first)
    return out


def ms(xs: Sequence[float], q: float | None = None) -> str:
    if q is None:
        return f"{statistics.mean(xs) * 1e3:.3f}"
    return f"{sorted(xs)[min(len(xs) - 1, int(q * len(xs)))] * 1e3:.3f}"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=50, help="fresh grammars per case")
    ap.add_argument("--engines", nargs="+", default=list(ENGINES), choices=ENGINES)
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    ap.add_argument("--seed", type=int, default=0, help="first number put in the grammars")
    args = ap.parse_args(argv)
    vocab = load_vocab()
    print(f"# {versions()}; {args.reps} fresh grammars per case; 1 thread; times in ms")
    rows = [
        [
            "case",
            "engine",
            "n",
            "compile mean",
            "first mean",
            "first p50",
            "first p90",
            "compile + first mean",
        ]
    ]
    for name in args.cases:
        res = run_case(name, vocab, args.engines, args.reps, args.seed)
        for e, (compiled, first) in res.items():
            both = [a + b for a, b in zip(compiled, first)]
            rows.append(
                [
                    name,
                    e,
                    str(len(compiled)),
                    ms(compiled),
                    ms(first),
                    ms(first, 0.5),
                    ms(first, 0.9),
                    ms(both),
                ]
            )
        if "maskpar" in res and len(res) > 1:
            best = min(statistics.mean(res[e][1]) for e in res if e != "maskpar")
            best_both = min(
                statistics.mean([a + b for a, b in zip(*res[e])]) for e in res if e != "maskpar"
            )
            mine = statistics.mean(res["maskpar"][1])
            mine_both = statistics.mean([a + b for a, b in zip(*res["maskpar"])])
            rows.append(
                [
                    name,
                    "maskpar / best",
                    "",
                    "",
                    f"{mine / best:.2f}x",
                    "",
                    "",
                    f"{mine_both / best_both:.2f}x",
                ]
            )
    print_aligned(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
