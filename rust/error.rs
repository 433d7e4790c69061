//! One error type for the core; the Python layer maps each kind to an exception class.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// A caller passed a value that is out of range or inconsistent (ValueError).
    InvalidArgument(String),
    /// A pattern or grammar could not be compiled (ValueError, with the reason).
    Compile(String),
    /// A configured bound was exceeded (ValueError naming the bound).
    LimitExceeded(String),
    /// An allocation sized by the input failed (MemoryError): the process
    /// goes on, only this call fails.
    OutOfMemory(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidArgument(m)
            | Error::Compile(m)
            | Error::LimitExceeded(m)
            | Error::OutOfMemory(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// Shorthand for `Err(Error::InvalidArgument(format!(...)))`.
#[macro_export]
macro_rules! invalid {
    ($($arg:tt)*) => {
        Err($crate::error::Error::InvalidArgument(format!($($arg)*)))
    };
}
