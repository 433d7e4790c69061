//! Per-request state: the current grammar state plus a per-token history so
//! `rollback` is a pop, not a re-parse. For context-free grammars the Earley
//! chart lives here too; forks, draft walks and snapshots (`Position`, handed
//! to pool threads) share its sets: a copy costs two reference counts
//! whatever its length (see `cfg::earley::chart`).

use std::sync::Arc;

use crate::cfg::earley::Chart;
use crate::cfg::fillmemo::Asker;
use crate::error::Result;
use crate::grammar::{sets_of, CompiledGrammar, State};
use crate::invalid;
use crate::tree::DraftTree;

#[derive(Clone, Debug)]
pub struct MatcherCore {
    grammar: Arc<CompiledGrammar>,
    chart: Chart,
    state: State,
    /// `history[i]` is the state before the i-th consumed token.
    history: Vec<State>,
}

/// A split warm-up walk fills at most this many prefixes of each token: a
/// real vocabulary's tokens have a few, and a vocabulary of `a`, `aa`, `aaa`,
/// ... would otherwise make each token of the walk a fill per byte.
const MAX_SPLITS_PER_TOKEN: usize = 16;

impl MatcherCore {
    pub fn new(grammar: Arc<CompiledGrammar>) -> Self {
        let state = grammar.initial_state();
        let chart = grammar.initial_chart();
        MatcherCore {
            grammar,
            chart,
            state,
            history: Vec::new(),
        }
    }

    pub fn grammar(&self) -> &Arc<CompiledGrammar> {
        &self.grammar
    }

    pub fn state(&self) -> &State {
        &self.state
    }

    /// Number of tokens consumed (and so the most `rollback` can undo).
    pub fn num_consumed(&self) -> usize {
        self.history.len()
    }

    /// Checks ids against the model's vocabulary width, before anything changes.
    pub fn check_ids(&self, tokens: &[i64]) -> Result<Vec<u32>> {
        let vocab = self.grammar.vocab();
        tokens.iter().map(|&t| vocab.check_token_id(t)).collect()
    }

    /// Consumes `token` if allowed; otherwise returns false and changes nothing.
    pub fn consume_token(&mut self, token: u32) -> Result<bool> {
        let next = self.grammar.advance(&mut self.chart, &self.state, token)?;
        Ok(self.step_to(next))
    }

    /// Makes `next` (if any) the current state, the old one going to history.
    fn step_to(&mut self, next: Option<State>) -> bool {
        let Some(next) = next else { return false };
        let prev = std::mem::replace(&mut self.state, next);
        self.history.push(prev);
        true
    }

    /// Consumes raw text bytes (e.g. what another vocabulary's tokens spell)
    /// if the grammar allows all of them; otherwise returns false and changes
    /// nothing. One call is one step for `rollback`.
    pub fn consume_bytes(&mut self, bytes: &[u8]) -> Result<bool> {
        let next = self
            .grammar
            .advance_bytes(&mut self.chart, &self.state, bytes)?;
        Ok(self.step_to(next))
    }

    /// A copy of this matcher (state and history) over `grammar`, which must be
    /// the same compiled grammar, possibly for another vocabulary.
    pub fn fork_onto(&self, grammar: Arc<CompiledGrammar>) -> Result<MatcherCore> {
        if !self.grammar.same_language(&grammar) {
            return invalid!(
                "the grammar is not this matcher's grammar (use Grammar.for_tokenizer to get \
                 the same grammar over another vocabulary)"
            );
        }
        Ok(MatcherCore {
            grammar,
            ..self.clone()
        })
    }

    /// All-or-nothing: consumes every token, or none if any is not allowed.
    pub fn consume_tokens(&mut self, tokens: &[u32]) -> Result<bool> {
        let (chart, states) = self.draft_states(tokens)?;
        if states.len() != tokens.len() + 1 {
            return Ok(false);
        }
        self.chart = chart;
        // states[0] is the current state; each later one replaces it in turn.
        for next in states.into_iter().skip(1) {
            self.step_to(Some(next));
        }
        Ok(true)
    }

    /// How many leading tokens would be accepted; the state does not change.
    pub fn validate_tokens(&self, tokens: &[u32]) -> Result<usize> {
        Ok(self.draft_states(tokens)?.1.len() - 1)
    }

    pub fn rollback(&mut self, n: usize) -> Result<()> {
        if n > self.history.len() {
            return invalid!(
                "cannot roll back {n} tokens: only {} have been consumed",
                self.history.len()
            );
        }
        if n > 0 {
            let keep = self.history.len() - n;
            self.state = self.history[keep].clone();
            self.history.truncate(keep);
            self.chart.truncate(sets_of(&self.state));
        }
        Ok(())
    }

    pub fn reset(&mut self) {
        self.state = self.grammar.initial_state();
        self.chart = self.grammar.initial_chart();
        self.history.clear();
    }

    pub fn is_accepting(&self) -> bool {
        self.grammar.is_accepting(&self.state)
    }

    pub fn is_terminated(&self) -> bool {
        self.state.terminated
    }

    pub fn fill_row(&self, row: &mut [u32]) -> Result<()> {
        self.grammar.fill_row(&self.chart, &self.state, row)
    }

    /// Walks a copy of this matcher along `tokens`, filling the mask at the
    /// start and after each token with the rows kept in the grammar's fill
    /// memo (which ones: the comment inside), so that a request meeting
    /// those states copies their rows (the adapters walk a sample text
    /// where the framework compiles). Stops at the first token the grammar
    /// refuses; returns how many it consumed.
    ///
    /// With `split_tokens`, the walk also fills the state after each token
    /// that is a proper prefix of the next one (`"` before `",`, `Photo`
    /// before `PhotoEditor`), then goes on from the whole token. The sample
    /// is tokenized one way, and a draft tree's tokens split text every
    /// other way: a closing quote alone (` "`, `or "`) leaves the state
    /// between a value and its `,`, which a walk along `",` never fills.
    /// The prefixes are what such drafts meet first (see `_warm.py`).
    ///
    /// The matcher is not changed; nor is any mask, only where it is
    /// computed.
    pub fn warm_up(&self, tokens: &[u32], split_tokens: bool) -> Result<usize> {
        let mut walker = MatcherCore {
            grammar: self.grammar.clone(),
            chart: self.chart.clone(),
            state: self.state.clone(),
            history: Vec::new(),
        };
        let mut row = vec![0u32; self.grammar.words()];
        let fill = |w: &MatcherCore, row: &mut [u32], asker: Asker| {
            w.grammar
                .fill_row_keeping(&w.chart, &w.state, row, Some(asker))
        };
        // The one state the request surely meets is where it stands now:
        // its row is kept as a request's fill keeps it, making room by
        // recency if the grammar's memo is full (a cached grammar's), and
        // asked for again last, so it is the most recently used. The walk's
        // own states are kept only while there is room, so the first ones
        // (those the request meets first) stay.
        fill(self, &mut row, Asker::Fill)?;
        let mut walked = 0;
        for &t in tokens {
            if walker.is_terminated() {
                break;
            }
            if split_tokens {
                // Each prefix is consumed and rolled back on the walker
                // itself, whose chart it owns after its first chunk: a fork
                // per prefix would share the chart, and every chunk a fork
                // completed would copy the chart's index (a walk quadratic
                // in its length where each byte ends a lexeme).
                for prefix in self.proper_prefix_tokens(t) {
                    if walker.consume_token(prefix)? {
                        if !walker.is_terminated() {
                            fill(&walker, &mut row, Asker::WarmUp)?;
                        }
                        walker.rollback(1)?;
                    }
                }
            }
            if !walker.consume_token(t)? {
                break;
            }
            // The walk never rolls back past its last token: no history
            // grows with its length.
            walker.history.clear();
            walked += 1;
            fill(&walker, &mut row, Asker::WarmUp)?;
        }
        fill(self, &mut row, Asker::Fill)?;
        Ok(walked)
    }

    /// The tokens whose bytes are a proper prefix of token `t`'s (shortest
    /// first; one id per distinct text; the longest `MAX_SPLITS_PER_TOKEN`
    /// of them), none for a special token.
    fn proper_prefix_tokens(&self, t: u32) -> Vec<u32> {
        let vocab = self.grammar.vocab();
        let Some(bytes) = vocab.text_bytes(t) else {
            return Vec::new();
        };
        let (_, _, hits) = vocab.trie().follow(bytes);
        let proper: Vec<u32> = hits
            .into_iter()
            .filter(|&(len, _)| len < bytes.len())
            .map(|(_, id)| id)
            .collect();
        let skip = proper.len().saturating_sub(MAX_SPLITS_PER_TOKEN);
        proper[skip..].to_vec()
    }

    pub fn forced_tokens(&self) -> Result<Vec<u32>> {
        self.grammar.forced_tokens(&self.chart, &self.state)
    }

    /// The states after each accepted prefix of `drafts`, `[s0, s1, ..., sk]`
    /// where `k` drafts were accepted, and a chart holding the sets they use.
    /// The matcher is not changed.
    pub fn draft_states(&self, drafts: &[u32]) -> Result<(Chart, Vec<State>)> {
        self.position().draft_states(drafts)
    }

    /// The states of a draft tree's nodes (see `Position::tree_states`); the
    /// matcher is not changed.
    pub fn tree_states(&self, tree: &DraftTree) -> Result<TreeStates> {
        self.position().tree_states(tree)
    }

    /// Where the matcher stands, as an owned value: reference counts,
    /// whatever the chart's length (advancing it copies at most the chart's
    /// last, partial chunk).
    pub fn position(&self) -> Position {
        Position {
            grammar: self.grammar.clone(),
            chart: self.chart.clone(),
            state: self.state.clone(),
        }
    }
}

/// A matcher's grammar, chart and state without its history: what advancing
/// along drafts needs, owned, so that a pool thread may do it after the call
/// that asked for it has moved on (see `claim`).
#[derive(Clone, Debug)]
pub struct Position {
    grammar: Arc<CompiledGrammar>,
    chart: Chart,
    state: State,
}

/// The states of a draft tree's nodes: `states[i]` is node i's state and the
/// index of the chart in `charts` that holds its sets, or None if the grammar
/// refuses node i's token or an ancestor's.
pub struct TreeStates {
    pub charts: Vec<Chart>,
    pub states: Vec<Option<(usize, State)>>,
}

impl TreeStates {
    /// Per node, whether the grammar accepts the path to it.
    pub fn valid(&self) -> Vec<bool> {
        self.states.iter().map(Option::is_some).collect()
    }
}

impl Position {
    /// The states after each accepted prefix of `drafts`, `[s0, s1, ..., sk]`
    /// where `k` drafts were accepted, and a chart holding the sets they use.
    pub fn draft_states(self, drafts: &[u32]) -> Result<(Chart, Vec<State>)> {
        let Position {
            grammar,
            mut chart,
            state,
        } = self;
        let mut states = Vec::with_capacity(drafts.len() + 1);
        states.push(state);
        for &t in drafts {
            let cur = states.last().expect("non-empty");
            match grammar.advance(&mut chart, cur, t)? {
                Some(next) => states.push(next),
                None => break,
            }
        }
        Ok((chart, states))
    }

    /// Advances through every node of `tree` from this position. A node that
    /// adds no Earley set shares its parent's chart (a regex tree keeps one
    /// empty chart); one that adds sets gets a copy of it (two reference
    /// counts).
    pub fn tree_states(self, tree: &DraftTree) -> Result<TreeStates> {
        let Position {
            grammar,
            chart,
            state,
        } = self;
        let mut charts = vec![chart];
        let mut states: Vec<Option<(usize, State)>> = vec![None; tree.len()];
        states[0] = Some((0, state));
        for &i in &tree.order()[1..] {
            let p = tree.parent(i).expect("only node 0 has no parent");
            let Some((pc, ps)) = &states[p] else { continue };
            let pc = *pc;
            // Advanced in place: taking it out (`mem::take`) would make an
            // empty chart, two allocations a node, each a cache miss in
            // memory left cold between steps.
            let chart = &mut charts[pc];
            let parent_sets = chart.len();
            let next = grammar.advance(chart, ps, tree.token(i));
            if chart.len() == parent_sets {
                states[i] = next?.map(|s| (pc, s));
            } else {
                // New sets: the child gets its own chart; the parent keeps its prefix.
                let child = chart.clone();
                chart.truncate(parent_sets);
                states[i] = next?.map(|s| {
                    charts.push(child);
                    (charts.len() - 1, s)
                });
            }
        }
        Ok(TreeStates { charts, states })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::Vocab;

    fn matcher() -> MatcherCore {
        let toks: Vec<Vec<u8>> = ["a", "b", "<eos>"]
            .iter()
            .map(|t| t.as_bytes().to_vec())
            .collect();
        let vocab = Arc::new(Vocab::new(toks, &[2], &[], None).unwrap());
        MatcherCore::new(Arc::new(CompiledGrammar::from_regex(vocab, "a+b").unwrap()))
    }

    /// The split walk's prefixes: the tokens that spell a proper prefix of
    /// a token's text, shortest first; none for EOS.
    #[test]
    fn proper_prefix_tokens_are_the_tokens_a_text_starts_with() {
        let toks: Vec<Vec<u8>> = ["a", "b", "<eos>", "ab", "aab", "aa"]
            .iter()
            .map(|t| t.as_bytes().to_vec())
            .collect();
        let vocab = Arc::new(Vocab::new(toks, &[2], &[], None).unwrap());
        let m = MatcherCore::new(Arc::new(CompiledGrammar::from_regex(vocab, "a+b").unwrap()));
        assert_eq!(m.proper_prefix_tokens(4), vec![0, 5]);
        assert_eq!(m.proper_prefix_tokens(3), vec![0]);
        assert!(m.proper_prefix_tokens(0).is_empty());
        assert!(m.proper_prefix_tokens(2).is_empty());
        // A split walk counts whole tokens, stops where the plain walk
        // stops, and leaves the matcher where it was.
        assert_eq!(m.warm_up(&[4, 2], true).unwrap(), 2);
        assert_eq!(m.warm_up(&[4, 4], true).unwrap(), 1);
        assert_eq!(m.warm_up(&[4, 4], false).unwrap(), 1);
        assert_eq!(m.num_consumed(), 0);
        assert_eq!(m.state(), &m.grammar().initial_state());

        // A token with more prefixes than the bound: its longest ones.
        let toks: Vec<Vec<u8>> = (1..=40).map(|n| vec![b'a'; n]).collect();
        let vocab = Arc::new(Vocab::new(toks, &[], &[], None).unwrap());
        let m = MatcherCore::new(Arc::new(CompiledGrammar::from_regex(vocab, "a*").unwrap()));
        let want: Vec<u32> = (39 - MAX_SPLITS_PER_TOKEN as u32..39).collect();
        assert_eq!(m.proper_prefix_tokens(39), want);
    }

    #[test]
    fn consume_rollback_and_eos() {
        let mut m = matcher();
        assert!(!m.consume_token(1).unwrap());
        assert_eq!(m.num_consumed(), 0);
        assert!(m.consume_tokens(&[0, 0, 1]).unwrap());
        assert_eq!(m.num_consumed(), 3);
        assert!(m.is_accepting());
        assert!(m.consume_token(2).unwrap());
        assert!(m.is_terminated());
        m.rollback(1).unwrap();
        assert!(!m.is_terminated() && m.is_accepting());
        assert!(m.rollback(4).is_err());
        assert_eq!(m.num_consumed(), 3);
        m.rollback(3).unwrap();
        assert_eq!(m.state(), &m.grammar().initial_state());
        assert!(m.consume_tokens(&[0, 1]).unwrap());
        m.rollback(1).unwrap();
        assert!(!m.is_accepting() && m.num_consumed() == 1);
    }

    #[test]
    fn consume_bytes_is_one_step_and_all_or_nothing() {
        let mut m = matcher();
        assert!(!m.consume_bytes(b"aab!").unwrap());
        assert_eq!(m.num_consumed(), 0);
        assert!(m.consume_bytes(b"aa").unwrap());
        assert!(m.consume_bytes(b"ab").unwrap());
        assert!(m.is_accepting() && m.num_consumed() == 2);
        m.rollback(1).unwrap();
        assert!(!m.is_accepting());
        assert!(m.consume_token(1).unwrap() && m.consume_token(2).unwrap());
        assert!(!m.consume_bytes(b"").unwrap(), "nothing after EOS");
    }

    #[test]
    fn fork_onto_another_vocabulary_keeps_the_state() {
        let mut m = matcher();
        assert!(m.consume_tokens(&[0, 0]).unwrap());
        let toks: Vec<Vec<u8>> = ["<eos>", "ab", "aa", "b"]
            .iter()
            .map(|t| t.as_bytes().to_vec())
            .collect();
        let other = Arc::new(
            m.grammar()
                .for_vocab(Arc::new(Vocab::new(toks, &[0], &[], None).unwrap()))
                .unwrap(),
        );
        let mut f = m.fork_onto(other.clone()).unwrap();
        assert!(f.consume_token(1).unwrap() && f.is_accepting());
        assert!(f.consume_token(0).unwrap() && f.is_terminated());
        f.rollback(4).unwrap(); // the history came along: 2 tokens before the fork
        assert_eq!(f.state(), &other.initial_state());
        let unrelated =
            Arc::new(CompiledGrammar::from_regex(other.vocab().clone(), "a+b").unwrap());
        assert!(m.fork_onto(unrelated).is_err());
    }

    #[test]
    fn consume_tokens_is_atomic_and_validate_counts() {
        let mut m = matcher();
        assert_eq!(m.validate_tokens(&[0, 0, 1, 0]).unwrap(), 3);
        assert!(!m.consume_tokens(&[0, 1, 1]).unwrap());
        assert_eq!(m.num_consumed(), 0);
        assert_eq!(m.draft_states(&[0, 1, 1]).unwrap().1.len(), 3);
    }
}
