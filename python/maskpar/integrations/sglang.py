"""maskpar as an SGLang grammar backend: ``--grammar-backend maskpar``.

SGLang asks a *grammar backend* to compile each request's constraint (a JSON
schema, a regex, an EBNF grammar or a structural tag) into a *grammar object*,
one per request, that the scheduler then drives: ``fill_vocab_mask`` writes the
allowed next tokens into a row of an int32 bitmask (the layout maskpar, xgrammar
and llguidance share), ``accept_token`` advances the state by the sampled token,
``rollback`` undoes tokens. :class:`MaskparGrammarBackend` and
:class:`MaskparGrammar` are those two classes over maskpar's compiler and
:class:`maskpar.Matcher`:

- ``fill_vocab_mask_batched`` fills every row of a decode step in one parallel
  maskpar call, GIL released, instead of one call per request;
- with EAGLE or n-gram speculation, SGLang masks a *draft tree* per request by a
  recursive Python walk (accept, fill, recurse, roll back at every node);
  :func:`register` replaces that walk, for requests whose grammars are
  maskpar's, with one parallel tree fill over the whole batch, as
  :func:`maskpar.fill_next_token_bitmask_par_with_draft_tree` does (see
  :mod:`maskpar.integrations._sglang_tree`).

Reasoning models: SGLang wraps its built-in backends in a reasoning layer that
leaves the output unconstrained until the think-end tokens appear, but a backend
from its registry is returned as is. :func:`create_backend` therefore wraps
itself in SGLang's own ``ReasonerGrammarBackend`` exactly when SGLang would wrap
a built-in one (a ``--reasoning-parser`` whose think-end text the tokenizer
encodes), so thinking budgets, per-request think-end ids and strict thinking
behave as with xgrammar.

Install: ``pip install maskpar[sglang]``. The package declares an
``sglang.srt.plugins`` entry point, which SGLang loads in every process, so
``--grammar-backend maskpar`` works with no code change; in a script, call
:func:`register` before building the engine. This module imports SGLang and
torch; ``import maskpar`` imports neither.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
from typing import Any, Callable

import torch
from sglang.srt.constrained.base_grammar_backend import (
    BaseGrammarBackend,
    BaseGrammarObject,
    GrammarStats,
    InvalidGrammarObject,
    register_grammar_backend,
)

import maskpar

from ._warm import encoder, fill_first_mask, warm_json, warm_stag

logger = logging.getLogger(__name__)

BACKEND_NAME = "maskpar"

__all__ = [
    "BACKEND_NAME",
    "MaskparGrammar",
    "MaskparGrammarBackend",
    "create_backend",
    "register",
]


def _move_vocab_mask(vocab_mask: torch.Tensor, device) -> torch.Tensor:
    """The bitmask on the logits' device (copied without blocking)."""
    return vocab_mask.to(device, non_blocking=True)


def _apply_vocab_mask(logits: torch.Tensor, vocab_mask: torch.Tensor) -> None:
    """Masks logits in place: SGLang's own kernels on accelerators (as its xgrammar
    backend does), maskpar's parallel CPU kernel on the CPU."""
    device = logits.device.type
    if device in {"cuda", "xpu", "musa"}:
        from sglang.srt.utils import is_hip

        if is_hip():
            from sgl_kernel import apply_token_bitmask_inplace_cuda

            apply_token_bitmask_inplace_cuda(logits, vocab_mask)
        else:
            from sglang.kernels.ops.grammar.bitmask_ops import (
                apply_token_bitmask_inplace_triton,
            )

            apply_token_bitmask_inplace_triton(logits, vocab_mask)
    elif device == "npu":
        import sgl_kernel_npu  # noqa: F401

        torch.ops.npu.apply_token_bitmask(logits, vocab_mask)
    else:
        maskpar.apply_token_bitmask_inplace(logits, vocab_mask)


class MaskparGrammar(BaseGrammarObject):
    """One request's grammar state: a :class:`maskpar.Matcher` over a compiled
    grammar shared with every other request that sent the same constraint."""

    def __init__(
        self,
        grammar: maskpar.Grammar,
        tokenizer: maskpar.Tokenizer,
        key_string: str,
        grammar_stats: GrammarStats | None = None,
    ) -> None:
        super().__init__()
        self.compiled = grammar
        self.tokenizer = tokenizer
        self.matcher = maskpar.Matcher(grammar)
        self.key_string = key_string
        self.grammar_stats = grammar_stats
        # Tokens passed to accept_token after termination: SGLang ignores them (as
        # its xgrammar backend does), and rollback must undo them before real ones.
        self._ignored_after_end = 0

    def accept_token(self, token: int) -> None:
        """Advances by ``token``; ValueError if the grammar forbids it (SGLang then
        aborts the request). Tokens after EOS are ignored."""
        if self.matcher.is_terminated():
            self._ignored_after_end += 1
            return
        self.current_token = token
        try:
            accepted = self.matcher.consume_token(int(token))
        except (ValueError, OverflowError, TypeError) as e:
            raise ValueError(f"Token not accepted: {token}: {e}") from e
        if not accepted:
            raise ValueError(f"Token not accepted: {token}\nKey string: {self.key_string}")

    def rollback(self, k: int) -> None:
        """Undoes the last ``k`` accepted tokens (EOS included)."""
        if k <= 0:
            return
        ignored = min(k, self._ignored_after_end)
        self._ignored_after_end -= ignored
        if k > ignored:
            self.matcher.rollback(k - ignored)

    def is_terminated(self) -> bool:
        return self.matcher.is_terminated()

    def allocate_vocab_mask(self, vocab_size: int, batch_size: int, device) -> torch.Tensor:
        """All ones (everything allowed), CPU, pinned when CUDA is present."""
        return maskpar.allocate_token_bitmask(batch_size, vocab_size)

    def fill_vocab_mask(self, vocab_mask: torch.Tensor, idx: int) -> None:
        self.matcher.fill_next_token_bitmask(vocab_mask, idx)

    @staticmethod
    def fill_vocab_mask_batched(entries: list[Any], vocab_mask: torch.Tensor) -> None:
        """Fills every listed row in one parallel maskpar call when all entries are
        maskpar grammars (each once); otherwise row by row, as SGLang does."""
        matchers = [
            (e.grammar.matcher, e.row) for e in entries if type(e.grammar) is MaskparGrammar
        ]
        if len(matchers) == len(entries) and len({id(m) for m, _ in matchers}) == len(matchers):
            if matchers:
                maskpar.fill_next_token_bitmask_par(matchers, vocab_mask)
            return
        for entry in entries:
            entry.grammar.fill_vocab_mask(vocab_mask, entry.row)

    @staticmethod
    def reset_vocab_mask(vocab_mask: torch.Tensor) -> None:
        if vocab_mask.dtype != torch.int32:
            raise TypeError(f"maskpar bitmasks are int32, got {vocab_mask.dtype}")
        vocab_mask.fill_(-1)

    move_vocab_mask = staticmethod(_move_vocab_mask)
    apply_vocab_mask = staticmethod(_apply_vocab_mask)

    def copy(self) -> MaskparGrammar:
        """A fresh request state over the same compiled grammar (SGLang copies
        its cached, never-advanced template for every request)."""
        stats = self.grammar_stats
        if stats is not None:
            changes: dict = {"is_cache_hit": True}
            if any(f.name == "tree_traversal_time" for f in dataclasses.fields(stats)):
                changes["tree_traversal_time"] = []
            stats = dataclasses.replace(stats, **changes)
        return MaskparGrammar(self.compiled, self.tokenizer, self.key_string, stats)

    # Jump-forward: the text every continuation must start with, from maskpar's
    # forced tokens, in the string protocol of SGLang's xgrammar backend.
    def try_jump_forward(self, tokenizer) -> tuple[list[int], str] | None:
        """``(forced token ids, their text)``, or None when nothing is forced. EOS
        is left out, and the tokens are cut where their bytes stop being whole
        UTF-8 characters."""
        if self.matcher.is_terminated():
            return None
        eos = set(self.tokenizer.eos_token_ids)
        forced: list[int] = []
        for t in self.matcher.forced_tokens():
            if t in eos:
                break
            forced.append(t)
        while forced:
            try:
                text = self.tokenizer.decode_bytes(forced).decode("utf-8")
            except UnicodeDecodeError:
                forced.pop()
                continue
            return (forced, text) if text else None
        return None

    def jump_forward_str_state(self, helper: tuple[list[int], str]) -> tuple[str, int]:
        _, text = helper
        return text, -1

    def jump_and_retokenize(
        self, old_output_ids: list[int], new_output_ids: list[int], next_state: int
    ) -> None:
        """Re-syncs after SGLang re-tokenized the output with the jump text
        appended: rolls back to the common prefix, then accepts the new tokens
        (all or none; ValueError if the grammar refuses them)."""
        k = 0
        for old, new in zip(old_output_ids, new_output_ids):
            if old != new:
                break
            k += 1
        if k < len(old_output_ids):
            self.rollback(len(old_output_ids) - k)
        rest = [int(t) for t in new_output_ids[k:]]
        if rest and not self.matcher.consume_tokens(rest):
            raise ValueError(
                f"Tokens not accepted during retokenization: {rest}\nKey string: {self.key_string}"
            )

    def __repr__(self) -> str:
        return (
            f"MaskparGrammar(key_string={self.key_string!r}, consumed={self.matcher.num_consumed})"
        )


def _json_option_support(tokenizer: maskpar.Tokenizer) -> frozenset:
    """Which optional ``compile_json_schema`` keywords this maskpar accepts
    (``key_order``, ``max_whitespace``, ``whitespace_pattern`` arrive with the
    request-formats work), probed once on a trivial schema."""
    probes = {
        "key_order": "schema",
        "max_whitespace": 4,
        "whitespace_pattern": r"[ \n]*",
    }
    supported = set()
    for name, value in probes.items():
        try:
            maskpar.compile_json_schema(tokenizer, {"type": "integer"}, **{name: value})
        except TypeError:
            continue
        supported.add(name)
    return frozenset(supported)


def _maskpar_tokenizer(tokenizer, vocab_size: int, eos_token_ids) -> maskpar.Tokenizer:
    """The model's vocabulary as maskpar sees it: bitmask rows ``vocab_size`` wide
    (the logits width); ids the tokenizer has beyond it can never be sampled, so
    they are dropped."""
    if isinstance(eos_token_ids, int):
        eos = [eos_token_ids]
    else:
        eos = sorted({int(i) for i in eos_token_ids}) if eos_token_ids else None
    tok = maskpar.Tokenizer.from_huggingface(tokenizer, eos_token_ids=eos)
    if tok.vocab_size == vocab_size:
        return tok
    kept = range(min(tok.num_tokens, vocab_size))
    return maskpar.Tokenizer.from_vocab(
        [tok.token_bytes(i) for i in kept],
        eos_token_ids=[i for i in tok.eos_token_ids if i < vocab_size],
        special_token_ids=[i for i in tok.special_token_ids if i < vocab_size],
        vocab_size=vocab_size,
    )


class MaskparGrammarBackend(BaseGrammarBackend):
    """Compiles SGLang's request constraints with maskpar.

    ``any_whitespace`` (SGLang's ``--constrained-json-disable-any-whitespace``
    negated) picks flexible or compact JSON whitespace; ``whitespace_pattern`` and
    ``max_whitespace_cnt`` become ``compile_json_schema``'s ``whitespace_pattern``
    and ``max_whitespace`` (one of them; moot with compact whitespace), checked at
    startup (ValueError) rather than on every request.
    JSON members follow the schema's ``properties`` order, as with xgrammar and
    llguidance, once maskpar offers ``key_order="schema"``.
    ``draft_trees`` (set by ``create_backend`` when the server decodes
    speculatively) makes each new grammar's warm-up walk also fill the states
    a draft tree's tokens split the text into (``_warm.warm_json``'s
    ``split_tokens``): about half again the walk's time, on SGLang's grammar
    threads.
    """

    def __init__(
        self,
        tokenizer,
        vocab_size: int,
        eos_token_ids=None,
        *,
        any_whitespace: bool = True,
        whitespace_pattern: str | None = None,
        max_whitespace_cnt: int | None = None,
        draft_trees: bool = False,
    ) -> None:
        super().__init__()
        self.hf_tokenizer = tokenizer
        self.draft_trees = draft_trees
        self.vocab_size = vocab_size
        self.tokenizer = _maskpar_tokenizer(tokenizer, vocab_size, eos_token_ids)
        supported = _json_option_support(self.tokenizer)
        options: dict = {"whitespace": "flexible" if any_whitespace else "compact"}
        if "key_order" in supported:
            options["key_order"] = "schema"
        else:
            logger.warning(
                "maskpar %s has no key_order='schema': JSON members may come in any "
                "order, not the schema's properties order as with xgrammar",
                maskpar.__version__,
            )
        if whitespace_pattern is not None and max_whitespace_cnt is not None:
            raise ValueError(
                "give SGLang's --constrained-json-whitespace-pattern or "
                "--constrained-json-max-whitespace-cnt, not both, with the maskpar grammar "
                "backend (a pattern bounds its own runs: [ \\t\\n\\r]{0,N})"
            )
        for name, flag, value in (
            ("whitespace_pattern", "whitespace-pattern", whitespace_pattern),
            ("max_whitespace", "max-whitespace-cnt", max_whitespace_cnt),
        ):
            if value is None:
                continue
            if not any_whitespace:
                # Compact JSON has no whitespace between tokens: within any bound.
                logger.info("maskpar: %s is moot with compact JSON whitespace", name)
                continue
            if name not in supported:
                raise ValueError(
                    f"maskpar {maskpar.__version__} cannot apply the JSON whitespace option "
                    f"{name}={value!r} (SGLang's --constrained-json-{flag}); drop the "
                    "option or use another grammar backend"
                )
            options[name] = value
        # A pattern maskpar refuses fails at startup, not on every request.
        maskpar.compile_json_schema(self.tokenizer, {"type": "null"}, **options)
        self.json_options = options
        _install_requested_tree_fill()

    @property
    def is_support_token_filter(self) -> bool:
        return True

    @staticmethod
    def set_token_filter(
        vocab_mask: torch.Tensor,
        token_ids: list[int],
        batch_idx: int,
        is_allowed: bool = True,
        reset_vocab_mask: bool = True,
    ) -> None:
        """Sets or clears single tokens in a row (strict thinking), with SGLang's
        own kernels, as its xgrammar backend does."""
        from sglang.srt.utils import is_hip

        if is_hip() or vocab_mask.device.type != "cuda":
            from sglang.srt.constrained.torch_ops.token_filter_torch_ops import (
                set_token_filter_torch as set_filter,
            )
        else:
            from sglang.kernels.ops.grammar.token_filter_ops import (
                set_token_filter_triton as set_filter,
            )
        set_filter(
            vocab_mask,
            token_ids,
            batch_idx,
            is_allowed=is_allowed,
            reset_vocab_mask=reset_vocab_mask,
        )

    @staticmethod
    def allocate_vocab_mask(vocab_size: int, batch_size: int, device) -> torch.Tensor:
        return maskpar.allocate_token_bitmask(batch_size, vocab_size)

    move_vocab_mask = staticmethod(_move_vocab_mask)
    apply_vocab_mask = staticmethod(_apply_vocab_mask)

    def _compile(
        self,
        kind: str,
        key_string: str,
        compile_fn: Callable[[], maskpar.Grammar],
        schema: Any = None,
        stag: Any = None,
    ) -> BaseGrammarObject:
        """Compiles, or returns SGLang's InvalidGrammarObject carrying the error:
        a bad request must never raise into the scheduler."""
        try:
            grammar = compile_fn()
        except Exception as e:  # noqa: BLE001 - any compile error is the request's
            logger.error("maskpar: invalid %s: %r: %s", kind, key_string[:200], e)
            return InvalidGrammarObject(f"{type(e).__name__}: {e}")
        stats = GrammarStats(dispatch_type=kind)
        result = MaskparGrammar(grammar, self.tokenizer, key_string, stats)
        # On SGLang's grammar thread pool, not in the step (see _warm): a
        # schema's or a structural tag's grammar is walked along a sample
        # text (its first mask included), any other grammar's first mask is
        # filled.
        split = self.draft_trees
        if self.hf_tokenizer is not None and schema is not None:
            warm_json(result.matcher, schema, encoder(self.hf_tokenizer), split)
        elif self.hf_tokenizer is not None and stag is not None:
            warm_stag(result.matcher, stag, encoder(self.hf_tokenizer), split)
        else:
            fill_first_mask(result.matcher)
        return result

    def dispatch_json(self, key_string: str) -> BaseGrammarObject:
        if key_string == "$$ANY$$":
            # Any JSON value, as xgrammar's built-in JSON grammar.
            return self._compile(
                "json",
                key_string,
                lambda: maskpar.compile_json_schema(self.tokenizer, {}, **self.json_options),
            )

        def compile_schema() -> maskpar.Grammar:
            json.loads(key_string)  # a JSON syntax error names itself clearly
            return maskpar.compile_json_schema(self.tokenizer, key_string, **self.json_options)

        return self._compile("json", key_string, compile_schema, schema=key_string)

    def dispatch_regex(self, key_string: str) -> BaseGrammarObject:
        return self._compile(
            "regex", key_string, lambda: maskpar.compile_regex(self.tokenizer, key_string)
        )

    def dispatch_ebnf(self, key_string: str) -> BaseGrammarObject:
        # GBNF / xgrammar-style EBNF (``root ::= ...``) or Lark, told apart by maskpar.
        return self._compile(
            "ebnf",
            key_string,
            lambda: maskpar.compile_grammar(self.tokenizer, key_string, syntax="auto"),
        )

    def dispatch_structural_tag(self, key_string: str) -> BaseGrammarObject:
        # xgrammar's format, current ({"format": ...}) or legacy ({"structures",
        # "triggers"}, with SGLang's at_least_one / stop_after_first).
        return self._compile(
            "structural_tag",
            key_string,
            lambda: maskpar.compile_structural_tag(
                self.tokenizer, _fill_missing_schemas(key_string)
            ),
            stag=key_string,
        )


def _fill_missing_schemas(key_string: str) -> dict[str, Any] | str:
    """SGLang's requests carry ``null`` for a schema the client left out (its
    pydantic models dump every field), and its xgrammar backend reads that as
    ``{}`` (any JSON value): in the legacy ``structures`` and in every
    ``json_schema`` format reachable through tags, sequences and alternatives.
    Done the same here, iteratively (the spec may nest deeply)."""
    try:
        spec = json.loads(key_string)
    except (ValueError, RecursionError):
        return key_string  # maskpar names the problem
    if not isinstance(spec, dict):
        return key_string
    for structure in spec.get("structures") or []:
        if isinstance(structure, dict) and structure.get("schema") is None:
            structure["schema"] = {}
    stack = [spec.get("format")]
    while stack:
        fmt = stack.pop()
        if not isinstance(fmt, dict):
            continue
        kind = fmt.get("type")
        if kind == "json_schema" and fmt.get("json_schema") is None:
            fmt["json_schema"] = {}
        elif kind == "tag":
            stack.append(fmt.get("content"))
        elif kind in ("sequence", "or"):
            stack.extend(fmt.get("elements") or [])
        elif kind in ("triggered_tags", "tags_with_separator"):
            stack.extend(fmt.get("tags") or [])
    return spec


def _with_reasoning(backend: BaseGrammarBackend, tokenizer) -> BaseGrammarBackend:
    """Wraps ``backend`` in SGLang's reasoning layer exactly when SGLang's
    ``create_grammar_backend`` wraps its built-in backends: a reasoning parser is
    configured and the tokenizer encodes its think-end text."""
    from sglang.srt.runtime_context import get_serving

    serving = get_serving()
    if not serving.reasoning_parser or tokenizer is None:
        return backend
    from sglang.srt.constrained.reasoner_grammar_backend import ReasonerGrammarBackend
    from sglang.srt.parser.reasoning_parser import ReasoningParser

    reasoning_parser = ReasoningParser(
        model_type=serving.reasoning_parser, stream_reasoning=False, tokenizer=tokenizer
    )
    if not reasoning_parser.detector.get_think_end_token_ids(tokenizer):
        return backend
    return ReasonerGrammarBackend(
        backend,
        reasoning_parser,
        tokenizer,
        enable_strict_thinking=serving.enable_strict_thinking,
    )


def create_backend(
    server_args, tokenizer, vocab_size: int, eos_token_ids=None
) -> BaseGrammarBackend:
    """SGLang's registry entry: builds the backend from the server's resolved
    options (called by ``create_grammar_backend`` in the scheduler)."""
    from sglang.srt.runtime_context import get_serving

    serving = get_serving()
    backend = MaskparGrammarBackend(
        tokenizer,
        vocab_size,
        eos_token_ids,
        any_whitespace=not serving.constrained_json_disable_any_whitespace,
        whitespace_pattern=serving.constrained_json_whitespace_pattern,
        max_whitespace_cnt=serving.constrained_json_max_whitespace_cnt,
        draft_trees=_speculative(),
    )
    return _with_reasoning(backend, tokenizer)


def _speculative() -> bool:
    """Whether the server decodes speculatively (its drafts are trees: EAGLE,
    ngram); False where this SGLang does not say."""
    try:
        from sglang.srt.runtime_context import get_spec

        return bool(getattr(get_spec(), "speculative_algorithm", None))
    except Exception:  # noqa: BLE001 - an SGLang without the bag: no speculation known
        return False


# Set by register(draft_tree=True): the tree fill is installed as soon as SGLang's
# speculative module is loaded, at the latest when a backend is created.
_draft_tree_requested = False
_SPEC_UTILS = "sglang.srt.speculative.spec_utils"


def register(*, draft_tree: bool = True) -> None:
    """Makes ``maskpar`` a grammar backend of this process's SGLang: adds it to
    the registry and to ``--grammar-backend``'s choices, and (``draft_tree``)
    routes the speculative draft-tree mask through one parallel maskpar call.
    Idempotent; SGLang calls it through the ``sglang.srt.plugins`` entry point,
    in every process.

    The tree fill patches ``spec_utils.generate_token_bitmask`` now if that
    module is loaded, else when a :class:`MaskparGrammarBackend` is created (in
    the scheduler, before any verify step), so processes that never decode do
    not import SGLang's speculative stack. Raises RuntimeError, after
    registering the backend, when this SGLang is not a version the tree fill
    was checked against (the backend then runs through SGLang's own walk).
    """
    global _draft_tree_requested
    from sglang.srt.constrained.base_grammar_backend import GRAMMAR_BACKEND_REGISTRY
    from sglang.srt.server_args import GRAMMAR_BACKEND_CHOICES, add_grammar_backend_choices

    if GRAMMAR_BACKEND_REGISTRY.get(BACKEND_NAME) is not create_backend:
        register_grammar_backend(BACKEND_NAME, create_backend)
    if BACKEND_NAME not in GRAMMAR_BACKEND_CHOICES:
        add_grammar_backend_choices([BACKEND_NAME])
    if not draft_tree:
        return
    from ._sglang_tree import check_version_name, install_draft_tree_fill

    _draft_tree_requested = True
    if _SPEC_UTILS in sys.modules:
        install_draft_tree_fill()
    else:
        check_version_name()


def _install_requested_tree_fill() -> None:
    """At backend creation: the deferred half of ``register()``. A version it
    cannot patch is logged, never raised into SGLang's startup."""
    if not _draft_tree_requested:
        return
    from ._sglang_tree import install_draft_tree_fill

    try:
        install_draft_tree_fill()
    except RuntimeError as e:
        logger.error("%s", e)


def _unwrap(grammar: Any) -> tuple[MaskparGrammar | None, bool]:
    """``(maskpar grammar, in_generation)`` for a request grammar that is a
    :class:`MaskparGrammar`, bare or inside SGLang's reasoning wrapper;
    ``(None, False)`` for anything else. ``in_generation`` is False while the
    wrapper still follows the reasoning, where it, not the grammar, decides."""
    if type(grammar) is MaskparGrammar:
        return grammar, True
    inner = getattr(grammar, "grammar", None)
    if type(inner) is not MaskparGrammar:
        return None, False
    from sglang.srt.constrained.reasoner_grammar_backend import ReasonerGrammarObject

    if type(grammar) is not ReasonerGrammarObject:
        return None, False
    return inner, bool(grammar._is_generation())
