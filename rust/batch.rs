//! Parallel fills: one pass over all rows of all requests.
//!
//! Advancing a matcher along its drafts is cheap and computing a mask is not,
//! so each request's draft chain is first turned into a list of states, and
//! then every (request, position) row is filled in one parallel pass: the
//! parallelism is across batch x positions, not only across requests. The
//! calling thread fills rows from the start, and pool threads join it as
//! they wake (`claim`), so a step does not wait for the pool to wake up.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rayon::prelude::*;
use rayon::ThreadPool;
use rustc_hash::FxHashMap;

use crate::cfg::earley::Chart;
use crate::claim;
use crate::cores::available_cores;
use crate::error::{Error, Result};
use crate::grammar::{CompiledGrammar, State};
use crate::invalid;
use crate::matcher::{MatcherCore, Position};

/// Upper bound for `set_num_threads` and per-call thread counts.
pub const MAX_THREADS: usize = 1024;

/// 0 means "one per available core".
static DEFAULT_THREADS: AtomicUsize = AtomicUsize::new(0);
static POOLS: Mutex<Option<FxHashMap<usize, Arc<ThreadPool>>>> = Mutex::new(None);

fn check_threads(n: usize) -> Result<usize> {
    if n == 0 || n > MAX_THREADS {
        return invalid!("num_threads must be in [1, {MAX_THREADS}], got {n}");
    }
    Ok(n)
}

/// Sets the thread count used when a call does not pass its own, and starts
/// its pool now: starting threads inside a request's fill costs it a few
/// tenths of a millisecond.
pub fn set_num_threads(n: usize) -> Result<()> {
    DEFAULT_THREADS.store(check_threads(n)?, Ordering::Relaxed);
    pool(Some(n)).map(drop)
}

pub fn get_num_threads() -> usize {
    match DEFAULT_THREADS.load(Ordering::Relaxed) {
        0 => available_cores(),
        n => n,
    }
}

/// The pool for `n` threads (default: `get_num_threads()`), built once per size.
pub fn pool(n: Option<usize>) -> Result<Arc<ThreadPool>> {
    let n = match n {
        Some(n) => check_threads(n)?,
        None => get_num_threads(),
    };
    let mut guard = POOLS.lock().unwrap_or_else(|e| e.into_inner());
    let pools = guard.get_or_insert_with(FxHashMap::default);
    if let Some(p) = pools.get(&n) {
        return Ok(p.clone());
    }
    let p = rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .thread_name(|i| format!("maskpar-{i}"))
        .build()
        .map_err(|e| Error::InvalidArgument(format!("could not start {n} threads: {e}")))?;
    let p = Arc::new(p);
    pools.insert(n, p.clone());
    Ok(p)
}

/// What to write into one bitmask row. Owned, so that a pool thread may
/// take it whenever it wakes (see `claim`).
#[derive(Clone)]
pub(crate) enum RowJob {
    /// The mask of a state (with the chart holding the sets it uses).
    Mask(Arc<CompiledGrammar>, Arc<Chart>, Arc<State>),
    AllOnes,
}

impl RowJob {
    fn fill(&self, row: &mut [u32]) -> Result<()> {
        match self {
            RowJob::Mask(g, chart, s) => g.fill_row(chart, s, row),
            RowJob::AllOnes => {
                row.fill(u32::MAX);
                Ok(())
            }
        }
    }
}

/// Rows below which a call runs start to end on the calling thread. Each
/// phase of a call that hands work to pool threads costs the caller a
/// system call to wake one (12-13 us on the 2-core development machine, a
/// virtual one), and the woken thread takes 35 us to milliseconds to get a
/// core, while a row costs a few microseconds to compute for a fresh state
/// and about 0.5 us to copy from the fill memo (bounded by memory
/// bandwidth, which a second thread does not add to). Measured there on
/// fresh MaskBench schemas (bench_serving's step, xgrammar's batch matcher
/// run between steps), mean step with one thread against two: 16 rows
/// (B = 16, K = 0) 0.104 against 0.135 ms, 20 rows (B = 4, K = 4) 0.096
/// against 0.126, 36 rows (B = 4, K = 8) 0.22 against 0.28; from 64 rows
/// two threads win: 0.47 against 0.41 (B = 64, K = 0), 0.99 against 0.89
/// (B = 16, K = 8). Against the earlier rule (helpers from 16 rows or 8
/// requests), same process, alternating: B = 16, K = 0 0.133 -> 0.103 ms,
/// B = 4, K = 4 0.157 -> 0.115, B = 4, K = 8 0.268 -> 0.214; B = 64, K = 0
/// 0.415 -> 0.387, B = 16, K = 4 and K = 8 unchanged within noise.
pub(crate) const ALONE_BELOW_ROWS: usize = 48;

/// Rows to compute per thread of a call that shares its work: a pool thread
/// joins only for at least this many more.
pub(crate) const ROWS_PER_THREAD: usize = 8;

/// Whether a call of `rows` rows runs start to end on the calling thread:
/// when the pool has one thread nothing could run beside it, and below
/// `ALONE_BELOW_ROWS` a helper's wake-up costs more than its share of the
/// rows.
pub(crate) fn alone(pool: &ThreadPool, rows: usize) -> bool {
    pool.current_num_threads() == 1 || rows < ALONE_BELOW_ROWS
}

/// The threads a call of `rows` rows shares its work with, the caller's
/// included: one per `ROWS_PER_THREAD`, at most the pool's.
fn threads_for(pool: &ThreadPool, rows: usize) -> usize {
    (rows / ROWS_PER_THREAD).clamp(1, pool.current_num_threads())
}

/// `advance` applied to every job (a request's position and its drafts or
/// tree), in order, with as many of `pool`'s threads as the call's `rows`
/// will want joining as they wake (`claim::map`: the caller never waits for
/// a wake-up). Waking them
/// here even when advancing is little work (a step without drafts) puts the
/// wake-up, the slow part of a helper's start, before the rows: the
/// helpers are awake by the time the masks are computed.
pub(crate) fn states_of<J, T>(
    pool: &ThreadPool,
    rows: usize,
    jobs: Vec<J>,
    advance: fn(J) -> T,
) -> Vec<T>
where
    J: Send + 'static,
    T: Send + 'static,
{
    let helpers = if jobs.len() < 2 {
        0
    } else {
        threads_for(pool, rows) - 1
    };
    claim::map(pool, helpers, jobs, advance)
}

/// One request of a draft fill: `drafts` may be empty. Its rows are the
/// chain's `drafts.len() + 1`, then `padding` rows of all ones (a serving
/// framework's `-1` draft slots: vLLM pads the drafts a grammar refused).
pub struct DraftRequest<'a> {
    pub matcher: &'a MatcherCore,
    pub row: usize,
    pub drafts: Vec<u32>,
    pub padding: usize,
}

/// The rows one request writes: `count` rows from `row`.
pub struct Span<'a> {
    pub matcher: &'a MatcherCore,
    pub row: usize,
    pub count: usize,
}

impl<'a> DraftRequest<'a> {
    pub fn span(&self) -> Span<'a> {
        Span {
            matcher: self.matcher,
            row: self.row,
            count: self.drafts.len() + 1 + self.padding,
        }
    }
}

/// Checks widths, row ranges and overlaps, before anything is written.
pub fn check_layout(spans: &[Span<'_>], rows: usize, words: usize) -> Result<()> {
    let mut ranges: Vec<(usize, usize, usize)> = Vec::with_capacity(spans.len());
    for (i, r) in spans.iter().enumerate() {
        let want = r.matcher.grammar().words();
        if want != words {
            return invalid!(
                "request {i}: the bitmask has {words} words per row but the matcher's vocabulary \
                 (vocab_size {}) needs {want}",
                r.matcher.grammar().vocab().vocab_size()
            );
        }
        let last = (r.row as u128) + (r.count as u128) - 1;
        if r.count == 0 || last >= rows as u128 {
            return invalid!(
                "request {i}: rows {}..={last} ({} rows from row {}) do not fit in a bitmask of \
                 {rows} rows",
                r.row,
                r.count,
                r.row
            );
        }
        ranges.push((r.row, last as usize, i));
    }
    ranges.sort_unstable();
    for w in ranges.windows(2) {
        let ((a0, a1, ai), (b0, b1, bi)) = (w[0], w[1]);
        if b0 <= a1 {
            return invalid!("requests {ai} and {bi} overlap: rows {a0}..={a1} and {b0}..={b1}");
        }
    }
    Ok(())
}

/// Writes every scheduled row (`(row, job)`), on the calling thread and on
/// `pool`'s threads as they wake (`claim`), one thread per
/// `ROWS_PER_THREAD` rows to compute. Rows whose state is not cached yet and already scheduled for
/// an earlier row are deferred to a second pass, where they are copies: each
/// mask is computed once per call, not once per thread that needs it.
pub(crate) fn fill_rows(
    pool: &ThreadPool,
    bitmask: &mut [u32],
    words: usize,
    jobs: Vec<(usize, RowJob)>,
) -> Result<()> {
    if words == 0 {
        return Ok(());
    }
    // Rows to compute (not copies of a cached row), and which of them repeat
    // a state already scheduled in this call.
    let mut computed = 0;
    let later: Vec<bool> = {
        let mut first: HashSet<(usize, &State)> = HashSet::new();
        jobs.iter()
            .map(|(_, job)| match job {
                RowJob::Mask(g, _, s) => {
                    let cached = g.cacheable(s) && g.is_cached(s);
                    computed += usize::from(!cached);
                    let key = (Arc::as_ptr(g) as usize, &**s);
                    g.cacheable(s) && !cached && !first.insert(key)
                }
                RowJob::AllOnes => false,
            })
            .collect()
    };
    let (mut now, mut deferred) = (Vec::new(), Vec::new());
    for (job, later) in jobs.into_iter().zip(later) {
        if later { &mut deferred } else { &mut now }.push(job);
    }
    let helpers = threads_for(pool, computed) - 1;
    let fill: claim::FillFn<RowJob> = RowJob::fill;
    claim::fill_rows(pool, helpers, now, fill, bitmask, words)?;
    if !deferred.is_empty() {
        claim::fill_rows(pool, helpers, deferred, fill, bitmask, words)?;
    }
    Ok(())
}

/// Fills the draft-chain rows of every request (DESIGN.md §3) and returns the
/// number of accepted drafts per request. Call `check_layout` first. An error
/// (a parser bound exceeded) leaves matchers unchanged; rows may be written.
pub fn fill_with_drafts(
    reqs: &[DraftRequest<'_>],
    bitmask: &mut [u32],
    words: usize,
    pool: &ThreadPool,
) -> Result<Vec<usize>> {
    let rows: usize = reqs.iter().map(|r| r.span().count).sum();
    if alone(pool, rows) {
        return fill_with_drafts_alone(reqs, bitmask, words);
    }
    let jobs = (reqs.iter())
        .map(|r| (r.matcher.position(), r.drafts.clone()))
        .collect();
    let chains = states_of(pool, rows, jobs, |(p, drafts): (Position, Vec<u32>)| {
        p.draft_states(&drafts)
    })
    .into_iter()
    .collect::<Result<Vec<_>>>()?;
    let accepted = chains.iter().map(|(_, c)| c.len() - 1).collect();
    let mut jobs: Vec<(usize, RowJob)> = Vec::with_capacity(rows);
    for (r, (chart, states)) in reqs.iter().zip(chains) {
        let (g, chart) = (r.matcher.grammar(), Arc::new(chart));
        let mut states = states.into_iter();
        for i in 0..=r.drafts.len() + r.padding {
            let job = match states.next() {
                Some(s) => RowJob::Mask(g.clone(), chart.clone(), Arc::new(s)),
                None => RowJob::AllOnes,
            };
            jobs.push((r.row + i, job));
        }
    }
    fill_rows(pool, bitmask, words, jobs)?;
    Ok(accepted)
}

/// `fill_with_drafts` where no pool thread would join (`alone`): the same
/// rows, in order, from the matchers' own charts and states, borrowed
/// rather than shared with threads that might outlive the call. A request
/// without drafts fills its row from where its matcher stands (no copy of
/// its state).
fn fill_with_drafts_alone(
    reqs: &[DraftRequest<'_>],
    bitmask: &mut [u32],
    words: usize,
) -> Result<Vec<usize>> {
    let mut accepted = Vec::with_capacity(reqs.len());
    for r in reqs {
        let span = r.row * words..(r.row + r.span().count) * words;
        if r.drafts.is_empty() {
            accepted.push(0);
            if words > 0 {
                let (first, padding) = bitmask[span].split_at_mut(words);
                r.matcher.fill_row(first)?;
                padding.fill(u32::MAX);
            }
            continue;
        }
        let (chart, states) = r.matcher.draft_states(&r.drafts)?;
        accepted.push(states.len() - 1);
        if words == 0 {
            continue;
        }
        let g = r.matcher.grammar();
        for (row, s) in bitmask[span]
            .chunks_mut(words)
            .zip(states.iter().map(Some).chain(std::iter::repeat(None)))
        {
            match s {
                Some(s) => g.fill_row(&chart, s, row)?,
                None => row.fill(u32::MAX),
            }
        }
    }
    Ok(accepted)
}

/// For each request, its drafts up to the first one the grammar refuses,
/// extended with the tokens the grammar forces after them, `max_drafts` at
/// most. Forced tokens are drafts the mask always accepts, so a drafter's
/// proposal never loses them. Matchers are not changed.
pub fn grammar_aware_drafts(
    reqs: &[DraftRequest<'_>],
    max_drafts: usize,
    pool: &ThreadPool,
) -> Result<Vec<Vec<u32>>> {
    pool.install(|| {
        reqs.par_iter()
            .map(|r| {
                let (chart, states) = r.matcher.draft_states(&r.drafts)?;
                let accepted = states.len() - 1;
                let mut out: Vec<u32> = r.drafts[..accepted.min(max_drafts)].to_vec();
                if out.len() < max_drafts {
                    // All drafts kept: the chart holds exactly the last state's sets.
                    let forced = r
                        .matcher
                        .grammar()
                        .forced_tokens(&chart, &states[accepted])?;
                    out.extend(forced.into_iter().take(max_drafts - out.len()));
                }
                Ok(out)
            })
            .collect()
    })
}

/// The grammar of this module's tests and `treefill`'s: `a*bc` over the
/// tokens a, b, c and EOS (ids 0-3), 40 ids wide.
#[cfg(test)]
pub(crate) fn test_grammar() -> Arc<CompiledGrammar> {
    let toks: Vec<Vec<u8>> = ["a", "b", "c", "<eos>"]
        .iter()
        .map(|t| t.as_bytes().to_vec())
        .collect();
    let vocab = Arc::new(crate::vocab::Vocab::new(toks, &[3], &[], Some(40)).unwrap());
    Arc::new(CompiledGrammar::from_regex(vocab, "a*bc").unwrap())
}

#[cfg(test)]
mod tests {
    use super::test_grammar as grammar;
    use super::*;
    use crate::vocab::Vocab;

    fn spans<'a>(reqs: &[DraftRequest<'a>]) -> Vec<Span<'a>> {
        reqs.iter().map(DraftRequest::span).collect()
    }

    /// Request 1 from row 0, request 2 from row 5 (request 1 has at most
    /// four drafts).
    fn two_requests<'a>(
        m1: &'a MatcherCore,
        drafts1: &[u32],
        m2: &'a MatcherCore,
        drafts2: &[u32],
    ) -> Vec<DraftRequest<'a>> {
        assert!(drafts1.len() < 5);
        vec![
            DraftRequest {
                matcher: m1,
                row: 0,
                drafts: drafts1.to_vec(),
                padding: 0,
            },
            DraftRequest {
                matcher: m2,
                row: 5,
                drafts: drafts2.to_vec(),
                padding: 0,
            },
        ]
    }

    fn sequential(m: &MatcherCore, drafts: &[u32], words: usize) -> (Vec<u32>, usize) {
        let mut m = m.clone();
        let mut out = vec![u32::MAX; words * (drafts.len() + 1)];
        let mut accepted = drafts.len();
        for (i, row) in out.chunks_mut(words).enumerate() {
            m.fill_row(row).unwrap();
            if i < drafts.len() && !m.consume_token(drafts[i]).unwrap() {
                accepted = i;
                break;
            }
        }
        (out, accepted)
    }

    #[test]
    fn draft_fill_equals_sequential_for_any_thread_count() {
        let g = grammar();
        let words = g.words();
        let m1 = MatcherCore::new(g.clone());
        let mut m2 = MatcherCore::new(g.clone());
        assert!(m2.consume_token(0).unwrap());
        // Drafts 1 are refused at index 2; drafts 2 make enough rows for pool
        // threads to join (`alone` is false past one).
        let drafts1 = vec![0, 0, 2, 1];
        let mut drafts2 = vec![0; ALONE_BELOW_ROWS];
        drafts2.extend([1, 2, 3]);
        let rows = drafts1.len() + drafts2.len() + 2;
        for threads in [1, 2, 3] {
            assert_eq!(alone(&pool(Some(threads)).unwrap(), rows), threads == 1);
            let reqs = two_requests(&m1, &drafts1, &m2, &drafts2);
            let mut bm = vec![0u32; words * rows];
            check_layout(&spans(&reqs), rows, words).unwrap();
            let acc =
                fill_with_drafts(&reqs, &mut bm, words, &pool(Some(threads)).unwrap()).unwrap();
            assert_eq!(acc, vec![2, drafts2.len()]);
            let (s1, _) = sequential(&m1, &drafts1, words);
            let (s2, _) = sequential(&m2, &drafts2, words);
            assert_eq!(&bm[..5 * words], &s1[..]);
            assert_eq!(&bm[5 * words..], &s2[..]);
        }
        assert_eq!(m2.num_consumed(), 1);
    }

    /// A context-free grammar's draft fill too small for a pool thread
    /// (`alone`: it borrows the matchers) equals the sequential one, with a
    /// refused draft, on a pool of two; the matchers are left unchanged.
    #[test]
    fn a_call_too_small_for_helpers_equals_sequential() {
        let toks: Vec<Vec<u8>> = ["[", "]", "a", ",", "a,", "<eos>"]
            .iter()
            .map(|t| t.as_bytes().to_vec())
            .collect();
        let vocab = Arc::new(Vocab::new(toks, &[5], &[], Some(64)).unwrap());
        let src = r#"root ::= "[" item ("," item)* "]"
item ::= "a" | root"#;
        let ast = crate::cfg::gbnf::parse(src).unwrap();
        let g = Arc::new(CompiledGrammar::from_ast(vocab, &ast, "gbnf", src).unwrap());
        let words = g.words();
        let mut m1 = MatcherCore::new(g.clone());
        for t in [0, 0, 2, 3] {
            assert!(m1.consume_token(t).unwrap()); // "[[a,"
        }
        let m2 = MatcherCore::new(g.clone());
        let drafts1 = vec![2, 1, 4, 1]; // "a", "]", then "a," is refused after the inner "]"
        let drafts2 = vec![];
        let reqs = two_requests(&m1, &drafts1, &m2, &drafts2);
        let pool = pool(Some(2)).unwrap();
        assert!(alone(&pool, 6));
        let mut bm = vec![7u32; words * 6];
        check_layout(&spans(&reqs), 6, words).unwrap();
        let acc = fill_with_drafts(&reqs, &mut bm, words, &pool).unwrap();
        let (s1, a1) = sequential(&m1, &drafts1, words);
        let (s2, _) = sequential(&m2, &drafts2, words);
        assert_eq!(acc, vec![a1, 0]);
        assert!(a1 < drafts1.len(), "a draft is refused");
        assert_eq!(&bm[..5 * words], &s1[..]);
        assert_eq!(&bm[5 * words..], &s2[..]);
        assert_eq!(m1.num_consumed(), 4);
    }

    /// One row (filled on the calling thread, whatever the pool) equals the
    /// sequential fill, for a fresh matcher and after a token.
    #[test]
    fn one_row_fills_equal_sequential() {
        let g = grammar();
        let words = g.words();
        let mut m = MatcherCore::new(g.clone());
        for _ in 0..2 {
            let reqs = vec![DraftRequest {
                matcher: &m,
                row: 1,
                drafts: vec![],
                padding: 0,
            }];
            let mut bm = vec![7u32; words * 2];
            check_layout(&spans(&reqs), 2, words).unwrap();
            let pool = pool(Some(3)).unwrap();
            assert!(alone(&pool, 1) && !alone(&pool, ALONE_BELOW_ROWS));
            assert_eq!(
                fill_with_drafts(&reqs, &mut bm, words, &pool).unwrap(),
                vec![0]
            );
            assert_eq!(&bm[..words], &vec![7u32; words][..], "another row written");
            assert_eq!(&bm[words..], &sequential(&m, &[], words).0[..]);
            assert!(m.consume_token(0).unwrap());
        }
    }

    #[test]
    fn layout_errors() {
        let g = grammar();
        let m = MatcherCore::new(g.clone());
        let words = g.words();
        let over = vec![
            DraftRequest {
                matcher: &m,
                row: 0,
                drafts: vec![0, 0],
                padding: 0,
            },
            DraftRequest {
                matcher: &m,
                row: 2,
                drafts: vec![],
                padding: 0,
            },
        ];
        assert!(check_layout(&spans(&over), 4, words)
            .unwrap_err()
            .to_string()
            .contains("overlap"));
        let oob = vec![DraftRequest {
            matcher: &m,
            row: 3,
            drafts: vec![0],
            padding: 0,
        }];
        assert!(check_layout(&spans(&oob), 4, words).is_err());
        let ok = vec![DraftRequest {
            matcher: &m,
            row: 3,
            drafts: vec![],
            padding: 0,
        }];
        assert!(check_layout(&spans(&ok), 4, words).is_ok());
        assert!(check_layout(&spans(&ok), 4, words + 1).is_err());
        assert!(pool(Some(0)).is_err());
    }
}
