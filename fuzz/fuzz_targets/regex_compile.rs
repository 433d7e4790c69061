//! Regex front end: any text as a pattern compiles or fails cleanly, and the
//! compiled grammar's masks agree with `consume_token` on a short walk.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use maskpar::grammar::CompiledGrammar;
use maskpar_fuzz::{checked_walk, known_hang, vocab, MAX_INPUT};

fuzz_target!(|data: &[u8]| {
    if data.len() > MAX_INPUT {
        return;
    }
    // The first bytes steer the walk; the rest is the pattern.
    let (choices, text) = data.split_at(data.len().min(4));
    let Ok(pattern) = std::str::from_utf8(text) else {
        return;
    };
    if known_hang(pattern) {
        return;
    }
    if let Ok(g) = CompiledGrammar::from_regex(vocab(), pattern) {
        checked_walk(Arc::new(g), choices, 4);
    }
});
