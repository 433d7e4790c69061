//! Concatenations whose parts overlap, determinized over the parts' own
//! automata.
//!
//! `(?:\S+\s+){0,49}\S+` (at most 50 words) cannot be joined part after
//! part: after a word and a space, the next word may start a new copy or
//! the last part. regex-automata determinized the whole pattern over its
//! Unicode classes in 15 ms; over the parts' automata, a state is the set
//! of (part, state) pairs still alive, two or three of them here.
//! Repetitions whose copies overlap (JSON text: `\s` and `\S` both start
//! with `\` for escapes) are built the same way, over (copy, state) pairs.
//!
//! No pruning pass follows: every state of a part's automaton can finish
//! its part (`ByteDfa`'s invariant), and a part or copy it finishes is
//! followed by the next up to the last (a copy before `min` always has a
//! next one), so every set of live pairs can reach an accepting set, and an
//! empty set is the dead state.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use super::concat::refined_classes;
use super::table::Table;
use super::{ByteDfa, Result, DEAD, DFA_SIZE_LIMIT};

/// Bound on the sets built before giving up (the caller then builds the
/// pattern whole).
const MAX_SETS: usize = 1 << 16;

/// Budget steps per pair of a set built: closed, sorted, hashed, stored.
const SET_STEPS: usize = 16;

/// Distinct steps a set remembers while its classes are stepped (a scan
/// each: a few targets are the common case).
const MAX_SEEN_STEPS: usize = 8;

/// A set of (part, state) pairs, sorted.
type Set = Vec<(u32, u32)>;

/// The parts one after another (the languages concatenated), by a subset
/// construction; None where it needs more than `MAX_SETS` states.
pub(super) fn concat_overlapping(parts: &[&ByteDfa]) -> Result<Option<ByteDfa>> {
    let (classes, class_size, representative) = refined_classes(parts);
    let last = parts.len() - 1;
    let step = |(p, q): (u32, u32), byte: u8| (p, parts[p as usize].step(q, byte));
    // Where a part accepts, the next one may start (and so on past parts
    // that match the empty string).
    let follow = |(p, q): (u32, u32)| {
        ((p as usize) < last && parts[p as usize].is_accepting(q))
            .then(|| (p + 1, parts[p as usize + 1].start))
    };
    let ends = |(p, q): (u32, u32)| p as usize == last && parts[last].is_accepting(q);
    let start = (0, parts[0].start);
    Ok(determinize(start, step, follow, ends, &representative)?
        .map(|(trans, accepting)| Table {
            classes,
            class_size,
            representative,
            trans,
            accepting,
            start: 1,
        })
        .map(Table::finish))
}

/// `y` repeated `min` to `max` times (None: unbounded) when copies may
/// overlap, over (copy, state) pairs (unbounded copies stop counting at
/// `min`); None where `y` matches the empty string or the construction
/// grows past `MAX_SETS`.
pub(super) fn repeat_overlapping(
    y: &ByteDfa,
    min: u32,
    max: Option<u32>,
) -> Result<Option<ByteDfa>> {
    if y.is_accepting(y.start) || max == Some(0) {
        return Ok(None);
    }
    let (class_size, representative) = y.class_bytes();
    let step = |(i, q): (u32, u32), byte: u8| (i, y.step(q, byte));
    let follow = |(i, q): (u32, u32)| {
        let next = match max {
            Some(mx) => (i + 1 < mx).then_some(i + 1),
            None => Some((i + 1).min(min)),
        };
        next.filter(|_| y.is_accepting(q)).map(|n| (n, y.start))
    };
    let ends = |(i, q): (u32, u32)| y.is_accepting(q) && i + 1 >= min;
    let Some((trans, mut accepting)) =
        determinize((0, y.start), step, follow, ends, &representative)?
    else {
        return Ok(None);
    };
    // The start set is only ever the start: it accepts the empty string.
    accepting[1] = min == 0;
    Ok(Some(
        Table {
            classes: y.classes,
            class_size,
            representative,
            trans,
            accepting,
            start: 1,
        }
        .finish(),
    ))
}

/// The subset construction from `start`: each set is closed under
/// `follow` (a pair that may also begin the next part or copy), and
/// accepts where some pair `ends`. The table's rows and acceptance, state
/// 1 the start; None past `MAX_SETS` sets or the table size bound. Each set
/// charges the compile budget for the pairs it steps: sets of nested counts
/// (`((a{1,100}){1,100}){1,100}`) hold thousands of pairs.
fn determinize(
    start: (u32, u32),
    step: impl Fn((u32, u32), u8) -> (u32, u32),
    follow: impl Fn((u32, u32)) -> Option<(u32, u32)>,
    ends: impl Fn((u32, u32)) -> bool,
    representative: &[u8],
) -> Result<Option<(Vec<u32>, Vec<bool>)>> {
    // Closes `set` under `follow`; small sets (the usual two or three
    // pairs) are searched in place, large ones through a hash set.
    let mut seen: HashSet<(u32, u32)> = HashSet::default();
    let mut close = |set: &mut Set| {
        seen.clear();
        let mut hashed = false;
        let mut i = 0;
        while i < set.len() {
            if !hashed && set.len() > 16 {
                seen.extend(set.iter().copied());
                hashed = true;
            }
            if let Some(next) = follow(set[i]) {
                let new = if hashed {
                    seen.insert(next)
                } else {
                    !set.contains(&next)
                };
                if new {
                    set.push(next);
                }
            }
            i += 1;
        }
        set.sort_unstable();
        set.dedup();
    };
    let mut first = vec![start];
    close(&mut first);
    let mut ids: HashMap<Set, u32> = HashMap::from_iter([(first.clone(), 1)]);
    let mut sets: Vec<Set> = vec![first];
    let mut trans = vec![DEAD; representative.len()];
    let mut accepting = vec![false];
    let mut next = 0;
    let mut set: Set = Vec::new();
    let mut to: Set = Vec::new();
    // The classes stepped so far from this set, each as its pairs' targets
    // before closing, and the state it led to: classes that move every pair
    // alike (most of a Unicode class's) are closed and looked up once.
    let mut seen_steps: Vec<(Set, u32)> = Vec::new();
    while next < sets.len() {
        set.clear();
        set.extend_from_slice(&sets[next]);
        next += 1;
        crate::budget::charge_n(
            set.len() * (representative.len() + 1) * crate::budget::TABLE_TRANSITION,
        )?;
        accepting.push(set.iter().any(|&e| ends(e)));
        seen_steps.clear();
        for &byte in representative {
            to.clear();
            to.extend(
                set.iter()
                    .map(|&e| step(e, byte))
                    .filter(|&(_, q)| q != DEAD),
            );
            if to.is_empty() {
                trans.push(DEAD);
                continue;
            }
            if let Some((_, id)) = seen_steps.iter().find(|(s, _)| *s == to) {
                trans.push(*id);
                continue;
            }
            let stepped = to.clone();
            close(&mut to);
            // Closing, sorting (a few steps per comparison, log n of them
            // per element: the sets of nested counts run to thousands),
            // hashing and storing the new set.
            let log = usize::BITS - to.len().leading_zeros();
            crate::budget::charge_n(to.len() * (SET_STEPS + 2 * log as usize))?;
            let id = match ids.get(to.as_slice()) {
                Some(&id) => id,
                None => {
                    let id = sets.len() as u32 + 1;
                    ids.insert(to.clone(), id);
                    sets.push(to.clone());
                    id
                }
            };
            if seen_steps.len() < MAX_SEEN_STEPS {
                seen_steps.push((stepped, id));
            }
            trans.push(id);
        }
        if sets.len() > MAX_SETS || trans.len() * 4 > DFA_SIZE_LIMIT {
            return Ok(None);
        }
    }
    Ok(Some((trans, accepting)))
}
