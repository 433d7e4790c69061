"""MaskBench sample: real-world JSON Schemas with instances labelled valid or
invalid by two independent JSON Schema validators (Python's and Rust's
jsonschema), walked token by token with the Llama-3 vocabulary.

The labels are the oracle. A schema maskpar compiles must accept every valid
instance to the end (each token's bit set in the mask, then EOS allowed) and
refuse every invalid one somewhere (a token's bit clear, or EOS refused); a
schema it cannot compile exactly must be refused with a ValueError. Wrong
answers fail the test; refusals are counted against a coverage floor.

The sample (tests/data/maskbench/dev-sample.jsonl.gz) is 400 files of the dev
split drawn with a fixed seed; bench/maskbench.py runs the full split.
"""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

import maskpar
from conftest import LLAMA3_EOS, MASKBENCH_SAMPLE


def load_sample() -> list[dict]:
    with gzip.open(MASKBENCH_SAMPLE, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def walk(m: maskpar.Matcher, ids: list[int], bitmask: np.ndarray) -> bool:
    """Whether the mask allows every token of `ids` in turn and then EOS; the
    matcher consumes exactly the tokens the mask allows."""
    for t in [*ids, LLAMA3_EOS[0]]:
        m.fill_next_token_bitmask(bitmask)
        allowed = bool((int(bitmask[0, t >> 5]) >> (t & 31)) & 1)
        if not allowed:
            return False
        if t != LLAMA3_EOS[0]:
            assert m.consume_token(t), f"token {t} is in the mask but consume_token refused it"
    return True


def test_maskbench_sample_is_exact(llama3):
    enc, tok = llama3
    records = load_sample()
    assert len(records) == 400
    bitmask = np.zeros((1, tok.bitmask_width), dtype=np.int32)
    compiled = refused = instances = 0
    wrong = []
    for rec in records:
        try:
            g = maskpar.compile_json_schema(tok, rec["schema"])
        except ValueError:
            refused += 1
            continue
        compiled += 1
        m = maskpar.Matcher(g)
        for test in rec["tests"]:
            m.reset()
            text = json.dumps(test["data"], ensure_ascii=False)
            ids = enc.encode_ordinary(text)
            instances += 1
            if walk(m, ids, bitmask) != test["valid"]:
                wrong.append((rec["file"], test["valid"], text[:200]))
    print(f"\nMaskBench sample: {compiled} compiled, {refused} refused, {instances} instances")
    assert not wrong, wrong[:5]
    # 96% of the full dev split compiles today; a drop in coverage is a regression.
    assert compiled >= 0.93 * len(records), (compiled, refused)


@pytest.mark.parametrize(
    "path",
    [
        "grammars/llama.cpp/grammars/json.gbnf",
        "grammars/llama.cpp/test-grammar-integration.cases.jsonl",
        "grammars/lark/lark/grammars/python.lark",
        "grammars/syncode/syncode/parsers/grammars/python_grammar.lark",
        "json-schema-test-suite/draft2020-12/optional/format/date-time.json",
        "json-schema-test-suite/remotes/integer.json",
    ],
)
def test_the_test_data_is_in_the_repository(path):
    """The corpora are part of the checkout: tests that read them (some
    parametrized over a folder's files) must not quietly find nothing."""
    import os

    from conftest import DATA

    assert os.path.isfile(os.path.join(DATA, path)), f"missing test data {path} under {DATA}"
    assert os.path.isfile(MASKBENCH_SAMPLE)
