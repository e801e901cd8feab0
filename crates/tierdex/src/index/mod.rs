//! An index: its manifest, its segments and their global statistics.

pub mod manifest;
pub mod segment;

use std::path::{Path, PathBuf};

pub use manifest::{FieldStats, Manifest, SegmentMeta};
pub use segment::SegmentReader;

use crate::analysis::Analyzer;
use crate::error::Result;
use crate::schema::{DocId, Field};
use crate::storage::{Storage, TierOptions};

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
}

/// An open index: segments searched as one, with global statistics.
pub struct Index {
    dir: PathBuf,
    manifest: Manifest,
    segments: Vec<SegmentReader>,
    bases: Vec<DocId>,
    storage: Storage,
    analyzer: Analyzer,
    stats: [FieldStats; Field::COUNT],
}

impl Index {
    /// Opens the index in `dir`.
    pub fn open(dir: &Path, options: OpenOptions) -> Result<Index> {
        let manifest = Manifest::load(dir)?;
        let storage = Storage::new(options.tier)?;
        let mut segments = Vec::with_capacity(manifest.segments.len());
        let mut bases = Vec::with_capacity(manifest.segments.len());
        let mut stats = [FieldStats::default(); Field::COUNT];
        let mut base: u64 = 0;
        for meta in &manifest.segments {
            let seg = SegmentReader::open(dir, meta, manifest.layout, manifest.codec, &storage)?;
            if options.verify {
                seg.verify_all()?;
            }
            for f in Field::ALL {
                stats[f.id() as usize].add(&meta.fields[f.id() as usize]);
            }
            bases.push(base as DocId);
            base += meta.max_doc as u64;
            segments.push(seg);
        }
        if base >= crate::schema::TERMINATED as u64 {
            return Err(crate::Error::corrupt(
                dir.join(manifest::MANIFEST),
                "more than 2^32-1 documents",
            ));
        }
        Ok(Index {
            dir: dir.to_path_buf(),
            analyzer: Analyzer::new(manifest.analyzer),
            manifest,
            segments,
            bases,
            storage,
            stats,
        })
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
    pub fn segments(&self) -> &[SegmentReader] {
        &self.segments
    }

    /// First global document number of each segment.
    pub fn bases(&self) -> &[DocId] {
        &self.bases
    }

    /// The analyzer the index was built with.
    pub fn analyzer(&self) -> &Analyzer {
        &self.analyzer
    }

    /// Global statistics of `field`.
    pub fn field_stats(&self, field: Field) -> FieldStats {
        self.stats[field.id() as usize]
    }

    /// Total documents.
    pub fn num_docs(&self) -> u64 {
        self.manifest.num_docs()
    }

    /// Global document frequency and total term frequency of a term key.
    pub fn term_stats(&self, key: &[u8]) -> Result<(u64, u64)> {
        let (mut df, mut ttf) = (0u64, 0u64);
        for seg in &self.segments {
            if let Some(info) = seg.term_info(key)? {
                df += info.region.doc_freq as u64;
                ttf += info.region.total_term_freq;
            }
        }
        Ok((df, ttf))
    }

    /// Every term of `field` with its global document frequency and total
    /// term frequency, in term order (summed over segments).
    pub fn field_terms(&self, field: Field) -> Result<Vec<TermStats>> {
        use fst::{IntoStreamer, Streamer};
        let lo = [field.id()];
        let hi = [field.id() + 1];
        let mut op = fst::map::OpBuilder::new();
        for seg in &self.segments {
            op = op.add(seg.terms().fst().range().ge(lo).lt(hi).into_stream());
        }
        let mut union = op.union();
        let mut out = Vec::new();
        while let Some((key, hits)) = union.next() {
            let (mut df, mut ttf) = (0u64, 0u64);
            for h in hits {
                let seg = &self.segments[h.index];
                let info = seg.postings().resolve(seg.terms().term_ref(h.value))?;
                df += info.region.doc_freq as u64;
                ttf += info.region.total_term_freq;
            }
            let term = String::from_utf8_lossy(&key[1..]).into_owned();
            out.push(TermStats {
                term,
                doc_freq: df,
                total_term_freq: ttf,
            });
        }
        Ok(out)
    }

    /// Segment holding global document `doc`, and the local number.
    pub fn locate(&self, doc: DocId) -> Option<(usize, DocId)> {
        let i = self.bases.partition_point(|&b| b <= doc).checked_sub(1)?;
        let local = doc - self.bases[i];
        (local < self.segments[i].max_doc()).then_some((i, local))
    }
}
