//! `not`: the negation of a schema, as a schema the compiler takes. A schema
//! is a conjunction of its keywords, so its negation is the union of theirs
//! (De Morgan through `anyOf` / `allOf` / `not` too). Each keyword's negation
//! is a schema of the values it rejects: `minLength: 3` rejects the strings
//! of at most 2 characters, `required: [a]` the objects without `a`. The
//! negations of `enum`/`const`/`pattern`/`format` stay as a `not` around
//! that single keyword, which the typed compilers apply as a difference of
//! automata ("leaf" negations). What has no such form is refused.

use serde_json::{json, Map, Value};

use super::keywords::is_constraint;
use super::{pointer_part, refuse, strings};
use crate::error::Result;

/// Bound on `$ref`s followed inside one negation (a `not` of a recursive
/// schema would otherwise unfold forever).
const MAX_NEGATION_DEPTH: usize = 16;
/// Bound on the pairs of `oneOf` branches that may overlap in a negated
/// `oneOf` (each pair is a branch of the negation).
const MAX_OVERLAPPING_PAIRS: usize = 16;

/// Whether `not` of `v` is applied by the typed compilers: one keyword,
/// `enum`, `const`, `pattern` or an asserted `format`, and annotations; or
/// an `anyOf` of those (merged `not`s).
pub fn is_leaf(v: &Value, assert_formats: bool) -> bool {
    let Value::Object(o) = v else {
        return false;
    };
    let mut keys = o.keys().filter(|k| is_constraint(k));
    match (keys.next().map(String::as_str), keys.next()) {
        (Some("anyOf"), None) => match &o["anyOf"] {
            Value::Array(list) if !list.is_empty() => list
                .iter()
                .all(|x| x.get("anyOf").is_none() && is_leaf(x, assert_formats)),
            _ => false,
        },
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

/// The objects with a member `member` describes (see `SOME_MEMBER`), other
/// members free (said explicitly: `strict_properties` reads an absent
/// `additionalProperties` as `false`).
fn with_member(member: Value) -> Value {
    json!({
        "type": "object",
        "additionalProperties": true,
        super::SOME_MEMBER: member,
    })
}

pub struct Negator<'r> {
    /// The schema a `$ref` names.
    pub resolve: &'r dyn Fn(&Value, &str) -> Result<Value>,
    /// Drafts 4-7: keywords next to `$ref` are ignored.
    pub legacy_draft: bool,
    /// Drafts 3-4: `contains` is not a keyword.
    pub before_draft6: bool,
    /// Whether no value satisfies both schemas (false when unsure).
    pub disjoint: &'r dyn Fn(&Value, &Value) -> bool,
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

    /// Pushes the arrays positional keyword `k` (`items` or `prefixItems`)
    /// rejects: an item at some position fails that position's schema.
    fn positions(
        &self,
        k: &str,
        v: &Value,
        o: &Map<String, Value>,
        ptr: &str,
        depth: usize,
        out: &mut Vec<Value>,
    ) -> Result<()> {
        let tuple = match v {
            Value::Array(list) if k == "prefixItems" || self.legacy_draft => list,
            Value::Array(_) => return refuse(ptr, "`items` must be a schema"),
            _ if k == "prefixItems" => return refuse(ptr, "`prefixItems` must be an array"),
            // `items` after `prefixItems` holds from a later position on.
            _ if o.contains_key("prefixItems") => {
                return refuse(
                    ptr,
                    "`not` of `items` next to `prefixItems` is not supported yet",
                )
            }
            _ => {
                let negated = self.negate(v, ptr, depth)?;
                if negated != Value::Bool(false) {
                    out.push(json!({ "type": "array", super::SOME_ITEM: negated }));
                }
                return Ok(());
            }
        };
        let key = if k == "prefixItems" {
            "prefixItems"
        } else {
            "items"
        };
        for (i, sub) in tuple.iter().enumerate() {
            let negated = self.negate(sub, &format!("{ptr}/{i}"), depth)?;
            if negated == Value::Bool(false) {
                continue;
            }
            let mut positions = vec![Value::Bool(true); i];
            positions.push(negated);
            out.push(json!({ "type": "array", "minItems": i + 1, key: positions }));
        }
        Ok(())
    }

    /// Pushes the objects `propertyNames: rule` rejects: one with a key the
    /// rule's keyword rejects, for each keyword (string keywords and
    /// `enum`/`const`; `false`: any key).
    fn key_rejections(&self, rule: &Value, ptr: &str, out: &mut Vec<Value>) -> Result<()> {
        let any_key = json!({ "type": "object", "minProperties": 1 });
        let o = match rule {
            Value::Bool(true) => return Ok(()),
            Value::Bool(false) => {
                out.push(any_key);
                return Ok(());
            }
            Value::Object(o) => o,
            _ => return refuse(ptr, "a schema must be an object or a boolean"),
        };
        let length = |n: &Value| n.as_u64().filter(|_| n.is_u64());
        for (k, x) in o.iter().filter(|(k, _)| is_constraint(k)) {
            let at = format!("{ptr}/{k}");
            out.push(match (k.as_str(), x) {
                ("type", t) => {
                    let names = super::keywords::type_names(t).map_or_else(
                        || refuse(&at, "`type` must be a string or an array of strings"),
                        Ok,
                    )?;
                    if names.contains(&"string") {
                        continue;
                    }
                    any_key.clone()
                }
                ("pattern", Value::String(p)) => with_member(json!({ "except": [p] })),
                ("enum" | "const", _) => {
                    let values = match x {
                        Value::Array(list) if k == "enum" => list.iter().collect(),
                        _ => vec![x],
                    };
                    let names: Vec<&Value> = values.into_iter().filter(|v| v.is_string()).collect();
                    with_member(json!({ "names": names }))
                }
                ("maxLength", n) if length(n).is_some() => {
                    let longer = format!("^[\\s\\S]{{{}}}", length(n).unwrap_or(0) + 1);
                    with_member(json!({ "matching": [longer] }))
                }
                ("minLength", n) if length(n).is_some() => match length(n).unwrap_or(0) {
                    0 => continue,
                    n => {
                        let shorter = format!("^[\\s\\S]{{0,{}}}$", n - 1);
                        with_member(json!({ "matching": [shorter] }))
                    }
                },
                _ => {
                    return refuse(
                        &at,
                        format!("`not` of `propertyNames` with `{k}` is not supported yet"),
                    )
                }
            });
        }
        Ok(())
    }

    /// The negation of each schema of `list` (at `ptr`/i).
    fn negate_each(&self, list: &[Value], ptr: &str, depth: usize) -> Result<Vec<Value>> {
        list.iter()
            .enumerate()
            .map(|(i, x)| self.negate(x, &format!("{ptr}/{i}"), depth))
            .collect()
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
                let names = super::keywords::type_names(v).map_or_else(
                    || refuse(ptr, "`type` must be a string or an array of strings"),
                    Ok,
                )?;
                // `integer` leaves out the other numbers (a branch of their own).
                let only_integers = names.contains(&"integer") && !names.contains(&"number");
                if only_integers {
                    out.push(json!({ "type": "number", super::NON_INTEGER: true }));
                }
                let covered = |t: &str| names.contains(&t) || (t == "number" && only_integers);
                let rest: Vec<&str> = ["null", "boolean", "object", "array", "number", "string"]
                    .into_iter()
                    .filter(|t| !covered(t))
                    .collect();
                if rest.is_empty() {
                    Value::Bool(false)
                } else {
                    json!({ "type": rest })
                }
            }
            "enum" | "const" => json!({ "not": { k: v } }),
            "pattern" => json!({ "type": "string", "not": { k: v } }),
            super::MORE_PATTERNS => {
                for p in v.as_array().into_iter().flatten() {
                    out.push(json!({ "type": "string", "not": { "pattern": p } }));
                }
                return Ok(());
            }
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
                    out.push(json!({
                        "type": "object",
                        "properties": { name: false },
                        "additionalProperties": true,
                    }));
                }
                return Ok(());
            }
            "properties" => {
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
                            "additionalProperties": true,
                        }));
                    }
                }
                return Ok(());
            }
            "items" | "prefixItems" => {
                self.positions(k, v, o, ptr, depth, out)?;
                return Ok(());
            }
            "additionalItems" => {
                // Only next to array-form `items` (else it constrains nothing).
                let Some(Value::Array(p)) = o.get("items") else {
                    return Ok(());
                };
                match v {
                    Value::Bool(true) => return Ok(()),
                    Value::Bool(false) => json!({ "type": "array", "minItems": p.len() + 1 }),
                    _ => {
                        return refuse(
                            ptr,
                            "`not` of `additionalItems` with a schema is not supported yet",
                        )
                    }
                }
            }
            "contains" if self.before_draft6 => return Ok(()), // an annotation
            "contains" | super::SOME_ITEM => {
                // `minContains` / `maxContains`: 2019-09 on, next to `contains`.
                let counted = k == "contains" && !self.legacy_draft;
                if counted && o.contains_key("maxContains") {
                    return refuse(ptr, "`not` of `maxContains` is not supported yet");
                }
                match o.get("minContains").filter(|_| counted).map(Value::as_u64) {
                    None | Some(Some(1)) => {}
                    Some(Some(0)) => return Ok(()),
                    Some(_) => {
                        return refuse(ptr, "`not` of `minContains` above 1 is not supported yet")
                    }
                }
                // No item matches: every item matches the negation.
                json!({ "type": "array", "items": self.negate(v, ptr, depth)? })
            }
            "minContains" | "maxContains" => return Ok(()), // with `contains`
            "anyOf" | "allOf" => {
                let Some(list) = v.as_array() else {
                    return refuse(ptr, format!("`{k}` must be an array"));
                };
                let negated = self.negate_each(list, ptr, depth)?;
                if k == "allOf" {
                    out.extend(negated);
                    return Ok(());
                }
                json!({ "allOf": negated })
            }
            "additionalProperties" => {
                // A member `properties` does not list and no pattern matches,
                // whose value fails the schema.
                let keys = |k: &str| -> Vec<String> {
                    o.get(k)
                        .and_then(Value::as_object)
                        .map(|m| m.keys().cloned().collect())
                        .unwrap_or_default()
                };
                let negated = self.negate(v, ptr, depth)?;
                if negated == Value::Bool(false) {
                    return Ok(());
                }
                let member = json!({
                    "names": keys("properties"),
                    "except": keys("patternProperties"),
                    "value": negated,
                });
                with_member(member)
            }
            "patternProperties" => {
                // A member a pattern matches whose value fails its schema.
                let Some(patterns) = v.as_object() else {
                    return refuse(ptr, "`patternProperties` must be an object");
                };
                for (source, sub) in patterns {
                    let at = format!("{ptr}/{}", pointer_part(source));
                    let negated = self.negate(sub, &at, depth)?;
                    if negated != Value::Bool(false) {
                        out.push(with_member(
                            json!({ "matching": [source], "value": negated }),
                        ));
                    }
                }
                return Ok(());
            }
            "propertyNames" => {
                self.key_rejections(v, ptr, out)?;
                return Ok(());
            }
            "multipleOf" => json!({ "type": "number", super::NOT_MULTIPLE_OF: [v] }),
            "oneOf" => {
                // None of the branches holds, or two do.
                let Some(list) = v.as_array() else {
                    return refuse(ptr, "`oneOf` must be an array");
                };
                let mut pairs = Vec::new();
                for j in 1..list.len() {
                    for i in 0..j {
                        if !(self.disjoint)(&list[i], &list[j]) {
                            pairs.push(json!({ "allOf": [list[i], list[j]] }));
                        }
                    }
                }
                if pairs.len() > MAX_OVERLAPPING_PAIRS {
                    return refuse(
                        ptr,
                        format!(
                            "`not` of a `oneOf` with more than {MAX_OVERLAPPING_PAIRS} pairs of \
                             branches that may overlap is not supported"
                        ),
                    );
                }
                let negated = self.negate_each(list, ptr, depth)?;
                out.extend(pairs);
                json!({ "allOf": negated })
            }
            "not" => v.clone(),
            _ => return refuse(ptr, format!("`not` of `{k}` is not supported yet")),
        };
        out.push(branch);
        Ok(())
    }
}
