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

use super::sparse::{SparseRows, MAX_EDGES};
use super::{class_bytes_of, ByteDfa, Result, Table, Tail, DEAD, DFA_SIZE_LIMIT};

/// One part of a sequence.
#[derive(Clone, Debug)]
pub enum SeqPart {
    /// Exactly these bytes.
    Bytes(Vec<u8>),
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

/// Whether a union of about `expected` states (see `union_of_sequences`)
/// may fit the size bound: each takes at least a list of one transition.
pub fn union_may_fit(expected: usize) -> bool {
    expected.saturating_mul(SparseRows::bytes_for(1)) <= DFA_SIZE_LIMIT
}

/// The union of the languages of `seqs` (each the concatenation of its
/// parts), or None where it matches nothing, or where it needs more than
/// twice the `expected` states (a trie of the text has about one per
/// literal byte) or more memory than the size bound, or would at
/// `expected` states: the caller then builds the alternatives another way
/// (having spent little on the attempt). Empty sequences match the empty
/// string.
pub fn union_of_sequences(seqs: &[Vec<SeqPart>], expected: usize) -> Result<Option<ByteDfa>> {
    let (classes, count) = sequence_classes(seqs);
    if !union_may_fit(expected) {
        return Ok(None);
    }
    let mut first: Vec<Triple> = Vec::with_capacity(seqs.len());
    let mut empty_matches = false;
    for (s, parts) in seqs.iter().enumerate() {
        match parts.first() {
            Some(part) => first.push((s as u32, 0, part.start())),
            None => empty_matches = true,
        }
    }
    let mut b = Builder {
        seqs,
        classes,
        stride: count,
        representative: class_bytes_of(&classes, count).1,
        max_states: expected.saturating_mul(2) + 64,
        rows: vec![(0, 0)],
        edges: Vec::new(),
        accepting: vec![false],
        bytes: 0,
        targets: vec![Vec::new(); count],
        touched: Vec::new(),
        scratch: Vec::new(),
    };
    b.close(&mut first);
    if first.is_empty() && !empty_matches {
        return Ok(None);
    }
    let mut shared = Exploration::default();
    let start = shared.intern(&mut b, &first)?;
    b.accepting[start as usize] |= empty_matches;
    // Sets of many sequences, where the values are told apart, are shared
    // by all; once one sequence is left, the rest of the automaton is that
    // sequence's own, explored at once with a table of its own (so its
    // loops close), which is then emptied: the shared table holds only the
    // sets near the start.
    let mut own = Exploration::default();
    let mut set = Vec::new();
    while let Some(id) = shared.next(&mut set) {
        if !b.one_sequence(&set) {
            if !b.step(id, &set, &mut shared)? {
                return Ok(None);
            }
            continue;
        }
        own.clear();
        own.adopt(id, &set);
        while let Some(id) = own.next(&mut set) {
            if !b.step(id, &set, &mut own)? {
                return Ok(None);
            }
        }
    }
    Ok(Some(b.finish(start)))
}

/// The sets of triples met, each with its state, stepped in the order they
/// were met. Sets live in one arena and are found by their hash, so
/// meeting a set allocates nothing.
#[derive(Default)]
struct Exploration {
    arena: Vec<Triple>,
    /// Set `i` is `arena[spans[i].0..][..spans[i].1]`, state `states[i]`.
    spans: Vec<(u32, u32)>,
    states: Vec<u32>,
    /// The last set with a hash, and before it, the set met before it with
    /// the same hash (`u32::MAX`: none).
    by_hash: HashMap<u64, u32>,
    same_hash: Vec<u32>,
    /// Sets before this one have been stepped.
    stepped: usize,
}

impl Exploration {
    fn clear(&mut self) {
        self.arena.clear();
        self.spans.clear();
        self.states.clear();
        self.by_hash.clear();
        self.same_hash.clear();
        self.stepped = 0;
    }

    fn hash(set: &[Triple]) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = rustc_hash::FxHasher::default();
        set.hash(&mut h);
        h.finish()
    }

    fn set(&self, i: u32) -> &[Triple] {
        let (at, len) = self.spans[i as usize];
        &self.arena[at as usize..][..len as usize]
    }

    /// Records `set` as state `id`'s, to be stepped.
    fn adopt(&mut self, id: u32, set: &[Triple]) {
        let i = self.spans.len() as u32;
        let prev = self.by_hash.insert(Self::hash(set), i);
        self.same_hash.push(prev.unwrap_or(u32::MAX));
        self.spans.push((self.arena.len() as u32, set.len() as u32));
        self.arena.extend_from_slice(set);
        self.states.push(id);
    }

    /// The state of closed set `set`, made (and queued) if new.
    fn intern(&mut self, b: &mut Builder, set: &[Triple]) -> Result<u32> {
        crate::budget::charge_n(set.len() * TRIPLE_STEPS)?;
        let mut i = self.by_hash.get(&Self::hash(set)).copied();
        while let Some(k) = i.filter(|&k| k != u32::MAX) {
            if self.set(k) == set {
                return Ok(self.states[k as usize]);
            }
            i = Some(self.same_hash[k as usize]);
        }
        let id = b.rows.len() as u32;
        b.rows.push((0, 0));
        b.accepting.push(false);
        self.adopt(id, set);
        Ok(id)
    }

    /// The next set to step (copied into `set`) and its state.
    fn next(&mut self, set: &mut Vec<Triple>) -> Option<u32> {
        let i = self.stepped;
        let &id = self.states.get(i)?;
        self.stepped += 1;
        set.clear();
        set.extend_from_slice(self.set(i as u32));
        Some(id)
    }
}

/// The automaton as it is built: each state's live `(class, target)`
/// pairs, in the order states are stepped.
struct Builder<'a> {
    seqs: &'a [Vec<SeqPart>],
    classes: [u8; 256],
    stride: usize,
    representative: Vec<u8>,
    max_states: usize,
    /// State `i`'s pairs are `edges[rows[i].0..][..rows[i].1]`.
    rows: Vec<(u32, u32)>,
    edges: Vec<(u8, u32)>,
    accepting: Vec<bool>,
    /// Memory the finished automaton takes so far.
    bytes: usize,
    /// The set each class leads to from the set being stepped.
    targets: Vec<Vec<Triple>>,
    /// The classes with a non-empty target.
    touched: Vec<u8>,
    /// A target set being closed and interned.
    scratch: Vec<Triple>,
}

impl Builder<'_> {
    /// Where a part accepts, the next may start: closes a set under that.
    fn close(&self, set: &mut Vec<Triple>) {
        let mut i = 0;
        while i < set.len() {
            let (s, p, q) = set[i];
            let parts = &self.seqs[s as usize];
            if (p as usize + 1) < parts.len() && parts[p as usize].accepts(q) {
                set.push((s, p + 1, parts[p as usize + 1].start()));
            }
            i += 1;
        }
        set.sort_unstable();
        set.dedup();
    }

    fn ends(&self, &(s, p, q): &Triple) -> bool {
        let parts = &self.seqs[s as usize];
        p as usize + 1 == parts.len() && parts[p as usize].accepts(q)
    }

    /// Whether every triple of (sorted) `set` is of one sequence.
    fn one_sequence(&self, set: &[Triple]) -> bool {
        set.first().map(|t| t.0) == set.last().map(|t| t.0)
    }

    /// Steps state `id`'s `set` on every class, interning the targets in
    /// `into`. False when the automaton grows past its bounds.
    fn step(&mut self, id: u32, set: &[Triple], into: &mut Exploration) -> Result<bool> {
        let mut stepped = 0usize;
        let mut accepts = false;
        for &(s, p, q) in set {
            accepts |= self.ends(&(s, p, q));
            match &self.seqs[s as usize][p as usize] {
                SeqPart::Bytes(b) => {
                    if let Some(&byte) = b.get(q as usize) {
                        let c = self.classes[byte as usize];
                        self.target(c).push((s, p, q + 1));
                        stepped += 1;
                    }
                }
                SeqPart::Dfa(d) => {
                    for c in 0..self.stride {
                        let to = d.step(q, self.representative[c]);
                        if to != DEAD {
                            self.target(c as u8).push((s, p, to));
                        }
                    }
                    stepped += self.stride;
                }
            }
        }
        crate::budget::charge_n(stepped + self.touched.len() * crate::budget::TABLE_TRANSITION)?;
        self.accepting[id as usize] |= accepts;
        self.touched.sort_unstable();
        let at = self.edges.len() as u32;
        let mut to = std::mem::take(&mut self.scratch);
        for k in 0..self.touched.len() {
            let c = self.touched[k];
            to.clear();
            to.append(&mut self.targets[c as usize]);
            self.close(&mut to);
            let t = into.intern(self, &to)?;
            self.edges.push((c, t));
        }
        self.scratch = to;
        self.touched.clear();
        let live = self.edges.len() as u32 - at;
        self.rows[id as usize] = (at, live);
        self.bytes += if live as usize > MAX_EDGES {
            self.stride * 4
        } else {
            SparseRows::bytes_for(live as usize)
        };
        Ok(self.rows.len() <= self.max_states && self.bytes <= DFA_SIZE_LIMIT)
    }

    /// Class `c`'s target set, noting that it is used.
    fn target(&mut self, c: u8) -> &mut Vec<Triple> {
        let to = &mut self.targets[c as usize];
        if to.is_empty() {
            self.touched.push(c);
        }
        to
    }

    /// The automaton: the start and the states with many live classes as
    /// table rows (numbered first), the rest as lists past them.
    fn finish(self, start: u32) -> ByteDfa {
        let n = self.rows.len();
        let dense = |i: usize| i == start as usize || self.rows[i].1 as usize > MAX_EDGES;
        let mut renumber = vec![DEAD; n];
        let mut count = 1u32;
        for (i, slot) in renumber.iter_mut().enumerate().skip(1) {
            if dense(i) {
                *slot = count;
                count += 1;
            }
        }
        let table_rows = count;
        for (i, slot) in renumber.iter_mut().enumerate().skip(1) {
            if !dense(i) {
                *slot = count;
                count += 1;
            }
        }
        let pairs = |i: usize| {
            let (at, len) = self.rows[i];
            self.edges[at as usize..][..len as usize]
                .iter()
                .map(|&(c, t)| (c, renumber[t as usize]))
        };
        let mut trans = vec![DEAD; table_rows as usize * self.stride];
        let mut accepting = vec![false; table_rows as usize];
        let mut sparse = SparseRows::new(table_rows);
        let (class_size, representative) = class_bytes_of(&self.classes, self.stride);
        let mut list = Vec::with_capacity(MAX_EDGES);
        for i in (1..n).filter(|&i| dense(i)) {
            let row = renumber[i] as usize;
            accepting[row] = self.accepting[i];
            for (c, t) in pairs(i) {
                trans[row * self.stride + c as usize] = t;
            }
        }
        for i in (1..n).filter(|&i| !dense(i)) {
            list.clear();
            list.extend(pairs(i));
            let forced = match list.as_slice() {
                &[(c, _)] if !self.accepting[i] && class_size[c as usize] == 1 => {
                    Some(representative[c as usize])
                }
                _ => None,
            };
            sparse.push(&list, self.accepting[i], forced);
        }
        // Every set is live (a literal's bytes lead on, an automaton part's
        // states are all live) and reached from the start: no pruning.
        let mut dfa = Table {
            classes: self.classes,
            class_size,
            representative,
            trans,
            accepting,
            start: renumber[start as usize],
        }
        .finish();
        if sparse.len() > 0 {
            dfa.tail = Some(Box::new(Tail::Sparse(sparse)));
        }
        dfa
    }
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
    use super::super::tests::same_language;
    use super::super::Op;
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
    fn list_states_behave_as_the_regex_of_the_alternation() {
        // Bounded whitespace that overlaps the words: every state past the
        // start is a list (few live classes), and the subset construction
        // still has sets of several sequences to tell apart.
        let ws = Arc::new(ByteDfa::new("[ ab]{0,2}").unwrap());
        let words = ["ab", "aab", "b", "bba", "abba", "ba", "a"];
        let seqs: Vec<Vec<SeqPart>> = words
            .iter()
            .map(|w| {
                vec![
                    bytes("["),
                    SeqPart::Dfa(ws.clone()),
                    bytes(w),
                    SeqPart::Dfa(ws.clone()),
                    bytes("]"),
                ]
            })
            .collect();
        let d = union_of_sequences(&seqs, 1 << 10).unwrap().unwrap();
        assert!(matches!(d.tail.as_deref(), Some(Tail::Sparse(_))));
        let re = format!("\\[[ ab]{{0,2}}(?:{})[ ab]{{0,2}}\\]", words.join("|"));
        let oracle = ByteDfa::new(&re).unwrap();
        let alphabet = b"[] ab";
        same_language(&d, &oracle, alphabet, 7);
        assert_eq!(d.first_bytes(), oracle.first_bytes());
        // Every operation reads list states as the rows they stand for.
        let table = d.materialized().unwrap();
        assert!(table.tail.is_none());
        same_language(&table, &oracle, alphabet, 7);
        assert_eq!(
            d.residual_signature(d.start(), 1 << 16),
            table.residual_signature(table.start(), 1 << 16)
        );
        let other = ByteDfa::new("\\[ ?a.*").unwrap();
        for op in [Op::And, Op::AndNot, Op::Or] {
            let p = ByteDfa::product(&d, &other, op).unwrap();
            let q = ByteDfa::product(&oracle, &other, op).unwrap();
            same_language(&p, &q, alphabet, 6);
        }
        let x = ByteDfa::new("x?").unwrap();
        let c = ByteDfa::concat(&d, &x).unwrap().unwrap();
        let c_oracle = ByteDfa::new(&format!("(?:{re})x?")).unwrap();
        same_language(&c, &c_oracle, b"[] abx", 6);
        let r = ByteDfa::repeat(&d, 1, Some(2)).unwrap();
        let r_oracle = ByteDfa::new(&format!("(?:{re}){{1,2}}")).unwrap();
        if let Some(r) = r {
            same_language(&r, &r_oracle, alphabet, 7);
        }
        let e = union_of_sequences(&seqs, 1 << 10)
            .unwrap()
            .unwrap()
            .or_empty()
            .unwrap();
        let e_oracle = ByteDfa::new(&format!("(?:{re})?")).unwrap();
        same_language(&e, &e_oracle, alphabet, 6);
        // A pair of states no string of 3 bytes tells apart, by the
        // definition, on the list states themselves.
        let s1 = d.step_bytes(d.start(), b"[a");
        let s2 = d.step_bytes(d.start(), b"[ a");
        let len = d.distinguishing_length(s1, s2, 6, 1 << 16);
        let t1 = table.step_bytes(table.start(), b"[a");
        let t2 = table.step_bytes(table.start(), b"[ a");
        assert_eq!(len, table.distinguishing_length(t1, t2, 6, 1 << 16));
    }

    #[test]
    fn random_unions_equal_the_regex_of_their_alternation() {
        // Sequences of random words and loops over a small alphabet, many
        // overlapping: the union against regex-automata's DFA of the
        // alternation, on every string up to six bytes.
        let pool = ["[ a]*", "b?", "(?:ab)*", "a{0,2}", "[ab]"];
        let dfas: Vec<Arc<ByteDfa>> = pool
            .iter()
            .map(|p| Arc::new(ByteDfa::new(p).unwrap()))
            .collect();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n) as usize
        };
        for _ in 0..200 {
            let mut seqs = Vec::new();
            let mut alts = Vec::new();
            for _ in 0..1 + next(20) {
                let mut parts = Vec::new();
                let mut re = String::new();
                for _ in 0..next(4) {
                    if next(2) == 0 {
                        let word: String = (0..next(4)).map(|_| ['a', 'b', ' '][next(3)]).collect();
                        re.push_str(&word);
                        parts.push(bytes(&word));
                    } else {
                        let k = next(pool.len() as u64);
                        re.push_str(&format!("(?:{})", pool[k]));
                        parts.push(SeqPart::Dfa(dfas[k].clone()));
                    }
                }
                alts.push(re);
                seqs.push(parts);
            }
            let re = format!("(?:{})", alts.join("|"));
            let Some(d) = union_of_sequences(&seqs, 1 << 12).unwrap() else {
                continue;
            };
            let oracle = ByteDfa::new(&re).unwrap();
            same_language(&d, &oracle, b"ab ", 6);
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
