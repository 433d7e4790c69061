//! GBNF (llama.cpp's grammar format, also accepted by xgrammar/SGLang as
//! `ebnf`): `name ::= alternatives`, `|`, groups, `? * +`, `{m}`, `{m,}`,
//! `{m,n}`, `{,n}`, string literals, character classes (with negation,
//! ranges and escapes), `.`, `#` comments; the start rule is `root`.
//! Also llama.cpp's tokens (`<[id]>`, `<text>`, `!` before either; see
//! `specials`) and xgrammar's rule names with `.` (`a.b`) and end-of-rule
//! lookahead `(= ...)`, a hint that does not change the language (see
//! `Parser::end_of_rule_lookahead`).

use super::ast::{GrammarAst, Lexing, Node, RuleDef};
use super::cursor::Cursor;
use crate::error::{Error, Result};

/// Bound on `{m,n}` counts, so a tiny grammar cannot expand into a huge one.
pub const MAX_REPEAT: u32 = 10_000;

struct Parser<'a> {
    c: Cursor<'a>,
    /// The current rule ended with xgrammar's lookahead `(= ...)`.
    lookahead: bool,
}

impl<'a> std::ops::Deref for Parser<'a> {
    type Target = Cursor<'a>;
    fn deref(&self) -> &Cursor<'a> {
        &self.c
    }
}

impl std::ops::DerefMut for Parser<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.c
    }
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

/// The length of the rule name at the start of `s`: name characters, and
/// '.' between two of them (xgrammar's `a.b`; a '.' elsewhere is any
/// character).
fn name_len(s: &str) -> usize {
    let b = s.as_bytes();
    let mut len = 0;
    while len < b.len() {
        let c = b[len] as char;
        let dot = c == '.' && len > 0 && b.get(len + 1).is_some_and(|&x| is_name_char(x as char));
        if !is_name_char(c) && !dot {
            break;
        }
        len += 1;
    }
    len
}

impl<'a> Parser<'a> {
    /// Skips blanks and comments; newlines too when `newlines` (inside groups,
    /// after `::=` and `|`), since outside them a newline ends a rule.
    fn space(&mut self, newlines: bool) {
        while let Some(c) = self.peek() {
            match c {
                ' ' | '\t' | '\r' => {
                    self.bump();
                }
                '\n' if newlines => {
                    self.bump();
                }
                '#' => {
                    while let Some(c) = self.peek() {
                        if c == '\n' {
                            break;
                        }
                        self.bump();
                    }
                }
                _ => break,
            }
        }
    }

    fn name(&mut self) -> Option<String> {
        let n = name_len(self.rest());
        let n = self.rest()[..n].to_string();
        if n.is_empty() {
            return None;
        }
        self.pos += n.len();
        Some(n)
    }

    /// True if a rule definition (`name ::=`) starts here.
    fn at_rule_start(&self) -> bool {
        let r = self.rest();
        let n = name_len(r);
        n > 0 && r[n..].trim_start_matches([' ', '\t']).starts_with("::=")
    }

    fn grammar(&mut self) -> Result<Vec<RuleDef>> {
        let mut rules = Vec::new();
        loop {
            self.space(true);
            if self.peek().is_none() {
                return Ok(rules);
            }
            let pos = self.here();
            let Some(name) = self.name() else {
                return self.err("expected a rule name");
            };
            self.space(false);
            if !self.rest().starts_with("::=") {
                return self.err(format!("expected '::=' after rule name '{name}'"));
            }
            self.pos += 3;
            self.space(true);
            self.lookahead = false;
            let body = self.alternatives(false)?;
            match self.peek() {
                None | Some('\n') => {}
                Some(c) => return self.err(format!("unexpected '{c}' (expected end of rule)")),
            }
            rules.push(RuleDef { name, body, pos });
        }
    }

    fn alternatives(&mut self, nested: bool) -> Result<Node> {
        let mut alts = vec![self.sequence(nested)?];
        while !self.lookahead {
            // A line that starts with '|' continues the rule above it.
            let save = self.pos;
            self.space(true);
            if self.peek() != Some('|') {
                self.pos = save;
                break;
            }
            self.bump();
            self.space(true);
            alts.push(self.sequence(nested)?);
        }
        Ok(Node::alt(alts))
    }

    fn sequence(&mut self, nested: bool) -> Result<Node> {
        let mut items = Vec::new();
        loop {
            if !nested && self.at_rule_start() && !items.is_empty() {
                break;
            }
            let saved = self.item_start();
            let item = match self.peek() {
                Some('"') => Node::Literal(self.literal()?),
                Some('[') => self.class()?,
                Some('.') => {
                    self.bump();
                    Node::AnyChar
                }
                Some('(') => {
                    self.bump();
                    self.enter()?;
                    self.space(true);
                    if self.peek() == Some('=') {
                        self.end_of_rule_lookahead(nested)?;
                        self.item_end(saved);
                        break;
                    }
                    let inner = self.alternatives(true)?;
                    if self.bump() != Some(')') {
                        return self.err("expected ')'");
                    }
                    self.leave();
                    inner
                }
                Some('<') => super::specials::parse_token_ref(&mut self.c, false, false)?,
                Some('!') => {
                    self.bump();
                    if self.peek() != Some('<') {
                        return self.err("expected a token after '!' (like !<[id]> or !<name>)");
                    }
                    super::specials::parse_token_ref(&mut self.c, true, false)?
                }
                Some(c) if is_name_char(c) => {
                    let pos = self.here();
                    Node::Ref(self.name().unwrap(), pos)
                }
                _ => {
                    self.item_end(saved);
                    break;
                }
            };
            self.space(nested);
            let item = self.postfix(item, nested)?;
            self.item_end(saved);
            items.push(item);
        }
        Ok(Node::seq(items))
    }

    /// xgrammar's end-of-rule lookahead `(= ...)` (the cursor is after
    /// `(`, at `=`): read, checked to end its rule, and dropped. In xgrammar
    /// it is a hint, not a constraint: its parser accepts text that breaks
    /// it, and only its mask cache reads it, for tokens that cross the
    /// rule's end. So the grammar's language is the one without it; where
    /// the hint holds (its intended use) masks are the same.
    fn end_of_rule_lookahead(&mut self, nested: bool) -> Result<()> {
        if nested {
            return self.err("a lookahead (= ...) may only end a rule");
        }
        self.bump(); // =
        self.space(true);
        self.alternatives(true)?;
        if self.bump() != Some(')') {
            return self.err("expected ')' to close the lookahead");
        }
        self.leave();
        self.space(false);
        if !matches!(self.peek(), None | Some('\n')) {
            return self.err("a lookahead (= ...) must end its rule");
        }
        self.lookahead = true;
        Ok(())
    }

    fn postfix(&mut self, mut item: Node, nested: bool) -> Result<Node> {
        loop {
            let (min, max) = if let Some(q) = self.eat_quantifier() {
                q
            } else if self.eat("{") {
                self.space(false);
                self.counts()? // consumes the closing '}'
            } else {
                return Ok(item);
            };
            // Each operator wraps the item once more: a level of nesting.
            self.wrap()?;
            self.space(nested);
            item = Node::repeat(item, min, max);
        }
    }

    fn number(&mut self) -> Result<Option<u32>> {
        let digits: String = self
            .rest()
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        if digits.is_empty() {
            return Ok(None);
        }
        self.pos += digits.len();
        match digits.parse::<u32>() {
            Ok(n) if n <= MAX_REPEAT => Ok(Some(n)),
            _ => Err(Error::LimitExceeded(format!(
                "GBNF repetition count {digits} at {} exceeds the limit {MAX_REPEAT}",
                self.here()
            ))),
        }
    }

    /// After `{`: `m}`, `m,}`, `m,n}` or `,n}`.
    fn counts(&mut self) -> Result<(u32, Option<u32>)> {
        let min = self.number()?;
        self.space(false);
        let max = if self.peek() == Some(',') {
            self.bump();
            self.space(false);
            self.number()?
        } else {
            match min {
                Some(m) => Some(m),
                None => return self.err("expected a number in '{...}'"),
            }
        };
        self.space(false);
        if self.bump() != Some('}') {
            return self.err("expected '}'");
        }
        let min = min.unwrap_or(0);
        if let Some(max) = max {
            if max < min {
                return self.err(format!("repetition {{{min},{max}}} has max < min"));
            }
        }
        Ok((min, max))
    }

    /// One (possibly escaped) character inside a literal or a class.
    fn char_in(&mut self, what: &str) -> Result<char> {
        match self.bump() {
            None => self.err(format!("unterminated {what}")),
            Some('\\') => self.escape(),
            Some(c) => Ok(c),
        }
    }

    fn escape(&mut self) -> Result<char> {
        match self.bump() {
            Some('n') => Ok('\n'),
            Some('r') => Ok('\r'),
            Some('t') => Ok('\t'),
            Some('0') => Ok('\0'),
            Some('x') => self.hex_escape(2),
            Some('u') => self.hex_escape(4),
            Some('U') => self.hex_escape(8),
            Some(
                c @ ('\\' | '"' | '[' | ']' | '-' | '^' | '\'' | '/' | '.' | '*' | '+' | '?' | '('
                | ')' | '{' | '}' | '|'),
            ) => Ok(c),
            Some(c) => self.err(format!("unknown escape '\\{c}'")),
            None => self.err("unterminated escape"),
        }
    }

    fn literal(&mut self) -> Result<String> {
        self.bump(); // "
        let mut s = String::new();
        loop {
            match self.peek() {
                None | Some('\n') => return self.err("unterminated string literal"),
                Some('"') => {
                    self.bump();
                    return Ok(s);
                }
                _ => s.push(self.char_in("string literal")?),
            }
        }
    }

    fn class(&mut self) -> Result<Node> {
        self.bump(); // [
        let negated = self.peek() == Some('^');
        if negated {
            self.bump();
        }
        let mut ranges = Vec::new();
        loop {
            match self.peek() {
                None | Some('\n') => return self.err("unterminated character class"),
                Some(']') => {
                    self.bump();
                    break;
                }
                _ => {}
            }
            let lo = self.char_in("character class")?;
            let hi = if self.peek() == Some('-') && !self.rest().starts_with("-]") {
                self.bump();
                self.char_in("character class")?
            } else {
                lo
            };
            if hi < lo {
                return self.err(format!("character range {lo:?}-{hi:?} is reversed"));
            }
            ranges.push((lo, hi));
        }
        Ok(Node::Class { ranges, negated })
    }
}

/// Parses GBNF text; the start rule is `root`.
pub fn parse(src: &str) -> Result<GrammarAst> {
    let mut p = Parser {
        lookahead: false,
        c: Cursor::new(src, "GBNF"),
    };
    let rules = p.grammar()?;
    if rules.is_empty() {
        return Err(Error::Compile("GBNF grammar has no rules".into()));
    }
    let ast = GrammarAst {
        rules,
        terminals: Vec::new(),
        ignore: Vec::new(),
        start: "root".into(),
        lexing: Lexing::AllSplits,
        indenter: None,
        blocks: Vec::new(),
        initial_skip: true,
    };
    ast.check_depth()?;
    Ok(ast)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postfix_operators_count_as_levels_on_top_of_their_groups() {
        // 100 groups and an operator after each: 200 levels, the bound.
        let deep = format!("root ::= {}\"a\"{}", "(".repeat(100), ")*".repeat(100));
        assert!(parse(&deep).is_ok());
        let err = parse(&format!("{deep}*")).unwrap_err().to_string();
        assert!(err.contains("groups nest deeper than 200 levels"), "{err}");
        // Side by side, items do not add up: each counts 200 levels.
        let item = deep.replace("root ::= ", "");
        assert!(parse(&format!("root ::= {item} {item}")).is_ok());
        // The count is an upper bound of the tree's depth (groups make no
        // node of their own): 100 repetitions around a literal.
        let tree = parse(&deep).unwrap().rules[0].body.clone();
        assert!(tree.deeper_than(100) && !tree.deeper_than(101));
    }

    #[test]
    fn parses_rules_groups_and_postfix() {
        let g =
            parse("root ::= a (\"x\" | [^a-c\\n])* b{2,3}\na ::= \"\\u00e9\" .\nb ::= [0-9]{,4}")
                .unwrap();
        assert_eq!(g.rules.len(), 3);
        assert_eq!(
            g.rules[1].body,
            Node::Seq(vec![Node::Literal("é".into()), Node::AnyChar])
        );
        match &g.rules[0].body {
            Node::Seq(items) => assert_eq!(items.len(), 3),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn newline_ends_a_rule_outside_groups() {
        let g = parse("root ::= \"a\"\n  | \"b\"\nx ::=\n  \"c\" (\n  \"d\"\n )").unwrap();
        assert_eq!(g.rules.len(), 2);
        assert_eq!(
            g.rules[0].body,
            Node::Alt(vec![Node::Literal("a".into()), Node::Literal("b".into())])
        );
    }

    #[test]
    fn errors_name_line_and_column() {
        let e = parse("root ::= \"a\"\nfoo ::= (\"b\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2"), "{e}");
        assert!(e.contains("expected ')'"), "{e}");
        let e = parse("root = \"a\"").unwrap_err().to_string();
        assert!(e.contains("line 1, column 6") && e.contains("'::='"), "{e}");
        assert!(parse("root ::= [a-").is_err());
        assert!(parse("root ::= \"a\"{5,2}").is_err());
        for bad in [
            "root ::= (\"a\" (= \"b\"))",
            "root ::= \"a\" (= \"b\") \"c\"",
        ] {
            let e = parse(bad).unwrap_err().to_string();
            assert!(e.contains("lookahead"), "{bad}: {e}");
        }
        // Nothing continues a rule after its lookahead.
        assert!(parse("root ::= \"a\" (= \"b\")\n | \"c\"").is_err());
        let src = "root ::= a \"b\"\na ::= \"x\" | \"y\" (= \"b\" [a-z]*)\nc ::= \"z\"";
        let g = parse(src).unwrap();
        assert_eq!(g.rules.len(), 3);
        assert_eq!(
            g.rules[1].body,
            Node::Alt(vec![Node::Literal("x".into()), Node::Literal("y".into())])
        );
        assert!(matches!(
            parse("root ::= \"a\"{99999999}"),
            Err(Error::LimitExceeded(_))
        ));
    }
}
