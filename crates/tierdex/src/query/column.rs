//! Queries over columns: terms, ranges and existence on keyword, number,
//! date and boolean fields (and existence on text), `match_all`, and
//! constant scores (filters, `constant_score`).
//!
//! A column query finds its documents in each segment part from the
//! column's points: one run of (value, document) pairs per value range,
//! found by binary search, read as far as the run goes. Its documents
//! become a sorted list when few, a bit set when many, and a constant-score
//! scorer iterates them: in a conjunction it leaps with `seek` like any
//! other clause, so a filter takes part in block-max skipping instead of
//! being applied after the top-k. A column without points (`index: false`)
//! is scanned through its doc values.

use std::any::Any;
use std::ops::Bound;

use crate::column::{ColumnReader, PointRun};
use crate::common::BitSet;
use crate::error::{Error, Result};
use crate::index::{Index, SegmentReader};
use crate::query::collector::{self, Cutoff};
use crate::query::scorer::Scorer;
use crate::query::weight::{BoxedScorer, Build, Plan, QueryKey, SegmentJob, TermWeight, Weight};
use crate::schema::{DocId, Field, TERMINATED};

/// Which values of a column a query wants.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ColumnMatch {
    /// Codes in `lo..=hi` (numbers, dates and booleans by their codes).
    Codes {
        /// Smallest code.
        lo: u64,
        /// Largest code.
        hi: u64,
    },
    /// Any of these codes (sorted, distinct).
    CodeSet(Vec<u64>),
    /// Keywords between two bounds (byte order).
    Strings {
        /// Lower bound.
        lower: Bound<String>,
        /// Upper bound.
        upper: Bound<String>,
    },
    /// Any of these keywords (sorted, distinct).
    Terms(Vec<String>),
    /// Any value.
    Exists,
}

/// A column query: the documents whose `field` holds a value `what` asks
/// for, scored `boost`.
#[derive(Debug)]
pub struct ColumnWeight {
    field: Field,
    what: ColumnMatch,
    boost: f32,
    /// Matching (value, document) pairs in the whole index (an estimate of
    /// the documents; more for multi-valued fields).
    estimate: u64,
    key: QueryKey,
}

/// Documents of one segment: few as a sorted list, many as a bit set.
#[derive(Debug)]
pub enum DocSet {
    /// Sorted, distinct.
    List(Vec<DocId>),
    /// A bit set.
    Bits(BitSet),
}

impl DocSet {
    /// The documents as a bit set over `max_doc`.
    pub fn into_bits(self, max_doc: u32) -> BitSet {
        match self {
            DocSet::Bits(b) => b,
            DocSet::List(l) => {
                let mut b = BitSet::new(max_doc);
                for d in l {
                    b.insert(d);
                }
                b
            }
        }
    }
}

impl ColumnWeight {
    /// The query for `what` in `field` over `index`.
    pub fn new(index: &Index, field: Field, what: ColumnMatch, boost: f32) -> Result<ColumnWeight> {
        let key = QueryKey::Other(format!("column {} {what:?} {boost}", field.id()), Vec::new());
        let mut w = ColumnWeight {
            field,
            what,
            boost,
            estimate: 0,
            key,
        };
        for seg in index.segments() {
            for part in seg.parts() {
                if let Some(mut r) = part.columns().and_then(|c| c.reader(field.id())) {
                    w.estimate += match w.runs(&mut r)? {
                        Some(runs) => runs.iter().map(PointRun::len).sum::<u64>(),
                        None => part.max_doc as u64,
                    };
                }
            }
        }
        Ok(w)
    }

    /// The runs of points the query matches in one column, or `None`
    /// when the column has no points (its doc values are scanned).
    fn runs(&self, r: &mut ColumnReader<'_>) -> Result<Option<Vec<PointRun>>> {
        if !r.has_points() {
            return Ok(None);
        }
        let mut runs = Vec::new();
        match &self.what {
            ColumnMatch::Exists => runs.push(r.all_points()),
            ColumnMatch::Codes { lo, hi } => runs.push(r.point_run(*lo, *hi)?),
            ColumnMatch::CodeSet(codes) => {
                for &c in codes {
                    runs.push(r.point_run(c, c)?);
                }
            }
            ColumnMatch::Terms(values) => {
                for v in values {
                    if let Ok(ord) = r.ord_of(v.as_bytes())? {
                        runs.push(r.point_run(ord, ord)?);
                    }
                }
            }
            ColumnMatch::Strings { lower, upper } => {
                if let Some((lo, hi)) = ord_range(r, lower, upper)? {
                    runs.push(r.point_run(lo, hi)?);
                }
            }
        }
        runs.retain(|r| !r.is_empty());
        Ok(Some(runs))
    }

    /// Whether code `c` matches (doc-value scans): `ords` is the ordinal
    /// range of a keyword range, `set` the ordinals of keyword terms.
    fn wants(&self, c: u64, ords: &Option<(u64, u64)>, set: &[u64]) -> bool {
        match &self.what {
            ColumnMatch::Exists => true,
            ColumnMatch::Codes { lo, hi } => (*lo..=*hi).contains(&c),
            ColumnMatch::CodeSet(codes) => codes.binary_search(&c).is_ok(),
            ColumnMatch::Terms(_) => set.binary_search(&c).is_ok(),
            ColumnMatch::Strings { .. } => ords.is_some_and(|(lo, hi)| (lo..=hi).contains(&c)),
        }
    }

    /// The documents of `seg` the query matches: a bit set when `as_bits`
    /// or when they are not few.
    pub fn docs(&self, seg: &SegmentReader, cutoff: Option<&Cutoff>, as_bits: bool) -> Result<DocSet> {
        collector::check(cutoff)?;
        let max_doc = seg.max_doc();
        let mut list: Vec<DocId> = Vec::new();
        let mut bits: Option<BitSet> = as_bits.then(|| BitSet::new(max_doc));
        let mut codes = Vec::new();
        for part in seg.parts() {
            let Some(mut r) = part.columns().and_then(|c| c.reader(self.field.id())) else {
                continue;
            };
            match self.runs(&mut r)? {
                Some(runs) => {
                    let n: u64 = runs.iter().map(PointRun::len).sum();
                    // Not few: straight into a bit set (sorting a list of
                    // points, which come in value order, costs more than
                    // clearing and scanning the set's words).
                    if bits.is_none() && n * 512 > max_doc as u64 {
                        let mut b = BitSet::new(max_doc);
                        for &d in &list {
                            b.insert(d);
                        }
                        list.clear();
                        bits = Some(b);
                    }
                    for run in runs {
                        match bits.as_mut() {
                            Some(b) => r.point_docs(run, |d| b.insert(part.base + d))?,
                            None => r.point_docs(run, |d| list.push(part.base + d))?,
                        }
                    }
                }
                None => {
                    if !r.has_doc_values() {
                        continue;
                    }
                    let ords = match &self.what {
                        ColumnMatch::Strings { lower, upper } => ord_range(&mut r, lower, upper)?,
                        _ => None,
                    };
                    let mut set = Vec::new();
                    if let ColumnMatch::Terms(values) = &self.what {
                        for v in values {
                            if let Ok(o) = r.ord_of(v.as_bytes())? {
                                set.push(o);
                            }
                        }
                        set.sort_unstable();
                    }
                    for local in 0..part.max_doc {
                        r.codes(local, &mut codes)?;
                        if codes.iter().any(|&c| self.wants(c, &ords, &set)) {
                            match bits.as_mut() {
                                Some(b) => b.insert(part.base + local),
                                None => list.push(part.base + local),
                            }
                        }
                    }
                }
            }
        }
        Ok(match bits {
            Some(b) => DocSet::Bits(b),
            None => {
                if !list.is_sorted() {
                    list.sort_unstable();
                }
                list.dedup();
                DocSet::List(list)
            }
        })
    }

    /// Removes from `acc` (documents of `seg`) those the query does not
    /// match, confirming each one from the doc values, when that is cheaper
    /// than collecting the query's own documents: `acc` is much smaller than
    /// the query's points in the segment. Returns false (and leaves `acc`
    /// alone) when it is not, or a part lacks doc values.
    pub fn narrow(&self, seg: &SegmentReader, acc: &mut BitSet) -> Result<bool> {
        let mut points = 0u64;
        for part in seg.parts() {
            if let Some(mut r) = part.columns().and_then(|c| c.reader(self.field.id())) {
                points += match self.runs(&mut r)? {
                    Some(runs) => runs.iter().map(PointRun::len).sum::<u64>(),
                    None => part.max_doc as u64,
                };
            }
        }
        if acc.len() * 16 > points {
            return Ok(false);
        }
        let Some(mut check) = CheckScorer::new(self, seg)? else {
            return Ok(false);
        };
        for (i, w) in acc.words_mut().iter_mut().enumerate() {
            let mut bits = *w;
            while bits != 0 {
                let b = bits.trailing_zeros();
                bits &= bits - 1;
                if !check.test((i * 64) as DocId + b) {
                    *w &= !(1u64 << b);
                }
            }
        }
        match check.error.take() {
            Some(e) => Err(e),
            None => Ok(true),
        }
    }
}

/// The ordinals of the keywords between `lower` and `upper` in the
/// dictionary of the column `r` reads (`None`: none).
fn ord_range(r: &mut ColumnReader<'_>, lower: &Bound<String>, upper: &Bound<String>) -> Result<Option<(u64, u64)>> {
    let count = r.meta().dict.as_ref().map_or(0, |d| d.count);
    if count == 0 {
        return Ok(None);
    }
    let lo = match lower {
        Bound::Unbounded => 0,
        Bound::Included(s) => r.ord_of(s.as_bytes())?.unwrap_or_else(|p| p),
        Bound::Excluded(s) => match r.ord_of(s.as_bytes())? {
            Ok(o) => o + 1,
            Err(p) => p,
        },
    };
    let end = match upper {
        Bound::Unbounded => count,
        Bound::Included(s) => match r.ord_of(s.as_bytes())? {
            Ok(o) => o + 1,
            Err(p) => p,
        },
        Bound::Excluded(s) => r.ord_of(s.as_bytes())?.unwrap_or_else(|p| p),
    };
    Ok((lo < end).then(|| (lo, end - 1)))
}

impl Weight for ColumnWeight {
    fn key(&self) -> &QueryKey {
        &self.key
    }
    fn exact_code_range(&self, field: Field) -> Option<(u64, u64)> {
        match &self.what {
            ColumnMatch::Codes { lo, hi } if field == self.field => Some((*lo, *hi)),
            _ => None,
        }
    }
    fn code_bounds(&self, field: Field) -> Option<(u64, u64)> {
        if field != self.field {
            return None;
        }
        match &self.what {
            ColumnMatch::Codes { lo, hi } => Some((*lo, *hi)),
            ColumnMatch::CodeSet(codes) => Some((*codes.first()?, *codes.last()?)),
            _ => None,
        }
    }
    fn terms<'a>(&'a self, _positive: bool, _out: &mut Vec<&'a TermWeight>) {}
    fn scorer<'a>(&self, b: Build<'a>) -> Result<Option<BoxedScorer<'a>>> {
        // Much broader than the clause leading its conjunction: confirm the
        // lead's candidates one by one from the doc values.
        if b.lead_cost.is_some_and(|lead| self.estimate as f64 > 8.0 * lead) {
            if let Some(check) = CheckScorer::new(self, b.seg)? {
                return Ok(Some(Box::new(check)));
            }
        }
        let docs = self.docs(b.seg, b.cutoff.as_ref(), false)?;
        Ok(Some(Box::new(DocSetScorer::new(docs, self.boost))))
    }
    /// Without deleted documents, a single-valued column's matches are its
    /// points in the matched runs: counted from the runs' bounds, no
    /// document visited.
    fn known_count(&self, index: &Index) -> Result<Option<u64>> {
        let mut total = 0u64;
        for (si, seg) in index.segments().iter().enumerate() {
            if index.deletes(si).is_some_and(|d| !d.is_empty()) {
                return Ok(None);
            }
            for part in seg.parts() {
                let Some(mut r) = part.columns().and_then(|c| c.reader(self.field.id())) else {
                    continue;
                };
                if r.meta().multi {
                    return Ok(None);
                }
                match self.runs(&mut r)? {
                    Some(runs) => total += runs.iter().map(PointRun::len).sum::<u64>(),
                    None => return Ok(None),
                }
            }
        }
        Ok(Some(total))
    }
    fn collect(&self, b: Build<'_>, job: &mut SegmentJob<'_>) -> Result<bool> {
        let mut s = DocSetScorer::new(self.docs(b.seg, b.cutoff.as_ref(), false)?, self.boost);
        job.run(&mut s)
    }
    fn bitset_cost(&self) -> Option<f64> {
        Some(self.estimate as f64)
    }
    fn iteration_cost(&self) -> f64 {
        self.estimate as f64
    }
    fn matches(&self, seg: &SegmentReader, cutoff: Option<&Cutoff>) -> Result<BitSet> {
        Ok(self.docs(seg, cutoff, true)?.into_bits(seg.max_doc()))
    }
    fn narrow(&self, seg: &SegmentReader, acc: &mut BitSet) -> Result<bool> {
        ColumnWeight::narrow(self, seg, acc)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// Every document, scored `boost`.
#[derive(Debug)]
pub struct MatchAllWeight {
    boost: f32,
    docs: u64,
    key: QueryKey,
}

impl MatchAllWeight {
    /// Every document of `index`.
    pub fn new(index: &Index, boost: f32) -> MatchAllWeight {
        MatchAllWeight {
            boost,
            docs: index.num_docs(),
            key: QueryKey::Other(format!("match_all {boost}"), Vec::new()),
        }
    }
}

impl Weight for MatchAllWeight {
    fn key(&self) -> &QueryKey {
        &self.key
    }
    fn terms<'a>(&'a self, _positive: bool, _out: &mut Vec<&'a TermWeight>) {}
    fn scorer<'a>(&self, b: Build<'a>) -> Result<Option<BoxedScorer<'a>>> {
        Ok(Some(Box::new(AllScorer::new(b.seg.max_doc(), self.boost))))
    }
    fn collect(&self, b: Build<'_>, job: &mut SegmentJob<'_>) -> Result<bool> {
        job.run(&mut AllScorer::new(b.seg.max_doc(), self.boost))
    }
    fn known_count(&self, index: &Index) -> Result<Option<u64>> {
        Ok(Some(index.live_docs()))
    }
    fn bitset_cost(&self) -> Option<f64> {
        Some(self.docs as f64 / 64.0)
    }
    fn iteration_cost(&self) -> f64 {
        self.docs as f64
    }
    fn matches(&self, seg: &SegmentReader, _cutoff: Option<&Cutoff>) -> Result<BitSet> {
        let mut b = BitSet::new(seg.max_doc());
        for d in 0..seg.max_doc() {
            b.insert(d);
        }
        Ok(b)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// The live documents with the given external ids (`ids`), scored
/// `boost`: looked up once when the plan is made, kept per segment.
#[derive(Debug)]
pub struct IdsWeight {
    /// Per segment (by name): its local documents, sorted.
    docs: Vec<(String, Vec<DocId>)>,
    count: u64,
    boost: f32,
    key: QueryKey,
}

impl IdsWeight {
    /// The documents of `index` whose ids are among `ids` (absent ones
    /// match nothing).
    pub fn new(index: &Index, ids: &[String], boost: f32) -> Result<IdsWeight> {
        let mut by_seg: std::collections::BTreeMap<usize, Vec<DocId>> = Default::default();
        for id in ids {
            if let Some((i, local)) = index.find_id(id)?.and_then(|d| index.locate(d)) {
                by_seg.entry(i).or_default().push(local);
            }
        }
        let mut count = 0;
        let docs = by_seg
            .into_iter()
            .map(|(i, mut d)| {
                d.sort_unstable();
                d.dedup();
                count += d.len() as u64;
                (index.segments()[i].meta().name.clone(), d)
            })
            .collect();
        let mut sorted: Vec<&String> = ids.iter().collect();
        sorted.sort();
        sorted.dedup();
        Ok(IdsWeight {
            docs,
            count,
            boost,
            key: QueryKey::Other(format!("ids {sorted:?} {boost}"), Vec::new()),
        })
    }

    fn of(&self, seg: &SegmentReader) -> &[DocId] {
        let name = &seg.meta().name;
        self.docs.iter().find(|(n, _)| n == name).map_or(&[], |(_, d)| d)
    }
}

impl Weight for IdsWeight {
    fn key(&self) -> &QueryKey {
        &self.key
    }
    fn terms<'a>(&'a self, _positive: bool, _out: &mut Vec<&'a TermWeight>) {}
    fn scorer<'a>(&self, b: Build<'a>) -> Result<Option<BoxedScorer<'a>>> {
        let docs = self.of(b.seg);
        Ok((!docs.is_empty()).then(|| Box::new(DocSetScorer::new(DocSet::List(docs.to_vec()), self.boost)) as BoxedScorer<'a>))
    }
    fn bitset_cost(&self) -> Option<f64> {
        Some(self.count as f64)
    }
    fn iteration_cost(&self) -> f64 {
        self.count as f64
    }
    fn matches(&self, seg: &SegmentReader, _cutoff: Option<&Cutoff>) -> Result<BitSet> {
        let mut b = BitSet::new(seg.max_doc());
        self.of(seg).iter().for_each(|&d| b.insert(d));
        Ok(b)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// The documents of a text field that hold at least one token (its norm
/// is not zero), scored `boost`: `exists` on text.
#[derive(Debug)]
pub struct NormsExistWeight {
    field: Field,
    boost: f32,
    docs: u64,
    key: QueryKey,
}

impl NormsExistWeight {
    /// The documents of `index` with text in `field`.
    pub fn new(index: &Index, field: Field, boost: f32) -> NormsExistWeight {
        NormsExistWeight {
            field,
            boost,
            docs: index.field_stats(field).doc_count,
            key: QueryKey::Other(format!("exists text {} {boost}", field.id()), Vec::new()),
        }
    }

    fn bits(&self, seg: &SegmentReader) -> BitSet {
        let mut b = BitSet::new(seg.max_doc());
        for (d, &n) in seg.norms(self.field).iter().enumerate() {
            if n != 0 {
                b.insert(d as DocId);
            }
        }
        b
    }
}

impl Weight for NormsExistWeight {
    fn key(&self) -> &QueryKey {
        &self.key
    }
    fn terms<'a>(&'a self, _positive: bool, _out: &mut Vec<&'a TermWeight>) {}
    fn scorer<'a>(&self, b: Build<'a>) -> Result<Option<BoxedScorer<'a>>> {
        Ok(Some(Box::new(DocSetScorer::new(DocSet::Bits(self.bits(b.seg)), self.boost))))
    }
    fn bitset_cost(&self) -> Option<f64> {
        Some(self.docs as f64 / 8.0)
    }
    fn iteration_cost(&self) -> f64 {
        self.docs as f64
    }
    fn matches(&self, seg: &SegmentReader, _cutoff: Option<&Cutoff>) -> Result<BitSet> {
        Ok(self.bits(seg))
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// Another query's matches with a constant score (a filter clause scores
/// 0; `constant_score` its boost).
#[derive(Debug)]
pub struct ConstantWeight {
    inner: Plan,
    boost: f32,
    key: QueryKey,
}

impl ConstantWeight {
    /// `inner`'s matches scored `boost`.
    pub fn new(inner: Plan, boost: f32) -> ConstantWeight {
        let key = QueryKey::Other(format!("constant {boost}"), vec![inner.key().clone()]);
        ConstantWeight { inner, boost, key }
    }

    /// The score of every match.
    pub fn boost(&self) -> f32 {
        self.boost
    }
}

impl Weight for ConstantWeight {
    fn key(&self) -> &QueryKey {
        &self.key
    }
    fn terms<'a>(&'a self, positive: bool, out: &mut Vec<&'a TermWeight>) {
        self.inner.terms(positive, out)
    }
    fn scorer<'a>(&self, b: Build<'a>) -> Result<Option<BoxedScorer<'a>>> {
        Ok(self
            .inner
            .scorer(b)?
            .map(|s| Box::new(ConstScorer { inner: s, boost: self.boost }) as BoxedScorer<'a>))
    }
    fn scorer_led<'a>(&self, b: Build<'a>, lead: BoxedScorer<'a>) -> Result<Option<BoxedScorer<'a>>> {
        Ok(self
            .inner
            .scorer_led(b, lead)?
            .map(|s| Box::new(ConstScorer { inner: s, boost: self.boost }) as BoxedScorer<'a>))
    }
    fn known_count(&self, index: &Index) -> Result<Option<u64>> {
        self.inner.known_count(index)
    }
    fn bitset_cost(&self) -> Option<f64> {
        self.inner.bitset_cost()
    }
    fn iteration_cost(&self) -> f64 {
        self.inner.iteration_cost()
    }
    fn count_iteration_cost(&self) -> f64 {
        self.inner.count_iteration_cost()
    }
    fn estimated_matches(&self, num_docs: f64) -> f64 {
        self.inner.estimated_matches(num_docs)
    }
    fn code_bounds(&self, field: Field) -> Option<(u64, u64)> {
        self.inner.code_bounds(field)
    }
    fn exact_code_range(&self, field: Field) -> Option<(u64, u64)> {
        self.inner.exact_code_range(field)
    }
    fn matches(&self, seg: &SegmentReader, cutoff: Option<&Cutoff>) -> Result<BitSet> {
        self.inner.matches(seg, cutoff)
    }
    fn narrow(&self, seg: &SegmentReader, acc: &mut BitSet) -> Result<bool> {
        self.inner.narrow(seg, acc)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// A scorer's matches with a constant score.
pub struct ConstScorer<S> {
    inner: S,
    boost: f32,
}

impl<S: Scorer> Scorer for ConstScorer<S> {
    #[inline]
    fn doc(&self) -> DocId {
        self.inner.doc()
    }
    #[inline]
    fn advance(&mut self) -> DocId {
        self.inner.advance()
    }
    #[inline]
    fn seek(&mut self, target: DocId) -> DocId {
        self.inner.seek(target)
    }
    fn cost(&self) -> u64 {
        self.inner.cost()
    }
    #[inline]
    fn score(&mut self) -> f32 {
        self.boost
    }
    fn max_score(&self) -> f32 {
        self.boost
    }
    fn shallow_advance(&mut self, _target: DocId) -> DocId {
        match self.inner.doc() {
            TERMINATED => TERMINATED,
            _ => TERMINATED - 1,
        }
    }
    fn block_max_score(&mut self) -> f32 {
        self.boost
    }
    fn two_phase(&self) -> bool {
        self.inner.two_phase()
    }
    fn random_access(&self) -> bool {
        self.inner.random_access()
    }
    fn constant_score(&self) -> Option<f32> {
        Some(self.boost)
    }
    fn matches_at(&mut self, target: DocId) -> bool {
        self.inner.matches_at(target)
    }
    fn doc_bits(&self) -> Option<&BitSet> {
        self.inner.doc_bits()
    }
    fn set_count_only(&mut self) {
        self.inner.set_count_only()
    }
    fn take_error(&mut self) -> Option<Error> {
        self.inner.take_error()
    }
}

/// A set of documents with a constant score.
pub struct DocSetScorer {
    docs: DocSet,
    /// Position in a list.
    at: usize,
    doc: DocId,
    cost: u64,
    boost: f32,
}

impl DocSetScorer {
    /// Iterates `docs`, each scored `boost`.
    pub fn new(docs: DocSet, boost: f32) -> DocSetScorer {
        let (doc, cost) = match &docs {
            DocSet::List(l) => (l.first().copied().unwrap_or(TERMINATED), l.len() as u64),
            DocSet::Bits(b) => (b.next(0), b.len()),
        };
        DocSetScorer {
            docs,
            at: 0,
            doc,
            cost,
            boost,
        }
    }

    #[inline]
    fn find(&mut self, target: DocId) -> DocId {
        self.doc = match &self.docs {
            DocSet::List(l) => {
                // Gallop from the current position, then search.
                let mut step = 1;
                let mut hi = self.at;
                while hi < l.len() && l[hi] < target {
                    self.at = hi;
                    hi += step;
                    step *= 2;
                }
                let hi = hi.min(l.len());
                self.at += l[self.at..hi].partition_point(|&d| d < target);
                l.get(self.at).copied().unwrap_or(TERMINATED)
            }
            DocSet::Bits(b) => b.next(target),
        };
        self.doc
    }
}

impl Scorer for DocSetScorer {
    #[inline]
    fn doc(&self) -> DocId {
        self.doc
    }
    #[inline]
    fn advance(&mut self) -> DocId {
        if self.doc == TERMINATED {
            return TERMINATED;
        }
        let next = self.doc + 1;
        self.find(next)
    }
    #[inline]
    fn seek(&mut self, target: DocId) -> DocId {
        if target <= self.doc {
            return self.doc;
        }
        self.find(target)
    }
    fn cost(&self) -> u64 {
        self.cost
    }
    #[inline]
    fn score(&mut self) -> f32 {
        self.boost
    }
    fn max_score(&self) -> f32 {
        self.boost
    }
    fn shallow_advance(&mut self, target: DocId) -> DocId {
        let more = match &self.docs {
            DocSet::List(l) => l.last().is_some_and(|&d| d >= target),
            DocSet::Bits(b) => b.next(target) != TERMINATED,
        };
        if more {
            TERMINATED - 1
        } else {
            TERMINATED
        }
    }
    fn block_max_score(&mut self) -> f32 {
        self.boost
    }
    fn random_access(&self) -> bool {
        matches!(self.docs, DocSet::Bits(_))
    }
    fn constant_score(&self) -> Option<f32> {
        Some(self.boost)
    }
    #[inline]
    fn matches_at(&mut self, target: DocId) -> bool {
        match &self.docs {
            DocSet::Bits(b) => {
                if target <= self.doc {
                    return target == self.doc;
                }
                let hit = b.contains(target);
                if hit {
                    self.doc = target;
                }
                hit
            }
            DocSet::List(_) => self.seek(target) == target,
        }
    }
    fn doc_bits(&self) -> Option<&BitSet> {
        match &self.docs {
            DocSet::Bits(b) => Some(b),
            DocSet::List(_) => None,
        }
    }
    fn take_error(&mut self) -> Option<Error> {
        None
    }
}

/// What one part of a segment checks a document's codes against.
enum Check {
    /// Codes in a range (numbers, or keyword ordinals).
    Range(u64, u64),
    /// Codes in a sorted set.
    Set(Vec<u64>),
    /// Any value.
    Any,
    /// No value can match in this part.
    Never,
}

/// A column query confirming candidates from doc values (two-phase): used
/// inside a conjunction whose lead is far more selective, it reads the
/// values of the lead's candidates only. Alone, it walks every document.
pub struct CheckScorer<'a> {
    /// Per part: base, documents, reader, what its codes must satisfy.
    parts: Vec<(DocId, DocId, Option<ColumnReader<'a>>, Check)>,
    part: usize,
    doc: DocId,
    max_doc: DocId,
    cost: u64,
    boost: f32,
    codes: Vec<u64>,
    error: Option<Error>,
    /// Not positioned yet: `doc` is 0 whether or not it matches, and the
    /// first `seek`, `advance` or `matches_at` finds the first match. A
    /// clause that only confirms a conjunction's candidates thus never
    /// walks the documents before the first of them (the conjunction
    /// seeks it, also when it leads).
    pending: bool,
}

impl<'a> CheckScorer<'a> {
    /// The checker of `w` over `seg`, not yet positioned (see
    /// [`CheckScorer::pending`]); `None` when some part lacks doc values.
    fn new(w: &ColumnWeight, seg: &'a SegmentReader) -> Result<Option<CheckScorer<'a>>> {
        let mut parts = Vec::with_capacity(seg.parts().len());
        let mut cost = 0u64;
        for p in seg.parts() {
            let mut r = p.columns().and_then(|c| c.reader(w.field.id()));
            let check = match r.as_mut() {
                None => Check::Never,
                Some(r) if !r.has_doc_values() => return Ok(None),
                Some(r) => {
                    cost += r.meta().docs_with_value as u64;
                    match &w.what {
                        ColumnMatch::Exists => Check::Any,
                        ColumnMatch::Codes { lo, hi } => Check::Range(*lo, *hi),
                        ColumnMatch::CodeSet(c) => Check::Set(c.clone()),
                        ColumnMatch::Terms(values) => {
                            let mut set = Vec::new();
                            for v in values {
                                if let Ok(o) = r.ord_of(v.as_bytes())? {
                                    set.push(o);
                                }
                            }
                            set.sort_unstable();
                            Check::Set(set)
                        }
                        ColumnMatch::Strings { lower, upper } => match ord_range(r, lower, upper)? {
                            Some((lo, hi)) => Check::Range(lo, hi),
                            None => Check::Never,
                        },
                    }
                }
            };
            parts.push((p.base, p.max_doc, r, check));
        }
        Ok(Some(CheckScorer {
            parts,
            part: 0,
            doc: 0,
            max_doc: seg.max_doc(),
            cost,
            boost: w.boost,
            codes: Vec::new(),
            error: None,
            pending: true,
        }))
    }

    /// Whether `doc` holds a wanted value.
    #[inline]
    fn test(&mut self, doc: DocId) -> bool {
        while self.part + 1 < self.parts.len() && self.parts[self.part + 1].0 <= doc {
            self.part += 1;
        }
        if self.parts[self.part].0 > doc {
            self.part = self.parts.partition_point(|p| p.0 <= doc).saturating_sub(1);
        }
        let (base, _, reader, check) = &mut self.parts[self.part];
        let Some(r) = reader.as_mut() else {
            return false;
        };
        if matches!(check, Check::Never) {
            return false;
        }
        if let Err(e) = r.codes(doc - *base, &mut self.codes) {
            self.error.get_or_insert(e);
            return false;
        }
        match check {
            Check::Any => !self.codes.is_empty(),
            Check::Range(lo, hi) => self.codes.iter().any(|c| (*lo..=*hi).contains(c)),
            Check::Set(set) => self.codes.iter().any(|c| set.binary_search(c).is_ok()),
            Check::Never => false,
        }
    }

    /// The first match `>= from`, walking document by document.
    fn scan(&mut self, mut from: DocId) -> DocId {
        while from < self.max_doc {
            if self.test(from) {
                return from;
            }
            if self.error.is_some() {
                break;
            }
            from += 1;
        }
        TERMINATED
    }
}

impl Scorer for CheckScorer<'_> {
    #[inline]
    fn doc(&self) -> DocId {
        self.doc
    }
    fn advance(&mut self) -> DocId {
        if self.pending {
            self.pending = false;
            self.doc = self.scan(0);
        } else if self.doc != TERMINATED {
            self.doc = self.scan(self.doc + 1);
        }
        self.doc
    }
    fn seek(&mut self, target: DocId) -> DocId {
        if self.pending || target > self.doc {
            self.pending = false;
            self.doc = self.scan(target);
        }
        self.doc
    }
    fn cost(&self) -> u64 {
        self.cost
    }
    fn score(&mut self) -> f32 {
        self.boost
    }
    fn max_score(&self) -> f32 {
        self.boost
    }
    fn shallow_advance(&mut self, _target: DocId) -> DocId {
        if self.doc == TERMINATED && !self.pending {
            TERMINATED
        } else {
            TERMINATED - 1
        }
    }
    fn block_max_score(&mut self) -> f32 {
        self.boost
    }
    fn two_phase(&self) -> bool {
        true
    }
    fn constant_score(&self) -> Option<f32> {
        Some(self.boost)
    }
    #[inline]
    fn matches_at(&mut self, target: DocId) -> bool {
        if target >= self.max_doc {
            return false;
        }
        let hit = self.test(target);
        if hit {
            self.doc = target;
            self.pending = false;
        }
        hit
    }
    fn take_error(&mut self) -> Option<Error> {
        self.error.take()
    }
}

/// Every document `0..max_doc`, scored `boost`.
pub struct AllScorer {
    doc: DocId,
    max_doc: DocId,
    boost: f32,
}

impl AllScorer {
    /// Documents `0..max_doc`.
    pub fn new(max_doc: DocId, boost: f32) -> AllScorer {
        AllScorer {
            doc: if max_doc == 0 { TERMINATED } else { 0 },
            max_doc,
            boost,
        }
    }
}

impl Scorer for AllScorer {
    #[inline]
    fn doc(&self) -> DocId {
        self.doc
    }
    #[inline]
    fn advance(&mut self) -> DocId {
        let next = self.doc.saturating_add(1);
        self.doc = if next >= self.max_doc { TERMINATED } else { next };
        self.doc
    }
    #[inline]
    fn seek(&mut self, target: DocId) -> DocId {
        if target > self.doc {
            self.doc = if target >= self.max_doc { TERMINATED } else { target };
        }
        self.doc
    }
    fn cost(&self) -> u64 {
        self.max_doc as u64
    }
    #[inline]
    fn score(&mut self) -> f32 {
        self.boost
    }
    fn max_score(&self) -> f32 {
        self.boost
    }
    fn shallow_advance(&mut self, target: DocId) -> DocId {
        if target >= self.max_doc {
            TERMINATED
        } else {
            self.max_doc - 1
        }
    }
    fn block_max_score(&mut self) -> f32 {
        self.boost
    }
    fn random_access(&self) -> bool {
        true
    }
    fn constant_score(&self) -> Option<f32> {
        Some(self.boost)
    }
    fn take_error(&mut self) -> Option<Error> {
        None
    }
}
