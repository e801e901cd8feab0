//! Opening a writer: cleaning up after a crash and replaying the log
//! records the manifest does not hold yet; and rebuilding the writer's
//! state the same way after a failure left it broken.

use super::*;

/// The durable part of a writer's state, as the index directory holds it.
struct Loaded {
    manifest: Manifest,
    analysis: Arc<Analysis>,
    durable: Vec<Part>,
    ids: HashMap<String, Loc>,
    /// The chain's writer, when a new one was opened.
    chain_writer: Option<ChainWriter>,
}

/// Loads the index in `dir` as its manifest says, after removing the files
/// no manifest names. An in-place index's chain is opened anew, unless
/// `reuse` is the writer of that very chain as committed (a writer
/// rebuilding its state keeps its chain, which its snapshots share).
fn load(dir: &Path, options: &WriterOptions, storage: &Storage, reuse: Option<&ChainWriter>) -> Result<Loaded> {
    let manifest = Manifest::load(dir)?;
    remove_orphans(dir, &manifest, true)?;
    let analysis = Arc::new(Analysis::new(manifest.schema(), manifest.analyzer));
    let mut durable = Vec::with_capacity(manifest.segments.len());
    let mut ids = HashMap::new();
    let mut id = String::new();
    let mut chain_writer = None;
    for meta in &manifest.segments {
        let number = segment_number(dir, &meta.name)?;
        let reader = match &meta.chain {
            Some(cm) => {
                let kept = reuse.filter(|cw| cw.is_committed(dir, meta, cm));
                let chain = match kept {
                    Some(cw) => cw.chain().clone(),
                    None => {
                        let chain = open_chain(dir, meta, true)?;
                        chain_writer = Some(
                            ChainWriter::open(dir, meta, chain.clone(), manifest.generation)?.packing(options.pack_max),
                        );
                        chain
                    }
                };
                SegmentReader::open_chained(dir, meta, manifest.postings_format(), storage, chain, None)?
            }
            None => SegmentReader::open(dir, meta, manifest.postings_format(), storage)?,
        };
        let deletes = Deletes::load(dir, meta, &reader, &analysis, storage)?;
        for d in 0..reader.max_doc() {
            if deletes.as_ref().is_some_and(|x| x.contains(d)) {
                continue;
            }
            reader.external_id(d, &mut id)?;
            ids.insert(id.clone(), Loc::Durable { seg: number, local: d });
        }
        durable.push(Part::new(number, reader, deletes));
    }
    Ok(Loaded {
        manifest,
        analysis,
        durable,
        ids,
        chain_writer,
    })
}

impl IndexWriter {
    /// Opens a writer on the index in `dir`: cleans up after a crash,
    /// replays the log and makes the replayed changes searchable. The
    /// replay flushes whenever the buffer is over its budget; if a flush
    /// fails (a full disk, say), the rest of the log stays in the buffer
    /// and the writer opens all the same, to retry later: opening never
    /// needs free space.
    pub fn open(dir: &Path, options: WriterOptions) -> Result<IndexWriter> {
        options.check()?;
        let lock = lock_dir(dir)?;
        let storage = Storage::new(options.tier)?;
        let memory = Storage::new(TierOptions::on(Tier::Ram))?;
        let Loaded {
            manifest,
            analysis,
            durable,
            ids,
            chain_writer,
        } = load(dir, &options, &storage, None)?;
        let (wal, replay) = Wal::open(dir, manifest.applied_seq, options.truncate_corrupt_log)?;
        if replay.torn_bytes > 0 {
            tracing::warn!(
                "dropped {} bytes of an unacknowledged, torn log tail",
                replay.torn_bytes
            );
        }
        if let Some(what) = &replay.truncated {
            tracing::error!("the log held a damaged record, and was cut as asked: {what}");
        }
        let applied = manifest.applied_seq;
        let mark = manifest.source_seq;
        let st = State {
            stats: WriterStats {
                segments: durable.len(),
                last_seq: applied,
                flushed_seq: applied,
                ..Default::default()
            },
            manifest,
            analysis,
            storage,
            memory,
            durable,
            buffer: Vec::new(),
            buffer_live: 0,
            buffer_bytes: 0,
            refreshed_parts: Vec::new(),
            refreshed: 0,
            next_refresh: 0,
            ids,
            last_seq: applied,
            mark,
            marks: Vec::new(),
            dirty: true,
            broken: None,
            pending: Vec::new(),
            log_bytes: 0,
            flush_failure: None,
            flushing: false,
            retired: Vec::new(),
        };
        let searcher = Arc::new(Searcher::from_index(snapshot(dir, &st)?));
        let strategy = st.manifest.strategy;
        let w = IndexWriter {
            buffer_dir: buffer_dir(dir),
            maintained: std::sync::atomic::AtomicBool::new(false),
            dir: dir.to_path_buf(),
            options,
            wal,
            state: Mutex::new(st),
            maintenance: Mutex::new(()),
            current: RwLock::new(searcher),
            published: Mutex::new(WriterStats::default()),
            strategy,
            chain: Mutex::new(chain_writer),
            _lock: lock,
        };
        // A long log replays within the buffer's budget, flushing as it
        // goes; if a flush fails (a full disk), the rest stays in the buffer
        // and the writer opens all the same.
        let mut flushing = true;
        let mut replayed = 0;
        for ((seq, ops), bytes) in replay.batches.into_iter().zip(replay.record_bytes) {
            if seq <= applied {
                continue;
            }
            let due = {
                let mut st = w.lock();
                st.log_bytes += bytes;
                w.apply_locked(&mut st, seq, ops)?;
                flushing && w.over_budget(&st, 1)
            };
            replayed += 1;
            if due {
                if let Err(e) = w.flush() {
                    tracing::warn!(
                        "flushing the replayed log at open failed: {e}; the rest of the log stays in the buffer \
                         and the writer tries again later"
                    );
                    flushing = false;
                }
            }
        }
        if replayed > 0 {
            tracing::info!("replayed {replayed} logged batches");
        }
        w.refresh_locked(&mut w.lock())?;
        Ok(w)
    }

    /// Rebuilds a broken state (see [`State::broken`]) from the index
    /// directory and the log: the segments of the last commit, then the
    /// batches applied since, read again from the log. The caller holds
    /// the maintenance lock. When the rebuild fails too, the writer stays
    /// broken and says why (a full disk as an I/O error, anything else
    /// that may pass as [`Error::Unavailable`]); the next call tries again.
    pub(super) fn recover_locked(&self, st: &mut State) -> Result<()> {
        let Some(why) = st.broken.clone() else {
            return Ok(());
        };
        match self.rebuild(st) {
            Ok(()) => {
                tracing::info!("the writer's state was rebuilt after: {why}");
                st.broken = None;
                Ok(())
            }
            Err(e) => {
                let disk_full = e.is_disk_full();
                Err(match e {
                    Error::Io { .. } if !disk_full => Error::Unavailable(format!(
                        "the writer is recovering from a failure ({why}) and cannot yet: {e}"
                    )),
                    e => e,
                })
            }
        }
    }

    fn rebuild(&self, st: &mut State) -> Result<()> {
        let mut cw = self.chain.lock().unwrap_or_else(|p| p.into_inner());
        let loaded = load(&self.dir, &self.options, &st.storage, cw.as_ref())?;
        let batches = self.wal.read_range(loaded.manifest.applied_seq, st.last_seq)?;
        if let Some(w) = cw.as_mut() {
            w.abandon();
        }
        let chained = loaded.manifest.segments.iter().any(|s| s.chain.is_some());
        if loaded.chain_writer.is_some() || !chained {
            *cw = loaded.chain_writer;
        }
        drop(cw);
        st.manifest = loaded.manifest;
        st.analysis = loaded.analysis;
        st.durable = loaded.durable;
        st.ids = loaded.ids;
        st.buffer.clear();
        st.buffer_live = 0;
        st.buffer_bytes = 0;
        st.refreshed_parts.clear();
        st.refreshed = 0;
        st.log_bytes = 0;
        st.flushing = false;
        st.last_seq = st.manifest.applied_seq;
        st.mark = st.manifest.source_seq;
        st.marks.clear();
        for (seq, ops, bytes) in batches {
            st.log_bytes += bytes;
            self.apply_locked(st, seq, ops)?;
        }
        st.stats.segments = st.durable.len();
        st.stats.flushed_seq = st.manifest.applied_seq;
        st.dirty = true;
        self.refresh_locked(st)
    }
}
