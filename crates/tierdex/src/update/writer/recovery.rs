//! Opening a writer: cleaning up after a crash and replaying the log
//! records the manifest does not hold yet.

use super::*;

impl IndexWriter {
    /// Opens a writer on the index in `dir`: cleans up after a crash,
    /// replays the log and makes the replayed changes searchable.
    pub fn open(dir: &Path, options: WriterOptions) -> Result<IndexWriter> {
        if options.buffer_docs == 0 || options.buffer_bytes == 0 {
            return Err(Error::InvalidArgument("the buffer budget must be positive".into()));
        }
        let lock = lock_dir(dir)?;
        let manifest = Manifest::load(dir)?;
        remove_orphans(dir, &manifest, true)?;
        let storage = Storage::new(options.tier)?;
        let memory = Storage::new(TierOptions::on(Tier::Ram))?;
        let analysis = Arc::new(Analysis::new(manifest.schema(), manifest.analyzer));
        let mut durable = Vec::with_capacity(manifest.segments.len());
        let mut ids = HashMap::new();
        let mut id = String::new();
        let mut chain_writer = None;
        for meta in &manifest.segments {
            let number = segment_number(dir, &meta.name)?;
            let reader = match meta.chain {
                Some(_) => {
                    let chain = open_chain(dir, meta, true)?;
                    let reader = SegmentReader::open_chained(
                        dir,
                        meta,
                        manifest.postings_format(),
                        &storage,
                        chain.clone(),
                        None,
                    )?;
                    chain_writer = Some(ChainWriter::open(dir, meta, chain)?.packing(options.pack_max));
                    reader
                }
                None => SegmentReader::open(dir, meta, manifest.postings_format(), &storage)?,
            };
            let deletes = Deletes::load(dir, meta, &reader, &analysis, &storage)?;
            for d in 0..reader.max_doc() {
                if deletes.as_ref().is_some_and(|x| x.contains(d)) {
                    continue;
                }
                reader.external_id(d, &mut id)?;
                ids.insert(id.clone(), Loc::Durable { seg: number, local: d });
            }
            durable.push(Part::new(number, reader, deletes));
        }
        let (wal, replay) = Wal::open(dir, manifest.applied_seq)?;
        if replay.torn_bytes > 0 {
            tracing::warn!(
                "dropped {} bytes of an unacknowledged, torn log tail",
                replay.torn_bytes
            );
        }
        let applied = manifest.applied_seq;
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
            dirty: true,
            failed: None,
            flushing: false,
            retired: Vec::new(),
        };
        let searcher = Arc::new(Searcher::from_index(snapshot(dir, &st)?));
        let strategy = st.manifest.strategy;
        let schema = st.manifest.schema();
        let w = IndexWriter {
            schema,
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
        {
            let mut st = w.lock();
            let mut replayed = 0;
            for (seq, ops) in replay.batches {
                if seq <= applied {
                    continue;
                }
                w.apply_locked(&mut st, seq, ops)?;
                replayed += 1;
                // A long log must not replay into an unbounded buffer.
                if w.over_budget(&st, 1) {
                    w.flush_locked(&mut st, false)?;
                }
            }
            if replayed > 0 {
                tracing::info!("replayed {replayed} logged batches");
            }
            w.refresh_locked(&mut st)?;
        }
        Ok(w)
    }
}
