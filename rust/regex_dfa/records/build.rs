//! Building a record automaton: ids for keys and members, the tries, each
//! record's block of places, and the checks that the glue is clear.

use std::sync::Arc;

use super::after::After;
use super::trie::{Interner, LabeledTrie, NONE, ROOT, SPACE};
use super::{
    contexts, KeyValues, Layout, Part, Record, RecordGlue, Records, Spelling, MAX_RECORD_MEMBERS,
    MAX_RECORD_TEXT,
};
use crate::error::Result;
use crate::regex_dfa::{ByteDfa, ByteSet, DEAD};

/// A spelling's symbols for the trie, and the prefixes where its int texts
/// end; None where two whitespace runs meet.
fn symbols(s: &Spelling) -> Option<(Vec<u16>, Vec<usize>)> {
    let mut out = Vec::with_capacity(s.0.len());
    let mut ends = Vec::new();
    for p in &s.0 {
        match p {
            Part::Byte(b) => out.push(u16::from(*b)),
            Part::Space if out.last() == Some(&SPACE) => return None,
            Part::Space => out.push(SPACE),
            Part::IntEnd => ends.push(out.len()),
        }
    }
    Some((out, ends))
}

impl Records {
    /// The tries and records of `records` (no contexts yet).
    pub(super) fn new(
        records: &[Record],
        glue: &RecordGlue,
        after: After,
    ) -> Result<Option<Records>> {
        let text: usize = records
            .iter()
            .flat_map(|r| &r.members)
            .map(|(k, v)| k.len() + v.iter().map(|s| s.0.len()).sum::<usize>())
            .sum();
        if text > MAX_RECORD_TEXT {
            return Ok(None);
        }
        // Keys by id, members by (key, spellings).
        let mut key_ids: Interner<Vec<u8>> = Interner::new();
        let mut key_texts = Vec::new();
        let mut member_ids: Interner<(u32, Arc<[Spelling]>)> = Interner::new();
        let mut member_key = Vec::new();
        let mut value_strings: Vec<Vec<(Vec<u16>, u32)>> = Vec::new();
        let mut int_ends: Vec<Vec<(Vec<u16>, u32)>> = Vec::new();
        let mut rows: Vec<Vec<(u32, u32)>> = Vec::with_capacity(records.len());
        for r in records {
            if r.members.is_empty() || r.members.len() > MAX_RECORD_MEMBERS {
                return Ok(None);
            }
            let mut row = Vec::with_capacity(r.members.len());
            for (key, spellings) in &r.members {
                crate::budget::charge_n(
                    key.len() + spellings.iter().map(|s| s.0.len()).sum::<usize>(),
                )?;
                let (k, new) = match key_ids.get(key) {
                    Some(k) => (k, false),
                    None => key_ids.id(key.clone()),
                };
                if new {
                    key_texts.push((key.iter().map(|&b| u16::from(b)).collect(), k));
                    value_strings.push(Vec::new());
                    int_ends.push(Vec::new());
                }
                // A member is its key and its value's texts.
                if spellings.windows(2).any(|w| w[0] >= w[1]) {
                    return Ok(None); // not sorted, or a text twice
                }
                let key = (k, spellings.clone());
                let m = match member_ids.get(&key) {
                    Some(m) => m,
                    None => {
                        let m = member_ids.len() as u32;
                        member_key.push(k);
                        for s in key.1.iter() {
                            let Some((text, ends)) = symbols(s) else {
                                return Ok(None);
                            };
                            if text.contains(&SPACE) && glue.space.is_none() {
                                return Ok(None);
                            }
                            for end in ends {
                                int_ends[k as usize].push((text[..end].to_vec(), m));
                            }
                            value_strings[k as usize].push((text, m));
                        }
                        member_ids.id(key);
                        m
                    }
                };
                row.push((k, m));
            }
            row.sort_unstable();
            if row.windows(2).any(|w| w[0].0 == w[1].0) {
                return Ok(None); // a key twice
            }
            rows.push(row);
        }
        rows.sort_unstable();
        rows.dedup();
        let members = member_ids.len();
        let Some(keys) = LabeledTrie::new(key_texts, key_ids.len(), &[]) else {
            return Ok(None);
        };
        let space_states = glue.space.as_ref().map_or(0, |s| s.num_states() as u32);
        let mut values = Vec::with_capacity(value_strings.len());
        let mut base = 0u32;
        for (strings, ends) in value_strings.into_iter().zip(&int_ends) {
            crate::budget::charge_n(strings.iter().map(|s| s.0.len()).sum::<usize>())?;
            let Some(trie) = LabeledTrie::new(strings, members, ends) else {
                return Ok(None);
            };
            let nodes = 0..trie.nodes() as u32;
            let spaces: Vec<u32> = nodes
                .clone()
                .filter(|&t| trie.symbol_in(t) == SPACE)
                .collect();
            let ends: Vec<u32> = nodes.filter(|&t| trie.is_int_end(t)).collect();
            let v = KeyValues {
                trie,
                spaces,
                ends,
                base,
            };
            base = base.saturating_add(v.places(space_states));
            values.push(v);
        }
        let key_sep_states = glue.key_sep.num_states() as u32;
        let key = glue.open.num_states() as u32;
        let key_sep = key.saturating_add(keys.nodes() as u32);
        let value = key_sep.saturating_add((values.len() as u32).saturating_mul(key_sep_states));
        let after_at = value.saturating_add(base);
        let layout = Layout {
            key,
            key_sep,
            value,
            after: after_at,
            places: after_at.saturating_add(after.len()),
        };
        let mut built = Records {
            open: glue.open.clone(),
            key_sep: glue.key_sep.clone(),
            space: glue.space.clone(),
            space_states,
            after,
            keys,
            values,
            member_key,
            rec_start: vec![0],
            rec_key: Vec::new(),
            rec_member: Vec::new(),
            rec_block: Vec::new(),
            rec_places: Vec::new(),
            contexts: Vec::new(),
            layout,
            owners: contexts::Owners::default(),
        };
        for row in rows {
            // Each member's block: its key's path, the key separator, and
            // its value's places (`Records::value_places`).
            let mut at = built.after.len();
            for (k, m) in row {
                built.rec_key.push(k);
                built.rec_member.push(m);
                built.rec_block.push(at);
                let key_path = built.keys.path(k).len() as u32;
                at = at
                    .saturating_add(key_path + key_sep_states)
                    .saturating_add(built.value_places(k, m));
            }
            built.rec_start.push(built.rec_key.len() as u32);
            built.rec_places.push(at);
        }
        Ok(Some(built))
    }

    /// Whether the glue never reads on with a byte that starts what follows
    /// it (see the module doc), every key ends where its text does, and
    /// whitespace runs inside values never read a byte the value may go on
    /// with.
    pub(super) fn glue_is_clear(&self, glue: &RecordGlue) -> bool {
        if glue.open.bytes_after_accepting().contains(b'"') {
            return false;
        }
        let space_bytes = glue.space.as_deref().map(live_bytes).unwrap_or_default();
        let bytes_of = |syms: &[u16]| {
            let mut out = ByteSet::default();
            syms.iter()
                .filter(|&&s| s < SPACE)
                .for_each(|&s| out.insert(s as u8));
            out
        };
        let empty_space = glue
            .space
            .as_ref()
            .is_some_and(|s| s.is_accepting(s.start()));
        let mut value_first = ByteSet::default();
        let mut value_next = ByteSet::default();
        for v in &self.values {
            let t = &v.trie;
            if t.child(ROOT, SPACE) != NONE {
                return false;
            }
            value_first.union_with(&bytes_of(t.child_symbols(ROOT)));
            for node in 0..t.nodes() as u32 {
                let here = bytes_of(t.child_symbols(node));
                let space = t.child(node, SPACE);
                if space != NONE {
                    let there = bytes_of(t.child_symbols(space));
                    if here.intersects(&space_bytes)
                        || there.intersects(&space_bytes)
                        || t.child(space, SPACE) != NONE
                        || (empty_space && here.intersects(&there))
                    {
                        return false;
                    }
                }
                if t.label(node) != NONE {
                    value_next.union_with(&here);
                    if space != NONE {
                        value_next.union_with(&space_bytes);
                    }
                }
                if t.is_int_end(node) {
                    value_next.insert(b'.');
                }
                if t.run(node) != NONE {
                    value_next.insert(b'0');
                }
            }
        }
        if glue
            .key_sep
            .bytes_after_accepting()
            .intersects(&value_first)
        {
            return false;
        }
        let mut after_first = ByteSet::default();
        for &s in &self.after.starts {
            after_first.union_with(&self.after.live_bytes(s));
        }
        if after_first.intersects(&value_next) {
            return false;
        }
        for a in 0..self.after.len() {
            let (sep, close) = (
                self.after.sep_accepting[a as usize],
                self.after.close_accepting[a as usize],
            );
            if sep && (close || self.after.step(a, b'"') != NONE) {
                return false;
            }
        }
        (0..self.keys.nodes() as u32)
            .all(|t| self.keys.label(t) == NONE || self.keys.child_symbols(t).is_empty())
    }
}

/// The bytes some state of `dfa` reads on (a small automaton: whitespace).
fn live_bytes(dfa: &ByteDfa) -> ByteSet {
    let mut seen = vec![dfa.start()];
    let mut out = ByteSet::default();
    let mut next = 0;
    while next < seen.len() && seen.len() <= 4096 {
        let q = seen[next];
        next += 1;
        for b in 0..=255u8 {
            let q2 = dfa.step(q, b);
            if q2 != DEAD {
                out.insert(b);
                if !seen.contains(&q2) {
                    seen.push(q2);
                }
            }
        }
    }
    if seen.len() > 4096 {
        // Too many to read: every byte, so nothing may sit beside it.
        (0..=255u8).for_each(|b| out.insert(b));
    }
    out
}
