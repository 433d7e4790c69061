//! Regex text read as pieces (an atom and its quantifier, as written), so
//! that a rewrite can look at and replace the atoms around a lookaround
//! and write the pattern out again (`render`): characters, classes and
//! escapes, groups with their opening text, lookarounds, and anything else
//! kept verbatim. Groups nest at most `MAX_GROUP_NESTING` deep.

use crate::error::{Error, Result};

#[derive(Clone, Debug)]
pub(super) enum Atom {
    /// One character: a literal, an escape, a class or `.`.
    Char(String),
    /// A group: its opening text (`(`, `(?:`, `(?i:`, `(?P<n>`) and alternatives.
    Group(String, Vec<Vec<Piece>>),
    /// A lookaround: behind?, negated?, alternatives.
    Look(bool, bool, Vec<Vec<Piece>>),
    /// Anything else kept as written (anchors, inline flags).
    Other(String),
}

#[derive(Clone, Debug)]
pub(super) struct Piece {
    pub(super) atom: Atom,
    pub(super) quant: String,
}

struct Parser<'a> {
    s: &'a [char],
    i: usize,
    /// Groups open around `i`: every walk of the parsed pieces recurses
    /// once per level, so the parse refuses past `MAX_GROUP_NESTING`.
    depth: usize,
}

/// Bound on groups nested in a regex this parser reads (regex-syntax's own
/// default nest limit, which the pattern meets afterwards anyway).
const MAX_GROUP_NESTING: usize = 250;

impl Parser<'_> {
    fn err<T>(&self, what: &str) -> Result<T> {
        Err(Error::Compile(format!("regex: {what}")))
    }

    fn alts(&mut self) -> Result<Vec<Vec<Piece>>> {
        let mut alts = vec![Vec::new()];
        while self.i < self.s.len() {
            match self.s[self.i] {
                ')' => break,
                '|' => {
                    self.i += 1;
                    alts.push(Vec::new());
                }
                _ => {
                    let atom = self.atom()?;
                    let quant = self.quant();
                    alts.last_mut().unwrap().push(Piece { atom, quant });
                }
            }
        }
        Ok(alts)
    }

    fn take_while(&mut self, f: impl Fn(char) -> bool) -> String {
        let start = self.i;
        while self.i < self.s.len() && f(self.s[self.i]) {
            self.i += 1;
        }
        self.s[start..self.i].iter().collect()
    }

    fn escape(&mut self) -> Result<String> {
        let mut out = String::from("\\");
        self.i += 1;
        let Some(&c) = self.s.get(self.i) else {
            return self.err("trailing backslash");
        };
        out.push(c);
        self.i += 1;
        if "xupP".contains(c) && self.s.get(self.i) == Some(&'{') {
            out.push_str(&self.take_while(|c| c != '}'));
            if self.i < self.s.len() {
                out.push('}');
                self.i += 1;
            }
        } else if c == 'x' {
            out.push_str(&self.take_n(2));
        } else if c == 'u' {
            out.push_str(&self.take_n(4));
        } else if c == 'U' {
            out.push_str(&self.take_n(8));
        } else if c == 'p' || c == 'P' {
            out.push_str(&self.take_n(1));
        }
        Ok(out)
    }

    fn take_n(&mut self, n: usize) -> String {
        let end = (self.i + n).min(self.s.len());
        let out = self.s[self.i..end].iter().collect();
        self.i = end;
        out
    }

    fn class(&mut self) -> Result<String> {
        let mut out = String::from("[");
        self.i += 1;
        let mut depth = 1;
        let mut first = true;
        while depth > 0 {
            let Some(&c) = self.s.get(self.i) else {
                return self.err("unterminated class");
            };
            if c == '^' && first && out == "[" {
                out.push(c);
                self.i += 1;
                continue;
            }
            match c {
                '\\' => out.push_str(&self.escape()?),
                ']' if first => {
                    out.push(c);
                    self.i += 1;
                }
                '[' => {
                    depth += 1;
                    out.push(c);
                    self.i += 1;
                }
                ']' => {
                    depth -= 1;
                    out.push(c);
                    self.i += 1;
                }
                _ => {
                    out.push(c);
                    self.i += 1;
                }
            }
            first = false;
        }
        Ok(out)
    }

    fn atom(&mut self) -> Result<Atom> {
        let c = self.s[self.i];
        match c {
            '\\' => {
                let e = self.escape()?;
                let assertion = matches!(e.as_str(), "\\b" | "\\B" | "\\A" | "\\z" | "\\Z")
                    || e[1..].starts_with(|c: char| c.is_ascii_digit());
                Ok(if assertion {
                    Atom::Other(e)
                } else {
                    Atom::Char(e)
                })
            }
            '[' => Ok(Atom::Char(self.class()?)),
            '.' => {
                self.i += 1;
                Ok(Atom::Char(".".into()))
            }
            '^' | '$' => {
                self.i += 1;
                Ok(Atom::Other(c.to_string()))
            }
            '(' => self.group(),
            _ => {
                self.i += 1;
                Ok(Atom::Char(c.to_string()))
            }
        }
    }

    fn group(&mut self) -> Result<Atom> {
        let rest: String = self.s[self.i..].iter().take(4).collect();
        let look = [
            ("(?<=", true, false),
            ("(?<!", true, true),
            ("(?=", false, false),
            ("(?!", false, true),
        ]
        .into_iter()
        .find(|(p, _, _)| rest.starts_with(p));
        let open = if let Some((p, _, _)) = look {
            self.i += p.chars().count();
            p.to_string()
        } else if rest.starts_with("(?") {
            let mut open = self.take_while(|c| c != ':' && c != ')' && c != '>');
            match self.s.get(self.i) {
                Some(')') => {
                    // Inline flags: kept as written (they end no group).
                    self.i += 1;
                    open.push(')');
                    return Ok(Atom::Other(open));
                }
                Some(&c) => {
                    open.push(c);
                    self.i += 1;
                }
                None => return self.err("unterminated group"),
            }
            open
        } else {
            self.i += 1;
            "(".to_string()
        };
        if self.depth >= MAX_GROUP_NESTING {
            return self.err(&format!(
                "groups nest deeper than {MAX_GROUP_NESTING} levels"
            ));
        }
        self.depth += 1;
        let alts = self.alts()?;
        self.depth -= 1;
        if self.s.get(self.i) != Some(&')') {
            return self.err("unterminated group");
        }
        self.i += 1;
        Ok(match look {
            Some((_, behind, negated)) => Atom::Look(behind, negated, alts),
            None => Atom::Group(open, alts),
        })
    }

    fn quant(&mut self) -> String {
        let mut q = match self.s.get(self.i) {
            Some('*' | '+' | '?') => self.take_n(1),
            Some('{') => {
                let save = self.i;
                let body = self.take_while(|c| c != '}');
                if self.i < self.s.len()
                    && body[1..].chars().all(|c| c.is_ascii_digit() || c == ',')
                {
                    self.i += 1;
                    body + "}"
                } else {
                    self.i = save;
                    return String::new();
                }
            }
            _ => return String::new(),
        };
        if self.s.get(self.i) == Some(&'?') {
            q.push('?');
            self.i += 1;
        }
        q
    }
}

pub(super) fn render_alts(alts: &[Vec<Piece>], out: &mut String) {
    for (k, alt) in alts.iter().enumerate() {
        if k > 0 {
            out.push('|');
        }
        for p in alt {
            render(p, out);
        }
    }
}

pub(super) fn render(p: &Piece, out: &mut String) {
    match &p.atom {
        Atom::Char(s) | Atom::Other(s) => out.push_str(s),
        Atom::Group(open, alts) => {
            out.push_str(open);
            render_alts(alts, out);
            out.push(')');
        }
        Atom::Look(behind, negated, alts) => {
            out.push_str(match (behind, negated) {
                (true, false) => "(?<=",
                (true, true) => "(?<!",
                (false, false) => "(?=",
                (false, true) => "(?!",
            });
            render_alts(alts, out);
            out.push(')');
        }
    }
    out.push_str(&p.quant);
}

pub(super) fn parse(re: &str) -> Result<Vec<Vec<Piece>>> {
    let chars: Vec<char> = re.chars().collect();
    let mut p = Parser {
        s: &chars,
        i: 0,
        depth: 0,
    };
    let alts = p.alts()?;
    if p.i != chars.len() {
        return p.err("unbalanced parenthesis");
    }
    Ok(alts)
}

pub(super) fn pieces(re: &str) -> Vec<Piece> {
    let mut alts = parse(re).expect("built-in pattern parses");
    debug_assert_eq!(alts.len(), 1);
    alts.pop().unwrap()
}
