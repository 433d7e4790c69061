//! llguidance's nested grammars: `%json {schema}` blocks (the schema's
//! rules, read character-level) and `%lark { grammar }` blocks (a grammar
//! with names and `%ignore` of its own, its names prefixed with the
//! block's), each a lexer context of the grammar; and the
//! `%llguidance {options}` header.

use super::defs::{expand_defs, rename_defined, Defs};
use super::Parser;
use crate::cfg::ast::{Block, IndenterSpec, Node, Pos, RuleDef, TermDef};
use crate::error::{Error, Result};
use crate::schema::{KeyOrder, SchemaOptions};

/// The rules and terminals of nested grammars, and their blocks.
#[derive(Default)]
pub(super) struct Nested {
    pub(super) rules: Vec<RuleDef>,
    pub(super) terminals: Vec<TermDef>,
    pub(super) blocks: Vec<Block>,
}

/// Bound on blocks nested in blocks.
const MAX_BLOCK_DEPTH: u32 = 16;

impl Parser<'_> {
    /// llguidance's `%llguidance {options}` after its keyword (SGLang and
    /// llama.cpp mark llguidance's grammars with it). Its options change how
    /// llguidance forces tokens and lexes, not the language maskpar reads
    /// (`no_forcing`), except `allow_initial_skip` (without it, as in
    /// llguidance, no ignored text before the first terminal; Lark's lexer
    /// and maskpar without the header allow it) and `allow_invalid_utf8`,
    /// which is refused. Unknown ones are ignored, as llguidance ignores them.
    pub(super) fn llguidance_options(&mut self) -> Result<()> {
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
    pub(super) fn json_block(&mut self, pos: Pos) -> Result<Node> {
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
    pub(super) fn lark_block(&mut self, pos: Pos) -> Result<Node> {
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
}

/// The start rule of the `%json` block that is the whole grammar, if it
/// is: `start` is the grammar's only rule, its body the block alone, and
/// there are no terminals, `%ignore` or indentation of the grammar's own.
pub(super) fn only_a_json_block(
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
