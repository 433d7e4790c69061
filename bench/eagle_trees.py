"""Draft trees as the speculative benchmarks grow them, in SGLang's EAGLE
layout (per node: its first child, its next sibling, its token; -1 for
none; node 0 is the last verified token).

A tree of N nodes is grown breadth first over a text's tokens from a
position, ``BRANCH`` children a node: the first child of a node on the
text's path carries the text's next token; the others carry, from the
caller's RNG, a random id (probability ``RANDOM_TOKEN_PROB``) or a token
from elsewhere in the same text. Used by ``bench_sglang.py``,
``ab_tree_step.py``, ``bench_tree.py`` and ``pgo_workload.py``; imports
nothing beyond the standard library.
"""

from __future__ import annotations

import random
from collections.abc import Callable

BRANCH = 2
RANDOM_TOKEN_PROB = 0.3


def first_child_next_sibling(parents: list[int]) -> tuple[list[int], list[int]]:
    """EAGLE's first-child and next-sibling arrays of a tree given by its
    parents (``parents[0] == -1``, ``parents[i] < i``; children in order)."""
    n = len(parents)
    first, sibling, last = [-1] * n, [-1] * n, {}
    for i in range(1, n):
        p = parents[i]
        if p in last:
            sibling[last[p]] = i
        else:
            first[p] = i
        last[p] = i
    return first, sibling


def grow(
    seq: list[int],
    pos: int,
    n: int,
    rng: random.Random,
    random_id: Callable[[], int],
    elsewhere: Callable[[], int] | None = None,
) -> tuple[list[int], list[int], list[bool]]:
    """``(tokens, parents, on_path)`` of a tree of ``n`` nodes over ``seq``
    from ``pos`` (see the module docs); ``random_id()`` draws the random ids,
    ``elsewhere()`` the tokens from elsewhere in the text (by default any
    of ``seq``'s, drawn from ``rng``)."""
    if elsewhere is None:
        elsewhere = lambda: seq[rng.randrange(len(seq))]  # noqa: E731
    tokens, parents, on_path, depth = [seq[pos - 1] if pos else 0], [-1], [True], [0]
    head = 0
    while len(tokens) < n:
        p, head = head, head + 1
        for c in range(BRANCH):
            if len(tokens) >= n:
                break
            at = pos + depth[p]
            if c == 0 and on_path[p] and at < len(seq):
                tok, true = seq[at], True
            elif rng.random() < RANDOM_TOKEN_PROB:
                tok, true = random_id(), False
            else:
                tok, true = elsewhere(), False
            tokens.append(tok)
            parents.append(p)
            on_path.append(true)
            depth.append(depth[p] + 1)
    return tokens, parents, on_path


def grow_tree(
    seq: list[int], pos: int, n: int, rng: random.Random, vocab: int = 129_280
) -> tuple[list[int], list[int], list[int]]:
    """EAGLE arrays ``(first child, next sibling, token)`` of a tree of
    ``n`` nodes over ``seq`` from ``pos``, random ids below ``vocab``."""
    tokens, parents, _ = grow(seq, pos, n, rng, lambda: rng.randrange(vocab))
    first, sibling = first_child_next_sibling(parents)
    return first, sibling, tokens
