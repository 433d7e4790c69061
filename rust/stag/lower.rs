//! A tree of structural-tag formats to grammar rules.
//!
//! Each composite format becomes one rule (`stag:N`), so the AST stays
//! shallow however deep the formats nest; leaves are literals, regexes and
//! the free-text lexemes of `text`. Embedded JSON schemas (compiled by the
//! JSON Schema compiler) and EBNF grammars (parsed by the GBNF front end)
//! bring their own rules: they are imported with every rule name prefixed
//! (`sN:`), so no two parts share a name.
//!
//! The one context the formats need is the enclosing tag's ends: inside a
//! tag's content, free text (`any_text`, the text between triggered tags)
//! may not contain the end, as in xgrammar, where the end is what stops it.
//! The innermost tag's ends count, not the outer ones. A tag whose content is
//! `any_text` itself is one lexeme, text up to the *first* end.
//!
//! What each format means (xgrammar's language):
//!
//! | format | language |
//! |---|---|
//! | `triggered_tags` | `(F_t rest)* F`, where `F_t` is free text up to the first trigger `t` and `rest` the rest of a tag whose begin starts with `t`; `F` free text without triggers. `at_least_one`: a whole tag first, without free text before it; `stop_after_first`: at most one tag, nothing after it |
//! | `tags_with_separator` | `(tag (sep tag)*)?`; `at_least_one` drops the `?`; `stop_after_first` allows one tag only |

use crate::budget;
use crate::cfg::ast::{GrammarAst, Lexing, Node, Pos, RuleDef};
use crate::cfg::gbnf;
use crate::error::{Error, Result};
use crate::schema::{self, SchemaOptions};

use super::spec::{Format, Tag, Triggered};
use super::text;

/// The start rule of a compiled structural tag.
pub const START: &str = "stag:root";

/// Lowers the top format to a grammar.
pub fn lower(top: &Format) -> Result<GrammarAst> {
    let mut l = Lowering {
        rules: Vec::new(),
        parts: 0,
    };
    let body = l.format(top, &[])?;
    l.rules.push(rule(START.into(), body));
    Ok(GrammarAst {
        rules: l.rules,
        terminals: Vec::new(),
        ignore: Vec::new(),
        start: START.into(),
        lexing: Lexing::AllSplits,
        indenter: None,
    })
}

fn rule(name: String, body: Node) -> RuleDef {
    RuleDef {
        name,
        body,
        pos: Pos::default(),
    }
}

fn literal(s: &str) -> Node {
    if s.is_empty() {
        Node::Empty
    } else {
        Node::Literal(s.to_string())
    }
}

fn one_of(strings: &[String]) -> Node {
    Node::alt(strings.iter().map(|s| literal(s)).collect())
}

struct Lowering {
    rules: Vec<RuleDef>,
    /// Rules and imported parts made so far (for fresh names).
    parts: usize,
}

impl Lowering {
    /// A new rule with this body; a reference to it.
    fn define(&mut self, body: Node) -> Node {
        self.parts += 1;
        let name = format!("stag:{}", self.parts);
        self.rules.push(rule(name.clone(), body));
        Node::Ref(name, Pos::default())
    }

    /// The node for `f`, inside a tag with these ends (none at the top).
    /// Recursion follows the format tree, at most `MAX_FORMAT_DEPTH` deep.
    fn format(&mut self, f: &Format, ends: &[String]) -> Result<Node> {
        budget::charge(64)?;
        Ok(match f {
            Format::ConstString(s) => literal(s),
            Format::JsonSchema(text) => {
                let opts = SchemaOptions {
                    // xgrammar's structural tags refuse members the schema
                    // does not list, unless additionalProperties allows them.
                    strict_properties: true,
                    ..SchemaOptions::default()
                };
                let ast = schema::compile(text, &opts)
                    .map_err(|e| Error::Compile(format!("json_schema in a structural tag: {e}")))?;
                self.import(ast)?
            }
            Format::Grammar(source) => {
                let ast = gbnf::parse(source)
                    .map_err(|e| Error::Compile(format!("grammar in a structural tag: {e}")))?;
                self.import(ast)?
            }
            Format::Regex(pattern) => {
                let rust = schema::strings::ecma_shorthands(pattern);
                // Checked here, so a bad pattern is named as such.
                regex_syntax::Parser::new().parse(&rust).map_err(|e| {
                    Error::Compile(format!(
                        "regex {pattern:?} in a structural tag does not parse: {e}"
                    ))
                })?;
                Node::Regex(rust)
            }
            Format::AnyText {
                excludes,
                max_chars,
            } => {
                let node = text::without(&text::union(&[excludes, ends]));
                match max_chars {
                    Some(n) => text::at_most_chars(node, *n),
                    None => node,
                }
            }
            Format::Sequence(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    out.push(self.format(item, ends)?);
                }
                self.define(Node::seq(out))
            }
            Format::Or(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    out.push(self.format(item, ends)?);
                }
                self.define(Node::alt(out))
            }
            Format::Repeat { content, min, max } => {
                let inner = self.format(content, ends)?;
                self.define(Node::repeat(inner, *min, *max))
            }
            Format::Tag(tag) => self.tag(tag)?,
            Format::TriggeredTags(t) => self.triggered(t, ends)?,
            Format::TagsWithSeparator {
                tags,
                separator,
                at_least_one,
                stop_after_first,
            } => {
                let mut alts = Vec::with_capacity(tags.len());
                for tag in tags {
                    alts.push(self.tag(tag)?);
                }
                let one = self.define(Node::alt(alts));
                let body = if *stop_after_first {
                    one
                } else {
                    let more =
                        Node::repeat(Node::seq(vec![literal(separator), one.clone()]), 0, None);
                    Node::seq(vec![one, more])
                };
                if *at_least_one {
                    self.define(body)
                } else {
                    self.define(Node::repeat(body, 0, Some(1)))
                }
            }
        })
    }

    /// A tag: its begin, then [`Self::tag_body`].
    fn tag(&mut self, tag: &Tag) -> Result<Node> {
        let body = self.tag_body(tag)?;
        Ok(self.define(Node::seq(vec![literal(&tag.begin), body])))
    }

    /// A tag's content and end, as one rule.
    fn tag_body(&mut self, tag: &Tag) -> Result<Node> {
        let ends = text::union(&[&tag.ends]);
        let node = match &*tag.content {
            // Free text up to the first end, as one lexeme (an empty end
            // would end it anywhere: then the content is free).
            Format::AnyText {
                excludes,
                max_chars: None,
            } if ends.len() == tag.ends.len() => {
                text::up_to_first(&ends, &text::union(&[&ends, excludes]))
            }
            content => {
                let content = self.format(content, &ends)?;
                Node::seq(vec![content, one_of(&tag.ends)])
            }
        };
        Ok(self.define(node))
    }

    /// Free text with triggered tags (see the module table), inside a tag
    /// with these ends.
    fn triggered(&mut self, t: &Triggered, ends: &[String]) -> Result<Node> {
        let stops = text::union(&[&t.triggers, &t.excludes, ends]);
        let mut bodies = Vec::with_capacity(t.tags.len());
        for tag in &t.tags {
            bodies.push(self.tag_body(tag)?);
        }
        let whole = Node::alt(
            t.tags
                .iter()
                .zip(&bodies)
                .map(|(tag, body)| Node::seq(vec![literal(&tag.begin), body.clone()]))
                .collect(),
        );
        let whole = self.define(whole);
        // One tag with the free text before it: for each trigger, the text
        // up to it, then the rest of one of the tags it starts.
        let mut by_trigger = Vec::with_capacity(t.triggers.len());
        for trigger in &t.triggers {
            let rests: Vec<Node> = t
                .tags
                .iter()
                .zip(&bodies)
                .filter(|(tag, _)| tag.begin.starts_with(trigger.as_str()))
                .map(|(tag, body)| {
                    Node::seq(vec![literal(&tag.begin[trigger.len()..]), body.clone()])
                })
                .collect();
            if rests.is_empty() {
                continue; // a trigger no tag starts with: never complete
            }
            by_trigger.push(Node::seq(vec![
                text::up_to_first(std::slice::from_ref(trigger), &stops),
                Node::alt(rests),
            ]));
        }
        let dispatch = self.define(Node::alt(by_trigger));
        let free = text::without(&stops);
        let body = match (t.at_least_one, t.stop_after_first) {
            (false, false) => Node::seq(vec![Node::repeat(dispatch, 0, None), free]),
            (true, false) => Node::seq(vec![whole, Node::repeat(dispatch, 0, None), free]),
            (false, true) => Node::alt(vec![free, dispatch]),
            (true, true) => whole,
        };
        Ok(self.define(body))
    }

    /// Adds an embedded grammar's rules under fresh names; a reference to
    /// its start rule.
    fn import(&mut self, ast: GrammarAst) -> Result<Node> {
        if !ast.terminals.is_empty() || !ast.ignore.is_empty() || ast.lexing != Lexing::AllSplits {
            return Err(Error::Compile(
                "an embedded grammar must be character-level (GBNF/EBNF)".into(),
            ));
        }
        self.parts += 1;
        let prefix = format!("s{}:", self.parts);
        for mut r in ast.rules {
            rename_refs(&mut r.body, &prefix)?;
            r.name = format!("{prefix}{}", r.name);
            self.rules.push(r);
        }
        Ok(Node::Ref(format!("{prefix}{}", ast.start), Pos::default()))
    }
}

/// Prefixes every rule reference in `node` (iteratively: an imported
/// grammar's nodes may nest deeply).
fn rename_refs(node: &mut Node, prefix: &str) -> Result<()> {
    let mut stack: Vec<&mut Node> = vec![node];
    while let Some(n) = stack.pop() {
        budget::charge(1)?;
        match n {
            Node::Ref(name, _) => *name = format!("{prefix}{name}"),
            Node::Call(name, args, _) => {
                *name = format!("{prefix}{name}");
                stack.extend(args.iter_mut());
            }
            Node::Seq(items) | Node::Alt(items) | Node::Intersect(items) => {
                stack.extend(items.iter_mut())
            }
            Node::Repeat { node, .. } => stack.push(node),
            Node::Minus(a, b) => {
                stack.push(a);
                stack.push(b);
            }
            Node::Members(m) => {
                let m = &mut **m;
                stack.extend(m.listed.iter_mut().map(|(n, _)| n));
                if let Some((a, b)) = &mut m.extra {
                    stack.push(a);
                    stack.push(b);
                }
                stack.push(&mut m.open);
                stack.push(&mut m.sep);
                stack.push(&mut m.close);
                stack.push(&mut m.close_empty);
            }
            Node::Empty
            | Node::Literal(_)
            | Node::Class { .. }
            | Node::AnyChar
            | Node::Regex(_)
            | Node::DecimalMultiples(_) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::stag::compile;
    use crate::stag::tests::ast_accepts;
    use serde_json::{json, Value};

    /// Checks each (text, accepted) pair on the structural tag with this
    /// format. The expectations are xgrammar 0.2's answers.
    fn check(format: Value, cases: &[(&str, bool)]) {
        let spec = json!({"type": "structural_tag", "format": format});
        let ast = compile(&spec.to_string()).unwrap();
        for (text, ok) in cases {
            assert_eq!(ast_accepts(&ast, text), *ok, "{text:?} on {format}");
        }
    }

    fn c(v: &str) -> Value {
        json!({"type": "const_string", "value": v})
    }

    fn tag(begin: &str, content: Value, end: Value) -> Value {
        json!({"type": "tag", "begin": begin, "content": content, "end": end})
    }

    #[test]
    fn basic_formats() {
        check(c("ab"), &[("ab", true), ("a", false), ("abc", false)]);
        check(
            json!({"type": "regex", "pattern": "a\\d+"}),
            &[("a12", true), ("a", false), ("a٣", false)],
        );
        check(
            json!({"type": "grammar", "grammar": "root ::= \"x\" | \"y\" root"}),
            &[("x", true), ("yyx", true), ("", false)],
        );
        check(
            json!({"type": "json_schema", "json_schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}),
            &[
                ("{\"a\": 1}", true),
                ("{ }", true),
                ("{\"a\":1,\"c\":2}", false),
            ],
        );
        check(
            json!({"type": "sequence", "elements": [c("a"), json!({"type": "or", "elements": [c("b"), c("c")]})]}),
            &[("ab", true), ("ac", true), ("a", false)],
        );
        check(
            json!({"type": "repeat", "min": 1, "max": 2, "content": c("a")}),
            &[("", false), ("a", true), ("aa", true), ("aaa", false)],
        );
        check(
            json!({"type": "star", "content": c("a")}),
            &[("", true), ("aaa", true)],
        );
        check(
            json!({"type": "plus", "content": c("a")}),
            &[("", false), ("aaa", true)],
        );
        check(
            json!({"type": "optional", "content": c("a")}),
            &[("", true), ("aa", false)],
        );
    }

    #[test]
    fn free_text_stops_at_the_innermost_end() {
        let any = json!({"type": "any_text"});
        check(any.clone(), &[("", true), ("a</a>b", true)]);
        check(
            json!({"type": "sequence", "elements": [any, c("END")]}),
            &[("xENDyEND", true), ("END", true)],
        );
        check(
            tag("<a>", any.clone(), json!("</a>")),
            &[
                ("<a>x</a>", true),
                ("<a></a>", true),
                ("<a>x</a>y</a>", false),
                ("<a>x</a", false),
            ],
        );
        check(
            tag("<a>", any.clone(), json!(["</a>", "</b>"])),
            &[("<a>x</b>", true), ("<a>x</b></a>", false)],
        );
        check(
            tag(
                "<a>",
                json!({"type": "sequence", "elements": [any.clone(), c("q")]}),
                json!("</a>"),
            ),
            &[("<a>xq</a>", true), ("<a>x</a>q</a>", false)],
        );
        check(
            tag("<a>", tag("<b>", any.clone(), json!("</b>")), json!("</a>")),
            &[("<a><b>x</a>y</b></a>", true), ("<a><b>x</b>y</a>", false)],
        );
        check(
            tag(
                "<a>",
                json!({"type": "any_text", "excludes": ["z"]}),
                json!("</a>"),
            ),
            &[("<a>x</a>", true), ("<a>z</a>", false)],
        );
        check(
            json!({"type": "any_text", "excludes": ["ab", "b"], "max_chars": 2}),
            &[("a", true), ("cb", false), ("aaa", false)],
        );
    }

    fn triggered(extra: Value) -> Value {
        let mut t = json!({"type": "triggered_tags", "triggers": ["<f"], "tags": [
            tag("<f=a>", json!({"type": "json_schema", "json_schema": {"type": "integer"}}), json!("</f>")),
            tag("<f=b>", json!({"type": "any_text"}), json!("</f>"))]});
        for (k, v) in extra.as_object().unwrap() {
            t[k] = v.clone();
        }
        t
    }

    #[test]
    fn triggered_tags() {
        check(
            triggered(json!({})),
            &[
                ("", true),
                ("hi", true),
                ("hi<f=a>1</f>bye", true),
                ("<f=a>1</f><f=b>x<f</f>", true),
                ("<f", false),
                ("x<fx", false),
                ("<<f=a>1</f>", true),
                ("<f=c>1</f>", false),
            ],
        );
        check(
            triggered(json!({"at_least_one": true})),
            &[
                ("", false),
                ("hi<f=a>1</f>", false),
                ("<f=a>1</f>", true),
                ("<f=a>1</f>x<f=a>2</f>", true),
            ],
        );
        check(
            triggered(json!({"stop_after_first": true})),
            &[("", true), ("hi<f=a>1</f>", true), ("<f=a>1</f>x", false)],
        );
        check(
            triggered(json!({"stop_after_first": true, "at_least_one": true})),
            &[("", false), ("<f=a>1</f>", true), ("<f=a>1</f>x", false)],
        );
        check(
            triggered(json!({"excludes": ["zz"]})),
            &[
                ("zz", false),
                ("<f=a>1</f>zz", false),
                ("z<f=a>1</f>", true),
            ],
        );
        // The trigger is read at its first occurrence.
        check(
            json!({"type": "triggered_tags", "triggers": ["aa"], "tags": [tag("aab", c("x"), json!("e"))]}),
            &[
                ("aabxe", true),
                ("aaabxe", false),
                ("xaabxe", true),
                ("a", true),
                ("aa", false),
            ],
        );
        // Inside a tag, the free text may not contain the tag's end.
        check(
            tag("<a>", triggered(json!({})), json!("</a>")),
            &[
                ("<a>x<f=a>1</f>y</a>", true),
                ("<a>x</a>y</a>", false),
                ("<a></a>", true),
            ],
        );
    }

    #[test]
    fn tags_with_separator() {
        let tws = |extra: Value| {
            let mut t = json!({"type": "tags_with_separator", "separator": ",",
                "tags": [tag("<a>", c("x"), json!("</a>"))]});
            for (k, v) in extra.as_object().unwrap() {
                t[k] = v.clone();
            }
            t
        };
        check(
            tws(json!({})),
            &[
                ("", true),
                ("<a>x</a>", true),
                ("<a>x</a>,<a>x</a>", true),
                ("<a>x</a>,", false),
            ],
        );
        check(
            tws(json!({"at_least_one": true})),
            &[("", false), ("<a>x</a>,<a>x</a>", true)],
        );
        check(
            tws(json!({"stop_after_first": true})),
            &[("", true), ("<a>x</a>", true), ("<a>x</a>,<a>x</a>", false)],
        );
    }

    #[test]
    fn legacy_shape() {
        let spec = json!({"type": "structural_tag", "triggers": ["<f"],
            "structures": [{"begin": "<f=a>", "schema": {"type": "integer"}, "end": "</f>"}]});
        let ast = compile(&spec.to_string()).unwrap();
        for (text, ok) in [
            ("x<f=a>1</f>", true),
            ("", true),
            ("<f=a>1</f>y<f=a>2</f>", true),
            ("<f=a>x</f>", false),
        ] {
            assert_eq!(ast_accepts(&ast, text), ok, "{text:?}");
        }
    }

    #[test]
    fn embedded_errors_are_named() {
        let e = |f: Value| {
            compile(&json!({"type": "structural_tag", "format": f}).to_string())
                .unwrap_err()
                .to_string()
        };
        assert!(e(json!({"type": "grammar", "grammar": "root ::= (\"a\""}))
            .contains("grammar in a structural tag"));
        assert!(e(json!({"type": "regex", "pattern": "("})).contains("does not parse"));
        assert!(
            e(json!({"type": "json_schema", "json_schema": {"type": "wat"}}))
                .contains("json_schema")
        );
    }
}
