//! The `mmap` tier: the file mapped read-only; the page cache holds what
//! was read (also the NVM/DAX path), with `madvise` as the tier's options say.

use std::fs::File;
use std::ops::Range;
use std::path::Path;

use super::{FileSource, Madvise};
use crate::error::{Error, Result};

/// A mapped file.
pub(super) struct Mapped(memmap2::Mmap);

impl Mapped {
    /// Maps the first `len` bytes of `file` (`len` 0: nothing mapped).
    pub(super) fn map(path: &Path, file: &File, len: usize, madvise: Madvise) -> Result<Mapped> {
        // SAFETY: index files are written once, synced, and never modified
        // while an index is open (new data goes to new files), and a chain
        // file's committed bytes are only rewritten with identical ones
        // (block read-modify-write) or reused one flush after nothing refers
        // to them; the map is read-only, so the slice stays valid for the
        // map's lifetime. Exercised by every test that opens an index with
        // the default tier, `tests/inplace.rs` and the maintenance tests.
        let map = unsafe { memmap2::MmapOptions::new().len(len).map(file) }.map_err(|e| Error::io(path, e))?;
        if madvise != Madvise::Os && len > 0 {
            map.advise(memmap2::Advice::Random).map_err(|e| Error::io(path, e))?;
        }
        Ok(Mapped(map))
    }
}

impl FileSource for Mapped {
    fn resident(&self) -> Option<&[u8]> {
        Some(&self.0)
    }

    fn load(&self, _range: Range<u64>, _buf: &mut Vec<u8>) -> Result<(u64, u64)> {
        Err(Error::Internal(
            "the mmap tier loads no pages: its files are resident".into(),
        ))
    }

    fn prefetch(&self, ranges: &[Range<u64>]) -> Result<(u64, u64)> {
        for r in ranges {
            let r = r.start.min(self.0.len() as u64) as usize..r.end.min(self.0.len() as u64) as usize;
            if !r.is_empty() {
                let _ = self.0.advise_range(memmap2::Advice::WillNeed, r.start, r.len());
            }
        }
        Ok((0, 0))
    }

    fn release(&self, range: Range<u64>) {
        let r = range.start.min(self.0.len() as u64) as usize..range.end.min(self.0.len() as u64) as usize;
        if r.is_empty() {
            return;
        }
        // SAFETY: the map is a shared, read-only mapping of a file that is
        // not modified while open (see `map`); MADV_DONTNEED only drops the
        // process's page table entries for the range, and a later access
        // faults the same bytes back in from the page cache, so every slice
        // handed out stays valid and unchanged. Exercised by
        // `release_drops_resident_pages_and_keeps_the_bytes` and every merge
        // of a large index.
        let _ = unsafe {
            self.0
                .unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, r.start, r.len())
        };
    }
}
