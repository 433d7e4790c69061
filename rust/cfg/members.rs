//! Member sets: what a JSON object's members must satisfy beyond their own
//! grammar (each listed member at most once, the required ones present,
//! `minProperties` / `maxProperties`, `dependentRequired`). A CFG can only
//! say this with a rule per subset of members; instead the parser's items
//! carry the set (`earley::Item::members`) and rule guards consult it.
//!
//! Bits 0..120 are the listed members. When members are counted (a minimum
//! or maximum is given) the top byte counts the unlisted ones, saturating at
//! `MAX_COUNT`.
//!
//! Ordered objects (`key_order="schema"` whose dependencies would take too
//! many chain states; others need no set: their rules carry the order, the
//! count and the dependencies, see `schema::ordered`) also fix the order: a listed
//! member comes after every listed member used before it, all before the
//! unlisted ones. Bit `EXTRAS_BEGUN` (so at most 119 listed members) records
//! that an unlisted member came, and each step keeps the object completable
//! in that order: what is still missing comes later and can be added.

use crate::error::{Error, Result};

/// `Sym::P`'s op for "the same set" (an unlisted member, not counted).
pub const KEEP: u8 = u8::MAX;
/// `Sym::P`'s op for "one more unlisted member".
pub const COUNT: u8 = u8::MAX - 1;
/// `Sym::P`'s op for "an unlisted member" in an ordered object.
pub const ORDERED_KEEP: u8 = u8::MAX - 2;
/// `Sym::P`'s op for "one more unlisted member" in an ordered object.
pub const ORDERED_COUNT: u8 = u8::MAX - 3;
/// Whether `op` adds a listed member (its index) rather than an unlisted one.
pub fn is_listed(op: u8) -> bool {
    op < ORDERED_COUNT
}
/// A set of members (and the count of unlisted ones).
pub type MemberSet = u128;
const COUNT_SHIFT: u32 = 120;
const LISTED: MemberSet = (1 << COUNT_SHIFT) - 1;
/// Listed members per object (the set is 128 bits).
pub const MAX_MEMBERS: usize = 128;
/// Listed members per object when members are counted.
pub const MAX_COUNTED_MEMBERS: usize = COUNT_SHIFT as usize;
/// In an ordered object: an unlisted member came (no listed one may follow).
const EXTRAS_BEGUN: MemberSet = 1 << (COUNT_SHIFT - 1);
/// Listed members per ordered object (below `EXTRAS_BEGUN`).
pub const MAX_ORDERED_MEMBERS: usize = COUNT_SHIFT as usize - 1;
/// Bound on `minProperties` / `maxProperties` (the counter is one byte).
pub const MAX_COUNT: u32 = 200;

/// The set after `op` (a listed member's index, `KEEP` or `COUNT`).
pub fn apply(op: u8, used: MemberSet) -> MemberSet {
    match op {
        KEEP => used,
        // Past MAX_COUNT only "at least min" is asked, and min <= MAX_COUNT.
        COUNT if used >> COUNT_SHIFT >= MAX_COUNT as MemberSet => used,
        COUNT => used + (1 << COUNT_SHIFT),
        ORDERED_KEEP => used | EXTRAS_BEGUN,
        ORDERED_COUNT => apply(COUNT, used | EXTRAS_BEGUN),
        m => used | (1 as MemberSet) << m,
    }
}

/// The constraints of one object's members.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemberRules {
    pub listed: usize,
    pub required: MemberSet,
    pub min: u32,
    pub max: Option<u32>,
    /// A listed member and the listed members it requires when present.
    pub dependent: Vec<(u8, MemberSet)>,
    /// Pairs of listed members with the same key (a member and its witness
    /// form, see `any_of`): at most one of a pair is used, and either one
    /// counts as the member for `required`.
    pub twins: Vec<(u8, u8)>,
    /// Listed members of which at least one must be used (none: no such
    /// constraint); `not` of `additionalProperties` makes them.
    pub any_of: MemberSet,
    /// Members come in index order, all before the unlisted ones.
    pub ordered: bool,
    /// Whether an unlisted member may be added (set with `live`).
    pub extra_live: bool,
    /// The listed members that may really be added (set once the grammar's
    /// productive rules are known; ordered objects look ahead with it).
    pub live: MemberSet,
}

impl MemberRules {
    /// Refuses what the set cannot represent exactly.
    pub fn check(&self) -> Result<()> {
        let limit = if self.ordered {
            MAX_ORDERED_MEMBERS
        } else if self.counted() {
            MAX_COUNTED_MEMBERS
        } else {
            MAX_MEMBERS
        };
        if self.listed > limit {
            return Err(Error::LimitExceeded(format!(
                "an object lists {} members: at most {limit}{}",
                self.listed,
                if self.counted() {
                    " with a minimum or maximum count"
                } else {
                    ""
                }
            )));
        }
        if self.min > MAX_COUNT || self.max.is_some_and(|m| m > MAX_COUNT) {
            return Err(Error::LimitExceeded(format!(
                "member counts above {MAX_COUNT} are not supported"
            )));
        }
        if (self.any_of != 0 || !self.twins.is_empty())
            && (!self.dependent.is_empty() || self.max.is_some())
        {
            return Err(Error::Compile(
                "a member some other member must be (`not` of `additionalProperties`) together \
                 with dependent members or a maximum member count is not supported yet"
                    .into(),
            ));
        }
        if self.ordered && (self.any_of != 0 || !self.twins.is_empty()) {
            return Err(Error::Compile(
                "a member some other member must be (`not` of `additionalProperties`) in schema \
                 key order is not supported yet"
                    .into(),
            ));
        }
        if self.min > 0 && !self.dependent.is_empty() {
            // Adding a member may add its dependencies too, so "some count in
            // [min, max]" is no longer reachable one member at a time.
            return Err(Error::Compile(
                "a minimum member count together with dependent members is not supported yet"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Whether unlisted members are counted (`COUNT` rather than `KEEP`).
    pub fn counted(&self) -> bool {
        self.min > 0 || self.max.is_some()
    }

    fn count(&self, used: MemberSet) -> u32 {
        let listed = if self.ordered {
            used & LISTED & !EXTRAS_BEGUN
        } else {
            used & LISTED
        };
        listed.count_ones() + (used >> COUNT_SHIFT) as u32
    }

    /// Ordered objects: whether `op` may come after the members of `used`,
    /// and the object still close afterwards (`next`), in order.
    fn in_order(&self, used: MemberSet, op: u8, next: MemberSet) -> bool {
        let missing = self.missing(next);
        if !is_listed(op) {
            return missing == 0;
        }
        let later = !((2 as MemberSet) << op).wrapping_sub(1);
        let at_or_after = !((1 as MemberSet) << op).wrapping_sub(1);
        if used & EXTRAS_BEGUN != 0 || used & LISTED & at_or_after != 0 {
            return false;
        }
        if missing & !(later & self.live) != 0 {
            return false; // something required comes before, or cannot come
        }
        // Dependencies are refused with a minimum (see `check`), so the
        // later live members can all still be added.
        let reachable = (self.live & later & LISTED & !EXTRAS_BEGUN).count_ones();
        self.min == 0 || self.count(next) + reachable >= self.min || self.extra_live
    }

    /// `used` with the twin of each member in it (the keys in use).
    fn keys(&self, used: MemberSet) -> MemberSet {
        let mut out = used;
        for &(a, b) in &self.twins {
            let pair = (1 as MemberSet) << a | (1 as MemberSet) << b;
            if used & pair != 0 {
                out |= pair;
            }
        }
        out
    }

    /// Whether `used` meets `any_of`.
    fn witnessed(&self, used: MemberSet) -> bool {
        self.any_of == 0 || used & self.any_of != 0
    }

    /// `members` and, transitively, the members they depend on.
    fn closure(&self, members: MemberSet) -> MemberSet {
        let mut need = members;
        loop {
            let before = need;
            for &(m, deps) in &self.dependent {
                if need & (1 as MemberSet) << m != 0 {
                    need |= deps;
                }
            }
            if need == before {
                return need;
            }
        }
    }

    /// Listed members `used` still obliges: required ones and dependencies.
    fn missing(&self, used: MemberSet) -> MemberSet {
        let keys = self.keys(used);
        self.closure(self.required | (used & LISTED)) & !keys
    }

    /// Whether `op` may be applied: a listed member not used yet, and the
    /// object can still close within the maximum afterwards (so every set
    /// the parser reaches can be completed).
    pub fn may_add(&self, used: MemberSet, op: u8) -> bool {
        if is_listed(op) && self.keys(used) & (1 as MemberSet) << op != 0 {
            return false;
        }
        let next = apply(op, used);
        if self.ordered && !self.in_order(used, op, next) {
            return false;
        }
        self.max
            .is_none_or(|max| self.count(next) + self.missing(next).count_ones() <= max)
    }

    pub fn may_close(&self, used: MemberSet) -> bool {
        self.missing(used) == 0 && self.witnessed(used) && self.count(used) >= self.min
    }

    /// Given which listed members' rules derive a string (`addable`), whether
    /// an unlisted member's does and whether the closing one does: the
    /// members that may really be added (their dependencies may be too), or
    /// None when no object closes.
    pub fn live_members(&self, addable: MemberSet, extra: bool, close: bool) -> Option<MemberSet> {
        let mut can = addable;
        loop {
            let before = can;
            for &(m, deps) in &self.dependent {
                if deps & !can != 0 {
                    can &= !((1 as MemberSet) << m);
                }
            }
            if can == before {
                break;
            }
        }
        let need = self.closure(self.required);
        let fits = self
            .max
            .is_none_or(|max| need.count_ones() <= max && self.min <= max);
        // Twins are one key: both addable count once towards the minimum.
        let both = self
            .twins
            .iter()
            .filter(|&&(a, b)| can >> a & 1 != 0 && can >> b & 1 != 0)
            .count() as u32;
        let enough = extra || can.count_ones() - both >= self.min;
        let met = need & !self.keys(can) == 0 && self.witnessed(can);
        (close && met && fits && enough).then_some(can)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guards_keep_every_reached_set_completable() {
        // Required {0}, member 1 requires 2, at most 3 members in all.
        let r = MemberRules {
            listed: 4,
            required: 1,
            min: 0,
            max: Some(3),
            dependent: vec![(1, 1 << 2)],
            ..MemberRules::default()
        };
        assert!(r.may_add(0, 3) && r.may_add(0, COUNT));
        assert!(r.may_add(0, 1)); // {1} then needs 0 and 2: three in all
        assert!(!r.may_add(1 << 3, 1)); // {3, 1} would need four
        let three_and_one = 1 << 3 | 1 << COUNT_SHIFT;
        assert!(r.may_add(three_and_one, 0)); // three in all
        assert!(!r.may_add(three_and_one, COUNT)); // and 0 still required: four
        assert!(!r.may_add(1, 0)); // used already
        assert!(!r.may_close(1 << 1 | 1)); // 2 is missing
        assert!(r.may_close(1 << 2 | 1 << 1 | 1));
        assert_eq!(r.live_members(0b1111, true, true), Some(0b1111));
        // Without member 2, member 1 cannot be added either.
        assert_eq!(r.live_members(0b1011, true, true), Some(0b1001));
        assert_eq!(r.live_members(0b1110, true, true), None); // 0 is required
        let at_least = MemberRules {
            listed: 2,
            min: 3,
            ..MemberRules::default()
        };
        assert_eq!(at_least.live_members(0b11, false, true), None);
        assert_eq!(at_least.live_members(0b11, true, true), Some(0b11));
        assert!(!at_least.may_close(0b11) && at_least.may_close(0b11 | 1 << COUNT_SHIFT));
        let mut saturated = 0;
        for _ in 0..300 {
            saturated = apply(COUNT, saturated);
        }
        assert_eq!(saturated >> COUNT_SHIFT, MAX_COUNT as MemberSet);
        assert_eq!(saturated & LISTED, 0);
    }

    #[test]
    fn ordered_objects_add_members_in_order_and_stay_completable() {
        // Members 0..4 in order; 2 required; 3 requires 1; unlisted ones last.
        let r = MemberRules {
            listed: 4,
            required: 1 << 2,
            dependent: vec![(3, 1 << 1)],
            ordered: true,
            live: 0b1111,
            extra_live: true,
            ..MemberRules::default()
        };
        assert!(r.may_add(0, 0) && r.may_add(0, 2));
        assert!(!r.may_add(0, 3)); // 2 is required and comes before 3
        assert!(!r.may_add(1 << 2, 1)); // 1 comes before 2
        assert!(!r.may_add(1 << 2, 2)); // used already
        assert!(!r.may_add(0, ORDERED_KEEP)); // 2 is still missing
        let two = 1 << 2;
        assert!(r.may_add(two, ORDERED_KEEP));
        assert!(!r.may_add(two, 3)); // 3 would need 1, which comes before
        assert!(r.may_add(1 << 1 | two, 3));
        let extras = apply(ORDERED_KEEP, two);
        assert!(!r.may_add(extras, 3) && r.may_add(extras, ORDERED_KEEP));
        assert!(r.may_close(extras) && r.may_close(two) && !r.may_close(0));
        // A minimum the later members cannot reach refuses the earlier step.
        let at_least = MemberRules {
            listed: 3,
            min: 2,
            ordered: true,
            live: 0b111,
            extra_live: false,
            ..MemberRules::default()
        };
        assert!(at_least.may_add(0, 1) && !at_least.may_add(0, 2));
        assert_eq!(at_least.count(apply(ORDERED_COUNT, 1)), 2);
    }
}
