//! Position and offset streams: 128-value blocks of one or two parallel
//! arrays, read only for the documents whose positions are asked for.

use crate::codec::{self, BLOCK};
use crate::error::Error;
use crate::layout::Codec;
use crate::schema::TERMINATED;
use crate::storage::{io, IndexFile, PageWindow};

use super::leaf::LeafCursor;

/// Most cache lines fetched ahead of one walk over position blocks.
const WALK_PREFETCH_LINES: usize = 64;

/// Reads 128-value blocks of `W` parallel arrays (positions: 1, offsets: 2).
pub(super) struct PackedStream<const W: usize> {
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
    pub(super) fn new(codec: Codec, section: usize, section_len: usize, total: u64) -> Self {
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
    pub(super) fn reset(&mut self, codec: Codec, section: usize, section_len: usize, total: u64) {
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

    /// Asks the CPU for the cache lines a walk over `blocks` full blocks
    /// from `off` is expected to touch (each block's length is in its
    /// header, so the walk would otherwise wait on one line after another);
    /// on resident tiers only, at most [`WALK_PREFETCH_LINES`] lines.
    fn prefetch_walk(&self, file: &IndexFile, off: usize, blocks: usize) {
        let Some(all) = file.resident() else {
            return;
        };
        let mean = self.section_len / (self.full_blocks() as usize).max(1);
        let from = self.section + off;
        let to = (from + (blocks + 1) * mean)
            .min(self.section + self.section_len)
            .min(from + WALK_PREFETCH_LINES * 64)
            .min(all.len());
        for at in (from..to).step_by(64) {
            crate::common::prefetch(all[at..].as_ptr());
        }
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
        if block - b >= 2 {
            self.prefetch_walk(file, off, (block - b) as usize);
        }
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
    pub(super) fn read(
        &mut self,
        file: &IndexFile,
        start: u64,
        count: u32,
        hint: (u64, usize),
        mut f: impl FnMut([u32; W]),
    ) -> Result<(), Error> {
        self.read_while(file, start, count, hint, |v| {
            f(v);
            true
        })
    }

    /// [`PackedStream::read`] until `f` returns false: the blocks after
    /// that entry are not decoded.
    pub(super) fn read_while(
        &mut self,
        file: &IndexFile,
        start: u64,
        count: u32,
        hint: (u64, usize),
        mut f: impl FnMut([u32; W]) -> bool,
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
                if !f(v) {
                    return Ok(());
                }
            }
            idx = block * BLOCK as u64 + hi as u64;
        }
        Ok(())
    }
}

impl LeafCursor<'_> {
    /// Positions of the term in the current document, into `out` (cleared).
    pub(super) fn positions(&mut self, out: &mut Vec<u32>) {
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

    /// Calls `f` with each position of the term in the current document,
    /// in order, until it returns false (the blocks after are not decoded).
    #[inline]
    pub(super) fn positions_while(&mut self, mut f: impl FnMut(u32) -> bool) {
        let Some((start, count, hint)) = self.occurrences(true) else {
            return;
        };
        let mut pos = 0u32;
        let res = self.positions.read_while(self.pos_file, start, count, hint, |[delta]| {
            pos = pos.wrapping_add(delta);
            f(pos)
        });
        if let Err(e) = res {
            self.fail(e);
        }
    }

    /// Byte offsets `(start, end)` of the term's occurrences in the current
    /// document, into `out` (cleared).
    pub(super) fn offsets(&mut self, out: &mut Vec<(u32, u32)>) {
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

    /// Stream index, count and block hint of the current doc's occurrences.
    pub(super) fn occurrences(&mut self, positions: bool) -> Option<(u64, u32, (u64, usize))> {
        if self.doc == TERMINATED {
            return None;
        }
        if !self.freqs_ready {
            self.decode_freqs();
            if self.doc == TERMINATED {
                return None;
            }
        }
        let e = *self.entry(self.block);
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
}
