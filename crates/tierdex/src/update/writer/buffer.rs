//! Applying batches to the buffer: adds (replacing by id) and deletes,
//! logged first, and the buffer's budget.

use super::*;

pub(super) fn text_bytes(d: &Document) -> usize {
    d.text_bytes()
}

impl IndexWriter {
    /// Applies a batch: logged, applied to the buffer, and durable when this
    /// returns (visible to searches after the next refresh). Flushes when the
    /// buffer is over its budget.
    pub fn apply(&self, ops: Vec<Op>) -> Result<Applied> {
        for op in &ops {
            if let Op::Add(d) = op {
                if d.id.is_empty() {
                    return Err(Error::InvalidArgument("a document to add has an empty id".into()));
                }
                self.schema.check(d)?;
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
        let (applied, seq) = {
            let mut st = self.lock();
            Self::usable(&st)?;
            let seq = self.wal.write(&ops)?;
            let applied = self.apply_locked(&mut st, seq, ops)?;
            let slack = if self.maintained.load(std::sync::atomic::Ordering::Relaxed) {
                2
            } else {
                1
            };
            if self.over_budget(&st, slack) && !st.flushing {
                self.flush_locked(&mut st, false)?;
            }
            (applied, seq)
        };
        self.wal.sync(seq)?;
        Ok(applied)
    }

    pub(super) fn over_budget(&self, st: &State, times: usize) -> bool {
        st.buffer_live >= self.options.buffer_docs.saturating_mul(times)
            || st.buffer_bytes >= self.options.buffer_bytes.saturating_mul(times)
    }

    pub(super) fn apply_locked(&self, st: &mut State, seq: u64, ops: Vec<Op>) -> Result<Applied> {
        let mut a = Applied {
            seq,
            ..Default::default()
        };
        for op in ops {
            match op {
                Op::Add(doc) => {
                    if let Some(old) = st.ids.remove(&doc.id) {
                        Self::delete_at(st, old);
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
                        Self::delete_at(st, old);
                        a.deleted += 1;
                    }
                    None => a.not_found += 1,
                },
            }
        }
        st.last_seq = seq;
        st.stats.last_seq = seq;
        st.dirty |= a.added > 0 || a.deleted > 0;
        Ok(a)
    }

    pub(super) fn delete_at(st: &mut State, loc: Loc) {
        match loc {
            Loc::Durable { seg, local } => {
                if let Some(p) = st.durable.iter_mut().find(|p| p.number == seg) {
                    p.pending.push(local);
                }
            }
            Loc::Buffer(slot) => {
                if let Some(d) = st.buffer[slot as usize].take() {
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
