//! The chart an Earley parser builds: items, Earley sets (indexed by what
//! each item waits for), lexeme scans, the parser state after some bytes
//! (`CfgState`), and views of a chart with sets appended that no one owns
//! yet (`ChartView`, `Extended`), so a walk below a trie node completes
//! without copying the chart.
//!
//! A chart grows by a set or more per token, and every fill with drafts,
//! every draft tree node with children and every `consume_tokens` works on
//! a copy of it (the matcher's own must not change): a copy of one list of
//! `Arc`s cost a reference count per set, each in a set of its own in
//! memory, 8 us at token 2,343 of a JSON text against a fill of 5 us. So
//! `Chart` keeps its sets in chunks of `CHUNK`, shared between copies, and
//! a copy costs two reference counts whatever its length: the last, partial
//! chunk is copied only when a copy pushes onto it (at most `CHUNK - 1`
//! sets), the list of full chunks only when a copy fills one.

use std::ops::Index;
use std::sync::{Arc, OnceLock};

use crate::cfg::indent::Layout;
use crate::cfg::setnames::SetName;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Item {
    pub rule: u32,
    pub dot: u32,
    pub origin: u32,
    /// The members used so far by the object this item's rule belongs to
    /// (member-set nonterminals only; 0 elsewhere).
    pub members: crate::cfg::members::MemberSet,
}

#[derive(Debug, Default)]
pub struct EarleySet {
    pub items: Vec<Item>,
    /// In sets of more than `INDEXED_ITEMS` items: `(symbol key, item
    /// index)` sorted by key (`Cfg::next_key`), so that completions and
    /// scans find the items waiting for a symbol without reading the whole
    /// set. Reading it whole for each completed item made a closure
    /// quadratic in its size: an ambiguous grammar took minutes per byte
    /// well under the item bound.
    pub(super) by_next: Option<Box<[(u32, u32)]>>,
    /// The indenter's state after this set's text (indenter grammars only:
    /// boxed, so that other grammars' sets stay small).
    pub layout: Option<Box<Layout>>,
    /// The set's position-free name (`setnames`), once asked for: None
    /// inside when it cannot be named.
    pub name: OnceLock<Option<SetName>>,
}

/// Sets with more items than this are indexed by the symbol after the dot.
pub(super) const INDEXED_ITEMS: usize = 256;
/// Marks terminals' keys apart from nonterminals' (both below 2^31).
pub(super) const TERMINAL_KEY: u32 = 1 << 31;

/// The layout of a set without one: nothing open.
static NO_LAYOUT: Layout = Layout {
    brackets: 0,
    levels: Vec::new(),
};

impl EarleySet {
    /// The indenter's state after this set's text.
    pub fn layout(&self) -> &Layout {
        self.layout.as_deref().unwrap_or(&NO_LAYOUT)
    }

    /// The items that may wait for the symbol with key `key` (all of them
    /// in small sets): callers still check the symbol.
    pub(super) fn waiting_for(&self, key: u32) -> impl Iterator<Item = &Item> {
        let (all, indexed): (&[Item], &[(u32, u32)]) = match &self.by_next {
            None => (&self.items, &[]),
            Some(ix) => {
                let lo = ix.partition_point(|&(k, _)| k < key);
                let hi = ix.partition_point(|&(k, _)| k <= key);
                (&[], &ix[lo..hi])
            }
        };
        all.iter()
            .chain(indexed.iter().map(|&(_, i)| &self.items[i as usize]))
    }
}

/// A lexeme being read: its DFA state and the set where it started.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Scan {
    pub lexeme: u32,
    pub state: u32,
    pub origin: u32,
}

/// Where a parse is: `sets` Earley sets of its chart are in force.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CfgState {
    pub sets: u32,
    pub frontier: Vec<Scan>,
    pub accepting: bool,
    /// Token terminals that sets made at this very position wait for
    /// (`lexeme`, `origin`; `state` 0): a token read next may be one of
    /// them (see `tokenterm`). Empty in grammars without token terminals
    /// and after a byte that ended no lexeme here.
    pub tokens: Vec<Scan>,
}

/// Read access to Earley sets by index.
pub trait ChartRead {
    fn set(&self, i: u32) -> &EarleySet;
}

impl ChartRead for [Arc<EarleySet>] {
    fn set(&self, i: u32) -> &EarleySet {
        &self[i as usize]
    }
}

/// Sets per shared chunk of a `Chart`.
const CHUNK: usize = 32;

/// A matcher's chart: its Earley sets in order, shared with its copies
/// (forks, snapshots, drafts) in chunks (see the module's comment).
#[derive(Clone, Debug, Default)]
pub struct Chart {
    /// Full chunks of exactly `CHUNK` sets.
    chunks: Arc<Vec<Arc<[Arc<EarleySet>]>>>,
    /// The sets after them (fewer than `CHUNK`).
    tail: Arc<Vec<Arc<EarleySet>>>,
}

impl Chart {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets in full chunks.
    fn whole(&self) -> usize {
        self.chunks.len() * CHUNK
    }

    pub fn len(&self) -> usize {
        self.whole() + self.tail.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn push(&mut self, set: Arc<EarleySet>) {
        let tail = Arc::make_mut(&mut self.tail);
        tail.push(set);
        if tail.len() == CHUNK {
            let full = std::mem::replace(tail, Vec::with_capacity(CHUNK));
            Arc::make_mut(&mut self.chunks).push(full.into());
        }
    }

    pub fn extend(&mut self, sets: impl IntoIterator<Item = Arc<EarleySet>>) {
        for set in sets {
            self.push(set);
        }
    }

    /// Keeps the first `len` sets.
    pub fn truncate(&mut self, len: usize) {
        if len >= self.len() {
            return;
        }
        let whole = len / CHUNK;
        if whole < self.chunks.len() {
            // The new tail is the start of chunk `whole`.
            let tail = self.chunks[whole][..len % CHUNK].to_vec();
            match Arc::get_mut(&mut self.chunks) {
                Some(chunks) => chunks.truncate(whole),
                None => self.chunks = Arc::new(self.chunks[..whole].to_vec()),
            }
            self.tail = Arc::new(tail);
        } else {
            let keep = len - self.whole();
            match Arc::get_mut(&mut self.tail) {
                Some(tail) => tail.truncate(keep),
                None => self.tail = Arc::new(self.tail[..keep].to_vec()),
            }
        }
    }

    pub fn clear(&mut self) {
        *self = Chart::new();
    }
}

impl Index<usize> for Chart {
    type Output = Arc<EarleySet>;

    fn index(&self, i: usize) -> &Arc<EarleySet> {
        let whole = self.whole();
        if i < whole {
            &self.chunks[i / CHUNK][i % CHUNK]
        } else {
            &self.tail[i - whole]
        }
    }
}

impl ChartRead for Chart {
    fn set(&self, i: u32) -> &EarleySet {
        &self[i as usize]
    }
}

/// A chart's first `len` sets plus sets added locally (used by the mask
/// walk).
pub struct ChartView<'a> {
    pub base: &'a Chart,
    pub len: u32,
    pub ext: Vec<Arc<EarleySet>>,
}

impl ChartRead for ChartView<'_> {
    fn set(&self, i: u32) -> &EarleySet {
        if i < self.len {
            self.base.set(i)
        } else {
            &self.ext[(i - self.len) as usize]
        }
    }
}

/// `base`'s first `len` sets, then `ext` (sets made by one completion).
pub(crate) struct Extended<'a, C: ?Sized> {
    pub base: &'a C,
    pub len: u32,
    pub ext: &'a [EarleySet],
}

impl<C: ChartRead + ?Sized> ChartRead for Extended<'_, C> {
    fn set(&self, i: u32) -> &EarleySet {
        if i < self.len {
            self.base.set(i)
        } else {
            &self.ext[(i - self.len) as usize]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A set told apart by its one item's rule.
    fn set(tag: u32) -> Arc<EarleySet> {
        Arc::new(EarleySet {
            items: vec![Item {
                rule: tag,
                dot: 0,
                origin: 0,
                members: 0,
            }],
            ..EarleySet::default()
        })
    }

    fn tags(c: &Chart) -> Vec<u32> {
        (0..c.len()).map(|i| c[i].items[0].rule).collect()
    }

    /// Charts and their copies, pushed to and truncated at random (across
    /// chunk edges), read like plain lists of sets, and a change to one
    /// never shows in another.
    #[test]
    fn copies_are_independent_lists_of_sets() {
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut charts = vec![(Chart::new(), Vec::<u32>::new())];
        let mut tag = 0;
        for _ in 0..4000 {
            let i = next(charts.len() as u64) as usize;
            match next(10) {
                0..=5 => {
                    for _ in 0..=next(40) {
                        tag += 1;
                        charts[i].0.push(set(tag));
                        charts[i].1.push(tag);
                    }
                }
                6 | 7 => {
                    let len = next(charts[i].1.len() as u64 + 1) as usize;
                    charts[i].0.truncate(len);
                    charts[i].1.truncate(len);
                }
                8 if charts.len() < 12 => {
                    let copy = charts[i].clone();
                    charts.push(copy);
                }
                _ => {
                    let extra: Vec<Arc<EarleySet>> = (0..next(70))
                        .map(|_| {
                            tag += 1;
                            set(tag)
                        })
                        .collect();
                    charts[i].1.extend(extra.iter().map(|s| s.items[0].rule));
                    charts[i].0.extend(extra);
                }
            }
            for (chart, model) in &charts {
                assert_eq!(chart.len(), model.len());
                assert_eq!(&tags(chart), model);
                assert!(chart.tail.len() < CHUNK);
                assert!(chart.chunks.iter().all(|c| c.len() == CHUNK));
            }
        }
        let (mut c, _) = charts.swap_remove(0);
        c.clear();
        assert!(c.is_empty());
    }

    /// A copy shares its sets: it costs reference counts on the chunk
    /// lists, not one per set.
    #[test]
    fn a_copy_shares_the_sets() {
        let mut c = Chart::new();
        c.extend((0..100).map(set));
        let first = c[0].clone();
        let before = Arc::strong_count(&first);
        let copy = c.clone();
        assert_eq!(Arc::strong_count(&first), before);
        assert!(Arc::ptr_eq(&copy[99], &c[99]));
        let mut copy = copy;
        copy.push(set(100));
        assert_eq!((c.len(), copy.len()), (100, 101));
    }
}
