//! STAND-IN until the direct-io branch lands: same API, plain `pread`, no
//! pool. Replaced wholesale by the O_DIRECT + io_uring implementation.

use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};

/// Counters of what a read cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoCounts {
    /// Bytes transferred from the device.
    pub bytes_read: u64,
    /// Read operations submitted.
    pub ios: u64,
}

/// Statistics of a [`BufferPool`].
#[derive(Debug, Clone, Copy, Default)]
pub struct PoolStats {
    /// Pages found resident.
    pub hits: u64,
    /// Pages read from the device.
    pub misses: u64,
    /// Pages evicted.
    pub evictions: u64,
    /// Pages resident now.
    pub resident_pages: usize,
}

/// A bounded pool of page frames (stand-in: holds nothing).
pub struct BufferPool {
    bytes: usize,
}

impl BufferPool {
    /// A pool of `bytes`.
    pub fn new(bytes: usize) -> Result<Arc<BufferPool>> {
        Ok(Arc::new(BufferPool { bytes }))
    }
    /// Capacity in bytes.
    pub fn capacity_bytes(&self) -> usize {
        self.bytes
    }
    /// Statistics.
    pub fn stats(&self) -> PoolStats {
        PoolStats::default()
    }
}

/// A file read through a [`BufferPool`].
pub struct DirectFile {
    file: std::fs::File,
    path: PathBuf,
    len: u64,
}

impl DirectFile {
    /// Opens `path`.
    pub fn open(path: &Path, _pool: Arc<BufferPool>) -> Result<DirectFile> {
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        Ok(DirectFile {
            file,
            path: path.to_path_buf(),
            len,
        })
    }
    /// File length.
    pub fn len(&self) -> u64 {
        self.len
    }
    /// True for an empty file.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Copies `range` into `out`.
    pub fn read_into(&self, range: Range<u64>, out: &mut Vec<u8>) -> Result<IoCounts> {
        if range.end > self.len || range.start > range.end {
            return Err(Error::InvalidArgument(format!(
                "read beyond the end of {}",
                self.path.display()
            )));
        }
        out.clear();
        out.resize((range.end - range.start) as usize, 0);
        self.file
            .read_exact_at(out, range.start)
            .map_err(|e| Error::io(&self.path, e))?;
        Ok(IoCounts {
            bytes_read: range.end - range.start,
            ios: 1,
        })
    }
    /// Prefetch (stand-in: nothing).
    pub fn prefetch(&self, _ranges: &[Range<u64>]) -> Result<IoCounts> {
        Ok(IoCounts::default())
    }
}
