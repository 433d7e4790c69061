//! The lexemes lowering makes: one per distinct regular node, context and
//! priority (the key that shares them), Lark's terminals in Lark's order,
//! terminals that match the empty string (made optional), word groups,
//! `%declare`d and token terminals, and named terminals with the terminals
//! they use inlined.

use std::sync::Arc;

use super::{Lowerer, MAX_LEXEMES, MAX_RHS_SYMBOLS};
use crate::cfg::ast::{Lexing, Node, TokenSet, MAX_NODE_DEPTH};
use crate::cfg::cursor::MAX_NESTING;
use crate::cfg::larkorder;
use crate::cfg::lowered::{Lexeme, Sym};
use crate::cfg::nodedfa::{
    cache_key, dfa_of, lexeme_name, literal_words, none_if_empty, DFA_CACHE_ENTRY_BYTES,
};
use crate::cfg::wordgroups::{self, Placement};
use crate::cfg::{lookaround, tokenterm};
use crate::error::{Error, Result};
use crate::regex_dfa::{ByteDfa, ByteSet, Op};

impl Lowerer<'_> {
    pub(super) fn lexeme(&mut self, n: &Node) -> Result<Sym> {
        self.lexeme_with(n, 0, None)
    }

    /// The lexeme for regular node `n` (distinct per priority).
    fn lexeme_with(&mut self, n: &Node, priority: i32, name: Option<&str>) -> Result<Sym> {
        // Lark terminals: alternatives in Lark's order (leftmost-first
        // matching tries them in that order), and Lark's pattern of it (its
        // widths and text rank it). Not for others: it costs a regex parse.
        let ordered;
        let (n, pattern) = if self.lexing == Lexing::Longest {
            let (node, pattern) = larkorder::lark_terminal(n);
            ordered = node;
            (&ordered, Some(pattern))
        } else {
            (n, None)
        };
        let boolean = matches!(
            n,
            Node::Intersect(_) | Node::Minus(..) | Node::DecimalMultiples(_) | Node::Automaton(_)
        );
        let mut re = String::new();
        cache_key(n, &mut re);
        // Writing, hashing and keeping the key (a regex of the whole node).
        crate::budget::charge_n(re.len().saturating_mul(2))?;
        // Alone lexemes are lexed apart from the grammar's terminals, and
        // Lark's string retyping never applies to them.
        let key = format!("{}\u{0}{priority}\u{0}{re}", self.context);
        let text = larkorder::string_text(n).filter(|_| !self.alone);
        let literal = text.is_some();
        if let Some(&nt) = self.optional_lexemes.get(&key) {
            return Ok(Sym::N(nt));
        }
        if let Some(&id) = self.lexeme_ids.get(&key) {
            let lexeme = &mut self.lexemes[id as usize];
            lexeme.literal |= literal;
            if lexeme.text.is_none() {
                lexeme.text = text;
            }
            return Ok(Sym::T(id));
        }
        if self.lexemes.len() >= MAX_LEXEMES {
            return Err(Error::LimitExceeded(format!(
                "grammar has more than {MAX_LEXEMES} lexemes"
            )));
        }
        // Lark terminals match as Python's re.match does; GBNF lexemes keep
        // every split (the exact character-level language).
        let mut end_forbid = None;
        let dfa = match self.lexing {
            Lexing::AllSplits => dfa_of(n, DFA_CACHE_ENTRY_BYTES)?,
            Lexing::Longest if boolean => {
                return Err(Error::Compile(
                    "intersections and differences need all-splits lexing".into(),
                ))
            }
            // A terminal that is only strings: Lark's regex tries them
            // longest first, so its match is the longest word that is a
            // prefix, as a longest-match scan of their trie finds (see
            // `wordgroups`); no regex compiler for 100,000 words.
            Lexing::Longest
                if literal_words(n).is_some_and(|w| !w.iter().any(String::is_empty)) =>
            {
                let words = literal_words(n).unwrap_or_default();
                wordgroups::group_dfa(&words)?
            }
            Lexing::Longest => match lookaround::first_match(&re).map_err(|e| match e {
                Error::Compile(m) => Error::Compile(format!("{}: {m}", lexeme_name(&re, name))),
                e => e,
            })? {
                Some((dfa, forbid)) => {
                    end_forbid = forbid;
                    Some(Arc::new(dfa))
                }
                None => None,
            },
        };
        let mut key = key;
        let mut dfa = dfa;
        let mut optional = None;
        if (self.lexing == Lexing::Longest || self.alone)
            && dfa.as_ref().is_some_and(|d| d.is_accepting(d.start()))
        {
            // llguidance's terminals may match the empty string: the
            // terminal becomes optional, its lexeme the non-empty matches.
            let what = lexeme_name(&re, name);
            let (nonempty, nt) =
                self.optional_terminal(dfa.as_deref(), end_forbid.is_some(), &what)?;
            dfa = nonempty;
            optional = Some((key.clone(), nt));
            key.push_str("\u{0}nonempty");
        }
        if let Some((outer, nt)) = &optional {
            if dfa.is_none() {
                // It matches only the empty string.
                self.optional_lexemes.insert(outer.clone(), *nt);
                return Ok(Sym::N(*nt));
            }
        }
        let id = self.lexemes.len() as u32;
        let (width, text_len, flags) = match pattern {
            Some(p) => (p.max, p.value.chars().count(), p.flags),
            None => (0, 0, String::new()),
        };
        self.lexemes.push(Lexeme {
            regex: re,
            priority,
            width,
            text_len,
            dfa,
            greedy: false,
            follow: ByteSet::default(),
            end_forbid,
            declared: false,
            literal,
            text,
            flags,
            embedded_in: Vec::new(),
            tokens: None,
            alone: self.alone,
            context: self.context,
        });
        self.lexeme_ids.insert(key, id);
        if let Some((outer, nt)) = optional {
            self.add_rule(nt, vec![Sym::T(id)])?;
            self.optional_lexemes.insert(outer, nt);
            return Ok(Sym::N(nt));
        }
        Ok(Sym::T(id))
    }

    /// For a longest-match terminal `what` whose `dfa` accepts the empty
    /// string: the DFA of its non-empty matches (None if there are none)
    /// and a fresh nonterminal that derives the empty string (the caller
    /// adds its rule to the lexeme).
    fn optional_terminal(
        &mut self,
        dfa: Option<&ByteDfa>,
        lookahead: bool,
        what: &str,
    ) -> Result<(Option<Arc<ByteDfa>>, u32)> {
        if lookahead {
            return Err(Error::Compile(format!(
                "{what} matches the empty string and ends in a lookahead"
            )));
        }
        let dfa = dfa.expect("a nullable lexeme has a DFA");
        let empty = ByteDfa::literals(&[b""]).expect("the empty word has a DFA");
        let nonempty = none_if_empty(ByteDfa::product(dfa, &empty, Op::AndNot))?;
        let nt = self.fresh("empty-terminal")?;
        self.add_rule(nt, Vec::new())?;
        Ok((nonempty.map(Arc::new), nt))
    }

    /// A lexeme of automaton `dfa` (all-splits lexing), named `what`.
    pub(super) fn built_lexeme(&mut self, dfa: ByteDfa, what: String) -> Result<Sym> {
        if self.lexemes.len() >= MAX_LEXEMES {
            return Err(Error::LimitExceeded(format!(
                "grammar has more than {MAX_LEXEMES} lexemes"
            )));
        }
        let id = self.lexemes.len() as u32;
        self.lexemes.push(Lexeme {
            dfa: Some(Arc::new(dfa)),
            alone: self.alone,
            context: self.context,
            ..Lexeme::textless(what)
        });
        Ok(Sym::T(id))
    }

    /// One lexeme matching exactly `words` (Lark strings), ranked `rank`.
    fn word_group(&mut self, words: Vec<String>, rank: larkorder::Rank) -> Result<Sym> {
        if self.lexemes.len() >= MAX_LEXEMES {
            return Err(Error::LimitExceeded(format!(
                "grammar has more than {MAX_LEXEMES} lexemes"
            )));
        }
        let dfa = wordgroups::group_dfa(&words)?;
        let id = self.lexemes.len() as u32;
        let (priority, width, text_len) = rank;
        self.lexemes.push(Lexeme {
            priority,
            width,
            text_len,
            dfa,
            // Strings (Lark retypes no pattern's match as one of them:
            // `wordgroups::place` keeps such strings alone), and never a
            // pattern that other strings could be embedded in.
            literal: true,
            context: self.context,
            ..Lexeme::textless(format!(
                "one of {} strings ({:?}, ...)",
                words.len(),
                words[0]
            ))
        });
        Ok(Sym::T(id))
    }

    /// The rules for the pending plain strings: grouped into trie lexemes
    /// where `group` and `wordgroups::place` allow, else one lexeme each.
    pub(super) fn place_words(&mut self, group: bool) -> Result<()> {
        let pending = std::mem::take(&mut self.pending_words);
        let placed = if group {
            wordgroups::place(&pending, &self.lexemes)?
        } else {
            pending
                .into_iter()
                .flat_map(|p| {
                    p.words
                        .into_iter()
                        .map(move |w| (p.lhs, Placement::Alone(w)))
                })
                .collect()
        };
        for (lhs, placement) in placed {
            self.context = self.nt_context[lhs as usize];
            let sym = match placement {
                Placement::Alone(w) => self.lexeme(&Node::Literal(w))?,
                Placement::Group { words, rank } => self.word_group(words, rank)?,
            };
            self.add_rule(lhs, vec![sym])?;
        }
        self.context = 0;
        Ok(())
    }

    /// The lexeme of `%declare`d terminal `name`: no text, made by the indenter.
    pub(super) fn declared_lexeme(&mut self, name: &str) -> Result<Sym> {
        let key = format!("\u{0}declared {name}");
        if let Some(&id) = self.lexeme_ids.get(&key) {
            return Ok(Sym::T(id));
        }
        let id = self.lexemes.len() as u32;
        self.lexemes.push(Lexeme {
            declared: true,
            ..Lexeme::textless(format!("%declare {name}"))
        });
        self.lexeme_ids.insert(key, id);
        Ok(Sym::T(id))
    }

    /// The lexeme of token terminal `set` (one per distinct set).
    pub(super) fn token_lexeme(&mut self, set: &TokenSet) -> Result<Sym> {
        let key = format!("\u{0}tokens {set:?}");
        if let Some(&id) = self.lexeme_ids.get(&key) {
            return Ok(Sym::T(id));
        }
        if self.lexemes.len() >= MAX_LEXEMES {
            return Err(Error::LimitExceeded(format!(
                "grammar has more than {MAX_LEXEMES} lexemes"
            )));
        }
        crate::budget::charge_n(set.ranges.len())?;
        let id = self.lexemes.len() as u32;
        self.lexemes.push(Lexeme {
            tokens: Some(set.clone()),
            ..Lexeme::textless(tokenterm::describe(set))
        });
        self.lexeme_ids.insert(key, id);
        Ok(Sym::T(id))
    }

    /// The lexeme of a named terminal, its body's terminal references inlined.
    pub(super) fn terminal(&mut self, name: &str) -> Result<Sym> {
        if let Some(&id) = self.terminal_ids.get(name) {
            return Ok(Sym::T(id));
        }
        let def = self.terminals[name];
        let mut size = 0;
        let body = self.inline_terminals(&def.body, &mut vec![name.to_string()], &mut size, 0)?;
        if tokenterm::holds_tokens(&body) {
            return Err(Error::Compile(format!(
                "terminal {name} holds a special token or token id: use it in a rule"
            )));
        }
        let sym = self.lexeme_with(&body, def.priority, Some(name))?;
        if let Sym::T(id) = sym {
            self.terminal_ids.insert(name.to_string(), id);
        }
        Ok(sym)
    }

    /// `n` with its terminal references replaced by their bodies. A chain
    /// of references is at most `MAX_NESTING` deep (each level recurses),
    /// and the result at most `MAX_RHS_SYMBOLS` nodes (`A: B B`, `B: C C`,
    /// ... doubles at every level); `size` counts the nodes made.
    fn inline_terminals(
        &self,
        n: &Node,
        stack: &mut Vec<String>,
        size: &mut usize,
        depth: usize,
    ) -> Result<Node> {
        // The result is as deep as this recursion: each level a node.
        if depth > MAX_NODE_DEPTH {
            return Err(Error::LimitExceeded(format!(
                "terminal {} nests deeper than {MAX_NODE_DEPTH} levels once the terminals it \
                 uses are inlined",
                stack[0]
            )));
        }
        *size += 1;
        if *size > MAX_RHS_SYMBOLS {
            return Err(Error::LimitExceeded(format!(
                "terminal {} expands to more than {MAX_RHS_SYMBOLS} parts",
                stack[0]
            )));
        }
        crate::budget::charge(1)?;
        let mut all = |v: &[Node], stack: &mut Vec<String>| -> Result<Vec<Node>> {
            v.iter()
                .map(|x| self.inline_terminals(x, stack, size, depth + 1))
                .collect()
        };
        Ok(match n {
            Node::Ref(name, pos) => {
                let Some(def) = self.terminals.get(name.as_str()) else {
                    return Err(Error::Compile(format!(
                        "terminal {} refers to '{name}' at {pos}, which is not a terminal",
                        stack[0]
                    )));
                };
                if stack.contains(name) {
                    return Err(Error::Compile(format!(
                        "terminal {name} is defined in terms of itself (at {pos})"
                    )));
                }
                if stack.len() >= MAX_NESTING as usize {
                    return Err(Error::LimitExceeded(format!(
                        "terminal {} refers to terminals nested more than {MAX_NESTING} deep",
                        stack[0]
                    )));
                }
                stack.push(name.clone());
                let body = self.inline_terminals(&def.body, stack, size, depth)?;
                stack.pop();
                body
            }
            // Templates are rules: a terminal cannot call one (Lark's own
            // grammar cannot write `A{}` in a terminal body either).
            Node::Call(name, _, pos) => {
                return Err(Error::Compile(format!(
                    "terminal {} calls template '{name}' at {pos}: templates are rules, \
                     and a terminal may only use terminals",
                    stack[0]
                )))
            }
            Node::Seq(v) => Node::Seq(all(v, stack)?),
            Node::Alt(v) => Node::Alt(all(v, stack)?),
            Node::Repeat { node, min, max } => Node::Repeat {
                node: Box::new(self.inline_terminals(node, stack, size, depth + 1)?),
                min: *min,
                max: *max,
            },
            other => other.clone(),
        })
    }
}
