//! Which lexemes of an all-splits grammar may end greedily.
//!
//! All-splits lexing (GBNF's character-level semantics) ends a lexeme at
//! every accepting point, and every such end makes an Earley set: an
//! identifier `[a-z]+` ends after each letter, so a mask walk runs the parser
//! at every trie node below a letter. Ending a lexeme only where the next
//! byte kills it (or where the text ends) keeps the language exactly when no
//! byte that can extend an accepted string of the lexeme can also begin what
//! follows the lexeme anywhere in the grammar: then, in any parse, the byte
//! after the lexeme's end is one the lexeme cannot read, so the greedy
//! reading ends it at the same place. Such lexemes are *greedy*; the rest
//! keep all-splits ends, so the rule is applied per lexeme, and the grammar's
//! language never changes.
//!
//! "What follows" is the classic FOLLOW set over bytes (through nullable
//! lexemes and rules), computed without member-set guards: a superset, so a
//! lexeme may be kept all-splits needlessly, never made greedy wrongly.

use super::lowered::{Lexeme, Rule, Sym};
use crate::regex_dfa::ByteSet;

/// Per lexeme: whether it may end greedily, and the bytes that can follow
/// it (a greedy lexeme killed by any other byte ends in vain: nothing after
/// it can read that byte). `ignored`: the first bytes of text that may come
/// before any lexeme that is not alone and at the end (a longest-match
/// grammar's `%ignore`, for its alone lexemes; empty otherwise).
pub fn greedy_lexemes(
    rules: &[Rule],
    nullable: &[bool],
    lexemes: &[Lexeme],
    ignored: ByteSet,
) -> Vec<(bool, ByteSet)> {
    let lex_first: Vec<ByteSet> = lexemes
        .iter()
        .map(|l| {
            let mut first = l.dfa.as_ref().map(|d| d.first_bytes()).unwrap_or_default();
            if !l.alone {
                first.union_with(&ignored);
            }
            first
        })
        .collect();
    let sym_nullable = |s: &Sym| match *s {
        Sym::T(t) => lexemes[t as usize].nullable(),
        Sym::N(x) | Sym::P(x, _) => nullable[x as usize],
    };
    let first = first_sets(rules, nullable.len(), &lex_first, &sym_nullable);
    let first_of = |s: &Sym| match *s {
        Sym::T(t) => lex_first[t as usize],
        Sym::N(x) | Sym::P(x, _) => first[x as usize],
    };
    // FOLLOW: each symbol gets the FIRST of what comes after it in its rule
    // and, where all of that is nullable, the FOLLOW of the rule's left side.
    let mut follow = vec![ByteSet::default(); nullable.len()];
    // The augmented start rule's: what may come after the text.
    follow[0] = ignored;
    let mut lex_follow = vec![ByteSet::default(); lexemes.len()];
    // inherits[x]: the nonterminals whose FOLLOW includes x's.
    let mut inherits: Vec<Vec<u32>> = vec![Vec::new(); nullable.len()];
    // Lexemes at a nullable end of a rule of x: they get x's FOLLOW.
    let mut lex_inherits: Vec<(u32, u32)> = Vec::new();
    for r in rules {
        let mut trailer = ByteSet::default();
        let mut at_end = true;
        for s in r.rhs.iter().rev() {
            match *s {
                Sym::T(t) => {
                    lex_follow[t as usize].union_with(&trailer);
                    if at_end {
                        lex_inherits.push((r.lhs, t));
                    }
                }
                Sym::N(x) | Sym::P(x, _) => {
                    follow[x as usize].union_with(&trailer);
                    if at_end && x != r.lhs {
                        inherits[r.lhs as usize].push(x);
                    }
                }
            }
            if sym_nullable(s) {
                trailer.union_with(&first_of(s));
            } else {
                trailer = first_of(s);
                at_end = false;
            }
        }
    }
    let mut work: Vec<u32> = (0..nullable.len() as u32).collect();
    while let Some(x) = work.pop() {
        let from = follow[x as usize];
        for &y in &inherits[x as usize] {
            if follow[y as usize].union_with(&from) {
                work.push(y);
            }
        }
    }
    for (x, t) in lex_inherits {
        let from = follow[x as usize];
        lex_follow[t as usize].union_with(&from);
    }
    lexemes
        .iter()
        .zip(lex_follow)
        .map(|(l, follow)| {
            let greedy = l
                .dfa
                .as_ref()
                .is_some_and(|d| !d.bytes_after_accepting().intersects(&follow));
            (greedy, follow)
        })
        .collect()
}

/// FIRST over bytes of each nonterminal, by a worklist: a rule is looked
/// at again only when the FIRST of a symbol in its nullable prefix grew.
fn first_sets(
    rules: &[Rule],
    nonterminals: usize,
    lex_first: &[ByteSet],
    sym_nullable: &dyn Fn(&Sym) -> bool,
) -> Vec<ByteSet> {
    let mut first = vec![ByteSet::default(); nonterminals];
    // used_by[x]: rules whose FIRST reads x's.
    let mut used_by: Vec<Vec<u32>> = vec![Vec::new(); nonterminals];
    for (i, r) in rules.iter().enumerate() {
        for s in &r.rhs {
            if let Sym::N(x) | Sym::P(x, _) = *s {
                used_by[x as usize].push(i as u32);
            }
            if !sym_nullable(s) {
                break;
            }
        }
    }
    let mut work: Vec<u32> = (0..rules.len() as u32).rev().collect();
    while let Some(i) = work.pop() {
        let r = &rules[i as usize];
        let mut acc = ByteSet::default();
        for s in &r.rhs {
            acc.union_with(&match *s {
                Sym::T(t) => lex_first[t as usize],
                Sym::N(x) | Sym::P(x, _) => first[x as usize],
            });
            if !sym_nullable(s) {
                break;
            }
        }
        if first[r.lhs as usize].union_with(&acc) {
            work.extend_from_slice(&used_by[r.lhs as usize]);
        }
    }
    first
}

#[cfg(test)]
mod tests {
    use crate::cfg::earley::Chart;
    use crate::cfg::{gbnf, lower::lower};
    use crate::regex_dfa::tests::all_strings;

    fn flags(src: &str) -> Vec<bool> {
        let cfg = lower(&gbnf::parse(src).unwrap()).unwrap();
        cfg.lexemes.iter().map(|l| l.greedy).collect()
    }

    #[test]
    fn greedy_where_nothing_after_can_read_the_extension() {
        // The identifier is followed by "(" or the end: greedy.
        assert_eq!(flags("root ::= [a-z]+ (\"(\" root)?"), vec![true, true]);
        // Whitespace then optional whitespace: where the first ends is
        // ambiguous, so it keeps every split.
        let f = flags("root ::= \"[\" [ ]* x [ ]* \"]\"\nx ::= \"a\" | \"\"");
        assert!(f.contains(&false), "{f:?}");
    }

    /// Greedy ends change nothing: every string up to 7 bytes is refused,
    /// live or complete exactly as with an end at every accepting point.
    #[test]
    fn greedy_ends_keep_the_language() {
        let grammars = [
            ("root ::= [a-z]+ (\" \" root)?", "ab "),
            ("root ::= [a-z]+ [0-9]* | [a-z]* \"1\"", "a1"),
            ("root ::= x \"b\"\nx ::= [ab]+ | \"\"", "ab"),
            ("root ::= (\"a\" [b]*)* \"c\"?", "abc"),
            (
                "root ::= e\ne ::= e \"+\" e | [0-9]+ | \"(\" e \")\"",
                "1+()",
            ),
            (
                "root ::= \"[\" [ ]* x [ ]* \"]\"\nx ::= \"a\" | \"\"",
                "[ a]",
            ),
            ("root ::= w \"x\" w\nw ::= [ ]*", " x"),
            ("root ::= [a]+ [a]", "a"),
            ("root ::= ([a-b]+ \",\")* [a]?", "ab,"),
        ];
        for (src, alphabet) in grammars {
            let greedy = lower(&gbnf::parse(src).unwrap()).unwrap();
            let mut plain = lower(&gbnf::parse(src).unwrap()).unwrap();
            plain.lexemes.iter_mut().for_each(|l| l.greedy = false);
            assert!(greedy.lexemes.iter().any(|l| l.greedy), "{src}");
            for text in all_strings(alphabet.as_bytes(), 7) {
                let run = |cfg: &crate::cfg::lowered::Cfg| {
                    let mut chart = Chart::new();
                    let st = cfg.initial(&mut chart).unwrap();
                    cfg.advance_bytes(&mut chart, &st, &text)
                        .unwrap()
                        .map(|s| s.accepting)
                };
                assert_eq!(run(&greedy), run(&plain), "{src} on {text:?}");
            }
        }
    }
}
