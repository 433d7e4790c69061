"""A new grammar's first masks, computed where the grammar is compiled.

maskpar computes a grammar's masks on first use and keeps them, where
xgrammar precomputes its masks while compiling. vLLM and SGLang compile a
request's grammar on a thread pool of their own, away from the step that
waits on the batch's bitmask, so the first mask (the coldest of a request:
its start state meets every first lexeme and parser walk of the grammar) is
best paid there too. ``Matcher.warm_up`` fills it there and keeps the row
in the grammar's fill memo (a fill keeps a state's row only the second time
it meets the state; a warm-up keeps it at once), so the step's own fill of
that state is a copy. Nothing about the matcher changes: a fill never moves
its state.

For a JSON schema or a structural tag the adapters go further
(``warm_json``, ``warm_stag``): they walk the new matcher's copy along a
text like the ones the model will write (written from the request alone by
``_sample``: an instance of the schema, or its tags with free text around
them; tokenized by the framework's tokenizer), filling the mask at every
token, so that the states the request's steps will meet have their lexer
entries, parser walks and memo rows already. Masks are the same either way;
only where they are computed moves. On fresh dev-split schemas (2-CPU
machine, 2 ms idle before each step, step mean as a ratio of llguidance's):
one request without drafts 0.71-0.76x -> 0.33-0.36x, with 4 drafts
0.55-0.59x -> 0.34-0.36x, 16 requests with 4 drafts 0.43-0.54x ->
0.26-0.29x (measured with two Python walks, before the walk was one native
call). A walk costs a few
milliseconds of the compile pool's time (xgrammar precomputes for tens to
hundreds of milliseconds there).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import maskpar

from ._sample import json_sample, stag_sample

# Tokens of the sample text walked at most (a sample is at most
# ``_sample.MAX_CHARS`` characters).
MAX_WARM_TOKENS = 512


def fill_first_mask(matcher: maskpar.Matcher) -> None:
    """Fills ``matcher``'s next-token mask for its caches only, keeping the
    row in the grammar's memo: ``warm_up`` along no tokens. An error (a
    grammar past a parser bound on its first fill) is left for the step's
    own fill to raise, where the framework handles it per request: raised
    here, it would escape the framework's compile path."""
    warm_up(matcher, ())


def warm_up(matcher: maskpar.Matcher, token_ids: Sequence[int], split_tokens: bool = False) -> int:
    """``Matcher.warm_up`` along ``token_ids`` (at most ``MAX_WARM_TOKENS``):
    a copy of ``matcher`` walks them, filling the mask before each token
    and keeping the rows in the grammar's fill memo (the walk's while the
    memo has room: the first states, which the request meets first, stay).
    It stops at the first
    token the grammar refuses, or at an error (left for the request's own
    steps to raise, as in ``fill_first_mask``). ``matcher`` itself is not
    changed. With ``split_tokens``, the walk also fills the state after
    each token that is a proper prefix of the next one (for draft trees,
    see ``warm_json``). Returns the number of tokens consumed."""
    ids = list(token_ids[:MAX_WARM_TOKENS])
    # Up to an id the model's vocabulary does not have (a tokenizer with
    # more ids than the model): ``Matcher.warm_up`` refuses the whole list.
    vocab = matcher.vocab_size
    ids = ids[: next((i for i, t in enumerate(ids) if not 0 <= t < vocab), len(ids))]
    try:
        return matcher.warm_up(ids, split_tokens)
    except (ValueError, MemoryError, RuntimeError):
        # A grammar past a bound, or an internal error: the request's own
        # steps meet it again, where the framework handles it per request.
        return 0


def warm_json(
    matcher: maskpar.Matcher,
    schema: Any,
    encode: Callable[[str], Sequence[int]],
    split_tokens: bool = False,
) -> int:
    """``warm_up`` along a sample instance of ``schema`` (``_sample``),
    tokenized by ``encode``; along no tokens (the first mask only) when there
    is no sample or ``encode`` fails (a framework tokenizer raising is not
    the request's error).

    ``split_tokens`` is for servers that draft trees (SGLang's EAGLE and
    ngram trees): their off-path nodes carry tokens from anywhere, which
    split the text where the sample's tokens do not (a closing quote alone,
    where the sample has ``",``), and such a node's state was the slowest
    of a fresh tree's fills. Filling the state after each proper prefix of
    each sample token (``Matcher.warm_up``'s ``split_tokens``) costs the
    walk about half again its time (0.8 -> 1.2 ms); on fresh dev-split
    schemas (DeepSeek's vocabulary, 8-node trees as
    ``bench/bench_sglang.py`` grows them) it cut the off-path nodes' first
    fills from 6-11 to 2-4 us a tree."""
    return _warm_text(matcher, json_sample(schema), encode, split_tokens)


def _warm_text(
    matcher: maskpar.Matcher,
    text: str | None,
    encode: Callable[[str], Sequence[int]],
    split_tokens: bool = False,
) -> int:
    ids: Sequence[int] = ()
    if text is not None:
        try:
            ids = list(encode(text))
        except Exception:  # noqa: BLE001 - any tokenizer failure only skips the walk
            pass
    return warm_up(matcher, ids, split_tokens)


def encoder(tokenizer: Any) -> Callable[[str], Sequence[int]]:
    """A framework tokenizer's ``encode`` without special tokens (a leading
    BOS would stop the walk at once)."""

    def encode(text: str) -> Sequence[int]:
        try:
            return tokenizer.encode(text, add_special_tokens=False)
        except TypeError:  # an encode without that keyword
            return tokenizer.encode(text)

    return encode


def warm_stag(
    matcher: maskpar.Matcher,
    spec: Any,
    encode: Callable[[str], Sequence[int]],
    split_tokens: bool = False,
) -> int:
    """``warm_up`` along a text holding each tag of the structural tag
    ``spec`` once, with free text around them (``_sample.stag_sample``), as
    ``warm_json`` does. (A triggered tag's states are the same whether it
    opens the text or follows other tags: the grammar's loop over tags is
    one left-recursive rule, see ``rust/stag/lower.rs``.) ``split_tokens``
    as in ``warm_json``."""
    return _warm_text(matcher, stag_sample(spec), encode, split_tokens)
