"""The patches :func:`maskpar.integrations.vllm.register` applies to vLLM 0.33.

vLLM has no registry for third-party structured-output backends (its RFC
#50966 is open), so the backend name is added where vLLM hard-codes its list:

1. ``StructuredOutputsConfig.backend`` (a pydantic ``Literal``) gains
   ``"maskpar"``, and its validator lets maskpar take ``disable_any_whitespace``
   and ``disable_additional_properties``; the pydantic schemas of it and of
   ``VllmConfig`` (which embeds it) are rebuilt.
2. ``SamplingParams._validate_structured_outputs`` (frontend) checks maskpar
   requests itself; vLLM's would route an unknown backend through its "auto"
   branch to xgrammar.
3. ``StructuredOutputManager.grammar_init`` builds a ``MaskparBackend`` when a
   request resolved to "maskpar".
4. ``StructuredOutputManager.grammar_bitmask`` runs ``_vllm_step`` for maskpar
   grammars (one parallel call per step) and vLLM's own code otherwise.

Every patched function is kept in ``ORIGINALS`` (tests use vLLM's own
``grammar_bitmask`` as the oracle). Patching twice is a no-op.
"""

from __future__ import annotations

import json
from typing import Any, Literal, get_args

from .vllm import BACKEND_NAME, MaskparBackend

ORIGINALS: dict[str, Any] = {}
_MARK = "__maskpar_patch__"


def install() -> None:
    """Applies all patches (idempotent)."""
    _patch_config()
    _patch_request_validation()
    _patch_manager()


def _patch_config() -> None:
    from pydantic.dataclasses import rebuild_dataclass
    from vllm.config import structured_outputs as so_module
    from vllm.config.structured_outputs import StructuredOutputsConfig

    names = get_args(so_module.StructuredOutputsBackend)
    if BACKEND_NAME in names:
        return
    backend_type = Literal[(*names, BACKEND_NAME)]  # type: ignore[valid-type]
    so_module.StructuredOutputsBackend = backend_type
    cls = StructuredOutputsConfig
    cls.__annotations__["backend"] = backend_type
    cls.__dataclass_fields__["backend"].type = backend_type
    cls.__pydantic_fields__["backend"].annotation = backend_type

    decorator = cls.__pydantic_decorators__.model_validators["_validate_structured_output_config"]
    original = decorator.func
    ORIGINALS["StructuredOutputsConfig._validate_structured_output_config"] = original

    def validate(self: StructuredOutputsConfig) -> StructuredOutputsConfig:
        # maskpar takes both JSON options; vLLM's check allows them only for its own.
        if self.backend == BACKEND_NAME:
            return self
        return original(self)

    decorator.func = validate
    rebuild_dataclass(cls, force=True)
    # VllmConfig's schema holds a copy of StructuredOutputsConfig's: rebuild it too.
    import sys

    from vllm.config import VllmConfig

    rebuild_dataclass(
        VllmConfig, force=True, _types_namespace=vars(sys.modules[VllmConfig.__module__])
    )


def _validate_maskpar_request(params: Any, model_config: Any, tokenizer: Any) -> None:
    """vLLM 0.33's request checks common to all backends, then maskpar's own.

    Grammars are compiled in the engine, not here: a schema or grammar that
    maskpar refuses fails that request with vLLM's "Invalid structured
    outputs" error, as a failed xgrammar compile does.
    """
    from vllm.exceptions import VLLMValidationError
    from vllm.sampling_params import check_json_nesting

    so = params.structured_outputs
    if model_config.is_diffusion:
        raise VLLMValidationError(
            "Structured outputs are not yet supported for diffusion language models."
        )
    if tokenizer is None:
        raise VLLMValidationError(
            "Structured outputs requires a tokenizer so it can't be used with 'skip_tokenizer_init'"
        )
    if so._backend and so._backend != BACKEND_NAME:
        raise VLLMValidationError(
            "Request-level structured output backend selection is not supported. "
            f"The request specified '{so._backend}', but vLLM was initialised with "
            f"'{BACKEND_NAME}'. This error can be resolved by removing '_backend' "
            "from the request."
        )
    so._backend = BACKEND_NAME
    if isinstance(so.choice, list) and not so.choice:
        raise VLLMValidationError(f"Choice '{so.choice}' cannot be an empty list")
    for name in ("grammar", "json", "structural_tag"):
        value = getattr(so, name)
        if isinstance(value, str) and value.strip() == "":
            raise VLLMValidationError(f"structured_outputs.{name} cannot be an empty string")
    check_json_nesting(so.json)
    check_json_nesting(so.structural_tag, structural_tag=True)
    if so.json_object is False:
        raise VLLMValidationError(
            "structured_outputs.json_object must be True if set; omit "
            "structured_outputs to disable structured outputs"
        )
    if so.regex and "\x00" in so.regex:
        raise VLLMValidationError(
            "structured_outputs.regex must not contain a NUL character ('\\x00')"
        )
    # maskpar's own limits.
    if so.whitespace_pattern is not None:
        _carry_whitespace_pattern(so)
    if so.structural_tag is not None:
        try:
            json.loads(so.structural_tag)
        except json.JSONDecodeError as e:
            raise VLLMValidationError("Invalid structural tag specification.") from e
    if isinstance(so.json, str):
        try:
            json.loads(so.json)
        except json.JSONDecodeError as e:
            raise VLLMValidationError("Invalid JSON grammar specification.") from e
    so.__post_init__()


def _carry_whitespace_pattern(so: Any) -> None:
    """Checks a request's ``whitespace_pattern`` and, for JSON requests,
    moves it into the grammar spec (the engine's backend sees only the spec;
    see ``vllm.wrap_json_spec``). vLLM's own backends ignore the option;
    maskpar applies it to the flexible whitespace between JSON tokens. Other
    request types have no such whitespace, so it is moot there."""
    from vllm.exceptions import VLLMValidationError

    from .vllm import check_whitespace_pattern, wrap_json_spec

    if not isinstance(so.whitespace_pattern, str):
        raise VLLMValidationError("structured_outputs.whitespace_pattern must be a string")
    try:
        check_whitespace_pattern(so.whitespace_pattern)
    except ValueError as e:
        raise VLLMValidationError(f"Invalid whitespace_pattern: {e}") from e
    if so.json is not None:
        spec = so.json
        if isinstance(spec, str):
            try:
                spec = json.loads(spec)
            except json.JSONDecodeError as e:
                raise VLLMValidationError("Invalid JSON grammar specification.") from e
        so.json = wrap_json_spec(spec, so.whitespace_pattern)
    elif so.json_object:
        so.json_object = None
        so.json = wrap_json_spec({"type": "object"}, so.whitespace_pattern)


def _patch_request_validation() -> None:
    from vllm.sampling_params import SamplingParams

    current = SamplingParams._validate_structured_outputs
    if getattr(current, _MARK, False):
        return
    ORIGINALS["SamplingParams._validate_structured_outputs"] = current

    def _validate_structured_outputs(
        self: SamplingParams, model_config: Any, structured_outputs_config: Any, tokenizer: Any
    ) -> None:
        if (
            structured_outputs_config is not None
            and self.structured_outputs is not None
            and structured_outputs_config.backend == BACKEND_NAME
        ):
            _validate_maskpar_request(self, model_config, tokenizer)
            return
        current(self, model_config, structured_outputs_config, tokenizer)

    setattr(_validate_structured_outputs, _MARK, True)
    SamplingParams._validate_structured_outputs = _validate_structured_outputs


def _patch_manager() -> None:
    from vllm.v1.structured_output import StructuredOutputManager

    from . import _vllm_step

    grammar_init = StructuredOutputManager.grammar_init
    if getattr(grammar_init, _MARK, False):
        return
    grammar_bitmask = StructuredOutputManager.grammar_bitmask
    ORIGINALS["StructuredOutputManager.grammar_init"] = grammar_init
    ORIGINALS["StructuredOutputManager.grammar_bitmask"] = grammar_bitmask

    def patched_grammar_init(self: StructuredOutputManager, request: Any) -> None:
        if self.backend is None and request.structured_output_request is not None:
            so = request.sampling_params.structured_outputs
            if so is not None and so._backend == BACKEND_NAME:
                self.backend = MaskparBackend(
                    self.vllm_config,
                    tokenizer=self.tokenizer,
                    vocab_size=self.vllm_config.model_config.get_vocab_size(),
                )
                self.backend_name = BACKEND_NAME
        grammar_init(self, request)

    def patched_grammar_bitmask(
        self: StructuredOutputManager,
        requests: Any,
        structured_output_request_ids: list[str],
        scheduled_spec_decode_tokens: dict[str, list[int]],
    ) -> Any:
        if isinstance(self.backend, MaskparBackend):
            result = _vllm_step.grammar_bitmask(
                self, requests, structured_output_request_ids, scheduled_spec_decode_tokens
            )
            if result is not NotImplemented:
                return result
        return grammar_bitmask(
            self, requests, structured_output_request_ids, scheduled_spec_decode_tokens
        )

    for patched, original in (
        (patched_grammar_init, grammar_init),
        (patched_grammar_bitmask, grammar_bitmask),
    ):
        setattr(patched, _MARK, True)
        patched.__doc__ = original.__doc__
        patched.__wrapped__ = original  # type: ignore[attr-defined]
    StructuredOutputManager.grammar_init = patched_grammar_init
    StructuredOutputManager.grammar_bitmask = patched_grammar_bitmask
