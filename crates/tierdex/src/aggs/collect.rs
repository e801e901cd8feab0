//! Per-segment collection: the aggregation tree fed the matching live
//! documents of a segment part in blocks of up to 128 (each aggregation
//! walks a block at once; sub-aggregations get their bucket's documents one
//! by one), reading columns through [`ColumnReader`]s
//! (buffers reused, keyword values counted by ordinal and turned into
//! strings once per part), then turned into an [`AggsPartial`].
//!
//! The pass runs in the same loop as the hits and the count
//! ([`collect_segment`]): with aggregations every match must be visited,
//! so no block-max skipping is lost; the searches without aggregations keep
//! their own loops untouched. Filter queries (`filter`, `filters`) are
//! evaluated once per segment into bit sets before the loop.

use rustc_hash::{FxHashMap, FxHashSet};

use super::cardinality::{hash_bytes, hash_code, CardinalityPartial};
use super::request::{AggKind, Aggregations, Histogram, Key, Ranges, Terms, TopHits};
use super::result::{
    cmp_hits, special_value, AggsPartial, BucketPartial, Partial, StatsPartial, TopHit, TopHitsPartial,
};
use crate::aggs::calendar::bucket_key;
use crate::aggs::request::DateHistogram;
use crate::column::{code_double, code_long, ColumnKind, ColumnReader};
use crate::common::BitSet;
use crate::error::Result;
use crate::index::segment::DocPart;
use crate::index::SegmentReader;
use crate::query::collector::{Deadline, TopK};
use crate::query::scorer::Scorer;
use crate::query::sort::{SortBy, SortValue};
use crate::query::weight::{Build, Plan};
use crate::schema::{DocId, TERMINATED};

/// A document being collected.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DocCx {
    /// Its number in the segment (filter bit sets are by segment).
    pub seg_doc: u32,
    /// Its number in its part (columns are by part).
    pub part_doc: u32,
    /// Its global number.
    pub global: DocId,
    /// Its score (0 when no score is needed).
    pub score: f32,
}

/// Documents collected in one call, at most.
const BLOCK: usize = 128;

/// The value of a number, date or boolean code.
#[inline]
fn number(kind: ColumnKind, c: u64) -> f64 {
    match kind {
        ColumnKind::Long | ColumnKind::Date => code_long(c) as f64,
        ColumnKind::Double => code_double(c),
        ColumnKind::Boolean | ColumnKind::Keyword => c as f64,
    }
}

/// One bucket being collected.
struct Bucket<'a> {
    count: u64,
    subs: Collector<'a>,
}

impl<'a> Bucket<'a> {
    fn new(subs: &'a Aggregations, part: &'a DocPart) -> Self {
        Bucket {
            count: 0,
            subs: Collector::new(subs, part),
        }
    }

    #[inline]
    fn collect(&mut self, cx: &DocCx, filters: &[BitSet]) -> Result<()> {
        self.count += 1;
        if self.subs.nodes.is_empty() {
            return Ok(());
        }
        self.subs.collect(std::slice::from_ref(cx), filters)
    }

    fn finish(self) -> Result<BucketPartial> {
        Ok(BucketPartial {
            doc_count: self.count,
            aggs: self.subs.finish()?,
        })
    }
}

/// Widest range of codes whose terms buckets are kept in a vector indexed
/// by code (keyword ordinals of a small dictionary, booleans, small
/// integers) rather than in a hash map.
const DENSE_CODES: u64 = 4096;

/// The terms buckets of one part, by code.
enum TermBuckets<'a> {
    /// `Some` bucket at `code - base`, allocated at the first document.
    Dense {
        base: u64,
        len: usize,
        slots: Vec<Option<Bucket<'a>>>,
    },
    /// Any codes.
    Sparse(FxHashMap<u64, Bucket<'a>>),
}

impl<'a> TermBuckets<'a> {
    fn new(col: &Col<'_>) -> Self {
        match &col.reader {
            Some(r) if r.meta().max - r.meta().min < DENSE_CODES => TermBuckets::Dense {
                base: r.meta().min,
                len: (r.meta().max - r.meta().min + 1) as usize,
                slots: Vec::new(),
            },
            _ => TermBuckets::Sparse(FxHashMap::default()),
        }
    }

    /// The bucket of code `c`.
    #[inline]
    fn get(&mut self, c: u64, subs: &'a Aggregations, part: &'a DocPart) -> &mut Bucket<'a> {
        match self {
            TermBuckets::Dense { base, len, slots } => {
                if slots.is_empty() {
                    slots.resize_with(*len, || None);
                }
                slots[(c - *base) as usize].get_or_insert_with(|| Bucket::new(subs, part))
            }
            TermBuckets::Sparse(m) => m.entry(c).or_insert_with(|| Bucket::new(subs, part)),
        }
    }

    /// The buckets and their codes.
    fn into_vec(self) -> Vec<(u64, Bucket<'a>)> {
        match self {
            TermBuckets::Dense { base, slots, .. } => slots
                .into_iter()
                .enumerate()
                .filter_map(|(i, b)| b.map(|b| (base + i as u64, b)))
                .collect(),
            TermBuckets::Sparse(m) => m.into_iter().collect(),
        }
    }
}

/// The aggregations of one list, over one segment part.
pub(crate) struct Collector<'a> {
    nodes: Vec<Node<'a>>,
}

/// A column's reader in a part (none: no document of the part has one) and
/// a buffer for a document's codes.
struct Col<'a> {
    reader: Option<ColumnReader<'a>>,
    buf: Vec<u64>,
    /// A block's documents (in the part) and their single values.
    ids: Vec<u32>,
    block: Vec<Option<u64>>,
}

impl<'a> Col<'a> {
    fn new(part: &'a DocPart, field: crate::schema::Field) -> Self {
        Col {
            reader: part.columns().and_then(|c| c.reader(field.id())),
            buf: Vec::new(),
            ids: Vec::new(),
            block: Vec::new(),
        }
    }

    /// A single-valued column's values of a block of documents at once, into
    /// `block` (see [`ColumnReader::single_codes`]); false when they must be
    /// read one by one.
    #[inline]
    fn read_block(&mut self, docs: &[DocCx]) -> Result<bool> {
        let Some(r) = &mut self.reader else {
            return Ok(false);
        };
        self.ids.clear();
        self.ids.extend(docs.iter().map(|cx| cx.part_doc));
        r.single_codes(&self.ids, &mut self.block)
    }

    /// The document's codes, ascending.
    #[inline]
    fn read(&mut self, doc: u32) -> Result<&[u64]> {
        match &mut self.reader {
            Some(r) => r.codes(doc, &mut self.buf)?,
            None => self.buf.clear(),
        }
        Ok(&self.buf)
    }
}

enum Node<'a> {
    Terms {
        spec: &'a Terms,
        subs: &'a Aggregations,
        part: &'a DocPart,
        col: Col<'a>,
        buckets: TermBuckets<'a>,
        missing: Option<Box<Bucket<'a>>>,
    },
    Histogram {
        spec: &'a Histogram,
        subs: &'a Aggregations,
        part: &'a DocPart,
        col: Col<'a>,
        buckets: FxHashMap<i64, Bucket<'a>>,
    },
    DateHistogram {
        spec: &'a DateHistogram,
        subs: &'a Aggregations,
        part: &'a DocPart,
        col: Col<'a>,
        buckets: FxHashMap<i64, Bucket<'a>>,
    },
    Range {
        spec: &'a Ranges,
        col: Col<'a>,
        buckets: Vec<Bucket<'a>>,
    },
    Metric {
        kind: ColumnKind,
        col: Col<'a>,
        stats: StatsPartial,
    },
    Cardinality {
        kind: ColumnKind,
        col: Col<'a>,
        ords: FxHashSet<u64>,
        out: CardinalityPartial,
    },
    Filter {
        slot: usize,
        bucket: Box<Bucket<'a>>,
    },
    Filters {
        slots: Vec<usize>,
        buckets: Vec<Bucket<'a>>,
        other: Option<Box<Bucket<'a>>>,
    },
    TopHits {
        spec: &'a TopHits,
        cols: Vec<Option<ColumnReader<'a>>>,
        key: Vec<SortValue>,
        term: Vec<u8>,
        pruned: bool,
        out: TopHitsPartial,
    },
}

impl<'a> Collector<'a> {
    /// Collectors for `aggs` over `part`.
    pub(crate) fn new(aggs: &'a Aggregations, part: &'a DocPart) -> Self {
        let nodes = aggs
            .aggs
            .iter()
            .map(|(_, a)| {
                let subs = &a.subs;
                match &a.kind {
                    AggKind::Terms(t) => {
                        let col = Col::new(part, t.field.field);
                        Node::Terms {
                            spec: t,
                            subs,
                            part,
                            buckets: TermBuckets::new(&col),
                            col,
                            missing: t.missing.as_ref().map(|_| Box::new(Bucket::new(subs, part))),
                        }
                    }
                    AggKind::Histogram(h) => Node::Histogram {
                        spec: h,
                        subs,
                        part,
                        col: Col::new(part, h.field.field),
                        buckets: FxHashMap::default(),
                    },
                    AggKind::DateHistogram(d) => Node::DateHistogram {
                        spec: d,
                        subs,
                        part,
                        col: Col::new(part, d.field.field),
                        buckets: FxHashMap::default(),
                    },
                    AggKind::Range(r) => Node::Range {
                        spec: r,
                        col: Col::new(part, r.field.field),
                        buckets: r.ranges.iter().map(|_| Bucket::new(subs, part)).collect(),
                    },
                    AggKind::Metric(m) => Node::Metric {
                        kind: m.field.kind,
                        col: Col::new(part, m.field.field),
                        stats: StatsPartial::default(),
                    },
                    AggKind::Cardinality(c) => Node::Cardinality {
                        kind: c.field.kind,
                        col: Col::new(part, c.field.field),
                        ords: FxHashSet::default(),
                        out: CardinalityPartial::new(c.precision_threshold),
                    },
                    AggKind::Filter(f) => Node::Filter {
                        slot: f.slot,
                        bucket: Box::new(Bucket::new(subs, part)),
                    },
                    AggKind::Filters(f) => Node::Filters {
                        slots: f.filters.iter().map(|(_, s)| *s).collect(),
                        buckets: f.filters.iter().map(|_| Bucket::new(subs, part)).collect(),
                        other: f.other.as_ref().map(|_| Box::new(Bucket::new(subs, part))),
                    },
                    AggKind::TopHits(t) => Node::TopHits {
                        spec: t,
                        cols: t
                            .sort
                            .iter()
                            .map(|f| match f.by {
                                SortBy::Field(field) => part.columns().and_then(|c| c.reader(field.id())),
                                _ => None,
                            })
                            .collect(),
                        key: Vec::with_capacity(t.sort.len()),
                        term: Vec::new(),
                        pruned: false,
                        out: TopHitsPartial {
                            total: 0,
                            keep: t.from + t.size,
                            sort: t.sort.clone(),
                            hits: Vec::new(),
                        },
                    },
                }
            })
            .collect();
        Collector { nodes }
    }

    /// Feeds matching live documents of the part, in order (`filters`:
    /// the segment's filter matches, by slot).
    pub(crate) fn collect(&mut self, docs: &[DocCx], filters: &[BitSet]) -> Result<()> {
        for node in &mut self.nodes {
            match node {
                Node::Terms {
                    subs,
                    part,
                    col,
                    buckets,
                    missing,
                    ..
                } => {
                    if col.read_block(docs)? {
                        for (cx, c) in docs.iter().zip(&col.block) {
                            match c {
                                Some(c) => buckets.get(*c, subs, part).collect(cx, filters)?,
                                None => {
                                    if let Some(m) = missing {
                                        m.collect(cx, filters)?;
                                    }
                                }
                            }
                        }
                        continue;
                    }
                    for cx in docs {
                        let codes = col.read(cx.part_doc)?;
                        if codes.is_empty() {
                            if let Some(m) = missing {
                                m.collect(cx, filters)?;
                            }
                        }
                        let mut last = None;
                        for &c in codes {
                            if last == Some(c) {
                                continue;
                            }
                            last = Some(c);
                            buckets.get(c, subs, part).collect(cx, filters)?;
                        }
                    }
                }
                Node::Histogram {
                    spec,
                    subs,
                    part,
                    col,
                    buckets,
                } => {
                    for cx in docs {
                        let kind = spec.field.kind;
                        let mut last = None;
                        for &c in col.read(cx.part_doc)? {
                            let k = ((number(kind, c) - spec.offset) / spec.interval).floor() as i64;
                            if last == Some(k) {
                                continue;
                            }
                            last = Some(k);
                            buckets
                                .entry(k)
                                .or_insert_with(|| Bucket::new(subs, part))
                                .collect(cx, filters)?;
                        }
                    }
                }
                Node::DateHistogram {
                    spec,
                    subs,
                    part,
                    col,
                    buckets,
                } => {
                    if col.read_block(docs)? {
                        for (cx, c) in docs.iter().zip(&col.block) {
                            if let Some(c) = c {
                                let k = bucket_key(spec.interval, code_long(*c), spec.zone_ms, spec.offset_ms);
                                buckets
                                    .entry(k)
                                    .or_insert_with(|| Bucket::new(subs, part))
                                    .collect(cx, filters)?;
                            }
                        }
                        continue;
                    }
                    for cx in docs {
                        let mut last = None;
                        for &c in col.read(cx.part_doc)? {
                            let k = bucket_key(spec.interval, code_long(c), spec.zone_ms, spec.offset_ms);
                            if last == Some(k) {
                                continue;
                            }
                            last = Some(k);
                            buckets
                                .entry(k)
                                .or_insert_with(|| Bucket::new(subs, part))
                                .collect(cx, filters)?;
                        }
                    }
                }
                Node::Range { spec, col, buckets } => {
                    for cx in docs {
                        let kind = spec.field.kind;
                        let codes = col.read(cx.part_doc)?;
                        if codes.is_empty() {
                            continue;
                        }
                        for (r, b) in spec.ranges.iter().zip(buckets.iter_mut()) {
                            let hit = codes.iter().any(|&c| {
                                let v = number(kind, c);
                                r.from.is_none_or(|f| v >= f) && r.to.is_none_or(|t| v < t)
                            });
                            if hit {
                                b.collect(cx, filters)?;
                            }
                        }
                    }
                }
                Node::Metric { kind, col, stats } => {
                    if col.read_block(docs)? {
                        let kind = *kind;
                        for c in col.block.iter().flatten() {
                            stats.add(number(kind, *c));
                        }
                        continue;
                    }
                    for cx in docs {
                        let kind = *kind;
                        for &c in col.read(cx.part_doc)? {
                            stats.add(number(kind, c));
                        }
                    }
                }
                Node::Cardinality { kind, col, ords, out } => {
                    for cx in docs {
                        let keyword = *kind == ColumnKind::Keyword;
                        for &c in col.read(cx.part_doc)? {
                            if keyword {
                                ords.insert(c);
                            } else {
                                out.insert(hash_code(c));
                            }
                        }
                    }
                }
                Node::Filter { slot, bucket } => {
                    for cx in docs {
                        if filters[*slot].contains(cx.seg_doc) {
                            bucket.collect(cx, filters)?;
                        }
                    }
                }
                Node::Filters { slots, buckets, other } => {
                    for cx in docs {
                        let mut any = false;
                        for (s, b) in slots.iter().zip(buckets.iter_mut()) {
                            if filters[*s].contains(cx.seg_doc) {
                                any = true;
                                b.collect(cx, filters)?;
                            }
                        }
                        if let (false, Some(o)) = (any, other.as_mut()) {
                            o.collect(cx, filters)?;
                        }
                    }
                }
                Node::TopHits {
                    spec,
                    cols,
                    key,
                    term,
                    pruned,
                    out,
                } => {
                    for cx in docs {
                        out.total += 1;
                        if out.keep == 0 {
                            continue;
                        }
                        // Overwritten in place: a keyword's string keeps its buffer.
                        key.resize(spec.sort.len(), SortValue::Missing);
                        for (i, f) in spec.sort.iter().enumerate() {
                            let v = match (f.by, cols[i].as_mut()) {
                                (SortBy::Field(_), Some(r)) => match r.extreme(cx.part_doc, !f.max)? {
                                    None => SortValue::Missing,
                                    Some(c) => match r.meta().kind {
                                        ColumnKind::Keyword => {
                                            r.term(c, term)?;
                                            let text = String::from_utf8_lossy(term);
                                            if let SortValue::Keyword(s) = &mut key[i] {
                                                s.clear();
                                                s.push_str(&text);
                                                continue;
                                            }
                                            SortValue::Keyword(text.into_owned())
                                        }
                                        ColumnKind::Double => SortValue::Double(code_double(c)),
                                        ColumnKind::Boolean => SortValue::Long(c as i64),
                                        ColumnKind::Long | ColumnKind::Date => SortValue::Long(code_long(c)),
                                    },
                                },
                                _ => special_value(f, cx.score, cx.global),
                            };
                            key[i] = v;
                        }
                        if *pruned && out.hits.len() >= out.keep {
                            let worst = &out.hits[out.keep - 1];
                            if cmp_hits(key, cx.score, cx.global, worst, &out.sort).is_ge() {
                                continue;
                            }
                        }
                        out.hits.push(TopHit {
                            doc: cx.global,
                            score: cx.score,
                            sort: key.clone(),
                            id: None,
                            source: None,
                        });
                        if out.hits.len() >= 2 * out.keep.max(8) {
                            out.prune();
                            *pruned = true;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// The partial result of what was collected.
    pub(crate) fn finish(self) -> Result<AggsPartial> {
        let mut out = Vec::with_capacity(self.nodes.len());
        for node in self.nodes {
            out.push(match node {
                Node::Terms {
                    spec,
                    col,
                    buckets,
                    missing,
                    ..
                } => {
                    let buckets = buckets.into_vec();
                    let mut list: Vec<(Key, BucketPartial)> = Vec::with_capacity(buckets.len() + 1);
                    let keyword = spec.field.kind == ColumnKind::Keyword;
                    let mut reader = col.reader;
                    let mut term = Vec::new();
                    for (c, b) in buckets {
                        let key = match (&mut reader, keyword) {
                            (Some(r), true) => {
                                r.term(c, &mut term)?;
                                Key::Str(String::from_utf8_lossy(&term).into_owned())
                            }
                            _ => Key::Code(c),
                        };
                        list.push((key, b.finish()?));
                    }
                    list.sort_by(|a, b| a.0.cmp(&b.0));
                    if let (Some(m), Some(key)) = (missing, &spec.missing) {
                        let m = m.finish()?;
                        if m.doc_count > 0 {
                            match list.binary_search_by(|(k, _)| k.cmp(key)) {
                                Ok(i) => {
                                    list[i].1.doc_count += m.doc_count;
                                    list[i].1.aggs.merge(m.aggs);
                                }
                                Err(i) => list.insert(i, (key.clone(), m)),
                            }
                        }
                    }
                    Partial::Terms(list)
                }
                Node::Histogram { buckets, .. } | Node::DateHistogram { buckets, .. } => {
                    let mut list = buckets
                        .into_iter()
                        .map(|(k, b)| Ok((k, b.finish()?)))
                        .collect::<Result<Vec<_>>>()?;
                    list.sort_by_key(|e| e.0);
                    Partial::Histogram(list)
                }
                Node::Range { buckets, .. } => {
                    Partial::Ranges(buckets.into_iter().map(Bucket::finish).collect::<Result<_>>()?)
                }
                Node::Metric { stats, .. } => Partial::Stats(stats),
                Node::Cardinality { col, ords, mut out, .. } => {
                    if let Some(mut r) = col.reader {
                        let mut term = Vec::new();
                        for o in ords {
                            r.term(o, &mut term)?;
                            out.insert(hash_bytes(&term));
                        }
                    }
                    Partial::Cardinality(out)
                }
                Node::Filter { bucket, .. } => Partial::Filter(bucket.finish()?),
                Node::Filters { buckets, other, .. } => {
                    let mut list = buckets.into_iter().map(Bucket::finish).collect::<Result<Vec<_>>>()?;
                    if let Some(o) = other {
                        list.push(o.finish()?);
                    }
                    Partial::Filters(list)
                }
                Node::TopHits { mut out, .. } => {
                    out.prune();
                    Partial::TopHits(out)
                }
            });
        }
        Ok(AggsPartial(out))
    }
}

/// The documents of `seg` a filter plan matches, as a bit set.
fn filter_bits(plan: &Plan, build: Build<'_>) -> Result<BitSet> {
    let mut bits = BitSet::new(build.seg.max_doc());
    if let Some(mut s) = plan.scorer(build)? {
        s.set_count_only();
        let mut doc = s.doc();
        while doc != TERMINATED {
            bits.insert(doc);
            doc = s.advance();
        }
        if let Some(e) = s.take_error() {
            return Err(e);
        }
    }
    Ok(bits)
}

/// What one segment's pass does besides aggregating.
pub(crate) struct SegmentPass<'j> {
    /// Global number of the segment's first document.
    pub base: DocId,
    /// The segment's deleted documents.
    pub deleted: Option<&'j BitSet>,
    /// The best hits by score (`None`: no hits wanted).
    pub top: Option<&'j mut TopK>,
    /// The running count of matches.
    pub count: &'j mut u64,
    /// Whether scores are computed (hits, or a `top_hits` by score).
    pub scores: bool,
    /// When to stop.
    pub deadline: &'j mut Deadline,
}

/// Runs `plan` over one segment, feeding every matching live document to
/// the hits, the count and the aggregations; pushes one partial per part
/// that had a match. Returns false when the deadline stopped it.
pub(crate) fn collect_segment(
    seg: &SegmentReader,
    build: Build<'_>,
    plan: &Plan,
    filters: &[Plan],
    aggs: &Aggregations,
    job: SegmentPass<'_>,
    out: &mut Vec<AggsPartial>,
) -> Result<bool> {
    let Some(mut s) = plan.scorer(build)? else {
        return Ok(true);
    };
    if !job.scores {
        s.set_count_only();
    }
    let bits = filters
        .iter()
        .map(|f| filter_bits(f, build))
        .collect::<Result<Vec<_>>>()?;
    let parts = seg.parts();
    let mut part = 0usize;
    let mut current: Option<Collector<'_>> = None;
    let mut top = job.top;
    let mut block: Vec<DocCx> = Vec::with_capacity(BLOCK);
    let mut doc = s.doc();
    while doc != TERMINATED {
        if job.deadline.tick() {
            return Ok(false);
        }
        if job.deleted.is_some_and(|d| d.contains(doc)) {
            doc = s.advance();
            continue;
        }
        *job.count += 1;
        let score = if job.scores { s.score() } else { 0.0 };
        if let Some(t) = top.as_deref_mut() {
            t.insert(job.base + doc, score);
        }
        if part + 1 < parts.len() && parts[part + 1].base <= doc {
            if let Some(mut c) = current.take() {
                c.collect(&block, &bits)?;
                block.clear();
                out.push(c.finish()?);
            }
            while part + 1 < parts.len() && parts[part + 1].base <= doc {
                part += 1;
            }
        }
        let p = &parts[part];
        let c = current.get_or_insert_with(|| Collector::new(aggs, p));
        block.push(DocCx {
            seg_doc: doc,
            part_doc: doc - p.base,
            global: job.base + doc,
            score,
        });
        if block.len() == BLOCK {
            c.collect(&block, &bits)?;
            block.clear();
        }
        doc = s.advance();
    }
    if let Some(e) = s.take_error() {
        return Err(e);
    }
    if let Some(mut c) = current.take() {
        c.collect(&block, &bits)?;
        out.push(c.finish()?);
    }
    Ok(true)
}
