//! Merging segments into one: term by term over the union of their
//! dictionaries, documents renumbered by concatenation in segment order,
//! stored documents copied without recompression when possible.

use std::collections::BTreeMap;
use std::path::Path;

use fst::{IntoStreamer, Streamer};

use crate::layout::Layout;

use crate::bloom::Direction;
use crate::column::{ColumnKind, ColumnsWriter};
use crate::error::{Error, Result};
use crate::index::manifest::{FieldStats, SegmentMeta};
use crate::index::segment::{ext, SegmentReader};
use crate::index::Deletes;
use crate::layout::writer::TermPostings;
use crate::layout::{Format, PostingsFiles, PostingsWriter};
use crate::schema::{DocId, Field, TERMINATED};
use crate::storage::{FileInfo, FileWriter, Storage, Tier, TierOptions};
use crate::store::{IdsWriter, StoreOptions, StoreWriter};

/// Merges `metas` (segments of the index in `dir`, in document order, of
/// `format`) into a new segment `name` of the same format; calls
/// `progress(terms_done)` now and then. The input segments' files are left
/// in place.
pub fn merge_segments(
    dir: &Path,
    metas: &[SegmentMeta],
    name: &str,
    format: Format,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<SegmentMeta> {
    let storage = Storage::new(TierOptions::on(Tier::Mmap))?;
    let readers = metas
        .iter()
        .map(|m| SegmentReader::open(dir, m, format, &storage))
        .collect::<Result<Vec<_>>>()?;
    let sources: Vec<_> = readers.iter().map(|r| (r, None)).collect();
    merge_live(dir, &sources, name, format, StoreOptions::default(), progress)
}

/// Merges open segments (in document order), leaving out the documents
/// their tombstones mark deleted, into a new segment `name` in `dir`. Live
/// documents keep their order; terms left without documents disappear; the
/// statistics are those of the live documents. The document store is
/// written with `store` (its dictionary, if any, taken from the largest
/// source that has one). Phrase filters are carried over; a source term
/// without them (which one index never holds) gets all-ones filters, that
/// reject nothing.
pub fn merge_live(
    dir: &Path,
    sources: &[(&SegmentReader, Option<&Deletes>)],
    name: &str,
    format: Format,
    store: StoreOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<SegmentMeta> {
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

    // Norms and statistics: concatenation and sums, over every field any
    // source has (norms for the fields any source has norms for).
    let n_fields = metas.iter().map(|m| m.fields.len()).max().unwrap_or(0);
    let mut normed: Vec<u8> = metas.iter().flat_map(|m| m.normed_fields()).collect();
    normed.sort_unstable();
    normed.dedup();
    let mut norms: Vec<Option<Vec<u8>>> = vec![None; n_fields.max(normed.last().map_or(0, |&f| f as usize + 1))];
    for &f in &normed {
        norms[f as usize] = Some(Vec::with_capacity(max_doc as usize));
    }
    let mut stats = vec![FieldStats::default(); n_fields];
    for ((r, del), map) in sources.iter().zip(&maps) {
        for &f in &normed {
            let n = norms[f as usize].as_mut().expect("normed");
            let own = r.norms(Field::from_id(f));
            for (i, &to) in map.iter().enumerate() {
                if to != TERMINATED {
                    n.push(own.get(i).copied().unwrap_or(0));
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

    let shape = format.bloom_shape()?;
    let mut postings = PostingsWriter::create(dir, name, format)?;
    let mut tp = TermPostings::default();
    let (mut pos, mut off) = (Vec::new(), Vec::new());
    let mut terms = TermsInOrder::new(&files, format.layout, n_fields);
    let mut done = 0u64;
    let mut key = Vec::new();
    let mut hits = Vec::new();
    while terms.next(&mut key, &mut hits) {
        let key = key.as_slice();
        hits.sort_by_key(|h| h.index);
        tp.clear();
        let filter_bytes = shape.filter(|_| format.filtered_term(key)).map(|s| s.bytes as usize);
        for h in hits.iter().copied() {
            let r = &readers[h.index];
            let info = files[h.index].resolve(files[h.index].terms().term_ref(h.value))?;
            let mut c = r.cursor(&info)?;
            let map = &maps[h.index];
            while c.doc() != TERMINATED {
                let to = map[c.doc() as usize];
                if to == TERMINATED {
                    c.advance();
                    continue;
                }
                tp.docs.push(to);
                tp.freqs.push(c.freq());
                c.positions(&mut pos);
                c.offsets(&mut off);
                tp.positions.extend_from_slice(&pos);
                tp.starts.extend(off.iter().map(|o| o.0));
                tp.ends.extend(off.iter().map(|o| o.1));
                if let Some(fb) = filter_bytes {
                    for (dir, out) in [(Direction::After, &mut tp.after), (Direction::Before, &mut tp.before)] {
                        if !c.copy_filter(dir, out) {
                            out.resize(out.len() + fb, 0xff);
                        }
                    }
                }
                c.advance();
            }
            if let Some(e) = c.take_error() {
                return Err(e);
            }
        }
        if tp.docs.is_empty() {
            continue;
        }
        let field = *key
            .first()
            .ok_or_else(|| Error::corrupt(path(ext::TERMS), "empty term key"))? as usize;
        let field_norms = norms.get(field).and_then(Option::as_ref).ok_or_else(|| {
            Error::corrupt(
                dir.join(metas[0].file_name(ext::TERMS)),
                "term key with an unknown field",
            )
        })?;
        postings.add(key, &tp, field_norms)?;
        done += 1;
        if done.is_multiple_of(65_536) {
            progress(done);
        }
    }
    progress(done);
    let num_terms = postings.len();
    let mut files = BTreeMap::new();
    for (e, info) in postings.finish()? {
        files.insert(e.to_string(), info);
    }
    let mut norms_file = FileWriter::create(path(ext::NORMS))?;
    for &f in &normed {
        norms_file.write_all(norms[f as usize].as_ref().expect("normed"))?;
    }
    files.insert(ext::NORMS.to_string(), norms_file.finish()?);
    let norm_fields =
        (normed.len() != n_fields || normed.iter().enumerate().any(|(i, &f)| f as usize != i)).then_some(normed);
    if let Some(info) = merge_columns(&readers, &maps, max_doc as u32, &path(ext::COLUMNS))? {
        files.insert(ext::COLUMNS.to_string(), info);
    }

    let stores: Vec<_> = readers.iter().flat_map(|r| r.stores()).collect();
    let mut store = StoreWriter::create_for_merge(&path(ext::STORE), &path(ext::STORE_INDEX), store, &stores)?;
    let mut ids = IdsWriter::new();
    let mut id = String::new();
    for (r, map) in readers.iter().zip(&maps) {
        for d in 0..r.max_doc() {
            if map[d as usize] == TERMINATED {
                continue;
            }
            let (source, local) = r.store_of(d)?;
            store.copy_from(source, local)?;
            r.external_id(d, &mut id)?;
            ids.push(&id);
        }
    }
    let store = store.finish()?;
    files.insert(ext::STORE.to_string(), store.data);
    files.insert(ext::STORE_INDEX.to_string(), store.index);
    files.insert(ext::IDS.to_string(), ids.finish(&path(ext::IDS))?);
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
    fn new(readers: &'a [&'a PostingsFiles], layout: Layout, n_fields: usize) -> Self {
        let n_fields = n_fields.min(Field::MAX) as u8;
        let mut streams = Vec::with_capacity(n_fields as usize + 1);
        // One stream per field id, and one for keys beyond the known fields
        // (none in a sound index; merged all the same).
        let bounds: Vec<(u8, Option<u8>)> = (0..n_fields)
            .map(|f| (f, Some(f + 1)))
            .chain(std::iter::once((n_fields, None)))
            .collect();
        for (lo, hi) in bounds {
            let mut op = fst::map::OpBuilder::new();
            for r in readers {
                let range = r.terms().fst().range().ge([lo]);
                op = match hi {
                    Some(hi) => op.add(range.lt([hi]).into_stream()),
                    None => op.add(range.into_stream()),
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
