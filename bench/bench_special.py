"""Benchmark: a Lark grammar with special tokens (a Llama-3 style tool call:
free text, a header special token, a call, a closing special token), maskpar
vs llguidance, on the Llama-3 vocabulary, same run.

Per engine: compile time (grammar text to a matcher ready for its first fill,
``--compile-reps`` fresh compiles, mean) and the per-token fill time along a
fixed token sequence that crosses both special tokens (``--reps`` passes with
``reset``; mean and p99 over all tokens of all passes). Every token of the
sequence must be allowed by both engines' masks (checked, untimed).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

GRAMMAR = r"""
start: TEXT <|start_header_id|> call <|end_header_id|>
call: "{\"name\": \"" NAME "\", \"arguments\": {" (arg (", " arg)*)? "}}"
arg: "\"" NAME "\": " (NUMBER | "\"" NAME "\"")
NAME: /[a-z_]{1,20}/
NUMBER: /[0-9]{1,6}/
TEXT: /[^<]+/
"""
EOS = (128001, 128009)
VOCAB_SIZE = 128256
HEADER, END_HEADER = 128006, 128007
LLAMA3_PAT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def sequence(enc: Any) -> list[int]:
    text = enc.encode("Let me look that up with the weather tool for you right away.")
    call = enc.encode('{"name": "get_weather", "arguments": {"city": "paris", "days": 3}}')
    return [*text, HEADER, *call, END_HEADER]


def stats(ns: Sequence[int]) -> str:
    us = sorted(x / 1000 for x in ns)
    p99 = us[min(len(us) - 1, int(len(us) * 0.99))]
    return f"mean {statistics.fmean(us):8.1f} us  p99 {p99:8.1f} us"


def run(
    name: str,
    compile_once: Callable[[], Any],
    fill: Callable[[Any], np.ndarray],
    consume: Callable[[Any, int], None],
    reset: Callable[[Any], None],
    tokens: list[int],
    args: argparse.Namespace,
) -> None:
    compile_once()
    times = []
    for _ in range(args.compile_reps):
        t0 = time.perf_counter_ns()
        m = compile_once()
        times.append(time.perf_counter_ns() - t0)
    fills = []
    for _ in range(args.reps):
        reset(m)
        for t in tokens:
            t0 = time.perf_counter_ns()
            row = fill(m)
            fills.append(time.perf_counter_ns() - t0)
            assert (int(row[t // 32]) >> (t % 32)) & 1, (name, t)
            consume(m, t)
    print(f"{name:10s} compile mean {statistics.fmean(times) / 1e6:7.2f} ms   mask {stats(fills)}")


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--compile-reps", type=int, default=5)
    args = p.parse_args(argv)

    import llguidance
    import llguidance.torch
    import quicktok
    import torch

    import maskpar

    enc = quicktok.get_encoding("llama3")
    tokens = [enc.decode_single_token_bytes(i) for i in range(enc.n_vocab)]
    special = [i for i in range(enc.n_vocab) if enc.is_special_token(i)]
    seq = sequence(enc)
    print(f"{len(seq)} tokens, Llama-3 vocabulary ({VOCAB_SIZE} ids)")

    tok = maskpar.Tokenizer.from_vocab(tokens, list(EOS), special)
    bm = maskpar.allocate_token_bitmask(1, VOCAB_SIZE)

    def mp_fill(m: Any) -> np.ndarray:
        m.fill_next_token_bitmask(bm)
        return bm[0].numpy()

    run(
        "maskpar",
        lambda: maskpar.Matcher(maskpar.compile_grammar(tok, GRAMMAR, syntax="lark")),
        mp_fill,
        lambda m, t: m.consume_token(t),
        lambda m: m.reset(),
        seq,
        args,
    )

    special_set = set(special)
    llt = llguidance.LLTokenizer.from_tiktoken(
        encoder={t: i for i, t in enumerate(tokens) if i not in special_set},
        special_tokens={tokens[i].decode(): i for i in special},
        pattern=LLAMA3_PAT,
        eos_token=EOS[1],
        n_vocab=VOCAB_SIZE,
    )
    lbm = torch.full((1, (VOCAB_SIZE + 31) // 32), -1, dtype=torch.int32)

    def llg_compile() -> Any:
        m = llguidance.LLMatcher(llt, llguidance.LLMatcher.grammar_from_lark(GRAMMAR))
        assert not m.is_error(), m.get_error()
        return m

    def llg_fill(m: Any) -> np.ndarray:
        llguidance.torch.fill_next_token_bitmask(m, lbm, 0)
        return lbm[0].numpy()

    run(
        "llguidance",
        llg_compile,
        llg_fill,
        lambda m, t: m.consume_token(t),
        lambda m: m.reset(),
        seq,
        args,
    )


if __name__ == "__main__":
    main()
