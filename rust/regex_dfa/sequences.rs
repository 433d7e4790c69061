//! Many alternatives, each a sequence of parts, as one DFA.
//!
//! An `enum` of 10,000 arrays or objects is 10,000 alternatives such as
//! `[ ws 7 ws , ws "7" ws ]`: literal text between runs of flexible
//! whitespace. Each could be its own lexeme, but then every value start
//! scans 10,000 lexemes at once; a regex of the whole alternation takes the
//! regex compiler seconds. Yet the union is nearly a trie: the subset
//! construction over `(alternative, part, state)` triples, where a part is
//! either literal bytes (its state an offset) or a small automaton shared
//! by many alternatives (the whitespace run, a number's optional `.0`),
//! builds it in time proportional to the text. The sets are large only
//! near the start, where every alternative is alive; past the bytes that
//! tell the values apart each holds a triple or two.
//!
//! Literal bytes are stepped once per triple (only their own class can move
//! them), so a set costs its size plus the classes its automaton parts
//! read, not size times classes.

use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use super::{class_bytes_of, ByteDfa, Result, Table, DEAD, DFA_SIZE_LIMIT};

/// One part of a sequence.
#[derive(Clone, Debug)]
pub enum SeqPart {
    /// Exactly these bytes.
    Bytes(Box<[u8]>),
    /// The language of an automaton (shared: parts repeat across sequences).
    Dfa(Arc<ByteDfa>),
}

/// A position inside the sequences: (sequence, part, state), the state an
/// offset into a `Bytes` part or a state of a `Dfa` part.
type Triple = (u32, u32, u32);

/// Budget steps per triple of a set built: stepped, sorted, hashed, stored.
const TRIPLE_STEPS: usize = 16;

impl SeqPart {
    fn start(&self) -> u32 {
        match self {
            SeqPart::Bytes(_) => 0,
            SeqPart::Dfa(d) => d.start,
        }
    }

    fn accepts(&self, q: u32) -> bool {
        match self {
            SeqPart::Bytes(b) => q as usize == b.len(),
            SeqPart::Dfa(d) => d.is_accepting(q),
        }
    }
}

/// The union of the languages of `seqs` (each the concatenation of its
/// parts), or None where it matches nothing, or where it needs more than
/// twice the `expected` states (a trie of the text has about one per
/// literal byte) or a table past the size bound, or would at `expected`
/// states: the caller then builds the alternatives another way (having
/// spent little on the attempt). Empty sequences match the empty string.
pub fn union_of_sequences(seqs: &[Vec<SeqPart>], expected: usize) -> Result<Option<ByteDfa>> {
    let (classes, count) = sequence_classes(seqs);
    let (class_size, representative) = class_bytes_of(&classes, count);
    let stride = count;
    if expected.saturating_mul(stride).saturating_mul(4) > DFA_SIZE_LIMIT {
        return Ok(None);
    }
    let max_states = expected.saturating_mul(2) + 64;
    // Where a part accepts, the next may start: closes a set under that.
    let close = |set: &mut Vec<Triple>| {
        let mut i = 0;
        while i < set.len() {
            let (s, p, q) = set[i];
            let parts = &seqs[s as usize];
            if (p as usize + 1) < parts.len() && parts[p as usize].accepts(q) {
                set.push((s, p + 1, parts[p as usize + 1].start()));
            }
            i += 1;
        }
        set.sort_unstable();
        set.dedup();
    };
    let ends = |&(s, p, q): &Triple| {
        let parts = &seqs[s as usize];
        p as usize + 1 == parts.len() && parts[p as usize].accepts(q)
    };
    let mut first: Vec<Triple> = Vec::with_capacity(seqs.len());
    let mut empty_matches = false;
    for (s, parts) in seqs.iter().enumerate() {
        match parts.first() {
            Some(part) => first.push((s as u32, 0, part.start())),
            None => empty_matches = true,
        }
    }
    close(&mut first);
    if first.is_empty() && !empty_matches {
        return Ok(None);
    }
    // The sets, one after another in `arena`: state `i + 1` is
    // `arena[spans[i].0..][..spans[i].1]`.
    let mut arena: Vec<Triple> = first.clone();
    let mut spans: Vec<(usize, usize)> = vec![(0, first.len())];
    let mut ids: HashMap<Vec<Triple>, u32> = HashMap::default();
    ids.insert(first, 1);
    // Room for a trie of the text, so the table is not copied as it grows
    // (reserved, not touched: pages are only mapped where rows are written).
    let room = (max_states + 1)
        .saturating_mul(stride)
        .min(DFA_SIZE_LIMIT / 4);
    let mut trans = Vec::with_capacity(room);
    trans.resize(stride, DEAD);
    let mut accepting = vec![false];
    // The set each class leads to from the set being stepped.
    let mut targets: Vec<Vec<Triple>> = vec![Vec::new(); stride];
    let mut next = 0;
    while next < spans.len() {
        let (at, len) = spans[next];
        next += 1;
        let mut stepped = 0usize;
        let mut accepts = next == 1 && empty_matches;
        for &(s, p, q) in &arena[at..at + len] {
            accepts |= ends(&(s, p, q));
            match &seqs[s as usize][p as usize] {
                SeqPart::Bytes(b) => {
                    if let Some(&byte) = b.get(q as usize) {
                        targets[classes[byte as usize] as usize].push((s, p, q + 1));
                        stepped += 1;
                    }
                }
                SeqPart::Dfa(d) => {
                    for (c, &byte) in representative.iter().enumerate() {
                        let to = d.step(q, byte);
                        if to != DEAD {
                            targets[c].push((s, p, to));
                        }
                    }
                    stepped += stride;
                }
            }
        }
        accepting.push(accepts);
        crate::budget::charge_n(stepped + stride * crate::budget::TABLE_TRANSITION)?;
        for to in targets.iter_mut() {
            if to.is_empty() {
                trans.push(DEAD);
                continue;
            }
            close(to);
            crate::budget::charge_n(to.len() * TRIPLE_STEPS)?;
            let fresh = spans.len() as u32 + 1;
            let id = *ids.entry(to.clone()).or_insert(fresh);
            if id == fresh {
                spans.push((arena.len(), to.len()));
                arena.extend_from_slice(to);
            }
            to.clear();
            trans.push(id);
        }
        if spans.len() > max_states || trans.len().saturating_mul(4) > DFA_SIZE_LIMIT {
            return Ok(None);
        }
    }
    // Every set is live (a literal's bytes lead on, an automaton part's
    // states are all live) and reached from the start: no pruning.
    Ok(Some(
        Table {
            classes,
            class_size,
            representative,
            trans,
            accepting,
            start: 1,
        }
        .finish(),
    ))
}

/// Byte classes for `seqs`: every byte of a `Bytes` part alone, refined by
/// the classes of each distinct automaton part. Returns the class of each
/// byte and the number of classes.
fn sequence_classes(seqs: &[Vec<SeqPart>]) -> ([u8; 256], usize) {
    let mut literal = [false; 256];
    let mut automata: Vec<&Arc<ByteDfa>> = Vec::new();
    for part in seqs.iter().flatten() {
        match part {
            SeqPart::Bytes(b) => b.iter().for_each(|&x| literal[x as usize] = true),
            SeqPart::Dfa(d) => {
                if !automata.iter().any(|a| Arc::ptr_eq(a, d)) {
                    automata.push(d);
                }
            }
        }
    }
    // A byte's signature: itself if some literal has it, then its class in
    // each automaton; equal signatures share a class.
    let mut ids: HashMap<Vec<u16>, u8> = HashMap::default();
    let mut classes = [0u8; 256];
    for b in 0..=255u8 {
        let mut key: Vec<u16> = Vec::with_capacity(automata.len() + 1);
        key.push(if literal[b as usize] { b as u16 } else { 256 });
        key.extend(automata.iter().map(|d| d.classes[b as usize] as u16));
        let fresh = ids.len() as u8;
        classes[b as usize] = *ids.entry(key).or_insert(fresh);
    }
    (classes, ids.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(s: &str) -> SeqPart {
        SeqPart::Bytes(s.as_bytes().into())
    }

    fn matches(d: &ByteDfa, s: &str) -> bool {
        d.is_accepting(d.step_bytes(d.start(), s.as_bytes()))
    }

    #[test]
    fn the_union_matches_exactly_the_sequences() {
        let ws = Arc::new(ByteDfa::new("[ \\n]*").unwrap());
        let tail = Arc::new(ByteDfa::new("(?:\\.0+)?").unwrap());
        let seqs: Vec<Vec<SeqPart>> = (0..300)
            .map(|i| {
                vec![
                    bytes("["),
                    SeqPart::Dfa(ws.clone()),
                    bytes(&i.to_string()),
                    SeqPart::Dfa(tail.clone()),
                    SeqPart::Dfa(ws.clone()),
                    bytes(&format!(",\"{i}\"]")),
                ]
            })
            .collect();
        let d = union_of_sequences(&seqs, 1 << 16).unwrap().unwrap();
        for i in [0, 7, 12, 123, 299] {
            assert!(matches(&d, &format!("[{i},\"{i}\"]")));
            assert!(matches(&d, &format!("[ \n{i}.00  ,\"{i}\"]")));
            assert!(!matches(&d, &format!("[{i},\"{}\"]", i + 1)));
            assert!(!matches(&d, &format!("[{i}.,\"{i}\"]")));
            assert!(!matches(&d, &format!("[{i} ,\"{i}\"] ")));
        }
        assert!(!matches(&d, "[300,\"300\"]"));
        assert!(!matches(&d, ""));
        // A trie: about one state per byte of text, not per pair of them.
        assert!(d.num_states() < 300 * 16, "{}", d.num_states());
    }

    #[test]
    fn parts_that_match_the_empty_string_are_skipped() {
        let opt = Arc::new(ByteDfa::new("x?").unwrap());
        let seqs = vec![
            vec![
                SeqPart::Dfa(opt.clone()),
                bytes("a"),
                SeqPart::Dfa(opt.clone()),
            ],
            vec![bytes("")],
            vec![],
        ];
        let d = union_of_sequences(&seqs, 40).unwrap().unwrap();
        for (s, want) in [
            ("a", true),
            ("xa", true),
            ("xax", true),
            ("ax", true),
            ("", true),
        ] {
            assert_eq!(matches(&d, s), want, "{s:?}");
        }
        for s in ["x", "xx", "aa", "xxa"] {
            assert!(!matches(&d, s), "{s:?}");
        }
    }

    #[test]
    fn overlapping_alternatives_are_determinized() {
        // "ab" then a loop, and "a" then a loop that also reads "b".
        let bs = Arc::new(ByteDfa::new("b*").unwrap());
        let seqs = vec![
            vec![bytes("ab"), SeqPart::Dfa(bs.clone()), bytes("c")],
            vec![bytes("a"), SeqPart::Dfa(bs), bytes("d")],
        ];
        let d = union_of_sequences(&seqs, 40).unwrap().unwrap();
        for s in ["abc", "abbc", "ad", "abd", "abbbd"] {
            assert!(matches(&d, s), "{s:?}");
        }
        for s in ["ac", "a", "abcd", "bd"] {
            assert!(!matches(&d, s), "{s:?}");
        }
    }

    #[test]
    fn past_the_state_bound_there_is_no_automaton() {
        let seqs: Vec<Vec<SeqPart>> = (0..100).map(|i| vec![bytes(&format!("w{i}"))]).collect();
        assert!(union_of_sequences(&seqs, 10).unwrap().is_none());
        assert!(union_of_sequences(&seqs, 200).unwrap().is_some());
        // Past the table bound at the expected size: not even tried.
        assert!(union_of_sequences(&seqs, DFA_SIZE_LIMIT / 4)
            .unwrap()
            .is_none());
        assert!(union_of_sequences(&[], 10).unwrap().is_none());
    }
}
