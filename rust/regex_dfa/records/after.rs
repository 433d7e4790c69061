//! The glue after a member's value: the item separator (on to the next
//! key) and the close (the end of the object) read side by side, as one
//! small table of pairs of their states. A context that may both go on and
//! close starts both; one that must go on, or must close, starts one alone
//! (the other dead), so the table has three starts.

use super::trie::{Interner, NONE};
use crate::error::Result;
use crate::regex_dfa::{ByteDfa, ByteSet, DEAD};

/// States the glue after a value may take.
const MAX_AFTER_STATES: usize = 4096;

/// The item separator and the close read side by side: each state a pair
/// of their states (either may be dead), numbered from 0, with its row.
pub(super) struct After {
    rows: Vec<u32>,
    pub(super) sep_accepting: Vec<bool>,
    pub(super) close_accepting: Vec<bool>,
    /// From a value's end: both, the separator alone, the close alone.
    pub(super) starts: [u32; 3],
}

impl After {
    pub(super) fn new(sep: &ByteDfa, close: &ByteDfa) -> Result<Option<After>> {
        let mut ids: Interner<(u32, u32)> = Interner::new();
        let mut pairs = Vec::new();
        let starts_at = [
            (sep.start(), close.start()),
            (sep.start(), DEAD),
            (DEAD, close.start()),
        ];
        let mut starts = [0; 3];
        for (s, &pair) in starts.iter_mut().zip(&starts_at) {
            let (id, new) = ids.id(pair);
            if new {
                pairs.push(pair);
            }
            *s = id;
        }
        let mut rows = Vec::new();
        let mut next = 0;
        while next < pairs.len() {
            crate::budget::charge_n(256 * crate::budget::HASHED_TRANSITION)?;
            let (s, c) = pairs[next];
            for b in 0..=255u8 {
                let s2 = if s == DEAD { DEAD } else { sep.step(s, b) };
                let c2 = if c == DEAD { DEAD } else { close.step(c, b) };
                if s2 == DEAD && c2 == DEAD {
                    rows.push(NONE);
                    continue;
                }
                let (id, new) = ids.id((s2, c2));
                if new {
                    if pairs.len() >= MAX_AFTER_STATES {
                        return Ok(None);
                    }
                    pairs.push((s2, c2));
                }
                rows.push(id);
            }
            next += 1;
        }
        let accepting = |d: &ByteDfa, q: u32| q != DEAD && d.is_accepting(q);
        Ok(Some(After {
            rows,
            sep_accepting: pairs.iter().map(|&(s, _)| accepting(sep, s)).collect(),
            close_accepting: pairs.iter().map(|&(_, c)| accepting(close, c)).collect(),
            starts,
        }))
    }

    pub(super) fn len(&self) -> u32 {
        self.sep_accepting.len() as u32
    }

    /// Where state `a` goes on `byte` (`NONE`: nowhere).
    pub(super) fn step(&self, a: u32, byte: u8) -> u32 {
        self.rows[a as usize * 256 + byte as usize]
    }

    /// The bytes state `a` reads on.
    pub(super) fn live_bytes(&self, a: u32) -> ByteSet {
        let mut out = ByteSet::default();
        for b in 0..=255u8 {
            if self.step(a, b) != NONE {
                out.insert(b);
            }
        }
        out
    }

    pub(super) fn memory_bytes(&self) -> usize {
        self.rows.len() * 4 + self.sep_accepting.len() * 2
    }
}
