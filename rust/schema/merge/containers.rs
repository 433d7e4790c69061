//! Merging the keywords of objects (members: `properties`,
//! `patternProperties`, `additionalProperties`, `required`...) and of arrays
//! (items position by position: `prefixItems`, array-form `items`,
//! `additionalItems`) of two schemas.

use serde_json::{Map, Value};

use super::values::json_equal;
use super::Merger;
use crate::error::Result;
use crate::schema::{pointer_part, refuse, strings};

impl Merger<'_> {
    /// `properties` and `additionalProperties` of both sides: a property one
    /// side lists meets the other side's additional-properties schema.
    pub(super) fn merge_members(
        &mut self,
        a: &mut Map<String, Value>,
        b: &mut Map<String, Value>,
        ptr: &str,
        depth: usize,
    ) -> Result<()> {
        let object_keys = ["properties", "additionalProperties", "patternProperties"];
        let touches = |m: &Map<String, Value>| object_keys.iter().any(|k| m.contains_key(*k));
        if !(touches(a) && touches(b)) {
            return Ok(());
        }
        // Patterns on one side (or the same on both) stay as they are; the
        // other side must not constrain unlisted keys, whose patterns differ.
        let free = |m: &Map<String, Value>| {
            m.get("additionalProperties")
                .is_none_or(|x| *x == Value::Bool(true))
        };
        let patterns = match (a.get("patternProperties"), b.get("patternProperties")) {
            (None, None) => None,
            (Some(p), None) if free(b) => Some(p),
            (None, Some(p)) if free(a) => Some(p),
            (Some(p), Some(q)) if json_equal(p, q) => Some(p),
            _ => {
                return refuse(
                    ptr,
                    "merging schemas with different `patternProperties` (or one beside \
                     `additionalProperties`) is not supported yet",
                )
            }
        };
        let mut key_patterns = Vec::new();
        for source in patterns
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(k, _)| k)
        {
            let r = strings::pattern_regex(source).or_else(|e| refuse(ptr, e))?;
            key_patterns.push(crate::regex_dfa::ByteDfa::new(&r)?);
        }
        let (patterned_a, patterned_b) = (
            a.contains_key("patternProperties"),
            b.contains_key("patternProperties"),
        );
        let props = |m: &mut Map<String, Value>| match m.remove("properties") {
            Some(Value::Object(p)) => Ok(p),
            None => Ok(Map::new()),
            Some(_) => refuse(
                &format!("{ptr}/properties"),
                "`properties` must be an object",
            ),
        };
        let (pa, pb) = (props(a)?, props(b)?);
        let (xa, xb) = (
            a.remove("additionalProperties"),
            b.remove("additionalProperties"),
        );
        let mut out = Map::new();
        let keys: Vec<String> = pa
            .keys()
            .chain(pb.keys().filter(|k| !pa.contains_key(*k)))
            .cloned()
            .collect();
        for k in keys {
            // A key a side does not list takes its additional-properties
            // schema, unless one of its patterns matches (patterns stay in
            // the merge and apply to listed keys too).
            let matched = key_patterns.iter().any(|d| strings::encoded_match(d, &k));
            let side = |p: &Map<String, Value>, x: &Option<Value>, patterned: bool| {
                p.get(&k).cloned().or_else(|| {
                    if patterned && matched {
                        None
                    } else {
                        x.clone()
                    }
                })
            };
            let parts: Vec<Value> = [side(&pa, &xa, patterned_a), side(&pb, &xb, patterned_b)]
                .into_iter()
                .flatten()
                .collect();
            let here = format!("{ptr}/properties/{}", pointer_part(&k));
            let v = if parts.len() == 1 {
                parts.into_iter().next().expect("one part")
            } else {
                self.merge(parts, &here, depth + 1)?
            };
            out.insert(k, v);
        }
        a.insert("properties".into(), Value::Object(out));
        let extra: Vec<Value> = [xa, xb].into_iter().flatten().collect();
        match extra.len() {
            0 => {}
            1 => {
                a.insert(
                    "additionalProperties".into(),
                    extra.into_iter().next().expect("one"),
                );
            }
            _ => {
                let m = self.merge(extra, &format!("{ptr}/additionalProperties"), depth + 1)?;
                a.insert("additionalProperties".into(), m);
            }
        }
        Ok(())
    }

    /// Array keywords of both sides, position by position. A side's
    /// positional schemas (`prefixItems`, or array-form `items`) and its
    /// schema for the items after them (`items`, or `additionalItems` next
    /// to array-form `items`) only mean something together, so each merged
    /// position takes the schema each side has there.
    pub(super) fn merge_items(
        &mut self,
        a: &mut Map<String, Value>,
        b: &mut Map<String, Value>,
        ptr: &str,
        depth: usize,
    ) -> Result<()> {
        let keys = ["prefixItems", "items", "additionalItems"];
        let touches = |m: &Map<String, Value>| keys.iter().any(|k| m.contains_key(*k));
        let positional = |m: &Map<String, Value>| {
            m.contains_key("prefixItems")
                || m.contains_key("additionalItems")
                || m.get("items").is_some_and(Value::is_array)
        };
        if !(touches(a) && touches(b)) || !(positional(a) || positional(b)) {
            return Ok(());
        }
        let (pa, ra) = split_items(a, ptr)?;
        let (pb, rb) = split_items(b, ptr)?;
        let at = |p: &[Value], r: &Option<Value>, i: usize| p.get(i).cloned().or_else(|| r.clone());
        let mut prefix = Vec::new();
        for i in 0..pa.len().max(pb.len()) {
            let mut parts: Vec<Value> = [at(&pa, &ra, i), at(&pb, &rb, i)]
                .into_iter()
                .flatten()
                .collect();
            prefix.push(match parts.len() {
                1 => parts.pop().expect("one"),
                _ => self.merge(parts, &format!("{ptr}/prefixItems/{i}"), depth + 1)?,
            });
        }
        a.insert("prefixItems".into(), Value::Array(prefix));
        let mut rest: Vec<Value> = [ra, rb].into_iter().flatten().collect();
        match rest.len() {
            0 => {}
            1 => {
                a.insert("items".into(), rest.pop().expect("one"));
            }
            _ => {
                let m = self.merge(rest, &format!("{ptr}/items"), depth + 1)?;
                a.insert("items".into(), m);
            }
        }
        Ok(())
    }
}

/// Removes the array keywords from `m`: its positional schemas and the
/// schema of the items after them (None: any).
fn split_items(m: &mut Map<String, Value>, ptr: &str) -> Result<(Vec<Value>, Option<Value>)> {
    let additional = m.remove("additionalItems");
    Ok(match (m.remove("prefixItems"), m.remove("items")) {
        (Some(Value::Array(p)), items) => (p, items),
        (Some(_), _) => {
            return refuse(
                &format!("{ptr}/prefixItems"),
                "`prefixItems` must be an array",
            )
        }
        (None, Some(Value::Array(p))) => (p, additional),
        // `additionalItems` without array-form `items` constrains nothing.
        (None, items) => (Vec::new(), items),
    })
}
