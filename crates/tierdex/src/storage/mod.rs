//! Checksummed index files and the tiers they are read from.
//!
//! Every file tierdex writes has the same shape:
//!
//! ```text
//! [content ...][page checksums: u32 LE per 4 KiB page of content][footer: 32 bytes]
//! footer = magic "TDXFOOT1" | version u32 | reserved u32 | content_len u64 | table_hash u64
//! ```
//!
//! The footer is checked when a file is opened (truncation and a damaged
//! checksum table are caught at once). Content pages are verified lazily the
//! first time any byte of them is read through [`IndexFile::bytes`], and
//! remembered as verified, so a query never pays twice for a page and never
//! reads more than it needs; [`IndexFile::verify_all`] checks everything (used
//! by `tierdex inspect --verify` and after writing).
//!
//! Tiers (DESIGN §3, chosen at open time with [`TierOptions`]): `ram`,
//! `mmap` (with `madvise` policy), `buffered` (`pread`) and `direct`
//! (O_DIRECT through io_uring into a bounded [`direct::BufferPool`]).
//! Readers go through [`PageWindow`]s and [`IndexFile::read`]; [`io`]
//! accounts what each thread requested and decoded.

internal!(batch);
internal!(direct);
internal!(faults);
mod file;
pub mod io;
pub mod memory;
pub mod mode;
mod tier;
internal!(uring);
mod window;

pub use file::{
    sync_files, unsynced, FileInfo, FileWriter, IndexFile, Madvise, Storage, Tier, TierOptions, FOOTER_LEN, PAGE_SIZE,
};
pub use io::IoStats;
pub use mode::{create_dir_all, file_mode, set_file_mode};
pub use window::PageWindow;
