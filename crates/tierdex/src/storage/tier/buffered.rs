//! The `buffered` tier: `pread` through the page cache, no mapping.

use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use super::FileSource;
use crate::error::{Error, Result};

/// A file read with `pread`.
pub(super) struct Buffered {
    path: PathBuf,
    file: File,
}

impl Buffered {
    /// `file` (at `path`) read with `pread`.
    pub(super) fn new(path: &Path, file: File) -> Buffered {
        Buffered {
            path: path.to_path_buf(),
            file,
        }
    }
}

impl FileSource for Buffered {
    fn resident(&self) -> Option<&[u8]> {
        None
    }

    fn load(&self, range: Range<u64>, buf: &mut Vec<u8>) -> Result<(u64, u64)> {
        buf.clear();
        buf.resize((range.end - range.start) as usize, 0);
        self.file
            .read_exact_at(buf, range.start)
            .map_err(|e| Error::io(&self.path, e))?;
        Ok((range.end - range.start, 1))
    }

    fn prefetch(&self, ranges: &[Range<u64>]) -> Result<(u64, u64)> {
        for r in ranges {
            // SAFETY: posix_fadvise only reads its integer arguments; the
            // descriptor is owned by `self.file` and open. Exercised by the
            // tier tests on the buffered tier.
            unsafe {
                libc::posix_fadvise(
                    self.file.as_raw_fd(),
                    r.start as libc::off_t,
                    (r.end - r.start) as libc::off_t,
                    libc::POSIX_FADV_WILLNEED,
                );
            }
        }
        Ok((0, 0))
    }
}
