//! Tests of `ByteDfa`'s constructions against full-match and prefix
//! oracles, and helpers other modules' tests share.

use super::*;

fn full_match(d: &ByteDfa, text: &[u8]) -> bool {
    let s = d.step_bytes(d.start(), text);
    s != DEAD && d.is_accepting(s)
}

fn live_prefix(d: &ByteDfa, text: &[u8]) -> bool {
    d.step_bytes(d.start(), text) != DEAD
}

/// Every string over `alphabet` of at most `len` bytes.
pub(crate) fn all_strings(alphabet: &[u8], len: usize) -> Vec<Vec<u8>> {
    let mut out = vec![Vec::new()];
    let mut layer = vec![Vec::new()];
    for _ in 0..len {
        layer = layer
            .iter()
            .flat_map(|s: &Vec<u8>| alphabet.iter().map(move |&b| [s.as_slice(), &[b]].concat()))
            .collect();
        out.extend(layer.iter().cloned());
    }
    out
}

pub(crate) fn same_language(a: &ByteDfa, b: &ByteDfa, alphabet: &[u8], len: usize) {
    for text in all_strings(alphabet, len) {
        assert_eq!(full_match(a, &text), full_match(b, &text), "{text:?}");
        assert_eq!(live_prefix(a, &text), live_prefix(b, &text), "{text:?}");
    }
}

#[test]
fn minimized_keeps_the_language_with_fewer_states() {
    let d = ByteDfa::new("(?:ab|cb)(?:x|y)*|(?:ab|cb)z").unwrap();
    let m = d.minimized(1 << 20).unwrap();
    same_language(&m, &d, b"abcxyz", 5);
    assert!(
        m.num_states() < d.num_states(),
        "{} {}",
        m.num_states(),
        d.num_states()
    );
    assert!(d.minimized(1).is_none());
}

#[test]
fn nonempty_patterns_read_off_the_syntax_tree() {
    for p in ["a", "(?:\\S+\\s+){0,2}\\S+", ".*x.*", "\u{e9}?b"] {
        assert!(matches_only_nonempty(p), "{p}");
    }
    for p in [
        "a*",
        "(?:)|(?:x)",
        "^$|a",
        "(?:ab)?",
        "(",
        "[^\\x00-\\x{10FFFF}]",
    ] {
        assert!(!matches_only_nonempty(p), "{p}");
    }
}

/// The states reachable from the start, the dead one included.
fn reachable_states(d: &ByteDfa) -> usize {
    let mut seen = std::collections::HashSet::from([DEAD, d.start()]);
    let mut todo = vec![d.start()];
    while let Some(q) = todo.pop() {
        for b in 0..=255u8 {
            let t = d.step(q, b);
            if seen.insert(t) {
                todo.push(t);
            }
        }
    }
    seen.len()
}

/// What `minimizing_pays` tells: a one-word literal is minimal, a trie
/// of words is not known to be, and a join of minimal parts needs no
/// minimizing (a quoted word count: it would drop two unreachable rows).
#[test]
fn minimality_known_from_the_construction() {
    for w in [&b"\""[..], b"abc", b"aaa", b"abab"] {
        let d = ByteDfa::literals(&[w]).unwrap();
        assert!(!d.minimizing_pays());
        assert_eq!(d.minimized(1 << 20).unwrap().num_states(), d.num_states());
    }
    let trie = ByteDfa::literals(&[b"ab", b"cb"]).unwrap();
    assert!(trie.minimizing_pays());
    assert!(trie.minimized(1 << 20).unwrap().num_states() < trie.num_states());
    let count = "(?:[a-z\u{e9}]+ +){0,30}[a-z\u{e9}]+";
    let words = ByteDfa::new(count).unwrap();
    assert!(!words.minimizing_pays(), "composed and minimized");
    let quote = ByteDfa::literals(&[b"\""]).unwrap();
    let quoted = ByteDfa::concat_all(&[&quote, &words, &quote])
        .unwrap()
        .unwrap();
    assert!(!quoted.minimizing_pays());
    let m = quoted.minimized(1 << 20).unwrap();
    // The words' and the closing quote's start rows, entered only
    // through the join, are the only states minimizing drops.
    assert_eq!(m.num_states(), quoted.num_states() - 2);
    assert_eq!(m.num_states(), reachable_states(&quoted));
    same_language(&m, &quoted, "\"a \u{e9}".as_bytes(), 6);
    // A part not known minimal leaves the join unknown.
    let raw = ByteDfa::build("(?:ab|cb)(?:x|y)*", MatchKind::All).unwrap();
    assert!(raw.minimizing_pays());
    let joined = ByteDfa::concat_all(&[&quote, &raw, &quote])
        .unwrap()
        .unwrap();
    assert!(joined.minimizing_pays());
    // Copies of a minimal part, joined without overlap: as nearly.
    let char_dfa = ByteDfa::new("[a-c\u{e9}]|\\\\u[0-9a-f]{4}").unwrap();
    let char_dfa = char_dfa.minimized(1 << 20).unwrap();
    for (min, max) in [(0, 40), (3, 40), (2, 2)] {
        let count = ByteDfa::repeat_sharing(&char_dfa, min, Some(max), usize::MAX)
            .unwrap()
            .unwrap();
        assert!(!count.minimizing_pays());
        let m = count.minimized(1 << 20).unwrap();
        // Each copy keeps its part's start row, which only the join
        // enters: unreachable. No reachable state merges.
        assert_eq!(m.num_states(), reachable_states(&count));
    }
    let raw_count = ByteDfa::repeat_sharing(&raw, 0, Some(20), usize::MAX)
        .unwrap()
        .unwrap();
    assert!(raw_count.minimizing_pays());
    // The empty string added to a minimal DFA: nearly minimal.
    let optional = words.clone().or_empty().unwrap();
    assert!(!optional.minimizing_pays());
}

/// A join enters a part that loops back to its start at that start, not
/// at a state of its own beside it: after the opening quote and after a
/// character, a quoted string's scan is in one state (the fill memo and the
/// lexer caches key on it). The language is the regex's.
#[test]
fn a_join_enters_a_looping_part_at_its_start() {
    let quote = ByteDfa::literals(&[b"\""]).unwrap();
    let open = ByteDfa::literals(&[b"<<"]).unwrap();
    // Minimal, as the lexers' parts are (`cfg::nodedfa`): the start is
    // where the loop returns.
    let minimal = |re: &str| ByteDfa::new(re).unwrap().minimized(1 << 20).unwrap();
    let chars = minimal("(?:[a-c\u{e9}]|\\\\[nu])*");
    assert_eq!(chars.step(chars.start(), b'a'), chars.start());
    let digits = minimal("[0-9]+");
    // (parts, the same language as a regex, a head, texts the loop reads)
    type Case<'a> = (&'a [&'a ByteDfa], &'a str, &'a [u8], &'a [&'a str]);
    let cases: [Case; 3] = [
        (
            &[&quote, &chars, &quote],
            "\"(?:[a-c\u{e9}]|\\\\[nu])*\"",
            b"\"",
            &["a", "\u{e9}", "\\n"],
        ),
        (
            &[&open, &chars, &quote],
            "<<(?:[a-c\u{e9}]|\\\\[nu])*\"",
            b"<<",
            &["b", "\\u"],
        ),
        // A part that must read a byte first: after "<<" its start is not
        // the state after a digit.
        (&[&open, &digits, &quote], "<<[0-9]+\"", b"<<", &[]),
    ];
    for (parts, regex, head, loops) in cases {
        let joined = ByteDfa::concat_all(parts).unwrap().unwrap();
        let plain = ByteDfa::new(regex).unwrap();
        same_language(&joined, &plain, b"<\"ab\\nu\xc3\xa91", 5);
        let at = |text: &[u8]| joined.step_bytes(joined.start(), text);
        let entered = at(head);
        assert_ne!(entered, DEAD, "{regex}");
        for one in loops {
            let text = [head, one.as_bytes()].concat();
            assert_eq!(at(&text), entered, "{regex} after {one:?}");
        }
        if loops.is_empty() {
            assert_ne!(at(&[head, b"1"].concat()), entered, "{regex}");
        }
    }
}

/// Patterns with large counts are joined from their parts; each must
/// have exactly the language of its determinized regex (both
/// differences empty), including those that fall back to it.
/// Both differences of `a` and `b` (built for `p`) are empty.
pub(crate) fn assert_equivalent(p: &str, a: &ByteDfa, b: &ByteDfa) {
    for (x, y) in [(a, b), (b, a)] {
        match ByteDfa::product(x, y, Op::AndNot) {
            Err(Error::Compile(_)) => {}
            other => panic!(
                "{p}: languages differ ({:?})",
                other.map(|d| d.num_states())
            ),
        }
    }
}

#[test]
fn literal_tries_equal_their_alternations() {
    let words: [&[u8]; 5] = [b"ab", b"abc", b"", b"b\xff", b"ba"];
    let t = ByteDfa::literals(&words).unwrap();
    same_language(&t, &ByteDfa::new("ab|abc||b\\xff|ba").unwrap(), b"abc", 4);
    assert!(full_match(&t, b"b\xff") && !full_match(&t, b"b"));
    assert!(ByteDfa::literals(&[]).is_none());
    let all: Vec<u8> = (0..=255).collect();
    let t = ByteDfa::literals(&[&all]).unwrap();
    assert!(full_match(&t, &all) && !full_match(&t, &all[1..]));
}

#[test]
fn composed_concat_and_repeat_equal_their_regexes() {
    let d = |p: &str| ByteDfa::new(p).unwrap();
    for (a, b) in [
        ("ab|a", "c+"),
        ("x*", "y?"),
        ("\\\"|[a-c]", "\""),
        ("", "ab"),
    ] {
        let c = ByteDfa::concat(&d(a), &d(b)).unwrap().unwrap();
        same_language(&c, &d(&format!("(?:{a})(?:{b})")), b"abcxy\\\"", 6);
    }
    // Not deterministic (a's accepted strings extend into b's first
    // byte): determinized over the parts.
    let c = ByteDfa::concat(&d("a+"), &d("ab")).unwrap().unwrap();
    same_language(&c, &d("a+ab"), b"ab", 8);
    // Several parts, some matching the empty string.
    let parts = ["a|ad", "c?", "x*", "y|", "b"];
    let dfas: Vec<ByteDfa> = parts.iter().map(|p| d(p)).collect();
    let refs: Vec<&ByteDfa> = dfas.iter().collect();
    let c = ByteDfa::concat_all(&refs).unwrap().unwrap();
    let whole: String = parts.iter().map(|p| format!("(?:{p})")).collect();
    same_language(&c, &d(&whole), b"abcdxy", 7);
    // "c*" then "c": not deterministic through the nullable "x?".
    for parts in [&["c*", "x?", "c"][..], &["(?:ab|a)*", "b?", "(?:ba)+"]] {
        let dfas: Vec<ByteDfa> = parts.iter().map(|p| d(p)).collect();
        let refs: Vec<&ByteDfa> = dfas.iter().collect();
        let c = ByteDfa::concat_all(&refs).unwrap().unwrap();
        let whole: String = parts.iter().map(|p| format!("(?:{p})")).collect();
        same_language(&c, &d(&whole), b"abcx", 8);
    }
    let ch = "[ab]|\\\\[nu]";
    for (min, max) in [
        (0, Some(0)),
        (0, Some(3)),
        (2, Some(4)),
        (3, None),
        (0, None),
        (1, Some(1)),
    ] {
        let r = ByteDfa::repeat(&d(ch), min, max).unwrap().unwrap();
        let count = match max {
            Some(m) => format!("{{{min},{m}}}"),
            None => format!("{{{min},}}"),
        };
        same_language(&r, &d(&format!("(?:{ch}){count}")), b"ab\\nu", 7);
    }
    let r = ByteDfa::repeat(&d("a|ab"), 1, Some(3)).unwrap().unwrap();
    same_language(&r, &d("(?:a|ab){1,3}"), b"ab", 8);
    // Copies that overlap: determinized over (copy, state) pairs.
    for (y, count) in [("a|aa", "{0,3}"), ("a+ *", "{2,5}"), ("ab|a", "{1,}")] {
        let (min, max) = match count {
            "{0,3}" => (0, Some(3)),
            "{2,5}" => (2, Some(5)),
            _ => (1, None),
        };
        let r = ByteDfa::repeat(&d(y), min, max).unwrap().unwrap();
        same_language(&r, &d(&format!("(?:{y}){count}")), b"ab \\", 8);
    }
    assert!(ByteDfa::repeat(&d("a?"), 0, Some(3)).unwrap().is_none());
}

#[test]
fn distinguishing_length_of_counter_states() {
    // After 1 and 2 letters of [a-z]{0,6}x: 5 and 4 more letters allowed.
    let d = ByteDfa::new("[a-z]{0,6}x").unwrap();
    let s1 = d.step_bytes(d.start(), b"a");
    let s2 = d.step_bytes(d.start(), b"ab");
    // "aaaaa" is live from s1, dead from s2 (5 bytes); "aaaax" accepts from
    // both, so no 4-byte string differs.
    assert_eq!(d.distinguishing_length(s1, s2, 10, 1000), 5);
    assert_eq!(d.distinguishing_length(s1, s2, 10, 1), 0);
    assert_eq!(d.distinguishing_length(s1, s2, 4, 1000), 5);
    assert_eq!(d.distinguishing_length(s1, s1, 3, 1000), 4);
    let d = ByteDfa::new("ab|ac").unwrap();
    let (b, c) = (d.step(d.start(), b'a'), d.start());
    assert_eq!(d.distinguishing_length(b, c, 8, 1000), 1);
}

#[test]
fn full_match_keeps_all_alternatives() {
    let d = ByteDfa::new("a|ab").unwrap();
    assert!(full_match(&d, b"a"));
    assert!(full_match(&d, b"ab"));
    assert!(!full_match(&d, b""));
    assert!(!live_prefix(&d, b"abc"));
}

#[test]
fn partial_utf8_is_live_only_if_completable() {
    let d = ByteDfa::new("é+").unwrap(); // é = C3 A9
    assert!(live_prefix(&d, &[0xC3]));
    assert!(!live_prefix(&d, &[0xC4]));
    assert!(!full_match(&d, &[0xC3]));
    assert!(full_match(&d, "éé".as_bytes()));
}

#[test]
fn states_that_cannot_match_are_dead() {
    // `[b&&c]` is empty, so the `ab` branch can never complete.
    let d = ByteDfa::new("a[b&&c]|ad").unwrap();
    assert!(!live_prefix(&d, b"ab"));
}

#[test]
fn forced_bytes_follow_single_continuations() {
    let d = ByteDfa::new("abc|abd").unwrap();
    let s = d.start();
    assert_eq!(d.forced_byte(s), Some(b'a'));
    let s = d.step(s, b'a');
    assert_eq!(d.forced_byte(s), Some(b'b'));
    let s = d.step(s, b'b');
    assert_eq!(d.forced_byte(s), None);
}

#[test]
fn products_keep_exactly_the_strings_of_their_operation() {
    // Every string over {a, b, c} up to length 7 against both operands.
    let pairs = [
        ("(ab|c)*", "[abc]*c[abc]"),
        ("a*b*c?", "(aa)*b*"),
        ("é?[ab]+", "a+"),
    ];
    let mut texts: Vec<Vec<u8>> = vec![Vec::new()];
    for len in 1..=7 {
        let prev: Vec<Vec<u8>> = texts
            .iter()
            .filter(|t| t.len() == len - 1)
            .cloned()
            .collect();
        for t in prev {
            for c in [b'a', b'b', b'c'] {
                texts.push([t.as_slice(), &[c]].concat());
            }
        }
    }
    for (pa, pb) in pairs {
        let (a, b) = (ByteDfa::new(pa).unwrap(), ByteDfa::new(pb).unwrap());
        for op in [Op::And, Op::AndNot] {
            let p = ByteDfa::product(&a, &b, op).unwrap();
            let keep = |t: &[u8]| full_match(&a, t) && (full_match(&b, t) == (op == Op::And));
            for t in &texts {
                assert_eq!(full_match(&p, t), keep(t), "{pa} {op:?} {pb} on {t:?}");
                // Live exactly when some continuation (up to 7 bytes here) is kept.
                if t.len() <= 3 {
                    let completes = texts.iter().any(|s| keep(&[t.as_slice(), s].concat()));
                    assert_eq!(live_prefix(&p, t), completes, "{pa} {op:?} {pb}: {t:?}");
                }
            }
        }
    }
    let e = ByteDfa::product(
        &ByteDfa::new("a+").unwrap(),
        &ByteDfa::new("a*").unwrap(),
        Op::AndNot,
    )
    .unwrap_err();
    assert!(e.to_string().contains("matches no string"), "{e}");
}

#[test]
fn errors_are_clear() {
    let e = ByteDfa::new("a(").unwrap_err().to_string();
    assert!(e.contains("invalid regex"), "{e}");
    assert!(ByteDfa::new("[^\\x00-\\x{10FFFF}]").is_err());
    let e = ByteDfa::new("[ab]*a[ab]{24}").map(|_| ()).unwrap_err();
    assert!(e.to_string().contains("larger than 64 MiB"), "{e}");
    assert!(matches!(e, Error::LimitExceeded(_) | Error::Compile(_)));
}

#[test]
fn residual_signatures_name_the_language_left() {
    let sig = |pattern: &str, read: &str| {
        let d = ByteDfa::new(pattern).unwrap();
        let q = d.step_bytes(d.start(), read.as_bytes());
        d.residual_signature(q, 1 << 20).unwrap()
    };
    // Same language left, from different automata and states.
    assert_eq!(sig("x[0-9]+", "x"), sig("[0-9]+", ""));
    assert_eq!(sig("a(b|c)*d", "ab"), sig("[bc]*d", ""));
    assert_eq!(sig("\"[^\"]*\":", "\"key"), sig("[^\"]*\":", ""));
    // Languages that differ only in accepting the empty string, or in
    // one byte, or in length, do not share.
    assert_ne!(sig("[0-9]+", ""), sig("[0-9]*", ""));
    assert_ne!(sig("[0-9]+", ""), sig("[0-8]+", ""));
    assert_ne!(sig("[a-z]{0,3}", ""), sig("[a-z]{0,4}", ""));
    assert_ne!(sig("ab", ""), sig("ac", ""));
    assert_ne!(sig("a[bc]", ""), sig("a[bc]?", ""));
    let d = ByteDfa::new("[a-z]{0,300}").unwrap();
    assert!(d.residual_signature(d.start(), 100).is_none());
    // A long count shares one block of rows: far from its last copy a
    // state is refused unnumbered, near it the signature is the short
    // count's.
    let long = ByteDfa::new("[a-z]{0,5000}").unwrap();
    assert!(long.periodic().is_some());
    assert!(long.residual_signature(long.start(), 1 << 10).is_none());
    let near_end = long.step_bytes(long.start(), &[b'q'; 4990]);
    assert_eq!(
        long.residual_signature(near_end, 1 << 10),
        Some(sig("[a-z]{0,10}", ""))
    );
}

/// The signature as its definition reads: every one of a state's 256
/// bytes stepped, targets numbered as first met.
fn signature_byte_by_byte(d: &ByteDfa, q: u32) -> Vec<u32> {
    let mut ids: HashMap<u32, u32> = HashMap::from_iter([(DEAD, 0), (q, 1)]);
    let (mut order, mut out, mut i) = (vec![q], Vec::new(), 0);
    while i < order.len() {
        let s = order[i];
        i += 1;
        out.push(d.is_accepting(s) as u32);
        let runs_at = out.len();
        out.push(0);
        let mut prev = u32::MAX;
        for b in 0..=255u8 {
            let t = d.step(s, b);
            let id = *ids.entry(t).or_insert_with(|| {
                order.push(t);
                order.len() as u32
            });
            if id != prev {
                out.extend([b as u32, id]);
                out[runs_at] += 1;
                prev = id;
            }
        }
    }
    out
}

#[test]
fn residual_signatures_read_by_class_runs_equal_byte_by_byte_ones() {
    let patterns = [
        "\"(?:[^\"\\\\]|\\\\.){0,12}\"",
        "[a-z]{2,5}(?:,[0-9]+)*",
        "(?s:.*(?:<function=|</f>))",
        "-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?(?:[eE][+-]?[0-9]+)?",
        "[\\x00-\\x{10FFFF}]{1,3}",
    ];
    for p in patterns {
        let d = ByteDfa::new(p).unwrap();
        for q in 0..d.num_states() as u32 {
            if q == DEAD {
                continue;
            }
            let fast = d.residual_signature(q, 1 << 20).unwrap();
            assert_eq!(fast, signature_byte_by_byte(&d, q), "{p} from state {q}");
        }
    }
    // A table too large to number its states in a list numbers them in a
    // map (`Numbering`): the same signatures.
    let large = ByteDfa::new("[ab]*a[ab]{13}").unwrap();
    assert!(large.is_table() && large.num_states() > 1 << 13);
    let mut q = large.start();
    for b in b"abbab" {
        q = large.step(q, *b);
        let fast = large.residual_signature(q, 1 << 20).unwrap();
        assert_eq!(fast, signature_byte_by_byte(&large, q), "after {b}");
    }
}

#[test]
fn mask_classes_merge_states_that_tokens_cannot_tell_apart() {
    // After k < 20 letters, the states differ only in how many more may
    // come; with tokens of at most 3 bytes, states with >= 3 left agree.
    let d = ByteDfa::new("[a-z]{1,20}").unwrap();
    let classes = d.mask_classes(3, usize::MAX).unwrap();
    let mut s = d.start();
    let mut seen = Vec::new();
    for _ in 0..20 {
        s = d.step(s, b'a');
        seen.push(classes[s as usize]);
    }
    let distinct: std::collections::HashSet<_> = seen.iter().collect();
    assert!(distinct.len() <= 5, "{seen:?}");
    assert_ne!(seen[0], seen[19]); // the last state accepts but allows nothing more
    assert!(d.mask_classes(3, 10).is_none());
}

#[test]
fn first_match_follows_backtracking_preferences() {
    let lazy = ByteDfa::first_match("x[a-z]*?y").unwrap();
    assert!(full_match(&lazy, b"xay"));
    assert!(!live_prefix(&lazy, b"xayx"));
    assert!(full_match(&ByteDfa::new("x[a-z]*?y").unwrap(), b"xayxby"));
    let alt = ByteDfa::first_match("ab|abcd").unwrap();
    assert!(full_match(&alt, b"ab") && !live_prefix(&alt, b"abc"));
    let greedy = ByteDfa::first_match("[a-z]+").unwrap();
    assert!(full_match(&greedy, b"abc"));
}

/// regex-automata's dense DFA of `pattern` (match kind `kind`, built
/// whole by its own determinizer), as a full-match test of a text.
fn dense_full_match(pattern: &str, kind: MatchKind) -> impl Fn(&[u8]) -> bool {
    use regex_automata::dfa::{dense, Automaton, StartKind};
    use regex_automata::util::start;
    use regex_automata::Anchored;
    let dfa = dense::Builder::new()
        .configure(
            dense::Config::new()
                .match_kind(kind)
                .start_kind(StartKind::Anchored),
        )
        .build(pattern)
        .unwrap();
    let start = dfa
        .start_state(&start::Config::new().anchored(Anchored::Yes))
        .unwrap();
    move |text: &[u8]| {
        let s = text.iter().fold(start, |s, &b| dfa.next_state(s, b));
        dfa.is_match_state(dfa.next_eoi_state(s))
    }
}

#[test]
fn lazy_determinization_agrees_with_the_dense_builder() {
    // Against the dense DFA regex-automata builds whole (its own
    // determinizer run to the end, then its match-state shuffle), with
    // full-match semantics (`ByteDfa::new`, parsed to a syntax tree
    // first, and `build`) and first-match semantics: every text over the
    // pattern's bytes and a few others (case, digits, a continuation
    // byte) as long as 20,000 texts allow, then 20,000 random texts of
    // up to 12 bytes. The first pattern's DFA at {0,15} took minutes in
    // the dense builder's match-state shuffle.
    for p in [
        "(?:-?(?:[4-9]|[1-9][\\--9]{0,3}))*",
        "(?:)|a+|é*b",
        "[^\"\\\\]*\"",
        "(?i)ab|[α-γ]{1,2}",
        "^ab(?:c|d)*$",
        "x?(?-u:\\b)y*",
        "ab|abcd",
        "x[a-c]*?y",
        // Composed from parts (an alternation and a loop): the part's
        // printed form lost the group around a repetition of a
        // repetition (found by fuzzing).
        "(?:.(?:(?:(?:a|b))+)?)?",
        "(?:x(?:(?:a|b)+)?)?y*",
    ] {
        let mut alphabet: Vec<u8> = p.bytes().collect();
        alphabet.extend_from_slice(b"zAB56\xb2");
        alphabet.sort_unstable();
        alphabet.dedup();
        let mut texts: Vec<Vec<u8>> = Vec::new();
        let mut level: Vec<Vec<u8>> = vec![Vec::new()];
        while texts.len() + level.len() <= 20_000 {
            texts.extend(level.iter().cloned());
            level = level
                .iter()
                .flat_map(|t| alphabet.iter().map(move |&b| [&t[..], &[b]].concat()))
                .collect();
        }
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut random = |n: usize| {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (seed >> 33) as usize % n
        };
        for _ in 0..20_000 {
            let len = random(13);
            texts.push((0..len).map(|_| alphabet[random(alphabet.len())]).collect());
        }
        for (kind, ours) in [
            (MatchKind::All, ByteDfa::new(p).unwrap()),
            (MatchKind::All, ByteDfa::build(p, MatchKind::All).unwrap()),
            (MatchKind::LeftmostFirst, ByteDfa::first_match(p).unwrap()),
        ] {
            let theirs = dense_full_match(p, kind);
            for t in &texts {
                assert_eq!(full_match(&ours, t), theirs(t), "{p:?} ({kind:?}) on {t:?}");
            }
        }
    }
}

#[test]
fn simplified_patterns_agree_with_the_dense_builder() {
    // Repetitions of repetitions are collapsed before determinizing
    // (`simplify`): the same texts, and in first-match builds the same
    // preferred ends, also where the body's length varies. Every text
    // over `abc` up to 9 bytes, against regex-automata's dense DFA of
    // the pattern as written.
    let mut texts: Vec<Vec<u8>> = vec![Vec::new()];
    let mut level: Vec<Vec<u8>> = vec![Vec::new()];
    for _ in 0..9 {
        level = level
            .iter()
            .flat_map(|t| b"abc".iter().map(move |&b| [&t[..], &[b]].concat()))
            .collect();
        texts.extend(level.iter().cloned());
    }
    for p in [
        "(?:(?:a|ab)*)*b",
        "(?:(?:a|ab)+)+c?",
        "(?:((?:ab?|b)?))*a",
        "(?:(?:a|abc)+){2,3}b?",
        "(?:(?:a|ba)?){3}c|b",
        "(?:(?:a|ab){0,1}){2,4}c",
        "a(?:(?:(?:a|b)*)*)*?c",
        "(?:(?:a|ab)*?)*b?",
        "(?:(?:a+)?)+",
        "(?:a(?:(?:b)*)+)+c*",
        "(?:(?:(?:a|bc)+){2})*",
        "(?:(?:a|abc)+)?b?",
        "(?:(?:a|abc)?)+b?",
        "(?:(?:a|abc)*)+c",
        "(?:(?:a|abc)+)*bc?",
        "(?:(?:b|abc|a)?)?c",
        "(?:(?:b|abc|ab)?)*c",
        "(?:(?:a|abc)*)?c",
        "(?:(?:a|abc)+){0,1}b?",
        // Groups dropped, one empty branch kept.
        "((a|)|)|b",
        "(?:a|||b|)c",
        "(a(?:|b||)|)*c",
        "(?:(b)|(a|)|(ab)|)+c?",
    ] {
        for (kind, ours) in [
            (MatchKind::All, ByteDfa::new(p).unwrap()),
            (MatchKind::LeftmostFirst, ByteDfa::first_match(p).unwrap()),
        ] {
            let theirs = dense_full_match(p, kind);
            for t in &texts {
                assert_eq!(full_match(&ours, t), theirs(t), "{p:?} ({kind:?}) on {t:?}");
            }
        }
    }
}

#[test]
fn the_budget_stops_an_exponential_determinization_part_way() {
    // The exponential class: past the budget part way, with its error.
    let err =
        crate::budget::with_budget(10_000_000, || ByteDfa::new("[ab]*a[ab]{30}")).unwrap_err();
    assert!(err.to_string().contains("steps of work"), "{err}");
}

#[test]
fn anchors_work_in_full_match() {
    let d = ByteDfa::new("^ab$").unwrap();
    assert!(full_match(&d, b"ab"));
    assert!(!full_match(&d, b"abab"));
}
