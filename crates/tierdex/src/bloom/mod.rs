//! Phrase Bloom filters (DESIGN §4), the building blocks: filter parameters,
//! the probe hash, filter insertion and test, and the group encoding.
//!
//! For each (term, document) posting an index may keep two small filters: the
//! terms that immediately follow the term in the document (`after`) and those
//! that immediately precede it (`before`). A phrase query tests a candidate
//! document's filter for its neighbour in the phrase: a negative answer drops
//! the candidate without reading positions; a positive one (possibly false)
//! is confirmed by positions, so no wrong result can come from a filter.
//!
//! Filters are stored in groups of up to 128, one slot per posting of a
//! 128-document block: a 128-bit bitmap marks the non-empty filters, and only
//! those are stored, packed in slot order. Testing an empty filter costs one
//! bitmap bit test; a non-empty one a popcount and `hashes` bit tests. No test
//! allocates.
//!
//! Not yet wired into indexing or query evaluation (issue #5 is open): this
//! module is the format and the arithmetic that both will use.

use crate::error::{Error, Result};

/// Filter sizing, per index.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BloomParams {
    /// Expected distinct neighbours per (term, document) (default 5).
    pub expected: u32,
    /// Target false-positive rate at `expected` insertions (default 0.0009).
    pub fpr: f64,
}

impl Default for BloomParams {
    fn default() -> Self {
        BloomParams {
            expected: 5,
            fpr: 0.0009,
        }
    }
}

/// The concrete shape parameters give: bytes per filter and hash count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilterShape {
    /// Bytes per non-empty filter.
    pub bytes: u16,
    /// Bits set (and tested) per term.
    pub hashes: u8,
}

impl FilterShape {
    /// Bits per filter.
    pub fn bits(self) -> u32 {
        self.bytes as u32 * 8
    }
}

impl BloomParams {
    /// The filter shape for these parameters: m = -n ln p / (ln 2)^2 bits,
    /// rounded to whole bytes, and k = m/n ln 2 hashes (at least 1). The
    /// defaults give 9 bytes and 10 hashes.
    pub fn shape(&self) -> Result<FilterShape> {
        if !(1..=1024).contains(&self.expected) {
            return Err(Error::InvalidArgument(format!(
                "bloom expected insertions must be from 1 to 1024 (got {})",
                self.expected
            )));
        }
        if !(self.fpr > 0.0 && self.fpr < 0.5) {
            return Err(Error::InvalidArgument(format!(
                "bloom false-positive rate must be above 0 and below 0.5 (got {})",
                self.fpr
            )));
        }
        let ln2 = std::f64::consts::LN_2;
        let bits = -(self.expected as f64) * self.fpr.ln() / (ln2 * ln2);
        let bytes = (bits / 8.0).round().max(1.0);
        if bytes > 4096.0 {
            return Err(Error::InvalidArgument(format!(
                "bloom filters of {bytes} bytes are too large (at most 4096: lower expected insertions or raise the false-positive rate)"
            )));
        }
        let hashes = (bytes * 8.0 / self.expected as f64 * ln2).round().clamp(1.0, 32.0);
        Ok(FilterShape {
            bytes: bytes as u16,
            hashes: hashes as u8,
        })
    }

    /// The false-positive rate a filter of `shape` has after `n` insertions:
    /// (1 - e^(-kn/m))^k.
    pub fn expected_fpr(shape: FilterShape, n: u32) -> f64 {
        let (k, m) = (shape.hashes as f64, shape.bits() as f64);
        (1.0 - (-k * n as f64 / m).exp()).powf(k)
    }
}

/// The bits one term sets in (and tests of) a filter of a given shape:
/// computed once per term, so a filter test is `hashes` bit lookups and no
/// hashing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    bits: [u16; 32],
    len: u8,
}

impl Probe {
    /// The probe of a term (its dictionary key) for filters of `shape`.
    pub fn new(shape: FilterShape, term_key: &[u8]) -> Probe {
        let mut state = xxhash_rust::xxh3::xxh3_64(term_key);
        let m = shape.bits() as u64;
        let mut bits = [0u16; 32];
        for b in bits.iter_mut().take(shape.hashes as usize) {
            // SplitMix64: independent-looking 64-bit values from one seed,
            // mapped onto [0, m) by a multiply-shift.
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            *b = (((z >> 32) * m) >> 32) as u16;
        }
        Probe {
            bits,
            len: shape.hashes,
        }
    }

    fn bits(&self) -> &[u16] {
        &self.bits[..self.len as usize]
    }
}

/// Adds a term to `filter`.
pub fn insert(filter: &mut [u8], p: &Probe) {
    for &b in p.bits() {
        filter[(b / 8) as usize] |= 1 << (b % 8);
    }
}

/// Whether `filter` may contain the term (false: it certainly does not).
#[inline]
pub fn may_contain(filter: &[u8], p: &Probe) -> bool {
    p.bits().iter().all(|&b| filter[(b / 8) as usize] & (1 << (b % 8)) != 0)
}

/// Slots per group: one per posting of a 128-document block.
pub const GROUP_SLOTS: usize = 128;
/// Bytes of a group's bitmap of non-empty filters.
pub const BITMAP_BYTES: usize = GROUP_SLOTS / 8;

/// Appends a group of up to 128 filters to `out`: the bitmap, then the
/// non-empty filters in slot order. `filters` holds `slots * shape.bytes`
/// bytes; an all-zero filter counts as empty. Returns the bytes written.
pub fn encode_group(shape: FilterShape, filters: &[u8], out: &mut Vec<u8>) -> usize {
    let fb = shape.bytes as usize;
    debug_assert!(filters.len().is_multiple_of(fb) && filters.len() / fb <= GROUP_SLOTS);
    let start = out.len();
    let mut bitmap = 0u128;
    for (slot, f) in filters.chunks_exact(fb).enumerate() {
        if f.iter().any(|&b| b != 0) {
            bitmap |= 1 << slot;
        }
    }
    out.extend_from_slice(&bitmap.to_le_bytes());
    for f in filters.chunks_exact(fb) {
        if f.iter().any(|&b| b != 0) {
            out.extend_from_slice(f);
        }
    }
    out.len() - start
}

/// Bytes of an encoded group, from its bitmap (the first 16 bytes).
pub fn group_len(shape: FilterShape, bitmap: &[u8; BITMAP_BYTES]) -> usize {
    BITMAP_BYTES + u128::from_le_bytes(*bitmap).count_ones() as usize * shape.bytes as usize
}

/// A decoded view of one group, borrowed from index bytes.
#[derive(Debug, Clone, Copy)]
pub struct Group<'a> {
    shape: FilterShape,
    bitmap: u128,
    filters: &'a [u8],
}

impl<'a> Group<'a> {
    /// Reads the group at the start of `bytes` (from the index file `path`,
    /// named in the corruption error); returns it and its length.
    pub fn parse(shape: FilterShape, bytes: &'a [u8], path: &std::path::Path) -> Result<(Group<'a>, usize)> {
        let Some(head) = bytes.first_chunk::<BITMAP_BYTES>() else {
            return Err(Error::corrupt(path, "bloom group truncated before its bitmap"));
        };
        let len = group_len(shape, head);
        if bytes.len() < len {
            return Err(Error::corrupt(
                path,
                format!("bloom group of {len} bytes truncated to {}", bytes.len()),
            ));
        }
        Ok((
            Group {
                shape,
                bitmap: u128::from_le_bytes(*head),
                filters: &bytes[BITMAP_BYTES..len],
            },
            len,
        ))
    }

    /// Whether slot `slot`'s filter may contain the term: an empty filter is
    /// one bit test; otherwise a popcount and the filter's probes.
    #[inline]
    pub fn may_contain(&self, slot: usize, p: &Probe) -> bool {
        debug_assert!(slot < GROUP_SLOTS);
        let bit = 1u128 << slot;
        if self.bitmap & bit == 0 {
            return false;
        }
        let rank = (self.bitmap & (bit - 1)).count_ones() as usize;
        let fb = self.shape.bytes as usize;
        may_contain(&self.filters[rank * fb..(rank + 1) * fb], p)
    }

    /// Whether slot `slot`'s filter is empty.
    pub fn is_empty(&self, slot: usize) -> bool {
        self.bitmap & (1u128 << slot) == 0
    }
}

#[cfg(test)]
mod tests;
