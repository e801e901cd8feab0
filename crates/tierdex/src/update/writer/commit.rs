//! Commit and file deletion: the write lock, the manifest that makes a
//! flush durable, and the removal of files no manifest names.

use super::*;

pub(super) use crate::index::lock::lock_dir;

/// Segment number of a segment name written by this crate (`seg000042`).
pub(super) fn segment_number(dir: &Path, name: &str) -> Result<u64> {
    name.strip_prefix("seg")
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| Error::corrupt(dir.join(MANIFEST), format!("unexpected segment name `{name}`")))
}

/// Removes files of `dir` that the manifest does not name, and the buffer
/// directory: at open (`at_open`), what a crash during a flush left; after
/// a commit, the files the commit stopped referring to (merged segments,
/// an in-place part's postings).
pub(super) fn remove_orphans(dir: &Path, manifest: &Manifest, at_open: bool) -> Result<()> {
    let mut keep: std::collections::HashSet<String> = std::collections::HashSet::new();
    for s in &manifest.segments {
        keep.extend(s.all_file_names());
    }
    for e in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let e = e.map_err(|e| Error::io(dir, e))?;
        let name = e.file_name().to_string_lossy().into_owned();
        let orphan = (name.starts_with("seg") && !keep.contains(&name)) || name == format!("{MANIFEST}.tmp");
        if orphan && e.path().is_file() {
            match at_open {
                true => tracing::info!("removing {name}, left by an interrupted flush"),
                false => tracing::debug!("removing {name}, no longer referenced"),
            }
            std::fs::remove_file(e.path()).map_err(|err| Error::io(e.path(), err))?;
        }
    }
    if at_open {
        for e in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
            let e = e.map_err(|e| Error::io(dir, e))?;
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(crate::index::SNAPSHOT_STAGING) && e.path().is_dir() {
                tracing::info!("removing {name}, left by an interrupted snapshot");
                std::fs::remove_dir_all(e.path()).map_err(|err| Error::io(e.path(), err))?;
            }
        }
    }
    let buffer = dir.join(BUFFER_DIR);
    if buffer.exists() {
        std::fs::remove_dir_all(&buffer).map_err(|e| Error::io(&buffer, e))?;
    }
    Ok(())
}

impl IndexWriter {
    /// Writes the tombstones of the deletions up to `applied` (none made
    /// after it: see [`Part::unwritten`]), then the manifest (the commit
    /// point) holding the log up to `applied`; checkpoints the log and
    /// removes the files no longer referenced. An error means the manifest
    /// was not replaced; once it is, what follows only tidies up (a failure
    /// there is logged and left to the next commit).
    pub(super) fn commit_manifest(
        &self,
        st: &mut State,
        before: &[SegmentMeta],
        applied: u64,
        report: &mut FlushReport,
    ) -> Result<()> {
        let dir = &self.dir;
        let mut metas = Vec::with_capacity(st.durable.len());
        for p in &mut st.durable {
            let mut meta = p.reader.meta().clone();
            meta.deletes = before.iter().find(|b| b.name == meta.name).and_then(|b| b.deletes);
            if let Some(d) = p.due(applied, &st.analysis)? {
                let generation = st.manifest.next_segment;
                st.manifest.next_segment += 1;
                let file = d.write(&dir.join(DeletesMeta::name_for(&meta.name, generation)))?;
                let dm = DeletesMeta {
                    generation,
                    count: d.count(),
                    file,
                };
                report.bytes_written += dm.file.content_len;
                meta.deletes = Some(dm);
                p.written = Some(d);
            }
            metas.push(meta);
        }
        st.manifest.segments = metas;
        st.manifest.applied_seq = applied;
        if let Some(&(_, m)) = st.marks.iter().rev().find(|(seq, _)| *seq <= applied) {
            st.manifest.source_seq = m;
        }
        st.marks.retain(|(seq, _)| *seq > applied);
        st.manifest.store(dir)?;
        if let Err(e) = self.wal.checkpoint(applied) {
            tracing::warn!("trimming the log after a commit: {e} (the next commit tries again)");
        }
        if let Err(e) = remove_orphans(dir, &st.manifest, false) {
            tracing::warn!("removing files the commit no longer refers to: {e} (the next commit tries again)");
        }
        Ok(())
    }
}
