//! Arrays: `[`, the items, `]`. Item `i` takes its positional schema
//! (`prefixItems`, or `items` in its older array form) and the items past
//! those take the rest schema (`items`, or `additionalItems`; `false`: no
//! more items), between `minItems` and `maxItems` of them.
//!
//! The body is built backwards as a chain: `found[i]` is what may follow
//! once `i` items are written (None: nothing can), from `settled` items
//! on (the positional ones, at least `minItems`, at least one) a repetition
//! of rest items up to the limit. With `contains` (some item must also
//! satisfy it) a second chain, `pending[i]`, is what may follow `i` items
//! none of which is known to match: at each position either an item that
//! also satisfies `contains` (its schema and `contains` merged, `all_of`)
//! goes on with `found`, or a plain item goes on with `pending`. Under a
//! `maxItems` the positions past the settled ones are unrolled, at most
//! `MAX_CONTAINS_UNROLL` of them. `minContains` may be 0 or 1 and
//! `maxContains` is refused; `uniqueItems: true` is refused (in `value`).

use super::keywords::{count, SOME_ITEM};
use super::{lit, refuse, Compiler};
use crate::cfg::ast::{Node, Pos};
use crate::error::Result;
use serde_json::{Map, Value};

impl<'a> Compiler<'a> {
    pub(super) fn array(&mut self, obj: &'a Map<String, Value>, ptr: &str) -> Result<Option<Node>> {
        let min = count(obj, "minItems", ptr)?.unwrap_or(0);
        let mut max = count(obj, "maxItems", ptr)?;
        // Positional schemas, then the schema of the rest (None: no more items).
        let (prefix, prefix_key, rest, rest_key): (&[Value], &str, Option<&Value>, &str) =
            match (obj.get("prefixItems"), obj.get("items")) {
                (Some(Value::Array(p)), items) => (p, "prefixItems", items, "items"),
                (None, Some(Value::Array(p))) => {
                    (p, "items", obj.get("additionalItems"), "additionalItems")
                }
                (None, items) => (&[], "", items, "items"),
                (Some(_), _) => {
                    return refuse(
                        &format!("{ptr}/prefixItems"),
                        "`prefixItems` must be an array",
                    )
                }
            };
        if prefix.len() > MAX_ARRAY_UNROLL {
            return refuse(
                &format!("{ptr}/{prefix_key}"),
                format!("more than {MAX_ARRAY_UNROLL} positional item schemas"),
            );
        }
        let contains = self.contains(obj, ptr)?;
        let rest_schema: Option<&'a Value> = match rest {
            Some(Value::Bool(false)) => {
                max = Some(max.map_or(prefix.len() as u32, |m| m.min(prefix.len() as u32)));
                None
            }
            Some(r) => Some(r),
            None => Some(&Value::Bool(true)),
        };
        let rest_at = format!("{ptr}/{rest_key}");
        let rest = match (rest, rest_schema) {
            (None, Some(_)) => Some(self.any()),
            (_, Some(r)) => Some(Node::Ref(self.rule_for(&rest_at, r)?, Pos::default())),
            (_, None) => None,
        };
        if max.is_some_and(|m| m < min) {
            return Ok(None);
        }
        let mut items: Vec<Node> = Vec::new();
        let mut schemas: Vec<(String, &'a Value)> = Vec::new();
        for (i, p) in prefix.iter().enumerate() {
            if p == &Value::Bool(false) {
                // No array reaches this position.
                max = Some(max.map_or(i as u32, |m| m.min(i as u32)));
                break;
            }
            let at = format!("{ptr}/{prefix_key}/{i}");
            items.push(Node::Ref(self.rule_for(&at, p)?, Pos::default()));
            schemas.push((at, p));
        }
        if max.is_some_and(|m| m < min) || (rest.is_none() && (items.len() as u32) < min) {
            return Ok(None);
        }
        let sep = self.item_sep();
        let item_at = |i: usize| items.get(i).cloned().or_else(|| rest.clone());
        let limit = max.map(|m| m as usize);
        let settled = items.len().max(min as usize).max(1);
        let fits = |i: usize| limit.is_none_or(|l| i < l);
        // found[i]: what may follow once i items are written (1 <= i <=
        // settled; None: nothing can). From `settled` items on, any number of
        // rest items up to the limit.
        let tail_from = |i: usize| match &rest {
            Some(r) if fits(i) => Node::repeat(
                Node::seq(vec![sep.clone(), r.clone()]),
                0,
                limit.map(|l| (l - i) as u32),
            ),
            _ => Node::Empty,
        };
        // Past the positional items and below `minItems` every item is a
        // required rest item: those `settled - lo` items are one counted
        // repetition, not a chain as deep as `minItems` (whose nodes every
        // later walk would recurse through).
        // Each positional item (and, with `contains`, each item below
        // `minItems`) nests the rest of the array one level deeper.
        let unrolled = if contains.is_some() {
            settled
        } else {
            items.len()
        };
        if unrolled > MAX_ARRAY_UNROLL {
            return refuse(
                ptr,
                format!(
                    "an array schema that spells out more than {MAX_ARRAY_UNROLL} positions \
                     (`prefixItems`, or `minItems` with `contains`) is not supported"
                ),
            );
        }
        let lo = if contains.is_some() {
            settled
        } else {
            items.len().max(1).min(settled)
        };
        let mut found: Vec<Option<Node>> = vec![None; lo + 1];
        found[lo] = match (&rest, settled - lo) {
            (_, 0) => Some(tail_from(settled)),
            (Some(r), k) => Some(Node::seq(vec![
                Node::repeat(
                    Node::seq(vec![sep.clone(), r.clone()]),
                    k as u32,
                    Some(k as u32),
                ),
                tail_from(settled),
            ])),
            (None, _) => None, // refused above: fewer items than minItems
        };
        for i in (1..lo).rev() {
            let step = match (item_at(i), &found[i + 1]) {
                (Some(it), Some(t)) if fits(i) => Some(Node::seq(vec![sep.clone(), it, t.clone()])),
                _ => None,
            };
            found[i] = match (step, i >= min as usize) {
                (Some(s), true) => Some(Node::repeat(s, 0, Some(1))),
                (s, false) => s,
                (None, true) => Some(Node::Empty),
            };
        }
        let Some((c_at, c)) = contains else {
            let first = match (item_at(0), &found[1]) {
                (Some(it), Some(t)) if fits(0) => Some(Node::seq(vec![it, t.clone()])),
                _ => None,
            };
            return Ok(match (first, min) {
                (Some(f), min) => Some(self.container("[", f, min == 0, "]")),
                (None, 0) => Some(Node::seq(vec![lit("["), self.ws(), lit("]")])),
                (None, _) => None,
            });
        };
        // With `contains`: pending[i] is what may follow i items none of
        // which is known to match `c` (one still must); an item that does
        // continues with found[i + 1].
        let mut with_c: Vec<Node> = Vec::new();
        for (at, p) in &schemas {
            with_c.push(self.all_of(vec![(at.clone(), *p), (c_at.clone(), c)], ptr)?);
        }
        let rest_c = match rest_schema {
            Some(r) => Some(self.all_of(vec![(rest_at, r), (c_at.clone(), c)], ptr)?),
            None => None,
        };
        let c_at_index = |i: usize| with_c.get(i).cloned().or_else(|| rest_c.clone());
        let rest_step = |n: Node| Node::seq(vec![sep.clone(), n]);
        // The stationary part: from `settled` items on, only rest items.
        let mut pending: Option<Node> = match (&rest, &rest_c, limit) {
            (Some(r), Some(rc), None) => Some(Node::seq(vec![
                Node::repeat(rest_step(r.clone()), 0, None),
                rest_step(rc.clone()),
                Node::repeat(rest_step(r.clone()), 0, None),
            ])),
            (Some(r), Some(rc), Some(l)) if l > settled => {
                if l - settled > MAX_CONTAINS_UNROLL {
                    return refuse(
                        &format!("{ptr}/maxItems"),
                        format!(
                            "`contains` with `maxItems` more than {MAX_CONTAINS_UNROLL} past the \
                             positional items is not supported yet"
                        ),
                    );
                }
                let mut p: Option<Node> = None;
                for i in (settled..l).rev() {
                    let mut alts = vec![Node::seq(vec![sep.clone(), rc.clone(), tail_from(i + 1)])];
                    if let Some(later) = p {
                        alts.push(Node::seq(vec![sep.clone(), r.clone(), later]));
                    }
                    p = Some(Node::alt(alts));
                }
                p
            }
            _ => None,
        };
        for i in (0..settled).rev() {
            let first = i == 0;
            let lead = |n: Node| if first { n } else { rest_step(n) };
            let mut alts = Vec::new();
            if fits(i) {
                if let (Some(it), Some(later)) = (c_at_index(i), &found[i + 1]) {
                    alts.push(Node::seq(vec![lead(it), later.clone()]));
                }
                if let (Some(it), Some(later)) = (item_at(i), &pending) {
                    alts.push(Node::seq(vec![lead(it), later.clone()]));
                }
            }
            pending = (!alts.is_empty()).then(|| Node::alt(alts));
        }
        Ok(pending.map(|body| self.container("[", body, false, "]")))
    }

    /// `contains` (with its pointer), unless `minContains: 0` makes it
    /// constrain nothing; other counts are refused. Negations ask for an
    /// item with `SOME_ITEM`, which is `contains` in every draft.
    pub(super) fn contains(
        &self,
        obj: &'a Map<String, Value>,
        ptr: &str,
    ) -> Result<Option<(String, &'a Value)>> {
        let user = obj.get("contains").filter(|_| !self.before_draft6);
        let c = match (user, obj.get(SOME_ITEM)) {
            (None, None) => return Ok(None),
            (None, Some(c)) => return Ok(Some((format!("{ptr}/(some item)"), c))),
            (Some(c), None) => c,
            (Some(_), Some(_)) => {
                return refuse(
                    &format!("{ptr}/contains"),
                    "`contains` merged with another `contains` is not supported yet",
                )
            }
        };
        let at = format!("{ptr}/contains");
        if self.legacy_draft {
            return Ok(Some((at, c))); // no `minContains` / `maxContains` yet
        }
        if obj.contains_key("maxContains") {
            return refuse(
                &format!("{ptr}/maxContains"),
                "the keyword `maxContains` is not supported yet",
            );
        }
        match count(obj, "minContains", ptr)? {
            Some(0) => Ok(None),
            None | Some(1) => Ok(Some((at, c))),
            Some(_) => refuse(
                &format!("{ptr}/minContains"),
                "`minContains` above 1 is not supported yet",
            ),
        }
    }
}

/// Bound on the positions an array schema spells out one by one.
pub const MAX_ARRAY_UNROLL: usize = 256;

/// Bound on the positions `contains` unrolls below a `maxItems`.
const MAX_CONTAINS_UNROLL: usize = 64;

#[cfg(test)]
mod tests {
    use crate::schema::ordered::tests::end_keys;

    /// The warm-up sample writes three items of a list and three members
    /// of a map (`integrations/_sample.py`) because this is where the
    /// states stop being new: the state after the second comma is not the
    /// one after the first (that comma follows the list's first item, the
    /// second follows a repeat), and from the third comma on it is the one
    /// after the second; inside the fourth item, the third's. (A sample of
    /// two items has one comma: a list's third item began cold.)
    #[test]
    fn a_list_states_repeat_from_its_third_item_on() {
        for (schema, sep, item) in [
            (
                serde_json::json!({"type": "array", "items": {"type": "integer"}}),
                "[",
                "12",
            ),
            (
                serde_json::json!({"type": "array", "items": {"type": "string"}}),
                "[",
                "\"ab\"",
            ),
            (
                serde_json::json!({"type": "object", "additionalProperties": {"type": "integer"}}),
                "{",
                "\"k\": 12",
            ),
        ] {
            // After the 1st to 4th comma; then inside the 2nd to 4th item.
            let after: Vec<String> = (1..=4)
                .map(|n| format!("{sep}{}, ", vec![item; n].join(", ")))
                .collect();
            let inside: Vec<String> = after[..3]
                .iter()
                .map(|a| format!("{a}{}", &item[..2]))
                .collect();
            let texts: Vec<&str> = after.iter().chain(&inside).map(String::as_str).collect();
            let k = end_keys(&schema, &texts);
            assert_ne!(k[0], k[1], "{schema}: after the first comma and the second");
            assert_eq!(k[1], k[2], "{schema}: after the second comma and the third");
            assert_eq!(k[2], k[3], "{schema}: after the third comma and the fourth");
            assert_eq!(k[5], k[6], "{schema}: inside the third item and the fourth");
        }
    }
}
