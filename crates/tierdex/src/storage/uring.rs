//! The one io_uring engine every batched transfer goes through: a ring per
//! thread, and a loop that keeps a batch of reads or writes in flight until
//! each is complete (the direct tier's page loads, the in-place strategy's
//! block reads and writes, DESIGN §0 and §3). Where io_uring cannot be set
//! up (or a caller asks for it), the same operations run one after the other
//! with plain positional calls.
//!
//! An operation is a [`Transfer`]: it says what submission covers what is
//! left of it and how a completion of `n` bytes advances it, so short
//! transfers are resubmitted from wherever the operation's own rules say
//! (whole pages for O_DIRECT reads, the next byte otherwise).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;
use std::sync::Once;

use io_uring::{squeue, types, IoUring};

/// Submission queue entries of each thread's ring: the most operations in
/// flight at once (the in-place strategy's batch of 1,024 blocks, DESIGN §0).
pub const RING_ENTRIES: usize = 1024;

/// One operation of a batch.
pub(crate) trait Transfer {
    /// The submission entry for what is left of the operation.
    fn entry(&self, fd: types::Fd) -> squeue::Entry;
    /// One synchronous positional call for what is left; the bytes moved.
    fn sync(&mut self, fd: RawFd) -> io::Result<u64>;
    /// Accounts for `n` bytes moved by the last submission or call: true
    /// when the operation is complete, an error when it cannot complete.
    fn advance(&mut self, n: u64) -> io::Result<bool>;
    /// True when nothing is left to transfer.
    fn is_complete(&self) -> bool;
}

/// What a run cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RunCounts {
    /// Submissions (one per operation per attempt).
    pub ops: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Batches: `submit_and_wait` rounds, or synchronous passes.
    pub batches: u64,
}

/// Test hooks: fail ring setup, shorten or fail completions, count batches.
#[cfg(test)]
pub(crate) mod hooks {
    use std::cell::Cell;

    thread_local! {
        /// Make this thread's ring setup fail (set before the thread's first transfer).
        pub static FAIL_RING_SETUP: Cell<bool> = const { Cell::new(false) };
        /// Report the next N completions as shorter than they were.
        pub static SHORT_READS: Cell<u32> = const { Cell::new(0) };
        /// Fail the next N completions with EIO.
        pub static FAIL_READS: Cell<u32> = const { Cell::new(0) };
        /// Batches run by this thread.
        pub static BATCHES: Cell<u64> = const { Cell::new(0) };
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
fn count_batch(counts: &mut RunCounts) {
    counts.batches += 1;
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
    IoUring::builder().build(RING_ENTRIES as u32)
}

fn ensure_ring(r: &mut Ring) {
    if let Ring::Uninit = r {
        *r = match setup_ring() {
            Ok(ring) => Ring::Ready(Box::new(ring)),
            Err(e) => {
                RING_WARNING.call_once(|| {
                    tracing::warn!("io_uring is unavailable ({e}); batched I/O falls back to positional calls");
                });
                Ring::Unavailable
            }
        };
    }
}

/// True when this thread's transfers go through io_uring (sets the ring
/// up if needed).
pub fn available() -> bool {
    RING.with(|r| {
        let mut r = r.borrow_mut();
        ensure_ring(&mut r);
        matches!(*r, Ring::Ready(_))
    })
}

/// Runs every operation of `ops` on `fd` to completion: all at once through
/// this thread's io_uring, at most `in_flight` outstanding per batch, or,
/// without `use_ring` or where io_uring is unavailable, one after the other.
/// Returns what was moved and the first error. When it returns, nothing is
/// in flight.
///
/// # Safety
/// Every operation's buffers must stay valid, and untouched by anyone else,
/// until this call returns; `fd` must stay open as long.
pub(crate) unsafe fn run<T: Transfer>(
    fd: RawFd,
    ops: &mut [T],
    in_flight: usize,
    use_ring: bool,
) -> (RunCounts, Option<io::Error>) {
    let mut counts = RunCounts::default();
    if ops.is_empty() {
        return (counts, None);
    }
    if use_ring {
        let done = RING.with(|r| {
            let mut r = r.borrow_mut();
            ensure_ring(&mut r);
            match &mut *r {
                Ring::Ready(ring) => {
                    let (err, discard) = run_on_ring(ring, fd, ops, in_flight.clamp(1, RING_ENTRIES), &mut counts);
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
    let err = run_sync(fd, ops, &mut counts);
    (counts, err)
}

fn run_sync<T: Transfer>(fd: RawFd, ops: &mut [T], counts: &mut RunCounts) -> Option<io::Error> {
    count_batch(counts);
    for op in ops.iter_mut() {
        while !op.is_complete() {
            counts.ops += 1;
            let n = match op.sync(fd) {
                Ok(n) => n as i64,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => -(e.raw_os_error().unwrap_or(libc::EIO) as i64),
            };
            let n = filter_result(n);
            if n < 0 {
                return Some(io::Error::from_raw_os_error(-n as i32));
            }
            counts.bytes += n as u64;
            if let Err(e) = op.advance(n as u64) {
                return Some(e);
            }
        }
    }
    None
}

fn transient(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EINTR | libc::EAGAIN | libc::EBUSY))
}

/// The io_uring path of [`run`]. Returns the first error and whether the
/// ring must be discarded (entries may be stranded in its submission queue).
fn run_on_ring<T: Transfer>(
    ring: &mut IoUring,
    fd: RawFd,
    ops: &mut [T],
    in_flight: usize,
    counts: &mut RunCounts,
) -> (Option<io::Error>, bool) {
    let fd_arg = types::Fd(fd);
    let mut pending: VecDeque<usize> = (0..ops.len()).filter(|&i| !ops[i].is_complete()).collect();
    let mut first_err: Option<io::Error> = None;
    while first_err.is_none() && !pending.is_empty() {
        // One batch: queue up to `in_flight` operations, submit them with one
        // system call and wait for all their completions.
        let mut pushed = 0usize;
        {
            let mut sq = ring.submission();
            while let Some(&i) = pending.front() {
                if sq.is_full() || pushed == in_flight {
                    break;
                }
                let entry = ops[i].entry(fd_arg).user_data(i as u64);
                // SAFETY: the entry moves bytes between `fd` and buffers that
                // the caller of `run` keeps valid and untouched until it
                // returns (its contract); for vectored reads the iovec array
                // is owned by `ops[i]`, which is neither moved nor modified
                // while the operation is in flight. Every pushed entry is
                // reaped before this function returns (or the ring is
                // discarded with it unsubmitted). Exercised by the direct
                // tier's and the batch tests.
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
        count_batch(counts);
        counts.ops += pushed as u64;
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
                        eprintln!("tierdex: io_uring_enter keeps failing with transfers in flight ({e}); aborting");
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
                counts.bytes += res as u64;
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
