//! Jobs run by the calling thread, with pool threads joining as they wake.
//!
//! A server calls the fill right after the model's forward pass, so the
//! pool's threads have slept for milliseconds. Handing the whole call to the
//! pool (`ThreadPool::install`) puts two wake-ups on its path: a pool
//! thread's to start, and the caller's when the work is done. On a loaded
//! or virtual machine each costs tens to hundreds of microseconds, as much
//! as the warm fill of several rows: on a 2-core machine, two threads made
//! a one-request step slower than one thread did, and advancing 16 requests
//! along 4 drafts each took 0.3 ms through `install` against 0.06 ms on the
//! caller alone.
//!
//! Here the caller starts on the jobs at once and claims them one at a time
//! from a counter. Pool threads, woken at the start, claim jobs too once
//! they get a core, and hand their results in. Each thread first claims
//! from its own run of consecutive jobs, then from the others'. The caller
//! never waits for a pool thread to wake: when no job is left to claim, it
//! waits only for jobs that pool threads are still doing (spinning briefly,
//! then asleep until the last of them wakes it). A pool thread that wakes
//! after the last claim finds nothing to do, and nobody waits for it. So
//! the jobs are owned (`'static`): a late pool thread may hold them after
//! the call returned, never a borrow of the caller's.
//!
//! Two uses: `fill_rows` (bitmask rows, each written in place by the
//! thread that claims it) and `map` (any owned jobs with results, such as
//! advancing requests along their drafts).
//!
//! Pool threads writing the caller's memory is what makes the ending
//! matter: the caller returns only once every job is done, and should it
//! unwind out of a call (a panic in one of its own jobs), it first closes
//! the claims and waits until no pool thread is on a job.
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

/// A pool thread's work on one job.
type Work<J, R> = Box<dyn Fn(J) -> R + Send + Sync>;

/// What the caller and the pool threads share for one call.
struct Shared<J, R> {
    /// The jobs, each taken by the one thread that claims it.
    jobs: Vec<Mutex<Option<J>>>,
    work: Work<J, R>,
    /// Per segment of the jobs: the next to claim and the segment's end.
    segments: Vec<(AtomicUsize, usize)>,
    /// Jobs done (a result handed in or a panic), by any thread.
    finished: AtomicUsize,
    /// Pool threads between announcing a claim and being done with its
    /// job (or finding none): what an unwinding caller waits for.
    in_flight: AtomicUsize,
    /// Results of pool threads, with their job's index.
    done: Mutex<Vec<(usize, R)>>,
    panicked: Mutex<Option<Box<dyn Any + Send>>>,
    /// The caller, once it sleeps waiting for the last jobs.
    waiter: Mutex<Option<Thread>>,
}

/// The guard of a lock whose holder may have panicked (the lists it guards
/// are only pushed to and drained).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<J, R> Shared<J, R> {
    /// The next job of segment `home`, else of the segments after it.
    fn claim(&self, home: usize) -> Option<usize> {
        let n = self.segments.len();
        (0..n).find_map(|k| {
            let (next, end) = &self.segments[(home + k) % n];
            let i = next.fetch_add(1, SeqCst);
            (i < *end).then_some(i)
        })
    }

    /// Whether some job is not claimed yet.
    fn unclaimed(&self) -> bool {
        (self.segments.iter()).any(|(next, end)| next.load(SeqCst) < *end)
    }

    /// Job `i`, claimed by the calling thread (so taken exactly once).
    fn take(&self, i: usize) -> J {
        lock(&self.jobs[i])
            .take()
            .expect("each job is claimed once")
    }

    /// Counts one job done; wakes a sleeping caller after the last.
    fn finish(&self) {
        if self.finished.fetch_add(1, SeqCst) + 1 == self.jobs.len() {
            if let Some(caller) = lock(&self.waiter).as_ref() {
                caller.unpark();
            }
        }
    }

    /// A pool thread's part: jobs of its own until none is left to claim.
    fn help(&self, home: usize) {
        loop {
            // Announced before the claim: once an unwinding caller has
            // closed the claims and seen no thread in flight, no job starts.
            self.in_flight.fetch_add(1, SeqCst);
            let Some(i) = self.claim(home) else {
                self.in_flight.fetch_sub(1, SeqCst);
                return;
            };
            let job = self.take(i);
            let done = catch_unwind(AssertUnwindSafe(|| (self.work)(job)));
            let panicked = done.is_err();
            match done {
                // Handed in before it is counted: a caller that counts every
                // job done finds every result.
                Ok(r) => lock(&self.done).push((i, r)),
                Err(panic) => {
                    lock(&self.panicked).get_or_insert(panic);
                }
            }
            self.finish();
            self.in_flight.fetch_sub(1, SeqCst);
            if panicked {
                return;
            }
        }
    }

    /// Leaves no job to claim, then waits until no pool thread is on one.
    fn close(&self) {
        for (next, end) in &self.segments {
            next.fetch_max(*end, SeqCst);
        }
        while self.in_flight.load(SeqCst) > 0 {
            std::thread::sleep(NAP);
        }
    }
}

/// Pool thread `home` of `parts`: wakes the next one (while jobs are left
/// to claim), then does jobs until none is left. Waking a sleeping thread
/// is a system call that cost tens of microseconds on a virtual machine;
/// made here, it is off the caller's path.
fn help_from<J: Send + 'static, R: Send + 'static>(
    shared: Arc<Shared<J, R>>,
    home: usize,
    parts: usize,
) {
    if home + 1 < parts && shared.unclaimed() {
        let next = Arc::clone(&shared);
        rayon::spawn(move || help_from(next, home + 1, parts));
    }
    shared.help(home);
}

/// Closes a call's claims if the caller leaves it before every job is
/// done, i.e. unwinds out of it (see `close`). Forgotten once every job is
/// done: a normal return must not wait for a pool thread that woke late.
struct CloseOnUnwind<'a, J, R>(&'a Shared<J, R>);

impl<J, R> Drop for CloseOnUnwind<'_, J, R> {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// Runs every job once: on the calling thread (`mine`, with the job's
/// index), and with `work` on up to `helpers` threads of `pool` as they
/// wake. Returns the pool threads' results with their jobs' indices, once
/// every job is done; a pool thread's panic is raised again here.
fn share<J, R>(
    pool: &ThreadPool,
    helpers: usize,
    jobs: Vec<J>,
    work: impl Fn(J) -> R + Send + Sync + 'static,
    mut mine: impl FnMut(usize, J),
) -> Vec<(usize, R)>
where
    J: Send + 'static,
    R: Send + 'static,
{
    let helpers = helpers.min(jobs.len().saturating_sub(1));
    if helpers == 0 {
        // Nothing runs beside the caller: no shared state, no locks.
        for (i, job) in jobs.into_iter().enumerate() {
            mine(i, job);
        }
        return Vec::new();
    }
    // Each thread starts on a run of consecutive jobs of its own: a
    // request's rows (one grammar, nearby states) stay on one thread, which
    // would otherwise build the same new lexer entries beside another.
    let parts = helpers + 1;
    let n = jobs.len();
    let segments = (0..parts)
        .map(|s| (AtomicUsize::new(s * n / parts), (s + 1) * n / parts))
        .collect();
    let shared = Arc::new(Shared {
        jobs: jobs.into_iter().map(|j| Mutex::new(Some(j))).collect(),
        work: Box::new(work),
        segments,
        finished: AtomicUsize::new(0),
        in_flight: AtomicUsize::new(0),
        done: Mutex::new(Vec::new()),
        panicked: Mutex::new(None),
        waiter: Mutex::new(None),
    });
    // One wake-up on the caller's path; each helper wakes the next.
    let first = Arc::clone(&shared);
    pool.spawn(move || help_from(first, 1, parts));
    // Should a job of the caller's panic, no pool thread is on a job when
    // the panic leaves this function (jobs may write the caller's memory).
    let closing = CloseOnUnwind(&shared);
    while let Some(i) = shared.claim(0) {
        mine(i, shared.take(i));
        shared.finish();
    }
    // Every job is claimed; wait for those pool threads still working on
    // theirs (never for one that has not woken: it finds nothing to claim).
    let mut spins = 0u32;
    while shared.finished.load(SeqCst) < n {
        if spins < SPINS {
            spins += 1;
            std::hint::spin_loop();
            continue;
        }
        // Registered before the check: the last job's `finish` either sees
        // the waiter or came before the check.
        lock(&shared.waiter).get_or_insert_with(std::thread::current);
        if shared.finished.load(SeqCst) < n {
            std::thread::park_timeout(NAP);
        }
    }
    // Every job is done: nothing left for the guard to wait for.
    std::mem::forget(closing);
    if let Some(panic) = lock(&shared.panicked).take() {
        resume_unwind(panic);
    }
    let theirs = std::mem::take(&mut *lock(&shared.done));
    theirs
}

/// The rows of the bitmask one `fill_rows` call writes, as the threads
/// that write them reach it.
#[derive(Clone, Copy)]
struct Rows {
    base: *mut u32,
    words: usize,
}

// SAFETY: a `Rows` is an address and a width; it is sent to pool threads
// only inside `fill_rows`, whose comments show that each row is written by
// one thread at a time and only while the buffer is borrowed. (A late pool
// thread may still hold the call's `work` closure, and so a `Rows`, after
// the call returned; it never claims a job then, so never makes a slice.)
unsafe impl Send for Rows {}
unsafe impl Sync for Rows {}

impl Rows {
    /// Row `at` of the buffer.
    ///
    /// # Safety
    /// Row `at` must lie inside the buffer, the buffer must outlive the
    /// slice, and no other reference to the row may exist while it lives.
    unsafe fn row<'a>(self, at: usize) -> &'a mut [u32] {
        // SAFETY: the caller's guarantees, as stated above.
        unsafe { std::slice::from_raw_parts_mut(self.base.add(at * self.words), self.words) }
    }
}

/// Writes each job's row of `bitmask` (`words` words a row) in place: on
/// the calling thread, and on up to `helpers` threads of `pool` as they
/// wake. Each job's row must be its own (a row given twice, or outside the
/// bitmask, is a bug: it panics). Returns the first error met; rows of
/// other jobs may have been written then.
pub fn fill_rows<J: Send + Sync + 'static>(
    pool: &ThreadPool,
    helpers: usize,
    jobs: Vec<(usize, J)>,
    fill: FillFn<J>,
    bitmask: &mut [u32],
    words: usize,
) -> Result<()> {
    if words == 0 {
        // Empty rows: nothing to share.
        return jobs.iter().try_for_each(|(_, job)| fill(job, &mut []));
    }
    let rows = bitmask.len() / words;
    let mut taken = vec![false; rows];
    for &(at, _) in &jobs {
        assert!(
            at < rows && !std::mem::replace(&mut taken[at], true),
            "row {at} of {rows} given to two jobs, or outside the bitmask"
        );
    }
    // From here until `share` returns, the buffer is reached only through
    // `sink`, one job's row at a time.
    let sink = Rows {
        base: bitmask.as_mut_ptr(),
        words,
    };
    // SAFETY (both closures): row `at` is inside `bitmask` (checked above);
    // no two jobs share a row (checked above) and `share` runs each job
    // once, on one thread, so each row has one slice at a time, and nothing
    // else touches `bitmask` meanwhile. `bitmask` is borrowed for this whole
    // call, and `share` returns only once every job is done, or, when it
    // unwinds, once no pool thread is on a job (`CloseOnUnwind`); a pool
    // thread that wakes later claims nothing and makes no slice. A pool
    // thread's writes are seen here through `finished` (SeqCst).
    let mut first: Option<Error> = None;
    let theirs = share(
        pool,
        helpers,
        jobs,
        move |(at, job)| fill(&job, unsafe { sink.row(at) }),
        |_, (at, job)| {
            if let Err(e) = fill(&job, unsafe { sink.row(at) }) {
                first.get_or_insert(e);
            }
        },
    );
    for (_, filled) in theirs {
        if let Err(e) = filled {
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), Err)
}

/// `work` applied to every job, in order: on the calling thread, and on up
/// to `helpers` threads of `pool` as they wake.
pub fn map<J, R>(pool: &ThreadPool, helpers: usize, jobs: Vec<J>, work: fn(J) -> R) -> Vec<R>
where
    J: Send + 'static,
    R: Send + 'static,
{
    let mut out: Vec<Option<R>> = (0..jobs.len()).map(|_| None).collect();
    let theirs = share(pool, helpers, jobs, work, |i, job| out[i] = Some(work(job)));
    for (i, r) in theirs {
        out[i] = Some(r);
    }
    out.into_iter()
        .map(|r| r.expect("share runs every job"))
        .collect()
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

    /// Slow enough that pool threads wake while the caller still works.
    fn square(x: u64) -> u64 {
        let mut y = x;
        for _ in 0..20_000 {
            y = std::hint::black_box(y.rotate_left(1)).rotate_right(1);
        }
        y * y
    }

    #[test]
    fn map_keeps_the_order_whatever_the_helpers() {
        for threads in [1, 2, 4] {
            let p = pool(threads);
            for helpers in [0, 1, 3, 8] {
                for n in [0u64, 1, 2, 5, 64] {
                    let got = map(&p, helpers, (0..n).collect(), square);
                    let want: Vec<u64> = (0..n).map(|x| x * x).collect();
                    assert_eq!(got, want, "{threads} {helpers} {n}");
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
    fn a_panicking_caller_leaves_no_pool_thread_writing() {
        static BUSY: AtomicUsize = AtomicUsize::new(0);
        static STARTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        /// On the caller: panics once a pool thread is on a job. On a pool
        /// thread: holds its row for 50 ms.
        fn slow_or_boom(value: &u32, row: &mut [u32]) -> Result<()> {
            if std::thread::current().name() == Some("caller") {
                for _ in 0..10_000 {
                    if STARTED.load(SeqCst) {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                panic!("caller bug");
            }
            BUSY.fetch_add(1, SeqCst);
            STARTED.store(true, SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(50));
            row.fill(*value);
            BUSY.fetch_sub(1, SeqCst);
            Ok(())
        }
        let p = pool(2);
        let busy_after = std::thread::Builder::new()
            .name("caller".into())
            .spawn(move || {
                let jobs: Vec<(usize, u32)> = (0..8).map(|i| (i, i as u32)).collect();
                let mut bitmask = vec![0u32; 8];
                let caught = catch_unwind(AssertUnwindSafe(|| {
                    fill_rows(&p, 1, jobs, slow_or_boom, &mut bitmask, 1)
                }));
                assert!(caught.is_err());
                // The unwinding left fill_rows only once the pool thread had
                // finished the row it was writing.
                BUSY.load(SeqCst)
            })
            .unwrap()
            .join()
            .unwrap();
        assert!(STARTED.load(SeqCst));
        assert_eq!(busy_after, 0);
    }

    #[test]
    #[should_panic(expected = "given to two jobs")]
    fn a_row_given_twice_is_refused() {
        let mut bitmask = vec![0u32; 4];
        let _ = fill_rows(&pool(2), 1, vec![(1, 1u32), (1, 2)], fill, &mut bitmask, 2);
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
