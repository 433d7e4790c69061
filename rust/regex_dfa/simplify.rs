//! A pattern's syntax tree, simplified before determinizing where the
//! NFA would walk ε-edges that lead nowhere new.
//!
//! A Thompson NFA gives each repetition a union state, with ε-edges into
//! its body and past it, and each alternation a union of its branches.
//! Three shapes make every transition of the DFA walk ε-edges that its
//! states (sets of the NFA's byte states) do not show, and so the compile
//! budget, which charges each DFA state by that set, did not see the work:
//!
//! - *Repetitions of repetitions*: in `((e*)*)*` each time `e` ends, the
//!   closure climbs every level and comes back down to the same byte
//!   states. A Lark terminal found by fuzzing, with runs of up to 41 stars
//!   after a `.`, took 3.2 s to determinize where the same pattern with
//!   single stars took 0.77 s.
//! - *Repeated empty branches*: `(?:.|||…|)*` folds each empty branch into
//!   one more edge to the same state, walked on every transition.
//! - *Groups*: each capture group is two ε-states (we build no captures,
//!   `thompson_config`), and groups keep nested alternations from
//!   flattening (`((a|)|)|`).
//!
//! So groups are dropped, alternations are flattened with their empty
//! branches after the first dropped (a later branch equal to an earlier
//! one never matches where the earlier does not, nor is it preferred), and
//! a directly nested pair of repetitions becomes one repetition of the
//! inner body when both are greedy: with `e*` or `e+` inside, any outer
//! count but zero is a count of `e` from the product of the minimums up,
//! and with `e?` inside, `(e?){a,b}` is `e{0,b}`. That keeps the language,
//! which is all a full-match build reads. A first-match build (Lark's
//! terminals) also reads which match end a backtracking engine prefers,
//! and that holds only where the outer repetition is `*`, `+` or `?`: then
//! after each `e` the ε-closure of the nested form reaches `e`'s first
//! states before what follows the repetition, in the order the flat form
//! does, the other paths through the chain meeting states already reached.
//! A counted outer repetition copies its body, and the copies change the
//! order: `((a|abc)+){2,3}` prefers the end after `aabca` on that text,
//! `(a|abc){2,}` the one after `aa`. Lazy repetitions are left as they are.
//! `closure` charges what these rules leave.
//!
//! The tree is rebuilt bottom up, so a chain collapses level by level. The
//! rebuild recurses once per level of the tree, which the syntax parser
//! bounds (its nesting limit, 250); below `MAX_DEPTH` a tree is left as is.

use regex_syntax::hir::{Hir, HirKind, Repetition};

/// Levels below which a tree is not rewritten (far past the parser's
/// nesting limit, so only a tree built by hand reaches it).
const MAX_DEPTH: usize = 1_000;

/// Which nested pairs `simplified` may merge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Keep {
    /// The language only (full-match builds).
    Language,
    /// The language and the order of preferred match ends (first-match
    /// builds).
    Preferences,
}

/// `hir` simplified (module docs), or None when it has nothing to simplify.
pub(super) fn simplified(hir: &Hir, keep: Keep) -> Option<Hir> {
    simplified_at(hir, keep, 0)
}

fn simplified_at(hir: &Hir, keep: Keep, depth: usize) -> Option<Hir> {
    if depth >= MAX_DEPTH {
        return None;
    }
    match hir.kind() {
        HirKind::Repetition(rep) => {
            let sub = simplified_at(&rep.sub, keep, depth + 1);
            if let Some(merged) = merged(rep, sub.as_ref().unwrap_or(&rep.sub), keep) {
                return Some(merged);
            }
            sub.map(|sub| {
                Hir::repetition(Repetition {
                    min: rep.min,
                    max: rep.max,
                    greedy: rep.greedy,
                    sub: Box::new(sub),
                })
            })
        }
        HirKind::Capture(cap) => {
            Some(simplified_at(&cap.sub, keep, depth + 1).unwrap_or_else(|| (*cap.sub).clone()))
        }
        HirKind::Concat(parts) => simplified_parts(parts, keep, depth).map(Hir::concat),
        HirKind::Alternation(parts) => {
            let changed = simplified_parts(parts, keep, depth);
            let flat = Hir::alternation(changed.clone().unwrap_or_else(|| parts.to_vec()));
            match one_empty_branch(flat) {
                Ok(fewer) => Some(fewer),
                Err(same) => changed.map(|_| same),
            }
        }
        HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) | HirKind::Look(_) => None,
    }
}

/// `alternation` with its empty branches after the first dropped (Ok), or
/// as it is when it has at most one (Err).
fn one_empty_branch(alternation: Hir) -> std::result::Result<Hir, Hir> {
    let HirKind::Alternation(parts) = alternation.kind() else {
        return Err(alternation);
    };
    let empty = |h: &Hir| matches!(h.kind(), HirKind::Empty);
    if parts.iter().filter(|h| empty(h)).count() < 2 {
        return Err(alternation);
    }
    let mut seen_empty = false;
    let kept: Vec<Hir> = parts
        .iter()
        .filter(|h| !empty(h) || !std::mem::replace(&mut seen_empty, true))
        .cloned()
        .collect();
    Ok(Hir::alternation(kept))
}

/// `parts` with each simplified, or None when none changes.
fn simplified_parts(parts: &[Hir], keep: Keep, depth: usize) -> Option<Vec<Hir>> {
    let new: Vec<Option<Hir>> = parts
        .iter()
        .map(|p| simplified_at(p, keep, depth + 1))
        .collect();
    if new.iter().all(Option::is_none) {
        return None;
    }
    Some(
        new.into_iter()
            .zip(parts)
            .map(|(n, p)| n.unwrap_or_else(|| p.clone()))
            .collect(),
    )
}

/// `outer` (whose body is `sub`) as one repetition, where `sub` is a greedy
/// `e*`, `e+` or `e?` (inside any groups) and `outer` is greedy.
fn merged(outer: &Repetition, sub: &Hir, keep: Keep) -> Option<Hir> {
    if !outer.greedy || outer.max == Some(0) {
        return None;
    }
    if keep == Keep::Preferences && !(outer.min <= 1 && matches!(outer.max, None | Some(1))) {
        return None;
    }
    let mut inner = sub;
    while let HirKind::Capture(cap) = inner.kind() {
        inner = &cap.sub;
    }
    let HirKind::Repetition(inner) = inner.kind() else {
        return None;
    };
    if !inner.greedy {
        return None;
    }
    let (min, max) = match (inner.min, inner.max) {
        // (e*){a,b} = e*, (e+){a,b} = e{a,}.
        (0 | 1, None) => (outer.min * inner.min, None),
        // (e?){a,b} = e{0,b}.
        (0, Some(1)) => (0, outer.max),
        _ => return None,
    };
    Some(Hir::repetition(Repetition {
        min,
        max,
        greedy: true,
        sub: inner.sub.clone(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(p: &str) -> Hir {
        regex_syntax::parse(p).unwrap()
    }

    fn collapses_to(p: &str, flat: &str) {
        assert_eq!(
            simplified(&parsed(p), Keep::Language),
            Some(parsed(flat)),
            "{p}"
        );
    }

    #[test]
    fn greedy_pairs_become_one_repetition() {
        collapses_to("(?:a*)*", "a*");
        collapses_to("(?:a+)*", "a*");
        collapses_to("(?:a*)+", "a*");
        collapses_to("(?:a+)+", "a+");
        collapses_to("(?:a?)?", "a?");
        collapses_to("(?:a?)*", "a*");
        collapses_to("(?:a+){2,5}", "a{2,}");
        collapses_to("(?:a?){3}", "a{0,3}");
        collapses_to("(?:a{1,})?b", "a*b");
        collapses_to("(?:(?:(?:.*)*)*)*x", ".*x");
    }

    #[test]
    fn chains_collapse_through_groups_and_inside_other_nodes() {
        collapses_to("x(((?:ab|c)*)+)*|y", "x(?:ab|c)*|y");
        collapses_to("(?:(a+)?)+z", "a*z");
    }

    #[test]
    fn groups_go_and_alternations_keep_one_empty_branch() {
        collapses_to("(a)(?:b|c)", "a(?:b|c)");
        collapses_to("(?:a|||b|)c", "(?:a||b)c");
        collapses_to("((a|)|)|b", "a||b");
        collapses_to("(?:.(?:|||)*)*", "(?:.(?:)*)*");
    }

    #[test]
    fn other_shapes_stay() {
        for p in [
            "a*b*",
            "(?:a*?)*",
            "(?:a*)*?",
            "(?:a{2})*",
            "(?:a{0,2})*",
            "(?:a*){0}",
            "(?:a|)b|",
        ] {
            assert_eq!(simplified(&parsed(p), Keep::Language), None, "{p}");
        }
    }

    #[test]
    fn a_tree_deeper_than_the_bound_is_left_alone() {
        let mut hir = Hir::repetition(Repetition {
            min: 0,
            max: None,
            greedy: true,
            sub: Box::new(Hir::literal(*b"a")),
        });
        for _ in 0..MAX_DEPTH + 5 {
            hir = Hir::repetition(Repetition {
                min: 0,
                max: Some(1),
                greedy: false,
                sub: Box::new(hir),
            });
        }
        assert!(simplified(&hir, Keep::Language).is_none());
    }
}
