//! Rows filled by the calling thread, with pool threads joining as they wake.
//!
//! A server calls the fill right after the model's forward pass, so the
//! pool's threads have slept for milliseconds. Handing the whole call to the
//! pool (`ThreadPool::install`) puts two wake-ups on its path: a pool
//! thread's to start, and the caller's when the work is done. On a loaded
//! or virtual machine each costs tens to hundreds of microseconds, as much
//! as the warm fill of several rows: on a 2-core machine, two threads made
//! a one-request step slower than one thread did.
//!
//! Here the caller starts on the rows at once and claims them one at a time
//! from a counter. Pool threads, woken at the start, claim rows too once
//! they get a core, fill rows of their own, and hand them in; the caller
//! copies them into the bitmask. Each thread first claims from its own run
//! of consecutive rows, then from the others'. The caller never waits for a pool thread
//! to wake: when no row is left to claim, it waits only for rows that pool
//! threads are still filling (spinning briefly, then asleep until the last
//! of them wakes it). A pool thread that wakes after the last claim
//! finds nothing to do, and nobody waits for it. So the jobs are owned
//! (`'static`): a late pool thread may hold them after the call returned,
//! never a borrow of the caller's.
//!
//! A panic in a pool thread (a bug) is caught there and raised again on the
//! calling thread, where the Python layer turns it into an exception.

use std::any::Any;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::Thread;
use std::time::Duration;

use rayon::ThreadPool;

use crate::error::{Error, Result};

/// How a job writes its row.
pub type FillFn<J> = fn(&J, &mut [u32]) -> Result<()>;

/// Spins of the waiting caller before it sleeps until the pool thread that
/// finishes the last job wakes it (a row still being filled may take
/// milliseconds: the caller's core is the serving process's, not to burn).
const SPINS: u32 = 1 << 10;
/// The caller's sleep between checks, should a wake-up be missed.
const NAP: Duration = Duration::from_micros(200);

/// What the caller and the pool threads share for one call.
struct Shared<J> {
    /// Each job with the bitmask row it writes.
    jobs: Vec<(usize, J)>,
    fill: FillFn<J>,
    words: usize,
    /// Per segment of the jobs: the next to claim and the segment's end.
    segments: Vec<(AtomicUsize, usize)>,
    /// Jobs done (a row written, an error or a panic), by any thread.
    finished: AtomicUsize,
    /// Rows filled by pool threads, with their row index.
    done: Mutex<Vec<(usize, Result<Vec<u32>>)>>,
    panicked: Mutex<Option<Box<dyn Any + Send>>>,
    /// The caller, once it sleeps waiting for the last jobs.
    waiter: Mutex<Option<Thread>>,
}

/// The guard of a lock whose holder may have panicked (the lists it guards
/// are only pushed to and drained).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<J> Shared<J> {
    /// The next job of segment `home`, else of the segments after it.
    fn claim(&self, home: usize) -> Option<usize> {
        let n = self.segments.len();
        (0..n).find_map(|k| {
            let (next, end) = &self.segments[(home + k) % n];
            let i = next.fetch_add(1, SeqCst);
            (i < *end).then_some(i)
        })
    }

    /// Counts one job done; wakes a sleeping caller after the last.
    fn finish(&self) {
        if self.finished.fetch_add(1, SeqCst) + 1 == self.jobs.len() {
            if let Some(caller) = lock(&self.waiter).as_ref() {
                caller.unpark();
            }
        }
    }

    /// A pool thread's part: rows of its own until none is left to claim.
    fn help(&self, home: usize) {
        while let Some(i) = self.claim(home) {
            let (at, job) = &self.jobs[i];
            let mut row = vec![0u32; self.words];
            let filled = catch_unwind(AssertUnwindSafe(|| (self.fill)(job, &mut row)));
            let panicked = filled.is_err();
            match filled {
                // Handed in before it is counted: a caller that counts every
                // job done finds every row.
                Ok(filled) => lock(&self.done).push((*at, filled.map(|()| row))),
                Err(panic) => {
                    lock(&self.panicked).get_or_insert(panic);
                }
            }
            self.finish();
            if panicked {
                return;
            }
        }
    }
}

/// Writes each job's row of `bitmask` (`words` words a row): on the calling
/// thread, and on up to `helpers` threads of `pool` as they wake. Returns the
/// first error met; rows of other jobs may have been written then.
pub fn fill_rows<J: Send + Sync + 'static>(
    pool: &ThreadPool,
    helpers: usize,
    jobs: Vec<(usize, J)>,
    fill: FillFn<J>,
    bitmask: &mut [u32],
    words: usize,
) -> Result<()> {
    let helpers = helpers.min(jobs.len().saturating_sub(1));
    // Each thread starts on a run of consecutive jobs of its own: a
    // request's rows (one grammar, nearby states) stay on one thread, which
    // would otherwise build the same new lexer entries beside another.
    let parts = helpers + 1;
    let segments = (0..parts)
        .map(|s| {
            let (from, to) = (s * jobs.len() / parts, (s + 1) * jobs.len() / parts);
            (AtomicUsize::new(from), to)
        })
        .collect();
    let shared = Arc::new(Shared {
        jobs,
        fill,
        words,
        segments,
        finished: AtomicUsize::new(0),
        done: Mutex::new(Vec::new()),
        panicked: Mutex::new(None),
        waiter: Mutex::new(None),
    });
    for home in 1..parts {
        let shared = Arc::clone(&shared);
        pool.spawn(move || shared.help(home));
    }
    let mut first: Option<Error> = None;
    while let Some(i) = shared.claim(0) {
        let (at, job) = &shared.jobs[i];
        let row = &mut bitmask[at * words..(at + 1) * words];
        if let Err(e) = (shared.fill)(job, row) {
            first.get_or_insert(e);
        }
        shared.finish();
    }
    // Every job is claimed; wait for those pool threads still filling (never
    // for one that has not woken: it finds nothing to claim).
    let mut spins = 0u32;
    while shared.finished.load(SeqCst) < shared.jobs.len() {
        if spins < SPINS {
            spins += 1;
            std::hint::spin_loop();
            continue;
        }
        // Registered before the check: the last job's `finish` either sees
        // the waiter or came before the check.
        lock(&shared.waiter).get_or_insert_with(std::thread::current);
        if shared.finished.load(SeqCst) < shared.jobs.len() {
            std::thread::park_timeout(NAP);
        }
    }
    if let Some(panic) = lock(&shared.panicked).take() {
        resume_unwind(panic);
    }
    for (at, filled) in lock(&shared.done).drain(..) {
        match filled {
            Ok(row) => bitmask[at * words..(at + 1) * words].copy_from_slice(&row),
            Err(e) => {
                first.get_or_insert(e);
            }
        }
    }
    first.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(n: usize) -> ThreadPool {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .unwrap()
    }

    /// Row `at` gets `value` in every word, after a little work.
    fn fill(value: &u32, row: &mut [u32]) -> Result<()> {
        let mut x = *value;
        for _ in 0..2000 {
            x = std::hint::black_box(x.rotate_left(1)).rotate_right(1);
        }
        if x == u32::MAX {
            return Err(Error::InvalidArgument("refused".into()));
        }
        row.fill(x);
        Ok(())
    }

    #[test]
    fn every_row_is_written_whatever_the_helpers() {
        for threads in [1, 2, 4] {
            let p = pool(threads);
            for helpers in [0, 1, threads] {
                for n in [0, 1, 2, 7, 64] {
                    // Every other row, so that rows left out stay as they were.
                    let jobs: Vec<(usize, u32)> = (0..n).map(|i| (2 * i, i as u32 + 1)).collect();
                    let mut bitmask = vec![7u32; 2 * n * 3];
                    fill_rows(&p, helpers, jobs, fill, &mut bitmask, 3).unwrap();
                    for (r, row) in bitmask.chunks(3).enumerate() {
                        let want = if r % 2 == 0 { r as u32 / 2 + 1 } else { 7 };
                        assert_eq!(row, [want; 3], "{threads} {helpers} {n} {r}");
                    }
                }
            }
        }
    }

    #[test]
    fn an_error_of_any_thread_is_returned() {
        let p = pool(2);
        for bad in [0, 5, 31] {
            let jobs: Vec<(usize, u32)> = (0..32)
                .map(|i| (i, if i == bad { u32::MAX } else { 1 }))
                .collect();
            let mut bitmask = vec![0u32; 32];
            let err = fill_rows(&p, 2, jobs, fill, &mut bitmask, 1).unwrap_err();
            assert!(err.to_string().contains("refused"));
        }
    }

    #[test]
    fn a_panic_in_a_pool_thread_reaches_the_caller() {
        static HELPED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        /// Panics on a pool thread; on the caller, waits (up to 10 s) for a
        /// pool thread to have claimed a job.
        fn boom(value: &u32, row: &mut [u32]) -> Result<()> {
            if std::thread::current().name() != Some("caller") {
                HELPED.store(true, SeqCst);
                panic!("bug");
            }
            for _ in 0..10_000 {
                if HELPED.load(SeqCst) {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            row.fill(*value);
            Ok(())
        }
        let p = pool(2);
        let caught = std::thread::Builder::new()
            .name("caller".into())
            .spawn(move || {
                let jobs: Vec<(usize, u32)> = (0..8).map(|i| (i, i as u32)).collect();
                let mut bitmask = vec![0u32; 8];
                catch_unwind(AssertUnwindSafe(|| {
                    fill_rows(&p, 1, jobs, boom, &mut bitmask, 1)
                }))
            })
            .unwrap()
            .join()
            .unwrap();
        let panic = caught.expect_err("the pool thread's panic");
        assert_eq!(panic.downcast_ref::<&str>(), Some(&"bug"));
    }
}
