//! An Earley parser over lexemes, advanced one byte at a time.
//!
//! The parser state after some bytes is: the chart (Earley sets, one per
//! position where some lexeme ended) and a frontier of in-progress lexeme
//! scans `(lexeme, DFA state, origin set)`. A byte steps every scan's DFA; scans
//! whose lexeme accepts complete it (all-splits lexing: at every accepting
//! point), which creates a new Earley set by scan + predict/complete closure
//! (Aycock-Horspool nullable handling), whose predicted lexemes start new
//! scans. Inside a lexeme only DFAs move, so the parser runs at lexeme
//! boundaries only. Every nonterminal is productive after lowering, so a state
//! is live exactly when its frontier is non-empty or it accepts. (Two
//! longest-match features make that a guess rather than a fact: a back-off
//! branch whose every continuation its guards will kill, and an indenter
//! newline every width of which the parser refuses. Neither happens in the
//! grammars we test; the tests check each token's bit against `consume`.)

use rustc_hash::FxHashSet as HashSet;
use std::sync::{Arc, OnceLock};

use super::ast::Lexing;
use super::indent::Layout;
use super::longest::{branches, GUARD};
use super::lowered::{Cfg, Sym};
use super::setnames::SetName;
use crate::error::{Error, Result};
use crate::regex_dfa::DEAD;

/// Bound on items in one Earley set (per-byte parser work is bounded by it).
pub const MAX_ITEMS_PER_SET: usize = 200_000;
/// Bound on the work of one parser step (rules predicted, items completed,
/// and the earlier items each completion advances): with it every consume and every
/// parser walk below a trie node is bounded in work, whatever the grammar's
/// ambiguity (`x ::= x x | "a"` makes each step complete against every
/// earlier position, so a long text costs cubic time without it). Twice
/// llguidance's per-step item bound (`step_max_items`, 50,000): a JSON
/// grammar's step looks at tens of items; at 250,000 a 2,000-token walk of
/// an ambiguous grammar took 4-6 s to reach the bound, at this one about 1.
pub const MAX_CLOSURE_WORK: usize = 100_000;
/// Sets up to this many items are deduplicated by a scan of their items;
/// past it, by a hash table. Most sets are small (a JSON grammar's hold about
/// ten items), and there a scan beats building and hashing into a table.
const SCANNED_ITEMS: usize = 32;
/// A closure buffer with room for more items than this is not kept.
const KEPT_CLOSURE_ITEMS: usize = 4096;

thread_local! {
    /// Each thread's buffer for the set a closure builds (see `closure`).
    static CLOSURE_BUF: std::cell::RefCell<Vec<Item>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Bound on concurrent lexeme scans.
pub const MAX_FRONTIER: usize = 20_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Item {
    pub rule: u32,
    pub dot: u32,
    pub origin: u32,
    /// The members used so far by the object this item's rule belongs to
    /// (member-set nonterminals only; 0 elsewhere).
    pub members: super::members::MemberSet,
}

#[derive(Debug, Default)]
pub struct EarleySet {
    pub items: Vec<Item>,
    /// In sets of more than `INDEXED_ITEMS` items: `(symbol key, item
    /// index)` sorted by key (`Cfg::next_key`), so that completions and
    /// scans find the items waiting for a symbol without reading the whole
    /// set. Reading it whole for each completed item made a closure
    /// quadratic in its size: an ambiguous grammar took minutes per byte
    /// well under the item bound.
    by_next: Option<Box<[(u32, u32)]>>,
    /// The indenter's state after this set's text (indenter grammars only:
    /// boxed, so that other grammars' sets stay small).
    pub layout: Option<Box<Layout>>,
    /// The set's position-free name (`setnames`), once asked for: None
    /// inside when it cannot be named.
    pub name: OnceLock<Option<SetName>>,
}

/// Sets with more items than this are indexed by the symbol after the dot.
const INDEXED_ITEMS: usize = 256;
/// Marks terminals' keys apart from nonterminals' (both below 2^31).
const TERMINAL_KEY: u32 = 1 << 31;

/// The layout of a set without one: nothing open.
static NO_LAYOUT: Layout = Layout {
    brackets: 0,
    levels: Vec::new(),
};

impl EarleySet {
    /// The indenter's state after this set's text.
    pub fn layout(&self) -> &Layout {
        self.layout.as_deref().unwrap_or(&NO_LAYOUT)
    }

    /// The items that may wait for the symbol with key `key` (all of them
    /// in small sets): callers still check the symbol.
    fn waiting_for(&self, key: u32) -> impl Iterator<Item = &Item> {
        let (all, indexed): (&[Item], &[(u32, u32)]) = match &self.by_next {
            None => (&self.items, &[]),
            Some(ix) => {
                let lo = ix.partition_point(|&(k, _)| k < key);
                let hi = ix.partition_point(|&(k, _)| k <= key);
                (&[], &ix[lo..hi])
            }
        };
        all.iter()
            .chain(indexed.iter().map(|&(_, i)| &self.items[i as usize]))
    }
}

/// A lexeme being read: its DFA state and the set where it started.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Scan {
    pub lexeme: u32,
    pub state: u32,
    pub origin: u32,
}

/// Where a parse is: `sets` Earley sets of its chart are in force.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CfgState {
    pub sets: u32,
    pub frontier: Vec<Scan>,
    pub accepting: bool,
    /// Token terminals that sets made at this very position wait for
    /// (`lexeme`, `origin`; `state` 0): a token read next may be one of
    /// them (see `tokenterm`). Empty in grammars without token terminals
    /// and after a byte that ended no lexeme here.
    pub tokens: Vec<Scan>,
}

/// Read access to Earley sets by index.
pub trait ChartRead {
    fn set(&self, i: u32) -> &EarleySet;
}

/// A matcher's chart: sets are shared (Arc) with forks and snapshots.
pub type Chart = Vec<Arc<EarleySet>>;

impl ChartRead for [Arc<EarleySet>] {
    fn set(&self, i: u32) -> &EarleySet {
        &self[i as usize]
    }
}

/// A shared prefix plus sets added locally (used by the mask walk).
pub struct ChartView<'a> {
    pub base: &'a [Arc<EarleySet>],
    pub ext: Vec<Arc<EarleySet>>,
}

impl ChartRead for ChartView<'_> {
    fn set(&self, i: u32) -> &EarleySet {
        let i = i as usize;
        if i < self.base.len() {
            &self.base[i]
        } else {
            &self.ext[i - self.base.len()]
        }
    }
}

/// `base`'s first `len` sets, then `ext` (sets made by one completion).
pub(crate) struct Extended<'a, C: ?Sized> {
    pub base: &'a C,
    pub len: u32,
    pub ext: &'a [EarleySet],
}

impl<C: ChartRead + ?Sized> ChartRead for Extended<'_, C> {
    fn set(&self, i: u32) -> &EarleySet {
        if i < self.len {
            self.base.set(i)
        } else {
            &self.ext[(i - self.len) as usize]
        }
    }
}

/// The sets one completion adds: `before` (the indenter's tokens read
/// first, each a set), then `set`, whose predicted lexemes start `scans`.
#[derive(Debug)]
pub struct Completion {
    pub before: Vec<EarleySet>,
    pub set: EarleySet,
    pub scans: Vec<Scan>,
    pub accepting: bool,
}

impl Completion {
    /// A completion the indenter refuses: a set from which nothing goes on.
    fn refused() -> Self {
        Completion {
            before: Vec::new(),
            set: EarleySet::default(),
            scans: Vec::new(),
            accepting: false,
        }
    }

    /// The one set `closure` made.
    fn alone((set, scans, accepting): (EarleySet, Vec<Scan>, bool)) -> Self {
        Completion {
            before: Vec::new(),
            set,
            scans,
            accepting,
        }
    }

    /// How many sets it adds (at least one).
    pub fn sets(&self) -> u32 {
        self.before.len() as u32 + 1
    }

    /// Pushes the sets onto `chart`.
    pub fn push_sets(self, chart: &mut Chart) -> (Vec<Scan>, bool) {
        chart.extend(self.before.into_iter().map(Arc::new));
        chart.push(Arc::new(self.set));
        (self.scans, self.accepting)
    }
}

/// The nonterminals a closure has predicted, with their member sets.
#[derive(Default)]
struct Predicted {
    /// Scanned while short (a JSON set predicts a handful).
    few: Vec<(u32, super::members::MemberSet)>,
    many: Option<HashSet<(u32, super::members::MemberSet)>>,
}

impl Predicted {
    /// Records `(b, members)`; whether it is new.
    #[inline]
    fn first(&mut self, b: u32, members: super::members::MemberSet) -> bool {
        let key = (b, members);
        if let Some(t) = &mut self.many {
            return t.insert(key);
        }
        if self.few.contains(&key) {
            return false;
        }
        self.few.push(key);
        if self.few.len() > SCANNED_ITEMS {
            self.many = Some(self.few.drain(..).collect());
        }
        true
    }
}

/// The items of a set being built, each once.
struct ItemList {
    items: Vec<Item>,
    /// Every item of `items`, once there are more than `SCANNED_ITEMS`.
    table: Option<HashSet<Item>>,
}

impl ItemList {
    fn new() -> Self {
        ItemList {
            items: Vec::new(),
            table: None,
        }
    }

    /// `items`, which must be distinct.
    fn of(items: Vec<Item>) -> Self {
        let table = (items.len() > SCANNED_ITEMS).then(|| items.iter().copied().collect());
        ItemList { items, table }
    }

    fn contains(&self, x: &Item) -> bool {
        match &self.table {
            Some(t) => t.contains(x),
            None => self.items.contains(x),
        }
    }

    /// Adds `x` unless it is there already.
    fn insert(&mut self, x: Item) {
        match &mut self.table {
            Some(t) => {
                if t.insert(x) {
                    self.items.push(x);
                }
            }
            None => {
                if !self.items.contains(&x) {
                    self.items.push(x);
                    if self.items.len() > SCANNED_ITEMS {
                        self.table = Some(self.items.iter().copied().collect());
                    }
                }
            }
        }
    }
}

impl Cfg {
    fn next_sym(&self, it: &Item) -> Option<Sym> {
        self.rules[it.rule as usize]
            .rhs
            .get(it.dot as usize)
            .copied()
    }

    /// The index key of the symbol after `it`'s dot (see `EarleySet::by_next`).
    fn next_key(&self, it: &Item) -> Option<u32> {
        self.next_sym(it).map(|s| match s {
            Sym::N(b) | Sym::P(b, _) => b,
            Sym::T(l) => TERMINAL_KEY | l,
        })
    }

    /// `items` as a set, indexed when large.
    fn earley_set(&self, items: Vec<Item>) -> EarleySet {
        let by_next = (items.len() > INDEXED_ITEMS).then(|| {
            let mut ix: Vec<(u32, u32)> = items
                .iter()
                .enumerate()
                .filter_map(|(i, it)| Some((self.next_key(it)?, i as u32)))
                .collect();
            ix.sort_unstable();
            ix.into_boxed_slice()
        });
        EarleySet {
            items,
            by_next,
            layout: None,
            name: OnceLock::new(),
        }
    }

    fn lexeme_nullable(&self, l: u32) -> bool {
        self.lexemes[l as usize].nullable()
    }

    /// Predict/complete closure of `kernel` as set number `cur`; returns the
    /// set, the scans it starts and whether it accepts.
    pub(crate) fn closure(
        &self,
        chart: &(impl ChartRead + ?Sized),
        cur: u32,
        kernel: Vec<Item>,
    ) -> Result<(EarleySet, Vec<Scan>, bool)> {
        // The set grows in a buffer this thread reuses, and is copied out at
        // its final size: growing a fresh vector reallocated it several
        // times per set, each a cache miss when the allocator is cold.
        let mut buf = CLOSURE_BUF.with(|b| std::mem::take(&mut *b.borrow_mut()));
        buf.clear();
        buf.extend_from_slice(&kernel);
        drop(kernel);
        let mut set = ItemList::of(buf);
        let mut waiting: Vec<u32> = Vec::new();
        // Nonterminals (with the member set they start with) already
        // predicted here: the many items of an ambiguous set that wait for
        // one nonterminal predict its rules once, not once each.
        let mut predicted = Predicted::default();
        let mut i = 0;
        // Rules predicted, items completed and parents advanced: the size
        // of a set is bounded, but on an ambiguous grammar each of its items
        // may complete against many earlier ones.
        let mut work = 0usize;
        while i < set.items.len() {
            let it = set.items[i];
            i += 1;
            match self.next_sym(&it) {
                Some(sym @ (Sym::N(b) | Sym::P(b, _))) => {
                    let members = sym.member_set(it.members);
                    if predicted.first(b, members) {
                        let rules = &self.by_lhs[b as usize];
                        work += rules.len();
                        for &r in rules {
                            if self.admits(self.rules[r as usize].guard, members) {
                                set.insert(Item {
                                    rule: r,
                                    dot: 0,
                                    origin: cur,
                                    members,
                                });
                            }
                        }
                    }
                    if self.nullable[b as usize] {
                        set.insert(Item {
                            dot: it.dot + 1,
                            ..it
                        });
                    }
                }
                Some(Sym::T(l)) => {
                    waiting.push(l);
                    if self.lexeme_nullable(l) {
                        set.insert(Item {
                            dot: it.dot + 1,
                            ..it
                        });
                    }
                }
                None if it.origin != cur => {
                    // Completions of empty spans (origin == cur) were already
                    // advanced at prediction time, as the nonterminal is nullable.
                    let lhs = self.rules[it.rule as usize].lhs;
                    // The completion, and each parent it advances (a small
                    // set is read whole, at most `INDEXED_ITEMS` items).
                    work += 1;
                    for p in chart.set(it.origin).waiting_for(lhs) {
                        let parent = self.next_sym(p);
                        if parent.and_then(Sym::nonterminal) == Some(lhs)
                            && parent.map(|s| s.member_set(p.members)) == Some(it.members)
                        {
                            work += 1;
                            set.insert(Item {
                                dot: p.dot + 1,
                                ..*p
                            });
                        }
                    }
                }
                None => {}
            }
            if set.items.len() > MAX_ITEMS_PER_SET {
                return Err(Error::LimitExceeded(format!(
                    "parser state exceeds {MAX_ITEMS_PER_SET} items (grammar too ambiguous)"
                )));
            }
            if work > MAX_CLOSURE_WORK {
                return Err(Error::LimitExceeded(format!(
                    "a parser step takes more than {MAX_CLOSURE_WORK} item completions \
                     (grammar too ambiguous for this text)"
                )));
            }
        }
        if self.lexing == Lexing::Longest {
            // %ignore'd lexemes may start wherever a lexeme may, and so may
            // the indenter's newline (Lark's lexer always accepts it: inside
            // brackets it is skipped, elsewhere the parser must take it).
            if cur == 0 && !self.initial_skip {
                // llguidance's grammars: no ignored text before the first
                // lexeme (`%llguidance` without `allow_initial_skip`).
            } else if self.contexts.is_empty() {
                waiting.extend_from_slice(&self.ignore);
            } else {
                let ignored = self.ignored_at(&set.items, cur, &waiting);
                waiting.extend(ignored);
            }
            if let Some(ind) = &self.indenter {
                waiting.push(ind.newline);
            }
        }
        waiting.sort_unstable();
        waiting.dedup();
        let frontier = waiting
            .into_iter()
            .filter_map(|l| {
                let dfa = self.lexemes[l as usize].dfa.as_ref()?;
                Some(Scan {
                    lexeme: l,
                    state: dfa.start(),
                    origin: cur,
                })
            })
            .collect();
        let accepting = set.contains(&Item {
            rule: self.start_rule(),
            dot: 1,
            origin: 0,
            members: 0,
        });
        let items = set.items.to_vec();
        if set.items.capacity() <= KEPT_CLOSURE_ITEMS {
            CLOSURE_BUF.with(|b| *b.borrow_mut() = set.items);
        }
        Ok((self.earley_set(items), frontier, accepting))
    }

    /// Whether `%ignore`d lexeme `l`, ended from `set` (number `o`), was
    /// read there as ignored text (a lexeme may also be a terminal the
    /// grammar names, read as one where ignored text may not come).
    fn ignored_from(&self, set: &EarleySet, o: u32, l: u32) -> bool {
        if o == 0 && !self.initial_skip {
            return false;
        }
        if self.contexts.is_empty() {
            return true;
        }
        let waiting: Vec<u32> = (set.items.iter())
            .filter_map(|it| match self.next_sym(it) {
                Some(Sym::T(t)) => Some(t),
                _ => None,
            })
            .collect();
        self.ignored_at(&set.items, o, &waiting).contains(&l)
    }

    /// A grammar with blocks: the lexemes that may be skipped at a set of
    /// `items` (set number `cur`) that waits for `waiting`. Those of the
    /// deepest contexts among the lexemes it waits for (the grammar's own
    /// where it waits for none: the text may end there), a block's only once
    /// the block's text has begun (an item of its rules that spans text):
    /// llguidance's lexer skips a nested grammar's ignored text only after
    /// one of its lexemes, and not where a nested grammar's lexeme may come
    /// next.
    #[cold]
    #[inline(never)]
    fn ignored_at(&self, items: &[Item], cur: u32, waiting: &[u32]) -> Vec<u32> {
        let mut ctxs: Vec<u32> = (waiting.iter())
            .map(|&l| &self.lexemes[l as usize])
            .filter(|x| x.dfa.is_some())
            .map(|x| x.context)
            .collect();
        ctxs.sort_unstable();
        ctxs.dedup();
        if ctxs.is_empty() {
            return self.contexts[0].ignore.clone();
        }
        let depth = |c: u32| self.contexts[c as usize].depth;
        let deepest = ctxs.iter().map(|&c| depth(c)).max().unwrap_or(0);
        // The contexts whose text has begun: those of items that span text
        // (past their first symbol, from an earlier set: one that only
        // passed nullable symbols here spans none). One pass over the items.
        let mut begun: Vec<u32> = (items.iter())
            .filter(|it| it.dot > 0 && it.origin < cur)
            .map(|it| self.nt_context[self.rules[it.rule as usize].lhs as usize])
            .collect();
        begun.sort_unstable();
        begun.dedup();
        (ctxs.into_iter())
            .filter(|&c| depth(c) == deepest && (c == 0 || begun.binary_search(&c).is_ok()))
            .flat_map(|c| self.contexts[c as usize].ignore.iter().copied())
            .collect()
    }

    /// The state before any byte; its set 0 goes into `chart`.
    pub fn initial(&self, chart: &mut Chart) -> Result<CfgState> {
        chart.clear();
        let kernel = vec![Item {
            rule: self.start_rule(),
            dot: 0,
            origin: 0,
            members: 0,
        }];
        let (set, frontier, accepting) = self.closure(&chart[..], 0, kernel)?;
        let tokens = self.token_scans(&set, 0);
        chart.push(Arc::new(set));
        Ok(CfgState {
            sets: 1,
            frontier,
            accepting,
            tokens,
        })
    }

    /// Advances every scan by `byte`, pushing the survivors onto `out`.
    /// Returns the lexemes (with their origins) that end after the byte
    /// (all-splits lexemes that accept there) and those that end before it
    /// (greedy lexemes that accepted and cannot read it; see `greedy`).
    #[inline]
    pub fn step_scans(&self, frontier: &[Scan], byte: u8, out: &mut Vec<Scan>) -> Ends {
        let mut ends = Ends::default();
        for s in frontier {
            let lexeme = &self.lexemes[s.lexeme as usize];
            let dfa = lexeme.dfa.as_ref().expect("scans have DFAs");
            let q = dfa.step(s.state, byte);
            if q == DEAD {
                if lexeme.ends_before(dfa, s.state, byte) {
                    ends.before.push((s.lexeme, s.origin));
                }
                continue;
            }
            out.push(Scan { state: q, ..*s });
            if !lexeme.greedy && dfa.is_accepting(q) {
                ends.after.push((s.lexeme, s.origin));
            }
        }
        ends
    }

    /// The kernel after lexemes `done` end: items waiting for each one
    /// advanced over it; an ignored lexeme leaves its origin's items.
    pub(crate) fn scanned(
        &self,
        chart: &(impl ChartRead + ?Sized),
        done: &[(u32, u32)],
    ) -> Vec<Item> {
        let mut kernel = ItemList::new();
        for &(l, o) in done {
            if self.ignore.contains(&l) && self.ignored_from(chart.set(o), o, l) {
                // An ignored lexeme leaves the parse where it was.
                chart.set(o).items.iter().for_each(|p| kernel.insert(*p));
            }
            for p in chart.set(o).waiting_for(TERMINAL_KEY | l) {
                if self.next_sym(p) == Some(Sym::T(l)) {
                    kernel.insert(Item {
                        dot: p.dot + 1,
                        ..*p
                    });
                }
            }
        }
        kernel.items
    }

    /// The sets after lexemes `done` end, the first numbered `cur`. `width`
    /// is the indentation a newline lexeme ends with (indenter grammars,
    /// where the newline then ends alone; 0 otherwise).
    pub fn complete_lexemes(
        &self,
        chart: &(impl ChartRead + ?Sized),
        cur: u32,
        done: &[(u32, u32)],
        width: u32,
    ) -> Result<Completion> {
        let Some(ind) = &self.indenter else {
            return Ok(Completion::alone(self.closure(
                chart,
                cur,
                self.scanned(chart, done),
            )?));
        };
        self.complete_indented(ind, chart, cur, done, width)
    }

    /// `complete_lexemes` for a grammar with an indenter. Kept out of line:
    /// inlined, it made the common path's closure a call of its own, and
    /// JSON masks 10% slower.
    #[inline(never)]
    fn complete_indented(
        &self,
        ind: &super::indent::Indenter,
        chart: &(impl ChartRead + ?Sized),
        cur: u32,
        done: &[(u32, u32)],
        width: u32,
    ) -> Result<Completion> {
        // Longest-match lexing: every lexeme started at the newest set.
        let Some(&(_, origin)) = done.first() else {
            return Ok(Completion::refused());
        };
        let layout = chart.set(origin).layout();
        let (kernel, after) = if done.iter().any(|&(l, _)| l == ind.newline) {
            if layout.brackets == 0 {
                let Some((tokens, after)) = ind.after_newline(layout, width) else {
                    return Ok(Completion::refused());
                };
                return self.read_tokens(chart, cur, origin, &tokens, after);
            }
            // Inside brackets a newline is skipped.
            (chart.set(origin).items.clone(), layout.clone())
        } else {
            let mut after = layout.clone();
            for &(l, _) in done {
                match ind.after_lexeme(&after, l) {
                    Some(next) => after = next,
                    None => return Ok(Completion::refused()),
                }
            }
            (self.scanned(chart, done), after)
        };
        let mut c = Completion::alone(self.closure(chart, cur, kernel)?);
        c.set.layout = Some(Box::new(after));
        Ok(c)
    }

    /// Reads `tokens`, lexemes of no text, one after another from set
    /// `origin`, each into a set of its own numbered from `cur`; the last
    /// set's layout is `layout`.
    fn read_tokens(
        &self,
        chart: &(impl ChartRead + ?Sized),
        cur: u32,
        origin: u32,
        tokens: &[u32],
        layout: Layout,
    ) -> Result<Completion> {
        let mut made: Vec<EarleySet> = Vec::with_capacity(tokens.len());
        let mut from = origin;
        let mut last = None;
        for (k, &t) in tokens.iter().enumerate() {
            let view = Extended {
                base: chart,
                len: cur,
                ext: &made,
            };
            let kernel = self.scanned(&view, &[(t, from)]);
            if kernel.is_empty() {
                return Ok(Completion::refused());
            }
            from = cur + k as u32;
            let (set, scans, accepting) = self.closure(&view, from, kernel)?;
            if k + 1 == tokens.len() {
                last = Some((set, scans, accepting));
            } else {
                made.push(set);
            }
        }
        let Some((mut set, scans, accepting)) = last else {
            return Ok(Completion::refused());
        };
        set.layout = Some(Box::new(layout));
        Ok(Completion {
            before: made,
            set,
            scans,
            accepting,
        })
    }

    /// Reads `bytes` from `st`, appending new sets to `chart` (which must hold
    /// exactly `st.sets` sets). None (chart restored) if some byte is refused.
    pub fn advance_bytes(
        &self,
        chart: &mut Chart,
        st: &CfgState,
        bytes: &[u8],
    ) -> Result<Option<CfgState>> {
        debug_assert_eq!(chart.len(), st.sets as usize);
        let mut cur = st.clone();
        for &b in bytes {
            match self.step(chart, &cur, b) {
                Ok(Some(next)) => cur = next,
                other => {
                    chart.truncate(st.sets as usize);
                    return other;
                }
            }
        }
        if !bytes.is_empty() {
            match self.accepts_at_end(&chart[..], &cur) {
                Ok(acc) => cur.accepting = acc,
                Err(e) => {
                    chart.truncate(st.sets as usize);
                    return Err(e);
                }
            }
        }
        Ok(Some(cur))
    }

    /// One byte: steps the scans, completes the lexemes that end (pushing
    /// their sets onto `chart`) and starts what they predict. None if the
    /// byte is refused (the caller truncates `chart`).
    ///
    /// All-splits lexing ends greedy lexemes before the byte when it kills
    /// them (the lexemes they predict then read it), and the others after
    /// the byte wherever they accept. Longest-match lexing keeps a branch
    /// per origin: a branch ends its lexemes where no scan takes the byte
    /// (the scans that accepted before it end, see `longest_ends`), and the
    /// byte must start a new lexeme; where scans take the byte but leave an
    /// accepting point for states that do not accept, a new branch also ends
    /// the lexemes there, guarded by those scans (back-off, see `GUARD`).
    /// `accepting` is left false where only a greedy lexeme's end would make
    /// the text complete: `accepts_at_end` decides that after the last byte.
    fn step(&self, chart: &mut Chart, st: &CfgState, byte: u8) -> Result<Option<CfgState>> {
        let mut out = Vec::with_capacity(st.frontier.len());
        let mut sets = st.sets;
        let mut accepting = false;
        let mut tokens = Vec::new();
        match self.lexing {
            Lexing::AllSplits => {
                let ends = self.step_scans(&st.frontier, byte, &mut out);
                let mut after = ends.after;
                if !ends.before.is_empty() {
                    let c = self.complete_lexemes(&chart[..], sets, &ends.before, 0)?;
                    sets += c.sets();
                    let (started, _) = c.push_sets(chart);
                    // Lexemes started here that end at once matched the empty
                    // string, which prediction already took.
                    after.extend(self.step_scans(&started, byte, &mut out).after);
                }
                if !after.is_empty() {
                    let c = self.complete_lexemes(&chart[..], sets, &after, 0)?;
                    sets += c.sets();
                    let (started, acc) = c.push_sets(chart);
                    out.extend_from_slice(&started);
                    accepting = acc;
                    if self.has_tokens {
                        tokens = self.token_scans(&chart[sets as usize - 1], sets - 1);
                    }
                }
            }
            Lexing::Longest => {
                let mut lone_ends: Vec<(u32, u32)> = Vec::new();
                for (o, group) in branches(self, &st.frontier) {
                    let t = self.longest_step(&group, byte);
                    out.extend(t.next.iter().map(|&(lexeme, state)| Scan {
                        lexeme,
                        state,
                        origin: o,
                    }));
                    if t.ends.is_empty() {
                        continue;
                    }
                    if self.has_alone && self.lone_alone(&group) {
                        lone_ends.extend(t.ends.iter().map(|&l| (l, o)));
                        continue;
                    }
                    let done: Vec<(u32, u32)> = t.ends.iter().map(|&l| (l, o)).collect();
                    let c = self.complete_lexemes(&chart[..], sets, &done, t.width)?;
                    sets += c.sets();
                    let (started, _) = c.push_sets(chart);
                    let before = out.len();
                    self.step_scans(&started, byte, &mut out);
                    if out.len() > before {
                        out.extend(t.guards.iter().map(|&(lexeme, state)| Scan {
                            lexeme,
                            state,
                            origin: sets - 1,
                        }));
                    }
                }
                if !lone_ends.is_empty() {
                    let c = self.complete_lexemes(&chart[..], sets, &lone_ends, 0)?;
                    sets += c.sets();
                    let (started, _) = c.push_sets(chart);
                    self.step_scans(&started, byte, &mut out);
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        if out.len() > MAX_FRONTIER {
            return Err(Error::LimitExceeded(format!(
                "more than {MAX_FRONTIER} lexemes in progress at once (grammar too ambiguous)"
            )));
        }
        if out.is_empty() && !accepting && tokens.is_empty() {
            return Ok(None);
        }
        Ok(Some(CfgState {
            sets,
            frontier: out,
            accepting,
            tokens,
        }))
    }

    /// The lexeme a scan or guard (`GUARD`-tagged id) reads.
    #[inline]
    pub fn scan_lexeme(&self, id: u32) -> &super::lowered::Lexeme {
        &self.lexemes[(id & !GUARD) as usize]
    }

    /// Whether the grammar accepts at `st`: if the text ended here, the scans
    /// waiting for the next byte to end them (longest-match lexemes, greedy
    /// all-splits ones) would end, so complete them virtually.
    pub fn accepts_at_end(&self, chart: &(impl ChartRead + ?Sized), st: &CfgState) -> Result<bool> {
        if st.accepting {
            return Ok(true);
        }
        if self.lexing == Lexing::Longest {
            for (o, group) in branches(self, &st.frontier) {
                if self.guards_end(&group) {
                    continue;
                }
                let (lexemes, width, _) = self.longest_ends(&group, None);
                let ended: Vec<(u32, u32)> = lexemes.iter().map(|&l| (l, o)).collect();
                if !ended.is_empty() && self.accepts_after(chart, st.sets, &ended, width)? {
                    return Ok(true);
                }
            }
            return Ok(false);
        }
        let ended = self.greedy_done(&st.frontier);
        if ended.is_empty() {
            return Ok(false);
        }
        self.accepts_after(chart, st.sets, &ended, 0)
    }

    /// Whether the text is complete once lexemes `ended` end (as set `cur`).
    fn accepts_after(
        &self,
        chart: &(impl ChartRead + ?Sized),
        cur: u32,
        ended: &[(u32, u32)],
        width: u32,
    ) -> Result<bool> {
        let c = self.complete_lexemes(chart, cur, ended, width)?;
        let dedents = match &self.indenter {
            Some(ind) if !c.set.items.is_empty() => ind.at_end(c.set.layout()),
            _ => Vec::new(),
        };
        if dedents.is_empty() {
            return Ok(c.accepting);
        }
        // The indenter closes every open level at the end of the text.
        let mut made = c.before;
        made.push(c.set);
        let view = Extended {
            base: chart,
            len: cur,
            ext: &made,
        };
        let newest = cur + made.len() as u32 - 1;
        Ok(self
            .read_tokens(&view, newest + 1, newest, &dedents, Layout::default())?
            .accepting)
    }
}

/// The lexemes a byte ends, with their origins: `after` it (all-splits
/// lexemes accepting after it) and `before` it (greedy lexemes it kills).
#[derive(Debug, Default)]
pub struct Ends {
    pub after: Vec<(u32, u32)>,
    pub before: Vec<(u32, u32)>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfg::{gbnf, lower::lower};

    fn accepts(src: &str, text: &str) -> (bool, bool) {
        let cfg = lower(&gbnf::parse(src).unwrap()).unwrap();
        let mut chart = Chart::new();
        let st = cfg.initial(&mut chart).unwrap();
        match cfg.advance_bytes(&mut chart, &st, text.as_bytes()).unwrap() {
            Some(s) => (true, s.accepting),
            None => (false, false),
        }
    }

    fn accepts_lark(src: &str, text: &str) -> (bool, bool) {
        let cfg = lower(&crate::cfg::lark::parse(src).unwrap()).unwrap();
        let mut chart = Chart::new();
        let st = cfg.initial(&mut chart).unwrap();
        match cfg.advance_bytes(&mut chart, &st, text.as_bytes()).unwrap() {
            Some(s) => (true, s.accepting),
            None => (false, false),
        }
    }

    /// A `%json` block's lexemes are alone: they rank against nothing, so
    /// two alternatives that end on the same byte both go on (Lark's ranks
    /// would keep one), and the grammar's `%ignore` stays out of the block.
    #[test]
    fn json_blocks_lex_apart_from_the_grammar() {
        let g = r#"start: "<" %json {"anyOf": [
            {"type": "array", "prefixItems": [{"const": "x"}, {"type": "integer"}], "items": false},
            {"type": "array", "prefixItems": [{"type": "string"}, {"type": "string"}], "items": false}
        ]} ">"
        %ignore " ""#;
        assert_eq!(accepts_lark(g, r#"<["x",1]>"#), (true, true));
        assert_eq!(accepts_lark(g, r#"<["x","y"]>"#), (true, true));
        assert!(!accepts_lark(g, r#"<["y",1]>"#).0);
        // JSON's own whitespace inside, the grammar's after the block only.
        assert_eq!(accepts_lark(g, r#"<[ "x" , 1 ] >"#), (true, true));
        assert!(!accepts_lark(g, r#"< ["x",1]>"#).0);
    }

    #[test]
    fn recursion_ambiguity_and_empty_rules() {
        let g = "root ::= e\ne ::= e \"+\" e | \"(\" e \")\" | [0-9]+ | n\nn ::= | \"x\"";
        assert_eq!(accepts(g, "1+(2+3)+4"), (true, true));
        assert_eq!(accepts(g, "1+(2+"), (true, false));
        assert_eq!(accepts(g, "1+)"), (false, false));
        assert_eq!(accepts(g, ""), (true, true)); // e -> n -> ε
        assert_eq!(accepts(g, "+x+"), (true, true)); // ε + x + ε
        assert_eq!(accepts(g, "x)"), (false, false));
    }

    #[test]
    fn lexemes_end_at_every_accepting_point() {
        // [a-z]+ must be able to stop before "b" (character-level semantics).
        let g = "root ::= [a-z]+ \"b\"";
        assert_eq!(accepts(g, "aab"), (true, true));
        assert_eq!(accepts(g, "abb"), (true, true));
        assert_eq!(accepts(g, "aa"), (true, false));
        let g = "root ::= ( [x]* )*";
        assert_eq!(accepts(g, ""), (true, true));
        assert_eq!(accepts(g, "xxx"), (true, true));
        assert_eq!(accepts(g, "y"), (false, false));
    }

    #[test]
    fn member_sets_take_each_member_once_in_any_order() {
        use crate::cfg::ast::{GrammarAst, Lexing, Members, Node, Pos, RuleDef};
        let lit = |s: &str| Node::Literal(s.into());
        let member = |k: &str| Node::seq(vec![lit(k), Node::Ref("v".into(), Pos::default())]);
        let members = Members {
            // a and c required, b optional; extra members are "x" + value.
            listed: vec![
                (member("a"), true),
                (member("b"), false),
                (member("c"), true),
            ],
            extra: Some((member("x"), Node::seq(vec![lit(","), member("x")]))),
            open: Node::Empty,
            sep: lit(","),
            close: lit("}"),
            close_empty: lit("}"),
            min: 0,
            max: None,
            dependent: vec![],
            twins: vec![],
            any_of: vec![],
            ordered: false,
        };
        let build = |members: Members| {
            let ast = GrammarAst {
                rules: vec![
                    RuleDef {
                        name: "root".into(),
                        body: Node::seq(vec![lit("{"), Node::Members(Box::new(members))]),
                        pos: Pos::default(),
                    },
                    RuleDef {
                        name: "v".into(),
                        body: Node::alt(vec![lit("1"), Node::Ref("root".into(), Pos::default())]),
                        pos: Pos::default(),
                    },
                ],
                terminals: vec![],
                ignore: vec![],
                start: "root".into(),
                lexing: Lexing::AllSplits,
                indenter: None,
                blocks: Vec::new(),
                initial_skip: true,
            };
            lower(&ast).unwrap()
        };
        let runner = |cfg: Cfg| {
            move |text: &str| {
                let mut chart = Chart::new();
                let st = cfg.initial(&mut chart).unwrap();
                match cfg.advance_bytes(&mut chart, &st, text.as_bytes()).unwrap() {
                    Some(s) => (true, s.accepting),
                    None => (false, false),
                }
            }
        };
        let run = runner(build(members.clone()));
        for ok in [
            "{a1,c1}",
            "{c1,a1}",
            "{c1,b1,a1}",
            "{x1,a1,x1,c1}",
            "{a{a1,c1},c1}",
        ] {
            assert_eq!(run(ok), (true, true), "{ok}");
        }
        assert_eq!(run("{a1,b1"), (true, false));
        assert_eq!(run("{a1,b1}"), (false, false)); // c is still required
        assert_eq!(run("{a1,a1"), (false, false)); // a twice
        assert_eq!(run("{c1,b1,b"), (false, false));
        assert_eq!(run("{}"), (false, false));
        assert_eq!(run("{a1,c1,a"), (false, false));

        // A witness: a member whose value is 2, a twin of a or b, or y.
        let witness = |k: &str| Node::seq(vec![lit(k), lit("2")]);
        let mut members = members;
        members.listed.extend([
            (witness("a"), false),
            (witness("b"), false),
            (witness("y"), false),
        ]);
        members.twins = vec![(0, 3), (1, 4)];
        members.any_of = vec![3, 4, 5];
        let run = runner(build(members));
        for ok in ["{a2,c1}", "{c1,b2,a1}", "{a1,c1,y2}", "{x1,y2,c1,a2,b1}"] {
            assert_eq!(run(ok), (true, true), "{ok}");
        }
        assert_eq!(run("{a1,c1"), (true, false)); // no witness yet
        assert_eq!(run("{a1,c1}"), (false, false));
        assert_eq!(run("{c1,b2"), (true, false)); // a is still required
        assert_eq!(run("{a2,a1"), (false, false)); // a twice
        assert_eq!(run("{a1,a2"), (false, false));
        assert_eq!(run("{b1,c1,b2"), (false, false));
    }

    #[test]
    fn multibyte_and_repetition_counts() {
        let g = "root ::= (\"0x\" [A-F0-9]{2} \" \"?){3,5}";
        assert!(accepts(g, "0xFF 0x12 0xAB").1);
        assert!(!accepts(g, "0xFF 0x12").1);
        assert!(!accepts(g, "0xFF 0x12 0xAB 0x00 0x00 0x00").0);
        let g = "root ::= \"中\" . \"文\"";
        assert_eq!(accepts(g, "中😀文"), (true, true));
        assert!(accepts(g, "中\u{1F600}").0);
    }
}
