//! Class runs of a vocabulary: for a few byte classes that schemas repeat a
//! fixed number of times (hex digits, digits, letters and digits, base64),
//! the tokens made only of the class's bytes, by length, and the trie nodes
//! where such a path first leaves the class.
//!
//! A pattern such as `[0-9A-Za-z]{8}-[0-9A-Za-z]{4}` (a UUID in 245 dev-split
//! schemas; hex digits in 3,300) is a run of DFA states: after `j` of the
//! eight characters, every byte of the class leads to the same next state.
//! Each place in the run is a new state, and
//! its first fill walked every trie node whose path is in the class, up to
//! the run's length: 17,709 tokens allowed after three characters on
//! Llama-3's vocabulary, a walk of 200-350 us per character position, the
//! slowest fills of fresh dev-split schemas at small batch.
//!
//! With `r` characters of the run left, the tokens such a state allows are
//! known without a walk: every token of at most `r` class bytes (a shared
//! row, `ClassRun::tokens_up_to`), and what each place's state allows below
//! the nodes of that many class bytes and one other byte (`exits_after`:
//! 400-1,000 nodes in all, per class, on Llama-3's vocabulary, besides the
//! root's children). The lexer entries use them in `cfg::classentry`.
//!
//! Built with the vocabulary, off every request's path: one pass over the
//! trie for all the classes at once, 1.1 MB of rows on Llama-3's vocabulary.

use std::sync::Arc;

use crate::regex_dfa::ByteSet;
use crate::trie::TokenTrie;

/// The classes, as byte ranges. Counts of counted repeats in the dev
/// split's patterns: lower-case hex 1,750, mixed-case hex 1,580, digits
/// 1,160, letters and digits 270, base64url 130, letters 80, base64 46, and
/// the rest tens; formats add digits (dates, times) and hex (`uuid`).
const CLASSES: [&[(u8, u8)]; 13] = [
    &[(b'0', b'9')],
    &[(b'0', b'9'), (b'a', b'f')],
    &[(b'0', b'9'), (b'A', b'F')],
    &[(b'0', b'9'), (b'A', b'F'), (b'a', b'f')],
    &[(b'0', b'9'), (b'A', b'Z'), (b'a', b'z')],
    &[(b'a', b'z')],
    &[(b'A', b'Z')],
    &[(b'A', b'Z'), (b'a', b'z')],
    &[(b'0', b'9'), (b'a', b'z')],
    &[(b'0', b'9'), (b'A', b'Z')],
    &[(b'0', b'9'), (b'A', b'Z'), (b'_', b'_'), (b'a', b'z')],
    &[(b'+', b'+'), (b'/', b'9'), (b'A', b'Z'), (b'a', b'z')],
    &[
        (b'-', b'-'),
        (b'0', b'9'),
        (b'A', b'Z'),
        (b'_', b'_'),
        (b'a', b'z'),
    ],
];

// A node's classes are a `u16` of bits, one per class.
const _: () = assert!(CLASSES.len() < 16);

/// Rows a class keeps at most: a vocabulary of nothing but digits would
/// otherwise keep a row per quarter row of tokens (16 bytes a token per
/// class), where this bounds all the classes' rows at 13 bytes a token.
const MAX_ROWS: usize = 8;

/// One class's tokens and exits.
#[derive(Debug)]
pub struct ClassRun {
    bytes: ByteSet,
    /// The same bytes, in order.
    members: Vec<u8>,
    /// The deepest trie node whose path is all class bytes: no walk of a
    /// run longer than this meets the run's end.
    depth: usize,
    /// The class's tokens by length: those of `n` bytes are
    /// `ids[starts[n]..starts[n + 1]]` (`starts` has `depth + 2` entries).
    ids: Vec<u32>,
    starts: Vec<u32>,
    /// `(n, row)` by increasing `n`: every class token of at most `n`
    /// bytes, as the start of a bitmask row (its words cover the
    /// vocabulary's tokens). A row is kept where at least a quarter of a
    /// row's words in tokens came since the last one (fewer stay a list),
    /// and at most `MAX_ROWS` of them.
    rows: Vec<(usize, Arc<[u32]>)>,
    /// `exits[j]`: the nodes whose path is `j` class bytes and then one
    /// byte outside the class, as `(that byte, node)` sorted (`exits[0]`:
    /// the root's children on bytes outside the class).
    exits: Vec<Vec<(u8, u32)>>,
}

impl ClassRun {
    /// The class's bytes, in order.
    pub fn members(&self) -> &[u8] {
        &self.members
    }

    /// The length of the longest path of class bytes in the trie.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// The class tokens of at most `n` bytes: the widest row of some of
    /// them (None where no row is short enough), and the ids past it.
    pub fn tokens_up_to(&self, n: usize) -> (Option<&Arc<[u32]>>, &[u32]) {
        let n = n.min(self.depth);
        let row = self.rows.iter().rev().find(|(len, _)| *len <= n);
        let from = row.map_or(1, |(len, _)| len + 1);
        let ids = &self.ids[self.starts[from.min(n + 1)] as usize..self.starts[n + 1] as usize];
        (row.map(|(_, r)| r), ids)
    }

    /// The nodes after `j` class bytes and one other byte, as `(byte,
    /// node)` sorted by byte (none past `depth`).
    pub fn exits_after(&self, j: usize) -> &[(u8, u32)] {
        self.exits.get(j).map_or(&[], |e| e.as_slice())
    }
}

/// Every class's run tables for one vocabulary.
#[derive(Debug)]
pub struct ClassRuns {
    runs: Vec<ClassRun>,
}

impl ClassRuns {
    /// The tables of `trie`, whose token ids are below `words` * 32.
    pub fn new(trie: &TokenTrie, words: usize) -> Self {
        let classes: Vec<ByteSet> = CLASSES.iter().map(|ranges| byte_set(ranges)).collect();
        // Per byte, the classes it is in (bit k: class k).
        let mut member = [0u16; 256];
        for (k, class) in classes.iter().enumerate() {
            for b in 0..=255u8 {
                if class.contains(b) {
                    member[b as usize] |= 1 << k;
                }
            }
        }
        // Per node, the classes its whole path is in (the root's: all).
        let nodes = trie.num_nodes();
        let mut within = vec![0u16; nodes];
        within[0] = (1 << classes.len()) - 1;
        let mut by_len: Vec<Vec<Vec<u32>>> = vec![Vec::new(); classes.len()];
        let mut exits: Vec<Vec<Vec<(u8, u32)>>> = vec![Vec::new(); classes.len()];
        for node in 1..nodes {
            let parent = trie.parent(node);
            let byte = trie.byte(node);
            let depth = trie.depth(node);
            let here = within[parent] & member[byte as usize];
            within[node] = here;
            for k in bits(here) {
                let lens = &mut by_len[k];
                if lens.len() <= depth {
                    lens.resize(depth + 1, Vec::new());
                }
                lens[depth].extend_from_slice(trie.node_tokens(node));
            }
            for k in bits(within[parent] & !member[byte as usize]) {
                let at = &mut exits[k];
                if at.len() < depth {
                    at.resize(depth, Vec::new());
                }
                at[depth - 1].push((byte, node as u32));
            }
        }
        let runs = classes
            .into_iter()
            .zip(by_len)
            .zip(exits)
            .map(|((bytes, by_len), mut exits)| {
                exits.iter_mut().for_each(|e| e.sort_unstable());
                ClassRun::new(bytes, by_len, exits, words)
            })
            .collect();
        ClassRuns { runs }
    }

    /// The tables of the class of exactly `bytes`, if it has any.
    pub fn of(&self, bytes: &ByteSet) -> Option<&ClassRun> {
        self.runs.iter().find(|r| r.bytes == *bytes)
    }

    /// Bytes the rows take.
    pub fn memory_bytes(&self) -> usize {
        (self.runs.iter())
            .map(|r| {
                let rows: usize = r.rows.iter().map(|(_, row)| row.len() * 4).sum();
                let exits: usize = r.exits.iter().map(|e| e.len() * 8).sum();
                rows + exits + (r.ids.len() + r.starts.len()) * 4
            })
            .sum()
    }
}

impl ClassRun {
    fn new(
        bytes: ByteSet,
        by_len: Vec<Vec<u32>>,
        exits: Vec<Vec<(u8, u32)>>,
        words: usize,
    ) -> Self {
        let depth = by_len.len().saturating_sub(1);
        let mut ids = Vec::new();
        let mut starts = vec![0u32; depth + 2];
        for (n, lens) in by_len.iter().enumerate() {
            starts[n] = ids.len() as u32;
            ids.extend_from_slice(lens);
        }
        starts[depth + 1] = ids.len() as u32;
        let mut rows = Vec::new();
        let mut row = vec![0u32; words];
        let mut since = 0;
        let between = (words / 4).max(ids.len().div_ceil(MAX_ROWS)).max(1);
        for n in 1..=depth {
            let at_n = &ids[starts[n] as usize..starts[n + 1] as usize];
            at_n.iter()
                .for_each(|&t| row[t as usize / 32] |= 1 << (t % 32));
            since += at_n.len();
            if since >= between {
                let end = row.iter().rposition(|&w| w != 0).map_or(0, |i| i + 1);
                rows.push((n, Arc::from(&row[..end])));
                since = 0;
            }
        }
        // `exits[j]` for every j up to `depth` (the build made them up to
        // the deepest exit's).
        let mut exits = exits;
        exits.resize(depth + 1, Vec::new());
        ClassRun {
            members: (0..=255u8).filter(|&b| bytes.contains(b)).collect(),
            bytes,
            depth,
            ids,
            starts,
            rows,
            exits,
        }
    }
}

/// The set of bytes in `ranges`.
fn byte_set(ranges: &[(u8, u8)]) -> ByteSet {
    let mut set = ByteSet::default();
    for &(lo, hi) in ranges {
        (lo..=hi).for_each(|b| set.insert(b));
    }
    set
}

/// The indices of the set bits of `mask`.
fn bits(mut mask: u16) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        (mask != 0).then(|| {
            let k = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            k
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::testing::random_vocab;

    /// Every class's tables against the tokens and paths themselves: the
    /// tokens of at most `n` class bytes for every `n`, the deepest class
    /// path, and the nodes of `j` class bytes and one other.
    #[test]
    fn tables_hold_what_the_tokens_say() {
        let vocab = random_vocab(b"09afAFzZ_-+/. \"", 4000, 12, 9);
        let trie = vocab.trie();
        let words = vocab.num_tokens().div_ceil(32);
        let runs = ClassRuns::new(trie, words);
        let tokens: Vec<&[u8]> = (0..vocab.num_tokens() as u32)
            .map(|id| vocab.token_bytes(id).unwrap())
            .collect();
        let mut rows = 0;
        for ranges in CLASSES {
            let class = byte_set(ranges);
            let run = runs.of(&class).expect("every class has tables");
            let within = |b: &[u8]| b.iter().all(|&c| class.contains(c));
            let deepest = (1..trie.num_nodes())
                .filter(|&n| within(trie.path(n)))
                .map(|n| trie.depth(n))
                .max()
                .unwrap_or(0);
            assert_eq!(run.depth(), deepest);
            for n in 0..=deepest + 2 {
                let (row, ids) = run.tokens_up_to(n);
                let mut got: Vec<u32> = ids.to_vec();
                if let Some(row) = row {
                    rows += 1;
                    got.extend(crate::bitmask::iter_set_bits(row));
                }
                got.sort_unstable();
                let want: Vec<u32> = (0..tokens.len() as u32)
                    .filter(|&t| within(tokens[t as usize]) && tokens[t as usize].len() <= n)
                    .collect();
                assert_eq!(got, want, "{ranges:?} up to {n}");
            }
            for j in 0..=deepest + 1 {
                let mut want: Vec<(u8, u32)> = (1..trie.num_nodes())
                    .filter(|&n| {
                        let p = trie.path(n);
                        p.len() == j + 1 && within(&p[..j]) && !class.contains(p[j])
                    })
                    .map(|n| (trie.byte(n), n as u32))
                    .collect();
                want.sort_unstable();
                assert_eq!(run.exits_after(j), want.as_slice(), "{ranges:?} after {j}");
            }
        }
        assert!(rows > 0, "some class has a row");
        assert!(runs.memory_bytes() > 0);
    }

    /// A vocabulary of nothing but digit strings keeps at most `MAX_ROWS`
    /// rows a class, and its tables still say what the tokens do.
    #[test]
    fn a_vocabulary_of_one_class_keeps_few_rows() {
        let vocab = random_vocab(b"0123456789", 20_000, 12, 3);
        let words = vocab.num_tokens().div_ceil(32);
        let runs = ClassRuns::new(vocab.trie(), words);
        for run in &runs.runs {
            assert!(run.rows.len() <= MAX_ROWS, "{} rows", run.rows.len());
        }
        let digits = runs.of(&byte_set(&[(b'0', b'9')])).unwrap();
        let (row, ids) = digits.tokens_up_to(usize::MAX);
        let held = row.map_or(0, |r| crate::bitmask::iter_set_bits(r).count());
        assert_eq!(held + ids.len(), vocab.num_tokens());
        assert!(runs.memory_bytes() < 13 * 8 * words * 4 + 64 * vocab.num_tokens());
    }
}
