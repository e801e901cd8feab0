//! In-memory inversion of documents into one segment, and its flush to
//! immutable files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::bloom::{self, FilterShape, Probe};
use crate::codec;
use crate::column::ColumnsWriter;
use crate::error::{Error, Result};
use crate::index::manifest::{FieldStats, SegmentMeta};
use crate::index::segment::ext;
use crate::indexing::term_table::TermTable;
use crate::layout::norms;
use crate::layout::writer::TermPostings;
use crate::layout::{Format, PostingsWriter};
use crate::schema::value::{convert, values_at, Indexed};
use crate::schema::{Analysis, DocId, Document, Field};
use crate::storage::FileWriter;
use crate::store::{IdsWriter, StoreOptions, StoreWriter};

/// One term's postings while a segment is being built, VByte-coded. The
/// document being inverted is pending: its positions and offsets are
/// written as its tokens come, in order, and its (doc delta, frequency)
/// entry once the term shows up in a later document or the segment ends.
#[derive(Default)]
struct TermBuf {
    /// Documents, the pending one included.
    df: u32,
    /// The last document whose entry is written.
    last_doc: DocId,
    /// The pending document and its occurrences so far (0: none pending).
    doc: DocId,
    freq: u32,
    /// The pending document's last position and token end.
    prev_pos: u32,
    prev_end: u32,
    /// Per doc: doc delta, frequency.
    docs: Vec<u8>,
    /// Per occurrence: position delta within the doc.
    positions: Vec<u8>,
    /// Per occurrence: start - previous end, length.
    offsets: Vec<u8>,
    /// Per doc, when the term has phrase filters: its `after` filter, and
    /// its `before` filter.
    after: Vec<u8>,
    before: Vec<u8>,
    /// Whether the term's filters are being built: from its first document
    /// when it is a filtered term, until it is in more documents than the
    /// segment's expected ceiling ([`SegmentWriter::expect_docs`]).
    has_filters: bool,
}

impl TermBuf {
    /// Writes the pending document's entry.
    fn close_doc(&mut self) {
        if self.freq > 0 {
            let delta = if self.df == 1 {
                self.doc
            } else {
                self.doc - self.last_doc
            };
            codec::write_u32(&mut self.docs, delta);
            codec::write_u32(&mut self.docs, self.freq);
            self.last_doc = self.doc;
            self.freq = 0;
        }
    }

    fn bytes(&self) -> usize {
        self.docs.capacity()
            + self.positions.capacity()
            + self.offsets.capacity()
            + self.after.capacity()
            + self.before.capacity()
            + 64
    }
}

/// Builds one segment in memory.
pub struct SegmentWriter {
    analysis: Arc<Analysis>,
    dir: PathBuf,
    name: String,
    terms: TermTable,
    bufs: Vec<TermBuf>,
    /// Per field, one norm byte per document.
    norms: Vec<Vec<u8>>,
    stats: Vec<FieldStats>,
    store: StoreWriter,
    ids: IdsWriter,
    max_doc: u32,
    key: Vec<u8>,
    postings_bytes: usize,
    format: Format,
    bloom: Option<FilterShape>,
    /// Per term id: whether it is inserted into others' filters, and may
    /// have its own (see [`bloom::filtered_term`]).
    filtered: Vec<bool>,
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
            filtered: Vec::new(),
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
            store,
            ids: IdsWriter::new(),
            max_doc: 0,
            key: Vec::new(),
            postings_bytes: 0,
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
        self.postings_bytes + self.terms.memory_bytes() + self.columns.memory_bytes()
    }

    /// Inverts and stores one document (which must fit the schema: see
    /// [`crate::schema::Schema::check`]).
    pub fn add(&mut self, doc: &Document) -> Result<()> {
        if self.max_doc == u32::MAX - 1 {
            return Err(Error::InvalidArgument("too many documents in one segment".into()));
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

    /// Inverts `field` of document `doc_id` in one pass over its tokens:
    /// each occurrence goes straight into its term's buffer (tokens come in
    /// position order, so nothing is sorted), and the phrase filters of
    /// two adjacent tokens are filled when the second arrives.
    fn invert_field(&mut self, doc_id: DocId, field: Field, doc: &Document) -> Result<()> {
        if !self.analysis.schema().entries()[field.index()].is_text() {
            return Ok(());
        }
        let SegmentWriter {
            analysis,
            format,
            terms,
            bufs,
            key,
            filtered,
            filter_ceiling,
            probe_bits,
            postings_bytes,
            bloom,
            ..
        } = self;
        let filter_ceiling = *filter_ceiling;
        let shape = *bloom;
        let k = shape.map_or(0, |s| s.hashes as usize);
        let mut len = 0u64;
        // The previous token: its term and position.
        let mut last: Option<(u32, u32)> = None;
        let mut overlap = false;
        analysis.analyze_values(field, doc, |tok| {
            key.clear();
            key.push(field.id());
            key.extend_from_slice(tok.term.as_bytes());
            let term = terms.intern(key);
            if term as usize == bufs.len() {
                let with_filters = format.filtered_term(key);
                bufs.push(TermBuf {
                    has_filters: with_filters && shape.is_some(),
                    ..TermBuf::default()
                });
                filtered.push(with_filters);
                match (shape, with_filters) {
                    (Some(shape), true) => {
                        probe_bits.extend_from_slice(Probe::new(shape, key).positions());
                    }
                    _ => probe_bits.resize(probe_bits.len() + k, 0),
                }
            }
            len += 1;
            let is_filtered = filtered[term as usize];
            let buf = &mut bufs[term as usize];
            let before = buf.bytes();
            if buf.freq == 0 || buf.doc != doc_id {
                buf.close_doc();
                buf.doc = doc_id;
                buf.df += 1;
                buf.prev_pos = 0;
                buf.prev_end = 0;
                if buf.has_filters && buf.df > filter_ceiling {
                    buf.has_filters = false;
                    buf.after = Vec::new();
                    buf.before = Vec::new();
                }
                if let (Some(shape), true) = (shape, buf.has_filters) {
                    let n = shape.bytes as usize;
                    buf.after.resize(buf.after.len() + n, 0);
                    buf.before.resize(buf.before.len() + n, 0);
                }
            }
            if tok.start < buf.prev_end || tok.end < tok.start {
                overlap = true;
            }
            codec::write_u32(&mut buf.positions, tok.position - buf.prev_pos);
            codec::write_u32(&mut buf.offsets, tok.start.wrapping_sub(buf.prev_end));
            codec::write_u32(&mut buf.offsets, tok.end.wrapping_sub(tok.start));
            buf.freq += 1;
            buf.prev_pos = tok.position;
            buf.prev_end = tok.end;
            *postings_bytes = *postings_bytes + buf.bytes() - before;
            if let (Some(shape), Some((prev, at))) = (shape, last) {
                if at + 1 == tok.position {
                    let n = shape.bytes as usize;
                    // `term` follows `prev`; `prev` precedes `term`: both
                    // filtered, each goes into the other's filter if it
                    // has them.
                    if is_filtered && filtered[prev as usize] {
                        let (t, p) = (term as usize * k, prev as usize * k);
                        let prev_buf = &mut bufs[prev as usize];
                        if prev_buf.has_filters {
                            let at = prev_buf.after.len() - n;
                            bloom::insert_bits(&mut prev_buf.after[at..], &probe_bits[t..t + k]);
                        }
                        let buf = &mut bufs[term as usize];
                        if buf.has_filters {
                            let at = buf.before.len() - n;
                            bloom::insert_bits(&mut buf.before[at..], &probe_bits[p..p + k]);
                        }
                    }
                }
            }
            last = Some((term, tok.position));
        });
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
    pub fn finish(mut self) -> Result<SegmentMeta> {
        for buf in &mut self.bufs {
            buf.close_doc();
        }
        let path = |e: &str| self.dir.join(format!("{}.{e}", self.name));
        let keys = sorted_terms(&self.terms, self.format.layout);

        let mut postings = PostingsWriter::create(&self.dir, &self.name, self.format)?;
        let mut tp = TermPostings::default();
        let ceiling = self.format.bloom.map_or(u64::MAX, |b| {
            b.doc_ceiling(self.max_doc as u64).saturating_mul(self.filter_slack)
        });
        for (key, id) in &keys {
            let buf = &self.bufs[*id as usize];
            decode_buf(buf, &mut tp).ok_or_else(|| Error::Internal("internal: damaged in-memory postings".into()))?;
            if buf.df as u64 > ceiling {
                tp.after.clear();
                tp.before.clear();
            }
            postings.add(key, &tp, &self.norms[key[0] as usize])?;
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

/// Decodes an in-memory term buffer into plain arrays.
fn decode_buf(buf: &TermBuf, tp: &mut TermPostings) -> Option<()> {
    tp.clear();
    tp.after.extend_from_slice(&buf.after);
    tp.before.extend_from_slice(&buf.before);
    let (mut p, mut pp, mut op) = (0, 0, 0);
    let mut doc = 0u32;
    for i in 0..buf.df {
        let delta = codec::read_u32(&buf.docs, &mut p)?;
        doc = if i == 0 { delta } else { doc + delta };
        let freq = codec::read_u32(&buf.docs, &mut p)?;
        tp.docs.push(doc);
        tp.freqs.push(freq);
        let (mut pos, mut end) = (0u32, 0u32);
        for _ in 0..freq {
            pos += codec::read_u32(&buf.positions, &mut pp)?;
            let start = end + codec::read_u32(&buf.offsets, &mut op)?;
            end = start + codec::read_u32(&buf.offsets, &mut op)?;
            tp.positions.push(pos);
            tp.starts.push(start);
            tp.ends.push(end);
        }
    }
    Some(())
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
