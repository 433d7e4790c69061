"""A plausible instance of a JSON schema (or text of a structural tag),
written to warm a new grammar.

A fresh schema's masks are slow the first time each parser state is met
(its lexer entries and parser walks are built then). A server compiles a
request's grammar on a pool of its own before the request's first step, so
the adapters walk the new grammar along a text like the ones the model will
write, there: every state that walk meets is then warm when the request's
steps meet it (see ``_warm.warm_up``). This module writes that text from the
schema alone: every listed property in ``properties`` order (the adapters
compile ``key_order="schema"``), the first branch of ``anyOf``/``oneOf``, the
first ``enum`` value, three array items (fewer where ``maxItems`` says so),
three members of an object that lists no properties but takes others (a map),
numbers within their bounds, a typical value of each ``format``, a text each
``pattern`` matches (``_regex_sample``: a fixed filler refused by the pattern
used to end the walk there, leaving every later value cold), else a short
string within its length bounds (with a ``\\n`` escape).

For a structural tag (``stag_sample``) the text is every tag of the format
once, in its order, with the JSON of its schema inside: what a model writes
when it calls each tool once (free text, around triggered tags and inside
a tag, is a few words, ``or`` takes its first branch, token-level formats
are left out; a tag in a ``tags`` list may leave out its ``"type"``, as
xgrammar allows).

The text only has to be typical, not valid: the walk stops at the first
token the grammar refuses, and warming never changes a mask. What matters
is that hostile schemas cost little: the walk through the schema is
bounded in depth (``MAX_DEPTH``), in nodes (``MAX_NODES``) and in ``$ref``
hops, its patterns share one work budget (``_regex_sample.MAX_WORK``), and
the text is cut at ``MAX_CHARS``.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ._regex_sample import Budget, regex_sample

MAX_DEPTH = 6
MAX_NODES = 300
MAX_REF_HOPS = 8
MAX_CHARS = 2048
# Tags a structural-tag sample holds at most (a walk is cut at 512 tokens).
MAX_TAGS = 16
# A string without a format or pattern: with an escape (a newline, the one
# models write most), whose states a text meets as often as its letters'.
FREE_STRING = "some text.\nmore"
# What an ``any_text`` format holds in a structural-tag sample.
ANY_TEXT = "Let me think about this."

# A typical value of each format maskpar supports (other formats are refused,
# or free text with ``assert_formats=False``): a URL with a path and a query,
# an email with a dot in its name, as people write them.
_URL = "https://www.example.com/docs/page.html?id=42"
_FORMATS = {
    "date-time": "2024-05-17T09:30:00Z",
    "date": "2024-05-17",
    "time": "09:30:00Z",
    "duration": "P3DT4H30M",
    "email": "john.doe@example.com",
    "hostname": "api.example.com",
    "ipv4": "192.168.0.1",
    "ipv6": "2001:db8::8a2e:370:7334",
    "uri": _URL,
    "uri-reference": "/docs/page.html",
    "uuid": "123e4567-e89b-12d3-a456-426614174000",
}


class _Writer:
    def __init__(self, root: Any) -> None:
        self.root = root
        self.nodes = 0
        self.strings = _Strings()

    def resolve(self, schema: Any) -> Any:
        """`schema` with local ``$ref``s followed (a few hops at most)."""
        for _ in range(MAX_REF_HOPS):
            if not (isinstance(schema, dict) and isinstance(schema.get("$ref"), str)):
                return schema
            ref = schema["$ref"]
            if not ref.startswith("#"):
                return {}
            node = self.root
            for part in ref[1:].split("/"):
                if not part:
                    continue
                part = part.replace("~1", "/").replace("~0", "~")
                if isinstance(node, dict) and part in node:
                    node = node[part]
                elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                    node = node[int(part)]
                else:
                    return {}
            schema = node
        return {}

    def value(self, schema: Any, depth: int) -> Any:
        self.nodes += 1
        schema = self.resolve(schema)
        if not isinstance(schema, dict):
            return None
        if "const" in schema:
            return schema["const"]
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return schema["enum"][0]
        if depth > MAX_DEPTH or self.nodes > MAX_NODES:
            # Past a bound, a value with nothing inside (``{}``, ``[]``, a
            # scalar) rather than ``null``, which the grammar usually refuses:
            # the walk then goes on to the next member (nested Kubernetes
            # objects used to end it a few dozen tokens in).
            return _shallow(schema, self.strings)
        for key in ("anyOf", "oneOf"):
            branches = schema.get(key)
            if isinstance(branches, list) and branches:
                merged = {k: v for k, v in schema.items() if k != key}
                first = self.resolve(branches[0])
                if isinstance(first, dict):
                    merged.update(first)
                return self.value(merged, depth + 1)
        if isinstance(schema.get("allOf"), list):
            return self.value(self.merge_all_of(schema), depth + 1)
        return self.typed(_kind(schema), schema, depth)

    def merge_all_of(self, schema: dict) -> dict:
        merged = {k: v for k, v in schema.items() if k != "allOf"}
        for part in schema["allOf"][:MAX_NODES]:
            part = self.resolve(part)
            if not isinstance(part, dict):
                continue
            for k, v in part.items():
                if k == "properties" and isinstance(v, dict):
                    merged["properties"] = {**merged.get("properties", {}), **v}
                elif k == "required" and isinstance(v, list):
                    merged["required"] = [*merged.get("required", []), *v]
                else:
                    merged.setdefault(k, v)
        return merged

    def typed(self, kind: Any, schema: dict, depth: int) -> Any:
        if kind == "object":
            props = schema.get("properties")
            out = {}
            if isinstance(props, dict):
                for name, sub in props.items():
                    if self.nodes > MAX_NODES:
                        break
                    out[name] = self.value(sub, depth + 1)
            required = schema.get("required")
            for name in required if isinstance(required, list) else ():
                if isinstance(name, str) and name not in out and self.nodes <= MAX_NODES:
                    out[name] = "text"
            if not out and not (isinstance(props, dict) and props):
                out.update(self.map_members(schema, depth))
            return out
        if kind == "array":
            items = schema.get("prefixItems", schema.get("items", {}))
            if isinstance(items, list):
                return [self.value(x, depth + 1) for x in items[:4]]
            # Three items where three are allowed. An item's Earley sets
            # name the set it starts from: the second item starts after a
            # comma that follows the first (the list's opening), the third
            # after a comma that follows a repeat (the second), and every
            # later one as the third does (`rust/schema/arrays.rs`'s
            # tests). With two items, the third's states were the coldest
            # of fresh dev-split draft trees (after `"2",` in a list of
            # strings).
            most = schema.get("maxItems")
            count = max(0, min(most, 3)) if isinstance(most, int) else 3
            return [self.value(items, depth + 1) for _ in range(count)]
        if kind in ("string", "integer", "number", "boolean", "null"):
            return _scalar(kind, schema, self.strings)
        return "some text"

    def map_members(self, schema: dict, depth: int) -> dict[str, Any]:
        """Three members of an object that lists none but takes others (a
        map: ``patternProperties``, an ``additionalProperties`` schema, or no
        keywords at all), so that its key and value states are warm: the
        first member's, the second's (after a comma that follows the first)
        and every later one's (after a comma that follows a repeat), as for
        array items."""
        extra = schema.get("additionalProperties", True)
        patterns = schema.get("patternProperties")
        if isinstance(patterns, dict) and patterns:
            pattern, value_schema = next(iter(patterns.items()))
            key = self.strings.pattern(pattern, 0, None)
            if key is None:
                return {}
            # The later keys may fall outside the pattern: the walk stops there.
            keys = [key, key + "2", key + "3"]
        elif extra is True or isinstance(extra, dict):
            value_schema = extra if isinstance(extra, dict) else {"type": "string"}
            keys = ["key", "name", "id"]
        else:
            return {}
        most = schema.get("maxProperties")
        count = max(0, min(most, 3)) if isinstance(most, int) else 3
        return {k: self.value(value_schema, depth + 1) for k in keys[:count]}


def _kind(schema: dict) -> Any:
    """The type a sample of ``schema`` takes: its ``type`` (the first other
    than ``null`` of a list), else what its keywords imply."""
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), kind[0] if kind else None)
    if kind is None:
        kind = "object" if "properties" in schema else "array" if "items" in schema else None
    return kind


def _shallow(schema: dict, strings: _Strings) -> Any:
    """A value of ``schema`` written without looking inside it: an empty
    object or array, or a scalar of its type."""
    kind = _kind(schema)
    if kind == "object":
        return {}
    if kind == "array":
        return []
    return _scalar(kind, schema, strings)


def _scalar(kind: Any, schema: dict, strings: _Strings) -> Any:
    """A string, number or boolean value of ``schema``; None otherwise."""
    if kind == "string":
        return strings.value(schema)
    if kind in ("integer", "number"):
        return _number(schema, kind == "integer")
    if kind == "boolean":
        return True
    return None


class _Strings:
    """String values of one sample. The texts of its patterns are written
    once each (a pattern behind many ``$ref``s) and within one work budget
    shared by all of them (``_regex_sample.Budget``): a schema of many
    large patterns costs what one does."""

    def __init__(self) -> None:
        self.budget = Budget()
        self.patterns: dict[tuple[str, int, int | None], str | None] = {}

    def value(self, schema: dict) -> str:
        """A supported ``format``'s sample (whatever the length bounds),
        else a text the ``pattern`` matches (within ``minLength`` and
        ``maxLength`` where a filling of it is; the schema's own example
        string where the pattern cannot be read here), else free text cut
        or stretched to its length bounds."""
        fmt, pattern = schema.get("format"), schema.get("pattern")
        if isinstance(fmt, str) and fmt in _FORMATS:
            return _FORMATS[fmt]
        most, least = schema.get("maxLength"), schema.get("minLength")
        least = least if isinstance(least, int) else 0
        most = most if isinstance(most, int) else None
        if pattern is not None:
            text = self.pattern(pattern, least, most)
            return text if text is not None else _example(schema) or "some text"
        text = FREE_STRING
        if least > len(text):
            text = (text + " ") * min(least // len(text) + 1, 8)
        if most is not None and most < len(text):
            short = most < len(FREE_STRING) and least <= len("some text")
            text = "some text"[: max(most, 0)] if short else text[: max(most, 0)]
        return text

    def pattern(self, pattern: Any, least: int, most: int | None) -> str | None:
        if not isinstance(pattern, str):
            return None
        key = (pattern, least, most)
        if key not in self.patterns:
            self.patterns[key] = regex_sample(pattern, least, most, self.budget)
        return self.patterns[key]


def _example(schema: dict) -> str | None:
    """The schema's own example string (``examples``, ``example``,
    ``default``), if it gives one."""
    examples = schema.get("examples")
    for value in (
        examples[0] if isinstance(examples, list) and examples else None,
        schema.get("example"),
        schema.get("default"),
    ):
        if isinstance(value, str):
            return value[:MAX_CHARS]
    return None


def _number(schema: dict, integer: bool) -> float:
    """A number (1 or 1.5) moved inside the schema's bounds (the tighter of
    ``minimum`` and ``exclusiveMinimum``, of ``maximum`` and
    ``exclusiveMaximum``; draft 4's boolean ``exclusiveMinimum`` too), an
    integer the least multiple of an integer ``multipleOf`` there. Where
    the bounds leave nothing, a value past them: the walk stops there, as
    it would at any value."""
    low = _bound(schema, "minimum", "exclusiveMinimum", max)
    high = _bound(schema, "maximum", "exclusiveMaximum", min)
    if integer:
        lo = None if low is None else math.floor(low[0]) + 1 if low[1] else math.ceil(low[0])
        hi = None if high is None else math.ceil(high[0]) - 1 if high[1] else math.floor(high[0])
        step = schema.get("multipleOf")
        if isinstance(step, int) and not isinstance(step, bool) and 0 < step < 10**15:
            return step if lo is None else -(-lo // step) * step
        value = 1 if lo is None else max(lo, 1)
        return value if hi is None else min(value, hi)
    value = 1.5
    inside_low = low is None or value > low[0] or (value == low[0] and not low[1])
    inside_high = high is None or value < high[0] or (value == high[0] and not high[1])
    if inside_low and inside_high:
        return value
    if low is not None and high is not None:
        return (low[0] + high[0]) / 2
    return low[0] + 0.5 if low is not None else high[0] - 0.5  # type: ignore[index]


def _bound(schema: dict, plain: str, exclusive: str, tighter: Any) -> tuple[float, bool] | None:
    """The tighter (``max`` for lower bounds, ``min`` for upper ones) of
    the schema's ``plain`` and ``exclusive`` bounds, with whether it is
    exclusive; None if it gives neither (or only huge ones)."""
    found = []
    for key in (plain, exclusive):
        value = schema.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) < 1e15:
            # Draft 4 writes an exclusive bound as ``exclusiveMinimum: true``.
            strict = key == exclusive or schema.get(exclusive) is True
            found.append((value, strict))
    if not found:
        return None
    best = tighter(v for v, _ in found)
    return best, any(strict for v, strict in found if v == best)


def json_sample(schema: Any) -> str | None:
    """A JSON text of the kind a model writes for ``schema`` (a dict, or
    JSON text), at most ``MAX_CHARS`` long; None if there is nothing to
    write (the schema is not JSON, or not a schema, or one this writer
    misreads: a warm-up text is never worth failing a request for)."""
    try:
        if isinstance(schema, (str, bytes)):
            schema = json.loads(schema)
        if not isinstance(schema, (dict, bool)):
            return None
        text = json.dumps(_Writer(schema).value(schema, 0), ensure_ascii=False)
    except Exception:  # noqa: BLE001 - ValueError, RecursionError, or any misread
        return None
    return text[:MAX_CHARS]


def _begin_end(value: Any) -> str:
    """A tag's ``begin``/``end``: a string, the first of a list of strings
    (a token object has no text here)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and isinstance(value[0], str):
        return value[0]
    return ""


def _format_text(fmt: Any, depth: int) -> str:
    """Text of a structural-tag format: its tags with sample JSON inside."""
    if not isinstance(fmt, dict) or depth > MAX_DEPTH:
        return ""
    kind = fmt.get("type")
    if kind == "const_string":
        return fmt["value"] if isinstance(fmt.get("value"), str) else ""
    if kind == "json_schema":
        return json_sample(fmt.get("json_schema")) or ""
    if kind == "tag":
        content = _format_text(fmt.get("content"), depth + 1)
        return _begin_end(fmt.get("begin")) + content + _begin_end(fmt.get("end"))
    if kind in ("triggered_tags", "tags_with_separator"):
        tags = fmt.get("tags")
        texts = (
            [_format_text(_as_tag(t), depth + 1) for t in tags[:MAX_TAGS]]
            if isinstance(tags, list)
            else []
        )
        if kind == "triggered_tags":
            return _around_tags(texts, fmt)
        sep = fmt.get("separator")
        return (sep if isinstance(sep, str) else "").join(texts)
    if kind == "sequence" and isinstance(fmt.get("elements"), list):
        return "".join(_format_text(e, depth + 1) for e in fmt["elements"][:MAX_TAGS])
    if kind == "or" and isinstance(fmt.get("elements"), list) and fmt["elements"]:
        return _format_text(fmt["elements"][0], depth + 1)
    if kind in ("optional", "plus", "star", "repeat"):
        return _format_text(fmt.get("content"), depth + 1)
    if kind == "any_text":
        # A few words, so that the walk meets the free text's own states
        # (its lexeme's first trie walk is the costly fill), not only its end.
        return ANY_TEXT
    return ""  # regex, grammar and token-level formats


def _around_tags(tags: list[str], fmt: dict[str, Any]) -> str:
    """Triggered tags with free text before them (unless ``at_least_one``
    asks for a tag first) and after them, so that the free text's states
    are walked too; only the first tag where ``stop_after_first`` ends the
    text there."""
    before = "" if fmt.get("at_least_one") else ANY_TEXT + "\n"
    if fmt.get("stop_after_first"):
        return before + "".join(tags[:1])
    return before + "".join(tags) + "\n" + ANY_TEXT


def _as_tag(item: Any) -> Any:
    """An element of a ``tags`` list: xgrammar's tag model defaults its
    ``type`` to ``"tag"``, so requests (and maskpar's compiler) often leave
    it out."""
    if isinstance(item, dict) and "type" not in item:
        return {**item, "type": "tag"}
    return item


def stag_sample(spec: Any) -> str | None:
    """Text for a structural tag ``spec`` (a dict or JSON text, either
    shape), at most ``4 * MAX_CHARS`` long; None if there is none."""
    try:
        if isinstance(spec, (str, bytes)):
            spec = json.loads(spec)
        if not isinstance(spec, dict):
            return None
        if isinstance(spec.get("structures"), list):
            text = _around_tags(
                [
                    _begin_end(s.get("begin"))
                    + (json_sample(s.get("schema")) or "")
                    + _begin_end(s.get("end"))
                    for s in spec["structures"][:MAX_TAGS]
                    if isinstance(s, dict)
                ],
                spec,
            )
        else:
            text = _format_text(spec.get("format"), 0)
    except (ValueError, TypeError, RecursionError):
        return None
    return text[: 4 * MAX_CHARS] or None
