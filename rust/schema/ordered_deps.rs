//! Schema-order objects with `dependentRequired`: which members came decides
//! which must still come, so the ordered chain (`ordered`) carries that as
//! one more part of each rule, a small state over the members dependencies
//! name.
//!
//! Members come in order, so a dependency `s -> t` asks one of two things
//! when `s` is added: if `t` comes before `s`, that `t` came; if after, that
//! `t` is not left out later. One bit per member some dependency names
//! (a *participant*) holds both: before the chain reaches the member it
//! says "must come", after it "came". A bit nobody asks about any more (a
//! member behind the chain that no later member depends on) is cleared, so
//! chains that differ only there share their rules. The states are found
//! forward from the object's start; an object whose dependencies make more
//! than `MAX_STATES` of them keeps the parser's member sets instead
//! (`objects`, at most 119 members).

use rustc_hash::{FxHashMap, FxHashSet};

use super::ordered::{check_counts, one_more};
use super::{refuse, rule, Compiler};
use crate::cfg::ast::{Node, Pos};
use crate::cfg::members::MAX_ORDERED_MEMBERS;
use crate::error::Result;

/// Chain states (rules) one object may take here.
const MAX_STATES: usize = 4096;

/// Where the chain stands: before the `at`-th listed member, whether a
/// member came (`started`), how many (`count`, as in
/// `ordered_counted_members`), and the participants' bits.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct State {
    at: usize,
    started: bool,
    count: usize,
    bits: u128,
}

/// What the dependencies ask of the chain, by member index.
struct Dependencies {
    /// Each member's participant bit, if it has one.
    slot: Vec<Option<u32>>,
    /// The members each member requires, transitively (indices; empty for
    /// members no dependency starts from).
    needs: Vec<Vec<usize>>,
    /// The participants (member, bit) and past which position each one's
    /// "came" bit is asked no more: the last member that needs it.
    asked_until: Vec<(usize, u128, usize)>,
}

impl Dependencies {
    /// None past 128 participants.
    fn new(n: usize, dependent: &[(usize, Vec<usize>)]) -> Result<Option<Self>> {
        let mut direct: FxHashMap<usize, Vec<usize>> = FxHashMap::default();
        for (s, ts) in dependent {
            let to = direct.entry(*s).or_default();
            to.extend(ts.iter().copied().filter(|&t| t != *s));
        }
        // Transitive closure, one search per member a dependency starts from.
        let mut needs = vec![Vec::new(); n];
        for &s in direct.keys() {
            let mut seen: FxHashSet<usize> = FxHashSet::default();
            let mut todo = direct[&s].clone();
            while let Some(t) = todo.pop() {
                crate::budget::charge(8)?;
                if t != s && seen.insert(t) {
                    todo.extend(direct.get(&t).into_iter().flatten().copied());
                }
            }
            let mut all: Vec<usize> = seen.into_iter().collect();
            all.sort_unstable();
            needs[s] = all;
        }
        let mut slot = vec![None; n];
        let mut last_asker: FxHashMap<usize, usize> = FxHashMap::default();
        let mut next = 0u32;
        for (s, ts) in needs.iter().enumerate() {
            for &t in ts {
                if slot[t].is_none() {
                    if next == 128 {
                        return Ok(None);
                    }
                    slot[t] = Some(next);
                    next += 1;
                }
                let until = last_asker.entry(t).or_insert(t);
                *until = (*until).max(s);
            }
        }
        let asked_until = (last_asker.into_iter())
            .map(|(t, until)| (t, 1u128 << slot[t].unwrap_or(0), until))
            .collect();
        Ok(Some(Dependencies {
            slot,
            needs,
            asked_until,
        }))
    }

    fn bit(&self, m: usize) -> u128 {
        self.slot[m].map_or(0, |b| 1u128 << b)
    }

    /// `bits` without the "came" bits of members behind `at` that no member
    /// from `at` on asks about.
    fn forget(&self, bits: u128, at: usize) -> u128 {
        let mut out = bits;
        for &(m, bit, until) in &self.asked_until {
            if m < at && until < at {
                out &= !bit;
            }
        }
        out
    }

    /// The bits after adding member `m` in `bits`, or None if a member it
    /// needs before it did not come.
    fn add(&self, bits: u128, m: usize) -> Option<u128> {
        let mut out = bits | self.bit(m);
        for &t in &self.needs[m] {
            if t < m && bits & self.bit(t) == 0 {
                return None;
            }
            out |= self.bit(t); // after m: it must come
        }
        Some(out)
    }
}

impl Compiler<'_> {
    /// `ordered_counted_members` with `dependentRequired` (`dependent`:
    /// member indices and the members each requires): the chain's rules are
    /// its states (see the module docs), found from the start. None when
    /// there would be more than `MAX_STATES` of them, or more than 128
    /// members that dependencies name: the member sets take the object.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn ordered_dependent_members(
        &mut self,
        listed: &[(Node, bool)],
        extra: &Option<(Node, Node)>,
        min: u32,
        max: Option<u32>,
        dependent: &[(usize, Vec<usize>)],
        ptr: &str,
    ) -> Result<Option<Node>> {
        check_counts(min, max, ptr)?;
        let n = listed.len();
        let Some(deps) = Dependencies::new(n, dependent)? else {
            return self.too_many_states(n, ptr);
        };
        let (open, close) = self.member_ends();
        let sep = self.item_sep();
        let base = self.rules.len();
        let name = |i: usize| format!("d{base}_{i}");
        let mut ids: FxHashMap<State, usize> = FxHashMap::default();
        let mut order: Vec<State> = Vec::new();
        let start = State {
            at: 0,
            started: false,
            count: 0,
            bits: 0,
        };
        ids.insert(start, 0);
        order.push(start);
        let mut bodies: Vec<Vec<Node>> = Vec::new();
        let mut i = 0;
        while i < order.len() {
            crate::budget::charge(64)?;
            let st = order[i];
            i += 1;
            let mut alts = Vec::new();
            if st.at == n {
                alts.extend(self.chain_end(st.started, st.count, min, max, extra, &open, &close));
                bodies.push(alts);
                continue;
            }
            let (member, required) = &listed[st.at];
            let mut goto = |next: State| -> Option<Node> {
                let next = State {
                    bits: deps.forget(next.bits, next.at),
                    ..next
                };
                let id = match ids.get(&next) {
                    Some(&id) => id,
                    None => {
                        if order.len() == MAX_STATES {
                            return None;
                        }
                        ids.insert(next, order.len());
                        order.push(next);
                        order.len() - 1
                    }
                };
                Some(Node::Ref(name(id), Pos::default()))
            };
            let count = one_more(if st.started { st.count } else { 0 }, min, max);
            if let (Some(count), Some(bits)) = (count, deps.add(st.bits, st.at)) {
                let next = State {
                    at: st.at + 1,
                    started: true,
                    count,
                    bits,
                };
                let Some(to) = goto(next) else {
                    return self.too_many_states(n, ptr);
                };
                let lead = if st.started {
                    sep.clone()
                } else {
                    open.clone()
                };
                alts.push(Node::seq(vec![lead, member.clone(), to]));
            }
            // Left out: unless required, or a member that came needs it.
            if !required && st.bits & deps.bit(st.at) == 0 {
                let Some(to) = goto(State {
                    at: st.at + 1,
                    ..st
                }) else {
                    return self.too_many_states(n, ptr);
                };
                alts.push(to);
            }
            bodies.push(alts);
        }
        for (id, alts) in bodies.into_iter().enumerate() {
            let body = if alts.is_empty() {
                self.never()
            } else {
                Node::alt(alts)
            };
            self.rules.push(rule(&name(id), body));
        }
        Ok(Some(Node::seq(vec![
            super::lit("{"),
            self.ws(),
            Node::Ref(name(0), Pos::default()),
        ])))
    }

    /// The member sets take an object whose chain has too many states, if
    /// they hold its members.
    fn too_many_states(&self, n: usize, ptr: &str) -> Result<Option<Node>> {
        if n > MAX_ORDERED_MEMBERS {
            return refuse(
                ptr,
                format!(
                    "{n} members with `dependentRequired` in schema key order: their dependencies \
                     take more than {MAX_STATES} parser rules, and member sets hold at most \
                     {MAX_ORDERED_MEMBERS} members"
                ),
            );
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_say_must_come_before_a_member_and_came_after_it() {
        // Member 2 needs 0; member 0 needs 1 (so 2 needs 1 too); 3 is free.
        let deps = Dependencies::new(4, &[(2, vec![0]), (0, vec![1])])
            .unwrap()
            .unwrap();
        assert_eq!(deps.needs[2], [0, 1]);
        assert_eq!(deps.needs[0], [1]);
        assert!(deps.needs[1].is_empty() && deps.bit(3) == 0);
        // Adding 0 obliges 1 (it comes later) and notes that 0 came.
        let after0 = deps.add(0, 0).unwrap();
        assert_eq!(after0, deps.bit(0) | deps.bit(1));
        // 2 needs 0 and 1 to have come: not without them.
        assert_eq!(deps.add(deps.bit(1), 2), None);
        assert!(deps.add(after0, 2).is_some());
        // Past member 2 nobody asks whether 0 or 1 came: the bits go.
        assert_eq!(deps.forget(after0, 3), 0);
        assert_eq!(deps.forget(after0, 1), after0); // 1 still must come
    }

    #[test]
    fn more_than_128_named_members_leave_it_to_the_member_sets() {
        let dependent: Vec<(usize, Vec<usize>)> = (0..129).map(|i| (200, vec![i])).collect();
        assert!(Dependencies::new(201, &dependent).unwrap().is_none());
    }
}
