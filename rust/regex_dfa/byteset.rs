//! Sets of bytes: a 256-bit set, for what may follow a lexeme, what
//! starts a DFA's matches, and bytes a walk may skip.

/// A set of bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ByteSet([u64; 4]);

impl ByteSet {
    pub fn insert(&mut self, b: u8) {
        self.0[b as usize >> 6] |= 1 << (b & 63);
    }

    pub fn contains(&self, b: u8) -> bool {
        self.0[b as usize >> 6] & (1 << (b & 63)) != 0
    }

    pub fn is_empty(&self) -> bool {
        self.0 == [0; 4]
    }

    /// Adds `other`'s bytes; true if that added any.
    pub fn union_with(&mut self, other: &ByteSet) -> bool {
        let before = self.0;
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a |= b;
        }
        self.0 != before
    }

    /// The set as eight 32-bit words.
    pub fn words(&self) -> [u32; 8] {
        let mut out = [0u32; 8];
        for (i, w) in self.0.iter().enumerate() {
            out[2 * i] = *w as u32;
            out[2 * i + 1] = (*w >> 32) as u32;
        }
        out
    }

    pub fn intersects(&self, other: &ByteSet) -> bool {
        self.0.iter().zip(other.0).any(|(a, b)| a & b != 0)
    }
}
