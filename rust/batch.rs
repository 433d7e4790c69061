//! Parallel fills: one rayon pass over all rows of all requests.
//!
//! Advancing a matcher along its drafts is cheap and computing a mask is not,
//! so each request's draft chain is first turned into a list of states, and
//! then every (request, position) row is filled in one parallel pass: the
//! parallelism is across batch x positions, not only across requests.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rayon::prelude::*;
use rayon::ThreadPool;

use crate::cfg::earley::{Chart, EarleySet};
use crate::error::{Error, Result};
use crate::grammar::{CompiledGrammar, State};
use crate::invalid;
use crate::matcher::MatcherCore;

/// Upper bound for `set_num_threads` and per-call thread counts.
pub const MAX_THREADS: usize = 1024;

/// 0 means "one per available core".
static DEFAULT_THREADS: AtomicUsize = AtomicUsize::new(0);
static POOLS: Mutex<Option<HashMap<usize, Arc<ThreadPool>>>> = Mutex::new(None);

fn check_threads(n: usize) -> Result<usize> {
    if n == 0 || n > MAX_THREADS {
        return invalid!("num_threads must be in [1, {MAX_THREADS}], got {n}");
    }
    Ok(n)
}

/// Sets the thread count used when a call does not pass its own.
pub fn set_num_threads(n: usize) -> Result<()> {
    DEFAULT_THREADS.store(check_threads(n)?, Ordering::Relaxed);
    Ok(())
}

pub fn get_num_threads() -> usize {
    match DEFAULT_THREADS.load(Ordering::Relaxed) {
        0 => std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
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
    let pools = guard.get_or_insert_with(HashMap::new);
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

/// What to write into one bitmask row.
#[derive(Clone, Copy)]
enum RowJob<'a> {
    /// The mask of a state (with the chart holding the sets it uses).
    Mask(&'a CompiledGrammar, &'a [Arc<EarleySet>], &'a State),
    AllOnes,
}

fn run_jobs(bitmask: &mut [u32], words: usize, jobs: &[Option<RowJob<'_>>]) -> Result<()> {
    bitmask
        .par_chunks_mut(words)
        .zip(jobs.par_iter())
        .try_for_each(|(row, job)| match job {
            Some(RowJob::Mask(g, chart, s)) => g.fill_row(chart, s, row),
            Some(RowJob::AllOnes) => {
                row.fill(u32::MAX);
                Ok(())
            }
            None => Ok(()),
        })
}

/// One request of a draft fill: `drafts` may be empty.
pub struct DraftRequest<'a> {
    pub matcher: &'a MatcherCore,
    pub row: usize,
    pub drafts: Vec<u32>,
}

/// Checks widths, row ranges and overlaps, before anything is written.
pub fn check_layout(reqs: &[DraftRequest<'_>], rows: usize, words: usize) -> Result<()> {
    let mut spans: Vec<(usize, usize, usize)> = Vec::with_capacity(reqs.len());
    for (i, r) in reqs.iter().enumerate() {
        let want = r.matcher.grammar().words();
        if want != words {
            return invalid!(
                "request {i}: the bitmask has {words} words per row but the matcher's vocabulary \
                 (vocab_size {}) needs {want}",
                r.matcher.grammar().vocab().vocab_size()
            );
        }
        let last = r.row.checked_add(r.drafts.len()).filter(|&l| l < rows);
        let Some(last) = last else {
            return invalid!(
                "request {i}: rows {}..={} (row {} plus {} drafts) do not fit in a bitmask of {rows} rows",
                r.row,
                r.row.saturating_add(r.drafts.len()),
                r.row,
                r.drafts.len()
            );
        };
        spans.push((r.row, last, i));
    }
    spans.sort_unstable();
    for w in spans.windows(2) {
        let ((a0, a1, ai), (b0, b1, bi)) = (w[0], w[1]);
        if b0 <= a1 {
            return invalid!("requests {ai} and {bi} overlap: rows {a0}..={a1} and {b0}..={b1}");
        }
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
    pool.install(|| {
        let chains: Vec<(Chart, Vec<State>)> = reqs
            .par_iter()
            .map(|r| r.matcher.draft_states(&r.drafts))
            .collect::<Result<_>>()?;
        let rows = bitmask.len().checked_div(words).unwrap_or(0);
        let mut jobs: Vec<Option<RowJob<'_>>> = vec![None; rows];
        for (r, (chart, states)) in reqs.iter().zip(&chains) {
            let g = r.matcher.grammar().as_ref();
            for i in 0..=r.drafts.len() {
                jobs[r.row + i] = Some(match states.get(i) {
                    Some(s) => RowJob::Mask(g, &chart[..], s),
                    None => RowJob::AllOnes,
                });
            }
        }
        if words > 0 {
            // Rows whose state is not cached yet and already scheduled for an
            // earlier row are deferred to a second pass, where they are copies:
            // each mask is computed once per call, not once per thread that needs it.
            let mut first: HashSet<(usize, &State)> = HashSet::new();
            let mut deferred: Vec<Option<RowJob<'_>>> = vec![None; rows];
            for (job, later) in jobs.iter_mut().zip(deferred.iter_mut()) {
                if let Some(RowJob::Mask(g, _, s)) = *job {
                    let key = (g as *const CompiledGrammar as usize, s);
                    if g.cacheable(s) && !g.is_cached(s) && !first.insert(key) {
                        *later = job.take();
                    }
                }
            }
            run_jobs(bitmask, words, &jobs)?;
            if deferred.iter().any(Option::is_some) {
                run_jobs(bitmask, words, &deferred)?;
            }
        }
        Ok(chains.iter().map(|(_, c)| c.len() - 1).collect())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::Vocab;

    fn grammar() -> Arc<CompiledGrammar> {
        let toks: Vec<Vec<u8>> = ["a", "b", "c", "<eos>"]
            .iter()
            .map(|t| t.as_bytes().to_vec())
            .collect();
        let vocab = Arc::new(Vocab::new(toks, &[3], &[], Some(40)).unwrap());
        Arc::new(CompiledGrammar::from_regex(vocab, "a*bc").unwrap())
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
        let drafts1 = vec![0, 0, 2, 1]; // rejected at index 2
        let drafts2 = vec![1, 2, 3];
        for threads in [1, 2, 3] {
            let reqs = vec![
                DraftRequest {
                    matcher: &m1,
                    row: 0,
                    drafts: drafts1.clone(),
                },
                DraftRequest {
                    matcher: &m2,
                    row: 5,
                    drafts: drafts2.clone(),
                },
            ];
            let mut bm = vec![0u32; words * 9];
            check_layout(&reqs, 9, words).unwrap();
            let acc =
                fill_with_drafts(&reqs, &mut bm, words, &pool(Some(threads)).unwrap()).unwrap();
            assert_eq!(acc, vec![2, 3]);
            let (s1, _) = sequential(&m1, &drafts1, words);
            let (s2, _) = sequential(&m2, &drafts2, words);
            assert_eq!(&bm[..5 * words], &s1[..]);
            assert_eq!(&bm[5 * words..], &s2[..]);
        }
        assert_eq!(m2.num_consumed(), 1);
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
            },
            DraftRequest {
                matcher: &m,
                row: 2,
                drafts: vec![],
            },
        ];
        assert!(check_layout(&over, 4, words)
            .unwrap_err()
            .to_string()
            .contains("overlap"));
        let oob = vec![DraftRequest {
            matcher: &m,
            row: 3,
            drafts: vec![0],
        }];
        assert!(check_layout(&oob, 4, words).is_err());
        let ok = vec![DraftRequest {
            matcher: &m,
            row: 3,
            drafts: vec![],
        }];
        assert!(check_layout(&ok, 4, words).is_ok());
        assert!(check_layout(&ok, 4, words + 1).is_err());
        assert!(pool(Some(0)).is_err());
    }
}
