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

use super::lower::{Lexeme, Rule, Sym};
use crate::regex_dfa::ByteSet;

/// Per lexeme: whether it may end greedily, and the bytes that can follow
/// it (a greedy lexeme killed by any other byte ends in vain: nothing after
/// it can read that byte).
pub fn greedy_lexemes(
    rules: &[Rule],
    nullable: &[bool],
    lexemes: &[Lexeme],
) -> Vec<(bool, ByteSet)> {
    let lex_first: Vec<ByteSet> = lexemes
        .iter()
        .map(|l| l.dfa.as_ref().map(|d| d.first_bytes()).unwrap_or_default())
        .collect();
    let sym_nullable = |s: &Sym| match *s {
        Sym::T(t) => lexemes[t as usize].nullable(),
        Sym::N(x) | Sym::P(x, _) => nullable[x as usize],
    };
    let mut first = vec![ByteSet::default(); nullable.len()];
    let first_of = |s: &Sym, first: &[ByteSet]| match *s {
        Sym::T(t) => lex_first[t as usize],
        Sym::N(x) | Sym::P(x, _) => first[x as usize],
    };
    loop {
        let mut changed = false;
        for r in rules {
            let mut acc = ByteSet::default();
            for s in &r.rhs {
                acc.union_with(&first_of(s, &first));
                if !sym_nullable(s) {
                    break;
                }
            }
            changed |= first[r.lhs as usize].union_with(&acc);
        }
        if !changed {
            break;
        }
    }
    // FOLLOW of nonterminals; the lexemes' FOLLOW is collected on the last
    // (unchanging) pass, when every nonterminal's is complete.
    let mut follow = vec![ByteSet::default(); nullable.len()];
    let mut lex_follow = vec![ByteSet::default(); lexemes.len()];
    loop {
        let mut changed = false;
        for r in rules {
            let mut trailer = follow[r.lhs as usize];
            for s in r.rhs.iter().rev() {
                match *s {
                    Sym::T(t) => {
                        lex_follow[t as usize].union_with(&trailer);
                    }
                    Sym::N(x) | Sym::P(x, _) => changed |= follow[x as usize].union_with(&trailer),
                }
                if sym_nullable(s) {
                    trailer.union_with(&first_of(s, &first));
                } else {
                    trailer = first_of(s, &first);
                }
            }
        }
        if !changed {
            break;
        }
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
                let run = |cfg: &crate::cfg::lower::Cfg| {
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
