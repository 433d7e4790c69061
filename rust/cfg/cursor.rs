//! A cursor over grammar source text with line/column positions, shared by
//! the GBNF and Lark parsers (each derefs to it).

use super::ast::Pos;
use crate::error::{Error, Result};

pub struct Cursor<'a> {
    pub src: &'a str,
    pub pos: usize,
    /// Names the syntax in error messages ("GBNF", "Lark").
    syntax: &'static str,
}

impl<'a> Cursor<'a> {
    pub fn new(src: &'a str, syntax: &'static str) -> Self {
        Cursor {
            src,
            pos: 0,
            syntax,
        }
    }

    pub fn here(&self) -> Pos {
        let before = &self.src[..self.pos];
        let line = before.matches('\n').count() as u32 + 1;
        let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) as u32 + 1;
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
