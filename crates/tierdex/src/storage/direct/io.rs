//! Batched page reads: io_uring (one ring per thread) with a pread fallback.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;
use std::sync::Once;

use io_uring::{opcode, types, IoUring};

use super::{IoCounts, IoEngine, PAGE};

/// Submission queue entries of each thread's ring: the most reads in flight at once.
pub(super) const RING_ENTRIES: u32 = 128;
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

/// Test hooks: inject ring setup failures, short reads and errors, and count batches.
#[cfg(test)]
pub(super) mod hooks {
    use std::cell::Cell;

    thread_local! {
        /// Make this thread's ring setup fail (set before the thread's first read).
        pub static FAIL_RING_SETUP: Cell<bool> = const { Cell::new(false) };
        /// Report the next N completions as shorter than they were.
        pub static SHORT_READS: Cell<u32> = const { Cell::new(0) };
        /// Fail the next N completions with EIO.
        pub static FAIL_READS: Cell<u32> = const { Cell::new(0) };
        /// Batches submitted by this thread (one `submit_and_wait`, or one pread pass).
        pub static BATCHES: Cell<u64> = const { Cell::new(0) };
        /// Make O_DIRECT opens on this thread fail with EINVAL, as on a filesystem that refuses it.
        pub static REFUSE_O_DIRECT: Cell<bool> = const { Cell::new(false) };
    }

    fn take(cell: &'static std::thread::LocalKey<Cell<u32>>) -> bool {
        cell.with(|c| {
            let n = c.get();
            if n > 0 {
                c.set(n - 1);
            }
            n > 0
        })
    }

    /// The completion result the code under test sees.
    pub fn filter(res: i64) -> i64 {
        if res >= 0 && take(&FAIL_READS) {
            -(libc::EIO as i64)
        } else if res > 0 && take(&SHORT_READS) {
            // Half of it: often mid-page, sometimes less than one page.
            res / 2
        } else {
            res
        }
    }

    pub fn batch() {
        BATCHES.with(|b| b.set(b.get() + 1));
    }
}

#[inline]
fn filter_result(res: i64) -> i64 {
    #[cfg(test)]
    return hooks::filter(res);
    #[cfg(not(test))]
    res
}

#[inline]
fn count_batch() {
    #[cfg(test)]
    hooks::batch();
}

enum Ring {
    Uninit,
    Ready(Box<IoUring>),
    Unavailable,
}

thread_local! {
    static RING: RefCell<Ring> = const { RefCell::new(Ring::Uninit) };
}

static RING_WARNING: Once = Once::new();

fn setup_ring() -> io::Result<IoUring> {
    #[cfg(test)]
    if hooks::FAIL_RING_SETUP.with(|f| f.get()) {
        return Err(io::Error::from_raw_os_error(libc::EPERM));
    }
    IoUring::builder().build(RING_ENTRIES)
}

/// True when this thread reads through io_uring (sets the ring up if needed).
pub(super) fn io_uring_available() -> bool {
    RING.with(|r| {
        let mut r = r.borrow_mut();
        ensure_ring(&mut r);
        matches!(*r, Ring::Ready(_))
    })
}

fn ensure_ring(r: &mut Ring) {
    if let Ring::Uninit = r {
        *r = match setup_ring() {
            Ok(ring) => Ring::Ready(Box::new(ring)),
            Err(e) => {
                RING_WARNING.call_once(|| {
                    tracing::warn!("io_uring is unavailable ({e}); direct storage falls back to pread");
                });
                Ring::Unavailable
            }
        };
    }
}

/// Reads every op of `ops` from `fd`: all at once through this thread's
/// io_uring (in batches of at most `RING_ENTRIES` outstanding reads), or one
/// after the other with `preadv` for [`IoEngine::Pread`] or when io_uring is
/// unavailable. Always returns what was transferred, and the first error.
/// When it returns, no read is in flight.
pub(super) fn read_all(fd: RawFd, engine: IoEngine, ops: &mut [ReadOp]) -> (IoCounts, Option<io::Error>) {
    let mut counts = IoCounts::default();
    if ops.is_empty() {
        return (counts, None);
    }
    if engine == IoEngine::IoUring {
        let done = RING.with(|r| {
            let mut r = r.borrow_mut();
            ensure_ring(&mut r);
            match &mut *r {
                Ring::Ready(ring) => {
                    let (err, discard) = uring_read_all(ring, fd, ops, &mut counts);
                    if discard {
                        // Entries may be left in the submission queue: never
                        // let a later call submit them. A new ring is made lazily.
                        *r = Ring::Uninit;
                    }
                    Some(err)
                }
                _ => None,
            }
        });
        if let Some(err) = done {
            return (counts, err);
        }
    }
    let err = pread_all(fd, ops, &mut counts);
    (counts, err)
}

fn pread_all(fd: RawFd, ops: &mut [ReadOp], counts: &mut IoCounts) -> Option<io::Error> {
    count_batch();
    for op in ops.iter_mut() {
        while !op.is_complete() {
            let rest = op.rest();
            // SAFETY: `rest` points at `rest.len()` iovecs (at most
            // MAX_PAGES_PER_OP, below IOV_MAX), each naming a page-aligned 4 KiB
            // buffer that the caller reserved for this read (a pinned `Loading`
            // frame no one else touches, or private scratch) and that outlives
            // this synchronous call. Exercised by the pread-fallback tests.
            let n = unsafe { libc::preadv(fd, rest.as_ptr(), rest.len() as libc::c_int, op.next_offset() as i64) };
            counts.ios += 1;
            let n = if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                -(e.raw_os_error().unwrap_or(libc::EIO) as i64)
            } else {
                n as i64
            };
            let n = filter_result(n);
            if n < 0 {
                return Some(io::Error::from_raw_os_error(-n as i32));
            }
            counts.bytes_read += n as u64;
            if let Err(e) = op.advance(n as u64) {
                return Some(e);
            }
        }
    }
    None
}

fn sqe_for(fd: RawFd, op: &ReadOp, user_data: u64) -> io_uring::squeue::Entry {
    let rest = op.rest();
    let contiguous = rest
        .windows(2)
        .all(|w| w[1].iov_base as usize == w[0].iov_base as usize + PAGE);
    let entry = if contiguous {
        opcode::Read::new(types::Fd(fd), rest[0].iov_base.cast(), (rest.len() * PAGE) as u32)
            .offset(op.next_offset())
            .build()
    } else {
        opcode::Readv::new(types::Fd(fd), rest.as_ptr(), rest.len() as u32)
            .offset(op.next_offset())
            .build()
    };
    entry.user_data(user_data)
}

fn transient(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EINTR | libc::EAGAIN | libc::EBUSY))
}

/// The io_uring path of [`read_all`]. Returns the first error and whether the
/// ring must be discarded (entries may be stranded in its submission queue).
fn uring_read_all(
    ring: &mut IoUring,
    fd: RawFd,
    ops: &mut [ReadOp],
    counts: &mut IoCounts,
) -> (Option<io::Error>, bool) {
    let mut pending: VecDeque<usize> = (0..ops.len()).filter(|&i| !ops[i].is_complete()).collect();
    let mut first_err: Option<io::Error> = None;
    while first_err.is_none() && !pending.is_empty() {
        // One batch: queue up to a ring's worth of reads, submit them with one
        // system call and wait for all their completions.
        let mut pushed = 0usize;
        {
            let mut sq = ring.submission();
            while let Some(&i) = pending.front() {
                if sq.is_full() {
                    break;
                }
                let entry = sqe_for(fd, &ops[i], i as u64);
                // SAFETY: the entry reads into buffers that stay valid and are not
                // accessed by anyone else until its completion is reaped below:
                // pinned `Loading` frames of the pool (no other reader copies
                // from or reuses a frame in that state), or scratch owned by the
                // calling frame, and for `Readv` the iovec array of `ops[i]`,
                // which is neither moved nor modified while the read is in flight.
                // The fd is borrowed from a `DirectFile` that outlives this call.
                // Every pushed entry is reaped before this function returns (or
                // the ring is discarded with it unsubmitted).
                if unsafe { sq.push(&entry) }.is_err() {
                    break;
                }
                pending.pop_front();
                pushed += 1;
            }
        }
        if pushed == 0 {
            // Cannot happen with an empty ring; do not spin.
            first_err = Some(io::Error::other("io_uring submission queue is full"));
            break;
        }
        count_batch();
        counts.ios += pushed as u64;
        let mut reaped = 0usize;
        let mut failures = 0u32;
        while reaped < pushed {
            if let Err(e) = ring.submit_and_wait(pushed - reaped) {
                if !transient(&e) {
                    let unsubmitted = ring.submission().len();
                    let in_flight = pushed - unsubmitted - reaped;
                    if in_flight == 0 {
                        // Nothing of ours is in the kernel: safe to give up, but
                        // the unsubmitted entries must never be submitted later.
                        return (Some(first_err.unwrap_or(e)), true);
                    }
                    failures += 1;
                    if failures > 1000 {
                        // The kernel holds pointers into memory that returning
                        // would let others reuse: no sound way out.
                        eprintln!("tierdex: io_uring_enter keeps failing with reads in flight ({e}); aborting");
                        std::process::abort();
                    }
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
            for cqe in ring.completion() {
                reaped += 1;
                let i = cqe.user_data() as usize;
                let res = filter_result(cqe.result() as i64);
                if res < 0 {
                    first_err.get_or_insert_with(|| io::Error::from_raw_os_error(-res as i32));
                    continue;
                }
                counts.bytes_read += res as u64;
                match ops[i].advance(res as u64) {
                    Ok(true) => {}
                    Ok(false) => pending.push_back(i),
                    Err(e) => {
                        first_err.get_or_insert(e);
                    }
                }
            }
        }
    }
    (first_err, false)
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
