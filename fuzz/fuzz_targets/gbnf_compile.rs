//! GBNF front end: any text parses and compiles or fails cleanly, and
//! the compiled grammar's masks agree with `consume_token` on a short walk.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use maskpar::cfg::gbnf;
use maskpar::grammar::CompiledGrammar;
use maskpar_fuzz::{checked_walk, split_input, vocab};

fuzz_target!(|data: &[u8]| {
    let Some((choices, source)) = split_input(data) else {
        return;
    };
    let Ok(ast) = gbnf::parse(source) else {
        return;
    };
    if let Ok(g) = CompiledGrammar::from_ast(vocab(), &ast, "gbnf", source) {
        checked_walk(Arc::new(g), choices, 4);
    }
});
