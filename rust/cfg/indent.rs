//! Indentation as tokens: Lark's `Indenter` post-lexer (the one its Python
//! grammars `%declare _INDENT _DEDENT` for), run inside the parser.
//!
//! After each newline lexeme outside brackets, the parser reads the newline,
//! then `_INDENT` if the indentation after the text's last `\n` is deeper than
//! the innermost level, or one `_DEDENT` per level it closes (a width between
//! two levels is refused). Newlines inside `(`, `[` or `{` are skipped, and
//! at the end of the text every open level is closed. Widths count a space
//! as 1 and a tab as `TAB_LEN`, as Lark's `PythonIndenter` does.
//!
//! The width is read from the newline scan's DFA state: the lexeme's DFA is
//! split by the width of the text read (`ByteDfa::counted`), so masks, lexer
//! caches and memos see it as part of the lexer state. An Earley set keeps
//! the layout (open brackets and levels) after its text; with longest-match
//! lexing every lexeme starts at the newest set, so that layout is the one
//! the next lexeme continues from.

use crate::error::Result;
use crate::regex_dfa::ByteDfa;

/// Columns a tab counts for (Lark's `PythonIndenter.tab_len`).
pub const TAB_LEN: u32 = 8;
/// Widths are tracked up to this column; deeper ones are `DEEPER`.
pub const MAX_WIDTH: u32 = 255;
/// Any width past `MAX_WIDTH`: deeper than every level below it, and
/// refused where it would have to be compared with another such width.
pub const DEEPER: u32 = MAX_WIDTH + 1;
/// Bound on the states of the newline lexeme split by width.
const MAX_STATES: usize = 1 << 16;

/// The indenter's state after some text.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Layout {
    /// Brackets open (newlines inside them are skipped).
    pub brackets: u32,
    /// Indentation levels above column 0, innermost last.
    pub levels: Vec<u32>,
}

/// The lexemes the indenter reads and makes, and the newline's widths.
#[derive(Debug)]
pub struct Indenter {
    pub newline: u32,
    pub indent: u32,
    pub dedent: u32,
    pub open: Vec<u32>,
    pub close: Vec<u32>,
    /// Per state of the newline lexeme's DFA: the width its text ends with.
    pub widths: Vec<u32>,
}

/// The width after `byte` of a text whose width was `w`: the count restarts
/// at each `\n`.
fn width_after(w: u32, byte: u8) -> u32 {
    let add = match byte {
        b'\n' => return 0,
        b' ' => 1,
        b'\t' => TAB_LEN,
        _ => 0,
    };
    (w + add).min(DEEPER)
}

/// `dfa` split by the width of the text read, and each state's width.
pub fn measured(dfa: &ByteDfa) -> Result<(ByteDfa, Vec<u32>)> {
    let kind = |b: u8| u32::from(matches!(b, b'\n' | b' ' | b'\t')) * b as u32;
    dfa.counted(0, kind, MAX_STATES, width_after)
}

impl Indenter {
    /// The tokens the parser reads after a newline of width `width` from
    /// `layout` (the newline first), and the layout after them; None if the
    /// width closes levels to one that was never opened.
    pub fn after_newline(&self, layout: &Layout, width: u32) -> Option<(Vec<u32>, Layout)> {
        let mut tokens = vec![self.newline];
        let mut levels = layout.levels.clone();
        let top = levels.last().copied().unwrap_or(0);
        if width > top {
            tokens.push(self.indent);
            levels.push(width);
        } else if width == DEEPER {
            // Two widths past MAX_WIDTH cannot be compared.
            return None;
        } else {
            while levels.last().is_some_and(|&l| width < l) {
                levels.pop();
                tokens.push(self.dedent);
            }
            if levels.last().copied().unwrap_or(0) != width {
                return None;
            }
        }
        Some((
            tokens,
            Layout {
                brackets: layout.brackets,
                levels,
            },
        ))
    }

    /// The layout after lexeme `lexeme` (not the newline) from `layout`;
    /// None for a closing bracket with none open.
    pub fn after_lexeme(&self, layout: &Layout, lexeme: u32) -> Option<Layout> {
        let brackets = if self.open.contains(&lexeme) {
            layout.brackets + 1
        } else if self.close.contains(&lexeme) {
            layout.brackets.checked_sub(1)?
        } else {
            return Some(layout.clone());
        };
        Some(Layout {
            brackets,
            levels: layout.levels.clone(),
        })
    }

    /// The dedents that close every level at the end of the text.
    pub fn at_end(&self, layout: &Layout) -> Vec<u32> {
        vec![self.dedent; layout.levels.len()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn indenter() -> Indenter {
        Indenter {
            newline: 1,
            indent: 2,
            dedent: 3,
            open: vec![4],
            close: vec![5],
            widths: vec![],
        }
    }

    #[test]
    fn newlines_open_and_close_levels_like_larks_indenter() {
        let ind = indenter();
        let at = |levels: Vec<u32>| Layout {
            brackets: 0,
            levels,
        };
        let (t, l) = ind.after_newline(&at(vec![]), 4).unwrap();
        assert_eq!((t, l.levels), (vec![1, 2], vec![4]));
        let (t, l) = ind.after_newline(&at(vec![4, 8]), 8).unwrap();
        assert_eq!((t, l.levels), (vec![1], vec![4, 8]));
        let (t, l) = ind.after_newline(&at(vec![4, 8]), 0).unwrap();
        assert_eq!((t, l.levels), (vec![1, 3, 3], vec![]));
        assert!(ind.after_newline(&at(vec![4, 8]), 6).is_none());
        let (t, l) = ind.after_newline(&at(vec![4]), DEEPER).unwrap();
        assert_eq!((t, l.levels), (vec![1, 2], vec![4, DEEPER]));
        assert!(ind.after_newline(&at(vec![DEEPER]), DEEPER).is_none());
        assert_eq!(ind.at_end(&at(vec![4, 8])), vec![3, 3]);
        let open = ind.after_lexeme(&at(vec![4]), 4).unwrap();
        assert_eq!(open.brackets, 1);
        assert_eq!(ind.after_lexeme(&open, 5).unwrap(), at(vec![4]));
        assert!(ind.after_lexeme(&at(vec![]), 5).is_none());
    }

    #[test]
    fn widths_count_after_the_last_newline() {
        let dfa = ByteDfa::new(r"(\r?\n[\t ]*|#[^\n]*)+").unwrap();
        let (d, widths) = measured(&dfa).unwrap();
        let width_of = |text: &[u8]| {
            let q = d.step_bytes(d.start(), text);
            assert!(d.is_accepting(q), "{text:?}");
            widths[q as usize]
        };
        assert_eq!(width_of(b"\n    "), 4);
        assert_eq!(width_of(b"\n  \t"), 2 + TAB_LEN);
        assert_eq!(width_of(b"\n        \n  "), 2);
        assert_eq!(width_of(b"\n  # a b\n\t"), TAB_LEN);
        // Lark counts the spaces of a comment the text ends in.
        assert_eq!(width_of(b"\n# a b"), 2);
        assert_eq!(width_of(&[b"\n".as_slice(), &[b' '; 300]].concat()), DEEPER);
    }
}
