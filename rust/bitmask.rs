//! The bitmask contract (DESIGN.md §2): token `t` is allowed iff bit `t % 32`
//! of word `t / 32` is set; rows are `ceil(vocab_size / 32)` words wide.

/// Number of 32-bit words needed for `vocab_size` bits.
#[inline]
pub fn words_for(vocab_size: usize) -> usize {
    vocab_size.div_ceil(32)
}

#[inline]
pub fn set_bit(row: &mut [u32], token: u32) {
    row[(token >> 5) as usize] |= 1u32 << (token & 31);
}

#[inline]
pub fn clear_bit(row: &mut [u32], token: u32) {
    row[(token >> 5) as usize] &= !(1u32 << (token & 31));
}

#[inline]
pub fn get_bit(row: &[u32], token: u32) -> bool {
    row[(token >> 5) as usize] & (1u32 << (token & 31)) != 0
}

/// Iterates over the ids of set bits, in increasing order.
pub fn iter_set_bits(row: &[u32]) -> impl Iterator<Item = u32> + '_ {
    row.iter().enumerate().flat_map(|(w, &word)| {
        let mut bits = word;
        std::iter::from_fn(move || {
            if bits == 0 {
                return None;
            }
            let b = bits.trailing_zeros();
            bits &= bits - 1;
            Some((w as u32) * 32 + b)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_up() {
        assert_eq!(words_for(0), 0);
        assert_eq!(words_for(1), 1);
        assert_eq!(words_for(32), 1);
        assert_eq!(words_for(33), 2);
        assert_eq!(words_for(128_256), 4008);
    }

    #[test]
    fn bits_roundtrip() {
        let mut row = vec![0u32; 3];
        for t in [0u32, 31, 32, 63, 70] {
            set_bit(&mut row, t);
        }
        assert!(get_bit(&row, 31) && get_bit(&row, 32) && !get_bit(&row, 33));
        assert_eq!(
            iter_set_bits(&row).collect::<Vec<_>>(),
            vec![0, 31, 32, 63, 70]
        );
    }
}
