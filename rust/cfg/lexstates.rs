//! The lexer states a trie walk meets, interned, with their byte transitions.
//!
//! During a walk (`walk::CfgStepper`) the scans that started at one origin
//! move together: their sorted `(lexeme, DFA state)` pairs are a *lexer
//! state*, interned to a small id, and stepping one by a byte is a lookup in
//! a table of 256 transitions per state once that transition has been seen
//! (the first time, each scan's DFA is stepped and the result interned).
//! A mask walks ~10^5 trie nodes, so that lookup is the walk's inner loop.
//!
//! **Kept between walks.** Every mask of a grammar meets mostly the same
//! lexer states, so each thread keeps the tables of the grammars it walked
//! last (`take_table` / `keep_table`): interning them anew was a fifth of a
//! JSON mask's time.
//!
//! **Grown without moving.** A table grows by a chunk of `CHUNK_STATES`
//! states at a time and never moves what it holds. Grown as one vector, it
//! was copied whole at each doubling, inside a mask: a large schema's table
//! reaches thousands of states (its object keys' prefixes), and the copy to
//! 8 MiB took 2.5 ms, a fill's worst step. Chunks of tables this thread no
//! longer keeps are reused for new ones (`SPARE_CHUNKS`), so a fresh
//! grammar's first fills do not wait for the kernel to zero fresh pages.

use rustc_hash::FxHashMap as HashMap;
use std::cell::RefCell;

use super::ast::Lexing;
use super::lowered::Cfg;
use crate::regex_dfa::DEAD;

const UNKNOWN: u32 = u32::MAX;
/// The empty lexer state (no scan alive).
pub(super) const EMPTY: u32 = 0;

/// A lexer state: its scans, and which of their lexemes end where.
pub(super) struct LexState {
    pub(super) pairs: Vec<(u32, u32)>,
    /// All-splits lexemes that end here (accepting, not greedy).
    pub(super) after: Vec<u32>,
}

/// What a longest-match transition does besides stepping scans (see
/// `longest::LongestStep`): lexemes end before the byte, and the branch
/// that goes on from there carries guards (a lexer state of guards only).
pub(super) struct LongestEnd {
    pub(super) ends: Vec<u32>,
    pub(super) width: u32,
    pub(super) guards: u32,
}

/// States per chunk of a transition table (a chunk of `(u32, u32)`
/// transitions is 128 KiB).
const CHUNK_SHIFT: u32 = 6;
const CHUNK_STATES: usize = 1 << CHUNK_SHIFT;

/// 256 entries per state, in chunks of `CHUNK_STATES` states that are
/// allocated whole and filled a state at a time: growing never moves an
/// entry (see the module docs).
struct StateTable<T> {
    chunks: Vec<Vec<T>>,
    states: usize,
}

impl<T: Copy> StateTable<T> {
    const fn new() -> Self {
        StateTable {
            chunks: Vec::new(),
            states: 0,
        }
    }

    /// Adds a state whose 256 entries are `fill`; a new chunk, when one is
    /// needed, is `fresh()` if it gives one (empty, with room for a chunk).
    fn push_state(&mut self, fill: T, fresh: impl FnOnce() -> Option<Vec<T>>) {
        if self.states % CHUNK_STATES == 0 {
            let chunk = fresh().unwrap_or_else(|| Vec::with_capacity(CHUNK_STATES * 256));
            debug_assert!(chunk.is_empty() && chunk.capacity() >= CHUNK_STATES * 256);
            self.chunks.push(chunk);
        }
        let chunk = self.chunks.last_mut().expect("a chunk was pushed");
        chunk.resize(chunk.len() + 256, fill);
        self.states += 1;
    }

    #[inline(always)]
    fn slot(id: u32, byte: u8) -> (usize, usize) {
        let within = (id as usize & (CHUNK_STATES - 1)) << 8 | byte as usize;
        ((id >> CHUNK_SHIFT) as usize, within)
    }

    #[inline(always)]
    fn get(&self, id: u32, byte: u8) -> T {
        let (c, i) = Self::slot(id, byte);
        self.chunks[c][i]
    }

    #[inline(always)]
    fn get_mut(&mut self, id: u32, byte: u8) -> &mut T {
        let (c, i) = Self::slot(id, byte);
        &mut self.chunks[c][i]
    }
}

/// Lexer states interned for one walk, with their byte transitions and the
/// greedy lexemes each transition ends (before its byte).
pub(super) struct LexStates {
    pub(super) states: Vec<LexState>,
    ids: HashMap<Vec<(u32, u32)>, u32>,
    /// Per transition: the state after the byte, and the index into
    /// `ends_before` of the greedy lexemes it ends before the byte (0:
    /// none). Side by side, a cached step reads one cache line.
    trans: StateTable<(u32, u32)>,
    pub(super) ends_before: Vec<Vec<u32>>,
    /// Longest-match lexing: per transition, index into `longest_ends`
    /// (0: no lexeme ends).
    longest: StateTable<u32>,
    pub(super) longest_ends: Vec<LongestEnd>,
    /// Lexer states made by joining two (started scans and guards).
    joined: HashMap<(u32, u32), u32>,
    /// Grammars with alone lexemes: each started state's branches (see
    /// `longest::branches`), as states.
    split: HashMap<u32, Box<[u32]>>,
}

impl LexStates {
    /// A placeholder holding nothing (not usable for walks).
    pub(super) fn empty() -> Self {
        LexStates {
            states: Vec::new(),
            ids: HashMap::default(),
            trans: StateTable::new(),
            ends_before: Vec::new(),
            longest: StateTable::new(),
            longest_ends: Vec::new(),
            joined: HashMap::default(),
            split: HashMap::default(),
        }
    }

    fn new() -> Self {
        // Id 0 (EMPTY) is the state with no scans; all its transitions stay in it.
        let empty = LexState {
            pairs: Vec::new(),
            after: Vec::new(),
        };
        let mut trans = StateTable::new();
        trans.push_state((EMPTY, 0), spare_chunk);
        LexStates {
            states: vec![empty],
            ids: {
                let mut ids = HashMap::with_capacity_and_hasher(64, Default::default());
                ids.insert(Vec::new(), EMPTY);
                ids
            },
            trans,
            ends_before: vec![Vec::new()],
            longest: StateTable::new(),
            longest_ends: vec![LongestEnd {
                ends: Vec::new(),
                width: 0,
                guards: EMPTY,
            }],
            joined: HashMap::default(),
            split: HashMap::default(),
        }
    }

    pub(super) fn intern(&mut self, cfg: &Cfg, mut pairs: Vec<(u32, u32)>) -> u32 {
        pairs.sort_unstable();
        pairs.dedup();
        if let Some(&id) = self.ids.get(&pairs) {
            return id;
        }
        let after = match cfg.lexing {
            Lexing::AllSplits => pairs
                .iter()
                .filter(|&&(l, q)| {
                    let lexeme = &cfg.lexemes[l as usize];
                    let dfa = lexeme.dfa.as_ref().expect("scans have DFAs");
                    dfa.is_accepting(q) && !lexeme.greedy
                })
                .map(|&(l, _)| l)
                .collect(),
            Lexing::Longest => Vec::new(),
        };
        let id = self.states.len() as u32;
        self.ids.insert(pairs.clone(), id);
        self.states.push(LexState { pairs, after });
        self.trans.push_state((UNKNOWN, 0), spare_chunk);
        id
    }

    /// Longest-match lexing: the state after `byte` (EMPTY if no scan
    /// reads it), and the index of what ends before it (see `LongestEnd`).
    pub(super) fn step_longest(&mut self, cfg: &Cfg, id: u32, byte: u8) -> (u32, u32) {
        // Grown here, not per interned state: only longest-match walks read
        // it, and the others' tables stay smaller.
        while self.longest.states <= id as usize {
            self.longest.push_state(0, || None);
        }
        let known = self.trans.get(id, byte).0;
        if known != UNKNOWN {
            return (known, self.longest.get(id, byte));
        }
        let t = cfg.longest_step(&self.states[id as usize].pairs, byte);
        let next = self.intern(cfg, t.next);
        let end = if t.ends.is_empty() {
            0
        } else {
            let guards = self.intern(cfg, t.guards);
            self.longest_ends.push(LongestEnd {
                ends: t.ends,
                width: t.width,
                guards,
            });
            (self.longest_ends.len() - 1) as u32
        };
        self.trans.get_mut(id, byte).0 = next;
        *self.longest.get_mut(id, byte) = end;
        (next, end)
    }

    /// The branches of started state `id` in a grammar with alone lexemes:
    /// one state for the alone scans, and one for the rest (see
    /// `longest::branches`).
    #[cold]
    #[inline(never)]
    pub(super) fn split(&mut self, cfg: &Cfg, id: u32) -> Box<[u32]> {
        if let Some(parts) = self.split.get(&id) {
            return parts.clone();
        }
        let pairs = self.states[id as usize].pairs.clone();
        let (alone, rest): (Vec<_>, Vec<_>) = pairs
            .into_iter()
            .partition(|&(l, _)| cfg.lexemes[l as usize].alone);
        let mut parts: Vec<u32> = Vec::with_capacity(2);
        if !alone.is_empty() {
            parts.push(self.intern(cfg, alone));
        }
        if !rest.is_empty() {
            parts.push(self.intern(cfg, rest));
        }
        let parts: Box<[u32]> = parts.into();
        self.split.insert(id, parts.clone());
        parts
    }

    /// The state holding the scans of `a` and of `b`.
    pub(super) fn join(&mut self, cfg: &Cfg, a: u32, b: u32) -> u32 {
        if b == EMPTY {
            return a;
        }
        if let Some(&id) = self.joined.get(&(a, b)) {
            return id;
        }
        let pairs = [
            &self.states[a as usize].pairs[..],
            &self.states[b as usize].pairs[..],
        ]
        .concat();
        let id = self.intern(cfg, pairs);
        self.joined.insert((a, b), id);
        id
    }

    /// The state after `byte`, and the index of the greedy lexemes it ends.
    pub(super) fn step(&mut self, cfg: &Cfg, id: u32, byte: u8) -> (u32, u32) {
        let (known, before) = self.trans.get(id, byte);
        if known != UNKNOWN {
            return (known, before);
        }
        let mut ended = Vec::new();
        let next: Vec<(u32, u32)> = self.states[id as usize]
            .pairs
            .iter()
            .filter_map(|&(l, q)| {
                let lexeme = &cfg.lexemes[l as usize];
                let dfa = lexeme.dfa.as_ref().expect("scans have DFAs");
                let q2 = dfa.step(q, byte);
                if q2 == DEAD && lexeme.ends_before(dfa, q, byte) {
                    ended.push(l);
                }
                (q2 != DEAD).then_some((l, q2))
            })
            .collect();
        let next = self.intern(cfg, next);
        let before = if ended.is_empty() {
            0
        } else {
            self.ends_before.push(ended);
            (self.ends_before.len() - 1) as u32
        };
        *self.trans.get_mut(id, byte) = (next, before);
        (next, before)
    }
}

thread_local! {
    /// Each thread's interned lexer states of the grammars it walked last.
    static LEX_TABLES: RefCell<Vec<(u64, LexStates)>> = const { RefCell::new(Vec::new()) };
}
/// Grammars whose lexer states a thread keeps.
const KEPT_TABLES: usize = 8;
/// A table with more states than this is not kept (about 2 KiB each).
const KEPT_STATES: usize = 2048;

thread_local! {
    /// Emptied chunks of the tables this thread dropped, for the next new
    /// ones: growing tables from nothing on every fresh grammar was, each
    /// time, memory the kernel had to zero first (a tenth of a fresh
    /// schema's fill time).
    static SPARE_CHUNKS: RefCell<Vec<Vec<(u32, u32)>>> = const { RefCell::new(Vec::new()) };
}
/// Spare chunks a thread holds at most: a kept table's worth (4 MiB).
const SPARE_CHUNKS_KEPT: usize = KEPT_STATES / CHUNK_STATES + 1;

fn spare_chunk() -> Option<Vec<(u32, u32)>> {
    SPARE_CHUNKS.with(|s| s.borrow_mut().pop())
}

/// The lexer states this thread kept for grammar `id`, else empty ones.
pub(super) fn take_table(id: u64) -> LexStates {
    let kept = LEX_TABLES.with(|t| {
        let mut t = t.borrow_mut();
        t.iter().position(|(k, _)| *k == id).map(|i| t.remove(i).1)
    });
    kept.unwrap_or_else(LexStates::new)
}

/// Keeps `lex` as grammar `id`'s lexer states on this thread (dropping the
/// least recently walked grammar's past `KEPT_TABLES`).
pub(super) fn keep_table(id: u64, lex: LexStates) {
    if lex.states.len() > KEPT_STATES {
        spare(lex);
        return;
    }
    let oldest = LEX_TABLES.with(|t| {
        let mut t = t.borrow_mut();
        t.retain(|(k, _)| *k != id);
        t.insert(0, (id, lex));
        (t.len() > KEPT_TABLES).then(|| t.pop().expect("more than KEPT_TABLES tables").1)
    });
    if let Some(oldest) = oldest {
        spare(oldest);
    }
}

/// Keeps `lex`'s transition chunks, emptied, as spares (up to
/// `SPARE_CHUNKS_KEPT`).
fn spare(lex: LexStates) {
    SPARE_CHUNKS.with(|s| {
        let mut s = s.borrow_mut();
        for mut chunk in lex.trans.chunks {
            if s.len() >= SPARE_CHUNKS_KEPT {
                break;
            }
            chunk.clear();
            s.push(chunk);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_table_keeps_its_entries_across_chunks() {
        let mut t: StateTable<(u32, u32)> = StateTable::new();
        let states = 3 * CHUNK_STATES + 5;
        for id in 0..states {
            t.push_state((UNKNOWN, id as u32), || None);
        }
        assert_eq!(t.chunks.len(), 4);
        for id in 0..states as u32 {
            for byte in [0u8, 1, 97, 255] {
                *t.get_mut(id, byte) = (id * 1000 + byte as u32, id);
            }
        }
        for id in 0..states as u32 {
            assert_eq!(t.get(id, 0), (id * 1000, id));
            assert_eq!(t.get(id, 255), (id * 1000 + 255, id));
            assert_eq!(
                t.get(id, 2),
                (UNKNOWN, id),
                "an entry not written keeps its fill"
            );
        }
        // No chunk was moved or grown past its first allocation.
        assert!(t.chunks.iter().all(|c| c.capacity() == CHUNK_STATES * 256));
    }

    #[test]
    fn spare_chunks_are_reused_empty_and_bounded() {
        let mut t: StateTable<(u32, u32)> = StateTable::new();
        for _ in 0..(SPARE_CHUNKS_KEPT + 3) * CHUNK_STATES {
            t.push_state((7, 7), || None);
        }
        let mut lex = LexStates::empty();
        lex.trans = t;
        SPARE_CHUNKS.with(|s| s.borrow_mut().clear());
        spare(lex);
        assert_eq!(SPARE_CHUNKS.with(|s| s.borrow().len()), SPARE_CHUNKS_KEPT);
        let fresh = LexStates::new();
        assert_eq!(
            fresh.trans.get(EMPTY, 7),
            (EMPTY, 0),
            "a reused chunk is refilled"
        );
        assert_eq!(
            SPARE_CHUNKS.with(|s| s.borrow().len()),
            SPARE_CHUNKS_KEPT - 1
        );
    }
}
