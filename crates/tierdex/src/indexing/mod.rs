//! Indexing: documents to immutable segments (stub; the API is fixed).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::analysis::AnalyzerConfig;
use crate::corpus::CorpusError;
use crate::error::{Error, Result};
use crate::schema::Document;

/// How to build an index.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IndexOptions {
    /// Analyzer options (stored in the manifest; queries use the same).
    pub analyzer: AnalyzerConfig,
    /// Maximum documents per segment written by the builder.
    pub segment_docs: usize,
    /// Indexing threads (0 = all cores).
    pub threads: usize,
    /// Force-merge into a single segment at the end.
    pub merge: bool,
}

impl Default for IndexOptions {
    fn default() -> Self {
        IndexOptions {
            analyzer: AnalyzerConfig::default(),
            segment_docs: 100_000,
            threads: 0,
            merge: false,
        }
    }
}

/// What a build did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BuildStats {
    /// Documents indexed.
    pub docs: u64,
    /// Bad records skipped (with `skip_bad`).
    pub skipped: u64,
    /// Segments in the finished index.
    pub segments: usize,
    /// Total bytes of index files.
    pub index_bytes: u64,
}

/// Builds a new index in `dir` from `docs`.
pub fn build_index<I>(docs: I, dir: &Path, opts: &IndexOptions) -> Result<BuildStats>
where
    I: IntoIterator<Item = std::result::Result<Document, CorpusError>>,
{
    let _ = (docs.into_iter(), dir, opts);
    Err(Error::InvalidArgument("indexing not implemented yet".into()))
}
