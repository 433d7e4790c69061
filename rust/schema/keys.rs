//! Object keys that `properties` does not list. Such a member's key and the
//! separator after it are one lexeme (`other_key`): a quoted key that is
//! none of the listed names, matches every regex of one set of
//! `patternProperties` and none of the others (each such set is one kind of
//! member, so at most `MAX_KEY_PATTERNS` patterns), and is allowed by
//! `propertyNames`. Because the quotes delimit the key, intersections and
//! differences of whole quoted keys are those of their contents.
//!
//! `propertyNames` compiles only by its string keywords (`key_strings`;
//! keys are strings, other keywords are refused). Regexes are over the
//! encoded key, with search semantics, as `pattern`'s are. The internal
//! `SOME_MEMBER` keyword (made by negating `additionalProperties` or
//! `patternProperties`) asks for a member of a given kind, the witness:
//! `witness` reads it and `Witness::admits` says which keys qualify.

use super::keywords::{is_constraint, pinned_values, type_names, SOME_MEMBER};
use super::{check, lit, pointer_part, re, refuse, strings, Compiler};
use crate::cfg::ast::Node;
use crate::error::Result;
use crate::regex_dfa::ByteDfa;
use serde_json::{Map, Value};

impl<'a> Compiler<'a> {
    /// The keys a `propertyNames` schema allows, as a quoted string node
    /// (None: no key). Its string keywords only (keys are strings);
    /// others are refused.
    pub(super) fn key_strings(&mut self, rule: &'a Value, ptr: &str) -> Result<Option<Node>> {
        let Some(o) = self.branch_view(rule, ptr)? else {
            return Ok(None); // `false` (`true` never gets here)
        };
        const STRING_KEYWORDS: [&str; 7] = [
            "type",
            "pattern",
            "minLength",
            "maxLength",
            "format",
            "enum",
            "const",
        ];
        if let Some(k) = o
            .keys()
            .find(|k| is_constraint(k) && !STRING_KEYWORDS.contains(&k.as_str()))
        {
            return refuse(
                &format!("{ptr}/{k}"),
                format!("`propertyNames` with `{k}` is not supported yet"),
            );
        }
        if let Some(t) = o.get("type") {
            let names = type_names(t).map_or_else(
                || refuse(ptr, "`type` must be a string or an array of strings"),
                Ok,
            )?;
            if !names.contains(&"string") {
                return Ok(None);
            }
        }
        if let Some(values) = pinned_values(o) {
            let mut keys = Vec::new();
            let resolved = Value::Object(o.clone());
            for v in values {
                if let Value::String(k) = v {
                    if check::satisfies(v, &resolved, ptr, self.opts.assert_formats)? {
                        keys.push(lit(&format!("\"{}\"", strings::encode(k))));
                    }
                }
            }
            return Ok((!keys.is_empty()).then(|| Node::alt(keys)));
        }
        self.string(o, ptr)
    }

    /// The internal `SOME_MEMBER` keyword: a member that must be present,
    /// with a key none of `names`, matching every regex of `matching` and
    /// none of `except`, and a value `value` accepts.
    pub(super) fn witness(
        &self,
        obj: &'a Map<String, Value>,
        ptr: &str,
    ) -> Result<Option<Witness<'a>>> {
        let Some(spec) = obj.get(SOME_MEMBER) else {
            return Ok(None);
        };
        let at = format!("{ptr}/(some member)");
        let list = |k: &str| -> Vec<String> {
            spec.get(k)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default()
        };
        let regexes = |sources: Vec<String>| -> Result<Vec<(String, ByteDfa)>> {
            sources
                .iter()
                .map(|p| {
                    let r = strings::pattern_regex(p).or_else(|e| refuse(&at, e))?;
                    let dfa = ByteDfa::new(&r)?;
                    Ok((r, dfa))
                })
                .collect()
        };
        let (matching, matching_dfas) = regexes(list("matching"))?.into_iter().unzip();
        let (except, except_dfas) = regexes(list("except"))?.into_iter().unzip();
        Ok(Some(Witness {
            names: list("names"),
            matching,
            except,
            matching_dfas,
            except_dfas,
            value: spec.get("value").unwrap_or(&Value::Bool(true)),
            pointer: format!("{at}/value"),
        }))
    }

    /// `patternProperties`, in schema order (at most `MAX_KEY_PATTERNS`).
    pub(super) fn key_patterns(
        &self,
        obj: &'a Map<String, Value>,
        ptr: &str,
    ) -> Result<Vec<KeyPattern<'a>>> {
        let at = format!("{ptr}/patternProperties");
        let patterns = match obj.get("patternProperties") {
            None => return Ok(Vec::new()),
            Some(Value::Object(p)) => p,
            Some(_) => return refuse(&at, "`patternProperties` must be an object"),
        };
        if patterns.len() > MAX_KEY_PATTERNS {
            return refuse(
                &at,
                format!(
                    "{} patterns: at most {MAX_KEY_PATTERNS} (one kind of member per set of \
                     patterns a key matches)",
                    patterns.len()
                ),
            );
        }
        patterns
            .iter()
            .map(|(source, schema)| {
                let pointer = format!("{at}/{}", pointer_part(source));
                let content = strings::pattern_regex(source).or_else(|e| refuse(&pointer, e))?;
                let dfa = ByteDfa::new(&content)?;
                Ok(KeyPattern {
                    pointer,
                    content,
                    dfa,
                    schema,
                })
            })
            .collect()
    }

    /// `before`, a key that matches every regex of `yes` and none of `no`
    /// and is none of `names`, then the key separator: one lexeme.
    pub(super) fn other_key(
        &self,
        before: &Node,
        names: &[&str],
        (yes, no): (&[String], &[String]),
        allowed: Option<&Node>,
    ) -> Node {
        let quoted = |content: Node| {
            Node::seq(vec![
                before.clone(),
                lit("\""),
                content,
                lit("\""),
                self.key_sep(),
            ])
        };
        // The quotes delimit the key, so intersections and differences of
        // `before "content" sep` are those of the contents, quoted.
        let mut wanted: Vec<Node> = yes.iter().map(|r| quoted(re(r))).collect();
        if let Some(a) = allowed {
            // `propertyNames`: a quoted string node of the keys it allows.
            wanted.push(Node::seq(vec![before.clone(), a.clone(), self.key_sep()]));
        }
        let key = match wanted.len() {
            0 => quoted(re(strings::any_content())),
            1 => wanted.pop().expect("one pattern"),
            _ => Node::Intersect(wanted),
        };
        let mut unwanted: Vec<Node> = names.iter().map(|k| lit(&strings::encode(k))).collect();
        unwanted.extend(no.iter().map(|r| re(r)));
        if unwanted.is_empty() {
            return key;
        }
        Node::Minus(Box::new(key), Box::new(quoted(Node::alt(unwanted))))
    }
}

/// Bound on `patternProperties` entries per object: members come in one kind
/// per set of patterns a key matches.
const MAX_KEY_PATTERNS: usize = 4;

/// One `patternProperties` entry.
pub(super) struct KeyPattern<'a> {
    pub(super) pointer: String,
    /// Regex over encoded key contents (search semantics).
    pub(super) content: String,
    pub(super) dfa: ByteDfa,
    pub(super) schema: &'a Value,
}

/// The (pointer, schema) of each pattern that `key` matches.
pub(super) fn matching<'a>(patterns: &[KeyPattern<'a>], key: &str) -> Vec<(String, &'a Value)> {
    patterns
        .iter()
        .filter(|p| strings::encoded_match(&p.dfa, key))
        .map(|p| (p.pointer.clone(), p.schema))
        .collect()
}

/// What `SOME_MEMBER` asks for (see `Compiler::witness`).
pub(super) struct Witness<'a> {
    pub(super) names: Vec<String>,
    /// Regexes over encoded key contents (search semantics), and their DFAs.
    pub(super) matching: Vec<String>,
    pub(super) except: Vec<String>,
    pub(super) matching_dfas: Vec<ByteDfa>,
    pub(super) except_dfas: Vec<ByteDfa>,
    pub(super) value: &'a Value,
    pub(super) pointer: String,
}

impl Witness<'_> {
    /// Whether a member named `key` may be the witness (its value aside).
    pub(super) fn admits(&self, key: &str) -> bool {
        !self.names.iter().any(|n| n == key)
            && self
                .matching_dfas
                .iter()
                .all(|d| strings::encoded_match(d, key))
            && !self
                .except_dfas
                .iter()
                .any(|d| strings::encoded_match(d, key))
    }
}
