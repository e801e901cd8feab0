//! Permissions of what tierdex creates: index files are readable and
//! writable by their owner only (0600), directories 0700, unless the
//! process asks for another file mode ([`set_file_mode`], `tierdex
//! --file-mode`). Every file and directory of an index is created through
//! [`create_options`] or [`create_dir_all`]; the process umask still applies.

use std::fs::{DirBuilder, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::error::{Error, Result};

/// The file mode used unless [`set_file_mode`] says otherwise.
pub const DEFAULT_FILE_MODE: u32 = 0o600;

static FILE_MODE: AtomicU32 = AtomicU32::new(DEFAULT_FILE_MODE);

/// Sets the mode of the files this process creates from now on (for
/// example 0o640 to let a group read indexes). Directories get the same
/// bits plus search (`x`) wherever reading is allowed. The owner must keep
/// read and write; execute bits and set-id bits are refused.
pub fn set_file_mode(mode: u32) -> Result<()> {
    if mode & !0o666 != 0 || mode & 0o600 != 0o600 {
        return Err(Error::InvalidArgument(format!(
            "file mode {mode:o} is not a file permission the owner can read and write (0600 to 0666, no execute bits)"
        )));
    }
    FILE_MODE.store(mode, Ordering::Relaxed);
    Ok(())
}

/// Mode of the files this process creates.
pub fn file_mode() -> u32 {
    FILE_MODE.load(Ordering::Relaxed)
}

/// Mode of the directories this process creates: the file mode with `x`
/// wherever `r` is set (0600 → 0700, 0640 → 0750).
pub fn dir_mode() -> u32 {
    let m = file_mode();
    m | ((m & 0o444) >> 2)
}

/// Options that create a file with [`file_mode`] (add `write`, `create`...).
pub fn create_options() -> OpenOptions {
    let mut o = OpenOptions::new();
    o.mode(file_mode());
    o
}

/// Creates `path` and its missing parents with [`dir_mode`] (existing
/// directories are left as they are).
pub fn create_dir_all(path: &Path) -> std::io::Result<()> {
    DirBuilder::new().recursive(true).mode(dir_mode()).create(path)
}

/// Creates the directory `path` with [`dir_mode`] (its parent must exist).
pub fn create_dir(path: &Path) -> std::io::Result<()> {
    DirBuilder::new().mode(dir_mode()).create(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directory_modes_follow_file_modes() {
        assert_eq!(DEFAULT_FILE_MODE | ((DEFAULT_FILE_MODE & 0o444) >> 2), 0o700);
        let m = 0o640;
        assert_eq!(m | ((m & 0o444) >> 2), 0o750);
        assert!(set_file_mode(0o755).is_err());
        assert!(set_file_mode(0o400).is_err());
        assert!(set_file_mode(0o4600).is_err());
    }
}
