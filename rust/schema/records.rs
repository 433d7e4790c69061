//! `enum` values that are flat objects ("records": every member a string,
//! number, boolean or null), with members in any order, as one automaton
//! (`regex_dfa::records_dfa`) whose size grows with the text of the
//! records, not with their orders.
//!
//! Spelling every order of each object (`literals`) makes 24 texts of a
//! four-member object and a rule of member sets per object past that: a
//! product catalogue of 10,000 six-field rows was refused. Here each
//! member's key is its quoted text and its value the texts json.dumps may
//! write for it (an integral number also as a float with any count of
//! zeros), and the glue between members is the layout's own.
//!
//! Where the records automaton does not apply (glue that reads on with a
//! byte that starts a key or ends a value, a `whitespace_pattern` that
//! reads a quote, say, or more states than a state number holds) the
//! values are spelled out as before.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::literals::{integral_words, python_number};
use super::objects::key_text;
use super::{strings, Compiler};
use crate::cfg::ast::{Node, Prebuilt};
use crate::cfg::regular_dfa;
use crate::error::Result;
use crate::regex_dfa::{records_dfa, Record, RecordGlue, Spelling, MAX_RECORD_MEMBERS};

/// An `enum` needs at least this many records for them to become one
/// automaton: fewer are spelled out (cheap, and the spelled union is a
/// table the rest of the grammar may join with).
pub(super) const MIN_RECORDS: usize = 16;

/// Whether `o` may be a record: non-empty, at most `MAX_RECORD_MEMBERS`
/// members, each a scalar.
pub(super) fn is_record(o: &Map<String, Value>) -> bool {
    !o.is_empty() && o.len() <= MAX_RECORD_MEMBERS && o.values().all(|v| spellings(v).is_some())
}

impl Compiler<'_> {
    /// The automaton of `records` (objects for which `is_record` holds) in
    /// any key order, one level deeper than the enum, or None where it does
    /// not apply.
    pub(super) fn records(&mut self, records: &[&Map<String, Value>]) -> Result<Option<Node>> {
        self.nested(|c| {
            let glue = c.member_glue();
            let part =
                |n: &Node| -> Result<Option<Arc<crate::regex_dfa::ByteDfa>>> { regular_dfa(n) };
            let (Some(open), Some(key_sep), Some(item_sep), Some(close)) = (
                part(&glue.open)?,
                part(&glue.key_sep)?,
                part(&glue.item_sep)?,
                part(&glue.close)?,
            ) else {
                return Ok(None);
            };
            let glue = RecordGlue {
                open,
                key_sep,
                item_sep,
                close,
            };
            let records: Vec<Record> = records
                .iter()
                .map(|o| Record {
                    members: o
                        .iter()
                        .map(|(k, v)| {
                            let texts = spellings(v).expect("records hold scalars");
                            (key_text(k).into_bytes(), texts)
                        })
                        .collect(),
                })
                .collect();
            let dfa = records_dfa(&records, &glue)?;
            Ok(dfa.map(|d| Node::Automaton(Prebuilt(Arc::new(d)))))
        })
    }
}

/// The texts json.dumps may write for scalar `v` (None: not a scalar), as
/// `literals` writes them: an integral number as its int text, also as a
/// float with any count of zeros, and in Python's exponent form if that is
/// its repr.
fn spellings(v: &Value) -> Option<Vec<Spelling>> {
    let one = |text: String, zeros| Spelling {
        text: text.into_bytes(),
        zeros,
    };
    Some(match v {
        Value::Null => vec![one("null".into(), false)],
        Value::Bool(b) => vec![one(b.to_string(), false)],
        Value::String(s) => vec![one(format!("\"{}\"", strings::encode(s)), false)],
        Value::Number(n) => {
            let repr = python_number(n);
            match integral_words(n) {
                None => vec![one(repr, false)],
                Some(words) => {
                    let mut out: Vec<Spelling> = words.into_iter().map(|w| one(w, true)).collect();
                    if repr.contains('e') {
                        out.push(one(repr, false));
                    }
                    out
                }
            }
        }
        Value::Array(_) | Value::Object(_) => return None,
    })
}
