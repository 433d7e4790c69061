//! Lark's order among the terminals that match at one point of the text.
//!
//! Lark's lexer tries the terminals it expects one after another and keeps
//! the first that matches, whatever its length. It sorts them by priority,
//! then by maximum width (the longest text the pattern can match, as
//! Python's `sre_parse` computes it: every unbounded pattern alike), then by
//! the length of its pattern's text and by name. maskpar follows the first
//! two keys (a terminal's `Rank`) and takes the longest match among
//! terminals of equal rank, where Lark's last two keys depend on how it
//! writes a terminal out as a regex.
//!
//! A string that a pattern of its priority matches whole (`"if"` and
//! `NAME`) is not tried on its own while that pattern is expected: the
//! pattern matches, and Lark retypes its match when it spells the string.
//! So while such a pattern is still alive, the string ranks with it.

use super::ast::Node;
use super::lookaround;

/// A terminal's place in Lark's order: priority, then maximum width in
/// characters (`UNBOUNDED` for patterns without a bound). Greater first.
pub type Rank = (i32, u64);

/// The width of an unbounded pattern (Python caps widths alike).
pub const UNBOUNDED: u64 = u64::MAX;

/// The longest text, in characters, that regular node `n` can match (as
/// Python's `sre_parse` counts it: lookarounds are 0 wide).
pub fn max_width(n: &Node) -> u64 {
    match n {
        Node::Empty => 0,
        Node::Literal(s) => s.chars().count() as u64,
        Node::Class { .. } | Node::AnyChar => 1,
        Node::Regex(r) => regex_width(r),
        Node::Seq(v) => v.iter().fold(0, |w, x| w.saturating_add(max_width(x))),
        Node::Alt(v) => v.iter().map(max_width).max().unwrap_or(0),
        Node::Repeat { node, max, .. } => times(max_width(node), *max),
        // Not Lark terminals: ranked as unbounded.
        _ => UNBOUNDED,
    }
}

/// `w` repeated at most `max` times (None: unbounded).
fn times(w: u64, max: Option<u32>) -> u64 {
    match max {
        _ if w == 0 => 0,
        Some(m) => w.saturating_mul(m as u64),
        None => UNBOUNDED,
    }
}

fn regex_width(re: &str) -> u64 {
    let plain = lookaround::without_lookarounds(re);
    match regex_syntax::ParserBuilder::new()
        .utf8(false)
        .build()
        .parse(&plain)
    {
        Ok(hir) => hir_width(&hir),
        // Checked when the terminal was read; ranked as unbounded if not.
        Err(_) => UNBOUNDED,
    }
}

fn hir_width(h: &regex_syntax::hir::Hir) -> u64 {
    use regex_syntax::hir::HirKind;
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => 0,
        HirKind::Literal(lit) => match std::str::from_utf8(&lit.0) {
            Ok(s) => s.chars().count() as u64,
            Err(_) => lit.0.len() as u64,
        },
        HirKind::Class(_) => 1,
        HirKind::Repetition(r) => times(hir_width(&r.sub), r.max),
        HirKind::Capture(c) => hir_width(&c.sub),
        HirKind::Concat(v) => v.iter().fold(0, |w, x| w.saturating_add(hir_width(x))),
        HirKind::Alternation(v) => v.iter().map(hir_width).max().unwrap_or(0),
    }
}

/// The text of a Lark string terminal as written (`"if"`, `"if"i`), which
/// is what Lark checks patterns against.
pub fn string_text(n: &Node) -> Option<String> {
    match n {
        Node::Literal(s) => Some(s.clone()),
        Node::Regex(r) => {
            let mut rest = r.strip_prefix("(?i:")?.strip_suffix(')')?;
            let mut out = String::new();
            while !rest.is_empty() {
                if let Some(after) = rest.strip_prefix("\\x{") {
                    let end = after.find('}')?;
                    out.push(char::from_u32(
                        u32::from_str_radix(&after[..end], 16).ok()?,
                    )?);
                    rest = &after[end + 1..];
                } else {
                    let c = rest.chars().next()?;
                    if !c.is_ascii_alphanumeric() {
                        return None;
                    }
                    out.push(c);
                    rest = &rest[1..];
                }
            }
            Some(out)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn re(r: &str) -> Node {
        Node::Regex(r.into())
    }

    #[test]
    fn widths_count_characters_as_python_does() {
        assert_eq!(max_width(&Node::Literal("héllo".into())), 5);
        assert_eq!(max_width(&re("[a-z]{2,5}")), 5);
        assert_eq!(max_width(&re("ab|c(?:de)?")), 3);
        assert_eq!(max_width(&re("a+")), UNBOUNDED);
        assert_eq!(max_width(&re("(?:)*x")), 1);
        assert_eq!(max_width(&re(r"\d(?![0-9])")), 1);
        assert_eq!(max_width(&re("é.")), 2);
        let seq = Node::Seq(vec![
            Node::Literal("0x".into()),
            Node::Repeat {
                node: Box::new(re("[0-9a-f]")),
                min: 1,
                max: Some(4),
            },
        ]);
        assert_eq!(max_width(&seq), 6);
    }

    #[test]
    fn strings_read_back_as_written() {
        assert_eq!(string_text(&Node::Literal("if".into())), Some("if".into()));
        assert_eq!(string_text(&re("(?i:Se\\x{2D}x)")), Some("Se-x".into()));
        assert_eq!(string_text(&re("[a-z]+")), None);
    }
}
