//! States with few transitions, kept as lists instead of table rows.
//!
//! A table row costs four bytes per byte class whatever the state does. In
//! the union of many values (`sequences`) nearly every state lies past the
//! bytes that tell the values apart: it reads the next byte of one value,
//! or loops on whitespace and then reads it, so it has one to a handful of
//! live classes among twenty or thirty. 50,000 objects are about two
//! million such states: 176 MB as rows, 30 MB as lists. `SparseRows`
//! holds them after the table's rows (the automaton's "states past the
//! table", as a `Periodic` block does), each its `(class, target)` pairs in
//! class order; a step scans them, at most `MAX_EDGES`.

use super::DEAD;

/// A state with more live classes than this keeps a table row: its scan
/// would cost more than the lookup, and its row little more than its list.
pub(super) const MAX_EDGES: usize = 8;

/// States `first..first + len()` of a `ByteDfa`, each its live transitions.
#[derive(Clone, Debug)]
pub(super) struct SparseRows {
    first: u32,
    /// State `first + i`'s pairs are `offsets[i]..offsets[i + 1]`.
    offsets: Vec<u32>,
    classes: Vec<u8>,
    targets: Vec<u32>,
    accepting: Vec<bool>,
    forced_byte: Vec<Option<u8>>,
}

impl SparseRows {
    /// An empty list of states numbered from `first`.
    pub(super) fn new(first: u32) -> SparseRows {
        SparseRows {
            first,
            offsets: vec![0],
            classes: Vec::new(),
            targets: Vec::new(),
            accepting: Vec::new(),
            forced_byte: Vec::new(),
        }
    }

    /// Adds the next state: its live `(class, target)` pairs in class
    /// order (at most `MAX_EDGES`), its acceptance and its forced byte.
    pub(super) fn push(&mut self, edges: &[(u8, u32)], accepting: bool, forced: Option<u8>) {
        debug_assert!(edges.len() <= MAX_EDGES);
        debug_assert!(edges.windows(2).all(|w| w[0].0 < w[1].0));
        self.classes.extend(edges.iter().map(|e| e.0));
        self.targets.extend(edges.iter().map(|e| e.1));
        self.offsets.push(self.targets.len() as u32);
        self.accepting.push(accepting);
        self.forced_byte.push(forced);
    }

    pub(super) fn len(&self) -> usize {
        self.accepting.len()
    }

    fn index(&self, state: u32) -> usize {
        (state - self.first) as usize
    }

    pub(super) fn target(&self, state: u32, class: usize) -> u32 {
        let i = self.index(state);
        let (lo, hi) = (self.offsets[i] as usize, self.offsets[i + 1] as usize);
        match self.classes[lo..hi]
            .iter()
            .position(|&c| c as usize == class)
        {
            Some(k) => self.targets[lo + k],
            None => DEAD,
        }
    }

    pub(super) fn is_accepting(&self, state: u32) -> bool {
        self.accepting[self.index(state)]
    }

    pub(super) fn forced_byte(&self, state: u32) -> Option<u8> {
        self.forced_byte[self.index(state)]
    }

    /// Whether some state here goes to `q`.
    pub(super) fn targets(&self, q: u32) -> bool {
        self.targets.contains(&q)
    }

    pub(super) fn accepting_states(&self) -> impl Iterator<Item = u32> + '_ {
        (self.first..)
            .zip(&self.accepting)
            .filter(|(_, &a)| a)
            .map(|(s, _)| s)
    }

    pub(super) fn memory_bytes(&self) -> usize {
        self.offsets.len() * 4 + self.classes.len() * 5 + self.accepting.len() * 3
    }

    /// Bytes a state with `edges` pairs takes.
    pub(super) fn bytes_for(edges: usize) -> usize {
        4 + 5 * edges + 3
    }
}
