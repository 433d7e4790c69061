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
//! (`lexwalk::OneScan`) decides at a trie node from the DFA states before
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

use super::lexentry::{BoundaryNode, LexEntry};
use super::lexwalk::OneScan;
use super::lowered::Cfg;
use crate::bitmask::{clear_bit, set_bit};
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
        clear_bit(&mut row, t);
    }
    let mut deep_stops = Vec::new();
    let mut stepper = OneScan::new(cfg, l, q, trie.max_depth());
    trie.walk_visits_below(
        top,
        depth,
        &mut stepper,
        |t| set_bit(&mut row, t),
        |n| deep_stops.push(BoundaryNode::new(trie, top, n as u32)),
    );
    // Shallow and deep nodes interleave in pre-order: sorted by node, the
    // boundary is in pre-order as entries keep it.
    let shallow = (alike.boundary.iter())
        .filter(|b| trie.depth(b.node as usize) - base < depth)
        .copied();
    let mut boundary: Vec<BoundaryNode> = shallow.chain(deep_stops).collect();
    boundary.sort_unstable_by_key(|b| b.node);
    LexEntry::of_row(row, boundary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfg::{gbnf, lexwalk::build, lower::lower};
    use crate::regex_dfa::DEAD;
    use crate::vocab::testing::random_vocab;
    use crate::vocab::Vocab;

    /// 900 tokens of 1 to 30 bytes over `alphabet`.
    fn vocab(alphabet: &[u8]) -> Vocab {
        random_vocab(alphabet, 900, 30, 7)
    }

    /// A lexer-only entry as a row and its boundary.
    fn parts(e: &LexEntry, words: usize) -> (Vec<u32>, Vec<BoundaryNode>) {
        let mut row = vec![0u32; words];
        e.apply(&mut row, true);
        (row, e.boundary.clone())
    }

    /// Every pair of a count's states that walk alike to at least
    /// `MIN_ALIKE_DEPTH` bytes below a node: the entry built from the
    /// other's equals the full walk's, at the root and at a node below it.
    /// Returns how many pairs a block said agree that long.
    fn check(grammar: &str, before: &[u8], count: usize) -> usize {
        let cfg = lower(&gbnf::parse(grammar).unwrap()).unwrap();
        let vocab = vocab(b"abc<>");
        let (trie, words) = (vocab.trie(), vocab.vocab_size().div_ceil(32));
        let l = (cfg.lexemes.iter()).position(|x| x.dfa.is_some()).unwrap() as u32;
        let dfa = cfg.lexemes[l as usize].dfa.as_ref().unwrap();
        let mut q = dfa.step_bytes(dfa.start(), before);
        let mut states = Vec::new();
        for _ in 0..count {
            states.push(q);
            q = dfa.step(q, b'a');
            assert_ne!(q, DEAD);
        }
        let tops = [0, trie.follow(b"a").0];
        let (mut copied, mut by_block) = (0, 0);
        for &top in &tops {
            let height = trie.height(top);
            for (i, &r) in states.iter().enumerate() {
                let alike = build(&cfg, trie, words, &vec![(l, r)], top);
                for &q in &states[i + 1..] {
                    // The exact length, and the bound a block gives (as
                    // `LexCache` takes it).
                    let exact = dfa.distinguishing_length(r, q, height, usize::MAX);
                    let block = dfa.alike_length(r, q);
                    by_block += (block >= MIN_ALIKE_DEPTH) as usize;
                    // (A search stops past the node's height.)
                    assert!(block <= exact || exact > height, "{r} {q}");
                    let want = build(&cfg, trie, words, &vec![(l, q)], top);
                    for d in [exact, block] {
                        if !(MIN_ALIKE_DEPTH..=height).contains(&d) {
                            continue;
                        }
                        let got = entry_from_alike(&cfg, trie, words, &alike, (l, q), top, d);
                        assert_eq!(parts(&got, words), parts(&want, words), "{r} {q} {d} {top}");
                        copied += 1;
                    }
                }
            }
        }
        assert!(copied > 50, "{copied}");
        by_block
    }

    #[test]
    fn entries_from_states_alike_in_table_rows_equal_full_walks() {
        // A count in table rows: a search tells how long states agree.
        assert_eq!(
            check(r#"root ::= "<" [ab] [abc]{0,40} ">" "x""#, b"<a", 40),
            0
        );
    }

    #[test]
    fn entries_from_states_alike_in_a_block_equal_full_walks() {
        // A count long enough to be a block of copies: near its end, the
        // block says how long two states agree (`ByteDfa::alike_length`).
        let mut before = b"<".to_vec();
        before.extend([b'a'; 4960]);
        let by_block = check(r#"root ::= "<" [ab] [abc]{0,5000} ">" "x""#, &before, 40);
        assert!(by_block > 50, "{by_block}");
    }
}
