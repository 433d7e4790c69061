//! Mask rows shared by content, process-wide.
//!
//! The fill memos of different grammars keep many equal rows: inside a JSON
//! string, at the start of a string value, after a member's comma, the mask
//! depends on the vocabulary and the JSON syntax, not on the schema (walking
//! 200 fresh dev-split schemas on Llama-3, 27,576 fills gave 2,793 distinct
//! rows, and 50 of them were 64% of all fills). One grammar meets about a
//! hundred states per text but a third as many distinct rows. So a memo
//! keeps an `Arc` of a row interned here: a row equal to one some memo
//! holds costs no memory, and many states of a grammar share one row's
//! bytes (see `fillmemo`, which bounds its own distinct rows).
//!
//! The table holds each row's `Arc` by the hash of its content, and drops
//! the rows no memo holds any more whenever it has doubled since it last
//! did: it holds at most twice the most the memos held since (a sweep runs
//! only when a row is added, so rows of grammars that were dropped stay
//! until the next one). Two rows with
//! the same hash and different content keep only the newer here: the older
//! stays valid in the memos that hold it, it is just not shared.

use std::hash::Hasher;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use rustc_hash::{FxHashMap, FxHasher};

#[derive(Default)]
struct Table {
    by_hash: FxHashMap<u64, Arc<[u32]>>,
    /// Rows held after the last sweep (the next one comes at twice that).
    live_after_sweep: usize,
}

/// Rows below this many sweep nothing: a sweep reads every entry.
const MIN_SWEEP: usize = 256;

fn table() -> &'static Mutex<Table> {
    static TABLE: OnceLock<Mutex<Table>> = OnceLock::new();
    TABLE.get_or_init(Mutex::default)
}

/// A hash of the row's words in four independent lanes, so that it runs at
/// memory speed: FxHasher's single chain of multiplies was 90% of a store,
/// and a warm-up walk stores a 16 KB row at nearly every token. Equal hashes
/// are confirmed by comparing the rows, so its quality only decides sharing.
fn content_hash(row: &[u32]) -> u64 {
    const K: [u64; 4] = [
        0x9e37_79b9_7f4a_7c15,
        0xc2b2_ae3d_27d4_eb4f,
        0x1656_67b1_9e37_79f9,
        0x27d4_eb2f_1656_67c5,
    ];
    let mut lanes = [0u64; 4];
    let mut chunks = row.chunks_exact(8);
    for c in &mut chunks {
        for (i, lane) in lanes.iter_mut().enumerate() {
            let w = u64::from(c[2 * i]) | u64::from(c[2 * i + 1]) << 32;
            *lane = lane.rotate_left(23) ^ w.wrapping_mul(K[i]);
        }
    }
    let mut h = FxHasher::default();
    h.write_usize(row.len());
    for lane in lanes {
        h.write_u64(lane);
    }
    for &w in chunks.remainder() {
        h.write_u32(w);
    }
    h.finish()
}

/// The shared row equal to `row`, made if there is none.
pub fn intern(row: &[u32]) -> Arc<[u32]> {
    let hash = content_hash(row);
    // A panic elsewhere while holding the lock leaves the table consistent
    // (every step below is a single map operation), so a poisoned lock is
    // used as it is.
    let mut t = table().lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(kept) = t.by_hash.get(&hash) {
        if **kept == *row {
            return kept.clone();
        }
    }
    let made: Arc<[u32]> = row.into();
    t.by_hash.insert(hash, made.clone());
    if t.by_hash.len() >= MIN_SWEEP.max(2 * t.live_after_sweep) {
        t.by_hash.retain(|_, r| Arc::strong_count(r) > 1);
        t.live_after_sweep = t.by_hash.len();
    }
    made
}

/// Rows the table holds now (for tests).
#[cfg(test)]
fn held() -> usize {
    table()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .by_hash
        .len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_rows_are_one_allocation_and_unequal_rows_are_not() {
        let a = intern(&[1, 2, 3, 0xdead_beef]);
        let b = intern(&[1, 2, 3, 0xdead_beef]);
        let c = intern(&[1, 2, 3, 0xdead_bee0]);
        let d = intern(&[1, 2, 3]);
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(*c, [1, 2, 3, 0xdead_bee0]);
        assert_eq!(*d, [1, 2, 3]);
    }

    #[test]
    fn rows_nobody_holds_are_swept() {
        // Other tests intern concurrently, so only a bound is checked: after
        // thousands of rows dropped at once, the table holds about what is
        // still held (at most twice, plus what other tests keep).
        let kept: Vec<Arc<[u32]>> = (0..100u32).map(|i| intern(&[i, 0x5eed_0001])).collect();
        for i in 0..10_000u32 {
            drop(intern(&[i, 0x5eed_0002]));
        }
        assert!(
            held() < 2 * MIN_SWEEP.max(2 * kept.len()) + 1_000,
            "{}",
            held()
        );
        for (i, k) in kept.iter().enumerate() {
            assert!(Arc::ptr_eq(k, &intern(&[i as u32, 0x5eed_0001])));
        }
    }
}
