//! A byte trie of labelled strings, as the record automaton reads keys and
//! values through it.
//!
//! Each string carries a label (a key's id, a member's id); a node knows the
//! label of the string that ends there and the labels of every string that
//! passes through it (`below`), so "may some string of these labels still
//! be read from here?" is an intersection of two sorted lists. The inverse,
//! each label's path (`path`), numbers the nodes one record may be at.
//!
//! A number member that is integral may also be written as a float with any
//! count of zeros (`2`, `2.0`, `2.00`, ...): its strings are `2` and `2.0`,
//! and `loop_zeros` marks the node of `2.0` and every node of `2.00...`
//! that other strings made as its: the zeros may go on there, and past the
//! last such node the automaton keeps a state of its own for the run.

use rustc_hash::FxHashMap as HashMap;

/// No node, no label.
pub(in crate::regex_dfa) const NONE: u32 = u32::MAX;
/// The root of every trie.
pub(in crate::regex_dfa) const ROOT: u32 = 0;

/// A trie of labelled byte strings, children by byte.
#[derive(Debug, Default)]
pub(in crate::regex_dfa) struct LabeledTrie {
    /// Node `t`'s children are `child_byte` / `child_node` at
    /// `first_child[t]..first_child[t + 1]`, by byte.
    first_child: Vec<u32>,
    child_byte: Vec<u8>,
    child_node: Vec<u32>,
    /// The label of the string that ends at each node (`NONE`: none does).
    label: Vec<u32>,
    /// The labels of the strings through each node, sorted:
    /// `below[below_start[t]..below_start[t + 1]]`.
    below_start: Vec<u32>,
    below: Vec<u32>,
    /// Per label, the nodes its strings pass through (root left out), sorted.
    path_start: Vec<u32>,
    path: Vec<u32>,
    /// The integral number whose run of zeros may go on at each node.
    loop_zeros: Vec<u32>,
}

impl LabeledTrie {
    /// The trie of `strings` (text, label), labels below `labels`; `zero_runs`
    /// lists the labels whose string `text.0` may take more zeros (it is in
    /// `strings`). None when one string carries two labels.
    pub(in crate::regex_dfa) fn new(
        mut strings: Vec<(Vec<u8>, u32)>,
        labels: usize,
        zero_runs: &[(Vec<u8>, u32)],
    ) -> Option<LabeledTrie> {
        strings.sort_unstable();
        strings.dedup();
        let mut children: Vec<Vec<(u8, u32)>> = vec![Vec::new()];
        let mut label = vec![NONE];
        let mut below: Vec<Vec<u32>> = vec![Vec::new()];
        // The nodes along the previous string, root first.
        let mut path: Vec<u32> = vec![ROOT];
        let mut previous: &[u8] = &[];
        for (text, l) in &strings {
            let shared = previous
                .iter()
                .zip(text)
                .take_while(|(a, b)| a == b)
                .count();
            path.truncate(shared + 1);
            for &b in &text[shared..] {
                let parent = *path.last().expect("the root stays");
                let node = children.len() as u32;
                children[parent as usize].push((b, node));
                children.push(Vec::new());
                label.push(NONE);
                below.push(Vec::new());
                path.push(node);
            }
            let end = *path.last().expect("the root stays") as usize;
            if label[end] != NONE && label[end] != *l {
                return None;
            }
            label[end] = *l;
            for &node in &path {
                below[node as usize].push(*l);
            }
            previous = text;
        }
        let mut loop_zeros = vec![NONE; children.len()];
        for (text, l) in zero_runs {
            // From the node of `text`, through every node of more zeros.
            let mut node = ROOT;
            for &b in text.iter() {
                node = find_child(&children[node as usize], b)?;
            }
            let mut on = vec![];
            loop {
                if label[node as usize] != *l && label[node as usize] != NONE {
                    return None;
                }
                label[node as usize] = *l;
                loop_zeros[node as usize] = *l;
                on.push(node);
                match find_child(&children[node as usize], b'0') {
                    Some(next) => node = next,
                    None => break,
                }
            }
            for node in on {
                below[node as usize].push(*l);
            }
        }
        let mut trie = LabeledTrie {
            loop_zeros,
            label,
            ..LabeledTrie::default()
        };
        for kids in &children {
            trie.first_child.push(trie.child_byte.len() as u32);
            trie.child_byte.extend(kids.iter().map(|k| k.0));
            trie.child_node.extend(kids.iter().map(|k| k.1));
        }
        trie.first_child.push(trie.child_byte.len() as u32);
        let mut paths: Vec<Vec<u32>> = vec![Vec::new(); labels];
        for (node, mut ls) in below.into_iter().enumerate() {
            ls.sort_unstable();
            ls.dedup();
            trie.below_start.push(trie.below.len() as u32);
            if node as u32 != ROOT {
                for &l in &ls {
                    paths.get_mut(l as usize)?.push(node as u32);
                }
            }
            trie.below.extend(ls);
        }
        trie.below_start.push(trie.below.len() as u32);
        for p in paths {
            trie.path_start.push(trie.path.len() as u32);
            trie.path.extend(p);
        }
        trie.path_start.push(trie.path.len() as u32);
        Some(trie)
    }

    pub(in crate::regex_dfa) fn nodes(&self) -> usize {
        self.label.len()
    }

    /// The child of `node` by `byte`, or `NONE`.
    pub(in crate::regex_dfa) fn child(&self, node: u32, byte: u8) -> u32 {
        let (lo, hi) = (
            self.first_child[node as usize] as usize,
            self.first_child[node as usize + 1] as usize,
        );
        match self.child_byte[lo..hi].binary_search(&byte) {
            Ok(i) => self.child_node[lo + i],
            Err(_) => NONE,
        }
    }

    /// The bytes `node` has children by.
    pub(in crate::regex_dfa) fn child_bytes(&self, node: u32) -> &[u8] {
        let (lo, hi) = (
            self.first_child[node as usize] as usize,
            self.first_child[node as usize + 1] as usize,
        );
        &self.child_byte[lo..hi]
    }

    /// The label of the string ending at `node` (`NONE`: none).
    pub(in crate::regex_dfa) fn label(&self, node: u32) -> u32 {
        self.label[node as usize]
    }

    /// The integral number whose zeros may go on at `node` (`NONE`: none).
    pub(in crate::regex_dfa) fn loop_zeros(&self, node: u32) -> u32 {
        self.loop_zeros[node as usize]
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
            + self.child_node.len()
            + self.label.len()
            + self.below_start.len()
            + self.below.len()
            + self.path_start.len()
            + self.path.len()
            + self.loop_zeros.len())
            * 4
            + self.child_byte.len()
    }
}

fn find_child(kids: &[(u8, u32)], byte: u8) -> Option<u32> {
    kids.iter().find(|k| k.0 == byte).map(|k| k.1)
}

/// Whether two sorted lists share an element: the shorter one's elements
/// looked up in the longer.
pub(in crate::regex_dfa) fn intersects(a: &[u32], b: &[u32]) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    short.iter().any(|x| long.binary_search(x).is_ok())
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

    pub(in crate::regex_dfa) fn len(&self) -> usize {
        self.ids.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trie(words: &[(&str, u32)], zeros: &[(&str, u32)]) -> LabeledTrie {
        let strings = words
            .iter()
            .map(|(w, l)| (w.as_bytes().to_vec(), *l))
            .collect();
        let runs: Vec<(Vec<u8>, u32)> = zeros
            .iter()
            .map(|(w, l)| (w.as_bytes().to_vec(), *l))
            .collect();
        LabeledTrie::new(strings, 4, &runs).expect("labels do not clash")
    }

    fn walk(t: &LabeledTrie, text: &str) -> u32 {
        text.bytes()
            .fold(ROOT, |n, b| if n == NONE { NONE } else { t.child(n, b) })
    }

    #[test]
    fn nodes_know_the_labels_through_them_and_labels_their_paths() {
        let t = trie(&[("ab", 0), ("ac", 1), ("b", 2), ("abd", 3)], &[]);
        assert_eq!(t.below(ROOT), &[0, 1, 2, 3]);
        assert_eq!(t.below(walk(&t, "a")), &[0, 1, 3]);
        assert_eq!(t.label(walk(&t, "ab")), 0);
        assert_eq!(t.label(walk(&t, "a")), NONE);
        assert_eq!(t.child_bytes(walk(&t, "a")), b"bc");
        assert_eq!(walk(&t, "ad"), NONE);
        let path3: Vec<u32> = ["a", "ab", "abd"].iter().map(|w| walk(&t, w)).collect();
        assert_eq!(t.path(3), &path3[..]);
        assert!(intersects(t.below(walk(&t, "ab")), &[3, 7]));
        assert!(!intersects(t.below(walk(&t, "ab")), &[1, 2]));
    }

    #[test]
    fn zero_runs_take_over_the_nodes_of_more_zeros() {
        // 2 (2, 2.0, 2.00, ...) beside 2.005, which made the node of 2.00.
        let t = trie(&[("2", 0), ("2.0", 0), ("2.005", 1)], &[("2.0", 0)]);
        for w in ["2.0", "2.00"] {
            assert_eq!(t.loop_zeros(walk(&t, w)), 0, "{w}");
            assert_eq!(t.label(walk(&t, w)), 0, "{w}");
            assert_eq!(t.below(walk(&t, w)), &[0, 1], "{w}");
        }
        assert_eq!(t.loop_zeros(walk(&t, "2.005")), NONE);
        assert_eq!(t.below(walk(&t, "2.005")), &[1]);
        assert_eq!(t.loop_zeros(walk(&t, "2")), NONE);
    }

    #[test]
    fn a_string_with_two_labels_is_refused() {
        let strings = vec![(b"a".to_vec(), 0), (b"a".to_vec(), 1)];
        assert!(LabeledTrie::new(strings, 2, &[]).is_none());
    }
}
