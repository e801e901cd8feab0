//! Columns: the per-document values of a segment's keyword, numeric, date
//! and boolean fields, read as needed (issue #21).
//!
//! Every value is a *code*, an unsigned integer whose order is the value's
//! order: a long or a date (milliseconds since the epoch) with its sign bit
//! flipped, a double by its IEEE bits made sortable, a boolean as 0 or 1,
//! and a keyword by its *ordinal* in the segment's sorted dictionary of
//! that field's values. A field has, in the segment's `.col` file:
//!
//! * **doc values** (unless `doc_values: false`): each document's codes,
//!   bit-packed at the width of `(code - min) / gcd`: one value per
//!   document (0 for none, else the value plus one) when no document has
//!   two, else a table of where each document's values start and the
//!   values, sorted within each document. Sorting and aggregating read the
//!   pages holding the documents they visit;
//! * **points** (unless `index: false`): every (value, document) pair
//!   sorted by value, then document, as two bit-packed arrays, with the
//!   first value of every block of [`POINT_BLOCK`] pairs held in memory:
//!   a term or range query finds its run of pairs with a binary search and
//!   reads only the pages of the documents it matches;
//! * for a keyword field, its **dictionary**: the sorted distinct values.
//!
//! The file is a checksummed index file like every other, read through the
//! storage tiers with their I/O accounting; its content starts with a JSON
//! directory of the columns ([`ColumnMeta`]).

mod packed;
mod reader;
mod writer;

#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

pub use reader::{ColumnReader, Columns, PointRun};
pub use writer::ColumnsWriter;

/// Pairs of points per block of the in-memory block index.
pub const POINT_BLOCK: u64 = 128;

/// What a column holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ColumnKind {
    /// Signed 64-bit integers.
    Long,
    /// 64-bit floating point numbers.
    Double,
    /// Milliseconds since the epoch (UTC).
    Date,
    /// `false` (0) and `true` (1).
    Boolean,
    /// Strings, by ordinal in the segment's dictionary.
    Keyword,
}

/// The sortable code of a long (or a date in milliseconds).
#[inline]
pub fn long_code(v: i64) -> u64 {
    (v as u64) ^ (1 << 63)
}

/// The long of a code made by [`long_code`].
#[inline]
pub fn code_long(c: u64) -> i64 {
    (c ^ (1 << 63)) as i64
}

/// The sortable code of a double (`-0.0` is `0.0`; NaN is refused before).
#[inline]
pub fn double_code(v: f64) -> u64 {
    let v = if v == 0.0 { 0.0 } else { v };
    let b = v.to_bits();
    if b >> 63 == 1 {
        !b
    } else {
        b | (1 << 63)
    }
}

/// The double of a code made by [`double_code`].
#[inline]
pub fn code_double(c: u64) -> f64 {
    if c >> 63 == 1 {
        f64::from_bits(c & !(1 << 63))
    } else {
        f64::from_bits(!c)
    }
}

/// A bit-packed array in the file: where it starts (relative to the end of
/// the directory) and its width.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Packed {
    /// Offset of the first byte.
    pub at: u64,
    /// Bits per value.
    pub bits: u8,
}

/// The points of a column.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PointsMeta {
    /// Distinct (value, document) pairs.
    pub count: u64,
    /// Each pair's value, as `(code - min) / gcd`.
    pub values: Packed,
    /// Each pair's document.
    pub docs: Packed,
    /// Offset of the block index: the first value of every block of
    /// [`POINT_BLOCK`] pairs, as u64 LE.
    pub index: u64,
}

/// The dictionary of a keyword column.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DictMeta {
    /// Distinct values (ordinals `0..count`).
    pub count: u64,
    /// `count + 1` offsets into the bytes.
    pub offsets: Packed,
    /// Offset of the values' bytes, one after the other.
    pub bytes: u64,
}

/// One column as the file's directory describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnMeta {
    /// The field's id.
    pub field: u8,
    /// What it holds.
    pub kind: ColumnKind,
    /// Some document has more than one value.
    pub multi: bool,
    /// Documents with at least one value.
    pub docs_with_value: u32,
    /// Values in all (duplicates within a document counted for numbers,
    /// not for keywords).
    pub value_count: u64,
    /// Smallest and largest code (0 when there is none).
    pub min: u64,
    /// Largest code.
    pub max: u64,
    /// Greatest common divisor of `code - min` over the values (1 when
    /// there are none).
    pub gcd: u64,
    /// Bits of `(code - min) / gcd` of the largest code.
    pub bits: u8,
    /// Single-valued doc values: per document 0 or the value plus one.
    /// Multi-valued: the values, in document order.
    pub values: Option<Packed>,
    /// Multi-valued doc values: `max_doc + 1` starts into `values`.
    pub starts: Option<Packed>,
    /// The points, when the field is indexed.
    pub points: Option<PointsMeta>,
    /// The dictionary of a keyword column.
    pub dict: Option<DictMeta>,
}

impl ColumnMeta {
    /// The stored form of `code` (which must be a value of the column).
    #[inline]
    pub fn stored(&self, code: u64) -> u64 {
        (code - self.min) / self.gcd
    }

    /// The code of a stored value.
    #[inline]
    pub fn code(&self, stored: u64) -> u64 {
        self.min + stored * self.gcd
    }

    /// The stored values of the codes in `lo..=hi`, when any value could
    /// lie there.
    pub fn stored_range(&self, lo: u64, hi: u64) -> Option<(u64, u64)> {
        if self.value_count == 0 || lo > hi || hi < self.min || lo > self.max {
            return None;
        }
        let lo = if lo <= self.min { 0 } else { (lo - self.min).div_ceil(self.gcd) };
        let hi = (hi.min(self.max) - self.min) / self.gcd;
        (lo <= hi).then_some((lo, hi))
    }
}
