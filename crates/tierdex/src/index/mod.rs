//! An index: its manifest, its segments and their global statistics.

internal!(deletes);
internal!(lock);
internal!(lease);
internal!(log);
internal!(manifest);
internal!(segment);
internal!(strategy);

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use deletes::Deletes;
pub use manifest::{FieldStats, Manifest, SegmentMeta};
pub use segment::SegmentReader;
pub use strategy::Strategy;

use crate::analysis::Analyzer;
use crate::error::Result;
use crate::schema::{Analysis, DocId, Field, Schema};
use crate::storage::{Storage, TierOptions};

/// Name prefix of the directories inside an index directory where a
/// snapshot pins the files of a commit ([`crate::snapshot`]); a writer
/// opening the index removes those a crash left.
pub const SNAPSHOT_STAGING: &str = "snapshot-staging-";

/// A term with its global statistics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TermStats {
    /// The term.
    pub term: String,
    /// Documents containing it.
    pub doc_freq: u64,
    /// Its occurrences.
    pub total_term_freq: u64,
}

/// How to open an index.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenOptions {
    /// Where index bytes are read from, and how.
    pub tier: TierOptions,
    /// Verify every page of every file at open (otherwise pages are verified
    /// on first read).
    pub verify: bool,
    /// When phrase queries test the index's Bloom filters.
    pub phrase_filters: crate::bloom::FilterUse,
}

/// One segment of an open index with its tombstones (shared between the
/// snapshots of a writer).
#[derive(Clone)]
pub struct SegmentView {
    /// The segment.
    pub reader: Arc<SegmentReader>,
    /// Its deleted documents, if any.
    pub deletes: Option<Arc<Deletes>>,
}

/// An open index: segments searched as one, with global statistics.
///
/// Opened read-only ([`Index::open`]) while a writer works on the index,
/// it reads one committed state: a file the manifest named that the writer
/// replaced or removed meanwhile makes the open start over with the new
/// manifest (a few times, then the error is reported); a reader of an
/// in-place index holds a lease on what it read ([`lease`]).
pub struct Index {
    dir: PathBuf,
    manifest: Manifest,
    segments: Vec<Arc<SegmentReader>>,
    deletes: Vec<Option<Arc<Deletes>>>,
    bases: Vec<DocId>,
    storage: Storage,
    analysis: Arc<Analysis>,
    stats: Vec<FieldStats>,
    max_doc: u64,
    live_docs: u64,
    /// Log records after the manifest's, found at open.
    unapplied: u64,
    _lease: Option<lease::ReaderLease>,
    /// The live documents by the hash of their id, sorted, made at the
    /// first lookup by id.
    by_id: std::sync::OnceLock<Vec<(u64, DocId)>>,
}

/// Opens of a read-only index that start over when a writer changed the
/// manifest under them.
const OPEN_ATTEMPTS: u32 = 20;

impl Index {
    /// Whether `dir` holds an index (a manifest; not checked further).
    pub fn exists(dir: &Path) -> bool {
        dir.join(manifest::MANIFEST).is_file()
    }

    /// Opens the index in `dir` (see the type's doc on a writer working
    /// meanwhile). Warns when the write-ahead log holds acknowledged batches
    /// that the segments do not ([`Index::unapplied_log_records`]).
    pub fn open(dir: &Path, options: OpenOptions) -> Result<Index> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let manifest = Manifest::load(dir)?;
            let generation = manifest.generation;
            let checksum = manifest.checksum.clone();
            let lease = match manifest.segments.iter().any(|s| s.chain.is_some()) {
                true => match lease::ReaderLease::take(dir, generation) {
                    Ok(l) => {
                        // The writer may have reused space of this
                        // generation before it saw the lease: start over.
                        if Manifest::load(dir)?.generation >= generation + 2 && attempt < OPEN_ATTEMPTS {
                            continue;
                        }
                        Some(l)
                    }
                    Err(e) => {
                        tracing::warn!(
                            "cannot take a reader's lease on {} ({e}): a writer working on the index meanwhile \
                             may make this reader's answers fail",
                            dir.display()
                        );
                        None
                    }
                },
                false => None,
            };
            match Self::open_manifest(dir, manifest, options) {
                Ok(mut index) => {
                    index._lease = lease;
                    index.unapplied = index.check_log();
                    return Ok(index);
                }
                Err(e) => {
                    let moved = Manifest::load(dir).is_ok_and(|m| m.checksum != checksum);
                    if !moved || attempt >= OPEN_ATTEMPTS {
                        return Err(e);
                    }
                    tracing::debug!("{} changed while opening it ({e}): opening it again", dir.display());
                    std::thread::sleep(std::time::Duration::from_millis(attempt as u64));
                }
            }
        }
    }

    /// Counts the log records after the manifest's, warning when there are
    /// any (or when the log is damaged).
    fn check_log(&self) -> u64 {
        match log::unapplied(&self.dir, self.manifest.applied_seq) {
            Ok(found) => {
                if let Some(problem) = &found.problem {
                    tracing::warn!("the write-ahead log of {} is damaged: {problem}", self.dir.display());
                }
                if found.unapplied > 0 {
                    tracing::warn!(
                        "{} acknowledged batches are only in the write-ahead log of {}: this reader does not \
                         see them; a writer applies them (a running one when it flushes, else open the index \
                         with one: tierdex add, delete, compact or serve)",
                        found.unapplied,
                        self.dir.display()
                    );
                }
                found.unapplied
            }
            Err(e) => {
                tracing::warn!("cannot read the write-ahead log of {}: {e}", self.dir.display());
                0
            }
        }
    }

    /// Acknowledged batches found at open in the write-ahead log after the
    /// last one the segments hold: changes this index does not show (a
    /// writer is running and has not flushed them, or stopped before it
    /// did; the next writer to open the index applies them). Always 0 for a
    /// writer's snapshots, which hold them.
    pub fn unapplied_log_records(&self) -> u64 {
        self.unapplied
    }

    fn open_manifest(dir: &Path, manifest: Manifest, options: OpenOptions) -> Result<Index> {
        let storage = Storage::new(options.tier)?;
        let analysis = Analysis::new(manifest.schema(), manifest.analyzer);
        let mut views = Vec::with_capacity(manifest.segments.len());
        for meta in &manifest.segments {
            let seg = SegmentReader::open(dir, meta, manifest.postings_format(), &storage)?;
            if options.verify {
                seg.verify_all()?;
            }
            let deletes = Deletes::load(dir, meta, &seg, &analysis, &storage)?.map(Arc::new);
            views.push(SegmentView {
                reader: Arc::new(seg),
                deletes,
            });
        }
        Index::assemble(dir, manifest, storage, views)
    }

    /// An index over already open segments (a writer's snapshot: the
    /// manifest gives the options, `views` the segments in document order).
    pub fn assemble(dir: &Path, manifest: Manifest, storage: Storage, views: Vec<SegmentView>) -> Result<Index> {
        let mut bases = Vec::with_capacity(views.len());
        let analysis = Arc::new(Analysis::new(manifest.schema(), manifest.analyzer));
        let mut stats = vec![FieldStats::default(); analysis.schema().len()];
        let (mut base, mut live) = (0u64, 0u64);
        let (mut segments, mut deletes) = (Vec::with_capacity(views.len()), Vec::with_capacity(views.len()));
        for v in views {
            let meta = v.reader.meta();
            let del = v.deletes.as_deref();
            for f in analysis.schema().fields() {
                let s = &mut stats[f.index()];
                s.add(&meta.field_stats(f));
                if let Some(d) = del {
                    let gone = d.field(f);
                    s.doc_count -= gone.doc_count;
                    s.sum_total_term_freq -= gone.sum_total_term_freq;
                }
            }
            bases.push(base as DocId);
            base += meta.max_doc as u64;
            live += (meta.max_doc - del.map_or(0, |d| d.count())) as u64;
            segments.push(v.reader);
            deletes.push(v.deletes.filter(|d| !d.is_empty()));
        }
        if base >= crate::schema::TERMINATED as u64 {
            return Err(crate::error::Error::corrupt(
                dir.join(manifest::MANIFEST),
                "more than 2^32-1 documents",
            ));
        }
        Ok(Index {
            dir: dir.to_path_buf(),
            analysis,
            manifest,
            segments,
            deletes,
            bases,
            storage,
            stats,
            max_doc: base,
            live_docs: live,
            unapplied: 0,
            _lease: None,
            by_id: std::sync::OnceLock::new(),
        })
    }

    /// Tombstones of segment `i`, if any of its documents is deleted.
    pub fn deletes(&self, i: usize) -> Option<&Deletes> {
        self.deletes.get(i).and_then(|d| d.as_deref())
    }

    /// True if global document `doc` is deleted (or does not exist).
    pub fn is_deleted(&self, doc: DocId) -> bool {
        match self.locate(doc) {
            Some((i, local)) => self.deletes(i).is_some_and(|d| d.contains(local)),
            None => true,
        }
    }

    /// The storage the index is read from (tier, buffer pool).
    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    /// The index directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The manifest the index was opened with.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Segments in document order.
    pub fn segments(&self) -> &[Arc<SegmentReader>] {
        &self.segments
    }

    /// First global document number of each segment.
    pub fn bases(&self) -> &[DocId] {
        &self.bases
    }

    /// The index's schema.
    pub fn schema(&self) -> &Schema {
        self.analysis.schema()
    }

    /// The schema with each field's analyzer.
    pub fn analysis(&self) -> &Arc<Analysis> {
        &self.analysis
    }

    /// The analyzer of `field`.
    pub fn analyzer(&self, field: Field) -> &Analyzer {
        self.analysis.analyzer(field)
    }

    /// Global statistics of `field`.
    pub fn field_stats(&self, field: Field) -> FieldStats {
        self.stats.get(field.index()).copied().unwrap_or_default()
    }

    /// Documents numbered in the index, deleted ones included (global
    /// document numbers are below this).
    pub fn num_docs(&self) -> u64 {
        self.max_doc
    }

    /// Documents not deleted.
    pub fn live_docs(&self) -> u64 {
        self.live_docs
    }

    /// Global document frequency and total term frequency of a term key
    /// (over live documents).
    pub fn term_stats(&self, key: &[u8]) -> Result<(u64, u64)> {
        let (mut df, mut ttf) = (0u64, 0u64);
        for (seg, del) in self.segments.iter().zip(&self.deletes) {
            if let Some(info) = seg.term_info(key)? {
                df += info.region.doc_freq as u64;
                ttf += info.region.total_term_freq;
                if let Some(d) = del {
                    let (gdf, gttf) = d.term(key);
                    df -= gdf;
                    ttf -= gttf;
                }
            }
        }
        Ok((df, ttf))
    }

    /// Global document frequency of a term key over live documents: what
    /// planning and single-term counts need, read from the dictionaries
    /// alone where they hold it.
    pub fn doc_freq(&self, key: &[u8]) -> Result<u64> {
        let mut df = 0u64;
        for (seg, del) in self.segments.iter().zip(&self.deletes) {
            let n = seg.doc_freq(key)?;
            if n > 0 {
                df += n;
                if let Some(d) = del {
                    df -= d.term(key).0;
                }
            }
        }
        Ok(df)
    }

    /// Every term of `field` with its global document frequency and total
    /// term frequency, in term order (summed over segments).
    pub fn field_terms(&self, field: Field) -> Result<Vec<TermStats>> {
        let lo = [field.id()];
        let hi = [field.id() + 1];
        let mut all: std::collections::BTreeMap<Vec<u8>, (u64, u64)> = Default::default();
        for (i, seg) in self.segments.iter().enumerate() {
            let mut add = |key: &[u8], df: u64, ttf: u64| {
                let (gdf, gttf) = self.deletes[i].as_ref().map_or((0, 0), |d| d.term(key));
                let e = all.entry(key.to_vec()).or_default();
                e.0 += df - gdf;
                e.1 += ttf - gttf;
            };
            seg.source().terms_between(&lo, &hi, &mut add)?;
        }
        Ok(all
            .into_iter()
            .filter(|(_, (df, _))| *df > 0)
            .map(|(key, (df, ttf))| TermStats {
                term: String::from_utf8_lossy(&key[1..]).into_owned(),
                doc_freq: df,
                total_term_freq: ttf,
            })
            .collect())
    }

    /// The live document with external id `id`. The first lookup reads
    /// every id (the id columns) once, to sort them by their hashes.
    pub fn find_id(&self, id: &str) -> Result<Option<DocId>> {
        if self.by_id.get().is_none() {
            let mut all = Vec::with_capacity(self.live_docs as usize);
            let mut buf = String::new();
            for (i, seg) in self.segments.iter().enumerate() {
                for local in 0..seg.max_doc() {
                    if self.deletes(i).is_some_and(|d| d.contains(local)) {
                        continue;
                    }
                    seg.external_id(local, &mut buf)?;
                    all.push((xxhash_rust::xxh3::xxh3_64(buf.as_bytes()), self.bases[i] + local));
                }
            }
            all.sort_unstable();
            let _ = self.by_id.set(all);
        }
        let all = self.by_id.get().expect("set above");
        let h = xxhash_rust::xxh3::xxh3_64(id.as_bytes());
        let mut buf = String::new();
        for &(_, doc) in &all[all.partition_point(|e| e.0 < h)..all.partition_point(|e| e.0 <= h)] {
            let (i, local) = self.locate(doc).expect("a live document");
            self.segments[i].external_id(local, &mut buf)?;
            if buf == id {
                return Ok(Some(doc));
            }
        }
        Ok(None)
    }

    /// Segment holding global document `doc`, and the local number.
    pub fn locate(&self, doc: DocId) -> Option<(usize, DocId)> {
        let i = self.bases.partition_point(|&b| b <= doc).checked_sub(1)?;
        let local = doc - self.bases[i];
        (local < self.segments[i].max_doc()).then_some((i, local))
    }
}
