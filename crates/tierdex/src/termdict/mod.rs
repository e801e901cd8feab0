//! The term dictionary: an FST from term keys to ordinals, and a table of
//! fixed-size [`TermInfo`] records indexed by ordinal.
//!
//! A term key is the field id byte followed by the term's UTF-8 bytes, so
//! both fields share one FST and each field's terms are contiguous.

use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::layout::writer::RegionInfo;
use crate::schema::Field;
use crate::storage::{FileInfo, FileWriter, IndexFile};

/// Bytes of one encoded [`TermInfo`].
pub const TERM_INFO_LEN: usize = 32;

/// Where a term's region is and what it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TermInfo {
    /// Byte offset of the region in the postings file.
    pub offset: u64,
    /// Sizes and statistics of the region.
    pub region: RegionInfo,
}

impl TermInfo {
    fn encode(&self) -> [u8; TERM_INFO_LEN] {
        let mut b = [0u8; TERM_INFO_LEN];
        b[0..8].copy_from_slice(&self.offset.to_le_bytes());
        b[8..16].copy_from_slice(&self.region.total_term_freq.to_le_bytes());
        b[16..20].copy_from_slice(&self.region.doc_freq.to_le_bytes());
        b[20..24].copy_from_slice(&self.region.zone_len.to_le_bytes());
        b[24..28].copy_from_slice(&self.region.pos_len.to_le_bytes());
        b[28..32].copy_from_slice(&self.region.off_len.to_le_bytes());
        b
    }

    fn decode(b: &[u8]) -> TermInfo {
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        TermInfo {
            offset: u64::from_le_bytes(b[0..8].try_into().unwrap()),
            region: RegionInfo {
                total_term_freq: u64::from_le_bytes(b[8..16].try_into().unwrap()),
                doc_freq: u32_at(16),
                zone_len: u32_at(20),
                pos_len: u32_at(24),
                off_len: u32_at(28),
            },
        }
    }
}

/// Builds the key of `term` in `field` into `out`.
pub fn term_key(field: Field, term: &str, out: &mut Vec<u8>) {
    out.clear();
    out.push(field.id());
    out.extend_from_slice(term.as_bytes());
}

/// Writes a term dictionary; keys must come in strictly increasing order.
pub struct TermDictWriter {
    fst: fst::MapBuilder<Vec<u8>>,
    infos: FileWriter,
    count: u64,
}

impl TermDictWriter {
    /// Starts a dictionary whose info table goes to `info_path`.
    pub fn create(info_path: &Path) -> Result<Self> {
        Ok(TermDictWriter {
            fst: fst::MapBuilder::memory(),
            infos: FileWriter::create(info_path)?,
            count: 0,
        })
    }

    /// Adds the next term.
    pub fn insert(&mut self, key: &[u8], info: &TermInfo) -> Result<()> {
        self.fst
            .insert(key, self.count)
            .map_err(|e| Error::InvalidArgument(format!("term dictionary: {e}")))?;
        self.infos.write_all(&info.encode())?;
        self.count += 1;
        Ok(())
    }

    /// Number of terms added.
    pub fn len(&self) -> u64 {
        self.count
    }

    /// True when no term was added.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Writes the FST to `fst_path` and finishes both files.
    pub fn finish(self, fst_path: &Path) -> Result<(FileInfo, FileInfo)> {
        let bytes = self
            .fst
            .into_inner()
            .map_err(|e| Error::InvalidArgument(format!("term dictionary: {e}")))?;
        let mut w = FileWriter::create(fst_path)?;
        w.write_all(&bytes)?;
        Ok((w.finish()?, self.infos.finish()?))
    }
}

/// The FST's bytes: the verified resident file, or a verified copy on
/// tiers that do not keep files in memory.
#[derive(Clone)]
enum FstBytes {
    File(Arc<IndexFile>),
    Owned(Arc<[u8]>),
}

impl AsRef<[u8]> for FstBytes {
    fn as_ref(&self) -> &[u8] {
        match self {
            // Verified in full when the dictionary was opened.
            FstBytes::File(f) => f.all().unwrap_or(&[]),
            FstBytes::Owned(b) => b,
        }
    }
}

/// A term dictionary opened for reading.
pub struct TermDict {
    fst: fst::Map<FstBytes>,
    infos: IndexFile,
    len: u64,
}

impl TermDict {
    /// Opens the FST (verified in full) and the info table.
    pub fn open(fst_file: IndexFile, infos: IndexFile) -> Result<TermDict> {
        fst_file.verify_all()?;
        let path = fst_file.path().to_path_buf();
        let bytes = if fst_file.resident().is_some() {
            FstBytes::File(Arc::new(fst_file))
        } else {
            let mut buf = Vec::new();
            let copy: Arc<[u8]> = fst_file.read(0..fst_file.len(), &mut buf)?.into();
            FstBytes::Owned(copy)
        };
        let fst = fst::Map::new(bytes).map_err(|e| Error::corrupt(&path, format!("invalid FST: {e}")))?;
        if infos.len() % TERM_INFO_LEN != 0 || (infos.len() / TERM_INFO_LEN) as u64 != fst.len() as u64 {
            return Err(Error::corrupt(
                infos.path(),
                format!("{} bytes of term infos for {} terms", infos.len(), fst.len()),
            ));
        }
        let len = fst.len() as u64;
        Ok(TermDict { fst, infos, len })
    }

    /// Number of terms.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when the dictionary holds no term.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Verifies every page of the info table (the FST was verified at open).
    pub fn verify_all(&self) -> Result<()> {
        self.infos.verify_all()
    }

    /// Looks a term key up.
    pub fn get(&self, key: &[u8]) -> Result<Option<TermInfo>> {
        match self.fst.get(key) {
            Some(ord) => self.info(ord).map(Some),
            None => Ok(None),
        }
    }

    /// The info of the term with ordinal `ord`.
    pub fn info(&self, ord: u64) -> Result<TermInfo> {
        let start = ord as usize * TERM_INFO_LEN;
        let mut b = [0u8; TERM_INFO_LEN];
        self.infos.read_small(start..start + TERM_INFO_LEN, &mut b)?;
        crate::storage::io::record_needed(TERM_INFO_LEN as u64);
        Ok(TermInfo::decode(&b))
    }

    /// The underlying FST (for merges and inspection).
    pub fn fst(&self) -> &fst::Map<impl AsRef<[u8]>> {
        &self.fst
    }
}
