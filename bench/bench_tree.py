"""Benchmark: draft-tree bitmask fills (Medusa / EAGLE), maskpar vs xgrammar's
``GrammarMatcher.traverse_draft_tree``, on the Llama-3 vocabulary.

Method
------
The six regex constraints and sample texts of ``bench_regex.py``; request ``b``
of a batch of B follows constraint ``b % 6`` and cycles through its texts
(real Llama-3 tokenization plus EOS). At every step each request gets a draft
tree of N nodes in SGLang's EAGLE layout (``retrieve_next_token``,
``retrieve_next_sibling``, ``draft_tokens``; node 0 = the last verified token),
grown breadth first with 2 children per node: the first child of a node on the
"true" path carries the text's next token; every other child carries, with a
fixed-seed RNG, a token from elsewhere in the same text (often grammar-valid,
sometimes not) or, with probability 0.3, a random non-special token (almost
always refused). So trees have valid and refused subtrees, as real drafters
produce.

Timed (``time.perf_counter``), once per step per engine:

* maskpar: one ``fill_next_token_bitmask_par_with_draft_tree`` call for the
  whole batch (torch tensors as given to xgrammar), ``num_threads=T``.
* xgrammar (loop): ``traverse_draft_tree`` called per request into its N rows,
  what serving frameworks (SGLang) do today.
* xgrammar (pool): the same per-request calls spread over a
  ``ThreadPoolExecutor(T)``, in case the call releases the GIL.

The best reference is the faster xgrammar variant. Afterwards (untimed) every
request advances by its accepted true-path tokens plus one bonus token, capped
at the text's end; finished texts restart. Each (B, N) configuration builds
fresh maskpar grammars (empty caches); its first step is reported as "cold".
xgrammar grammars are compiled once (their token-mask caches are precomputed
at compile time) and reused. ``--warmup`` untimed steps follow.

Cross-check on every measured step: node validity (xgrammar's: a node is valid
if its parent is and its token's bit is set in the parent's row) and the rows
of valid nodes must equal maskpar's, except rows after an EOS node (engines
differ there by design).

Run: ``python bench/bench_tree.py`` (see ``--help``).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_regex import (  # noqa: E402
    EOS_IDS,
    SAMPLES,
    VOCAB_SIZE,
    Vocab,
    _compile_brute,
    bits_of,
    judge,
    load_vocab,
    maskpar_tokenizer,
    popcount,
    print_aligned,
    versions,
    xgrammar_tokenizer_info,
)
from eagle_trees import BRANCH, first_child_next_sibling, grow  # noqa: E402

WORDS = (VOCAB_SIZE + 31) // 32


@dataclass
class Tree:
    next_token: torch.Tensor
    next_sibling: torch.Tensor
    tokens: torch.Tensor
    parents: list[int]
    true_depth: int  # nodes on the true path below node 0


def grow_tree(seq: list[int], pos: int, n: int, rng: random.Random, specials: set[int]) -> Tree:
    """A breadth-first tree of `n` nodes over `seq` from position `pos`
    (`eagle_trees.grow`): random ids never special, tokens from elsewhere in
    the text never its last (EOS)."""

    def random_id() -> int:
        tok = rng.randrange(VOCAB_SIZE)
        while tok in specials:
            tok = rng.randrange(VOCAB_SIZE)
        return tok

    tokens, parents, on_path = grow(
        seq, pos, n, rng, random_id, lambda: seq[rng.randrange(len(seq) - 1)]
    )
    depth = [0] * n
    for i in range(1, n):
        depth[i] = depth[parents[i]] + 1
    next_token, next_sibling = first_child_next_sibling(parents)
    as_t = lambda xs: torch.tensor(xs, dtype=torch.int64)  # noqa: E731
    return Tree(
        as_t(next_token),
        as_t(next_sibling),
        as_t(tokens),
        parents,
        max(d for d, t in zip(depth, on_path) if t),
    )


@dataclass
class Request:
    sample: int
    text: int = 0
    pos: int = 0


@dataclass
class Diff:
    """Rows of valid nodes where xgrammar's mask differs from maskpar's."""

    rows: int = 0
    only_maskpar: int = 0
    only_xgrammar: int = 0
    example: str = ""


@dataclass
class Result:
    batch: int
    nodes: int
    times: dict[str, list[float]] = field(default_factory=dict)
    cold: dict[str, float] = field(default_factory=dict)
    rows_compared: int = 0
    rows_differing: int = 0
    diffs: dict[str, Diff] = field(default_factory=dict)
    validity_mismatches: int = 0
    valid_fraction: float = 0.0


def node_path(tree: Tree, node: int) -> list[int]:
    toks = tree.tokens.tolist()
    path = []
    while node > 0:
        path.append(toks[node])
        node = tree.parents[node]
    return path[::-1]


def record_diff(
    res: Result,
    vocab: Vocab,
    req: Request,
    seqs: list[list[list[int]]],
    tree: Tree,
    node: int,
    ours: np.ndarray,
    theirs: np.ndarray,
) -> None:
    """Counts a differing row by sample and direction; the first one per
    sample is judged token by token by brute force (``regex`` partial match)."""
    sample = SAMPLES[req.sample]
    d = res.diffs.setdefault(sample.name, Diff())
    d.rows += 1
    d.only_maskpar += popcount(ours & ~theirs)
    d.only_xgrammar += popcount(theirs & ~ours)
    if d.example:
        return
    a, x = set(bits_of(ours).tolist()), set(bits_of(theirs).tolist())
    ids = seqs[req.sample][req.text][: req.pos] + node_path(tree, node)
    prefix = b"".join(vocab.tokens[t] for t in ids)
    differing = sorted(a ^ x)[:8]
    verdicts = judge(_compile_brute(sample.pattern), vocab, prefix, differing)
    lines = [f"prefix=...{prefix[-40:]!r}"]
    for t, v in zip(differing, verdicts):
        side = "maskpar" if t in a else "xgrammar"
        agrees = "maskpar" if v == (t in a) else "xgrammar"
        lines.append(
            f"{t:>7} {vocab.tokens[t]!r:<14} allowed by {side:<8} brute={v} -> {agrees} agrees"
        )
    d.example = "\n      ".join(lines)


def xgr_validity(bm: np.ndarray, tree: Tree) -> list[bool]:
    tokens = tree.tokens.tolist()
    valid = [True]
    for i in range(1, len(tokens)):
        p, t = tree.parents[i], tokens[i]
        ok = valid[p] and bool((int(bm[p, t // 32]) >> (t % 32)) & 1)
        valid.append(ok)
    return valid


def run_config(
    batch: int,
    nodes: int,
    args: argparse.Namespace,
    seqs: list[list[list[int]]],
    mp: Any,
    mp_tok: Any,
    xgr: Any,
    xgr_grammars: list[Any],
    pool: ThreadPoolExecutor,
    vocab: Vocab,
) -> Result:
    specials = set(vocab.special_ids)
    rng = random.Random(args.seed * 1000 + batch * 7 + nodes)
    mp_grammars = [mp.compile_regex(mp_tok, s.pattern) for s in SAMPLES]
    reqs = [Request(b % len(SAMPLES)) for b in range(batch)]
    mp_ms = [mp.Matcher(mp_grammars[r.sample]) for r in reqs]
    xg_ms = [xgr.GrammarMatcher(xgr_grammars[r.sample]) for r in reqs]
    bm_mp = torch.empty((batch * nodes, WORDS), dtype=torch.int32)
    bm_xg = torch.empty((batch * nodes, WORDS), dtype=torch.int32)
    res = Result(batch, nodes, {k: [] for k in ("maskpar", "xgrammar loop", "xgrammar pool")})
    valid_nodes = total_nodes = 0
    steps = 1 + args.warmup + args.steps
    for step in range(steps):
        trees = [grow_tree(seqs[r.sample][r.text], r.pos, nodes, rng, specials) for r in reqs]
        items = [
            (m, b * nodes, (t.next_token, t.next_sibling, t.tokens))
            for b, (m, t) in enumerate(zip(mp_ms, trees))
        ]
        bm_mp.fill_(0x5A5A5A5A)
        t0 = time.perf_counter()
        valid = mp.fill_next_token_bitmask_par_with_draft_tree(
            items, bm_mp, num_threads=args.threads
        )
        t_mp = time.perf_counter() - t0

        def one(b: int, trees: list[Tree] = trees) -> None:
            t = trees[b]
            xg_ms[b].traverse_draft_tree(
                t.next_token, t.next_sibling, t.tokens, bm_xg[b * nodes : (b + 1) * nodes]
            )

        bm_xg.fill_(0x5A5A5A5A)
        t0 = time.perf_counter()
        for b in range(batch):
            one(b)
        t_loop = time.perf_counter() - t0
        loop_rows = bm_xg.numpy().copy()
        bm_xg.fill_(0x5A5A5A5A)
        t0 = time.perf_counter()
        list(pool.map(one, range(batch)))
        t_pool = time.perf_counter() - t0
        if not np.array_equal(loop_rows, bm_xg.numpy()):
            raise AssertionError("xgrammar's pooled rows differ from its loop rows")

        if step == 0:
            res.cold = {"maskpar": t_mp, "xgrammar loop": t_loop, "xgrammar pool": t_pool}
        elif step > args.warmup:
            for k, v in (("maskpar", t_mp), ("xgrammar loop", t_loop), ("xgrammar pool", t_pool)):
                res.times[k].append(v)
            a, x = bm_mp.numpy(), bm_xg.numpy()
            for b, t in enumerate(trees):
                xv = xgr_validity(x[b * nodes : (b + 1) * nodes], t)
                res.validity_mismatches += xv != valid[b]
                toks = t.tokens.tolist()
                for i in range(nodes):
                    if not valid[b][i] or (i > 0 and toks[i] in EOS_IDS):
                        continue
                    res.rows_compared += 1
                    r = b * nodes + i
                    if not np.array_equal(a[r], x[r]):
                        res.rows_differing += 1
                        record_diff(res, vocab, reqs[b], seqs, t, i, a[r], x[r])
                valid_nodes += sum(valid[b])
                total_nodes += nodes

        # Advance: the accepted true path plus one bonus token.
        for b, (r, t) in enumerate(zip(reqs, trees)):
            seq = seqs[r.sample][r.text]
            take = seq[r.pos : min(len(seq), r.pos + t.true_depth + 1)]
            assert mp_ms[b].consume_tokens(take), "maskpar refused a true token"
            for tok in take:
                assert xg_ms[b].accept_token(tok), "xgrammar refused a true token"
            r.pos += len(take)
            if r.pos >= len(seq):
                r.text = (r.text + 1) % len(seqs[r.sample])
                r.pos = 0
                mp_ms[b].reset()
                xg_ms[b].reset()
    res.valid_fraction = valid_nodes / max(1, total_nodes)
    return res


def ms(v: float) -> str:
    return f"{v * 1e3:.3f}" if v < 10 else f"{v * 1e3:.1f}"


def print_results(results: list[Result], threads: int) -> None:
    names = ["maskpar", "xgrammar loop", "xgrammar pool"]
    print(f"\nms per step (fill call only), T={threads}; ratio = maskpar / best xgrammar variant")
    head = ["B", "N", "rows"]
    for n in names:
        head += [f"{n} mean", f"{n} p50", f"{n} p99"]
    head += ["ratio mean", "ratio p50", "ratio p99"]
    lines = [head]
    worst_mean = worst_p99 = 0.0
    worst_p99_at = ""
    for r in results:
        line = [str(r.batch), str(r.nodes), str(r.batch * r.nodes)]
        stats = {}
        for n in names:
            xs = sorted(r.times[n])
            stats[n] = (
                statistics.fmean(xs),
                xs[len(xs) // 2],
                xs[min(len(xs) - 1, int(0.99 * len(xs)))],
            )
            line += [ms(v) for v in stats[n]]
        ratios = [
            stats["maskpar"][k] / min(stats["xgrammar loop"][k], stats["xgrammar pool"][k])
            for k in range(3)
        ]
        worst_mean = max(worst_mean, ratios[0])
        if ratios[2] > worst_p99:
            worst_p99, worst_p99_at = ratios[2], f"B={r.batch} N={r.nodes}"
        line += [f"{x:.3f}" for x in ratios]
        lines.append(line)
    print_aligned(lines)
    verdict = "met" if worst_mean <= 0.5 else "NOT met"
    print(f"target (mean <= 0.5x the best reference at every size): {verdict}")
    print(f"largest ratios: mean {worst_mean:.3f}, p99 {worst_p99:.3f} ({worst_p99_at})")
    print("\ncold first step (ms) | cross-check: valid rows compared, differing,")
    print("validity mismatches, fraction of grammar-valid nodes")
    for r in results:
        cold = " ".join(f"{n}={ms(r.cold[n])}" for n in names)
        print(
            f"B={r.batch:<2} N={r.nodes:<2}: cold {cold} | rows={r.rows_compared} "
            f"differing={r.rows_differing} validity mismatches={r.validity_mismatches} "
            f"| valid nodes {r.valid_fraction:.2f}"
        )
    diffs: dict[str, Diff] = {}
    for r in results:
        for name, d in r.diffs.items():
            acc = diffs.setdefault(name, Diff(example=d.example))
            acc.rows += d.rows
            acc.only_maskpar += d.only_maskpar
            acc.only_xgrammar += d.only_xgrammar
    if diffs:
        print("\nrows differing from xgrammar per sample (token bits set only in maskpar /")
        print("xgrammar); the first differing row per sample judged by brute force:")
        for name, d in diffs.items():
            print(
                f"  {name:<10} rows={d.rows} maskpar-only={d.only_maskpar} "
                f"xgrammar-only={d.only_xgrammar}\n      {d.example}"
            )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=2, help="threads for every engine")
    p.add_argument("--steps", type=int, default=200, help="measured steps per (B, N)")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps after the cold one")
    p.add_argument("--batch", type=int, nargs="+", default=[1, 8, 32])
    p.add_argument("--nodes", type=int, nargs="+", default=[16, 64])
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    import xgrammar as xgr

    import maskpar as mp

    print(
        f"threads={args.threads} cpus={os.cpu_count()} steps={args.steps} "
        f"warmup={args.warmup} seed={args.seed} branch={BRANCH}"
    )
    print(versions())
    torch.set_num_threads(args.threads)
    vocab = load_vocab()
    seqs = [[vocab.encode(t) + [EOS_IDS[1]] for t in s.texts] for s in SAMPLES]
    mp_tok = maskpar_tokenizer(vocab)
    info = xgrammar_tokenizer_info(vocab)
    compiler = xgr.GrammarCompiler(info, max_threads=args.threads, cache_enabled=False)
    t0 = time.perf_counter()
    xgr_grammars = [compiler.compile_regex(s.pattern) for s in SAMPLES]
    print(f"xgrammar: {len(SAMPLES)} regexes compiled in {(time.perf_counter() - t0):.1f} s")
    results = []
    wall = time.perf_counter()
    with ThreadPoolExecutor(args.threads) as pool:
        for b in args.batch:
            for n in args.nodes:
                t0 = time.perf_counter()
                results.append(
                    run_config(b, n, args, seqs, mp, mp_tok, xgr, xgr_grammars, pool, vocab)
                )
                print(f"  done B={b} N={n} in {time.perf_counter() - t0:.1f} s", flush=True)
    print(f"\nbenchmark wall time {time.perf_counter() - wall:.1f} s")
    print_results(results, args.threads)
    return 1 if any(r.validity_mismatches for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
