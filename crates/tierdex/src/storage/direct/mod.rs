//! The `direct` storage tier's I/O core: O_DIRECT reads batched through
//! io_uring into a bounded, shared, user-space [`BufferPool`] (DESIGN §3).
//!
//! Nothing is cached outside the pool: files are opened with `O_DIRECT`, so
//! the page cache is bypassed, and every byte a reader gets was copied from a
//! pool frame (or, when the pool is exhausted, from scratch memory private to
//! the call). This layer only moves bytes; index files' checksums are checked
//! by the layer above.
//!
//! # How a read goes
//!
//! [`DirectFile::read_into`] covers its range with 4 KiB pages and, under the
//! pool's lock, pins every page that is resident, and claims a frame (CLOCK
//! eviction) in the `Loading` state for every page that is not. The lock is
//! then released; runs of consecutive missing pages become one read each (a
//! `Read` into contiguous memory or a `Readv` over the frames), and all the
//! reads of the call go to this thread's io_uring as one batch (several if
//! more than the ring's 128 entries are needed), with a single
//! `submit_and_wait`. The completions are checked (errors, short reads are
//! resubmitted from the last whole page), the loaded frames are published
//! under the lock, the reader waits for pages another reader was loading,
//! copies everything out without the lock, and unpins.
//!
//! # Concurrency
//!
//! One mutex guards the page map and frame bookkeeping; it is never held
//! across device I/O or copies. A page has at most one frame: the first reader
//! to miss maps it `Loading`, later readers pin that frame and wait on a
//! condition variable. Each reader publishes its own loads before it waits
//! for anyone else's, so waits cannot form a cycle. Pinned frames are never
//! evicted; when every frame is pinned, a reader does not wait for a frame but
//! reads the page into private scratch memory (so a request larger than the
//! pool, or many concurrent readers on a tiny pool, never deadlock); requests
//! larger than the pool are also processed in pool-sized windows.

mod buf;
mod io;
mod pool;

#[cfg(test)]
mod bench;
#[cfg(test)]
mod tests;

use std::fs::File;
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustc_hash::FxHashSet;

pub use pool::{BufferPool, PoolStats, MIN_POOL_PAGES};

use buf::AlignedBuf;
use io::ReadOp;
use pool::{Failure, Slot};

use crate::error::{Error, Result};

/// Size of a pool frame, and the alignment of every direct read.
pub const PAGE: usize = 4096;

/// Most pages one window of a read covers (windows are also at most the pool's size).
const MAX_WINDOW_PAGES: usize = 8192;

/// Counters of what a read cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoCounts {
    /// Bytes transferred from the device.
    pub bytes_read: u64,
    /// Read operations submitted.
    pub ios: u64,
}

impl std::ops::AddAssign for IoCounts {
    fn add_assign(&mut self, other: IoCounts) {
        self.bytes_read += other.bytes_read;
        self.ios += other.ios;
    }
}

/// How a [`DirectFile`] submits its reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum IoEngine {
    /// io_uring, one ring per thread, all reads of a call in flight at once;
    /// falls back to `Pread` (with a one-time warning) where io_uring cannot be set up.
    #[default]
    IoUring,
    /// One synchronous `preadv` after the other.
    Pread,
}

/// True when the calling thread submits reads through io_uring (sets its ring up if needed).
pub fn io_uring_available() -> bool {
    io::io_uring_available()
}

/// A file read with O_DIRECT through a [`BufferPool`]; nothing is cached outside the pool.
pub struct DirectFile {
    path: PathBuf,
    file: File,
    len: u64,
    id: u64,
    pool: Arc<BufferPool>,
    direct: bool,
    engine: IoEngine,
}

impl std::fmt::Debug for DirectFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectFile")
            .field("path", &self.path)
            .field("len", &self.len)
            .field("direct", &self.direct)
            .field("engine", &self.engine)
            .finish()
    }
}

impl DirectFile {
    /// Opens `path` for reading with O_DIRECT through `pool`, reading with io_uring.
    ///
    /// If the filesystem refuses O_DIRECT (e.g. some tmpfs), the file is opened
    /// normally with a warning, and the pages it reads are dropped from the page
    /// cache after each read (`posix_fadvise(DONTNEED)`).
    pub fn open(path: &Path, pool: Arc<BufferPool>) -> Result<DirectFile> {
        DirectFile::open_with(path, pool, IoEngine::IoUring)
    }

    /// [`DirectFile::open`] with a choice of how reads are submitted.
    pub fn open_with(path: &Path, pool: Arc<BufferPool>, engine: IoEngine) -> Result<DirectFile> {
        let (file, direct) = match open_direct(path) {
            Ok(file) => (file, true),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                tracing::warn!(
                    "{} does not support O_DIRECT; reading it through the page cache and dropping what is read",
                    path.display()
                );
                (File::open(path).map_err(|e| Error::io(path, e))?, false)
            }
            Err(e) => return Err(Error::io(path, e)),
        };
        let meta = file.metadata().map_err(|e| Error::io(path, e))?;
        if !meta.is_file() {
            return Err(Error::InvalidArgument(format!(
                "{} is not a regular file",
                path.display()
            )));
        }
        Ok(DirectFile {
            path: path.to_path_buf(),
            file,
            len: meta.len(),
            id: pool.new_file_id(),
            pool,
            direct,
            engine,
        })
    }

    /// Path of the file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Length of the file in bytes (as it was when opened).
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when the file is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True when the file was opened with O_DIRECT (false after the page-cache fallback).
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    /// How reads are submitted (io_uring may still fall back to pread on a thread that cannot set a ring up).
    pub fn engine(&self) -> IoEngine {
        self.engine
    }

    /// The pool the file reads through.
    pub fn pool(&self) -> &Arc<BufferPool> {
        &self.pool
    }

    /// Copies bytes `range` of the file into `out` (cleared first). Pages already in the pool are copied from it;
    /// missing pages are read from the device — contiguous missing pages as one read, and all the reads of one
    /// call submitted to io_uring in one batch with many operations outstanding — then inserted into the pool.
    ///
    /// A range that does not fit in the pool is read in pool-sized windows.
    /// A range beyond the end of the file is an [`Error::InvalidArgument`].
    pub fn read_into(&self, range: Range<u64>, out: &mut Vec<u8>) -> Result<IoCounts> {
        out.clear();
        self.check_range(&range)?;
        let mut counts = IoCounts::default();
        if range.is_empty() {
            return Ok(counts);
        }
        let len = usize::try_from(range.end - range.start)
            .map_err(|_| Error::InvalidArgument(format!("a read of {} bytes is too large", range.end - range.start)))?;
        out.try_reserve_exact(len)
            .map_err(|_| Error::InvalidArgument(format!("cannot allocate {len} bytes for a read")))?;
        let first = range.start / PAGE as u64;
        let end = range.end.div_ceil(PAGE as u64);
        let window = self.pool.capacity_pages().min(MAX_WINDOW_PAGES) as u64;
        let mut start = first;
        while start < end {
            let stop = end.min(start + window);
            self.read_window(start..stop, &range, out, &mut counts)?;
            start = stop;
        }
        debug_assert_eq!(out.len(), len);
        Ok(counts)
    }

    /// Makes the pages of all `ranges` resident (prefetch), submitting every missing run in one batch. Best effort
    /// when the ranges exceed the pool (then it stops early, in the order of `ranges`), never an error for that.
    ///
    /// A range beyond the end of the file is an [`Error::InvalidArgument`].
    pub fn prefetch(&self, ranges: &[Range<u64>]) -> Result<IoCounts> {
        for range in ranges {
            self.check_range(range)?;
        }
        // The distinct pages, in the order the ranges name them, as many as the pool holds.
        let limit = self.pool.capacity_pages();
        let mut seen = FxHashSet::default();
        let mut pages = Vec::new();
        'ranges: for range in ranges.iter().filter(|r| !r.is_empty()) {
            for page in range.start / PAGE as u64..range.end.div_ceil(PAGE as u64) {
                if pages.len() == limit {
                    break 'ranges;
                }
                if seen.insert(page) {
                    pages.push(page);
                }
            }
        }
        let loads = self.pool.acquire_prefetch(self.id, &pages);
        let frames: Vec<u32> = loads.iter().map(|&(_, f)| f).collect();
        let mut guard = Pins::new(&self.pool, frames.clone(), frames);
        let mut sorted = loads;
        sorted.sort_unstable_by_key(|&(page, _)| page);
        let mut ops: Vec<ReadOp> = Vec::new();
        let mut prev = None;
        for &(page, f) in &sorted {
            self.add_to_run(&mut ops, &mut prev, page, self.pool.frame_ptr(f));
        }
        let (counts, err) = io::read_all(self.file.as_raw_fd(), self.engine, &mut ops);
        self.after_reads(&ops);
        let failure = err.as_ref().map(Failure::of);
        // Publish and unpin in one go.
        self.pool.finish(&guard.unpublished, failure, &guard.pinned, &[]).ok();
        guard.disarm();
        match err {
            Some(e) => Err(Error::io(&self.path, e)),
            None => Ok(counts),
        }
    }

    fn check_range(&self, range: &Range<u64>) -> Result<()> {
        if range.start > range.end || range.end > self.len {
            return Err(Error::InvalidArgument(format!(
                "read of bytes {}..{} of {}, which is {} bytes long",
                range.start,
                range.end,
                self.path.display(),
                self.len
            )));
        }
        Ok(())
    }

    /// Adds page `page`, read into `target`, to the last op if it extends its
    /// run of consecutive pages, else starts a new op.
    fn add_to_run(&self, ops: &mut Vec<ReadOp>, prev: &mut Option<u64>, page: u64, target: *mut u8) {
        let extends =
            *prev == Some(page.wrapping_sub(1)) && ops.last().is_some_and(|op| op.pages() < io::MAX_PAGES_PER_OP);
        if !extends {
            ops.push(ReadOp::new(page * PAGE as u64));
        }
        if let Some(op) = ops.last_mut() {
            op.push(target, self.len);
        }
        *prev = Some(page);
    }

    /// Drops what buffered reads put in the page cache (only without O_DIRECT).
    fn after_reads(&self, ops: &[ReadOp]) {
        if self.direct {
            return;
        }
        for op in ops {
            let (offset, len) = op.file_range();
            // SAFETY: posix_fadvise only takes integers; the fd is open for the
            // lifetime of `self`. Exercised by the O_DIRECT-refused test.
            unsafe {
                libc::posix_fadvise(
                    self.file.as_raw_fd(),
                    offset as libc::off_t,
                    len as libc::off_t,
                    libc::POSIX_FADV_DONTNEED,
                );
            }
        }
    }

    /// Reads pages `pages` (at most a pool's worth), appending the part of
    /// `range` they hold to `out`.
    fn read_window(
        &self,
        pages: Range<u64>,
        range: &Range<u64>,
        out: &mut Vec<u8>,
        counts: &mut IoCounts,
    ) -> Result<()> {
        let slots = self.pool.acquire_read(self.id, pages.clone());
        let mut pinned = Vec::with_capacity(slots.len());
        let mut loads = Vec::new();
        let mut waits = Vec::new();
        let mut bypassed = 0;
        for slot in &slots {
            match *slot {
                Slot::Hit(f) => pinned.push(f),
                Slot::Wait(f) => {
                    pinned.push(f);
                    waits.push(f);
                }
                Slot::Load(f) => {
                    pinned.push(f);
                    loads.push(f);
                }
                Slot::Bypass => bypassed += 1,
            }
        }
        let mut guard = Pins::new(&self.pool, pinned, loads);
        let scratch = AlignedBuf::new(bypassed)
            .ok_or_else(|| Error::InvalidArgument(format!("cannot allocate {bypassed} pages of scratch memory")))?;

        // Where each page's bytes are (for missing pages: where to read them).
        let mut sources: Vec<*const u8> = Vec::with_capacity(slots.len());
        let mut ops: Vec<ReadOp> = Vec::new();
        let mut prev = None;
        let mut next_scratch = 0;
        for (page, slot) in pages.clone().zip(&slots) {
            let target = match *slot {
                Slot::Hit(f) | Slot::Wait(f) => {
                    sources.push(self.pool.frame_ptr(f));
                    continue;
                }
                Slot::Load(f) => self.pool.frame_ptr(f),
                Slot::Bypass => {
                    next_scratch += 1;
                    scratch.page_ptr(next_scratch - 1)
                }
            };
            sources.push(target);
            self.add_to_run(&mut ops, &mut prev, page, target);
        }

        let (got, err) = io::read_all(self.file.as_raw_fd(), self.engine, &mut ops);
        *counts += got;
        self.after_reads(&ops);
        let failure = err.as_ref().map(Failure::of);
        let waited = if guard.unpublished.is_empty() && waits.is_empty() {
            Ok(()) // all hits (or bypasses): nothing to publish or wait for
        } else {
            self.pool.finish(&guard.unpublished, failure, &[], &waits)
        };
        guard.unpublished.clear();
        if let Some(e) = err {
            return Err(Error::io(&self.path, e));
        }
        if let Err(failure) = waited {
            return Err(Error::io(&self.path, failure.to_io_error()));
        }

        for (page, &src) in pages.zip(&sources) {
            let page_start = page * PAGE as u64;
            let lo = (range.start.max(page_start) - page_start) as usize;
            let hi = (range.end.min(page_start + PAGE as u64) - page_start) as usize;
            // SAFETY: `src` is the start of a 4 KiB page-aligned region that holds
            // this page and is not written while we read it: a frame pinned by
            // this call in the `Ready` state (it was `Ready` when pinned, or this
            // call loaded it, or waited until its loader published it `Ready`;
            // pinned frames are never evicted or reloaded), or this call's
            // scratch, whose reads have all completed. `lo <= hi <= PAGE`, and
            // the bytes up to `hi` were written by the read (`range.end <= len`,
            // and the read delivered everything up to the end of the file) or,
            // beyond it, are the zeroed allocation, so they are initialised.
            out.extend_from_slice(unsafe { std::slice::from_raw_parts(src.add(lo), hi - lo) });
        }
        drop(guard);
        Ok(())
    }
}

fn open_direct(path: &Path) -> std::io::Result<File> {
    #[cfg(test)]
    if io::hooks::REFUSE_O_DIRECT.with(|r| r.get()) {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    }
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
}

impl Drop for DirectFile {
    fn drop(&mut self) {
        self.pool.forget_file(self.id);
    }
}

/// Frames a call has pinned, and its loads not yet published. On drop
/// (including an early return) unpublished loads are marked failed, so that
/// no reader waits for them forever, and every pin is released.
struct Pins<'a> {
    pool: &'a BufferPool,
    pinned: Vec<u32>,
    unpublished: Vec<u32>,
}

impl<'a> Pins<'a> {
    fn new(pool: &'a BufferPool, pinned: Vec<u32>, unpublished: Vec<u32>) -> Pins<'a> {
        Pins {
            pool,
            pinned,
            unpublished,
        }
    }

    /// Everything was published and unpinned already.
    fn disarm(&mut self) {
        self.pinned.clear();
        self.unpublished.clear();
    }
}

impl Drop for Pins<'_> {
    fn drop(&mut self) {
        if self.pinned.is_empty() && self.unpublished.is_empty() {
            return;
        }
        if self.unpublished.is_empty() {
            self.pool.release(&self.pinned);
        } else {
            let failure = Failure::of(&std::io::Error::other("the read was abandoned"));
            self.pool
                .finish(&self.unpublished, Some(failure), &self.pinned, &[])
                .ok();
        }
    }
}
