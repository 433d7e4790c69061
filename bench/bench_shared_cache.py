"""Benchmark: a long-running server and the lexer cache its grammars share.

A server meets new schemas for as long as it runs. The lexer-only entries its
grammars share (rust/cfg/sharedlex.rs) are bounded (512 MiB, or
``MASKPAR_SHARED_LEX_CACHE_BYTES``); once the bound is reached, a full cache
makes room, so what comes later is still shared.

Method (maskpar only, one thread, Llama-3 vocabulary):

1. ``--schemas`` fresh MaskBench dev-split schemas (fixed-seed shuffle, each
   used once), each compiled and walked along its first valid instance, one
   fill per token, at most 40 tokens: fill mean and worst per block of
   ``--block`` schemas.
2. Then tool-calling requests: ``--tag-requests`` fresh compiles of
   bench_structural_tag.py's tools4 spec, each walked along one of its texts.
   The first such request of the process walks the free text up to the
   trigger (its lexer entries are new); later ones find them shared, if the
   cache kept them. Reported per request: all fills, the first fill, the
   slowest.
3. The cache's stats (``Tokenizer.shared_cache_stats()``).

Run with a small bound to see step 2 after the cache has filled:
``MASKPAR_SHARED_LEX_CACHE_BYTES=16777216 python bench/bench_shared_cache.py``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_serving as serving  # noqa: E402
import bench_structural_tag as stag  # noqa: E402

import maskpar  # noqa: E402


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--schemas", type=int, default=1500)
    p.add_argument("--block", type=int, default=500)
    p.add_argument("--tag-requests", type=int, default=6)
    p.add_argument("--data", default=serving.DEFAULT_DATA)
    args = p.parse_args(argv)

    vocab = stag.load_vocab()
    eng = stag.MaskparEngine(vocab)
    tok = eng.tok
    bitmask = torch.zeros((1, (stag.VOCAB_SIZE + 31) // 32), dtype=torch.int32)
    warm = eng.compile(stag.WARM_UP[0])
    assert stag.walk(eng, warm, vocab.encode(stag.WARM_UP[1]), bitmask) is not None
    bound = os.environ.get("MASKPAR_SHARED_LEX_CACHE_BYTES", "default (512 MiB)")
    print(f"shared lexer cache bound: {bound}; maskpar {maskpar.__version__}, 1 thread")

    schemas = serving.load_schemas(args.data, 0, vocab)
    times: list[float] = []
    walked = 0
    while walked < args.schemas and schemas.cases:
        schema, tokens = schemas.cases.pop()
        try:
            g = maskpar.compile_json_schema(tok, schema)
        except ValueError:
            continue
        m = maskpar.Matcher(g)
        walked += 1
        for t in tokens[:40]:
            t0 = time.perf_counter()
            m.fill_next_token_bitmask(bitmask, 0)
            times.append(time.perf_counter() - t0)
            if not m.consume_token(t):
                break
        if walked % args.block == 0:
            us = np.array(times) * 1e6
            print(
                f"schemas {walked - args.block + 1}-{walked}: fill mean {us.mean():.1f} us, "
                f"worst {us.max() / 1e3:.1f} ms ({len(us)} fills); {tok.shared_cache_stats()}"
            )
            times = []

    wl = stag.WORKLOADS[0]
    texts = [vocab.encode(t) + [stag.EOS_IDS[1]] for t in wl.texts]
    for i in range(args.tag_requests):
        m = eng.compile(wl.spec)
        ns = stag.walk(eng, m, texts[i % len(texts)], bitmask)
        assert ns is not None, "tools4 text refused"
        print(
            f"fresh {wl.name} request {i + 1}: all fills {sum(ns) / 1e3:.0f} us, "
            f"first {ns[0] / 1e3:.0f} us, slowest {max(ns) / 1e3:.0f} us"
        )
    print(f"cache: {tok.shared_cache_stats()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
