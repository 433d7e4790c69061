//! Draft trees (Medusa / EAGLE style speculative decoding): node 0 is the last
//! verified token, every other node is a drafted token whose parent is the
//! token before it. Two input forms are accepted: a parent array, and the
//! first-child / next-sibling arrays SGLang's EAGLE worker builds
//! (`retrieve_next_token`, `retrieve_next_sibling`). Both are checked fully
//! here, so the fill never sees a malformed tree.

use crate::error::Result;
use crate::invalid;
use crate::vocab::Vocab;

/// No parent (node 0), or no child / sibling in the SGLang arrays.
const NONE: i64 = -1;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DraftTree {
    /// `tokens[i]` is node i's token; node 0's is never read (it is already consumed).
    tokens: Vec<u32>,
    /// `parent[i]` for i >= 1; `parent[0]` is unused.
    parent: Vec<usize>,
    /// Every node, each after its parent, starting with node 0.
    order: Vec<usize>,
}

impl DraftTree {
    /// From `parents[i] < i` for every node i >= 1; `parents[0]` must be -1.
    pub fn from_parents(tokens: &[i64], parents: &[i64], vocab: &Vocab) -> Result<Self> {
        if tokens.len() != parents.len() {
            return invalid!(
                "tokens and parents differ in length ({} and {})",
                tokens.len(),
                parents.len()
            );
        }
        check_root(parents.first().copied())?;
        let mut parent = vec![0; tokens.len()];
        for (i, &p) in parents.iter().enumerate().skip(1) {
            if p < 0 || p as u64 >= i as u64 {
                return invalid!(
                    "node {i}: parent {p} is not in [0, {i}) (parents must come first)"
                );
            }
            parent[i] = p as usize;
        }
        Ok(DraftTree {
            tokens: node_tokens(tokens, vocab)?,
            parent,
            order: (0..tokens.len()).collect(),
        })
    }

    /// From SGLang's EAGLE arrays: `first_child[i]` is a child of node i (or
    /// -1), `next_sibling[i]` the next child of i's parent (or -1). Every node
    /// must be reachable from node 0 exactly once.
    pub fn from_first_child_next_sibling(
        first_child: &[i64],
        next_sibling: &[i64],
        tokens: &[i64],
        vocab: &Vocab,
    ) -> Result<Self> {
        let n = tokens.len();
        if first_child.len() != n || next_sibling.len() != n {
            return invalid!(
                "retrieve_next_token, retrieve_next_sibling and draft_tokens differ in length \
                 ({}, {} and {n})",
                first_child.len(),
                next_sibling.len()
            );
        }
        check_root(tokens.first().map(|_| NONE))?;
        if next_sibling[0] != NONE {
            return invalid!(
                "node 0 is the root and cannot have a sibling (retrieve_next_sibling[0] = {})",
                next_sibling[0]
            );
        }
        let index = |what: &str, i: usize, v: i64| -> Result<Option<usize>> {
            match v {
                NONE => Ok(None),
                v if v > 0 && (v as u64) < n as u64 => Ok(Some(v as usize)),
                v => invalid!("{what}[{i}] = {v} is not -1 or a node in [1, {n})"),
            }
        };
        let mut parent = vec![0; n];
        let mut seen = vec![false; n];
        seen[0] = true;
        let mut order = Vec::with_capacity(n);
        order.push(0);
        // Breadth first: a node's parent is visited before the node itself.
        let mut head = 0;
        while head < order.len() {
            let p = order[head];
            head += 1;
            let mut child = index("retrieve_next_token", p, first_child[p])?;
            while let Some(c) = child {
                if std::mem::replace(&mut seen[c], true) {
                    return invalid!("node {c} is reached twice (the arrays do not form a tree)");
                }
                parent[c] = p;
                order.push(c);
                child = index("retrieve_next_sibling", c, next_sibling[c])?;
            }
        }
        if let Some(lost) = seen.iter().position(|&s| !s) {
            return invalid!("node {lost} is not reachable from node 0");
        }
        Ok(DraftTree {
            tokens: node_tokens(tokens, vocab)?,
            parent,
            order,
        })
    }

    /// Number of nodes (rows the tree fills), node 0 included.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    pub fn token(&self, node: usize) -> u32 {
        self.tokens[node]
    }

    /// The parent of `node` (None for node 0).
    pub fn parent(&self, node: usize) -> Option<usize> {
        (node > 0).then(|| self.parent[node])
    }

    /// Nodes in an order where each comes after its parent.
    pub fn order(&self) -> &[usize] {
        &self.order
    }
}

/// `first_parent` is node 0's parent entry (None: the tree has no nodes).
fn check_root(first_parent: Option<i64>) -> Result<()> {
    match first_parent {
        None => invalid!("a draft tree needs at least node 0 (the last verified token)"),
        Some(NONE) => Ok(()),
        Some(p) => invalid!("node 0 is the root: its parent must be -1, got {p}"),
    }
}

/// Token ids checked against the vocabulary; node 0's is not read.
fn node_tokens(tokens: &[i64], vocab: &Vocab) -> Result<Vec<u32>> {
    std::iter::once(Ok(0))
        .chain(tokens.iter().enumerate().skip(1).map(|(i, &t)| {
            vocab
                .check_token_id(t)
                .map_err(|e| crate::Error::InvalidArgument(format!("node {i}: {e}")))
        }))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab() -> Vocab {
        let toks = (0..4).map(|i| vec![b'a' + i]).collect();
        Vocab::new(toks, &[3], &[], None).unwrap()
    }

    #[test]
    fn both_forms_describe_the_same_tree() {
        let v = vocab();
        //      0
        //    1   2
        //   3     4
        let t = DraftTree::from_parents(&[9, 0, 1, 2, 0], &[-1, 0, 0, 1, 2], &v).unwrap();
        let s = DraftTree::from_first_child_next_sibling(
            &[1, 3, 4, -1, -1],
            &[-1, 2, -1, -1, -1],
            &[9, 0, 1, 2, 0],
            &v,
        )
        .unwrap();
        for i in 0..5 {
            assert_eq!(t.parent(i), s.parent(i));
            assert_eq!(t.token(i), s.token(i));
        }
        assert_eq!(s.order(), &[0, 1, 2, 3, 4]);
        assert_eq!(t.parent(0), None);
    }

    #[test]
    fn sibling_order_puts_parents_first() {
        let v = vocab();
        // Node 1 is a child of node 2.
        let s =
            DraftTree::from_first_child_next_sibling(&[2, -1, 1], &[-1, -1, -1], &[0, 1, 2], &v)
                .unwrap();
        assert_eq!(s.order(), &[0, 2, 1]);
        assert_eq!(s.parent(1), Some(2));
    }

    #[test]
    fn malformed_trees_are_refused() {
        let v = vocab();
        let err = |r: Result<DraftTree>| r.unwrap_err().to_string();
        assert!(err(DraftTree::from_parents(&[], &[], &v)).contains("at least node 0"));
        assert!(err(DraftTree::from_parents(&[0, 1], &[0, 0], &v)).contains("parent must be -1"));
        assert!(err(DraftTree::from_parents(&[0, 1], &[-1, 1], &v)).contains("node 1: parent 1"));
        assert!(err(DraftTree::from_parents(&[0, 1], &[-1], &v)).contains("differ in length"));
        assert!(err(DraftTree::from_parents(&[0, 7], &[-1, 0], &v)).contains("node 1: token id 7"));
        // A cycle 1 -> 2 -> 1 through siblings.
        assert!(err(DraftTree::from_first_child_next_sibling(
            &[1, -1, -1],
            &[-1, 2, 1],
            &[0, 0, 0],
            &v
        ))
        .contains("reached twice"));
        assert!(err(DraftTree::from_first_child_next_sibling(
            &[1, -1, -1],
            &[-1, -1, -1],
            &[0, 0, 0],
            &v
        ))
        .contains("node 2 is not reachable"));
        assert!(err(DraftTree::from_first_child_next_sibling(
            &[0, -1],
            &[-1, -1],
            &[0, 0],
            &v
        ))
        .contains("retrieve_next_token[0] = 0"));
        assert!(err(DraftTree::from_first_child_next_sibling(
            &[-1, -1],
            &[1, -1],
            &[0, 0],
            &v
        ))
        .contains("cannot have a sibling"));
    }
}
