//! Injected I/O failures, for tests of what the engine does when the
//! operating system refuses a write (a full disk, too many open files).
//!
//! A fault names a directory, the kind of operation and an `errno`: the
//! checked operations on files under that directory succeed `skip` more
//! times, then fail `times` times with that error. The write path checks
//! at file creation, writes and syncs of index files, the write-ahead log
//! and the manifest. Only builds with the `internals` feature (the
//! workspace's tests and tools) can register faults; elsewhere the checks
//! compile to nothing.

use std::path::Path;

/// The operations a fault can target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultOp {
    /// Creating a file or directory.
    Create,
    /// Writing (or growing) a file.
    Write,
    /// `fsync`/`fdatasync` of a file.
    Sync,
    /// Any of them.
    Any,
}

#[cfg(any(test, feature = "internals"))]
mod imp {
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Mutex;

    use super::FaultOp;

    pub(super) struct Fault {
        pub(super) dir: PathBuf,
        pub(super) op: FaultOp,
        pub(super) errno: i32,
        pub(super) skip: u64,
        pub(super) times: u64,
    }

    pub(super) static ACTIVE: AtomicBool = AtomicBool::new(false);
    pub(super) static FAULTS: Mutex<Vec<Fault>> = Mutex::new(Vec::new());

    pub(super) fn check(path: &Path, op: FaultOp) -> std::io::Result<()> {
        if !ACTIVE.load(Ordering::Relaxed) {
            return Ok(());
        }
        let mut faults = FAULTS.lock().unwrap_or_else(|p| p.into_inner());
        for f in faults.iter_mut() {
            if !path.starts_with(&f.dir) || !(f.op == FaultOp::Any || f.op == op) {
                continue;
            }
            if f.skip > 0 {
                f.skip -= 1;
                continue;
            }
            if f.times > 0 {
                f.times -= 1;
                return Err(std::io::Error::from_raw_os_error(f.errno));
            }
        }
        Ok(())
    }
}

/// Makes `op` on files under `dir` fail with `errno` after `skip` more
/// successful ones, `times` times (`u64::MAX`: until [`clear`]).
#[cfg(any(test, feature = "internals"))]
pub fn inject(dir: &Path, op: FaultOp, errno: i32, skip: u64, times: u64) {
    let mut faults = imp::FAULTS.lock().unwrap_or_else(|p| p.into_inner());
    faults.push(imp::Fault {
        dir: dir.to_path_buf(),
        op,
        errno,
        skip,
        times,
    });
    imp::ACTIVE.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Removes the faults registered for `dir`.
#[cfg(any(test, feature = "internals"))]
pub fn clear(dir: &Path) {
    let mut faults = imp::FAULTS.lock().unwrap_or_else(|p| p.into_inner());
    faults.retain(|f| f.dir != dir);
    imp::ACTIVE.store(!faults.is_empty(), std::sync::atomic::Ordering::Relaxed);
}

/// Whether a fault registered for `dir` has failures left to give.
#[cfg(any(test, feature = "internals"))]
pub fn pending(dir: &Path) -> bool {
    let faults = imp::FAULTS.lock().unwrap_or_else(|p| p.into_inner());
    faults.iter().any(|f| f.dir == dir && f.times > 0)
}

/// Fails when a registered fault says `op` on `path` fails now.
#[inline]
pub(crate) fn check(path: &Path, op: FaultOp) -> std::io::Result<()> {
    #[cfg(any(test, feature = "internals"))]
    return imp::check(path, op);
    #[cfg(not(any(test, feature = "internals")))]
    {
        let _ = (path, op);
        Ok(())
    }
}
