//! The grammar AST both front ends (GBNF, Lark) produce: rules whose bodies
//! are regular expressions over terminals and rule references. `lower`
//! turns it into the CFG the Earley engine runs.

use std::sync::Arc;

use super::members::{MemberRules, MemberSet};
use crate::regex_dfa::ByteDfa;

/// A position in the grammar source, for error messages (1-based).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
}

impl std::fmt::Display for Pos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}, column {}", self.line, self.col)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    /// Matches the empty string.
    Empty,
    /// An exact UTF-8 string.
    Literal(String),
    /// One character from (or, negated, outside) inclusive ranges.
    Class {
        ranges: Vec<(char, char)>,
        negated: bool,
    },
    /// Any one character (`.` in GBNF).
    AnyChar,
    /// A regular expression in Rust `regex` syntax (Lark `/.../` terminals).
    Regex(String),
    /// A reference to a rule or terminal by name.
    Ref(String, Pos),
    Seq(Vec<Node>),
    Alt(Vec<Node>),
    /// `min..=max` repetitions (`max` None: unbounded).
    Repeat {
        node: Box<Node>,
        min: u32,
        max: Option<u32>,
    },
    /// A template instantiation (Lark `name{arg, ...}`); front ends expand
    /// these before lowering.
    Call(String, Vec<Node>, Pos),
    /// A JSON object's members (the schema compiler's): see [`Members`].
    Members(Box<Members>),
    /// The strings every part matches. Parts are regular; the lexeme's DFA is
    /// the product of theirs (all-splits lexing only). It is a lexeme of its
    /// own: no neighbouring run merges into it.
    Intersect(Vec<Node>),
    /// The strings `.0` matches and `.1` does not (regular parts, as above).
    Minus(Box<Node>, Box<Node>),
    /// JSON number texts without an exponent whose value is a multiple of
    /// this positive decimal (the schema compiler's `multipleOf`): regular,
    /// built as an automaton (a regex would be huge). A lexeme of its own.
    DecimalMultiples(String),
    /// Exactly one whole token, by id: one of `set`'s ids, or any id not in
    /// it (see `tokenterm`). Not regular over bytes: its own lexeme, read
    /// only where a token starts.
    Tokens(TokenSet),
    /// A regular language whose automaton the front end built (an `enum` of
    /// records, `regex_dfa::records_dfa`): a lexeme of its own, never
    /// joined with its neighbours (its states are not a table to combine).
    Automaton(Prebuilt),
}

/// An automaton a front end built, compared by identity.
#[derive(Clone)]
pub struct Prebuilt(pub Arc<ByteDfa>);

impl PartialEq for Prebuilt {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Prebuilt {}

impl std::fmt::Debug for Prebuilt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Prebuilt({:p})", Arc::as_ptr(&self.0))
    }
}

/// A set of token ids for a token terminal (`Node::Tokens`): inclusive id
/// ranges, sorted and disjoint, and whether the terminal matches the ids
/// outside them instead. A complemented set never matches an EOS id or a
/// padding id (see `tokenterm`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TokenSet {
    pub ranges: Vec<(u32, u32)>,
    pub negated: bool,
}

impl TokenSet {
    /// The set of `ranges` (inclusive; any order, overlaps merged; empty
    /// ranges `lo > hi` dropped), complemented if `negated`.
    pub fn new(ranges: impl IntoIterator<Item = (u32, u32)>, negated: bool) -> Self {
        let mut v: Vec<(u32, u32)> = ranges.into_iter().filter(|(lo, hi)| lo <= hi).collect();
        v.sort_unstable();
        let mut merged: Vec<(u32, u32)> = Vec::with_capacity(v.len());
        for (lo, hi) in v {
            match merged.last_mut() {
                Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
                _ => merged.push((lo, hi)),
            }
        }
        TokenSet {
            ranges: merged,
            negated,
        }
    }

    /// Whether `id` is among the listed ids (before any complement).
    pub fn lists(&self, id: u32) -> bool {
        let i = self.ranges.partition_point(|&(_, hi)| hi < id);
        self.ranges.get(i).is_some_and(|&(lo, _)| lo <= id)
    }
}

/// The body of a JSON object after `{`: each listed member at most once, in
/// any order, every required one present, `extra` members anywhere, and the
/// count and dependency constraints (see `members::MemberRules`).
/// As rules over subsets this needs 2^n of them; lowering instead gives the
/// parser items a member set, so it costs rules linear in the members.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Members {
    /// Each listed member (key, separator and value) and whether it is required.
    pub listed: Vec<(Node, bool)>,
    /// A member whose key is none of the listed ones (None: not allowed),
    /// as the first member and after a separator (`sep` included).
    pub extra: Option<(Node, Node)>,
    /// Before the first member (not before `close_empty`): the indented
    /// layout's newline, Empty otherwise.
    pub open: Node,
    /// Between two members.
    pub sep: Node,
    /// Ends the object after at least one member.
    pub close: Node,
    /// Ends an object with no members.
    pub close_empty: Node,
    /// Members in all (listed and extra), at least / at most.
    pub min: u32,
    pub max: Option<u32>,
    /// A listed member's index and the listed members it requires.
    pub dependent: Vec<(usize, Vec<usize>)>,
    /// Listed members with the same key (see `MemberRules::twins`).
    pub twins: Vec<(usize, usize)>,
    /// Listed members at least one of which is used (empty: no such rule).
    pub any_of: Vec<usize>,
    /// Listed members come in their order, before the unlisted ones
    /// (`key_order="schema"`).
    pub ordered: bool,
}

impl Members {
    /// The constraints the parser checks on the set of members used.
    pub fn rules(&self) -> MemberRules {
        let bits = |ix: &mut dyn Iterator<Item = usize>| ix.map(|i| (1 as MemberSet) << i).sum();
        MemberRules {
            listed: self.listed.len(),
            required: bits(&mut (0..self.listed.len()).filter(|&i| self.listed[i].1)),
            min: self.min,
            max: self.max,
            dependent: self
                .dependent
                .iter()
                .map(|(m, deps)| (*m as u8, bits(&mut deps.iter().copied())))
                .collect(),
            twins: self
                .twins
                .iter()
                .map(|&(a, b)| (a as u8, b as u8))
                .collect(),
            any_of: bits(&mut self.any_of.iter().copied()),
            ordered: self.ordered,
            live: 0,
            extra_live: false,
        }
    }
}

impl Node {
    /// `Seq` of `items`, flattening the trivial cases.
    pub fn seq(mut items: Vec<Node>) -> Node {
        match items.len() {
            0 => Node::Empty,
            1 => items.pop().unwrap(),
            _ => Node::Seq(items),
        }
    }

    /// `node` repeated `min..=max` times (`max` None: unbounded).
    pub fn repeat(node: Node, min: u32, max: Option<u32>) -> Node {
        Node::Repeat {
            node: Box::new(node),
            min,
            max,
        }
    }

    /// A token terminal: one whole token whose id is in `ranges`
    /// (inclusive), or with `negated`, any one token whose id is not (EOS
    /// and padding ids excluded).
    pub fn tokens(ranges: impl IntoIterator<Item = (u32, u32)>, negated: bool) -> Node {
        Node::Tokens(TokenSet::new(ranges, negated))
    }

    /// Whether the tree is more than `limit` levels deep (read without
    /// recursion, so any tree may be asked).
    pub fn deeper_than(&self, limit: usize) -> bool {
        let mut stack: Vec<(&Node, usize)> = vec![(self, 1)];
        let mut children = Vec::new();
        while let Some((n, d)) = stack.pop() {
            if d > limit {
                return true;
            }
            n.push_children(&mut children);
            stack.extend(children.drain(..).map(|c| (c, d + 1)));
        }
        false
    }

    /// The first reference in source order whose name `undefined` holds
    /// (read without recursion, so any tree may be asked).
    pub fn find_reference(&self, mut undefined: impl FnMut(&str) -> bool) -> Option<(&str, Pos)> {
        let mut stack: Vec<&Node> = vec![self];
        let mut children = Vec::new();
        while let Some(n) = stack.pop() {
            if let Node::Ref(name, pos) = n {
                if undefined(name) {
                    return Some((name, *pos));
                }
            }
            n.push_children(&mut children);
            stack.extend(children.drain(..).rev());
        }
        None
    }

    /// Appends the nodes directly below this one to `out`, in source order.
    fn push_children<'a>(&'a self, out: &mut Vec<&'a Node>) {
        match self {
            Node::Seq(v) | Node::Alt(v) | Node::Intersect(v) | Node::Call(_, v, _) => {
                out.extend(v.iter())
            }
            Node::Repeat { node, .. } => out.push(node),
            Node::Minus(a, b) => out.extend([&**a, &**b]),
            Node::Members(m) => {
                out.push(&m.open);
                out.extend(m.listed.iter().map(|(x, _)| x));
                if let Some((a, b)) = &m.extra {
                    out.extend([a, b]);
                }
                out.extend([&m.sep, &m.close, &m.close_empty]);
            }
            Node::Empty
            | Node::Literal(_)
            | Node::Class { .. }
            | Node::AnyChar
            | Node::Regex(_)
            | Node::Ref(..)
            | Node::DecimalMultiples(_)
            | Node::Automaton(_)
            | Node::Tokens(_) => {}
        }
    }

    pub fn alt(mut items: Vec<Node>) -> Node {
        if items.len() == 1 {
            items.pop().unwrap()
        } else {
            Node::Alt(items)
        }
    }
}

#[derive(Clone, Debug)]
pub struct RuleDef {
    pub name: String,
    pub body: Node,
    pub pos: Pos,
}

/// How a token's bytes are split into lexemes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lexing {
    /// Every split the grammar allows (character-level CFG semantics; GBNF).
    AllSplits,
    /// Over the lexemes the parser expects, the first match in Lark's order
    /// (priority, then maximum width: see `larkorder`), then the longest;
    /// `%ignore`d lexemes may appear between any two lexemes.
    Longest,
}

/// A named terminal (Lark `NAME: ...`): regular, becomes one lexeme.
#[derive(Clone, Debug)]
pub struct TermDef {
    pub name: String,
    pub body: Node,
    pub priority: i32,
    pub pos: Pos,
}

/// Bound on the depth of a rule's tree once templates are expanded,
/// `%extend`s merged and terminals inlined (as parsed, each body is at most
/// `cursor::MAX_NESTING` deep). Lowering and every later walk of a body
/// recurse once per level, so this bounds their stack use.
pub const MAX_NODE_DEPTH: usize = 400;

#[derive(Clone, Debug)]
pub struct GrammarAst {
    pub rules: Vec<RuleDef>,
    pub terminals: Vec<TermDef>,
    /// Lexemes that may appear between any two lexemes (Lark `%ignore`).
    pub ignore: Vec<Node>,
    pub start: String,
    pub lexing: Lexing,
    /// Indentation tokens made by the parser (Lark's Python grammars).
    pub indenter: Option<IndenterSpec>,
    /// Nested grammars inside a longest-match grammar (a Lark grammar's
    /// `%json` and `%lark` blocks): block `i` is lexer context `i + 1`
    /// (context 0: the grammar's own rules).
    pub blocks: Vec<Block>,
    /// Whether `%ignore`d text may come before the first lexeme (Lark's
    /// lexer allows it; llguidance only with `allow_initial_skip`).
    pub initial_skip: bool,
}

/// A nested grammar's rules in a longest-match grammar.
#[derive(Clone, Debug)]
pub struct Block {
    /// The rules it holds (their names in the grammar).
    pub rules: Vec<String>,
    /// Read character-level (`%json`): every split its rules allow, each
    /// lexeme lexed on its own (see `lowered::Lexeme::alone`). Otherwise
    /// (`%lark`) its terminals are lexed as Lark lexes them.
    pub char_level: bool,
    /// Its own `%ignore` (a `%lark` block's): text skipped between its
    /// terminals, where the grammar's own `%ignore` does not reach.
    pub ignore: Vec<Node>,
    /// The context it sits in (0: the grammar's own rules).
    pub parent: u32,
}

impl GrammarAst {
    /// Refuses a rule, terminal or `%ignore` body deeper than
    /// `MAX_NODE_DEPTH`, naming it.
    pub fn check_depth(&self) -> crate::error::Result<()> {
        let bodies = self
            .rules
            .iter()
            .map(|r| (r.name.as_str(), &r.body))
            .chain(self.terminals.iter().map(|t| (t.name.as_str(), &t.body)))
            .chain(self.ignore.iter().map(|n| ("%ignore", n)));
        for (name, body) in bodies {
            crate::budget::charge(1)?;
            if body.deeper_than(MAX_NODE_DEPTH) {
                return Err(crate::error::Error::LimitExceeded(format!(
                    "{name} nests deeper than {MAX_NODE_DEPTH} levels (groups, operators, \
                     templates and terminals together)"
                )));
            }
        }
        Ok(())
    }
}

impl GrammarAst {
    /// Its rules under names prefixed by `prefix` (every definition and
    /// reference), to embed them in another grammar, and the name of its
    /// start rule there. Character-level grammars only: terminals and
    /// `%ignore` would lose their meaning out of their grammar.
    pub fn into_prefixed_rules(self, prefix: &str) -> crate::error::Result<(Vec<RuleDef>, String)> {
        if !self.terminals.is_empty()
            || !self.ignore.is_empty()
            || self.lexing != Lexing::AllSplits
            || self.indenter.is_some()
        {
            return Err(crate::error::Error::Compile(
                "an embedded grammar must be character-level (GBNF/EBNF)".into(),
            ));
        }
        let mut rules = self.rules;
        for r in &mut rules {
            prefix_refs(&mut r.body, prefix)?;
            r.name = format!("{prefix}{}", r.name);
        }
        Ok((rules, format!("{prefix}{}", self.start)))
    }
}

/// Prefixes every rule reference in `node`.
fn prefix_refs(node: &mut Node, prefix: &str) -> crate::error::Result<()> {
    node.rename_refs(|name| *name = format!("{prefix}{name}"))
}

impl Node {
    /// Calls `rename` on the name of every reference and template call in
    /// the node (iteratively: an imported grammar's nodes may nest deeply).
    pub fn rename_refs(&mut self, mut rename: impl FnMut(&mut String)) -> crate::error::Result<()> {
        let mut stack: Vec<&mut Node> = vec![self];
        while let Some(n) = stack.pop() {
            crate::budget::charge(1)?;
            match n {
                Node::Ref(name, _) => rename(name),
                Node::Call(name, args, _) => {
                    rename(name);
                    stack.extend(args.iter_mut());
                }
                Node::Seq(items) | Node::Alt(items) | Node::Intersect(items) => {
                    stack.extend(items.iter_mut())
                }
                Node::Repeat { node, .. } => stack.push(node),
                Node::Minus(a, b) => {
                    stack.push(a);
                    stack.push(b);
                }
                Node::Members(m) => {
                    let m = &mut **m;
                    stack.extend(m.listed.iter_mut().map(|(n, _)| n));
                    if let Some((a, b)) = &mut m.extra {
                        stack.push(a);
                        stack.push(b);
                    }
                    stack.push(&mut m.open);
                    stack.push(&mut m.sep);
                    stack.push(&mut m.close);
                    stack.push(&mut m.close_empty);
                }
                Node::Empty
                | Node::Tokens(_)
                | Node::Literal(_)
                | Node::Class { .. }
                | Node::AnyChar
                | Node::Regex(_)
                | Node::DecimalMultiples(_)
                | Node::Automaton(_) => {}
            }
        }
        Ok(())
    }
}

/// What Lark's `PythonIndenter` reads and makes, by terminal name.
#[derive(Clone, Debug)]
pub struct IndenterSpec {
    /// The newline terminal whose text ends with the indentation.
    pub newline: String,
    /// The `%declare`d terminals the parser reads for deeper and shallower
    /// indentation.
    pub indent: String,
    pub dedent: String,
    /// Opening and closing brackets, as (terminal name, text): a bracket is
    /// the terminal of that name or the anonymous literal.
    pub open: Vec<(String, String)>,
    pub close: Vec<(String, String)>,
}
