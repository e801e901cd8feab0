//! One checksummed file: its writer and its reader.

use std::cell::Cell;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::{xxh3_64, Xxh3};

use crate::error::{Error, Result};
use crate::storage::direct::{BufferPool, PoolStats};
use crate::storage::faults::{self, FaultOp};
use crate::storage::tier::{self, FileSource};
pub use crate::storage::tier::{Madvise, Tier, TierOptions};
use crate::storage::{io, mode};

/// Checksum granularity: one checksum per page of content.
pub const PAGE_SIZE: usize = 4096;
/// Size of the trailing footer.
pub const FOOTER_LEN: usize = 32;
const MAGIC: &[u8; 8] = b"TDXFOOT1";
const VERSION: u32 = 1;

/// What the manifest records about a finished file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileInfo {
    /// Bytes of content (without the checksum table and footer).
    pub content_len: u64,
    /// Hash of the page checksum table: a fingerprint of the whole content.
    pub checksum: u64,
}

thread_local! {
    /// Whether files created on this thread are left unsynced ([`unsynced`]).
    static UNSYNCED: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with the files it creates on this thread not synced when
/// finished: for files that are removed before any index holding them is
/// committed (a build's segments, which its final merge replaces). Whoever
/// keeps such a file syncs it before committing ([`sync_files`]).
pub fn unsynced<T>(f: impl FnOnce() -> T) -> T {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            UNSYNCED.with(|u| u.set(self.0));
        }
    }
    let _restore = Restore(UNSYNCED.with(|u| u.replace(true)));
    f()
}

/// Syncs finished files written under [`unsynced`] that are kept after all.
pub fn sync_files<P: AsRef<Path>>(paths: impl IntoIterator<Item = P>) -> Result<()> {
    for path in paths {
        let path = path.as_ref();
        faults::check(path, FaultOp::Sync)
            .and_then(|_| File::open(path)?.sync_all())
            .map_err(|e| Error::io(path, e))?;
    }
    Ok(())
}

/// Streams content into a new file, checksumming each page as it goes.
pub struct FileWriter {
    path: PathBuf,
    out: BufWriter<File>,
    written: u64,
    page: Xxh3,
    page_fill: usize,
    page_sums: Vec<u32>,
    /// `fsync` when finished (not for a temporary file).
    sync: bool,
}

impl FileWriter {
    /// Creates (truncates) `path`.
    pub fn create(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let file = faults::check(&path, FaultOp::Create)
            .and_then(|_| {
                mode::create_options()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(&path)
            })
            .map_err(|e| Error::io(&path, e))?;
        Ok(FileWriter {
            out: BufWriter::with_capacity(1 << 20, file),
            path,
            written: 0,
            page: Xxh3::new(),
            page_fill: 0,
            page_sums: Vec::new(),
            sync: !UNSYNCED.with(Cell::get),
        })
    }

    /// The same writer, not synced when finished: for a temporary file,
    /// whose content is copied elsewhere and which is removed soon after.
    pub fn temporary(mut self) -> Self {
        self.sync = false;
        self
    }

    /// Appends the content of the finished file `from`, at a page boundary
    /// (the caller pads first): its whole pages are copied by the kernel
    /// (`copy_file_range`) and keep the checksums its table holds, its last
    /// partial page is read (and checked) and written as usual.
    pub fn append(&mut self, from: &IndexFile) -> Result<()> {
        if self.page_fill != 0 {
            return Err(Error::Internal(format!(
                "appending {} to {} off a page boundary",
                from.path().display(),
                self.path.display()
            )));
        }
        let pages = from.len() / PAGE_SIZE;
        let whole = (pages * PAGE_SIZE) as u64;
        if pages > 0 {
            let io = |e| Error::io(&self.path, e);
            faults::check(&self.path, FaultOp::Write).map_err(io)?;
            self.out.flush().map_err(io)?;
            let mut src = File::open(from.path()).map_err(|e| Error::io(from.path(), e))?;
            let copied = std::io::copy(&mut (&mut src).take(whole), self.out.get_mut()).map_err(io)?;
            if copied != whole {
                return Err(Error::corrupt(
                    from.path(),
                    format!("{copied} bytes could be read of its {whole}"),
                ));
            }
            self.page_sums.extend_from_slice(&from.page_sums[..pages]);
            self.written += whole;
        }
        if from.len() > pages * PAGE_SIZE {
            let mut buf = Vec::new();
            let tail = from.read(pages * PAGE_SIZE..from.len(), &mut buf)?;
            self.write_all(tail)?;
        }
        Ok(())
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Content bytes written so far (the offset the next write lands at).
    pub fn position(&self) -> u64 {
        self.written
    }

    /// Appends `bytes` to the content.
    pub fn write_all(&mut self, mut bytes: &[u8]) -> Result<()> {
        faults::check(&self.path, FaultOp::Write)
            .and_then(|_| self.out.write_all(bytes))
            .map_err(|e| Error::io(&self.path, e))?;
        self.written += bytes.len() as u64;
        while !bytes.is_empty() {
            let take = (PAGE_SIZE - self.page_fill).min(bytes.len());
            self.page.update(&bytes[..take]);
            self.page_fill += take;
            bytes = &bytes[take..];
            if self.page_fill == PAGE_SIZE {
                self.close_page();
            }
        }
        Ok(())
    }

    /// Appends `n` zero bytes.
    pub fn write_zeros(&mut self, mut n: usize) -> Result<()> {
        const ZEROS: [u8; 512] = [0; 512];
        while n > 0 {
            let take = n.min(ZEROS.len());
            self.write_all(&ZEROS[..take])?;
            n -= take;
        }
        Ok(())
    }

    /// Pads with zeros so that a region of `len` bytes written next does not
    /// straddle a page boundary, when padding saves a page read. Returns the
    /// number of padding bytes written.
    pub fn align_for(&mut self, len: usize) -> Result<usize> {
        let pad = pad_saving_a_page(self.written, len);
        self.write_zeros(pad)?;
        Ok(pad)
    }

    fn close_page(&mut self) {
        self.page_sums.push(self.page.digest() as u32);
        self.page.reset();
        self.page_fill = 0;
    }

    /// Writes the checksum table and the footer, syncs, and closes the file.
    pub fn finish(mut self) -> Result<FileInfo> {
        if self.page_fill > 0 {
            self.close_page();
        }
        let mut table = Vec::with_capacity(self.page_sums.len() * 4);
        for s in &self.page_sums {
            table.extend_from_slice(&s.to_le_bytes());
        }
        let table_hash = xxh3_64(&table);
        let mut footer = [0u8; FOOTER_LEN];
        footer[..8].copy_from_slice(MAGIC);
        footer[8..12].copy_from_slice(&VERSION.to_le_bytes());
        footer[16..24].copy_from_slice(&self.written.to_le_bytes());
        footer[24..32].copy_from_slice(&table_hash.to_le_bytes());
        let path = self.path.clone();
        let io = |e| Error::io(&path, e);
        self.out.write_all(&table).map_err(io)?;
        self.out.write_all(&footer).map_err(io)?;
        let file = self.out.into_inner().map_err(|e| io(e.into_error()))?;
        if self.sync {
            faults::check(&path, FaultOp::Sync)
                .and_then(|_| file.sync_all())
                .map_err(io)?;
        }
        Ok(FileInfo {
            content_len: self.written,
            checksum: table_hash,
        })
    }
}

/// Zero bytes to insert at `offset` so that `len` bytes placed after them
/// touch fewer 4 KiB pages than placed at `offset` (0 when it would not help).
pub(crate) fn pad_saving_a_page(offset: u64, len: usize) -> usize {
    if len == 0 || len > PAGE_SIZE {
        return 0;
    }
    let in_page = (offset % PAGE_SIZE as u64) as usize;
    if in_page + len > PAGE_SIZE {
        PAGE_SIZE - in_page
    } else {
        0
    }
}

/// The storage of one open index: tier options and, on the `direct` tier,
/// the buffer pool all its files share.
#[derive(Clone)]
pub struct Storage {
    options: TierOptions,
    pool: Option<Arc<BufferPool>>,
}

impl Storage {
    /// Storage on `options.tier`.
    pub fn new(options: TierOptions) -> Result<Storage> {
        let pool = match options.tier {
            Tier::Direct => Some(BufferPool::new(options.pool_bytes)?),
            _ => None,
        };
        Ok(Storage { options, pool })
    }

    /// The options.
    pub fn options(&self) -> &TierOptions {
        &self.options
    }

    /// Statistics of the `direct` tier's buffer pool.
    pub fn pool_stats(&self) -> Option<PoolStats> {
        self.pool.as_ref().map(|p| p.stats())
    }

    /// Opens an index file on this storage.
    pub fn open(&self, path: impl AsRef<Path>) -> Result<IndexFile> {
        IndexFile::open_on(path.as_ref(), self)
    }

    /// Opens the first `len` bytes of a file still being appended to (a
    /// chain file), without page checksums: whoever reads it checks what it
    /// reads by its own checksums.
    pub fn open_growing(&self, path: impl AsRef<Path>, len: usize) -> Result<IndexFile> {
        IndexFile::open_growing_on(path.as_ref(), self, len)
    }
}

/// A checksummed file opened for reading on a tier.
///
/// On `ram` and `mmap` the content is resident ([`IndexFile::resident`]) and
/// each page is verified the first time it is read. On `buffered` and
/// `direct` reads load whole pages into a caller's buffer and every page
/// loaded is verified.
pub struct IndexFile {
    path: PathBuf,
    source: Box<dyn FileSource>,
    content_len: usize,
    page_sums: Box<[u32]>,
    verified: Box<[AtomicU64]>,
    /// Every page verified: whole-file reads (an FST walking its bytes on
    /// every lookup) skip the per-page bits.
    all_verified: AtomicBool,
    checksum: u64,
}

impl std::fmt::Debug for IndexFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexFile")
            .field("path", &self.path)
            .field("content_len", &self.content_len)
            .finish()
    }
}

/// Reads `out.len()` bytes at `at` of an opening file: from memory on
/// resident tiers, with `pread` otherwise.
fn read_exact(file: &File, source: &dyn FileSource, path: &Path, at: u64, out: &mut [u8]) -> Result<()> {
    match source.resident() {
        Some(all) => {
            out.copy_from_slice(&all[at as usize..at as usize + out.len()]);
            Ok(())
        }
        None => file.read_exact_at(out, at).map_err(|e| Error::io(path, e)),
    }
}

impl IndexFile {
    /// Opens `path` on `tier` with default settings.
    pub fn open(path: impl AsRef<Path>, tier: Tier) -> Result<IndexFile> {
        Storage::new(TierOptions::on(tier))?.open(path)
    }

    fn open_on(path: &Path, storage: &Storage) -> Result<IndexFile> {
        let path = path.to_path_buf();
        let (file, source, file_len) = tier::open(&path, &storage.options, storage.pool.as_ref(), None)?;
        if file_len < FOOTER_LEN {
            return Err(Error::corrupt(
                &path,
                format!("file is {file_len} bytes, shorter than its {FOOTER_LEN}-byte footer (truncated?)"),
            ));
        }
        if let Some(all) = source.resident() {
            if all.len() != file_len {
                return Err(Error::corrupt(&path, "file changed size while being opened"));
            }
        }
        let mut footer = [0u8; FOOTER_LEN];
        read_exact(&file, &*source, &path, (file_len - FOOTER_LEN) as u64, &mut footer)?;
        if &footer[..8] != MAGIC {
            return Err(Error::corrupt(
                &path,
                "missing footer magic (file truncated or not a tierdex file)",
            ));
        }
        let version = u32::from_le_bytes(footer[8..12].try_into().unwrap());
        if footer[12..16] != [0; 4] {
            return Err(Error::corrupt(&path, "damaged footer (reserved bytes are not zero)"));
        }
        if version != VERSION {
            return Err(Error::corrupt(&path, format!("unsupported file version {version}")));
        }
        let content_len = u64::from_le_bytes(footer[16..24].try_into().unwrap());
        let checksum = u64::from_le_bytes(footer[24..32].try_into().unwrap());
        let pages = content_len.div_ceil(PAGE_SIZE as u64);
        let expected = content_len
            .checked_add(pages * 4)
            .and_then(|n| n.checked_add(FOOTER_LEN as u64));
        if expected != Some(file_len as u64) {
            return Err(Error::corrupt(
                &path,
                format!(
                    "file is {file_len} bytes but its footer describes {} bytes of content (truncated or damaged)",
                    content_len
                ),
            ));
        }
        let content_len = content_len as usize;
        let mut table = vec![0u8; file_len - FOOTER_LEN - content_len];
        read_exact(&file, &*source, &path, content_len as u64, &mut table)?;
        if xxh3_64(&table) != checksum {
            return Err(Error::corrupt(&path, "page checksum table does not match its hash"));
        }
        let page_sums: Box<[u32]> = table
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let verified = (0..page_sums.len().div_ceil(64)).map(|_| AtomicU64::new(0)).collect();
        Ok(IndexFile {
            path,
            source,
            content_len,
            page_sums,
            verified,
            all_verified: AtomicBool::new(content_len == 0),
            checksum,
        })
    }

    /// The first `len` bytes of a file that is still being appended to (a
    /// chain file of the in-place strategies), on `storage`'s tier. It has
    /// no page checksums: its pages count as verified, the caller checking
    /// what it reads by its own checksums.
    fn open_growing_on(path: &Path, storage: &Storage, len: usize) -> Result<IndexFile> {
        let (_, source, len) = tier::open(path, &storage.options, storage.pool.as_ref(), Some(len))?;
        let pages = len.div_ceil(PAGE_SIZE);
        Ok(IndexFile {
            path: path.to_path_buf(),
            source,
            content_len: len,
            page_sums: Box::new([]),
            verified: (0..pages.div_ceil(64)).map(|_| AtomicU64::new(u64::MAX)).collect(),
            all_verified: AtomicBool::new(true),
            checksum: 0,
        })
    }

    /// Path of the file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Length of the content in bytes.
    pub fn len(&self) -> usize {
        self.content_len
    }

    /// True when the file has no content.
    pub fn is_empty(&self) -> bool {
        self.content_len == 0
    }

    /// Fingerprint of the content (the hash of the page checksum table).
    pub fn checksum(&self) -> u64 {
        self.checksum
    }

    /// The whole content when it lives in memory (`ram` and `mmap` tiers),
    /// not yet verified: use [`IndexFile::bytes`] or a window to read it.
    #[inline]
    pub fn resident(&self) -> Option<&[u8]> {
        self.source.resident().map(|all| &all[..self.content_len])
    }

    /// An empty slice for an empty in-bounds range.
    pub(crate) fn bytes_or_empty(&self, range: Range<usize>) -> Result<&[u8]> {
        self.check_range(&range)?;
        Ok(&[])
    }

    /// Errors when `range` is not inside the content.
    pub(crate) fn check_bounds(&self, range: &Range<usize>) -> Result<()> {
        self.check_range(range)
    }

    fn check_range(&self, range: &Range<usize>) -> Result<()> {
        if range.start > range.end || range.end > self.content_len {
            return Err(Error::corrupt(
                &self.path,
                format!(
                    "read of bytes {}..{} beyond the content length {}",
                    range.start, range.end, self.content_len
                ),
            ));
        }
        Ok(())
    }

    /// The content bytes in `range` on a resident tier, verifying every page
    /// they touch that was not verified before. On other tiers use
    /// [`IndexFile::read`] or a [`PageWindow`].
    #[inline]
    pub fn bytes(&self, range: Range<usize>) -> Result<&[u8]> {
        let Some(all) = self.resident() else {
            return Err(Error::Internal(format!(
                "{} is not resident on this tier",
                self.path.display()
            )));
        };
        // Fast paths: a file verified whole, or a non-empty range inside one
        // already verified page.
        if range.start <= range.end && range.end <= self.content_len && self.all_verified.load(Ordering::Relaxed) {
            return Ok(&all[range]);
        }
        if range.start < range.end
            && range.end <= self.content_len
            && range.start / PAGE_SIZE == (range.end - 1) / PAGE_SIZE
            && self.is_verified(range.start / PAGE_SIZE)
        {
            return Ok(&all[range]);
        }
        self.check_range(&range)?;
        self.verify_resident(range.clone())?;
        Ok(&all[range])
    }

    /// All content bytes on a resident tier (verifying every page).
    pub fn all(&self) -> Result<&[u8]> {
        self.bytes(0..self.content_len)
    }

    fn verify_resident(&self, range: Range<usize>) -> Result<()> {
        if range.start < range.end {
            for page in range.start / PAGE_SIZE..=(range.end - 1) / PAGE_SIZE {
                if !self.is_verified(page) {
                    let start = page * PAGE_SIZE;
                    let end = (start + PAGE_SIZE).min(self.content_len);
                    let all = self.resident().expect("resident");
                    self.verify_page(page, &all[start..end])?;
                    self.verified[page / 64].fetch_or(1 << (page % 64), Ordering::Relaxed);
                }
            }
        }
        if range.start == 0 && range.end == self.content_len {
            self.all_verified.store(true, Ordering::Relaxed);
        }
        Ok(())
    }

    /// The bytes of `range` on any tier: borrowed from memory on resident
    /// tiers, else read (whole verified pages) into `buf`.
    pub fn read<'a>(&'a self, range: Range<usize>, buf: &'a mut Vec<u8>) -> Result<&'a [u8]> {
        if self.resident().is_some() {
            let data = self.bytes(range.clone())?;
            if !range.is_empty() {
                let pages = (range.end.div_ceil(PAGE_SIZE) - range.start / PAGE_SIZE) * PAGE_SIZE;
                io::record_request(pages as u64, 1);
            }
            return Ok(data);
        }
        self.check_range(&range)?;
        if range.is_empty() {
            return Ok(&[]);
        }
        let first = self.load_pages(range.clone(), buf)?;
        Ok(&buf[range.start - first..range.end - first])
    }

    /// Copies the bytes of `range` into `out` (which has its length).
    pub fn read_small(&self, range: Range<usize>, out: &mut [u8]) -> Result<()> {
        let mut buf = Vec::new();
        let data = self.read(range, &mut buf)?;
        out.copy_from_slice(data);
        Ok(())
    }

    /// Loads the whole pages covering `range` (non-resident tiers) into
    /// `buf`, verifies them, counts the read, and returns the file offset of
    /// `buf[0]`.
    pub(crate) fn load_pages(&self, range: Range<usize>, buf: &mut Vec<u8>) -> Result<usize> {
        let first = range.start / PAGE_SIZE * PAGE_SIZE;
        let end = (range.end.div_ceil(PAGE_SIZE) * PAGE_SIZE).min(self.content_len);
        let (bytes, ios) = self.source.load(first as u64..end as u64, buf)?;
        io::record_request(bytes, ios);
        if self.page_sums.is_empty() {
            return Ok(first);
        }
        for (i, page) in buf.chunks(PAGE_SIZE).enumerate() {
            self.verify_page(first / PAGE_SIZE + i, page)?;
        }
        Ok(first)
    }

    #[inline]
    fn is_verified(&self, page: usize) -> bool {
        self.verified[page / 64].load(Ordering::Relaxed) & (1 << (page % 64)) != 0
    }

    #[cold]
    fn verify_page(&self, page: usize, data: &[u8]) -> Result<()> {
        if xxh3_64(data) as u32 != self.page_sums[page] {
            let start = page * PAGE_SIZE;
            return Err(Error::corrupt(
                &self.path,
                format!(
                    "checksum mismatch in bytes {start}..{} (page {page})",
                    start + data.len()
                ),
            ));
        }
        Ok(())
    }

    /// Verifies every page of the file.
    pub fn verify_all(&self) -> Result<()> {
        if self.resident().is_some() {
            return self.all().map(|_| ());
        }
        let mut buf = Vec::new();
        let mut at = 0;
        while at < self.content_len {
            let end = (at + (1 << 20)).min(self.content_len);
            self.load_pages(at..end, &mut buf)?;
            at = end;
        }
        Ok(())
    }

    /// Tells the tier that the whole pages inside `range` will not be read
    /// again soon (a merge that has streamed past them): on `mmap` they
    /// leave the process's resident memory, staying in the page cache.
    pub fn release(&self, range: Range<usize>) {
        let start = range.start.div_ceil(PAGE_SIZE) * PAGE_SIZE;
        let end = range.end.min(self.content_len) / PAGE_SIZE * PAGE_SIZE;
        if start < end {
            self.source.release(start as u64..end as u64);
        }
    }

    /// Asks the tier to bring `ranges` in ahead of use: `MADV_WILLNEED` on
    /// `mmap`, `POSIX_FADV_WILLNEED` on `buffered`, one batched submission
    /// into the pool on `direct`; nothing on `ram`.
    pub fn prefetch(&self, ranges: &[Range<usize>]) -> Result<()> {
        let ranges: Vec<Range<u64>> = ranges
            .iter()
            .map(|r| {
                (r.start / PAGE_SIZE * PAGE_SIZE) as u64
                    ..(r.end.div_ceil(PAGE_SIZE) * PAGE_SIZE).min(self.content_len) as u64
            })
            .filter(|r| r.start < r.end)
            .collect();
        let (bytes, ios) = self.source.prefetch(&ranges)?;
        io::record_request(bytes, ios);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, content: &[u8]) -> FileInfo {
        let mut w = FileWriter::create(path).unwrap();
        for chunk in content.chunks(1000) {
            w.write_all(chunk).unwrap();
        }
        w.finish().unwrap()
    }

    #[test]
    fn roundtrip_on_both_tiers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let content: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        let info = write(&path, &content);
        assert_eq!(info.content_len, 10_000);
        for tier in [Tier::Ram, Tier::Mmap] {
            let f = IndexFile::open(&path, tier).unwrap();
            assert_eq!(f.checksum(), info.checksum);
            assert_eq!(f.bytes(4000..4200).unwrap(), &content[4000..4200]);
            assert_eq!(f.all().unwrap(), &content[..]);
            assert!(f.bytes(9_999..10_001).is_err());
        }
    }

    #[test]
    fn a_file_verified_whole_skips_the_page_bits_and_a_bad_page_still_fails() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let content: Vec<u8> = (0..3 * PAGE_SIZE as u32).map(|i| (i * 3) as u8).collect();
        write(&path, &content);
        let f = IndexFile::open(&path, Tier::Ram).unwrap();
        assert!(!f.all_verified.load(Ordering::Relaxed));
        assert_eq!(f.bytes(10..PAGE_SIZE + 10).unwrap(), &content[10..PAGE_SIZE + 10]);
        assert!(!f.all_verified.load(Ordering::Relaxed));
        assert_eq!(f.all().unwrap(), &content[..]);
        assert!(f.all_verified.load(Ordering::Relaxed));
        assert_eq!(f.bytes(5..2 * PAGE_SIZE + 7).unwrap(), &content[5..2 * PAGE_SIZE + 7]);
        assert!(f.bytes(0..content.len() + 1).is_err());
        // A flipped byte: a whole-file read fails and leaves the file unverified.
        let mut bad = std::fs::read(&path).unwrap();
        bad[PAGE_SIZE + 5] ^= 1;
        std::fs::write(&path, &bad).unwrap();
        let f = IndexFile::open(&path, Tier::Ram).unwrap();
        assert!(f.all().is_err());
        assert!(!f.all_verified.load(Ordering::Relaxed));
        assert!(f.bytes(PAGE_SIZE..PAGE_SIZE + 10).is_err());
    }

    #[test]
    fn empty_content() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        write(&path, b"");
        let f = IndexFile::open(&path, Tier::Mmap).unwrap();
        assert!(f.is_empty());
        assert_eq!(f.all().unwrap(), b"");
    }

    #[test]
    fn truncation_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        write(&path, &[1u8; 9000]);
        let full = std::fs::read(&path).unwrap();
        for cut in [1, 17, 40, full.len() - 1] {
            std::fs::write(&path, &full[..full.len() - cut]).unwrap();
            let err = IndexFile::open(&path, Tier::Mmap).unwrap_err().to_string();
            assert!(err.contains("corrupt index file"), "{err}");
        }
    }

    #[test]
    fn bit_flips_are_reported_where_they_are() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let content: Vec<u8> = (0..3 * PAGE_SIZE as u32).map(|i| i as u8).collect();
        write(&path, &content);
        let clean = std::fs::read(&path).unwrap();
        for pos in [0usize, 5000, clean.len() - 3, clean.len() - 30] {
            let mut bad = clean.clone();
            bad[pos] ^= 0x10;
            std::fs::write(&path, &bad).unwrap();
            match IndexFile::open(&path, Tier::Ram) {
                Err(e) => assert!(e.to_string().contains("corrupt"), "{e}"),
                Ok(f) => {
                    // The flip is in the content: the page holding it fails.
                    let page = pos / PAGE_SIZE;
                    let other = (page + 1) % 3;
                    assert!(f.bytes(other * PAGE_SIZE..other * PAGE_SIZE + 10).is_ok());
                    let err = f.bytes(pos..pos + 1).unwrap_err().to_string();
                    assert!(err.contains("checksum mismatch"), "{err}");
                    assert!(f.verify_all().is_err());
                }
            }
        }
    }

    #[test]
    fn alignment_pads_only_when_it_saves_a_page() {
        assert_eq!(pad_saving_a_page(0, 100), 0);
        assert_eq!(pad_saving_a_page(4000, 96), 0);
        assert_eq!(pad_saving_a_page(4000, 97), 96);
        assert_eq!(pad_saving_a_page(4000, 5000), 0);
        assert_eq!(pad_saving_a_page(4096, 4096), 0);
    }

    /// Resident kilobytes of the mapping of `path` in this process.
    fn mapped_rss_kb(path: &Path) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let name = path.to_str().unwrap();
        let mut lines = smaps.lines();
        let mut total = 0;
        while let Some(l) = lines.next() {
            if l.ends_with(name) {
                for l in lines.by_ref() {
                    if let Some(v) = l.strip_prefix("Rss:") {
                        total += v.trim().trim_end_matches(" kB").trim().parse::<u64>().unwrap();
                        break;
                    }
                }
            }
        }
        total
    }

    #[test]
    fn release_drops_resident_pages_and_keeps_the_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        let content: Vec<u8> = (0..8usize << 20).map(|i| (i * 7 + i / 4096) as u8).collect();
        write(&path, &content);
        let f = IndexFile::open(&path, Tier::Mmap).unwrap();
        assert_eq!(f.all().unwrap(), &content[..]);
        let before = mapped_rss_kb(&path);
        assert!(before >= 8 << 10, "{before} kB resident after reading 8 MiB");
        // Released in two steps, off page boundaries (only whole pages go).
        f.release(100..(3 << 20) + 5);
        f.release((3 << 20) + 5..f.len());
        let after = mapped_rss_kb(&path);
        // The first page (partly outside the range), the checksum table and
        // the footer stay.
        assert!(after <= 32, "{after} kB resident after release");
        assert_eq!(f.bytes(0..4096).unwrap(), &content[..4096], "the bytes come back");
        assert_eq!(f.all().unwrap(), &content[..]);
        // Other tiers hold nothing to release.
        let b = IndexFile::open(&path, Tier::Buffered).unwrap();
        b.release(0..b.len());
        let mut buf = Vec::new();
        assert_eq!(b.read(5000..6000, &mut buf).unwrap(), &content[5000..6000]);
    }

    #[test]
    fn appended_files_read_and_check_as_if_written_in_place() {
        let dir = tempfile::tempdir().unwrap();
        for (head, part_len) in [
            (0usize, 9000usize),
            (4096, 8192),
            (5000, 100),
            (8192, 0),
            (100, 4096 * 3 + 1),
        ] {
            let content: Vec<u8> = (0..head + 4096 + part_len).map(|i| (i * 13 + i / 7) as u8).collect();
            let part: Vec<u8> = (0..part_len).map(|i| (i * 31 + 5) as u8).collect();
            let part_path = dir.path().join("part");
            write(&part_path, &part);
            let from = IndexFile::open(&part_path, Tier::Buffered).unwrap();
            // head bytes, padding to the page, the part, then more.
            let mut w = FileWriter::create(dir.path().join("joined")).unwrap();
            w.write_all(&content[..head]).unwrap();
            w.write_zeros((PAGE_SIZE - head % PAGE_SIZE) % PAGE_SIZE).unwrap();
            w.append(&from).unwrap();
            w.write_all(b"after").unwrap();
            let info = w.finish().unwrap();
            let mut expected = content[..head].to_vec();
            expected.resize(head.div_ceil(PAGE_SIZE) * PAGE_SIZE, 0);
            expected.extend_from_slice(&part);
            expected.extend_from_slice(b"after");
            let direct = write(&dir.path().join("direct"), &expected);
            assert_eq!(info, direct, "head {head}, part {part_len}");
            let f = IndexFile::open(dir.path().join("joined"), Tier::Mmap).unwrap();
            f.verify_all().unwrap();
            assert_eq!(f.all().unwrap(), &expected[..]);
        }
        // Off a page boundary, an append is refused.
        let from = IndexFile::open(dir.path().join("part"), Tier::Buffered).unwrap();
        let mut w = FileWriter::create(dir.path().join("bad")).unwrap();
        w.write_all(b"x").unwrap();
        assert!(w.append(&from).is_err());
    }
}
