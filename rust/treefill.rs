//! Draft-tree fills: every node's row of every request's tree in one call.
//!
//! A tree's rows come from its walk (`Position::tree_states`: each node's
//! state, or none below a refused token), as a draft chain's come from its
//! states (`batch`). Two things make trees their own case. A node's walk is
//! one token's advance, far cheaper than a row, so small trees are walked
//! on the calling thread, however many (`WALK_ALONE_NODES`). And only the
//! walks tell how many rows need a mask (every node below a refused token
//! is an all-ones row), and only a row's fill tells whether it was copied
//! from the fill memo or computed: the caller fills the rows in order and
//! hands the rest to the pool's threads (`batch::fill_rows`) only once they
//! turn out slow (`fill_walks_in_order`). Large batches of trees are walked
//! and filled with the pool's threads from the start.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rayon::ThreadPool;

use crate::batch::{alone, fill_rows, states_of, RowJob, Span, ALONE_BELOW_ROWS, ROWS_PER_THREAD};
use crate::cfg::earley::Chart;
use crate::error::Result;
use crate::grammar::State;
use crate::matcher::{MatcherCore, Position, TreeStates};
use crate::tree::DraftTree;

/// How long a tree fill's rows run on the calling thread before the
/// pool's threads may take the rest (`fill_walks_in_order`): about a
/// hundred copied rows.
const HAND_OFF_AFTER: Duration = Duration::from_micros(100);

/// Rows computed (each slower than `SLOW_ROW`) after which the pool's
/// threads may take the rest: the rows left are then likely computed too.
const HAND_OFF_SLOW_ROWS: usize = 2;

/// A row that took longer than this was computed, not copied from the
/// fill memo (about a microsecond, cold).
const SLOW_ROW: Duration = Duration::from_micros(8);

/// What a tree fill's rows on the calling thread have taken so far.
struct RowsSoFar {
    /// Masks filled.
    masks: usize,
    /// Masks whose fill took `SLOW_ROW` or longer.
    slow: usize,
    /// Time since the first row.
    took: Duration,
}

/// Masks that must be left for the pool's threads to be asked in then:
/// as many as make `fill_rows` wake one if they are to be computed.
const HAND_OFF_MASKS: usize = 2 * ROWS_PER_THREAD;

/// Draft-tree nodes below which a call's trees are walked on the calling
/// thread, however many: a node's walk is one token's advance (about a
/// microsecond with the grammar's data cold), a fresh row's fill tens of
/// them, so a helper woken for the walks (12-13 us of the caller's time,
/// then 35 us or more before it runs) finds most of them done. SGLang's
/// bench at B = 8, N = 8 (64 nodes; 2-core virtual machine, three
/// alternating runs): mean step 0.22 / 0.27 / 0.27 -> 0.21 / 0.24 / 0.25
/// ms, worst 0.39 / 0.47 / 0.48 -> 0.36 / 0.32 / 0.36 ms; at 128 nodes (B =
/// 8, N = 16) one thread and two were alike.
const WALK_ALONE_NODES: usize = 128;

/// One request of a draft-tree fill: row `row + i` is node i's.
pub struct TreeRequest<'a> {
    pub matcher: &'a MatcherCore,
    pub row: usize,
    pub tree: DraftTree,
    /// Rows of nodes past the end (their token, or an ancestor's, was EOS)
    /// are all ones instead of a terminated matcher's mask (the EOS set):
    /// SGLang's tree walk fills no row once the grammar has terminated, so
    /// its rows keep the all-ones they were allocated with.
    pub ones_after_end: bool,
}

impl<'a> TreeRequest<'a> {
    /// What row of node state `s` gets: its mask, or all ones past the end
    /// when `ones_after_end` asks for it.
    fn fills_mask(&self, s: &State) -> bool {
        !(self.ones_after_end && s.terminated)
    }

    /// The rows the request writes (for `batch::check_layout`).
    pub fn span(&self) -> Span<'a> {
        Span {
            matcher: self.matcher,
            row: self.row,
            count: self.tree.len(),
        }
    }
}

/// Fills row `row + i` of every request with the mask for the children of
/// tree node i; nodes that the grammar refuses (and their descendants) get
/// all-ones rows, and so do nodes past the end where `ones_after_end`.
/// Returns, per request, which nodes are grammar-valid. Call
/// `batch::check_layout` first; matchers are not changed.
pub fn fill_with_tree(
    reqs: &[TreeRequest<'_>],
    bitmask: &mut [u32],
    words: usize,
    pool: &ThreadPool,
) -> Result<Vec<Vec<bool>>> {
    let hand_off =
        |rows: &RowsSoFar| rows.slow >= HAND_OFF_SLOW_ROWS || rows.took >= HAND_OFF_AFTER;
    fill_with_tree_handing_off(reqs, bitmask, words, pool, &hand_off)
}

/// `fill_with_tree`, where `hand_off` says when rows the calling thread
/// fills in order may go to the pool's threads (`fill_walks_in_order`).
fn fill_with_tree_handing_off(
    reqs: &[TreeRequest<'_>],
    bitmask: &mut [u32],
    words: usize,
    pool: &ThreadPool,
    hand_off: &dyn Fn(&RowsSoFar) -> bool,
) -> Result<Vec<Vec<bool>>> {
    let rows: usize = reqs.iter().map(|r| r.tree.len()).sum();
    if alone(pool, rows) {
        return fill_with_tree_alone(reqs, bitmask, words);
    }
    if reqs.len() == 1 || rows < WALK_ALONE_NODES {
        // One tree (its walk is the caller's whichever way: one job), or
        // trees too small for a helper's wake-up to pay (see
        // `WALK_ALONE_NODES`): the caller walks them and fills their rows,
        // with the pool's help only for rows that turn out slow
        // (`fill_walks_in_order`).
        let walks = (reqs.iter())
            .map(|r| r.matcher.tree_states(&r.tree))
            .collect::<Result<Vec<_>>>()?;
        return fill_walks_in_order(pool, reqs, walks, bitmask, words, hand_off);
    }
    let jobs = (reqs.iter())
        .map(|r| (r.matcher.position(), r.tree.clone()))
        .collect();
    let walks = states_of(pool, rows, jobs, |(p, tree): (Position, DraftTree)| {
        p.tree_states(&tree)
    })
    .into_iter()
    .collect::<Result<Vec<_>>>()?;
    fill_walks(pool, reqs, walks, bitmask, words)
}

/// The rows of every request from its walk, in order, on the calling
/// thread. Where they need `ALONE_BELOW_ROWS` masks or more, `hand_off`
/// may stop that before a mask with at least `HAND_OFF_MASKS` masks left
/// (`fill_with_tree`: after `HAND_OFF_SLOW_ROWS` computed rows, or
/// `HAND_OFF_AFTER` in all): the rest of the rows then go to `fill_rows`
/// (pool threads join for rows to compute). Returns which nodes are
/// grammar-valid.
///
/// Only the walks tell how many rows need a mask: in a draft tree every
/// node below a refused token is an all-ones row, and SGLang's trees of 64
/// nodes had 10-25 masks. Below `ALONE_BELOW_ROWS` of them a pool thread
/// costs more than it takes: SGLang's bench at B = 1, N = 64, three
/// alternating runs, one thread against two: mean 0.08-0.11 against
/// 0.11-0.24 ms, worst step 0.14-0.18 against 0.29-3.9 (a helper that lost
/// its core mid-row). Above it, whether a row is a copy of a kept row
/// (about a microsecond, cold) or computed (tens of microseconds for a
/// fresh state) shows only in its fill, and a pool thread pays only for
/// the second kind: in SGLang's trees, after the compile's warm-up walk,
/// nearly every row is a copy, and a tree of 64 nodes with 57 valid ones
/// (inside a string) took 173-205 us with the pool's threads woken for its
/// 57 masks as they were before, against 144-151 us handing off this way
/// (after 64 MB of other memory traffic, two alternating runs each).
/// Chains of 63 fresh states along MaskBench instances (no warm-up, most
/// rows computed) took 350-490 us before and 400-430 after (means of 60,
/// this machine's noise about as large).
fn fill_walks_in_order(
    pool: &ThreadPool,
    reqs: &[TreeRequest<'_>],
    walks: Vec<TreeStates>,
    bitmask: &mut [u32],
    words: usize,
    hand_off: &dyn Fn(&RowsSoFar) -> bool,
) -> Result<Vec<Vec<bool>>> {
    let valid = walks.iter().map(TreeStates::valid).collect();
    if words == 0 {
        return Ok(valid);
    }
    let mut left: usize = (reqs.iter().zip(&walks))
        .map(|(r, walk)| {
            (walk.states.iter())
                .filter(|node| matches!(node, Some((_, s)) if r.fills_mask(s)))
                .count()
        })
        .sum();
    if left < ALONE_BELOW_ROWS {
        // The caller's, whatever they take (see the docs).
        for (r, walk) in reqs.iter().zip(&walks) {
            fill_walk_rows(r, walk, bitmask, words)?;
        }
        return Ok(valid);
    }
    let start = Instant::now();
    let mut so_far = RowsSoFar {
        masks: 0,
        slow: 0,
        took: Duration::ZERO,
    };
    // The request and node from which the pool's threads may help.
    let mut from = None;
    'requests: for (k, (r, walk)) in reqs.iter().zip(&walks).enumerate() {
        let g = r.matcher.grammar();
        for (i, node) in walk.states.iter().enumerate() {
            let row = &mut bitmask[(r.row + i) * words..(r.row + i + 1) * words];
            match node {
                Some((c, s)) if r.fills_mask(s) => {
                    if left >= HAND_OFF_MASKS && hand_off(&so_far) {
                        from = Some((k, i));
                        break 'requests;
                    }
                    let before = start.elapsed();
                    g.fill_row(&walk.charts[*c], s, row)?;
                    so_far.took = start.elapsed();
                    so_far.masks += 1;
                    so_far.slow += usize::from(so_far.took.saturating_sub(before) >= SLOW_ROW);
                    left -= 1;
                }
                _ => row.fill(u32::MAX),
            }
        }
    }
    if let Some((k, i)) = from {
        let mut jobs: Vec<(usize, RowJob)> = Vec::new();
        for (n, (r, walk)) in reqs.iter().zip(walks).skip(k).enumerate() {
            let done = if n == 0 { i } else { 0 };
            jobs.extend(row_jobs(r, walk).into_iter().skip(done));
        }
        fill_rows(pool, bitmask, words, jobs)?;
    }
    Ok(valid)
}

/// Request `r`'s rows from its walk as jobs any thread can do.
fn row_jobs(r: &TreeRequest<'_>, walk: TreeStates) -> Vec<(usize, RowJob)> {
    let g = r.matcher.grammar();
    let charts: Vec<Arc<Chart>> = walk.charts.into_iter().map(Arc::new).collect();
    (walk.states.into_iter().enumerate())
        .map(|(i, node)| {
            let job = match node {
                Some((c, s)) if r.fills_mask(&s) => {
                    RowJob::Mask(g.clone(), charts[c].clone(), Arc::new(s))
                }
                _ => RowJob::AllOnes,
            };
            (r.row + i, job)
        })
        .collect()
}

/// The rows of every request from its walk, filled by `pool`'s threads as
/// they join (`fill_rows`); returns which nodes are grammar-valid.
fn fill_walks(
    pool: &ThreadPool,
    reqs: &[TreeRequest<'_>],
    walks: Vec<TreeStates>,
    bitmask: &mut [u32],
    words: usize,
) -> Result<Vec<Vec<bool>>> {
    let valid = walks.iter().map(TreeStates::valid).collect();
    let mut jobs: Vec<(usize, RowJob)> = Vec::new();
    for (r, walk) in reqs.iter().zip(walks) {
        jobs.extend(row_jobs(r, walk));
    }
    fill_rows(pool, bitmask, words, jobs)?;
    Ok(valid)
}

/// `fill_with_tree` where no pool thread would join (`alone`): each
/// request's tree walked from its matcher, borrowed, and its rows filled in
/// order.
fn fill_with_tree_alone(
    reqs: &[TreeRequest<'_>],
    bitmask: &mut [u32],
    words: usize,
) -> Result<Vec<Vec<bool>>> {
    let mut valid = Vec::with_capacity(reqs.len());
    for r in reqs {
        let walk = r.matcher.tree_states(&r.tree)?;
        valid.push(walk.valid());
        fill_walk_rows(r, &walk, bitmask, words)?;
    }
    Ok(valid)
}

/// Request `r`'s rows from its walk, in order, on the calling thread.
fn fill_walk_rows(
    r: &TreeRequest<'_>,
    walk: &TreeStates,
    bitmask: &mut [u32],
    words: usize,
) -> Result<()> {
    if words == 0 {
        return Ok(());
    }
    let g = r.matcher.grammar();
    let span = r.row * words..(r.row + r.tree.len()) * words;
    for (row, node) in bitmask[span].chunks_mut(words).zip(&walk.states) {
        match node {
            Some((c, s)) if r.fills_mask(s) => g.fill_row(&walk.charts[*c], s, row)?,
            _ => row.fill(u32::MAX),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{check_layout, pool, test_grammar as grammar};

    #[test]
    fn tree_fill_equals_walking_each_path() {
        let g = grammar();
        let words = g.words();
        let m = MatcherCore::new(g.clone());
        // Tokens a=0 b=1 c=2 <eos>=3 under a*bc:
        //        0
        //   a(1)   c(2)      c is refused: node 2 and its child 5 get -1
        //  b(3) a(4) a(5)
        //  c(6)
        //  <eos>(7)          past the end: the EOS set, or all ones
        //  <eos>(8)          (`ones_after_end`)
        let tokens = [0, 0, 2, 1, 0, 0, 2, 3, 3];
        let parents = [-1, 0, 0, 1, 1, 2, 3, 6, 7];
        let n_nodes = tokens.len();
        let tree = DraftTree::from_parents(&tokens, &parents, g.vocab()).unwrap();
        let paths: [&[u32]; 9] = [
            &[],
            &[0],
            &[2],
            &[0, 1],
            &[0, 0],
            &[2, 0],
            &[0, 1, 2],
            &[0, 1, 2, 3],
            &[0, 1, 2, 3, 3],
        ];
        // One request fills alone. Past one thread: six (54 nodes, 30 or
        // 42 masks) are walked and filled by the caller; nine (81 nodes,
        // 45 or 63 masks) are walked by the caller, and with 63 masks the
        // pool's threads may take the rows from where `hand_off_at` says;
        // fifteen (135 nodes) are walked with them too.
        let copies: Vec<MatcherCore> = (0..15).map(|_| m.clone()).collect();
        for ones_after_end in [false, true] {
            let calls = [(1, 1), (2, 1), (1, 9), (2, 6), (2, 9), (3, 9), (2, 15)];
            // Masks the caller fills before the pool's threads may take
            // the rest: as timed (`fill_with_tree`), none, or three (in the
            // middle of the first request's rows).
            let hand_offs = [None, Some(0), Some(3)];
            for ((threads, n), hand_off_at) in
                calls.into_iter().flat_map(|c| hand_offs.map(|h| (c, h)))
            {
                let reqs: Vec<TreeRequest<'_>> = (copies[..n].iter().enumerate())
                    .map(|(k, m)| TreeRequest {
                        matcher: m,
                        row: 1 + n_nodes * k,
                        tree: tree.clone(),
                        ones_after_end,
                    })
                    .collect();
                let rows = 1 + n_nodes * n;
                let pool = pool(Some(threads)).unwrap();
                assert_eq!(alone(&pool, n_nodes * n), threads == 1 || n == 1);
                let mut bm = vec![7u32; words * rows];
                let spans: Vec<Span<'_>> = reqs.iter().map(TreeRequest::span).collect();
                check_layout(&spans, rows, words).unwrap();
                let valid = match hand_off_at {
                    None => fill_with_tree(&reqs, &mut bm, words, &pool),
                    Some(at) => {
                        let hand_off = |rows: &RowsSoFar| rows.masks >= at;
                        fill_with_tree_handing_off(&reqs, &mut bm, words, &pool, &hand_off)
                    }
                }
                .unwrap();
                let want_valid = vec![true, true, false, true, true, false, true, true, true];
                assert_eq!(valid, vec![want_valid; n]);
                assert_eq!(
                    &bm[..words],
                    &vec![7; words][..],
                    "rows outside the tree are kept"
                );
                for k in 0..n {
                    for (i, path) in paths.iter().enumerate() {
                        let at = 1 + n_nodes * k + i;
                        let row = &bm[at * words..(at + 1) * words];
                        let mut walk = m.clone();
                        let ended = path.last() == Some(&3);
                        if walk.consume_tokens(path).unwrap() && !(ones_after_end && ended) {
                            let mut want = vec![0u32; words];
                            walk.fill_row(&mut want).unwrap();
                            assert_eq!(row, &want[..], "request {k} node {i}");
                            assert_ne!(want, vec![u32::MAX; words]);
                        } else {
                            assert!(row.iter().all(|&w| w == u32::MAX), "request {k} node {i}");
                        }
                    }
                }
            }
        }
    }
}
