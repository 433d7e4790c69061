"""maskpar.sampling: masked speculative-decoding verification.

Checked against straightforward per-request Python references (masked softmax,
exact acceptance probabilities and output laws, greedy argmax), by large-batch
statistics with fixed seeds, hand-built cases and random invariants, on the CPU
and (when present) CUDA.
"""

from __future__ import annotations

import math
import random
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
sampling = pytest.importorskip("maskpar.sampling")
rejection_sample = sampling.rejection_sample
greedy_verify = sampling.greedy_verify

HAS_CUDA = torch.cuda.is_available()
DEVICES = ["cpu"] + (["cuda"] if HAS_CUDA else [])
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")


# ---------------------------------------------------------------------------
# Independent references (plain Python, one request at a time)


def pack_row(allowed: set[int], words: int) -> list[int]:
    """One bitmask row (signed int32 words) allowing exactly ``allowed``."""
    row = []
    for w in range(words):
        word = sum(1 << (t % 32) for t in allowed if t // 32 == w)
        row.append(word - (1 << 32) if word >= 1 << 31 else word)
    return row


def pack(allowed_rows: list[set[int]], words: int) -> torch.Tensor:
    return torch.tensor([pack_row(a, words) for a in allowed_rows], dtype=torch.int32)


def unpack_row(row: list[int], vocab: int) -> set[int]:
    """Allowed ids of a bitmask row, for logits of width ``vocab``."""
    return {t for t in range(min(vocab, 32 * len(row))) if (row[t // 32] >> (t % 32)) & 1}


def ref_probs(logits: list[float], allowed: set[int] | None, temperature: float) -> list[float]:
    """softmax(logits / temperature) restricted to ``allowed`` (float64)."""
    ok = [(allowed is None or t in allowed) and logits[t] != -math.inf for t in range(len(logits))]
    m = max(logits[t] / temperature for t in range(len(logits)) if ok[t])
    e = [math.exp(logits[t] / temperature - m) if ok[t] else 0.0 for t in range(len(logits))]
    s = sum(e)
    return [x / s for x in e]


def one_hot(t: int, vocab: int) -> list[float]:
    return [1.0 if i == t else 0.0 for i in range(vocab)]


def ref_outcomes(ps: list[list[float]], qs: list[list[float]], n: int) -> dict:
    """Exact law of (num_accepted, emitted token) for one request, drafts drawn
    from ``qs`` (one-hot lists for fixed drafts). Reaching position i has
    probability prod_{j<i} sum_x min(p_j, q_j); rejecting there and emitting y
    has probability max(0, p_i(y) - q_i(y)) times that; otherwise the bonus is
    drawn from p_n."""
    law = {}
    reach = 1.0
    for i in range(n):
        for y, (p, q) in enumerate(zip(ps[i], qs[i])):
            law[(i, y)] = reach * max(0.0, p - q)
        reach *= sum(min(p, q) for p, q in zip(ps[i], qs[i]))
    for y, p in enumerate(ps[n]):
        law[(n, y)] = reach * p
    return law


def ref_greedy(logits, allowed, drafts, n):
    """Per-request greedy verification: (output list, num_accepted)."""
    out = []
    for i in range(n + 1):
        ok = [t for t in range(len(logits[i])) if allowed is None or t in allowed[i]]
        best = max(ok, key=lambda t: (logits[i][t], -t))  # first maximum
        if i < n and drafts[i] == best:
            out.append(best)
            continue
        out.append(best)
        return out, i
    raise AssertionError("unreachable")


def tv_bound(cells: int, samples: int, delta: float = 1e-4) -> float:
    """A bound that the total-variation distance between an empirical law of
    ``samples`` draws over ``cells`` outcomes and the true law exceeds with
    probability < ``delta``: E[TV] <= 1/2 sum_k sqrt(p_k / n) <= 1/2 sqrt(cells / n)
    (Cauchy-Schwarz), and one draw moves TV by <= 1/n, so McDiarmid gives
    P(TV > E[TV] + t) <= exp(-2 n t^2)."""
    return 0.5 * math.sqrt(cells / samples) + math.sqrt(math.log(1 / delta) / (2 * samples))


def tv(counts: list[int], law: list[float]) -> float:
    n = sum(counts)
    return 0.5 * sum(abs(c / n - p) for c, p in zip(counts, law))


def gen(device: str, seed: int) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed)


# ---------------------------------------------------------------------------
# Statistics: emitted tokens follow the masked target law


V_STAT, K_STAT, N_STAT = 12, 3, 20_000

# drafts: per position, "top"/"mid"/"low" = that allowed token by target prob,
# "forbidden" = the unmasked argmax, which the mask forbids; or q="random":
# drafts sampled from random q that puts 30% of its mass on the forbidden argmax.
CASES = {
    "onehot": dict(seed=1, temperature=1.0, drafts=["top", "mid", "forbidden"], n=3),
    "onehot-hot": dict(seed=2, temperature=2.5, drafts=["low", "top", "mid"], n=2),
    "onehot-cold-n0": dict(seed=3, temperature=0.5, drafts=[], n=0),
    "q": dict(seed=4, temperature=1.0, q=True, n=3),
    "q-cold": dict(seed=5, temperature=0.6, q=True, n=2),
}


def build_case(name: str):
    cfg = CASES[name]
    rng = random.Random(cfg["seed"])
    v, k, n, temp = V_STAT, K_STAT, cfg["n"], cfg["temperature"]
    logits = torch.tensor(
        [[rng.gauss(0, 2) for _ in range(v)] for _ in range(k + 1)], dtype=torch.float32
    )
    lg = logits.tolist()
    allowed, ps, qs, drafts = [], [], [], []
    for i in range(k + 1):
        top = max(range(v), key=lambda t: lg[i][t])
        allowed.append(set(rng.sample([t for t in range(v) if t != top], rng.randint(4, 8))))
        ps.append(ref_probs(lg[i], allowed[i], temp))
        if i == n:
            break
        if cfg.get("q"):
            w = [math.exp(rng.gauss(0, 1.5)) for _ in range(v)]
            w[top] = 0.0
            w = [0.7 * x / sum(w) for x in w]
            w[top] = 0.3
            qs.append(w)
        else:
            by_p = sorted(allowed[i], key=lambda t: -ps[i][t])
            rule = cfg["drafts"][i]
            x = {"top": by_p[0], "mid": by_p[len(by_p) // 2], "low": by_p[-1], "forbidden": top}
            drafts.append(x[rule])
            qs.append(one_hot(x[rule], v))
    while len(allowed) < k + 1:
        allowed.append(set())  # unused positions: all-zero mask rows are fine
    return cfg, logits, allowed, ps, qs, drafts


def run_case(name: str, device: str, seed: int = 0):
    cfg, logits, allowed, ps, qs, drafts = build_case(name)
    n, k, v = cfg["n"], K_STAT, V_STAT
    b = N_STAT
    test_gen = torch.Generator().manual_seed(1000 + seed)
    if cfg.get("q"):
        q = torch.tensor(qs + [[1.0 / v] * v] * (k - n), dtype=torch.float32)  # [K, V]
        draft_tokens = torch.stack(
            [torch.multinomial(q[i], b, replacement=True, generator=test_gen) for i in range(k)],
            dim=1,
        )
        draft_probs = q.expand(b, k, v).to(device)
    else:
        draft_tokens = torch.tensor(drafts + [-1] * (k - n)).expand(b, k).clone()
        draft_probs = None
    bitmask = pack(allowed, 1).unsqueeze(0).expand(b, k + 1, 1).contiguous()  # CPU
    out, na = rejection_sample(
        logits.expand(b, k + 1, v).to(device),
        draft_tokens.to(device),
        torch.full((b,), n, dtype=torch.int64, device=device),
        bitmask,
        draft_probs,
        temperature=cfg["temperature"],
        generator=gen(device, seed),
    )
    assert out.device.type == device and na.device.type == device
    return cfg, allowed, ps, qs, draft_tokens, out.cpu(), na.cpu()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(CASES))
def test_emitted_tokens_follow_masked_target(name, device):
    cfg, allowed, ps, qs, drafts, out, na = run_case(name, device)
    n, v, b = cfg["n"], V_STAT, N_STAT
    assert out.shape == (b, K_STAT + 1) and out.dtype == torch.int64 and na.dtype == torch.int64
    assert int(na.min()) >= 0 and int(na.max()) <= n

    # Structure: accepted drafts, the emitted token, then -1; nothing masked.
    pos = torch.arange(K_STAT + 1)
    used = pos <= na.unsqueeze(1)
    assert (out[~used] == -1).all()
    accepted = pos[:K_STAT] < na.unsqueeze(1)
    assert torch.equal(out[:, :K_STAT][accepted], drafts[accepted])
    for i in range(n + 1):
        toks = set(out[used[:, i], i].tolist())
        assert toks <= allowed[i], f"masked token emitted at position {i}"

    # The token at position i, given that drafts 0..i-1 were accepted, ~ p_i.
    for i in range(n + 1):
        rows = na >= i
        m = int(rows.sum())
        if m < 2000:
            continue
        counts = torch.bincount(out[rows, i], minlength=v).tolist()
        assert tv(counts, ps[i]) < tv_bound(v, m), (i, counts, ps[i])

    # Exact joint law of (num_accepted, emitted token).
    law = ref_outcomes(ps, qs, n)
    cells = [(i, y) for i in range(n + 1) for y in range(v)]
    emitted = out.gather(1, na.unsqueeze(1)).squeeze(1)
    counts = torch.bincount(na * v + emitted, minlength=(n + 1) * v).tolist()
    assert tv(counts, [law[c] for c in cells]) < tv_bound(len(cells), b)

    # Acceptance: P(num_accepted >= i) = prod_{j<i} sum_x min(p_j, q_j), within 5 sigma.
    reach = 1.0
    for i in range(n + 1):
        got = float((na >= i).float().mean())
        assert abs(got - reach) <= 5 * math.sqrt(reach * (1 - reach) / b) + 1e-9, (i, got, reach)
        if i < n:
            reach *= sum(min(p, q) for p, q in zip(ps[i], qs[i]))


def test_forbidden_draft_case_is_meaningful():
    """The 'onehot' case's mask forbids the most likely token and its third
    draft; without the mask that draft would be accepted often."""
    cfg, logits, allowed, ps, qs, drafts = build_case("onehot")
    unmasked = ref_probs(logits[2].tolist(), None, 1.0)
    assert drafts[2] not in allowed[2] and unmasked[drafts[2]] == max(unmasked)
    assert unmasked[drafts[2]] > 0.2


def test_deterministic_given_generator():
    a = run_case("q", "cpu", seed=7)
    b = run_case("q", "cpu", seed=7)
    c = run_case("q", "cpu", seed=8)
    assert torch.equal(a[5], b[5]) and torch.equal(a[6], b[6])
    assert not torch.equal(a[5], c[5])


# ---------------------------------------------------------------------------
# Hand-built cases


@pytest.mark.parametrize("device", DEVICES)
def test_p_equals_q_accepts_everything(device):
    v, k, b = 40, 3, 500  # two mask words
    ok = {3, 7, 35, 38}
    bitmask = pack([ok] * (k + 1), 2).repeat(b, 1)  # [B * (K + 1), W]
    logits = torch.zeros(b, k + 1, v, device=device)  # p = 1/4 on ok, exactly
    q = torch.zeros(b, k, v, device=device)
    q[:, :, sorted(ok)] = 0.25
    drafts = torch.tensor(sorted(ok), device=device)[
        torch.randint(0, 4, (b, k), generator=gen(device, 1), device=device)
    ]
    out, na = rejection_sample(logits, drafts, [k] * b, bitmask, q, generator=gen(device, 2))
    assert (na == k).all()
    assert torch.equal(out[:, :k], drafts)
    assert set(out[:, k].tolist()) == ok  # bonus ~ uniform over ok (500 draws)

    # One-hot drafts with p a point mass on each draft: accepted too.
    truth = [5, 33, 5, 39]
    bitmask = pack([{t} for t in truth], 2).repeat(b, 1)
    logits = torch.randn(b, k + 1, v, generator=gen("cpu", 3)).to(device)
    drafts = torch.tensor(truth[:k], device=device).expand(b, k)
    out, na = rejection_sample(logits, drafts, [k] * b, bitmask, generator=gen(device, 4))
    assert (na == k).all() and (out == torch.tensor(truth, device=device)).all()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("with_q", [False, True])
def test_masked_draft_is_rejected(device, with_q):
    v, k, b = 10, 3, 4000
    logits = torch.zeros(k + 1, v)
    logits[1, 6] = 20.0  # the draft at position 1 is by far the likeliest token...
    allowed = [{2}, {0, 1, 4, 9}, set(range(v)), set(range(v))]  # ...but masked
    bitmask = pack(allowed, 1).unsqueeze(0).expand(b, k + 1, 1)
    drafts = torch.tensor([2, 6, 3]).expand(b, k)
    q = None
    if with_q:
        q = torch.zeros(b, k, v)
        q[:, 0, 2] = q[:, 1, 6] = q[:, 2, 3] = 1.0
        q = q.to(device)
    out, na = rejection_sample(
        logits.expand(b, k + 1, v).to(device),
        drafts.to(device),
        torch.full((b,), k, device=device),
        bitmask,
        q,
        generator=gen(device, 5),
    )
    out, na = out.cpu(), na.cpu()
    assert (na == 1).all()
    assert (out[:, 0] == 2).all() and (out[:, 2:] == -1).all()
    assert set(out[:, 1].tolist()) == allowed[1]  # uniform over the allowed tokens


@pytest.mark.parametrize("device", DEVICES)
def test_num_drafts_zero_emits_only_a_bonus_token(device):
    v, k, b = 8, 2, 20_000
    logits = torch.tensor([[0.5, -1.0, 2.0, 0.0, 3.0, 1.0, -2.0, 0.3]] * (k + 1))
    allowed = [{0, 1, 3, 5, 6}, set(), set()]  # forbids the two likeliest tokens
    out, na = rejection_sample(
        logits.expand(b, k + 1, v).to(device),
        torch.full((b, k), -1, device=device),
        torch.zeros(b, dtype=torch.int64, device=device),
        pack(allowed, 1).repeat(b, 1),
        generator=gen(device, 6),
    )
    out, na = out.cpu(), na.cpu()
    assert (na == 0).all() and (out[:, 1:] == -1).all()
    counts = torch.bincount(out[:, 0], minlength=v).tolist()
    assert tv(counts, ref_probs(logits[0].tolist(), allowed[0], 1.0)) < tv_bound(v, b)


TRUTH = [  # the single allowed token per position, per request
    [4, 9, 1, 7, 3],
    [0, 2, 2, 5, 6],
    [8, 8, 8, 8, 8],
    [1, 3, 5, 7, 9],
    [6, 0, 4, 2, 1],
]
DRAFTS = [  # -1 / huge values beyond num_drafts are padding
    [-1, -1, -1, -1],
    [0, 10**9, -1, -1],
    [8, 8, 8, 8],
    [1, 4, 5, -1],  # draft 1 is wrong (masked)
    [6, 0, 4, -7],
]
NUM_DRAFTS = [0, 1, 4, 3, 3]
EXPECTED = [  # accepted drafts + the emitted token, then -1
    ([4, -1, -1, -1, -1], 0),
    ([0, 2, -1, -1, -1], 1),
    ([8, 8, 8, 8, 8], 4),
    ([1, 3, -1, -1, -1], 1),
    ([6, 0, 4, 2, -1], 3),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["3d", "2d"])
@pytest.mark.parametrize("how", ["sample", "sample-q", "greedy", "temperature0"])
def test_per_request_num_drafts(device, layout, how):
    v, k = 10, 4
    b = len(TRUTH)
    logits = torch.randn(b, k + 1, v, generator=gen("cpu", 9)).to(device)
    bitmask = pack([{t} for row in TRUTH for t in row], 1)
    if layout == "3d":
        bitmask = bitmask.view(b, k + 1, 1)
    drafts = torch.tensor(DRAFTS, device=device)
    num = torch.tensor(NUM_DRAFTS) if how == "sample" else NUM_DRAFTS  # CPU tensor or list
    if how == "greedy":
        out, na = greedy_verify(logits, drafts, num, bitmask)
    else:
        q = None
        if how == "sample-q":
            q = torch.rand(b, k, v, generator=gen("cpu", 10)).to(device)
            q /= q.sum(-1, keepdim=True)
        temp = 0.0 if how == "temperature0" else 0.8
        out, na = rejection_sample(
            logits, drafts, num, bitmask, q, temperature=temp, generator=gen(device, 11)
        )
    assert out.dtype == na.dtype == torch.int64
    assert out.tolist() == [e[0] for e in EXPECTED]
    assert na.tolist() == [e[1] for e in EXPECTED]


def test_exact_acceptance_probability_one_hot():
    """P(accept x) = p(x) exactly, for a hand-computed masked, tempered p."""
    v, k, b = 6, 1, 40_000
    logits = torch.tensor([[1.0, 2.0, 0.0, 3.0, -1.0, 0.5]] * 2)
    allowed = {0, 1, 2, 5}  # forbids the argmax, 3
    ps = ref_probs(logits[0].tolist(), allowed, 1.5)
    want = math.exp(2.0 / 1.5) / sum(math.exp(x / 1.5) for x in [1.0, 2.0, 0.0, 0.5])
    assert abs(ps[1] - want) < 1e-12
    _, na = rejection_sample(
        logits.expand(b, 2, v),
        torch.ones(b, k, dtype=torch.int64),
        [1] * b,
        pack([allowed] * 2, 1).repeat(b, 1),
        temperature=1.5,
        generator=gen("cpu", 12),
    )
    rate = float(na.float().mean())
    assert abs(rate - want) < 5 * math.sqrt(want * (1 - want) / b)


def test_tokens_beyond_mask_width_and_logit_padding():
    # Logits wider than 32 * W: ids >= 32 are forbidden even with the top logit.
    v, k, b = 40, 1, 3000
    logits = torch.zeros(b, k + 1, v)
    logits[:, :, 35] = 50.0
    bitmask = torch.full((b * (k + 1), 1), -1, dtype=torch.int32)
    out, na = rejection_sample(
        logits, torch.full((b, k), 35), [1] * b, bitmask, generator=gen("cpu", 13)
    )
    assert (na == 0).all() and int(out[:, 0].max()) < 32
    out, na = greedy_verify(logits, torch.full((b, k), 35), [1] * b, bitmask)
    assert (na == 0).all() and (out[:, 0] == 0).all()
    # Logits narrower than 32 * W: extra words are ignored.
    logits = torch.zeros(b, k + 1, 30)
    drafts = torch.full((b, k), 20)
    bitmask = pack([{1, 20, 40, 60}, {3, 40}], 2).repeat(b, 1)
    out, na = rejection_sample(logits, drafts, [1] * b, bitmask, generator=gen("cpu", 14))
    assert set(out[:, 0].tolist()) == {1, 20}
    assert set(out[na == 1, 1].tolist()) == {3}
    # Position 1 now allows no id < 30: an error only while position 1 is in use.
    bitmask = pack([{1, 20, 40, 60}, {40}], 2).repeat(b, 1)
    with pytest.raises(ValueError, match="request 0, position 1"):
        rejection_sample(logits, drafts, [1] * b, bitmask)
    with pytest.raises(ValueError, match="request 0, position 1"):
        greedy_verify(logits, drafts, [1] * b, bitmask)
    out, na = rejection_sample(logits, drafts, [0] * b, bitmask)
    assert (na == 0).all() and set(out[:, 0].tolist()) <= {1, 20}


def test_low_precision_logits_and_int32_drafts():
    v, k, b = 16, 2, 1000
    allowed = [{1, 2, 3}, {4, 5}, {6, 15}]
    for dtype in (torch.float16, torch.bfloat16, torch.float64):
        logits = torch.randn(b, k + 1, v, generator=gen("cpu", 14)).to(dtype)
        drafts = torch.tensor([[2, 5]] * b, dtype=torch.int32)
        out, na = rejection_sample(
            logits, drafts, [2] * b, pack(allowed, 1).repeat(b, 1), generator=gen("cpu", 15)
        )
        for i in range(k + 1):
            assert set(out[na >= i, i].tolist()) <= allowed[i]


def test_logit_minus_inf_tokens_are_never_emitted():
    v, k, b = 8, 1, 5000
    logits = torch.zeros(b, k + 1, v)
    logits[:, :, 3] = -math.inf
    q = torch.zeros(b, k, v)
    q[:, :, 3] = 1.0
    out, na = rejection_sample(
        logits, torch.full((b, k), 3), [1] * b, None, q, generator=gen("cpu", 16)
    )
    assert (na == 0).all() and not (out[:, 0] == 3).any()
    assert set(out[:, 0].tolist()) == {0, 1, 2, 4, 5, 6, 7}


# ---------------------------------------------------------------------------
# greedy_verify


@pytest.mark.parametrize("device", DEVICES)
def test_greedy_when_unmasked_argmax_is_forbidden(device):
    logits = torch.tensor(
        [
            [[0.0, 5.0, 9.0, 1.0], [7.0, 0.0, 0.0, 8.0], [1.0, 2.0, 3.0, 4.0]],
            [[0.0, 5.0, 9.0, 1.0], [7.0, 0.0, 0.0, 8.0], [1.0, 2.0, 3.0, 4.0]],
            [[0.0, 5.0, 9.0, 1.0], [7.0, 0.0, 0.0, 8.0], [1.0, 2.0, 3.0, 4.0]],
        ],
        device=device,
    )
    allowed = [{0, 1, 3}, {0, 1, 2}, {0, 1, 2}] * 3  # forbids 2, then 3, then 3
    bitmask = pack(allowed, 1)
    drafts = torch.tensor([[2, 0], [1, 0], [1, 3]], device=device)
    out, na = greedy_verify(logits, drafts, [2, 2, 2], bitmask)
    assert out.tolist() == [[1, -1, -1], [1, 0, 2], [1, 0, -1]]
    assert na.tolist() == [0, 2, 1]
    # Unmasked: the same drafts meet the unmasked argmax.
    out, na = greedy_verify(logits, drafts, [2, 2, 2])
    assert out.tolist() == [[2, 3, -1], [2, -1, -1], [2, -1, -1]]
    assert na.tolist() == [1, 0, 0]


def test_greedy_matches_reference_on_random_cases():
    rng = random.Random(17)
    for trial in range(40):
        b, k, v = rng.randint(1, 5), rng.randint(0, 4), rng.randint(1, 70)
        words = max(1, (v + 31) // 32 + rng.choice([-1, 0, 1]))
        logits = torch.randn(b, k + 1, v, generator=gen("cpu", trial)).round(decimals=1)
        allowed = [
            {t for t in range(v) if t < 32 * words and rng.random() < 0.4} | {rng.randrange(v)}
            for _ in range(b * (k + 1))
        ]
        allowed = [{t for t in a if t < 32 * words} or {0} for a in allowed]
        n = [rng.randint(0, k) for _ in range(b)]
        drafts = [
            [
                (min(allowed[r * (k + 1) + i]) if rng.random() < 0.5 else rng.randrange(v))
                if i < n[r]
                else -1
                for i in range(k)
            ]
            for r in range(b)
        ]
        out, na = greedy_verify(
            logits, torch.tensor(drafts, dtype=torch.int64).view(b, k), n, pack(allowed, words)
        )
        out2, na2 = rejection_sample(
            logits,
            torch.tensor(drafts, dtype=torch.int64).view(b, k),
            n,
            pack(allowed, words),
            temperature=0,
        )
        assert torch.equal(out, out2) and torch.equal(na, na2)
        lg = logits.tolist()
        for r in range(b):
            want, acc = ref_greedy(lg[r], allowed[r * (k + 1) : (r + 1) * (k + 1)], drafts[r], n[r])
            assert int(na[r]) == acc
            assert out[r].tolist() == want + [-1] * (k + 1 - len(want))


# ---------------------------------------------------------------------------
# Random invariants: nothing masked, accepted prefixes, padding


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    b=st.integers(1, 5),
    k=st.integers(0, 4),
    v=st.integers(1, 80),
    dwords=st.sampled_from([-1, 0, 0, 1]),
    density=st.sampled_from([0.03, 0.3, 0.9]),
    scale=st.sampled_from([1.0, 40.0]),
    temperature=st.sampled_from([0.0, 0.3, 1.0, 4.0]),
    use_q=st.booleans(),
    layout3d=st.booleans(),
)
def test_never_emits_masked_tokens(
    seed, b, k, v, dwords, density, scale, temperature, use_q, layout3d
):
    rng = random.Random(seed)
    words = max(1, (v + 31) // 32 + dwords)
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(b, k + 1, v, generator=g) * scale
    logits[torch.rand(b, k + 1, v, generator=g) < 0.1] = -math.inf
    allowed = [{t for t in range(32 * words) if rng.random() < density} for _ in range(b * (k + 1))]
    bitmask = pack(allowed, words)
    assert [unpack_row(r, v) for r in bitmask.tolist()] == [
        {t for t in a if t < v} for a in allowed
    ]
    n = [rng.randint(0, k) for _ in range(b)]
    lg = logits.tolist()
    drafts = []
    for r in range(b):
        row = []
        for i in range(k):
            ok = sorted(t for t in allowed[r * (k + 1) + i] if t < v)
            if i >= n[r]:
                row.append(rng.choice([-1, 10**6]))
            elif ok and rng.random() < 0.7:
                row.append(rng.choice(ok))
            else:
                row.append(rng.randrange(v))
        drafts.append(row)
    q = None
    if use_q:
        q = torch.rand(b, k, v, generator=g) ** 4
        q /= q.sum(-1, keepdim=True)
    usable = [
        [t for t in range(v) if t in allowed[r * (k + 1) + i] and lg[r][i][t] != -math.inf]
        for r in range(b)
        for i in range(k + 1)
    ]
    empty = [(r, i) for r in range(b) for i in range(n[r] + 1) if not usable[r * (k + 1) + i]]
    args = (
        logits,
        torch.tensor(drafts, dtype=torch.int64).view(b, k),
        n,
        bitmask.view(b, k + 1, words) if layout3d else bitmask,
        q,
    )
    state = g.get_state()
    if empty:
        with pytest.raises(ValueError, match=f"request {empty[0][0]}, position {empty[0][1]}"):
            rejection_sample(*args, temperature=temperature, generator=g)
        assert torch.equal(g.get_state(), state)  # nothing drawn
        return
    out, na = rejection_sample(*args, temperature=temperature, generator=g)
    assert out.shape == (b, k + 1) and na.shape == (b,)
    for r in range(b):
        a = int(na[r])
        assert 0 <= a <= n[r]
        assert out[r, :a].tolist() == drafts[r][:a]
        assert all(x == -1 for x in out[r, a + 1 :].tolist())
        for i in range(a + 1):
            assert int(out[r, i]) in usable[r * (k + 1) + i], (r, i)
    if temperature == 0.0:
        for r in range(b):
            rows = [allowed[r * (k + 1) + i] & set(range(v)) for i in range(k + 1)]
            want, acc = ref_greedy(lg[r], rows, drafts[r], n[r])
            assert int(na[r]) == acc and out[r, : acc + 1].tolist() == want


# ---------------------------------------------------------------------------
# Bad input


def good_args(b=2, k=2, v=8):
    return dict(
        target_logits=torch.zeros(b, k + 1, v),
        draft_tokens=torch.zeros(b, k, dtype=torch.int64),
        num_drafts=[k] * b,
        bitmask=torch.full((b * (k + 1), 1), -1, dtype=torch.int32),
        draft_probs=torch.full((b, k, v), 1.0 / v),
    )


BAD = [
    ("target_logits", torch.zeros(2, 3, 8, dtype=torch.int64), TypeError, "floating"),
    ("target_logits", torch.zeros(2, 8), ValueError, r"\[B, K \+ 1, V\]"),
    ("draft_tokens", torch.zeros(2, 2), TypeError, "integer"),
    ("draft_tokens", torch.zeros(2, 3, dtype=torch.int64), ValueError, "draft_tokens must be"),
    ("draft_tokens", torch.tensor([[0, 8], [0, 0]]), ValueError, r"draft_tokens\[0, 1\] = 8"),
    ("draft_tokens", torch.tensor([[0, 0], [-1, 0]]), ValueError, r"draft_tokens\[1, 0\] = -1"),
    ("draft_tokens", torch.zeros(2, 2, dtype=torch.int64, device="meta"), ValueError, "meta"),
    ("num_drafts", [2, 3], ValueError, r"num_drafts\[1\] = 3"),
    ("num_drafts", torch.tensor([-1, 0]), ValueError, r"num_drafts\[0\] = -1"),
    ("num_drafts", [2], ValueError, "entries"),
    ("num_drafts", [2.0, 1.0], TypeError, "ints"),
    ("num_drafts", torch.tensor([2.0, 1.0]), TypeError, "integer"),
    ("num_drafts", torch.zeros(2, dtype=torch.int64, device="meta"), ValueError, "meta"),
    ("bitmask", torch.full((6, 1), -1, dtype=torch.int64), TypeError, "int32"),
    ("bitmask", torch.full((5, 1), -1, dtype=torch.int32), ValueError, "bitmask must be"),
    ("bitmask", torch.full((2, 2, 1), -1, dtype=torch.int32), ValueError, "bitmask must be"),
    ("bitmask", torch.full((6, 1), -1, dtype=torch.int32, device="meta"), ValueError, "meta"),
    ("draft_probs", torch.zeros(2, 2, 7), ValueError, "draft_probs must be"),
    ("draft_probs", torch.zeros(2, 2, 8, dtype=torch.int32), TypeError, "floating"),
    ("draft_probs", torch.full((2, 2, 8), -0.1), ValueError, "negative"),
    ("draft_probs", torch.full((2, 2, 8), math.nan), ValueError, "NaN"),
]


@pytest.mark.parametrize("key,value,exc,msg", BAD, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)])
def test_bad_input_raises(key, value, exc, msg):
    args = good_args()
    args[key] = value
    with pytest.raises(exc, match=msg):
        rejection_sample(**args, generator=torch.Generator().manual_seed(0))
    if key != "draft_probs":
        args.pop("draft_probs")
        with pytest.raises(exc, match=msg):
            greedy_verify(**args)


def test_bad_temperature_generator_and_empty_positions():
    args = good_args()
    for t, exc in [(-0.5, ValueError), (math.nan, ValueError), (math.inf, ValueError)]:
        with pytest.raises(exc, match="temperature"):
            rejection_sample(**args, temperature=t)
    with pytest.raises(TypeError, match="temperature"):
        rejection_sample(**args, temperature="hot")
    with pytest.raises(TypeError, match="generator"):
        rejection_sample(**args, generator=0)
    # An all-zero mask row at a position in use, named in the error.
    args["bitmask"][4] = 0  # request 1, position 1
    with pytest.raises(ValueError, match="request 1, position 1"):
        rejection_sample(**args)
    with pytest.raises(ValueError, match="request 1, position 1"):
        greedy_verify(args["target_logits"], args["draft_tokens"], [2, 2], args["bitmask"])
    # Not in use when request 1 has no draft: fine.
    rejection_sample(**{**args, "num_drafts": [2, 0]})
    # Allowed tokens whose logits are all -inf; NaN logits.
    args = good_args()
    args["target_logits"][0, 2] = -math.inf
    with pytest.raises(ValueError, match="request 0, position 2: every allowed token"):
        rejection_sample(**args)
    args["target_logits"][0, 2] = math.nan
    with pytest.raises(ValueError, match="request 0, position 2: .*NaN"):
        rejection_sample(**args)
    # Garbage draft_probs at unused positions is ignored.
    args = good_args()
    args["draft_probs"][1, 1] = math.nan
    rejection_sample(**{**args, "num_drafts": [2, 1]})


def test_import_maskpar_does_not_import_torch():
    code = "import sys, maskpar; assert 'torch' not in sys.modules; import maskpar.sampling"
    subprocess.run([sys.executable, "-c", code], check=True)


# ---------------------------------------------------------------------------
# CUDA (the device-parametrised tests above also run there)


@needs_cuda
def test_cuda_matches_cpu_semantics():
    v, k, b = 50, 3, 64
    logits = torch.randn(b, k + 1, v, generator=gen("cpu", 20))
    rng = random.Random(20)
    allowed = [set(rng.sample(range(v), 10)) for _ in range(b * (k + 1))]
    bitmask = pack(allowed, 2)  # stays on the CPU
    drafts = torch.randint(0, v, (b, k), generator=gen("cpu", 21))
    n = torch.randint(0, k + 1, (b,), generator=gen("cpu", 22))
    # Greedy is deterministic: identical on both devices.
    want = greedy_verify(logits, drafts, n, bitmask)
    got = greedy_verify(logits.cuda(), drafts.cuda(), n.cuda(), bitmask)
    assert got[0].is_cuda and got[1].is_cuda
    assert torch.equal(got[0].cpu(), want[0]) and torch.equal(got[1].cpu(), want[1])
    # Sampling: reproducible with a CUDA generator, nothing masked.
    q = torch.rand(b, k, v, generator=gen("cpu", 23)).cuda()
    q /= q.sum(-1, keepdim=True)
    args = (logits.cuda().half(), drafts.cuda(), n, bitmask, q)
    out1, na1 = rejection_sample(*args, temperature=0.7, generator=gen("cuda", 24))
    out2, na2 = rejection_sample(*args, temperature=0.7, generator=gen("cuda", 24))
    assert torch.equal(out1, out2) and torch.equal(na1, na2)
    out, na = out1.cpu(), na1.cpu()
    for r in range(b):
        for i in range(int(na[r]) + 1):
            assert int(out[r, i]) in allowed[r * (k + 1) + i]
    # A bitmask already on the GPU works; a CPU generator or CPU drafts do not.
    out3, _ = rejection_sample(
        logits.cuda(), drafts.cuda(), n, bitmask.cuda(), q, generator=gen("cuda", 24)
    )
    assert out3.is_cuda
    with pytest.raises(ValueError, match="generator"):
        rejection_sample(logits.cuda(), drafts.cuda(), n, bitmask, q, generator=gen("cpu", 0))
    with pytest.raises(ValueError, match="draft_tokens"):
        rejection_sample(logits.cuda(), drafts, n, bitmask, q)
