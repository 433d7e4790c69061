//! `anyOf`, `oneOf` and `allOf`. Alone in a schema (no other constraining
//! keyword), `anyOf` is the union of its branches' rules, and so is `oneOf`
//! when every pair of branches is disjoint (exactly one holds iff at most
//! one can). `disjoint` decides that soundly from a subset of each branch's
//! keywords (fewer keywords accept more values): their types, their
//! `const`/`enum` values and, for objects, a required member whose schemas
//! clash (to `MAX_DISJOINT_DEPTH`). A `oneOf` branch that may overlap others
//! compiles as itself and the negations of those (`exclusive_union`), or is
//! refused when one of them has no negation maskpar compiles.
//!
//! `allOf`, and any combinator beside other keywords, is an intersection:
//! `value` merges it on the schema JSON (`merge`) into one schema and
//! compiles that, memoized by its content. `all_of` does the same for the
//! lists of schemas the compiler puts together (a property's schema and
//! those of the patterns its name matches, an item's and `contains`).

use super::keywords::{has_type, pinned_values, type_names, TYPES};
use super::{content_key, merge, refuse, Compiler};
use crate::cfg::ast::{Node, Pos};
use crate::error::Result;
use rustc_hash::FxHashMap as HashMap;
use serde_json::{Map, Value};

impl<'a> Compiler<'a> {
    fn branches(&self, v: &'a Value, k: &str, ptr: &str) -> Result<&'a Vec<Value>> {
        match v {
            Value::Array(a) if !a.is_empty() => Ok(a),
            _ => refuse(
                &format!("{ptr}/{k}"),
                format!("`{k}` must be a non-empty array"),
            ),
        }
    }

    /// `anyOf` is a union; `oneOf` is one too when its branches are disjoint
    /// by type (checked), else refused.
    pub(super) fn union(
        &mut self,
        obj: &'a Map<String, Value>,
        k: &str,
        ptr: &str,
    ) -> Result<Node> {
        let list = self.branches(&obj[k], k, ptr)?;
        if k == "oneOf" {
            // Exactly one branch holds iff at most one can: check every pair
            // is disjoint, by type or by a required const/enum property.
            let views: Vec<Option<&'a Map<String, Value>>> = list
                .iter()
                .enumerate()
                .map(|(i, b)| self.branch_view(b, &format!("{ptr}/oneOf/{i}")))
                .collect::<Result<_>>()?;
            let mut overlaps: Vec<Vec<usize>> = vec![Vec::new(); views.len()];
            for j in 1..views.len() {
                for i in 0..j {
                    if !self.disjoint(views[i], views[j], 0) {
                        overlaps[i].push(j);
                        overlaps[j].push(i);
                    }
                }
            }
            if overlaps.iter().any(|o| !o.is_empty()) {
                return self.exclusive_union(list, &overlaps, ptr);
            }
        }
        let mut alts = Vec::new();
        for (i, b) in list.iter().enumerate() {
            let name = self.rule_for(&format!("{ptr}/{k}/{i}"), b)?;
            alts.push(Node::Ref(name, Pos::default()));
        }
        Ok(Node::alt(alts))
    }

    /// `oneOf` whose branches may overlap: branch i, and not each branch j
    /// that may overlap it.
    fn exclusive_union(
        &mut self,
        list: &'a [Value],
        overlaps: &[Vec<usize>],
        ptr: &str,
    ) -> Result<Node> {
        if ptr.matches("/(only)").count() >= MAX_EXCLUSIVE_DEPTH {
            // A branch's negation can bring back the `oneOf` being split
            // (`not` of a `not oneOf`), and that one's split the next:
            // each round is a new schema, so no memo ends it.
            return refuse(
                ptr,
                format!(
                    "`oneOf` branches that may overlap, split again inside their own \
                     negations more than {MAX_EXCLUSIVE_DEPTH} times, are not supported"
                ),
            );
        }
        let mut negated: HashMap<usize, Value> = HashMap::default();
        for &j in overlaps.iter().flatten() {
            if negated.contains_key(&j) {
                continue;
            }
            let at = format!("{ptr}/oneOf/{j}");
            match self.negate(&list[j], &at) {
                Ok(n) => negated.insert(j, n),
                Err(e) => {
                    let i = overlaps[j][0];
                    return refuse(
                        &at,
                        format!(
                            "`oneOf` branches {} and {} may overlap, and branch {j} has no \
                             negation maskpar compiles ({e}); use anyOf if they cannot overlap",
                            i.min(j),
                            i.max(j)
                        ),
                    );
                }
            };
        }
        let mut alts = Vec::new();
        for (i, b) in list.iter().enumerate() {
            let at = format!("{ptr}/oneOf/{i}");
            let name = if overlaps[i].is_empty() {
                self.rule_for(&at, b)?
            } else {
                let mut parts = vec![b.clone()];
                parts.extend(overlaps[i].iter().map(|j| negated[j].clone()));
                let only: &'a Value = self.arena.alloc(serde_json::json!({ "allOf": parts }));
                self.rule_keyed(content_key("(only)", only), &format!("{at}/(only)"), only)?
            };
            alts.push(Node::Ref(name, Pos::default()));
        }
        Ok(Node::alt(alts))
    }

    /// Whether no value satisfies both schemas (None: no keywords), judged
    /// by their types and, when only objects can satisfy both, by a member
    /// one requires whose value no schema of the other's for that name
    /// accepts (`false`, another type, other `const`/`enum` values). Sound
    /// because it reads a subset of each schema's keywords: fewer keywords
    /// accept more values.
    pub(super) fn disjoint<'v>(
        &self,
        a: Option<&'v Map<String, Value>>,
        b: Option<&'v Map<String, Value>>,
        depth: usize,
    ) -> bool {
        let (Some(a), Some(b)) = (a, b) else {
            return false;
        };
        let common: Option<Vec<&str>> = match (possible_types(a), possible_types(b)) {
            (Some(ta), Some(tb)) => Some(ta.into_iter().filter(|t| tb.contains(t)).collect()),
            (Some(t), None) | (None, Some(t)) => Some(t),
            (None, None) => None,
        };
        if common.as_ref().is_some_and(Vec::is_empty) {
            return true;
        }
        if let (Some(x), Some(y)) = (pinned_values(a), pinned_values(b)) {
            if !x.iter().any(|v| y.iter().any(|w| merge::json_equal(v, w))) {
                return true;
            }
        }
        if depth >= MAX_DISJOINT_DEPTH || common != Some(vec!["object"]) {
            return false;
        }
        let member_clash = |x: &'v Map<String, Value>, y: &'v Map<String, Value>| {
            let Some(required) = x.get("required").and_then(Value::as_array) else {
                return false;
            };
            required.iter().filter_map(Value::as_str).any(|k| {
                let (vx, vy) = (member_schema(x, k), member_schema(y, k));
                match (vx, vy) {
                    (_, Some(Value::Bool(false))) | (Some(Value::Bool(false)), _) => true,
                    (Some(vx), Some(vy)) => {
                        let view = |v: &'v Value| self.branch_view(v, "").ok().flatten();
                        self.disjoint(view(vx), view(vy), depth + 1)
                    }
                    _ => false,
                }
            })
        };
        member_clash(a, b) || member_clash(b, a)
    }

    /// The keywords of a `oneOf` branch, through `$ref`s (None: `true`).
    pub(super) fn branch_view<'v>(
        &self,
        b: &'v Value,
        ptr: &str,
    ) -> Result<Option<&'v Map<String, Value>>>
    where
        'a: 'v,
    {
        let mut node = b;
        let mut at = ptr.to_string();
        for _ in 0..16 {
            match node {
                Value::Object(o)
                    if o.contains_key("$ref") && (o.len() == 1 || self.legacy_draft) =>
                {
                    let (p, v) = self.resolve(o["$ref"].as_str(), &at)?;
                    (at, node) = (p, v);
                }
                Value::Object(o) => return Ok(Some(o)),
                _ => return Ok(None),
            }
        }
        Ok(None)
    }

    /// The value every one of `schemas` validates (each with its pointer).
    pub(super) fn all_of(
        &mut self,
        mut schemas: Vec<(String, &'a Value)>,
        ptr: &str,
    ) -> Result<Node> {
        let name = if schemas.len() == 1 {
            let (at, schema) = schemas.pop().expect("one schema");
            self.rule_for(&at, schema)?
        } else {
            // Merged like any `allOf` (memoized by content there).
            let list = schemas.into_iter().map(|(_, v)| v.clone()).collect();
            let both: &'a Value = self.arena.alloc(Value::Object(Map::from_iter([(
                "allOf".to_string(),
                Value::Array(list),
            )])));
            let key = content_key("(allOf)", both);
            // Rules below are memoized by pointer: each list of schemas
            // merged here needs a pointer of its own.
            let at = format!("{ptr}/(allOf {})", self.by_pointer.len());
            self.rule_keyed(key, &at, both)?
        };
        Ok(Node::Ref(name, Pos::default()))
    }
}

/// Bound on the member schemas `Compiler::disjoint` descends into.
const MAX_DISJOINT_DEPTH: usize = 4;

/// Bound on `oneOf`s split into exclusive branches inside one another's
/// branches (`exclusive_union`).
const MAX_EXCLUSIVE_DEPTH: usize = 8;

/// The schema an object's member named `k` must satisfy by `m`'s
/// `properties` / `additionalProperties` (None: unknown, such as a name
/// `patternProperties` may match).
fn member_schema<'v>(m: &'v Map<String, Value>, k: &str) -> Option<&'v Value> {
    if let Some(v) = m.get("properties").and_then(|p| p.get(k)) {
        return Some(v);
    }
    if m.contains_key("patternProperties") {
        return None;
    }
    m.get("additionalProperties")
}

/// The JSON types a schema's values may have (number includes integer),
/// from `type` or its `const`/`enum` values; None: any.
fn possible_types(m: &Map<String, Value>) -> Option<Vec<&'static str>> {
    let mut out: Vec<&'static str> = Vec::new();
    let mut add = |t: &'static str| {
        let more: &[&'static str] = if t == "number" {
            &["number", "integer"]
        } else {
            &[t]
        };
        for x in more {
            if !out.contains(x) {
                out.push(x);
            }
        }
    };
    if let Some(t) = m.get("type") {
        for n in type_names(t)? {
            add(TYPES.iter().copied().find(|t| *t == n)?);
        }
        return Some(out);
    }
    for v in pinned_values(m)? {
        let t = TYPES
            .iter()
            .copied()
            .find(|t| *t != "integer" && has_type(v, t))?;
        add(t);
    }
    Some(out)
}
