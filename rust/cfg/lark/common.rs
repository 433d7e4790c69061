//! Lark's `common` module, for `%import common.X`: its terminals as Lark
//! writes them, read by the same parser, under a `common::` namespace.

use super::blocks::Nested;
use super::defs::Defs;
use super::Parser;
use crate::cfg::ast::{Node, TermDef};
use crate::cfg::cursor::Cursor;

/// Definitions for `%import common.X`: Lark's `common` module as Lark
/// writes it (so imported terminals rank and match as in Lark), without its
/// comments.
const COMMON: &str = r#"
DIGIT: "0".."9"
HEXDIGIT: "a".."f" | "A".."F" | DIGIT
INT: DIGIT+
SIGNED_INT: ["+" | "-"] INT
DECIMAL: INT "." INT? | "." INT
_EXP: ("e" | "E") SIGNED_INT
FLOAT: INT _EXP | DECIMAL _EXP?
SIGNED_FLOAT: ["+" | "-"] FLOAT
NUMBER: FLOAT | INT
SIGNED_NUMBER: ["+" | "-"] NUMBER
_STRING_INNER: /.*?/
_STRING_ESC_INNER: _STRING_INNER /(?<!\\)(\\\\)*?/
ESCAPED_STRING: "\"" _STRING_ESC_INNER "\""
LCASE_LETTER: "a".."z"
UCASE_LETTER: "A".."Z"
LETTER: UCASE_LETTER | LCASE_LETTER
WORD: LETTER+
CNAME: ("_" | LETTER) ("_" | LETTER | DIGIT)*
WS_INLINE: (" " | /\t/)+
WS: /[ \t\f\r\n]/+
CR: /\r/
LF: /\n/
NEWLINE: (CR? LF)+
SH_COMMENT: /#[^\n]*/
CPP_COMMENT: /\/\/[^\n]*/
C_COMMENT: "/*" /(.|\n)*?/ "*/"
SQL_COMMENT: /--[^\n]*/
"#;

pub(super) fn common_terminals() -> Vec<TermDef> {
    let mut defs = Defs::default();
    let mut p = Parser {
        c: Cursor::new(COMMON, "Lark"),
        nested: Nested::default(),
        context: 0,
        initial_skip: true,
    };
    p.statements(&mut defs)
        .expect("the built-in common terminals parse");
    defs.terminals
}

/// Renames references to common terminals into their `common::` namespace.
pub(super) fn namespaced(n: &Node) -> Node {
    match n {
        Node::Ref(name, pos) => Node::Ref(format!("common::{name}"), *pos),
        Node::Seq(v) => Node::Seq(v.iter().map(namespaced).collect()),
        Node::Alt(v) => Node::Alt(v.iter().map(namespaced).collect()),
        Node::Repeat { node, min, max } => Node::Repeat {
            node: Box::new(namespaced(node)),
            min: *min,
            max: *max,
        },
        other => other.clone(),
    }
}
