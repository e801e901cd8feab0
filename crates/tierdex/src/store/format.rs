//! On-storage format of the document store: file headers, index entries and
//! the serialised form of one document.
//!
//! ```text
//! data file content:
//!   header (32 bytes) = magic "TDXSTDAT" | version u32 | flags u32 | dict_len u32 | reserved u32 | dict_hash u64
//!   dictionary (dict_len bytes, present when flags has FLAG_DICTIONARY)
//!   records: one zstd frame per document (content size and content checksum
//!            in the frame, no dictionary id), zero padding between records
//!            where alignment saves a page read
//!
//! index file content:
//!   entries: per document, offset u64 | length u32 (12 bytes, little endian)
//!   trailer (32 bytes) = magic "TDXSTIDX" | version u32 | num_docs u32 | data_len u64 | data_checksum u64
//!
//! serialised document (the input of one zstd frame), one of:
//!   format 1: byte 1 | varint id_len | id | varint title_len | title | varint body_len | body
//!   format 2: byte 2 | varint id_len | id | the fields as one JSON object (UTF-8)
//! ```
//!
//! Format 1 holds a document of exactly a `title` and a `body` string (the
//! default schema, and every document stored before schemas existed);
//! format 2 any other set of fields.
//!
//! All integers are little endian; varints are LEB128. A record's
//! uncompressed length is the content size in its zstd frame header; readers
//! check it for plausibility before allocating and zstd checks the output
//! against it (and against the content checksum).

use serde_json::Value;

use crate::schema::Document;

/// Magic at the start of a data file.
pub(super) const DATA_MAGIC: &[u8; 8] = b"TDXSTDAT";
/// Magic at the start of an index file's trailer.
pub(super) const INDEX_MAGIC: &[u8; 8] = b"TDXSTIDX";
/// Version of both files' layout.
pub(super) const FORMAT_VERSION: u32 = 1;
/// Length of the data file header.
pub(super) const DATA_HEADER_LEN: usize = 32;
/// Length of the index file trailer.
pub(super) const INDEX_TRAILER_LEN: usize = 32;
/// Length of one index entry.
pub(super) const INDEX_ENTRY_LEN: usize = 12;
/// Data header flag: a zstd dictionary follows the header.
pub(super) const FLAG_DICTIONARY: u32 = 1;
/// First byte of a serialised title-and-body document.
pub(super) const DOC_FORMAT_V1: u8 = 1;
/// First byte of a serialised document with any fields.
pub(super) const DOC_FORMAT_V2: u8 = 2;

/// Largest serialised document the store accepts (id, title and body plus a
/// few bytes of framing). Bigger documents are refused by the writer, and a
/// record claiming more is corrupt. It stays below zstd's default decoding
/// window limit (128 MiB), so every accepted document can be read back.
pub const MAX_DOCUMENT_BYTES: usize = 64 << 20;

// The corpus readers' default record limit lets through only documents the
// store takes.
const _: () = assert!(crate::corpus::MAX_RECORD_BYTES as usize <= MAX_DOCUMENT_BYTES);

/// Most bytes one compressed byte can expand to in a zstd frame: a block is
/// at least 4 bytes (3 bytes of header, 1 of RLE content) and decodes to at
/// most 128 KiB.
const MAX_BLOCK: u64 = 128 << 10;

/// The data file header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct DataHeader {
    pub flags: u32,
    pub dict_len: u32,
    pub dict_hash: u64,
}

impl DataHeader {
    pub fn encode(&self) -> [u8; DATA_HEADER_LEN] {
        let mut h = [0u8; DATA_HEADER_LEN];
        h[..8].copy_from_slice(DATA_MAGIC);
        h[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&self.flags.to_le_bytes());
        h[16..20].copy_from_slice(&self.dict_len.to_le_bytes());
        h[24..32].copy_from_slice(&self.dict_hash.to_le_bytes());
        h
    }

    /// Parses and checks a header; the error is the reason it is corrupt.
    pub fn decode(h: &[u8]) -> Result<DataHeader, String> {
        if h.len() < DATA_HEADER_LEN {
            return Err(format!(
                "content is {} bytes, shorter than the {DATA_HEADER_LEN}-byte store header",
                h.len()
            ));
        }
        if &h[..8] != DATA_MAGIC {
            return Err("missing document store magic (not a store data file)".into());
        }
        let version = le_u32(&h[8..12]);
        if version != FORMAT_VERSION {
            return Err(format!("unsupported document store version {version}"));
        }
        let flags = le_u32(&h[12..16]);
        if flags & !FLAG_DICTIONARY != 0 {
            return Err(format!("unknown document store flags {flags:#x}"));
        }
        let dict_len = le_u32(&h[16..20]);
        let dict_hash = le_u64(&h[24..32]);
        if (flags & FLAG_DICTIONARY != 0) != (dict_len != 0) {
            return Err(format!("dictionary flag and dictionary length {dict_len} disagree"));
        }
        Ok(DataHeader {
            flags,
            dict_len,
            dict_hash,
        })
    }
}

/// The index file trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct IndexTrailer {
    pub num_docs: u32,
    pub data_len: u64,
    pub data_checksum: u64,
}

impl IndexTrailer {
    pub fn encode(&self) -> [u8; INDEX_TRAILER_LEN] {
        let mut t = [0u8; INDEX_TRAILER_LEN];
        t[..8].copy_from_slice(INDEX_MAGIC);
        t[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        t[12..16].copy_from_slice(&self.num_docs.to_le_bytes());
        t[16..24].copy_from_slice(&self.data_len.to_le_bytes());
        t[24..32].copy_from_slice(&self.data_checksum.to_le_bytes());
        t
    }

    /// Parses the trailer from the last bytes of `content` and checks the
    /// entry count against the content length.
    pub fn decode(content_len: usize, t: &[u8]) -> Result<IndexTrailer, String> {
        if &t[..8] != INDEX_MAGIC {
            return Err("missing document store index magic (not a store index file)".into());
        }
        let version = le_u32(&t[8..12]);
        if version != FORMAT_VERSION {
            return Err(format!("unsupported document store index version {version}"));
        }
        let trailer = IndexTrailer {
            num_docs: le_u32(&t[12..16]),
            data_len: le_u64(&t[16..24]),
            data_checksum: le_u64(&t[24..32]),
        };
        let expected = trailer.num_docs as u64 * INDEX_ENTRY_LEN as u64 + INDEX_TRAILER_LEN as u64;
        if expected != content_len as u64 {
            return Err(format!(
                "index claims {} documents ({expected} bytes) but holds {content_len} bytes",
                trailer.num_docs
            ));
        }
        Ok(trailer)
    }
}

/// Encodes one index entry.
pub(super) fn encode_entry(offset: u64, len: u32) -> [u8; INDEX_ENTRY_LEN] {
    let mut e = [0u8; INDEX_ENTRY_LEN];
    e[..8].copy_from_slice(&offset.to_le_bytes());
    e[8..].copy_from_slice(&len.to_le_bytes());
    e
}

/// Decodes one index entry (`e` is exactly [`INDEX_ENTRY_LEN`] bytes).
#[inline]
pub(super) fn decode_entry(e: &[u8]) -> (u64, u32) {
    (le_u64(&e[..8]), le_u32(&e[8..12]))
}

#[inline]
fn le_u32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_le_bytes(a)
}

#[inline]
fn le_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a varint of at most 5 bytes (a u32 length) from `b` at `*pos`.
fn get_len(b: &[u8], pos: &mut usize) -> Result<usize, String> {
    let mut v: u64 = 0;
    for i in 0..5 {
        let Some(&byte) = b.get(*pos) else {
            return Err("document ends inside a length".into());
        };
        *pos += 1;
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return usize::try_from(v).map_err(|_| "length does not fit in memory".to_string());
        }
    }
    Err("overlong length varint".into())
}

/// The title and body of a document of exactly those two text fields.
fn title_body(doc: &Document) -> Option<[&str; 2]> {
    match (doc.fields.len(), doc.fields.get("title"), doc.fields.get("body")) {
        (2, Some(Value::String(t)), Some(Value::String(b))) => Some([t, b]),
        _ => None,
    }
}

/// Serialised size of `doc`.
#[cfg(test)]
pub(super) fn serialised_len(doc: &Document) -> usize {
    let mut out = Vec::new();
    serialise(doc, &mut out);
    out.len()
}

/// Serialises `doc` into `out` (cleared first).
pub(super) fn serialise(doc: &Document, out: &mut Vec<u8>) {
    out.clear();
    let field = |s: &str| varint_len(s.len() as u64) + s.len();
    match title_body(doc) {
        Some([title, body]) => {
            out.reserve(1 + field(&doc.id) + field(title) + field(body));
            out.push(DOC_FORMAT_V1);
            for s in [doc.id.as_str(), title, body] {
                put_varint(out, s.len() as u64);
                out.extend_from_slice(s.as_bytes());
            }
        }
        None => {
            out.push(DOC_FORMAT_V2);
            put_varint(out, doc.id.len() as u64);
            out.extend_from_slice(doc.id.as_bytes());
            serde_json::to_writer(&mut *out, &doc.fields).expect("JSON values serialise");
        }
    }
}

fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// A length-prefixed UTF-8 string of `raw` at `*pos` (named `name` in errors).
fn get_str<'a>(raw: &'a [u8], pos: &mut usize, name: &str) -> Result<&'a str, String> {
    let len = get_len(raw, pos)?;
    let end = pos.checked_add(len).filter(|&end| end <= raw.len()).ok_or_else(|| {
        format!(
            "{name} length {len} runs past the end of the {}-byte document",
            raw.len()
        )
    })?;
    let s = std::str::from_utf8(&raw[*pos..end]).map_err(|e| format!("{name} is not valid UTF-8: {e}"))?;
    *pos = end;
    Ok(s)
}

/// Decodes a serialised document, checking the format byte, the lengths
/// and UTF-8. The error is the reason it is corrupt.
pub(super) fn parse(raw: &[u8]) -> Result<Document, String> {
    let format = match raw.first() {
        Some(&f @ (DOC_FORMAT_V1 | DOC_FORMAT_V2)) => f,
        Some(&other) => return Err(format!("unknown document format {other}")),
        None => return Err("empty document record".into()),
    };
    let mut pos = 1;
    let id = get_str(raw, &mut pos, "id")?;
    let mut doc = Document::new(id);
    if format == DOC_FORMAT_V1 {
        let title = get_str(raw, &mut pos, "title")?;
        let body = get_str(raw, &mut pos, "body")?;
        if pos != raw.len() {
            return Err(format!("{} trailing bytes after the document body", raw.len() - pos));
        }
        return Ok(doc.with_text("title", title).with_text("body", body));
    }
    doc.fields = serde_json::from_slice(&raw[pos..]).map_err(|e| format!("damaged fields: {e}"))?;
    Ok(doc)
}

/// Uncompressed length recorded in a record's zstd frame header, checked
/// against [`MAX_DOCUMENT_BYTES`] and against what `record.len()` compressed
/// bytes can possibly expand to. The error is the reason it is corrupt.
pub(super) fn record_content_size(record: &[u8]) -> Result<usize, String> {
    let size = match zstd::zstd_safe::get_frame_content_size(record) {
        Ok(Some(size)) => size,
        Ok(None) => return Err("record does not state its uncompressed length".into()),
        Err(_) => return Err("record does not start with a valid zstd frame header".into()),
    };
    let bound = (record.len() as u64 / 4 + 1) * MAX_BLOCK;
    if size > MAX_DOCUMENT_BYTES as u64 || size > bound {
        return Err(format!(
            "record of {} bytes claims an impossible uncompressed length {size}",
            record.len()
        ));
    }
    Ok(size as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialise_parse_roundtrip() {
        let doc = Document::title_body("42", "Ünïcödé 標題", "x".repeat(300));
        let mut out = Vec::new();
        serialise(&doc, &mut out);
        assert_eq!(out[0], DOC_FORMAT_V1);
        assert_eq!(parse(&out).unwrap(), doc);
        let mut other = Document::new("7").with_text("name", "n").with_text("title", "t");
        other.fields.insert("n".into(), 5.into());
        serialise(&other, &mut out);
        assert_eq!(out[0], DOC_FORMAT_V2);
        assert_eq!(parse(&out).unwrap(), other);
        for doc in [Document::new("e"), Document::new("t").with_text("title", "only")] {
            serialise(&doc, &mut out);
            assert_eq!(parse(&out).unwrap(), doc);
        }
    }

    #[test]
    fn varint_lengths() {
        for v in [0u64, 1, 127, 128, 16_383, 16_384, u32::MAX as u64] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(out.len(), varint_len(v), "{v}");
            let mut pos = 0;
            assert_eq!(get_len(&out, &mut pos).unwrap() as u64, v);
            assert_eq!(pos, out.len());
        }
    }

    #[test]
    fn parse_rejects_damage() {
        let doc = Document::title_body("1", "t", "body");
        let mut out = Vec::new();
        serialise(&doc, &mut out);
        assert!(parse(&[]).is_err());
        assert!(parse(&out[..out.len() - 1]).is_err());
        let mut longer = out.clone();
        longer.push(b'x');
        assert!(parse(&longer).unwrap_err().contains("trailing"));
        let mut bad_format = out.clone();
        bad_format[0] = 9;
        assert!(parse(&bad_format).unwrap_err().contains("format"));
        let mut bad_utf8 = out.clone();
        let last = bad_utf8.len() - 1;
        bad_utf8[last] = 0xff;
        assert!(parse(&bad_utf8).unwrap_err().contains("UTF-8"));
        assert!(parse(&[1, 0xff, 0xff, 0xff, 0xff, 0xff]).is_err());
        assert!(parse(&[1, 0xff, 0xff, 0xff, 0xff, 0x0f]).is_err());
    }

    #[test]
    fn headers_roundtrip_and_reject_garbage() {
        let h = DataHeader {
            flags: FLAG_DICTIONARY,
            dict_len: 7,
            dict_hash: 99,
        };
        assert_eq!(DataHeader::decode(&h.encode()).unwrap(), h);
        assert!(DataHeader::decode(&[0u8; 32]).is_err());
        assert!(DataHeader::decode(&h.encode()[..20]).is_err());
        let no_dict = DataHeader {
            flags: 0,
            dict_len: 7,
            dict_hash: 0,
        };
        assert!(DataHeader::decode(&no_dict.encode()).is_err());
        let t = IndexTrailer {
            num_docs: 3,
            data_len: 100,
            data_checksum: 5,
        };
        assert_eq!(IndexTrailer::decode(68, &t.encode()).unwrap(), t);
        assert!(IndexTrailer::decode(69, &t.encode()).is_err());
        assert!(IndexTrailer::decode(68, &[0u8; 32]).is_err());
    }

    #[test]
    fn content_size_bounds() {
        let frame = zstd::bulk::compress(&[b'a'; 1000], 3).unwrap();
        assert_eq!(record_content_size(&frame).unwrap(), 1000);
        assert!(record_content_size(b"not a frame").is_err());
        assert!(record_content_size(&[]).is_err());
    }
}
