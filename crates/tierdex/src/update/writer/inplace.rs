//! Flushes of the in-place strategies: the flushed documents' postings
//! appended to the chain, and the chained segment grown by their part.

use super::*;

/// Grows chained segment `meta` by `part` (the flushed documents' segment,
/// whose postings `absorbed` appended to the chain of `cw`): the part's
/// postings files leave it, its documents and statistics join. The chain's
/// dictionary is left as it is: [`ChainWriter::publish`] applies the flush
/// once the manifest holds it. Returns the files to remove.
pub(super) fn grow_chain(
    meta: &mut SegmentMeta,
    mut part: SegmentMeta,
    absorbed: &Absorbed,
    cw: &ChainWriter,
) -> Result<Vec<String>> {
    let mut removed = Vec::new();
    for e in [ext::TERMS, ext::POSTINGS, ext::TERM_INFOS] {
        if part.files.remove(e).is_some() {
            removed.push(part.file_name(e));
        }
    }
    meta.max_doc = meta
        .max_doc
        .checked_add(part.max_doc)
        .ok_or_else(|| Error::InvalidArgument("an in-place index holds at most 2^32-1 documents".into()))?;
    if meta.fields.len() < part.fields.len() {
        meta.fields.resize(part.fields.len(), Default::default());
    }
    for (f, pf) in meta.fields.iter_mut().zip(&part.fields) {
        f.add(pf);
    }
    meta.num_terms = cw.num_terms_after(absorbed);
    let cm = meta.chain.as_mut().expect("a chained segment");
    cm.parts.push(part);
    cm.log_len = absorbed.log_len;
    cm.file_len = absorbed.file_len;
    cm.runs = absorbed.runs.clone();
    Ok(removed)
}

impl IndexWriter {
    /// Appends the postings of `part` (the flushed documents' segment) to
    /// the chain of chained segment `chain` (created when it has no files yet).
    pub(super) fn absorb(
        &self,
        chain: &SegmentMeta,
        part: &SegmentReader,
        report: &mut FlushReport,
    ) -> Result<Absorbed> {
        let mut cw = self.chain.lock().unwrap_or_else(|p| p.into_inner());
        // None yet, or one a failed first flush made for another name.
        let path = self.dir.join(chain.file_name(CHAIN_EXT));
        if cw.as_ref().is_none_or(|w| w.chain().path != path) {
            let contiguous = chain.chain.as_ref().is_some_and(|c| c.contiguous);
            let (_, w) = ChainWriter::create(&self.dir, &chain.name, contiguous)?;
            *cw = Some(w.packing(self.options.pack_max));
        }
        let cw = cw.as_mut().expect("created above");
        let t = Instant::now();
        match cw.absorb(part, chain.max_doc) {
            Ok(a) => {
                tracing::debug!(secs = t.elapsed().as_secs_f64(), "in-place flush absorbed");
                report.bytes_written += a.writes.bytes + (a.log_len - chain.chain.as_ref().map_or(0, |c| c.log_len));
                Ok(a)
            }
            Err(e) => {
                cw.abandon();
                Err(e)
            }
        }
    }

    /// The locked last step of an in-place flush: the chained segment grows
    /// by the flushed part (its tombstones carried over, the documents
    /// deleted meanwhile added), then the manifest commits it with the
    /// deletions up to the plan.
    pub(super) fn commit_inplace(
        &self,
        st: &mut State,
        plan: FlushPlan,
        part: SegmentMeta,
        mut absorbed: Absorbed,
        mut report: FlushReport,
        started: Instant,
    ) -> Result<FlushReport> {
        let t_commit = Instant::now();
        let before = plan.chain.clone().expect("an in-place flush has a chain");
        let number = segment_number(&self.dir, &before.name)?;
        let base = before.max_doc;
        let mut meta = before.clone();
        let mut cw_guard = self.chain.lock().unwrap_or_else(|p| p.into_inner());
        let cw = cw_guard.as_mut().expect("the flush made the chain");
        // The part's postings files, no longer referenced, go with the
        // manifest commit's orphan removal.
        grow_chain(&mut meta, part, &absorbed, cw)?;
        let old = st.durable.iter().position(|p| p.number == number);
        let reader = self.open_chained(st, &meta, cw, old.map(|i| &*st.durable[i].reader))?;
        let mut p = Part::new(number, reader, None);
        if let Some(i) = old {
            let o = &st.durable[i];
            p.deletes = o.deletes.as_ref().map(|d| Arc::new(d.grown(meta.max_doc)));
            p.pending = o.pending.clone();
            p.written = o.written.clone();
            p.unwritten = o.unwritten.clone();
        }
        // Flushed documents deleted since the plan, by batches after it: at
        // the latest, by the last one.
        let last = st.last_seq;
        for (i, (slot, d)) in plan.docs.iter().enumerate() {
            let local = base + i as u32;
            match st.ids.get_mut(&d.id) {
                Some(loc) if *loc == Loc::Buffer(*slot) => *loc = Loc::Durable { seg: number, local },
                _ => p.delete(last, local),
            }
        }
        match old {
            Some(i) => st.durable[i] = p,
            None => st.durable.push(p),
        }
        Self::drain_flushed(st, plan.n);
        st.log_bytes = st.log_bytes.saturating_sub(plan.log_bytes);
        self.commit_manifest(st, &plan.manifest.segments, plan.seq, &mut report)?;
        // Committed: searches may see the flush's chunks now.
        cw.publish(&mut absorbed);
        let cm = meta.chain.as_ref().expect("chained");
        cw.commit(&absorbed, cm, st.manifest.generation);
        drop(cw_guard);
        report.segments_merged = 0;
        tracing::debug!(secs = t_commit.elapsed().as_secs_f64(), "in-place flush committed");
        self.after_flush(st, plan.seq, report, started)
    }

    /// A flush of an in-place index holding the state: the buffer is
    /// appended to the chain.
    pub(super) fn flush_inplace_locked(&self, st: &mut State) -> Result<FlushReport> {
        let started = Instant::now();
        let mut report = FlushReport::default();
        if st.buffer_live > 0 {
            let plan = self.plan_flush(st)?;
            let built = self.build_flush(&plan);
            st.flushing = false;
            let (part, absorbed) = match built {
                Ok(BuiltFlush {
                    absorbed: Some(a),
                    report: r,
                    ..
                }) => {
                    report = r;
                    a
                }
                Ok(_) => return Err(Error::Internal("an in-place flush made no chain".into())),
                Err(e) => return Err(e),
            };
            report = self.commit_inplace(st, plan, part, absorbed, report, started)?;
        }
        if report.docs_flushed == 0 {
            // Nothing buffered: the deletions of flushed documents still
            // become durable tombstones.
            for p in &mut st.durable {
                p.materialise(&st.analysis)?;
            }
            let before: Vec<SegmentMeta> = st.manifest.segments.clone();
            let applied = st.last_seq;
            self.commit_manifest(st, &before, applied, &mut report)?;
            report = self.after_flush(st, applied, report, started)?;
        }
        Ok(report)
    }

    /// Bounds the parts of the chained segment (each flush adds one, with
    /// its own store, ids and norms files, all kept open): its newest parts
    /// merge by size as the geometric strategy merges segments, so that an
    /// index of `n` flushes keeps O(log n) parts. The documents of the
    /// merged parts, deleted ones included (their numbers must not change),
    /// are written as one part; the chain itself is untouched.
    pub(super) fn merge_chain_parts(&self, st: &mut State) -> Result<()> {
        let Some(i) = st.durable.iter().position(|p| p.reader.chain().is_some()) else {
            return Ok(());
        };
        let old = st.durable[i].reader.clone();
        let meta = old.meta();
        let parts = &meta.chain.as_ref().expect("chained").parts;
        let sizes: Vec<u64> = parts.iter().map(|p| p.max_doc as u64).collect();
        // The flush unit: the buffer's budget, or the newest part when
        // flushes come sooner (explicit ones, or on the log's size).
        let unit = sizes
            .last()
            .map_or(1, |&s| s.min(self.options.buffer_docs as u64).max(1));
        let k = Strategy::Geometric.merge_count(&sizes, unit);
        if k < 2 {
            return Ok(());
        }
        let from = parts.len() - k;
        let base: u32 = parts[..from].iter().map(|p| p.max_doc).sum();
        let number = st.manifest.next_segment;
        st.manifest.next_segment += 1;
        let part = merge_part_documents(
            &self.dir,
            &old,
            base..meta.max_doc,
            &parts[from..],
            &segment_name(number),
        )?;
        let mut merged = meta.clone();
        let cm = merged.chain.as_mut().expect("chained");
        cm.parts.truncate(from);
        cm.parts.push(part);
        let reader = {
            let cw = self.chain.lock().unwrap_or_else(|p| p.into_inner());
            let cw = cw
                .as_ref()
                .ok_or_else(|| Error::Internal("a chained segment without its writer".into()))?;
            self.open_chained(st, &merged, cw, Some(&old))?
        };
        let before: Vec<SegmentMeta> = st.manifest.segments.clone();
        st.durable[i].reader = Arc::new(reader);
        let mut report = FlushReport::default();
        let applied = st.manifest.applied_seq;
        self.commit_manifest(st, &before, applied, &mut report)?;
        tracing::debug!(parts = k, docs = meta.max_doc - base, "merged the chain's newest parts");
        st.dirty = true;
        Ok(())
    }

    /// The reader of chained segment `meta` over `cw`'s chain, reusing the
    /// parts `previous` (an earlier reader of the segment) opened.
    fn open_chained(
        &self,
        st: &State,
        meta: &SegmentMeta,
        cw: &ChainWriter,
        previous: Option<&SegmentReader>,
    ) -> Result<SegmentReader> {
        SegmentReader::open_chained(
            &self.dir,
            meta,
            st.manifest.postings_format(),
            &st.storage,
            cw.chain().clone(),
            previous,
        )
    }
}
