//! Strided views: whether a view's elements are each their own memory.
//!
//! An array handed in from Python is a pointer, a shape and strides, and
//! nothing makes the strides honest about memory: numpy's `broadcast_to`
//! and torch's `expand` give a dimension stride 0, so a `[1, 2**40]` view
//! of one element costs eight bytes. Copying such a view out costs what its
//! shape claims, 8 TiB there. A view whose elements never share a byte
//! holds every element it claims, so its copy costs at most what the caller
//! already holds; that is the property checked here, for two dimensions,
//! in the two orders arrays are laid out in (rows one after another, C's
//! order, or columns, Fortran's), any sign of stride.
//!
//! The check is sufficient, not necessary: a view interleaving rows and
//! columns some other way is taken as overlapping, which only costs its
//! caller a bound on its size.

/// Whether a `[rows, cols]` view of `size`-byte elements, `strides` bytes
/// apart along each dimension, names some byte twice (a broadcast or
/// overlapping view).
pub fn names_memory_twice(strides: [isize; 2], rows: usize, cols: usize, size: usize) -> bool {
    if rows == 0 || cols == 0 {
        return false;
    }
    let [s0, s1] = strides.map(isize::unsigned_abs);
    // The bytes a line of `len` elements `step` apart spans, and whether
    // its elements are apart at all.
    let line = |len: usize, step: usize| (len - 1).saturating_mul(step).saturating_add(size);
    let apart = |len: usize, step: usize| len == 1 || step >= size;
    let by_rows = apart(cols, s1) && (rows == 1 || s0 >= line(cols, s1));
    let by_columns = apart(rows, s0) && (cols == 1 || s1 >= line(rows, s0));
    !(by_rows || by_columns)
}

#[cfg(test)]
mod tests {
    use super::names_memory_twice;

    fn twice(strides: [isize; 2], rows: usize, cols: usize) -> bool {
        names_memory_twice(strides, rows, cols, 8)
    }

    #[test]
    fn layouts_whose_elements_are_their_own() {
        assert!(!twice([32, 8], 3, 4)); // C order
        assert!(!twice([8, 24], 3, 4)); // Fortran order
        assert!(!twice([64, 16], 3, 4)); // every other column
        assert!(!twice([-32, -8], 3, 4)); // both reversed
        assert!(!twice([0, 8], 1, 4)); // one row: its stride is free
        assert!(!twice([8, 0], 3, 1)); // one column likewise
        assert!(!twice([0, 0], 1, 1));
        assert!(!twice([0, 0], 0, 5)); // empty
        assert!(!twice([0, 0], 5, 0));
    }

    #[test]
    fn broadcast_and_overlapping_views() {
        assert!(twice([8, 0], 1, 1 << 40)); // one element as 2**40
        assert!(twice([0, 8], 1 << 40, 2)); // one row as 2**40
        assert!(twice([8, 8], 3, 4)); // rows starting one element apart
        assert!(twice([24, 8], 3, 4)); // rows overlapping by one element
        assert!(twice([32, 4], 3, 4)); // elements overlapping inside a row
        assert!(twice([isize::MIN, 8], 2, usize::MAX)); // saturates, no overflow
    }
}
