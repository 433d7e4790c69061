//! Objects in schema key order (`key_order="schema"`): members in the order
//! of `properties` (as xgrammar and llguidance generate them), optional ones
//! left out at will, then the unlisted ones in any order.
//!
//! A member-set object (`cfg::members`) lets the parser check which members
//! came; in schema order most objects need no such set, because the order
//! itself says which members may still come: the grammar is a chain, a
//! rule or two per listed member, and an object may list any number of
//! members. Without member counts the chain is read left to right, so that
//! the parser's state after a member is the same whichever optional members
//! came before (see `ordered_members`). With a minimum or maximum member
//! count the count so far is one more part of each rule (members times
//! counts rules), and with `dependentRequired` (which member came decides
//! which must come) the state of the members dependencies name
//! (`ordered_deps`); those chains are still read right to left.

use super::{lit, refuse, rule, Compiler};
use crate::cfg::ast::{Node, Pos};
use crate::cfg::lower::MAX_RULES;
use crate::cfg::members::MAX_COUNT;
use crate::error::Result;

/// Refuses member counts past `MAX_COUNT` (`objects` bounds them so too).
pub(super) fn check_counts(min: u32, max: Option<u32>, ptr: &str) -> Result<()> {
    if min > MAX_COUNT || max.is_some_and(|m| m > MAX_COUNT) {
        return refuse(
            ptr,
            format!("member counts above {MAX_COUNT} are not supported"),
        );
    }
    Ok(())
}

/// The member count after one more member from `count`: None past the
/// maximum; without one, every count from the minimum on is the minimum
/// (nothing tells them apart).
pub(super) fn one_more(count: usize, min: u32, max: Option<u32>) -> Option<usize> {
    let cap = max.unwrap_or(min) as usize;
    match max {
        Some(_) => (count < cap).then_some(count + 1),
        None => Some((count + 1).min(cap)),
    }
}

impl Compiler<'_> {
    /// `{ ... }` with the listed members in their order (required ones
    /// present, optional ones may be left out), then `extra` members in any
    /// order: no member sets, just one rule per member, read left to right.
    /// `none` is the object's start, before any member (while every member
    /// so far is optional); `some_i` is the object up to the i-th listed
    /// member with one or more members in it (so `sep` comes before every
    /// member but the first):
    ///
    /// ```text
    /// none   -> "{" ws
    /// some_i -> none open member_i | some_{i-1} sep member_i | some_{i-1}
    ///           (the first only while none stands, the last if optional)
    /// object -> some_n (sep extra)* close | none (open extra (sep extra)* close | "}")
    /// ```
    ///
    /// Left to right, so that the parser's state after a member names only
    /// the member and the object's start: the same state whichever optional
    /// members came before, and a fill met once (a warm-up's sample has
    /// them all) is a copy the next time (`fillmemo`). Read right to left
    /// (two rules per member, for what may follow it) each state held the
    /// chain of members that came, and an instance that left out one member
    /// met every later state anew.
    pub(super) fn ordered_members(
        &mut self,
        listed: &[(Node, bool)],
        extra: Option<(Node, Node)>,
    ) -> Node {
        let (open, close) = self.member_ends();
        let sep = self.item_sep();
        let define = |c: &mut Self, body: Node| {
            let name = format!("k{}", c.rules.len());
            c.rules.push(rule(&name, body));
            Node::Ref(name, Pos::default())
        };
        let start = Node::seq(vec![lit("{"), self.ws()]);
        let mut none = Some(define(self, start));
        let mut some: Option<Node> = None;
        for (member, required) in listed {
            let mut alts = Vec::new();
            if let Some(none) = &none {
                alts.push(Node::seq(vec![none.clone(), open.clone(), member.clone()]));
            }
            if let Some(some) = &some {
                alts.push(Node::seq(vec![some.clone(), sep.clone(), member.clone()]));
                if !required {
                    alts.push(some.clone());
                }
            }
            some = Some(define(self, Node::alt(alts)));
            if *required {
                none = None;
            }
        }
        let (after_none, after_some) = match extra {
            Some((x, more)) => {
                let tail = define(self, Node::seq(vec![Node::repeat(more, 0, None), close]));
                let after_none = Node::alt(vec![Node::seq(vec![open, x, tail.clone()]), lit("}")]);
                (after_none, tail)
            }
            None => (lit("}"), close),
        };
        let mut ends = Vec::new();
        if let Some(some) = some {
            ends.push(Node::seq(vec![some, after_some]));
        }
        if let Some(none) = none {
            ends.push(Node::seq(vec![none, after_none]));
        }
        Node::alt(ends)
    }

    /// `ordered_members` with a minimum or maximum member count
    /// (`minProperties`, `maxProperties`): the count so far is part of each
    /// rule, so no member set is needed and an object may list any number
    /// of members (the rules grow with members times counts, within the
    /// grammar's bounds). With `c` members before the i-th listed one:
    ///
    /// ```text
    /// first_i   -> open member_i rest_{i+1,1} | first_{i+1}           (no member yet)
    /// rest_i,c  -> sep member_i rest_{i+1,c+1} | rest_{i+1,c}
    /// first_n   -> open extra (sep extra){min-1, max-1} close | close_empty (if min = 0)
    /// rest_n,c  -> (sep extra){min-c, max-c} close
    /// ```
    ///
    /// the second alternatives only for optional members, a member only
    /// while the count stays within the maximum, and without a maximum
    /// counts past the minimum told apart no more. A rule that cannot reach
    /// an allowed count derives nothing (`never`) and is pruned with the
    /// grammar's other unproductive rules, so every prefix the parser takes
    /// can still close.
    pub(super) fn ordered_counted_members(
        &mut self,
        listed: &[(Node, bool)],
        extra: Option<(Node, Node)>,
        min: u32,
        max: Option<u32>,
        ptr: &str,
    ) -> Result<Node> {
        check_counts(min, max, ptr)?;
        // first_i and rest_{i,c}: refused here, before they are written,
        // past what the lowering takes (tens of thousands of members with
        // counts in the hundreds ran out of memory building them).
        let cap = max.unwrap_or(min) as usize;
        let rules = (0..=listed.len()).map(|i| 1 + i.min(cap)).sum::<usize>();
        if rules > MAX_RULES {
            return refuse(
                ptr,
                format!(
                    "{} members counted up to {cap} in schema key order need {rules} rules, \
                     more than {MAX_RULES}",
                    listed.len()
                ),
            );
        }
        crate::budget::charge_n(rules)?;
        let (open, close) = self.member_ends();
        let sep = self.item_sep();
        let define = |c: &mut Self, alts: Vec<Node>| -> Node {
            let body = if alts.is_empty() {
                c.never()
            } else {
                Node::alt(alts)
            };
            let name = format!("k{}", c.rules.len());
            c.rules.push(rule(&name, body));
            Node::Ref(name, Pos::default())
        };
        let n = listed.len();
        // rest[c] for the member after the last one seen (c >= 1).
        let mut rest: Vec<Node> = Vec::with_capacity(cap + 1);
        rest.push(Node::Empty); // rest_{i,0} is never referred to
        for c in 1..=cap.min(n) {
            let alts = self.chain_end(true, c, min, max, &extra, &open, &close);
            rest.push(define(self, alts));
        }
        let alts = self.chain_end(false, 0, min, max, &extra, &open, &close);
        let mut first = define(self, alts);
        for (i, (member, required)) in listed.iter().enumerate().rev() {
            // rest_{i,c} exists for the counts i members can reach.
            let mut here: Vec<Node> = vec![Node::Empty];
            for c in 1..=cap.min(i) {
                let mut alts = Vec::new();
                if let Some(c2) = one_more(c, min, max) {
                    alts.push(Node::seq(vec![
                        sep.clone(),
                        member.clone(),
                        rest[c2].clone(),
                    ]));
                }
                if !required {
                    alts.push(rest[c].clone());
                }
                here.push(define(self, alts));
            }
            let mut alts = Vec::new();
            if let Some(c2) = one_more(0, min, max) {
                alts.push(Node::seq(vec![
                    open.clone(),
                    member.clone(),
                    rest[c2].clone(),
                ]));
            }
            if !required {
                alts.push(first);
            }
            first = define(self, alts);
            rest = here;
        }
        Ok(Node::seq(vec![lit("{"), self.ws(), first]))
    }

    /// What comes before an object's first member and after its last (a
    /// line each with `indent`).
    pub(super) fn member_ends(&self) -> (Node, Node) {
        match self.item_lines() {
            Some((first, last)) => (lit(&first), lit(&format!("{last}}}"))),
            None => (Node::Empty, Node::seq(vec![self.ws(), lit("}")])),
        }
    }

    /// The alternatives after the listed members: the unlisted ones
    /// (`extra`: the first one, and one after a separator) as many as the
    /// counts allow after `count` members, then the object's end; `started`
    /// says whether a member came (if not, `count` is 0).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn chain_end(
        &self,
        started: bool,
        count: usize,
        min: u32,
        max: Option<u32>,
        extra: &Option<(Node, Node)>,
        open: &Node,
        close: &Node,
    ) -> Vec<Node> {
        // Unlisted members after `c` members: how many more may come.
        let more = |c: usize| {
            let lo = (min as usize).saturating_sub(c);
            let hi = max.map(|m| (m as usize).saturating_sub(c));
            (lo as u32, hi.map(|h| h as u32))
        };
        let mut alts = Vec::new();
        if started {
            let (lo, hi) = more(count);
            match extra {
                Some((_, sep_extra)) if hi.is_none_or(|h| h >= lo) => alts.push(Node::seq(vec![
                    Node::repeat(sep_extra.clone(), lo, hi),
                    close.clone(),
                ])),
                None if lo == 0 => alts.push(close.clone()),
                _ => {}
            }
            return alts;
        }
        let (lo, hi) = more(1);
        if let Some((first, sep_extra)) = extra {
            if max != Some(0) && hi.is_none_or(|h| h >= lo) {
                alts.push(Node::seq(vec![
                    open.clone(),
                    first.clone(),
                    Node::repeat(sep_extra.clone(), lo, hi),
                    close.clone(),
                ]));
            }
        }
        if min == 0 {
            alts.push(lit("}"));
        }
        alts
    }
}

#[cfg(test)]
pub(super) mod tests {
    use crate::cfg::earley::Chart;
    use crate::schema::{compile, KeyOrder, SchemaOptions};
    use crate::stag::tests::ast_accepts;

    fn options() -> SchemaOptions {
        SchemaOptions {
            key_order: KeyOrder::Schema,
            ..SchemaOptions::default()
        }
    }

    /// Every text of up to four distinct members of a, b, c, d (each
    /// `"k": 1`), `b` required, `additionalProperties` as given: accepted
    /// exactly when the listed ones come in `properties` order, `b` among
    /// them, and an unlisted one only after them.
    #[test]
    fn members_in_schema_order_exactly() {
        for extra in [false, true] {
            let schema = serde_json::json!({
                "type": "object",
                "properties": {"a": {}, "b": {}, "c": {}},
                "required": ["b"],
                "additionalProperties": extra,
            });
            let ast = compile(&schema.to_string(), &options()).unwrap();
            let keys = ["a", "b", "c", "d"];
            let mut texts: Vec<Vec<usize>> = vec![vec![]];
            let mut i = 0;
            while i < texts.len() {
                let t = texts[i].clone();
                for k in 0..keys.len() {
                    if !t.contains(&k) {
                        texts.push([&t[..], &[k]].concat());
                    }
                }
                i += 1;
            }
            for t in texts {
                let listed: Vec<usize> = t.iter().copied().filter(|&k| k < 3).collect();
                let want = listed.windows(2).all(|w| w[0] < w[1])
                    && listed.contains(&1)
                    && (extra || !t.contains(&3))
                    && t.iter().skip_while(|&&k| k < 3).all(|&k| k == 3);
                let members: Vec<String> =
                    t.iter().map(|&k| format!("\"{}\": 1", keys[k])).collect();
                let text = format!("{{{}}}", members.join(", "));
                assert_eq!(ast_accepts(&ast, &text), want, "{text} (extra: {extra})");
            }
        }
    }

    /// The parser state's position-free name at the end of each of
    /// `texts`, all on one grammar (names are the grammar's own), compiled
    /// as the adapters compile (`key_order="schema"`).
    pub(in crate::schema) fn end_keys(
        schema: &serde_json::Value,
        texts: &[&str],
    ) -> Vec<Box<[u32]>> {
        let ast = compile(&schema.to_string(), &options()).unwrap();
        let cfg = crate::cfg::lower::lower(&ast).unwrap();
        let end_key = |text: &str| {
            let mut chart = Chart::new();
            let st = cfg.initial(&mut chart).unwrap();
            let st = cfg.advance_bytes(&mut chart, &st, text.as_bytes());
            cfg.names.state_key(&chart, &st.unwrap().unwrap()).unwrap()
        };
        texts.iter().map(|t| end_key(t)).collect()
    }

    #[test]
    fn the_state_after_a_member_is_the_same_whichever_members_came_before() {
        // Otherwise an instance that leaves out a member the warm-up's
        // sample has meets every later state of the object cold.
        let schema = serde_json::json!({
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
                "c": {"type": "string"}, "d": {"type": "integer"}},
        });
        let k = end_keys(
            &schema,
            &[
                r#"{"a": 1, "b": 2, "c": "x"#,
                r#"{"a": 1, "c": "x"#,
                r#"{"b": 2, "c": "x"#,
                r#"{"a": 1, "b": 2, "c": "x", "#,
                r#"{"b": 2, "c": "x", "#,
                r#"{"a": 1, "b": 2, "c": "x", "d": 3"#,
            ],
        );
        assert_eq!(k[0], k[1]);
        assert_eq!(k[0], k[2]);
        assert_eq!(k[3], k[4]);
        // Another place in the object is another state.
        assert_ne!(k[0], k[5]);
        assert_ne!(k[0], k[3]);
    }
}
