//! What walks a trie: a stepper advances some automaton one byte per trie
//! level (frame `d` is the state after `d` bytes below the walk's top) and
//! says whether to go below (`TrieStepper`), or also whether to stop there
//! and hand the node to the caller (`VisitStepper`, `Visit`).

/// Advances some automaton along a trie walk. Frame `d` holds the state after
/// the first `d` bytes below the walk's top; frame 0 is set by the caller.
pub trait TrieStepper {
    /// Computes frame `depth` from frame `depth - 1` and `byte`; false if dead.
    fn step(&mut self, depth: usize, byte: u8) -> bool;
}

/// The stepper for a byte DFA given as a step function (0 = dead).
#[derive(Clone)]
pub struct DfaStepper<F: Fn(u32, u8) -> u32> {
    states: Vec<u32>,
    step: F,
}

impl<F: Fn(u32, u8) -> u32> DfaStepper<F> {
    pub fn new(start: u32, step: F, max_depth: usize) -> Self {
        let mut states = vec![0u32; max_depth + 2];
        states[0] = start;
        DfaStepper { states, step }
    }
}

impl<F: Fn(u32, u8) -> u32> TrieStepper for DfaStepper<F> {
    #[inline(always)]
    fn step(&mut self, depth: usize, byte: u8) -> bool {
        let s = (self.step)(self.states[depth - 1], byte);
        self.states[depth] = s;
        s != 0
    }
}

/// What `walk_visits` does at a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Visit {
    Dead,
    Live,
    Stop,
}

/// Like `TrieStepper`, with a third outcome (`Visit::Stop`).
pub trait VisitStepper {
    fn visit(&mut self, depth: usize, byte: u8) -> Visit;
}

/// Runs `inner` with frame numbers shifted by `offset`, so a walk below a
/// node at depth `offset` continues frames that a path walk filled.
pub struct Offset<'a, S: TrieStepper> {
    pub inner: &'a mut S,
    pub offset: usize,
}

impl<S: TrieStepper> TrieStepper for Offset<'_, S> {
    #[inline]
    fn step(&mut self, depth: usize, byte: u8) -> bool {
        self.inner.step(depth + self.offset, byte)
    }
}

/// A `TrieStepper` as a `VisitStepper` that never stops (owned, so a
/// split walk can copy it).
#[derive(Clone)]
pub(super) struct Live<S: TrieStepper>(pub(super) S);

impl<S: TrieStepper> VisitStepper for Live<S> {
    #[inline(always)]
    fn visit(&mut self, depth: usize, byte: u8) -> Visit {
        if self.0.step(depth, byte) {
            Visit::Live
        } else {
            Visit::Dead
        }
    }
}
