//! What a lexer-only cache entry holds (`lexcache`): the tokens a frontier
//! of scans survives whole, as a dense row, a sparse list, or a shared text
//! slice and a few more; and the boundary nodes below the entry's node,
//! where some lexeme may end and the parser must decide, each with what a
//! fill reads of it (its subtree, its token, its path), so a fill walks
//! them in order instead of missing the cache on the trie per node.

use std::sync::Arc;

use crate::bitmask::{clear_bit, iter_set_bits, set_bit};
use crate::trie::TokenTrie;

/// The lexer-only part of a mask below one trie node.
#[derive(Debug)]
pub struct LexEntry {
    pub(super) inner: TokenSet,
    /// Nodes below the entry's node where some lexeme first (may) end, in
    /// pre-order.
    pub boundary: Vec<BoundaryNode>,
}

/// Path bytes a `BoundaryNode` holds itself.
const SUFFIX_BYTES: usize = 10;
/// `BoundaryNode::suffix_len` of a path too long to hold.
const LONG_SUFFIX: u8 = u8::MAX;
/// `BoundaryNode::token` of a node where no token ends.
pub const NO_TOKEN: u32 = u32::MAX;
/// `BoundaryNode::token` of a node where several tokens end.
pub const MANY_TOKENS: u32 = u32::MAX - 1;

/// A boundary node with what the parser walk reads of it. Read from the
/// trie, each of these was a cache miss per node (its path, its tokens, its
/// subtree) in the slowest masks; here they come in order with the entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BoundaryNode {
    pub node: u32,
    /// The first node after this node's subtree.
    pub subtree_end: u32,
    /// The token that ends at the node, or `NO_TOKEN` / `MANY_TOKENS`.
    pub token: u32,
    /// The path from the entry's node down to this node, if it is at most
    /// `SUFFIX_BYTES` long (else `suffix_len` is `LONG_SUFFIX`).
    suffix: [u8; SUFFIX_BYTES],
    suffix_len: u8,
}

impl BoundaryNode {
    pub(super) fn new(trie: &TokenTrie, top: usize, node: u32) -> Self {
        let n = node as usize;
        let below = &trie.path(n)[trie.depth(top)..];
        let mut suffix = [0u8; SUFFIX_BYTES];
        let suffix_len = if below.len() <= SUFFIX_BYTES {
            suffix[..below.len()].copy_from_slice(below);
            below.len() as u8
        } else {
            LONG_SUFFIX
        };
        let token = match trie.node_tokens(n) {
            [] => NO_TOKEN,
            &[t] if t < MANY_TOKENS => t,
            _ => MANY_TOKENS,
        };
        BoundaryNode {
            node,
            subtree_end: trie.subtree_end(n) as u32,
            token,
            suffix,
            suffix_len,
        }
    }

    /// Nodes below this one (as `TokenTrie::subtree_size`).
    #[inline]
    pub fn subtree_size(&self) -> usize {
        (self.subtree_end - self.node - 1) as usize
    }

    /// The path from the node at `top` (the entry's node) down to this one.
    #[inline]
    pub fn path_below<'t>(&'t self, trie: &'t TokenTrie, top: usize) -> &'t [u8] {
        if self.suffix_len == LONG_SUFFIX {
            &trie.path(self.node as usize)[trie.depth(top)..]
        } else {
            &self.suffix[..self.suffix_len as usize]
        }
    }
}

/// `nodes` below `top` (in pre-order) as boundary nodes.
pub(super) fn boundary_nodes(trie: &TokenTrie, top: usize, nodes: &[u32]) -> Vec<BoundaryNode> {
    nodes
        .iter()
        .map(|&n| BoundaryNode::new(trie, top, n))
        .collect()
}

/// Token ids, dense as a bitmask row when many, sparse when few, or a
/// vocabulary's text slice (shared, a row's first words) and a few more.
#[derive(Debug)]
pub(super) enum TokenSet {
    Dense(Box<[u32]>),
    Sparse(Vec<u32>),
    Sliced { slice: Arc<[u32]>, more: Vec<u32> },
}

impl TokenSet {
    /// A text slice's tokens (`slice`, shared) and `more`: the slice and
    /// the list while the list has fewer ids than a quarter of a row's
    /// words, else one dense row of `words` words. Free text allows most
    /// tokens outside the slice too (those with punctuation: tens of
    /// thousands in Llama-3's vocabulary), and setting them bit by bit in
    /// every mask cost 30-60 us, where copying a row costs one or two; the
    /// 1,300 beside the slice of tokens without `<` cost 3-5 us more per
    /// fill than a row (a structural tag's root, warm: 4.7 -> 10.2 us).
    pub(super) fn sliced(slice: &Arc<[u32]>, more: Vec<u32>, words: usize) -> Self {
        if more.len() < words / 4 {
            return TokenSet::Sliced {
                slice: slice.clone(),
                more,
            };
        }
        let mut bits = vec![0u32; words];
        // A slice's row ends at its last token, within the vocabulary's.
        let n = slice.len().min(words);
        bits[..n].copy_from_slice(&slice[..n]);
        more.iter().for_each(|&t| set_bit(&mut bits, t));
        TokenSet::Dense(bits.into_boxed_slice())
    }

    /// The set of `ids`: a dense row of `words` words, or a list where that
    /// is smaller (one word per token).
    pub(super) fn of_ids(ids: Vec<u32>, words: usize) -> Self {
        if ids.len() >= words {
            let mut bits = vec![0u32; words];
            ids.iter().for_each(|&t| set_bit(&mut bits, t));
            TokenSet::Dense(bits.into_boxed_slice())
        } else {
            TokenSet::Sparse(ids)
        }
    }

    /// The set of the tokens of `row`, a dense row where that is smaller.
    pub(super) fn of_row(row: Vec<u32>) -> Self {
        let count: u32 = row.iter().map(|w| w.count_ones()).sum();
        if count as usize >= row.len() {
            return TokenSet::Dense(row.into_boxed_slice());
        }
        TokenSet::Sparse(iter_set_bits(&row).collect())
    }
}

impl LexEntry {
    /// An entry of the tokens of `row` and boundary nodes `boundary`.
    pub(super) fn of_row(row: Vec<u32>, boundary: Vec<BoundaryNode>) -> Self {
        LexEntry {
            inner: TokenSet::of_row(row),
            boundary,
        }
    }

    /// This entry's tokens without `cleared` (which may hold tokens not in
    /// it) and with `added` (none of which is in it), and boundary
    /// `boundary`: a set of the same kind where the
    /// edits allow (a text slice stays shared unless a token of it is
    /// cleared).
    pub(super) fn edited(
        &self,
        words: usize,
        cleared: &[u32],
        added: &[u32],
        boundary: Vec<BoundaryNode>,
    ) -> Self {
        // The cleared tokens as a row: one read tests a kept token.
        let mut gone = vec![0u32; if cleared.is_empty() { 0 } else { words }];
        cleared.iter().for_each(|&t| set_bit(&mut gone, t));
        // (Rows end early: `gone` when nothing is cleared, a slice at the
        // vocabulary's last token.)
        let has = |row: &[u32], t: u32| {
            row.get(t as usize / 32)
                .is_some_and(|w| w >> (t % 32) & 1 == 1)
        };
        let kept =
            |ids: &[u32]| -> Vec<u32> { ids.iter().copied().filter(|&t| !has(&gone, t)).collect() };
        let inner = match &self.inner {
            TokenSet::Sparse(ids) => {
                let mut ids = kept(ids);
                ids.extend_from_slice(added);
                TokenSet::of_ids(ids, words)
            }
            TokenSet::Sliced { slice, more } if !cleared.iter().any(|&t| has(slice, t)) => {
                let mut more = kept(more);
                more.extend(added.iter().copied().filter(|&t| !has(slice, t)));
                TokenSet::sliced(slice, more, words)
            }
            _ => {
                let mut row = vec![0u32; words];
                self.apply(&mut row, true);
                cleared.iter().for_each(|&t| clear_bit(&mut row, t));
                added.iter().for_each(|&t| set_bit(&mut row, t));
                TokenSet::Dense(row.into_boxed_slice())
            }
        };
        LexEntry { inner, boundary }
    }

    /// Sets this entry's token bits in `row` (which it may overwrite when
    /// `overwrite`, i.e. when the row holds nothing yet).
    pub fn apply(&self, row: &mut [u32], overwrite: bool) {
        match &self.inner {
            TokenSet::Dense(bits) if overwrite => row.copy_from_slice(bits),
            TokenSet::Dense(bits) => row.iter_mut().zip(bits.iter()).for_each(|(r, b)| *r |= b),
            TokenSet::Sparse(ids) => {
                if overwrite {
                    row.fill(0);
                }
                ids.iter().for_each(|&t| set_bit(row, t));
            }
            TokenSet::Sliced { slice, more } => {
                let (head, tail) = row.split_at_mut(slice.len());
                if overwrite {
                    head.copy_from_slice(slice);
                    tail.fill(0);
                } else {
                    head.iter_mut().zip(slice.iter()).for_each(|(r, b)| *r |= b);
                }
                more.iter().for_each(|&t| set_bit(row, t));
            }
        }
    }

    pub(super) fn bytes(&self) -> usize {
        let inner = match &self.inner {
            TokenSet::Dense(b) => b.len(),
            TokenSet::Sparse(v) => v.len(),
            // The slice is the vocabulary's.
            TokenSet::Sliced { more, .. } => more.len() + 4,
        };
        inner * 4 + self.boundary.len() * std::mem::size_of::<BoundaryNode>()
    }
}
