//! The product construction: the strings two DFAs both accept (`Op::And`),
//! that the first accepts and the second does not (`Op::AndNot`), or that
//! either accepts (`Op::Or`), over byte classes refining both DFAs'. DFAs
//! with a block of shared copies go through `block_product` first.

use rustc_hash::FxHashMap as HashMap;

use super::table::Table;
use super::DFA_SIZE_LIMIT;
use super::{block_product, ByteDfa, DEAD};
use crate::error::{Error, Result};

impl ByteDfa {
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
pub(super) fn joint_classes(a: &ByteDfa, b: &ByteDfa) -> ([u8; 256], Vec<usize>, Vec<u8>) {
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
