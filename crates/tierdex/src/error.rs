//! The library's error type, and whose fault each error is.
//!
//! Every [`Error`] has an [`ErrorKind`]: bad input from the caller, a thing
//! that does not exist, a conflict with another writer or state, a corrupt
//! index file, an operating-system I/O error, a service that cannot take
//! the request now, an internal fault, or a deadline. Servers map kinds to
//! status codes (400, 404, 409, 500, 503, 504); command-line tools to
//! messages. Nothing else needs to look inside the variants.

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
    Corpus(#[from] CorpusError),
    /// A query could not be parsed or planned.
    #[error(transparent)]
    Query(#[from] QueryError),
    /// An argument, option or input is invalid (the caller's fault).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// What was asked for does not exist (an index, a document).
    #[error("not found: {0}")]
    NotFound(String),
    /// The request conflicts with the state of the index or with another
    /// writer (a held lock, an index already there).
    #[error("conflict: {0}")]
    Conflict(String),
    /// The request cannot be served now but may succeed later (a writer
    /// stopped by an earlier failure).
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// A broken invariant inside tierdex: a bug, never the caller's fault.
    #[error("internal error: {0}")]
    Internal(String),
    /// A query ran past its deadline and was stopped (milliseconds it ran).
    #[error("query stopped at its deadline after {0} ms")]
    TimedOut(u64),
}

/// Whose fault an [`Error`] is, and so how a service should answer it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The caller sent something invalid: a bad query, option or document.
    BadInput,
    /// The index, document or file asked for does not exist.
    NotFound,
    /// Conflicts with the index's state or another writer; retry later or
    /// resolve the conflict.
    Conflict,
    /// An index file is damaged (checksums, structure).
    Corrupt,
    /// The operating system failed an I/O operation (full disk, permissions,
    /// too many open files).
    Io,
    /// Temporarily unable to serve; the same request may succeed later.
    Unavailable,
    /// A bug in tierdex.
    Internal,
    /// The request ran past its deadline.
    TimedOut,
}

impl Error {
    /// Whether this is a file system out of space (or of quota).
    pub fn is_disk_full(&self) -> bool {
        matches!(self, Error::Io { source, .. }
            if matches!(source.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)))
    }

    /// Whose fault this error is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Io { .. } => ErrorKind::Io,
            Error::Corrupt { .. } => ErrorKind::Corrupt,
            Error::Corpus(CorpusError::BadRecord { .. }) => ErrorKind::BadInput,
            Error::Corpus(CorpusError::Io { source, .. } | CorpusError::Write { source, .. }) => match source.kind() {
                std::io::ErrorKind::NotFound => ErrorKind::NotFound,
                _ => ErrorKind::Io,
            },
            Error::Query(_) | Error::InvalidArgument(_) => ErrorKind::BadInput,
            Error::NotFound(_) => ErrorKind::NotFound,
            Error::Conflict(_) => ErrorKind::Conflict,
            Error::Unavailable(_) => ErrorKind::Unavailable,
            Error::Internal(_) => ErrorKind::Internal,
            Error::TimedOut(_) => ErrorKind::TimedOut,
        }
    }

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

/// A corpus that cannot be read (or written, for the generator).
#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    /// A record that is not a valid document, with its location.
    #[error("{path}:{line}: {message}")]
    BadRecord {
        /// The input file.
        path: PathBuf,
        /// 1-based line number (or 0 when not line-based).
        line: u64,
        /// What is wrong.
        message: String,
    },
    /// An I/O error on an input.
    #[error("I/O error reading {path}: {source}")]
    Io {
        /// The input file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// An I/O error while writing an output file (the corpus generator).
    #[error("I/O error writing {path}: {source}")]
    Write {
        /// The output file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl CorpusError {
    /// The file the error is about.
    pub fn path(&self) -> &std::path::Path {
        match self {
            CorpusError::BadRecord { path, .. } | CorpusError::Io { path, .. } | CorpusError::Write { path, .. } => {
                path
            }
        }
    }
}

/// A query that cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// Malformed syntax at a byte position of the query text.
    #[error("query syntax error at position {position}: {message}")]
    Syntax {
        /// Byte offset in the query text where the problem was found.
        position: usize,
        /// What is wrong.
        message: String,
    },
    /// A `field:` prefix naming a field that does not exist.
    #[error("unknown field `{field}` at position {position} (known fields: {})", known.join(", "))]
    UnknownField {
        /// The unknown field name.
        field: String,
        /// Byte offset of the field name.
        position: usize,
        /// The fields the index has.
        known: Vec<String>,
    },
    /// Query syntax that tierdex recognises but does not implement
    /// (wildcards, fuzzy and proximity `~`, boosts, ranges, regular
    /// expressions...): refused rather than read as plain words.
    #[error("unsupported query syntax at position {position}: {operator} is not supported")]
    Unsupported {
        /// Byte offset of the operator's first character.
        position: usize,
        /// The operator, named for people (``wildcard `*` ``).
        operator: String,
    },
    /// The query is over one of its size limits (`QueryLimits`).
    #[error("query too large at position {position}: {message}")]
    TooLarge {
        /// Byte offset where the limit was passed.
        position: usize,
        /// Which limit, and by how much.
        message: String,
    },
}

impl QueryError {
    /// Byte offset in the query text where the error was found.
    pub fn position(&self) -> usize {
        match self {
            QueryError::Syntax { position, .. }
            | QueryError::UnknownField { position, .. }
            | QueryError::Unsupported { position, .. }
            | QueryError::TooLarge { position, .. } => *position,
        }
    }

    /// What is wrong, without the position.
    pub fn message(&self) -> String {
        match self {
            QueryError::Syntax { message, .. } | QueryError::TooLarge { message, .. } => message.clone(),
            QueryError::Unsupported { operator, .. } => format!("{operator} is not supported"),
            QueryError::UnknownField { field, known, .. } => {
                format!("unknown field `{field}` (known fields: {})", known.join(", "))
            }
        }
    }
}
