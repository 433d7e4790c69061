//! Reading a byte in the record automaton: a state number decoded into its
//! context and place (`numbers`), the place stepped through the glue, the
//! key trie and the key's value trie (with its whitespace runs and int
//! ends), the result numbered again. A place is entered only while some
//! record of its context can still go through it.

use super::trie::{intersects, NONE, ROOT, SPACE};
use super::{Ctx, Place, Records};
use crate::regex_dfa::DEAD;

impl Records {
    /// Where state `q` goes on byte `byte` (classes are bytes here).
    pub(in crate::regex_dfa) fn target(&self, q: u32, byte: u8) -> u32 {
        let (ctx, place) = self.decode(q);
        match self.next(ctx, place, byte) {
            Some((ctx, place)) => self.encode(ctx, place),
            None => DEAD,
        }
    }

    pub(in crate::regex_dfa) fn is_accepting(&self, q: u32) -> bool {
        self.accepts(self.decode(q).1)
    }

    fn accepts(&self, place: Place) -> bool {
        match place {
            Place::After(a) => self.after.close_accepting[a as usize],
            _ => false,
        }
    }

    /// The one byte every continuation from `q` starts with, if `q` does
    /// not accept.
    pub(in crate::regex_dfa) fn forced_byte(&self, q: u32) -> Option<u8> {
        let (ctx, place) = self.decode(q);
        if self.accepts(place) {
            return None;
        }
        // `next` only goes where some record goes on: no number is needed.
        let mut live = (0..=255u8).filter(|&b| self.next(ctx, place, b).is_some());
        match (live.next(), live.next()) {
            (Some(b), None) => Some(b),
            _ => None,
        }
    }

    /// The context and place after `byte`, or None.
    pub(super) fn next(&self, ctx: Ctx, place: Place, byte: u8) -> Option<(Ctx, Place)> {
        match place {
            Place::Open(s) => {
                let s2 = self.open.step(s, byte);
                if s2 != DEAD {
                    Some((ctx, Place::Open(s2)))
                } else if self.open.is_accepting(s) {
                    self.key_place(ctx, self.keys.child(ROOT, u16::from(byte)))
                } else {
                    None
                }
            }
            Place::Key(t) => self.key_place(ctx, self.keys.child(t, u16::from(byte))),
            Place::KeySep(k, s) => {
                let s2 = self.key_sep.step(s, byte);
                if s2 != DEAD {
                    return Some((ctx, Place::KeySep(k, s2)));
                }
                if !self.key_sep.is_accepting(s) {
                    return None;
                }
                self.value_step(ctx, k, ROOT, byte)
            }
            Place::Value(k, t) => self.value_step(ctx, k, t, byte),
            Place::Space(k, t, w) => {
                let space = self
                    .space
                    .as_ref()
                    .expect("runs in values have an automaton");
                let w2 = space.step(w, byte);
                if w2 != DEAD {
                    Some((ctx, Place::Space(k, t, w2)))
                } else if space.is_accepting(w) {
                    self.value_step(ctx, k, t, byte)
                } else {
                    None
                }
            }
            Place::Dot(k, e) => (byte == b'0').then_some((ctx, Place::Zeros(k, e))),
            Place::Zeros(k, e) => {
                if byte == b'0' {
                    return Some((ctx, Place::Zeros(k, e)));
                }
                self.after_number(ctx, k, e, byte)
            }
            Place::After(a) => {
                let a2 = self.after.step(a, byte);
                if a2 != NONE {
                    Some((ctx, Place::After(a2)))
                } else if self.after.sep_accepting[a as usize] {
                    self.key_place(ctx, self.keys.child(ROOT, u16::from(byte)))
                } else {
                    None
                }
            }
        }
    }

    /// The place after `byte` at node `t` of key `k`'s values: a child,
    /// a whitespace run (or what follows an empty one), the dot of an int
    /// end's float form, the zeros of its run, on as after the number from
    /// the run's last zero, or the value's end.
    fn value_step(&self, ctx: Ctx, k: u32, t: u32, byte: u8) -> Option<(Ctx, Place)> {
        let trie = &self.values[k as usize].trie;
        let child = trie.child(t, u16::from(byte));
        if child != NONE {
            // Every string through the child, an int end's run included,
            // is in its `below`.
            return self
                .value_possible(ctx, k, child)
                .then_some((ctx, Place::Value(k, child)));
        }
        if byte == b'.' && self.run_possible(ctx, k, t) {
            return Some((ctx, Place::Dot(k, t)));
        }
        let end = trie.run(t);
        if end != NONE {
            if byte == b'0' {
                return self
                    .run_possible(ctx, k, end)
                    .then_some((ctx, Place::Zeros(k, end)));
            }
            // Past a zero the number may end; past the dot it may not.
            return match trie.symbol_in(t) == u16::from(b'0') {
                true => self.after_number(ctx, k, end, byte),
                false => None,
            };
        }
        let run = trie.child(t, SPACE);
        if run != NONE && self.value_possible(ctx, k, run) {
            let space = self
                .space
                .as_ref()
                .expect("runs in values have an automaton");
            let w = space.step(space.start(), byte);
            if w != DEAD {
                return Some((ctx, Place::Space(k, run, w)));
            }
            if space.is_accepting(space.start()) {
                // An empty run: no two runs meet (`build`), and no value
                // ends before one.
                return self.value_step(ctx, k, run, byte);
            }
        }
        let m = trie.label(t);
        if m != NONE && self.member_possible(ctx, k, m) {
            return self.value_end(ctx, k, m, byte);
        }
        None
    }

    /// `byte` after a float form's zeros, as after the int end `e` it
    /// extends: what follows the number (never more of it).
    fn after_number(&self, ctx: Ctx, k: u32, e: u32, byte: u8) -> Option<(Ctx, Place)> {
        if matches!(byte, b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-') {
            return None;
        }
        self.value_step(ctx, k, e, byte)
    }

    /// Whether some member still possible has an int end at node `e`.
    fn run_possible(&self, ctx: Ctx, k: u32, e: u32) -> bool {
        let trie = &self.values[k as usize].trie;
        match self.members_of(ctx, k) {
            None => trie.is_int_end(e),
            Some(members) => trie
                .int_end_labels(e)
                .any(|m| members.binary_search(&m).is_ok()),
        }
    }

    /// Key trie node `t` as a place: a key's end goes on to its separator.
    fn key_place(&self, ctx: Ctx, t: u32) -> Option<(Ctx, Place)> {
        if t == NONE || !self.key_possible(ctx, t) {
            return None;
        }
        match self.keys.label(t) {
            NONE => Some((ctx, Place::Key(t))),
            k => Some((ctx, Place::KeySep(k, self.key_sep.start()))),
        }
    }

    /// Member `m` of key `k` read whole, ended by `byte`: the glue after it,
    /// in the context it leads to.
    fn value_end(&self, ctx: Ctx, k: u32, m: u32, byte: u8) -> Option<(Ctx, Place)> {
        let ctx = self.after_member(ctx, k, m);
        let start = match self.ends(ctx) {
            (true, true) => self.after.starts[0],
            (true, false) => self.after.starts[1],
            (false, true) => self.after.starts[2],
            (false, false) => return None,
        };
        let a = self.after.step(start, byte);
        (a != NONE).then_some((ctx, Place::After(a)))
    }

    /// Whether more members may come, and whether the object may close.
    fn ends(&self, ctx: Ctx) -> (bool, bool) {
        match ctx {
            Ctx::Shared(c) => {
                let c = &self.contexts[c as usize];
                (c.has_more, c.can_close)
            }
            Ctx::Record(i, mask) => {
                let (lo, hi) = self.rec_range(i);
                let full = mask.count_ones() as usize == hi - lo;
                (!full, full)
            }
        }
    }

    /// The context after member `m` of key `k`.
    fn after_member(&self, ctx: Ctx, k: u32, m: u32) -> Ctx {
        match ctx {
            Ctx::Shared(c) => {
                let c = &self.contexts[c as usize];
                c.children[c.member_index(k, m).expect("a possible member")]
            }
            Ctx::Record(i, mask) => {
                let (lo, hi) = self.rec_range(i);
                let j = self.rec_key[lo..hi].binary_search(&k).expect("its key");
                Ctx::Record(i, mask | 1 << j)
            }
        }
    }

    /// Whether some key still possible in `ctx` passes through key node `t`.
    fn key_possible(&self, ctx: Ctx, t: u32) -> bool {
        match ctx {
            Ctx::Shared(c) => {
                let c = &self.contexts[c as usize];
                c.all || intersects(self.keys.below(t), &c.keys)
            }
            Ctx::Record(i, mask) => {
                let (lo, hi) = self.rec_range(i);
                let below = self.keys.below(t);
                (lo..hi).any(|x| {
                    mask & 1 << (x - lo) == 0 && below.binary_search(&self.rec_key[x]).is_ok()
                })
            }
        }
    }

    /// The member values of key `k` still possible in `ctx`, sorted (None:
    /// every one; none where the key is used or no record has it).
    pub(super) fn members_of(&self, ctx: Ctx, k: u32) -> Option<&[u32]> {
        match ctx {
            Ctx::Shared(c) => {
                let c = &self.contexts[c as usize];
                if c.all {
                    return None;
                }
                Some(c.members_of(k))
            }
            Ctx::Record(i, mask) => {
                let (lo, hi) = self.rec_range(i);
                let Ok(j) = self.rec_key[lo..hi].binary_search(&k) else {
                    return Some(&[]);
                };
                if mask & 1 << j != 0 {
                    return Some(&[]);
                }
                Some(std::slice::from_ref(&self.rec_member[lo + j]))
            }
        }
    }

    /// Whether some value of key `k` still possible passes through `node`.
    fn value_possible(&self, ctx: Ctx, k: u32, node: u32) -> bool {
        let below = self.values[k as usize].trie.below(node);
        match self.members_of(ctx, k) {
            None => !below.is_empty(),
            Some(members) => intersects(below, members),
        }
    }

    /// Whether member `m` of key `k` is still possible.
    fn member_possible(&self, ctx: Ctx, k: u32, m: u32) -> bool {
        match self.members_of(ctx, k) {
            None => true,
            Some(members) => members.binary_search(&m).is_ok(),
        }
    }
}
