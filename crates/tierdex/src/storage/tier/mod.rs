//! The storage tiers (DESIGN §3): where an open file's bytes come from.
//!
//! Each tier is one [`FileSource`] implementation in its own file: `ram`
//! (read into anonymous memory), `mmap` (mapped; the page cache holds what
//! was read), `buffered` (`pread`) and `direct` (O_DIRECT into a bounded
//! buffer pool). [`open`] is the one place a [`Tier`] is turned into a
//! source. Checksums and I/O accounting sit above, in
//! [`IndexFile`](crate::storage::IndexFile), and are dispatched to the
//! source once per page load, never per posting.

mod buffered;
mod direct;
mod mmap;
mod ram;

use std::fs::File;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::storage::direct::{BufferPool, DirectFile};

/// Where the bytes of one open file come from.
pub(crate) trait FileSource: Send + Sync {
    /// The whole file when it lives in memory (`ram`, `mmap`): the same
    /// slice every call, valid as long as the source.
    fn resident(&self) -> Option<&[u8]>;
    /// Loads the whole pages of `range` (page aligned, within the file) into
    /// `buf` (non-resident tiers); returns the bytes requested from storage
    /// and the read operations.
    fn load(&self, range: Range<u64>, buf: &mut Vec<u8>) -> Result<(u64, u64)>;
    /// Asks the tier to bring `ranges` in ahead of use; returns what it read.
    fn prefetch(&self, ranges: &[Range<u64>]) -> Result<(u64, u64)>;
    /// Tells the tier that `range` (whole pages) will not be read again
    /// soon: the `mmap` tier drops it from the process's resident memory
    /// (the page cache keeps it); others hold nothing to drop.
    fn release(&self, _range: Range<u64>) {}
}

/// Opens the first `len` bytes of the file at `path` (its whole length when
/// `None`) as a source on the tier `options` name, `pool` being the direct
/// tier's buffer pool. Returns the file's handle too (its length, reads at
/// open).
pub(crate) fn open(
    path: &Path,
    options: &TierOptions,
    pool: Option<&Arc<BufferPool>>,
    len: Option<usize>,
) -> Result<(File, Box<dyn FileSource>, usize)> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let file_len = file.metadata().map_err(|e| Error::io(path, e))?.len() as usize;
    let len = len.unwrap_or(file_len);
    if len > file_len {
        return Err(Error::corrupt(
            path,
            format!("file is {file_len} bytes, shorter than the {len} expected (truncated)"),
        ));
    }
    let source: Box<dyn FileSource> = match options.tier {
        Tier::Ram => Box::new(ram::Ram::read(path, &file, len, options.huge_pages)?),
        Tier::Mmap => Box::new(mmap::Mapped::map(path, &file, len, options.madvise)?),
        Tier::Buffered => Box::new(buffered::Buffered::new(
            path,
            file.try_clone().map_err(|e| Error::io(path, e))?,
        )),
        Tier::Direct => {
            let pool = pool
                .cloned()
                .ok_or_else(|| Error::Internal("direct storage without a pool".into()))?;
            Box::new(DirectFile::open(path, pool)?)
        }
    };
    Ok((file, source, len))
}

/// Where an opened index's bytes live (DESIGN §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    /// The whole file read into anonymous memory (the DRAM tier).
    Ram,
    /// Mapped; the page cache holds what was read (also the NVM/DAX path).
    #[default]
    Mmap,
    /// `pread` through the page cache, no mapping.
    Buffered,
    /// O_DIRECT reads through io_uring into a bounded buffer pool; nothing
    /// else cached.
    Direct,
}

impl std::str::FromStr for Tier {
    type Err = Error;
    fn from_str(s: &str) -> Result<Tier> {
        match s {
            "ram" => Ok(Tier::Ram),
            "mmap" => Ok(Tier::Mmap),
            "buffered" => Ok(Tier::Buffered),
            "direct" => Ok(Tier::Direct),
            _ => Err(Error::InvalidArgument(format!(
                "unknown tier `{s}` (ram, mmap, buffered, direct)"
            ))),
        }
    }
}

/// Access-pattern advice for the `mmap` tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Madvise {
    /// No advice: the kernel's read-ahead applies (up to `read_ahead_kb`).
    /// Pays off only when the whole index soon sits in the page cache.
    Os,
    /// `MADV_RANDOM`: a fault reads only its page.
    Random,
    /// `MADV_RANDOM`, plus `MADV_WILLNEED` on the prefetch zones of queries
    /// whose every term has a large zone (adaptive prefetch). The default:
    /// queries read what they need, whatever the index's size.
    #[default]
    Adaptive,
}

impl std::str::FromStr for Madvise {
    type Err = Error;
    fn from_str(s: &str) -> Result<Madvise> {
        match s {
            "os" => Ok(Madvise::Os),
            "random" => Ok(Madvise::Random),
            "adaptive" => Ok(Madvise::Adaptive),
            _ => Err(Error::InvalidArgument(format!(
                "unknown madvise policy `{s}` (os, random, adaptive)"
            ))),
        }
    }
}

/// How an index is read: the tier and its settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TierOptions {
    /// The tier.
    pub tier: Tier,
    /// Advice on the `mmap` tier.
    pub madvise: Madvise,
    /// Buffer pool of the `direct` tier, in bytes.
    pub pool_bytes: usize,
    /// Transparent huge pages for the `ram` tier.
    pub huge_pages: bool,
    /// Adaptive prefetch: prefetch when every term's zone is at least this
    /// large (bytes); 0 disables prefetching.
    pub prefetch_threshold: usize,
}

impl Default for TierOptions {
    fn default() -> Self {
        TierOptions {
            tier: Tier::Mmap,
            madvise: Madvise::Adaptive,
            pool_bytes: 128 << 20,
            huge_pages: false,
            prefetch_threshold: 128 << 10,
        }
    }
}

impl TierOptions {
    /// The defaults on `tier`.
    pub fn on(tier: Tier) -> TierOptions {
        TierOptions {
            tier,
            ..TierOptions::default()
        }
    }

    /// True when queries should prefetch zones (see [`Madvise::Adaptive`]):
    /// on `mmap` with adaptive advice, and on `buffered` and `direct`.
    pub fn prefetches(&self) -> bool {
        self.prefetch_threshold > 0
            && match self.tier {
                Tier::Ram => false,
                Tier::Mmap => self.madvise == Madvise::Adaptive,
                Tier::Buffered | Tier::Direct => true,
            }
    }
}
