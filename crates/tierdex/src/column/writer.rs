//! Building a segment's columns in memory and writing its `.col` file.

use std::path::Path;

use rustc_hash::FxHashMap;

use super::packed::{self, bits_for};
use super::{ColumnKind, ColumnMeta, DictMeta, Packed, PointsMeta, POINT_BLOCK};
use crate::error::{Error, Result};
use crate::storage::{FileInfo, FileWriter};

/// The file's magic bytes and format version.
pub(super) const MAGIC: &[u8; 8] = b"TDXCOL01";
/// Bytes before the directory: magic, version (u32), directory length (u32).
pub(super) const HEADER: usize = 16;
/// Format version.
pub(super) const VERSION: u32 = 1;

/// One column being built.
struct Builder {
    field: u8,
    kind: ColumnKind,
    points: bool,
    doc_values: bool,
    /// Each value's document (in increasing order unless pushed otherwise:
    /// then sorted when written).
    docs: Vec<u32>,
    /// Each value's code (for keywords, its string's number in `strings`).
    codes: Vec<u64>,
    /// Keywords: each distinct string's number.
    numbers: FxHashMap<Box<str>, u32>,
    /// Keywords: the distinct strings, in order of arrival.
    strings: Vec<Box<str>>,
}

/// The columns of one segment being built: values pushed document by
/// document (in increasing order when they can be: a merge into a new
/// document order pushes them in any order), written by
/// [`ColumnsWriter::finish`].
#[derive(Default)]
pub struct ColumnsWriter {
    columns: Vec<Builder>,
}

impl ColumnsWriter {
    /// No columns yet.
    pub fn new() -> ColumnsWriter {
        ColumnsWriter::default()
    }

    /// Adds a column for field `field` holding `kind`, with points (for
    /// term and range queries) and doc values (for sorting and
    /// aggregations) as asked; returns its number for [`Self::push`].
    pub fn add_column(&mut self, field: u8, kind: ColumnKind, points: bool, doc_values: bool) -> usize {
        self.columns.push(Builder {
            field,
            kind,
            points,
            doc_values,
            docs: Vec::new(),
            codes: Vec::new(),
            numbers: FxHashMap::default(),
            strings: Vec::new(),
        });
        self.columns.len() - 1
    }

    /// Whether no column was added.
    pub fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }

    /// Approximate memory held.
    pub fn memory_bytes(&self) -> usize {
        self.columns
            .iter()
            .map(|c| c.docs.capacity() * 4 + c.codes.capacity() * 8 + c.strings.iter().map(|s| s.len() + 48).sum::<usize>())
            .sum()
    }

    /// Adds value `code` (of a number, date or boolean column) to document
    /// `doc`.
    pub fn push(&mut self, column: usize, doc: u32, code: u64) {
        let c = &mut self.columns[column];
        debug_assert!(c.kind != ColumnKind::Keyword);
        c.docs.push(doc);
        c.codes.push(code);
    }

    /// Adds keyword `value` to document `doc`.
    pub fn push_keyword(&mut self, column: usize, doc: u32, value: &str) {
        let c = &mut self.columns[column];
        debug_assert!(c.kind == ColumnKind::Keyword);
        let n = match c.numbers.get(value) {
            Some(&n) => n,
            None => {
                let n = c.strings.len() as u32;
                c.strings.push(value.into());
                c.numbers.insert(value.into(), n);
                n
            }
        };
        c.docs.push(doc);
        c.codes.push(n as u64);
    }

    /// Writes the columns of a segment of `max_doc` documents to `path`.
    pub fn finish(self, max_doc: u32, path: &Path) -> Result<FileInfo> {
        let mut body = Vec::new();
        let mut metas = Vec::with_capacity(self.columns.len());
        for c in self.columns {
            metas.push(c.write(max_doc, &mut body));
        }
        let directory = serde_json::to_vec(&metas).map_err(|e| Error::Internal(format!("column directory: {e}")))?;
        let mut w = FileWriter::create(path)?;
        let mut header = [0u8; HEADER];
        header[..8].copy_from_slice(MAGIC);
        header[8..12].copy_from_slice(&VERSION.to_le_bytes());
        header[12..16].copy_from_slice(&(directory.len() as u32).to_le_bytes());
        w.write_all(&header)?;
        w.write_all(&directory)?;
        w.write_all(&body)?;
        w.finish()
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Builder {
    /// Appends the column's sections to `body` and describes them.
    fn write(mut self, max_doc: u32, body: &mut Vec<u8>) -> ColumnMeta {
        if !self.docs.is_sorted() {
            let mut pairs: Vec<(u32, u64)> = self.docs.iter().copied().zip(self.codes.iter().copied()).collect();
            pairs.sort_by_key(|p| p.0);
            (self.docs, self.codes) = pairs.into_iter().unzip();
        }
        let mut dict = None;
        if self.kind == ColumnKind::Keyword {
            // Ordinals in string order.
            let mut order: Vec<u32> = (0..self.strings.len() as u32).collect();
            order.sort_unstable_by(|&a, &b| self.strings[a as usize].cmp(&self.strings[b as usize]));
            let mut ord_of = vec![0u64; order.len()];
            for (ord, &n) in order.iter().enumerate() {
                ord_of[n as usize] = ord as u64;
            }
            for c in &mut self.codes {
                *c = ord_of[*c as usize];
            }
            let total: u64 = self.strings.iter().map(|s| s.len() as u64).sum();
            let obits = bits_for(total);
            let at = body.len() as u64;
            let mut offset = 0u64;
            let offsets = std::iter::once(0).chain(order.iter().map(|&n| {
                offset += self.strings[n as usize].len() as u64;
                offset
            }));
            packed::write(offsets, obits, body);
            let bytes = body.len() as u64;
            for &n in &order {
                body.extend_from_slice(self.strings[n as usize].as_bytes());
            }
            dict = Some(DictMeta {
                count: order.len() as u64,
                offsets: Packed { at, bits: obits },
                bytes,
            });
        }
        // Values sorted within each document; keywords without duplicates.
        let mut i = 0;
        let mut pairs: Vec<(u32, u64)> = Vec::with_capacity(self.docs.len());
        while i < self.docs.len() {
            let doc = self.docs[i];
            let start = pairs.len();
            while i < self.docs.len() && self.docs[i] == doc {
                pairs.push((doc, self.codes[i]));
                i += 1;
            }
            pairs[start..].sort_unstable();
            if self.kind == ColumnKind::Keyword {
                let mut k = start;
                for j in start..pairs.len() {
                    if j == start || pairs[j] != pairs[k - 1] {
                        pairs[k] = pairs[j];
                        k += 1;
                    }
                }
                pairs.truncate(k);
            }
        }
        let mut docs_with_value = 0u32;
        let mut multi = false;
        for (j, p) in pairs.iter().enumerate() {
            if j == 0 || pairs[j - 1].0 != p.0 {
                docs_with_value += 1;
            } else {
                multi = true;
            }
        }
        let min = pairs.iter().map(|p| p.1).min().unwrap_or(0);
        let max = pairs.iter().map(|p| p.1).max().unwrap_or(0);
        let g = pairs.iter().fold(0, |g, p| gcd(g, p.1 - min)).max(1);
        let bits = bits_for((max - min) / g);
        let stored = |code: u64| (code - min) / g;
        let mut meta = ColumnMeta {
            field: self.field,
            kind: self.kind,
            multi,
            docs_with_value,
            value_count: pairs.len() as u64,
            min,
            max,
            gcd: g,
            bits,
            values: None,
            starts: None,
            points: None,
            dict,
        };
        if self.doc_values {
            if multi {
                let sbits = bits_for(pairs.len() as u64);
                let at = body.len() as u64;
                let mut j = 0usize;
                let starts = (0..=max_doc).map(|doc| {
                    while j < pairs.len() && pairs[j].0 < doc {
                        j += 1;
                    }
                    j as u64
                });
                packed::write(starts, sbits, body);
                meta.starts = Some(Packed { at, bits: sbits });
                let at = body.len() as u64;
                packed::write(pairs.iter().map(|p| stored(p.1)), bits, body);
                meta.values = Some(Packed { at, bits });
            } else {
                let vbits = bits_for((max - min) / g + 1);
                let at = body.len() as u64;
                let mut j = 0usize;
                let values = (0..max_doc).map(|doc| {
                    if j < pairs.len() && pairs[j].0 == doc {
                        j += 1;
                        stored(pairs[j - 1].1) + 1
                    } else {
                        0
                    }
                });
                packed::write(values, vbits, body);
                meta.values = Some(Packed { at, bits: vbits });
            }
        }
        if self.points {
            let mut points: Vec<(u64, u32)> = pairs.iter().map(|&(d, c)| (stored(c), d)).collect();
            points.sort_unstable();
            points.dedup();
            let dbits = bits_for(max_doc.saturating_sub(1) as u64);
            let vat = body.len() as u64;
            packed::write(points.iter().map(|p| p.0), bits, body);
            let dat = body.len() as u64;
            packed::write(points.iter().map(|p| p.1 as u64), dbits, body);
            let index = body.len() as u64;
            for b in (0..points.len()).step_by(POINT_BLOCK as usize) {
                body.extend_from_slice(&points[b].0.to_le_bytes());
            }
            meta.points = Some(PointsMeta {
                count: points.len() as u64,
                values: Packed { at: vat, bits },
                docs: Packed { at: dat, bits: dbits },
                index,
            });
        }
        meta
    }
}
