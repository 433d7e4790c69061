//! `not`, `if`/`then`/`else` and schema dependencies: the keywords that
//! need the complement of a schema.
//!
//! A leaf `not` (of `enum`, `const`, `pattern` or an asserted `format`, or
//! an `anyOf` of those, see `negate::is_leaf`) is applied where the values
//! are compiled: `excluded` reads what it leaves out and `without` subtracts
//! it from each JSON type's grammar (`Node::Minus`). Every other form is
//! rewritten before compiling (`rewrite_negations`) into an `allOf` of the
//! rest of the schema and: for `not: S` the schema of the values `S` rejects
//! (built by `negate`); for `if: C` `anyOf[allOf[C, then], allOf[not C,
//! else]]`; for a dependency of member `m` on `S` `anyOf[allOf[has m, S],
//! not has m]`. Each rewrite counts against `MAX_DERIVED` (an `if` doubles
//! the branches of what it is merged with), and negations need the document
//! to be a single schema resource (see `refs`).

use super::keywords::pinned_values;
use super::{decimal_text, decimals, lit, negate, pointer_part, re, refuse, strings, Compiler};
use crate::cfg::ast::Node;
use crate::error::Result;
use serde_json::{Map, Value};

impl<'a> Compiler<'a> {
    /// `obj` with `not` (unless a leaf), `if`/`then`/`else` and schema
    /// dependencies written as intersections and unions with negations;
    /// None without them.
    pub(super) fn rewrite_negations(
        &self,
        obj: &'a Map<String, Value>,
        ptr: &str,
    ) -> Result<Option<Value>> {
        let general_not = obj
            .get("not")
            .filter(|n| !negate::is_leaf(n, self.opts.assert_formats));
        let cond = obj.get("if").filter(|_| !self.before_draft7);
        let (deps_key, deps) = self.schema_dependencies(obj, ptr)?;
        if general_not.is_none() && cond.is_none() && deps.is_empty() {
            return Ok(None);
        }
        let mut rest = obj.clone();
        let mut parts = Vec::new();
        // A member's schema dependency: objects with the member satisfy
        // the schema (`if` the object has it, `then` the schema).
        for (name, schema) in &deps {
            match rest.get_mut(deps_key) {
                Some(Value::Object(m)) => {
                    m.remove(name);
                    if m.is_empty() {
                        rest.remove(deps_key);
                    }
                }
                _ => unreachable!("dependencies come from this object"),
            }
            let has = serde_json::json!({ "type": "object", "required": [name] });
            let at = format!("{ptr}/{deps_key}/{}", pointer_part(name));
            let negated = self.negate(&has, &at)?;
            parts.push(serde_json::json!({ "anyOf": [
                { "allOf": [has, schema] },
                negated,
            ] }));
        }
        if let Some(n) = general_not {
            rest.remove("not");
            parts.push(self.negate(n, &format!("{ptr}/not"))?);
        }
        if let Some(cond) = cond {
            let branch = |k: &str| obj.get(k).cloned().unwrap_or(Value::Bool(true));
            let (then, otherwise) = (branch("then"), branch("else"));
            for k in ["if", "then", "else"] {
                rest.remove(k);
            }
            let negated = self.negate(cond, &format!("{ptr}/if"))?;
            parts.push(serde_json::json!({ "anyOf": [
                { "allOf": [cond, then] },
                { "allOf": [negated, otherwise] },
            ] }));
        }
        parts.insert(0, Value::Object(rest));
        Ok(Some(serde_json::json!({ "allOf": parts })))
    }

    /// Schema dependencies: `dependentSchemas` (2019-09 on), or the entries
    /// of `dependencies` that are schemas (drafts 4-7), with the keyword.
    fn schema_dependencies(
        &self,
        obj: &Map<String, Value>,
        ptr: &str,
    ) -> Result<(&'static str, Vec<(String, Value)>)> {
        let key = if self.legacy_draft {
            "dependencies"
        } else {
            "dependentSchemas"
        };
        let deps = match obj.get(key) {
            None => return Ok((key, Vec::new())),
            Some(Value::Object(d)) => d,
            Some(_) => {
                return refuse(
                    &format!("{ptr}/{key}"),
                    format!("`{key}` must be an object"),
                )
            }
        };
        let mut out = Vec::new();
        for (name, v) in deps {
            match v {
                Value::Object(_) | Value::Bool(_) => out.push((name.clone(), v.clone())),
                Value::Array(_) if self.legacy_draft => {} // member dependencies
                _ => {
                    let at = format!("{ptr}/{key}/{}", pointer_part(name));
                    return refuse(&at, "a schema dependency must be a schema");
                }
            }
        }
        Ok((key, out))
    }

    /// A schema of the values `v` (at `ptr`) rejects (see `negate`).
    pub(super) fn negate(&self, v: &Value, ptr: &str) -> Result<Value> {
        if !self.single_resource {
            return refuse(
                ptr,
                "negations (`not`, `if`, overlapping `oneOf`) in a document with nested `$id`s \
                 are not supported yet",
            );
        }
        let resolve = |target: &Value, at: &str| -> Result<Value> {
            super::cost::cloned(self.resolve(target.as_str(), at)?.1)
        };
        let disjoint = |a: &Value, b: &Value| {
            let view = |v| self.branch_view(v, ptr).ok().flatten();
            self.disjoint(view(a), view(b), 0)
        };
        let negator = negate::Negator {
            disjoint: &disjoint,
            resolve: &resolve,
            legacy_draft: self.legacy_draft,
            before_draft6: self.before_draft6,
            assert_formats: self.opts.assert_formats,
        };
        negator.negate(v, ptr, 0)
    }

    /// What a leaf `not` (see `negate`) leaves out.
    pub(super) fn excluded(
        &self,
        obj: &'a Map<String, Value>,
        ptr: &str,
    ) -> Result<Option<Excluded<'a>>> {
        let Some(n) = obj.get("not") else {
            return Ok(None);
        };
        if !negate::is_leaf(n, self.opts.assert_formats) {
            return Ok(None);
        }
        let at = format!("{ptr}/not");
        // One leaf, or an `anyOf` of leaves (merged `not`s).
        let leaves: Vec<&'a Value> = match n.get("anyOf") {
            Some(Value::Array(list)) => list.iter().collect(),
            _ => vec![n],
        };
        let mut out = Excluded {
            values: Vec::new(),
            strings: Vec::new(),
        };
        for leaf in leaves {
            let o = leaf.as_object().expect("a leaf is an object");
            if let Some(values) = pinned_values(o) {
                out.values.extend(values);
            } else if let Some(p) = o.get("pattern") {
                let p = p
                    .as_str()
                    .map_or_else(|| refuse(&at, "`pattern` must be a string"), Ok)?;
                out.strings.push(
                    strings::pattern_regex(p).or_else(|e| refuse(&format!("{at}/pattern"), e))?,
                );
            } else {
                let f = o["format"].as_str().and_then(strings::format_regex);
                out.strings.push(f.expect("a leaf format is asserted"));
            }
        }
        Ok(Some(out))
    }

    /// The values of type `t` (grammar `n`) outside `excluded`, if any.
    pub(super) fn without(
        &mut self,
        t: &str,
        n: Node,
        excluded: Option<&Excluded<'a>>,
        ptr: &str,
    ) -> Result<Option<Node>> {
        let Some(Excluded { values, strings }) = excluded else {
            return Ok(Some(n));
        };
        if !strings.is_empty() {
            // `pattern`/`format` hold for every non-string: their `not` for none.
            if t != "string" {
                return Ok(None);
            }
            let mut out: Vec<Node> = strings
                .iter()
                .map(|r| self.string_node(Some(re(r))))
                .collect();
            let texts = values.iter().filter_map(|v| v.as_str());
            out.extend(texts.map(|v| lit(&format!("\"{}\"", strings::encode(v)))));
            return Ok(Some(Node::Minus(Box::new(n), Box::new(Node::alt(out)))));
        }
        let out: Vec<Node> = match t {
            "null" => return Ok((!values.iter().any(|v| v.is_null())).then_some(n)),
            "boolean" => {
                let kept: Vec<Node> = [true, false]
                    .into_iter()
                    .filter(|b| !values.contains(&&Value::Bool(*b)))
                    .map(|b| lit(if b { "true" } else { "false" }))
                    .collect();
                return Ok((!kept.is_empty()).then(|| Node::alt(kept)));
            }
            "string" => values
                .iter()
                .filter_map(|v| v.as_str())
                .map(|v| lit(&format!("\"{}\"", strings::encode(v))))
                .collect(),
            "number" | "integer" => values
                .iter()
                .filter_map(|v| match v {
                    Value::Number(x) => Some(re(&decimals::equal_regex(&decimal_text(x)))),
                    _ => None,
                })
                .collect(),
            _ => {
                let kind = if t == "object" {
                    Value::is_object
                } else {
                    Value::is_array
                };
                if values.iter().any(|v| kind(v)) {
                    return refuse(
                        &format!("{ptr}/not"),
                        format!("`not` of `enum`/`const` with {t} values is not supported yet"),
                    );
                }
                return Ok(Some(n));
            }
        };
        Ok(Some(if out.is_empty() {
            n
        } else {
            Node::Minus(Box::new(n), Box::new(Node::alt(out)))
        }))
    }
}

/// What a leaf `not` leaves out: values, and strings whose encoded
/// contents match a regex (every non-string too when there are such).
pub(super) struct Excluded<'a> {
    values: Vec<&'a Value>,
    /// Regexes over encoded string contents.
    strings: Vec<String>,
}
