//! In-memory inversion of documents into one segment, and its flush to
//! immutable files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::bloom::{self, FilterShape, Probe};
use crate::column::ColumnsWriter;
use crate::error::{Error, Result};
use crate::index::manifest::{FieldStats, SegmentMeta};
use crate::index::segment::ext;
use crate::indexing::byte_slices::{ByteSlices, SliceCursor};
use crate::indexing::term_table::TermTable;
use crate::layout::norms;
use crate::layout::{Format, PostingsWriter};
use crate::schema::value::{convert, values_at, Indexed};
use crate::schema::{Analysis, DocId, Document, Field};
use crate::storage::FileWriter;
use crate::store::{IdsWriter, StoreOptions, StoreWriter};

/// One term's state while a segment is being built. Its postings are one
/// VByte stream in the writer's [`ByteSlices`], per document: the doc
/// delta, then per occurrence its position delta + 2, its start minus the
/// previous occurrence's end, and its length; then [`END_DOC`], or
/// [`END_DOC_FILTERS`] followed by the document's `after` and `before`
/// phrase filters (the end is written once the field is inverted, its
/// filters complete). Small (32 bytes) so that a token touches one cache
/// line of it.
#[derive(Clone, Copy)]
struct TermBuf {
    /// Documents, the pending one included.
    df: u32,
    /// The last document the term is in.
    doc: DocId,
    /// The pending document's last position and token end.
    prev_pos: u32,
    prev_end: u32,
    /// Where the stream is written.
    cursor: SliceCursor,
    /// Whether it is inserted into others' filters (see
    /// [`bloom::filtered_term`]), and whether it has phrase filters of its
    /// own: from its first document when it is a filtered term, until it
    /// is in more documents than the segment's expected ceiling
    /// ([`SegmentWriter::expect_docs`]). One of [`UNFILTERED`],
    /// [`NO_FILTERS`] (filtered, without own filters), or, with its own
    /// filters, the index of the current document's filters in
    /// [`SegmentWriter::pending`].
    filters: u32,
}

// Two term states per cache line, as the inversion's speed assumes.
const _: () = assert!(std::mem::size_of::<TermBuf>() == 32);

/// A token of the field being inverted, gathered before it is inverted.
#[derive(Clone, Copy)]
struct PendingToken {
    /// Its term key in [`SegmentWriter::token_keys`].
    key: u32,
    key_end: u32,
    position: u32,
    start: u32,
    end: u32,
    /// The key's hash, then its term id.
    hash: u64,
    term: u32,
}

/// How many tokens ahead a token's hash slot is fetched into the cache.
const SLOT_AHEAD: usize = 16;
/// How many tokens ahead a token is interned and its term state fetched.
const TERM_AHEAD: usize = 8;
/// How many tokens ahead the byte its stream is written at next is fetched.
const STREAM_AHEAD: usize = 4;

/// Ends a document's entry in a term's stream.
const END_DOC: u32 = 0;
/// Ends a document's entry, its phrase filters following.
const END_DOC_FILTERS: u32 = 1;
/// Added to a position delta in a stream (values below are ends).
const POSITION_BASE: u32 = 2;

/// How many terms ahead the segment's end fetches a term's state and the
/// start of its stream.
const FINISH_AHEAD: usize = 4;

use crate::common::prefetch;

/// [`TermBuf::filters`] of a term that is not filtered.
const UNFILTERED: u32 = u32::MAX;
/// [`TermBuf::filters`] of a filtered term without filters of its own.
const NO_FILTERS: u32 = u32::MAX - 1;

impl TermBuf {
    fn filtered(&self) -> bool {
        self.filters != UNFILTERED
    }

    /// The index of its filters, if it has them.
    fn own_filters(&self) -> Option<usize> {
        (self.filters < NO_FILTERS).then_some(self.filters as usize)
    }
}

/// Builds one segment in memory.
pub struct SegmentWriter {
    analysis: Arc<Analysis>,
    dir: PathBuf,
    name: String,
    terms: TermTable,
    /// By term id: its state.
    bufs: Vec<TermBuf>,
    /// By term id: where its stream starts in `slices`.
    starts: Vec<u32>,
    /// Every term's postings stream.
    slices: ByteSlices,
    /// The terms whose current document started in the field being
    /// inverted, and the phrase filters of that document for those that
    /// have them (`after`, then `before`).
    touched: Vec<u32>,
    pending: Vec<u8>,
    /// The tokens of the field being inverted, and their term keys.
    tokens: Vec<PendingToken>,
    token_keys: Vec<u8>,
    /// Per field, one norm byte per document.
    norms: Vec<Vec<u8>>,
    stats: Vec<FieldStats>,
    store: StoreWriter,
    ids: IdsWriter,
    max_doc: u32,
    format: Format,
    bloom: Option<FilterShape>,
    /// Documents a term may be in and keep building its filters, from the
    /// segment's expected size (no limit until told).
    filter_ceiling: u32,
    /// The factor on the ceiling ([`SegmentWriter::to_be_merged`]).
    filter_slack: u64,
    /// Per term id, `hashes` bit positions of its filter probe (zeros for a
    /// term without filters): derived once per term, inserted as they are.
    probe_bits: Vec<u16>,
    /// The columns of the schema's keyword, number, date and boolean fields.
    columns: ColumnsWriter,
    /// By field id: its column in `columns`.
    column_of: Vec<Option<usize>>,
    /// The fields with norms (indexed text), in id order.
    normed: Vec<Field>,
}

impl SegmentWriter {
    /// Starts segment `name` in `dir` (the store file is written as documents
    /// come). The document store uses `dictionary` when given (shared by the
    /// segments of one build), else trains its own.
    pub fn new(
        dir: &Path,
        name: &str,
        analysis: Arc<Analysis>,
        dictionary: Option<&[u8]>,
        format: Format,
    ) -> Result<Self> {
        let (data, index) = (
            dir.join(format!("{name}.{}", ext::STORE)),
            dir.join(format!("{name}.{}", ext::STORE_INDEX)),
        );
        let store = match dictionary {
            Some(d) => StoreWriter::create_with_dictionary(&data, &index, StoreOptions::default(), Some(d))?,
            None => StoreWriter::create(&data, &index, StoreOptions::default())?,
        };
        Self::with_store(dir, name, analysis, store, format)
    }

    /// Starts segment `name` whose document store trains no dictionary
    /// (short-lived segments, where training would cost more than it saves).
    pub fn untrained(dir: &Path, name: &str, analysis: Arc<Analysis>, format: Format) -> Result<Self> {
        let (data, index) = (
            dir.join(format!("{name}.{}", ext::STORE)),
            dir.join(format!("{name}.{}", ext::STORE_INDEX)),
        );
        let options = StoreOptions {
            dictionary: false,
            ..StoreOptions::default()
        };
        let store = StoreWriter::create(&data, &index, options)?;
        Self::with_store(dir, name, analysis, store, format)
    }

    fn with_store(dir: &Path, name: &str, analysis: Arc<Analysis>, store: StoreWriter, format: Format) -> Result<Self> {
        let schema = analysis.schema();
        let mut columns = ColumnsWriter::new();
        let column_of = schema
            .entries()
            .iter()
            .enumerate()
            .map(|(id, e)| {
                e.ty.column_kind()
                    .map(|kind| columns.add_column(id as u8, kind, e.ty.indexed(), e.ty.doc_values()))
            })
            .collect();
        let normed = schema.text_field_ids().collect();
        Ok(SegmentWriter {
            columns,
            column_of,
            normed,
            bloom: format.bloom_shape()?,
            format,
            filter_ceiling: u32::MAX,
            filter_slack: 1,
            probe_bits: Vec::new(),
            norms: vec![Vec::new(); analysis.schema().len()],
            stats: vec![FieldStats::default(); analysis.schema().len()],
            analysis,
            dir: dir.to_path_buf(),
            name: name.to_string(),
            terms: TermTable::new(),
            bufs: Vec::new(),
            starts: Vec::new(),
            slices: ByteSlices::new(),
            touched: Vec::new(),
            pending: Vec::new(),
            tokens: Vec::new(),
            token_keys: Vec::new(),
            store,
            ids: IdsWriter::new(),
            max_doc: 0,
        })
    }

    /// Documents added so far.
    pub fn num_docs(&self) -> u32 {
        self.max_doc
    }

    /// Tells the writer the segment will hold about `docs` documents, so that
    /// a term stops building phrase filters once it is in clearly more than
    /// [`crate::bloom::BloomParams::doc_ceiling`] of them (their memory is
    /// freed then, not when the segment is written). An estimate too low
    /// costs some terms their filters (never an answer); too high, some
    /// memory until [`SegmentWriter::finish`] drops them. Exact when the
    /// documents are known beforehand (a build's chunk).
    pub fn expect_docs(&mut self, docs: u64) {
        if let Some(b) = self.format.bloom {
            let ceiling = b
                .doc_ceiling(docs.max(self.max_doc as u64))
                .saturating_mul(self.filter_slack);
            self.filter_ceiling = ceiling.min(u32::MAX as u64) as u32;
        }
    }

    /// Marks the segment as one that a merge will soon fold into a larger
    /// one (a build's in-memory segments): its terms keep their filters up
    /// to `slack` times the ceiling. A merge keeps a term's filters only
    /// where each source has them, so a term near the merged ceiling but
    /// above it in one source (its documents cluster there) would lose
    /// them for that source's documents; the slack spares most of those.
    /// Call before [`SegmentWriter::expect_docs`].
    pub fn to_be_merged(&mut self, slack: u64) {
        self.filter_slack = slack.max(1);
    }

    /// Approximate memory held by the in-memory postings and columns.
    pub fn memory_bytes(&self) -> usize {
        self.slices.memory_bytes()
            + self.bufs.capacity() * std::mem::size_of::<TermBuf>()
            + self.starts.capacity() * 4
            + self.touched.capacity() * 4
            + self.pending.capacity()
            + self.probe_bits.capacity() * 2
            + self.terms.memory_bytes()
            + self.columns.memory_bytes()
    }

    /// Inverts and stores one document (which must fit the schema: see
    /// [`crate::schema::Schema::check`]).
    pub fn add(&mut self, doc: &Document) -> Result<()> {
        if self.max_doc == u32::MAX - 1 {
            return Err(Error::InvalidArgument("too many documents in one segment".into()));
        }
        if self.slices.nearly_full() {
            return Err(Error::InvalidArgument(
                "too many postings in one in-memory segment (3 GiB): use smaller segments".into(),
            ));
        }
        let analysis = Arc::clone(&self.analysis);
        let schema = analysis.schema();
        schema.check(doc)?;
        let doc_id = self.max_doc;
        for (i, entry) in schema.entries().iter().enumerate() {
            let field = Field::from_id(i as u8);
            match self.column_of[i] {
                None => self.invert_field(doc_id, field, doc)?,
                Some(col) => {
                    let columns = &mut self.columns;
                    let mut err = None;
                    values_at(&doc.fields, entry.path(), &mut |v| match convert(entry, v) {
                        Ok(Indexed::Code(c)) => columns.push(col, doc_id, c),
                        Ok(Indexed::Keyword(k)) => columns.push_keyword(col, doc_id, &k),
                        Ok(_) => {}
                        Err(e) => {
                            err.get_or_insert(e);
                        }
                    });
                    if let Some(e) = err {
                        return Err(Error::InvalidArgument(format!("document {:?}: {e}", doc.id)));
                    }
                }
            }
        }
        self.store.add(doc)?;
        self.ids.push(&doc.id);
        self.max_doc += 1;
        Ok(())
    }

    /// Inverts `field` of document `doc_id`: its tokens are gathered and
    /// hashed first, then each occurrence goes into its term's stream in
    /// position order (nothing is sorted), and the phrase filters of two
    /// adjacent tokens are filled when the second comes. A token's hash
    /// slot, term state and stream are fetched into the cache some tokens
    /// ahead ([`SLOT_AHEAD`], [`TERM_AHEAD`], [`STREAM_AHEAD`]): nearly every
    /// token would otherwise wait on memory three times.
    fn invert_field(&mut self, doc_id: DocId, field: Field, doc: &Document) -> Result<()> {
        if !self.analysis.schema().entries()[field.index()].is_text() {
            return Ok(());
        }
        let SegmentWriter {
            analysis,
            format,
            terms,
            bufs,
            starts,
            slices,
            touched,
            pending,
            tokens,
            token_keys,
            filter_ceiling,
            probe_bits,
            bloom,
            ..
        } = self;
        tokens.clear();
        token_keys.clear();
        analysis.analyze_values(field, doc, |tok| {
            let key = token_keys.len() as u32;
            token_keys.push(field.id());
            token_keys.extend_from_slice(tok.term.as_bytes());
            tokens.push(PendingToken {
                key,
                key_end: token_keys.len() as u32,
                position: tok.position,
                start: tok.start,
                end: tok.end,
                term: 0,
                hash: 0,
            });
        });
        // A position whose delta a stream could not tell from an end marker
        // is refused before anything of the document is written.
        if tokens.last().is_some_and(|t| t.position > u32::MAX - POSITION_BASE) {
            return Err(Error::InvalidArgument(format!(
                "document {:?}: field {} has token positions beyond {}",
                doc.id,
                field.id(),
                u32::MAX - POSITION_BASE
            )));
        }
        for t in tokens.iter_mut() {
            t.hash = TermTable::hash(&token_keys[t.key as usize..t.key_end as usize]);
        }
        let filter_ceiling = *filter_ceiling;
        let shape = *bloom;
        let k = shape.map_or(0, |s| s.hashes as usize);
        let n = shape.map_or(0, |s| s.bytes as usize);
        // The previous token: its term and position.
        let mut last: Option<(u32, u32)> = None;
        let mut overlap = false;
        let len = tokens.len();
        for step in 0..len + SLOT_AHEAD {
            if step < len {
                terms.prefetch(tokens[step].hash);
            }
            if let Some(i) = (step + TERM_AHEAD).checked_sub(SLOT_AHEAD).filter(|&i| i < len) {
                let t = &mut tokens[i];
                let key = &token_keys[t.key as usize..t.key_end as usize];
                let term = terms.intern_hashed(key, t.hash);
                t.term = term;
                if term as usize == bufs.len() {
                    let filtered = format.filtered_term(key);
                    let (start, cursor) = slices.start();
                    starts.push(start);
                    let with_filters = filtered && shape.is_some();
                    bufs.push(TermBuf {
                        df: 0,
                        doc: 0,
                        prev_pos: 0,
                        prev_end: 0,
                        cursor,
                        filters: if with_filters {
                            0
                        } else if filtered {
                            NO_FILTERS
                        } else {
                            UNFILTERED
                        },
                    });
                    match (shape, filtered) {
                        (Some(shape), true) => {
                            probe_bits.extend_from_slice(Probe::new(shape, key).positions());
                        }
                        _ => probe_bits.resize(probe_bits.len() + k, 0),
                    }
                } else {
                    prefetch(&bufs[term as usize]);
                    // Its probe bits, read when it stands next to a
                    // filtered term.
                    if k > 0 {
                        prefetch(probe_bits.as_ptr().wrapping_add(term as usize * k));
                    }
                }
            }
            if let Some(i) = (step + STREAM_AHEAD).checked_sub(SLOT_AHEAD).filter(|&i| i < len) {
                slices.prefetch(&bufs[tokens[i].term as usize].cursor);
            }
            let Some(i) = step.checked_sub(SLOT_AHEAD) else {
                continue;
            };
            let tok = tokens[i];
            let term = tok.term;
            let buf = &mut bufs[term as usize];
            if buf.df == 0 || buf.doc != doc_id {
                touched.push(term);
                let delta = if buf.df == 0 { doc_id } else { doc_id - buf.doc };
                slices.push_u32(&mut buf.cursor, delta);
                buf.doc = doc_id;
                buf.df += 1;
                buf.prev_pos = 0;
                buf.prev_end = 0;
                if buf.own_filters().is_some() {
                    if buf.df > filter_ceiling {
                        buf.filters = NO_FILTERS;
                    } else {
                        buf.filters = (pending.len() / (2 * n)) as u32;
                        pending.resize(pending.len() + 2 * n, 0);
                    }
                }
            }
            if tok.start < buf.prev_end || tok.end < tok.start {
                overlap = true;
            }
            slices.push_u32(
                &mut buf.cursor,
                (tok.position - buf.prev_pos).wrapping_add(POSITION_BASE),
            );
            slices.push_u32(&mut buf.cursor, tok.start.wrapping_sub(buf.prev_end));
            slices.push_u32(&mut buf.cursor, tok.end.wrapping_sub(tok.start));
            buf.prev_pos = tok.position;
            buf.prev_end = tok.end;
            let is_filtered = buf.filtered();
            if let (Some((prev, at)), true) = (last, is_filtered && shape.is_some()) {
                if at + 1 == tok.position && bufs[prev as usize].filtered() {
                    // `term` follows `prev`; `prev` precedes `term`: both
                    // filtered, each goes into the other's filter if it
                    // has them.
                    let (t, p) = (term as usize * k, prev as usize * k);
                    if let Some(own) = bufs[prev as usize].own_filters() {
                        let at = own * 2 * n;
                        bloom::insert_bits(&mut pending[at..at + n], &probe_bits[t..t + k]);
                    }
                    if let Some(own) = bufs[term as usize].own_filters() {
                        let at = own * 2 * n + n;
                        bloom::insert_bits(&mut pending[at..at + n], &probe_bits[p..p + k]);
                    }
                }
            }
            last = Some((term, tok.position));
        }
        // The field's documents end: each term's entry with its filters.
        for &term in touched.iter() {
            let buf = &mut bufs[term as usize];
            match buf.own_filters() {
                Some(own) => {
                    slices.push(&mut buf.cursor, END_DOC_FILTERS as u8);
                    slices.push_bytes(&mut buf.cursor, &pending[own * 2 * n..(own + 1) * 2 * n]);
                }
                None => slices.push(&mut buf.cursor, END_DOC as u8),
            }
        }
        touched.clear();
        pending.clear();
        let len = len as u64;
        if overlap {
            return Err(Error::Internal("analyzer produced overlapping tokens".into()));
        }
        self.norms[field.index()].push(norms::encode(len.min(u32::MAX as u64) as u32));
        if len > 0 {
            let s = &mut self.stats[field.index()];
            s.doc_count += 1;
            s.sum_total_term_freq += len;
        }
        Ok(())
    }

    /// Writes the segment's files and returns its manifest entry.
    pub fn finish(self) -> Result<SegmentMeta> {
        let path = |e: &str| self.dir.join(format!("{}.{e}", self.name));
        let keys = sorted_terms(&self.terms, self.format.layout);

        let mut postings = PostingsWriter::create(&self.dir, &self.name, self.format)?;
        let ceiling = self.format.bloom.map_or(u64::MAX, |b| {
            b.doc_ceiling(self.max_doc as u64).saturating_mul(self.filter_slack)
        });
        let fb = self.bloom.map_or(0, |s| s.bytes as usize);
        let (mut positions, mut offsets, mut doc_filters) = (Vec::new(), Vec::new(), vec![0u8; 2 * fb]);
        let damaged = |e: String| Error::Internal(format!("internal: damaged in-memory postings: {e}"));
        for (nth, (key, id)) in keys.iter().enumerate() {
            if let Some(&(_, ahead)) = keys.get(nth + FINISH_AHEAD) {
                prefetch(&self.bufs[ahead as usize]);
                self.slices.prefetch_start(self.starts[ahead as usize]);
            }
            let (id, norms) = (*id as usize, &self.norms[key[0] as usize]);
            let buf = &self.bufs[id];
            let keep_filters = buf.own_filters().is_some() && buf.df as u64 <= ceiling;
            let w = postings.term_writer();
            w.start(keep_filters);
            let mut r = self.slices.reader(self.starts[id]);
            let mut doc = 0u32;
            for i in 0..buf.df as usize {
                let delta = r.u32().ok_or_else(|| damaged("doc".into()))?;
                doc = if i == 0 { delta } else { doc + delta };
                positions.clear();
                offsets.clear();
                let (mut pos, mut end) = (0u32, 0u32);
                let with_filters = loop {
                    let p = r.u32().ok_or_else(|| damaged("position".into()))?;
                    match p {
                        END_DOC => break false,
                        END_DOC_FILTERS => break true,
                        _ => {}
                    }
                    pos += p - POSITION_BASE;
                    let start = end + r.u32().ok_or_else(|| damaged("offset".into()))?;
                    end = start + r.u32().ok_or_else(|| damaged("offset".into()))?;
                    positions.push(pos);
                    offsets.push((start, end));
                };
                if with_filters {
                    r.bytes(&mut doc_filters);
                } else if keep_filters {
                    return Err(damaged(format!("document {doc} of a filtered term has no filters")));
                }
                let f = match keep_filters {
                    true => (&doc_filters[..fb], &doc_filters[fb..]),
                    false => (&[][..], &[][..]),
                };
                let norm = norms
                    .get(doc as usize)
                    .copied()
                    .ok_or_else(|| damaged(format!("doc {doc} has no norm")))?;
                w.push(doc, &positions, &offsets, f, norm).map_err(damaged)?;
            }
            if !r.at(&buf.cursor) {
                return Err(damaged("the stream goes on past its documents".into()));
            }
            postings.end_term(key)?;
        }
        let num_terms = postings.len();
        let mut files = BTreeMap::new();
        for (e, info) in postings.finish()? {
            files.insert(e.to_string(), info);
        }
        let mut norms_file = FileWriter::create(path(ext::NORMS))?;
        for f in &self.normed {
            norms_file.write_all(&self.norms[f.index()])?;
        }
        files.insert(ext::NORMS.to_string(), norms_file.finish()?);
        // Text-only schemas whose every field is indexed keep the format of
        // segments written before typed fields: norms for every field, no
        // column file.
        let all_normed = self.normed.len() == self.stats.len();
        let norm_fields = (!all_normed).then(|| self.normed.iter().map(|f| f.id()).collect());
        if !self.columns.is_empty() {
            files.insert(
                ext::COLUMNS.to_string(),
                self.columns.finish(self.max_doc, &path(ext::COLUMNS))?,
            );
        }
        let store = self.store.finish()?;
        files.insert(ext::STORE.to_string(), store.data);
        files.insert(ext::STORE_INDEX.to_string(), store.index);
        files.insert(ext::IDS.to_string(), self.ids.finish(&path(ext::IDS))?);
        Ok(SegmentMeta {
            name: self.name,
            max_doc: self.max_doc,
            fields: self.stats,
            norm_fields,
            num_terms,
            files,
            deletes: None,
            chain: None,
        })
    }
}

/// The keys of `terms` in `layout`'s term order, with their ids. Sorted by
/// an integer prefix of the order first (the first 8 bytes of what is
/// compared first, big-endian), so most comparisons are one integer
/// comparison, not a byte-slice comparison.
fn sorted_terms(terms: &TermTable, layout: crate::layout::Layout) -> Vec<(&[u8], u32)> {
    let prefix = |key: &[u8]| -> u64 {
        let ordered = match layout {
            crate::layout::Layout::Grouped => key.get(1..).unwrap_or(&[]),
            crate::layout::Layout::Split => key,
        };
        let mut b = [0u8; 8];
        let n = ordered.len().min(8);
        b[..n].copy_from_slice(&ordered[..n]);
        u64::from_be_bytes(b)
    };
    let mut keys: Vec<(u64, &[u8], u32)> = terms.entries().map(|(k, id)| (prefix(k), k, id)).collect();
    keys.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| layout.term_order(a.1, b.1)));
    keys.into_iter().map(|(_, k, id)| (k, id)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Layout;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn the_prefix_sort_is_the_term_order(keys in proptest::collection::vec(
            (0u8..3, proptest::collection::vec(prop_oneof![Just(0u8), Just(b'a'), Just(b'b'), any::<u8>()], 0..12)),
            0..400,
        )) {
            let mut t = TermTable::new();
            for (field, text) in &keys {
                t.intern(&[&[*field][..], text].concat());
            }
            for layout in [Layout::Grouped, Layout::Split] {
                let got: Vec<Vec<u8>> = sorted_terms(&t, layout).into_iter().map(|(k, _)| k.to_vec()).collect();
                let mut want: Vec<Vec<u8>> = t.entries().map(|(k, _)| k.to_vec()).collect();
                want.sort_by(|a, b| layout.term_order(a, b));
                prop_assert_eq!(got, want);
            }
        }
    }
}
