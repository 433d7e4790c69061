//! Token sets that depend only on the lexer, computed once per lexer state.
//!
//! For a frontier of lexeme scans, a token whose bytes never complete a
//! lexeme is allowed exactly when some scan survives all its bytes: that only
//! depends on the `(lexeme, DFA state)` pairs, not on the parser. So for each
//! such key we walk the trie once, stepping DFAs only, and keep (a) the bits
//! of those tokens and (b) the "boundary" nodes where some lexeme completes
//! for the first time on the path. A mask is then a copy of (a) plus parser
//! walks below the nodes in (b) only (DESIGN.md §5: precomputed token sets).

use rustc_hash::FxHashMap as HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use super::ast::Lexing;
use super::earley::Scan;
use super::lower::Cfg;
use crate::bitmask::set_bit;
use crate::regex_dfa::DEAD;
use crate::trie::{TokenTrie, Visit, VisitStepper};

/// The lexer-only part of a mask below one trie node.
#[derive(Debug)]
pub struct LexEntry {
    inner: TokenSet,
    /// Nodes below the entry's node where some lexeme first (may) end.
    pub boundary: Vec<u32>,
}

/// Token ids, dense as a bitmask row when many, sparse when few.
#[derive(Debug)]
enum TokenSet {
    Dense(Box<[u32]>),
    Sparse(Vec<u32>),
}

impl LexEntry {
    /// Sets this entry's token bits in `row` (which it may overwrite when
    /// `overwrite`, i.e. when the row holds nothing yet).
    pub fn apply(&self, row: &mut [u32], overwrite: bool) {
        match &self.inner {
            TokenSet::Dense(bits) if overwrite => row.copy_from_slice(bits),
            TokenSet::Dense(bits) => row.iter_mut().zip(bits.iter()).for_each(|(r, b)| *r |= b),
            TokenSet::Sparse(ids) => {
                if overwrite {
                    row.fill(0);
                }
                ids.iter().for_each(|&t| set_bit(row, t));
            }
        }
    }

    fn bytes(&self) -> usize {
        let inner = match &self.inner {
            TokenSet::Dense(b) => b.len(),
            TokenSet::Sparse(v) => v.len(),
        };
        (inner + self.boundary.len()) * 4
    }
}

/// A frontier with origins dropped: what the lexer-only part depends on.
pub type LexKey = Vec<(u32, u32)>;

pub fn lex_key(frontier: &[Scan]) -> LexKey {
    let mut k: LexKey = frontier.iter().map(|s| (s.lexeme, s.state)).collect();
    k.sort_unstable();
    k.dedup();
    k
}

#[derive(Debug)]
pub struct LexCache {
    map: RwLock<HashMap<(LexKey, u32), Arc<LexEntry>>>,
    bytes: AtomicUsize,
    limit: usize,
}

impl LexCache {
    pub fn new(limit: usize) -> Self {
        LexCache {
            map: RwLock::new(HashMap::default()),
            bytes: AtomicUsize::new(0),
            limit,
        }
    }

    /// The entry for lexer state `key` at trie node `top`, computed (and kept
    /// while under the memory bound) on a miss.
    pub fn get(
        &self,
        cfg: &Cfg,
        trie: &TokenTrie,
        words: usize,
        key: &LexKey,
        top: u32,
    ) -> Arc<LexEntry> {
        let map_key = (key.clone(), top);
        if let Some(e) = self
            .map
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&map_key)
        {
            return e.clone();
        }
        let entry = Arc::new(build(cfg, trie, words, key, top as usize));
        let size = entry.bytes() + key.len() * 8;
        if self.bytes.fetch_add(size, Ordering::Relaxed) + size <= self.limit {
            let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
            return map.entry(map_key).or_insert(entry).clone();
        }
        self.bytes.fetch_sub(size, Ordering::Relaxed);
        entry
    }
}

/// Steps only the lexemes' DFAs; stops where one completes.
struct ScanOnly<'a> {
    cfg: &'a Cfg,
    pairs: Vec<(u32, u32)>,
    /// `ends[d]`: end of frame d's pairs in `pairs` (frame d starts at ends[d-1]).
    ends: Vec<usize>,
}

impl VisitStepper for ScanOnly<'_> {
    fn visit(&mut self, depth: usize, byte: u8) -> Visit {
        let start = if depth >= 2 { self.ends[depth - 2] } else { 0 };
        let end = self.ends[depth - 1];
        self.pairs.truncate(end);
        let mut accepted_after = false;
        let mut accepted_before = false;
        for i in start..end {
            let (l, q) = self.pairs[i];
            let dfa = self.cfg.lexemes[l as usize]
                .dfa
                .as_ref()
                .expect("scans have DFAs");
            accepted_before |= dfa.is_accepting(q);
            let q2 = dfa.step(q, byte);
            if q2 != DEAD {
                accepted_after |= dfa.is_accepting(q2);
                self.pairs.push((l, q2));
            }
        }
        self.ends[depth] = self.pairs.len();
        let survived = self.pairs.len() > end;
        // Where a lexeme may complete, the parser decides: stop and leave it
        // to the fill. All-splits completes after the byte; longest-match
        // only when no scan takes the byte.
        let completes = match self.cfg.lexing {
            Lexing::AllSplits => accepted_after,
            Lexing::Longest => !survived && accepted_before,
        };
        if completes {
            Visit::Stop
        } else if survived {
            Visit::Live
        } else {
            Visit::Dead
        }
    }
}

fn build(cfg: &Cfg, trie: &TokenTrie, words: usize, key: &LexKey, top: usize) -> LexEntry {
    let mut ids = Vec::new();
    let mut boundary = Vec::new();
    let mut ends = vec![0usize; trie.max_depth() + 2];
    ends[0] = key.len();
    let mut stepper = ScanOnly {
        cfg,
        pairs: key.clone(),
        ends,
    };
    trie.walk_visits(
        top,
        &mut stepper,
        |t| ids.push(t),
        |n| boundary.push(n as u32),
    );
    // A dense row costs `words` words; a list, one word per token.
    let inner = if ids.len() >= words {
        let mut bits = vec![0u32; words];
        ids.iter().for_each(|&t| set_bit(&mut bits, t));
        TokenSet::Dense(bits.into_boxed_slice())
    } else {
        TokenSet::Sparse(ids)
    };
    LexEntry { inner, boundary }
}
