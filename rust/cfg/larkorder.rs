//! Lark's order among the terminals that match at one point of the text.
//!
//! Lark's lexer tries the terminals it expects one after another and keeps
//! the first that matches, whatever its length. It sorts them by priority,
//! then by maximum width (the longest text the pattern can match, as
//! Python's `sre_parse` computes it: every unbounded pattern alike), then by
//! the length of its pattern's text, then by name. maskpar follows the
//! first three keys (a terminal's `Rank`; the text as `LarkPattern` rebuilds
//! it) and takes the longest match among terminals of equal rank.
//!
//! Lark also sorts the `|` alternatives inside a terminal by maximum width,
//! minimum width and text length, so that Python's `re` tries the longer
//! first (`lark_terminal`).
//!
//! A string that a pattern of its priority matches whole (`"if"` and
//! `NAME`) is not tried on its own while that pattern is expected (if the
//! pattern's flags hold the string's): the pattern matches, and Lark
//! retypes its match when it spells the string. So while such a pattern is
//! still alive, the string ranks as that pattern (see `Cfg::rank`).

use super::ast::Node;
use super::lookaround;

/// A terminal's place in Lark's order: priority, then maximum width in
/// characters (`UNBOUNDED` for patterns without a bound), then the length
/// of its pattern's text (see `LarkPattern`). Greater first.
pub type Rank = (i32, u64, usize);

/// The width of an unbounded pattern (Python caps widths alike).
pub const UNBOUNDED: u64 = u64::MAX;

/// `w` repeated at most `max` times (None: unbounded).
fn times(w: u64, max: Option<u32>) -> u64 {
    match max {
        _ if w == 0 => 0,
        Some(m) => w.saturating_mul(m as u64),
        None => UNBOUNDED,
    }
}

/// The shortest and longest text `re` can match, in characters.
fn regex_widths(re: &str) -> (u64, u64) {
    let plain = lookaround::without_lookarounds(re);
    match regex_syntax::ParserBuilder::new()
        .utf8(false)
        .build()
        .parse(&plain)
    {
        Ok(hir) => hir_widths(&hir),
        // Checked when the terminal was read; ranked as unbounded if not.
        Err(_) => (0, UNBOUNDED),
    }
}

fn hir_widths(h: &regex_syntax::hir::Hir) -> (u64, u64) {
    use regex_syntax::hir::HirKind;
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => (0, 0),
        HirKind::Literal(lit) => {
            let n = match std::str::from_utf8(&lit.0) {
                Ok(s) => s.chars().count() as u64,
                Err(_) => lit.0.len() as u64,
            };
            (n, n)
        }
        HirKind::Class(_) => (1, 1),
        HirKind::Repetition(r) => {
            let (lo, hi) = hir_widths(&r.sub);
            (lo.saturating_mul(r.min as u64), times(hi, r.max))
        }
        HirKind::Capture(c) => hir_widths(&c.sub),
        HirKind::Concat(v) => v.iter().fold((0, 0), |(a, b), x| {
            let (lo, hi) = hir_widths(x);
            (a.saturating_add(lo), b.saturating_add(hi))
        }),
        HirKind::Alternation(v) => {
            let ws: Vec<(u64, u64)> = v.iter().map(hir_widths).collect();
            (
                ws.iter().map(|w| w.0).min().unwrap_or(0),
                ws.iter().map(|w| w.1).max().unwrap_or(0),
            )
        }
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

/// A terminal body as Lark writes it out (its `TerminalTreeToPattern`):
/// the pattern's text, whether it is a string, its flags and its widths.
/// The text is what Lark orders alternatives and terminals by after their
/// widths. Ours is rebuilt from the AST, so where the source spelled a
/// character with an escape (`"\\x00".."\\x1f"`) or wrote `x~3` (`{3}`, not
/// `{3,3}`), its length may differ from Lark's; only ties on both widths
/// read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LarkPattern {
    pub value: String,
    pub string: bool,
    pub flags: String,
    pub min: u64,
    pub max: u64,
}

impl LarkPattern {
    fn regexp(&self) -> String {
        let mut v = if self.string {
            re_escape(&self.value)
        } else {
            self.value.clone()
        };
        for f in self.flags.chars() {
            v = format!("(?{f}:{v})");
        }
        v
    }

    fn joined(value: String, min: u64, max: u64) -> Self {
        LarkPattern {
            value,
            string: false,
            flags: String::new(),
            min,
            max,
        }
    }

    /// Lark's order of alternatives: greater maximum, then minimum width,
    /// then longer text first.
    fn order_key(
        &self,
    ) -> (
        std::cmp::Reverse<u64>,
        std::cmp::Reverse<u64>,
        std::cmp::Reverse<usize>,
    ) {
        use std::cmp::Reverse;
        (
            Reverse(self.max),
            Reverse(self.min),
            Reverse(self.value.chars().count()),
        )
    }
}

/// Python's `re.escape`.
fn re_escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if "()[]{}?*+-|^$\\.&~# \t\n\r\x0B\x0C".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A Lark regex terminal's body and flags, from the text `lark` made of
/// `/body/flags`: `(?:body)`, or `(?flags:(?:body))` with flags.
fn regex_parts(r: &str) -> (String, String) {
    let unwrap = |g: &str| -> Option<String> {
        let inner = g.strip_prefix("(?:")?.strip_suffix(')')?;
        lookaround::is_one_group(g).then(|| inner.to_string())
    };
    if let Some(rest) = r.strip_prefix("(?") {
        let flags: String = rest.chars().take_while(|c| "imsux".contains(*c)).collect();
        if let Some(group) = rest[flags.len()..]
            .strip_prefix(':')
            .and_then(|b| b.strip_suffix(')'))
        {
            if !flags.is_empty() && lookaround::is_one_group(r) {
                if let Some(body) = unwrap(group) {
                    return (body, flags);
                }
            }
        }
    }
    (unwrap(r).unwrap_or_else(|| r.to_string()), String::new())
}

/// `n` (a terminal's body, references inlined) as Lark's pattern of it.
pub fn lark_pattern(n: &Node) -> LarkPattern {
    lark_terminal(n).1
}

/// `n` with every alternation's alternatives in Lark's order (see
/// `LarkPattern::order_key`), and Lark's pattern of it. Lark sorts a
/// terminal's `|` alternatives so that Python's `re` tries the longer first
/// (`"<" | "<="` reads `<=`); a stable sort, as Python's: ties keep the
/// written order.
pub fn lark_terminal(n: &Node) -> (Node, LarkPattern) {
    match n {
        Node::Literal(s) => {
            let w = s.chars().count() as u64;
            let p = LarkPattern {
                value: s.clone(),
                string: true,
                flags: String::new(),
                min: w,
                max: w,
            };
            (n.clone(), p)
        }
        Node::Regex(r) => {
            let p = match string_text(n) {
                Some(text) => {
                    let w = text.chars().count() as u64;
                    LarkPattern {
                        value: text,
                        string: true,
                        flags: "i".into(),
                        min: w,
                        max: w,
                    }
                }
                None => {
                    let (value, flags) = regex_parts(r);
                    let (min, max) = regex_widths(r);
                    LarkPattern {
                        value,
                        string: false,
                        flags,
                        min,
                        max,
                    }
                }
            };
            (n.clone(), p)
        }
        Node::Class { ranges, negated } => {
            let mut value = String::from("[");
            if *negated {
                value.push('^');
            }
            for &(lo, hi) in ranges {
                value.push(lo);
                if hi != lo {
                    value.push('-');
                    value.push(hi);
                }
            }
            value.push(']');
            (n.clone(), LarkPattern::joined(value, 1, 1))
        }
        Node::AnyChar => (n.clone(), LarkPattern::joined(".".into(), 1, 1)),
        Node::Empty => {
            let p = LarkPattern {
                value: String::new(),
                string: true,
                flags: String::new(),
                min: 0,
                max: 0,
            };
            (n.clone(), p)
        }
        Node::Seq(v) if v.len() == 1 => {
            let (x, p) = lark_terminal(&v[0]);
            (Node::Seq(vec![x]), p)
        }
        Node::Seq(v) => {
            let (nodes, parts): (Vec<Node>, Vec<LarkPattern>) = v.iter().map(lark_terminal).unzip();
            let value = parts.iter().map(LarkPattern::regexp).collect();
            let min = parts.iter().fold(0u64, |w, p| w.saturating_add(p.min));
            let max = parts.iter().fold(0u64, |w, p| w.saturating_add(p.max));
            (Node::Seq(nodes), LarkPattern::joined(value, min, max))
        }
        Node::Alt(v) => {
            let mut alts: Vec<(Node, LarkPattern)> = v.iter().map(lark_terminal).collect();
            alts.sort_by_key(|(_, p)| p.order_key());
            let (nodes, parts): (Vec<Node>, Vec<LarkPattern>) = alts.into_iter().unzip();
            let p = match parts.as_slice() {
                [one] => one.clone(),
                _ => {
                    let texts: Vec<String> = parts.iter().map(LarkPattern::regexp).collect();
                    let min = parts.iter().map(|p| p.min).min().unwrap_or(0);
                    let max = parts.iter().map(|p| p.max).max().unwrap_or(0);
                    LarkPattern::joined(format!("(?:{})", texts.join("|")), min, max)
                }
            };
            (Node::Alt(nodes), p)
        }
        Node::Repeat { node, min, max } => {
            let (x, inner) = lark_terminal(node);
            let op = match (*min, *max) {
                (0, None) => "*".to_string(),
                (1, None) => "+".to_string(),
                (0, Some(1)) => "?".to_string(),
                (n, Some(m)) if n == m => format!("{{{n}}}"),
                (n, Some(m)) => format!("{{{n},{m}}}"),
                (n, None) => format!("{{{n},}}"),
            };
            let p = LarkPattern {
                value: format!("(?:{}){op}", inner.regexp()),
                string: false,
                flags: inner.flags.clone(),
                min: inner.min.saturating_mul(*min as u64),
                max: times(inner.max, *max),
            };
            let node = Node::Repeat {
                node: Box::new(x),
                min: *min,
                max: *max,
            };
            (node, p)
        }
        // Not Lark terminal bodies.
        _ => (n.clone(), LarkPattern::joined(String::new(), 0, UNBOUNDED)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn re(r: &str) -> Node {
        Node::Regex(r.into())
    }

    fn max_width(n: &Node) -> u64 {
        lark_pattern(n).max
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

    /// The pattern text and widths Lark 1.3.1 prints for these terminals
    /// (`Lark(src).terminals`), alternatives sorted as Lark sorts them.
    #[test]
    fn patterns_are_written_out_as_lark_writes_them() {
        let src = r#"
start: A B C D E F
A: "ab" | /c+/i | ("x" "y")~2..3
B: "a".."z" "-"?
C: ("if"i | "a b")+
D: /[0-9]+/ "." /[0-9]*/
E: "<" | "<=" | "="
F: ["x"] "y"+
"#;
        let ast = super::super::lark::parse(src).unwrap();
        let want = [
            ("A", r"(?:(?i:c+)|(?:xy){2,3}|ab)", 1, UNBOUNDED),
            ("B", r"[a-z](?:\-)?", 1, 2),
            ("C", r"(?:(?:a\ b|(?i:if)))+", 2, UNBOUNDED),
            ("D", r"[0-9]+\.[0-9]*", 2, UNBOUNDED),
            ("E", r"(?:<=|<|=)", 1, 2),
            ("F", r"(?:x)?(?:y)+", 1, UNBOUNDED),
        ];
        for (name, value, min, max) in want {
            let t = ast.terminals.iter().find(|t| t.name == name).unwrap();
            let p = lark_pattern(&t.body);
            assert_eq!(
                (p.value.as_str(), p.min, p.max),
                (value, min, max),
                "{name}"
            );
        }
    }

    #[test]
    fn strings_read_back_as_written() {
        assert_eq!(string_text(&Node::Literal("if".into())), Some("if".into()));
        assert_eq!(string_text(&re("(?i:Se\\x{2D}x)")), Some("Se-x".into()));
        assert_eq!(string_text(&re("[a-z]+")), None);
    }
}
