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
    /// deleted meanwhile added), then the manifest commits it.
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
            p.deletes_dirty = o.deletes_dirty;
        }
        for (i, (slot, d)) in plan.docs.iter().enumerate() {
            let local = base + i as u32;
            match st.ids.get_mut(&d.id) {
                Some(loc) if *loc == Loc::Buffer(*slot) => *loc = Loc::Durable { seg: number, local },
                _ => p.pending.push(local),
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
    /// appended to the chain; with `compact`, plain segments and then a
    /// chain whose deleted documents reach that fraction are rebuilt from
    /// their live ones (a new chain file and part for the chain), which
    /// gives their space back, each committed in turn.
    pub(super) fn flush_inplace_locked(&self, st: &mut State, compact: Option<f64>) -> Result<FlushReport> {
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
        let Some(ratio) = compact else {
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
            return Ok(report);
        };
        for p in &mut st.durable {
            p.materialise(&st.analysis)?;
        }
        // Plain segments (an index built in bulk before its first flush)
        // are compacted as under the merge strategies.
        let mut i = 0;
        while i < st.durable.len() {
            let p = &st.durable[i];
            if p.reader.chain().is_none() && p.live() == 0 {
                let before: Vec<SegmentMeta> = st.manifest.segments.clone();
                st.durable.remove(i);
                let applied = st.last_seq;
                self.commit_manifest(st, &before, applied, &mut report)?;
                continue;
            }
            if p.reader.chain().is_none() && compactable(p, ratio) {
                let before: Vec<SegmentMeta> = st.manifest.segments.clone();
                let merged = self.merge_parts(st, i..i + 1, &mut report)?;
                let mut id = String::new();
                for d in 0..merged.reader.max_doc() {
                    merged.reader.external_id(d, &mut id)?;
                    if let Some(loc) = st.ids.get_mut(&id) {
                        if matches!(*loc, Loc::Durable { seg, .. } if seg == st.durable[i].number) {
                            *loc = Loc::Durable {
                                seg: merged.number,
                                local: d,
                            };
                        }
                    }
                }
                st.durable[i] = merged;
                report.segments_compacted += 1;
                let applied = st.last_seq;
                self.commit_manifest(st, &before, applied, &mut report)?;
            }
            i += 1;
        }
        let before: Vec<SegmentMeta> = st.manifest.segments.clone();
        let Some(i) = st
            .durable
            .iter()
            .position(|p| p.reader.chain().is_some() && compactable(p, ratio))
        else {
            let applied = st.last_seq;
            self.commit_manifest(st, &before, applied, &mut report)?;
            return self.after_flush(st, applied, report, started);
        };
        // The live documents, in order, into a new chain.
        let old = st.durable[i].reader.clone();
        let del = st.durable[i].deletes.clone();
        let mut docs = Vec::with_capacity(old.max_doc() as usize);
        for d in 0..old.max_doc() {
            if !del.as_ref().is_some_and(|x| x.contains(d)) {
                docs.push(old.document(d)?);
            }
        }
        report.bytes_merged += old.meta().bytes();
        let before: Vec<SegmentMeta> = st.manifest.segments.clone();
        let chain_number = st.manifest.next_segment;
        let part_number = chain_number + 1;
        st.manifest.next_segment += 2;
        let contiguous = st.manifest.strategy == Strategy::InPlaceContiguous;
        let mut meta = SegmentMeta::empty_chain(segment_name(chain_number), contiguous);
        let (_, cw) = ChainWriter::create(&self.dir, &meta.name, contiguous)?;
        let mut cw = cw.packing(self.options.pack_max);
        if !docs.is_empty() {
            let part = write_segment(
                &self.dir,
                &segment_name(part_number),
                &st.manifest,
                &st.analysis,
                store_dictionary(st)?,
                docs.iter(),
            )?;
            let part_reader = SegmentReader::open(&self.dir, &part, st.manifest.postings_format(), &st.storage)?;
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
        let reader = self.open_chained(st, &meta, &cw, None)?;
        let mut map = Vec::with_capacity(old.max_doc() as usize);
        let mut next = 0u32;
        for d in 0..old.max_doc() {
            if del.as_ref().is_some_and(|x| x.contains(d)) {
                map.push(u32::MAX);
            } else {
                map.push(next);
                next += 1;
            }
        }
        let old_number = st.durable[i].number;
        let mut p = Part::new(chain_number, reader, None);
        p.pending = st.durable[i]
            .pending
            .iter()
            .filter_map(|&l| map.get(l as usize).copied())
            .filter(|&t| t != u32::MAX)
            .collect();
        for loc in st.ids.values_mut() {
            if let Loc::Durable { seg, local } = *loc {
                if seg == old_number {
                    if let Some(&to) = map.get(local as usize).filter(|&&t| t != u32::MAX) {
                        *loc = Loc::Durable {
                            seg: chain_number,
                            local: to,
                        };
                    }
                }
            }
        }
        st.durable[i] = p;
        report.segments_compacted += 1;
        let applied = st.last_seq;
        self.commit_manifest(st, &before, applied, &mut report)?;
        *self.chain.lock().unwrap_or_else(|p| p.into_inner()) = Some(cw);
        self.after_flush(st, applied, report, started)
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
