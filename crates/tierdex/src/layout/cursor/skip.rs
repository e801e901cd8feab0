//! The skip table of a region: one entry per 128-document block (its last
//! document, where its doc/freq block, positions, offsets and filter groups
//! start, its impacts), parsed lazily as far as the cursor needs.

use crate::codec;
use crate::layout::writer::{SKIP_RECORD, SKIP_SPAN};
use crate::schema::DocId;
use crate::storage::io;

use super::leaf::LeafCursor;

/// Longest encoding of one skip entry (seven VBytes, the impacts length
/// byte and at most 255 bytes of impacts).
pub(super) const MAX_ENTRY: usize = 5 + 5 + 10 + 5 + 5 + 5 + 5 + 1 + 255;

pub(super) const NONE: usize = usize::MAX;

#[derive(Debug, Clone, Copy)]
pub(super) struct SkipEntry {
    pub(super) last_doc: DocId,
    /// Offset of the block relative to the first block.
    pub(super) block_off: u64,
    pub(super) block_len: u32,
    /// Index in the position stream of the block's first position.
    pub(super) pos_index: u64,
    /// Byte offset (in the positions section) of the position block holding
    /// `pos_index`; likewise in the offsets section.
    pub(super) pos_byte: u32,
    pub(super) off_byte: u32,
    /// Byte offsets of the block's filter groups in the `after` and
    /// `before` sections.
    pub(super) filter_byte: [u32; 2],
    /// File offset of the block's impacts (decoded only when a bound is
    /// asked for), and their length; `usize::MAX`: the term's impacts.
    pub(super) impacts_at: usize,
    pub(super) impacts_len: u8,
}

/// Entries parsed at once past the one asked for: they come from the same
/// window of skip bytes, so the batch costs no extra read.
const BATCH: usize = 8;

impl LeafCursor<'_> {
    /// Parses skip entries up to `idx` (and a few past it when their bytes
    /// are at hand); false past the end or on damage.
    pub(super) fn ensure_entry(&mut self, idx: usize) -> bool {
        if self.parsed() > idx {
            return true;
        }
        if idx >= self.n_blocks {
            return false;
        }
        let upto = (idx + BATCH).min(self.n_blocks);
        while self.parsed() <= idx {
            let at = self.skip_start + self.skip_pos;
            let end = (at + MAX_ENTRY).min(self.skip_end);
            let file = self.file;
            let has_filters = self.filters.shape.is_some();
            let base = self.base;
            // The window's bytes from `at` on: at least one entry's worth.
            let data = match self.skip_win.get_extended(file, at..end, self.skip_end) {
                Ok(d) => d,
                Err(e) => {
                    self.fail(e);
                    return false;
                }
            };
            let mut used = 0;
            let mut prev = self.entries.last().copied();
            let mut damaged = false;
            while self.entries_from + self.entries.len() < upto {
                let rest = &data[used..];
                // A whole entry must be in view unless the table ends here.
                if rest.len() < MAX_ENTRY && at + data.len() < self.skip_end && used > 0 {
                    break;
                }
                match parse_entry(rest, prev.as_ref(), base, has_filters, at + used) {
                    Some((e, len)) => {
                        used += len;
                        prev = Some(e);
                        self.entries.push(e);
                    }
                    None => {
                        damaged = true;
                        break;
                    }
                }
            }
            self.skip_pos += used;
            io::record_needed(used as u64);
            if damaged && self.parsed() <= idx {
                let err = self.corrupt("skip table");
                self.fail(err);
                return false;
            }
        }
        true
    }
}

impl LeafCursor<'_> {
    /// The parsed entry of block `b`.
    #[inline]
    pub(super) fn entry(&self, b: usize) -> &SkipEntry {
        &self.entries[b - self.entries_from]
    }

    /// Blocks whose entries are parsed (all before it, from `entries_from`).
    #[inline]
    pub(super) fn parsed(&self) -> usize {
        self.entries_from + self.entries.len()
    }

    /// Before a seek to `target` beyond the parsed entries: when the second
    /// level shows whole spans of blocks ending before `target`, starts the
    /// entries again at the last such span's end, a stand-in entry for the
    /// block before it holding the absolute values the next entries' deltas
    /// apply to. The cursor's current block is then that stand-in; the seek
    /// decodes the block it lands in right after.
    pub(super) fn jump(&mut self, target: DocId) {
        if self.skip_records == 0 || self.block == NONE || self.entries.last().is_some_and(|e| e.last_doc >= target) {
            return;
        }
        let parsed = self.parsed();
        // Record k (from 1) starts block k * SKIP_SPAN.
        let mut k = parsed / SKIP_SPAN + 1;
        let mut best: Option<(usize, [u8; SKIP_RECORD])> = None;
        while k <= self.skip_records {
            let at = self.skip_index + (k - 1) * SKIP_RECORD;
            let file = self.file;
            let rec: [u8; SKIP_RECORD] = match self.index_win.get(file, at..at + SKIP_RECORD) {
                Ok(d) => d.try_into().expect("record size"),
                Err(e) => {
                    self.fail(e);
                    return;
                }
            };
            io::record_needed(SKIP_RECORD as u64);
            let prev_last = u32_at(&rec, 8);
            if self.base.checked_add(prev_last).is_none_or(|d| d >= target) {
                break;
            }
            best = Some((k, rec));
            k += 1;
        }
        let Some((k, rec)) = best else {
            return;
        };
        let first = k * SKIP_SPAN;
        if first <= parsed + 1 {
            return;
        }
        let skip_off = u32_at(&rec, 0) as usize;
        if self.skip_start + skip_off >= self.skip_end {
            let err = self.corrupt("skip index");
            self.fail(err);
            return;
        }
        let stand_in = SkipEntry {
            last_doc: self.base + u32_at(&rec, 8),
            block_off: u32_at(&rec, 4) as u64,
            block_len: 0,
            pos_index: u64::from_le_bytes(rec[12..20].try_into().expect("8 bytes")),
            pos_byte: u32_at(&rec, 20),
            off_byte: u32_at(&rec, 24),
            filter_byte: [u32_at(&rec, 28), u32_at(&rec, 32)],
            impacts_at: usize::MAX,
            impacts_len: 0,
        };
        if self.entries.last().is_some_and(|e| e.last_doc >= stand_in.last_doc) {
            let err = self.corrupt("skip index");
            self.fail(err);
            return;
        }
        self.entries.clear();
        self.entries.push(stand_in);
        self.entries_from = first - 1;
        self.skip_pos = skip_off;
        self.block = first - 1;
        self.shallow = first - 1;
        self.shallow_done = false;
    }
}

#[inline]
fn u32_at(rec: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(rec[at..at + 4].try_into().expect("4 bytes"))
}

/// One skip entry from the start of `data` (at file offset `at`) after
/// `prev` (the region's first entry when `None`): the entry and its length
/// in bytes; `None` when the bytes do not make one.
#[inline]
fn parse_entry(
    data: &[u8],
    prev: Option<&SkipEntry>,
    base: DocId,
    has_filters: bool,
    at: usize,
) -> Option<(SkipEntry, usize)> {
    let pos = &mut 0;
    let last_doc = prev
        .map_or(base, |p| p.last_doc)
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
    if has_filters {
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
    Some((
        SkipEntry {
            last_doc,
            block_off,
            block_len,
            pos_index,
            pos_byte,
            off_byte,
            filter_byte,
            impacts_at,
            impacts_len,
        },
        *pos,
    ))
}
