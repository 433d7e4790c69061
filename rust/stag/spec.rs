//! Reading a structural tag: JSON to a checked tree of [`Format`]s.
//!
//! A structural tag is JSON written by a client and forwarded by a serving
//! framework, in one of two shapes:
//!
//! - current: `{"type": "structural_tag", "format": {...}}`, where a format is
//!   an object with a `"type"` (`const_string`, `tag`, `triggered_tags`, ...);
//! - legacy: `{"type": "structural_tag", "structures": [{"begin", "schema",
//!   "end"}, ...], "triggers": [...]}`, which means a `triggered_tags` format
//!   whose tags hold JSON schemas (SGLang adds `at_least_one` and
//!   `stop_after_first` next to `triggers`).
//!
//! Fields and their defaults are xgrammar's, and so are the checks it makes
//! (non-empty triggers, every tag matching exactly one trigger, `min <= max`
//! ...); unknown fields are ignored, as xgrammar's pydantic models do. What
//! maskpar cannot mean exactly (the XML styles of `json_schema`, token
//! budgets) is refused by name rather than approximated. Formats nest at most
//! [`MAX_FORMAT_DEPTH`] deep: the reader recurses, one level per format, and
//! counts.

use serde_json::{Map, Value};

use super::fields::{
    array, bad, count, excludes, flag, integer, missing, object, string, strings, wrong,
};
use super::format::{Delim, Format, Tag, TokenRef, Triggered};
use crate::error::{Error, Result};

/// How deep formats may nest (a tag's content, a sequence's element...).
/// Tool-calling specs nest three or four levels; the bound keeps the reader's
/// recursion small whatever the input.
pub const MAX_FORMAT_DEPTH: usize = 64;

/// Reads a whole structural tag (either shape) to its top format.
pub fn parse(spec: &Value) -> Result<Format> {
    let obj = spec
        .as_object()
        .ok_or_else(|| bad("the top level", "expected a JSON object"))?;
    match obj.get("type") {
        None => {}
        Some(Value::String(t)) if t == "structural_tag" => {}
        Some(other) => {
            return Err(bad(
                "type",
                format!("expected \"structural_tag\", got {other}"),
            ))
        }
    }
    if let Some(format) = obj.get("format") {
        return Reader.format(format, "format", 0);
    }
    if obj.contains_key("structures") {
        return legacy(obj);
    }
    Err(bad(
        "the top level",
        "expected a \"format\" (or the legacy \"structures\" and \"triggers\")",
    ))
}

/// The legacy shape: triggered tags whose contents are JSON schemas.
fn legacy(obj: &Map<String, Value>) -> Result<Format> {
    let structures = array(obj, "structures", "structures")?;
    let mut tags = Vec::with_capacity(structures.len());
    for (i, s) in structures.iter().enumerate() {
        let path = format!("structures[{i}]");
        let s = object(s, &path)?;
        let schema = match s.get("schema") {
            // The schema may come as JSON text.
            Some(Value::String(text)) => text.clone(),
            Some(v @ (Value::Object(_) | Value::Bool(_))) => v.to_string(),
            Some(other) => return Err(bad(&format!("{path}.schema"), wrong("a schema", other))),
            None => return Err(bad(&path, "missing field \"schema\"")),
        };
        tags.push(Tag {
            begin: Delim::Text(string(s, "begin", &path)?),
            content: Box::new(Format::JsonSchema {
                schema,
                max_whitespace: None,
            }),
            ends: vec![Delim::Text(string(s, "end", &path)?)],
        });
    }
    let triggered = Triggered {
        triggers: strings(obj, "triggers", "the top level")?,
        tags,
        at_least_one: flag(obj, "at_least_one", "the top level")?,
        stop_after_first: flag(obj, "stop_after_first", "the top level")?,
        excludes: Vec::new(),
    };
    check_triggered(&triggered, "the top level")?;
    Ok(Format::TriggeredTags(triggered))
}

/// Reads formats, counting their depth.
struct Reader;

impl Reader {
    fn format(&self, v: &Value, path: &str, depth: usize) -> Result<Format> {
        if depth >= MAX_FORMAT_DEPTH {
            return Err(Error::LimitExceeded(format!(
                "structural tag formats nest more than {MAX_FORMAT_DEPTH} deep (at {path})"
            )));
        }
        crate::budget::charge(64)?;
        let o = object(v, path)?;
        let ty = match o.get("type") {
            Some(Value::String(t)) => t.as_str(),
            Some(other) => return Err(bad(path, wrong("a type name", other))),
            None => return Err(bad(path, "missing field \"type\"")),
        };
        let inner = |key: &str| -> Result<Format> {
            let p = format!("{path}.{key}");
            let v = o.get(key).ok_or_else(|| bad(path, missing(key)))?;
            self.format(v, &p, depth + 1)
        };
        let list = |key: &str, what: &str| -> Result<Vec<Format>> {
            let items = array(o, key, path)?;
            if items.is_empty() {
                return Err(bad(
                    path,
                    format!("{what} format must have at least one element"),
                ));
            }
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                out.push(self.format(item, &format!("{path}.{key}[{i}]"), depth + 1)?);
            }
            Ok(out)
        };
        Ok(match ty {
            "const_string" => Format::ConstString(string(o, "value", path)?),
            "json_schema" => self.json_schema(o, path)?,
            "grammar" => Format::Grammar(string(o, "grammar", path)?),
            "regex" => Format::Regex(string(o, "pattern", path)?),
            "any_text" => {
                if let Some(n) = count(o, "max_tokens", path)? {
                    return Err(bad(
                        path,
                        format!("any_text with max_tokens ({n}) is not supported: maskpar counts text, not tokens; use max_chars"),
                    ));
                }
                Format::AnyText {
                    excludes: excludes(o, "excludes", path)?,
                    max_chars: count(o, "max_chars", path)?,
                }
            }
            "sequence" => Format::Sequence(list("elements", "Sequence")?),
            "or" => Format::Or(list("elements", "Or")?),
            "tag" => Format::Tag(self.tag(v, path, depth)?),
            "triggered_tags" => {
                let t = Triggered {
                    triggers: strings(o, "triggers", path)?,
                    tags: self.tags(o, path, depth)?,
                    at_least_one: flag(o, "at_least_one", path)?,
                    stop_after_first: flag(o, "stop_after_first", path)?,
                    excludes: excludes(o, "excludes", path)?,
                };
                check_triggered(&t, path)?;
                Format::TriggeredTags(t)
            }
            "tags_with_separator" => {
                let tags = self.tags(o, path, depth)?;
                if tags.is_empty() {
                    return Err(bad(
                        path,
                        "Tags with separator format's tags must be non-empty",
                    ));
                }
                Format::TagsWithSeparator {
                    tags,
                    separator: string(o, "separator", path)?,
                    at_least_one: flag(o, "at_least_one", path)?,
                    stop_after_first: flag(o, "stop_after_first", path)?,
                }
            }
            "optional" | "plus" | "star" => Format::Repeat {
                content: Box::new(inner("content")?),
                min: (ty == "plus") as u32,
                max: (ty == "optional").then_some(1),
            },
            "repeat" => {
                let min = integer(o, "min", path)?;
                let max = integer(o, "max", path)?;
                if min < 0 {
                    return Err(bad(path, "Repeat min must be >= 0"));
                }
                if max != -1 && max < min {
                    return Err(bad(
                        path,
                        "Repeat min must be <= max (or max = -1 for unbounded)",
                    ));
                }
                let limit = |n: i64| {
                    u32::try_from(n).map_err(|_| {
                        Error::LimitExceeded(format!(
                            "a repeat count of {n} at {path} is more than {} times",
                            u32::MAX
                        ))
                    })
                };
                Format::Repeat {
                    content: Box::new(inner("content")?),
                    min: limit(min)?,
                    max: if max == -1 { None } else { Some(limit(max)?) },
                }
            }
            "token" => {
                let v = o.get("token").ok_or_else(|| bad(path, missing("token")))?;
                Format::Token(vec![token_ref(v, &format!("{path}.token"))?])
            }
            "exclude_token" => Format::ExcludeToken(token_refs(o, "exclude_tokens", path, false)?),
            "any_tokens" => Format::AnyTokens {
                excludes: token_refs(o, "exclude_tokens", path, false)?,
                max_tokens: count(o, "max_tokens", path)?,
            },
            "token_triggered_tags" => {
                let tags = self.tags(o, path, depth)?;
                let triggers = token_refs(o, "trigger_tokens", path, true)?;
                if triggers.is_empty() {
                    return Err(bad(
                        path,
                        "Token triggered tags format's trigger_tokens must be non-empty",
                    ));
                }
                if tags.is_empty() {
                    return Err(bad(
                        path,
                        "Token triggered tags format's tags must be non-empty",
                    ));
                }
                for (i, tag) in tags.iter().enumerate() {
                    if !matches!(tag.begin, Delim::Token(_)) {
                        return Err(bad(
                            &format!("{path}.tags[{i}].begin"),
                            "a token triggered tag must begin with a token",
                        ));
                    }
                }
                Format::TokenTriggeredTags {
                    triggers,
                    tags,
                    excludes: token_refs(o, "exclude_tokens", path, false)?,
                    at_least_one: flag(o, "at_least_one", path)?,
                    stop_after_first: flag(o, "stop_after_first", path)?,
                }
            }
            "token_dispatch" => {
                let items = array(o, "rules", path)?;
                let mut rules = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    let p = format!("{path}.rules[{i}]");
                    match item.as_array().map(Vec::as_slice) {
                        Some([token, format]) => rules.push((
                            token_ref(token, &format!("{p}[0]"))?,
                            self.format(format, &format!("{p}[1]"), depth + 1)?,
                        )),
                        _ => return Err(bad(&p, wrong("a [token, format] pair", item))),
                    }
                }
                Format::TokenDispatch {
                    rules,
                    repeat: match o.get("loop") {
                        None | Some(Value::Null) => true,
                        _ => flag(o, "loop", path)?,
                    },
                    excludes: token_refs(o, "exclude_tokens", path, false)?,
                }
            }
            "dispatch" | "qwen_xml_parameter" => {
                return Err(bad(
                    path,
                    format!("the format type {ty:?} is not supported"),
                ))
            }
            other => return Err(bad(path, format!("Format type not recognized: {other}"))),
        })
    }

    fn json_schema(&self, o: &Map<String, Value>, path: &str) -> Result<Format> {
        let schema = match o.get("json_schema") {
            Some(v @ (Value::Object(_) | Value::Bool(_))) => v.to_string(),
            Some(other) => {
                return Err(bad(
                    &format!("{path}.json_schema"),
                    wrong("a schema (an object or a bool)", other),
                ))
            }
            None => return Err(bad(path, missing("json_schema"))),
        };
        match o.get("style") {
            None => {}
            Some(Value::String(s)) if s == "json" => {}
            Some(Value::String(s)) => {
                return Err(bad(
                    path,
                    format!("json_schema style {s:?} is not supported; only \"json\" is"),
                ))
            }
            Some(other) => return Err(bad(&format!("{path}.style"), wrong("a string", other))),
        }
        if flag(o, "any_order", path)? {
            return Err(bad(
                path,
                "json_schema with any_order=true is not supported",
            ));
        }
        let max_whitespace = count(o, "max_whitespace_cnt", path)?;
        if !excludes(o, "excludes", path)?.is_empty() {
            return Err(bad(path, "json_schema with excludes is not supported"));
        }
        Ok(Format::JsonSchema {
            schema,
            max_whitespace,
        })
    }

    fn tag(&self, v: &Value, path: &str, depth: usize) -> Result<Tag> {
        let o = object(v, path)?;
        match o.get("type") {
            None => {}
            Some(Value::String(t)) if t == "tag" => {}
            Some(other) => return Err(bad(path, wrong("a tag (type \"tag\")", other))),
        }
        let begin = match o.get("begin") {
            Some(v) => delim(v, &format!("{path}.begin"))?,
            None => return Err(bad(path, missing("begin"))),
        };
        let ends = match o.get("end") {
            Some(Value::String(s)) => vec![Delim::Text(s.clone())],
            Some(v @ Value::Object(_)) => vec![delim(v, &format!("{path}.end"))?],
            Some(Value::Array(items)) => {
                let mut ends = Vec::with_capacity(items.len());
                for (i, e) in items.iter().enumerate() {
                    match e {
                        Value::String(s) => ends.push(Delim::Text(s.clone())),
                        other => {
                            return Err(bad(&format!("{path}.end[{i}]"), wrong("a string", other)))
                        }
                    }
                }
                if ends.is_empty() {
                    return Err(bad(path, "a tag's end list must be non-empty"));
                }
                ends
            }
            Some(other) => {
                return Err(bad(
                    &format!("{path}.end"),
                    wrong("a string or a list", other),
                ))
            }
            None => return Err(bad(path, missing("end"))),
        };
        let content_path = format!("{path}.content");
        let content = o
            .get("content")
            .ok_or_else(|| bad(path, missing("content")))?;
        Ok(Tag {
            begin,
            content: Box::new(self.format(content, &content_path, depth + 1)?),
            ends,
        })
    }

    fn tags(&self, o: &Map<String, Value>, path: &str, depth: usize) -> Result<Vec<Tag>> {
        let items = array(o, "tags", path)?;
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            out.push(self.tag(item, &format!("{path}.tags[{i}]"), depth + 1)?);
        }
        Ok(out)
    }
}

/// xgrammar's checks on triggered tags.
fn check_triggered(t: &Triggered, path: &str) -> Result<()> {
    if t.triggers.is_empty() {
        return Err(bad(
            path,
            "Triggered tags format's triggers must be non-empty",
        ));
    }
    if t.triggers.iter().any(String::is_empty) {
        return Err(bad(
            path,
            "Triggered tags format's triggers must be non-empty strings",
        ));
    }
    if t.tags.is_empty() {
        return Err(bad(path, "Triggered tags format's tags must be non-empty"));
    }
    for (i, tag) in t.tags.iter().enumerate() {
        let Delim::Text(begin) = &tag.begin else {
            return Err(bad(
                &format!("{path}.tags[{i}].begin"),
                "triggered tags must begin with text (token_triggered_tags takes tokens)",
            ));
        };
        match t
            .triggers
            .iter()
            .filter(|tr| begin.starts_with(tr.as_str()))
            .count()
        {
            0 => {
                return Err(bad(
                    &format!("{path}.tags[{i}]"),
                    format!("the tag begin {:?} does not start with any trigger", begin),
                ))
            }
            1 => {}
            _ => {
                return Err(bad(
                    &format!("{path}.tags[{i}]"),
                    format!(
                        "the tag begin {:?} starts with more than one trigger",
                        begin
                    ),
                ))
            }
        }
    }
    Ok(())
}

/// A token by id or text: a bare int or string, or a `token` format.
fn token_ref(v: &Value, path: &str) -> Result<TokenRef> {
    match v {
        Value::Number(n) => n
            .as_i64()
            .map(TokenRef::Id)
            .ok_or_else(|| bad(path, wrong("a token id", v))),
        Value::String(s) if !s.is_empty() => Ok(TokenRef::Text(s.clone())),
        Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("token") => {
            let t = o.get("token").ok_or_else(|| bad(path, missing("token")))?;
            token_ref(t, &format!("{path}.token"))
        }
        other => Err(bad(path, wrong("a token id or a token's text", other))),
    }
}

/// A list of tokens (required, or empty when absent).
fn token_refs(
    o: &Map<String, Value>,
    key: &str,
    path: &str,
    required: bool,
) -> Result<Vec<TokenRef>> {
    if !required && matches!(o.get(key), None | Some(Value::Null)) {
        return Ok(Vec::new());
    }
    let items = array(o, key, path)?;
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        out.push(token_ref(item, &format!("{path}.{key}[{i}]"))?);
    }
    Ok(out)
}

/// A tag's begin or end: a string, or a `token` format.
fn delim(v: &Value, path: &str) -> Result<Delim> {
    match v {
        Value::String(s) => Ok(Delim::Text(s.clone())),
        Value::Object(_) => Ok(Delim::Token(token_ref(v, path)?)),
        other => Err(bad(path, wrong("a string or a token", other))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(v: Value) -> Result<Format> {
        parse(&json!({"type": "structural_tag", "format": v}))
    }

    fn err(v: Value) -> String {
        read(v).unwrap_err().to_string()
    }

    #[test]
    fn reads_every_text_type() {
        let c = json!({"type": "const_string", "value": "x"});
        assert_eq!(read(c.clone()).unwrap(), Format::ConstString("x".into()));
        let t = read(json!({"type": "tag", "begin": "<a>", "content": c, "end": ["</a>", "</b>"]}))
            .unwrap();
        let Format::Tag(t) = t else { panic!() };
        assert_eq!(t.text_ends(), vec!["</a>", "</b>"]);
        assert_eq!(
            read(json!({"type": "optional", "content": c})).unwrap(),
            Format::Repeat {
                content: Box::new(Format::ConstString("x".into())),
                min: 0,
                max: Some(1)
            }
        );
        assert_eq!(
            read(json!({"type": "repeat", "min": 2, "max": -1, "content": c})).unwrap(),
            Format::Repeat {
                content: Box::new(Format::ConstString("x".into())),
                min: 2,
                max: None
            }
        );
        assert!(matches!(
            read(json!({"type": "any_text", "excludes": ["a"], "max_chars": 3})).unwrap(),
            Format::AnyText {
                max_chars: Some(3),
                ..
            }
        ));
    }

    #[test]
    fn reads_the_legacy_shape() {
        let f = parse(
            &json!({"type": "structural_tag", "triggers": ["<f"], "at_least_one": true,
            "structures": [{"begin": "<f=a>", "schema": {"type": "integer"}, "end": "</f>"},
                           {"begin": "<f=b>", "schema": "{\"type\": \"string\"}", "end": "</f>"}]}),
        )
        .unwrap();
        let Format::TriggeredTags(t) = f else {
            panic!()
        };
        assert!(t.at_least_one && !t.stop_after_first);
        assert_eq!(
            *t.tags[1].content,
            Format::JsonSchema {
                schema: "{\"type\": \"string\"}".into(),
                max_whitespace: None
            }
        );
    }

    #[test]
    fn refuses_with_xgrammars_checks() {
        let tag = json!({"begin": "<f>", "content": {"type": "const_string", "value": "1"}, "end": "</f>"});
        let trig = |triggers: Value| json!({"type": "triggered_tags", "triggers": triggers, "tags": [tag]});
        assert!(err(trig(json!([]))).contains("triggers must be non-empty"));
        assert!(err(trig(json!([""]))).contains("non-empty strings"));
        assert!(err(trig(json!(["<g"]))).contains("does not start with any trigger"));
        assert!(err(trig(json!(["<", "<f"]))).contains("more than one trigger"));
        assert!(err(json!({"type": "sequence", "elements": []})).contains("at least one"));
        assert!(
            err(json!({"type": "repeat", "min": 3, "max": 2, "content": tag}))
                .contains("min must be <= max")
        );
        assert!(err(json!({"type": "bogus"})).contains("not recognized: bogus"));
        assert!(
            err(json!({"type": "json_schema", "json_schema": {}, "style": "qwen_xml"}))
                .contains("qwen_xml")
        );
        assert_eq!(
            read(json!({"type": "token", "token": 5})).unwrap(),
            Format::Token(vec![TokenRef::Id(5)])
        );
        assert!(err(json!({"type": "token", "token": [5]})).contains("format.token"));
        assert!(
            err(json!({"type": "token_triggered_tags", "trigger_tokens": [1], "tags": [tag]}))
                .contains("must begin with a token")
        );
        assert!(
            err(json!({"type": "token_dispatch", "rules": [[1]]})).contains("[token, format] pair")
        );
        assert!(err(json!({"type": "any_text", "excludes": [""]})).contains("non-empty"));
        assert!(err(json!({"type": "const_string"})).contains("missing field \"value\""));
        assert!(
            err(json!({"type": "or", "elements": [{"type": "const_string", "value": 3}]}))
                .contains("format.elements[0].value")
        );
        assert!(parse(&json!({"type": "regex"})).is_err());
        assert!(parse(&json!([1])).is_err());
    }

    #[test]
    fn nesting_is_bounded() {
        let mut v = json!({"type": "const_string", "value": "x"});
        for _ in 0..MAX_FORMAT_DEPTH {
            v = json!({"type": "optional", "content": v});
        }
        assert!(matches!(read(v), Err(Error::LimitExceeded(_))));
    }
}
