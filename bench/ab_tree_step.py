"""A/B of two maskpar builds on SGLang's B = 1 tree step, paired in one
process: the measurement for changes of a few percent, which
``bench_sglang.py``'s runs cannot resolve (its B = 1 rows move by 10-20%
with this machine's state from one run to the next).

Method
------
The two builds' extension modules (``_core.abi3.so`` files, e.g. two
``cargo build --release --features python,pyo3/extension-module`` outputs)
are loaded side by side: each into a copy of ``python/maskpar``, the second
copy renamed ``maskpar_ab`` (its own imports rewritten). Every step makes a
fresh grammar of one MaskBench dev schema for each build (and for xgrammar
and llguidance, whose compiles empty the caches as in ``bench_sglang.py``),
advances them to a random position of the schema's instance, grows one
draft tree as ``bench_sglang.py`` does, and times ``_fill_eagle_step`` over
it for each build, cold, with xgrammar's ``traverse_draft_tree`` between
the two calls. Which build compiles first and which runs first alternate
from step to step. The two packages' places are still not alike (in an
A/A run one came out about 2% faster), so every comparison runs twice,
each build in each place, and the ratio reported is the geometric mean of
the two.

Run in the SGLang virtual environment (``bash .ci/sglang.sh`` makes it)::

    .venv-sglang/bin/python bench/ab_tree_step.py BASE.so VARIANT.so

Two mimalloc copies need more static TLS than glibc leaves for modules
loaded later; the script sets ``GLIBC_TUNABLES`` for its child processes.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
PACKAGE = HERE.parent / "python" / "maskpar"
SECOND = "maskpar_ab"
TLS = "glibc.rtld.optional_static_tls=65536"


def make_packages(first_so: str, second_so: str, into: Path) -> None:
    """``into/maskpar`` over ``first_so``, ``into/maskpar_ab`` over ``second_so``."""
    shutil.copytree(PACKAGE, into / "maskpar", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    shutil.copy(first_so, into / "maskpar" / "_core.abi3.so")
    renamed = into / SECOND
    shutil.copytree(PACKAGE, renamed, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    shutil.copy(second_so, renamed / "_core.abi3.so")
    for py in renamed.rglob("*.py"):
        text = py.read_text()
        text = re.sub(r"^(\s*)import maskpar$", rf"\1import {SECOND} as maskpar", text, flags=re.M)
        text = re.sub(r"\bfrom maskpar\b", f"from {SECOND}", text)
        py.write_text(text)


def child(steps: int, nodes: list[int]) -> None:
    """Times both packages' tree step; prints ``{N: [first mean, second mean]}`` in us."""
    sys.path.insert(0, str(HERE))
    import bench_sglang as bs
    import maskpar_ab
    import torch
    from maskpar_ab.integrations import sglang as second

    import maskpar
    from maskpar.integrations import sglang as first

    torch.set_num_threads(1)
    hf = bs.hf_tokenizer()
    backends = {
        "first": first.MaskparGrammarBackend(hf, bs.VOCAB, {bs.EOS}, draft_trees=True),
        "second": second.MaskparGrammarBackend(hf, bs.VOCAB, {bs.EOS}, draft_trees=True),
        "xgrammar": bs.XGrammarGrammarBackend(
            hf, vocab_size=bs.VOCAB, model_eos_token_ids=[bs.EOS]
        ),
        "llguidance": bs.GuidanceBackend(hf, n_vocab=bs.VOCAB, eos_token_ids={bs.EOS}),
    }
    cases = bs.load_cases(hf, {k: backends[k] for k in ("first", "xgrammar")}, 64, 600)
    fills = {
        "first": (maskpar._core._fill_eagle_step, first.MaskparGrammar),
        "second": (maskpar_ab._core._fill_eagle_step, second.MaskparGrammar),
    }
    rng = random.Random(0)
    gc.collect()
    gc.freeze()
    times: dict[int, dict[str, list[float]]] = {n: {"first": [], "second": []} for n in nodes}
    for step in range(steps):
        for n in nodes:
            schema, seq = cases[rng.randrange(len(cases))]
            pos = rng.randrange(len(seq))
            builds = ["first", "second"] if (step // 2) % 2 == 0 else ["second", "first"]
            grammars = {}
            for name in builds + ["xgrammar", "llguidance"]:
                key = ("json", bs.fresh(schema, f"ab {step} {n} {name}"))
                g = backends[name]._init_value_dispatch(key, False)
                for t in seq[:pos]:
                    g.accept_token(t)
                grammars[name] = g
            arrays = [torch.tensor([a], dtype=torch.int64) for a in bs.grow_tree(seq, pos, n, rng)]
            gc.collect()
            order = ["first", "second"] if step % 2 == 0 else ["second", "first"]
            for k, name in enumerate(order):
                if k == 1:
                    xgr = grammars["xgrammar"]
                    mask = xgr.allocate_vocab_mask(bs.VOCAB, n, "cpu")
                    xgr.matcher.traverse_draft_tree(arrays[0][0], arrays[1][0], arrays[2][0], mask)
                fill, grammar_type = fills[name]
                reqs = [SimpleNamespace(grammar=grammars[name])]
                start = time.perf_counter()
                out = fill(reqs, grammar_type, *arrays, None, bs.VOCAB, None, True)
                times[n][name].append((time.perf_counter() - start) * 1e6)
                del out
    means = {n: [statistics.mean(t[k]) for k in ("first", "second")] for n, t in times.items()}
    print(json.dumps(means))


def run(first_so: str, second_so: str, steps: int, nodes: str) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        make_packages(first_so, second_so, Path(tmp))
        env = dict(os.environ, PYTHONPATH=tmp, OPENBLAS_NUM_THREADS="1")
        env["GLIBC_TUNABLES"] = ":".join(filter(None, [env.get("GLIBC_TUNABLES"), TLS]))
        cmd = [sys.executable, "-W", "ignore", __file__, "--child", "--steps", str(steps)]
        out = subprocess.run(cmd + ["--nodes", nodes], env=env, capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"the timing process failed:\n{out.stderr}")
        return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("base", nargs="?", help="the base build's _core.abi3.so")
    ap.add_argument("variant", nargs="?", help="the variant build's _core.abi3.so")
    ap.add_argument("--steps", type=int, default=200, help="steps per tree size and assignment")
    ap.add_argument("--nodes", default="8,16,64")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.steps, [int(n) for n in args.nodes.split(",")])
        return
    if not (args.base and args.variant):
        ap.error("give the base build's and the variant's _core.abi3.so")
    one = run(args.base, args.variant, args.steps, args.nodes)  # the variant as maskpar_ab
    two = run(args.variant, args.base, args.steps, args.nodes)  # the variant as maskpar
    print(f"{args.steps} steps per tree size and assignment; step time in us, variant / base")
    for n in one:
        r1 = one[n][1] / one[n][0]
        r2 = two[n][0] / two[n][1]
        base = (one[n][0] + two[n][1]) / 2
        variant = (one[n][1] + two[n][0]) / 2
        print(
            f"N = {n:>3}: base {base:6.1f}  variant {variant:6.1f}  "
            f"ratio {math.sqrt(r1 * r2):.3f} (as {SECOND} {r1:.3f}, as maskpar {r2:.3f})"
        )


if __name__ == "__main__":
    main()
