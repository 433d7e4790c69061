//! Comparing the languages read from two states (their residuals): a
//! canonical signature of one state's residual, the length of the shortest
//! string that tells two states apart, and the same inside a block of
//! shared copies (`Periodic`), where copies agree up to their distance
//! from the block's end.

use rustc_hash::FxHashMap as HashMap;

use super::periodic::Periodic;
use super::{ByteDfa, ByteSet, DEAD};

/// Pairs `distinguishing_length` makes room for before it starts.
const SEEN_RESERVED: usize = 512;

/// Table states with numbers below this are numbered in a list.
const LISTED_STATES: usize = 1 << 11;

/// The numbers a signature gives states, in breadth-first order (the dead
/// state 0): a list indexed by state for a small table's states, a map for
/// the others (a block's copies, sparse or computed states), so that most
/// lookups of a signature, one per state and byte class, are an index.
struct Numbering {
    listed: Vec<u32>,
    others: HashMap<u32, u32>,
}

impl Numbering {
    const UNSET: u32 = u32::MAX;

    fn new(table_states: usize) -> Self {
        let mut n = Numbering {
            listed: vec![
                Self::UNSET;
                if table_states <= LISTED_STATES {
                    table_states
                } else {
                    0
                }
            ],
            others: HashMap::default(),
        };
        n.insert(DEAD, 0);
        n
    }

    fn insert(&mut self, state: u32, id: u32) {
        match self.listed.get_mut(state as usize) {
            Some(slot) => *slot = id,
            None => {
                self.others.insert(state, id);
            }
        }
    }

    /// `state`'s number, given by `new` if it has none yet.
    fn get_or_insert(&mut self, state: u32, new: impl FnOnce() -> u32) -> u32 {
        match self.listed.get_mut(state as usize) {
            Some(slot) => {
                if *slot == Self::UNSET {
                    *slot = new();
                }
                *slot
            }
            None => *self.others.entry(state).or_insert_with(new),
        }
    }
}

impl ByteDfa {
    /// A canonical description of the language read from state `q`: the
    /// states reachable from `q`, numbered in breadth-first order (bytes
    /// ascending, the dead state 0), each written as its acceptance and its
    /// transitions as runs of bytes with one target. Equal signatures mean
    /// isomorphic automata, so equal behaviour on every byte string, whatever
    /// DFA they come from. None when it would be longer than `limit` words.
    pub fn residual_signature(&self, q: u32, limit: usize) -> Option<Vec<u32>> {
        // A state writes at least four words (its acceptance, its number of
        // runs, one run). In a long counted repetition every later copy has
        // a state reachable from `q` (each live state reaches the copy's
        // end), so a state far from the last copy is known to pass `limit`
        // without numbering its copies first.
        let past_table = q as usize * self.stride >= self.trans.len();
        if let Some(p) = self.periodic().filter(|_| past_table) {
            if (p.copies() - p.coords(q).0) as usize * 4 > limit {
                return None;
            }
        }
        let mut ids = Numbering::new(self.accepting.len());
        let mut order = vec![q];
        ids.insert(q, 1);
        let mut out = Vec::new();
        // A state's target changes only where the byte class does: reading
        // the first byte of each run of one class gives the same runs of
        // targets as reading all 256 (and numbers new states in the same
        // byte order), without a pass over every byte per state.
        let class_starts: Vec<u8> = (0..=255u8)
            .filter(|&b| b == 0 || self.classes[b as usize] != self.classes[b as usize - 1])
            .collect();
        let mut i = 0;
        while i < order.len() {
            let s = order[i];
            i += 1;
            out.push(self.is_accepting(s) as u32);
            let runs_at = out.len();
            out.push(0);
            let mut prev = u32::MAX;
            // Neighbouring classes often share a target: looked up once.
            let mut last = (DEAD, 0);
            for &b in &class_starts {
                let t = self.target(s, self.classes[b as usize] as usize);
                let id = if t == last.0 {
                    last.1
                } else {
                    let id = ids.get_or_insert(t, || {
                        order.push(t);
                        order.len() as u32
                    });
                    last = (t, id);
                    id
                };
                if id != prev {
                    out.extend([b as u32, id]);
                    out[runs_at] += 1;
                    prev = id;
                }
            }
            if out.len() > limit {
                return None;
            }
        }
        Some(out)
    }

    /// The bytes that can start a non-empty string of the language.
    pub fn first_bytes(&self) -> ByteSet {
        self.live_bytes_from(std::iter::once(self.start))
    }

    /// The bytes that can extend a string of the language into a longer
    /// prefix of one: live out of some accepting state.
    pub fn bytes_after_accepting(&self) -> ByteSet {
        *self.after_accepting.get_or_init(|| {
            let table = (1..self.accepting.len() as u32).filter(|&s| self.accepting[s as usize]);
            let tail = self.tail.iter().flat_map(|t| t.accepting_states());
            self.live_bytes_from(table.chain(tail))
        })
    }

    fn live_bytes_from(&self, states: impl Iterator<Item = u32>) -> ByteSet {
        let mut live_class = vec![false; self.stride];
        let mut buf = Vec::new();
        for s in states {
            for (live, &t) in live_class.iter_mut().zip(self.row(s, &mut buf)) {
                *live |= t != DEAD;
            }
        }
        let mut out = ByteSet::default();
        for b in 0..=255u8 {
            if live_class[self.classes[b as usize] as usize] {
                out.insert(b);
            }
        }
        out
    }

    /// The length of the shortest string after which states `p` and `q`
    /// differ (one dead or accepting and the other not), or `limit + 1` if
    /// no string of at most `limit` bytes tells them apart: then every walk
    /// of at most `limit` bytes sees the same from both.
    /// The search stops after `max_pairs` pairs of states, answering 0 (as
    /// if they differed at once) when it does.
    pub fn distinguishing_length(&self, p: u32, q: u32, limit: usize, max_pairs: usize) -> usize {
        // Pairs as one word each, in a set sized for a short search up
        // front: growing it was a tenth of a cold fill inside a counted
        // string, where every state is new and each is compared this way.
        let pair = |x: u32, y: u32| u64::from(x) << 32 | u64::from(y);
        let mut seen: rustc_hash::FxHashSet<u64> = Default::default();
        seen.reserve(max_pairs.min(SEEN_RESERVED));
        let mut layer = vec![(p, q)];
        let mut next = Vec::new();
        let (mut bx, mut by) = (Vec::new(), Vec::new());
        for depth in 0..=limit {
            if seen.len() > max_pairs {
                return 0;
            }
            next.clear();
            for &(x, y) in &layer {
                if x == y || self.alike_in_block(x, y, limit - depth) {
                    continue;
                }
                if self.is_accepting(x) != self.is_accepting(y) {
                    return depth;
                }
                if depth == limit {
                    continue;
                }
                let (rx, ry) = (self.row(x, &mut bx), self.row(y, &mut by));
                // Classes often share targets: skip a pair just seen.
                let mut last = (DEAD, DEAD);
                for (&tx, &ty) in rx.iter().zip(ry) {
                    if (tx == DEAD) != (ty == DEAD) {
                        return depth + 1;
                    }
                    if tx != ty && (tx, ty) != last && seen.insert(pair(tx, ty)) {
                        next.push((tx, ty));
                    }
                    last = (tx, ty);
                }
            }
            if next.is_empty() {
                break;
            }
            std::mem::swap(&mut layer, &mut next);
        }
        limit + 1
    }

    /// A length up to which no string tells states `p` and `q` apart,
    /// known without a search: for block states in the same place of their
    /// copies, `Periodic::alike_for`; else 0.
    pub fn alike_length(&self, p: u32, q: u32) -> usize {
        match (self.block_of(p), self.block_of(q)) {
            (Some(b), Some(_)) => b.alike_for(p, q),
            _ => 0,
        }
    }

    /// The block of copies `q` is a state of, if it is one (a state past
    /// the table's rows of an automaton with a block).
    fn block_of(&self, q: u32) -> Option<&Periodic> {
        let rows = self.accepting.len() as u32;
        self.periodic().filter(|_| q >= rows)
    }

    /// For a state of a long counted repetition's block: its copy and
    /// the number of copies. None for a table state.
    pub fn block_copy(&self, q: u32) -> Option<(u32, u32)> {
        let b = self.block_of(q)?;
        Some((b.coords(q).0, b.copies()))
    }

    /// For a state of a long counted repetition's block: its place in its
    /// copy (states at one place of different copies step alike, see
    /// `alike_length`). None for a table state.
    pub fn block_place(&self, q: u32) -> Option<u32> {
        Some(self.block_of(q)?.coords(q).1)
    }

    /// Block state `q`'s place in copy `copy` (below the number of copies).
    pub fn block_state_in(&self, q: u32, copy: u32) -> u32 {
        let b = self.block();
        debug_assert!(copy < b.copies());
        b.state_at(copy, b.coords(q).1)
    }

    /// The state that reads every string of at most `depth` bytes as `q`
    /// does, in the block's first copy where `q` is a block state with more
    /// than `depth` copies after its own (no such string leaves the block,
    /// and the same place of every copy steps alike: `Periodic::alike_for`);
    /// else `q` itself. A walk of a token trie no deeper than `depth` from
    /// either state is the same walk, so the far states of a long count (a
    /// `maxLength` string's with a `format` or `pattern`, which no text
    /// slice covers) can share one walk's result instead of each making its
    /// own.
    pub fn first_alike_copy(&self, q: u32, depth: usize) -> u32 {
        let Some(b) = self.block_of(q) else { return q };
        let (copy, place) = b.coords(q);
        match (b.copies() - 1 - copy) as usize > depth {
            true => b.state_at(0, place),
            false => q,
        }
    }

    /// Whether `p` and `q` are block states that no string of at most
    /// `len` bytes tells apart (see `Periodic::alike_for`).
    fn alike_in_block(&self, p: u32, q: u32, len: usize) -> bool {
        self.alike_length(p, q) >= len
    }
}
