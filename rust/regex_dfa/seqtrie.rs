//! Sequences of parts merged into a trie of tokens.
//!
//! `union_of_sequences` determinizes the union of many sequences, each
//! literal bytes and shared automata in turn. If a position in that union
//! named a sequence, then near the start, where every value is still alive,
//! a set of positions would name every value: an `enum` of 100,000 objects
//! shares its `{ ws "key" ws : ws` prefix, and the dozen sets along it,
//! each of 200,000 positions sorted and hashed, cost more than the rest of
//! the automaton.
//!
//! So the sequences are first merged into a trie whose edges are *tokens*:
//! a byte of a literal, or a whole automaton part (the whitespace run, a
//! number's optional `.0`). Sequences that begin with the same tokens share
//! their nodes, so a prefix shared by all is one path, and a position is a
//! node (every token on the way read), or a node and a state of the
//! automaton part on the edge into it (the part being read). Sets of
//! positions are then as small as the automaton being built needs: one
//! node along the shared prefix, a handful where values are told apart.
//!
//! The trie is built from the sequences sorted by their tokens: each shares
//! with the one before it the longest prefix it shares with any, so nodes
//! are made along one path at a time, with no lookups.

use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use super::{ByteDfa, Result};
use crate::regex_dfa::sequences::SeqPart;

/// No node (an absent child or sibling).
pub const NONE: u32 = u32::MAX;
/// The root: the node before any token.
pub const ROOT: u32 = 0;
/// Tokens below this are bytes; token `PART + i` is automaton part `i`.
const PART: u32 = 256;
/// Budget steps per token flattened and made a node (sorting is charged
/// apart).
const TOKEN_STEPS: usize = 8;

/// The trie. Node `n`'s children are linked through `next_sibling`, those
/// read by a byte from `first_byte[n]`, those read by a part from
/// `first_part[n]`.
pub struct SeqTrie {
    /// The token on the edge into each node (the root's is never read).
    token: Vec<u32>,
    first_byte: Vec<u32>,
    first_part: Vec<u32>,
    next_sibling: Vec<u32>,
    /// Whether some sequence ends at the node.
    ends: Vec<bool>,
    /// The distinct automaton parts, in order of first use.
    parts: Vec<Arc<ByteDfa>>,
    /// The bytes some literal reads.
    literal: [bool; 256],
}

impl SeqTrie {
    /// The trie of `seqs`.
    pub fn new(seqs: &[Vec<SeqPart>]) -> Result<SeqTrie> {
        let mut parts: Vec<Arc<ByteDfa>> = Vec::new();
        let mut part_ids: HashMap<*const ByteDfa, u32> = HashMap::default();
        let mut literal = [false; 256];
        let mut tokens: Vec<u32> = Vec::new();
        let mut spans: Vec<(usize, usize)> = Vec::with_capacity(seqs.len());
        for seq in seqs {
            let at = tokens.len();
            for part in seq {
                match part {
                    SeqPart::Bytes(b) => {
                        b.iter().for_each(|&x| literal[x as usize] = true);
                        tokens.extend(b.iter().map(|&x| u32::from(x)));
                    }
                    SeqPart::Dfa(d) => {
                        let fresh = parts.len() as u32;
                        let id = *part_ids.entry(Arc::as_ptr(d)).or_insert(fresh);
                        if id == fresh {
                            parts.push(d.clone());
                        }
                        tokens.push(PART + id);
                    }
                }
            }
            spans.push((at, tokens.len() - at));
        }
        // Sorting compares up to every token of a sequence, about log2(n)
        // times per sequence.
        let levels = (usize::BITS - spans.len().leading_zeros()) as usize;
        crate::budget::charge_n((tokens.len() + spans.len()).saturating_mul(TOKEN_STEPS + levels))?;
        if tokens.len() >= NONE as usize {
            // Node ids are u32 (callers bound the text far below this).
            return Err(crate::error::Error::LimitExceeded(
                "alternatives with more than 2^32 tokens".into(),
            ));
        }
        let of = |&(at, len): &(usize, usize)| &tokens[at..at + len];
        spans.sort_unstable_by(|a, b| of(a).cmp(of(b)));
        let mut trie = SeqTrie {
            token: vec![NONE],
            first_byte: vec![NONE],
            first_part: vec![NONE],
            next_sibling: vec![NONE],
            ends: vec![false],
            parts,
            literal,
        };
        // `path[i]` is the node after the first `i` tokens of the sequence
        // before; a sequence keeps the part of the path it shares.
        let mut path = vec![ROOT];
        let mut previous: &[u32] = &[];
        for span in &spans {
            let seq = of(span);
            let shared = seq.iter().zip(previous).take_while(|(a, b)| a == b).count();
            path.truncate(shared + 1);
            for &t in &seq[shared..] {
                let parent = *path.last().expect("the path holds the root");
                path.push(trie.add_child(parent, t));
            }
            trie.ends[*path.last().expect("the path holds the root") as usize] = true;
            previous = seq;
        }
        Ok(trie)
    }

    fn add_child(&mut self, parent: u32, token: u32) -> u32 {
        let node = self.token.len() as u32;
        let first = if token < PART {
            &mut self.first_byte[parent as usize]
        } else {
            &mut self.first_part[parent as usize]
        };
        let sibling = std::mem::replace(first, node);
        self.token.push(token);
        self.first_byte.push(NONE);
        self.first_part.push(NONE);
        self.next_sibling.push(sibling);
        self.ends.push(false);
        node
    }

    pub fn len(&self) -> usize {
        self.token.len()
    }

    /// Whether some sequence ends at `node`.
    pub fn ends(&self, node: u32) -> bool {
        self.ends[node as usize]
    }

    /// The byte on the edge into `node`, a child by a byte.
    pub fn byte(&self, node: u32) -> u8 {
        debug_assert!(self.token[node as usize] < PART);
        self.token[node as usize] as u8
    }

    /// The automaton on the edge into `node`, a child by a part.
    pub fn part(&self, node: u32) -> &ByteDfa {
        &self.parts[(self.token[node as usize] - PART) as usize]
    }

    /// `node`'s children by a byte.
    pub fn byte_children(&self, node: u32) -> Siblings<'_> {
        Siblings {
            trie: self,
            next: self.first_byte[node as usize],
        }
    }

    /// `node`'s children by an automaton part.
    pub fn part_children(&self, node: u32) -> Siblings<'_> {
        Siblings {
            trie: self,
            next: self.first_part[node as usize],
        }
    }

    /// The distinct automaton parts.
    pub fn parts(&self) -> &[Arc<ByteDfa>] {
        &self.parts
    }

    /// Whether some literal reads `byte`.
    pub fn literal(&self, byte: u8) -> bool {
        self.literal[byte as usize]
    }
}

/// A node's children of one kind.
pub struct Siblings<'a> {
    trie: &'a SeqTrie,
    next: u32,
}

impl Iterator for Siblings<'_> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        let node = self.next;
        if node == NONE {
            return None;
        }
        self.next = self.trie.next_sibling[node as usize];
        Some(node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(s: &str) -> SeqPart {
        SeqPart::Bytes(s.as_bytes().into())
    }

    /// The sequences the trie spells: each path to a node that ends, as
    /// text with an automaton part written `<i>`.
    fn spelled(t: &SeqTrie) -> Vec<String> {
        let mut out = Vec::new();
        let mut stack = vec![(ROOT, String::new())];
        while let Some((n, text)) = stack.pop() {
            if t.ends(n) {
                out.push(text.clone());
            }
            for c in t.byte_children(n) {
                stack.push((c, format!("{text}{}", t.byte(c) as char)));
            }
            for c in t.part_children(n) {
                let i = t.parts().iter().position(|p| std::ptr::eq(&**p, t.part(c)));
                stack.push((c, format!("{text}<{}>", i.unwrap())));
            }
        }
        out.sort();
        out
    }

    #[test]
    fn shared_prefixes_share_nodes() {
        let ws = Arc::new(ByteDfa::new(" *").unwrap());
        let other = Arc::new(ByteDfa::new("x?").unwrap());
        let seqs = vec![
            vec![bytes("{"), SeqPart::Dfa(ws.clone()), bytes("\"a\":1}")],
            vec![bytes("{"), SeqPart::Dfa(ws.clone()), bytes("\"a\":22}")],
            vec![bytes("{"), SeqPart::Dfa(other.clone()), bytes("}")],
            vec![bytes("{"), SeqPart::Dfa(ws.clone()), bytes("\"a\":1}")],
            vec![bytes("{"), bytes(""), SeqPart::Dfa(ws.clone())],
            vec![],
        ];
        let t = SeqTrie::new(&seqs).unwrap();
        assert_eq!(
            spelled(&t),
            ["", "{<0>", "{<0>\"a\":1}", "{<0>\"a\":22}", "{<1>}"]
        );
        // root, "{", <0>, "a":, 1}, 22}, <1>, }: shared nodes made once.
        assert_eq!(t.len(), 1 + 1 + 1 + 4 + 2 + 3 + 1 + 1);
        assert_eq!(t.parts().len(), 2);
        assert!(t.literal(b'"') && !t.literal(b' ') && !t.literal(b'x'));
    }
}
