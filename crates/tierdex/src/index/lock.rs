//! The write lock of an index directory, and replacing a directory by
//! another in one step.
//!
//! Every command that writes an index holds `write.lock` (an advisory
//! `flock` on a file in the directory) for as long as it writes: the writer
//! (`add`, `delete`, `compact`, a server) and the builder (`tierdex index`,
//! `--force` included). A second one is refused with a conflict.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Name of the lock file that keeps a second writer out.
pub const LOCK_FILE: &str = "write.lock";

/// Takes the write lock of `dir` (which must exist), or fails with a
/// conflict if another process (or another writer in this one) holds it.
/// The lock lasts as long as the returned file is open.
pub fn lock_dir(dir: &Path) -> Result<File> {
    let path = dir.join(LOCK_FILE);
    let f = crate::storage::mode::create_options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| Error::io(&path, e))?;
    match f.try_lock() {
        Ok(()) => Ok(f),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::Conflict(format!(
            "{} is open for writing by another process (a server or another command); stop it first",
            dir.display()
        ))),
        Err(std::fs::TryLockError::Error(e)) => Err(Error::io(&path, e)),
    }
}

/// A directory beside `dir` (same parent, so a rename can move it into
/// `dir`'s place), named after it, the process and a counter; hidden.
pub fn sibling(dir: &Path, what: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = dir.file_name().map_or_else(|| "index".into(), |n| n.to_string_lossy().into_owned());
    let parent = parent_of(dir);
    parent.join(format!(".{name}.{what}-{}-{n}", std::process::id()))
}

/// The directory holding `dir` (`.` for a bare name).
fn parent_of(dir: &Path) -> PathBuf {
    match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Puts directory `new` in the place of `dir` in one step: renamed there
/// when `dir` does not exist, else exchanged with it (`renameat2` with
/// `RENAME_EXCHANGE`: at every instant `dir` is either the old or the new
/// directory), after which the old one, now at `new`'s path, is removed.
/// Where the file system cannot exchange, `dir` is first renamed aside, so
/// for an instant `dir` does not exist (never a mix of old and new files).
pub fn replace_dir(new: &Path, dir: &Path) -> Result<()> {
    if !dir.exists() {
        std::fs::rename(new, dir).map_err(|e| Error::io(dir, e))?;
    } else {
        use rustix::fs::{renameat_with, RenameFlags, CWD};
        match renameat_with(CWD, new, CWD, dir, RenameFlags::EXCHANGE) {
            Ok(()) => {}
            Err(e) if e == rustix::io::Errno::INVAL || e == rustix::io::Errno::NOSYS => {
                let aside = sibling(dir, "old");
                std::fs::rename(dir, &aside).map_err(|e| Error::io(dir, e))?;
                std::fs::rename(new, dir).map_err(|e| Error::io(dir, e))?;
                std::fs::rename(&aside, new).map_err(|e| Error::io(new, e))?;
            }
            Err(e) => return Err(Error::io(dir, e.into())),
        }
        std::fs::remove_dir_all(new).map_err(|e| Error::io(new, e))?;
    }
    File::open(parent_of(dir))
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(parent_of(dir), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_a_conflict_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let first = lock_dir(dir.path()).unwrap();
        let err = lock_dir(dir.path()).unwrap_err();
        assert_eq!(err.kind(), crate::error::ErrorKind::Conflict, "{err}");
        drop(first);
        lock_dir(dir.path()).unwrap();
    }

    #[test]
    fn replace_dir_swaps_in_the_new_directory_and_removes_the_old() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("idx");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("old"), b"1").unwrap();
        let new = sibling(&dir, "build");
        std::fs::create_dir(&new).unwrap();
        std::fs::write(new.join("new"), b"2").unwrap();
        replace_dir(&new, &dir).unwrap();
        assert!(dir.join("new").exists() && !dir.join("old").exists());
        assert!(!new.exists());
        let names: Vec<_> = std::fs::read_dir(root.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("idx")]);
        // Into a path that does not exist yet: a rename.
        let fresh = root.path().join("fresh");
        let new = sibling(&fresh, "build");
        std::fs::create_dir(&new).unwrap();
        replace_dir(&new, &fresh).unwrap();
        assert!(fresh.is_dir() && !new.exists());
    }
}
