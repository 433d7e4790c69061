//! The lexer-only entry of a state from that of a state it differs from
//! on few paths.
//!
//! An object that lists properties and allows others reads an additional
//! member's name with a lexeme "any string but the listed names". Each
//! character of a name that begins like a listed one is a new DFA state of
//! that lexeme (the state remembers which listed names are still possible),
//! and its residual is the schema's own, so no other grammar's entry serves
//! it. Its entry was a walk of the vocabulary's text slice rest or of the
//! whole trie: 80 us to 1 ms per token of such a name, on nearly every
//! fresh schema.
//!
//! **Why most of another state's entry can be kept.** A single scan's
//! lexer-only walk (`lexwalk::OneScan`) decides at a trie node from the DFA
//! states before and after the node's byte (`OneScan::decide`). Take two
//! states `q` and `r` of one lexeme, and walk the trie from the entry's node
//! with both. At a node where both walks go on (`Visit::Live`) into the
//! same state, everything below is decided alike. At a node where both
//! decide alike and neither goes on, nothing below is visited by either.
//! So `q`'s entry is `r`'s except at the nodes where the two decide
//! differently, and below them; and the nodes to look at are the children
//! of nodes that both walks reach in different states. For "any string but
//! these names", two states differ only while one of them is still inside
//! a listed name: a few trie nodes per name, where the walks of either
//! state cover most of the vocabulary.
//!
//! **What is done where they differ.** At a node where the decisions
//! differ, `r`'s contribution there goes (its tokens, or its boundary node)
//! and `q`'s comes. Where one walk goes on below such a node and the other
//! does not, the other's contribution below is empty: `r`'s tokens and
//! boundary nodes in that subtree go (its tokens are one run in the trie),
//! or `q`'s walk of the subtree adds its own. The walk counts the nodes it
//! looks at and the subtrees it clears or walks, and gives up past a
//! budget: then the states differ on too much of the trie for the copy to
//! pay.

use super::lexentry::{BoundaryNode, LexEntry};
use super::lexwalk::OneScan;
use super::lowered::Cfg;
use crate::trie::{TokenTrie, Visit};

/// Trie nodes (looked at, cleared or walked) past which the copy gives up:
/// about a tenth of the cost of the walk it replaces, in Llama-3's text
/// slice rest.
pub const DIVERGENCE_BUDGET: usize = 4096;

/// The entry at node `top` of a single scan of lexeme `l` in DFA state `q`,
/// from `near`, the entry there of state `r` of the same lexeme; None when
/// the two walks differ on more than `budget` nodes.
#[allow(clippy::too_many_arguments)]
pub fn entry_from_divergent(
    cfg: &Cfg,
    trie: &TokenTrie,
    words: usize,
    near: &LexEntry,
    l: u32,
    (q, r): (u32, u32),
    top: usize,
    budget: usize,
) -> Option<LexEntry> {
    let mut scan = OneScan::new(cfg, l, q, trie.max_depth());
    // `near`'s tokens that go and `q`'s that come (no token is in both).
    let (mut cleared, mut set) = (Vec::new(), Vec::new());
    // Node ranges [from, to) whose boundary nodes in `near` go.
    let mut dropped: Vec<(usize, usize)> = Vec::new();
    let mut added: Vec<usize> = Vec::new();
    let mut work = 0usize;
    // A node both walks go on below, in different states (after its byte).
    let mut stack: Vec<(usize, u32, u32)> = vec![(top, q, r)];
    while let Some((node, qs, rs)) = stack.pop() {
        for (c, b) in trie.children(node) {
            work += 1;
            if work > budget {
                return None;
            }
            let dfa = scan.dfa();
            let (q2, r2) = (dfa.step(qs, b), dfa.step(rs, b));
            let (dq, dr) = (scan.decide(qs, q2), scan.decide(rs, r2));
            if dq == dr {
                if dq == Visit::Live && q2 != r2 {
                    stack.push((c, q2, r2));
                }
                continue;
            }
            match dr {
                Visit::Live => cleared.extend_from_slice(trie.node_tokens(c)),
                Visit::Stop => dropped.push((c, c + 1)),
                Visit::Dead => {}
            }
            match dq {
                Visit::Live => set.extend_from_slice(trie.node_tokens(c)),
                Visit::Stop => added.push(c),
                Visit::Dead => {}
            }
            // Exactly one of the walks goes on below `c` (the decisions
            // differ), and the other contributes nothing there.
            if dq != Visit::Live && dr != Visit::Live {
                continue;
            }
            let end = trie.subtree_end(c);
            work += end - c - 1;
            if work > budget {
                return None;
            }
            if dr == Visit::Live {
                cleared.extend_from_slice(trie.tokens_below(c));
                dropped.push((c + 1, end));
            } else {
                scan.restart(q2);
                trie.walk_visits(c, &mut scan, |t| set.push(t), |n| added.push(n));
            }
        }
    }
    Some(near.edited(
        words,
        &cleared,
        &set,
        edit_boundary(trie, top, &near.boundary, dropped, added),
    ))
}

/// `boundary` (in pre-order) without the nodes in the `dropped` ranges
/// (disjoint) and with the nodes `added`, in pre-order.
fn edit_boundary(
    trie: &TokenTrie,
    top: usize,
    boundary: &[BoundaryNode],
    mut dropped: Vec<(usize, usize)>,
    mut added: Vec<usize>,
) -> Vec<BoundaryNode> {
    dropped.sort_unstable();
    added.sort_unstable();
    let is_dropped = |n: usize| {
        let i = dropped.partition_point(|&(from, _)| from <= n);
        i > 0 && n < dropped[i - 1].1
    };
    let mut out = Vec::with_capacity(boundary.len() + added.len());
    let mut added = added.into_iter().peekable();
    for b in boundary {
        let n = b.node as usize;
        while let Some(a) = added.next_if(|&a| a < n) {
            out.push(BoundaryNode::new(trie, top, a as u32));
        }
        if dropped.is_empty() || !is_dropped(n) {
            out.push(*b);
        }
    }
    out.extend(added.map(|a| BoundaryNode::new(trie, top, a as u32)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfg::lexwalk::{build, build_sliced};
    use crate::cfg::{
        ast::GrammarAst,
        gbnf,
        lower::lower,
        textreach::{TextReach, REACH_LIMIT},
    };
    use crate::regex_dfa::DEAD;
    use crate::schema;
    use crate::slices::MIN_CUT;
    use crate::vocab::testing::random_vocab;
    use crate::vocab::Vocab;

    /// 1500 tokens of 1 to 12 bytes over `alphabet`.
    fn vocab(alphabet: &[u8]) -> Vocab {
        random_vocab(alphabet, 1500, 12, 11)
    }

    fn parts(e: &LexEntry, words: usize) -> (Vec<u32>, Vec<BoundaryNode>) {
        let mut row = vec![0u32; words];
        e.apply(&mut row, true);
        (row, e.boundary.clone())
    }

    /// For every pair of states of the grammar's lexemes (of at most 80
    /// states), at the root and at nodes below it: the entry copied from
    /// the other's, with no budget, equals the full walk's. Returns how many
    /// pairs a small budget took, and how many copies started from a text
    /// slice's entry.
    fn check(ast: &GrammarAst) -> (usize, usize) {
        let cfg = lower(ast).unwrap();
        let vocab = vocab(b"abc\"x,:");
        let (trie, words) = (vocab.trie(), vocab.vocab_size().div_ceil(32));
        let tops = [0, trie.follow(b"a").0, trie.follow(b"\"").0];
        let reach = TextReach::default();
        let (mut within_budget, mut pairs, mut sliced) = (0, 0, 0);
        for (l, lexeme) in cfg.lexemes.iter().enumerate() {
            let Some(dfa) = lexeme.dfa.as_ref().filter(|d| d.num_states() <= 80) else {
                continue;
            };
            let l = l as u32;
            let states: Vec<u32> = (0..dfa.num_states() as u32)
                .filter(|&s| s != DEAD)
                .collect();
            for &top in &tops {
                let entries: Vec<LexEntry> = (states.iter())
                    .map(|&s| build(&cfg, trie, words, &vec![(l, s)], top))
                    .collect();
                // The copies start from text-slice entries where those apply
                // (as in `LexCache`), to keep their slice or give it up.
                let nears: Vec<LexEntry> = (states.iter().zip(&entries))
                    .map(|(&s, e)| {
                        let reach = reach.reach(&cfg, l, s, REACH_LIMIT);
                        let slice = vocab.text_slices().within(reach);
                        match slice.filter(|_| top == 0 && reach >= MIN_CUT) {
                            Some(slice) => {
                                sliced += 1;
                                build_sliced(&cfg, trie, words, slice, &vec![(l, s)])
                            }
                            None => e.edited(words, &[], &[], e.boundary.clone()),
                        }
                    })
                    .collect();
                for (i, &q) in states.iter().enumerate() {
                    let want = parts(&entries[i], words);
                    for (j, &r) in states.iter().enumerate() {
                        let near = &nears[j];
                        let got = entry_from_divergent(
                            &cfg,
                            trie,
                            words,
                            near,
                            l,
                            (q, r),
                            top,
                            usize::MAX,
                        )
                        .unwrap();
                        assert_eq!(
                            parts(&got, words),
                            want,
                            "lexeme {l} states {q} {r} top {top}"
                        );
                        pairs += 1;
                        let small =
                            entry_from_divergent(&cfg, trie, words, near, l, (q, r), top, 64);
                        if let Some(small) = small {
                            assert_eq!(parts(&small, words), want);
                            within_budget += 1;
                        }
                    }
                }
            }
        }
        assert!(pairs > 100, "{pairs}");
        (within_budget, sliced)
    }

    #[test]
    fn entries_of_a_string_but_some_names_equal_full_walks() {
        // Members past the listed ones have any name but theirs: states
        // inside a listed name differ from the others on few paths.
        let schema = r#"{"type": "object", "properties": {"ab": {"const": 1},
            "aab": {"const": 2}, "ca": {"const": 3}}}"#;
        let (near, sliced) = check(&schema::compile(schema, &Default::default()).unwrap());
        assert!(near > 0 && sliced > 0, "{near} {sliced}");
    }

    #[test]
    fn entries_of_counts_and_alternatives_equal_full_walks() {
        for grammar in [
            r#"root ::= "\"" ( "ab" | "abc" | "a"{2,5} ) [abx]{0,6} "\"" "," "x"*"#,
            r#"root ::= ( [ab]+ "c" | "x"? [abc]{3} ) "\"" ","{1,3}"#,
        ] {
            check(&gbnf::parse(grammar).unwrap());
        }
    }
}
