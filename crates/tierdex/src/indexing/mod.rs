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

pub mod merge;
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
use crate::index::manifest::{Manifest, SegmentMeta, MANIFEST};
use crate::index::segment::ext;
use crate::layout::{Codec, Format, Layout};
use crate::schema::{Analysis, Document, Schema};
use crate::store::{train_dictionary, StoreOptions};
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
    /// Maximum text bytes per segment (bounds the builder's memory).
    pub segment_bytes: usize,
    /// Indexing threads (0 = all cores).
    pub threads: usize,
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
            threads: 0,
            merge: false,
            overwrite: false,
            layout: Layout::default(),
            codec: Codec::default(),
            bloom: Some(BloomParams::default()),
            strategy: Default::default(),
        }
    }
}

/// What a build did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BuildStats {
    /// Documents indexed.
    pub docs: u64,
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
type Chunk = (u64, Vec<Document>, Option<Arc<[u8]>>);

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
    if opts.segment_docs == 0 || opts.segment_bytes == 0 {
        return Err(Error::InvalidArgument("segment size limits must be positive".into()));
    }
    if opts.strategy.in_place() && opts.layout != crate::layout::Layout::Grouped {
        return Err(Error::InvalidArgument(format!(
            "the {} strategy keeps each term's postings as grouped regions: use the grouped layout",
            opts.strategy
        )));
    }
    prepare_dir(dir, opts.overwrite)?;
    let threads = match opts.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let analysis = Arc::new(Analysis::new(opts.schema.clone(), opts.analyzer));
    let started = Instant::now();
    let results: Mutex<Vec<(u64, SegmentMeta)>> = Mutex::new(Vec::new());
    let worker_error: Mutex<Option<Error>> = Mutex::new(None);
    let failed = AtomicBool::new(false);
    let mut read_error = None;
    let (mut total_docs, mut total_bytes) = (0u64, 0u64);
    let mut segments = 0u64;

    std::thread::scope(|scope| {
        // Whole segments go to whichever worker is free; the reader cuts
        // them from the input in order, so numbering follows the input.
        let (tx, rx) = bounded::<Chunk>(1);
        for _ in 0..threads {
            let (rx, analysis, results, worker_error, failed) =
                (rx.clone(), &analysis, &results, &worker_error, &failed);
            scope.spawn(move || {
                for (seg, docs, dict) in rx.iter() {
                    if failed.load(Ordering::Relaxed) {
                        continue;
                    }
                    match build_segment(dir, seg, &docs, analysis, dict.as_deref(), opts) {
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
            if let Err(e) = opts.schema.check(&doc) {
                read_error = Some(e);
                break;
            }
            let bytes = doc.text_bytes();
            chunk_bytes += bytes;
            total_docs += 1;
            total_bytes += bytes as u64;
            chunk.push(doc);
            if total_docs % 1024 == 0 {
                progress(Progress::Indexed {
                    docs: total_docs,
                    bytes: total_bytes,
                });
            }
            if chunk.len() >= opts.segment_docs || chunk_bytes >= opts.segment_bytes {
                let dict = shared_dictionary(&mut dictionary, &chunk);
                // A send fails only when every worker is gone (after an error).
                let _ = tx.send((segments, std::mem::take(&mut chunk), dict));
                segments += 1;
                chunk_bytes = 0;
            }
        }
        if !chunk.is_empty() && read_error.is_none() {
            let dict = shared_dictionary(&mut dictionary, &chunk);
            let _ = tx.send((segments, chunk, dict));
            segments += 1;
        }
        progress(Progress::Indexed {
            docs: total_docs,
            bytes: total_bytes,
        });
        drop(tx);
    });
    let index_secs = started.elapsed().as_secs_f64();

    let fail = |e: Error| {
        remove_segments(dir, segments + 1);
        Err(e)
    };
    if let Some(e) = read_error {
        return fail(e);
    }
    if let Some(e) = worker_error.into_inner().unwrap() {
        return fail(e);
    }
    if total_docs == 0 {
        let _ = std::fs::remove_dir(dir);
        return Err(Error::InvalidArgument(
            "the corpus is empty: no documents to index".into(),
        ));
    }
    let mut metas = results.into_inner().unwrap();
    metas.sort_by_key(|(s, _)| *s);
    let mut metas: Vec<SegmentMeta> = metas.into_iter().map(|(_, m)| m).collect();
    let mut next_segment = segments;

    let merge_started = Instant::now();
    if opts.merge && metas.len() > 1 {
        progress(Progress::MergeStarted { segments: metas.len() });
        let name = segment_name(next_segment);
        next_segment += 1;
        let merged = match merge::merge_segments(dir, &metas, &name, opts.format(), &|terms| {
            progress(Progress::Merging { terms })
        }) {
            Ok(m) => m,
            Err(e) => return fail(e),
        };
        for m in &metas {
            remove_segment_files(dir, &m.name);
        }
        metas = vec![merged];
    }
    let merge_secs = merge_started.elapsed().as_secs_f64();

    let mut manifest = Manifest::with_schema(opts.schema.clone(), opts.analyzer, opts.format());
    manifest.strategy = opts.strategy;
    manifest.segments = metas;
    manifest.next_segment = next_segment;
    manifest.store(dir)?;
    Ok(BuildStats {
        docs: total_docs,
        text_bytes: total_bytes,
        segments: manifest.segments.len(),
        index_bytes: manifest.segments.iter().map(|s| s.bytes()).sum(),
        index_secs,
        merge_secs,
    })
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
    let mut w = SegmentWriter::new(dir, &segment_name(seg), Arc::clone(analysis), dictionary, opts.format())?;
    for d in docs {
        w.add(d)?;
    }
    w.finish()
}

/// Makes sure `dir` can receive a new index.
fn prepare_dir(dir: &Path, overwrite: bool) -> Result<()> {
    if !dir.exists() {
        return crate::storage::create_dir_all(dir).map_err(|e| Error::io(dir, e));
    }
    if !dir.is_dir() {
        return Err(Error::InvalidArgument(format!(
            "{} exists and is not a directory",
            dir.display()
        )));
    }
    let entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .filter_map(|e| e.ok())
        .collect();
    if entries.is_empty() {
        return Ok(());
    }
    if !dir.join(MANIFEST).exists() {
        return Err(Error::Conflict(format!(
            "{} is not empty and holds no tierdex index; refusing to write into it",
            dir.display()
        )));
    }
    if !overwrite {
        return Err(Error::Conflict(format!(
            "{} already holds an index (pass --force to replace it)",
            dir.display()
        )));
    }
    for e in entries {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("seg") || name.starts_with(MANIFEST) || name.starts_with("wal-") {
            std::fs::remove_file(e.path()).map_err(|err| Error::io(e.path(), err))?;
        }
    }
    Ok(())
}

fn remove_segment_files(dir: &Path, name: &str) {
    for e in ext::ALL {
        let _ = std::fs::remove_file(dir.join(format!("{name}.{e}")));
    }
}

fn remove_segments(dir: &Path, count: u64) {
    for n in 0..=count {
        remove_segment_files(dir, &segment_name(n));
    }
}
