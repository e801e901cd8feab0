//! Page reads of the direct tier: runs of pages read with O_DIRECT through
//! the storage layer's io_uring engine ([`crate::storage::uring`]), with a
//! `preadv` fallback.

use std::io;
use std::os::fd::RawFd;

use io_uring::{opcode, squeue, types};

use super::{IoCounts, IoEngine, PAGE};
use crate::storage::uring::{self, Transfer};

/// Most reads of the direct tier in flight at once (one batch).
pub(super) const RING_ENTRIES: usize = 128;
/// Most pages one read operation covers (longer runs are split).
pub(super) const MAX_PAGES_PER_OP: usize = 256;
/// Resubmissions of one operation in a row that make no page of progress before it fails.
const MAX_STALLS: u32 = 4;

/// One read of consecutive pages of a file into page-sized targets.
pub(super) struct ReadOp {
    /// File offset of the first page (page aligned).
    offset: u64,
    /// One 4 KiB target per page, in file order; each page aligned.
    segs: Vec<libc::iovec>,
    /// Bytes expected: up to the end of the file.
    want: u64,
    /// Bytes confirmed read (a multiple of `PAGE`, or `want`).
    done: u64,
    stalls: u32,
}

impl ReadOp {
    /// An empty read starting at `offset`.
    pub(super) fn new(offset: u64) -> ReadOp {
        debug_assert_eq!(offset % PAGE as u64, 0);
        ReadOp {
            offset,
            segs: Vec::new(),
            want: 0,
            done: 0,
            stalls: 0,
        }
    }

    /// Adds the next page; `target` is the start of a page-aligned 4 KiB buffer
    /// that stays valid and untouched by anyone else until the read completes.
    pub(super) fn push(&mut self, target: *mut u8, file_len: u64) {
        debug_assert_eq!(target as usize % PAGE, 0);
        self.segs.push(libc::iovec {
            iov_base: target.cast(),
            iov_len: PAGE,
        });
        let end = self.offset + (self.segs.len() * PAGE) as u64;
        self.want = end.min(file_len).saturating_sub(self.offset);
    }

    /// Pages in the read.
    pub(super) fn pages(&self) -> usize {
        self.segs.len()
    }

    /// File range the read covers (for `posix_fadvise`).
    pub(super) fn file_range(&self) -> (u64, u64) {
        (self.offset, (self.segs.len() * PAGE) as u64)
    }

    fn is_complete(&self) -> bool {
        self.done >= self.want
    }

    /// Targets still to be read (from the first unconfirmed page).
    fn rest(&self) -> &[libc::iovec] {
        &self.segs[(self.done / PAGE as u64) as usize..]
    }

    /// File offset of the next (re)submission.
    fn next_offset(&self) -> u64 {
        self.offset + self.done
    }

    /// Accounts for a completion of `n` bytes of a submission made at
    /// `next_offset()`. Returns true when the whole read is done. A short read
    /// before the end of the file is resumed from the last whole page it
    /// delivered (O_DIRECT offsets must stay aligned; bytes of a partly
    /// delivered page are simply read again).
    fn advance(&mut self, n: u64) -> io::Result<bool> {
        let total = self.done + n;
        if total >= self.want {
            self.done = self.want;
            return Ok(true);
        }
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "file ended at byte {} while reading up to byte {} (shorter than when opened)",
                    self.offset + total,
                    self.offset + self.want
                ),
            ));
        }
        let aligned = total / PAGE as u64 * PAGE as u64;
        if aligned == self.done {
            self.stalls += 1;
            if self.stalls > MAX_STALLS {
                return Err(io::Error::other(format!(
                    "reads at byte {} keep returning less than a page ({n} bytes)",
                    self.next_offset()
                )));
            }
        } else {
            self.stalls = 0;
            self.done = aligned;
        }
        Ok(false)
    }
}

impl Transfer for ReadOp {
    fn entry(&self, fd: types::Fd) -> squeue::Entry {
        let rest = self.rest();
        let contiguous = rest
            .windows(2)
            .all(|w| w[1].iov_base as usize == w[0].iov_base as usize + PAGE);
        if contiguous {
            opcode::Read::new(fd, rest[0].iov_base.cast(), (rest.len() * PAGE) as u32)
                .offset(self.next_offset())
                .build()
        } else {
            opcode::Readv::new(fd, rest.as_ptr(), rest.len() as u32)
                .offset(self.next_offset())
                .build()
        }
    }

    fn sync(&mut self, fd: RawFd) -> io::Result<u64> {
        let rest = self.rest();
        // SAFETY: `rest` points at `rest.len()` iovecs (at most
        // MAX_PAGES_PER_OP, below IOV_MAX), each naming a page-aligned 4 KiB
        // buffer that the caller reserved for this read (a pinned `Loading`
        // frame no one else touches, or private scratch) and that outlives
        // this synchronous call. Exercised by the pread-fallback tests.
        let n = unsafe { libc::preadv(fd, rest.as_ptr(), rest.len() as libc::c_int, self.next_offset() as i64) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as u64)
    }

    fn advance(&mut self, n: u64) -> io::Result<bool> {
        ReadOp::advance(self, n)
    }

    fn is_complete(&self) -> bool {
        ReadOp::is_complete(self)
    }
}

/// Test hooks: those of the engine ([`crate::storage::uring::hooks`]), and
/// O_DIRECT refusal.
#[cfg(test)]
pub(super) mod hooks {
    use std::cell::Cell;

    pub use crate::storage::uring::hooks::{BATCHES, FAIL_READS, FAIL_RING_SETUP, SHORT_READS};

    thread_local! {
        /// Make O_DIRECT opens on this thread fail with EINVAL, as on a filesystem that refuses it.
        pub static REFUSE_O_DIRECT: Cell<bool> = const { Cell::new(false) };
    }
}

/// True when this thread reads through io_uring (sets the ring up if needed).
pub(super) fn io_uring_available() -> bool {
    uring::available()
}

/// Reads every op of `ops` from `fd`: all at once through this thread's
/// io_uring (in batches of at most [`RING_ENTRIES`] outstanding reads), or
/// one after the other with `preadv` for [`IoEngine::Pread`] or when
/// io_uring is unavailable. Always returns what was transferred, and the
/// first error. When it returns, no read is in flight.
pub(super) fn read_all(fd: RawFd, engine: IoEngine, ops: &mut [ReadOp]) -> (IoCounts, Option<io::Error>) {
    // SAFETY: every op reads into pinned `Loading` frames of the pool (no
    // other reader copies from or reuses a frame in that state) or into
    // scratch owned by the calling frame, both kept until the reads
    // complete; `fd` is borrowed from a `DirectFile` that outlives the call.
    let (counts, err) = unsafe { uring::run(fd, ops, RING_ENTRIES, engine == IoEngine::IoUring) };
    (
        IoCounts {
            bytes_read: counts.bytes,
            ios: counts.ops,
        },
        err,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advance_handles_short_reads() {
        let mut buf = super::super::buf::AlignedBuf::new(3).unwrap();
        let mut op = ReadOp::new(8192);
        for i in 0..3 {
            op.push(buf.page_ptr(i), 8192 + 2 * 4096 + 100);
        }
        assert_eq!(op.want, 2 * 4096 + 100);
        // Mid-page short read: resume from the last whole page.
        assert!(!op.advance(5000).unwrap());
        assert_eq!(op.done, 4096);
        assert_eq!(op.rest().len(), 2);
        assert_eq!(op.next_offset(), 8192 + 4096);
        // Less than a page: no progress, counted as a stall.
        assert!(!op.advance(100).unwrap());
        assert_eq!(op.done, 4096);
        // The rest up to the end of the file completes it.
        assert!(op.advance(4096 + 100).unwrap());
        assert!(op.is_complete());
        // EOF before the expected end is an error.
        let mut op = ReadOp::new(0);
        op.push(buf.page_ptr(0), 4096);
        assert_eq!(op.advance(0).unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
        // Endless stalls are an error.
        let mut op = ReadOp::new(0);
        op.push(buf.page_ptr(0), 4096);
        let mut result = Ok(false);
        for _ in 0..=MAX_STALLS {
            result = op.advance(10);
        }
        assert!(result.is_err());
        buf = super::super::buf::AlignedBuf::new(0).unwrap();
        assert_eq!(buf.pages(), 0);
    }
}
