//! JSON Schema front end: any text compiles or fails cleanly (in each
//! whitespace layout), and the grammar's masks agree with `consume_token` on
//! a short walk.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use maskpar::grammar::CompiledGrammar;
use maskpar::schema::{self, SchemaOptions, Whitespace};
use maskpar_fuzz::{checked_walk, split_input, vocab};

fuzz_target!(|data: &[u8]| {
    let Some((choices, source)) = split_input(data) else {
        return;
    };
    let mode = choices.first().copied().unwrap_or(0);
    let opts = SchemaOptions {
        whitespace: if mode & 1 == 0 {
            Whitespace::Flexible
        } else {
            Whitespace::Compact
        },
        indent: (mode & 2 != 0).then(|| "  ".to_string()),
        strict_properties: mode & 4 != 0,
        assert_formats: mode & 8 == 0,
        ..SchemaOptions::default()
    };
    let Ok(ast) = schema::compile(source, &opts) else {
        return;
    };
    if let Ok(g) = CompiledGrammar::from_ast(vocab(), &ast, "json_schema", source) {
        checked_walk(Arc::new(g), &choices[1.min(choices.len())..], 3);
    }
});
