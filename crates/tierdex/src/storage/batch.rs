//! Batched positional reads and writes of one file: every operation of a
//! batch is submitted at once through an io_uring (so the device sees many
//! I/Os outstanding), falling back to `pread`/`pwrite` one after the other
//! where io_uring is unavailable. Used by the in-place strategy (DESIGN §5)
//! for the last blocks it rewrites, the blocks it appends and the chunks a
//! query reads.

use std::cell::RefCell;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

use io_uring::{opcode, types, IoUring};

/// Operations in flight at once (the in-place strategy's input buffer
/// threshold, DESIGN §0).
pub const MAX_IN_FLIGHT: usize = 1024;

/// What a batch did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchCounts {
    /// Operations.
    pub ops: u64,
    /// Bytes transferred.
    pub bytes: u64,
    /// Submissions to the kernel (io_uring `submit_and_wait` calls, or one
    /// per operation on the fallback).
    pub submissions: u64,
}

impl BatchCounts {
    /// Adds `other` into `self`.
    pub fn add(&mut self, other: BatchCounts) {
        self.ops += other.ops;
        self.bytes += other.bytes;
        self.submissions += other.submissions;
    }
}

enum Ring {
    Uninit,
    Ready(Box<IoUring>),
    Unavailable,
}

thread_local! {
    static RING: RefCell<Ring> = const { RefCell::new(Ring::Uninit) };
}

/// Whether batches on this thread go through io_uring.
pub fn uses_io_uring() -> bool {
    with_ring(|r| r.is_some())
}

fn with_ring<T>(f: impl FnOnce(Option<&mut IoUring>) -> T) -> T {
    RING.with(|cell| {
        let mut r = cell.borrow_mut();
        if let Ring::Uninit = *r {
            *r = match IoUring::builder().build(MAX_IN_FLIGHT as u32) {
                Ok(ring) => Ring::Ready(Box::new(ring)),
                Err(e) => {
                    tracing::warn!("io_uring is unavailable ({e}); batched I/O falls back to pread/pwrite");
                    Ring::Unavailable
                }
            };
        }
        match &mut *r {
            Ring::Ready(ring) => f(Some(ring)),
            _ => f(None),
        }
    })
}

/// Reads `bufs[i].len()` bytes at `offsets[i]` into each `bufs[i]`. A read
/// that ends early (the end of the file) is an error.
pub fn read_many(file: &File, offsets: &[u64], bufs: &mut [&mut [u8]]) -> io::Result<BatchCounts> {
    assert_eq!(offsets.len(), bufs.len());
    let ptrs: Vec<(u64, *mut u8, usize)> = offsets
        .iter()
        .zip(bufs.iter_mut())
        .map(|(&o, b)| (o, b.as_mut_ptr(), b.len()))
        .collect();
    // SAFETY: every pointer comes from a distinct `&mut [u8]` borrowed for
    // the whole call, and `run` has no operation in flight when it returns.
    unsafe { run(file, &ptrs, false) }
}

/// Writes each `bufs[i]` at `offsets[i]` (not synced).
pub fn write_many(file: &File, offsets: &[u64], bufs: &[&[u8]]) -> io::Result<BatchCounts> {
    assert_eq!(offsets.len(), bufs.len());
    let ptrs: Vec<(u64, *mut u8, usize)> = offsets
        .iter()
        .zip(bufs)
        .map(|(&o, b)| (o, b.as_ptr() as *mut u8, b.len()))
        .collect();
    // SAFETY: the buffers are borrowed for the whole call and only read
    // (write operations); `run` has no operation in flight when it returns.
    unsafe { run(file, &ptrs, true) }
}

/// Runs the operations in batches of at most [`MAX_IN_FLIGHT`]; the rest
/// of a short transfer is completed with a plain positional call.
///
/// # Safety
/// Each `(offset, ptr, len)` must be valid for `len` bytes (writable for
/// reads) until the call returns, and reads' targets must not overlap.
unsafe fn run(file: &File, ops: &[(u64, *mut u8, usize)], write: bool) -> io::Result<BatchCounts> {
    let mut counts = BatchCounts {
        ops: ops.len() as u64,
        bytes: ops.iter().map(|o| o.2 as u64).sum(),
        submissions: 0,
    };
    let fd = types::Fd(file.as_raw_fd());
    let done = with_ring(|ring| -> Option<io::Result<Vec<usize>>> {
        let ring = ring?;
        let mut transferred = vec![0usize; ops.len()];
        for (chunk_no, chunk) in ops.chunks(MAX_IN_FLIGHT).enumerate() {
            let first = chunk_no * MAX_IN_FLIGHT;
            for (i, &(off, ptr, len)) in chunk.iter().enumerate() {
                let len = len.min(u32::MAX as usize) as u32;
                let entry = if write {
                    opcode::Write::new(fd, ptr, len).offset(off).build()
                } else {
                    opcode::Read::new(fd, ptr, len).offset(off).build()
                }
                .user_data((first + i) as u64);
                // SAFETY: the ring has MAX_IN_FLIGHT entries and this chunk
                // at most as many; the buffer outlives the operation (the
                // caller's contract, and every completion is reaped below).
                if unsafe { ring.submission().push(&entry) }.is_err() {
                    return Some(Err(io::Error::other("io_uring submission queue full")));
                }
            }
            counts.submissions += 1;
            let mut left = chunk.len();
            let mut failed = None;
            while left > 0 {
                if let Err(e) = ring.submit_and_wait(left) {
                    if e.kind() == io::ErrorKind::Interrupted {
                        continue;
                    }
                    // Completions may still arrive: this ring must not be reused.
                    return Some(Err(e));
                }
                for cqe in ring.completion() {
                    left -= 1;
                    let i = cqe.user_data() as usize;
                    if cqe.result() < 0 {
                        failed.get_or_insert(io::Error::from_raw_os_error(-cqe.result()));
                    } else {
                        transferred[i] = cqe.result() as usize;
                    }
                }
            }
            if let Some(e) = failed {
                return Some(Err(e));
            }
        }
        Some(Ok(transferred))
    });
    let transferred = match done {
        Some(Ok(t)) => t,
        Some(Err(e)) => {
            // A failed ring may hold stale entries: make a new one next time.
            RING.with(|r| *r.borrow_mut() = Ring::Uninit);
            return Err(e);
        }
        None => {
            counts.submissions = ops.len() as u64;
            vec![0; ops.len()]
        }
    };
    for (&(off, ptr, len), &t) in ops.iter().zip(&transferred) {
        if t < len {
            // SAFETY: the caller's contract covers `ptr..ptr + len`.
            let rest = unsafe { std::slice::from_raw_parts_mut(ptr.add(t), len - t) };
            if write {
                file.write_all_at(rest, off + t as u64)?;
            } else {
                file.read_exact_at(rest, off + t as u64)?;
            }
        }
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_then_reads_many_blocks_in_batches() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        // More operations than one batch holds, scattered and of odd sizes.
        let n = MAX_IN_FLIGHT + 300;
        let blocks: Vec<Vec<u8>> = (0..n).map(|i| vec![(i % 251) as u8; 100 + i % 7]).collect();
        let offsets: Vec<u64> = (0..n).map(|i| ((i * 7919) % n) as u64 * 128).collect();
        let refs: Vec<&[u8]> = blocks.iter().map(|b| b.as_slice()).collect();
        let w = write_many(&f, &offsets, &refs).unwrap();
        assert_eq!(w.ops, n as u64);
        if uses_io_uring() {
            assert_eq!(w.submissions, 2);
        }
        let mut out: Vec<Vec<u8>> = blocks.iter().map(|b| vec![0; b.len()]).collect();
        let mut targets: Vec<&mut [u8]> = out.iter_mut().map(|b| b.as_mut_slice()).collect();
        read_many(&f, &offsets, &mut targets).unwrap();
        assert_eq!(out, blocks);
        for (i, &o) in offsets.iter().enumerate() {
            let mut b = vec![0; blocks[i].len()];
            f.read_exact_at(&mut b, o).unwrap();
            assert_eq!(b, blocks[i]);
        }
    }

    #[test]
    fn a_read_past_the_end_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, [1u8; 10]).unwrap();
        let f = File::open(&path).unwrap();
        let mut b = [0u8; 20];
        assert!(read_many(&f, &[0], &mut [&mut b[..]]).is_err());
        let mut ok = [0u8; 10];
        read_many(&f, &[0], &mut [&mut ok[..]]).unwrap();
        assert_eq!(ok, [1u8; 10]);
    }
}
