//! Applying a bitmask to CPU logits in place: every disallowed column gets the
//! bit pattern of -inf. Logits are handled as raw bit patterns (`u16` for
//! float16/bfloat16, `u32` for float32), so one generic loop serves all three.

use rayon::prelude::*;

/// Writes `neg_inf` into `logits[r][t]` wherever bit `t` of `bitmask[r]` is 0
/// (and for columns past the bitmask's width). `logits` has rows of `vocab`
/// elements; `bitmask` rows of `words` words; only `rows` are touched.
pub fn apply_bitmask<T: Copy + Send + Sync>(
    logits: &mut [T],
    vocab: usize,
    bitmask: &[u32],
    words: usize,
    rows: &[usize],
    neg_inf: T,
) {
    if vocab == 0 {
        return;
    }
    let mask_rows: Vec<&[u32]> = if words == 0 {
        Vec::new()
    } else {
        bitmask.chunks(words).collect()
    };
    let mut selected = vec![false; logits.len() / vocab];
    for &r in rows {
        selected[r] = true;
    }
    let apply = |(r, row): (usize, &mut [T])| {
        let mask: &[u32] = mask_rows.get(r).copied().unwrap_or(&[]);
        apply_row(row, mask, neg_inf)
    };
    if rows.len().saturating_mul(vocab) < PARALLEL_FROM {
        logits
            .chunks_mut(vocab)
            .enumerate()
            .filter(|(r, _)| selected[*r])
            .for_each(apply);
    } else {
        logits
            .par_chunks_mut(vocab)
            .enumerate()
            .filter(|(r, _)| selected[*r])
            .for_each(apply);
    }
}

/// Logits masked on the calling thread below this many (a few 128k-token
/// rows): waking the thread pool costs more than the work, which runs at
/// about a nanosecond per logit.
pub const PARALLEL_FROM: usize = 1 << 20;

fn apply_row<T: Copy>(row: &mut [T], mask: &[u32], neg_inf: T) {
    let covered = row.len().min(mask.len() * 32);
    for (w, chunk) in row[..covered].chunks_mut(32).enumerate() {
        let word = mask[w];
        match word {
            u32::MAX => {}
            0 => chunk.fill(neg_inf),
            // Branch-free select: mixed words have unpredictable bits, and a
            // data-dependent branch per element costs far more than a store.
            // A fixed-size chunk lets the compiler unroll and vectorise it.
            _ => match <&mut [T; 32]>::try_from(&mut *chunk) {
                Ok(full) => select32(full, word, neg_inf),
                Err(_) => {
                    for (b, x) in chunk.iter_mut().enumerate() {
                        *x = if (word >> b) & 1 != 0 { *x } else { neg_inf };
                    }
                }
            },
        }
    }
    row[covered..].fill(neg_inf);
}

#[inline]
fn select32<T: Copy>(chunk: &mut [T; 32], word: u32, neg_inf: T) {
    for (b, x) in chunk.iter_mut().enumerate() {
        *x = if (word >> b) & 1 != 0 { *x } else { neg_inf };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both sides of `PARALLEL_FROM` against a per-logit reference: random
    /// words, one all-zero and one all-one word per row, columns past the
    /// mask, and only some rows selected.
    #[test]
    fn parallel_and_sequential_paths_mask_alike() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u32
        };
        for (rows, vocab) in [(3, 1000), (9, PARALLEL_FROM / 8 + 77)] {
            let words = vocab / 32 - 1; // the last columns lie past the mask
            let mut bitmask: Vec<u32> = (0..rows * words).map(|_| next()).collect();
            bitmask[0] = 0;
            bitmask[words + 1] = u32::MAX;
            let original: Vec<u32> = (0..(rows * vocab) as u32).collect();
            let selected: Vec<usize> = (0..rows).filter(|r| r % 3 != 1).collect();
            let mut logits = original.clone();
            apply_bitmask(&mut logits, vocab, &bitmask, words, &selected, u32::MAX);
            for r in 0..rows {
                for t in 0..vocab {
                    let i = r * vocab + t;
                    let allowed =
                        t < 32 * words && bitmask[r * words + t / 32] >> (t % 32) & 1 == 1;
                    let want = if selected.contains(&r) && !allowed {
                        u32::MAX
                    } else {
                        original[i]
                    };
                    assert_eq!(
                        logits[i], want,
                        "rows {rows} vocab {vocab}: row {r} token {t}"
                    );
                }
            }
        }
    }

    #[test]
    fn masks_selected_rows_and_columns_past_the_mask() {
        let mut logits = vec![1u16; 2 * 40];
        let bitmask = [0b101u32, 0b1, 0xFFFF_FFFF, 0];
        // Row 0 masked with words [0b101, 0b1]; row 1 untouched.
        apply_bitmask(&mut logits, 40, &bitmask[..2], 2, &[0], 9);
        let row0: Vec<u16> = logits[..40].to_vec();
        assert_eq!(row0[0], 1);
        assert_eq!(row0[1], 9);
        assert_eq!(row0[2], 1);
        assert_eq!(row0[32], 1);
        assert_eq!(row0[33], 9);
        assert!(logits[40..].iter().all(|&x| x == 1));
        let mut wide = vec![1u32; 40];
        apply_bitmask(&mut wide, 40, &[u32::MAX], 1, &[0], 7);
        assert!(wide[..32].iter().all(|&x| x == 1) && wide[32..].iter().all(|&x| x == 7));
    }
}
