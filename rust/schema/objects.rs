//! Objects: `{`, the members, `}`. Every name the schema mentions (in
//! `properties` unless `false`, `required`, and the names `dependentRequired`
//! mentions) is a listed member: it appears at most once, in any order,
//! with a value every schema that applies to it validates (its property
//! schema and those of the `patternProperties` its name matches; unlisted,
//! those patterns or else `additionalProperties`), merged by `all_of`.
//! Other keys come in kinds by the patterns they match (see `keys`);
//! `strict_properties` reads an absent `additionalProperties` as `false`.
//!
//! `members` writes the object as a `Node::Members`: the parser tracks the
//! set of listed members used, so required names, `minProperties`,
//! `maxProperties`, `dependentRequired` and the `SOME_MEMBER` witness are
//! checked in rules linear in the members (at most `MAX_MEMBERS` of them).
//! A required name that cannot appear (a `false` schema, rejected by
//! `propertyNames`, or matching nothing) leaves no object (None).
//!
//! `key_order="schema"` fixes the order instead: listed members in their
//! order (`properties`, then names only `required` lists), unlisted ones
//! after them. Without a witness that is a chain of optional members, with
//! the count so far and the dependencies' state in its rules where there
//! are counts or dependencies (`ordered`, `ordered_deps`: no member sets
//! and no bound on the members); with a witness, or dependencies of too
//! many states, the member sets also check the order
//! (`MemberRules::ordered`).

use super::keys::{matching, KeyPattern};
use super::keywords::count;
use super::{check, lit, pointer_part, refuse, strings, Compiler, KeyOrder};
use crate::cfg::ast::{Members, Node};
use crate::cfg::members::MAX_MEMBERS;
use crate::error::Result;
use serde_json::{Map, Value};

impl<'a> Compiler<'a> {
    pub(super) fn object(
        &mut self,
        obj: &'a Map<String, Value>,
        ptr: &str,
    ) -> Result<Option<Node>> {
        let props: Option<&'a Map<String, Value>> = match obj.get("properties") {
            None => None,
            Some(Value::Object(p)) => Some(p),
            Some(_) => {
                return refuse(
                    &format!("{ptr}/properties"),
                    "`properties` must be an object",
                )
            }
        };
        let mut required: Vec<&str> = match obj.get("required") {
            None => Vec::new(),
            Some(Value::Array(r)) => r.iter().filter_map(Value::as_str).collect(),
            Some(_) => return refuse(&format!("{ptr}/required"), "`required` must be an array"),
        };
        // A name listed twice is still one member (the first time counts:
        // names only `required` lists come in its order).
        let mut seen = rustc_hash::FxHashSet::default();
        required.retain(|r| seen.insert(*r));
        let additional: Option<(String, &'a Value)> = match obj.get("additionalProperties") {
            Some(Value::Bool(false)) => None,
            Some(v) => Some((format!("{ptr}/additionalProperties"), v)),
            None if self.opts.strict_properties => None,
            None => Some((format!("{ptr}/additionalProperties"), &Value::Bool(true))),
        };
        let patterns = self.key_patterns(obj, ptr)?;
        let witness = self.witness(obj, ptr)?;
        let mut kinds_allowed = true;
        // Listed properties (false schemas cannot appear), then required names
        // not listed, each with the schemas its value takes: a listed value
        // also takes the schemas of the patterns its key matches; an unlisted
        // one takes those, or else the additional-properties schema.
        let mut listed: Vec<(String, Schemas<'a>, bool)> = Vec::new();
        for (k, v) in props.into_iter().flatten() {
            if v == &Value::Bool(false) {
                if required.contains(&k.as_str()) {
                    return Ok(None);
                }
                continue;
            }
            let at = format!("{ptr}/properties/{}", pointer_part(k));
            let mut schemas = vec![(at, v)];
            schemas.extend(matching(&patterns, k));
            listed.push((k.clone(), schemas, required.contains(&k.as_str())));
        }
        for r in &required {
            if listed.iter().all(|(k, _, _)| k != r) {
                match unlisted_schemas(props, &patterns, &additional, r) {
                    Some(schemas) => listed.push((r.to_string(), schemas, true)),
                    None => return Ok(None),
                }
            }
        }
        // Names dependencies mention are listed too, so that the parser knows
        // whether they are present (one that cannot appear is listed with no
        // schemas, so no value: what requires it cannot appear either).
        let dependent = self.dependent_required(obj, ptr)?;
        for name in dependent
            .iter()
            .flat_map(|(t, d)| std::iter::once(t).chain(d))
        {
            if listed.iter().all(|(k, _, _)| k != name) {
                let schemas =
                    unlisted_schemas(props, &patterns, &additional, name).unwrap_or_default();
                listed.push((name.clone(), schemas, false));
            }
        }
        // `propertyNames`: listed names it rejects cannot appear, and other
        // keys are only those it allows (None: no other key).
        let names_rule = obj
            .get("propertyNames")
            .filter(|v| **v != Value::Bool(true));
        let allowed: Option<Node> = match names_rule {
            None => None,
            Some(rule) => {
                let at = format!("{ptr}/propertyNames");
                let resolved = match self.branch_view(rule, &at)? {
                    Some(o) => Value::Object(o.clone()),
                    None => rule.clone(),
                };
                for (k, schemas, required) in listed.iter_mut() {
                    let key = Value::String(k.clone());
                    if !check::satisfies(&key, &resolved, &at, self.opts.assert_formats)? {
                        if *required {
                            return Ok(None);
                        }
                        schemas.clear(); // it cannot appear
                    }
                }
                match self.key_strings(rule, &at)? {
                    Some(node) => Some(node),
                    None => {
                        kinds_allowed = false;
                        None
                    }
                }
            }
        };
        if listed.len() > MAX_MEMBERS && self.opts.key_order == KeyOrder::Any {
            return refuse(
                &format!("{ptr}/properties"),
                format!(
                    "{} properties: objects may list at most {MAX_MEMBERS} (properties and \
                     required names together)",
                    listed.len()
                ),
            );
        }
        // Additional keys exclude every listed name, `false` ones included.
        let mut names: Vec<&str> = listed.iter().map(|(k, _, _)| k.as_str()).collect();
        names.extend(props.into_iter().flatten().map(|(k, _)| k.as_str()));
        names.sort_unstable();
        names.dedup();
        // Unlisted keys, by which patterns they match: each such set of
        // patterns is one kind of member (none matched: additional ones).
        let mut kinds: Vec<(Vec<String>, Vec<String>, Schemas<'a>)> = Vec::new();
        for set in 0..1usize << patterns.len() {
            if !kinds_allowed {
                break; // `propertyNames` allows no other key
            }
            let in_set = |i: usize| set & (1 << i) != 0;
            let regexes = |want: bool| -> Vec<String> {
                let chosen = patterns
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| in_set(*i) == want);
                chosen.map(|(_, p)| p.content.clone()).collect()
            };
            let schemas = if set == 0 {
                match &additional {
                    Some(a) => vec![a.clone()],
                    None => continue,
                }
            } else {
                let matched = patterns.iter().enumerate().filter(|(i, _)| in_set(*i));
                matched
                    .map(|(_, p)| (p.pointer.clone(), p.schema))
                    .collect()
            };
            kinds.push((regexes(true), regexes(false), schemas));
        }
        let mut kind_values = Vec::new();
        for (_, _, schemas) in &kinds {
            kind_values.push(self.all_of(schemas.clone(), ptr)?);
        }
        let extra = (!kinds.is_empty()).then(|| {
            let members = |before: Node| {
                let alts = kinds
                    .iter()
                    .zip(&kind_values)
                    .map(|((yes, no, _), value)| {
                        Node::seq(vec![
                            self.other_key(&before, &names, (yes, no), allowed.as_ref()),
                            value.clone(),
                        ])
                    })
                    .collect();
                Node::alt(alts)
            };
            (members(Node::Empty), members(self.item_sep()))
        });
        let index = |name: &String| listed.iter().position(|(k, _, _)| k == name);
        let dependent = dependent
            .iter()
            .map(|(t, d)| {
                (
                    index(t),
                    d.iter().map(index).collect::<Option<Vec<usize>>>(),
                )
            })
            .map(|(t, d)| t.zip(d).expect("dependency names are listed"))
            .collect();
        let mut max = count(obj, "maxProperties", ptr)?;
        if extra.is_none() && max.is_some_and(|m| m as usize >= listed.len()) {
            max = None; // never reached: members are counted only when it can be
        }
        let mut counts = MemberCounts {
            min: count(obj, "minProperties", ptr)?.unwrap_or(0),
            max,
            dependent,
            ..MemberCounts::default()
        };
        if let Some(w) = witness {
            // The witness: a listed member whose key qualifies, in a twin form
            // whose value also takes the witness's schema, or an unlisted one.
            let with_value = |mut schemas: Vec<(String, &'a Value)>| {
                schemas.push((w.pointer.clone(), w.value));
                schemas
            };
            for (i, (k, schemas, _)) in listed.iter().enumerate() {
                if !schemas.is_empty() && w.admits(k) {
                    let value = self.all_of(with_value(schemas.clone()), ptr)?;
                    counts.twins.push((i, value));
                }
            }
            let mut excluded = names.clone();
            excluded.extend(w.names.iter().map(String::as_str));
            let mut alts = Vec::new();
            for (yes, no, schemas) in &kinds {
                let yes: Vec<String> = yes.iter().chain(&w.matching).cloned().collect();
                let no: Vec<String> = no.iter().chain(&w.except).cloned().collect();
                let value = self.all_of(with_value(schemas.clone()), ptr)?;
                alts.push(Node::seq(vec![
                    self.other_key(&Node::Empty, &excluded, (&yes, &no), allowed.as_ref()),
                    value,
                ]));
            }
            if counts.twins.is_empty() && alts.is_empty() {
                return Ok(None); // no member can be the witness
            }
            counts.other_witness = (!alts.is_empty()).then(|| Node::alt(alts));
        }
        let listed: Vec<(String, Node, bool)> = listed
            .into_iter()
            .map(|(k, schemas, req)| {
                let value = if schemas.is_empty() {
                    self.never()
                } else {
                    self.all_of(schemas, ptr)?
                };
                Ok((k, value, req))
            })
            .collect::<Result<_>>()?;
        Ok(Some(self.members(&listed, extra, counts, ptr)?))
    }

    /// `{ ... }` with each listed member at most once, in any order, all
    /// required ones present, and `extra` members (first, after a separator)
    /// anywhere.
    pub(super) fn members(
        &mut self,
        listed: &[(String, Node, bool)],
        extra: Option<(Node, Node)>,
        counts: MemberCounts,
        ptr: &str,
    ) -> Result<Node> {
        let ksep = self.key_sep();
        let member = |k: &str, v: &Node| {
            let key = lit(&format!("\"{}\"", strings::encode(k)));
            Node::seq(vec![key, ksep.clone(), v.clone()])
        };
        let mut entries: Vec<(Node, bool)> = listed
            .iter()
            .map(|(k, v, required)| (member(k, v), *required))
            .collect();
        let ordered = self.opts.key_order == KeyOrder::Schema;
        if ordered && counts.plain() {
            return Ok(self.ordered_members(&entries, extra));
        }
        if ordered && counts.only_counted() {
            return self.ordered_counted_members(&entries, extra, counts.min, counts.max, ptr);
        }
        if ordered && counts.twins.is_empty() && counts.other_witness.is_none() {
            let chain = self.ordered_dependent_members(
                &entries,
                &extra,
                counts.min,
                counts.max,
                &counts.dependent,
                ptr,
            )?;
            if let Some(node) = chain {
                return Ok(node);
            }
            // Too many dependency states: the member sets below.
        }
        // Witness forms: each a listed member of its own, one of them needed.
        let (mut twins, mut any_of) = (Vec::new(), Vec::new());
        for (i, value) in counts.twins {
            twins.push((i, entries.len()));
            any_of.push(entries.len());
            entries.push((member(&listed[i].0, &value), false));
        }
        if let Some(other) = counts.other_witness {
            any_of.push(entries.len());
            entries.push((other, false));
        }
        if entries.len() > MAX_MEMBERS {
            return refuse(
                ptr,
                format!(
                    "{} members and witness forms (`not` of `additionalProperties`): objects may \
                     list at most {MAX_MEMBERS}",
                    entries.len()
                ),
            );
        }
        let (open, close) = self.member_ends();
        let body = Members {
            listed: entries,
            extra,
            open,
            sep: self.item_sep(),
            close,
            close_empty: lit("}"),
            min: counts.min,
            max: counts.max,
            dependent: counts.dependent,
            twins,
            any_of,
            ordered,
        };
        body.rules().check().or_else(|e| refuse(ptr, e))?;
        Ok(Node::seq(vec![
            lit("{"),
            self.ws(),
            Node::Members(Box::new(body)),
        ]))
    }

    /// `{ ... }` with exactly `members`, in this order: a plain sequence
    /// (regular), as `ordered_members` writes all-required members with no
    /// unlisted ones.
    pub(super) fn fixed_members(&self, members: &[(String, Node)]) -> Node {
        if members.is_empty() {
            return Node::seq(vec![lit("{"), self.ws(), lit("}")]);
        }
        let glue = self.member_glue();
        let mut items = vec![glue.open];
        for (i, (k, v)) in members.iter().enumerate() {
            if i > 0 {
                items.push(glue.item_sep.clone());
            }
            items.push(lit(&key_text(k)));
            items.push(glue.key_sep.clone());
            items.push(v.clone());
        }
        items.push(glue.close);
        Node::seq(items)
    }

    /// The text around the members of a non-empty object, as the layout
    /// writes it.
    pub(super) fn member_glue(&self) -> MemberGlue {
        let (open, close) = self.member_ends();
        MemberGlue {
            open: Node::seq(vec![lit("{"), self.ws(), open]),
            key_sep: self.key_sep(),
            item_sep: self.item_sep(),
            close,
        }
    }

    /// `dependentRequired` (`dependencies` in drafts 4-7, array form): each
    /// member name and the names it requires.
    fn dependent_required(
        &self,
        obj: &Map<String, Value>,
        ptr: &str,
    ) -> Result<Vec<(String, Vec<String>)>> {
        let key = if self.legacy_draft {
            "dependencies"
        } else {
            "dependentRequired"
        };
        let at = format!("{ptr}/{key}");
        let deps = match obj.get(key) {
            None => return Ok(Vec::new()),
            Some(Value::Object(d)) => d,
            Some(_) => return refuse(&at, format!("`{key}` must be an object")),
        };
        let mut out = Vec::new();
        for (name, v) in deps {
            let here = format!("{at}/{}", pointer_part(name));
            let Value::Array(names) = v else {
                // A schema dependency: rewritten before (`rewrite_negations`).
                return refuse(&here, "`dependentRequired` entries must be arrays of names");
            };
            let mut names = names
                .iter()
                .map(|n| n.as_str().map(str::to_string))
                .collect::<Option<Vec<String>>>()
                .map_or_else(|| refuse(&here, "dependencies must be property names"), Ok)?;
            names.sort_unstable();
            names.dedup();
            out.push((name.clone(), names));
        }
        Ok(out)
    }
}

/// An object's count and dependency constraints, by listed member index,
/// and its witness forms (see `Compiler::witness`).
#[derive(Default)]
pub(super) struct MemberCounts {
    min: u32,
    max: Option<u32>,
    dependent: Vec<(usize, Vec<usize>)>,
    /// A listed member and its value as the witness.
    twins: Vec<(usize, Node)>,
    /// An unlisted member as the witness (key, separator and value).
    other_witness: Option<Node>,
}

impl MemberCounts {
    /// No constraint beyond which members are required.
    fn plain(&self) -> bool {
        self.min == 0 && self.max.is_none() && self.only_counted()
    }

    /// No constraint beyond which members are required and how many
    /// members there are.
    fn only_counted(&self) -> bool {
        self.dependent.is_empty() && self.twins.is_empty() && self.other_witness.is_none()
    }
}

/// Schemas a value must satisfy, each with its pointer.
type Schemas<'a> = Vec<(String, &'a Value)>;

/// The schemas of the value of a member named `name` that `properties` does
/// not list (or lists as `false`): those of the patterns it matches, else the
/// additional-properties one. None: no such member may appear.
fn unlisted_schemas<'a>(
    props: Option<&'a Map<String, Value>>,
    patterns: &[KeyPattern<'a>],
    additional: &Option<(String, &'a Value)>,
    name: &str,
) -> Option<Vec<(String, &'a Value)>> {
    if props.is_some_and(|p| p.contains_key(name)) {
        return None;
    }
    let schemas = matching(patterns, name);
    match (additional, schemas.is_empty()) {
        (_, false) => Some(schemas),
        (Some(a), true) => Some(vec![a.clone()]),
        (None, true) => None,
    }
}

/// The text around an object's members: from `{` to the first key, between
/// a key and its value, between members, and from the last value to `}`.
pub(super) struct MemberGlue {
    pub open: Node,
    pub key_sep: Node,
    pub item_sep: Node,
    pub close: Node,
}

/// A member's key as written: quoted, as json.dumps encodes it.
pub(super) fn key_text(k: &str) -> String {
    format!("\"{}\"", strings::encode(k))
}
