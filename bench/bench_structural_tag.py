"""Benchmark: structural tags (tool calling), maskpar vs xgrammar vs llguidance,
on the same specs and texts, Llama-3 vocabulary (128256 ids, via quicktok).

Method (MaskBench-like, one request, single-threaded fills)
------------------------------------------------------------
Each workload is a structural tag (xgrammar's current format, or the legacy
shape) and realistic texts it accepts: a model thinking aloud, then calling
tools with JSON arguments. maskpar compiles it with ``compile_structural_tag``,
xgrammar with ``GrammarCompiler.compile_structural_tag`` (``cache_enabled=False``,
so every repetition compiles afresh). llguidance has no structural-tag
compiler for the current format; where a workload is triggered tags with JSON
contents (the legacy shape's language) it gets ``StructTag.to_grammar`` of the
same tags: its language is close but not identical (its free text may not
contain a trigger at all), so its numbers are a reference, not a match.

maskpar runs twice: as the vLLM and SGLang adapters run it ("maskpar": each
new grammar is walked along a sample text written from the spec alone,
``_warm.warm_stag``, on the framework's compile pool, off the step path),
and bare ("maskpar bare": the API without the walk). The walk is timed
apart from the compile and reported next to it: xgrammar spends the same
place's time precomputing its masks, and that is in its compile.

Compile: "spec to a matcher ready for its first fill", ``--compile-reps``
fresh compiles per engine (20: with 5, one compile landing on a busy moment
of this shared machine moved a mean by a fifth), engines rotating, after
one untimed compile.

Before any workload, each engine compiles and walks an unrelated spec
(``WARM_UP``: a constant and a JSON string, no free text), untimed: that pays
what a process pays once per vocabulary (maskpar's text slices and trie
tables, llguidance's and xgrammar's equivalents), as the tokenizer build is
not timed either. Per-grammar costs and the first use of a free-text lexeme
stay in the cold passes.

Masks: per text and engine, the ``WARM_UP`` walk again (untimed, engines
that take that spec), a fresh compile (untimed), a *cold* pass, then
``--reps`` *warm* passes after ``reset()``, then one more fresh compile's
first pass (*fresh*: the process has met the spec, the grammar is new). At
each token: the fill (timed, "mask"), an untimed check that the token's
bit is set, then consume. Texts every engine must accept (a rejection drops
that engine from the workload, printed). Reported: compile ms mean (and
maskpar's warm-up walk), mask us mean / p99 / max over cold, warm and fresh
passes, and each maskpar's / the best reference's. Each workload has two
texts, so a p99 is not one fill.

Why the ``WARM_UP`` walk before each engine's passes: the engines share
this process, and another engine's passes (xgrammar's 50-90 ms compile
above all) leave the CPU's caches holding none of an engine's code, which
a server running one engine every step never sees. Without it a cold
pass's first fill measured that: maskpar's 25-60 us after xgrammar's
compile, 3-10 us after its own work (its first fill after a Python
tensor call of its own: 3 us), xgrammar's 28-48 us; with 65-136 fills a
workload, one or two such fills were its p99. The walk is of another spec,
so the pass's grammar is as cold as before.

Run: ``python bench/bench_structural_tag.py`` (10-60 s on 2 CPUs, as busy as the machine is).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_regex import (  # noqa: E402
    EOS_IDS,
    VOCAB_SIZE,
    Vocab,
    llguidance_tokenizer,
    load_vocab,
    maskpar_tokenizer,
    xgrammar_tokenizer_info,
)

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"],
    "additionalProperties": False,
}
SEARCH = {
    "type": "object",
    "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
    "required": ["query", "limit"],
    "additionalProperties": False,
}
EMAIL = {
    "type": "object",
    "properties": {
        "to": {"type": "array", "items": {"type": "string"}},
        "subject": {"type": "string"},
        "body": {"type": "string"},
    },
    "required": ["to", "subject", "body"],
    "additionalProperties": False,
}
TIMER = {
    "type": "object",
    "properties": {"seconds": {"type": "integer"}, "label": {"type": "string"}},
    "required": ["seconds", "label"],
    "additionalProperties": False,
}
TOOLS = {"get_weather": WEATHER, "search": SEARCH, "send_email": EMAIL, "set_timer": TIMER}


def tool_tags() -> list[dict[str, Any]]:
    return [
        {
            "begin": f"<function={name}>",
            "content": {"type": "json_schema", "json_schema": schema},
            "end": "</function>",
        }
        for name, schema in TOOLS.items()
    ]


def struct_tags() -> list[Any]:
    import llguidance

    return [
        llguidance.StructTag(
            trigger="<function=", begin=f"<function={n}>", grammar=s, end="</function>"
        )
        for n, s in TOOLS.items()
    ]


CALLS = (
    "I will check the weather first, then look up flights.\n\n"
    '<function=get_weather>{"city": "San Francisco", "unit": "celsius"}</function>\n'
    '<function=search>{"query": "cheap flights SFO to JFK next Friday", "limit": 5}</function>'
    "\nLet me know if you want me to book one."
)
EMAIL_CALL = (
    "Drafting the email now.\n"
    '<function=send_email>{"to": ["ana@example.com", "li@example.org"], "subject": '
    '"Quarterly review \u2014 agenda", "body": "Hi both,\\nPlease find the agenda '
    "attached. Let's meet on Tuesday at 10:00.\\n\\nThanks!\"}</function>"
)


@dataclass
class Workload:
    name: str
    spec: dict[str, Any]
    texts: tuple[str, ...]
    llguidance: bool  # whether llguidance's StructTag expresses (nearly) the same language


WORKLOADS = (
    Workload(
        "tools4",
        {
            "type": "structural_tag",
            "format": {"type": "triggered_tags", "triggers": ["<function="], "tags": tool_tags()},
        },
        (CALLS, EMAIL_CALL),
        True,
    ),
    Workload(
        "legacy4",
        {
            "type": "structural_tag",
            "structures": [
                {"begin": f"<function={n}>", "schema": s, "end": "</function>"}
                for n, s in TOOLS.items()
            ],
            "triggers": ["<function="],
        },
        (CALLS, EMAIL_CALL),
        True,
    ),
    Workload(
        "think_then_calls",
        {
            "type": "structural_tag",
            "format": {
                "type": "sequence",
                "elements": [
                    {
                        "type": "tag",
                        "begin": "<think>",
                        "content": {"type": "any_text"},
                        "end": "</think>",
                    },
                    {
                        "type": "tags_with_separator",
                        "tags": tool_tags(),
                        "separator": "\n",
                        "at_least_one": True,
                    },
                ],
            },
        },
        (
            "<think>The user wants the weather in Paris and a 5 minute timer. Two calls, "
            "no text around them.</think>"
            '<function=get_weather>{"city": "Paris", "unit": "celsius"}</function>\n'
            '<function=set_timer>{"seconds": 300, "label": "tea"}</function>',
            "<think>Search first, then mail the two results to Ana.</think>"
            '<function=search>{"query": "flights Paris Lisbon June", "limit": 2}</function>\n'
            '<function=send_email>{"to": ["ana@example.com"], "subject": "Flights", '
            '"body": "Two options:\\n1. TAP 08:10\\n2. Air France 12:45"}</function>',
        ),
        False,
    ),
)


# Untimed, once per engine: per-process, per-vocabulary set-up (see the docstring).
WARM_UP = (
    {
        "type": "structural_tag",
        "format": {
            "type": "sequence",
            "elements": [
                {"type": "const_string", "value": "Answer: "},
                {"type": "json_schema", "json_schema": {"type": "string"}},
            ],
        },
    },
    'Answer: "a warm-up string, \u00e9t\u00e9 \\\\ done"',
)


class Engine:
    name = ""
    # Whether the engine compiles ``WARM_UP``'s spec (llguidance's grammar
    # here is the workload's tags whatever the spec).
    takes_warm_up = True

    def compile(self, spec: dict[str, Any]) -> Any:
        raise NotImplementedError

    def fill(self, m: Any, bitmask: torch.Tensor) -> None:
        raise NotImplementedError

    def consume(self, m: Any, t: int) -> bool:
        raise NotImplementedError


class MaskparEngine(Engine):
    """maskpar as the vLLM and SGLang adapters run it (``warm_up``: a walk
    along a sample text written from the spec, on the compile pool, timed
    apart from the compile in ``warm_ms``), or the bare API."""

    def __init__(self, vocab: Vocab, warm_up: bool = True) -> None:
        import maskpar

        self.mp = maskpar
        maskpar.set_num_threads(1)
        self.tok = maskpar_tokenizer(vocab)
        self.warm_up = warm_up
        self.name = "maskpar" if warm_up else "maskpar bare"
        self.encode = vocab.encode
        self.warm_ms: list[float] = []

    def compile(self, spec: dict[str, Any]) -> Any:
        m = self.mp.Matcher(self.mp.compile_structural_tag(self.tok, json.dumps(spec)))
        if self.warm_up:
            from maskpar.integrations._warm import warm_stag

            t0 = time.perf_counter()
            warm_stag(m, spec, self.encode)
            self.warm_ms.append((time.perf_counter() - t0) * 1e3)
        return m

    def fill(self, m: Any, bitmask: torch.Tensor) -> None:
        m.fill_next_token_bitmask(bitmask, 0)

    def consume(self, m: Any, t: int) -> bool:
        return m.consume_token(t)


class XGrammarEngine(Engine):
    name = "xgrammar"

    def __init__(self, vocab: Vocab) -> None:
        import xgrammar

        self.xgr = xgrammar
        info = xgrammar_tokenizer_info(vocab)
        self.compiler = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False)

    def compile(self, spec: dict[str, Any]) -> Any:
        if "structures" in spec:  # the legacy shape, converted by xgrammar (as vLLM does)
            items = [self.xgr.StructuralTagItem(**s) for s in spec["structures"]]
            st = self.xgr.StructuralTag.from_legacy_structural_tag(items, spec["triggers"])
            text = st.model_dump_json()
        else:
            text = json.dumps(spec)
        return self.xgr.GrammarMatcher(self.compiler.compile_structural_tag(text))

    def fill(self, m: Any, bitmask: torch.Tensor) -> None:
        m.fill_next_token_bitmask(bitmask, 0)

    def consume(self, m: Any, t: int) -> bool:
        return m.accept_token(t)


class LLGuidanceEngine(Engine):
    name = "llguidance"
    takes_warm_up = False

    def __init__(self, vocab: Vocab) -> None:
        import llguidance
        import llguidance.torch

        self.llg = llguidance
        self.fill_fn = llguidance.torch.fill_next_token_bitmask
        self.tok = llguidance_tokenizer(vocab)

    def compile(self, spec: dict[str, Any]) -> Any:
        lark = self.llg.StructTag.to_grammar(struct_tags(), assume_special=False)
        m = self.llg.LLMatcher(self.tok, self.llg.grammar_from("lark", lark), log_level=0)
        if m.is_error():
            raise RuntimeError(m.get_error())
        return m

    def fill(self, m: Any, bitmask: torch.Tensor) -> None:
        self.fill_fn(m, bitmask, 0)

    def consume(self, m: Any, t: int) -> bool:
        return m.consume_token(t) and not m.is_error()


def walk(eng: Engine, m: Any, seq: Sequence[int], bitmask: torch.Tensor) -> list[int] | None:
    """Fill times (ns) along `seq`, or None if the engine refuses a token."""
    out = []
    for t in seq:
        t0 = time.perf_counter_ns()
        eng.fill(m, bitmask)
        out.append(time.perf_counter_ns() - t0)
        if not (int(bitmask[0, t // 32]) >> (t % 32)) & 1 or not eng.consume(m, t):
            return None
    return out


def stats(ns: list[int]) -> tuple[float, float, float]:
    us = np.array(ns, dtype=np.float64) / 1e3
    return float(us.mean()), float(np.percentile(us, 99)), float(us.max())


def run(wl: Workload, engines: list[Engine], vocab: Vocab, args: argparse.Namespace) -> None:
    engines = [e for e in engines if e.name != "llguidance" or wl.llguidance]
    bitmask = torch.zeros((1, (VOCAB_SIZE + 31) // 32), dtype=torch.int32)
    seqs = [vocab.encode(t) + [EOS_IDS[1]] for t in wl.texts]
    compile_ms: dict[str, list[float]] = {e.name: [] for e in engines}
    cold: dict[str, list[int]] = {e.name: [] for e in engines}
    warm: dict[str, list[int]] = {e.name: [] for e in engines}
    # A second fresh compile's first pass: the process has met the spec
    # (maskpar's shared lexer entries are there), the grammar is new, as for
    # a server's later requests with the same tools.
    fresh: dict[str, list[int]] = {e.name: [] for e in engines}
    dropped: set[str] = set()
    for e in engines:
        e.compile(wl.spec)  # untimed: imports and one-time setup
    warm_ms: dict[str, list[float]] = {e.name: [] for e in engines}
    for rep in range(args.compile_reps):
        for e in engines[rep % len(engines) :] + engines[: rep % len(engines)]:
            t0 = time.perf_counter()
            e.compile(wl.spec)
            took = (time.perf_counter() - t0) * 1e3
            walk_ms = e.warm_ms.pop() if isinstance(e, MaskparEngine) and e.warm_up else 0.0
            compile_ms[e.name].append(took - walk_ms)
            warm_ms[e.name].append(walk_ms)
    for seq in seqs:
        for e in engines:
            if e.name in dropped:
                continue
            if e.takes_warm_up:
                walk(e, e.compile(WARM_UP[0]), vocab.encode(WARM_UP[1]), bitmask)
            m = e.compile(wl.spec)
            times = walk(e, m, seq, bitmask)
            if times is None:
                print(f"  {wl.name}: {e.name} refuses a text; dropped from this workload")
                dropped.add(e.name)
                continue
            cold[e.name] += times
            for _ in range(args.reps):
                m.reset()
                times = walk(e, m, seq, bitmask)
                assert times is not None
                warm[e.name] += times
            times = walk(e, e.compile(wl.spec), seq, bitmask)
            assert times is not None
            fresh[e.name] += times
    names = [e.name for e in engines if e.name not in dropped]
    tokens = sum(len(s) for s in seqs)
    print(f"\n## {wl.name} ({len(seqs)} texts, {tokens} tokens)\n")
    print(
        "| engine | compile ms (+ warm-up) | cold mask us mean / p99 / max "
        "| warm mask us mean / p99 / max | fresh mask us mean / p99 / max |"
    )
    print("| --- | --- | --- | --- | --- |")
    for n in names:
        c, w, f = stats(cold[n]), stats(warm[n]), stats(fresh[n])
        extra = f" (+ {np.mean(warm_ms[n]):.2f})" if any(warm_ms[n]) else ""
        print(
            f"| {n} | {np.mean(compile_ms[n]):.2f}{extra} "
            f"| {c[0]:.1f} / {c[1]:.1f} / {c[2]:.1f} "
            f"| {w[0]:.1f} / {w[1]:.1f} / {w[2]:.1f} "
            f"| {f[0]:.1f} / {f[1]:.1f} / {f[2]:.1f} |"
        )
    refs = [n for n in names if not n.startswith("maskpar")]
    if not refs:
        return
    best_c = min(np.mean(compile_ms[n]) for n in refs)
    best = {
        col: [min(stats(d[n])[i] for n in refs) for i in range(2)]
        for col, d in (("cold", cold), ("warm", warm), ("fresh", fresh))
    }
    for n in names:
        if not n.startswith("maskpar"):
            continue
        cells = []
        for col, d in (("cold", cold), ("warm", warm), ("fresh", fresh)):
            mean, p99, _ = stats(d[n])
            cells.append(
                f"{col} mask mean {mean / best[col][0]:.2f}x, p99 {p99 / best[col][1]:.2f}x"
            )
        warm_total = np.mean(compile_ms[n]) + np.mean(warm_ms[n])
        with_warm = f" ({warm_total / best_c:.2f}x with its warm-up)" if any(warm_ms[n]) else ""
        print(
            f"\n{n} / best reference: compile {np.mean(compile_ms[n]) / best_c:.2f}x"
            f"{with_warm}; " + "; ".join(cells)
        )
    print("(targets: mask mean and p99 <= 0.5x, compile <= 1x)")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--compile-reps", type=int, default=20)
    p.add_argument("--reps", type=int, default=2, help="warm passes per text")
    p.add_argument("--only", default=None, help="comma-separated workload names")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    vocab = load_vocab()
    engines: list[Engine] = [
        MaskparEngine(vocab),
        MaskparEngine(vocab, warm_up=False),
        XGrammarEngine(vocab),
        LLGuidanceEngine(vocab),
    ]
    bitmask = torch.zeros((1, (VOCAB_SIZE + 31) // 32), dtype=torch.int32)
    for e in (e for e in engines if e.takes_warm_up):
        assert walk(e, e.compile(WARM_UP[0]), vocab.encode(WARM_UP[1]), bitmask) is not None
    only = set(args.only.split(",")) if args.only else None
    print("# Structural tags: maskpar vs xgrammar vs llguidance (Llama-3 vocabulary, 1 thread)")
    for wl in WORKLOADS:
        if only is None or wl.name in only:
            run(wl, engines, vocab, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
