//! Longest-match lexing on top of the Earley parser: branches, guards and
//! which lexemes end where.
//!
//! Under longest-match lexing (Lark's contextual lexer) a lexeme ends only
//! where no allowed lexeme of its branch could read on. The frontier is
//! split into branches by origin (`branches`); within a branch, a byte
//! either lets some scan read on (`Cfg::longest_step`), or ends the
//! lexemes with the highest rank among those that accept (Lark's
//! priorities and terminal order, `Cfg::rank`). Where a lexeme accepts and
//! another scan reads on, both futures stay: the branch goes on, and a new
//! one starts after the ended lexeme, carrying *guards* (`GUARD`-tagged
//! scans of the longer lexemes) that kill it if the longer match completes
//! after all (back-off). Alone lexemes (`Lexeme::alone`, `%json` blocks)
//! are branches of their own, and end wherever they may.

use super::earley::Scan;
use super::larkorder::Rank;
use super::lowered::Cfg;
use crate::regex_dfa::DEAD;

impl Cfg {
    /// One byte for guard `id` in DFA state `q` of a branch of `pairs`.
    fn step_guard(&self, id: u32, q: u32, pairs: &[(u32, u32)], byte: u8) -> GuardStep {
        if (self.removed_by(id & !GUARD, pairs, GUARD, |_, _| true)).is_some() {
            // A string read only as a pattern's match: that pattern's guard
            // decides.
            return GuardStep::Drops;
        }
        if self.may_end(id & !GUARD, q, Some(byte)) {
            // A longer match, once its trailing lookahead passed: the end
            // this branch took was not the one Lark takes.
            return GuardStep::Kills;
        }
        let lexeme = self.scan_lexeme(id);
        let dfa = lexeme.dfa.as_ref().expect("scans have DFAs");
        let q2 = dfa.step(q, byte);
        if q2 == DEAD {
            GuardStep::Drops
        } else if lexeme.ends_unconditionally(dfa, q2) {
            GuardStep::Kills
        } else {
            GuardStep::Goes(q2)
        }
    }

    /// `longest_step` for a branch of alone scans and the guards among
    /// `pairs`: where a guard finds a longer match the branch dies, as any
    /// branch does. Each scan ends where it accepted and the byte kills it,
    /// or, if it `splits`, wherever it accepted (all-splits lexing, in the
    /// form of an end before the byte); the branch that goes on from their
    /// ends keeps the guards. No branch goes on from where a scan that does
    /// not split accepted and reads on: that branch would have to read the
    /// byte that took it on, which no follower starts with (see
    /// `lower::prune::alone_lexemes_end`).
    ///
    /// Alone scans rank against nothing, so each steps as if it were the
    /// branch's only one: a branch of several is the union of the branches
    /// of one each (their ends are completed in one set, as all-splits
    /// lexing completes them).
    fn alone_step(&self, pairs: &[(u32, u32)], byte: u8) -> LongestStep {
        let mut guards = Vec::new();
        for &(id, g) in pairs.iter().filter(|&&(id, _)| id & GUARD != 0) {
            match self.step_guard(id, g, pairs, byte) {
                GuardStep::Kills => return LongestStep::default(),
                GuardStep::Drops => {}
                GuardStep::Goes(g2) => guards.push((id, g2)),
            }
        }
        let mut next = Vec::new();
        let mut ends = Vec::new();
        for &(l, q) in pairs.iter().filter(|&&(id, _)| id & GUARD == 0) {
            let lexeme = &self.lexemes[l as usize];
            let dfa = lexeme.dfa.as_ref().expect("scans have DFAs");
            let q2 = dfa.step(q, byte);
            if dfa.is_accepting(q) && (q2 == DEAD || lexeme.splits()) {
                ends.push(l);
            }
            if q2 != DEAD {
                next.push((l, q2));
            }
        }
        if !next.is_empty() {
            next.extend_from_slice(&guards);
        }
        ends.sort_unstable();
        ends.dedup();
        LongestStep {
            next,
            ends,
            width: 0,
            guards,
        }
    }

    /// Whether a longest-match branch holds alone scans (then only those,
    /// and guards: see `branches`).
    #[inline]
    fn is_alone_branch(&self, group: &[(u32, u32)]) -> bool {
        self.has_alone
            && group
                .iter()
                .any(|&(id, _)| id & GUARD == 0 && self.lexemes[id as usize].alone)
    }

    /// Whether a longest-match branch is alone scans without guards: its
    /// ends are completed with the other such branches' into one set, as
    /// all-splits lexing completes them (a set per branch would double the
    /// scans of a lexeme that splits at every byte).
    pub(crate) fn lone_alone(&self, group: &[(u32, u32)]) -> bool {
        !group.is_empty()
            && group
                .iter()
                .all(|&(l, _)| l & GUARD == 0 && self.lexemes[l as usize].alone)
    }

    /// Longest-match lexing with back-off: one byte for the scans and
    /// guards `(lexeme, state)` of one branch (see `LongestStep`).
    ///
    /// Lark tries terminals in order of rank (priority, maximum width, then
    /// pattern text length: see `larkorder`): once a lexeme matches, no
    /// lexeme of lower rank may, whatever its length. So the scans of lower
    /// rank than one that may end before the byte stop there, and the scans
    /// that go on past an end all have at least its rank: each of them that
    /// accepts later is a match Lark would prefer.
    pub fn longest_step(&self, pairs: &[(u32, u32)], byte: u8) -> LongestStep {
        if self.is_alone_branch(pairs) {
            return self.alone_step(pairs, byte);
        }
        let (mut ends, width, floor) = self.longest_ends(pairs, Some(byte));
        let mut next = Vec::new();
        let mut carried = Vec::new();
        let mut longer = false;
        for &(id, q) in pairs {
            let lexeme = self.scan_lexeme(id);
            let dfa = lexeme.dfa.as_ref().expect("scans have DFAs");
            if id & GUARD != 0 {
                match self.step_guard(id, q, pairs, byte) {
                    GuardStep::Kills => return LongestStep::default(),
                    GuardStep::Drops => {}
                    GuardStep::Goes(q2) => carried.push((id, q2)),
                }
                continue;
            }
            let q2 = dfa.step(q, byte);
            if q2 == DEAD {
                continue;
            }
            // Where a lexeme accepts only if the next byte allows it, the
            // guards decide at that byte (`step_guard`, or `guards_end` at
            // the end).
            let matched = lexeme.ends_unconditionally(dfa, q2)
                && self.removed_ends_unconditionally(id, pairs, byte) != Some(false);
            if floor.is_none_or(|p| self.rank(id, pairs) >= p) {
                longer |= matched;
                next.push((id, q2));
            }
        }
        if next.is_empty() {
            // The branch goes on from the end, with the guards it had.
            return LongestStep {
                next,
                ends,
                width,
                guards: carried,
            };
        }
        // Scans go on past an end, none accepting yet: they may still die
        // before they accept, and then the lexeme ends here after all.
        let guards = if longer || ends.is_empty() {
            ends.clear();
            Vec::new()
        } else {
            next.iter()
                .map(|&(l, q)| (l | GUARD, q))
                .chain(carried.iter().copied())
                .collect()
        };
        next.extend_from_slice(&carried);
        LongestStep {
            next,
            ends,
            width,
            guards,
        }
    }

    /// Lexeme `l`'s rank in Lark's order while the scans of `pairs` (which
    /// started where it did; guards, of an earlier lexeme, are left out)
    /// are alive: its own, or for a string, that of the live patterns it is
    /// embedded in. Lark takes such a string out of its list when one of
    /// them has its flags (it is then read only as their match, at their
    /// rank); else the string keeps its own place too.
    #[inline]
    pub fn rank(&self, l: u32, pairs: &[(u32, u32)]) -> Rank {
        let lexeme = &self.lexemes[l as usize];
        let own = lexeme.rank();
        let mut removed = false;
        let mut via: Option<Rank> = None;
        for &(p, removes) in &lexeme.embedded_in {
            // A guard's id carries the GUARD bit, so it never equals p.
            if pairs.iter().any(|&(id, _)| id == p) {
                removed |= removes;
                via = via.max(Some(self.lexemes[p as usize].rank()));
            }
        }
        match via {
            None => own,
            Some(v) if removed => v,
            Some(v) => own.max(v),
        }
    }

    /// For a string lexeme `l` that a live pattern of `pairs` (ids tagged
    /// `tag`: 0 for scans, GUARD for guards) takes out of Lark's list (see
    /// `rank`): whether `ok(pattern, state)` holds for one of those
    /// patterns. None when no live pattern takes it out. Such a string is
    /// read only as the pattern's match, so it ends only where the pattern
    /// may (its trailing lookahead may refuse).
    pub fn removed_by(
        &self,
        l: u32,
        pairs: &[(u32, u32)],
        tag: u32,
        ok: impl Fn(u32, u32) -> bool,
    ) -> Option<bool> {
        let mut removed = None;
        for &(p, removes) in &self.lexemes[l as usize].embedded_in {
            if !removes {
                continue;
            }
            for &(id, q) in pairs {
                if id == p | tag {
                    if ok(p, q) {
                        return Some(true);
                    }
                    removed = Some(false);
                }
            }
        }
        removed
    }

    /// `removed_by` for a scan of `l` that reads `byte`: whether one of the
    /// patterns that take it out ends unconditionally after the byte.
    pub fn removed_ends_unconditionally(
        &self,
        l: u32,
        pairs: &[(u32, u32)],
        byte: u8,
    ) -> Option<bool> {
        self.removed_by(l, pairs, 0, |p, q| {
            let pattern = &self.lexemes[p as usize];
            let dfa = pattern.dfa.as_ref().expect("scans have DFAs");
            let q2 = dfa.step(q, byte);
            q2 != DEAD && pattern.ends_unconditionally(dfa, q2)
        })
    }

    /// Whether a guard of a longest-match branch `(lexeme, state)` matches
    /// if the text ends here (so the branch's end was not Lark's).
    pub fn guards_end(&self, branch: &[(u32, u32)]) -> bool {
        branch.iter().any(|&(id, q)| {
            id & GUARD != 0
                && self.may_end(id & !GUARD, q, None)
                && self
                    .removed_by(id & !GUARD, branch, GUARD, |_, _| true)
                    .is_none()
        })
    }

    /// Whether a longest-match scan of lexeme `l` in state `q` may end
    /// before byte `next` (None: at the end of the text), as its trailing
    /// lookahead allows.
    #[inline]
    pub fn may_end(&self, l: u32, q: u32, next: Option<u8>) -> bool {
        let lexeme = &self.lexemes[l as usize];
        let dfa = lexeme.dfa.as_ref().expect("scans have DFAs");
        dfa.is_accepting(q)
            && match (&lexeme.end_forbid, next) {
                (Some(forbid), Some(b)) => !forbid[q as usize].contains(b),
                _ => true,
            }
    }

    /// Longest-match: of the scans `(lexeme, state)` of `pairs` (guards left
    /// out), the lexemes that end before `next` if it ends them: the highest
    /// rank among those that may end there (returned last; None if none
    /// may), strings before patterns. An indenter's newline ends alone, and its width comes with
    /// it (else 0).
    pub fn longest_ends(
        &self,
        pairs: &[(u32, u32)],
        next: Option<u8>,
    ) -> (Vec<u32>, u32, Option<Rank>) {
        if self.is_alone_branch(pairs) {
            // Alone scans rank against nothing: each that may end does.
            let mut lexemes: Vec<u32> = (pairs.iter())
                .filter(|&&(id, q)| id & GUARD == 0 && self.may_end(id, q, next))
                .map(|&(l, _)| l)
                .collect();
            lexemes.sort_unstable();
            lexemes.dedup();
            return (lexemes, 0, None);
        }
        let ending = pairs.iter().copied().filter(|&(id, q)| {
            id & GUARD == 0
                && self.may_end(id, q, next)
                && self.removed_by(id, pairs, 0, |p, qp| self.may_end(p, qp, next)) != Some(false)
        });
        let best = ending.clone().map(|(l, _)| self.rank(l, pairs)).max();
        let mut ends: Vec<(u32, u32)> = ending
            .filter(|&(l, _)| Some(self.rank(l, pairs)) == best)
            .collect();
        // A string that ends with a pattern on the same text wins (Lark
        // retypes a name that spells a keyword the parser accepts here).
        if ends.iter().any(|&(l, _)| self.lexemes[l as usize].literal) {
            ends.retain(|&(l, _)| self.lexemes[l as usize].literal);
        }
        let mut width = 0;
        if let Some(ind) = &self.indenter {
            if let Some(&(l, q)) = ends.iter().find(|&&(l, _)| l == ind.newline) {
                width = ind.widths[q as usize];
                ends = vec![(l, q)];
            }
        }
        let mut lexemes: Vec<u32> = ends.into_iter().map(|(l, _)| l).collect();
        lexemes.sort_unstable();
        lexemes.dedup();
        (lexemes, width, best)
    }

    /// All-splits: the greedy scans that would end if the text ended here.
    pub(crate) fn greedy_done(&self, frontier: &[Scan]) -> Vec<(u32, u32)> {
        frontier
            .iter()
            .filter(|s| {
                let lexeme = &self.lexemes[s.lexeme as usize];
                let dfa = lexeme.dfa.as_ref().expect("scans have DFAs");
                lexeme.greedy && dfa.is_accepting(s.state)
            })
            .map(|s| (s.lexeme, s.origin))
            .collect()
    }
}

/// A longest-match frontier by branch: each origin with its scans and
/// guards `(lexeme, state)`.
pub(crate) fn branches(cfg: &Cfg, frontier: &[Scan]) -> Vec<(u32, Vec<(u32, u32)>)> {
    if cfg.has_alone {
        return branches_with_alone(cfg, frontier);
    }
    let mut out: Vec<(u32, Vec<(u32, u32)>)> = Vec::new();
    for s in frontier {
        match out.iter_mut().find(|(o, _)| *o == s.origin) {
            Some((_, group)) => group.push((s.lexeme, s.state)),
            None => out.push((s.origin, vec![(s.lexeme, s.state)])),
        }
    }
    out.sort_unstable_by_key(|&(o, _)| o);
    out
}

/// `branches` where some lexemes are alone (see `Lexeme::alone`): the alone
/// scans of an origin are one branch, its other scans another, and the
/// origin's guards (which stand for a longer match of the lexemes that
/// ended there) go with each of them. Alone scans rank against nothing, so
/// they never share a branch with scans that do.
#[cold]
#[inline(never)]
fn branches_with_alone(cfg: &Cfg, frontier: &[Scan]) -> Vec<(u32, Vec<(u32, u32)>)> {
    // ((origin, false for the alone scans, true for the rest), scans).
    type Keyed = ((u32, bool), Vec<(u32, u32)>);
    let mut keyed: Vec<Keyed> = Vec::new();
    for s in frontier.iter().filter(|s| s.lexeme & GUARD == 0) {
        let key = (s.origin, !cfg.lexemes[s.lexeme as usize].alone);
        match keyed.iter_mut().find(|(k, _)| *k == key) {
            Some((_, group)) => group.push((s.lexeme, s.state)),
            None => keyed.push((key, vec![(s.lexeme, s.state)])),
        }
    }
    for g in frontier.iter().filter(|s| s.lexeme & GUARD != 0) {
        for ((o, _), group) in keyed.iter_mut() {
            if *o == g.origin {
                group.push((g.lexeme, g.state));
            }
        }
    }
    keyed.sort_unstable_by_key(|&(k, _)| k);
    keyed.into_iter().map(|((o, _), g)| (o, g)).collect()
}

/// Marks a guard in a longest-match frontier: a scan that went on past an
/// accepting point where its branch ended a lexeme (back-off). If it reaches
/// another accepting state, the longest match was longer, and the branch
/// dies; if it dies first, it is dropped.
pub const GUARD: u32 = 1 << 31;

/// What one byte does to a guard (see `Cfg::step_guard`).
enum GuardStep {
    /// A longer match: the guard's branch dies.
    Kills,
    /// The guard is gone, and its branch goes on.
    Drops,
    /// The guard goes on, in this DFA state.
    Goes(u32),
}

/// What one byte does to a longest-match branch's scans and guards.
#[derive(Debug, Default)]
pub struct LongestStep {
    /// Scans that read the byte, with the branch's guards (empty if no scan
    /// did, or a guard found a longer match).
    pub next: Vec<(u32, u32)>,
    /// The lexemes that end before the byte (with the newline's `width`),
    /// if a branch goes on from their end: the branch itself if `next` is
    /// empty, else a new one (back-off). Empty if none does.
    pub ends: Vec<u32>,
    pub width: u32,
    /// The guards of the branch that goes on from `ends`.
    pub guards: Vec<(u32, u32)>,
}
