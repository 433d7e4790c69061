//! Products with an operand that has a block of shared copies.
//!
//! A string's `maxLength: 2048` intersected with its `format: uri` was a
//! product of 2048 copies by the URI automaton's states: tens of
//! megabytes, most of a schema's compile time, often over the size bound.
//! Pairs of (other operand's state, place in a copy) behave alike in every
//! copy, so the product keeps a block too: its places are those pairs,
//! found once; its copies are the operand's, less a tail near the end of
//! the count where a place may no longer reach an accepting state in time.
//! The tail is laid out as table rows, with exact liveness.
//!
//! Why that is exact: a way to accept from a place, in any copy, read with
//! copies forgotten is a way through the places (the operand's last copy
//! has the block's steps less those into a next copy, and a dead operand
//! kills an intersection), so a place with no such way is dead in every
//! copy; one whose way takes k steps into next copies is live in every copy
//! at least k before the end. (For `a` and-not a blocked `b`, `b` dying
//! past the count is a way in, and those products are laid out.)

use rustc_hash::FxHashMap as HashMap;
use std::collections::VecDeque;

use super::periodic::{check_states, Code, JoinedClasses, Periodic};
use super::product::joint_classes;
use super::table::Table;
use super::{ByteDfa, Error, Op, Result, DEAD, DFA_SIZE_LIMIT};

/// A transition of the product before states are numbered.
#[derive(Clone, Copy, Debug)]
enum To {
    Dead,
    /// A table pair, by discovery index.
    Pair(u32),
    /// A place (by index) in a given copy: a step into the block.
    Place(u32, u32),
    /// From a place: a place of the same copy, or of the next.
    Same(u32),
    Next(u32),
}

/// The product's states as they are found: pairs of states (`a`'s, `b`'s)
/// kept as table rows, and places of the block.
struct Explorer<'a> {
    a: &'a ByteDfa,
    b: &'a ByteDfa,
    op: Op,
    /// Whether `a` (else `b`) is the operand with the block.
    x_is_a: bool,
    x: &'a ByteDfa,
    block: &'a Periodic,
    representative: Vec<u8>,
    /// Block states in copies from this one on are paired as table rows.
    cut: u32,
    pair_ids: HashMap<(u32, u32), u32>,
    pairs: Vec<(u32, u32)>,
    /// Places: (the other operand's state, place in the block's copies).
    place_ids: HashMap<(u32, u32), u32>,
    places: Vec<(u32, u32)>,
    pair_rows: Vec<To>,
    place_rows: Vec<To>,
}

impl Explorer<'_> {
    fn stride(&self) -> usize {
        self.representative.len()
    }

    fn is_dead(&self, qa: u32, qb: u32) -> bool {
        qa == DEAD || (qb == DEAD && self.op == Op::And)
    }

    fn accepts(&self, a_accepts: bool, qb_live: bool, b_accepts: bool) -> bool {
        a_accepts && ((qb_live && b_accepts) == (self.op == Op::And))
    }

    fn pair_accepts(&self, (qa, qb): (u32, u32)) -> bool {
        let b_accepts = qb != DEAD && self.b.is_accepting(qb);
        self.accepts(self.a.is_accepting(qa), qb != DEAD, b_accepts)
    }

    fn place_accepts(&self, (o, s): (u32, u32)) -> bool {
        let here = self.block.accepts_at(s);
        if self.x_is_a {
            self.accepts(here, o != DEAD, o != DEAD && self.b.is_accepting(o))
        } else {
            self.accepts(self.a.is_accepting(o), true, here)
        }
    }

    /// The pair of the other operand's state `o` and the blocked one's `q`.
    fn pair(&self, o: u32, q: u32) -> (u32, u32) {
        if self.x_is_a {
            (q, o)
        } else {
            (o, q)
        }
    }

    /// Where the product goes to pair `(qa, qb)`.
    fn to(&mut self, qa: u32, qb: u32) -> To {
        if self.is_dead(qa, qb) {
            return To::Dead;
        }
        let (q, o) = if self.x_is_a { (qa, qb) } else { (qb, qa) };
        if q as usize >= self.x.accepting.len() {
            let (copy, s) = self.block.coords(q);
            if copy < self.cut {
                return To::Place(self.place(o, s), copy);
            }
        }
        let fresh = self.pairs.len() as u32;
        let id = *self.pair_ids.entry((qa, qb)).or_insert(fresh);
        if id == fresh {
            self.pairs.push((qa, qb));
        }
        To::Pair(id)
    }

    fn place(&mut self, o: u32, s: u32) -> u32 {
        let fresh = self.places.len() as u32;
        let id = *self.place_ids.entry((o, s)).or_insert(fresh);
        if id == fresh {
            self.places.push((o, s));
        }
        id
    }

    /// Rows for every pair and place found so far and those they lead to.
    fn explore(&mut self) -> Result<()> {
        let stride = self.stride();
        loop {
            let (p, k) = (
                self.pair_rows.len() / stride,
                self.place_rows.len() / stride,
            );
            if p < self.pairs.len() {
                let (qa, qb) = self.pairs[p];
                for c in 0..stride {
                    let r = self.representative[c];
                    let t = self.to(self.a.step(qa, r), self.b.step(qb, r));
                    self.pair_rows.push(t);
                }
            } else if k < self.places.len() {
                let (o, s) = self.places[k];
                let other = if self.x_is_a { self.b } else { self.a };
                for c in 0..stride {
                    let r = self.representative[c];
                    let o2 = other.step(o, r);
                    let code = self.block.code(s, self.x.class(r) as usize, self.x.stride);
                    let (same, t) = match code {
                        Code::Table(f) => {
                            let (qa, qb) = self.pair(o2, f);
                            let t = self.to(qa, qb);
                            self.place_rows.push(t);
                            continue;
                        }
                        Code::Same(t) => (true, t),
                        Code::Next(t) => (false, t),
                    };
                    // The blocked operand is live in the block.
                    let dead = if self.x_is_a {
                        o2 == DEAD && self.op == Op::And
                    } else {
                        o2 == DEAD
                    };
                    let to = match (dead, same) {
                        (true, _) => To::Dead,
                        (false, true) => To::Same(self.place(o2, t)),
                        (false, false) => To::Next(self.place(o2, t)),
                    };
                    self.place_rows.push(to);
                }
            } else {
                return Ok(());
            }
            if (self.pair_rows.len() + self.place_rows.len()) * 4 > DFA_SIZE_LIMIT {
                return Err(Error::LimitExceeded(format!(
                    "a product of automata needs a DFA larger than {} MiB",
                    DFA_SIZE_LIMIT >> 20
                )));
            }
        }
    }

    /// For each pair then each place (places after pairs): the fewest
    /// steps into a next copy on a way to an accepting state, None where
    /// there is none (a 0-1 search backwards from the accepting ones).
    fn distances(&self) -> Vec<Option<u32>> {
        let stride = self.stride();
        let n_pairs = self.pairs.len();
        let n = n_pairs + self.places.len();
        let mut preds: Vec<Vec<(u32, u32)>> = vec![Vec::new(); n];
        let rows = self
            .pair_rows
            .chunks(stride)
            .chain(self.place_rows.chunks(stride));
        for (from, row) in rows.enumerate() {
            for &t in row {
                let (to, cost) = match t {
                    To::Dead => continue,
                    To::Pair(i) => (i as usize, 0),
                    To::Place(k, _) | To::Same(k) => (n_pairs + k as usize, 0),
                    To::Next(k) => (n_pairs + k as usize, 1),
                };
                preds[to].push((from as u32, cost));
            }
        }
        let mut dist: Vec<Option<u32>> = vec![None; n];
        let mut queue = VecDeque::new();
        for (i, d) in dist.iter_mut().enumerate() {
            let accepts = if i < n_pairs {
                self.pair_accepts(self.pairs[i])
            } else {
                self.place_accepts(self.places[i - n_pairs])
            };
            if accepts {
                *d = Some(0);
                queue.push_back(i);
            }
        }
        while let Some(t) = queue.pop_front() {
            let d = dist[t].expect("queued nodes have distances");
            for &(from, cost) in &preds[t] {
                let nd = d + cost;
                let slot = &mut dist[from as usize];
                if slot.is_none_or(|old| nd < old) {
                    *slot = Some(nd);
                    if cost == 0 {
                        queue.push_front(from as usize);
                    } else {
                        queue.push_back(from as usize);
                    }
                }
            }
        }
        dist
    }
}

/// The product of `a` and `b` keeping the block of the one that has one
/// (see the module notes); None where that does not apply (both have
/// blocks, or the product enters the block near its end) and the plain
/// product is built instead.
pub(super) fn product(a: &ByteDfa, b: &ByteDfa, op: Op) -> Result<Option<ByteDfa>> {
    if op == Op::Or {
        // Unions are of small alternatives: the plain product.
        return Ok(None);
    }
    // Past the last copy, a step that would go into a next copy leads to
    // the dead state: for `a` and-not a blocked `b`, the end of the count
    // is a way to accept that no copy shows, so the copies are laid out.
    // With two blocks, the smaller is laid out (for and-not, `b`'s).
    if let (Some(pa), Some(pb)) = (a.periodic(), b.periodic()) {
        return if op == Op::And && pa.used_states() < pb.used_states() {
            product(&a.materialized()?, b, op)
        } else {
            product(a, &b.materialized()?, op)
        };
    }
    let (x, x_is_a) = match (a.periodic(), b.periodic(), op) {
        (Some(_), None, _) => (a, true),
        (None, Some(_), Op::And) => (b, false),
        _ => return Ok(None),
    };
    let block = x.block();
    let (classes, class_size, representative) = joint_classes(a, b);
    let mut e = Explorer {
        a,
        b,
        op,
        x_is_a,
        x,
        block,
        representative,
        cut: u32::MAX,
        pair_ids: HashMap::default(),
        pairs: Vec::new(),
        place_ids: HashMap::default(),
        places: Vec::new(),
        pair_rows: Vec::new(),
        place_rows: Vec::new(),
    };
    let start = e.to(a.start, b.start);
    e.explore()?;
    // Places that need k steps into next copies to accept are live in
    // copies at most `copies - k`; those before `copies - tail` all are.
    let n_pairs = e.pairs.len();
    let dist = e.distances();
    let tail = dist[n_pairs..].iter().flatten().copied().max().unwrap_or(0);
    let Some(cut) = block.copies().checked_sub(tail).filter(|&c| c > 0) else {
        return Ok(None);
    };
    let live_place = |k: u32| dist[n_pairs + k as usize].is_some();
    let entries_in_time = e.pair_rows.iter().all(|t| match *t {
        To::Place(k, copy) => copy < cut || !live_place(k),
        _ => true,
    });
    if !entries_in_time {
        return Ok(None);
    }
    // The tail: from the last shared copy, steps into the next copy lead
    // to pairs laid out as rows.
    e.cut = cut;
    let stride = e.stride();
    let mut after_last = vec![None; e.places.len()];
    for k in 0..e.places.len() {
        if !live_place(k as u32) {
            continue;
        }
        for c in 0..stride {
            if let To::Next(t) = e.place_rows[k * stride + c] {
                if live_place(t) && after_last[t as usize].is_none() {
                    let (o, s) = e.places[t as usize];
                    let (qa, qb) = e.pair(o, block.state_at(cut, s));
                    after_last[t as usize] = Some(e.to(qa, qb));
                }
            }
        }
    }
    e.explore()?;
    let dist = e.distances();
    let n_pairs = e.pairs.len();
    let (pair_dist, place_dist) = dist.split_at(n_pairs);
    // Number the live states: table rows first, then the block's places.
    let mut pair_id = vec![DEAD; n_pairs];
    let mut accepting = vec![false];
    for (i, d) in pair_dist.iter().enumerate() {
        if d.is_some() {
            pair_id[i] = accepting.len() as u32;
            accepting.push(e.pair_accepts(e.pairs[i]));
        }
    }
    let mut place_id = vec![u32::MAX; e.places.len()];
    let mut live_places = Vec::new();
    for (k, d) in place_dist.iter().enumerate() {
        if d.is_some() {
            place_id[k] = live_places.len() as u32;
            live_places.push(k);
        }
    }
    let rows = accepting.len();
    let classes_of = JoinedClasses {
        class_size: &class_size,
        representative: &e.representative,
    };
    let table = |t: To| match t {
        To::Pair(i) => pair_id[i as usize],
        _ => DEAD,
    };
    let periodic = (!live_places.is_empty()).then(|| {
        let place = |k: u32, code: fn(u32) -> Code| match place_id[k as usize] {
            u32::MAX => Code::Table(DEAD),
            id => code(id),
        };
        let mut codes = Vec::with_capacity(live_places.len() * stride);
        for &k in &live_places {
            for &t in &e.place_rows[k * stride..][..stride] {
                codes.push(match t {
                    To::Same(t) => place(t, Code::Same),
                    To::Next(t) => place(t, Code::Next),
                    other => Code::Table(table(other)),
                });
            }
        }
        let block_accepting = live_places
            .iter()
            .map(|&k| e.place_accepts(e.places[k]))
            .collect();
        let after: Vec<u32> = live_places
            .iter()
            .map(|&k| after_last[k].map_or(DEAD, table))
            .collect();
        Periodic::new(
            rows as u32,
            cut,
            &codes,
            block_accepting,
            after,
            &classes_of,
        )
    });
    if let Some(p) = &periodic {
        check_states(rows + p.states())?;
    }
    let mut trans = vec![DEAD; rows * stride];
    for (i, &id) in pair_id.iter().enumerate() {
        if id == DEAD {
            continue;
        }
        let row = &e.pair_rows[i * stride..][..stride];
        for (slot, &t) in trans[id as usize * stride..][..stride].iter_mut().zip(row) {
            *slot = match (t, &periodic) {
                (To::Place(k, copy), Some(p)) if place_id[k as usize] != u32::MAX => {
                    p.state_at(copy, place_id[k as usize])
                }
                _ => table(t),
            };
        }
    }
    let start = match start {
        To::Pair(i) if pair_id[i as usize] != DEAD => pair_id[i as usize],
        _ => {
            return Err(Error::Compile(
                "a product of automata matches no string".into(),
            ))
        }
    };
    let mut dfa = Table {
        classes,
        class_size,
        representative: e.representative,
        trans,
        accepting,
        start,
    }
    .finish();
    dfa.tail = periodic.map(|p| Box::new(super::Tail::Periodic(p)));
    Ok(Some(dfa))
}

#[cfg(test)]
mod tests {
    use super::super::periodic::tests::{d, shared};
    use super::super::tests::same_language;
    use super::*;

    fn table(x: &ByteDfa) -> Option<ByteDfa> {
        x.periodic().map(|_| x.materialized().unwrap())
    }

    /// The product of `a` and `b` agrees with the plain product of their
    /// tables (both empty, or the same language), and says whether it kept
    /// a block.
    fn check(a: &ByteDfa, b: &ByteDfa, op: Op, alphabet: &[u8], len: usize) -> bool {
        let kept = ByteDfa::product(a, b, op);
        let (ta, tb) = (table(a), table(b));
        let plain = ByteDfa::product(ta.as_ref().unwrap_or(a), tb.as_ref().unwrap_or(b), op);
        match (kept, plain) {
            (Ok(kept), Ok(plain)) => {
                same_language(&kept, &plain, alphabet, len);
                kept.periodic().is_some()
            }
            // Both empty (a difference of a subset).
            (Err(Error::Compile(_)), Err(Error::Compile(_))) => false,
            (kept, plain) => panic!("{:?} against {:?}", kept.err(), plain.err()),
        }
    }

    #[test]
    fn products_with_a_block_keep_the_language() {
        let block = shared("[ab]|\\\\n", 0, 9);
        for other in [
            "a*",
            "(?:ab|\\\\n)*b",
            "[ab]{2,}",
            "a{4,}b?",
            "b|",
            "(?:a|b|\\\\n){3}",
        ] {
            let o = d(other);
            for op in [Op::And, Op::AndNot] {
                check(&block, &o, op, b"ab\\n", 8);
                check(&o, &block, op, b"ab\\n", 8);
            }
        }
    }

    #[test]
    fn places_that_accept_late_are_laid_out_near_the_end() {
        // After a run of b's, five more letters are needed: the last copies
        // cannot all be shared.
        let block = shared("[ab]", 0, 12);
        assert!(check(&block, &d("[ab]*a[ab]{4}"), Op::And, b"ab", 13));
        assert!(check(&d("(?:ba|b)*aaaa"), &block, Op::And, b"ab", 13));
        assert!(check(&block, &d("[ab]*bbb"), Op::AndNot, b"ab", 13));
        // Two blocks: the smaller is laid out.
        let words = ByteDfa::repeat_sharing(&d("a+b"), 0, Some(4), 0)
            .unwrap()
            .unwrap();
        assert!(check(&block, &words, Op::And, b"ab", 13));
        assert!(check(&words, &block, Op::AndNot, b"ab", 13));
        // A product whose entry comes too late for any shared copy.
        let short = shared("[ab]", 0, 3);
        check(&short, &d("a{3}"), Op::And, b"ab", 5);
    }

    #[test]
    fn products_of_products_and_joins_keep_blocks() {
        let body = shared("[a-c]", 0, 40);
        let quote = d("\"");
        let string = ByteDfa::concat_all(&[&quote, &body, &quote])
            .unwrap()
            .unwrap();
        let once = ByteDfa::product(&string, &d("\".*b.*\""), Op::And).unwrap();
        assert!(once.periodic().is_some());
        let twice = ByteDfa::product(&once, &d("\"a.*"), Op::AndNot).unwrap();
        assert!(twice.periodic().is_some());
        let whole = d("\"[bc][a-c]{0,39}\"");
        let with_b = d("\".*b.*\"");
        let plain = ByteDfa::product(&whole, &with_b, Op::And).unwrap();
        same_language(&twice, &plain, b"abc\"", 7);
        let long = |n: usize| format!("\"b{}\"", "c".repeat(n));
        let walk = |t: &str| twice.step_bytes(twice.start(), t.as_bytes());
        assert!(twice.is_accepting(walk(&long(39))));
        assert_eq!(walk(&long(40)), DEAD);
    }

    #[test]
    fn large_counts_intersect_in_little_memory() {
        let body = ByteDfa::repeat(&d("[a-z:/.]"), 0, Some(30_000))
            .unwrap()
            .unwrap();
        let url = d("https?://[a-z]+(?:\\.[a-z]+)*(?:/[a-z]*)*");
        let p = ByteDfa::product(&body, &url, Op::And).unwrap();
        assert!(p.memory_bytes() < 1 << 20, "{}", p.memory_bytes());
        let text = format!("https://a.b/{}", "c".repeat(29_988));
        let end = p.step_bytes(p.start(), text.as_bytes());
        assert!(end != DEAD && p.is_accepting(end));
        assert_eq!(p.step_bytes(end, b"c"), DEAD);
    }
}
