//! Warm-up: what the first requests over a vocabulary would otherwise build
//! on their own path, built once, when the vocabulary is.
//!
//! Two caches fill up as requests come, and their first entries are the
//! dearest: the process-wide lexeme DFAs (`cfg::lower`'s cache, where each
//! JSON Schema `format` costs up to tens of milliseconds to determinize the
//! first time) and the lexer-only entries a vocabulary's grammars share
//! (`cfg::sharedlex::SharedLexCache`: the first fill inside any JSON string,
//! number or key walks the whole token trie). A server meets both on its
//! first requests, inside a compile or a fill that a batch waits on. So
//! building a `Tokenizer` also compiles the supported formats (once per
//! process) and walks one JSON document with every kind of value through a
//! schema's fills (once per vocabulary). It also starts the default thread
//! pool, which the first parallel fill would otherwise start inside itself
//! (0.2 ms on this project's 2-core machine). Nothing here changes what any
//! grammar accepts: it only fills caches, and a failure leaves them colder.

use std::sync::{Arc, Once};

use crate::budget;
use crate::grammar::CompiledGrammar;
use crate::matcher::MatcherCore;
use crate::schema::{self, strings::STANDARD_FORMATS};
use crate::vocab::Vocab;
use crate::Result;

/// A schema with every kind of JSON value, and a document it accepts.
/// Numbers come in the shapes whose lexer states differ (a leading zero, a
/// fraction, a sign, an exponent with and without its sign), in arrays of
/// arrays as points and matrices are written, and strings with escapes:
/// each such state's first fill in a process walked the trie inside a
/// request's step (0.09 ms for a number's first `0` in a fresh process).
const SCHEMA: &str = r#"{"type": "object", "properties": {
    "name": {"type": "string"}, "id": {"type": "integer"}, "score": {"type": "number"},
    "ok": {"type": "boolean"}, "none": {"type": "null"},
    "tags": {"type": "array", "items": {"type": "string"}},
    "when": {"type": "string", "format": "date-time"},
    "kind": {"enum": ["a", "b"]},
    "points": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}},
    "count": {"type": "integer"}, "note": {"type": "string"},
    "more": {"type": "object"}}, "required": ["name"]}"#;
const DOCUMENT: &str = r#"{"name": "Ada Lovelace, 1815", "id": -42, "score": 3.25e-2,
 "ok": true, "none": null, "tags": ["x", "y z"], "when": "2024-05-06T07:08:09Z",
 "kind": "b", "points": [[0.0, 10.5], [-0.25, 1E+3], [0, 100.125], [2e5, -7]],
 "count": 0, "note": "say \"hi\"\n\tand \u00e9 \\ done", "more": {"k": [1, {"v": false}]},
 "extra": "é ü"}"#;

/// Fills the process's and `vocab`'s caches (see the module docs).
pub fn warm_up(vocab: &Arc<Vocab>) {
    static FORMATS: Once = Once::new();
    FORMATS.call_once(|| {
        for format in STANDARD_FORMATS {
            let schema = format!(r#"{{"type": "string", "format": "{format}"}}"#);
            // Formats maskpar does not support are refused: nothing to keep.
            let _ = compile(vocab, &schema);
        }
    });
    if vocab.vocab_size() <= MAX_WALKED_VOCAB {
        let _ = walk_document(vocab);
    }
    // Threads that cannot start now fail the fill that needs them, clearly.
    let _ = crate::batch::pool(None);
}

/// Vocabularies wider than this (ids, padding included) skip the document
/// walk: each of its fills writes a whole row, 512 KiB at this width, and
/// real vocabularies are a few hundred thousand ids.
pub const MAX_WALKED_VOCAB: usize = 1 << 22;

fn compile(vocab: &Arc<Vocab>, schema: &str) -> Result<CompiledGrammar> {
    budget::with_budget(budget::DEFAULT_COMPILE_STEPS, || {
        let ast = schema::compile(schema, &Default::default())?;
        CompiledGrammar::from_ast(vocab.clone(), &ast, "json_schema", schema)
    })
}

/// Fills a row at every token of `DOCUMENT` (greedily tokenized), through a
/// grammar of `SCHEMA`.
fn walk_document(vocab: &Arc<Vocab>) -> Result<()> {
    let grammar = Arc::new(compile(vocab, SCHEMA)?);
    let mut matcher = MatcherCore::new(grammar.clone());
    let mut row = vec![0u32; grammar.words()];
    for token in vocab.encode_greedy(DOCUMENT.as_bytes())? {
        matcher.fill_row(&mut row)?;
        if !matcher.consume_token(token)? {
            break; // a vocabulary that cannot spell the document
        }
    }
    matcher.fill_row(&mut row)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The document is in the schema's language, so the walk reaches its
    /// end (with a vocabulary that spells it byte by byte).
    #[test]
    fn the_document_is_accepted_to_its_end() {
        let mut toks: Vec<Vec<u8>> = (0u8..=255).map(|b| vec![b]).collect();
        toks.push(b"<eos>".to_vec());
        let vocab = Arc::new(Vocab::new(toks, &[256], &[], None).unwrap());
        let grammar = Arc::new(compile(&vocab, SCHEMA).unwrap());
        let mut matcher = MatcherCore::new(grammar);
        let tokens = vocab.encode_greedy(DOCUMENT.as_bytes()).unwrap();
        assert!(matcher.consume_tokens(&tokens).unwrap());
        assert!(
            matcher.consume_token(256).unwrap(),
            "EOS after the document"
        );
        warm_up(&vocab);
    }

    /// A vocabulary that cannot spell the document (or anything) still
    /// warms up without an error reaching the caller.
    #[test]
    fn any_vocabulary_warms_up() {
        let vocab = Arc::new(Vocab::new(vec![b"<eos>".to_vec()], &[0], &[], None).unwrap());
        warm_up(&vocab);
        let toks = ["{", "}", "\"", "a"]
            .iter()
            .map(|t| t.as_bytes().to_vec())
            .collect();
        warm_up(&Arc::new(Vocab::new(toks, &[], &[], None).unwrap()));
    }
}
