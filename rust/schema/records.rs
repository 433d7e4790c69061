//! `enum` values that are objects ("records") with members in any order, as
//! one automaton (`regex_dfa::records_dfa`) whose size grows with the text
//! of the records, not with their orders.
//!
//! Spelling every order of each object (`literals`) makes 24 texts of a
//! four-member object and a rule of member sets per object past that: a
//! product catalogue of 10,000 six-field rows was refused. Here each
//! member's key is its quoted text and its value the texts `literals`
//! writes for it, read as bytes, runs of the layout's flexible whitespace
//! (between the tokens of an array or object value) and int ends (where an
//! integral number's float forms may follow); the glue between members is
//! the layout's own.
//!
//! A value that is not such a finite set of texts (an object of more than
//! four members in any order inside it, which `literals` writes with member
//! sets; more than `MAX_SPELLINGS` texts) leaves its record spelled out, as
//! does everything where the records automaton does not apply (glue that
//! reads on with a byte that starts a key or ends a value, more states than
//! a state number holds).

use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;
use serde_json::{Map, Value};

use super::literals::FLOAT_ZEROS;
use super::objects::key_text;
use super::{re, Compiler};
use crate::cfg::ast::{Node, Prebuilt};
use crate::cfg::regular_dfa;
use crate::error::Result;
use crate::regex_dfa::{
    records_dfa, ByteDfa, Part, Record, RecordGlue, Spelling, MAX_RECORD_MEMBERS,
};

/// An `enum` needs at least this many records for them to become one
/// automaton: fewer are spelled out (cheap, and the spelled union is a
/// table the rest of the grammar may join with).
pub(super) const MIN_RECORDS: usize = 16;

/// The texts of the arrays and objects met, by their JSON text.
#[derive(Default)]
struct Texts(HashMap<String, Option<Arc<[Spelling]>>>);

/// Texts one member value may have (its nested objects' orders multiplied
/// out): past it the record is spelled out.
const MAX_SPELLINGS: usize = 64;

/// Whether `o` may be a record: non-empty, with at most
/// `MAX_RECORD_MEMBERS` members (whether its values can be read as texts
/// is known once they are written, in `records`).
pub(super) fn may_be_record(o: &Map<String, Value>) -> bool {
    !o.is_empty() && o.len() <= MAX_RECORD_MEMBERS
}

impl<'a> Compiler<'a> {
    /// `objects` (for which `may_be_record` holds) in any key order: those
    /// whose values are finite sets of texts become one records automaton,
    /// pushed to `alts` when there are at least `MIN_RECORDS` and it
    /// applies; the rest are returned, to be spelled out.
    pub(super) fn records(
        &mut self,
        objects: Vec<&'a Map<String, Value>>,
        ptr: &str,
        alts: &mut Vec<Node>,
    ) -> Result<Vec<&'a Map<String, Value>>> {
        let mut records = Vec::with_capacity(objects.len());
        let mut rest = Vec::new();
        let mut texts = Texts::default();
        let glue = self.nested(|c| {
            for o in &objects {
                match c.record(o, ptr, &mut texts)? {
                    Some(r) => records.push(r),
                    None => rest.push(*o),
                }
            }
            c.record_glue()
        })?;
        if records.len() < MIN_RECORDS {
            return Ok(objects);
        }
        let Some(glue) = glue else {
            return Ok(objects);
        };
        match records_dfa(&records, &glue)? {
            Some(dfa) => {
                alts.push(Node::Automaton(Prebuilt(Arc::new(dfa))));
                Ok(rest)
            }
            None => Ok(objects),
        }
    }

    /// The record of object `o` (one level down), or None where a value is
    /// not a finite set of texts.
    fn record(
        &mut self,
        o: &Map<String, Value>,
        ptr: &str,
        texts: &mut Texts,
    ) -> Result<Option<Record>> {
        let mut members = Vec::with_capacity(o.len());
        for (k, v) in o {
            let Some(spelled) = self.value_texts(v, ptr, texts)? else {
                return Ok(None);
            };
            members.push((key_text(k).into_bytes(), spelled));
        }
        Ok(Some(Record { members }))
    }

    /// The texts of member value `v` (one level down), sorted; arrays and
    /// objects from `texts` when met before (a table's columns repeat a
    /// few values, and writing one's nodes makes dozens of allocations,
    /// which the compile budget counts).
    fn value_texts(
        &mut self,
        v: &Value,
        ptr: &str,
        texts: &mut Texts,
    ) -> Result<Option<Arc<[Spelling]>>> {
        let container = matches!(v, Value::Array(_) | Value::Object(_));
        let seen = container.then(|| v.to_string());
        if let Some(found) = seen.as_ref().and_then(|key| texts.0.get(key)) {
            return Ok(found.clone());
        }
        let node = self.literal(v, ptr)?;
        let spelled = spellings(&node, &self.ws()).map(|mut s| {
            s.sort_unstable();
            s.dedup();
            Arc::<[Spelling]>::from(s)
        });
        if let Some(key) = seen {
            texts.0.insert(key, spelled.clone());
        }
        Ok(spelled)
    }

    /// The automata of the layout's glue around members (one level down),
    /// or None where one matches nothing.
    fn record_glue(&self) -> Result<Option<RecordGlue>> {
        let glue = self.member_glue();
        let part = |n: &Node| -> Result<Option<Arc<ByteDfa>>> { regular_dfa(n) };
        let (Some(open), Some(key_sep), Some(item_sep), Some(close)) = (
            part(&glue.open)?,
            part(&glue.key_sep)?,
            part(&glue.item_sep)?,
            part(&glue.close)?,
        ) else {
            return Ok(None);
        };
        let ws = self.ws();
        let space = match ws {
            Node::Empty => None,
            ws => part(&ws)?,
        };
        Ok(Some(RecordGlue {
            open,
            key_sep,
            item_sep,
            close,
            space,
        }))
    }
}

/// The texts of value node `n` as `literals` writes it, with `ws` (the
/// layout's flexible whitespace) a run and the float zeros after an
/// integral number an int end; None where `n` is not such a finite set.
fn spellings(n: &Node, ws: &Node) -> Option<Vec<Spelling>> {
    let mut out = vec![Vec::new()];
    spell_into(n, ws, &mut out)?;
    Some(out.into_iter().map(Spelling).collect())
}

/// Each text of `out` followed by each text of `n`.
fn spell_into(n: &Node, ws: &Node, out: &mut Vec<Vec<Part>>) -> Option<()> {
    let append = |out: &mut Vec<Vec<Part>>, parts: &[Part]| {
        out.iter_mut().for_each(|s| s.extend_from_slice(parts));
    };
    if *ws != Node::Empty && n == ws {
        append(out, &[Part::Space]);
        return Some(());
    }
    if *n == re(FLOAT_ZEROS) {
        append(out, &[Part::IntEnd]);
        return Some(());
    }
    match n {
        Node::Empty => {}
        Node::Literal(s) => {
            let bytes: Vec<Part> = s.bytes().map(Part::Byte).collect();
            append(out, &bytes);
        }
        Node::Seq(items) => {
            for item in items {
                spell_into(item, ws, out)?;
            }
        }
        Node::Alt(alts) => {
            let heads = std::mem::take(out);
            for a in alts {
                let mut spelled = heads.clone();
                spell_into(a, ws, &mut spelled)?;
                out.append(&mut spelled);
                if out.len() > MAX_SPELLINGS {
                    return None;
                }
            }
        }
        _ => return None,
    }
    Some(())
}
