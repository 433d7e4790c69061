//! The items of a Lark expansion: names, strings, ranges, regexes, groups,
//! special tokens; and the escapes of strings and regexes.

use super::{is_name_char, Parser};
use crate::cfg::ast::Node;
use crate::cfg::lookaround;
use crate::error::{Error, Result};

impl Parser<'_> {
    /// One item, or None where the expansion ends.
    pub(super) fn atom(&mut self) -> Result<Option<Node>> {
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
            Some('<') => crate::cfg::specials::parse_token_ref(&mut self.c, false, true)?,
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
    pub(super) fn string(&mut self) -> Result<(String, bool)> {
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
    pub(super) fn regex(&mut self) -> Result<String> {
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
