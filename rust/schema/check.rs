//! Whether a given JSON value satisfies a schema, for the keywords next to an
//! `enum`/`const` (which then compiles to the values that pass). Keywords it
//! cannot decide are refused, never guessed.

use serde_json::{Map, Value};

use super::keywords::is_annotation;
use super::merge::json_equal;
use super::{decimals, refuse, strings};
use crate::error::Result;
use crate::regex_dfa::ByteDfa;

/// Does `v` satisfy `schema` (found at `ptr`)? `assert_formats` as in
/// `SchemaOptions`.
pub fn satisfies(v: &Value, schema: &Value, ptr: &str, assert_formats: bool) -> Result<bool> {
    let obj = match schema {
        Value::Bool(b) => return Ok(*b),
        Value::Object(o) => o,
        _ => return refuse(ptr, "a schema must be an object or a boolean"),
    };
    for (k, s) in obj {
        let here = format!("{ptr}/{k}");
        if is_annotation(k) || !applies(k, v) {
            continue;
        }
        if !keyword(k, s, v, obj, &here, assert_formats)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Type-specific keywords ignore values of other types.
fn applies(k: &str, v: &Value) -> bool {
    match k {
        "minLength" | "maxLength" | "pattern" | "format" | super::MORE_PATTERNS => v.is_string(),
        "minimum"
        | "maximum"
        | "exclusiveMinimum"
        | "exclusiveMaximum"
        | "multipleOf"
        | super::NON_INTEGER
        | super::NOT_MULTIPLE_OF => v.is_number(),
        "minItems"
        | "maxItems"
        | "items"
        | "prefixItems"
        | "additionalItems"
        | "uniqueItems"
        | super::SOME_ITEM => v.is_array(),
        "required"
        | "properties"
        | "additionalProperties"
        | "patternProperties"
        | "minProperties"
        | "maxProperties"
        | super::SOME_MEMBER => v.is_object(),
        _ => true,
    }
}

fn keyword(
    k: &str,
    s: &Value,
    v: &Value,
    obj: &Map<String, Value>,
    ptr: &str,
    formats: bool,
) -> Result<bool> {
    let num = |x: &Value| x.as_f64();
    let len = |x: &Value| x.as_u64().map(|n| n as usize);
    Ok(match k {
        "type" => {
            let Some(types) = super::keywords::type_names(s) else {
                return refuse(ptr, "`type` must be a string or an array of strings");
            };
            types.iter().any(|t| super::keywords::has_type(v, t))
        }
        "enum" => s
            .as_array()
            .is_some_and(|a| a.iter().any(|x| json_equal(x, v))),
        "const" => json_equal(s, v),
        "minLength" | "maxLength" => {
            let n = v.as_str().map_or(0, |x| x.chars().count());
            match (k, len(s)) {
                ("minLength", Some(m)) => n >= m,
                (_, Some(m)) => n <= m,
                _ => return refuse(ptr, format!("`{k}` must be a non-negative integer")),
            }
        }
        super::MORE_PATTERNS => {
            for p in s.as_array().into_iter().flatten() {
                let Some(p) = p.as_str() else {
                    return refuse(ptr, "`pattern` must be a string");
                };
                let r = strings::pattern_regex(p).or_else(|e| refuse(ptr, e))?;
                if !strings::encoded_match(&ByteDfa::new(&r)?, v.as_str().unwrap_or("")) {
                    return Ok(false);
                }
            }
            true
        }
        "pattern" | "format" => {
            let regex = match (k, s.as_str()) {
                ("pattern", Some(p)) => {
                    Some(strings::pattern_regex(p).or_else(|e| refuse(ptr, e))?)
                }
                ("format", Some(_)) => {
                    super::scalars::asserted_format(Some(s), formats, ptr)?.map(|pieces| pieces.concat())
                }
                _ => return refuse(ptr, format!("`{k}` must be a string")),
            };
            match regex {
                None => true,
                Some(r) => strings::encoded_match(&ByteDfa::new(&r)?, v.as_str().unwrap_or("")),
            }
        }
        "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => {
            let x = num(v).unwrap_or(0.0);
            let draft4 = |e: &str| obj.get(e) == Some(&Value::Bool(true));
            match (k, s) {
                (_, Value::Bool(_)) => true, // draft 4: read with its bound
                ("minimum", b) if draft4("exclusiveMinimum") => num(b).is_some_and(|b| x > b),
                ("maximum", b) if draft4("exclusiveMaximum") => num(b).is_some_and(|b| x < b),
                ("minimum", b) => num(b).is_some_and(|b| x >= b),
                ("maximum", b) => num(b).is_some_and(|b| x <= b),
                ("exclusiveMinimum", b) => num(b).is_some_and(|b| x > b),
                (_, b) => num(b).is_some_and(|b| x < b),
            }
        }
        "multipleOf" | super::NOT_MULTIPLE_OF => {
            let divisors = match s {
                Value::Array(list) => list.as_slice(),
                one => std::slice::from_ref(one),
            };
            let value = v.as_number().map(super::decimal_text);
            let mut all = true;
            for d in divisors {
                let divisor = d.as_number().map(super::decimal_text);
                match value.as_deref().zip(divisor.as_deref()) {
                    Some((x, m)) => match decimals::is_multiple(x, m) {
                        Some(yes) => all &= yes != (k == super::NOT_MULTIPLE_OF),
                        None => return refuse(ptr, "this `multipleOf` check overflows"),
                    },
                    None => return refuse(ptr, "`multipleOf` must be a number"),
                }
            }
            all
        }
        "anyOf" | "allOf" | "oneOf" => {
            let Some(list) = s.as_array() else {
                return refuse(ptr, format!("`{k}` must be an array"));
            };
            let mut held = 0;
            for (i, sub) in list.iter().enumerate() {
                if satisfies(v, sub, &format!("{ptr}/{i}"), formats)? {
                    held += 1;
                }
            }
            match k {
                "anyOf" => held > 0,
                "allOf" => held == list.len(),
                _ => held == 1,
            }
        }
        "minItems" | "maxItems" | "minProperties" | "maxProperties" => {
            let n = match v {
                Value::Array(a) => a.len(),
                Value::Object(o) => o.len(),
                _ => 0,
            };
            match (k.starts_with("min"), len(s)) {
                (true, Some(m)) => n >= m,
                (false, Some(m)) => n <= m,
                _ => return refuse(ptr, format!("`{k}` must be a non-negative integer")),
            }
        }
        "uniqueItems" => {
            let a = v.as_array().map_or(&[][..], Vec::as_slice);
            s != &Value::Bool(true)
                || a.iter()
                    .enumerate()
                    .all(|(i, x)| a[..i].iter().all(|y| !json_equal(x, y)))
        }
        "items" if s.is_object() || s.is_boolean() => {
            let a = v.as_array().map_or(&[][..], Vec::as_slice);
            for x in a {
                if !satisfies(x, s, ptr, formats)? {
                    return Ok(false);
                }
            }
            true
        }
        "required" => {
            let o = v.as_object();
            s.as_array().is_some_and(|r| {
                r.iter().all(|n| {
                    n.as_str()
                        .is_some_and(|n| o.is_some_and(|o| o.contains_key(n)))
                })
            })
        }
        "properties" | "additionalProperties" | "patternProperties" => {
            let o = v.as_object().expect("applies to objects");
            let listed = obj.get("properties").and_then(Value::as_object);
            let patterns = match obj.get("patternProperties") {
                None => Vec::new(),
                Some(Value::Object(p)) => p
                    .iter()
                    .map(|(source, sub)| {
                        let r = strings::pattern_regex(source).or_else(|e| refuse(ptr, e))?;
                        Ok((ByteDfa::new(&r)?, sub))
                    })
                    .collect::<Result<Vec<_>>>()?,
                Some(_) => return refuse(ptr, "`patternProperties` must be an object"),
            };
            for (name, x) in o {
                let mut subs: Vec<&Value> = Vec::new();
                let mut matched = false;
                for (dfa, sub) in &patterns {
                    if strings::encoded_match(dfa, name) {
                        matched = true;
                        subs.push(sub);
                    }
                }
                let subs = match (k, listed.and_then(|p| p.get(name))) {
                    ("properties", Some(sub)) => vec![sub],
                    ("additionalProperties", None) if !matched => vec![s],
                    ("patternProperties", _) => subs,
                    _ => continue,
                };
                for sub in subs {
                    let at = format!("{ptr}/{}", super::pointer_part(name));
                    if !satisfies(x, sub, &at, formats)? {
                        return Ok(false);
                    }
                }
            }
            true
        }
        super::SOME_ITEM => {
            let a = v.as_array().map_or(&[][..], Vec::as_slice);
            for x in a {
                if satisfies(x, s, ptr, formats)? {
                    return Ok(true);
                }
            }
            false
        }
        super::SOME_MEMBER => {
            let o = v.as_object().expect("applies to objects");
            let names = |k: &str| -> Vec<&str> {
                s.get(k)
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default()
            };
            let dfas = |k: &str| -> Result<Vec<ByteDfa>> {
                names(k)
                    .into_iter()
                    .map(|p| ByteDfa::new(&strings::pattern_regex(p).or_else(|e| refuse(ptr, e))?))
                    .collect()
            };
            let (listed, matching, except) = (names("names"), dfas("matching")?, dfas("except")?);
            let value = s.get("value").unwrap_or(&Value::Bool(true));
            for (name, x) in o {
                let admitted = !listed.contains(&name.as_str())
                    && matching.iter().all(|d| strings::encoded_match(d, name))
                    && !except.iter().any(|d| strings::encoded_match(d, name));
                if admitted && satisfies(x, value, ptr, formats)? {
                    return Ok(true);
                }
            }
            false
        }
        super::NON_INTEGER => match v {
            Value::Number(n) if !n.is_f64() => false,
            Value::Number(n) if n.as_f64().is_some_and(|x| x.fract() != 0.0) => true,
            // `1.0`: an integer from draft 6 on, not before.
            _ => {
                return refuse(
                    ptr,
                    "a whole number written with a fraction next to `not` of `integer` is not supported yet",
                )
            }
        },
        "not" => !satisfies(v, s, ptr, formats)?,
        "if" => {
            let branch = if satisfies(v, s, ptr, formats)? {
                "then"
            } else {
                "else"
            };
            match obj.get(branch) {
                Some(b) => satisfies(v, b, &format!("{ptr}/../{branch}"), formats)?,
                None => true,
            }
        }
        "then" | "else" => true, // read with `if`
        _ if !super::keywords::is_constraint(k) => true,
        _ => {
            return refuse(
                ptr,
                format!("`{k}` next to `enum`/`const` is not supported yet"),
            )
        }
    })
}
