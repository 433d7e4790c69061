//! JSON Schema front end: a schema compiles to the grammar AST the CFG
//! engine runs, exactly or not at all. A keyword maskpar cannot compile
//! exactly is refused with an error naming it and its JSON pointer; nothing
//! is loosened or tightened silently. The grammar generates the text
//! `json.dumps(value, ensure_ascii=False)` writes (with flexible whitespace
//! by default), for exactly the values the schema validates.
//!
//! How the compiler is laid out. `compile` walks the document from its root
//! with one `Compiler`. `rule_for` gives each schema one grammar rule,
//! memoized by its JSON pointer, so a `$ref` cycle becomes a recursive rule
//! and the recursion the compiler itself does is bounded (`MAX_SCHEMA_DEPTH`).
//! `value` compiles one schema: it refuses unsupported keywords, rewrites
//! negations (`negations`), hands `$ref` (`refs`), `anyOf`/`oneOf`/`allOf`
//! (`combinators`, `merge`) and `enum`/`const` (`literals`) to their parts,
//! and otherwise takes the union over the JSON types the schema allows of
//! `typed`, which dispatches to `scalars` (strings, numbers), `arrays` and
//! `objects` (with `keys` for the keys `properties` does not list). `layout`
//! writes the text between tokens; `keywords` says what each keyword is
//! (constraint, annotation, unsupported) and holds the internal keywords
//! that derived schemas use. Beside the compiler: `merge` (intersections on
//! the schema JSON), `negate` (complements on the schema JSON), `check`
//! (does a given value satisfy a schema), and the regex builders `strings`,
//! `numbers`, `decimals` and `time_dfa`.

mod arrays;
mod check;
mod combinators;
mod cost;
pub(crate) mod decimals;
mod keys;
mod keywords;
mod layout;
mod literals;
mod merge;
mod negate;
mod negations;
mod numbers;
mod objects;
mod ordered;
mod ordered_deps;
mod records;
mod refs;
mod scalars;
pub mod strings;
mod time_dfa;

/// Full-match regexes for the unit tests, run with maskpar's own DFA.
#[cfg(test)]
mod test_regex {
    use crate::regex_dfa::{ByteDfa, DEAD};

    pub struct Regex(ByteDfa);

    impl Regex {
        /// `pattern` may be written `^...$`; matching is always whole-text.
        pub fn new(pattern: &str) -> Result<Self, crate::Error> {
            ByteDfa::new(pattern.trim_start_matches('^').trim_end_matches('$')).map(Regex)
        }

        pub fn is_match(&self, text: &str) -> bool {
            let q = self.0.step_bytes(self.0.start(), text.as_bytes());
            q != DEAD && self.0.is_accepting(q)
        }
    }
}

use crate::cfg::ast::{GrammarAst, Lexing, Node, Pos, RuleDef};
use crate::error::{Error, Result};
use keywords::{is_constraint, type_names, TYPES, UNSUPPORTED};
pub use keywords::{MORE_PATTERNS, NON_INTEGER, NOT_MULTIPLE_OF, SOME_ITEM, SOME_MEMBER};
pub use layout::MAX_WHITESPACE_LIMIT;
use refs::{declares, has_nested_id};
use rustc_hash::FxHashMap as HashMap;
use serde_json::{Map, Value};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Whitespace {
    /// Any JSON whitespace between tokens (what json.dumps writes with or
    /// without indent and with any separators).
    Flexible,
    /// None at all: `{"a":1,"b":[2,3]}`.
    Compact,
}

/// The order of an object's members.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyOrder {
    /// Any order, each listed member at most once.
    Any,
    /// `properties` order (optional ones may be left out), then names only
    /// `required` lists, then unlisted members in any order: what xgrammar,
    /// llguidance and OpenAI's strict mode generate.
    Schema,
}

#[derive(Clone, Debug)]
pub struct SchemaOptions {
    pub whitespace: Whitespace,
    /// Exact separators `(item, key)` as json.dumps takes them, e.g.
    /// `(", ", ": ")`; overrides `whitespace`.
    pub separators: Option<(String, String)>,
    /// The layout `json.dumps(indent=...)` writes, with this text per
    /// nesting level (separators default to `(",", ": ")`); overrides
    /// `whitespace`. Containers nest at most `MAX_INDENT_DEPTH` deep.
    pub indent: Option<String>,
    /// Properties not listed are refused unless `additionalProperties` allows them.
    pub strict_properties: bool,
    /// Known `format`s constrain strings; false: every format is an annotation.
    pub assert_formats: bool,
    pub key_order: KeyOrder,
    /// Flexible whitespace: at most this many characters in a row.
    pub max_whitespace: Option<u32>,
    /// Flexible whitespace: each run between two tokens matches this regex
    /// (checked to match only JSON whitespace, see `layout`).
    pub whitespace_pattern: Option<String>,
}

impl Default for SchemaOptions {
    fn default() -> Self {
        SchemaOptions {
            whitespace: Whitespace::Flexible,
            separators: None,
            indent: None,
            strict_properties: false,
            assert_formats: true,
            key_order: KeyOrder::Any,
            max_whitespace: None,
            whitespace_pattern: None,
        }
    }
}

/// Compiles `schema` (JSON text) to a grammar whose start rule is `root`.
pub fn compile(schema: &str, opts: &SchemaOptions) -> Result<GrammarAst> {
    layout::check_whitespace(opts)?;
    let root: Value = serde_json::from_str(schema)
        .map_err(|e| Error::Compile(format!("the schema is not valid JSON: {e}")))?;
    let arena = typed_arena::Arena::new();
    let mut c = Compiler {
        root: &root,
        arena: &arena,
        legacy_draft: declares(&root, &["draft-03", "draft-04", "draft-06", "draft-07"]),
        before_draft6: declares(&root, &["draft-03", "draft-04"]),
        before_draft7: declares(&root, &["draft-03", "draft-04", "draft-06"]),
        single_resource: !has_nested_id(&root, true),
        opts,
        rules: Vec::new(),
        by_pointer: HashMap::default(),
        any: HashMap::default(),
        never: false,
        depth: 0,
        nest: 0,
        derived: 0,
    };
    if let Some(meta) = root.get("$schema").and_then(Value::as_str) {
        // A custom metaschema may leave out vocabularies (validation,
        // format...), which changes what keywords mean.
        if !meta.contains("json-schema.org") {
            return refuse(
                "/$schema",
                format!("custom metaschemas are not supported: {meta}"),
            );
        }
    }
    let top = c.rule_for("", &root)?;
    c.rules.push(rule("root", Node::Ref(top, Pos::default())));
    if c.never && !crate::cfg::lower::derives_a_string(&c.rules, "root") {
        return refuse("", "no value satisfies the schema");
    }
    Ok(GrammarAst {
        rules: c.rules,
        terminals: Vec::new(),
        ignore: Vec::new(),
        start: "root".into(),
        lexing: Lexing::AllSplits,
        indenter: None,
        blocks: Vec::new(),
        initial_skip: true,
    })
}

fn rule(name: &str, body: Node) -> RuleDef {
    RuleDef {
        name: name.into(),
        body,
        pos: Pos::default(),
    }
}

fn refuse<T>(ptr: &str, msg: impl std::fmt::Display) -> Result<T> {
    let at = if ptr.is_empty() { "#" } else { ptr };
    Err(Error::Compile(format!("schema at {at}: {msg}")))
}

fn lit(s: &str) -> Node {
    Node::Literal(s.into())
}

fn re(s: &str) -> Node {
    Node::Regex(s.into())
}

/// Escapes a key for a JSON pointer.
fn pointer_part(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

struct Compiler<'a> {
    root: &'a Value,
    /// Schemas made by merging (they live as long as the document).
    arena: &'a typed_arena::Arena<Value>,
    /// Drafts 4 to 7: keywords next to `$ref` are ignored, and `dependencies`
    /// is a keyword (later drafts split it into `dependentRequired` and
    /// `dependentSchemas`, and read `dependencies` as an annotation).
    legacy_draft: bool,
    /// Drafts 3-4: `1.0` is not an integer.
    before_draft6: bool,
    /// Drafts 3-6: `if`/`then`/`else` are not keywords (annotations).
    before_draft7: bool,
    /// No `$id` below the root: a `$ref` resolves the same from anywhere,
    /// which merged schemas (copied out of their place) rely on.
    single_resource: bool,
    opts: &'a SchemaOptions,
    rules: Vec<RuleDef>,
    by_pointer: HashMap<String, String>,
    /// The any-value rule per nesting level (indented layout; else level 0).
    any: HashMap<usize, String>,
    never: bool,
    /// Schemas being compiled, one inside another (bounds the recursion).
    depth: usize,
    /// How many containers enclose the value being compiled: the indented
    /// layout writes each level differently, so rules are per level there.
    nest: usize,
    /// Schemas made by merges and rewrites so far (bounds their products:
    /// each rewritten `if` doubles the branches of what it is merged with).
    derived: usize,
}

impl<'a> Compiler<'a> {
    /// The rule for the schema at `ptr` (memoized, so `$ref` cycles recurse).
    fn rule_for(&mut self, ptr: &str, schema: &'a Value) -> Result<String> {
        self.rule_keyed(ptr.to_string(), ptr, schema)
    }

    /// The rule for `schema` (at `ptr`), memoized under `key`.
    fn rule_keyed(&mut self, key: String, ptr: &str, schema: &'a Value) -> Result<String> {
        let key = match self.opts.indent {
            Some(_) => format!("{key}@{}", self.nest),
            None => key,
        };
        cost::charge_text(key.len())?;
        if let Some(name) = self.by_pointer.get(&key) {
            return Ok(name.clone());
        }
        if self.too_deep() {
            self.never();
            return Ok(NEVER.to_string());
        }
        // The indented layout compiles a recursive schema once per level.
        let bound = match self.opts.indent {
            Some(_) => MAX_SCHEMA_DEPTH + MAX_INDENT_DEPTH * RULES_PER_INDENT_LEVEL,
            None => MAX_SCHEMA_DEPTH,
        };
        if self.depth >= bound {
            return refuse(ptr, format!("the schema nests deeper than {bound} levels"));
        }
        crate::budget::charge(SCHEMA_RULE_STEPS)?;
        let name = format!("s{}", self.by_pointer.len());
        self.by_pointer.insert(key, name.clone());
        self.depth += 1;
        let body = self.value(schema, ptr);
        self.depth -= 1;
        self.rules.push(rule(&name, body?));
        Ok(name)
    }

    /// Counts a schema made by a merge or a rewrite, refusing past the bound.
    fn derive(&mut self, ptr: &str) -> Result<()> {
        crate::budget::charge(SCHEMA_RULE_STEPS)?;
        self.derived += 1;
        if self.derived > MAX_DERIVED {
            return refuse(
                ptr,
                format!(
                    "merging and rewriting this schema makes more than {MAX_DERIVED} schemas \
                     (a product of `if`s, `not`s or `anyOf`s)"
                ),
            );
        }
        Ok(())
    }

    /// Any JSON value.
    fn any(&mut self) -> Node {
        let level = if self.opts.indent.is_some() {
            self.nest
        } else {
            0
        };
        if let Some(a) = self.any.get(&level) {
            return Node::Ref(a.clone(), Pos::default());
        }
        if self.too_deep() {
            return self.never();
        }
        let name = match level {
            0 => "any_value".to_string(),
            l => format!("any_value_{l}"),
        };
        self.any.insert(level, name.clone());
        let (object, array) = self
            .nested(|c| {
                let item = c.any();
                let member = Node::seq(vec![c.string_node(None), c.key_sep(), item.clone()]);
                let items = |first: Node| {
                    let more = Node::seq(vec![c.item_sep(), first.clone()]);
                    Node::seq(vec![first, Node::repeat(more, 0, None)])
                };
                Ok((
                    c.container("{", items(member), true, "}"),
                    c.container("[", items(item), true, "]"),
                ))
            })
            .expect("the any-value rule compiles");
        let body = Node::Alt(vec![
            lit("null"),
            lit("true"),
            lit("false"),
            re(NUMBER),
            self.string_node(None),
            object,
            array,
        ]);
        self.rules.push(rule(&name, body));
        Node::Ref(name, Pos::default())
    }

    /// The empty language: for subschemas no value satisfies. The rule
    /// derives nothing, so lowering prunes every alternative that uses it
    /// (an optional property, an anyOf branch) and only a required use
    /// makes its parent unsatisfiable in turn.
    fn never(&mut self) -> Node {
        if !self.never {
            self.never = true;
            self.rules
                .push(rule(NEVER, Node::Ref(NEVER.into(), Pos::default())));
        }
        Node::Ref(NEVER.into(), Pos::default())
    }

    /// A string whose encoded contents match `content` (None: any string).
    fn string_node(&self, content: Option<Node>) -> Node {
        let inner = content.unwrap_or_else(|| Node::repeat(re(strings::ANY_CHAR), 0, None));
        Node::seq(vec![lit("\""), inner, lit("\"")])
    }

    /// The grammar of `schema`, found at JSON pointer `ptr`.
    fn value(&mut self, schema: &'a Value, ptr: &str) -> Result<Node> {
        let obj = match schema {
            Value::Bool(true) => return Ok(self.any()),
            Value::Bool(false) => return Ok(self.never()),
            Value::Object(o) => o,
            _ => return refuse(ptr, "a schema must be an object or a boolean"),
        };
        for k in UNSUPPORTED {
            if obj.contains_key(*k) {
                return refuse(
                    &format!("{ptr}/{k}"),
                    format!("the keyword `{k}` is not supported yet"),
                );
            }
        }
        if obj.get("uniqueItems") == Some(&Value::Bool(true)) {
            return refuse(
                &format!("{ptr}/uniqueItems"),
                "`uniqueItems: true` is not supported yet",
            );
        }
        // `not` (but for the leaves the typed compilers apply) and `if`:
        // rewritten with negations next to the rest, then compiled.
        if let Some(rewritten) = self.rewrite_negations(obj, ptr)? {
            self.derive(ptr)?;
            let v: &'a Value = self.arena.alloc(rewritten);
            let key = content_key("(rewritten)", v);
            let name = self.rule_keyed(key, &format!("{ptr}/(not)"), v)?;
            return Ok(Node::Ref(name, Pos::default()));
        }
        let combinators = ["$ref", "anyOf", "oneOf", "allOf", "enum", "const"];
        let present: Vec<&str> = combinators
            .iter()
            .copied()
            .filter(|k| obj.contains_key(*k))
            .collect();
        if let Some(&k) = present.first() {
            let others: Vec<&String> = obj.keys().filter(|x| *x != k && is_constraint(x)).collect();
            if k == "$ref" && self.legacy_draft {
                return self.reference(obj["$ref"].as_str(), ptr);
            }
            if matches!(k, "enum" | "const") && present.len() == 1 {
                return self.enumeration(schema, obj, ptr);
            }
            if others.is_empty() && k != "allOf" {
                return match k {
                    "$ref" => self.reference(obj["$ref"].as_str(), ptr),
                    _ => self.union(obj, k, ptr),
                };
            }
            // An intersection: merged on the schema JSON, then compiled.
            if !self.single_resource {
                return refuse(
                    ptr,
                    format!("`{k}` with other keywords in a document with nested `$id`s is not supported yet"),
                );
            }
            self.derive(ptr)?;
            let merged = {
                let resolve = |target: &Value, at: &str| -> Result<Value> {
                    cost::cloned(self.resolve(target.as_str(), at)?.1)
                };
                let mut m = merge::Merger {
                    resolve: &resolve,
                    ignore_ref_siblings: self.legacy_draft,
                    conditionals: !self.before_draft7,
                    own_keywords_last: self.opts.key_order == KeyOrder::Schema,
                    work: 0,
                };
                m.merge(vec![cost::cloned(schema)?], ptr, 0)?
            };
            // Memoized by content: a recursive schema merged into itself
            // (`Foo.kids: allOf[Foo, Bar]`) meets the same merge again below,
            // and one schema resource resolves equal content the same anywhere.
            if &merged == schema {
                // Compiling it would merge it again: a rule deriving itself.
                return refuse(ptr, "merging this schema makes no progress");
            }
            let key = content_key("(merged)", &merged);
            let merged: &'a Value = self.arena.alloc(merged);
            let name = self.rule_keyed(key, &format!("{ptr}/(merged)"), merged)?;
            return Ok(Node::Ref(name, Pos::default()));
        }
        let types = self.types(obj, ptr)?;
        let excluded = self.excluded(obj, ptr)?;
        let mut alts = Vec::new();
        for t in TYPES {
            if !types.contains(&t) || (t == "integer" && types.contains(&"number")) {
                continue;
            }
            if let Some(n) = self.typed(t, obj, ptr)? {
                alts.extend(self.without(t, n, excluded.as_ref(), ptr)?);
            }
        }
        if alts.is_empty() {
            return Ok(self.never());
        }
        Ok(Node::alt(alts))
    }

    fn types(&self, obj: &Map<String, Value>, ptr: &str) -> Result<Vec<&'static str>> {
        let named = |v: &Value| -> Result<&'static str> {
            let s = v.as_str().unwrap_or("");
            TYPES.iter().copied().find(|t| *t == s).map_or_else(
                || refuse(&format!("{ptr}/type"), format!("unknown type {v}")),
                Ok,
            )
        };
        match obj.get("type") {
            None => Ok(TYPES.to_vec()),
            Some(v) => match type_names(v) {
                Some(names) => names.into_iter().map(|n| named(&Value::from(n))).collect(),
                None => refuse(
                    &format!("{ptr}/type"),
                    "`type` must be a string or an array of strings",
                ),
            },
        }
    }

    /// The values of JSON type `t` that `obj` validates (None: none do).
    fn typed(&mut self, t: &str, obj: &'a Map<String, Value>, ptr: &str) -> Result<Option<Node>> {
        Ok(match t {
            "null" => Some(lit("null")),
            "boolean" => Some(Node::Alt(vec![lit("true"), lit("false")])),
            "string" => self.string(obj, ptr)?,
            "number" => self.number(obj, ptr)?,
            "integer" => self.integer(obj, ptr)?,
            "array" => self.nested(|c| c.array(obj, ptr))?,
            "object" => self.nested(|c| c.object(obj, ptr))?,
            _ => unreachable!("checked type name"),
        })
    }
}

/// A JSON number's exact decimal text (no exponent).
pub(crate) fn decimal_text(n: &serde_json::Number) -> String {
    match n.as_f64() {
        _ if n.is_i64() || n.is_u64() => n.to_string(),
        // Display never uses an exponent and keeps the shortest digits that
        // read back as this float.
        Some(f) => format!("{f}"),
        None => n.to_string(),
    }
}

/// Bound on schemas compiled one inside another (the stack is finite).
const MAX_SCHEMA_DEPTH: usize = 100;
/// The indented layout's rules are per nesting level (indentation depends
/// on it, which no context-free grammar tracks unboundedly): containers
/// nest at most this deep (deeper values are not generated; `const` and
/// `enum` values are written out whole).
pub const MAX_INDENT_DEPTH: usize = 32;
/// Schemas compiled one inside another per nesting level that the
/// indented layout allows for (`$ref`s, combinators and merges between
/// two containers). About 2.5 KiB of stack each.
const RULES_PER_INDENT_LEVEL: usize = 8;
/// Bound on the schemas merges and rewrites make in one document.
const MAX_DERIVED: usize = 2000;

/// The rule that derives no string.
const NEVER: &str = "no_value";

/// A JSON number (what json.dumps writes for ints and finite floats).
const NUMBER: &str = "-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?(?:[eE][+-]?[0-9]+)?";
/// JSON numbers without an exponent.
const PLAIN_NUMBER: &str = "-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?";

/// Compile budget steps per schema compiled to a rule or derived by a merge
/// (a rough cost of walking and lowering one schema's keywords).
const SCHEMA_RULE_STEPS: u64 = 1_000;

/// A memo key naming a schema by its content: `tag`, then its JSON text
/// (written straight into bytes: through `Display` it was a tenth of the
/// compile time of schemas with many merges).
pub(super) fn content_key(tag: &str, v: &Value) -> String {
    let mut out = tag.as_bytes().to_vec();
    serde_json::to_writer(&mut out, v).expect("a JSON value writes to memory");
    String::from_utf8(out).expect("JSON text is UTF-8")
}
