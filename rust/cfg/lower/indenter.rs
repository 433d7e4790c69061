//! Lark's indenter (`%declare _INDENT _DEDENT` with a newline terminal):
//! its lexemes, and the newline's automaton split by indentation width.

use std::sync::Arc;

use super::Lowerer;
use crate::cfg::ast::{IndenterSpec, Node};
use crate::cfg::indent::{self, Indenter};
use crate::cfg::lowered::Sym;
use crate::cfg::nodedfa::{cache_key, matches_only};
use crate::error::{Error, Result};

impl Lowerer<'_> {
    /// The indenter of `spec`: its lexemes, and the newline's DFA split by
    /// the indentation width.
    pub(super) fn indenter(&mut self, spec: &IndenterSpec) -> Result<Indenter> {
        if !self.terminals.contains_key(spec.newline.as_str()) {
            return Err(Error::Compile(format!(
                "%declare {} {} needs a newline terminal {} for the indenter",
                spec.indent, spec.dedent, spec.newline
            )));
        }
        let Sym::T(newline) = self.terminal(&spec.newline)? else {
            return Err(Error::Compile(format!(
                "newline terminal {} may not match the empty string",
                spec.newline
            )));
        };
        let Sym::T(indent) = self.declared_lexeme(&spec.indent)? else {
            unreachable!()
        };
        let Sym::T(dedent) = self.declared_lexeme(&spec.dedent)? else {
            unreachable!()
        };
        let open = self.brackets(&spec.open)?;
        let close = self.brackets(&spec.close)?;
        let lexeme = &mut self.lexemes[newline as usize];
        let Some(dfa) = lexeme.dfa.as_ref() else {
            return Err(Error::Compile(format!(
                "newline terminal {} matches no string",
                spec.newline
            )));
        };
        if lexeme.end_forbid.is_some() {
            return Err(Error::Compile(format!(
                "newline terminal {} may not end in a lookahead",
                spec.newline
            )));
        }
        let (measured, widths) = indent::measured(dfa)?;
        lexeme.dfa = Some(Arc::new(measured));
        Ok(Indenter {
            newline,
            indent,
            dedent,
            open,
            close,
            widths,
        })
    }

    /// The lexemes of brackets `(name, text)` that the grammar uses: the
    /// named terminal and the anonymous literal. No other lexeme may match a
    /// bracket's text, or which one ended would change the layout.
    fn brackets(&mut self, brackets: &[(String, String)]) -> Result<Vec<u32>> {
        let mut out = Vec::new();
        for (name, text) in brackets {
            // `lexeme_with`'s key: context 0 (no blocks with an indenter),
            // priority 0.
            let mut key = String::from("0\u{0}0\u{0}");
            cache_key(&Node::Literal(text.clone()), &mut key);
            let mut ids: Vec<u32> = self.lexeme_ids.get(&key).copied().into_iter().collect();
            if self.terminals.contains_key(name.as_str()) {
                if let Sym::T(id) = self.terminal(name)? {
                    ids.push(id);
                }
            }
            for &id in &ids {
                let clash = self.lexemes.iter().enumerate().find(|(other, x)| {
                    !ids.contains(&(*other as u32))
                        && x.dfa.as_ref().is_some_and(|d| {
                            d.is_accepting(d.step_bytes(d.start(), text.as_bytes()))
                        })
                });
                if let Some((_, x)) = clash {
                    return Err(Error::Compile(format!(
                        "the indenter's bracket {text:?} is also matched by /{}/",
                        x.regex
                    )));
                }
                let only_text = self.lexemes[id as usize]
                    .dfa
                    .as_ref()
                    .is_some_and(|d| matches_only(d, text.as_bytes()));
                if !only_text {
                    return Err(Error::Compile(format!(
                        "the indenter's bracket terminal {name} must match exactly {text:?}"
                    )));
                }
            }
            out.extend(ids);
        }
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }
}
