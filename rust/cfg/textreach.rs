//! How many characters of any text a lexeme scan survives: the check that
//! lets a lexer-only entry take a whole text slice of the vocabulary
//! (`crate::slices`) without walking it.
//!
//! "Text" is what `slices::text_chars` accepts: characters from U+0020 up,
//! except `"` and `\`. A scan survives a text when every byte of it,
//! mid-character ones included, leaves it live in a lexer-only walk (not
//! dead, and no lexeme may end there), so every trie node on a slice token's
//! path is live and none is a boundary.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::sync::{Arc, RwLock};

use super::ast::Lexing;
use super::lower::Cfg;
use crate::regex_dfa::DEAD;

/// UTF-8 encodings of the scalar values from U+0080 up, as byte ranges
/// (surrogates and overlong forms excluded).
const MULTIBYTE: [&[(u8, u8)]; 8] = [
    &[(0xC2, 0xDF), (0x80, 0xBF)],
    &[(0xE0, 0xE0), (0xA0, 0xBF), (0x80, 0xBF)],
    &[(0xE1, 0xEC), (0x80, 0xBF), (0x80, 0xBF)],
    &[(0xED, 0xED), (0x80, 0x9F), (0x80, 0xBF)],
    &[(0xEE, 0xEF), (0x80, 0xBF), (0x80, 0xBF)],
    &[(0xF0, 0xF0), (0x90, 0xBF), (0x80, 0xBF), (0x80, 0xBF)],
    &[(0xF1, 0xF3), (0x80, 0xBF), (0x80, 0xBF), (0x80, 0xBF)],
    &[(0xF4, 0xF4), (0x80, 0x8F), (0x80, 0xBF), (0x80, 0xBF)],
];

/// States after one text character, per (lexeme, state); None when some
/// character (or a byte inside one) does not leave the scan live.
type Successors = Option<Arc<[u32]>>;

/// Texts longer than this are not followed: a scan that survives every
/// text this long counts as surviving them all (the longest token of real
/// vocabularies is far shorter).
pub const REACH_LIMIT: usize = 1024;

/// One grammar's memo of text successors and reaches.
#[derive(Debug, Default)]
pub struct TextReach {
    successors: RwLock<HashMap<(u32, u32), Successors>>,
    /// Exact reaches (below `REACH_LIMIT`, or usize::MAX).
    reach: RwLock<HashMap<(u32, u32), usize>>,
}

impl TextReach {
    /// The largest n such that a single scan of lexeme `l` in state `q`
    /// survives every text of at most n characters: usize::MAX when it
    /// survives texts of any length, `REACH_LIMIT` for at least that many.
    pub fn reach(&self, cfg: &Cfg, l: u32, q: u32) -> usize {
        let mut level: Vec<u32> = vec![q];
        // Levels of one state (a counted string's characters) with their
        // depth: their reaches follow from the result.
        let mut chain: Vec<(usize, u32)> = Vec::new();
        let mut seen_one: HashSet<u32> = HashSet::default();
        let mut seen_many: HashSet<Vec<u32>> = HashSet::default();
        let mut result = REACH_LIMIT;
        for n in 0..REACH_LIMIT {
            // The states after n characters determine everything after: a
            // repeated set repeats forever.
            let repeated = match level[..] {
                [s] => {
                    if let Some(&r) = read(&self.reach).get(&(l, s)) {
                        result = n.saturating_add(r);
                        break;
                    }
                    chain.push((n, s));
                    !seen_one.insert(s)
                }
                _ => !seen_many.insert(level.clone()),
            };
            if repeated {
                result = usize::MAX;
                break;
            }
            let mut next = Vec::new();
            let mut dies = false;
            for &s in &level {
                match self.successors(cfg, l, s) {
                    Some(after) => next.extend_from_slice(&after),
                    None => {
                        dies = true;
                        break;
                    }
                }
            }
            if dies {
                result = n;
                break;
            }
            next.sort_unstable();
            next.dedup();
            level = next;
        }
        if result != REACH_LIMIT {
            let mut memo = write(&self.reach);
            for (depth, s) in chain {
                let r = if result == usize::MAX {
                    usize::MAX
                } else {
                    result - depth
                };
                memo.insert((l, s), r);
            }
        }
        result
    }

    fn successors(&self, cfg: &Cfg, l: u32, s: u32) -> Successors {
        if let Some(known) = read(&self.successors).get(&(l, s)) {
            return known.clone();
        }
        let found = text_successors(cfg, l, s).map(Arc::from);
        write(&self.successors).insert((l, s), found.clone());
        found
    }
}

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}

/// The states one text character takes a scan of `l` from `s` to.
fn text_successors(cfg: &Cfg, l: u32, s: u32) -> Option<Vec<u32>> {
    let lexeme = &cfg.lexemes[l as usize];
    let dfa = lexeme.dfa.as_ref().expect("scans have DFAs");
    // As in a lexer-only walk (`lexcache::OneScan`): an all-splits lexeme
    // that is not greedy ends after every byte it accepts.
    let ends_after = cfg.lexing == Lexing::AllSplits && !lexeme.greedy;
    let live = |t: u32| t != DEAD && !(ends_after && dfa.is_accepting(t));
    let mut out = Vec::new();
    // Bytes of one class step alike: one step per run of a class.
    let step_range = |x: u32, lo: u8, hi: u8, out: &mut Vec<u32>| -> bool {
        let mut last_class = None;
        for b in lo..=hi {
            if b == b'"' || b == b'\\' {
                continue;
            }
            let class = dfa.class(b);
            if last_class == Some(class) {
                continue;
            }
            last_class = Some(class);
            let t = dfa.step(x, b);
            if !live(t) {
                return false;
            }
            out.push(t);
        }
        true
    };
    if !step_range(s, 0x20, 0x7F, &mut out) {
        return None;
    }
    for ranges in MULTIBYTE {
        let mut states = vec![s];
        for &(lo, hi) in ranges {
            let mut next = Vec::with_capacity(states.len());
            for &x in &states {
                if !step_range(x, lo, hi, &mut next) {
                    return None;
                }
            }
            next.sort_unstable();
            next.dedup();
            states = next;
        }
        out.extend(states);
    }
    out.sort_unstable();
    out.dedup();
    Some(out)
}
