//! Corpus readers and the synthetic corpus generator (stub).

use std::path::PathBuf;

/// A corpus that cannot be read.
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
}
