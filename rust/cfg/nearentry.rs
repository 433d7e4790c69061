//! The lexer-only entry of a state from that of a state that walks alike to
//! some depth.
//!
//! A string with `maxLength` and a `pattern` has a DFA state per character
//! read. States with more characters left than the trie is deep walk alike,
//! so they share one entry (`LexCache::equivalent_entry`). Nearer the limit
//! each state is new, and its entry was a walk of the whole trie: 6-10 ms
//! per token in Llama-3's 275,000 nodes, for every token of the string's
//! last hundred characters, where the vocabulary's text slices
//! (`crate::slices`) do not apply because the pattern forbids some text
//! characters.
//!
//! **Why a shallow part can be copied.** A single scan's lexer-only walk
//! (`lexcache::OneScan`) decides at a trie node from the DFA states before
//! and after the node's byte: whether each is dead, and whether each
//! accepts. If no string shorter than `d` bytes tells states `r` and `q`
//! apart (`ByteDfa::distinguishing_length`), the walks from `r` and from `q`
//! decide alike at every node less than `d` bytes below the entry's node:
//! the same tokens there are allowed, the same nodes are boundary nodes, the
//! same subtrees are skipped. So `q`'s entry is `r`'s for the tokens shorter
//! than that and the boundary nodes that shallow, plus a walk from `q` of
//! the deeper nodes only (`TokenTrie::walk_visits_below`, which steps a
//! shallow node only on the way to a deeper one). In Llama-3's trie 8% of
//! the nodes are 12 bytes deep or more, 34% 8 or more.

use super::lexcache::{BoundaryNode, LexEntry, OneScan};
use super::lower::Cfg;
use crate::trie::TokenTrie;

/// Below this depth the nodes below it are too much of the trie for the
/// copy to save a walk worth its cost.
pub const MIN_ALIKE_DEPTH: usize = 8;

/// The entry at node `top` of a single scan of lexeme `l` in DFA state `q`,
/// from `alike`, the entry there of a state that no string shorter than
/// `depth` bytes tells apart from `q`.
pub fn entry_from_alike(
    cfg: &Cfg,
    trie: &TokenTrie,
    words: usize,
    alike: &LexEntry,
    (l, q): (u32, u32),
    top: usize,
    depth: usize,
) -> LexEntry {
    let base = trie.depth(top);
    let mut row = vec![0u32; words];
    alike.apply(&mut row, true);
    // Its tokens `depth` or more bytes below `top` are decided anew.
    for &t in trie.tokens_at_least(base + depth) {
        row[(t >> 5) as usize] &= !(1u32 << (t & 31));
    }
    let mut deep_stops = Vec::new();
    let mut stepper = OneScan::new(cfg, l, q, trie.max_depth());
    trie.walk_visits_below(
        top,
        depth,
        &mut stepper,
        |t| row[(t >> 5) as usize] |= 1u32 << (t & 31),
        |n| deep_stops.push(BoundaryNode::new(trie, top, n as u32)),
    );
    // Both lists are in pre-order; so is their merge.
    let shallow = (alike.boundary.iter())
        .filter(|b| trie.depth(b.node as usize) - base < depth)
        .copied();
    let mut boundary: Vec<BoundaryNode> = shallow.chain(deep_stops).collect();
    boundary.sort_unstable_by_key(|b| b.node);
    LexEntry::of_row(row, boundary)
}
