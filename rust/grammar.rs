//! Compiled grammars: immutable, shared by every matcher through an `Arc`.
//!
//! Two engines sit behind one interface: a regex is one byte DFA, whose state
//! alone determines the mask, so each state's row is computed once by a trie
//! walk and then served from a lock-free per-state cache (bounded in bytes);
//! a context-free grammar is an Earley parser over lexemes (see `cfg`), whose
//! state lives partly in the matcher's chart.

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, OnceLock};

use crate::bitmask::words_for;
use crate::budget;
use crate::cfg::ast::GrammarAst;
use crate::cfg::earley::{CfgState, Chart};
use crate::cfg::fillmemo::FillMemo;
use crate::cfg::lexcache::LexCache;
use crate::cfg::lower::lower;
use crate::cfg::lowered::Cfg;
use crate::cfg::tokenterm::{self, TokenDomain};
use crate::error::{Error, Result};
use crate::regex_dfa::{ByteDfa, DEAD};
use crate::vocab::Vocab;

mod fill;
mod forced;

/// Default bound on the memory of cached mask rows, per compiled grammar.
pub const DEFAULT_MASK_CACHE_BYTES: usize = 256 << 20;
/// Bound on the work spent grouping regex states by mask at compile time
/// (states x byte classes x rounds); past it every state gets its own row.
pub const MASK_CLASS_WORK_LIMIT: usize = 200_000_000;
/// Below a boundary node with at least this many trie nodes, grammar masks
/// use the cached lexer-only split again instead of walking with the parser.
pub const CACHED_SUBTREE_NODES: usize = 32;
/// Nested cache-and-boundary splits one fill makes along a token path (see
/// `fill_cfg_below`): each is a stack frame, and a 65,535-byte token of
/// one-byte lexemes made one per byte (a stack overflow on a 2 MiB thread).
/// Real vocabularies split a handful of times.
const MAX_FILL_LEVELS: usize = 64;
/// Bound on a regex grammar's automaton states: its mask cache keeps a slot
/// per state (or class of states). A table within the automaton size bound
/// has fewer; a long count's shared copies have as many as it counts.
pub const MAX_REGEX_STATES: usize = 1 << 22;
/// Bound on forced bytes computed in one call.
pub const MAX_FORCED_BYTES: usize = 4096;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum ParseState {
    Dfa(u32),
    Cfg(CfgState),
}

/// Where a matcher is: a parse state, or terminated by EOS.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    pub(crate) parse: ParseState,
    pub(crate) terminated: bool,
}

/// The vocabulary-independent part of a grammar is behind `Arc`s, so one
/// compiled grammar can serve several tokenizers (`for_vocab`); the caches
/// are per vocabulary.
#[derive(Debug)]
enum Engine {
    Regex(Arc<ByteDfa>),
    Cfg {
        cfg: Arc<Cfg>,
        initial_chart: Chart,
        initial: CfgState,
        lex_cache: Box<LexCache>,
        fill_memo: FillMemo,
    },
}

#[derive(Debug)]
pub struct CompiledGrammar {
    vocab: Arc<Vocab>,
    engine: Engine,
    kind: &'static str,
    source: String,
    cache: Vec<OnceLock<Box<[u32]>>>,
    /// Regex DFA state -> mask class (states with equal masks share a row).
    mask_class: Vec<u32>,
    cache_bytes: AtomicUsize,
    cache_limit: usize,
}

impl CompiledGrammar {
    fn with_engine(vocab: Arc<Vocab>, engine: Engine, kind: &'static str, source: &str) -> Self {
        let max_len = vocab.trie().max_depth();
        let mask_class = match &engine {
            Engine::Regex(dfa) => dfa
                .mask_classes(max_len, MASK_CLASS_WORK_LIMIT)
                .unwrap_or_else(|| (0..dfa.num_states() as u32).collect()),
            Engine::Cfg { .. } => Vec::new(),
        };
        let cached_states = mask_class.iter().max().map_or(0, |&m| m as usize + 1);
        CompiledGrammar {
            vocab,
            engine,
            kind,
            source: source.to_string(),
            cache: (0..cached_states).map(|_| OnceLock::new()).collect(),
            mask_class,
            cache_bytes: AtomicUsize::new(0),
            cache_limit: DEFAULT_MASK_CACHE_BYTES,
        }
    }

    /// Compiles a regex (within the compile work budget: the caller's, or
    /// `budget::DEFAULT_COMPILE_STEPS`).
    pub fn from_regex(vocab: Arc<Vocab>, pattern: &str) -> Result<Self> {
        let dfa = budget::with_budget(budget::DEFAULT_COMPILE_STEPS, || {
            let dfa = ByteDfa::new(pattern)?;
            budget::check()?;
            Ok(dfa)
        })?;
        // The mask cache has a slot per state (or per class of states).
        if dfa.num_states() > MAX_REGEX_STATES {
            return Err(Error::LimitExceeded(format!(
                "regex {pattern:?} needs {} automaton states; at most {MAX_REGEX_STATES}",
                dfa.num_states()
            )));
        }
        Ok(Self::with_engine(
            vocab,
            Engine::Regex(Arc::new(dfa)),
            "regex",
            pattern,
        ))
    }

    /// Compiles a parsed grammar (`kind` names its syntax, e.g. "gbnf"),
    /// within the compile work budget.
    pub fn from_ast(
        vocab: Arc<Vocab>,
        ast: &GrammarAst,
        kind: &'static str,
        source: &str,
    ) -> Result<Self> {
        let (cfg, initial_chart, initial) =
            budget::with_budget(budget::DEFAULT_COMPILE_STEPS, || {
                let cfg = lower(ast)?;
                let mut initial_chart = Chart::new();
                let initial = cfg.initial(&mut initial_chart)?;
                budget::check()?;
                Ok((cfg, initial_chart, initial))
            })?;
        let lex_cache = Box::new(LexCache::new(DEFAULT_MASK_CACHE_BYTES));
        let engine = Engine::Cfg {
            cfg: Arc::new(cfg),
            initial_chart,
            initial,
            lex_cache,
            fill_memo: FillMemo::default(),
        };
        Ok(Self::with_engine(vocab, engine, kind, source))
    }

    /// The same grammar over another vocabulary: the automata and the parser
    /// tables are shared, only the token-side tables and caches are new.
    /// States are vocabulary-independent, so a state of `self` is a state of
    /// the result. A grammar that names token ids (`cfg::tokenterm`) is
    /// refused: ids mean other tokens in another vocabulary.
    pub fn for_vocab(&self, vocab: Arc<Vocab>) -> Result<Self> {
        if let Engine::Cfg { cfg, .. } = &self.engine {
            if cfg.has_tokens {
                return Err(Error::InvalidArgument(
                    "this grammar names special tokens or token ids of its tokenizer: \
                     compile it again for the other tokenizer"
                        .into(),
                ));
            }
        }
        let engine = match &self.engine {
            Engine::Regex(dfa) => Engine::Regex(dfa.clone()),
            Engine::Cfg {
                cfg,
                initial_chart,
                initial,
                ..
            } => Engine::Cfg {
                cfg: cfg.clone(),
                initial_chart: initial_chart.clone(),
                initial: initial.clone(),
                lex_cache: Box::new(LexCache::new(DEFAULT_MASK_CACHE_BYTES)),
                fill_memo: FillMemo::default(),
            },
        };
        Ok(Self::with_engine(vocab, engine, self.kind, &self.source))
    }

    /// True if both share one compiled automaton / parser (same grammar,
    /// possibly over different vocabularies), so their states are interchangeable.
    pub fn same_language(&self, other: &CompiledGrammar) -> bool {
        match (&self.engine, &other.engine) {
            (Engine::Regex(a), Engine::Regex(b)) => Arc::ptr_eq(a, b),
            (Engine::Cfg { cfg: a, .. }, Engine::Cfg { cfg: b, .. }) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    pub fn vocab(&self) -> &Arc<Vocab> {
        &self.vocab
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// "regex", "gbnf", ...
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// Automaton states (regex) or rules (CFG): a measure of the grammar's size.
    pub fn num_states(&self) -> usize {
        match &self.engine {
            Engine::Regex(dfa) => dfa.num_states(),
            Engine::Cfg { cfg, .. } => cfg.rules.len(),
        }
    }

    /// Width in words of this grammar's bitmask rows.
    pub fn words(&self) -> usize {
        words_for(self.vocab.vocab_size())
    }

    pub fn initial_state(&self) -> State {
        let parse = match &self.engine {
            Engine::Regex(dfa) => ParseState::Dfa(dfa.start()),
            Engine::Cfg { initial, .. } => ParseState::Cfg(initial.clone()),
        };
        State {
            parse,
            terminated: false,
        }
    }

    /// The chart a fresh matcher starts with (empty for regexes).
    pub fn initial_chart(&self) -> Chart {
        match &self.engine {
            Engine::Regex(_) => Chart::new(),
            Engine::Cfg { initial_chart, .. } => initial_chart.clone(),
        }
    }

    pub fn is_accepting(&self, s: &State) -> bool {
        s.terminated
            || match (&self.engine, &s.parse) {
                (Engine::Regex(dfa), ParseState::Dfa(q)) => dfa.is_accepting(*q),
                (_, ParseState::Cfg(c)) => c.accepting,
                _ => unreachable!("state from another grammar"),
            }
    }

    /// The state after `bytes`; None if some byte is refused or `s` is
    /// terminated (nothing follows EOS). `chart` must hold exactly the sets
    /// `s` uses; new sets are appended (and removed on None).
    pub fn advance_bytes(
        &self,
        chart: &mut Chart,
        s: &State,
        bytes: &[u8],
    ) -> Result<Option<State>> {
        if s.terminated {
            return Ok(None);
        }
        let parse = match (&self.engine, &s.parse) {
            (Engine::Regex(dfa), ParseState::Dfa(q)) => {
                let next = dfa.step_bytes(*q, bytes);
                (next != DEAD).then_some(ParseState::Dfa(next))
            }
            (Engine::Cfg { cfg, .. }, ParseState::Cfg(c)) => {
                cfg.advance_bytes(chart, c, bytes)?.map(ParseState::Cfg)
            }
            _ => unreachable!("state from another grammar"),
        };
        Ok(parse.map(|parse| State {
            parse,
            terminated: false,
        }))
    }

    /// The state after `token`, or None if the mask at `s` forbids it.
    pub fn advance(&self, chart: &mut Chart, s: &State, token: u32) -> Result<Option<State>> {
        if let (Engine::Cfg { cfg, .. }, ParseState::Cfg(c)) = (&self.engine, &s.parse) {
            if cfg.has_tokens && !s.terminated {
                return self.advance_with_tokens(cfg, chart, s, c, token);
            }
        }
        if self.vocab.is_eos(token) {
            let accepting = self.is_accepting(s);
            return Ok(accepting.then(|| State {
                parse: s.parse.clone(),
                terminated: true,
            }));
        }
        match self.vocab.text_bytes(token) {
            Some(bytes) => self.advance_bytes(chart, s, bytes),
            None => Ok(None),
        }
    }

    /// `advance` in a grammar with token terminals (see `cfg::tokenterm`):
    /// the token read as bytes, as a token terminal, or both; an EOS id
    /// that no expected token terminal takes ends the text where it may.
    fn advance_with_tokens(
        &self,
        cfg: &Cfg,
        chart: &mut Chart,
        s: &State,
        c: &CfgState,
        token: u32,
    ) -> Result<Option<State>> {
        let before = chart.len();
        let by_bytes = match self.vocab.text_bytes(token) {
            Some(bytes) => cfg.advance_bytes(chart, c, bytes)?,
            None => None,
        };
        let domain = self.token_domain();
        let by_token = match cfg.read_token(chart, c, |set| domain.matches(set, token)) {
            Ok(x) => x,
            Err(e) => {
                chart.truncate(before);
                return Err(e);
            }
        };
        let parse = match (by_bytes, by_token) {
            (Some(a), Some(b)) => tokenterm::union(a, b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => {
                if self.vocab.is_eos(token) && c.accepting {
                    return Ok(Some(State {
                        parse: s.parse.clone(),
                        terminated: true,
                    }));
                }
                return Ok(None);
            }
        };
        Ok(Some(State {
            parse: ParseState::Cfg(parse),
            terminated: false,
        }))
    }

    /// The ids token terminals may match in this vocabulary.
    fn token_domain(&self) -> TokenDomain<'_> {
        TokenDomain {
            num_tokens: self.vocab.num_tokens() as u32,
            eos: self.vocab.eos_token_ids(),
        }
    }

    /// ORs the ids of the token terminals expected at `c` into `row`.
    fn or_token_bits(&self, cfg: &Cfg, chart: &Chart, c: &CfgState, row: &mut [u32]) -> Result<()> {
        let domain = self.token_domain();
        for l in cfg.expected_token_lexemes(chart, c)? {
            if let Some(set) = &cfg.lexemes[l as usize].tokens {
                domain.or_into(set, row);
            }
        }
        Ok(())
    }

    /// Whether a token terminal may be read at `s` (forced bytes stop there).
    fn expects_tokens(&self, chart: &Chart, s: &State) -> Result<bool> {
        match (&self.engine, &s.parse) {
            (Engine::Cfg { cfg, .. }, ParseState::Cfg(c)) if cfg.has_tokens && !s.terminated => {
                Ok(!cfg.expected_token_lexemes(chart, c)?.is_empty())
            }
            _ => Ok(false),
        }
    }

    /// True if rows of `s` are cached per state (regex states), so rows that
    /// share a state within one call can be copies.
    pub fn cacheable(&self, s: &State) -> bool {
        matches!(s.parse, ParseState::Dfa(_)) && !s.terminated
    }

    /// True if `s`'s row is already computed (a fill is then a copy).
    pub fn is_cached(&self, s: &State) -> bool {
        match &s.parse {
            _ if s.terminated => true,
            ParseState::Dfa(q) => self.cache[self.cache_slot(*q)].get().is_some(),
            ParseState::Cfg(_) => false,
        }
    }
}

/// Number of chart sets a state uses.
pub(crate) fn sets_of(s: &State) -> usize {
    match &s.parse {
        ParseState::Cfg(c) => c.sets as usize,
        ParseState::Dfa(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bitmask::iter_set_bits;
    use crate::cfg::gbnf;

    fn vocab(tokens: &[&str]) -> Arc<Vocab> {
        let toks = tokens.iter().map(|t| t.as_bytes().to_vec()).collect();
        let eos = tokens
            .iter()
            .position(|t| *t == "<eos>")
            .map(|i| vec![i as u32])
            .unwrap_or_default();
        Arc::new(Vocab::new(toks, &eos, &[], Some(tokens.len() + 5)).unwrap())
    }

    fn grammar(tokens: &[&str], pattern: &str) -> CompiledGrammar {
        CompiledGrammar::from_regex(vocab(tokens), pattern).unwrap()
    }

    fn gbnf_grammar(tokens: &[&str], src: &str) -> CompiledGrammar {
        CompiledGrammar::from_ast(vocab(tokens), &gbnf::parse(src).unwrap(), "gbnf", src).unwrap()
    }

    fn mask(g: &CompiledGrammar, chart: &Chart, s: &State) -> Vec<u32> {
        let mut row = vec![0u32; g.words()];
        g.fill_row(chart, s, &mut row).unwrap();
        iter_set_bits(&row).collect()
    }

    #[test]
    fn mask_matches_advance_and_cache_is_consistent() {
        let g = grammar(&["a", "b", "ab", "ba", "c", "<eos>"], "(ab)+c?");
        let mut chart = g.initial_chart();
        let s0 = g.initial_state();
        assert_eq!(mask(&g, &chart, &s0), vec![0, 2]);
        assert_eq!(mask(&g, &chart, &s0), vec![0, 2]); // served from the cache
        let s1 = g.advance(&mut chart, &s0, 2).unwrap().unwrap();
        assert_eq!(mask(&g, &chart, &s1), vec![0, 2, 4, 5]);
        for t in 0..6 {
            let allowed = g.advance(&mut chart, &s1, t).unwrap().is_some();
            assert_eq!(allowed, mask(&g, &chart, &s1).contains(&t));
        }
        let end = g.advance(&mut chart, &s1, 5).unwrap().unwrap();
        assert!(end.terminated);
        assert_eq!(mask(&g, &chart, &end), vec![5]);
    }

    #[test]
    fn cfg_masks_agree_with_advance() {
        let toks = ["(", ")", "()", "x", "(x", "x)", ")(", "<eos>"];
        let g = gbnf_grammar(&toks, "root ::= e\ne ::= \"x\" | \"(\" e \")\" | e e");
        let mut chart = g.initial_chart();
        let mut s = g.initial_state();
        for step in [4, 0, 3, 5, 1] {
            let m = mask(&g, &chart, &s);
            for t in 0..toks.len() as u32 {
                let mut scratch = chart.clone();
                assert_eq!(
                    g.advance(&mut scratch, &s, t).unwrap().is_some(),
                    m.contains(&t),
                    "{t}"
                );
            }
            s = g.advance(&mut chart, &s, step).unwrap().unwrap();
        }
        assert!(g.is_accepting(&s)); // (x(x))) ... = "(x" "(" "x" "x)" ")"
    }

    /// A vocabulary of every string of 1 to `max_len` bytes over
    /// `alphabet`, then `<eos>`.
    fn every_string_vocab(alphabet: &'static [u8], max_len: usize) -> Arc<Vocab> {
        let mut toks: Vec<Vec<u8>> = vec![Vec::new()];
        let mut all = Vec::new();
        for _ in 0..max_len {
            toks = toks
                .iter()
                .flat_map(|t| {
                    alphabet.iter().map(move |&c| {
                        let mut u = t.clone();
                        u.push(c);
                        u
                    })
                })
                .collect();
            all.extend(toks.iter().cloned());
        }
        all.push(b"<eos>".to_vec());
        let eos = all.len() as u32 - 1;
        Arc::new(Vocab::new(all, &[eos], &[], None).unwrap())
    }

    /// Counted repetitions give a new DFA state per character; lexer entries
    /// are shared between states no walk below a node can tell apart. Every
    /// mask along a walk must still equal what `advance` allows, token by
    /// token.
    #[test]
    fn cfg_masks_over_counted_repetitions_agree_with_advance() {
        // Every string of 1 to 7 letters over "ab\"x".
        let v = every_string_vocab(b"ab\"x", 7);
        for src in [
            "root ::= \"\\\"\" [ab]{0,30} \"\\\"\" \"x\"?",
            "root ::= ([ab]{3,9} \"x\")+",
        ] {
            let g = CompiledGrammar::from_ast(v.clone(), &gbnf::parse(src).unwrap(), "gbnf", src)
                .unwrap();
            let text: &[u8] = if src.contains("{0,30}") {
                b"\"abababababbbbaaaabababab\"x"
            } else {
                b"ababxbbbbbbbbbxaaax"
            };
            masks_follow_advance(&g, text);
        }
    }

    /// A token that ends a literal leaves its scan finished (accepting, no
    /// byte goes on); the fill ends it at the root and starts what follows
    /// there (`CfgStepper::end_finished_lexemes`), and so at a trie node
    /// where a longer token ends it inside itself (after `<t`, under `>`:
    /// `end_finished_lexemes_at`). Masks must still equal
    /// what `advance` allows at every byte: after a literal that something
    /// follows, after two literals ending at once from different origins,
    /// at the text's end (nothing predicted), and never for a greedy
    /// lexeme that accepts but may go on (`[x ]+`). Every string of up to
    /// four characters is a token, so the root's children have subtrees
    /// large enough for lexer-cache entries.
    #[test]
    fn masks_after_a_finished_literal_agree_with_advance() {
        let v = every_string_vocab(b"<t>x /", 4);
        let nested = "root ::= e\ne ::= \"<t>\" ([x ]+ | e) \"</t>\"";
        // After "<t>": "<t>" (from 0) and ">" (from 2) have both ended.
        let two = "root ::= a | b\na ::= \"<t>\" e\nb ::= \"<t\" f\n\
                   e ::= \"x\" | \"<t>\" e \"/\"\nf ::= \">\" g\ng ::= \" \" | \"<t\" f \"/\"";
        for (src, text) in [
            (nested, &b"<t><t>x x</t></t>"[..]),
            (nested, b"<t> </t>"),
            (two, b"<t><t>x/"),
            (two, b"<t><t> /"),
        ] {
            let g = CompiledGrammar::from_ast(v.clone(), &gbnf::parse(src).unwrap(), "gbnf", src)
                .unwrap();
            masks_follow_advance(&g, text);
        }
    }

    /// At every byte of `text`, the mask allows exactly the tokens
    /// `advance` takes.
    fn masks_follow_advance(g: &CompiledGrammar, text: &[u8]) {
        let check = |chart: &Chart, s: &State, at: usize| {
            let m = mask(g, chart, s);
            for t in 0..g.vocab().vocab_size() as u32 {
                let mut scratch = chart.clone();
                let ok = g.advance(&mut scratch, s, t).unwrap().is_some();
                assert_eq!(
                    ok,
                    m.binary_search(&t).is_ok(),
                    "{text:?} at {at}: token {t}"
                );
            }
        };
        let mut chart = g.initial_chart();
        let mut s = g.initial_state();
        for (at, &byte) in text.iter().enumerate() {
            check(&chart, &s, at);
            s = g.advance_bytes(&mut chart, &s, &[byte]).unwrap().unwrap();
        }
        check(&chart, &s, text.len());
    }

    /// Inside string-like lexemes the text tokens of a vocabulary slice are
    /// taken at once (`slices`, `cfg::textreach`): with few characters left
    /// (every slice length is crossed), at any length, in JSON strings and
    /// keys and in GBNF, masks must equal what `advance` allows, token by
    /// token, at every byte (mid-character ones included).
    #[test]
    fn masks_from_text_slices_agree_with_advance() {
        let alphabet: [&[u8]; 8] = [
            b"a",
            "\u{e9}".as_bytes(),
            b"\"",
            b"\\",
            b"\n",
            b",",
            b"}",
            b":",
        ];
        let mut toks: Vec<Vec<u8>> = Vec::new();
        let mut layer: Vec<Vec<u8>> = vec![Vec::new()];
        for _ in 0..3 {
            layer = layer
                .iter()
                .flat_map(|t| alphabet.iter().map(move |c| [t.as_slice(), c].concat()))
                .collect();
            toks.extend(layer.iter().cloned());
        }
        toks.extend((4..=20).map(|n| b"a".repeat(n)));
        toks.extend([vec![0xC3], vec![0xA9], b" \"".to_vec(), b"{\"".to_vec()]);
        toks.extend([b"\x7f".to_vec(), b"a\x7f".to_vec()]);
        toks.push(b"<eos>".to_vec());
        let eos = toks.len() as u32 - 1;
        let v = Arc::new(Vocab::new(toks, &[eos], &[], None).unwrap());
        let long = "a\u{e9}".repeat(14);
        let first = |n: usize| long.chars().take(n).collect::<String>();
        let cases: Vec<(CompiledGrammar, String)> = vec![
            (
                json_grammar(&v, r#"{"type": "string", "maxLength": 25}"#),
                format!("\"{}\"", first(24)),
            ),
            (
                json_grammar(&v, r#"{"type": "string"}"#),
                format!("\"{long}\""),
            ),
            (
                json_grammar(
                    &v,
                    r#"{"type": "object", "properties": {"aa": {"type": "string", "maxLength": 6}}}"#,
                ),
                "{\"aa\": \"a\u{e9}aa\", \"a\u{e9}a\": \"\"}".to_string(),
            ),
            (
                gbnf_on(&v, "root ::= \"\\\"\" [^\"\\\\]{0,21} \"\\\"\" \"x\"?"),
                format!("\"{}\"", first(20)),
            ),
            // llama.cpp's json.gbnf string: no DEL.
            (
                gbnf_on(&v, r#"root ::= "\"" [^"\\\x7F\x00-\x1F]* "\"""#),
                format!("\"{long}\""),
            ),
        ];
        for (g, text) in cases {
            masks_follow_advance(&g, text.as_bytes());
        }
    }

    /// Masks of repeated states come from the memo (`cfg::fillmemo`); after
    /// rollbacks and forks the same positions hold other charts, and every
    /// mask must still equal a fresh grammar's for the same tokens.
    #[test]
    fn memoized_masks_follow_rollbacks_and_forks() {
        use crate::matcher::MatcherCore;
        let toks = [
            "{\"", "a", "b", "c", "\":", " \"", "ab", "ba", "\",", " ", "\"}", "}", "1", "\"",
            "\", \"a", "\", \"b", "<eos>",
        ];
        let v = vocab(&toks);
        // Inside a or b's string the scans are alike; the chart says which
        // key may follow.
        let schema = r#"{"type": "object", "properties": {"a": {"type": "string"},
            "b": {"type": "string"}, "c": {"type": "integer"}}, "additionalProperties": false}"#;
        let g = Arc::new(json_grammar(&v, schema));
        let mut m = MatcherCore::new(g.clone());
        let mut consumed: Vec<u32> = Vec::new();
        let mut seed = 7u64;
        for _ in 0..400 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let pick = (seed >> 33) as usize;
            let mut row = vec![0u32; g.words()];
            m.fill_row(&mut row).unwrap();
            // A fresh grammar (empty memo) replays the same tokens.
            let fresh = Arc::new(json_grammar(&v, schema));
            let mut replay = MatcherCore::new(fresh.clone());
            for &t in &consumed {
                assert!(replay.consume_token(t).unwrap());
            }
            let mut expected = vec![0u32; fresh.words()];
            replay.fill_row(&mut expected).unwrap();
            assert_eq!(row, expected, "after {consumed:?}");
            // Whitespace is allowed almost everywhere: taking it rarely
            // lets walks get somewhere.
            let allowed: Vec<u32> = iter_set_bits(&row)
                .filter(|&t| !v.is_eos(t) && (toks[t as usize] != " " || pick % 9 == 0))
                .collect();
            if pick % 8 == 0 && !consumed.is_empty() {
                let n = 1 + pick % consumed.len().min(4);
                m.rollback(n).unwrap();
                consumed.truncate(consumed.len() - n);
            } else if pick % 11 == 0 {
                m = m.clone();
            } else if let Some(&t) = allowed.get(pick % allowed.len().max(1)) {
                assert!(m.consume_token(t).unwrap());
                consumed.push(t);
            } else {
                m = MatcherCore::new(g.clone());
                consumed.clear();
            }
        }
    }

    fn json_grammar(v: &Arc<Vocab>, schema: &str) -> CompiledGrammar {
        let ast = crate::schema::compile(schema, &Default::default()).unwrap();
        CompiledGrammar::from_ast(v.clone(), &ast, "json_schema", schema).unwrap()
    }

    fn gbnf_on(v: &Arc<Vocab>, src: &str) -> CompiledGrammar {
        CompiledGrammar::from_ast(v.clone(), &gbnf::parse(src).unwrap(), "gbnf", src).unwrap()
    }

    /// Lexer entries are shared by grammars whose lexemes have different
    /// followers; each grammar's masks still end greedy lexemes only where
    /// its own followers can read the byte.
    #[test]
    fn shared_entries_keep_each_grammars_followers() {
        let toks = [
            "\"", "a", "ab", "\"x", "\"y", "a\"", "a\"x", "a\"y", "x", "y", "<eos>",
        ];
        let v = vocab(&toks);
        let make = |src: &str| {
            CompiledGrammar::from_ast(v.clone(), &gbnf::parse(src).unwrap(), "gbnf", src).unwrap()
        };
        // The string is its own lexeme (a rule), the same in both grammars.
        let gx = make("root ::= s \"x\"\ns ::= \"\\\"\" [ab]* \"\\\"\"");
        let gy = make("root ::= s \"y\"\ns ::= \"\\\"\" [ab]* \"\\\"\"");
        for g in [&gx, &gy, &gx] {
            let mut chart = g.initial_chart();
            let mut s = g.initial_state();
            for step in [0u32, 1] {
                let m = mask(g, &chart, &s);
                for t in 0..toks.len() as u32 {
                    let mut scratch = chart.clone();
                    let ok = g.advance(&mut scratch, &s, t).unwrap().is_some();
                    assert_eq!(
                        ok,
                        m.contains(&t),
                        "{} token {}",
                        g.source(),
                        toks[t as usize]
                    );
                }
                s = g.advance(&mut chart, &s, step).unwrap().unwrap();
            }
        }
    }

    #[test]
    fn forced_tokens_stop_where_the_tokenizer_could_differ() {
        let toks = ["{", "\"", "{\"", "na", "name", "\":", "<eos>"];
        let g = grammar(&toks, r#"\{"name":[0-9]"#);
        let chart = g.initial_chart();
        let s = g.initial_state();
        assert_eq!(
            g.forced_bytes(&chart, &s).unwrap().0,
            br#"{"name":"#.to_vec()
        );
        assert_eq!(g.forced_tokens(&chart, &s).unwrap(), vec![2, 4, 5]);
        let g = gbnf_grammar(
            &toks,
            "root ::= \"{\" ws \"\\\"name\\\":\" [0-9]\nws ::= \"\"",
        );
        assert_eq!(
            g.forced_tokens(&g.initial_chart(), &g.initial_state())
                .unwrap(),
            vec![2, 4, 5]
        );
    }

    #[test]
    fn forced_tokens_end_with_eos_when_the_text_must_end() {
        let g = grammar(&["a", "ab", "<eos>"], "ab");
        assert_eq!(
            g.forced_tokens(&Chart::new(), &g.initial_state()).unwrap(),
            vec![1, 2]
        );
        let g = gbnf_grammar(&["a", "ab", "<eos>"], "root ::= \"a\" \"b\"?");
        let mut chart = g.initial_chart();
        let s = g
            .advance(&mut chart, &g.initial_state(), 1)
            .unwrap()
            .unwrap();
        assert_eq!(g.forced_tokens(&chart, &s).unwrap(), vec![2]);
        // "a" may stop or go on: nothing is forced.
        let s = g.initial_state();
        let mut chart = g.initial_chart();
        let s = g.advance(&mut chart, &s, 0).unwrap().unwrap();
        assert_eq!(g.forced_tokens(&chart, &s).unwrap(), Vec::<u32>::new());
        // With two EOS ids, neither is forced.
        let toks = vec![b"ab".to_vec(), b"<e1>".to_vec(), b"<e2>".to_vec()];
        let v = Arc::new(Vocab::new(toks, &[1, 2], &[], None).unwrap());
        let g = CompiledGrammar::from_regex(v, "ab").unwrap();
        assert_eq!(
            g.forced_tokens(&Chart::new(), &g.initial_state()).unwrap(),
            vec![0]
        );
    }

    #[test]
    fn forced_tokens_drop_an_extendable_last_token() {
        let g = grammar(&["a", "ab", "abc", "c", "d"], "ab[cd]");
        assert_eq!(
            g.forced_tokens(&Chart::new(), &g.initial_state()).unwrap(),
            Vec::<u32>::new()
        );
        let g = grammar(&["a", "ab", "c", "d"], "ab[cd]");
        assert_eq!(
            g.forced_tokens(&Chart::new(), &g.initial_state()).unwrap(),
            vec![1]
        );
    }
}
