//! Refresh: the documents applied since the last refresh become a small
//! segment in memory, tombstones are materialised, and a new searcher is
//! published.

use super::*;

/// Directory of the buffer's refresh segments in the index directory, when
/// no memory file system is available (they are read into memory and their
/// files removed at once either way).
pub(super) const BUFFER_DIR: &str = ".buffer";

/// Removes the buffer directories of writers whose process is gone (killed
/// before its writer was dropped).
pub(super) fn remove_stale_buffers(shm: &Path) {
    let Ok(entries) = std::fs::read_dir(shm) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("tierdex-buffer-"))
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Where refresh segments are written on their way into memory: a private
/// directory on `/dev/shm` when there is one (no disk writes, no syncs, no
/// journal commits competing with the log's), else `dir/.buffer`.
pub(super) fn buffer_dir(dir: &Path) -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        remove_stale_buffers(shm);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let private = shm.join(format!("tierdex-buffer-{}-{nanos:x}", std::process::id()));
        if crate::storage::mode::create_dir(&private).is_ok() {
            return private;
        }
    }
    dir.join(BUFFER_DIR)
}

impl IndexWriter {
    /// Makes every applied change searchable and returns the new snapshot
    /// (the current one when nothing changed).
    pub fn refresh(&self) -> Result<Arc<Searcher>> {
        let _maintenance = self.maintenance.lock().unwrap_or_else(|p| p.into_inner());
        let mut st = self.lock();
        self.recover_locked(&mut st)?;
        self.refresh_locked(&mut st)?;
        Ok(self.searcher())
    }

    pub(super) fn refresh_locked(&self, st: &mut State) -> Result<()> {
        st.retired.retain(|s| Arc::strong_count(s) > 1);
        if !st.dirty {
            return Ok(());
        }
        let started = Instant::now();
        if st.refreshed < st.buffer.len() {
            let slots: Vec<u32> = (st.refreshed..st.buffer.len())
                .filter(|&i| st.buffer[i].is_some())
                .map(|i| i as u32)
                .collect();
            if !slots.is_empty() {
                let part = self.write_refresh_part(st, slots)?;
                st.refreshed_parts.push(part);
            }
            st.refreshed = st.buffer.len();
            // The refresh segments merge by size like the geometric strategy
            // (each buffered document is copied O(log n) times), and all of
            // them once there are more than `max_refresh_segments`.
            let sizes: Vec<u64> = st.refreshed_parts.iter().map(Part::live).collect();
            let mut k = Strategy::Geometric.merge_count(&sizes, 1);
            if sizes.len() + 1 - k.max(1) > self.options.max_refresh_segments.max(1) {
                k = sizes.len();
            }
            if k > 1 {
                let at = st.refreshed_parts.len() - k;
                let part = self.merge_refresh_parts(st, at)?;
                st.refreshed_parts.truncate(at);
                if let Some(part) = part {
                    st.refreshed_parts.push(part);
                }
            }
        }
        let inverted = started.elapsed().as_secs_f64();
        let State {
            durable,
            refreshed_parts,
            analysis,
            ..
        } = st;
        for p in durable.iter_mut().chain(refreshed_parts.iter_mut()) {
            p.materialise(analysis)?;
        }
        st.stats.refresh_invert_secs += inverted;
        st.stats.refresh_delete_secs += started.elapsed().as_secs_f64() - inverted;
        let searcher = Arc::new(Searcher::from_index(snapshot(&self.dir, st)?));
        let old = std::mem::replace(&mut *self.current.write().unwrap_or_else(|p| p.into_inner()), searcher);
        st.retired.push(old);
        st.dirty = false;
        st.stats.refreshes += 1;
        st.stats.refresh_secs += started.elapsed().as_secs_f64();
        st.stats.refresh_segments = st.refreshed_parts.len();
        Ok(())
    }

    /// Merges the refresh segments `refreshed_parts[at..]` (their postings,
    /// not their documents: nothing is analysed again) without their deleted
    /// documents into one segment read from memory; `None` when none of
    /// their documents is live.
    pub(super) fn merge_refresh_parts(&self, st: &mut State, at: usize) -> Result<Option<Part>> {
        let State {
            refreshed_parts,
            analysis,
            ..
        } = st;
        let parts = &mut refreshed_parts[at..];
        for p in parts.iter_mut() {
            p.materialise(analysis)?;
        }
        let mut slots = Vec::with_capacity(parts.iter().map(|p| p.live() as usize).sum());
        for p in parts.iter() {
            let del = p.deletes.as_deref();
            slots.extend(
                p.slots
                    .iter()
                    .enumerate()
                    .filter(|&(d, _)| !del.is_some_and(|x| x.contains(d as DocId)))
                    .map(|(_, &s)| s),
            );
        }
        if slots.is_empty() {
            return Ok(None);
        }
        let started = Instant::now();
        let number = st.next_refresh;
        st.next_refresh += 1;
        let name = format!("r{number:06}");
        let dir = &self.buffer_dir;
        let sources: Vec<_> = st.refreshed_parts[at..]
            .iter()
            .map(|p| (&*p.reader, p.deletes.as_deref()))
            .collect();
        let meta = merge_live(
            dir,
            &sources,
            &name,
            st.manifest.postings_format(),
            &MergeOptions::new(
                StoreOptions {
                    dictionary: false,
                    ..StoreOptions::default()
                },
                1,
            ),
            &|_| {},
        )?;
        let reader = SegmentReader::open(dir, &meta, st.manifest.postings_format(), &st.memory);
        for e in meta.files.keys() {
            let _ = std::fs::remove_file(dir.join(meta.file_name(e)));
        }
        let mut part = Part::new(number, reader?, None);
        st.stats.refresh_docs_merged += slots.len() as u64;
        st.stats.refresh_merge_secs += started.elapsed().as_secs_f64();
        part.slots = slots;
        Ok(Some(part))
    }

    /// Inverts the buffered documents at `slots` into a segment read from
    /// memory (its files are removed once loaded).
    pub(super) fn write_refresh_part(&self, st: &mut State, slots: Vec<u32>) -> Result<Part> {
        let dir = self.buffer_dir.clone();
        crate::storage::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let number = st.next_refresh;
        st.next_refresh += 1;
        let name = format!("r{number:06}");
        let mut w = SegmentWriter::untrained(&dir, &name, Arc::clone(&st.analysis), st.manifest.postings_format())?;
        w.expect_docs(slots.len() as u64);
        for &s in &slots {
            if let Some(d) = &st.buffer[s as usize] {
                w.add(d)?;
            }
        }
        let meta = w.finish()?;
        let reader = SegmentReader::open(&dir, &meta, st.manifest.postings_format(), &st.memory);
        for e in meta.files.keys() {
            let _ = std::fs::remove_file(dir.join(meta.file_name(e)));
        }
        let mut part = Part::new(number, reader?, None);
        st.stats.refresh_docs_inverted += slots.len() as u64;
        part.slots = slots;
        Ok(part)
    }
}
