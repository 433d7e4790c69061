//! Determinizing a pattern into a `Table`, through regex-automata's lazy DFA.
//!
//! regex-automata's dense builder determinizes a whole pattern inside one
//! call. That call cannot stop for a work budget, so it was bounded by size
//! only: the exponential class (`[ab]*a[ab]{30}`) ran to the 64 MiB bound,
//! two to four seconds. And at its end the builder moves its match states
//! together by pairwise swaps, which it resolves by following each swap
//! cycle: when nearly every state accepts, one long cycle makes that step
//! quadratic (a DFA of 250,000 such states took minutes).
//!
//! The lazy ("hybrid") DFA has the same determinizer and the same
//! semantics, but makes a state when a transition first leads to it and
//! keeps it where it was made: nothing is shuffled. `determinize` asks for
//! every state reachable from the anchored start, breadth first, and charges
//! each to the compile's budget as it is made (its transitions, the bytes
//! it adds to the cache, which hold its set of NFA states, and the ε-edges
//! its transitions may follow, `closure`), so the budget ends an
//! exponential determinization part way: about a second at the default
//! budget.
//!
//! The lazy DFA keeps its states in a cache that it clears when full, which
//! would invalidate every state id read so far: the cache is given room for
//! the DFA size bound, and a clear is reported as that bound exceeded.

use regex_automata::hybrid::dfa::{Builder, Cache, Config, DFA};
use regex_automata::hybrid::LazyStateID;
use regex_automata::nfa::thompson::{self, NFA};
use regex_automata::util::{start, syntax};
use regex_automata::{Anchored, MatchKind};
use regex_syntax::hir::Hir;

use rustc_hash::FxHashMap as HashMap;

use super::closure::EpsilonWork;
use super::table::{class_bytes_of, Table};
use super::{build_error, thompson_config, ByteDfa, DEAD, DFA_SIZE_LIMIT};
use crate::error::{Error, Result};

/// A lazy DFA and its cache, read state by state by `determinize`.
pub(super) struct LazySource<'p> {
    pattern: &'p str,
    dfa: DFA,
    cache: Cache,
    /// Cache bytes already charged to the budget.
    charged: usize,
    /// The ε-closure work its transitions may do beyond their states' sets.
    epsilon: EpsilonWork,
}

impl<'p> LazySource<'p> {
    /// `pattern` (Unicode, UTF-8 only) with match semantics `kind`.
    pub(super) fn new(pattern: &'p str, kind: MatchKind) -> Result<Self> {
        let dfa = Builder::new()
            .configure(config(kind))
            .syntax(syntax::Config::new().unicode(true).utf8(true))
            .thompson(thompson_config())
            .build(pattern)
            .map_err(|e| build_error(pattern, &e))?;
        Self::with(pattern, dfa)
    }

    /// `hir` (the syntax tree of `pattern`) with match semantics `kind`.
    pub(super) fn from_hir(pattern: &'p str, hir: &Hir, kind: MatchKind) -> Result<Self> {
        let nfa: NFA = thompson::Compiler::new()
            .configure(thompson_config())
            .build_from_hir(hir)
            .map_err(|e| build_error(pattern, &e))?;
        let dfa = Builder::new()
            .configure(config(kind))
            .build_from_nfa(nfa)
            .map_err(|e| build_error(pattern, &e))?;
        Self::with(pattern, dfa)
    }

    fn with(pattern: &'p str, dfa: DFA) -> Result<Self> {
        let cache = dfa.create_cache();
        let epsilon = EpsilonWork::of(dfa.get_nfa())?;
        Ok(LazySource {
            pattern,
            dfa,
            cache,
            charged: 0,
            epsilon,
        })
    }

    /// A state as `determinize` keys it (None: dead), or the size bound's
    /// error once the cache has been cleared (every id read is stale).
    /// A state's id always carries the same tags (match, start), so equal
    /// states have equal ids.
    fn id(&self, s: LazyStateID) -> Result<Option<LazyStateID>> {
        if self.cache.clear_count() > 0 {
            return Err(self.too_large());
        }
        Ok((!(s.is_dead() || s.is_quit())).then_some(s))
    }

    fn too_large(&self) -> Error {
        Error::LimitExceeded(format!(
            "regex {:?} needs a DFA larger than {} MiB",
            self.pattern,
            DFA_SIZE_LIMIT >> 20
        ))
    }
}

/// Budget steps per byte the lazy DFA's cache grows by: a state's bytes
/// are mostly its set of NFA states, which determinizing it went through,
/// once per byte class. So `CACHED_BYTE` per byte, and one more per
/// `CLASSES_PER_STEP` classes. Measured so that the default budget (10^9
/// steps) ends the exponential class after about a second here, with few
/// classes (`[ab]*a[ab]{30}`, 7) and with many (a fuzz-found key pattern of
/// 79 `.`s between runs of letters, 51).
///
/// Each NFA state of a set is looked up once per class, and those lookups
/// leave the CPU's caches as the NFA grows: the long fuzz run of 2026-11-27
/// found `z(\x01+){33333}` and `(,?){30033}` (60,000 NFA states, 16 and 9
/// classes), where the default budget took 3 to 4 s to run out. So every
/// `NFA_STATES_PER_CLASS_STEP` NFA states add one step per class and byte,
/// up to an NFA `MAX_NFA_CLASS_STEPS` times that size (past it a lookup is
/// a miss to memory however large the NFA). With it, the patterns of that
/// run ended at the default budget in 1.0 to 1.5 s here, as the classes
/// above do. (`simplify` has since made both counted repetitions of one
/// class; `(?:\x01+\x02?){33333}` and `(?:,?;?){30033}` keep such NFAs:
/// `tests/hostile_runner.py`, `regex_counted_*`.)
const CACHED_BYTE: u64 = 14;
const CLASSES_PER_STEP: u64 = 4;
const NFA_STATES_PER_CLASS_STEP: u64 = 16_384;
const MAX_NFA_CLASS_STEPS: u64 = 8;

/// Budget steps per byte of cache growth for an NFA of `nfa_states` states
/// and `classes` byte classes (see `CACHED_BYTE`).
fn steps_per_cached_byte(classes: u64, nfa_states: u64) -> u64 {
    let nfa_states = nfa_states.min(MAX_NFA_CLASS_STEPS * NFA_STATES_PER_CLASS_STEP);
    CACHED_BYTE + classes / CLASSES_PER_STEP + classes * nfa_states / NFA_STATES_PER_CLASS_STEP
}

/// Budget steps per ε-edge a transition may follow (`closure`): measured
/// so that patterns whose closures walk far more than their states' sets
/// show (300 copies of `.*` in a loop, `(?m:(?:.^$^$…)*)`) end at the
/// default budget within a second here, as the others do.
const EPSILON_EDGE: u64 = 2;

fn config(kind: MatchKind) -> Config {
    Config::new()
        .match_kind(kind)
        .byte_classes(true)
        // Room for the DFA size bound and the states' NFA sets; a clear is
        // reported as the bound exceeded (module docs).
        .cache_capacity(2 * DFA_SIZE_LIMIT)
}

impl LazySource<'_> {
    /// The anchored start state (None: dead).
    fn start(&mut self) -> Result<Option<LazyStateID>> {
        let config = start::Config::new().anchored(Anchored::Yes);
        let s = self
            .dfa
            .start_state(&mut self.cache, &config)
            .map_err(|e| Error::Compile(format!("invalid regex {:?}: {e}", self.pattern)))?;
        self.id(s)
    }

    /// The state after `byte` (None: dead).
    fn next(&mut self, s: LazyStateID, byte: u8) -> Result<Option<LazyStateID>> {
        let t = self
            .dfa
            .next_state(&mut self.cache, s, byte)
            .map_err(|_| self.too_large())?;
        self.id(t)
    }

    /// Whether the text may end in `s`.
    fn accepts_at_end(&mut self, s: LazyStateID) -> Result<bool> {
        let end = self
            .dfa
            .next_eoi_state(&mut self.cache, s)
            .map_err(|_| self.too_large())?;
        self.id(end)?;
        Ok(end.is_match())
    }

    /// Charges the cache's growth since the last charge.
    fn charge(&mut self) -> Result<()> {
        let used = self.cache.memory_usage();
        let grown = used.saturating_sub(self.charged);
        self.charged = used;
        let classes = self.dfa.byte_classes().alphabet_len() as u64;
        let nfa_states = self.dfa.get_nfa().states().len() as u64;
        crate::budget::charge(grown as u64 * steps_per_cached_byte(classes, nfa_states))
    }
}

/// The states of `source` reachable from its anchored start, as a table
/// (`pattern` names it in errors).
pub(super) fn determinize(pattern: &str, mut source: LazySource<'_>) -> Result<ByteDfa> {
    let bc = *source.dfa.byte_classes();
    let stride = bc.alphabet_len() - 1; // the last class is end-of-input
    let classes: [u8; 256] = std::array::from_fn(|b| bc.get(b as u8));
    let (class_size, representative) = class_bytes_of(&classes, stride);

    // Number the states reachable from the start (1-based; 0 = dead).
    let mut ids: HashMap<LazyStateID, u32> = HashMap::default();
    let mut order: Vec<LazyStateID> = Vec::new();
    let mut trans: Vec<u32> = vec![0; stride]; // row 0: dead
    let mut intern = |s: Option<LazyStateID>, order: &mut Vec<LazyStateID>| -> u32 {
        let Some(s) = s else { return DEAD };
        *ids.entry(s).or_insert_with(|| {
            order.push(s);
            order.len() as u32
        })
    };
    let start = source.start()?;
    let start = intern(start, &mut order);
    // Each state's bytes in the cache (its set of NFA states, mostly), for
    // the ε-work charge.
    let mut cached: Vec<u64> = vec![0, source.cache.memory_usage() as u64];
    let mut next = 0;
    while next < order.len() {
        let s = order[next];
        next += 1;
        crate::budget::charge_n(stride * crate::budget::HASHED_TRANSITION)?;
        let unpaid = source.epsilon.per_transition(cached[next]);
        crate::budget::charge(stride as u64 * unpaid * EPSILON_EDGE)?;
        for &rep in &representative {
            let before = source.cache.memory_usage();
            let t = source.next(s, rep)?;
            let known = order.len();
            trans.push(intern(t, &mut order));
            if order.len() > known {
                cached.push(source.cache.memory_usage().saturating_sub(before) as u64);
            }
        }
        source.charge()?;
        if trans.len() * 4 > DFA_SIZE_LIMIT {
            return Err(source.too_large());
        }
    }
    let mut accepting = vec![false; order.len() + 1];
    for (i, &s) in order.iter().enumerate() {
        accepting[i + 1] = source.accepts_at_end(s)?;
    }
    let table = Table {
        classes,
        class_size,
        representative,
        trans,
        accepting,
        start,
    };
    table
        .pruned()
        .ok_or_else(|| Error::Compile(format!("regex {pattern:?} matches no string")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_nfas_are_charged_per_byte_and_class_as_before() {
        // `[ab]*a[ab]{30}`: 38 NFA states, 5 classes.
        assert_eq!(steps_per_cached_byte(5, 38), CACHED_BYTE + 1);
        assert_eq!(steps_per_cached_byte(51, 300), CACHED_BYTE + 12);
    }

    #[test]
    fn large_nfas_are_charged_more_per_class_up_to_a_cap() {
        // The fuzz-found `z(\x01+){33333}`: 66,684 NFA states, 16 classes.
        assert_eq!(steps_per_cached_byte(16, 66_684), CACHED_BYTE + 4 + 65);
        let capped = steps_per_cached_byte(16, MAX_NFA_CLASS_STEPS * NFA_STATES_PER_CLASS_STEP);
        assert_eq!(steps_per_cached_byte(16, 10_000_000), capped);
        assert_eq!(
            steps_per_cached_byte(257, u64::MAX),
            CACHED_BYTE + 64 + 257 * 8
        );
    }

    #[test]
    fn a_large_nfa_runs_out_of_the_budget_with_its_error() {
        // `z(\x01+){33333}` was the large NFA; simplified, it is
        // `z\x01{33333,}`, and an optional after the loop keeps the copies.
        let pattern = "z(?:\x01+\x02?){33333}";
        let err = crate::budget::with_budget(20_000_000, || ByteDfa::new(pattern)).unwrap_err();
        assert!(err.to_string().contains("steps of work"), "{err}");
    }
}
