//! Snapshots: copies of indices at a point in time, kept in a repository on
//! a file system and restored into new index directories (DESIGN §11).
//!
//! A repository is a directory holding
//! * `tierdex-repository.json`, which says what it is;
//! * `blobs/`, the copied files, each named by what identifies its content
//!   (the file's name, length and checksum), so that a file several
//!   snapshots hold is stored once: segment files are never changed once
//!   written, so successive snapshots of an index share most of theirs;
//! * `snapshots/{name}.json`, one per complete snapshot: for each index its
//!   manifest and the blob of each of its files, with a checksum of its own;
//! * `lock`, taken (`flock`) while a snapshot is taken or deleted
//!   (exclusively) or restored (shared).
//!
//! Taking a snapshot of an index: its writer flushes, so the last commit
//! holds every write acknowledged before the snapshot began; the files of
//! that commit are *pinned* — hard-linked into a staging directory inside
//! the index directory, which a merge that removes them later does not
//! disturb — except an in-place index's chain file and log, the only files
//! a writer changes after writing them, which are copied up to their
//! committed lengths under a reader's lease ([`crate::index::lease`]) so
//! that the writer does not reuse their space meanwhile. Writes go on while
//! the pinned files are copied into the repository. Each blob is written
//! aside, synced, checked against its checksums and renamed; the snapshot's
//! file is written last (aside, synced, renamed), so a snapshot that a
//! crash interrupts is absent, never partial. What it left behind (blobs no
//! snapshot names, temporary files, a staging directory) is removed by the
//! repository's next snapshot or deletion, and by the next writer that
//! opens the index.
//!
//! Restoring copies an index's blobs into a new directory beside the
//! target, checks every file against its checksums, writes the manifest,
//! opens the result with every page verified, and renames it into place.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::{xxh3_64, Xxh3};

use crate::error::{Error, Result};
use crate::index::lease::ReaderLease;
use crate::index::manifest::{Manifest, SegmentMeta, CHAIN_EXT, CHAIN_LOG_EXT};
use crate::index::{Index, OpenOptions, SNAPSHOT_STAGING};
use crate::storage::{mode, IndexFile, Tier};
use crate::update::IndexWriter;

/// The file that marks a directory as a repository.
const MARKER: &str = "tierdex-repository.json";
/// The directory of the blobs.
const BLOBS: &str = "blobs";
/// The directory of the snapshots' files.
const SNAPSHOTS: &str = "snapshots";
/// The repository's lock file.
const LOCK: &str = "lock";
/// The repository format this build writes and reads.
const REPOSITORY_FORMAT: u32 = 1;
/// Attempts at pinning a commit that a writer keeps replacing.
const PIN_ATTEMPTS: u32 = 20;

#[derive(Debug, Serialize, Deserialize)]
struct RepositoryMarker {
    format: u32,
}

/// How a file's content is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileCheck {
    /// An index file with page checksums; the value is its fingerprint
    /// ([`crate::storage::FileInfo::checksum`]).
    Pages,
    /// Raw bytes (an in-place chain or its log); the value is the xxh3 of
    /// the whole content.
    Content,
}

/// One file of a snapshotted index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotFile {
    /// Its name in the index directory.
    pub name: String,
    /// The blob holding it.
    pub blob: String,
    /// Its length in bytes.
    pub len: u64,
    /// How its content is checked.
    pub check: FileCheck,
    /// The value its check must give.
    pub checksum: u64,
}

/// One index of a snapshot.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SnapshotIndex {
    /// The index's manifest at the snapshot's point.
    pub manifest: Manifest,
    /// Its files.
    pub files: Vec<SnapshotFile>,
    /// What the caller keeps with the index (a server: its settings).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub metadata: serde_json::Value,
}

impl SnapshotIndex {
    /// Documents not deleted.
    pub fn live_docs(&self) -> u64 {
        self.manifest.live_docs()
    }

    /// Bytes of its files.
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.len).sum()
    }
}

/// A complete snapshot.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SnapshotInfo {
    /// Its name in the repository.
    pub name: String,
    /// A name no other snapshot has, even one deleted and taken again.
    pub uuid: String,
    /// When it began, milliseconds since the Unix epoch.
    pub start_ms: u64,
    /// When it was complete.
    pub end_ms: u64,
    /// Its indices by name.
    pub indices: BTreeMap<String, SnapshotIndex>,
    /// Bytes this snapshot copied into the repository (the rest of its
    /// files were there already, shared with other snapshots).
    pub bytes_added: u64,
    /// What the caller kept with the snapshot (Elasticsearch's `metadata`).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub metadata: serde_json::Value,
    /// Hash of everything above, checked on load.
    #[serde(default)]
    pub checksum: String,
}

impl SnapshotInfo {
    fn compute_checksum(&self) -> String {
        let mut unsummed = self.clone();
        unsummed.checksum.clear();
        let bytes = serde_json::to_vec(&unsummed).expect("snapshot serialises");
        format!("{:016x}", xxh3_64(&bytes))
    }

    /// Bytes of all its files.
    pub fn bytes(&self) -> u64 {
        self.indices.values().map(SnapshotIndex::bytes).sum()
    }
}

/// An index to put in a snapshot.
pub struct SnapshotSource<'a> {
    /// Its name in the snapshot.
    pub name: String,
    /// Its writer (flushed first, so the snapshot holds every write
    /// acknowledged before it began).
    pub writer: &'a IndexWriter,
    /// Kept with the index in the snapshot (see [`SnapshotIndex::metadata`]).
    pub metadata: serde_json::Value,
}

/// A snapshot repository on a file system (see the module documentation).
#[derive(Debug, Clone)]
pub struct Repository {
    root: PathBuf,
    /// Most bytes per second a snapshot copies into the repository.
    max_bytes_per_sec: Option<u64>,
}

impl Repository {
    /// Opens the repository at `root`, creating it when `root` is missing
    /// or an empty directory. A directory holding anything else is refused.
    pub fn create(root: &Path) -> Result<Repository> {
        if root.join(MARKER).is_file() {
            return Repository::open(root);
        }
        match std::fs::read_dir(root) {
            Ok(mut entries) => {
                if entries.next().is_some() {
                    return Err(Error::Conflict(format!(
                        "{} is not empty and is not a tierdex snapshot repository; refusing to write into it",
                        root.display()
                    )));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(root, e)),
        }
        for sub in [BLOBS, SNAPSHOTS] {
            mode::create_dir_all(&root.join(sub)).map_err(|e| Error::io(root.join(sub), e))?;
        }
        let marker = serde_json::to_vec_pretty(&RepositoryMarker {
            format: REPOSITORY_FORMAT,
        })
        .expect("marker serialises");
        write_atomically(&root.join(MARKER), &marker)?;
        Repository::open(root)
    }

    /// Opens the existing repository at `root`.
    pub fn open(root: &Path) -> Result<Repository> {
        let path = root.join(MARKER);
        let text = match std::fs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::NotFound(format!(
                    "{} is not a tierdex snapshot repository (no {MARKER})",
                    root.display()
                )))
            }
            Err(e) => return Err(Error::io(&path, e)),
        };
        let marker: RepositoryMarker = serde_json::from_slice(&text)
            .map_err(|e| Error::corrupt(&path, format!("invalid repository marker: {e}")))?;
        if marker.format != REPOSITORY_FORMAT {
            return Err(Error::corrupt(
                &path,
                format!(
                    "repository format {} is not supported (this build reads {REPOSITORY_FORMAT})",
                    marker.format
                ),
            ));
        }
        for sub in [BLOBS, SNAPSHOTS] {
            if !root.join(sub).is_dir() {
                return Err(Error::corrupt(root.join(sub), "the repository lacks this directory"));
            }
        }
        Ok(Repository {
            root: root.to_path_buf(),
            max_bytes_per_sec: None,
        })
    }

    /// Limits how fast a snapshot copies files into the repository, so
    /// that it leaves the disks their share for searches and writes (as
    /// Elasticsearch's `max_snapshot_bytes_per_sec`); `None`: no limit.
    pub fn with_max_bytes_per_sec(mut self, rate: Option<u64>) -> Repository {
        self.max_bytes_per_sec = rate.filter(|r| *r > 0);
        self
    }

    /// The repository's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn snapshot_path(&self, name: &str) -> PathBuf {
        self.root.join(SNAPSHOTS).join(format!("{name}.json"))
    }

    fn lock_file(&self) -> Result<File> {
        let path = self.root.join(LOCK);
        mode::create_options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io(&path, e))
    }

    /// The exclusive lock of a snapshot or a deletion.
    fn lock_exclusive(&self) -> Result<File> {
        let f = self.lock_file()?;
        match f.try_lock() {
            Ok(()) => Ok(f),
            Err(std::fs::TryLockError::WouldBlock) => Err(Error::Conflict(format!(
                "another snapshot, deletion or restore is under way in repository {}; try again when it is done",
                self.root.display()
            ))),
            Err(std::fs::TryLockError::Error(e)) => Err(Error::io(self.root.join(LOCK), e)),
        }
    }

    /// The shared lock of a restore.
    fn lock_shared(&self) -> Result<File> {
        let f = self.lock_file()?;
        match f.try_lock_shared() {
            Ok(()) => Ok(f),
            Err(std::fs::TryLockError::WouldBlock) => Err(Error::Conflict(format!(
                "a snapshot or deletion is under way in repository {}; try again when it is done",
                self.root.display()
            ))),
            Err(std::fs::TryLockError::Error(e)) => Err(Error::io(self.root.join(LOCK), e)),
        }
    }

    /// The complete snapshots, oldest first. A snapshot file that does not
    /// check is an error naming it.
    pub fn snapshots(&self) -> Result<Vec<SnapshotInfo>> {
        let mut out = Vec::new();
        for name in self.snapshot_names()? {
            out.push(self.snapshot(&name)?);
        }
        out.sort_by(|a, b| (a.start_ms, &a.name).cmp(&(b.start_ms, &b.name)));
        Ok(out)
    }

    fn snapshot_names(&self) -> Result<Vec<String>> {
        let dir = self.root.join(SNAPSHOTS);
        let mut names = Vec::new();
        for e in std::fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))? {
            let e = e.map_err(|e| Error::io(&dir, e))?;
            let file = e.file_name().to_string_lossy().into_owned();
            if let Some(name) = file.strip_suffix(".json") {
                if !name.starts_with('.') {
                    names.push(name.to_string());
                }
            }
        }
        names.sort();
        Ok(names)
    }

    /// The complete snapshot `name`.
    pub fn snapshot(&self, name: &str) -> Result<SnapshotInfo> {
        let path = self.snapshot_path(name);
        let text = match std::fs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::NotFound(format!(
                    "no snapshot [{name}] in repository {}",
                    self.root.display()
                )))
            }
            Err(e) => return Err(Error::io(&path, e)),
        };
        let info: SnapshotInfo =
            serde_json::from_slice(&text).map_err(|e| Error::corrupt(&path, format!("invalid snapshot file: {e}")))?;
        if info.checksum != info.compute_checksum() {
            return Err(Error::corrupt(
                &path,
                "snapshot file checksum mismatch (edited or damaged)",
            ));
        }
        if info.name != name {
            return Err(Error::corrupt(
                &path,
                format!("the file holds snapshot [{}], not [{name}]", info.name),
            ));
        }
        Ok(info)
    }

    /// Takes snapshot `name` of `sources` (see the module documentation),
    /// keeping `metadata` with it; `progress` hears of the bytes copied so
    /// far and in all.
    pub fn take(
        &self,
        name: &str,
        sources: &[SnapshotSource<'_>],
        metadata: serde_json::Value,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<SnapshotInfo> {
        check_name(name)?;
        let mut seen = BTreeSet::new();
        for s in sources {
            if !seen.insert(s.name.as_str()) {
                return Err(Error::InvalidArgument(format!(
                    "index [{}] is named twice in one snapshot",
                    s.name
                )));
            }
        }
        if sources.is_empty() {
            return Err(Error::InvalidArgument("a snapshot needs at least one index".into()));
        }
        let _lock = self.lock_exclusive()?;
        if self.snapshot_path(name).exists() {
            return Err(Error::Conflict(format!(
                "snapshot [{name}] already exists in repository {}",
                self.root.display()
            )));
        }
        self.collect_garbage()?;
        let start_ms = now_ms();
        let mut pinned = Vec::with_capacity(sources.len());
        for s in sources {
            s.writer.flush()?;
            pinned.push(Pinned::pin(s.writer.dir())?);
        }
        let total: u64 = pinned.iter().flat_map(|p| &p.files).map(|f| f.len).sum();
        let mut done = 0;
        let mut bytes_added = 0;
        progress(0, total);
        let blobs = self.root.join(BLOBS);
        let mut throttle = Throttle::new(self.max_bytes_per_sec);
        for p in &pinned {
            for f in &p.files {
                let blob = blobs.join(&f.blob);
                if !blob.exists() {
                    let tmp = blobs.join(format!(".tmp-{}", unique()));
                    let from = p.staging.join(&f.name);
                    let result = File::open(&from)
                        .map_err(|e| Error::io(&from, e))
                        .and_then(|mut src| copy_open(&mut src, &from, &tmp, None, &mut throttle))
                        .and_then(|_| check_file(&tmp, f.check, f.checksum, f.len))
                        .and_then(|_| std::fs::rename(&tmp, &blob).map_err(|e| Error::io(&blob, e)));
                    if let Err(e) = result {
                        let _ = std::fs::remove_file(&tmp);
                        return Err(e);
                    }
                    bytes_added += f.len;
                }
                done += f.len;
                progress(done, total);
            }
        }
        sync_dir(&blobs)?;
        let mut info = SnapshotInfo {
            name: name.to_string(),
            uuid: format!("{:016x}", xxh3_64(unique().as_bytes())),
            start_ms,
            end_ms: now_ms(),
            indices: sources
                .iter()
                .zip(&pinned)
                .map(|(s, p)| {
                    let index = SnapshotIndex {
                        manifest: p.manifest.clone(),
                        files: p.files.clone(),
                        metadata: s.metadata.clone(),
                    };
                    (s.name.clone(), index)
                })
                .collect(),
            bytes_added,
            metadata,
            checksum: String::new(),
        };
        info.checksum = info.compute_checksum();
        let text = serde_json::to_vec_pretty(&info).expect("snapshot serialises");
        write_atomically(&self.snapshot_path(name), &text)?;
        drop(pinned);
        tracing::info!(
            "snapshot [{name}] of {} index(es) in {}: {} bytes, {bytes_added} of them new",
            info.indices.len(),
            self.root.display(),
            total
        );
        Ok(info)
    }

    /// Deletes snapshot `name`, and the blobs no other snapshot holds.
    pub fn delete(&self, name: &str) -> Result<()> {
        let _lock = self.lock_exclusive()?;
        let path = self.snapshot_path(name);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::NotFound(format!(
                    "no snapshot [{name}] in repository {}",
                    self.root.display()
                )))
            }
            Err(e) => return Err(Error::io(&path, e)),
        }
        sync_dir(&self.root.join(SNAPSHOTS))?;
        self.collect_garbage()?;
        Ok(())
    }

    /// Removes what no complete snapshot holds: temporary files and blobs
    /// left by an interrupted snapshot, blobs of deleted ones. Nothing is
    /// removed while a snapshot file cannot be read (it is reported when
    /// listed). The caller holds the exclusive lock.
    fn collect_garbage(&self) -> Result<()> {
        let mut keep = BTreeSet::new();
        let snapshots = self.root.join(SNAPSHOTS);
        for e in std::fs::read_dir(&snapshots).map_err(|e| Error::io(&snapshots, e))? {
            let e = e.map_err(|e| Error::io(&snapshots, e))?;
            let file = e.file_name().to_string_lossy().into_owned();
            if file.starts_with('.') {
                let _ = std::fs::remove_file(e.path());
            }
        }
        for name in self.snapshot_names()? {
            match self.snapshot(&name) {
                Ok(info) => keep.extend(
                    info.indices
                        .values()
                        .flat_map(|i| i.files.iter().map(|f| f.blob.clone())),
                ),
                Err(e) => {
                    tracing::warn!("not removing unused blobs: {e}");
                    return Ok(());
                }
            }
        }
        let blobs = self.root.join(BLOBS);
        for e in std::fs::read_dir(&blobs).map_err(|e| Error::io(&blobs, e))? {
            let e = e.map_err(|e| Error::io(&blobs, e))?;
            let file = e.file_name().to_string_lossy().into_owned();
            if !keep.contains(&file) {
                std::fs::remove_file(e.path()).map_err(|err| Error::io(e.path(), err))?;
            }
        }
        Ok(())
    }

    /// Restores index `index` of snapshot `snapshot` into `dest`, which
    /// must not exist (or be an empty directory); returns what was
    /// restored. `progress` hears of the bytes copied so far and in all.
    pub fn restore(
        &self,
        snapshot: &str,
        index: &str,
        dest: &Path,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<SnapshotIndex> {
        let _lock = self.lock_shared()?;
        let info = self.snapshot(snapshot)?;
        let entry = info.indices.get(index).ok_or_else(|| {
            Error::NotFound(format!(
                "snapshot [{snapshot}] holds no index [{index}] (it holds: {})",
                info.indices.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
        })?;
        match std::fs::read_dir(dest) {
            Ok(mut entries) => {
                if entries.next().is_some() {
                    return Err(Error::Conflict(format!(
                        "{} exists and is not empty; restore into a new directory",
                        dest.display()
                    )));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(dest, e)),
        }
        let staging = crate::index::lock::sibling(dest, "restore");
        mode::create_dir_all(&staging).map_err(|e| Error::io(&staging, e))?;
        let result = (|| -> Result<()> {
            let total = entry.bytes();
            let mut done = 0;
            progress(0, total);
            for f in &entry.files {
                let to = staging.join(&f.name);
                copy_file(&self.root.join(BLOBS).join(&f.blob), &to)?;
                check_file(&to, f.check, f.checksum, f.len)?;
                done += f.len;
                progress(done, total);
            }
            let mut manifest = entry.manifest.clone();
            manifest.store(&staging)?;
            let verified = Index::open(
                &staging,
                OpenOptions {
                    verify: true,
                    ..OpenOptions::default()
                },
            )?;
            drop(verified);
            let readers = staging.join(crate::index::lease::READERS_DIR);
            if readers.exists() {
                std::fs::remove_dir_all(&readers).map_err(|e| Error::io(&readers, e))?;
            }
            sync_dir(&staging)?;
            if dest.exists() {
                std::fs::remove_dir(dest).map_err(|e| Error::io(dest, e))?;
            }
            std::fs::rename(&staging, dest).map_err(|e| Error::io(dest, e))?;
            if let Some(parent) = dest.parent().filter(|p| !p.as_os_str().is_empty()) {
                sync_dir(parent)?;
            }
            Ok(())
        })();
        if let Err(e) = result {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(e);
        }
        tracing::info!(
            "restored index [{index}] of snapshot [{snapshot}] into {}",
            dest.display()
        );
        Ok(entry.clone())
    }
}

/// A snapshot or index name: 1 to 255 of `a-z 0-9 . _ - +`, not starting
/// with `.`, `_`, `-` or `+`.
pub fn check_name(name: &str) -> Result<()> {
    let ok_chars = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-' | '+'));
    let ok_start = !name.starts_with(['.', '_', '-', '+']);
    if name.is_empty() || name.len() > 255 || !ok_chars || !ok_start {
        return Err(Error::InvalidArgument(format!(
            "invalid snapshot name [{name}]: use 1 to 255 of lowercase letters, digits, `.`, `_`, `-` and `+`, \
             not starting with `.`, `_`, `-` or `+`"
        )));
    }
    Ok(())
}

/// The files of one commit of an index, kept in a staging directory
/// inside it (removed when dropped).
struct Pinned {
    staging: PathBuf,
    manifest: Manifest,
    files: Vec<SnapshotFile>,
}

/// Why pinning must start over.
enum PinError {
    /// A file the manifest named is gone: a newer commit replaced it.
    Moved,
    /// Anything else.
    Failed(Error),
}

impl From<Error> for PinError {
    fn from(e: Error) -> PinError {
        PinError::Failed(e)
    }
}

impl Pinned {
    /// Pins the last commit of the index in `dir`.
    fn pin(dir: &Path) -> Result<Pinned> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let manifest = Manifest::load(dir)?;
            let generation = manifest.generation;
            let lease = match manifest.segments.iter().any(|s| s.chain.is_some()) {
                true => {
                    let l = ReaderLease::take(dir, generation)?;
                    // The writer may have reused space of this generation
                    // before it saw the lease: start over.
                    if Manifest::load(dir)?.generation >= generation + 2 {
                        if attempt >= PIN_ATTEMPTS {
                            return Err(Error::Unavailable(format!(
                                "{} changed {PIN_ATTEMPTS} times while its commit was being pinned",
                                dir.display()
                            )));
                        }
                        continue;
                    }
                    Some(l)
                }
                false => None,
            };
            let staging = dir.join(format!("{SNAPSHOT_STAGING}{}", unique()));
            mode::create_dir(&staging).map_err(|e| Error::io(&staging, e))?;
            let mut pinned = Pinned {
                staging,
                manifest,
                files: Vec::new(),
            };
            match pinned.stage(dir) {
                Ok(()) => {
                    drop(lease);
                    return Ok(pinned);
                }
                Err(PinError::Moved) if attempt < PIN_ATTEMPTS => continue,
                Err(PinError::Moved) => {
                    return Err(Error::Unavailable(format!(
                        "{} changed {PIN_ATTEMPTS} times while its commit was being pinned",
                        dir.display()
                    )))
                }
                Err(PinError::Failed(e)) => return Err(e),
            }
        }
    }

    /// Links (or copies) every file of the manifest into the staging
    /// directory.
    fn stage(&mut self, dir: &Path) -> std::result::Result<(), PinError> {
        let mut wanted = Vec::new();
        for s in &self.manifest.segments {
            segment_files(s, &mut wanted);
        }
        for (name, kind) in wanted {
            let from = dir.join(&name);
            let to = self.staging.join(&name);
            let file = match kind {
                Wanted::Pages(info) => {
                    if let Err(e) = std::fs::hard_link(&from, &to) {
                        if e.kind() == std::io::ErrorKind::NotFound {
                            return Err(PinError::Moved);
                        }
                        // A file system without hard links: copy. An open
                        // file stays readable if the writer removes it.
                        match File::open(&from) {
                            Ok(mut src) => copy_open(&mut src, &from, &to, None, &mut Throttle::new(None))?,
                            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(PinError::Moved),
                            Err(e) => return Err(Error::io(&from, e).into()),
                        };
                    }
                    let len = std::fs::metadata(&to).map_err(|e| Error::io(&to, e))?.len();
                    SnapshotFile {
                        blob: format!("{name}.{:x}.{:016x}", info.content_len, info.checksum),
                        name,
                        len,
                        check: FileCheck::Pages,
                        checksum: info.checksum,
                    }
                }
                Wanted::Committed(len) => {
                    let hash = match File::open(&from) {
                        Ok(mut src) => copy_open(&mut src, &from, &to, Some(len), &mut Throttle::new(None))?,
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound && len == 0 => {
                            File::create(&to).map_err(|e| Error::io(&to, e))?;
                            xxh3_64(&[])
                        }
                        // A compaction replaced the chain since: start over.
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(PinError::Moved),
                        Err(e) => return Err(Error::io(&from, e).into()),
                    };
                    SnapshotFile {
                        blob: format!("{name}.{len:x}.{hash:016x}"),
                        name,
                        len,
                        check: FileCheck::Content,
                        checksum: hash,
                    }
                }
            };
            self.files.push(file);
        }
        Ok(())
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.staging) {
            tracing::warn!(
                "removing {}: {e} (removed when a writer next opens the index)",
                self.staging.display()
            );
        }
    }
}

/// What a commit holds of one file.
enum Wanted {
    /// An index file, whole.
    Pages(crate::storage::FileInfo),
    /// The first bytes of a file a writer changes (chain, chain log).
    Committed(u64),
}

/// The files of segment `s` (and of its parts).
fn segment_files(s: &SegmentMeta, out: &mut Vec<(String, Wanted)>) {
    for (ext, info) in &s.files {
        out.push((s.file_name(ext), Wanted::Pages(*info)));
    }
    if let Some(d) = &s.deletes {
        out.push((d.file_name(&s.name), Wanted::Pages(d.file)));
    }
    if let Some(c) = &s.chain {
        out.push((s.file_name(CHAIN_EXT), Wanted::Committed(c.file_len)));
        out.push((s.file_name(CHAIN_LOG_EXT), Wanted::Committed(c.log_len)));
        for p in &c.parts {
            segment_files(p, out);
        }
    }
}

/// Copies `src` (opened from `from`) into the new file `to`, at most
/// `limit` bytes (then exactly: a shorter source is corrupt), synced;
/// returns the xxh3 of what was copied.
fn copy_open(src: &mut File, from: &Path, to: &Path, limit: Option<u64>, throttle: &mut Throttle) -> Result<u64> {
    let mut out = mode::create_options()
        .write(true)
        .create_new(true)
        .open(to)
        .map_err(|e| Error::io(to, e))?;
    let mut hash = Xxh3::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut copied = 0u64;
    loop {
        let want = match limit {
            Some(l) => (l - copied).min(buf.len() as u64) as usize,
            None => buf.len(),
        };
        if want == 0 {
            break;
        }
        let n = src.read(&mut buf[..want]).map_err(|e| Error::io(from, e))?;
        if n == 0 {
            if let Some(l) = limit {
                return Err(Error::corrupt(
                    from,
                    format!("the file is {copied} bytes, shorter than the {l} committed"),
                ));
            }
            break;
        }
        hash.update(&buf[..n]);
        out.write_all(&buf[..n]).map_err(|e| Error::io(to, e))?;
        copied += n as u64;
        throttle.pass(n as u64);
    }
    out.sync_all().map_err(|e| Error::io(to, e))?;
    Ok(hash.digest())
}

/// Copies the whole file `from` into the new file `to`, synced.
fn copy_file(from: &Path, to: &Path) -> Result<u64> {
    let mut src = File::open(from).map_err(|e| Error::io(from, e))?;
    copy_open(&mut src, from, to, None, &mut Throttle::new(None))
}

/// Keeps a copy under a rate: sleeps when the bytes so far are ahead of
/// the time so far.
struct Throttle {
    rate: Option<u64>,
    started: std::time::Instant,
    bytes: u64,
}

impl Throttle {
    fn new(rate: Option<u64>) -> Throttle {
        Throttle {
            rate,
            started: std::time::Instant::now(),
            bytes: 0,
        }
    }

    fn pass(&mut self, n: u64) {
        let Some(rate) = self.rate else { return };
        self.bytes += n;
        let due = std::time::Duration::from_secs_f64(self.bytes as f64 / rate as f64);
        if let Some(ahead) = due.checked_sub(self.started.elapsed()) {
            std::thread::sleep(ahead);
        }
    }
}

/// Checks the file at `path` against what the snapshot says of it.
fn check_file(path: &Path, check: FileCheck, checksum: u64, len: u64) -> Result<()> {
    let actual = std::fs::metadata(path).map_err(|e| Error::io(path, e))?.len();
    if actual != len {
        return Err(Error::corrupt(
            path,
            format!("the file is {actual} bytes, not the {len} the snapshot names"),
        ));
    }
    match check {
        FileCheck::Pages => {
            let f = IndexFile::open(path, Tier::Buffered)?;
            if f.checksum() != checksum {
                return Err(Error::corrupt(
                    path,
                    "the file's checksums are not those the snapshot names (another file, or damaged)",
                ));
            }
            f.verify_all()
        }
        FileCheck::Content => {
            let mut src = File::open(path).map_err(|e| Error::io(path, e))?;
            let mut hash = Xxh3::new();
            let mut buf = vec![0u8; 1 << 20];
            loop {
                let n = src.read(&mut buf).map_err(|e| Error::io(path, e))?;
                if n == 0 {
                    break;
                }
                hash.update(&buf[..n]);
            }
            if hash.digest() != checksum {
                return Err(Error::corrupt(path, "content checksum mismatch (damaged)"));
            }
            Ok(())
        }
    }
}

/// Writes `bytes` to `path` atomically: aside, synced, renamed, directory
/// synced.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().expect("a file in a directory");
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        path.file_name().expect("a file name").to_string_lossy(),
        unique()
    ));
    let write = || -> std::io::Result<()> {
        let mut f = mode::create_options().write(true).create_new(true).open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    if let Err(e) = write() {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io(path, e));
    }
    sync_dir(dir)
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(dir, e))
}

/// A string no other call in any process makes (process, counter, time).
fn unique() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{}-{n}-{nanos}", std::process::id())
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
