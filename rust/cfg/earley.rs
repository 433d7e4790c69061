//! An Earley parser over lexemes, advanced one byte at a time.
//!
//! The parser state after some bytes is: the chart (Earley sets, one per
//! position where some lexeme ended) and a frontier of in-progress lexeme
//! scans `(lexeme, DFA state, origin set)`. A byte steps every scan's DFA; scans
//! whose lexeme accepts complete it (all-splits lexing: at every accepting
//! point), which creates a new Earley set by scan + predict/complete closure
//! (Aycock-Horspool nullable handling), whose predicted lexemes start new
//! scans. Inside a lexeme only DFAs move, so the parser runs at lexeme
//! boundaries only. Every nonterminal is productive after lowering, so a state
//! is live exactly when its frontier is non-empty or it accepts.

use std::collections::HashSet;
use std::sync::Arc;

use super::lower::{Cfg, Sym};
use crate::error::{Error, Result};
use crate::regex_dfa::DEAD;

/// Bound on items in one Earley set (per-byte parser work is bounded by it).
pub const MAX_ITEMS_PER_SET: usize = 200_000;
/// Bound on concurrent lexeme scans.
pub const MAX_FRONTIER: usize = 20_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Item {
    pub rule: u32,
    pub dot: u32,
    pub origin: u32,
}

#[derive(Debug, Default)]
pub struct EarleySet {
    pub items: Vec<Item>,
}

/// A lexeme being read: its DFA state and the set where it started.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Scan {
    pub lexeme: u32,
    pub state: u32,
    pub origin: u32,
}

/// Where a parse is: `sets` Earley sets of its chart are in force.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CfgState {
    pub sets: u32,
    pub frontier: Vec<Scan>,
    pub accepting: bool,
}

/// Read access to Earley sets by index.
pub trait ChartRead {
    fn set(&self, i: u32) -> &EarleySet;
}

/// A matcher's chart: sets are shared (Arc) with forks and snapshots.
pub type Chart = Vec<Arc<EarleySet>>;

impl ChartRead for [Arc<EarleySet>] {
    fn set(&self, i: u32) -> &EarleySet {
        &self[i as usize]
    }
}

/// A shared prefix plus sets added locally (used by the mask walk).
pub struct ChartView<'a> {
    pub base: &'a [Arc<EarleySet>],
    pub ext: Vec<Arc<EarleySet>>,
}

impl ChartRead for ChartView<'_> {
    fn set(&self, i: u32) -> &EarleySet {
        let i = i as usize;
        if i < self.base.len() {
            &self.base[i]
        } else {
            &self.ext[i - self.base.len()]
        }
    }
}

impl Cfg {
    fn next_sym(&self, it: &Item) -> Option<Sym> {
        self.rules[it.rule as usize]
            .rhs
            .get(it.dot as usize)
            .copied()
    }

    fn lexeme_nullable(&self, l: u32) -> bool {
        self.lexemes[l as usize].nullable()
    }

    /// Predict/complete closure of `kernel` as set number `cur`; returns the
    /// set, the scans it starts and whether it accepts.
    fn closure(
        &self,
        chart: &(impl ChartRead + ?Sized),
        cur: u32,
        kernel: Vec<Item>,
    ) -> Result<(EarleySet, Vec<Scan>, bool)> {
        let mut seen: HashSet<Item> = kernel.iter().copied().collect();
        let mut items = kernel;
        let mut waiting: Vec<u32> = Vec::new();
        let mut i = 0;
        while i < items.len() {
            let it = items[i];
            i += 1;
            let mut add = |x: Item, items: &mut Vec<Item>| {
                if seen.insert(x) {
                    items.push(x);
                }
            };
            match self.next_sym(&it) {
                Some(Sym::N(b)) => {
                    for &r in &self.by_lhs[b as usize] {
                        add(
                            Item {
                                rule: r,
                                dot: 0,
                                origin: cur,
                            },
                            &mut items,
                        );
                    }
                    if self.nullable[b as usize] {
                        add(
                            Item {
                                dot: it.dot + 1,
                                ..it
                            },
                            &mut items,
                        );
                    }
                }
                Some(Sym::T(l)) => {
                    waiting.push(l);
                    if self.lexeme_nullable(l) {
                        add(
                            Item {
                                dot: it.dot + 1,
                                ..it
                            },
                            &mut items,
                        );
                    }
                }
                None if it.origin != cur => {
                    // Completions of empty spans (origin == cur) were already
                    // advanced at prediction time, as the nonterminal is nullable.
                    let lhs = self.rules[it.rule as usize].lhs;
                    for p in &chart.set(it.origin).items {
                        if self.next_sym(p) == Some(Sym::N(lhs)) {
                            add(
                                Item {
                                    dot: p.dot + 1,
                                    ..*p
                                },
                                &mut items,
                            );
                        }
                    }
                }
                None => {}
            }
            if items.len() > MAX_ITEMS_PER_SET {
                return Err(Error::LimitExceeded(format!(
                    "parser state exceeds {MAX_ITEMS_PER_SET} items (grammar too ambiguous)"
                )));
            }
        }
        waiting.sort_unstable();
        waiting.dedup();
        let frontier = waiting
            .into_iter()
            .filter_map(|l| {
                let dfa = self.lexemes[l as usize].dfa.as_ref()?;
                Some(Scan {
                    lexeme: l,
                    state: dfa.start(),
                    origin: cur,
                })
            })
            .collect();
        let accepting = seen.contains(&Item {
            rule: self.start_rule(),
            dot: 1,
            origin: 0,
        });
        Ok((EarleySet { items }, frontier, accepting))
    }

    /// The state before any byte; its set 0 goes into `chart`.
    pub fn initial(&self, chart: &mut Chart) -> Result<CfgState> {
        chart.clear();
        let kernel = vec![Item {
            rule: self.start_rule(),
            dot: 0,
            origin: 0,
        }];
        let (set, frontier, accepting) = self.closure(&chart[..], 0, kernel)?;
        chart.push(Arc::new(set));
        Ok(CfgState {
            sets: 1,
            frontier,
            accepting,
        })
    }

    /// Advances every scan by `byte`. Returns the surviving scans and the
    /// lexemes completed (with their origins).
    #[inline]
    pub fn step_scans(&self, frontier: &[Scan], byte: u8, out: &mut Vec<Scan>) -> Vec<(u32, u32)> {
        let mut done = Vec::new();
        for s in frontier {
            let dfa = self.lexemes[s.lexeme as usize]
                .dfa
                .as_ref()
                .expect("scans have DFAs");
            let q = dfa.step(s.state, byte);
            if q == DEAD {
                continue;
            }
            out.push(Scan { state: q, ..*s });
            if dfa.is_accepting(q) {
                done.push((s.lexeme, s.origin));
            }
        }
        done
    }

    /// The new Earley set after lexemes `done` completed, numbered `cur`.
    pub fn complete_lexemes(
        &self,
        chart: &(impl ChartRead + ?Sized),
        cur: u32,
        done: &[(u32, u32)],
    ) -> Result<(EarleySet, Vec<Scan>, bool)> {
        let mut kernel = Vec::new();
        let mut seen = HashSet::new();
        for &(l, o) in done {
            for p in &chart.set(o).items {
                if self.next_sym(p) == Some(Sym::T(l)) {
                    let x = Item {
                        dot: p.dot + 1,
                        ..*p
                    };
                    if seen.insert(x) {
                        kernel.push(x);
                    }
                }
            }
        }
        self.closure(chart, cur, kernel)
    }

    /// Reads `bytes` from `st`, appending new sets to `chart` (which must hold
    /// exactly `st.sets` sets). None (chart restored) if some byte is refused.
    pub fn advance_bytes(
        &self,
        chart: &mut Chart,
        st: &CfgState,
        bytes: &[u8],
    ) -> Result<Option<CfgState>> {
        debug_assert_eq!(chart.len(), st.sets as usize);
        let mut cur = st.clone();
        for &b in bytes {
            match self.step(chart, &cur, b) {
                Ok(Some(next)) => cur = next,
                other => {
                    chart.truncate(st.sets as usize);
                    return other;
                }
            }
        }
        Ok(Some(cur))
    }

    fn step(&self, chart: &mut Chart, st: &CfgState, byte: u8) -> Result<Option<CfgState>> {
        let mut frontier = Vec::with_capacity(st.frontier.len());
        let done = self.step_scans(&st.frontier, byte, &mut frontier);
        let mut accepting = false;
        let mut sets = st.sets;
        if !done.is_empty() {
            let (set, started, acc) = self.complete_lexemes(&chart[..], sets, &done)?;
            chart.push(Arc::new(set));
            sets += 1;
            frontier.extend(started);
            accepting = acc;
        }
        frontier.sort_unstable();
        frontier.dedup();
        if frontier.len() > MAX_FRONTIER {
            return Err(Error::LimitExceeded(format!(
                "more than {MAX_FRONTIER} lexemes in progress at once (grammar too ambiguous)"
            )));
        }
        if frontier.is_empty() && !accepting {
            return Ok(None);
        }
        Ok(Some(CfgState {
            sets,
            frontier,
            accepting,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfg::{gbnf, lower::lower};

    fn accepts(src: &str, text: &str) -> (bool, bool) {
        let cfg = lower(&gbnf::parse(src).unwrap()).unwrap();
        let mut chart = Chart::new();
        let st = cfg.initial(&mut chart).unwrap();
        match cfg.advance_bytes(&mut chart, &st, text.as_bytes()).unwrap() {
            Some(s) => (true, s.accepting),
            None => (false, false),
        }
    }

    #[test]
    fn recursion_ambiguity_and_empty_rules() {
        let g = "root ::= e\ne ::= e \"+\" e | \"(\" e \")\" | [0-9]+ | n\nn ::= | \"x\"";
        assert_eq!(accepts(g, "1+(2+3)+4"), (true, true));
        assert_eq!(accepts(g, "1+(2+"), (true, false));
        assert_eq!(accepts(g, "1+)"), (false, false));
        assert_eq!(accepts(g, ""), (true, true)); // e -> n -> ε
        assert_eq!(accepts(g, "+x+"), (true, true)); // ε + x + ε
        assert_eq!(accepts(g, "x)"), (false, false));
    }

    #[test]
    fn lexemes_end_at_every_accepting_point() {
        // [a-z]+ must be able to stop before "b" (character-level semantics).
        let g = "root ::= [a-z]+ \"b\"";
        assert_eq!(accepts(g, "aab"), (true, true));
        assert_eq!(accepts(g, "abb"), (true, true));
        assert_eq!(accepts(g, "aa"), (true, false));
        let g = "root ::= ( [x]* )*";
        assert_eq!(accepts(g, ""), (true, true));
        assert_eq!(accepts(g, "xxx"), (true, true));
        assert_eq!(accepts(g, "y"), (false, false));
    }

    #[test]
    fn multibyte_and_repetition_counts() {
        let g = "root ::= (\"0x\" [A-F0-9]{2} \" \"?){3,5}";
        assert!(accepts(g, "0xFF 0x12 0xAB").1);
        assert!(!accepts(g, "0xFF 0x12").1);
        assert!(!accepts(g, "0xFF 0x12 0xAB 0x00 0x00 0x00").0);
        let g = "root ::= \"中\" . \"文\"";
        assert_eq!(accepts(g, "中😀文"), (true, true));
        assert!(accepts(g, "中\u{1F600}").0);
    }
}
