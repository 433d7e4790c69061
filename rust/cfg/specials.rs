//! Special tokens and token ids written in grammar text, and their
//! resolution against a tokenizer.
//!
//! Both front ends read the same forms:
//!
//! - `<[id]>`, `<[a-b,c]>`: one token whose id is listed (llguidance's
//!   Lark and llama.cpp's GBNF; ranges are inclusive);
//! - `<|name|>` in Lark, `<name>` in GBNF: the token whose text is exactly
//!   that (angle brackets included), special tokens first;
//! - GBNF only: `!` before either form, any one token but that one.
//!
//! Parsing needs no tokenizer: ids become token terminals (`Node::Tokens`)
//! at once, and a token written by its text becomes a reference whose
//! name starts with `<` (or `!<`), which no rule name can. `resolve` then
//! replaces those references by the token's id, from the tokenizer the
//! grammar is compiled for: a name that is no single token, or an id past
//! the vocabulary, is a clear error there.

use super::ast::{GrammarAst, Node};
use super::cursor::Cursor;
use crate::error::{Error, Result};
use crate::vocab::Vocab;
use rustc_hash::FxHashMap as HashMap;

/// Bound on the text of a token written by name (`<...>`).
pub const MAX_TOKEN_NAME: usize = 256;
/// Bound on the ids and ranges listed in one `<[...]>`.
pub const MAX_TOKEN_RANGES: usize = 10_000;

/// Reads a token reference at `c` (which is at `<`): `<[ids]>` as a token
/// terminal, `<name>` as a reference to resolve; `negated` for GBNF's `!`.
/// In Lark (`lark`), a name must be `<|...|>`.
pub fn parse_token_ref(c: &mut Cursor<'_>, negated: bool, lark: bool) -> Result<Node> {
    let pos = c.here();
    if c.eat("<[") {
        let mut ranges: Vec<(u32, u32)> = Vec::new();
        loop {
            let lo = read_id(c)?;
            let hi = if c.eat("-") { read_id(c)? } else { lo };
            if hi < lo {
                return c.err(format!("token id range {lo}-{hi} is reversed"));
            }
            ranges.push((lo, hi));
            if ranges.len() > MAX_TOKEN_RANGES {
                return c.err(format!(
                    "a token id list holds more than {MAX_TOKEN_RANGES} ids and ranges"
                ));
            }
            if !c.eat(",") {
                break;
            }
        }
        if !c.eat("]>") {
            return c.err("expected ']>' after token ids");
        }
        return Ok(Node::tokens(ranges, negated));
    }
    let rest = c.rest();
    let Some(end) = rest.find('>') else {
        return c.err("expected '>' to close a token name");
    };
    let text = &rest[..=end];
    if text.len() > MAX_TOKEN_NAME || text.contains(['\n', '\r']) || text.len() < 3 {
        return c.err("expected a token name like <|name|> or an id like <[123]>");
    }
    if lark && !(text.starts_with("<|") && text.ends_with("|>") && text.len() >= 4) {
        return c.err("expected a special token <|name|> or token ids <[...]>");
    }
    c.pos += text.len();
    let name = if negated {
        format!("!{text}")
    } else {
        text.to_string()
    };
    Ok(Node::Ref(name, pos))
}

fn read_id(c: &mut Cursor<'_>) -> Result<u32> {
    let digits: String = c.rest().chars().take_while(char::is_ascii_digit).collect();
    if digits.is_empty() {
        return c.err("expected a token id");
    }
    c.pos += digits.len();
    digits
        .parse::<u32>()
        .or_else(|_| c.err(format!("token id {digits} is too large")))
}

/// Replaces token names by their ids and checks every id against `vocab`.
pub fn resolve(ast: &mut GrammarAst, vocab: &Vocab) -> Result<()> {
    let mut names = TokenNames::default();
    for r in &mut ast.rules {
        resolve_node(&mut r.body, vocab, &mut names)?;
    }
    for t in &ast.terminals {
        check_no_tokens(&t.body, &t.name)?;
    }
    Ok(())
}

fn check_no_tokens(n: &Node, name: &str) -> Result<()> {
    if super::tokenterm::holds_tokens(n) || refs_token_name(n) {
        return Err(Error::Compile(format!(
            "terminal {name} holds a special token or token id: use it in a rule"
        )));
    }
    Ok(())
}

fn refs_token_name(n: &Node) -> bool {
    match n {
        Node::Ref(name, _) => is_token_name(name),
        Node::Seq(v) | Node::Alt(v) => v.iter().any(refs_token_name),
        Node::Repeat { node, .. } => refs_token_name(node),
        _ => false,
    }
}

fn is_token_name(name: &str) -> bool {
    name.starts_with('<') || name.starts_with("!<")
}

/// Token names a grammar used, resolved once each.
#[derive(Default)]
struct TokenNames {
    known: HashMap<String, Option<u32>>,
}

impl TokenNames {
    /// The id of the token whose bytes are `text`: a special (or EOS)
    /// token if one has them, else the first text token that does. A scan
    /// of the vocabulary per distinct name (comparing lengths first), each
    /// charged to the compile budget.
    fn id(&mut self, vocab: &Vocab, text: &str) -> Result<Option<u32>> {
        if let Some(&hit) = self.known.get(text) {
            return Ok(hit);
        }
        crate::budget::charge_n(vocab.num_tokens() / 16 + 1)?;
        let want = text.as_bytes();
        let mut plain = None;
        let mut special = None;
        for id in 0..vocab.num_tokens() as u32 {
            if vocab.token_bytes(id) != Some(want) {
                continue;
            }
            if vocab.text_bytes(id).is_none() {
                special = Some(id);
                break;
            }
            plain.get_or_insert(id);
        }
        let found = special.or(plain);
        self.known.insert(text.to_string(), found);
        Ok(found)
    }
}

/// `resolve` for one rule body (its depth is bounded by the parsers:
/// `ast::MAX_NODE_DEPTH`, checked when they finish).
fn resolve_node(n: &mut Node, vocab: &Vocab, names: &mut TokenNames) -> Result<()> {
    match n {
        Node::Ref(name, pos) if is_token_name(name) => {
            let (negated, text) = match name.strip_prefix('!') {
                Some(t) => (true, t),
                None => (false, name.as_str()),
            };
            let Some(id) = names.id(vocab, text)? else {
                return Err(Error::Compile(format!(
                    "the tokenizer has no token {text:?} (at {pos})"
                )));
            };
            *n = Node::tokens([(id, id)], negated);
        }
        Node::Tokens(set) => {
            let n_tokens = vocab.num_tokens() as u32;
            if let Some(&(_, hi)) = set.ranges.last() {
                if hi >= n_tokens {
                    return Err(Error::Compile(format!(
                        "token id {hi} is out of range (the vocabulary has {n_tokens} tokens)"
                    )));
                }
            }
        }
        Node::Seq(v) | Node::Alt(v) | Node::Intersect(v) => {
            for x in v {
                resolve_node(x, vocab, names)?;
            }
        }
        Node::Repeat { node, .. } => resolve_node(node, vocab, names)?,
        Node::Call(_, args, _) => {
            for x in args {
                resolve_node(x, vocab, names)?;
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfg::{gbnf, lark};

    fn vocab() -> Vocab {
        let toks = ["a", "<|x|>", "<think>", "<eos>"]
            .iter()
            .map(|t| t.as_bytes().to_vec())
            .collect();
        Vocab::new(toks, &[3], &[1], None).unwrap()
    }

    fn first_body(mut ast: GrammarAst) -> Result<Node> {
        resolve(&mut ast, &vocab())?;
        Ok(ast.rules.remove(0).body)
    }

    #[test]
    fn names_and_ids_resolve_against_the_tokenizer() {
        let g = first_body(gbnf::parse("root ::= <|x|> !<think> <[0-1,3]>").unwrap()).unwrap();
        assert_eq!(
            g,
            Node::Seq(vec![
                Node::tokens([(1, 1)], false),
                Node::tokens([(2, 2)], true),
                Node::tokens([(0, 1), (3, 3)], false),
            ])
        );
        let g = first_body(lark::parse("start: <|x|> \"a\" <[2]>").unwrap()).unwrap();
        assert!(matches!(g, Node::Seq(ref v) if v[0] == Node::tokens([(1, 1)], false)));
    }

    #[test]
    fn unknown_names_and_ids_past_the_vocabulary_are_errors() {
        let e = first_body(gbnf::parse("root ::= <|nope|>").unwrap()).unwrap_err();
        assert!(e.to_string().contains("no token \"<|nope|>\""), "{e}");
        let e = first_body(gbnf::parse("root ::= <[4]>").unwrap()).unwrap_err();
        assert!(e.to_string().contains("out of range"), "{e}");
        for bad in [
            "root ::= <[3-1]>",
            "root ::= <[x]>",
            "root ::= <[1",
            "root ::= <ab",
        ] {
            assert!(gbnf::parse(bad).is_err(), "{bad}");
        }
        assert!(lark::parse("start: <think>").is_err());
        // Hostile forms: bounded lists and names, ids past u32.
        let many: Vec<String> = (0..=MAX_TOKEN_RANGES).map(|i| i.to_string()).collect();
        let e = gbnf::parse(&format!("root ::= <[{}]>", many.join(","))).unwrap_err();
        assert!(e.to_string().contains("more than"), "{e}");
        assert!(gbnf::parse("root ::= <[4294967296]>").is_err());
        let long = format!("root ::= <{}>", "a".repeat(MAX_TOKEN_NAME));
        assert!(gbnf::parse(&long).is_err());
        assert!(gbnf::parse("root ::= !x").is_err());
    }
}

#[cfg(test)]
mod dialect_tests {
    use crate::cfg::ast::Node;
    use crate::cfg::{gbnf, lark};

    #[test]
    fn llguidance_counts_and_dashed_names() {
        let g = lark::parse("start: a-b{2} \"x\"{,3} \"y\"{1,} c{ 2 , 4 }\na-b: \"a\"\nc: \"c\"")
            .unwrap();
        let Node::Seq(items) = &g.rules[0].body else {
            panic!("{:?}", g.rules[0].body)
        };
        let counts: Vec<(u32, Option<u32>)> = items
            .iter()
            .map(|n| match n {
                Node::Repeat { min, max, .. } => (*min, *max),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            counts,
            vec![(2, Some(2)), (0, Some(3)), (1, None), (2, Some(4))]
        );
        assert!(lark::parse("start: \"a\"{3,1}").is_err());
        // Template calls keep their braces; the alias arrow is no name.
        assert!(lark::parse("start: t{\"a\"}\nt{x}: x").is_ok());
        assert!(lark::parse("start: \"a\"->x").is_ok());
    }

    #[test]
    fn gbnf_names_with_dots_and_negated_empty_classes() {
        let g = gbnf::parse("root ::= a.b . [^]\na.b ::= \"x\"").unwrap();
        let Node::Seq(items) = &g.rules[0].body else {
            panic!()
        };
        assert!(matches!(&items[0], Node::Ref(n, _) if n == "a.b"));
        assert_eq!(items[1], Node::AnyChar);
        assert_eq!(g.rules[1].name, "a.b");
    }
}
