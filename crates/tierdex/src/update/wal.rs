//! The write-ahead log: batches of additions and deletions made durable
//! before they are acknowledged (DESIGN §5).
//!
//! * Files `wal-<first seq>.log` in the index directory, each starting with
//!   a header (magic, first sequence number). Records follow:
//!   `[payload length u32][seq u64][xxh3 of seq and payload u64][payload]`,
//!   the payload being the batch as JSON.
//! * [`Wal::append`] writes the record and returns once an `fdatasync`
//!   covers it. Concurrent appenders share syncs (group commit): one of them
//!   syncs everything written so far while the others wait for it.
//! * [`Wal::open`] replays every file. Only the unacknowledged tail can be
//!   torn by a crash: a record that is cut short or fails its checksum, with
//!   nothing valid after it, is dropped and the file truncated before it. A
//!   bad record followed by a valid one is corruption, reported with the
//!   file and offset, never skipped.
//! * [`Wal::checkpoint`] starts a new file and deletes the files whose
//!   records are all applied to the index.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::schema::Document;

const MAGIC: &[u8; 8] = b"TDXWAL01";
const HEADER: usize = 16;
const RECORD_HEADER: usize = 20;
/// Largest payload accepted (a batch of this size is almost certainly a bug).
const MAX_PAYLOAD: usize = 1 << 30;

/// One change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    /// Add (or replace, by id) a document.
    Add(Document),
    /// Delete the document with this external id.
    Delete(String),
}

/// What [`Wal::open`] found.
#[derive(Debug, Default)]
pub struct Replay {
    /// Every batch in the log, in order, with its sequence number.
    pub batches: Vec<(u64, Vec<Op>)>,
    /// Bytes of a torn tail that were dropped (never acknowledged).
    pub torn_bytes: u64,
}

/// Counters of an open log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct WalStats {
    /// Batches appended since open.
    pub appends: u64,
    /// Bytes appended since open.
    pub bytes: u64,
    /// `fdatasync` calls since open (fewer than appends under group commit).
    pub syncs: u64,
}

struct State {
    file: Arc<File>,
    path: PathBuf,
    /// First sequence number of the current file.
    file_first: u64,
    next_seq: u64,
    written: u64,
    synced: u64,
    syncing: bool,
    /// A failed sync: the log cannot promise durability any more.
    failed: Option<String>,
    stats: WalStats,
}

/// An open write-ahead log.
pub struct Wal {
    dir: PathBuf,
    state: Mutex<State>,
    synced: Condvar,
}

fn file_name(first: u64) -> String {
    format!("wal-{first:020}.log")
}

/// The log files in `dir`, by first sequence number.
fn list(dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let e = e.map_err(|e| Error::io(dir, e))?;
        let name = e.file_name();
        let name = name.to_string_lossy();
        if let Some(n) = name.strip_prefix("wal-").and_then(|r| r.strip_suffix(".log")) {
            if let Ok(first) = n.parse::<u64>() {
                out.push((first, e.path()));
            }
        }
    }
    out.sort();
    Ok(out)
}

fn checksum(seq: u64, payload: &[u8]) -> u64 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(&seq.to_le_bytes());
    h.update(payload);
    h.digest()
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(dir, e))
}

/// A record parsed at `at` in `bytes`: its sequence number, payload and end.
fn record(bytes: &[u8], at: usize) -> Option<(u64, &[u8], usize)> {
    let head = bytes.get(at..at + RECORD_HEADER)?;
    let len = u32::from_le_bytes(head[0..4].try_into().unwrap()) as usize;
    let seq = u64::from_le_bytes(head[4..12].try_into().unwrap());
    let sum = u64::from_le_bytes(head[12..20].try_into().unwrap());
    if len > MAX_PAYLOAD {
        return None;
    }
    let payload = bytes.get(at + RECORD_HEADER..at + RECORD_HEADER + len)?;
    (checksum(seq, payload) == sum).then_some((seq, payload, at + RECORD_HEADER + len))
}

impl Wal {
    /// Opens the log in `dir` and replays it. `applied` is the last sequence
    /// number the index already holds (0 for none): a new log starts after
    /// it, and an existing one must not start later than the next one.
    pub fn open(dir: &Path, applied: u64) -> Result<(Wal, Replay)> {
        let files = list(dir)?;
        let mut replay = Replay::default();
        if let Some((first, path)) = files.first() {
            if *first > applied + 1 {
                return Err(Error::corrupt(
                    path,
                    format!("the log starts at record {first} but the index holds only up to {applied}: records are missing"),
                ));
            }
        }
        let mut expected: Option<u64> = None;
        let mut last: Option<(u64, PathBuf, u64)> = None;
        for (i, (first, path)) in files.iter().enumerate() {
            let mut bytes = Vec::new();
            File::open(path)
                .and_then(|mut f| f.read_to_end(&mut bytes))
                .map_err(|e| Error::io(path, e))?;
            let is_last = i + 1 == files.len();
            if bytes.len() < HEADER || &bytes[..8] != MAGIC {
                if is_last && bytes.len() < HEADER && MAGIC.starts_with(&bytes[..bytes.len().min(8)]) {
                    // Created but its header never fully reached the disk.
                    replay.torn_bytes += bytes.len() as u64;
                    std::fs::remove_file(path).map_err(|e| Error::io(path, e))?;
                    continue;
                }
                return Err(Error::corrupt(path, "not a tierdex write-ahead log (bad header)"));
            }
            let header_first = u64::from_le_bytes(bytes[8..16].try_into().unwrap());
            if header_first != *first {
                return Err(Error::corrupt(
                    path,
                    format!("header says the file starts at {header_first}, its name says {first}"),
                ));
            }
            if let Some(e) = expected {
                if *first != e {
                    return Err(Error::corrupt(
                        path,
                        format!("starts at {first}, expected {e}: records are missing"),
                    ));
                }
            }
            let mut seq = *first;
            let mut at = HEADER;
            while at < bytes.len() {
                match record(&bytes, at) {
                    Some((s, payload, end)) if s == seq => {
                        let ops: Vec<Op> = serde_json::from_slice(payload)
                            .map_err(|e| Error::corrupt(path, format!("record {s} at offset {at}: {e}")))?;
                        replay.batches.push((s, ops));
                        seq += 1;
                        at = end;
                    }
                    Some((s, _, _)) => {
                        return Err(Error::corrupt(
                            path,
                            format!("record at offset {at} has sequence number {s}, expected {seq}"),
                        ));
                    }
                    None => {
                        // A torn tail, unless a valid record follows the bad one.
                        let declared = bytes
                            .get(at..at + 4)
                            .map(|l| at + RECORD_HEADER + u32::from_le_bytes(l.try_into().unwrap()) as usize);
                        let more = declared.is_some_and(|end| record(&bytes, end).is_some());
                        if more || !is_last {
                            return Err(Error::corrupt(
                                path,
                                format!("record {seq} at offset {at} fails its checksum, and the log goes on after it"),
                            ));
                        }
                        replay.torn_bytes += (bytes.len() - at) as u64;
                        let f = OpenOptions::new()
                            .write(true)
                            .open(path)
                            .map_err(|e| Error::io(path, e))?;
                        f.set_len(at as u64)
                            .and_then(|_| f.sync_all())
                            .map_err(|e| Error::io(path, e))?;
                        break;
                    }
                }
            }
            expected = Some(seq);
            last = Some((*first, path.clone(), seq));
        }
        let (file_first, path, next_seq) = match last {
            Some(l) => l,
            None => {
                let first = applied + 1;
                let path = dir.join(file_name(first));
                Self::create_file(dir, &path, first)?;
                (first, path, first)
            }
        };
        let file = OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        let wal = Wal {
            dir: dir.to_path_buf(),
            state: Mutex::new(State {
                file: Arc::new(file),
                path,
                file_first,
                next_seq,
                written: next_seq - 1,
                synced: next_seq - 1,
                syncing: false,
                failed: None,
                stats: WalStats::default(),
            }),
            synced: Condvar::new(),
        };
        Ok((wal, replay))
    }

    fn create_file(dir: &Path, path: &Path, first: u64) -> Result<File> {
        let mut f = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        let mut header = [0u8; HEADER];
        header[..8].copy_from_slice(MAGIC);
        header[8..].copy_from_slice(&first.to_le_bytes());
        f.write_all(&header)
            .and_then(|_| f.sync_all())
            .map_err(|e| Error::io(path, e))?;
        sync_dir(dir)?;
        Ok(f)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends `batch` and returns its sequence number once it is durable.
    pub fn append(&self, batch: &[Op]) -> Result<u64> {
        let seq = self.write(batch)?;
        self.sync(seq)?;
        Ok(seq)
    }

    /// Writes `batch` to the log without waiting for it to be durable, and
    /// returns its sequence number (records are numbered in write order).
    /// [`Wal::sync`] makes it durable.
    pub fn write(&self, batch: &[Op]) -> Result<u64> {
        let payload = serde_json::to_vec(batch).map_err(|e| Error::Internal(format!("batch: {e}")))?;
        if payload.len() > MAX_PAYLOAD {
            return Err(Error::InvalidArgument(format!(
                "a batch of {} bytes is larger than the log's limit of {MAX_PAYLOAD}: split it",
                payload.len()
            )));
        }
        let mut st = self.lock();
        if let Some(why) = &st.failed {
            return Err(Error::io(&st.path, std::io::Error::other(why.clone())));
        }
        let seq = st.next_seq;
        let mut rec = Vec::with_capacity(RECORD_HEADER + payload.len());
        rec.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        rec.extend_from_slice(&seq.to_le_bytes());
        rec.extend_from_slice(&checksum(seq, &payload).to_le_bytes());
        rec.extend_from_slice(&payload);
        if let Err(e) = (&*st.file).write_all(&rec) {
            // The file may now end in part of this record: nothing after it
            // could be trusted, so the log refuses further appends.
            st.failed = Some(format!("write failed: {e}"));
            return Err(Error::io(&st.path, e));
        }
        st.next_seq += 1;
        st.written = seq;
        st.stats.appends += 1;
        st.stats.bytes += rec.len() as u64;
        Ok(seq)
    }

    /// Returns once record `seq` (and every record before it) is durable.
    /// Concurrent callers share `fdatasync`s (group commit).
    pub fn sync(&self, seq: u64) -> Result<()> {
        let mut st = self.lock();
        loop {
            if let Some(why) = &st.failed {
                return Err(Error::io(&st.path, std::io::Error::other(why.clone())));
            }
            if st.synced >= seq {
                return Ok(());
            }
            if st.syncing {
                st = self.synced.wait(st).unwrap_or_else(|p| p.into_inner());
                continue;
            }
            // Lead a sync of everything written so far.
            st.syncing = true;
            let (file, target) = (st.file.clone(), st.written);
            drop(st);
            let r = file.sync_data();
            st = self.lock();
            st.syncing = false;
            st.stats.syncs += 1;
            match r {
                Ok(()) => st.synced = st.synced.max(target),
                Err(e) => st.failed = Some(format!("fdatasync failed: {e}")),
            }
            self.synced.notify_all();
        }
    }

    /// Records up to `applied` are in the index for good: starts a new file
    /// and deletes the files holding only such records.
    pub fn checkpoint(&self, applied: u64) -> Result<()> {
        let mut st = self.lock();
        if st.next_seq > st.file_first {
            // The old file must not keep an unsynced tail once a newer file
            // exists: replay treats only the last file's tail as torn.
            if st.synced < st.written {
                let path = st.path.clone();
                st.file.sync_data().map_err(|e| Error::io(&path, e))?;
                st.synced = st.written;
                st.stats.syncs += 1;
            }
            let path = self.dir.join(file_name(st.next_seq));
            let file = Self::create_file(&self.dir, &path, st.next_seq)?;
            st.file = Arc::new(file);
            st.path = path;
            st.file_first = st.next_seq;
        }
        let current = st.file_first;
        drop(st);
        let files = list(&self.dir)?;
        for (i, (_, path)) in files.iter().enumerate() {
            // A file's records end where the next file starts.
            let Some(&(next_first, _)) = files.get(i + 1) else {
                break;
            };
            if next_first <= current && next_first - 1 <= applied {
                std::fs::remove_file(path).map_err(|e| Error::io(path, e))?;
            }
        }
        sync_dir(&self.dir)
    }

    /// The sequence number the next batch will get.
    pub fn next_seq(&self) -> u64 {
        self.lock().next_seq
    }

    /// Counters since open.
    pub fn stats(&self) -> WalStats {
        self.lock().stats
    }
}

#[cfg(test)]
mod tests;
