//! `not`: the negation of a schema, as a schema the compiler takes. A schema
//! is a conjunction of its keywords, so its negation is the union of theirs
//! (De Morgan through `anyOf` / `allOf` / `not` too). Each keyword's negation
//! is a schema of the values it rejects: `minLength: 3` rejects the strings
//! of at most 2 characters, `required: [a]` the objects without `a`. The
//! negations of `enum`/`const`/`pattern`/`format` stay as a `not` around
//! that single keyword, which the typed compilers apply as a difference of
//! automata ("leaf" negations). What has no such form is refused.

use serde_json::{json, Map, Value};

use super::{is_constraint, pointer_part, refuse, strings};
use crate::error::Result;

/// Bound on `$ref`s followed inside one negation (a `not` of a recursive
/// schema would otherwise unfold forever).
const MAX_NEGATION_DEPTH: usize = 16;

/// Whether `not` of `v` is applied by the typed compilers: one keyword,
/// `enum`, `const`, `pattern` or an asserted `format`, and annotations.
pub fn is_leaf(v: &Value, assert_formats: bool) -> bool {
    let Value::Object(o) = v else {
        return false;
    };
    let mut keys = o.keys().filter(|k| is_constraint(k));
    match (keys.next().map(String::as_str), keys.next()) {
        (Some("enum" | "const" | "pattern"), None) => true,
        (Some("format"), None) => {
            assert_formats
                && o["format"]
                    .as_str()
                    .and_then(strings::format_regex)
                    .is_some()
        }
        _ => false,
    }
}

pub struct Negator<'r> {
    /// The schema a `$ref` names.
    pub resolve: &'r dyn Fn(&Value, &str) -> Result<Value>,
    /// Drafts 4-7: keywords next to `$ref` are ignored.
    pub legacy_draft: bool,
    pub assert_formats: bool,
}

impl Negator<'_> {
    /// A schema of exactly the values `s` (at `ptr`) rejects.
    pub fn negate(&self, s: &Value, ptr: &str, depth: usize) -> Result<Value> {
        let o = match s {
            Value::Bool(b) => return Ok(Value::Bool(!b)),
            Value::Object(o) => o,
            _ => return refuse(ptr, "a schema must be an object or a boolean"),
        };
        if is_leaf(s, self.assert_formats) {
            return Ok(json!({ "not": s }));
        }
        let mut branches: Vec<Value> = Vec::new();
        if let Some(target) = o.get("$ref") {
            if depth >= MAX_NEGATION_DEPTH {
                return refuse(ptr, "`not` of a recursive schema is not supported");
            }
            let at = format!("{ptr}/$ref");
            let target = (self.resolve)(target, &at)?;
            let negated = self.negate(&target, &at, depth + 1)?;
            if self.legacy_draft {
                return Ok(negated);
            }
            branches.push(negated);
        }
        let draft4 = |k: &str| o.get(k) == Some(&Value::Bool(true));
        for (k, v) in o {
            if !is_constraint(k) || k == "$ref" {
                continue;
            }
            let here = format!("{ptr}/{k}");
            self.keyword(k, v, o, &here, depth, draft4, &mut branches)?;
        }
        // Values every keyword accepts are the ones rejected by none.
        branches.retain(|b| b != &Value::Bool(false));
        Ok(match branches.len() {
            0 => Value::Bool(false),
            1 => branches.pop().expect("one branch"),
            _ => json!({ "anyOf": branches }),
        })
    }

    /// Pushes the schemas of the values keyword `k` rejects.
    #[allow(clippy::too_many_arguments)]
    fn keyword(
        &self,
        k: &str,
        v: &Value,
        o: &Map<String, Value>,
        ptr: &str,
        depth: usize,
        draft4: impl Fn(&str) -> bool,
        out: &mut Vec<Value>,
    ) -> Result<()> {
        let count = |v: &Value| v.as_u64().filter(|_| v.is_u64());
        let num = |v: &Value| -> Result<Value> {
            match v {
                Value::Number(_) => Ok(v.clone()),
                _ => refuse(ptr, format!("`{k}` must be a number")),
            }
        };
        // `minX: n` rejects values of type `t` with at most n - 1 (and the
        // reverse for `maxX`).
        let length = |t: &str, other: &str, n: Option<u64>, below: bool| -> Result<Value> {
            let Some(n) = n else {
                return refuse(ptr, format!("`{k}` must be a non-negative integer"));
            };
            Ok(match (below, n) {
                (true, 0) => Value::Bool(false),
                (true, n) => json!({ "type": t, other: n - 1 }),
                (false, n) => json!({ "type": t, other: n + 1 }),
            })
        };
        let branch = match k {
            "type" => {
                let names = super::type_names(v).map_or_else(
                    || refuse(ptr, "`type` must be a string or an array of strings"),
                    Ok,
                )?;
                if names.contains(&"integer") && !names.contains(&"number") {
                    return refuse(
                        ptr,
                        "`not` of `integer` (non-integer numbers) is not supported yet",
                    );
                }
                let rest: Vec<&str> = ["null", "boolean", "object", "array", "number", "string"]
                    .into_iter()
                    .filter(|t| !names.contains(t))
                    .collect();
                if rest.is_empty() {
                    Value::Bool(false)
                } else {
                    json!({ "type": rest })
                }
            }
            "enum" | "const" => json!({ "not": { k: v } }),
            "pattern" => json!({ "type": "string", "not": { k: v } }),
            "format" => {
                let asserted =
                    self.assert_formats && v.as_str().and_then(strings::format_regex).is_some();
                if !asserted {
                    return match v.as_str() {
                        Some(f)
                            if self.assert_formats && strings::STANDARD_FORMATS.contains(&f) =>
                        {
                            refuse(ptr, format!("the format {f:?} is not supported yet"))
                        }
                        _ => Ok(()), // an annotation rejects nothing
                    };
                }
                json!({ "type": "string", "not": { k: v } })
            }
            "minLength" => length("string", "maxLength", count(v), true)?,
            "maxLength" => length("string", "minLength", count(v), false)?,
            "minItems" => length("array", "maxItems", count(v), true)?,
            "maxItems" => length("array", "minItems", count(v), false)?,
            "minProperties" => length("object", "maxProperties", count(v), true)?,
            "maxProperties" => length("object", "minProperties", count(v), false)?,
            "minimum" if draft4("exclusiveMinimum") => {
                json!({ "type": "number", "maximum": num(v)? })
            }
            "maximum" if draft4("exclusiveMaximum") => {
                json!({ "type": "number", "minimum": num(v)? })
            }
            "exclusiveMinimum" | "exclusiveMaximum" if v.is_boolean() => return Ok(()),
            "minimum" => json!({ "type": "number", "exclusiveMaximum": num(v)? }),
            "maximum" => json!({ "type": "number", "exclusiveMinimum": num(v)? }),
            "exclusiveMinimum" => json!({ "type": "number", "maximum": num(v)? }),
            "exclusiveMaximum" => json!({ "type": "number", "minimum": num(v)? }),
            "required" => {
                let Some(names) = v.as_array() else {
                    return refuse(ptr, "`required` must be an array");
                };
                for name in names {
                    let Some(name) = name.as_str() else {
                        return refuse(ptr, "`required` must list strings");
                    };
                    out.push(json!({ "type": "object", "properties": { name: false } }));
                }
                return Ok(());
            }
            "properties" => {
                if o.contains_key("additionalProperties") || o.contains_key("patternProperties") {
                    return refuse(
                        ptr,
                        "`not` of `properties` with `additionalProperties` or `patternProperties` is not supported yet",
                    );
                }
                let Some(props) = v.as_object() else {
                    return refuse(ptr, "`properties` must be an object");
                };
                for (name, sub) in props {
                    let at = format!("{ptr}/{}", pointer_part(name));
                    let negated = self.negate(sub, &at, depth)?;
                    if negated != Value::Bool(false) {
                        out.push(json!({
                            "type": "object",
                            "required": [name],
                            "properties": { name: negated },
                        }));
                    }
                }
                return Ok(());
            }
            "anyOf" | "allOf" => {
                let Some(list) = v.as_array() else {
                    return refuse(ptr, format!("`{k}` must be an array"));
                };
                let negated = list
                    .iter()
                    .enumerate()
                    .map(|(i, x)| self.negate(x, &format!("{ptr}/{i}"), depth))
                    .collect::<Result<Vec<Value>>>()?;
                if k == "allOf" {
                    out.extend(negated);
                    return Ok(());
                }
                json!({ "allOf": negated })
            }
            "not" => v.clone(),
            _ => return refuse(ptr, format!("`not` of `{k}` is not supported yet")),
        };
        out.push(branch);
        Ok(())
    }
}
