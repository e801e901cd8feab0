//! Merging segments into one: term by term over the union of their
//! dictionaries, documents renumbered by concatenation in segment order,
//! stored documents copied without recompression when possible.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use fst::{IntoStreamer, Streamer};

use crate::layout::Layout;

use crate::bloom::Direction;
use crate::column::{ColumnKind, ColumnsWriter};
use crate::common::prefetch;
use crate::error::{Error, Result};
use crate::index::manifest::{FieldStats, SegmentMeta};
use crate::index::segment::{ext, SegmentReader};
use crate::index::Deletes;
use crate::indexing::reorder::{bisect, log_gap_cost, BpParams, ForwardIndex, SAMPLE_DOCS};
use crate::layout::{Format, PostingsFiles, PostingsPart, PostingsWriter};
use crate::schema::{DocId, Field, TERMINATED};
use crate::storage::{FileInfo, FileWriter, Storage, Tier, TierOptions};
use crate::store::{IdsWriter, StoreOptions, StoreReader, StoreWriter};
use crate::termdict::{TermInfo, TermRef};

/// Merges `metas` (segments of the index in `dir`, in document order, of
/// `format`) into a new segment `name` of the same format, on up to
/// `threads` threads (see [`merge_live`]); calls
/// `progress(terms_done)` now and then. The input segments' files are left
/// in place.
pub fn merge_segments(
    dir: &Path,
    metas: &[SegmentMeta],
    name: &str,
    format: Format,
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<SegmentMeta> {
    let storage = Storage::new(TierOptions::on(Tier::Mmap))?;
    let readers = metas
        .iter()
        .map(|m| SegmentReader::open(dir, m, format, &storage))
        .collect::<Result<Vec<_>>>()?;
    let sources: Vec<_> = readers.iter().map(|r| (r, None)).collect();
    merge_live(
        dir,
        &sources,
        name,
        format,
        &MergeOptions::new(StoreOptions::default(), threads),
        progress,
    )
}

/// Merges open segments (in document order), leaving out the documents
/// their tombstones mark deleted, into a new segment `name` in `dir`. Live
/// documents keep their order; terms left without documents disappear; the
/// statistics are those of the live documents. The document store is
/// written with `store` (its dictionary, if any, taken from the largest
/// source that has one). Phrase filters are carried over; a source term
/// without them (which one index never holds) gets all-ones filters, that
/// reject nothing.
///
/// With `threads` above 1 and enough postings, the term space is split
/// into `threads` ranges of similar size ([`partition`]), merged on a
/// thread each while the calling thread writes norms, columns, store and
/// ids; the ranges' files are then appended in order
/// ([`PostingsWriter::append`]). The segment answers exactly as a merge on
/// one thread would write it (only the padding between ranges differs).
pub fn merge_live(
    dir: &Path,
    sources: &[(&SegmentReader, Option<&Deletes>)],
    name: &str,
    format: Format,
    options: &MergeOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<SegmentMeta> {
    let MergeOptions {
        store,
        threads,
        parallel_min_bytes,
        filter_docs,
        reorder,
        hold_bytes,
    } = *options;
    let readers: Vec<&SegmentReader> = sources.iter().map(|s| s.0).collect();
    let files: Vec<&PostingsFiles> = readers
        .iter()
        .map(|r| {
            r.postings().ok_or_else(|| {
                crate::error::Error::Internal(format!(
                    "segment {} is chained (in-place strategy) and cannot be merged",
                    r.meta().name
                ))
            })
        })
        .collect::<Result<_>>()?;
    let metas: Vec<&SegmentMeta> = readers.iter().map(|r| r.meta()).collect();
    // New number of each old document (TERMINATED when deleted).
    let mut maps: Vec<Vec<DocId>> = Vec::with_capacity(sources.len());
    let mut max_doc: u64 = 0;
    for (r, del) in sources {
        let mut map = Vec::with_capacity(r.max_doc() as usize);
        for d in 0..r.max_doc() {
            if del.is_some_and(|x| x.contains(d)) {
                map.push(TERMINATED);
            } else {
                map.push(max_doc.min(TERMINATED as u64 - 1) as DocId);
                max_doc += 1;
            }
        }
        maps.push(map);
    }
    if max_doc >= TERMINATED as u64 {
        return Err(Error::InvalidArgument(
            "merged segment would exceed 2^32-1 documents".into(),
        ));
    }
    let path = |e: &str| dir.join(format!("{name}.{e}"));
    let n_fields = metas.iter().map(|m| m.fields.len()).max().unwrap_or(0);
    // Ranges of the term space of similar postings volume, for the
    // reordering's walk over the dictionaries and the postings' merge.
    // The same ranges serve a merge in a new order; one in document order
    // has a smaller last range ([`range_shares`]). One walk finds both.
    let (term_ranges, in_order_ranges) = match threads > 1 {
        true => {
            let even: Vec<f64> = (1..threads).map(|j| j as f64 / threads as f64).collect();
            let shares = range_shares(threads, cores());
            let uneven: Vec<f64> = shares[..threads - 1]
                .iter()
                .scan(0.0, |sum, s| {
                    *sum += s;
                    Some(*sum)
                })
                .collect();
            let mut bounds = partition_bounds(&files, format.layout, &[even, uneven].concat())?;
            let uneven = bounds.split_off(threads - 1);
            (ranges_between(bounds), ranges_between(uneven))
        }
        false => (vec![TermRange::default()], vec![TermRange::default()]),
    };
    let ordered = match reorder {
        Some(params) if max_doc > 1 => {
            let order = reorder_documents(
                &readers,
                &files,
                &maps,
                format.layout,
                n_fields,
                max_doc as u32,
                &params,
                threads,
                &term_ranges,
            )?;
            let mut new_of = vec![0 as DocId; max_doc as usize];
            for (new, &old) in order.iter().enumerate() {
                new_of[old as usize] = new as DocId;
            }
            for to in maps.iter_mut().flatten().filter(|to| **to != TERMINATED) {
                *to = new_of[*to as usize];
            }
            order.iter().enumerate().all(|(new, &old)| new as u32 == old)
        }
        _ => true,
    };

    // Norms and statistics: norms by new number, statistics summed, over
    // every field any source has (norms for the fields any source has
    // norms for).
    let mut normed: Vec<u8> = metas.iter().flat_map(|m| m.normed_fields()).collect();
    normed.sort_unstable();
    normed.dedup();
    let mut norms: Vec<Option<Vec<u8>>> = vec![None; n_fields.max(normed.last().map_or(0, |&f| f as usize + 1))];
    for &f in &normed {
        norms[f as usize] = Some(vec![0; max_doc as usize]);
    }
    let mut stats = vec![FieldStats::default(); n_fields];
    for ((r, del), map) in sources.iter().zip(&maps) {
        for &f in &normed {
            let n = norms[f as usize].as_mut().expect("normed");
            let own = r.norms(Field::from_id(f));
            for (i, &to) in map.iter().enumerate() {
                if to != TERMINATED {
                    n[to as usize] = own.get(i).copied().unwrap_or(0);
                }
            }
        }
        for f in (0..n_fields).map(|i| Field::from_id(i as u8)) {
            let s = &mut stats[f.index()];
            s.add(&r.meta().field_stats(f));
            if let Some(d) = del {
                s.doc_count -= d.field(f).doc_count;
                s.sum_total_term_freq -= d.field(f).sum_total_term_freq;
            }
        }
    }

    // Opening verified every source's dictionary, touching all its pages.
    for r in &readers {
        r.release();
    }
    tracing::debug!("merge {name}: {} sources open, rss {} MiB", sources.len(), rss_mib());
    let bytes = postings_bytes(&files);
    let ranges = match threads > 1 && bytes >= parallel_min_bytes && room_for_parts(dir, bytes) {
        true if ordered => in_order_ranges,
        true => term_ranges,
        false => vec![TermRange::default()],
    };
    let done = AtomicU64::new(0);
    let job = PostingsJob {
        readers: &readers,
        files: &files,
        maps: &maps,
        norms: &norms,
        format,
        n_fields,
        metas: &metas,
        filter_ceiling: format
            .bloom
            .map_or(u64::MAX, |b| b.doc_ceiling(filter_docs.unwrap_or(max_doc).max(max_doc))),
        drops_docs: maps.iter().any(|m| m.contains(&TERMINATED)),
        ordered,
        max_doc: max_doc as u32,
        affine: maps
            .iter()
            .map(|m| {
                let base = *m.first()?;
                m.iter()
                    .enumerate()
                    .all(|(i, &to)| to != TERMINATED && to == base + i as DocId)
                    .then_some(base)
            })
            .collect(),
        hold_bytes,
        dir,
        done: &done,
        progress,
    };
    let (postings_files, docs_side) = if ranges.len() == 1 {
        let mut postings = PostingsWriter::create(dir, name, format)?;
        job.run(&ranges[0], &mut postings)?;
        let num_terms = postings.len();
        let files = postings.finish()?;
        let docs_side = write_documents(&readers, &maps, ordered, &norms, &normed, max_doc, store, &path)?;
        ((files, num_terms), docs_side)
    } else {
        merge_in_parallel(
            &job, &ranges, name, &readers, &maps, &norms, &normed, max_doc, store, &path,
        )?
    };
    progress(done.load(Ordering::Relaxed));
    let (postings_infos, num_terms) = postings_files;
    let mut files = BTreeMap::new();
    for (e, info) in postings_infos {
        files.insert(e.to_string(), info);
    }
    files.extend(docs_side);
    let norm_fields =
        (normed.len() != n_fields || normed.iter().enumerate().any(|(i, &f)| f as usize != i)).then_some(normed);
    Ok(SegmentMeta {
        name: name.to_string(),
        max_doc: max_doc as u32,
        fields: stats,
        norm_fields,
        num_terms,
        files,
        deletes: None,
        chain: None,
    })
}

/// How a merge writes its segment.
#[derive(Debug, Clone, Copy)]
pub struct MergeOptions {
    /// The document store's options.
    pub store: StoreOptions,
    /// Threads the postings may be merged on.
    pub threads: usize,
    /// Below this many bytes of postings in all sources, the merge runs on
    /// one thread (spreading it would cost more than it saves).
    pub parallel_min_bytes: u64,
    /// The documents phrase filters are kept for, when the merged segment
    /// will itself be merged into one of that many (a merge in levels):
    /// a term keeps its filters up to that segment's ceiling, so the last
    /// merge finds them. `None`: the merged segment's own documents.
    pub filter_docs: Option<u64>,
    /// Reorder the merged documents by recursive graph bisection
    /// ([`crate::indexing::reorder`]) with these parameters; `None`: keep
    /// the sources' order.
    pub reorder: Option<BpParams>,
    /// Reordered, a term's postings are held in memory to be sorted: at
    /// most about this many bytes at a time (a larger term is written in
    /// passes over ranges of new document numbers).
    pub hold_bytes: u64,
}

impl MergeOptions {
    /// A merge on up to `threads` threads (parallel from 32 MiB of
    /// postings on), writing its store with `store`.
    pub fn new(store: StoreOptions, threads: usize) -> MergeOptions {
        MergeOptions {
            store,
            threads,
            parallel_min_bytes: 32 << 20,
            filter_docs: None,
            reorder: None,
            hold_bytes: 32 << 20,
        }
    }
}

/// Bytes of postings data of `files` (the files whose reading and writing
/// a merge's time follows).
fn postings_bytes(files: &[&PostingsFiles]) -> u64 {
    files
        .iter()
        .map(|f| {
            // Grouped postings are one file the others resolve to.
            let own = |x: &crate::storage::IndexFile| !std::ptr::eq(x, f.doc_file());
            let mut n = f.doc_file().len();
            for x in [f.pos_file(), f.pay_file(), f.bloom_file()] {
                n += if own(x) { x.len() } else { 0 };
            }
            n as u64
        })
        .sum()
}

/// The process's resident memory in MiB (for the merge's debug log).
fn rss_mib() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| (pages * 4096) >> 20)
}

/// Whether the file system of `dir` has room for a parallel merge's
/// temporary parts besides its output: twice the sources' postings. On a
/// nearly full disk a merge runs on one thread, needing no more room than
/// it always did.
fn room_for_parts(dir: &Path, postings: u64) -> bool {
    match rustix::fs::statvfs(dir) {
        Ok(st) => {
            let free = st.f_bavail.saturating_mul(st.f_frsize);
            let room = free >= postings.saturating_mul(2);
            if !room {
                tracing::debug!("merging on one thread: {free} bytes free for {postings} bytes of postings");
            }
            room
        }
        Err(_) => true,
    }
}

/// What every postings worker of one merge shares.
struct PostingsJob<'a> {
    readers: &'a [&'a SegmentReader],
    files: &'a [&'a PostingsFiles],
    maps: &'a [Vec<DocId>],
    norms: &'a [Option<Vec<u8>>],
    format: Format,
    n_fields: usize,
    metas: &'a [&'a SegmentMeta],
    /// Documents a merged term may be in and keep its filters
    /// ([`crate::bloom::BloomParams::doc_ceiling`] of the merged segment).
    filter_ceiling: u64,
    /// Whether some source document is left out (deleted): then a term's
    /// merged documents are only known once merged.
    drops_docs: bool,
    /// Whether the maps keep the sources' order (otherwise a term's
    /// postings are gathered and sorted by new number before written).
    ordered: bool,
    /// Documents of the merged segment.
    max_doc: u32,
    /// Per source, the new number of its document 0 when its map is
    /// that plus each document's own (no deletes, the sources' order).
    affine: Vec<Option<DocId>>,
    /// See [`MergeOptions::hold_bytes`].
    hold_bytes: u64,
    dir: &'a Path,
    /// Terms written so far, by all workers.
    done: &'a AtomicU64,
    progress: &'a (dyn Fn(u64) + Sync),
}

impl PostingsJob<'_> {
    /// The documents of a term's source postings (`hits`, located by
    /// `infos`) that the merge keeps.
    fn live_docs(&self, hits: &[fst::map::IndexedValue], infos: &[TermInfo]) -> Result<u64> {
        let mut n = 0;
        for (h, info) in hits.iter().zip(infos) {
            let map = &self.maps[h.index];
            let mut c = self.readers[h.index].cursor(info)?;
            while c.doc() != TERMINATED {
                n += u64::from(map[c.doc() as usize] != TERMINATED);
                c.advance();
            }
            if let Some(e) = c.take_error() {
                return Err(e);
            }
        }
        Ok(n)
    }

    /// Writes the merged postings of the terms in `range` to `postings`.
    fn run(&self, range: &TermRange, postings: &mut PostingsWriter) -> Result<()> {
        let format = self.format;
        let shape = format.bloom_shape()?;
        let (mut pos, mut off) = (Vec::new(), Vec::new());
        let (mut after, mut before) = (Vec::new(), Vec::new());
        let mut terms = TermsInOrder::new(self.files, format.layout, self.n_fields, range);
        let mut key = Vec::new();
        let mut hits = Vec::new();
        let mut infos = Vec::new();
        let mut streamed = vec![Streamed::default(); self.files.len()];
        let mut held = Held::default();
        while terms.next(&mut key, &mut hits) {
            let key = key.as_slice();
            hits.sort_by_key(|h| h.index);
            // A term has filters when the merged term is within the ceiling
            // (the sources' documents, deleted ones included, bound its
            // documents). A source without filters for it (the term was
            // above its ceiling there) gives its documents filters that
            // hold every term: never a wrong rejection, and the index is
            // the size a single build of the documents would have.
            infos.clear();
            for h in hits.iter() {
                infos.push(self.files[h.index].resolve(self.files[h.index].terms().term_ref(h.value))?);
            }
            let sources_df: u64 = infos.iter().map(|i| i.region.doc_freq as u64).sum();
            let mut filter_bytes = shape.filter(|_| format.filtered_term(key)).map(|s| s.bytes as usize);
            if filter_bytes.is_some()
                && sources_df > self.filter_ceiling
                && (!self.drops_docs || self.live_docs(&hits, &infos)? > self.filter_ceiling)
            {
                filter_bytes = None;
            }
            let field = *key
                .first()
                .ok_or_else(|| Error::corrupt(self.dir.join(self.metas[0].file_name(ext::TERMS)), "empty term key"))?
                as usize;
            let field_norms = self.norms.get(field).and_then(Option::as_ref).ok_or_else(|| {
                Error::corrupt(
                    self.dir.join(self.metas[0].file_name(ext::TERMS)),
                    "term key with an unknown field",
                )
            })?;
            // Streamed document by document into the encoder: a term's
            // decoded postings are never held whole. In a new document
            // order they are held and sorted by new number, in passes over
            // ranges of new numbers when they would take more than
            // `hold_bytes`.
            let term = postings.term_writer();
            term.start(filter_bytes.is_some());
            let mut live = false;
            let passes = match self.ordered {
                true => 1,
                false => held_bytes(&infos, filter_bytes)
                    .div_ceil(self.hold_bytes.max(1))
                    .clamp(1, u64::from(self.max_doc).max(1)),
            };
            for pass in 0..passes {
                let bound = |p: u64| (u64::from(self.max_doc) * p / passes) as DocId;
                let (lo, hi) = match passes {
                    1 => (0, TERMINATED),
                    _ => (bound(pass), bound(pass + 1)),
                };
                for (h, info) in hits.iter().copied().zip(&infos) {
                    let r = &self.readers[h.index];
                    let mut c = r.cursor(info)?;
                    let map = &self.maps[h.index];
                    let affine = self.affine[h.index];
                    while c.doc() != TERMINATED {
                        // A posting's new number and norm are cache misses
                        // over sparse postings: fetched ahead, so that they
                        // overlap (the new number first, then its norm).
                        if let Some(d) = c.upcoming(2 * FETCH_AHEAD) {
                            match affine {
                                Some(base) => prefetch(field_norms.as_ptr().wrapping_add((base + d) as usize)),
                                None => prefetch(map.as_ptr().wrapping_add(d as usize)),
                            }
                        }
                        if affine.is_none() {
                            if let Some(&to) = c.upcoming(FETCH_AHEAD).and_then(|d| map.get(d as usize)) {
                                prefetch(field_norms.as_ptr().wrapping_add(to as usize));
                            }
                        }
                        let to = match affine {
                            Some(base) => base + c.doc(),
                            None => map[c.doc() as usize],
                        };
                        if to == TERMINATED || to < lo || to >= hi {
                            c.advance();
                            continue;
                        }
                        c.positions(&mut pos);
                        c.offsets(&mut off);
                        after.clear();
                        before.clear();
                        if let Some(fb) = filter_bytes {
                            for (dir, out) in [(Direction::After, &mut after), (Direction::Before, &mut before)] {
                                if !c.copy_filter(dir, out) {
                                    out.resize(fb, 0xff);
                                }
                            }
                        }
                        let norm = *field_norms
                            .get(to as usize)
                            .ok_or_else(|| Error::Internal(format!("merged document {to} has no norm")))?;
                        match self.ordered {
                            true => term
                                .push(to, &pos, &off, (&after, &before), norm)
                                .map_err(|e| Error::Internal(format!("cannot encode a term's postings: {e}")))?,
                            false => held.hold(to, norm, &pos, &off, &after, &before),
                        }
                        live = true;
                        c.advance();
                    }
                    if let Some(e) = c.take_error() {
                        return Err(e);
                    }
                }
                if !self.ordered {
                    held.write(term, self.max_doc)?;
                }
            }
            for (h, info) in hits.iter().zip(&infos) {
                streamed[h.index].passed(self.files[h.index], info);
            }
            if !live {
                continue;
            }
            postings.end_term(key)?;
            let n = self.done.fetch_add(1, Ordering::Relaxed) + 1;
            if n.is_multiple_of(65_536) {
                (self.progress)(n);
                tracing::debug!("merge: {n} terms, rss {} MiB", rss_mib());
            }
        }
        Ok(())
    }
}

/// How many postings ahead a merge fetches a posting's norm into the
/// cache (its new number twice as far ahead).
const FETCH_AHEAD: usize = 8;

/// A term's postings gathered from its sources for a merge into a new
/// document order, written sorted by their new numbers; the buffers are
/// reused from term to term.
#[derive(Default)]
struct Held {
    /// New number, norm, and where the posting's data starts in each pool.
    postings: Vec<(DocId, u8, [u32; 3])>,
    positions: Vec<u32>,
    offsets: Vec<(u32, u32)>,
    filters: Vec<u8>,
    /// Bytes of one direction's filter (the same for every posting of a term).
    filter_len: usize,
    /// The postings' order by new number: `new << 32 | index` sorted, for
    /// a term in few documents.
    keys: Vec<u64>,
    /// For a term in many documents: a bit per new number, and the index
    /// of the posting at each new number (read where the bit is set).
    present: Vec<u64>,
    at_doc: Vec<u32>,
}

/// A term in at least `max_doc / DENSE_HELD` documents is put in order
/// through a bit per document rather than sorted: a scan of `max_doc` bits
/// costs less than sorting that many postings.
const DENSE_HELD: usize = 32;

impl Held {
    fn hold(&mut self, to: DocId, norm: u8, pos: &[u32], off: &[(u32, u32)], after: &[u8], before: &[u8]) {
        let at = [
            self.positions.len() as u32,
            self.offsets.len() as u32,
            self.filters.len() as u32,
        ];
        self.postings.push((to, norm, at));
        self.positions.extend_from_slice(pos);
        self.offsets.extend_from_slice(off);
        self.filter_len = after.len();
        self.filters.extend_from_slice(after);
        self.filters.extend_from_slice(before);
    }

    /// Writes the held postings in document order (new numbers below
    /// `max_doc`) to `term`, and empties.
    fn write(&mut self, term: &mut crate::layout::TermWriter, max_doc: u32) -> Result<()> {
        let n = self.postings.len();
        if n == 0 {
            return Ok(());
        }
        if n >= (max_doc as usize / DENSE_HELD).max(64) {
            let words = (max_doc as usize).div_ceil(64);
            self.present.clear();
            self.present.resize(words, 0);
            self.at_doc.resize(self.at_doc.len().max(max_doc as usize), 0);
            for (i, p) in self.postings.iter().enumerate() {
                let d = p.0 as usize;
                if d >= max_doc as usize {
                    return Err(Error::Internal(format!("merged document {d} of {max_doc}")));
                }
                self.present[d / 64] |= 1 << (d % 64);
                self.at_doc[d] = i as u32;
            }
            let present = std::mem::take(&mut self.present);
            let mut result = Ok(());
            'words: for (w, &bits) in present.iter().enumerate() {
                let mut bits = bits;
                while bits != 0 {
                    let d = w * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    if let Err(e) = self.push(term, self.at_doc[d] as usize) {
                        result = Err(e);
                        break 'words;
                    }
                }
            }
            self.present = present;
            result?;
        } else {
            let mut keys = std::mem::take(&mut self.keys);
            keys.clear();
            keys.extend(
                self.postings
                    .iter()
                    .enumerate()
                    .map(|(i, p)| u64::from(p.0) << 32 | i as u64),
            );
            keys.sort_unstable();
            let result = keys.iter().try_for_each(|&k| self.push(term, k as u32 as usize));
            self.keys = keys;
            result?;
        }
        self.postings.clear();
        self.positions.clear();
        self.offsets.clear();
        self.filters.clear();
        Ok(())
    }

    /// Writes held posting `i` to `term`.
    #[inline]
    fn push(&self, term: &mut crate::layout::TermWriter, i: usize) -> Result<()> {
        let (to, norm, at) = self.postings[i];
        let end = self.postings.get(i + 1).map_or(
            [
                self.positions.len() as u32,
                self.offsets.len() as u32,
                self.filters.len() as u32,
            ],
            |n| n.2,
        );
        let filters = &self.filters[at[2] as usize..end[2] as usize];
        let f = self.filter_len.min(filters.len());
        term.push(
            to,
            &self.positions[at[0] as usize..end[0] as usize],
            &self.offsets[at[1] as usize..end[1] as usize],
            (&filters[..f], &filters[f..]),
            norm,
        )
        .map_err(|e| Error::Internal(format!("cannot encode a term's postings: {e}")))
    }
}

/// Terms walked by the reordering's passes over the dictionaries between
/// two releases of their pages.
const DICT_RELEASE_TERMS: u64 = 65_536;

/// About the bytes a term's postings take held for a reordered merge
/// (positions, offsets, filters and each posting's entry), from the
/// sources' statistics.
fn held_bytes(infos: &[TermInfo], filter_bytes: Option<usize>) -> u64 {
    let per_doc = 16 + 2 * filter_bytes.unwrap_or(0) as u64;
    infos
        .iter()
        .map(|i| {
            let r = &i.region;
            let offsets = if r.off_len > 0 { r.total_term_freq * 8 } else { 0 };
            r.total_term_freq * 4 + offsets + u64::from(r.doc_freq) * per_doc
        })
        .sum()
}

/// The merged documents' new order by recursive graph bisection over the
/// terms `params` selects: `order[new]` is the number by concatenation
/// (what `maps` give).
#[allow(clippy::too_many_arguments)]
fn reorder_documents(
    readers: &[&SegmentReader],
    files: &[&PostingsFiles],
    maps: &[Vec<DocId>],
    layout: Layout,
    n_fields: usize,
    max_doc: u32,
    params: &BpParams,
    threads: usize,
    ranges: &[TermRange],
) -> Result<Vec<DocId>> {
    let started = std::time::Instant::now();
    // Each source's live documents are a contiguous range of the numbers
    // by concatenation: the sources are read on parallel threads, each
    // filling its documents' rows.
    let mut parts = Vec::with_capacity(files.len());
    let mut start = 0u32;
    for map in maps {
        let live = map.iter().filter(|&&to| to != TERMINATED).count() as u32;
        parts.push(start..start + live);
        start += live;
    }
    // The sample comes first, from one source's dictionary: documents that
    // keep their order cost no walk over every source's.
    if params.min_gain > 0.0 {
        if let Some(sample) = sampled_gain(readers, files, maps, &parts, layout, n_fields, params, threads)? {
            tracing::info!(
                docs = sample.docs,
                postings = sample.postings,
                gain = sample.gain,
                min_gain = params.min_gain,
                secs = started.elapsed().as_secs_f64(),
                "reordering sampled"
            );
            if sample.gain < f64::from(params.min_gain) {
                tracing::info!(
                    "documents keep their order: a sample of {} saves {:.1}% of the log-gap cost, under {:.1}%",
                    sample.docs,
                    100.0 * sample.gain,
                    100.0 * params.min_gain
                );
                return Ok((0..max_doc).collect());
            }
        }
    }
    let walking = std::time::Instant::now();
    // A term's documents (deleted ones included) in all sources.
    let doc_freq = |hits: &[fst::map::IndexedValue]| -> Result<u64> {
        hits.iter()
            .try_fold(0, |df, h| Ok(df + source_doc_freq(files[h.index], h.value)?))
    };
    // One walk over every term of the sources, a thread per range of the
    // term space (the dictionaries' pages released as it goes, every
    // source's at its end), keeps the terms the parameters select, with
    // where each source holds them.
    let walk = |range: &TermRange| -> Result<Vec<(u64, Vec<fst::map::IndexedValue>)>> {
        let mut selected = Vec::new();
        let mut terms = TermsInOrder::new(files, layout, n_fields, range);
        let (mut key, mut hits) = (Vec::new(), Vec::new());
        let mut walked = 0u64;
        while terms.next(&mut key, &mut hits) {
            walked += 1;
            if walked.is_multiple_of(DICT_RELEASE_TERMS) {
                files.iter().for_each(|f| f.terms().release());
            }
            let df = doc_freq(&hits)?;
            if params.selects(df, u64::from(max_doc)) {
                selected.push((df, hits.clone()));
            }
        }
        Ok(selected)
    };
    let mut candidates: Vec<(u64, Vec<fst::map::IndexedValue>)> = Vec::new();
    if ranges.len() > 1 {
        let walked: Vec<Result<_>> = std::thread::scope(|s| {
            let handles: Vec<_> = ranges.iter().map(|r| s.spawn(|| walk(r))).collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        for part in walked {
            candidates.extend(part?);
        }
    } else {
        candidates = walk(&TermRange::default())?;
    }
    readers.iter().for_each(|r| r.release());
    let walk_secs = walking.elapsed().as_secs_f64();
    let cap = params.doc_freq_cap(candidates.iter().map(|c| c.0).collect());
    candidates.retain(|c| c.0 <= cap);
    let mut by_source: Vec<Vec<(u32, u64)>> = vec![Vec::new(); files.len()];
    for (number, (_, hits)) in candidates.iter().enumerate() {
        for h in hits {
            by_source[h.index].push((number as u32, h.value));
        }
    }
    let num_terms = candidates.len() as u32;
    drop(candidates);
    let fwd = ForwardIndex::build_parts(&parts, num_terms, threads, |s, f| {
        // The postings read leave the process's memory as the pass goes.
        let (file, reader, map) = (files[s], readers[s], &maps[s]);
        let mut streamed = Streamed::default();
        for &(number, value) in &by_source[s] {
            let info = file.resolve(file.terms().term_ref(value))?;
            let mut c = reader.cursor(&info)?;
            while c.doc() != TERMINATED {
                let to = map[c.doc() as usize];
                if to != TERMINATED {
                    f(number, to);
                }
                c.advance();
            }
            if let Some(e) = c.take_error() {
                return Err(e);
            }
            streamed.passed(file, &info);
        }
        file.terms().release();
        reader.release();
        Ok(())
    })?;
    let read = started.elapsed().as_secs_f64();
    let bisecting = std::time::Instant::now();
    let order = bisect(&fwd, params, threads);
    let bisect_secs = bisecting.elapsed().as_secs_f64();
    let identity: Vec<DocId> = (0..max_doc).collect();
    tracing::info!(
        docs = max_doc,
        postings = fwd.len(),
        doc_freq_cap = cap,
        cost_before = crate::indexing::reorder::log_gap_cost(&fwd, &identity, 128),
        cost_after = crate::indexing::reorder::log_gap_cost(&fwd, &order, 128),
        walk_secs,
        read_secs = read,
        bisect_secs,
        secs = started.elapsed().as_secs_f64(),
        "documents reordered by recursive graph bisection"
    );
    Ok(order)
}

/// The documents (deleted ones included) of the term at `value` in a
/// source's dictionary: from the dictionary where it holds them (reading
/// the term's region would bring every page of the postings into memory).
fn source_doc_freq(files: &PostingsFiles, value: u64) -> Result<u64> {
    Ok(match files.terms().doc_freq_of(value) {
        Some(d) => u64::from(d),
        None => u64::from(files.resolve(files.terms().term_ref(value))?.region.doc_freq),
    })
}

/// What bisecting a sample of a merge's documents saved.
struct Sampled {
    /// Documents and forward-index postings of the sample.
    docs: u32,
    postings: usize,
    /// The share of the sample's log-gap cost its bisection saved.
    gain: f64,
}

/// Bisects the first [`SAMPLE_DOCS`] live documents of the largest source
/// (numbered by concatenation in `parts`) over the terms its own dictionary
/// holds that `params` would select in the merge (their document frequency
/// there estimated from the source's, in proportion to its documents), and
/// measures the share of their log-gap cost it saves; `None` when the
/// sample would be every document (the reordering itself costs no more).
#[allow(clippy::too_many_arguments)]
fn sampled_gain(
    readers: &[&SegmentReader],
    files: &[&PostingsFiles],
    maps: &[Vec<DocId>],
    parts: &[std::ops::Range<u32>],
    layout: Layout,
    n_fields: usize,
    params: &BpParams,
    threads: usize,
) -> Result<Option<Sampled>> {
    let Some((s, part)) = parts
        .iter()
        .enumerate()
        .max_by_key(|(i, p)| (p.len(), std::cmp::Reverse(*i)))
    else {
        return Ok(None);
    };
    let total = parts.last().map_or(0, |p| p.end);
    let docs = (part.len() as u32).min(SAMPLE_DOCS);
    if docs == total {
        return Ok(None);
    }
    let (file, reader, map) = (files[s], readers[s], &maps[s]);
    // The source's documents, deleted ones included, as its dictionary
    // counts them.
    let scale = f64::from(total) / (map.len().max(1) as f64);
    let mut selected: Vec<(u64, u64)> = Vec::new();
    let mut terms = TermsInOrder::new(std::slice::from_ref(&files[s]), layout, n_fields, &TermRange::default());
    let (mut key, mut hits) = (Vec::new(), Vec::new());
    let mut walked = 0u64;
    while terms.next(&mut key, &mut hits) {
        walked += 1;
        if walked.is_multiple_of(DICT_RELEASE_TERMS) {
            file.terms().release();
        }
        for h in &hits {
            let estimate = (source_doc_freq(file, h.value)? as f64 * scale).round() as u64;
            if params.selects(estimate, u64::from(total)) {
                selected.push((estimate, h.value));
            }
        }
    }
    let cap = params.doc_freq_cap(selected.iter().map(|t| t.0).collect());
    selected.retain(|t| t.0 <= cap);
    let end = part.start + docs;
    let fwd = ForwardIndex::build(docs, |f| {
        for (number, &(_, value)) in selected.iter().enumerate() {
            let info = file.resolve(file.terms().term_ref(value))?;
            let mut c = reader.cursor(&info)?;
            while c.doc() != TERMINATED {
                let to = map[c.doc() as usize];
                if to != TERMINATED {
                    // Numbers by concatenation follow the source's order.
                    if to >= end {
                        break;
                    }
                    f(number as u32, to - part.start);
                }
                c.advance();
            }
            if let Some(e) = c.take_error() {
                return Err(e);
            }
        }
        Ok(())
    })?;
    file.terms().release();
    reader.release();
    let order = bisect(&fwd, params, threads);
    let identity: Vec<DocId> = (0..docs).collect();
    let before = log_gap_cost(&fwd, &identity, 128);
    let after = log_gap_cost(&fwd, &order, 128);
    Ok(Some(Sampled {
        docs,
        postings: fwd.len(),
        gain: if before > 0.0 { 1.0 - after / before } else { 0.0 },
    }))
}

/// Where a merge worker is in one source's postings files: their data is
/// laid out in term order, so what lies before the end of the last term's
/// data (from where the worker started) is read for good, and is released
/// from the process's memory every [`RELEASE_STEP`] bytes (on `mmap`,
/// mapped pages count as the process's own until dropped). Released up to
/// the end of a term's data, not its start: a common term's data in each of
/// a hundred sources would otherwise stay until each source's next term.
/// The source's dictionary is released too, every [`DICT_RELEASE_STEP`]
/// bytes of postings.
#[derive(Debug, Clone, Default)]
struct Streamed {
    /// Per file (zones, positions, offsets, filters): the first byte not
    /// released.
    from: [Option<usize>; 4],
    /// Postings bytes released since the dictionary last was.
    since_dict: usize,
}

/// Bytes a merge worker streams past in a file before releasing them (a
/// worker holds up to this much per source and file).
const RELEASE_STEP: usize = 256 << 10;

/// Postings bytes a merge worker streams past in a source between
/// releases of its dictionary.
const DICT_RELEASE_STEP: usize = 2 << 20;

impl Streamed {
    /// The worker has read the term whose data `info` locates in `files`.
    fn passed(&mut self, files: &PostingsFiles, info: &TermInfo) {
        let r = &info.region;
        let spans: [Option<(&crate::storage::IndexFile, u64, u64)>; 4] = match files.layout() {
            // One file: the region (its small header aside) from the offset.
            Layout::Grouped => [Some((files.doc_file(), info.doc_offset, r.len())), None, None, None],
            Layout::Split => [
                Some((files.doc_file(), info.doc_offset, r.zone_len as u64)),
                Some((files.pos_file(), info.pos_offset, r.pos_len as u64)),
                Some((files.pay_file(), info.off_offset, r.off_len as u64)),
                // A segment without filters has no file of them.
                (!std::ptr::eq(files.bloom_file(), files.doc_file()))
                    .then(|| (files.bloom_file(), info.bloom_offset, r.bloom_len())),
            ],
        };
        for (from, span) in self.from.iter_mut().zip(spans) {
            // An empty section (a term without filters) locates nothing.
            let Some((file, at, len)) = span.filter(|s| s.2 > 0) else {
                continue;
            };
            let (start, end) = (at as usize, (at + len) as usize);
            let first = *from.get_or_insert(start);
            if end >= first + RELEASE_STEP {
                file.release(first..end);
                *from = Some(end);
                self.since_dict += end - first;
            }
        }
        if self.since_dict >= DICT_RELEASE_STEP {
            files.terms().release();
            self.since_dict = 0;
        }
    }
}

/// The postings and dictionary files of a merge, with its number of terms.
type PostingsOut = (Vec<(&'static str, FileInfo)>, u64);

/// Merges the term ranges `ranges` on a thread each into parts of segment
/// `name`, writes the documents' side (norms, columns, store, ids) on the
/// calling thread meanwhile, then appends the parts in order into the
/// segment's postings and removes them.
#[allow(clippy::too_many_arguments)]
fn merge_in_parallel(
    job: &PostingsJob<'_>,
    ranges: &[TermRange],
    name: &str,
    readers: &[&SegmentReader],
    maps: &[Vec<DocId>],
    norms: &[Option<Vec<u8>>],
    normed: &[u8],
    max_doc: u64,
    store: StoreOptions,
    path: &(dyn Fn(&str) -> std::path::PathBuf + Sync),
) -> Result<(PostingsOut, BTreeMap<String, FileInfo>)> {
    let dir = job.dir;
    let part_names: Vec<String> = (0..ranges.len()).map(|k| format!("{name}.m{k}")).collect();
    let remove_parts = || {
        for p in &part_names {
            for e in crate::layout::postings::ext::of(job.format.layout)
                .iter()
                .chain([&crate::layout::postings::ext::BLOOM])
            {
                let _ = std::fs::remove_file(dir.join(format!("{p}.{e}")));
            }
        }
    };
    let started = std::time::Instant::now();
    // With a range for every core, the documents' side waits for the first
    // range to finish: it then fills the core that range leaves, and the
    // one the dictionary's FST (built on this thread once every range is
    // merged) leaves, instead of taking a share of every core meanwhile.
    let defer_documents = defers_documents(ranges.len(), cores());
    let (range_done, first_range_done) = std::sync::mpsc::channel::<()>();
    fn join<T>(h: std::thread::ScopedJoinHandle<'_, Result<T>>) -> Result<T> {
        h.join()
            .unwrap_or_else(|_| Err(Error::Internal("a merge worker panicked".into())))
    }
    // The first range is written straight into the segment's files, the
    // others into parts appended to it.
    let (result, docs_side) = std::thread::scope(|s| {
        let done = range_done.clone();
        let first = s.spawn(move || -> Result<PostingsWriter> {
            let t = std::time::Instant::now();
            let mut w = PostingsWriter::create(dir, name, job.format)?;
            let ran = job.run(&ranges[0], &mut w);
            let _ = done.send(());
            ran?;
            tracing::debug!("merge {name}: first range, {} terms, in {:.2?}", w.len(), t.elapsed());
            Ok(w)
        });
        let workers: Vec<_> = ranges[1..]
            .iter()
            .zip(&part_names[1..])
            .map(|(range, part)| {
                let done = range_done.clone();
                s.spawn(move || -> Result<PostingsPart> {
                    let t = std::time::Instant::now();
                    let mut w = PostingsWriter::create(dir, part, job.format)?.temporary();
                    let ran = job.run(range, &mut w);
                    let _ = done.send(());
                    ran?;
                    tracing::debug!("merge {part}: {} terms in {:.2?}", w.len(), t.elapsed());
                    w.finish_part()
                })
            })
            .collect();
        // Every worker holds a sender: the wait ends when one finishes or
        // when all are gone, whatever happened to them.
        drop(range_done);
        let docs_side = s.spawn(move || {
            if defer_documents {
                let _ = first_range_done.recv();
            }
            let t = std::time::Instant::now();
            let docs_side = write_documents(readers, maps, job.ordered, norms, normed, max_doc, store, path);
            tracing::debug!("merge {name}: documents' side in {:.2?}", t.elapsed());
            docs_side
        });
        let parts: Vec<_> = workers.into_iter().map(join).collect();
        let first = join(first);
        tracing::debug!(
            "merge {name}: {} ranges merged in {:.2?}",
            ranges.len(),
            started.elapsed()
        );
        let result = (|| {
            let mut postings = first?;
            let parts = parts.into_iter().collect::<Result<Vec<_>>>()?;
            let storage = Storage::new(TierOptions::on(Tier::Buffered))?;
            for (part, written) in part_names[1..].iter().zip(parts) {
                let open = |e: &str| {
                    let file = storage.open(dir.join(format!("{part}.{e}")))?;
                    let info = written.files.iter().find(|(x, _)| *x == e).map(|(_, i)| *i);
                    if info.is_none_or(|i| i.checksum != file.checksum()) {
                        return Err(Error::corrupt(file.path(), "a merge part changed before it was joined"));
                    }
                    Ok(file)
                };
                match written.dict {
                    // Grouped: the part's entries join this dictionary as they are.
                    Some(dict) => postings.append_part(&open(crate::layout::postings::ext::POSTINGS)?, dict)?,
                    None => postings.append(&PostingsFiles::open(job.format, open)?)?,
                }
            }
            let num_terms = postings.len();
            let joined = postings.finish()?;
            tracing::debug!("merge {name}: ranges joined after {:.2?}", started.elapsed());
            Ok((joined, num_terms))
        })();
        (result, join(docs_side))
    });
    let result = result.and_then(|postings| Ok((postings, docs_side?)));
    remove_parts();
    result
}

/// The machine's cores.
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Whether a merge into `ranges` term ranges on `cores` cores writes its
/// documents' side once the first range is merged (a range for every
/// core), rather than beside the ranges.
fn defers_documents(ranges: usize, cores: usize) -> bool {
    ranges >= cores
}

/// The documents' side of a merge in document order less its join (the
/// parts' copy and the dictionary's FST), as a share of the time of
/// merging every term: on 1M generated documents, 2 threads, the
/// documents' side took 0.13 of it (4.3 s) and the join 0.05 once they no
/// longer ran side by side (both write new pages; side by side they took
/// 8.0 and 4.4 s). In a reordered merge of Wikipedia the documents' side
/// is 0.07, the join 0.10.
const DOCUMENTS_OVER_JOIN: f64 = 0.08;

/// The shares of the postings volume of the `threads` term ranges of a
/// merge in document order (in a new order, whose terms cost more to
/// merge, the documents' side is the smaller: even shares). When the
/// documents' side waits for the first range to finish
/// ([`defers_documents`]), the last range is the smaller by
/// [`DOCUMENTS_OVER_JOIN`], so that it finishes first and its thread
/// writes the documents' side while the others merge on, and the first
/// range's thread joins the parts when they are done: every thread ends
/// together, and the part copied into the segment is smaller. Otherwise
/// even shares.
fn range_shares(threads: usize, cores: usize) -> Vec<f64> {
    let n = threads.max(1);
    if n == 1 || !defers_documents(n, cores) {
        return vec![1.0 / n as f64; n];
    }
    let even = (1.0 + DOCUMENTS_OVER_JOIN) / n as f64;
    // With many threads the documents' side outweighs a range: the last
    // keeps at least a quarter of `even`.
    let last = (even - DOCUMENTS_OVER_JOIN).max(even / 4.0);
    let others = (1.0 - last) / (n - 1) as f64;
    let mut shares = vec![others; n - 1];
    shares.push(last);
    shares
}

/// Documents whose stored records a merge copies between releases of the
/// source store's mapped pages.
const STORE_RELEASE_DOCS: u32 = 2048;

/// Writes the documents' side of a merged segment: norms, columns, the
/// document store and the ids; returns their files by extension.
#[allow(clippy::too_many_arguments)]
fn write_documents(
    readers: &[&SegmentReader],
    maps: &[Vec<DocId>],
    ordered: bool,
    norms: &[Option<Vec<u8>>],
    normed: &[u8],
    max_doc: u64,
    store: StoreOptions,
    path: &dyn Fn(&str) -> std::path::PathBuf,
) -> Result<BTreeMap<String, FileInfo>> {
    let mut files = BTreeMap::new();
    let mut norms_file = FileWriter::create(path(ext::NORMS))?;
    for &f in normed {
        norms_file.write_all(norms[f as usize].as_ref().expect("normed"))?;
    }
    files.insert(ext::NORMS.to_string(), norms_file.finish()?);
    if let Some(info) = merge_columns(readers, maps, max_doc as u32, &path(ext::COLUMNS))? {
        files.insert(ext::COLUMNS.to_string(), info);
    }
    let stores: Vec<_> = readers.iter().flat_map(|r| r.stores()).collect();
    let mut store = StoreWriter::create_for_merge(&path(ext::STORE), &path(ext::STORE_INDEX), store, &stores)?;
    let mut ids = IdsWriter::new();
    let mut id = String::new();
    // Source and local number of each merged document, in merged order.
    let mut order = vec![(0u32, 0 as DocId); max_doc as usize];
    for (src, map) in maps.iter().enumerate() {
        for (d, &to) in map.iter().enumerate() {
            if to != TERMINATED {
                order[to as usize] = (src as u32, d as DocId);
            }
        }
    }
    // In a new order the records are read with `pread` from stores opened
    // again on the buffered tier: through the mapping, every record read
    // here and there faults pages in, and the mapping must be dropped every
    // few hundred records to stay within the memory budget.
    let by_pread = match ordered {
        true => None,
        false => {
            let storage = Storage::new(TierOptions::on(Tier::Buffered))?;
            Some(
                readers
                    .iter()
                    .map(|r| {
                        r.stores()
                            .iter()
                            .map(|s| s.reopen_to_copy(&storage))
                            .collect::<Result<Vec<_>>>()
                    })
                    .collect::<Result<Vec<_>>>()?,
            )
        }
    };
    let mapped: Vec<Vec<&StoreReader>> = readers.iter().map(|r| r.stores()).collect();
    for (i, &(src, d)) in order.iter().enumerate() {
        let r = readers[src as usize];
        let (source, local) = r.store_of(d)?;
        let source = match &by_pread {
            Some(reopened) => {
                let part = mapped[src as usize]
                    .iter()
                    .position(|s| std::ptr::eq(*s, source))
                    .ok_or_else(|| Error::Internal("a document's store is not its segment's".into()))?;
                &reopened[src as usize][part]
            }
            None => source,
        };
        store.copy_from(source, local)?;
        r.external_id(d, &mut id)?;
        ids.push(&id);
        // The store's pages copied so far leave the process's memory as
        // the copy goes (a large source's store would be resident whole
        // until copied).
        if ordered && d % STORE_RELEASE_DOCS == STORE_RELEASE_DOCS - 1 {
            source.release();
        }
        if ordered && order.get(i + 1).is_none_or(|n| n.0 != src) {
            r.stores().iter().for_each(|s| s.release());
        }
    }
    for r in readers {
        r.stores().iter().for_each(|s| s.release());
    }
    let store = store.finish()?;
    files.insert(ext::STORE.to_string(), store.data);
    files.insert(ext::STORE_INDEX.to_string(), store.index);
    files.insert(ext::IDS.to_string(), ids.finish(&path(ext::IDS))?);
    Ok(files)
}

/// Splits the term space of a merge into about `parts` ranges of similar
/// postings volume, judged from the largest source: the position of a
/// term's data in its postings files grows with the term order, so the
/// terms found at `1/parts`, `2/parts`, ... of its data bound the ranges.
pub fn partition(files: &[&PostingsFiles], layout: Layout, parts: usize) -> Result<Vec<TermRange>> {
    let at: Vec<f64> = (1..parts).map(|j| j as f64 / parts as f64).collect();
    Ok(ranges_between(partition_bounds(files, layout, &at)?))
}

/// The terms found at each of the fractions `at` (from 0 to 1) of the
/// largest source's postings (see [`partition`]): for each, the key whose
/// data starts last at or before it, in the form a [`TermRange`] bound
/// takes (`None` when there is none).
fn partition_bounds(files: &[&PostingsFiles], layout: Layout, at: &[f64]) -> Result<Vec<Option<Vec<u8>>>> {
    use fst::Streamer;
    let Some(largest) = files.iter().max_by_key(|f| f.doc_file().len()) else {
        return Ok(vec![None; at.len()]);
    };
    let total = largest.doc_file().len() as u64;
    let targets: Vec<u64> = at.iter().map(|f| (f.clamp(0.0, 1.0) * total as f64) as u64).collect();
    let mut best: Vec<Option<(u64, Vec<u8>)>> = vec![None; targets.len()];
    let mut stream = largest.terms().fst().stream();
    let mut n = 0u64;
    while let Some((key, value)) = stream.next() {
        let at = match largest.terms().term_ref(value) {
            TermRef::Region(offset) => offset,
            TermRef::Ordinal(ord) => {
                // Reading every info of a split dictionary would cost a
                // read per term: sample.
                n += 1;
                if n % 64 != 1 {
                    continue;
                }
                largest.terms().info(ord)?.doc_offset
            }
        };
        for (t, b) in targets.iter().zip(best.iter_mut()) {
            if at <= *t && b.as_ref().is_none_or(|(o, _)| at > *o) {
                *b = Some((at, key.to_vec()));
            }
        }
    }
    Ok(best
        .into_iter()
        .map(|b| {
            b.map(|(_, key)| match layout {
                // Grouped ranges are of term texts (a text's fields stay together).
                Layout::Grouped => key.get(1..).unwrap_or_default().to_vec(),
                Layout::Split => key,
            })
            .filter(|b| !b.is_empty())
        })
        .collect())
}

/// The ranges between `bounds` (sorted, repeats dropped).
fn ranges_between(bounds: Vec<Option<Vec<u8>>>) -> Vec<TermRange> {
    let mut bounds: Vec<Vec<u8>> = bounds.into_iter().flatten().collect();
    bounds.sort();
    bounds.dedup();
    let mut ranges = Vec::with_capacity(bounds.len() + 1);
    let mut lo = None;
    for b in bounds {
        ranges.push(TermRange {
            lo: lo.take(),
            hi: Some(b.clone()),
        });
        lo = Some(b);
    }
    ranges.push(TermRange { lo, hi: None });
    ranges
}

/// The part of the term space one merge worker writes, in the layout's
/// term order: from `lo` (included) to `hi` (excluded), `None` for the
/// ends. Grouped: term texts (keys without their field byte), since a
/// text's fields are written together; split: whole keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TermRange {
    /// The first term of the range (`None`: from the start).
    pub lo: Option<Vec<u8>>,
    /// The first term after it (`None`: to the end).
    pub hi: Option<Vec<u8>>,
}

/// Writes documents `docs` of `reader` (the newest parts of a chained
/// segment, whose metas are `parts`, deleted documents included: the
/// chain numbers them) as one part `name` in `dir`: norms, stored documents
/// (copied without recompression when the dictionary allows) and ids, no
/// postings. Its statistics are the parts' summed.
pub fn merge_part_documents(
    dir: &Path,
    reader: &SegmentReader,
    docs: std::ops::Range<DocId>,
    parts: &[SegmentMeta],
    name: &str,
) -> Result<SegmentMeta> {
    let path = |e: &str| dir.join(format!("{name}.{e}"));
    let n_fields = parts.iter().map(|m| m.fields.len()).max().unwrap_or(0);
    let mut normed: Vec<u8> = parts.iter().flat_map(|m| m.normed_fields()).collect();
    normed.sort_unstable();
    normed.dedup();
    let mut stats = vec![FieldStats::default(); n_fields];
    for m in parts {
        for (s, f) in stats.iter_mut().zip(&m.fields) {
            s.add(f);
        }
    }
    let (lo, hi) = (docs.start as usize, docs.end as usize);
    let mut norms_file = FileWriter::create(path(ext::NORMS))?;
    for f in normed.iter().map(|&i| Field::from_id(i)) {
        match reader.norms(f).get(lo..hi) {
            Some(n) => norms_file.write_all(n)?,
            None => norms_file.write_zeros(hi - lo)?,
        }
    }
    let mut files = BTreeMap::new();
    files.insert(ext::NORMS.to_string(), norms_file.finish()?);
    let mut stores: Vec<&crate::store::StoreReader> = Vec::new();
    for d in docs.clone() {
        let (s, _) = reader.store_of(d)?;
        if !stores.last().is_some_and(|l| std::ptr::eq(*l, s)) {
            stores.push(s);
        }
    }
    let mut store = StoreWriter::create_for_merge(
        &path(ext::STORE),
        &path(ext::STORE_INDEX),
        StoreOptions::default(),
        &stores,
    )?;
    let mut ids = IdsWriter::new();
    let mut id = String::new();
    for d in docs.clone() {
        let (source, local) = reader.store_of(d)?;
        store.copy_from(source, local)?;
        reader.external_id(d, &mut id)?;
        ids.push(&id);
    }
    let store = store.finish()?;
    files.insert(ext::STORE.to_string(), store.data);
    files.insert(ext::STORE_INDEX.to_string(), store.index);
    files.insert(ext::IDS.to_string(), ids.finish(&path(ext::IDS))?);
    let map: Vec<DocId> = (0..reader.max_doc())
        .map(|d| if docs.contains(&d) { d - docs.start } else { TERMINATED })
        .collect();
    if let Some(info) = merge_columns(&[reader], &[map], docs.end - docs.start, &path(ext::COLUMNS))? {
        files.insert(ext::COLUMNS.to_string(), info);
    }
    let norm_fields =
        (normed.len() != n_fields || normed.iter().enumerate().any(|(i, &f)| f as usize != i)).then_some(normed);
    Ok(SegmentMeta {
        name: name.to_string(),
        max_doc: docs.end - docs.start,
        fields: stats,
        norm_fields,
        num_terms: 0,
        files,
        deletes: None,
        chain: None,
    })
}

/// The columns of the merged segment: every column any source has, each
/// live document's values under its new number (from the doc values, or
/// from the points of a column without them). `None` when no source has
/// columns.
fn merge_columns(
    readers: &[&SegmentReader],
    maps: &[Vec<DocId>],
    max_doc: u32,
    path: &Path,
) -> Result<Option<FileInfo>> {
    let mut specs: BTreeMap<u8, (ColumnKind, bool, bool)> = BTreeMap::new();
    for r in readers {
        for part in r.parts() {
            for field in 0..=u8::MAX {
                if let Some(c) = part.columns().and_then(|c| c.column(field)) {
                    let e = specs.entry(field).or_insert((c.meta.kind, false, false));
                    e.1 |= c.meta.points.is_some();
                    e.2 |= c.meta.values.is_some();
                }
            }
        }
    }
    if specs.is_empty() {
        return Ok(None);
    }
    let mut w = ColumnsWriter::new();
    let cols: Vec<(u8, usize, ColumnKind)> = specs
        .iter()
        .map(|(&f, &(kind, points, values))| (f, w.add_column(f, kind, points, values), kind))
        .collect();
    let (mut codes, mut term, mut pairs) = (Vec::new(), Vec::new(), Vec::new());
    for (r, map) in readers.iter().zip(maps) {
        for part in r.parts() {
            let Some(columns) = part.columns() else {
                continue;
            };
            let range = part.base as usize..(part.base + part.max_doc) as usize;
            if map[range].iter().all(|&to| to == TERMINATED) {
                continue;
            }
            for &(field, col, kind) in &cols {
                let Some(mut cr) = columns.reader(field) else {
                    continue;
                };
                pairs.clear();
                if cr.has_doc_values() {
                    for local in 0..part.max_doc {
                        let to = map[(part.base + local) as usize];
                        if to == TERMINATED {
                            continue;
                        }
                        cr.codes(local, &mut codes)?;
                        pairs.extend(codes.iter().map(|&c| (to, c)));
                    }
                } else {
                    let all = cr.all_points();
                    for pos in all.start..all.end {
                        let to = map[(part.base + cr.point_doc(pos)?) as usize];
                        if to != TERMINATED {
                            pairs.push((to, cr.point_code(pos)?));
                        }
                    }
                    pairs.sort_unstable();
                }
                for &(to, c) in &pairs {
                    match kind {
                        ColumnKind::Keyword => {
                            cr.term(c, &mut term)?;
                            let s = std::str::from_utf8(&term)
                                .map_err(|_| Error::corrupt(columns.file().path(), "keyword is not UTF-8"))?;
                            w.push_keyword(col, to, s);
                        }
                        _ => w.push(col, to, c),
                    }
                }
            }
        }
    }
    w.finish(max_doc, path).map(Some)
}

/// The union of the sources' terms in the layout's write order
/// ([`Layout::term_order`]): one stream per field, merged.
struct TermsInOrder<'a> {
    layout: Layout,
    /// Per field: its union, and its current term (`None`: done).
    streams: Vec<(fst::map::Union<'a>, Option<Term>)>,
}

/// A term key and the sources holding it.
type Term = (Vec<u8>, Vec<fst::map::IndexedValue>);

impl<'a> TermsInOrder<'a> {
    /// The terms of `readers` in `range`.
    fn new(readers: &'a [&'a PostingsFiles], layout: Layout, n_fields: usize, range: &TermRange) -> Self {
        let n_fields = n_fields.min(Field::MAX) as u8;
        let mut streams = Vec::with_capacity(n_fields as usize + 1);
        // One stream per field id, and one for keys beyond the known fields
        // (none in a sound index; merged all the same, by the last range).
        let fields: Vec<(u8, Option<u8>)> = (0..n_fields)
            .map(|f| (f, Some(f + 1)))
            .chain(std::iter::once((n_fields, None)))
            .collect();
        for (f, next) in fields {
            // The field's keys as bounds: `[f] + text` when ranges are of
            // texts, else the whole keys, within the field's own.
            let (lo, hi): (Vec<u8>, Option<Vec<u8>>) = match layout {
                Layout::Grouped if next.is_none() => match range.hi {
                    Some(_) => continue,
                    None => (vec![f], None),
                },
                Layout::Grouped => {
                    let with = |t: &Vec<u8>| [&[f][..], t].concat();
                    (
                        range.lo.as_ref().map_or(vec![f], with),
                        Some(range.hi.as_ref().map_or(vec![next.expect("a field")], with)),
                    )
                }
                Layout::Split => {
                    let lo = range
                        .lo
                        .clone()
                        .filter(|l| l.as_slice() > [f].as_slice())
                        .unwrap_or(vec![f]);
                    let field_end = next.map(|n| vec![n]);
                    let hi = match (field_end, range.hi.clone()) {
                        (Some(e), Some(h)) => Some(e.min(h)),
                        (e, h) => e.or(h),
                    };
                    (lo, hi)
                }
            };
            if hi.as_ref().is_some_and(|h| *h <= lo) {
                continue;
            }
            let mut op = fst::map::OpBuilder::new();
            for r in readers {
                let stream = r.terms().fst().range().ge(&lo);
                op = match &hi {
                    Some(hi) => op.add(stream.lt(hi).into_stream()),
                    None => op.add(stream.into_stream()),
                };
            }
            let mut union = op.union();
            let first = union.next().map(|(k, h)| (k.to_vec(), h.to_vec()));
            streams.push((union, first));
        }
        TermsInOrder { layout, streams }
    }

    /// The next term's key and the sources holding it; false at the end.
    fn next(&mut self, key: &mut Vec<u8>, hits: &mut Vec<fst::map::IndexedValue>) -> bool {
        let layout = self.layout;
        let Some(i) = (0..self.streams.len())
            .filter(|&i| self.streams[i].1.is_some())
            .min_by(|&a, &b| {
                let ka = &self.streams[a].1.as_ref().expect("filtered").0;
                let kb = &self.streams[b].1.as_ref().expect("filtered").0;
                layout.term_order(ka, kb)
            })
        else {
            return false;
        };
        let (union, cur) = &mut self.streams[i];
        let (k, h) = cur.take().expect("filtered");
        *key = k;
        *hits = h;
        *cur = union.next().map(|(k, h)| (k.to_vec(), h.to_vec()));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::indexing::{build_index, IndexOptions};
    use crate::schema::Document;

    /// The ranges' shares cover the postings once; with the documents'
    /// side after the first range, the last range is the smallest.
    #[test]
    fn the_last_range_leaves_room_for_the_documents_side() {
        for cores in 1..=32 {
            for threads in 1..=32 {
                let shares = range_shares(threads, cores);
                assert_eq!(shares.len(), threads);
                assert!(
                    (shares.iter().sum::<f64>() - 1.0).abs() < 1e-9,
                    "{threads} on {cores}: {shares:?}"
                );
                assert!(shares.iter().all(|&s| s > 0.0), "{shares:?}");
                let (last, others) = shares.split_last().unwrap();
                match threads > 1 && defers_documents(threads, cores) {
                    true => assert!(others.iter().all(|o| o > last), "{threads} on {cores}: {shares:?}"),
                    false => assert!(others.iter().all(|o| o == last), "{threads} on {cores}: {shares:?}"),
                }
            }
        }
        let two = range_shares(2, 2);
        assert!((two[0] - 0.54).abs() < 1e-9 && (two[1] - 0.46).abs() < 1e-9, "{two:?}");
    }

    /// The postings bytes a merge judges its parallelism and disk room by
    /// count each file once: a grouped segment's one file was counted three
    /// times (as positions and offsets too), so a merge of 3.6 GB of
    /// postings asked for 21 GB free and ran on one thread.
    #[test]
    fn postings_bytes_count_each_file_once() {
        for layout in [Layout::Grouped, Layout::Split] {
            let dir = tempfile::tempdir().unwrap();
            let docs = (0..300).map(|i| {
                Ok(Document::new(format!("d{i}"))
                    .with_text("title", format!("t{} x", i % 17))
                    .with_text("body", format!("a b c d{} e{}", i % 29, i % 3)))
            });
            let opts = IndexOptions {
                layout,
                ..IndexOptions::default()
            };
            build_index(docs, dir.path(), &opts).unwrap();
            let index = crate::index::Index::open(dir.path(), crate::index::OpenOptions::default()).unwrap();
            let files = index.segments()[0].postings().unwrap();
            let on_disk: u64 = index.segments()[0]
                .meta()
                .files
                .iter()
                .filter(|(e, _)| ["pst", "doc", "pos", "pay", "blm"].contains(&e.as_str()))
                .map(|(_, i)| i.content_len)
                .sum();
            assert_eq!(postings_bytes(&[files]), on_disk, "{layout:?}");
        }
    }
}
