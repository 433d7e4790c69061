//! Walks of the token trie: forward passes over the pre-order nodes that
//! skip a rejected node's whole subtree, setting the bits of the tokens
//! that end at live nodes (`walk`, `fill_allowed`), or reporting the nodes
//! where a visit stopped (`walk_visits`). A large walk runs as two lanes
//! interleaved node by node, the first and second half of the subtree's
//! nodes, so that two independent chains of loads keep the core busy
//! (`walk_visits_split`).

use super::steppers::Live;
use super::{DfaStepper, TokenTrie, TrieStepper, Visit, VisitStepper};
use crate::bitmask::set_bit;

/// Subtrees with fewer nodes are walked as one (`walk_visits_split`).
const SPLIT_WALK_NODES: usize = 4096;

/// A walk over nodes `i..end` in pre-order (`walk_visits`, and each of
/// `walk_visits_split`'s two), with the start of the run of tokens it has
/// yet to report: tokens go out run by run, as in `walk_visits_below`.
struct Lane {
    i: usize,
    end: usize,
    run: usize,
}

impl Lane {
    fn new(trie: &TokenTrie, i: usize, end: usize) -> Lane {
        let run = trie.nodes[i.min(end)].tokens_start as usize;
        Lane { i, end, run }
    }

    /// Visits node `i` (a `walk_visits` step); a skipped subtree may take
    /// `i` past `end`, which ends the lane.
    #[inline(always)]
    fn step(
        &mut self,
        trie: &TokenTrie,
        base: usize,
        stepper: &mut impl VisitStepper,
        report: &mut impl FnMut(usize, usize),
        on_stop: &mut impl FnMut(usize),
    ) {
        let n = trie.nodes[self.i];
        let skip = match stepper.visit(n.depth as usize - base, n.byte) {
            Visit::Live => false,
            Visit::Dead => true,
            Visit::Stop => {
                on_stop(self.i);
                true
            }
        };
        if skip {
            report(self.run, n.tokens_start as usize);
            self.i = n.subtree_end as usize;
            self.run = trie.nodes[self.i].tokens_start as usize;
        } else {
            self.i += 1;
        }
    }
}

impl TokenTrie {
    /// Sets the bit of every token whose bytes `step` can read from `start`
    /// without dying. `step(state, byte)` returns the next state, 0 meaning dead.
    pub fn fill_allowed(&self, start: u32, step: impl Fn(u32, u8) -> u32 + Clone, row: &mut [u32]) {
        let mut stepper = Live(DfaStepper::new(start, step, self.max_depth));
        self.walk_visits_split(0, &mut stepper, |t| set_bit(row, t), |_| {});
    }

    /// True if some token in the subtree below `node` (excluding `node`'s own
    /// tokens) can be read by `stepper`, whose frame 0 is the state at `node`.
    pub fn any_below(&self, node: usize, stepper: &mut impl TrieStepper) -> bool {
        let mut found = false;
        self.walk(node, stepper, |_| {
            found = true;
            false
        });
        found
    }

    /// Pre-order walk of the subtree below `top` that lets `visit` decide per
    /// node (depths relative to `top`): `Dead` skips the subtree, `Live`
    /// reports the node's tokens to `on_token` and descends, `Stop` reports
    /// the node to `on_stop` and skips its subtree.
    pub fn walk_visits(
        &self,
        top: usize,
        stepper: &mut impl VisitStepper,
        mut on_token: impl FnMut(u32),
        mut on_stop: impl FnMut(usize),
    ) {
        let mut report = |from: usize, to: usize| {
            if from < to {
                self.tokens[from..to].iter().for_each(|&t| on_token(t));
            }
        };
        let (base, end) = (self.depth(top), self.subtree_end(top));
        let mut lane = Lane::new(self, top + 1, end);
        while lane.i < lane.end {
            lane.step(self, base, stepper, &mut report, &mut on_stop);
        }
        report(lane.run, self.nodes[lane.end].tokens_start as usize);
    }

    /// `walk_visits` that reports only the nodes at least `from` bytes
    /// below `top`: a shallower node is visited only when a node that deep
    /// lies below it (its frame is needed there), and reports nothing.
    pub fn walk_visits_below(
        &self,
        top: usize,
        from: usize,
        stepper: &mut impl VisitStepper,
        mut on_token: impl FnMut(u32),
        mut on_stop: impl FnMut(usize),
    ) {
        // The tokens below `top` lie in pre-order in `self.tokens`, a node's
        // own before its subtree's: what the walk reports is that range less
        // the ranges of the subtrees it skips (and of the unreported nodes'
        // own tokens). So the walk only notes where runs of reported tokens
        // end and start again, and the tokens are reported run by run: no
        // per-node branch on whether a node has tokens (half of a 128k
        // vocabulary's nodes do, at random), which cost a mispredicted
        // branch a node.
        let (base, end) = (self.depth(top), self.subtree_end(top));
        let nodes = &self.nodes;
        let mut report = |from: usize, to: usize| {
            self.tokens[from..to].iter().for_each(|&t| on_token(t));
        };
        let mut run = nodes[top + 1].tokens_start as usize;
        let mut i = top + 1;
        while i < end {
            let n = nodes[i];
            let depth = n.depth as usize - base;
            let reported = depth >= from;
            let skip = if !reported && depth + (self.height[i] as usize) < from {
                true
            } else {
                match stepper.visit(depth, n.byte) {
                    Visit::Dead => true,
                    Visit::Stop => {
                        if reported {
                            on_stop(i);
                        }
                        true
                    }
                    Visit::Live => {
                        if !reported {
                            // Its own tokens are not reported.
                            report(run, n.tokens_start as usize);
                            run = nodes[i + 1].tokens_start as usize;
                        }
                        false
                    }
                }
            };
            if skip {
                report(run, n.tokens_start as usize);
                i = n.subtree_end as usize;
                run = nodes[i].tokens_start as usize;
            } else {
                i += 1;
            }
        }
        report(run, nodes[end].tokens_start as usize);
    }

    /// `walk_visits` as two walks interleaved node by node: one over the
    /// first half of the subtree's nodes (in pre-order), one over the rest,
    /// each with its own copy of `stepper`. A walk is a chain of dependent
    /// loads per node (the parent's state, then the transition); two
    /// independent chains keep the core busy while each waits. The same
    /// tokens are reported (in another order) and the same stops, in
    /// pre-order. Small subtrees are walked as one.
    pub fn walk_visits_split<S: VisitStepper + Clone>(
        &self,
        top: usize,
        stepper: &mut S,
        on_token: impl FnMut(u32),
        on_stop: impl FnMut(usize),
    ) {
        let end = self.subtree_end(top);
        if end - top < SPLIT_WALK_NODES {
            return self.walk_visits(top, stepper, on_token, on_stop);
        }
        let mid = top + 1 + (end - top - 1) / 2;
        self.walk_visits_split_at(top, mid, stepper, on_token, on_stop);
    }

    /// `walk_visits_split` with the second walk from node `mid`, any node
    /// strictly below `top`.
    pub(super) fn walk_visits_split_at<S: VisitStepper + Clone>(
        &self,
        top: usize,
        mid: usize,
        stepper: &mut S,
        mut on_token: impl FnMut(u32),
        mut on_stop: impl FnMut(usize),
    ) {
        let (base, end) = (self.depth(top), self.subtree_end(top));
        debug_assert!(top < mid && mid < end);
        let nodes = &self.nodes;
        // The second walk starts at `mid` with the states of its ancestors
        // (the only nodes before `mid` that nodes after it lie below); an
        // ancestor the first walk skips takes the nodes below it along.
        let mut second = stepper.clone();
        let mut ancestors = Vec::new();
        let mut a = self.parent(mid);
        while a != top {
            ancestors.push(a);
            a = self.parent(a);
        }
        let mut start = mid;
        for &a in ancestors.iter().rev() {
            let n = nodes[a];
            if second.visit(n.depth as usize - base, n.byte) != Visit::Live {
                start = n.subtree_end as usize;
                break;
            }
        }
        let mut lanes = [Lane::new(self, top + 1, mid), Lane::new(self, start, end)];
        let mut second_stops = Vec::new();
        let mut report = |from: usize, to: usize| {
            if from < to {
                self.tokens[from..to].iter().for_each(|&t| on_token(t));
            }
        };
        while lanes[0].i < lanes[0].end && lanes[1].i < lanes[1].end {
            lanes[0].step(self, base, stepper, &mut report, &mut on_stop);
            lanes[1].step(self, base, &mut second, &mut report, &mut |n| {
                second_stops.push(n)
            });
        }
        while lanes[0].i < lanes[0].end {
            lanes[0].step(self, base, stepper, &mut report, &mut on_stop);
        }
        while lanes[1].i < lanes[1].end {
            lanes[1].step(self, base, &mut second, &mut report, &mut |n| {
                second_stops.push(n)
            });
        }
        for lane in &lanes {
            report(lane.run, nodes[lane.end].tokens_start as usize);
        }
        second_stops.into_iter().for_each(on_stop);
    }

    /// Pre-order walk of the subtree below `top`: each node's byte is stepped
    /// from its parent's frame, a dead step skips the whole subtree, and each
    /// token on a live node is reported; `on_token` returns false to stop.
    #[inline]
    pub fn walk(
        &self,
        top: usize,
        stepper: &mut impl TrieStepper,
        mut on_token: impl FnMut(u32) -> bool,
    ) {
        let (base, end) = (self.depth(top), self.subtree_end(top));
        let nodes = &self.nodes;
        let mut i = top + 1;
        while i < end {
            let n = nodes[i];
            if !stepper.step(n.depth as usize - base, n.byte) {
                i = n.subtree_end as usize;
                continue;
            }
            for &t in self.node_tokens(i) {
                if !on_token(t) {
                    return;
                }
            }
            i += 1;
        }
    }
}
