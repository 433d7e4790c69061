//! Context-free grammars: front ends (GBNF) produce an AST, `lower` turns it
//! into a CFG over byte-DFA lexemes, and `earley` parses it at lexeme
//! boundaries.

pub mod ast;
mod classentry;
pub mod cursor;
mod divergent;
pub mod earley;
pub mod fillmemo;
pub mod firstmatch;
pub mod gbnf;
pub mod greedy;
pub mod horn;
pub mod indent;
mod keptrow;
pub mod lark;
pub mod larkorder;
pub mod lexcache;
pub mod lexentry;
mod lexstates;
pub mod lexwalk;
pub mod longest;
pub mod lookaround;
pub mod lower;
pub mod lowered;
pub mod members;
mod nearentry;
mod nodedfa;
pub mod setnames;
mod sharedlex;
mod sharedrows;
pub mod specials;
pub mod textreach;
pub mod tokenterm;
pub mod valueunion;
pub mod walk;
pub mod wordgroups;

pub use nodedfa::regular_dfa;
pub use sharedlex::SharedLexStats;

/// What the lexer-only cache shared by `vocab`'s grammars holds (made
/// empty if no grammar has used it yet; None if the vocabulary's engine slot
/// holds something else, when nothing is shared).
pub fn shared_lex_stats(vocab: &crate::vocab::Vocab) -> Option<SharedLexStats> {
    sharedlex::SharedLexCache::of(vocab).map(|c| c.stats())
}
