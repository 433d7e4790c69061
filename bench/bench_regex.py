"""Benchmark: regex-constrained token bitmasks with speculative drafts, maskpar vs
llguidance vs xgrammar, on the Llama-3 vocabulary (128256 ids, via quicktok).

Method
------
Six realistic regex constraints (email, ISO date-times, phone lines, a JSON-like
record, free text, a markdown list), each with sample texts that full-match it
(checked with ``re``). A text's token sequence is its real Llama-3 tokenization
plus EOS. For every batch size B and draft length K a batch of B requests is
simulated: request ``b`` follows constraint ``b % n_samples`` and cycles through
that constraint's texts. At each step a request's drafts are the next K tokens
of its sequence (truncated at its end); with a fixed-seed RNG one draft is
replaced, with probability ``--reject-prob``, by a random non-special token, so
that rejections occur. Every engine gets the same drafts and thread count T.

Only the fill is timed (``time.perf_counter``), one call per engine per step:

* maskpar: ``fill_next_token_bitmask_par_with_draft_tokens`` (one call for all
  B x (K+1) rows; rows after a rejected draft are written -1).
* llguidance: ``llguidance.torch.fill_next_token_bitmask_par_with_draft_tokens``
  on an ``LLExecutor(num_threads=T)`` (it parallelises across requests; each
  request's chain is sequential inside one task). It rejects empty draft lists,
  so K=0 uses ``fill_next_token_bitmask_par``. It leaves rows after a rejected
  draft untouched, so its bitmask is reset to -1 before each call (untimed).
* xgrammar: what serving frameworks do today, in Python, per request:
  ``fill_next_token_bitmask(row+i)`` then ``accept_token(draft[i])`` until a
  draft is rejected (remaining rows written -1), then ``rollback(accepted)``.
  For K=0 the native parallel ``BatchGrammarMatcher.batch_fill_next_token_bitmask``
  is used instead, xgrammar's best path without drafts.

After the fill, every engine's matcher advances (untimed) by the tokens the
target model would emit: the true tokens up to and including the first wrong
draft (the "bonus" token), capped at the sequence end. Finished requests are
reset and start their next text. The first step of each (B, K) configuration
is reported separately ("cold"): maskpar grammars and llguidance matchers are
built fresh per configuration, so their lazy caches start empty there, while
xgrammar's compiled grammars (precomputed token-mask caches, several seconds
to build for some patterns) are built once and reused; then ``--warmup`` more
untimed steps run before ``--steps`` measured ones.

Correctness is cross-checked on every measured step: each reference's bitmask
rows are compared with maskpar's. Rows after an accepted EOS draft are skipped
(the engines define them differently: EOS-only, untouched, or all-ones).
Disagreements are counted per (reference, sample) with their direction, and for
the first differing row of each the differing token ids are printed with their
bytes and judged by brute force: is ``prefix + token`` still a prefix of some
full match (the ``regex`` module's partial matching; a trailing incomplete UTF-8
sequence is judged by enumerating the code points it can complete to)?

Run: ``python bench/bench_regex.py`` (see ``--help``).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import re
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch

VOCAB_SIZE = 128256
EOS_IDS = (128001, 128009)
# The Llama-3 pre-tokenizer regex (llguidance wants it to build a tiktoken tokenizer).
LLAMA3_PAT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
ENGINES = ("maskpar", "llguidance", "xgrammar")
MAX_DIAG_TOKENS = 8

_DT = (
    r"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]"
    r":[0-5][0-9](\.[0-9]{1,6})?(Z|[+-][0-9]{2}:[0-9]{2})"
)
_PHONE = r"\+[0-9]{1,3} \([0-9]{3}\) [0-9]{3}-[0-9]{4}"


@dataclass(frozen=True)
class Sample:
    name: str
    pattern: str
    texts: tuple[str, ...]


SAMPLES: tuple[Sample, ...] = (
    Sample(
        "email",
        r"[a-z0-9._+-]{1,64}@[a-z0-9-]{1,63}(\.[a-z0-9-]{1,63}){0,4}\.[a-z]{2,10}",
        (
            "jonathan.alexander.smithson+newsletter-2024@mail.engineering-department"
            ".university-of-example.edu",
            "maria_garcia.lopez@research.lab.example.org",
        ),
    ),
    Sample(
        "datetimes",
        _DT + "(, " + _DT + "){0,7}",
        (
            "2024-03-15T14:30:45.123456+05:30, 1999-12-31T23:59:59Z, 2023-07-04T09:05:00.5-04:00",
            "2021-01-01T00:00:00Z, 2022-02-28T12:34:56.789+01:00",
        ),
    ),
    Sample(
        "phones",
        r"(Phone: " + _PHONE + r"\n){1,6}",
        (
            "Phone: +1 (555) 123-4567\nPhone: +44 (207) 946-0958\nPhone: +91 (982) 045-6789\n",
            "Phone: +33 (142) 685-3000\nPhone: +81 (312) 345-6789\n",
        ),
    ),
    Sample(
        "json",
        r'\{"name": "[A-Za-z ]{1,40}", "age": [0-9]{1,3}, '
        r'"email": "[a-z0-9.]+@[a-z]+\.(com|org)"\}',
        (
            '{"name": "Ada Lovelace Byron", "age": 36, "email": "ada.lovelace@analytical.org"}',
            '{"name": "Alan Mathison Turing", "age": 41, "email": "alan.turing@bletchley.com"}',
        ),
    ),
    Sample(
        "sentence",
        r"[A-Za-z ,.'!?]{1,400}",
        (
            "The quick brown fox jumps over the lazy dog, doesn't it? Well, maybe not today! "
            "The dog was awake, alert, and rather fast.",
            "It was the best of times, it was the worst of times, it was the age of wisdom, "
            "it was the age of foolishness.",
        ),
    ),
    Sample(
        "list",
        r"(- [a-z ]{3,30}\n){1,10}",
        (
            "- buy fresh milk\n- call the plumber\n- water the plants\n"
            "- finish quarterly report\n- book train tickets\n",
            "- wash the car\n- read a good book\n- cook dinner for six\n",
        ),
    ),
)


# ---------------------------------------------------------------------------
# Vocabulary
# ---------------------------------------------------------------------------


@dataclass
class Vocab:
    tokens: list[bytes]
    special: dict[str, int]
    encode: Callable[[str], list[int]]

    @property
    def special_ids(self) -> list[int]:
        return sorted(self.special.values())


def load_vocab() -> Vocab:
    import quicktok

    enc = quicktok.get_encoding("llama3")
    assert enc.n_vocab == VOCAB_SIZE, enc.n_vocab
    tokens = [enc.decode_single_token_bytes(i) for i in range(VOCAB_SIZE)]
    special = {tokens[i].decode("utf-8"): i for i in range(VOCAB_SIZE) if enc.is_special_token(i)}
    return Vocab(tokens, special, enc.encode)


# ---------------------------------------------------------------------------
# Engines: same interface, one fill call per step
# ---------------------------------------------------------------------------

FillItems = Sequence[tuple[Any, int, list[int]]]


class Engine:
    name = ""

    def compile(self, pattern: str) -> Any:
        raise NotImplementedError

    def matcher(self, grammar: Any) -> Any:
        raise NotImplementedError

    def prepare(self, bitmask: torch.Tensor) -> None:
        """Untimed work before each fill."""

    def fill(self, items: FillItems, bitmask: torch.Tensor) -> list[int] | None:
        """The timed call: fills rows row..row+len(drafts) of every item and
        returns the accepted-draft counts when the engine reports them."""
        raise NotImplementedError

    def consume(self, m: Any, tokens: Sequence[int]) -> None:
        raise NotImplementedError

    def reset(self, m: Any) -> None:
        m.reset()

    def fresh_per_config(self) -> bool:
        """Whether grammars are rebuilt for every (B, K) configuration."""
        return True


class MaskparEngine(Engine):
    name = "maskpar"

    def __init__(self, vocab: Vocab, threads: int) -> None:
        import maskpar

        self.mp = maskpar
        self.threads = threads
        self.tok = maskpar_tokenizer(vocab)

    def compile(self, pattern: str) -> Any:
        return self.mp.compile_regex(self.tok, pattern)

    def matcher(self, grammar: Any) -> Any:
        return self.mp.Matcher(grammar)

    def fill(self, items: FillItems, bitmask: torch.Tensor) -> list[int] | None:
        return self.mp.fill_next_token_bitmask_par_with_draft_tokens(
            items, bitmask, num_threads=self.threads
        )

    def consume(self, m: Any, tokens: Sequence[int]) -> None:
        ok = m.consume_tokens(list(tokens))
        assert ok, ("maskpar rejected a true token", tokens)


class LLGuidanceEngine(Engine):
    name = "llguidance"

    def __init__(self, vocab: Vocab, threads: int) -> None:
        import llguidance
        import llguidance.torch

        self.llg = llguidance
        self.tok = llguidance_tokenizer(vocab)
        self.executor = llguidance.LLExecutor(num_threads=threads)

    def compile(self, pattern: str) -> Any:
        grammar = self.llg.LLMatcher.grammar_from_regex(pattern)
        probe = self.llg.LLMatcher(self.tok, grammar)  # validates the regex
        if probe.is_error():
            raise RuntimeError(f"llguidance: {probe.get_error()}")
        return grammar

    def matcher(self, grammar: Any) -> Any:
        m = self.llg.LLMatcher(self.tok, grammar, log_level=0)
        if m.is_error():
            raise RuntimeError(f"llguidance: {m.get_error()}")
        return m

    def prepare(self, bitmask: torch.Tensor) -> None:
        bitmask.fill_(-1)  # rows after a rejected draft are left untouched

    def fill(self, items: FillItems, bitmask: torch.Tensor) -> list[int] | None:
        if all(not d for _, _, d in items):
            self.llg.torch.fill_next_token_bitmask_par(
                self.executor, [(m, row) for m, row, _ in items], bitmask
            )
        else:
            assert all(items_d for _, _, items_d in items), "llguidance needs non-empty drafts"
            self.llg.torch.fill_next_token_bitmask_par_with_draft_tokens(
                self.executor, list(items), bitmask
            )
        return None

    def consume(self, m: Any, tokens: Sequence[int]) -> None:
        for t in tokens:
            ok = m.consume_token(t)
            assert ok and not m.is_error(), ("llguidance rejected a true token", t, m.get_error())


def maskpar_tokenizer(vocab: Vocab) -> Any:
    """maskpar's view of the Llama-3 vocabulary."""
    import maskpar

    return maskpar.Tokenizer.from_vocab(
        vocab.tokens,
        eos_token_ids=list(EOS_IDS),
        special_token_ids=vocab.special_ids,
        vocab_size=VOCAB_SIZE,
    )


def llguidance_tokenizer(vocab: Vocab) -> Any:
    """llguidance's view of the Llama-3 vocabulary (a tiktoken-style BPE)."""
    import llguidance

    special_set = set(vocab.special.values())
    return llguidance.LLTokenizer.from_tiktoken(
        encoder={t: i for i, t in enumerate(vocab.tokens) if i not in special_set},
        special_tokens=vocab.special,
        pattern=LLAMA3_PAT,
        eos_token=list(EOS_IDS),
        n_vocab=VOCAB_SIZE,
    )


def xgrammar_tokenizer_info(vocab: Vocab) -> Any:
    """xgrammar's view of the Llama-3 vocabulary (raw bytes, EOS ids)."""
    import xgrammar

    special_set = set(vocab.special.values()) - set(EOS_IDS)
    # Empty strings mark special tokens for xgrammar (never allowed by a grammar).
    encoded = [b"" if i in special_set else t for i, t in enumerate(vocab.tokens)]
    return xgrammar.TokenizerInfo(
        encoded,
        vocab_type=xgrammar.VocabType.RAW,
        vocab_size=VOCAB_SIZE,
        stop_token_ids=list(EOS_IDS),
    )


class XGrammarEngine(Engine):
    name = "xgrammar"

    def __init__(self, vocab: Vocab, threads: int) -> None:
        import xgrammar

        self.xgr = xgrammar
        self.info = xgrammar_tokenizer_info(vocab)
        self.compiler = xgrammar.GrammarCompiler(
            self.info, max_threads=threads, cache_enabled=False
        )
        self.batch = xgrammar.BatchGrammarMatcher(max_threads=threads)

    def compile(self, pattern: str) -> Any:
        return self.compiler.compile_regex(pattern)

    def matcher(self, grammar: Any) -> Any:
        return self.xgr.GrammarMatcher(grammar)

    def fresh_per_config(self) -> bool:
        return False

    def fill(self, items: FillItems, bitmask: torch.Tensor) -> list[int] | None:
        if all(not d for _, _, d in items):
            self.batch.batch_fill_next_token_bitmask(
                [m for m, _, _ in items], bitmask, [row for _, row, _ in items]
            )
            return [0] * len(items)
        return self.fill_loop(items, bitmask)

    def fill_loop(self, items: FillItems, bitmask: torch.Tensor) -> list[int]:
        """Request by request: fill, accept, ..., rollback (vLLM's speculative path)."""
        accepted = []
        for m, row, drafts in items:
            k = len(drafts)
            n = 0
            for i in range(k + 1):
                if m.is_terminated():  # after an EOS draft: vLLM leaves the row all-ones
                    bitmask[row + i].fill_(-1)
                else:
                    m.fill_next_token_bitmask(bitmask, row + i)
                if i == k:
                    break
                if not m.accept_token(drafts[i]):
                    bitmask[row + i + 1 : row + k + 1].fill_(-1)
                    break
                n += 1
            if n:
                m.rollback(n)
            accepted.append(n)
        return accepted

    def consume(self, m: Any, tokens: Sequence[int]) -> None:
        for t in tokens:
            ok = m.accept_token(t)
            assert ok, ("xgrammar rejected a true token", t)


ENGINE_CLASSES: dict[str, type[Engine]] = {
    "maskpar": MaskparEngine,
    "llguidance": LLGuidanceEngine,
    "xgrammar": XGrammarEngine,
}


# ---------------------------------------------------------------------------
# Workload
# ---------------------------------------------------------------------------


@dataclass
class Request:
    sample: int
    seqs: list[list[int]]  # token sequences (text + EOS) of this sample's texts
    text: int = 0
    pos: int = 0
    matchers: dict[str, Any] = field(default_factory=dict)

    @property
    def seq(self) -> list[int]:
        return self.seqs[self.text]


@dataclass
class Diag:
    engine: str
    batch: int
    drafts: int
    sample: str
    prefix: bytes
    tokens: list[tuple[int, bool, bool, bool | None]]  # id, maskpar, ref, brute force
    n_diff: int


@dataclass
class CrossCheck:
    """Mask disagreements with maskpar, per (reference engine, sample), over all configs."""

    rows: dict[tuple[str, str], int] = field(default_factory=dict)
    maskpar_only: dict[tuple[str, str], int] = field(default_factory=dict)
    ref_only: dict[tuple[str, str], int] = field(default_factory=dict)
    diags: dict[tuple[str, str], Diag] = field(default_factory=dict)


@dataclass
class Result:
    batch: int
    drafts: int
    rows: float
    times: dict[str, list[float]]
    cold: dict[str, float]
    diff_rows: dict[str, int]
    compared_rows: int
    skipped_rows: int
    acc_mismatch: dict[str, int]
    acc_rate: float


def popcount(words: np.ndarray) -> int:
    return int(np.unpackbits(np.ascontiguousarray(words).view(np.uint8)).sum())


def bits_of(row: np.ndarray) -> np.ndarray:
    """Allowed token ids of one int32 bitmask row."""
    b = np.unpackbits(row.view(np.uint8), bitorder="little")
    return np.flatnonzero(b)


def _utf8_split(data: bytes) -> tuple[str, bytes] | None:
    """Splits bytes into decoded text and an incomplete trailing UTF-8 sequence;
    None when the bytes can never be valid UTF-8."""
    for cut in range(len(data), max(len(data) - 4, -1), -1):
        try:
            text = data[:cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
        tail = data[cut:]
        if not tail:
            return text, tail
        need = _utf8_len(tail[0])
        if need <= len(tail) or any(c & 0xC0 != 0x80 for c in tail[1:]):
            return None
        return text, tail
    return None


def _utf8_len(lead: int) -> int:
    if 0xC2 <= lead <= 0xDF:
        return 2
    if 0xE0 <= lead <= 0xEF:
        return 3
    if 0xF0 <= lead <= 0xF4:
        return 4
    return 0  # continuation byte or invalid lead: never completes


def brute_allowed(pattern: Any, prefix: bytes, tok: bytes) -> bool:
    """Whether ``prefix + tok`` can still be extended to a full match (``regex``
    partial matching). An incomplete trailing UTF-8 sequence is allowed iff some
    code point it can complete to keeps the match alive (enumerated)."""
    split = _utf8_split(prefix + tok)
    if split is None:
        return False
    text, tail = split
    if not tail:
        return pattern.fullmatch(text, partial=True) is not None
    n = _utf8_len(tail[0])
    payload = tail[0] & (0xFF >> (n + 1))
    lo = payload << (6 * (n - 1))
    hi = lo + (1 << (6 * (n - 1))) - 1
    for cp in range(max(lo, (0x80, 0x800, 0x10000)[n - 2]), min(hi, 0x10FFFF) + 1):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        ch = chr(cp)
        if ch.encode("utf-8").startswith(tail) and pattern.fullmatch(text + ch, partial=True):
            return True
    return False


def judge(pattern: Any, vocab: Vocab, prefix: bytes, ids: list[int]) -> list[bool | None]:
    out: list[bool | None] = []
    specials = set(vocab.special.values())
    for t in ids:
        if t in EOS_IDS:
            try:
                out.append(pattern.fullmatch(prefix.decode("utf-8")) is not None)
            except UnicodeDecodeError:
                out.append(None)
        elif t in specials or t >= len(vocab.tokens):
            out.append(False)
        else:
            out.append(brute_allowed(pattern, prefix, vocab.tokens[t]))
    return out


def make_requests(batch: int, seqs: list[list[list[int]]]) -> list[Request]:
    n = len(seqs)
    return [Request(b % n, seqs[b % n], text=(b // n) % len(seqs[b % n])) for b in range(batch)]


def run_config(
    engines: dict[str, Engine],
    xgr_grammars: list[Any],
    vocab: Vocab,
    seqs: list[list[list[int]]],
    batch: int,
    k: int,
    args: argparse.Namespace,
    check: CrossCheck,
    compile_ms: dict[str, list[float]],
) -> Result:
    rng = random.Random(args.seed * 1000003 + batch * 101 + k)
    grammars: dict[str, list[Any]] = {}
    for name, eng in engines.items():
        if eng.fresh_per_config():
            gs = []
            for s in SAMPLES:
                t0 = time.perf_counter()
                gs.append(eng.compile(s.pattern))
                compile_ms.setdefault(name, []).append((time.perf_counter() - t0) * 1e3)
            grammars[name] = gs
        else:
            grammars[name] = xgr_grammars
    reqs = make_requests(batch, seqs)
    for r in reqs:
        for name, eng in engines.items():
            r.matchers[name] = eng.matcher(grammars[name][r.sample])
    nrows = batch * (k + 1)
    bms = {
        name: torch.full((nrows, (VOCAB_SIZE + 31) // 32), -1, dtype=torch.int32)
        for name in engines
    }
    names = list(engines)
    times: dict[str, list[float]] = {n: [] for n in names}
    cold: dict[str, float] = {}
    diff_rows = dict.fromkeys(names, 0)
    acc_mismatch = dict.fromkeys(names, 0)
    compared = skipped = 0
    rows_filled: list[int] = []
    drafted = accepted_true = 0
    regexes = [_compile_brute(s.pattern) for s in SAMPLES]
    total = 1 + args.warmup + args.steps
    for step in range(total):
        measured = step > args.warmup
        # Drafts: the next K true tokens, one replaced by a random token sometimes.
        drafts_all: list[list[int]] = []
        n_true: list[int] = []
        for r in reqs:
            d = list(r.seq[r.pos : r.pos + k])
            good = len(d)
            if d and rng.random() < args.reject_prob:
                j = rng.randrange(len(d))
                t = rng.randrange(len(vocab.tokens) - len(vocab.special))
                if t != d[j]:
                    d[j] = t
                    good = j
            drafts_all.append(d)
            n_true.append(good)
        rows = [b * (k + 1) for b in range(batch)]
        # Timed fills; the engine order rotates so no engine always runs first.
        order = names[step % len(names) :] + names[: step % len(names)]
        acc: dict[str, list[int] | None] = {}
        for name in order:
            eng = engines[name]
            items = [(r.matchers[name], rows[i], drafts_all[i]) for i, r in enumerate(reqs)]
            eng.prepare(bms[name])
            t0 = time.perf_counter()
            acc[name] = eng.fill(items, bms[name])
            dt = (time.perf_counter() - t0) * 1e3
            if step == 0:
                cold[name] = dt
            elif measured:
                times[name].append(dt)
        if measured:
            rows_filled.append(sum(len(d) + 1 for d in drafts_all))
            drafted += sum(len(d) for d in drafts_all)
            accepted_true += sum(n_true)
            if "maskpar" in engines:
                ref_acc = acc["maskpar"]
                np_bm = {n: bms[n].numpy() for n in names}
                for i, r in enumerate(reqs):
                    d = drafts_all[i]
                    eos_at = next((j for j, t in enumerate(d) if t in EOS_IDS), None)
                    n_rows = len(d) + 1
                    valid = n_rows if eos_at is None else eos_at + 1
                    skipped += n_rows - valid
                    compared += valid
                    for name in names:
                        if name == "maskpar":
                            continue
                        got = acc[name]
                        if got is not None and ref_acc is not None and got[i] != ref_acc[i]:
                            acc_mismatch[name] += 1
                        a = np_bm["maskpar"][rows[i] : rows[i] + valid]
                        b = np_bm[name][rows[i] : rows[i] + valid]
                        bad = np.flatnonzero(np.any(a != b, axis=1))
                        diff_rows[name] += len(bad)
                        if not len(bad):
                            continue
                        key = (name, SAMPLES[r.sample].name)
                        a_bad, b_bad = a[bad], b[bad]
                        check.rows[key] = check.rows.get(key, 0) + len(bad)
                        check.maskpar_only[key] = check.maskpar_only.get(key, 0) + popcount(
                            a_bad & ~b_bad
                        )
                        check.ref_only[key] = check.ref_only.get(key, 0) + popcount(b_bad & ~a_bad)
                        if key not in check.diags:
                            j = int(bad[0])
                            prefix = b"".join(vocab.tokens[t] for t in r.seq[: r.pos] + d[:j])
                            ids = bits_of(np.bitwise_xor(a[j], b[j]))
                            in_mp = set(bits_of(a[j]).tolist())
                            shown = ids[:MAX_DIAG_TOKENS].tolist()
                            brute = judge(regexes[r.sample], vocab, prefix, shown)
                            check.diags[key] = Diag(
                                name,
                                batch,
                                k,
                                key[1],
                                prefix,
                                [
                                    (t, t in in_mp, t not in in_mp, bf)
                                    for t, bf in zip(shown, brute)
                                ],
                                len(ids),
                            )
        # Advance (untimed): true tokens through the first wrong draft, capped at the end.
        for i, r in enumerate(reqs):
            adv = min(n_true[i] + 1, len(r.seq) - r.pos)
            toks = r.seq[r.pos : r.pos + adv]
            for name, eng in engines.items():
                eng.consume(r.matchers[name], toks)
            r.pos += adv
            if r.pos == len(r.seq):
                for name, eng in engines.items():
                    eng.reset(r.matchers[name])
                r.pos = 0
                r.text = (r.text + 1) % len(r.seqs)
    return Result(
        batch,
        k,
        statistics.fmean(rows_filled) if rows_filled else 0.0,
        times,
        cold,
        diff_rows,
        compared,
        skipped,
        acc_mismatch,
        accepted_true / drafted if drafted else 1.0,
    )


def _compile_brute(pattern: str) -> Any:
    import regex

    return regex.compile(pattern)


# ---------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------


def fmt_ms(v: float | None) -> str:
    return "-" if v is None else (f"{v:.3f}" if v < 10 else f"{v:.1f}")


def print_aligned(lines: list[list[str]], indent: str = "") -> None:
    """Prints rows of cells right-aligned in columns, a rule under the first."""
    widths = [max(len(x[i]) for x in lines) for i in range(len(lines[0]))]
    for j, line in enumerate(lines):
        print(indent + "  ".join(c.rjust(w) for c, w in zip(line, widths)))
        if j == 0:
            print(indent + "  ".join("-" * w for w in widths))


def print_table(results: list[Result], names: list[str]) -> None:
    refs = [n for n in names if n != "maskpar"]
    head = ["B", "K", "rows"]
    for n in names:
        head += [f"{n} mean", f"{n} p50"]
    if "maskpar" in names and refs:
        head += ["ratio mean", "ratio p50"]
    lines = [head]
    for r in results:
        row = [str(r.batch), str(r.drafts), f"{r.rows:.1f}"]
        stats: dict[str, tuple[float, float]] = {}
        for n in names:
            ts = r.times[n]
            stats[n] = (statistics.fmean(ts), statistics.median(ts))
            row += [fmt_ms(stats[n][0]), fmt_ms(stats[n][1])]
        if "maskpar" in names and refs:
            best_mean = min(stats[n][0] for n in refs)
            best_p50 = min(stats[n][1] for n in refs)
            row += [
                f"{stats['maskpar'][0] / best_mean:.3f}",
                f"{stats['maskpar'][1] / best_p50:.3f}",
            ]
        lines.append(row)
    print_aligned(lines)


def print_extra(results: list[Result], names: list[str]) -> None:
    refs = [n for n in names if n != "maskpar"]
    print(
        "\ncold first step (ms) | mask rows differing from maskpar / rows compared "
        "(post-EOS rows skipped) | accepted-count mismatches"
    )
    checked = "maskpar" in names and bool(refs)
    for r in results:
        cold = " ".join(f"{n}={fmt_ms(r.cold.get(n))}" for n in names)
        diff = accm = "-"
        if checked:
            diff = " ".join(f"{n}={r.diff_rows[n]}" for n in refs)
            diff += f" / {r.compared_rows} (skipped {r.skipped_rows})"
            # llguidance does not report accepted counts.
            accm = " ".join(f"{n}={r.acc_mismatch[n]}" for n in refs if n != "llguidance") or "-"
        print(
            f"B={r.batch:<2} K={r.drafts}: cold {cold} | diff {diff} | acc {accm} | "
            f"true-draft rate {r.acc_rate:.2f}"
        )


def print_crosscheck(check: CrossCheck) -> None:
    if not check.rows:
        print("\nall compared mask rows identical to maskpar's")
        return
    print(
        "\nmask disagreements per (reference, sample), all configs: rows, token bits set only "
        "in maskpar / only in the reference"
    )
    for key in sorted(check.rows):
        print(
            f"  {key[0]:<10} {key[1]:<9} rows={check.rows[key]:<6} "
            f"maskpar-only={check.maskpar_only[key]:<6} ref-only={check.ref_only[key]}"
        )
    print(
        "first differing row per (reference, sample); brute force = Python `regex` "
        "partial full-match of prefix + token:"
    )
    for key in sorted(check.diags):
        d = check.diags[key]
        print(
            f"  [{d.engine} {d.sample} B={d.batch} K={d.drafts}] prefix=...{d.prefix[-48:]!r} "
            f"({d.n_diff} differing tokens)"
        )
        for t, in_mp, in_ref, bf in d.tokens:
            who = "?" if bf is None else ("maskpar" if bf == in_mp else d.engine)
            print(
                f"      {t:>6} {_tok_repr(t):<18} maskpar={int(in_mp)} {d.engine}={int(in_ref)} "
                f"brute={'-' if bf is None else int(bf)} -> {who} agrees"
            )


_VOCAB_FOR_REPR: list[bytes] = []


def _tok_repr(t: int) -> str:
    return repr(_VOCAB_FOR_REPR[t]) if t < len(_VOCAB_FOR_REPR) else "<pad>"


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=2, help="threads for every engine")
    p.add_argument("--steps", type=int, default=300, help="measured steps per (B, K)")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps after the cold one")
    p.add_argument("--batch", type=int, nargs="+", default=[1, 8, 32])
    p.add_argument("--drafts", type=int, nargs="+", default=[0, 4, 8])
    p.add_argument("--only", nargs="+", choices=ENGINES, default=list(ENGINES))
    p.add_argument("--reject-prob", type=float, default=0.2)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def versions() -> str:
    out = [f"python {platform.python_version()}"]
    for mod in ("maskpar", "llguidance", "xgrammar", "quicktok", "torch", "numpy"):
        try:
            m = __import__(mod)
            v = getattr(m, "__version__", None)
            if v is None:
                from importlib.metadata import version

                v = version({"quicktok": "quicktok-v1"}.get(mod, mod))
            out.append(f"{mod} {v}")
        except Exception as e:  # noqa: BLE001 - informational only
            out.append(f"{mod} ? ({type(e).__name__})")
    return ", ".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    names = [n for n in ENGINES if n in args.only]
    print(
        f"threads={args.threads} cpus={os.cpu_count()} steps={args.steps} "
        f"warmup={args.warmup} reject_prob={args.reject_prob} seed={args.seed}"
    )
    print(versions())

    vocab = load_vocab()
    _VOCAB_FOR_REPR[:] = vocab.tokens
    seqs: list[list[list[int]]] = []
    for s in SAMPLES:
        per = []
        for text in s.texts:
            assert re.fullmatch(s.pattern, text), (s.name, text)
            per.append(vocab.encode(text) + [EOS_IDS[1]])
        seqs.append(per)

    engines: dict[str, Engine] = {}
    for n in names:
        t0 = time.perf_counter()
        engines[n] = ENGINE_CLASSES[n](vocab, args.threads)
        print(f"{n}: tokenizer built in {(time.perf_counter() - t0) * 1e3:.0f} ms")

    # Check every sample on every engine: all its tokens, then EOS, are accepted.
    compile_ms: dict[str, list[float]] = {}
    xgr_grammars: list[Any] = []
    for si, s in enumerate(SAMPLES):
        for n, eng in engines.items():
            t0 = time.perf_counter()
            g = eng.compile(s.pattern)
            ms = (time.perf_counter() - t0) * 1e3
            if n == "xgrammar":
                xgr_grammars.append(g)
                compile_ms.setdefault(n, []).append(ms)
            for seq in seqs[si]:
                m = eng.matcher(g)
                eng.consume(m, seq)  # asserts every token, EOS included, is accepted
    print(
        "samples (tokens incl. EOS): "
        + ", ".join(
            f"{s.name}={'/'.join(str(len(q)) for q in seqs[i])}" for i, s in enumerate(SAMPLES)
        )
    )

    results: list[Result] = []
    check = CrossCheck()
    t_all = time.perf_counter()
    for batch in args.batch:
        for k in args.drafts:
            t0 = time.perf_counter()
            res = run_config(engines, xgr_grammars, vocab, seqs, batch, k, args, check, compile_ms)
            results.append(res)
            print(f"  done B={batch} K={k} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    print(f"\nbenchmark wall time {time.perf_counter() - t_all:.1f} s")
    print(
        "compile ms per pattern (median over builds): "
        + ", ".join(
            f"{n}={statistics.median(v):.2f} (max {max(v):.1f})" for n, v in compile_ms.items()
        )
    )
    print(
        f"\nms per step (fill call only), T={args.threads}; ratio = maskpar / best reference "
        "(<1: maskpar faster)"
    )
    print_table(results, names)
    print_extra(results, names)
    if "maskpar" in names and len(names) > 1:
        print_crosscheck(check)
    return 0


if __name__ == "__main__":
    sys.exit(main())
