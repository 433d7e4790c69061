//! Regular expressions as byte DFAs with full-match semantics.
//!
//! regex-automata's lazy DFA determinizes the pattern state by state
//! (`lazy`, charged to the compile budget as it goes; UTF-8 aware, so a
//! state reached by a token that ends inside a multi-byte character is live
//! exactly when some completion stays in the language). We copy it into a
//! flat table in which every state that cannot reach a match is merged into
//! the dead state 0, so a trie walk needs one table lookup per byte and one
//! comparison to prune.

use rustc_hash::FxHashMap as HashMap;

use regex_automata::nfa::thompson;
use regex_automata::MatchKind;
use regex_syntax::hir::Hir;

use crate::error::{Error, Result};

mod block_product;
mod closure;
mod compose;
mod lazy;
mod minimize;
mod periodic;
mod seqtrie;
mod sequences;
mod simplify;
mod sparse;
mod subset;
pub use compose::LARGE_REPEAT;
use compose::{compose_parsed, hir_to_compose};
use periodic::{check_states, JoinedClasses, Periodic};
pub use sequences::{union_may_fit, union_of_sequences, SeqPart};
use sparse::SparseRows;

/// Bound on the DFA's memory while it is built and once built (bytes).
pub const DFA_SIZE_LIMIT: usize = 64 << 20;
/// Bound on the Thompson NFA built from the pattern (bytes).
pub const NFA_SIZE_LIMIT: usize = 16 << 20;
/// Dead state: no continuation can complete a match.
pub const DEAD: u32 = 0;

#[derive(Clone, Debug)]
pub struct ByteDfa {
    classes: [u8; 256],
    stride: usize,
    /// `trans[state * stride + class]`; row 0 is the dead state.
    trans: Vec<u32>,
    accepting: Vec<bool>,
    /// The one byte every continuation from this state must start with, if any
    /// (and the state is not accepting, so EOS is not an alternative).
    forced_byte: Vec<Option<u8>>,
    start: u32,
    /// `bytes_after_accepting`, once asked: it reads every state, and
    /// cached DFAs serve many grammars.
    after_accepting: std::sync::OnceLock<ByteSet>,
    /// The states past the table's rows, if any (see `Tail`).
    tail: Option<Box<Tail>>,
    /// What is known of equivalent states (see `Minimality`).
    minimality: Minimality,
}

/// Whether a DFA may have equivalent states, as far as its construction
/// tells: `minimized` costs states x classes x log states (15-20 ms on a
/// 6,800-state word count), so it is skipped where it cannot pay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Minimality {
    /// Nothing is known.
    Unknown,
    /// No two states are equivalent (`minimized` made it, or it is one
    /// literal word: its states' residuals are suffixes of distinct lengths).
    Minimal,
    /// Nearly minimal: minimal or nearly minimal parts joined without
    /// overlap (`concat_all`, `repeat`), or a minimal DFA with its start
    /// made accepting (`or_empty`). A join keeps each later part's (each
    /// copy's) start row, unreachable where only the join enters it;
    /// otherwise, in the cases measured, minimizing merges nothing (a
    /// quoted 200-word count: 6,805 states, 6,804 minimized, in 15-20 ms).
    /// It is used as it is: at worst some states too many, never a
    /// different language.
    Nearly,
}

impl ByteDfa {
    /// Compiles `pattern` (Rust `regex` syntax) for full-match use: a text
    /// is accepted if any way of matching the pattern spans all of it.
    pub fn new(pattern: &str) -> Result<Self> {
        let (hir, may_compose) = match hir_to_compose(pattern) {
            Some(hir) => (hir, true),
            None => match parse_utf8(pattern) {
                Some(hir) => (hir, false),
                // regex-automata words the error.
                None => return Self::build(pattern, MatchKind::All),
            },
        };
        // Simplified once, before composing too: `(?:a+){33333}` composes
        // as `a{33333,}`. The parts `compose` determinizes are subtrees of
        // the simplified tree, simplified with it.
        let hir = simplify::simplified(&hir, simplify::Keep::Language).unwrap_or(hir);
        if may_compose {
            if let Some(d) = compose_parsed(&hir)? {
                return Ok(d);
            }
        }
        Self::full_match(pattern, &hir)
    }

    /// `hir`'s full-match DFA (`pattern` names it in errors); `hir` is
    /// simplified already (`new`).
    fn full_match(pattern: &str, hir: &Hir) -> Result<Self> {
        lazy::determinize(
            pattern,
            lazy::LazySource::from_hir(pattern, hir, MatchKind::All)?,
        )
    }

    /// Compiles `pattern` with the match a backtracking engine such as
    /// Python's `re.match` would report: once a match is found, only
    /// continuations it would prefer (greedy repetitions, earlier
    /// alternatives) stay live, so `x.*?y` ends at the first `y` and `ab|abcd`
    /// at `ab`. This is how Lark terminals match.
    pub fn first_match(pattern: &str) -> Result<Self> {
        Self::build(pattern, MatchKind::LeftmostFirst)
    }

    fn build(pattern: &str, kind: MatchKind) -> Result<Self> {
        let keep = match kind {
            MatchKind::All => simplify::Keep::Language,
            _ => simplify::Keep::Preferences,
        };
        let Some(hir) = parse_utf8(pattern) else {
            // regex-automata words the error.
            return lazy::determinize(pattern, lazy::LazySource::new(pattern, kind)?);
        };
        let simple = simplify::simplified(&hir, keep);
        let hir = simple.as_ref().unwrap_or(&hir);
        lazy::determinize(pattern, lazy::LazySource::from_hir(pattern, hir, kind)?)
    }

    /// The strings `a` accepts that `b` does (`Op::And`) or does not
    /// (`Op::AndNot`) accept, or that either accepts (`Op::Or`), by the
    /// product construction.
    pub fn product(a: &ByteDfa, b: &ByteDfa, op: Op) -> Result<Self> {
        if let Some(d) = block_product::product(a, b, op)? {
            return Ok(d);
        }
        let (classes, class_size, representative) = joint_classes(a, b);
        let stride = representative.len();
        let mut ids: HashMap<(u32, u32), u32> = HashMap::default();
        let mut order: Vec<(u32, u32)> = Vec::new();
        let mut intern = |pair: (u32, u32), order: &mut Vec<(u32, u32)>| -> u32 {
            if op.dead(pair.0, pair.1) {
                return DEAD;
            }
            *ids.entry(pair).or_insert_with(|| {
                order.push(pair);
                order.len() as u32
            })
        };
        let start = intern((a.start, b.start), &mut order);
        let mut trans: Vec<u32> = vec![DEAD; stride];
        let mut next = 0;
        while next < order.len() {
            let (qa, qb) = order[next];
            next += 1;
            crate::budget::charge_n(stride * crate::budget::HASHED_TRANSITION)?;
            for &rep in &representative {
                let t = intern((a.step(qa, rep), b.step(qb, rep)), &mut order);
                trans.push(t);
            }
            if trans.len() * 4 > DFA_SIZE_LIMIT {
                return Err(Error::LimitExceeded(format!(
                    "a product of automata needs a DFA larger than {} MiB",
                    DFA_SIZE_LIMIT >> 20
                )));
            }
        }
        let mut accepting = vec![false];
        accepting.extend(order.iter().map(|&(qa, qb)| {
            let in_a = qa != DEAD && a.is_accepting(qa);
            let in_b = qb != DEAD && b.is_accepting(qb);
            op.accepts(in_a, in_b)
        }));
        let table = Table {
            classes,
            class_size,
            representative,
            trans,
            accepting,
            start,
        };
        table
            .pruned()
            .ok_or_else(|| Error::Compile("a product of automata matches no string".into()))
    }
    /// Exactly the byte strings `words` (a trie): literals and enumerations
    /// need no regex compiler. None for an empty list.
    pub fn literals(words: &[&[u8]]) -> Option<Self> {
        let (classes, class_size, representative) =
            own_classes(words.iter().flat_map(|w| w.iter().copied()));
        let stride = representative.len();
        let mut trans = vec![DEAD; 2 * stride];
        let mut accepting = vec![false, false];
        for w in words {
            let mut q = 1usize;
            for &b in *w {
                let slot = q * stride + classes[b as usize] as usize;
                if trans[slot] == DEAD {
                    trans[slot] = accepting.len() as u32;
                    accepting.push(false);
                    trans.extend(std::iter::repeat_n(DEAD, stride));
                }
                q = trans[slot] as usize;
            }
            accepting[q] = true;
        }
        let mut dfa = Table {
            classes,
            class_size,
            representative,
            trans,
            accepting,
            start: 1,
        }
        .pruned()?;
        if let [_] = words {
            dfa.minimality = Minimality::Minimal;
        }
        Some(dfa)
    }

    /// The DFA with transition function `next` over the bytes of `alphabet`
    /// (every other byte leads to the dead state): states are
    /// `0..accepting.len()`, 0 dead and 1 the start. None if no string
    /// matches.
    pub fn from_transitions(
        alphabet: &[u8],
        accepting: Vec<bool>,
        next: impl Fn(u32, u8) -> u32,
    ) -> Option<Self> {
        let (classes, class_size, representative) = own_classes(alphabet.iter().copied());
        let stride = representative.len();
        let mut trans = vec![DEAD; accepting.len() * stride];
        for q in 1..accepting.len() {
            for (c, &b) in representative.iter().enumerate().skip(1) {
                let t = next(q as u32, b);
                debug_assert!((t as usize) < accepting.len());
                trans[q * stride + c] = t;
            }
        }
        Table {
            classes,
            class_size,
            representative,
            trans,
            accepting,
            start: 1,
        }
        .reachable()
        .pruned()
    }

    /// The same language with each state split by a value computed over
    /// the text read: `count(value, byte)` is the value after `byte` (the
    /// start's is `start`); bytes with different `kind`s may change it
    /// differently, bytes of the same kind (and class) alike. Also returns
    /// each state's value. At most `max_states` states, else LimitExceeded.
    pub fn counted(
        &self,
        start: u32,
        kind: impl Fn(u8) -> u32,
        max_states: usize,
        count: impl Fn(u32, u8) -> u32,
    ) -> Result<(ByteDfa, Vec<u32>)> {
        let mut key_class: HashMap<(u8, u32), u8> = HashMap::default();
        let mut classes = [0u8; 256];
        let mut representative: Vec<u8> = Vec::new();
        let mut class_size: Vec<usize> = Vec::new();
        for b in 0..=255u8 {
            let key = (self.classes[b as usize], kind(b));
            let c = *key_class.entry(key).or_insert_with(|| {
                representative.push(b);
                class_size.push(0);
                (representative.len() - 1) as u8
            });
            classes[b as usize] = c;
            class_size[c as usize] += 1;
        }
        let stride = representative.len();
        // States: (ours, value), numbered from 1 in breadth-first order.
        let mut ids: HashMap<(u32, u32), u32> = HashMap::default();
        let mut order: Vec<(u32, u32)> = vec![(DEAD, 0), (self.start, start)];
        ids.insert((self.start, start), 1);
        let mut trans = vec![DEAD; 2 * stride];
        let mut next = 1;
        while next < order.len() {
            let (q, v) = order[next];
            crate::budget::charge_n(stride * crate::budget::HASHED_TRANSITION)?;
            for (c, &b) in representative.iter().enumerate() {
                let q2 = self.step(q, b);
                if q2 == DEAD {
                    continue;
                }
                let key = (q2, count(v, b));
                let id = match ids.get(&key) {
                    Some(&id) => id,
                    None => {
                        if order.len() >= max_states {
                            return Err(Error::LimitExceeded(format!(
                                "a counted lexeme needs more than {max_states} states"
                            )));
                        }
                        let id = order.len() as u32;
                        ids.insert(key, id);
                        order.push(key);
                        trans.resize(trans.len() + stride, DEAD);
                        id
                    }
                };
                trans[next * stride + c] = id;
            }
            next += 1;
        }
        let accepting = order
            .iter()
            .map(|&(q, _)| q != DEAD && self.is_accepting(q))
            .collect();
        let values = order.iter().map(|&(_, v)| v).collect();
        // Every state reaches a match (ours does, and the count never
        // blocks a byte), so the table needs no pruning.
        let dfa = Table {
            classes,
            class_size,
            representative,
            trans,
            accepting,
            start: 1,
        }
        .finish();
        Ok((dfa, values))
    }

    /// The same language with equivalent states merged (Hopcroft's
    /// partition refinement, `minimize`), or None when that would cost
    /// more than `work_limit` steps (predecessors visited; building them
    /// costs states x byte classes, which must be within the limit too).
    pub fn minimized(&self, work_limit: usize) -> Option<Self> {
        let n = self.num_states();
        let stride = self.stride;
        // A block of shared copies is a long count, minimal as it is.
        if n * stride > work_limit || self.tail.is_some() {
            return None;
        }
        crate::budget::charge_later(n * stride * crate::budget::TABLE_TRANSITION);
        let (class, count) =
            minimize::equivalence_classes(&self.trans, stride, &self.accepting, work_limit)?;
        let mut trans = vec![DEAD; count * stride];
        let mut accepting = vec![false; count];
        for s in 1..n {
            let c = class[s] as usize;
            accepting[c] = self.accepting[s];
            for k in 0..stride {
                trans[c * stride + k] = class[self.trans[s * stride + k] as usize];
            }
        }
        let mut m = self
            .table(trans, accepting, class[self.start as usize])
            .reachable()
            .pruned()?;
        m.minimality = Minimality::Minimal;
        Some(m)
    }

    /// Whether `minimized` may merge more than a few states: false where
    /// the construction made the DFA minimal or nearly so (`Minimality`).
    pub fn minimizing_pays(&self) -> bool {
        self.minimality == Minimality::Unknown
    }

    /// `a` then `b` (see `concat_all`).
    pub fn concat(a: &ByteDfa, b: &ByteDfa) -> Result<Option<Self>> {
        Self::concat_all(&[a, b])
    }

    /// The parts one after another, built directly when that is
    /// deterministic: no byte that extends an accepted string of a part can
    /// start what follows it (the next part, and those after it while the
    /// parts between match the empty string), so each part ends exactly
    /// where the next begins; every state of the result can then still
    /// reach an accepting one, so no pruning pass is needed. The first part
    /// with a block of shared copies (`repeat`) keeps it; others are laid
    /// out. When it is not deterministic, a subset construction over the
    /// parts' states (`subset`), or None where that grows too large (the
    /// caller then builds from the regex).
    pub fn concat_all(parts: &[&ByteDfa]) -> Result<Option<Self>> {
        let k = parts.len();
        // What can start after part i, and whether all after it are nullable.
        let mut rest_first = vec![ByteSet::default(); k + 1];
        let mut rest_nullable = vec![true; k + 1];
        for i in (0..k).rev() {
            let nullable = parts[i].is_accepting(parts[i].start);
            rest_first[i] = parts[i].first_bytes();
            if nullable {
                let after = rest_first[i + 1];
                rest_first[i].union_with(&after);
            }
            rest_nullable[i] = nullable && rest_nullable[i + 1];
        }
        for i in 0..k {
            if parts[i]
                .bytes_after_accepting()
                .intersects(&rest_first[i + 1])
            {
                return subset::concat_overlapping(parts);
            }
        }
        let block_part = parts.iter().position(|p| p.periodic().is_some());
        let laid_out: Vec<Option<ByteDfa>> = parts
            .iter()
            .enumerate()
            .map(|(i, p)| match &p.tail {
                Some(_) if Some(i) != block_part => p.materialized().map(Some),
                _ => Ok(None),
            })
            .collect::<Result<_>>()?;
        let parts: Vec<&ByteDfa> = parts
            .iter()
            .zip(&laid_out)
            .map(|(&p, l)| l.as_ref().unwrap_or(p))
            .collect();
        let (classes, class_size, representative) = refined_classes(&parts);
        let stride = representative.len();
        // Part i's table state s is `offset[i] + s - 1` (the dead state
        // stays 0); the block's states follow the table, in order.
        let rows = |i: usize| parts[i].accepting.len();
        let mut offset = vec![1usize; k + 1];
        for i in 0..k {
            offset[i + 1] = offset[i] + rows(i) - 1;
        }
        let n = offset[k];
        check_size(n, stride)?;
        check_states(n + block_part.map_or(0, |i| parts[i].block().states()))?;
        crate::budget::charge_n(n * stride * crate::budget::TABLE_TRANSITION)?;
        let id = |i: usize, s: u32| match s as usize {
            0 => DEAD,
            s if s < rows(i) => (offset[i] + s - 1) as u32,
            s => (n + s - rows(i)) as u32,
        };
        let mut trans = vec![DEAD; n * stride];
        let mut accepting = vec![false; n];
        for (i, p) in parts.iter().enumerate() {
            for s in 1..rows(i) as u32 {
                let here = id(i, s) as usize;
                let done = p.is_accepting(s);
                accepting[here] = done && rest_nullable[i + 1];
                let row = &mut trans[here * stride..][..stride];
                for (t, &rep) in row.iter_mut().zip(&representative) {
                    let next = p.step(s, rep);
                    *t = if next != DEAD {
                        id(i, next)
                    } else if done {
                        next_part(&parts, i, rep).map_or(DEAD, |(j, q)| id(j, q))
                    } else {
                        DEAD
                    };
                }
            }
        }
        let block = block_part.map(|i| {
            let p = parts[i];
            let joined = JoinedClasses {
                class_size: &class_size,
                representative: &representative,
            };
            p.block().joined(
                p,
                &joined,
                n as u32,
                |q| id(i, q),
                rest_nullable[i + 1],
                |b| next_part(&parts, i, b).map_or(DEAD, |(j, q)| id(j, q)),
            )
        });
        let mut dfa = Table {
            classes,
            class_size,
            representative,
            trans,
            accepting,
            start: id(0, parts[0].start),
        }
        .finish();
        dfa.tail = block.map(|b| Box::new(Tail::Periodic(b)));
        if parts.iter().all(|p| !p.minimizing_pays()) {
            dfa.minimality = Minimality::Nearly;
        }
        Ok(Some(dfa))
    }

    /// The language with the empty string added, when no transition leads
    /// back to the start (then marking it accepting adds nothing else).
    pub fn or_empty(mut self) -> Option<ByteDfa> {
        let start = self.start;
        let table_entry = self.trans.contains(&start);
        let tail_entry = self.tail.as_ref().is_some_and(|t| t.targets(start));
        if table_entry || tail_entry {
            return None;
        }
        self.accepting[start as usize] = true;
        self.forced_byte[start as usize] = None;
        if self.minimality == Minimality::Minimal {
            self.minimality = Minimality::Nearly;
        }
        self.after_accepting = std::sync::OnceLock::new();
        Some(self)
    }

    pub fn start(&self) -> u32 {
        self.start
    }

    pub fn num_states(&self) -> usize {
        self.accepting.len() + self.tail.as_ref().map_or(0, |t| t.states())
    }

    /// Approximate heap size in bytes.
    pub fn memory_bytes(&self) -> usize {
        self.trans.len() * 4
            + self.accepting.len()
            + self.forced_byte.len() * 2
            + self.tail.as_ref().map_or(0, |t| t.memory_bytes())
    }

    /// Each class's size and its smallest byte.
    fn class_bytes(&self) -> (Vec<usize>, Vec<u8>) {
        class_bytes_of(&self.classes, self.stride)
    }

    /// A table of rows over this automaton's byte classes.
    fn table(&self, trans: Vec<u32>, accepting: Vec<bool>, start: u32) -> Table {
        let (class_size, representative) = self.class_bytes();
        Table {
            classes: self.classes,
            class_size,
            representative,
            trans,
            accepting,
            start,
        }
    }

    /// The class of `byte`: bytes of one class step alike from every state.
    pub fn class(&self, byte: u8) -> u8 {
        self.classes[byte as usize]
    }

    #[inline(always)]
    pub fn step(&self, state: u32, byte: u8) -> u32 {
        self.target(state, self.classes[byte as usize] as usize)
    }

    /// `state`'s targets by class: its table row, or for a block state
    /// the row written into `buf`.
    fn row<'a>(&'a self, state: u32, buf: &'a mut Vec<u32>) -> &'a [u32] {
        let at = state as usize * self.stride;
        match self.trans.get(at..at + self.stride) {
            Some(row) => row,
            None => {
                buf.clear();
                buf.extend((0..self.stride).map(|c| self.tail_target(state, c)));
                buf
            }
        }
    }

    /// Where `state` goes on a byte of `class`. A state past the table's
    /// rows is exactly one whose index misses the table, so the bounds check
    /// indexing needs anyway tells block states apart.
    #[inline(always)]
    fn target(&self, state: u32, class: usize) -> u32 {
        match self.trans.get(state as usize * self.stride + class) {
            Some(&t) => t,
            None => self.tail_target(state, class),
        }
    }

    /// Runs `bytes` from `state`; DEAD if any byte leads to the dead state.
    pub fn step_bytes(&self, mut state: u32, bytes: &[u8]) -> u32 {
        for &b in bytes {
            state = self.step(state, b);
            if state == DEAD {
                return DEAD;
            }
        }
        state
    }

    /// A canonical description of the language read from state `q`: the
    /// states reachable from `q`, numbered in breadth-first order (bytes
    /// ascending, the dead state 0), each written as its acceptance and its
    /// transitions as runs of bytes with one target. Equal signatures mean
    /// isomorphic automata, so equal behaviour on every byte string, whatever
    /// DFA they come from. None when it would be longer than `limit` words.
    pub fn residual_signature(&self, q: u32, limit: usize) -> Option<Vec<u32>> {
        // A state writes at least four words (its acceptance, its number of
        // runs, one run). In a long counted repetition every later copy has
        // a state reachable from `q` (each live state reaches the copy's
        // end), so a state far from the last copy is known to pass `limit`
        // without numbering its copies first.
        let past_table = q as usize * self.stride >= self.trans.len();
        if let Some(p) = self.periodic().filter(|_| past_table) {
            if (p.copies() - p.coords(q).0) as usize * 4 > limit {
                return None;
            }
        }
        let mut ids: HashMap<u32, u32> = HashMap::from_iter([(DEAD, 0)]);
        let mut order = vec![q];
        ids.insert(q, 1);
        let mut out = Vec::new();
        // A state's target changes only where the byte class does: reading
        // the first byte of each run of one class gives the same runs of
        // targets as reading all 256 (and numbers new states in the same
        // byte order), without a pass over every byte per state.
        let class_starts: Vec<u8> = (0..=255u8)
            .filter(|&b| b == 0 || self.classes[b as usize] != self.classes[b as usize - 1])
            .collect();
        let mut i = 0;
        while i < order.len() {
            let s = order[i];
            i += 1;
            out.push(self.is_accepting(s) as u32);
            let runs_at = out.len();
            out.push(0);
            let mut prev = u32::MAX;
            for &b in &class_starts {
                let t = self.target(s, self.classes[b as usize] as usize);
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
            if out.len() > limit {
                return None;
            }
        }
        Some(out)
    }

    /// The bytes that can start a non-empty string of the language.
    pub fn first_bytes(&self) -> ByteSet {
        self.live_bytes_from(std::iter::once(self.start))
    }

    /// The bytes that can extend a string of the language into a longer
    /// prefix of one: live out of some accepting state.
    pub fn bytes_after_accepting(&self) -> ByteSet {
        *self.after_accepting.get_or_init(|| {
            let table = (1..self.accepting.len() as u32).filter(|&s| self.accepting[s as usize]);
            let tail = self.tail.iter().flat_map(|t| t.accepting_states());
            self.live_bytes_from(table.chain(tail))
        })
    }

    fn live_bytes_from(&self, states: impl Iterator<Item = u32>) -> ByteSet {
        let mut live_class = vec![false; self.stride];
        let mut buf = Vec::new();
        for s in states {
            for (live, &t) in live_class.iter_mut().zip(self.row(s, &mut buf)) {
                *live |= t != DEAD;
            }
        }
        let mut out = ByteSet::default();
        for b in 0..=255u8 {
            if live_class[self.classes[b as usize] as usize] {
                out.insert(b);
            }
        }
        out
    }

    /// The length of the shortest string after which states `p` and `q`
    /// differ (one dead or accepting and the other not), or `limit + 1` if
    /// no string of at most `limit` bytes tells them apart: then every walk
    /// of at most `limit` bytes sees the same from both.
    /// The search stops after `max_pairs` pairs of states, answering 0 (as
    /// if they differed at once) when it does.
    pub fn distinguishing_length(&self, p: u32, q: u32, limit: usize, max_pairs: usize) -> usize {
        let mut seen: rustc_hash::FxHashSet<(u32, u32)> = Default::default();
        let mut layer = vec![(p, q)];
        let (mut bx, mut by) = (Vec::new(), Vec::new());
        for depth in 0..=limit {
            if seen.len() > max_pairs {
                return 0;
            }
            let mut next = Vec::new();
            for &(x, y) in &layer {
                if x == y || self.alike_in_block(x, y, limit - depth) {
                    continue;
                }
                if self.is_accepting(x) != self.is_accepting(y) {
                    return depth;
                }
                if depth == limit {
                    continue;
                }
                let (rx, ry) = (self.row(x, &mut bx), self.row(y, &mut by));
                // Classes often share targets: skip a pair just seen.
                let mut last = (DEAD, DEAD);
                for (&tx, &ty) in rx.iter().zip(ry) {
                    if (tx == DEAD) != (ty == DEAD) {
                        return depth + 1;
                    }
                    if tx != ty && (tx, ty) != last && seen.insert((tx, ty)) {
                        next.push((tx, ty));
                    }
                    last = (tx, ty);
                }
            }
            if next.is_empty() {
                break;
            }
            layer = next;
        }
        limit + 1
    }

    /// A length up to which no string tells states `p` and `q` apart,
    /// known without a search: for block states in the same place of their
    /// copies, `Periodic::alike_for`; else 0.
    pub fn alike_length(&self, p: u32, q: u32) -> usize {
        let rows = self.accepting.len() as u32;
        match self.periodic() {
            Some(b) if p >= rows && q >= rows => b.alike_for(p, q),
            _ => 0,
        }
    }

    /// For a state of a long counted repetition's block: its copy and
    /// the number of copies. None for a table state.
    pub fn block_copy(&self, q: u32) -> Option<(u32, u32)> {
        let rows = self.accepting.len() as u32;
        let b = self.periodic().filter(|_| q >= rows)?;
        Some((b.coords(q).0, b.copies()))
    }

    /// Block state `q`'s place in copy `copy` (below the number of copies).
    pub fn block_state_in(&self, q: u32, copy: u32) -> u32 {
        let b = self.block();
        debug_assert!(copy < b.copies());
        b.state_at(copy, b.coords(q).1)
    }

    /// Whether `p` and `q` are block states that no string of at most
    /// `len` bytes tells apart (see `Periodic::alike_for`).
    fn alike_in_block(&self, p: u32, q: u32, len: usize) -> bool {
        self.alike_length(p, q) >= len
    }

    /// True if the text read so far is in the language.
    pub fn is_accepting(&self, state: u32) -> bool {
        match self.accepting.get(state as usize) {
            Some(&a) => a,
            None => self.tail().is_accepting(state),
        }
    }

    /// True if `state` accepts and no byte leads on from it: a match ends
    /// there whatever comes next (the end of a literal).
    pub fn is_finished(&self, state: u32) -> bool {
        let mut buf = Vec::new();
        self.is_accepting(state) && self.row(state, &mut buf).iter().all(|&t| t == DEAD)
    }

    pub fn forced_byte(&self, state: u32) -> Option<u8> {
        match self.forced_byte.get(state as usize) {
            Some(&f) => f,
            None => self.tail().forced_byte(state),
        }
    }

    /// The states past the table (a state number past the rows is one).
    fn tail(&self) -> &Tail {
        match &self.tail {
            Some(t) => t,
            None => panic!("a state past the table of an automaton without a tail"),
        }
    }

    /// The block of shared copies, if the states past the table are one.
    fn periodic(&self) -> Option<&Periodic> {
        match self.tail.as_deref() {
            Some(Tail::Periodic(p)) => Some(p),
            _ => None,
        }
    }

    fn block(&self) -> &Periodic {
        self.periodic()
            .expect("a block state of an automaton without a block")
    }

    /// Where `state`, past the table's rows, goes on a byte of `class`
    /// (`target` reads the table first).
    #[cold]
    #[inline(never)]
    fn tail_target(&self, state: u32, class: usize) -> u32 {
        match self.tail() {
            Tail::Periodic(p) => p.target(state, class, self.stride),
            Tail::Sparse(s) => s.target(state, class),
        }
    }

    /// Groups states whose token masks must be equal: states that agree on
    /// acceptance, and on liveness after every string of at most `max_len`
    /// bytes (Moore's partition refinement, stopped after `max_len` rounds or
    /// when stable). A mask only asks whether each token's bytes (at most
    /// `max_len` of them) lead to a live state, so one row serves a class.
    /// Returns a class per state (the dead state in class 0), or None when
    /// the refinement would cost more than `work_limit` steps.
    pub fn mask_classes(&self, max_len: usize, work_limit: usize) -> Option<Vec<u32>> {
        if self.tail.is_some() {
            return None; // it has more states than any refinement takes
        }
        let n = self.num_states();
        let rounds = max_len.min(n);
        if n.saturating_mul(self.stride).saturating_mul(rounds.max(1)) > work_limit {
            return None;
        }
        // Round 0: dead / live-not-accepting / accepting.
        let mut class: Vec<u32> = (0..n)
            .map(|s| {
                if s == 0 {
                    0
                } else if self.accepting[s] {
                    2
                } else {
                    1
                }
            })
            .collect();
        let mut count = class
            .iter()
            .copied()
            .collect::<std::collections::HashSet<_>>()
            .len();
        for _ in 0..rounds {
            let mut ids: HashMap<Vec<u32>, u32> = HashMap::default();
            let mut next = vec![0u32; n];
            for s in 0..n {
                let mut sig = Vec::with_capacity(self.stride + 1);
                sig.push(class[s]);
                sig.extend(
                    (0..self.stride).map(|c| class[self.trans[s * self.stride + c] as usize]),
                );
                let fresh = ids.len() as u32;
                next[s] = *ids.entry(sig).or_insert(fresh);
            }
            let new_count = ids.len();
            class = next;
            if new_count == count {
                break;
            }
            count = new_count;
        }
        Some(class)
    }
}

/// The states of a `ByteDfa` numbered past its table's rows, in one of two
/// layouts that take far less memory than rows would.
#[derive(Clone, Debug)]
enum Tail {
    /// Copies of a long counted repetition sharing one block of rows
    /// (`periodic`).
    Periodic(Periodic),
    /// States with a few live transitions each, as lists (`sparse`).
    Sparse(SparseRows),
}

impl Tail {
    /// The state numbers it takes.
    fn states(&self) -> usize {
        match self {
            Tail::Periodic(p) => p.states(),
            Tail::Sparse(s) => s.len(),
        }
    }

    /// Whether number `q` (past the table) is a state: a block leaves
    /// numbers unused between its copies.
    fn is_state(&self, q: u32) -> bool {
        match self {
            Tail::Periodic(p) => p.is_state(q),
            Tail::Sparse(_) => true,
        }
    }

    fn is_accepting(&self, q: u32) -> bool {
        match self {
            Tail::Periodic(p) => p.is_accepting(q),
            Tail::Sparse(s) => s.is_accepting(q),
        }
    }

    fn forced_byte(&self, q: u32) -> Option<u8> {
        match self {
            Tail::Periodic(p) => p.forced_byte(q),
            Tail::Sparse(s) => s.forced_byte(q),
        }
    }

    /// Whether some transition here leads to table state `q`.
    fn targets(&self, q: u32) -> bool {
        match self {
            Tail::Periodic(p) => p.targets(q),
            Tail::Sparse(s) => s.targets(q),
        }
    }

    /// Accepting states whose live bytes stand for all of its accepting
    /// states' (a block's first copy stands for every copy).
    fn accepting_states(&self) -> Box<dyn Iterator<Item = u32> + '_> {
        match self {
            Tail::Periodic(p) => Box::new(p.accepting_states()),
            Tail::Sparse(s) => Box::new(s.accepting_states()),
        }
    }

    fn memory_bytes(&self) -> usize {
        match self {
            Tail::Periodic(p) => p.memory_bytes(),
            Tail::Sparse(s) => s.memory_bytes(),
        }
    }
}

/// A set of bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ByteSet([u64; 4]);

impl ByteSet {
    pub fn insert(&mut self, b: u8) {
        self.0[b as usize >> 6] |= 1 << (b & 63);
    }

    pub fn contains(&self, b: u8) -> bool {
        self.0[b as usize >> 6] & (1 << (b & 63)) != 0
    }

    pub fn is_empty(&self) -> bool {
        self.0 == [0; 4]
    }

    /// Adds `other`'s bytes; true if that added any.
    pub fn union_with(&mut self, other: &ByteSet) -> bool {
        let before = self.0;
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a |= b;
        }
        self.0 != before
    }

    /// The set as eight 32-bit words.
    pub fn words(&self) -> [u32; 8] {
        let mut out = [0u32; 8];
        for (i, w) in self.0.iter().enumerate() {
            out[2 * i] = *w as u32;
            out[2 * i + 1] = (*w >> 32) as u32;
        }
        out
    }

    pub fn intersects(&self, other: &ByteSet) -> bool {
        self.0.iter().zip(other.0).any(|(a, b)| a & b != 0)
    }
}

/// Which strings [`ByteDfa::product`] keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    And,
    AndNot,
    /// Strings of either (made by `compose_hir` for alternations).
    Or,
}

impl Op {
    /// Whether the pair of states `(qa, qb)` accepts nothing.
    fn dead(self, qa: u32, qb: u32) -> bool {
        match self {
            Op::And => qa == DEAD || qb == DEAD,
            Op::AndNot => qa == DEAD,
            Op::Or => qa == DEAD && qb == DEAD,
        }
    }

    fn accepts(self, in_a: bool, in_b: bool) -> bool {
        match self {
            Op::And => in_a && in_b,
            Op::AndNot => in_a && !in_b,
            Op::Or => in_a || in_b,
        }
    }
}

/// Byte classes refining those of `a` and `b`: one per pair of classes
/// that occurs, with each class's size and a representative byte.
fn joint_classes(a: &ByteDfa, b: &ByteDfa) -> ([u8; 256], Vec<usize>, Vec<u8>) {
    let mut class_ids: HashMap<(u8, u8), u8> = HashMap::default();
    let mut classes = [0u8; 256];
    let mut class_size = Vec::new();
    let mut representative = Vec::new();
    for byte in 0..=255u8 {
        let key = (a.classes[byte as usize], b.classes[byte as usize]);
        let fresh = class_ids.len();
        let c = *class_ids.entry(key).or_insert_with(|| {
            representative.push(byte);
            class_size.push(0);
            fresh as u8
        });
        classes[byte as usize] = c;
        class_size[c as usize] += 1;
    }
    (classes, class_size, representative)
}

/// Where byte `b` goes once part `i` of a concatenation is complete: into
/// the first later part that can start with it, past parts that may match
/// the empty string.
fn next_part(parts: &[&ByteDfa], i: usize, b: u8) -> Option<(usize, u32)> {
    for (j, p) in parts.iter().enumerate().skip(i + 1) {
        let q = p.step(p.start, b);
        if q != DEAD {
            return Some((j, q));
        }
        if !p.is_accepting(p.start) {
            return None;
        }
    }
    None
}

/// Byte classes refining every part's (one part at a time): the class of
/// each byte, each class's size and a byte of each.
fn refined_classes(parts: &[&ByteDfa]) -> ([u8; 256], Vec<usize>, Vec<u8>) {
    let mut classes = parts[0].classes;
    for p in &parts[1..] {
        let mut refined = [0u8; 256];
        let mut pair_ids: HashMap<(u8, u8), u8> = HashMap::default();
        for (b, r) in refined.iter_mut().enumerate() {
            let fresh = pair_ids.len() as u8;
            *r = *pair_ids.entry((classes[b], p.classes[b])).or_insert(fresh);
        }
        classes = refined;
    }
    let count = classes.iter().map(|&c| c as usize + 1).max().unwrap_or(1);
    let (class_size, representative) = class_bytes_of(&classes, count);
    (classes, class_size, representative)
}

/// For byte classes `classes` (numbered below `count`): each class's size
/// and its smallest byte.
fn class_bytes_of(classes: &[u8; 256], count: usize) -> (Vec<usize>, Vec<u8>) {
    let mut class_size = vec![0usize; count];
    let mut representative = vec![0u8; count];
    for b in (0..=255u8).rev() {
        representative[classes[b as usize] as usize] = b;
        class_size[classes[b as usize] as usize] += 1;
    }
    (class_size, representative)
}

/// Refuses a table of `states` rows of `stride` words over the size bound.
fn check_size(states: usize, stride: usize) -> Result<()> {
    if states.saturating_mul(stride).saturating_mul(4) > DFA_SIZE_LIMIT {
        return Err(Error::LimitExceeded(format!(
            "a composed automaton needs a DFA larger than the {} MiB limit",
            DFA_SIZE_LIMIT >> 20
        )));
    }
    Ok(())
}

/// Byte classes where each of `bytes` is a class of its own and the rest
/// share class 0 (with all 256 used, the last one stays alone in class 0):
/// the class of each byte, each class's size and a byte of each.
fn own_classes(bytes: impl Iterator<Item = u8>) -> ([u8; 256], Vec<usize>, Vec<u8>) {
    let mut classes = [0u8; 256];
    let mut representative = vec![0u8];
    let mut class_size = vec![256usize];
    for b in bytes {
        if classes[b as usize] == 0 && representative.len() < 256 {
            classes[b as usize] = representative.len() as u8;
            representative.push(b);
            class_size.push(1);
            class_size[0] -= 1;
        }
    }
    representative[0] = (0..=255u8)
        .find(|&b| classes[b as usize] == 0)
        .expect("at most 255 bytes have classes of their own");
    (classes, class_size, representative)
}

/// A DFA table before pruning: row 0 is the dead state.
struct Table {
    classes: [u8; 256],
    class_size: Vec<usize>,
    representative: Vec<u8>,
    trans: Vec<u32>,
    accepting: Vec<bool>,
    start: u32,
}

impl Table {
    /// Drops the states the start cannot reach (numbering the rest in
    /// breadth-first order).
    fn reachable(self) -> Table {
        let stride = self.representative.len();
        let n = self.accepting.len();
        let mut renumber = vec![u32::MAX; n];
        renumber[DEAD as usize] = DEAD;
        let mut order = vec![self.start];
        renumber[self.start as usize] = 1;
        let mut i = 0;
        while i < order.len() {
            let s = order[i] as usize;
            i += 1;
            for &t in &self.trans[s * stride..][..stride] {
                if renumber[t as usize] == u32::MAX {
                    renumber[t as usize] = order.len() as u32 + 1;
                    order.push(t);
                }
            }
        }
        let mut trans = vec![DEAD; (order.len() + 1) * stride];
        let mut accepting = vec![false; order.len() + 1];
        for (new, &old) in order.iter().enumerate() {
            let (new, old) = (new + 1, old as usize);
            accepting[new] = self.accepting[old];
            for c in 0..stride {
                trans[new * stride + c] = renumber[self.trans[old * stride + c] as usize];
            }
        }
        Table {
            trans,
            accepting,
            start: 1,
            ..self
        }
    }

    /// Merges every state that cannot reach an accepting one into the dead
    /// state; None if the start state is among them (no string matches).
    fn pruned(self) -> Option<ByteDfa> {
        let Table {
            classes,
            class_size,
            representative,
            trans: raw_trans,
            accepting,
            start: start_id,
        } = self;
        let stride = representative.len();
        let n = accepting.len();
        crate::budget::charge_later(raw_trans.len() * crate::budget::TABLE_TRANSITION);
        let live = live_states(&raw_trans, stride, &accepting);
        if !live[start_id as usize] {
            return None;
        }
        let mut renumber = vec![DEAD; n];
        let mut count = 1u32;
        for (old, &is_live) in live.iter().enumerate().skip(1) {
            if is_live {
                renumber[old] = count;
                count += 1;
            }
        }
        let m = count as usize;
        let mut trans = vec![DEAD; m * stride];
        let mut acc = vec![false; m];
        for old in 1..n {
            let new = renumber[old] as usize;
            if new == 0 {
                continue;
            }
            acc[new] = accepting[old];
            for c in 0..stride {
                trans[new * stride + c] = renumber[raw_trans[old * stride + c] as usize];
            }
        }
        Some(
            Table {
                classes,
                class_size,
                representative,
                trans,
                accepting: acc,
                start: renumber[start_id as usize],
            }
            .finish(),
        )
    }

    /// The DFA of a table whose states all reach an accepting one.
    fn finish(self) -> ByteDfa {
        let Table {
            classes,
            class_size,
            representative,
            trans,
            accepting,
            start,
        } = self;
        let stride = representative.len();
        let forced_byte = forced_bytes(&trans, &accepting, &class_size, &representative, true);
        ByteDfa {
            classes,
            stride,
            trans,
            accepting,
            forced_byte,
            start,
            after_accepting: std::sync::OnceLock::new(),
            tail: None,
            minimality: Minimality::Unknown,
        }
    }
}

/// For each row of `rows` (with a state's acceptance): the one byte every
/// continuation must start with, if any. With `dead_first`, row 0 is the
/// dead state (no byte).
fn forced_bytes(
    rows: &[u32],
    accepting: &[bool],
    class_size: &[usize],
    representative: &[u8],
    dead_first: bool,
) -> Vec<Option<u8>> {
    let stride = representative.len();
    (0..accepting.len())
        .map(|s| {
            if (s == 0 && dead_first) || accepting[s] {
                return None;
            }
            let mut live_classes = (0..stride).filter(|&c| rows[s * stride + c] != DEAD);
            match (live_classes.next(), live_classes.next()) {
                (Some(c), None) if class_size[c] == 1 => Some(representative[c]),
                _ => None,
            }
        })
        .collect()
}

/// Whether every string `pattern` matches is nonempty (false where it
/// does not parse): read off its syntax tree, no automaton built.
pub fn matches_only_nonempty(pattern: &str) -> bool {
    parse_utf8(pattern).is_some_and(|h| h.properties().minimum_len().is_some_and(|n| n > 0))
}

/// `pattern`'s syntax tree as regex-automata would parse it for
/// the DFA builders (Unicode, UTF-8 only); None where it does not parse.
fn parse_utf8(pattern: &str) -> Option<Hir> {
    regex_syntax::ParserBuilder::new()
        .unicode(true)
        .utf8(true)
        .build()
        .parse(pattern)
        .ok()
}

/// The NFA regex-automata determinizes: bounded in size, and without
/// capture states (a DFA reports no groups; each group would add two
/// ε-states that every closure through it walks).
pub(super) fn thompson_config() -> thompson::Config {
    thompson::Config::new()
        .nfa_size_limit(Some(NFA_SIZE_LIMIT))
        .which_captures(thompson::WhichCaptures::None)
}

pub(super) fn build_error(pattern: &str, e: &dyn std::error::Error) -> Error {
    let mut msg = format!("invalid regex {pattern:?}: {e}");
    let mut src = e.source();
    while let Some(s) = src {
        msg.push_str(&format!(": {s}"));
        src = s.source();
    }
    if msg.contains("exceeded") || msg.contains("size limit") {
        Error::LimitExceeded(msg)
    } else {
        Error::Compile(msg)
    }
}

/// Backward reachability from accepting states.
fn live_states(trans: &[u32], stride: usize, accepting: &[bool]) -> Vec<bool> {
    let n = accepting.len();
    // Predecessors in one flat array: `preds[start[t]..start[t + 1]]`.
    let mut start = vec![0u32; n + 1];
    for s in 1..n {
        for &t in &trans[s * stride..][..stride] {
            start[t as usize + 1] += 1;
        }
    }
    for t in 0..n {
        start[t + 1] += start[t];
    }
    let mut fill = start.clone();
    let mut preds = vec![0u32; start[n] as usize];
    for s in 1..n {
        for &t in &trans[s * stride..][..stride] {
            preds[fill[t as usize] as usize] = s as u32;
            fill[t as usize] += 1;
        }
    }
    let mut live = accepting.to_vec();
    let mut work: Vec<usize> = (0..n).filter(|&s| live[s]).collect();
    while let Some(t) = work.pop() {
        for &p in &preds[start[t] as usize..start[t + 1] as usize] {
            if !live[p as usize] {
                live[p as usize] = true;
                work.push(p as usize);
            }
        }
    }
    live[0] = false;
    live
}

#[cfg(test)]
pub(crate) mod tests {
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
                .flat_map(|s: &Vec<u8>| {
                    alphabet.iter().map(move |&b| [s.as_slice(), &[b]].concat())
                })
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
}
