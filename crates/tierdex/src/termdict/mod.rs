//! The term dictionary: an FST from term keys to where each term's postings
//! are described.
//!
//! A term key is the field id byte followed by the term's UTF-8 bytes, so
//! both fields share one FST and each field's terms are contiguous.
//!
//! * [`Layout::Grouped`]: the FST value is the offset of the term's region,
//!   which starts with its metadata ([`encode_meta`]); looking a term up
//!   reads nothing but the region itself.
//! * [`Layout::Split`]: the FST value is an ordinal into a table of
//!   fixed-size [`TermInfo`] records (`.tin`), as Lucene's term dictionary
//!   blocks; looking a term up reads that table first.

use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::codec;
use crate::error::{Error, Result};
use crate::schema::Field;
use crate::storage::{io, FileInfo, FileWriter, IndexFile};

/// Bytes of one encoded [`TermInfo`] in a split layout's table (without
/// phrase filters; with them, 16 more: [`info_len`]).
pub const TERM_INFO_LEN: usize = 48;
/// Longest encoding of a grouped region's metadata (with filter sizes).
pub const MAX_META_LEN: usize = 5 + 10 + 5 + 5 + 5 + 5 + 5;

/// Bytes of one [`TermInfo`] record in a split table, by whether the
/// segment has phrase filters (whose two sizes the record then holds).
pub const fn info_len(bloom: bool) -> usize {
    if bloom {
        TERM_INFO_LEN + 16
    } else {
        TERM_INFO_LEN
    }
}

/// Where a term's sections are and what they hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TermInfo {
    /// Byte offset of the zone (impacts, skip table, doc/freq blocks) in
    /// the doc file (the postings file when grouped).
    pub doc_offset: u64,
    /// Byte offset of the positions section (in the positions file).
    pub pos_offset: u64,
    /// Byte offset of the offsets section (in the offsets file).
    pub off_offset: u64,
    /// Byte offset of the phrase filter sections (`after`, then `before`):
    /// after the offsets in a grouped region, in the filter file (`.blm`)
    /// when split.
    pub bloom_offset: u64,
    /// Sizes and statistics of the sections.
    pub region: RegionInfo,
}

impl TermInfo {
    /// The bytes of the term's record; the first [`info_len`]`(bloom)` count.
    fn encode(&self) -> [u8; TERM_INFO_LEN + 16] {
        let mut b = [0u8; TERM_INFO_LEN + 16];
        b[0..8].copy_from_slice(&self.doc_offset.to_le_bytes());
        b[8..16].copy_from_slice(&self.pos_offset.to_le_bytes());
        b[16..24].copy_from_slice(&self.off_offset.to_le_bytes());
        b[24..32].copy_from_slice(&self.region.total_term_freq.to_le_bytes());
        b[32..36].copy_from_slice(&self.region.doc_freq.to_le_bytes());
        b[36..40].copy_from_slice(&self.region.zone_len.to_le_bytes());
        b[40..44].copy_from_slice(&self.region.pos_len.to_le_bytes());
        b[44..48].copy_from_slice(&self.region.off_len.to_le_bytes());
        b[48..52].copy_from_slice(&self.region.after_len.to_le_bytes());
        b[52..56].copy_from_slice(&self.region.before_len.to_le_bytes());
        b[56..64].copy_from_slice(&self.bloom_offset.to_le_bytes());
        b
    }

    /// Decodes a record (zeros past [`TERM_INFO_LEN`] when without filters).
    fn decode(b: &[u8; TERM_INFO_LEN + 16]) -> TermInfo {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        TermInfo {
            doc_offset: u64_at(0),
            pos_offset: u64_at(8),
            off_offset: u64_at(16),
            bloom_offset: u64_at(56),
            region: RegionInfo {
                total_term_freq: u64_at(24),
                doc_freq: u32_at(32),
                zone_len: u32_at(36),
                pos_len: u32_at(40),
                off_len: u32_at(44),
                after_len: u32_at(48),
                before_len: u32_at(52),
            },
        }
    }
}

/// Appends a grouped region's metadata (its sections' sizes, statistics).
/// The filter sizes are written only when the segment has filters (`bloom`).
pub fn encode_meta(r: &RegionInfo, bloom: bool, out: &mut Vec<u8>) {
    codec::write_u32(out, r.doc_freq);
    codec::write_u64(out, r.total_term_freq);
    codec::write_u32(out, r.zone_len);
    codec::write_u32(out, r.pos_len);
    codec::write_u32(out, r.off_len);
    if bloom {
        codec::write_u32(out, r.after_len);
        codec::write_u32(out, r.before_len);
    }
}

/// Decodes the metadata at the start of a grouped region beginning at file
/// offset `start` of a segment with filters or not (`bloom`); returns the
/// term's info and the metadata's length. The region holds the zone, the
/// positions, the offsets and the filters, in that order.
pub fn decode_meta(data: &[u8], start: u64, bloom: bool) -> Option<(TermInfo, usize)> {
    let pos = &mut 0;
    let mut region = RegionInfo {
        doc_freq: codec::read_u32(data, pos)?,
        total_term_freq: codec::read_u64(data, pos)?,
        zone_len: codec::read_u32(data, pos)?,
        pos_len: codec::read_u32(data, pos)?,
        off_len: codec::read_u32(data, pos)?,
        after_len: 0,
        before_len: 0,
    };
    if bloom {
        region.after_len = codec::read_u32(data, pos)?;
        region.before_len = codec::read_u32(data, pos)?;
    }
    let doc_offset = start.checked_add(*pos as u64)?;
    let pos_offset = doc_offset.checked_add(region.zone_len as u64)?;
    let off_offset = pos_offset.checked_add(region.pos_len as u64)?;
    let bloom_offset = off_offset.checked_add(region.off_len as u64)?;
    Some((
        TermInfo {
            doc_offset,
            pos_offset,
            off_offset,
            bloom_offset,
            region,
        },
        *pos,
    ))
}

/// Builds the key of `term` in `field` into `out`.
pub fn term_key(field: Field, term: &str, out: &mut Vec<u8>) {
    out.clear();
    out.push(field.id());
    out.extend_from_slice(term.as_bytes());
}

/// Low bits of a grouped FST value that hold the term's document frequency
/// (in dictionaries written with it, see [`TermDictWriter::create`]): the
/// region offset is the value shifted right by this much.
pub const DF_BITS: u32 = 20;
/// The document-frequency field value meaning "this many or more: read the
/// region's metadata".
const DF_UNKNOWN: u64 = (1 << DF_BITS) - 1;

/// What the FST holds for a term.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TermRef {
    /// Grouped: the offset of the term's region.
    Region(u64),
    /// Split: the term's ordinal in the info table.
    Ordinal(u64),
}

/// Writes a term dictionary; keys must come in strictly increasing order.
pub struct TermDictWriter {
    fst: fst::MapBuilder<Vec<u8>>,
    /// Grouped: the (key, value) pairs, in the order their regions were
    /// written (see [`Layout::term_order`]), put into the FST in key order
    /// at the end: key bytes, then (key start, key length, value).
    pending_keys: Vec<u8>,
    pending: Vec<(usize, u32, u64)>,
    /// Whether `pending` came in [`Layout::term_order`] (as a segment's
    /// and a merge's regions are written): the FST's key order is then
    /// a stable bucketing by field byte, no comparison sort.
    in_term_order: bool,
    infos: Option<FileWriter>,
    info_len: usize,
    doc_freq_in_value: bool,
    count: u64,
}

impl TermDictWriter {
    /// Starts a dictionary; the split layout's info table goes to
    /// `info_path`, its records holding filter sizes when `bloom`. A
    /// grouped dictionary keeps each term's document frequency in its FST
    /// value when `doc_freq_in_value`, so statistics need no read.
    pub fn create(layout: Layout, bloom: bool, doc_freq_in_value: bool, info_path: &Path) -> Result<Self> {
        Ok(TermDictWriter {
            doc_freq_in_value: doc_freq_in_value && layout == Layout::Grouped,
            fst: fst::MapBuilder::memory(),
            pending_keys: Vec::new(),
            pending: Vec::new(),
            in_term_order: true,
            infos: match layout {
                Layout::Grouped => None,
                Layout::Split => Some(FileWriter::create(info_path)?),
            },
            info_len: info_len(bloom),
            count: 0,
        })
    }

    /// Adds the next term: its region offset (grouped, terms in any order)
    /// or its info (split, terms in key order).
    pub fn insert(&mut self, key: &[u8], region_offset: u64, info: &TermInfo) -> Result<()> {
        let value = match &mut self.infos {
            None if self.doc_freq_in_value => {
                if region_offset >> (64 - DF_BITS) != 0 {
                    return Err(Error::InvalidArgument(format!(
                        "a term region at byte {region_offset}: segments are limited to 2^{} bytes",
                        64 - DF_BITS
                    )));
                }
                (region_offset << DF_BITS) | (info.region.doc_freq as u64).min(DF_UNKNOWN)
            }
            None => region_offset,
            Some(w) => {
                w.write_all(&info.encode()[..self.info_len])?;
                self.count
            }
        };
        if self.infos.is_none() {
            self.push_pending(key, value)?;
        } else {
            self.fst
                .insert(key, value)
                .map_err(|e| Error::Internal(format!("term dictionary: {e}")))?;
        }
        self.count += 1;
        Ok(())
    }

    /// Adds a grouped term whose dictionary value `value` was written by
    /// a dictionary of the same kind for a region now `shift` bytes
    /// further into the postings file (the regions of a term range merged
    /// apart, then appended; see [`crate::layout::PostingsWriter::append`]).
    pub fn insert_relocated(&mut self, key: &[u8], value: u64, shift: u64) -> Result<()> {
        if self.infos.is_some() {
            return Err(Error::Internal("split dictionaries relocate through their infos".into()));
        }
        let (offset, low) = match self.doc_freq_in_value {
            true => (value >> DF_BITS, value & DF_UNKNOWN),
            false => (value, 0),
        };
        let offset = offset + shift;
        let value = match self.doc_freq_in_value {
            true => {
                if offset >> (64 - DF_BITS) != 0 {
                    return Err(Error::InvalidArgument(format!(
                        "a term region at byte {offset}: segments are limited to 2^{} bytes",
                        64 - DF_BITS
                    )));
                }
                (offset << DF_BITS) | low
            }
            false => offset,
        };
        self.push_pending(key, value)?;
        self.count += 1;
        Ok(())
    }

    /// Holds a grouped term's entry for [`Self::finish`], noting whether
    /// the entries still come in term order.
    fn push_pending(&mut self, key: &[u8], value: u64) -> Result<()> {
        let len = u32::try_from(key.len()).map_err(|_| Error::InvalidArgument("term key too long".into()))?;
        if self.in_term_order {
            if let Some(&(at, prev_len, _)) = self.pending.last() {
                let prev = &self.pending_keys[at..at + prev_len as usize];
                self.in_term_order = Layout::Grouped.term_order(prev, key).is_lt();
            }
        }
        self.pending.push((self.pending_keys.len(), len, value));
        self.pending_keys.extend_from_slice(key);
        Ok(())
    }

    /// Adds every term of `other`, a grouped dictionary of the same kind
    /// not yet finished, its regions now `shift` bytes further into the
    /// postings file (see [`Self::insert_relocated`]).
    pub fn absorb(&mut self, other: TermDictWriter, shift: u64) -> Result<()> {
        if other.infos.is_some() || other.doc_freq_in_value != self.doc_freq_in_value {
            return Err(Error::Internal("dictionaries of different kinds cannot be joined".into()));
        }
        self.pending.reserve(other.pending.len());
        self.pending_keys.reserve(other.pending_keys.len());
        for &(at, len, value) in &other.pending {
            self.insert_relocated(&other.pending_keys[at..at + len as usize], value, shift)?;
        }
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

    /// Writes the FST to `fst_path` and finishes the files; the info table's
    /// summary is `None` for the grouped layout.
    pub fn finish(mut self, fst_path: &Path) -> Result<(FileInfo, Option<FileInfo>)> {
        let keys = std::mem::take(&mut self.pending_keys);
        let key = |&(at, len, _): &(usize, u32, u64)| &keys[at..at + len as usize];
        // An integer prefix first (the key's first 8 bytes, big-endian):
        // most comparisons need no byte-slice comparison, and the entries
        // are sorted where they are (a dictionary of millions of terms
        // needs no second copy).
        let prefix = |k: &[u8]| {
            let mut b = [0u8; 8];
            let n = k.len().min(8);
            b[..n].copy_from_slice(&k[..n]);
            u64::from_be_bytes(b)
        };
        let t = std::time::Instant::now();
        let order = match self.in_term_order {
            true => key_order_of_term_order(&self.pending, &keys),
            false => None,
        };
        if order.is_none() {
            self.pending.sort_unstable_by(|a, b| {
                let (ka, kb) = (key(a), key(b));
                prefix(ka).cmp(&prefix(kb)).then_with(|| ka.cmp(kb))
            });
        }
        let sorted = t.elapsed();
        let mut insert = |e: &(usize, u32, u64)| {
            self.fst
                .insert(key(e), e.2)
                .map_err(|e| Error::Internal(format!("term dictionary: {e}")))
        };
        match &order {
            Some(order) => order.iter().try_for_each(|&i| insert(&self.pending[i as usize]))?,
            None => self.pending.iter().try_for_each(&mut insert)?,
        }
        let bytes = self
            .fst
            .into_inner()
            .map_err(|e| Error::Internal(format!("term dictionary: {e}")))?;
        tracing::debug!(
            "term dictionary: {} terms, sorted in {sorted:.2?}, FST built in {:.2?}",
            self.count,
            t.elapsed() - sorted
        );
        let mut w = FileWriter::create(fst_path)?;
        w.write_all(&bytes)?;
        let infos = self.infos.map(|w| w.finish()).transpose()?;
        Ok((w.finish()?, infos))
    }
}

/// The positions of `pending`, entries in [`Layout::term_order`] (text,
/// then field byte), in key order (field byte, then text): a stable
/// bucketing by the key's first byte, since within one field both orders
/// are the text's. `None` when there are too many entries to number with
/// `u32`.
fn key_order_of_term_order(pending: &[(usize, u32, u64)], keys: &[u8]) -> Option<Vec<u32>> {
    let n = u32::try_from(pending.len()).ok()?;
    // Bucket 0 holds the empty key (first in both orders), bucket b + 1
    // the keys starting with byte b.
    let bucket = |&(at, len, _): &(usize, u32, u64)| match len {
        0 => 0,
        _ => keys[at] as usize + 1,
    };
    let mut starts = [0u32; 258];
    for e in pending {
        starts[bucket(e) + 1] += 1;
    }
    for b in 1..starts.len() {
        starts[b] += starts[b - 1];
    }
    let mut order = vec![0u32; n as usize];
    for (i, e) in pending.iter().enumerate() {
        let slot = &mut starts[bucket(e)];
        order[*slot as usize] = i as u32;
        *slot += 1;
    }
    Some(order)
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
    infos: Option<IndexFile>,
    info_len: usize,
    doc_freq_in_value: bool,
    len: u64,
}

impl TermDict {
    /// Opens the FST (verified in full; kept in memory) and, for the split
    /// layout, the info table (with filter sizes when `bloom`);
    /// `doc_freq_in_value` as it was written (grouped only).
    pub fn open(
        fst_file: IndexFile,
        infos: Option<IndexFile>,
        bloom: bool,
        doc_freq_in_value: bool,
    ) -> Result<TermDict> {
        let info_len = info_len(bloom);
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
        if let Some(infos) = &infos {
            if infos.len() % info_len != 0 || (infos.len() / info_len) as u64 != fst.len() as u64 {
                return Err(Error::corrupt(
                    infos.path(),
                    format!("{} bytes of term infos for {} terms", infos.len(), fst.len()),
                ));
            }
        }
        let len = fst.len() as u64;
        Ok(TermDict {
            doc_freq_in_value: doc_freq_in_value && infos.is_none(),
            fst,
            infos,
            info_len,
            len,
        })
    }

    /// Verifies every page of the info table (the FST was verified at open).
    pub fn verify_all(&self) -> Result<()> {
        self.infos.as_ref().map_or(Ok(()), |f| f.verify_all())
    }

    /// Drops the dictionary's mapped pages from the process's memory (on
    /// `mmap`; nothing on the other tiers): a merge walking many sources'
    /// dictionaries would otherwise hold every page it touched. The bytes
    /// stay valid and verified; a later access faults them back in from
    /// the page cache.
    pub fn release(&self) {
        if let FstBytes::File(f) = self.fst.as_fst().as_inner() {
            f.release(0..f.len());
        }
        if let Some(infos) = &self.infos {
            infos.release(0..infos.len());
        }
    }

    /// Number of terms.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when the dictionary holds no term.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// What the dictionary holds for a term key.
    pub fn get(&self, key: &[u8]) -> Option<TermRef> {
        self.fst.get(key).map(|v| self.term_ref(v))
    }

    /// The [`TermRef`] of an FST value.
    pub fn term_ref(&self, value: u64) -> TermRef {
        if self.infos.is_some() {
            TermRef::Ordinal(value)
        } else if self.doc_freq_in_value {
            TermRef::Region(value >> DF_BITS)
        } else {
            TermRef::Region(value)
        }
    }

    /// The document frequency an FST value holds, if it holds one (grouped
    /// dictionaries written with it, terms in fewer than 2^20 - 1 documents).
    pub fn doc_freq_of(&self, value: u64) -> Option<u32> {
        let df = value & DF_UNKNOWN;
        (self.doc_freq_in_value && df != DF_UNKNOWN).then_some(df as u32)
    }

    /// The FST value of a term key.
    pub fn value(&self, key: &[u8]) -> Option<u64> {
        self.fst.get(key)
    }

    /// The info of the term with ordinal `ord` (split layout).
    pub fn info(&self, ord: u64) -> Result<TermInfo> {
        let infos = self
            .infos
            .as_ref()
            .ok_or_else(|| Error::Internal("a grouped dictionary has no info table".into()))?;
        let n = self.info_len;
        let start = ord as usize * n;
        let mut b = [0u8; TERM_INFO_LEN + 16];
        infos.read_small(start..start + n, &mut b[..n])?;
        io::record_needed(n as u64);
        Ok(TermInfo::decode(&b))
    }

    /// The underlying FST (for merges and inspection).
    pub fn fst(&self) -> &fst::Map<impl AsRef<[u8]>> {
        &self.fst
    }
}

/// Where a term's sections live (chosen at index time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    /// One region per term, in read order, its metadata first: the term
    /// dictionary (an FST in memory) points straight at it and holds its
    /// document frequency, so a small term costs one page. Regions are
    /// ordered by term, then field ([`Layout::term_order`]).
    #[default]
    Grouped,
    /// Separate streams as in Lucene: a term-info table, then doc ids and
    /// frequencies (`.doc`), positions (`.pos`) and offsets (`.pay`).
    Split,
}

impl Layout {
    /// The order in which a segment's terms are written (term keys are the
    /// field id byte, then the term). Grouped: by term, then field, so the
    /// regions of one word in every field sit side by side and a query on
    /// a bare word (title and body) reads them together. Split: by key
    /// (field, then term), each field's terms apart, as in Lucene.
    pub fn term_order(self, a: &[u8], b: &[u8]) -> std::cmp::Ordering {
        match self {
            Layout::Grouped => {
                let (ra, rb) = (a.get(1..).unwrap_or(&[]), b.get(1..).unwrap_or(&[]));
                ra.cmp(rb).then_with(|| a.first().cmp(&b.first()))
            }
            Layout::Split => a.cmp(b),
        }
    }
}

impl std::fmt::Display for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Layout::Grouped => "grouped",
            Layout::Split => "split",
        })
    }
}

impl std::str::FromStr for Layout {
    type Err = Error;
    fn from_str(s: &str) -> Result<Layout> {
        match s {
            "grouped" => Ok(Layout::Grouped),
            "split" => Ok(Layout::Split),
            _ => Err(Error::InvalidArgument(format!("unknown layout `{s}` (grouped, split)"))),
        }
    }
}

/// Sizes of an encoded region, recorded in the term dictionary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RegionInfo {
    /// Documents containing the term.
    pub doc_freq: u32,
    /// Occurrences of the term.
    pub total_term_freq: u64,
    /// Bytes of header, skip table and doc/freq blocks (the prefetch zone).
    pub zone_len: u32,
    /// Bytes of the positions section.
    pub pos_len: u32,
    /// Bytes of the offsets section.
    pub off_len: u32,
    /// Bytes of the `after` filter groups (0: the term has no filters).
    pub after_len: u32,
    /// Bytes of the `before` filter groups, which follow the `after` ones.
    pub before_len: u32,
}

impl RegionInfo {
    /// Total bytes of the region.
    pub fn len(&self) -> u64 {
        self.zone_len as u64 + self.bloom_len() + self.pos_len as u64 + self.off_len as u64
    }

    /// Bytes of both filter sections.
    pub fn bloom_len(&self) -> u64 {
        self.after_len as u64 + self.before_len as u64
    }

    /// True for an empty region (never written for a real term).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::seq::SliceRandom;
    use rand::SeedableRng;

    proptest! {
        /// A grouped dictionary fed in term order (text, then field, as
        /// segments and merges write their regions) takes the bucketing
        /// path and writes the same FST as one fed in any other order
        /// (the comparison sort), relocated entries included.
        #[test]
        fn term_order_input_writes_the_sorted_dictionary(
            keys in proptest::collection::btree_set((0u8..4, proptest::collection::vec(b'a'..b'e', 0..5)), 1..200),
            shuffle in any::<u64>(),
            split in any::<prop::sample::Index>(),
        ) {
            let mut keys: Vec<Vec<u8>> = keys.into_iter().map(|(f, t)| [&[f][..], &t].concat()).collect();
            keys.sort_by(|a, b| Layout::Grouped.term_order(a, b));
            let dir = tempfile::tempdir().unwrap();
            let info = TermInfo::default();
            let value = |k: &[u8]| k.iter().fold(7u64, |h, &b| h.wrapping_mul(31).wrapping_add(b as u64)) & 0xffff;
            let write = |name: &str, keys: &[Vec<u8>], relocate_from: usize| {
                let mut w = TermDictWriter::create(Layout::Grouped, false, true, &dir.path().join("unused")).unwrap();
                let mut part = TermDictWriter::create(Layout::Grouped, false, true, &dir.path().join("unused")).unwrap();
                for (i, k) in keys.iter().enumerate() {
                    match i < relocate_from {
                        true => w.insert(k, value(k), &info).unwrap(),
                        false => part.insert(k, value(k), &info).unwrap(),
                    }
                }
                w.absorb(part, 0).unwrap();
                let in_order = w.in_term_order;
                let path = dir.path().join(name);
                w.finish(&path).unwrap();
                (in_order, std::fs::read(path).unwrap())
            };
            let at = split.index(keys.len() + 1);
            let (fast, fast_bytes) = write("fast", &keys, at);
            prop_assert!(fast);
            let mut mixed = keys.clone();
            mixed.shuffle(&mut rand_pcg::Pcg64::seed_from_u64(shuffle));
            let (_, sorted_bytes) = write("sorted", &mixed, at);
            prop_assert_eq!(fast_bytes, sorted_bytes);
        }
    }

    #[test]
    fn meta_and_info_roundtrip() {
        for bloom in [false, true] {
            let r = RegionInfo {
                doc_freq: 300,
                total_term_freq: 1 << 40,
                zone_len: 70_000,
                pos_len: 12,
                off_len: 99,
                after_len: if bloom { 4_000 } else { 0 },
                before_len: if bloom { 3_000 } else { 0 },
            };
            let mut m = Vec::new();
            encode_meta(&r, bloom, &mut m);
            assert!(m.len() <= MAX_META_LEN);
            let (info, used) = decode_meta(&m, 1000, bloom).unwrap();
            assert_eq!(used, m.len());
            assert_eq!(info.region, r);
            assert_eq!(info.doc_offset, 1000 + m.len() as u64);
            assert_eq!(info.pos_offset, info.doc_offset + 70_000);
            assert_eq!(info.off_offset, info.pos_offset + 12);
            assert_eq!(info.bloom_offset, info.off_offset + 99);
            let mut record = [0u8; TERM_INFO_LEN + 16];
            record[..info_len(bloom)].copy_from_slice(&info.encode()[..info_len(bloom)]);
            // A table without filters keeps no filter offset.
            let want = TermInfo {
                bloom_offset: if bloom { info.bloom_offset } else { 0 },
                ..info
            };
            assert_eq!(TermInfo::decode(&record), want);
            assert!(decode_meta(&m[..m.len() - 1], 0, bloom).is_none());
        }
    }

    #[test]
    fn grouped_values_carry_document_frequencies_when_asked() {
        use crate::storage::{IndexFile, Tier};
        let dir = tempfile::tempdir().unwrap();
        let fst_path = dir.path().join("t.fst");
        for with_df in [false, true] {
            let mut w = TermDictWriter::create(Layout::Grouped, false, with_df, &dir.path().join("t.tin")).unwrap();
            let terms: [(&[u8], u64, u32); 3] = [
                (b"\x01a", 0, 1),
                (b"\x01b", 4096, (1 << DF_BITS) - 2),
                (b"\x01c", 1 << 40, 5_000_000),
            ];
            for (key, offset, df) in terms {
                let info = TermInfo {
                    region: RegionInfo {
                        doc_freq: df,
                        ..RegionInfo::default()
                    },
                    ..TermInfo::default()
                };
                w.insert(key, offset, &info).unwrap();
            }
            w.finish(&fst_path).unwrap();
            let dict = TermDict::open(IndexFile::open(&fst_path, Tier::Ram).unwrap(), None, false, with_df).unwrap();
            for (key, offset, df) in terms {
                let v = dict.value(key).unwrap();
                assert_eq!(dict.term_ref(v), TermRef::Region(offset));
                // Frequencies too large for the field are read from the region.
                let want = (with_df && df < (1 << DF_BITS) - 1).then_some(df);
                assert_eq!(dict.doc_freq_of(v), want, "{key:?} with_df {with_df}");
            }
        }
        // Offsets that do not fit beside the frequency are refused.
        let mut w = TermDictWriter::create(Layout::Grouped, false, true, &dir.path().join("t.tin")).unwrap();
        assert!(w.insert(b"x", 1 << 50, &TermInfo::default()).is_err());
    }
}
