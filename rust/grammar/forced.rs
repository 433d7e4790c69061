//! What every continuation of a state must start with: forced bytes (the
//! one byte the grammar allows next, repeatedly) and forced tokens (the
//! tokens a jump-forward may take without changing the language).

use super::{sets_of, CompiledGrammar, Engine, ParseState, State, MAX_FORCED_BYTES};
use crate::cfg::earley::Chart;
use crate::cfg::walk::CfgStepper;
use crate::error::Result;
use crate::trie::DfaStepper;

impl CompiledGrammar {
    /// The bytes every continuation from `s` must start with (empty when EOS
    /// is allowed or the next byte is not determined), the state after them,
    /// and the chart that state uses.
    pub fn forced_bytes(&self, chart: &Chart, s: &State) -> Result<(Vec<u8>, State, Chart)> {
        let mut out = Vec::new();
        let mut st = s.clone();
        let mut chart = chart.clone();
        while out.len() < MAX_FORCED_BYTES
            && !self.is_accepting(&st)
            && !self.expects_tokens(&chart, &st)?
        {
            let next = match (&self.engine, &st.parse) {
                (Engine::Regex(dfa), &ParseState::Dfa(q)) => dfa.forced_byte(q),
                _ => self.only_live_byte(&mut chart, &st)?,
            };
            let Some(b) = next else { break };
            out.push(b);
            st = self
                .advance_bytes(&mut chart, &st, &[b])?
                .expect("a forced byte is live");
        }
        Ok((out, st, chart))
    }

    /// The one byte that keeps `s` live, if exactly one does.
    fn only_live_byte(&self, chart: &mut Chart, s: &State) -> Result<Option<u8>> {
        let live = self.live_bytes(chart, s, 2)?;
        Ok(if let [b] = live[..] { Some(b) } else { None })
    }

    /// The first `limit` bytes (in byte order) that keep `s` live; `chart` is
    /// left as it was.
    fn live_bytes(&self, chart: &mut Chart, s: &State, limit: usize) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        for b in 0..=255u8 {
            if out.len() == limit {
                break;
            }
            if self.advance_bytes(chart, s, &[b])?.is_some() {
                chart.truncate(sets_of(s));
                out.push(b);
            }
        }
        Ok(out)
    }

    /// Tokens that spell a prefix of the forced bytes and that every sampler
    /// would agree on: each is the longest vocabulary token matching at its
    /// position, and the last is dropped if a longer allowed token could
    /// extend past the forced bytes (the tokenizer might prefer it).
    pub fn forced_tokens(&self, chart: &Chart, s: &State) -> Result<Vec<u32>> {
        let mut out = Vec::new();
        let mut chart = chart.clone();
        let mut s = s.clone();
        while !s.terminated && out.len() < MAX_FORCED_BYTES {
            let (forced, end, end_chart) = self.forced_bytes(&chart, &s)?;
            let trie = self.vocab.trie();
            let mut pos = 0;
            while pos < forced.len() {
                let rest = &forced[pos..];
                let (node, consumed, hits) = trie.follow(rest);
                let Some(&(len, token)) = hits.last() else {
                    break;
                };
                if consumed == rest.len() && self.extends_below(node, &end_chart, &end)? {
                    break;
                }
                out.push(token);
                pos += len;
            }
            if pos < forced.len() {
                break;
            }
            chart = end_chart;
            if self.expects_tokens(&chart, &end)? {
                // Only one token terminal's one id may come next: it is forced too.
                let Some(id) = self.forced_token_terminal(&mut chart, &end)? else {
                    break;
                };
                let Some(next) = self.advance(&mut chart, &end, id)? else {
                    break;
                };
                out.push(id);
                s = next;
                continue;
            }
            // Text that must end here forces EOS, when there is only one EOS id.
            if let [eos] = self.vocab.eos_token_ids() {
                if self.is_accepting(&end) && self.live_bytes(&mut chart, &end, 1)?.is_empty() {
                    out.push(*eos);
                }
            }
            break;
        }
        Ok(out)
    }

    /// The one token allowed at `s` when no byte, no EOS and exactly one
    /// listed id of the expected token terminals may follow.
    fn forced_token_terminal(&self, chart: &mut Chart, s: &State) -> Result<Option<u32>> {
        let (Engine::Cfg { cfg, .. }, ParseState::Cfg(c)) = (&self.engine, &s.parse) else {
            return Ok(None);
        };
        if c.accepting || !self.live_bytes(chart, s, 1)?.is_empty() {
            return Ok(None);
        }
        let n = self.vocab.num_tokens() as u32;
        let mut only: Option<u32> = None;
        for l in cfg.expected_token_lexemes(&*chart, c)? {
            let Some(set) = &cfg.lexemes[l as usize].tokens else {
                continue;
            };
            if set.negated {
                return Ok(None);
            }
            for &(lo, hi) in &set.ranges {
                if lo >= n {
                    continue;
                }
                if lo != hi.min(n - 1) || only.is_some_and(|o| o != lo) {
                    return Ok(None);
                }
                only = Some(lo);
            }
        }
        Ok(only)
    }

    /// True if some token below trie `node` stays live from state `s`.
    fn extends_below(&self, node: usize, chart: &Chart, s: &State) -> Result<bool> {
        let trie = self.vocab.trie();
        match (&self.engine, &s.parse) {
            (Engine::Regex(dfa), &ParseState::Dfa(q)) => {
                let mut st = DfaStepper::new(q, |a, b| dfa.step(a, b), trie.max_depth());
                Ok(trie.any_below(node, &mut st))
            }
            (Engine::Cfg { cfg, .. }, ParseState::Cfg(c)) => {
                let mut st = CfgStepper::new(cfg, chart, c, trie.max_depth());
                let found = trie.any_below(node, &mut st);
                match st.error.take() {
                    Some(e) => Err(e),
                    None => Ok(found),
                }
            }
            _ => unreachable!("state from another grammar"),
        }
    }
}
