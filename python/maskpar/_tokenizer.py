"""Tokenizer loaders: Hugging Face (tokenizers / transformers / tokenizer.json)
and tiktoken-style rank tables, all reduced to exact bytes per token id."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from . import _core

# EOS names tried, in order, when a tokenizer.json gives no explicit EOS.
_KNOWN_EOS = (
    "<|eot_id|>",
    "<|end_of_text|>",
    "<|endoftext|>",
    "<|im_end|>",
    "<｜end▁of▁sentence｜>",
    "</s>",
    "<eos>",
    "<|end|>",
)
_BYTE_FALLBACK = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def _gpt2_byte_decoder() -> dict[str, int]:
    """The inverse of GPT-2's byte-to-printable-character map used by byte-level BPE."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    chars = printable[:]
    n = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(printable, chars)}


_BYTE_DECODER = _gpt2_byte_decoder()


class Tokenizer(_core.Tokenizer):
    """A tokenizer vocabulary as maskpar uses it: the exact bytes of every token
    id, which ids are EOS or special, and the model's logits width
    (``vocab_size``, which may exceed the number of tokens: padded ids are never
    allowed). Special tokens other than EOS are never allowed by a grammar.

    Build one with :meth:`from_vocab`, :meth:`from_huggingface` or
    :meth:`from_tiktoken`; it is immutable and shareable across threads.
    """

    @classmethod
    def from_huggingface(
        cls,
        tokenizer: Any,
        eos_token_ids: Sequence[int] | None = None,
        vocab_size: int | None = None,
    ) -> Tokenizer:
        """From a ``tokenizers.Tokenizer``, a transformers fast tokenizer, a path
        to a ``tokenizer.json`` or to a folder holding one.

        Byte-level BPE pieces and SentencePiece-style pieces (``▁`` for space,
        ``<0xNN>`` byte fallback) are both decoded to their exact bytes. EOS ids
        come from ``eos_token_ids``, else the transformers tokenizer's
        ``eos_token_id``, else ``tokenizer_config.json`` beside the file, else a
        special token with a well-known EOS name; if none is found a ValueError
        asks for ``eos_token_ids``.
        """
        data, eos_hint, special_hint = _load_hf(tokenizer)
        tokens, special = _hf_token_bytes(data)
        specials = sorted(set(special) | {i for i in special_hint if i < len(tokens)})
        if eos_token_ids is None:
            eos_token_ids = eos_hint or _guess_eos(data)
        if not eos_token_ids:
            raise ValueError("could not determine the EOS token id(s); pass eos_token_ids=[...]")
        return cls(tokens, list(eos_token_ids), specials, vocab_size)

    @classmethod
    def from_tiktoken(
        cls,
        mergeable_ranks: Any,
        special_tokens: Mapping[str, int] | None = None,
        eos_token_ids: Sequence[int] | None = None,
        vocab_size: int | None = None,
    ) -> Tokenizer:
        """From a tiktoken rank table (``{token_bytes: id}``) and special tokens
        (``{name: id}``), or from a ``tiktoken.Encoding`` passed as the first
        argument (its ``eot_token`` is the default EOS)."""
        if hasattr(mergeable_ranks, "_mergeable_ranks"):
            enc = mergeable_ranks
            mergeable_ranks = enc._mergeable_ranks
            if special_tokens is None:
                special_tokens = enc._special_tokens
            if eos_token_ids is None and getattr(enc, "eot_token", None) is not None:
                eos_token_ids = [enc.eot_token]
        special_tokens = dict(special_tokens or {})
        if eos_token_ids is None:
            raise ValueError("pass eos_token_ids=[...] (the ids that end generation)")
        entries: list[tuple[int, bytes]] = []
        for tok, rank in mergeable_ranks.items():
            if not isinstance(tok, (bytes, bytearray)):
                raise TypeError(f"mergeable_ranks keys must be bytes, got {type(tok).__name__}")
            entries.append((int(rank), bytes(tok)))
        entries += [(int(i), name.encode("utf-8")) for name, i in special_tokens.items()]
        tokens = _dense(entries)
        return cls(tokens, list(eos_token_ids), sorted(special_tokens.values()), vocab_size)


def _dense(entries: Iterable[tuple[int, bytes]]) -> list[bytes]:
    """Id-indexed token list; ids with no entry get b"" (never allowed)."""
    entries = list(entries)
    if not entries:
        raise ValueError("the vocabulary is empty")
    size = max(i for i, _ in entries) + 1
    if min(i for i, _ in entries) < 0:
        raise ValueError("token ids must be >= 0")
    tokens = [b""] * size
    for i, b in entries:
        tokens[i] = b
    return tokens


def _load_hf(obj: Any) -> tuple[dict, list[int], list[int]]:
    """Returns (tokenizer.json data, EOS ids hint, special ids hint)."""
    if isinstance(obj, (str, os.PathLike)):
        path = os.fspath(obj)
        if os.path.isdir(path):
            path = os.path.join(path, "tokenizer.json")
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return data, _eos_from_config(os.path.dirname(path), data), []
    backend = getattr(obj, "backend_tokenizer", None)
    if backend is not None:  # transformers fast tokenizer
        data = json.loads(backend.to_str())
        eos = getattr(obj, "eos_token_id", None)
        eos_ids = [eos] if isinstance(eos, int) else list(eos or [])
        specials = [i for i in getattr(obj, "all_special_ids", []) if isinstance(i, int)]
        return data, eos_ids, specials
    if hasattr(obj, "to_str"):  # tokenizers.Tokenizer
        return json.loads(obj.to_str()), [], []
    raise TypeError(
        "from_huggingface expects a tokenizers.Tokenizer, a transformers fast tokenizer, "
        f"or a path to tokenizer.json; got {type(obj).__name__}"
    )


def _eos_from_config(folder: str, data: dict) -> list[int]:
    cfg_path = os.path.join(folder, "tokenizer_config.json")
    if not os.path.exists(cfg_path):
        return []
    with open(cfg_path, encoding="utf-8") as f:
        cfg = json.load(f)
    eos = cfg.get("eos_token")
    if isinstance(eos, dict):
        eos = eos.get("content")
    if not isinstance(eos, str):
        return []
    ids = [t["id"] for t in data.get("added_tokens") or [] if t.get("content") == eos]
    return ids[:1]


def _guess_eos(data: dict) -> list[int]:
    by_name = {t["content"]: t["id"] for t in data.get("added_tokens") or [] if t.get("special")}
    for name in _KNOWN_EOS:
        if name in by_name:
            return [by_name[name]]
    return []


def _decoder_kinds(dec: dict | None) -> list[dict]:
    if not dec:
        return []
    if dec.get("type") == "Sequence":
        out: list[dict] = []
        for d in dec.get("decoders") or []:
            out += _decoder_kinds(d)
        return out
    return [dec]


def _hf_token_bytes(data: dict) -> tuple[list[bytes], list[int]]:
    """Exact bytes per id and the special ids, from tokenizer.json data."""
    model = data.get("model") or {}
    mtype = model.get("type")
    if mtype == "Unigram":
        vocab = {piece: i for i, (piece, _score) in enumerate(model["vocab"])}
    elif mtype == "WordPiece":
        raise ValueError(
            "WordPiece vocabularies are not supported: a piece's bytes depend on its neighbours"
        )
    elif isinstance(model.get("vocab"), dict):
        vocab = model["vocab"]
    else:
        raise ValueError(f"unsupported tokenizer model type {mtype!r}")

    decoders = _decoder_kinds(data.get("decoder"))
    kinds = {d.get("type") for d in decoders}
    pre = _decoder_kinds(data.get("pre_tokenizer"))
    byte_level = "ByteLevel" in kinds or any(p.get("type") == "ByteLevel" for p in pre)
    byte_fallback = "ByteFallback" in kinds or bool(model.get("byte_fallback"))
    metaspace = "Metaspace" in kinds or any(
        d.get("type") == "Replace" and (d.get("pattern") or {}).get("String") == "▁"
        for d in decoders
    )

    def piece_bytes(piece: str) -> bytes:
        if byte_fallback:
            m = _BYTE_FALLBACK.fullmatch(piece)
            if m:
                return bytes([int(m.group(1), 16)])
        if byte_level:
            try:
                return bytes(_BYTE_DECODER[c] for c in piece)
            except KeyError:
                return piece.encode("utf-8")
        if metaspace:
            piece = piece.replace("▁", " ")
        return piece.encode("utf-8")

    entries = [(int(i), piece_bytes(p)) for p, i in vocab.items()]
    special: list[int] = []
    for t in data.get("added_tokens") or []:
        content = t["content"]
        if byte_fallback and _BYTE_FALLBACK.fullmatch(content):
            # The model emits <0xNN> for raw bytes of text, even when the file
            # also lists it as an added token: it stays a text (byte) token.
            entries.append((int(t["id"]), piece_bytes(content)))
            continue
        # Added tokens are stored as plain text, not in the model's piece encoding.
        entries.append((int(t["id"]), content.encode("utf-8")))
        if t.get("special"):
            special.append(int(t["id"]))
    return _dense(entries), special
