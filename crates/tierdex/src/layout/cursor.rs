//! The posting cursor over one term's grouped region.
//!
//! It reads as needed: the header and skip table when opened, a doc block
//! when the cursor enters it, frequencies only when asked, and position or
//! offset blocks only for the documents whose positions are asked for. Skip
//! entries are parsed lazily and kept, so a *shallow* position (used for
//! block-max bounds) can run ahead of the decoded block.
//!
//! Errors (I/O, corruption) do not interrupt iteration loops: the cursor
//! records the error, reports itself exhausted, and hands the error over via
//! [`TermCursor::take_error`].

use crate::bloom::{self, Direction, FilterShape, Probe};
use crate::codec::{self, BLOCK};
use crate::error::Error;
use std::sync::Arc;

use crate::layout::impacts::{Impacts, MAX_TERM_IMPACTS};
use crate::layout::postings::PostingsFiles;
use crate::layout::Codec;
use crate::schema::{DocId, TERMINATED};
use crate::storage::{io, IndexFile, PageWindow};
use crate::termdict::TermInfo;

/// Longest encoding of one skip entry (seven VBytes, the impacts length
/// byte and at most 255 bytes of impacts).
const MAX_ENTRY: usize = 5 + 5 + 10 + 5 + 5 + 5 + 5 + 1 + 255;

const NONE: usize = usize::MAX;

#[derive(Debug, Clone, Copy)]
struct SkipEntry {
    last_doc: DocId,
    /// Offset of the block relative to the first block.
    block_off: u64,
    block_len: u32,
    /// Index in the position stream of the block's first position.
    pos_index: u64,
    /// Byte offset (in the positions section) of the position block holding
    /// `pos_index`; likewise in the offsets section.
    pos_byte: u32,
    off_byte: u32,
    /// Byte offsets of the block's filter groups in the `after` and
    /// `before` sections.
    filter_byte: [u32; 2],
    /// File offset of the block's impacts (decoded only when a bound is
    /// asked for), and their length; `usize::MAX`: the term's impacts.
    impacts_at: usize,
    impacts_len: u8,
}

/// Reads 128-value blocks of `W` parallel arrays (positions: 1, offsets: 2).
struct PackedStream<const W: usize> {
    codec: Codec,
    section: usize,
    section_len: usize,
    total: u64,
    cur: u64,
    next_off: usize,
    vals: [[u32; BLOCK]; W],
    win: PageWindow,
}

impl<const W: usize> PackedStream<W> {
    fn new(codec: Codec, section: usize, section_len: usize, total: u64) -> Self {
        PackedStream {
            codec,
            section,
            section_len,
            total,
            cur: u64::MAX,
            next_off: 0,
            vals: [[0; BLOCK]; W],
            win: PageWindow::new(),
        }
    }

    /// The stream over another section (of the same file), keeping its buffers.
    fn reset(&mut self, codec: Codec, section: usize, section_len: usize, total: u64) {
        self.codec = codec;
        self.section = section;
        self.section_len = section_len;
        self.total = total;
        self.cur = u64::MAX;
        self.next_off = 0;
    }

    fn full_blocks(&self) -> u64 {
        self.total / BLOCK as u64
    }

    fn corrupt(file: &IndexFile, what: &str) -> Error {
        Error::corrupt(file.path(), format!("damaged {what} block"))
    }

    /// Byte size of the full block at `off`.
    fn full_block_len(&mut self, file: &IndexFile, off: usize) -> Result<usize, Error> {
        if self.codec == Codec::Direct {
            return Ok(W * BLOCK * 4);
        }
        let mut len = 0;
        for _ in 0..W {
            let at = self.section + off + len;
            let bits = self.win.get(file, at..at + 1)?[0];
            if bits > 32 {
                return Err(Self::corrupt(file, "position"));
            }
            len += codec::packed_len(bits);
        }
        Ok(len)
    }

    /// Makes block `block` current, walking from the current block or from
    /// the hint `(hint_block, hint_off)` (a block at or before `block`).
    fn load(&mut self, file: &IndexFile, block: u64, hint_block: u64, hint_off: usize) -> Result<(), Error> {
        if self.cur == block {
            return Ok(());
        }
        let (mut b, mut off) = if self.cur != u64::MAX && self.cur < block && self.cur >= hint_block {
            (self.cur + 1, self.next_off)
        } else {
            (hint_block, hint_off)
        };
        while b < block {
            off += self.full_block_len(file, off)?;
            b += 1;
        }
        if off > self.section_len {
            return Err(Self::corrupt(file, "position"));
        }
        let section_end = self.section + self.section_len;
        if self.codec == Codec::Direct {
            // W raw arrays of `count` u32 each.
            let count = if b < self.full_blocks() {
                BLOCK
            } else {
                (self.total - b * BLOCK as u64) as usize
            };
            let at = self.section + off;
            let len = W * count * 4;
            if at + len > section_end {
                return Err(Self::corrupt(file, "position"));
            }
            let data = self.win.get(file, at..at + len)?;
            for (w, vals) in self.vals.iter_mut().enumerate() {
                let arr = &data[w * count * 4..(w + 1) * count * 4];
                for (v, c) in vals.iter_mut().zip(arr.chunks_exact(4)) {
                    *v = u32::from_le_bytes(c.try_into().unwrap());
                }
            }
            io::record_needed(len as u64);
            self.next_off = off + len;
        } else if b < self.full_blocks() {
            let mut at = self.section + off;
            for w in 0..W {
                let bits = self
                    .win
                    .get(file, at..(at + 1).min(section_end))?
                    .first()
                    .copied()
                    .unwrap_or(u8::MAX);
                if bits > 32 || at + codec::packed_len(bits) > section_end {
                    return Err(Self::corrupt(file, "position"));
                }
                let data = self.win.get(file, at..at + codec::packed_len(bits))?;
                let used =
                    codec::unpack_block(data, &mut self.vals[w]).ok_or_else(|| Self::corrupt(file, "position"))?;
                at += used;
            }
            io::record_needed((at - self.section - off) as u64);
            self.next_off = at - self.section;
        } else {
            // The tail: at most 127 entries of W VBytes (5 bytes each at most).
            let count = (self.total - b * BLOCK as u64) as usize;
            let end = (self.section + off + count * W * 5).min(section_end);
            let data = self.win.get(file, self.section + off..end)?;
            let mut pos = 0;
            for i in 0..count {
                for w in 0..W {
                    self.vals[w][i] = codec::read_u32(data, &mut pos).ok_or_else(|| Self::corrupt(file, "position"))?;
                }
            }
            io::record_needed(pos as u64);
            self.next_off = off + pos;
        }
        self.cur = b;
        Ok(())
    }

    /// Calls `f` with the `W` values of each of `count` entries starting at
    /// stream index `start`.
    fn read(
        &mut self,
        file: &IndexFile,
        start: u64,
        count: u32,
        hint: (u64, usize),
        mut f: impl FnMut([u32; W]),
    ) -> Result<(), Error> {
        if start + count as u64 > self.total {
            return Err(Self::corrupt(file, "position"));
        }
        let mut idx = start;
        let end = start + count as u64;
        while idx < end {
            let block = idx / BLOCK as u64;
            let (hb, ho) = if block >= hint.0 { hint } else { (0, 0) };
            self.load(file, block, hb, ho)?;
            let lo = (idx % BLOCK as u64) as usize;
            let hi = ((end - block * BLOCK as u64).min(BLOCK as u64)) as usize;
            for j in lo..hi {
                let mut v = [0u32; W];
                for (w, slot) in v.iter_mut().enumerate() {
                    *slot = self.vals[w][j];
                }
                f(v);
            }
            idx = block * BLOCK as u64 + hi as u64;
        }
        Ok(())
    }
}

/// Where a cursor's sections are read from.
struct Source<'a> {
    file: &'a IndexFile,
    pos_file: &'a IndexFile,
    pay_file: &'a IndexFile,
    bloom_file: &'a IndexFile,
    codec: Codec,
    bloom: Option<FilterShape>,
}

impl<'a> Source<'a> {
    fn of(f: &'a IndexFile, codec: Codec, bloom: Option<FilterShape>) -> Self {
        Source {
            file: f,
            pos_file: f,
            pay_file: f,
            bloom_file: f,
            codec,
            bloom,
        }
    }
}

/// One chunk of a chained term, as a cursor walks it.
#[derive(Debug, Clone, Copy)]
pub struct ChainChunk {
    /// The chunk's region in the cursor's file.
    pub info: TermInfo,
    /// Document number of the region's document 0.
    pub base: DocId,
    /// The chunk's last document (with `base` added).
    pub last_doc: DocId,
    /// Bound of the chunk's scores.
    pub impacts: Impacts,
    /// File offset and length of the whole chunk, and its hash.
    pub start: u64,
    /// See `start`.
    pub len: u32,
    /// See `start`.
    pub sum: u64,
}

/// A chained term's chunks as cursors walk them, with the term's document
/// frequency and score bound: built once per term and state of the chain
/// and shared by the cursors that open it ([`crate::layout::chain::Chain`]
/// keeps it until the term changes).
#[derive(Debug)]
pub struct ChainWalk {
    /// The chunks, in document order.
    pub chunks: Vec<ChainChunk>,
    df: u32,
    impacts: Impacts,
}

impl ChainWalk {
    /// The walk over `chunks`.
    pub fn new(chunks: Vec<ChainChunk>) -> ChainWalk {
        let df = chunks.iter().map(|c| c.info.region.doc_freq).sum();
        let impacts = Impacts::frontier(
            chunks
                .iter()
                .flat_map(|c| c.impacts.as_slice().iter().map(|i| (i.freq, i.norm))),
            MAX_TERM_IMPACTS,
        );
        ChainWalk { chunks, df, impacts }
    }
}

/// The chunks of a chained term and which one the cursor is in.
struct ChainState {
    bloom: Option<FilterShape>,
    walk: Arc<ChainWalk>,
    at: usize,
    /// The chunk a shallow advance went to, past the current one.
    ahead: Option<usize>,
}

/// A cursor over one term's postings in one segment.
pub struct TermCursor<'a> {
    file: &'a IndexFile,
    pos_file: &'a IndexFile,
    pay_file: &'a IndexFile,
    bloom_file: &'a IndexFile,
    /// Added to every document number (a chained chunk's first document).
    base: DocId,
    /// The other chunks of a chained term (`None`: one region).
    chain: Option<Box<ChainState>>,
    codec: Codec,
    df: u32,
    n_blocks: usize,
    term_impacts: Impacts,
    /// The skip table: file range, parse position, window.
    skip_start: usize,
    skip_end: usize,
    skip_pos: usize,
    skip_win: PageWindow,
    blocks_start: usize,
    entries: Vec<SkipEntry>,
    shallow: usize,
    shallow_done: bool,
    block: usize,
    docs: [DocId; BLOCK],
    freqs: [u32; BLOCK],
    /// File range of the current full block's packed frequencies.
    freq_range: std::ops::Range<usize>,
    block_win: PageWindow,
    freqs_ready: bool,
    n: usize,
    i: usize,
    doc: DocId,
    /// Sum of the block's frequencies before document `occ_i` (so reading
    /// positions doc after doc costs O(1) per doc, not O(block)).
    occ_i: usize,
    occ_sum: u64,
    positions: PackedStream<1>,
    offsets: PackedStream<2>,
    /// Adaptive prefetch: segment size (0: off), how far the zone is
    /// prefetched, and where it ends.
    prefetch_segment: usize,
    prefetched_to: usize,
    zone_end: usize,
    filters: Filters,
    error: Option<Error>,
}

/// The term's phrase filters: where their sections are, and the group of
/// the current block per direction once a test has asked for it.
struct Filters {
    /// `None`: the term has no filters.
    shape: Option<FilterShape>,
    /// File offset and length of the `after` and `before` sections.
    section: [(usize, usize); 2],
    /// Block whose group is loaded, per direction.
    block: [usize; 2],
    bitmap: [u128; 2],
    /// File offset of the loaded group's first filter.
    data: [usize; 2],
    win: [PageWindow; 2],
}

fn side(dir: Direction) -> usize {
    match dir {
        Direction::After => 0,
        Direction::Before => 1,
    }
}

impl<'a> TermCursor<'a> {
    /// Opens the term described by `info` in the postings `file`, positioned
    /// on its first document.
    pub fn open(files: &'a PostingsFiles, info: &TermInfo) -> Result<TermCursor<'a>, Error> {
        let src = Source {
            file: files.doc_file(),
            pos_file: files.pos_file(),
            pay_file: files.pay_file(),
            bloom_file: files.bloom_file(),
            codec: files.codec(),
            bloom: files.bloom(),
        };
        Self::open_in(src, info, 0)
    }

    /// Opens a chained term in the chain `file` (see
    /// [`crate::layout::chain`]): `walk` says where each of its chunks'
    /// regions is and what it holds. Positioned on the first document.
    pub fn open_chain_in(
        file: &'a IndexFile,
        codec: Codec,
        bloom: Option<FilterShape>,
        walk: Arc<ChainWalk>,
    ) -> Result<TermCursor<'a>, Error> {
        let first = *walk
            .chunks
            .first()
            .ok_or_else(|| Error::corrupt(file.path(), "chained term with no chunks"))?;
        let src = Source::of(file, codec, bloom);
        let mut c = Self::open_in(src, &first.info, first.base)?;
        c.chain = Some(Box::new(ChainState {
            bloom,
            walk,
            at: 0,
            ahead: None,
        }));
        Ok(c)
    }

    fn open_in(src: Source<'a>, info: &TermInfo, base: DocId) -> Result<TermCursor<'a>, Error> {
        let codec = src.codec;
        let mut c = TermCursor {
            file: src.file,
            pos_file: src.pos_file,
            pay_file: src.pay_file,
            bloom_file: src.bloom_file,
            base,
            chain: None,
            codec,
            df: 0,
            n_blocks: 0,
            term_impacts: Impacts::default(),
            skip_start: 0,
            skip_end: 0,
            skip_pos: 0,
            skip_win: PageWindow::new(),
            blocks_start: 0,
            entries: Vec::new(),
            shallow: 0,
            shallow_done: false,
            block: NONE,
            docs: [0; BLOCK],
            freqs: [0; BLOCK],
            freq_range: 0..0,
            block_win: PageWindow::new(),
            freqs_ready: false,
            n: 0,
            i: 0,
            doc: 0,
            occ_i: 0,
            occ_sum: 0,
            positions: PackedStream::new(codec, 0, 0, 0),
            offsets: PackedStream::new(codec, 0, 0, 0),
            prefetch_segment: 0,
            prefetched_to: 0,
            zone_end: 0,
            filters: Filters {
                shape: None,
                section: [(0, 0); 2],
                block: [NONE; 2],
                bitmap: [0; 2],
                data: [0; 2],
                win: [PageWindow::new(), PageWindow::new()],
            },
            error: None,
        };
        c.load(src.bloom, info, base)?;
        Ok(c)
    }

    /// Points the cursor at the region `info` of its files (documents
    /// numbered from `base`) and decodes its first block, keeping the
    /// cursor's buffers: entering the next chunk of a chained term costs
    /// no allocation.
    fn load(&mut self, bloom: Option<FilterShape>, info: &TermInfo, base: DocId) -> Result<(), Error> {
        let (file, pos_file, pay_file) = (self.file, self.pos_file, self.pay_file);
        let r = &info.region;
        let within = |f: &IndexFile, off: u64, len: u32| -> Result<usize, Error> {
            usize::try_from(off)
                .ok()
                .filter(|&o| o.checked_add(len as usize).is_some_and(|e| e <= f.len()))
                .ok_or_else(|| {
                    Error::corrupt(
                        f.path(),
                        format!("term section at byte {off} beyond the end of the file"),
                    )
                })
        };
        let start = within(file, info.doc_offset, r.zone_len)?;
        let pos_start = within(pos_file, info.pos_offset, r.pos_len)?;
        let off_start = within(pay_file, info.off_offset, r.off_len)?;
        let zone_end = start + r.zone_len as usize;
        let filter_shape = bloom.filter(|_| r.after_len > 0);
        let bloom_file = self.bloom_file;
        let filter_start = match filter_shape {
            Some(_) => within(bloom_file, info.bloom_offset, r.after_len.saturating_add(r.before_len))?,
            None if r.bloom_len() > 0 => {
                return Err(Error::corrupt(file.path(), "phrase filters in a segment without them"))
            }
            None => 0,
        };
        let filter_sections = [
            (filter_start, r.after_len as usize),
            (filter_start + r.after_len as usize, r.before_len as usize),
        ];
        if r.doc_freq == 0 {
            return Err(Error::corrupt(file.path(), "term with no documents"));
        }
        let bad = || Error::corrupt(file.path(), format!("damaged term header at byte {start}"));
        let head = self.skip_win.get(file, start..zone_end.min(start + 64))?;
        let mut pos = 0;
        let term_impacts = Impacts::read(head, &mut pos).ok_or_else(bad)?;
        let n_blocks = (r.doc_freq as usize).div_ceil(BLOCK);
        let mut single_last_doc = 0;
        let (skip_start, blocks_start) = if n_blocks == 1 {
            // The single "skip entry" is the last doc, right after the header.
            let skip_start = start + pos;
            single_last_doc = codec::read_u32(head, &mut pos)
                .and_then(|d| d.checked_add(base))
                .ok_or_else(bad)?;
            (skip_start, start + pos)
        } else {
            let skip_len = codec::read_u32(head, &mut pos).ok_or_else(bad)? as usize;
            let skip_start = start + pos;
            let blocks_start = skip_start
                .checked_add(skip_len)
                .filter(|&e| e <= zone_end)
                .ok_or_else(bad)?;
            (skip_start, blocks_start)
        };
        io::record_needed((skip_start - start) as u64);
        let codec = self.codec;
        self.base = base;
        self.df = r.doc_freq;
        self.n_blocks = n_blocks;
        self.term_impacts = term_impacts;
        self.skip_start = skip_start;
        self.skip_end = blocks_start;
        self.skip_pos = 0;
        self.blocks_start = blocks_start;
        self.entries.clear();
        self.shallow = 0;
        self.shallow_done = false;
        self.block = NONE;
        self.freq_range = 0..0;
        self.freqs_ready = false;
        self.n = 0;
        self.i = 0;
        self.doc = 0;
        self.occ_i = 0;
        self.occ_sum = 0;
        self.positions
            .reset(codec, pos_start, r.pos_len as usize, r.total_term_freq);
        self.offsets
            .reset(codec, off_start, r.off_len as usize, r.total_term_freq);
        self.prefetch_segment = 0;
        self.prefetched_to = 0;
        self.zone_end = zone_end;
        self.filters.shape = filter_shape;
        self.filters.section = filter_sections;
        self.filters.block = [NONE; 2];
        self.filters.bitmap = [0; 2];
        self.filters.data = [0; 2];
        if n_blocks == 1 {
            self.entries.push(SkipEntry {
                last_doc: single_last_doc,
                block_off: 0,
                block_len: (zone_end - blocks_start) as u32,
                pos_index: 0,
                pos_byte: 0,
                off_byte: 0,
                filter_byte: [0; 2],
                impacts_at: usize::MAX,
                impacts_len: 0,
            });
            self.skip_pos = blocks_start - skip_start;
        }
        if !self.ensure_entry(0) {
            let err = self.corrupt("term header");
            return Err(self.error.take().unwrap_or(err));
        }
        self.decode_block(0);
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        Ok(())
    }

    /// Keeps prefetching the term's zone in segments of `segment` bytes
    /// ahead of the blocks being decoded, the zone having been prefetched up
    /// to `prefetched_to` already (see [`crate::storage::TierOptions::prefetches`]).
    pub fn enable_prefetch(&mut self, segment: usize, prefetched_to: usize) {
        self.prefetch_segment = segment;
        self.prefetched_to = prefetched_to;
    }

    /// Number of documents containing the term.
    pub fn doc_freq(&self) -> u32 {
        self.chain.as_ref().map_or(self.df, |c| c.walk.df)
    }

    /// The term's last document (parsing the whole skip table); `None` on damage.
    pub fn last_doc(&mut self) -> Option<DocId> {
        if let Some(c) = &self.chain {
            return c.walk.chunks.last().map(|c| c.last_doc);
        }
        if self.ensure_entry(self.n_blocks - 1) {
            self.entries.last().map(|e| e.last_doc)
        } else {
            None
        }
    }

    /// Impacts bounding every posting of the term.
    pub fn term_impacts(&self) -> &Impacts {
        self.chain.as_ref().map_or(&self.term_impacts, |c| &c.walk.impacts)
    }

    /// The current document, or [`TERMINATED`].
    #[inline]
    pub fn doc(&self) -> DocId {
        self.doc
    }

    /// Moves to the next document.
    #[inline]
    pub fn advance(&mut self) -> DocId {
        if self.doc == TERMINATED {
            return TERMINATED;
        }
        self.i += 1;
        if self.i < self.n {
            self.doc = self.docs[self.i];
            return self.doc;
        }
        let next = self.block + 1;
        if next >= self.n_blocks || !self.ensure_entry(next) {
            if self.error.is_none() && self.chain.is_some() {
                let j = self.chain.as_ref().map_or(0, |c| c.at + 1);
                self.enter_chunk(j);
                return self.doc;
            }
            self.doc = TERMINATED;
            return TERMINATED;
        }
        self.decode_block(next);
        self.doc
    }

    /// Moves to the first document `>= target`.
    #[inline]
    pub fn seek(&mut self, target: DocId) -> DocId {
        if target <= self.doc {
            return self.doc;
        }
        if target > self.chunk_last() {
            let entered = match self.chunk_for(target) {
                Some(j) => self.enter_chunk(j),
                None => false,
            };
            if !entered {
                self.doc = TERMINATED;
                return TERMINATED;
            }
            if target <= self.doc {
                return self.doc;
            }
        }
        if self.entries[self.block].last_doc < target {
            if self.shallow_advance(target) == TERMINATED {
                self.doc = TERMINATED;
                return TERMINATED;
            }
            self.decode_block(self.shallow);
            if self.doc == TERMINATED {
                return TERMINATED;
            }
        }
        // The block's last doc is >= target: gallop to it inside the block.
        let i = gallop(&self.docs[..self.n], self.i, target);
        self.i = i;
        self.doc = self.docs[i];
        self.doc
    }

    /// Moves the skip position (not the cursor) to the block holding the
    /// first document `>= target` and returns that block's last document, or
    /// [`TERMINATED`] when no document `>= target` exists.
    pub fn shallow_advance(&mut self, target: DocId) -> DocId {
        let ahead = match target > self.chunk_last() {
            true => Some(self.chunk_for(target)),
            false => None,
        };
        if let Some(chain) = self.chain.as_mut() {
            chain.ahead = ahead.flatten();
            if let Some(j) = ahead {
                // Ahead of the current chunk: the bound is the whole chunk's.
                return j.map_or(TERMINATED, |j| chain.walk.chunks[j].last_doc);
            }
        }
        let floor = if self.block == NONE { 0 } else { self.block };
        let mut b = self.shallow.max(floor);
        while b > floor && self.entries[b - 1].last_doc >= target {
            b -= 1;
        }
        loop {
            if b >= self.n_blocks || !self.ensure_entry(b) {
                self.shallow = b.min(self.entries.len().saturating_sub(1));
                self.shallow_done = true;
                return TERMINATED;
            }
            if self.entries[b].last_doc >= target {
                self.shallow = b;
                self.shallow_done = false;
                return self.entries[b].last_doc;
            }
            b += 1;
        }
    }

    /// Number of the block at the skip position, or `None` past the end
    /// (identifies what [`TermCursor::block_impacts`] would return).
    #[inline]
    pub fn shallow_block(&self) -> Option<usize> {
        match &self.chain {
            // Unique over the chunks: (chunk, block), a chunk ahead as a whole.
            Some(c) => match c.ahead {
                Some(j) => Some(j << 32 | 0xFFFF_FFFF),
                None => (!self.shallow_done).then_some(c.at << 32 | self.shallow),
            },
            None => (!self.shallow_done).then_some(self.shallow),
        }
    }

    /// Impacts of the block at the skip position (`None` past the end).
    #[inline]
    pub fn block_impacts(&mut self) -> Option<Impacts> {
        if let Some(j) = self.chain.as_ref().and_then(|c| c.ahead) {
            return self.chain.as_ref().map(|c| c.walk.chunks[j].impacts);
        }
        if self.shallow_done {
            return None;
        }
        let e = self.entries[self.shallow];
        if e.impacts_at == usize::MAX {
            return Some(self.term_impacts);
        }
        let file = self.file;
        let decoded = match self
            .skip_win
            .get(file, e.impacts_at..e.impacts_at + e.impacts_len as usize)
        {
            Ok(data) => Impacts::read(data, &mut 0),
            Err(err) => {
                self.fail(err);
                return Some(self.term_impacts);
            }
        };
        match decoded {
            Some(i) => Some(i),
            None => {
                // Damage: report it, and bound nothing away meanwhile.
                let err = self.corrupt("block impacts");
                self.fail(err);
                Some(self.term_impacts)
            }
        }
    }

    /// Sets the bit of every remaining document (from the current one on)
    /// in `words` (a bitset over the segment's documents); leaves the cursor
    /// exhausted. Bits of one word are gathered in a register first.
    pub fn union_into(&mut self, words: &mut [u64]) {
        while self.doc != TERMINATED {
            let mut word = usize::MAX;
            let mut acc = 0u64;
            for &d in &self.docs[self.i..self.n] {
                let w = (d >> 6) as usize;
                if w != word {
                    if let Some(slot) = words.get_mut(word) {
                        *slot |= acc;
                    }
                    word = w;
                    acc = 0;
                }
                acc |= 1 << (d & 63);
            }
            if let Some(slot) = words.get_mut(word) {
                *slot |= acc;
            }
            let next = self.block + 1;
            if next >= self.n_blocks || !self.ensure_entry(next) {
                if self.error.is_none() && self.chain.is_some() {
                    let j = self.chain.as_ref().map_or(0, |c| c.at + 1);
                    if self.enter_chunk(j) {
                        continue;
                    }
                }
                self.doc = TERMINATED;
                break;
            }
            self.decode_block(next);
        }
    }

    /// Frequency of the term in the current document.
    #[inline]
    pub fn freq(&mut self) -> u32 {
        if !self.freqs_ready {
            self.decode_freqs();
        }
        self.freqs[self.i]
    }

    /// Positions of the term in the current document, into `out` (cleared).
    pub fn positions(&mut self, out: &mut Vec<u32>) {
        out.clear();
        let Some((start, count, hint)) = self.occurrences(true) else {
            return;
        };
        let mut pos = 0u32;
        let res = self.positions.read(self.pos_file, start, count, hint, |[delta]| {
            pos = pos.wrapping_add(delta);
            out.push(pos);
        });
        if let Err(e) = res {
            self.fail(e);
            out.clear();
        }
    }

    /// Byte offsets `(start, end)` of the term's occurrences in the current
    /// document, into `out` (cleared).
    pub fn offsets(&mut self, out: &mut Vec<(u32, u32)>) {
        out.clear();
        let Some((start, count, hint)) = self.occurrences(false) else {
            return;
        };
        let mut end = 0u32;
        let res = self.offsets.read(self.pay_file, start, count, hint, |[gap, len]| {
            let s = end.wrapping_add(gap);
            end = s.wrapping_add(len);
            out.push((s, end));
        });
        if let Err(e) = res {
            self.fail(e);
            out.clear();
        }
    }

    /// Whether the term has phrase filters in this segment.
    pub fn has_filters(&self) -> bool {
        self.filters.shape.is_some()
    }

    /// Whether the current document's `dir` filter may hold the term of
    /// `probe` (false: the term certainly is not a neighbour there). True
    /// when the term has no filters. An empty filter costs one bit test, and
    /// nothing allocates; a read error stops the cursor (and answers false).
    #[inline]
    pub fn filter_may_contain(&mut self, dir: Direction, probe: &Probe) -> bool {
        let Some(shape) = self.filters.shape else {
            return true;
        };
        match self.current_filter(side(dir), shape) {
            Ok(Some(filter)) => bloom::may_contain(filter, probe),
            Ok(None) => false,
            Err(e) => {
                self.fail(e);
                false
            }
        }
    }

    /// Appends the current document's `dir` filter to `out` (zeros when
    /// empty); false, appending nothing, when the term has no filters.
    pub fn copy_filter(&mut self, dir: Direction, out: &mut Vec<u8>) -> bool {
        let Some(shape) = self.filters.shape else {
            return false;
        };
        let at = out.len();
        out.resize(at + shape.bytes as usize, 0);
        match self.current_filter(side(dir), shape) {
            Ok(Some(filter)) => out[at..].copy_from_slice(filter),
            Ok(None) => {}
            Err(e) => self.fail(e),
        }
        true
    }

    /// The current document's filter in section `s` (`None`: empty, or the
    /// cursor is exhausted), loading the block's group bitmap first when
    /// the cursor has moved to another block.
    #[inline]
    fn current_filter(&mut self, s: usize, shape: FilterShape) -> Result<Option<&[u8]>, Error> {
        if self.doc == TERMINATED {
            return Ok(None);
        }
        if self.filters.block[s] != self.block {
            self.load_group(s, shape)?;
        }
        let bit = 1u128 << self.i;
        let bitmap = self.filters.bitmap[s];
        if bitmap & bit == 0 {
            return Ok(None);
        }
        let fb = shape.bytes as usize;
        let at = self.filters.data[s] + (bitmap & (bit - 1)).count_ones() as usize * fb;
        io::record_needed(fb as u64);
        self.filters.win[s].get(self.bloom_file, at..at + fb).map(Some)
    }

    /// Reads the bitmap of the current block's group in section `s`.
    fn load_group(&mut self, s: usize, shape: FilterShape) -> Result<(), Error> {
        let (section, len) = self.filters.section[s];
        let start = section + self.entries[self.block].filter_byte[s] as usize;
        let end = section + len;
        let bitmap = self.filters.win[s]
            .get(self.bloom_file, start..(start + bloom::BITMAP_BYTES).min(end))?
            .first_chunk::<{ bloom::BITMAP_BYTES }>()
            .copied()
            .filter(|b| start + bloom::group_len(shape, b) <= end)
            .ok_or_else(|| {
                Error::corrupt(
                    self.bloom_file.path(),
                    "damaged phrase filter group in a term's postings",
                )
            })?;
        io::record_needed(bloom::BITMAP_BYTES as u64);
        self.filters.bitmap[s] = u128::from_le_bytes(bitmap);
        self.filters.data[s] = start + bloom::BITMAP_BYTES;
        self.filters.block[s] = self.block;
        Ok(())
    }

    /// The error that stopped the cursor, if any.
    pub fn take_error(&mut self) -> Option<Error> {
        self.error.take()
    }

    /// Stream index, count and block hint of the current doc's occurrences.
    fn occurrences(&mut self, positions: bool) -> Option<(u64, u32, (u64, usize))> {
        if self.doc == TERMINATED {
            return None;
        }
        if !self.freqs_ready {
            self.decode_freqs();
            if self.doc == TERMINATED {
                return None;
            }
        }
        let e = &self.entries[self.block];
        if self.occ_i > self.i {
            self.occ_i = 0;
            self.occ_sum = 0;
        }
        let before = self.occ_sum + self.freqs[self.occ_i..self.i].iter().map(|&f| f as u64).sum::<u64>();
        self.occ_i = self.i;
        self.occ_sum = before;
        let byte = if positions { e.pos_byte } else { e.off_byte };
        let hint = (e.pos_index / BLOCK as u64, byte as usize);
        Some((e.pos_index + before, self.freqs[self.i], hint))
    }

    fn fail(&mut self, e: Error) {
        if self.error.is_none() {
            self.error = Some(e);
        }
        self.doc = TERMINATED;
        self.shallow_done = true;
    }

    fn corrupt(&self, what: &str) -> Error {
        Error::corrupt(self.file.path(), format!("damaged {what} in a term's postings"))
    }

    /// Parses skip entries up to `idx`; false past the end or on damage.
    fn ensure_entry(&mut self, idx: usize) -> bool {
        while self.entries.len() <= idx {
            if self.entries.len() >= self.n_blocks {
                return false;
            }
            match self.parse_entry() {
                Some(e) => self.entries.push(e),
                None => {
                    let err = self.corrupt("skip table");
                    self.fail(err);
                    return false;
                }
            }
        }
        true
    }

    fn parse_entry(&mut self) -> Option<SkipEntry> {
        let at = self.skip_start + self.skip_pos;
        let end = (at + MAX_ENTRY).min(self.skip_end);
        let file = self.file;
        let data = match self.skip_win.get(file, at..end) {
            Ok(d) => d,
            Err(e) => {
                self.fail(e);
                return None;
            }
        };
        let pos = &mut 0;
        let prev = self.entries.last();
        let last_doc = prev
            .map_or(self.base, |p| p.last_doc)
            .checked_add(codec::read_u32(data, pos)?)?;
        let block_len = codec::read_u32(data, pos)?;
        let pos_index = prev
            .map_or(0, |p| p.pos_index)
            .checked_add(codec::read_u64(data, pos)?)?;
        let pos_byte = prev
            .map_or(0, |p| p.pos_byte)
            .checked_add(codec::read_u32(data, pos)?)?;
        let off_byte = prev
            .map_or(0, |p| p.off_byte)
            .checked_add(codec::read_u32(data, pos)?)?;
        let mut filter_byte = [0u32; 2];
        if self.filters.shape.is_some() {
            for (s, b) in filter_byte.iter_mut().enumerate() {
                *b = prev
                    .map_or(0, |p| p.filter_byte[s])
                    .checked_add(codec::read_u32(data, pos)?)?;
            }
        }
        let impacts_len = *data.get(*pos)?;
        let impacts_at = at + *pos + 1;
        *pos += 1 + impacts_len as usize;
        if *pos > data.len() {
            return None;
        }
        let block_off = prev.map_or(0, |p| p.block_off + p.block_len as u64);
        if prev.is_some_and(|p| p.last_doc >= last_doc) {
            return None;
        }
        self.skip_pos += *pos;
        io::record_needed(*pos as u64);
        Some(SkipEntry {
            last_doc,
            block_off,
            block_len,
            pos_index,
            pos_byte,
            off_byte,
            filter_byte,
            impacts_at,
            impacts_len,
        })
    }

    /// Decodes the doc ids of block `b` (its entry must be parsed) and moves
    /// the cursor to its first document.
    fn decode_block(&mut self, b: usize) {
        let e = self.entries[b];
        let prev_last = if b == 0 {
            None
        } else {
            Some(self.entries[b - 1].last_doc)
        };
        let start = self.blocks_start + e.block_off as usize;
        let end = start + e.block_len as usize;
        let n = if b + 1 == self.n_blocks {
            self.df as usize - BLOCK * (self.n_blocks - 1)
        } else {
            BLOCK
        };
        let file = self.file;
        if self.prefetch_segment > 0 && end > self.prefetched_to && self.prefetched_to < self.zone_end {
            let from = self.prefetched_to.max(start);
            let to = (from + self.prefetch_segment).min(self.zone_end);
            if let Err(err) = file.prefetch(std::slice::from_ref(&(from..to))) {
                return self.fail(err);
            }
            self.prefetched_to = to;
        }
        let data = match self.block_win.get(file, start..end) {
            Ok(d) => d,
            Err(err) => return self.fail(err),
        };
        io::record_needed(e.block_len as u64);
        let ok = if self.codec == Codec::Direct {
            // n raw doc ids, then n raw frequencies.
            if data.len() == 8 * n {
                for (d, c) in self.docs[..n].iter_mut().zip(data[..4 * n].chunks_exact(4)) {
                    *d = u32::from_le_bytes(c.try_into().unwrap());
                }
                self.freq_range = start + 4 * n..end;
                self.freqs_ready = false;
                self.docs[..n].windows(2).all(|w| w[0] < w[1])
            } else {
                false
            }
        } else if n == BLOCK {
            match codec::unpack_sorted_block(prev_last, data, &mut self.docs) {
                Some(used) => {
                    self.freq_range = start + used..end;
                    self.freqs_ready = false;
                    true
                }
                None => false,
            }
        } else {
            self.freqs_ready = true;
            decode_tail(data, prev_last, &mut self.docs[..n], &mut self.freqs[..n]).is_some()
        };
        // Raw ids, and a first block's deltas, count from the chunk's start.
        let ok = ok && (self.base == 0 || (prev_last.is_some() && self.codec != Codec::Direct) || self.add_base(n));
        if !ok || self.docs[n - 1] != e.last_doc || prev_last.is_some_and(|p| self.docs[0] <= p) {
            let err = self.corrupt("doc block");
            return self.fail(err);
        }
        self.block = b;
        self.shallow = self.shallow.max(b);
        self.n = n;
        self.i = 0;
        self.occ_i = 0;
        self.occ_sum = 0;
        self.doc = self.docs[0];
    }

    /// Adds the chunk's base to the block's `n` documents; false on overflow.
    #[cold]
    fn add_base(&mut self, n: usize) -> bool {
        let base = self.base;
        self.docs[..n].iter_mut().all(|d| match d.checked_add(base) {
            Some(v) => {
                *d = v;
                true
            }
            None => false,
        })
    }

    /// Moves a chained cursor to chunk `j` (its first document); false, the
    /// cursor exhausted, past the last chunk or on error.
    #[cold]
    fn enter_chunk(&mut self, j: usize) -> bool {
        let Some(mut chain) = self.chain.take() else {
            return false;
        };
        let Some(&next) = chain.walk.chunks.get(j) else {
            self.chain = Some(chain);
            self.doc = TERMINATED;
            self.shallow_done = true;
            return false;
        };
        chain.at = j;
        chain.ahead = None;
        let error = self.error.take();
        let loaded = self.load(chain.bloom, &next.info, next.base);
        self.error = error;
        self.chain = Some(chain);
        match loaded {
            Ok(()) => true,
            Err(e) => {
                self.fail(e);
                false
            }
        }
    }

    /// The first chunk after the current one whose last document is
    /// `>= target` (chained cursors only).
    fn chunk_for(&self, target: DocId) -> Option<usize> {
        let chain = self.chain.as_ref()?;
        let rest = &chain.walk.chunks[chain.at + 1..];
        let k = rest.partition_point(|c| c.last_doc < target);
        (k < rest.len()).then_some(chain.at + 1 + k)
    }

    /// Last document of the current chunk (`TERMINATED` when not chained).
    #[inline]
    fn chunk_last(&self) -> DocId {
        match &self.chain {
            Some(c) => c.walk.chunks[c.at].last_doc,
            None => TERMINATED,
        }
    }

    fn decode_freqs(&mut self) {
        let file = self.file;
        let (direct, n) = (self.codec == Codec::Direct, self.n);
        let unpacked = match self.block_win.get(file, self.freq_range.clone()) {
            Ok(data) if direct => {
                for (f, c) in self.freqs[..n].iter_mut().zip(data.chunks_exact(4)) {
                    *f = u32::from_le_bytes(c.try_into().unwrap());
                }
                // Stored as they are: undo the +1 below.
                self.freqs[..n].iter_mut().for_each(|f| *f = f.wrapping_sub(1));
                (data.len() == 4 * n).then_some(n)
            }
            Ok(data) => codec::unpack_block(data, &mut self.freqs),
            Err(err) => {
                self.fail(err);
                self.freqs = [1; BLOCK];
                self.freqs_ready = true;
                return;
            }
        };
        match unpacked {
            Some(_) => {
                for f in self.freqs.iter_mut() {
                    *f = f.wrapping_add(1);
                }
                self.freqs_ready = true;
                if self.freqs[..self.n].contains(&0) {
                    let err = self.corrupt("frequency block");
                    self.fail(err);
                }
            }
            None => {
                let err = self.corrupt("frequency block");
                self.fail(err);
                self.freqs = [1; BLOCK];
                self.freqs_ready = true;
            }
        }
    }
}

/// The first index `>= from` of sorted `docs` holding a value `>= target`
/// (which must exist): exponential probes from `from`, then a binary search
/// in the last interval, so short hops cost a comparison or two.
#[inline]
fn gallop(docs: &[DocId], from: usize, target: DocId) -> usize {
    if docs[from] >= target {
        return from;
    }
    let (mut lo, mut step) = (from, 1);
    while lo + step < docs.len() && docs[lo + step] < target {
        lo += step;
        step *= 2;
    }
    let hi = (lo + step).min(docs.len() - 1);
    lo + 1 + docs[lo + 1..=hi].partition_point(|&d| d < target)
}

/// Decodes a VByte tail block: doc deltas (from `prev_last`), then freqs.
fn decode_tail(data: &[u8], prev_last: Option<DocId>, docs: &mut [DocId], freqs: &mut [u32]) -> Option<()> {
    let mut pos = 0;
    let mut prev = prev_last;
    for slot in docs.iter_mut() {
        let delta = codec::read_u32(data, &mut pos)?;
        let d = match prev {
            Some(p) => p.checked_add(delta)?.checked_add(1)?,
            None => delta,
        };
        *slot = d;
        prev = Some(d);
    }
    for slot in freqs.iter_mut() {
        *slot = codec::read_u32(data, &mut pos)?.checked_add(1)?;
    }
    Some(())
}

#[cfg(test)]
mod gallop_tests {
    use super::gallop;

    #[test]
    fn finds_the_first_not_less() {
        let docs: Vec<u32> = (0..128).map(|i| i * 3).collect();
        for from in [0, 5, 64, 127] {
            for target in docs[from]..=docs[127] {
                let want = (from..128).find(|&i| docs[i] >= target).unwrap();
                assert_eq!(gallop(&docs, from, target), want, "from {from} target {target}");
            }
        }
    }
}
