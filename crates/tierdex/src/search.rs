//! The public search entry point (stub; the API is fixed).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::query::ast;
use crate::schema::{DocId, Document};

/// What a search returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// The k best hits.
    #[default]
    TopK,
    /// The k best hits and the exact number of matches.
    TopKAndCount,
    /// Only the exact number of matches.
    Count,
}

/// One result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    /// Document number in the whole index (segment base + local number).
    pub doc: DocId,
    /// BM25 score.
    pub score: f32,
}

/// The answer to one query.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SearchResults {
    /// Best hits, by descending score then ascending doc number.
    pub hits: Vec<Hit>,
    /// Exact number of matching documents (modes with a count).
    pub count: Option<u64>,
}

/// An open index, ready to answer queries from any number of threads.
pub struct Searcher {
    _private: (),
}

impl Searcher {
    /// Opens the index in `dir`.
    pub fn open(dir: &Path) -> Result<Searcher> {
        let _ = dir;
        Err(Error::InvalidArgument("search not implemented yet".into()))
    }

    /// Parses and runs `query`.
    pub fn search(&self, query: &str, mode: Mode, k: usize) -> Result<SearchResults> {
        let q = crate::query::parse(query)?;
        self.search_parsed(&q, mode, k)
    }

    /// Runs an already parsed query.
    pub fn search_parsed(&self, query: &ast::Query, mode: Mode, k: usize) -> Result<SearchResults> {
        let _ = (query, mode, k);
        Err(Error::InvalidArgument("search not implemented yet".into()))
    }

    /// The stored document `doc` (a number from [`Hit::doc`]).
    pub fn doc(&self, doc: DocId) -> Result<Document> {
        let _ = doc;
        Err(Error::InvalidArgument("search not implemented yet".into()))
    }

    /// Number of documents in the index.
    pub fn num_docs(&self) -> u64 {
        0
    }
}
