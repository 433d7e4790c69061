//! Lookaround assertions in Lark terminals, rewritten where a DFA can keep
//! them exactly.
//!
//! A DFA cannot look around, but the assertions real grammars use are
//! bounded and sit where they can be rewritten (Python's string and number
//! terminals in Lark's and syncode's grammars):
//!
//! - A lookbehind of one character right after a one-character atom is
//!   decided by the atom alone: `"""(?<!\\)` always holds.
//! - `.*?(?<!\\)(\\\\)*?` (lazy text up to a delimiter not escaped by a
//!   backslash) ends exactly where an even run of backslashes does, which is
//!   where `(?:[^\\\n]|\\.)*?` can end: the same candidate ends, tried in the
//!   same order.
//! - `Q(?!QQ)` then lazy content then `Q` (a quote that does not open a
//!   triple quote): the content never starts with `Q` (the first `Q` closes
//!   it), so the lookahead only matters for the empty string, where it reads
//!   past the match: `(?:QQ(?!Q)|Q C' C*? Q)`, with `C'` one content unit
//!   other than `Q`.
//! - A negative lookahead of one character class that holds all non-ASCII
//!   characters or none (`(?![1-9])`, `(?![^a-z])`,
//!   Verilog's comment `\*(?!\/)` in a loop, Lark's regex `\/(?!\/)`) is a
//!   condition on the byte after it. It becomes an empty named group, and
//!   `firstmatch` builds the DFA with that condition checked where the group
//!   is passed, in the order Python's `re` tries its threads; where a match
//!   ends, the condition falls on the byte after the lexeme.
//!
//! Any other lookaround is refused, naming it.

use regex_syntax::hir::{Class, HirKind};

use super::firstmatch::{self, group_name};
use crate::error::{Error, Result};
use crate::regex_dfa::{ByteDfa, ByteSet};

pub use super::firstmatch::EndConditions;
use pieces::{parse, pieces, render, render_alts, Atom, Piece};

mod pieces;

/// The flags in force: `s` (dot matches newline) and `i`, as toggled by
/// group openings like `(?is:` and `(?-s:`.
#[derive(Clone, Copy, Default)]
struct Flags {
    dot_all: bool,
    fold: bool,
}

impl Flags {
    fn within(self, open: &str) -> Flags {
        let Some(spec) = open.strip_prefix("(?").and_then(|o| o.strip_suffix(':')) else {
            return self;
        };
        let mut f = self;
        let mut on = true;
        for c in spec.chars() {
            match c {
                '-' => on = false,
                's' => f.dot_all = on,
                'i' => f.fold = on,
                _ => {}
            }
        }
        f
    }

    fn prefix(self) -> String {
        let (mut on, mut off) = (String::new(), String::new());
        for (set, c) in [(self.dot_all, 's'), (self.fold, 'i')] {
            if set {
                on.push(c);
            } else {
                off.push(c);
            }
        }
        if off.is_empty() {
            format!("(?{on})")
        } else {
            format!("(?{on}-{off})")
        }
    }
}

/// The characters one-character atom `atom` matches (as `(lo, hi)` ranges).
fn char_set(atom: &str, flags: Flags) -> Option<Vec<(u32, u32)>> {
    let hir = regex_syntax::parse(&format!("{}{atom}", flags.prefix())).ok()?;
    match hir.kind() {
        HirKind::Literal(lit) => {
            let s = std::str::from_utf8(&lit.0).ok()?;
            let mut cs = s.chars();
            let c = cs.next()? as u32;
            cs.next().is_none().then(|| vec![(c, c)])
        }
        HirKind::Class(Class::Unicode(c)) => Some(
            c.ranges()
                .iter()
                .map(|r| (r.start() as u32, r.end() as u32))
                .collect(),
        ),
        HirKind::Class(Class::Bytes(c)) => Some(
            c.ranges()
                .iter()
                .map(|r| (r.start() as u32, r.end() as u32))
                .collect(),
        ),
        _ => None,
    }
}

fn disjoint(a: &[(u32, u32)], b: &[(u32, u32)]) -> bool {
    a.iter()
        .all(|&(lo, hi)| b.iter().all(|&(l2, h2)| hi < l2 || h2 < lo))
}

fn subset(a: &[(u32, u32)], b: &[(u32, u32)]) -> bool {
    // Ranges from regex-syntax are sorted and merged, so each of a's lies
    // within one of b's.
    a.iter()
        .all(|&(lo, hi)| b.iter().any(|&(l2, h2)| l2 <= lo && hi <= h2))
}

/// The one-character atom a lookaround holds, if that is all it holds.
fn single_char(alts: &[Vec<Piece>]) -> Option<&str> {
    match alts {
        [alt] => match alt.as_slice() {
            [Piece {
                atom: Atom::Char(c),
                quant,
            }] if quant.is_empty() => Some(c),
            _ => None,
        },
        _ => None,
    }
}

fn is_char(p: &Piece, text: &str) -> bool {
    matches!(&p.atom, Atom::Char(c) if c == text) && p.quant.is_empty()
}

/// A plain literal character (the delimiter of the string idioms).
fn literal_char(p: &Piece) -> Option<char> {
    match &p.atom {
        Atom::Char(c) if p.quant.is_empty() && c.chars().count() == 1 => {
            let ch = c.chars().next()?;
            (!"\\.[]()|^$*+?{}".contains(ch)).then_some(ch)
        }
        _ => None,
    }
}

/// `(\\\\)*?` or `(?:\\\\)*?`: pairs of backslashes, lazily.
fn is_backslash_pairs(p: &Piece) -> bool {
    match &p.atom {
        Atom::Group(open, alts) if p.quant == "*?" && (open == "(" || open == "(?:") => {
            matches!(alts.as_slice(), [alt] if alt.len() == 2 && alt.iter().all(|x| is_char(x, "\\\\")))
        }
        _ => false,
    }
}

/// `(?<!\\)`.
fn is_not_after_backslash(p: &Piece) -> bool {
    matches!(&p.atom, Atom::Look(true, true, alts) if single_char(alts) == Some("\\\\"))
        && p.quant.is_empty()
}

/// `.*?` then, if `escaped`, `(?<!\\)(\\\\)*?`, starting at `alt[i]`;
/// returns how many pieces that is.
fn lazy_text(alt: &[Piece], i: usize) -> Option<(usize, bool)> {
    let dot = alt.get(i)?;
    if !matches!(&dot.atom, Atom::Char(c) if c == ".") || dot.quant != "*?" {
        return None;
    }
    match (alt.get(i + 1), alt.get(i + 2)) {
        (Some(a), Some(b)) if is_not_after_backslash(a) && is_backslash_pairs(b) => Some((3, true)),
        _ => Some((1, false)),
    }
}

/// One unit of escaped text (`escaped`) or any character, other than the
/// characters of `not` (a class body).
fn text_unit(escaped: bool, flags: Flags, not: &str) -> String {
    let newline = if flags.dot_all { "" } else { "\\n" };
    if escaped {
        format!("(?:[^\\\\{newline}{not}]|\\\\.)")
    } else if !not.is_empty() {
        format!("(?:[^{newline}{not}])").replace("[^]", "(?s:.)")
    } else {
        ".".to_string()
    }
}

fn escape_in_class(c: char) -> String {
    format!("\\x{{{:X}}}", c as u32)
}

/// Splices into `alt` the groups that change nothing (unquantified, one
/// alternative, no flags), so that an idiom split across a terminal's parts
/// (common.lark's `_STRING_INNER /(?<!\\)(\\\\)*?/`, joined as nested
/// groups) is seen as one run of pieces.
fn flatten(alt: &mut Vec<Piece>) {
    let mut i = 0;
    while i < alt.len() {
        let plain = match &alt[i].atom {
            Atom::Group(open, alts) => {
                alt[i].quant.is_empty()
                    && alts.len() == 1
                    && (open == "(?:" || open == "(")
                    // Inline flags hold to the end of their group.
                    && !alts[0]
                        .iter()
                        .any(|p| matches!(&p.atom, Atom::Other(o) if o.starts_with("(?")))
            }
            _ => false,
        };
        if plain {
            let Atom::Group(_, mut alts) = alt.remove(i).atom else {
                unreachable!("checked above")
            };
            let inner = alts.pop().expect("one alternative");
            // Not advanced: what was spliced in may start with a group.
            alt.splice(i..i, inner);
        } else {
            i += 1;
        }
    }
}

/// Rewrites the lookarounds of one alternative (see the module doc);
/// trailing lookaheads left in tail position are handled by `markers`.
fn rewrite_alt(alt: &mut Vec<Piece>, flags: Flags) -> Result<()> {
    flatten(alt);
    let mut i = 0;
    while i < alt.len() {
        // Recurse first into groups.
        if let Atom::Group(open, alts) = &mut alt[i].atom {
            let inner = flags.within(open);
            for a in alts.iter_mut() {
                rewrite_alt(a, inner)?;
            }
        }
        // Q(?!QQ) lazy-text Q: not a triple quote.
        if let (
            Some(q),
            Some(Piece {
                atom: Atom::Look(false, true, inner),
                quant,
            }),
        ) = (literal_char(&alt[i]), alt.get(i + 1))
        {
            let qq = matches!(inner.as_slice(), [a] if a.len() == 2 && a.iter().all(|x| literal_char(x) == Some(q)));
            if qq && quant.is_empty() {
                if let Some((n, escaped)) = lazy_text(alt, i + 2) {
                    if alt.get(i + 2 + n).and_then(literal_char) == Some(q) {
                        let qs = escape_in_class(q);
                        let any = text_unit(escaped, flags, "");
                        let first = text_unit(escaped, flags, &qs);
                        let text = format!("(?:{qs}{qs}(?!{qs})|{qs}{first}{any}*?{qs})");
                        alt.splice(i..i + 3 + n, pieces(&text));
                        i += 1;
                        continue;
                    }
                }
            }
        }
        // .*?(?<!\\)(\\\\)*? after a character that is not a backslash.
        if let Some((3, true)) = lazy_text(alt, i) {
            let before = i.checked_sub(1).and_then(|k| match &alt[k].atom {
                Atom::Char(c) if alt[k].quant.is_empty() => char_set(c, flags),
                _ => None,
            });
            if before.is_some_and(|set| disjoint(&set, &[('\\' as u32, '\\' as u32)])) {
                let unit = text_unit(true, flags, "");
                alt.splice(i..i + 3, pieces(&format!("(?:{unit})*?")));
                i += 1;
                continue;
            }
        }
        // A one-character lookbehind right after a one-character atom.
        if let Atom::Look(true, negated, inner) = &alt[i].atom {
            let negated = *negated;
            let look = single_char(inner).and_then(|c| char_set(c, flags));
            let before = i.checked_sub(1).and_then(|k| match &alt[k].atom {
                Atom::Char(c) if alt[k].quant.is_empty() => char_set(c, flags),
                _ => None,
            });
            if let (Some(look), Some(before)) = (look, before) {
                let in_look = if disjoint(&before, &look) {
                    Some(false)
                } else if subset(&before, &look) {
                    Some(true)
                } else {
                    None
                };
                if let Some(in_look) = in_look {
                    if in_look != negated {
                        alt.remove(i);
                    } else {
                        // The assertion always fails: nothing matches here.
                        alt[i] = pieces("[^\\x{0}-\\x{10FFFF}]").remove(0);
                        i += 1;
                    }
                    continue;
                }
            }
        }
        i += 1;
    }
    Ok(())
}

/// The first bytes of the characters of `set` (sorted, merged ranges), when
/// they tell its characters from all others: its ASCII characters, and
/// either no other character or all of them (whose UTF-8 starts with a byte
/// above 0x7F). None otherwise.
fn first_bytes(set: &[(u32, u32)]) -> Option<ByteSet> {
    let mut bytes = ByteSet::default();
    let mut others = 0u32;
    for &(lo, hi) in set {
        (lo..=hi.min(0x7F)).for_each(|b| bytes.insert(b as u8));
        if hi > 0x7F {
            let lo = lo.max(0x80);
            // Ranges may span the surrogates, which are no characters.
            let surrogates = hi.min(0xDFFF).saturating_sub(lo.max(0xD800)) + 1;
            let surrogates = if lo <= 0xDFFF && hi >= 0xD800 {
                surrogates
            } else {
                0
            };
            others += hi - lo + 1 - surrogates;
        }
    }
    // Every character above 0x7F.
    const ALL_OTHERS: u32 = 0x10FFFF - 0x7F - 0x800;
    match others {
        0 => Some(bytes),
        n if n == ALL_OTHERS => {
            (0x80..=0xFF).for_each(|b| bytes.insert(b));
            Some(bytes)
        }
        _ => None,
    }
}

/// Replaces each negative lookahead of one class (see `first_bytes`) with an empty
/// named group (`firstmatch::group_name`); `classes[k]` gets lookahead k's
/// bytes. Errors on any lookaround left.
fn markers(alt: &mut [Piece], flags: Flags, classes: &mut Vec<ByteSet>) -> Result<()> {
    for p in alt.iter_mut() {
        match &mut p.atom {
            Atom::Group(open, alts) => {
                let inner = flags.within(open);
                for a in alts.iter_mut() {
                    markers(a, inner, classes)?;
                }
            }
            Atom::Look(false, true, inner) => {
                let Some(set) = single_char(inner).and_then(|c| char_set(c, flags)) else {
                    return Err(unsupported(p));
                };
                let Some(bytes) = first_bytes(&set) else {
                    return Err(unsupported(p));
                };
                let name = group_name(classes.len());
                classes.push(bytes);
                *p = pieces(&format!("(?P<{name}>)")).remove(0);
            }
            Atom::Look(..) => return Err(unsupported(p)),
            Atom::Char(_) | Atom::Other(_) => {}
        }
    }
    Ok(())
}

fn unsupported(p: &Piece) -> Error {
    let mut text = String::new();
    render(p, &mut text);
    Error::Compile(format!(
        "lookaround {text} cannot be compiled to a DFA (supported: one-character lookbehinds \
         after a one-character atom, escaped and triple-quote string idioms, and negative \
         lookaheads of one class that tells ASCII characters apart)"
    ))
}

/// Checks `re`, one part of a terminal, as far as it can be checked alone:
/// its lookarounds must be rewritable (see the module doc), except a
/// one-character lookbehind or a `(?!QQ)`, which the parts before or after
/// it may decide (one-class lookaheads pass too, whatever their class); the
/// whole terminal is checked again when it is lowered.
/// The error names the first lookaround that cannot be rewritten.
pub fn check(re: &str) -> Result<()> {
    let error = match rewritten(re) {
        Ok((marked, _)) => return check_syntax(&marked),
        Err(e) => e,
    };
    let mut alts = parse(re)?;
    if !strip_contextual(&mut alts) {
        return Err(error);
    }
    let mut rest = String::new();
    render_alts(&alts, &mut rest);
    check_syntax(&rest)
}

fn check_syntax(re: &str) -> Result<()> {
    regex_syntax::ParserBuilder::new()
        .utf8(false)
        .build()
        .parse(re)
        .map(|_| ())
        .map_err(|e| Error::Compile(e.to_string()))
}

/// Removes the lookarounds that text around `alts` may decide (a
/// one-character lookbehind, `(?!QQ)`) and one-character lookaheads;
/// false if any other is left.
fn strip_contextual(alts: &mut [Vec<Piece>]) -> bool {
    strip_looks(alts, &|behind, negated, inner| {
        let single = single_char(inner).is_some();
        let qq = matches!(inner, [a] if a.len() == 2 && literal_char(&a[0]).is_some()
            && literal_char(&a[0]) == literal_char(&a[1]));
        if behind {
            single
        } else {
            negated && (single || qq)
        }
    })
}

/// Removes, at every depth of `alts`, the lookarounds (behind?, negated?,
/// alternatives) that `drop` picks; whether none is left.
fn strip_looks(alts: &mut [Vec<Piece>], drop: &impl Fn(bool, bool, &[Vec<Piece>]) -> bool) -> bool {
    let mut none_left = true;
    for alt in alts.iter_mut() {
        alt.retain(|p| !matches!(&p.atom, Atom::Look(b, n, inner) if drop(*b, *n, inner)));
        for p in alt.iter_mut() {
            match &mut p.atom {
                Atom::Group(_, inner) => none_left &= strip_looks(inner, drop),
                Atom::Look(..) => none_left = false,
                Atom::Char(_) | Atom::Other(_) => {}
            }
        }
    }
    none_left
}

/// `re` without its lookarounds (for its width, where they count 0).
pub fn without_lookarounds(re: &str) -> String {
    let Ok(mut alts) = parse(re) else {
        return re.to_string();
    };
    strip_looks(&mut alts, &|_, _, _| true);
    let mut out = String::new();
    render_alts(&alts, &mut out);
    out
}

/// Whether `re` is one group, with nothing after it (`(?i:a)`, not
/// `(?i:a)(b)`).
pub fn is_one_group(re: &str) -> bool {
    matches!(parse(re).as_deref(), Ok([alt]) if alt.len() == 1
        && matches!(alt[0].atom, Atom::Group(..)) && alt[0].quant.is_empty())
}

/// Whether `re` has lookaround assertions.
pub fn has_lookaround(re: &str) -> bool {
    ["(?=", "(?!", "(?<=", "(?<!"]
        .iter()
        .any(|p| re.contains(p))
}

/// `re` (Rust syntax, Python's lookarounds allowed) with its lookarounds
/// rewritten and negative lookaheads as empty named groups, and the bytes
/// each lookahead forbids.
fn rewritten(re: &str) -> Result<(String, Vec<ByteSet>)> {
    let mut alts = parse(re)?;
    let flags = Flags::default();
    for a in alts.iter_mut() {
        rewrite_alt(a, flags)?;
    }
    let mut classes = Vec::new();
    for a in alts.iter_mut() {
        markers(a, flags, &mut classes)?;
    }
    let mut out = String::new();
    render_alts(&alts, &mut out);
    Ok((out, classes))
}

/// The first-match DFA of Lark terminal regex `re` (see `ByteDfa::first_match`)
/// and, if it has negative lookaheads, per state the bytes it may not end
/// before (see `firstmatch`). None when it matches no string.
pub fn first_match(re: &str) -> Result<Option<(ByteDfa, Option<EndConditions>)>> {
    let plain = |re: &str| match ByteDfa::first_match(re) {
        Ok(d) => Ok(Some(d)),
        Err(Error::Compile(m)) if m.ends_with("matches no string") => Ok(None),
        Err(e) => Err(e),
    };
    if !has_lookaround(re) {
        return Ok(plain(re)?.map(|d| (d, None)));
    }
    let (marked, classes) = rewritten(re)?;
    if classes.is_empty() {
        return Ok(plain(&marked)?.map(|d| (d, None)));
    }
    let made = firstmatch::build(re, &marked, &classes)?;
    Ok(made.map(|(d, f)| (d, Some(f))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::regex_dfa::DEAD;

    fn rewrite(re: &str) -> String {
        rewritten(re).unwrap().0
    }

    #[test]
    fn parse_and_render_round_trip() {
        for re in [
            r"a(?:b|c)*?[^\]x]\x{41}\p{L}(?P<n>d){2,3}$",
            r"(?is:[ubf]?r?)(x|y)+",
            r"[[:alpha:]\d]+?\.",
        ] {
            let mut out = String::new();
            render_alts(&parse(re).unwrap(), &mut out);
            assert_eq!(out, re);
        }
    }

    #[test]
    fn idioms_are_rewritten() {
        assert_eq!(rewrite(r#""""(?<!\\).*?""""#), r#"""".*?""""#);
        assert_eq!(rewrite(r"a(?<!a)"), r"a[^\x{0}-\x{10FFFF}]");
        assert_eq!(
            rewrite(r#""x.*?(?<!\\)(\\\\)*?""#),
            r#""x(?:(?:[^\\\n]|\\.))*?""#
        );
        assert!(
            rewrite(r#"(?s:"(?!"").*?")"#).starts_with(r#"(?s:(?:\x{22}\x{22}(?P<maskparlook0>)|"#)
        );
        // Joined parts: groups that change nothing are spliced in first.
        assert_eq!(
            rewrite(r#"(?:")(?:(?:.*?)(?:(?<!\\)(\\\\)*?))(?:")"#),
            r#""(?:(?:[^\\\n]|\\.))*?""#
        );
        // A part alone: its lookbehind is left to the parts before it.
        assert!(check(r"(?<!\\)(\\\\)*?").is_ok());
        assert!(check(r"a(?=b)").is_err());
        assert!(rewritten(r"a(?=b)c").is_err());
        assert!(rewritten(r"(?=x)a").is_err());
        assert!(rewritten(r"a(?!é)").is_err());
    }

    /// Whether `re` (with lookarounds) matches all of `text` as Python's
    /// `re.match` would, by the rewritten DFA and its end conditions.
    fn lexes(re: &str, text: &str, next: Option<u8>) -> bool {
        let (dfa, forbid) = first_match(re).unwrap().unwrap();
        let q = dfa.step_bytes(dfa.start(), text.as_bytes());
        q != DEAD
            && dfa.is_accepting(q)
            && match (&forbid, next) {
                (Some(f), Some(b)) => !f[q as usize].contains(b),
                _ => true,
            }
    }

    #[test]
    fn strings_and_numbers_of_pythons_grammar() {
        let string =
            r#"(?i:([ubf]?r?|r[ubf])("(?!"").*?(?<!\\)(\\\\)*?"|'(?!'').*?(?<!\\)(\\\\)*?'))"#;
        assert!(lexes(string, r#""a\"b""#, None));
        assert!(lexes(string, r#""a\\""#, None));
        assert!(!lexes(string, r#""a\""#, None));
        assert!(lexes(string, r#"rb'x'"#, None));
        assert!(lexes(string, r#""""#, Some(b' ')));
        assert!(lexes(string, r#""""#, None));
        assert!(!lexes(string, r#""""#, Some(b'"')));
        assert!(!lexes(string, "\"a\nb\"", None));
        let number = r"(?:[1-9](?:_?[0-9])*|0(?:_?0)*(?:(?![1-9])))";
        assert!(lexes(number, "0", Some(b' ')));
        assert!(lexes(number, "00", None));
        assert!(!lexes(number, "0", Some(b'7')));
        assert!(lexes(number, "17", Some(b'7')));
        // syncode's: lazy text without escapes, across lines (s flag).
        let string = r#"(?is:[ubf]?r?("(?!"").*?"|'(?!'').*?'))"#;
        assert!(lexes(string, "'a\nb'", None));
        assert!(lexes(string, "''", Some(b'x')));
        assert!(!lexes(string, "''", Some(b'\'')));
        assert!(!lexes(string, "'''a'", None));
        // Verilog's and C's comment: a star not followed by a slash.
        let comment = r"(?:\/\*(\*(?!\/)|[^*])*\*\/)";
        assert!(lexes(comment, "/* a * b */", Some(b'x')));
        assert!(lexes(comment, "/**/", None));
        assert!(lexes(comment, "/***/", None));
        assert!(!lexes(comment, "/* */ */", None));
        assert!(!lexes(comment, "/* *", None));
        // At the start of a pattern, and one that leaves nothing.
        assert!(lexes("(?!x)[a-z]", "a", None));
        assert!(!lexes("(?!x)[a-z]", "x", None));
        assert!(first_match("(?!a)a").unwrap().is_none());
        // Inside a pattern whose alternatives' order matters: a failing
        // lookahead makes re fall back to a later alternative.
        assert!(lexes(r"x(a(?!b)|ab)", "xab", None));
        assert!(lexes(r"x(a(?!b)|ab)", "xa", Some(b'c')));
        assert!(!lexes(r"x(a(?!b)|ab)", "xa", Some(b'b')));
        assert!(lexes(r"a(?!b)|ab", "ab", None));
        // A class of all non-ASCII characters or none: the next
        // character's first byte decides.
        assert!(!lexes("a(?![^a])", "a", Some(0xC3)));
        assert!(lexes("a(?![^a])", "a", Some(b'a')));
        assert!(lexes("a(?![^a])", "a", None));
        assert!(lexes("a(?!b)", "a", Some(0xC3)));
        assert!(first_match("a(?![^aé])").is_err());
        // Lark's own regex terminal: lazy, with a lookahead after its
        // opening slash.
        let regexp = r"\/(?!\/)(\\\/|\\\\|[^\/])*?\/[imslux]*";
        assert!(lexes(regexp, "/a/", Some(b' ')));
        assert!(lexes(regexp, r"/a\/b/i", None));
        assert!(!lexes(regexp, "//", None));
        assert!(!lexes(regexp, "/a/b/", None));
    }
}
