//! The ε-closure work of determinizing an NFA that its DFA's states do not
//! show.
//!
//! `lazy::determinize` charges each DFA state by its size: the state is a
//! set of the NFA's byte (and match) states, and computing its transitions
//! reads that set once per byte class. But each transition also follows
//! ε-edges (unions, assertions) from the byte states that fire to the next
//! byte states, and that walk is not always paid for by what it adds to the
//! set. A Union whose thousands of alternates all lead to one state
//! (`(?:.|||…|)*`, the empty alternatives folded away) or a long chain of
//! unions between two byte states (`((((.*|)|)|)|)`) is walked on every
//! transition while the sets stay small: such patterns ran three times past
//! the budget's second. And where the sets are large, their closures walk
//! more than the sets show: 300 copies of `.*` in a loop, each closure
//! passing through the unions of every later copy, took 1.9 s.
//!
//! `simplify` removes the common shapes; this charges what is left.
//! `EpsilonWork` measures, for every state a byte transition leads to, the
//! ε-edges its closure follows, and keeps the largest: the *walk*. A
//! transition out of a DFA state then follows at most the walk for each
//! byte state that fires, and never more than every ε-edge of the NFA (a
//! closure visits a state once per transition): `per_transition`. A
//! union's edges to distinct byte states are charged twice so (here and
//! by the set they add to), an over-charge of at most the set's own.
//!
//! The measurement is itself bounded: past `MAX_WALK_PER_STATE` edges per
//! NFA state in all, it stops and takes every ε-edge as the walk (an upper
//! bound), so a pattern whose closures are all long is charged the most a
//! transition can cost.

use regex_automata::nfa::thompson::{State, NFA};
use regex_automata::util::primitives::StateID;

use crate::error::Result;

/// Edges the measurement may follow per NFA state (plus `MIN_WALK`) before
/// it takes the bound instead.
const MAX_WALK_PER_STATE: u64 = 32;
const MIN_WALK: u64 = 1 << 16;

/// How much unpaid ε-work one transition of a DFA over an NFA can do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct EpsilonWork {
    /// The most ε-edges one fired byte state's closure follows.
    pub walk: u64,
    /// ε-edges in the NFA: the most one transition can follow.
    pub edges: u64,
}

impl EpsilonWork {
    /// Measures `nfa` (charging the walk to the compile's budget).
    pub(super) fn of(nfa: &NFA) -> Result<Self> {
        let states = nfa.states();
        let mut pair = [StateID::ZERO; 2];
        let edges: u64 = states
            .iter()
            .map(|s| epsilon_edges(s, &mut pair).len() as u64)
            .sum();
        if edges == 0 {
            return Ok(EpsilonWork { walk: 0, edges });
        }
        let limit = MAX_WALK_PER_STATE * states.len() as u64 + MIN_WALK;
        let mut walked = 0u64;
        let mut walk = 0u64;
        let mut seen = vec![u32::MAX; states.len()];
        let mut stack: Vec<StateID> = Vec::new();
        let mut targets: Vec<StateID> = states.iter().flat_map(byte_targets).collect();
        targets.sort_unstable();
        targets.dedup();
        for (walk_id, &target) in targets.iter().enumerate() {
            let walk_id = walk_id as u32;
            let mut followed = 0u64;
            stack.push(target);
            while let Some(id) = stack.pop() {
                if std::mem::replace(&mut seen[id.as_usize()], walk_id) == walk_id {
                    continue;
                }
                let next = epsilon_edges(&states[id.as_usize()], &mut pair);
                followed += next.len() as u64;
                stack.extend_from_slice(next);
            }
            walked += followed + 1;
            if walked > limit {
                crate::budget::charge(walked)?;
                return Ok(EpsilonWork { walk: edges, edges });
            }
            walk = walk.max(followed);
        }
        crate::budget::charge(walked)?;
        Ok(EpsilonWork { walk, edges })
    }

    /// ε-edges a transition out of a DFA state of `cached_bytes` bytes may
    /// follow: the walk for each of its byte states (fewer than its bytes),
    /// at most every edge.
    pub(super) fn per_transition(&self, cached_bytes: u64) -> u64 {
        cached_bytes.saturating_mul(self.walk).min(self.edges)
    }
}

/// The states an ε-state leads to (none for byte, match and fail states);
/// `pair` holds a binary union's two.
fn epsilon_edges<'a>(state: &'a State, pair: &'a mut [StateID; 2]) -> &'a [StateID] {
    match state {
        State::Union { alternates } => alternates,
        State::BinaryUnion { alt1, alt2 } => {
            *pair = [*alt1, *alt2];
            pair
        }
        State::Capture { next, .. } | State::Look { next, .. } => {
            pair[0] = *next;
            &pair[..1]
        }
        State::ByteRange { .. }
        | State::Sparse(_)
        | State::Dense(_)
        | State::Fail
        | State::Match { .. } => &[],
    }
}

/// The states a byte state's transitions lead to.
fn byte_targets(state: &State) -> Vec<StateID> {
    match state {
        State::ByteRange { trans } => vec![trans.next],
        State::Sparse(sparse) => sparse.transitions.iter().map(|t| t.next).collect(),
        State::Dense(dense) => dense.transitions.to_vec(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex_automata::nfa::thompson;

    fn work(pattern: &str) -> EpsilonWork {
        let nfa = thompson::Compiler::new()
            .configure(super::super::thompson_config())
            .build(pattern)
            .unwrap();
        EpsilonWork::of(&nfa).unwrap()
    }

    #[test]
    fn the_walk_is_the_longest_closure() {
        // The NFA's unanchored start (a loop of any byte before the
        // pattern, unused by anchored builds) is one union of two edges.
        assert_eq!(work("abc"), EpsilonWork { walk: 2, edges: 2 });
        // `[a-z]+`: after a letter, one union back to the class or out.
        assert_eq!(work("[a-z]+").walk, 2);
        // A union of four words: its four edges after each word.
        assert!(work("(?:if|else|while|for)*x").walk >= 4);
    }

    #[test]
    fn folded_empty_alternatives_and_union_chains_are_walked() {
        let empties = format!("(?:a{})*b", "|".repeat(3000));
        let w = work(&empties);
        assert!(w.walk >= 3000 && w.walk <= w.edges, "{w:?}");
        let chain = format!("{}.*{}x", "(".repeat(100), "|)".repeat(100));
        assert!(work(&chain).walk >= 200, "{:?}", work(&chain));
    }

    #[test]
    fn long_walks_everywhere_are_charged_every_edge() {
        // `(,?){30000}`: from each comma, a walk through every later union;
        // measuring them all would be quadratic.
        let w = work("(?:,?){30000}");
        assert_eq!(w.walk, w.edges);
    }

    #[test]
    fn a_transition_is_charged_at_most_every_edge() {
        let w = EpsilonWork {
            walk: 10,
            edges: 500,
        };
        assert_eq!(w.per_transition(3), 30);
        assert_eq!(w.per_transition(1_000), 500);
        assert_eq!(
            EpsilonWork {
                walk: 0,
                edges: 500
            }
            .per_transition(1_000),
            0
        );
    }
}
