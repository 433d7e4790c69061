//! Reading one field of a structural tag's JSON object, with the error
//! that names its path and what was expected (`spec`'s helpers).

use serde_json::{Map, Value};

use crate::error::{Error, Result};

pub(super) fn bad(path: &str, what: impl std::fmt::Display) -> Error {
    Error::Compile(format!("invalid structural tag at {path}: {what}"))
}

pub(super) fn missing(key: &str) -> String {
    format!("missing field {key:?}")
}

pub(super) fn wrong(expected: &str, got: &Value) -> String {
    let got = got.to_string();
    let short: String = got.chars().take(40).collect();
    let more = if short.len() < got.len() { "..." } else { "" };
    format!("expected {expected}, got {short}{more}")
}

pub(super) fn object<'a>(v: &'a Value, path: &str) -> Result<&'a Map<String, Value>> {
    v.as_object()
        .ok_or_else(|| bad(path, wrong("a JSON object", v)))
}

pub(super) fn string(o: &Map<String, Value>, key: &str, path: &str) -> Result<String> {
    match o.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(bad(&format!("{path}.{key}"), wrong("a string", other))),
        None => Err(bad(path, missing(key))),
    }
}

pub(super) fn array<'a>(
    o: &'a Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<&'a Vec<Value>> {
    match o.get(key) {
        Some(Value::Array(a)) => Ok(a),
        Some(other) => Err(bad(&format!("{path}.{key}"), wrong("a list", other))),
        None => Err(bad(path, missing(key))),
    }
}

pub(super) fn strings(o: &Map<String, Value>, key: &str, path: &str) -> Result<Vec<String>> {
    let items = array(o, key, path)?;
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        match item {
            Value::String(s) => out.push(s.clone()),
            other => return Err(bad(&format!("{path}.{key}[{i}]"), wrong("a string", other))),
        }
    }
    Ok(out)
}

/// An optional list of strings to exclude (default empty). An empty string
/// would exclude every text, which is surely a mistake: refused.
pub(super) fn excludes(o: &Map<String, Value>, key: &str, path: &str) -> Result<Vec<String>> {
    if matches!(o.get(key), None | Some(Value::Null)) {
        return Ok(Vec::new());
    }
    let out = strings(o, key, path)?;
    if out.iter().any(String::is_empty) {
        return Err(bad(
            &format!("{path}.{key}"),
            "excluded strings must be non-empty",
        ));
    }
    Ok(out)
}

pub(super) fn flag(o: &Map<String, Value>, key: &str, path: &str) -> Result<bool> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(bad(&format!("{path}.{key}"), wrong("true or false", other))),
    }
}

pub(super) fn integer(o: &Map<String, Value>, key: &str, path: &str) -> Result<i64> {
    match o.get(key) {
        Some(v @ Value::Number(n)) => n
            .as_i64()
            .ok_or_else(|| bad(&format!("{path}.{key}"), wrong("an integer", v))),
        Some(other) => Err(bad(&format!("{path}.{key}"), wrong("an integer", other))),
        None => Err(bad(path, missing(key))),
    }
}

/// An optional non-negative count (None when absent or null).
pub(super) fn count(o: &Map<String, Value>, key: &str, path: &str) -> Result<Option<u32>> {
    if matches!(o.get(key), None | Some(Value::Null)) {
        return Ok(None);
    }
    let n = integer(o, key, path)?;
    u32::try_from(n).map(Some).map_err(|_| {
        bad(
            &format!("{path}.{key}"),
            format!("expected a count from 0 to {}, got {n}", u32::MAX),
        )
    })
}
