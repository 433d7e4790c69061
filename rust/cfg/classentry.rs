//! Lexer entries of a scan inside a run of one byte class, from the
//! vocabulary's class-run tables (`crate::classruns`) instead of a walk.
//!
//! A scan is in a run when, for its next `r` bytes, every byte of one class
//! leads to one next state where the walk goes on (no lexeme may end
//! there): `[0-9a-f]{8}` after two digits is a run of six, and
//! `[0-9a-f]{2,4}` after one digit a run of one. A walk from such a state
//! allows every token of at most `r` class bytes and stops nowhere among
//! them; below a node of `j` class bytes (`j` up to `r`) it goes on only on
//! the bytes outside the class that the `j`-th state reads (a closing quote
//! after `{2,4}`'s second digit, the dash after the eighth hex digit), and
//! after `r` class bytes the state must read no class byte at all. So the
//! entry is the class's tokens of at most `r` bytes (a shared row and a
//! short list) and walks below those exit nodes only: a few hundred nodes
//! where the walk stepped tens of thousands (a UUID pattern's eight
//! characters, 160-320 us each on Llama-3's vocabulary). Runs where a
//! lexeme may end inside the run, or that go on into the class after `r`
//! bytes, are left to the walk: every node of the class would be a stop
//! or a walk there.

use crate::classruns::ClassRun;
use crate::regex_dfa::{ByteSet, DEAD};
use crate::trie::{TokenTrie, Visit};
use crate::vocab::Vocab;

use super::lexcache::LexKey;
use super::lexentry::{boundary_nodes, LexEntry, TokenSet};
use super::lexwalk::OneScan;
use super::lowered::Cfg;

/// The entry of `key` at the root when it is one scan in a run of a class
/// with tables; None otherwise (a walk builds it).
pub(super) fn class_run_entry(
    cfg: &Cfg,
    vocab: &Vocab,
    words: usize,
    key: &LexKey,
    top: u32,
) -> Option<LexEntry> {
    let [(l, q)] = key[..] else { return None };
    if top != 0 {
        return None;
    }
    // Deciding needs no walk's stack: most states are no run's.
    let (run, first) = run_start(&OneScan::new(cfg, l, q, 0), vocab, q)?;
    let trie = vocab.trie();
    let mut scan = OneScan::new(cfg, l, q, trie.max_depth());
    // `states[j]`: the state after `j` class bytes, up to the run's end
    // `r` (past `depth`, no node tells the run from a longer one).
    let mut states = vec![q, first];
    while states.len() <= run.depth() {
        match run_step(&scan, run, states[states.len() - 1]) {
            Some(next) => states.push(next),
            None => break,
        }
    }
    let r = states.len() - 1;
    if r < run.depth() {
        // Below a node of `r` class bytes, every class byte must be dead.
        let end = states[r];
        let dead = |b: &u8| scan.dfa().step(end, *b) == DEAD;
        if scan.decide(end, DEAD) != Visit::Dead || !run.members().iter().all(dead) {
            return None;
        }
    }
    let (row, ids) = run.tokens_up_to(r);
    let mut more = ids.to_vec();
    let mut stops = Vec::new();
    // The exits at each place, the root's children on other bytes first.
    for (j, &at) in states.iter().enumerate().take(run.depth() + 1) {
        walk_exits(
            trie,
            &mut scan,
            run.exits_after(j),
            at,
            &mut more,
            &mut stops,
        );
    }
    stops.sort_unstable();
    let inner = match row {
        Some(row) => TokenSet::sliced(row, more, words),
        None => TokenSet::of_ids(more, words),
    };
    Some(LexEntry {
        inner,
        boundary: boundary_nodes(trie, 0, &stops),
    })
}

/// The class with tables whose bytes, and only they, take `q` to one
/// state where a walk goes on, and that state.
fn run_start<'v>(scan: &OneScan, vocab: &'v Vocab, q: u32) -> Option<(&'v ClassRun, u32)> {
    // The bytes per state they lead to (a run's state has few).
    let mut targets: Vec<(u32, ByteSet)> = Vec::new();
    for b in 0..=255u8 {
        let q2 = scan.dfa().step(q, b);
        if q2 == DEAD {
            continue;
        }
        match targets.iter().position(|(t, _)| *t == q2) {
            Some(i) => targets[i].1.insert(b),
            None if targets.len() < MAX_TARGETS => {
                let mut bytes = ByteSet::default();
                bytes.insert(b);
                targets.push((q2, bytes));
            }
            None => return None,
        }
    }
    targets.into_iter().find_map(|(q2, bytes)| {
        let run = vocab.class_runs().of(&bytes)?;
        (scan.decide(q, q2) == Visit::Live).then_some((run, q2))
    })
}

/// States a run's state leads to, at most (a JSON string's pattern state
/// leads to the next place, and to the string's end or an escape).
const MAX_TARGETS: usize = 8;

/// The state every byte of `run`'s class takes `q` to, where a walk goes
/// on from it; None where the run ends.
fn run_step(scan: &OneScan, run: &ClassRun, q: u32) -> Option<u32> {
    let (&first, rest) = run.members().split_first()?;
    let next = scan.dfa().step(q, first);
    let same = rest.iter().all(|&b| scan.dfa().step(q, b) == next);
    (next != DEAD && same && scan.decide(q, next) == Visit::Live).then_some(next)
}

/// The walk's part at the nodes `exits` (each a `(byte, node)` below a
/// node where the scan is in state `at`, sorted by byte): the tokens and
/// stops at each node and below it.
fn walk_exits(
    trie: &TokenTrie,
    scan: &mut OneScan,
    exits: &[(u8, u32)],
    at: u32,
    more: &mut Vec<u32>,
    stops: &mut Vec<u32>,
) {
    let mut i = 0;
    while i < exits.len() {
        let byte = exits[i].0;
        let same = exits[i..].iter().take_while(|e| e.0 == byte).count();
        let q2 = scan.dfa().step(at, byte);
        let visit = scan.decide(at, q2);
        for &(_, node) in &exits[i..i + same] {
            let node = node as usize;
            match visit {
                Visit::Dead => {}
                Visit::Stop => stops.push(node as u32),
                Visit::Live => {
                    more.extend_from_slice(trie.node_tokens(node));
                    scan.restart(q2);
                    trie.walk_visits(node, scan, |t| more.push(t), |n| stops.push(n as u32));
                }
            }
        }
        i += same;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfg::ast::GrammarAst;
    use crate::cfg::lexwalk::build;
    use crate::cfg::{gbnf, lark, lower::lower};
    use crate::schema;
    use crate::vocab::testing::random_vocab;

    /// Tokens of hex digits (up to 9 bytes), of letters and digits, and of
    /// those mixed with quotes, dashes, underscores and spaces: runs of
    /// several classes, with exits on every byte a pattern ends on.
    fn vocab() -> Vocab {
        let mut tokens: Vec<Vec<u8>> = Vec::new();
        let parts = [
            random_vocab(b"0123456789abcdef", 900, 9, 3),
            random_vocab(b"0189aAfFzZqQ", 700, 7, 5),
            random_vocab(b"0a9fZz-\"_ ;", 1500, 8, 7),
        ];
        for v in &parts {
            for id in 0..v.num_tokens() as u32 {
                let t = v.token_bytes(id).unwrap().to_vec();
                if !tokens.contains(&t) {
                    tokens.push(t);
                }
            }
        }
        Vocab::new(tokens, &[], &[], None).unwrap()
    }

    /// Every state of `ast`'s lexemes: where a class-run entry applies, it
    /// equals the whole trie's walk (the same bits, the same boundary).
    /// Returns how many applied, and how many of those walked exits that
    /// allowed something.
    fn check(ast: &GrammarAst, vocab: &Vocab) -> (usize, usize) {
        let cfg = lower(ast).unwrap();
        let (trie, words) = (vocab.trie(), vocab.vocab_size().div_ceil(32));
        let (mut applied, mut exited) = (0, 0);
        for (l, lexeme) in cfg.lexemes.iter().enumerate() {
            let Some(dfa) = lexeme.dfa.as_ref() else {
                continue;
            };
            let (mut seen, mut todo) = (vec![dfa.start()], vec![dfa.start()]);
            while let Some(q) = todo.pop() {
                let key = vec![(l as u32, q)];
                if let Some(entry) = class_run_entry(&cfg, vocab, words, &key, 0) {
                    let walk = build(&cfg, trie, words, &key, 0);
                    let (mut a, mut b) = (vec![0u32; words], vec![u32::MAX; words]);
                    entry.apply(&mut a, true);
                    walk.apply(&mut b, true);
                    assert_eq!(a, b, "lexeme {l} state {q}");
                    assert_eq!(entry.boundary, walk.boundary, "lexeme {l} state {q}");
                    applied += 1;
                    let mut c = vec![0u32; words];
                    let mut class_only = vec![0u32; words];
                    entry.apply(&mut c, true);
                    let run = class_run_at(&cfg, vocab, l as u32, q);
                    let (row, ids) = run.tokens_up_to(usize::MAX);
                    if let Some(row) = row {
                        class_only[..row.len()].copy_from_slice(row);
                    }
                    ids.iter()
                        .for_each(|&t| class_only[t as usize / 32] |= 1 << (t % 32));
                    let outside = c.iter().zip(&class_only).any(|(x, y)| x & !y != 0);
                    exited += (outside || !entry.boundary.is_empty()) as usize;
                }
                // Not past a class-run entry below the root.
                assert!(class_run_entry(&cfg, vocab, words, &key, 1).is_none());
                for b in 0..=255u8 {
                    let q2 = dfa.step(q, b);
                    if q2 != DEAD && !seen.contains(&q2) {
                        seen.push(q2);
                        todo.push(q2);
                    }
                }
            }
        }
        (applied, exited)
    }

    /// The class tables of the run `q` starts.
    fn class_run_at<'v>(cfg: &Cfg, vocab: &'v Vocab, l: u32, q: u32) -> &'v ClassRun {
        let scan = OneScan::new(cfg, l, q, 1);
        run_start(&scan, vocab, q).unwrap().0
    }

    fn schema(source: &str) -> GrammarAst {
        schema::compile(source, &Default::default()).unwrap()
    }

    #[test]
    fn class_run_entries_equal_full_walks() {
        let vocab = vocab();
        let cases: Vec<(&str, GrammarAst, usize)> = vec![
            // Lower-case hex, two runs, a dash between: 8 + 4 places.
            (
                "hex uuid-like",
                schema(r#"{"type": "string", "pattern": "^[0-9a-f]{8}-[0-9a-f]{4}$"}"#),
                12,
            ),
            // Three places of a run, then the string may end or go on.
            (
                "alnum 3 to 6",
                schema(r#"{"type": "string", "pattern": "^[0-9A-Za-z]{3,6}$"}"#),
                3,
            ),
            (
                "uuid",
                schema(r#"{"type": "string", "format": "uuid"}"#),
                30,
            ),
            (
                "in an object",
                schema(
                    r#"{"type": "object", "properties": {"id": {"type": "string",
                    "pattern": "^[A-Z]{2}[0-9]{3}$"}}, "required": ["id"]}"#,
                ),
                5,
            ),
            // Lexemes that end at a run's end, or go on after a choice.
            (
                "gbnf",
                gbnf::parse(
                    r#"root ::= [0-9]{4} "-" [0-9]{2} | [a-z]{2,5} ";" | x "-" x
                    x ::= [0-9a-f]{4}"#,
                )
                .unwrap(),
                4,
            ),
            // Longest-match lexing: a run inside a lexeme, beside a word.
            (
                "lark",
                lark::parse("start: A B\nA: /[0-9a-f]{6}x/\nB: /[g-z]+|-/").unwrap(),
                6,
            ),
            // A lexeme that ends with the run: every child of a node of
            // six hex digits is a stop, which no table holds (none apply
            // there, but the places before may).
            (
                "lark, ending",
                lark::parse("start: A B\nA: /[0-9a-f]{6}/\nB: /[g-z]+|-/").unwrap(),
                0,
            ),
        ];
        let mut exits = 0;
        for (name, ast, fewest) in cases {
            let (applied, exited) = check(&ast, &vocab);
            assert!(
                applied >= fewest,
                "{name}: {applied} applied, {fewest} wanted"
            );
            exits += exited;
        }
        assert!(exits >= 5, "{exits} entries walked exits");
    }
}
