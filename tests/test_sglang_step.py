"""The native SGLang tree step (``_core._sglang_tree_step``, what the SGLang
adapter installs as ``spec_utils.generate_token_bitmask``), without SGLang:
its rows against a brute-force oracle (a fork of each node's path asked
about every token), and which cases it hands to the adapter's Python path
(``general``), with what."""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np
import pytest
from test_draft_tree import to_first_child_next_sibling

import maskpar
from maskpar import _core

torch = pytest.importorskip("torch")

TOKENS = [b"a", b"b", b"ab", b"ba", b"c", b"1", b"12", b"<eos>", b"<pad>"]
EOS = 7
VOCAB = 70
WORDS = (VOCAB + 31) // 32
SOURCES = [
    ("regex", "(ab|ba)+c?"),
    ("gbnf", 'root ::= e\ne ::= "a" e "b" | "c" | e "1" | e e'),
    ("lark", 'start: x+\nx: "ab" | "ba" "c"? | /1+/'),
]


class StepGrammar(SimpleNamespace):
    """What the step reads of a request's grammar: its ``matcher``."""


@pytest.fixture(scope="module")
def grammars():
    tok = maskpar.Tokenizer.from_vocab(TOKENS, [EOS], [8], vocab_size=VOCAB)
    return [
        maskpar.compile_regex(tok, src)
        if kind == "regex"
        else maskpar.compile_grammar(tok, src, syntax=kind)
        for kind, src in SOURCES
    ]


def eagle_tree(rng: random.Random, n: int) -> tuple[list[int], list[int], list[int], list[int]]:
    """A random tree of ``n`` nodes in SGLang's EAGLE arrays (first child,
    next sibling, token), and its parents."""
    parents = [-1] + [rng.randrange(i) for i in range(1, n)]
    tokens = [0] + [rng.randrange(len(TOKENS) - 1) for _ in range(1, n)]  # EOS too, no <pad>
    first, sibling = to_first_child_next_sibling(parents, range(n))
    return first, sibling, tokens, parents


def oracle_rows(m: maskpar.Matcher, tokens: list[int], parents: list[int]) -> np.ndarray:
    """SGLang's walk's rows, from consume_token alone: all ones for a node
    the grammar refuses, one past EOS (the walk stops there) and their
    descendants; else the tokens a fork of the node's path consumes."""
    rows = np.full((len(tokens), WORDS), -1, dtype=np.int32)
    bits = rows.view(np.uint32)
    for i in range(len(tokens)):
        path, j = [], i
        while j > 0:
            path.append(tokens[j])
            j = parents[j]
        path.reverse()
        f = m.fork()
        if not all(f.consume_token(t) for t in path) or f.is_terminated():
            continue
        bits[i] = 0
        for t in range(len(TOKENS)):
            if f.fork().consume_token(t):
                bits[i, t // 32] |= np.uint32(1 << (t % 32))
    return rows


def batch(grammars, rng: random.Random, size: int, n: int):
    """``size`` requests, each a fresh matcher advanced a little, with a tree."""
    reqs, trees, parents = [], [], []
    for _ in range(size):
        m = maskpar.Matcher(grammars[rng.randrange(len(grammars))])
        for _ in range(rng.randrange(3)):
            allowed = [t for t in range(len(TOKENS)) if t != EOS and m.fork().consume_token(t)]
            if allowed:
                m.consume_token(rng.choice(allowed))
        first, sibling, tokens, par = eagle_tree(rng, n)
        reqs.append(SimpleNamespace(grammar=StepGrammar(matcher=m)))
        trees.append((first, sibling, tokens))
        parents.append(par)
    arrays = [torch.tensor([t[k] for t in trees], dtype=torch.int64) for k in range(3)]
    return reqs, arrays, parents


def recorder():
    calls = []

    def general(*args):
        calls.append(args)
        return "general's result"

    return calls, general


@pytest.mark.parametrize("seed", range(12))
def test_rows_are_the_oracles(grammars, seed):
    rng = random.Random(seed)
    size, n = [(1, 8), (3, 6), (2, 16)][seed % 3]
    reqs, arrays, parents = batch(grammars, rng, size, n)
    calls, general = recorder()
    got, last = _core._sglang_tree_step(StepGrammar, lambda: False, general, reqs, *arrays, VOCAB)
    assert calls == []  # the common case never leaves the native step
    assert type(got) is torch.Tensor and got.shape == (size * n, WORDS)
    assert last is reqs[-1].grammar
    for i, req in enumerate(reqs):
        want = oracle_rows(req.grammar.matcher, arrays[2][i].tolist(), parents[i])
        assert np.array_equal(got[i * n : (i + 1) * n].numpy(), want), f"request {i}"
        assert req.grammar.matcher.num_consumed <= 2  # left where it was


def test_cuda_goes_to_the_python_step(grammars):
    reqs, arrays, _ = batch(grammars, random.Random(1), 2, 4)
    calls, general = recorder()
    got = _core._sglang_tree_step(StepGrammar, lambda: True, general, reqs, *arrays, VOCAB)
    assert got == "general's result"
    assert calls == [(reqs, *arrays, VOCAB, None, False)]


def test_another_grammar_type_or_no_int_goes_to_the_python_step(grammars):
    reqs, arrays, _ = batch(grammars, random.Random(2), 2, 4)
    reqs[1].grammar = SimpleNamespace(matcher=reqs[1].grammar.matcher)  # not a StepGrammar
    calls, general = recorder()
    assert _core._sglang_tree_step(StepGrammar, lambda: False, general, reqs, *arrays, VOCAB)
    assert calls == [(reqs, *arrays, VOCAB, None, True)]
    reqs, arrays, _ = batch(grammars, random.Random(3), 1, 4)
    calls, general = recorder()
    _core._sglang_tree_step(StepGrammar, lambda: False, general, reqs, *arrays, "70")
    assert calls == [(reqs, *arrays, "70", None, False)]


def test_a_refused_call_goes_to_the_python_step(grammars):
    """A batch maskpar refuses (two requests sharing a matcher: a ValueError
    from the fill) is the Python step's to decide, with nothing done."""
    reqs, arrays, _ = batch(grammars, random.Random(4), 2, 4)
    reqs[1].grammar = StepGrammar(matcher=reqs[0].grammar.matcher)
    calls, general = recorder()
    _core._sglang_tree_step(StepGrammar, lambda: False, general, reqs, *arrays, VOCAB)
    assert calls == [(reqs, *arrays, VOCAB, None, True)]


def test_unread_trees_go_to_the_python_step_with_the_fill(grammars):
    """A tree with a token past the vocabulary is SGLang's walk's: the rest
    is filled, and the Python step gets the fill and the unread indices."""
    rng = random.Random(5)
    reqs, arrays, parents = batch(grammars, rng, 3, 6)
    arrays[2][1, 3] = VOCAB + 5
    calls, general = recorder()
    _core._sglang_tree_step(StepGrammar, lambda: False, general, reqs, *arrays, VOCAB)
    [(*args, done, tried)] = calls
    assert args == [reqs, *arrays, VOCAB] and tried
    rows, unread, last = done
    assert unread == [1] and last is reqs[-1].grammar
    for i in (0, 2):
        want = oracle_rows(reqs[i].grammar.matcher, arrays[2][i].tolist(), parents[i])
        assert np.array_equal(rows[i * 6 : (i + 1) * 6].numpy(), want)
    assert (rows[6:12].numpy() == -1).all()  # all ones, for SGLang's walk to write
