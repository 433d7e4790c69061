//! Finishing a lowered grammar: what can never match is pruned, and each
//! lexeme learns where its matches may end.
//!
//! A rule is kept only if every symbol in it derives some string. Ordinary
//! nonterminals are productive by propagation (`Horn`); a member-set
//! nonterminal is productive when its guards let it close with its
//! required members, so each round of member sets that become productive
//! propagates again. Members whose dependencies can never be added are
//! dropped from their set's rules. Then nullability, and where lexemes end:
//! greedy ends under all-splits lexing (`greedy`), the same for `alone`
//! lexemes under longest-match lexing, and Lark's string retyping
//! (`embedded_in`).

use rustc_hash::FxHashMap as HashMap;

use super::Lowerer;
use crate::cfg::ast::Lexing;
use crate::cfg::greedy::greedy_lexemes;
use crate::cfg::horn::Horn;
use crate::cfg::indent::Indenter;
use crate::cfg::lowered::{fresh_cfg_id, Cfg, Guard, LexContext, Lexeme, Rule, Sym};
use crate::cfg::members::{is_listed, MemberSet};
use crate::cfg::setnames::SetNames;
use crate::error::{Error, Result};
use crate::regex_dfa::{ByteSet, DEAD};

pub(super) fn finish(
    l: Lowerer<'_>,
    ignore: Vec<u32>,
    contexts: Vec<LexContext>,
    indenter: Option<Indenter>,
) -> Result<Cfg> {
    let lexing = l.lexing;
    let n = l.nonterminals.len();
    // Productive symbols: those that derive at least one string.
    let lex_ok: Vec<bool> = l
        .lexemes
        .iter()
        .map(|x| x.dfa.is_some() || x.declared || x.tokens.is_some())
        .collect();
    let sym_ok = |s: &Sym, productive: &[bool]| match *s {
        Sym::T(t) => lex_ok[t as usize],
        Sym::N(x) | Sym::P(x, _) => productive[x as usize],
    };
    // A member-set nonterminal's guards decide which rules apply: it derives
    // a string iff it can close with its required members and dependencies.
    let mut is_member_set = vec![false; n];
    let mut member_rules: HashMap<u32, Vec<&Rule>> = HashMap::default();
    for &after in &l.member_sets {
        is_member_set[after as usize] = true;
    }
    for r in &l.rules {
        if is_member_set[r.lhs as usize] {
            member_rules.entry(r.lhs).or_default().push(r);
        }
    }
    // The listed members that may be added, or None if the set never closes.
    let live_members = |set: usize, productive: &[bool]| -> Option<MemberSet> {
        let after = l.member_sets[set];
        let (mut addable, mut extra, mut close) = (0 as MemberSet, false, false);
        for r in &member_rules[&after] {
            let ok = r
                .rhs
                .iter()
                .all(|s| s.nonterminal() == Some(after) || sym_ok(s, productive));
            match r.guard {
                _ if !ok => {}
                Guard::Add { op, .. } if is_listed(op) => addable |= (1 as MemberSet) << op,
                Guard::Add { .. } => extra = true,
                Guard::Close { .. } => close = true,
                Guard::Always => {}
            }
        }
        l.member_rules[set].live_members(addable, extra, close)
    };
    // Ordinary nonterminals by propagation (linear in the grammar); each
    // round of member sets that become productive propagates again.
    let skip = |x: u32| is_member_set[x as usize];
    let mut horn = Horn::new(
        n,
        l.rules.iter().map(|r| (r.lhs, r.rhs.as_slice())),
        |t| lex_ok[t as usize],
        skip,
    )?;
    loop {
        let mut changed = false;
        for (set, &after) in l.member_sets.iter().enumerate() {
            if !horn.holds()[after as usize] && live_members(set, horn.holds()).is_some() {
                horn.set(after, &skip);
                changed = true;
            }
        }
        if !changed {
            break;
        }
        crate::budget::charge_n(member_rules.values().map(Vec::len).sum::<usize>())?;
    }
    let productive = horn.into_holds();
    // Members whose dependencies can never be added cannot be added either.
    let can_add: Vec<MemberSet> = (0..l.member_sets.len())
        .map(|set| live_members(set, &productive).unwrap_or(0))
        .collect();
    if !productive[0] {
        return Err(Error::Compile("the grammar matches no string".into()));
    }
    // Ordered objects look ahead at what may still come (`MemberRules::live`).
    let extra_live: Vec<bool> = (l.member_sets.iter())
        .map(|after| {
            member_rules[after].iter().any(|r| {
                matches!(r.guard, Guard::Add { op, .. } if !is_listed(op))
                    && (r.rhs.iter())
                        .all(|s| s.nonterminal() == Some(*after) || sym_ok(s, &productive))
            })
        })
        .collect();
    drop(member_rules);
    let mut member_rules_out = l.member_rules;
    for (set, rules) in member_rules_out.iter_mut().enumerate() {
        rules.live = can_add[set];
        rules.extra_live = extra_live[set];
    }
    let rules: Vec<Rule> = l
        .rules
        .into_iter()
        .filter(|r| r.rhs.iter().all(|s| sym_ok(s, &productive)))
        .filter(|r| match r.guard {
            Guard::Add { set, op } if is_listed(op) => can_add[set as usize] & (1 << op) != 0,
            _ => true,
        })
        .collect();
    let mut by_lhs = vec![Vec::new(); n];
    for (i, r) in rules.iter().enumerate() {
        by_lhs[r.lhs as usize].push(i as u32);
    }
    let lex_nullable: Vec<bool> = l.lexemes.iter().map(Lexeme::nullable).collect();
    let nullable = Horn::new(
        n,
        rules.iter().map(|r| (r.lhs, r.rhs.as_slice())),
        |t| lex_nullable[t as usize],
        |_| false,
    )?
    .into_holds();
    // The parser advances over nullable nonterminals whatever the member
    // set, which is exact only if member-set nonterminals are not nullable.
    if let Some(&after) = l.member_sets.iter().find(|a| nullable[**a as usize]) {
        return Err(Error::Compile(format!(
            "object members '{}' may be empty after a member",
            l.nonterminals[after as usize]
        )));
    }
    let mut lexemes = l.lexemes;
    let has_tokens = lexemes.iter().any(|x| x.tokens.is_some());
    if has_tokens && indenter.is_some() {
        return Err(Error::Compile(
            "special tokens and token ids are not supported in grammars with an indenter".into(),
        ));
    }
    if lexing == Lexing::Longest {
        embed_strings(&mut lexemes);
    }
    let has_alone = lexemes.iter().any(|x| x.alone);
    if lexing == Lexing::AllSplits {
        let greedy = greedy_lexemes(&rules, &nullable, &lexemes, ByteSet::default());
        for (lexeme, (g, follow)) in lexemes.iter_mut().zip(greedy) {
            lexeme.greedy = g;
            lexeme.follow = follow;
        }
    } else if has_alone {
        alone_lexemes_end(&rules, &nullable, &mut lexemes, &ignore);
    }
    Ok(Cfg {
        nonterminals: l.nonterminals,
        rules,
        by_lhs,
        nullable,
        lexemes,
        ignore,
        lexing,
        member_rules: member_rules_out,
        indenter,
        id: fresh_cfg_id(),
        names: SetNames::default(),
        has_tokens,
        has_alone,
        initial_skip: true,
        nt_context: if contexts.is_empty() {
            Vec::new()
        } else {
            l.nt_context
        },
        contexts,
    })
}

/// Decides where the alone lexemes of a longest-match grammar end. Ending
/// one only where the next byte kills it keeps every split its rules allow
/// when no byte that continues one of its matches can begin what follows
/// it, ignored text included (an `%ignore`d terminal may come before any
/// other terminal of the grammar, and at the end: see `Cfg::ignored_at`);
/// the others end at every accepting point (`Lexeme::splits`). Such a greedy
/// alone lexeme carries its `follow`, as under all-splits lexing: mask
/// fills then drop its ends before a byte no follower reads
/// (`LexCache::boundary`) instead of walking the parser there (a JSON
/// number's end before every byte but the digits).
fn alone_lexemes_end(rules: &[Rule], nullable: &[bool], lexemes: &mut [Lexeme], ignore: &[u32]) {
    let mut ignored = ByteSet::default();
    for &t in ignore {
        if let Some(d) = &lexemes[t as usize].dfa {
            ignored.union_with(&d.first_bytes());
        }
    }
    let greedy = greedy_lexemes(rules, nullable, lexemes, ignored);
    for (lexeme, (greedy, follow)) in lexemes.iter_mut().zip(greedy) {
        if lexeme.alone && greedy {
            lexeme.greedy = true;
            lexeme.follow = follow;
        }
    }
}

/// Fills each string's `embedded_in`: the patterns of its priority that
/// match its text whole, as Python's `re.match` would (Lark's check in
/// `_create_unless`), and whether their flags hold the string's.
fn embed_strings(lexemes: &mut [Lexeme]) {
    // Only patterns take strings in: a grammar of many strings and few
    // patterns looks at each string against those few.
    let patterns: Vec<usize> = (0..lexemes.len())
        .filter(|&r| !lexemes[r].literal && !lexemes[r].alone)
        .collect();
    for s in 0..lexemes.len() {
        let Some(text) = lexemes[s].text.as_deref() else {
            continue;
        };
        let string_flags = &lexemes[s].flags;
        let embedded_in: Vec<(u32, bool)> = (patterns.iter())
            .map(|&r| (r, &lexemes[r]))
            .filter(|&(r, pattern)| {
                r != s
                    && pattern.priority == lexemes[s].priority
                    && pattern.dfa.as_ref().is_some_and(|d| {
                        let q = d.step_bytes(d.start(), text.as_bytes());
                        q != DEAD && d.is_accepting(q)
                    })
            })
            .map(|(r, pattern)| {
                let removes = string_flags.chars().all(|f| pattern.flags.contains(f));
                (r as u32, removes)
            })
            .collect();
        lexemes[s].embedded_in = embedded_in;
    }
}
