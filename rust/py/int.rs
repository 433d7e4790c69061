//! Integer arguments.
//!
//! pyo3 raises OverflowError when a Python int does not fit the Rust integer
//! a parameter is declared as (`i64`, `u32`, `usize`). maskpar's contract is
//! ValueError for bad content and TypeError for bad types, so every integer
//! parameter, alone or in a sequence, is an [`Int`]: the Python int saturated
//! to the i64 range. Every maskpar integer has a valid range well inside i64
//! (token ids in `[0, vocab_size)`, rows `>= 0`, `num_threads` in
//! `[1, MAX_THREADS]`, ...), so a saturated value is refused by the same range
//! check as any other out-of-range value, with a ValueError naming the
//! argument and its range (the message shows the i64 bound the value was
//! read as, e.g. 9223372036854775807 for 2**64). A value that is not an int (no `__index__`: a str,
//! a float, None) still raises pyo3's TypeError.

use pyo3::exceptions::{PyOverflowError, PyValueError};
use pyo3::prelude::*;
use pyo3::{intern, Borrowed};

/// A Python int (or anything with `__index__`), saturated to `[i64::MIN, i64::MAX]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub struct Int(pub i64);

impl<'py> FromPyObject<'_, 'py> for Int {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        let py = obj.py();
        match obj.extract::<i64>() {
            Ok(v) => Ok(Int(v)),
            // Only an int (after `__index__`) can overflow, so its sign is
            // well defined; `operator.index` gives it for any such object.
            Err(e) if e.is_instance_of::<PyOverflowError>(py) => {
                let index = py
                    .import(intern!(py, "operator"))?
                    .getattr(intern!(py, "index"))?
                    .call1((obj,))?;
                let negative = index.lt(0i64)?;
                Ok(Int(if negative { i64::MIN } else { i64::MAX }))
            }
            Err(e) => Err(e),
        }
    }
}

impl Int {
    /// The value as a `usize` when it is `>= 0`; otherwise ValueError
    /// "`what` must be >= 0, got N".
    pub fn non_negative(self, what: &str) -> PyResult<usize> {
        self.non_negative_named(|| what.to_string())
    }

    /// `non_negative` with the name made only for the error (a fill reads a
    /// row per request: formatting each name cost a warm one-row fill 3%,
    /// 2.61 -> 2.53 us).
    pub fn non_negative_named(self, what: impl FnOnce() -> String) -> PyResult<usize> {
        usize::try_from(self.0)
            .map_err(|_| PyValueError::new_err(format!("{} must be >= 0, got {}", what(), self.0)))
    }
}

/// The values of a sequence of `Int`s (collected in place: `Int` is an i64).
pub fn values(ints: Vec<Int>) -> Vec<i64> {
    ints.into_iter().map(|i| i.0).collect()
}
