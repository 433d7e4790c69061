"""Drafts from a model with another tokenizer: re-express token ids of one
vocabulary as token ids of another, through the text they spell.

A grammar compiled once serves both vocabularies (``Grammar.for_tokenizer``),
and masks follow the grammar's byte-level language, so any tokenization of
allowed text is allowed: text a draft model produced under its own mask is
accepted by the target's matcher once re-expressed with this helper.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ._tokenizer import Tokenizer


def _utf8_prefix_len(data: bytes) -> int:
    """Length of the longest prefix of ``data`` that is valid UTF-8."""
    try:
        data.decode("utf-8")
        return len(data)
    except UnicodeDecodeError as e:
        return e.start


def translate_tokens(
    token_ids: Sequence[int],
    source: Tokenizer,
    target: Tokenizer,
    encode: Callable[[str], Sequence[int]] | None = None,
) -> list[int]:
    """The ids of ``target`` that spell the same text as ``token_ids`` of ``source``.

    With ``encode`` (the target tokenizer's own encoder, e.g.
    ``lambda s: hf_tok.encode(s, add_special_tokens=False)``) the result is the
    target's canonical tokenization: the longest valid UTF-8 prefix of the
    text goes through ``encode`` and the bytes after it (an incomplete
    character at the end of a draft, or invalid UTF-8) are split by
    :meth:`Tokenizer.encode_greedy`. Without ``encode`` the whole text is split
    greedily (longest match), which is a valid tokenization but not
    necessarily the one the target model was trained on.

    A source EOS id ends the text: the target's first EOS id is appended and
    later ids are ignored. Other special ids have no text and raise ValueError,
    as do ids out of range and text that ``target`` cannot spell.
    """
    eos = set(source.eos_token_ids)
    special = set(source.special_token_ids)
    text: list[int] = []
    ended = False
    for i, t in enumerate(token_ids):
        t = int(t)
        if t in eos:
            ended = True
            break
        if t in special:
            raise ValueError(f"token {i} (id {t}) is a special token of the source vocabulary")
        text.append(t)
    data = source.decode_bytes(text)
    if encode is None:
        out = target.encode_greedy(data)
    else:
        n = _utf8_prefix_len(data)
        out = [int(x) for x in encode(data[:n].decode("utf-8"))]
        bad = [x for x in out if not 0 <= x < target.vocab_size]
        if bad:
            raise ValueError(f"encode returned ids outside the target vocabulary: {bad[:5]}")
        out += target.encode_greedy(data[n:])
    if ended:
        if not target.eos_token_ids:
            raise ValueError("the target vocabulary has no EOS id to translate EOS to")
        out.append(target.eos_token_ids[0])
    return out
