//! `$ref`: a reference compiles to a reference to the rule of the schema it
//! points to (rules are memoized by JSON pointer, see `rule_for`), so a
//! recursive schema is a recursive grammar and generates the same text as
//! the schema written out in place.
//!
//! Only local references are supported: `#` and a JSON pointer
//! (percent-decoded, then `~1` and `~0` unescaped) or `#name` for the one
//! `$anchor`/`$dynamicAnchor` of that name; anything else is refused. Both
//! resolve in the schema resource that holds the `$ref`: the nearest
//! enclosing schema with an `$id`, else the document. Merged and negated
//! schemas are copied out of their place, which is sound only when every
//! `$ref` resolves the same from anywhere: `has_nested_id` tells the
//! compiler whether the document is a single resource. `declares` reads
//! which draft the document's `$schema` names (drafts 4 to 7 ignore the
//! keywords beside a `$ref`).

use super::{pointer_part, refuse, Compiler};
use crate::cfg::ast::{Node, Pos};
use crate::error::Result;
use serde_json::Value;

impl<'a> Compiler<'a> {
    pub(super) fn reference(&mut self, target: Option<&str>, ptr: &str) -> Result<Node> {
        let (resolved, node) = self.resolve(target, ptr)?;
        let name = self.rule_for(&resolved, node)?;
        Ok(Node::Ref(name, Pos::default()))
    }

    /// The target of the `$ref` in the schema at `ptr`, and its pointer.
    pub(super) fn resolve(&self, target: Option<&str>, ptr: &str) -> Result<(String, &'a Value)> {
        let here = format!("{ptr}/$ref");
        let Some(target) = target else {
            return refuse(&here, "`$ref` must be a string");
        };
        let Some(frag) = target.strip_prefix('#') else {
            return refuse(
                &here,
                format!("only local references (\"#...\") are supported, got {target:?}"),
            );
        };
        // "#..." is relative to the schema resource holding the reference.
        let (base_ptr, base) = self.resource_of(ptr);
        let (resolved, node) = if frag.is_empty() || frag.starts_with('/') {
            let mut node = base;
            let mut resolved = base_ptr;
            for part in frag.split('/').skip(1) {
                let key = percent_decode(part).replace("~1", "/").replace("~0", "~");
                let next = match node {
                    Value::Object(o) => o.get(&key),
                    Value::Array(a) => key.parse::<usize>().ok().and_then(|i| a.get(i)),
                    _ => None,
                };
                let Some(next) = next else {
                    return refuse(&here, format!("{target:?} does not resolve"));
                };
                node = next;
                resolved.push('/');
                resolved.push_str(&pointer_part(&key));
            }
            (resolved, node)
        } else {
            let mut found = Vec::new();
            find_anchor(base, &base_ptr, frag, &mut found);
            match found.len() {
                1 => found.pop().expect("one"),
                0 => return refuse(&here, format!("no `$anchor` named {frag:?}")),
                _ => return refuse(&here, format!("the anchor {frag:?} is defined twice")),
            }
        };
        Ok((resolved, node))
    }

    /// The schema resource (the nearest enclosing schema with an `$id`, else
    /// the document) of the schema at `ptr`, and its pointer.
    fn resource_of(&self, ptr: &str) -> (String, &'a Value) {
        let mut node = self.root;
        let mut at = String::new();
        let mut best = (String::new(), self.root);
        for part in ptr.split('/').skip(1) {
            let key = part.replace("~1", "/").replace("~0", "~");
            let next = match node {
                Value::Object(o) => o.get(&key),
                Value::Array(a) => key.parse::<usize>().ok().and_then(|i| a.get(i)),
                _ => None,
            };
            let Some(next) = next else { break };
            node = next;
            at.push('/');
            at.push_str(part);
            if node.get("$id").is_some_and(Value::is_string) {
                best = (at.clone(), node);
            }
        }
        best
    }
}

/// Whether the document's `$schema` names one of `drafts`.
pub(super) fn declares(root: &Value, drafts: &[&str]) -> bool {
    let meta = root.get("$schema").and_then(Value::as_str);
    meta.is_some_and(|s| drafts.iter().any(|d| s.contains(d)))
}

/// Whether any schema below `v` (or `v` itself unless `top`) has an `$id`
/// (values of `enum`/`const`/`default`/`examples` are data, not schemas).
pub(super) fn has_nested_id(v: &Value, top: bool) -> bool {
    match v {
        Value::Object(o) => {
            (!top && o.get("$id").is_some_and(Value::is_string))
                || o.iter().any(|(k, x)| {
                    !matches!(k.as_str(), "enum" | "const" | "default" | "examples")
                        && has_nested_id(x, false)
                })
        }
        Value::Array(a) => a.iter().any(|x| has_nested_id(x, false)),
        _ => false,
    }
}

/// Schemas under `node` (pointer `ptr`) whose `$anchor` or `$dynamicAnchor`
/// is `name`, not looking into nested resources (`$id`).
fn find_anchor<'v>(node: &'v Value, ptr: &str, name: &str, out: &mut Vec<(String, &'v Value)>) {
    match node {
        Value::Object(o) => {
            let named = |k: &str| o.get(k).and_then(Value::as_str) == Some(name);
            if named("$anchor") || named("$dynamicAnchor") {
                out.push((ptr.to_string(), node));
            }
            for (k, v) in o {
                if v.get("$id").is_some() || k == "enum" || k == "const" {
                    continue;
                }
                find_anchor(v, &format!("{ptr}/{}", pointer_part(k)), name, out);
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                find_anchor(v, &format!("{ptr}/{i}"), name, out);
            }
        }
        _ => {}
    }
}

/// Undoes URI percent-encoding in a `$ref` fragment (`%25` is `%`).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| s.to_string())
}
