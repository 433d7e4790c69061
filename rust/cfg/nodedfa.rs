//! Regular grammar nodes as byte automata.
//!
//! A sub-expression without rule references is one lexeme (see `lower`);
//! this module turns such a node into its DFA. Most nodes print as a regex
//! and go through regex-automata (`regex_dfa`); nodes that regex-automata
//! is slow on are put together from their parts instead: products and
//! differences of automata (`product_of`), large counted repetitions and
//! heavy parts joined one after another (`composed`). Automata are kept in
//! a process-wide cache by their regex text (`DfaCache`, bounded in bytes),
//! since schemas and grammars repeat the same strings, numbers and
//! whitespace over and over.

use rustc_hash::FxHashMap as HashMap;
use std::sync::{Arc, Mutex};

use super::ast::Node;
use crate::error::{Error, Result};
use crate::regex_dfa::{ByteDfa, Op, DEAD, LARGE_REPEAT};

/// Whether `d` matches `text` and nothing else.
pub(super) fn matches_only(d: &ByteDfa, text: &[u8]) -> bool {
    let mut q = d.start();
    for &want in text {
        let live_other = (0..=255u8).any(|b| b != want && d.step(q, b) != DEAD);
        if live_other || d.is_accepting(q) {
            return false;
        }
        q = d.step(q, want);
        if q == DEAD {
            return false;
        }
    }
    d.is_accepting(q) && (0..=255u8).all(|b| d.step(q, b) == DEAD)
}

pub(super) fn is_regular(n: &Node) -> bool {
    match n {
        Node::Ref(..)
        | Node::Call(..)
        | Node::Members(_)
        | Node::Intersect(_)
        | Node::Minus(..)
        | Node::DecimalMultiples(_)
        | Node::Automaton(_)
        | Node::Tokens(_) => false,
        Node::Seq(v) | Node::Alt(v) => v.iter().all(is_regular),
        Node::Repeat { node, .. } => is_regular(node),
        _ => true,
    }
}

fn escape_char(c: char, out: &mut String) {
    if c.is_ascii_alphanumeric() {
        out.push(c);
    } else {
        out.push_str(&format!("\\x{{{:X}}}", c as u32));
    }
}

/// Renders a regular node in Rust `regex` syntax.
fn to_regex(n: &Node, out: &mut String) {
    match n {
        Node::Empty => out.push_str("(?:)"),
        Node::Literal(s) => {
            out.push_str("(?:");
            s.chars().for_each(|c| escape_char(c, out));
            out.push(')');
        }
        Node::Class { ranges, negated } => {
            if ranges.is_empty() {
                // [] matches nothing; [^] matches any character.
                out.push_str(if *negated {
                    "(?s:.)"
                } else {
                    "[^\\x{0}-\\x{10FFFF}]"
                });
                return;
            }
            out.push_str(if *negated { "[^" } else { "[" });
            for &(lo, hi) in ranges {
                escape_char(lo, out);
                if hi != lo {
                    out.push('-');
                    escape_char(hi, out);
                }
            }
            out.push(']');
        }
        Node::AnyChar => out.push_str("(?s:.)"),
        Node::Regex(r) => {
            out.push_str("(?:");
            out.push_str(r);
            out.push(')');
        }
        Node::Ref(..)
        | Node::Call(..)
        | Node::Members(_)
        | Node::Intersect(_)
        | Node::Minus(..)
        | Node::DecimalMultiples(_)
        | Node::Automaton(_)
        | Node::Tokens(_) => unreachable!("to_regex is only called on regular nodes"),
        Node::Seq(v) => {
            out.push_str("(?:");
            v.iter().for_each(|x| to_regex(x, out));
            out.push(')');
        }
        Node::Alt(v) => {
            out.push_str("(?:");
            for (i, x) in v.iter().enumerate() {
                if i > 0 {
                    out.push('|');
                }
                to_regex(x, out);
            }
            out.push(')');
        }
        Node::Repeat { node, min, max } => {
            out.push_str("(?:");
            to_regex(node, out);
            out.push(')');
            match max {
                Some(m) => out.push_str(&format!("{{{min},{m}}}")),
                None => out.push_str(&format!("{{{min},}}")),
            }
        }
    }
}

/// A DFA is built for "no string" only to report it: None instead.
pub(super) fn none_if_empty(built: Result<ByteDfa>) -> Result<Option<ByteDfa>> {
    match built {
        Ok(d) => Ok(Some(d)),
        Err(Error::Compile(m)) if m.ends_with("matches no string") => Ok(None),
        Err(e) => Err(e),
    }
}

/// Work bound on minimizing an operand of a product (states x byte classes
/// x rounds): a product's size is that of its operands multiplied.
const MINIMIZE_WORK: usize = 2_000_000;

/// Operands with fewer states than this are used as they are: a product of
/// small automata is small anyway.
const MINIMIZE_STATES: usize = 256;

/// `n`'s DFA, minimized when that is cheap, as an operand of a product.
fn operand(n: &Node) -> Result<Option<Arc<ByteDfa>>> {
    Ok(dfa_of(n, PART_ENTRY_BYTES)?.map(|d| {
        if d.num_states() < MINIMIZE_STATES {
            return d;
        }
        minimal_within(&d, MINIMIZE_WORK).map_or(d, Arc::new)
    }))
}

/// The full-match DFA of regular node `n` (None: it matches no string),
/// through the process-wide cache: for front ends that build automata of
/// their own around such nodes (`schema`'s enums of records).
pub fn regular_dfa(n: &Node) -> Result<Option<Arc<ByteDfa>>> {
    dfa_of(n, DFA_CACHE_ENTRY_BYTES)
}

/// The full-match DFA of a regular node, intersections and differences
/// included (None: it matches no string); `keep` as in `cached`.
pub(super) fn dfa_of(n: &Node, keep: usize) -> Result<Option<Arc<ByteDfa>>> {
    match n {
        // Products are cached whole: schemas repeat the same `format` with
        // the same length bounds, and each product costs milliseconds.
        Node::Intersect(_) | Node::Minus(..) => cached(n, keep, |_| product_of(n)),
        // Built whole by the front end, and held by the node.
        Node::Automaton(p) => Ok(Some(p.0.clone())),
        Node::DecimalMultiples(divisor) => cached(n, keep, |_| {
            crate::schema::decimals::multiples_dfa(divisor)
                .map(|d| Some(Arc::new(d)))
                .map_err(Error::Compile)
        }),
        _ if is_regular(n) => composed(n, keep),
        _ => Err(Error::Compile(
            "intersections and differences take regular parts only".into(),
        )),
    }
}

/// The DFA of an intersection or a difference (None: no string).
fn product_of(n: &Node) -> Result<Option<Arc<ByteDfa>>> {
    match n {
        Node::Intersect(parts) => {
            let mut acc: Option<Arc<ByteDfa>> = None;
            for p in parts {
                let Some(d) = operand(p)? else {
                    return Ok(None);
                };
                acc = Some(match acc {
                    None => d,
                    Some(a) => match none_if_empty(ByteDfa::product(&a, &d, Op::And))? {
                        Some(x) => Arc::new(x),
                        None => return Ok(None),
                    },
                });
            }
            Ok(acc)
        }
        Node::Minus(a, b) => {
            let Some(a) = operand(a)? else {
                return Ok(None);
            };
            match operand(b)? {
                None => Ok(Some(a)),
                Some(b) => Ok(none_if_empty(ByteDfa::product(&a, &b, Op::AndNot))?.map(Arc::new)),
            }
        }
        _ => unreachable!("product_of takes intersections and differences"),
    }
}

/// Regular items whose DFA has more states than this stay out of the
/// lexemes of the runs around them (a JSON `date-time` value after its key).
const HEAVY_STATES: usize = 256;

pub(super) fn is_heavy(n: &Node) -> Result<bool> {
    if matches!(
        n,
        Node::Empty | Node::Literal(_) | Node::Class { .. } | Node::AnyChar
    ) {
        return Ok(false);
    }
    Ok(dfa_of(n, DFA_CACHE_ENTRY_BYTES)?.is_some_and(|d| d.num_states() > HEAVY_STATES))
}

/// The DFA of regular node `n` (through the cache for sequences and
/// repetitions), put together without a regex compiler where
/// that is exact and cheap: literals and alternatives of literals are tries,
/// sequences are joined by `ByteDfa::concat` and large counts built by
/// `ByteDfa::repeat` when those are deterministic; everything else comes
/// from its regex (through the process-wide cache). Schemas repeat the same
/// value lexemes after different keys, so most parts are cache hits.
fn composed(n: &Node, keep: usize) -> Result<Option<Arc<ByteDfa>>> {
    match n {
        Node::Seq(items) if items.len() > 1 => cached(n, keep, |_| compose(n, keep)),
        Node::Repeat { .. } => cached(n, keep, |_| compose(n, keep)),
        _ => compose(n, keep),
    }
}

/// The DFA of regular node `n` as a part of a larger automaton (kept in
/// the cache only when small).
pub(super) fn composed_part(n: &Node) -> Result<Option<Arc<ByteDfa>>> {
    composed(n, PART_ENTRY_BYTES)
}

/// `n`'s DFA built from its parts' (see `composed`; `keep` as in `cached`).
fn compose(n: &Node, keep: usize) -> Result<Option<Arc<ByteDfa>>> {
    if let Some(words) = literal_words(n) {
        let words: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
        return Ok(ByteDfa::literals(&words).map(Arc::new));
    }
    match n {
        Node::Seq(items) if items.len() > 1 => {
            let mut parts = Vec::new();
            for part in literal_runs(items) {
                match composed(&part, PART_ENTRY_BYTES)? {
                    Some(d) => parts.push(d),
                    None => return Ok(None),
                }
            }
            if let [one] = &parts[..] {
                return Ok(Some(one.clone()));
            }
            let refs: Vec<&ByteDfa> = parts.iter().map(|p| &**p).collect();
            match ByteDfa::concat_all(&refs)? {
                Some(d) => Ok(Some(Arc::new(d))),
                None => uncached_regex_dfa(n),
            }
        }
        Node::Seq(items) if items.len() == 1 => composed(&items[0], keep),
        Node::Repeat { node, min, max } if max.unwrap_or(*min) > LARGE_REPEAT => {
            let Some(y) = composed(node, PART_ENTRY_BYTES)? else {
                return uncached_regex_dfa(n);
            };
            match ByteDfa::repeat(&y, *min, *max)? {
                Some(d) => Ok(Some(Arc::new(d))),
                None => uncached_regex_dfa(n),
            }
        }
        Node::Repeat { .. } => uncached_regex_dfa(n),
        _ => regex_dfa(n),
    }
}

/// The strings of `n` if it is a literal, a sequence of literals or an
/// alternation of those.
pub(super) fn literal_words(n: &Node) -> Option<Vec<String>> {
    fn word(n: &Node) -> Option<String> {
        match n {
            Node::Empty => Some(String::new()),
            Node::Literal(s) => Some(s.clone()),
            Node::Seq(v) => v.iter().map(word).collect(),
            _ => None,
        }
    }
    match n {
        Node::Alt(v) => v.iter().map(word).collect(),
        other => word(other).map(|w| vec![w]),
    }
}

/// `items` with each run of literals joined into one.
fn literal_runs(items: &[Node]) -> Vec<Node> {
    let mut out: Vec<Node> = Vec::new();
    for item in items {
        match (out.last_mut(), item) {
            (Some(Node::Literal(prev)), Node::Literal(s)) => prev.push_str(s),
            (_, Node::Empty) => {}
            _ => out.push(item.clone()),
        }
    }
    if out.is_empty() {
        out.push(Node::Empty);
    }
    out
}

/// Lexeme DFAs by regex, shared by every grammar compiled in this process
/// (bounded in bytes; the least recently used entries go first, so a run of
/// large one-off automata does not push out the formats every schema uses).
static DFA_CACHE: Mutex<Option<DfaCache>> = Mutex::new(None);
const DFA_CACHE_BYTES: usize = 256 << 20;
/// Products of large operands take tens of MiB and tens of ms to build; a
/// family of schemas repeats them.
pub(super) const DFA_CACHE_ENTRY_BYTES: usize = DFA_CACHE_BYTES / 2;
/// Parts of a lexeme (a counted string inside its quotes, an operand of an
/// intersection) are kept only when small: the lexeme is kept whole, and
/// keeping a large part as well would double what it costs the cache.
const PART_ENTRY_BYTES: usize = 4 << 20;

#[derive(Default)]
struct DfaCache {
    map: HashMap<String, CacheEntry>,
    bytes: usize,
    /// Counts lookups: an entry's `used` is the tick of its last one.
    tick: u64,
}

struct CacheEntry {
    dfa: Option<Arc<ByteDfa>>,
    size: usize,
    used: u64,
}

impl DfaCache {
    fn get(&mut self, key: &str) -> Option<Option<Arc<ByteDfa>>> {
        self.tick += 1;
        let entry = self.map.get_mut(key)?;
        entry.used = self.tick;
        Some(entry.dfa.clone())
    }

    fn insert(&mut self, key: String, dfa: Option<Arc<ByteDfa>>, size: usize) {
        if self.map.contains_key(&key) {
            return; // another thread built it meanwhile
        }
        if self.bytes + size > DFA_CACHE_BYTES {
            // One sort of the entries by age frees a quarter of the budget
            // beyond what is needed, so sorts stay rare.
            let room = DFA_CACHE_BYTES - DFA_CACHE_BYTES / 4;
            let mut by_age: Vec<(u64, String)> =
                self.map.iter().map(|(k, e)| (e.used, k.clone())).collect();
            by_age.sort_unstable();
            for (_, old) in by_age {
                if self.bytes + size <= room {
                    break;
                }
                if let Some(gone) = self.map.remove(&old) {
                    self.bytes -= gone.size;
                }
            }
        }
        self.tick += 1;
        self.bytes += size;
        let used = self.tick;
        self.map.insert(key, CacheEntry { dfa, size, used });
    }
}

fn cache_lock() -> std::sync::MutexGuard<'static, Option<DfaCache>> {
    DFA_CACHE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The DFA of regular node `n` from the cache, else made by `build` (and
/// kept if it takes at most `keep` bytes): the language depends only on
/// `n`'s regex, however it is built.
fn cached(
    n: &Node,
    keep: usize,
    build: impl FnOnce(&str) -> Result<Option<Arc<ByteDfa>>>,
) -> Result<Option<Arc<ByteDfa>>> {
    let mut re = String::new();
    cache_key(n, &mut re);
    if let Some(hit) = cache_lock().as_mut().and_then(|c| c.get(&re)) {
        return Ok(hit);
    }
    let dfa = build(&re)?;
    let size = re.len() + dfa.as_ref().map_or(0, |d| d.memory_bytes());
    if size <= keep.min(DFA_CACHE_ENTRY_BYTES) {
        let mut guard = cache_lock();
        guard
            .get_or_insert_with(DfaCache::default)
            .insert(re, dfa.clone(), size);
    }
    Ok(dfa)
}

/// `n`'s key in the DFA cache: its regex if it is regular; intersections,
/// differences and multiples are spelled with a NUL mark and
/// length-prefixed parts, which no regex renders to.
pub(super) fn cache_key(n: &Node, out: &mut String) {
    let mut composite = |op: &str, parts: &[&Node]| {
        out.push('\u{0}');
        out.push_str(op);
        for p in parts {
            let mut part = String::new();
            cache_key(p, &mut part);
            out.push_str(&format!("({}){part}", part.len()));
        }
    };
    match n {
        Node::Intersect(parts) => composite("and", &parts.iter().collect::<Vec<_>>()),
        Node::Minus(a, b) => composite("minus", &[a, b]),
        Node::DecimalMultiples(d) => out.push_str(&format!("\u{0}multiples of {d}")),
        // Only within one grammar, which holds the automaton (never a key
        // of the process-wide cache: `dfa_of` takes it from the node).
        Node::Automaton(p) => out.push_str(&format!("\u{0}automaton {:p}", Arc::as_ptr(&p.0))),
        _ => to_regex(n, out),
    }
}

/// How errors name a lexeme: by its terminal's name, else by its regex.
pub(super) fn lexeme_name(re: &str, name: Option<&str>) -> String {
    name.map_or_else(|| format!("/{re}/"), |n| format!("terminal {n}"))
}

/// `n`'s DFA from its regex (through the cache).
fn regex_dfa(n: &Node) -> Result<Option<Arc<ByteDfa>>> {
    cached(n, DFA_CACHE_ENTRY_BYTES, from_regex)
}

fn from_regex(re: &str) -> Result<Option<Arc<ByteDfa>>> {
    if let Some(d) = crate::schema::strings::prebuilt(re) {
        return Ok(Some(Arc::new(d)));
    }
    Ok(none_if_empty(ByteDfa::new(re))?.map(|d| Arc::new(minimal_if_cheap(d))))
}

/// Work bound on minimizing a lexeme's DFA (states x byte classes x rounds).
const LEXEME_MINIMIZE_WORK: usize = 1_000_000;

/// `d` with equivalent states merged when that is cheap. Determinizing
/// leaves equivalent states apart (inside a string, after an ASCII and
/// after a multibyte character); merged, a scan that loops stays in one
/// state, so the parser state repeats and masks come from the memo and the
/// lexer caches.
fn minimal_if_cheap(d: ByteDfa) -> ByteDfa {
    minimal_within(&d, LEXEME_MINIMIZE_WORK).unwrap_or(d)
}

/// `d` minimized, when that takes at most `work` steps (None: too costly,
/// or `d` is minimal or nearly so by construction). The result is kept
/// even when it merged nothing: it is known minimal, so neither a product
/// that takes it as an operand nor a join of it with other parts refines
/// it again (a 200-word count: 6,801 states, 15-20 ms, twice).
fn minimal_within(d: &ByteDfa, work: usize) -> Option<ByteDfa> {
    if !d.minimizing_pays() {
        return None;
    }
    d.minimized(work)
}

/// `n`'s DFA from its regex, outside the cache (the caller caches).
fn uncached_regex_dfa(n: &Node) -> Result<Option<Arc<ByteDfa>>> {
    let mut re = String::new();
    to_regex(n, &mut re);
    from_regex(&re)
}

/// `a` then `b` as one flat sequence, so that a run of regular items across
/// the join lowers to one lexeme.
pub(super) fn then(a: &Node, b: &Node) -> Node {
    let mut items = Vec::new();
    for n in [a, b] {
        match n {
            Node::Seq(v) => items.extend(v.iter().cloned()),
            Node::Empty => {}
            other => items.push(other.clone()),
        }
    }
    Node::seq(items)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfg::gbnf;

    /// The cache forgets its least recently used entries first (down to
    /// three quarters of its budget), counts each key once and stays within
    /// its budget.
    #[test]
    fn dfa_cache_evicts_least_recently_used_within_budget() {
        let mut cache = DfaCache::default();
        let quarter = DFA_CACHE_BYTES / 4;
        for key in ["a", "b", "c", "d"] {
            cache.insert(key.into(), None, quarter);
        }
        cache.insert("b".into(), None, quarter); // already there: no change
        assert_eq!(cache.bytes, 4 * quarter);
        assert!(cache.get("a").is_some()); // now "b" and "c" are the oldest
        cache.insert("e".into(), None, quarter);
        assert!(!cache.map.contains_key("b") && !cache.map.contains_key("c"));
        assert!(["a", "d", "e"].iter().all(|k| cache.map.contains_key(*k)));
        assert!(cache.get("b").is_none());
        cache.insert("f".into(), None, DFA_CACHE_ENTRY_BYTES);
        assert!(cache.bytes <= DFA_CACHE_BYTES);
        assert!(cache.map.contains_key("f"));
        assert_eq!(
            cache.bytes,
            cache.map.values().map(|e| e.size).sum::<usize>()
        );
    }

    /// Intersections, differences and regexes never share a cache key.
    #[test]
    fn cache_keys_tell_products_apart() {
        let re = |r: &str| Node::Regex(r.into());
        let key = |n: &Node| {
            let mut k = String::new();
            cache_key(n, &mut k);
            k
        };
        let nodes = [
            Node::Intersect(vec![re("a"), re("b")]),
            Node::Minus(Box::new(re("a")), Box::new(re("b"))),
            Node::Intersect(vec![re("a)(5)(?:b")]),
            Node::Intersect(vec![re("a"), re("b"), re("c")]),
            Node::Intersect(vec![Node::Intersect(vec![re("a"), re("b")]), re("c")]),
            re("a"),
        ];
        let keys: std::collections::HashSet<String> = nodes.iter().map(key).collect();
        assert_eq!(keys.len(), nodes.len());
    }

    /// Large counts are built by composition; the language is the regex's.
    #[test]
    fn composed_lexemes_equal_their_regex() {
        for src in [
            "root ::= \"<\" ([ab] | \"\\\\\" [nu]){0,40} \">\" [ ]*",
            "root ::= [a]{3} [b]{33,} \"c\"?",
            "root ::= (\"x\" [ab]{0,35})? \"y\"",
        ] {
            let ast = gbnf::parse(src).unwrap();
            let node = &ast.rules[0].body;
            let composed = composed(node, DFA_CACHE_ENTRY_BYTES).unwrap().expect(src);
            let plain = regex_dfa(node).unwrap().unwrap();
            // Random walks through the language (each DFA leading in turn),
            // checking both agree on every prefix's liveness and acceptance.
            let mut seed = 7u64;
            let alphabet = b"<>ab\\nuxyc ";
            for walk in 0..400 {
                let lead = if walk % 2 == 0 { &composed } else { &plain };
                let (mut qa, mut qb) = (composed.start(), plain.start());
                for _ in 0..60 {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let q = if walk % 2 == 0 { qa } else { qb };
                    let live: Vec<u8> = alphabet
                        .iter()
                        .copied()
                        .filter(|&b| lead.step(q, b) != crate::regex_dfa::DEAD)
                        .collect();
                    // Mostly a live byte; now and then any byte.
                    let byte = if live.is_empty() || (seed >> 60) == 0 {
                        alphabet[(seed >> 33) as usize % alphabet.len()]
                    } else {
                        live[(seed >> 33) as usize % live.len()]
                    };
                    qa = composed.step(qa, byte);
                    qb = plain.step(qb, byte);
                    assert_eq!(qa == 0, qb == 0, "{src}");
                    if qa == 0 {
                        break;
                    }
                    assert_eq!(composed.is_accepting(qa), plain.is_accepting(qb), "{src}");
                }
            }
        }
    }
}
