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

use super::format::{Delim, Format, Tag, TokenRef, Triggered};
use super::text;
use crate::vocab::Vocab;
use rustc_hash::FxHashMap as HashMap;

/// The start rule of a compiled structural tag.
pub const START: &str = "stag:root";

/// Lowers the top format to a grammar; tokens named by text are looked up
/// in `vocab`.
pub fn lower(top: &Format, vocab: &Vocab) -> Result<GrammarAst> {
    let mut l = Lowering {
        rules: Vec::new(),
        parts: 0,
        vocab,
        by_text: None,
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
        blocks: Vec::new(),
        initial_skip: true,
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

struct Lowering<'v> {
    rules: Vec<RuleDef>,
    /// Rules and imported parts made so far (for fresh names).
    parts: usize,
    vocab: &'v Vocab,
    /// Token ids by their bytes, built when a spec first names a token by text.
    by_text: Option<HashMap<&'v [u8], Vec<u32>>>,
}

impl<'v> Lowering<'v> {
    /// The ids a token reference names: an id of the vocabulary, or every
    /// token (special ones included) whose bytes are the text.
    fn token_ids(&mut self, r: &TokenRef) -> Result<Vec<u32>> {
        match r {
            TokenRef::Id(n) => {
                let id = self
                    .vocab
                    .check_token_id(*n)
                    .ok()
                    .filter(|&id| (id as usize) < self.vocab.num_tokens());
                id.map(|id| vec![id]).ok_or_else(|| {
                    Error::Compile(format!(
                        "token id {n} in a structural tag is not a token of this vocabulary \
                         (ids 0 to {})",
                        self.vocab.num_tokens().saturating_sub(1)
                    ))
                })
            }
            TokenRef::Text(text) => {
                let vocab = self.vocab;
                if self.by_text.is_none() {
                    budget::charge(vocab.num_tokens() as u64 * 8)?;
                    let mut map: HashMap<&'v [u8], Vec<u32>> = HashMap::default();
                    for id in 0..vocab.num_tokens() as u32 {
                        if let Some(b) = vocab.token_bytes(id) {
                            map.entry(b).or_default().push(id);
                        }
                    }
                    self.by_text = Some(map);
                }
                let ids = self.by_text.as_ref().and_then(|m| m.get(text.as_bytes()));
                ids.cloned().ok_or_else(|| {
                    Error::Compile(format!(
                        "the structural tag names the token {text:?}, which is not in the vocabulary"
                    ))
                })
            }
        }
    }

    /// A token terminal: one of these tokens, or (negated) any token but them.
    fn tokens(&mut self, refs: &[TokenRef], negated: bool) -> Result<Node> {
        let mut ids = Vec::new();
        for r in refs {
            ids.extend(self.token_ids(r)?);
        }
        budget::charge(ids.len() as u64)?;
        Ok(Node::tokens(ids.into_iter().map(|i| (i, i)), negated))
    }

    /// Any number of whole tokens, none of these.
    fn free_tokens(&mut self, not: &[TokenRef]) -> Result<Node> {
        let one = self.tokens(not, true)?;
        Ok(self.define(Node::repeat(one, 0, None)))
    }

    /// One of the tags, as one rule.
    fn one_tag(&mut self, tags: &[Tag]) -> Result<Node> {
        let mut alts = Vec::with_capacity(tags.len());
        for tag in tags {
            alts.push(self.tag(tag)?);
        }
        Ok(self.define(Node::alt(alts)))
    }

    /// One or more of `tags` with `separator` between them, as two rules
    /// that read every tag alike, `L -> P begin_t body_t` (one alternative
    /// per tag) and `P -> ε | L sep`. After a tag's begin the set holds that
    /// one item, whose origin is `L`'s (left recursion keeps it where the
    /// loop started), and its predictions: the same set for the first tag
    /// and every later one, so the tag's states are named alike
    /// (`cfg::setnames`). As `tag (sep tag)*`, the first tag had states of
    /// its own, which a request whose first call was a tool the warm-up's
    /// sample called later met cold.
    fn separated(&mut self, tags: &[Tag], separator: &str) -> Result<Node> {
        let (loop_name, before_name) = (self.fresh_name(), self.fresh_name());
        let before = || Node::Ref(before_name.clone(), Pos::default());
        let mut alts = Vec::with_capacity(tags.len());
        for tag in tags {
            let begin = self.delim(&tag.begin)?;
            alts.push(Node::seq(vec![before(), begin, self.tag_body(tag)?]));
        }
        let me = Node::Ref(loop_name.clone(), Pos::default());
        let after = Node::seq(vec![me.clone(), literal(separator)]);
        self.rules.push(rule(loop_name, Node::Alt(alts)));
        self.rules.push(rule(
            before_name.clone(),
            Node::alt(vec![Node::Empty, after]),
        ));
        Ok(me)
    }

    fn delim(&mut self, d: &Delim) -> Result<Node> {
        match d {
            Delim::Text(s) => Ok(literal(s)),
            Delim::Token(r) => self.tokens(std::slice::from_ref(r), false),
        }
    }

    /// The formats' shared shape of triggered tags: `free` stuff with one of
    /// `steps` (a tag with its free prefix) repeated, or the `whole` tags
    /// alone first (see the module table).
    fn triggered_shape(
        &mut self,
        free: Node,
        steps: Vec<Node>,
        whole: Node,
        at_least_one: bool,
        stop_after_first: bool,
    ) -> Node {
        let body = match (at_least_one, stop_after_first) {
            (false, false) => Node::seq(vec![self.left_loop(steps), free]),
            (true, false) => Node::seq(vec![whole, self.left_loop(steps), free]),
            (false, true) => Node::alt(std::iter::once(free).chain(steps).collect()),
            (true, true) => whole,
        };
        self.define(body)
    }

    /// Any number of `steps` as one left-recursive rule, `L -> ε | L step_i`.
    /// Each step's items then have the loop's own origin whatever came
    /// before, so a tag's parser states are the same as the text's first
    /// tag as after other tags: a set's name follows what is open below it
    /// (`cfg::setnames`), and a step behind a rule of its own would name
    /// the set where that rule was predicted, the text's start for the
    /// first tag only. Equal names share fill memo rows and lexer entries.
    fn left_loop(&mut self, steps: Vec<Node>) -> Node {
        let name = self.fresh_name();
        let me = || Node::Ref(name.clone(), Pos::default());
        let alts = std::iter::once(Node::Empty)
            .chain(steps.into_iter().map(|step| Node::seq(vec![me(), step])))
            .collect();
        self.rules.push(rule(name.clone(), Node::Alt(alts)));
        me()
    }

    /// A rule name no other part has.
    fn fresh_name(&mut self) -> String {
        self.parts += 1;
        format!("stag:{}", self.parts)
    }

    /// A new rule with this body; a reference to it.
    fn define(&mut self, body: Node) -> Node {
        let name = self.fresh_name();
        self.rules.push(rule(name.clone(), body));
        Node::Ref(name, Pos::default())
    }

    /// The node for `f`, inside a tag with these ends (none at the top).
    /// Recursion follows the format tree, at most `MAX_FORMAT_DEPTH` deep.
    fn format(&mut self, f: &Format, ends: &[String]) -> Result<Node> {
        budget::charge(64)?;
        Ok(match f {
            Format::ConstString(s) => literal(s),
            Format::JsonSchema {
                schema: text,
                max_whitespace,
            } => {
                let opts = SchemaOptions {
                    max_whitespace: *max_whitespace,
                    // xgrammar's structural tags refuse members the schema
                    // does not list, unless additionalProperties allows them.
                    strict_properties: true,
                    // Members in `properties` order, as xgrammar generates them.
                    key_order: schema::KeyOrder::Schema,
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
            Format::Token(refs) => self.tokens(refs, false)?,
            Format::ExcludeToken(refs) => self.tokens(refs, true)?,
            Format::AnyTokens {
                excludes,
                max_tokens,
            } => {
                let one = self.tokens(excludes, true)?;
                self.define(Node::repeat(one, 0, *max_tokens))
            }
            Format::TokenTriggeredTags {
                triggers,
                tags,
                excludes,
                at_least_one,
                stop_after_first,
            } => {
                let whole = self.one_tag(tags)?;
                let mut not_free = triggers.clone();
                not_free.extend(excludes.iter().cloned());
                let free = self.free_tokens(&not_free)?;
                let step = Node::seq(vec![free.clone(), whole.clone()]);
                self.triggered_shape(free, vec![step], whole, *at_least_one, *stop_after_first)
            }
            Format::TokenDispatch {
                rules,
                repeat,
                excludes,
            } => {
                let mut alts = Vec::with_capacity(rules.len());
                let mut not_free = excludes.clone();
                for (token, format) in rules {
                    not_free.push(token.clone());
                    let token = self.tokens(std::slice::from_ref(token), false)?;
                    let format = self.format(format, ends)?;
                    alts.push(Node::seq(vec![token, format]));
                }
                let free = self.free_tokens(&not_free)?;
                let dispatch = self.define(Node::alt(alts));
                let body = if *repeat {
                    let step = Node::seq(vec![free.clone(), dispatch]);
                    Node::seq(vec![Node::repeat(step, 0, None), free])
                } else {
                    Node::seq(vec![free, Node::repeat(dispatch, 0, Some(1))])
                };
                self.define(body)
            }
            Format::TriggeredTags(t) => self.triggered(t, ends)?,
            Format::TagsWithSeparator {
                tags,
                separator,
                at_least_one,
                stop_after_first,
            } => {
                let body = if *stop_after_first {
                    self.one_tag(tags)?
                } else {
                    self.separated(tags, separator)?
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
        let begin = self.delim(&tag.begin)?;
        let body = self.tag_body(tag)?;
        Ok(self.define(Node::seq(vec![begin, body])))
    }

    /// A tag's content and end, as one rule.
    fn tag_body(&mut self, tag: &Tag) -> Result<Node> {
        let ends = text::union(&[&tag.text_ends()]);
        let node = match &*tag.content {
            // Free text up to the first end, as one lexeme (an empty end
            // would end it anywhere, a token end is no text: then the
            // content is free text before the ends).
            Format::AnyText {
                excludes,
                max_chars: None,
            } if ends.len() == tag.ends.len() => {
                text::up_to_first(&ends, &text::union(&[&ends, excludes]))
            }
            content => {
                let content = self.format(content, &ends)?;
                let mut alts = Vec::with_capacity(tag.ends.len());
                for end in &tag.ends {
                    alts.push(self.delim(end)?);
                }
                Node::seq(vec![content, Node::alt(alts)])
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
                .map(|(tag, body)| Node::seq(vec![literal(tag.begin_text()), body.clone()]))
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
                .filter(|(tag, _)| tag.begin_text().starts_with(trigger.as_str()))
                .map(|(tag, body)| {
                    Node::seq(vec![
                        literal(&tag.begin_text()[trigger.len()..]),
                        body.clone(),
                    ])
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
        let free = text::without(&stops);
        Ok(self.triggered_shape(free, by_trigger, whole, t.at_least_one, t.stop_after_first))
    }

    /// Adds an embedded grammar's rules under fresh names; a reference to
    /// its start rule.
    fn import(&mut self, ast: GrammarAst) -> Result<Node> {
        self.parts += 1;
        let (rules, start) = ast.into_prefixed_rules(&format!("s{}:", self.parts))?;
        self.rules.extend(rules);
        Ok(Node::Ref(start, Pos::default()))
    }
}

#[cfg(test)]
mod tests {
    use crate::stag::compile;
    use crate::stag::tests::{ast_accepts, vocab};
    use serde_json::{json, Value};

    /// Checks each (text, accepted) pair on the structural tag with this
    /// format. The expectations are xgrammar 0.2's answers.
    fn check(format: Value, cases: &[(&str, bool)]) {
        let spec = json!({"type": "structural_tag", "format": format});
        let ast = compile(&spec.to_string(), &vocab()).unwrap();
        for (text, ok) in cases {
            assert_eq!(ast_accepts(&ast, text), *ok, "{text:?} on {format}");
        }
    }

    fn c(v: &str) -> Value {
        json!({"type": "const_string", "value": v})
    }

    /// The parser state's position-free name after `text`.
    fn state_key(ast: &crate::cfg::ast::GrammarAst, text: &str) -> Box<[u32]> {
        let cfg = crate::cfg::lower::lower(ast).unwrap();
        let mut chart = crate::cfg::earley::Chart::new();
        let mut st = cfg.initial(&mut chart).unwrap();
        st = cfg
            .advance_bytes(&mut chart, &st, text.as_bytes())
            .unwrap()
            .unwrap();
        cfg.names.state_key(&chart, &st).unwrap()
    }

    /// Tags `<f=a>` and `<f=b>`, each with a JSON object of one member `x`
    /// (an integer, a string), ending at `</f>`.
    fn two_json_tags() -> Value {
        let json = |t: &str| {
            json!({"type": "json_schema", "json_schema":
                {"type": "object", "properties": {"x": {"type": t}}}})
        };
        json!([
            tag("<f=a>", json("integer"), json!("</f>")),
            tag("<f=b>", json("string"), json!("</f>"))
        ])
    }

    #[test]
    fn a_tag_has_the_same_states_first_or_after_other_tags() {
        // Otherwise a request whose first call is the second tool meets all
        // of that tool's states cold, whatever the grammar met before.
        let tags = two_json_tags();
        for flags in [json!({}), json!({"at_least_one": true})] {
            let mut format = json!({"type": "triggered_tags", "triggers": ["<f="], "tags": tags});
            format
                .as_object_mut()
                .unwrap()
                .extend(flags.as_object().unwrap().clone());
            let spec = json!({"type": "structural_tag", "format": format});
            let ast = compile(&spec.to_string(), &vocab()).unwrap();
            let later = state_key(&ast, "<f=a>{\"x\": 1}</f> and <f=b>{\"x\": \"ab");
            let again = state_key(&ast, "<f=a>{\"x\": 1}</f><f=a>{}</f><f=b>{\"x\": \"ab");
            assert_eq!(later, again, "{format}");
            if flags.as_object().unwrap().is_empty() {
                let first = state_key(&ast, "<f=b>{\"x\": \"ab");
                let after_text = state_key(&ast, "some text <f=b>{\"x\": \"ab");
                assert_eq!(first, later);
                assert_eq!(after_text, later);
            }
        }
    }

    #[test]
    fn tags_with_separator_read_every_tag_from_the_same_states() {
        let tags = two_json_tags();
        for at_least_one in [false, true] {
            let format = json!({"type": "tags_with_separator", "separator": "\n",
                "tags": tags, "at_least_one": at_least_one});
            let spec = json!({"type": "structural_tag", "format": format});
            let ast = compile(&spec.to_string(), &vocab()).unwrap();
            let first = state_key(&ast, "<f=b>{\"x\": \"ab");
            let second = state_key(&ast, "<f=a>{\"x\": 1}</f>\n<f=b>{\"x\": \"ab");
            let third = state_key(&ast, "<f=a>{}</f>\n<f=b>{}</f>\n<f=b>{\"x\": \"ab");
            assert_eq!(first, second, "{format}");
            assert_eq!(first, third, "{format}");
        }
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
        let ast = compile(&spec.to_string(), &vocab()).unwrap();
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
            compile(
                &json!({"type": "structural_tag", "format": f}).to_string(),
                &vocab(),
            )
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

    /// Whether the token sequence (ids of `stag::tests::vocab`, `<eos>`
    /// included to end) is accepted, through a compiled grammar's matcher.
    fn tokens_accepted(format: &Value, ids: &[u32]) -> bool {
        let spec = json!({"type": "structural_tag", "format": format});
        let v = vocab();
        let ast = compile(&spec.to_string(), &v).unwrap();
        let g = crate::grammar::CompiledGrammar::from_ast(v, &ast, "structural_tag", "").unwrap();
        let mut m = crate::matcher::MatcherCore::new(std::sync::Arc::new(g));
        ids.iter().all(|&t| m.consume_token(t).unwrap())
    }

    const CALL: u32 = 256;
    const END: u32 = 257;
    const EOS: u32 = 258;

    fn b(s: &str) -> Vec<u32> {
        s.bytes().map(u32::from).collect()
    }

    fn ids(parts: &[&[u32]]) -> Vec<u32> {
        parts.concat()
    }

    #[test]
    fn token_formats() {
        let call = json!({"type": "token", "token": "<|call|>"});
        assert!(tokens_accepted(&call, &[CALL, EOS]));
        assert!(!tokens_accepted(&call, &b("<|call|>")));
        let ex = json!({"type": "exclude_token", "exclude_tokens": [256, "a"]});
        assert!(tokens_accepted(&ex, &[END, EOS]));
        assert!(tokens_accepted(&ex, &ids(&[&b("b"), &[EOS]])));
        assert!(!tokens_accepted(&ex, &[CALL]));
        assert!(!tokens_accepted(&ex, &b("a")));
        assert!(!tokens_accepted(&ex, &[EOS]));
        let any = json!({"type": "any_tokens", "exclude_tokens": [257], "max_tokens": 2});
        assert!(tokens_accepted(&any, &[EOS]));
        assert!(tokens_accepted(&any, &[CALL, 120, EOS]));
        assert!(!tokens_accepted(&any, &[CALL, 120, 121]));
        assert!(!tokens_accepted(&any, &[END]));
        // A tag between tokens.
        let t = tag(
            "",
            json!({"type": "any_text"}),
            json!({"type": "token", "token": 257}),
        );
        let mut t = t;
        t["begin"] = call.clone();
        assert!(tokens_accepted(
            &t,
            &ids(&[&[CALL], &b("x</a>"), &[END, EOS]])
        ));
        assert!(!tokens_accepted(&t, &ids(&[&b("x"), &[END]])));
    }

    #[test]
    fn token_triggered_tags_and_dispatch() {
        let mut inner = tag(
            "",
            json!({"type": "json_schema", "json_schema": {"type": "integer"}}),
            json!({"type": "token", "token": 257}),
        );
        inner["begin"] = json!({"type": "token", "token": 256});
        let ttt = |extra: Value| {
            let mut t = json!({"type": "token_triggered_tags", "trigger_tokens": [256], "tags": [inner.clone()]});
            for (k, v) in extra.as_object().unwrap() {
                t[k] = v.clone();
            }
            t
        };
        let one = ids(&[&[CALL], &b("12"), &[END]]);
        assert!(tokens_accepted(
            &ttt(json!({})),
            &ids(&[&b("hi"), &one, &b("x"), &one, &[EOS]])
        ));
        assert!(tokens_accepted(&ttt(json!({})), &[EOS]));
        assert!(!tokens_accepted(&ttt(json!({})), &ids(&[&[CALL], &b("x")])));
        assert!(!tokens_accepted(
            &ttt(json!({"at_least_one": true})),
            &ids(&[&b("h"), &one])
        ));
        assert!(tokens_accepted(
            &ttt(json!({"at_least_one": true})),
            &ids(&[&one, &b("h"), &[EOS]])
        ));
        assert!(!tokens_accepted(
            &ttt(json!({"stop_after_first": true})),
            &ids(&[&one, &b("h")])
        ));
        assert!(!tokens_accepted(
            &ttt(json!({"exclude_tokens": ["q"]})),
            &b("q")
        ));
        let dispatch = |repeat: bool| {
            json!({"type": "token_dispatch", "loop": repeat,
            "rules": [[256, {"type": "const_string", "value": "()"}]], "exclude_tokens": [257]})
        };
        let call = ids(&[&[CALL], &b("()")]);
        assert!(tokens_accepted(
            &dispatch(true),
            &ids(&[&b("a"), &call, &b("b"), &call, &[EOS]])
        ));
        assert!(!tokens_accepted(&dispatch(true), &ids(&[&[CALL], &b("x")])));
        assert!(!tokens_accepted(&dispatch(true), &[END]));
        assert!(tokens_accepted(
            &dispatch(false),
            &ids(&[&b("a"), &call, &[EOS]])
        ));
        assert!(!tokens_accepted(&dispatch(false), &ids(&[&call, &b("b")])));
    }

    #[test]
    fn unknown_tokens_are_named() {
        let e = |f: Value| {
            compile(
                &json!({"type": "structural_tag", "format": f}).to_string(),
                &vocab(),
            )
            .unwrap_err()
            .to_string()
        };
        assert!(e(json!({"type": "token", "token": 9999})).contains("token id 9999"));
        assert!(e(json!({"type": "token", "token": -1})).contains("token id -1"));
        assert!(e(json!({"type": "token", "token": "<|nope|>"})).contains("not in the vocabulary"));
    }
}
