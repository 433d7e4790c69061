"""maskpar: grammar token masks for LLM decoding, filled in parallel across
batch x speculative-draft positions.

The bitmask contract (shared with xgrammar and llguidance): int32, shape
``[rows, ceil(vocab_size / 32)]``, C-contiguous, on the CPU; token ``t`` is
allowed iff bit ``t % 32`` of word ``t // 32`` is set. Bitmasks are written in
place, never copied. ``import maskpar`` does not import torch; the torch helpers
import it when first called.
"""

from ._core import (
    MAX_INDENT_DEPTH,
    Grammar,
    Matcher,
    __version__,
    compile_grammar,
    compile_json_schema,
    compile_regex,
    compile_structural_tag,
    fill_next_token_bitmask_par,
    fill_next_token_bitmask_par_with_draft_tokens,
    fill_next_token_bitmask_par_with_draft_tree,
    get_num_threads,
    grammar_aware_drafts,
    schema_cache_info,
    set_num_threads,
)
from ._crossvocab import translate_tokens
from ._tokenizer import Tokenizer
from ._torch import allocate_token_bitmask, apply_token_bitmask_inplace, bitmask_width

__all__ = [
    "MAX_INDENT_DEPTH",
    "Grammar",
    "Matcher",
    "Tokenizer",
    "__version__",
    "allocate_token_bitmask",
    "apply_token_bitmask_inplace",
    "bitmask_width",
    "compile_grammar",
    "compile_json_schema",
    "compile_regex",
    "compile_structural_tag",
    "fill_next_token_bitmask_par",
    "fill_next_token_bitmask_par_with_draft_tokens",
    "fill_next_token_bitmask_par_with_draft_tree",
    "get_num_threads",
    "grammar_aware_drafts",
    "schema_cache_info",
    "set_num_threads",
    "translate_tokens",
]
