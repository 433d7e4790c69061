//! maskpar: grammar token masks for LLM decoding, filled in parallel across
//! batch x speculative-draft positions.
//!
//! The pure-Rust core (everything outside `py`) knows nothing about Python;
//! `py` holds the PyO3 bindings and is compiled only with the `python` feature.

pub mod apply;
pub mod batch;
pub mod bitmask;
pub mod bitmaskpool;
pub mod budget;
pub mod cfg;
pub mod claim;
pub mod classruns;
pub mod cores;
pub mod error;
pub mod grammar;
pub mod matcher;
pub mod regex_dfa;
pub mod schema;
pub mod slices;
pub mod stag;
pub mod strided;
pub mod tree;
pub mod treefill;
pub mod trie;
pub mod vocab;
pub mod warmup;

#[cfg(feature = "python")]
mod py;

pub use error::{Error, Result};

/// The extension module's allocator (see Cargo.toml), which charges each
/// allocation made during a compile to its work budget
/// (`budget::charge_allocation`): copying schema JSON, printing memo keys
/// and building tables cost in proportion to the memory they take, however
/// the code that does it is written. Only the `python` build sets it: a
/// library linked into another Rust program keeps that program's choice.
#[cfg(feature = "python")]
#[global_allocator]
static ALLOCATOR: budget::Charged<mimalloc::MiMalloc> = budget::Charged(mimalloc::MiMalloc);
