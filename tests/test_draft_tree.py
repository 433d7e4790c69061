"""Draft-tree fills (Medusa / EAGLE): every row equals the sequential walk of
its node's path, refused subtrees get -1 rows, matchers are unchanged, and
both tree forms (parent arrays and SGLang's first-child / next-sibling
arrays) describe the same tree."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import maskpar

TOKENS = [b"a", b"b", b"ab", b"ba", b"c", b"1", b"12", b"<eos>", b"<pad>"]
EOS = 7
VOCAB = 70
SENTINEL = 0x5A5A5A5A
SOURCES = [
    ("regex", "(ab|ba)+c?"),
    ("regex", "[ab]*c1+"),
    ("gbnf", 'root ::= e\ne ::= "a" e "b" | "c" | e "1" | e e'),
    ("lark", 'start: x+\nx: "ab" | "ba" "c"? | /1+/'),
]
WORDS = (VOCAB + 31) // 32


@pytest.fixture(scope="module")
def grammars():
    tok = maskpar.Tokenizer.from_vocab(TOKENS, [EOS], [8], vocab_size=VOCAB)
    out = []
    for kind, src in SOURCES:
        if kind == "regex":
            out.append(maskpar.compile_regex(tok, src))
        else:
            out.append(maskpar.compile_grammar(tok, src, syntax=kind))
    return out


def paths(parents):
    """Each node's tokens from the root's first child down to the node."""
    out = [[]]
    for i in range(1, len(parents)):
        out.append(out[parents[i]] + [i])
    return out


def reference_rows(m, tokens, parents):
    """The sequential walk: for each node, a fork consumes the node's path
    one token at a time and fills one row; -1 if any token is refused."""
    rows = np.full((len(tokens), WORDS), -1, dtype=np.int32)
    valid = []
    for i, path in enumerate(paths(parents)):
        f = m.fork()
        ok = all(f.consume_token(tokens[j]) for j in path)
        if ok:
            f.fill_next_token_bitmask(rows, i)
        valid.append(ok)
    return rows, valid


def to_first_child_next_sibling(parents, perm):
    """SGLang's arrays for the tree `parents`, with node i renumbered perm[i]."""
    n = len(parents)
    next_token = [-1] * n
    next_sibling = [-1] * n
    last_child = {}
    for i in range(1, n):
        p = parents[i]
        if p in last_child:
            next_sibling[perm[last_child[p]]] = perm[i]
        else:
            next_token[perm[p]] = perm[i]
        last_child[p] = i
    return next_token, next_sibling


@st.composite
def trees(draw):
    n = draw(st.integers(1, 12))
    parents = [-1] + [draw(st.integers(0, i - 1)) for i in range(1, n)]
    # Mostly tokens that keep the walk alive, some anything.
    tokens = [draw(st.sampled_from([0, 1, 2, 3, 4, 5, 6, EOS, 8, 30]))] + [
        draw(st.sampled_from([0, 1, 2, 3, 4, 5, 6, EOS, 8, 30])) for _ in range(1, n)
    ]
    perm = [0] + draw(st.permutations(list(range(1, n))))
    return tokens, parents, perm


request = st.tuples(
    st.integers(0, len(SOURCES) - 1),
    st.lists(st.sampled_from([0, 1, 2, 3, 4, 5, 6]), max_size=4),  # history
    trees(),
    st.integers(0, 2),  # gap before this request's rows
    st.sampled_from(["parents", "sglang"]),
    st.sampled_from(["list", "numpy", "torch"]),
)


def as_array(xs, how):
    if how == "numpy":
        return np.asarray(xs, dtype=np.int64)
    if how == "torch":
        import torch

        return torch.tensor(xs, dtype=torch.int64)
    return list(xs)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    reqs=st.lists(request, max_size=6),
    copies=st.sampled_from([1, 8]),
    threads=st.sampled_from([1, 2, 3, 8]),
)
def test_tree_fill_equals_sequential_walk(grammars, reqs, copies, threads):
    # Eight copies of the drawn requests make calls of 48 rows and more, which
    # bring the pool's threads in for 48 masks or more, and for the walks
    # from 128 nodes (rust/batch.rs, ALONE_BELOW_ROWS; rust/treefill.rs,
    # WALK_ALONE_NODES).
    items, expect, row = [], [], 0
    for gi, hist, (tokens, parents, perm), gap, form, how in reqs * copies:
        m = maskpar.Matcher(grammars[gi])
        m.consume_tokens(hist[: m.validate_tokens(hist)])
        rows, valid = reference_rows(m, tokens, parents)
        row += gap
        n = len(tokens)
        if form == "parents":
            tree = (as_array(tokens, how), as_array(parents, how))
            order = list(range(n))
        else:
            nt, ns = to_first_child_next_sibling(parents, perm)
            renumbered = [0] * n
            for i in range(n):
                renumbered[perm[i]] = tokens[i]
            tree = (as_array(nt, how), as_array(ns, how), as_array(renumbered, how))
            order = perm  # node i of the reference is row perm[i]
        items.append((m, row, tree))
        expect.append((row, rows, valid, order))
        row += n
    total = row + 1
    bm = np.full((total, WORDS), SENTINEL, dtype=np.int32)
    before = [(m.num_consumed, m.is_accepting(), m.forced_tokens()) for m, _, _ in items]
    got = maskpar.fill_next_token_bitmask_par_with_draft_tree(items, bm, num_threads=threads)
    covered = np.zeros(total, dtype=bool)
    for (r, rows, valid, order), got_valid in zip(expect, got):
        assert len(got_valid) == len(valid)
        for i, j in enumerate(order):
            assert got_valid[j] == valid[i]
            assert np.array_equal(bm[r + j], rows[i]), f"node {i} (row {r + j})"
            covered[r + j] = True
    assert (bm[~covered] == SENTINEL).all()
    after = [(m.num_consumed, m.is_accepting(), m.forced_tokens()) for m, _, _ in items]
    assert after == before


@st.composite
def large_trees(draw, pool):
    """One tree of 48-160 nodes over tokens from `pool`."""
    n = draw(st.integers(48, 160))
    parents = [-1] + [draw(st.integers(max(0, i - 4), i - 1)) for i in range(1, n)]
    tokens = [0] + [draw(st.sampled_from(pool)) for _ in range(1, n)]
    return tokens, parents


# "alive": `[ab]*c1+` reads a, b, ab and ba after each other, so every node
# needs a mask; "mixed": tokens as `trees` draws them, most rows all ones.
LARGE_TREES = {
    "alive": (st.just(1), large_trees([0, 1, 2, 3])),
    "mixed": (
        st.integers(0, len(SOURCES) - 1),
        large_trees([0, 1, 2, 3, 4, 5, 6, EOS, 8, 30]),
    ),
}


@pytest.mark.parametrize("kind", sorted(LARGE_TREES))
def test_one_large_tree_fill_equals_sequential_walk(grammars, kind):
    # One request of 48 rows or more: the walk is the caller's, and pool
    # threads may join for the rows only when 48 or more need a mask, once
    # the caller's rows turn out slow (rust/treefill.rs, fill_walks_in_order):
    # "alive" trees are above that line, "mixed" ones mostly below.
    grammar_index, tree_strategy = LARGE_TREES[kind]

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(tree=tree_strategy, gi=grammar_index, threads=st.sampled_from([2, 8]))
    def check(tree, gi, threads):
        tokens, parents = tree
        m = maskpar.Matcher(grammars[gi])
        rows, valid = reference_rows(m, tokens, parents)
        if kind == "alive":
            assert all(valid)
        bm = np.full((len(tokens) + 1, WORDS), SENTINEL, dtype=np.int32)
        got = maskpar.fill_next_token_bitmask_par_with_draft_tree(
            [(m, 1, (tokens, parents))], bm, num_threads=threads
        )
        assert got == [valid]
        assert (bm[0] == SENTINEL).all()
        for i in range(len(tokens)):
            assert np.array_equal(bm[1 + i], rows[i]), f"node {i}"
        assert m.num_consumed == 0

    check()


def test_refused_subtree_rows_are_minus_one(grammars):
    m = maskpar.Matcher(grammars[0])  # (ab|ba)+c?
    #       0
    #   ab(1)   c(2)   <- "c" is refused at the start
    #   c(3)    ab(4)
    #  EOS(5)
    tokens = [99, 2, 4, 4, 2, EOS]
    parents = [-1, 0, 0, 1, 2, 3]
    bm = np.zeros((6, WORDS), dtype=np.int32)
    valid = maskpar.fill_next_token_bitmask_par_with_draft_tree([(m, 0, (tokens, parents))], bm)
    assert valid == [[True, True, False, True, False, True]]
    assert (bm[2] == -1).all() and (bm[4] == -1).all()
    eos_only = np.zeros(WORDS, dtype=np.int32)
    eos_only[EOS // 32] = 1 << EOS
    assert np.array_equal(bm[5], eos_only)  # after EOS only EOS
    assert m.num_consumed == 0


def test_single_node_tree_is_a_plain_fill(grammars):
    m = maskpar.Matcher(grammars[2])
    bm = np.zeros((1, WORDS), dtype=np.int32)
    one = np.zeros((1, WORDS), dtype=np.int32)
    assert maskpar.fill_next_token_bitmask_par_with_draft_tree([(m, 0, ([5], [-1]))], bm) == [
        [True]
    ]
    m.fill_next_token_bitmask(one)
    assert np.array_equal(bm, one)


@pytest.mark.parametrize(
    "tree, message",
    [
        (([], []), "at least node 0"),
        (([0, 1], [0, 0]), "parent must be -1"),
        (([0, 1, 2], [-1, 2, 0]), "node 1: parent 2"),
        (([0, 1], [-1]), "differ in length"),
        (([0, VOCAB], [-1, 0]), "node 1: token id 70"),
        (([1, -1, -1], [-1, -1, -1], [0, 0, 0]), "node 2 is not reachable"),
        (([1, -1, -1], [-1, 2, 1], [0, 0, 0]), "reached twice"),
        (([1, -1], [-1, 5], [0, 0]), "retrieve_next_sibling[1] = 5"),
        (([0, 1],), "got 1 elements"),
        (([0, "x"], [-1, 0]), "tokens must be a sequence of ints"),
        ("01", "must be a tuple"),
    ],
)
def test_malformed_trees_raise_before_writing(grammars, tree, message):
    m = maskpar.Matcher(grammars[0])
    ok = maskpar.Matcher(grammars[0])
    bm = np.full((8, WORDS), SENTINEL, dtype=np.int32)
    with pytest.raises((ValueError, TypeError), match=message.replace("[", r"\[")):
        maskpar.fill_next_token_bitmask_par_with_draft_tree(
            [(ok, 0, ([0], [-1])), (m, 2, tree)], bm
        )
    assert (bm == SENTINEL).all()


def test_layout_errors(grammars):
    m1, m2 = maskpar.Matcher(grammars[0]), maskpar.Matcher(grammars[1])
    bm = np.zeros((4, WORDS), dtype=np.int32)
    fill = maskpar.fill_next_token_bitmask_par_with_draft_tree
    with pytest.raises(ValueError, match="overlap"):
        fill([(m1, 0, ([0, 1, 2], [-1, 0, 0])), (m2, 2, ([0], [-1]))], bm)
    with pytest.raises(ValueError, match="do not fit"):
        fill([(m1, 2, ([0, 1, 2], [-1, 0, 1]))], bm)
    with pytest.raises(ValueError, match="same Matcher"):
        fill([(m1, 0, ([0], [-1])), (m1, 1, ([0], [-1]))], bm)
    assert (bm == 0).all()


# ----- SGLang's batch arrays (maskpar._core._fill_eagle_trees) --------------


def sglang_rows(m, tokens, parents):
    """What SGLang's walk writes: the sequential rows, but all ones from an
    accepted EOS down (the walk stops once the grammar has terminated)."""
    rows, valid = reference_rows(m, tokens, parents)
    for i, path in enumerate(paths(parents)):
        if valid[i] and any(tokens[j] == EOS for j in path):
            rows[i] = -1
    return rows


@st.composite
def eagle_batches(draw):
    """[B, N] SGLang arrays; per request a grammar (or none: not listed), a
    history, and now and then a tree maskpar cannot read."""
    n = draw(st.integers(1, 10))
    batch = []
    # Up to 40 trees: calls of 48 masks and more, and walks of 128 nodes and
    # more, bring the pool's threads in.
    for _ in range(draw(st.integers(1, 5)) * draw(st.sampled_from([1, 8]))):
        parents = [-1] + [draw(st.integers(0, i - 1)) for i in range(1, n)]
        tokens = [0] + [
            draw(st.sampled_from([0, 1, 2, 3, 4, 5, 6, EOS, EOS, 8, 30])) for _ in range(1, n)
        ]
        perm = [0] + draw(st.permutations(list(range(1, n))))
        unreadable = n > 1 and draw(st.integers(0, 5)) == 0
        batch.append(
            (
                draw(st.sampled_from([None, 0, 1, 2, 3])),
                draw(st.lists(st.sampled_from([0, 1, 2, 3, 4, 5, 6]), max_size=4)),
                tokens,
                parents,
                perm,
                unreadable,
            )
        )
    return n, batch


def tree_array_as(form, a):
    """``a`` as SGLang might hold it: a numpy array, a CPU tensor (read
    through DLPack), or a tensor DLPack's fast path declines (not
    C-contiguous: its numpy view is read)."""
    if form == "numpy":
        return a
    import torch

    if form == "tensor":
        return torch.from_numpy(a.copy())
    return torch.from_numpy(np.asfortranarray(a))  # same values, column-major


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=eagle_batches(),
    threads=st.sampled_from([1, 2, 3]),
    form=st.sampled_from(["numpy", "tensor", "strided"]),
)
def test_eagle_batch_fill_is_sglangs_walk(grammars, case, threads, form):
    from maskpar import _core

    n, batch = case
    first = np.full((len(batch), n), -1, dtype=np.int64)
    sibling = np.full((len(batch), n), -1, dtype=np.int64)
    tokens = np.zeros((len(batch), n), dtype=np.int64)
    bm = np.full((len(batch) * n, WORDS), SENTINEL, dtype=np.int32)
    items, expect = [], {}
    for i, (gi, hist, toks, parents, perm, unreadable) in enumerate(batch):
        nt, ns = to_first_child_next_sibling(parents, perm)
        for k in range(n):
            tokens[i, perm[k]] = toks[k]
        first[i], sibling[i] = nt, ns
        if unreadable:
            tokens[i, perm[n - 1]] = VOCAB  # outside the vocabulary: SGLang's to walk
        if gi is None:
            continue
        m = maskpar.Matcher(grammars[gi])
        m.consume_tokens(hist[: m.validate_tokens(hist)])
        items.append((m, i))
        rows = sglang_rows(m, toks, parents)
        expect[i] = None if unreadable else np.stack([rows[perm.index(j)] for j in range(n)])
    before = [(m.num_consumed, m.forced_tokens()) for m, _ in items]
    arrays = [tree_array_as(form, a) for a in (first, sibling, tokens)]
    got = _core._fill_eagle_trees(items, *arrays, bm, num_threads=threads)
    assert got == [expect[i] is not None for _, i in items]
    for i in range(len(batch)):
        mine = bm[i * n : (i + 1) * n]
        if expect.get(i) is None:
            assert (mine == SENTINEL).all(), f"request {i}: rows not its to write"
        else:
            assert np.array_equal(mine, expect[i]), f"request {i}"
    assert [(m.num_consumed, m.forced_tokens()) for m, _ in items] == before


def test_eagle_batch_fill_refuses_bad_calls(grammars):
    from maskpar import _core

    m, m2 = maskpar.Matcher(grammars[0]), maskpar.Matcher(grammars[1])
    arrays = [np.array([[1, -1], [1, -1]]), np.array([[-1, -1], [-1, -1]]), np.zeros((2, 2))]
    arrays[2] = arrays[2].astype(np.int64)
    bm = np.full((4, WORDS), SENTINEL, dtype=np.int32)
    for items, message in [
        ([(m, 2)], "index 2 is not a row"),
        ([(m, 1), (m2, 1)], "index 1 appears twice"),
        ([(m, 0), (m, 1)], "same Matcher appears twice"),
        ([(m, -1)], "index"),
    ]:
        with pytest.raises(ValueError, match=message):
            _core._fill_eagle_trees(items, *arrays, bm)
    with pytest.raises(ValueError, match="retrieve_next_sibling has shape"):
        _core._fill_eagle_trees([(m, 0)], arrays[0], arrays[1][:1], arrays[2], bm)
    with pytest.raises(ValueError, match="rows"):
        _core._fill_eagle_trees([(m, 1)], *arrays, bm[:3])  # rows 2..3 do not fit
    with pytest.raises(TypeError, match="retrieve_next_token must be a .* int64"):
        _core._fill_eagle_trees([(m, 0)], arrays[0].astype(np.int32), *arrays[1:], bm)
    torch = pytest.importorskip("torch")
    for wrong in [
        torch.from_numpy(arrays[2].astype(np.int32)),  # int32
        torch.from_numpy(arrays[2][0].copy()),  # one dimension
        torch.zeros((2, 2), dtype=torch.int64, device="meta"),  # no memory
        arrays[2].tolist(),
    ]:
        with pytest.raises(TypeError, match="draft_tokens must be a .* int64"):
            _core._fill_eagle_trees([(m, 0)], *arrays[:2], wrong, bm)
    assert (bm == SENTINEL).all()
    assert _core._fill_eagle_trees([(m, 1)], *arrays, bm) == [True]
    assert (bm[:2] == SENTINEL).all() and not (bm[2:] == SENTINEL).all()
