//! Least fixpoints over grammar rules, in time linear in the grammar.
//!
//! "Productive" (derives some string) and "nullable" (derives the empty
//! string) are the same kind of fact: a nonterminal has it as soon as one
//! of its rules has every right-hand symbol with it. Sweeping all rules
//! until nothing changes is quadratic on a chain `r0 ::= r1`, `r1 ::= r2`,
//! ... listed in the wrong order (each sweep learns one rule), which a
//! hostile 50,000-rule grammar turns into minutes. Here each rule counts
//! the symbols it still waits for, and each nonterminal lists the rules
//! that wait on it (once per occurrence), so a fact is propagated exactly
//! once per occurrence: Dowling and Gallier's algorithm for Horn clauses.

use super::lowered::Sym;
use crate::error::Result;

/// Which nonterminals hold, and the rules still waiting on others.
pub struct Horn {
    holds: Vec<bool>,
    /// Per rule: its left-hand side, and how many right-hand occurrences
    /// do not hold yet.
    lhs: Vec<u32>,
    waiting: Vec<u32>,
    /// Per nonterminal: the rules it occurs in, once per occurrence (CSR:
    /// `users[user_start[x]..user_start[x + 1]]`).
    user_start: Vec<u32>,
    users: Vec<u32>,
    queue: Vec<u32>,
}

impl Horn {
    /// The rules `(lhs, rhs)` over `n` nonterminals; a terminal `t` holds
    /// when `terminal(t)`. Rules whose lhs `skip` names take part only as
    /// users of what their lhs needs: their lhs is set from outside
    /// (`set`), not by completing them. Charges the compile budget for each
    /// occurrence.
    pub fn new<'r>(
        n: usize,
        rules: impl Iterator<Item = (u32, &'r [Sym])> + Clone,
        terminal: impl Fn(u32) -> bool,
        skip: impl Fn(u32) -> bool,
    ) -> Result<Self> {
        let mut counts = vec![0u32; n + 1];
        let mut occurrences = 0usize;
        for (_, rhs) in rules.clone() {
            occurrences += rhs.len();
            for x in rhs.iter().filter_map(|s| s.nonterminal()) {
                counts[x as usize + 1] += 1;
            }
        }
        crate::budget::charge_n(2 * occurrences + n)?;
        for x in 0..n {
            counts[x + 1] += counts[x];
        }
        let user_start = counts.clone();
        let mut fill = counts;
        let mut users = vec![0u32; occurrences];
        let (mut lhs, mut waiting, mut ready) = (Vec::new(), Vec::new(), Vec::new());
        for (i, (l, rhs)) in rules.enumerate() {
            let mut wait = 0;
            let mut blocked = false;
            for s in rhs {
                match s.nonterminal() {
                    Some(x) => {
                        users[fill[x as usize] as usize] = i as u32;
                        fill[x as usize] += 1;
                        wait += 1;
                    }
                    None => blocked |= !terminal(terminal_id(*s)),
                }
            }
            // A terminal that never holds blocks the rule for good.
            lhs.push(l);
            waiting.push(if blocked { u32::MAX } else { wait });
            if wait == 0 && !blocked && !skip(l) {
                ready.push(l);
            }
        }
        let mut horn = Horn {
            holds: vec![false; n],
            lhs,
            waiting,
            user_start,
            users,
            queue: Vec::new(),
        };
        for x in ready {
            horn.set(x, &skip);
        }
        Ok(horn)
    }

    /// Records that `x` holds and propagates it (rules whose lhs `skip`
    /// names are not completed by propagation).
    pub fn set(&mut self, x: u32, skip: &impl Fn(u32) -> bool) {
        if self.holds[x as usize] {
            return;
        }
        self.holds[x as usize] = true;
        self.queue.push(x);
        while let Some(y) = self.queue.pop() {
            let range = self.user_start[y as usize]..self.user_start[y as usize + 1];
            for u in range {
                let r = self.users[u as usize] as usize;
                if self.waiting[r] == u32::MAX {
                    continue;
                }
                self.waiting[r] -= 1;
                let l = self.lhs[r];
                if self.waiting[r] == 0 && !skip(l) && !self.holds[l as usize] {
                    self.holds[l as usize] = true;
                    self.queue.push(l);
                }
            }
        }
    }

    pub fn holds(&self) -> &[bool] {
        &self.holds
    }

    pub fn into_holds(self) -> Vec<bool> {
        self.holds
    }
}

fn terminal_id(s: Sym) -> u32 {
    match s {
        Sym::T(t) => t,
        Sym::N(x) | Sym::P(x, _) => x,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn solve(n: usize, rules: &[(u32, Vec<Sym>)], terminal: impl Fn(u32) -> bool) -> Vec<bool> {
        let it = rules.iter().map(|(l, r)| (*l, r.as_slice()));
        Horn::new(n, it, terminal, |_| false).unwrap().into_holds()
    }

    /// The sweep-until-nothing-changes definition, the oracle.
    fn sweep(n: usize, rules: &[(u32, Vec<Sym>)], terminal: impl Fn(u32) -> bool) -> Vec<bool> {
        let mut holds = vec![false; n];
        loop {
            let mut changed = false;
            for (l, rhs) in rules {
                let ok = rhs.iter().all(|s| match *s {
                    Sym::T(t) => terminal(t),
                    Sym::N(x) | Sym::P(x, _) => holds[x as usize],
                });
                if ok && !holds[*l as usize] {
                    holds[*l as usize] = true;
                    changed = true;
                }
            }
            if !changed {
                return holds;
            }
        }
    }

    #[test]
    fn a_reversed_chain_is_solved_in_one_pass() {
        let n = 50_000;
        let mut rules: Vec<(u32, Vec<Sym>)> =
            (0..n - 1).map(|i| (i, vec![Sym::N(i + 1)])).collect();
        rules.push((n - 1, vec![Sym::T(0)]));
        let holds = solve(n as usize, &rules, |_| true);
        assert!(holds.iter().all(|&h| h));
        let holds = solve(n as usize, &rules, |_| false);
        assert!(holds.iter().all(|&h| !h));
    }

    #[test]
    fn agrees_with_sweeping_on_small_random_grammars() {
        let mut seed = 0x2545_f491_u64;
        let mut next = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        for _ in 0..2_000 {
            let n = 1 + next(6) as u32;
            let rules: Vec<(u32, Vec<Sym>)> = (0..next(10))
                .map(|_| {
                    let rhs = (0..next(4))
                        .map(|_| match next(3) {
                            0 => Sym::T(next(2) as u32),
                            _ => Sym::N(next(n as u64) as u32),
                        })
                        .collect();
                    (next(n as u64) as u32, rhs)
                })
                .collect();
            let terminal = |t: u32| t == 0;
            assert_eq!(
                solve(n as usize, &rules, terminal),
                sweep(n as usize, &rules, terminal),
                "{rules:?}"
            );
        }
    }

    #[test]
    fn skipped_left_hand_sides_are_set_from_outside() {
        // 0 ::= 1 ; 1 (skipped) ::= T0
        let rules = [(0u32, vec![Sym::N(1)]), (1, vec![Sym::T(0)])];
        let it = rules.iter().map(|(l, r)| (*l, r.as_slice()));
        let skip = |x: u32| x == 1;
        let mut horn = Horn::new(2, it, |_| true, skip).unwrap();
        assert_eq!(horn.holds(), &[false, false]);
        horn.set(1, &skip);
        assert_eq!(horn.holds(), &[true, true]);
    }
}
