//! The grammar that lowering produces, as the parser and the lexer read it.
//!
//! A `Cfg` is rules over symbols (`Sym`): nonterminals, lexemes, and
//! member-set nonterminals, whose rules are guarded (`Guard`) by the member
//! set of the item that predicts them (object members in any order, see
//! `members`). A `Lexeme` is a byte DFA with what each lexing mode needs to
//! know where a match ends: greedy ends and follow bytes under all-splits
//! lexing; Lark's rank, lookaheads and string retyping under longest-match
//! lexing. `lower` builds a `Cfg`; nothing here depends on how.

use std::sync::Arc;

use super::ast::{Lexing, TokenSet};
use super::indent::Indenter;
use super::larkorder;
use super::members::{self, MemberRules, MemberSet};
use super::setnames::SetNames;
use crate::regex_dfa::{ByteDfa, ByteSet};

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

/// A number no other `Cfg` of the process has (`Cfg::id`).
pub(super) fn fresh_cfg_id() -> u64 {
    NEXT_CFG_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

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
