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
    logits
        .par_chunks_mut(vocab)
        .enumerate()
        .filter(|(r, _)| selected[*r])
        .for_each(|(r, row)| {
            let mask: &[u32] = mask_rows.get(r).copied().unwrap_or(&[]);
            apply_row(row, mask, neg_inf)
        });
}

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
