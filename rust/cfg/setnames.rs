//! Position-free names for Earley sets and parser states.
//!
//! A JSON grammar meets the same parser state again and again at different
//! places in a text: every value after `"key": ` in objects nested alike.
//! The chart differs (other sets, other indices), so a memo keyed on the
//! chart never sees the repeat, and these fills are the slow ones.
//!
//! What a parse does from a set on depends only on the set's items and,
//! through their origins, on the items of the sets those name, recursively:
//! completion reads the origin set's items, scans read the origin set's
//! items, and nothing else of a chart is read. So a set is named by its
//! items with each origin replaced by that set's name (an origin at the set
//! itself by `SELF`), plus its indenter layout and whether it is set 0,
//! where completing the start rule accepts. Names are interned exactly, so
//! equal names mean equal structure: a collision cannot happen. A parser
//! state is named likewise by its scans with their origins named.
//!
//! Interned keys are bounded (`MAX_NAMED_BYTES`): past the bound new sets
//! get no name and callers fall back to keys of their own.

use rustc_hash::FxHashMap as HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use super::earley::{CfgState, Chart};
use super::lexcache::{read, write};

/// Bound on the bytes of interned set keys, per grammar.
pub const MAX_NAMED_BYTES: usize = 16 << 20;
/// The origin code of an item whose origin is the set being named.
const SELF: u32 = 0;
/// Words per item in a set key: rule, dot, origin, members (four words).
const ITEM_WORDS: usize = 7;

/// A set's name: its index in the interner.
pub type SetName = u32;

#[derive(Debug, Default)]
pub struct SetNames {
    ids: RwLock<HashMap<Arc<[u32]>, SetName>>,
    bytes: AtomicUsize,
}

impl SetNames {
    /// The name of set `i` of `chart`, naming the sets its items reach
    /// first; None when the interner is full.
    pub fn name(&self, chart: &Chart, i: u32) -> Option<SetName> {
        if let Some(&known) = chart[i as usize].name.get() {
            return known;
        }
        // Depth-first over origins, iteratively: a chart may be thousands of
        // sets deep, and recursion would risk the stack.
        let mut stack = vec![i];
        while let Some(&top) = stack.last() {
            let set = &chart[top as usize];
            if set.name.get().is_some() {
                stack.pop();
                continue;
            }
            let before = stack.len();
            for it in &set.items {
                if it.origin != top && chart[it.origin as usize].name.get().is_none() {
                    stack.push(it.origin);
                }
            }
            if stack.len() > before {
                continue;
            }
            stack.pop();
            // A concurrent namer may have set it first: the same name either way.
            let _ = set.name.set(self.intern(chart, top));
        }
        chart[i as usize].name.get().copied().flatten()
    }

    /// Interns set `i`, whose origins have been named; None if it cannot be
    /// named (an origin has no name, or the interner is full).
    fn intern(&self, chart: &Chart, i: u32) -> Option<SetName> {
        let set = &chart[i as usize];
        if set.items.len() * ITEM_WORDS * 4
            > MAX_NAMED_BYTES - self.bytes.load(Ordering::Relaxed).min(MAX_NAMED_BYTES)
        {
            // It could not be kept: spare building its key.
            return None;
        }
        let mut items: Vec<[u32; ITEM_WORDS]> = Vec::with_capacity(set.items.len());
        for it in &set.items {
            let origin = if it.origin == i {
                SELF
            } else {
                chart[it.origin as usize].name.get().copied().flatten()? + 1
            };
            let m = it.members;
            items.push([
                it.rule,
                it.dot,
                origin,
                m as u32,
                (m >> 32) as u32,
                (m >> 64) as u32,
                (m >> 96) as u32,
            ]);
        }
        items.sort_unstable();
        let layout = set.layout();
        let mut key: Vec<u32> =
            Vec::with_capacity(3 + layout.levels.len() + items.len() * ITEM_WORDS);
        key.push(u32::from(i == 0));
        key.push(layout.brackets);
        key.push(layout.levels.len() as u32);
        key.extend_from_slice(&layout.levels);
        key.extend(items.iter().flatten());
        if let Some(&n) = read(&self.ids).get(&key[..]) {
            return Some(n);
        }
        let size = key.len() * 4 + 48;
        if self.bytes.fetch_add(size, Ordering::Relaxed) + size > MAX_NAMED_BYTES {
            self.bytes.fetch_sub(size, Ordering::Relaxed);
            return None;
        }
        let mut ids = write(&self.ids);
        let next = ids.len() as SetName;
        Some(*ids.entry(Arc::from(key)).or_insert(next))
    }

    /// A name for state `st` over `chart`, equal for two states exactly when
    /// their scans and the sets those reach are alike; None if a set has no
    /// name.
    pub fn state_key(&self, chart: &Chart, st: &CfgState) -> Option<Box<[u32]>> {
        let mut key = Vec::with_capacity(2 + st.frontier.len() * 3);
        key.push(u32::from(st.accepting));
        key.push(self.name(chart, st.sets - 1)?);
        for s in &st.frontier {
            key.extend([s.lexeme, s.state, self.name(chart, s.origin)?]);
        }
        Some(key.into_boxed_slice())
    }
}

#[cfg(test)]
mod tests {
    use crate::cfg::earley::{CfgState, Chart};
    use crate::cfg::{gbnf, lower::lower};

    const JSON: &str = r#"root ::= value
value ::= "{" ws (member ("," ws member)*)? "}" ws | "[" ws (value ("," ws value)*)? "]" ws | [0-9]+ ws
member ::= "\"" [a-z]+ "\"" ws ":" ws value
ws ::= | " ""#;

    /// The state key after each prefix of `text` (one chart, as a matcher).
    fn keys(text: &str) -> Vec<Option<Box<[u32]>>> {
        let cfg = lower(&gbnf::parse(JSON).unwrap()).unwrap();
        let mut chart = Chart::new();
        let mut st: CfgState = cfg.initial(&mut chart).unwrap();
        let mut out = vec![cfg.names.state_key(&chart, &st)];
        for b in text.bytes() {
            st = cfg.advance_bytes(&mut chart, &st, &[b]).unwrap().unwrap();
            out.push(cfg.names.state_key(&chart, &st));
        }
        out
    }

    #[test]
    fn alike_states_share_a_name_wherever_they_are() {
        let text = r#"{"a": 1, "bb": 22, "c": [3, 4]}"#;
        let k = keys(text);
        let at = |prefix: &str| {
            assert!(text.starts_with(prefix));
            k[prefix.len()].clone().expect("named")
        };
        // The starts of the second and third members' values: same object,
        // same place in it.
        assert_eq!(at(r#"{"a": 1, "bb": "#), at(r#"{"a": 1, "bb": 22, "c": "#));
        // The first member's value is in another place of the grammar (no
        // "," before it), and an array's second element is elsewhere again.
        assert_ne!(at(r#"{"a": "#), at(r#"{"a": 1, "bb": "#));
        assert_ne!(
            at(r#"{"a": 1, "bb": 22, "c": [3, "#),
            at(r#"{"a": 1, "bb": "#)
        );
    }

    #[test]
    fn nesting_tells_states_apart() {
        // After "1" the top-level object may end the text; one level down,
        // it may not: the same local state under another stack.
        let flat = r#"{"a": 1"#;
        let nested = r#"{"a": {"a": 1"#;
        let kf = keys(flat);
        let kn = keys(nested);
        assert_ne!(kf[flat.len()], kn[nested.len()]);
        // The same place one level down, under a later member of the outer
        // object each time, is the same state again.
        let twice = r#"{"a": 1, "b": {"a": 1}, "c": {"a": 1"#;
        let kt = keys(twice);
        assert!(kt[twice.len()].is_some());
        assert_eq!(kt[twice.len()], kt[r#"{"a": 1, "b": {"a": 1"#.len()]);
    }
}
