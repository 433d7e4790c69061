//! Intersections of schemas (`allOf`, and keywords next to `$ref`, `anyOf`,
//! `oneOf`), computed on the schema JSON before it is compiled.
//!
//! A merge yields one schema that validates exactly the values all its parts
//! validate, or refuses. `$ref`s at the top of a part are resolved and their
//! targets merged in; nested `$ref`s stay as they are (the document has one
//! schema resource, checked by the caller, so they resolve the same anywhere).
//! A disjunction is distributed over the rest: `P ∧ anyOf(B1..Bn)` is
//! `anyOf(P ∧ B1, .., P ∧ Bn)`, and likewise for `oneOf` (exactly one `P ∧ Bi`
//! holds iff `P` holds and exactly one `Bi` does).

use serde_json::{Map, Value};

use super::keywords::{is_constraint, type_names};
use super::{decimals, refuse};
use crate::error::Result;
use values::{excluded_values, intersect_values, take_values};

mod containers;
mod values;

pub use values::json_equal;

/// Bound on `$ref`s expanded and branches made while merging one schema.
const MAX_MERGE_WORK: usize = 2048;
/// Bound on nested merges (merging recursive schemas into each other).
const MAX_MERGE_DEPTH: usize = 16;

/// Resolves a `$ref` value found at a pointer to (a copy of) its target.
pub type Resolve<'r> = &'r dyn Fn(&Value, &str) -> Result<Value>;

pub struct Merger<'r> {
    pub resolve: Resolve<'r>,
    /// Drafts 4 to 7: keywords next to `$ref` are ignored.
    pub ignore_ref_siblings: bool,
    /// Draft 7 on: `if`/`then`/`else` are keywords (before, annotations).
    pub conditionals: bool,
    /// A schema's own keywords merge after what its `$ref` and `allOf`
    /// name, so its `properties` come after theirs, in the member order
    /// `key_order="schema"` keeps (llguidance's; the intersection is the
    /// same either way).
    pub own_keywords_last: bool,
    pub work: usize,
}

impl Merger<'_> {
    fn spend(&mut self, ptr: &str) -> Result<()> {
        self.work += 1;
        if self.work > MAX_MERGE_WORK {
            return refuse(
                ptr,
                format!("merging this schema needs more than {MAX_MERGE_WORK} steps (a `$ref` cycle or a large product of `anyOf`s)"),
            );
        }
        Ok(())
    }

    /// One schema validating exactly what every schema of `parts` validates.
    pub fn merge(&mut self, parts: Vec<Value>, ptr: &str, depth: usize) -> Result<Value> {
        if depth > MAX_MERGE_DEPTH {
            return refuse(ptr, "`allOf` of recursive schemas nests too deep to merge");
        }
        let mut queue: std::collections::VecDeque<Value> = parts.into();
        let mut plain: Vec<Map<String, Value>> = Vec::new();
        let mut choices: Vec<(String, Vec<Value>)> = Vec::new();
        // With `own_keywords_last`, an expanded schema's own keywords wait
        // here until what it names is merged (`Value::Null` marks them).
        let mut waiting: Vec<Map<String, Value>> = Vec::new();
        while let Some(part) = queue.pop_front() {
            if part.is_null() {
                plain.extend(waiting.pop());
                continue;
            }
            let mut o = match part {
                Value::Bool(true) => continue,
                Value::Bool(false) => return Ok(Value::Bool(false)),
                Value::Object(o) => o,
                _ => return refuse(ptr, "a schema must be an object or a boolean"),
            };
            let mut named = Vec::new();
            if let Some(target) = o.remove("$ref") {
                self.spend(ptr)?;
                let resolved = (self.resolve)(&target, ptr)?;
                if self.ignore_ref_siblings {
                    o.clear();
                }
                named.push(resolved);
            }
            match o.remove("allOf") {
                Some(Value::Array(list)) => named.extend(list),
                Some(_) => return refuse(&format!("{ptr}/allOf"), "`allOf` must be an array"),
                None => {}
            }
            let own_last = self.own_keywords_last && !named.is_empty();
            if own_last {
                // Depth first: what it names, then its own keywords.
                for n in std::iter::once(Value::Null).chain(named.into_iter().rev()) {
                    queue.push_front(n);
                }
            } else {
                queue.extend(named);
            }
            for k in ["anyOf", "oneOf"] {
                match o.remove(k) {
                    Some(Value::Array(list)) if !list.is_empty() => choices.push((k.into(), list)),
                    Some(_) => {
                        return refuse(
                            &format!("{ptr}/{k}"),
                            format!("`{k}` must be a non-empty array"),
                        )
                    }
                    None => {}
                }
            }
            if own_last {
                waiting.push(o);
            } else {
                plain.push(o);
            }
        }
        let mut merged = Map::new();
        for p in plain {
            merged = self.merge_two(merged, p, ptr, depth)?;
        }
        if unsatisfiable(&merged) {
            return Ok(Value::Bool(false));
        }
        if choices.is_empty() {
            return Ok(Value::Object(merged));
        }
        let (k, branches) = choices.remove(0);
        let mut out = Vec::new();
        for (i, b) in branches.into_iter().enumerate() {
            self.spend(ptr)?;
            let mut parts = vec![Value::Object(merged.clone()), b];
            parts.extend(choices.iter().map(|(k2, l)| {
                let mut m = Map::new();
                m.insert(k2.clone(), Value::Array(l.clone()));
                Value::Object(m)
            }));
            let branch = self.merge(parts, &format!("{ptr}/{k}/{i}"), depth)?;
            // A branch nothing satisfies changes neither anyOf nor oneOf.
            if branch != Value::Bool(false) {
                out.push(branch);
            }
        }
        if out.is_empty() {
            return Ok(Value::Bool(false));
        }
        let mut m = Map::new();
        m.insert(k, Value::Array(out));
        Ok(Value::Object(m))
    }

    fn merge_two(
        &mut self,
        mut a: Map<String, Value>,
        mut b: Map<String, Value>,
        ptr: &str,
        depth: usize,
    ) -> Result<Map<String, Value>> {
        // Annotations and unknown keywords constrain nothing.
        let conditional = |k: &str| matches!(k, "if" | "then" | "else");
        let keep =
            |k: &String, _: &mut Value| is_constraint(k) && (self.conditionals || !conditional(k));
        a.retain(keep);
        b.retain(keep);
        // `enum` next to `const` is one list of values (else a schema with
        // both would come back from its merge unchanged).
        let pinned_twice =
            |m: &Map<String, Value>| m.contains_key("enum") && m.contains_key("const");
        if a.is_empty() && !pinned_twice(&b) {
            return Ok(b);
        }
        if b.is_empty() && !pinned_twice(&a) {
            return Ok(a);
        }
        conditional_alone(&mut a);
        conditional_alone(&mut b);
        let deferred = defer_rewritten(&mut a, &mut b);
        // Two patterns both hold: the second joins the internal list.
        if let (Some(Value::String(x)), Some(Value::String(y))) =
            (a.get("pattern"), b.get("pattern"))
        {
            if x != y {
                let second = b.remove("pattern").expect("b has a pattern");
                b.insert(super::MORE_PATTERNS.into(), Value::Array(vec![second]));
            }
        }
        counts_beside_contains(&mut a, &b);
        counts_beside_contains(&mut b, &a);
        self.merge_members(&mut a, &mut b, ptr, depth)?;
        self.merge_items(&mut a, &mut b, ptr, depth)?;
        // `const`/`enum`: the values both sides allow, as one `enum`.
        match (take_values(&mut a, ptr)?, take_values(&mut b, ptr)?) {
            (None, None) => {}
            (Some(x), None) | (None, Some(x)) => {
                a.insert("enum".into(), Value::Array(x));
            }
            (Some(x), Some(y)) => {
                a.insert("enum".into(), Value::Array(intersect_values(x, &y)));
            }
        }
        let draft4_bounds = |m: &Map<String, Value>| {
            ["exclusiveMinimum", "exclusiveMaximum"]
                .iter()
                .any(|k| matches!(m.get(*k), Some(Value::Bool(_))))
        };
        let bounds = |m: &Map<String, Value>| {
            ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]
                .iter()
                .any(|k| m.contains_key(*k))
        };
        if (draft4_bounds(&a) || draft4_bounds(&b)) && bounds(&a) && bounds(&b) {
            return refuse(
                ptr,
                "merging number bounds with draft-4 boolean `exclusiveMinimum`/`exclusiveMaximum` is not supported",
            );
        }
        for (k, vb) in b {
            let here = format!("{ptr}/{k}");
            let merged = match a.remove(&k) {
                None => vb,
                Some(va) => self.combine(&k, va, vb, &here, depth)?,
            };
            a.insert(k, merged);
        }
        if let Some(d) = deferred {
            match a.get_mut("allOf") {
                Some(Value::Array(list)) => list.push(Value::Object(d)),
                _ => {
                    a.insert("allOf".into(), Value::Array(vec![Value::Object(d)]));
                }
            }
        }
        Ok(a)
    }

    /// Keyword `k` present on both sides.
    fn combine(&mut self, k: &str, va: Value, vb: Value, ptr: &str, depth: usize) -> Result<Value> {
        let num = |v: &Value| v.as_f64();
        Ok(match k {
            "type" => {
                let (Some(ta), Some(tb)) = (type_names(&va), type_names(&vb)) else {
                    return refuse(ptr, "`type` must be a string or an array of strings");
                };
                let mut out: Vec<Value> = Vec::new();
                for t in &ta {
                    for u in &tb {
                        let both = match (*t, *u) {
                            (x, y) if x == y => Some(x),
                            ("number", "integer") | ("integer", "number") => Some("integer"),
                            _ => None,
                        };
                        if let Some(x) = both {
                            if !out.iter().any(|o| o == x) {
                                out.push(Value::String(x.into()));
                            }
                        }
                    }
                }
                Value::Array(out)
            }
            "required" => {
                let mut out = match va {
                    Value::Array(x) => x,
                    _ => return refuse(ptr, "`required` must be an array"),
                };
                for x in vb.as_array().cloned().unwrap_or_default() {
                    if !out.contains(&x) {
                        out.push(x);
                    }
                }
                Value::Array(out)
            }
            "minLength" | "minItems" | "minProperties" | "minimum" | "minContains" => {
                match (num(&va), num(&vb)) {
                    (Some(x), Some(y)) => if x >= y { va } else { vb },
                    _ => return refuse(ptr, format!("`{k}` must be a number")),
                }
            }
            "maxLength" | "maxItems" | "maxProperties" | "maximum" | "maxContains" => {
                match (num(&va), num(&vb)) {
                    (Some(x), Some(y)) => if x <= y { va } else { vb },
                    _ => return refuse(ptr, format!("`{k}` must be a number")),
                }
            }
            "exclusiveMinimum" | "exclusiveMaximum" => match (num(&va), num(&vb)) {
                (Some(x), Some(y)) => {
                    let keep_a = if k == "exclusiveMinimum" { x >= y } else { x <= y };
                    if keep_a { va } else { vb }
                }
                _ => return refuse(ptr, format!("merging two draft-4 `{k}`s is not supported")),
            },
            // Two `contains` are two witnesses (maybe different items): not
            // one merged `contains`, so only equal ones merge (below).
            "items" | "additionalItems" | "propertyNames"
                if !va.is_array() && !vb.is_array() =>
            {
                self.merge(vec![va, vb], ptr, depth + 1)?
            }
            "multipleOf" => {
                let text = |v: &Value| v.as_number().map(super::decimal_text);
                match text(&va).zip(text(&vb)).and_then(|(a, b)| decimals::lcm_text(&a, &b)) {
                    Some(l) => serde_json::from_str(&l).map_or_else(
                        |_| refuse(ptr, "merging two `multipleOf`s overflowed"),
                        Ok,
                    )?,
                    None => return refuse(ptr, "merging these two `multipleOf`s is not supported"),
                }
            }
            super::NOT_MULTIPLE_OF => {
                let mut all = va.as_array().cloned().unwrap_or_default();
                all.extend(vb.as_array().cloned().unwrap_or_default());
                Value::Array(all)
            }
            super::MORE_PATTERNS => {
                let mut all = va.as_array().cloned().unwrap_or_default();
                all.extend(vb.as_array().cloned().unwrap_or_default());
                Value::Array(all)
            }
            "uniqueItems" => Value::Bool(va == Value::Bool(true) || vb == Value::Bool(true)),
            // Two leaf `not`s of values: the values either leaves out.
            "not" if excluded_values(&va).is_some() && excluded_values(&vb).is_some() => {
                let mut all = excluded_values(&va).unwrap_or_default();
                all.extend(excluded_values(&vb).unwrap_or_default());
                serde_json::json!({ "enum": all })
            }
            // Two leaf `not`s: neither holds, `not` of their union (a leaf).
            "not" if super::negate::is_leaf(&va, true) && super::negate::is_leaf(&vb, true) => {
                let leaves = |v: Value| match v {
                    Value::Object(mut o) if o.contains_key("anyOf") => match o.remove("anyOf") {
                        Some(Value::Array(list)) => list,
                        _ => unreachable!("a leaf anyOf is an array"),
                    },
                    other => vec![other],
                };
                let mut all = leaves(va);
                all.extend(leaves(vb));
                serde_json::json!({ "anyOf": all })
            }
            _ if json_equal(&va, &vb) => va,
            _ => {
                return refuse(
                    ptr,
                    format!("merging two different `{k}`s (in `allOf` or next to `$ref`/`anyOf`/`oneOf`) is not supported yet"),
                )
            }
        })
    }
}

/// `then`/`else` mean something only beside their own `if`, and `if` only
/// beside one of them: alone they are dropped, so that another part's
/// cannot pair with them.
fn conditional_alone(m: &mut Map<String, Value>) {
    if !m.contains_key("if") {
        m.remove("then");
        m.remove("else");
    } else if !m.contains_key("then") && !m.contains_key("else") {
        m.remove("if");
    }
}

/// Keywords the compiler rewrites one at a time (a general `not`; `if` with
/// its `then`/`else`) that both sides have and that differ: `b`'s are taken
/// out, to stay beside the merge in an `allOf` (compiling the merge rewrites
/// `a`'s, then merges `b`'s into the result). Two leaf `not`s stay (they
/// merge as values or are refused): deferring one would come back here.
fn defer_rewritten(
    a: &mut Map<String, Value>,
    b: &mut Map<String, Value>,
) -> Option<Map<String, Value>> {
    let mut out = Map::new();
    let differ = |k: &str, a: &Map<String, Value>, b: &Map<String, Value>| matches!((a.get(k), b.get(k)), (Some(x), Some(y)) if !json_equal(x, y));
    if ["if", "then", "else"].iter().any(|k| differ(k, a, b))
        && a.contains_key("if")
        && b.contains_key("if")
    {
        for k in ["if", "then", "else"] {
            if let Some(v) = b.remove(k) {
                out.insert(k.into(), v);
            }
        }
    }
    if differ("not", a, b) {
        let leaf = |m: &Map<String, Value>| {
            m.get("not")
                .is_some_and(|n| super::negate::is_leaf(n, true))
        };
        match (leaf(a), leaf(b)) {
            (true, true) => {}
            (true, false) => {
                // The general one stays on top, where it is rewritten first.
                let general = b.remove("not").expect("b has a `not`");
                out.insert(
                    "not".into(),
                    a.insert("not".into(), general).expect("a has a `not`"),
                );
            }
            _ => {
                out.insert("not".into(), b.remove("not").expect("b has a `not`"));
            }
        }
    }
    (!out.is_empty()).then_some(out)
}

/// `minContains` / `maxContains` count the items of their own `contains`:
/// without one they constrain nothing (dropped, so they cannot count the
/// other side's), and beside one `minContains` is 1 unless given (written
/// out when the other side also has a `contains`, whose count it may lower).
fn counts_beside_contains(m: &mut Map<String, Value>, other: &Map<String, Value>) {
    if !m.contains_key("contains") {
        m.remove("minContains");
        m.remove("maxContains");
    } else if other.contains_key("contains") && !m.contains_key("minContains") {
        m.insert("minContains".into(), Value::from(1));
    }
}

/// Whether no value satisfies merged keywords `m`, judged by the plain
/// signs a merge leaves: an empty `type` or `enum`, or objects only with a
/// required member whose schema is `false` (so that branches a product of
/// conditions cannot reach are pruned).
fn unsatisfiable(m: &Map<String, Value>) -> bool {
    let empty = |k: &str| matches!(m.get(k), Some(Value::Array(a)) if a.is_empty());
    if empty("type") || empty("enum") {
        return true;
    }
    // `required` holds for every non-object: only objects are left out.
    let only_objects = match m.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(t)) => t.len() == 1 && t[0] == "object",
        _ => false,
    };
    let (true, Some(Value::Array(required)), Some(Value::Object(props))) =
        (only_objects, m.get("required"), m.get("properties"))
    else {
        return false;
    };
    required
        .iter()
        .filter_map(Value::as_str)
        .any(|k| props.get(k) == Some(&Value::Bool(false)))
}
