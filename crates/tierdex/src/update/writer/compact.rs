//! Compaction: a segment (or an in-place index's chain) rewritten without
//! its deleted documents, on demand ([`IndexWriter::compact`]) or after a
//! flush once they reach [`WriterOptions::compact_deleted_ratio`] of its
//! documents. One segment at a time, each committed before the next (so it
//! needs room for one segment's live documents, not all of them), each
//! written without holding the writer's state (writes go on; the deletions
//! they make in the segment being rewritten are carried over).

use super::inplace::grow_chain;
use super::*;

/// Whether `p` is due for compaction: its deleted documents reach `ratio`
/// of its documents (any deleted document when `ratio` is 0).
/// Only the deletions a commit holds count: those made since are in the log
/// after it, and the rewritten segment must still hold their documents.
fn compactable(p: &Part, ratio: f64) -> bool {
    let deleted = p.written_count() as f64;
    deleted > 0.0 && deleted >= ratio * p.reader.max_doc() as f64
}

/// What the locked start of a compaction hands to its unlocked part.
struct CompactionPlan {
    /// The part rewritten, as it was when planned, and the tombstones its
    /// commit holds (the documents the rewrite leaves out).
    number: u64,
    reader: Arc<SegmentReader>,
    deletes: Option<Arc<Deletes>>,
    /// Number of the new segment (of the new chain: its part is the next).
    new_number: u64,
    manifest: Manifest,
    analysis: Arc<Analysis>,
    storage: Storage,
    dictionary: Option<Arc<[u8]>>,
}

/// The rewritten segment, and the writer of its chain when it is one.
struct BuiltCompaction {
    reader: SegmentReader,
    chain: Option<ChainWriter>,
}

impl IndexWriter {
    /// Flushes, then rewrites every segment that holds deleted documents
    /// without them (see the module doc).
    pub fn compact(&self) -> Result<FlushReport> {
        let _maintenance = self.maintenance.lock().unwrap_or_else(|p| p.into_inner());
        let mut report = {
            let mut st = self.lock();
            self.recover_locked(&mut st)?;
            let r = self.flush_locked(&mut st);
            if r.is_err() {
                let _ = self.recover_locked(&mut st);
            }
            r?
        };
        self.compact_parts(0.0, &mut report)?;
        let mut st = self.lock();
        if let Err(e) = self.refresh_locked(&mut st) {
            tracing::warn!("refreshing after a compaction: {e}");
        }
        report.segments = st.durable.len();
        Ok(report)
    }

    /// After a flush, with the maintenance lock held and the state not:
    /// merges an in-place chain's newest parts when they are too many (see
    /// [`IndexWriter::merge_chain_parts`]) and compacts the segments whose
    /// deleted documents reach [`WriterOptions::compact_deleted_ratio`]. A
    /// failure is handled as a failed flush's, and left to the next flush.
    pub(super) fn after_flush_maintenance(&self) {
        {
            let mut st = self.lock();
            if st.broken.is_some() {
                return;
            }
            if st.manifest.strategy.in_place() {
                if let Err(e) = self.merge_chain_parts(&mut st) {
                    let _ = self.record_flush(&mut st, Err(e), true);
                    return;
                }
            }
        }
        let ratio = self.options.compact_deleted_ratio;
        if ratio < 1.0 {
            let mut report = FlushReport::default();
            match self.compact_parts(ratio, &mut report) {
                Ok(()) if report.segments_compacted > 0 => tracing::info!(
                    segments = report.segments_compacted,
                    bytes_written = report.bytes_written,
                    "compacted segments over {:.0}% deleted",
                    ratio * 100.0
                ),
                Ok(()) => {}
                Err(e) => tracing::error!("automatic compaction failed: {e}"),
            }
        }
        let mut st = self.lock();
        if st.dirty && st.broken.is_none() {
            if let Err(e) = self.refresh_locked(&mut st) {
                tracing::warn!("refreshing after compaction: {e}");
            }
        }
    }

    /// Compacts, one at a time, the segments whose deleted documents reach
    /// `ratio` (see the module doc). The caller holds the maintenance lock,
    /// not the state.
    pub(super) fn compact_parts(&self, ratio: f64, report: &mut FlushReport) -> Result<()> {
        let mut tried = std::collections::HashSet::new();
        loop {
            let started = Instant::now();
            let plan = {
                let mut st = self.lock();
                self.recover_locked(&mut st)?;
                match self.plan_compaction(&mut st, ratio, &tried, report) {
                    Ok(Some(plan)) => plan,
                    Ok(None) => return Ok(()),
                    Err(e) => return self.record_flush(&mut st, Err(e), true).map(|_| ()),
                }
            };
            tried.insert(plan.number);
            let mut part = FlushReport::default();
            let built = self.build_compaction(&plan, &mut part);
            let mut st = self.lock();
            st.flushing = false;
            let result = match built {
                Ok(built) => {
                    let r = self.commit_compaction(&mut st, plan, built, &mut part);
                    part.secs = started.elapsed().as_secs_f64();
                    self.record_flush(&mut st, r.map(|_| part.clone()), true)
                }
                Err(e) => self.record_flush(&mut st, Err(e), false),
            };
            match result {
                Ok(r) => {
                    report.segments_compacted += r.segments_compacted;
                    report.bytes_written += r.bytes_written;
                    report.bytes_merged += r.bytes_merged;
                }
                Err(e) => {
                    let _ = self.recover_locked(&mut st);
                    return Err(e);
                }
            }
        }
    }

    /// The locked start of a compaction: the next segment due (not in
    /// `tried`), its tombstones up to date; plain segments left without a
    /// live document are dropped on the way.
    fn plan_compaction(
        &self,
        st: &mut State,
        ratio: f64,
        tried: &std::collections::HashSet<u64>,
        report: &mut FlushReport,
    ) -> Result<Option<CompactionPlan>> {
        for p in &mut st.durable {
            p.materialise(&st.analysis)?;
        }
        // Segments whose documents the commit counts all deleted.
        let dead = |p: &Part| p.reader.chain().is_none() && p.written_count() == p.reader.max_doc();
        if st.durable.iter().any(dead) {
            let before: Vec<SegmentMeta> = st.manifest.segments.clone();
            st.durable.retain(|p| !dead(p));
            let applied = st.manifest.applied_seq;
            self.commit_manifest(st, &before, applied, report)?;
            st.dirty = true;
        }
        let Some(p) = st
            .durable
            .iter()
            .find(|p| compactable(p, ratio) && !tried.contains(&p.number))
        else {
            return Ok(None);
        };
        let deletes = p.written.as_ref().map(|w| Arc::new(w.grown(p.reader.max_doc())));
        let (number, reader) = (p.number, p.reader.clone());
        let new_number = st.manifest.next_segment;
        st.manifest.next_segment += if reader.chain().is_some() { 2 } else { 1 };
        // No flush while the segment is rewritten (flushes and merges of the
        // maintainer wait on the maintenance lock).
        st.flushing = true;
        Ok(Some(CompactionPlan {
            number,
            reader,
            deletes,
            new_number,
            manifest: st.manifest.clone(),
            analysis: Arc::clone(&st.analysis),
            storage: st.storage.clone(),
            dictionary: store_dictionary(st)?,
        }))
    }

    /// The unlocked part: the live documents of the planned segment into a
    /// new segment, or for a chain into a new chain file and part.
    fn build_compaction(&self, plan: &CompactionPlan, report: &mut FlushReport) -> Result<BuiltCompaction> {
        let format = plan.manifest.postings_format();
        let old = &plan.reader;
        let del = plan.deletes.as_deref();
        report.bytes_merged += old.meta().bytes();
        report.segments_compacted = 1;
        if old.chain().is_none() {
            let reader =
                self.merge_durable(&[(&**old, del)], plan.new_number, &plan.manifest, &plan.storage, report)?;
            return Ok(BuiltCompaction { reader, chain: None });
        }
        let mut docs = Vec::with_capacity(old.max_doc() as usize);
        for d in 0..old.max_doc() {
            if !del.is_some_and(|x| x.contains(d)) {
                docs.push(old.document(d)?);
            }
        }
        let contiguous = plan.manifest.strategy == Strategy::InPlaceContiguous;
        let mut meta = SegmentMeta::empty_chain(segment_name(plan.new_number), contiguous);
        let (_, cw) = ChainWriter::create(&self.dir, &meta.name, contiguous)?;
        let mut cw = cw.packing(self.options.pack_max);
        if !docs.is_empty() {
            let part = write_segment(
                &self.dir,
                &segment_name(plan.new_number + 1),
                &plan.manifest,
                &plan.analysis,
                plan.dictionary.clone(),
                docs.iter(),
            )?;
            let part_reader = SegmentReader::open(&self.dir, &part, format, &plan.storage)?;
            let mut absorbed = cw.absorb(&part_reader, 0)?;
            drop(part_reader);
            report.bytes_written += part.bytes() + absorbed.writes.bytes + absorbed.log_len;
            for f in grow_chain(&mut meta, part, &absorbed, &cw)? {
                let _ = std::fs::remove_file(self.dir.join(f));
            }
            // A new chain no snapshot shares yet.
            cw.publish(&mut absorbed);
            cw.commit(&absorbed, meta.chain.as_ref().expect("chained"), 0);
        }
        let reader = SegmentReader::open_chained(&self.dir, &meta, format, &plan.storage, cw.chain().clone(), None)?;
        Ok(BuiltCompaction {
            reader,
            chain: Some(cw),
        })
    }

    /// The locked end: the rewritten segment replaces the old one, with the
    /// deletions made meanwhile; the manifest commits it.
    fn commit_compaction(
        &self,
        st: &mut State,
        plan: CompactionPlan,
        built: BuiltCompaction,
        report: &mut FlushReport,
    ) -> Result<()> {
        let i = st
            .durable
            .iter()
            .position(|p| p.number == plan.number)
            .ok_or_else(|| Error::Internal(format!("segment {} vanished while compacted", plan.number)))?;
        let old = &st.durable[i];
        let was = plan.deletes.as_deref();
        // Old local number -> new one (u32::MAX: left out).
        let mut map = Vec::with_capacity(old.reader.max_doc() as usize);
        let mut next = 0u32;
        for d in 0..old.reader.max_doc() {
            if was.is_some_and(|x| x.contains(d)) {
                map.push(u32::MAX);
            } else {
                map.push(next);
                next += 1;
            }
        }
        let mut gone: Vec<u32> = old.pending.clone();
        if let Some(now) = &old.deletes {
            gone.extend(now.docs().iter().filter(|&&d| !was.is_some_and(|x| x.contains(d))));
        }
        let moved = |l: u32| map.get(l as usize).copied().filter(|&t| t != u32::MAX);
        let mut p = Part::new(plan.new_number, built.reader, None);
        p.pending = gone.iter().filter_map(|&l| moved(l)).collect();
        p.unwritten = old
            .unwritten
            .iter()
            .filter_map(|&(s, l)| moved(l).map(|t| (s, t)))
            .collect();
        let old_number = plan.number;
        for loc in st.ids.values_mut() {
            if let Loc::Durable { seg, local } = *loc {
                if seg == old_number {
                    if let Some(&to) = map.get(local as usize).filter(|&&t| t != u32::MAX) {
                        *loc = Loc::Durable {
                            seg: plan.new_number,
                            local: to,
                        };
                    }
                }
            }
        }
        let before: Vec<SegmentMeta> = st.manifest.segments.clone();
        st.durable[i] = p;
        let applied = st.manifest.applied_seq;
        self.commit_manifest(st, &before, applied, report)?;
        if let Some(cw) = built.chain {
            *self.chain.lock().unwrap_or_else(|p| p.into_inner()) = Some(cw);
        }
        st.stats.segments = st.durable.len();
        st.dirty = true;
        Ok(())
    }
}
