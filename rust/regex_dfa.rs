//! Regular expressions as byte DFAs with full-match semantics.
//!
//! regex-automata's lazy DFA determinizes the pattern state by state
//! (`lazy`, charged to the compile budget as it goes; UTF-8 aware, so a
//! state reached by a token that ends inside a multi-byte character is live
//! exactly when some completion stays in the language). We copy it into a
//! flat table in which every state that cannot reach a match is merged into
//! the dead state 0, so a trie walk needs one table lookup per byte and one
//! comparison to prune.
//!
//! This module holds the type, its constructors from patterns, literals and
//! transition functions, and its queries; the constructions and the layouts
//! live in submodules: `table` (tables while an automaton is built),
//! `product`, `concat`, `tail` (states past the table: `periodic` blocks and
//! `sparse` rows), `residuals` (comparing states), `minimize`, `compose`
//! (counts and repetitions built table to table), `subset`, `sequences`.

use rustc_hash::FxHashMap as HashMap;

use regex_automata::nfa::thompson;
use regex_automata::MatchKind;
use regex_syntax::hir::Hir;

use crate::error::{Error, Result};

mod block_product;
mod byteset;
mod closure;
mod compose;
mod concat;
mod lazy;
mod minimize;
mod periodic;
mod product;
mod records;
mod residuals;
mod seqtrie;
mod sequences;
mod simplify;
mod sparse;
mod subset;
mod table;
mod tail;
pub use byteset::ByteSet;
pub use compose::LARGE_REPEAT;
use compose::{compose_parsed, hir_to_compose};
pub use product::Op;
pub use records::{
    records_dfa, Part, Record, RecordGlue, Spelling, MAX_RECORD_MEMBERS, MAX_RECORD_TEXT,
};
pub use sequences::{union_may_fit, union_of_sequences, SeqPart};
use table::{class_bytes_of, own_classes, Table};
use tail::Tail;

/// Bound on the DFA's memory while it is built and once built (bytes).
pub const DFA_SIZE_LIMIT: usize = 64 << 20;
/// Bound on the Thompson NFA built from the pattern (bytes).
pub const NFA_SIZE_LIMIT: usize = 16 << 20;
/// Dead state: no continuation can complete a match.
pub const DEAD: u32 = 0;

#[derive(Clone, Debug)]
pub struct ByteDfa {
    classes: [u8; 256],
    stride: usize,
    /// `trans[state * stride + class]`; row 0 is the dead state.
    trans: Vec<u32>,
    accepting: Vec<bool>,
    /// The one byte every continuation from this state must start with, if any
    /// (and the state is not accepting, so EOS is not an alternative).
    forced_byte: Vec<Option<u8>>,
    start: u32,
    /// `bytes_after_accepting`, once asked: it reads every state, and
    /// cached DFAs serve many grammars.
    after_accepting: std::sync::OnceLock<ByteSet>,
    /// The states past the table's rows, if any (see `Tail`).
    tail: Option<Box<Tail>>,
    /// What is known of equivalent states (see `Minimality`).
    minimality: Minimality,
}

/// Whether a DFA may have equivalent states, as far as its construction
/// tells: `minimized` costs states x classes x log states (15-20 ms on a
/// 6,800-state word count), so it is skipped where it cannot pay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Minimality {
    /// Nothing is known.
    Unknown,
    /// No two states are equivalent (`minimized` made it, or it is one
    /// literal word: its states' residuals are suffixes of distinct lengths).
    Minimal,
    /// Nearly minimal: minimal or nearly minimal parts joined without
    /// overlap (`concat_all`, `repeat`), or a minimal DFA with its start
    /// made accepting (`or_empty`). A join keeps each later part's (each
    /// copy's) start row, unreachable where only the join enters it;
    /// otherwise, in the cases measured, minimizing merges nothing (a
    /// quoted 200-word count: 6,805 states, 6,804 minimized, in 15-20 ms).
    /// It is used as it is: at worst some states too many, never a
    /// different language.
    Nearly,
}

impl ByteDfa {
    /// Compiles `pattern` (Rust `regex` syntax) for full-match use: a text
    /// is accepted if any way of matching the pattern spans all of it.
    pub fn new(pattern: &str) -> Result<Self> {
        let (hir, may_compose) = match hir_to_compose(pattern) {
            Some(hir) => (hir, true),
            None => match parse_utf8(pattern) {
                Some(hir) => (hir, false),
                // regex-automata words the error.
                None => return Self::build(pattern, MatchKind::All),
            },
        };
        // Simplified once, before composing too: `(?:a+){33333}` composes
        // as `a{33333,}`. The parts `compose` determinizes are subtrees of
        // the simplified tree, simplified with it.
        let hir = simplify::simplified(&hir, simplify::Keep::Language).unwrap_or(hir);
        if may_compose {
            if let Some(d) = compose_parsed(&hir)? {
                return Ok(d);
            }
        }
        Self::full_match(pattern, &hir)
    }

    /// `hir`'s full-match DFA (`pattern` names it in errors); `hir` is
    /// simplified already (`new`).
    fn full_match(pattern: &str, hir: &Hir) -> Result<Self> {
        lazy::determinize(
            pattern,
            lazy::LazySource::from_hir(pattern, hir, MatchKind::All)?,
        )
    }

    /// Compiles `pattern` with the match a backtracking engine such as
    /// Python's `re.match` would report: once a match is found, only
    /// continuations it would prefer (greedy repetitions, earlier
    /// alternatives) stay live, so `x.*?y` ends at the first `y` and `ab|abcd`
    /// at `ab`. This is how Lark terminals match.
    pub fn first_match(pattern: &str) -> Result<Self> {
        Self::build(pattern, MatchKind::LeftmostFirst)
    }

    fn build(pattern: &str, kind: MatchKind) -> Result<Self> {
        let keep = match kind {
            MatchKind::All => simplify::Keep::Language,
            _ => simplify::Keep::Preferences,
        };
        let Some(hir) = parse_utf8(pattern) else {
            // regex-automata words the error.
            return lazy::determinize(pattern, lazy::LazySource::new(pattern, kind)?);
        };
        let simple = simplify::simplified(&hir, keep);
        let hir = simple.as_ref().unwrap_or(&hir);
        lazy::determinize(pattern, lazy::LazySource::from_hir(pattern, hir, kind)?)
    }

    /// Exactly the byte strings `words` (a trie): literals and enumerations
    /// need no regex compiler. None for an empty list.
    pub fn literals(words: &[&[u8]]) -> Option<Self> {
        let (classes, class_size, representative) =
            own_classes(words.iter().flat_map(|w| w.iter().copied()));
        let stride = representative.len();
        let mut trans = vec![DEAD; 2 * stride];
        let mut accepting = vec![false, false];
        for w in words {
            let mut q = 1usize;
            for &b in *w {
                let slot = q * stride + classes[b as usize] as usize;
                if trans[slot] == DEAD {
                    trans[slot] = accepting.len() as u32;
                    accepting.push(false);
                    trans.extend(std::iter::repeat_n(DEAD, stride));
                }
                q = trans[slot] as usize;
            }
            accepting[q] = true;
        }
        let mut dfa = Table {
            classes,
            class_size,
            representative,
            trans,
            accepting,
            start: 1,
        }
        .pruned()?;
        if let [_] = words {
            dfa.minimality = Minimality::Minimal;
        }
        Some(dfa)
    }

    /// The DFA with transition function `next` over the bytes of `alphabet`
    /// (every other byte leads to the dead state): states are
    /// `0..accepting.len()`, 0 dead and 1 the start. None if no string
    /// matches.
    pub fn from_transitions(
        alphabet: &[u8],
        accepting: Vec<bool>,
        next: impl Fn(u32, u8) -> u32,
    ) -> Option<Self> {
        let (classes, class_size, representative) = own_classes(alphabet.iter().copied());
        let stride = representative.len();
        let mut trans = vec![DEAD; accepting.len() * stride];
        for q in 1..accepting.len() {
            for (c, &b) in representative.iter().enumerate().skip(1) {
                let t = next(q as u32, b);
                debug_assert!((t as usize) < accepting.len());
                trans[q * stride + c] = t;
            }
        }
        Table {
            classes,
            class_size,
            representative,
            trans,
            accepting,
            start: 1,
        }
        .reachable()
        .pruned()
    }

    /// The same language with each state split by a value computed over
    /// the text read: `count(value, byte)` is the value after `byte` (the
    /// start's is `start`); bytes with different `kind`s may change it
    /// differently, bytes of the same kind (and class) alike. Also returns
    /// each state's value. At most `max_states` states, else LimitExceeded.
    pub fn counted(
        &self,
        start: u32,
        kind: impl Fn(u8) -> u32,
        max_states: usize,
        count: impl Fn(u32, u8) -> u32,
    ) -> Result<(ByteDfa, Vec<u32>)> {
        let mut key_class: HashMap<(u8, u32), u8> = HashMap::default();
        let mut classes = [0u8; 256];
        let mut representative: Vec<u8> = Vec::new();
        let mut class_size: Vec<usize> = Vec::new();
        for b in 0..=255u8 {
            let key = (self.classes[b as usize], kind(b));
            let c = *key_class.entry(key).or_insert_with(|| {
                representative.push(b);
                class_size.push(0);
                (representative.len() - 1) as u8
            });
            classes[b as usize] = c;
            class_size[c as usize] += 1;
        }
        let stride = representative.len();
        // States: (ours, value), numbered from 1 in breadth-first order.
        let mut ids: HashMap<(u32, u32), u32> = HashMap::default();
        let mut order: Vec<(u32, u32)> = vec![(DEAD, 0), (self.start, start)];
        ids.insert((self.start, start), 1);
        let mut trans = vec![DEAD; 2 * stride];
        let mut next = 1;
        while next < order.len() {
            let (q, v) = order[next];
            crate::budget::charge_n(stride * crate::budget::HASHED_TRANSITION)?;
            for (c, &b) in representative.iter().enumerate() {
                let q2 = self.step(q, b);
                if q2 == DEAD {
                    continue;
                }
                let key = (q2, count(v, b));
                let id = match ids.get(&key) {
                    Some(&id) => id,
                    None => {
                        if order.len() >= max_states {
                            return Err(Error::LimitExceeded(format!(
                                "a counted lexeme needs more than {max_states} states"
                            )));
                        }
                        let id = order.len() as u32;
                        ids.insert(key, id);
                        order.push(key);
                        trans.resize(trans.len() + stride, DEAD);
                        id
                    }
                };
                trans[next * stride + c] = id;
            }
            next += 1;
        }
        let accepting = order
            .iter()
            .map(|&(q, _)| q != DEAD && self.is_accepting(q))
            .collect();
        let values = order.iter().map(|&(_, v)| v).collect();
        // Every state reaches a match (ours does, and the count never
        // blocks a byte), so the table needs no pruning.
        let dfa = Table {
            classes,
            class_size,
            representative,
            trans,
            accepting,
            start: 1,
        }
        .finish();
        Ok((dfa, values))
    }

    /// The same language with equivalent states merged (Hopcroft's
    /// partition refinement, `minimize`), or None when that would cost
    /// more than `work_limit` steps (predecessors visited; building them
    /// costs states x byte classes, which must be within the limit too).
    pub fn minimized(&self, work_limit: usize) -> Option<Self> {
        let n = self.num_states();
        let stride = self.stride;
        // A block of shared copies is a long count, minimal as it is.
        if n * stride > work_limit || self.tail.is_some() {
            return None;
        }
        crate::budget::charge_later(n * stride * crate::budget::TABLE_TRANSITION);
        let (class, count) =
            minimize::equivalence_classes(&self.trans, stride, &self.accepting, work_limit)?;
        let mut trans = vec![DEAD; count * stride];
        let mut accepting = vec![false; count];
        for s in 1..n {
            let c = class[s] as usize;
            accepting[c] = self.accepting[s];
            for k in 0..stride {
                trans[c * stride + k] = class[self.trans[s * stride + k] as usize];
            }
        }
        let mut m = self
            .table(trans, accepting, class[self.start as usize])
            .reachable()
            .pruned()?;
        m.minimality = Minimality::Minimal;
        Some(m)
    }

    /// Whether `minimized` may merge more than a few states: false where
    /// the construction made the DFA minimal or nearly so (`Minimality`).
    pub fn minimizing_pays(&self) -> bool {
        self.minimality == Minimality::Unknown
    }

    pub fn start(&self) -> u32 {
        self.start
    }

    /// Whether every state is a table row (no block of copies, no sparse
    /// rows past the table).
    pub fn is_table(&self) -> bool {
        self.tail.is_none()
    }

    /// Whether its states are computed from their numbers rather than
    /// stored (an enum of records, `records`): the walks step it as any
    /// automaton, but a pass over its states would never end.
    pub fn is_computed(&self) -> bool {
        matches!(self.tail.as_deref(), Some(Tail::Records(_)))
    }

    pub fn num_states(&self) -> usize {
        self.accepting.len() + self.tail.as_ref().map_or(0, |t| t.states())
    }

    /// Approximate heap size in bytes.
    pub fn memory_bytes(&self) -> usize {
        self.trans.len() * 4
            + self.accepting.len()
            + self.forced_byte.len() * 2
            + self.tail.as_ref().map_or(0, |t| t.memory_bytes())
    }

    /// Each class's size and its smallest byte.
    fn class_bytes(&self) -> (Vec<usize>, Vec<u8>) {
        class_bytes_of(&self.classes, self.stride)
    }

    /// A table of rows over this automaton's byte classes.
    fn table(&self, trans: Vec<u32>, accepting: Vec<bool>, start: u32) -> Table {
        let (class_size, representative) = self.class_bytes();
        Table {
            classes: self.classes,
            class_size,
            representative,
            trans,
            accepting,
            start,
        }
    }

    /// The class of `byte`: bytes of one class step alike from every state.
    pub fn class(&self, byte: u8) -> u8 {
        self.classes[byte as usize]
    }

    #[inline(always)]
    pub fn step(&self, state: u32, byte: u8) -> u32 {
        self.target(state, self.classes[byte as usize] as usize)
    }

    /// `state`'s targets by class: its table row, or for a block state
    /// the row written into `buf`.
    fn row<'a>(&'a self, state: u32, buf: &'a mut Vec<u32>) -> &'a [u32] {
        let at = state as usize * self.stride;
        match self.trans.get(at..at + self.stride) {
            Some(row) => row,
            None => {
                buf.clear();
                buf.extend((0..self.stride).map(|c| self.tail_target(state, c)));
                buf
            }
        }
    }

    /// Where `state` goes on a byte of `class`. A state past the table's
    /// rows is exactly one whose index misses the table, so the bounds check
    /// indexing needs anyway tells block states apart.
    #[inline(always)]
    fn target(&self, state: u32, class: usize) -> u32 {
        match self.trans.get(state as usize * self.stride + class) {
            Some(&t) => t,
            None => self.tail_target(state, class),
        }
    }

    /// Runs `bytes` from `state`; DEAD if any byte leads to the dead state.
    pub fn step_bytes(&self, mut state: u32, bytes: &[u8]) -> u32 {
        for &b in bytes {
            state = self.step(state, b);
            if state == DEAD {
                return DEAD;
            }
        }
        state
    }

    /// True if the text read so far is in the language.
    pub fn is_accepting(&self, state: u32) -> bool {
        match self.accepting.get(state as usize) {
            Some(&a) => a,
            None => self.tail().is_accepting(state),
        }
    }

    /// True if `state` accepts and no byte leads on from it: a match ends
    /// there whatever comes next (the end of a literal).
    pub fn is_finished(&self, state: u32) -> bool {
        let mut buf = Vec::new();
        self.is_accepting(state) && self.row(state, &mut buf).iter().all(|&t| t == DEAD)
    }

    pub fn forced_byte(&self, state: u32) -> Option<u8> {
        match self.forced_byte.get(state as usize) {
            Some(&f) => f,
            None => self.tail().forced_byte(state),
        }
    }

    /// Groups states whose token masks must be equal: states that agree on
    /// acceptance, and on liveness after every string of at most `max_len`
    /// bytes (Moore's partition refinement, stopped after `max_len` rounds or
    /// when stable). A mask only asks whether each token's bytes (at most
    /// `max_len` of them) lead to a live state, so one row serves a class.
    /// Returns a class per state (the dead state in class 0), or None when
    /// the refinement would cost more than `work_limit` steps.
    pub fn mask_classes(&self, max_len: usize, work_limit: usize) -> Option<Vec<u32>> {
        if self.tail.is_some() {
            return None; // it has more states than any refinement takes
        }
        let n = self.num_states();
        let rounds = max_len.min(n);
        if n.saturating_mul(self.stride).saturating_mul(rounds.max(1)) > work_limit {
            return None;
        }
        // Round 0: dead / live-not-accepting / accepting.
        let mut class: Vec<u32> = (0..n)
            .map(|s| {
                if s == 0 {
                    0
                } else if self.accepting[s] {
                    2
                } else {
                    1
                }
            })
            .collect();
        let mut count = class
            .iter()
            .copied()
            .collect::<std::collections::HashSet<_>>()
            .len();
        for _ in 0..rounds {
            let mut ids: HashMap<Vec<u32>, u32> = HashMap::default();
            let mut next = vec![0u32; n];
            for s in 0..n {
                let mut sig = Vec::with_capacity(self.stride + 1);
                sig.push(class[s]);
                sig.extend(
                    (0..self.stride).map(|c| class[self.trans[s * self.stride + c] as usize]),
                );
                let fresh = ids.len() as u32;
                next[s] = *ids.entry(sig).or_insert(fresh);
            }
            let new_count = ids.len();
            class = next;
            if new_count == count {
                break;
            }
            count = new_count;
        }
        Some(class)
    }
}

/// Whether every string `pattern` matches is nonempty (false where it
/// does not parse): read off its syntax tree, no automaton built.
pub fn matches_only_nonempty(pattern: &str) -> bool {
    parse_utf8(pattern).is_some_and(|h| h.properties().minimum_len().is_some_and(|n| n > 0))
}

/// `pattern`'s syntax tree as regex-automata would parse it for
/// the DFA builders (Unicode, UTF-8 only); None where it does not parse.
fn parse_utf8(pattern: &str) -> Option<Hir> {
    regex_syntax::ParserBuilder::new()
        .unicode(true)
        .utf8(true)
        .build()
        .parse(pattern)
        .ok()
}

/// The NFA regex-automata determinizes: bounded in size, and without
/// capture states (a DFA reports no groups; each group would add two
/// ε-states that every closure through it walks).
pub(super) fn thompson_config() -> thompson::Config {
    thompson::Config::new()
        .nfa_size_limit(Some(NFA_SIZE_LIMIT))
        .which_captures(thompson::WhichCaptures::None)
}

pub(super) fn build_error(pattern: &str, e: &dyn std::error::Error) -> Error {
    let mut msg = format!("invalid regex {pattern:?}: {e}");
    let mut src = e.source();
    while let Some(s) = src {
        msg.push_str(&format!(": {s}"));
        src = s.source();
    }
    if msg.contains("exceeded") || msg.contains("size limit") {
        Error::LimitExceeded(msg)
    } else {
        Error::Compile(msg)
    }
}

#[cfg(test)]
pub(crate) mod tests;
