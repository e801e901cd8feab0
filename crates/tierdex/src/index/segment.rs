//! One immutable segment opened for reading.

use std::path::Path;

use crate::error::{Error, Result};
use crate::index::manifest::SegmentMeta;
use crate::layout::{Format, PostingsFiles, TermCursor};
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
    /// Every extension any layout writes.
    pub const ALL: [&str; 11] = [
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
    ];
}

/// A segment's readers.
pub struct SegmentReader {
    meta: SegmentMeta,
    postings: PostingsFiles,
    norms: Box<[u8]>,
    store: StoreReader,
    ids: Option<IdsReader>,
}

impl SegmentReader {
    /// Opens the files of `meta` in `dir`, checking them against the manifest.
    pub fn open(dir: &Path, meta: &SegmentMeta, format: Format, storage: &Storage) -> Result<SegmentReader> {
        let open = |e: &str| -> Result<IndexFile> {
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
        };
        let postings = PostingsFiles::open(format, open)?;
        let norms_file = open(ext::NORMS)?;
        if norms_file.len() != meta.max_doc as usize * Field::COUNT {
            return Err(Error::corrupt(
                norms_file.path(),
                "norms size does not match the document count",
            ));
        }
        // Two bytes per document, read on every scored hit: kept in memory.
        let mut buf = Vec::new();
        let norms: Box<[u8]> = norms_file.read(0..norms_file.len(), &mut buf)?.into();
        open(ext::STORE)?;
        open(ext::STORE_INDEX)?;
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
            true => Some(IdsReader::open(open(ext::IDS)?, meta.max_doc)?),
            false => None,
        };
        Ok(SegmentReader {
            meta: meta.clone(),
            postings,
            norms,
            store,
            ids,
        })
    }

    /// Writes the external id of document `doc` into `out`: from the id
    /// column (a few bytes), or from the stored document for segments
    /// written without one.
    pub fn external_id(&self, doc: u32, out: &mut String) -> Result<()> {
        match &self.ids {
            Some(ids) => ids.id_into(doc, out),
            None => {
                *out = self.store.get(doc)?.id;
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

    /// The term dictionary.
    pub fn terms(&self) -> &TermDict {
        self.postings.terms()
    }

    /// The postings files.
    pub fn postings(&self) -> &PostingsFiles {
        &self.postings
    }

    /// Document frequency of a term key in this segment (0: absent),
    /// without reading storage where the dictionary holds it.
    pub fn doc_freq(&self, key: &[u8]) -> Result<u64> {
        self.postings.doc_freq(key)
    }

    /// Looks up a term key (see [`crate::termdict::term_key`]).
    pub fn term_info(&self, key: &[u8]) -> Result<Option<TermInfo>> {
        self.postings.term_info(key)
    }

    /// A cursor over a term of this segment.
    pub fn cursor(&self, info: &TermInfo) -> Result<TermCursor<'_>> {
        self.postings.cursor(info)
    }

    /// A cursor that keeps prefetching the term's zone in `segment`-byte
    /// pieces, the first of which the caller has prefetched already.
    pub fn prefetching_cursor(&self, info: &TermInfo, segment: usize) -> Result<TermCursor<'_>> {
        let mut c = self.postings.cursor(info)?;
        let start = info.doc_offset as usize;
        c.enable_prefetch(segment, start + segment.min(info.region.zone_len as usize));
        Ok(c)
    }

    /// Norm bytes of `field`, one per document.
    pub fn norms(&self, field: Field) -> &[u8] {
        let n = self.meta.max_doc as usize;
        let start = field.id() as usize * n;
        &self.norms[start..start + n]
    }

    /// The document store.
    pub fn store(&self) -> &StoreReader {
        &self.store
    }

    /// Verifies every page of every file of the segment.
    pub fn verify_all(&self) -> Result<()> {
        self.postings.verify_all()?;
        if let Some(ids) = &self.ids {
            ids.verify_all()?;
        }
        self.store.verify_all()
    }

    /// Prefetches term regions' zones (see [`TierOptions::prefetches`]).
    ///
    /// [`TierOptions::prefetches`]: crate::storage::TierOptions::prefetches
    pub fn prefetch(&self, ranges: &[std::ops::Range<usize>]) -> Result<()> {
        self.postings.doc_file().prefetch(ranges)
    }
}
