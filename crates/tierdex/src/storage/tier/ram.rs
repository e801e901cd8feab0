//! The `ram` tier: the whole file read into anonymous memory at open (the
//! DRAM tier), optionally on transparent huge pages.

use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::FileSource;
use crate::error::{Error, Result};

/// A file held in memory.
pub(super) enum Ram {
    Heap(Box<[u8]>),
    Huge(memmap2::MmapMut),
}

impl Ram {
    /// The first `len` bytes of `file` in memory (on huge pages if asked).
    pub(super) fn read(path: &Path, file: &File, len: usize, huge_pages: bool) -> Result<Ram> {
        if huge_pages && len > 0 {
            let mut map = memmap2::MmapMut::map_anon(len).map_err(|e| Error::io(path, e))?;
            #[cfg(target_os = "linux")]
            let _ = map.advise(memmap2::Advice::HugePage);
            file.read_exact_at(&mut map, 0).map_err(|e| Error::io(path, e))?;
            return Ok(Ram::Huge(map));
        }
        let mut bytes = vec![0u8; len];
        file.read_exact_at(&mut bytes, 0).map_err(|e| Error::io(path, e))?;
        Ok(Ram::Heap(bytes.into_boxed_slice()))
    }
}

impl FileSource for Ram {
    fn resident(&self) -> Option<&[u8]> {
        Some(match self {
            Ram::Heap(b) => b,
            Ram::Huge(m) => m,
        })
    }

    fn load(&self, _range: Range<u64>, _buf: &mut Vec<u8>) -> Result<(u64, u64)> {
        Err(Error::Internal(
            "the ram tier loads no pages: its files are resident".into(),
        ))
    }

    fn prefetch(&self, _ranges: &[Range<u64>]) -> Result<(u64, u64)> {
        Ok((0, 0))
    }
}
