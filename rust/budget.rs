//! The compile work budget: one count of steps for everything a compile does.
//!
//! Size bounds alone do not bound time: `((a{1,100}){1,100}){1,100}` never
//! builds a large automaton, yet determinizing it copy by copy visits
//! billions of (copy, state) pairs, and a 50,000-rule chain is small but a
//! naive fixpoint over it is quadratic. So every loop whose trip count an
//! input can drive (determinization, products, counted repetitions,
//! minimization, lowering, fixpoints, schema merges) *charges* the steps it
//! is about to take against one budget, and a compile that runs out stops
//! with `Error::LimitExceeded` naming the bound.
//!
//! Steps are units of work (a transition computed, a symbol lowered, a pair
//! compared, a byte allocated), not time, so whether a compile fits does
//! not depend on the machine or its load. A step is about a nanosecond of
//! one core's work: measured on MaskBench compiles on a 2-core cloud
//! machine, CPU time per step lies between 1 and 2.5 ns whether a compile
//! is automaton work (determinization, products) or JSON work (merges,
//! `$ref` copies, memo keys, which the allocator charges: `Charged`). The
//! default, `DEFAULT_COMPILE_STEPS` (10^9), is so about a second of work,
//! where hostile input stops. Real schemas fit but for the heaviest few:
//! of a 400-file MaskBench sample the largest took 6 * 10^8 steps, and of
//! the dev files two take more (`o3895` 1.1 * 10^9, `allany14` 1.5 * 10^9,
//! 1.2 to 2.6 s of CPU here). A caller may tighten it (a server that wants
//! 100 ms compiles passes 10^8) or loosen it (trusted, heavier schemas).
//!
//! The budget is per thread: a compile runs on the thread that called it
//! (the Python layer releases the GIL but does not hand work to other
//! threads), and `with_budget` installs the budget for that call. Nested
//! installs keep the outermost one, so a compile that calls another (a
//! schema's `pattern` compiled as a regex) draws on the same count. Code run
//! outside any compile (mask fills, tests of one module) is not charged.

use std::cell::Cell;

use crate::error::{Error, Result};

/// Steps a compile may take unless its caller says otherwise.
pub const DEFAULT_COMPILE_STEPS: u64 = 1_000_000_000;

/// Steps for one automaton transition computed through a hash map (subset
/// and product constructions, copying regex-automata's table): about 10 ns
/// each on a 2-core cloud machine, so a step is about a nanosecond's work.
pub const HASHED_TRANSITION: usize = 12;
/// Steps for one transition read or written in a table pass (pruning,
/// minimizing, joining tables).
pub const TABLE_TRANSITION: usize = 2;

thread_local! {
    /// (steps left, the limit) of the compile running on this thread.
    static BUDGET: Cell<Option<(u64, u64)>> = const { Cell::new(None) };
}

/// Runs `f` with a budget of `limit` steps on this thread, unless a budget
/// is installed already (then `f` draws on that one).
pub fn with_budget<T>(limit: u64, f: impl FnOnce() -> Result<T>) -> Result<T> {
    if BUDGET.with(Cell::get).is_some() {
        return f();
    }
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            BUDGET.with(|b| b.set(None));
        }
    }
    BUDGET.with(|b| b.set(Some((limit, limit))));
    let _reset = Reset; // also on unwind, so a caught panic leaves no budget behind
    f()
}

/// Takes `steps` from the running compile's budget; past it, an error
/// naming the bound. Free outside a compile.
#[inline]
pub fn charge(steps: u64) -> Result<()> {
    BUDGET.with(|b| match b.get() {
        None => Ok(()),
        Some((left, limit)) if left >= steps => {
            b.set(Some((left - steps, limit)));
            Ok(())
        }
        Some((_, limit)) => {
            b.set(Some((0, limit)));
            Err(exhausted(limit))
        }
    })
}

/// `charge` for counts held in `usize`.
#[inline]
pub fn charge_n(steps: usize) -> Result<()> {
    charge(u64::try_from(steps).unwrap_or(u64::MAX))
}

/// Takes `steps` where the work cannot stop with an error (a pass whose
/// result type has no room for one): past the budget it leaves nothing, and
/// the compile's next `charge` or its closing `check` reports it.
pub fn charge_later(steps: usize) {
    BUDGET.with(|b| {
        if let Some((left, limit)) = b.get() {
            let steps = u64::try_from(steps).unwrap_or(u64::MAX);
            b.set(Some((left.saturating_sub(steps), limit)));
        }
    })
}

/// Steps per allocation made during a compile (`Charged`): a malloc and
/// its free, about 20 ns on a 2-core cloud machine.
pub const ALLOCATION_STEPS: u64 = 20;
/// Bytes allocated during a compile per step (zeroing fresh pages and
/// filling them, about a quarter of a nanosecond a byte).
pub const BYTES_PER_STEP: u64 = 4;

/// `charge_later` for an allocation of `bytes`, from the global allocator:
/// no allocation, no panic (a thread being torn down has no budget).
#[inline]
pub fn charge_allocation(bytes: usize) {
    let _ = BUDGET.try_with(|b| {
        if let Some((left, limit)) = b.get() {
            let steps = ALLOCATION_STEPS + bytes as u64 / BYTES_PER_STEP;
            b.set(Some((left.saturating_sub(steps), limit)));
        }
    });
}

/// A global allocator that charges what a compile allocates to its budget
/// (`charge_allocation`) and leaves the work to `A`. Outside a compile it
/// costs one thread-local read per allocation.
pub struct Charged<A>(pub A);

// SAFETY: every call is passed on to `A` unchanged; the charge touches only
// a `Cell` in a const-initialized thread local (it neither allocates nor
// unwinds).
unsafe impl<A: std::alloc::GlobalAlloc> std::alloc::GlobalAlloc for Charged<A> {
    #[inline]
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        charge_allocation(layout.size());
        unsafe { self.0.alloc(layout) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        charge_allocation(layout.size());
        unsafe { self.0.alloc_zeroed(layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        charge_allocation(new_size);
        unsafe { self.0.realloc(ptr, layout, new_size) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        unsafe { self.0.dealloc(ptr, layout) }
    }
}

/// An error if the running compile has used up its budget (see
/// `charge_later`).
pub fn check() -> Result<()> {
    match BUDGET.with(Cell::get) {
        Some((0, limit)) => Err(exhausted(limit)),
        _ => Ok(()),
    }
}

fn exhausted(limit: u64) -> Error {
    Error::LimitExceeded(format!(
        "compiling this grammar takes more than {limit} steps of work \
         (the compile work budget; see max_compile_steps)"
    ))
}

/// The steps the running compile has left (None outside one).
pub fn remaining() -> Option<u64> {
    BUDGET.with(|b| b.get().map(|(left, _)| left))
}

/// The error for a compile out of budget, for work measured in other units
/// (bytes of a determinized automaton) that ran out of its share.
pub fn exhausted_error() -> Error {
    let limit = BUDGET.with(|b| b.get().map_or(0, |(_, limit)| limit));
    BUDGET.with(|b| b.set(b.get().map(|(_, limit)| (0, limit))));
    exhausted(limit)
}

/// The steps taken so far by the running compile (None outside one).
pub fn used() -> Option<u64> {
    BUDGET.with(|b| b.get().map(|(left, limit)| limit - left))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_stop_at_the_limit_and_name_it() {
        let r = with_budget(10, || {
            charge(4)?;
            charge(6)?;
            assert_eq!(used(), Some(10));
            charge(1)
        });
        let Err(Error::LimitExceeded(msg)) = r else {
            panic!("expected the budget to run out, got {r:?}");
        };
        assert!(msg.contains("10 steps"), "{msg}");
        assert_eq!(used(), None, "the budget is removed after the compile");
    }

    #[test]
    fn nested_compiles_draw_on_the_outer_budget() {
        let r = with_budget(10, || {
            charge(8)?;
            with_budget(1_000, || charge(5))
        });
        assert!(matches!(r, Err(Error::LimitExceeded(_))));
    }

    #[test]
    fn allocations_inside_a_compile_are_charged() {
        use std::alloc::{GlobalAlloc, Layout, System};
        let charged = Charged(System);
        let layout = Layout::from_size_align(4096, 8).unwrap();
        let used_by_one = with_budget(1 << 40, || {
            // SAFETY: a non-zero layout, freed with the same layout.
            unsafe { charged.dealloc(charged.alloc(layout), layout) };
            Ok(used().unwrap())
        })
        .unwrap();
        assert_eq!(used_by_one, ALLOCATION_STEPS + 4096 / BYTES_PER_STEP);
        let r = with_budget(10, || {
            // SAFETY: as above.
            unsafe { charged.dealloc(charged.alloc(layout), layout) };
            check()
        });
        assert!(matches!(r, Err(Error::LimitExceeded(_))));
    }

    #[test]
    fn charges_outside_a_compile_are_free() {
        assert!(charge(u64::MAX).is_ok());
        assert!(check().is_ok());
    }

    #[test]
    fn a_panic_inside_a_compile_removes_its_budget() {
        let r = std::panic::catch_unwind(|| {
            with_budget(10, || -> Result<()> { panic!("boom") }).ok();
        });
        assert!(r.is_err());
        assert_eq!(used(), None);
    }
}
