//! Reading a segment's `.col` file through its storage tier.

use super::packed::{self, PAD};
use super::writer::{HEADER, MAGIC, VERSION};
use super::{ColumnMeta, Packed, POINT_BLOCK};
use crate::error::{Error, Result};
use crate::storage::{IndexFile, PageWindow};

/// A column's directory entry and its block index (in memory).
#[derive(Debug)]
pub struct Column {
    /// What the directory says of it.
    pub meta: ColumnMeta,
    /// The first value of every block of [`POINT_BLOCK`] points.
    index: Box<[u64]>,
}

/// The columns of a segment (or of one part of a chained segment).
pub struct Columns {
    file: IndexFile,
    /// Offset of the sections (after the header and directory).
    body: usize,
    max_doc: u32,
    /// By field id.
    columns: Vec<Option<Column>>,
}

impl std::fmt::Debug for Columns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Columns")
            .field("file", &self.file.path())
            .field("columns", &self.columns.iter().flatten().map(|c| c.meta.field).collect::<Vec<_>>())
            .finish()
    }
}

/// A run of points (positions `start..end` in value order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PointRun {
    /// First position.
    pub start: u64,
    /// One past the last.
    pub end: u64,
}

impl PointRun {
    /// Number of points in the run.
    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    /// Whether the run is empty.
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
}

impl Columns {
    /// Opens the columns of a segment of `max_doc` documents stored in
    /// `file`, checking the directory against the file.
    pub fn open(file: IndexFile, max_doc: u32) -> Result<Columns> {
        let corrupt = |why: String| Error::corrupt(file.path(), why);
        if file.len() < HEADER {
            return Err(corrupt(format!("{} bytes, shorter than the column header", file.len())));
        }
        let mut head = [0u8; HEADER];
        file.read_small(0..HEADER, &mut head)?;
        if &head[..8] != MAGIC {
            return Err(corrupt("not a column file (bad magic)".into()));
        }
        let version = u32::from_le_bytes(head[8..12].try_into().unwrap());
        if version != VERSION {
            return Err(corrupt(format!("unsupported column format version {version}")));
        }
        let dir_len = u32::from_le_bytes(head[12..16].try_into().unwrap()) as usize;
        let body = HEADER
            .checked_add(dir_len)
            .filter(|&b| b <= file.len())
            .ok_or_else(|| corrupt("directory runs past the end".into()))?;
        let mut buf = Vec::new();
        let metas: Vec<ColumnMeta> = serde_json::from_slice(file.read(HEADER..body, &mut buf)?)
            .map_err(|e| corrupt(format!("bad column directory: {e}")))?;
        let mut columns: Vec<Option<Column>> = Vec::new();
        for meta in metas {
            let index = match &meta.points {
                Some(p) => {
                    let blocks = p.count.div_ceil(POINT_BLOCK) as usize;
                    let start = body + p.index as usize;
                    let end = start + blocks * 8;
                    if end > file.len() {
                        return Err(corrupt(format!("points index of field {} runs past the end", meta.field)));
                    }
                    let bytes = file.read(start..end, &mut buf)?;
                    bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect()
                }
                None => Box::default(),
            };
            check(&meta, max_doc, file.len() - body).map_err(|why| corrupt(format!("field {}: {why}", meta.field)))?;
            let at = meta.field as usize;
            if columns.len() <= at {
                columns.resize_with(at + 1, || None);
            }
            if columns[at].is_some() {
                return Err(corrupt(format!("field {} listed twice", meta.field)));
            }
            columns[at] = Some(Column { meta, index });
        }
        Ok(Columns {
            file,
            body,
            max_doc,
            columns,
        })
    }

    /// The column of field `field`, if the segment has one.
    pub fn column(&self, field: u8) -> Option<&Column> {
        self.columns.get(field as usize).and_then(Option::as_ref)
    }

    /// A reader of field `field`'s column, if the segment has one.
    pub fn reader(&self, field: u8) -> Option<ColumnReader<'_>> {
        self.column(field).map(|col| ColumnReader {
            file: &self.file,
            body: self.body,
            max_doc: self.max_doc,
            col,
            values: PageWindow::new(),
            starts: PageWindow::new(),
            docs: PageWindow::new(),
            offsets: PageWindow::new(),
            strings: PageWindow::new(),
        })
    }

    /// The file.
    pub fn file(&self) -> &IndexFile {
        &self.file
    }

    /// Verifies every page of the file.
    pub fn verify_all(&self) -> Result<()> {
        self.file.verify_all()
    }
}

/// Checks that a column's arrays lie inside the `body` bytes after the
/// directory.
fn check(m: &ColumnMeta, max_doc: u32, body: usize) -> std::result::Result<(), String> {
    let within = |p: &Packed, n: u64, what: &str| {
        let end = p.at.checked_add(packed::array_len(n, p.bits));
        match end {
            Some(end) if end <= body as u64 && p.bits <= 64 => Ok(()),
            _ => Err(format!("{what} run past the end")),
        }
    };
    if m.gcd == 0 || m.min > m.max || m.bits > 64 {
        return Err("bad value bounds".into());
    }
    match (&m.values, &m.starts) {
        (Some(v), None) => within(v, max_doc as u64, "values")?,
        (Some(v), Some(s)) => {
            within(s, max_doc as u64 + 1, "starts")?;
            within(v, m.value_count, "values")?;
        }
        (None, None) => {}
        (None, Some(_)) => return Err("starts without values".into()),
    }
    if let Some(p) = &m.points {
        within(&p.values, p.count, "point values")?;
        within(&p.docs, p.count, "point documents")?;
    }
    if let Some(d) = &m.dict {
        within(&d.offsets, d.count + 1, "dictionary offsets")?;
        if d.bytes > body as u64 {
            return Err("dictionary runs past the end".into());
        }
    }
    Ok(())
}

/// Reads one column: a document's values, runs of points, the dictionary.
/// Keeps the pages it last read, so walking documents or points in order
/// reads each page once.
pub struct ColumnReader<'a> {
    file: &'a IndexFile,
    body: usize,
    max_doc: u32,
    col: &'a Column,
    values: PageWindow,
    starts: PageWindow,
    docs: PageWindow,
    offsets: PageWindow,
    strings: PageWindow,
}

impl<'a> ColumnReader<'a> {
    /// The column's directory entry.
    pub fn meta(&self) -> &'a ColumnMeta {
        &self.col.meta
    }

    fn corrupt(&self, why: impl Into<String>) -> Error {
        Error::corrupt(self.file.path(), format!("column of field {}: {}", self.col.meta.field, why.into()))
    }

    #[inline]
    fn get(window: &mut PageWindow, file: &IndexFile, body: usize, p: Packed, i: u64) -> Result<u64> {
        if p.bits == 0 {
            return Ok(0);
        }
        let r = packed::value_range(i, p.bits);
        let at = body + p.at as usize;
        let word = window.get(file, at + r.start..at + r.start + PAD)?;
        Ok(packed::decode(word, i, p.bits))
    }

    /// The code of stored value `s`, checked against the column's bounds.
    #[inline]
    fn code(&self, s: u64) -> Result<u64> {
        let m = &self.col.meta;
        match s.checked_mul(m.gcd).and_then(|x| x.checked_add(m.min)) {
            Some(c) if c <= m.max => Ok(c),
            _ => Err(self.corrupt(format!("value {s} out of bounds"))),
        }
    }

    /// The range of `doc`'s values in the values array (multi-valued), or
    /// its single stored value plus one (0: none).
    #[inline]
    fn slot(&mut self, doc: u32) -> Result<(u64, u64)> {
        if doc >= self.max_doc {
            return Err(Error::Internal(format!("document {doc} beyond the segment's {}", self.max_doc)));
        }
        let m = &self.col.meta;
        let Some(values) = m.values else {
            return Err(Error::InvalidArgument(format!(
                "field {} has no doc values (doc_values: false)",
                m.field
            )));
        };
        match m.starts {
            None => {
                let v = Self::get(&mut self.values, self.file, self.body, values, doc as u64)?;
                Ok((v, u64::MAX))
            }
            Some(s) => {
                let a = Self::get(&mut self.starts, self.file, self.body, s, doc as u64)?;
                let b = Self::get(&mut self.starts, self.file, self.body, s, doc as u64 + 1)?;
                if a > b || b > m.value_count {
                    return Err(self.corrupt(format!("starts {a}..{b} of document {doc}")));
                }
                Ok((a, b))
            }
        }
    }

    /// `doc`'s codes, ascending, into `out` (cleared first).
    pub fn codes(&mut self, doc: u32, out: &mut Vec<u64>) -> Result<()> {
        out.clear();
        match self.slot(doc)? {
            (0, u64::MAX) => {}
            (v, u64::MAX) => out.push(self.code(v - 1)?),
            (a, b) => {
                let values = self.col.meta.values.expect("checked");
                for i in a..b {
                    let s = Self::get(&mut self.values, self.file, self.body, values, i)?;
                    out.push(self.code(s)?);
                }
            }
        }
        Ok(())
    }

    /// A single-valued column's code of each of `docs` (ascending) into
    /// `out` (`None`: no value), decoded from one read of the packed values
    /// when no two neighbours lie a page apart (so the read covers only
    /// pages holding some document's value). Returns false, with `out`
    /// cleared, when the column is multi-valued, has no doc values, or the
    /// documents are too sparse: read them one by one then.
    pub fn single_codes(&mut self, docs: &[u32], out: &mut Vec<Option<u64>>) -> Result<bool> {
        out.clear();
        let m = &self.col.meta;
        let (Some(values), None) = (m.values, m.starts) else {
            return Ok(false);
        };
        let (Some(&first), Some(&last)) = (docs.first(), docs.last()) else {
            return Ok(true);
        };
        if last >= self.max_doc {
            return Err(Error::Internal(format!("document {last} beyond the segment's {}", self.max_doc)));
        }
        let bits = values.bits;
        if bits == 0 {
            out.resize(docs.len(), None);
            return Ok(true);
        }
        let near = docs
            .windows(2)
            .all(|w| w[0] < w[1] && (w[1] - w[0]) as u64 * bits as u64 / 8 < crate::storage::PAGE_SIZE as u64);
        if !near {
            return Ok(false);
        }
        let lo = packed::value_range(first as u64, bits).start;
        let hi = packed::value_range(last as u64, bits).end;
        let at = self.body + values.at as usize;
        let bytes = self.values.get(self.file, at + lo..at + hi)?;
        let (gcd, min, max) = (m.gcd, m.min, m.max);
        let mut bad = None;
        for &d in docs {
            let off = packed::value_range(d as u64, bits).start - lo;
            let stored = packed::decode(&bytes[off..], d as u64, bits);
            if stored == 0 {
                out.push(None);
                continue;
            }
            match (stored - 1).checked_mul(gcd).and_then(|x| x.checked_add(min)) {
                Some(c) if c <= max => out.push(Some(c)),
                _ => {
                    bad = Some(stored - 1);
                    break;
                }
            }
        }
        if let Some(v) = bad {
            out.clear();
            return Err(self.corrupt(format!("value {v} out of bounds")));
        }
        Ok(true)
    }

    /// `doc`'s smallest code (`first`) or largest, if it has a value.
    pub fn extreme(&mut self, doc: u32, first: bool) -> Result<Option<u64>> {
        match self.slot(doc)? {
            (0, u64::MAX) => Ok(None),
            (v, u64::MAX) => self.code(v - 1).map(Some),
            (a, b) if a == b => Ok(None),
            (a, b) => {
                let values = self.col.meta.values.expect("checked");
                let i = if first { a } else { b - 1 };
                let s = Self::get(&mut self.values, self.file, self.body, values, i)?;
                self.code(s).map(Some)
            }
        }
    }

    /// Whether `doc` has a value.
    pub fn has_value(&mut self, doc: u32) -> Result<bool> {
        Ok(match self.slot(doc)? {
            (v, u64::MAX) => v != 0,
            (a, b) => a != b,
        })
    }

    fn point_value(&mut self, pos: u64) -> Result<u64> {
        let p = self.col.meta.points.as_ref().expect("points");
        Self::get(&mut self.values, self.file, self.body, p.values, pos)
    }

    /// The first point position whose stored value is `>= x`.
    fn lower_bound(&mut self, x: u64) -> Result<u64> {
        let count = self.col.meta.points.as_ref().expect("points").count;
        let index = &self.col.index;
        let b = index.partition_point(|&v| v < x);
        if b == 0 {
            return Ok(0);
        }
        let (mut lo, mut hi) = ((b as u64 - 1) * POINT_BLOCK, (b as u64 * POINT_BLOCK).min(count));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.point_value(mid)? < x {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }

    /// The points whose codes lie in `lo..=hi` (empty without points).
    pub fn point_run(&mut self, lo: u64, hi: u64) -> Result<PointRun> {
        let m = &self.col.meta;
        let Some(p) = &m.points else {
            return Ok(PointRun::default());
        };
        let Some((lo, hi)) = m.stored_range(lo, hi) else {
            return Ok(PointRun::default());
        };
        let count = p.count;
        let start = self.lower_bound(lo)?;
        let end = match hi.checked_add(1) {
            Some(h) => self.lower_bound(h)?,
            None => count,
        };
        Ok(PointRun { start, end: end.max(start) })
    }

    /// Every point of the column (empty without points).
    pub fn all_points(&self) -> PointRun {
        PointRun {
            start: 0,
            end: self.col.meta.points.as_ref().map_or(0, |p| p.count),
        }
    }

    /// Whether the column has doc values.
    pub fn has_doc_values(&self) -> bool {
        self.col.meta.values.is_some()
    }

    /// Whether the column has points.
    pub fn has_points(&self) -> bool {
        self.col.meta.points.is_some()
    }

    /// The document of point `pos`.
    #[inline]
    pub fn point_doc(&mut self, pos: u64) -> Result<u32> {
        let p = self.col.meta.points.as_ref().expect("points");
        let d = Self::get(&mut self.docs, self.file, self.body, p.docs, pos)?;
        if d >= self.max_doc as u64 {
            return Err(self.corrupt(format!("point {pos} names document {d}")));
        }
        Ok(d as u32)
    }

    /// Calls `f` with the document of every point of `run`, decoding a
    /// chunk of the packed array at a time.
    pub fn point_docs(&mut self, run: PointRun, mut f: impl FnMut(u32)) -> Result<()> {
        const CHUNK: u64 = 4096;
        let p = self.col.meta.points.as_ref().expect("points").docs;
        let max_doc = self.max_doc as u64;
        let at = self.body + p.at as usize;
        let mut pos = run.start;
        while pos < run.end {
            let end = (pos + CHUNK).min(run.end);
            if p.bits == 0 {
                (pos..end).for_each(|_| f(0));
                pos = end;
                continue;
            }
            let first = packed::value_range(pos, p.bits).start;
            let last = packed::value_range(end - 1, p.bits).end;
            let bytes = self.docs.get(self.file, at + first..at + last)?;
            let mut bad = None;
            if p.bits <= 56 {
                // One unaligned 8-byte read per value (the array's padding
                // keeps it in bounds), its bit offset carried along.
                let mask = (1u64 << p.bits) - 1;
                let mut bit = pos * p.bits as u64 - first as u64 * 8;
                for i in pos..end {
                    let at = (bit / 8) as usize;
                    let word = u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
                    let d = (word >> (bit % 8)) & mask;
                    bit += p.bits as u64;
                    if d >= max_doc {
                        bad = Some((i, d));
                        break;
                    }
                    f(d as u32);
                }
            } else {
                for i in pos..end {
                    let off = packed::value_range(i, p.bits).start - first;
                    let d = packed::decode(&bytes[off..], i, p.bits);
                    if d >= max_doc {
                        bad = Some((i, d));
                        break;
                    }
                    f(d as u32);
                }
            }
            if let Some((i, d)) = bad {
                return Err(self.corrupt(format!("point {i} names document {d}")));
            }
            pos = end;
        }
        Ok(())
    }

    /// The code of point `pos`.
    pub fn point_code(&mut self, pos: u64) -> Result<u64> {
        let s = self.point_value(pos)?;
        self.code(s)
    }

    /// Keyword columns: the ordinal of `value` (`Ok`), or where it would
    /// go among the ordinals (`Err`).
    pub fn ord_of(&mut self, value: &[u8]) -> Result<std::result::Result<u64, u64>> {
        let count = self.col.meta.dict.as_ref().map_or(0, |d| d.count);
        let (mut lo, mut hi) = (0u64, count);
        let mut buf = Vec::new();
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            self.term(mid, &mut buf)?;
            match buf.as_slice().cmp(value) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(Ok(mid)),
            }
        }
        Ok(Err(lo))
    }

    /// Keyword columns: the value of ordinal `ord` into `out`.
    pub fn term(&mut self, ord: u64, out: &mut Vec<u8>) -> Result<()> {
        out.clear();
        let Some(d) = self.col.meta.dict.clone() else {
            return Err(Error::Internal(format!("field {} has no dictionary", self.col.meta.field)));
        };
        if ord >= d.count {
            return Err(self.corrupt(format!("ordinal {ord} of {}", d.count)));
        }
        let a = Self::get(&mut self.offsets, self.file, self.body, d.offsets, ord)?;
        let b = Self::get(&mut self.offsets, self.file, self.body, d.offsets, ord + 1)?;
        let start = self.body as u64 + d.bytes + a;
        let end = self.body as u64 + d.bytes + b;
        if a > b || end > self.file.len() as u64 {
            return Err(self.corrupt(format!("dictionary entry {ord} at {a}..{b}")));
        }
        out.extend_from_slice(self.strings.get(self.file, start as usize..end as usize)?);
        Ok(())
    }
}
