//! Masks of recently seen parser states, per grammar.
//!
//! Inside a JSON string (or any lexeme that loops), consecutive tokens leave
//! the parse in the same state; and every value after `"key": ` in objects
//! nested alike is the same state over another chart. The mask is then the
//! same, and copying it beats a fill (value starts are the slowest fills,
//! and inside a string most of a fill is the parser walks below the closing
//! quote). A state's row is kept the second time it is seen, or the first
//! when a scan loops there (string content), so states that never recur
//! cost no copy.
//!
//! States are keyed by their position-free names (`setnames`), so a repeat
//! is found wherever in a chart it happens. Where the grammar's set names
//! have run out, a state is keyed by its chart instead: its newest set's
//! `Arc`. Sets are only ever pushed onto the chart they were computed for
//! (forks and snapshots clone the whole vector), so the same object at the
//! same index means the same chart below it; each entry holds its set, so
//! the address cannot be reused while it is kept.

use std::sync::{Arc, Mutex};

use super::earley::{CfgState, EarleySet};
use super::setnames::SetNames;

/// States remembered per grammar (rows are kept only for those seen twice).
/// A JSON text meets about a hundred distinct states, most of them more
/// than once; 16 entries kept too few of them to see the repeats.
const ENTRIES: usize = 64;
/// Bound on the bytes of kept rows per grammar (32 rows of a 128K-token
/// vocabulary): a process may hold hundreds of grammars (the schema cache).
const ROW_BYTES: usize = 512 << 10;

/// What names a state in the memo.
#[derive(Clone, Debug)]
pub enum MemoKey {
    Named(Box<[u32]>),
    Chart {
        top: Arc<EarleySet>,
        state: CfgState,
    },
}

impl PartialEq for MemoKey {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (MemoKey::Named(a), MemoKey::Named(b)) => a == b,
            (MemoKey::Chart { top: t1, state: s1 }, MemoKey::Chart { top: t2, state: s2 }) => {
                Arc::ptr_eq(t1, t2) && s1 == s2
            }
            _ => false,
        }
    }
}

impl MemoKey {
    /// The key of state `st` over `chart`.
    pub fn of(names: &SetNames, chart: &[Arc<EarleySet>], st: &CfgState) -> Self {
        match names.state_key(chart, st) {
            Some(k) => MemoKey::Named(k),
            None => MemoKey::Chart {
                top: chart[st.sets as usize - 1].clone(),
                state: st.clone(),
            },
        }
    }
}

#[derive(Debug)]
struct Entry {
    key: MemoKey,
    row: Option<Box<[u32]>>,
}

#[derive(Debug, Default)]
pub struct FillMemo {
    /// Most recently used first.
    entries: Mutex<Vec<Entry>>,
}

/// What a fill should do after `FillMemo::lookup`.
pub enum Lookup {
    /// The row was copied from the memo.
    Hit,
    /// Compute the row; `keep` asks for it to be stored.
    Fill { keep: bool },
}

impl FillMemo {
    /// Copies the row kept for `key` into `row` if there is one; otherwise
    /// notes that `key` was seen. `likely_again` asks for the row at once (a
    /// scan in a state that loops, such as a string's content, usually stays
    /// there for the next token).
    pub fn lookup(&self, key: &MemoKey, row: &mut [u32], likely_again: bool) -> Lookup {
        // Parallel fills of one grammar skip the memo rather than wait.
        let Ok(mut entries) = self.entries.try_lock() else {
            return Lookup::Fill { keep: false };
        };
        match entries.iter().position(|e| e.key == *key) {
            Some(i) => {
                let e = entries.remove(i);
                let hit = match &e.row {
                    Some(kept) if kept.len() == row.len() => {
                        row.copy_from_slice(kept);
                        true
                    }
                    _ => false,
                };
                entries.insert(0, e);
                if hit {
                    Lookup::Hit
                } else {
                    Lookup::Fill { keep: true }
                }
            }
            None => {
                entries.truncate(ENTRIES - 1);
                entries.insert(
                    0,
                    Entry {
                        key: key.clone(),
                        row: None,
                    },
                );
                Lookup::Fill { keep: likely_again }
            }
        }
    }

    /// Keeps `row` as the mask of the state named `key` (if it is remembered).
    pub fn store(&self, key: &MemoKey, row: &[u32]) {
        let Ok(mut entries) = self.entries.try_lock() else {
            return;
        };
        let Some(i) = entries.iter().position(|e| e.key == *key) else {
            return;
        };
        // Over the bound, the least recently used rows make room.
        let kept = entries.iter().filter(|e| e.row.is_some()).count();
        let mut room = (ROW_BYTES / (row.len() * 4).max(1)).saturating_sub(kept);
        for e in entries[i + 1..].iter_mut().rev() {
            if room > 0 {
                break;
            }
            if e.row.take().is_some() {
                room += 1;
            }
        }
        if room > 0 {
            entries[i].row = Some(row.into());
        }
    }
}
