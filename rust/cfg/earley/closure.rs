//! The Earley closure: from the items a scan or a completion starts with,
//! predict and complete until nothing changes (Aycock-Horspool nullable
//! handling, member-set guards), bounded by `MAX_CLOSURE_WORK`; the set it
//! makes, and the lexemes that set's items wait for (with the `%ignore`d
//! lexemes of the right lexer context).

use rustc_hash::FxHashSet as HashSet;
use std::sync::OnceLock;

use super::chart::{ChartRead, EarleySet, Item, Scan, INDEXED_ITEMS, TERMINAL_KEY};
use super::{MAX_CLOSURE_WORK, MAX_ITEMS_PER_SET};
use crate::cfg::ast::Lexing;
use crate::cfg::lowered::{Cfg, Sym};
use crate::error::{Error, Result};

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

/// The nonterminals a closure has predicted, with their member sets.
#[derive(Default)]
struct Predicted {
    /// Scanned while short (a JSON set predicts a handful).
    few: Vec<(u32, crate::cfg::members::MemberSet)>,
    many: Option<HashSet<(u32, crate::cfg::members::MemberSet)>>,
}

impl Predicted {
    /// Records `(b, members)`; whether it is new.
    #[inline]
    fn first(&mut self, b: u32, members: crate::cfg::members::MemberSet) -> bool {
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
pub(super) struct ItemList {
    pub(super) items: Vec<Item>,
    /// Every item of `items`, once there are more than `SCANNED_ITEMS`.
    table: Option<HashSet<Item>>,
}

impl ItemList {
    pub(super) fn new() -> Self {
        ItemList {
            items: Vec::new(),
            table: None,
        }
    }

    /// `items`, which must be distinct.
    pub(super) fn of(items: Vec<Item>) -> Self {
        let table = (items.len() > SCANNED_ITEMS).then(|| items.iter().copied().collect());
        ItemList { items, table }
    }

    pub(super) fn contains(&self, x: &Item) -> bool {
        match &self.table {
            Some(t) => t.contains(x),
            None => self.items.contains(x),
        }
    }

    /// Adds `x` unless it is there already.
    pub(super) fn insert(&mut self, x: Item) {
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
    pub(super) fn next_sym(&self, it: &Item) -> Option<Sym> {
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
    pub(super) fn ignored_from(&self, set: &EarleySet, o: u32, l: u32) -> bool {
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
}
