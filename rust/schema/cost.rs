//! What copying and printing schema JSON costs, charged to the compile
//! work budget.
//!
//! Merges, negations and `$ref`s work on copies of schema JSON (a `$ref`
//! resolves to a clone of its target, a merged schema is memoized under its
//! printed text), and a schema document can make those copies large: a
//! `$ref` to a 30 KiB definition inside a loop of merges copies 30 KiB each
//! time. The automaton work is charged where it happens; this charges the
//! JSON work, by size: `NODE_STEPS` per value (an allocation, a copy and a
//! drop, about 30 ns on a 2-core cloud machine) and a step per byte of
//! text (strings and keys, printing and hashing them).

use serde_json::Value;

use crate::error::Result;

/// Steps per JSON value copied (see the module docs).
pub const NODE_STEPS: usize = 30;

/// The steps copying `v` costs: `NODE_STEPS` per value and one per byte of
/// its strings and keys (walked without recursion: `v` may nest deeply).
pub fn size_steps(v: &Value) -> usize {
    let mut steps = 0usize;
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        steps += NODE_STEPS;
        match v {
            Value::String(s) => steps += s.len(),
            Value::Array(a) => stack.extend(a),
            Value::Object(o) => {
                for (k, x) in o {
                    steps += k.len();
                    stack.push(x);
                }
            }
            _ => {}
        }
    }
    steps
}

/// A copy of `v`, its cost charged first.
pub fn cloned(v: &Value) -> Result<Value> {
    crate::budget::charge_n(size_steps(v))?;
    Ok(v.clone())
}

/// Charges a schema's printed text (a memo key) of `len` bytes: printing,
/// hashing and keeping it.
pub fn charge_text(len: usize) -> Result<()> {
    crate::budget::charge_n(len.saturating_mul(2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_counts_values_and_text() {
        let v = serde_json::json!({"ab": ["c", 1]});
        // object, array, "c", 1; key "ab" and string "c".
        assert_eq!(size_steps(&v), 4 * NODE_STEPS + 2 + 1);
    }

    #[test]
    fn deep_values_are_sized_without_recursion() {
        let mut v = Value::Null;
        for _ in 0..100_000 {
            v = Value::Array(vec![v]);
        }
        assert_eq!(size_steps(&v), 100_001 * NODE_STEPS);
        // serde_json's own drop recurses: take it apart iteratively.
        let mut stack = vec![v];
        while let Some(x) = stack.pop() {
            if let Value::Array(a) = x {
                stack.extend(a);
            }
        }
    }
}
