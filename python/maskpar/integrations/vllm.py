"""maskpar as a vLLM structured-output backend.

vLLM (0.33) builds one ``StructuredOutputBackend`` per engine and asks it for a
``StructuredOutputGrammar`` per request; its ``StructuredOutputManager`` then
fills one bitmask row per (request, draft position) every step. This module
provides both classes on top of maskpar and a :func:`register` function, run
by vLLM in every process through the ``vllm.general_plugins`` entry point,
that

* makes ``backend="maskpar"`` valid in ``StructuredOutputsConfig`` (and so in
  ``LLM(..., structured_outputs_config={"backend": "maskpar"})`` and
  ``vllm serve ... --structured-outputs-config.backend maskpar``), together
  with its ``disable_any_whitespace`` and ``disable_additional_properties``
  options;
* validates maskpar requests in the frontend instead of letting vLLM's
  "auto" path route them to xgrammar;
* makes the manager build a :class:`MaskparBackend` for them;
* turns the manager's per-request speculative loop into one parallel maskpar
  call per step (see ``_vllm_step``), rows bit-identical to vLLM's own loop.

vLLM has no registry for third-party backends, so these are patches of vLLM
internals: :func:`register` checks the installed vLLM version first and
refuses, naming it, any version it was not written against.

This module imports vLLM (and torch) when it is imported; ``import maskpar``
never imports it.
"""

from __future__ import annotations

import collections
import functools
import inspect
import json
import logging
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import vllm
from vllm.v1.structured_output.backend_types import (
    StructuredOutputBackend,
    StructuredOutputGrammar,
    StructuredOutputOptions,
)

import maskpar
from maskpar._torch import _allocate

from ._warm import encoder, fill_first_mask, warm_json, warm_stag

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

BACKEND_NAME = "maskpar"
# vLLM (major, minor) releases whose internals register() was written against.
SUPPORTED_VLLM_VERSIONS = ((0, 33),)
# Compiled grammars kept per backend (each holds its own mask caches, so few), and
# tokenizers kept per distinct stop-token set.
GRAMMAR_CACHE_SIZE = 128
STOP_SET_CACHE_SIZE = 16


def vllm_version() -> tuple[int, int]:
    """The installed vLLM's (major, minor), from ``vllm.__version__``."""
    match = re.match(r"(\d+)\.(\d+)", str(vllm.__version__))
    if match is None:
        raise RuntimeError(f"maskpar cannot parse the installed vLLM version {vllm.__version__!r}")
    return int(match.group(1)), int(match.group(2))


def check_vllm_version() -> None:
    """Raises RuntimeError naming the installed vLLM if register() does not support it."""
    if vllm_version() not in SUPPORTED_VLLM_VERSIONS:
        supported = ", ".join(f"{a}.{b}.x" for a, b in SUPPORTED_VLLM_VERSIONS)
        raise RuntimeError(
            f"maskpar's vLLM backend supports vLLM {supported}; the installed vLLM is "
            f"{vllm.__version__}. Install a supported vLLM, or disable the plugin "
            "(VLLM_PLUGINS without 'maskpar')."
        )


class MaskparGrammar(StructuredOutputGrammar):
    """One request's grammar state: a :class:`maskpar.Matcher` with vLLM's
    semantics (those of vLLM's xgrammar backend): tokens after the grammar
    terminated are ignored by ``accept_tokens`` and refused by
    ``validate_tokens``; ``rollback`` undoes the end token too."""

    def __init__(self, grammar: maskpar.Grammar, eos_token_ids: Iterable[int]) -> None:
        self.grammar = grammar
        self.matcher = maskpar.Matcher(grammar)
        self.vocab_size = grammar.vocab_size
        # The ids whose consumption terminates the matcher (the request's stop tokens).
        self.eos_token_ids = frozenset(eos_token_ids)

    def _valid_prefix_len(self, tokens: list[int]) -> int:
        """How many leading ids are token ids at all (a negative or too-large id
        is refused like a forbidden token, not raised)."""
        for i, t in enumerate(tokens):
            if not 0 <= t < self.vocab_size:
                return i
        return len(tokens)

    def accept_tokens(self, request_id: str, tokens: list[int]) -> bool:
        if self.matcher.is_terminated():
            return True
        for t in tokens:
            if not (0 <= t < self.vocab_size and self.matcher.consume_token(t)):
                logger.error("maskpar: grammar refused token %s for request %s", t, request_id)
                return False
            if self.matcher.is_terminated():
                break
        return True

    def validate_tokens(self, tokens: list[int]) -> list[int]:
        if self.matcher.is_terminated() or not tokens:
            return []
        tokens = list(tokens[: self._valid_prefix_len(tokens)])
        n = self.matcher.validate_tokens(tokens) if tokens else 0
        # A terminated matcher still takes an end token; vLLM stops after the first.
        for i in range(n):
            if tokens[i] in self.eos_token_ids:
                n = i + 1
                break
        return tokens[:n]

    def rollback(self, num_tokens: int) -> None:
        if num_tokens > 0:
            self.matcher.rollback(num_tokens)

    def fill_bitmask(self, bitmask: torch.Tensor, batch_index: int) -> None:
        self.matcher.fill_next_token_bitmask(bitmask, batch_index)

    def is_terminated(self) -> bool:
        return self.matcher.is_terminated()

    def reset(self) -> None:
        self.matcher.reset()


class _LRU:
    """A small thread-safe LRU map (grammars compile on vLLM's thread pool)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: collections.OrderedDict[Any, Any] = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: Any, value: Any) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


def _json_schema_accepts_key_order(tokenizer: maskpar.Tokenizer) -> bool:
    """Whether this maskpar's compile_json_schema has ``key_order="schema"``
    (being added to maskpar; until then JSON members come in any order)."""
    try:
        return "key_order" in inspect.signature(maskpar.compile_json_schema).parameters
    except (TypeError, ValueError):  # no signature available: ask the function
        pass
    try:
        maskpar.compile_json_schema(tokenizer, {"type": "object"}, key_order="schema")
    except (TypeError, ValueError):
        return False
    return True


# A JSON request's spec with its whitespace_pattern (set by the request
# validator in the frontend, read by the backend in the engine).
_WRAPPED_SCHEMA = "$maskpar-schema"
_WRAPPED_PATTERN = "$maskpar-whitespace-pattern"


def wrap_json_spec(schema: Any, whitespace_pattern: str) -> str:
    """The spec of a JSON request whose flexible whitespace must match
    ``whitespace_pattern`` (vLLM hands the backend only the spec)."""
    return json.dumps({_WRAPPED_SCHEMA: schema, _WRAPPED_PATTERN: whitespace_pattern})


def unwrap_json_spec(spec: Any) -> tuple[Any, str | None]:
    """The schema and whitespace pattern of a JSON request's spec."""
    value = json.loads(spec) if isinstance(spec, str) else spec
    if isinstance(value, dict) and set(value) == {_WRAPPED_SCHEMA, _WRAPPED_PATTERN}:
        return value[_WRAPPED_SCHEMA], value[_WRAPPED_PATTERN]
    return spec, None


@functools.cache
def _pattern_check_tokenizer() -> maskpar.Tokenizer:
    return maskpar.Tokenizer.from_vocab([bytes([i]) for i in range(256)], eos_token_ids=[])


def check_whitespace_pattern(pattern: str) -> None:
    """Raises ValueError if maskpar refuses ``pattern`` as a JSON
    ``whitespace_pattern`` (not a regex, or it matches something other than
    JSON whitespace)."""
    tok = _pattern_check_tokenizer()
    maskpar.compile_json_schema(tok, {"type": "null"}, whitespace_pattern=pattern)


def choice_as_regex(choices: list[str]) -> str:
    """A regex (maskpar's Rust syntax) matching exactly one of ``choices``:
    ASCII letters, digits and ``_`` and all non-ASCII characters stand for
    themselves; every other character is written as ``\\x{..}``."""
    if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
        raise ValueError("a choice request must be a JSON list of strings")
    if not choices:
        raise ValueError("a choice request needs at least one choice")

    def escape(text: str) -> str:
        return "".join(
            c
            if c.isascii() and (c.isalnum() or c == "_") or not c.isascii()
            else f"\\x{{{ord(c):x}}}"
            for c in text
        )

    return "(?:" + "|".join(escape(c) for c in choices) + ")"


@dataclass
class MaskparBackend(StructuredOutputBackend):
    """Engine-level backend: one maskpar tokenizer (built once from vLLM's
    tokenizer, ``vocab_size`` = the model's logits width) and a cache of
    compiled grammars shared by all requests.

    Request types: JSON (``disable_any_whitespace`` -> compact,
    ``disable_additional_properties`` -> ``additionalProperties: false`` where
    absent, exactly as vLLM's guidance backend rewrites the schema; members in
    schema order, ``key_order="schema"``, as vLLM's xgrammar and guidance
    backends generate them; a request's ``whitespace_pattern``, which the
    request validator carries in the spec, as ``whitespace_pattern``),
    JSON_OBJECT, REGEX, GRAMMAR (Lark or GBNF, told apart by vLLM's own
    ``grammar_is_likely_lark``), CHOICE (a regex of the escaped literals).
    STRUCTURAL_TAG (xgrammar's format, current or legacy, forwarded as JSON
    text: ``compile_structural_tag``). A grammar that
    fails to compile raises ValueError, which vLLM turns into an error for that
    request only.

    The request's stop tokens (``stop_token_ids``: its EOS and user stop ids)
    are the grammar's end tokens: allowed exactly when the grammar accepts,
    and consuming one terminates it (xgrammar's ``override_stop_tokens``).
    """

    def __post_init__(self) -> None:
        from vllm.utils.mistral import is_mistral_tokenizer

        if is_mistral_tokenizer(self.tokenizer):
            raise ValueError(
                "the maskpar structured-output backend does not support Mistral "
                "tokenizers yet; use tokenizer_mode='hf' or another backend"
            )
        so_config = self.vllm_config.structured_outputs_config
        self.disable_any_whitespace = bool(so_config.disable_any_whitespace)
        self.disable_additional_properties = bool(so_config.disable_additional_properties)
        base = maskpar.Tokenizer.from_huggingface(self.tokenizer)
        self._token_bytes = [base.token_bytes(i) for i in range(base.num_tokens)]
        # Ids at or past the model's logits width can never be sampled.
        del self._token_bytes[self.vocab_size :]
        self._special_ids = [i for i in base.special_token_ids if i < len(self._token_bytes)]
        default_eos = [i for i in base.eos_token_ids if i < len(self._token_bytes)]
        self.default_eos_token_ids = frozenset(default_eos)
        self.mp_tokenizer = maskpar.Tokenizer(
            self._token_bytes, sorted(default_eos), self._special_ids, self.vocab_size
        )
        self.json_key_order_schema = _json_schema_accepts_key_order(self.mp_tokenizer)
        if not self.json_key_order_schema:
            logger.warning(
                "maskpar %s has no key_order option: JSON members may come in any "
                "order (xgrammar and guidance keep the schema's order)",
                maskpar.__version__,
            )
        self._stop_set_tokenizers = _LRU(STOP_SET_CACHE_SIZE)
        self._grammars = _LRU(GRAMMAR_CACHE_SIZE)
        # The manager asks for its bitmask inside its first step's
        # grammar_bitmask: megabytes of fresh pages (0.5-1 ms at 256
        # sequences, more when pinned), a request's first step five to ten
        # times its others. Made here, as the backend starts with its first
        # request, it is handed over then (`allocate_token_bitmask`).
        config = self.vllm_config
        rows = config.scheduler_config.max_num_seqs * (1 + config.num_speculative_tokens)
        self._first_bitmask: torch.Tensor | None = _allocate(rows, self.vocab_size, recycle=False)
        self._first_rows = rows
        from . import _vllm_step  # it imports this module

        # The first step's one-time paths too, and its numpy view.
        self._first_view = _vllm_step.prime(self._first_bitmask, self.mp_tokenizer)

    # -- compiling --------------------------------------------------------

    def _json_options(self, whitespace_pattern: str | None = None) -> dict[str, Any]:
        options: dict[str, Any] = {
            "whitespace": "compact" if self.disable_any_whitespace else "flexible"
        }
        if self.json_key_order_schema:
            options["key_order"] = "schema"
        if whitespace_pattern is not None and not self.disable_any_whitespace:
            # Compact JSON has no whitespace between tokens, which any
            # pattern allows (checked: it matches JSON whitespace only).
            options["whitespace_pattern"] = whitespace_pattern
        return options

    def _compile_base(self, request_type: StructuredOutputOptions, spec: str) -> maskpar.Grammar:
        """Compiles ``spec`` over the default tokenizer (ValueError on bad input)."""
        from vllm.v1.structured_output.utils import grammar_is_likely_lark

        tok = self.mp_tokenizer
        if request_type == StructuredOutputOptions.JSON:
            schema, pattern = unwrap_json_spec(spec)
            if self.disable_additional_properties:
                from vllm.v1.structured_output.backend_guidance import (
                    process_for_additional_properties,
                )

                schema = process_for_additional_properties(schema)
            return maskpar.compile_json_schema(tok, schema, **self._json_options(pattern))
        if request_type == StructuredOutputOptions.JSON_OBJECT:
            return maskpar.compile_json_schema(tok, {"type": "object"}, **self._json_options())
        if request_type == StructuredOutputOptions.REGEX:
            return maskpar.compile_regex(tok, spec)
        if request_type == StructuredOutputOptions.GRAMMAR:
            syntax = "lark" if grammar_is_likely_lark(spec) else "gbnf"
            return maskpar.compile_grammar(tok, spec, syntax=syntax)
        if request_type == StructuredOutputOptions.CHOICE:
            try:
                choices = json.loads(spec)
            except json.JSONDecodeError as e:
                raise ValueError(f"invalid choice list: {e}") from e
            return maskpar.compile_regex(tok, choice_as_regex(choices))
        if request_type == StructuredOutputOptions.STRUCTURAL_TAG:
            # Both shapes: {"format": ...} and the legacy {"structures", "triggers"}.
            return maskpar.compile_structural_tag(tok, spec)
        raise ValueError(f"unknown structured output request type {request_type!s}")

    def _tokenizer_for(self, stop_token_ids: Iterable[int] | None) -> maskpar.Tokenizer:
        """The tokenizer whose end tokens are ``stop_token_ids`` (ids that are
        not token ids are left out; none left means the tokenizer's own EOS)."""
        num_tokens = len(self._token_bytes)
        stops = frozenset(
            i for i in (stop_token_ids or ()) if isinstance(i, int) and 0 <= i < num_tokens
        )
        if not stops or stops == self.default_eos_token_ids:
            return self.mp_tokenizer
        tok = self._stop_set_tokenizers.get(stops)
        if tok is None:
            tok = maskpar.Tokenizer(
                self._token_bytes, sorted(stops), self._special_ids, self.vocab_size
            )
            self._stop_set_tokenizers.put(stops, tok)
        return tok

    def compile_grammar(
        self,
        request_type: StructuredOutputOptions,
        grammar_spec: str,
        stop_token_ids: set[int] | None = None,
    ) -> StructuredOutputGrammar:
        key = (request_type, grammar_spec, tuple(sorted(self._json_options().items())))
        grammar = self._grammars.get(key)
        new = grammar is None
        if grammar is None:
            grammar = self._compile_base(request_type, grammar_spec)
            self._grammars.put(key, grammar)
        tok = self._tokenizer_for(stop_token_ids)
        if tok is not self.mp_tokenizer:
            grammar, new = grammar.for_tokenizer(tok), True  # caches of its own
        result = MaskparGrammar(grammar, tok.eos_token_ids)
        # On vLLM's compile pool, not in the step (see _warm): a new schema's
        # or structural tag's grammar is walked along a sample text (its first
        # mask included), any other grammar's first mask is filled.
        if new and request_type == StructuredOutputOptions.JSON:
            warm_json(result.matcher, grammar_spec, encoder(self.tokenizer))
        elif new and request_type == StructuredOutputOptions.STRUCTURAL_TAG:
            warm_stag(result.matcher, grammar_spec, encoder(self.tokenizer))
        else:
            fill_first_mask(result.matcher)
        return result

    def allocate_token_bitmask(self, max_num_seqs: int) -> torch.Tensor:
        """The manager's bitmask, allocated once and kept for its life: the
        one made when the backend started, if it has that many rows (the
        manager's first call), else a new one (all ones)."""
        made, self._first_bitmask = self._first_bitmask, None
        # Its row count as kept (a tensor's shape is a slow read in a step).
        if made is not None and self._first_rows == max_num_seqs:
            return made
        self._first_view = None
        return _allocate(max_num_seqs, self.vocab_size, recycle=False)

    def _take_first_view(self, bitmask: torch.Tensor) -> tuple[Any, Any, Any] | None:
        """The numpy view ``_vllm_step.prime`` made of the first bitmask, as
        the step keeps views, if ``bitmask`` is that tensor; given once."""
        kept, self._first_view = self._first_view, None
        return kept if kept is not None and kept[0] is bitmask else None

    def destroy(self) -> None:
        self._first_bitmask = self._first_view = None
        self._grammars.clear()
        self._stop_set_tokenizers.clear()


_registered = False
_register_lock = threading.Lock()


def register() -> None:
    """Makes ``backend="maskpar"`` selectable in the installed vLLM (idempotent).

    Raises RuntimeError naming the installed vLLM version if it is not one
    these patches were written against (see ``SUPPORTED_VLLM_VERSIONS``).
    """
    global _registered
    with _register_lock:
        if _registered:
            return
        check_vllm_version()
        from . import _vllm_patches

        _vllm_patches.install()
        _registered = True
