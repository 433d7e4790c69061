//! The lexer-only trie walks that build `lexcache` entries: only the
//! lexemes' DFAs are stepped, and a walk stops below a node where some
//! lexeme may end (a boundary node, left to the parser). `OneScan` makes
//! the same decisions for a single scan, for the walks of `nearentry` and
//! `divergent`, and `ends_after_accepting` / `backs_off` state the rule
//! that `textreach` judges text by too.

use std::sync::Arc;

use super::ast::Lexing;
use super::lexcache::LexKey;
use super::lexentry::{boundary_nodes, LexEntry, TokenSet};
use super::lowered::{Cfg, Lexeme};
use crate::regex_dfa::{ByteDfa, DEAD};
use crate::slices::TextSlice;
use crate::trie::{TokenTrie, Visit, VisitStepper};

/// Steps only the lexemes' DFAs; stops where one completes.
struct ScanOnly<'a> {
    cfg: &'a Cfg,
    pairs: Vec<(u32, u32)>,
    /// `ends[d]`: end of frame d's pairs in `pairs` (frame d starts at ends[d-1]).
    ends: Vec<usize>,
}

/// Steps the scans `pairs[start..end]` by `byte`, pushing the survivors onto
/// `pairs` (which must end at `end`), and says what a walk does at that node.
fn step_scans(cfg: &Cfg, pairs: &mut Vec<(u32, u32)>, start: usize, byte: u8) -> Visit {
    let end = pairs.len();
    // Where a lexeme may end, the parser decides: stop and leave it to the
    // fill. All-splits lexemes end after a byte they accept, greedy ones
    // before a byte that kills them (whatever the byte: entries are shared
    // by lexemes with different followers, and the fill drops the ends that
    // no follower can read); longest-match ones where no scan takes the
    // byte, or where the scans that take it all stop accepting (back-off),
    // or where one that accepted has a higher rank than one that takes the
    // byte (which then stops: see `Cfg::longest_step`).
    let mut ends = false;
    let mut accepted_before = None;
    let mut accepting_after = false;
    let mut lowest_after = (i32::MAX, u64::MAX, usize::MAX);
    let longest = cfg.lexing == Lexing::Longest;
    for i in start..end {
        let (l, q) = pairs[i];
        let lexeme = &cfg.lexemes[l as usize];
        let dfa = lexeme.dfa.as_ref().expect("scans have DFAs");
        // Ranks order longest-match lexemes only.
        let rank = if longest {
            cfg.rank(l, &pairs[start..end])
        } else {
            (0, 0, 0)
        };
        if dfa.is_accepting(q) {
            accepted_before = accepted_before.max(Some(rank));
        }
        let q2 = dfa.step(q, byte);
        if q2 != DEAD {
            ends |= !lexeme.greedy && dfa.is_accepting(q2);
            accepting_after |= lexeme.ends_unconditionally(dfa, q2)
                && (!longest
                    || cfg.removed_ends_unconditionally(l, &pairs[start..end], byte)
                        != Some(false));
            lowest_after = lowest_after.min(rank);
            pairs.push((l, q2));
        } else {
            ends |= lexeme.greedy && dfa.is_accepting(q);
        }
    }
    let survived = pairs.len() > end;
    let ends = match cfg.lexing {
        Lexing::AllSplits => ends,
        Lexing::Longest => accepted_before.is_some_and(|p| !accepting_after || lowest_after < p),
    };
    if ends {
        Visit::Stop
    } else if survived {
        Visit::Live
    } else {
        Visit::Dead
    }
}

impl VisitStepper for ScanOnly<'_> {
    fn visit(&mut self, depth: usize, byte: u8) -> Visit {
        let start = if depth >= 2 { self.ends[depth - 2] } else { 0 };
        self.pairs.truncate(self.ends[depth - 1]);
        let v = step_scans(self.cfg, &mut self.pairs, start, byte);
        self.ends[depth] = self.pairs.len();
        v
    }
}

/// `build` at the root for a scan that survives every token of `slice`: the
/// same bits and boundary (the boundary nodes all lie on other tokens'
/// paths, which `slice.rest` holds), for a walk of those tokens only.
pub(super) fn build_sliced(
    cfg: &Cfg,
    trie: &TokenTrie,
    words: usize,
    slice: &TextSlice,
    key: &LexKey,
) -> LexEntry {
    build_beside(cfg, trie, words, &slice.bits, slice, key)
}

/// `build` at the root for a scan whose tokens outside `slice.rest` are
/// known: `bits` are allowed, the others are not, and none has a boundary
/// node on its path (a slice's own bits, or `TextSlices::counted`'s for a
/// string near its limit).
pub(super) fn build_beside(
    cfg: &Cfg,
    trie: &TokenTrie,
    words: usize,
    bits: &Arc<[u32]>,
    slice: &TextSlice,
    key: &LexKey,
) -> LexEntry {
    // The bits cover the tokens; padding ids past them stay 0. They are
    // shared, not copied (a copy was 16 KiB of fresh memory per entry),
    // unless more tokens than a row has words come besides them.
    let mut more = Vec::new();
    let mut boundary = Vec::new();
    walk_scans(
        cfg,
        &slice.rest,
        key,
        0,
        |t| more.push(t),
        |n| boundary.push(slice.rest_nodes[n]),
    );
    LexEntry {
        inner: TokenSet::sliced(bits, more, words),
        boundary: boundary_nodes(trie, 0, &boundary),
    }
}

pub(super) fn build(
    cfg: &Cfg,
    trie: &TokenTrie,
    words: usize,
    key: &LexKey,
    top: usize,
) -> LexEntry {
    let mut ids = Vec::new();
    let mut boundary = Vec::new();
    walk_scans(
        cfg,
        trie,
        key,
        top,
        |t| ids.push(t),
        |n| boundary.push(n as u32),
    );
    LexEntry {
        inner: TokenSet::of_ids(ids, words),
        boundary: boundary_nodes(trie, top, &boundary),
    }
}

/// The lexer-only walk of the scans `key` below `top` in `trie`.
fn walk_scans(
    cfg: &Cfg,
    trie: &TokenTrie,
    key: &LexKey,
    top: usize,
    on_token: impl FnMut(u32),
    on_stop: impl FnMut(usize),
) {
    if let [(l, q)] = key[..] {
        // One scan (the common case): a table lookup per node.
        let mut stepper = OneScan::new(cfg, l, q, trie.max_depth());
        trie.walk_visits_split(top, &mut stepper, on_token, on_stop);
    } else {
        let mut ends = vec![0usize; trie.max_depth() + 2];
        ends[0] = key.len();
        let mut stepper = ScanOnly {
            cfg,
            pairs: key.clone(),
            ends,
        };
        trie.walk_visits(top, &mut stepper, on_token, on_stop);
    }
}

/// `ScanOnly` for a single scan: the same decisions as `step_scans`.
#[derive(Clone)]
pub(super) struct OneScan<'a> {
    dfa: &'a ByteDfa,
    lexeme: &'a Lexeme,
    lexing: Lexing,
    /// `ends_after_accepting` for this lexeme.
    ends_after: bool,
    /// `backs_off` for this lexeme.
    backs_off: bool,
    /// `states[d]`: the DFA state after the first `d` bytes.
    states: Vec<u32>,
}

impl<'a> OneScan<'a> {
    /// A walk of lexeme `l` from DFA state `q`, at most `max_depth` bytes deep.
    pub(super) fn new(cfg: &'a Cfg, l: u32, q: u32, max_depth: usize) -> Self {
        let lexeme = &cfg.lexemes[l as usize];
        let mut states = vec![0u32; max_depth + 2];
        states[0] = q;
        OneScan {
            dfa: lexeme.dfa.as_ref().expect("scans have DFAs"),
            lexeme,
            lexing: cfg.lexing,
            ends_after: ends_after_accepting(cfg.lexing, lexeme),
            backs_off: backs_off(cfg.lexing, lexeme),
            states,
        }
    }
}

/// Whether a lexer-only walk stops after every byte that leaves `lexeme`
/// accepting (where the parser decides): all-splits lexemes that are not
/// greedy end there. `cfg::textreach` judges text by the same rule.
pub(crate) fn ends_after_accepting(lexing: Lexing, lexeme: &Lexeme) -> bool {
    lexing == Lexing::AllSplits && !lexeme.greedy
}

/// Whether a lexer-only walk stops where `lexeme` may back off (it accepted,
/// and reads on into a state that may not end): longest-match lexemes do,
/// but not alone ones, which end as under all-splits lexing (see
/// `Lexeme::splits`). `cfg::textreach` judges text by the same rule.
pub(crate) fn backs_off(lexing: Lexing, lexeme: &Lexeme) -> bool {
    lexing == Lexing::Longest && !lexeme.alone
}

impl OneScan<'_> {
    /// Starts the walk over, from DFA state `q`.
    pub(super) fn restart(&mut self, q: u32) {
        self.states[0] = q;
    }

    /// The lexeme's DFA.
    pub(super) fn dfa(&self) -> &ByteDfa {
        self.dfa
    }

    /// What the walk does at a node whose byte takes the scan from `q` to
    /// `q2`: a function of the two states only (see `nearentry`).
    #[inline(always)]
    pub(super) fn decide(&self, q: u32, q2: u32) -> Visit {
        if q2 != DEAD {
            let ends = if self.backs_off {
                self.lexeme.may_back_off(self.dfa, q, q2)
            } else if self.lexeme.splits() {
                // It may end where it accepted, before this byte.
                self.dfa.is_accepting(q)
            } else {
                self.ends_after && self.dfa.is_accepting(q2)
            };
            return if ends { Visit::Stop } else { Visit::Live };
        }
        // A greedy lexeme's end is left to the fill whatever the byte (see
        // `step_scans`).
        let ends_before = match self.lexing {
            Lexing::AllSplits => self.lexeme.greedy && self.dfa.is_accepting(q),
            Lexing::Longest => self.dfa.is_accepting(q),
        };
        if ends_before {
            Visit::Stop
        } else {
            Visit::Dead
        }
    }
}

impl VisitStepper for OneScan<'_> {
    #[inline(always)]
    fn visit(&mut self, depth: usize, byte: u8) -> Visit {
        let q = self.states[depth - 1];
        let q2 = self.dfa.step(q, byte);
        self.states[depth] = q2;
        self.decide(q, q2)
    }
}
