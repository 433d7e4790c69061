"""Benchmark: the speculative serving step on fresh JSON schemas, maskpar vs
llguidance and xgrammar, on the Llama-3 vocabulary (DESIGN.md section 6).

Method
------
A configuration is a batch size B and a number of drafts K. Its B requests
are MaskBench dev-split schemas (fixed-seed shuffle, each schema text used
once in the whole run, so no engine's compile or mask cache has seen it),
each with its first valid instance (``json.dumps(data, ensure_ascii=False)``,
Llama-3 tokens, then EOS). A schema joins only if every engine compiles it
and accepts its instance; the others are counted as skipped.

Every engine compiles the same language: llguidance and xgrammar generate an
object's members in the order of its ``properties``, so maskpar compiles with
``key_order="schema"`` (what the vLLM and SGLang adapters pass) and each
instance is re-ordered into schema order (``tests/schema_order.py``).
``--key-order any`` compiles maskpar's default instead (members in any
order, additional members anywhere): a larger language, whose masks after
``{"`` allow every key, so it is not the references' workload.

Every step, each request's K drafts are the instance's next K tokens (EOS
past its end), so every draft is accepted and all B x (K+1) rows are real
masks. Timed (``time.perf_counter``) per step and engine: the one call (or
loop) that fills all B x (K+1) rows:

* maskpar: ``fill_next_token_bitmask_par_with_draft_tokens``, T threads;
* llguidance: ``fill_next_token_bitmask_par_with_draft_tokens`` on an
  ``LLExecutor(T)`` (``fill_next_token_bitmask_par`` when K = 0);
* xgrammar loop: per request fill, accept, ..., rollback, as vLLM does;
* xgrammar batch: ``BatchGrammarMatcher(T)``: per draft position, one batch
  fill of every request's row, then one batch accept; one batch rollback.

Then (untimed) each request consumes its K drafts plus one more token; a
request that reaches the end of its instance leaves and a new one, on the
next unused schema, arrives. So cold grammar states are met all the time, as
a server with fresh schemas meets them.

Reported per configuration and engine: mean, p99 and worst step (ms), and
maskpar's mean and worst over the best reference's. Per request, the time
from arrival to its first K+1 rows: its compile (timed alone) plus the step
that writes them. Engines run one after the other on the same step, with
the same thread count, and ``--gap-ms`` (default 2) apart: a server's
forward pass leaves milliseconds between steps, in which an engine's pool
threads go idle; without the gap, one engine's threads still spinning
after its call share the cores with the next engine's call (on 2 cores
that made each engine look up to 10-50% slower, depending on the order).
``--check`` (default on) compares every maskpar row with the sequential
API's on a fork (untimed).

torch runs the bench's own operations (every engine's bitmask, the
references' fills, the row check) on one thread (``--torch-threads``), as
vLLM's GPU worker sets it for serving (``set_torch_threads_for_runtime``
in vLLM 0.33, in the process that fills the bitmask when one GPU serves):
with torch's default, its OpenMP threads spin on after each parallel
operation, on the cores the next engine's pool threads need.

Data: ``--data`` (default: the shared dev split, else the 200-file sample in
``tests/data/maskbench/``). ``--quick`` is a CI-sized run.
Run: ``python bench/bench_serving.py --help``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_regex import (  # noqa: E402
    EOS_IDS,
    VOCAB_SIZE,
    FillItems,
    LLGuidanceEngine,
    MaskparEngine,
    Vocab,
    XGrammarEngine,
    load_vocab,
    print_aligned,
    versions,
)
from maskbench import DEFAULT_DATA, load_files  # noqa: E402
from schema_order import reorder  # noqa: E402  (maskbench puts tests/ on the path)

from maskpar.integrations._warm import warm_json  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLE_DATA = os.path.join(HERE, "..", "tests", "data", "maskbench", "dev-sample.jsonl.gz")
WORDS = (VOCAB_SIZE + 31) // 32
EOS = EOS_IDS[0]
REFS = ("llguidance", "xgrammar loop", "xgrammar batch")


# ---------------------------------------------------------------------------
# Engines: bench_regex's, compiling JSON schemas
# ---------------------------------------------------------------------------


class MaskparServing(MaskparEngine):
    def __init__(
        self, vocab: Vocab, threads: int, key_order: str = "schema", warm_up: bool = True
    ) -> None:
        super().__init__(vocab, threads)
        self.key_order = key_order
        self.warm_up = warm_up
        self.encode = vocab.encode

    def compile(self, pattern: str) -> Any:
        g = self.mp.compile_json_schema(self.tok, pattern, key_order=self.key_order)
        if self.warm_up:
            # What the vLLM and SGLang adapters do on their compile pools:
            # walk the new grammar along a sample instance written from the
            # schema alone (never the instance this bench then decodes).
            warm_json(self.mp.Matcher(g), pattern, self.encode)
        return g

    def accepts(self, m: Any, tokens: list[int]) -> bool:
        return m.validate_tokens(tokens) == len(tokens)


class LLGuidanceServing(LLGuidanceEngine):
    def compile(self, pattern: str) -> Any:
        grammar = self.llg.LLMatcher.grammar_from_json_schema(
            pattern, defaults={"whitespace_flexible": True}
        )
        probe = self.llg.LLMatcher(self.tok, grammar, log_level=0)
        if probe.is_error():
            raise RuntimeError(f"llguidance: {probe.get_error()}")
        return grammar

    def accepts(self, m: Any, tokens: list[int]) -> bool:
        return m.validate_tokens(tokens) == len(tokens) and not m.is_error()


class XGrammarLoop(XGrammarEngine):
    """xgrammar's matcher called request by request (vLLM's speculative path)."""

    name = "xgrammar loop"

    def compile(self, pattern: str) -> Any:
        return self.compiler.compile_json_schema(pattern, any_whitespace=True, strict_mode=False)

    def accepts(self, m: Any, tokens: list[int]) -> bool:
        ok = all(m.accept_token(t) for t in tokens)
        m.reset()
        return ok

    def fill(self, items: FillItems, bitmask: torch.Tensor) -> list[int] | None:
        return self.fill_loop(items, bitmask)


class XGrammarBatch(XGrammarLoop):
    """xgrammar's ``BatchGrammarMatcher``: one batch call per draft position."""

    name = "xgrammar batch"

    def fill(self, items: FillItems, bitmask: torch.Tensor) -> list[int] | None:
        k = len(items[0][2]) if items else 0
        live = list(range(len(items)))
        accepted = [0] * len(items)
        for i in range(k + 1):
            done = [j for j in live if items[j][0].is_terminated()]
            for j in done:  # after an EOS draft: all-ones rows, as vLLM leaves them
                bitmask[items[j][1] + i : items[j][1] + k + 1].fill_(-1)
            live = [j for j in live if j not in done]
            if not live:
                break
            self.batch.batch_fill_next_token_bitmask(
                [items[j][0] for j in live], bitmask, [items[j][1] + i for j in live]
            )
            if i == k:
                break
            oks = self.batch.batch_accept_token(
                [items[j][0] for j in live], [items[j][2][i] for j in live]
            )
            for j, ok in zip(live, oks):
                if ok:
                    accepted[j] += 1
                else:
                    bitmask[items[j][1] + i + 1 : items[j][1] + k + 1].fill_(-1)
            live = [j for j, ok in zip(live, oks) if ok]
        back = [j for j in range(len(items)) if accepted[j]]
        if back:
            self.batch.batch_rollback([items[j][0] for j in back], [accepted[j] for j in back])
        return accepted


def make_engines(
    vocab: Vocab,
    threads: int,
    names: Sequence[str],
    key_order: str = "schema",
    warm_up: bool = True,
) -> dict[str, Any]:
    """The named engines; maskpar compiles with ``key_order`` (the references
    always generate members in schema order)."""
    classes = {
        "maskpar": functools.partial(MaskparServing, key_order=key_order, warm_up=warm_up),
        "llguidance": LLGuidanceServing,
        "xgrammar loop": XGrammarLoop,
        "xgrammar batch": XGrammarBatch,
    }
    return {n: c(vocab, threads) for n, c in classes.items() if n in names}


# ---------------------------------------------------------------------------
# Workload
# ---------------------------------------------------------------------------


@dataclass
class Request:
    schema: str
    tokens: list[int]  # the instance's tokens, then EOS
    matchers: dict[str, Any]
    compile_s: dict[str, float]
    pos: int = 0
    fresh: bool = True  # its first rows are not written yet


@dataclass
class Schemas:
    """Unused schemas with an instance, in a fixed-seed order."""

    cases: list[tuple[str, list[int]]]
    skipped: int = 0

    def arrive(self, engines: dict[str, Any]) -> Request:
        """The next schema that every engine compiles and whose instance every
        engine accepts, compiled (and timed) fresh on every engine."""
        while self.cases:
            schema, tokens = self.cases.pop()
            matchers, compile_s = {}, {}
            grammars: dict[type, Any] = {}  # xgrammar's two engines share a compile
            try:
                for name, eng in engines.items():
                    key = type(eng).compile
                    t0 = time.perf_counter()
                    if key not in grammars:
                        grammars[key] = (eng.compile(schema), time.perf_counter() - t0)
                    g, took = grammars[key]
                    t0 = time.perf_counter()
                    matchers[name] = eng.matcher(g)
                    compile_s[name] = took + time.perf_counter() - t0
            except Exception:  # noqa: BLE001 - a refusal: any engine, any exception
                self.skipped += 1
                continue
            if all(engines[n].accepts(m, tokens) for n, m in matchers.items()):
                return Request(schema, tokens, matchers, compile_s)
            self.skipped += 1
        raise SystemExit("ran out of MaskBench schemas: pass --data with more files")


def load_schemas(path: str, seed: int, vocab: Vocab, key_order: str = "schema") -> Schemas:
    """Each distinct schema once, with its first valid instance's tokens
    (its members re-ordered into schema order first when ``key_order`` is
    ``"schema"``)."""
    seen: set[str] = set()
    cases = []
    for rec in load_files(path, None, seed, None):
        schema = json.dumps(rec["schema"])
        valid = [t for t in rec["tests"] if t.get("valid")]
        if not valid or schema in seen:
            continue
        seen.add(schema)
        data = valid[0]["data"]
        if key_order == "schema":
            data = reorder(data, rec["schema"])
        text = json.dumps(data, ensure_ascii=False)
        cases.append((schema, vocab.encode(text) + [EOS]))
    random.Random(seed).shuffle(cases)
    cases.reverse()  # popped from the end
    return Schemas(cases)


def drafts_of(req: Request, k: int) -> list[int]:
    """The instance's next K tokens, EOS past its end."""
    d = req.tokens[req.pos : req.pos + k]
    return d + [EOS] * (k - len(d))


def check_rows(items: FillItems, bitmask: torch.Tensor, accepted: list[int]) -> int:
    """Compares maskpar's parallel rows with the sequential API's on a fork
    (rows after the last accepted draft must be all ones); returns the number
    of rows that differ."""
    scratch = torch.full((1, WORDS), -1, dtype=torch.int32)
    bad = 0
    for (m, row, drafts), n in zip(items, accepted):
        f = m.fork()
        for i in range(n + 1):
            f.fill_next_token_bitmask(scratch, 0)
            bad += not torch.equal(scratch[0], bitmask[row + i])
            if i < n:
                assert f.consume_token(drafts[i]), "an accepted draft refused by a fork"
        bad += int((bitmask[row + n + 1 : row + len(drafts) + 1] != -1).any(dim=1).sum())
    return bad


@dataclass
class ConfigResult:
    b: int
    k: int
    threads: int
    steps: dict[str, list[float]] = field(default_factory=dict)
    cpu: dict[str, list[float]] = field(default_factory=dict)
    arrival: dict[str, list[float]] = field(default_factory=dict)
    wrong_rows: int = 0


# After each timed call, --cpu-time idles this long and counts the CPU time
# that other threads burn meanwhile (worker threads spinning before they sleep)
# as part of the step: a serving process needs those cores.
SPIN_WINDOW_S = 0.002


def run_config(
    engines: dict[str, Any],
    schemas: Schemas,
    b: int,
    k: int,
    steps: int,
    check: bool,
    threads: int,
    cpu_time: bool = False,
    gap_s: float = 0.0,
) -> ConfigResult:
    res = ConfigResult(
        b, k, threads, {n: [] for n in engines}, {n: [] for n in engines}, {n: [] for n in engines}
    )
    reqs = [schemas.arrive(engines) for _ in range(b)]
    bitmasks = {n: torch.full((b * (k + 1), WORDS), -1, dtype=torch.int32) for n in engines}
    for _ in range(steps):
        drafts = [drafts_of(r, k) for r in reqs]
        for name, eng in engines.items():
            items = [
                (r.matchers[name], i * (k + 1), d) for i, (r, d) in enumerate(zip(reqs, drafts))
            ]
            eng.prepare(bitmasks[name])
            c0 = time.process_time()
            t0 = time.perf_counter()
            accepted = eng.fill(items, bitmasks[name])
            dt = time.perf_counter() - t0
            res.steps[name].append(dt)
            if cpu_time:
                # Process CPU time (all threads) during the call, plus what
                # threads other than this one burn in the idle window after it.
                c1, main1 = time.process_time(), time.thread_time()
                time.sleep(max(SPIN_WINDOW_S, gap_s))
                spin = (time.process_time() - c1) - (time.thread_time() - main1)
                res.cpu[name].append(c1 - c0 + spin)
            elif gap_s:
                time.sleep(gap_s)
            for r in reqs:
                if r.fresh:
                    res.arrival[name].append(r.compile_s[name] + dt)
            if name == "maskpar" and check:
                res.wrong_rows += check_rows(items, bitmasks[name], accepted or [])
        for i, r in enumerate(reqs):
            r.fresh = False
            take = r.tokens[r.pos : r.pos + k + 1]
            for name, eng in engines.items():
                eng.consume(r.matchers[name], take)
            r.pos += len(take)
            if r.pos >= len(r.tokens):  # done: a new request takes the slot
                reqs[i] = schemas.arrive(engines)
    return res


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------


def ms(xs: Sequence[float], q: float | None = None) -> float:
    """Mean (q None), else the q-th percentile, in ms."""
    if q is None:
        return statistics.mean(xs) * 1e3
    return float(np.percentile(np.array(xs), q)) * 1e3


def print_steps(results: list[ConfigResult], names: list[str]) -> None:
    print("\nstep time, ms: mean / p99 / worst; ratio = maskpar / best reference")
    head = ["T", "B", "K"] + [f"{n}" for n in names] + ["mean", "worst", "targets", "wrong rows"]
    rows = [head]
    for r in results:
        cells = [
            f"{ms(r.steps[n]):.2f} / {ms(r.steps[n], 99):.2f} / {ms(r.steps[n], 100):.2f}"
            for n in names
        ]
        refs = [n for n in names if n != "maskpar"]
        if refs:
            mean_ratio = ms(r.steps["maskpar"]) / min(ms(r.steps[n]) for n in refs)
            worst_ratio = ms(r.steps["maskpar"], 100) / min(ms(r.steps[n], 100) for n in refs)
            met = "met" if mean_ratio <= 0.5 and worst_ratio <= 0.75 else "NOT met"
            verdict = [f"{mean_ratio:.2f}", f"{worst_ratio:.2f}", met]
        else:
            verdict = ["-", "-", "-"]
        rows.append([str(r.threads), str(r.b), str(r.k), *cells, *verdict, str(r.wrong_rows)])
    print_aligned(rows)
    print("targets: mean <= 0.5x and worst step <= 0.75x the best reference's")


def print_scaling(results: list[ConfigResult], names: list[str]) -> None:
    """Per (B, K): each engine's mean step and CPU time per step at every
    thread count, and its speedup over its own fewest-threads run."""
    print(
        "\nthread scaling: step mean ms / speedup over the fewest threads / CPU ms per step"
        " (the process's threads, during the call and the idle window after it: another"
        " engine's pool still spinning from its own call counts too; run maskpar alone"
        " for its own)"
    )
    rows = [["B", "K", "T", *names]]
    base: dict[tuple[int, int, str], float] = {}
    for r in sorted(results, key=lambda r: (r.b, r.k, r.threads)):
        cells = []
        for n in names:
            mean = ms(r.steps[n])
            first = base.setdefault((r.b, r.k, n), mean)
            cpu = f"{ms(r.cpu[n]):.2f}" if r.cpu[n] else "-"
            cells.append(f"{mean:.2f} / {first / mean:.2f}x / {cpu}")
        rows.append([str(r.b), str(r.k), str(r.threads), *cells])
    print_aligned(rows)


def print_arrivals(results: list[ConfigResult], names: list[str]) -> None:
    print("\narrival to first K+1 rows (compile + the step that writes them), ms: mean / p99 / max")
    rows = [["B", "K", "requests", *names]]
    for r in results:
        cells = [
            f"{ms(r.arrival[n]):.1f} / {ms(r.arrival[n], 99):.1f} / {ms(r.arrival[n], 100):.1f}"
            for n in names
        ]
        rows.append([str(r.b), str(r.k), str(len(r.arrival["maskpar"])), *cells])
    print_aligned(rows)


def add_key_order(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "--key-order",
        choices=["schema", "any"],
        default="schema",
        help="maskpar's member order (default schema: the references' language, and what "
        "the vLLM and SGLang adapters compile); instances are re-ordered to match",
    )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=None, help="MaskBench .jsonl.gz (default: the dev split)")
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 4, 16, 64, 128])
    ap.add_argument("--drafts", type=int, nargs="+", default=[0, 4, 8])
    ap.add_argument("--steps", type=int, default=20, help="timed steps per configuration")
    ap.add_argument(
        "--threads",
        type=int,
        nargs="+",
        default=[2],
        help="threads for every engine; several values give a thread-scaling table",
    )
    ap.add_argument(
        "--cpu-time",
        action="store_true",
        help="also measure CPU time per step (all threads; adds a short idle window per call)",
    )
    ap.add_argument(
        "--gap-ms",
        type=float,
        default=2.0,
        help="untimed pause after each engine's call, as between a server's steps (0: none)",
    )
    ap.add_argument(
        "--torch-threads",
        type=int,
        default=1,
        help="torch's intra-op threads (default 1: vLLM's setting for serving; 0: torch's own)",
    )
    ap.add_argument("--seed", type=int, default=0)
    add_key_order(ap)
    ap.add_argument(
        "--no-warm-up",
        dest="warm_up",
        action="store_false",
        help="compile maskpar's grammars without the adapters' warm-up walk along a sample "
        "instance (timed as part of the compile by default)",
    )
    ap.add_argument("--engines", nargs="+", default=["maskpar", *REFS], choices=["maskpar", *REFS])
    ap.add_argument(
        "--no-check",
        dest="check",
        action="store_false",
        help="skip comparing maskpar's rows with the sequential API's",
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="CI size: B 1 4, K 0 4, 3 steps, the test sample's schemas",
    )
    args = ap.parse_args(argv)
    if "maskpar" not in args.engines:
        ap.error("--engines: maskpar, and the references to compare it with")
    if len(args.engines) < 2 and not (args.cpu_time or len(args.threads) > 1):
        ap.error("--engines: maskpar alone only for thread scaling or --cpu-time")
    if args.quick:
        args.batch, args.drafts, args.steps = [1, 4], [0, 4], 3
    if args.data is None:
        use_dev = not args.quick and os.path.exists(DEFAULT_DATA)
        args.data = DEFAULT_DATA if use_dev else SAMPLE_DATA
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.torch_threads or args.cpu_time:
        # The bench's own torch calls (bitmasks of every engine, references'
        # fills, the row check) run on torch's OpenMP threads, which spin on
        # after them: counted in the next engine's CPU time (1.4-1.8 ms a
        # step on 16 cores with maskpar alone at one thread), and on the
        # cores its threads need.
        torch.set_num_threads(args.torch_threads or 1)
    vocab = load_vocab()
    schemas = load_schemas(args.data, args.seed, vocab, args.key_order)
    print(
        f"serving step: {len(schemas.cases)} schemas from {os.path.basename(args.data)}, "
        f"maskpar key order {args.key_order}, "
        f"maskpar warm-up {'on' if args.warm_up else 'off'}, "
        f"threads per engine {args.threads}, torch threads {torch.get_num_threads()}, "
        f"{args.steps} steps per configuration, "
        f"{args.gap_ms:g} ms between engine calls, "
        f"{os.cpu_count()} CPUs; {versions()}",
        flush=True,
    )
    results = []
    names = list(args.engines)
    for threads in args.threads:
        engines = make_engines(vocab, threads, args.engines, args.key_order, args.warm_up)
        names = list(engines)
        for k in args.drafts:
            for b in args.batch:
                r = run_config(
                    engines,
                    schemas,
                    b,
                    k,
                    args.steps,
                    args.check,
                    threads,
                    args.cpu_time,
                    args.gap_ms / 1e3,
                )
                results.append(r)
                cells = ", ".join(
                    f"{n} {ms(r.steps[n]):.2f}/{ms(r.steps[n], 100):.2f}" for n in names
                )
                print(f"  T {threads:>2} B {b:>3} K {k}, step mean/worst ms: {cells}", flush=True)
    print_steps(results, names)
    if len(args.threads) > 1 or args.cpu_time:
        print_scaling(results, names)
    print_arrivals(results, names)
    print(f"\nschemas skipped (some engine refused the schema or its instance): {schemas.skipped}")
    wrong = sum(r.wrong_rows for r in results)
    print(
        f"maskpar rows that differ from the sequential API's: {wrong}"
        + ("" if args.check else " (not checked)")
    )
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
