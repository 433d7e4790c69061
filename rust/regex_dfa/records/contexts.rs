//! The shared contexts of a record automaton, found breadth first from the
//! start, and the ranges of state numbers each context owns.
//!
//! A shared context is what the members read so far leave when several
//! records still fit: the keys not used yet, and per key the member values
//! some fitting record has, each leading to the next context (shared again
//! when several records have it, else one record's own). It is named by its
//! first fitting record and its used keys, which the members read fix.
//!
//! **Numbers.** Each context owns a range: the start, and any context that
//! many records fit, one number per place anywhere in the text (the
//! `Layout`); a context whose records' blocks of places take fewer, the
//! glue after a value and then each fitting record's block, a place
//! numbered in the block of the record that has the smallest key or member
//! through it (a product table with a column of a thousand sizes each
//! shared by ten rows makes thousands of such contexts: with a number per
//! place anywhere, they passed 2^32); a record's own contexts, a block per
//! mask of used members. `Owners` finds
//! the range a number is in through buckets of about one range each.

use super::trie::Interner;
use super::{Ctx, Records};
use crate::error::Result;

/// Members the search for shared contexts may list, per member of the
/// records, and beside that: a table with a column of 1,000 sizes shared by
/// 20 rows each lists 12 per member; records built to share all but one of
/// sixteen members would list 2^15 per member.
const ROWS_PER_MEMBER: usize = 64;
const ROWS_BESIDE: usize = 1 << 20;

/// A shared context: what several records still fit.
#[derive(Debug, Default)]
pub(super) struct Context {
    /// Every key and member is possible (the start).
    pub(super) all: bool,
    pub(super) can_close: bool,
    pub(super) has_more: bool,
    /// The keys not used yet that some record has, sorted.
    pub(super) keys: Vec<u32>,
    /// The member values of `keys[x]` some record has are
    /// `members[key_start[x]..key_start[x + 1]]`, sorted, each leading to
    /// `children` beside it.
    pub(super) key_start: Vec<u32>,
    pub(super) members: Vec<u32>,
    pub(super) children: Vec<Ctx>,
    /// The keys used, sorted.
    pub(super) used: Vec<u32>,
    /// Where its records' blocks take fewer numbers than the layout: they.
    pub(super) listed: Option<Listed>,
}

/// The records of a context numbered through their blocks.
#[derive(Debug, Default)]
pub(super) struct Listed {
    /// The records, sorted, and where each one's block starts in the
    /// context's range (after the glue's places; one start more).
    pub(super) records: Vec<u32>,
    pub(super) starts: Vec<u32>,
    /// Beside the context's `keys` and `members`: the first record (an
    /// index in `records`) that has each.
    pub(super) key_first: Vec<u32>,
    pub(super) member_first: Vec<u32>,
}

impl Context {
    /// The member values of key `k` some record of the context has, sorted
    /// (none where no record has the key or it is used).
    pub(super) fn members_of(&self, k: u32) -> &[u32] {
        match self.keys.binary_search(&k) {
            Ok(x) => &self.members[self.key_start[x] as usize..self.key_start[x + 1] as usize],
            Err(_) => &[],
        }
    }

    /// Where member `m` of key `k` is in `members` (and the lists beside it).
    pub(super) fn member_index(&self, k: u32, m: u32) -> Option<usize> {
        let x = self.keys.binary_search(&k).ok()?;
        let lo = self.key_start[x] as usize;
        let y = self.members_of(k).binary_search(&m).ok()?;
        Some(lo + y)
    }

    pub(super) fn memory_bytes(&self) -> usize {
        let listed = self.listed.as_ref().map_or(0, |l| {
            (l.records.len() + l.starts.len() + l.key_first.len() + l.member_first.len()) * 4
        });
        (self.keys.len() + self.key_start.len() + self.members.len() + self.used.len()) * 4
            + self.children.len() * 16
            + listed
    }
}

/// The ranges of state numbers: shared contexts first, then records.
#[derive(Debug, Default)]
pub(super) struct Owners {
    /// Owner `o`'s numbers are `base[o]..base[o + 1]`; the last is the
    /// count of numbers (0, the dead state, is no one's).
    base: Vec<u32>,
    /// The owner of the first number of each bucket of `1 << shift`.
    bucket: Vec<u32>,
    shift: u32,
    shared: u32,
}

impl Owners {
    /// Ranges of `sizes` from number 1 (the first `shared` are shared
    /// contexts'), or None past 2^32 numbers.
    fn new(sizes: impl Iterator<Item = u64>, shared: u32) -> Option<Owners> {
        let mut base = vec![1u32];
        let mut at = 1u64;
        for size in sizes {
            at += size;
            if at >= u64::from(u32::MAX) {
                return None;
            }
            base.push(at as u32);
        }
        let owners = (base.len() - 1) as u64;
        let shift = ((at - 1) / owners.max(1)).max(1).ilog2();
        let mut bucket = Vec::new();
        let mut o = 0usize;
        for b in 0..=((at - 1) >> shift) {
            let number = 1 + (b << shift);
            while o + 2 < base.len() && u64::from(base[o + 1]) <= number {
                o += 1;
            }
            bucket.push(o as u32);
        }
        Some(Owners {
            base,
            bucket,
            shift,
            shared,
        })
    }

    /// The count of state numbers, 0 included.
    pub(super) fn states(&self) -> u32 {
        self.base.last().copied().unwrap_or(1)
    }

    /// The owner of number `q` (not 0) and `q`'s place in its range: a
    /// shared context, or a record (numbered from 0).
    pub(super) fn owner_of(&self, q: u32) -> (Ctx, u32) {
        let mut o = self.bucket[((q - 1) >> self.shift) as usize] as usize;
        while o + 2 < self.base.len() && self.base[o + 1] <= q {
            o += 1;
        }
        let rel = q - self.base[o];
        match (o as u32).checked_sub(self.shared) {
            None => (Ctx::Shared(o as u32), rel),
            Some(i) => (Ctx::Record(i, 0), rel),
        }
    }

    /// Where shared context `c`'s numbers start.
    pub(super) fn shared_base(&self, c: u32) -> u32 {
        self.base[c as usize]
    }

    /// Where record `i`'s numbers start.
    pub(super) fn record_base(&self, i: u32) -> u32 {
        self.base[(self.shared + i) as usize]
    }

    pub(super) fn memory_bytes(&self) -> usize {
        (self.base.len() + self.bucket.len()) * 4
    }
}

impl Records {
    /// Finds the shared contexts, breadth first from the start, and numbers
    /// the states; false when they need more numbers than a state holds or
    /// list more members than `ROWS_PER_MEMBER` allows.
    pub(super) fn contexts_found(&mut self) -> Result<bool> {
        let records = self.rec_places.len() as u32;
        let mut index: Interner<(u32, Vec<u32>)> = Interner::new();
        index.id((0, Vec::new()));
        let mut queue: Vec<(Vec<u32>, Vec<u32>)> = vec![((0..records).collect(), Vec::new())];
        let mut sizes = Vec::new();
        let mut numbers = 0u64;
        let mut rows_left = ROWS_PER_MEMBER * self.rec_key.len() + ROWS_BESIDE;
        let mut next = 0;
        while next < queue.len() {
            let (fit, used) = std::mem::take(&mut queue[next]);
            let mut ctx = self.context_of(&fit, &used, next == 0);
            let mut rows = self.unused_members(&fit, &used)?;
            match rows_left.checked_sub(rows.len()) {
                Some(left) => rows_left = left,
                None => return Ok(false),
            }
            rows.sort_unstable();
            let mut x = 0;
            while x < rows.len() {
                let (k, m, i) = rows[x];
                let same = rows[x..]
                    .iter()
                    .take_while(|r| (r.0, r.1) == (k, m))
                    .count();
                if ctx.keys.last() != Some(&k) {
                    ctx.keys.push(k);
                    ctx.key_start.push(ctx.members.len() as u32);
                    if let Some(l) = &mut ctx.listed {
                        l.key_first.push(u32::MAX);
                    }
                }
                if let Some(l) = &mut ctx.listed {
                    // Rows of a member come by record: `i` is its first.
                    let first = l.records.binary_search(&i).expect("a fitting record") as u32;
                    l.member_first.push(first);
                    let key_first = l.key_first.last_mut().expect("pushed with the key");
                    *key_first = (*key_first).min(first);
                }
                let child = if same == 1 {
                    Ctx::Record(i, self.mask_of(i, &used, k))
                } else {
                    let mut now_used = used.clone();
                    let at = now_used.binary_search(&k).unwrap_err();
                    now_used.insert(at, k);
                    let (id, new) = index.id((i, now_used.clone()));
                    if new {
                        queue.push((rows[x..x + same].iter().map(|r| r.2).collect(), now_used));
                    }
                    Ctx::Shared(id)
                };
                ctx.members.push(m);
                ctx.children.push(child);
                x += same;
            }
            ctx.key_start.push(ctx.members.len() as u32);
            let size = match &ctx.listed {
                Some(l) => u64::from(*l.starts.last().expect("a start per record and one more")),
                None => u64::from(self.layout.places),
            };
            numbers += size;
            if numbers >= u64::from(u32::MAX) {
                return Ok(false);
            }
            sizes.push(size);
            self.contexts.push(ctx);
            next += 1;
        }
        let shared = self.contexts.len() as u32;
        let records = (0..records).map(|i| {
            let (lo, hi) = self.rec_range(i);
            (1u64 << (hi - lo)) * u64::from(self.rec_places[i as usize])
        });
        match Owners::new(sizes.into_iter().chain(records), shared) {
            Some(owners) => self.owners = owners,
            None => return Ok(false),
        }
        Ok(true)
    }

    /// A context of records `fit` with keys `used`, its members not listed
    /// yet.
    fn context_of(&self, fit: &[u32], used: &[u32], start: bool) -> Context {
        let (mut can_close, mut has_more) = (false, false);
        for &i in fit {
            let (lo, hi) = self.rec_range(i);
            can_close |= hi - lo == used.len();
            has_more |= hi - lo > used.len();
        }
        let after = self.after.len();
        // Listed only where that takes fewer numbers than the layout.
        let blocks: u64 = fit
            .iter()
            .map(|&i| u64::from(self.rec_places[i as usize] - after))
            .sum();
        let listed =
            (!start && u64::from(after) + blocks < u64::from(self.layout.places)).then(|| {
                let mut starts = vec![after];
                for &i in fit {
                    let last = *starts.last().expect("starts with the glue's");
                    starts.push(last + self.rec_places[i as usize] - after);
                }
                Listed {
                    records: fit.to_vec(),
                    starts,
                    ..Listed::default()
                }
            });
        Context {
            all: start,
            can_close,
            has_more,
            used: used.to_vec(),
            listed,
            ..Context::default()
        }
    }

    /// The (key, member, record) of each member of `fit` whose key is not
    /// in `used`.
    fn unused_members(&self, fit: &[u32], used: &[u32]) -> Result<Vec<(u32, u32, u32)>> {
        let mut rows = Vec::new();
        for &i in fit {
            let (lo, hi) = self.rec_range(i);
            crate::budget::charge_n(hi - lo)?;
            for x in lo..hi {
                let k = self.rec_key[x];
                if used.binary_search(&k).is_err() {
                    rows.push((k, self.rec_member[x], i));
                }
            }
        }
        Ok(rows)
    }

    /// Record `i`'s members' range in `rec_key` / `rec_member`.
    pub(super) fn rec_range(&self, i: u32) -> (usize, usize) {
        (
            self.rec_start[i as usize] as usize,
            self.rec_start[i as usize + 1] as usize,
        )
    }

    /// The mask of record `i`'s members whose keys are in `used` (sorted)
    /// or are `k`.
    fn mask_of(&self, i: u32, used: &[u32], k: u32) -> u64 {
        let (lo, hi) = self.rec_range(i);
        (lo..hi)
            .enumerate()
            .filter(|&(_, x)| self.rec_key[x] == k || used.binary_search(&self.rec_key[x]).is_ok())
            .fold(0, |mask, (j, _)| mask | 1 << j)
    }
}
