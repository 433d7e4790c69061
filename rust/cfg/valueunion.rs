//! Many regular alternatives of one rule as one lexeme.
//!
//! Under all-splits lexing only a lexeme's language matters, so a rule's
//! regular alternatives may be one lexeme, their union. For plain strings
//! `lower` already makes that a trie (`literal_words`). An `enum` of arrays
//! or objects is the same kind of thing one step up: each value is fixed
//! text with runs of flexible whitespace between its tokens (and a number's
//! optional `.0`), so 10,000 values are 10,000 sequences of literal parts
//! and a few shared automata. As a lexeme each, every value start would
//! scan 10,000 lexemes and the grammar would pass the lexeme bound; as one
//! regex, the regex compiler takes seconds. `regex_dfa::union_of_sequences`
//! builds their union in time proportional to the text instead.
//!
//! Alternatives are split into parts here: literals stay bytes (stepped
//! without a table), alternations of a few strings (a number's int forms)
//! become small tries, and anything else becomes its automaton through the
//! lexeme cache (the whitespace run, repeated in every value, is built
//! once). When the union would be much larger than its text, some
//! alternatives overlap through their loops; the caller then lowers them
//! one by one, as before.

use std::sync::Arc;

use super::ast::Node;
use super::nodedfa::{composed_part, literal_words};
use crate::error::Result;
use crate::regex_dfa::{union_of_sequences, ByteDfa, SeqPart};

/// A rule needs at least this many regular alternatives (other than plain
/// strings) for them to become one lexeme: fewer cost nothing as they are.
pub const MIN_UNION: usize = 16;

/// Sequences one alternative may spell out (its inner alternations
/// multiplied out: an object of four keys in any order is 24); past it an
/// inner alternation is one automaton part.
const MAX_SPELLINGS: usize = 64;

/// The union of the regular nodes `alts` as one automaton, or None where it
/// is not worth it: it matches the empty string (lexemes are not empty),
/// nothing at all, or grows well past the size of its text (or its table
/// would pass `regex_dfa::DFA_SIZE_LIMIT`).
pub fn union_dfa(alts: &[&Node]) -> Result<Option<ByteDfa>> {
    let mut seqs = Vec::with_capacity(alts.len());
    // A trie of the text: about a state per literal byte, and one per part.
    let mut expected = 0usize;
    for a in alts {
        crate::budget::charge(1)?;
        for parts in spellings(a)? {
            expected += parts
                .iter()
                .map(|p| match p {
                    SeqPart::Bytes(b) => b.len(),
                    SeqPart::Dfa(_) => 1,
                })
                .sum::<usize>();
            seqs.push(parts);
        }
    }
    let Some(dfa) = union_of_sequences(&seqs, expected)? else {
        return Ok(None);
    };
    Ok((!dfa.is_accepting(dfa.start())).then_some(dfa))
}

/// The sequences of parts whose union is regular node `n` (none where it
/// matches nothing).
fn spellings(n: &Node) -> Result<Vec<Vec<SeqPart>>> {
    match n {
        Node::Empty => Ok(vec![Vec::new()]),
        Node::Seq(items) => {
            let mut out: Vec<Vec<SeqPart>> = vec![Vec::new()];
            for item in items {
                let tails = spellings(item)?;
                if out.len() * tails.len() > MAX_SPELLINGS && tails.len() > 1 {
                    // Too many to multiply out: the item is one part.
                    let Some(d) = composed_part(item)? else {
                        return Ok(Vec::new());
                    };
                    out.iter_mut()
                        .for_each(|o| push(o, SeqPart::Dfa(d.clone())));
                    continue;
                }
                out = out
                    .iter()
                    .flat_map(|head| {
                        tails.iter().map(move |tail| {
                            let mut joined = head.clone();
                            tail.iter().for_each(|p| push(&mut joined, p.clone()));
                            joined
                        })
                    })
                    .collect();
                if out.is_empty() {
                    return Ok(out);
                }
            }
            Ok(out)
        }
        Node::Alt(alts) if literal_words(n).is_none() && alts.len() <= MAX_SPELLINGS => {
            let mut out = Vec::new();
            for a in alts {
                out.extend(spellings(a)?);
                if out.len() > MAX_SPELLINGS {
                    return Ok(
                        composed_part(n)?.map_or_else(Vec::new, |d| vec![vec![SeqPart::Dfa(d)]])
                    );
                }
            }
            Ok(out)
        }
        _ => Ok(leaf(n)?.map_or_else(Vec::new, |p| vec![vec![p]])),
    }
}

/// A node that is not a sequence as one part: literals as bytes,
/// alternations of strings as a trie, anything else its automaton.
fn leaf(n: &Node) -> Result<Option<SeqPart>> {
    Ok(Some(match literal_words(n) {
        Some(words) if words.len() == 1 => SeqPart::Bytes(words[0].as_bytes().into()),
        Some(words) => {
            let words: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
            match ByteDfa::literals(&words) {
                Some(d) => SeqPart::Dfa(Arc::new(d)),
                None => return Ok(None),
            }
        }
        None => match composed_part(n)? {
            Some(d) => SeqPart::Dfa(d),
            None => return Ok(None),
        },
    }))
}

/// Appends `part` to `seq`, joining literal runs (fewer parts, fewer
/// triples in each set).
fn push(seq: &mut Vec<SeqPart>, part: SeqPart) {
    match (seq.last_mut(), &part) {
        (Some(SeqPart::Bytes(prev)), SeqPart::Bytes(b)) => {
            let mut joined = prev.to_vec();
            joined.extend_from_slice(b);
            *prev = joined.into();
        }
        _ => seq.push(part),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(s: &str) -> Node {
        Node::Literal(s.into())
    }

    fn matches(d: &ByteDfa, s: &str) -> bool {
        d.is_accepting(d.step_bytes(d.start(), s.as_bytes()))
    }

    #[test]
    fn inner_alternations_are_spelled_out_up_to_the_bound() {
        // (a|bz*)(c|dz*): four spellings (an alternation of strings would be
        // one trie part).
        let pair = |x: &str, y: &str| {
            Node::Alt(vec![
                lit(x),
                Node::Seq(vec![lit(y), Node::Regex("z*".into())]),
            ])
        };
        let n = Node::Seq(vec![pair("a", "b"), pair("c", "d")]);
        let s = spellings(&n).unwrap();
        assert_eq!(s.len(), 4);
        // Seven such pairs (128 spellings): past the bound, later pairs are
        // automata, and the union still matches exactly.
        let long = Node::Seq((0..7).map(|_| pair("a", "b")).collect());
        let s = spellings(&long).unwrap();
        assert!(s.len() <= MAX_SPELLINGS, "{}", s.len());
        let alts: Vec<Node> = (0..MIN_UNION)
            .map(|i| Node::Seq(vec![lit(&format!("{i}:")), long.clone()]))
            .collect();
        let refs: Vec<&Node> = alts.iter().collect();
        let d = union_dfa(&refs).unwrap().expect("a small union");
        assert!(matches(&d, "3:abzzaabbza"));
        assert!(matches(&d, "15:aaaaaab"));
        assert!(!matches(&d, "3:abzzaabbz"));
        assert!(!matches(&d, "3:aaaaaa"));
        assert!(!matches(&d, "16:aaaaaaa"));
    }

    #[test]
    fn a_union_that_matches_the_empty_string_is_not_a_lexeme() {
        let alts: Vec<Node> = (0..MIN_UNION)
            .map(|i| Node::Repeat {
                node: Box::new(lit(&format!("x{i}"))),
                min: 0,
                max: Some(1),
            })
            .collect();
        let refs: Vec<&Node> = alts.iter().collect();
        assert!(union_dfa(&refs).unwrap().is_none());
    }
}
