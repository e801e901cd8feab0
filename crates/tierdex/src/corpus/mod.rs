//! Corpus readers and the seeded synthetic corpus generator.
//!
//! * [`Corpus`] streams [`Document`](crate::schema::Document)s out of JSON
//!   lines files (plain, zstd or gzip compressed) and directories of plain
//!   text files, reporting bad records with their file and line.
//! * [`gen`] builds a deterministic synthetic corpus with realistic
//!   statistics (Zipf word frequencies, log-normal lengths, recurring
//!   phrases): the embedded default corpus for demos, tests and benchmarks.

pub mod gen;
mod read;

use std::path::PathBuf;

pub use read::{Corpus, ReadOptions};

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
