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
//! Rows are kept as `keptrow` keeps them: interned by content
//! (`sharedrows`), or, where few words differ from all zeros or all ones,
//! as those words. A grammar meets about three states per distinct row, so
//! the bound on bytes counts each distinct row once (and a sparse row at
//! its few bytes), and rows equal across grammars are one allocation. A
//! memo keeps up to `ENTRIES` states and `ROW_BYTES` of distinct rows; past
//! either the least recently used go, a sixteenth at a time. A warm-up
//! walk keeps every row at once but only while there is room, so a long
//! walk keeps its first states, the ones a request meets first (`Asker`).
//! (With 32 rows and recency in a list, a walk that met 40 states in turn
//! missed every one of them on its next pass: the oldest row was always
//! the next one asked for.)
//!
//! States are keyed by their position-free names (`setnames`), so a repeat
//! is found wherever in a chart it happens. A state whose one scan is alike
//! to a state met before on every path of the trie (a `maxLength` string
//! far from its limit, a new DFA state at every token) is also looked up
//! under that state's key, which stands for the whole run of them
//! (`grammar::fill`, `LexCache::root_alike`). Where the grammar's set names
//! have run out, a state is keyed by its chart instead: its newest set's
//! `Arc`. Sets are only ever pushed onto the chart they were computed for
//! (forks and snapshots share the sets below, never change them), so the
//! same object at the same index means the same chart below it; each entry
//! holds its set, so the address cannot be reused while it is kept.

use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;

use super::earley::{CfgState, Chart, EarleySet};
use super::keptrow::KeptRow;
use super::setnames::SetNames;

/// States remembered per grammar (rows are kept only for those seen twice,
/// or looping). A JSON text meets about a hundred distinct states, most of
/// them more than once; a long warm-up walk several hundred (at 256, once
/// sparse rows made room for more rows than states, walking 150 fresh
/// dev-split schemas along their instances met 15% more cold fills than
/// at 512).
const ENTRIES: usize = 512;
/// Bound on the bytes of the distinct rows one grammar keeps (64 dense rows
/// of a 128K-token vocabulary, and sparse ones at their few bytes, see
/// `keptrow`): a process may hold hundreds of grammars (the schema cache),
/// and rows equal across grammars are one allocation.
const ROW_BYTES: usize = 1 << 20;
/// Past a bound, the least recently used `1 / EVICT_SHARE` of the states
/// (or of the rows) go at once.
const EVICT_SHARE: usize = 16;

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

impl Eq for MemoKey {}

impl Hash for MemoKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        match self {
            MemoKey::Named(k) => k.hash(h),
            MemoKey::Chart { top, state } => {
                (Arc::as_ptr(top) as usize).hash(h);
                state.hash(h);
            }
        }
    }
}

impl MemoKey {
    /// The key of state `st` over `chart`.
    pub fn of(names: &SetNames, chart: &Chart, st: &CfgState) -> Self {
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
    /// When the state was last asked for (`Memo::clock`).
    used: u64,
    row: Option<KeptRow>,
}

#[derive(Debug, Default)]
struct Memo {
    entries: FxHashMap<MemoKey, Entry>,
    /// The distinct rows the entries hold (by address), with how many
    /// entries hold each.
    rows: FxHashMap<usize, usize>,
    /// Bytes of the distinct rows.
    bytes: usize,
    clock: u64,
}

#[derive(Debug, Default)]
pub struct FillMemo {
    memo: Mutex<Memo>,
}

/// Who asks the memo: a request's own fill, or a warm-up walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Asker {
    /// A fill on a request's path: past a bound, the least recently used
    /// states and rows make room.
    Fill,
    /// A warm-up walk along a sample text (`MatcherCore::warm_up`): it keeps
    /// every row at once, but only while there is room, never pushing out
    /// what is kept. The walk meets states in the order the request will,
    /// so the first ones are the most useful; with room made by recency, a
    /// walk of more distinct rows than the memo holds (a long sample: 64
    /// rows of a 128K vocabulary) kept only its last ones and pushed out
    /// the states the request's first steps meet.
    WarmUp,
}

/// What a fill should do after `FillMemo::lookup`.
pub enum Lookup {
    /// The row was copied from the memo.
    Hit,
    /// Compute the row; `keep` asks for it to be stored.
    Fill { keep: bool },
}

impl Memo {
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// Lets go of one entry's row.
    fn release(&mut self, row: KeptRow) {
        let at = row.address();
        debug_assert!(self.rows.contains_key(&at), "a held row is counted");
        if let Some(n) = self.rows.get_mut(&at) {
            *n -= 1;
            if *n == 0 {
                self.rows.remove(&at);
                self.bytes -= row.bytes();
            }
        }
    }

    /// Forgets the least recently used sixteenth of the states other than
    /// `keep` (only among those with rows, and only their rows, if
    /// `with_row`); false if there is none. One pass makes room for many
    /// states: a pass per state made every fill past a bound scan the whole
    /// memo (fresh schemas' states that never recur: each fill a new state,
    /// 1-3 us of a 2-10 us fill).
    fn evict(&mut self, keep: Option<&MemoKey>, with_row: bool) -> bool {
        let candidate = |k: &MemoKey, e: &Entry| (!with_row || e.row.is_some()) && Some(k) != keep;
        let mut used: Vec<u64> = (self.entries.iter())
            .filter(|(k, e)| candidate(k, e))
            .map(|(_, e)| e.used)
            .collect();
        if used.is_empty() {
            return false;
        }
        let count = used.len().div_ceil(EVICT_SHARE);
        // Each tick goes to one state, so exactly `count` are this old.
        let cut = *used.select_nth_unstable(count - 1).1;
        let mut gone = Vec::with_capacity(count);
        if with_row {
            for (k, e) in self.entries.iter_mut() {
                if e.used <= cut && candidate(k, e) {
                    gone.extend(e.row.take());
                }
            }
        } else {
            self.entries.retain(|k, e| {
                let old = e.used <= cut && candidate(k, e);
                if old {
                    gone.extend(e.row.take());
                }
                !old
            });
        }
        gone.into_iter().for_each(|row| self.release(row));
        true
    }
}

impl FillMemo {
    /// Copies the row kept for `key` into `row` if there is one; otherwise
    /// notes that `key` was seen. `likely_again` asks for the row at once (a
    /// scan in a state that loops, such as a string's content, usually stays
    /// there for the next token); it is asked only for a state seen for the
    /// first time, so that a hit reads none of what it looks at. A warm-up
    /// notes a new state only while there is room (`Asker`).
    pub fn lookup(
        &self,
        key: &MemoKey,
        row: &mut [u32],
        likely_again: impl FnOnce() -> bool,
        asker: Asker,
    ) -> Lookup {
        // Parallel fills of one grammar skip the memo rather than wait.
        let Ok(mut memo) = self.memo.try_lock() else {
            return Lookup::Fill { keep: false };
        };
        let now = memo.tick();
        if let Some(e) = memo.entries.get_mut(key) {
            e.used = now;
            return match &e.row {
                Some(kept) if kept.len() == row.len() => {
                    kept.write_to(row);
                    Lookup::Hit
                }
                _ => Lookup::Fill { keep: true },
            };
        }
        if memo.entries.len() >= ENTRIES {
            if asker == Asker::WarmUp {
                return Lookup::Fill { keep: false };
            }
            memo.evict(None, false);
        }
        memo.entries.insert(
            key.clone(),
            Entry {
                used: now,
                row: None,
            },
        );
        Lookup::Fill {
            keep: likely_again(),
        }
    }

    /// Keeps `row` as the mask of the state named `key` (if it is
    /// remembered, and for a warm-up if its row fits without pushing out
    /// another).
    pub fn store(&self, key: &MemoKey, row: &[u32], asker: Asker) {
        if row.len() * 4 > ROW_BYTES {
            return; // past the bound alone (a vocabulary of 8M tokens)
        }
        if self
            .memo
            .try_lock()
            .map(|m| !m.entries.contains_key(key))
            .unwrap_or(true)
        {
            return;
        }
        // Made outside the memo's lock: a dense row is hashed and interned
        // under the process-wide table's lock.
        let kept = KeptRow::of(row);
        let size = kept.bytes();
        let Ok(mut memo) = self.memo.try_lock() else {
            return;
        };
        let memo = &mut *memo;
        let at = kept.address();
        let no_room = memo.bytes + size > ROW_BYTES;
        if asker == Asker::WarmUp && no_room && !memo.rows.contains_key(&at) {
            return;
        }
        let Some(old) = memo.entries.get_mut(key).map(|e| e.row.take()) else {
            return;
        };
        if let Some(old) = old {
            memo.release(old);
        }
        if !memo.rows.contains_key(&at) {
            // A new distinct row: over the bound, the least recently used
            // rows make room.
            while memo.bytes + size > ROW_BYTES {
                if !memo.evict(Some(key), true) {
                    return;
                }
            }
            memo.bytes += size;
        }
        *memo.rows.entry(at).or_insert(0) += 1;
        if let Some(e) = memo.entries.get_mut(key) {
            e.row = Some(kept);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u32) -> MemoKey {
        MemoKey::Named(vec![0x6d65_6d6f, i].into_boxed_slice())
    }

    /// A row of the width of a 128K-token vocabulary, distinct per `i`.
    fn row(i: u32) -> Vec<u32> {
        let mut r = vec![0x0f0f_0f0f; 4008];
        r[0] = i;
        r[4007] = 0x7e57_0000 + i;
        r
    }

    /// A request's fill of `k`: whether it hit (see `visit_as`).
    fn visit(memo: &FillMemo, k: &MemoKey, r: &[u32]) -> bool {
        visit_as(memo, k, r, false, Asker::Fill)
    }

    /// Looks `k` up with a scratch row (`now`: the row is asked for at
    /// once); on a miss kept as asked, stores `r`. Whether it hit.
    fn visit_as(memo: &FillMemo, k: &MemoKey, r: &[u32], now: bool, asker: Asker) -> bool {
        let mut out = vec![0; r.len()];
        match memo.lookup(k, &mut out, || now, asker) {
            Lookup::Hit => {
                assert_eq!(out, r);
                true
            }
            Lookup::Fill { keep } => {
                if keep {
                    memo.store(k, r, asker);
                }
                false
            }
        }
    }

    #[test]
    fn a_row_is_kept_at_the_second_sighting() {
        let memo = FillMemo::default();
        assert!(!visit(&memo, &key(1), &row(1)));
        assert!(!visit(&memo, &key(1), &row(1)));
        assert!(visit(&memo, &key(1), &row(1)));
        let mut out = vec![0; 4008];
        assert!(matches!(
            memo.lookup(&key(2), &mut out, || true, Asker::Fill),
            Lookup::Fill { keep: true }
        ));
    }

    #[test]
    fn a_cycle_of_more_states_than_rows_of_old_still_hits() {
        // 48 states with 48 distinct rows, walked in turn: under the old
        // bound (32 rows, oldest first) the third pass missed every one.
        let memo = FillMemo::default();
        for pass in 0..3 {
            let hits = (0..48).filter(|&i| visit(&memo, &key(i), &row(i))).count();
            assert_eq!(hits, if pass == 2 { 48 } else { 0 }, "pass {pass}");
        }
    }

    #[test]
    fn equal_rows_count_once_against_the_bound() {
        // 200 states sharing 4 rows all stay: 4 distinct rows are far below
        // the bound, while 200 rows of their size would be three times it.
        let memo = FillMemo::default();
        for _ in 0..2 {
            for i in 0..200 {
                visit(&memo, &key(i), &row(i % 4));
            }
        }
        assert!((0..200).all(|i| visit(&memo, &key(i), &row(i % 4))));
        let m = memo.memo.lock().unwrap();
        assert_eq!(m.rows.len(), 4);
        assert_eq!(m.bytes, 4 * 4008 * 4);
    }

    #[test]
    fn past_the_bound_the_least_recently_used_rows_go() {
        let memo = FillMemo::default();
        let fit = ROW_BYTES / (4008 * 4); // 65 rows of this size
        for _ in 0..2 {
            for i in 0..fit as u32 + 10 {
                visit(&memo, &key(i), &row(i));
            }
        }
        let m = memo.memo.lock().unwrap();
        assert!(m.bytes <= ROW_BYTES);
        assert_eq!(m.rows.len(), fit);
        // The newest rows are the ones kept.
        for i in 0..10 {
            assert!(m.entries[&key(i)].row.is_none(), "{i}");
        }
        for i in 10..fit as u32 + 10 {
            assert!(m.entries[&key(i)].row.is_some(), "{i}");
        }
    }

    #[test]
    fn a_warm_up_keeps_its_first_rows_and_pushes_nothing_out() {
        // A walk of more distinct rows than fit: the first ones stay (the
        // request meets them first), the rest are not kept.
        let memo = FillMemo::default();
        let fit = ROW_BYTES / (4008 * 4);
        for i in 0..fit as u32 + 10 {
            visit_as(&memo, &key(i), &row(i), true, Asker::WarmUp);
        }
        // A row equal to a kept one costs no room, so it is kept too.
        visit_as(&memo, &key(1000), &row(3), true, Asker::WarmUp);
        assert!((0..fit as u32).all(|i| visit(&memo, &key(i), &row(i))));
        assert!(visit(&memo, &key(1000), &row(3)));
        assert!((fit as u32..fit as u32 + 10).all(|i| !visit(&memo, &key(i), &row(i))));
        // A warm-up notes no new state past the state bound either.
        let memo = FillMemo::default();
        for i in 0..ENTRIES as u32 + 5 {
            visit_as(&memo, &key(i), &row(0), true, Asker::WarmUp);
        }
        let m = memo.memo.lock().unwrap();
        assert_eq!(m.entries.len(), ENTRIES);
        assert!((0..ENTRIES as u32).all(|i| m.entries[&key(i)].row.is_some()));
        drop(m);
        // A request's fills still make room by recency.
        assert!(!visit(&memo, &key(9999), &row(1)));
        assert!(memo.memo.lock().unwrap().entries.contains_key(&key(9999)));
    }

    #[test]
    fn sparse_rows_cost_their_few_bytes_against_the_bound() {
        // A literal's rows (one token allowed): far more of them fit than
        // of dense rows, and each comes back whole.
        let memo = FillMemo::default();
        let fit = ROW_BYTES / (4008 * 4);
        let one = |i: u32| {
            let mut r = vec![0u32; 4008];
            r[(i as usize * 7) % 4008] = 1 << (i % 32);
            r
        };
        let n = (3 * fit).min(ENTRIES) as u32;
        for i in 0..n {
            visit_as(&memo, &key(i), &one(i), true, Asker::WarmUp);
        }
        assert!((0..n).all(|i| visit(&memo, &key(i), &one(i))));
        assert!(memo.memo.lock().unwrap().bytes < ROW_BYTES / 16);
    }

    #[test]
    fn past_the_state_bound_the_least_recently_used_states_go() {
        let memo = FillMemo::default();
        for i in 0..ENTRIES as u32 + 5 {
            visit(&memo, &key(i), &row(0));
        }
        // The oldest sixteenth went at once, to make room for the first
        // state past the bound; the newest stay.
        let m = memo.memo.lock().unwrap();
        let gone = ENTRIES / EVICT_SHARE;
        assert_eq!(m.entries.len(), ENTRIES + 5 - gone);
        assert!((0..gone as u32).all(|i| !m.entries.contains_key(&key(i))));
        let n = ENTRIES as u32 + 5;
        assert!((gone as u32..n).all(|i| m.entries.contains_key(&key(i))));
    }
}
