//! Indexing: documents to immutable segments.
//!
//! The calling thread reads the corpus and cuts it into contiguous chunks of
//! at most `segment_docs` documents or `segment_bytes` of text; each chunk
//! becomes one segment, built by whichever worker is free, and segments are
//! ordered by chunk number, so document numbers always follow input order
//! whatever the thread timing. Memory holds at most `threads + 2` chunks. Each worker inverts its documents in memory
//! ([`segment_writer`]) and flushes them to files; at the end the segments
//! can be force-merged into one ([`merge`]) and the manifest is written
//! atomically.

mod byte_slices;
pub mod merge;
pub mod reorder;
pub mod segment_writer;
pub mod term_table;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crossbeam_channel::bounded;
use serde::{Deserialize, Serialize};

use crate::analysis::AnalyzerConfig;
use crate::bloom::BloomParams;
use crate::corpus::CorpusError;
use crate::error::{Error, Result};
use crate::index::deletes::DeletesMeta;
use crate::index::manifest::{Manifest, SegmentMeta, MANIFEST};
use crate::index::segment::ext;
use crate::index::{Deletes, SegmentReader};
use crate::layout::{Codec, Format, Layout};
use crate::schema::{Analysis, Document, Schema};
use crate::storage::{Storage, Tier, TierOptions};
use crate::store::{train_dictionary, StoreOptions};
use reorder::BpParams;
pub use segment_writer::SegmentWriter;

/// How to build an index.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct IndexOptions {
    /// The fields (the default schema, `title` and `body`, otherwise).
    pub schema: Schema,
    /// Analyzer options (stored in the manifest; queries use the same);
    /// a field's own analyzer in the schema wins.
    pub analyzer: AnalyzerConfig,
    /// Maximum documents per segment written by the builder.
    pub segment_docs: usize,
    /// Maximum text bytes per segment (bounds the builder's memory); with
    /// a [`IndexOptions::memory_budget`], at most what the budget allows.
    pub segment_bytes: usize,
    /// Resident memory the build should stay under, in bytes: segments
    /// are cut small enough for every thread's documents and in-memory
    /// postings to fit ([`segment_bytes_for`]). `None`: `segment_bytes`
    /// alone decides.
    pub memory_budget: Option<usize>,
    /// Indexing threads (0 = all cores).
    pub threads: usize,
    /// Threads of the final merge (0: as many as `threads`); the term
    /// space is split between them ([`merge::merge_live`]).
    pub merge_threads: usize,
    /// The most segments one merge takes (0: what the memory budget
    /// allows, [`merge_fan_in`]; no limit without a budget). More segments
    /// are first merged in groups of consecutive ones, level by level.
    pub merge_fan_in: usize,
    /// Force-merge into a single segment at the end.
    pub merge: bool,
    /// Replace an index already in the output directory.
    pub overwrite: bool,
    /// Where each term's sections go.
    pub layout: Layout,
    /// How postings integers are stored.
    pub codec: Codec,
    /// Phrase Bloom filters of the schema's fields that ask for them
    /// (`None`: off).
    pub bloom: Option<BloomParams>,
    /// How later updates are merged (remembered by the index).
    pub strategy: crate::index::Strategy,
    /// Reorder the documents of the final merge by recursive graph
    /// bisection ([`reorder`]) with these parameters (with `merge` only;
    /// `None`: documents keep the input's order).
    pub reorder: Option<reorder::BpParams>,
}

impl IndexOptions {
    /// The postings format these options ask for.
    pub fn format(&self) -> Format {
        Format {
            layout: self.layout,
            codec: self.codec,
            bloom: self.bloom,
            filter_fields: Default::default(),
            dict_doc_freq: true,
        }
        .with_schema(&self.schema)
    }
}

impl Default for IndexOptions {
    fn default() -> Self {
        IndexOptions {
            schema: Schema::default(),
            analyzer: AnalyzerConfig::default(),
            segment_docs: 1_000_000,
            segment_bytes: 32 << 20,
            memory_budget: None,
            threads: 0,
            merge_threads: 0,
            merge_fan_in: 0,
            merge: false,
            overwrite: false,
            layout: Layout::default(),
            codec: Codec::default(),
            bloom: Some(BloomParams::default()),
            strategy: Default::default(),
            reorder: None,
        }
    }
}

/// What a build did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BuildStats {
    /// Documents indexed (live: a record whose id came again later was
    /// replaced by the later one, as `add` does).
    pub docs: u64,
    /// Records replaced by a later record with the same id in the input.
    #[serde(default)]
    pub replaced: u64,
    /// Bytes of ids and field values indexed.
    pub text_bytes: u64,
    /// Segments in the finished index.
    pub segments: usize,
    /// Total bytes of index files (content).
    pub index_bytes: u64,
    /// Seconds spent reading and inverting.
    pub index_secs: f64,
    /// Seconds spent merging.
    pub merge_secs: f64,
    /// Indexing threads used.
    #[serde(default)]
    pub threads: usize,
    /// Most text per in-memory segment (from the memory budget, if any).
    #[serde(default)]
    pub segment_bytes: usize,
    /// Threads of the final merge.
    #[serde(default)]
    pub merge_threads: usize,
}

/// Progress reports during a build.
#[derive(Debug, Clone, Copy)]
pub enum Progress {
    /// Documents (and text bytes) handed to the indexing workers so far.
    Indexed {
        /// Documents.
        docs: u64,
        /// Text bytes.
        bytes: u64,
    },
    /// A force-merge started.
    MergeStarted {
        /// Segments being merged.
        segments: usize,
    },
    /// Terms merged so far.
    Merging {
        /// Terms.
        terms: u64,
    },
}

/// Builds a new index in `dir` from `docs`.
pub fn build_index<I>(docs: I, dir: &Path, opts: &IndexOptions) -> Result<BuildStats>
where
    I: IntoIterator<Item = std::result::Result<Document, CorpusError>>,
{
    build_index_with_progress(docs, dir, opts, &|_| {})
}

/// A contiguous run of input documents that becomes segment `.0`.
/// The store dictionary shared by all segments of a build travels with it.
/// The analysis (the schema as it stood, dynamic mapping having added
/// fields for the chunk's documents) travels with it too.
type Chunk = (u64, Vec<Document>, Option<Arc<[u8]>>, Arc<Analysis>);

/// Whether a chunk of `chunk_bytes` of text is cut now, near the input's
/// end, when `read` bytes of text came from the `share` of the input read
/// so far: once what remains would not fill every thread with a whole
/// segment, each chunk takes a thread's share of the rest (guided
/// scheduling), down to a quarter of `segment_bytes` (the last chunk takes
/// a smaller rest), so that the threads finish together.
fn tail_cut(chunk_bytes: usize, read: u64, share: f64, segment_bytes: usize, threads: usize) -> bool {
    if !(share > 0.0 && share < 1.0) || threads < 2 {
        return false;
    }
    let rest = read as f64 * (1.0 - share) / share;
    let remaining = rest + chunk_bytes as f64;
    let least = (segment_bytes / 4) as f64;
    remaining < (threads * segment_bytes) as f64
        && chunk_bytes as f64 >= least
        && rest >= least
        && chunk_bytes as f64 * (threads - 1) as f64 >= rest
}

/// Name of segment number `n`.
pub fn segment_name(n: u64) -> String {
    format!("seg{n:06}")
}

/// [`build_index`], reporting progress to `progress`.
pub fn build_index_with_progress<I>(
    docs: I,
    dir: &Path,
    opts: &IndexOptions,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<BuildStats>
where
    I: IntoIterator<Item = std::result::Result<Document, CorpusError>>,
{
    build_index_with(docs, dir, opts, progress, None)
}

/// [`build_index_with_progress`], told by `read_share` what share of the
/// input (0 to 1) has been read so far, so that the last segments are cut
/// smaller, the remaining text spread over the threads, and every thread
/// finishes at about the same time (instead of one building the last
/// whole segment alone).
pub fn build_index_with<I>(
    docs: I,
    dir: &Path,
    opts: &IndexOptions,
    progress: &(dyn Fn(Progress) + Sync),
    read_share: Option<&dyn Fn() -> f64>,
) -> Result<BuildStats>
where
    I: IntoIterator<Item = std::result::Result<Document, CorpusError>>,
{
    if opts.segment_docs == 0 || opts.segment_bytes == 0 {
        return Err(Error::InvalidArgument("segment size limits must be positive".into()));
    }
    if opts.merge_fan_in == 1 {
        return Err(Error::InvalidArgument(
            "a merge fan-in of 1 merges nothing: 0 (from the memory budget) or at least 2".into(),
        ));
    }
    let filter_bytes = opts.bloom.map(|b| b.shape()).transpose()?.map_or(0, |s| s.bytes as u32);
    let threads = match (opts.threads, opts.memory_budget) {
        (0, Some(budget)) => threads_for(budget, resolve_threads(0), filter_bytes),
        (t, _) => resolve_threads(t),
    };
    let (segment_bytes, merge_threads) = match opts.memory_budget {
        Some(budget) => (
            segment_bytes_for(budget, threads, filter_bytes)?.min(opts.segment_bytes),
            merge_threads_for(
                budget,
                if opts.merge_threads == 0 {
                    threads
                } else {
                    opts.merge_threads
                },
            ),
        ),
        None => (opts.segment_bytes, opts.merge_threads),
    };
    let opts = &IndexOptions {
        segment_bytes,
        threads,
        merge_threads,
        ..opts.clone()
    };
    if opts.strategy.in_place() && opts.layout != crate::layout::Layout::Grouped {
        return Err(Error::InvalidArgument(format!(
            "the {} strategy keeps each term's postings as grouped regions: use the grouped layout",
            opts.strategy
        )));
    }
    let target = Target::prepare(dir, opts.overwrite)?;
    match build_into(docs, target.work(), opts, progress, read_share) {
        Ok(stats) => {
            target.commit()?;
            Ok(stats)
        }
        Err(e) => {
            target.abort();
            Err(e)
        }
    }
}

/// Where a build writes, and how it takes its place: every build holds the
/// write lock of the directory it replaces (a server or `add` on it makes
/// the build fail with a conflict, never lose their writes), and a build
/// over an existing index (`overwrite`) or into a new directory is made
/// aside and swapped in whole when it is complete, so that a failed or
/// interrupted build leaves the old index (or nothing) in place.
struct Target {
    dir: std::path::PathBuf,
    /// Where the segments are written: `dir` itself when it exists empty,
    /// else a hidden sibling.
    work: std::path::PathBuf,
    /// The lock of `dir` (when it exists) and of `work`.
    _locks: Vec<std::fs::File>,
    /// Whether `work` is swapped into `dir`'s place at the end.
    aside: bool,
}

impl Target {
    fn prepare(dir: &Path, overwrite: bool) -> Result<Target> {
        use crate::index::lock::{lock_dir, sibling, LOCK_FILE};
        let mut locks = Vec::new();
        let aside = if dir.exists() {
            if !dir.is_dir() {
                return Err(Error::InvalidArgument(format!(
                    "{} exists and is not a directory",
                    dir.display()
                )));
            }
            let empty = std::fs::read_dir(dir)
                .map_err(|e| Error::io(dir, e))?
                .filter_map(|e| e.ok())
                .all(|e| e.file_name() == LOCK_FILE);
            if !empty && !dir.join(MANIFEST).exists() {
                return Err(Error::Conflict(format!(
                    "{} is not empty and holds no tierdex index; refusing to write into it",
                    dir.display()
                )));
            }
            if !empty && !overwrite {
                return Err(Error::Conflict(format!(
                    "{} already holds an index (pass --force to replace it)",
                    dir.display()
                )));
            }
            locks.push(lock_dir(dir)?);
            !empty
        } else {
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                crate::storage::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
            }
            true
        };
        let work = if aside {
            sibling(dir, "build")
        } else {
            dir.to_path_buf()
        };
        if aside {
            crate::storage::mode::create_dir(&work).map_err(|e| Error::io(&work, e))?;
            locks.push(lock_dir(&work)?);
        }
        Ok(Target {
            dir: dir.to_path_buf(),
            work,
            _locks: locks,
            aside,
        })
    }

    fn work(&self) -> &Path {
        &self.work
    }

    /// Puts the finished index in place.
    fn commit(&self) -> Result<()> {
        if !self.aside {
            return Ok(());
        }
        let r = crate::index::lock::replace_dir(&self.work, &self.dir);
        if r.is_err() && self.work.exists() {
            let _ = std::fs::remove_dir_all(&self.work);
        }
        r
    }

    /// Removes what a failed build wrote.
    fn abort(&self) {
        if self.aside {
            let _ = std::fs::remove_dir_all(&self.work);
            return;
        }
        let Ok(entries) = std::fs::read_dir(&self.work) else {
            return;
        };
        for e in entries.flatten() {
            if e.file_name() != crate::index::lock::LOCK_FILE {
                let p = e.path();
                let _ = if p.is_dir() {
                    std::fs::remove_dir_all(&p)
                } else {
                    std::fs::remove_file(&p)
                };
            }
        }
    }
}

/// Builds the index in `dir` (empty, locked by the caller).
fn build_into<I>(
    docs: I,
    dir: &Path,
    opts: &IndexOptions,
    progress: &(dyn Fn(Progress) + Sync),
    read_share: Option<&dyn Fn() -> f64>,
) -> Result<BuildStats>
where
    I: IntoIterator<Item = std::result::Result<Document, CorpusError>>,
{
    let threads = resolve_threads(opts.threads);
    let mut schema = opts.schema.clone();
    let mut analysis = Arc::new(Analysis::new(schema.clone(), opts.analyzer));
    let started = Instant::now();
    let results: Mutex<Vec<(u64, SegmentMeta)>> = Mutex::new(Vec::new());
    let worker_error: Mutex<Option<Error>> = Mutex::new(None);
    let failed = AtomicBool::new(false);
    let mut read_error = None;
    let (mut total_docs, mut total_bytes) = (0u64, 0u64);
    let mut segments = 0u64;
    let mut ids = Replacements::default();

    std::thread::scope(|scope| {
        // Whole segments go to whichever worker is free; the reader cuts
        // them from the input in order, so numbering follows the input.
        let (tx, rx) = bounded::<Chunk>(1);
        for _ in 0..threads {
            let (rx, results, worker_error, failed) = (rx.clone(), &results, &worker_error, &failed);
            scope.spawn(move || {
                for (seg, docs, dict, analysis) in rx.iter() {
                    if failed.load(Ordering::Relaxed) {
                        continue;
                    }
                    match build_segment(dir, seg, &docs, &analysis, dict.as_deref(), opts) {
                        Ok(meta) => results.lock().unwrap().push((seg, meta)),
                        Err(e) => {
                            failed.store(true, Ordering::Relaxed);
                            worker_error.lock().unwrap().get_or_insert(e);
                        }
                    }
                }
            });
        }
        drop(rx);
        let mut chunk = Vec::new();
        let mut chunk_bytes = 0usize;
        let mut dictionary: Option<Option<Arc<[u8]>>> = None;
        for item in docs {
            if failed.load(Ordering::Relaxed) {
                break;
            }
            let doc = match item {
                Ok(d) => d,
                Err(e) => {
                    read_error = Some(Error::from(e));
                    break;
                }
            };
            match schema.admit(&doc) {
                Ok(0) => {}
                Ok(_) => analysis = Arc::new(Analysis::new(schema.clone(), opts.analyzer)),
                Err(e) => {
                    read_error = Some(e);
                    break;
                }
            }
            let bytes = doc.text_bytes();
            chunk_bytes += bytes;
            total_docs += 1;
            total_bytes += bytes as u64;
            ids.note(segments, &doc);
            chunk.push(doc);
            if total_docs % 1024 == 0 {
                progress(Progress::Indexed {
                    docs: total_docs,
                    bytes: total_bytes,
                });
            }
            let tail = read_share.is_some_and(|share| {
                chunk.len().is_multiple_of(16)
                    && tail_cut(chunk_bytes, total_bytes, share(), opts.segment_bytes, threads)
            });
            if chunk.len() >= opts.segment_docs || chunk_bytes >= opts.segment_bytes || tail {
                ids.seal(segments, &mut chunk);
                let dict = shared_dictionary(&mut dictionary, &chunk);
                // A send fails only when every worker is gone (after an error).
                let _ = tx.send((segments, std::mem::take(&mut chunk), dict, Arc::clone(&analysis)));
                segments += 1;
                chunk_bytes = 0;
            }
        }
        if !chunk.is_empty() && read_error.is_none() {
            ids.seal(segments, &mut chunk);
            let dict = shared_dictionary(&mut dictionary, &chunk);
            let _ = tx.send((segments, chunk, dict, Arc::clone(&analysis)));
            segments += 1;
        }
        progress(Progress::Indexed {
            docs: total_docs,
            bytes: total_bytes,
        });
        drop(tx);
    });
    let index_secs = started.elapsed().as_secs_f64();

    if let Some(e) = read_error {
        return Err(e);
    }
    if let Some(e) = worker_error.into_inner().unwrap() {
        return Err(e);
    }
    if total_docs == 0 {
        return Err(Error::InvalidArgument(
            "the corpus is empty: no documents to index".into(),
        ));
    }
    let mut metas = results.into_inner().unwrap();
    metas.sort_by_key(|(s, _)| *s);
    let mut metas: Vec<SegmentMeta> = metas.into_iter().map(|(_, m)| m).collect();
    let built: Vec<String> = metas.iter().map(|m| m.name.clone()).collect();
    let mut next_segment = segments;

    let merge_started = Instant::now();
    // The ids seen are dropped here, not at the end (a map of 1M ids holds
    // tens of MiB).
    let (replaced, tombstones) = {
        let ids = ids;
        (ids.replaced, ids.tombstones)
    };
    // The inversion's buffers are freed: give their memory back to the
    // system before the merge takes its own.
    release_free_memory();
    let mut deletes: Vec<Option<DeletesMeta>> = vec![None; metas.len()];
    // One segment is merged (rewritten) too when its documents are reordered.
    if (opts.merge && (metas.len() > 1 || opts.reorder.is_some())) || !tombstones.is_empty() {
        // Replaced records leave tombstones in the segments that hold them;
        // a merge leaves them out.
        let storage = Storage::new(TierOptions::on(Tier::Mmap))?;
        let readers = metas
            .iter()
            .map(|m| {
                let r = SegmentReader::open(dir, m, opts.format(), &storage)?;
                // Merged a group at a time, maybe: nothing stays mapped.
                r.release();
                Ok(r)
            })
            .collect::<Result<Vec<_>>>()?;
        let mut dead = Vec::with_capacity(metas.len());
        for (seg, r) in readers.iter().enumerate() {
            dead.push(match tombstones.get(&(seg as u64)) {
                Some(locals) => Some(Deletes::none(r.max_doc()).with(r, &analysis, locals)?),
                None => None,
            });
        }
        if opts.merge {
            let merge_threads = match opts.merge_threads {
                0 => threads,
                n => n,
            };
            // The reordering's forward index takes at most a sixteenth of
            // the memory budget.
            let reorder = opts.reorder.map(|p| match (p.max_postings, opts.memory_budget) {
                (0, Some(budget)) => BpParams {
                    max_postings: (budget as u64 / 16 / 4).max(1),
                    ..p
                },
                _ => p,
            });
            let options = merge::MergeOptions {
                reorder,
                ..merge::MergeOptions::new(StoreOptions::default(), merge_threads)
            };
            // A group's terms keep their filters up to the whole index's
            // ceiling, for the last merge to find them; the last merge
            // alone reorders.
            let group_options = merge::MergeOptions {
                filter_docs: Some(total_docs - replaced),
                reorder: None,
                ..options
            };
            let merging = |sources: &[(&SegmentReader, Option<&Deletes>)], name: &str, last: bool| {
                progress(Progress::MergeStarted {
                    segments: sources.len(),
                });
                let options = if last { &options } else { &group_options };
                merge::merge_live(dir, sources, name, opts.format(), options, &|terms| {
                    progress(Progress::Merging { terms })
                })
            };
            // Under a budget, too many sources for one merge (their
            // dictionaries and mapped pages) are first merged in groups of
            // consecutive segments, which keeps the documents' order.
            let fan_in = match (opts.merge_fan_in, opts.memory_budget) {
                (0, Some(b)) => merge_fan_in(b, &readers, merge_threads),
                (0, None) => usize::MAX,
                (n, _) => n,
            };
            // Each level's segments are owned, so that a group's sources
            // are unmapped once merged (their pages would stay resident).
            let mut level: Vec<(SegmentReader, Option<Deletes>)> = readers.into_iter().zip(dead).collect();
            let mut group_metas = Vec::new();
            while level.len() > fan_in {
                let n_groups = level.len().div_ceil(fan_in);
                let per = level.len().div_ceil(n_groups);
                tracing::debug!("merging {} segments in {n_groups} groups first", level.len());
                let mut next = Vec::with_capacity(n_groups);
                let mut rest = level.into_iter().peekable();
                while rest.peek().is_some() {
                    let group: Vec<_> = rest.by_ref().take(per).collect();
                    let name = segment_name(next_segment);
                    next_segment += 1;
                    let sources: Vec<_> = group.iter().map(|(r, d)| (r, d.as_ref())).collect();
                    let meta = merging(&sources, &name, false)?;
                    drop(sources);
                    // The sources' files go once merged (an earlier level's
                    // among them); the index is committed only at the end.
                    for (r, _) in group {
                        let name = r.meta().name.clone();
                        drop(r);
                        remove_segment_files(dir, &name);
                    }
                    let merged = SegmentReader::open(dir, &meta, opts.format(), &storage)?;
                    merged.release();
                    next.push((merged, None));
                    group_metas.push(meta);
                }
                level = next;
            }
            let sources: Vec<_> = level.iter().map(|(r, d)| (r, d.as_ref())).collect();
            let name = segment_name(next_segment);
            next_segment += 1;
            let merged = merging(&sources, &name, true)?;
            drop(sources);
            drop(level);
            for m in metas.iter().chain(&group_metas) {
                remove_segment_files(dir, &m.name);
            }
            metas = vec![merged];
            deletes = vec![None];
        } else {
            for (i, d) in dead.iter().enumerate() {
                if let Some(d) = d {
                    let generation = next_segment;
                    next_segment += 1;
                    let file = d.write(&dir.join(DeletesMeta::name_for(&metas[i].name, generation)))?;
                    deletes[i] = Some(DeletesMeta {
                        generation,
                        count: d.count(),
                        file,
                    });
                }
            }
        }
    }
    for (m, d) in metas.iter_mut().zip(deletes) {
        m.deletes = d;
    }
    let merge_secs = merge_started.elapsed().as_secs_f64();
    if opts.merge {
        // Build segments kept as they are (nothing to merge): written unsynced.
        let unmerged = metas.iter().filter(|m| built.contains(&m.name));
        crate::storage::sync_files(unmerged.flat_map(|m| m.files.keys().map(|e| dir.join(m.file_name(e)))))?;
    }

    let mut manifest = Manifest::with_schema(schema, opts.analyzer, opts.format());
    manifest.strategy = opts.strategy;
    manifest.segments = metas;
    manifest.next_segment = next_segment;
    manifest.store(dir)?;
    Ok(BuildStats {
        docs: total_docs - replaced,
        replaced,
        text_bytes: total_bytes,
        segments: manifest.segments.len(),
        index_bytes: manifest.segments.iter().map(|s| s.bytes()).sum(),
        index_secs,
        merge_secs,
        threads,
        segment_bytes: opts.segment_bytes,
        merge_threads: match opts.merge_threads {
            0 => threads,
            n => n,
        },
    })
}

/// The ids a build has seen, so that a record whose id comes again later
/// is replaced by the later one (as `add` does): the earlier one is left
/// out of its chunk when the chunk is still being filled, or tombstoned in
/// its segment. Ids are kept as 128-bit hashes (16 bytes and a slot per
/// document; a collision between distinct ids is as likely as 2^-128 per
/// pair).
#[derive(Default)]
struct Replacements {
    /// Each id's latest record: its segment, and its position in that
    /// segment (in the chunk being filled, for the current segment).
    seen: rustc_hash::FxHashMap<u128, (u64, u32)>,
    /// The current chunk's id hashes, and which of its records were replaced.
    chunk: Vec<(u128, bool)>,
    /// Local numbers of the replaced documents of each segment sent.
    tombstones: std::collections::BTreeMap<u64, Vec<u32>>,
    replaced: u64,
}

impl Replacements {
    /// Records `doc`, about to be appended to the chunk of segment `seg`.
    fn note(&mut self, seg: u64, doc: &Document) {
        let h = xxhash_rust::xxh3::xxh3_128(doc.id.as_bytes());
        let slot = self.chunk.len() as u32;
        if let Some((s, at)) = self.seen.insert(h, (seg, slot)) {
            self.replaced += 1;
            if s == seg {
                self.chunk[at as usize].1 = true;
            } else {
                self.tombstones.entry(s).or_default().push(at);
            }
        }
        self.chunk.push((h, false));
    }

    /// Drops the replaced records of `chunk` (segment `seg`), which is about
    /// to be sent, and records where the others end up.
    fn seal(&mut self, seg: u64, chunk: &mut Vec<Document>) {
        if self.chunk.iter().any(|c| c.1) {
            let mut i = 0;
            chunk.retain(|_| {
                i += 1;
                !self.chunk[i - 1].1
            });
        }
        let mut local = 0u32;
        for &(h, dead) in &self.chunk {
            if !dead {
                self.seen.insert(h, (seg, local));
                local += 1;
            }
        }
        self.chunk.clear();
    }
}

/// The build's store dictionary, trained on the first chunk (several
/// segments sharing one dictionary merge by copying stored records).
fn shared_dictionary(trained: &mut Option<Option<Arc<[u8]>>>, first_chunk: &[Document]) -> Option<Arc<[u8]>> {
    trained
        .get_or_insert_with(|| match train_dictionary(first_chunk, &StoreOptions::default()) {
            Ok(d) => d.map(Arc::from),
            Err(e) => {
                tracing::warn!("no shared store dictionary: {e}");
                None
            }
        })
        .clone()
}

fn build_segment(
    dir: &Path,
    seg: u64,
    docs: &[Document],
    analysis: &Arc<Analysis>,
    dictionary: Option<&[u8]>,
    opts: &IndexOptions,
) -> Result<SegmentMeta> {
    let build = || {
        let mut w = SegmentWriter::new(dir, &segment_name(seg), Arc::clone(analysis), dictionary, opts.format())?;
        if opts.merge {
            w.to_be_merged(MERGE_FILTER_SLACK);
        }
        w.expect_docs(docs.len() as u64);
        for d in docs {
            w.add(d)?;
        }
        tracing::debug!(
            "segment {seg}: {} documents, {} bytes of text, {} bytes in memory",
            docs.len(),
            docs.iter().map(Document::text_bytes).sum::<usize>(),
            w.memory_bytes()
        );
        w.finish()
    };
    // A segment the final merge replaces is never synced: nothing is
    // committed before that merge, and its files are removed once merged
    // (most of their pages never reach the disk). One kept unmerged is
    // synced before the manifest is written.
    match opts.merge {
        true => crate::storage::unsynced(build),
        false => build(),
    }
}

/// Returns the allocator's free memory to the system (glibc keeps freed
/// blocks in its arenas, where they would still count as the process's).
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim has no preconditions; it only returns free
    // memory of the allocator's arenas to the system. Called after every
    // build's inversion (e.g. by `tests/index_build.rs`).
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Threads for `threads` (0: one per core).
fn resolve_threads(threads: usize) -> usize {
    match threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
}

/// The factor on the phrase filters' document ceiling of a build's
/// segments, which its final merge folds into one
/// ([`SegmentWriter::to_be_merged`]).
const MERGE_FILTER_SLACK: u64 = 2;

/// Resident memory of a build besides its segments (the program, the
/// store's dictionary training, each thread's allocator arenas), fitted to
/// measurements (Wikipedia, `--no-merge`, 1 and 2 threads, segments of 16
/// to 100 MiB of text).
const BUILD_BASE_BYTES: usize = 90 << 20;
/// The same, per indexing thread.
const BUILD_THREAD_BYTES: usize = 60 << 20;
/// What a merge holds besides its workers (the merged dictionary's keys,
/// the sources' dictionaries, ids and norms, buffers): a merge of 26
/// Wikipedia segments peaks at 161 MiB on one thread, one of 37 segments
/// of 1M generated documents at 356 MiB (251 MiB of it the sources'
/// mapped dictionaries and pages not yet released).
const MERGE_BASE_BYTES: usize = 400 << 20;
/// What each merge worker adds: a term's postings are streamed into the
/// encoder, so only its encoded sections and the sources' pages read since
/// the last release are held (2 threads instead of 1 add 9 MiB on
/// Wikipedia).
const MERGE_WORKER_BYTES: usize = 48 << 20;

/// The text per in-memory segment that keeps a build on `threads` threads
/// under `budget` bytes of resident memory (aiming at 92% of it). Fitted
/// to measurements on Wikipedia (peak RSS against segment size, 1 and 2
/// threads): each of the `threads + 2` chunks of documents in flight
/// costs about 1.4 times its text, and each thread's in-memory postings
/// about 1.9 times, plus 2.3 times for phrase filters of 9 bytes on every
/// term, in proportion for `filter_bytes`-byte ones (0: no filters). An
/// error when the budget cannot hold even 1 MiB segments.
pub fn segment_bytes_for(budget: usize, threads: usize, filter_bytes: u32) -> Result<usize> {
    let threads = threads.max(1);
    let phrase_filters = filter_bytes > 0;
    let fixed = BUILD_BASE_BYTES + BUILD_THREAD_BYTES * threads;
    // Per byte of segment text, in tenths.
    let postings = 19 + (23 * filter_bytes as usize).div_ceil(9);
    let per_byte = 14 * (threads + 2) + postings * threads;
    let target = budget / 100 * 92;
    let bytes = target.saturating_sub(fixed) * 10 / per_byte;
    if bytes < 1 << 20 {
        let least = fixed + (per_byte << 20) / 10;
        return Err(Error::InvalidArgument(format!(
            "a memory budget of {} MiB is too small for {threads} indexing thread(s){}: at least {} MiB \
             (or fewer threads)",
            budget >> 20,
            if phrase_filters { " with phrase filters" } else { "" },
            (least / 92 * 100).div_ceil(1 << 20)
        )));
    }
    Ok(bytes)
}

/// The merge threads that fit `budget` (at least 1, at most `threads`),
/// by [`MERGE_BASE_BYTES`] and [`MERGE_WORKER_BYTES`].
pub fn merge_threads_for(budget: usize, threads: usize) -> usize {
    (budget.saturating_sub(MERGE_BASE_BYTES) / MERGE_WORKER_BYTES).clamp(1, threads.max(1))
}

/// What a merge holds per source besides its dictionary: the mapped pages
/// around each worker's place in the source's postings (page-cache folios
/// of up to 2 MiB are mapped whole).
const MERGE_SOURCE_BYTES: usize = 2 << 20;

/// The most segments one merge of a build may take under `budget` with
/// `threads` merge threads: a merge walks every source's dictionary at
/// once, so their mapped pages are resident together (304 MB for the 103
/// segments of 1M generated documents built at `--memory-mb 512`), and
/// each worker holds some of every source's postings pages. At least 2.
pub fn merge_fan_in(budget: usize, sources: &[SegmentReader], threads: usize) -> usize {
    let dicts: usize = sources
        .iter()
        .map(|r| r.meta().files.get(ext::TERMS).map_or(0, |f| f.content_len as usize))
        .sum();
    let per_source = dicts / sources.len().max(1) + MERGE_SOURCE_BYTES * threads.max(1);
    // A small budget's merges are of small segments: a quarter of it at least.
    let room = (budget / 100 * 90)
        .saturating_sub(MERGE_FAN_IN_BASE_BYTES)
        .max(budget / 4);
    (room / per_source.max(1)).max(2)
}

/// What a build's merge holds whatever its sources: the merged dictionary
/// being built, the documents' side, the inversion's leftovers.
const MERGE_FAN_IN_BASE_BYTES: usize = 256 << 20;

/// The most threads (at most `cores`) whose build fits `budget` with
/// segments of at least 8 MiB of text: an automatic thread count does not
/// make a budget fail.
pub fn threads_for(budget: usize, cores: usize, filter_bytes: u32) -> usize {
    (1..=cores.max(1))
        .rev()
        .find(|&t| segment_bytes_for(budget, t, filter_bytes).is_ok_and(|b| b >= 8 << 20))
        .unwrap_or(1)
}

fn remove_segment_files(dir: &Path, name: &str) {
    for e in ext::ALL {
        let _ = std::fs::remove_file(dir.join(format!("{name}.{e}")));
    }
}

#[cfg(test)]
mod tests {
    use super::tail_cut;

    /// The chunks a stream of `docs` documents of `doc_bytes` each is cut
    /// into with `segment_bytes` per segment, the share read known exactly.
    fn chunks(docs: u64, doc_bytes: usize, segment_bytes: usize, threads: usize, share_known: bool) -> Vec<usize> {
        let (mut out, mut chunk, mut read) = (Vec::new(), 0usize, 0u64);
        for i in 1..=docs {
            chunk += doc_bytes;
            read += doc_bytes as u64;
            let share = if share_known { i as f64 / docs as f64 } else { 0.0 };
            if chunk >= segment_bytes || tail_cut(chunk, read, share, segment_bytes, threads) {
                out.push(chunk);
                chunk = 0;
            }
        }
        if chunk > 0 {
            out.push(chunk);
        }
        out
    }

    #[test]
    fn the_last_segments_share_the_rest_between_the_threads() {
        // Wikipedia's shape: 597 units of text, segments of 66.6, 2 threads.
        let cut = chunks(5970, 100, 66_600, 2, true);
        assert_eq!(cut.iter().sum::<usize>(), 597_000);
        let full = cut.iter().take_while(|&&c| c >= 66_600).count();
        assert_eq!(full, 7, "{cut:?}");
        // Then each takes about half of what is left, none below a quarter
        // of a segment: [65,400, 32,700, 16,700, 16,200] or so.
        let tail = &cut[full..];
        assert!(tail.len() >= 3, "{cut:?}");
        assert!(tail.windows(2).all(|w| w[0] >= w[1]), "{cut:?}");
        assert!(tail.iter().all(|&c| c >= 66_600 / 4 - 1000), "{cut:?}");
        let after: usize = tail[1..].iter().sum();
        assert!(tail[0].abs_diff(after) <= 200, "{cut:?}");
        // 16 threads: the last ones in sixteenths of what is left.
        let cut = chunks(1_000_000, 100, 1_000_000, 16, true);
        let full = cut.iter().take_while(|&&c| c >= 1_000_000).count();
        assert!((80..=85).contains(&full), "{cut:?}");
        assert!((16..=40).contains(&(cut.len() - full)), "{cut:?}");
        assert!(cut[..cut.len() - 1].iter().all(|&c| c >= 250_000), "{cut:?}");
        // Less text than 16 segments: every thread gets some.
        let cut = chunks(100_000, 100, 1_000_000, 16, true);
        assert!(cut.len() >= 16 && cut.iter().all(|&c| c < 1_000_000), "{cut:?}");
        // Without a share read, or on one thread, whole segments only.
        for (threads, known) in [(2, false), (1, true)] {
            let cut = chunks(5970, 100, 66_600, threads, known);
            assert_eq!(cut.len(), 9, "{cut:?}");
            assert!(cut[..8].iter().all(|&c| c == 66_600));
        }
    }
}
