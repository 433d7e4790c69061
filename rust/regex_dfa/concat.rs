//! Concatenation of DFAs, built directly where it is deterministic (no
//! byte that extends a part's match can start what follows it), else by a
//! subset construction over the parts' states (`subset`); and a DFA with
//! the empty string added.

use rustc_hash::FxHashMap as HashMap;

use super::periodic::{check_states, JoinedClasses};
use super::table::{check_size, class_bytes_of, Table};
use super::tail::Tail;
use super::{subset, ByteDfa, ByteSet, Minimality, DEAD};
use crate::error::Result;

impl ByteDfa {
    /// `a` then `b` (see `concat_all`).
    pub fn concat(a: &ByteDfa, b: &ByteDfa) -> Result<Option<Self>> {
        Self::concat_all(&[a, b])
    }

    /// The parts one after another, built directly when that is
    /// deterministic: no byte that extends an accepted string of a part can
    /// start what follows it (the next part, and those after it while the
    /// parts between match the empty string), so each part ends exactly
    /// where the next begins; every state of the result can then still
    /// reach an accepting one, so no pruning pass is needed. The first part
    /// with a block of shared copies (`repeat`) keeps it; others are laid
    /// out. When it is not deterministic, a subset construction over the
    /// parts' states (`subset`), or None where that grows too large (the
    /// caller then builds from the regex).
    pub fn concat_all(parts: &[&ByteDfa]) -> Result<Option<Self>> {
        let k = parts.len();
        // What can start after part i, and whether all after it are nullable.
        let mut rest_first = vec![ByteSet::default(); k + 1];
        let mut rest_nullable = vec![true; k + 1];
        for i in (0..k).rev() {
            let nullable = parts[i].is_accepting(parts[i].start);
            rest_first[i] = parts[i].first_bytes();
            if nullable {
                let after = rest_first[i + 1];
                rest_first[i].union_with(&after);
            }
            rest_nullable[i] = nullable && rest_nullable[i + 1];
        }
        for i in 0..k {
            if parts[i]
                .bytes_after_accepting()
                .intersects(&rest_first[i + 1])
            {
                return subset::concat_overlapping(parts);
            }
        }
        let block_part = parts.iter().position(|p| p.periodic().is_some());
        let laid_out: Vec<Option<ByteDfa>> = parts
            .iter()
            .enumerate()
            .map(|(i, p)| match &p.tail {
                Some(_) if Some(i) != block_part => p.materialized().map(Some),
                _ => Ok(None),
            })
            .collect::<Result<_>>()?;
        let parts: Vec<&ByteDfa> = parts
            .iter()
            .zip(&laid_out)
            .map(|(&p, l)| l.as_ref().unwrap_or(p))
            .collect();
        let (classes, class_size, representative) = refined_classes(&parts);
        let stride = representative.len();
        // Part i's table state s is `offset[i] + s - 1` (the dead state
        // stays 0); the block's states follow the table, in order.
        let rows = |i: usize| parts[i].accepting.len();
        let mut offset = vec![1usize; k + 1];
        for i in 0..k {
            offset[i + 1] = offset[i] + rows(i) - 1;
        }
        let n = offset[k];
        check_size(n, stride)?;
        check_states(n + block_part.map_or(0, |i| parts[i].block().states()))?;
        crate::budget::charge_n(n * stride * crate::budget::TABLE_TRANSITION)?;
        let id = |i: usize, s: u32| match s as usize {
            0 => DEAD,
            s if s < rows(i) => (offset[i] + s - 1) as u32,
            s => (n + s - rows(i)) as u32,
        };
        // Where a part's match is complete and it reads no further byte
        // (the end of a literal), the join goes on exactly as from the next
        // part's start: enter that state instead. Otherwise both are states
        // of the result, and where the next part re-enters its start (a
        // loop, `"` then `[a-z]*`) both are reachable: the state after the
        // opening quote and the one after a character would be two states of
        // one residual, and a lexer's caches and the fill memo key on the
        // state (every string's first two tokens were two cold fills). Not
        // with a block part, whose rows name their targets themselves.
        let ends: Vec<Vec<bool>> = (0..k)
            .map(|i| {
                let p = parts[i];
                let joins_next = block_part.is_none() && i + 1 < k;
                (0..rows(i) as u32)
                    .map(|s| {
                        joins_next
                            && s != DEAD
                            && p.is_accepting(s)
                            && representative.iter().all(|&b| p.step(s, b) == DEAD)
                    })
                    .collect()
            })
            .collect();
        let target = |mut i: usize, mut s: u32| {
            while (s as usize) < rows(i) && ends[i][s as usize] {
                i += 1;
                s = parts[i].start;
            }
            id(i, s)
        };
        let mut trans = vec![DEAD; n * stride];
        let mut accepting = vec![false; n];
        for (i, p) in parts.iter().enumerate() {
            for s in 1..rows(i) as u32 {
                let here = id(i, s) as usize;
                let done = p.is_accepting(s);
                accepting[here] = done && rest_nullable[i + 1];
                let row = &mut trans[here * stride..][..stride];
                for (t, &rep) in row.iter_mut().zip(&representative) {
                    let next = p.step(s, rep);
                    *t = if next != DEAD {
                        target(i, next)
                    } else if done {
                        next_part(&parts, i, rep).map_or(DEAD, |(j, q)| target(j, q))
                    } else {
                        DEAD
                    };
                }
            }
        }
        let block = block_part.map(|i| {
            let p = parts[i];
            let joined = JoinedClasses {
                class_size: &class_size,
                representative: &representative,
            };
            p.block().joined(
                p,
                &joined,
                n as u32,
                |q| id(i, q),
                rest_nullable[i + 1],
                |b| next_part(&parts, i, b).map_or(DEAD, |(j, q)| id(j, q)),
            )
        });
        let mut dfa = Table {
            classes,
            class_size,
            representative,
            trans,
            accepting,
            start: target(0, parts[0].start),
        }
        .finish();
        dfa.tail = block.map(|b| Box::new(Tail::Periodic(b)));
        if parts.iter().all(|p| !p.minimizing_pays()) {
            dfa.minimality = Minimality::Nearly;
        }
        Ok(Some(dfa))
    }

    /// The language with the empty string added, when no transition leads
    /// back to the start (then marking it accepting adds nothing else).
    pub fn or_empty(mut self) -> Option<ByteDfa> {
        let start = self.start;
        let table_entry = self.trans.contains(&start);
        let tail_entry = self.tail.as_ref().is_some_and(|t| t.targets(start));
        if table_entry || tail_entry {
            return None;
        }
        self.accepting[start as usize] = true;
        self.forced_byte[start as usize] = None;
        if self.minimality == Minimality::Minimal {
            self.minimality = Minimality::Nearly;
        }
        self.after_accepting = std::sync::OnceLock::new();
        Some(self)
    }
}

/// Where byte `b` goes once part `i` of a concatenation is complete: into
/// the first later part that can start with it, past parts that may match
/// the empty string.
fn next_part(parts: &[&ByteDfa], i: usize, b: u8) -> Option<(usize, u32)> {
    for (j, p) in parts.iter().enumerate().skip(i + 1) {
        let q = p.step(p.start, b);
        if q != DEAD {
            return Some((j, q));
        }
        if !p.is_accepting(p.start) {
            return None;
        }
    }
    None
}

/// Byte classes refining every part's (one part at a time): the class of
/// each byte, each class's size and a byte of each.
pub(super) fn refined_classes(parts: &[&ByteDfa]) -> ([u8; 256], Vec<usize>, Vec<u8>) {
    let mut classes = parts[0].classes;
    for p in &parts[1..] {
        let mut refined = [0u8; 256];
        let mut pair_ids: HashMap<(u8, u8), u8> = HashMap::default();
        for (b, r) in refined.iter_mut().enumerate() {
            let fresh = pair_ids.len() as u8;
            *r = *pair_ids.entry((classes[b], p.classes[b])).or_insert(fresh);
        }
        classes = refined;
    }
    let count = classes.iter().map(|&c| c as usize + 1).max().unwrap_or(1);
    let (class_size, representative) = class_bytes_of(&classes, count);
    (classes, class_size, representative)
}
