//! A region's phrase filters (DESIGN §4): the `after` and `before`
//! sections, read a 128-document group at a time, only for the candidates a
//! phrase tests.

use crate::bloom::{self, Direction, FilterShape, Probe};
use crate::error::Error;
use crate::schema::TERMINATED;
use crate::storage::{io, PageWindow};

use super::leaf::LeafCursor;

/// The term's phrase filters: where their sections are, and the group of
/// the current block per direction once a test has asked for it.
pub(super) struct Filters {
    /// `None`: the term has no filters.
    pub(super) shape: Option<FilterShape>,
    /// File offset and length of the `after` and `before` sections.
    pub(super) section: [(usize, usize); 2],
    /// Block whose group is loaded, per direction.
    pub(super) block: [usize; 2],
    pub(super) bitmap: [u128; 2],
    /// File offset of the loaded group's first filter.
    pub(super) data: [usize; 2],
    pub(super) win: [PageWindow; 2],
}

fn side(dir: Direction) -> usize {
    match dir {
        Direction::After => 0,
        Direction::Before => 1,
    }
}

impl LeafCursor<'_> {
    /// Whether the term has phrase filters in this segment.
    pub(super) fn has_filters(&self) -> bool {
        self.filters.shape.is_some()
    }

    /// Whether the current document's `dir` filter may hold the term of
    /// `probe` (false: the term certainly is not a neighbour there). True
    /// when the term has no filters. An empty filter costs one bit test, and
    /// nothing allocates; a read error stops the cursor (and answers false).
    #[inline]
    pub(super) fn filter_may_contain(&mut self, dir: Direction, probe: &Probe) -> bool {
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
    pub(super) fn copy_filter(&mut self, dir: Direction, out: &mut Vec<u8>) -> bool {
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
    pub(super) fn current_filter(&mut self, s: usize, shape: FilterShape) -> Result<Option<&[u8]>, Error> {
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
    pub(super) fn load_group(&mut self, s: usize, shape: FilterShape) -> Result<(), Error> {
        let (section, len) = self.filters.section[s];
        let start = section + self.entry(self.block).filter_byte[s] as usize;
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
}
