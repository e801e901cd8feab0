//! The writer's state: the durable segments, the buffer of documents
//! applied since the last flush and its refresh segments, where each live
//! document is, and the lock that guards them (see the lock order in
//! [`super`]).

use super::*;

/// Where a live document is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Loc {
    /// In durable segment number `seg`, local number `local`.
    Durable { seg: u64, local: u32 },
    /// At this index of the buffer.
    Buffer(u32),
}

/// A segment with its tombstones and the deletions not yet materialised.
pub(super) struct Part {
    /// Segment number (durable) or refresh number.
    pub(super) number: u64,
    pub(super) reader: Arc<SegmentReader>,
    /// The tombstones searches see: every deletion applied so far, but
    /// `pending`.
    pub(super) deletes: Option<Arc<Deletes>>,
    pub(super) pending: Vec<u32>,
    /// The tombstones the manifest holds (durable parts).
    pub(super) written: Option<Arc<Deletes>>,
    /// Deletions not in `written`, with the sequence number of the batch
    /// that made each: a commit holding the log up to `applied` writes
    /// those at or below it, and only those, so that the commit is a
    /// prefix of the acknowledged writes (durable parts).
    pub(super) unwritten: Vec<(u64, u32)>,
    /// Buffer indices of the documents (refresh parts), ascending.
    pub(super) slots: Vec<u32>,
}

impl Part {
    /// Part `number` over `reader`, holding the tombstones `deletes` as
    /// the manifest does.
    pub(super) fn new(number: u64, reader: SegmentReader, deletes: Option<Deletes>) -> Part {
        let deletes = deletes.map(Arc::new);
        Part {
            number,
            reader: Arc::new(reader),
            written: deletes.clone(),
            deletes,
            pending: Vec::new(),
            unwritten: Vec::new(),
            slots: Vec::new(),
        }
    }

    pub(super) fn live(&self) -> u64 {
        (self.reader.max_doc() - self.deletes.as_ref().map_or(0, |d| d.count())) as u64
    }

    pub(super) fn materialise(&mut self, analysis: &Analysis) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let base = match &self.deletes {
            Some(d) => d.with(&self.reader, analysis, &self.pending)?,
            None => Deletes::none(self.reader.max_doc()).with(&self.reader, analysis, &self.pending)?,
        };
        self.deletes = Some(Arc::new(base));
        self.pending.clear();
        Ok(())
    }

    /// Records the deletion of local document `local` by the batch of
    /// sequence number `seq`.
    pub(super) fn delete(&mut self, seq: u64, local: u32) {
        self.pending.push(local);
        self.unwritten.push((seq, local));
    }

    /// The documents the manifest counts as deleted.
    pub(super) fn written_count(&self) -> u32 {
        self.written.as_ref().map_or(0, |d| d.count())
    }

    /// The tombstones a commit holding the log up to `applied` writes, when
    /// they differ from `written`; the deletions they take in leave
    /// `unwritten`.
    pub(super) fn due(&mut self, applied: u64, analysis: &Analysis) -> Result<Option<Arc<Deletes>>> {
        let due = self.unwritten.iter().filter(|&&(s, _)| s <= applied).count();
        if due == 0 {
            return Ok(None);
        }
        let max_doc = self.reader.max_doc();
        let out = match &self.deletes {
            // Every deletion made so far is due and materialised.
            Some(d) if due == self.unwritten.len() && self.pending.is_empty() => d.clone(),
            _ => {
                let docs: Vec<u32> = self
                    .unwritten
                    .iter()
                    .filter(|&&(s, _)| s <= applied)
                    .map(|&(_, l)| l)
                    .collect();
                let base = match &self.written {
                    Some(w) => w.grown(max_doc),
                    None => Deletes::none(max_doc),
                };
                Arc::new(base.with(&self.reader, analysis, &docs)?)
            }
        };
        self.unwritten.retain(|&(s, _)| s > applied);
        Ok(Some(out))
    }

    pub(super) fn view(&self) -> SegmentView {
        SegmentView {
            reader: self.reader.clone(),
            deletes: self.deletes.clone(),
        }
    }
}

pub(super) struct State {
    pub(super) manifest: Manifest,
    pub(super) analysis: Arc<Analysis>,
    pub(super) storage: Storage,
    pub(super) memory: Storage,
    pub(super) durable: Vec<Part>,
    /// Documents applied since the last flush; `None` once deleted.
    pub(super) buffer: Vec<Option<Document>>,
    pub(super) buffer_live: usize,
    pub(super) buffer_bytes: usize,
    /// Refresh segments over `buffer[..refreshed]`.
    pub(super) refreshed_parts: Vec<Part>,
    pub(super) refreshed: usize,
    pub(super) next_refresh: u64,
    pub(super) ids: HashMap<String, Loc>,
    pub(super) last_seq: u64,
    /// The last [`Op::Mark`] applied (the manifest's `source_seq` at open).
    pub(super) mark: u64,
    /// The marks applied since the last commit, with their batches'
    /// sequence numbers: a commit records the one its log position covers.
    pub(super) marks: Vec<(u64, u64)>,
    /// Applied changes not yet visible to searches.
    pub(super) dirty: bool,
    /// A flush failed half way: the in-memory state no longer matches the
    /// index and is rebuilt from the directory and the log before the
    /// writer goes on (see [`IndexWriter::recover_locked`]).
    pub(super) broken: Option<String>,
    /// Batches written to the log and not yet applied (waiting for their
    /// sync, or for an earlier batch's).
    pub(super) pending: Vec<Pending>,
    /// Bytes of log records applied since the last flush took the buffer.
    pub(super) log_bytes: u64,
    /// The last flush failed: automatic flushes wait until it is time to
    /// try again.
    pub(super) flush_failure: Option<FlushFailure>,
    /// A flush is writing segments without holding the state: `apply` must
    /// not start another one.
    pub(super) flushing: bool,
    /// Snapshots replaced by newer ones, kept until no search holds them so
    /// that they are freed here (by the writer's thread) rather than by the
    /// query worker that happens to finish last with them: freeing a large
    /// merged-away segment read into memory takes milliseconds.
    pub(super) retired: Vec<Arc<Searcher>>,
    pub(super) stats: WriterStats,
}

/// A batch written to the log, applied once durable and in log order.
pub(super) struct Pending {
    pub(super) ticket: Ticket,
    /// Taken when applied.
    pub(super) ops: Option<Vec<Op>>,
    /// What applying it did.
    pub(super) result: Option<Applied>,
}

/// A failed flush: its error, and when automatic flushes try again.
pub(super) struct FlushFailure {
    pub(super) error: Error,
    pub(super) retry_at: Instant,
    pub(super) backoff: std::time::Duration,
}

/// First wait before an automatic flush retries a failed one; it doubles
/// up to [`MAX_FLUSH_BACKOFF`].
pub(super) const FLUSH_BACKOFF: std::time::Duration = std::time::Duration::from_millis(500);
/// Longest wait between automatic flush attempts while they fail.
pub(super) const MAX_FLUSH_BACKOFF: std::time::Duration = std::time::Duration::from_secs(30);

/// A copy of `e` to report again (the I/O error's code and path kept, so
/// that a full disk still reads as one).
pub(super) fn copy_error(e: &Error) -> Error {
    match e {
        Error::Io { path, source } => Error::io(
            path,
            match source.raw_os_error() {
                Some(code) => std::io::Error::from_raw_os_error(code),
                None => std::io::Error::new(source.kind(), source.to_string()),
            },
        ),
        Error::Corrupt { path, reason } => Error::corrupt(path, reason.clone()),
        Error::InvalidArgument(m) => Error::InvalidArgument(m.clone()),
        Error::NotFound(m) => Error::NotFound(m.clone()),
        Error::Conflict(m) => Error::Conflict(m.clone()),
        Error::Internal(m) => Error::Internal(m.clone()),
        Error::TimedOut(ms) => Error::TimedOut(*ms),
        other => Error::Unavailable(other.to_string()),
    }
}

/// The writer's state, locked; releasing it publishes the counters.
pub(super) struct StateGuard<'a> {
    pub(super) state: MutexGuard<'a, State>,
    pub(super) published: &'a Mutex<WriterStats>,
}

impl std::ops::Deref for StateGuard<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.state
    }
}

impl std::ops::DerefMut for StateGuard<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.state
    }
}

impl Drop for StateGuard<'_> {
    fn drop(&mut self) {
        let stats = WriterStats {
            buffered_docs: self.state.buffer_live as u64,
            ..self.state.stats.clone()
        };
        *self.published.lock().unwrap_or_else(|p| p.into_inner()) = stats;
    }
}

/// The searchable view of the writer's state.
pub(super) fn snapshot(dir: &Path, st: &State) -> Result<Index> {
    let views = st.durable.iter().chain(&st.refreshed_parts).map(Part::view).collect();
    Index::assemble(dir, st.manifest.clone(), st.storage.clone(), views)
}
