//! States past a DFA's table rows: a block of shared copies (`Periodic`,
//! long counted repetitions), sparse rows (`SparseRows`), or states that
//! are computed, not stored (`Records`, an enum of objects in any order),
//! in far less memory than rows would take.

use std::sync::Arc;

use super::periodic::Periodic;
use super::records::Records;
use super::sparse::SparseRows;
use super::ByteDfa;

impl ByteDfa {
    /// The states past the table (a state number past the rows is one).
    pub(super) fn tail(&self) -> &Tail {
        match &self.tail {
            Some(t) => t,
            None => panic!("a state past the table of an automaton without a tail"),
        }
    }

    /// The block of shared copies, if the states past the table are one.
    pub(super) fn periodic(&self) -> Option<&Periodic> {
        match self.tail.as_deref() {
            Some(Tail::Periodic(p)) => Some(p),
            _ => None,
        }
    }

    pub(super) fn block(&self) -> &Periodic {
        self.periodic()
            .expect("a block state of an automaton without a block")
    }

    /// Where `state`, past the table's rows, goes on a byte of `class`
    /// (`target` reads the table first).
    #[cold]
    #[inline(never)]
    pub(super) fn tail_target(&self, state: u32, class: usize) -> u32 {
        match self.tail() {
            Tail::Periodic(p) => p.target(state, class, self.stride),
            Tail::Sparse(s) => s.target(state, class),
            // Its classes are its bytes.
            Tail::Records(r) => r.target(state, class as u8),
        }
    }
}

/// The states of a `ByteDfa` numbered past its table's rows, in one of two
/// layouts that take far less memory than rows would.
#[derive(Clone, Debug)]
pub(super) enum Tail {
    /// Copies of a long counted repetition sharing one block of rows
    /// (`periodic`).
    Periodic(Periodic),
    /// States with a few live transitions each, as lists (`sparse`).
    Sparse(SparseRows),
    /// States decoded from their numbers (`records`).
    Records(Arc<Records>),
}

impl Tail {
    /// The state numbers it takes.
    pub(super) fn states(&self) -> usize {
        match self {
            Tail::Periodic(p) => p.states(),
            Tail::Sparse(s) => s.len(),
            Tail::Records(r) => r.states(),
        }
    }

    /// Whether number `q` (past the table) is a state: a block leaves
    /// numbers unused between its copies.
    pub(super) fn is_state(&self, q: u32) -> bool {
        match self {
            Tail::Periodic(p) => p.is_state(q),
            Tail::Sparse(_) | Tail::Records(_) => true,
        }
    }

    pub(super) fn is_accepting(&self, q: u32) -> bool {
        match self {
            Tail::Periodic(p) => p.is_accepting(q),
            Tail::Sparse(s) => s.is_accepting(q),
            Tail::Records(r) => r.is_accepting(q),
        }
    }

    pub(super) fn forced_byte(&self, q: u32) -> Option<u8> {
        match self {
            Tail::Periodic(p) => p.forced_byte(q),
            Tail::Sparse(s) => s.forced_byte(q),
            Tail::Records(r) => r.forced_byte(q),
        }
    }

    /// Whether some transition here leads to table state `q`.
    pub(super) fn targets(&self, q: u32) -> bool {
        match self {
            Tail::Periodic(p) => p.targets(q),
            Tail::Sparse(s) => s.targets(q),
            // Only the dead state is a table row.
            Tail::Records(_) => q == super::DEAD,
        }
    }

    /// Accepting states whose live bytes stand for all of its accepting
    /// states' (a block's first copy stands for every copy).
    pub(super) fn accepting_states(&self) -> Box<dyn Iterator<Item = u32> + '_> {
        match self {
            Tail::Periodic(p) => Box::new(p.accepting_states()),
            Tail::Sparse(s) => Box::new(s.accepting_states()),
            Tail::Records(r) => Box::new(r.accepting_states()),
        }
    }

    pub(super) fn memory_bytes(&self) -> usize {
        match self {
            Tail::Periodic(p) => p.memory_bytes(),
            Tail::Sparse(s) => s.memory_bytes(),
            Tail::Records(r) => r.memory_bytes(),
        }
    }
}
