//! maskpar: grammar token masks for LLM decoding, filled in parallel across
//! batch x speculative-draft positions.
//!
//! The pure-Rust core (everything outside `py`) knows nothing about Python;
//! `py` holds the PyO3 bindings and is compiled only with the `python` feature.

pub mod apply;
pub mod batch;
pub mod bitmask;
pub mod cfg;
pub mod error;
pub mod grammar;
pub mod matcher;
pub mod regex_dfa;
pub mod schema;
pub mod tree;
pub mod trie;
pub mod vocab;

#[cfg(feature = "python")]
mod py;

pub use error::{Error, Result};
