"""Benchmark: context-free grammar token masks, maskpar vs llguidance vs xgrammar,
on the same GBNF text (llama.cpp's json.gbnf, c.gbnf and arithmetic.gbnf) and
the Llama-3 vocabulary (128256 ids, via quicktok).

Method (MaskBench-like, one request, single-threaded fills)
------------------------------------------------------------
Every engine gets the grammar file's text: maskpar ``compile_grammar(tok, text)``,
xgrammar ``GrammarCompiler.compile_grammar(text)`` (its EBNF is llama.cpp's GBNF),
llguidance ``grammar_from("gbnf", text)`` (its GBNF-to-Lark conversion) and
``LLMatcher``. Only if xgrammar's parser rejects the text (it has no empty
alternative: json.gbnf's ``ws ::= | " " | ...``) does it get the same text with
empty alternatives written ``""``, which is printed.

Compile time is "grammar text to a matcher ready for its first fill", so lazy
and eager engines are compared on the same footing: maskpar ``compile_grammar``
+ ``Matcher``; xgrammar ``compile_grammar`` (token-mask cache precomputed here)
+ ``GrammarMatcher``, with a compiler built with ``cache_enabled=False`` so
every repetition compiles afresh; llguidance ``grammar_from`` + ``LLMatcher``
(the lexer and parser are built when the matcher is). After one untimed compile
per engine (imports, one-time setup), each of ``--compile-reps`` repetitions
compiles from scratch, engines rotating.

Texts are realistic documents the grammar accepts (JSON API payloads,
pretty-printed and minified documents with escapes, non-ASCII text, emoji and
exponents; small C programs in c.gbnf's subset; arithmetic lines), tokenized
with Llama-3's real tokenizer, plus EOS. Before timing, every engine must
accept every token and the EOS: a rejection is printed with its context; a text
maskpar rejects is dropped for all engines, and a reference that rejects a text
is left out of that grammar's table (llguidance lexes GBNF terminals greedily,
so it rejects texts that need a shorter match, e.g. every arithmetic.gbnf line:
its ``ident`` ends with ``ws`` that swallows the required ``"\\n"`` ending the line).

Per text and engine: a fresh compile (untimed) and one *cold* pass over the
text, then ``--reps`` *warm* passes with the same matcher after ``reset()``
(warm: lazy caches have seen this very text; xgrammar precomputes at compile
time, so its cold and warm passes should match). The engine order rotates per
pass. At each token ``t`` of a pass:

1. ``fill`` (timed: the "mask" time): the engine's single-matcher fill into
   row 0 of its own torch int32 bitmask (maskpar ``Matcher.fill_next_token_bitmask``,
   llguidance ``llguidance.torch.fill_next_token_bitmask``, xgrammar
   ``GrammarMatcher.fill_next_token_bitmask``);
2. untimed: assert bit ``t`` is set and copy the row for the cross-check;
3. ``consume(t)`` (timed separately; "fill+consume" is the sum of both, what
   MaskBench times).

Times are ``time.perf_counter_ns`` around each Python call, so each includes
the same few hundred ns of call overhead. Reported per grammar: compile ms
(mean, p50), mask us (mean, p50, p99, max) over all tokens of all warm passes
(and of the cold passes, separately), fill+consume us mean, and the ratio
maskpar / best reference for compile, mask mean and mask p99.

Cross-check, every token: each reference's cold-pass rows are compared with
maskpar's. A differing row counts as "EOS-only" when only EOS bits differ
(engines legitimately differ there), otherwise "other"; for the first
differing rows (with distinct differing tokens) the token ids, bytes and which
engines allow them are printed for a human to judge (nothing is asserted).
Each engine's warm rows are also compared with its own cold rows (lazy caches
must not change a mask).

Run: ``python bench/bench_cfg.py`` (see ``--help``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

# Shared with bench_regex.py: the Llama-3 vocabulary from quicktok, constants, helpers.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_regex import (  # noqa: E402
    EOS_IDS,
    VOCAB_SIZE,
    Vocab,
    bits_of,
    llguidance_tokenizer,
    load_vocab,
    maskpar_tokenizer,
    print_aligned,
    versions,
    xgrammar_tokenizer_info,
)

ENGINES = ("maskpar", "llguidance", "xgrammar")
# As in tests/test_cfg.py: llama.cpp's grammars, kept in the repository's test data.
GRAMMAR_DIR = os.environ.get(
    "MASKPAR_GRAMMARS",
    os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "grammars", "llama.cpp"
    )
    + "/grammars",
)
EOS = EOS_IDS[1]  # <|eot_id|>, appended to every text
WORDS = (VOCAB_SIZE + 31) // 32

# ---------------------------------------------------------------------------
# Texts
# ---------------------------------------------------------------------------
# json.gbnf: the root is an object; ws is "", " " or "\n" plus at most 20 spaces or
# tabs; numbers have at most 16 integer digits and an exponent whose digits after
# the first are 1-9 ("1e10" is rejected, "6.02e+23" accepted); escapes are
# \" \\ \b \f \n \r \t \uXXXX (no "\/"); raw control characters and DEL are rejected.

_JSON_API = (
    '{"id": 48213, "name": "Zoë Ångström-Müller", "email": "zoe.angstrom@example.se", '
    '"active": true, "verified": false, "manager": null, "score": -12.75, '
    '"ratio": 6.02e+23, "epsilon": 1.5e-7, "tags": ["admin", "beta-tester", "日本語", "Ελληνικά"], '
    '"address": {"street": "123 Main St., Apt. 4B", "city": "São Paulo", "zip": "01310-100", '
    '"geo": {"lat": -23.5613, "lng": -46.6565}}, '
    '"bio": "She said \\"hello\\" and left.\\nSecond line:\\ttabbed \\\\ backslash, '
    'caf\\u00e9 and a smiley \\ud83d\\ude00.", "history": [{"ts": 1700000000, "event": '
    '"login", "ok": true}, {"ts": 1700003600, "event": "logout", "ok": true}], "empty": {}, '
    '"none": []}'
)

_JSON_CONFIG = json.dumps(
    {
        "name": "maskpar-demo",
        "version": "2.3.1",
        "private": True,
        "description": "A demo service: grammar-constrained decoding for LLMs (v2).",
        "scripts": {
            "build": "cargo build --release && maturin develop",
            "test": "pytest -q tests/ --maxfail=1",
            "lint": "ruff check . && cargo clippy -- -D warnings",
        },
        "engines": {"python": ">=3.9", "rustc": ">=1.74"},
        "server": {
            "host": "0.0.0.0",
            "port": 8080,
            "workers": 4,
            "timeout_s": 30.5,
            "tls": {"enabled": False, "cert": None, "key": None},
            "cors": ["https://example.com", "https://api.example.com"],
        },
        "model": {
            "path": "meta-llama/Meta-Llama-3-8B-Instruct",
            "dtype": "bfloat16",
            "max_tokens": 4096,
            "temperature": 0.7,
            "top_p": 0.95,
            "stop": ["</s>", "\n\n"],
            "logit_bias": {"128001": -100, "198": 2.5},
        },
        "features": [
            {"id": "speculative", "enabled": True, "draft_tokens": 8},
            {"id": "jump_forward", "enabled": False, "draft_tokens": 0},
        ],
    },
    indent=2,
    ensure_ascii=False,
)

_JSON_GEO = json.dumps(
    {
        "type": "FeatureCollection",
        "features": [
            {
                "type": "Feature",
                "properties": {"name": "Zürich HB", "kind": "station", "platforms": 26},
                "geometry": {"type": "Point", "coordinates": [8.540192, 47.378177]},
            },
            {
                "type": "Feature",
                "properties": {"name": "Lago di Como", "kind": "lake", "area_km2": 146},
                "geometry": {
                    "type": "Polygon",
                    "coordinates": [
                        [
                            [9.2571, 46.1702],
                            [9.3968, 45.8506],
                            [9.0735, 45.8109],
                            [9.2571, 46.1702],
                        ]
                    ],
                },
            },
            {
                "type": "Feature",
                "properties": {"name": "Punta Arenas", "kind": "city", "elev_m": -3},
                "geometry": {"type": "Point", "coordinates": [-70.9171, -53.1638]},
            },
        ],
    },
    separators=(",", ":"),
    ensure_ascii=False,
)

_JSON_CHAT = json.dumps(
    {
        "model": "llama-3-8b-instruct",
        "messages": [
            {
                "role": "system",
                "content": "You are a helpful assistant. Answer concisely; use Markdown "
                "when useful.",
            },
            {
                "role": "user",
                "content": 'Translate to French and German: "The quick brown fox jumps over '
                'the lazy dog."\nAlso list 3 emoji for it 🦊🐶✨.',
            },
            {
                "role": "assistant",
                "content": "French: « Le renard brun rapide saute par-dessus le chien "
                "paresseux. »\nGerman: „Der schnelle braune Fuchs springt über den faulen "
                "Hund.“\nEmoji: 🦊 🐕 💨\t(fox, dog, dash)",
            },
        ],
        "usage": {"prompt_tokens": 57, "completion_tokens": 64, "total_tokens": 121},
        "finish_reason": "stop",
        "latency_ms": 842.125,
    },
    indent=1,
    ensure_ascii=False,
)

# c.gbnf: a small C subset. No whitespace is allowed between declarations, after
# ")" / "{" / ";" / "}" (lines end with a // comment to start a new line), around
# +-*/ or relational operators; it is required around "=" and inside "( ... )";
# a call statement needs a space before "("; numbers are decimal integers; only
# one parameter per function.

_C_SUM = (
    "int square(int x){return x*x;}"
    "int main(){int total = 0;int i = 0;while(i<10){total = total+square(i);i = i+1;}"
    "return total;}"
)

_C_FIB = (
    "int fib(int n){// iterative Fibonacci\n"
    "int a = 0;// F(0)\n"
    "int b = 1;// F(1)\n"
    "for(int i = 0; i<n; i = i+1){// advance one step\n"
    "int t = a+b;a = b;b = t;}"
    "return a;}"
    "int main(){/* print the first terms,\n   one per call */"
    "int k = 0;while(k<=20){printf (fib(k));k = k+1;}return 0;}"
)

_C_GCD = (
    "int gcd(int a){/* Euclid's algorithm with a fixed second operand */"
    "int b = 48;while(b!=0){int r = a-( a/b )*b;a = b;b = r;}return a;}"
    "float mean(int n){// average of 1..n\n"
    "float sum = 0;for(int j = 1; j<=n; j = j+1){sum = sum+j;}return sum/n;}"
    "char sign(int v){if(v<0){return -1;}else{if(v==0){return 0;}}return 1;}"
    "int main(){int g = gcd(1071);float m = mean(g);char s = sign(g-m);"
    "printf (g, m, s);return 0;}"
)

# arithmetic.gbnf: lines "expr = term\n"; identifiers are lowercase; no space is
# allowed after an operator or "(" is closed by ")" without one before it.
_ARITH = (
    "a+b*c = result\n"
    "(x1-42)/scale_factor = y\n"
    "total_cost*3+shipping-discount_2024 = grand_total\n"
    "((alpha+beta)*(gamma-delta))/1000 = (ratio)\n"
    "n*(n+1)/2 = triangular_number\n"
)


@dataclass(frozen=True)
class Workload:
    name: str
    file: str
    texts: tuple[tuple[str, str], ...]  # (name, text)


WORKLOADS: tuple[Workload, ...] = (
    Workload(
        "json",
        "json.gbnf",
        (("api", _JSON_API), ("config", _JSON_CONFIG), ("geo", _JSON_GEO), ("chat", _JSON_CHAT)),
    ),
    Workload("c", "c.gbnf", (("sum", _C_SUM), ("fib", _C_FIB), ("gcd", _C_GCD))),
    Workload("arithmetic", "arithmetic.gbnf", (("lines", _ARITH),)),
)


# ---------------------------------------------------------------------------
# Engines: compile to a ready matcher, single-matcher fill and consume
# ---------------------------------------------------------------------------


class Engine:
    name = ""

    def compile(self, text: str) -> Any:
        """Grammar text to a matcher ready for its first fill (the timed compile)."""
        raise NotImplementedError

    def fill(self, m: Any, bitmask: torch.Tensor) -> None:
        raise NotImplementedError

    def consume(self, m: Any, t: int) -> bool:
        raise NotImplementedError

    def reset(self, m: Any) -> None:
        m.reset()

    def begin_grammar(self) -> None:
        """Called before a new grammar's first compile."""

    note = ""

    def error(self, m: Any) -> str | None:
        return None


class MaskparEngine(Engine):
    name = "maskpar"

    def __init__(self, vocab: Vocab, threads: int) -> None:
        import maskpar

        self.mp = maskpar
        maskpar.set_num_threads(threads)
        self.tok = maskpar_tokenizer(vocab)

    def compile(self, text: str) -> Any:
        return self.mp.Matcher(self.mp.compile_grammar(self.tok, text))

    def fill(self, m: Any, bitmask: torch.Tensor) -> None:
        m.fill_next_token_bitmask(bitmask, 0)

    def consume(self, m: Any, t: int) -> bool:
        return m.consume_token(t)


class LLGuidanceEngine(Engine):
    name = "llguidance"

    def __init__(self, vocab: Vocab, threads: int) -> None:
        import llguidance
        import llguidance.torch

        self.llg = llguidance
        self.fill_fn = llguidance.torch.fill_next_token_bitmask
        self.tok = llguidance_tokenizer(vocab)

    def compile(self, text: str) -> Any:
        grammar = self.llg.grammar_from("gbnf", text)
        m = self.llg.LLMatcher(self.tok, grammar, log_level=0)
        if m.is_error():
            raise RuntimeError(f"llguidance: {m.get_error()}")
        return m

    def fill(self, m: Any, bitmask: torch.Tensor) -> None:
        self.fill_fn(m, bitmask, 0)

    def consume(self, m: Any, t: int) -> bool:
        return m.consume_token(t) and not m.is_error()

    def error(self, m: Any) -> str | None:
        return m.get_error() if m.is_error() else None


class XGrammarEngine(Engine):
    name = "xgrammar"

    def __init__(self, vocab: Vocab, threads: int) -> None:
        import xgrammar

        self.xgr = xgrammar
        self.threads = threads
        self.info = xgrammar_tokenizer_info(vocab)
        self.compiler = xgrammar.GrammarCompiler(
            self.info, max_threads=threads, cache_enabled=False
        )
        self.adapted = False
        self.note = ""

    def compile(self, text: str) -> Any:
        if self.adapted:
            text = xgrammar_text(text)
        try:
            return self.xgr.GrammarMatcher(self.compiler.compile_grammar(text))
        except RuntimeError as e:
            if self.adapted or xgrammar_text(text) == text:
                raise
            # Decided on the first compile of a grammar, so every timed compile is alike.
            self.adapted = True
            self.note = f"xgrammar rejects the original text ({str(e).strip()[-70:]!r});"
            self.note += ' it gets empty alternatives written as "" (same language)'
            return self.compile(text)

    def begin_grammar(self) -> None:
        self.adapted = False
        self.note = ""

    def fill(self, m: Any, bitmask: torch.Tensor) -> None:
        m.fill_next_token_bitmask(bitmask, 0)

    def consume(self, m: Any, t: int) -> bool:
        return m.accept_token(t)


def xgrammar_text(text: str) -> str:
    """xgrammar's EBNF parser has no empty alternative (json.gbnf's ``ws ::= | " "``):
    write an empty alternative right after ``::=`` or ``|`` as ``""``."""
    return re.sub(r"(::=|\|)([ \t]*)(?=\|)", r'\1 ""\2', text)


ENGINE_CLASSES: dict[str, type[Engine]] = {
    "maskpar": MaskparEngine,
    "llguidance": LLGuidanceEngine,
    "xgrammar": XGrammarEngine,
}


# ---------------------------------------------------------------------------
# Measurement
# ---------------------------------------------------------------------------


@dataclass
class Walk:
    """One pass of one engine over one text."""

    fill_ns: list[int]
    consume_ns: list[int]
    rows: np.ndarray  # [tokens, WORDS] int32: the mask before each token


@dataclass
class Stats:
    compile_ms: dict[str, list[float]] = field(default_factory=dict)
    cold_fill: dict[str, list[int]] = field(default_factory=dict)
    warm_fill: dict[str, list[int]] = field(default_factory=dict)
    warm_consume: dict[str, list[int]] = field(default_factory=dict)
    cold_consume: dict[str, list[int]] = field(default_factory=dict)
    self_diff: dict[str, int] = field(default_factory=dict)  # warm rows != cold rows


@dataclass
class DiffExample:
    text: str
    pos: int
    prefix: bytes
    ids: list[int]
    n_ids: int
    allowed: dict[str, set[int]]


@dataclass
class DiffCount:
    rows: int = 0
    eos_only: int = 0
    other: int = 0
    mp_only_bits: int = 0  # non-EOS token bits set only in maskpar
    ref_only_bits: int = 0  # non-EOS token bits set only in the reference
    tokens: Counter[tuple[int, str]] = field(default_factory=Counter)  # (id, who allows)
    examples: list[DiffExample] = field(default_factory=list)


def walk(eng: Engine, m: Any, seq: Sequence[int], bitmask: torch.Tensor) -> Walk:
    row = bitmask.numpy()[0]
    row_u = row.view(np.uint32)
    rows = np.empty((len(seq), WORDS), dtype=np.int32)
    fill_ns: list[int] = []
    consume_ns: list[int] = []
    clock = time.perf_counter_ns
    fill = eng.fill
    consume = eng.consume
    for i, t in enumerate(seq):
        t0 = clock()
        fill(m, bitmask)
        t1 = clock()
        if not (int(row_u[t >> 5]) >> (t & 31)) & 1:
            raise AssertionError(f"{eng.name}: token {i} ({t}) not in its own mask")
        rows[i] = row
        t2 = clock()
        ok = consume(m, t)
        t3 = clock()
        if not ok:
            raise AssertionError(f"{eng.name}: token {i} ({t}) rejected: {eng.error(m)}")
        fill_ns.append(t1 - t0)
        consume_ns.append(t3 - t2)
    return Walk(fill_ns, consume_ns, rows)


def accepts(eng: Engine, m: Any, seq: Sequence[int]) -> int | None:
    """None if every token (EOS included) is accepted, else the first rejected index."""
    for i, t in enumerate(seq):
        if not eng.consume(m, t):
            return i
    return None


def compare(
    vocab: Vocab,
    names: list[str],
    walks: dict[str, Walk],
    text_name: str,
    seq: list[int],
    diffs: dict[str, DiffCount],
    max_examples: int,
) -> None:
    if "maskpar" not in walks:
        return
    a = walks["maskpar"].rows
    eos_mask = np.zeros(WORDS, dtype=np.int32)
    for e in EOS_IDS:
        eos_mask[e >> 5] |= np.int32(np.uint32(1 << (e & 31)).view(np.int32))
    for ref in names:
        if ref == "maskpar" or ref not in walks:
            continue
        b = walks[ref].rows
        x = a ^ b
        bad = np.flatnonzero(np.any(x != 0, axis=1))
        dc = diffs.setdefault(ref, DiffCount())
        for j in bad.tolist():
            dc.rows += 1
            xj = x[j] & ~eos_mask
            if not np.any(xj):
                dc.eos_only += 1
                continue
            dc.other += 1
            ids = bits_of(xj)
            in_mp = set(bits_of(a[j] & ~eos_mask).tolist())
            for t in ids.tolist():
                who = "maskpar" if t in in_mp else ref
                dc.tokens[(t, who)] += 1
            dc.mp_only_bits += int(sum(1 for t in ids.tolist() if t in in_mp))
            dc.ref_only_bits += int(sum(1 for t in ids.tolist() if t not in in_mp))
            shown = ids[:8].tolist()
            # Examples: the first rows with distinct sets of differing tokens.
            if len(dc.examples) < max_examples and all(e.ids != shown for e in dc.examples):
                allowed = {
                    n: {t for t in shown if _bit(walks[n].rows[j], t)} for n in names if n in walks
                }
                prefix = b"".join(vocab.tokens[t] for t in seq[:j])
                dc.examples.append(DiffExample(text_name, j, prefix, shown, len(ids), allowed))


def _bit(row: np.ndarray, t: int) -> bool:
    return bool((int(row.view(np.uint32)[t >> 5]) >> (t & 31)) & 1)


def run_workload(
    wl: Workload,
    engines: dict[str, Engine],
    vocab: Vocab,
    args: argparse.Namespace,
) -> tuple[Stats, dict[str, DiffCount], list[str], list[str]]:
    with open(os.path.join(GRAMMAR_DIR, wl.file), encoding="utf-8") as f:
        gtext = f.read()
    names = list(engines)
    stats = Stats()
    notes: list[str] = []

    for eng in engines.values():
        eng.begin_grammar()
        eng.compile(gtext)  # untimed: decides any text adaptation (and warms the imports)
        if eng.note:
            notes.append(f"{eng.name}: {eng.note}")
    # Compile: fresh every repetition, engines rotating.
    for r in range(args.compile_reps):
        order = names[r % len(names) :] + names[: r % len(names)]
        for n in order:
            t0 = time.perf_counter()
            engines[n].compile(gtext)
            stats.compile_ms.setdefault(n, []).append((time.perf_counter() - t0) * 1e3)

    # Acceptance check: every token and the EOS of every text, on every engine. A text
    # maskpar rejects is dropped for all (a maskpar bug if the grammar accepts it); a
    # reference that rejects a text is left out of this grammar, so that all engines
    # in a table are timed on the same tokens.
    seqs: list[tuple[str, list[int]]] = []
    excluded: set[str] = set()
    for tname, text in wl.texts:
        seq = vocab.encode(text) + [EOS]
        keep = True
        for n, eng in engines.items():
            m = eng.compile(gtext)
            bad = accepts(eng, m, seq)
            if bad is None:
                continue
            ctx = b"".join(vocab.tokens[t] for t in seq[:bad])[-60:]
            msg = (
                f"!! {n} REJECTS {wl.name}/{tname} at token {bad}/{len(seq)} "
                f"({seq[bad]} {vocab.tokens[seq[bad]]!r}) after ...{ctx!r}"
            )
            err = eng.error(m)
            if err:
                msg += f": {err.strip().splitlines()[0][:160]}"
            notes.append(msg)
            if n == "maskpar":
                keep = False
                notes.append(f"!! {wl.name}/{tname} dropped for all engines")
            else:
                excluded.add(n)
        if keep:
            seqs.append((tname, seq))
    for n in sorted(excluded):
        notes.append(f"{n} left out of {wl.name} (it rejects a text; see above)")
    names = [n for n in names if n not in excluded]

    bms = {n: torch.full((1, WORDS), -1, dtype=torch.int32) for n in names}
    diffs: dict[str, DiffCount] = {}
    passes = 0
    for tname, seq in seqs:
        matchers = {n: engines[n].compile(gtext) for n in names}  # untimed
        cold: dict[str, Walk] = {}
        for rep in range(1 + args.reps):
            order = names[passes % len(names) :] + names[: passes % len(names)]
            passes += 1
            for n in order:
                eng = engines[n]
                if rep:
                    eng.reset(matchers[n])
                w = walk(eng, matchers[n], seq, bms[n])
                if rep == 0:
                    cold[n] = w
                    stats.cold_fill.setdefault(n, []).extend(w.fill_ns)
                    stats.cold_consume.setdefault(n, []).extend(w.consume_ns)
                else:
                    stats.warm_fill.setdefault(n, []).extend(w.fill_ns)
                    stats.warm_consume.setdefault(n, []).extend(w.consume_ns)
                    nd = int(np.count_nonzero(np.any(w.rows != cold[n].rows, axis=1)))
                    stats.self_diff[n] = stats.self_diff.get(n, 0) + nd
        compare(vocab, names, cold, tname, seq, diffs, args.show_diffs)
    notes.append(
        "tokens incl. EOS: "
        + ", ".join(f"{t}={len(s)}" for t, s in seqs)
        + f" ({sum(len(s) for _, s in seqs)} total)"
    )
    return stats, diffs, notes, names


# ---------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------


def _us(ns: Sequence[int]) -> np.ndarray:
    return np.asarray(ns, dtype=np.float64) / 1e3


def _f(v: float) -> str:
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def print_results(wl: Workload, names: list[str], stats: Stats) -> None:
    head = [
        "engine",
        "compile ms mean",
        "p50",
        "mask us mean",
        "p50",
        "p99",
        "max",
        "fill+consume mean",
        "cold mask mean",
        "cold p99",
        "cold max",
    ]
    lines = [head]
    agg: dict[str, dict[str, float]] = {}
    for n in names:
        c = np.asarray(stats.compile_ms[n])
        wf = _us(stats.warm_fill.get(n, []))
        wc = _us(stats.warm_consume.get(n, []))
        cf = _us(stats.cold_fill.get(n, []))
        if not len(wf):
            continue
        s = {
            "compile": float(c.mean()),
            "compile_p50": float(np.median(c)),
            "mean": float(wf.mean()),
            "p50": float(np.percentile(wf, 50)),
            "p99": float(np.percentile(wf, 99)),
            "max": float(wf.max()),
            "fc": float((wf + wc).mean()),
            "cmean": float(cf.mean()),
            "cp99": float(np.percentile(cf, 99)),
            "cmax": float(cf.max()),
        }
        agg[n] = s
        lines.append(
            [n]
            + [
                _f(s[k])
                for k in ("compile", "compile_p50", "mean", "p50", "p99", "max", "fc")
                + ("cmean", "cp99", "cmax")
            ]
        )
    if len(lines) == 1:
        print("  (no text accepted by every engine)")
        return
    print_aligned(lines, indent="  ")
    refs = [n for n in agg if n != "maskpar"]
    if "maskpar" in agg and refs:
        mp = agg["maskpar"]

        def ratio(key: str) -> str:
            best = min(refs, key=lambda n: agg[n][key])
            return f"{mp[key] / agg[best][key]:.3f} (vs {best})"

        print(
            "  maskpar / best reference: "
            f"compile mean {ratio('compile')}, mask mean {ratio('mean')}, "
            f"mask p99 {ratio('p99')}, fill+consume mean {ratio('fc')}, "
            f"cold mask mean {ratio('cmean')}, cold p99 {ratio('cp99')}"
        )
        target = (
            mp["mean"] <= 0.5 * min(agg[n]["mean"] for n in refs)
            and mp["p99"] <= 0.5 * min(agg[n]["p99"] for n in refs)
            and mp["compile"] <= min(agg[n]["compile"] for n in refs)
        )
        print(
            "  target (warm mask mean and p99 <= 0.5x best ref, compile mean <= best ref): "
            + ("met" if target else "NOT met")
        )
    print(
        "  compile ms per repetition: "
        + "; ".join(f"{n}=" + ",".join(_f(v) for v in stats.compile_ms[n]) for n in names)
    )
    sd = ", ".join(f"{n}={stats.self_diff.get(n, 0)}" for n in names)
    print(f"  warm rows differing from the same engine's cold rows: {sd}")


def print_diffs(vocab: Vocab, names: list[str], diffs: dict[str, DiffCount], total: int) -> None:
    if "maskpar" not in names or len(names) < 2:
        print("  cross-check: needs maskpar and a reference")
        return
    if not diffs or all(d.rows == 0 for d in diffs.values()):
        print(f"  cross-check: all {total} rows identical across engines")
        return
    for ref, d in diffs.items():
        print(
            f"  cross-check vs {ref}: {d.rows}/{total} rows differ from maskpar "
            f"({d.eos_only} EOS-only, {d.other} other; non-EOS token bits set only in "
            f"maskpar={d.mp_only_bits}, only in {ref}={d.ref_only_bits})"
        )
        if d.tokens:
            top = ", ".join(
                f"{t} {vocab.tokens[t]!r} [{who}] x{c}" for (t, who), c in d.tokens.most_common(6)
            )
            print(f"    most frequent differing tokens [allowed by]: {top}")
        for ex in d.examples:
            print(
                f"    {ex.text} token {ex.pos}: prefix ...{ex.prefix[-50:]!r} "
                f"({ex.n_ids} differing non-EOS tokens)"
            )
            for t in ex.ids:
                flags = " ".join(f"{n}={int(t in ex.allowed[n])}" for n in names if n in ex.allowed)
                print(f"        {t:>6} {vocab.tokens[t]!r:<22} {flags}")


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=2, help="warm passes per text (after the cold one)")
    p.add_argument("--compile-reps", type=int, default=5, help="fresh compiles per engine")
    p.add_argument(
        "--threads",
        type=int,
        default=os.cpu_count() or 1,
        help="compile threads (xgrammar max_threads, maskpar set_num_threads); fills are "
        "single-matcher calls",
    )
    p.add_argument("--only", nargs="+", choices=ENGINES, default=list(ENGINES))
    p.add_argument(
        "--grammars",
        nargs="+",
        choices=[w.name for w in WORKLOADS],
        default=[w.name for w in WORKLOADS],
    )
    p.add_argument(
        "--show-diffs",
        type=int,
        default=3,
        help="differing rows shown per reference (distinct token sets)",
    )
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    names = [n for n in ENGINES if n in args.only]
    print(versions())
    print(
        f"cpus={os.cpu_count()} compile threads={args.threads} torch threads="
        f"{torch.get_num_threads()} fills: single matcher, calling thread | reps: 1 cold + "
        f"{args.reps} warm passes per text, {args.compile_reps} compiles per grammar"
    )
    vocab = load_vocab()
    engines: dict[str, Engine] = {}
    for n in names:
        t0 = time.perf_counter()
        engines[n] = ENGINE_CLASSES[n](vocab, args.threads)
        print(f"{n}: tokenizer built in {(time.perf_counter() - t0) * 1e3:.0f} ms")
    if "maskpar" in engines:
        import maskpar

        print(f"maskpar.get_num_threads()={maskpar.get_num_threads()}")

    t_all = time.perf_counter()
    for wl in WORKLOADS:
        if wl.name not in args.grammars:
            continue
        t0 = time.perf_counter()
        stats, diffs, notes, active = run_workload(wl, engines, vocab, args)
        print(f"\n== {wl.file} ({time.perf_counter() - t0:.1f} s)")
        for line in notes:
            print(f"  {line}")
        print_results(wl, active, stats)
        n_rows = len(next(iter(stats.cold_fill.values()), []))
        print_diffs(vocab, active, diffs, n_rows)
    print(f"\ntotal wall time {time.perf_counter() - t_all:.1f} s")
    print(
        "mask = fill only (us per token, warm passes unless marked cold); fill+consume = "
        "fill + consume_token; compile = grammar text to a ready matcher"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
