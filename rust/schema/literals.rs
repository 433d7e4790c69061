//! `enum` and `const`: each allowed value that also satisfies the schema's
//! other keywords (decided on the value by `check::satisfies`, not compiled)
//! is written out as the exact text json.dumps writes for it, in the chosen
//! layout; no such value gives the empty language (`never`).
//!
//! Strings take json.dumps's encoding (`strings::encode`). Numbers take
//! Python's text for them (`python_number`); since JSON compares numbers by
//! value, an integral one also takes its int and float forms (`2`, `2.0`,
//! `-0` for zero). Arrays are written item by item. An object's members may
//! come in any order (equal objects list their keys differently): 16 or
//! more objects of one enum are one record automaton (`records`);
//! otherwise, while that makes at most `PERMUTED_ORDERS` texts, every order
//! is written out (a regular node, so an enum of many objects is one
//! lexeme); past it the object goes through the same `members` as object
//! schemas, with every member required, and has at most `MAX_MEMBERS` keys.
//! In schema key order an object is written in its own order, as json.dumps
//! writes it.

use super::keywords::pinned_values;
use super::objects::MemberCounts;
use super::{check, lit, re, records, refuse, strings, Compiler, KeyOrder};
use crate::cfg::ast::Node;
use crate::cfg::members::MAX_MEMBERS;
use crate::error::Result;
use serde_json::{Map, Value};

impl<'a> Compiler<'a> {
    /// `enum` / `const`: the texts of the values that also satisfy the
    /// schema's other keywords.
    pub(super) fn enumeration(
        &mut self,
        schema: &Value,
        obj: &'a Map<String, Value>,
        ptr: &str,
    ) -> Result<Node> {
        let Some(values) = pinned_values(obj) else {
            return refuse(&format!("{ptr}/enum"), "`enum` must be an array");
        };
        let mut rest = schema.clone();
        if let Value::Object(o) = &mut rest {
            o.remove("enum");
            o.remove("const");
        }
        let mut alts = Vec::new();
        // Integral numbers share one node, so a large numeric enum is one
        // trie of int texts followed by the optional float tail.
        let mut ints = Vec::new();
        // Flat objects in any order may be one automaton (`records`).
        let mut records = Vec::new();
        for v in values {
            crate::budget::charge(1)?;
            if check::satisfies(v, &rest, ptr, self.opts.assert_formats)? {
                match v {
                    Value::Number(n) if !python_number(n).contains('e') => {
                        match integral_words(n) {
                            Some(words) => ints.extend(words),
                            None => alts.push(self.literal(v, ptr)?),
                        }
                    }
                    Value::Object(o)
                        if self.opts.key_order == KeyOrder::Any && records::may_be_record(o) =>
                    {
                        records.push(o)
                    }
                    _ => alts.push(self.literal(v, ptr)?),
                }
            }
        }
        let spelled = match records.len() >= records::MIN_RECORDS {
            true => self.records(records, ptr, &mut alts)?,
            false => records,
        };
        for o in spelled {
            // Cloned back into a value only where spelled out.
            alts.push(self.literal(&Value::Object(o.clone()), ptr)?);
        }
        if !ints.is_empty() {
            ints.sort_unstable();
            ints.dedup();
            alts.push(integral_forms(ints));
        }
        if alts.is_empty() {
            return Ok(self.never());
        }
        Ok(Node::alt(alts))
    }

    /// The text of one JSON value, as json.dumps writes it (object keys in
    /// the order given).
    pub(super) fn literal(&mut self, v: &Value, ptr: &str) -> Result<Node> {
        Ok(match v {
            Value::Null => lit("null"),
            Value::Bool(b) => lit(if *b { "true" } else { "false" }),
            Value::Number(n) => number_literal(n),
            Value::String(s) => lit(&format!("\"{}\"", strings::encode(s))),
            Value::Array(a) if a.is_empty() => Node::seq(vec![lit("["), self.ws(), lit("]")]),
            Value::Array(a) => self.nested(|c| {
                let mut items = Vec::new();
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        items.push(c.item_sep());
                    }
                    items.push(c.literal(x, ptr)?);
                }
                Ok(c.container("[", Node::seq(items), false, "]"))
            })?,
            Value::Object(o)
                if self.opts.key_order == KeyOrder::Any
                    && o.len() > MAX_MEMBERS
                    && spelled_orders(v) > PERMUTED_ORDERS =>
            {
                return refuse(
                    ptr,
                    format!(
                        "an `enum`/`const` object with {} keys: at most \
                         {MAX_MEMBERS} (its keys may come in any order)",
                        o.len()
                    ),
                )
            }
            Value::Object(o) => self.nested(|c| {
                let members = o
                    .iter()
                    .map(|(k, x)| Ok((k.clone(), c.literal(x, ptr)?)))
                    .collect::<Result<Vec<(String, Node)>>>()?;
                if c.opts.key_order == KeyOrder::Schema {
                    // In the value's own order, as json.dumps writes it.
                    return Ok(c.fixed_members(&members));
                }
                if spelled_orders(v) <= PERMUTED_ORDERS {
                    // Equal objects may list their keys in any order: each
                    // order spelled out, a regular node (an enum of many such
                    // objects is one lexeme, see `cfg::valueunion`).
                    let orders = permutations(members.len()).into_iter().map(|order| {
                        let ordered: Vec<(String, Node)> =
                            order.iter().map(|&i| members[i].clone()).collect();
                        c.fixed_members(&ordered)
                    });
                    return Ok(Node::alt(orders.collect()));
                }
                // Past that, member sets, every member required.
                let listed: Vec<(String, Node, bool)> =
                    members.into_iter().map(|(k, n)| (k, n, true)).collect();
                c.members(&listed, None, MemberCounts::default(), ptr)
            })?,
        })
    }
}

/// An `enum`/`const` object is written as every order of its members when
/// that makes at most this many texts of it (its nested objects' orders
/// multiply in): four members, or two of two members inside one of three.
/// Larger ones go through member sets, which cost no more per order.
const PERMUTED_ORDERS: usize = 24;

/// How many texts `v` has when each of its objects is written in every
/// order of its members (saturating).
fn spelled_orders(v: &Value) -> usize {
    match v {
        Value::Array(a) => a.iter().map(spelled_orders).fold(1, usize::saturating_mul),
        Value::Object(o) => o.values().map(spelled_orders).fold(
            (1..=o.len()).fold(1, usize::saturating_mul),
            usize::saturating_mul,
        ),
        _ => 1,
    }
}

/// Every order of `0..n`.
fn permutations(n: usize) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new()];
    for k in 0..n {
        // Insert `k` at every position of each order of `0..k`.
        out = out
            .into_iter()
            .flat_map(|order: Vec<usize>| {
                (0..=k).map(move |at| {
                    let mut o = order.clone();
                    o.insert(at, k);
                    o
                })
            })
            .collect();
    }
    out
}

/// A number equal to `n`, as json.dumps writes ints and floats: an integral
/// value may be written as an int or as a float (`2`, `2.0`, Python's repr).
fn number_literal(n: &serde_json::Number) -> Node {
    let repr = python_number(n);
    let Some(words) = integral_words(n) else {
        return lit(&repr);
    };
    let mut alts = vec![integral_forms(words)];
    if repr.contains('e') {
        alts.push(lit(&repr));
    }
    Node::alt(alts)
}

/// The int texts of `n` if it is integral (`-0` too for zero), else None.
pub(super) fn integral_words(n: &serde_json::Number) -> Option<Vec<String>> {
    let f = n.as_f64().unwrap_or(f64::NAN);
    let int_text = if n.is_i64() || n.is_u64() {
        n.to_string()
    } else if f.fract() == 0.0 && f.abs() < 1e300 {
        format!("{f:.0}")
    } else {
        return None;
    };
    let digits = int_text.trim_start_matches('-');
    Some(if f == 0.0 {
        vec![digits.to_string(), format!("-{digits}")]
    } else {
        vec![int_text.clone()]
    })
}

/// What may follow an integral number's int text: its float forms' `.0`,
/// `.00`, ... (`records` reads this node as an int end).
pub(super) const FLOAT_ZEROS: &str = "(?:\\.0+)?";

/// Integral values written as ints or as floats: the words, then an
/// optional `.0`, `.00`, ... (a trie of the words when there are many).
fn integral_forms(words: Vec<String>) -> Node {
    let words = Node::alt(words.into_iter().map(Node::Literal).collect());
    Node::seq(vec![words, re(FLOAT_ZEROS)])
}

/// The text Python's json.dumps writes for a number from the schema.
pub(super) fn python_number(n: &serde_json::Number) -> String {
    if n.is_i64() || n.is_u64() {
        return n.to_string();
    }
    let f = n.as_f64().unwrap_or(0.0);
    // Shortest round-trip digits, then Python's repr layout.
    let sci = format!("{:e}", f.abs());
    let (mant, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("exponent");
    let digits: String = mant.chars().filter(|c| *c != '.').collect();
    let sign = if f.is_sign_negative() { "-" } else { "" };
    if (-4..16).contains(&exp) {
        let point = exp + 1;
        let s = if point <= 0 {
            format!("0.{}{}", "0".repeat((-point) as usize), digits)
        } else if point as usize >= digits.len() {
            format!("{}{}.0", digits, "0".repeat(point as usize - digits.len()))
        } else {
            format!(
                "{}.{}",
                &digits[..point as usize],
                &digits[point as usize..]
            )
        };
        format!("{sign}{s}")
    } else {
        let m = if digits.len() > 1 {
            format!("{}.{}", &digits[..1], &digits[1..])
        } else {
            digits
        };
        format!(
            "{sign}{m}e{}{:02}",
            if exp < 0 { '-' } else { '+' },
            exp.abs()
        )
    }
}
