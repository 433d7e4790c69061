"""MaskBench: JSON Schema coverage, exactness and speed, maskpar against
llguidance and xgrammar in one run on the same files.

For every file of ``../shared/data/maskbench/dev.jsonl.gz`` (fields ``file``,
``schema``, ``tests: [{data, valid}]``) and every engine:

* compile the schema (timed alone; the time to a matcher ready for its first
  mask);
* for every test instance, serialise it with ``json.dumps(data,
  ensure_ascii=False)``, tokenize it with Llama-3 and walk it: per token fill
  the mask, check the token's bit, consume (the three timed together, one
  "mask time" per token); after the last token, fill once more and check EOS;
* a valid instance must be accepted to the end with EOS allowed, an invalid
  one rejected somewhere (a token or EOS refused).

A file passes when it compiled and every instance was judged right. A file
whose engine errs the wrong way is a validation error (valid rejected /
invalid accepted), the worst outcome. Each engine runs in its own worker
process, one file at a time, with a per-file time limit: a worker past it is
killed and the file counts as a timeout. Engines run one after the other, so
their timings never share the two CPUs.

Engine settings follow the JSON Schema defaults: flexible whitespace,
additional properties allowed (xgrammar ``strict_mode=False``).

``--key-order schema``: every engine generates members in the schema's order
(maskpar ``key_order="schema"``; xgrammar and llguidance do by default), and
every instance is re-ordered into schema order first
(``tests/schema_order.py``, computed from the schema alone). The default,
``any``, compiles maskpar with members in any order and keeps the instances'
own order.

Usage: ``python bench/maskbench.py [--sample N] [--engines ...] [--key-order schema]``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import multiprocessing as mp
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_regex import (  # noqa: E402
    EOS_IDS,
    VOCAB_SIZE,
    Vocab,
    llguidance_tokenizer,
    load_vocab,
    maskpar_tokenizer,
    print_aligned,
    versions,
    xgrammar_tokenizer_info,
)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
from schema_order import reorder  # noqa: E402

DEFAULT_DATA = os.path.join(HERE, "..", "..", "shared", "data", "maskbench", "dev.jsonl.gz")
ENGINES = ("maskpar", "llguidance", "xgrammar")
EOS = EOS_IDS[0]


# ---------------------------------------------------------------------------
# Engines (constructed inside the worker process)
# ---------------------------------------------------------------------------


class Engine:
    def compile(self, schema: str) -> Any:
        """Schema text to a fresh matcher (the timed compile)."""
        raise NotImplementedError

    def fill(self, m: Any, bitmask: Any) -> None:
        raise NotImplementedError

    def consume(self, m: Any, t: int) -> bool:
        raise NotImplementedError

    def reset(self, m: Any) -> None:
        m.reset()


def lark_json(mode: str, schema: str) -> str:
    """The Lark grammar of `schema` for the lark-json modes: the block alone
    (`start: %json ...`, which maskpar compiles as the schema itself), or
    behind a rule (`lark-json-rule`: the block inside a Lark grammar)."""
    if mode == "lark-json-rule":
        return f"start: value\nvalue: %json {schema}"
    return f"start: %json {schema}"


class MaskparEngine(Engine):
    def __init__(self, vocab: Vocab, key_order: str) -> None:
        import maskpar

        self.mp = maskpar
        maskpar.set_num_threads(2)
        self.tok = maskpar_tokenizer(vocab)
        self.key_order = key_order

    def compile(self, schema: str) -> Any:
        if self.key_order.startswith("lark-json"):
            g = self.mp.compile_grammar(self.tok, lark_json(self.key_order, schema), syntax="lark")
        else:
            g = self.mp.compile_json_schema(self.tok, schema, key_order=self.key_order)
        return self.mp.Matcher(g)

    def fill(self, m: Any, bitmask: Any) -> None:
        m.fill_next_token_bitmask(bitmask, 0)

    def consume(self, m: Any, t: int) -> bool:
        return m.consume_token(t)


class LLGuidanceEngine(Engine):
    def __init__(self, vocab: Vocab, key_order: str) -> None:
        import llguidance
        import llguidance.torch

        self.key_order = key_order
        self.llg = llguidance
        self.fill_fn = llguidance.torch.fill_next_token_bitmask
        self.tok = llguidance_tokenizer(vocab)

    def compile(self, schema: str) -> Any:
        if self.key_order.startswith("lark-json"):
            grammar = self.llg.LLMatcher.grammar_from_lark(lark_json(self.key_order, schema))
        else:
            grammar = self.llg.LLMatcher.grammar_from_json_schema(
                schema, defaults={"whitespace_flexible": True}
            )
        m = self.llg.LLMatcher(self.tok, grammar, log_level=0)
        if m.is_error():
            raise RuntimeError(m.get_error())
        return m

    def fill(self, m: Any, bitmask: Any) -> None:
        self.fill_fn(m, bitmask, 0)

    def consume(self, m: Any, t: int) -> bool:
        return m.consume_token(t) and not m.is_error()


class XGrammarEngine(Engine):
    def __init__(self, vocab: Vocab) -> None:
        import xgrammar

        self.xgr = xgrammar
        self.compiler = xgrammar.GrammarCompiler(
            xgrammar_tokenizer_info(vocab), max_threads=2, cache_enabled=False
        )

    def compile(self, schema: str) -> Any:
        g = self.compiler.compile_json_schema(schema, any_whitespace=True, strict_mode=False)
        return self.xgr.GrammarMatcher(g)

    def fill(self, m: Any, bitmask: Any) -> None:
        m.fill_next_token_bitmask(bitmask, 0)

    def consume(self, m: Any, t: int) -> bool:
        return m.accept_token(t)


def make_engine(name: str, key_order: str) -> Engine:
    vocab = load_vocab()
    if name == "maskpar":
        return MaskparEngine(vocab, key_order)
    if name == "llguidance":
        return LLGuidanceEngine(vocab, key_order)
    return XGrammarEngine(vocab)


# ---------------------------------------------------------------------------
# One file, in the worker
# ---------------------------------------------------------------------------


@dataclass
class FileResult:
    file: str
    outcome: str  # pass | compile_error | timeout | valid_rejected | invalid_accepted | crash
    detail: str = ""
    compile_s: float | None = None
    mask_ns: list[int] = field(default_factory=list)


def walk(
    eng: Engine, m: Any, seq: Sequence[int], bitmask: Any, words: np.ndarray, mask_ns: list[int]
) -> int | None:
    """Feeds `seq` then EOS; returns the index refused (len(seq) for EOS) or None."""
    clock = time.perf_counter_ns
    for i, t in enumerate([*seq, EOS]):
        t0 = clock()
        eng.fill(m, bitmask)
        allowed = (int(words[t >> 5]) >> (t & 31)) & 1
        ok = bool(allowed) and (t == EOS or eng.consume(m, t))
        mask_ns.append(clock() - t0)
        if not ok:
            return i
    return None


def run_file(eng: Engine, rec: dict, seqs: list[list[int]], bitmask: Any) -> FileResult:
    res = FileResult(rec["file"], "pass")
    schema = json.dumps(rec["schema"])
    t0 = time.perf_counter()
    try:
        m = eng.compile(schema)
    except Exception as e:  # every engine reports refusals as some exception
        res.outcome, res.detail = "compile_error", f"{type(e).__name__}: {e}"[:300]
        return res
    res.compile_s = time.perf_counter() - t0
    words = bitmask.numpy()[0]
    for k, (test, seq) in enumerate(zip(rec["tests"], seqs)):
        if k:
            eng.reset(m)
        refused = walk(eng, m, seq, bitmask, words, res.mask_ns)
        if test["valid"] and refused is not None:
            res.outcome = "valid_rejected"
            res.detail = f"test {k}: token {refused}/{len(seq)} refused"
            return res
        if not test["valid"] and refused is None:
            res.outcome = "invalid_accepted"
            res.detail = f"test {k}: {json.dumps(test['data'], ensure_ascii=False)[:120]}"
            return res
    return res


def worker(name: str, key_order: str, jobs: Any, results: Any) -> None:
    import torch

    # Engines log refusals from native code on stderr; results carry them.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)

    eng = make_engine(name, key_order)
    bitmask = torch.zeros((1, (VOCAB_SIZE + 31) // 32), dtype=torch.int32)
    results.put(("ready", None))
    while True:
        job = jobs.get()
        if job is None:
            return
        rec, seqs = job
        try:
            results.put(("done", run_file(eng, rec, seqs, bitmask)))
        except Exception as e:  # an engine bug: record it, keep going
            results.put(("done", FileResult(rec["file"], "crash", repr(e)[:300])))


# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------


class Runner:
    """One engine's worker process, restarted after a timeout."""

    def __init__(self, name: str, timeout_s: float, key_order: str) -> None:
        self.name, self.timeout_s, self.key_order = name, timeout_s, key_order
        self.ctx = mp.get_context("spawn")
        self.proc: Any = None

    def start(self) -> None:
        self.jobs, self.results = self.ctx.Queue(), self.ctx.Queue()
        self.proc = self.ctx.Process(
            target=worker, args=(self.name, self.key_order, self.jobs, self.results), daemon=True
        )
        self.proc.start()
        kind, _ = self.results.get(timeout=300)
        assert kind == "ready"

    def run(self, rec: dict, seqs: list[list[int]]) -> FileResult:
        if self.proc is None:
            self.start()
        self.jobs.put((rec, seqs))
        try:
            _, res = self.results.get(timeout=self.timeout_s)
            return res
        except Exception:  # queue.Empty (or a dead worker): past the limit
            self.proc.kill()
            self.proc.join()
            self.proc = None
            return FileResult(rec["file"], "timeout", f"over {self.timeout_s:.0f} s")

    def stop(self) -> None:
        if self.proc is not None:
            self.jobs.put(None)
            self.proc.join(timeout=30)
            if self.proc.is_alive():
                self.proc.kill()


def load_files(path: str, sample: int | None, seed: int, match: str | None) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        recs = [json.loads(line) for line in f]
    if match:
        recs = [r for r in recs if match in r["file"]]
    if sample is not None and sample < len(recs):
        recs = sorted(random.Random(seed).sample(recs, sample), key=lambda r: r["file"])
    return recs


OUTCOMES = ("pass", "compile_error", "timeout", "valid_rejected", "invalid_accepted", "crash")


def pct(ns: np.ndarray, q: float) -> float:
    return float(np.percentile(ns, q)) if ns.size else float("nan")


def summarize(names: list[str], results: dict[str, list[FileResult]], n: int) -> None:
    print(f"\nfiles: {n}")
    head = [
        "engine",
        "pass",
        "pass %",
        "compile err",
        "timeout",
        "valid rejected",
        "invalid accepted",
        "crash",
    ]
    rows = [head]
    for name in names:
        c = Counter(r.outcome for r in results[name])
        rows.append(
            [
                name,
                str(c["pass"]),
                f"{100 * c['pass'] / max(n, 1):.1f}",
                str(c["compile_error"]),
                str(c["timeout"]),
                str(c["valid_rejected"]),
                str(c["invalid_accepted"]),
                str(c["crash"]),
            ]
        )
    print_aligned(rows)

    stats: dict[str, dict[str, float]] = {}
    for name in names:
        ns = np.array([t for r in results[name] for t in r.mask_ns], dtype=np.float64) / 1e3
        comp = np.array([r.compile_s for r in results[name] if r.compile_s is not None]) * 1e3
        stats[name] = {
            "tokens": float(ns.size),
            "mean": float(ns.mean()) if ns.size else float("nan"),
            "p50": pct(ns, 50),
            "p99": pct(ns, 99),
            "p99.9": pct(ns, 99.9),
            "max": float(ns.max()) if ns.size else float("nan"),
            "c_mean": float(comp.mean()) if comp.size else float("nan"),
            "c_p50": pct(comp, 50),
            "c_p99": pct(comp, 99),
        }
    print("\nmask time per token, us (fill + check + consume, every file an engine compiled):")
    head = [
        "engine",
        "tokens",
        "mean",
        "p50",
        "p99",
        "p99.9",
        "max",
        "compile mean ms",
        "compile p50 ms",
        "compile p99 ms",
    ]
    rows = [head]
    for name in names:
        s = stats[name]
        rows.append(
            [name, f"{s['tokens']:.0f}"]
            + [f"{s[k]:.1f}" for k in ("mean", "p50", "p99", "p99.9", "max")]
            + [f"{s[k]:.2f}" for k in ("c_mean", "c_p50", "c_p99")]
        )
    print_aligned(rows)

    # Speed on equal work: the files every engine passed.
    common = set.intersection(
        *({r.file for r in results[name] if r.outcome == "pass"} for name in names)
    )
    print(f"\non the {len(common)} files every engine passes (same tokens for all):")
    head = [
        "engine",
        "mask mean us",
        "mask p50 us",
        "mask p99 us",
        "mask p99.9 us",
        "compile mean ms",
        "ratio mean",
        "ratio p99",
        "ratio p99.9",
        "compile ratio",
    ]
    rows = [head]
    sub: dict[str, tuple[float, float, float, float, float]] = {}
    for name in names:
        ns = (
            np.array(
                [t for r in results[name] if r.file in common for t in r.mask_ns], dtype=np.float64
            )
            / 1e3
        )
        comp = np.array([r.compile_s for r in results[name] if r.file in common]) * 1e3
        sub[name] = (
            float(ns.mean()) if ns.size else float("nan"),
            pct(ns, 50),
            pct(ns, 99),
            pct(ns, 99.9),
            float(comp.mean()) if comp.size else float("nan"),
        )
    refs = [x for x in names if x != "maskpar"]
    for name in names:
        row = [name] + [f"{v:.1f}" for v in sub[name][:4]] + [f"{sub[name][4]:.2f}"]
        if name == "maskpar" and refs:
            best = [min(sub[r][i] for r in refs) for i in range(5)]
            row += [f"{sub[name][i] / best[i]:.2f}" for i in (0, 2, 3, 4)]
        else:
            row += ["", "", "", ""]
        rows.append(row)
    print_aligned(rows)
    if "maskpar" in names and refs:
        print(
            "ratio = maskpar / best reference; targets: mean, p99 and p99.9 <= 0.5, compile <= 1.0"
        )


def report_errors(names: list[str], results: dict[str, list[FileResult]], top: int) -> None:
    for name in names:
        bad = [
            r for r in results[name] if r.outcome in ("valid_rejected", "invalid_accepted", "crash")
        ]
        if bad:
            print(f"\n{name}: validation errors and crashes ({len(bad)}):")
            for r in bad[:top]:
                print(f"  {r.outcome:16} {r.file}: {r.detail}")
        reasons = Counter(
            r.detail.split(":", 2)[-1].strip()[:90]
            for r in results[name]
            if r.outcome == "compile_error"
        )
        if reasons:
            print(f"\n{name}: most common compile errors:")
            for msg, c in reasons.most_common(top):
                print(f"  {c:5}  {msg}")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=os.environ.get("MASKBENCH", DEFAULT_DATA))
    ap.add_argument("--engines", nargs="+", default=list(ENGINES), choices=ENGINES)
    ap.add_argument("--sample", type=int, default=None, help="random files (default: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--match", default=None, help="only files whose name contains this")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per file and engine")
    ap.add_argument("--top", type=int, default=15, help="errors listed per engine")
    ap.add_argument("--jsonl", default=None, help="write per-file results here")
    ap.add_argument(
        "--key-order",
        choices=("any", "schema", "lark-json", "lark-json-rule"),
        default="any",
        help="schema: members in schema order (instances re-ordered to match); "
        "lark-json: schema order, maskpar and llguidance compile the Lark "
        "grammar `start: %%json <schema>` (xgrammar: not run); lark-json-rule: "
        "the same block behind a rule, `start: value` and `value: %%json <schema>`",
    )
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    recs = load_files(args.data, args.sample, args.seed, args.match)
    enc = load_vocab().encode
    if args.key_order.startswith("lark-json"):
        args.engines = [e for e in args.engines if e != "xgrammar"]
    if args.key_order in ("schema", "lark-json", "lark-json-rule"):
        for r in recs:
            for t in r["tests"]:
                t["data"] = reorder(t["data"], r["schema"])
    seqs = [[enc(json.dumps(t["data"], ensure_ascii=False)) for t in r["tests"]] for r in recs]
    print(
        f"MaskBench dev (key order: {args.key_order}): {len(recs)} files, "
        f"{sum(len(s) for s in seqs)} instances, "
        f"{sum(len(x) for s in seqs for x in s)} tokens (Llama-3); "
        f"per-file limit {args.timeout:.0f} s; {versions()}"
    )
    results: dict[str, list[FileResult]] = {}
    for name in args.engines:
        runner = Runner(name, args.timeout, args.key_order)
        t0 = time.time()
        out = []
        for i, (rec, s) in enumerate(zip(recs, seqs)):
            out.append(runner.run(rec, s))
            if (i + 1) % 500 == 0:
                print(f"  {name}: {i + 1}/{len(recs)} files, {time.time() - t0:.0f} s", flush=True)
        runner.stop()
        results[name] = out
        print(f"{name}: {len(recs)} files in {time.time() - t0:.0f} s", flush=True)
    summarize(args.engines, results, len(recs))
    report_errors(args.engines, results, args.top)
    if args.jsonl:
        with open(args.jsonl, "w") as f:
            for name in args.engines:
                for r in results[name]:
                    f.write(
                        json.dumps(
                            {
                                "engine": name,
                                "file": r.file,
                                "outcome": r.outcome,
                                "detail": r.detail,
                                "compile_s": r.compile_s,
                                "tokens": len(r.mask_ns),
                            }
                        )
                        + "\n"
                    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
