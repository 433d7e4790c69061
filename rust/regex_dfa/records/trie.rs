//! A trie of labelled strings, as the record automaton reads keys and
//! values through it.
//!
//! Each string carries a label (a key's id, a member's id); a node knows the
//! label of the string that ends there and the labels of every string that
//! passes through it (`below`), so "may some string of these labels still
//! be read from here?" is an intersection of two sorted lists. The inverse,
//! each label's path (`path`), numbers the nodes one record may be at.
//!
//! A string is bytes and `SPACE`s: a run of the layout's flexible
//! whitespace between the tokens of an array or object value, read by the
//! automaton beside the trie (a node reached by a `SPACE` is where the run
//! ends).
//!
//! **Runs of zeros.** An integral number may also be written as a float with
//! any count of zeros (`2`, `2.0`, `2.00`, ...). Its string holds only `2`,
//! and the node after it is an *int end*; the nodes other strings made for
//! `2.`, `2.0`, `2.00`, ... are marked as that end's run (`run`), and the
//! automaton keeps places of its own for the dot and the zeros past the
//! last such node, then reads on as from the int end. Spelled into the
//! trie, the float form doubled the nodes of a table of integers.
//!
//! Nodes are numbered breadth first, so a node's children are consecutive:
//! a child is found among the symbols into them, and each node costs four
//! numbers and a symbol.

use rustc_hash::FxHashMap as HashMap;

/// No node, no label.
pub(in crate::regex_dfa) const NONE: u32 = u32::MAX;
/// The root of every trie.
pub(in crate::regex_dfa) const ROOT: u32 = 0;
/// The symbol of a whitespace run in a string (bytes are 0..=255).
pub(in crate::regex_dfa) const SPACE: u16 = 256;

/// A trie of labelled strings of symbols, children by symbol.
#[derive(Debug, Default)]
pub(in crate::regex_dfa) struct LabeledTrie {
    /// Node `t`'s children are nodes `first_child[t]..first_child[t + 1]`,
    /// in the order of `symbol_in`, the symbol into each node.
    first_child: Vec<u32>,
    symbol_in: Vec<u16>,
    /// The label of the string that ends at each node (`NONE`: none does).
    label: Vec<u32>,
    /// The labels of the strings through each node, sorted:
    /// `below[below_start[t]..below_start[t + 1]]`.
    below_start: Vec<u32>,
    below: Vec<u32>,
    /// Per label, the nodes its strings pass through (root left out), sorted.
    path_start: Vec<u32>,
    path: Vec<u32>,
    /// The nodes on an int end's run (`2.`, `2.0`, ...), sorted, each with
    /// its int end.
    run: Vec<(u32, u32)>,
    /// The int ends (where an integral number's int text ends: its run
    /// starts there; its other strings, `1e+20`, take no dot), sorted, each
    /// with a label whose string has it (one pair per label).
    int_end: Vec<(u32, u32)>,
}

impl LabeledTrie {
    /// The trie of `strings` (symbols, label), labels below `labels`;
    /// `int_ends` lists where integral numbers' int texts end, as the
    /// prefix of a string of the label. None when one string carries two
    /// labels, or a run passes through the end of a string.
    pub(in crate::regex_dfa) fn new(
        mut strings: Vec<(Vec<u16>, u32)>,
        labels: usize,
        int_ends: &[(Vec<u16>, u32)],
    ) -> Option<LabeledTrie> {
        // Built in a few flat vectors, not a vector per node: a compile's
        // budget counts allocations, and 100,000 rows make millions of
        // nodes.
        strings.sort_unstable();
        strings.dedup();
        // (parent, symbol, child), nodes numbered as they are made.
        let mut edges: Vec<(u32, u16, u32)> = Vec::new();
        let mut label = vec![NONE];
        // (node, label): the labels through each node.
        let mut pairs: Vec<(u32, u32)> = Vec::new();
        // The nodes along the previous string, root first.
        let mut path: Vec<u32> = vec![ROOT];
        let mut previous: &[u16] = &[];
        for (text, l) in &strings {
            let shared = previous
                .iter()
                .zip(text)
                .take_while(|(a, b)| a == b)
                .count();
            path.truncate(shared + 1);
            for &b in &text[shared..] {
                let parent = *path.last().expect("the root stays");
                let node = label.len() as u32;
                edges.push((parent, b, node));
                label.push(NONE);
                path.push(node);
            }
            let end = *path.last().expect("the root stays") as usize;
            if label[end] != NONE && label[end] != *l {
                return None;
            }
            label[end] = *l;
            pairs.extend(path.iter().map(|&node| (node, *l)));
            previous = text;
        }
        let nodes = label.len();
        edges.sort_unstable();
        let mut first = vec![0u32; nodes + 1];
        for &(parent, _, _) in &edges {
            first[parent as usize + 1] += 1;
        }
        for x in 0..nodes {
            first[x + 1] += first[x];
        }
        let child_of = |node: u32, symbol: u16| {
            let kids = &edges[first[node as usize] as usize..first[node as usize + 1] as usize];
            kids.binary_search_by_key(&symbol, |e| e.1)
                .ok()
                .map(|i| kids[i].2)
        };
        let mut ends: Vec<(u32, u32)> = Vec::with_capacity(int_ends.len());
        for (prefix, l) in int_ends {
            let mut node = ROOT;
            for &b in prefix.iter() {
                node = child_of(node, b)?;
            }
            ends.push((node, *l));
        }
        ends.sort_unstable();
        ends.dedup();
        let mut run = Vec::new();
        let mut x = 0;
        while x < ends.len() {
            let end = ends[x].0;
            let same = ends[x..].iter().take_while(|e| e.0 == end).count();
            // The dot, then each zero, while another string made the node.
            let (mut node, mut want) = (end, u16::from(b'.'));
            while let Some(next) = child_of(node, want) {
                node = next;
                if label[node as usize] != NONE {
                    return None;
                }
                pairs.extend(ends[x..x + same].iter().map(|e| (node, e.1)));
                run.push((node, end));
                want = u16::from(b'0');
            }
            x += same;
        }
        // Breadth first: `order[new] = old`.
        let mut order = Vec::with_capacity(nodes);
        order.push(ROOT);
        let mut next = 0;
        while next < order.len() {
            let node = order[next] as usize;
            order.extend(
                edges[first[node] as usize..first[node + 1] as usize]
                    .iter()
                    .map(|e| e.2),
            );
            next += 1;
        }
        let mut renumber = vec![0u32; nodes];
        for (new, &old) in order.iter().enumerate() {
            renumber[old as usize] = new as u32;
        }
        let mut trie = LabeledTrie::default();
        let mut at = 1u32;
        trie.symbol_in = vec![0; nodes];
        for &old in &order {
            trie.first_child.push(at);
            let kids = &edges[first[old as usize] as usize..first[old as usize + 1] as usize];
            for (i, e) in kids.iter().enumerate() {
                trie.symbol_in[at as usize + i] = e.1;
            }
            at += kids.len() as u32;
            trie.label.push(label[old as usize]);
        }
        trie.first_child.push(at);
        for p in pairs.iter_mut() {
            p.0 = renumber[p.0 as usize];
        }
        pairs.sort_unstable();
        pairs.dedup();
        trie.below_start = csr_starts(pairs.iter().map(|p| p.0), nodes);
        trie.below = pairs.iter().map(|p| p.1).collect();
        // Paths: by label, the root left out.
        pairs.retain(|p| p.0 != ROOT);
        pairs.sort_unstable_by_key(|&(node, l)| (l, node));
        if pairs.last().is_some_and(|p| p.1 as usize >= labels) {
            return None;
        }
        trie.path_start = csr_starts(pairs.iter().map(|p| p.1), labels);
        trie.path = pairs.iter().map(|p| p.0).collect();
        let renumbered = |pairs: Vec<(u32, u32)>, both: bool| {
            let mut out: Vec<(u32, u32)> = pairs
                .into_iter()
                .map(|(node, x)| {
                    let x = if both { renumber[x as usize] } else { x };
                    (renumber[node as usize], x)
                })
                .collect();
            out.sort_unstable();
            out
        };
        trie.run = renumbered(run, true);
        trie.int_end = renumbered(ends, false);
        Some(trie)
    }

    pub(in crate::regex_dfa) fn nodes(&self) -> usize {
        self.label.len()
    }

    /// The child of `node` by `symbol`, or `NONE`.
    pub(in crate::regex_dfa) fn child(&self, node: u32, symbol: u16) -> u32 {
        let (lo, hi) = self.children(node);
        match self.symbol_in[lo as usize..hi as usize].binary_search(&symbol) {
            Ok(i) => lo + i as u32,
            Err(_) => NONE,
        }
    }

    fn children(&self, node: u32) -> (u32, u32) {
        (
            self.first_child[node as usize],
            self.first_child[node as usize + 1],
        )
    }

    /// The symbols `node` has children by, in order (`SPACE` last).
    pub(in crate::regex_dfa) fn child_symbols(&self, node: u32) -> &[u16] {
        let (lo, hi) = self.children(node);
        &self.symbol_in[lo as usize..hi as usize]
    }

    /// The symbol into `node` (the root's is 0).
    pub(in crate::regex_dfa) fn symbol_in(&self, node: u32) -> u16 {
        self.symbol_in[node as usize]
    }

    /// The label of the string ending at `node` (`NONE`: none).
    pub(in crate::regex_dfa) fn label(&self, node: u32) -> u32 {
        self.label[node as usize]
    }

    /// The int end whose run (`.`, `.0`, `.00`, ...) `node` is on (`NONE`:
    /// none).
    pub(in crate::regex_dfa) fn run(&self, node: u32) -> u32 {
        match self.run.binary_search_by_key(&node, |r| r.0) {
            Ok(i) => self.run[i].1,
            Err(_) => NONE,
        }
    }

    /// The labels whose strings have an int end at `node` (sorted; none:
    /// not an int end).
    pub(in crate::regex_dfa) fn int_end_labels(&self, node: u32) -> impl Iterator<Item = u32> + '_ {
        let lo = self.int_end.partition_point(|e| e.0 < node);
        self.int_end[lo..]
            .iter()
            .take_while(move |e| e.0 == node)
            .map(|e| e.1)
    }

    pub(in crate::regex_dfa) fn is_int_end(&self, node: u32) -> bool {
        self.int_end_labels(node).next().is_some()
    }

    /// The labels of the strings through `node`, sorted.
    pub(in crate::regex_dfa) fn below(&self, node: u32) -> &[u32] {
        &self.below
            [self.below_start[node as usize] as usize..self.below_start[node as usize + 1] as usize]
    }

    /// The nodes the strings of `label` pass through, root left out, sorted.
    pub(in crate::regex_dfa) fn path(&self, label: u32) -> &[u32] {
        &self.path
            [self.path_start[label as usize] as usize..self.path_start[label as usize + 1] as usize]
    }

    pub(in crate::regex_dfa) fn memory_bytes(&self) -> usize {
        (self.first_child.len()
            + self.label.len()
            + self.below_start.len()
            + self.below.len()
            + self.path_start.len()
            + self.path.len()
            + self.run.len() * 2
            + self.int_end.len() * 2)
            * 4
            + self.symbol_in.len() * 2
    }
}

/// CSR starts of `count` groups from their sorted keys: group `g` is
/// `starts[g]..starts[g + 1]`.
fn csr_starts(keys: impl Iterator<Item = u32>, count: usize) -> Vec<u32> {
    let mut starts = vec![0u32; count + 1];
    for k in keys {
        starts[k as usize + 1] += 1;
    }
    for x in 0..count {
        starts[x + 1] += starts[x];
    }
    starts
}

/// Whether two sorted lists share an element: the shorter one's elements
/// looked up in the longer.
pub(in crate::regex_dfa) fn intersects(a: &[u32], b: &[u32]) -> bool {
    smallest_common(a, b).is_some()
}

/// The smallest element two sorted lists share (the shorter one's elements
/// looked up in the longer, in order).
pub(in crate::regex_dfa) fn smallest_common(a: &[u32], b: &[u32]) -> Option<u32> {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    short
        .iter()
        .copied()
        .find(|x| long.binary_search(x).is_ok())
}

/// Ids for values, in the order they are first met.
pub(in crate::regex_dfa) struct Interner<K> {
    ids: HashMap<K, u32>,
}

impl<K: std::hash::Hash + Eq> Interner<K> {
    pub(in crate::regex_dfa) fn new() -> Self {
        Interner {
            ids: HashMap::default(),
        }
    }

    /// `k`'s id and whether it is new.
    pub(in crate::regex_dfa) fn id(&mut self, k: K) -> (u32, bool) {
        let next = self.ids.len() as u32;
        match self.ids.entry(k) {
            std::collections::hash_map::Entry::Occupied(e) => (*e.get(), false),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(next);
                (next, true)
            }
        }
    }

    /// `k`'s id if it has one.
    pub(in crate::regex_dfa) fn get(&self, k: &K) -> Option<u32> {
        self.ids.get(k).copied()
    }

    pub(in crate::regex_dfa) fn len(&self) -> usize {
        self.ids.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn symbols(w: &str) -> Vec<u16> {
        // `_` stands for a whitespace run.
        w.bytes()
            .map(|b| if b == b'_' { SPACE } else { u16::from(b) })
            .collect()
    }

    fn trie(words: &[(&str, u32)], ends: &[(&str, u32)]) -> LabeledTrie {
        let strings = words.iter().map(|(w, l)| (symbols(w), *l)).collect();
        let ends: Vec<(Vec<u16>, u32)> = ends.iter().map(|(w, l)| (symbols(w), *l)).collect();
        LabeledTrie::new(strings, 4, &ends).expect("labels do not clash")
    }

    fn walk(t: &LabeledTrie, text: &str) -> u32 {
        symbols(text)
            .into_iter()
            .fold(ROOT, |n, b| if n == NONE { NONE } else { t.child(n, b) })
    }

    #[test]
    fn nodes_know_the_labels_through_them_and_labels_their_paths() {
        let t = trie(&[("ab", 0), ("ac", 1), ("b", 2), ("abd", 3)], &[]);
        assert_eq!(t.below(ROOT), &[0, 1, 2, 3]);
        assert_eq!(t.below(walk(&t, "a")), &[0, 1, 3]);
        assert_eq!(t.label(walk(&t, "ab")), 0);
        assert_eq!(t.label(walk(&t, "a")), NONE);
        assert_eq!(t.child_symbols(walk(&t, "a")), [b'b' as u16, b'c' as u16]);
        assert_eq!(t.symbol_in(walk(&t, "ac")), b'c' as u16);
        assert_eq!(walk(&t, "ad"), NONE);
        assert_eq!(t.nodes(), 6);
        let path3: Vec<u32> = ["a", "ab", "abd"].iter().map(|w| walk(&t, w)).collect();
        assert_eq!(t.path(3), &path3[..]);
        assert!(intersects(t.below(walk(&t, "ab")), &[3, 7]));
        assert!(!intersects(t.below(walk(&t, "ab")), &[1, 2]));
    }

    #[test]
    fn runs_of_zeros_take_over_the_nodes_other_strings_made() {
        // 2 (2, 2.0, 2.00, ...) beside 2.005, which made 2., 2.0 and 2.00;
        // and [2_] whose 2 ends an int too, inside an array.
        let t = trie(
            &[("2", 0), ("2.005", 1), ("3", 2), ("[2_]", 3), ("[2.5_]", 1)],
            &[("2", 0), ("3", 2), ("[2", 3)],
        );
        let two = walk(&t, "2");
        for w in ["2.", "2.0", "2.00"] {
            assert_eq!(t.run(walk(&t, w)), two, "{w}");
            assert_eq!(t.label(walk(&t, w)), NONE, "{w}");
            assert_eq!(t.below(walk(&t, w)), &[0, 1], "{w}");
        }
        assert_eq!(t.run(walk(&t, "2.005")), NONE);
        assert_eq!(t.below(walk(&t, "2.005")), &[1]);
        assert_eq!(t.run(two), NONE);
        assert!(t.is_int_end(two) && t.is_int_end(walk(&t, "3")));
        assert!(!t.is_int_end(walk(&t, "2.0")) && !t.is_int_end(walk(&t, "2.005")));
        // No other string made 3.: its run has no nodes.
        assert_eq!(walk(&t, "3."), NONE);
        assert_eq!(t.path(2), &[walk(&t, "3")]);
        // Inside the array: the end at [2, whose run takes [2. (made by
        // [2.5_]); a whitespace run's symbol into its node.
        let inner = walk(&t, "[2");
        assert_eq!(t.int_end_labels(inner).collect::<Vec<_>>(), [3]);
        assert_eq!(t.run(walk(&t, "[2.")), inner);
        assert_eq!(t.below(walk(&t, "[2.")), &[1, 3]);
        assert_eq!(t.symbol_in(walk(&t, "[2_")), SPACE);
        assert_eq!(t.child_symbols(inner), [b'.' as u16, SPACE]);
    }

    #[test]
    fn a_string_with_two_labels_is_refused() {
        let strings = vec![(symbols("a"), 0), (symbols("a"), 1)];
        assert!(LabeledTrie::new(strings, 2, &[]).is_none());
        // Nor a run through another string's end (no JSON text does that).
        let strings = vec![(symbols("2"), 0), (symbols("2.0"), 1)];
        assert!(LabeledTrie::new(strings, 2, &[(symbols("2"), 0)]).is_none());
    }
}
