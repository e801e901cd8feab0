//! The write-ahead log: batches of additions and deletions made durable
//! before they are acknowledged (DESIGN §5).
//!
//! * Files `wal-<first seq>.log` in the index directory; their framing,
//!   and how a torn tail is told from corruption, are
//!   [`crate::index::log`]'s.
//! * [`Wal::write`] appends a record and returns a [`Ticket`];
//!   [`Wal::sync`] returns once an `fdatasync` covers it
//!   ([`Wal::append`] does both). Concurrent appenders share syncs (group
//!   commit): one of them syncs everything written so far while the others
//!   wait for it.
//! * [`Wal::open`] replays every file. Only the unacknowledged tail can be
//!   torn by a crash, and it is dropped (the file truncated before it).
//!   A damaged complete record is corruption, reported with the file and
//!   offset: the log refuses to open until told to truncate it there
//!   ([`Wal::open`]'s `truncate_corrupt`), which drops that record and
//!   every later one.
//! * [`Wal::checkpoint`] starts a new file and deletes the files whose
//!   records are all applied to the index.
//!
//! # Failures
//!
//! A failed append (a full disk) cuts the file back to where the record
//! started, and the batch is reported failed; the log goes on. A failed
//! `fdatasync` is worse: afterwards the kernel may have dropped the dirty
//! pages and a later sync may succeed without writing them, so nothing
//! written since the last good sync can be trusted. The log cuts the file
//! back to the end of the last durable record, syncs the cut, and reports
//! every batch written since as failed (their callers were not
//! acknowledged); sequence numbers go on from the last durable record.
//! Tickets carry the log's *epoch*, which every such cut advances, so that
//! a batch discarded by a cut is never mistaken for a later batch that
//! reuses its number. When the cut itself fails, appends are refused
//! (with the error) until a later append manages it.
//!
//! # A full disk
//!
//! The current file keeps [`RESERVE`] bytes allocated past its end
//! (`fallocate` without changing its size), so that appends go on for a
//! while once the disk is full. When the reserve cannot be renewed, the
//! log says so ([`Wal::space_low`]): the writer then refuses additions and
//! keeps the reserve for deletions, which is how space is given back.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::index::log::{self, TailKind, HEADER, MAGIC, MAX_PAYLOAD};
use crate::schema::Document;
use crate::storage::faults::{self, FaultOp};
use crate::storage::mode;

/// Bytes the current log file keeps allocated past its end.
pub const RESERVE: u64 = 1 << 20;

/// One change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    /// Add (or replace, by id) a document.
    Add(Document),
    /// Delete the document with this external id.
    Delete(String),
    /// The batch brings the index up to this position of an external log
    /// (a cluster node's stream sequence): recorded with the batch, kept in
    /// the manifest by the flush that holds it, and read back with
    /// `IndexWriter::source_seq`, so that a consumer resumes after it.
    Mark(u64),
}

/// What [`Wal::open`] found.
#[derive(Debug, Default)]
pub struct Replay {
    /// Every batch in the log, in order, with its sequence number.
    pub batches: Vec<(u64, Vec<Op>)>,
    /// Bytes of each batch's record, in the order of `batches`.
    pub record_bytes: Vec<u64>,
    /// Bytes of a torn tail that were dropped (never acknowledged).
    pub torn_bytes: u64,
    /// What was cut off at a damaged record, when opened to truncate one.
    pub truncated: Option<String>,
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
    /// Appends or syncs that failed, each cutting the file back.
    pub failures: u64,
}

/// A written batch, to wait for with [`Wal::sync`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ticket {
    /// The batch's sequence number.
    pub seq: u64,
    /// The log's epoch when it was written (see the module doc).
    epoch: u64,
    /// Bytes of its record.
    pub bytes: u64,
}

/// Where a written batch stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Covered by a sync.
    Durable,
    /// Written, not yet synced.
    Pending,
    /// Cut off after a failed sync: it will never be durable.
    Discarded,
}

struct State {
    file: Arc<File>,
    path: PathBuf,
    /// First sequence number of the current file.
    file_first: u64,
    next_seq: u64,
    written: u64,
    synced: u64,
    /// Bytes in the current file, and how many of them a sync covers.
    len: u64,
    synced_len: u64,
    syncing: bool,
    epoch: u64,
    /// For each ended epoch, its last durable record.
    cuts: Vec<(u64, u64)>,
    /// The file may hold bytes past `len` that could not be cut off.
    dirty_tail: bool,
    /// The error that last discarded records, for their callers.
    failure: Option<(i32, String)>,
    /// The file is allocated up to here (see [`RESERVE`]).
    reserved: u64,
    /// The reserve could not be renewed: the disk is full.
    space_low: bool,
    stats: WalStats,
}

impl State {
    fn status(&self, t: Ticket) -> Status {
        if t.epoch == self.epoch {
            return match t.seq <= self.synced {
                true => Status::Durable,
                false => Status::Pending,
            };
        }
        match self.cuts.iter().find(|c| c.0 == t.epoch) {
            Some(&(_, cut)) if t.seq <= cut => Status::Durable,
            _ => Status::Discarded,
        }
    }

    fn failure(&self) -> Error {
        let e = match &self.failure {
            Some((errno, _)) if *errno != 0 => std::io::Error::from_raw_os_error(*errno),
            Some((_, why)) => std::io::Error::other(why.clone()),
            None => std::io::Error::other("the log discarded this batch"),
        };
        Error::io(&self.path, e)
    }
}

/// An open write-ahead log.
pub struct Wal {
    dir: PathBuf,
    state: Mutex<State>,
    synced: Condvar,
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(dir, e))
}

fn errno_of(e: &std::io::Error) -> (i32, String) {
    (e.raw_os_error().unwrap_or(0), e.to_string())
}

impl Wal {
    /// Opens the log in `dir` and replays it. `applied` is the last sequence
    /// number the index already holds (0 for none): a new log starts after
    /// it, and an existing one must not start later than the next one.
    /// A damaged record is an error unless `truncate_corrupt`, which cuts
    /// the log before it (losing it and every later record, as
    /// [`Replay::truncated`] says).
    pub fn open(dir: &Path, applied: u64, truncate_corrupt: bool) -> Result<(Wal, Replay)> {
        let files = log::list(dir)?;
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
        let mut last: Option<(u64, PathBuf, u64, u64)> = None;
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
            let mut cut_here = false;
            while at < bytes.len() {
                match log::record(&bytes, at) {
                    Some((s, payload, end)) if s == seq => {
                        let ops: Vec<Op> = serde_json::from_slice(payload)
                            .map_err(|e| Error::corrupt(path, format!("record {s} at offset {at}: {e}")))?;
                        replay.batches.push((s, ops));
                        replay.record_bytes.push((end - at) as u64);
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
                        let dropped = (bytes.len() - at) as u64;
                        match log::classify(&bytes, at, seq, is_last) {
                            TailKind::Torn => replay.torn_bytes += dropped,
                            TailKind::Corrupt(why) if truncate_corrupt => {
                                let later = files.len() - i - 1;
                                replay.truncated = Some(format!(
                                    "record {seq} at offset {at} of {} ({why}): cut there, dropping {dropped} bytes{}",
                                    path.display(),
                                    match later {
                                        0 => String::new(),
                                        n => format!(" and {n} later log files"),
                                    }
                                ));
                                cut_here = true;
                            }
                            TailKind::Corrupt(why) => {
                                return Err(Error::corrupt(
                                    path,
                                    format!(
                                        "record {seq} at offset {at}: {why}. It holds an acknowledged batch, so the \
                                         index will not open until the log is cut there, which loses that batch and \
                                         every later one: reopen with the truncate-corrupt-log option (tierdex: \
                                         `tierdex compact DIR --truncate-corrupt-log`, or the same flag on add, delete \
                                         or serve), after saving a copy of the file if the batches matter"
                                    ),
                                ));
                            }
                        }
                        let f = mode::create_options()
                            .write(true)
                            .open(path)
                            .map_err(|e| Error::io(path, e))?;
                        f.set_len(at as u64)
                            .and_then(|_| f.sync_all())
                            .map_err(|e| Error::io(path, e))?;
                        bytes.truncate(at);
                        break;
                    }
                }
            }
            expected = Some(seq);
            last = Some((*first, path.clone(), seq, bytes.len() as u64));
            if cut_here {
                for (_, later) in &files[i + 1..] {
                    std::fs::remove_file(later).map_err(|e| Error::io(later, e))?;
                }
                sync_dir(dir)?;
                break;
            }
        }
        let (file_first, path, next_seq, len) = match last {
            Some(l) => l,
            None => {
                let first = applied + 1;
                let path = dir.join(log::file_name(first));
                Self::create_file(dir, &path, first)?;
                (first, path, first, HEADER as u64)
            }
        };
        let file = mode::create_options()
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
                len,
                synced_len: len,
                syncing: false,
                epoch: 0,
                cuts: Vec::new(),
                dirty_tail: false,
                failure: None,
                reserved: 0,
                space_low: false,
                stats: WalStats::default(),
            }),
            synced: Condvar::new(),
        };
        Ok((wal, replay))
    }

    fn create_file(dir: &Path, path: &Path, first: u64) -> Result<File> {
        let mut f = faults::check(path, FaultOp::Create)
            .and_then(|_| mode::create_options().create_new(true).append(true).open(path))
            .map_err(|e| Error::io(path, e))?;
        let mut header = [0u8; HEADER];
        header[..8].copy_from_slice(MAGIC);
        header[8..].copy_from_slice(&first.to_le_bytes());
        let written = faults::check(path, FaultOp::Write)
            .and_then(|_| f.write_all(&header))
            .and_then(|_| faults::check(path, FaultOp::Sync))
            .and_then(|_| f.sync_all())
            .map_err(|e| Error::io(path, e));
        if let Err(e) = written {
            // A header that is not there would stop the next open.
            let _ = std::fs::remove_file(path);
            return Err(e);
        }
        sync_dir(dir)?;
        Ok(f)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wait<'a>(&self, st: std::sync::MutexGuard<'a, State>) -> std::sync::MutexGuard<'a, State> {
        self.synced.wait(st).unwrap_or_else(|p| p.into_inner())
    }

    /// Appends `batch` and returns its sequence number once it is durable.
    pub fn append(&self, batch: &[Op]) -> Result<u64> {
        let t = self.write(batch)?;
        self.sync(t)?;
        Ok(t.seq)
    }

    /// Writes `batch` to the log without waiting for it to be durable, and
    /// returns its ticket (records are numbered in write order).
    /// [`Wal::sync`] makes it durable.
    pub fn write(&self, batch: &[Op]) -> Result<Ticket> {
        let payload = serde_json::to_vec(batch).map_err(|e| Error::Internal(format!("batch: {e}")))?;
        if payload.len() > MAX_PAYLOAD {
            return Err(Error::InvalidArgument(format!(
                "a batch of {} bytes is larger than the log's limit of {MAX_PAYLOAD}: split it",
                payload.len()
            )));
        }
        let mut st = self.lock();
        while st.dirty_tail {
            if st.syncing {
                st = self.wait(st);
                continue;
            }
            self.cut(&mut st)?;
        }
        let seq = st.next_seq;
        let rec = log::encode(seq, &payload);
        let r = faults::check(&st.path, FaultOp::Write).and_then(|_| (&*st.file).write_all(&rec));
        if let Err(e) = r {
            // The file may now end in part of this record: cut it off.
            st.stats.failures += 1;
            if st.file.set_len(st.len).is_err() {
                st.dirty_tail = true;
                st.failure = Some(errno_of(&e));
            }
            return Err(Error::io(&st.path, e));
        }
        st.next_seq += 1;
        st.written = seq;
        st.len += rec.len() as u64;
        st.stats.appends += 1;
        st.stats.bytes += rec.len() as u64;
        if st.space_low || st.reserved < st.len + RESERVE / 2 {
            Self::reserve(&mut st);
        }
        Ok(Ticket {
            seq,
            epoch: st.epoch,
            bytes: rec.len() as u64,
        })
    }

    /// Allocates [`RESERVE`] bytes past the end of the current file.
    fn reserve(st: &mut State) {
        use std::os::fd::AsRawFd;
        // SAFETY: `fallocate` on a file descriptor this log owns (kept open
        // by `st.file`), with no pointers passed.
        let r = unsafe {
            libc::fallocate(
                st.file.as_raw_fd(),
                libc::FALLOC_FL_KEEP_SIZE,
                st.len as libc::off_t,
                RESERVE as libc::off_t,
            )
        };
        if r == 0 {
            if st.space_low {
                tracing::info!("the disk has room again: the log's reserve is renewed");
            }
            st.reserved = st.len + RESERVE;
            st.space_low = false;
            return;
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::ENOSPC | libc::EDQUOT) => {
                if !st.space_low {
                    tracing::warn!(
                        "the disk is full: the log's reserve cannot be renewed; additions are refused until there is room"
                    );
                }
                st.space_low = true;
            }
            // A file system without preallocation: no reserve.
            _ => st.reserved = u64::MAX,
        }
    }

    /// The disk is full: the current file's reserve could not be renewed
    /// (tried again first). Appends may go on within the reserve.
    pub fn space_low(&self) -> bool {
        let mut st = self.lock();
        if st.space_low {
            Self::reserve(&mut st);
        }
        st.space_low
    }

    /// The error to give an addition refused while [`Wal::space_low`].
    pub fn disk_full(&self) -> Error {
        Error::io(&self.lock().path, std::io::Error::from_raw_os_error(libc::ENOSPC))
    }

    /// Cuts the current file back to its last durable record and syncs the
    /// cut; every record written since is discarded.
    fn cut(&self, st: &mut State) -> Result<()> {
        let r = st
            .file
            .set_len(st.synced_len)
            .and_then(|_| faults::check(&st.path, FaultOp::Sync))
            .and_then(|_| st.file.sync_data());
        if st.written > st.synced || st.len != st.synced_len {
            let (epoch, synced) = (st.epoch, st.synced);
            st.cuts.push((epoch, synced));
            st.epoch += 1;
            st.next_seq = synced + 1;
            st.written = synced;
            st.len = st.synced_len;
        }
        match r {
            Ok(()) => {
                st.dirty_tail = false;
                Ok(())
            }
            Err(e) => {
                st.dirty_tail = true;
                Err(Error::io(&st.path, e))
            }
        }
    }

    /// Where the batch of `ticket` stands.
    pub fn status(&self, ticket: Ticket) -> Status {
        self.lock().status(ticket)
    }

    /// Returns once the batch of `ticket` (and every record before it) is
    /// durable, or fails if a failed sync discarded it. Concurrent callers
    /// share `fdatasync`s (group commit).
    pub fn sync(&self, ticket: Ticket) -> Result<()> {
        let mut st = self.lock();
        loop {
            match st.status(ticket) {
                Status::Durable => return Ok(()),
                Status::Discarded => return Err(st.failure()),
                Status::Pending => {}
            }
            if st.syncing {
                st = self.wait(st);
                continue;
            }
            st = self.lead_sync(st);
        }
    }

    /// Syncs everything written so far (the caller checked that no sync is
    /// under way); a failure cuts the unsynced records off.
    fn lead_sync<'a>(&'a self, mut st: std::sync::MutexGuard<'a, State>) -> std::sync::MutexGuard<'a, State> {
        st.syncing = true;
        let (file, path, target, target_len, epoch) = (st.file.clone(), st.path.clone(), st.written, st.len, st.epoch);
        drop(st);
        let r = faults::check(&path, FaultOp::Sync).and_then(|_| file.sync_data());
        let mut st = self.lock();
        st.syncing = false;
        st.stats.syncs += 1;
        match r {
            Ok(()) if st.epoch == epoch => {
                st.synced = st.synced.max(target);
                st.synced_len = st.synced_len.max(target_len);
            }
            Ok(()) => {}
            Err(e) => {
                tracing::error!(
                    "fdatasync of {} failed ({e}): the batches written since the last good sync are cut off and reported failed",
                    path.display()
                );
                st.stats.failures += 1;
                st.failure = Some(errno_of(&e));
                if st.epoch == epoch {
                    let _ = self.cut(&mut st);
                }
            }
        }
        self.synced.notify_all();
        st
    }

    /// Records up to `applied` are in the index for good: starts a new file
    /// and deletes the files holding only such records.
    pub fn checkpoint(&self, applied: u64) -> Result<()> {
        let mut st = self.lock();
        if st.next_seq > st.file_first {
            // The old file must not keep an unsynced tail once a newer file
            // exists: replay treats only the last file's tail as torn.
            let mut rounds = 0;
            while st.syncing || st.synced < st.written || st.dirty_tail {
                if st.syncing {
                    st = self.wait(st);
                    continue;
                }
                rounds += 1;
                if rounds > 16 {
                    // Busy appenders: rotate at a later checkpoint.
                    return Ok(());
                }
                if st.dirty_tail {
                    self.cut(&mut st)?;
                    continue;
                }
                st = self.lead_sync(st);
                if let Some((_, why)) = st.failure.clone().filter(|_| st.dirty_tail) {
                    return Err(Error::io(&st.path, std::io::Error::other(why)));
                }
            }
            let path = self.dir.join(log::file_name(st.next_seq));
            let file = Self::create_file(&self.dir, &path, st.next_seq)?;
            st.file = Arc::new(file);
            st.path = path;
            st.file_first = st.next_seq;
            st.len = HEADER as u64;
            st.synced_len = HEADER as u64;
            st.reserved = 0;
            Self::reserve(&mut st);
        }
        let current = st.file_first;
        drop(st);
        let files = log::list(&self.dir)?;
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

    /// The batches of the log numbered after `after` and at most `upto`, in
    /// order, with the bytes of their records, read again from its files (a
    /// writer rebuilding its buffer).
    pub fn read_range(&self, after: u64, upto: u64) -> Result<Vec<(u64, Vec<Op>, u64)>> {
        let _st = self.lock();
        let mut out = Vec::new();
        for (first, path) in log::list(&self.dir)? {
            if first > upto {
                break;
            }
            let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
            let mut at = HEADER;
            let mut seq = first;
            while seq <= upto {
                let Some((s, payload, end)) = log::record(&bytes, at).filter(|r| r.0 == seq) else {
                    break;
                };
                if s > after {
                    let ops: Vec<Op> = serde_json::from_slice(payload)
                        .map_err(|e| Error::corrupt(&path, format!("record {s} at offset {at}: {e}")))?;
                    out.push((s, ops, (end - at) as u64));
                }
                seq += 1;
                at = end;
            }
        }
        match out.last() {
            Some(&(s, _, _)) if s == upto => Ok(out),
            None if upto <= after => Ok(out),
            _ => Err(Error::Internal(format!(
                "the log no longer holds the records {}..={upto} it acknowledged",
                after + 1
            ))),
        }
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
