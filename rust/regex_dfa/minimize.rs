//! Equivalent states of a table automaton, by Hopcroft's partition
//! refinement.
//!
//! Moore's refinement (every state's row of block numbers, hashed, once per
//! round) needs as many rounds as the longest chain of states it tells
//! apart: a count such as `(?:\S+\s+){0,19}` over JSON text has 864 states
//! and forty rounds, 3.5 ms. Hopcroft's splits a block only by the
//! predecessors of a smaller one, O(classes x states x log states) in all.
//!
//! A splitter (block, class) whose states no state steps to by that class
//! splits nothing, now or later (its blocks only shrink), so it is not
//! queued at all: a state of an automaton over JSON text is entered by a
//! few of its fifty-odd classes, and reading every member of every block
//! once per class was most of the refinement's time.

/// The block of every state of the table `trans` (`stride` classes per
/// row, row 0 the dead state): states in one block accept the same
/// strings. The dead state's block is 0, the others are numbered by their
/// lowest state. None when it would take more than `work_limit` steps
/// (predecessors visited).
pub(super) fn equivalence_classes(
    trans: &[u32],
    stride: usize,
    accepting: &[bool],
    work_limit: usize,
) -> Option<(Vec<u32>, usize)> {
    let n = accepting.len();
    let preds = Predecessors::new(trans, stride, n);
    let mut p = Partition::new(accepting);
    // (block, class) splitters still to use; `queued` mirrors the list.
    let mut queued: Vec<bool> = Vec::new();
    let mut work: Vec<(u32, u32)> = Vec::new();
    let entered = EnteredBy::new(trans, stride, n);
    let (mut by_y, mut by_smaller) = (Vec::new(), Vec::new());
    let first = p.smaller_initial_block();
    entered.of_block(p.members(first), &mut by_y);
    for c in 0..stride as u32 {
        if EnteredBy::has(&by_y, c) {
            queue(&mut queued, &mut work, stride, first, c);
        }
    }
    let mut steps = 0usize;
    let mut splitter: Vec<u32> = Vec::new();
    let mut touched: Vec<u32> = Vec::new();
    while let Some((b, c)) = work.pop() {
        queued[b as usize * stride + c as usize] = false;
        // The splitter's states are read before any is moved.
        splitter.clear();
        splitter.extend_from_slice(p.members(b));
        for &t in &splitter {
            let from = preds.of(t, c);
            steps += from.len() + 1;
            for &s in from {
                if p.mark(s) {
                    touched.push(p.block[s as usize]);
                }
            }
        }
        if steps > work_limit {
            return None;
        }
        for x in touched.drain(..) {
            let Some(y) = p.split(x) else { continue };
            let smaller = if p.len(y) <= p.len(x) { y } else { x };
            steps += p.len(smaller) + p.len(y);
            entered.of_block(p.members(y), &mut by_y);
            // The smaller part is often `y` itself: read it once.
            let smaller_entered = if smaller == y {
                &by_y
            } else {
                entered.of_block(p.members(smaller), &mut by_smaller);
                &by_smaller
            };
            for c2 in 0..stride as u32 {
                // A queued block's new part is queued too; otherwise the
                // smaller part suffices (the other is told apart by it).
                // Either way, only if some state of it is entered by c2.
                if queued
                    .get(x as usize * stride + c2 as usize)
                    .is_some_and(|&q| q)
                {
                    if EnteredBy::has(&by_y, c2) {
                        queue(&mut queued, &mut work, stride, y, c2);
                    }
                } else if EnteredBy::has(smaller_entered, c2) {
                    queue(&mut queued, &mut work, stride, smaller, c2);
                }
            }
        }
    }
    Some(p.numbered())
}

fn queue(queued: &mut Vec<bool>, work: &mut Vec<(u32, u32)>, stride: usize, b: u32, c: u32) {
    let i = b as usize * stride + c as usize;
    if queued.len() <= i {
        queued.resize((b as usize + 1) * stride, false);
    }
    if !queued[i] {
        queued[i] = true;
        work.push((b, c));
    }
}

/// For each state, the classes by which some state steps to it (one bit
/// per class).
struct EnteredBy {
    words: usize,
    by_state: Vec<u64>,
}

impl EnteredBy {
    fn new(trans: &[u32], stride: usize, n: usize) -> Self {
        let words = stride.div_ceil(64);
        let mut by_state = vec![0u64; n * words];
        for (i, &t) in trans.iter().enumerate() {
            let c = i % stride;
            by_state[t as usize * words + c / 64] |= 1 << (c % 64);
        }
        EnteredBy { words, by_state }
    }

    /// The classes that enter some state of `members`, into `out`.
    fn of_block(&self, members: &[u32], out: &mut Vec<u64>) {
        out.clear();
        out.resize(self.words, 0);
        for &s in members {
            let row = &self.by_state[s as usize * self.words..][..self.words];
            for (acc, &w) in out.iter_mut().zip(row) {
                *acc |= w;
            }
        }
    }

    fn has(classes: &[u64], c: u32) -> bool {
        classes[c as usize / 64] >> (c % 64) & 1 == 1
    }
}

/// For each (state, class), the states that step to it by that class.
struct Predecessors {
    stride: usize,
    /// `start[t * stride + c]..start[t * stride + c + 1]` indexes `from`.
    start: Vec<u32>,
    from: Vec<u32>,
}

impl Predecessors {
    fn new(trans: &[u32], stride: usize, n: usize) -> Self {
        let mut start = vec![0u32; n * stride + 1];
        for (i, &t) in trans.iter().enumerate() {
            start[t as usize * stride + i % stride + 1] += 1;
        }
        for i in 1..start.len() {
            start[i] += start[i - 1];
        }
        let mut fill = start.clone();
        let mut from = vec![0u32; trans.len()];
        for (i, &t) in trans.iter().enumerate() {
            let slot = &mut fill[t as usize * stride + i % stride];
            from[*slot as usize] = (i / stride) as u32;
            *slot += 1;
        }
        Predecessors {
            stride,
            start,
            from,
        }
    }

    fn of(&self, t: u32, c: u32) -> &[u32] {
        let i = t as usize * self.stride + c as usize;
        &self.from[self.start[i] as usize..self.start[i + 1] as usize]
    }
}

/// Blocks as ranges of one array of states; a block's marked states are
/// moved to the front of its range.
struct Partition {
    elems: Vec<u32>,
    /// Where each state is in `elems`.
    loc: Vec<u32>,
    block: Vec<u32>,
    first: Vec<u32>,
    end: Vec<u32>,
    marked: Vec<u32>,
}

impl Partition {
    /// Two blocks: the states that do not accept (the dead one among them)
    /// and those that do (fewer than two blocks if one side is empty).
    fn new(accepting: &[bool]) -> Self {
        let n = accepting.len();
        let mut elems: Vec<u32> = (0..n as u32).filter(|&s| !accepting[s as usize]).collect();
        let rejecting = elems.len() as u32;
        elems.extend((0..n as u32).filter(|&s| accepting[s as usize]));
        let mut loc = vec![0u32; n];
        for (i, &s) in elems.iter().enumerate() {
            loc[s as usize] = i as u32;
        }
        let mut p = Partition {
            elems,
            loc,
            block: vec![0; n],
            first: vec![0],
            end: vec![rejecting],
            marked: vec![0],
        };
        if rejecting == 0 {
            p.end[0] = n as u32;
        } else if (rejecting as usize) < n {
            p.first.push(rejecting);
            p.end.push(n as u32);
            p.marked.push(0);
            for i in rejecting as usize..n {
                p.block[p.elems[i] as usize] = 1;
            }
        }
        p
    }

    fn smaller_initial_block(&self) -> u32 {
        if self.first.len() == 2 && self.len(1) < self.len(0) {
            1
        } else {
            0
        }
    }

    fn len(&self, b: u32) -> usize {
        (self.end[b as usize] - self.first[b as usize]) as usize
    }

    fn members(&self, b: u32) -> &[u32] {
        &self.elems[self.first[b as usize] as usize..self.end[b as usize] as usize]
    }

    /// Marks `s`; true if it is the first mark in its block.
    fn mark(&mut self, s: u32) -> bool {
        let b = self.block[s as usize] as usize;
        let front = self.first[b] + self.marked[b];
        let at = self.loc[s as usize];
        if at < front {
            return false; // marked already
        }
        let other = self.elems[front as usize];
        self.elems.swap(at as usize, front as usize);
        self.loc[other as usize] = at;
        self.loc[s as usize] = front;
        self.marked[b] += 1;
        self.marked[b] == 1
    }

    /// Splits block `x`'s marked states off into a new block (returned),
    /// unless all of `x` is marked; clears the marks.
    fn split(&mut self, x: u32) -> Option<u32> {
        let xi = x as usize;
        let marked = std::mem::take(&mut self.marked[xi]);
        if marked == self.end[xi] - self.first[xi] {
            return None;
        }
        let y = self.first.len() as u32;
        let start = self.first[xi];
        self.first.push(start);
        self.end.push(start + marked);
        self.marked.push(0);
        self.first[xi] = start + marked;
        for i in start..start + marked {
            self.block[self.elems[i as usize] as usize] = y;
        }
        Some(y)
    }

    /// Blocks renumbered: the dead state's 0, the others in the order of
    /// their lowest state; and the number of blocks.
    fn numbered(&self) -> (Vec<u32>, usize) {
        const NONE: u32 = u32::MAX;
        let mut id = vec![NONE; self.first.len()];
        id[self.block[0] as usize] = 0;
        let mut count = 1;
        let mut class = vec![0u32; self.block.len()];
        for (s, &b) in self.block.iter().enumerate() {
            if id[b as usize] == NONE {
                id[b as usize] = count;
                count += 1;
            }
            class[s] = id[b as usize];
        }
        (class, count as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Moore's refinement, the oracle: states stay together while they
    /// agree on acceptance and on the blocks of all their successors.
    fn moore(trans: &[u32], stride: usize, accepting: &[bool]) -> Vec<u32> {
        let n = accepting.len();
        let mut class: Vec<u32> = accepting.iter().map(|&a| a as u32).collect();
        loop {
            let sig = |s: usize| {
                let mut v = vec![class[s]];
                v.extend(
                    trans[s * stride..][..stride]
                        .iter()
                        .map(|&t| class[t as usize]),
                );
                v
            };
            let mut ids: Vec<Vec<u32>> = Vec::new();
            let next: Vec<u32> = (0..n)
                .map(|s| {
                    let g = sig(s);
                    match ids.iter().position(|x| *x == g) {
                        Some(i) => i as u32,
                        None => {
                            ids.push(g);
                            (ids.len() - 1) as u32
                        }
                    }
                })
                .collect();
            let same =
                (0..n).all(|a| (0..n).all(|b| (next[a] == next[b]) == (class[a] == class[b])));
            class = next;
            if same {
                return class;
            }
        }
    }

    /// A random table over `stride` classes whose row 0 is dead.
    fn random_table(seed: &mut u64, n: usize, stride: usize) -> (Vec<u32>, Vec<bool>) {
        let mut next = || {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            *seed
        };
        let mut trans = vec![0u32; n * stride];
        for t in trans.iter_mut().skip(stride) {
            // Few distinct targets, so that many states are equivalent.
            *t = (next() % (n as u64).min(4 + next() % 6)) as u32;
        }
        let accepting = (0..n).map(|s| s > 0 && next() % 3 == 0).collect();
        (trans, accepting)
    }

    #[test]
    fn blocks_are_the_states_moore_tells_apart() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..600 {
            let n = 1 + round % 40;
            // Past 64 classes, a state's entering classes take two words.
            let stride = if round % 7 == 0 {
                60 + round % 11
            } else {
                1 + round % 5
            };
            let (trans, accepting) = random_table(&mut seed, n, stride);
            let (class, count) =
                equivalence_classes(&trans, stride, &accepting, usize::MAX).unwrap();
            let oracle = moore(&trans, stride, &accepting);
            for a in 0..n {
                for b in 0..n {
                    assert_eq!(
                        class[a] == class[b],
                        oracle[a] == oracle[b],
                        "states {a} {b} of {trans:?} {accepting:?}"
                    );
                }
            }
            assert_eq!(class[0], 0);
            assert_eq!(count, *class.iter().max().unwrap() as usize + 1);
        }
    }

    #[test]
    fn work_past_the_limit_gives_none() {
        let mut seed = 5u64;
        let (trans, accepting) = random_table(&mut seed, 30, 3);
        assert!(equivalence_classes(&trans, 3, &accepting, 2).is_none());
    }
}
