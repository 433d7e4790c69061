"""Concurrency under load (issue 22, item 5).

Compiled grammars are shared by any number of threads; a matcher belongs to
one thread at a time. These tests check both halves:

- many Python threads compiling, filling, consuming, rolling back, forking and
  batch-filling over shared compiled grammars (regex, GBNF, Lark, JSON Schema)
  produce exactly what a single-threaded replay of the same random sequence
  produces (every mask row, every acceptance, every count);
- a matcher (or bitmask) used by a second thread while a call holds it raises
  ``RuntimeError`` naming the problem, deterministically: the holding call is
  paused inside a Python callback it makes (``tolist()`` on a drafts object,
  a torch tensor's ``is_cpu``) while the other thread tries;
- nothing deadlocks: every join has a timeout.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import maskpar
from conftest import allowed_ids, new_bitmask

JOIN_TIMEOUT_S = 120.0

# Bytes, then multi-byte pieces so tokens straddle lexemes, then EOS.
PIECES = [
    b'{"',
    b'":',
    b'",',
    b"true",
    b"false",
    b"null",
    b"ab",
    b"ba",
    b"aa",
    b"12",
    b"+1",
    b"*(",
    b") ",
    b"com",
    b".org",
    b"@a",
]
VOCAB = [bytes([i]) for i in range(256)] + PIECES + [b"<eos>"]
EOS = len(VOCAB) - 1

SOURCES: dict[str, tuple[str, Any]] = {
    "regex": ("regex", r"[a-c]{1,6}@[a-z]{1,5}\.(com|org)( [ab]+)*"),
    "gbnf": (
        "gbnf",
        'root ::= expr\nexpr ::= term ("+" term)*\nterm ::= num | "(" expr ")" | term "*" term\n'
        "num ::= [0-9]+",
    ),
    "lark": (
        "lark",
        'start: pair ("," pair)*\npair: WORD ":" (WORD | NUMBER | "true" | "false")\n'
        'WORD: /[a-c]+/\nNUMBER: /[0-9]+/\n%ignore " "',
    ),
    "schema": (
        "schema",
        {
            "type": "object",
            "properties": {
                "a": {"type": "integer", "minimum": -5, "maximum": 500},
                "b": {"type": "array", "items": {"enum": ["ab", "ba", True, None]}},
                "c": {"type": "string", "pattern": "^[ab]{0,4}$"},
            },
            "required": ["a"],
        },
    ),
}


def compile_source(tok: maskpar.Tokenizer, name: str) -> maskpar.Grammar:
    kind, src = SOURCES[name]
    if kind == "regex":
        return maskpar.compile_regex(tok, src)
    if kind == "schema":
        return maskpar.compile_json_schema(tok, src, whitespace="compact")
    return maskpar.compile_grammar(tok, src, kind)


@pytest.fixture(scope="module")
def shared() -> tuple[maskpar.Tokenizer, dict[str, maskpar.Grammar]]:
    tok = maskpar.Tokenizer.from_vocab(VOCAB, [EOS])
    return tok, {name: compile_source(tok, name) for name in SOURCES}


def workload(
    tok: maskpar.Tokenizer, grammars: dict[str, maskpar.Grammar], seed: int, steps: int
) -> list[Any]:
    """A random but seed-determined session over the shared grammars; returns
    everything it observed. Choices follow the observations, so two runs agree
    on the log exactly when every call answered the same."""
    rng = random.Random(seed)
    log: list[Any] = []
    name = rng.choice(sorted(grammars))
    g = grammars[name]
    m = maskpar.Matcher(g)
    bm = new_bitmask(1, g.vocab_size)
    for _ in range(steps):
        op = rng.random()
        if op < 0.45:
            m.fill_next_token_bitmask(bm)
            ids = allowed_ids(bm)
            log.append(("fill", tuple(ids)))
            if ids:
                t = rng.choice(ids)
                log.append(("consume", t, m.consume_token(t), m.is_accepting()))
        elif op < 0.55:
            k = rng.randint(0, m.num_consumed)
            m.rollback(k)
            log.append(("rollback", k, m.num_consumed))
        elif op < 0.62:
            m = m.fork()
            log.append(("fork", m.num_consumed, m.is_terminated()))
        elif op < 0.65:
            m.reset()
            log.append(("reset",))
        elif op < 0.72:
            seq = [rng.randrange(len(VOCAB)) for _ in range(rng.randint(1, 4))]
            log.append(("validate", tuple(seq), m.validate_tokens(seq)))
        elif op < 0.82:
            # Drafts from the mask itself, so some are accepted.
            drafts: list[int] = []
            probe = m.fork()
            for _ in range(rng.randint(0, 4)):
                probe.fill_next_token_bitmask(bm)
                ids = allowed_ids(bm)
                if not ids:
                    break
                drafts.append(rng.choice(ids))
                probe.consume_token(drafts[-1])
            rows = new_bitmask(len(drafts) + 1, g.vocab_size)
            acc = maskpar.fill_next_token_bitmask_par_with_draft_tokens([(m, 0, drafts)], rows)
            log.append(("drafts", tuple(drafts), tuple(acc), rows.tobytes()))
        elif op < 0.87:
            tree_tokens = [0] + [rng.randrange(len(VOCAB)) for _ in range(rng.randint(0, 5))]
            parents = [-1] + [rng.randrange(i) for i in range(1, len(tree_tokens))]
            rows = new_bitmask(len(tree_tokens), g.vocab_size)
            valid = maskpar.fill_next_token_bitmask_par_with_draft_tree(
                [(m, 0, (tree_tokens, parents))], rows
            )
            log.append(("tree", tuple(tree_tokens), tuple(parents), valid, rows.tobytes()))
        elif op < 0.92:
            log.append(("forced", tuple(m.forced_tokens())))
        elif op < 0.95:
            # Compile a fresh copy of one grammar while others use theirs.
            other = rng.choice(sorted(grammars))
            fresh = compile_source(tok, other)
            probe = maskpar.Matcher(fresh)
            probe.fill_next_token_bitmask(bm)
            log.append(("compile", other, fresh.num_states, tuple(allowed_ids(bm))))
        else:
            name = rng.choice(sorted(grammars))
            g = grammars[name]
            m = maskpar.Matcher(g)
            log.append(("switch", name))
    return log


def run_threads(fns: list[Callable[[], Any]]) -> list[Any]:
    """Runs each function in its own thread; fails on an exception or a hang."""
    results: list[Any] = [None] * len(fns)
    errors: list[BaseException] = []
    start = threading.Barrier(len(fns))

    def body(i: int) -> None:
        try:
            start.wait(timeout=JOIN_TIMEOUT_S)
            results[i] = fns[i]()
        except BaseException as e:  # noqa: B036 - reported to the main thread
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=JOIN_TIMEOUT_S)
    hung = [t.name for t in threads if t.is_alive()]
    assert not hung, f"threads did not finish within {JOIN_TIMEOUT_S} s (deadlock?): {hung}"
    if errors:
        raise errors[0]
    return results


@pytest.mark.parametrize("num_threads", [8])
def test_threads_match_single_threaded_replay(shared, num_threads: int) -> None:
    tok, grammars = shared
    seeds = list(range(100, 100 + num_threads))
    steps = 250
    concurrent = run_threads(
        [lambda s=s: workload(tok, grammars, s, steps) for s in seeds]  # type: ignore[misc]
    )
    # The replay runs on freshly compiled grammars: the shared ones' caches,
    # filled concurrently, must hold what a cold grammar computes.
    fresh = {name: compile_source(tok, name) for name in SOURCES}
    for seed, got in zip(seeds, concurrent):
        want = workload(tok, fresh, seed, steps)
        for i, (a, b) in enumerate(zip(got, want)):
            assert a == b, f"seed {seed}, step {i}: threaded {a!r:.300} != replay {b!r:.300}"
        assert len(got) == len(want)


def test_threads_share_batch_fills(shared) -> None:
    """Python threads each calling the parallel batch fill (one rayon pool
    underneath) on the same grammars get what one thread gets."""
    tok, grammars = shared
    rng = random.Random(7)
    batches = []
    for _ in range(6):
        reqs = []
        for _ in range(12):
            g = grammars[rng.choice(sorted(grammars))]
            m = maskpar.Matcher(g)
            bm = new_bitmask(1, g.vocab_size)
            for _ in range(rng.randint(0, 8)):
                m.fill_next_token_bitmask(bm)
                ids = [i for i in allowed_ids(bm) if i != EOS]
                if not ids:
                    break
                m.consume_token(rng.choice(ids))
            reqs.append(m)
        batches.append(reqs)

    def fill_batch(reqs: list[maskpar.Matcher], repeat: int) -> bytes:
        out = b""
        for _ in range(repeat):
            rows = new_bitmask(len(reqs), len(VOCAB))
            maskpar.fill_next_token_bitmask_par([(m, i) for i, m in enumerate(reqs)], rows)
            out = rows.tobytes()
        return out

    # Forks: a matcher may be in one call at a time, so each thread gets its own.
    want = [fill_batch([m.fork() for m in reqs], 1) for reqs in batches]
    got = run_threads(
        [
            lambda reqs=reqs: fill_batch([m.fork() for m in reqs], 20)  # type: ignore[misc]
            for reqs in batches
        ]
    )
    assert got == want


def test_concurrent_compiles_agree(shared) -> None:
    tok, _ = shared
    names = sorted(SOURCES) * 3

    def masks(name: str) -> tuple[str, int, tuple[int, ...]]:
        g = compile_source(tok, name)
        m = maskpar.Matcher(g)
        bm = new_bitmask(1, g.vocab_size)
        m.fill_next_token_bitmask(bm)
        return name, g.num_states, tuple(allowed_ids(bm))

    got = run_threads([lambda n=n: masks(n) for n in names])  # type: ignore[misc]
    assert got == [masks(n) for n in names]


class HoldingDrafts:
    """A drafts object whose ``tolist()`` (called while the batch call holds
    its matchers) lets ``attempt`` run in another thread and waits for it."""

    def __init__(self, attempt: Callable[[], Any]):
        self.attempt = attempt
        self.outcome: BaseException | str | None = None

    def tolist(self) -> list[int]:
        def other() -> None:
            try:
                self.attempt()
                self.outcome = "no error"
            except BaseException as e:  # noqa: B036 - inspected by the test
                self.outcome = e

        t = threading.Thread(target=other, daemon=True)
        t.start()
        t.join(timeout=JOIN_TIMEOUT_S)
        assert not t.is_alive(), "the other thread hung"
        return [ord("a")]


@pytest.mark.parametrize(
    "method",
    ["consume_token", "consume_tokens", "consume_bytes", "rollback", "reset"],
)
def test_matcher_in_use_by_another_thread_raises(shared, method: str) -> None:
    _, grammars = shared
    m = maskpar.Matcher(grammars["regex"])
    assert m.consume_token(ord("a"))
    calls: dict[str, Callable[[], Any]] = {
        "consume_token": lambda: m.consume_token(ord("b")),
        "consume_tokens": lambda: m.consume_tokens([ord("b")]),
        "consume_bytes": lambda: m.consume_bytes(b"b"),
        "rollback": lambda: m.rollback(1),
        "reset": lambda: m.reset(),
    }
    drafts = HoldingDrafts(calls[method])
    rows = new_bitmask(2, len(VOCAB))
    assert maskpar.fill_next_token_bitmask_par_with_draft_tokens([(m, 0, drafts)], rows) == [1]
    assert isinstance(drafts.outcome, RuntimeError), drafts.outcome
    assert "in use by another thread" in str(drafts.outcome)
    # Nothing changed, and the matcher works once the call is over.
    assert m.num_consumed == 1
    assert m.consume_token(ord("b")) and m.num_consumed == 2


def test_matcher_reads_from_another_thread_during_a_call(shared) -> None:
    """Reading calls (fill, validate, fork) share the matcher: they work."""
    _, grammars = shared
    m = maskpar.Matcher(grammars["regex"])
    bm = new_bitmask(1, len(VOCAB))

    def read() -> None:
        m.fill_next_token_bitmask(bm)
        assert m.validate_tokens([ord("a"), ord("b")]) == 2
        assert m.fork().num_consumed == 0

    drafts = HoldingDrafts(read)
    rows = new_bitmask(2, len(VOCAB))
    maskpar.fill_next_token_bitmask_par_with_draft_tokens([(m, 0, drafts)], rows)
    assert drafts.outcome == "no error", drafts.outcome
    assert rows[0].tobytes() == bm[0].tobytes()


def test_matcher_twice_in_concurrent_batch_calls_raises(shared) -> None:
    """A second batch call naming a matcher that a first call holds raises."""
    _, grammars = shared
    m = maskpar.Matcher(grammars["gbnf"])
    other = maskpar.Matcher(grammars["gbnf"])

    def second_call() -> None:
        rows = new_bitmask(2, len(VOCAB))
        maskpar.fill_next_token_bitmask_par_with_draft_tokens([(other, 0, []), (m, 1, [])], rows)

    drafts = HoldingDrafts(second_call)
    maskpar.fill_next_token_bitmask_par_with_draft_tokens(
        [(m, 0, drafts)], new_bitmask(2, len(VOCAB))
    )
    # A fill only reads the matcher, so a second fill may share it.
    assert drafts.outcome == "no error", drafts.outcome

    def mutate() -> None:
        maskpar.Matcher(grammars["gbnf"])  # unrelated work is fine
        m.consume_tokens([ord("1")])

    drafts = HoldingDrafts(mutate)
    maskpar.fill_next_token_bitmask_par_with_draft_tokens(
        [(m, 0, drafts)], new_bitmask(2, len(VOCAB))
    )
    assert isinstance(drafts.outcome, RuntimeError), drafts.outcome


def test_matcher_in_use_during_a_torch_fill(shared) -> None:
    """The single-row fill holds the matcher too: a torch tensor whose
    ``is_cpu`` (read by the fill's buffer checks) lets another thread try to
    consume."""
    torch = pytest.importorskip("torch")
    _, grammars = shared
    m = maskpar.Matcher(grammars["regex"])
    outcome: list[Any] = []

    class Holding(torch.Tensor):
        @property
        def is_cpu(self) -> bool:  # type: ignore[override]
            def other() -> None:
                try:
                    m.consume_token(ord("a"))
                    outcome.append("no error")
                except BaseException as e:  # noqa: B036 - inspected below
                    outcome.append(e)

            t = threading.Thread(target=other, daemon=True)
            t.start()
            t.join(timeout=JOIN_TIMEOUT_S)
            return True

    bm = torch.zeros((1, (len(VOCAB) + 31) // 32), dtype=torch.int32).as_subclass(Holding)
    try:
        m.fill_next_token_bitmask(bm)
    except (TypeError, ValueError):
        pass  # a subclass may be refused; the point is what the other thread saw
    if not outcome:
        pytest.skip("the fill did not read is_cpu from the subclass")
    assert isinstance(outcome[0], RuntimeError), outcome
    assert m.num_consumed == 0


def test_no_deadlock_under_mixed_load(shared) -> None:
    """Fills, batch fills and compiles from many threads at once, with the
    GIL released inside each call, all finish."""
    tok, grammars = shared

    def churn(seed: int) -> int:
        rng = random.Random(seed)
        done = 0
        for _ in range(40):
            g = grammars[rng.choice(sorted(grammars))]
            ms = [maskpar.Matcher(g) for _ in range(rng.randint(1, 6))]
            rows = new_bitmask(len(ms), g.vocab_size)
            maskpar.fill_next_token_bitmask_par(
                [(mm, i) for i, mm in enumerate(ms)], rows, num_threads=rng.randint(1, 4)
            )
            done += int(np.count_nonzero(rows) > 0)
            if rng.random() < 0.1:
                maskpar.compile_json_schema(tok, {"type": "array", "maxItems": rng.randint(1, 9)})
        return done

    assert all(run_threads([lambda s=s: churn(s) for s in range(12)]))  # type: ignore[misc]
