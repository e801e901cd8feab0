//! One immutable segment opened for reading.

use std::path::Path;
use std::sync::Arc;

use crate::bloom::FilterShape;
use crate::column::Columns;
use crate::error::{Error, Result};
use crate::index::manifest::{SegmentMeta, CHAIN_EXT, CHAIN_LOG_EXT};
use crate::layout::chain::{self, Chain};
use crate::layout::chained::ChainPostings;
use crate::layout::{Format, PostingsFiles, PostingsSource, TermCursor};
use crate::schema::Field;
use crate::storage::{IndexFile, Storage};
use crate::store::{IdsReader, StoreReader};
use crate::termdict::{TermDict, TermInfo};

/// Extensions of a segment's files.
pub mod ext {
    pub use crate::layout::postings::ext::{BLOOM, DOCS, PAYLOADS, POSITIONS, POSTINGS, TERMS, TERM_INFOS};
    /// Field-length norms.
    pub const NORMS: &str = "nrm";
    /// Document store data.
    pub const STORE: &str = "sto";
    /// Document store index.
    pub const STORE_INDEX: &str = "sti";
    /// External ids of the documents (the id column).
    pub const IDS: &str = "ids";
    /// Keyword, number, date and boolean values (doc values and points).
    pub const COLUMNS: &str = "col";
    /// Every extension any layout writes.
    pub const ALL: [&str; 12] = [
        TERMS,
        TERM_INFOS,
        POSTINGS,
        DOCS,
        POSITIONS,
        PAYLOADS,
        BLOOM,
        NORMS,
        STORE,
        STORE_INDEX,
        IDS,
        COLUMNS,
    ];
}

/// The documents of a segment, or of one part of a chained segment: its
/// stored documents and ids.
pub struct DocPart {
    /// Number of the part's first document in the segment.
    pub base: u32,
    /// Documents in the part.
    pub max_doc: u32,
    store: StoreReader,
    ids: Option<IdsReader>,
    columns: Option<Columns>,
}

impl DocPart {
    /// The part's columns (`None`: its segment's schema had only text).
    pub fn columns(&self) -> Option<&Columns> {
        self.columns.as_ref()
    }
}

/// A segment's readers.
pub struct SegmentReader {
    meta: SegmentMeta,
    postings: Box<dyn PostingsSource>,
    /// Field-major norms: a run of one byte per document for each field
    /// with norms.
    norms: Box<[u8]>,
    /// By field id: the field's run in `norms`.
    norm_runs: Vec<Option<u32>>,
    parts: Vec<Arc<DocPart>>,
}

/// Opens one file of `meta` in `dir`, checking it against the manifest.
fn open_file(dir: &Path, meta: &SegmentMeta, storage: &Storage, e: &str) -> Result<IndexFile> {
    let path = dir.join(meta.file_name(e));
    let f = storage.open(&path)?;
    let expected = meta.files.get(e).ok_or_else(|| {
        Error::corrupt(
            dir.join("manifest.json"),
            format!("segment {} lists no .{e} file", meta.name),
        )
    })?;
    if f.len() as u64 != expected.content_len || f.checksum() != expected.checksum {
        return Err(Error::corrupt(
            &path,
            "file does not match the manifest (size or checksum differs): replaced or damaged",
        ));
    }
    Ok(f)
}

/// Opens the norms, store, ids and columns of `meta` (a segment or a
/// chain's part).
fn open_docs(dir: &Path, meta: &SegmentMeta, storage: &Storage, base: u32) -> Result<(Box<[u8]>, DocPart)> {
    let norms_file = open_file(dir, meta, storage, ext::NORMS)?;
    if norms_file.len() != meta.max_doc as usize * meta.normed_fields().len() {
        return Err(Error::corrupt(
            norms_file.path(),
            "norms size does not match the document count",
        ));
    }
    // A byte per document and field, read on every scored hit: kept in memory.
    let mut buf = Vec::new();
    let norms: Box<[u8]> = norms_file.read(0..norms_file.len(), &mut buf)?.into();
    open_file(dir, meta, storage, ext::STORE)?;
    open_file(dir, meta, storage, ext::STORE_INDEX)?;
    let store = StoreReader::open_on(
        &dir.join(meta.file_name(ext::STORE)),
        &dir.join(meta.file_name(ext::STORE_INDEX)),
        storage,
    )?;
    if store.num_docs() != meta.max_doc {
        return Err(Error::corrupt(
            dir.join(meta.file_name(ext::STORE_INDEX)),
            "stored document count does not match the manifest",
        ));
    }
    // Segments written before the id column existed read ids from the store.
    let ids = match meta.files.contains_key(ext::IDS) {
        true => Some(IdsReader::open(open_file(dir, meta, storage, ext::IDS)?, meta.max_doc)?),
        false => None,
    };
    let columns = match meta.files.contains_key(ext::COLUMNS) {
        true => Some(Columns::open(open_file(dir, meta, storage, ext::COLUMNS)?, meta.max_doc)?),
        false => None,
    };
    Ok((
        norms,
        DocPart {
            base,
            max_doc: meta.max_doc,
            store,
            ids,
            columns,
        },
    ))
}

/// By field id, the run of each field of `fields` (field ids in run order).
fn runs_of(fields: &[u8]) -> Vec<Option<u32>> {
    let mut runs = vec![None; fields.iter().map(|&f| f as usize + 1).max().unwrap_or(0)];
    for (i, &f) in fields.iter().enumerate() {
        runs[f as usize] = Some(i as u32);
    }
    runs
}

/// Field-major norms of the fields `all` over consecutive parts, from
/// each part's own (`(norms, its fields in run order, documents)`; a part
/// without a field has zero norms for it).
fn concat_norms(parts: &[(&[u8], Vec<u8>, u32)], all: &[u8]) -> Box<[u8]> {
    let total: usize = parts.iter().map(|p| p.2 as usize).sum();
    let mut out = Vec::with_capacity(total * all.len());
    for f in all {
        for (norms, fields, n) in parts {
            let n = *n as usize;
            match fields.iter().position(|g| g == f).and_then(|r| norms.get(r * n..(r + 1) * n)) {
                Some(run) => out.extend_from_slice(run),
                None => out.resize(out.len() + n, 0),
            }
        }
    }
    out.into_boxed_slice()
}

impl SegmentReader {
    /// Opens the files of `meta` in `dir`, checking them against the manifest.
    pub fn open(dir: &Path, meta: &SegmentMeta, format: Format, storage: &Storage) -> Result<SegmentReader> {
        if meta.chain.is_some() {
            let chain = open_chain(dir, meta, false)?;
            return SegmentReader::open_chained(dir, meta, format, storage, chain, None);
        }
        let postings = PostingsFiles::open(format, |e| open_file(dir, meta, storage, e))?;
        let (norms, part) = open_docs(dir, meta, storage, 0)?;
        Ok(SegmentReader {
            meta: meta.clone(),
            postings: Box::new(postings),
            norms,
            norm_runs: runs_of(&meta.normed_fields()),
            parts: vec![Arc::new(part)],
        })
    }

    /// Opens chained segment `meta` over `chain` (shared with its writer);
    /// the parts `previous` already opened (of an earlier snapshot of the
    /// same segment) are reused.
    pub fn open_chained(
        dir: &Path,
        meta: &SegmentMeta,
        format: Format,
        storage: &Storage,
        chain: Arc<Chain>,
        previous: Option<&SegmentReader>,
    ) -> Result<SegmentReader> {
        let cm = meta
            .chain
            .as_ref()
            .ok_or_else(|| Error::Internal(format!("segment {} is not chained", meta.name)))?;
        let mut parts = Vec::with_capacity(cm.parts.len());
        let mut norms: Vec<Box<[u8]>> = Vec::with_capacity(cm.parts.len());
        let mut base = 0u32;
        for (i, pm) in cm.parts.iter().enumerate() {
            let reuse = previous
                .and_then(|p| p.parts.get(i))
                .filter(|p| p.max_doc == pm.max_doc && p.base == base);
            match reuse {
                Some(p) => {
                    let prev = previous.expect("reused from a previous reader");
                    let mut own = Vec::with_capacity(p.max_doc as usize * pm.normed_fields().len());
                    for f in pm.normed_fields().into_iter().map(Field::from_id) {
                        let all = prev.norms(f);
                        own.extend_from_slice(&all[p.base as usize..(p.base + p.max_doc) as usize]);
                    }
                    norms.push(own.into_boxed_slice());
                    parts.push(p.clone());
                }
                None => {
                    let (n, part) = open_docs(dir, pm, storage, base)?;
                    norms.push(n);
                    parts.push(Arc::new(part));
                }
            }
            base = base
                .checked_add(pm.max_doc)
                .ok_or_else(|| Error::corrupt(dir.join("manifest.json"), "chained segment too large"))?;
        }
        if base != meta.max_doc {
            return Err(Error::corrupt(
                dir.join("manifest.json"),
                format!("segment {}: its parts do not add up to its documents", meta.name),
            ));
        }
        let pairs: Vec<(&[u8], Vec<u8>, u32)> = norms
            .iter()
            .zip(&cm.parts)
            .map(|(n, p)| (&**n, p.normed_fields(), p.max_doc))
            .collect();
        let mut all: Vec<u8> = pairs.iter().flat_map(|p| p.1.iter().copied()).collect();
        all.sort_unstable();
        all.dedup();
        Ok(SegmentReader {
            meta: meta.clone(),
            postings: Box::new(ChainPostings::open(
                chain,
                cm.file_len,
                meta.max_doc,
                format.codec,
                format.bloom_shape()?,
                storage,
            )?),
            norms: concat_norms(&pairs, &all),
            norm_runs: runs_of(&all),
            parts,
        })
    }

    /// The chain of a chained segment.
    pub fn chain(&self) -> Option<&Arc<Chain>> {
        self.postings
            .as_any()
            .downcast_ref::<ChainPostings>()
            .map(|c| c.chain())
    }

    fn part(&self, doc: u32) -> Result<(&DocPart, u32)> {
        let i = self.parts.partition_point(|p| p.base <= doc).saturating_sub(1);
        match self.parts.get(i) {
            Some(p) if doc >= p.base && doc - p.base < p.max_doc => Ok((p, doc - p.base)),
            _ => Err(Error::NotFound(format!(
                "document {doc} is not in segment {} ({} documents)",
                self.meta.name, self.meta.max_doc
            ))),
        }
    }

    /// The stored document `doc`.
    pub fn document(&self, doc: u32) -> Result<crate::schema::Document> {
        let (p, local) = self.part(doc)?;
        p.store.get(local)
    }

    /// The store holding document `doc`, and its number there.
    pub fn store_of(&self, doc: u32) -> Result<(&StoreReader, u32)> {
        let (p, local) = self.part(doc)?;
        Ok((&p.store, local))
    }

    /// Every store of the segment (one per part).
    pub fn stores(&self) -> Vec<&StoreReader> {
        self.parts.iter().map(|p| &p.store).collect()
    }

    /// Drops the pages opening mapped (the term dictionary, verified whole,
    /// and the stores) from the process's memory, on `mmap`: a merge opens
    /// many segments and reads each only as it goes. The bytes stay valid;
    /// a later access faults them back in from the page cache.
    pub fn release(&self) {
        if let Some(p) = self.postings() {
            p.terms().release();
        }
        for s in self.stores() {
            s.release();
        }
    }

    /// Writes the external id of document `doc` into `out`: from the id
    /// column (a few bytes), or from the stored document for segments
    /// written without one.
    pub fn external_id(&self, doc: u32, out: &mut String) -> Result<()> {
        let (p, local) = self.part(doc)?;
        match &p.ids {
            Some(ids) => ids.id_into(local, out),
            None => {
                *out = p.store.get(local)?.id;
                Ok(())
            }
        }
    }

    /// The segment's manifest entry.
    pub fn meta(&self) -> &SegmentMeta {
        &self.meta
    }

    /// Number of documents.
    pub fn max_doc(&self) -> u32 {
        self.meta.max_doc
    }

    /// The term dictionary (`None`: a chained segment, see [`SegmentReader::chain`]).
    pub fn terms(&self) -> Option<&TermDict> {
        self.postings().map(|p| p.terms())
    }

    /// The postings files (`None`: a chained segment).
    pub fn postings(&self) -> Option<&PostingsFiles> {
        self.postings.as_any().downcast_ref::<PostingsFiles>()
    }

    /// The segment's postings, whatever their kind.
    pub fn source(&self) -> &dyn PostingsSource {
        &*self.postings
    }

    /// The shape of the segment's phrase filters (`None`: it has none).
    pub fn bloom(&self) -> Option<FilterShape> {
        self.postings.bloom()
    }

    /// Document frequency of a term key in this segment (0: absent),
    /// without reading storage where the dictionary holds it.
    pub fn doc_freq(&self, key: &[u8]) -> Result<u64> {
        self.postings.doc_freq(key)
    }

    /// Looks up a term key (see [`crate::termdict::term_key`]). For a
    /// chained segment the info sums the term's chunks, and `doc_offset`
    /// holds its ordinal in the chain's dictionary.
    pub fn term_info(&self, key: &[u8]) -> Result<Option<TermInfo>> {
        self.postings.term_info(key)
    }

    /// A cursor over a term of this segment. A chained term's chunks are
    /// read here, in one batched submission.
    pub fn cursor(&self, info: &TermInfo) -> Result<TermCursor<'_>> {
        self.postings.cursor(info)
    }

    /// A cursor that keeps prefetching the term's zone in `segment`-byte
    /// pieces, the first of which the caller has prefetched already.
    pub fn prefetching_cursor(&self, info: &TermInfo, segment: usize) -> Result<TermCursor<'_>> {
        let mut c = self.cursor(info)?;
        if self.postings.prefetches_zones() {
            let start = info.doc_offset as usize;
            c.enable_prefetch(segment, start + segment.min(info.region.zone_len as usize));
        }
        Ok(c)
    }

    /// Norm bytes of `field`, one per document (empty for a field without).
    pub fn norms(&self, field: Field) -> &[u8] {
        let Some(Some(run)) = self.norm_runs.get(field.index()) else {
            return &[];
        };
        let n = self.meta.max_doc as usize;
        let start = *run as usize * n;
        &self.norms[start..start + n]
    }

    /// The segment's document parts (one, or one per flush of a chained
    /// segment), in document order.
    pub fn parts(&self) -> &[Arc<DocPart>] {
        &self.parts
    }

    /// Verifies every page of every file of the segment (every chunk of a
    /// chained one).
    pub fn verify_all(&self) -> Result<()> {
        self.postings.verify_all()?;
        for p in &self.parts {
            if let Some(ids) = &p.ids {
                ids.verify_all()?;
            }
            if let Some(c) = &p.columns {
                c.verify_all()?;
            }
            p.store.verify_all()?;
        }
        Ok(())
    }

    /// Prefetches term regions' zones (see [`TierOptions::prefetches`]).
    ///
    /// [`TierOptions::prefetches`]: crate::storage::TierOptions::prefetches
    pub fn prefetch(&self, ranges: &[std::ops::Range<usize>]) -> Result<()> {
        self.postings.prefetch(ranges)
    }
}

/// Opens the chain of chained segment `meta`: its file, and its dictionary
/// replayed from the committed part of its log.
pub fn open_chain(dir: &Path, meta: &SegmentMeta, writable: bool) -> Result<Arc<Chain>> {
    let cm = meta
        .chain
        .as_ref()
        .ok_or_else(|| Error::Internal(format!("segment {} is not chained", meta.name)))?;
    let log_path = dir.join(meta.file_name(CHAIN_LOG_EXT));
    let log = match std::fs::read(&log_path) {
        Ok(l) => l,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && cm.log_len == 0 => Vec::new(),
        Err(e) => return Err(Error::io(&log_path, e)),
    };
    if (log.len() as u64) < cm.log_len {
        return Err(Error::corrupt(
            &log_path,
            format!(
                "log is {} bytes, shorter than the {} committed (truncated)",
                log.len(),
                cm.log_len
            ),
        ));
    }
    let dict = chain::replay(&log_path, &log[..cm.log_len as usize])?;
    let path = dir.join(meta.file_name(CHAIN_EXT));
    let chain = Chain::open(&path, writable, dict)?;
    let len = chain.file.metadata().map_err(|e| Error::io(&path, e))?.len();
    if len < cm.file_len {
        return Err(Error::corrupt(
            &path,
            format!(
                "chain file is {len} bytes, shorter than the {} committed (truncated)",
                cm.file_len
            ),
        ));
    }
    Ok(chain)
}
