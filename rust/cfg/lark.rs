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

use std::collections::HashMap;

use super::ast::{
    Block, GrammarAst, IndenterSpec, Lexing, Node, Pos, RuleDef, TermDef, MAX_NODE_DEPTH,
};
use super::cursor::Cursor;
use super::lookaround;
use crate::error::{Error, Result};
use crate::schema::{KeyOrder, SchemaOptions};

/// Bound on `~ n..m` counts.
pub const MAX_REPEAT: u32 = 10_000;
/// Bound on nested template instantiations.
pub const MAX_TEMPLATE_DEPTH: usize = 64;

/// Definitions for `%import common.X`: Lark's `common` module as Lark
/// writes it (so imported terminals rank and match as in Lark), without its
/// comments.
const COMMON: &str = r#"
DIGIT: "0".."9"
HEXDIGIT: "a".."f" | "A".."F" | DIGIT
INT: DIGIT+
SIGNED_INT: ["+" | "-"] INT
DECIMAL: INT "." INT? | "." INT
_EXP: ("e" | "E") SIGNED_INT
FLOAT: INT _EXP | DECIMAL _EXP?
SIGNED_FLOAT: ["+" | "-"] FLOAT
NUMBER: FLOAT | INT
SIGNED_NUMBER: ["+" | "-"] NUMBER
_STRING_INNER: /.*?/
_STRING_ESC_INNER: _STRING_INNER /(?<!\\)(\\\\)*?/
ESCAPED_STRING: "\"" _STRING_ESC_INNER "\""
LCASE_LETTER: "a".."z"
UCASE_LETTER: "A".."Z"
LETTER: UCASE_LETTER | LCASE_LETTER
WORD: LETTER+
CNAME: ("_" | LETTER) ("_" | LETTER | DIGIT)*
WS_INLINE: (" " | /\t/)+
WS: /[ \t\f\r\n]/+
CR: /\r/
LF: /\n/
NEWLINE: (CR? LF)+
SH_COMMENT: /#[^\n]*/
CPP_COMMENT: /\/\/[^\n]*/
C_COMMENT: "/*" /(.|\n)*?/ "*/"
SQL_COMMENT: /--[^\n]*/
"#;

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn is_terminal_name(name: &str) -> bool {
    name.trim_start_matches('_')
        .starts_with(|c: char| c.is_ascii_uppercase())
}

struct Template {
    params: Vec<String>,
    body: Node,
    pos: Pos,
}

#[derive(Default)]
struct Defs {
    rules: Vec<RuleDef>,
    terminals: Vec<TermDef>,
    templates: HashMap<String, Template>,
    ignore: Vec<Node>,
    declared: Vec<String>,
    imports: Vec<(String, String, Pos)>,
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

/// The rules and terminals of nested grammars, and their blocks.
#[derive(Default)]
struct Nested {
    rules: Vec<RuleDef>,
    terminals: Vec<TermDef>,
    blocks: Vec<Block>,
}

/// Bound on blocks nested in blocks.
const MAX_BLOCK_DEPTH: u32 = 16;

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

    /// llguidance's `%llguidance {options}` after its keyword (SGLang and
    /// llama.cpp mark llguidance's grammars with it). Its options change how
    /// llguidance forces tokens and lexes, not the language maskpar reads
    /// (`no_forcing`), except `allow_initial_skip` (without it, as in
    /// llguidance, no ignored text before the first terminal; Lark's lexer
    /// and maskpar without the header allow it) and `allow_invalid_utf8`,
    /// which is refused. Unknown ones are ignored, as llguidance ignores them.
    fn llguidance_options(&mut self) -> Result<()> {
        let (len, options) = self.json_object("%llguidance takes a JSON object of options")?;
        if options.get("allow_invalid_utf8") == Some(&serde_json::Value::Bool(true)) {
            return self.err("%llguidance's allow_invalid_utf8 is not supported");
        }
        self.initial_skip =
            options.get("allow_initial_skip") == Some(&serde_json::Value::Bool(true));
        self.c.pos += len;
        Ok(())
    }

    /// The JSON object at the cursor and its length in bytes (the cursor
    /// stays); `what` is the error, with serde_json's reason when the text
    /// is not JSON.
    fn json_object(
        &self,
        what: &str,
    ) -> Result<(usize, serde_json::Map<String, serde_json::Value>)> {
        let mut values =
            serde_json::Deserializer::from_str(self.rest()).into_iter::<serde_json::Value>();
        match values.next() {
            Some(Ok(serde_json::Value::Object(o))) => Ok((values.byte_offset(), o)),
            Some(Err(e)) => self.err(format!("{what}: {e}")),
            _ => self.err(what),
        }
    }

    /// llguidance's `%json {schema}` after its keyword: the schema's rules
    /// join the grammar under the block's own names, read character-level
    /// with members in `properties` order (as llguidance generates them),
    /// and the block stands for a reference to its start rule.
    fn json_block(&mut self, pos: Pos) -> Result<Node> {
        let (len, _) = self.json_object("%json takes a JSON Schema object")?;
        let rest = self.rest();
        let opts = SchemaOptions {
            key_order: KeyOrder::Schema,
            ..SchemaOptions::default()
        };
        let ast = crate::schema::compile(&rest[..len], &opts).map_err(|e| match e {
            Error::Compile(m) => Error::Compile(format!("the %json block at {pos}: {m}")),
            other => other,
        })?;
        let id = self.open_block()?;
        let (rules, start) = ast.into_prefixed_rules(&format!("%json{id}:"))?;
        self.nested.blocks[id as usize - 1] = Block {
            rules: rules.iter().map(|r| r.name.clone()).collect(),
            char_level: true,
            ignore: Vec::new(),
            parent: self.context,
        };
        self.nested.rules.extend(rules);
        self.c.pos += len;
        Ok(Node::Ref(start, pos))
    }

    /// A new block's id (its context), its entry held until it is read.
    fn open_block(&mut self) -> Result<u32> {
        let mut depth = 0;
        let mut c = self.context;
        while c != 0 {
            depth += 1;
            c = self.nested.blocks[c as usize - 1].parent;
        }
        if depth >= MAX_BLOCK_DEPTH {
            return self.err(format!(
                "blocks nest more than {MAX_BLOCK_DEPTH} deep (%json and %lark inside %lark)"
            ));
        }
        self.nested.blocks.push(Block {
            rules: Vec::new(),
            char_level: false,
            ignore: Vec::new(),
            parent: self.context,
        });
        Ok(self.nested.blocks.len() as u32)
    }

    /// llguidance's `%lark { grammar }` after its keyword: a Lark grammar
    /// of its own (its `start` rule, terminals and `%ignore`), whose names
    /// are its own; the block stands for a reference to its start rule.
    fn lark_block(&mut self, pos: Pos) -> Result<Node> {
        if !self.eat("{") {
            return self.err("%lark takes a grammar in braces: %lark { ... }");
        }
        let id = self.open_block()?;
        let outer = std::mem::replace(&mut self.context, id);
        let mut defs = Defs::default();
        self.statements_in(&mut defs, true)?;
        self.context = outer;
        if !defs.declared.is_empty() {
            return Err(Error::Compile(format!(
                "the %lark block at {pos} declares terminals: not supported in a block"
            )));
        }
        let prefix = format!("%lark{id}:");
        let (rules, terminals, ignore) = expand_defs(defs)?;
        let mut defined: std::collections::HashSet<String> =
            rules.iter().map(|r| r.name.clone()).collect();
        defined.extend(terminals.iter().map(|t| t.name.clone()));
        if !defined.contains("start") {
            return Err(Error::Compile(format!(
                "the %lark block at {pos} has no start rule"
            )));
        }
        let rename = |mut n: Node| -> Result<Node> {
            rename_defined(&mut n, &defined, &prefix)?;
            Ok(n)
        };
        let mut names = Vec::with_capacity(rules.len());
        for r in rules {
            names.push(format!("{prefix}{}", r.name));
            self.nested.rules.push(RuleDef {
                name: format!("{prefix}{}", r.name),
                body: rename(r.body)?,
                pos: r.pos,
            });
        }
        for t in terminals {
            self.nested.terminals.push(TermDef {
                name: format!("{prefix}{}", t.name),
                body: rename(t.body)?,
                ..t
            });
        }
        self.nested.blocks[id as usize - 1] = Block {
            rules: names,
            char_level: false,
            ignore: ignore.into_iter().map(rename).collect::<Result<_>>()?,
            parent: outer,
        };
        Ok(Node::Ref(format!("{prefix}start"), pos))
    }

    /// One item, or None where the expansion ends.
    fn atom(&mut self) -> Result<Option<Node>> {
        let pos = self.here();
        Ok(Some(match self.peek() {
            Some('(') => {
                self.bump();
                self.enter()?;
                self.space(true);
                let inner = self.expansions(true)?;
                self.space(true);
                if !self.eat(")") {
                    return self.err("expected ')'");
                }
                self.leave();
                inner
            }
            Some('[') => {
                self.bump();
                self.enter()?;
                self.space(true);
                let inner = self.expansions(true)?;
                self.space(true);
                if !self.eat("]") {
                    return self.err("expected ']'");
                }
                self.leave();
                Node::repeat(inner, 0, Some(1))
            }
            Some('"') => {
                let (s, insensitive) = self.string()?;
                if self.rest().starts_with("..") {
                    self.pos += 2;
                    let (hi, _) = self.string()?;
                    let (mut a, mut b) = (s.chars(), hi.chars());
                    match (a.next(), a.next(), b.next(), b.next()) {
                        (Some(lo), None, Some(hi), None) if lo <= hi => Node::Class {
                            ranges: vec![(lo, hi)],
                            negated: false,
                        },
                        _ => return self.err("a range needs two single characters, low..high"),
                    }
                } else if insensitive {
                    let mut re = String::from("(?i:");
                    s.chars().for_each(|c| push_escaped(c, &mut re));
                    re.push(')');
                    Node::Regex(re)
                } else {
                    Node::Literal(s)
                }
            }
            Some('/') if !self.rest().starts_with("//") => Node::Regex(self.regex()?),
            // llguidance's special tokens and token ids.
            Some('<') => super::specials::parse_token_ref(&mut self.c, false, true)?,
            Some('%') if self.rest().starts_with("%json") => {
                self.c.pos += "%json".len();
                self.space(true);
                self.json_block(pos)?
            }
            Some('%') if self.rest().starts_with("%lark") => {
                self.c.pos += "%lark".len();
                self.space(true);
                self.lark_block(pos)?
            }
            Some('%') => {
                let word: String = self.rest()[1..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric())
                    .collect();
                return self.err(format!("%{word} inside a rule is not supported"));
            }
            Some(c) if is_name_char(c) && !c.is_ascii_digit() => {
                let save = self.pos;
                let name = self.name().unwrap();
                if self.rest().starts_with("::") {
                    return self.err("llguidance's parametric rules (::, %if) are not supported");
                }
                // `name:` starts the next definition (only possible after a newline).
                let mut look = self.pos;
                let bytes = self.src.as_bytes();
                while look < bytes.len() && (bytes[look] == b' ' || bytes[look] == b'\t') {
                    look += 1;
                }
                if look < bytes.len() && bytes[look] == b':' {
                    self.pos = save;
                    return Ok(None);
                }
                if self.braced_count()?.is_none() && self.eat("{") {
                    self.enter()?;
                    let mut args = Vec::new();
                    loop {
                        self.space(true);
                        args.push(self.expansions(true)?);
                        self.space(true);
                        if self.eat("}") {
                            break;
                        }
                        if !self.eat(",") {
                            return self.err("expected ',' or '}' in template arguments");
                        }
                    }
                    self.leave();
                    Node::Call(name, args, pos)
                } else {
                    Node::Ref(name, pos)
                }
            }
            _ => return Ok(None),
        }))
    }

    /// A string literal and whether it has the `i` flag.
    fn string(&mut self) -> Result<(String, bool)> {
        self.bump(); // "
        let mut s = String::new();
        loop {
            match self.bump() {
                None | Some('\n') => return self.err("unterminated string"),
                Some('"') => break,
                Some('\\') => s.push(self.escape()?),
                Some(c) => s.push(c),
            }
        }
        let insensitive = self.peek() == Some('i') && !self.rest()[1..].starts_with(is_name_char);
        if insensitive {
            self.bump();
        }
        Ok((s, insensitive))
    }

    fn escape(&mut self) -> Result<char> {
        match self.bump() {
            Some('n') => Ok('\n'),
            Some('r') => Ok('\r'),
            Some('t') => Ok('\t'),
            Some('f') => Ok('\x0c'),
            Some('v') => Ok('\x0b'),
            Some('0') => Ok('\0'),
            Some('x') => self.hex_escape(2),
            Some('u') => self.hex_escape(4),
            Some('U') => self.hex_escape(8),
            Some(c) if !c.is_ascii_alphanumeric() => Ok(c),
            Some(c) => self.err(format!("unknown escape '\\{c}' in string")),
            None => self.err("unterminated escape"),
        }
    }

    /// `/.../flags` as a Rust regex (Python syntax translated where it differs).
    fn regex(&mut self) -> Result<String> {
        let start = self.here();
        self.bump(); // /
        let mut body = String::new();
        loop {
            match self.bump() {
                None | Some('\n') => return self.err("unterminated regular expression"),
                Some('/') => break,
                Some('\\') => match self.bump() {
                    Some('/') => body.push('/'),
                    Some('Z') => body.push_str("\\z"),
                    Some(c) => {
                        body.push('\\');
                        body.push(c);
                    }
                    None => return self.err("unterminated regular expression"),
                },
                Some(c) => body.push(c),
            }
        }
        let flags: String = self
            .rest()
            .chars()
            .take_while(|c| c.is_ascii_lowercase())
            .collect();
        self.pos += flags.len();
        if let Some(bad) = flags.chars().find(|c| !"imsux".contains(*c)) {
            return Err(Error::Compile(format!(
                "regex at {start}: unsupported flag '{bad}'"
            )));
        }
        // Validate now, so the error points at the grammar text.
        let probe = if flags.is_empty() {
            body.clone()
        } else {
            format!("(?{flags}:{body})")
        };
        if lookaround::has_lookaround(&body) {
            // Rewritten when the terminal is lowered (see `lookaround`).
            if let Err(e) = lookaround::check(&probe) {
                return Err(Error::Compile(format!("regex /{body}/ at {start}: {e}")));
            }
        } else if let Err(e) = regex_automata::util::syntax::parse(&probe) {
            return Err(Error::Compile(format!("regex /{body}/ at {start}: {e}")));
        }
        // The body in a group of its own, so no regex reads as a string
        // (`/if/i` is not `"if"i`: see `larkorder::string_text`).
        Ok(if flags.is_empty() {
            format!("(?:{body})")
        } else {
            format!("(?{flags}:(?:{body}))")
        })
    }
}

fn push_escaped(c: char, out: &mut String) {
    if c.is_ascii_alphanumeric() {
        out.push(c);
    } else {
        out.push_str(&format!("\\x{{{:X}}}", c as u32));
    }
}

/// `%override` replaces a definition, `%extend` adds alternatives to it.
fn merge(defs: &mut Defs, new: Defs, extend: bool, pos: Pos) -> Result<()> {
    for r in new.rules {
        let Some(old) = defs.rules.iter_mut().find(|o| o.name == r.name) else {
            return Err(Error::Compile(format!(
                "%override/%extend at {pos}: no rule '{}'",
                r.name
            )));
        };
        old.body = if extend {
            extended(std::mem::replace(&mut old.body, Node::Empty), r.body)
        } else {
            r.body
        };
    }
    for t in new.terminals {
        let Some(old) = defs.terminals.iter_mut().find(|o| o.name == t.name) else {
            return Err(Error::Compile(format!(
                "%override/%extend at {pos}: no terminal '{}'",
                t.name
            )));
        };
        old.body = if extend {
            extended(std::mem::replace(&mut old.body, Node::Empty), t.body)
        } else {
            t.body
        };
        old.priority = t.priority;
    }
    Ok(())
}

/// `old` with `new` as one more alternative: added to `old`'s alternatives
/// rather than around them, so a long run of `%extend`s neither deepens
/// the tree nor copies it each time.
fn extended(old: Node, new: Node) -> Node {
    match old {
        Node::Alt(mut alts) => {
            alts.push(new);
            Node::Alt(alts)
        }
        old => Node::alt(vec![old, new]),
    }
}

/// Replaces template calls by instantiated rules (memoized per argument list).
struct Expander<'a> {
    templates: &'a HashMap<String, Template>,
    made: HashMap<String, String>,
    new_rules: Vec<RuleDef>,
}

fn key_of(n: &Node) -> String {
    format!("{n:?}")
}

impl Expander<'_> {
    /// `n` with its template calls expanded; `depth` counts the templates
    /// being expanded around it, `level` the nodes (each call recurses once
    /// per level of the tree, and template bodies add up).
    fn expand(
        &mut self,
        n: &Node,
        env: &HashMap<String, Node>,
        depth: usize,
        level: usize,
    ) -> Result<Node> {
        if level > MAX_NODE_DEPTH {
            return Err(Error::LimitExceeded(format!(
                "template expansion nests deeper than {MAX_NODE_DEPTH} levels"
            )));
        }
        let level = level + 1;
        Ok(match n {
            Node::Ref(name, _) if env.contains_key(name) => env[name].clone(),
            Node::Call(name, args, pos) => {
                if depth > MAX_TEMPLATE_DEPTH {
                    return Err(Error::LimitExceeded(format!(
                        "templates nest deeper than {MAX_TEMPLATE_DEPTH} (at {pos})"
                    )));
                }
                let Some(t) = self.templates.get(name) else {
                    return Err(Error::Compile(format!(
                        "undefined template '{name}' used at {pos}"
                    )));
                };
                if t.params.len() != args.len() {
                    return Err(Error::Compile(format!(
                        "template '{name}' (defined at {}) takes {} arguments, got {} at {pos}",
                        t.pos,
                        t.params.len(),
                        args.len()
                    )));
                }
                let args: Vec<Node> = args
                    .iter()
                    .map(|a| self.expand(a, env, depth + 1, level))
                    .collect::<Result<_>>()?;
                // Arguments are copied into the body: each may be as deep
                // as a body, no deeper.
                if args.iter().any(|a| a.deeper_than(MAX_NODE_DEPTH)) {
                    return Err(Error::LimitExceeded(format!(
                        "an argument of template '{name}' at {pos} nests deeper than \
                         {MAX_NODE_DEPTH} levels"
                    )));
                }
                let key = format!(
                    "{name}{{{}}}",
                    args.iter().map(key_of).collect::<Vec<_>>().join(",")
                );
                if let Some(rule) = self.made.get(&key) {
                    return Ok(Node::Ref(rule.clone(), *pos));
                }
                let rule = format!("{name}#{}", self.made.len());
                self.made.insert(key, rule.clone());
                let inner: HashMap<String, Node> = t.params.iter().cloned().zip(args).collect();
                let body = self.expand(&t.body.clone(), &inner, depth + 1, level)?;
                self.new_rules.push(RuleDef {
                    name: rule.clone(),
                    body,
                    pos: *pos,
                });
                Node::Ref(rule, *pos)
            }
            Node::Seq(v) => Node::Seq(
                v.iter()
                    .map(|x| self.expand(x, env, depth, level))
                    .collect::<Result<_>>()?,
            ),
            Node::Alt(v) => Node::Alt(
                v.iter()
                    .map(|x| self.expand(x, env, depth, level))
                    .collect::<Result<_>>()?,
            ),
            Node::Repeat { node, min, max } => Node::Repeat {
                node: Box::new(self.expand(node, env, depth, level)?),
                min: *min,
                max: *max,
            },
            other => other.clone(),
        })
    }
}

fn common_terminals() -> Vec<TermDef> {
    let mut defs = Defs::default();
    let mut p = Parser {
        c: Cursor::new(COMMON, "Lark"),
        nested: Nested::default(),
        context: 0,
        initial_skip: true,
    };
    p.statements(&mut defs)
        .expect("the built-in common terminals parse");
    defs.terminals
}

/// Renames references to common terminals into their `common::` namespace.
fn namespaced(n: &Node) -> Node {
    match n {
        Node::Ref(name, pos) => Node::Ref(format!("common::{name}"), *pos),
        Node::Seq(v) => Node::Seq(v.iter().map(namespaced).collect()),
        Node::Alt(v) => Node::Alt(v.iter().map(namespaced).collect()),
        Node::Repeat { node, min, max } => Node::Repeat {
            node: Box::new(namespaced(node)),
            min: *min,
            max: *max,
        },
        other => other.clone(),
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

/// The start rule of the `%json` block that is the whole grammar, if it
/// is: `start` is the grammar's only rule, its body the block alone, and
/// there are no terminals, `%ignore` or indentation of the grammar's own.
fn only_a_json_block(
    rules: &[RuleDef],
    terminals: &[TermDef],
    ignore: &[Node],
    nested: &Nested,
    indenter: &Option<IndenterSpec>,
) -> Option<String> {
    fn sole_ref(n: &Node) -> Option<&str> {
        match n {
            Node::Ref(name, _) => Some(name),
            Node::Seq(v) | Node::Alt(v) if v.len() == 1 => sole_ref(&v[0]),
            _ => None,
        }
    }
    let ([start], [block]) = (rules, nested.blocks.as_slice()) else {
        return None;
    };
    if start.name != "start"
        || !terminals.is_empty()
        || !ignore.is_empty()
        || indenter.is_some()
        || !block.char_level
        || !nested.terminals.is_empty()
    {
        return None;
    }
    let target = sole_ref(&start.body)?;
    block
        .rules
        .iter()
        .any(|r| r == target)
        .then(|| target.to_string())
}

/// A grammar's rules (templates expanded), terminals (`%import`s of
/// `common` added) and `%ignore`.
fn expand_defs(mut defs: Defs) -> Result<(Vec<RuleDef>, Vec<TermDef>, Vec<Node>)> {
    if !defs.imports.is_empty() {
        let common = common_terminals();
        for t in &common {
            defs.terminals.push(TermDef {
                name: format!("common::{}", t.name),
                body: namespaced(&t.body),
                ..t.clone()
            });
        }
        for (name, alias, pos) in std::mem::take(&mut defs.imports) {
            if !common.iter().any(|t| t.name == name) {
                return Err(Error::Compile(format!(
                    "%import at {pos}: common has no terminal '{name}'"
                )));
            }
            defs.terminals.push(TermDef {
                name: alias,
                body: Node::Ref(format!("common::{name}"), pos),
                priority: 0,
                pos,
            });
        }
    }
    let mut ex = Expander {
        templates: &defs.templates,
        made: HashMap::new(),
        new_rules: Vec::new(),
    };
    let empty = HashMap::new();
    let mut rules = Vec::with_capacity(defs.rules.len());
    for r in &defs.rules {
        rules.push(RuleDef {
            body: ex.expand(&r.body, &empty, 0, 0)?,
            ..r.clone()
        });
    }
    rules.append(&mut ex.new_rules);
    let ignore = defs
        .ignore
        .iter()
        .map(|n| ex.expand(n, &empty, 0, 0))
        .collect::<Result<Vec<_>>>()?;
    Ok((rules, defs.terminals, ignore))
}

/// Prefixes the references in `node` to the names in `defined` (a `%lark`
/// block's own rules and terminals; other references name blocks inside it).
fn rename_defined(
    node: &mut Node,
    defined: &std::collections::HashSet<String>,
    prefix: &str,
) -> Result<()> {
    node.rename_refs(|name| {
        if defined.contains(name.as_str()) {
            *name = format!("{prefix}{name}");
        }
    })
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
