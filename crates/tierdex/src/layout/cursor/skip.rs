//! The skip table of a region: one entry per 128-document block (its last
//! document, where its doc/freq block, positions, offsets and filter groups
//! start, its impacts), parsed lazily as far as the cursor needs.

use crate::codec;
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

impl LeafCursor<'_> {
    /// Parses skip entries up to `idx`; false past the end or on damage.
    pub(super) fn ensure_entry(&mut self, idx: usize) -> bool {
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

    pub(super) fn parse_entry(&mut self) -> Option<SkipEntry> {
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
}
