//! Objects in schema key order (`key_order="schema"`): members in the order
//! of `properties` (as xgrammar and llguidance generate them), optional ones
//! left out at will, then the unlisted ones in any order.
//!
//! A member-set object (`cfg::members`) lets the parser check which members
//! came; in schema order most objects need no such set, because the order
//! itself says which members may still come: the grammar is a chain read
//! right to left, two rules per listed member, and an object may list any
//! number of members. With a minimum or maximum member count the count so
//! far is one more part of each rule (members times counts rules), and with
//! `dependentRequired` (which member came decides which must come) the
//! state of the members dependencies name (`ordered_deps`).

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
    /// order: no member sets, just two rules per member, read right to left.
    /// `first_i` is what may follow when no member came yet, `rest_i` after
    /// one did (so `sep` comes before every member but the first):
    ///
    /// ```text
    /// first_i -> open member_i rest_{i+1} | first_{i+1}   (the latter if optional)
    /// rest_i  -> sep member_i rest_{i+1}  | rest_{i+1}    (likewise)
    /// first_n -> open extra (sep extra)* close | close_empty
    /// rest_n  -> (sep extra)* close
    /// ```
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
        let (mut first, mut rest) = match extra {
            Some((x, more)) => {
                let tail = define(self, Node::seq(vec![Node::repeat(more, 0, None), close]));
                let first = Node::alt(vec![
                    Node::seq(vec![open.clone(), x, tail.clone()]),
                    lit("}"),
                ]);
                (define(self, first), tail)
            }
            None => (define(self, lit("}")), define(self, close)),
        };
        for (member, required) in listed.iter().rev() {
            let mut first_alts = vec![Node::seq(vec![open.clone(), member.clone(), rest.clone()])];
            let mut rest_alts = vec![Node::seq(vec![sep.clone(), member.clone(), rest.clone()])];
            if !required {
                first_alts.push(first.clone());
                rest_alts.push(rest.clone());
            }
            first = define(self, Node::alt(first_alts));
            rest = define(self, Node::alt(rest_alts));
        }
        Node::seq(vec![lit("{"), self.ws(), first])
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
