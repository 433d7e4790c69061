//! Many alternatives, each a sequence of parts, as one DFA.
//!
//! An `enum` of 10,000 arrays or objects is 10,000 alternatives such as
//! `[ ws 7 ws , ws "7" ws ]`: literal text between runs of flexible
//! whitespace. Each could be its own lexeme, but then every value start
//! scans 10,000 lexemes at once; a regex of the whole alternation takes the
//! regex compiler seconds. Yet the union is nearly a trie: merged into one
//! (`seqtrie`, whose edges are literal bytes and whole automaton parts such
//! as the whitespace run), the sequences need only the subset construction
//! over *positions* in that trie — a node, or a node and a state of the
//! part on the edge into it — to become deterministic where an automaton
//! part and the bytes beside it overlap. It builds the automaton in time
//! proportional to the text: most sets are one node of the trie, and those
//! are looked up by the node, not hashed.
//!
//! A set of one node steps along that node's byte children; an automaton
//! position steps on every class its automaton reads, so a set costs its
//! size plus the classes its automaton parts read, not size times classes.

use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use super::seqtrie::{SeqTrie, ROOT};
use super::sparse::{SparseRows, MAX_EDGES};
use super::table::{class_bytes_of, Table};
use super::tail::Tail;
use super::{ByteDfa, Result, DEAD, DFA_SIZE_LIMIT};

/// One part of a sequence.
#[derive(Clone, Debug)]
pub enum SeqPart {
    /// Exactly these bytes.
    Bytes(Vec<u8>),
    /// The language of an automaton (shared: parts repeat across sequences).
    Dfa(Arc<ByteDfa>),
}

/// A position in the trie: `(node, AT)` once every token into `node` is
/// read, `(node, q)` in state `q` of the automaton part on the edge into
/// `node`.
type Position = (u32, u32);

/// The state half of a position at a node.
const AT: u32 = u32::MAX;

/// Budget steps per position of a set built: stepped, sorted, hashed, stored.
const POSITION_STEPS: usize = 16;

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
    if !union_may_fit(expected) {
        return Ok(None);
    }
    let trie = SeqTrie::new(seqs)?;
    if !trie.ends(ROOT) && trie.len() == 1 {
        return Ok(None);
    }
    let (classes, count) = trie_classes(&trie)?;
    let mut b = Builder {
        trie: &trie,
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
    let mut sets = Exploration {
        at_node: vec![DEAD; trie.len()],
        in_part: vec![(0, DEAD); trie.len()],
        ..Exploration::default()
    };
    let start = sets.state_of(&mut b, &mut vec![(ROOT, AT)])?;
    let mut set = Vec::new();
    while let Some(id) = sets.next(&mut set) {
        if !b.step(id, &set, &mut sets)? {
            return Ok(None);
        }
    }
    Ok(Some(b.finish(start)))
}

/// The sets of positions met, each with its state. A set of one node is
/// found by the node; others live in one arena and are found by their
/// hash, so meeting a set allocates nothing. Sets are stepped last met
/// first, so a value's states are built together (the trie's nodes of a
/// value lie together too).
#[derive(Default)]
struct Exploration {
    /// The state of the closure of `{(n, AT)}` (`DEAD`: not met).
    at_node: Vec<u32>,
    /// The state of the closure of `{(n, q)}`, an automaton position: the
    /// first met at each node (most are the only one: whitespace runs
    /// loop in one state), the rest by hash.
    in_part: Vec<(u32, u32)>,
    at_part: HashMap<Position, u32>,
    arena: Vec<Position>,
    /// Set `i` is `arena[spans[i].0..][..spans[i].1]`.
    spans: Vec<(usize, u32)>,
    /// Set `i`'s state.
    states: Vec<u32>,
    /// The last set with a hash, and before it, the set met before it with
    /// the same hash (`u32::MAX`: none).
    by_hash: HashMap<u64, u32>,
    same_hash: Vec<u32>,
    /// The states met and not stepped: a set of one node, or an arena set.
    pending: Vec<(u32, Pending)>,
}

#[derive(Clone, Copy)]
enum Pending {
    Node(u32),
    Set(u32),
}

impl Exploration {
    fn hash(set: &[Position]) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = rustc_hash::FxHasher::default();
        set.hash(&mut h);
        h.finish()
    }

    fn set(&self, i: u32) -> &[Position] {
        let (at, len) = self.spans[i as usize];
        &self.arena[at..][..len as usize]
    }

    /// The state of the closure of `kernel` (closed in place when its
    /// state is new). A kernel of one position is looked up by that
    /// position, with no closing or hashing: a trie node is reached from
    /// its parent only, so each is met about once. (A larger kernel may
    /// close to a set met that way too; its state is then a second,
    /// equivalent one.)
    fn state_of(&mut self, b: &mut Builder, kernel: &mut Vec<Position>) -> Result<u32> {
        match kernel[..] {
            [(node, AT)] => {
                let id = self.at_node[node as usize];
                if id != DEAD {
                    return Ok(id);
                }
                b.close(kernel);
                let id = self.add(b, kernel, None)?;
                self.at_node[node as usize] = id;
                Ok(id)
            }
            [(node, q)] => {
                let (first_q, first_id) = self.in_part[node as usize];
                if first_q == q && first_id != DEAD {
                    return Ok(first_id);
                }
                if let Some(&id) = self.at_part.get(&(node, q)) {
                    return Ok(id);
                }
                b.close(kernel);
                let id = self.add(b, kernel, None)?;
                if first_id == DEAD {
                    self.in_part[node as usize] = (q, id);
                } else {
                    self.at_part.insert((node, q), id);
                }
                Ok(id)
            }
            _ => {
                b.close(kernel);
                self.intern(b, kernel)
            }
        }
    }

    /// The state of closed set `set`, found by its hash, made if new. Only
    /// sets closed from a kernel of two or more positions come here, so
    /// `set` holds two or more (one position is found by `state_of`).
    fn intern(&mut self, b: &mut Builder, set: &[Position]) -> Result<u32> {
        crate::budget::charge_n(set.len() * POSITION_STEPS)?; // closed, hashed, compared
        debug_assert!(set.len() > 1);
        let hash = Self::hash(set);
        let mut i = self.by_hash.get(&hash).copied();
        while let Some(k) = i.filter(|&k| k != u32::MAX) {
            if self.set(k) == set {
                return Ok(self.states[k as usize]);
            }
            i = Some(self.same_hash[k as usize]);
        }
        self.add(b, set, Some(hash))
    }

    /// A state for closed set `set`, queued to be stepped; found by `hash`
    /// from now on, if given.
    fn add(&mut self, b: &mut Builder, set: &[Position], hash: Option<u64>) -> Result<u32> {
        crate::budget::charge_n(set.len() * POSITION_STEPS)?;
        let id = b.new_state();
        if let &[(node, AT)] = set {
            self.pending.push((id, Pending::Node(node)));
            return Ok(id);
        }
        let k = self.spans.len() as u32;
        self.spans.push((self.arena.len(), set.len() as u32));
        self.arena.extend_from_slice(set);
        self.states.push(id);
        self.same_hash.push(u32::MAX);
        if let Some(hash) = hash {
            if let Some(prev) = self.by_hash.insert(hash, k) {
                self.same_hash[k as usize] = prev;
            }
        }
        self.pending.push((id, Pending::Set(k)));
        Ok(id)
    }

    /// The next set to step (copied into `set`) and its state.
    fn next(&mut self, set: &mut Vec<Position>) -> Option<u32> {
        let (id, pending) = self.pending.pop()?;
        set.clear();
        match pending {
            Pending::Node(node) => set.push((node, AT)),
            Pending::Set(k) => set.extend_from_slice(self.set(k)),
        }
        Some(id)
    }
}

/// The automaton as it is built: each state's live `(class, target)`
/// pairs, in the order states are stepped.
struct Builder<'a> {
    trie: &'a SeqTrie,
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
    targets: Vec<Vec<Position>>,
    /// The classes with a non-empty target.
    touched: Vec<u8>,
    /// A target set being closed and interned.
    scratch: Vec<Position>,
}

impl Builder<'_> {
    /// A state, its row to be filled when it is stepped.
    fn new_state(&mut self) -> u32 {
        let id = self.rows.len() as u32;
        self.rows.push((0, 0));
        self.accepting.push(false);
        id
    }

    /// Where a part accepts, its node is reached; at a node, the parts on
    /// its edges may start: closes a set under both.
    fn close(&self, set: &mut Vec<Position>) {
        let mut i = 0;
        while i < set.len() {
            let (node, q) = set[i];
            if q == AT {
                for child in self.trie.part_children(node) {
                    set.push((child, self.trie.part(child).start()));
                }
            } else if self.trie.part(node).is_accepting(q) {
                set.push((node, AT));
            }
            i += 1;
        }
        set.sort_unstable();
        set.dedup();
    }

    /// Steps state `id`'s `set` on every class, interning the targets in
    /// `sets`. False when the automaton grows past its bounds.
    fn step(&mut self, id: u32, set: &[Position], sets: &mut Exploration) -> Result<bool> {
        let at = self.edges.len() as u32;
        if let &[(node, AT)] = set {
            // One node (most states): its byte children are the targets,
            // each a class of its own (literal bytes are).
            self.accepting[id as usize] = self.trie.ends(node);
            let mut to = std::mem::take(&mut self.scratch);
            for child in self.trie.byte_children(node) {
                to.clear();
                to.push((child, AT));
                let t = sets.state_of(self, &mut to)?;
                self.edges
                    .push((self.classes[self.trie.byte(child) as usize], t));
            }
            self.scratch = to;
            self.edges[at as usize..].sort_unstable_by_key(|e| e.0);
            crate::budget::charge_n(
                (self.edges.len() - at as usize) * crate::budget::TABLE_TRANSITION,
            )?;
            return Ok(self.close_row(id, at));
        }
        let mut stepped = 0usize;
        let mut accepts = false;
        for &(node, q) in set {
            if q == AT {
                accepts |= self.trie.ends(node);
                for child in self.trie.byte_children(node) {
                    let c = self.classes[self.trie.byte(child) as usize];
                    self.target(c).push((child, AT));
                    stepped += 1;
                }
            } else {
                let d = self.trie.part(node);
                for c in 0..self.stride {
                    let to = d.step(q, self.representative[c]);
                    if to != DEAD {
                        self.target(c as u8).push((node, to));
                    }
                }
                stepped += self.stride;
            }
        }
        crate::budget::charge_n(stepped + self.touched.len() * crate::budget::TABLE_TRANSITION)?;
        self.accepting[id as usize] = accepts;
        self.touched.sort_unstable();
        let mut to = std::mem::take(&mut self.scratch);
        for k in 0..self.touched.len() {
            let c = self.touched[k];
            to.clear();
            to.append(&mut self.targets[c as usize]);
            if to.len() > 1 {
                // States of one part may meet: one position, found by it.
                to.sort_unstable();
                to.dedup();
            }
            let t = sets.state_of(self, &mut to)?;
            self.edges.push((c, t));
        }
        self.scratch = to;
        self.touched.clear();
        Ok(self.close_row(id, at))
    }

    /// Records state `id`'s pairs, from `at` on; false when the automaton
    /// grows past its bounds.
    fn close_row(&mut self, id: u32, at: u32) -> bool {
        let live = self.edges.len() as u32 - at;
        self.rows[id as usize] = (at, live);
        self.bytes += if live as usize > MAX_EDGES {
            self.stride * 4
        } else {
            SparseRows::bytes_for(live as usize)
        };
        self.rows.len() <= self.max_states && self.bytes <= DFA_SIZE_LIMIT
    }

    /// Class `c`'s target set, noting that it is used.
    fn target(&mut self, c: u8) -> &mut Vec<Position> {
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
        // Every set is live (each trie node lies on the way to a node where
        // a sequence ends, an automaton part's states are all live) and
        // reached from the start: no pruning.
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

/// Byte classes for the trie: every byte a literal reads alone, refined
/// by the classes of each automaton part. Returns the class of each byte
/// and the number of classes.
fn trie_classes(trie: &SeqTrie) -> Result<([u8; 256], usize)> {
    crate::budget::charge_n(256 * (trie.parts().len() + 1))?;
    // A byte's signature: itself if some literal reads it, then its class
    // in each automaton; equal signatures share a class.
    let mut ids: HashMap<Vec<u16>, u8> = HashMap::default();
    let mut classes = [0u8; 256];
    for b in 0..=255u8 {
        let mut key: Vec<u16> = Vec::with_capacity(trie.parts().len() + 1);
        key.push(if trie.literal(b) { b as u16 } else { 256 });
        key.extend(trie.parts().iter().map(|d| d.classes[b as usize] as u16));
        let fresh = ids.len() as u8;
        classes[b as usize] = *ids.entry(key).or_insert(fresh);
    }
    Ok((classes, ids.len()))
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
