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

pub use read::{Corpus, ReadOptions, MAX_RECORD_BYTES};

pub use crate::error::CorpusError;
