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
    mut on_token: impl FnMut(u32),
    mut on_stop: impl FnMut(usize),
) {
    if let [(l, q)] = key[..] {
        // One scan (the common case): a table lookup per node, after the
        // path of its forced bytes.
        let mut stepper = OneScan::new(cfg, l, q, trie.max_depth());
        if let Some((node, q)) = stepper.follow_forced(trie, top, q, &mut on_token, &mut on_stop) {
            stepper.restart(q);
            trie.walk_visits_split(node, &mut stepper, on_token, on_stop);
        }
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
    /// Follows the bytes the scan must read next from `top` in state `q`
    /// (one live byte per state: inside a literal, such as a key or a tag),
    /// reporting what a walk would on that path: a walk also steps every
    /// sibling off it, all dead, which at a shallow node are a few hundred
    /// table lookups for nothing. Returns the node and DFA state where the
    /// path has more than one way on (a walk from there finishes), or None
    /// where the walk has ended (no token goes on, or the scan stops).
    fn follow_forced(
        &self,
        trie: &TokenTrie,
        top: usize,
        mut q: u32,
        on_token: &mut impl FnMut(u32),
        on_stop: &mut impl FnMut(usize),
    ) -> Option<(usize, u32)> {
        let mut node = top;
        // A forced byte's state is not accepting, so every other byte is
        // dead there (`decide`), and the byte itself leads to a live state.
        while let Some(byte) = self.dfa.forced_byte(q) {
            let child = trie.child(node, byte)?;
            let q2 = self.dfa.step(q, byte);
            match self.decide(q, q2) {
                Visit::Live => trie.node_tokens(child).iter().for_each(|&t| on_token(t)),
                Visit::Stop => {
                    on_stop(child);
                    return None;
                }
                Visit::Dead => return None,
            }
            (node, q) = (child, q2);
        }
        Some((node, q))
    }

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfg::{gbnf, lark, lower::lower};
    use crate::vocab::testing::random_vocab;

    /// The walk without the forced path: every node below `top` visited.
    fn plain(cfg: &Cfg, trie: &TokenTrie, l: u32, q: u32, top: usize) -> (Vec<u32>, Vec<usize>) {
        let (mut ids, mut stops) = (Vec::new(), Vec::new());
        let mut stepper = OneScan::new(cfg, l, q, trie.max_depth());
        trie.walk_visits(top, &mut stepper, |t| ids.push(t), |n| stops.push(n));
        ids.sort_unstable();
        stops.sort_unstable();
        (ids, stops)
    }

    fn with_forced_path(
        cfg: &Cfg,
        trie: &TokenTrie,
        l: u32,
        q: u32,
        top: usize,
    ) -> (Vec<u32>, Vec<usize>) {
        let (mut ids, mut stops) = (Vec::new(), Vec::new());
        walk_scans(
            cfg,
            trie,
            &vec![(l, q)],
            top,
            |t| ids.push(t),
            |n| stops.push(n),
        );
        ids.sort_unstable();
        stops.sort_unstable();
        (ids, stops)
    }

    /// Every state of every lexeme (those reachable over the alphabet), at
    /// the root and at nodes below it: the walk that follows forced bytes
    /// first reports what the plain walk does. Returns how many of the
    /// cases had a forced byte to follow.
    fn check(cfg: &Cfg, alphabet: &[u8]) -> usize {
        let vocab = random_vocab(alphabet, 900, 30, 11);
        let trie = vocab.trie();
        let tops: Vec<usize> = [&b""[..], b"a", b"ab", b"<", b"abc"]
            .iter()
            .filter_map(|p| {
                let (node, depth, _) = trie.follow(p);
                (depth == p.len()).then_some(node)
            })
            .collect();
        let mut forced = 0;
        for (l, lexeme) in cfg.lexemes.iter().enumerate() {
            let Some(dfa) = lexeme.dfa.as_ref() else {
                continue;
            };
            let (mut seen, mut todo) = (vec![dfa.start()], vec![dfa.start()]);
            while let Some(q) = todo.pop() {
                forced += dfa.forced_byte(q).is_some() as usize;
                for &top in &tops {
                    let want = plain(cfg, trie, l as u32, q, top);
                    let got = with_forced_path(cfg, trie, l as u32, q, top);
                    assert_eq!(got, want, "lexeme {l} state {q} top {top}");
                }
                for &b in alphabet {
                    let q2 = dfa.step(q, b);
                    if q2 != DEAD && !seen.contains(&q2) {
                        seen.push(q2);
                        todo.push(q2);
                    }
                }
            }
        }
        forced
    }

    #[test]
    fn the_forced_path_reports_what_the_whole_walk_does() {
        let grammars = [
            r#"root ::= "abcab<" [a-c]* ">" | "ab" "c" | "<" ("ab")+ "c>""#,
            r#"root ::= "aaab" | "aa" [bc] "cab<<" | "a"+"#,
        ];
        for g in grammars {
            let cfg = lower(&gbnf::parse(g).unwrap()).unwrap();
            assert!(check(&cfg, b"abc<>") > 10, "{g}");
        }
        // Longest-match lexing (Lark), where literals compete with a regex.
        let g = "start: A | B | C\nA: \"abcab<\"\nB: /a[abc]*>/\nC: \"<ab\" \"c>\"";
        let cfg = lower(&lark::parse(g).unwrap()).unwrap();
        assert!(check(&cfg, b"abc<>") > 5);
    }
}
