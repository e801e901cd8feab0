//! The id column: every document's external id, apart from the stored
//! documents, so that answering a query with ids never reads the store.
//!
//! Showing a hit's id through the store costs a random read of a compressed
//! record (a page or more) and a decompression per hit; the id column costs
//! one small read per hit. Ids are front-coded in blocks of [`BLOCK_IDS`]:
//! consecutive documents usually have ids sharing a prefix (`g1041`,
//! `g1042`, ...), so a block of 32 ids is about a hundred bytes, the column is
//! a few bytes per document and stays in memory under any sensible limit, and
//! no block crosses a page, so an id is one page read. Layout of the file's
//! content (after which the usual checksum table and footer follow):
//!
//! * 16-byte header: `kind` (u8), 7 zero bytes, the document count `n`
//!   (u64 LE);
//! * kind 3 (blocks, written since): `ceil(n / 32) + 1` u64 LE offsets of the
//!   blocks (from the end of this table; the last one is the data length),
//!   held in memory once open, then the blocks. Each id in a block is
//!   `shared` (VByte: bytes in common with the previous id of the block, 0
//!   for the first), `len` (VByte) and `len` bytes;
//! * kind 1 (integers, read only): `n` u64 LE values;
//! * kind 2 (strings, read only): `n + 1` u64 LE offsets into the bytes that
//!   follow them.

use std::path::Path;

use crate::codec;
use crate::error::{Error, Result};
use crate::storage::{FileInfo, FileWriter, IndexFile, PAGE_SIZE};

const HEADER: usize = 16;
const KIND_INTEGERS: u8 = 1;
const KIND_STRINGS: u8 = 2;
const KIND_BLOCKS: u8 = 3;

/// Ids per front-coded block.
pub const BLOCK_IDS: usize = 32;

/// Collects the ids of a segment's documents in order and writes the id column.
#[derive(Debug, Default)]
pub struct IdsWriter {
    /// Front-coded blocks, laid out as in the file (padding included).
    data: Vec<u8>,
    /// Start of each block in `data`.
    starts: Vec<u64>,
    /// The previous id of the current block.
    prev: Vec<u8>,
    len: usize,
}

impl IdsWriter {
    /// An empty column.
    pub fn new() -> IdsWriter {
        IdsWriter::default()
    }

    /// Number of ids pushed.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no id was pushed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends the id of the next document.
    pub fn push(&mut self, id: &str) {
        let id = id.as_bytes();
        let shared = match self.len % BLOCK_IDS {
            0 => {
                self.starts.push(self.data.len() as u64);
                self.prev.clear();
                0
            }
            _ => self.prev.iter().zip(id).take_while(|(a, b)| a == b).count(),
        };
        codec::write_u64(&mut self.data, shared as u64);
        codec::write_u64(&mut self.data, (id.len() - shared) as u64);
        self.data.extend_from_slice(&id[shared..]);
        self.prev.clear();
        self.prev.extend_from_slice(id);
        self.len += 1;
    }

    /// Writes the column to `path`.
    pub fn finish(self, path: &Path) -> Result<FileInfo> {
        let n = self.len as u64;
        let mut header = [0u8; HEADER];
        header[0] = KIND_BLOCKS;
        header[8..].copy_from_slice(&n.to_le_bytes());
        // Move each block that would cross a page (and fits in one) to the
        // start of the next page; the file offset of the data is known now.
        let mut starts = self.starts;
        starts.push(self.data.len() as u64);
        let base = HEADER + starts.len() * 8;
        let mut data = Vec::with_capacity(self.data.len() + self.data.len() / 32);
        let mut offsets = Vec::with_capacity(starts.len());
        for w in starts.windows(2) {
            let block = &self.data[w[0] as usize..w[1] as usize];
            let at = base + data.len();
            let room = PAGE_SIZE - at % PAGE_SIZE;
            if block.len() > room && block.len() <= PAGE_SIZE {
                data.resize(data.len() + room, 0);
            }
            offsets.push(data.len() as u64);
            data.extend_from_slice(block);
        }
        offsets.push(data.len() as u64);
        let mut w = FileWriter::create(path)?;
        w.write_all(&header)?;
        let table: Vec<u8> = offsets.iter().flat_map(|o| o.to_le_bytes()).collect();
        w.write_all(&table)?;
        w.write_all(&data)?;
        w.finish()
    }
}

/// How a column finds an id (by kind).
#[derive(Debug)]
enum Kind {
    Integers,
    Strings,
    /// Block offsets (from the end of the table), `ceil(n / 32) + 1` of them.
    Blocks(Vec<u64>),
}

/// Reads ids from an id column.
#[derive(Debug)]
pub struct IdsReader {
    file: IndexFile,
    kind: Kind,
    len: u32,
}

impl IdsReader {
    /// Checks the header and size of `file` against `num_docs`.
    pub fn open(file: IndexFile, num_docs: u32) -> Result<IdsReader> {
        let path = file.path().to_path_buf();
        let corrupt = |what: &str| Error::corrupt(&path, what.to_string());
        if file.len() < HEADER {
            return Err(corrupt("id column shorter than its header"));
        }
        let mut header = [0u8; HEADER];
        file.read_small(0..HEADER, &mut header)?;
        let n = u64::from_le_bytes(header[8..].try_into().expect("8 bytes"));
        if n != num_docs as u64 || header[1..8].iter().any(|&b| b != 0) {
            return Err(corrupt("id column header does not match the document count"));
        }
        let entries = match header[0] {
            KIND_INTEGERS => n,
            KIND_STRINGS => n + 1,
            KIND_BLOCKS => n.div_ceil(BLOCK_IDS as u64) + 1,
            _ => return Err(corrupt("unknown id column kind")),
        } as usize;
        let table = entries * 8;
        if file.len() < HEADER + table || (header[0] == KIND_INTEGERS && file.len() != HEADER + table) {
            return Err(corrupt("id column size does not match the document count"));
        }
        let data_len = (file.len() - HEADER - table) as u64;
        let kind = match header[0] {
            KIND_INTEGERS => Kind::Integers,
            KIND_STRINGS => Kind::Strings,
            _ => {
                let mut buf = Vec::new();
                let raw = file.read(HEADER..HEADER + table, &mut buf)?;
                let offsets: Vec<u64> = raw
                    .chunks_exact(8)
                    .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
                    .collect();
                if offsets.windows(2).any(|w| w[0] > w[1]) || offsets.last() != Some(&data_len) {
                    return Err(corrupt(
                        "id column block offsets are out of order or do not end the file",
                    ));
                }
                Kind::Blocks(offsets)
            }
        };
        let reader = IdsReader {
            file,
            kind,
            len: num_docs,
        };
        if matches!(reader.kind, Kind::Strings) {
            // The last offset bounds every id: it must end the file exactly.
            if reader.offset(n as usize)? != data_len {
                return Err(corrupt("id column offsets do not end at the end of the file"));
            }
        }
        Ok(reader)
    }

    fn offset(&self, i: usize) -> Result<u64> {
        let mut b = [0u8; 8];
        let at = HEADER + i * 8;
        self.file.read_small(at..at + 8, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// Writes the id of `doc` into `out` (cleared first).
    pub fn id_into(&self, doc: u32, out: &mut String) -> Result<()> {
        out.clear();
        if doc >= self.len {
            return Err(Error::NotFound(format!(
                "document {doc} does not exist (the segment holds {})",
                self.len
            )));
        }
        let mut buf = Vec::new();
        let bytes: Vec<u8> = match &self.kind {
            Kind::Integers => {
                use std::fmt::Write;
                let v = self.offset(doc as usize)?;
                write!(out, "{v}").expect("writing to a String");
                return Ok(());
            }
            Kind::Strings => {
                let mut b = [0u8; 16];
                let at = HEADER + doc as usize * 8;
                self.file.read_small(at..at + 16, &mut b)?;
                let start = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
                let end = u64::from_le_bytes(b[8..].try_into().expect("8 bytes"));
                let base = (HEADER + (self.len as usize + 1) * 8) as u64;
                if start > end || base + end > self.file.len() as u64 {
                    return Err(Error::corrupt(self.file.path(), format!("id {doc} out of bounds")));
                }
                self.file
                    .read((base + start) as usize..(base + end) as usize, &mut buf)?
                    .to_vec()
            }
            Kind::Blocks(offsets) => {
                let b = doc as usize / BLOCK_IDS;
                let base = HEADER + offsets.len() * 8;
                let range = base + offsets[b] as usize..base + offsets[b + 1] as usize;
                let block = self.file.read(range, &mut buf)?;
                decode_in_block(block, doc as usize % BLOCK_IDS).ok_or_else(|| {
                    Error::corrupt(self.file.path(), format!("id block of document {doc} is malformed"))
                })?
            }
        };
        let s = std::str::from_utf8(&bytes)
            .map_err(|_| Error::corrupt(self.file.path(), format!("id {doc} is not UTF-8")))?;
        out.push_str(s);
        Ok(())
    }

    /// Verifies every page of the column against its checksums.
    pub fn verify_all(&self) -> Result<()> {
        self.file.verify_all()
    }

    /// The id of `doc`.
    pub fn id(&self, doc: u32) -> Result<String> {
        let mut s = String::new();
        self.id_into(doc, &mut s)?;
        Ok(s)
    }
}

/// The `nth` id of a front-coded block; `None` if the block is malformed.
fn decode_in_block(block: &[u8], nth: usize) -> Option<Vec<u8>> {
    let mut id = Vec::new();
    let mut pos = 0usize;
    for _ in 0..=nth {
        let shared = codec::read_u64(block, &mut pos)? as usize;
        let len = codec::read_u64(block, &mut pos)? as usize;
        let suffix = block.get(pos..pos.checked_add(len)?)?;
        if shared > id.len() {
            return None;
        }
        id.truncate(shared);
        id.extend_from_slice(suffix);
        pos += len;
    }
    Some(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::Tier;
    use proptest::prelude::*;

    fn write(ids: &[String], path: &Path) {
        let mut w = IdsWriter::new();
        for id in ids {
            w.push(id);
        }
        assert_eq!(w.len(), ids.len());
        w.finish(path).unwrap();
    }

    fn read_all(path: &Path, n: usize, tier: Tier) -> Vec<String> {
        let r = IdsReader::open(IndexFile::open(path, tier).unwrap(), n as u32).unwrap();
        assert!(r.id(n as u32).is_err());
        (0..n as u32).map(|d| r.id(d).unwrap()).collect()
    }

    fn owned(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    /// The two kinds written before the blocks: opened by indexes built then.
    fn write_legacy(ids: &[String], integers: bool, path: &Path) {
        let mut w = FileWriter::create(path).unwrap();
        let mut out = vec![if integers { KIND_INTEGERS } else { KIND_STRINGS }];
        out.extend_from_slice(&[0; 7]);
        out.extend_from_slice(&(ids.len() as u64).to_le_bytes());
        if integers {
            for id in ids {
                out.extend_from_slice(&id.parse::<u64>().unwrap().to_le_bytes());
            }
        } else {
            let mut end = 0u64;
            out.extend_from_slice(&0u64.to_le_bytes());
            for id in ids {
                end += id.len() as u64;
                out.extend_from_slice(&end.to_le_bytes());
            }
            for id in ids {
                out.extend_from_slice(id.as_bytes());
            }
        }
        w.write_all(&out).unwrap();
        w.finish().unwrap();
    }

    #[test]
    fn ids_round_trip_on_every_tier() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.ids");
        let mixed = owned(&[
            "1",
            "007",
            "https://en.wikipedia.org/wiki?curid=12",
            "",
            "ünï",
            "ünïcode",
        ]);
        let sequential: Vec<String> = (0..1000).map(|i| format!("g{}", 98_000 + i)).collect();
        for ids in [mixed, sequential, Vec::new()] {
            write(&ids, &path);
            for tier in [Tier::Ram, Tier::Mmap, Tier::Buffered] {
                assert_eq!(read_all(&path, ids.len(), tier), ids);
            }
        }
    }

    #[test]
    fn sequential_ids_take_a_few_bytes_each() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.ids");
        let ids: Vec<String> = (0..100_000).map(|i| format!("g{}", 500_000 + i)).collect();
        write(&ids, &path);
        let bytes = std::fs::metadata(&path).unwrap().len();
        assert!(bytes < 100_000 * 5, "{bytes} bytes for 100,000 ids");
    }

    #[test]
    fn no_block_crosses_a_page() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.ids");
        // Ids of 40 to 90 bytes: blocks of 1-3 KiB, many of which would cross.
        let ids: Vec<String> = (0..3000).map(|i| format!("{i}-{}", "x".repeat(40 + i % 50))).collect();
        write(&ids, &path);
        let r = IdsReader::open(IndexFile::open(&path, Tier::Ram).unwrap(), ids.len() as u32).unwrap();
        let Kind::Blocks(offsets) = &r.kind else {
            panic!("not blocks")
        };
        let base = HEADER + offsets.len() * 8;
        let mut padded = 0;
        for w in offsets.windows(2) {
            let (a, b) = (base + w[0] as usize, base + w[1] as usize);
            assert_eq!(a / PAGE_SIZE, (b - 1) / PAGE_SIZE, "block {a}..{b} crosses a page");
            padded += (a % PAGE_SIZE == 0) as usize;
        }
        assert!(padded > 10, "the test must make blocks that need padding");
        assert_eq!(read_all(&path, ids.len(), Tier::Buffered), ids);
    }

    #[test]
    fn legacy_kinds_still_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.ids");
        let ints = owned(&["0", "7", "18446744073709551615", "42"]);
        write_legacy(&ints, true, &path);
        assert_eq!(read_all(&path, 4, Tier::Buffered), ints);
        let strings = owned(&["a", "", "ünï", "https://x?y=1"]);
        write_legacy(&strings, false, &path);
        assert_eq!(read_all(&path, 4, Tier::Mmap), strings);
    }

    #[test]
    fn wrong_count_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.ids");
        write(&owned(&["a"]), &path);
        let e = IdsReader::open(IndexFile::open(&path, Tier::Ram).unwrap(), 2).unwrap_err();
        assert!(e.to_string().contains("x.ids"), "{e}");
    }

    proptest! {
        #[test]
        fn malformed_blocks_are_errors_not_panics(block in proptest::collection::vec(any::<u8>(), 0..64),
                                                  nth in 0usize..BLOCK_IDS) {
            let _ = decode_in_block(&block, nth);
        }

        #[test]
        fn any_ids_round_trip(ids in proptest::collection::vec("[a-c]{0,6}|[0-9]{1,4}", 0..120)) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("x.ids");
            write(&ids, &path);
            prop_assert_eq!(read_all(&path, ids.len(), Tier::Ram), ids);
        }
    }
}
