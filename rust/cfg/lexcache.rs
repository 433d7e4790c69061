//! Token sets that depend only on the lexer, computed once per lexer state.
//!
//! For a frontier of lexeme scans, a token whose bytes never complete a
//! lexeme is allowed exactly when some scan survives all its bytes: that only
//! depends on the `(lexeme, DFA state)` pairs, not on the parser. So for each
//! such key we walk the trie once, stepping DFAs only, and keep (a) the bits
//! of those tokens and (b) the "boundary" nodes where some lexeme completes
//! for the first time on the path. A mask is then a copy of (a) plus parser
//! walks below the nodes in (b) only (DESIGN.md §5: precomputed token sets).
//!
//! The entries are `lexentry::LexEntry`s, built by the walks of `lexwalk`;
//! this module keeps them per grammar (backed by the vocabulary's shared
//! cache, `sharedlex`) and finds the cheapest way to a new one: a text
//! slice's walk, a run of a byte class's tables (`classentry`), an entry of
//! an equivalent or a near state met before (`reuse`, `nearentry`), a
//! divergent scan's (`divergent`), or a whole walk.

use rustc_hash::FxHashMap as HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use super::classentry::class_run_entry;
use super::earley::Scan;
use super::lexentry::{BoundaryNode, LexEntry};
use super::lexwalk::{build, build_beside, build_sliced};
use super::longest::GUARD;
use super::lowered::Cfg;
use super::nearentry::entry_from_alike;
use super::sharedlex::{SharedKey, SharedLexCache};
use super::textreach::TextReach;
use crate::slices::MIN_CUT;
use crate::trie::TokenTrie;
use crate::vocab::Vocab;

mod reuse;
use reuse::{Copies, Equivalent, Searches};

/// `key`, a single scan far inside a long count, as the same place of the
/// count's first copy (`ByteDfa::first_alike_copy`): no walk below `top`
/// tells the two apart, so every far copy of a place shares one entry
/// instead of walking the trie for its own. A `format` or `pattern` string
/// with a large `maxLength` meets a new copy at every token (a URL's path
/// cost a walk of 0.4-0.5 ms per token). None where nothing moves.
fn first_alike_copy(cfg: &Cfg, trie: &TokenTrie, key: &LexKey, top: u32) -> Option<LexKey> {
    let [(l, q)] = key[..] else { return None };
    let dfa = cfg.lexemes[l as usize].dfa.as_ref()?;
    let first = dfa.first_alike_copy(q, trie.height(top as usize));
    (first != q).then(|| vec![(l, first)])
}

/// `entry` as the vocabulary's cache keeps it under `shared`'s key (another
/// thread's, if it went in first), or as it is without a shared key.
fn share(shared: Option<(&SharedLexCache, SharedKey)>, entry: Arc<LexEntry>) -> Arc<LexEntry> {
    match shared {
        Some((cache, k)) => cache.insert(k, entry),
        None => entry,
    }
}

/// A frontier with origins dropped: what the lexer-only part depends on.
pub type LexKey = Vec<(u32, u32)>;

pub fn lex_key(frontier: &[Scan]) -> LexKey {
    let mut k: LexKey = frontier.iter().map(|s| (s.lexeme, s.state)).collect();
    k.sort_unstable();
    k.dedup();
    k
}

/// Counts `size` more bytes against `limit`; false (and nothing counted)
/// when they would not fit.
pub(super) fn charge(bytes: &AtomicUsize, limit: usize, size: usize) -> bool {
    if bytes.fetch_add(size, Ordering::Relaxed) + size > limit {
        bytes.fetch_sub(size, Ordering::Relaxed);
        return false;
    }
    true
}

/// A read guard, through poisoning (the caches hold no invariant a panic
/// could break).
pub(crate) fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}

/// A write guard, through poisoning (see `read`).
pub(crate) fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}

/// One grammar's lexer-only entries, backed by its vocabulary's shared cache.
#[derive(Debug)]
pub struct LexCache {
    map: RwLock<HashMap<(LexKey, u32), Arc<LexEntry>>>,
    /// Each scan's residual id in the shared cache (None: not shared).
    residual: RwLock<HashMap<(u32, u32), Option<u32>>>,
    /// Per (lexeme, trie node): DFA states whose entry there is in `map`,
    /// to which a new state may be equivalent below that node.
    representatives: RwLock<HashMap<(u32, u32), Vec<u32>>>,
    /// The last block state met per (lexeme, trie node, place in its copy),
    /// with an entry in `map` (see `same_place`).
    places: RwLock<HashMap<(u32, u32, u32), u32>>,
    /// Boundaries filtered by `boundary`, by entry address and lexeme.
    filtered: RwLock<HashMap<(usize, u32), FilteredBoundary>>,
    /// `distinguishing_length` per (lexeme, state, state), with the limit
    /// it was searched to.
    distinguish: RwLock<HashMap<(u32, u32, u32), Distinguished>>,
    /// Per lexeme: how its searches for an equivalent state went (see
    /// `equivalent_entry`).
    searches: RwLock<HashMap<u32, Searches>>,
    /// Per lexeme: how its copies from divergent states went.
    copies: RwLock<HashMap<u32, Copies>>,
    /// How far single scans survive text (for entries from text slices).
    text_reach: TextReach,
    bytes: AtomicUsize,
    limit: usize,
}

/// An entry and its boundary without the ends no follower can read.
type FilteredBoundary = (Arc<LexEntry>, Arc<Vec<BoundaryNode>>);

/// A distinguishing length and the limit it was searched to (a length past
/// the limit means "longer than the limit"). Where a block of copies says
/// how long two states agree (`ByteDfa::alike_length`), the length is that,
/// a bound below the true one: every conclusion drawn from it holds.
type Distinguished = (u32, u32);

impl LexCache {
    pub fn new(limit: usize) -> Self {
        LexCache {
            map: RwLock::new(HashMap::default()),
            residual: RwLock::new(HashMap::default()),
            representatives: RwLock::new(HashMap::default()),
            places: RwLock::new(HashMap::default()),
            filtered: RwLock::new(HashMap::default()),
            distinguish: RwLock::new(HashMap::default()),
            searches: RwLock::new(HashMap::default()),
            copies: RwLock::new(HashMap::default()),
            text_reach: TextReach::default(),
            bytes: AtomicUsize::new(0),
            limit,
        }
    }

    /// The entry for lexer state `key` at trie node `top`: from this
    /// grammar's own map, else (past a one-path walk) from the vocabulary's
    /// shared cache, else from the class-run tables, else from a state of
    /// this grammar no walk below `top` can tell from it, else copied from a
    /// near state, else built (and kept while under the memory bounds).
    pub fn get(
        &self,
        cfg: &Cfg,
        vocab: &Vocab,
        words: usize,
        key: &LexKey,
        top: u32,
    ) -> Arc<LexEntry> {
        let trie = vocab.trie();
        let moved = first_alike_copy(cfg, trie, key, top);
        let key = moved.as_ref().unwrap_or(key);
        let map_key = (key.clone(), top);
        if let Some(e) = read(&self.map).get(&map_key) {
            return e.clone();
        }
        if self.on_one_path(cfg, key) {
            // One byte goes on (inside a literal such as a member's key): a
            // walk is one path, cheaper than finding an equivalent entry.
            let e = Arc::new(build(cfg, trie, words, key, top as usize));
            if charge(&self.bytes, self.limit, e.bytes() + key.len() * 8) {
                write(&self.map).insert(map_key, e.clone());
            }
            return e;
        }
        // The vocabulary's cache first: once a state's residual id is known
        // (per automaton, see `SharedLexCache::by_scan`), a hit costs a
        // lookup, less than the searches for an equivalent or near state.
        let shared =
            SharedLexCache::of(vocab).and_then(|c| Some((c, (self.shared_key(cfg, c, key)?, top))));
        let entry = match shared.as_ref().and_then(|(c, k)| c.get(k)) {
            Some(e) => {
                self.represent(cfg, key, top);
                e
            }
            None => self.fresh_entry(cfg, vocab, words, key, top, shared),
        };
        if !charge(&self.bytes, self.limit, entry.bytes() + key.len() * 8) {
            return entry;
        }
        write(&self.map).entry(map_key).or_insert(entry).clone()
    }

    /// The entry of `key` at `top`, which neither map holds: from the
    /// class-run tables where the scan is in a run of a byte class (before
    /// any search: a run's entry costs its exits), else from a state no walk
    /// below `top` tells from it, a near state, or a build; the state
    /// represents its entry unless another state did already. Every entry
    /// found for a shared key goes to the vocabulary's cache, copies too:
    /// they are exact, and a fresh grammar with the same residuals (the same
    /// schema or trigger) made them again at every state (a structural
    /// tag's free text after each character of its trigger).
    fn fresh_entry(
        &self,
        cfg: &Cfg,
        vocab: &Vocab,
        words: usize,
        key: &LexKey,
        top: u32,
        shared: Option<(&SharedLexCache, SharedKey)>,
    ) -> Arc<LexEntry> {
        if let Some(e) = class_run_entry(cfg, vocab, words, key, top) {
            self.represent(cfg, key, top);
            return share(shared, Arc::new(e));
        }
        let trie = vocab.trie();
        match self.equivalent_entry(cfg, trie, key, top) {
            Equivalent::Same(e, _) => share(shared, e),
            found => {
                let near = (self.counted(cfg, vocab, words, key, top))
                    .or_else(|| self.divergent(cfg, trie, words, key, top));
                let e = match near {
                    Some(e) => share(shared, Arc::new(e)),
                    None => self.build_and_share(cfg, vocab, words, key, top, found, shared),
                };
                self.represent(cfg, key, top);
                e
            }
        }
    }

    /// A state of lexeme `l` that no walk of the whole trie tells from `q`
    /// (the first alike copy of a long count's block, or a representative
    /// found equivalent at the root), or None. Such states have the same
    /// mask wherever the rest of the parse is the same: a fill reads a
    /// scan's DFA only along token paths, none longer than the trie is
    /// deep, and there the two agree on every state's acceptance and
    /// liveness. A string with a `maxLength` past the trie's depth is in a
    /// new state at every token, alike to the last one until it nears its
    /// limit; the fill memo keys such states by this one (`grammar::fill`).
    pub fn root_alike(&self, cfg: &Cfg, trie: &TokenTrie, l: u32, q: u32) -> Option<u32> {
        if l & GUARD != 0 {
            return None;
        }
        let lexeme = &cfg.lexemes[l as usize];
        if lexeme.end_forbid.is_some() || !lexeme.embedded_in.is_empty() {
            // Lark's end conditions are per state, and a string's rank
            // follows the patterns alive beside it: neither is the DFA's.
            return None;
        }
        let key = vec![(l, q)];
        if let Some(moved) = first_alike_copy(cfg, trie, &key, 0) {
            return Some(moved[0].1);
        }
        match self.equivalent_entry(cfg, trie, &key, 0) {
            Equivalent::Same(_, r) if r != q => Some(r),
            _ => None,
        }
    }

    /// Whether `key` is one scan that only one byte keeps going (and that
    /// cannot end there).
    fn on_one_path(&self, cfg: &Cfg, key: &LexKey) -> bool {
        let [(l, q)] = key[..] else { return false };
        let dfa = cfg.lexemes[l as usize]
            .dfa
            .as_ref()
            .expect("scans have DFAs");
        dfa.forced_byte(q).is_some()
    }

    /// The boundary of `entry` (for `key`) without the greedy ends no
    /// follower of the lexeme can read, or None when all are kept. Entries
    /// leave those ends in (they are shared by lexemes with other
    /// followers); the filtered list is kept per entry.
    pub fn boundary(
        &self,
        cfg: &Cfg,
        trie: &TokenTrie,
        entry: &Arc<LexEntry>,
        key: &LexKey,
    ) -> Option<Arc<Vec<BoundaryNode>>> {
        let [(l, _)] = key[..] else { return None };
        let lexeme = &cfg.lexemes[l as usize];
        if !lexeme.greedy || entry.boundary.is_empty() {
            return None;
        }
        let memo_key = (Arc::as_ptr(entry) as usize, l);
        if let Some((_, kept)) = read(&self.filtered).get(&memo_key) {
            return Some(kept.clone());
        }
        let kept: Arc<Vec<BoundaryNode>> = Arc::new(
            entry
                .boundary
                .iter()
                .copied()
                .filter(|b| lexeme.follow.contains(trie.byte(b.node as usize)))
                .collect(),
        );
        if charge(
            &self.bytes,
            self.limit,
            kept.len() * std::mem::size_of::<BoundaryNode>() + 32,
        ) {
            // The entry is held too, so its address names it while kept.
            write(&self.filtered).insert(memo_key, (entry.clone(), kept.clone()));
        }
        Some(kept)
    }

    /// The root entry of a single scan that survives every text token of
    /// some slice of the vocabulary: that slice's bits, and a walk of the
    /// other tokens only. None where no slice applies, or where its rest
    /// has `nodes_bound` nodes or more.
    fn sliced(
        &self,
        cfg: &Cfg,
        vocab: &Vocab,
        words: usize,
        key: &LexKey,
        top: u32,
        nodes_bound: usize,
    ) -> Option<LexEntry> {
        let (l, q) = root_scan(key, top)?;
        let slices = vocab.text_slices();
        // Free text up to a trigger dies on a few characters (the trigger)
        // but survives every string without the trigger's first byte. That
        // slice is taken first (the first of `slices::WITHOUT` that applies)
        // where its rest is smaller than the widest length slice's, the
        // best a length slice can do: the reach, whose walk costs more than
        // this check, is then not needed.
        let widest_rest = slices
            .slices
            .last()
            .map_or(usize::MAX, |s| s.rest.num_nodes());
        let without = (slices.without.iter())
            .filter(|(_, slice)| slice.rest.num_nodes() < widest_rest)
            .find(|(byte, slice)| {
                (self.text_reach).survives_without(cfg, l, q, *byte, slice.max_chars)
            })
            .map(|(_, slice)| slice);
        let slice = match without {
            Some(slice) => slice,
            None => {
                let reach = self.text_reach.reach(cfg, l, q, slices.max_chars());
                if reach < MIN_CUT {
                    return None;
                }
                slices.within(reach)?
            }
        };
        let worth = slice.bits.len() <= words && slice.rest.num_nodes() < nodes_bound;
        worth.then(|| build_sliced(cfg, vocab.trie(), words, slice, key))
    }

    /// The root entry of a single scan near the end of a counted text (a
    /// string near its `maxLength`): every text of the characters it has
    /// left keeps it live and every longer one ends it
    /// (`TextReach::dies_after`), so the text tokens it allows are those
    /// characters or fewer (`TextSlices::counted`) and only the tokens that
    /// are not text are walked. It comes before a copy from a near state
    /// (`divergent`, `nearentry`): such a state's count differs, so the
    /// two walks part at the deepest nodes of nearly every text token, and
    /// a copy looked at or walked more nodes than this walk (12,014 trie
    /// nodes on Llama-3's vocabulary) before it gave up or was done.
    fn counted(
        &self,
        cfg: &Cfg,
        vocab: &Vocab,
        words: usize,
        key: &LexKey,
        top: u32,
    ) -> Option<LexEntry> {
        let (l, q) = root_scan(key, top)?;
        let slices = vocab.text_slices();
        let reach = self.text_reach.reach(cfg, l, q, slices.max_chars());
        let (bits, slice) = slices.counted(reach)?;
        if bits.len() > words || !self.text_reach.dies_after(cfg, l, q, reach) {
            return None;
        }
        Some(build_beside(cfg, vocab.trie(), words, bits, slice, key))
    }

    /// The entry built, and given to the vocabulary's shared cache when
    /// its key is shared: from a text slice where one applies (and its rest
    /// is smaller than what an entry alike to some depth leaves to walk),
    /// else from the entry of a state that walks alike to some depth where
    /// `found` has one, else by a walk. A sliced entry is the first fill of
    /// every fresh grammar with that lexeme (free text up to a structural
    /// tag's trigger: two of 1.3 ms each, on Llama-3's vocabulary, before
    /// they were shared).
    #[allow(clippy::too_many_arguments)]
    fn build_and_share(
        &self,
        cfg: &Cfg,
        vocab: &Vocab,
        words: usize,
        key: &LexKey,
        top: u32,
        found: Equivalent,
        shared: Option<(&SharedLexCache, SharedKey)>,
    ) -> Arc<LexEntry> {
        let trie = vocab.trie();
        // Nodes a copy from the alike state leaves to walk.
        let alike_nodes = match &found {
            Equivalent::Alike(_, d) => trie.nodes_walked_below(*d),
            _ => usize::MAX,
        };
        let sliced = self.sliced(cfg, vocab, words, key, top, alike_nodes);
        let built = Arc::new(sliced.unwrap_or_else(|| match (&found, &key[..]) {
            (Equivalent::Alike(alike, depth), &[scan]) => {
                entry_from_alike(cfg, trie, words, alike, scan, top as usize, *depth)
            }
            _ => build(cfg, trie, words, key, top as usize),
        }));
        share(shared, built)
    }

    /// The shared key of `key`: the lexing mode, then its scans' residual
    /// ids (sorted, deduplicated: equal residuals walk alike).
    fn shared_key(&self, cfg: &Cfg, shared: &SharedLexCache, key: &LexKey) -> Option<Vec<u32>> {
        let mut ids = Vec::with_capacity(key.len() + 1);
        for &(l, q) in key {
            let known = read(&self.residual).get(&(l, q)).copied();
            let id = match known {
                Some(id) => id,
                None => {
                    let id = shared.residual_id_of(&cfg.lexemes[l as usize], q);
                    write(&self.residual).insert((l, q), id);
                    id
                }
            };
            ids.push(id?);
        }
        ids.sort_unstable();
        ids.dedup();
        ids.insert(0, cfg.lexing as u32);
        Some(ids)
    }
}

/// The scan of a key of one scan at the root: the entries a slice of the
/// vocabulary serves (`LexCache::sliced`, `LexCache::counted`).
fn root_scan(key: &LexKey, top: u32) -> Option<(u32, u32)> {
    match key[..] {
        [scan] if top == 0 => Some(scan),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfg::lexentry::TokenSet;
    use crate::cfg::{lower::lower, textreach::TextReach};
    use crate::regex_dfa::DEAD;
    use crate::schema;
    use crate::vocab::testing::random_vocab;

    /// `entry` equals the whole trie's walk of `key` from the root: the same
    /// bits and the same boundary nodes.
    fn assert_equals_walk(
        entry: &LexEntry,
        cfg: &Cfg,
        trie: &TokenTrie,
        words: usize,
        key: &LexKey,
    ) {
        assert_equals_walk_at(entry, cfg, trie, words, key, 0);
    }

    /// `assert_equals_walk` for an entry at trie node `top`.
    fn assert_equals_walk_at(
        entry: &LexEntry,
        cfg: &Cfg,
        trie: &TokenTrie,
        words: usize,
        key: &LexKey,
        top: usize,
    ) {
        let full = build(cfg, trie, words, key, top);
        let (mut a, mut b) = (vec![0u32; words], vec![u32::MAX; words]);
        entry.apply(&mut a, true);
        full.apply(&mut b, true);
        assert_eq!(a, b, "scans {key:?} at node {top}");
        assert_eq!(entry.boundary, full.boundary, "scans {key:?} at node {top}");
    }

    /// A text slice's entry (the slice's bits, the rest walked) equals the
    /// whole trie's walk, both where the tokens past the slice stay a list
    /// and where they reach a quarter of a row's words and become a dense row.
    #[test]
    fn sliced_entries_equal_full_walks_in_either_form() {
        // A JSON string of at most 14 characters: slices apply while 4 or
        // more are left; the tokens past the slice (longer texts, escapes)
        // are few where little is left and many where much is.
        let schema = r#"{"type": "string", "maxLength": 14}"#;
        let cfg = lower(&schema::compile(schema, &Default::default()).unwrap()).unwrap();
        let vocab = random_vocab(b"ab \"\\,.n", 6000, 12, 7);
        let (trie, words) = (vocab.trie(), vocab.vocab_size().div_ceil(32));
        let reach = TextReach::default();
        let (mut lists, mut rows) = (0, 0);
        for (l, lexeme) in cfg.lexemes.iter().enumerate() {
            let Some(dfa) = lexeme.dfa.as_ref() else {
                continue;
            };
            // State 0 is the dead state.
            for q in 1..dfa.num_states() as u32 {
                let key = vec![(l as u32, q)];
                let chars = reach.reach(&cfg, l as u32, q, vocab.text_slices().max_chars());
                let slice = vocab.text_slices().within(chars);
                let Some(slice) = slice.filter(|_| chars >= MIN_CUT) else {
                    continue;
                };
                let sliced = build_sliced(&cfg, trie, words, slice, &key);
                match sliced.inner {
                    TokenSet::Sliced { .. } => lists += 1,
                    TokenSet::Dense(_) => rows += 1,
                    TokenSet::Sparse(_) => panic!("a sliced entry is a slice or a row"),
                }
                assert_equals_walk(&sliced, &cfg, trie, words, &key);
            }
        }
        assert!(lists > 0 && rows > 0, "{lists} lists, {rows} rows");
    }

    /// Near the end of a counted text, the entry from the text tokens'
    /// character counts and a walk of the other tokens (`counted`) equals
    /// the whole trie's walk, at every state where it applies; and it
    /// applies at every place of a string with `maxLength` that has fewer
    /// characters left than the vocabulary's longest text token. The
    /// vocabulary has quotes, backslashes, newlines, `é` and its bytes
    /// alone (tokens that are not UTF-8), up to 12 bytes a token.
    #[test]
    fn counted_entries_equal_full_walks() {
        let vocab = random_vocab(b"ab \"\\\n<>\xc3\xa9", 6000, 12, 13);
        let words = vocab.vocab_size().div_ceil(32);
        let slices = vocab.text_slices();
        let max_chars = slices.max_chars();
        // (syntax, source, the fewest states counted): a string's places
        // with fewer characters left than the longest text token.
        let sources = [
            ("schema", r#"{"type": "string", "maxLength": 9}"#, 10),
            (
                "schema",
                r#"{"type": "string", "minLength": 4, "maxLength": 30}"#,
                max_chars.min(31),
            ),
            // At its limit only: before, `c` ends it but `a` goes on.
            (
                "schema",
                r#"{"type": "string", "maxLength": 7, "pattern": "^[ab]*$"}"#,
                1,
            ),
            // Quotes and newlines go on where the count ends text.
            ("gbnf", r#"root ::= "<" [^<>]{0,6} ">""#, 7),
        ];
        for (syntax, source, fewest) in sources {
            let ast = match syntax {
                "schema" => schema::compile(source, &Default::default()).unwrap(),
                _ => crate::cfg::gbnf::parse(source).unwrap(),
            };
            let counted = counted_states(&ast, &vocab, words);
            assert!(
                counted >= fewest,
                "{source}: {counted} counted, {fewest} wanted"
            );
        }
        // Text goes on past the count: never counted.
        let ast = crate::cfg::gbnf::parse(r#"root ::= "<" [a-z ]{0,5} [ab]* ">""#).unwrap();
        assert_eq!(counted_states(&ast, &vocab, words), 0);
    }

    /// A `format` or `pattern` with a `maxLength` is a long count whose
    /// copies each hold a place of the format's automaton: entries from
    /// the same place of an earlier copy (`same_place`) and from the first
    /// copy (`first_alike_copy`) equal the whole trie's walks, at every
    /// state along texts that reach the limit, at the root and below it.
    #[test]
    fn entries_of_block_states_equal_full_walks() {
        // (vocabulary alphabet, schema, the text's start, a piece repeated
        // after it). Over `ab"` nearly every string of up to 8 bytes is a
        // token, so a state near the limit that is told from another by a
        // string that short meets a token that tells them apart.
        let sources = [
            (
                &b"ab.@\"x-"[..],
                r#"{"type": "string", "format": "email", "maxLength": 60}"#,
                "\"ab.x-a@b",
                ".ab-x",
            ),
            (
                &b"ab\""[..],
                r#"{"type": "string", "pattern": "^[ab]*$", "maxLength": 40}"#,
                "\"",
                "abb",
            ),
        ];
        for (alphabet, source, start, unit) in sources {
            let vocab = random_vocab(alphabet, 6000, 12, 17);
            let words = vocab.vocab_size().div_ceil(32);
            let trie = vocab.trie();
            let cfg = lower(&schema::compile(source, &Default::default()).unwrap()).unwrap();
            let cache = LexCache::new(usize::MAX);
            let (mut block, mut placed, mut claims) = (0, 0, 0);
            let mut places = std::collections::HashSet::new();
            for (l, lexeme) in cfg.lexemes.iter().enumerate() {
                let Some(dfa) = lexeme.dfa.as_ref() else {
                    continue;
                };
                // The states along the text, past the limit.
                let text = format!("{start}{}", unit.repeat(20));
                let mut q = dfa.start();
                for &byte in text.as_bytes() {
                    q = dfa.step(q, byte);
                    if q == DEAD {
                        break;
                    }
                    if let Some(place) = dfa.block_place(q) {
                        block += 1;
                        placed += !places.insert((l, place)) as usize;
                    }
                    let key = vec![(l as u32, q)];
                    // What the same place of another copy claims, checked
                    // on its own (a count's own rules may build the entry
                    // another way): a copy from it to the claimed depth.
                    let height = trie.height(0);
                    if let Some(found) = cache.same_place(dfa, l as u32, q, 0, height) {
                        let (e, depth) = match found {
                            Equivalent::Same(e, _) => (e, height + 1),
                            Equivalent::Alike(e, d) => (e, d),
                            Equivalent::None => unreachable!(),
                        };
                        let copy = entry_from_alike(&cfg, trie, words, &e, (l as u32, q), 0, depth);
                        assert_equals_walk(&copy, &cfg, trie, words, &key);
                        claims += 1;
                    }
                    let entry = cache.get(&cfg, &vocab, words, &key, 0);
                    assert_equals_walk(&entry, &cfg, trie, words, &key);
                    // Below the root: a node one byte down.
                    let node = trie.follow(b"a").0;
                    let below = cache.get(&cfg, &vocab, words, &key, node as u32);
                    assert_equals_walk_at(&below, &cfg, trie, words, &key, node);
                }
            }
            assert!(
                block > 20 && placed > 10 && claims >= 2,
                "{source}: {block} block states, {placed} placed, {claims} claims"
            );
        }
    }

    /// The states of `ast`'s lexemes that take a counted entry, each
    /// checked against the whole trie's walk (and never below the root).
    fn counted_states(
        ast: &crate::cfg::ast::GrammarAst,
        vocab: &crate::vocab::Vocab,
        words: usize,
    ) -> usize {
        let cfg = lower(ast).unwrap();
        let cache = LexCache::new(usize::MAX);
        let mut counted = 0;
        for (l, lexeme) in cfg.lexemes.iter().enumerate() {
            let Some(dfa) = lexeme.dfa.as_ref() else {
                continue;
            };
            for q in 1..dfa.num_states() as u32 {
                let key = vec![(l as u32, q)];
                let Some(entry) = cache.counted(&cfg, vocab, words, &key, 0) else {
                    continue;
                };
                counted += 1;
                assert_equals_walk(&entry, &cfg, vocab.trie(), words, &key);
                assert!(cache.counted(&cfg, vocab, words, &key, 1).is_none());
            }
        }
        counted
    }

    /// Free text up to a trigger takes the slice of the tokens without the
    /// trigger's first byte (`TextSlices::without`): its entries equal the
    /// whole trie's walks, where the scan survives every string without it.
    #[test]
    fn slices_without_a_byte_equal_full_walks() {
        let spec = r#"{"type": "structural_tag", "format": {"type": "sequence", "elements": [
            {"type": "tag", "begin": "<think>", "content": {"type": "any_text"},
             "end": "</think>"},
            {"type": "triggered_tags", "triggers": ["<f="], "tags": [{"type": "tag",
             "begin": "<f=a>", "content": {"type": "const_string", "value": "x"},
             "end": "</f>"}]}]}}"#;
        // `<`, the tags' letters, quotes, a newline, an `é` and its bytes
        // alone (tokens that are not UTF-8); and tokens with whole and
        // partial triggers inside, where the free text ends or may end.
        let random = random_vocab(b"<>/=thinkfax \"\n\xc3\xa9", 2500, 10, 5);
        let mut tokens: Vec<Vec<u8>> = (0..random.num_tokens() as u32)
            .filter_map(|id| random.token_bytes(id).map(<[u8]>::to_vec))
            .collect();
        for t in [
            "</think>",
            "a</think>\n",
            "</thi",
            "x<f=",
            "<f=a>x",
            "k<f",
            "a<b",
        ] {
            if !tokens.iter().any(|x| x == t.as_bytes()) {
                tokens.push(t.as_bytes().to_vec());
            }
        }
        let vocab = crate::vocab::Vocab::new(tokens, &[], &[], None).unwrap();
        let cfg = lower(&crate::stag::compile(spec, &vocab).unwrap()).unwrap();
        let (trie, words) = (vocab.trie(), vocab.vocab_size().div_ceil(32));
        let reach = TextReach::default();
        let slices = vocab.text_slices();
        let (_, slice) = slices.without.iter().find(|(b, _)| *b == b'<').unwrap();
        let mut used = 0;
        for (l, lexeme) in cfg.lexemes.iter().enumerate() {
            let Some(dfa) = lexeme.dfa.as_ref() else {
                continue;
            };
            for q in 1..dfa.num_states() as u32 {
                if !reach.survives_without(&cfg, l as u32, q, b'<', slice.max_chars) {
                    continue;
                }
                used += 1;
                let key = vec![(l as u32, q)];
                let sliced = build_sliced(&cfg, trie, words, slice, &key);
                assert_equals_walk(&sliced, &cfg, trie, words, &key);
            }
        }
        // Both free texts (in the tag, and around the triggered tags).
        assert!(used >= 2, "{used} states");
    }

    /// Entries a grammar copies from nearby states (`divergent`) go to the
    /// vocabulary's cache: a second grammar of the same schema finds every
    /// one there and copies none, and its entries are the full walks.
    #[test]
    fn copies_are_shared_with_fresh_grammars_of_the_same_schema() {
        // Members past the listed ones have any name but theirs: the states
        // inside a listed name are copied from each other.
        let schema = r#"{"type": "object", "properties": {"ab": {"const": 1},
            "aab": {"const": 2}, "ca": {"const": 3}}}"#;
        let ast = schema::compile(schema, &Default::default()).unwrap();
        let vocab = random_vocab(b"abc\"x,:", 1500, 12, 11);
        let (trie, words) = (vocab.trie(), vocab.vocab_size().div_ceil(32));
        let made = |cache: &LexCache| -> u32 { read(&cache.copies).values().map(|c| c.made).sum() };
        let mut copies = Vec::new();
        for _ in 0..2 {
            let cfg = lower(&ast).unwrap();
            let cache = LexCache::new(usize::MAX);
            for (l, lexeme) in cfg.lexemes.iter().enumerate() {
                let Some(dfa) = lexeme.dfa.as_ref() else {
                    continue;
                };
                // Along each listed name and past it, as a walk meets them.
                for name in ["\"ab\"", "\"aab\"", "\"ca\"", "\"abx\""] {
                    let mut q = dfa.start();
                    for &b in name.as_bytes() {
                        q = dfa.step(q, b);
                        if q == DEAD {
                            break;
                        }
                        let key = vec![(l as u32, q)];
                        let got = cache.get(&cfg, &vocab, words, &key, 0);
                        let want = build(&cfg, trie, words, &key, 0);
                        let (mut a, mut b) = (vec![0u32; words], vec![0u32; words]);
                        got.apply(&mut a, true);
                        want.apply(&mut b, true);
                        assert_eq!((a, &got.boundary), (b, &want.boundary), "lexeme {l} {name}");
                    }
                }
            }
            copies.push(made(&cache));
        }
        assert!(
            copies[0] > 0,
            "the first grammar copies entries: {copies:?}"
        );
        assert_eq!(copies[1], 0, "the second finds them shared: {copies:?}");
    }
}
