//! The index writer: additions and deletions while queries run (DESIGN §5).
//!
//! * [`IndexWriter::apply`] writes a batch to the write-ahead log, applies it
//!   to the in-memory buffer and returns once the log is synced: an
//!   acknowledged batch survives a crash. Concurrent callers share syncs.
//!   An added document whose id already exists replaces the old one.
//! * [`IndexWriter::refresh`] makes everything applied so far searchable:
//!   the documents added since the last refresh become a small segment held
//!   in memory (the `ram` tier), tombstones are materialised, and a new
//!   [`Searcher`] snapshot is published. Searches on older snapshots go on
//!   undisturbed.
//! * When the buffer reaches its budget (documents or bytes), or on
//!   [`IndexWriter::flush`], its live documents are written as a new durable
//!   segment, tombstones are written, the configured [`Strategy`] merges the
//!   newest segments, and the manifest (naming the last log record it holds)
//!   is replaced atomically; then the log is trimmed.
//! * [`IndexWriter::compact`] rewrites every segment holding deleted
//!   documents without them; after a flush, so does a segment whose deleted
//!   documents reach [`WriterOptions::compact_deleted_ratio`].
//! * A failed flush or compaction (a full disk, too many open files) does
//!   not stop the writer: what it wrote is removed, and when it had changed
//!   the writer's state, that state is rebuilt from the index and the log
//!   ([`recovery`]); automatic flushes retry with a growing delay.
//!
//! A crash at any point leaves the last manifest and the log: reopening
//! removes files no manifest names and replays the log records after the
//! manifest's, so no acknowledged change is lost. One writer per index
//! directory (a file lock).
//!
//! The writer's concerns, one file each: [`buffer`] (applying batches),
//! [`refresh`], [`flush`], [`compact`], [`inplace`] (flushes of the
//! in-place strategies), [`commit`] (the manifest, the lock file, removal of
//! orphaned files), [`recovery`] (opening after a crash) and [`maintainer`]
//! (the background thread); [`state`] holds what they share.

mod buffer;
mod commit;
mod compact;
mod flush;
mod inplace;
mod maintainer;
mod recovery;
mod refresh;
mod state;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Instant;

use serde::Serialize;

use crate::analysis::AnalyzerConfig;
use crate::error::{Error, Result};
use crate::index::manifest::{Manifest, SegmentMeta, CHAIN_EXT, MANIFEST};
use crate::index::segment::{ext, open_chain};
use crate::index::{deletes::DeletesMeta, Deletes, Index, SegmentReader, SegmentView};
use crate::indexing::merge::{merge_live, merge_part_documents, MergeOptions};
use crate::indexing::{segment_name, SegmentWriter};
use crate::layout::Format;
use crate::schema::{Analysis, DocId, Document, Schema};
use crate::search::Searcher;
use crate::storage::{Storage, Tier, TierOptions};
use crate::store::StoreOptions;
use crate::update::inplace::{Absorbed, ChainWriter};
use crate::update::wal::{Op, Status, Ticket, Wal};
use crate::update::Strategy;

use buffer::*;
use commit::*;
use flush::*;
pub use maintainer::Maintainer;
use refresh::*;
use state::*;

pub use crate::index::lock::LOCK_FILE;

/// How a writer buffers.
#[derive(Debug, Clone, Copy)]
pub struct WriterOptions {
    /// Flush once the buffer holds this many live documents; also the flush
    /// unit of the merge strategies.
    pub buffer_docs: usize,
    /// Flush once the buffered documents hold this many bytes of text.
    pub buffer_bytes: usize,
    /// How durable segments are read.
    pub tier: TierOptions,
    /// In-memory refresh segments kept before a refresh rebuilds them into
    /// one (each search visits every segment, so many tiny ones cost).
    pub max_refresh_segments: usize,
    /// In-place strategies: terms of at most this many bytes are packed
    /// into merged runs instead of updated in place
    /// ([`crate::layout::chain::PACK_MAX`] by default; 0 packs none).
    pub pack_max: u64,
    /// Flush once the log records applied since the last flush hold this
    /// many bytes, replaced and deleted documents included (`None`: twice
    /// `buffer_bytes`). Bounds the log, and the buffer, when the same
    /// documents are replaced over and over.
    pub max_log_bytes: Option<usize>,
    /// After a flush, a segment (or an in-place index's chain) whose deleted
    /// documents reach this fraction of its documents is compacted
    /// (rewritten without them). 1.0 or more turns automatic compaction off.
    pub compact_deleted_ratio: f64,
    /// Open even when the log holds a damaged record, cutting the log there
    /// (the damaged batch and every later one are lost, and said so in the
    /// log). Without it such a log is an error naming the record.
    pub truncate_corrupt_log: bool,
    /// Threads a merge of durable segments may use (0: one per core). A
    /// merge run by the background maintainer runs at its lower CPU
    /// priority, threads included, so searches keep their share.
    pub merge_threads: usize,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            buffer_docs: 10_000,
            buffer_bytes: 64 << 20,
            tier: TierOptions::default(),
            max_refresh_segments: 8,
            pack_max: crate::layout::chain::PACK_MAX,
            max_log_bytes: None,
            compact_deleted_ratio: 0.5,
            truncate_corrupt_log: false,
            merge_threads: 0,
        }
    }
}

impl WriterOptions {
    /// The threads of a merge ([`WriterOptions::merge_threads`], 0 resolved).
    pub fn merge_threads(&self) -> usize {
        match self.merge_threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        }
    }

    /// Bytes of applied log records that make a flush due.
    pub fn log_budget(&self) -> usize {
        self.max_log_bytes.unwrap_or(self.buffer_bytes.saturating_mul(2))
    }

    fn check(&self) -> Result<()> {
        if self.buffer_docs == 0 || self.buffer_bytes == 0 || self.log_budget() == 0 {
            return Err(Error::InvalidArgument(
                "the buffer and log budgets must be positive".into(),
            ));
        }
        if self.compact_deleted_ratio.is_nan() || self.compact_deleted_ratio <= 0.0 {
            return Err(Error::InvalidArgument(format!(
                "compact_deleted_ratio must be above 0 (1.0 turns automatic compaction off), not {}",
                self.compact_deleted_ratio
            )));
        }
        Ok(())
    }
}

/// What one [`IndexWriter::apply`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Applied {
    /// Log sequence number of the batch.
    pub seq: u64,
    /// Documents added (replacements included).
    pub added: u64,
    /// Of those, documents that replaced one with the same id.
    pub replaced: u64,
    /// Deletions that found their document.
    pub deleted: u64,
    /// Deletions of ids not in the index.
    pub not_found: u64,
}

/// What a flush or compaction did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FlushReport {
    /// Buffered documents written as a new segment.
    pub docs_flushed: u64,
    /// Segments merged into one (0 without a merge).
    pub segments_merged: usize,
    /// Segments rewritten without their deleted documents (compaction).
    pub segments_compacted: usize,
    /// Bytes of index files written.
    pub bytes_written: u64,
    /// Bytes of segments read by merges.
    pub bytes_merged: u64,
    /// Segments after the flush.
    pub segments: usize,
    /// Wall time.
    pub secs: f64,
    /// Of which writing the flushed documents as a segment (inverting,
    /// storing, encoding their postings): the part every strategy pays; the
    /// rest is the strategy's own (merges, or appending to the chain).
    pub segment_secs: f64,
}

/// Counters of an open writer.
#[derive(Debug, Clone, Default, Serialize)]
pub struct WriterStats {
    /// Live documents in the buffer (not yet in a durable segment).
    pub buffered_docs: u64,
    /// Durable segments.
    pub segments: usize,
    /// Refreshes that published a new snapshot.
    pub refreshes: u64,
    /// Seconds spent refreshing (in-memory segments, tombstones, snapshots).
    pub refresh_secs: f64,
    /// In-memory refresh segments now.
    pub refresh_segments: usize,
    /// Documents inverted by refreshes.
    pub refresh_docs_inverted: u64,
    /// Seconds of [`WriterStats::refresh_secs`] spent inverting documents
    /// and merging refresh segments.
    pub refresh_invert_secs: f64,
    /// Documents copied by merges of refresh segments (postings merged,
    /// not analysed again).
    pub refresh_docs_merged: u64,
    /// Seconds of [`WriterStats::refresh_invert_secs`] spent merging.
    pub refresh_merge_secs: f64,
    /// Seconds of [`WriterStats::refresh_secs`] spent applying deletions to
    /// tombstones.
    pub refresh_delete_secs: f64,
    /// Flushes so far.
    pub flushes: u64,
    /// Last log record applied (to the buffer or the segments).
    pub last_seq: u64,
    /// Last log record held by the durable segments.
    pub flushed_seq: u64,
    /// Everything the flushes and compactions since open did, summed.
    pub maintenance: FlushReport,
}

/// A writer on one index directory.
///
/// # Locks
///
/// Taken in this order, never the reverse (a thread holding one may take a
/// later one only): `maintenance`, then `state`, then `chain`, then
/// `current`, then `published`. The log ([`Wal`]) has locks of its own,
/// taken with or without `state` held, never holding one of the writer's.
/// `maintained` is a flag, read without any lock.
pub struct IndexWriter {
    /// Where refresh segments are written (see [`buffer_dir`]).
    buffer_dir: PathBuf,
    /// A background maintainer runs: `apply` leaves flushes to it until the
    /// buffer is twice over budget.
    maintained: std::sync::atomic::AtomicBool,
    dir: PathBuf,
    options: WriterOptions,
    wal: Wal,
    /// Held by refreshes, flushes and compactions for their whole run, so
    /// that a flush can release `state` while it writes segments. First in
    /// the lock order.
    maintenance: Mutex<()>,
    /// The segments, the buffer and where each document is. Second.
    state: Mutex<State>,
    /// The latest published snapshot. Fourth (after `chain`).
    current: RwLock<Arc<Searcher>>,
    /// The counters as of the last release of `state` (written as the state
    /// guard drops): read without waiting for a flush that holds the state.
    /// Last.
    published: Mutex<WriterStats>,
    /// The index's strategy (fixed at creation).
    strategy: Strategy,
    /// The chain of an in-place index (created by its first flush). Third.
    chain: Mutex<Option<ChainWriter>>,
    _lock: File,
}

impl IndexWriter {
    /// Creates a new, empty index of the default schema (`title` and
    /// `body`) in `dir` (which must not hold one) and opens a writer on it.
    pub fn create(
        dir: &Path,
        analyzer: AnalyzerConfig,
        format: Format,
        strategy: Strategy,
        options: WriterOptions,
    ) -> Result<IndexWriter> {
        Self::create_with_schema(dir, Schema::default(), analyzer, format, strategy, options)
    }

    /// Creates a new, empty index of `schema` in `dir` (which must not hold
    /// one) and opens a writer on it.
    pub fn create_with_schema(
        dir: &Path,
        schema: Schema,
        analyzer: AnalyzerConfig,
        format: Format,
        strategy: Strategy,
        options: WriterOptions,
    ) -> Result<IndexWriter> {
        format.bloom_shape()?;
        if strategy.in_place() && format.layout != crate::layout::Layout::Grouped {
            return Err(Error::InvalidArgument(format!(
                "the {strategy} strategy keeps each term's postings as grouped regions: use the grouped layout"
            )));
        }
        crate::storage::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let lock = lock_dir(dir)?;
        if dir.join(MANIFEST).exists() {
            return Err(Error::Conflict(format!("{} already holds an index", dir.display())));
        }
        let stray = std::fs::read_dir(dir)
            .map_err(|e| Error::io(dir, e))?
            .filter_map(|e| e.ok())
            .any(|e| e.file_name() != LOCK_FILE);
        if stray {
            return Err(Error::Conflict(format!(
                "{} is not empty and holds no tierdex index; refusing to write into it",
                dir.display()
            )));
        }
        let mut m = Manifest::with_schema(schema, analyzer, format);
        m.strategy = strategy;
        m.store(dir)?;
        drop(lock);
        Self::open(dir, options)
    }

    fn lock(&self) -> StateGuard<'_> {
        StateGuard {
            state: self.state.lock().unwrap_or_else(|p| p.into_inner()),
            published: &self.published,
        }
    }

    /// The state, rebuilt first if a failure left it broken (taking the
    /// maintenance lock for that, so the caller must not hold it).
    fn lock_ready(&self) -> Result<StateGuard<'_>> {
        let st = self.lock();
        if st.broken.is_none() {
            return Ok(st);
        }
        drop(st);
        let _maintenance = self.maintenance.lock().unwrap_or_else(|p| p.into_inner());
        let mut st = self.lock();
        self.recover_locked(&mut st)?;
        Ok(st)
    }

    /// The index directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The strategy the index was created with.
    pub fn strategy(&self) -> Strategy {
        self.strategy
    }

    /// The index's fields now (dynamic mapping adds fields as documents
    /// come).
    pub fn schema(&self) -> Schema {
        self.lock().manifest.schema()
    }

    /// The latest published snapshot.
    pub fn searcher(&self) -> Arc<Searcher> {
        self.current.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Adds (or replaces, by id) documents; see [`IndexWriter::apply`].
    pub fn add(&self, docs: Vec<Document>) -> Result<Applied> {
        self.apply(docs.into_iter().map(Op::Add).collect())
    }

    /// Deletes documents by id; see [`IndexWriter::apply`].
    pub fn delete(&self, ids: Vec<String>) -> Result<Applied> {
        self.apply(ids.into_iter().map(Op::Delete).collect())
    }

    /// Counters.
    pub fn stats(&self) -> WriterStats {
        self.published.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// True if a live document (buffered ones included) has this id.
    pub fn contains(&self, id: &str) -> bool {
        self.lock().ids.contains_key(id)
    }

    /// The live document with id `id`, buffered ones included (a get sees
    /// every acknowledged write, refreshed or not).
    pub fn get(&self, id: &str) -> Result<Option<Document>> {
        let st = self.lock();
        match st.ids.get(id) {
            None => Ok(None),
            Some(Loc::Buffer(slot)) => Ok(st.buffer.get(*slot as usize).cloned().flatten()),
            Some(&Loc::Durable { seg, local }) => {
                let part =
                    st.durable.iter().find(|p| p.number == seg).ok_or_else(|| {
                        Error::Internal(format!("document {id:?} is in segment {seg}, which is gone"))
                    })?;
                let reader = Arc::clone(&part.reader);
                drop(st);
                reader.document(local).map(Some)
            }
        }
    }

    /// The position in an external log of the last applied batch carrying
    /// an [`Op::Mark`] (0: none): durable, as every applied batch is.
    pub fn source_seq(&self) -> u64 {
        self.lock().mark
    }

    /// Live documents (buffered ones included).
    pub fn live_docs(&self) -> u64 {
        let st = self.lock();
        st.ids.len() as u64
    }
}

impl Drop for IndexWriter {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.buffer_dir);
    }
}
