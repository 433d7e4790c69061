//! Lowering a grammar AST to a CFG over lexemes.
//!
//! Any sub-expression without rule references is regular, so it becomes one
//! lexeme (a byte DFA), however many literals and classes it spans: inside it
//! the trie walk only steps a DFA, and the Earley parser runs only where a
//! lexeme ends. With all-splits lexing (GBNF) a lexeme may end at any of its
//! accepting points, so this keeps the language exactly. Alternatives and
//! repetitions of non-regular parts become fresh nonterminals.
//!
//! This module walks the rules (sequences, alternatives, repetitions,
//! member sets, references); `lexemes` makes and shares the lexemes,
//! `indenter` builds Lark's indenter, and `prune` finishes the grammar
//! (drops what never matches, decides where lexemes end). The result is a
//! `lowered::Cfg`.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use super::ast::{GrammarAst, Lexing, Members, Node, Pos, RuleDef, TermDef};
use super::lowered::{Cfg, Guard, LexContext, Lexeme, Rule, Sym};
use super::members::{MemberRules, COUNT, KEEP, MAX_MEMBERS, ORDERED_COUNT, ORDERED_KEEP};
use super::nodedfa::{is_heavy, is_regular, literal_words, then};
use super::valueunion;
use super::wordgroups::{self, PendingWords};
use crate::error::{Error, Result};
use prune::finish;

mod indenter;
mod lexemes;
mod prune;

/// Bounds that keep a hostile grammar from exhausting memory or time.
pub const MAX_RULES: usize = 200_000;
pub const MAX_RHS_SYMBOLS: usize = 2_000_000;
pub const MAX_LEXEMES: usize = 20_000;

/// Compile budget steps per node lowered (its symbols, rules and checks;
/// lexemes are charged for their keys and automata besides).
const LOWER_NODE_STEPS: u64 = 50;

struct Lowerer<'a> {
    names: HashMap<String, u32>,
    terminals: HashMap<String, &'a TermDef>,
    terminal_ids: HashMap<String, u32>,
    /// How the rule being lowered is lexed: the grammar's lexing, or
    /// all-splits for a character-level rule (`ast::Block::char_level`).
    lexing: Lexing,
    /// The rule being lowered is character-level inside a longest-match
    /// grammar: its lexemes are `alone`.
    alone: bool,
    /// The lexer context of the rule being lowered, and of each
    /// nonterminal (grammars with blocks only).
    context: u32,
    nt_context: Vec<u32>,
    nonterminals: Vec<String>,
    rules: Vec<Rule>,
    lexeme_ids: HashMap<String, u32>,
    lexemes: Vec<Lexeme>,
    symbols: usize,
    /// The member-set nonterminal of each `Node::Members`, and its constraints.
    member_sets: Vec<u32>,
    member_rules: Vec<MemberRules>,
    /// `%declare`d terminal names (the indenter's tokens).
    declared: Vec<String>,
    /// Longest-match lexing: rules' plain strings waiting to be grouped
    /// (`wordgroups`) once every other lexeme exists.
    pending_words: Vec<PendingWords>,
    /// Longest-match terminals that match the empty string, by lexeme key:
    /// the nonterminal `ε | nonempty lexeme` that stands for each.
    optional_lexemes: HashMap<String, u32>,
}

impl Lowerer<'_> {
    fn fresh(&mut self, hint: &str) -> Result<u32> {
        if self.nonterminals.len() >= MAX_RULES {
            return Err(Error::LimitExceeded(format!(
                "grammar needs more than {MAX_RULES} nonterminals"
            )));
        }
        let id = self.nonterminals.len() as u32;
        self.nonterminals.push(format!("{hint}#{id}"));
        self.nt_context.push(self.context);
        Ok(id)
    }

    fn add_rule(&mut self, lhs: u32, rhs: Vec<Sym>) -> Result<()> {
        self.add_guarded_rule(lhs, rhs, Guard::Always)
    }

    fn add_guarded_rule(&mut self, lhs: u32, rhs: Vec<Sym>, guard: Guard) -> Result<()> {
        self.symbols += rhs.len() + 1;
        if self.rules.len() >= MAX_RULES || self.symbols > MAX_RHS_SYMBOLS {
            return Err(Error::LimitExceeded(format!(
                "grammar expands to more than {MAX_RULES} rules or {MAX_RHS_SYMBOLS} symbols"
            )));
        }
        self.rules.push(Rule { lhs, rhs, guard });
        Ok(())
    }

    /// A rule `lhs -> a` for each alternative `a`. With all-splits lexing
    /// the alternatives that are fixed strings (literals, sequences and
    /// alternations of them: string and number `enum`s, keyword lists) make
    /// one lexeme together, a trie of their words, so a 100,000-word
    /// alternation costs one lexeme and one rule, and its masks cost what
    /// a small one's do. Only the language matters under all-splits
    /// lexing, so grouping them changes nothing else; Lark's longest-match
    /// lexing ranks each string terminal on its own, so there every
    /// alternative stays a rule of its own.
    fn alternatives(&mut self, lhs: u32, alts: &[Node], hint: &str) -> Result<()> {
        if self.lexing == Lexing::Longest {
            return self.longest_alternatives(lhs, alts, hint);
        }
        let mut words: Vec<Node> = Vec::new();
        let mut others: Vec<&Node> = Vec::new();
        for a in alts {
            crate::budget::charge(1)?;
            // Empty words stay rules: keep lexemes non-empty.
            match literal_words(a) {
                Some(w) if self.lexing == Lexing::AllSplits && !w.iter().any(String::is_empty) => {
                    words.extend(w.into_iter().map(Node::Literal));
                }
                _ => others.push(a),
            }
        }
        // Many regular alternatives (enums of arrays and objects): one
        // lexeme too, where their union stays about the size of their text.
        let (union, rest): (Vec<&Node>, Vec<&Node>) = others.iter().partition(|a| is_regular(a));
        if union.len() >= valueunion::MIN_UNION {
            if let Some(dfa) = valueunion::union_dfa(&union)? {
                let what = format!("one of {} values", union.len());
                let sym = self.built_lexeme(dfa, what)?;
                self.add_rule(lhs, vec![sym])?;
                others = rest;
            } else if union.len() >= MAX_LEXEMES {
                // One by one they would pass the lexeme bound: say why now.
                return Err(Error::LimitExceeded(format!(
                    "{} values (an `enum` or an alternation) need an automaton \
                     larger than the {} MiB bound together, and are too many \
                     to compile one by one",
                    union.len(),
                    crate::regex_dfa::DFA_SIZE_LIMIT >> 20
                )));
            }
        }
        if words.len() > 1 {
            let rhs = vec![self.lexeme(&Node::Alt(words))?];
            self.add_rule(lhs, rhs)?;
        } else if let Some(one) = words.pop() {
            let rhs = self.lower(&one, hint)?;
            self.add_rule(lhs, rhs)?;
        }
        for a in others {
            let rhs = self.lower(a, hint)?;
            self.add_rule(lhs, rhs)?;
        }
        Ok(())
    }

    /// `alternatives` under longest-match lexing: plain strings, when there
    /// are many, wait for `place_words` (see `wordgroups`); the rest
    /// become rules now.
    fn longest_alternatives(&mut self, lhs: u32, alts: &[Node], hint: &str) -> Result<()> {
        let plain = |a: &Node| match a {
            Node::Literal(s) if !s.is_empty() => Some(s.clone()),
            Node::Seq(v) => match v.as_slice() {
                [Node::Literal(s)] if !s.is_empty() => Some(s.clone()),
                _ => None,
            },
            _ => None,
        };
        let words: Vec<String> = alts.iter().filter_map(plain).collect();
        let grouped = words.len() >= wordgroups::MIN_GROUP;
        if grouped {
            self.pending_words.push(PendingWords { lhs, words });
        }
        for a in alts {
            crate::budget::charge(1)?;
            if grouped && plain(a).is_some() {
                continue;
            }
            let rhs = self.lower(a, hint)?;
            self.add_rule(lhs, rhs)?;
        }
        Ok(())
    }

    /// The lexemes of `%ignore` bodies `nodes` (in the current context).
    fn ignored(&mut self, nodes: &[Node]) -> Result<Vec<u32>> {
        let mut ignore = Vec::new();
        for n in nodes {
            for sym in self.lower(n, "%ignore")? {
                match sym {
                    Sym::T(t) if self.lexemes[t as usize].tokens.is_none() => ignore.push(t),
                    Sym::T(_) => {
                        return Err(Error::Compile(
                            "%ignore takes text terminals, not tokens".into(),
                        ));
                    }
                    Sym::N(_) | Sym::P(..) => {
                        return Err(Error::Compile("%ignore takes terminals, not rules".into()));
                    }
                }
            }
        }
        Ok(ignore)
    }

    /// Lowers `n` to a sequence of symbols, adding rules as needed.
    fn lower(&mut self, n: &Node, hint: &str) -> Result<Vec<Sym>> {
        crate::budget::charge(LOWER_NODE_STEPS)?;
        match n {
            Node::Empty => return Ok(Vec::new()),
            Node::Tokens(set) => return Ok(vec![self.token_lexeme(set)?]),
            _ => {}
        }
        let leaf = matches!(
            n,
            Node::Literal(_)
                | Node::Class { .. }
                | Node::AnyChar
                | Node::Regex(_)
                | Node::Intersect(_)
                | Node::Minus(..)
                | Node::DecimalMultiples(_)
                | Node::Automaton(_)
        );
        // With longest-match lexing each terminal is its own lexeme (ignored
        // text may sit between them), so only leaves become lexemes.
        if leaf || (self.lexing == Lexing::AllSplits && is_regular(n)) {
            return Ok(vec![self.lexeme(n)?]);
        }
        match n {
            Node::Ref(name, pos) => self.reference(name, *pos).map(|s| vec![s]),
            Node::Seq(items) => {
                // Maximal runs of regular items become one lexeme each.
                let mut out = Vec::new();
                let mut run: Vec<Node> = Vec::new();
                for item in items {
                    if self.lexing == Lexing::AllSplits && is_regular(item) {
                        if is_heavy(item)? {
                            // Its own lexeme: its DFA (shared through the
                            // cache) is not copied into each neighbour's.
                            if !run.is_empty() {
                                out.push(self.lexeme(&Node::seq(std::mem::take(&mut run)))?);
                            }
                            out.push(self.lexeme(item)?);
                            continue;
                        }
                        run.push(item.clone());
                        continue;
                    }
                    if !run.is_empty() {
                        out.push(self.lexeme(&Node::seq(std::mem::take(&mut run)))?);
                    }
                    out.extend(self.lower(item, hint)?);
                }
                if !run.is_empty() {
                    out.push(self.lexeme(&Node::seq(run))?);
                }
                Ok(out)
            }
            Node::Alt(alts) => {
                let nt = self.fresh(hint)?;
                self.alternatives(nt, alts, hint)?;
                Ok(vec![Sym::N(nt)])
            }
            Node::Repeat { node, min, max } => {
                let body = self.lower(node, hint)?;
                if body.is_empty() {
                    return Ok(body); // repeating the empty string
                }
                let mut out = Vec::new();
                for _ in 0..*min {
                    out.extend_from_slice(&body);
                    if out.len() > MAX_RHS_SYMBOLS {
                        return Err(Error::LimitExceeded(format!(
                            "a repetition expands to more than {MAX_RHS_SYMBOLS} symbols"
                        )));
                    }
                }
                match max {
                    None => {
                        // N -> ε | N body   (left recursion is fine for Earley)
                        let nt = self.fresh(hint)?;
                        self.add_rule(nt, Vec::new())?;
                        let mut rhs = vec![Sym::N(nt)];
                        rhs.extend_from_slice(&body);
                        self.add_rule(nt, rhs)?;
                        out.push(Sym::N(nt));
                    }
                    Some(max) if max > min => {
                        // N_k -> ε | body N_{k-1}, N_1 -> ε | body
                        let mut inner: Option<u32> = None;
                        for _ in *min..*max {
                            let nt = self.fresh(hint)?;
                            self.add_rule(nt, Vec::new())?;
                            let mut rhs = body.clone();
                            rhs.extend(inner.map(Sym::N));
                            self.add_rule(nt, rhs)?;
                            inner = Some(nt);
                        }
                        out.extend(inner.map(Sym::N));
                    }
                    Some(_) => {}
                }
                Ok(out)
            }
            Node::Call(name, _, pos) => Err(Error::Compile(format!(
                "template '{name}' used at {pos} was not expanded"
            ))),
            Node::Members(m) => self.members(m, hint).map(|s| vec![s]),
            _ => unreachable!("regular nodes are handled above"),
        }
    }

    /// `open -> m.open member_i after{i} | m.open extra after{} | close_empty` and
    /// `after -> sep member_i after{+i} | sep extra after{..} | close`, where
    /// after's items carry the member set and guards check `MemberRules`.
    fn members(&mut self, m: &Members, hint: &str) -> Result<Sym> {
        if m.listed.len() > MAX_MEMBERS {
            return Err(Error::LimitExceeded(format!(
                "an object lists {} members: at most {MAX_MEMBERS}",
                m.listed.len()
            )));
        }
        let rules = m.rules();
        rules.check()?;
        let set = self.member_rules.len() as u32;
        let open = self.fresh(hint)?;
        let after = self.fresh(hint)?;
        // Registered before the members are lowered: a member may hold an
        // object of its own (a literal), whose set takes the next index.
        self.member_sets.push(after);
        self.member_rules.push(rules.clone());
        let extra_op = match (rules.ordered, rules.counted()) {
            (false, false) => KEEP,
            (false, true) => COUNT,
            (true, false) => ORDERED_KEEP,
            (true, true) => ORDERED_COUNT,
        };
        // Lowered together, the separator and a literal key form one lexeme.
        let entries = m
            .listed
            .iter()
            .enumerate()
            .map(|(i, (member, _))| (then(&m.open, member), then(&m.sep, member), i as u8))
            .chain(
                m.extra
                    .iter()
                    .map(|(x, y)| (then(&m.open, x), y.clone(), extra_op)),
            );
        for (member, after_sep, op) in entries {
            let next = Sym::P(after, op);
            let guard = Guard::Add { set, op };
            let mut first = self.lower(&member, hint)?;
            first.push(next);
            self.add_guarded_rule(open, first, guard)?;
            let mut rest = self.lower(&after_sep, hint)?;
            rest.push(next);
            self.add_guarded_rule(after, rest, guard)?;
        }
        if rules.may_close(0) {
            let rhs = self.lower(&m.close_empty, hint)?;
            self.add_rule(open, rhs)?;
        }
        let rhs = self.lower(&m.close, hint)?;
        self.add_guarded_rule(after, rhs, Guard::Close { set })?;
        Ok(Sym::N(open))
    }

    fn reference(&mut self, name: &str, pos: Pos) -> Result<Sym> {
        if let Some(&id) = self.names.get(name) {
            return Ok(Sym::N(id));
        }
        if self.declared.iter().any(|d| d == name) {
            return self.declared_lexeme(name);
        }
        if self.terminals.contains_key(name) {
            return self.terminal(name);
        }
        Err(undefined_rule(name, pos))
    }

    /// Whether `reference` finds `name`.
    fn defines(&self, name: &str) -> bool {
        self.names.contains_key(name)
            || self.declared.iter().any(|d| d == name)
            || self.terminals.contains_key(name)
    }

    /// The error `reference` would give for the first undefined name in the
    /// rules, before any of them is lowered: lowering builds each terminal
    /// it meets, and a regex terminal can take a good part of the compile
    /// budget, which a grammar with a misspelt name should not cost.
    fn check_references(&self, ast: &GrammarAst) -> Result<()> {
        for r in &ast.rules {
            crate::budget::charge(1)?;
            if let Some((name, pos)) = r.body.find_reference(|name| !self.defines(name)) {
                return Err(undefined_rule(name, pos));
            }
        }
        Ok(())
    }
}

/// Lowers `ast` and prunes what can never match.
pub fn lower(ast: &GrammarAst) -> Result<Cfg> {
    // Every walk below recurses once per level of a body.
    ast.check_depth()?;
    let mut l = Lowerer {
        names: HashMap::default(),
        terminals: ast.terminals.iter().map(|t| (t.name.clone(), t)).collect(),
        terminal_ids: HashMap::default(),
        lexing: ast.lexing,
        alone: false,
        context: 0,
        nt_context: vec![0],
        nonterminals: vec!["<start>".into()],
        rules: Vec::new(),
        lexeme_ids: HashMap::default(),
        optional_lexemes: HashMap::default(),
        lexemes: Vec::new(),
        symbols: 0,
        member_sets: Vec::new(),
        member_rules: Vec::new(),
        declared: ast
            .indenter
            .iter()
            .flat_map(|s| [s.indent.clone(), s.dedent.clone()])
            .collect(),
        pending_words: Vec::new(),
    };
    for r in &ast.rules {
        if l.names.contains_key(&r.name) {
            return Err(Error::Compile(format!(
                "rule '{}' is defined twice (again at {})",
                r.name, r.pos
            )));
        }
        let id = l.nonterminals.len() as u32;
        l.nonterminals.push(r.name.clone());
        l.names.insert(r.name.clone(), id);
        l.nt_context.push(0);
    }
    let start = match l.names.get(&ast.start) {
        Some(&s) => s,
        None => {
            return Err(Error::Compile(format!(
                "the grammar has no start rule '{}'",
                ast.start
            )))
        }
    };
    l.add_rule(0, vec![Sym::N(start)])?;
    l.check_references(ast)?;
    if !ast.blocks.is_empty() && (ast.lexing != Lexing::Longest || ast.indenter.is_some()) {
        return Err(Error::Compile(
            "blocks (%json, %lark) need a Lark grammar without an indenter".into(),
        ));
    }
    for (i, b) in ast.blocks.iter().enumerate() {
        for name in &b.rules {
            if let Some(&nt) = l.names.get(name) {
                l.nt_context[nt as usize] = i as u32 + 1;
            }
        }
    }
    for r in &ast.rules {
        let lhs = l.names[&r.name];
        l.context = l.nt_context[lhs as usize];
        l.alone = l.context != 0 && ast.blocks[l.context as usize - 1].char_level;
        l.lexing = if l.alone {
            Lexing::AllSplits
        } else {
            ast.lexing
        };
        match &r.body {
            Node::Alt(alts) => l.alternatives(lhs, alts, &r.name)?,
            body => {
                let rhs = l.lower(body, &r.name)?;
                l.add_rule(lhs, rhs)?;
            }
        }
    }
    (l.alone, l.lexing, l.context) = (false, ast.lexing, 0);
    if ast.indenter.is_some() {
        // The indenter checks its brackets against every lexeme: no groups.
        l.place_words(false)?;
    }
    let indenter = match &ast.indenter {
        Some(spec) => Some(l.indenter(spec)?),
        None => None,
    };
    let mut contexts = vec![LexContext {
        depth: 0,
        ignore: l.ignored(&ast.ignore)?,
    }];
    for b in &ast.blocks {
        l.context = contexts.len() as u32;
        contexts.push(LexContext {
            depth: contexts[b.parent as usize].depth + 1,
            ignore: l.ignored(&b.ignore)?,
        });
    }
    l.context = 0;
    l.place_words(true)?;
    let mut ignore: Vec<u32> = contexts.iter().flat_map(|c| c.ignore.clone()).collect();
    ignore.sort_unstable();
    ignore.dedup();
    if ast.blocks.is_empty() {
        contexts.clear();
    }
    let mut cfg = finish(l, ignore, contexts, indenter)?;
    cfg.initial_skip = ast.initial_skip;
    Ok(cfg)
}

fn undefined_rule(name: &str, pos: Pos) -> Error {
    Error::Compile(format!("undefined rule '{name}' referenced at {pos}"))
}

/// Whether rule `start` of `rules` derives some string, assuming every
/// lexeme matches one (true of the schema compiler's literals and regexes).
pub fn derives_a_string(rules: &[RuleDef], start: &str) -> bool {
    let mut productive: HashSet<&str> = HashSet::default();
    loop {
        let before = productive.len();
        for r in rules {
            if !productive.contains(r.name.as_str()) && node_derives(&r.body, &productive) {
                productive.insert(&r.name);
            }
        }
        if productive.len() == before {
            return productive.contains(start);
        }
    }
}

fn node_derives(n: &Node, productive: &HashSet<&str>) -> bool {
    match n {
        Node::Ref(name, _) | Node::Call(name, _, _) => productive.contains(name.as_str()),
        Node::Seq(v) => v.iter().all(|x| node_derives(x, productive)),
        Node::Alt(v) => v.iter().any(|x| node_derives(x, productive)),
        Node::Repeat { node, min, .. } => *min == 0 || node_derives(node, productive),
        Node::Members(m) => {
            let derives = |x: &Node| node_derives(x, productive);
            let required: Vec<&Node> = m.listed.iter().filter(|x| x.1).map(|x| &x.0).collect();
            let some_member = m.listed.iter().any(|x| derives(&x.0))
                || m.extra.as_ref().is_some_and(|x| derives(&x.0));
            (required.is_empty() && derives(&m.close_empty))
                || (required.iter().all(|x| derives(x)) && some_member && derives(&m.close))
        }
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfg::gbnf;

    #[test]
    fn lowering_and_pruning() {
        let g = gbnf::parse(
            "root ::= \"a\" [0-9]+ (\"x\" | \"y\")? r\nr ::= \"z\" | r \"z\"\ndead ::= dead \"q\"",
        )
        .unwrap();
        let cfg = lower(&g).unwrap();
        // "a" [0-9]+ ("x"|"y")? is one lexeme; root -> that lexeme, then r.
        let root = &cfg.rules[cfg.by_lhs[1][0] as usize];
        assert_eq!(root.rhs.len(), 2);
        let Sym::T(first) = root.rhs[0] else {
            panic!("{root:?}")
        };
        let re = &cfg.lexemes[first as usize].regex;
        assert!(
            re.contains("(?:a)") && re.contains("[0-9]") && re.contains("(?:y)"),
            "{re}"
        );
        assert!(cfg
            .rules
            .iter()
            .all(|r| cfg.nonterminals[r.lhs as usize] != "dead"));
        assert!(!cfg.nullable[0]);
        let e = lower(&gbnf::parse("root ::= x").unwrap())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("undefined rule 'x'") && e.contains("line 1, column 10"),
            "{e}"
        );
        let e = lower(&gbnf::parse("root ::= root \"a\"").unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("matches no string"), "{e}");
        let e = lower(&gbnf::parse("a ::= \"a\"").unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("no start rule 'root'"), "{e}");
    }
}
