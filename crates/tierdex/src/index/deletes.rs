//! Tombstones: the deleted documents of one segment, and what they take out
//! of the index's statistics (DESIGN §5).
//!
//! A deleted document stays in its segment's postings until compaction or a
//! merge rewrites the segment; queries skip it. So that BM25 scores equal
//! those of an index built from the live documents alone, the deleted
//! documents are re-analysed from the document store and their
//! contribution (per field: documents and tokens; per term: document
//! frequency and total term frequency) is subtracted from every statistic.
//!
//! On disk, `<segment>.<generation>.del` holds the sorted local numbers of
//! the deleted documents as little-endian u32s in a checksummed index file;
//! the manifest names the generation. The statistics are recomputed when the
//! index is opened (the cost is proportional to the tombstones, which
//! compaction bounds).

use std::path::Path;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::common::BitSet;
use crate::error::{Error, Result};
use crate::index::manifest::{FieldStats, SegmentMeta};
use crate::index::segment::SegmentReader;
use crate::schema::{Analysis, Document, Field};
use crate::storage::{FileInfo, FileWriter, Storage};

/// What the manifest records about a segment's tombstones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeletesMeta {
    /// Generation: the file is `<segment>.<generation>.del`.
    pub generation: u64,
    /// Deleted documents.
    pub count: u32,
    /// Size and checksum of the file.
    pub file: FileInfo,
}

impl DeletesMeta {
    /// File name of these tombstones for segment `segment`.
    pub fn file_name(&self, segment: &str) -> String {
        Self::name_for(segment, self.generation)
    }

    /// File name of generation `generation` of `segment`'s tombstones.
    pub fn name_for(segment: &str, generation: u64) -> String {
        format!("{segment}.{generation}.del")
    }
}

/// The deleted documents of one segment and their statistics.
#[derive(Debug, Clone)]
pub struct Deletes {
    bits: BitSet,
    docs: Vec<u32>,
    fields: Vec<FieldStats>,
    terms: FxHashMap<Box<[u8]>, (u64, u64)>,
}

impl Deletes {
    /// No document of a segment of `max_doc` documents deleted.
    pub fn none(max_doc: u32) -> Deletes {
        Deletes {
            bits: BitSet::new(max_doc),
            docs: Vec::new(),
            fields: Default::default(),
            terms: FxHashMap::default(),
        }
    }

    /// These tombstones plus `docs` of `seg` (documents already deleted or
    /// out of range are ignored), reading and analysing each new one.
    pub fn with(&self, seg: &SegmentReader, analysis: &Analysis, docs: &[u32]) -> Result<Deletes> {
        let mut out = self.clone();
        for &d in docs {
            if d >= seg.max_doc() || out.bits.contains(d) {
                continue;
            }
            let doc = seg.document(d)?;
            out.subtract(analysis, &doc);
            out.bits.insert(d);
            out.docs.push(d);
        }
        out.docs.sort_unstable();
        Ok(out)
    }

    fn subtract(&mut self, analysis: &Analysis, doc: &Document) {
        let mut counts: FxHashMap<Vec<u8>, u64> = FxHashMap::default();
        let schema = analysis.schema();
        if self.fields.len() < schema.len() {
            self.fields.resize(schema.len(), FieldStats::default());
        }
        for field in schema.fields() {
            counts.clear();
            let mut len = 0u64;
            analysis.analyze_values(field, doc, |t| {
                let mut key = Vec::with_capacity(t.term.len() + 1);
                key.push(field.id());
                key.extend_from_slice(t.term.as_bytes());
                *counts.entry(key).or_default() += 1;
                len += 1;
            });
            if len > 0 {
                let f = &mut self.fields[field.index()];
                f.doc_count += 1;
                f.sum_total_term_freq += len;
            }
            for (key, n) in counts.drain() {
                let e = self.terms.entry(key.into_boxed_slice()).or_default();
                e.0 += 1;
                e.1 += n;
            }
        }
    }

    /// True if local document `doc` is deleted.
    /// The same tombstones over a segment grown to `max_doc` documents (a
    /// chained segment after a flush).
    pub fn grown(&self, max_doc: u32) -> Deletes {
        let mut out = self.clone();
        out.bits = BitSet::new(max_doc);
        for &d in &self.docs {
            out.bits.insert(d);
        }
        out
    }

    #[inline]
    pub fn contains(&self, doc: u32) -> bool {
        self.bits.contains(doc)
    }

    /// The deleted documents as a bitset over the segment.
    pub fn bits(&self) -> &BitSet {
        &self.bits
    }

    /// The deleted documents in increasing order.
    pub fn docs(&self) -> &[u32] {
        &self.docs
    }

    /// Number of deleted documents.
    pub fn count(&self) -> u32 {
        self.docs.len() as u32
    }

    /// True when nothing is deleted.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// What the deleted documents contributed to `field`'s statistics.
    pub fn field(&self, field: Field) -> FieldStats {
        self.fields.get(field.index()).copied().unwrap_or_default()
    }

    /// Document frequency and total term frequency the deleted documents
    /// contributed to term `key`.
    pub fn term(&self, key: &[u8]) -> (u64, u64) {
        self.terms.get(key).copied().unwrap_or_default()
    }

    /// Writes the tombstones to `path` (synced).
    pub fn write(&self, path: &Path) -> Result<FileInfo> {
        let mut w = FileWriter::create(path)?;
        let mut bytes = Vec::with_capacity(self.docs.len() * 4);
        for d in &self.docs {
            bytes.extend_from_slice(&d.to_le_bytes());
        }
        w.write_all(&bytes)?;
        w.finish()
    }

    /// Loads the tombstones the manifest lists for `seg` (in `dir`),
    /// checking the file against the manifest.
    pub fn load(
        dir: &Path,
        meta: &SegmentMeta,
        seg: &SegmentReader,
        analysis: &Analysis,
        storage: &Storage,
    ) -> Result<Option<Deletes>> {
        let Some(dm) = &meta.deletes else {
            return Ok(None);
        };
        let path = dir.join(dm.file_name(&meta.name));
        let f = storage.open(&path)?;
        if f.len() as u64 != dm.file.content_len || f.checksum() != dm.file.checksum {
            return Err(Error::corrupt(
                &path,
                "tombstone file does not match the manifest (size or checksum differs)",
            ));
        }
        let mut buf = Vec::new();
        let bytes = f.read(0..f.len(), &mut buf)?;
        if bytes.len() != dm.count as usize * 4 {
            return Err(Error::corrupt(&path, "tombstone count does not match the manifest"));
        }
        let mut docs = Vec::with_capacity(dm.count as usize);
        for c in bytes.chunks_exact(4) {
            let d = u32::from_le_bytes(c.try_into().unwrap());
            if d >= meta.max_doc || docs.last().is_some_and(|&p| p >= d) {
                return Err(Error::corrupt(&path, "tombstones out of order or out of range"));
            }
            docs.push(d);
        }
        Deletes::none(meta.max_doc).with(seg, analysis, &docs).map(Some)
    }
}
