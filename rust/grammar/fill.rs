//! Filling one mask row for a state. A regex state's row is computed once by
//! a trie walk and served from the grammar's per-state cache. A CFG state's
//! row is the fill memo's copy where the state was seen before; else the
//! lexer-only entry of its frontier (`cfg::lexcache`) copied in, then parser
//! walks below the entry's boundary nodes (`fill_boundary`), splitting again
//! at large subtrees, with token terminals' ids OR'd in last.

use std::sync::atomic::Ordering;

use super::{CompiledGrammar, Engine, ParseState, State, CACHED_SUBTREE_NODES, MAX_FILL_LEVELS};
use crate::bitmask::set_bit;
use crate::cfg::ast::Lexing;
use crate::cfg::earley::{CfgState, Chart};
use crate::cfg::fillmemo::{Asker, Lookup, MemoKey};
use crate::cfg::lexcache::{lex_key, LexCache, LexKey};
use crate::cfg::lexentry::{BoundaryNode, MANY_TOKENS, NO_TOKEN};
use crate::cfg::longest::GUARD;
use crate::cfg::lowered::Cfg;
use crate::cfg::walk::CfgStepper;
use crate::error::Result;
use crate::regex_dfa::ByteDfa;
use crate::trie::{Offset, TokenTrie, TrieStepper};

impl CompiledGrammar {
    /// Writes the mask for `s` into `row` (exactly `self.words()` words);
    /// `chart` holds the sets `s` uses.
    pub fn fill_row(&self, chart: &Chart, s: &State, row: &mut [u32]) -> Result<()> {
        self.fill_row_keeping(chart, s, row, None)
    }

    /// `fill_row`, where `keep` asks the fill memo to keep the row of a
    /// state seen for the first time (a warm-up walk, whose states the
    /// request's own fills will meet), not only at its second sighting,
    /// with that asker's way of making room (`Asker`).
    pub fn fill_row_keeping(
        &self,
        chart: &Chart,
        s: &State,
        row: &mut [u32],
        keep: Option<Asker>,
    ) -> Result<()> {
        debug_assert_eq!(row.len(), self.words());
        if s.terminated {
            row.fill(0);
            self.set_eos(row);
            return Ok(());
        }
        match (&self.engine, &s.parse) {
            (Engine::Regex(dfa), &ParseState::Dfa(q)) => {
                self.fill_regex_row(dfa, q, row);
                Ok(())
            }
            (
                Engine::Cfg {
                    cfg,
                    lex_cache,
                    fill_memo,
                    ..
                },
                ParseState::Cfg(c),
            ) => {
                // A scan that a letter leaves where it is (inside a string)
                // usually reads the next token there too. Asked of new
                // states only: a hit reads no lexeme's table.
                let looping = || {
                    c.frontier.iter().any(|scan| {
                        cfg.scan_lexeme(scan.lexeme)
                            .dfa
                            .as_ref()
                            .is_some_and(|d| d.step(scan.state, b'a') == scan.state)
                    })
                };
                let key = MemoKey::of(&cfg.names, chart, c);
                // A warm-up keeps rows only under position-free names: a
                // state keyed by its chart (names run out) is the walk's own.
                let warm = keep.is_some() && matches!(key, MemoKey::Named(_));
                let asker = keep.unwrap_or(Asker::Fill);
                if let Lookup::Fill { keep } =
                    fill_memo.lookup(&key, row, || warm || looping(), asker)
                {
                    // A new state alike to one met before on every path of
                    // the trie has its row (`LexCache::root_alike`): its
                    // key stands for the run of such states, each new at
                    // every token, and is likely asked for again.
                    let alike = self.alike_key(cfg, lex_cache, c, &key);
                    let alike_keep = match &alike {
                        Some(k) => match fill_memo.lookup(k, row, || true, asker) {
                            Lookup::Hit => None,
                            Lookup::Fill { keep } => Some(keep),
                        },
                        None => Some(false),
                    };
                    if let Some(alike_keep) = alike_keep {
                        self.fill_cfg_row(cfg, lex_cache, chart, c, row)?;
                        if c.accepting {
                            self.set_eos(row);
                        }
                        if keep {
                            fill_memo.store(&key, row, asker);
                        }
                        if let (true, Some(k)) = (alike_keep, &alike) {
                            fill_memo.store(k, row, asker);
                        }
                    }
                }
                // Token terminals' ids, never memoized (`cfg::tokenterm`).
                if cfg.has_tokens {
                    self.or_token_bits(cfg, chart, c, row)?;
                }
                Ok(())
            }
            _ => unreachable!("state from another grammar"),
        }
    }

    /// The memo key of `c` with its one scan's DFA state replaced by a
    /// state no walk of the trie tells from it, where there is one (`key`
    /// is `c`'s own key: its last three words are the scan's lexeme, state
    /// and origin, see `SetNames::state_key`).
    fn alike_key(
        &self,
        cfg: &Cfg,
        lex_cache: &LexCache,
        c: &CfgState,
        key: &MemoKey,
    ) -> Option<MemoKey> {
        let ([scan], MemoKey::Named(words)) = (&c.frontier[..], key) else {
            return None;
        };
        let r = lex_cache.root_alike(cfg, self.vocab.trie(), scan.lexeme, scan.state)?;
        let mut words = words.clone();
        let at = words.len() - 2;
        debug_assert_eq!(words[at], scan.state);
        words[at] = r;
        Some(MemoKey::Named(words))
    }

    /// Lexer-only bits from the cache, then parser walks below the nodes
    /// where a lexeme completes.
    fn fill_cfg_row(
        &self,
        cfg: &Cfg,
        lex_cache: &LexCache,
        chart: &Chart,
        c: &CfgState,
        row: &mut [u32],
    ) -> Result<()> {
        let trie = self.vocab.trie();
        let mut stepper = CfgStepper::new(cfg, chart, c, trie.max_depth());
        let key = if stepper.end_finished_lexemes()? {
            stepper.lex_key_at(0)
        } else {
            lex_key(&c.frontier)
        };
        let mut first = true;
        self.fill_cfg_below(cfg, lex_cache, &mut stepper, 0, key, row, &mut first, 0)
    }

    /// Tokens below trie `node`, where `stepper`'s frame `depth(node)` holds
    /// the parser state: the lexer-only part comes from the cache; only the
    /// boundary nodes, where a lexeme may end, run the parser, and below each
    /// the same split applies again (`level` times so far: past
    /// `MAX_FILL_LEVELS` the parser walks the rest, so that a long token of
    /// short lexemes does not nest a call per byte).
    #[allow(clippy::too_many_arguments)]
    fn fill_cfg_below(
        &self,
        cfg: &Cfg,
        lex_cache: &LexCache,
        stepper: &mut CfgStepper<'_>,
        node: usize,
        key: Vec<(u32, u32)>,
        row: &mut [u32],
        first: &mut bool,
        level: usize,
    ) -> Result<()> {
        let trie = self.vocab.trie();
        if key.iter().any(|&(l, _)| l & GUARD != 0) {
            // A back-off branch's guards kill it where they accept, which
            // the lexer-only entries do not know: walk with the parser.
            if std::mem::take(first) {
                row.fill(0);
            }
            return walk_below(stepper, trie, node, row);
        }
        // The lexer-only bits of `k`'s entry go into the row; returns the
        // entry and its boundary without the greedy ends no follower can
        // read (kept per entry), if any were dropped.
        let mut apply_entry = |k: &LexKey| {
            let e = lex_cache.get(cfg, &self.vocab, row.len(), k, node as u32);
            e.apply(row, std::mem::take(first));
            let filtered = lex_cache.boundary(cfg, trie, &e, k);
            (e, filtered)
        };
        let alone = cfg.has_alone && key.len() > 1;
        if (cfg.lexing == Lexing::Longest && !alone) || key.len() <= 1 {
            // One entry (the common case), without the merging below.
            let (e, filtered) = apply_entry(&key);
            let boundary = filtered.as_deref().map_or(&e.boundary[..], |f| &f[..]);
            return self.fill_boundary(cfg, lex_cache, stepper, node, boundary, row, first, level);
        }
        // With all-splits lexing the scans are independent alternatives, so
        // the lexer-only part is the union of one cache entry per scan: those
        // recur across parser states (a key's scan inside a JSON string) even
        // when their combination never does. With longest-match lexing so
        // are the branches, each alone scan and the rest (see
        // `longest::branches`): an alone scan's entry is then its own, shared
        // by every state it is in, and stops only where it may end.
        let parts: Vec<LexKey> = if cfg.lexing == Lexing::Longest {
            let (alone, rest): (Vec<_>, Vec<_>) =
                (key.iter()).partition(|&&(l, _)| cfg.lexemes[l as usize].alone);
            let mut parts: Vec<LexKey> = alone.into_iter().map(|&p| vec![p]).collect();
            if !rest.is_empty() {
                parts.push(rest.into_iter().copied().collect());
            }
            parts
        } else {
            key.iter().map(|&p| vec![p]).collect()
        };
        let mut all: Vec<BoundaryNode> = Vec::new();
        for part in &parts {
            let (e, filtered) = apply_entry(part);
            all.extend_from_slice(filtered.as_deref().map_or(&e.boundary[..], |f| &f[..]));
        }
        all.sort_unstable_by_key(|b| b.node);
        all.dedup_by_key(|b| b.node);
        // The parser walk below a boundary node covers its whole subtree
        // (nodes are numbered in pre-order), so nested ones are skipped.
        let mut outer: Vec<BoundaryNode> = Vec::with_capacity(all.len());
        for b in all {
            if outer.last().is_none_or(|o| b.node >= o.subtree_end) {
                outer.push(b);
            }
        }
        self.fill_boundary(cfg, lex_cache, stepper, node, &outer, row, first, level)
    }

    /// The parser's part below trie `node` (see `fill_cfg_below`): a walk
    /// to each `boundary` node (in pre-order), and below it.
    #[allow(clippy::too_many_arguments)]
    fn fill_boundary(
        &self,
        cfg: &Cfg,
        lex_cache: &LexCache,
        stepper: &mut CfgStepper<'_>,
        node: usize,
        boundary: &[BoundaryNode],
        row: &mut [u32],
        first: &mut bool,
        level: usize,
    ) -> Result<()> {
        let trie = self.vocab.trie();
        let base = trie.depth(node);
        // Boundary nodes come in pre-order, so consecutive paths share a
        // prefix whose frames are still in the stepper: step from there.
        // Paths are below `node` (frame `base` is its parser state).
        let mut prev: &[u8] = &[];
        let mut valid = 0;
        // Boundary nodes below this one are covered by a walk from their
        // parent (see below).
        let mut covered_until = 0;
        for bn in boundary {
            let b = bn.node as usize;
            if b < covered_until {
                continue;
            }
            let path = bn.path_below(trie, node);
            let common = path.iter().zip(prev).take_while(|(x, y)| x == y).count();
            let mut d = common.min(valid);
            while d < path.len() && stepper.step(base + d + 1, path[d]) {
                d += 1;
            }
            if let Some(e) = stepper.error.take() {
                return Err(e);
            }
            let live = d == path.len();
            valid = d;
            prev = path;
            // Where the parent's scans are all literals read whole (a token
            // ends a tag's begin at a byte inside itself), every child of
            // the parent is a boundary node, each its own walk: end them at
            // the parent instead, and take its subtree from one entry of
            // the lexemes they predict (`end_finished_lexemes_at`). Only
            // where the subtree is large: below a closed string (`Paris"`)
            // a few children's walks cost less than an entry.
            if path.len() >= 2 && d >= path.len() - 1 && level < MAX_FILL_LEVELS {
                let up = path.len() - 1;
                let parent = trie.parent(b);
                if trie.subtree_size(parent) >= CACHED_SUBTREE_NODES
                    && stepper.end_finished_lexemes_at(base + up)?
                {
                    let below = stepper.lex_key_at(base + up);
                    // Frames up to the parent's are as the path left them;
                    // the parent's own changed, and only nodes below it
                    // (skipped now) share its whole path.
                    valid = up;
                    covered_until = trie.subtree_end(parent);
                    self.fill_cfg_below(
                        cfg,
                        lex_cache,
                        stepper,
                        parent,
                        below,
                        row,
                        first,
                        level + 1,
                    )?;
                    continue;
                }
            }
            if !live {
                continue;
            }
            match bn.token {
                NO_TOKEN => {}
                MANY_TOKENS => trie.node_tokens(b).iter().for_each(|&t| set_bit(row, t)),
                t => set_bit(row, t),
            }
            if bn.subtree_size() < CACHED_SUBTREE_NODES || level >= MAX_FILL_LEVELS {
                // Small subtree: walking it with the parser beats a cache
                // lookup. Deep down a long token: the walk keeps the stack flat.
                walk_below(stepper, trie, b, row)?;
                continue;
            }
            let below = stepper.lex_key_at(base + path.len());
            self.fill_cfg_below(cfg, lex_cache, stepper, b, below, row, first, level + 1)?;
        }
        Ok(())
    }

    /// The mask-cache slot of DFA state `q`: its mask class.
    pub(super) fn cache_slot(&self, q: u32) -> usize {
        self.mask_class
            .get(q as usize)
            .map_or(q as usize, |&c| c as usize)
    }

    fn set_eos(&self, row: &mut [u32]) {
        for &e in self.vocab.eos_token_ids() {
            set_bit(row, e);
        }
    }

    fn fill_regex_row(&self, dfa: &ByteDfa, q: u32, row: &mut [u32]) {
        let slot = &self.cache[self.cache_slot(q)];
        if let Some(cached) = slot.get() {
            row.copy_from_slice(cached);
            return;
        }
        row.fill(0);
        self.vocab
            .trie()
            .fill_allowed(q, |s, b| dfa.step(s, b), row);
        if dfa.is_accepting(q) {
            self.set_eos(row);
        }
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
}

/// Sets the bits of the tokens below trie `node` that the parser allows,
/// walking them with `stepper`, whose frame `depth(node)` holds the state
/// at `node`; reports a bound the walk exceeded.
#[inline]
fn walk_below(
    stepper: &mut CfgStepper<'_>,
    trie: &TokenTrie,
    node: usize,
    row: &mut [u32],
) -> Result<()> {
    let mut below = Offset {
        inner: &mut *stepper,
        offset: trie.depth(node),
    };
    trie.walk(node, &mut below, |t| {
        set_bit(row, t);
        true
    });
    match stepper.error.take() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
