//! State numbers of the record automaton: a number decoded into its
//! context and place, and a context and place numbered again.
//!
//! Numbers (see `contexts`): 0 is dead; a shared context owns a number per
//! place anywhere (`Layout`), or the glue after a value and its records'
//! blocks; a record owns a block per mask of its used members. A record's
//! block holds the glue after a value, then for each member its key's trie
//! path, the key separator's states, and its value's places: the nodes on
//! its path, a place per state of a whitespace run ending at each node on
//! it, and a dot and zeros at each int end on it. A place on a key path is
//! numbered in the block of the first unused member whose key passes
//! through that node (and in a listed context, the record with the
//! smallest key or member through it), so each state has one number.

use super::trie::{smallest_common, SPACE};
use super::{Ctx, Place, Records};
use crate::regex_dfa::DEAD;

impl Records {
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
        } else if p < l.after {
            let v = p - l.value;
            let k = self.values.partition_point(|x| x.base <= v) - 1;
            self.key_value_place(k as u32, v - self.values[k].base)
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
        self.member_value_place(k, m, off - key_sep)
    }

    /// Place `v` among key `k`'s places in a context numbered by the layout
    /// (`KeyValues::places`).
    fn key_value_place(&self, k: u32, v: u32) -> Place {
        let values = &self.values[k as usize];
        let nodes = values.trie.nodes() as u32;
        if v < nodes {
            return Place::Value(k, v);
        }
        let v = v - nodes;
        let runs = values.spaces.len() as u32 * self.space_states;
        if v < runs {
            let (x, w) = (v / self.space_states, v % self.space_states);
            return Place::Space(k, values.spaces[x as usize], w);
        }
        let e = values.ends[((v - runs) / 2) as usize];
        match (v - runs) % 2 {
            0 => Place::Dot(k, e),
            _ => Place::Zeros(k, e),
        }
    }

    /// Where `place` (a value's) is among key `k`'s places in a context
    /// numbered by the layout.
    fn key_value_number(&self, k: u32, place: Place) -> u32 {
        let values = &self.values[k as usize];
        let nodes = values.trie.nodes() as u32;
        let runs = values.spaces.len() as u32 * self.space_states;
        let rank = |list: &[u32], node: u32| list.binary_search(&node).unwrap_or(0) as u32;
        let v = match place {
            Place::Value(_, node) => node,
            Place::Space(_, node, w) => nodes + rank(&values.spaces, node) * self.space_states + w,
            Place::Dot(_, e) => nodes + runs + 2 * rank(&values.ends, e),
            Place::Zeros(_, e) => nodes + runs + 2 * rank(&values.ends, e) + 1,
            _ => unreachable!("a value's place"),
        };
        values.base + v
    }

    /// Member `m`'s (of key `k`) value places in a record's block: the
    /// nodes on its path, then a place per run state at each node on it
    /// where a whitespace run ends, then a dot and zeros at each int end
    /// on it.
    pub(super) fn value_places(&self, k: u32, m: u32) -> u32 {
        let (spaces, ends) = self.path_marks(k, m, u32::MAX);
        let path = self.values[k as usize].trie.path(m).len() as u32;
        path.saturating_add(spaces.saturating_mul(self.space_states))
            .saturating_add(2 * ends)
    }

    /// How many nodes before position `upto` of member `m`'s path end a
    /// whitespace run, and how many are int ends.
    fn path_marks(&self, k: u32, m: u32, upto: u32) -> (u32, u32) {
        let values = &self.values[k as usize];
        let path = values.trie.path(m);
        let upto = (upto as usize).min(path.len());
        let spaces = path[..upto]
            .iter()
            .filter(|&&t| values.trie.symbol_in(t) == SPACE)
            .count();
        let ends = path[..upto]
            .iter()
            .filter(|&&t| values.ends.binary_search(&t).is_ok())
            .count();
        (spaces as u32, ends as u32)
    }

    /// Place `off` of member `m`'s value places (`value_places`).
    fn member_value_place(&self, k: u32, m: u32, off: u32) -> Place {
        let values = &self.values[k as usize];
        let path = values.trie.path(m);
        if let Some(&node) = path.get(off as usize) {
            return Place::Value(k, node);
        }
        let off = off - path.len() as u32;
        let (spaces, _) = self.path_marks(k, m, u32::MAX);
        let runs = spaces * self.space_states;
        if off < runs {
            let x = off / self.space_states;
            let node = path
                .iter()
                .copied()
                .filter(|&t| values.trie.symbol_in(t) == SPACE)
                .nth(x as usize)
                .expect("a numbered run");
            return Place::Space(k, node, off % self.space_states);
        }
        let x = (off - runs) / 2;
        let e = path
            .iter()
            .copied()
            .filter(|&t| values.ends.binary_search(&t).is_ok())
            .nth(x as usize)
            .expect("a numbered int end");
        match (off - runs) % 2 {
            0 => Place::Dot(k, e),
            _ => Place::Zeros(k, e),
        }
    }

    /// Where `place` (a value's, of key `k`) is among member `m`'s value
    /// places, or None where its node is not on the member's path.
    fn member_value_number(&self, k: u32, m: u32, place: Place) -> Option<u32> {
        let values = &self.values[k as usize];
        let path = values.trie.path(m);
        let node = match place {
            Place::Value(_, t) | Place::Space(_, t, _) | Place::Dot(_, t) | Place::Zeros(_, t) => t,
            _ => return None,
        };
        let at = path.binary_search(&node).ok()? as u32;
        let (spaces, ends) = self.path_marks(k, m, u32::MAX);
        let (spaces_before, ends_before) = self.path_marks(k, m, at);
        let runs = path.len() as u32 + spaces * self.space_states;
        Some(match place {
            Place::Value(..) => at,
            Place::Space(_, _, w) => path.len() as u32 + spaces_before * self.space_states + w,
            Place::Dot(..) => runs + 2 * ends_before,
            _ => runs + 2 * ends_before + 1,
        })
        .filter(|_| match place {
            Place::Space(..) => values.trie.symbol_in(node) == SPACE,
            Place::Dot(..) | Place::Zeros(..) => ends > ends_before,
            _ => true,
        })
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
        let member_at =
            |k: u32, m: u32| Some(listed.member_first[context.member_index(k, m)?] as usize);
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
            Place::Value(k, node)
            | Place::Space(k, node, _)
            | Place::Dot(k, node)
            | Place::Zeros(k, node) => {
                let members = self.members_of(Ctx::Shared(c), k)?;
                let m = smallest_common(self.values[k as usize].trie.below(node), members)?;
                member_at(k, m)
            }
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
            Place::Value(k, _) | Place::Space(k, ..) | Place::Dot(k, _) | Place::Zeros(k, _) => {
                l.value + self.key_value_number(k, place)
            }
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
            Place::Value(k, _) | Place::Space(k, ..) | Place::Dot(k, _) | Place::Zeros(k, _) => {
                let x = member_of(k)?;
                let off = self.member_value_number(k, self.rec_member[x], place)?;
                Some(self.value_start(x) + off)
            }
            // Only the start is in the open glue; the glue after a value is
            // numbered before the blocks.
            Place::Open(_) | Place::After(_) => None,
        }
    }

    /// Where member `x`'s value places start in its record's block.
    fn value_start(&self, x: usize) -> u32 {
        self.rec_block[x]
            + self.keys.path(self.rec_key[x]).len() as u32
            + self.key_sep.num_states() as u32
    }
}
