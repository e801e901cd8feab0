//! Flush: the buffer written as a durable segment by the index's strategy
//! (merges included), in a locked plan, an unlocked build and a locked
//! commit; compaction.

use super::*;

/// What the locked start of a flush hands to its unlocked part.
pub(super) struct FlushPlan {
    /// Buffer slots `..n` are flushed.
    pub(super) n: usize,
    /// The last log record they hold.
    pub(super) seq: u64,
    /// Bytes of the log records applied up to `seq` since the last flush.
    pub(super) log_bytes: u64,
    /// Number of the buffer's segment.
    pub(super) number: u64,
    /// The live buffered documents, with their slots.
    pub(super) docs: Vec<(u32, Document)>,
    /// Durable parts `at..` merge with the buffer's segment into segment
    /// `merged` (none: no merge, `at` is the number of parts).
    pub(super) at: usize,
    pub(super) merged: Option<u64>,
    /// Those parts' readers and tombstones, as merged.
    pub(super) sources: Vec<(Arc<SegmentReader>, Option<Arc<Deletes>>)>,
    /// The chained segment the flush appends to (in-place strategies), as
    /// committed before it (with no documents when the flush creates it).
    pub(super) chain: Option<SegmentMeta>,
    pub(super) manifest: Manifest,
    pub(super) analysis: Arc<Analysis>,
    pub(super) storage: Storage,
    /// The store dictionary of the index's newest segment, if it has one.
    pub(super) dictionary: Option<Arc<[u8]>>,
}

/// The segment an unlocked flush wrote (the merged one when it merged);
/// with an in-place strategy, the flushed documents' part and what the
/// flush appended to the chain.
pub(super) struct BuiltFlush {
    pub(super) report: FlushReport,
    pub(super) reader: SegmentReader,
    pub(super) absorbed: Option<(SegmentMeta, Absorbed)>,
    /// The planned merge found no room on the disk: the flush commits its
    /// own segment alone (the merge is chosen again by the next flush).
    pub(super) merge_skipped: bool,
}

impl FlushPlan {
    /// The plan without its merge: the buffer's segment joins the others.
    pub(super) fn without_merge(&mut self) {
        self.at += self.sources.len();
        self.merged = None;
        self.sources.clear();
    }
}

/// Writes `docs` as segment `name` in `dir`.
pub(super) fn write_segment<'a>(
    dir: &Path,
    name: &str,
    manifest: &Manifest,
    analysis: &Arc<Analysis>,
    dictionary: Option<Arc<[u8]>>,
    docs: impl Iterator<Item = &'a Document>,
) -> Result<SegmentMeta> {
    let mut w = SegmentWriter::new(
        dir,
        name,
        Arc::clone(analysis),
        dictionary.as_deref(),
        manifest.postings_format(),
    )?;
    for d in docs {
        w.add(d)?;
    }
    w.finish()
}

/// The store dictionary of the newest durable segment (or chained part)
/// that has one. Flushes compress with it instead of training their own:
/// training is a large share of a small flush's cost, and segments sharing a
/// dictionary merge by copying compressed records (DESIGN §5).
pub(super) fn store_dictionary(st: &State) -> Result<Option<Arc<[u8]>>> {
    for p in st.durable.iter().rev() {
        for store in p.reader.stores().into_iter().rev() {
            if let Some(d) = store.dictionary()? {
                return Ok(Some(Arc::from(d)));
            }
        }
    }
    Ok(None)
}

impl IndexWriter {
    /// Writes the buffer to storage by the index's strategy and makes the
    /// result durable (see the module doc). The segments are written (and
    /// merged) without holding the writer's state, so writes go on meanwhile;
    /// what they change in the flushed part is carried over at the end.
    ///
    /// A flush that fails leaves the index as its last commit and the log
    /// hold it, removes what it wrote, and is tried again by the next
    /// flush (automatic flushes wait a little longer after each failure);
    /// no acknowledged batch is lost, and writes go on meanwhile. When the
    /// failure came after the flush had changed the writer's state, the
    /// state is rebuilt from the index and the log first (see
    /// [`IndexWriter::recover_locked`]).
    pub fn flush(&self) -> Result<FlushReport> {
        let _maintenance = self.maintenance.lock().unwrap_or_else(|p| p.into_inner());
        let started = Instant::now();
        let mut st = self.lock();
        self.recover_locked(&mut st)?;
        let result = if st.buffer_live == 0 {
            self.flush_locked(&mut st)
        } else {
            match self.plan_flush(&mut st) {
                Err(e) => self.record_flush(&mut st, Err(e), false),
                Ok(mut plan) => {
                    drop(st);
                    let built = self.build_flush(&plan);
                    st = self.lock();
                    st.flushing = false;
                    match built {
                        Ok(built) => {
                            if built.merge_skipped {
                                plan.without_merge();
                            }
                            let r = self.commit_flush(&mut st, plan, built, started);
                            self.record_flush(&mut st, r, true)
                        }
                        // Nothing changed but files no manifest names.
                        Err(e) => self.record_flush(&mut st, Err(e), false),
                    }
                }
            }
        };
        match &result {
            Ok(_) => {
                drop(st);
                self.after_flush_maintenance();
            }
            Err(_) => {
                let _ = self.recover_locked(&mut st);
            }
        }
        result
    }

    /// The locked first step of [`IndexWriter::flush`]: tombstones brought
    /// up to date, the buffer's documents taken, the merge chosen.
    pub(super) fn plan_flush(&self, st: &mut State) -> Result<FlushPlan> {
        for p in &mut st.durable {
            p.materialise(&st.analysis)?;
        }
        st.durable.retain(|p| p.live() > 0 || p.reader.chain().is_some());
        let docs: Vec<(u32, Document)> = st
            .buffer
            .iter()
            .enumerate()
            .filter_map(|(i, d)| d.as_ref().map(|d| (i as u32, d.clone())))
            .collect();
        let number = st.manifest.next_segment;
        st.manifest.next_segment += 1;
        let mut sizes: Vec<u64> = st.durable.iter().map(|p| p.live()).collect();
        sizes.push(docs.len() as u64);
        let k = st
            .manifest
            .strategy
            .merge_count(&sizes, self.options.buffer_docs as u64);
        let (at, merged) = if k > 1 {
            let n = st.manifest.next_segment;
            st.manifest.next_segment += 1;
            (st.durable.len() + 1 - k, Some(n))
        } else {
            (st.durable.len(), None)
        };
        // An in-place index has one chained segment, made by its first flush.
        let chain = match st.durable.iter().find(|p| p.reader.chain().is_some()) {
            Some(p) => Some(p.reader.meta().clone()),
            None if st.manifest.strategy.in_place() => {
                let n = st.manifest.next_segment;
                st.manifest.next_segment += 1;
                Some(SegmentMeta::empty_chain(
                    segment_name(n),
                    st.manifest.strategy == Strategy::InPlaceContiguous,
                ))
            }
            None => None,
        };
        st.flushing = true;
        Ok(FlushPlan {
            chain,
            n: st.buffer.len(),
            seq: st.last_seq,
            log_bytes: st.log_bytes,
            number,
            docs,
            at,
            merged,
            sources: st.durable[at..]
                .iter()
                .map(|p| (p.reader.clone(), p.deletes.clone()))
                .collect(),
            manifest: st.manifest.clone(),
            analysis: Arc::clone(&st.analysis),
            storage: st.storage.clone(),
            dictionary: store_dictionary(st)?,
        })
    }

    /// The unlocked step of [`IndexWriter::flush`]: the buffer's segment,
    /// and the merge.
    pub(super) fn build_flush(&self, plan: &FlushPlan) -> Result<BuiltFlush> {
        let m = &plan.manifest;
        let mut report = FlushReport::default();
        let t_seg = Instant::now();
        let meta = write_segment(
            &self.dir,
            &segment_name(plan.number),
            m,
            &plan.analysis,
            plan.dictionary.clone(),
            plan.docs.iter().map(|(_, d)| d),
        )?;
        report.docs_flushed = meta.max_doc as u64;
        report.bytes_written += meta.bytes();
        let reader = SegmentReader::open(&self.dir, &meta, m.postings_format(), &plan.storage)?;
        report.segment_secs = t_seg.elapsed().as_secs_f64();
        if let Some(chain) = &plan.chain {
            tracing::debug!(secs = t_seg.elapsed().as_secs_f64(), "in-place flush wrote its part");
            let absorbed = self.absorb(chain, &reader, &mut report)?;
            return Ok(BuiltFlush {
                report,
                reader,
                absorbed: Some((meta, absorbed)),
                merge_skipped: false,
            });
        }
        let Some(number) = plan.merged else {
            return Ok(BuiltFlush {
                report,
                reader,
                absorbed: None,
                merge_skipped: false,
            });
        };
        let mut sources: Vec<_> = plan.sources.iter().map(|(r, d)| (&**r, d.as_deref())).collect();
        sources.push((&reader, None));
        let merged = self.merge_durable(&sources, number, m, &plan.storage, &mut report);
        drop(sources);
        match merged {
            Ok(merged) => {
                report.segments_merged = plan.sources.len() + 1;
                Ok(BuiltFlush {
                    report,
                    reader: merged,
                    absorbed: None,
                    merge_skipped: false,
                })
            }
            // The flushed documents are on disk already: a merge is an
            // optimisation, so a full disk postpones it, not the flush.
            Err(e) if e.is_disk_full() => {
                tracing::warn!(
                    "flush: no room to merge {} segments, merged later: {e}",
                    plan.sources.len() + 1
                );
                Ok(BuiltFlush {
                    report,
                    reader,
                    absorbed: None,
                    merge_skipped: true,
                })
            }
            Err(e) => Err(e),
        }
    }

    /// The locked last step of [`IndexWriter::flush`]: the new segment
    /// replaces the buffer's flushed part (and the merged segments), with the
    /// deletions made meanwhile; then the manifest commits it.
    pub(super) fn commit_flush(
        &self,
        st: &mut State,
        plan: FlushPlan,
        built: BuiltFlush,
        started: Instant,
    ) -> Result<FlushReport> {
        let BuiltFlush {
            mut report,
            reader,
            absorbed,
            ..
        } = built;
        if let Some((part, absorbed)) = absorbed {
            drop(reader);
            return self.commit_inplace(st, plan, part, absorbed, report, started);
        }
        let number = plan.merged.unwrap_or(plan.number);
        // Documents of the merged segments and of the buffer, in the new
        // segment's order: their new numbers, and which were deleted since.
        let mut part = Part::new(number, reader, None);
        let mut new_local = 0u32;
        let mut replaced: Vec<u64> = Vec::new();
        for (old, (_, del)) in st.durable[plan.at..].iter().zip(&plan.sources) {
            let mut map = vec![u32::MAX; old.reader.max_doc() as usize];
            for (d, to) in map.iter_mut().enumerate() {
                if !del.as_ref().is_some_and(|x| x.contains(d as DocId)) {
                    *to = new_local;
                    new_local += 1;
                }
            }
            let moved = |l: u32| map.get(l as usize).copied().filter(|&t| t != u32::MAX);
            // Deleted since the plan: pending, or materialised since.
            part.pending.extend(old.pending.iter().filter_map(|&l| moved(l)));
            if let Some(now) = &old.deletes {
                part.pending.extend(now.docs().iter().filter_map(|&l| moved(l)));
            }
            part.unwritten
                .extend(old.unwritten.iter().filter_map(|&(s, l)| moved(l).map(|t| (s, t))));
            replaced.push(old.number);
        }
        // Flushed documents deleted since the plan, by batches after it: at
        // the latest, by the last one.
        let last = st.last_seq;
        for (i, (slot, _)) in plan.docs.iter().enumerate() {
            if st.buffer[*slot as usize].is_none() {
                part.delete(last, new_local + i as u32);
            }
        }
        // Ids that still point at a flushed copy now point at the new one.
        let mut id = String::new();
        for d in 0..part.reader.max_doc() {
            part.reader.external_id(d, &mut id)?;
            if let Some(loc) = st.ids.get_mut(&id) {
                let flushed = match *loc {
                    Loc::Buffer(s) => (s as usize) < plan.n,
                    Loc::Durable { seg, .. } => replaced.contains(&seg),
                };
                if flushed {
                    *loc = Loc::Durable { seg: number, local: d };
                }
            }
        }
        st.durable.truncate(plan.at);
        st.durable.push(part);
        // The documents written since stay in the buffer.
        Self::drain_flushed(st, plan.n);
        st.log_bytes = st.log_bytes.saturating_sub(plan.log_bytes);
        self.commit_manifest(st, &plan.manifest.segments, plan.seq, &mut report)?;
        self.after_flush(st, plan.seq, report, started)
    }

    /// Drops the first `n` buffer slots (flushed) and renumbers the rest.
    pub(super) fn drain_flushed(st: &mut State, n: usize) {
        st.buffer.drain(..n);
        let State { buffer, ids, .. } = st;
        for (i, d) in buffer.iter().enumerate() {
            if let Some(d) = d {
                ids.insert(d.id.clone(), Loc::Buffer(i as u32));
            }
        }
        st.buffer_live = st.buffer.iter().flatten().count();
        st.buffer_bytes = st.buffer.iter().flatten().map(text_bytes).sum();
        st.refreshed_parts.clear();
        st.refreshed = 0;
    }

    /// Publishes a committed flush (holding the log up to `applied`) and
    /// completes its report.
    pub(super) fn after_flush(
        &self,
        st: &mut State,
        applied: u64,
        mut report: FlushReport,
        started: Instant,
    ) -> Result<FlushReport> {
        st.dirty = true;
        if let Err(e) = self.refresh_locked(st) {
            // Committed all the same: the next refresh tries again.
            tracing::warn!("refreshing after a flush: {e}");
        }
        st.stats.flushes += 1;
        st.stats.segments = st.durable.len();
        st.stats.flushed_seq = applied;
        report.segments = st.durable.len();
        report.secs = started.elapsed().as_secs_f64();
        Ok(report)
    }

    /// Adds a flush's report to the totals. After an error, automatic
    /// flushes wait before trying again, the files the flush wrote are
    /// removed, and, when the flush had changed the state (`changed`), the
    /// state is marked for a rebuild.
    pub(super) fn record_flush(
        &self,
        st: &mut State,
        result: Result<FlushReport>,
        changed: bool,
    ) -> Result<FlushReport> {
        match result {
            Ok(r) => {
                st.flush_failure = None;
                let m = &mut st.stats.maintenance;
                m.docs_flushed += r.docs_flushed;
                m.segments_merged += r.segments_merged;
                m.segments_compacted += r.segments_compacted;
                m.bytes_written += r.bytes_written;
                m.bytes_merged += r.bytes_merged;
                m.segments = r.segments;
                m.secs += r.secs;
                m.segment_secs += r.segment_secs;
                Ok(r)
            }
            Err(e) => {
                let backoff = st
                    .flush_failure
                    .as_ref()
                    .map_or(FLUSH_BACKOFF, |f| (f.backoff * 2).min(MAX_FLUSH_BACKOFF));
                tracing::error!(
                    "flush failed ({e}); the index stays as last committed and the log keeps every acknowledged batch; \
                     the next automatic flush is in {:.1} s",
                    backoff.as_secs_f64()
                );
                st.flush_failure = Some(FlushFailure {
                    error: copy_error(&e),
                    retry_at: Instant::now() + backoff,
                    backoff,
                });
                st.flushing = false;
                if changed {
                    st.broken = Some(e.to_string());
                } else if let Err(cleanup) = remove_orphans(&self.dir, &st.manifest, false) {
                    tracing::warn!("removing what the failed flush wrote: {cleanup}");
                }
                Err(e)
            }
        }
    }

    /// A flush holding the state.
    pub(super) fn flush_locked(&self, st: &mut State) -> Result<FlushReport> {
        let result = self.flush_inner(st);
        self.record_flush(st, result, true)
    }

    pub(super) fn flush_inner(&self, st: &mut State) -> Result<FlushReport> {
        if st.manifest.strategy.in_place() {
            return self.flush_inplace_locked(st);
        }
        let started = Instant::now();
        let dir = self.dir.clone();
        let mut report = FlushReport::default();
        let before: Vec<SegmentMeta> = st.manifest.segments.clone();
        for p in &mut st.durable {
            p.materialise(&st.analysis)?;
        }
        let mut fresh: Vec<u64> = Vec::new();
        // The buffer becomes a segment.
        if st.buffer_live > 0 {
            let number = st.manifest.next_segment;
            st.manifest.next_segment += 1;
            let docs = st.buffer.iter().flatten();
            let t = Instant::now();
            let dict = store_dictionary(st)?;
            let meta = write_segment(&dir, &segment_name(number), &st.manifest, &st.analysis, dict, docs)?;
            report.docs_flushed = meta.max_doc as u64;
            report.bytes_written += meta.bytes();
            let reader = SegmentReader::open(&dir, &meta, st.manifest.postings_format(), &st.storage)?;
            report.segment_secs = t.elapsed().as_secs_f64();
            st.durable.push(Part::new(number, reader, None));
            fresh.push(number);
        }
        st.durable.retain(|p| p.live() > 0);
        // The strategy's merge of the newest segments.
        let sizes: Vec<u64> = st.durable.iter().map(|p| p.live()).collect();
        let k = if report.docs_flushed > 0 {
            st.manifest
                .strategy
                .merge_count(&sizes, self.options.buffer_docs as u64)
        } else {
            0
        };
        if k > 1 {
            let at = st.durable.len() - k;
            let merged = self.merge_parts(st, at..st.durable.len(), &mut report)?;
            st.durable.truncate(at);
            st.durable.push(merged);
            fresh.push(st.durable[at].number);
            report.segments_merged = k;
        }
        let applied = st.last_seq;
        self.commit_manifest(st, &before, applied, &mut report)?;
        // The buffer is now in the segments.
        st.buffer.clear();
        st.buffer_live = 0;
        st.buffer_bytes = 0;
        st.log_bytes = 0;
        st.refreshed_parts.clear();
        st.refreshed = 0;
        Self::point_ids_at(st, &fresh)?;
        self.after_flush(st, applied, report, started)
    }

    /// Points the ids of the documents of segments `fresh` at them.
    pub(super) fn point_ids_at(st: &mut State, fresh: &[u64]) -> Result<()> {
        let State { durable, ids, .. } = st;
        let mut id = String::new();
        for p in durable.iter().filter(|p| fresh.contains(&p.number)) {
            let del = p.deletes.as_deref();
            for d in 0..p.reader.max_doc() {
                if del.is_some_and(|x| x.contains(d)) {
                    continue;
                }
                p.reader.external_id(d, &mut id)?;
                ids.insert(
                    id.clone(),
                    Loc::Durable {
                        seg: p.number,
                        local: d,
                    },
                );
            }
        }
        Ok(())
    }

    /// Merges `st.durable[range]` without their deleted documents into a new
    /// segment.
    pub(super) fn merge_parts(
        &self,
        st: &mut State,
        range: std::ops::Range<usize>,
        report: &mut FlushReport,
    ) -> Result<Part> {
        let number = st.manifest.next_segment;
        st.manifest.next_segment += 1;
        let sources: Vec<_> = st.durable[range]
            .iter()
            .map(|p| (&*p.reader, p.deletes.as_deref()))
            .collect();
        let reader = self.merge_durable(&sources, number, &st.manifest, &st.storage, report)?;
        Ok(Part::new(number, reader, None))
    }

    /// Merges `sources` without their deleted documents into durable
    /// segment `number` and opens it.
    pub(super) fn merge_durable(
        &self,
        sources: &[(&SegmentReader, Option<&Deletes>)],
        number: u64,
        manifest: &Manifest,
        storage: &Storage,
        report: &mut FlushReport,
    ) -> Result<SegmentReader> {
        report.bytes_merged += sources.iter().map(|s| s.0.meta().bytes()).sum::<u64>();
        let meta = merge_live(
            &self.dir,
            sources,
            &segment_name(number),
            manifest.postings_format(),
            &MergeOptions::new(StoreOptions::default(), self.options.merge_threads()),
            &|_| {},
        )?;
        report.bytes_written += meta.bytes();
        SegmentReader::open(&self.dir, &meta, manifest.postings_format(), storage)
    }
}
