"""The README's main job: the constrained speculative-decoding demo runs on
the real Llama-3 vocabulary and every record it writes matches the schema,
although the unconstrained toy model would break it."""

from __future__ import annotations

import re

import pytest


def test_demo_output_matches_the_constraint(capsys):
    pytest.importorskip("quicktok")
    from maskpar import demo

    demo.main(["--batch", "3", "--drafts", "4", "--threads", "2"])
    out = capsys.readouterr().out
    results = re.findall(r"request \d+: .*?-> matches: (True|False)", out)
    wanted = re.findall(r"unconstrained model wanted: .*?-> matches: (True|False)", out)
    assert results == ["True"] * 3, out
    assert wanted == ["False"] * 3, out
    assert re.search(r"\d+ drafts valid, \d+ forced", out)
