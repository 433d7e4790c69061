"""``maskpar.integrations._warm``: the framework adapters fill a new grammar's
first mask on the thread that compiled it. That fill must leave the matcher
exactly as it was (state, history, masks), whatever row width came before."""

from __future__ import annotations

import maskpar
from conftest import BYTES, EOS, allowed_ids, new_bitmask
from maskpar.integrations._warm import fill_first_mask

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 5}, "n": {"type": "integer"}},
    "required": ["name"],
}


def rows_along(m: maskpar.Matcher, text: bytes) -> list[list[int]]:
    """The allowed ids before each byte of ``text`` (consumed as it goes), then at its end."""
    rows = []
    bm = new_bitmask(1, m.vocab_size)
    for b in text:
        m.fill_next_token_bitmask(bm, 0)
        rows.append(allowed_ids(bm))
        assert m.consume_token(b)
    m.fill_next_token_bitmask(bm, 0)
    rows.append(allowed_ids(bm))
    return rows


def test_the_first_mask_fill_leaves_the_matcher_as_it_was():
    tok = maskpar.Tokenizer.from_vocab(BYTES, [EOS])
    text = b'{"name": "abc", "n": -12}'
    warmed = maskpar.Matcher(maskpar.compile_json_schema(tok, SCHEMA))
    fill_first_mask(warmed)
    fresh = maskpar.Matcher(maskpar.compile_json_schema(tok, SCHEMA))
    assert rows_along(warmed, text) == rows_along(fresh, text)
    # Nothing was consumed before the walk: its bytes are the whole history.
    warmed.rollback(len(text))
    fresh.rollback(len(text))
    assert rows_along(warmed, b'{"name":""}') == rows_along(fresh, b'{"name":""}')


def test_a_scratch_row_of_another_width_is_replaced():
    small = maskpar.Tokenizer.from_vocab(BYTES, [EOS])
    wide = maskpar.Tokenizer(BYTES, [EOS], [], 4096)
    for tok in (small, wide, small):
        m = maskpar.Matcher(maskpar.compile_regex(tok, "ab+"))
        fill_first_mask(m)
        bm = new_bitmask(1, tok.vocab_size)
        m.fill_next_token_bitmask(bm, 0)
        assert allowed_ids(bm) == [ord("a")]
