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
//! Indexing builds the filters of the body field's terms (stop words get none
//! and are never inserted, see [`filtered_term`]) that are in at most a
//! share of the segment's documents ([`BloomParams::doc_ceiling`]); merges
//! carry them; the phrase scorer tests them where [`choose`] finds them
//! cheaper than the positions they save. A term without filters is never
//! tested, so which terms have them changes costs, never answers.

use serde::{Deserialize, Serialize};

use crate::common::FieldSet;
use crate::error::{Error, Result};

/// Filter sizing, per index (recorded in the manifest).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BloomParams {
    /// Expected distinct neighbours per (term, document) (default 2: the
    /// terms with filters are the rarer ones, mostly once or twice in a
    /// document).
    pub expected: u32,
    /// Target false-positive rate at `expected` insertions (default 0.003).
    pub fpr: f64,
    /// The share of a segment's documents a term may be in and keep its
    /// filters (default 1/64, 1: every term; see [`BloomParams::doc_ceiling`]).
    /// Common terms hold most postings, so most filter bytes, while a phrase
    /// pairing two of them has many candidates that positions decide about
    /// as cheaply; a rare term's filters are small and spare reading the
    /// positions of the common term beside it. Indexes written before this
    /// setting existed gave every term filters: 1.
    #[serde(default = "every_term", skip_serializing_if = "is_every_term")]
    pub max_doc_share: f64,
    /// Terms in at most this many documents keep their filters whatever
    /// their share (default 128), so that small segments (refreshes,
    /// flushes) give filters to the terms they will keep once merged.
    #[serde(default = "min_doc_ceiling", skip_serializing_if = "is_min_doc_ceiling")]
    pub min_doc_ceiling: u64,
}

fn every_term() -> f64 {
    1.0
}

fn min_doc_ceiling() -> u64 {
    128
}

// The defaults are left out of a manifest, so that one written before the
// settings existed reads back as written (its checksum covers the text).
fn is_every_term(share: &f64) -> bool {
    *share == every_term()
}

fn is_min_doc_ceiling(n: &u64) -> bool {
    *n == min_doc_ceiling()
}

impl Default for BloomParams {
    fn default() -> Self {
        BloomParams {
            expected: 2,
            fpr: 0.003,
            max_doc_share: 1.0 / 64.0,
            min_doc_ceiling: min_doc_ceiling(),
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
    /// defaults give 3 bytes and 8 hashes.
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
        if !(self.max_doc_share > 0.0 && self.max_doc_share <= 1.0) {
            return Err(Error::InvalidArgument(format!(
                "bloom max document share must be above 0 and at most 1 (got {})",
                self.max_doc_share
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

    /// The most documents a term of a segment of `num_docs` documents may be
    /// in and have filters: `max_doc_share` of them, and at least
    /// `min_doc_ceiling`. Indexing drops the filters of the terms above it;
    /// a merge keeps a term's filters when every source holding the term has
    /// them and the merged term is within the merged segment's ceiling.
    pub fn doc_ceiling(&self, num_docs: u64) -> u64 {
        if self.max_doc_share >= 1.0 {
            return u64::MAX;
        }
        ((self.max_doc_share * num_docs as f64).ceil() as u64).max(self.min_doc_ceiling)
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
        Self::from_seed(shape, seed(term_key))
    }

    /// The probe of the term whose [`seed`] is `seed` (indexing hashes each
    /// distinct term once, then derives its probe per insertion).
    pub fn from_seed(shape: FilterShape, seed: u64) -> Probe {
        let mut state = seed;
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

    /// The bit positions the probe sets and tests.
    pub fn positions(&self) -> &[u16] {
        self.bits()
    }
}

/// The hash a term's probe derives from: of its dictionary key.
pub fn seed(term_key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(term_key)
}

/// Whether a term (its dictionary key: field id byte, then the term) has
/// filters and is inserted into its neighbours' filters: terms of the
/// `fields` with phrase filters that are not stop words. Indexing and
/// queries both decide by this, so a query never tests a filter for a term
/// that indexing left out.
#[inline]
pub fn filtered_term(fields: &FieldSet, term_key: &[u8]) -> bool {
    match term_key.split_first() {
        Some((&field, term)) if fields.contains(field) => {
            std::str::from_utf8(term).is_ok_and(|t| !crate::analysis::is_stop_word(t))
        }
        _ => false,
    }
}

/// Which of a posting's two filters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// The terms that immediately follow the term in the document.
    After,
    /// The terms that immediately precede it.
    Before,
}

/// What the cost model knows of one term of an adjacent phrase pair, from
/// its dictionary entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TermCost {
    /// Documents containing the term.
    pub doc_freq: u32,
    /// Bytes of its doc/freq zone (read to seek the term to a document).
    pub zone_len: u64,
    /// Bytes of its positions section.
    pub pos_len: u64,
    /// Bytes of its `after` and `before` filter sections (0: no filters).
    pub after_len: u64,
    /// See `after_len`.
    pub before_len: u64,
}

/// Bytes one random read touches at least (a page).
const PAGE: f64 = 4096.0;

/// The share of the positions' cost a filter may cost at most, so that a
/// filter that rejects nothing adds at most about this much I/O.
pub const MAX_FILTER_SHARE: f64 = 0.1;

/// [`MAX_FILTER_SHARE`] for an index that stays in memory: a filter may
/// cost as much as the positions it saves, since there both are a few
/// cache misses, not device reads (the runtime rule still drops a filter
/// that stops rejecting).
pub const RESIDENT_FILTER_SHARE: f64 = 1.0;

/// Expected bytes read to visit `k` of the `n` documents of a section of
/// `len` bytes, spread uniformly: each visit reads its share and touches at
/// least a page, and no more than the whole section is read.
pub fn visit_cost(len: u64, n: u32, k: u64) -> f64 {
    if len == 0 || n == 0 || k == 0 {
        return 0.0;
    }
    let per = len as f64 / n as f64;
    (k as f64 * (per + PAGE)).min(len.div_ceil(4096) as f64 * PAGE)
}

/// When phrase queries test filters (a search-time choice).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FilterUse {
    /// Where the cost model finds them cheaper than the positions they save
    /// ([`choose`]; more freely when the index stays in memory, see
    /// [`RESIDENT_FILTER_SHARE`]), and only while they keep rejecting
    /// candidates.
    #[default]
    Auto,
    /// For every adjacent pair of filtered terms, whatever the cost
    /// (the cheaper direction), and never dropped: for tests and benchmarks.
    Always,
    /// Never: positions decide every candidate.
    Never,
}

impl std::str::FromStr for FilterUse {
    type Err = Error;
    fn from_str(s: &str) -> Result<FilterUse> {
        match s {
            "auto" => Ok(FilterUse::Auto),
            "always" => Ok(FilterUse::Always),
            "never" => Ok(FilterUse::Never),
            _ => Err(Error::InvalidArgument(format!(
                "unknown phrase filter use `{s}` (auto, always, never)"
            ))),
        }
    }
}

impl std::fmt::Display for FilterUse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FilterUse::Auto => "auto",
            FilterUse::Always => "always",
            FilterUse::Never => "never",
        })
    }
}

/// The filter to test for the adjacent phrase pair `left right` (`right`
/// immediately after `left`), when at most `candidates` documents reach the
/// test: `left`'s `after` filter probed with `right`, `right`'s `before`
/// filter probed with `left`, or none when reading either would cost more
/// than [`MAX_FILTER_SHARE`] of what a rejection saves. A rejection saves
/// the two terms' positions and, when the tested term is the phrase's lead
/// (`lead`: 0 for `left`, 1 for `right`; its filter is tested before the
/// other terms are sought), the other term's seek into its doc blocks.
/// Returns the side (0: left, 1: right) and its direction.
pub fn choose(left: &TermCost, right: &TermCost, candidates: u64, lead: Option<usize>) -> Option<(usize, Direction)> {
    choose_with(left, right, candidates, lead, MAX_FILTER_SHARE)
}

/// [`choose`] with the cost limit `max_share` (infinite: the cheaper
/// filter whatever it costs).
pub fn choose_with(
    left: &TermCost,
    right: &TermCost,
    candidates: u64,
    lead: Option<usize>,
    max_share: f64,
) -> Option<(usize, Direction)> {
    let positions =
        visit_cost(left.pos_len, left.doc_freq, candidates) + visit_cost(right.pos_len, right.doc_freq, candidates);
    let seek = |t: &TermCost| visit_cost(t.zone_len, t.doc_freq, candidates);
    let options = [(0, Direction::After, left, right), (1, Direction::Before, right, left)];
    options
        .into_iter()
        .filter(|o| filter_len(o.2, o.1) > 0)
        .map(|(side, dir, tested, other)| {
            let cost = visit_cost(filter_len(tested, dir), tested.doc_freq, candidates);
            let saved = positions + if lead == Some(side) { seek(other) } else { 0.0 };
            (side, dir, cost, saved)
        })
        .filter(|o| o.2 <= max_share * o.3)
        .min_by(|a, b| a.2.total_cmp(&b.2))
        .map(|(side, dir, _, _)| (side, dir))
}

fn filter_len(t: &TermCost, dir: Direction) -> u64 {
    match dir {
        Direction::After => t.after_len,
        Direction::Before => t.before_len,
    }
}

/// Adds a term to `filter`.
pub fn insert(filter: &mut [u8], p: &Probe) {
    insert_bits(filter, p.bits());
}

/// Sets bit positions `bits` (a probe's, see [`Probe::positions`]) in
/// `filter`: indexing keeps each term's positions and inserts them as is.
#[inline]
pub fn insert_bits(filter: &mut [u8], bits: &[u16]) {
    for &b in bits {
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
    // One pass: room for the bitmap and every filter, the non-empty ones
    // packed, then cut to what they took.
    out.resize(start + BITMAP_BYTES + filters.len(), 0);
    let packed = &mut out[start + BITMAP_BYTES..];
    let (bitmap, used) = match fb {
        1 => pack_filters::<1>(filters, packed),
        2 => pack_filters::<2>(filters, packed),
        3 => pack_filters::<3>(filters, packed),
        4 => pack_filters::<4>(filters, packed),
        5 => pack_filters::<5>(filters, packed),
        6 => pack_filters::<6>(filters, packed),
        8 => pack_filters::<8>(filters, packed),
        _ => {
            let (mut bitmap, mut used) = (0u128, 0);
            for (slot, f) in filters.chunks_exact(fb).enumerate() {
                if f.iter().any(|&b| b != 0) {
                    bitmap |= 1 << slot;
                    packed[used..used + fb].copy_from_slice(f);
                    used += fb;
                }
            }
            (bitmap, used)
        }
    };
    out[start..start + BITMAP_BYTES].copy_from_slice(&bitmap.to_le_bytes());
    out.truncate(start + BITMAP_BYTES + used);
    out.len() - start
}

/// [`encode_group`]'s loop for `N`-byte filters: the non-empty filters of
/// `filters` packed into `out` (as long as `filters`); their bitmap and
/// the bytes they took.
#[inline]
fn pack_filters<const N: usize>(filters: &[u8], out: &mut [u8]) -> (u128, usize) {
    let (mut bitmap, mut used) = (0u128, 0);
    for (slot, f) in filters.chunks_exact(N).enumerate() {
        let f: &[u8; N] = f.try_into().expect("chunks of N bytes");
        // Written whatever it holds, kept only when not empty: no branch
        // on the copy.
        out[used..used + N].copy_from_slice(f);
        let full = *f != [0; N];
        bitmap |= (full as u128) << slot;
        used += N * full as usize;
    }
    (bitmap, used)
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

    /// Slot `slot`'s filter (`None` when empty).
    pub fn filter(&self, slot: usize) -> Option<&'a [u8]> {
        let bit = 1u128 << slot;
        if self.bitmap & bit == 0 {
            return None;
        }
        let rank = (self.bitmap & (bit - 1)).count_ones() as usize;
        let fb = self.shape.bytes as usize;
        Some(&self.filters[rank * fb..(rank + 1) * fb])
    }
}

#[cfg(test)]
mod tests;
