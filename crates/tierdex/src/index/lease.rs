//! Reader leases: how a process that opens an index read-only tells a
//! writer in another process which commit it reads, so that the writer
//! does not reuse space that commit still refers to.
//!
//! Only the in-place strategies write into a file a published manifest
//! names (the chain file, whose freed blocks a later flush fills); every
//! other file is written once and only ever removed, which an open reader
//! does not notice. A reader of an in-place index therefore holds a lease
//! for as long as it is open: a file `readers/<unique>.lease` in the index
//! directory holding the manifest generation it read, locked (`flock`)
//! while the reader lives. The writer keeps space freed at generation `g`
//! until every live lease is at `g` or later ([`oldest`]); a lease whose
//! lock can be taken belongs to a reader that is gone and is removed.
//!
//! The protocol (the writer frees space of generation `g` only when
//! committing generation `g + 1` or later): a reader loads the manifest
//! (generation `g`), publishes its lease, and loads the manifest again; if
//! it is now at `g + 2` or later, the writer may have reused space before
//! seeing the lease, and the reader starts over. A lease is written under a
//! temporary name, locked, then renamed, so that a writer never sees an
//! unlocked one.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};
use crate::storage::mode;

/// The directory of the leases, inside the index directory.
pub const READERS_DIR: &str = "readers";

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A reader's lease on one manifest generation; released when dropped.
#[derive(Debug)]
pub struct ReaderLease {
    path: PathBuf,
    _file: File,
}

impl ReaderLease {
    /// Publishes a lease on generation `generation` of the index in `dir`.
    pub fn take(dir: &Path, generation: u64) -> Result<ReaderLease> {
        let readers = dir.join(READERS_DIR);
        match mode::create_dir(&readers) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(Error::io(&readers, e)),
        }
        let name = format!(
            "{}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        );
        let tmp = readers.join(format!("{name}.tmp"));
        let path = readers.join(format!("{name}.lease"));
        let io = |e| Error::io(&tmp, e);
        let mut file = mode::create_options().write(true).create_new(true).open(&tmp).map_err(io)?;
        file.lock().map_err(io)?;
        file.write_all(generation.to_string().as_bytes()).map_err(io)?;
        std::fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
        Ok(ReaderLease { path, _file: file })
    }
}

impl Drop for ReaderLease {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The oldest generation a live reader of the index in `dir` holds
/// (`None`: no reader), removing the leases of readers that are gone.
pub fn oldest(dir: &Path) -> Result<Option<u64>> {
    let readers = dir.join(READERS_DIR);
    let entries = match std::fs::read_dir(&readers) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(&readers, e)),
    };
    let mut oldest: Option<u64> = None;
    for e in entries.flatten() {
        let path = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        let lease = name.ends_with(".lease");
        if !lease && !name.ends_with(".tmp") {
            continue;
        }
        // A temporary lease may be one a reader is taking right now.
        let young = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_none_or(|age| age.as_secs() < 60);
        if !lease && young {
            continue;
        }
        let Ok(f) = File::open(&path) else {
            continue;
        };
        match f.try_lock() {
            // Its reader is gone (or never finished taking it).
            Ok(()) => {
                let _ = std::fs::remove_file(&path);
            }
            Err(std::fs::TryLockError::WouldBlock) if lease => {
                // A generation that cannot be read protects everything.
                let g = std::fs::read_to_string(&path)
                    .ok()
                    .and_then(|t| t.trim().parse::<u64>().ok())
                    .unwrap_or(0);
                oldest = Some(oldest.map_or(g, |o| o.min(g)));
            }
            Err(_) => {}
        }
    }
    Ok(oldest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_are_seen_while_held_and_cleared_after() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(oldest(dir.path()).unwrap(), None);
        let a = ReaderLease::take(dir.path(), 7).unwrap();
        let b = ReaderLease::take(dir.path(), 5).unwrap();
        assert_eq!(oldest(dir.path()).unwrap(), Some(5));
        drop(b);
        assert_eq!(oldest(dir.path()).unwrap(), Some(7));
        // A reader that died without removing its lease: the lock is gone.
        let path = a.path.clone();
        std::mem::forget(a);
        assert_eq!(oldest(dir.path()).unwrap(), Some(7), "still locked by this process's file");
        let stale = dir.path().join(READERS_DIR).join("1-2-3.lease");
        std::fs::write(&stale, "1").unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(oldest(dir.path()).unwrap(), None);
        assert!(!stale.exists());
    }
}
