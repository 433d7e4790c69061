//! Lark alternations of many strings, lexed as a few trie-shaped lexemes.
//!
//! A rule such as `city: "Paris" | "Lyon" | ...` with 100,000 strings gives
//! Lark 100,000 anonymous terminals, and lowering each to its own lexeme
//! costs a DFA, a rank and a parser scan per string. Under all-splits
//! lexing (GBNF) only the language matters, so `lower` makes such strings
//! one lexeme at once. Lark's longest-match lexing also cares *which*
//! terminal matches, so here grouping must be proved not to change it.
//!
//! **Why a group can be exact.** Lark's lexer tries the terminals it
//! expects in a fixed order (`larkorder`: priority, maximum width, pattern
//! length) and keeps the first that matches. A plain string's rank is
//! `(0, n, n)` for its `n` characters. Take the ranks of every *other*
//! lexeme of the grammar as cut points; between two neighbouring cuts
//! (an open interval) lie only strings, which Lark tries longest first, and
//! two strings of one length never both match at one place. So among the
//! strings of an interval Lark keeps the longest that matches, and
//! relative to every other terminal they all stand on the same side. One
//! lexeme per (rule, interval), a trie of its words, whose rank is the
//! interval's greatest string rank (shared by every group of the interval,
//! so that between groups, as maskpar's lexer does for equal ranks, the
//! longest match wins), reproduces that choice exactly: its own longest
//! match (backing off to the last word end) is the longest word that
//! matches, and its rank compares with every other lexeme's as each of its
//! words' would.
//!
//! **What stays alone.** A string whose rank *is* a cut (another string or
//! pattern of that exact rank exists, e.g. the same string used elsewhere)
//! stays its own lexeme, as before, and so does a string that a pattern of
//! its priority matches whole: Lark then retypes that pattern's match (see
//! `embed_strings` in `lower`), which the per-string machinery handles.
//! Such strings' ranks become cuts too, so every string of that length
//! stays alone. Small alternations (fewer than `MIN_GROUP` strings) are not
//! grouped at all: they cost nothing and keep the plain lowering.

use std::sync::Arc;

use super::larkorder::Rank;
use super::lowered::Lexeme;
use crate::error::Result;
use crate::regex_dfa::{ByteDfa, DEAD};

/// Alternations with fewer plain strings than this are lowered string by
/// string.
pub const MIN_GROUP: usize = 16;

/// The plain strings among one rule's alternatives, waiting for every other
/// lexeme of the grammar to exist (their ranks decide the groups).
pub struct PendingWords {
    pub lhs: u32,
    pub words: Vec<String>,
}

/// How one pending string is lexed.
#[derive(Debug, PartialEq, Eq)]
pub enum Placement {
    /// Its own lexeme, as any string.
    Alone(String),
    /// One lexeme for these strings (a trie), ranked `rank`.
    Group { words: Vec<String>, rank: Rank },
}

/// A plain string's place in Lark's order (priority 0, its width and its
/// text's length both its number of characters).
fn string_rank(w: &str) -> Rank {
    let n = w.chars().count();
    (0, n as u64, n)
}

/// Whether pattern lexeme `p` matches `text` whole (where Lark would retype
/// the pattern's match as the string).
fn matches_whole(p: &Lexeme, text: &str) -> bool {
    p.dfa.as_ref().is_some_and(|d| {
        let q = d.step_bytes(d.start(), text.as_bytes());
        q != DEAD && d.is_accepting(q)
    })
}

/// For each pending alternation, its strings placed alone or in groups
/// (see the module docs); `others` are every other lexeme of the grammar.
pub fn place(pending: &[PendingWords], others: &[Lexeme]) -> Result<Vec<(u32, Placement)>> {
    let mut cuts: Vec<Rank> = others.iter().map(Lexeme::rank).collect();
    let patterns: Vec<&Lexeme> = others
        .iter()
        .filter(|x| !x.literal && x.priority == 0 && x.dfa.is_some())
        .collect();
    for p in pending {
        for w in &p.words {
            crate::budget::charge_n((patterns.len() + 1) * (w.len() + 1))?;
            if patterns.iter().any(|x| matches_whole(x, w)) {
                cuts.push(string_rank(w));
            }
        }
    }
    cuts.sort_unstable();
    cuts.dedup();
    // The interval a rank lies in: the number of cuts below it.
    let interval = |r: &Rank| cuts.partition_point(|c| c < r);
    let mut top: Vec<Option<Rank>> = vec![None; cuts.len() + 1];
    for p in pending {
        for w in &p.words {
            let r = string_rank(w);
            if cuts.binary_search(&r).is_err() {
                let i = interval(&r);
                top[i] = top[i].max(Some(r));
            }
        }
    }
    let mut out = Vec::new();
    for p in pending {
        let mut groups: Vec<Vec<String>> = vec![Vec::new(); cuts.len() + 1];
        for w in &p.words {
            let r = string_rank(w);
            if cuts.binary_search(&r).is_ok() {
                out.push((p.lhs, Placement::Alone(w.clone())));
            } else {
                groups[interval(&r)].push(w.clone());
            }
        }
        for (i, mut words) in groups.into_iter().enumerate() {
            if words.is_empty() {
                continue;
            }
            words.sort_unstable();
            words.dedup();
            let rank = top[i].expect("an interval with words has a top rank");
            out.push((p.lhs, Placement::Group { words, rank }));
        }
    }
    Ok(out)
}

/// The trie DFA of `words` (each non-empty). Lark's leftmost-first choice
/// among strings sorted longest first is the longest word that matches,
/// which is what a longest-match scan of this DFA with back-off finds.
pub fn group_dfa(words: &[String]) -> Result<Option<Arc<ByteDfa>>> {
    let bytes: usize = words.iter().map(String::len).sum();
    crate::budget::charge_n(bytes.saturating_mul(crate::budget::TABLE_TRANSITION))?;
    let refs: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
    Ok(ByteDfa::literals(&refs).map(Arc::new))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfg::{lark, lower};

    fn pending(words: &[&str]) -> Vec<PendingWords> {
        vec![PendingWords {
            lhs: 1,
            words: words.iter().map(|w| w.to_string()).collect(),
        }]
    }

    /// The lexemes a Lark grammar lowers to (its other terminals).
    fn lexemes_of(src: &str) -> Vec<Lexeme> {
        lower::lower(&lark::parse(src).unwrap()).unwrap().lexemes
    }

    #[test]
    fn strings_between_two_patterns_group_by_interval() {
        // /[0-9]/ ranks (0, 1, 5), /[a-z][a-z][a-z]/ (0, 3, 15).
        let others = lexemes_of("start: A B\nA: /[0-9]/\nB: /[a-z][a-z][a-z]/\n");
        let placed = place(&pending(&["X", "XY", "XYZ", "XYZW", "Q"]), &others).unwrap();
        let groups: Vec<(Vec<&str>, Rank)> = placed
            .iter()
            .map(|(_, p)| match p {
                Placement::Group { words, rank } => {
                    (words.iter().map(String::as_str).collect(), *rank)
                }
                Placement::Alone(w) => panic!("{w} alone"),
            })
            .collect();
        assert_eq!(
            groups,
            vec![
                (vec!["Q", "X"], (0, 1, 1)),
                (vec!["XY", "XYZ"], (0, 3, 3)),
                (vec!["XYZW"], (0, 4, 4)),
            ]
        );
    }

    #[test]
    fn strings_of_another_lexemes_rank_or_inside_a_pattern_stay_alone() {
        // "ab" is used on its own; NAME matches "cd" whole, so every
        // two-character string stays alone, and "xyz" groups.
        let others = lexemes_of("start: \"ab\" NAME\nNAME: /[c-d]+/\n");
        let placed = place(&pending(&["ab", "zz", "cd", "xyz", "c"]), &others).unwrap();
        let alone: Vec<&str> = placed
            .iter()
            .filter_map(|(_, p)| match p {
                Placement::Alone(w) => Some(w.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(alone, vec!["ab", "zz", "cd", "c"]);
        assert!(placed.iter().any(|(_, p)| matches!(p,
            Placement::Group { words, .. } if words == &["xyz".to_string()])));
    }

    #[test]
    fn a_groups_dfa_is_the_trie_of_its_words() {
        let words: Vec<String> = ["abc", "a", "b"].iter().map(|w| w.to_string()).collect();
        let d = group_dfa(&words).unwrap().unwrap();
        let accepts = |t: &str| {
            let q = d.step_bytes(d.start(), t.as_bytes());
            q != DEAD && d.is_accepting(q)
        };
        assert!(accepts("abc") && accepts("a") && accepts("b"));
        assert!(!accepts("ab") && !accepts("") && !accepts("abcd"));
    }
}
