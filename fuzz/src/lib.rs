//! Shared pieces of maskpar's fuzz targets: a small vocabulary, the filter
//! that keeps the fuzzer off the hangs already filed (so a short run finds new
//! bugs instead of the known ones), a mask-guided walk that checks each mask
//! against `consume_token`, and an independent regex reference.
//!
//! Every target panics on a finding: a panic inside maskpar, a mask that
//! disagrees with `consume_token`, or (for `regex_matcher`) a mask, an
//! acceptance or a count that disagrees with the reference.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use maskpar::grammar::CompiledGrammar;
use maskpar::matcher::MatcherCore;
use maskpar::vocab::Vocab;
use regex_automata::dfa::{dense, Automaton};
use regex_automata::util::primitives::StateID;
use regex_automata::{Anchored, Input};

/// Inputs longer than this are skipped: every target's work must stay small
/// per input (pass `-max_len` too so libFuzzer does not build them).
pub const MAX_INPUT: usize = 1024;

/// The vocabulary: every single byte, a few multi-byte pieces (tokens that
/// straddle characters and lexemes), an empty token, then EOS.
pub fn vocab() -> Arc<Vocab> {
    static VOCAB: OnceLock<Arc<Vocab>> = OnceLock::new();
    VOCAB
        .get_or_init(|| {
            let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
            for piece in PIECES {
                tokens.push(piece.to_vec());
            }
            tokens.push(Vec::new());
            tokens.push(b"<eos>".to_vec());
            let eos = tokens.len() as u32 - 1;
            Arc::new(Vocab::new(tokens, &[eos], &[], None).expect("fuzz vocabulary"))
        })
        .clone()
}

const PIECES: &[&[u8]] = &[
    b"ab",
    b"aaa",
    b"ba",
    b"\xc3\xa9",
    b"\xc3",
    b"\xa9a",
    b"{\"",
    b"\":",
    b"12",
    b"true",
    b" a",
];

pub fn eos() -> u32 {
    vocab().eos_token_ids()[0]
}

pub fn words(vocab: &Vocab) -> usize {
    vocab.vocab_size().div_ceil(32)
}

pub fn bit(row: &[u32], id: u32) -> bool {
    row[id as usize / 32] >> (id % 32) & 1 == 1
}

/// The fuzzer's input as (choice bytes, text): the first four bytes steer
/// the walk, the rest is the pattern, grammar or schema. None for inputs the
/// text targets skip: longer than `MAX_INPUT`, not UTF-8, or `known_hang`.
pub fn split_input(data: &[u8]) -> Option<(&[u8], &str)> {
    if data.len() > MAX_INPUT {
        return None;
    }
    let (choices, text) = data.split_at(data.len().min(4));
    let text = std::str::from_utf8(text).ok()?;
    (!known_hang(text)).then_some((choices, text))
}

/// True if the input belongs to a hang that is already filed (issue 22:
/// nested counted repetitions, deep nesting) and the run asked to skip those.
/// `MASKPAR_FUZZ_ALL=1` turns the filter off, for checking the fixes.
pub fn known_hang(text: &str) -> bool {
    static ALL: OnceLock<bool> = OnceLock::new();
    if *ALL.get_or_init(|| std::env::var_os("MASKPAR_FUZZ_ALL").is_some()) {
        return false;
    }
    // Counted repetitions: every number is a potential count; their product
    // bounds the expansion of nested ones.
    let mut product: u64 = 1;
    let mut digits = String::new();
    for c in text.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_digit() {
            digits.push(c);
        } else if !digits.is_empty() {
            let n: u64 = digits.parse().unwrap_or(u64::MAX);
            if n > 64 {
                return true;
            }
            product = product.saturating_mul(n.max(1));
            digits.clear();
        }
    }
    if product > 4096 {
        return true;
    }
    // Nesting depth (the front ends' recursion).
    let mut depth = 0i64;
    let mut max_depth = 0i64;
    for c in text.chars() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            _ => {}
        }
        max_depth = max_depth.max(depth);
    }
    max_depth > 64
}

/// Walks up to `steps` tokens chosen by `choices` among the allowed ones,
/// checking at each step that the mask agrees with `consume_token` on every
/// id, and that rollback and fork give back the same masks.
pub fn checked_walk(grammar: Arc<CompiledGrammar>, choices: &[u8], steps: usize) {
    let vocab = grammar.vocab().clone();
    let mut m = MatcherCore::new(grammar);
    let mut row = vec![0u32; words(&vocab)];
    let mut masks: Vec<Vec<u32>> = Vec::new();
    for step in 0..steps {
        if m.fill_row(&mut row).is_err() {
            return; // a bound reached: a clean error
        }
        let mut allowed = Vec::new();
        for id in 0..vocab.vocab_size() as u32 {
            let mut probe = m.clone();
            let Ok(took) = probe.consume_token(id) else {
                return;
            };
            assert_eq!(
                took,
                bit(&row, id),
                "step {step}: mask says {} for token {id} ({:?}), consume_token says {took}",
                bit(&row, id),
                vocab.token_bytes(id).map(String::from_utf8_lossy)
            );
            if took {
                allowed.push(id);
            }
        }
        masks.push(row.clone());
        let Some(&pick) = choices.get(step) else {
            break;
        };
        if allowed.is_empty() || m.is_terminated() {
            break;
        }
        let t = allowed[pick as usize % allowed.len()];
        assert!(m.consume_token(t).unwrap_or(true));
    }
    // Rolling back to each earlier point gives back the mask seen there.
    let n = m.num_consumed();
    for back in 1..=n.min(masks.len().saturating_sub(1)) {
        let mut r = m.clone();
        r.rollback(back).expect("rollback within history");
        if r.fill_row(&mut row).is_ok() {
            assert_eq!(row, masks[n - back], "mask after rollback({back}) differs");
        }
    }
}

/// The reference for regex grammars: regex-automata's dense DFA of the
/// pattern anchored at both ends (no code shared with maskpar's automata or
/// masks), stepped over the text so far plus each token.
pub struct RegexReference {
    dfa: dense::DFA<Vec<u32>>,
    start: StateID,
    live: HashMap<StateID, bool>,
}

impl RegexReference {
    pub fn new(pattern: &str) -> Option<Self> {
        let dfa = dense::Builder::new()
            .configure(
                dense::Config::new()
                    .dfa_size_limit(Some(8 << 20))
                    .determinize_size_limit(Some(8 << 20)),
            )
            .build(&format!(r"\A(?:{pattern})\z"))
            .ok()?;
        let start = dfa
            .start_state_forward(&Input::new(&[][..]).anchored(Anchored::Yes))
            .ok()?;
        Some(RegexReference {
            dfa,
            start,
            live: HashMap::new(),
        })
    }

    fn run(&self, text: &[u8]) -> StateID {
        text.iter()
            .fold(self.start, |s, &b| self.dfa.next_state(s, b))
    }

    fn matches_at_end(&self, s: StateID) -> bool {
        self.dfa.is_match_state(self.dfa.next_eoi_state(s))
    }

    /// Whether the whole text is in the language.
    pub fn accepts(&self, text: &[u8]) -> bool {
        self.matches_at_end(self.run(text))
    }

    /// Whether some continuation of the text is in the language.
    pub fn live(&mut self, text: &[u8]) -> bool {
        let s = self.run(text);
        if let Some(&v) = self.live.get(&s) {
            return v;
        }
        // Breadth-first over the states reachable from s (a set beside the
        // queue: a linear `contains` made large DFAs quadratic, and the
        // reference, not maskpar, timed out).
        let mut seen = vec![s];
        let mut visited = std::collections::HashSet::from([s]);
        let mut i = 0;
        let mut found = false;
        while i < seen.len() {
            let x = seen[i];
            i += 1;
            if self.dfa.is_dead_state(x) {
                continue;
            }
            if self.matches_at_end(x) {
                found = true;
                break;
            }
            for b in 0..=255u8 {
                let y = self.dfa.next_state(x, b);
                if visited.insert(y) {
                    seen.push(y);
                }
            }
        }
        self.live.insert(s, found);
        found
    }

    /// The mask after `text` (`terminated`: EOS consumed) over `vocab`.
    pub fn mask(&mut self, vocab: &Vocab, text: &[u8], terminated: bool) -> Vec<u32> {
        let mut row = vec![0u32; words(vocab)];
        let eos = vocab.eos_token_ids();
        for id in 0..vocab.vocab_size() as u32 {
            let ok = if eos.contains(&id) {
                terminated || self.accepts(text)
            } else if terminated {
                false
            } else {
                match vocab.token_bytes(id) {
                    Some(t) if !t.is_empty() => {
                        let mut s = text.to_vec();
                        s.extend_from_slice(t);
                        self.live(&s)
                    }
                    _ => false,
                }
            };
            if ok {
                row[id as usize / 32] |= 1 << (id % 32);
            }
        }
        row
    }
}

/// A small regex built from fuzz bytes: literals (one multi-byte), classes,
/// `.`, concatenation, alternation, `*`, `+`, `?` and small counts, at most
/// `depth` levels deep. Returns the pattern and the bytes used. Counts do not
/// nest (nested counted repetitions are a filed slow case; see known_hang).
pub fn gen_regex(data: &[u8], depth: usize) -> (String, usize) {
    gen_regex_in(data, depth, false)
}

fn gen_regex_in(data: &[u8], depth: usize, in_count: bool) -> (String, usize) {
    const ATOMS: &[&str] = &[
        "a", "b", "c", "é", "[ab]", "[^a]", ".", r"\d", "[a-cé]", "x", "ab", "",
    ];
    let Some(&b) = data.first() else {
        return ("a".into(), 0);
    };
    let mut used = 1;
    if depth == 0 || b % 10 < 4 {
        return (ATOMS[b as usize / 10 % ATOMS.len()].into(), used);
    }
    // A count inside a count becomes `?`.
    let child_in_count = in_count || b % 10 == 9;
    let sub = |used: &mut usize| {
        let rest = data.get(*used..).unwrap_or(&[]);
        let (s, n) = gen_regex_in(rest, depth - 1, child_in_count);
        *used += n;
        s
    };
    let s = match b % 10 {
        4 => {
            let (x, y) = (sub(&mut used), sub(&mut used));
            format!("{x}{y}")
        }
        5 => {
            let (x, y) = (sub(&mut used), sub(&mut used));
            format!("(?:{x}|{y})")
        }
        6 => format!("(?:{})*", sub(&mut used)),
        7 => format!("(?:{})+", sub(&mut used)),
        8 => format!("(?:{})?", sub(&mut used)),
        9 if in_count => format!("(?:{})?", sub(&mut used)),
        _ => {
            let x = sub(&mut used);
            let c = data.get(used).copied().unwrap_or(0);
            used += 1;
            let (lo, extra) = ((c % 3) as u32, (c / 3 % 3) as u32);
            format!("(?:{x}){{{lo},{}}}", lo + extra)
        }
    };
    (s, used)
}
