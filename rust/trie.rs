//! The token trie: every text token's bytes in one trie, flattened in DFS
//! pre-order so a mask is one forward pass that skips whole subtrees at the
//! first byte the automaton rejects (DESIGN.md §5).

use crate::error::{Error, Result};

mod steppers;
mod walks;

pub use steppers::{DfaStepper, Offset, TrieStepper, Visit, VisitStepper};

/// Longest token (in bytes) the trie accepts; bounds the per-walk state stack.
pub const MAX_TOKEN_BYTES: usize = u16::MAX as usize;

#[derive(Clone, Copy, Debug)]
struct Node {
    /// Index of the first node after this node's subtree.
    subtree_end: u32,
    /// Start of this node's token ids in `TokenTrie::tokens` (end = next node's start).
    tokens_start: u32,
    /// Distance from the root (root = 0).
    depth: u16,
    /// Byte on the edge from the parent.
    byte: u8,
}

#[derive(Debug)]
pub struct TokenTrie {
    /// Node 0 is the root; a sentinel node at the end closes the token ranges.
    nodes: Vec<Node>,
    /// Parent of each node (root: 0).
    parent: Vec<u32>,
    /// Where each node's path starts in `path_bytes` (a token through the
    /// node has its bytes there): a node's path is one slice, not a walk up
    /// its parents, which under a cold cache was a miss per level.
    path_at: Vec<u32>,
    /// The bytes of every token, concatenated in trie order.
    path_bytes: Vec<u8>,
    /// Longest path below each node (0 for a leaf): no walk below a node
    /// reads more bytes.
    height: Vec<u16>,
    /// Token ids by decreasing length (`tokens_at_least`).
    by_length: Vec<u32>,
    /// `at_least[len]`: how many tokens are `len` bytes long or longer.
    at_least: Vec<u32>,
    /// `walked_below[d]`: how many nodes a walk of the nodes `d` bytes deep
    /// or deeper steps (`nodes_walked_below`).
    walked_below: Vec<u32>,
    tokens: Vec<u32>,
    max_depth: usize,
    /// The root's child on each byte (0: none): the root has a child for
    /// nearly every byte, and finding one by its siblings' `subtree_end`
    /// links is a cache miss per sibling.
    root_children: Box<[u32; 256]>,
}

impl TokenTrie {
    /// Builds the trie from `(token_id, bytes)` pairs; bytes must be non-empty.
    pub fn new(entries: &[(u32, &[u8])]) -> Result<Self> {
        let mut sorted: Vec<(u32, &[u8])> = entries.to_vec();
        sorted.sort_unstable_by(|a, b| a.1.cmp(b.1).then(a.0.cmp(&b.0)));

        let root = Node {
            subtree_end: 0,
            tokens_start: 0,
            depth: 0,
            byte: 0,
        };
        let mut nodes = vec![root];
        let mut tokens = Vec::with_capacity(sorted.len());
        // Node indices along the current path; path[d] is the node at depth d.
        let mut path: Vec<usize> = vec![0];
        let mut prev: &[u8] = &[];
        let mut max_depth = 0;
        let mut path_at: Vec<u32> = vec![0];
        let mut path_bytes: Vec<u8> = Vec::new();
        for &(id, bytes) in &sorted {
            if bytes.is_empty() {
                return Err(Error::InvalidArgument(format!("token {id} has no bytes")));
            }
            if bytes.len() > MAX_TOKEN_BYTES {
                return Err(Error::LimitExceeded(format!(
                    "token {id} is {} bytes long; the limit is {MAX_TOKEN_BYTES}",
                    bytes.len()
                )));
            }
            let common = prev.iter().zip(bytes).take_while(|(a, b)| a == b).count();
            // Close the nodes that are not on this token's path.
            while path.len() > common + 1 {
                let done = path.pop().unwrap();
                nodes[done].subtree_end = nodes.len() as u32;
            }
            let at = u32::try_from(path_bytes.len()).map_err(|_| {
                Error::LimitExceeded("the vocabulary's tokens exceed 4 GiB in all".into())
            })?;
            path_bytes.extend_from_slice(bytes);
            for (d, &b) in bytes.iter().enumerate().skip(common) {
                nodes.push(Node {
                    subtree_end: 0,
                    tokens_start: tokens.len() as u32,
                    depth: (d + 1) as u16,
                    byte: b,
                });
                path_at.push(at);
                path.push(nodes.len() - 1);
            }
            // Tokens arrive in pre-order, so a node's ids are contiguous.
            tokens.push(id);
            max_depth = max_depth.max(bytes.len());
            prev = bytes;
        }
        while let Some(done) = path.pop() {
            nodes[done].subtree_end = nodes.len() as u32;
        }
        nodes.push(Node {
            subtree_end: 0,
            tokens_start: tokens.len() as u32,
            depth: 0,
            byte: 0,
        });
        // Every node's token range ends where the next node's starts.
        let mut parent = vec![0u32; nodes.len()];
        let mut stack: Vec<usize> = vec![0];
        for i in 1..nodes.len() - 1 {
            stack.truncate(nodes[i].depth as usize);
            parent[i] = *stack.last().unwrap() as u32;
            stack.push(i);
        }
        // Children come after their parent in pre-order.
        let mut height = vec![0u16; nodes.len()];
        for i in (1..nodes.len() - 1).rev() {
            let p = parent[i] as usize;
            height[p] = height[p].max(height[i] + 1);
        }
        path_at.push(0);
        let mut root_children = Box::new([0u32; 256]);
        let mut c = 1;
        while c < nodes.len() - 1 {
            root_children[nodes[c].byte as usize] = c as u32;
            c = nodes[c].subtree_end as usize;
        }
        let (by_length, at_least) = by_length(&sorted, max_depth);
        // A node is stepped on the way to the nodes `d` deep exactly when
        // its deepest descendant (or itself) is that deep.
        let mut walked_below = vec![0u32; max_depth + 2];
        for (n, h) in nodes[1..nodes.len() - 1].iter().zip(&height[1..]) {
            walked_below[n.depth as usize + *h as usize] += 1;
        }
        for d in (0..=max_depth).rev() {
            walked_below[d] += walked_below[d + 1];
        }
        Ok(TokenTrie {
            nodes,
            parent,
            path_at,
            path_bytes,
            height,
            by_length,
            at_least,
            walked_below,
            tokens,
            max_depth,
            root_children,
        })
    }

    /// Number of trie nodes, root included (sentinel excluded).
    pub fn num_nodes(&self) -> usize {
        self.nodes.len() - 1
    }

    #[inline]
    pub fn node_tokens(&self, i: usize) -> &[u32] {
        let a = self.nodes[i].tokens_start as usize;
        let b = self.nodes[i + 1].tokens_start as usize;
        &self.tokens[a..b]
    }

    /// The tokens of the nodes strictly below `node` (a subtree's tokens
    /// are one run, as its nodes are).
    #[inline]
    pub fn tokens_below(&self, node: usize) -> &[u32] {
        let a = self.nodes[node + 1].tokens_start as usize;
        let b = self.nodes[self.subtree_end(node)].tokens_start as usize;
        &self.tokens[a..b]
    }

    /// The bytes on the path from the root to `node`.
    pub fn path(&self, node: usize) -> &[u8] {
        let at = self.path_at[node] as usize;
        &self.path_bytes[at..at + self.nodes[node].depth as usize]
    }

    /// The parent of `node` (the root's is itself).
    pub fn parent(&self, node: usize) -> usize {
        self.parent[node] as usize
    }

    /// The child of `node` on the edge `byte`, if any.
    pub fn child(&self, node: usize, byte: u8) -> Option<usize> {
        if node == 0 {
            return Some(self.root_children[byte as usize] as usize).filter(|&c| c != 0);
        }
        self.children(node)
            .take_while(|&(_, b)| b <= byte)
            .find(|&(_, b)| b == byte)
            .map(|(c, _)| c)
    }

    /// The children of `node` with their bytes, in byte order.
    pub fn children(&self, node: usize) -> impl Iterator<Item = (usize, u8)> + '_ {
        let end = self.subtree_end(node);
        let mut c = node + 1;
        std::iter::from_fn(move || {
            if c >= end {
                return None;
            }
            let here = c;
            c = self.nodes[c].subtree_end as usize;
            Some((here, self.nodes[here].byte))
        })
    }

    /// Number of nodes strictly below `node`.
    pub fn subtree_size(&self, node: usize) -> usize {
        self.subtree_end(node) - node - 1
    }

    /// Index of the first node after `node`'s subtree (the root's is the end).
    pub fn subtree_end(&self, node: usize) -> usize {
        if node == 0 {
            self.num_nodes()
        } else {
            self.nodes[node].subtree_end as usize
        }
    }

    /// The byte on the edge into `node` (0 for the root).
    pub fn byte(&self, node: usize) -> u8 {
        self.nodes[node].byte
    }

    /// Distance of `node` from the root.
    pub fn depth(&self, node: usize) -> usize {
        self.nodes[node].depth as usize
    }

    /// The longest path below `node`: a walk below it reads at most this
    /// many bytes.
    pub fn height(&self, node: usize) -> usize {
        self.height[node] as usize
    }

    /// The tokens `len` bytes long or longer.
    pub fn tokens_at_least(&self, len: usize) -> &[u32] {
        let n = self.at_least.get(len).copied().unwrap_or(0);
        &self.by_length[..n as usize]
    }

    /// How many nodes a walk from the root of the nodes `depth` bytes deep
    /// or deeper steps (`walk_visits_below`): those nodes, and every node
    /// above one of them on its way down. This, not the deep nodes alone,
    /// is what a copy of a shallower entry still walks (`nearentry`): below
    /// 16 bytes Llama-3's trie has 7,775 nodes and 12,824 above them.
    pub fn nodes_walked_below(&self, depth: usize) -> usize {
        self.walked_below.get(depth).copied().unwrap_or(0) as usize
    }

    /// Longest token length: bounds the depth of any walk.
    pub fn max_depth(&self) -> usize {
        self.max_depth
    }

    /// The longest token that is a prefix of `bytes`: its length and id
    /// (`follow`'s last hit, without collecting the others).
    pub fn longest_prefix(&self, bytes: &[u8]) -> Option<(usize, u32)> {
        let mut node = 0usize;
        let mut best = None;
        'outer: for (depth, &b) in bytes.iter().enumerate() {
            let end = self.subtree_end(node);
            let mut c = node + 1;
            while c < end {
                if self.nodes[c].byte == b {
                    node = c;
                    if let Some(&t) = self.node_tokens(c).first() {
                        best = Some((depth + 1, t));
                    }
                    continue 'outer;
                }
                if self.nodes[c].byte > b {
                    break;
                }
                c = self.nodes[c].subtree_end as usize;
            }
            break;
        }
        best
    }

    /// Follows `bytes` from the root. Returns the deepest node reached and, for
    /// each prefix length that ends on a node holding tokens, (length, first token id).
    pub fn follow(&self, bytes: &[u8]) -> (usize, usize, Vec<(usize, u32)>) {
        let mut node = 0usize;
        let mut hits = Vec::new();
        let mut consumed = 0;
        'outer: for &b in bytes {
            // Children of `node` are the nodes at depth+1 inside its subtree, in byte order.
            let end = self.subtree_end(node);
            let mut c = node + 1;
            while c < end {
                if self.nodes[c].byte == b {
                    node = c;
                    consumed += 1;
                    if let Some(&t) = self.node_tokens(c).first() {
                        hits.push((consumed, t));
                    }
                    continue 'outer;
                }
                if self.nodes[c].byte > b {
                    break;
                }
                c = self.nodes[c].subtree_end as usize;
            }
            break;
        }
        (node, consumed, hits)
    }
}

/// Token ids of `sorted` by decreasing length, and per length how many are
/// that long or longer.
fn by_length(sorted: &[(u32, &[u8])], max_depth: usize) -> (Vec<u32>, Vec<u32>) {
    let mut by_length: Vec<(usize, u32)> = sorted.iter().map(|&(id, b)| (b.len(), id)).collect();
    by_length.sort_unstable_by(|a, b| b.cmp(a));
    let mut at_least = vec![0u32; max_depth + 2];
    for &(len, _) in &by_length {
        at_least[len] += 1;
    }
    for len in (0..=max_depth).rev() {
        at_least[len] += at_least[len + 1];
    }
    (by_length.into_iter().map(|(_, id)| id).collect(), at_least)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bitmask::iter_set_bits;

    fn trie(tokens: &[&[u8]]) -> TokenTrie {
        let entries: Vec<(u32, &[u8])> = tokens
            .iter()
            .enumerate()
            .map(|(i, b)| (i as u32, *b))
            .collect();
        TokenTrie::new(&entries).unwrap()
    }

    /// A stepper that accepts only bytes from `allowed` (state stays 1).
    fn only<'a>(allowed: &'a [u8]) -> impl Fn(u32, u8) -> u32 + Clone + 'a {
        move |_, b| if allowed.contains(&b) { 1 } else { 0 }
    }

    #[test]
    fn walk_prunes_and_sets_duplicates() {
        let t = trie(&[b"ab", b"a", b"abc", b"b", b"ab", b"ca"]);
        let mut row = vec![0u32; 1];
        t.fill_allowed(1, only(b"ab"), &mut row);
        assert_eq!(iter_set_bits(&row).collect::<Vec<_>>(), vec![0, 1, 3, 4]);
    }

    #[test]
    fn child_finds_the_node_whose_path_is_the_parents_and_the_byte() {
        // Every byte at the root (the root's own table) and below it.
        let tokens: Vec<Vec<u8>> = (0..=255u8)
            .step_by(3)
            .flat_map(|b| [vec![b], vec![b, 0x41], vec![b, 0xff, 7]])
            .collect();
        let refs: Vec<&[u8]> = tokens.iter().map(|t| &t[..]).collect();
        let t = trie(&refs);
        for node in 0..t.num_nodes() {
            for byte in 0..=255u8 {
                let want = (node + 1..t.subtree_end(node))
                    .find(|&c| t.parent(c) == node && t.byte(c) == byte);
                assert_eq!(t.child(node, byte), want, "{node} {byte}");
                if let Some(c) = want {
                    assert_eq!(t.path(c), [t.path(node), &[byte]].concat());
                }
            }
        }
        assert_eq!(trie(&[]).child(0, b'a'), None);
    }

    #[test]
    fn follow_reports_token_prefixes() {
        let t = trie(&[b"ab", b"a", b"abc", b"b"]);
        let (node, consumed, hits) = t.follow(b"abx");
        assert_eq!(consumed, 2);
        assert_eq!(hits, vec![(1, 1), (2, 0)]);
        assert_eq!(t.longest_prefix(b"abx"), Some((2, 0)));
        assert_eq!(t.longest_prefix(b"abc"), Some((3, 2)));
        assert_eq!(t.longest_prefix(b"x"), None);
        assert_eq!((t.height(0), t.height(node), t.height(node + 1)), (3, 1, 0));
    }

    #[test]
    fn any_below_sees_only_descendants() {
        let t = trie(&[b"a", b"ab"]);
        let (node, _, _) = t.follow(b"a");
        assert!(t.any_below(node, &mut DfaStepper::new(1, only(b"ab"), 4)));
        assert!(!t.any_below(node, &mut DfaStepper::new(1, only(b"a"), 4)));
    }

    #[test]
    fn paths_and_visits() {
        let t = trie(&[b"ab", b"a", b"abc", b"b", b"ca"]);
        let (node, _, _) = t.follow(b"abc");
        assert_eq!(t.path(node), b"abc");
        struct StopAtB;
        impl VisitStepper for StopAtB {
            fn visit(&mut self, _: usize, byte: u8) -> Visit {
                match byte {
                    b'b' => Visit::Stop,
                    b'a' => Visit::Live,
                    _ => Visit::Dead,
                }
            }
        }
        let (mut toks, mut stops) = (Vec::new(), Vec::new());
        t.walk_visits(
            0,
            &mut StopAtB,
            |x| toks.push(x),
            |n| stops.push(t.path(n).to_vec()),
        );
        assert_eq!(toks, vec![1]);
        assert_eq!(stops, vec![b"ab".to_vec(), b"b".to_vec()]);
    }

    #[test]
    fn tokens_and_nodes_by_depth() {
        let t = trie(&[b"ab", b"a", b"abc", b"b", b"ca", b"abcd"]);
        let mut long = t.tokens_at_least(3).to_vec();
        long.sort_unstable();
        assert_eq!(long, vec![2, 5]);
        assert_eq!(t.tokens_at_least(1).len(), 6);
        assert!(t.tokens_at_least(5).is_empty());
        // Nodes: a, ab, abc, abcd, b, c, ca. Below 2 bytes: ab, abc, abcd,
        // ca and the a and c above them; below 4: abcd and its three.
        assert_eq!(t.nodes_walked_below(1), 7);
        assert_eq!(t.nodes_walked_below(2), 6);
        assert_eq!(t.nodes_walked_below(4), 4);
        assert_eq!(t.nodes_walked_below(5), 0);
        assert_eq!(t.nodes_walked_below(9), 0);
    }

    #[test]
    fn visits_below_a_depth_report_only_deeper_nodes() {
        let t = trie(&[b"ab", b"a", b"abc", b"b", b"ca", b"abcd", b"bb", b"d"]);
        /// Lives on every byte but `c`, which stops; records the depths it
        /// is asked about.
        struct Record(Vec<usize>);
        impl VisitStepper for Record {
            fn visit(&mut self, depth: usize, byte: u8) -> Visit {
                self.0.push(depth);
                if byte == b'c' {
                    Visit::Stop
                } else {
                    Visit::Live
                }
            }
        }
        let walk = |from: usize| {
            let (mut toks, mut stops, mut rec) = (Vec::new(), Vec::new(), Record(Vec::new()));
            t.walk_visits_below(0, from, &mut rec, |x| toks.push(x), |n| stops.push(n));
            let stops: Vec<&[u8]> = stops.iter().map(|&n| t.path(n)).collect();
            (toks, stops, rec.0)
        };
        let (toks, stops, _) = walk(1);
        assert_eq!(
            (toks, stops),
            (vec![1, 0, 3, 6, 7], vec![b"abc".as_slice(), b"c"])
        );
        // From depth 2: `a`, `b` and `c` are stepped (nodes lie below them),
        // `d` is not (nothing below it is that deep), and only the deeper
        // tokens and stops are reported.
        let (toks, stops, depths) = walk(2);
        assert_eq!((toks, stops), (vec![0, 6], vec![b"abc".as_slice()]));
        assert_eq!(depths, vec![1, 2, 3, 1, 2, 1]);
    }

    /// A stepper whose state is a hash of the path: Dead, Live or Stop by
    /// the state, so every walk meets all three at no fixed place.
    #[derive(Clone)]
    struct Hashed {
        states: Vec<u64>,
        seed: u64,
    }

    impl VisitStepper for Hashed {
        fn visit(&mut self, depth: usize, byte: u8) -> Visit {
            let h = (self.states[depth - 1] ^ u64::from(byte))
                .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                .rotate_left(29);
            self.states[depth] = h;
            match (h ^ self.seed) % 8 {
                0 => Visit::Dead,
                1 => Visit::Stop,
                _ => Visit::Live,
            }
        }
    }

    #[test]
    fn split_walks_report_what_one_walk_does_from_every_split_point() {
        // Tokens over a small alphabet, so the trie is deep and bushy.
        let mut x = 7u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let texts: Vec<Vec<u8>> = (0..300)
            .map(|_| {
                let len = 1 + next() as usize % 7;
                (0..len).map(|_| b"abcd"[next() as usize % 4]).collect()
            })
            .collect();
        let refs: Vec<&[u8]> = texts.iter().map(|t| t.as_slice()).collect();
        let t = trie(&refs);
        for seed in 0..6u64 {
            let fresh = || Hashed {
                states: vec![seed; t.max_depth() + 2],
                seed,
            };
            for top in [0, t.child(0, b'a').unwrap(), t.child(0, b'c').unwrap()] {
                let (mut want_toks, mut want_stops) = (Vec::new(), Vec::new());
                let mut one = fresh();
                t.walk_visits(top, &mut one, |x| want_toks.push(x), |n| want_stops.push(n));
                want_toks.sort_unstable();
                for mid in top + 1..t.subtree_end(top) {
                    let (mut toks, mut stops) = (Vec::new(), Vec::new());
                    let mut two = fresh();
                    t.walk_visits_split_at(top, mid, &mut two, |x| toks.push(x), |n| stops.push(n));
                    toks.sort_unstable();
                    assert_eq!(toks, want_toks, "seed {seed}, top {top}, mid {mid}");
                    assert_eq!(stops, want_stops, "seed {seed}, top {top}, mid {mid}");
                }
            }
        }
    }

    #[test]
    fn empty_token_is_rejected() {
        assert!(TokenTrie::new(&[(0, b"".as_slice())]).is_err());
    }
}
