//! LARK front end: any text parses and compiles or fails cleanly, and
//! the compiled grammar's masks agree with `consume_token` on a short walk.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use maskpar::cfg::lark;
use maskpar::grammar::CompiledGrammar;
use maskpar_fuzz::{checked_walk, known_hang, vocab, MAX_INPUT};

fuzz_target!(|data: &[u8]| {
    if data.len() > MAX_INPUT {
        return;
    }
    let (choices, text) = data.split_at(data.len().min(4));
    let Ok(source) = std::str::from_utf8(text) else {
        return;
    };
    if known_hang(source) {
        return;
    }
    let Ok(ast) = lark::parse(source) else {
        return;
    };
    if let Ok(g) = CompiledGrammar::from_ast(vocab(), &ast, "lark", source) {
        checked_walk(Arc::new(g), choices, 4);
    }
});
