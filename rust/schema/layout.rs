//! Layout: the text the grammar allows between a JSON value's tokens, so
//! that it generates exactly what `json.dumps` writes with the chosen
//! `SchemaOptions`:
//!
//! - flexible (the default): any JSON whitespace (`[ \t\n\r]*`) around
//!   every bracket, `,` and `:`; `max_whitespace` bounds each such run,
//!   or `whitespace_pattern` is a regex each run must match whole (the
//!   pattern is checked to match JSON whitespace only, so it cannot change
//!   what the text means: see `check_whitespace`);
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

use super::{lit, re, Compiler, SchemaOptions, Whitespace, MAX_INDENT_DEPTH};
use crate::cfg::ast::Node;
use crate::error::{Error, Result};
use crate::regex_dfa::{ByteDfa, DEAD};
use rustc_hash::FxHashSet as HashSet;

/// JSON's whitespace: what the flexible layout allows between tokens.
const JSON_WHITESPACE: &str = "[ \\t\\n\\r]*";
/// Bound on `max_whitespace` (a counted repetition per run).
pub const MAX_WHITESPACE_LIMIT: u32 = 10_000;

/// Refuses whitespace options that are out of bounds, that the layout does
/// not use (they shape flexible whitespace only), or a pattern that
/// matches anything but JSON whitespace: any other text between tokens
/// would make the output something other than JSON, or change its value.
pub fn check_whitespace(opts: &SchemaOptions) -> Result<()> {
    let flexible = opts.whitespace == Whitespace::Flexible
        && opts.indent.is_none()
        && opts.separators.is_none();
    if !flexible && (opts.max_whitespace.is_some() || opts.whitespace_pattern.is_some()) {
        return Err(Error::Compile(
            "max_whitespace and whitespace_pattern shape flexible whitespace: they cannot be \
             combined with whitespace=\"compact\", indent or separators"
                .into(),
        ));
    }
    if let Some(n) = opts.max_whitespace.filter(|&n| n > MAX_WHITESPACE_LIMIT) {
        return Err(Error::LimitExceeded(format!(
            "max_whitespace {n} exceeds the limit {MAX_WHITESPACE_LIMIT}"
        )));
    }
    let Some(pattern) = &opts.whitespace_pattern else {
        return Ok(());
    };
    if opts.max_whitespace.is_some() {
        return Err(Error::Compile(
            "give max_whitespace or whitespace_pattern, not both (a pattern bounds its own \
             runs: [ \\t\\n\\r]{0,N})"
                .into(),
        ));
    }
    let given = ByteDfa::new(&format!("(?:{pattern})"))
        .map_err(|e| Error::Compile(format!("whitespace_pattern {pattern:?}: {e}")))?;
    // Does it accept a text with a byte outside `[ \t\n\r]`? A search over
    // (state, whether such a byte came).
    let mut seen: HashSet<(u32, bool)> = HashSet::default();
    let mut todo = vec![(given.start(), false)];
    seen.insert((given.start(), false));
    while let Some((q, other)) = todo.pop() {
        crate::budget::charge(256)?;
        if other && given.is_accepting(q) {
            return Err(Error::Compile(format!(
                "whitespace_pattern {pattern:?} matches text other than JSON whitespace \
                 (space, tab, newline, carriage return), which would change or break the JSON: \
                 write it with [ \\t\\n\\r] only"
            )));
        }
        for b in 0..=255u8 {
            let next = (given.step(q, b), other || !b" \t\n\r".contains(&b));
            if next.0 != DEAD && seen.insert(next) {
                todo.push(next);
            }
        }
    }
    Ok(())
}

impl<'a> Compiler<'a> {
    /// Whitespace allowed between any two tokens (flexible layout only).
    pub(super) fn ws(&self) -> Node {
        match (
            &self.opts.separators,
            &self.opts.whitespace,
            &self.opts.indent,
        ) {
            (None, Whitespace::Flexible, None) => self.flexible_ws(),
            _ => Node::Empty,
        }
    }

    /// A run of flexible whitespace, as the options shape it.
    fn flexible_ws(&self) -> Node {
        let bounded = self.opts.max_whitespace.map(|n| match n {
            0 => Node::Empty,
            n => re(&format!("[ \\t\\n\\r]{{0,{n}}}")),
        });
        let pattern = self.opts.whitespace_pattern.as_ref().map(|p| re(p));
        // `check_whitespace` refuses both together.
        bounded.or(pattern).unwrap_or_else(|| re(JSON_WHITESPACE))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(pattern: Option<&str>, max: Option<u32>) -> SchemaOptions {
        SchemaOptions {
            whitespace_pattern: pattern.map(String::from),
            max_whitespace: max,
            ..SchemaOptions::default()
        }
    }

    #[test]
    fn whitespace_patterns_must_match_json_whitespace_only() {
        for ok in [" ?", "[ \\t\\n\\r]*", "\\n? {0,4}", "", "(?:\\r\\n)+"] {
            assert!(check_whitespace(&opts(Some(ok), None)).is_ok(), "{ok}");
        }
        for bad in ["\\s*", " *x", ".", "[ \\x0b]", " *|,", "\\p{Zs}"] {
            let e = check_whitespace(&opts(Some(bad), None)).unwrap_err();
            assert!(
                e.to_string().contains("other than JSON whitespace"),
                "{bad}: {e}"
            );
        }
        assert!(check_whitespace(&opts(Some("("), None)).is_err());
        assert!(check_whitespace(&opts(Some(" ?"), Some(2))).is_err());
        assert!(check_whitespace(&opts(None, Some(MAX_WHITESPACE_LIMIT))).is_ok());
        assert!(check_whitespace(&opts(None, Some(MAX_WHITESPACE_LIMIT + 1))).is_err());
        let compact = SchemaOptions {
            whitespace: Whitespace::Compact,
            ..opts(None, Some(1))
        };
        assert!(check_whitespace(&compact).is_err());
    }
}
