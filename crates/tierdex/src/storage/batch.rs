//! Batched positional reads and writes of one file: every operation of a
//! batch is submitted at once through the storage layer's io_uring engine
//! ([`crate::storage::uring`]: the device sees many I/Os outstanding),
//! falling back to `pread`/`pwrite` one after the other where io_uring is
//! unavailable. Used by the in-place strategy (DESIGN §5)
//! for the last blocks it rewrites, the blocks it appends and the chunks a
//! query reads.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};

use io_uring::{opcode, squeue, types};

use crate::storage::uring::{self, RunCounts, Transfer};

/// Operations in flight at once (the in-place strategy's input buffer
/// threshold, DESIGN §0).
pub const MAX_IN_FLIGHT: usize = uring::RING_ENTRIES;

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

/// Whether batches on this thread go through io_uring.
pub fn uses_io_uring() -> bool {
    uring::available()
}

/// One read or write of a byte range at a file offset.
struct ByteOp {
    offset: u64,
    ptr: *mut u8,
    len: usize,
    done: usize,
    write: bool,
}

impl Transfer for ByteOp {
    fn entry(&self, fd: types::Fd) -> squeue::Entry {
        // SAFETY: `done <= len`: the pointer stays within the caller's buffer.
        let ptr = unsafe { self.ptr.add(self.done) };
        let len = (self.len - self.done).min(u32::MAX as usize) as u32;
        let at = self.offset + self.done as u64;
        if self.write {
            opcode::Write::new(fd, ptr, len).offset(at).build()
        } else {
            opcode::Read::new(fd, ptr, len).offset(at).build()
        }
    }

    fn sync(&mut self, fd: RawFd) -> io::Result<u64> {
        let at = (self.offset + self.done as u64) as libc::off_t;
        // SAFETY: `ptr..ptr + len` is valid (writable for reads) for the
        // whole call of `read_many`/`write_many` (their callers' borrows),
        // and `done <= len`.
        let n = unsafe {
            let ptr = self.ptr.add(self.done);
            let left = self.len - self.done;
            if self.write {
                libc::pwrite(fd, ptr.cast(), left, at)
            } else {
                libc::pread(fd, ptr.cast(), left, at)
            }
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as u64)
    }

    fn advance(&mut self, n: u64) -> io::Result<bool> {
        if n == 0 && self.done < self.len {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "transfer at byte {} ended {} bytes short",
                    self.offset + self.done as u64,
                    self.len - self.done
                ),
            ));
        }
        self.done = (self.done + n as usize).min(self.len);
        Ok(self.done == self.len)
    }

    fn is_complete(&self) -> bool {
        self.done == self.len
    }
}

/// Reads `bufs[i].len()` bytes at `offsets[i]` into each `bufs[i]`. A read
/// that ends early (the end of the file) is an error.
pub fn read_many(file: &File, offsets: &[u64], bufs: &mut [&mut [u8]]) -> io::Result<BatchCounts> {
    assert_eq!(offsets.len(), bufs.len());
    let mut ops: Vec<ByteOp> = offsets
        .iter()
        .zip(bufs.iter_mut())
        .map(|(&offset, b)| ByteOp {
            offset,
            ptr: b.as_mut_ptr(),
            len: b.len(),
            done: 0,
            write: false,
        })
        .collect();
    // SAFETY: every pointer comes from a distinct `&mut [u8]` borrowed for
    // the whole call, and `run` has no operation in flight when it returns.
    finish(
        unsafe { uring::run(file.as_raw_fd(), &mut ops, MAX_IN_FLIGHT, true) },
        &ops,
    )
}

/// Writes each `bufs[i]` at `offsets[i]` (not synced).
pub fn write_many(file: &File, offsets: &[u64], bufs: &[&[u8]]) -> io::Result<BatchCounts> {
    assert_eq!(offsets.len(), bufs.len());
    let mut ops: Vec<ByteOp> = offsets
        .iter()
        .zip(bufs)
        .map(|(&offset, b)| ByteOp {
            offset,
            ptr: b.as_ptr() as *mut u8,
            len: b.len(),
            done: 0,
            write: true,
        })
        .collect();
    // SAFETY: the buffers are borrowed for the whole call and only read
    // (write operations); `run` has no operation in flight when it returns.
    finish(
        unsafe { uring::run(file.as_raw_fd(), &mut ops, MAX_IN_FLIGHT, true) },
        &ops,
    )
}

fn finish((counts, err): (RunCounts, Option<io::Error>), ops: &[ByteOp]) -> io::Result<BatchCounts> {
    match err {
        Some(e) => Err(e),
        None => Ok(BatchCounts {
            ops: ops.len() as u64,
            bytes: counts.bytes,
            submissions: counts.batches,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

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
