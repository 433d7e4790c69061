//! A tokenizer's vocabulary as maskpar sees it: exact bytes per token id, which
//! ids are EOS or special, the model's logits width, and the token trie.
//!
//! The vocabulary sits below the engines: data flows grammar text -> AST ->
//! compiled grammar -> matcher state -> bitmask row -> batch, and each of
//! those reads the vocabulary, never the other way round. What an engine
//! keeps per vocabulary (the CFG engine's lexer cache, shared by every
//! grammar over it) lives in an opaque slot here whose type the engine
//! owns (see `EngineSlot`).

use crate::classruns::ClassRuns;
use crate::error::{Error, Result};
use crate::invalid;
use crate::slices::TextSlices;
use crate::trie::TokenTrie;
use std::any::Any;
use std::fmt;
use std::sync::OnceLock;

/// Largest logits width supported (token ids are u32 and bitmask words i32).
pub const MAX_VOCAB_SIZE: usize = 1 << 30;

#[derive(Debug)]
pub struct Vocab {
    tokens: Vec<Vec<u8>>,
    /// True for ids that text can never produce: special, EOS, empty.
    never_text: Vec<bool>,
    is_special: Vec<bool>,
    eos: Vec<u32>,
    vocab_size: usize,
    trie: TokenTrie,
    /// What the grammar engine keeps per vocabulary (`cfg::lexcache`).
    engine: EngineSlot,
    /// Built with the vocabulary, off every request's path (string-like
    /// lexemes need them on their first fill; building them there cost that
    /// fill tens of milliseconds).
    text_slices: TextSlices,
    /// Built with the vocabulary too: the class-run tables (`classruns`).
    class_runs: ClassRuns,
}

/// State an engine above the vocabulary keeps for every grammar over it,
/// made on first use. Type-erased so that the dependency goes one way: the
/// engine (`cfg::lexcache`, whose shared lexer cache is kept here) names the
/// vocabulary and its own type, the vocabulary names neither. A generic
/// `Vocab<T>` would carry the engine's type through every user of the
/// vocabulary, and a cache kept beside the vocabulary (a registry keyed by
/// it) would need its own lifetime management; one slot that lives and dies
/// with the vocabulary is all the one engine that keeps such state needs.
pub struct EngineSlot(OnceLock<Box<dyn Any + Send + Sync>>);

impl fmt::Debug for EngineSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = if self.0.get().is_some() {
            "set"
        } else {
            "empty"
        };
        write!(f, "EngineSlot({state})")
    }
}

impl Vocab {
    /// The engine state of type `T` kept with this vocabulary, made by
    /// `init` on first use. None if the slot already holds another type
    /// (the caller then goes without: the state is a cache).
    pub fn engine_state<T: Any + Send + Sync>(&self, init: impl FnOnce() -> T) -> Option<&T> {
        let state = self.engine.0.get_or_init(|| Box::new(init()));
        state.downcast_ref::<T>()
    }

    /// The text tokens by length in characters (see `slices`).
    pub fn text_slices(&self) -> &TextSlices {
        &self.text_slices
    }

    /// The tokens and exits of runs of common byte classes (see `classruns`).
    pub fn class_runs(&self) -> &ClassRuns {
        &self.class_runs
    }

    /// `tokens[i]` is the exact byte string of id `i`. `vocab_size` (the model's
    /// logits width) defaults to `tokens.len()` and may exceed it (padding).
    pub fn new(
        tokens: Vec<Vec<u8>>,
        eos_token_ids: &[u32],
        special_token_ids: &[u32],
        vocab_size: Option<usize>,
    ) -> Result<Self> {
        let n = tokens.len();
        let vocab_size = vocab_size.unwrap_or(n);
        if n == 0 {
            return invalid!("the token list is empty");
        }
        if vocab_size < n {
            return invalid!("vocab_size {vocab_size} is smaller than the number of tokens ({n})");
        }
        if vocab_size > MAX_VOCAB_SIZE {
            return Err(Error::LimitExceeded(format!(
                "vocab_size {vocab_size} exceeds the supported maximum {MAX_VOCAB_SIZE}"
            )));
        }
        let mut is_special = vec![false; n];
        for &id in special_token_ids {
            if id as usize >= n {
                return invalid!(
                    "special token id {id} is out of range (the vocabulary has {n} tokens)"
                );
            }
            is_special[id as usize] = true;
        }
        let mut eos: Vec<u32> = Vec::with_capacity(eos_token_ids.len());
        for &id in eos_token_ids {
            if id as usize >= n {
                return invalid!(
                    "EOS token id {id} is out of range (the vocabulary has {n} tokens)"
                );
            }
            if !eos.contains(&id) {
                eos.push(id);
            }
        }
        eos.sort_unstable();
        let never_text: Vec<bool> = (0..n)
            .map(|i| {
                is_special[i] || tokens[i].is_empty() || eos.binary_search(&(i as u32)).is_ok()
            })
            .collect();
        let entries: Vec<(u32, &[u8])> = tokens
            .iter()
            .enumerate()
            .filter(|(i, _)| !never_text[*i])
            .map(|(i, b)| (i as u32, b.as_slice()))
            .collect();
        let trie = TokenTrie::new(&entries)?;
        let text_slices = TextSlices::new(&trie, n.div_ceil(32), &entries);
        let class_runs = ClassRuns::new(&trie, n.div_ceil(32));
        Ok(Vocab {
            tokens,
            never_text,
            is_special,
            eos,
            vocab_size,
            trie,
            engine: EngineSlot(OnceLock::new()),
            text_slices,
            class_runs,
        })
    }

    /// The model's logits width (bitmask rows cover this many ids).
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// Number of ids that have bytes (ids at or above are padding).
    pub fn num_tokens(&self) -> usize {
        self.tokens.len()
    }

    pub fn eos_token_ids(&self) -> &[u32] {
        &self.eos
    }

    pub fn is_eos(&self, id: u32) -> bool {
        self.eos.binary_search(&id).is_ok()
    }

    pub fn special_token_ids(&self) -> Vec<u32> {
        (0..self.tokens.len() as u32)
            .filter(|&i| self.is_special[i as usize])
            .collect()
    }

    /// Bytes of `id`, or None for padding ids.
    pub fn token_bytes(&self, id: u32) -> Option<&[u8]> {
        self.tokens.get(id as usize).map(|b| b.as_slice())
    }

    /// Bytes of `id` if text can produce it (not special, EOS, empty or padding).
    pub fn text_bytes(&self, id: u32) -> Option<&[u8]> {
        let i = id as usize;
        if i < self.tokens.len() && !self.never_text[i] {
            Some(&self.tokens[i])
        } else {
            None
        }
    }

    pub fn trie(&self) -> &TokenTrie {
        &self.trie
    }

    /// Splits `bytes` into tokens by longest match from the left. Every text
    /// token id may appear (not only the tokenizer's canonical merges); an
    /// error names the first byte no token starts with.
    pub fn encode_greedy(&self, bytes: &[u8]) -> Result<Vec<u32>> {
        let max_len = self.trie.max_depth().max(1);
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < bytes.len() {
            // Up to one token per byte: a list the size of a huge input is
            // a MemoryError for this call, not an abort of the process.
            if out.len() == out.capacity() && out.try_reserve(1).is_err() {
                return Err(crate::error::Error::OutOfMemory(format!(
                    "encode_greedy: out of memory after {} tokens",
                    out.len()
                )));
            }
            let window = &bytes[pos..bytes.len().min(pos + max_len)];
            let Some((len, id)) = self.trie.longest_prefix(window) else {
                return invalid!(
                    "no token of this vocabulary starts with byte 0x{:02x} (offset {pos})",
                    bytes[pos]
                );
            };
            out.push(id);
            pos += len;
        }
        Ok(out)
    }

    /// Checks that `id` is a valid index into the model's logits.
    pub fn check_token_id(&self, id: i64) -> Result<u32> {
        if id < 0 || id as u64 >= self.vocab_size as u64 {
            return invalid!("token id {id} is out of range [0, {})", self.vocab_size);
        }
        Ok(id as u32)
    }
}

/// Vocabularies for tests of walks over deep tries.
#[cfg(test)]
pub(crate) mod testing {
    use super::Vocab;

    /// `count` distinct tokens of 1 to `max_len` bytes over `alphabet`
    /// (each byte alone first), from a fixed generator started at `seed`.
    pub fn random_vocab(alphabet: &[u8], count: usize, max_len: usize, seed: u64) -> Vocab {
        let mut tokens: Vec<Vec<u8>> = alphabet.iter().map(|&b| vec![b]).collect();
        let mut x = seed;
        while tokens.len() < count {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let len = 1 + (x >> 33) as usize % max_len;
            let token = (0..len)
                .map(|i| alphabet[(x >> (i % 29 + 3)) as usize % alphabet.len()])
                .collect();
            if !tokens.contains(&token) {
                tokens.push(token);
            }
        }
        Vocab::new(tokens, &[], &[], None).unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_encoding_takes_the_longest_token() {
        let vocab = Vocab::new(v(&["a", "ab", "abc", "c", "<eos>"]), &[4], &[], None).unwrap();
        assert_eq!(vocab.encode_greedy(b"abcab").unwrap(), vec![2, 1]);
        assert_eq!(vocab.encode_greedy(b"aac").unwrap(), vec![0, 0, 3]);
        assert!(vocab.encode_greedy(b"").unwrap().is_empty());
        let err = vocab.encode_greedy(b"ab<").unwrap_err().to_string();
        assert!(err.contains("0x3c (offset 2)"), "{err}");
    }

    fn v(tokens: &[&str]) -> Vec<Vec<u8>> {
        tokens.iter().map(|t| t.as_bytes().to_vec()).collect()
    }

    #[test]
    fn eos_special_and_padding_are_not_text() {
        let vocab = Vocab::new(v(&["a", "b", "<eos>", "<s>", ""]), &[2], &[3], Some(40)).unwrap();
        assert_eq!(vocab.text_bytes(0), Some(&b"a"[..]));
        assert_eq!(vocab.text_bytes(2), None);
        assert_eq!(vocab.text_bytes(3), None);
        assert_eq!(vocab.text_bytes(4), None);
        assert_eq!(vocab.text_bytes(39), None);
        assert!(vocab.is_eos(2));
        assert_eq!(vocab.vocab_size(), 40);
        assert!(vocab.check_token_id(40).is_err());
        assert!(vocab.check_token_id(-1).is_err());
        assert_eq!(vocab.check_token_id(39).unwrap(), 39);
    }

    #[test]
    fn the_engine_slot_keeps_one_state_of_one_type() {
        let vocab = Vocab::new(v(&["a"]), &[], &[], None).unwrap();
        let first = vocab.engine_state(|| 7u32).unwrap() as *const u32;
        let again = vocab.engine_state(|| 8u32).unwrap();
        assert_eq!((first, *again), (again as *const u32, 7));
        assert!(vocab.engine_state(|| 1u64).is_none());
    }

    #[test]
    fn bad_arguments_are_errors() {
        assert!(Vocab::new(v(&["a"]), &[5], &[], None).is_err());
        assert!(Vocab::new(v(&["a"]), &[], &[1], None).is_err());
        assert!(Vocab::new(v(&["a", "b"]), &[], &[], Some(1)).is_err());
        assert!(Vocab::new(vec![], &[], &[], None).is_err());
    }
}
