"""Type stubs for the Rust extension module maskpar._core."""

from collections.abc import Callable, Iterable, Sequence
from typing import Any

__version__: str
# With ``indent=``, containers nest at most this deep (see compile_json_schema).
MAX_INDENT_DEPTH: int
# The compile work budget every compile gets unless it passes max_compile_steps:
# steps are units of work (about a nanosecond each), not time.
DEFAULT_COMPILE_STEPS: int

# A bitmask is a numpy.ndarray or torch.Tensor (CPU), int32, C-contiguous,
# shape [rows, ceil(vocab_size / 32)] (or [words] for a single row).
Bitmask = Any

class Tokenizer:
    """A vocabulary as maskpar uses it: each id's exact bytes, the EOS and
    special ids, and the model's logits width (``vocab_size``; ids past the
    tokens are padding, never allowed). Immutable and shareable across threads.
    ``maskpar.Tokenizer`` adds the Hugging Face and tiktoken loaders."""

    def __init__(
        self,
        tokens: Sequence[bytes],
        eos_token_ids: Sequence[int],
        special_token_ids: Sequence[int] | None = None,
        vocab_size: int | None = None,
    ) -> None: ...
    @classmethod
    def from_vocab(
        cls,
        tokens: Sequence[bytes],
        eos_token_ids: Sequence[int],
        special_token_ids: Sequence[int] | None = None,
        vocab_size: int | None = None,
    ) -> Tokenizer:
        """Builds a tokenizer from each id's exact bytes (``tokens[i]`` is id ``i``)."""
    @property
    def vocab_size(self) -> int:
        """The model's logits width: bitmask rows cover this many ids."""
    @property
    def num_tokens(self) -> int:
        """Ids with bytes; ids from here to ``vocab_size`` are padding (never allowed)."""
    @property
    def bitmask_width(self) -> int:
        """Words per bitmask row: ``ceil(vocab_size / 32)``."""
    @property
    def eos_token_ids(self) -> list[int]:
        """The ids that end generation, sorted: allowed exactly when the text
        so far is complete."""
    @property
    def special_token_ids(self) -> list[int]:
        """Ids marked special: never allowed by a grammar (EOS ids excepted,
        allowed where the text may end), sorted."""
    def shared_cache_stats(self) -> dict[str, int]:
        """What the lexer-only cache shared by this vocabulary's grammars holds:
        ``bytes`` charged now, their bound ``limit`` (512 MiB, or
        ``MASKPAR_SHARED_LEX_CACHE_BYTES`` as read when the cache was made),
        ``entries`` kept, and ``evictions`` (how many times a full cache made
        room)."""
    def token_bytes(self, token_id: int) -> bytes:
        """The exact bytes of ``token_id`` (``b""`` for padding ids)."""
    def decode_bytes(self, token_ids: Sequence[int]) -> bytes:
        """The concatenated bytes of ``token_ids``; ValueError past 1 GiB in all."""
    def encode_greedy(self, data: bytes) -> list[int]:
        """Splits ``data`` into text tokens by longest match from the left."""

class Grammar:
    """A compiled grammar: immutable, thread-safe, shared by any number of matchers."""

    @property
    def vocab_size(self) -> int:
        """The model's logits width this grammar's masks cover."""
    @property
    def source(self) -> str:
        """The pattern, grammar or schema text it was compiled from."""
    @property
    def num_states(self) -> int:
        """DFA states (regex) or rules (grammars): a measure of size."""
    @property
    def kind(self) -> str:
        """The syntax: "regex", "gbnf", "lark", "json_schema" or "structural_tag"."""
    def for_tokenizer(self, tokenizer: Tokenizer) -> Grammar:
        """The same grammar over another tokenizer: automata and parser tables
        are shared, only token tables are built."""

class Matcher:
    """Per-request grammar state (one per request; not for concurrent use)."""

    def __init__(self, grammar: Grammar) -> None: ...
    def fill_next_token_bitmask(self, bitmask: Bitmask, index: int = 0) -> None:
        """Writes the mask of allowed next tokens into row ``index``."""
    def consume_token(self, token_id: int) -> bool:
        """Consumes the token if allowed; False and no change otherwise."""
    def consume_tokens(self, token_ids: Sequence[int]) -> bool:
        """All or nothing: False and no change if any token is not allowed."""
    def warm_up(self, token_ids: Sequence[int], split_tokens: bool = False) -> int:
        """Walks a copy of this matcher along ``token_ids``, filling the mask
        at the start and after each token and keeping the rows in the
        grammar's memo (this matcher's at once, the walk's while the memo has
        room), so that requests meeting those states copy their rows; stops
        at the first refused token and returns how many were consumed. With
        ``split_tokens``, the walk also fills the state after each token that
        is a proper prefix of the next one (``"`` before ``",``), where draft
        trees split the text. This matcher and every mask are unchanged (a
        server calls it where it compiles, off the decoding step)."""
    def validate_tokens(self, token_ids: Sequence[int]) -> int:
        """Number of leading tokens that would be accepted; never changes state."""
    def rollback(self, num_tokens: int) -> None:
        """Undoes the last ``num_tokens`` tokens (EOS included)."""
    def reset(self) -> None:
        """Back to the start state with an empty history."""
    def fork(self, grammar: Grammar | None = None) -> Matcher:
        """An independent copy with the same state and history; with
        ``grammar`` (from ``Grammar.for_tokenizer``) it uses that vocabulary."""
    def consume_bytes(self, data: bytes | bytearray | str) -> bool:
        """Consumes raw text if all of it is allowed (one rollback step);
        False and no change otherwise."""
    def is_accepting(self) -> bool:
        """True if the text so far is in the language (EOS allowed)."""
    def is_terminated(self) -> bool:
        """True once EOS has been consumed."""
    def forced_tokens(self) -> list[int]:
        """Tokens the grammar forces next; free drafts that the mask accepts."""
    @property
    def num_consumed(self) -> int:
        """Tokens consumed: the most ``rollback`` can undo."""
    @property
    def vocab_size(self) -> int:
        """The grammar's logits width."""

def compile_regex(
    tokenizer: Tokenizer, pattern: str, *, max_compile_steps: int | None = None
) -> Grammar:
    """Compiles a regex (Rust ``regex`` syntax) with full-match semantics.
    ``max_compile_steps`` bounds the compile's work (default
    ``DEFAULT_COMPILE_STEPS``); past it, ValueError names the bound."""

def compile_grammar(
    tokenizer: Tokenizer,
    source: str,
    syntax: str = "auto",
    *,
    start: str | None = None,
    max_compile_steps: int | None = None,
) -> Grammar:
    """Compiles a context-free grammar: ``syntax`` is "gbnf" (start rule
    ``root``; "ebnf" is an alias, for xgrammar's EBNF), "lark" (start rule
    ``start``) or "auto" (GBNF if the text has ``::=`` rules, else Lark);
    ``start`` names another start rule, as Lark's ``start=`` option does
    (``"file_input"`` for Lark's ``python.lark``). Special tokens are
    grammar symbols: Lark ``<|name|>``, both ``<[id]>`` and ``<[a-b,c]>``,
    GBNF ``<name>`` and ``!<...>`` (any other token); a name the tokenizer
    lacks or an id past it is a ValueError.
    A Lark grammar that ``%declare``s ``_INDENT`` and ``_DEDENT`` gets Lark's
    ``PythonIndenter`` run inside the parser, on its ``_NEWLINE`` (or
    ``_NL``) terminal. Errors name the line and column. ``max_compile_steps``
    bounds the compile's work (default ``DEFAULT_COMPILE_STEPS``)."""

def compile_json_schema(
    tokenizer: Tokenizer,
    schema: dict[str, Any] | bool | str,
    *,
    whitespace: str = "flexible",
    indent: int | str | None = None,
    separators: tuple[str, str] | None = None,
    strict_properties: bool = False,
    assert_formats: bool = True,
    key_order: str = "any",
    max_whitespace: int | None = None,
    whitespace_pattern: str | None = None,
    max_compile_steps: int | None = None,
) -> Grammar:
    """Compiles a JSON Schema (dict or JSON text) to a grammar over the text
    ``json.dumps(value, ensure_ascii=False)`` writes for exactly the values it
    validates. ``whitespace`` is "flexible" (any JSON whitespace) or
    "compact"; ``indent`` (spaces or a JSON-whitespace string) and
    ``separators=(item, key)`` take exactly what ``json.dumps`` writes with
    the same arguments, overriding ``whitespace`` (indented containers nest
    at most ``MAX_INDENT_DEPTH`` deep); ``strict_properties`` refuses
    unlisted properties unless ``additionalProperties`` allows them; known
    formats constrain strings unless ``assert_formats=False``.
    ``key_order="schema"`` generates members in the schema's ``properties``
    order (optional ones may be left out), then names only ``required``
    lists, then unlisted members in any order, as xgrammar and llguidance
    do; the default "any" takes each listed member at most once in any
    order. ``max_whitespace`` bounds each run of flexible whitespace, or
    ``whitespace_pattern`` (a regex matching JSON whitespace only) is what
    each run must match whole. Keywords that
    cannot be compiled exactly raise ValueError naming the keyword and its
    JSON pointer. ``max_compile_steps`` bounds the compile's work (default
    ``DEFAULT_COMPILE_STEPS``). Results are cached by content (thread-safe)."""

def compile_structural_tag(
    tokenizer: Tokenizer,
    spec: dict[str, Any] | str | Any,
    *,
    max_compile_steps: int | None = None,
) -> Grammar:
    """Compiles a structural tag, in xgrammar's format: the current
    ``{"type": "structural_tag", "format": {...}}`` or the legacy
    ``{"type": "structural_tag", "structures": [...], "triggers": [...]}``
    (with SGLang's ``at_least_one`` / ``stop_after_first``). ``spec`` is a
    dict, JSON text, or a pydantic model (xgrammar's ``StructuralTag``).
    Formats maskpar cannot compile exactly raise ValueError naming the format
    and its path; see docs/structural-tags.md. ``max_compile_steps`` bounds
    the compile's work (default ``DEFAULT_COMPILE_STEPS``)."""

def schema_cache_info() -> dict[str, int]:
    """The compiled-schema cache's counters: ``hits`` (compiles answered from
    the cache), ``misses`` (schemas compiled; refused ones are neither counted
    nor kept), ``entries`` and ``max_entries`` (the oldest go first)."""

def fill_next_token_bitmask_par(
    matchers: Sequence[tuple[Matcher, int]],
    bitmask: Bitmask,
    num_threads: int | None = None,
) -> None:
    """Fills row ``row`` for each ``(matcher, row)``, in parallel, GIL released."""

def fill_next_token_bitmask_par_with_draft_tokens(
    matchers: Sequence[tuple[Matcher, int, Sequence[int]]],
    bitmask: Bitmask,
    num_threads: int | None = None,
) -> list[int]:
    """Row ``row + i`` = mask after ``drafts[:i]``; rows after a rejected draft
    are -1; a draft of -1 is padding (vLLM's): the drafts end before it and
    the rows after it are -1. Returns accepted draft counts; matchers are
    left unchanged."""

# A draft tree: ``(tokens, parents)`` with ``parents[0] == -1`` and
# ``parents[i] < i``, or SGLang's EAGLE arrays ``(retrieve_next_token,
# retrieve_next_sibling, draft_tokens)``; each a sequence of ints, a numpy
# array or a CPU tensor. Node 0 is the last verified token (its token is not read).
DraftTree = tuple[Any, Any] | tuple[Any, Any, Any]

def fill_next_token_bitmask_par_with_draft_tree(
    requests: Sequence[tuple[Matcher, int, DraftTree]],
    bitmask: Bitmask,
    num_threads: int | None = None,
) -> list[list[bool]]:
    """Row ``row + i`` = mask for the children of node ``i``; nodes the
    grammar refuses, and their descendants, get rows of -1. Returns which
    nodes are grammar-valid, per request; matchers are left unchanged."""

def grammar_aware_drafts(
    requests: Sequence[tuple[Matcher, Sequence[int]]],
    max_drafts: int,
    num_threads: int | None = None,
) -> list[list[int]]:
    """Per request: the drafts up to the first one the grammar refuses, then
    the tokens the grammar forces, ``max_drafts`` at most. Every list is
    accepted whole; matchers are left unchanged."""

def set_num_threads(n: int) -> None:
    """Sets the default number of threads for parallel fills (1 to 1024) and
    starts their pool now, off any request's path (building a ``Tokenizer``
    starts the pool of the default count, one thread per core)."""

def get_num_threads() -> int:
    """The default number of threads for parallel fills: the count last
    passed to ``set_num_threads``, else the cores this process may use (its
    CPU quota and affinity, read once per process)."""

# Private: a [rows, words] int32 array of -1 over a recycled buffer (used by
# maskpar.allocate_token_bitmask without CUDA for bitmasks of
# _MIN_POOLED_BITMASK_WORDS to _MAX_POOLED_BITMASK_WORDS words, the sizes the
# pool keeps; the buffer is reused once nothing refers to it).
_MIN_POOLED_BITMASK_WORDS: int
_MAX_POOLED_BITMASK_WORDS: int

def _pooled_bitmask(rows: int, words: int, all_ones: bool = True) -> Any: ...

# Private: masks CPU logits in place, viewed as integers of the float's width
# (used by maskpar.apply_token_bitmask_inplace).
def _apply_token_bitmask_cpu(
    logits_bits: Any,
    bitmask: Any,
    indices: Sequence[int] | None,
    neg_inf_bits: int,
) -> None: ...

# Private: SGLang's EAGLE step (used by maskpar.integrations.sglang). For
# each (matcher, i), fills rows i*N .. (i+1)*N of bitmask from the tree in
# row i of the [B, N] int64 arrays (numpy arrays or CPU tensors), as
# SGLang's traverse_tree would: rows past an EOS node are all ones. Returns
# per item whether its rows were filled (False: a tree maskpar cannot read,
# rows untouched).
def _fill_eagle_trees(
    requests: Sequence[tuple[Matcher, int]],
    retrieve_next_token: Any,
    retrieve_next_sibling: Any,
    draft_tokens: Any,
    bitmask: Any,
    num_threads: int | None = None,
) -> list[bool]: ...

# Private: SGLang's whole generate_token_bitmask step (used by
# maskpar.integrations.sglang) for a batch whose every request's ``grammar``
# is None or exactly of ``grammar_type`` (its ``matcher`` attribute a
# Matcher). Every row of the step's bitmask is written: ``bitmask``
# ([B*N, words], contents not read) or, given ``vocab_size`` instead, a new
# int32 array (numpy's, or a pooled buffer from 4 MiB on; with ``as_tensor``
# a CPU torch tensor that torch makes over maskpar's memory through DLPack,
# where torch is imported and publishes the import): tree masks, or
# all ones for no grammar, a terminated one, or a tree maskpar cannot read.
# Returns (the bitmask, indices of the trees not read, for SGLang's walk;
# the last grammar that is not None), or None having written nothing when a
# grammar is of another type or no request has one.
def _fill_eagle_step(
    requests: Iterable[Any],
    grammar_type: type,
    retrieve_next_token: Any,
    retrieve_next_sibling: Any,
    draft_tokens: Any,
    bitmask: Any | None = None,
    vocab_size: int | None = None,
    num_threads: int | None = None,
    as_tensor: bool = False,
) -> tuple[Any, list[int], Any] | None: ...

# Private: SGLang's generate_token_bitmask(reqs, retrieve_next_token,
# retrieve_next_sibling, draft_tokens, vocab_size) for grammars of
# ``grammar_type`` (what maskpar.integrations.sglang installs, bound with
# functools.partial): ``(bitmask tensor, last grammar)`` where no CUDA is
# available, every grammar is of that type or None and every tree is read;
# else ``general(reqs, retrieve_next_token, retrieve_next_sibling,
# draft_tokens, vocab_size, done, tried)``, with ``done`` None or
# ``_fill_eagle_step``'s result and ``tried`` whether this call ran that fill.
def _sglang_tree_step(
    grammar_type: type,
    cuda_available: Callable[[], bool],
    general: Callable[..., Any],
    reqs: Iterable[Any],
    retrieve_next_token: Any,
    retrieve_next_sibling: Any,
    draft_tokens: Any,
    vocab_size: Any,
) -> Any: ...

# Private: whether the numpy array view covers exactly the torch tensor's
# memory (int32, C-contiguous, same address and shape), the tensor read in
# one C call; None where torch has no DLPack exchange API or the tensor is
# not a plain torch.Tensor (used by maskpar.integrations.vllm).
def _is_view_of(view: Any, tensor: Any) -> bool | None: ...

# Private: apply_token_bitmask_inplace(logits, bitmask) for plain CPU
# tensors without indices (float32/float16/bfloat16 logits, int32 bitmask,
# C-contiguous, as many rows, under 2^20 logits), masked with the GIL held.
# Returns False, writing nothing, for anything else (used by
# maskpar.apply_token_bitmask_inplace).
def _apply_token_bitmask_cpu_tensors(logits: Any, bitmask: Any) -> bool: ...
