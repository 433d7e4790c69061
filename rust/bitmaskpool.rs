//! Recycled bitmask buffers: large masks without a page fault per 4 KiB.
//!
//! A speculative step over a draft tree needs one bitmask row per node, and
//! SGLang allocates a fresh bitmask for every step: at a 129k vocabulary,
//! 128 requests × 64 nodes is 8,192 rows, 132 MB. Memory that large comes
//! straight from the kernel, and the first write to each of its 4 KiB pages
//! is a page fault that zeroes the page: measured on a 2-CPU machine, about
//! 35 ms for those 132 MB, where filling memory already mapped takes about
//! 4 ms and the masks themselves about 15.
//!
//! So a large buffer, once nothing refers to it any more (its owner in
//! `py::pooledmask` is dropped with the last numpy array or torch tensor
//! over it), comes back here, and the next request for a buffer of about
//! its size takes it and fills it again, with no fault. The pool holds what
//! no caller can reach: a buffer is handed out only after every reference
//! to it is gone, and to one caller at a time.
//!
//! **Bounded.** Idle buffers take at most `pool_bytes()` in all (256 MiB
//! unless `MASKPAR_BITMASK_POOL_BYTES` says otherwise; 0 turns the pool
//! off), the oldest going first when a returned one would pass the bound.
//! A request takes the smallest idle buffer that holds it, and only one at
//! most twice its size, so a small mask never pins a large one. Buffers
//! under `MIN_POOLED_WORDS` (4 MiB) are not pooled: the C allocator
//! recycles those well enough (and `allocate_token_bitmask` leaves them to
//! it).

use std::collections::TryReserveError;
use std::mem::MaybeUninit;
use std::sync::{Mutex, OnceLock};

/// Buffers smaller than this many words (4 MiB) are freed, not pooled.
/// glibc keeps freed blocks of up to 32 MiB in its heap, but only while the
/// heap around them stays put: between two steps of a server (compiles,
/// tokenization) it rarely does, and in a 2-CPU test with that churn a
/// 33 MB mask faulted its pages in again on 8 of 16 allocations (15-29 ms
/// each, 1.3 ms recycled), an 8 MB one on 7 of 16 (4-6 ms, 0.6 recycled).
/// Under 4 MiB the pool's call (its array, its tensor) costs more than the
/// faults it spares (measured at 0.1-4 MB). A buffer a framework keeps for
/// good (vLLM's) is not pooled at any size.
pub const MIN_POOLED_WORDS: usize = 1 << 20;
/// Threads that write a new large buffer's `u32::MAX`s at most.
const MAX_FILL_THREADS: usize = 4;
/// Words (16 MiB) from which a second filling thread pays for its start.
const PARALLEL_FILL_WORDS: usize = 1 << 22;
/// Idle bytes the pool keeps unless `MASKPAR_BITMASK_POOL_BYTES` is set.
pub const DEFAULT_POOL_BYTES: usize = 256 << 20;
/// Idle buffers a pool keeps at most, whatever their bytes: a step takes
/// back the few of its sizes, and a pool of many tiny buffers (a hostile
/// caller's thousands of one-word masks fit any byte bound) would make
/// every `take` a long scan under the lock.
const MAX_IDLE: usize = 64;

/// The bound on idle pooled bytes, read once from `MASKPAR_BITMASK_POOL_BYTES`
/// (`allocate_token_bitmask` asks the pool only for buffers it could keep).
pub fn pool_bytes() -> usize {
    static BYTES: OnceLock<usize> = OnceLock::new();
    *BYTES.get_or_init(|| {
        std::env::var("MASKPAR_BITMASK_POOL_BYTES")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(DEFAULT_POOL_BYTES)
    })
}

/// The most words a buffer the pool could keep holds: larger bitmasks are
/// not its to allocate.
pub fn max_pooled_words() -> usize {
    pool_bytes() / 4
}

/// Idle buffers, oldest first, the bound on their bytes, and the size
/// from which a buffer is kept.
pub struct Pool {
    idle: Vec<Box<[u32]>>,
    bytes: usize,
    limit: usize,
    min_words: usize,
}

impl Pool {
    /// A pool keeping buffers of at least `min_words` words, at most
    /// `limit` bytes of them.
    pub const fn new(limit: usize, min_words: usize) -> Self {
        Pool {
            idle: Vec::new(),
            bytes: 0,
            limit,
            min_words,
        }
    }

    /// The smallest idle buffer of `len` to `2 * len` words, taken out of
    /// the pool (its words as its last user left them).
    pub fn take_idle(&mut self, len: usize) -> Option<Box<[u32]>> {
        let i = self
            .idle
            .iter()
            .enumerate()
            .filter(|(_, b)| b.len() >= len && b.len() / 2 <= len)
            .min_by_key(|(_, b)| b.len())
            .map(|(i, _)| i)?;
        let buf = self.idle.remove(i);
        self.bytes -= bytes_of(&buf);
        Some(buf)
    }

    /// Keeps `buf` for a later `take` if it is large enough to be worth it
    /// and fits the bound (making room by freeing the oldest); frees it
    /// otherwise.
    pub fn give_back(&mut self, buf: Box<[u32]>) {
        let size = bytes_of(&buf);
        // An empty buffer holds no memory to spare anyone, and its zero
        // bytes would never count towards the bound.
        if buf.is_empty() || buf.len() < self.min_words || size > self.limit {
            return;
        }
        while self.bytes + size > self.limit || self.idle.len() >= MAX_IDLE {
            let oldest = self.idle.remove(0);
            self.bytes -= bytes_of(&oldest);
        }
        self.bytes += size;
        self.idle.push(buf);
    }

    /// Bytes of the idle buffers.
    pub fn idle_bytes(&self) -> usize {
        self.bytes
    }
}

fn bytes_of(buf: &[u32]) -> usize {
    std::mem::size_of_val(buf)
}

/// The process's pool, bounded by `pool_bytes()`.
pub fn shared() -> &'static Mutex<Pool> {
    static POOL: OnceLock<Mutex<Pool>> = OnceLock::new();
    POOL.get_or_init(|| Mutex::new(Pool::new(pool_bytes(), MIN_POOLED_WORDS)))
}

/// A buffer of at least `len` words: an idle one of the process's pool when
/// one fits (see `Pool::take_idle`), otherwise a new one of exactly `len`;
/// an error if there is no memory for a new one. Its first `len` words are
/// `u32::MAX` (every token allowed), except that with `all_ones` false an
/// idle buffer keeps what its last user left: for a caller that writes
/// every row itself, refilling it first would write it twice.
pub fn take(len: usize, all_ones: bool) -> Result<Box<[u32]>, TryReserveError> {
    if len >= MIN_POOLED_WORDS {
        // A poisoned lock only means a panic elsewhere while it was held;
        // the idle list is still a list of whole buffers.
        let idle = shared()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take_idle(len);
        if let Some(mut buf) = idle {
            if all_ones {
                // Memory already mapped: one thread fills it as fast as two
                // (memory bandwidth, measured).
                buf[..len].fill(u32::MAX);
            }
            return Ok(buf);
        }
    }
    fresh(len)
}

/// Hands `buf` back to the process's pool (see `Pool::give_back`).
pub fn give_back(buf: Box<[u32]>) {
    if buf.len() < MIN_POOLED_WORDS {
        return;
    }
    let mut pool = shared().lock().unwrap_or_else(|e| e.into_inner());
    pool.give_back(buf);
}

/// Idle bytes kept of buffers under `MIN_POOLED_WORDS` (`take_any_size`).
const SMALL_POOL_BYTES: usize = 16 << 20;

/// Buffers under `MIN_POOLED_WORDS` given back with `give_back_any_size`,
/// at most `SMALL_POOL_BYTES` of them: a server's steps of one size take
/// the same few back in turn. The process's pool leaves those to the C
/// heap (where an array's or a tensor's call cost more than the faults it
/// spares, see `MIN_POOLED_WORDS`); a caller that makes its tensor itself
/// through DLPack (`py::tensormask`, SGLang's tree step) pays no such call,
/// and a recycled buffer spares it the write of a new one and, once the
/// allocator has returned the memory to the system between two steps, a
/// page fault per 4 KiB (B = 1, N = 8: 8 rows, 130 KB; the new buffer's
/// write alone was 6 us of 50).
static SMALL: Mutex<Pool> = Mutex::new(Pool::new(SMALL_POOL_BYTES, 0));

/// `take(len, false)` for a caller that gives its buffers back with
/// `give_back_any_size`: below `MIN_POOLED_WORDS` too, an idle buffer
/// (keeping what its last user left) when one fits.
pub fn take_any_size(len: usize) -> Result<Box<[u32]>, TryReserveError> {
    if len > 0 && len < MIN_POOLED_WORDS {
        let idle = SMALL
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take_idle(len);
        if let Some(buf) = idle {
            return Ok(buf);
        }
    }
    take(len, false)
}

/// `give_back`, keeping buffers under `MIN_POOLED_WORDS` too (for
/// `take_any_size`).
pub fn give_back_any_size(buf: Box<[u32]>) {
    if buf.len() >= MIN_POOLED_WORDS {
        give_back(buf);
    } else {
        SMALL
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .give_back(buf);
    }
}

/// A new buffer of `len` words of `u32::MAX`, or an error if the memory
/// cannot be had. A large one is written by a few threads at once: what it
/// costs is the page faults of its first touch, and those run in parallel
/// (132 MB took about 70 ms on one thread, 38 on two).
fn fresh(len: usize) -> Result<Box<[u32]>, TryReserveError> {
    let mut buf: Vec<u32> = Vec::new();
    buf.try_reserve_exact(len)?;
    let threads = crate::cores::available_cores();
    let threads = threads
        .min(MAX_FILL_THREADS)
        .min(len / PARALLEL_FILL_WORDS * 2)
        .max(1);
    let part = len.div_ceil(threads).max(1);
    // Parts no thread could be started for: written here afterwards.
    let mut unwritten = Vec::new();
    std::thread::scope(|s| {
        let mut parts = buf.spare_capacity_mut()[..len].chunks_mut(part).enumerate();
        let mine = parts.next();
        for (i, p) in parts {
            if std::thread::Builder::new()
                .spawn_scoped(s, || fill(p))
                .is_err()
            {
                unwritten.push(i);
            }
        }
        if let Some((_, p)) = mine {
            fill(p);
        }
    });
    for i in unwritten {
        let end = ((i + 1) * part).min(len);
        fill(&mut buf.spare_capacity_mut()[i * part..end]);
    }
    // SAFETY: the first `len` words of the spare capacity were all written
    // above: every part of `part` words either by this thread or by a
    // helper (joined when the scope ended), or, where no helper started,
    // by this thread after the scope.
    unsafe { buf.set_len(len) };
    Ok(buf.into_boxed_slice())
}

fn fill(part: &mut [MaybeUninit<u32>]) {
    part.fill(MaybeUninit::new(u32::MAX));
}

#[cfg(test)]
mod tests {
    use super::*;

    const BIG: usize = 1 << 10;

    fn pool() -> Pool {
        Pool::new(64 * BIG, BIG)
    }

    fn buffer(words: usize, value: u32) -> Box<[u32]> {
        vec![value; words].into_boxed_slice()
    }

    /// Small buffers given back with `give_back_any_size` come back from
    /// `take_any_size` as their last user left them; a new one is all ones.
    #[test]
    fn small_buffers_come_back_to_take_any_size() {
        // A size no other test asks for (the small pool is the process's).
        let len = 12_345;
        let fresh = take_any_size(len).unwrap();
        assert!(fresh.len() == len && fresh.iter().all(|&w| w == u32::MAX));
        let mut used = fresh;
        used.fill(7);
        let address = used.as_ptr();
        give_back_any_size(used);
        let again = take_any_size(len).unwrap();
        assert_eq!(again.as_ptr(), address);
        assert!(again.iter().all(|&w| w == 7));
        give_back_any_size(again);
    }

    #[test]
    fn a_returned_buffer_is_taken_again() {
        let mut pool = pool();
        let buf = buffer(BIG, 7);
        let addr = buf.as_ptr();
        pool.give_back(buf);
        assert_eq!(pool.idle_bytes(), BIG * 4);
        let again = pool.take_idle(BIG).expect("the idle buffer fits");
        assert_eq!(again.as_ptr(), addr);
        assert_eq!(pool.idle_bytes(), 0);
        assert!(pool.take_idle(BIG).is_none());
    }

    #[test]
    fn no_buffer_more_than_twice_the_request_or_smaller_is_taken() {
        let mut pool = pool();
        pool.give_back(buffer(4 * BIG, 0));
        assert!(pool.take_idle(BIG).is_none());
        assert!(pool.take_idle(4 * BIG + 1).is_none());
        assert_eq!(pool.take_idle(2 * BIG).map(|b| b.len()), Some(4 * BIG));
    }

    #[test]
    fn the_smallest_fitting_buffer_is_taken() {
        let mut pool = pool();
        pool.give_back(buffer(2 * BIG, 0));
        pool.give_back(buffer(BIG, 0));
        assert_eq!(pool.take_idle(BIG).map(|b| b.len()), Some(BIG));
        assert_eq!(pool.take_idle(BIG).map(|b| b.len()), Some(2 * BIG));
    }

    #[test]
    fn idle_bytes_stay_within_the_bound_oldest_out_first() {
        let mut pool = Pool::new(3 * BIG * 4, BIG);
        pool.give_back(buffer(BIG, 1));
        pool.give_back(buffer(2 * BIG, 2));
        pool.give_back(buffer(BIG, 3)); // the first goes
        assert_eq!(pool.idle_bytes(), 3 * BIG * 4);
        let firsts: Vec<u32> = pool.idle.iter().map(|b| b[0]).collect();
        assert_eq!(firsts, [2, 3]);
        pool.give_back(buffer(4 * BIG, 4)); // past the bound alone: freed
        assert_eq!(pool.idle_bytes(), 3 * BIG * 4);
    }

    #[test]
    fn small_buffers_and_a_zero_bound_pool_nothing() {
        let mut pool = pool();
        pool.give_back(buffer(BIG - 1, 0));
        assert_eq!(pool.idle_bytes(), 0);
        let mut off = Pool::new(0, BIG);
        off.give_back(buffer(BIG, 0));
        assert_eq!(off.idle_bytes(), 0);
    }

    #[test]
    fn a_new_buffer_is_all_ones_whatever_its_size() {
        // Past the size from which several threads write it, in parts that
        // do not divide it evenly, and small ones.
        for len in [0, 1, 33, PARALLEL_FILL_WORDS * 2 + 3] {
            let buf = fresh(len).expect("memory for a test buffer");
            assert_eq!(buf.len(), len);
            assert!(buf.iter().all(|&w| w == u32::MAX));
        }
    }

    #[test]
    fn an_impossible_buffer_is_an_error_not_an_abort() {
        assert!(fresh(usize::MAX / 8).is_err());
    }

    #[test]
    fn take_refills_a_recycled_buffer() {
        // Through the process's pool (other tests leave it alone: they use
        // their own), with a buffer only this test can have handed back.
        let len = MIN_POOLED_WORDS + 12_345;
        let mut buf = take(len, false).expect("memory for a test buffer");
        assert!(
            buf[..len].iter().all(|&w| w == u32::MAX),
            "a new one is filled"
        );
        buf.fill(5);
        let addr = buf.as_ptr();
        give_back(buf);
        let mut again = take(len, true).expect("memory for a test buffer");
        assert_eq!(again.as_ptr(), addr);
        assert!(again[..len].iter().all(|&w| w == u32::MAX));
        // Unless the caller says it writes every word itself.
        again.fill(5);
        give_back(again);
        let kept = take(len, false).expect("memory for a test buffer");
        assert_eq!(kept.as_ptr(), addr);
        assert!(kept[..len].iter().all(|&w| w == 5));
    }

    /// However small the buffers, a pool keeps `MAX_IDLE` at most (the
    /// oldest go), and never an empty one (it would count no bytes against
    /// the bound, so nothing would ever push it out).
    #[test]
    fn a_pool_keeps_a_bounded_number_of_buffers_and_no_empty_one() {
        let mut pool = Pool::new(64 * BIG, 0);
        for _ in 0..3 {
            pool.give_back(buffer(0, 0));
        }
        assert_eq!(pool.idle.len(), 0, "empty buffers are not kept");
        for i in 0..MAX_IDLE + 10 {
            pool.give_back(buffer(1, i as u32));
        }
        assert_eq!(pool.idle.len(), MAX_IDLE);
        assert_eq!(pool.idle_bytes(), MAX_IDLE * 4);
        // The newest are kept.
        assert_eq!(pool.idle[0][0], 10);
        assert!(take_any_size(0).unwrap().is_empty());
    }
}
