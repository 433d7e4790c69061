//! Reading a byte in the record automaton: a state number decoded into its
//! context and place, the place stepped, the result numbered again.
//!
//! Numbers (see `contexts`): 0 is dead; a shared context owns a number per
//! place anywhere (`Layout`), or the glue after a value and its records'
//! blocks; a record owns a block per mask of its used members. A record's
//! block holds the glue after a value, then for each member its key's trie
//! path, the key separator's states, its value's trie path and its run of
//! zeros. A place on a key path is numbered in the block of the first
//! unused member whose key passes through that node (and in a listed
//! context, the first record's), so each state has one number.

use super::trie::{intersects, NONE, ROOT};
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

    /// The context and place state `q` stands for.
    pub(super) fn decode(&self, q: u32) -> (Ctx, Place) {
        let after = self.after.len();
        match self.owners.owner_of(q) {
            (Ctx::Shared(c), rel) => {
                let place = match &self.contexts[c as usize].listed {
                    Some(_) if rel < after => Place::After(rel),
                    Some(l) => {
                        let x = l.starts.partition_point(|&s| s <= rel) - 1;
                        self.block_place(l.records[x], rel - l.starts[x] + after)
                    }
                    None => self.layout_place(rel),
                };
                (Ctx::Shared(c), place)
            }
            (Ctx::Record(i, _), rel) => {
                let places = self.rec_places[i as usize];
                let (mask, p) = (rel / places, rel % places);
                let place = match p < after {
                    true => Place::After(p),
                    false => self.block_place(i, p),
                };
                (Ctx::Record(i, u64::from(mask)), place)
            }
        }
    }

    /// Place `p` of a context numbered by the layout.
    fn layout_place(&self, p: u32) -> Place {
        let l = &self.layout;
        if p < l.key {
            Place::Open(p)
        } else if p < l.key_sep {
            Place::Key(p - l.key)
        } else if p < l.value {
            let s = self.key_sep.num_states() as u32;
            Place::KeySep((p - l.key_sep) / s, (p - l.key_sep) % s)
        } else if p < l.zeros {
            let v = p - l.value;
            let k = self.value_base.partition_point(|&b| b <= v) - 1;
            Place::Value(k as u32, v - self.value_base[k])
        } else if p < l.after {
            let m = self.zero_members[((p - l.zeros) / 2) as usize];
            match (p - l.zeros) % 2 {
                0 => Place::Dot(m),
                _ => Place::Zeros(m),
            }
        } else {
            Place::After(p - l.after)
        }
    }

    /// Place `p` (past the glue's) of record `i`'s block.
    fn block_place(&self, i: u32, p: u32) -> Place {
        let (lo, hi) = self.rec_range(i);
        let x = lo + self.rec_block[lo..hi].partition_point(|&b| b <= p) - 1;
        let (k, m) = (self.rec_key[x], self.rec_member[x]);
        let mut off = p - self.rec_block[x];
        let key_path = self.keys.path(k);
        if (off as usize) < key_path.len() {
            return Place::Key(key_path[off as usize]);
        }
        off -= key_path.len() as u32;
        let key_sep = self.key_sep.num_states() as u32;
        if off < key_sep {
            return Place::KeySep(k, off);
        }
        off -= key_sep;
        let path = self.values[k as usize].path(m);
        match path.get(off as usize) {
            Some(&node) => Place::Value(k, node),
            None if off as usize == path.len() => Place::Dot(m),
            None => Place::Zeros(m),
        }
    }

    /// The number of state (`ctx`, `place`), or DEAD where no record of the
    /// context has that place among its unused members.
    pub(super) fn encode(&self, ctx: Ctx, place: Place) -> u32 {
        match ctx {
            Ctx::Shared(c) => {
                let base = self.owners.shared_base(c);
                let context = &self.contexts[c as usize];
                let Some(listed) = &context.listed else {
                    return base + self.layout_number(place);
                };
                if let Place::After(a) = place {
                    return base + a;
                }
                let Some(x) = self.first_record(c, place) else {
                    return DEAD;
                };
                let unused = |y: usize| context.used.binary_search(&self.rec_key[y]).is_err();
                match self.block_number(listed.records[x], unused, place) {
                    Some(p) => base + listed.starts[x] + p - self.after.len(),
                    None => DEAD,
                }
            }
            Ctx::Record(i, mask) => {
                let places = self.rec_places[i as usize];
                let block = self.owners.record_base(i) + mask as u32 * places;
                if let Place::After(a) = place {
                    return block + a;
                }
                let lo = self.rec_range(i).0;
                let unused = |y: usize| mask & 1 << (y - lo) == 0;
                match self.block_number(i, unused, place) {
                    Some(p) => block + p,
                    None => DEAD,
                }
            }
        }
    }

    /// The record of listed context `c` whose block numbers `place` (an
    /// index in its records): the first with the smallest key through a key
    /// node, with the key of a separator, or with the smallest member value
    /// through a value node (or whose run it is), so each state has one
    /// number.
    fn first_record(&self, c: u32, place: Place) -> Option<usize> {
        let context = &self.contexts[c as usize];
        let listed = context.listed.as_ref()?;
        let member_at = |k: u32, m: u32| {
            let x = context.keys.binary_search(&k).ok()?;
            let (lo, hi) = (
                context.key_start[x] as usize,
                context.key_start[x + 1] as usize,
            );
            let y = context.members[lo..hi].binary_search(&m).ok()?;
            Some(listed.member_first[lo + y] as usize)
        };
        match place {
            Place::Key(t) => {
                let k = smallest_common(self.keys.below(t), &context.keys)?;
                let x = context.keys.binary_search(&k).ok()?;
                Some(listed.key_first[x] as usize)
            }
            Place::KeySep(k, _) => {
                let x = context.keys.binary_search(&k).ok()?;
                Some(listed.key_first[x] as usize)
            }
            Place::Value(k, node) => {
                let members = self.members_of(Ctx::Shared(c), k)?;
                let m = smallest_common(self.values[k as usize].below(node), members)?;
                member_at(k, m)
            }
            Place::Dot(m) | Place::Zeros(m) => member_at(self.member_key[m as usize], m),
            Place::Open(_) | Place::After(_) => None,
        }
    }

    /// Where `place` is among a context's places numbered by the layout.
    fn layout_number(&self, place: Place) -> u32 {
        let l = &self.layout;
        match place {
            Place::Open(s) => s,
            Place::Key(t) => l.key + t,
            Place::KeySep(k, s) => l.key_sep + k * self.key_sep.num_states() as u32 + s,
            Place::Value(k, node) => l.value + self.value_base[k as usize] + node,
            Place::Dot(m) => l.zeros + 2 * self.zero_index[m as usize],
            Place::Zeros(m) => l.zeros + 2 * self.zero_index[m as usize] + 1,
            Place::After(a) => l.after + a,
        }
    }

    /// Where `place` (not the glue after a value) is in record `i`'s block,
    /// on one of its members `unused` holds: on a key trie node, the first
    /// such member whose key passes through it, so each state has one
    /// number. None where no such member has the place.
    fn block_number(&self, i: u32, unused: impl Fn(usize) -> bool, place: Place) -> Option<u32> {
        let (lo, hi) = self.rec_range(i);
        let member_of = |k: u32| {
            let x = lo + self.rec_key[lo..hi].binary_search(&k).ok()?;
            unused(x).then_some(x)
        };
        match place {
            Place::Key(t) => (lo..hi).find_map(|x| {
                let at = self.keys.path(self.rec_key[x]).binary_search(&t).ok()?;
                unused(x).then_some(self.rec_block[x] + at as u32)
            }),
            Place::KeySep(k, s) => {
                let x = member_of(k)?;
                Some(self.rec_block[x] + self.keys.path(k).len() as u32 + s)
            }
            Place::Value(k, node) => {
                let x = member_of(k)?;
                let path = self.values[k as usize].path(self.rec_member[x]);
                let at = path.binary_search(&node).ok()?;
                Some(self.value_start(x) + at as u32)
            }
            Place::Dot(m) | Place::Zeros(m) => {
                let x = member_of(self.member_key[m as usize])?;
                let past = u32::from(matches!(place, Place::Zeros(_)));
                (self.rec_member[x] == m).then(|| {
                    let path = self.values[self.rec_key[x] as usize].path(m);
                    self.value_start(x) + path.len() as u32 + past
                })
            }
            // Only the start is in the open glue; the glue after a value is
            // numbered before the blocks.
            Place::Open(_) | Place::After(_) => None,
        }
    }

    /// Where member `x`'s value path starts in its record's block.
    fn value_start(&self, x: usize) -> u32 {
        self.rec_block[x]
            + self.keys.path(self.rec_key[x]).len() as u32
            + self.key_sep.num_states() as u32
    }

    /// The context and place after `byte`, or None.
    fn next(&self, ctx: Ctx, place: Place, byte: u8) -> Option<(Ctx, Place)> {
        match place {
            Place::Open(s) => {
                let s2 = self.open.step(s, byte);
                if s2 != DEAD {
                    Some((ctx, Place::Open(s2)))
                } else if self.open.is_accepting(s) {
                    self.key_place(ctx, self.keys.child(ROOT, byte))
                } else {
                    None
                }
            }
            Place::Key(t) => self.key_place(ctx, self.keys.child(t, byte)),
            Place::KeySep(k, s) => {
                let s2 = self.key_sep.step(s, byte);
                if s2 != DEAD {
                    return Some((ctx, Place::KeySep(k, s2)));
                }
                if !self.key_sep.is_accepting(s) {
                    return None;
                }
                let node = self.values[k as usize].child(ROOT, byte);
                (node != NONE && self.value_possible(ctx, k, node))
                    .then_some((ctx, Place::Value(k, node)))
            }
            Place::Value(k, t) => {
                let values = &self.values[k as usize];
                let node = values.child(t, byte);
                if node != NONE && self.value_possible(ctx, k, node) {
                    return Some((ctx, Place::Value(k, node)));
                }
                let (m, run) = (values.label(t), values.run(t));
                if node == NONE
                    && byte == b'.'
                    && values.is_int_end(t)
                    && self.member_possible(ctx, k, m)
                {
                    // Its float form, past the trie.
                    return Some((ctx, Place::Dot(m)));
                }
                if node == NONE && byte == b'0' && run != NONE && self.member_possible(ctx, k, run)
                {
                    return Some((ctx, Place::Zeros(run)));
                }
                if m != NONE && self.member_possible(ctx, k, m) {
                    return self.value_end(ctx, k, m, byte);
                }
                None
            }
            Place::Dot(m) => (byte == b'0').then_some((ctx, Place::Zeros(m))),
            Place::Zeros(m) => {
                if byte == b'0' {
                    return Some((ctx, Place::Zeros(m)));
                }
                self.value_end(ctx, self.member_key[m as usize], m, byte)
            }
            Place::After(a) => {
                let a2 = self.after.step(a, byte);
                if a2 != NONE {
                    Some((ctx, Place::After(a2)))
                } else if self.after.sep_accepting[a as usize] {
                    self.key_place(ctx, self.keys.child(ROOT, byte))
                } else {
                    None
                }
            }
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
                let x = c.keys.binary_search(&k).expect("a possible key");
                let (lo, hi) = (c.key_start[x] as usize, c.key_start[x + 1] as usize);
                let y = c.members[lo..hi]
                    .binary_search(&m)
                    .expect("a possible member");
                c.children[lo + y]
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
    fn members_of(&self, ctx: Ctx, k: u32) -> Option<&[u32]> {
        match ctx {
            Ctx::Shared(c) => {
                let c = &self.contexts[c as usize];
                if c.all {
                    return None;
                }
                let Ok(x) = c.keys.binary_search(&k) else {
                    return Some(&[]);
                };
                Some(&c.members[c.key_start[x] as usize..c.key_start[x + 1] as usize])
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
        let below = self.values[k as usize].below(node);
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

/// The smallest element two sorted lists share.
fn smallest_common(a: &[u32], b: &[u32]) -> Option<u32> {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    short
        .iter()
        .copied()
        .find(|x| long.binary_search(x).is_ok())
}
