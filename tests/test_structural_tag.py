"""Structural tags (``maskpar.compile_structural_tag``): the API, hostile specs,
and the language, differentially against xgrammar (the engine the format
comes from) on the Llama-3 vocabulary.

The differential walks go both ways: tokens sampled by following maskpar's
masks are accepted one by one by xgrammar's matcher, and tokens sampled from
xgrammar's masks by maskpar's. Walks are biased towards the tokens of each
spec's example texts, so they enter the tags instead of wandering in free
text. Known differences are listed in ``DIFFERENCES`` and tested there.
"""

from __future__ import annotations

import json
import random
from importlib.metadata import version
from typing import Any

import numpy as np
import pytest

import maskpar
from conftest import LLAMA3_EOS

xgr = pytest.importorskip("xgrammar")
from packaging.version import Version  # noqa: E402  (pytest's own dependency)

XGRAMMAR_VERSION = Version(version("xgrammar"))


def st(fmt: dict[str, Any]) -> dict[str, Any]:
    return {"type": "structural_tag", "format": fmt}


def const(v: str) -> dict[str, Any]:
    return {"type": "const_string", "value": v}


def tag(begin: str, content: dict[str, Any], end: str | list[str]) -> dict[str, Any]:
    return {"type": "tag", "begin": begin, "content": content, "end": end}


ANY = {"type": "any_text"}
# Integers by a grammar: maskpar's JSON "integer" (and an enum of integers)
# also takes integral numbers written with a fraction (`2.0`, as JSON Schema
# defines integers); xgrammar's does not (tested in test_differences).
INT = {"type": "grammar", "grammar": 'root ::= "-"? [1-9] [0-9]*'}
CITY = {
    "type": "json_schema",
    "json_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


def triggered(**extra: Any) -> dict[str, Any]:
    return {
        "type": "triggered_tags",
        "triggers": ["<function="],
        "tags": [
            tag("<function=weather>", CITY, "</function>"),
            tag("<function=note>", ANY, "</function>"),
        ],
        **extra,
    }


# (name, spec, texts in the language, texts outside it): the texts are
# checked on both engines, and the valid ones seed the walks.
CATALOGUE: list[tuple[str, dict[str, Any], list[str], list[str]]] = [
    ("const", st(const("Hello, world")), ["Hello, world"], ["Hello", "Hello, world!"]),
    ("json_schema", st(CITY), ['{"city": "Paris"}', '{ "city":"Rome" }'], ['{"town": "x"}']),
    ("json_bool", st({"type": "json_schema", "json_schema": True}), ['[1, {"a": null}]'], ["x"]),
    (
        "grammar",
        st({"type": "grammar", "grammar": 'root ::= "yes" | "no" ("," root)?'}),
        ["yes", "no,no,yes"],
        ["maybe", "no,"],
    ),
    (
        "regex",
        st({"type": "regex", "pattern": "[a-z]{2,5}-\\d{3}"}),
        ["ab-123"],
        ["a-123", "ab-12"],
    ),
    ("any_text", st(ANY), ["anything at all\n", ""], []),
    (
        "any_text_excludes",
        st({"type": "any_text", "excludes": ["<|", "END"]}),
        ["plain text", "E N D"],
        ["an END", "a <|b"],
    ),
    (
        "sequence_or",
        st(
            {
                "type": "sequence",
                "elements": [const("A:"), {"type": "or", "elements": [INT, const("none")]}],
            }
        ),
        ["A:12", "A:none"],
        ["A:", "A:1.5"],
    ),
    (
        "tag_any",
        st(tag("<think>", ANY, "</think>")),
        ["<think>hmm, ok</think>"],
        ["<think>a</think>b</think>"],
    ),
    (
        "tag_multi_end",
        st(tag("<answer>", ANY, ["</answer>", "<|eot|>"])),
        ["<answer>42</answer>", "<answer>42<|eot|>"],
        ["<answer>4</answer>2</answer>"],
    ),
    (
        "tag_json",
        st(tag("<tool>", CITY, "</tool>")),
        ['<tool>{"city": "Oslo"}</tool>'],
        ["<tool>{}</tool>"],
    ),
    (
        "triggered",
        st(triggered()),
        ['Sure. <function=weather>{"city": "Paris"}</function> It is sunny.', "no call", ""],
        ["<function=other>"],
    ),
    (
        "triggered_at_least_one",
        st(triggered(at_least_one=True)),
        ['<function=weather>{"city": "Paris"}</function>then<function=note>x</function>'],
        ["", 'hi <function=weather>{"city": "Paris"}</function>'],
    ),
    (
        "triggered_stop_after_first",
        st(triggered(stop_after_first=True)),
        ["ok <function=note>remember</function>", "just text"],
        ["<function=note>a</function>b"],
    ),
    (
        "triggered_one",
        st(triggered(at_least_one=True, stop_after_first=True)),
        ["<function=note>a</function>"],
        ["", "x<function=note>a</function>"],
    ),
    (
        "triggered_excludes",
        st(triggered(excludes=["<|"])),
        ["a <function=note>b</function> c"],
        ["a <| b"],
    ),
    (
        "tags_with_separator",
        st(
            {
                "type": "tags_with_separator",
                "tags": [tag("<a>", INT, "</a>"), tag("<b>", const("x"), "</b>")],
                "separator": ", ",
            }
        ),
        ["", "<a>1</a>, <b>x</b>, <a>22</a>"],
        ["<a>1</a>,", "<a>1</a><b>x</b>"],
    ),
    (
        "tags_with_separator_at_least_one",
        st(
            {
                "type": "tags_with_separator",
                "tags": [tag("<a>", INT, "</a>"), tag("<b>", const("x"), "</b>")],
                "separator": ";",
                "at_least_one": True,
            }
        ),
        ["<b>x</b>", "<a>1</a>;<b>x</b>;<a>22</a>;<a>3</a>"],
        ["", "<a>1</a>;", ";<a>1</a>", "<a>1</a>;;<b>x</b>"],
    ),
    (
        "tags_with_separator_flags",
        st(
            {
                "type": "tags_with_separator",
                "tags": [tag("<a>", INT, "</a>")],
                "separator": ";",
                "at_least_one": True,
                "stop_after_first": True,
            }
        ),
        ["<a>7</a>"],
        ["", "<a>7</a>;<a>8</a>"],
    ),
    (
        "repeat_family",
        st(
            {
                "type": "sequence",
                "elements": [
                    {"type": "optional", "content": const("?")},
                    {"type": "plus", "content": const("+")},
                    {"type": "star", "content": const("*")},
                    {"type": "repeat", "min": 2, "max": 3, "content": const("r")},
                    {"type": "repeat", "min": 1, "max": -1, "content": const("u")},
                ],
            }
        ),
        ["?++**rrru", "+rruuu"],
        ["+ru", "+rrrru"],
    ),
    (
        "nested_tags",
        st(tag("<outer>", tag("<inner>", ANY, "</inner>"), "</outer>")),
        ["<outer><inner>x</outer>y</inner></outer>"],
        ["<outer><inner>x</inner>y</outer>"],
    ),
    (
        "legacy",
        {
            "type": "structural_tag",
            "structures": [
                {"begin": "<function=weather>", "schema": CITY["json_schema"], "end": "</function>"}
            ],
            "triggers": ["<function="],
        },
        ['Checking. <function=weather>{"city": "Lima"}</function>'],
        ["<function=weather>{}</function>"],
    ),
    (
        "json-max-whitespace",
        st(
            {
                "type": "json_schema",
                # (booleans: xgrammar refuses `1.0` for an integer, maskpar
                # takes it, as JSON Schema does; see test_differences)
                "json_schema": {"type": "object", "properties": {"a": {"type": "boolean"}}},
                "max_whitespace_cnt": 1,
            }
        ),
        ['{"a": true}', '{ "a":false }', '{\n"a":\ttrue}', "{}"],
        ['{"a":  true}', '{"a": true  }', "{  }", '{"a":\n false}'],
    ),
    (
        "legacy-at-least-one",
        {
            "type": "structural_tag",
            "structures": [
                {"begin": "<function=weather>", "schema": CITY["json_schema"], "end": "</function>"}
            ],
            "triggers": ["<function="],
            "at_least_one": True,
            "stop_after_first": True,
        },
        ['<function=weather>{"city": "Lima"}</function>'],
        [
            "No call at all.",
            "",
            'Checking. <function=weather>{"city": "Lima"}</function>',
            '<function=weather>{"city": "Lima"}</function>'
            '<function=weather>{"city": "Oslo"}</function>',
        ],
    ),
]


@pytest.fixture(scope="module")
def xgr_info(llama3: Any) -> Any:
    enc, tok = llama3
    special = {i for i in range(enc.n_vocab) if enc.is_special_token(i)} - set(LLAMA3_EOS)
    encoded = [b"" if i in special else tok.token_bytes(i) for i in range(enc.n_vocab)]
    return xgr.TokenizerInfo(
        encoded,
        vocab_type=xgr.VocabType.RAW,
        vocab_size=tok.vocab_size,
        stop_token_ids=list(LLAMA3_EOS),
    )


@pytest.fixture(scope="module")
def xgr_compiler(xgr_info: Any) -> Any:
    return xgr.GrammarCompiler(xgr_info, max_threads=1, cache_enabled=False)


def xgr_spec(spec: dict[str, Any]) -> str:
    """The spec as xgrammar's compiler takes it (the legacy shape converted
    by xgrammar itself, as vLLM does)."""
    if "structures" not in spec:
        return json.dumps(spec)
    items = [xgr.StructuralTagItem(**s) for s in spec["structures"]]
    converted = xgr.StructuralTag.from_legacy_structural_tag(items, spec["triggers"])
    out = json.loads(converted.model_dump_json())
    # SGLang's flags beside the legacy shape mean what they mean on the
    # current shape's `triggered_tags` (xgrammar's converter drops them).
    for flag in ("at_least_one", "stop_after_first"):
        if flag in spec:
            out["format"][flag] = spec[flag]
    return json.dumps(out)


def xgr_accepts(compiler: Any, spec: dict[str, Any], text: str) -> bool:
    m = xgr.GrammarMatcher(compiler.compile_structural_tag(xgr_spec(spec)))
    return m.accept_string(text) and m.is_completed()


def mp_accepts(tok: Any, spec: dict[str, Any], text: str) -> bool:
    m = maskpar.Matcher(maskpar.compile_structural_tag(tok, spec))
    ids = tok.encode_greedy(text.encode())
    return m.consume_tokens(ids) and m.is_accepting()


@pytest.mark.parametrize("name,spec,good,bad", CATALOGUE, ids=[c[0] for c in CATALOGUE])
def test_catalogue_texts(
    llama3: Any, xgr_compiler: Any, name: str, spec: Any, good: list[str], bad: list[str]
) -> None:
    _, tok = llama3
    for text in good:
        assert xgr_accepts(xgr_compiler, spec, text), f"xgrammar refuses {text!r}"
        assert mp_accepts(tok, spec, text), f"maskpar refuses {text!r}"
    for text in bad:
        assert not xgr_accepts(xgr_compiler, spec, text), f"xgrammar accepts {text!r}"
        assert not mp_accepts(tok, spec, text), f"maskpar accepts {text!r}"


def allowed_ids(row: np.ndarray, vocab_size: int) -> np.ndarray:
    bits = np.unpackbits(row.view(np.uint8), bitorder="little")[:vocab_size]
    return np.flatnonzero(bits)


def walk(
    rng: random.Random,
    hints: set[int],
    fill: Any,
    vocab_size: int,
    max_tokens: int,
) -> list[int]:
    """Samples a token sequence from `fill(tokens) -> allowed ids`: hinted
    tokens first, EOS (ending the walk) once in a while when allowed."""
    # Array operations: free text allows most of the 128K tokens at every
    # step, and lists of them made these walks the slowest tests in CI.
    hint_ids = np.fromiter(hints, dtype=np.int64)
    eos_ids = np.array(LLAMA3_EOS, dtype=np.int64)
    tokens: list[int] = []
    for _ in range(max_tokens):
        allowed = fill(tokens)
        if len(allowed) == 0:
            break
        eos = eos_ids[np.isin(eos_ids, allowed)]
        if len(eos) and (rng.random() < 0.15 or len(tokens) == max_tokens - 1):
            tokens.append(int(eos[0]))
            break
        unhinted = allowed[~np.isin(allowed, eos_ids)]
        hinted = unhinted[np.isin(unhinted, hint_ids)]
        pool = hinted if len(hinted) and rng.random() < 0.85 else unhinted
        if not len(pool):
            break
        tokens.append(int(rng.choice(pool)))
    return tokens


def hint_tokens(enc: Any, texts: list[str]) -> set[int]:
    hints = {i for i in range(256) if len(enc.decode_single_token_bytes(i)) == 1}
    for t in texts:
        hints.update(enc.encode(t))
    return hints


WALKS = 12


def invalid_utf8(prefix: bytes, token: bytes, eos: bool) -> bool:
    """Whether `prefix + token` (ended there, for EOS) is not UTF-8, nor a
    prefix of some UTF-8 text."""
    data = prefix if eos else prefix + token
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        return eos or e.end != len(data) or e.reason != "unexpected end of data"
    return False


@pytest.mark.parametrize("name,spec,good,bad", CATALOGUE, ids=[c[0] for c in CATALOGUE])
def test_maskpar_walks_are_accepted_by_xgrammar(
    llama3: Any, xgr_compiler: Any, name: str, spec: Any, good: list[str], bad: list[str]
) -> None:
    enc, tok = llama3
    g = maskpar.compile_structural_tag(tok, spec)
    xg = xgr_compiler.compile_structural_tag(xgr_spec(spec))
    hints = hint_tokens(enc, good)
    rng = random.Random(name)
    bm = np.zeros((1, (tok.vocab_size + 31) // 32), dtype=np.int32)
    for _ in range(WALKS):
        m = maskpar.Matcher(g)

        def fill(tokens: list[int], m: Any = m) -> np.ndarray:
            if tokens:
                assert m.consume_token(tokens[-1])
            m.fill_next_token_bitmask(bm, 0)
            return allowed_ids(bm[0], tok.vocab_size)

        tokens = walk(rng, hints, fill, tok.vocab_size, 40)
        xm = xgr.GrammarMatcher(xg)
        for i, t in enumerate(tokens):
            assert xm.accept_token(t), (
                f"xgrammar refuses token {t} ({enc.decode_single_token_bytes(t)!r}) after "
                f"{enc.decode_bytes(tokens[:i])!r}"
            )


@pytest.mark.parametrize("name,spec,good,bad", CATALOGUE, ids=[c[0] for c in CATALOGUE])
def test_xgrammar_walks_are_accepted_by_maskpar(
    llama3: Any, xgr_compiler: Any, name: str, spec: Any, good: list[str], bad: list[str]
) -> None:
    enc, tok = llama3
    g = maskpar.compile_structural_tag(tok, spec)
    xg = xgr_compiler.compile_structural_tag(xgr_spec(spec))
    hints = hint_tokens(enc, good)
    rng = random.Random(name + "/xgrammar")
    bm = xgr.allocate_token_bitmask(1, tok.vocab_size)
    for _ in range(WALKS):
        xm = xgr.GrammarMatcher(xg)

        def fill(tokens: list[int], xm: Any = xm) -> np.ndarray:
            if tokens:
                assert xm.accept_token(tokens[-1])
            if xm.is_terminated():
                return np.zeros(0, dtype=np.int64)
            xm.fill_next_token_bitmask(bm)
            return allowed_ids(bm[0].numpy(), tok.vocab_size)

        tokens = walk(rng, hints, fill, tok.vocab_size, 40)
        m = maskpar.Matcher(g)
        for i, t in enumerate(tokens):
            prefix, token = enc.decode_bytes(tokens[:i]), enc.decode_single_token_bytes(t)
            if invalid_utf8(prefix, token, t in LLAMA3_EOS):
                break  # a documented difference: xgrammar allows bytes that are not UTF-8
            assert m.consume_token(t), (
                f"maskpar refuses token {t} ({enc.decode_single_token_bytes(t)!r}) after "
                f"{enc.decode_bytes(tokens[:i])!r}"
            )


def test_api_inputs(llama3: Any) -> None:
    _, tok = llama3
    spec = st(const("x"))
    for form in (spec, json.dumps(spec), xgr.StructuralTag.from_json(spec)):
        g = maskpar.compile_structural_tag(tok, form)
        assert g.kind == "structural_tag"
        assert maskpar.Matcher(g).consume_tokens(tok.encode_greedy(b"x"))
    with pytest.raises(TypeError, match="dict or JSON text"):
        maskpar.compile_structural_tag(tok, 5)
    with pytest.raises(ValueError, match="max_compile_steps"):
        maskpar.compile_structural_tag(tok, spec, max_compile_steps=0)


@pytest.mark.parametrize(
    "spec,message",
    [
        ("{", "not valid JSON"),
        ({"type": "structural_tag"}, 'expected a "format"'),
        ({"type": "json_schema"}, 'expected "structural_tag"'),
        (st({"type": "bogus"}), "not recognized: bogus"),
        (st({"type": "const_string", "value": 5}), "format.value"),
        (st({"type": "sequence", "elements": []}), "at least one element"),
        (st({"type": "repeat", "min": 2, "max": 1, "content": const("a")}), "min must be <= max"),
        (st({"type": "repeat", "min": -1, "max": 1, "content": const("a")}), "min must be >= 0"),
        (
            st({"type": "triggered_tags", "triggers": [], "tags": [tag("<a>", ANY, "</a>")]}),
            "triggers must be non-empty",
        ),
        (
            st({"type": "triggered_tags", "triggers": ["<b"], "tags": [tag("<a>", ANY, "</a>")]}),
            "does not start with any trigger",
        ),
        (
            st(
                {
                    "type": "triggered_tags",
                    "triggers": ["<", "<a"],
                    "tags": [tag("<a>", ANY, "</a>")],
                }
            ),
            "more than one trigger",
        ),
        (
            st({"type": "json_schema", "json_schema": {}, "style": "qwen_xml"}),
            'style "qwen_xml" is not supported',
        ),
        (st({"type": "json_schema", "json_schema": {"type": "nope"}}), "json_schema"),
        (st({"type": "grammar", "grammar": 'root ::= ("a"'}), "grammar in a structural tag"),
        (st({"type": "regex", "pattern": "(a"}), "does not parse"),
        (st({"type": "any_text", "max_tokens": 5}), "max_tokens"),
        (st({"type": "dispatch", "rules": []}), '"dispatch" is not supported'),
    ],
)
def test_bad_specs_raise_value_error(llama3: Any, spec: Any, message: str) -> None:
    _, tok = llama3
    with pytest.raises(ValueError, match=message.replace("(", "\\(")):
        maskpar.compile_structural_tag(tok, spec)


PYTHON_TAG, EOM, EOT = 128010, 128008, 128009  # Llama-3 specials; EOT is an EOS


def token_catalogue(enc: Any) -> list[tuple[dict[str, Any], list[list[int]], list[list[int]]]]:
    """(format, token sequences in the language, sequences outside it)."""
    text = enc.encode
    call = {"type": "token", "token": PYTHON_TAG}
    return [
        (call, [[PYTHON_TAG, EOT]], [[*text("<|python_tag|>"), EOT], [EOT]]),
        # By text (quicktok's Llama-3 names 128010 <|reserved_special_token_5|>).
        (
            {"type": "token", "token": enc.decode_single_token_bytes(PYTHON_TAG).decode()},
            [[PYTHON_TAG, EOT]],
            [[EOM]],
        ),
        (
            {"type": "exclude_token", "exclude_tokens": [PYTHON_TAG]},
            [[EOM, EOT], [*text("a"), EOT]],
            [[PYTHON_TAG], [EOT]],
        ),
        (
            {"type": "any_tokens", "exclude_tokens": [EOM]},
            [[EOT], [PYTHON_TAG, *text("x y"), EOT]],
            [[EOM]],
        ),
        (
            tag(call, INT, {"type": "token", "token": EOM}),  # type: ignore[arg-type]
            [[PYTHON_TAG, *text("12"), EOM, EOT]],
            [[*text("12"), EOM], [PYTHON_TAG, *text("x")]],
        ),
        (
            {
                "type": "token_triggered_tags",
                "trigger_tokens": [PYTHON_TAG],
                "tags": [tag(call, INT, "</call>")],  # type: ignore[arg-type]
                "exclude_tokens": [EOM],
            },
            [[*text("hi"), PYTHON_TAG, *text("7</call>ok"), EOT], [EOT]],
            [[PYTHON_TAG, *text("x")], [EOM]],
        ),
        (
            {
                "type": "token_triggered_tags",
                "trigger_tokens": [PYTHON_TAG],
                "tags": [tag(call, INT, "</call>")],  # type: ignore[arg-type]
                "at_least_one": True,
                "stop_after_first": True,
            },
            [[PYTHON_TAG, *text("7</call>"), EOT]],
            [[EOT], [*text("a"), PYTHON_TAG]],
        ),
        (
            {
                "type": "token_dispatch",
                "rules": [[PYTHON_TAG, const("()")]],
                "exclude_tokens": [EOM],
            },
            [[*text("a"), PYTHON_TAG, *text("()b"), PYTHON_TAG, *text("()"), EOT]],
            [[PYTHON_TAG, *text("x")], [EOM]],
        ),
        (
            {"type": "token_dispatch", "rules": [[PYTHON_TAG, const("()")]], "loop": False},
            [[*text("a"), PYTHON_TAG, *text("()"), EOT]],
            [[PYTHON_TAG, *text("()b")]],
        ),
    ]


@pytest.fixture(scope="module")
def xgr_full_compiler(llama3: Any) -> Any:
    """xgrammar over the Llama-3 vocabulary with special tokens' text, so
    token formats can name them."""
    enc, tok = llama3
    info = xgr.TokenizerInfo(
        [tok.token_bytes(i) for i in range(enc.n_vocab)],
        vocab_type=xgr.VocabType.RAW,
        vocab_size=tok.vocab_size,
        stop_token_ids=list(LLAMA3_EOS),
    )
    return xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)


def stop_token_as_exclude_token(fmt: dict[str, Any], seq: list[int]) -> bool:
    """A stop token alone against a whole-spec ``exclude_token``: the one
    documented difference in token formats (see ``test_differences``)."""
    return fmt["type"] == "exclude_token" and len(seq) == 1 and seq[0] in LLAMA3_EOS


def test_token_level_types_agree_with_xgrammar(llama3: Any, xgr_full_compiler: Any) -> None:
    enc, tok = llama3
    for fmt, good, bad in token_catalogue(enc):
        spec = st(fmt)
        g = maskpar.compile_structural_tag(tok, spec)
        xg = xgr_full_compiler.compile_structural_tag(json.dumps(spec))
        for seq, expected in [(s, True) for s in good] + [(s, False) for s in bad]:
            m, xm = maskpar.Matcher(g), xgr.GrammarMatcher(xg)
            xgr_accepts_seq = all(xm.accept_token(t) for t in seq)
            if not stop_token_as_exclude_token(fmt, seq):  # see test_differences
                assert xgr_accepts_seq == expected, (fmt, seq, "xgrammar")
            assert all(m.consume_token(t) for t in seq) == expected, (fmt, seq, "maskpar")
        # Walks on maskpar's masks, hinted to the special tokens, stay in xgrammar's language.
        rng = random.Random(json.dumps(fmt))
        hints = hint_tokens(enc, []) | {PYTHON_TAG, EOM} | {t for s in good for t in s}
        bm = np.zeros((1, (tok.vocab_size + 31) // 32), dtype=np.int32)
        for _ in range(6):
            m = maskpar.Matcher(g)

            def fill(tokens: list[int], m: Any = m, bm: np.ndarray = bm) -> np.ndarray:
                if tokens:
                    assert m.consume_token(tokens[-1])
                m.fill_next_token_bitmask(bm, 0)
                return allowed_ids(bm[0], tok.vocab_size)

            tokens = walk(rng, hints, fill, tok.vocab_size, 30)
            xm = xgr.GrammarMatcher(xg)
            assert all(xm.accept_token(t) for t in tokens), (fmt, tokens)


def test_token_references_are_checked(llama3: Any) -> None:
    _, tok = llama3
    with pytest.raises(ValueError, match="token id 999999"):
        maskpar.compile_structural_tag(tok, st({"type": "token", "token": 999999}))
    with pytest.raises(ValueError, match="not in the vocabulary"):
        maskpar.compile_structural_tag(tok, st({"type": "token", "token": "<|no such token|>"}))
    begin = {"type": "token", "token": PYTHON_TAG}
    with pytest.raises(ValueError, match="must begin with text"):
        maskpar.compile_structural_tag(
            tok,
            st({"type": "triggered_tags", "triggers": ["<"], "tags": [tag(begin, ANY, "x")]}),  # type: ignore[arg-type]
        )


def test_hostile_specs(llama3: Any) -> None:
    _, tok = llama3
    deep: dict[str, Any] = const("x")
    for _ in range(100):
        deep = {"type": "optional", "content": deep}
    with pytest.raises(ValueError, match="nest more than 64 deep"):
        maskpar.compile_structural_tag(tok, st(deep))
    deeper: Any = const("x")
    for _ in range(5000):
        deeper = {"type": "optional", "content": deeper}
    with pytest.raises(ValueError):
        maskpar.compile_structural_tag(tok, st(deeper))
    with pytest.raises(ValueError):
        maskpar.compile_structural_tag(tok, json.dumps(st(const("x")))[:-1] + "[" * 100_000)
    huge = {"type": "repeat", "min": 0, "max": 2_000_000_000, "content": tag("<a>", INT, "</a>")}
    with pytest.raises(ValueError):
        maskpar.compile_structural_tag(tok, st(huge))
    with pytest.raises(ValueError, match="repeat count"):
        too_many = {"type": "repeat", "min": 0, "max": 2**40, "content": const("a")}
        maskpar.compile_structural_tag(tok, st(too_many))
    wide = st({"type": "or", "elements": [const(f"option {i}") for i in range(2000)]})
    with pytest.raises(ValueError, match="compile"):
        maskpar.compile_structural_tag(tok, wide, max_compile_steps=1000)
    many = st({"type": "any_text", "excludes": [f"word{i}" for i in range(3000)]})
    with pytest.raises(ValueError, match="compile"):
        maskpar.compile_structural_tag(tok, many, max_compile_steps=100_000)
    g = maskpar.compile_structural_tag(tok, many)  # within the default budget, exact
    assert not maskpar.Matcher(g).consume_tokens(tok.encode_greedy(b"a word2999"))
    assert maskpar.Matcher(g).consume_tokens(tok.encode_greedy(b"a word 2999"))
    # Thousands of separated tags: two rules whatever their number, bounded
    # by the compile budget like any other width.
    tags = [tag(f"<t{i}>", const("x"), "</t>") for i in range(3000)]
    separated = st({"type": "tags_with_separator", "tags": tags, "separator": ","})
    with pytest.raises(ValueError, match="compile"):
        maskpar.compile_structural_tag(tok, separated, max_compile_steps=1000)
    g = maskpar.compile_structural_tag(tok, separated)
    assert maskpar.Matcher(g).consume_tokens(tok.encode_greedy(b"<t2999>x</t>,<t0>x</t>"))
    assert not maskpar.Matcher(g).consume_tokens(tok.encode_greedy(b"<t3000>x</t>"))


def test_differences(llama3: Any, xgr_compiler: Any, xgr_full_compiler: Any) -> None:
    """The documented differences from xgrammar (docs/structural-tags.md)."""
    enc, tok = llama3
    # A spec that is one exclude_token takes one token of text, never a stop
    # token (the stop token ends the text after it). xgrammar 0.2.9 accepts
    # a stop token alone there and terminates; 0.2.8 refused it, as maskpar
    # does, and 0.2.9 refuses it too where the format is part of a sequence.
    spec = st({"type": "exclude_token", "exclude_tokens": [PYTHON_TAG]})
    assert not maskpar.Matcher(maskpar.compile_structural_tag(tok, spec)).consume_token(EOT)
    xm = xgr.GrammarMatcher(xgr_full_compiler.compile_structural_tag(json.dumps(spec)))
    assert xm.accept_token(EOT) == (XGRAMMAR_VERSION >= Version("0.2.9"))
    # JSON Schema integers: 2.0 is one (maskpar), xgrammar writes digits only.
    spec = st({"type": "json_schema", "json_schema": {"type": "integer"}})
    assert mp_accepts(tok, spec, "2.0") and not xgr_accepts(xgr_compiler, spec, "2.0")
    # Members come in the schema's properties order on both engines.
    obj = {
        "type": "object",
        "properties": {"b": {"type": "integer"}, "a": {"type": "integer"}},
        "required": ["b", "a"],
    }
    spec = st({"type": "json_schema", "json_schema": obj})
    for text, ok in [('{"b": 1, "a": 2}', True), ('{"a": 2, "b": 1}', False)]:
        assert mp_accepts(tok, spec, text) == ok == xgr_accepts(xgr_compiler, spec, text)
    # Text must be UTF-8 in maskpar; xgrammar lets free text hold any bytes.
    spec = st(tag("<think>", ANY, "</think>"))
    lone = next(i for i in range(256) if enc.decode_single_token_bytes(i) == b"\xa5")
    ids = [*enc.encode("<think>"), lone]
    assert not maskpar.Matcher(maskpar.compile_structural_tag(tok, spec)).consume_tokens(ids)
    xm = xgr.GrammarMatcher(xgr_compiler.compile_structural_tag(xgr_spec(spec)))
    assert all(xm.accept_token(t) for t in ids)
    # An empty GBNF rule is the empty string in maskpar's dialect, an error in xgrammar's.
    spec = st({"type": "grammar", "grammar": "root ::= "})
    assert mp_accepts(tok, spec, "")
    with pytest.raises(RuntimeError):
        xgr_compiler.compile_structural_tag(xgr_spec(spec))


def test_parallel_fills_match_serial(llama3: Any) -> None:
    """A structural tag runs through the same batch and draft machinery."""
    enc, tok = llama3
    g = maskpar.compile_structural_tag(tok, CATALOGUE[11][1])
    text = 'Sure. <function=weather>{"city": "Paris"}</function> It is sunny.'
    ids = enc.encode(text)
    words = (tok.vocab_size + 31) // 32
    serial = np.zeros((len(ids) + 1, words), dtype=np.int32)
    m = maskpar.Matcher(g)
    for i, t in enumerate(ids):
        m.fill_next_token_bitmask(serial, i)
        assert m.consume_token(t)
    m.fill_next_token_bitmask(serial, len(ids))
    par = np.zeros_like(serial)
    fresh = maskpar.Matcher(g)
    accepted = maskpar.fill_next_token_bitmask_par_with_draft_tokens([(fresh, 0, ids)], par)
    assert accepted == [len(ids)]
    assert np.array_equal(serial, par)
    assert fresh.num_consumed == 0
