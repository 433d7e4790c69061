//! Compiled grammars: immutable, shared by every matcher through an `Arc`.
//!
//! For a regex the DFA state alone determines the mask, so each state's row is
//! computed once by a trie walk and then served from a lock-free per-state
//! cache (bounded in bytes; past the bound rows are computed on demand).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use crate::bitmask::{set_bit, words_for};
use crate::error::Result;
use crate::regex_dfa::{ByteDfa, DEAD};
use crate::vocab::Vocab;

/// Default bound on the memory of cached mask rows, per compiled grammar.
pub const DEFAULT_MASK_CACHE_BYTES: usize = 256 << 20;
/// Bound on forced bytes computed in one call.
pub const MAX_FORCED_BYTES: usize = 4096;

/// Where a matcher is: a state of the grammar's automaton, or terminated by EOS.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct State {
    pub(crate) dfa: u32,
    pub(crate) terminated: bool,
}

#[derive(Debug)]
pub struct CompiledGrammar {
    vocab: Arc<Vocab>,
    dfa: ByteDfa,
    source: String,
    cache: Vec<OnceLock<Box<[u32]>>>,
    cache_bytes: AtomicUsize,
    cache_limit: usize,
}

impl CompiledGrammar {
    pub fn from_regex(vocab: Arc<Vocab>, pattern: &str) -> Result<Self> {
        let dfa = ByteDfa::new(pattern)?;
        let cache = (0..dfa.num_states()).map(|_| OnceLock::new()).collect();
        Ok(CompiledGrammar {
            vocab,
            dfa,
            source: pattern.to_string(),
            cache,
            cache_bytes: AtomicUsize::new(0),
            cache_limit: DEFAULT_MASK_CACHE_BYTES,
        })
    }

    pub fn vocab(&self) -> &Arc<Vocab> {
        &self.vocab
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn num_states(&self) -> usize {
        self.dfa.num_states()
    }

    /// Width in words of this grammar's bitmask rows.
    pub fn words(&self) -> usize {
        words_for(self.vocab.vocab_size())
    }

    pub fn initial_state(&self) -> State {
        State {
            dfa: self.dfa.start(),
            terminated: false,
        }
    }

    pub fn is_accepting(&self, s: State) -> bool {
        s.terminated || self.dfa.is_accepting(s.dfa)
    }

    /// The state after `token`, or None if the mask at `s` forbids it.
    pub fn advance(&self, s: State, token: u32) -> Option<State> {
        if self.vocab.is_eos(token) {
            return self.is_accepting(s).then_some(State {
                dfa: s.dfa,
                terminated: true,
            });
        }
        if s.terminated {
            return None;
        }
        let bytes = self.vocab.text_bytes(token)?;
        let next = self.dfa.step_bytes(s.dfa, bytes);
        (next != DEAD).then_some(State {
            dfa: next,
            terminated: false,
        })
    }

    /// True if `s`'s row is already computed (a fill is then a copy).
    pub fn is_cached(&self, s: State) -> bool {
        s.terminated || self.cache[s.dfa as usize].get().is_some()
    }

    /// Writes the mask for `s` into `row` (exactly `self.words()` words).
    pub fn fill_row(&self, s: State, row: &mut [u32]) {
        debug_assert_eq!(row.len(), self.words());
        if s.terminated {
            self.fill_eos_only(row);
            return;
        }
        let slot = &self.cache[s.dfa as usize];
        if let Some(cached) = slot.get() {
            row.copy_from_slice(cached);
            return;
        }
        self.compute_row(s.dfa, row);
        let bytes = row.len() * 4;
        // Reserve budget first so concurrent fillers cannot overshoot the bound.
        if self.cache_bytes.fetch_add(bytes, Ordering::Relaxed) + bytes <= self.cache_limit {
            if slot.set(row.to_vec().into_boxed_slice()).is_err() {
                self.cache_bytes.fetch_sub(bytes, Ordering::Relaxed);
            }
        } else {
            self.cache_bytes.fetch_sub(bytes, Ordering::Relaxed);
        }
    }

    fn fill_eos_only(&self, row: &mut [u32]) {
        row.fill(0);
        for &e in self.vocab.eos_token_ids() {
            set_bit(row, e);
        }
    }

    fn compute_row(&self, dfa_state: u32, row: &mut [u32]) {
        row.fill(0);
        let dfa = &self.dfa;
        self.vocab
            .trie()
            .fill_allowed(dfa_state, |s, b| dfa.step(s, b), row);
        if dfa.is_accepting(dfa_state) {
            for &e in self.vocab.eos_token_ids() {
                set_bit(row, e);
            }
        }
    }

    /// The bytes every continuation from `s` must start with (empty when EOS
    /// is allowed or the next byte is not determined).
    pub fn forced_bytes(&self, s: State) -> (Vec<u8>, u32) {
        let mut out = Vec::new();
        let mut st = s.dfa;
        if s.terminated {
            return (out, st);
        }
        while out.len() < MAX_FORCED_BYTES {
            match self.dfa.forced_byte(st) {
                Some(b) => {
                    out.push(b);
                    st = self.dfa.step(st, b);
                }
                None => break,
            }
        }
        (out, st)
    }

    /// Tokens that spell a prefix of the forced bytes and that every sampler
    /// would agree on: each is the longest vocabulary token matching at its
    /// position, and the last is dropped if a longer allowed token could
    /// extend past the forced bytes (the tokenizer might prefer it).
    pub fn forced_tokens(&self, s: State) -> Vec<u32> {
        let (forced, end_state) = self.forced_bytes(s);
        let trie = self.vocab.trie();
        let dfa = &self.dfa;
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < forced.len() {
            let rest = &forced[pos..];
            let (node, consumed, hits) = trie.follow(rest);
            let Some(&(len, token)) = hits.last() else {
                break;
            };
            if consumed == rest.len() && trie.any_below(node, end_state, |s, b| dfa.step(s, b)) {
                break;
            }
            out.push(token);
            pos += len;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bitmask::iter_set_bits;

    fn grammar(tokens: &[&str], pattern: &str) -> CompiledGrammar {
        let toks = tokens.iter().map(|t| t.as_bytes().to_vec()).collect();
        let eos = tokens
            .iter()
            .position(|t| *t == "<eos>")
            .map(|i| vec![i as u32])
            .unwrap_or_default();
        let vocab = Arc::new(Vocab::new(toks, &eos, &[], Some(tokens.len() + 5)).unwrap());
        CompiledGrammar::from_regex(vocab, pattern).unwrap()
    }

    fn mask(g: &CompiledGrammar, s: State) -> Vec<u32> {
        let mut row = vec![0u32; g.words()];
        g.fill_row(s, &mut row);
        iter_set_bits(&row).collect()
    }

    #[test]
    fn mask_matches_advance_and_cache_is_consistent() {
        let g = grammar(&["a", "b", "ab", "ba", "c", "<eos>"], "(ab)+c?");
        let s0 = g.initial_state();
        assert_eq!(mask(&g, s0), vec![0, 2]);
        assert_eq!(mask(&g, s0), vec![0, 2]); // served from the cache
        let s1 = g.advance(s0, 2).unwrap();
        assert_eq!(mask(&g, s1), vec![0, 2, 4, 5]);
        for t in 0..6 {
            assert_eq!(g.advance(s1, t).is_some(), mask(&g, s1).contains(&t));
        }
        let end = g.advance(s1, 5).unwrap();
        assert!(end.terminated);
        assert_eq!(mask(&g, end), vec![5]);
    }

    #[test]
    fn forced_tokens_stop_where_the_tokenizer_could_differ() {
        let g = grammar(
            &["{", "\"", "{\"", "na", "name", "\":", "<eos>"],
            r#"\{"name":[0-9]"#,
        );
        // Forced bytes: {"name": ; tokens {" name then ": (not extendable further).
        assert_eq!(g.forced_bytes(g.initial_state()).0, br#"{"name":"#.to_vec());
        assert_eq!(g.forced_tokens(g.initial_state()), vec![2, 4, 5]);
    }

    #[test]
    fn forced_tokens_drop_an_extendable_last_token() {
        // Forced "ab", then "c" or "d": token "ab" could be "abc" instead.
        let g = grammar(&["a", "ab", "abc", "c", "d"], "ab[cd]");
        assert_eq!(g.forced_tokens(g.initial_state()), Vec::<u32>::new());
        let g = grammar(&["a", "ab", "c", "d"], "ab[cd]");
        assert_eq!(g.forced_tokens(g.initial_state()), vec![1]);
    }
}
