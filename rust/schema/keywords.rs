//! The keyword vocabulary: which keywords constrain values (each compiled
//! exactly or refused), which only annotate (`is_annotation`; unknown
//! keywords are annotations too), which are not supported (`UNSUPPORTED`,
//! refused wherever they appear), and readers of the values of common
//! keywords (`type`, `const`/`enum`, counts).
//!
//! The internal `$maskpar:` keywords are what negations and merges write
//! into the schemas they derive when no standard keyword says it (a number
//! that is not an integer, a member of some kind, more than one `pattern`).
//! They are constraints like any other: `check` and `merge` know them, and
//! the typed compilers apply them.

use super::refuse;
use crate::error::Result;
use serde_json::{Map, Value};

/// Keywords maskpar does not compile yet: a schema that uses one is refused
/// (never read as an annotation).
pub(super) const UNSUPPORTED: &[&str] = &[
    "unevaluatedProperties",
    "unevaluatedItems",
    "$dynamicRef",
    "$recursiveRef",
];

/// The JSON types, as `type` names them.
pub(super) const TYPES: [&str; 7] = [
    "null", "boolean", "object", "array", "string", "number", "integer",
];

/// Keywords that only annotate a schema.
pub(super) fn is_annotation(k: &str) -> bool {
    matches!(
        k,
        "title"
            | "description"
            | "default"
            | "examples"
            | "$schema"
            | "$id"
            | "id"
            | "$comment"
            | "deprecated"
            | "readOnly"
            | "writeOnly"
            | "$defs"
            | "definitions"
            | "$anchor"
            | "$dynamicAnchor"
            | "contentMediaType"
            | "contentEncoding"
    )
}

/// Keywords that constrain values (unknown keywords are annotations).
pub(super) fn is_constraint(k: &str) -> bool {
    !is_annotation(k)
        && (TYPE_KEYWORDS.contains(&k)
            || k.starts_with('$')
            || COMBINATORS.contains(&k)
            || UNSUPPORTED.contains(&k))
}

/// Keywords that constrain the values of one JSON type.
const TYPE_KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "patternProperties",
    "minProperties",
    "maxProperties",
    "dependentRequired",
    // A keyword in drafts 4-7 only (an annotation later), but merges keep it.
    "dependencies",
    "dependentSchemas",
    "items",
    "prefixItems",
    "additionalItems",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "uniqueItems",
    "contains",
    "minContains",
    "maxContains",
    "multipleOf",
    "propertyNames",
];

/// Keywords that combine schemas or pin values.
const COMBINATORS: &[&str] = &[
    "$ref", "anyOf", "oneOf", "allOf", "enum", "const", "not", "if", "then", "else",
];

/// The names a `type` keyword lists (None: not a string or an array of them).
pub(super) fn type_names(v: &Value) -> Option<Vec<&str>> {
    match v {
        Value::String(s) => Some(vec![s.as_str()]),
        Value::Array(a) => a.iter().map(Value::as_str).collect(),
        _ => None,
    }
}

/// The values `const` (else `enum`) allows (None: neither, or an `enum`
/// that is not an array).
pub(super) fn pinned_values(m: &Map<String, Value>) -> Option<Vec<&Value>> {
    match (m.get("const"), m.get("enum")) {
        (Some(c), _) => Some(vec![c]),
        (None, Some(Value::Array(e))) => Some(e.iter().collect()),
        _ => None,
    }
}

pub(super) fn has_type(v: &Value, t: &str) -> bool {
    match (v, t) {
        (Value::Null, "null") | (Value::Bool(_), "boolean") => true,
        (Value::Number(_), "number") => true,
        (Value::Number(n), "integer") => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        (Value::String(_), "string")
        | (Value::Array(_), "array")
        | (Value::Object(_), "object") => true,
        _ => false,
    }
}

/// A non-negative integer keyword (`minLength`, ...), bounded to u32.
pub(super) fn count(obj: &Map<String, Value>, k: &str, ptr: &str) -> Result<Option<u32>> {
    match obj.get(k) {
        None => Ok(None),
        Some(Value::Number(n)) => match n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                .map(|f| f as u64)
        }) {
            Some(v) if v <= u32::MAX as u64 => Ok(Some(v as u32)),
            // Integers past 2^53 are read as the nearest double (no
            // arbitrary precision), so the count is shown as that double.
            Some(_) => refuse(
                &format!("{ptr}/{k}"),
                format!(
                    "`{k}` is {n}, more than the largest count maskpar takes ({})",
                    u32::MAX
                ),
            ),
            None => refuse(
                &format!("{ptr}/{k}"),
                format!("`{k}` must be a non-negative integer, got {n}"),
            ),
        },
        Some(v) => refuse(
            &format!("{ptr}/{k}"),
            format!("`{k}` must be a non-negative integer, got {v}"),
        ),
    }
}

/// An internal keyword: `contains` in every draft (`not` of `items` makes
/// it; draft 4 reads a `contains` as an annotation).
pub const SOME_ITEM: &str = "$maskpar:contains";

/// An internal keyword: a number that is not an integer (`not` of
/// `integer` makes it). Like integers, such numbers are written without an
/// exponent from draft 6 on (where `1.0` is an integer).
pub const NON_INTEGER: &str = "$maskpar:non-integer";

/// An internal keyword: an object has a member whose key is none of
/// `names`, matches every pattern of `matching` and none of `except`, and
/// whose value `value` accepts (`not` of `additionalProperties` and of
/// `patternProperties` make it).
pub const SOME_MEMBER: &str = "$maskpar:some-member";

/// An internal keyword: a number that is a multiple of none of these (`not`
/// of `multipleOf` makes it).
pub const NOT_MULTIPLE_OF: &str = "$maskpar:not-multiple-of";

/// An internal keyword: more `pattern`s a string matches (merges of two
/// patterns make it).
pub const MORE_PATTERNS: &str = "$maskpar:patterns";
