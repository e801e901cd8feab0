//! Reading a document store.

use std::path::Path;
use std::sync::Mutex;

use xxhash_rust::xxh3::xxh3_64;
use zstd::zstd_safe::{DCtx, DDict};

use super::format::{self, DataHeader, IndexTrailer, DATA_HEADER_LEN, INDEX_ENTRY_LEN, INDEX_TRAILER_LEN};
use super::zstd_codec;
use crate::error::{Error, Result};
use crate::schema::{DocId, Document};
use crate::storage::{io, IndexFile, Storage, Tier, TierOptions};

/// Pooled decompression buffers larger than this are dropped after use, so a
/// rare huge document does not pin memory.
const MAX_POOLED_BUFFER: usize = 1 << 20;
/// Contexts kept in the pool (more concurrent readers just create their own).
const MAX_POOLED_CONTEXTS: usize = 64;

/// Reads the document store of one segment. Shareable between threads: each
/// lookup borrows a decompression context from a small pool.
pub struct StoreReader {
    data: IndexFile,
    index: IndexFile,
    num_docs: u32,
    dict: Option<ReaderDictionary>,
    /// The index's entries held in memory, for a reader that reads every
    /// record once in no order ([`StoreReader::reopen_to_copy`]).
    entries: Option<Vec<u8>>,
    pool: Mutex<Vec<Scratch>>,
}

struct ReaderDictionary {
    ddict: DDict<'static>,
    bytes: Vec<u8>,
    hash: u64,
}

/// A decompression context and its output buffer.
struct Scratch {
    dctx: DCtx<'static>,
    buf: Vec<u8>,
}

impl std::fmt::Debug for StoreReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreReader")
            .field("data", &self.data.path())
            .field("index", &self.index.path())
            .field("num_docs", &self.num_docs)
            .field("dictionary_len", &self.dictionary_len())
            .finish()
    }
}

impl StoreReader {
    /// Opens a store on `tier` with default settings (see [`StoreReader::open_on`]).
    pub fn open(data_path: &Path, index_path: &Path, tier: Tier) -> Result<StoreReader> {
        Self::open_on(data_path, index_path, &Storage::new(TierOptions::on(tier))?)
    }

    /// The same store opened again on `storage`, for a merge that copies
    /// every record in a new order: it reads them with `pread` (the
    /// `buffered` tier) rather than through a mapping it would have to drop
    /// every few hundred records, and holds the index's entries (12 bytes a
    /// document) in memory as they are checked, so that a record costs one
    /// read of its data, not one of its entry's page too.
    pub fn reopen_to_copy(&self, storage: &Storage) -> Result<StoreReader> {
        Self::open_with(self.data.path(), self.index.path(), storage, true)
    }

    /// Opens a store on `storage`, checking that the two files belong
    /// together and that every index entry lies inside the data file, in
    /// order (the index is streamed once; entries are read on demand later).
    pub fn open_on(data_path: &Path, index_path: &Path, storage: &Storage) -> Result<StoreReader> {
        Self::open_with(data_path, index_path, storage, false)
    }

    /// [`StoreReader::open_on`], keeping the checked entries in memory when
    /// `hold_entries`.
    fn open_with(data_path: &Path, index_path: &Path, storage: &Storage, hold_entries: bool) -> Result<StoreReader> {
        let data = storage.open(data_path)?;
        let index = storage.open(index_path)?;
        let mut buf = Vec::new();
        let data_corrupt = |reason: String| Error::corrupt(data_path, reason);
        let index_corrupt = |reason: String| Error::corrupt(index_path, reason);

        let header_len = DATA_HEADER_LEN.min(data.len());
        let header = DataHeader::decode(data.read(0..header_len, &mut buf)?).map_err(data_corrupt)?;
        let dict_len = header.dict_len as usize;
        let records_start = DATA_HEADER_LEN
            .checked_add(dict_len)
            .filter(|&end| end <= data.len())
            .ok_or_else(|| {
                data_corrupt(format!(
                    "dictionary of {dict_len} bytes runs past the end of the {}-byte content",
                    data.len()
                ))
            })?;
        let dict = if dict_len > 0 {
            let bytes = data.read(DATA_HEADER_LEN..records_start, &mut buf)?.to_vec();
            let hash = xxh3_64(&bytes);
            if hash != header.dict_hash {
                return Err(data_corrupt("dictionary does not match its hash".into()));
            }
            let ddict = DDict::try_create(&bytes).ok_or_else(|| data_corrupt("zstd rejects the dictionary".into()))?;
            Some(ReaderDictionary { ddict, bytes, hash })
        } else {
            None
        };

        if index.len() < INDEX_TRAILER_LEN {
            return Err(index_corrupt(format!(
                "content is {} bytes, shorter than the {INDEX_TRAILER_LEN}-byte index trailer",
                index.len()
            )));
        }
        let entries_len = index.len() - INDEX_TRAILER_LEN;
        let trailer = IndexTrailer::decode(index.len(), index.read(entries_len..index.len(), &mut buf)?)
            .map_err(index_corrupt)?;
        if trailer.data_len != data.len() as u64 || trailer.data_checksum != data.checksum() {
            return Err(index_corrupt(format!(
                "index was written for another data file ({} bytes, fingerprint {:016x}) than {} ({} bytes, fingerprint {:016x})",
                trailer.data_len,
                trailer.data_checksum,
                data_path.display(),
                data.len(),
                data.checksum()
            )));
        }
        let mut end = records_start as u64;
        const CHUNK: usize = INDEX_ENTRY_LEN * (1 << 16);
        let mut entries = Vec::new();
        let mut held = Vec::with_capacity(if hold_entries { entries_len } else { 0 });
        for chunk_start in (0..entries_len).step_by(CHUNK) {
            let chunk = index.read(chunk_start..(chunk_start + CHUNK).min(entries_len), &mut buf)?;
            entries.clear();
            entries.extend_from_slice(chunk);
            if hold_entries {
                held.extend_from_slice(chunk);
            }
            let first_doc = chunk_start / INDEX_ENTRY_LEN;
            for (i, e) in entries.chunks_exact(INDEX_ENTRY_LEN).enumerate() {
                let doc = first_doc + i;
                let (offset, len) = format::decode_entry(e);
                if len == 0 {
                    return Err(index_corrupt(format!("document {doc}: empty record")));
                }
                if offset < end {
                    return Err(index_corrupt(format!(
                    "document {doc}: record offset {offset} is before the end {end} of the previous record or header"
                )));
                }
                end = match offset.checked_add(u64::from(len)) {
                    Some(end) if end <= data.len() as u64 => end,
                    _ => {
                        return Err(index_corrupt(format!(
                            "document {doc}: record {offset}+{len} runs past the end of the {}-byte data file",
                            data.len()
                        )))
                    }
                };
            }
        }
        if end != data.len() as u64 {
            return Err(index_corrupt(format!(
                "records end at {end} but the data file holds {} bytes",
                data.len()
            )));
        }
        Ok(StoreReader {
            data,
            index,
            num_docs: trailer.num_docs,
            dict,
            entries: hold_entries.then_some(held),
            pool: Mutex::new(Vec::new()),
        })
    }

    /// Verifies every page of both store files.
    pub fn verify_all(&self) -> Result<()> {
        self.data.verify_all()?;
        self.index.verify_all()
    }

    /// Tells the storage tier that the store will not be read again soon
    /// (a merge has copied it): see [`IndexFile::release`].
    pub fn release(&self) {
        self.data.release(0..self.data.len());
        self.index.release(0..self.index.len());
    }

    /// Documents in the store (numbers `0..num_docs`).
    pub fn num_docs(&self) -> u32 {
        self.num_docs
    }

    /// Size of the store's zstd dictionary (0 without one).
    pub fn dictionary_len(&self) -> usize {
        self.dict.as_ref().map_or(0, |d| d.bytes.len())
    }

    /// Reads and decompresses document `doc`.
    pub fn get(&self, doc: DocId) -> Result<Document> {
        let mut raw = Vec::new();
        let record = self.raw_into(doc, &mut raw)?;
        let mut scratch = self.take_scratch()?;
        let result = self.decode(&mut scratch, record, doc);
        self.put_back(scratch);
        result
    }

    /// The compressed record of `doc`, as [`StoreWriter::add_raw`] takes it,
    /// on a resident tier (`ram`, `mmap`); [`StoreReader::raw_into`] works on
    /// every tier.
    ///
    /// [`StoreWriter::add_raw`]: super::StoreWriter::add_raw
    pub fn raw(&self, doc: DocId) -> Result<&[u8]> {
        let (offset, len) = self.entry(doc)?;
        let start = offset as usize; // checked against the data length at open
        io::record_needed(u64::from(len));
        self.data
            .bytes(start..start + len as usize)
            .map_err(|e| with_doc(e, doc))
    }

    /// The compressed record of `doc`, read into `buf` unless resident.
    pub fn raw_into<'a>(&'a self, doc: DocId, buf: &'a mut Vec<u8>) -> Result<&'a [u8]> {
        let (offset, len) = self.entry(doc)?;
        let start = offset as usize; // checked against the data length at open
        io::record_needed(u64::from(len));
        self.data
            .read(start..start + len as usize, buf)
            .map_err(|e| with_doc(e, doc))
    }

    /// Where `doc`'s record lies in the data file: `(offset, length)` in
    /// bytes, for I/O accounting.
    pub fn data_bytes_read_for(&self, doc: DocId) -> Result<(u64, u64)> {
        let (offset, len) = self.entry(doc)?;
        Ok((offset, u64::from(len)))
    }

    /// The dictionary's bytes, if the store has one.
    pub fn dictionary(&self) -> Result<Option<&[u8]>> {
        match &self.dict {
            Some(d) => Ok(Some(&d.bytes)),
            None => Ok(None),
        }
    }

    /// What identifies the dictionary: its length and hash.
    pub(super) fn dictionary_id(&self) -> Option<(usize, u64)> {
        self.dict.as_ref().map(|d| (d.bytes.len(), d.hash))
    }

    /// Content length of the data file.
    pub(super) fn data_len(&self) -> usize {
        self.data.len()
    }

    /// Decompresses `doc` into `out` (its serialised form), checking it.
    pub(super) fn read_serialised(&self, doc: DocId, out: &mut Vec<u8>) -> Result<()> {
        let mut raw = Vec::new();
        let record = self.raw_into(doc, &mut raw)?;
        let mut scratch = self.take_scratch()?;
        let result = zstd_codec::decompress(&mut scratch.dctx, self.ddict(), record, out)
            .and_then(|()| format::parse(out).map(|_| ()))
            .map_err(|e| self.record_corrupt(doc, e));
        self.put_back(scratch);
        result
    }

    /// The error for a bad record of `doc`.
    pub(super) fn record_corrupt(&self, doc: DocId, reason: String) -> Error {
        Error::corrupt(self.data.path(), format!("document {doc}: {reason}"))
    }

    fn ddict(&self) -> Option<&DDict<'static>> {
        self.dict.as_ref().map(|d| &d.ddict)
    }

    fn entry(&self, doc: DocId) -> Result<(u64, u32)> {
        if doc >= self.num_docs {
            return Err(Error::InvalidArgument(format!(
                "document {doc} out of range: the store of {} holds {} documents",
                self.data.path().display(),
                self.num_docs
            )));
        }
        let start = doc as usize * INDEX_ENTRY_LEN;
        let mut e = [0u8; INDEX_ENTRY_LEN];
        match self.entries.as_deref().and_then(|all| all.get(start..start + INDEX_ENTRY_LEN)) {
            Some(held) => e.copy_from_slice(held),
            None => self.index.read_small(start..start + INDEX_ENTRY_LEN, &mut e)?,
        }
        io::record_needed(INDEX_ENTRY_LEN as u64);
        Ok(format::decode_entry(&e))
    }

    fn decode(&self, scratch: &mut Scratch, record: &[u8], doc: DocId) -> Result<Document> {
        zstd_codec::decompress(&mut scratch.dctx, self.ddict(), record, &mut scratch.buf)
            .map_err(|e| self.record_corrupt(doc, e))?;
        format::parse(&scratch.buf).map_err(|e| self.record_corrupt(doc, e))
    }

    fn take_scratch(&self) -> Result<Scratch> {
        let pooled = self.pool.lock().unwrap_or_else(|p| p.into_inner()).pop();
        match pooled {
            Some(s) => Ok(s),
            None => Ok(Scratch {
                dctx: DCtx::try_create().ok_or_else(|| {
                    Error::io(
                        self.data.path(),
                        std::io::Error::other("zstd could not allocate a decompression context"),
                    )
                })?,
                buf: Vec::new(),
            }),
        }
    }

    fn put_back(&self, mut scratch: Scratch) {
        if scratch.buf.capacity() > MAX_POOLED_BUFFER {
            scratch.buf = Vec::new();
        }
        let mut pool = self.pool.lock().unwrap_or_else(|p| p.into_inner());
        if pool.len() < MAX_POOLED_CONTEXTS {
            pool.push(scratch);
        }
    }
}

/// Names the document in a corruption error raised while reading its record.
fn with_doc(e: Error, doc: DocId) -> Error {
    match e {
        Error::Corrupt { path, reason } => Error::Corrupt {
            path,
            reason: format!("document {doc}: {reason}"),
        },
        other => other,
    }
}
