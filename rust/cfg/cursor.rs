//! A cursor over grammar source text with line/column positions, shared by
//! the GBNF and Lark parsers (each derefs to it).
//!
//! Parsers ask for the position of every rule and symbol, so `here` must not
//! count lines from the start of the text each time (a 50,000-rule grammar
//! would take quadratic time): the last position counted is kept, and the
//! next one counts on from it when the cursor has moved forward.

use std::cell::Cell;

use super::ast::Pos;
use crate::error::{Error, Result};

pub struct Cursor<'a> {
    pub src: &'a str,
    pub pos: usize,
    /// Names the syntax in error messages ("GBNF", "Lark").
    syntax: &'static str,
    /// The last position `here` counted: (byte offset, line, column).
    counted: Cell<(usize, u32, u32)>,
    /// Groups open around the cursor (see `MAX_NESTING`).
    depth: u32,
    /// How deep the item being parsed reaches: its groups, and the postfix
    /// operators wrapped around them (see `item_start`).
    peak: u32,
}

/// Bound on groups nested in one another in grammar text (`(`, `[` and
/// the like), postfix operators counted as a level each on top of what they
/// wrap (`((a)*)*` is four). The parsers, lowering and every later walk of
/// a rule body recurse once per level of its tree, so this bounds their
/// stack use; real grammars nest a handful of levels.
pub const MAX_NESTING: u32 = 200;

impl<'a> Cursor<'a> {
    pub fn new(src: &'a str, syntax: &'static str) -> Self {
        Cursor {
            src,
            pos: 0,
            syntax,
            counted: Cell::new((0, 1, 1)),
            depth: 0,
            peak: 0,
        }
    }

    /// Opens a nested group, refusing past `MAX_NESTING` levels (a parse
    /// that fails is abandoned, so only successful groups `leave`).
    pub fn enter(&mut self) -> Result<()> {
        if self.depth >= MAX_NESTING {
            return self.err(format!("groups nest deeper than {MAX_NESTING} levels"));
        }
        self.depth += 1;
        self.peak = self.peak.max(self.depth);
        Ok(())
    }

    /// Closes the group `enter` opened.
    pub fn leave(&mut self) {
        self.depth -= 1;
    }

    /// Starts an item (an atom and its postfix operators): returns what
    /// `item_end` restores. An item's depth is the deepest of its groups,
    /// plus one per operator around it.
    pub fn item_start(&mut self) -> u32 {
        std::mem::replace(&mut self.peak, self.depth)
    }

    /// A postfix operator around the current item: one level more on top
    /// of the item's deepest group, refused past `MAX_NESTING`.
    pub fn wrap(&mut self) -> Result<()> {
        if self.peak >= MAX_NESTING {
            return self.err(format!("groups nest deeper than {MAX_NESTING} levels"));
        }
        self.peak += 1;
        Ok(())
    }

    /// Ends the item `item_start` began (`saved` is what it returned): the
    /// enclosing group reaches as deep as this item did.
    pub fn item_end(&mut self, saved: u32) {
        self.peak = self.peak.max(saved);
    }

    pub fn here(&self) -> Pos {
        let (mut at, mut line, mut col) = self.counted.get();
        if at > self.pos {
            (at, line, col) = (0, 1, 1);
        }
        for c in self.src[at..self.pos].chars() {
            if c == '\n' {
                line = line.saturating_add(1);
                col = 1;
            } else {
                col = col.saturating_add(1);
            }
        }
        self.counted.set((self.pos, line, col));
        Pos { line, col }
    }

    pub fn err<T>(&self, msg: impl std::fmt::Display) -> Result<T> {
        Err(Error::Compile(format!(
            "{} syntax error at {}: {msg}",
            self.syntax,
            self.here()
        )))
    }

    pub fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    pub fn rest(&self) -> &'a str {
        &self.src[self.pos..]
    }

    pub fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    pub fn eat(&mut self, s: &str) -> bool {
        if self.rest().starts_with(s) {
            self.pos += s.len();
            true
        } else {
            false
        }
    }

    /// Consumes a `*`, `+` or `?` quantifier and returns its (min, max).
    pub fn eat_quantifier(&mut self) -> Option<(u32, Option<u32>)> {
        let q = match self.peek()? {
            '*' => (0, None),
            '+' => (1, None),
            '?' => (0, Some(1)),
            _ => return None,
        };
        self.bump();
        Some(q)
    }

    /// The character of an escape's `n` hex digits (after `\x`, `\u`, `\U`).
    pub fn hex_escape(&mut self, n: usize) -> Result<char> {
        let digits: String = self.rest().chars().take(n).collect();
        if digits.len() != n || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
            return self.err(format!("expected {n} hex digits after escape"));
        }
        self.pos += n;
        let v = u32::from_str_radix(&digits, 16).expect("checked hex digits");
        char::from_u32(v).map_or_else(|| self.err(format!("invalid code point {v:#x}")), Ok)
    }
}
