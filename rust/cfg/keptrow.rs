//! A mask row as the fill memo keeps it: its words, or only the words that
//! differ from all zeros or all ones.
//!
//! Many of a JSON grammar's rows allow a handful of tokens (inside a key,
//! a keyword, a tag's name: a literal goes on) or all but a handful, yet
//! a row of a 128K-token vocabulary is 16 KB whatever it holds. The memo
//! bounds the bytes of the rows one grammar keeps (`fillmemo::ROW_BYTES`),
//! so at 16 KB a row a long warm-up walk ran out of room after 64 distinct
//! rows, and the request then met its later states cold (walking 150 fresh
//! dev-split schemas along their samples: 42% of distinct rows had at most
//! 16 bits unlike all zeros or all ones, 14% of the samples met more than
//! 64 distinct rows). Kept as the words that differ, such a row costs tens
//! of bytes, and writing it back is a `fill` plus a few words instead of a
//! 16 KB copy (which, cache cold, was most of a hit's time).
//!
//! Dense rows are interned by content (`sharedrows`): equal rows across
//! states and grammars are one allocation. Sparse ones are too small to be
//! worth the hash.

use std::sync::Arc;

use super::sharedrows;

/// A row is kept sparse when at most one word in this many differs from
/// its base (so it costs at most a 32nd of its dense bytes: a word and
/// its index per difference). Rows are either side of it by far: of the
/// distinct rows 150 fresh dev-split schemas' samples met, 48% had at most
/// 62 such words of 4,008, 0.5% between 63 and 250, the rest more; and the
/// lower the limit, the sooner a dense row is told.
const SPARSE_RATIO: usize = 64;

/// The words of a row that differ from `base` (all zeros or all ones).
#[derive(Debug, PartialEq, Eq)]
pub struct SparseRow {
    len: usize,
    base: u32,
    /// (word index, word), ascending.
    words: Box<[(u32, u32)]>,
}

#[derive(Clone, Debug)]
pub enum KeptRow {
    Dense(Arc<[u32]>),
    Sparse(Arc<SparseRow>),
}

impl KeptRow {
    /// `row` as it is best kept: sparse where few words differ from all
    /// zeros or all ones, else interned.
    pub fn of(row: &[u32]) -> Self {
        match sparse(row) {
            Some(s) => KeptRow::Sparse(Arc::new(s)),
            None => KeptRow::Dense(sharedrows::intern(row)),
        }
    }

    /// The row's length in words.
    pub fn len(&self) -> usize {
        match self {
            KeptRow::Dense(r) => r.len(),
            KeptRow::Sparse(s) => s.len,
        }
    }

    /// Writes the row into `out` (of `self.len()` words).
    pub fn write_to(&self, out: &mut [u32]) {
        match self {
            KeptRow::Dense(r) => out.copy_from_slice(r),
            KeptRow::Sparse(s) => {
                out.fill(s.base);
                for &(i, w) in s.words.iter() {
                    out[i as usize] = w;
                }
            }
        }
    }

    /// The bytes it holds, as the memo's bound counts them.
    pub fn bytes(&self) -> usize {
        match self {
            KeptRow::Dense(r) => r.len() * 4,
            KeptRow::Sparse(s) => s.words.len() * 8 + std::mem::size_of::<SparseRow>(),
        }
    }

    /// What tells kept rows apart in the memo's count of distinct rows: the
    /// allocation (equal dense rows are one, see `sharedrows`).
    pub fn address(&self) -> usize {
        match self {
            KeptRow::Dense(r) => Arc::as_ptr(r) as *const u32 as usize,
            KeptRow::Sparse(s) => Arc::as_ptr(s) as usize,
        }
    }
}

/// `row` as the words unlike its base, if few enough differ.
fn sparse(row: &[u32]) -> Option<SparseRow> {
    let limit = row.len() / SPARSE_RATIO;
    // Words unlike all zeros, and unlike all ones, counted in chunks so a
    // dense row is told after its first chunk or two; 32-bit counts and
    // reductions free of branches let the loops vectorize (a test and a
    // branch per word made this a seventh of a structural tag's compile
    // and warm-up walk).
    let (mut not_zero, mut not_ones) = (0usize, 0usize);
    for chunk in row.chunks(128) {
        not_zero += chunk.iter().map(|&w| u32::from(w != 0)).sum::<u32>() as usize;
        not_ones += chunk.iter().map(|&w| u32::from(w != u32::MAX)).sum::<u32>() as usize;
        if not_zero > limit && not_ones > limit {
            return None;
        }
    }
    let (base, differ) = if not_zero <= not_ones {
        (0, not_zero)
    } else {
        (u32::MAX, not_ones)
    };
    let mut words = Vec::with_capacity(differ);
    for (c, chunk) in row.chunks(16).enumerate() {
        if chunk.iter().fold(0, |acc, &w| acc | (w ^ base)) == 0 {
            continue;
        }
        let at = c * 16;
        words.extend(
            (chunk.iter().enumerate())
                .filter(|&(_, &w)| w != base)
                .map(|(i, &w)| ((at + i) as u32, w)),
        );
    }
    let words = words.into_boxed_slice();
    Some(SparseRow {
        len: row.len(),
        base,
        words,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(row: &[u32]) -> KeptRow {
        let kept = KeptRow::of(row);
        let mut out = vec![0x5a5a_5a5a; row.len()];
        kept.write_to(&mut out);
        assert_eq!(out, row);
        assert_eq!(kept.len(), row.len());
        kept
    }

    #[test]
    fn rows_come_back_as_they_went_in() {
        let n = 4008;
        // A few tokens allowed; all but a few (the last word's padding
        // bits clear, as a real row has them); dense; empty; tiny rows.
        let mut few = vec![0u32; n];
        few[3] = 0b1010;
        few[4007] = 1;
        let mut most = vec![u32::MAX; n];
        most[0] = !1;
        most[4007] = 0x0000_ffff;
        let dense: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(0x9e37_79b9)).collect();
        for row in [
            &few[..],
            &most,
            &dense,
            &vec![0; n],
            &vec![u32::MAX; n],
            &[7],
            &[],
        ] {
            round_trip(row);
        }
        assert!(matches!(round_trip(&few), KeptRow::Sparse(_)));
        assert!(matches!(round_trip(&most), KeptRow::Sparse(_)));
        assert!(matches!(round_trip(&dense), KeptRow::Dense(_)));
        assert!(round_trip(&few).bytes() < 100);
        assert_eq!(round_trip(&dense).bytes(), n * 4);
    }

    #[test]
    fn sparse_exactly_up_to_the_ratio() {
        let n = 4000;
        let limit = n / SPARSE_RATIO;
        for (differ, is_sparse) in [(limit, true), (limit + 1, false)] {
            let mut row = vec![0u32; n];
            for w in row.iter_mut().step_by(n / differ).take(differ) {
                *w = 0x100;
            }
            assert_eq!(row.iter().filter(|&&w| w != 0).count(), differ);
            let kept = round_trip(&row);
            assert_eq!(matches!(kept, KeptRow::Sparse(_)), is_sparse, "{differ}");
        }
    }
}
