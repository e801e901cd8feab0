//! The leaf cursor: one grouped region (a term's postings in a segment,
//! or one chunk of a chained term): its header, the doc/freq blocks it
//! decodes as it moves, and the parts that live in files of their own here
//! (the skip table, position and offset streams, phrase filters).

use crate::bloom::FilterShape;
use crate::codec::{self, BLOCK};
use crate::error::Error;
use crate::layout::impacts::Impacts;
use crate::layout::writer::{SKIP_INDEXED, SKIP_RECORD, SKIP_SPAN};
use crate::layout::postings::PostingsFiles;
use crate::layout::Codec;
use crate::schema::{DocId, TERMINATED};
use crate::storage::{io, IndexFile, PageWindow};
use crate::termdict::TermInfo;

use super::filters::Filters;
use super::skip::{SkipEntry, NONE};
use super::stream::PackedStream;

/// Where a cursor's sections are read from.
pub(super) struct Source<'a> {
    file: &'a IndexFile,
    pos_file: &'a IndexFile,
    pay_file: &'a IndexFile,
    bloom_file: &'a IndexFile,
    codec: Codec,
    bloom: Option<FilterShape>,
}

impl<'a> Source<'a> {
    pub(super) fn of(f: &'a IndexFile, codec: Codec, bloom: Option<FilterShape>) -> Self {
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

/// A cursor over one grouped region: one term's postings in a segment, or
/// one chunk of a chained term.
pub(super) struct LeafCursor<'a> {
    pub(super) file: &'a IndexFile,
    pub(super) pos_file: &'a IndexFile,
    pub(super) pay_file: &'a IndexFile,
    pub(super) bloom_file: &'a IndexFile,
    /// Added to every document number (a chained chunk's first document).
    pub(super) base: DocId,
    pub(super) codec: Codec,
    pub(super) df: u32,
    pub(super) n_blocks: usize,
    pub(super) term_impacts: Impacts,
    /// The skip table: file range, parse position, window.
    pub(super) skip_start: usize,
    pub(super) skip_end: usize,
    pub(super) skip_pos: usize,
    pub(super) skip_win: PageWindow,
    pub(super) blocks_start: usize,
    /// The skip table's second level: its records (one per span of
    /// [`SKIP_SPAN`] blocks after the first), where it starts, its window.
    pub(super) skip_records: usize,
    pub(super) skip_index: usize,
    pub(super) index_win: PageWindow,
    /// Parsed skip entries, of blocks `entries_from..`: a seek that jumps
    /// over spans starts them again after the span it lands in.
    pub(super) entries_from: usize,
    pub(super) entries: Vec<SkipEntry>,
    pub(super) shallow: usize,
    pub(super) shallow_done: bool,
    pub(super) block: usize,
    /// The current block's documents; not filled while `dense` holds.
    pub(super) docs: [DocId; BLOCK],
    /// A dense block (see [`codec::DENSE`]) is kept as its bit set: bit `p`
    /// of `bits` is document `first + p`, and moving the cursor finds the
    /// next set bit instead of decoding 128 ids first (`docs` is filled only
    /// for a pass over the whole block).
    pub(super) dense: bool,
    pub(super) bits: [u64; 4],
    pub(super) first: DocId,
    pub(super) freqs: [u32; BLOCK],
    /// File range of the current full block's packed frequencies.
    pub(super) freq_range: std::ops::Range<usize>,
    pub(super) block_win: PageWindow,
    pub(super) freqs_ready: bool,
    pub(super) n: usize,
    pub(super) i: usize,
    pub(super) doc: DocId,
    /// Sum of the block's frequencies before document `occ_i` (so reading
    /// positions doc after doc costs O(1) per doc, not O(block)).
    pub(super) occ_i: usize,
    pub(super) occ_sum: u64,
    pub(super) positions: PackedStream<1>,
    pub(super) offsets: PackedStream<2>,
    /// Adaptive prefetch: segment size (0: off), how far the zone is
    /// prefetched, and where it ends.
    pub(super) prefetch_segment: usize,
    pub(super) prefetched_to: usize,
    pub(super) zone_end: usize,
    pub(super) filters: Filters,
    pub(super) error: Option<Error>,
}

impl<'a> LeafCursor<'a> {
    /// Opens the term described by `info` in the postings `file`, positioned
    /// on its first document.
    pub(super) fn open(files: &'a PostingsFiles, info: &TermInfo) -> Result<LeafCursor<'a>, Error> {
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

    pub(super) fn open_in(src: Source<'a>, info: &TermInfo, base: DocId) -> Result<LeafCursor<'a>, Error> {
        let codec = src.codec;
        let mut c = LeafCursor {
            file: src.file,
            pos_file: src.pos_file,
            pay_file: src.pay_file,
            bloom_file: src.bloom_file,
            base,
            codec,
            df: 0,
            n_blocks: 0,
            term_impacts: Impacts::default(),
            skip_start: 0,
            skip_end: 0,
            skip_pos: 0,
            skip_win: PageWindow::new(),
            blocks_start: 0,
            skip_records: 0,
            skip_index: 0,
            index_win: PageWindow::new(),
            entries_from: 0,
            entries: Vec::new(),
            shallow: 0,
            shallow_done: false,
            block: NONE,
            docs: [0; BLOCK],
            dense: false,
            bits: [0; 4],
            first: 0,
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
    pub(super) fn load(&mut self, bloom: Option<FilterShape>, info: &TermInfo, base: DocId) -> Result<(), Error> {
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
        let mut skip_records = 0;
        let (skip_start, blocks_start) = if n_blocks == 1 {
            // The single "skip entry" is the last doc, right after the header.
            let skip_start = start + pos;
            single_last_doc = codec::read_u32(head, &mut pos)
                .and_then(|d| d.checked_add(base))
                .ok_or_else(bad)?;
            (skip_start, start + pos)
        } else {
            let skip_len = codec::read_u32(head, &mut pos).ok_or_else(bad)?;
            let skip_start = start + pos;
            let blocks_start = skip_start
                .checked_add((skip_len & !SKIP_INDEXED) as usize)
                .filter(|&e| e <= zone_end)
                .ok_or_else(bad)?;
            if skip_len & SKIP_INDEXED != 0 {
                skip_records = (n_blocks - 1) / SKIP_SPAN;
            }
            (skip_start, blocks_start)
        };
        let skip_index = blocks_start
            .checked_sub(skip_records * SKIP_RECORD)
            .filter(|&i| i >= skip_start)
            .ok_or_else(bad)?;
        io::record_needed((skip_start - start) as u64);
        let codec = self.codec;
        self.base = base;
        self.df = r.doc_freq;
        self.n_blocks = n_blocks;
        self.term_impacts = term_impacts;
        self.skip_start = skip_start;
        self.skip_end = skip_index;
        self.skip_pos = 0;
        self.blocks_start = blocks_start;
        self.skip_records = skip_records;
        self.skip_index = skip_index;
        self.entries_from = 0;
        self.entries.clear();
        self.shallow = 0;
        self.shallow_done = false;
        self.block = NONE;
        self.freq_range = 0..0;
        self.freqs_ready = false;
        self.dense = false;
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
    pub(super) fn enable_prefetch(&mut self, segment: usize, prefetched_to: usize) {
        self.prefetch_segment = segment;
        self.prefetched_to = prefetched_to;
    }

    /// Number of documents of the region.
    #[inline]
    pub(super) fn doc_freq(&self) -> u32 {
        self.df
    }

    /// The term's last document (parsing the whole skip table); `None` on damage.
    pub(super) fn last_doc(&mut self) -> Option<DocId> {
        if self.ensure_entry(self.n_blocks - 1) {
            self.entries.last().map(|e| e.last_doc)
        } else {
            None
        }
    }

    /// Impacts bounding every posting of the region.
    pub(super) fn term_impacts(&self) -> &Impacts {
        &self.term_impacts
    }

    /// Moves to the next document.
    #[inline]
    pub(super) fn advance(&mut self) -> DocId {
        if self.doc == TERMINATED {
            return TERMINATED;
        }
        self.i += 1;
        if self.i < self.n {
            self.doc = if self.dense {
                self.first + next_set(&self.bits, self.doc - self.first + 1)
            } else {
                self.docs[self.i]
            };
            return self.doc;
        }
        let next = self.block + 1;
        if next >= self.n_blocks || !self.ensure_entry(next) {
            self.doc = TERMINATED;
            return TERMINATED;
        }
        self.decode_block(next);
        self.doc
    }

    /// Moves to the first document `>= target`.
    #[inline]
    pub(super) fn seek(&mut self, target: DocId) -> DocId {
        if target <= self.doc {
            return self.doc;
        }
        if self.entry(self.block).last_doc < target {
            self.jump(target);
            if self.shallow_advance(target) == TERMINATED {
                self.doc = TERMINATED;
                return TERMINATED;
            }
            self.decode_block(self.shallow);
            if self.doc == TERMINATED {
                return TERMINATED;
            }
        }
        // The block's last doc is >= target: find it inside the block (a
        // target in the gap before a new block lands on its first).
        if self.dense {
            let p = next_set(&self.bits, target.saturating_sub(self.first));
            self.i = rank(&self.bits, p);
            self.doc = self.first + p;
            return self.doc;
        }
        let i = gallop(&self.docs[..self.n], self.i, target);
        self.i = i;
        self.doc = self.docs[i];
        self.doc
    }

    /// Moves the skip position (not the cursor) to the block holding the
    /// first document `>= target` and returns that block's last document, or
    /// [`TERMINATED`] when no document `>= target` exists.
    pub(super) fn shallow_advance(&mut self, target: DocId) -> DocId {
        let floor = if self.block == NONE { 0 } else { self.block };
        let mut b = self.shallow.max(floor);
        while b > floor && self.entry(b - 1).last_doc >= target {
            b -= 1;
        }
        loop {
            if b >= self.n_blocks || !self.ensure_entry(b) {
                self.shallow = b.min(self.parsed().saturating_sub(1));
                self.shallow_done = true;
                return TERMINATED;
            }
            if self.entry(b).last_doc >= target {
                self.shallow = b;
                self.shallow_done = false;
                return self.entry(b).last_doc;
            }
            b += 1;
        }
    }

    /// Number of the block at the skip position, or `None` past the end.
    #[inline]
    pub(super) fn shallow_block(&self) -> Option<usize> {
        (!self.shallow_done).then_some(self.shallow)
    }

    /// Impacts of the block at the skip position (`None` past the end).
    #[inline]
    pub(super) fn block_impacts(&mut self) -> Option<Impacts> {
        if self.shallow_done {
            return None;
        }
        let e = *self.entry(self.shallow);
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
    pub(super) fn union_into(&mut self, words: &mut [u64]) {
        while self.doc != TERMINATED {
            self.fill_docs();
            let docs = &self.docs[self.i..self.n];
            let span = docs.last().map_or(0, |&l| l - docs[0]) as usize;
            if span < 2 * docs.len() {
                // Dense (32 documents or more per word on average): each
                // word's bits are gathered in a register, then stored.
                let mut word = usize::MAX;
                let mut acc = 0u64;
                for &d in docs {
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
            } else {
                // Sparse: each bit set in place (no branch to mispredict).
                set_bits(words, docs);
            }
            let mut next = self.block + 1;
            // Dense blocks are ORed in as the bit sets they are, undecoded.
            while next < self.n_blocks && self.ensure_entry(next) && self.union_dense(next, words) {
                next += 1;
            }
            if self.error.is_some() {
                break;
            }
            if next >= self.n_blocks || !self.ensure_entry(next) {
                self.doc = TERMINATED;
                break;
            }
            self.decode_block(next);
        }
    }

    /// ORs block `b` (its entry parsed) into `words` when it is a dense
    /// block (see [`codec::DENSE`]); false, with nothing done, when it is
    /// not. A damaged block fails the cursor (and counts as done).
    fn union_dense(&mut self, b: usize, words: &mut [u64]) -> bool {
        // Only full blocks are packed (a term's last may be VBytes).
        let full = b + 1 < self.n_blocks || self.df as usize == BLOCK * self.n_blocks;
        if self.codec == Codec::Direct || !full {
            return false;
        }
        let e = *self.entry(b);
        let prev_last = if b == 0 { None } else { Some(self.entry(b - 1).last_doc) };
        // A first block's values count from the chunk's start.
        let base = if prev_last.is_none() { self.base } else { 0 };
        let start = self.blocks_start + e.block_off as usize;
        let end = start + e.block_len as usize;
        let data = match self.block_win.get(self.file, start..end) {
            Ok(d) => d,
            Err(err) => {
                self.fail(err);
                return true;
            }
        };
        if data.first() != Some(&codec::DENSE) {
            return false;
        }
        let ok = match codec::dense_block(prev_last, data) {
            // (The block's frequencies follow its documents.)
            Some(d) if d.len < data.len() => {
                let first = d.first as u64 + base as u64;
                let last = first + (d.bits.len() as u64 * 8 - d.bits.last().map_or(8, |b| b.leading_zeros()) as u64) - 1;
                if last == e.last_doc as u64 {
                    or_bits_at(words, first, d.bits);
                    true
                } else {
                    false
                }
            }
            _ => false,
        };
        if !ok {
            let err = self.corrupt("doc block");
            self.fail(err);
            return true;
        }
        io::record_needed(e.block_len as u64);
        true
    }

    /// Calls `f` with the runs of documents `<= upto` (below
    /// [`TERMINATED`]) from the current one on and their frequencies, each
    /// run the rest of a decoded block (at most [`BLOCK`] documents); leaves
    /// the cursor on the first document past `upto` (or exhausted).
    #[inline]
    pub(super) fn for_each_run_upto(&mut self, upto: DocId, mut f: impl FnMut(&[DocId], &[u32])) {
        while self.doc <= upto {
            if !self.freqs_ready {
                self.decode_freqs();
                if self.doc == TERMINATED {
                    return;
                }
            }
            self.fill_docs();
            let n = self.n;
            let docs = &self.docs[self.i..n];
            // Runs end at `upto`: the block's documents ascend.
            let len = match docs.last() {
                Some(&last) if last <= upto => docs.len(),
                _ => docs.partition_point(|&d| d <= upto),
            };
            f(&docs[..len], &self.freqs[self.i..self.i + len]);
            let i = self.i + len;
            if i < n {
                self.i = i;
                self.doc = self.docs[i];
                return;
            }
            self.i = n - 1;
            self.advance();
        }
    }

    /// The ids of the current block from the current document on (a
    /// dense block's written out first); empty once exhausted.
    #[inline]
    pub(super) fn block_rest(&mut self) -> &[DocId] {
        if self.doc == TERMINATED {
            return &[];
        }
        self.fill_docs();
        &self.docs[self.i..self.n]
    }

    /// Moves `k` postings ahead inside the current block (`k` below the
    /// length [`LeafCursor::block_rest`] returned).
    #[inline]
    pub(super) fn step_in_block(&mut self, k: usize) {
        self.i += k;
        self.doc = self.docs[self.i];
    }

    /// The document `ahead` postings past the current one, when the
    /// decoded block holds it as an id (not in a dense block).
    #[inline]
    pub(super) fn upcoming(&self, ahead: usize) -> Option<DocId> {
        let j = self.i + ahead;
        (!self.dense && j < self.n).then(|| self.docs[j])
    }

    /// Frequency of the term in the current document.
    #[inline]
    pub(super) fn freq(&mut self) -> u32 {
        if !self.freqs_ready {
            self.decode_freqs();
        }
        self.freqs[self.i]
    }

    /// The error that stopped the cursor, if any.
    pub(super) fn take_error(&mut self) -> Option<Error> {
        self.error.take()
    }

    pub(super) fn fail(&mut self, e: Error) {
        if self.error.is_none() {
            self.error = Some(e);
        }
        self.doc = TERMINATED;
        self.shallow_done = true;
    }

    pub(super) fn corrupt(&self, what: &str) -> Error {
        Error::corrupt(self.file.path(), format!("damaged {what} in a term's postings"))
    }

    /// Decodes the doc ids of block `b` (its entry must be parsed) and moves
    /// the cursor to its first document.
    pub(super) fn decode_block(&mut self, b: usize) {
        let e = *self.entry(b);
        let prev_last = if b == 0 {
            None
        } else {
            Some(self.entry(b - 1).last_doc)
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
        self.dense = false;
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
        } else if n == BLOCK && data.first() == Some(&codec::DENSE) {
            let base = if prev_last.is_none() { self.base } else { 0 };
            match dense_bits(prev_last, base, data, &mut self.bits) {
                Some((first, used)) => {
                    self.first = first;
                    self.dense = true;
                    self.freq_range = start + used..end;
                    self.freqs_ready = false;
                    true
                }
                None => false,
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
        // Raw ids, and a first block's deltas, count from the chunk's start
        // (a dense block's base is added as it is kept).
        let ok = ok
            && (self.dense
                || self.base == 0
                || (prev_last.is_some() && self.codec != Codec::Direct)
                || self.add_base(n));
        let (first, last) = match self.dense {
            true => (self.first, self.first.checked_add(last_set(&self.bits))),
            false => (self.docs[0], Some(self.docs[n - 1])),
        };
        if !ok || last != Some(e.last_doc) || prev_last.is_some_and(|p| first <= p) {
            self.dense = false;
            let err = self.corrupt("doc block");
            return self.fail(err);
        }
        self.block = b;
        self.shallow = self.shallow.max(b);
        self.n = n;
        self.i = 0;
        self.occ_i = 0;
        self.occ_sum = 0;
        self.doc = first;
    }

    /// Writes a dense block's ids into `docs` (for passes that read them
    /// all); the cursor stays where it is.
    #[inline]
    fn fill_docs(&mut self) {
        if self.dense {
            codec::dense_ids(self.first, &self.bits, &mut self.docs);
            self.dense = false;
        }
    }

    /// Adds the chunk's base to the block's `n` documents; false on overflow.
    #[cold]
    pub(super) fn add_base(&mut self, n: usize) -> bool {
        let base = self.base;
        self.docs[..n].iter_mut().all(|d| match d.checked_add(base) {
            Some(v) => {
                *d = v;
                true
            }
            None => false,
        })
    }

    pub(super) fn decode_freqs(&mut self) {
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

/// Reads the dense block at the start of `data` into `bits`; returns its
/// first document (past `prev_last`, plus `base`, the chunk's start for a
/// first block) and the bytes it takes, `None` on damage.
fn dense_bits(prev_last: Option<DocId>, base: DocId, data: &[u8], bits: &mut [u64; 4]) -> Option<(DocId, usize)> {
    let d = codec::dense_block(prev_last, data)?;
    let first = d.first.checked_add(base)?;
    *bits = d.words();
    Some((first, d.len))
}

/// The first set bit of `bits` at or after bit `from` (one must exist: a
/// dense block's last bit is its last document, and callers never pass it).
#[inline]
fn next_set(bits: &[u64; 4], from: u32) -> u32 {
    let mut w = (from >> 6) as usize;
    let mut word = bits[w & 3] & (u64::MAX << (from & 63));
    while word == 0 && w < 3 {
        w += 1;
        word = bits[w];
    }
    64 * w as u32 + word.trailing_zeros()
}

/// How many bits of `bits` are set below bit `p`.
#[inline]
fn rank(bits: &[u64; 4], p: u32) -> usize {
    let w = (p >> 6) as usize & 3;
    let below: u32 = bits[..w].iter().map(|b| b.count_ones()).sum();
    (below + (bits[w] & ((1u64 << (p & 63)) - 1)).count_ones()) as usize
}

/// The highest set bit of `bits` (0 when none).
fn last_set(bits: &[u64; 4]) -> u32 {
    bits.iter()
        .rposition(|&w| w != 0)
        .map_or(0, |w| 64 * w as u32 + 63 - bits[w].leading_zeros())
}

/// Sets the bits of `docs` (ascending) in `words`; those past the end are
/// left out. Neighbouring documents often share a word, and each
/// read-modify-write of a word waits for the one before it: four
/// interleaved runs of the documents keep four such chains in flight.
#[inline]
fn set_bits(words: &mut [u64], docs: &[DocId]) {
    let mut set = |d: DocId| {
        if let Some(slot) = words.get_mut((d >> 6) as usize) {
            *slot |= 1 << (d & 63);
        }
    };
    let quarter = docs.len() / 4;
    let (a, rest) = docs.split_at(quarter);
    let (b, rest) = rest.split_at(quarter);
    let (c, rest) = rest.split_at(quarter);
    let (d, tail) = rest.split_at(quarter);
    for i in 0..quarter {
        set(a[i]);
        set(b[i]);
        set(c[i]);
        set(d[i]);
    }
    tail.iter().for_each(|&x| set(x));
}

/// ORs the bit set `bits` (bit `i` of byte `k`: document `first + 8k + i`)
/// into `words`, 64 bits at a time; bits past the end are left out.
#[inline]
fn or_bits_at(words: &mut [u64], first: u64, bits: &[u8]) {
    let mut or = |w: u64, v: u64| {
        if let Some(slot) = usize::try_from(w).ok().and_then(|w| words.get_mut(w)) {
            *slot |= v;
        }
    };
    for (k, chunk) in bits.chunks(8).enumerate() {
        let mut le = [0u8; 8];
        le[..chunk.len()].copy_from_slice(chunk);
        let v = u64::from_le_bytes(le);
        let at = first + 64 * k as u64;
        let (w, shift) = (at >> 6, at & 63);
        or(w, v << shift);
        if shift > 0 {
            or(w + 1, v >> (64 - shift));
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
#[cfg(test)]
mod gallop_tests {
    use super::{gallop, last_set, next_set, or_bits_at, rank, set_bits};
    use rand::{RngExt, SeedableRng};

    #[test]
    fn bit_steps_find_the_next_set_bit_and_its_rank() {
        let mut bits = [0u64; 4];
        let set: Vec<u32> = (0..256).filter(|p| p % 7 == 0 || p % 11 == 3 || *p == 255).collect();
        for &p in &set {
            bits[(p / 64) as usize] |= 1 << (p % 64);
        }
        for from in 0..=255 {
            let want = *set.iter().find(|&&p| p >= from).unwrap();
            assert_eq!(next_set(&bits, from), want, "from {from}");
            assert_eq!(rank(&bits, from), set.iter().filter(|&&p| p < from).count(), "rank {from}");
        }
        assert_eq!(last_set(&bits), 255);
        bits[3] = 0;
        assert_eq!(last_set(&bits), *set.iter().rfind(|&&p| p < 192).unwrap());
    }

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

    #[test]
    fn bits_are_set_as_one_at_a_time_would() {
        let mut rng = rand_pcg::Pcg64::seed_from_u64(11);
        for case in 0..400 {
            let universe = rng.random_range(1..2000u32);
            let words_len = (universe as usize).div_ceil(64);
            let n = rng.random_range(0..140usize);
            let gap = rng.random_range(1..40u32);
            let mut docs = Vec::new();
            let mut at = rng.random_range(0..100u32);
            for _ in 0..n {
                docs.push(at);
                at += rng.random_range(1..=gap);
            }
            let before: Vec<u64> = (0..words_len).map(|_| rng.random::<u64>() & rng.random::<u64>()).collect();
            let mut want = before.clone();
            for &d in &docs {
                if let Some(w) = want.get_mut((d / 64) as usize) {
                    *w |= 1 << (d % 64);
                }
            }
            let mut got = before.clone();
            set_bits(&mut got, &docs);
            assert_eq!(got, want, "set_bits case {case}");

            let first = rng.random_range(0..universe as u64 + 70);
            let bytes: Vec<u8> = (0..rng.random_range(0..33)).map(|_| rng.random()).collect();
            let mut want = before.clone();
            for (k, &b) in bytes.iter().enumerate() {
                for i in 0..8 {
                    let d = first + 8 * k as u64 + i;
                    if b >> i & 1 == 1 {
                        if let Some(w) = want.get_mut((d / 64) as usize) {
                            *w |= 1 << (d % 64);
                        }
                    }
                }
            }
            let mut got = before;
            or_bits_at(&mut got, first, &bytes);
            assert_eq!(got, want, "or_bits_at case {case}");
        }
    }
}
