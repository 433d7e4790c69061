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
//! is live exactly when its frontier is non-empty or it accepts. (Two
//! longest-match features make that a guess rather than a fact: a back-off
//! branch whose every continuation its guards will kill, and an indenter
//! newline every width of which the parser refuses. Neither happens in the
//! grammars we test; the tests check each token's bit against `consume`.)
//!
//! The chart's types are in `chart`, and the closure in `closure`; this
//! module steps scans by bytes, completes lexemes (with Lark's indenter and
//! token terminals) and says where the text may end.

use std::sync::Arc;

use super::ast::Lexing;
use super::indent::Layout;
use super::longest::{branches, GUARD};
use super::lowered::{Cfg, Sym};
use crate::error::{Error, Result};
use crate::regex_dfa::DEAD;

mod chart;
mod closure;

pub(crate) use chart::Extended;
use chart::TERMINAL_KEY;
pub use chart::{CfgState, Chart, ChartRead, ChartView, EarleySet, Item, Scan};
use closure::ItemList;

/// Bound on items in one Earley set (per-byte parser work is bounded by it).
pub const MAX_ITEMS_PER_SET: usize = 200_000;
/// Bound on the work of one parser step (rules predicted, items completed,
/// and the earlier items each completion advances): with it every consume and every
/// parser walk below a trie node is bounded in work, whatever the grammar's
/// ambiguity (`x ::= x x | "a"` makes each step complete against every
/// earlier position, so a long text costs cubic time without it). Twice
/// llguidance's per-step item bound (`step_max_items`, 50,000): a JSON
/// grammar's step looks at tens of items; at 250,000 a 2,000-token walk of
/// an ambiguous grammar took 4-6 s to reach the bound, at this one about 1.
pub const MAX_CLOSURE_WORK: usize = 100_000;
/// Bound on concurrent lexeme scans.
pub const MAX_FRONTIER: usize = 20_000;

/// The sets one completion adds: `before` (the indenter's tokens read
/// first, each a set), then `set`, whose predicted lexemes start `scans`.
#[derive(Debug)]
pub struct Completion {
    pub before: Vec<EarleySet>,
    pub set: EarleySet,
    pub scans: Vec<Scan>,
    pub accepting: bool,
}

impl Completion {
    /// A completion the indenter refuses: a set from which nothing goes on.
    fn refused() -> Self {
        Completion {
            before: Vec::new(),
            set: EarleySet::default(),
            scans: Vec::new(),
            accepting: false,
        }
    }

    /// The one set `closure` made.
    fn alone((set, scans, accepting): (EarleySet, Vec<Scan>, bool)) -> Self {
        Completion {
            before: Vec::new(),
            set,
            scans,
            accepting,
        }
    }

    /// How many sets it adds (at least one).
    pub fn sets(&self) -> u32 {
        self.before.len() as u32 + 1
    }

    /// Pushes the sets onto `chart`.
    pub fn push_sets(self, chart: &mut Chart) -> (Vec<Scan>, bool) {
        chart.extend(self.before.into_iter().map(Arc::new));
        chart.push(Arc::new(self.set));
        (self.scans, self.accepting)
    }
}

impl Cfg {
    /// The state before any byte; its set 0 goes into `chart`.
    pub fn initial(&self, chart: &mut Chart) -> Result<CfgState> {
        chart.clear();
        let kernel = vec![Item {
            rule: self.start_rule(),
            dot: 0,
            origin: 0,
            members: 0,
        }];
        let (set, frontier, accepting) = self.closure(&*chart, 0, kernel)?;
        let tokens = self.token_scans(&set, 0);
        chart.push(Arc::new(set));
        Ok(CfgState {
            sets: 1,
            frontier,
            accepting,
            tokens,
        })
    }

    /// Advances every scan by `byte`, pushing the survivors onto `out`.
    /// Returns the lexemes (with their origins) that end after the byte
    /// (all-splits lexemes that accept there) and those that end before it
    /// (greedy lexemes that accepted and cannot read it; see `greedy`).
    #[inline]
    pub fn step_scans(&self, frontier: &[Scan], byte: u8, out: &mut Vec<Scan>) -> Ends {
        let mut ends = Ends::default();
        for s in frontier {
            let lexeme = &self.lexemes[s.lexeme as usize];
            let dfa = lexeme.dfa.as_ref().expect("scans have DFAs");
            let q = dfa.step(s.state, byte);
            if q == DEAD {
                if lexeme.ends_before(dfa, s.state, byte) {
                    ends.before.push((s.lexeme, s.origin));
                }
                continue;
            }
            out.push(Scan { state: q, ..*s });
            if !lexeme.greedy && dfa.is_accepting(q) {
                ends.after.push((s.lexeme, s.origin));
            }
        }
        ends
    }

    /// The kernel after lexemes `done` end: items waiting for each one
    /// advanced over it; an ignored lexeme leaves its origin's items.
    pub(crate) fn scanned(
        &self,
        chart: &(impl ChartRead + ?Sized),
        done: &[(u32, u32)],
    ) -> Vec<Item> {
        let mut kernel = ItemList::new();
        for &(l, o) in done {
            if self.ignore.contains(&l) && self.ignored_from(chart.set(o), o, l) {
                // An ignored lexeme leaves the parse where it was.
                chart.set(o).items.iter().for_each(|p| kernel.insert(*p));
            }
            for p in chart.set(o).waiting_for(TERMINAL_KEY | l) {
                if self.next_sym(p) == Some(Sym::T(l)) {
                    kernel.insert(Item {
                        dot: p.dot + 1,
                        ..*p
                    });
                }
            }
        }
        kernel.items
    }

    /// The sets after lexemes `done` end, the first numbered `cur`. `width`
    /// is the indentation a newline lexeme ends with (indenter grammars,
    /// where the newline then ends alone; 0 otherwise).
    pub fn complete_lexemes(
        &self,
        chart: &(impl ChartRead + ?Sized),
        cur: u32,
        done: &[(u32, u32)],
        width: u32,
    ) -> Result<Completion> {
        let Some(ind) = &self.indenter else {
            return Ok(Completion::alone(self.closure(
                chart,
                cur,
                self.scanned(chart, done),
            )?));
        };
        self.complete_indented(ind, chart, cur, done, width)
    }

    /// `complete_lexemes` for a grammar with an indenter. Kept out of line:
    /// inlined, it made the common path's closure a call of its own, and
    /// JSON masks 10% slower.
    #[inline(never)]
    fn complete_indented(
        &self,
        ind: &super::indent::Indenter,
        chart: &(impl ChartRead + ?Sized),
        cur: u32,
        done: &[(u32, u32)],
        width: u32,
    ) -> Result<Completion> {
        // Longest-match lexing: every lexeme started at the newest set.
        let Some(&(_, origin)) = done.first() else {
            return Ok(Completion::refused());
        };
        let layout = chart.set(origin).layout();
        let (kernel, after) = if done.iter().any(|&(l, _)| l == ind.newline) {
            if layout.brackets == 0 {
                let Some((tokens, after)) = ind.after_newline(layout, width) else {
                    return Ok(Completion::refused());
                };
                return self.read_tokens(chart, cur, origin, &tokens, after);
            }
            // Inside brackets a newline is skipped.
            (chart.set(origin).items.clone(), layout.clone())
        } else {
            let mut after = layout.clone();
            for &(l, _) in done {
                match ind.after_lexeme(&after, l) {
                    Some(next) => after = next,
                    None => return Ok(Completion::refused()),
                }
            }
            (self.scanned(chart, done), after)
        };
        let mut c = Completion::alone(self.closure(chart, cur, kernel)?);
        c.set.layout = Some(Box::new(after));
        Ok(c)
    }

    /// Reads `tokens`, lexemes of no text, one after another from set
    /// `origin`, each into a set of its own numbered from `cur`; the last
    /// set's layout is `layout`.
    fn read_tokens(
        &self,
        chart: &(impl ChartRead + ?Sized),
        cur: u32,
        origin: u32,
        tokens: &[u32],
        layout: Layout,
    ) -> Result<Completion> {
        let mut made: Vec<EarleySet> = Vec::with_capacity(tokens.len());
        let mut from = origin;
        let mut last = None;
        for (k, &t) in tokens.iter().enumerate() {
            let view = Extended {
                base: chart,
                len: cur,
                ext: &made,
            };
            let kernel = self.scanned(&view, &[(t, from)]);
            if kernel.is_empty() {
                return Ok(Completion::refused());
            }
            from = cur + k as u32;
            let (set, scans, accepting) = self.closure(&view, from, kernel)?;
            if k + 1 == tokens.len() {
                last = Some((set, scans, accepting));
            } else {
                made.push(set);
            }
        }
        let Some((mut set, scans, accepting)) = last else {
            return Ok(Completion::refused());
        };
        set.layout = Some(Box::new(layout));
        Ok(Completion {
            before: made,
            set,
            scans,
            accepting,
        })
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
            if self.step_within_lexemes(&mut cur, b) {
                continue;
            }
            match self.step(chart, &cur, b) {
                Ok(Some(next)) => cur = next,
                other => {
                    chart.truncate(st.sets as usize);
                    return other;
                }
            }
        }
        if !bytes.is_empty() {
            match self.accepts_at_end(&*chart, &cur) {
                Ok(acc) => cur.accepting = acc,
                Err(e) => {
                    chart.truncate(st.sets as usize);
                    return Err(e);
                }
            }
        }
        Ok(Some(cur))
    }

    /// `step` where the byte ends no lexeme and every scan reads it, as
    /// most bytes of most tokens do (inside a string, a number, a keyword):
    /// the scans' states advance in place, without the new frontier `step`
    /// allocates (a token's walk was an allocation a byte). False, with
    /// `st` unchanged, where `step` has more to do.
    fn step_within_lexemes(&self, st: &mut CfgState, byte: u8) -> bool {
        // An empty frontier, or one past the bound `step` enforces, is
        // `step`'s to refuse.
        if self.lexing != Lexing::AllSplits
            || st.frontier.is_empty()
            || st.frontier.len() > MAX_FRONTIER
        {
            return false;
        }
        // What `step_scans` would make of each scan: a survivor, ending
        // nothing (no dead scan, whose lexeme might end before the byte;
        // no all-splits lexeme accepting after it).
        let reads = |s: &Scan| {
            let lexeme = &self.lexemes[s.lexeme as usize];
            let dfa = lexeme.dfa.as_ref().expect("scans have DFAs");
            let q = dfa.step(s.state, byte);
            (q != DEAD && (lexeme.greedy || !dfa.is_accepting(q))).then_some(q)
        };
        if !st.frontier.iter().all(|s| reads(s).is_some()) {
            return false;
        }
        for s in &mut st.frontier {
            s.state = reads(s).expect("checked above");
        }
        // As `step` leaves a frontier: sorted, each scan once.
        st.frontier.sort_unstable();
        st.frontier.dedup();
        st.accepting = false;
        st.tokens.clear();
        true
    }

    /// One byte: steps the scans, completes the lexemes that end (pushing
    /// their sets onto `chart`) and starts what they predict. None if the
    /// byte is refused (the caller truncates `chart`).
    ///
    /// All-splits lexing ends greedy lexemes before the byte when it kills
    /// them (the lexemes they predict then read it), and the others after
    /// the byte wherever they accept. Longest-match lexing keeps a branch
    /// per origin: a branch ends its lexemes where no scan takes the byte
    /// (the scans that accepted before it end, see `longest_ends`), and the
    /// byte must start a new lexeme; where scans take the byte but leave an
    /// accepting point for states that do not accept, a new branch also ends
    /// the lexemes there, guarded by those scans (back-off, see `GUARD`).
    /// `accepting` is left false where only a greedy lexeme's end would make
    /// the text complete: `accepts_at_end` decides that after the last byte.
    fn step(&self, chart: &mut Chart, st: &CfgState, byte: u8) -> Result<Option<CfgState>> {
        let mut out = Vec::with_capacity(st.frontier.len());
        let mut sets = st.sets;
        let mut accepting = false;
        let mut tokens = Vec::new();
        match self.lexing {
            Lexing::AllSplits => {
                let ends = self.step_scans(&st.frontier, byte, &mut out);
                let mut after = ends.after;
                if !ends.before.is_empty() {
                    let c = self.complete_lexemes(&*chart, sets, &ends.before, 0)?;
                    sets += c.sets();
                    let (started, _) = c.push_sets(chart);
                    // Lexemes started here that end at once matched the empty
                    // string, which prediction already took.
                    after.extend(self.step_scans(&started, byte, &mut out).after);
                }
                if !after.is_empty() {
                    let c = self.complete_lexemes(&*chart, sets, &after, 0)?;
                    sets += c.sets();
                    let (started, acc) = c.push_sets(chart);
                    out.extend_from_slice(&started);
                    accepting = acc;
                    if self.has_tokens {
                        tokens = self.token_scans(&chart[sets as usize - 1], sets - 1);
                    }
                }
            }
            Lexing::Longest => {
                let mut lone_ends: Vec<(u32, u32)> = Vec::new();
                for (o, group) in branches(self, &st.frontier) {
                    let t = self.longest_step(&group, byte);
                    out.extend(t.next.iter().map(|&(lexeme, state)| Scan {
                        lexeme,
                        state,
                        origin: o,
                    }));
                    if t.ends.is_empty() {
                        continue;
                    }
                    if self.has_alone && self.lone_alone(&group) {
                        lone_ends.extend(t.ends.iter().map(|&l| (l, o)));
                        continue;
                    }
                    let done: Vec<(u32, u32)> = t.ends.iter().map(|&l| (l, o)).collect();
                    let c = self.complete_lexemes(&*chart, sets, &done, t.width)?;
                    sets += c.sets();
                    let (started, _) = c.push_sets(chart);
                    let before = out.len();
                    self.step_scans(&started, byte, &mut out);
                    if out.len() > before {
                        out.extend(t.guards.iter().map(|&(lexeme, state)| Scan {
                            lexeme,
                            state,
                            origin: sets - 1,
                        }));
                    }
                }
                if !lone_ends.is_empty() {
                    let c = self.complete_lexemes(&*chart, sets, &lone_ends, 0)?;
                    sets += c.sets();
                    let (started, _) = c.push_sets(chart);
                    self.step_scans(&started, byte, &mut out);
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        if out.len() > MAX_FRONTIER {
            return Err(Error::LimitExceeded(format!(
                "more than {MAX_FRONTIER} lexemes in progress at once (grammar too ambiguous)"
            )));
        }
        if out.is_empty() && !accepting && tokens.is_empty() {
            return Ok(None);
        }
        Ok(Some(CfgState {
            sets,
            frontier: out,
            accepting,
            tokens,
        }))
    }

    /// The lexeme a scan or guard (`GUARD`-tagged id) reads.
    #[inline]
    pub fn scan_lexeme(&self, id: u32) -> &super::lowered::Lexeme {
        &self.lexemes[(id & !GUARD) as usize]
    }

    /// Whether the grammar accepts at `st`: if the text ended here, the scans
    /// waiting for the next byte to end them (longest-match lexemes, greedy
    /// all-splits ones) would end, so complete them virtually.
    pub fn accepts_at_end(&self, chart: &(impl ChartRead + ?Sized), st: &CfgState) -> Result<bool> {
        if st.accepting {
            return Ok(true);
        }
        if self.lexing == Lexing::Longest {
            for (o, group) in branches(self, &st.frontier) {
                if self.guards_end(&group) {
                    continue;
                }
                let (lexemes, width, _) = self.longest_ends(&group, None);
                let ended: Vec<(u32, u32)> = lexemes.iter().map(|&l| (l, o)).collect();
                if !ended.is_empty() && self.accepts_after(chart, st.sets, &ended, width)? {
                    return Ok(true);
                }
            }
            return Ok(false);
        }
        let ended = self.greedy_done(&st.frontier);
        if ended.is_empty() {
            return Ok(false);
        }
        self.accepts_after(chart, st.sets, &ended, 0)
    }

    /// Whether the text is complete once lexemes `ended` end (as set `cur`).
    fn accepts_after(
        &self,
        chart: &(impl ChartRead + ?Sized),
        cur: u32,
        ended: &[(u32, u32)],
        width: u32,
    ) -> Result<bool> {
        let c = self.complete_lexemes(chart, cur, ended, width)?;
        let dedents = match &self.indenter {
            Some(ind) if !c.set.items.is_empty() => ind.at_end(c.set.layout()),
            _ => Vec::new(),
        };
        if dedents.is_empty() {
            return Ok(c.accepting);
        }
        // The indenter closes every open level at the end of the text.
        let mut made = c.before;
        made.push(c.set);
        let view = Extended {
            base: chart,
            len: cur,
            ext: &made,
        };
        let newest = cur + made.len() as u32 - 1;
        Ok(self
            .read_tokens(&view, newest + 1, newest, &dedents, Layout::default())?
            .accepting)
    }
}

/// The lexemes a byte ends, with their origins: `after` it (all-splits
/// lexemes accepting after it) and `before` it (greedy lexemes it kills).
#[derive(Debug, Default)]
pub struct Ends {
    pub after: Vec<(u32, u32)>,
    pub before: Vec<(u32, u32)>,
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

    fn accepts_lark(src: &str, text: &str) -> (bool, bool) {
        let cfg = lower(&crate::cfg::lark::parse(src).unwrap()).unwrap();
        let mut chart = Chart::new();
        let st = cfg.initial(&mut chart).unwrap();
        match cfg.advance_bytes(&mut chart, &st, text.as_bytes()).unwrap() {
            Some(s) => (true, s.accepting),
            None => (false, false),
        }
    }

    /// A `%json` block's lexemes are alone: they rank against nothing, so
    /// two alternatives that end on the same byte both go on (Lark's ranks
    /// would keep one), and the grammar's `%ignore` stays out of the block.
    #[test]
    fn json_blocks_lex_apart_from_the_grammar() {
        let g = r#"start: "<" %json {"anyOf": [
            {"type": "array", "prefixItems": [{"const": "x"}, {"type": "integer"}], "items": false},
            {"type": "array", "prefixItems": [{"type": "string"}, {"type": "string"}], "items": false}
        ]} ">"
        %ignore " ""#;
        assert_eq!(accepts_lark(g, r#"<["x",1]>"#), (true, true));
        assert_eq!(accepts_lark(g, r#"<["x","y"]>"#), (true, true));
        assert!(!accepts_lark(g, r#"<["y",1]>"#).0);
        // JSON's own whitespace inside, the grammar's after the block only.
        assert_eq!(accepts_lark(g, r#"<[ "x" , 1 ] >"#), (true, true));
        assert!(!accepts_lark(g, r#"< ["x",1]>"#).0);
    }

    /// Wherever `step_within_lexemes` takes a byte, it leaves exactly the
    /// state `step` makes of it, and `step` adds no set there; where it
    /// declines, the state is as it was. Checked at every byte of texts
    /// inside and across lexemes (strings, greedy numbers, keywords, a
    /// lexeme that may end where it reads on), over `step`'s own walk.
    #[test]
    fn bytes_inside_lexemes_step_as_step_does() {
        let json = r#"root ::= value
value ::= "{" ws (member ("," ws member)*)? "}" ws | "[" ws (value ("," ws value)*)? "]" ws | [0-9]+ ws | "true" ws | "\"" [a-z ]* "\"" ws
member ::= "\"" [a-z]+ "\"" ws ":" ws value
ws ::= | " ""#;
        let cases = [
            (
                json,
                r#"{"abc": [12, 345, "x y z", true], "de": {"f": 6789}}"#,
            ),
            (json, r#"[true, "aa", 10, [ "", {}], {"k":"v"}]"#),
            (
                "root ::= e\ne ::= e \"+\" e | \"(\" e \")\" | [0-9]+ | n\nn ::= | \"x\"",
                "12+(345+x)+6",
            ),
            ("root ::= [a-z]+ \"b\" [a-z]*", "aabbabzzb"),
            // `[a-z]+b` may read on after a `b` it accepts at: a lexeme
            // that is not greedy, ending after the byte with scans left.
            ("root ::= w \"b\" root | \".\"\nw ::= [a-z]+", "aabzbab."),
        ];
        let mut taken = 0;
        for (src, text) in cases {
            let cfg = lower(&gbnf::parse(src).unwrap()).unwrap();
            let mut chart = Chart::new();
            let mut st = cfg.initial(&mut chart).unwrap();
            for b in text.bytes() {
                let mut fast = st.clone();
                let sets = chart.len();
                let next = cfg
                    .step(&mut chart, &st, b)
                    .unwrap()
                    .expect("text is valid");
                if cfg.step_within_lexemes(&mut fast, b) {
                    taken += 1;
                    assert_eq!(chart.len(), sets, "{text:?}: step added sets at {b:?}");
                    assert_eq!(fast, next, "{text:?}: at byte {b:?}");
                } else {
                    assert_eq!(fast, st, "{text:?}: declined but changed the state");
                }
                st = next;
            }
        }
        // 48 of the texts' 119 bytes: those that end, or may end, a lexeme
        // (structure, keys' letters, the last byte of a word) go to `step`.
        assert!(taken >= 40, "the fast path took only {taken} bytes");
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
    fn member_sets_take_each_member_once_in_any_order() {
        use crate::cfg::ast::{GrammarAst, Lexing, Members, Node, Pos, RuleDef};
        let lit = |s: &str| Node::Literal(s.into());
        let member = |k: &str| Node::seq(vec![lit(k), Node::Ref("v".into(), Pos::default())]);
        let members = Members {
            // a and c required, b optional; extra members are "x" + value.
            listed: vec![
                (member("a"), true),
                (member("b"), false),
                (member("c"), true),
            ],
            extra: Some((member("x"), Node::seq(vec![lit(","), member("x")]))),
            open: Node::Empty,
            sep: lit(","),
            close: lit("}"),
            close_empty: lit("}"),
            min: 0,
            max: None,
            dependent: vec![],
            twins: vec![],
            any_of: vec![],
            ordered: false,
        };
        let build = |members: Members| {
            let ast = GrammarAst {
                rules: vec![
                    RuleDef {
                        name: "root".into(),
                        body: Node::seq(vec![lit("{"), Node::Members(Box::new(members))]),
                        pos: Pos::default(),
                    },
                    RuleDef {
                        name: "v".into(),
                        body: Node::alt(vec![lit("1"), Node::Ref("root".into(), Pos::default())]),
                        pos: Pos::default(),
                    },
                ],
                terminals: vec![],
                ignore: vec![],
                start: "root".into(),
                lexing: Lexing::AllSplits,
                indenter: None,
                blocks: Vec::new(),
                initial_skip: true,
            };
            lower(&ast).unwrap()
        };
        let runner = |cfg: Cfg| {
            move |text: &str| {
                let mut chart = Chart::new();
                let st = cfg.initial(&mut chart).unwrap();
                match cfg.advance_bytes(&mut chart, &st, text.as_bytes()).unwrap() {
                    Some(s) => (true, s.accepting),
                    None => (false, false),
                }
            }
        };
        let run = runner(build(members.clone()));
        for ok in [
            "{a1,c1}",
            "{c1,a1}",
            "{c1,b1,a1}",
            "{x1,a1,x1,c1}",
            "{a{a1,c1},c1}",
        ] {
            assert_eq!(run(ok), (true, true), "{ok}");
        }
        assert_eq!(run("{a1,b1"), (true, false));
        assert_eq!(run("{a1,b1}"), (false, false)); // c is still required
        assert_eq!(run("{a1,a1"), (false, false)); // a twice
        assert_eq!(run("{c1,b1,b"), (false, false));
        assert_eq!(run("{}"), (false, false));
        assert_eq!(run("{a1,c1,a"), (false, false));

        // A witness: a member whose value is 2, a twin of a or b, or y.
        let witness = |k: &str| Node::seq(vec![lit(k), lit("2")]);
        let mut members = members;
        members.listed.extend([
            (witness("a"), false),
            (witness("b"), false),
            (witness("y"), false),
        ]);
        members.twins = vec![(0, 3), (1, 4)];
        members.any_of = vec![3, 4, 5];
        let run = runner(build(members));
        for ok in ["{a2,c1}", "{c1,b2,a1}", "{a1,c1,y2}", "{x1,y2,c1,a2,b1}"] {
            assert_eq!(run(ok), (true, true), "{ok}");
        }
        assert_eq!(run("{a1,c1"), (true, false)); // no witness yet
        assert_eq!(run("{a1,c1}"), (false, false));
        assert_eq!(run("{c1,b2"), (true, false)); // a is still required
        assert_eq!(run("{a2,a1"), (false, false)); // a twice
        assert_eq!(run("{a1,a2"), (false, false));
        assert_eq!(run("{b1,c1,b2"), (false, false));
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
