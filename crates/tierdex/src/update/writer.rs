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
//!   documents without them.
//!
//! A crash at any point leaves the last manifest and the log: reopening
//! removes files no manifest names and replays the log records after the
//! manifest's, so no acknowledged change is lost. One writer per index
//! directory (a file lock).

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Instant;

use serde::Serialize;

use crate::analysis::AnalyzerConfig;
use crate::error::{Error, Result};
use crate::index::manifest::{Manifest, SegmentMeta, MANIFEST};
use crate::index::segment::{ext, open_chain};
use crate::index::{deletes::DeletesMeta, Deletes, Index, SegmentReader, SegmentView};
use crate::indexing::merge::merge_live;
use crate::indexing::{segment_name, SegmentWriter};
use crate::layout::Format;
use crate::schema::{Analysis, DocId, Document, Schema};
use crate::search::Searcher;
use crate::storage::{Storage, Tier, TierOptions};
use crate::store::StoreOptions;
use crate::update::inplace::{Absorbed, ChainWriter};
use crate::update::wal::{Op, Wal};
use crate::update::Strategy;

/// Name of the lock file that keeps a second writer out.
pub const LOCK_FILE: &str = "write.lock";
/// Directory of the buffer's refresh segments in the index directory, when
/// no memory file system is available (they are read into memory and their
/// files removed at once either way).
const BUFFER_DIR: &str = ".buffer";

/// Removes the buffer directories of writers whose process is gone (killed
/// before its writer was dropped).
fn remove_stale_buffers(shm: &Path) {
    let Ok(entries) = std::fs::read_dir(shm) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("tierdex-buffer-"))
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Where refresh segments are written on their way into memory: a private
/// directory on `/dev/shm` when there is one (no disk writes, no syncs, no
/// journal commits competing with the log's), else `dir/.buffer`.
fn buffer_dir(dir: &Path) -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        remove_stale_buffers(shm);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let private = shm.join(format!("tierdex-buffer-{}-{nanos:x}", std::process::id()));
        if std::fs::create_dir(&private).is_ok() {
            return private;
        }
    }
    dir.join(BUFFER_DIR)
}

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
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            buffer_docs: 10_000,
            buffer_bytes: 64 << 20,
            tier: TierOptions::default(),
            max_refresh_segments: 8,
            pack_max: crate::layout::chain::PACK_MAX,
        }
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

/// Where a live document is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Loc {
    /// In durable segment number `seg`, local number `local`.
    Durable { seg: u64, local: u32 },
    /// At this index of the buffer.
    Buffer(u32),
}

/// A segment with its tombstones and the deletions not yet materialised.
struct Part {
    /// Segment number (durable) or refresh number.
    number: u64,
    reader: Arc<SegmentReader>,
    deletes: Option<Arc<Deletes>>,
    pending: Vec<u32>,
    /// Tombstones changed since they were last written (durable parts).
    deletes_dirty: bool,
    /// Buffer indices of the documents (refresh parts), ascending.
    slots: Vec<u32>,
}

impl Part {
    fn new(number: u64, reader: SegmentReader, deletes: Option<Deletes>) -> Part {
        Part {
            number,
            reader: Arc::new(reader),
            deletes: deletes.map(Arc::new),
            pending: Vec::new(),
            deletes_dirty: false,
            slots: Vec::new(),
        }
    }

    fn live(&self) -> u64 {
        (self.reader.max_doc() - self.deletes.as_ref().map_or(0, |d| d.count())) as u64
    }

    fn materialise(&mut self, analysis: &Analysis) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let base = match &self.deletes {
            Some(d) => d.with(&self.reader, analysis, &self.pending)?,
            None => Deletes::none(self.reader.max_doc()).with(&self.reader, analysis, &self.pending)?,
        };
        self.deletes = Some(Arc::new(base));
        self.pending.clear();
        self.deletes_dirty = true;
        Ok(())
    }

    fn view(&self) -> SegmentView {
        SegmentView {
            reader: self.reader.clone(),
            deletes: self.deletes.clone(),
        }
    }
}

struct State {
    manifest: Manifest,
    analysis: Arc<Analysis>,
    storage: Storage,
    memory: Storage,
    durable: Vec<Part>,
    /// Documents applied since the last flush; `None` once deleted.
    buffer: Vec<Option<Document>>,
    buffer_live: usize,
    buffer_bytes: usize,
    /// Refresh segments over `buffer[..refreshed]`.
    refreshed_parts: Vec<Part>,
    refreshed: usize,
    next_refresh: u64,
    ids: HashMap<String, Loc>,
    last_seq: u64,
    /// Applied changes not yet visible to searches.
    dirty: bool,
    /// A flush failed half way: the in-memory state cannot be trusted.
    failed: Option<String>,
    /// A flush is writing segments without holding the state: `apply` must
    /// not start another one.
    flushing: bool,
    /// Snapshots replaced by newer ones, kept until no search holds them so
    /// that they are freed here (by the writer's thread) rather than by the
    /// query worker that happens to finish last with them: freeing a large
    /// merged-away segment read into memory takes milliseconds.
    retired: Vec<Arc<Searcher>>,
    stats: WriterStats,
}

/// The writer's state, locked; releasing it publishes the counters.
struct StateGuard<'a> {
    state: MutexGuard<'a, State>,
    published: &'a Mutex<WriterStats>,
}

impl std::ops::Deref for StateGuard<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.state
    }
}

impl std::ops::DerefMut for StateGuard<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.state
    }
}

impl Drop for StateGuard<'_> {
    fn drop(&mut self) {
        let stats = WriterStats {
            buffered_docs: self.state.buffer_live as u64,
            ..self.state.stats.clone()
        };
        *self.published.lock().unwrap_or_else(|p| p.into_inner()) = stats;
    }
}

/// A writer on one index directory.
pub struct IndexWriter {
    /// Where refresh segments are written (see [`buffer_dir`]).
    buffer_dir: PathBuf,
    /// A background maintainer runs: `apply` leaves flushes to it until the
    /// buffer is twice over budget.
    maintained: std::sync::atomic::AtomicBool,
    dir: PathBuf,
    options: WriterOptions,
    wal: Wal,
    state: Mutex<State>,
    /// Held by refreshes, flushes and compactions for their whole run, so
    /// that a flush can release `state` while it writes segments.
    maintenance: Mutex<()>,
    current: RwLock<Arc<Searcher>>,
    /// The counters as of the last release of `state`: read without waiting
    /// for a flush that holds the state.
    published: Mutex<WriterStats>,
    /// The index's strategy (fixed at creation).
    strategy: Strategy,
    /// The index's fields: added documents must fit them.
    schema: Schema,
    /// The chain of an in-place index (created by its first flush).
    chain: Mutex<Option<ChainWriter>>,
    _lock: File,
}

fn lock_dir(dir: &Path) -> Result<File> {
    let path = dir.join(LOCK_FILE);
    let f = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| Error::io(&path, e))?;
    match f.try_lock() {
        Ok(()) => Ok(f),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::Conflict(format!(
            "{} is open for writing by another process (a server or another command); stop it first",
            dir.display()
        ))),
        Err(std::fs::TryLockError::Error(e)) => Err(Error::io(&path, e)),
    }
}

/// Segment number of a segment name written by this crate (`seg000042`).
fn segment_number(dir: &Path, name: &str) -> Result<u64> {
    name.strip_prefix("seg")
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| Error::corrupt(dir.join(MANIFEST), format!("unexpected segment name `{name}`")))
}

/// Removes files of `dir` that the manifest does not name, and the buffer
/// directory: at open (`at_open`), what a crash during a flush left; after
/// a commit, the files the commit stopped referring to (merged segments,
/// an in-place part's postings).
fn remove_orphans(dir: &Path, manifest: &Manifest, at_open: bool) -> Result<()> {
    let mut keep: std::collections::HashSet<String> = std::collections::HashSet::new();
    for s in &manifest.segments {
        keep.extend(s.all_file_names());
    }
    for e in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let e = e.map_err(|e| Error::io(dir, e))?;
        let name = e.file_name().to_string_lossy().into_owned();
        let orphan = (name.starts_with("seg") && !keep.contains(&name)) || name == format!("{MANIFEST}.tmp");
        if orphan && e.path().is_file() {
            match at_open {
                true => tracing::info!("removing {name}, left by an interrupted flush"),
                false => tracing::debug!("removing {name}, no longer referenced"),
            }
            std::fs::remove_file(e.path()).map_err(|err| Error::io(e.path(), err))?;
        }
    }
    let buffer = dir.join(BUFFER_DIR);
    if buffer.exists() {
        std::fs::remove_dir_all(&buffer).map_err(|e| Error::io(&buffer, e))?;
    }
    Ok(())
}

fn text_bytes(d: &Document) -> usize {
    d.text_bytes()
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
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
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

    /// Opens a writer on the index in `dir`: cleans up after a crash,
    /// replays the log and makes the replayed changes searchable.
    pub fn open(dir: &Path, options: WriterOptions) -> Result<IndexWriter> {
        if options.buffer_docs == 0 || options.buffer_bytes == 0 {
            return Err(Error::InvalidArgument("the buffer budget must be positive".into()));
        }
        let lock = lock_dir(dir)?;
        let manifest = Manifest::load(dir)?;
        remove_orphans(dir, &manifest, true)?;
        let storage = Storage::new(options.tier)?;
        let memory = Storage::new(TierOptions::on(Tier::Ram))?;
        let analysis = Arc::new(Analysis::new(manifest.schema(), manifest.analyzer));
        let mut durable = Vec::with_capacity(manifest.segments.len());
        let mut ids = HashMap::new();
        let mut id = String::new();
        let mut chain_writer = None;
        for meta in &manifest.segments {
            let number = segment_number(dir, &meta.name)?;
            let reader = match meta.chain {
                Some(_) => {
                    let chain = open_chain(dir, meta, true)?;
                    let reader = SegmentReader::open_chained(
                        dir,
                        meta,
                        manifest.postings_format(),
                        &storage,
                        chain.clone(),
                        None,
                    )?;
                    chain_writer = Some(ChainWriter::open(dir, meta, chain)?.packing(options.pack_max));
                    reader
                }
                None => SegmentReader::open(dir, meta, manifest.postings_format(), &storage)?,
            };
            let deletes = Deletes::load(dir, meta, &reader, &analysis, &storage)?;
            for d in 0..reader.max_doc() {
                if deletes.as_ref().is_some_and(|x| x.contains(d)) {
                    continue;
                }
                reader.external_id(d, &mut id)?;
                ids.insert(id.clone(), Loc::Durable { seg: number, local: d });
            }
            durable.push(Part::new(number, reader, deletes));
        }
        let (wal, replay) = Wal::open(dir, manifest.applied_seq)?;
        if replay.torn_bytes > 0 {
            tracing::warn!(
                "dropped {} bytes of an unacknowledged, torn log tail",
                replay.torn_bytes
            );
        }
        let applied = manifest.applied_seq;
        let st = State {
            stats: WriterStats {
                segments: durable.len(),
                last_seq: applied,
                flushed_seq: applied,
                ..Default::default()
            },
            manifest,
            analysis,
            storage,
            memory,
            durable,
            buffer: Vec::new(),
            buffer_live: 0,
            buffer_bytes: 0,
            refreshed_parts: Vec::new(),
            refreshed: 0,
            next_refresh: 0,
            ids,
            last_seq: applied,
            dirty: true,
            failed: None,
            flushing: false,
            retired: Vec::new(),
        };
        let searcher = Arc::new(Searcher::from_index(snapshot(dir, &st)?));
        let strategy = st.manifest.strategy;
        let schema = st.manifest.schema();
        let w = IndexWriter {
            schema,
            buffer_dir: buffer_dir(dir),
            maintained: std::sync::atomic::AtomicBool::new(false),
            dir: dir.to_path_buf(),
            options,
            wal,
            state: Mutex::new(st),
            maintenance: Mutex::new(()),
            current: RwLock::new(searcher),
            published: Mutex::new(WriterStats::default()),
            strategy,
            chain: Mutex::new(chain_writer),
            _lock: lock,
        };
        {
            let mut st = w.lock();
            let mut replayed = 0;
            for (seq, ops) in replay.batches {
                if seq <= applied {
                    continue;
                }
                w.apply_locked(&mut st, seq, ops)?;
                replayed += 1;
                // A long log must not replay into an unbounded buffer.
                if w.over_budget(&st, 1) {
                    w.flush_locked(&mut st, false)?;
                }
            }
            if replayed > 0 {
                tracing::info!("replayed {replayed} logged batches");
            }
            w.refresh_locked(&mut st)?;
        }
        Ok(w)
    }

    fn lock(&self) -> StateGuard<'_> {
        StateGuard {
            state: self.state.lock().unwrap_or_else(|p| p.into_inner()),
            published: &self.published,
        }
    }

    fn usable(st: &State) -> Result<()> {
        match &st.failed {
            Some(why) => Err(Error::Unavailable(format!(
                "the writer stopped after an error ({why}); reopen the index to recover"
            ))),
            None => Ok(()),
        }
    }

    /// The index directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The strategy the index was created with.
    pub fn strategy(&self) -> Strategy {
        self.strategy
    }

    /// The index's fields.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The latest published snapshot.
    pub fn searcher(&self) -> Arc<Searcher> {
        self.current.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Applies a batch: logged, applied to the buffer, and durable when this
    /// returns (visible to searches after the next refresh). Flushes when the
    /// buffer is over its budget.
    pub fn apply(&self, ops: Vec<Op>) -> Result<Applied> {
        for op in &ops {
            if let Op::Add(d) = op {
                if d.id.is_empty() {
                    return Err(Error::InvalidArgument("a document to add has an empty id".into()));
                }
                self.schema.check(d)?;
                if d.fields
                    .values()
                    .any(|v| v.as_str().is_some_and(|t| t.len() >= u32::MAX as usize))
                {
                    return Err(Error::InvalidArgument(format!(
                        "document `{}` is larger than 4 GiB",
                        d.id
                    )));
                }
            }
        }
        let (applied, seq) = {
            let mut st = self.lock();
            Self::usable(&st)?;
            let seq = self.wal.write(&ops)?;
            let applied = self.apply_locked(&mut st, seq, ops)?;
            let slack = if self.maintained.load(std::sync::atomic::Ordering::Relaxed) {
                2
            } else {
                1
            };
            if self.over_budget(&st, slack) && !st.flushing {
                self.flush_locked(&mut st, false)?;
            }
            (applied, seq)
        };
        self.wal.sync(seq)?;
        Ok(applied)
    }

    fn over_budget(&self, st: &State, times: usize) -> bool {
        st.buffer_live >= self.options.buffer_docs.saturating_mul(times)
            || st.buffer_bytes >= self.options.buffer_bytes.saturating_mul(times)
    }

    /// Starts a background thread, at a lower CPU priority than the threads
    /// that search, that refreshes every `interval` and flushes once the
    /// buffer is over its budget (so that flushes and merges neither block
    /// the writes that fill the buffer nor take CPU from searches). It stops
    /// when the returned handle is dropped.
    pub fn maintain(self: &Arc<Self>, interval: std::time::Duration) -> Maintainer {
        self.maintained.store(true, std::sync::atomic::Ordering::Relaxed);
        let stop = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
        let (w, s) = (self.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("tierdex-maintain".into())
            .spawn(move || {
                crate::update::priority::lower_this_thread(MAINTENANCE_NICE);
                loop {
                    let (lock, cv) = &*s;
                    let stopped = lock.lock().unwrap_or_else(|p| p.into_inner());
                    let (stopped, _) = cv
                        .wait_timeout_while(stopped, interval, |stop| !*stop)
                        .unwrap_or_else(|p| p.into_inner());
                    if *stopped {
                        break;
                    }
                    drop(stopped);
                    let result = (|| {
                        let due = {
                            let st = w.lock();
                            w.over_budget(&st, 1)
                        };
                        if due {
                            w.flush()?;
                        }
                        w.refresh().map(|_| ())
                    })();
                    if let Err(e) = result {
                        tracing::error!("background maintenance failed: {e}");
                    }
                }
                w.maintained.store(false, std::sync::atomic::Ordering::Relaxed);
            })
            .expect("spawning the maintenance thread");
        Maintainer {
            stop,
            thread: Some(thread),
        }
    }

    /// Adds (or replaces, by id) documents; see [`IndexWriter::apply`].
    pub fn add(&self, docs: Vec<Document>) -> Result<Applied> {
        self.apply(docs.into_iter().map(Op::Add).collect())
    }

    /// Deletes documents by id; see [`IndexWriter::apply`].
    pub fn delete(&self, ids: Vec<String>) -> Result<Applied> {
        self.apply(ids.into_iter().map(Op::Delete).collect())
    }

    fn apply_locked(&self, st: &mut State, seq: u64, ops: Vec<Op>) -> Result<Applied> {
        let mut a = Applied {
            seq,
            ..Default::default()
        };
        for op in ops {
            match op {
                Op::Add(doc) => {
                    if let Some(old) = st.ids.remove(&doc.id) {
                        Self::delete_at(st, old);
                        a.replaced += 1;
                    }
                    let slot = st.buffer.len() as u32;
                    st.ids.insert(doc.id.clone(), Loc::Buffer(slot));
                    st.buffer_bytes += text_bytes(&doc);
                    st.buffer.push(Some(doc));
                    st.buffer_live += 1;
                    a.added += 1;
                }
                Op::Delete(id) => match st.ids.remove(&id) {
                    Some(old) => {
                        Self::delete_at(st, old);
                        a.deleted += 1;
                    }
                    None => a.not_found += 1,
                },
            }
        }
        st.last_seq = seq;
        st.stats.last_seq = seq;
        st.dirty |= a.added > 0 || a.deleted > 0;
        Ok(a)
    }

    fn delete_at(st: &mut State, loc: Loc) {
        match loc {
            Loc::Durable { seg, local } => {
                if let Some(p) = st.durable.iter_mut().find(|p| p.number == seg) {
                    p.pending.push(local);
                }
            }
            Loc::Buffer(slot) => {
                if let Some(d) = st.buffer[slot as usize].take() {
                    st.buffer_live -= 1;
                    st.buffer_bytes -= text_bytes(&d);
                }
                if (slot as usize) < st.refreshed {
                    for p in &mut st.refreshed_parts {
                        if let Ok(local) = p.slots.binary_search(&slot) {
                            p.pending.push(local as u32);
                        }
                    }
                }
            }
        }
    }

    /// Makes every applied change searchable and returns the new snapshot
    /// (the current one when nothing changed).
    pub fn refresh(&self) -> Result<Arc<Searcher>> {
        let _maintenance = self.maintenance.lock().unwrap_or_else(|p| p.into_inner());
        let mut st = self.lock();
        Self::usable(&st)?;
        self.refresh_locked(&mut st)?;
        Ok(self.searcher())
    }

    fn refresh_locked(&self, st: &mut State) -> Result<()> {
        st.retired.retain(|s| Arc::strong_count(s) > 1);
        if !st.dirty {
            return Ok(());
        }
        let started = Instant::now();
        if st.refreshed < st.buffer.len() {
            let slots: Vec<u32> = (st.refreshed..st.buffer.len())
                .filter(|&i| st.buffer[i].is_some())
                .map(|i| i as u32)
                .collect();
            if !slots.is_empty() {
                let part = self.write_refresh_part(st, slots)?;
                st.refreshed_parts.push(part);
            }
            st.refreshed = st.buffer.len();
            // The refresh segments merge by size like the geometric strategy
            // (each buffered document is copied O(log n) times), and all of
            // them once there are more than `max_refresh_segments`.
            let sizes: Vec<u64> = st.refreshed_parts.iter().map(Part::live).collect();
            let mut k = Strategy::Geometric.merge_count(&sizes, 1);
            if sizes.len() + 1 - k.max(1) > self.options.max_refresh_segments.max(1) {
                k = sizes.len();
            }
            if k > 1 {
                let at = st.refreshed_parts.len() - k;
                let part = self.merge_refresh_parts(st, at)?;
                st.refreshed_parts.truncate(at);
                if let Some(part) = part {
                    st.refreshed_parts.push(part);
                }
            }
        }
        let inverted = started.elapsed().as_secs_f64();
        let State {
            durable,
            refreshed_parts,
            analysis,
            ..
        } = st;
        for p in durable.iter_mut().chain(refreshed_parts.iter_mut()) {
            p.materialise(analysis)?;
        }
        st.stats.refresh_invert_secs += inverted;
        st.stats.refresh_delete_secs += started.elapsed().as_secs_f64() - inverted;
        let searcher = Arc::new(Searcher::from_index(snapshot(&self.dir, st)?));
        let old = std::mem::replace(&mut *self.current.write().unwrap_or_else(|p| p.into_inner()), searcher);
        st.retired.push(old);
        st.dirty = false;
        st.stats.refreshes += 1;
        st.stats.refresh_secs += started.elapsed().as_secs_f64();
        st.stats.refresh_segments = st.refreshed_parts.len();
        Ok(())
    }

    /// Merges the refresh segments `refreshed_parts[at..]` (their postings,
    /// not their documents: nothing is analysed again) without their deleted
    /// documents into one segment read from memory; `None` when none of
    /// their documents is live.
    fn merge_refresh_parts(&self, st: &mut State, at: usize) -> Result<Option<Part>> {
        let State {
            refreshed_parts,
            analysis,
            ..
        } = st;
        let parts = &mut refreshed_parts[at..];
        for p in parts.iter_mut() {
            p.materialise(analysis)?;
        }
        let mut slots = Vec::with_capacity(parts.iter().map(|p| p.live() as usize).sum());
        for p in parts.iter() {
            let del = p.deletes.as_deref();
            slots.extend(
                p.slots
                    .iter()
                    .enumerate()
                    .filter(|&(d, _)| !del.is_some_and(|x| x.contains(d as DocId)))
                    .map(|(_, &s)| s),
            );
        }
        if slots.is_empty() {
            return Ok(None);
        }
        let started = Instant::now();
        let number = st.next_refresh;
        st.next_refresh += 1;
        let name = format!("r{number:06}");
        let dir = &self.buffer_dir;
        let sources: Vec<_> = st.refreshed_parts[at..]
            .iter()
            .map(|p| (&*p.reader, p.deletes.as_deref()))
            .collect();
        let meta = merge_live(
            dir,
            &sources,
            &name,
            st.manifest.postings_format(),
            StoreOptions {
                dictionary: false,
                ..StoreOptions::default()
            },
            &|_| {},
        )?;
        let reader = SegmentReader::open(dir, &meta, st.manifest.postings_format(), &st.memory);
        for e in meta.files.keys() {
            let _ = std::fs::remove_file(dir.join(meta.file_name(e)));
        }
        let mut part = Part::new(number, reader?, None);
        st.stats.refresh_docs_merged += slots.len() as u64;
        st.stats.refresh_merge_secs += started.elapsed().as_secs_f64();
        part.slots = slots;
        Ok(Some(part))
    }

    /// Inverts the buffered documents at `slots` into a segment read from
    /// memory (its files are removed once loaded).
    fn write_refresh_part(&self, st: &mut State, slots: Vec<u32>) -> Result<Part> {
        let dir = self.buffer_dir.clone();
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let number = st.next_refresh;
        st.next_refresh += 1;
        let name = format!("r{number:06}");
        let mut w = SegmentWriter::untrained(&dir, &name, Arc::clone(&st.analysis), st.manifest.postings_format())?;
        for &s in &slots {
            if let Some(d) = &st.buffer[s as usize] {
                w.add(d)?;
            }
        }
        let meta = w.finish()?;
        let reader = SegmentReader::open(&dir, &meta, st.manifest.postings_format(), &st.memory);
        for e in meta.files.keys() {
            let _ = std::fs::remove_file(dir.join(meta.file_name(e)));
        }
        let mut part = Part::new(number, reader?, None);
        st.stats.refresh_docs_inverted += slots.len() as u64;
        part.slots = slots;
        Ok(part)
    }

    /// Writes the buffer to storage by the index's strategy and makes the
    /// result durable (see the module doc). The segments are written (and
    /// merged) without holding the writer's state, so writes go on meanwhile;
    /// what they change in the flushed part is carried over at the end.
    pub fn flush(&self) -> Result<FlushReport> {
        let _maintenance = self.maintenance.lock().unwrap_or_else(|p| p.into_inner());
        let started = Instant::now();
        let plan = {
            let mut st = self.lock();
            Self::usable(&st)?;
            if st.buffer_live == 0 {
                return self.flush_locked(&mut st, false);
            }
            match self.plan_flush(&mut st) {
                Ok(plan) => plan,
                Err(e) => {
                    st.failed = Some(e.to_string());
                    return Err(e);
                }
            }
        };
        let built = self.build_flush(&plan);
        let mut st = self.lock();
        st.flushing = false;
        let result = built.and_then(|built| self.commit_flush(&mut st, plan, built, started));
        Self::record_flush(&mut st, result)
    }

    /// Flushes, then rewrites every segment that holds deleted documents
    /// without them.
    pub fn compact(&self) -> Result<FlushReport> {
        let _maintenance = self.maintenance.lock().unwrap_or_else(|p| p.into_inner());
        let mut st = self.lock();
        Self::usable(&st)?;
        self.flush_locked(&mut st, true)
    }

    /// The locked first step of [`IndexWriter::flush`]: tombstones brought
    /// up to date, the buffer's documents taken, the merge chosen.
    fn plan_flush(&self, st: &mut State) -> Result<FlushPlan> {
        for p in &mut st.durable {
            p.materialise(&st.analysis)?;
        }
        st.durable.retain(|p| p.live() > 0 || p.reader.chain().is_some());
        let docs: Vec<(u32, Document)> = st
            .buffer
            .iter()
            .enumerate()
            .filter_map(|(i, d)| d.as_ref().map(|d| (i as u32, d.clone())))
            .collect();
        let number = st.manifest.next_segment;
        st.manifest.next_segment += 1;
        let mut sizes: Vec<u64> = st.durable.iter().map(|p| p.live()).collect();
        sizes.push(docs.len() as u64);
        let k = st
            .manifest
            .strategy
            .merge_count(&sizes, self.options.buffer_docs as u64);
        let (at, merged) = if k > 1 {
            let n = st.manifest.next_segment;
            st.manifest.next_segment += 1;
            (st.durable.len() + 1 - k, Some(n))
        } else {
            (st.durable.len(), None)
        };
        // An in-place index has one chained segment, made by its first flush.
        let chain = match st.durable.iter().find(|p| p.reader.chain().is_some()) {
            Some(p) => Some(p.reader.meta().clone()),
            None if st.manifest.strategy.in_place() => {
                let n = st.manifest.next_segment;
                st.manifest.next_segment += 1;
                Some(SegmentMeta::empty_chain(
                    segment_name(n),
                    st.manifest.strategy == Strategy::InPlaceContiguous,
                ))
            }
            None => None,
        };
        st.flushing = true;
        Ok(FlushPlan {
            chain,
            n: st.buffer.len(),
            seq: st.last_seq,
            number,
            docs,
            at,
            merged,
            sources: st.durable[at..]
                .iter()
                .map(|p| (p.reader.clone(), p.deletes.clone()))
                .collect(),
            manifest: st.manifest.clone(),
            analysis: Arc::clone(&st.analysis),
            storage: st.storage.clone(),
            dictionary: store_dictionary(st)?,
        })
    }

    /// The unlocked step of [`IndexWriter::flush`]: the buffer's segment,
    /// and the merge.
    fn build_flush(&self, plan: &FlushPlan) -> Result<BuiltFlush> {
        let m = &plan.manifest;
        let mut report = FlushReport::default();
        let t_seg = Instant::now();
        let meta = write_segment(
            &self.dir,
            &segment_name(plan.number),
            m,
            &plan.analysis,
            plan.dictionary.clone(),
            plan.docs.iter().map(|(_, d)| d),
        )?;
        report.docs_flushed = meta.max_doc as u64;
        report.bytes_written += meta.bytes();
        let reader = SegmentReader::open(&self.dir, &meta, m.postings_format(), &plan.storage)?;
        report.segment_secs = t_seg.elapsed().as_secs_f64();
        if let Some(chain) = &plan.chain {
            tracing::debug!(secs = t_seg.elapsed().as_secs_f64(), "in-place flush wrote its part");
            let absorbed = self.absorb(chain, &reader, &mut report)?;
            return Ok(BuiltFlush {
                report,
                reader,
                absorbed: Some((meta, absorbed)),
            });
        }
        let Some(number) = plan.merged else {
            return Ok(BuiltFlush {
                report,
                reader,
                absorbed: None,
            });
        };
        let mut sources: Vec<_> = plan.sources.iter().map(|(r, d)| (&**r, d.as_deref())).collect();
        sources.push((&reader, None));
        report.segments_merged = sources.len();
        let reader = self.merge_durable(&sources, number, m, &plan.storage, &mut report)?;
        Ok(BuiltFlush {
            report,
            reader,
            absorbed: None,
        })
    }

    /// Appends the postings of `part` (the flushed documents' segment) to
    /// the chain of chained segment `chain` (created when it has no files yet).
    fn absorb(&self, chain: &SegmentMeta, part: &SegmentReader, report: &mut FlushReport) -> Result<Absorbed> {
        let mut cw = self.chain.lock().unwrap_or_else(|p| p.into_inner());
        if cw.is_none() {
            let contiguous = chain.chain.as_ref().is_some_and(|c| c.contiguous);
            let (_, w) = ChainWriter::create(&self.dir, &chain.name, contiguous)?;
            *cw = Some(w.packing(self.options.pack_max));
        }
        let cw = cw.as_mut().expect("created above");
        let t = Instant::now();
        match cw.absorb(part, chain.max_doc) {
            Ok(a) => {
                tracing::debug!(secs = t.elapsed().as_secs_f64(), "in-place flush absorbed");
                report.bytes_written += a.writes.bytes + (a.log_len - chain.chain.as_ref().map_or(0, |c| c.log_len));
                Ok(a)
            }
            Err(e) => {
                cw.abandon();
                Err(e)
            }
        }
    }

    /// The locked last step of [`IndexWriter::flush`]: the new segment
    /// replaces the buffer's flushed part (and the merged segments), with the
    /// deletions made meanwhile; then the manifest commits it.
    fn commit_flush(
        &self,
        st: &mut State,
        plan: FlushPlan,
        built: BuiltFlush,
        started: Instant,
    ) -> Result<FlushReport> {
        let BuiltFlush {
            mut report,
            reader,
            absorbed,
        } = built;
        if let Some((part, absorbed)) = absorbed {
            drop(reader);
            return self.commit_inplace(st, plan, part, absorbed, report, started);
        }
        let number = plan.merged.unwrap_or(plan.number);
        // Documents of the merged segments and of the buffer, in the new
        // segment's order: their new numbers, and which were deleted since.
        let mut part = Part::new(number, reader, None);
        let mut new_local = 0u32;
        let mut replaced: Vec<u64> = Vec::new();
        for (old, (_, del)) in st.durable[plan.at..].iter().zip(&plan.sources) {
            let mut map = vec![u32::MAX; old.reader.max_doc() as usize];
            for (d, to) in map.iter_mut().enumerate() {
                if !del.as_ref().is_some_and(|x| x.contains(d as DocId)) {
                    *to = new_local;
                    new_local += 1;
                }
            }
            part.pending.extend(
                old.pending
                    .iter()
                    .filter_map(|&l| map.get(l as usize).copied())
                    .filter(|&t| t != u32::MAX),
            );
            replaced.push(old.number);
        }
        for (i, (slot, _)) in plan.docs.iter().enumerate() {
            if st.buffer[*slot as usize].is_none() {
                part.pending.push(new_local + i as u32);
            }
        }
        // Ids that still point at a flushed copy now point at the new one.
        let mut id = String::new();
        for d in 0..part.reader.max_doc() {
            part.reader.external_id(d, &mut id)?;
            if let Some(loc) = st.ids.get_mut(&id) {
                let flushed = match *loc {
                    Loc::Buffer(s) => (s as usize) < plan.n,
                    Loc::Durable { seg, .. } => replaced.contains(&seg),
                };
                if flushed {
                    *loc = Loc::Durable { seg: number, local: d };
                }
            }
        }
        st.durable.truncate(plan.at);
        st.durable.push(part);
        // The documents written since stay in the buffer.
        Self::drain_flushed(st, plan.n);
        self.commit_manifest(st, &plan.manifest.segments, plan.seq, &mut report)?;
        self.after_flush(st, plan.seq, report, started)
    }

    /// The locked last step of an in-place flush: the chained segment grows
    /// by the flushed part (its tombstones carried over, the documents
    /// deleted meanwhile added), then the manifest commits it.
    fn commit_inplace(
        &self,
        st: &mut State,
        plan: FlushPlan,
        part: SegmentMeta,
        mut absorbed: Absorbed,
        mut report: FlushReport,
        started: Instant,
    ) -> Result<FlushReport> {
        let t_commit = Instant::now();
        let before = plan.chain.clone().expect("an in-place flush has a chain");
        let number = segment_number(&self.dir, &before.name)?;
        let base = before.max_doc;
        let mut meta = before.clone();
        let mut cw_guard = self.chain.lock().unwrap_or_else(|p| p.into_inner());
        let cw = cw_guard.as_mut().expect("the flush made the chain");
        // The part's postings files, no longer referenced, go with the
        // manifest commit's orphan removal.
        grow_chain(&mut meta, part, &mut absorbed, cw)?;
        let old = st.durable.iter().position(|p| p.number == number);
        let reader = SegmentReader::open_chained(
            &self.dir,
            &meta,
            st.manifest.postings_format(),
            &st.storage,
            cw.chain().clone(),
            old.map(|i| &*st.durable[i].reader),
        )?;
        let mut p = Part::new(number, reader, None);
        if let Some(i) = old {
            let o = &st.durable[i];
            p.deletes = o.deletes.as_ref().map(|d| Arc::new(d.grown(meta.max_doc)));
            p.pending = o.pending.clone();
            p.deletes_dirty = o.deletes_dirty;
        }
        for (i, (slot, d)) in plan.docs.iter().enumerate() {
            let local = base + i as u32;
            match st.ids.get_mut(&d.id) {
                Some(loc) if *loc == Loc::Buffer(*slot) => *loc = Loc::Durable { seg: number, local },
                _ => p.pending.push(local),
            }
        }
        match old {
            Some(i) => st.durable[i] = p,
            None => st.durable.push(p),
        }
        Self::drain_flushed(st, plan.n);
        self.commit_manifest(st, &plan.manifest.segments, plan.seq, &mut report)?;
        let cm = meta.chain.as_ref().expect("chained");
        cw.commit(&absorbed, cm);
        drop(cw_guard);
        report.segments_merged = 0;
        tracing::debug!(secs = t_commit.elapsed().as_secs_f64(), "in-place flush committed");
        self.after_flush(st, plan.seq, report, started)
    }

    /// Drops the first `n` buffer slots (flushed) and renumbers the rest.
    fn drain_flushed(st: &mut State, n: usize) {
        st.buffer.drain(..n);
        let State { buffer, ids, .. } = st;
        for (i, d) in buffer.iter().enumerate() {
            if let Some(d) = d {
                ids.insert(d.id.clone(), Loc::Buffer(i as u32));
            }
        }
        st.buffer_live = st.buffer.iter().flatten().count();
        st.buffer_bytes = st.buffer.iter().flatten().map(text_bytes).sum();
        st.refreshed_parts.clear();
        st.refreshed = 0;
    }

    /// Publishes a committed flush (holding the log up to `applied`) and
    /// completes its report.
    fn after_flush(
        &self,
        st: &mut State,
        applied: u64,
        mut report: FlushReport,
        started: Instant,
    ) -> Result<FlushReport> {
        st.dirty = true;
        self.refresh_locked(st)?;
        st.stats.flushes += 1;
        st.stats.segments = st.durable.len();
        st.stats.flushed_seq = applied;
        report.segments = st.durable.len();
        report.secs = started.elapsed().as_secs_f64();
        Ok(report)
    }

    /// Writes the tombstones that changed, then the manifest (the commit
    /// point) holding the log up to `applied`; checkpoints the log and
    /// removes the files no longer referenced.
    fn commit_manifest(
        &self,
        st: &mut State,
        before: &[SegmentMeta],
        applied: u64,
        report: &mut FlushReport,
    ) -> Result<()> {
        let dir = &self.dir;
        let mut metas = Vec::with_capacity(st.durable.len());
        for p in &mut st.durable {
            let mut meta = p.reader.meta().clone();
            meta.deletes = before.iter().find(|b| b.name == meta.name).and_then(|b| b.deletes);
            if p.deletes_dirty {
                if let Some(d) = &p.deletes {
                    let generation = st.manifest.next_segment;
                    st.manifest.next_segment += 1;
                    let file = d.write(&dir.join(DeletesMeta::name_for(&meta.name, generation)))?;
                    let dm = DeletesMeta {
                        generation,
                        count: d.count(),
                        file,
                    };
                    report.bytes_written += dm.file.content_len;
                    meta.deletes = Some(dm);
                }
                p.deletes_dirty = false;
            }
            metas.push(meta);
        }
        st.manifest.segments = metas;
        st.manifest.applied_seq = applied;
        st.manifest.store(dir)?;
        self.wal.checkpoint(applied)?;
        remove_orphans(dir, &st.manifest, false)
    }

    /// Adds a flush's report to the totals; an error stops the writer.
    fn record_flush(st: &mut State, result: Result<FlushReport>) -> Result<FlushReport> {
        match result {
            Ok(r) => {
                let m = &mut st.stats.maintenance;
                m.docs_flushed += r.docs_flushed;
                m.segments_merged += r.segments_merged;
                m.segments_compacted += r.segments_compacted;
                m.bytes_written += r.bytes_written;
                m.bytes_merged += r.bytes_merged;
                m.segments = r.segments;
                m.secs += r.secs;
                m.segment_secs += r.segment_secs;
                Ok(r)
            }
            Err(e) => {
                st.failed = Some(e.to_string());
                Err(e)
            }
        }
    }

    fn flush_locked(&self, st: &mut State, compact: bool) -> Result<FlushReport> {
        let result = self.flush_inner(st, compact);
        Self::record_flush(st, result)
    }

    fn flush_inner(&self, st: &mut State, compact: bool) -> Result<FlushReport> {
        if st.manifest.strategy.in_place() {
            return self.flush_inplace_locked(st, compact);
        }
        let started = Instant::now();
        let dir = self.dir.clone();
        let mut report = FlushReport::default();
        let before: Vec<SegmentMeta> = st.manifest.segments.clone();
        for p in &mut st.durable {
            p.materialise(&st.analysis)?;
        }
        let mut fresh: Vec<u64> = Vec::new();
        // The buffer becomes a segment.
        if st.buffer_live > 0 {
            let number = st.manifest.next_segment;
            st.manifest.next_segment += 1;
            let docs = st.buffer.iter().flatten();
            let t = Instant::now();
            let dict = store_dictionary(st)?;
            let meta = write_segment(&dir, &segment_name(number), &st.manifest, &st.analysis, dict, docs)?;
            report.docs_flushed = meta.max_doc as u64;
            report.bytes_written += meta.bytes();
            let reader = SegmentReader::open(&dir, &meta, st.manifest.postings_format(), &st.storage)?;
            report.segment_secs = t.elapsed().as_secs_f64();
            st.durable.push(Part::new(number, reader, None));
            fresh.push(number);
        }
        st.durable.retain(|p| p.live() > 0);
        // The strategy's merge of the newest segments.
        let sizes: Vec<u64> = st.durable.iter().map(|p| p.live()).collect();
        let k = if report.docs_flushed > 0 {
            st.manifest
                .strategy
                .merge_count(&sizes, self.options.buffer_docs as u64)
        } else {
            0
        };
        if k > 1 {
            let at = st.durable.len() - k;
            let merged = self.merge_parts(st, at..st.durable.len(), &mut report)?;
            st.durable.truncate(at);
            st.durable.push(merged);
            fresh.push(st.durable[at].number);
            report.segments_merged = k;
        }
        if compact {
            for i in 0..st.durable.len() {
                if st.durable[i].deletes.as_ref().is_some_and(|d| !d.is_empty()) {
                    let merged = self.merge_parts(st, i..i + 1, &mut report)?;
                    fresh.push(merged.number);
                    st.durable[i] = merged;
                    report.segments_compacted += 1;
                }
            }
        }
        let applied = st.last_seq;
        self.commit_manifest(st, &before, applied, &mut report)?;
        // The buffer is now in the segments.
        st.buffer.clear();
        st.buffer_live = 0;
        st.buffer_bytes = 0;
        st.refreshed_parts.clear();
        st.refreshed = 0;
        let mut id = String::new();
        for p in st.durable.iter().filter(|p| fresh.contains(&p.number)) {
            for d in 0..p.reader.max_doc() {
                p.reader.external_id(d, &mut id)?;
                st.ids.insert(
                    id.clone(),
                    Loc::Durable {
                        seg: p.number,
                        local: d,
                    },
                );
            }
        }
        self.after_flush(st, applied, report, started)
    }

    /// A flush of an in-place index holding the state: the buffer is
    /// appended to the chain; with `compact`, a chain holding deleted
    /// documents is then rebuilt from its live ones (new chain file, new
    /// parts), which gives their space back.
    fn flush_inplace_locked(&self, st: &mut State, compact: bool) -> Result<FlushReport> {
        let started = Instant::now();
        let mut report = FlushReport::default();
        if st.buffer_live > 0 {
            let plan = self.plan_flush(st)?;
            let built = self.build_flush(&plan);
            st.flushing = false;
            let (part, absorbed) = match built {
                Ok(BuiltFlush {
                    absorbed: Some(a),
                    report: r,
                    ..
                }) => {
                    report = r;
                    a
                }
                Ok(_) => return Err(Error::Internal("an in-place flush made no chain".into())),
                Err(e) => return Err(e),
            };
            report = self.commit_inplace(st, plan, part, absorbed, report, started)?;
        }
        if !compact {
            if report.docs_flushed == 0 {
                // Nothing buffered: the deletions of flushed documents still
                // become durable tombstones.
                for p in &mut st.durable {
                    p.materialise(&st.analysis)?;
                }
                let before: Vec<SegmentMeta> = st.manifest.segments.clone();
                let applied = st.last_seq;
                self.commit_manifest(st, &before, applied, &mut report)?;
                report = self.after_flush(st, applied, report, started)?;
            }
            return Ok(report);
        }
        for p in &mut st.durable {
            p.materialise(&st.analysis)?;
        }
        // Plain segments (an index built in bulk before its first flush)
        // are compacted as under the merge strategies.
        let before: Vec<SegmentMeta> = st.manifest.segments.clone();
        let mut plain_compacted = false;
        for i in 0..st.durable.len() {
            let p = &st.durable[i];
            if p.reader.chain().is_none() && p.deletes.as_ref().is_some_and(|d| !d.is_empty()) {
                let merged = self.merge_parts(st, i..i + 1, &mut report)?;
                let mut id = String::new();
                for d in 0..merged.reader.max_doc() {
                    merged.reader.external_id(d, &mut id)?;
                    if let Some(loc) = st.ids.get_mut(&id) {
                        if matches!(*loc, Loc::Durable { seg, .. } if seg == st.durable[i].number) {
                            *loc = Loc::Durable {
                                seg: merged.number,
                                local: d,
                            };
                        }
                    }
                }
                st.durable[i] = merged;
                report.segments_compacted += 1;
                plain_compacted = true;
            }
        }
        st.durable.retain(|p| p.live() > 0 || p.reader.chain().is_some());
        if plain_compacted {
            let applied = st.last_seq;
            self.commit_manifest(st, &before, applied, &mut report)?;
        }
        let before: Vec<SegmentMeta> = st.manifest.segments.clone();
        let Some(i) = st
            .durable
            .iter()
            .position(|p| p.reader.chain().is_some() && p.deletes.as_ref().is_some_and(|d| !d.is_empty()))
        else {
            let applied = st.last_seq;
            self.commit_manifest(st, &before, applied, &mut report)?;
            return self.after_flush(st, applied, report, started);
        };
        // The live documents, in order, into a new chain.
        let old = st.durable[i].reader.clone();
        let del = st.durable[i].deletes.clone();
        let mut docs = Vec::with_capacity(old.max_doc() as usize);
        for d in 0..old.max_doc() {
            if !del.as_ref().is_some_and(|x| x.contains(d)) {
                docs.push(old.document(d)?);
            }
        }
        report.bytes_merged += old.meta().bytes();
        let before: Vec<SegmentMeta> = st.manifest.segments.clone();
        let chain_number = st.manifest.next_segment;
        let part_number = chain_number + 1;
        st.manifest.next_segment += 2;
        let contiguous = st.manifest.strategy == Strategy::InPlaceContiguous;
        let mut meta = SegmentMeta::empty_chain(segment_name(chain_number), contiguous);
        let (_, cw) = ChainWriter::create(&self.dir, &meta.name, contiguous)?;
        let mut cw = cw.packing(self.options.pack_max);
        if !docs.is_empty() {
            let part = write_segment(
                &self.dir,
                &segment_name(part_number),
                &st.manifest,
                &st.analysis,
                store_dictionary(st)?,
                docs.iter(),
            )?;
            let part_reader = SegmentReader::open(&self.dir, &part, st.manifest.postings_format(), &st.storage)?;
            let mut absorbed = cw.absorb(&part_reader, 0)?;
            drop(part_reader);
            report.bytes_written += part.bytes() + absorbed.writes.bytes + absorbed.log_len;
            for f in grow_chain(&mut meta, part, &mut absorbed, &cw)? {
                let _ = std::fs::remove_file(self.dir.join(f));
            }
            cw.commit(&absorbed, meta.chain.as_ref().expect("chained"));
        }
        let reader = SegmentReader::open_chained(
            &self.dir,
            &meta,
            st.manifest.postings_format(),
            &st.storage,
            cw.chain().clone(),
            None,
        )?;
        let mut map = Vec::with_capacity(old.max_doc() as usize);
        let mut next = 0u32;
        for d in 0..old.max_doc() {
            if del.as_ref().is_some_and(|x| x.contains(d)) {
                map.push(u32::MAX);
            } else {
                map.push(next);
                next += 1;
            }
        }
        let old_number = st.durable[i].number;
        let mut p = Part::new(chain_number, reader, None);
        p.pending = st.durable[i]
            .pending
            .iter()
            .filter_map(|&l| map.get(l as usize).copied())
            .filter(|&t| t != u32::MAX)
            .collect();
        for loc in st.ids.values_mut() {
            if let Loc::Durable { seg, local } = *loc {
                if seg == old_number {
                    if let Some(&to) = map.get(local as usize).filter(|&&t| t != u32::MAX) {
                        *loc = Loc::Durable {
                            seg: chain_number,
                            local: to,
                        };
                    }
                }
            }
        }
        st.durable[i] = p;
        report.segments_compacted += 1;
        let applied = st.last_seq;
        self.commit_manifest(st, &before, applied, &mut report)?;
        *self.chain.lock().unwrap_or_else(|p| p.into_inner()) = Some(cw);
        self.after_flush(st, applied, report, started)
    }

    /// Merges `st.durable[range]` without their deleted documents into a new
    /// segment.
    fn merge_parts(&self, st: &mut State, range: std::ops::Range<usize>, report: &mut FlushReport) -> Result<Part> {
        let number = st.manifest.next_segment;
        st.manifest.next_segment += 1;
        let sources: Vec<_> = st.durable[range]
            .iter()
            .map(|p| (&*p.reader, p.deletes.as_deref()))
            .collect();
        let reader = self.merge_durable(&sources, number, &st.manifest, &st.storage, report)?;
        Ok(Part::new(number, reader, None))
    }

    /// Merges `sources` without their deleted documents into durable
    /// segment `number` and opens it.
    fn merge_durable(
        &self,
        sources: &[(&SegmentReader, Option<&Deletes>)],
        number: u64,
        manifest: &Manifest,
        storage: &Storage,
        report: &mut FlushReport,
    ) -> Result<SegmentReader> {
        report.bytes_merged += sources.iter().map(|s| s.0.meta().bytes()).sum::<u64>();
        let meta = merge_live(
            &self.dir,
            sources,
            &segment_name(number),
            manifest.postings_format(),
            StoreOptions::default(),
            &|_| {},
        )?;
        report.bytes_written += meta.bytes();
        SegmentReader::open(&self.dir, &meta, manifest.postings_format(), storage)
    }

    /// Counters.
    pub fn stats(&self) -> WriterStats {
        self.published.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// True if a live document (buffered ones included) has this id.
    pub fn contains(&self, id: &str) -> bool {
        self.lock().ids.contains_key(id)
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

/// Nice value of the background maintenance thread (searches run at 0).
const MAINTENANCE_NICE: i32 = 10;

/// What the locked start of a flush hands to its unlocked part.
struct FlushPlan {
    /// Buffer slots `..n` are flushed.
    n: usize,
    /// The last log record they hold.
    seq: u64,
    /// Number of the buffer's segment.
    number: u64,
    /// The live buffered documents, with their slots.
    docs: Vec<(u32, Document)>,
    /// Durable parts `at..` merge with the buffer's segment into segment
    /// `merged` (none: no merge, `at` is the number of parts).
    at: usize,
    merged: Option<u64>,
    /// Those parts' readers and tombstones, as merged.
    sources: Vec<(Arc<SegmentReader>, Option<Arc<Deletes>>)>,
    /// The chained segment the flush appends to (in-place strategies), as
    /// committed before it (with no documents when the flush creates it).
    chain: Option<SegmentMeta>,
    manifest: Manifest,
    analysis: Arc<Analysis>,
    storage: Storage,
    /// The store dictionary of the index's newest segment, if it has one.
    dictionary: Option<Arc<[u8]>>,
}

/// The segment an unlocked flush wrote (the merged one when it merged);
/// with an in-place strategy, the flushed documents' part and what the
/// flush appended to the chain.
struct BuiltFlush {
    report: FlushReport,
    reader: SegmentReader,
    absorbed: Option<(SegmentMeta, Absorbed)>,
}

/// The background maintenance of [`IndexWriter::maintain`]; dropping it
/// stops the thread (after the step in progress).
pub struct Maintainer {
    stop: Arc<(Mutex<bool>, std::sync::Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Maintainer {
    fn drop(&mut self) {
        *self.stop.0.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.stop.1.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Grows chained segment `meta` by `part` (the flushed documents' segment,
/// whose postings `absorbed` appended to the chain of `cw`): the part's
/// postings files leave it, its documents and statistics join, the chain's
/// dictionary takes the flush's changes. Returns the files to remove.
fn grow_chain(
    meta: &mut SegmentMeta,
    mut part: SegmentMeta,
    absorbed: &mut Absorbed,
    cw: &ChainWriter,
) -> Result<Vec<String>> {
    let mut removed = Vec::new();
    for e in [ext::TERMS, ext::POSTINGS, ext::TERM_INFOS] {
        if part.files.remove(e).is_some() {
            removed.push(part.file_name(e));
        }
    }
    meta.max_doc = meta
        .max_doc
        .checked_add(part.max_doc)
        .ok_or_else(|| Error::InvalidArgument("an in-place index holds at most 2^32-1 documents".into()))?;
    if meta.fields.len() < part.fields.len() {
        meta.fields.resize(part.fields.len(), Default::default());
    }
    for (f, pf) in meta.fields.iter_mut().zip(&part.fields) {
        f.add(pf);
    }
    cw.publish(absorbed);
    meta.num_terms = cw.num_terms();
    let cm = meta.chain.as_mut().expect("a chained segment");
    cm.parts.push(part);
    cm.log_len = absorbed.log_len;
    cm.file_len = absorbed.file_len;
    cm.runs = absorbed.runs.clone();
    Ok(removed)
}

/// Writes `docs` as segment `name` in `dir`.
fn write_segment<'a>(
    dir: &Path,
    name: &str,
    manifest: &Manifest,
    analysis: &Arc<Analysis>,
    dictionary: Option<Arc<[u8]>>,
    docs: impl Iterator<Item = &'a Document>,
) -> Result<SegmentMeta> {
    let mut w = SegmentWriter::new(
        dir,
        name,
        Arc::clone(analysis),
        dictionary.as_deref(),
        manifest.postings_format(),
    )?;
    for d in docs {
        w.add(d)?;
    }
    w.finish()
}

/// The store dictionary of the newest durable segment (or chained part)
/// that has one. Flushes compress with it instead of training their own:
/// training is a large share of a small flush's cost, and segments sharing a
/// dictionary merge by copying compressed records (DESIGN §5).
fn store_dictionary(st: &State) -> Result<Option<Arc<[u8]>>> {
    for p in st.durable.iter().rev() {
        for store in p.reader.stores().into_iter().rev() {
            if let Some(d) = store.dictionary()? {
                return Ok(Some(Arc::from(d)));
            }
        }
    }
    Ok(None)
}

/// The searchable view of the writer's state.
fn snapshot(dir: &Path, st: &State) -> Result<Index> {
    let views = st.durable.iter().chain(&st.refreshed_parts).map(Part::view).collect();
    Index::assemble(dir, st.manifest.clone(), st.storage.clone(), views)
}
