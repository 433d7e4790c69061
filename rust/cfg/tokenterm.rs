//! Token terminals: grammar symbols that read exactly one whole token by id.
//!
//! Everywhere else a grammar is lexemes over bytes, and a token is read as
//! its bytes. Special tokens have no text, so no byte lexeme can ever read
//! them; and some formats (llguidance's `<[id]>`, xgrammar's token-level
//! structural tags) constrain token *ids*, text tokens included. A token
//! terminal (`Node::Tokens`, lowered to a lexeme with a `TokenSet` and no
//! DFA) is such a symbol: it matches one token whose id is in its set (or,
//! complemented, any token whose id is not; EOS and padding ids never
//! match a complement, and EOS keeps its own rule where a grammar does not
//! name it).
//!
//! **Where a token terminal is expected.** A token starts only at a token
//! boundary, so the question is which Earley items "wait here" when the
//! bytes read so far end exactly at the boundary. Two kinds of items do:
//!
//! - items of sets made at this very position: the initial set, the set a
//!   token terminal just made, and (all-splits lexing) the set made where a
//!   lexeme ended after the token's last byte. `CfgState::tokens` lists the
//!   token terminals those sets predict;
//! - items that wait behind a lexeme still being read, which would end here
//!   if nothing more were read: greedy all-splits lexemes in an accepting
//!   state, and every longest-match branch whose scans may end (the same
//!   ends `accepts_at_end` takes at the end of the text, guards included).
//!   A whole token is not a byte that extends them, so reading a token
//!   terminal ends them first, exactly as the end of the text would.
//!   These *pending ends* are computed when asked (`pending_token_ends`),
//!   never stored.
//!
//! A text token may be readable both as bytes (extending lexemes) and as a
//! token terminal (an `exclude_token` set). Both readings are taken: the
//! state after it is the union of the two (its frontier, expected tokens
//! and acceptance), which is what an Earley parser does with any ambiguity.
//! An EOS id that a grammar names is read as that symbol where it is
//! expected (the matcher does not terminate); elsewhere EOS is allowed
//! exactly where the text may end, as always.
//!
//! **Masks.** The bits of text tokens read as bytes come from the trie walk
//! as before (and from the fill memo: the text part of a row depends only on
//! the byte frontier and the chart). The expected token terminals' ids are
//! OR'd into the row afterwards, at every fill, so the memo never keeps
//! them. A byte walk below the trie root never meets a token terminal: a
//! token starts only at the root. Where a token's last byte ends a lexeme
//! and the new set waits only for token terminals, the token is live (the
//! walk counts such a set as live, as the parser step does).

use std::sync::Arc;

use super::ast::{Lexing, Node, TokenSet};
use super::earley::{CfgState, Chart, ChartRead, EarleySet, Extended, Scan};
use super::longest::branches;
use super::lowered::{Cfg, Sym};
use crate::bitmask::set_bit;
use crate::error::Result;

/// How a token terminal appears in errors and debug output.
pub fn describe(set: &TokenSet) -> String {
    let ranges: Vec<String> = set
        .ranges
        .iter()
        .map(|&(lo, hi)| {
            if lo == hi {
                lo.to_string()
            } else {
                format!("{lo}-{hi}")
            }
        })
        .collect();
    format!(
        "<[{}{}]>",
        if set.negated { "^" } else { "" },
        ranges.join(",")
    )
}

/// Whether `n` holds a token terminal anywhere.
pub fn holds_tokens(n: &Node) -> bool {
    match n {
        Node::Tokens(_) => true,
        Node::Seq(v) | Node::Alt(v) | Node::Intersect(v) => v.iter().any(holds_tokens),
        Node::Repeat { node, .. } => holds_tokens(node),
        Node::Minus(a, b) => holds_tokens(a) || holds_tokens(b),
        _ => false,
    }
}

/// Which ids a token set matches in a vocabulary of `num_tokens` ids
/// (padding above) whose EOS ids are `eos` (sorted).
pub struct TokenDomain<'a> {
    pub num_tokens: u32,
    pub eos: &'a [u32],
}

impl TokenDomain<'_> {
    /// Whether `set` matches token `id`.
    pub fn matches(&self, set: &TokenSet, id: u32) -> bool {
        if id >= self.num_tokens {
            return false;
        }
        if set.negated {
            !set.lists(id) && self.eos.binary_search(&id).is_err()
        } else {
            set.lists(id)
        }
    }

    /// Sets the bits of every id `set` matches in `row`.
    pub fn or_into(&self, set: &TokenSet, row: &mut [u32]) {
        let n = self.num_tokens;
        if !set.negated {
            for &(lo, hi) in &set.ranges {
                if lo < n {
                    set_range(row, lo, hi.min(n - 1));
                }
            }
            return;
        }
        // The gaps between the listed ids and the EOS ids.
        let mut excluded: Vec<(u32, u32)> = set.ranges.clone();
        excluded.extend(self.eos.iter().map(|&e| (e, e)));
        let excluded = TokenSet::new(excluded, false).ranges;
        let mut next = 0u32;
        for (lo, hi) in excluded {
            if lo > next && next < n {
                set_range(row, next, (lo - 1).min(n - 1));
            }
            next = next.max(hi.saturating_add(1));
            if hi == u32::MAX {
                return;
            }
        }
        if next < n {
            set_range(row, next, n - 1);
        }
    }
}

/// Sets bits `lo..=hi` of `row` (a whole word at a time inside the range).
fn set_range(row: &mut [u32], lo: u32, hi: u32) {
    let mut t = lo;
    while t <= hi {
        if t % 32 == 0 && hi - t >= 31 {
            row[(t / 32) as usize] = u32::MAX;
            t += 32;
        } else {
            set_bit(row, t);
            t += 1;
        }
    }
}

impl Cfg {
    /// The token terminals `set` (set number `at`) predicts, as scans.
    pub fn token_scans(&self, set: &EarleySet, at: u32) -> Vec<Scan> {
        if !self.has_tokens {
            return Vec::new();
        }
        let mut out: Vec<Scan> = set
            .items
            .iter()
            .filter_map(
                |it| match self.rules[it.rule as usize].rhs.get(it.dot as usize) {
                    Some(&Sym::T(l)) if self.lexemes[l as usize].tokens.is_some() => Some(Scan {
                        lexeme: l,
                        state: 0,
                        origin: at,
                    }),
                    _ => None,
                },
            )
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Whether `set` predicts some token terminal.
    pub fn waits_for_tokens(&self, set: &EarleySet) -> bool {
        self.has_tokens
            && set.items.iter().any(|it| {
                matches!(self.rules[it.rule as usize].rhs.get(it.dot as usize),
                    Some(&Sym::T(l)) if self.lexemes[l as usize].tokens.is_some())
            })
    }

    /// The pending ends at `st` (see the module docs): the sets that ending
    /// the lexemes still being read would make, numbered from `first` on
    /// top of `chart`'s first `first` sets, and the token terminals those
    /// sets predict.
    pub fn pending_token_ends(
        &self,
        chart: &(impl ChartRead + ?Sized),
        st: &CfgState,
        first: u32,
    ) -> Result<(Vec<EarleySet>, Vec<Scan>)> {
        let mut made: Vec<EarleySet> = Vec::new();
        let mut tokens: Vec<Scan> = Vec::new();
        if !self.has_tokens || st.frontier.is_empty() {
            return Ok((made, tokens));
        }
        let mut ends: Vec<(Vec<(u32, u32)>, u32)> = Vec::new();
        match self.lexing {
            Lexing::AllSplits => {
                let ended = self.greedy_done(&st.frontier);
                if !ended.is_empty() {
                    ends.push((ended, 0));
                }
            }
            Lexing::Longest => {
                for (o, group) in branches(self, &st.frontier) {
                    if self.guards_end(&group) {
                        continue;
                    }
                    let (lexemes, width, _) = self.longest_ends(&group, None);
                    if !lexemes.is_empty() {
                        ends.push((lexemes.iter().map(|&l| (l, o)).collect(), width));
                    }
                }
            }
        }
        for (ended, width) in ends {
            let at = first + made.len() as u32;
            let view = Extended {
                base: chart,
                len: first,
                ext: &made,
            };
            // No indenter (lowering refuses one next to token terminals),
            // so a completion makes exactly one set.
            let c = self.complete_lexemes(&view, at, &ended, width)?;
            tokens.extend(self.token_scans(&c.set, at));
            made.push(c.set);
        }
        Ok((made, tokens))
    }

    /// Every token terminal expected at `st` (lexeme ids, sorted, each once).
    pub fn expected_token_lexemes(
        &self,
        chart: &(impl ChartRead + ?Sized),
        st: &CfgState,
    ) -> Result<Vec<u32>> {
        if !self.has_tokens {
            return Ok(Vec::new());
        }
        let (_, pending) = self.pending_token_ends(chart, st, st.sets)?;
        let mut out: Vec<u32> = st.tokens.iter().chain(&pending).map(|s| s.lexeme).collect();
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }

    /// The state after reading token `id` as a token terminal (`matches`
    /// says which sets take it), or None (chart left as it was) if no
    /// expected token terminal takes it. New sets go on top of `chart`,
    /// whatever it holds above `st`'s sets.
    pub fn read_token(
        &self,
        chart: &mut Chart,
        st: &CfgState,
        matches: impl Fn(&TokenSet) -> bool,
    ) -> Result<Option<CfgState>> {
        if !self.has_tokens {
            return Ok(None);
        }
        let before = chart.len();
        let first = before as u32;
        let takes = |s: &&Scan| {
            self.lexemes[s.lexeme as usize]
                .tokens
                .as_ref()
                .is_some_and(&matches)
        };
        let (made, pending) = self.pending_token_ends(&*chart, st, first)?;
        let done: Vec<(u32, u32)> = st
            .tokens
            .iter()
            .chain(&pending)
            .filter(takes)
            .map(|s| (s.lexeme, s.origin))
            .collect();
        if done.is_empty() {
            return Ok(None);
        }
        chart.extend(made.into_iter().map(Arc::new));
        let cur = chart.len() as u32;
        let kernel = self.scanned(&*chart, &done);
        let result = self.closure(&*chart, cur, kernel);
        let (set, frontier, accepting) = match result {
            Ok(x) => x,
            Err(e) => {
                chart.truncate(before);
                return Err(e);
            }
        };
        let tokens = self.token_scans(&set, cur);
        chart.push(Arc::new(set));
        Ok(Some(CfgState {
            sets: cur + 1,
            frontier,
            accepting,
            tokens,
        }))
    }
}

/// The state after a token read both as bytes (`a`, whose sets come first
/// in the chart) and as a token terminal (`b`): both readings' scans,
/// expected tokens and acceptance.
pub fn union(a: CfgState, b: CfgState) -> CfgState {
    let mut frontier = a.frontier;
    frontier.extend(b.frontier);
    frontier.sort_unstable();
    frontier.dedup();
    let mut tokens = a.tokens;
    tokens.extend(b.tokens);
    tokens.sort_unstable();
    tokens.dedup();
    CfgState {
        sets: a.sets.max(b.sets),
        frontier,
        accepting: a.accepting || b.accepting,
        tokens,
    }
}

#[cfg(test)]
#[path = "tokenterm_tests.rs"]
mod tests;
