//! The id column: every document's external id, apart from the stored
//! documents, so that answering a query with ids never reads the store.
//!
//! Showing a hit's id through the store costs a random read of a compressed
//! record (a page or more) and a decompression per hit; the id column costs a
//! few bytes, and it is small enough (8-16 bytes per document) that its pages
//! stay in memory under any sensible limit. Layout of the file's content
//! (after which the usual checksum table and footer follow):
//!
//! * 16-byte header: `kind` (u8: 1 = integers, 2 = strings), 7 zero bytes,
//!   the document count `n` (u64 LE);
//! * integers (every id is a canonical decimal u64: `0` or no leading zero):
//!   `n` u64 LE values, so an id is one 8-byte read;
//! * strings: `n + 1` u64 LE offsets into the bytes that follow them, so an id
//!   is a 16-byte read and its bytes.

use std::path::Path;

use crate::error::{Error, Result};
use crate::storage::{FileInfo, FileWriter, IndexFile};

const HEADER: usize = 16;
const KIND_INTEGERS: u8 = 1;
const KIND_STRINGS: u8 = 2;

/// Collects the ids of a segment's documents in order and writes the id column.
#[derive(Debug, Default)]
pub struct IdsWriter {
    ints: Vec<u64>,
    offsets: Vec<u64>,
    bytes: Vec<u8>,
    all_integers: bool,
}

/// `s` as a u64 when it is the canonical decimal form of one.
fn canonical_u64(s: &str) -> Option<u64> {
    let v: u64 = s.parse().ok()?;
    let canonical = s.len() == 1 || !s.starts_with('0');
    (canonical && s.bytes().all(|b| b.is_ascii_digit())).then_some(v)
}

impl IdsWriter {
    /// An empty column.
    pub fn new() -> IdsWriter {
        IdsWriter {
            all_integers: true,
            offsets: vec![0],
            ..Default::default()
        }
    }

    /// Number of ids pushed.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// True when no id was pushed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends the id of the next document.
    pub fn push(&mut self, id: &str) {
        if self.all_integers {
            match canonical_u64(id) {
                Some(v) => self.ints.push(v),
                None => {
                    self.all_integers = false;
                    self.ints = Vec::new();
                }
            }
        }
        self.bytes.extend_from_slice(id.as_bytes());
        self.offsets.push(self.bytes.len() as u64);
    }

    /// Writes the column to `path`.
    pub fn finish(self, path: &Path) -> Result<FileInfo> {
        let mut w = FileWriter::create(path)?;
        let n = self.len() as u64;
        let mut header = [0u8; HEADER];
        header[0] = if self.all_integers { KIND_INTEGERS } else { KIND_STRINGS };
        header[8..].copy_from_slice(&n.to_le_bytes());
        w.write_all(&header)?;
        let mut buf = Vec::with_capacity(64 * 1024);
        let mut flush_u64s = |values: &[u64], w: &mut FileWriter| -> Result<()> {
            for chunk in values.chunks(8192) {
                buf.clear();
                for v in chunk {
                    buf.extend_from_slice(&v.to_le_bytes());
                }
                w.write_all(&buf)?;
            }
            Ok(())
        };
        if self.all_integers {
            flush_u64s(&self.ints, &mut w)?;
        } else {
            flush_u64s(&self.offsets, &mut w)?;
            w.write_all(&self.bytes)?;
        }
        w.finish()
    }
}

/// Reads ids from an id column.
#[derive(Debug)]
pub struct IdsReader {
    file: IndexFile,
    integers: bool,
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
        let integers = match header[0] {
            KIND_INTEGERS => true,
            KIND_STRINGS => false,
            _ => return Err(corrupt("unknown id column kind")),
        };
        let table = if integers { n } else { n + 1 } as usize * 8;
        if file.len() < HEADER + table || (integers && file.len() != HEADER + table) {
            return Err(corrupt("id column size does not match the document count"));
        }
        let reader = IdsReader {
            file,
            integers,
            len: num_docs,
        };
        if !integers {
            // The last offset bounds every id: it must end the file exactly.
            let end = reader.offset(n as usize)?;
            if (HEADER + table) as u64 + end != reader.file.len() as u64 {
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
            return Err(Error::InvalidArgument(format!(
                "document {doc} does not exist (the segment holds {})",
                self.len
            )));
        }
        if self.integers {
            use std::fmt::Write;
            let v = self.offset(doc as usize)?;
            write!(out, "{v}").expect("writing to a String");
            return Ok(());
        }
        let mut b = [0u8; 16];
        let at = HEADER + doc as usize * 8;
        self.file.read_small(at..at + 16, &mut b)?;
        let start = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
        let end = u64::from_le_bytes(b[8..].try_into().expect("8 bytes"));
        let base = (HEADER + (self.len as usize + 1) * 8) as u64;
        if start > end || base + end > self.file.len() as u64 {
            return Err(Error::corrupt(self.file.path(), format!("id {doc} out of bounds")));
        }
        let mut buf = Vec::new();
        let bytes = self
            .file
            .read((base + start) as usize..(base + end) as usize, &mut buf)?;
        let s = std::str::from_utf8(bytes)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::Tier;

    fn roundtrip(ids: &[&str], tier: Tier) -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.ids");
        let mut w = IdsWriter::new();
        for id in ids {
            w.push(id);
        }
        w.finish(&path).unwrap();
        let r = IdsReader::open(IndexFile::open(&path, tier).unwrap(), ids.len() as u32).unwrap();
        assert_eq!(r.integers, ids.iter().all(|i| canonical_u64(i).is_some()));
        assert!(r.id(ids.len() as u32).is_err());
        (0..ids.len() as u32).map(|d| r.id(d).unwrap()).collect()
    }

    #[test]
    fn integers_and_strings_round_trip_on_every_tier() {
        let ints = ["0", "7", "18446744073709551615", "42"];
        let mixed = ["1", "007", "https://en.wikipedia.org/wiki?curid=12", "", "ünï"];
        for tier in [Tier::Ram, Tier::Mmap, Tier::Buffered] {
            assert_eq!(roundtrip(&ints, tier), ints);
            assert_eq!(roundtrip(&mixed, tier), mixed);
            assert_eq!(roundtrip(&[], tier), Vec::<String>::new());
        }
    }

    #[test]
    fn canonical_integers_only() {
        assert_eq!(canonical_u64("0"), Some(0));
        assert_eq!(canonical_u64("10"), Some(10));
        for s in ["00", "01", "+1", "-1", " 1", "1a", "", "18446744073709551616"] {
            assert_eq!(canonical_u64(s), None, "{s}");
        }
    }

    #[test]
    fn wrong_count_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.ids");
        let mut w = IdsWriter::new();
        w.push("a");
        w.finish(&path).unwrap();
        let e = IdsReader::open(IndexFile::open(&path, Tier::Ram).unwrap(), 2).unwrap_err();
        assert!(e.to_string().contains("x.ids"), "{e}");
    }
}
