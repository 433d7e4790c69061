//! Lark grammars (as used by Lark and llguidance-style requests): `start`,
//! lowercase rules and UPPERCASE terminals, `"strings"i`, `/regex/flags`,
//! `"a".."z"`, groups, `[optional]`, `? * +`, `~ n` / `~ n..m`, priorities
//! (`NAME.2:`), `?rule`/`!rule` modifiers and `-> alias` (no effect on the
//! language), templates (`name{x}: ...`, `name{arg}`), `%import common.X`,
//! `%ignore`, `%override`, `%extend`. Lexing is over the terminals the
//! parser expects: the highest priority that matches, then the longest
//! match (see `Cfg::longest_step`).
//! `%declare _INDENT _DEDENT` gets Lark's Python indenter (`indent`); other
//! `%declare`d terminals (from post-lexers maskpar cannot know) are refused.
//! Lookarounds in regexes are rewritten where exact (`lookaround`).
//! llguidance's additions that only add forms Lark refuses: `x{m,n}`
//! counts, `-` in names, terminals that match the empty string (made
//! optional in lowering), `#` comments, special tokens and token ids (see
//! `specials`), and nested grammars: `%json {schema}` blocks (the schema's
//! rules, read character-level) and `%lark { grammar }` blocks (a Lark
//! grammar with names and `%ignore` of its own). Each block is a lexer
//! context of the grammar (`ast::Block`, `lowered::LexContext`). Parametric
//! rules (`::`, `%if`) are refused with an error naming them.

use super::ast::{GrammarAst, IndenterSpec, Lexing, Node, Pos, RuleDef, TermDef};
use super::cursor::Cursor;
use crate::error::{Error, Result};
use blocks::{only_a_json_block, Nested};
use defs::{expand_defs, merge, Defs, Template};

mod atoms;
mod blocks;
mod common;
mod defs;

/// Bound on `~ n..m` counts.
pub const MAX_REPEAT: u32 = 10_000;
/// Bound on nested template instantiations.
pub const MAX_TEMPLATE_DEPTH: usize = 64;

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn is_terminal_name(name: &str) -> bool {
    name.trim_start_matches('_')
        .starts_with(|c: char| c.is_ascii_uppercase())
}

struct Parser<'a> {
    c: Cursor<'a>,
    /// What the `%json` and `%lark` blocks read so far hold (under their
    /// blocks' names), and the blocks.
    nested: Nested,
    /// The block being read (0: none).
    context: u32,
    /// `%llguidance`'s `allow_initial_skip` (true without the header).
    initial_skip: bool,
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

impl<'a> Parser<'a> {
    /// Skips blanks and `//` comments, and newlines when `newlines`.
    fn space(&mut self, newlines: bool) {
        loop {
            match self.peek() {
                Some(' ' | '\t' | '\r') => {
                    self.bump();
                }
                Some('\n') if newlines => {
                    self.bump();
                }
                Some('#') => self.skip_line(),
                Some('/') if self.rest().starts_with("//") => self.skip_line(),
                _ => return,
            }
        }
    }

    fn skip_line(&mut self) {
        while !matches!(self.peek(), None | Some('\n')) {
            self.bump();
        }
    }

    fn name(&mut self) -> Option<String> {
        // llguidance's names may hold '-' (not before '>', the alias arrow,
        // and not last).
        let rest = self.rest().as_bytes();
        let mut len = 0;
        while len < rest.len() {
            let c = rest[len] as char;
            let dash =
                c == '-' && len > 0 && rest.get(len + 1).is_some_and(|&b| is_name_char(b as char));
            if !is_name_char(c) && !dash {
                break;
            }
            len += 1;
        }
        let n = self.rest()[..len].to_string();
        if n.is_empty() || n.starts_with(|c: char| c.is_ascii_digit()) {
            return None;
        }
        self.pos += n.len();
        Some(n)
    }

    fn number(&mut self) -> Result<i64> {
        let neg = self.eat("-");
        let digits: String = self
            .rest()
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        if digits.is_empty() {
            return self.err("expected a number");
        }
        self.pos += digits.len();
        let v: i64 = digits
            .parse()
            .map_err(|_| Error::Compile(format!("number {digits} is too large")))?;
        Ok(if neg { -v } else { v })
    }

    fn statements(&mut self, defs: &mut Defs) -> Result<()> {
        self.statements_in(defs, false)
    }

    /// Statements up to the end of the text, or with `nested` up to the
    /// `}` that closes a `%lark` block (read).
    fn statements_in(&mut self, defs: &mut Defs, nested: bool) -> Result<()> {
        loop {
            self.space(true);
            match self.peek() {
                None if nested => return self.err("a %lark block has no closing '}'"),
                None => return Ok(()),
                Some('}') if nested => {
                    self.bump();
                    return Ok(());
                }
                _ => {}
            }
            if self.eat("%") {
                self.directive(defs)?;
            } else {
                self.definition(defs, false)?;
            }
            self.space(false);
            match self.peek() {
                None | Some('\n') => {}
                Some('}') if nested => {}
                Some(c) => return self.err(format!("unexpected '{c}' (expected end of line)")),
            }
        }
    }

    fn directive(&mut self, defs: &mut Defs) -> Result<()> {
        let pos = self.here();
        let Some(word) = self.name() else {
            return self.err("expected a directive name");
        };
        self.space(false);
        match word.as_str() {
            "ignore" => {
                let n = self.expansions(false)?;
                defs.ignore.push(n);
            }
            "import" => self.import(defs, pos)?,
            "declare" => {
                while let Some(n) = self.name() {
                    defs.declared.push(n);
                    self.space(false);
                }
            }
            "if" => return self.err("llguidance's parametric rules (%if, ::) are not supported"),
            "llguidance" => self.llguidance_options()?,
            "override" | "extend" => {
                let mut tmp = Defs::default();
                self.definition(&mut tmp, true)?;
                merge(defs, tmp, word == "extend", pos)?;
            }
            other => return self.err(format!("unknown directive %{other}")),
        }
        Ok(())
    }

    fn import(&mut self, defs: &mut Defs, pos: Pos) -> Result<()> {
        let mut path = Vec::new();
        loop {
            let Some(n) = self.name() else {
                return self.err("expected a module path after %import");
            };
            path.push(n);
            if !self.eat(".") {
                break;
            }
        }
        self.space(false);
        let module = &path[0];
        if module != "common" {
            return Err(Error::Compile(format!(
                "%import at {pos}: only the 'common' module can be imported, not '{}'",
                path.join(".")
            )));
        }
        if path.len() == 2 {
            let name = path[1].clone();
            let alias = if self.eat("->") {
                self.space(false);
                match self.name() {
                    Some(a) => a,
                    None => return self.err("expected a name after '->'"),
                }
            } else {
                name.clone()
            };
            defs.imports.push((name, alias, pos));
        } else if path.len() == 1 && self.eat("(") {
            loop {
                self.space(true);
                let Some(n) = self.name() else {
                    return self.err("expected a name in %import (...)");
                };
                defs.imports.push((n.clone(), n, pos));
                self.space(true);
                if self.eat(")") {
                    break;
                }
                if !self.eat(",") {
                    return self.err("expected ',' or ')'");
                }
            }
        } else {
            return self.err("expected %import common.NAME or %import common (NAME, ...)");
        }
        Ok(())
    }

    fn definition(&mut self, defs: &mut Defs, directive: bool) -> Result<()> {
        let pos = self.here();
        while self.eat("?") || self.eat("!") {}
        let Some(name) = self.name() else {
            let what = if directive {
                "a rule or terminal after the directive"
            } else {
                "a rule or terminal name"
            };
            return self.err(format!("expected {what}"));
        };
        let mut params = Vec::new();
        if self.eat("{") {
            loop {
                self.space(false);
                let Some(p) = self.name() else {
                    return self.err("expected a template parameter");
                };
                params.push(p);
                self.space(false);
                if self.eat("}") {
                    break;
                }
                if !self.eat(",") {
                    return self.err("expected ',' or '}'");
                }
            }
        }
        let mut priority = 0;
        if self.eat(".") {
            priority = self.number()?;
        }
        self.space(false);
        if !self.eat(":") {
            return self.err(format!("expected ':' after '{name}'"));
        }
        self.space(false);
        let body = self.expansions(false)?;
        if !params.is_empty() {
            defs.templates.insert(name, Template { params, body, pos });
        } else if is_terminal_name(&name) {
            let priority =
                i32::try_from(priority).unwrap_or(if priority < 0 { i32::MIN } else { i32::MAX });
            defs.terminals.push(TermDef {
                name,
                body,
                priority,
                pos,
            });
        } else {
            defs.rules.push(RuleDef { name, body, pos });
        }
        Ok(())
    }

    /// Alternatives; a line starting with '|' continues them.
    fn expansions(&mut self, nested: bool) -> Result<Node> {
        let mut alts = vec![self.alias(nested)?];
        loop {
            let save = self.pos;
            self.space(true);
            if !self.eat("|") {
                self.pos = save;
                break;
            }
            self.space(nested);
            alts.push(self.alias(nested)?);
        }
        Ok(Node::alt(alts))
    }

    fn alias(&mut self, nested: bool) -> Result<Node> {
        let e = self.expansion(nested)?;
        if self.eat("->") {
            self.space(false);
            if self.name().is_none() {
                return self.err("expected a name after '->'");
            }
            self.space(nested);
        }
        Ok(e)
    }

    fn expansion(&mut self, nested: bool) -> Result<Node> {
        let mut items = Vec::new();
        loop {
            let saved = self.item_start();
            let Some(atom) = self.atom()? else {
                self.item_end(saved);
                break;
            };
            self.space(nested);
            let item = self.postfix(atom, nested)?;
            self.item_end(saved);
            items.push(item);
        }
        Ok(Node::seq(items))
    }

    fn postfix(&mut self, mut item: Node, nested: bool) -> Result<Node> {
        loop {
            let (min, max) = if let Some(q) = self.eat_quantifier() {
                q
            } else if let Some((len, lo, hi)) = self.braced_count()? {
                // llguidance's `x{m}`, `x{m,n}`, `x{,n}`, `x{m,}`.
                self.pos += len;
                (lo, hi)
            } else if self.eat("~") {
                self.space(false);
                let lo = self.count()?;
                let hi = if self.eat("..") { self.count()? } else { lo };
                if hi < lo {
                    return self.err(format!("repetition ~ {lo}..{hi} has max < min"));
                }
                (lo, Some(hi))
            } else {
                return Ok(item);
            };
            // Each operator wraps the item once more: a level of nesting.
            self.wrap()?;
            self.space(nested);
            item = Node::repeat(item, min, max);
        }
    }

    /// A repetition count in braces at the cursor (`{m}`, `{m,n}`, `{,n}`,
    /// `{m,}`, blanks allowed), without moving: its length in bytes and
    /// bounds. None if the braces hold anything else (template arguments).
    fn braced_count(&self) -> Result<Option<(usize, u32, Option<u32>)>> {
        let rest = self.rest();
        let Some(inner_end) = rest.strip_prefix('{').and_then(|r| r.find('}')) else {
            return Ok(None);
        };
        let inner = &rest[1..=inner_end];
        if inner.is_empty()
            || !inner
                .chars()
                .all(|c| c.is_ascii_digit() || c == ',' || c == ' ')
        {
            return Ok(None);
        }
        let bound = |s: &str| -> Result<Option<u32>> {
            let s = s.trim();
            if s.is_empty() {
                return Ok(None);
            }
            match s.parse::<u32>() {
                Ok(v) if v <= MAX_REPEAT => Ok(Some(v)),
                _ => Err(Error::LimitExceeded(format!(
                    "repetition count {s} at {} exceeds the limit {MAX_REPEAT}",
                    self.here()
                ))),
            }
        };
        let (lo, hi) = match inner.split_once(',') {
            None => {
                let Some(n) = bound(inner)? else {
                    return Ok(None);
                };
                (n, Some(n))
            }
            Some((a, b)) if !b.contains(',') => (bound(a)?.unwrap_or(0), bound(b)?),
            Some(_) => return Ok(None),
        };
        if hi.is_some_and(|h| h < lo) {
            return self.err(format!("repetition {{{}}} has max < min", inner.trim()));
        }
        Ok(Some((inner.len() + 2, lo, hi)))
    }

    fn count(&mut self) -> Result<u32> {
        let n = self.number()?;
        match u32::try_from(n) {
            Ok(v) if v <= MAX_REPEAT => Ok(v),
            _ => Err(Error::LimitExceeded(format!(
                "repetition count {n} at {} exceeds the limit {MAX_REPEAT}",
                self.here()
            ))),
        }
    }
}

/// Parses Lark text; the start rule is `start`.
pub fn parse(src: &str) -> Result<GrammarAst> {
    let mut defs = Defs::default();
    let mut parser = Parser {
        c: Cursor::new(src, "Lark"),
        nested: Nested::default(),
        context: 0,
        initial_skip: true,
    };
    parser.statements(&mut defs)?;
    let indenter = indenter_for(&defs)?;
    let (mut rules, mut terminals, ignore) = expand_defs(defs)?;
    let nested = parser.nested;
    if let Some(start) = only_a_json_block(&rules, &terminals, &ignore, &nested, &indenter) {
        // The whole grammar is one `%json` block: its language is the
        // schema's (the block's text is what `compile_json_schema` reads),
        // so it is lexed as the schema is, every split at once, not as a
        // block of lexemes each alone inside a longest-match grammar.
        let ast = GrammarAst {
            rules: nested.rules,
            terminals: nested.terminals,
            ignore: Vec::new(),
            start,
            lexing: Lexing::AllSplits,
            indenter: None,
            blocks: Vec::new(),
            initial_skip: true,
        };
        ast.check_depth()?;
        return Ok(ast);
    }
    rules.extend(nested.rules);
    terminals.extend(nested.terminals);
    let ast = GrammarAst {
        rules,
        terminals,
        ignore,
        start: "start".into(),
        lexing: Lexing::Longest,
        indenter,
        blocks: nested.blocks,
        initial_skip: parser.initial_skip,
    };
    ast.check_depth()?;
    Ok(ast)
}

/// Lark's Python grammars `%declare _INDENT _DEDENT` for its
/// `PythonIndenter` post-lexer, which maskpar runs in the parser (see
/// `indent`). Other declared terminals come from post-lexers it cannot know.
fn indenter_for(defs: &Defs) -> Result<Option<IndenterSpec>> {
    if defs.declared.is_empty() {
        return Ok(None);
    }
    let mut names = defs.declared.clone();
    names.sort();
    names.dedup();
    if names != ["_DEDENT", "_INDENT"] {
        return Err(Error::Compile(format!(
            "%declare'd terminals ({}) come from a post-lexer; the only one maskpar runs is \
             Python-style indentation, which declares exactly _INDENT and _DEDENT",
            defs.declared.join(", ")
        )));
    }
    let Some(newline) = ["_NEWLINE", "_NL"]
        .into_iter()
        .find(|n| defs.terminals.iter().any(|t| t.name == *n))
    else {
        return Err(Error::Compile(
            "%declare _INDENT _DEDENT (Python-style indentation) needs a newline terminal \
             _NEWLINE or _NL"
                .into(),
        ));
    };
    let pairs = |v: [(&str, &str); 3]| v.map(|(n, t)| (n.to_string(), t.to_string())).to_vec();
    Ok(Some(IndenterSpec {
        newline: newline.into(),
        indent: "_INDENT".into(),
        dedent: "_DEDENT".into(),
        open: pairs([("LPAR", "("), ("LSQB", "["), ("LBRACE", "{")]),
        close: pairs([("RPAR", ")"), ("RSQB", "]"), ("RBRACE", "}")]),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rules_terminals_directives_and_templates() {
        let g = parse(
            "start: list\n?list: \"[\" _sep{item, \",\"}? \"]\" -> lst\n_sep{x, s}: x (s x)*\n\
             item: NUMBER | WORD | /[a-z]+/i\nWORD.2: \"a\"..\"z\"+\n%import common.NUMBER\n%import common.WS\n%ignore WS\n",
        )
        .unwrap();
        assert_eq!(g.start, "start");
        assert!(g.rules.iter().any(|r| r.name.starts_with("_sep#")));
        let word = g.terminals.iter().find(|t| t.name == "WORD").unwrap();
        assert_eq!(word.priority, 2);
        assert_eq!(g.ignore.len(), 1);
    }

    #[test]
    fn continuation_lines_and_comments() {
        let g = parse("start: a\n    | b // comment\n    | \"c\"\na: \"a\"\nb: \"b\"").unwrap();
        assert!(matches!(&g.rules[0].body, Node::Alt(v) if v.len() == 3));
    }

    #[test]
    fn errors() {
        let e = parse("start: \"a\"\nfoo: (\"b\"").unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("expected ')'"), "{e}");
        assert!(parse("%declare _INDENT\nstart: _INDENT")
            .unwrap_err()
            .to_string()
            .contains("post-lexer"));
        assert!(parse("start: /a(?=b)/")
            .unwrap_err()
            .to_string()
            .contains("lookaround"));
        assert!(parse("%import common.NOPE\nstart: NOPE")
            .unwrap_err()
            .to_string()
            .contains("no terminal"));
        assert!(parse("%import .foo.BAR\nstart: \"a\"").is_err());
        assert!(parse("start: t{\"a\"}")
            .unwrap_err()
            .to_string()
            .contains("undefined template"));
    }
}
