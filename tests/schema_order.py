"""The member order ``key_order="schema"`` asks for, computed from the schema
independently of maskpar (an oracle for the tests and the benchmark).

An object's members come in the order of its ``properties`` (merged in
document order through ``$ref``, ``allOf`` and the ``anyOf``/``oneOf``
branches the value satisfies), then the names only ``required`` lists (in
its order), then every other member in the value's own order (each ordered
inside by its ``patternProperties`` or ``additionalProperties`` schema).
"""

from __future__ import annotations

import re
from typing import Any

import jsonschema


def _resolve(root: Any, schema: Any, depth: int = 0) -> Any:
    """``schema`` with a local ``$ref`` followed (a few levels at most)."""
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and depth < 32:
        ref = schema["$ref"]
        if not ref.startswith("#"):
            return schema
        node = root
        for part in ref[1:].split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return schema
        depth += 1
        schema = node
    return schema


def _parts(root: Any, schema: Any, value: Any, depth: int = 0) -> list[dict]:
    """The schema objects that apply to ``value``: the schema, what it refers
    to, its ``allOf`` members and the ``anyOf``/``oneOf`` branches ``value``
    satisfies, in document order."""
    if depth > 16 or not isinstance(schema, dict):
        return []
    out = [schema]
    ref = schema.get("$ref")
    if isinstance(ref, str):
        out += _parts(root, _resolve(root, {"$ref": ref}), value, depth + 1)
    for sub in schema.get("allOf", []) if isinstance(schema.get("allOf"), list) else []:
        out += _parts(root, sub, value, depth + 1)
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if not isinstance(branches, list):
            continue
        for b in branches:
            if _valid(root, b, value):
                out += _parts(root, b, value, depth + 1)
                break
    return out


def _valid(root: Any, schema: Any, value: Any) -> bool:
    """Whether ``value`` is valid against ``schema``, a part of ``root``:
    its references (``#`` included) resolve against ``root``."""
    try:
        validator = jsonschema.Draft202012Validator(root if isinstance(root, dict) else {})
        return validator.evolve(schema=schema).is_valid(value)
    except Exception:
        return False


def _item_schemas(root: Any, schema: Any, value: list) -> list[Any]:
    """The schema of each item of the array ``value`` (``prefixItems``, then
    ``items``, from the first part that has them)."""
    parts = _parts(root, _resolve(root, schema), value)
    prefix = next((p["prefixItems"] for p in parts if isinstance(p.get("prefixItems"), list)), [])
    items = next((p["items"] for p in parts if isinstance(p.get("items"), dict)), {})
    if not prefix:
        # Drafts 4-7: an array of item schemas.
        prefix = next((p["items"] for p in parts if isinstance(p.get("items"), list)), [])
    return [prefix[i] if i < len(prefix) else items for i in range(len(value))]


def listed_order(parts: list[dict]) -> tuple[list[str], dict[str, list[Any]]]:
    """The listed names in schema order, and the schemas of each."""
    order: list[str] = []
    schemas: dict[str, list[Any]] = {}
    for p in parts:
        props = p.get("properties")
        if isinstance(props, dict):
            for k, v in props.items():
                if k not in schemas:
                    order.append(k)
                    schemas[k] = []
                schemas[k].append(v)
    for p in parts:
        req = p.get("required")
        if isinstance(req, list):
            for k in req:
                if isinstance(k, str) and k not in schemas:
                    order.append(k)
                    schemas[k] = []
    return order, schemas


def reorder(value: Any, schema: Any, root: Any | None = None) -> Any:
    """``value`` with every object's members in schema order."""
    root = schema if root is None else root
    if isinstance(value, list):
        subs = _item_schemas(root, schema, value)
        return [reorder(x, sub, root) for x, sub in zip(value, subs)]
    if not isinstance(value, dict):
        return value
    parts = _parts(root, _resolve(root, schema), value)
    order, schemas = listed_order(parts)
    out = {}
    for k in order:
        if k in value:
            sub = schemas[k][0] if schemas[k] else {}
            out[k] = reorder(value[k], sub, root)
    for k, v in value.items():
        if k not in out:
            out[k] = reorder(v, _unlisted_schema(parts, k), root)
    return out


def _unlisted_schema(parts: list[dict], key: str) -> Any:
    """The schema of an unlisted member ``key``: the first pattern of
    ``patternProperties`` that matches it, else ``additionalProperties``."""
    for p in parts:
        patterns = p.get("patternProperties")
        if isinstance(patterns, dict):
            for pattern, sub in patterns.items():
                try:
                    if re.search(pattern, key):
                        return sub
                except re.error:
                    continue
    extras = (p.get("additionalProperties") for p in parts)
    return next((x for x in extras if isinstance(x, dict)), {})


def in_schema_order(value: Any, schema: Any, root: Any | None = None) -> bool:
    """Whether every object of ``value`` (a parsed text, as pairs kept in
    order by ``json.loads(object_pairs_hook=Pairs)``) lists its members in
    schema order. Objects are lists of pairs here."""
    root = schema if root is None else root
    if isinstance(value, list) and not isinstance(value, Pairs):
        subs = _item_schemas(root, schema, pairs_to_value(value))
        return all(in_schema_order(x, sub, root) for x, sub in zip(value, subs))
    if not isinstance(value, list):
        return True
    plain = pairs_to_value(value)
    parts = _parts(root, _resolve(root, schema), plain)
    order, schemas = listed_order(parts)
    rank = {k: i for i, k in enumerate(order)}
    ranks = [rank.get(k, len(order)) for k, _ in value]
    if ranks != sorted(ranks):
        return False
    return all(in_schema_order(v, schemas[k][0] if schemas.get(k) else {}, root) for k, v in value)


class Pairs(list):
    """An object's members in their order (``json.loads(object_pairs_hook=Pairs)``)."""


def pairs_to_value(value: Any) -> Any:
    """A value parsed with ``object_pairs_hook=Pairs`` back to dicts and lists."""
    if isinstance(value, Pairs):
        return {k: pairs_to_value(v) for k, v in value}
    if isinstance(value, list):
        return [pairs_to_value(x) for x in value]
    return value
