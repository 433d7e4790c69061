//! Structural tags: xgrammar's JSON language for "free text with structured
//! parts", which vLLM and SGLang forward for tool calling
//! (`response_format={"type": "structural_tag", ...}`).
//!
//! A structural tag describes text by *formats*: constant strings, JSON
//! values of a schema, EBNF grammars, regexes, free text, and combinations of
//! them (sequences, alternatives, repetitions, `begin content end` tags,
//! tags started by triggers inside free text, tags joined by a separator).
//! Every one of them is a context-free language, so a structural tag compiles
//! to the same grammar AST the GBNF front end and the JSON Schema compiler
//! produce, and runs on the same engine:
//!
//! - `spec` reads the JSON (both the current and the legacy shape) into a
//!   checked tree of formats, refusing what it cannot mean exactly;
//! - `text` gives the free-text languages ("any text without these strings",
//!   "text up to the first trigger") as exact lexemes;
//! - `lower` turns the tree into grammar rules, one per format, importing the
//!   rules of embedded schemas and grammars under fresh names.
//!
//! Everything runs inside the caller's compile work budget.

mod fields;
pub mod format;
pub mod lower;
pub mod spec;
pub mod text;

use crate::cfg::ast::GrammarAst;
use crate::error::{Error, Result};
use crate::vocab::Vocab;

/// Compiles a structural tag (JSON text, either shape) to a grammar AST whose
/// start rule is the top format; tokens named by text are looked up in
/// `vocab`.
pub fn compile(spec_text: &str, vocab: &Vocab) -> Result<GrammarAst> {
    let value: serde_json::Value = serde_json::from_str(spec_text)
        .map_err(|e| Error::Compile(format!("the structural tag is not valid JSON: {e}")))?;
    let top = spec::parse(&value)?;
    lower::lower(&top, vocab)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::cfg::ast::{Lexing, Node, Pos, RuleDef};
    use crate::cfg::earley::Chart;

    /// Whether the grammar matches the whole of `text`.
    pub fn ast_accepts(ast: &GrammarAst, text: &str) -> bool {
        let cfg = crate::cfg::lower::lower(ast).unwrap();
        let mut chart = Chart::new();
        let st = cfg.initial(&mut chart).unwrap();
        match cfg.advance_bytes(&mut chart, &st, text.as_bytes()).unwrap() {
            Some(s) => s.accepting,
            None => false,
        }
    }

    /// Whether the one-rule grammar `node` matches the whole of `text`.
    pub fn node_accepts(node: &Node, text: &str) -> bool {
        let ast = GrammarAst {
            rules: vec![RuleDef {
                name: "root".into(),
                body: node.clone(),
                pos: Pos::default(),
            }],
            terminals: Vec::new(),
            ignore: Vec::new(),
            start: "root".into(),
            lexing: Lexing::AllSplits,
            indenter: None,
            blocks: Vec::new(),
            initial_skip: true,
        };
        ast_accepts(&ast, text)
    }

    /// Bytes 0..=255 as tokens, then `<|call|>` (256, special), `<|end|>`
    /// (257, special) and `<eos>` (258, EOS).
    pub fn vocab() -> std::sync::Arc<Vocab> {
        let mut toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        toks.extend([b"<|call|>".to_vec(), b"<|end|>".to_vec(), b"<eos>".to_vec()]);
        std::sync::Arc::new(Vocab::new(toks, &[258], &[256, 257], None).unwrap())
    }

    #[test]
    fn bad_json_is_a_compile_error() {
        assert!(matches!(compile("{", &vocab()), Err(Error::Compile(_))));
        let deep = "[".repeat(10_000);
        assert!(compile(&deep, &vocab()).is_err());
    }
}
