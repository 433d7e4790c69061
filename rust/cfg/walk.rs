//! Walking the token trie with the Earley parser.
//!
//! Frame `d` is the parser state after `d` bytes below the walk's start. A
//! frontier is kept as groups `(lexer state, origin)`, where a lexer state is
//! the sorted set of `(lexeme, DFA state)` pairs of the scans that started at
//! that origin, interned per walk: stepping a group by a byte is then one
//! table lookup once that transition has been seen, which is what makes a walk
//! over ~10^5 trie nodes cheap. Completions (new Earley sets) are memoized by
//! chart view, so each distinct one is computed once per walk.

use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

use super::ast::Lexing;
use super::earley::{CfgState, ChartRead, ChartView, EarleySet};
use super::lower::Cfg;
use crate::error::{Error, Result};
use crate::regex_dfa::DEAD;
use crate::trie::TrieStepper;

const UNKNOWN: u32 = u32::MAX;
/// The empty lexer state (no scan alive).
const EMPTY: u32 = 0;

/// A lexer state: its scans, and which lexemes would end if the text ended.
struct LexState {
    pairs: Vec<(u32, u32)>,
    /// Lexemes in an accepting state.
    accepting: Vec<u32>,
    /// The accepting lexemes of the highest priority (longest-match ties).
    best: Vec<u32>,
}

/// Lexer states interned for one walk, with their byte transitions.
struct LexStates {
    states: Vec<LexState>,
    ids: HashMap<Vec<(u32, u32)>, u32>,
    trans: Vec<u32>,
}

impl LexStates {
    fn new() -> Self {
        // Id 0 (EMPTY) is the state with no scans; all its transitions stay in it.
        let empty = LexState {
            pairs: Vec::new(),
            accepting: Vec::new(),
            best: Vec::new(),
        };
        LexStates {
            states: vec![empty],
            ids: HashMap::from_iter([(Vec::new(), EMPTY)]),
            trans: vec![EMPTY; 256],
        }
    }

    fn intern(&mut self, cfg: &Cfg, mut pairs: Vec<(u32, u32)>) -> u32 {
        pairs.sort_unstable();
        pairs.dedup();
        if let Some(&id) = self.ids.get(&pairs) {
            return id;
        }
        let accepting: Vec<u32> = pairs
            .iter()
            .filter(|&&(l, q)| {
                let dfa = cfg.lexemes[l as usize]
                    .dfa
                    .as_ref()
                    .expect("scans have DFAs");
                dfa.is_accepting(q)
            })
            .map(|&(l, _)| l)
            .collect();
        let top = accepting
            .iter()
            .map(|&l| cfg.lexemes[l as usize].priority)
            .max();
        let best = accepting
            .iter()
            .copied()
            .filter(|&l| Some(cfg.lexemes[l as usize].priority) == top)
            .collect();
        let id = self.states.len() as u32;
        self.ids.insert(pairs.clone(), id);
        self.states.push(LexState {
            pairs,
            accepting,
            best,
        });
        self.trans.resize(self.trans.len() + 256, UNKNOWN);
        id
    }

    fn step(&mut self, cfg: &Cfg, id: u32, byte: u8) -> u32 {
        let slot = id as usize * 256 + byte as usize;
        let known = self.trans[slot];
        if known != UNKNOWN {
            return known;
        }
        let next: Vec<(u32, u32)> = self.states[id as usize]
            .pairs
            .iter()
            .filter_map(|&(l, q)| {
                let dfa = cfg.lexemes[l as usize]
                    .dfa
                    .as_ref()
                    .expect("scans have DFAs");
                let q2 = dfa.step(q, byte);
                (q2 != DEAD).then_some((l, q2))
            })
            .collect();
        let next = self.intern(cfg, next);
        self.trans[slot] = next;
        next
    }
}

#[derive(Clone, Copy)]
struct Group {
    lex: u32,
    origin: u32,
}

#[derive(Clone, Copy)]
struct Frame {
    start: usize,
    end: usize,
    sets: u32,
}

/// Completions of one chart view, by completed (lexeme, origin) list; the
/// view is named by its newest set's address and its number of sets.
type MemoBucket = Vec<(Vec<(u32, u32)>, Completion)>;

/// What the walk needs of a completion: the new set, whether it accepts, and
/// the lexer state its predicted lexemes start in.
type Completion = (Arc<EarleySet>, bool, u32);

pub struct CfgStepper<'a> {
    cfg: &'a Cfg,
    chart: ChartView<'a>,
    lex: LexStates,
    groups: Vec<Group>,
    frames: Vec<Frame>,
    /// Completions by chart view and completed (lexeme, origin) list: many
    /// trie nodes complete the same lexemes from the same chart.
    memo: HashMap<(usize, u32), MemoBucket>,
    done: Vec<(u32, u32)>,
    /// A bound exceeded during the walk; the caller reports it.
    pub error: Option<Error>,
}

impl<'a> CfgStepper<'a> {
    /// A stepper whose frame 0 is `st` (over the first `st.sets` sets of `chart`).
    pub fn new(cfg: &'a Cfg, chart: &'a [Arc<EarleySet>], st: &CfgState, max_depth: usize) -> Self {
        let base = &chart[..st.sets as usize];
        let mut lex = LexStates::new();
        let mut by_origin: Vec<(u32, Vec<(u32, u32)>)> = Vec::new();
        for s in &st.frontier {
            match by_origin.iter_mut().find(|(o, _)| *o == s.origin) {
                Some((_, pairs)) => pairs.push((s.lexeme, s.state)),
                None => by_origin.push((s.origin, vec![(s.lexeme, s.state)])),
            }
        }
        let groups: Vec<Group> = by_origin
            .into_iter()
            .map(|(origin, pairs)| Group {
                lex: lex.intern(cfg, pairs),
                origin,
            })
            .collect();
        let mut frames = vec![
            Frame {
                start: 0,
                end: 0,
                sets: 0
            };
            max_depth + 2
        ];
        frames[0] = Frame {
            start: 0,
            end: groups.len(),
            sets: st.sets,
        };
        CfgStepper {
            cfg,
            chart: ChartView {
                base,
                ext: Vec::new(),
            },
            lex,
            groups,
            frames,
            memo: HashMap::default(),
            done: Vec::new(),
            error: None,
        }
    }

    /// The new Earley set for completed `done` over a view of `sets` sets,
    /// and the lexer state its predicted lexemes start in.
    fn complete(&mut self, sets: u32, done: &[(u32, u32)]) -> Result<Completion> {
        // Sets made during a walk all come from this memo (which keeps them
        // alive), so the newest set's address identifies the chart view.
        let top = self.chart.set(sets - 1) as *const EarleySet as usize;
        // A view rarely sees more than a few distinct completions: scan its
        // bucket instead of building a key.
        if let Some(bucket) = self.memo.get(&(top, sets)) {
            if let Some((_, hit)) = bucket.iter().find(|(d, _)| d.as_slice() == done) {
                return Ok(hit.clone());
            }
        }
        let (set, started, acc) = self.cfg.complete_lexemes(&self.chart, sets, done)?;
        let started_lex = self.lex.intern(
            self.cfg,
            started.iter().map(|s| (s.lexeme, s.state)).collect(),
        );
        let result = (Arc::new(set), acc, started_lex);
        self.memo
            .entry((top, sets))
            .or_default()
            .push((done.to_vec(), result.clone()));
        Ok(result)
    }

    /// One byte; `done` is an empty scratch buffer for completed lexemes.
    fn step_inner(&mut self, depth: usize, byte: u8, done: &mut Vec<(u32, u32)>) -> Result<bool> {
        let parent = self.frames[depth - 1];
        self.groups.truncate(parent.end);
        self.chart
            .ext
            .truncate(parent.sets as usize - self.chart.base.len());
        let start = self.groups.len();
        let mut any_alive = false;
        for i in parent.start..parent.end {
            let g = self.groups[i];
            let next = self.lex.step(self.cfg, g.lex, byte);
            if next != EMPTY {
                any_alive = true;
                self.groups.push(Group {
                    lex: next,
                    origin: g.origin,
                });
                if self.cfg.lexing == Lexing::AllSplits {
                    done.extend(
                        self.lex.states[next as usize]
                            .accepting
                            .iter()
                            .map(|&l| (l, g.origin)),
                    );
                }
            }
        }
        let mut sets = parent.sets;
        let mut accepting = false;
        match self.cfg.lexing {
            Lexing::AllSplits => {
                if !done.is_empty() {
                    let (set, acc, started) = self.complete(sets, done)?;
                    self.chart.ext.push(set);
                    accepting = acc;
                    if started != EMPTY {
                        self.groups.push(Group {
                            lex: started,
                            origin: sets,
                        });
                    }
                    sets += 1;
                }
            }
            Lexing::Longest => {
                if !any_alive {
                    // No scan takes the byte: the accepting ones end before it
                    // (highest priority), and the byte must start a lexeme.
                    for i in parent.start..parent.end {
                        let g = self.groups[i];
                        done.extend(
                            self.lex.states[g.lex as usize]
                                .best
                                .iter()
                                .map(|&l| (l, g.origin)),
                        );
                    }
                    if done.is_empty() {
                        return Ok(false);
                    }
                    let (set, _, started) = self.complete(sets, done)?;
                    let next = self.lex.step(self.cfg, started, byte);
                    if next == EMPTY {
                        return Ok(false);
                    }
                    self.chart.ext.push(set);
                    self.groups.push(Group {
                        lex: next,
                        origin: sets,
                    });
                    sets += 1;
                }
            }
        }
        self.frames[depth] = Frame {
            start,
            end: self.groups.len(),
            sets,
        };
        Ok(self.groups.len() > start || accepting)
    }
}

impl CfgStepper<'_> {
    /// The lexer state (scans, origins dropped) of frame `depth`.
    pub fn lex_key_at(&self, depth: usize) -> Vec<(u32, u32)> {
        let f = self.frames[depth];
        let mut key: Vec<(u32, u32)> = self.groups[f.start..f.end]
            .iter()
            .flat_map(|g| self.lex.states[g.lex as usize].pairs.iter().copied())
            .collect();
        key.sort_unstable();
        key.dedup();
        key
    }
}

impl TrieStepper for CfgStepper<'_> {
    fn step(&mut self, depth: usize, byte: u8) -> bool {
        if self.error.is_some() {
            return false;
        }
        // One reused buffer for completed lexemes: this runs once per trie node.
        let mut done = std::mem::take(&mut self.done);
        done.clear();
        let stepped = self.step_inner(depth, byte, &mut done);
        self.done = done;
        match stepped {
            Ok(live) => live,
            Err(e) => {
                self.error = Some(e);
                false
            }
        }
    }
}
