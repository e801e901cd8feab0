//! Encodes one term's postings into a grouped region.

use crate::bloom::{self, FilterShape};
use crate::codec::{self, BLOCK};
use crate::layout::impacts::{BestPerNorm, MAX_BLOCK_IMPACTS, MAX_TERM_IMPACTS};
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
/// its buffers from term to term. A term is given whole ([`Self::write`])
/// or streamed one document at a time ([`Self::start`], [`Self::push`],
/// [`Self::finish`]), so that a merge never holds a term's decoded
/// postings: only the encoded sections and one block of 128 documents and
/// of 128 positions are kept.
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
    /// Where each 128-value block of positions (offsets) starts.
    pos_block_bytes: Vec<u32>,
    off_block_bytes: Vec<u32>,
    /// The term being streamed.
    term: Streaming,
    /// The current document block: numbers, frequencies and filters.
    docs: Vec<DocId>,
    freqs: Vec<u32>,
    block_after: Vec<u8>,
    block_before: Vec<u8>,
    /// The current block of position and offset values (deltas, starts
    /// from the previous end, lengths).
    vals: Vec<u32>,
    starts: Vec<u32>,
    lens: Vec<u32>,
    /// [`Self::write`]'s offsets of one document.
    pairs: Vec<(u32, u32)>,
    /// Best frequency per norm over the term (its impacts) and over the
    /// current block (the block's), cleared as they are used.
    term_best: BestPerNorm,
    block_best: BestPerNorm,
}

/// Where the term being streamed stands.
#[derive(Clone, Default)]
struct Streaming {
    /// The filters' shape when the term has filters.
    shape: Option<FilterShape>,
    df: usize,
    ttf: u64,
    /// The last document pushed.
    last: Option<DocId>,
    /// The last document of the last block written.
    prev_last: Option<DocId>,
    /// Document blocks written.
    blocks: usize,
    /// Positions before the current document block.
    pos_index: u64,
    /// The previous skip entry: last doc, position index, position,
    /// offset, `after` and `before` bytes.
    prev_entry: (u32, u64, u32, u32, u32, u32),
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

    /// Bytes of one document's filter in each direction (0 without filters).
    pub fn filter_bytes(&self) -> usize {
        self.bloom.map_or(0, |s| s.bytes as usize)
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
        let filtered = self.bloom.is_some() && (!p.after.is_empty() || !p.before.is_empty());
        if filtered {
            let fb = self.filter_bytes();
            if p.after.len() != df * fb || p.before.len() != df * fb {
                return Err(format!(
                    "{} and {} bytes of filters for {df} documents of {fb}-byte filters",
                    p.after.len(),
                    p.before.len()
                ));
            }
        }
        let fb = if filtered { self.filter_bytes() } else { 0 };
        self.start(filtered);
        let mut pairs = std::mem::take(&mut self.pairs);
        let mut at = 0;
        for (i, (&d, &f)) in p.docs.iter().zip(&p.freqs).enumerate() {
            let norm = norms.get(d as usize).copied().ok_or_else(|| format!("doc {d} has no norm"))?;
            let range = at..at + f as usize;
            pairs.clear();
            pairs.extend(p.starts[range.clone()].iter().copied().zip(p.ends[range.clone()].iter().copied()));
            let filters = (&p.after[i * fb..(i + 1) * fb], &p.before[i * fb..(i + 1) * fb]);
            self.push(d, &p.positions[range], &pairs, filters, norm)?;
            at += f as usize;
        }
        self.pairs = pairs;
        self.finish()
    }

    /// Starts a term streamed one document at a time, with filters when
    /// `filtered` (and the writer has a filter shape).
    pub fn start(&mut self, filtered: bool) {
        self.term = Streaming {
            shape: self.bloom.filter(|_| filtered),
            ..Streaming::default()
        };
        for b in [
            &mut self.after,
            &mut self.before,
            &mut self.skip,
            &mut self.skip_index,
            &mut self.blocks,
            &mut self.pos,
            &mut self.off,
            &mut self.block_after,
            &mut self.block_before,
        ] {
            b.clear();
        }
        for v in [&mut self.docs, &mut self.freqs, &mut self.vals, &mut self.starts, &mut self.lens] {
            v.clear();
        }
        self.pos_block_bytes.clear();
        self.off_block_bytes.clear();
        self.term_best.clear();
        self.block_best.clear();
    }

    /// Adds the term's next document `doc` (above the last one): its
    /// positions, its offsets (start, end) and, for a filtered term, its
    /// `after` and `before` filters; `norm` is its field length's norm.
    pub fn push(
        &mut self,
        doc: DocId,
        positions: &[u32],
        offsets: &[(u32, u32)],
        (after, before): (&[u8], &[u8]),
        norm: u8,
    ) -> Result<(), String> {
        if self.term.last.is_some_and(|l| doc <= l) {
            return Err("doc ids not strictly increasing".into());
        }
        let freq = positions.len();
        if freq == 0 {
            return Err("zero frequency".into());
        }
        if offsets.len() != freq {
            return Err("positions/offsets do not match frequencies".into());
        }
        let fb = self.term.shape.map_or(0, |s| s.bytes as usize);
        if after.len() != fb || before.len() != fb {
            return Err(format!(
                "{} and {} bytes of filters for a document of {fb}-byte filters",
                after.len(),
                before.len()
            ));
        }
        if self.docs.len() == BLOCK {
            self.write_block(false)?;
        }
        let (mut prev_pos, mut prev_end) = (0u32, 0u32);
        for (&pos, &(s, e)) in positions.iter().zip(offsets) {
            if pos < prev_pos || s < prev_end || e < s {
                return Err("positions or offsets not increasing within a document".into());
            }
            if self.vals.is_empty() {
                self.pos_block_bytes.push(self.pos.len() as u32);
                self.off_block_bytes.push(self.off.len() as u32);
            }
            self.vals.push(pos - prev_pos);
            self.starts.push(s - prev_end);
            self.lens.push(e - s);
            if self.vals.len() == BLOCK {
                self.write_positions();
            }
            prev_pos = pos;
            prev_end = e;
        }
        self.docs.push(doc);
        self.freqs.push(freq as u32);
        self.block_after.extend_from_slice(after);
        self.block_before.extend_from_slice(before);
        self.term_best.add(freq as u32, norm);
        self.block_best.add(freq as u32, norm);
        self.term.last = Some(doc);
        self.term.df += 1;
        self.term.ttf += freq as u64;
        Ok(())
    }

    /// Ends the streamed term: writes its last blocks and its zone.
    pub fn finish(&mut self) -> Result<RegionInfo, String> {
        if self.term.df == 0 {
            return Err("bad postings: 0 docs".into());
        }
        if !self.vals.is_empty() {
            self.write_positions();
        }
        // A term of one block has no skip entries: only its last document.
        let only = self.term.blocks == 0;
        self.write_block(only)?;
        let t = &self.term;
        self.region.clear();
        self.term_best.frontier(MAX_TERM_IMPACTS).write(&mut self.region);
        if !only {
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
        let fits = |n: usize| u32::try_from(n).map_err(|_| "term region larger than 4 GiB".to_string());
        Ok(RegionInfo {
            doc_freq: t.df as u32,
            total_term_freq: t.ttf,
            zone_len: fits(self.region.len())?,
            pos_len: fits(self.pos.len())?,
            off_len: fits(self.off.len())?,
            after_len: fits(self.after.len())?,
            before_len: fits(self.before.len())?,
        })
    }

    /// Encodes the current document block (the term's only one when
    /// `only`): doc/freq block, filter groups and skip entry.
    fn write_block(&mut self, only: bool) -> Result<(), String> {
        let b = self.term.blocks;
        let block_start = self.blocks.len();
        let (bdocs, bfreqs) = (&self.docs[..], &self.freqs[..]);
        let prev_last = self.term.prev_last;
        if self.codec == Codec::Direct {
            for &d in bdocs {
                self.blocks.extend_from_slice(&d.to_le_bytes());
            }
            for &f in bfreqs {
                self.blocks.extend_from_slice(&f.to_le_bytes());
            }
        } else if bdocs.len() == BLOCK {
            let mut block = [0u32; BLOCK];
            block.copy_from_slice(bdocs);
            codec::pack_sorted_block(prev_last, &block, &mut self.blocks);
            for (dst, &f) in block.iter_mut().zip(bfreqs) {
                *dst = f - 1;
            }
            codec::pack_block(&block, &mut self.blocks);
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
        let (after_byte, before_byte) = (self.after.len() as u32, self.before.len() as u32);
        if let Some(shape) = self.term.shape {
            bloom::encode_group(shape, &self.block_after, &mut self.after);
            bloom::encode_group(shape, &self.block_before, &mut self.before);
        }
        let last_doc = bdocs[bdocs.len() - 1];
        let block_len = (self.blocks.len() - block_start) as u32;
        let t = &mut self.term;
        let prev_entry = t.prev_entry;
        if b > 0 && b.is_multiple_of(SKIP_SPAN) {
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
        if only {
            codec::write_u32(&mut self.skip, last_doc);
        } else {
            let pos_byte = self.pos_block_bytes[(t.pos_index / BLOCK as u64) as usize];
            let off_byte = self.off_block_bytes[(t.pos_index / BLOCK as u64) as usize];
            codec::write_u32(&mut self.skip, last_doc - prev_entry.0);
            codec::write_u32(&mut self.skip, block_len);
            codec::write_u64(&mut self.skip, t.pos_index - prev_entry.1);
            codec::write_u32(&mut self.skip, pos_byte - prev_entry.2);
            codec::write_u32(&mut self.skip, off_byte - prev_entry.3);
            if t.shape.is_some() {
                // Where the block's filter groups start, so a query reads
                // only the groups of its candidates.
                codec::write_u32(&mut self.skip, after_byte - prev_entry.4);
                codec::write_u32(&mut self.skip, before_byte - prev_entry.5);
            }
            // Length-prefixed, so readers can step over impacts they do not need.
            let at = self.skip.len();
            self.skip.push(0);
            self.block_best.frontier(MAX_BLOCK_IMPACTS).write(&mut self.skip);
            self.skip[at] = (self.skip.len() - at - 1) as u8;
            t.prev_entry = (last_doc, t.pos_index, pos_byte, off_byte, after_byte, before_byte);
        }
        t.pos_index += bfreqs.iter().map(|&f| f as u64).sum::<u64>();
        t.prev_last = Some(last_doc);
        t.blocks += 1;
        self.docs.clear();
        self.freqs.clear();
        self.block_after.clear();
        self.block_before.clear();
        self.block_best.clear();
        Ok(())
    }

    /// Encodes the current block of position and offset values (full, or
    /// the term's last).
    fn write_positions(&mut self) {
        let (vals, starts, lens) = (&self.vals, &self.starts, &self.lens);
        if self.codec == Codec::Direct {
            // Raw arrays: positions; then starts and lengths.
            for &v in vals {
                self.pos.extend_from_slice(&v.to_le_bytes());
            }
            for &v in starts.iter().chain(lens) {
                self.off.extend_from_slice(&v.to_le_bytes());
            }
        } else if vals.len() == BLOCK {
            let mut block = [0u32; BLOCK];
            block.copy_from_slice(vals);
            codec::pack_block(&block, &mut self.pos);
            block.copy_from_slice(starts);
            codec::pack_block(&block, &mut self.off);
            block.copy_from_slice(lens);
            codec::pack_block(&block, &mut self.off);
        } else {
            for ((&v, &s), &l) in vals.iter().zip(starts).zip(lens) {
                codec::write_u32(&mut self.pos, v);
                codec::write_u32(&mut self.off, s);
                codec::write_u32(&mut self.off, l);
            }
        }
        self.vals.clear();
        self.starts.clear();
        self.lens.clear();
    }
}
