//! Walking the token trie with the Earley parser.
//!
//! Frame `d` is the parser state after `d` bytes below the walk's start. A
//! frontier is kept as groups `(lexer state, origin)`, where a lexer state is
//! the sorted set of `(lexeme, DFA state)` pairs of the scans that started at
//! that origin, interned per walk: stepping a group by a byte is then one
//! table lookup once that transition has been seen (`lexstates`), which is
//! what makes a walk over ~10^5 trie nodes cheap. Completions (new Earley
//! sets) are memoized by chart view, so each distinct one is computed once
//! per walk.

use rustc_hash::FxHashMap as HashMap;
use std::cell::RefCell;
use std::sync::Arc;

use super::ast::Lexing;
use super::earley::{CfgState, Chart, ChartRead, ChartView, EarleySet, MAX_FRONTIER};
use super::lexstates::{keep_table, take_table, LexStates, EMPTY};
use super::longest::branches;
use super::lowered::Cfg;
use crate::error::{Error, Result};
use crate::trie::TrieStepper;

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

/// Completions of one chart view, by completed (lexeme, origin) list and
/// newline width; the view is named by its newest set's address and its
/// number of sets.
type MemoBucket = Vec<((Vec<(u32, u32)>, u32), Completion)>;

/// What the walk needs of a completion: the new set, whether it accepts, the
/// lexer state its predicted lexemes start in, and the sets before it (the
/// indenter's tokens; usually none).
#[derive(Clone)]
struct Completion {
    set: Arc<EarleySet>,
    /// Whether the text may end here or a token terminal may follow.
    accepting: bool,
    started: u32,
    /// 0 for none, else `k + 1` for `CfgStepper::chains[k]`. An index, not
    /// the sets: an `Option<Arc<..>>` here made every JSON mask 5-10% slower.
    before: u32,
}

pub struct CfgStepper<'a> {
    cfg: &'a Cfg,
    chart: ChartView<'a>,
    lex: LexStates,
    groups: Vec<Group>,
    frames: Vec<Frame>,
    /// Completions by chart view and completed (lexeme, origin) list: many
    /// trie nodes complete the same lexemes from the same chart.
    memo: HashMap<(usize, u32), MemoBucket>,
    after: Vec<(u32, u32)>,
    before: Vec<(u32, u32)>,
    /// The sets a completion adds before its last (the indenter's tokens),
    /// by `Completion::before` - 1.
    chains: Vec<Vec<Arc<EarleySet>>>,
    /// A bound exceeded during the walk; the caller reports it.
    pub error: Option<Error>,
}

/// A walk's buffers, kept by each thread between walks: made anew, each
/// allocation was a cache miss on every mask (the allocator's free list is
/// cold after other work), and the frames alone are a few KiB to write.
#[derive(Default)]
struct Scratch {
    groups: Vec<Group>,
    frames: Vec<Frame>,
    memo: HashMap<(usize, u32), MemoBucket>,
    ext: Vec<Arc<EarleySet>>,
    after: Vec<(u32, u32)>,
    before: Vec<(u32, u32)>,
}

/// A memo with more slots than this is not kept (one walk's outlier).
const KEPT_MEMO_SLOTS: usize = 1024;

thread_local! {
    static SCRATCH: RefCell<Option<Scratch>> = const { RefCell::new(None) };
}

impl Drop for CfgStepper<'_> {
    fn drop(&mut self) {
        keep_table(
            self.cfg.id,
            std::mem::replace(&mut self.lex, LexStates::empty()),
        );
        // Emptied here, so the sets they hold are freed now, as before.
        let mut memo = std::mem::take(&mut self.memo);
        memo.clear();
        if memo.capacity() > KEPT_MEMO_SLOTS {
            memo = HashMap::default();
        }
        let mut ext = std::mem::take(&mut self.chart.ext);
        ext.clear();
        let scratch = Scratch {
            groups: std::mem::take(&mut self.groups),
            frames: std::mem::take(&mut self.frames),
            memo,
            ext,
            after: std::mem::take(&mut self.after),
            before: std::mem::take(&mut self.before),
        };
        SCRATCH.with(|s| *s.borrow_mut() = Some(scratch));
    }
}

impl<'a> CfgStepper<'a> {
    /// A stepper whose frame 0 is `st` (over the first `st.sets` sets of `chart`).
    pub fn new(cfg: &'a Cfg, chart: &'a Chart, st: &CfgState, max_depth: usize) -> Self {
        let mut lex = take_table(cfg.id);
        let scratch = SCRATCH
            .with(|s| s.borrow_mut().take())
            .unwrap_or_else(|| Scratch {
                memo: HashMap::with_capacity_and_hasher(64, Default::default()),
                ..Scratch::default()
            });
        let mut by_origin: Vec<(u32, Vec<(u32, u32)>)> = Vec::new();
        if cfg.has_alone {
            by_origin = branches(cfg, &st.frontier);
        } else {
            for s in &st.frontier {
                match by_origin.iter_mut().find(|(o, _)| *o == s.origin) {
                    Some((_, pairs)) => pairs.push((s.lexeme, s.state)),
                    None => by_origin.push((s.origin, vec![(s.lexeme, s.state)])),
                }
            }
        }
        let mut groups = scratch.groups;
        groups.clear();
        groups.extend(by_origin.into_iter().map(|(origin, pairs)| Group {
            lex: lex.intern(cfg, pairs),
            origin,
        }));
        // Frames are written before they are read (frame d by the step to
        // depth d), so stale ones from an earlier walk do no harm.
        let mut frames = scratch.frames;
        frames.resize(
            max_depth + 2,
            Frame {
                start: 0,
                end: 0,
                sets: 0,
            },
        );
        frames[0] = Frame {
            start: 0,
            end: groups.len(),
            sets: st.sets,
        };
        CfgStepper {
            cfg,
            chart: ChartView {
                base: chart,
                len: st.sets,
                ext: scratch.ext,
            },
            lex,
            groups,
            frames,
            memo: scratch.memo,
            after: scratch.after,
            before: scratch.before,
            chains: Vec::new(),
            error: None,
        }
    }

    /// The new Earley sets for completed `done` (and a newline's `width`)
    /// over a view of `sets` sets, and the lexer state the last one's
    /// predicted lexemes start in.
    // Inlined: a call of its own cost JSON masks about 5%.
    #[inline(always)]
    fn complete(&mut self, sets: u32, done: &[(u32, u32)], width: u32) -> Result<Completion> {
        // Sets made during a walk all come from this memo (which keeps them
        // alive), so the newest set's address identifies the chart view.
        let top = self.chart.set(sets - 1) as *const EarleySet as usize;
        // A view rarely sees more than a few distinct completions: scan its
        // bucket instead of building a key.
        if let Some(bucket) = self.memo.get(&(top, sets)) {
            if let Some((_, hit)) = bucket
                .iter()
                .find(|((d, w), _)| d.as_slice() == done && *w == width)
            {
                return Ok(hit.clone());
            }
        }
        let c = self.cfg.complete_lexemes(&self.chart, sets, done, width)?;
        let started = self.lex.intern(
            self.cfg,
            c.scans.iter().map(|s| (s.lexeme, s.state)).collect(),
        );
        // A set that waits for a token terminal is live at a token's end
        // (`tokenterm`): the walk's liveness counts it with acceptance.
        let live_end = c.accepting || self.cfg.waits_for_tokens(&c.set);
        let result = Completion {
            set: Arc::new(c.set),
            accepting: live_end,
            started,
            before: if c.before.is_empty() {
                0
            } else {
                self.keep_chain(c.before)
            },
        };
        self.memo
            .entry((top, sets))
            .or_default()
            .push(((done.to_vec(), width), result.clone()));
        Ok(result)
    }

    /// Keeps `sets` as a chain; returns its `Completion::before`.
    #[cold]
    #[inline(never)]
    fn keep_chain(&mut self, sets: Vec<EarleySet>) -> u32 {
        self.chains.push(sets.into_iter().map(Arc::new).collect());
        self.chains.len() as u32
    }

    /// Adds chain `k` (see `Completion::before`); returns its length.
    #[cold]
    #[inline(never)]
    fn push_chain(&mut self, k: u32) -> u32 {
        let before = &self.chains[k as usize - 1];
        self.chart.ext.extend(before.iter().cloned());
        before.len() as u32
    }

    /// Adds `c`'s sets to the view of `sets` sets; returns the new count.
    #[inline(always)]
    fn push_completion(&mut self, sets: u32, c: Completion) -> u32 {
        let mut sets = sets;
        if c.before != 0 {
            sets += self.push_chain(c.before);
        }
        // Moved, not cloned: an Arc clone is an atomic add, and this runs
        // once per completion of a walk.
        self.chart.ext.push(c.set);
        sets + 1
    }

    /// Pushes the group `(lex, origin)` stepped by `byte` onto the current
    /// frame; records the lexemes that end after the byte in `after` and the
    /// greedy ones it ends before it in `before`.
    fn step_group(
        &mut self,
        g: Group,
        byte: u8,
        after: &mut Vec<(u32, u32)>,
        before: &mut Vec<(u32, u32)>,
    ) {
        let (next, ended) = self.lex.step(self.cfg, g.lex, byte);
        if ended != 0 {
            before.extend(
                self.lex.ends_before[ended as usize]
                    .iter()
                    .map(|&l| (l, g.origin)),
            );
        }
        if next != EMPTY {
            self.groups.push(Group {
                lex: next,
                origin: g.origin,
            });
            after.extend(
                self.lex.states[next as usize]
                    .after
                    .iter()
                    .map(|&l| (l, g.origin)),
            );
        }
    }

    /// Longest-match lexing: one byte for each group of frame `parent`
    /// (see `step_inner`); returns the number of sets after it. Out of line,
    /// so that the all-splits walk's loop stays small.
    #[inline(never)]
    fn step_branches(
        &mut self,
        parent: Frame,
        byte: u8,
        after: &mut Vec<(u32, u32)>,
    ) -> Result<u32> {
        let mut sets = parent.sets;
        let mut lone_ends: Vec<(u32, u32)> = Vec::new();
        // Each group is a branch: its scans read the byte, and where
        // lexemes end before it (no scan reads it, or back-off) a
        // branch goes on from their end, where the byte must start a
        // lexeme.
        for i in parent.start..parent.end {
            let g = self.groups[i];
            let (next, end) = self.lex.step_longest(self.cfg, g.lex, byte);
            if next != EMPTY {
                self.groups.push(Group {
                    lex: next,
                    origin: g.origin,
                });
            }
            if end == 0 {
                continue;
            }
            let e = &self.lex.longest_ends[end as usize];
            if self.cfg.has_alone && self.cfg.lone_alone(&self.lex.states[g.lex as usize].pairs) {
                // Completed together below (see `Cfg::lone_alone`).
                lone_ends.extend(e.ends.iter().map(|&l| (l, g.origin)));
                continue;
            }
            let (width, guards) = (e.width, e.guards);
            let done = &mut *after;
            done.clear();
            done.extend(e.ends.iter().map(|&l| (l, g.origin)));
            let c = self.complete(sets, done, width)?;
            let (started, _) = self.lex.step(self.cfg, c.started, byte);
            if started == EMPTY {
                continue;
            }
            sets = self.push_completion(sets, c);
            if self.cfg.has_alone {
                for part in self.lex.split(self.cfg, started).iter() {
                    let lex = self.lex.join(self.cfg, *part, guards);
                    self.groups.push(Group {
                        lex,
                        origin: sets - 1,
                    });
                }
                continue;
            }
            let lex = self.lex.join(self.cfg, started, guards);
            self.groups.push(Group {
                lex,
                origin: sets - 1,
            });
        }
        if !lone_ends.is_empty() {
            let c = self.complete(sets, &lone_ends, 0)?;
            let (started, _) = self.lex.step(self.cfg, c.started, byte);
            if started != EMPTY {
                sets = self.push_completion(sets, c);
                for part in self.lex.split(self.cfg, started).iter() {
                    self.groups.push(Group {
                        lex: *part,
                        origin: sets - 1,
                    });
                }
            }
        }
        Ok(sets)
    }

    /// One byte; `after` and `before` are empty scratch buffers for the
    /// lexemes that end after and before it.
    fn step_inner(
        &mut self,
        depth: usize,
        byte: u8,
        after: &mut Vec<(u32, u32)>,
        before: &mut Vec<(u32, u32)>,
    ) -> Result<bool> {
        let parent = self.frames[depth - 1];
        self.groups.truncate(parent.end);
        self.chart
            .ext
            .truncate((parent.sets - self.chart.len) as usize);
        let start = self.groups.len();
        if self.cfg.lexing == Lexing::Longest {
            // Out of line (`step_branches`): inlined here, it made the
            // all-splits path below, JSON's, several percent slower.
            let sets = self.step_branches(parent, byte, after)?;
            if self.groups.len() - start > MAX_FRONTIER {
                return Err(Error::LimitExceeded(format!(
                    "more than {MAX_FRONTIER} lexer branches at once (grammar too ambiguous)"
                )));
            }
            self.frames[depth] = Frame {
                start,
                end: self.groups.len(),
                sets,
            };
            return Ok(self.groups.len() > start);
        }
        // All-splits lexing.
        let mut sets = parent.sets;
        let mut accepting = false;
        for i in parent.start..parent.end {
            let g = self.groups[i];
            self.step_group(g, byte, after, before);
        }
        if !before.is_empty() {
            let c = self.complete(sets, before, 0)?;
            let started = c.started;
            sets = self.push_completion(sets, c);
            // Lexemes started here end before the byte only if they
            // matched the empty string, which prediction already took.
            let g = Group {
                lex: started,
                origin: sets - 1,
            };
            before.clear();
            self.step_group(g, byte, after, before);
        }
        if !after.is_empty() {
            let c = self.complete(sets, after, 0)?;
            let started = c.started;
            accepting = c.accepting;
            sets = self.push_completion(sets, c);
            if started != EMPTY {
                self.groups.push(Group {
                    lex: started,
                    origin: sets - 1,
                });
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
    /// All-splits lexing: where every scan of frame 0 is a greedy lexeme
    /// that has read a whole match and can read no more (the token read last
    /// ended a literal), each would end before whatever byte comes next, so
    /// they end here instead: frame 0 becomes their completion, with the
    /// lexemes it predicts at their start. A mask walk then starts those
    /// lexemes once, at the root, rather than once under each child of the
    /// root, where each is a lexer-cache entry of its own (after a token
    /// that ended a tool call's end tag: 250 entries, 5 ms). The language is
    /// the same: the predicted lexemes only read bytes of the ended ones'
    /// follow sets, the bytes before which they would have ended. Returns
    /// whether frame 0 changed (not when nothing is predicted after them).
    pub fn end_finished_lexemes(&mut self) -> Result<bool> {
        self.end_finished_lexemes_at(0)
    }

    /// `end_finished_lexemes` for frame `depth` (the deeper frames are
    /// dropped): a literal that a token ends inside itself, at a trie node
    /// below a mask's root (after `<think`, the tokens `>...` end the tag's
    /// begin at their first byte), has the same children to stop under.
    pub fn end_finished_lexemes_at(&mut self, depth: usize) -> Result<bool> {
        if self.cfg.lexing != Lexing::AllSplits {
            return Ok(false);
        }
        let f = self.frames[depth];
        let mut done = Vec::new();
        for g in &self.groups[f.start..f.end] {
            for &(l, q) in &self.lex.states[g.lex as usize].pairs {
                let lexeme = self.cfg.scan_lexeme(l);
                let finished =
                    lexeme.greedy && lexeme.dfa.as_ref().is_some_and(|d| d.is_finished(q));
                if !finished {
                    return Ok(false);
                }
                done.push((l, g.origin));
            }
        }
        if done.is_empty() {
            return Ok(false);
        }
        done.sort_unstable();
        done.dedup();
        let c = self.complete(f.sets, &done, 0)?;
        let started = c.started;
        if started == EMPTY {
            return Ok(false);
        }
        // What deeper frames stepped is dropped (as a step there does).
        self.groups.truncate(f.end);
        (self.chart.ext).truncate((f.sets - self.chart.len) as usize);
        let sets = self.push_completion(f.sets, c);
        let start = self.groups.len();
        self.groups.push(Group {
            lex: started,
            origin: sets - 1,
        });
        self.frames[depth] = Frame {
            start,
            end: start + 1,
            sets,
        };
        Ok(true)
    }

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
        // Reused buffers for ending lexemes: this runs once per trie node.
        let mut after = std::mem::take(&mut self.after);
        let mut before = std::mem::take(&mut self.before);
        after.clear();
        before.clear();
        let stepped = self.step_inner(depth, byte, &mut after, &mut before);
        self.after = after;
        self.before = before;
        match stepped {
            Ok(live) => live,
            Err(e) => {
                self.error = Some(e);
                false
            }
        }
    }
}
