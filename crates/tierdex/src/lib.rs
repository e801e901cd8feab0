//! tierdex: a full-text search engine built for DRAM, persistent memory and
//! flash tiers, on the principle of *read as needed*.
//!
//! The modules follow the data path (DESIGN §1):
//!
//! ```text
//! corpus -> analysis -> indexing -> codec + layout -> storage
//! query text -> query::parser -> query::planner -> query cursors/algorithms -> store -> results
//! ```
//!
//! * [`corpus`]: readers for JSON lines, plain-text directories, and the seeded
//!   synthetic corpus generator.
//! * [`analysis`]: tokenizer (UAX#29 words), lowercasing, stop words, stemming.
//! * [`indexing`]: in-memory inversion of documents into segments, the
//!   multi-threaded builder and the segment merger.
//! * [`codec`]: integer codecs (bit-packed FOR-delta blocks, VByte).
//! * [`layout`]: how one term's postings are laid out on storage (grouped),
//!   skip data and block-max impacts; the posting cursor that reads them.
//! * [`termdict`]: the FST term dictionary and per-term metadata.
//! * [`store`]: the per-document compressed document store.
//! * [`storage`]: checksummed index files and the tiers they are read from.
//! * [`index`]: manifest, segments, global statistics; opening an index.
//! * [`query`]: parser, planner, scorers (term, boolean, phrase), top-k and
//!   count algorithms, BM25, highlighting.
//! * [`search`]: the public entry point, [`search::Searcher`].

pub mod analysis;
pub mod bloom;
pub mod cache;
pub mod codec;
pub mod common;
pub mod corpus;
pub mod error;
pub mod index;
pub mod indexing;
pub mod layout;
pub mod query;
pub mod schema;
pub mod search;
pub mod storage;
pub mod store;
pub mod termdict;
pub mod update;

pub use error::{Error, ErrorKind, Result};
pub use schema::{DocId, Document, Field};
