//! Structural-tag front end: any text compiles or fails cleanly (the JSON,
//! both shapes, every format type, embedded schemas, grammars and regexes),
//! and the grammar's masks agree with `consume_token` on a short walk.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use maskpar::grammar::CompiledGrammar;
use maskpar_fuzz::{checked_walk, split_input, vocab};

fuzz_target!(|data: &[u8]| {
    let Some((choices, source)) = split_input(data) else {
        return;
    };
    let vocab = vocab();
    let Ok(ast) = maskpar::stag::compile(source, &vocab) else {
        return;
    };
    if let Ok(g) = CompiledGrammar::from_ast(vocab, &ast, "structural_tag", source) {
        checked_walk(Arc::new(g), choices, 4);
    }
});
