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
//! tries (`trie`; a value's text is bytes, runs of flexible whitespace
//! between the tokens of an array or object, read by an automaton beside
//! the trie, and int ends, where a number's float forms may follow), and a
//! value read to its end moves to the context its member leads to. A trie node is entered only while some string through
//! it belongs to the context (a key not used yet, a member value some
//! possible record has), so every state can still reach the end: nothing
//! needs pruning, as the table automata's dead-state merge requires.
//!
//! **What it assumes of the glue.** The text between members is given as
//! automata (`RecordGlue`: `{` and the space after it, the key separator,
//! the item separator, and the space and `}` at the end). A place leaves
//! the glue for a key or value on a byte the glue cannot read on, and a
//! value ends on a byte it cannot read on, and likewise a whitespace run
//! inside a value: `records_dfa` checks (`build`) that the glue and the
//! runs never read on with a byte that would start what follows (JSON's
//! whitespace never does), and gives None when they could, so the caller
//! spells the values out instead.

mod after;
mod build;
mod contexts;
mod numbers;
mod step;
mod trie;

use std::sync::Arc;

use self::after::After;
use self::contexts::Context;
use self::trie::LabeledTrie;
use super::{ByteDfa, Minimality, DEAD};
use crate::error::Result;

/// A piece of a member value's text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Part {
    Byte(u8),
    /// A run of the layout's flexible whitespace (`RecordGlue::space`),
    /// between the tokens of an array or object value.
    Space,
    /// An integral number's int text ends here: `.` and one or more `0`
    /// may follow (its float forms, `2.0`, `2.00`, ...).
    IntEnd,
}

/// One of the texts of a member's value.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Spelling(pub Vec<Part>);

/// One object: its members' key texts (quoted, as written) and the texts
/// of their values (sorted, without repeats; shared, as many records hold
/// the same value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub members: Vec<(Vec<u8>, Arc<[Spelling]>)>,
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
    /// A run of flexible whitespace inside array and object values (None:
    /// the layout has none).
    pub space: Option<Arc<ByteDfa>>,
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
    /// The whitespace run inside values, and its states' count (0: none).
    space: Option<Arc<ByteDfa>>,
    space_states: u32,
    /// Quoted key texts labelled by key id.
    keys: LabeledTrie,
    /// Per key: its members' values.
    values: Vec<KeyValues>,
    member_key: Vec<u32>,
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
    after: u32,
    places: u32,
}

/// One key's member values: their trie, and the nodes with places beside
/// their own: where a whitespace run ends (a place per run state), and the
/// int ends (a dot and a run of zeros each).
struct KeyValues {
    trie: LabeledTrie,
    spaces: Vec<u32>,
    ends: Vec<u32>,
    /// Where its places start among a shared context's value places.
    base: u32,
}

impl KeyValues {
    /// Its places in a shared context numbered by the layout: each node,
    /// then the whitespace runs, then the dots and zeros.
    fn places(&self, space_states: u32) -> u32 {
        (self.trie.nodes() as u32)
            .saturating_add((self.spaces.len() as u32).saturating_mul(space_states))
            .saturating_add(2 * self.ends.len() as u32)
    }
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
    /// Inside a value of key `.0`, in a whitespace run (state `.2`) that
    /// ends at node `.1`.
    Space(u32, u32, u32),
    /// Inside a value of key `.0`, after the dot of a float form of the int
    /// text ending at node `.1`, past the trie's nodes.
    Dot(u32, u32),
    /// ... and in its run of zeros, past the trie's nodes.
    Zeros(u32, u32),
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
                .map(|v| v.trie.memory_bytes() + (v.spaces.len() + v.ends.len()) * 4)
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
