//! The chart an Earley parser builds: items, Earley sets (indexed by what
//! each item waits for), lexeme scans, the parser state after some bytes
//! (`CfgState`), and views of a chart with sets appended that no one owns
//! yet (`ChartView`, `Extended`), so a walk below a trie node completes
//! without copying the chart.

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

/// A matcher's chart: sets are shared (Arc) with forks and snapshots.
pub type Chart = Vec<Arc<EarleySet>>;

impl ChartRead for [Arc<EarleySet>] {
    fn set(&self, i: u32) -> &EarleySet {
        &self[i as usize]
    }
}

/// A shared prefix plus sets added locally (used by the mask walk).
pub struct ChartView<'a> {
    pub base: &'a [Arc<EarleySet>],
    pub ext: Vec<Arc<EarleySet>>,
}

impl ChartRead for ChartView<'_> {
    fn set(&self, i: u32) -> &EarleySet {
        let i = i as usize;
        if i < self.base.len() {
            &self.base[i]
        } else {
            &self.ext[i - self.base.len()]
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
