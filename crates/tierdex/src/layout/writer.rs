//! Encodes one term's postings into a grouped region.

use crate::bloom::{self, FilterShape};
use crate::codec::{self, BLOCK};
use crate::layout::impacts::{Impacts, MAX_BLOCK_IMPACTS, MAX_TERM_IMPACTS};
use crate::layout::Codec;
use crate::schema::DocId;
use crate::termdict::RegionInfo;

/// Blocks per second-level skip record: a term of more than this many
/// blocks ends its skip table with one fixed-size record per further span
/// (where the entry of its first block starts and the absolute values that
/// entry's deltas apply to), so a seek far ahead jumps over whole spans
/// instead of parsing every entry between.
pub const SKIP_SPAN: usize = 32;

/// Bytes of one second-level record: entry offset, block offset, previous
/// last document (u32 each), previous position index (u64), previous
/// position, offset, `after` and `before` filter bytes (u32 each).
pub const SKIP_RECORD: usize = 36;

/// Top bit of the skip table's length: the table has a second level.
pub const SKIP_INDEXED: u32 = 1 << 31;

/// One term's postings in plain arrays: the writer's input and the merger's
/// decoding buffer. Positions and offsets are absolute, concatenated in doc
/// order (`freqs[i]` entries for the i-th doc).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TermPostings {
    /// Strictly increasing document numbers.
    pub docs: Vec<DocId>,
    /// Term frequency per document (>= 1).
    pub freqs: Vec<u32>,
    /// Token positions, increasing within each document.
    pub positions: Vec<u32>,
    /// Byte offset of each occurrence's start.
    pub starts: Vec<u32>,
    /// Byte offset one past each occurrence's end.
    pub ends: Vec<u32>,
    /// Phrase Bloom filters (DESIGN §4), one per document, of the index's
    /// filter size each: the terms right after the term (`after`) and right
    /// before it (`before`). Both empty when the term has no filters; an
    /// all-zero filter is an empty one.
    pub after: Vec<u8>,
    /// See `after`.
    pub before: Vec<u8>,
}

impl TermPostings {
    /// Empties the arrays, keeping their capacity.
    pub fn clear(&mut self) {
        self.docs.clear();
        self.freqs.clear();
        self.positions.clear();
        self.starts.clear();
        self.ends.clear();
        self.after.clear();
        self.before.clear();
    }

    /// Total number of occurrences.
    pub fn total_term_freq(&self) -> u64 {
        self.positions.len() as u64
    }
}

/// Encodes a term's sections (zone, filters, positions, offsets), reusing
/// its buffers from term to term.
#[derive(Default)]
pub struct TermWriter {
    codec: Codec,
    bloom: Option<FilterShape>,
    after: Vec<u8>,
    before: Vec<u8>,
    region: Vec<u8>,
    skip: Vec<u8>,
    /// The skip table's second level (see [`SKIP_SPAN`]).
    skip_index: Vec<u8>,
    blocks: Vec<u8>,
    pos: Vec<u8>,
    off: Vec<u8>,
    pos_block_bytes: Vec<u32>,
    off_block_bytes: Vec<u32>,
    vals: Vec<u32>,
    lens: Vec<u32>,
}

impl TermWriter {
    /// A writer for the compressed codec.
    pub fn new() -> Self {
        Self::default()
    }

    /// A writer for `codec`, writing filters of `bloom`'s shape for the
    /// terms that come with them.
    pub fn with_format(codec: Codec, bloom: Option<FilterShape>) -> Self {
        TermWriter {
            codec,
            bloom,
            ..Self::default()
        }
    }

    /// The last term's filter sections (`after` groups, then `before`).
    pub fn filters(&self) -> [&[u8]; 2] {
        [&self.after, &self.before]
    }

    /// The last term's zone: impacts, skip table, doc/freq blocks.
    pub fn zone(&self) -> &[u8] {
        &self.region
    }

    /// The last term's positions section.
    pub fn positions(&self) -> &[u8] {
        &self.pos
    }

    /// The last term's offsets section.
    pub fn offsets(&self) -> &[u8] {
        &self.off
    }

    /// Encodes `p` (whose documents' norms for the field are `norms[doc]`)
    /// into the three sections.
    pub fn write(&mut self, p: &TermPostings, norms: &[u8]) -> Result<RegionInfo, String> {
        let df = p.docs.len();
        if df == 0 || p.freqs.len() != df {
            return Err(format!("bad postings: {df} docs, {} freqs", p.freqs.len()));
        }
        let ttf: u64 = p.freqs.iter().map(|&f| f as u64).sum();
        if ttf != p.positions.len() as u64 || p.starts.len() != p.positions.len() || p.ends.len() != p.positions.len() {
            return Err("positions/offsets do not match frequencies".into());
        }
        let norm_of = |d: DocId| {
            norms
                .get(d as usize)
                .copied()
                .ok_or_else(|| format!("doc {d} has no norm"))
        };

        self.encode_positions(p)?;
        self.after.clear();
        self.before.clear();
        let shape = match self.bloom {
            Some(shape) if !p.after.is_empty() || !p.before.is_empty() => {
                let fb = shape.bytes as usize;
                if p.after.len() != df * fb || p.before.len() != df * fb {
                    return Err(format!(
                        "{} and {} bytes of filters for {df} documents of {fb}-byte filters",
                        p.after.len(),
                        p.before.len()
                    ));
                }
                Some(shape)
            }
            _ => None,
        };

        // Doc/freq blocks and skip entries.
        self.blocks.clear();
        self.skip.clear();
        self.skip_index.clear();
        let n_blocks = df.div_ceil(BLOCK);
        let mut prev_last: Option<DocId> = None;
        let mut pos_index = 0u64;
        // last_doc, pos_index, pos_byte, off_byte, after_byte, before_byte
        let mut prev_entry = (0u32, 0u64, 0u32, 0u32, 0u32, 0u32);
        let mut term_pairs = Vec::with_capacity(df.min(4096));
        let mut docs = [0u32; BLOCK];
        let mut freqs = [0u32; BLOCK];
        for b in 0..n_blocks {
            let lo = b * BLOCK;
            let hi = (lo + BLOCK).min(df);
            let block_start = self.blocks.len();
            let bdocs = &p.docs[lo..hi];
            let bfreqs = &p.freqs[lo..hi];
            for w in bdocs.windows(2) {
                if w[1] <= w[0] {
                    return Err("doc ids not strictly increasing".into());
                }
            }
            if let (Some(prev), Some(&first)) = (prev_last, bdocs.first()) {
                if first <= prev {
                    return Err("doc ids not strictly increasing".into());
                }
            }
            if bfreqs.contains(&0) {
                return Err("zero frequency".into());
            }
            if self.codec == Codec::Direct {
                for &d in bdocs {
                    self.blocks.extend_from_slice(&d.to_le_bytes());
                }
                for &f in bfreqs {
                    self.blocks.extend_from_slice(&f.to_le_bytes());
                }
            } else if hi - lo == BLOCK {
                docs.copy_from_slice(bdocs);
                codec::pack_sorted_block(prev_last, &docs, &mut self.blocks);
                for (dst, &f) in freqs.iter_mut().zip(bfreqs) {
                    *dst = f - 1;
                }
                codec::pack_block(&freqs, &mut self.blocks);
            } else {
                let mut prev = prev_last;
                for &d in bdocs {
                    let delta = match prev {
                        Some(p) => d - p - 1,
                        None => d,
                    };
                    codec::write_u32(&mut self.blocks, delta);
                    prev = Some(d);
                }
                for &f in bfreqs {
                    codec::write_u32(&mut self.blocks, f - 1);
                }
            }
            let mut block_pairs = Vec::with_capacity(hi - lo);
            for (&d, &f) in bdocs.iter().zip(bfreqs) {
                block_pairs.push((f, norm_of(d)?));
            }
            term_pairs.extend_from_slice(&block_pairs);
            let (after_byte, before_byte) = (self.after.len() as u32, self.before.len() as u32);
            if let Some(shape) = shape {
                let fb = shape.bytes as usize;
                bloom::encode_group(shape, &p.after[lo * fb..hi * fb], &mut self.after);
                bloom::encode_group(shape, &p.before[lo * fb..hi * fb], &mut self.before);
            }
            let last_doc = bdocs[bdocs.len() - 1];
            let block_len = (self.blocks.len() - block_start) as u32;
            if n_blocks > SKIP_SPAN && b > 0 && b % SKIP_SPAN == 0 {
                // A second-level record: where the entry of block `b` starts
                // and the absolute values its deltas are taken from.
                let fits = |n: usize| u32::try_from(n).map_err(|_| "term region larger than 4 GiB".to_string());
                let rec = &mut self.skip_index;
                rec.extend_from_slice(&fits(self.skip.len())?.to_le_bytes());
                rec.extend_from_slice(&fits(block_start)?.to_le_bytes());
                rec.extend_from_slice(&prev_entry.0.to_le_bytes());
                rec.extend_from_slice(&prev_entry.1.to_le_bytes());
                for v in [prev_entry.2, prev_entry.3, prev_entry.4, prev_entry.5] {
                    rec.extend_from_slice(&v.to_le_bytes());
                }
            }
            if n_blocks == 1 {
                codec::write_u32(&mut self.skip, last_doc);
            } else {
                let pos_byte = self.pos_block_bytes[(pos_index / BLOCK as u64) as usize];
                let off_byte = self.off_block_bytes[(pos_index / BLOCK as u64) as usize];
                codec::write_u32(&mut self.skip, last_doc - prev_entry.0);
                codec::write_u32(&mut self.skip, block_len);
                codec::write_u64(&mut self.skip, pos_index - prev_entry.1);
                codec::write_u32(&mut self.skip, pos_byte - prev_entry.2);
                codec::write_u32(&mut self.skip, off_byte - prev_entry.3);
                if shape.is_some() {
                    // Where the block's filter groups start, so a query reads
                    // only the groups of its candidates.
                    codec::write_u32(&mut self.skip, after_byte - prev_entry.4);
                    codec::write_u32(&mut self.skip, before_byte - prev_entry.5);
                }
                // Length-prefixed, so readers can step over impacts they do not need.
                let mut imp = Vec::with_capacity(32);
                Impacts::frontier(block_pairs.iter().copied(), MAX_BLOCK_IMPACTS).write(&mut imp);
                self.skip.push(imp.len() as u8);
                self.skip.extend_from_slice(&imp);
                prev_entry = (last_doc, pos_index, pos_byte, off_byte, after_byte, before_byte);
            }
            pos_index += bfreqs.iter().map(|&f| f as u64).sum::<u64>();
            prev_last = Some(last_doc);
        }

        self.region.clear();
        Impacts::frontier(term_pairs, MAX_TERM_IMPACTS).write(&mut self.region);
        if n_blocks > 1 {
            // The second level follows the entries; the length's top bit
            // says it is there.
            let len = self.skip.len() + self.skip_index.len();
            if len >= SKIP_INDEXED as usize {
                return Err("skip table larger than 2 GiB".into());
            }
            let flag = if self.skip_index.is_empty() { 0 } else { SKIP_INDEXED };
            codec::write_u32(&mut self.region, len as u32 | flag);
        }
        self.region.extend_from_slice(&self.skip);
        self.region.extend_from_slice(&self.skip_index);
        self.region.extend_from_slice(&self.blocks);
        let zone_len = self.region.len();
        let fits = |n: usize| u32::try_from(n).map_err(|_| "term region larger than 4 GiB".to_string());
        Ok(RegionInfo {
            doc_freq: df as u32,
            total_term_freq: ttf,
            zone_len: fits(zone_len)?,
            pos_len: fits(self.pos.len())?,
            off_len: fits(self.off.len())?,
            after_len: fits(self.after.len())?,
            before_len: fits(self.before.len())?,
        })
    }

    /// Encodes the positions and offsets sections, recording where each
    /// 128-value block starts.
    fn encode_positions(&mut self, p: &TermPostings) -> Result<(), String> {
        // Per-document deltas: positions from the previous position, starts
        // from the previous end; lengths as they are.
        self.vals.clear();
        self.lens.clear();
        let mut starts = Vec::with_capacity(p.positions.len());
        let mut i = 0;
        for &f in &p.freqs {
            let (mut prev_pos, mut prev_end) = (0u32, 0u32);
            for j in i..i + f as usize {
                let (pos, s, e) = (p.positions[j], p.starts[j], p.ends[j]);
                if pos < prev_pos || s < prev_end || e < s {
                    return Err("positions or offsets not increasing within a document".into());
                }
                self.vals.push(pos - prev_pos);
                starts.push(s - prev_end);
                self.lens.push(e - s);
                prev_pos = pos;
                prev_end = e;
            }
            i += f as usize;
        }
        self.pos.clear();
        self.off.clear();
        self.pos_block_bytes.clear();
        self.off_block_bytes.clear();
        let mut block = [0u32; BLOCK];
        let n = self.vals.len();
        for lo in (0..n).step_by(BLOCK) {
            self.pos_block_bytes.push(self.pos.len() as u32);
            self.off_block_bytes.push(self.off.len() as u32);
            let hi = (lo + BLOCK).min(n);
            if self.codec == Codec::Direct {
                // Raw arrays: positions; then starts and lengths.
                for &v in &self.vals[lo..hi] {
                    self.pos.extend_from_slice(&v.to_le_bytes());
                }
                for &v in starts[lo..hi].iter().chain(&self.lens[lo..hi]) {
                    self.off.extend_from_slice(&v.to_le_bytes());
                }
            } else if hi - lo == BLOCK {
                block.copy_from_slice(&self.vals[lo..hi]);
                codec::pack_block(&block, &mut self.pos);
                block.copy_from_slice(&starts[lo..hi]);
                codec::pack_block(&block, &mut self.off);
                block.copy_from_slice(&self.lens[lo..hi]);
                codec::pack_block(&block, &mut self.off);
            } else {
                for ((&v, &s), &l) in self.vals[lo..hi].iter().zip(&starts[lo..hi]).zip(&self.lens[lo..hi]) {
                    codec::write_u32(&mut self.pos, v);
                    codec::write_u32(&mut self.off, s);
                    codec::write_u32(&mut self.off, l);
                }
            }
        }
        Ok(())
    }
}
