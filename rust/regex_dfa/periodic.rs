//! Long counted repetitions without their table.
//!
//! `y{min,max}` with a large `max` is a chain of copies of `y`, and every
//! copy from `min` up to the one before last behaves alike: it accepts where
//! `y` does and goes on into the next copy. Those copies share one block of
//! rows (`Periodic`); a state's copy and place in it follow from its number.
//! `maxLength: 32767` is 32767 copies of a 15-state character automaton: as
//! a table, 60 MiB written in 200 ms; as a block, 15 rows.

use super::table::{check_size, forced_bytes};
use super::tail::Tail;
use super::{ByteDfa, Error, Minimality, Result, DEAD};

/// Copies laid out as rows cost this many bytes before their block is kept
/// shared instead: 32 copies of a JSON string character. Block states step
/// as fast as table rows, and a table of a few hundred copies costs
/// milliseconds to write and to fail to minimize.
const PERIODIC_BYTES: usize = 64 << 10;

/// A block target: in the same copy, state `code & !TAG` of the block.
const SAME: u32 = 1 << 30;
/// A block target: in the next copy, state `code & !TAG` of the block.
const NEXT: u32 = 2 << 30;
const TAG: u32 = 3 << 30;

/// States `first..first + (copies << shift)` of a `ByteDfa`: copy `j`'s
/// state `s` (`0..m`) is `first + (j << shift) + s`. A power of two per copy
/// spares a division per step (numbers `m..1 << shift` of a copy are unused).
#[derive(Clone, Debug)]
pub(super) struct Periodic {
    first: u32,
    copies: u32,
    m: u32,
    shift: u32,
    /// `template[s * stride + class]`: a table state (DEAD included), or a
    /// block state tagged `SAME` or `NEXT`.
    template: Vec<u32>,
    accepting: Vec<bool>,
    forced_byte: Vec<Option<u8>>,
    /// Where a step into the next copy goes from the last copy, by the
    /// block state it would have reached (a table state, or DEAD).
    after_last: Vec<u32>,
}

/// The power of two a copy of `m` states takes in a block's numbering.
fn copy_shift(m: usize) -> u32 {
    m.next_power_of_two().trailing_zeros()
}

/// Bound on the states an automaton with a block may number (the block's
/// copies take no memory): numbers stay clear of the block codes' tags.
const MAX_STATES: usize = 1 << 30;

/// Refuses an automaton numbering more than `MAX_STATES` states.
pub(super) fn check_states(states: usize) -> Result<()> {
    if states > MAX_STATES {
        return Err(Error::LimitExceeded(format!(
            "a counted repetition needs more than {MAX_STATES} automaton states"
        )));
    }
    Ok(())
}

/// A block row's entry, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Code {
    /// A table state (DEAD included), the same from every copy.
    Table(u32),
    /// This block state in the same copy.
    Same(u32),
    /// This block state in the next copy.
    Next(u32),
}

impl Periodic {
    /// A block of `copies` copies of `accepting.len()` states starting at
    /// state `first`; `rows[s * stride + class]` as `Code`s.
    pub(super) fn new(
        first: u32,
        copies: u32,
        rows: &[Code],
        accepting: Vec<bool>,
        after_last: Vec<u32>,
        classes: &JoinedClasses,
    ) -> Periodic {
        let m = accepting.len() as u32;
        let template: Vec<u32> = rows
            .iter()
            .map(|&c| match c {
                Code::Table(q) => q,
                Code::Same(t) => SAME | t,
                Code::Next(t) => NEXT | t,
            })
            .collect();
        Periodic {
            first,
            copies,
            m,
            shift: copy_shift(m as usize),
            forced_byte: block_forced_bytes(&template, &accepting, classes),
            template,
            accepting,
            after_last,
        }
    }

    /// Whether some block row goes to table state `q`.
    pub(super) fn targets(&self, q: u32) -> bool {
        self.template.contains(&q)
    }

    pub(super) fn copies(&self) -> u32 {
        self.copies
    }

    /// Block state `s`'s row entry for `class`.
    pub(super) fn code(&self, s: u32, class: usize, stride: usize) -> Code {
        let code = self.template[s as usize * stride + class];
        match code & TAG {
            0 => Code::Table(code),
            SAME => Code::Same(code & !TAG),
            _ => Code::Next(code & !TAG),
        }
    }

    /// The copy and the place in it of block state `state`.
    pub(super) fn coords(&self, state: u32) -> (u32, u32) {
        let v = state - self.first;
        (v >> self.shift, v & ((1 << self.shift) - 1))
    }

    /// The state at place `s` of copy `copy`: past the last copy, where
    /// the last one's steps into the next go.
    pub(super) fn state_at(&self, copy: u32, s: u32) -> u32 {
        if copy < self.copies {
            self.first + (copy << self.shift) + s
        } else {
            self.after_last[s as usize]
        }
    }

    pub(super) fn target(&self, state: u32, class: usize, stride: usize) -> u32 {
        let v = state - self.first;
        let s = v & ((1 << self.shift) - 1);
        let code = self.template[s as usize * stride + class];
        let t = code & !TAG;
        match code & TAG {
            0 => code,
            SAME => state - s + t,
            _ if (v >> self.shift) + 1 < self.copies => state - s + (1 << self.shift) + t,
            _ => self.after_last[t as usize],
        }
    }

    fn slot(&self, state: u32) -> usize {
        self.coords(state).1 as usize
    }

    /// Whether block number `state` is a state: numbers between a copy's
    /// states and the next copy are none.
    pub(super) fn is_state(&self, state: u32) -> bool {
        self.slot(state) < self.m as usize
    }

    /// A length up to which block states `p` and `q` agree on every
    /// string: in the same place of their copies, they step alike (to the
    /// same place of the next copies, or out of the block to the same
    /// state) for as long as both stay in the block, which is at least as
    /// many bytes as the later one has copies after it. 0 for different
    /// places.
    pub(super) fn alike_for(&self, p: u32, q: u32) -> usize {
        if self.slot(p) != self.slot(q) {
            return 0;
        }
        let later = (p.max(q) - self.first) >> self.shift;
        (self.copies - 1 - later) as usize
    }

    /// The numbers the block takes.
    pub(super) fn states(&self) -> usize {
        (self.copies as usize) << self.shift
    }

    /// The states the block stands for (`states` less the unused numbers):
    /// size bounds count these, as a table would have them.
    pub(super) fn used_states(&self) -> usize {
        self.copies as usize * self.m as usize
    }

    pub(super) fn is_accepting(&self, state: u32) -> bool {
        self.accepting[self.slot(state)]
    }

    /// Whether block state `s` (of any copy) accepts.
    pub(super) fn accepts_at(&self, s: u32) -> bool {
        self.accepting[s as usize]
    }

    pub(super) fn forced_byte(&self, state: u32) -> Option<u8> {
        self.forced_byte[self.slot(state)]
    }

    /// The accepting states of the first copy: every copy's accepting states
    /// have the same live bytes.
    pub(super) fn accepting_states(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.m)
            .filter(|&s| self.accepting[s as usize])
            .map(|s| self.first + s)
    }

    pub(super) fn memory_bytes(&self) -> usize {
        self.template.len() * 4 + self.accepting.len() * 3
    }

    /// This block of `part` inside a concatenation, whose byte classes
    /// refine the part's (`joined`): table states are renumbered by `table_id`, the block starts
    /// at `first`, accepting states are kept if `accepts_at_end`, and where
    /// an accepting state has no transition, `after_end` names where a byte
    /// goes (into a later part), if anywhere.
    pub(super) fn joined(
        &self,
        part: &ByteDfa,
        joined: &JoinedClasses,
        first: u32,
        table_id: impl Fn(u32) -> u32,
        accepts_at_end: bool,
        after_end: impl Fn(u8) -> u32,
    ) -> Periodic {
        let stride = joined.representative.len();
        let mut template = Vec::with_capacity(self.m as usize * stride);
        for s in 0..self.m as usize {
            for &rep in joined.representative {
                let code = self.template[s * part.stride + part.class(rep) as usize];
                template.push(match code {
                    _ if code & TAG != 0 => code,
                    DEAD if self.accepting[s] => after_end(rep),
                    _ => table_id(code),
                });
            }
        }
        let accepting: Vec<bool> = self
            .accepting
            .iter()
            .map(|&a| a && accepts_at_end)
            .collect();
        Periodic {
            first,
            copies: self.copies,
            m: self.m,
            shift: self.shift,
            forced_byte: block_forced_bytes(&template, &accepting, joined),
            template,
            accepting,
            after_last: self.after_last.iter().map(|&q| table_id(q)).collect(),
        }
    }
}

/// A DFA's byte classes, each class's size and a byte of each.
pub(super) struct JoinedClasses<'a> {
    pub class_size: &'a [usize],
    pub representative: &'a [u8],
}

fn block_forced_bytes(
    template: &[u32],
    accepting: &[bool],
    classes: &JoinedClasses,
) -> Vec<Option<u8>> {
    forced_bytes(
        template,
        accepting,
        classes.class_size,
        classes.representative,
        false,
    )
}

impl ByteDfa {
    /// The same automaton with every state a table row.
    pub fn materialized(&self) -> Result<ByteDfa> {
        let tail = self.tail();
        let n = self.num_states();
        let used_states = match tail {
            Tail::Periodic(block) => block.used_states(),
            Tail::Sparse(s) => s.len(),
            // Far more than any table holds: refused below.
            Tail::Records(_) => usize::MAX / 2,
        };
        check_size(self.accepting.len() + used_states, self.stride)?;
        let mut trans = Vec::with_capacity(n * self.stride);
        trans.extend_from_slice(&self.trans);
        let mut accepting = self.accepting.clone();
        for q in self.accepting.len() as u32..n as u32 {
            let used = tail.is_state(q);
            trans.extend((0..self.stride).map(|c| if used { self.target(q, c) } else { DEAD }));
            accepting.push(used && self.is_accepting(q));
        }
        self.table(trans, accepting, self.start)
            .reachable()
            .pruned()
            .ok_or_else(|| Error::Compile("a repetition matches no string".into()))
    }

    /// `y` repeated `min` to `max` times (None: no upper bound), built
    /// directly when that is deterministic: `y` does not match the empty
    /// string and no byte that extends an accepted string of `y` can start
    /// one. A state is then (copies completed, state in the current copy).
    /// None when not deterministic.
    pub fn repeat(y: &ByteDfa, min: u32, max: Option<u32>) -> Result<Option<Self>> {
        Self::repeat_sharing(y, min, max, PERIODIC_BYTES)
    }

    /// `repeat`, sharing a block of copies once laying them out would
    /// take `block_bytes` or more.
    pub(super) fn repeat_sharing(
        y: &ByteDfa,
        min: u32,
        max: Option<u32>,
        block_bytes: usize,
    ) -> Result<Option<Self>> {
        if y.tail.is_some() {
            return Self::repeat_sharing(&y.materialized()?, min, max, block_bytes);
        }
        if y.is_accepting(y.start) {
            return Ok(None);
        }
        if y.bytes_after_accepting().intersects(&y.first_bytes()) {
            return super::subset::repeat_overlapping(y, min, max);
        }
        let stride = y.stride;
        let m = y.num_states() - 1; // live states of y
                                    // Copies: completed count 0..levels; unbounded counts stop at `min`.
        let levels = match max {
            Some(mx) => mx as usize,
            None => min as usize + 1,
        };
        // Copies `min..levels - 1` share a block (the last has no next).
        let (a, b) = match max {
            Some(_)
                if levels > min as usize + 1
                    && (levels - 1 - min as usize) * m * stride * 4 >= block_bytes =>
            {
                (min as usize, levels - 1)
            }
            _ => (levels, levels),
        };
        let shared = b - a;
        let rows = 2 + (levels - shared) * m;
        let shift = copy_shift(m);
        // The rows are bounded in bytes; the block only in state numbers.
        check_size(rows, stride)?;
        check_states(rows + (shared << shift))?;
        // State 1 is the start; table copies are numbered in order, the
        // block (copy `a + j`, state s of y) is `rows + (j << shift) + s - 1`.
        let id = |i: usize, s: u32| -> u32 {
            if s == DEAD {
                return DEAD;
            }
            let slot = match i {
                _ if i < a => i,
                _ if i >= b => i - shared,
                _ => return (rows + ((i - a) << shift)) as u32 + s - 1,
            };
            (2 + slot * m) as u32 + s - 1
        };
        let next_copy = |i: usize| match max {
            Some(mx) => (i + 1 < mx as usize).then_some(i + 1),
            None => Some((i + 1).min(min as usize)),
        };
        let start_row = &y.trans[y.start as usize * stride..][..stride];
        let mut trans = vec![DEAD; rows * stride];
        let mut accepting = vec![false; rows];
        accepting[1] = min == 0;
        if levels > 0 {
            for c in 0..stride {
                trans[stride + c] = id(0, start_row[c]);
            }
        }
        for i in (0..a).chain(b..levels) {
            for s in 1..=m as u32 {
                let here = id(i, s) as usize;
                let done = y.is_accepting(s);
                accepting[here] = done && i + 1 >= min as usize;
                for c in 0..stride {
                    let t = y.trans[s as usize * stride + c];
                    trans[here * stride + c] = match (t, next_copy(i)) {
                        (DEAD, Some(next)) if done => id(next, start_row[c]),
                        (DEAD, _) => DEAD,
                        _ => id(i, t),
                    };
                }
            }
        }
        let table = y.table(trans, accepting, 1);
        let periodic = (shared > 0).then(|| {
            // A block copy accepts where y does (it is past `min`) and
            // always has a next copy.
            let mut codes = Vec::with_capacity(m * stride);
            for s in 1..=m as u32 {
                let row = &y.trans[s as usize * stride..][..stride];
                for (&t, &next) in row.iter().zip(start_row) {
                    codes.push(match t {
                        DEAD if y.is_accepting(s) && next != DEAD => Code::Next(next - 1),
                        DEAD => Code::Table(DEAD),
                        _ => Code::Same(t - 1),
                    });
                }
            }
            let accepting: Vec<bool> = (1..=m as u32).map(|s| y.is_accepting(s)).collect();
            let classes = JoinedClasses {
                class_size: &table.class_size,
                representative: &table.representative,
            };
            let after_last = (1..=m as u32).map(|s| id(b, s)).collect();
            Periodic::new(
                rows as u32,
                shared as u32,
                &codes,
                accepting,
                after_last,
                &classes,
            )
        });
        // Every (copy, state) can finish its copy and the copies still
        // needed, so no pruning pass is needed.
        let mut dfa = table.finish();
        dfa.tail = periodic.map(|p| Box::new(Tail::Periodic(p)));
        // Copies of a minimal `y` joined without overlap, as in
        // `concat_all`: states of one copy differ as `y`'s do, and copies
        // by the count still to read (`maxLength: 4096` over JSON text:
        // 11,053 states, 11,049 minimized, in 10-20 ms).
        if !y.minimizing_pays() {
            dfa.minimality = Minimality::Nearly;
        }
        Ok(Some(dfa))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::tests::same_language;
    use super::*;

    pub(crate) fn d(p: &str) -> ByteDfa {
        ByteDfa::new(p).unwrap()
    }

    /// `ch{min,max}` with every copy it can share in a block.
    pub(crate) fn shared(ch: &str, min: u32, max: u32) -> ByteDfa {
        let r = ByteDfa::repeat_sharing(&d(ch), min, Some(max), 0)
            .unwrap()
            .unwrap();
        assert_eq!(r.periodic().is_some(), max > min + 1, "{ch}{{{min},{max}}}");
        r
    }

    /// Every state the start reaches on `alphabet`, breadth first, with
    /// a string that leads there.
    fn reachable(d: &ByteDfa, alphabet: &[u8]) -> Vec<(u32, Vec<u8>)> {
        let mut seen = vec![(d.start(), Vec::new())];
        let mut i = 0;
        while i < seen.len() {
            for &b in alphabet {
                let t = d.step(seen[i].0, b);
                if t != DEAD && seen.iter().all(|(q, _)| *q != t) {
                    let path = [&seen[i].1[..], &[b]].concat();
                    seen.push((t, path));
                }
            }
            i += 1;
        }
        seen
    }

    const CH: &str = "[ab]|\\\\[nu]|é";
    const ALPHABET: &[u8] = b"ab\\nu\xc3\xa9";

    #[test]
    fn shared_copies_keep_the_language() {
        for (min, max) in [(0, 2), (0, 5), (1, 4), (2, 5), (3, 4), (0, 1)] {
            let r = shared(CH, min, max);
            let whole = d(&format!("(?:{CH}){{{min},{max}}}"));
            same_language(&r, &whole, ALPHABET, 7);
        }
    }

    #[test]
    fn block_states_answer_like_table_states() {
        let r = shared(CH, 1, 9);
        let states = reachable(&r, ALPHABET);
        assert!(states.iter().any(|&(q, _)| q as usize >= r.accepting.len()));
        for &(q, _) in &states {
            // A forced byte is the only byte that does not kill the state.
            let live: Vec<u8> = (0..=255u8).filter(|&b| r.step(q, b) != DEAD).collect();
            let forced = match live[..] {
                [b] if !r.is_accepting(q) => Some(b),
                _ => None,
            };
            assert_eq!(r.forced_byte(q), forced, "state {q}");
        }
        // Residual languages: canonical, so equal across the two layouts
        // exactly when the states are the same state.
        let table = r.materialized().unwrap();
        for (q, path) in &states {
            assert_eq!(
                r.residual_signature(*q, 1 << 20),
                table.residual_signature(table.step_bytes(table.start(), path), 1 << 20)
            );
        }
        let after: Vec<u8> = (0..=255u8)
            .filter(|&b| r.bytes_after_accepting().contains(b))
            .collect();
        assert_eq!(after, b"\\ab\xc3");
        // Two states one copy apart differ only near the end of the count.
        let (p, q) = (
            r.step_bytes(r.start(), b"a"),
            r.step_bytes(r.start(), b"aa"),
        );
        assert_eq!(r.distinguishing_length(p, q, 20, 1 << 16), 8);
    }

    #[test]
    fn far_copies_read_every_short_string_as_the_first_copy() {
        // `first_alike_copy` moves a block state to its place in copy 0
        // only when it has more than `depth` copies after it; then both
        // read every string of at most `depth` bytes alike (checked by
        // brute force over the alphabet, and by the search).
        let r = shared(CH, 2, 14);
        let depth = 4;
        let strings = super::super::tests::all_strings(ALPHABET, depth);
        let mut moved = 0;
        for (q, _) in reachable(&r, ALPHABET) {
            let first = r.first_alike_copy(q, depth);
            let Some((copy, copies)) = r.block_copy(q) else {
                assert_eq!(first, q, "a table state stays");
                continue;
            };
            if (copies - 1 - copy) as usize <= depth {
                assert_eq!(first, q, "a copy {copy} of {copies} stays");
                continue;
            }
            assert_eq!(r.block_copy(first), Some((0, copies)));
            moved += (first != q) as usize;
            for s in &strings {
                let (a, b) = (r.step_bytes(q, s), r.step_bytes(first, s));
                assert_eq!(a == DEAD, b == DEAD, "{s:?} from {q} and {first}");
                assert!(a == DEAD || r.is_accepting(a) == r.is_accepting(b));
            }
            assert!(r.distinguishing_length(q, first, depth, 1 << 16) > depth);
        }
        assert!(moved > 0, "some states move");
    }

    #[test]
    fn shared_copies_join_other_parts() {
        const CH: &str = "a|\\\\n";
        let block = shared(CH, 0, 3);
        let (quote, tail, x) = (d("\""), d("y*"), d("x?"));
        for (parts, whole) in [
            (vec![&quote, &block, &quote], format!("\"(?:{CH}){{0,3}}\"")),
            (vec![&x, &block, &tail], format!("x?(?:{CH}){{0,3}}y*")),
            (vec![&block, &x], format!("(?:{CH}){{0,3}}x?")),
        ] {
            let joined = ByteDfa::concat_all(&parts).unwrap().unwrap();
            assert!(joined.periodic().is_some());
            same_language(&joined, &d(&whole), b"a\\nxy\"", 8);
        }
        // A second block is laid out as a table.
        let other = shared("c", 1, 4);
        let joined = ByteDfa::concat_all(&[&block, &quote, &other])
            .unwrap()
            .unwrap();
        let whole = d(&format!("(?:{CH}){{0,3}}\"c{{1,4}}"));
        same_language(&joined, &whole, b"a\\n\"c", 9);
        // A repetition of an automaton with a block.
        let word = ByteDfa::concat(&block, &d(";")).unwrap().unwrap();
        let again = ByteDfa::repeat(&word, 0, Some(3)).unwrap().unwrap();
        let whole = d(&format!("(?:(?:{CH}){{0,3}};){{0,3}}"));
        same_language(&again, &whole, b"a;", 14);
    }

    #[test]
    fn long_counts_are_cheap() {
        // A JSON string of at most 1 << 20 characters: a few hundred rows.
        let ch = r#"[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})"#;
        let over = ByteDfa::repeat(&d(ch), 0, Some(1 << 28));
        assert!(over.is_err(), "numbers past the bound on states");
        let huge = ByteDfa::repeat(&d(ch), 0, Some(1 << 20)).unwrap().unwrap();
        assert!(huge.memory_bytes() < 1 << 16, "{}", huge.memory_bytes());
        let body = ByteDfa::repeat(&d(ch), 0, Some(20_000)).unwrap().unwrap();
        assert!(body.memory_bytes() < 1 << 16, "{}", body.memory_bytes());
        let q = d("\"");
        let s = ByteDfa::concat_all(&[&q, &body, &q]).unwrap().unwrap();
        let text = |n: usize| format!("\"{}\"", "é\\u00e9x".repeat(n / 3));
        let end = s.step_bytes(s.start(), text(19_999).as_bytes());
        assert!(end != DEAD && s.is_accepting(end));
        assert_eq!(s.step_bytes(s.start(), text(20_001).as_bytes()), DEAD);
    }
}
