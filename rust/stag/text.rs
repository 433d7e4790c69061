//! The free text of structural tags as regular languages, each one exact
//! lexeme.
//!
//! Free text is where a structural tag lets the model write anything:
//! `any_text`, the text between triggered tags, a tag's content up to its
//! end. What it may not write there is a finite set of strings (excluded
//! strings, triggers, the enclosing tag's end), so each such text is a
//! regular language over characters and becomes one byte DFA:
//!
//! - **text without `S`**: `.*` minus `.*(s1|s2|...).*`;
//! - **text up to the first `t`**: strings that end with a target `t` and in
//!   which no string of `S` (the targets among them) ends before the last
//!   character: `.*(t1|...)` minus `.*(s1|...).+`. This is how xgrammar reads a
//!   trigger or an end: at its *first* occurrence. With triggers `aa` and a tag
//!   `aab...`, the text `aaab` is refused, because the trigger `aa` is seen at
//!   the first two characters and the tag must go on with `b`.
//!
//! Both are built from regexes (escaped literals) as `Minus` nodes, which the
//! CFG lowering turns into one product automaton.

use crate::cfg::ast::Node;

/// Any text at all, newlines included.
const ANY: &str = "(?s:.*)";

/// `(?:s1|s2|...)` with each string escaped.
fn alternation(strings: &[String]) -> String {
    let escaped: Vec<String> = strings.iter().map(|s| regex_syntax::escape(s)).collect();
    format!("(?:{})", escaped.join("|"))
}

/// Any text that contains none of `excluded` (non-empty strings).
pub fn without(excluded: &[String]) -> Node {
    if excluded.is_empty() {
        return Node::Regex(ANY.into());
    }
    Node::Minus(
        Box::new(Node::Regex(ANY.into())),
        Box::new(Node::Regex(format!("(?s:.*{}.*)", alternation(excluded)))),
    )
}

/// Text that ends with one of `targets` where no string of `stops` (which
/// should include the targets) ends before the last character: free text up
/// to the first occurrence of a target.
pub fn up_to_first(targets: &[String], stops: &[String]) -> Node {
    Node::Minus(
        Box::new(Node::Regex(format!("(?s:.*{})", alternation(targets)))),
        Box::new(Node::Regex(format!("(?s:.*{}.+)", alternation(stops)))),
    )
}

/// `node` limited to at most `n` characters.
pub fn at_most_chars(node: Node, n: u32) -> Node {
    Node::Intersect(vec![node, Node::Regex(format!("(?s:.{{0,{n}}})"))])
}

/// The union of string lists without repeats or empty strings (which no
/// text can avoid), in first-seen order.
pub fn union(lists: &[&[String]]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in lists.iter().flat_map(|l| l.iter()) {
        if !s.is_empty() && !out.contains(s) {
            out.push(s.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stag::tests::node_accepts as matches;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn text_without_excluded_strings() {
        let n = without(&s(&["ab", "é"]));
        for (text, ok) in [
            ("", true),
            ("a\nb", true),
            ("xab", false),
            ("aé", false),
            ("ba", true),
        ] {
            assert_eq!(matches(&n, text), ok, "{text:?}");
        }
    }

    #[test]
    fn up_to_the_first_occurrence() {
        let n = up_to_first(&s(&["aa"]), &s(&["aa"]));
        for (text, ok) in [
            ("aa", true),
            ("xaa", true),
            ("aaa", false),
            ("aaxaa", false),
            ("a", false),
        ] {
            assert_eq!(matches(&n, text), ok, "{text:?}");
        }
        // A regex metacharacter in a target is a literal.
        let n = up_to_first(&s(&["</f.*>"]), &s(&["</f.*>", "z"]));
        assert!(matches(&n, "x</f.*>"));
        assert!(!matches(&n, "x</fa>"));
        assert!(!matches(&n, "zx</f.*>"));
    }

    #[test]
    fn character_limit() {
        let n = at_most_chars(without(&s(&["q"])), 2);
        assert!(matches(&n, "éé"));
        assert!(!matches(&n, "abc"));
        assert!(!matches(&n, "q"));
    }
}
