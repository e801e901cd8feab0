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

use crate::codec::{self, BLOCK};
use crate::error::Error;
use crate::layout::impacts::Impacts;
use crate::schema::{DocId, TERMINATED};
use crate::storage::IndexFile;
use crate::termdict::TermInfo;

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
    /// Where the block's impacts start in the skip table (decoded only when
    /// a bound is asked for); `u32::MAX`: the term's impacts.
    impacts_at: u32,
}

/// Reads 128-value blocks of `W` parallel arrays (positions: 1, offsets: 2).
struct PackedStream<const W: usize> {
    section: usize,
    section_len: usize,
    total: u64,
    cur: u64,
    next_off: usize,
    vals: [[u32; BLOCK]; W],
}

impl<const W: usize> PackedStream<W> {
    fn new(section: usize, section_len: usize, total: u64) -> Self {
        PackedStream {
            section,
            section_len,
            total,
            cur: u64::MAX,
            next_off: 0,
            vals: [[0; BLOCK]; W],
        }
    }

    fn full_blocks(&self) -> u64 {
        self.total / BLOCK as u64
    }

    fn corrupt(file: &IndexFile, what: &str) -> Error {
        Error::corrupt(file.path(), format!("damaged {what} block"))
    }

    /// Byte size of the full block at `off`.
    fn full_block_len(&self, file: &IndexFile, off: usize) -> Result<usize, Error> {
        let mut len = 0;
        for _ in 0..W {
            let at = self.section + off + len;
            let bits = file.bytes(at..at + 1)?[0];
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
        if b < self.full_blocks() {
            let mut at = self.section + off;
            for w in 0..W {
                let end = (at + 1 + 16 * 32).min(self.section + self.section_len);
                let data = file.bytes(at..end)?;
                let used =
                    codec::unpack_block(data, &mut self.vals[w]).ok_or_else(|| Self::corrupt(file, "position"))?;
                at += used;
            }
            self.next_off = at - self.section;
        } else {
            let count = (self.total - b * BLOCK as u64) as usize;
            let data = file.bytes(self.section + off..self.section + self.section_len)?;
            let mut pos = 0;
            for i in 0..count {
                for w in 0..W {
                    self.vals[w][i] = codec::read_u32(data, &mut pos).ok_or_else(|| Self::corrupt(file, "position"))?;
                }
            }
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

/// A cursor over one term's postings in one segment.
pub struct TermCursor<'a> {
    file: &'a IndexFile,
    df: u32,
    n_blocks: usize,
    term_impacts: Impacts,
    skip: &'a [u8],
    skip_pos: usize,
    blocks_start: usize,
    entries: Vec<SkipEntry>,
    shallow: usize,
    shallow_done: bool,
    block: usize,
    docs: [DocId; BLOCK],
    freqs: [u32; BLOCK],
    freq_data: &'a [u8],
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
    error: Option<Error>,
}

impl<'a> TermCursor<'a> {
    /// Opens the term described by `info` in the postings `file`, positioned
    /// on its first document.
    pub fn open(file: &'a IndexFile, info: &TermInfo) -> Result<TermCursor<'a>, Error> {
        let r = &info.region;
        let start = usize::try_from(info.offset).map_err(|_| Error::corrupt(file.path(), "term offset too large"))?;
        let zone_end = start
            .checked_add(r.zone_len as usize)
            .filter(|&e| e + r.pos_len as usize + r.off_len as usize <= file.len())
            .ok_or_else(|| Error::corrupt(file.path(), "term region beyond the end of the postings file"))?;
        if r.doc_freq == 0 {
            return Err(Error::corrupt(file.path(), "term with no documents"));
        }
        let bad = || Error::corrupt(file.path(), format!("damaged term header at byte {start}"));
        let head = file.bytes(start..zone_end.min(start + 64))?;
        let mut pos = 0;
        let term_impacts = Impacts::read(head, &mut pos).ok_or_else(bad)?;
        let n_blocks = (r.doc_freq as usize).div_ceil(BLOCK);
        let (skip, blocks_start) = if n_blocks == 1 {
            // The single "skip entry" is the last doc, right after the header.
            let skip_start = start + pos;
            let mut p = pos;
            codec::read_u32(head, &mut p).ok_or_else(bad)?;
            (file.bytes(skip_start..start + p)?, start + p)
        } else {
            let skip_len = codec::read_u32(head, &mut pos).ok_or_else(bad)? as usize;
            let skip_start = start + pos;
            let blocks_start = skip_start
                .checked_add(skip_len)
                .filter(|&e| e <= zone_end)
                .ok_or_else(bad)?;
            (file.bytes(skip_start..blocks_start)?, blocks_start)
        };
        let pos_start = zone_end;
        let off_start = pos_start + r.pos_len as usize;
        let mut c = TermCursor {
            file,
            df: r.doc_freq,
            n_blocks,
            term_impacts,
            skip,
            skip_pos: 0,
            blocks_start,
            entries: Vec::new(),
            shallow: 0,
            shallow_done: false,
            block: NONE,
            docs: [0; BLOCK],
            freqs: [0; BLOCK],
            freq_data: &[],
            freqs_ready: false,
            n: 0,
            i: 0,
            doc: 0,
            occ_i: 0,
            occ_sum: 0,
            positions: PackedStream::new(pos_start, r.pos_len as usize, r.total_term_freq),
            offsets: PackedStream::new(off_start, r.off_len as usize, r.total_term_freq),
            error: None,
        };
        if n_blocks == 1 {
            let mut p = 0;
            let last_doc = codec::read_u32(c.skip, &mut p).ok_or_else(bad)?;
            c.entries.push(SkipEntry {
                last_doc,
                block_off: 0,
                block_len: (zone_end - blocks_start) as u32,
                pos_index: 0,
                pos_byte: 0,
                off_byte: 0,
                impacts_at: u32::MAX,
            });
            c.skip_pos = c.skip.len();
        }
        if !c.ensure_entry(0) {
            return Err(c.error.take().unwrap_or_else(bad));
        }
        c.decode_block(0);
        if let Some(e) = c.error.take() {
            return Err(e);
        }
        Ok(c)
    }

    /// Number of documents containing the term.
    pub fn doc_freq(&self) -> u32 {
        self.df
    }

    /// Impacts bounding every posting of the term.
    pub fn term_impacts(&self) -> &Impacts {
        &self.term_impacts
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
        // The block's last doc is >= target, so the scan stops inside it.
        let mut i = self.i;
        while self.docs[i] < target {
            i += 1;
        }
        self.i = i;
        self.doc = self.docs[i];
        self.doc
    }

    /// Moves the skip position (not the cursor) to the block holding the
    /// first document `>= target` and returns that block's last document, or
    /// [`TERMINATED`] when no document `>= target` exists.
    pub fn shallow_advance(&mut self, target: DocId) -> DocId {
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
        (!self.shallow_done).then_some(self.shallow)
    }

    /// Impacts of the block at the skip position (`None` past the end).
    #[inline]
    pub fn block_impacts(&mut self) -> Option<Impacts> {
        if self.shallow_done {
            return None;
        }
        let at = self.entries[self.shallow].impacts_at;
        if at == u32::MAX {
            return Some(self.term_impacts);
        }
        let mut pos = at as usize;
        match Impacts::read(self.skip, &mut pos) {
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
        let res = self.positions.read(self.file, start, count, hint, |[delta]| {
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
        let res = self.offsets.read(self.file, start, count, hint, |[gap, len]| {
            let s = end.wrapping_add(gap);
            end = s.wrapping_add(len);
            out.push((s, end));
        });
        if let Err(e) = res {
            self.fail(e);
            out.clear();
        }
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
        let (data, pos) = (self.skip, &mut self.skip_pos);
        let prev = self.entries.last();
        let last_doc = prev
            .map_or(0, |p| p.last_doc)
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
        let impacts_len = *data.get(*pos)? as usize;
        let impacts_at = u32::try_from(*pos + 1).ok()?;
        *pos += 1 + impacts_len;
        if *pos > data.len() {
            return None;
        }
        let block_off = prev.map_or(0, |p| p.block_off + p.block_len as u64);
        if prev.is_some_and(|p| p.last_doc >= last_doc) {
            return None;
        }
        Some(SkipEntry {
            last_doc,
            block_off,
            block_len,
            pos_index,
            pos_byte,
            off_byte,
            impacts_at,
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
        let data = match self.file.bytes(start..start + e.block_len as usize) {
            Ok(d) => d,
            Err(err) => return self.fail(err),
        };
        let n = if b + 1 == self.n_blocks {
            self.df as usize - BLOCK * (self.n_blocks - 1)
        } else {
            BLOCK
        };
        let ok = if n == BLOCK {
            match codec::unpack_sorted_block(prev_last, data, &mut self.docs) {
                Some(used) => {
                    self.freq_data = &data[used..];
                    self.freqs_ready = false;
                    true
                }
                None => false,
            }
        } else {
            self.decode_tail(data, prev_last, n).is_some()
        };
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

    fn decode_tail(&mut self, data: &[u8], prev_last: Option<DocId>, n: usize) -> Option<()> {
        let mut pos = 0;
        let mut prev = prev_last;
        for slot in self.docs.iter_mut().take(n) {
            let delta = codec::read_u32(data, &mut pos)?;
            let d = match prev {
                Some(p) => p.checked_add(delta)?.checked_add(1)?,
                None => delta,
            };
            *slot = d;
            prev = Some(d);
        }
        for slot in self.freqs.iter_mut().take(n) {
            *slot = codec::read_u32(data, &mut pos)?.checked_add(1)?;
        }
        self.freqs_ready = true;
        Some(())
    }

    fn decode_freqs(&mut self) {
        match codec::unpack_block(self.freq_data, &mut self.freqs) {
            Some(_) => {
                for f in self.freqs.iter_mut() {
                    *f += 1;
                }
                self.freqs_ready = true;
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
