//! The library's error type.

use std::path::PathBuf;

/// Result alias used throughout the library.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in tierdex, with enough context to act on it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An operating-system I/O error, with the file it concerns.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// File or directory the operation was about.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// An index file failed a structural or checksum check.
    #[error("corrupt index file {path}: {reason}")]
    Corrupt {
        /// The damaged file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A corpus could not be read (bad JSON, bad UTF-8, ...).
    #[error(transparent)]
    Corpus(#[from] crate::corpus::CorpusError),
    /// A query could not be parsed or planned.
    #[error(transparent)]
    Query(#[from] crate::query::QueryError),
    /// An argument or option is invalid.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A query ran past its deadline and was stopped (milliseconds it ran).
    #[error("query stopped at its deadline after {0} ms")]
    TimedOut(u64),
}

impl Error {
    /// Wraps an [`std::io::Error`] with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// A corruption error for `path`.
    pub fn corrupt(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Error::Corrupt {
            path: path.into(),
            reason: reason.into(),
        }
    }
}
