//! Regexes built from their parts where that is exact and cheaper than
//! determinizing them whole.
//!
//! regex-automata determinizes a pattern as one NFA. Two shapes make that
//! slow where a composition is fast: a large count (`[<600 Unicode
//! ranges>]{1,200}` is 200 copies of one small class automaton, joined by
//! `ByteDfa::repeat`), and alternatives that search between loops (the
//! subsets track which alternatives' loops were entered; joined one by one
//! and minimized, their union is one search for any of them). `ByteDfa::new`
//! asks `hir_to_compose` whether a pattern may compose and `compose_parsed`
//! for its automaton; None sends it back to the whole determinization.

use std::sync::Mutex;

use regex_syntax::hir::{Hir, HirKind};
use rustc_hash::FxHashMap as HashMap;

use super::{parse_utf8, ByteDfa, Op};
use crate::error::{Error, Result};

/// Counted repetitions above this are joined copy by copy by
/// `ByteDfa::repeat` when they can be (in patterns, `compose_parsed`; in
/// grammar nodes, `cfg::lower`): determinizing thousands of NFA copies
/// (`maxLength: 8192`) took most of a second, and ten copies of a Unicode
/// word and its spaces (`^(?:\S+\s+){0,9}\S+$`) 5 ms.
pub const LARGE_REPEAT: u32 = 8;

/// `pattern`'s DFA as `ByteDfa::new` composes it, or None where it
/// determinizes it whole.
#[cfg(test)]
pub(super) fn composed_from_hir(pattern: &str) -> Result<Option<ByteDfa>> {
    match hir_to_compose(pattern) {
        Some(hir) => compose_parsed(&hir),
        None => Ok(None),
    }
}

/// `pattern`'s syntax tree when it may compose (a large count, or an
/// alternation with loops); None otherwise or when it does not parse
/// (`build` reports the error).
pub(super) fn hir_to_compose(pattern: &str) -> Option<Hir> {
    // Most patterns have no large count: skip parsing them twice.
    let has_large_count = pattern.split('{').skip(1).any(|rest| {
        let bounds: String = rest
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == ',')
            .collect();
        bounds
            .split(',')
            .any(|n| n.parse::<u64>().is_ok_and(|n| n > LARGE_REPEAT as u64))
    });
    let may_search = pattern.contains('|') && (pattern.contains('*') || pattern.contains('+'));
    if !has_large_count && !may_search {
        return None;
    }
    parse_utf8(pattern)
}

/// `hir`'s DFA (full-match semantics) put together from its parts where
/// that is exact and cheaper: a pattern such as `[<600 Unicode
/// ranges>]{1,200}` took regex-automata 400 ms to determinize, but is 200
/// copies of one small class automaton (see also `union_of`). None where it
/// does not compose (the caller then determinizes it whole).
pub(super) fn compose_parsed(hir: &Hir) -> Result<Option<ByteDfa>> {
    // An assertion looks across the parts: those are determinized whole.
    if has_look(hir) {
        return Ok(None);
    }
    composed_minimal(hir)
}

/// `compose_hir`, minimized when that is cheap, through the memo: a
/// pattern's count is also a part of other patterns (`^X$` and `^$|(^X$)`
/// under two properties of one schema).
fn composed_minimal(hir: &Hir) -> Result<Option<ByteDfa>> {
    memoized(hir, |hir, _| {
        Ok(compose_hir(hir)?.map(|d| match d.minimizing_pays() {
            true => d.minimized(COMPOSED_MINIMIZE_WORK).unwrap_or(d),
            false => d,
        }))
    })
}

/// Work bound on minimizing a composed automaton (states x classes, and
/// predecessors visited): a 200-word count over JSON text, 6,801 states
/// and 55 classes, takes about 10 ms.
const COMPOSED_MINIMIZE_WORK: usize = 1 << 20;

/// Automata `compose_parsed` and `part_dfa` built, by pattern (the syntax
/// tree printed), shared by every compile in this process. A schema
/// repeats its patterns under many properties and inside larger patterns,
/// and each costs milliseconds: the part `\S+\s+` over JSON text is a
/// regex-automata determinization of Unicode classes, the 200-word count
/// 20 ms composed and minimized. Bounded in bytes: when full, the memo
/// starts over (the grammar-level cache keeps what grammars use).
static MEMO: Mutex<Option<Memo>> = Mutex::new(None);
const MEMO_BYTES: usize = 64 << 20;
const MEMO_ENTRY_BYTES: usize = 8 << 20;

/// Entries by the printed tree, each with its tree: printing is not
/// one-to-one (regex-syntax prints `x(?:[ab]+)?` as `x[ab]+?`, see
/// `part_dfa`), so a hit counts only where the trees are equal.
#[derive(Default)]
struct Memo {
    map: HashMap<String, (Hir, Option<ByteDfa>)>,
    bytes: usize,
}

/// `build(hir, printed)` through the memo (`printed`: the tree's text,
/// the memo's key).
fn memoized(
    hir: &Hir,
    build: impl FnOnce(&Hir, &str) -> Result<Option<ByteDfa>>,
) -> Result<Option<ByteDfa>> {
    let key = hir.to_string();
    let lock = || MEMO.lock().unwrap_or_else(|e| e.into_inner());
    let hit = |m: &Memo| match m.map.get(&key) {
        Some((tree, dfa)) if tree == hir => Some(dfa.clone()),
        _ => None,
    };
    if let Some(dfa) = lock().as_ref().and_then(hit) {
        return Ok(dfa);
    }
    let built = build(hir, &key)?;
    // The tree is counted as long as its printed form.
    let entry_size =
        |dfa: &Option<ByteDfa>| 2 * key.len() + dfa.as_ref().map_or(0, ByteDfa::memory_bytes);
    let size = entry_size(&built);
    if size <= MEMO_ENTRY_BYTES {
        let mut guard = lock();
        let memo = guard.get_or_insert_with(Memo::default);
        if memo.bytes + size > MEMO_BYTES {
            *memo = Memo::default();
        }
        memo.bytes += size;
        if let Some((_, old)) = memo.map.insert(key.clone(), (hir.clone(), built.clone())) {
            memo.bytes -= entry_size(&old);
        }
    }
    Ok(built)
}

fn has_large_repeat(hir: &Hir) -> bool {
    match hir.kind() {
        HirKind::Repetition(r) => r.max.unwrap_or(r.min) > LARGE_REPEAT || has_large_repeat(&r.sub),
        HirKind::Concat(v) | HirKind::Alternation(v) => v.iter().any(has_large_repeat),
        HirKind::Capture(c) => has_large_repeat(&c.sub),
        _ => false,
    }
}

/// Work bound on minimizing each union of alternatives (see `union_of`).
const ALTERNATION_MINIMIZE_WORK: usize = 4_000_000;

/// Whether `compose_hir` builds part `i` of concatenation `parts` from
/// its own parts.
fn composes(parts: &[Hir], i: usize) -> bool {
    has_large_repeat(&parts[i]) || searched_after_loop(parts, i)
}

/// Whether part `i` of `parts` is a search alternation right after a loop
/// (see `union_of`).
fn searched_after_loop(parts: &[Hir], i: usize) -> bool {
    i > 0
        && matches!(parts[i - 1].kind(), HirKind::Repetition(r) if r.max.is_none())
        && is_search_alternation(&parts[i])
}

/// An alternation at least two of whose alternatives loop before
/// something more (see `union_of`).
fn is_search_alternation(hir: &Hir) -> bool {
    match hir.kind() {
        HirKind::Alternation(v) => v.iter().filter(|h| has_inner_loop(h)).count() >= 2,
        HirKind::Capture(c) => is_search_alternation(&c.sub),
        _ => false,
    }
}

/// Whether `hir` holds an unbounded loop with something after it.
fn has_inner_loop(hir: &Hir) -> bool {
    match hir.kind() {
        HirKind::Concat(v) => {
            v.iter().any(has_inner_loop)
                || v.iter()
                    .rev()
                    .skip(1)
                    .any(|h| matches!(h.kind(), HirKind::Repetition(r) if r.max.is_none()))
        }
        HirKind::Alternation(v) => v.iter().any(has_inner_loop),
        HirKind::Repetition(r) => has_inner_loop(&r.sub),
        HirKind::Capture(c) => has_inner_loop(&c.sub),
        _ => false,
    }
}

fn has_look(hir: &Hir) -> bool {
    match hir.kind() {
        HirKind::Look(_) => true,
        HirKind::Repetition(r) => has_look(&r.sub),
        HirKind::Concat(v) | HirKind::Alternation(v) => v.iter().any(has_look),
        HirKind::Capture(c) => has_look(&c.sub),
        _ => false,
    }
}

/// `hir` (free of assertions) joined from its parts; None where it does not
/// compose.
fn compose_hir(hir: &Hir) -> Result<Option<ByteDfa>> {
    match hir.kind() {
        HirKind::Capture(c) => compose_hir(&c.sub),
        // Laziness does not change a full-match language.
        HirKind::Repetition(r) if r.max.unwrap_or(r.min) > LARGE_REPEAT => {
            let Some(sub) = part_dfa(&r.sub)? else {
                return Ok(None);
            };
            ByteDfa::repeat(&sub, r.min, r.max)
        }
        HirKind::Repetition(r) if r.min == 0 && r.max == Some(1) => {
            Ok(optional_part(&r.sub)?.and_then(ByteDfa::or_empty))
        }
        // An optional part (`^$|...` in a pattern).
        HirKind::Alternation(v) if v.len() == 2 => {
            let (Some(empty), Some(part)) = (
                v.iter().position(|h| matches!(h.kind(), HirKind::Empty)),
                v.iter().position(has_large_repeat),
            ) else {
                return Ok(None);
            };
            if empty == part {
                return Ok(None);
            }
            Ok(optional_part(&v[part])?.and_then(ByteDfa::or_empty))
        }
        HirKind::Concat(parts) if (0..parts.len()).any(|i| composes(parts, i)) => {
            let mut dfas = Vec::with_capacity(parts.len());
            for (i, p) in parts.iter().enumerate() {
                let part = if searched_after_loop(parts, i) {
                    union_of(p)?
                } else {
                    part_dfa(p)?
                };
                match part {
                    Some(d) => dfas.push(d),
                    None => return Ok(None),
                }
            }
            let refs: Vec<&ByteDfa> = dfas.iter().collect();
            ByteDfa::concat_all(&refs)
        }
        _ => Ok(None),
    }
}

/// Alternatives that search for something between loops, right after a
/// loop (`".*(?:A.*"|B.*")`, the union of a `oneOf`'s unanchored patterns
/// after its common start): determinized whole, the subsets track which
/// alternatives' loops were entered (seven words over JSON string
/// characters took regex-automata 2.6 s). Joined one by one and minimized,
/// the union is one search for any of them. Elsewhere regex-automata is
/// faster (the `uri` format's alternation).
fn union_of(hir: &Hir) -> Result<Option<ByteDfa>> {
    let v = match hir.kind() {
        HirKind::Alternation(v) => v,
        // `is_search_alternation` looks through groups too.
        HirKind::Capture(c) => return union_of(&c.sub),
        _ => return part_dfa(hir),
    };
    let mut acc: Option<ByteDfa> = None;
    for alt in v {
        let Some(d) = part_dfa(alt)? else {
            return Ok(None);
        };
        acc = Some(match acc {
            None => d,
            Some(a) => match ByteDfa::product(&a, &d, Op::Or) {
                Ok(u) => u.minimized(ALTERNATION_MINIMIZE_WORK).unwrap_or(u),
                // Too large this way: the caller determinizes it whole.
                Err(Error::LimitExceeded(_)) => return Ok(None),
                Err(e) => return Err(e),
            },
        });
    }
    Ok(acc)
}

/// The DFA of the part that `?` or `|$` makes optional: it is the whole
/// pattern but for the empty string, so it is built (and remembered) as a
/// pattern of its own would be.
fn optional_part(hir: &Hir) -> Result<Option<ByteDfa>> {
    match has_large_repeat(hir) {
        true => composed_minimal(hir),
        false => part_dfa(hir),
    }
}

/// A part's DFA: composed where it holds a large count, else determinized.
/// None where it matches nothing or does not compose.
fn part_dfa(hir: &Hir) -> Result<Option<ByteDfa>> {
    if has_large_repeat(hir) {
        return compose_hir(hir);
    }
    memoized(hir, |hir, printed| {
        // Built from the syntax tree itself, not from its printed form:
        // regex-syntax prints a repetition of a repetition without a group,
        // so the part `x(?:[ab]+)?` came back as `x[ab]+?` (lazy, one or
        // more) and `(?:x(?:(?:a|b)+)?)?` refused "x" (found by fuzzing).
        match ByteDfa::full_match(printed, hir) {
            // Minimal parts make minimal-sized joins: a part copied 200
            // times with a fifth of its states redundant (a Unicode word
            // and its spaces over JSON text) left 1,800 states for the
            // whole pattern's minimization to find. A part is small, so
            // this is cheap.
            Ok(d) => Ok(Some(d.minimized(PART_MINIMIZE_WORK).unwrap_or(d))),
            Err(Error::Compile(_)) => Ok(None),
            Err(e) => Err(e),
        }
    })
}

/// Work bound on minimizing a part before it is joined (states x classes).
const PART_MINIMIZE_WORK: usize = 1 << 16;

#[cfg(test)]
mod tests {
    use regex_automata::MatchKind;

    use super::*;
    use crate::regex_dfa::tests::{assert_equivalent, same_language};

    #[test]
    fn composed_patterns_equal_their_regex() {
        let patterns = [
            "[a-z\u{e9}\u{4e00}-\u{9fd5}]{1,200}",
            "x[0-9]{3,40}y",
            "(?:ab|c){0,50}",
            "[a-z]{1,40}[a-z]",
            "\\d{40}",
            "(?:[^\"\\\\]|\\\\.){0,100}",
            "a{33,}b?",
            "(?:a{1,40}|b)c",
            "a{40}$",
            "(?:)|(?:[ab]+ +){0,9}[ab]+",
            "(?:(?:[ab]+ +){0,12}[ab]+)?",
            "(?:)|(?:a[ab]{0,10})*",
        ];
        for p in patterns {
            let composed = ByteDfa::new(p).unwrap();
            let whole = ByteDfa::build(p, MatchKind::All).unwrap();
            assert_equivalent(p, &composed, &whole);
        }
        // The first two are built from parts (the class pattern took
        // regex-automata 400 ms whole).
        assert!(composed_from_hir(patterns[0]).unwrap().is_some());
        assert!(composed_from_hir(patterns[1]).unwrap().is_some());
        assert!(composed_from_hir(patterns[3]).unwrap().is_some());
        assert!(composed_from_hir(patterns[8]).unwrap().is_none());
        // Optional counted parts: their automata with the start accepting
        // (not where a loop comes back to the start).
        assert!(composed_from_hir(patterns[9]).unwrap().is_some());
        assert!(composed_from_hir(patterns[10]).unwrap().is_some());
        assert!(composed_from_hir(patterns[11]).unwrap().is_none());
    }

    /// A count met again as the optional part of another pattern comes
    /// from the memo, minimized once, and both patterns keep their
    /// languages.
    #[test]
    fn a_count_met_again_as_an_optional_part_is_remembered() {
        let count = "(?:[a-c\u{e9}]+ +){0,13}[a-c\u{e9}]+";
        let patterns = [
            count.to_string(),
            format!("(?:)|(?:{count})"),
            format!("(?:{count})?"),
        ];
        for p in &patterns {
            let composed = ByteDfa::new(p).unwrap();
            let whole = ByteDfa::build(p, MatchKind::All).unwrap();
            assert_equivalent(p, &composed, &whole);
            assert!(!composed.minimizing_pays(), "{p}");
        }
        let key = parse_utf8(count).unwrap().to_string();
        let memo = MEMO.lock().unwrap_or_else(|e| e.into_inner());
        let (_, remembered) = memo.as_ref().unwrap().map.get(&key).expect("remembered");
        assert!(remembered.as_ref().is_some_and(|d| !d.minimizing_pays()));
    }

    /// Two trees printed alike are remembered apart: each part keeps its
    /// own language (`x(?:[ab]+)?` takes "x", `x[ab]+?` does not).
    #[test]
    fn parts_printed_alike_are_not_confused() {
        let optional = parse_utf8("x(?:[ab]+)?").unwrap();
        let lazy = parse_utf8("x[ab]+?").unwrap();
        assert_ne!(optional, lazy);
        for _ in 0..2 {
            for (hir, takes_x) in [(&optional, true), (&lazy, false)] {
                let d = part_dfa(hir).unwrap().unwrap();
                assert_eq!(d.is_accepting(d.step_bytes(d.start(), b"x")), takes_x);
                assert!(d.is_accepting(d.step_bytes(d.start(), b"xab")));
            }
        }
    }

    /// Alternations that search between loops, after a loop, are unions
    /// of their alternatives' automata (`Op::Or`), equal to the whole
    /// pattern's.
    #[test]
    fn search_alternations_equal_their_regex() {
        let patterns = [
            "\"[A-Z_ ]*NEW[A-Z_ ]*\"|\"[A-Z_ ]*ON_NEW[A-Z_ ]*\"|\"[A-Z_ ]*EW_O[A-Z_ ]*\"",
            "x.*(?:a.*b|b.*a|ab*c)",
            "x.*(a.*b|b.*a)y",
            "x(?:[ab]*aa[ab]*c|[ab]*bb[ab]+c)y",
            "\"[^\"]*\u{e9}[^\"]*\"|\"[^\"]*\u{fc}[^\"]*\"",
        ];
        for p in patterns {
            let composed = composed_from_hir(p).unwrap().expect(p);
            let whole = ByteDfa::build(p, MatchKind::All).unwrap();
            assert_equivalent(p, &composed, &whole);
        }
        same_language(
            &composed_from_hir(patterns[1]).unwrap().unwrap(),
            &ByteDfa::build(patterns[1], MatchKind::All).unwrap(),
            b"abcx",
            7,
        );
        // Not after a loop: determinized whole.
        assert!(composed_from_hir("(?:a.*b|b.*a)").unwrap().is_none());
    }
}
