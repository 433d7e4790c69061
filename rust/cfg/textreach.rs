//! How many characters of any text a lexeme scan survives: the check that
//! lets a lexer-only entry take a whole text slice of the vocabulary
//! (`crate::slices`) without walking it.
//!
//! "Text" is what `slices::text_chars` accepts: characters from U+0020 up,
//! except `"`, `\` and U+007F. A scan survives a text when every byte of it,
//! mid-character ones included, leaves it live in a lexer-only walk (not
//! dead, and no lexeme may end there), so every trie node on a slice token's
//! path is live and none is a boundary.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::sync::{Arc, RwLock};

use super::lexcache::{read, write};
use super::lexwalk::{backs_off, ends_after_accepting};
use super::lowered::Cfg;
use crate::regex_dfa::{ByteDfa, DEAD};

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

/// Texts longer than this are never followed, whatever limit a caller
/// asks for: a scan that survives every text this long counts as
/// surviving them all (the longest token of real vocabularies is far
/// shorter).
pub const REACH_LIMIT: usize = 1024;

/// What is known of a state's reach.
#[derive(Clone, Copy, Debug)]
enum Known {
    /// Exactly this (usize::MAX: any length).
    Exact(usize),
    /// Every text of fewer than `.0` characters leaves it live, and those
    /// of exactly `.0` lead to the one state `.1` only: its reach is `.0`
    /// plus that state's (a counted string's character far from its limit).
    Jump(usize, u32),
}

/// The most bytes a text character takes in UTF-8.
const CHAR_BYTES: u32 = 4;

/// One grammar's memo of text successors and reaches.
#[derive(Debug, Default)]
pub struct TextReach {
    successors: RwLock<HashMap<(u32, u32), Successors>>,
    reach: RwLock<HashMap<(u32, u32), Known>>,
    /// Per lexeme: the bytes `text_successors` steps.
    classes: RwLock<HashMap<u32, Arc<ClassBytes>>>,
    /// `survives_without` per (lexeme, state, byte).
    without: RwLock<HashMap<(u32, u32, u8), bool>>,
    /// Per (lexeme, byte): the bytes `survives_without` steps.
    classes_without: RwLock<HashMap<(u32, u8), Arc<ClassBytes>>>,
}

impl TextReach {
    /// The largest n such that a single scan of lexeme `l` in state `q`
    /// survives every text of at most n characters: usize::MAX when it
    /// survives texts of any length, `limit` (at most `REACH_LIMIT`) for
    /// at least that many (or the exact reach, where the memo knows it). A caller asks for no more than it can use (the
    /// vocabulary's longest text token, 128 characters on Llama-3): each
    /// character is a step here, and a string with `maxLength: 2000`
    /// would otherwise be followed a thousand characters deep in its first
    /// fill.
    pub fn reach(&self, cfg: &Cfg, l: u32, q: u32, limit: usize) -> usize {
        let limit = limit.min(REACH_LIMIT);
        let mut level: Vec<u32> = vec![q];
        let mut n = 0;
        // Levels of one state (a counted string's characters) with their
        // depth: what the walk finds holds for them too.
        let mut chain: Vec<(usize, u32)> = Vec::new();
        let mut seen_one: HashSet<u32> = HashSet::default();
        let mut seen_many: HashSet<Vec<u32>> = HashSet::default();
        let exact = loop {
            if n >= limit {
                break None;
            }
            // The states after n characters determine everything after: a
            // repeated set repeats forever.
            let repeated = match level[..] {
                [s] => {
                    let known = read(&self.reach).get(&(l, s)).copied();
                    match known {
                        Some(Known::Exact(r)) => break Some(n.saturating_add(r)),
                        Some(Known::Jump(by, to)) => {
                            chain.push((n, s));
                            if !seen_one.insert(s) {
                                break Some(usize::MAX);
                            }
                            level = vec![to];
                            n += by;
                            continue;
                        }
                        None => {}
                    }
                    chain.push((n, s));
                    if let Some((by, to)) = self.copy_jump(cfg, l, s) {
                        // Not a repeat: `to` is a later copy's state.
                        seen_one.insert(s);
                        level = vec![to];
                        n += by;
                        continue;
                    }
                    !seen_one.insert(s)
                }
                _ => !seen_many.insert(level.clone()),
            };
            if repeated {
                break Some(usize::MAX);
            }
            let next = self.next_level(cfg, l, &level);
            let Some(next) = next.filter(|next| !next.is_empty()) else {
                break Some(n);
            };
            level = next;
            n += 1;
        };
        let at_end = match (exact, &level[..]) {
            (Some(r), _) => Some(Known::Exact(r)),
            (None, [s]) => Some(Known::Jump(n, *s)),
            _ => None,
        };
        if let Some(at_end) = at_end {
            let mut memo = write(&self.reach);
            for (depth, s) in chain {
                let known = match at_end {
                    Known::Exact(usize::MAX) => Known::Exact(usize::MAX),
                    Known::Exact(r) => Known::Exact(r - depth),
                    Known::Jump(at, to) => Known::Jump(at - depth, to),
                };
                memo.insert((l, s), known);
            }
        }
        exact.unwrap_or(limit)
    }

    /// Where a counted repetition's copies let the walk jump from `s`: a
    /// block state whose one text successor is its own place in the next
    /// copy has the same successor, a copy on, from every later copy that
    /// still steps as it does for a character's bytes
    /// (`ByteDfa::alike_length`: the copies after it bound that). So every
    /// text of fewer than `by` characters leaves `s` live, and those of
    /// `by` lead to `to`, the last such copy's state: a `maxLength: 2000`
    /// string is followed to its last few characters in one step.
    fn copy_jump(&self, cfg: &Cfg, l: u32, s: u32) -> Option<(usize, u32)> {
        let lexeme = &cfg.lexemes[l as usize];
        let dfa = lexeme.dfa.as_ref().expect("scans have DFAs");
        // Backing off looks past the next character's bytes.
        if backs_off(cfg.lexing, lexeme) {
            return None;
        }
        let (copy, copies) = dfa.block_copy(s)?;
        // The last copy that steps alike for a character's 4 bytes.
        let last = copies.checked_sub(1 + CHAR_BYTES)?;
        if last <= copy + 1
            || self.successors(cfg, l, s).as_deref() != Some(&[dfa.block_state_in(s, copy + 1)])
        {
            return None;
        }
        Some(((last - copy) as usize, dfa.block_state_in(s, last)))
    }

    /// Whether a single scan of lexeme `l` in state `q` survives every
    /// UTF-8 string of at most `chars` characters (the longest token a
    /// slice holds; at most `REACH_LIMIT` followed) without the ASCII `byte`
    /// (control characters, `"` and `\\` included, unlike `reach`'s text):
    /// free text up to a trigger that starts with it. Yes where the sets of
    /// states after n such characters repeat, or reach `chars` characters,
    /// before any dies. A grammar asks with one `chars` (its vocabulary's).
    pub fn survives_without(&self, cfg: &Cfg, l: u32, q: u32, byte: u8, chars: usize) -> bool {
        if let Some(&known) = read(&self.without).get(&(l, q, byte)) {
            return known;
        }
        let known = read(&self.classes_without).get(&(l, byte)).cloned();
        let classes = known.unwrap_or_else(|| {
            let dfa = cfg.lexemes[l as usize]
                .dfa
                .as_ref()
                .expect("scans have DFAs");
            let c = Arc::new(ClassBytes::without(dfa, byte));
            write(&self.classes_without).insert((l, byte), c.clone());
            c
        });
        // Each state's successors once: the sets of states overlap.
        let mut successors: HashMap<u32, Option<Vec<u32>>> = HashMap::default();
        let mut level = vec![q];
        let mut seen: HashSet<Vec<u32>> = HashSet::default();
        let chars = chars.min(REACH_LIMIT);
        let survives = 'walk: loop {
            if seen.len() >= chars || !seen.insert(level.clone()) {
                break true;
            }
            let mut next = Vec::new();
            for &s in &level {
                let after = successors
                    .entry(s)
                    .or_insert_with(|| text_successors(cfg, &classes, l, s));
                match after {
                    Some(after) => next.extend_from_slice(after),
                    None => break 'walk false,
                }
            }
            next.sort_unstable();
            next.dedup();
            level = next;
        };
        write(&self.without).insert((l, q, byte), survives);
        survives
    }

    /// Whether a single scan of lexeme `l` in state `q`, which survives
    /// every text of `chars` characters (`reach` says so), dies on every
    /// longer one: each state `chars` text characters lead to accepts
    /// nothing, and every text character steps it to the dead state, at
    /// its first byte or a later one, through states that accept nothing.
    /// Then no text token of more than `chars` characters is allowed and no
    /// node on its path is a boundary (a string at its `maxLength`: see
    /// `slices::TextSlices::counted`). No where the lexeme may back off (its
    /// walk then depends on more than the state), or where more than
    /// `MAX_LEVEL` states are in play after some number of characters.
    pub fn dies_after(&self, cfg: &Cfg, l: u32, q: u32, chars: usize) -> bool {
        let lexeme = &cfg.lexemes[l as usize];
        if backs_off(cfg.lexing, lexeme) {
            return false;
        }
        let mut level = vec![q];
        for _ in 0..chars {
            match self.next_level(cfg, l, &level) {
                Some(next) if next.len() <= MAX_LEVEL => level = next,
                _ => return false,
            }
        }
        let dfa = lexeme.dfa.as_ref().expect("scans have DFAs");
        let classes = self.classes(cfg, l);
        level.iter().all(|&s| dies_on_any_text(dfa, &classes, s))
    }

    /// The states one more text character takes a scan of `l` to from any
    /// state of `level`, sorted, without repeats; None where some character
    /// ends a scan from one of them.
    fn next_level(&self, cfg: &Cfg, l: u32, level: &[u32]) -> Option<Vec<u32>> {
        let mut next = Vec::new();
        for &s in level {
            next.extend_from_slice(&self.successors(cfg, l, s)?);
        }
        next.sort_unstable();
        next.dedup();
        Some(next)
    }

    /// The bytes `text_successors` steps for lexeme `l`.
    fn classes(&self, cfg: &Cfg, l: u32) -> Arc<ClassBytes> {
        if let Some(known) = read(&self.classes).get(&l) {
            return known.clone();
        }
        let dfa = cfg.lexemes[l as usize]
            .dfa
            .as_ref()
            .expect("scans have DFAs");
        let c = Arc::new(ClassBytes::new(dfa));
        write(&self.classes).insert(l, c.clone());
        c
    }

    fn successors(&self, cfg: &Cfg, l: u32, s: u32) -> Successors {
        if let Some(known) = read(&self.successors).get(&(l, s)) {
            return known.clone();
        }
        let classes = self.classes(cfg, l);
        let found = text_successors(cfg, &classes, l, s).map(Arc::from);
        write(&self.successors).insert((l, s), found.clone());
        found
    }
}

/// One byte of each class a DFA has within each range of text bytes (the
/// ASCII range, then `MULTIBYTE`'s), `"` and `\\` left out: bytes of one
/// class step alike from every state.
#[derive(Debug)]
struct ClassBytes {
    ascii: Vec<u8>,
    multibyte: Vec<Vec<Vec<u8>>>,
}

impl ClassBytes {
    fn new(dfa: &ByteDfa) -> Self {
        Self::of(dfa, 0x20, &[b'"', b'\\', 0x7F])
    }

    /// Over every character of UTF-8 but the ASCII `byte` (control
    /// characters, `"` and `\\` too): a scan that survives these survives
    /// every token of `TextSlices::without`'s slice for `byte`.
    fn without(dfa: &ByteDfa, byte: u8) -> Self {
        Self::of(dfa, 0x00, &[byte])
    }

    /// The ASCII characters from `lowest` up and every multibyte one,
    /// `out` left out.
    fn of(dfa: &ByteDfa, lowest: u8, out: &[u8]) -> Self {
        let of = |lo: u8, hi: u8| {
            let mut seen = [false; 256];
            (lo..=hi)
                .filter(|b| !out.contains(b))
                .filter(|&b| !std::mem::replace(&mut seen[dfa.class(b) as usize], true))
                .collect()
        };
        ClassBytes {
            ascii: of(lowest, 0x7F),
            multibyte: MULTIBYTE
                .iter()
                .map(|ranges| ranges.iter().map(|&(lo, hi)| of(lo, hi)).collect())
                .collect(),
        }
    }
}

/// States a level of `TextReach::dies_after` may hold: a counted string's
/// levels hold one (two or three with `minLength`-like splits).
const MAX_LEVEL: usize = 16;

/// Whether `s` accepts nothing and every text character leads it to the
/// dead state through states that accept nothing (see `dies_after`).
fn dies_on_any_text(dfa: &ByteDfa, classes: &ClassBytes, s: u32) -> bool {
    if dfa.is_accepting(s) || classes.ascii.iter().any(|&b| dfa.step(s, b) != DEAD) {
        return false;
    }
    classes.multibyte.iter().all(|ranges| {
        let mut states = vec![s];
        for bytes in ranges {
            let mut next = Vec::new();
            for &x in &states {
                for &b in bytes {
                    let t = dfa.step(x, b);
                    if t != DEAD {
                        next.push(t);
                    }
                }
            }
            next.sort_unstable();
            next.dedup();
            if next.iter().any(|&t| dfa.is_accepting(t)) {
                return false;
            }
            states = next;
        }
        states.is_empty()
    })
}

/// The states one text character takes a scan of `l` from `s` to.
fn text_successors(cfg: &Cfg, classes: &ClassBytes, l: u32, s: u32) -> Option<Vec<u32>> {
    let lexeme = &cfg.lexemes[l as usize];
    let dfa = lexeme.dfa.as_ref().expect("scans have DFAs");
    // As in a lexer-only walk: a lexeme may end after a byte it accepts.
    let ends_after = ends_after_accepting(cfg.lexing, lexeme);
    let live = |t: u32| t != DEAD && !(ends_after && dfa.is_accepting(t));
    // A longest-match lexeme may end where it may back off (see `Lexeme`).
    let stops_at_back_off = backs_off(cfg.lexing, lexeme);
    // Most classes lead to the state the previous one led to (a string's
    // characters all go to one state): those are not pushed again.
    let step_all = |x: u32, bytes: &[u8], out: &mut Vec<u32>| -> bool {
        for &b in bytes {
            let t = dfa.step(x, b);
            if !live(t)
                || (stops_at_back_off && lexeme.may_back_off(dfa, x, t))
                || (lexeme.splits() && dfa.is_accepting(x))
            {
                return false;
            }
            if out.last() != Some(&t) {
                out.push(t);
            }
        }
        true
    };
    let mut out = Vec::with_capacity(16);
    if !step_all(s, &classes.ascii, &mut out) {
        return None;
    }
    let (mut states, mut next) = (Vec::with_capacity(16), Vec::with_capacity(16));
    for ranges in &classes.multibyte {
        states.clear();
        states.push(s);
        for bytes in ranges {
            next.clear();
            for &x in &states {
                if !step_all(x, bytes, &mut next) {
                    return None;
                }
            }
            next.sort_unstable();
            next.dedup();
            std::mem::swap(&mut states, &mut next);
        }
        out.extend_from_slice(&states);
    }
    out.sort_unstable();
    out.dedup();
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfg::lower::lower;
    use crate::schema;

    /// The grammar of the string schema `text`, and its lexeme that reads
    /// the opening quote with the state after it.
    fn string_scan_of(text: &str) -> (Cfg, u32, u32) {
        let cfg = lower(&schema::compile(text, &Default::default()).unwrap()).unwrap();
        let (l, q) = (cfg.lexemes.iter().enumerate())
            .find_map(|(l, lexeme)| {
                let dfa = lexeme.dfa.as_ref()?;
                let q = dfa.step(dfa.start(), b'"');
                (q != DEAD).then_some((l as u32, q))
            })
            .expect("a lexeme reads the quote");
        (cfg, l, q)
    }

    /// `string_scan_of` a string with `maxLength: max`.
    fn string_scan(max: usize) -> (Cfg, u32, u32) {
        string_scan_of(&format!(r#"{{"type": "string", "maxLength": {max}}}"#))
    }

    #[test]
    fn reach_follows_texts_no_further_than_asked() {
        let (cfg, l, q) = string_scan(2000);
        let memo = TextReach::default();
        assert_eq!(memo.reach(&cfg, l, q, 128), 128);
        // What the shorter walk left in the memo does not cap a longer one.
        assert_eq!(memo.reach(&cfg, l, q, 1500), REACH_LIMIT);
        assert_eq!(memo.reach(&cfg, l, q, 128), 128);
        assert_eq!(
            TextReach::default().reach(&cfg, l, q, usize::MAX),
            REACH_LIMIT
        );
        // Near the limit the reach is exact, whatever the walk asked before.
        let dfa = cfg.lexemes[l as usize].dfa.as_ref().unwrap();
        let near_end = dfa.step_bytes(q, &[b'x'; 1995]);
        assert_eq!(memo.reach(&cfg, l, near_end, 128), 5);
        assert_eq!(TextReach::default().reach(&cfg, l, near_end, 3), 3);
        let (cfg, l, q) = string_scan(40);
        assert_eq!(TextReach::default().reach(&cfg, l, q, 128), 40);
        // Long counts are jumped copy by copy, and the reach stays exact:
        // from every place, with a fresh memo and a used one.
        for max in [600, 1000] {
            let (cfg, l, q) = string_scan(max);
            let dfa = cfg.lexemes[l as usize].dfa.as_ref().unwrap();
            let one = dfa.step_bytes(q, b"x");
            assert!(dfa.block_copy(one).is_some(), "a block of copies");
            let memo = TextReach::default();
            for read in [0, 1, 37, max - 9, max - 5, max - 4, max - 1, max] {
                let at = dfa.step_bytes(q, &vec![b'x'; read]);
                let want = max - read;
                assert_eq!(memo.reach(&cfg, l, at, REACH_LIMIT), want, "{max} {read}");
                assert_eq!(TextReach::default().reach(&cfg, l, at, REACH_LIMIT), want);
            }
            // A multi-byte character counts once.
            let at = dfa.step_bytes(q, "é".repeat(100).as_bytes());
            assert_eq!(memo.reach(&cfg, l, at, REACH_LIMIT), max - 100);
        }
        let text = r#"{"type": "string", "minLength": 10, "maxLength": 900}"#;
        let (cfg, l, q) = string_scan_of(text);
        assert_eq!(TextReach::default().reach(&cfg, l, q, REACH_LIMIT), 900);
        // A string without a bound survives texts of any length.
        let (cfg, l, q) = string_scan_of(r#"{"type": "string"}"#);
        assert_eq!(TextReach::default().reach(&cfg, l, q, 128), usize::MAX);
    }

    #[test]
    fn a_counted_string_dies_on_every_text_past_its_limit_only() {
        let memo = TextReach::default();
        let (cfg, l, q) = string_scan(12);
        let dfa = cfg.lexemes[l as usize].dfa.as_ref().unwrap();
        for read in 0..=12 {
            let at = dfa.step_bytes(q, "é".repeat(read).as_bytes());
            assert_eq!(memo.reach(&cfg, l, at, REACH_LIMIT), 12 - read);
            assert!(memo.dies_after(&cfg, l, at, 12 - read), "{read}");
            // Asked short of the reach, the texts one longer survive.
            assert!(read == 12 || !memo.dies_after(&cfg, l, at, 11 - read));
        }
        // Past the count, `a` goes on where `c` ends the string: the reach
        // is 0 but not every character dies.
        let text = r#"{"type": "string", "maxLength": 5, "pattern": "^[ab]*$"}"#;
        let (cfg, l, q) = string_scan_of(text);
        let memo = TextReach::default(); // a memo is one grammar's
        assert_eq!(memo.reach(&cfg, l, q, REACH_LIMIT), 0);
        assert!(!memo.dies_after(&cfg, l, q, 0));
        let dfa = cfg.lexemes[l as usize].dfa.as_ref().unwrap();
        assert!(!memo.dies_after(&cfg, l, dfa.step_bytes(q, b"abab"), 0));
        assert!(memo.dies_after(&cfg, l, dfa.step_bytes(q, b"ababa"), 0));
    }
}
