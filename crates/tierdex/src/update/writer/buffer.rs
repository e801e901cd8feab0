//! Applying batches to the buffer: adds (replacing by id) and deletes,
//! logged first, and the buffer's budget.

use super::*;

pub(super) fn text_bytes(d: &Document) -> usize {
    d.text_bytes()
}

/// Makes the state's schema (and analysis) `schema`.
fn install(st: &mut State, schema: Schema) {
    st.analysis = Arc::new(Analysis::new(schema.clone(), st.manifest.analyzer));
    st.manifest.schema = (!schema.is_title_body()).then_some(schema);
}

/// Checks the documents `ops` adds against the schema, adding the fields
/// dynamic mapping makes for them (all or, on an error, none).
fn map_and_check(st: &mut State, ops: &[Op]) -> Result<()> {
    let mut schema = st.manifest.schema();
    let before = schema.len();
    for op in ops {
        if let Op::Add(d) = op {
            schema.admit(d)?;
        }
    }
    if schema.len() != before {
        install(st, schema);
    }
    Ok(())
}

/// Adds the fields dynamic mapping makes for `doc` (a batch replayed from
/// the log; live batches took them when they were checked).
fn map_dynamic(st: &mut State, doc: &Document) -> Result<()> {
    let Some(schema) = st.manifest.schema.as_mut() else {
        return Ok(());
    };
    if schema.dynamic_mode() != crate::schema::Dynamic::True {
        return Ok(());
    }
    if schema.map_dynamic(doc)? > 0 {
        let schema = schema.clone();
        install(st, schema);
    }
    Ok(())
}

impl IndexWriter {
    /// Changes the index's mapping: `schema` replaces it while the index
    /// holds no document yet (Elasticsearch's index creation with
    /// mappings); otherwise its fields are added to the index's, a field
    /// already there with another type being an error (a mapping update).
    /// The new mapping is committed (in the manifest) before this returns.
    pub fn update_mapping(&self, schema: Schema) -> Result<()> {
        let _maintenance = self.maintenance.lock().unwrap_or_else(|p| p.into_inner());
        let mut st = self.lock_ready()?;
        let empty = st.durable.is_empty() && st.buffer.is_empty() && st.refreshed_parts.is_empty() && st.ids.is_empty();
        let merged = if empty {
            schema
        } else {
            let mut current = st.manifest.schema();
            for e in schema.entries() {
                match current.field(&e.name).and_then(|f| current.entry(f)) {
                    Some(old) if old.ty == e.ty && old.source == e.source => {}
                    Some(old) => {
                        return Err(Error::Conflict(format!(
                            "mapper [{}] cannot be changed from type [{}] to [{}]: the index holds documents",
                            e.name,
                            old.ty.name(),
                            e.ty.name()
                        )))
                    }
                    None => {
                        current.add_field(e.clone())?;
                    }
                }
            }
            if schema.dynamic_mode() != current.dynamic_mode() {
                current.set_dynamic(schema.dynamic_mode());
            }
            current
        };
        let before = st.manifest.schema();
        install(&mut st, merged);
        if let Err(e) = st.manifest.store(&self.dir) {
            install(&mut st, before);
            return Err(e);
        }
        st.dirty = true;
        drop(st);
        drop(_maintenance);
        self.refresh().map(|_| ())
    }

    /// Applies a batch: logged, and once the log is synced applied to the
    /// buffer (visible to searches after the next refresh); returns then,
    /// the batch durable. Batches are applied in log order, so a batch is
    /// never applied unless it is durable, and a batch whose log write or
    /// sync fails is reported failed and never applied. Flushes when the
    /// buffer or the log is over its budget (a failed flush does not fail
    /// the batch: it is durable in the log, and the flush is tried again).
    pub fn apply(&self, ops: Vec<Op>) -> Result<Applied> {
        for op in &ops {
            if let Op::Add(d) = op {
                if d.id.is_empty() {
                    return Err(Error::InvalidArgument("a document to add has an empty id".into()));
                }
                if d.fields
                    .values()
                    .any(|v| v.as_str().is_some_and(|t| t.len() >= u32::MAX as usize))
                {
                    return Err(Error::InvalidArgument(format!(
                        "document `{}` is larger than 4 GiB",
                        d.id
                    )));
                }
            }
        }
        let adds = ops.iter().any(|op| matches!(op, Op::Add(_)));
        if adds && self.wal.space_low() {
            // What is left of the log's reserve is kept for deletions.
            return Err(self.wal.disk_full());
        }
        let ticket = {
            let mut st = self.lock_ready()?;
            if adds && self.over_budget(&st, 4) {
                if let Some(f) = &st.flush_failure {
                    tracing::warn!(
                        "refusing additions: the buffer is four times over its budget and flushing it fails ({})",
                        f.error
                    );
                    return Err(copy_error(&f.error));
                }
            }
            // Documents are checked, and the fields dynamic mapping adds for
            // them taken, in log order: a batch logged is a batch that applies.
            map_and_check(&mut st, &ops)?;
            let ticket = self.wal.write(&ops)?;
            st.pending.push(Pending {
                ticket,
                ops: Some(ops),
                result: None,
            });
            ticket
        };
        let synced = self.wal.sync(ticket);
        // A state left broken meanwhile is rebuilt first when it can be; if
        // not, the batch still goes into it (the rebuild replays it).
        let mut st = match self.lock_ready() {
            Ok(st) => st,
            Err(_) => self.lock(),
        };
        let applied = self.apply_durable(&mut st);
        let mine = st
            .pending
            .iter()
            .position(|p| p.ticket == ticket)
            .map(|i| st.pending.remove(i));
        synced?;
        applied?;
        let result = mine
            .and_then(|p| p.result)
            .ok_or_else(|| Error::Internal(format!("durable batch {} was not applied", ticket.seq)))?;
        let slack = if self.maintained.load(std::sync::atomic::Ordering::Relaxed) {
            2
        } else {
            1
        };
        if self.flush_due(&st, slack) && !st.flushing && st.broken.is_none() {
            match self.flush_locked(&mut st) {
                Ok(_) => {
                    drop(st);
                    // Without a maintainer, compactions come after this
                    // writer's flushes (unless one is under way already).
                    if !self.maintained.load(std::sync::atomic::Ordering::Relaxed) {
                        if let Ok(_maintenance) = self.maintenance.try_lock() {
                            self.after_flush_maintenance();
                        }
                    }
                }
                Err(e) => tracing::error!("flushing after batch {} failed (the batch is durable): {e}", ticket.seq),
            }
        }
        Ok(result)
    }

    /// Applies the durable batches of `pending`, in log order, up to the
    /// first one not yet durable.
    pub(super) fn apply_durable(&self, st: &mut State) -> Result<()> {
        loop {
            let mut next: Option<(usize, Status)> = None;
            for (i, p) in st.pending.iter().enumerate() {
                if p.ops.is_none() {
                    continue;
                }
                let status = self.wal.status(p.ticket);
                if status == Status::Discarded {
                    continue;
                }
                if next.is_none_or(|(j, _)| p.ticket.seq < st.pending[j].ticket.seq) {
                    next = Some((i, status));
                }
            }
            let Some((i, Status::Durable)) = next else {
                return Ok(());
            };
            let ops = st.pending[i].ops.take().expect("not applied yet");
            let ticket = st.pending[i].ticket;
            let a = self.apply_locked(st, ticket.seq, ops)?;
            st.log_bytes += ticket.bytes;
            st.pending[i].result = Some(a);
        }
    }

    /// The buffer or the applied log is `times` over its budget.
    pub(super) fn over_budget(&self, st: &State, times: usize) -> bool {
        st.buffer_live >= self.options.buffer_docs.saturating_mul(times)
            || st.buffer_bytes >= self.options.buffer_bytes.saturating_mul(times)
            || st.log_bytes >= (self.options.log_budget() as u64).saturating_mul(times as u64)
    }

    /// An automatic flush is due: over budget, and not waiting to retry a
    /// failed one.
    pub(super) fn flush_due(&self, st: &State, times: usize) -> bool {
        self.over_budget(st, times) && st.flush_failure.as_ref().is_none_or(|f| Instant::now() >= f.retry_at)
    }

    pub(super) fn apply_locked(&self, st: &mut State, seq: u64, ops: Vec<Op>) -> Result<Applied> {
        let mut a = Applied {
            seq,
            ..Default::default()
        };
        for op in ops {
            match op {
                Op::Add(doc) => {
                    map_dynamic(st, &doc)?;
                    if let Some(old) = st.ids.remove(&doc.id) {
                        Self::delete_at(st, old, seq);
                        a.replaced += 1;
                    }
                    let slot = st.buffer.len() as u32;
                    st.ids.insert(doc.id.clone(), Loc::Buffer(slot));
                    st.buffer_bytes += text_bytes(&doc);
                    st.buffer.push(Some(doc));
                    st.buffer_live += 1;
                    a.added += 1;
                }
                Op::Delete(id) => match st.ids.remove(&id) {
                    Some(old) => {
                        Self::delete_at(st, old, seq);
                        a.deleted += 1;
                    }
                    None => a.not_found += 1,
                },
                Op::Mark(m) => {
                    st.mark = m;
                    st.marks.push((seq, m));
                }
            }
        }
        st.last_seq = seq;
        st.stats.last_seq = seq;
        st.dirty |= a.added > 0 || a.deleted > 0;
        Ok(a)
    }

    /// Deletes the document at `loc`, by the batch of sequence number `seq`.
    pub(super) fn delete_at(st: &mut State, loc: Loc, seq: u64) {
        match loc {
            Loc::Durable { seg, local } => {
                if let Some(p) = st.durable.iter_mut().find(|p| p.number == seg) {
                    p.delete(seq, local);
                }
            }
            Loc::Buffer(slot) => {
                if let Some(d) = st.buffer.get_mut(slot as usize).and_then(Option::take) {
                    st.buffer_live -= 1;
                    st.buffer_bytes -= text_bytes(&d);
                }
                if (slot as usize) < st.refreshed {
                    for p in &mut st.refreshed_parts {
                        if let Ok(local) = p.slots.binary_search(&slot) {
                            p.pending.push(local as u32);
                        }
                    }
                }
            }
        }
    }
}
