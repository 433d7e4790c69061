//! Lexer-only entries shared by every grammar over one vocabulary.
//!
//! A lexer-only entry (`lexentry::LexEntry`) depends on the scans' residual
//! languages, not on the grammar they come from: the content of a JSON
//! string reads the same in every schema, and so does the free text up to a
//! structural tag's trigger. So a fresh grammar looks its states up here
//! before walking the token trie, and what it builds goes here too.
//!
//! **Naming a residual.** A state's residual automaton is named by its
//! `residual_signature` (its reachable states numbered in a canonical
//! order: equal signatures, isomorphic automata, dead state to dead state,
//! which is what a walk that stops at the dead state needs), plus what the
//! walk reads of the lexeme besides its language (greedy or not, alone,
//! whether it splits, its longest-match rank). Each distinct signature gets a small
//! id, and a shared key is the lexing mode, the sorted ids, and the trie
//! node. A residual whose signature would pass `MAX_SIGNATURE_WORDS` words
//! (a long counted string, a large `format`'s automaton; a small table
//! automaton such as an email's may take `MAX_TABLE_SIGNATURE_WORDS`) is
//! named by its automaton and state instead: equal only to itself, but while
//! the process-wide cache of lexeme automata (`nodedfa`) keeps one, every
//! grammar with that `format` meets the very same automaton and state.
//!
//! **Naming it cheaply.** A signature is a breadth-first pass over the
//! residual, hashed whole. Since fresh grammars mostly scan the very same
//! automata, states' ids are kept by automaton and state (`ScanKey`): a
//! fresh grammar's hit then costs lookups, not a signature per state.
//! Automata no grammar holds any more are dropped from time to time, with
//! their keys and the entries their identity named (`prune`).
//!
//! **Bounded, and not full for good.** Everything is charged to one byte
//! budget (`SHARED_LEX_CACHE_BYTES`). A server meets new schemas for as long
//! as it runs, so a full cache makes room rather than refusing from then
//! on: the entries no fill has used since the last time room was made go
//! first, then others, until the entries take at most half of what they
//! took (a second-chance clock, swept all at once: `evict`). Residual
//! signatures are forgotten wholesale when they hold a quarter of the
//! budget or room is still short. Ids are never handed out twice, so the
//! keys of kept entries keep their meaning and a forgotten signature is
//! only signed again. Entries are caches of what a walk computes: an
//! evicted one is walked again.

use rustc_hash::FxHashMap as HashMap;
use std::collections::hash_map::Entry;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, Weak};

use super::lexcache::{charge, read, write};
use super::lexentry::LexEntry;
use super::lowered::Lexeme;
use crate::regex_dfa::ByteDfa;
use crate::vocab::Vocab;

/// A residual signature is abandoned once past this many words: such a
/// residual is named by its automaton and state instead.
const MAX_SIGNATURE_WORDS: usize = 1 << 10;
/// The bound for a state of a table automaton of at most
/// `SIGNED_TABLE_STATES` states: a `format`'s (an email's host labels count
/// to 63, so its residuals take 2,000-3,000 words), which fresh schemas
/// combine with other lengths and keywords into automata of their own. Signed,
/// such residuals are shared across those schemas (an email with a
/// `minLength` walked in fresh grammars: 282 -> 121 us per fill); a long
/// count's states (a block of copies) keep the small bound, where signing
/// every new state cost more than sharing saved.
const MAX_TABLE_SIGNATURE_WORDS: usize = 1 << 13;
const SIGNED_TABLE_STATES: usize = 1024;
/// Residual ids named by identity have this bit set; ids from signatures
/// count up from 0 (far below it).
const IDENTITY_IDS: u32 = 1 << 31;

/// Bound on the lexer-only cache shared by a vocabulary's grammars, unless
/// `MASKPAR_SHARED_LEX_CACHE_BYTES` (read when a vocabulary's cache is made)
/// says otherwise.
pub const SHARED_LEX_CACHE_BYTES: usize = 512 << 20;
/// The environment variable that sets another bound (a whole number of
/// bytes; anything else leaves the default).
const SHARED_LEX_CACHE_ENV: &str = "MASKPAR_SHARED_LEX_CACHE_BYTES";

/// What the shared cache holds, for a server's monitoring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SharedLexStats {
    /// Bytes charged now (entries, residual signatures, scan keys).
    pub bytes: usize,
    /// The bound on `bytes`.
    pub limit: usize,
    /// Lexer-only entries kept now.
    pub entries: usize,
    /// How many times room was made.
    pub evictions: usize,
}

/// See the module docs.
#[derive(Debug)]
pub struct SharedLexCache {
    residuals: RwLock<HashMap<Vec<u32>, u32>>,
    /// The next residual id a signature gets (never one handed out before,
    /// even after `residuals` is cleared).
    next_residual: AtomicU32,
    /// Bytes charged for `residuals`.
    residual_bytes: AtomicUsize,
    /// Residual ids by automaton and state.
    by_scan: RwLock<HashMap<ScanKey, Option<u32>>>,
    /// The automata `by_scan`'s keys name, by address (see `Held`).
    held: RwLock<HashMap<usize, Held>>,
    /// Residual ids handed out by identity (see `residual_id_of`).
    identities: AtomicU32,
    /// `held`'s size at which the automata no grammar uses any more are
    /// dropped with what they name (see `prune`).
    next_prune: AtomicUsize,
    map: RwLock<HashMap<SharedKey, Kept>>,
    /// Bytes charged for `map` (all of `bytes` but residual signatures,
    /// scan keys and held automata).
    map_bytes: AtomicUsize,
    bytes: AtomicUsize,
    limit: usize,
    evictions: AtomicUsize,
}

/// A shared entry, its charge, and whether a fill has used it since the
/// last `evict`.
#[derive(Debug)]
struct Kept {
    entry: Arc<LexEntry>,
    bytes: usize,
    used: AtomicBool,
}

/// Lexing mode and residual ids, then the trie node.
pub type SharedKey = (Vec<u32>, u32);

/// An automaton that `by_scan`'s keys name by its address, held weakly: a
/// weak reference keeps an `Arc`'s allocation (not the automaton's tables,
/// which go with the last grammar using it), so no other automaton can take
/// that address while a key names it.
#[derive(Debug)]
struct Held {
    dfa: Weak<ByteDfa>,
    /// The residual ids named by this automaton's identity.
    identity_ids: Vec<u32>,
}

/// Bytes charged for a `Held` and for a `by_scan` key.
const HELD_BYTES: usize = std::mem::size_of::<ByteDfa>() + 64;
const SCAN_KEY_BYTES: usize = 48;
/// `held` is first pruned at this size, then at twice what a prune leaves.
const FIRST_PRUNE: usize = 1024;

/// A scan as the shared cache names it before its residual is known: its
/// automaton's address (held in `SharedLexCache::held`, so that no other
/// automaton takes that address while the key is kept), the state, and what
/// the walk reads of the lexeme besides its language.
type ScanKey = (usize, u32, [u32; 5]);

impl SharedLexCache {
    /// The cache shared by every grammar over `vocab`, kept in its engine
    /// slot (the vocabulary does not know this type: see `EngineSlot`).
    /// None only if another engine took the slot: then nothing is shared.
    pub fn of(vocab: &Vocab) -> Option<&SharedLexCache> {
        vocab.engine_state(|| {
            let limit = std::env::var(SHARED_LEX_CACHE_ENV).ok();
            let limit = limit.and_then(|v| v.trim().parse().ok());
            SharedLexCache::new(limit.unwrap_or(SHARED_LEX_CACHE_BYTES))
        })
    }

    /// What the cache holds now.
    pub fn stats(&self) -> SharedLexStats {
        SharedLexStats {
            bytes: self.bytes.load(Ordering::Relaxed),
            limit: self.limit,
            entries: read(&self.map).len(),
            evictions: self.evictions.load(Ordering::Relaxed),
        }
    }

    pub fn new(limit: usize) -> Self {
        SharedLexCache {
            residuals: RwLock::new(HashMap::default()),
            next_residual: AtomicU32::new(0),
            residual_bytes: AtomicUsize::new(0),
            by_scan: RwLock::new(HashMap::default()),
            held: RwLock::new(HashMap::default()),
            identities: AtomicU32::new(0),
            next_prune: AtomicUsize::new(FIRST_PRUNE),
            map: RwLock::new(HashMap::default()),
            map_bytes: AtomicUsize::new(0),
            bytes: AtomicUsize::new(0),
            limit,
            evictions: AtomicUsize::new(0),
        }
    }

    /// The residual id of a scan of `lexeme` in DFA state `q`, or None where
    /// it is not shared.
    pub(super) fn residual_id_of(&self, lexeme: &Lexeme, q: u32) -> Option<u32> {
        // Where a scan ends depends on its residual automaton and on
        // whether it ends greedily (not on what may follow it: the fill
        // filters those ends), and on its end conditions, which signatures
        // leave out (not shared), and for a string in a pattern, on that
        // pattern's scan (not shared either: see `larkorder`).
        if lexeme.end_forbid.is_some() || !lexeme.embedded_in.is_empty() {
            return None;
        }
        let dfa = lexeme.dfa.as_ref().expect("scans have DFAs");
        if dfa.is_computed() {
            // An enum's own automaton (`regex_dfa::records`), built per
            // grammar: no other grammar holds it, and signing its residuals
            // steps hundreds of thousands of computed states.
            return None;
        }
        let extra = [
            lexeme.greedy as u32 | (lexeme.alone as u32) << 1 | (lexeme.splits() as u32) << 2,
            // Longest-match walks stop where ranks differ.
            lexeme.priority as u32,
            lexeme.width as u32,
            (lexeme.width >> 32) as u32,
            lexeme.text_len as u32,
        ];
        let key = (Arc::as_ptr(dfa) as usize, q, extra);
        if let Some(&id) = read(&self.by_scan).get(&key) {
            return id;
        }
        let limit = match dfa.is_table() && dfa.num_states() <= SIGNED_TABLE_STATES {
            true => MAX_TABLE_SIGNATURE_WORDS,
            false => MAX_SIGNATURE_WORDS,
        };
        let signature = dfa.residual_signature(q, limit);
        let by_signature = signature.is_some();
        let id = match signature {
            Some(mut sig) => {
                sig.extend(extra);
                self.residual_id(sig)
            }
            // Too long to name by its language: named by the automaton and
            // state themselves, which every grammar holding this very
            // automaton (a `format`'s, a common pattern's) shares. (Never
            // reused, never wrapping: past 2^31 of them, none are handed out.)
            None => self
                .identities
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                    (n < IDENTITY_IDS).then_some(n + 1)
                })
                .ok()
                .map(|n| IDENTITY_IDS | n),
        };
        if by_signature && id.is_none() {
            // No room for the signature now; there may be later.
            return None;
        }
        let unheld = if by_signature { id } else { None };
        if !read(&self.held).contains_key(&key.0) {
            if !self.charge_or_make_room(HELD_BYTES) {
                // Unheld, the address may name another automaton later.
                return unheld;
            }
            let mut held = write(&self.held);
            match held.entry(key.0) {
                // Another thread's went in first.
                Entry::Occupied(_) => {
                    self.bytes.fetch_sub(HELD_BYTES, Ordering::Relaxed);
                }
                Entry::Vacant(v) => {
                    v.insert(Held {
                        dfa: Arc::downgrade(dfa),
                        identity_ids: Vec::new(),
                    });
                }
            }
            if held.len() >= self.next_prune.load(Ordering::Relaxed) {
                drop(held);
                self.prune();
            }
        }
        if !self.charge_or_make_room(SCAN_KEY_BYTES) {
            return unheld;
        }
        let mut held = write(&self.held);
        let Some(entry) = held.get_mut(&key.0) else {
            // Pruned meanwhile (its automaton is gone): nothing to key.
            self.bytes.fetch_sub(SCAN_KEY_BYTES, Ordering::Relaxed);
            return unheld;
        };
        let mut by_scan = write(&self.by_scan);
        let named = match by_scan.entry(key) {
            Entry::Occupied(o) => {
                self.bytes.fetch_sub(SCAN_KEY_BYTES, Ordering::Relaxed);
                *o.get()
            }
            Entry::Vacant(v) => *v.insert(id),
        };
        // An identity id this call made and kept is remembered for `prune`.
        match id {
            Some(n) if !by_signature && named == id => entry.identity_ids.push(n),
            _ => {}
        }
        named
    }

    /// Drops the automata no grammar holds any more, their `by_scan` keys,
    /// and the shared entries keyed by their identity ids: no live grammar
    /// can ask for them again (their addresses may now go to new automata,
    /// which no key names). Entries keyed by signatures stay: a later
    /// grammar may have the same residual.
    fn prune(&self) {
        let mut held = write(&self.held);
        let mut by_scan = write(&self.by_scan);
        let mut map = write(&self.map);
        let dead_addresses: Vec<usize> = held
            .iter()
            .filter(|(_, h)| h.dfa.strong_count() == 0)
            .map(|(&a, _)| a)
            .collect();
        let dead: HashMap<usize, Held> = dead_addresses
            .into_iter()
            .filter_map(|a| held.remove_entry(&a))
            .collect();
        let mut freed = dead.len() * HELD_BYTES;
        by_scan.retain(|k, _| {
            let keep = !dead.contains_key(&k.0);
            freed += if keep { 0 } else { SCAN_KEY_BYTES };
            keep
        });
        let ids: rustc_hash::FxHashSet<u32> = dead
            .values()
            .flat_map(|h| h.identity_ids.iter().copied())
            .collect();
        if !ids.is_empty() {
            let mut entries_freed = 0;
            map.retain(|(key, _), kept| {
                let keep = !key.iter().any(|i| ids.contains(i));
                entries_freed += if keep { 0 } else { kept.bytes };
                keep
            });
            self.map_bytes.fetch_sub(entries_freed, Ordering::Relaxed);
            freed += entries_freed;
        }
        self.bytes.fetch_sub(freed, Ordering::Relaxed);
        self.next_prune
            .store(FIRST_PRUNE.max(2 * held.len()), Ordering::Relaxed);
    }

    fn residual_id(&self, signature: Vec<u32>) -> Option<u32> {
        if let Some(&id) = read(&self.residuals).get(&signature) {
            return Some(id);
        }
        let size = signature.len() * 4 + 16;
        if !self.charge_or_make_room(size) {
            return None;
        }
        let mut ids = write(&self.residuals);
        match ids.entry(signature) {
            Entry::Occupied(o) => {
                self.bytes.fetch_sub(size, Ordering::Relaxed);
                Some(*o.get())
            }
            Entry::Vacant(v) => {
                // Taken under the write lock, so a load and a store: the
                // counter stops at the limit rather than wrapping to ids
                // handed out before.
                let id = self.next_residual.load(Ordering::Relaxed);
                if id >= IDENTITY_IDS {
                    self.bytes.fetch_sub(size, Ordering::Relaxed);
                    return None; // ids run out only after 2^31 signatures
                }
                self.next_residual.store(id + 1, Ordering::Relaxed);
                self.residual_bytes.fetch_add(size, Ordering::Relaxed);
                Some(*v.insert(id))
            }
        }
    }

    pub(super) fn get(&self, key: &SharedKey) -> Option<Arc<LexEntry>> {
        let map = read(&self.map);
        let kept = map.get(key)?;
        // Read first: a store on every hit would bounce the line between
        // the threads that fill from this entry.
        if !kept.used.load(Ordering::Relaxed) {
            kept.used.store(true, Ordering::Relaxed);
        }
        Some(kept.entry.clone())
    }

    pub(super) fn insert(&self, key: SharedKey, entry: Arc<LexEntry>) -> Arc<LexEntry> {
        let size = entry.bytes() + key.0.len() * 4;
        if !self.charge_or_make_room(size) {
            return entry;
        }
        match write(&self.map).entry(key) {
            // Another thread's went in first.
            Entry::Occupied(o) => {
                self.bytes.fetch_sub(size, Ordering::Relaxed);
                o.get().entry.clone()
            }
            Entry::Vacant(v) => {
                self.map_bytes.fetch_add(size, Ordering::Relaxed);
                let kept = Kept {
                    entry,
                    bytes: size,
                    used: AtomicBool::new(false),
                };
                v.insert(kept).entry.clone()
            }
        }
    }

    /// Charges `size` bytes to the budget, making room first if it is full
    /// (not for more than the room `evict` leaves: such a charge fails
    /// without costing the kept entries anything).
    fn charge_or_make_room(&self, size: usize) -> bool {
        charge(&self.bytes, self.limit, size)
            || (size <= self.limit / 8 && {
                self.evict();
                charge(&self.bytes, self.limit, size)
            })
    }

    /// Makes room: drops the entries no fill has used since the last call,
    /// then, while the entries still take more than half of what they took,
    /// others (in the map's order: arbitrary, not by use); clears the marks
    /// of those kept. Forgets the residual signatures when they hold a
    /// quarter of the budget, or when room is still short (what cannot be
    /// evicted, scans and automata held, fills the rest; then the automata
    /// no grammar holds go too, `prune`). Does nothing when another thread
    /// has just made room (an eighth of the budget is free). What goes is
    /// freed after the locks are let go: fills wait on `map` meanwhile.
    fn evict(&self) {
        let scarce = || self.bytes.load(Ordering::Relaxed) + self.limit / 8 > self.limit;
        let mut map = write(&self.map);
        if !scarce() {
            return;
        }
        self.evictions.fetch_add(1, Ordering::Relaxed);
        let goal = self.map_bytes.load(Ordering::Relaxed) / 2;
        let mut left = self.map_bytes.load(Ordering::Relaxed);
        let mut evicted = Vec::new();
        map.retain(|_, kept| {
            let keep = kept.used.swap(false, Ordering::Relaxed);
            if !keep {
                left -= kept.bytes;
                evicted.push(kept.entry.clone());
            }
            keep
        });
        if left > goal {
            map.retain(|_, kept| {
                let keep = left <= goal;
                if !keep {
                    left -= kept.bytes;
                    evicted.push(kept.entry.clone());
                }
                keep
            });
        }
        let freed = self.map_bytes.swap(left, Ordering::Relaxed) - left;
        self.bytes.fetch_sub(freed, Ordering::Relaxed);
        drop(map);
        drop(evicted);
        if scarce() || self.residual_bytes.load(Ordering::Relaxed) >= self.limit / 4 {
            // `residual_bytes` changes only under this lock.
            let forgotten = {
                let mut residuals = write(&self.residuals);
                let freed = self.residual_bytes.swap(0, Ordering::Relaxed);
                self.bytes.fetch_sub(freed, Ordering::Relaxed);
                std::mem::take(&mut *residuals)
            };
            drop(forgotten);
        }
        if scarce() {
            self.prune();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfg::lowered::Lexeme;
    use std::sync::atomic::Ordering;

    fn lexeme(dfa: &Arc<ByteDfa>) -> Lexeme {
        Lexeme {
            dfa: Some(dfa.clone()),
            ..Lexeme::textless("test".into())
        }
    }

    #[test]
    fn a_format_sized_table_residual_is_signed_and_shared() {
        // Host labels that count to 63, as an email's do: after the `@`
        // the residual is past the general bound but within the bound for a
        // small table automaton, so two automata with that residual (one
        // format beside two different other keywords) share its id.
        let host = "[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?";
        let a = Arc::new(ByteDfa::new(&format!("[a-z]+@{host}(?:\\.{host})*\"")).unwrap());
        let b = Arc::new(ByteDfa::new(&format!("x[a-z]*@{host}(?:\\.{host})*\"")).unwrap());
        let qa = a.step_bytes(a.start(), b"ab@");
        let qb = b.step_bytes(b.start(), b"xb@");
        assert!(a.is_table() && a.num_states() <= SIGNED_TABLE_STATES);
        assert!(a.residual_signature(qa, MAX_SIGNATURE_WORDS).is_none());
        assert!(a
            .residual_signature(qa, MAX_TABLE_SIGNATURE_WORDS)
            .is_some());
        let cache = SharedLexCache::new(1 << 24);
        let id = cache.residual_id_of(&lexeme(&a), qa);
        assert!(
            id.is_some_and(|id| id & IDENTITY_IDS == 0),
            "signed: {id:?}"
        );
        assert_eq!(cache.residual_id_of(&lexeme(&b), qb), id);
        // A block of copies keeps the small bound: named by identity.
        let count = Arc::new(ByteDfa::new("\"[a-z]{0,3000}\"").unwrap());
        assert!(!count.is_table(), "a block of copies");
        let q = count.step_bytes(count.start(), b"\"ab");
        let id = cache.residual_id_of(&lexeme(&count), q);
        assert!(id.is_some_and(|id| id & IDENTITY_IDS != 0), "{id:?}");
    }

    #[test]
    fn equal_residuals_share_an_id_by_automaton_and_state() {
        let cache = SharedLexCache::new(1 << 20);
        let quoted = Arc::new(ByteDfa::new("\"[a-z]{0,3}\"").unwrap());
        let bare = Arc::new(ByteDfa::new("[a-z]{0,3}\"").unwrap());
        let (lq, lb) = (lexeme(&quoted), lexeme(&bare));
        let after_quote = quoted.step(quoted.start(), b'"');
        let id = cache.residual_id_of(&lq, after_quote);
        assert!(id.is_some());
        // Another automaton with the same residual: the same id.
        assert_eq!(cache.residual_id_of(&lb, bare.start()), id);
        // A state with one letter fewer left: another language, another id.
        let after_a = quoted.step(after_quote, b'a');
        assert_ne!(cache.residual_id_of(&lq, after_a), id);
        // Asked again, the same answers (now from `by_scan`), and the
        // automata's addresses are held while they name keys.
        assert_eq!(cache.residual_id_of(&lq, after_quote), id);
        assert_eq!(cache.residual_id_of(&lb, bare.start()), id);
        assert_eq!(read(&cache.held).len(), 2);
        assert_eq!(read(&cache.by_scan).len(), 3);
        // What the walk reads besides the language tells ids apart.
        let greedy = Lexeme {
            greedy: true,
            ..lexeme(&quoted)
        };
        assert_ne!(cache.residual_id_of(&greedy, after_quote), id);
    }

    #[test]
    fn residuals_past_the_signature_bound_are_named_by_identity() {
        let cache = SharedLexCache::new(1 << 20);
        let long = Arc::new(ByteDfa::new("[a-z]{0,600}").unwrap());
        let twin = Arc::new(ByteDfa::new("[a-z]{0,600}").unwrap());
        assert!(long
            .residual_signature(long.start(), MAX_SIGNATURE_WORDS)
            .is_none());
        let id = cache.residual_id_of(&lexeme(&long), long.start());
        assert!(id.is_some_and(|i| i & IDENTITY_IDS != 0));
        // The same automaton and state: the same id; anything else, another.
        assert_eq!(cache.residual_id_of(&lexeme(&long), long.start()), id);
        let next = long.step(long.start(), b'a');
        assert_ne!(cache.residual_id_of(&lexeme(&long), next), id);
        assert_ne!(cache.residual_id_of(&lexeme(&twin), twin.start()), id);
        // A cache with no room to hold the automaton names nothing by it.
        let full = SharedLexCache::new(64);
        assert_eq!(full.residual_id_of(&lexeme(&long), long.start()), None);
        // Dropped by every grammar, the automaton's tables go, but its
        // address stays taken: a new automaton never inherits its ids.
        let address = Arc::as_ptr(&long) as usize;
        drop(long);
        assert!(read(&cache.held)[&address].dfa.upgrade().is_none());
        let fresh: Vec<Arc<ByteDfa>> = (0..64)
            .map(|_| Arc::new(ByteDfa::new("[a-z]{0,600}").unwrap()))
            .collect();
        assert!(fresh.iter().all(|d| Arc::as_ptr(d) as usize != address));
    }

    #[test]
    fn pruning_drops_dead_automata_and_what_their_identity_names() {
        let cache = SharedLexCache::new(1 << 24);
        let entry = || Arc::new(LexEntry::of_row(vec![1, 2, 3], Vec::new()));
        let long = Arc::new(ByteDfa::new("[a-z]{0,600}").unwrap());
        let short = Arc::new(ByteDfa::new("[a-z]{0,3}").unwrap());
        let kept = Arc::new(ByteDfa::new("[0-9]{0,700}").unwrap());
        let by_identity = cache.residual_id_of(&lexeme(&long), long.start()).unwrap();
        let by_signature = cache
            .residual_id_of(&lexeme(&short), short.start())
            .unwrap();
        let live = cache.residual_id_of(&lexeme(&kept), kept.start()).unwrap();
        let before = cache.bytes.load(Ordering::Relaxed);
        for id in [by_identity, by_signature, live] {
            cache.insert((vec![0, id], 0), entry());
        }
        drop((long, short));
        cache.prune();
        // The dead automata are gone with their keys; the entry named by a
        // dead identity too, the one named by a language stays, and so does
        // everything of the live automaton.
        assert_eq!(read(&cache.held).len(), 1);
        assert_eq!(read(&cache.by_scan).len(), 1);
        assert!(cache.get(&(vec![0, by_identity], 0)).is_none());
        assert!(cache.get(&(vec![0, by_signature], 0)).is_some());
        assert!(cache.get(&(vec![0, live], 0)).is_some());
        assert_eq!(
            cache.residual_id_of(&lexeme(&kept), kept.start()),
            Some(live)
        );
        // What was dropped is no longer counted against the budget.
        let entry_bytes = entry().bytes() + 2 * 4;
        let after = cache.bytes.load(Ordering::Relaxed);
        assert_eq!(
            after,
            before + 2 * entry_bytes - 2 * HELD_BYTES - 2 * SCAN_KEY_BYTES
        );
    }

    /// Everything the cache holds, counted from its contents.
    fn counted(cache: &SharedLexCache) -> usize {
        let entries: usize = read(&cache.map).values().map(|k| k.bytes).sum();
        let residuals: usize = read(&cache.residuals)
            .keys()
            .map(|s| s.len() * 4 + 16)
            .sum();
        assert_eq!(entries, cache.map_bytes.load(Ordering::Relaxed));
        assert_eq!(residuals, cache.residual_bytes.load(Ordering::Relaxed));
        entries
            + residuals
            + read(&cache.held).len() * HELD_BYTES
            + read(&cache.by_scan).len() * SCAN_KEY_BYTES
    }

    #[test]
    fn a_full_cache_drops_the_entries_unused_since_it_last_made_room() {
        // Room for ten entries of 100 words (and their two-word keys).
        let size = 100 * 4 + 2 * 4;
        let cache = SharedLexCache::new(10 * size);
        let entry = |_| Arc::new(LexEntry::of_row(vec![u32::MAX; 100], Vec::new()));
        let key = |n: u32| (vec![0, n], 0);
        for n in 0..10 {
            cache.insert(key(n), entry(n));
        }
        assert_eq!(counted(&cache), 10 * size);
        for n in 0..3 {
            assert!(cache.get(&key(n)).is_some());
        }
        // The eleventh makes room: the seven unused entries go, the three
        // used ones stay (unmarked now), and the new one goes in.
        cache.insert(key(10), entry(10));
        for n in 0..3 {
            assert!(cache.get(&key(n)).is_some(), "used entry {n} dropped");
        }
        for n in 3..10 {
            assert!(cache.get(&key(n)).is_none(), "unused entry {n} kept");
        }
        assert!(cache.get(&key(10)).is_some());
        assert_eq!(counted(&cache), 4 * size);
        assert_eq!(cache.bytes.load(Ordering::Relaxed), 4 * size);
        // Six more fill it again, unused; the next one makes room by
        // dropping those six.
        for n in 11..17 {
            cache.insert(key(n), entry(n));
        }
        cache.insert(key(17), entry(17));
        for n in 11..17 {
            assert!(cache.get(&key(n)).is_none(), "unused entry {n} kept");
        }
        // From here every entry is used as soon as it is in: room is made by
        // halving, in the map's order, and the budget holds.
        for n in 18..40 {
            cache.insert(key(n), entry(n));
            assert!(cache.get(&key(n)).is_some(), "entry {n} not kept");
            assert!(cache.bytes.load(Ordering::Relaxed) <= 10 * size);
            assert_eq!(counted(&cache), cache.bytes.load(Ordering::Relaxed));
        }
        // An entry larger than the room an eviction leaves is never kept,
        // and costs the kept ones nothing.
        let huge = Arc::new(LexEntry::of_row(vec![u32::MAX; 2000], Vec::new()));
        let before = read(&cache.map).len();
        cache.insert(key(99), huge);
        assert!(cache.get(&key(99)).is_none());
        assert_eq!(read(&cache.map).len(), before);
        assert_eq!(counted(&cache), cache.bytes.load(Ordering::Relaxed));
    }

    #[test]
    fn a_use_protects_an_entry_through_one_eviction_only() {
        let size = 100 * 4 + 2 * 4;
        let cache = SharedLexCache::new(10 * size);
        let entry = || Arc::new(LexEntry::of_row(vec![u32::MAX; 100], Vec::new()));
        let key = |n: u32| (vec![0, n], 0);
        for n in 0..10 {
            cache.insert(key(n), entry());
        }
        assert!(cache.get(&key(0)).is_some());
        cache.insert(key(10), entry()); // room made: 0 stays, unmarked
        assert!(read(&cache.map).contains_key(&key(0)));
        for n in 11..19 {
            cache.insert(key(n), entry());
        }
        cache.insert(key(19), entry()); // room made again: 0 unused since
        assert!(!read(&cache.map).contains_key(&key(0)));
    }

    #[test]
    fn an_entry_inserted_twice_is_charged_once() {
        let cache = SharedLexCache::new(1 << 20);
        let first = Arc::new(LexEntry::of_row(vec![u32::MAX; 10], Vec::new()));
        let second = Arc::new(LexEntry::of_row(vec![u32::MAX; 10], Vec::new()));
        cache.insert((vec![0, 1], 0), first.clone());
        let bytes = cache.bytes.load(Ordering::Relaxed);
        assert!(Arc::ptr_eq(&cache.insert((vec![0, 1], 0), second), &first));
        assert_eq!(cache.bytes.load(Ordering::Relaxed), bytes);
        assert_eq!(counted(&cache), bytes);
    }

    #[test]
    fn signatures_holding_a_quarter_are_forgotten_when_room_is_made() {
        let size = 100 * 4 + 2 * 4;
        let cache = SharedLexCache::new(16 * size);
        // Signatures worth a bit over a quarter of the budget.
        let mut n = 0u32;
        while cache.residual_bytes.load(Ordering::Relaxed) < 4 * size + 8 {
            assert!(cache.residual_id(vec![n; 100]).is_some());
            n += 1;
        }
        // Entries fill the rest; the next one makes room, which halving
        // the entries alone would give: the signatures go all the same.
        let entry = || Arc::new(LexEntry::of_row(vec![u32::MAX; 100], Vec::new()));
        let mut k = 0;
        while cache.bytes.load(Ordering::Relaxed) + size <= 16 * size {
            cache.insert((vec![0, k], 0), entry());
            k += 1;
        }
        cache.insert((vec![0, k], 0), entry());
        assert!(read(&cache.residuals).is_empty());
        assert_eq!(counted(&cache), cache.bytes.load(Ordering::Relaxed));
        // Signed again, a signature gets a new id, never an old one.
        assert_eq!(cache.residual_id(vec![0; 100]), Some(n));
    }

    #[test]
    fn id_counters_stop_at_their_limit() {
        let cache = SharedLexCache::new(1 << 20);
        cache
            .next_residual
            .store(IDENTITY_IDS - 1, Ordering::Relaxed);
        assert_eq!(cache.residual_id(vec![1]), Some(IDENTITY_IDS - 1));
        for n in 2..5 {
            assert_eq!(cache.residual_id(vec![n]), None);
        }
        assert_eq!(cache.next_residual.load(Ordering::Relaxed), IDENTITY_IDS);
        cache.identities.store(IDENTITY_IDS - 1, Ordering::Relaxed);
        let long = Arc::new(ByteDfa::new("[a-z]{0,600}").unwrap());
        let mut q = long.start();
        assert_eq!(cache.residual_id_of(&lexeme(&long), q), Some(u32::MAX));
        for _ in 0..3 {
            q = long.step(q, b'a');
            assert_eq!(cache.residual_id_of(&lexeme(&long), q), None);
        }
        assert_eq!(cache.identities.load(Ordering::Relaxed), IDENTITY_IDS);
    }

    #[test]
    fn racing_threads_charge_what_is_kept() {
        let cache = SharedLexCache::new(1 << 22);
        let automata: Vec<Arc<ByteDfa>> = (1..24)
            .map(|n| Arc::new(ByteDfa::new(&format!("[a-c]{{0,{n}}}x")).unwrap()))
            .collect();
        let barrier = std::sync::Barrier::new(8);
        std::thread::scope(|s| {
            for t in 0..8u32 {
                let (cache, automata, barrier) = (&cache, &automata, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    for d in automata {
                        let mut q = d.start();
                        for _ in 0..4 {
                            if let Some(id) = cache.residual_id_of(&lexeme(d), q) {
                                let key = (vec![0, id], t % 2);
                                let row = vec![u32::MAX; 50];
                                cache.insert(key, Arc::new(LexEntry::of_row(row, Vec::new())));
                            }
                            q = d.step(q, b'a');
                        }
                    }
                });
            }
        });
        assert_eq!(counted(&cache), cache.bytes.load(Ordering::Relaxed));
    }

    #[test]
    fn residual_ids_are_never_handed_out_twice() {
        // Room for the automata and scans of three rounds, and for a few
        // signatures only: each round signs 39 languages again (new
        // automata), and room for them is made by forgetting signatures.
        let limit = 3 * 39 * (HELD_BYTES + SCAN_KEY_BYTES) + 2048;
        let cache = SharedLexCache::new(limit);
        let mut seen = std::collections::HashMap::new();
        let mut automata = Vec::new();
        for round in 0..3 {
            for n in 1..40u32 {
                let dfa = Arc::new(ByteDfa::new(&format!("a{{{n}}}")).unwrap());
                automata.push(dfa.clone());
                let Some(id) = cache.residual_id_of(&lexeme(&dfa), dfa.start()) else {
                    continue;
                };
                // An id names one language only, whenever it was handed out
                // (a forgotten signature may get a new id, never an old one).
                if let Some(&other) = seen.get(&id) {
                    assert_eq!(other, n, "id {id} named a{{{other}}}, now a{{{n}}}");
                }
                seen.insert(id, n);
                assert!(
                    cache.bytes.load(Ordering::Relaxed) <= limit,
                    "round {round}"
                );
            }
        }
        // Signatures were forgotten (ids past the count of languages), and
        // the budget still holds exactly what is kept.
        assert!(cache.next_residual.load(Ordering::Relaxed) > 39);
        assert_eq!(counted(&cache), cache.bytes.load(Ordering::Relaxed));
    }
}
