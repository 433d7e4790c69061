//! Masks of recently seen parser states, per grammar.
//!
//! Inside a JSON string (or any lexeme that loops), consecutive tokens leave
//! the parse in the same state: same chart, same scans. The mask is then the
//! same, and copying it beats a fill (whose parser walks below the closing
//! quote are most of its time). A state's row is kept the second time it is
//! seen, or the first when a scan loops there (string content), so states
//! that never recur cost no copy.
//!
//! A chart is named by its newest set's `Arc`: sets are only ever pushed
//! onto the chart they were computed for (forks and snapshots clone the
//! whole vector), so the same object at the same index means the same
//! chart below it; each entry holds its set, so the address cannot be
//! reused while it is kept.

use std::sync::{Arc, Mutex};

use super::earley::{CfgState, EarleySet};

/// States remembered per grammar (rows are kept only for those seen twice).
const ENTRIES: usize = 16;

#[derive(Debug)]
struct Entry {
    top: Arc<EarleySet>,
    state: CfgState,
    row: Option<Box<[u32]>>,
}

impl Entry {
    /// Whether this entry is state `st` over the chart whose newest set is `top`.
    fn is(&self, top: &Arc<EarleySet>, st: &CfgState) -> bool {
        Arc::ptr_eq(&self.top, top) && self.state == *st
    }
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
    /// Copies the row kept for `st` over `chart` into `row` if there is one;
    /// otherwise notes that `st` was seen. `likely_again` asks for the row
    /// at once (a scan in a state that loops, such as a string's content,
    /// usually stays there for the next token).
    pub fn lookup(
        &self,
        chart: &[Arc<EarleySet>],
        st: &CfgState,
        row: &mut [u32],
        likely_again: bool,
    ) -> Lookup {
        // Parallel fills of one grammar skip the memo rather than wait.
        let Ok(mut entries) = self.entries.try_lock() else {
            return Lookup::Fill { keep: false };
        };
        let top = &chart[st.sets as usize - 1];
        match entries.iter().position(|e| e.is(top, st)) {
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
                        top: top.clone(),
                        state: st.clone(),
                        row: None,
                    },
                );
                Lookup::Fill { keep: likely_again }
            }
        }
    }

    /// Keeps `row` as the mask of `st` over `chart` (if `st` is remembered).
    pub fn store(&self, chart: &[Arc<EarleySet>], st: &CfgState, row: &[u32]) {
        let Ok(mut entries) = self.entries.try_lock() else {
            return;
        };
        let top = &chart[st.sets as usize - 1];
        if let Some(e) = entries.iter_mut().find(|e| e.is(top, st)) {
            e.row = Some(row.into());
        }
    }
}
