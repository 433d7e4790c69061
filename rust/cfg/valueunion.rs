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
use crate::regex_dfa::{union_may_fit, union_of_sequences, ByteDfa, SeqPart};

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
    let mut parts = Parts::default();
    for a in alts {
        crate::budget::charge(1)?;
        for spelled in parts.spellings(a)? {
            expected += spelled
                .iter()
                .map(|p| match p {
                    SeqPart::Bytes(b) => b.len(),
                    SeqPart::Dfa(_) => 1,
                })
                .sum::<usize>();
            seqs.push(spelled);
        }
        if !union_may_fit(expected) {
            return Ok(None); // past the size bound already: spell no more
        }
    }
    let Some(dfa) = union_of_sequences(&seqs, expected)? else {
        return Ok(None);
    };
    Ok((!dfa.is_accepting(dfa.start())).then_some(dfa))
}

/// Splits nodes into parts, remembering the automata of the last few
/// distinct non-literal leaves: every value repeats the same whitespace
/// run and number tail, and looking each up in the process-wide cache
/// would spell its regex each time.
#[derive(Default)]
struct Parts {
    recent: Vec<(Node, Arc<ByteDfa>)>,
}

/// Automaton leaves `Parts` remembers.
const RECENT_PARTS: usize = 8;

impl Parts {
    /// The sequences of parts whose union is regular node `n` (none where
    /// it matches nothing).
    fn spellings(&mut self, n: &Node) -> Result<Vec<Vec<SeqPart>>> {
        let mut out = vec![Vec::new()];
        self.spell_into(n, &mut out)?;
        Ok(out)
    }

    /// Each sequence of `out` followed by each spelling of `n`: with one
    /// spelling (most nodes) appended in place, so a value costs an
    /// allocation per part, not per node.
    fn spell_into(&mut self, n: &Node, out: &mut Vec<Vec<SeqPart>>) -> Result<()> {
        match n {
            Node::Empty => {}
            Node::Seq(items) => {
                for item in items {
                    self.spell_into(item, out)?;
                    if out.is_empty() {
                        break;
                    }
                }
            }
            Node::Alt(alts)
                if literal_words(n).is_none()
                    && out.len().saturating_mul(alts.len()) <= MAX_SPELLINGS =>
            {
                let heads = std::mem::take(out);
                for a in alts {
                    let mut spelled = heads.clone();
                    self.spell_into(a, &mut spelled)?;
                    out.append(&mut spelled);
                    if out.len() > MAX_SPELLINGS {
                        // Too many to multiply out: the node is one part.
                        *out = heads;
                        return self.append_part(composed_part(n)?.map(SeqPart::Dfa), out);
                    }
                }
            }
            Node::Alt(_) if literal_words(n).is_none() => {
                return self.append_part(composed_part(n)?.map(SeqPart::Dfa), out);
            }
            _ => {
                let part = self.leaf(n)?;
                return self.append_part(part, out);
            }
        }
        Ok(())
    }

    /// `part` after each sequence of `out` (None: no string, so none are
    /// left).
    fn append_part(&mut self, part: Option<SeqPart>, out: &mut Vec<Vec<SeqPart>>) -> Result<()> {
        let Some(part) = part else {
            out.clear();
            return Ok(());
        };
        if let Some((last, rest)) = out.split_last_mut() {
            for o in rest {
                push(o, part.clone());
            }
            push(last, part);
        }
        Ok(())
    }

    /// A node that is not a sequence as one part: literals as bytes,
    /// alternations of strings as a trie, anything else its automaton.
    fn leaf(&mut self, n: &Node) -> Result<Option<SeqPart>> {
        if let Node::Literal(s) = n {
            return Ok(Some(SeqPart::Bytes(s.as_bytes().to_vec())));
        }
        if let Some((_, d)) = self.recent.iter().find(|(m, _)| m == n) {
            return Ok(Some(SeqPart::Dfa(d.clone())));
        }
        let d = match literal_words(n) {
            Some(words) if words.len() == 1 => {
                return Ok(Some(SeqPart::Bytes(words[0].as_bytes().to_vec())))
            }
            Some(words) => {
                let words: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
                match ByteDfa::literals(&words) {
                    Some(d) => Arc::new(d),
                    None => return Ok(None),
                }
            }
            None => match composed_part(n)? {
                Some(d) => d,
                None => return Ok(None),
            },
        };
        if self.recent.len() == RECENT_PARTS {
            self.recent.remove(0);
        }
        self.recent.push((n.clone(), d.clone()));
        Ok(Some(SeqPart::Dfa(d)))
    }
}

/// Appends `part` to `seq`, joining literal runs (fewer parts, fewer
/// triples in each set).
fn push(seq: &mut Vec<SeqPart>, part: SeqPart) {
    match (seq.last_mut(), part) {
        (Some(SeqPart::Bytes(prev)), SeqPart::Bytes(b)) => prev.extend_from_slice(&b),
        (_, part) => seq.push(part),
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
        let s = Parts::default().spellings(&n).unwrap();
        assert_eq!(s.len(), 4);
        // Seven such pairs (128 spellings): past the bound, later pairs are
        // automata, and the union still matches exactly.
        let long = Node::Seq((0..7).map(|_| pair("a", "b")).collect());
        let s = Parts::default().spellings(&long).unwrap();
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
