//! An `enum` of many JSON objects whose members may come in any order,
//! as an automaton whose states are computed, not stored.
//!
//! **Why no table can hold it.** JSON Schema compares objects as sets of
//! members, so `{"a": 1, "b": 2}` may be written `{"b": 2, "a": 1}`. After
//! some members of a value were read, what may follow depends on *which*
//! value they pinned and *which* of its members are used: a minimal DFA
//! has at least one state per value and subset of its members, N x 2^m
//! (10,000 records of 6 members: 640,000 states before the bytes inside
//! the members). Spelling every order (`schema::literals`) stops at a few
//! thousand values of four members.
//!
//! **States as numbers.** A state here is a *context* (the values still
//! possible and the keys used) and a *place* in the text (in the glue
//! between members, in a key, in a value). Two kinds of context:
//!
//! - a *shared* context, which several values still fit (the start, where
//!   all do; after `"type": "A"` shared by many). They are found at
//!   compile time, breadth first from the start: each lists its keys and,
//!   per key, the member values still possible and the context each leads
//!   to. Each owns a range of numbers: one per place anywhere in the text,
//!   or where that is fewer, its records' blocks of places (`contexts`);
//! - a *record* context: one value `i` is left, with a mask of its used
//!   members. These are the N x 2^m, and none is stored: value `i`'s
//!   contexts own a range of numbers, `2^m` blocks of its own places only
//!   (the glue, and the trie nodes on its own keys' and values' paths).
//!
//! So a state number is decoded arithmetically into (context, place), a
//! byte steps the place through the glue automata and the key and value
//! tries (`trie`), and a value read to its end moves to the context its
//! member leads to. A trie node is entered only while some string through
//! it belongs to the context (a key not used yet, a member value some
//! possible record has), so every state can still reach the end: nothing
//! needs pruning, as the table automata's dead-state merge requires.
//!
//! **What it assumes of the glue.** The text between members is given as
//! automata (`RecordGlue`: `{` and the space after it, the key separator,
//! the item separator, and the space and `}` at the end). A place leaves
//! the glue for a key or value on a byte the glue cannot read on, and a
//! value ends on a byte it cannot read on: `records_dfa` checks that the
//! glue never reads on with a byte that would start what follows (JSON's
//! whitespace never does), and gives None when it could, so the caller
//! spells the values out instead.

mod after;
mod contexts;
mod step;
mod trie;

use std::sync::Arc;

use self::after::After;
use self::contexts::Context;
use self::trie::{Interner, LabeledTrie, NONE, ROOT};
use super::{ByteDfa, ByteSet, Minimality, DEAD};
use crate::error::Result;

/// One member value's texts: `text` itself, and when `zeros`, also `text`
/// followed by `.` and one or more `0` (an integral number as a float).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Spelling {
    pub text: Vec<u8>,
    pub zeros: bool,
}

/// One object: its members' key texts (quoted, as written) and the
/// spellings of their values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub members: Vec<(Vec<u8>, Vec<Spelling>)>,
}

/// The text around members, each an automaton of its own.
pub struct RecordGlue {
    /// From `{` to the first key.
    pub open: Arc<ByteDfa>,
    /// Between a key and its value.
    pub key_sep: Arc<ByteDfa>,
    /// Between a value and the next key.
    pub item_sep: Arc<ByteDfa>,
    /// From the last value to the end (`}` included).
    pub close: Arc<ByteDfa>,
}

/// Members per record: a record context's used members are a 64-bit mask.
pub const MAX_RECORD_MEMBERS: usize = 16;

/// Key and value text a record automaton takes (about 14 bytes of
/// automaton per byte: 100,000 six-member rows of integers, 6 MiB of text,
/// take 82 MiB); past it the values are spelled out, under that way's
/// bounds.
pub const MAX_RECORD_TEXT: usize = 16 << 20;

/// The automaton: the glue, the tries, the records and the shared contexts.
pub(super) struct Records {
    open: Arc<ByteDfa>,
    key_sep: Arc<ByteDfa>,
    after: After,
    /// Quoted key texts labelled by key id.
    keys: LabeledTrie,
    /// Per key: its members' value spellings labelled by member id.
    values: Vec<LabeledTrie>,
    /// Per key: where its value trie's nodes start among the places.
    value_base: Vec<u32>,
    member_key: Vec<u32>,
    /// Per integral member: its index among them (its dot and zeros places
    /// are two per index), or `NONE`; and the member of each index.
    zero_index: Vec<u32>,
    zero_members: Vec<u32>,
    /// Record `i`'s members (by key id) are `rec_key` / `rec_member` at
    /// `rec_start[i]..rec_start[i + 1]`; `rec_block` is each member's first
    /// place in the record's block.
    rec_start: Vec<u32>,
    rec_key: Vec<u32>,
    rec_member: Vec<u32>,
    rec_block: Vec<u32>,
    /// Per record, its block of places: the glue after a value, then each
    /// member's (see `step`).
    rec_places: Vec<u32>,
    contexts: Vec<Context>,
    layout: Layout,
    /// Which state numbers each context owns (`contexts::Owners`).
    owners: contexts::Owners,
}

/// Where each kind of place starts among a shared context's places.
#[derive(Clone, Copy, Debug)]
struct Layout {
    key: u32,
    key_sep: u32,
    value: u32,
    zeros: u32,
    after: u32,
    places: u32,
}

/// What the values read so far leave possible.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ctx {
    Shared(u32),
    /// One record and the mask of its used members.
    Record(u32, u64),
}

/// Where in the text a state is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// In the glue from `{` (its state).
    Open(u32),
    /// Inside a key (a key trie node, not the root, not a key's end).
    Key(u32),
    /// In the key separator after key `.0` (its state).
    KeySep(u32, u32),
    /// Inside a value of key `.0` (a node of its value trie).
    Value(u32, u32),
    /// After the dot of integral member `.0`'s float form, past the trie.
    Dot(u32),
    /// In the run of zeros of integral member `.0`, past the trie.
    Zeros(u32),
    /// In the glue after a value (a state of `After`).
    After(u32),
}

/// The automaton of `records` (each an object whose members may come in
/// any order) between `glue`, or None where it does not apply: a record
/// without members or with more than `MAX_RECORD_MEMBERS`, more than
/// `MAX_RECORD_TEXT` of text, glue that reads on with a byte that starts
/// what follows it, or more states than a state number holds. Equal
/// records are one.
pub fn records_dfa(records: &[Record], glue: &RecordGlue) -> Result<Option<ByteDfa>> {
    let Some(after) = After::new(&glue.item_sep, &glue.close)? else {
        return Ok(None);
    };
    let Some(mut built) = Records::new(records, glue, after)? else {
        return Ok(None);
    };
    if !built.glue_is_clear(glue) {
        return Ok(None);
    }
    if !built.contexts_found()? {
        return Ok(None);
    }
    let start = built.encode(Ctx::Shared(0), Place::Open(glue.open.start()));
    let mut classes = [0u8; 256];
    for (b, c) in classes.iter_mut().enumerate() {
        *c = b as u8;
    }
    Ok(Some(ByteDfa {
        classes,
        stride: 256,
        trans: vec![DEAD; 256],
        accepting: vec![false],
        forced_byte: vec![None],
        start,
        after_accepting: std::sync::OnceLock::new(),
        tail: Some(Box::new(super::tail::Tail::Records(Arc::new(built)))),
        minimality: Minimality::Nearly,
    }))
}

impl Records {
    /// The tries and records of `records` (no contexts yet).
    fn new(records: &[Record], glue: &RecordGlue, after: After) -> Result<Option<Records>> {
        // Keys by id, members by (key, spellings).
        let mut key_ids: Interner<Vec<u8>> = Interner::new();
        let mut key_texts = Vec::new();
        let mut member_ids: Interner<(u32, Vec<Spelling>)> = Interner::new();
        let mut member_key = Vec::new();
        let mut value_strings: Vec<Vec<(Vec<u8>, u32)>> = Vec::new();
        let mut zero_runs: Vec<Vec<(Vec<u8>, u32)>> = Vec::new();
        let text: usize = records
            .iter()
            .flat_map(|r| &r.members)
            .map(|(k, v)| k.len() + v.iter().map(|s| s.text.len()).sum::<usize>())
            .sum();
        if text > MAX_RECORD_TEXT {
            return Ok(None);
        }
        let mut rows: Vec<Vec<(u32, u32)>> = Vec::with_capacity(records.len());
        for r in records {
            if r.members.is_empty() || r.members.len() > MAX_RECORD_MEMBERS {
                return Ok(None);
            }
            let mut row = Vec::with_capacity(r.members.len());
            for (key, spellings) in &r.members {
                crate::budget::charge_n(
                    key.len() + spellings.iter().map(|s| s.text.len()).sum::<usize>(),
                )?;
                let (k, new) = key_ids.id(key.clone());
                if new {
                    key_texts.push((key.clone(), k));
                    value_strings.push(Vec::new());
                    zero_runs.push(Vec::new());
                }
                let mut spellings = spellings.clone();
                spellings.sort_unstable();
                spellings.dedup();
                let (m, new) = member_ids.id((k, spellings.clone()));
                if new {
                    member_key.push(k);
                    for s in &spellings {
                        value_strings[k as usize].push((s.text.clone(), m));
                        if s.zeros {
                            zero_runs[k as usize].push((s.text.clone(), m));
                        }
                    }
                }
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
        let mut values = Vec::with_capacity(value_strings.len());
        for (strings, runs) in value_strings.into_iter().zip(&zero_runs) {
            crate::budget::charge_n(strings.iter().map(|s| s.0.len()).sum::<usize>())?;
            match LabeledTrie::new(strings, members, runs) {
                Some(t) => values.push(t),
                None => return Ok(None),
            }
        }
        let mut zero_index = vec![NONE; members];
        let mut zero_members = Vec::new();
        for &(_, m) in zero_runs.iter().flatten() {
            if zero_index[m as usize] == NONE {
                zero_index[m as usize] = zero_members.len() as u32;
                zero_members.push(m);
            }
        }
        // Two places per integral number: its dot and its zeros.
        let zeros = 2 * zero_members.len() as u32;
        let key_nodes = keys.nodes() as u32;
        let key_sep_states = glue.key_sep.num_states() as u32;
        let mut value_base = vec![0u32];
        for t in &values {
            let last = *value_base.last().expect("starts with 0");
            value_base.push(last.saturating_add(t.nodes() as u32));
        }
        let total_values = *value_base.last().expect("starts with 0");
        let key = glue.open.num_states() as u32;
        let key_sep = key + key_nodes;
        let value = key_sep.saturating_add((values.len() as u32).saturating_mul(key_sep_states));
        let zeros_at = value.saturating_add(total_values);
        let after_at = zeros_at.saturating_add(zeros);
        let layout = Layout {
            key,
            key_sep,
            value,
            zeros: zeros_at,
            after: after_at,
            places: after_at.saturating_add(after.len()),
        };
        let mut built = Records {
            open: glue.open.clone(),
            key_sep: glue.key_sep.clone(),
            after,
            keys,
            values,
            value_base,
            member_key,
            zero_index,
            zero_members,
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
            // Each member's block: its key's path, the key separator, its
            // value's path, and a run of zeros if it has one.
            let mut at = built.after.len();
            for (k, m) in row {
                built.rec_key.push(k);
                built.rec_member.push(m);
                built.rec_block.push(at);
                let value_path = built.values[k as usize].path(m).len() as u32;
                let zeros = 2 * u32::from(built.zero_index[m as usize] != NONE);
                at = at.saturating_add(
                    built.keys.path(k).len() as u32 + key_sep_states + value_path + zeros,
                );
            }
            built.rec_start.push(built.rec_key.len() as u32);
            built.rec_places.push(at);
        }
        Ok(Some(built))
    }

    /// Whether the glue never reads on with a byte that starts what follows
    /// it (see the module doc), and every key ends where its text does.
    fn glue_is_clear(&self, glue: &RecordGlue) -> bool {
        let quote = |set: ByteSet| !set.contains(b'"');
        if !quote(glue.open.bytes_after_accepting()) {
            return false;
        }
        let mut value_first = ByteSet::default();
        let mut value_next = ByteSet::default();
        for t in &self.values {
            t.child_bytes(ROOT)
                .iter()
                .for_each(|&b| value_first.insert(b));
            for node in 0..t.nodes() as u32 {
                let m = t.label(node);
                if m != NONE {
                    t.child_bytes(node)
                        .iter()
                        .for_each(|&b| value_next.insert(b));
                    if t.is_int_end(node) {
                        value_next.insert(b'.');
                    }
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
            .all(|t| self.keys.label(t) == NONE || self.keys.child_bytes(t).is_empty())
    }

    /// State numbers past the dead state's row.
    pub(super) fn states(&self) -> usize {
        self.owners.states() as usize - 1
    }

    /// Accepting states whose live bytes stand for every accepting state's:
    /// what follows the close does not depend on the context.
    pub(super) fn accepting_states(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.after.len())
            .filter(|&a| self.after.close_accepting[a as usize])
            .map(|a| self.encode(Ctx::Shared(0), Place::After(a)))
    }

    pub(super) fn memory_bytes(&self) -> usize {
        let contexts: usize = self.contexts.iter().map(Context::memory_bytes).sum();
        self.keys.memory_bytes()
            + self
                .values
                .iter()
                .map(LabeledTrie::memory_bytes)
                .sum::<usize>()
            + self.after.memory_bytes()
            + (self.rec_key.len() * 3 + self.rec_start.len() * 2 + self.member_key.len() * 2) * 4
            + self.owners.memory_bytes()
            + contexts
    }
}

impl std::fmt::Debug for Records {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Records")
            .field("records", &self.rec_places.len())
            .field("keys", &self.values.len())
            .field("members", &self.member_key.len())
            .field("shared_contexts", &self.contexts.len())
            .field("states", &self.owners.states())
            .finish()
    }
}

#[cfg(test)]
mod tests;
