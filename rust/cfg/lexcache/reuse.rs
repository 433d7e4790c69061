//! Entries from states met before.
//!
//! A new lexer state often walks the token trie as one met before does: a
//! counted string's states far from its limit, a pattern's loop, the same
//! place of a long count's copies. The cheapest entry for it is then that
//! state's, whole (`Equivalent::Same`), or copied down to the depth where
//! the two may part (`Equivalent::Alike`, `nearentry`), or copied where the
//! two walks diverge on a few nodes only (`divergent`). This module keeps the
//! states a new one is compared with (the last two of each lexeme at each
//! trie node, `represent`; the last one at each place of a count's copies)
//! and how the comparisons went, so that a lexeme whose states never walk
//! alike stops paying for them.

use std::sync::Arc;

use super::super::divergent::{entry_from_divergent, DIVERGENCE_BUDGET};
use super::super::lexentry::LexEntry;
use super::super::lowered::Cfg;
use super::super::nearentry::MIN_ALIKE_DEPTH;
use super::{charge, read, write, LexCache, LexKey};
use crate::regex_dfa::ByteDfa;
use crate::trie::TokenTrie;

/// What `LexCache::equivalent_entry` found for a new state.
pub(super) enum Equivalent {
    /// The entry of a state no walk below the node tells from it, and
    /// that state.
    Same(Arc<LexEntry>, u32),
    /// The entry of a state that no string shorter than this many bytes
    /// tells from it (see `nearentry`).
    Alike(Arc<LexEntry>, usize),
    None,
}

/// Bound on the pairs of states compared to tell two states apart (past it
/// they count as different).
const DISTINGUISH_PAIRS: usize = 2048;
/// An entry alike to a depth below which at most this many trie nodes lie
/// is copied without searching the other representatives (see
/// `equivalent_entry`).
const ALIKE_ENOUGH_NODES: usize = 4096;
/// Representatives kept per (lexeme, trie node).
const REPRESENTATIVES: usize = 2;
/// Searches for an equivalent state of one lexeme that may all fail before
/// its later states are no longer searched for (see `Searches`).
const HOPELESS_SEARCHES: u32 = 3;

/// How a lexeme's searches for an equivalent state went. A search that
/// fails costs up to `DISTINGUISH_PAIRS` pairs and is then followed by the
/// walk it was meant to save: a word count inside a `maxLength` string
/// (`^(?:\S+\s+){0,49}\S+$`, 500 characters) has no two states that
/// walk alike, and searching for each new one was a third of its fills'
/// time. A lexeme whose first searches all fail is not searched for again;
/// one whose searches ever succeed (a plain `maxLength` string, whose
/// states far from the limit all walk alike) always is.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Searches {
    found: bool,
    failed: u32,
}

impl Searches {
    fn hopeless(self) -> bool {
        !self.found && self.failed >= HOPELESS_SEARCHES
    }
}

/// How a lexeme's copies from states it differs from on few nodes went:
/// a count's states differ on whole levels of the trie, and each try that
/// fails costs up to `DIVERGENCE_BUDGET` nodes before the walk it was
/// meant to save. A lexeme whose copies mostly fail is not tried again.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Copies {
    pub(super) made: u32,
    failed: u32,
}

impl Copies {
    fn hopeless(self) -> bool {
        self.failed >= HOPELESS_SEARCHES && self.failed > 2 * self.made
    }
}

/// Whether a copy from an entry alike to depth `d` walks only the deepest
/// nodes (`ALIKE_ENOUGH_NODES` or fewer): another search (a long one, where
/// a counted string's states part only near its minLength) would save less
/// than it costs.
fn alike_enough(trie: &TokenTrie, d: usize) -> bool {
    trie.nodes_walked_below(d) <= ALIKE_ENOUGH_NODES
}

impl LexCache {
    /// Makes `key`'s state, if a single scan, one of the recent states of
    /// its lexeme at `top` that later states are compared with (and copied
    /// from). Its entry goes to `map` unless the byte bound is reached; a
    /// representative without one is passed over.
    pub(super) fn represent(&self, cfg: &Cfg, key: &LexKey, top: u32) {
        if let ([(l, q)], true) = (&key[..], charge(&self.bytes, self.limit, 16)) {
            let mut reps = write(&self.representatives);
            let list = reps.entry((*l, top)).or_default();
            if list.len() == REPRESENTATIVES {
                list.remove(0);
            }
            list.push(*q);
            drop(reps);
            // A block state also stands for its place (`same_place`).
            let dfa = cfg.lexemes[*l as usize].dfa.as_ref();
            if let Some(place) = dfa.and_then(|d| d.block_place(*q)) {
                if charge(&self.bytes, self.limit, 24) {
                    write(&self.places).insert((*l, top, place), *q);
                }
            }
        }
    }

    /// The entry of a representative state equivalent to `key`'s (a single
    /// scan) on every path below `top`: a counted repetition such as a JSON
    /// string's `maxLength` gives a new DFA state per character, but states
    /// with more characters left than the trie is deep walk alike. Else the
    /// entry of the representative that walks alike to the greatest depth,
    /// if that is at least `MIN_ALIKE_DEPTH` (see `nearentry`).
    pub(super) fn equivalent_entry(
        &self,
        cfg: &Cfg,
        trie: &TokenTrie,
        key: &LexKey,
        top: u32,
    ) -> Equivalent {
        let [(l, q)] = key[..] else {
            return Equivalent::None;
        };
        if cfg.lexemes[l as usize].end_forbid.is_some() {
            // Equal residual automata may still differ in end conditions.
            return Equivalent::None;
        }
        let dfa = cfg.lexemes[l as usize]
            .dfa
            .as_ref()
            .expect("scans have DFAs");
        if dfa.is_computed() {
            // An enum's records: its states tell records apart, so searches
            // find nothing, and each steps every byte of every pair.
            return Equivalent::None;
        }
        let height = trie.height(top as usize);
        let mut best = Equivalent::None;
        match self.same_place(dfa, l, q, top, height) {
            Some(Equivalent::Alike(e, d)) if !alike_enough(trie, d) => {
                best = Equivalent::Alike(e, d);
            }
            Some(found) => return found,
            None => {}
        }
        if read(&self.searches).get(&l).is_some_and(|s| s.hopeless()) {
            return best;
        }
        let Some(reps) = read(&self.representatives).get(&(l, top)).cloned() else {
            return best;
        };
        // The most recent first: the state of the token just read is the
        // likeliest to read on alike.
        for r in reps.into_iter().rev() {
            if matches!(best, Equivalent::Alike(_, d) if alike_enough(trie, d)) {
                break;
            }
            // The search stops at this node's height: (length, limit), where
            // a length past the limit means "longer than the limit".
            let known = read(&self.distinguish).get(&(l, r, q)).copied();
            let length = match known {
                Some((n, limit)) if n <= limit || limit as usize >= height => n as usize,
                _ => {
                    // Near the end of a counted repetition a search is long
                    // (a pair per place and copy): its block says enough.
                    let n = match dfa.alike_length(r, q) {
                        n if (MIN_ALIKE_DEPTH..=height).contains(&n) => n,
                        _ => dfa.distinguishing_length(r, q, height, DISTINGUISH_PAIRS),
                    };
                    if charge(&self.bytes, self.limit, 48) {
                        write(&self.distinguish).insert((l, r, q), (n as u32, height as u32));
                        let mut searches = write(&self.searches);
                        let record = searches.entry(l).or_default();
                        match n > height || n >= MIN_ALIKE_DEPTH {
                            true => record.found = true,
                            false => record.failed += 1,
                        }
                    }
                    n
                }
            };
            let better = match best {
                _ if length > height => true,
                Equivalent::Alike(_, d) => length > d,
                _ => length >= MIN_ALIKE_DEPTH,
            };
            if !better {
                continue;
            }
            let Some(e) = read(&self.map).get(&(vec![(l, r)], top)).cloned() else {
                continue;
            };
            if length > height {
                return Equivalent::Same(e, r);
            }
            best = Equivalent::Alike(e, length);
        }
        best
    }

    /// For a state of a long count's block (`key`'s scan of lexeme `l` in
    /// state `q`): the entry of the last state met at the same place of
    /// another copy, which reads every string alike for as many bytes as
    /// the later of the two has copies after it (`ByteDfa::alike_length`,
    /// known without a search); `Same` past `height`. A `format` with a
    /// `maxLength` (an email's, a URL's) moves to another place of its
    /// automaton at nearly every token, so the recent states a search
    /// compares with are at other places, and after three such failures
    /// the lexeme is not searched again: each token walked the whole trie
    /// (0.5 ms). None where no state met has the place, or it is alike for
    /// too few bytes to copy from.
    pub(super) fn same_place(
        &self,
        dfa: &ByteDfa,
        l: u32,
        q: u32,
        top: u32,
        height: usize,
    ) -> Option<Equivalent> {
        let place = dfa.block_place(q)?;
        let r = *read(&self.places).get(&(l, top, place))?;
        let length = dfa.alike_length(r, q);
        if r == q || length < MIN_ALIKE_DEPTH {
            return None;
        }
        let e = read(&self.map).get(&(vec![(l, r)], top)).cloned()?;
        Some(match length > height {
            true => Equivalent::Same(e, r),
            false => Equivalent::Alike(e, length),
        })
    }

    /// The entry of a single scan copied from that of a recent state of its
    /// lexeme that it differs from on few trie nodes (see `divergent`), or
    /// None.
    pub(super) fn divergent(
        &self,
        cfg: &Cfg,
        trie: &TokenTrie,
        words: usize,
        key: &LexKey,
        top: u32,
    ) -> Option<LexEntry> {
        let [(l, q)] = key[..] else { return None };
        if read(&self.copies).get(&l).is_some_and(|c| c.hopeless()) {
            return None;
        }
        let reps = read(&self.representatives).get(&(l, top)).cloned()?;
        // The most recent first: the states of a name read just before.
        for &r in reps.iter().rev() {
            let Some(near) = read(&self.map).get(&(vec![(l, r)], top)).cloned() else {
                continue;
            };
            let copy = entry_from_divergent(
                cfg,
                trie,
                words,
                &near,
                l,
                (q, r),
                top as usize,
                DIVERGENCE_BUDGET,
            );
            if charge(&self.bytes, self.limit, 16) {
                let mut copies = write(&self.copies);
                let record = copies.entry(l).or_default();
                if copy.is_some() {
                    record.made += 1;
                } else {
                    record.failed += 1;
                }
            }
            if copy.is_some() {
                return copy;
            }
        }
        None
    }
}
