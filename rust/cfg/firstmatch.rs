//! The first-match DFA of a Lark terminal whose negative lookaheads each
//! test one byte: the character right after them.
//!
//! Python's `re.match` tries a pattern's threads in order (earlier
//! alternatives first, greedy repeats before leaving them, lazy ones after)
//! and reports the first thread that matches. A DFA follows that order by
//! keeping its threads as an ordered list, as a backtracking-free NFA
//! simulation does: each state is the list of NFA threads still alive, in
//! priority order, and once a thread matches, the threads after it are
//! dropped (Python would never get to them).
//!
//! A negative lookahead `(?!C)` of one character class is an epsilon move
//! that may be taken only when the next byte is outside `C`'s first bytes
//! (or the text ends); `lookaround` takes only classes whose first bytes
//! tell their characters apart.
//! The next byte is the one the DFA is about to read, so the closure of a
//! state is computed per byte read (per which lookaheads that byte lets
//! through) and the lookahead is decided exactly, wherever it sits in the
//! pattern and whatever the order of its alternatives. Whether a match may
//! end in a state then depends on the byte after it: the state's end
//! condition lists the bytes it may not end before.
//!
//! The lookaheads reach this module as empty named groups (`lookaround`
//! rewrites them): an NFA keeps a group's opening as an epsilon state of
//! its own, which is where the condition is checked.

use regex_automata::nfa::thompson::{self, State, WhichCaptures, NFA};
use regex_automata::util::primitives::StateID;
use regex_automata::util::syntax;
use regex_automata::PatternID;
use rustc_hash::FxHashMap as HashMap;

use crate::error::{Error, Result};
use crate::regex_dfa::{ByteDfa, ByteSet, DEAD};

/// Per DFA state, the bytes a match ending there may not precede.
pub type EndConditions = Box<[ByteSet]>;

/// The name of the empty group that stands for lookahead `k`.
pub fn group_name(k: usize) -> String {
    format!("maskparlook{k}")
}

/// At most this many distinct lookahead classes per terminal (a byte's
/// verdicts on all of them form a bit set).
const MAX_CLASSES: usize = 32;

/// Bound on a terminal's DFA states.
const MAX_STATES: usize = 1 << 16;

/// Bytes a terminal can read: text is UTF-8, which never holds 0xF8..=0xFF.
const ALPHABET_END: u8 = 0xF8;

/// The first-match DFA of `pattern`, in which empty group `group_name(k)`
/// is a negative lookahead: the next byte may not be in `forbidden[k]`;
/// and per state the bytes a match may not end before. None when it
/// matches no string. `re` is the terminal as written, for errors.
pub fn build(
    re: &str,
    pattern: &str,
    forbidden: &[ByteSet],
) -> Result<Option<(ByteDfa, EndConditions)>> {
    let mut classes: Vec<ByteSet> = forbidden.to_vec();
    classes.sort_unstable_by_key(|c| c.words());
    classes.dedup();
    if classes.len() > MAX_CLASSES {
        return Err(Error::LimitExceeded(format!(
            "regex {re:?} has lookaheads of more than {MAX_CLASSES} distinct classes"
        )));
    }
    let nfa = thompson::Compiler::new()
        .syntax(syntax::Config::new().unicode(true).utf8(false))
        .configure(
            thompson::Config::new()
                .which_captures(WhichCaptures::All)
                .nfa_size_limit(Some(NFA_SIZE_LIMIT)),
        )
        .build(pattern)
        .map_err(|e| Error::Compile(format!("invalid regex {re:?}: {e}")))?;
    let mut looks = HashMap::default();
    for (k, set) in forbidden.iter().enumerate() {
        let group = nfa
            .group_info()
            .to_index(PatternID::ZERO, &group_name(k))
            .expect("every lookahead has its group");
        let class = classes.iter().position(|c| c == set).expect("deduplicated");
        looks.insert(group, class);
    }
    let sim = Threads {
        nfa: &nfa,
        looks,
        re,
    };
    // The lookaheads byte b lets through, as a bit set; all of them at the
    // end of the text.
    let mut passes = [0u32; ALPHABET_END as usize];
    for (b, pass) in passes.iter_mut().enumerate() {
        for (k, set) in classes.iter().enumerate() {
            if !set.contains(b as u8) {
                *pass |= 1 << k;
            }
        }
    }
    let all_pass = u32::MAX;
    let mut kinds: Vec<u32> = passes.to_vec();
    kinds.sort_unstable();
    kinds.dedup();

    // States: ordered thread lists, the start's [start]; 0 is dead.
    let start = vec![nfa.start_anchored()];
    let mut lists: Vec<Vec<StateID>> = vec![Vec::new(), start.clone()];
    let mut ids: HashMap<Vec<StateID>, u32> = HashMap::default();
    ids.insert(start, 1);
    let mut trans: Vec<[u32; ALPHABET_END as usize]> = vec![[DEAD; ALPHABET_END as usize]; 2];
    let mut accepting = vec![false, false];
    let mut forbid = vec![ByteSet::default(); 2];
    let mut closures: Vec<(u32, Closure)> = Vec::with_capacity(kinds.len());
    let mut next = 1;
    while next < lists.len() {
        let at_end = sim.closure(&lists[next], all_pass)?;
        accepting[next] = at_end.matched;
        closures.clear();
        for &pass in &kinds {
            closures.push((pass, sim.closure(&lists[next], pass)?));
        }
        for b in 0..ALPHABET_END {
            let (_, c) = closures
                .iter()
                .find(|(pass, _)| *pass == passes[b as usize])
                .expect("every byte's verdicts have a closure");
            if at_end.matched && !c.matched {
                forbid[next].insert(b);
            }
            let to = sim.step(&c.threads, b);
            if to.is_empty() {
                continue;
            }
            let id = match ids.get(&to) {
                Some(&id) => id,
                None => {
                    if lists.len() >= MAX_STATES {
                        return Err(Error::LimitExceeded(format!(
                            "regex {re:?} needs more than {MAX_STATES} states"
                        )));
                    }
                    let id = lists.len() as u32;
                    ids.insert(to.clone(), id);
                    lists.push(to);
                    trans.push([DEAD; ALPHABET_END as usize]);
                    accepting.push(false);
                    forbid.push(ByteSet::default());
                    id
                }
            };
            trans[next][b as usize] = id;
        }
        next += 1;
    }
    let alphabet: Vec<u8> = (0..ALPHABET_END).collect();
    let Some(dfa) =
        ByteDfa::from_transitions(&alphabet, accepting, |q, b| trans[q as usize][b as usize])
    else {
        return Ok(None);
    };
    // `from_transitions` renumbers (and drops states that cannot match):
    // carry the conditions over by walking both.
    let mut out = vec![ByteSet::default(); dfa.num_states() + 1];
    let mut seen: HashMap<u32, u32> = HashMap::default();
    let mut stack = vec![(dfa.start(), 1u32)];
    seen.insert(dfa.start(), 1);
    while let Some((d, t)) = stack.pop() {
        out[d as usize] = forbid[t as usize];
        for b in 0..ALPHABET_END {
            let (d2, t2) = (dfa.step(d, b), trans[t as usize][b as usize]);
            if d2 == DEAD {
                continue;
            }
            match seen.get(&d2) {
                // Renumbering maps one state to one; a merge would be a bug
                // here, refused rather than lexed wrongly.
                Some(&known) if forbid[known as usize] != forbid[t2 as usize] => {
                    return Err(Error::Compile(format!(
                        "regex {re:?}: end conditions do not follow the DFA's states"
                    )));
                }
                Some(_) => {}
                None => {
                    seen.insert(d2, t2);
                    stack.push((d2, t2));
                }
            }
        }
    }
    Ok(Some((dfa, out.into_boxed_slice())))
}

/// Bound on the NFA of one terminal.
const NFA_SIZE_LIMIT: usize = 10 << 20;

/// The threads that read the next byte, in priority order, and whether a
/// thread matched before them (the ones after it are dropped).
struct Closure {
    threads: Vec<StateID>,
    matched: bool,
}

struct Threads<'a> {
    nfa: &'a NFA,
    /// Capture group index of each lookahead's empty group, to its class.
    looks: HashMap<usize, usize>,
    re: &'a str,
}

impl Threads<'_> {
    /// The epsilon closure of `list` in priority order (a depth-first walk,
    /// earlier alternatives first), taking lookahead k only if bit k of
    /// `pass` is set, and stopping at the first match.
    fn closure(&self, list: &[StateID], pass: u32) -> Result<Closure> {
        let mut seen = vec![false; self.nfa.states().len()];
        let mut out = Closure {
            threads: Vec::new(),
            matched: false,
        };
        let mut stack: Vec<StateID> = list.iter().rev().copied().collect();
        while let Some(s) = stack.pop() {
            if std::mem::replace(&mut seen[s.as_usize()], true) {
                continue;
            }
            match self.nfa.state(s) {
                State::ByteRange { .. } | State::Sparse(_) | State::Dense(_) => out.threads.push(s),
                State::Union { alternates } => stack.extend(alternates.iter().rev()),
                State::BinaryUnion { alt1, alt2 } => {
                    stack.push(*alt2);
                    stack.push(*alt1);
                }
                State::Capture {
                    next,
                    group_index,
                    slot,
                    ..
                } => {
                    let look = self.looks.get(&group_index.as_usize());
                    // A group's opening slot is even; its closing one follows
                    // an empty body.
                    let blocked =
                        slot.as_usize() % 2 == 0 && look.is_some_and(|&k| pass & (1 << k) == 0);
                    if !blocked {
                        stack.push(*next);
                    }
                }
                State::Look { look, .. } => {
                    return Err(Error::Compile(format!(
                        "regex {:?}: assertion {look:?} together with a lookahead is not \
                         supported",
                        self.re
                    )))
                }
                State::Fail => {}
                State::Match { .. } => {
                    out.matched = true;
                    break;
                }
            }
        }
        Ok(out)
    }

    /// Where `threads` go on byte `b`, in order, each state once.
    fn step(&self, threads: &[StateID], b: u8) -> Vec<StateID> {
        let mut out: Vec<StateID> = Vec::new();
        for &s in threads {
            let to = match self.nfa.state(s) {
                State::ByteRange { trans } => trans.matches_byte(b).then_some(trans.next),
                State::Sparse(sparse) => sparse.matches_byte(b),
                State::Dense(dense) => dense.matches_byte(b),
                _ => None,
            };
            if let Some(t) = to {
                if !out.contains(&t) {
                    out.push(t);
                }
            }
        }
        out
    }
}
