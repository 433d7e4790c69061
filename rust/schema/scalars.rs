//! Strings and numbers: the keywords of a scalar type compile to one lexeme,
//! an intersection (`Node::Intersect`) of regular parts whose automaton
//! lowering builds as the product of theirs. A bound no value meets gives
//! no value (None), never an error.
//!
//! - Strings: each `pattern` (and the more patterns merges add,
//!   `MORE_PATTERNS`) is a regex over the encoded contents with search
//!   semantics (`strings::pattern_regex`), an asserted `format` a regex of
//!   the text json.dumps writes for it, and `minLength`/`maxLength` a count
//!   of encoded characters (`strings::ANY_CHAR`: one character, raw or
//!   escaped); each is quoted, and the quoted parts intersected.
//! - Numbers: each of `minimum`, `maximum`, `exclusiveMinimum` and
//!   `exclusiveMaximum` (draft 4's boolean forms too) is a regex over the
//!   number's text (`decimals::bound_regex`); `multipleOf` is a
//!   `Node::DecimalMultiples` (numbers written without an exponent); the
//!   internal `NON_INTEGER` keyword (made by negating `type: integer`) keeps
//!   the texts with a fraction.
//! - Integers: the bounds fold into one integer range
//!   (`numbers::int_range_regex`), which from draft 6 on (where `1.0` is an
//!   integer) may be written with a `.0+` fraction.

use super::decimals::Cmp;
use super::keywords::{count, MORE_PATTERNS, NON_INTEGER, NOT_MULTIPLE_OF};
use super::{decimal_text, decimals, numbers, re, refuse, strings, Compiler, NUMBER, PLAIN_NUMBER};
use crate::cfg::ast::Node;
use crate::error::Result;
use crate::regex_dfa::matches_only_nonempty;
use serde_json::{Map, Value};

impl<'a> Compiler<'a> {
    pub(super) fn string(&mut self, obj: &Map<String, Value>, ptr: &str) -> Result<Option<Node>> {
        let min = count(obj, "minLength", ptr)?;
        let max = count(obj, "maxLength", ptr)?;
        if min.unwrap_or(0) > max.unwrap_or(u32::MAX) {
            return Ok(None);
        }
        let more = match obj.get(MORE_PATTERNS) {
            Some(Value::Array(list)) => list.as_slice(),
            _ => &[],
        };
        let mut parts: Vec<Node> = Vec::new();
        let mut never_empty = false;
        for p in obj.get("pattern").into_iter().chain(more) {
            let Value::String(p) = p else {
                return refuse(&format!("{ptr}/pattern"), "`pattern` must be a string");
            };
            let r = strings::pattern_regex(p).or_else(|e| refuse(&format!("{ptr}/pattern"), e))?;
            never_empty = never_empty || matches_only_nonempty(&r);
            parts.push(re(&r));
        }
        let format = asserted_format(obj.get("format"), self.opts.assert_formats, ptr)?;
        // The encoded contents every constraint allows: one DFA, their product.
        parts.extend(format.map(|pieces| Node::seq(pieces.iter().map(|r| re(r)).collect())));
        // `minLength: 1` beside a pattern that matches no empty text says
        // nothing more (a pattern's text is whole encoded characters); its
        // product with a long pattern cost milliseconds (a 200-word count).
        let min = min.filter(|&m| !(m == 1 && never_empty));
        if min.is_some() || max.is_some() || parts.is_empty() {
            parts.push(Node::repeat(re(strings::ANY_CHAR), min.unwrap_or(0), max));
        }
        Ok(Some(match parts.len() {
            1 => self.string_node(parts.pop()),
            // Quoted on both sides, the intersection is still one lexeme.
            _ => Node::Intersect(
                parts
                    .into_iter()
                    .map(|p| self.string_node(Some(p)))
                    .collect(),
            ),
        }))
    }

    /// Numbers; with bounds, each bound is a regex over the number's text
    /// and the lexeme their product (see `decimals` for the forms produced).
    pub(super) fn number(&mut self, obj: &Map<String, Value>, ptr: &str) -> Result<Option<Node>> {
        let excl = |k: &str| obj.get(k) == Some(&Value::Bool(true)); // draft 4
        let keywords = [
            (
                "minimum",
                if excl("exclusiveMinimum") {
                    Cmp::Gt
                } else {
                    Cmp::Ge
                },
            ),
            (
                "maximum",
                if excl("exclusiveMaximum") {
                    Cmp::Lt
                } else {
                    Cmp::Le
                },
            ),
            ("exclusiveMinimum", Cmp::Gt),
            ("exclusiveMaximum", Cmp::Lt),
        ];
        let mut parts = Vec::new();
        for (k, op) in keywords {
            let bound = match obj.get(k) {
                None | Some(Value::Bool(_)) => continue,
                Some(Value::Number(n)) => decimal_text(n),
                Some(_) => return refuse(&format!("{ptr}/{k}"), format!("`{k}` must be a number")),
            };
            match decimals::bound_regex(&bound, op) {
                Some(r) => parts.push(re(&r)),
                None => return Ok(None),
            }
        }
        parts.extend(self.divisibility(obj, ptr)?);
        if obj.contains_key(NON_INTEGER) {
            parts.push(re(if self.before_draft6 {
                // Drafts 3-4: any number with a fraction or an exponent.
                r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+(?:[eE][+-]?[0-9]+)?|[eE][+-]?[0-9]+)"
            } else {
                r"-?(?:0|[1-9][0-9]*)\.[0-9]*[1-9][0-9]*"
            }));
        }
        // Excluded values are compared as decimals too: only in those forms.
        let compared = obj
            .get("not")
            .is_some_and(|n| n.get("enum").or(n.get("const")).is_some());
        Ok(Some(match parts.len() {
            0 if compared => re(decimals::FORMS),
            0 => re(NUMBER),
            1 => parts.pop().expect("one bound"),
            _ => Node::Intersect(parts),
        }))
    }

    pub(super) fn integer(&mut self, obj: &Map<String, Value>, ptr: &str) -> Result<Option<Node>> {
        let num = |k: &str| -> Result<Option<f64>> {
            match obj.get(k) {
                None | Some(Value::Bool(_)) => Ok(None),
                Some(Value::Number(n)) => Ok(n.as_f64()),
                Some(_) => refuse(&format!("{ptr}/{k}"), format!("`{k}` must be a number")),
            }
        };
        let excl = |k: &str| obj.get(k) == Some(&Value::Bool(true)); // draft 4
        let mut lo = num("minimum")?.map(|m| {
            if excl("exclusiveMinimum") {
                m.floor() as i128 + 1
            } else {
                m.ceil() as i128
            }
        });
        let mut hi = num("maximum")?.map(|m| {
            if excl("exclusiveMaximum") {
                m.ceil() as i128 - 1
            } else {
                m.floor() as i128
            }
        });
        if let Some(m) = num("exclusiveMinimum")? {
            lo = Some(lo.unwrap_or(i128::MIN).max(m.floor() as i128 + 1));
        }
        if let Some(m) = num("exclusiveMaximum")? {
            hi = Some(hi.unwrap_or(i128::MAX).min(m.ceil() as i128 - 1));
        }
        if obj.contains_key(NON_INTEGER) {
            return Ok(None);
        }
        let fraction = if self.before_draft6 { "" } else { "(?:\\.0+)?" };
        let Some(range) = numbers::int_range_regex(lo, hi) else {
            return Ok(None);
        };
        let mut parts = vec![re(&format!("{range}{fraction}"))];
        parts.extend(self.divisibility(obj, ptr)?);
        Ok(Some(match parts.len() {
            1 => parts.pop().expect("one part"),
            _ => Node::Intersect(parts),
        }))
    }

    /// `multipleOf` (and its negation): the number texts it keeps, as parts
    /// of an intersection (written without an exponent).
    fn divisibility(&self, obj: &Map<String, Value>, ptr: &str) -> Result<Vec<Node>> {
        let mut parts = Vec::new();
        for (k, negated) in [("multipleOf", false), (NOT_MULTIPLE_OF, true)] {
            let divisors = match obj.get(k) {
                None => continue,
                Some(Value::Array(list)) if negated => list.as_slice(),
                Some(one) => std::slice::from_ref(one),
            };
            let at = format!("{ptr}/{k}");
            let mut multiples = Vec::new();
            for d in divisors {
                let Value::Number(n) = d else {
                    return refuse(&at, "`multipleOf` must be a number");
                };
                let divisor = decimal_text(n);
                decimals::check_divisor(&divisor).or_else(|e| refuse(&at, e))?;
                multiples.push(Node::DecimalMultiples(divisor));
            }
            if negated {
                // A multiple of none of them.
                let none = multiples.into_iter().fold(re(PLAIN_NUMBER), |rest, m| {
                    Node::Minus(Box::new(rest), Box::new(m))
                });
                parts.push(none);
            } else {
                parts.extend(multiples);
            }
        }
        Ok(parts)
    }
}

/// The regex of `format` when formats are asserted; a standard format
/// maskpar cannot express exactly is refused (never read as an annotation).
pub(super) fn asserted_format(
    format: Option<&Value>,
    assert_formats: bool,
    ptr: &str,
) -> Result<Option<Vec<String>>> {
    let Some(name) = format.and_then(Value::as_str).filter(|_| assert_formats) else {
        return Ok(None);
    };
    match strings::format_pieces(name) {
        Some(r) => Ok(Some(r)),
        None if strings::STANDARD_FORMATS.contains(&name) => refuse(
            &format!("{ptr}/format"),
            format!("the format {name:?} is not supported yet (assert_formats=False reads formats as annotations)"),
        ),
        None => Ok(None),
    }
}
