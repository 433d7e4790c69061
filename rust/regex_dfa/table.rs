//! Transition tables while a DFA is built: byte classes, the size bound,
//! reachability, pruning of states that cannot reach a match (merged into
//! the dead state), and the forced byte of each state, before the table
//! becomes a `ByteDfa`.

use super::{ByteDfa, Minimality, DEAD, DFA_SIZE_LIMIT};
use crate::error::{Error, Result};

/// For byte classes `classes` (numbered below `count`): each class's size
/// and its smallest byte.
pub(super) fn class_bytes_of(classes: &[u8; 256], count: usize) -> (Vec<usize>, Vec<u8>) {
    let mut class_size = vec![0usize; count];
    let mut representative = vec![0u8; count];
    for b in (0..=255u8).rev() {
        representative[classes[b as usize] as usize] = b;
        class_size[classes[b as usize] as usize] += 1;
    }
    (class_size, representative)
}

/// Refuses a table of `states` rows of `stride` words over the size bound.
pub(super) fn check_size(states: usize, stride: usize) -> Result<()> {
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
pub(super) fn own_classes(bytes: impl Iterator<Item = u8>) -> ([u8; 256], Vec<usize>, Vec<u8>) {
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
pub(super) struct Table {
    pub(super) classes: [u8; 256],
    pub(super) class_size: Vec<usize>,
    pub(super) representative: Vec<u8>,
    pub(super) trans: Vec<u32>,
    pub(super) accepting: Vec<bool>,
    pub(super) start: u32,
}

impl Table {
    /// Drops the states the start cannot reach (numbering the rest in
    /// breadth-first order).
    pub(super) fn reachable(self) -> Table {
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
    pub(super) fn pruned(self) -> Option<ByteDfa> {
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
    pub(super) fn finish(self) -> ByteDfa {
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
pub(super) fn forced_bytes(
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
