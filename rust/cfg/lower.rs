//! Lowering a grammar AST to a CFG over lexemes.
//!
//! Any sub-expression without rule references is regular, so it becomes one
//! lexeme (a byte DFA), however many literals and classes it spans: inside it
//! the trie walk only steps a DFA, and the Earley parser runs only where a
//! lexeme ends. With all-splits lexing (GBNF) a lexeme may end at any of its
//! accepting points, so this keeps the language exactly. Alternatives and
//! repetitions of non-regular parts become fresh nonterminals.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::sync::Arc;

use super::ast::{
    GrammarAst, IndenterSpec, Lexing, Members, Node, Pos, RuleDef, TermDef, TokenSet,
    MAX_NODE_DEPTH,
};
use super::cursor::MAX_NESTING;
use super::greedy::greedy_lexemes;
use super::horn::Horn;
use super::indent::{self, Indenter};
use super::larkorder;
use super::members::{
    self, is_listed, MemberRules, MemberSet, COUNT, KEEP, MAX_MEMBERS, ORDERED_COUNT, ORDERED_KEEP,
};
use super::nodedfa::{
    cache_key, dfa_of, is_heavy, is_regular, lexeme_name, literal_words, matches_only,
    none_if_empty, then, DFA_CACHE_ENTRY_BYTES,
};
use super::setnames::SetNames;
use super::valueunion;
use super::wordgroups::{self, PendingWords, Placement};
use crate::error::{Error, Result};
use crate::regex_dfa::{ByteDfa, ByteSet, Op, DEAD};

/// Bounds that keep a hostile grammar from exhausting memory or time.
pub const MAX_RULES: usize = 200_000;
pub const MAX_RHS_SYMBOLS: usize = 2_000_000;
pub const MAX_LEXEMES: usize = 20_000;

/// Compile budget steps per node lowered (its symbols, rules and checks;
/// lexemes are charged for their keys and automata besides).
const LOWER_NODE_STEPS: u64 = 50;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Sym {
    /// A lexeme (terminal).
    T(u32),
    /// A nonterminal.
    N(u32),
    /// A member-set nonterminal (from `Node::Members`) whose instance has the
    /// member set of the item that predicts it after op `.1`
    /// (`members::apply`).
    P(u32, u8),
}

impl Sym {
    pub fn nonterminal(self) -> Option<u32> {
        match self {
            Sym::N(x) | Sym::P(x, _) => Some(x),
            Sym::T(_) => None,
        }
    }

    /// The member set of the nonterminal instance this symbol predicts from
    /// an item whose set is `used` (plain nonterminals start from none).
    pub fn member_set(self, used: MemberSet) -> MemberSet {
        match self {
            Sym::P(_, op) => members::apply(op, used),
            _ => 0,
        }
    }
}

/// Which member sets a rule may be predicted with (`set` indexes
/// `Cfg::member_rules`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Guard {
    Always,
    /// The rule applies member op `op` (see `members::apply`).
    Add {
        set: u32,
        op: u8,
    },
    /// The rule closes the object.
    Close {
        set: u32,
    },
}

#[derive(Clone, Debug)]
pub struct Rule {
    pub lhs: u32,
    pub rhs: Vec<Sym>,
    pub guard: Guard,
}

#[derive(Debug)]
pub struct Lexeme {
    pub regex: String,
    /// Longest-match lexing: the highest rank (priority, `width`, then
    /// `text_len`) that matches wins, then the longest match (see
    /// `Cfg::longest_step`).
    pub priority: i32,
    /// Longest-match lexing: Lark's maximum width (see `larkorder`).
    pub width: u64,
    /// Longest-match lexing: the length of Lark's pattern text (see
    /// `larkorder`), its order's next key after the width.
    pub text_len: usize,
    /// None when the lexeme matches no string at all.
    pub dfa: Option<Arc<ByteDfa>>,
    /// All-splits lexing, and alone lexemes that do not split: the lexeme
    /// ends only where the next byte kills it, which keeps the language
    /// (see `greedy`).
    pub greedy: bool,
    /// The bytes that may follow the lexeme (only greedy lexemes use it).
    pub follow: ByteSet,
    /// Longest-match lexing: per DFA state, the bytes before which the
    /// lexeme may not end there (a trailing negative lookahead).
    pub end_forbid: Option<Box<[ByteSet]>>,
    /// A `%declare`d terminal: it has no text (no DFA); the indenter makes it.
    pub declared: bool,
    /// A Lark string (`"if"`, `"select"i`): where it ends with a pattern
    /// terminal of the same priority on the same text, the string wins, as
    /// Lark retypes a name that spells a keyword.
    pub literal: bool,
    /// A string's text as written (what Lark checks patterns against).
    pub text: Option<String>,
    /// Longest-match lexing: Lark's flags of the terminal (see `larkorder`).
    pub flags: String,
    /// Longest-match lexing, strings: the patterns of the same priority that
    /// match this string whole, and whether each takes it out of Lark's
    /// list (its flags hold the string's). While one of them is alive the
    /// string ranks with it (see `Cfg::rank`).
    pub embedded_in: Vec<(u32, bool)>,
    /// A token terminal (`Node::Tokens`): no DFA; it reads one whole token
    /// whose id the set matches (see `tokenterm`).
    pub tokens: Option<TokenSet>,
    /// Longest-match lexing: a lexeme of a character-level rule (a Lark
    /// grammar's `%json` block). It is lexed apart from the grammar's own
    /// lexemes, in a branch of alone scans only (see `longest::branches`),
    /// ranks against no other lexeme, and ends as under all-splits
    /// lexing: where the byte kills it, or at every accepting point if
    /// `splits` (see `alone_lexemes_end`).
    pub alone: bool,
    /// Its lexer context: 0 for the grammar's own rules, else the block
    /// (`GrammarAst::blocks`) whose rule made it.
    pub context: u32,
}

impl Lexeme {
    /// Its own place in Lark's order (see `larkorder`).
    #[inline]
    pub fn rank(&self) -> larkorder::Rank {
        (self.priority, self.width, self.text_len)
    }

    /// An alone lexeme that may end at every accepting point: some byte
    /// that continues one of its matches may also begin what follows it,
    /// so it is not greedy (see `alone_lexemes_end`).
    #[inline]
    pub fn splits(&self) -> bool {
        self.alone && !self.greedy
    }

    /// Whether a scan of this lexeme in DFA state `q`, which `byte` kills,
    /// ends before the byte: greedy lexemes do where they accept, if
    /// something after them can read the byte.
    #[inline]
    pub fn ends_before(&self, dfa: &ByteDfa, q: u32, byte: u8) -> bool {
        self.greedy && dfa.is_accepting(q) && self.follow.contains(byte)
    }

    /// Longest-match lexing: whether a scan in DFA state `q` may end there
    /// whatever byte follows (it accepts, with no trailing lookahead to pass).
    #[inline]
    pub fn ends_unconditionally(&self, dfa: &ByteDfa, q: u32) -> bool {
        dfa.is_accepting(q)
            && self
                .end_forbid
                .as_ref()
                .is_none_or(|forbid| forbid[q as usize].is_empty())
    }

    /// Longest-match lexing: whether a scan that accepted in `q` and reads
    /// a byte into `q2` may still end at `q` (back-off: unless it surely
    /// matches longer at `q2`). Lexer-only walks stop there for the parser.
    #[inline]
    pub fn may_back_off(&self, dfa: &ByteDfa, q: u32, q2: u32) -> bool {
        dfa.is_accepting(q) && !self.ends_unconditionally(dfa, q2)
    }

    /// A lexeme without text (no DFA), named `regex` in messages: the
    /// indenter's tokens and token terminals set their field on it, and
    /// word groups their trie's DFA and rank.
    pub(super) fn textless(regex: String) -> Self {
        Lexeme {
            regex,
            priority: 0,
            width: 0,
            text_len: 0,
            dfa: None,
            greedy: false,
            follow: ByteSet::default(),
            end_forbid: None,
            declared: false,
            literal: false,
            text: None,
            flags: String::new(),
            embedded_in: Vec::new(),
            tokens: None,
            alone: false,
            context: 0,
        }
    }

    pub fn nullable(&self) -> bool {
        self.dfa.as_ref().is_some_and(|d| d.is_accepting(d.start()))
    }
}

#[derive(Debug)]
pub struct Cfg {
    pub nonterminals: Vec<String>,
    /// Rule 0 is the augmented start rule `S' -> start`.
    pub rules: Vec<Rule>,
    pub by_lhs: Vec<Vec<u32>>,
    pub nullable: Vec<bool>,
    pub lexemes: Vec<Lexeme>,
    /// Lexemes skipped between any two lexemes (longest-match lexing only).
    pub ignore: Vec<u32>,
    pub lexing: Lexing,
    /// The constraints of each `Node::Members`, which guards name.
    pub member_rules: Vec<MemberRules>,
    /// Indentation tokens made by the parser (Lark `%declare _INDENT _DEDENT`).
    pub indenter: Option<Indenter>,
    /// Unique in the process: names this grammar in per-thread caches.
    pub id: u64,
    /// Position-free names of this grammar's Earley sets.
    pub names: SetNames,
    /// Whether some lexeme is a token terminal (`tokenterm`): grammars
    /// without one skip every token-terminal step.
    pub has_tokens: bool,
    /// Whether some lexeme is `alone` (longest-match lexing only): then a
    /// branch holds either one such lexeme or none (see `longest::branches`).
    pub has_alone: bool,
    /// Grammars with blocks (longest-match lexing only; empty otherwise):
    /// per lexer context, its depth and its `%ignore` (see
    /// `Cfg::ignored_at`), and each nonterminal's context.
    pub contexts: Vec<LexContext>,
    pub nt_context: Vec<u32>,
    /// Whether ignored text may come before the first lexeme
    /// (`GrammarAst::initial_skip`).
    pub initial_skip: bool,
}

/// A lexer context of a grammar with blocks: 0 is the grammar's own rules,
/// `i + 1` its block `i`.
#[derive(Debug)]
pub struct LexContext {
    /// Blocks around it (0 for the grammar's own rules).
    pub depth: u32,
    /// Its ignored lexemes.
    pub ignore: Vec<u32>,
}

static NEXT_CFG_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl Cfg {
    pub fn start_rule(&self) -> u32 {
        0
    }

    /// Whether a rule guarded by `guard` may be predicted with member set `used`.
    /// Inlined into the parser's prediction loop: most rules have no guard.
    #[inline]
    pub fn admits(&self, guard: Guard, used: MemberSet) -> bool {
        match guard {
            Guard::Always => true,
            _ => self.admits_members(guard, used),
        }
    }

    /// `admits` for a member-set guard, kept out of line.
    #[inline(never)]
    fn admits_members(&self, guard: Guard, used: MemberSet) -> bool {
        match guard {
            Guard::Always => true,
            Guard::Add { set, op } => self.member_rules[set as usize].may_add(used, op),
            Guard::Close { set } => self.member_rules[set as usize].may_close(used),
        }
    }
}

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

    fn lexeme(&mut self, n: &Node) -> Result<Sym> {
        self.lexeme_with(n, 0, None)
    }

    /// The lexeme for regular node `n` (distinct per priority).
    fn lexeme_with(&mut self, n: &Node, priority: i32, name: Option<&str>) -> Result<Sym> {
        // Lark terminals: alternatives in Lark's order (leftmost-first
        // matching tries them in that order), and Lark's pattern of it (its
        // widths and text rank it). Not for others: it costs a regex parse.
        let ordered;
        let (n, pattern) = if self.lexing == Lexing::Longest {
            let (node, pattern) = larkorder::lark_terminal(n);
            ordered = node;
            (&ordered, Some(pattern))
        } else {
            (n, None)
        };
        let boolean = matches!(
            n,
            Node::Intersect(_) | Node::Minus(..) | Node::DecimalMultiples(_)
        );
        let mut re = String::new();
        cache_key(n, &mut re);
        // Writing, hashing and keeping the key (a regex of the whole node).
        crate::budget::charge_n(re.len().saturating_mul(2))?;
        // Alone lexemes are lexed apart from the grammar's terminals, and
        // Lark's string retyping never applies to them.
        let key = format!("{}\u{0}{priority}\u{0}{re}", self.context);
        let text = larkorder::string_text(n).filter(|_| !self.alone);
        let literal = text.is_some();
        if let Some(&nt) = self.optional_lexemes.get(&key) {
            return Ok(Sym::N(nt));
        }
        if let Some(&id) = self.lexeme_ids.get(&key) {
            let lexeme = &mut self.lexemes[id as usize];
            lexeme.literal |= literal;
            if lexeme.text.is_none() {
                lexeme.text = text;
            }
            return Ok(Sym::T(id));
        }
        if self.lexemes.len() >= MAX_LEXEMES {
            return Err(Error::LimitExceeded(format!(
                "grammar has more than {MAX_LEXEMES} lexemes"
            )));
        }
        // Lark terminals match as Python's re.match does; GBNF lexemes keep
        // every split (the exact character-level language).
        let mut end_forbid = None;
        let dfa = match self.lexing {
            Lexing::AllSplits => dfa_of(n, DFA_CACHE_ENTRY_BYTES)?,
            Lexing::Longest if boolean => {
                return Err(Error::Compile(
                    "intersections and differences need all-splits lexing".into(),
                ))
            }
            // A terminal that is only strings: Lark's regex tries them
            // longest first, so its match is the longest word that is a
            // prefix, as a longest-match scan of their trie finds (see
            // `wordgroups`); no regex compiler for 100,000 words.
            Lexing::Longest
                if literal_words(n).is_some_and(|w| !w.iter().any(String::is_empty)) =>
            {
                let words = literal_words(n).unwrap_or_default();
                wordgroups::group_dfa(&words)?
            }
            Lexing::Longest => match super::lookaround::first_match(&re).map_err(|e| match e {
                Error::Compile(m) => Error::Compile(format!("{}: {m}", lexeme_name(&re, name))),
                e => e,
            })? {
                Some((dfa, forbid)) => {
                    end_forbid = forbid;
                    Some(Arc::new(dfa))
                }
                None => None,
            },
        };
        let mut key = key;
        let mut dfa = dfa;
        let mut optional = None;
        if (self.lexing == Lexing::Longest || self.alone)
            && dfa.as_ref().is_some_and(|d| d.is_accepting(d.start()))
        {
            // llguidance's terminals may match the empty string: the
            // terminal becomes optional, its lexeme the non-empty matches.
            let what = lexeme_name(&re, name);
            let (nonempty, nt) =
                self.optional_terminal(dfa.as_deref(), end_forbid.is_some(), &what)?;
            dfa = nonempty;
            optional = Some((key.clone(), nt));
            key.push_str("\u{0}nonempty");
        }
        if let Some((outer, nt)) = &optional {
            if dfa.is_none() {
                // It matches only the empty string.
                self.optional_lexemes.insert(outer.clone(), *nt);
                return Ok(Sym::N(*nt));
            }
        }
        let id = self.lexemes.len() as u32;
        let (width, text_len, flags) = match pattern {
            Some(p) => (p.max, p.value.chars().count(), p.flags),
            None => (0, 0, String::new()),
        };
        self.lexemes.push(Lexeme {
            regex: re,
            priority,
            width,
            text_len,
            dfa,
            greedy: false,
            follow: ByteSet::default(),
            end_forbid,
            declared: false,
            literal,
            text,
            flags,
            embedded_in: Vec::new(),
            tokens: None,
            alone: self.alone,
            context: self.context,
        });
        self.lexeme_ids.insert(key, id);
        if let Some((outer, nt)) = optional {
            self.add_rule(nt, vec![Sym::T(id)])?;
            self.optional_lexemes.insert(outer, nt);
            return Ok(Sym::N(nt));
        }
        Ok(Sym::T(id))
    }

    /// For a longest-match terminal `what` whose `dfa` accepts the empty
    /// string: the DFA of its non-empty matches (None if there are none)
    /// and a fresh nonterminal that derives the empty string (the caller
    /// adds its rule to the lexeme).
    fn optional_terminal(
        &mut self,
        dfa: Option<&ByteDfa>,
        lookahead: bool,
        what: &str,
    ) -> Result<(Option<Arc<ByteDfa>>, u32)> {
        if lookahead {
            return Err(Error::Compile(format!(
                "{what} matches the empty string and ends in a lookahead"
            )));
        }
        let dfa = dfa.expect("a nullable lexeme has a DFA");
        let empty = ByteDfa::literals(&[b""]).expect("the empty word has a DFA");
        let nonempty = none_if_empty(ByteDfa::product(dfa, &empty, Op::AndNot))?;
        let nt = self.fresh("empty-terminal")?;
        self.add_rule(nt, Vec::new())?;
        Ok((nonempty.map(Arc::new), nt))
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

    /// The rules for the pending plain strings: grouped into trie lexemes
    /// where `group` and `wordgroups::place` allow, else one lexeme each.
    fn place_words(&mut self, group: bool) -> Result<()> {
        let pending = std::mem::take(&mut self.pending_words);
        let placed = if group {
            wordgroups::place(&pending, &self.lexemes)?
        } else {
            pending
                .into_iter()
                .flat_map(|p| {
                    p.words
                        .into_iter()
                        .map(move |w| (p.lhs, Placement::Alone(w)))
                })
                .collect()
        };
        for (lhs, placement) in placed {
            self.context = self.nt_context[lhs as usize];
            let sym = match placement {
                Placement::Alone(w) => self.lexeme(&Node::Literal(w))?,
                Placement::Group { words, rank } => self.word_group(words, rank)?,
            };
            self.add_rule(lhs, vec![sym])?;
        }
        self.context = 0;
        Ok(())
    }

    /// A lexeme of automaton `dfa` (all-splits lexing), named `what`.
    fn built_lexeme(&mut self, dfa: ByteDfa, what: String) -> Result<Sym> {
        if self.lexemes.len() >= MAX_LEXEMES {
            return Err(Error::LimitExceeded(format!(
                "grammar has more than {MAX_LEXEMES} lexemes"
            )));
        }
        let id = self.lexemes.len() as u32;
        self.lexemes.push(Lexeme {
            dfa: Some(Arc::new(dfa)),
            alone: self.alone,
            context: self.context,
            ..Lexeme::textless(what)
        });
        Ok(Sym::T(id))
    }

    /// One lexeme matching exactly `words` (Lark strings), ranked `rank`.
    fn word_group(&mut self, words: Vec<String>, rank: larkorder::Rank) -> Result<Sym> {
        if self.lexemes.len() >= MAX_LEXEMES {
            return Err(Error::LimitExceeded(format!(
                "grammar has more than {MAX_LEXEMES} lexemes"
            )));
        }
        let dfa = wordgroups::group_dfa(&words)?;
        let id = self.lexemes.len() as u32;
        let (priority, width, text_len) = rank;
        self.lexemes.push(Lexeme {
            priority,
            width,
            text_len,
            dfa,
            // Strings (Lark retypes no pattern's match as one of them:
            // `wordgroups::place` keeps such strings alone), and never a
            // pattern that other strings could be embedded in.
            literal: true,
            context: self.context,
            ..Lexeme::textless(format!(
                "one of {} strings ({:?}, ...)",
                words.len(),
                words[0]
            ))
        });
        Ok(Sym::T(id))
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

    /// The lexeme of `%declare`d terminal `name`: no text, made by the indenter.
    fn declared_lexeme(&mut self, name: &str) -> Result<Sym> {
        let key = format!("\u{0}declared {name}");
        if let Some(&id) = self.lexeme_ids.get(&key) {
            return Ok(Sym::T(id));
        }
        let id = self.lexemes.len() as u32;
        self.lexemes.push(Lexeme {
            declared: true,
            ..Lexeme::textless(format!("%declare {name}"))
        });
        self.lexeme_ids.insert(key, id);
        Ok(Sym::T(id))
    }

    /// The lexeme of token terminal `set` (one per distinct set).
    fn token_lexeme(&mut self, set: &TokenSet) -> Result<Sym> {
        let key = format!("\u{0}tokens {set:?}");
        if let Some(&id) = self.lexeme_ids.get(&key) {
            return Ok(Sym::T(id));
        }
        if self.lexemes.len() >= MAX_LEXEMES {
            return Err(Error::LimitExceeded(format!(
                "grammar has more than {MAX_LEXEMES} lexemes"
            )));
        }
        crate::budget::charge_n(set.ranges.len())?;
        let id = self.lexemes.len() as u32;
        self.lexemes.push(Lexeme {
            tokens: Some(set.clone()),
            ..Lexeme::textless(super::tokenterm::describe(set))
        });
        self.lexeme_ids.insert(key, id);
        Ok(Sym::T(id))
    }

    /// The indenter of `spec`: its lexemes, and the newline's DFA split by
    /// the indentation width.
    fn indenter(&mut self, spec: &IndenterSpec) -> Result<Indenter> {
        if !self.terminals.contains_key(spec.newline.as_str()) {
            return Err(Error::Compile(format!(
                "%declare {} {} needs a newline terminal {} for the indenter",
                spec.indent, spec.dedent, spec.newline
            )));
        }
        let Sym::T(newline) = self.terminal(&spec.newline)? else {
            return Err(Error::Compile(format!(
                "newline terminal {} may not match the empty string",
                spec.newline
            )));
        };
        let Sym::T(indent) = self.declared_lexeme(&spec.indent)? else {
            unreachable!()
        };
        let Sym::T(dedent) = self.declared_lexeme(&spec.dedent)? else {
            unreachable!()
        };
        let open = self.brackets(&spec.open)?;
        let close = self.brackets(&spec.close)?;
        let lexeme = &mut self.lexemes[newline as usize];
        let Some(dfa) = lexeme.dfa.as_ref() else {
            return Err(Error::Compile(format!(
                "newline terminal {} matches no string",
                spec.newline
            )));
        };
        if lexeme.end_forbid.is_some() {
            return Err(Error::Compile(format!(
                "newline terminal {} may not end in a lookahead",
                spec.newline
            )));
        }
        let (measured, widths) = indent::measured(dfa)?;
        lexeme.dfa = Some(Arc::new(measured));
        Ok(Indenter {
            newline,
            indent,
            dedent,
            open,
            close,
            widths,
        })
    }

    /// The lexemes of brackets `(name, text)` that the grammar uses: the
    /// named terminal and the anonymous literal. No other lexeme may match a
    /// bracket's text, or which one ended would change the layout.
    fn brackets(&mut self, brackets: &[(String, String)]) -> Result<Vec<u32>> {
        let mut out = Vec::new();
        for (name, text) in brackets {
            // `lexeme_with`'s key: context 0 (no blocks with an indenter),
            // priority 0.
            let mut key = String::from("0\u{0}0\u{0}");
            cache_key(&Node::Literal(text.clone()), &mut key);
            let mut ids: Vec<u32> = self.lexeme_ids.get(&key).copied().into_iter().collect();
            if self.terminals.contains_key(name.as_str()) {
                if let Sym::T(id) = self.terminal(name)? {
                    ids.push(id);
                }
            }
            for &id in &ids {
                let clash = self.lexemes.iter().enumerate().find(|(other, x)| {
                    !ids.contains(&(*other as u32))
                        && x.dfa.as_ref().is_some_and(|d| {
                            d.is_accepting(d.step_bytes(d.start(), text.as_bytes()))
                        })
                });
                if let Some((_, x)) = clash {
                    return Err(Error::Compile(format!(
                        "the indenter's bracket {text:?} is also matched by /{}/",
                        x.regex
                    )));
                }
                let only_text = self.lexemes[id as usize]
                    .dfa
                    .as_ref()
                    .is_some_and(|d| matches_only(d, text.as_bytes()));
                if !only_text {
                    return Err(Error::Compile(format!(
                        "the indenter's bracket terminal {name} must match exactly {text:?}"
                    )));
                }
            }
            out.extend(ids);
        }
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }

    /// The lexeme of a named terminal, its body's terminal references inlined.
    fn terminal(&mut self, name: &str) -> Result<Sym> {
        if let Some(&id) = self.terminal_ids.get(name) {
            return Ok(Sym::T(id));
        }
        let def = self.terminals[name];
        let mut size = 0;
        let body = self.inline_terminals(&def.body, &mut vec![name.to_string()], &mut size, 0)?;
        if super::tokenterm::holds_tokens(&body) {
            return Err(Error::Compile(format!(
                "terminal {name} holds a special token or token id: use it in a rule"
            )));
        }
        let sym = self.lexeme_with(&body, def.priority, Some(name))?;
        if let Sym::T(id) = sym {
            self.terminal_ids.insert(name.to_string(), id);
        }
        Ok(sym)
    }

    /// `n` with its terminal references replaced by their bodies. A chain
    /// of references is at most `MAX_NESTING` deep (each level recurses),
    /// and the result at most `MAX_RHS_SYMBOLS` nodes (`A: B B`, `B: C C`,
    /// ... doubles at every level); `size` counts the nodes made.
    fn inline_terminals(
        &self,
        n: &Node,
        stack: &mut Vec<String>,
        size: &mut usize,
        depth: usize,
    ) -> Result<Node> {
        // The result is as deep as this recursion: each level a node.
        if depth > MAX_NODE_DEPTH {
            return Err(Error::LimitExceeded(format!(
                "terminal {} nests deeper than {MAX_NODE_DEPTH} levels once the terminals it \
                 uses are inlined",
                stack[0]
            )));
        }
        *size += 1;
        if *size > MAX_RHS_SYMBOLS {
            return Err(Error::LimitExceeded(format!(
                "terminal {} expands to more than {MAX_RHS_SYMBOLS} parts",
                stack[0]
            )));
        }
        crate::budget::charge(1)?;
        let mut all = |v: &[Node], stack: &mut Vec<String>| -> Result<Vec<Node>> {
            v.iter()
                .map(|x| self.inline_terminals(x, stack, size, depth + 1))
                .collect()
        };
        Ok(match n {
            Node::Ref(name, pos) => {
                let Some(def) = self.terminals.get(name.as_str()) else {
                    return Err(Error::Compile(format!(
                        "terminal {} refers to '{name}' at {pos}, which is not a terminal",
                        stack[0]
                    )));
                };
                if stack.contains(name) {
                    return Err(Error::Compile(format!(
                        "terminal {name} is defined in terms of itself (at {pos})"
                    )));
                }
                if stack.len() >= MAX_NESTING as usize {
                    return Err(Error::LimitExceeded(format!(
                        "terminal {} refers to terminals nested more than {MAX_NESTING} deep",
                        stack[0]
                    )));
                }
                stack.push(name.clone());
                let body = self.inline_terminals(&def.body, stack, size, depth)?;
                stack.pop();
                body
            }
            // Templates are rules: a terminal cannot call one (Lark's own
            // grammar cannot write `A{}` in a terminal body either).
            Node::Call(name, _, pos) => {
                return Err(Error::Compile(format!(
                    "terminal {} calls template '{name}' at {pos}: templates are rules, \
                     and a terminal may only use terminals",
                    stack[0]
                )))
            }
            Node::Seq(v) => Node::Seq(all(v, stack)?),
            Node::Alt(v) => Node::Alt(all(v, stack)?),
            Node::Repeat { node, min, max } => Node::Repeat {
                node: Box::new(self.inline_terminals(node, stack, size, depth + 1)?),
                min: *min,
                max: *max,
            },
            other => other.clone(),
        })
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

fn finish(
    l: Lowerer<'_>,
    ignore: Vec<u32>,
    contexts: Vec<LexContext>,
    indenter: Option<Indenter>,
) -> Result<Cfg> {
    let lexing = l.lexing;
    let n = l.nonterminals.len();
    // Productive symbols: those that derive at least one string.
    let lex_ok: Vec<bool> = l
        .lexemes
        .iter()
        .map(|x| x.dfa.is_some() || x.declared || x.tokens.is_some())
        .collect();
    let sym_ok = |s: &Sym, productive: &[bool]| match *s {
        Sym::T(t) => lex_ok[t as usize],
        Sym::N(x) | Sym::P(x, _) => productive[x as usize],
    };
    // A member-set nonterminal's guards decide which rules apply: it derives
    // a string iff it can close with its required members and dependencies.
    let mut is_member_set = vec![false; n];
    let mut member_rules: HashMap<u32, Vec<&Rule>> = HashMap::default();
    for &after in &l.member_sets {
        is_member_set[after as usize] = true;
    }
    for r in &l.rules {
        if is_member_set[r.lhs as usize] {
            member_rules.entry(r.lhs).or_default().push(r);
        }
    }
    // The listed members that may be added, or None if the set never closes.
    let live_members = |set: usize, productive: &[bool]| -> Option<MemberSet> {
        let after = l.member_sets[set];
        let (mut addable, mut extra, mut close) = (0 as MemberSet, false, false);
        for r in &member_rules[&after] {
            let ok = r
                .rhs
                .iter()
                .all(|s| s.nonterminal() == Some(after) || sym_ok(s, productive));
            match r.guard {
                _ if !ok => {}
                Guard::Add { op, .. } if is_listed(op) => addable |= (1 as MemberSet) << op,
                Guard::Add { .. } => extra = true,
                Guard::Close { .. } => close = true,
                Guard::Always => {}
            }
        }
        l.member_rules[set].live_members(addable, extra, close)
    };
    // Ordinary nonterminals by propagation (linear in the grammar); each
    // round of member sets that become productive propagates again.
    let skip = |x: u32| is_member_set[x as usize];
    let mut horn = Horn::new(
        n,
        l.rules.iter().map(|r| (r.lhs, r.rhs.as_slice())),
        |t| lex_ok[t as usize],
        skip,
    )?;
    loop {
        let mut changed = false;
        for (set, &after) in l.member_sets.iter().enumerate() {
            if !horn.holds()[after as usize] && live_members(set, horn.holds()).is_some() {
                horn.set(after, &skip);
                changed = true;
            }
        }
        if !changed {
            break;
        }
        crate::budget::charge_n(member_rules.values().map(Vec::len).sum::<usize>())?;
    }
    let productive = horn.into_holds();
    // Members whose dependencies can never be added cannot be added either.
    let can_add: Vec<MemberSet> = (0..l.member_sets.len())
        .map(|set| live_members(set, &productive).unwrap_or(0))
        .collect();
    if !productive[0] {
        return Err(Error::Compile("the grammar matches no string".into()));
    }
    // Ordered objects look ahead at what may still come (`MemberRules::live`).
    let extra_live: Vec<bool> = (l.member_sets.iter())
        .map(|after| {
            member_rules[after].iter().any(|r| {
                matches!(r.guard, Guard::Add { op, .. } if !is_listed(op))
                    && (r.rhs.iter())
                        .all(|s| s.nonterminal() == Some(*after) || sym_ok(s, &productive))
            })
        })
        .collect();
    drop(member_rules);
    let mut member_rules_out = l.member_rules;
    for (set, rules) in member_rules_out.iter_mut().enumerate() {
        rules.live = can_add[set];
        rules.extra_live = extra_live[set];
    }
    let rules: Vec<Rule> = l
        .rules
        .into_iter()
        .filter(|r| r.rhs.iter().all(|s| sym_ok(s, &productive)))
        .filter(|r| match r.guard {
            Guard::Add { set, op } if is_listed(op) => can_add[set as usize] & (1 << op) != 0,
            _ => true,
        })
        .collect();
    let mut by_lhs = vec![Vec::new(); n];
    for (i, r) in rules.iter().enumerate() {
        by_lhs[r.lhs as usize].push(i as u32);
    }
    let lex_nullable: Vec<bool> = l.lexemes.iter().map(Lexeme::nullable).collect();
    let nullable = Horn::new(
        n,
        rules.iter().map(|r| (r.lhs, r.rhs.as_slice())),
        |t| lex_nullable[t as usize],
        |_| false,
    )?
    .into_holds();
    // The parser advances over nullable nonterminals whatever the member
    // set, which is exact only if member-set nonterminals are not nullable.
    if let Some(&after) = l.member_sets.iter().find(|a| nullable[**a as usize]) {
        return Err(Error::Compile(format!(
            "object members '{}' may be empty after a member",
            l.nonterminals[after as usize]
        )));
    }
    let mut lexemes = l.lexemes;
    let has_tokens = lexemes.iter().any(|x| x.tokens.is_some());
    if has_tokens && indenter.is_some() {
        return Err(Error::Compile(
            "special tokens and token ids are not supported in grammars with an indenter".into(),
        ));
    }
    if lexing == Lexing::Longest {
        embed_strings(&mut lexemes);
    }
    let has_alone = lexemes.iter().any(|x| x.alone);
    if lexing == Lexing::AllSplits {
        let greedy = greedy_lexemes(&rules, &nullable, &lexemes, ByteSet::default());
        for (lexeme, (g, follow)) in lexemes.iter_mut().zip(greedy) {
            lexeme.greedy = g;
            lexeme.follow = follow;
        }
    } else if has_alone {
        alone_lexemes_end(&rules, &nullable, &mut lexemes, &ignore);
    }
    Ok(Cfg {
        nonterminals: l.nonterminals,
        rules,
        by_lhs,
        nullable,
        lexemes,
        ignore,
        lexing,
        member_rules: member_rules_out,
        indenter,
        id: NEXT_CFG_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        names: SetNames::default(),
        has_tokens,
        has_alone,
        initial_skip: true,
        nt_context: if contexts.is_empty() {
            Vec::new()
        } else {
            l.nt_context
        },
        contexts,
    })
}

/// Decides where the alone lexemes of a longest-match grammar end. Ending
/// one only where the next byte kills it keeps every split its rules allow
/// when no byte that continues one of its matches can begin what follows
/// it, ignored text included (an `%ignore`d terminal may come before any
/// other terminal of the grammar, and at the end: see `Cfg::ignored_at`);
/// the others end at every accepting point (`Lexeme::splits`). Such a greedy
/// alone lexeme carries its `follow`, as under all-splits lexing: mask
/// fills then drop its ends before a byte no follower reads
/// (`LexCache::boundary`) instead of walking the parser there (a JSON
/// number's end before every byte but the digits).
fn alone_lexemes_end(rules: &[Rule], nullable: &[bool], lexemes: &mut [Lexeme], ignore: &[u32]) {
    let mut ignored = ByteSet::default();
    for &t in ignore {
        if let Some(d) = &lexemes[t as usize].dfa {
            ignored.union_with(&d.first_bytes());
        }
    }
    let greedy = greedy_lexemes(rules, nullable, lexemes, ignored);
    for (lexeme, (greedy, follow)) in lexemes.iter_mut().zip(greedy) {
        if lexeme.alone && greedy {
            lexeme.greedy = true;
            lexeme.follow = follow;
        }
    }
}

/// Fills each string's `embedded_in`: the patterns of its priority that
/// match its text whole, as Python's `re.match` would (Lark's check in
/// `_create_unless`), and whether their flags hold the string's.
fn embed_strings(lexemes: &mut [Lexeme]) {
    // Only patterns take strings in: a grammar of many strings and few
    // patterns looks at each string against those few.
    let patterns: Vec<usize> = (0..lexemes.len())
        .filter(|&r| !lexemes[r].literal && !lexemes[r].alone)
        .collect();
    for s in 0..lexemes.len() {
        let Some(text) = lexemes[s].text.as_deref() else {
            continue;
        };
        let string_flags = &lexemes[s].flags;
        let embedded_in: Vec<(u32, bool)> = (patterns.iter())
            .map(|&r| (r, &lexemes[r]))
            .filter(|&(r, pattern)| {
                r != s
                    && pattern.priority == lexemes[s].priority
                    && pattern.dfa.as_ref().is_some_and(|d| {
                        let q = d.step_bytes(d.start(), text.as_bytes());
                        q != DEAD && d.is_accepting(q)
                    })
            })
            .map(|(r, pattern)| {
                let removes = string_flags.chars().all(|f| pattern.flags.contains(f));
                (r as u32, removes)
            })
            .collect();
        lexemes[s].embedded_in = embedded_in;
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
