//! Layout: the text the grammar allows between a JSON value's tokens, so
//! that it generates exactly what `json.dumps` writes with the chosen
//! `SchemaOptions`:
//!
//! - flexible (the default): any JSON whitespace (`[ \t\n\r]*`) around
//!   every bracket, `,` and `:`;
//! - compact: nothing at all, `{"a":1,"b":[2,3]}`;
//! - `separators=(item, key)`: exactly `item` between two items or members
//!   and `key` between a key and its value, nothing elsewhere;
//! - `indent=step`: json.dumps's indented form, each item on a line of its
//!   own indented by `step` once per enclosing container, the closing
//!   bracket on a line indented one level less, `": "` after keys (or the
//!   given separators, the item one before the line break) and `[]`/`{}`
//!   for empty containers.
//!
//! The invariant: `self.nest` counts the containers around the value being
//! compiled (`nested` raises it for their items). Only the indented layout
//! depends on it, so only there are rules (and the any-value rule) kept per
//! level; past `MAX_INDENT_DEPTH` levels it generates no value (`too_deep`).

use super::{lit, re, Compiler, Whitespace, MAX_INDENT_DEPTH};
use crate::cfg::ast::Node;
use crate::error::Result;

impl<'a> Compiler<'a> {
    /// Whitespace allowed between any two tokens (flexible layout only).
    pub(super) fn ws(&self) -> Node {
        match (
            &self.opts.separators,
            &self.opts.whitespace,
            &self.opts.indent,
        ) {
            (None, Whitespace::Flexible, None) => re("[ \\t\\n\\r]*"),
            _ => Node::Empty,
        }
    }

    /// The indented layout's line break before a line at nesting `level`.
    fn newline(&self, level: usize) -> Option<String> {
        (self.opts.indent.as_ref()).map(|step| format!("\n{}", step.repeat(level)))
    }

    /// Between two items (or members) at `self.nest`.
    pub(super) fn item_sep(&self) -> Node {
        let given = self.opts.separators.as_ref().map(|(item, _)| item.as_str());
        match (self.newline(self.nest), given) {
            (Some(line), item) => lit(&format!("{}{line}", item.unwrap_or(","))),
            (None, Some(item)) => lit(item),
            (None, None) => Node::seq(vec![self.ws(), lit(","), self.ws()]),
        }
    }

    pub(super) fn key_sep(&self) -> Node {
        match (&self.opts.separators, &self.opts.indent) {
            (Some((_, key)), _) => lit(key),
            (None, Some(_)) => lit(": "),
            (None, None) => Node::seq(vec![self.ws(), lit(":"), self.ws()]),
        }
    }

    /// The indented layout's line breaks around the items at `self.nest`:
    /// before the first and before the closing bracket.
    pub(super) fn item_lines(&self) -> Option<(String, String)> {
        let first = self.newline(self.nest)?;
        let last = self.newline(self.nest.saturating_sub(1))?;
        Some((first, last))
    }

    /// `open body close`: a container whose items (in `body`, at
    /// `self.nest`) are written as the layout writes them; with `optional`
    /// it may also be empty.
    pub(super) fn container(&self, open: &str, body: Node, optional: bool, close: &str) -> Node {
        let (lead, inner) = match self.item_lines() {
            Some((first, last)) => (Node::Empty, Node::seq(vec![lit(&first), body, lit(&last)])),
            None => (self.ws(), Node::seq(vec![body, self.ws()])),
        };
        let inner = if optional {
            Node::repeat(inner, 0, Some(1))
        } else {
            inner
        };
        Node::seq(vec![lit(open), lead, inner, lit(close)])
    }

    /// What `f` compiles one container deeper (its items).
    pub(super) fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        self.nest += 1;
        let made = f(self);
        self.nest -= 1;
        made
    }

    /// Past `MAX_INDENT_DEPTH` the indented layout has no rules: no value.
    pub(super) fn too_deep(&self) -> bool {
        self.opts.indent.is_some() && self.nest > MAX_INDENT_DEPTH
    }
}
