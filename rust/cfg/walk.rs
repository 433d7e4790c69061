//! Walking the token trie with the Earley parser: frame `d` is the parser
//! state after `d` bytes; stepping into a child truncates the scans and the
//! local chart sets back to the parent's frame first, so the walk needs no
//! copies of parser state.

use std::collections::HashMap;
use std::sync::Arc;

use super::earley::{CfgState, ChartRead, ChartView, Completed, EarleySet, Scan};
use super::lower::Cfg;
use crate::error::Error;
use crate::trie::TrieStepper;

/// (address of the chart view's newest set, number of sets, completed lexemes).
type MemoKey = (usize, u32, Vec<(u32, u32)>);

#[derive(Clone, Copy)]
struct Frame {
    scans_start: usize,
    scans_end: usize,
    sets: u32,
    accepting: bool,
}

pub struct CfgStepper<'a> {
    cfg: &'a Cfg,
    chart: ChartView<'a>,
    scans: Vec<Scan>,
    frames: Vec<Frame>,
    scratch: Vec<Scan>,
    /// Completions by (chart view, completed (lexeme, origin) list): many trie
    /// nodes complete the same lexemes from the same chart, and the resulting
    /// Earley set depends only on those.
    memo: HashMap<MemoKey, Completed>,
    /// A bound exceeded during the walk; the caller reports it.
    pub error: Option<Error>,
}

impl<'a> CfgStepper<'a> {
    /// A stepper whose frame 0 is `st` (over the first `st.sets` sets of `chart`).
    pub fn new(cfg: &'a Cfg, chart: &'a [Arc<EarleySet>], st: &CfgState, max_depth: usize) -> Self {
        let base = &chart[..st.sets as usize];
        let mut frames = vec![
            Frame {
                scans_start: 0,
                scans_end: 0,
                sets: 0,
                accepting: false
            };
            max_depth + 2
        ];
        frames[0] = Frame {
            scans_start: 0,
            scans_end: st.frontier.len(),
            sets: st.sets,
            accepting: st.accepting,
        };
        CfgStepper {
            cfg,
            chart: ChartView {
                base,
                ext: Vec::new(),
            },
            scans: st.frontier.clone(),
            frames,
            scratch: Vec::new(),
            memo: HashMap::new(),
            error: None,
        }
    }

    /// The parser state in frame `depth` (for a caller that walked there).
    pub fn state_at(&self, depth: usize) -> CfgState {
        let f = self.frames[depth];
        CfgState {
            sets: f.sets,
            frontier: self.scans[f.scans_start..f.scans_end].to_vec(),
            accepting: f.accepting,
        }
    }
}

impl CfgStepper<'_> {
    fn complete(&mut self, sets: u32, done: &[(u32, u32)]) -> crate::error::Result<Completed> {
        // The newest set identifies the whole chart view: sets made during the
        // walk come from this memo, so equal pointers mean equal charts.
        let top = self.chart.set(sets - 1) as *const EarleySet as usize;
        let key = (top, sets, done.to_vec());
        if let Some(hit) = self.memo.get(&key) {
            return Ok(hit.clone());
        }
        let (set, started, acc) = self.cfg.complete_lexemes(&self.chart, sets, done)?;
        let result = (Arc::new(set), started, acc);
        self.memo.insert(key, result.clone());
        Ok(result)
    }
}

impl TrieStepper for CfgStepper<'_> {
    fn step(&mut self, depth: usize, byte: u8) -> bool {
        if self.error.is_some() {
            return false;
        }
        let parent = self.frames[depth - 1];
        self.scans.truncate(parent.scans_end);
        self.chart
            .ext
            .truncate(parent.sets as usize - self.chart.base.len());
        let mut out = std::mem::take(&mut self.scratch);
        out.clear();
        let frontier = std::mem::take(&mut self.scans);
        let cfg = self.cfg;
        let stepped = cfg.step_frontier(
            &frontier[parent.scans_start..parent.scans_end],
            parent.sets,
            byte,
            &mut out,
            &mut |sets, done| self.complete(sets, done),
        );
        self.scans = frontier;
        let (sets, accepting) = match stepped {
            Ok(Some((set, acc))) => {
                let sets = parent.sets + set.is_some() as u32;
                if let Some(set) = set {
                    self.chart.ext.push(set);
                }
                (sets, acc)
            }
            Ok(None) => {
                self.scratch = out;
                return false;
            }
            Err(e) => {
                self.error = Some(e);
                self.scratch = out;
                return false;
            }
        };
        let start = self.scans.len();
        self.scans.extend_from_slice(&out);
        self.scratch = out;
        self.frames[depth] = Frame {
            scans_start: start,
            scans_end: self.scans.len(),
            sets,
            accepting,
        };
        start != self.scans.len() || accepting
    }
}
