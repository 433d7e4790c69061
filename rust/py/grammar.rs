use std::sync::Arc;

use pyo3::prelude::*;

use super::int::Int;
use super::tokenizer::PyTokenizer;
use super::{detached, to_py_err};
use crate::budget;
use crate::cfg::{gbnf, lark, specials};
use crate::grammar::CompiledGrammar;
use rustc_hash::FxHashMap as HashMap;
use std::collections::VecDeque;
use std::sync::Mutex;

use pyo3::exceptions::{PyRecursionError, PyTypeError, PyValueError};
use pyo3::types::{PyBool, PyDict, PyInt, PyString};

use crate::schema::{self, KeyOrder, SchemaOptions, Whitespace, MAX_WHITESPACE_LIMIT};

/// A compiled grammar: immutable, thread-safe, shared by any number of matchers.
#[pyclass(frozen, module = "maskpar._core", name = "Grammar")]
pub struct PyGrammar {
    pub inner: Arc<CompiledGrammar>,
}

#[pymethods]
impl PyGrammar {
    /// The model's logits width this grammar's masks cover.
    #[getter]
    fn vocab_size(&self) -> usize {
        self.inner.vocab().vocab_size()
    }

    /// The pattern or grammar text it was compiled from.
    #[getter]
    fn source(&self) -> &str {
        self.inner.source()
    }

    /// Number of automaton states (a measure of the grammar's size).
    #[getter]
    fn num_states(&self) -> usize {
        self.inner.num_states()
    }

    /// The grammar's syntax: "regex", "gbnf", "lark", "json_schema" or
    /// "structural_tag".
    #[getter]
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    /// The same grammar over another tokenizer: automata and parser tables
    /// are shared, only the token tables are built. Matchers can move between
    /// the two with `Matcher.fork(grammar=...)`.
    fn for_tokenizer(&self, py: Python<'_>, tokenizer: &PyTokenizer) -> PyResult<PyGrammar> {
        let vocab = tokenizer.vocab.clone();
        let g = detached(py, || self.inner.for_vocab(vocab))?.map_err(to_py_err)?;
        Ok(PyGrammar { inner: Arc::new(g) })
    }

    fn __repr__(&self) -> String {
        let src = self.inner.source();
        let short: String = src.chars().take(60).collect();
        let more = if short.len() < src.len() { "..." } else { "" };
        format!(
            "Grammar(kind={:?}, source={:?}{more}, size={})",
            self.inner.kind(),
            short,
            self.inner.num_states()
        )
    }
}

/// The compile work budget a call asked for (`max_compile_steps`), or the default.
pub(super) fn steps(max_compile_steps: Option<Int>) -> PyResult<u64> {
    match max_compile_steps {
        Some(Int(n)) if n <= 0 => Err(PyValueError::new_err(format!(
            "max_compile_steps must be a positive number of steps, got {n}"
        ))),
        Some(Int(n)) => Ok(n as u64),
        None => Ok(budget::DEFAULT_COMPILE_STEPS),
    }
}

/// Compiles a regular expression (Rust `regex` syntax) for full-match use.
#[pyfunction]
#[pyo3(signature = (tokenizer, pattern, *, max_compile_steps=None))]
pub fn compile_regex(
    py: Python<'_>,
    tokenizer: &PyTokenizer,
    pattern: &str,
    max_compile_steps: Option<Int>,
) -> PyResult<PyGrammar> {
    let vocab = tokenizer.vocab.clone();
    let limit = steps(max_compile_steps)?;
    let g = detached(py, || {
        budget::with_budget(limit, || CompiledGrammar::from_regex(vocab, pattern))
    })?
    .map_err(to_py_err)?;
    Ok(PyGrammar { inner: Arc::new(g) })
}

/// Compiles a context-free grammar. `syntax` is "gbnf" (llama.cpp's format;
/// the start rule is `root`), "lark" (start rule `start`) or "auto", which
/// takes text with `::=` rules for GBNF and anything else for Lark. `start`
/// names another start rule (Lark's `start=` option).
#[pyfunction]
#[pyo3(signature = (tokenizer, source, syntax="auto", *, start=None, max_compile_steps=None))]
pub fn compile_grammar(
    py: Python<'_>,
    tokenizer: &PyTokenizer,
    source: &str,
    syntax: &str,
    start: Option<&str>,
    max_compile_steps: Option<Int>,
) -> PyResult<PyGrammar> {
    let limit = steps(max_compile_steps)?;
    let syntax: &'static str = match syntax {
        "auto" if source.contains("::=") => "gbnf",
        "auto" | "lark" => "lark",
        // xgrammar's EBNF is GBNF with a few more forms.
        "gbnf" | "ebnf" => "gbnf",
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown syntax {other:?}; expected 'auto', 'gbnf', 'ebnf' or 'lark'"
            )))
        }
    };
    let vocab = tokenizer.vocab.clone();
    let g = detached(py, || {
        budget::with_budget(limit, || {
            let mut ast = if syntax == "gbnf" {
                gbnf::parse(source)?
            } else {
                lark::parse(source)?
            };
            if let Some(start) = start {
                ast.start = start.to_string();
            }
            specials::resolve(&mut ast, &vocab)?;
            CompiledGrammar::from_ast(vocab, &ast, syntax, source)
        })
    })?
    .map_err(to_py_err)?;
    Ok(PyGrammar { inner: Arc::new(g) })
}

/// Compiled JSON schemas by (vocabulary, schema text, options): frameworks
/// compile the same schema for many requests. Entries hold their vocabulary
/// alive, so its address identifies it; the oldest entries are dropped past
/// `SCHEMA_CACHE_ENTRIES`.
static SCHEMA_CACHE: Mutex<Option<SchemaCache>> = Mutex::new(None);
const SCHEMA_CACHE_ENTRIES: usize = 256;

type SchemaKey = (usize, String, String);

#[derive(Default)]
struct SchemaCache {
    map: HashMap<SchemaKey, Arc<CompiledGrammar>>,
    order: VecDeque<SchemaKey>,
    /// Compiles answered from the cache, and schemas compiled for it.
    hits: u64,
    misses: u64,
}

/// The compiled-schema cache's counters: `hits` (compiles answered from
/// the cache), `misses` (schemas compiled; refused ones are not counted or
/// kept), `entries` and `max_entries`.
#[pyfunction]
pub fn schema_cache_info(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let (hits, misses, entries) = {
        let guard = SCHEMA_CACHE.lock().unwrap_or_else(|e| e.into_inner());
        guard
            .as_ref()
            .map_or((0, 0, 0), |c| (c.hits, c.misses, c.map.len()))
    };
    let info = PyDict::new(py);
    info.set_item("hits", hits)?;
    info.set_item("misses", misses)?;
    info.set_item("entries", entries)?;
    info.set_item("max_entries", SCHEMA_CACHE_ENTRIES)?;
    Ok(info)
}

/// JSON's whitespace characters: what indents and separators may add.
fn is_json_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r')
}

/// `indent=` as json.dumps reads it: a number of spaces (none if
/// negative) or the text itself, which must be JSON whitespace (any other
/// text would make the output something other than JSON).
fn indent_text(indent: Option<&Bound<'_, PyAny>>) -> PyResult<Option<String>> {
    let Some(indent) = indent.filter(|i| !i.is_none()) else {
        return Ok(None);
    };
    if let Ok(text) = indent.cast::<PyString>() {
        let text: String = text.extract()?;
        if !text.chars().all(is_json_space) {
            return Err(PyValueError::new_err(format!(
                "indent must be a number of spaces or JSON whitespace, got {text:?}"
            )));
        }
        return Ok(Some(text));
    }
    if !indent.is_instance_of::<PyInt>() {
        return Err(PyTypeError::new_err(format!(
            "indent must be an int, a str or None, got {}",
            indent.get_type()
        )));
    }
    let spaces = match indent.extract::<i64>() {
        Ok(n) if n <= MAX_INDENT_WIDTH => n.max(0) as usize,
        Err(_) if indent.lt(0)? => 0, // as json.dumps: no indentation
        _ => {
            return Err(PyValueError::new_err(format!(
                "indent must be at most {MAX_INDENT_WIDTH} spaces, got {indent}"
            )))
        }
    };
    Ok(Some(" ".repeat(spaces)))
}

/// Wider indents are surely mistakes, and each nesting level's line
/// break is a literal as long as its indentation.
const MAX_INDENT_WIDTH: i64 = 64;

/// A separator must be `mark` with JSON whitespace around it, or the
/// output would not be JSON.
fn check_separator(which: &str, sep: &str, mark: char) -> PyResult<()> {
    let trimmed = sep.trim_matches(is_json_space);
    if trimmed.len() != 1 || !trimmed.starts_with(mark) {
        return Err(PyValueError::new_err(format!(
            "the {which} separator must be {mark:?} with JSON whitespace around it, got {sep:?}"
        )));
    }
    Ok(())
}

/// Compiles a JSON Schema (a dict or JSON text) to a grammar over JSON text.
#[pyfunction]
#[pyo3(signature = (tokenizer, schema, *, whitespace="flexible", indent=None, separators=None, strict_properties=false, assert_formats=true, key_order="any", max_whitespace=None, whitespace_pattern=None, max_compile_steps=None))]
#[allow(clippy::too_many_arguments)]
pub fn compile_json_schema(
    py: Python<'_>,
    tokenizer: &PyTokenizer,
    schema: &Bound<'_, PyAny>,
    whitespace: &str,
    indent: Option<&Bound<'_, PyAny>>,
    separators: Option<(String, String)>,
    strict_properties: bool,
    assert_formats: bool,
    key_order: &str,
    max_whitespace: Option<Int>,
    whitespace_pattern: Option<String>,
    max_compile_steps: Option<Int>,
) -> PyResult<PyGrammar> {
    let limit = steps(max_compile_steps)?;
    let text: String = if schema.is_instance_of::<PyString>() {
        schema.extract()?
    } else if schema.is_instance_of::<PyDict>() || schema.is_instance_of::<PyBool>() {
        py.import("json")?
            .call_method1("dumps", (schema,))
            .map_err(|e| {
                // A dict nested past Python's recursion limit: bad content,
                // not a crash of the caller's thread.
                if e.is_instance_of::<PyRecursionError>(py) {
                    PyValueError::new_err("the schema nests too deeply to be written as JSON")
                } else {
                    e
                }
            })?
            .extract()?
    } else {
        return Err(PyTypeError::new_err(format!(
            "schema must be a dict, a bool or JSON text, got {}",
            schema.get_type()
        )));
    };
    let indent = indent_text(indent)?;
    if let Some((item, key)) = &separators {
        check_separator("item", item, ',')?;
        check_separator("key", key, ':')?;
    }
    let whitespace = match whitespace {
        "flexible" => Whitespace::Flexible,
        "compact" => Whitespace::Compact,
        other => {
            return Err(PyValueError::new_err(format!(
                "whitespace must be 'flexible' or 'compact', got {other:?}"
            )))
        }
    };
    let key_order = match key_order {
        "any" => KeyOrder::Any,
        "schema" => KeyOrder::Schema,
        other => {
            return Err(PyValueError::new_err(format!(
                "key_order must be 'any' or 'schema', got {other:?}"
            )))
        }
    };
    let max_whitespace = match max_whitespace {
        None => None,
        Some(Int(n)) => Some(
            u32::try_from(n)
                .ok()
                .filter(|&n| n <= MAX_WHITESPACE_LIMIT)
                .ok_or_else(|| {
                    PyValueError::new_err(format!(
                        "max_whitespace must be from 0 to {MAX_WHITESPACE_LIMIT}, got {n}"
                    ))
                })?,
        ),
    };
    let opts = SchemaOptions {
        whitespace,
        separators,
        indent,
        strict_properties,
        assert_formats,
        key_order,
        max_whitespace,
        whitespace_pattern,
    };
    let vocab = tokenizer.vocab.clone();
    let key: SchemaKey = (Arc::as_ptr(&vocab) as usize, text, format!("{opts:?}"));
    let cached = {
        let mut guard = SCHEMA_CACHE.lock().unwrap_or_else(|e| e.into_inner());
        guard.as_mut().and_then(|c| {
            let g = c.map.get(&key).cloned()?;
            c.hits += 1;
            Some(g)
        })
    };
    if let Some(g) = cached {
        return Ok(PyGrammar { inner: g });
    }
    let source = key.1.clone();
    let g = detached(py, || {
        budget::with_budget(limit, || {
            let ast = schema::compile(&source, &opts)?;
            CompiledGrammar::from_ast(vocab, &ast, "json_schema", &source)
        })
    })?
    .map_err(to_py_err)?;
    let g = Arc::new(g);
    let mut guard = SCHEMA_CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let cache = guard.get_or_insert_with(SchemaCache::default);
    cache.misses += 1;
    if !cache.map.contains_key(&key) {
        if cache.order.len() >= SCHEMA_CACHE_ENTRIES {
            if let Some(old) = cache.order.pop_front() {
                cache.map.remove(&old);
            }
        }
        cache.order.push_back(key.clone());
        cache.map.insert(key.clone(), g.clone());
    }
    Ok(PyGrammar {
        inner: cache.map[&key].clone(),
    })
}
