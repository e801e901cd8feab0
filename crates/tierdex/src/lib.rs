//! tierdex: a full-text search engine built for DRAM, persistent memory and
//! flash tiers, on the principle of *read as needed*.
//!
//! # Using it
//!
//! Build an index from documents, then search it:
//!
//! ```
//! use tierdex::{build_index, Document, IndexOptions, Mode, Searcher};
//!
//! let dir = tempfile::tempdir()?;
//! let docs = vec![
//!     Document::title_body("1", "Rust", "A language empowering everyone to build reliable software"),
//!     Document::title_body("2", "Flash", "Storage that reads fast in small random pieces"),
//! ];
//! build_index(docs.into_iter().map(Ok), dir.path(), &IndexOptions::default())?;
//!
//! let searcher = Searcher::open(dir.path())?;
//! let results = searcher.search("reliable software", Mode::TopKAndCount, 10)?;
//! assert_eq!(results.count, Some(1));
//! assert_eq!(searcher.doc(results.hits[0].doc)?.id, "1");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Or keep an index up to date while searching it, with fields of your own
//! ([`Schema`]) and any [`Strategy`] of maintenance:
//!
//! ```
//! use tierdex::{AnalyzerConfig, Document, Format, IndexWriter, Mode, Schema, Strategy, WriterOptions};
//!
//! let dir = tempfile::tempdir()?;
//! let schema = Schema::text_fields(&["name", "description"], false)?;
//! let writer = IndexWriter::create_with_schema(
//!     dir.path(),
//!     schema,
//!     AnalyzerConfig::default(),
//!     Format::default(),
//!     Strategy::default(),
//!     WriterOptions::default(),
//! )?;
//! writer.add(vec![
//!     Document::new("p1").with_text("name", "red kettle").with_text("description", "boils water fast"),
//!     Document::new("p2").with_text("name", "teapot").with_text("description", "a kettle for tea"),
//! ])?;
//! let searcher = writer.refresh()?;
//! assert_eq!(searcher.search("kettle", Mode::Count, 0)?.count, Some(2));
//! assert_eq!(searcher.search("name:kettle", Mode::Count, 0)?.count, Some(1));
//! writer.delete(vec!["p1".into()])?;
//! assert_eq!(writer.refresh()?.search("kettle", Mode::Count, 0)?.count, Some(1));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The public surface is re-exported here: documents and schemas
//! ([`Document`], [`Schema`]), building ([`build_index`]) and writing
//! ([`IndexWriter`]), searching ([`Searcher`], [`query::parse`] and
//! [`query::ast`] for queries built in code), results ([`SearchResults`],
//! [`Hit`], [`Highlight`]), options ([`IndexOptions`], [`OpenOptions`],
//! [`TierOptions`]) and errors ([`Error`], [`ErrorKind`]). The `examples/`
//! directory of the crate has complete programs.
//!
//! # How it is built
//!
//! The modules follow the data path (DESIGN §1), in layers that only point
//! down (`tests/layers.rs` checks it):
//!
//! ```text
//! common, error -> analysis, codec -> storage -> schema, corpus -> bloom, termdict, layout
//!   -> store -> index -> indexing -> query -> aggs -> search -> cache -> update -> snapshot
//! ```
//!
//! * [`corpus`]: readers for JSON lines, plain-text directories, and the seeded
//!   synthetic corpus generator.
//! * [`analysis`]: tokenizer (UAX#29 words), lowercasing, stop words, stemming.
//! * [`schema`]: fields, their types, documents.
//! * [`storage`]: checksummed index files and the tiers they are read from.
//! * [`index`]: manifest, segments, global statistics; opening an index.
//! * [`indexing`]: in-memory inversion of documents into segments, the
//!   multi-threaded builder and the segment merger.
//! * [`query`]: parser, planner, weights and scorers (term, boolean,
//!   phrase), top-k and count algorithms, BM25, highlighting.
//! * [`aggs`]: aggregations (Elasticsearch's `aggs`) over a query's matches,
//!   as partial results per segment that merge.
//! * [`search`]: the reading entry point, [`Searcher`].
//! * [`cache`]: the result cache.
//! * [`update`]: the write-ahead log and the writer.
//! * [`snapshot`]: snapshot repositories: copies of indices taken while
//!   writes go on, and their restore.
//!
//! The insides (integer codecs, postings layouts and cursors, the term
//! dictionary, the document store, phrase Bloom filters) are private; the
//! `internals` feature makes them public for the workspace's own tests,
//! benchmarks and tools.

/// Declares a module of the engine's insides: private to the crate, and
/// public only with the `internals` feature, which the workspace's tests,
/// benchmarks and tools turn on (what they reach there is not a stable API).
/// Without it, items that only those use are unused here: hence the allow.
macro_rules! internal {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[cfg(feature = "internals")]
        pub mod $name;
        $(#[$m])*
        #[cfg(not(feature = "internals"))]
        #[allow(dead_code, unused_imports)]
        pub(crate) mod $name;
    };
}

pub mod aggs;
pub mod analysis;
internal!(bloom);
pub mod cache;
internal!(codec);
internal!(column);
internal!(common);
pub mod corpus;
pub mod error;
pub mod index;
pub mod indexing;
internal!(layout);
pub mod query;
pub mod schema;
pub mod search;
pub mod snapshot;
pub mod storage;
internal!(store);
internal!(termdict);
pub mod update;

pub use analysis::AnalyzerConfig;
pub use bloom::{BloomParams, FilterUse};
pub use error::{Error, ErrorKind, Result};
pub use index::{Index, OpenOptions};
pub use indexing::{build_index, BuildStats, IndexOptions};
pub use layout::{Codec, Format, Layout};
pub use schema::{DocId, Document, Field, FieldEntry, FieldType, Schema, TextOptions};
pub use search::{Highlight, Hit, Mode, SearchResults, Searcher};
pub use storage::{Madvise, Tier, TierOptions};
pub use update::{IndexWriter, Strategy, WriterOptions};
