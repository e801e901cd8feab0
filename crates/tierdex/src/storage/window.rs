//! A reader's window on a file: the whole pages it last loaded, so a cursor
//! moving forward in small steps (skip entries, blocks, position blocks)
//! touches storage once per page, on every tier.

use std::ops::Range;

use crate::error::Result;
use crate::storage::file::{IndexFile, PAGE_SIZE};
use crate::storage::io;

/// The pages `start..end` of one file: on resident tiers only the bounds
/// (the bytes stay in the mapping), on other tiers a verified copy.
#[derive(Debug, Default)]
pub struct PageWindow {
    start: usize,
    end: usize,
    buf: Vec<u8>,
}

impl PageWindow {
    /// An empty window.
    pub fn new() -> Self {
        Self::default()
    }

    /// The bytes of `range` of `file`, loading the pages that cover it when
    /// they are not in the window (counted as one request).
    #[inline]
    pub fn get<'a>(&'a mut self, file: &'a IndexFile, range: Range<usize>) -> Result<&'a [u8]> {
        if range.start >= self.start && range.end <= self.end {
            return Ok(match file.resident() {
                Some(all) => &all[range],
                None => &self.buf[range.start - self.start..range.end - self.start],
            });
        }
        self.load(file, range)
    }

    /// The bytes from `range.start` to as far as the window reaches (at
    /// most `limit`, at least `range.end`), loading `range` when the window
    /// does not hold it: what a reader parsing many small records takes in
    /// one call without reading a page more than [`PageWindow::get`] would.
    #[inline]
    pub fn get_extended<'a>(&'a mut self, file: &'a IndexFile, range: Range<usize>, limit: usize) -> Result<&'a [u8]> {
        if !(range.start >= self.start && range.end <= self.end) {
            self.load(file, range.clone())?;
        }
        let end = self.end.min(limit).max(range.end);
        if range.is_empty() || end > self.end {
            return self.get(file, range);
        }
        Ok(match file.resident() {
            Some(all) => &all[range.start..end],
            None => &self.buf[range.start - self.start..end - self.start],
        })
    }

    #[cold]
    fn load<'a>(&'a mut self, file: &'a IndexFile, range: Range<usize>) -> Result<&'a [u8]> {
        if range.is_empty() {
            return file.bytes_or_empty(range);
        }
        match file.resident() {
            Some(_) => {
                let data = file.bytes(range.clone())?;
                self.start = range.start / PAGE_SIZE * PAGE_SIZE;
                self.end = (range.end.div_ceil(PAGE_SIZE) * PAGE_SIZE).min(file.len());
                io::record_request((self.end - self.start) as u64, 1);
                Ok(data)
            }
            None => {
                file.check_bounds(&range)?;
                // Room for a read straddling two pages from the start, so
                // small reads never reallocate later.
                if self.buf.capacity() < 2 * PAGE_SIZE {
                    self.buf.reserve(2 * PAGE_SIZE);
                }
                self.start = file.load_pages(range.clone(), &mut self.buf)?;
                self.end = self.start + self.buf.len();
                Ok(&self.buf[range.start - self.start..range.end - self.start])
            }
        }
    }

    /// Forgets the window.
    pub fn clear(&mut self) {
        self.start = 0;
        self.end = 0;
    }
}
