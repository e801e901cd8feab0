//! Partial results (one per segment part, later per shard): serialisable,
//! merged associatively, and finalised into Elasticsearch's response shape.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::calendar::{bucket_key, format_in_zone, next_key};
use super::cardinality::CardinalityPartial;
use super::request::{AggKind, Aggregations, FieldRef, Key, MetricKind, TermsOrder, MAX_BUCKETS};
use crate::column::{code_double, code_long, ColumnKind};
use crate::error::{Error, Result};
use crate::query::sort::{SortBy, SortField, SortValue};
use crate::schema::{value::format_iso, DocId, Document};

/// The partial results of a list of aggregations, in request order.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AggsPartial(pub Vec<Partial>);

/// One bucket: its documents and its sub-aggregations' partials.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct BucketPartial {
    /// Documents in the bucket.
    pub doc_count: u64,
    /// Sub-aggregations.
    pub aggs: AggsPartial,
}

/// One aggregation's partial result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Partial {
    /// `terms`: buckets by key, ascending.
    Terms(Vec<(Key, BucketPartial)>),
    /// `histogram` (keys are bucket numbers) and `date_histogram` (keys are
    /// milliseconds): buckets by key, ascending.
    Histogram(Vec<(i64, BucketPartial)>),
    /// `range`: one bucket per range, in request order.
    Ranges(Vec<BucketPartial>),
    /// The metrics of `stats`.
    Stats(StatsPartial),
    /// `cardinality`.
    Cardinality(CardinalityPartial),
    /// `filter`.
    Filter(BucketPartial),
    /// `filters`: one bucket per filter, then the other bucket if asked.
    Filters(Vec<BucketPartial>),
    /// `top_hits`.
    TopHits(TopHitsPartial),
}

/// Count, sum, smallest and largest of the values seen.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct StatsPartial {
    /// Values seen.
    pub count: u64,
    /// Their sum.
    pub sum: f64,
    /// The smallest.
    pub min: Option<f64>,
    /// The largest.
    pub max: Option<f64>,
}

impl StatsPartial {
    /// Counts `v`.
    #[inline]
    pub fn add(&mut self, v: f64) {
        self.count += 1;
        self.sum += v;
        self.min = Some(self.min.map_or(v, |m| m.min(v)));
        self.max = Some(self.max.map_or(v, |m| m.max(v)));
    }

    fn merge(&mut self, o: StatsPartial) {
        self.count += o.count;
        self.sum += o.sum;
        self.min = match (self.min, o.min) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.max = match (self.max, o.max) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }
}

/// The best hits of a bucket so far, and how many documents it holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopHitsPartial {
    /// Documents seen.
    pub total: u64,
    /// Hits kept (`from + size`).
    pub keep: usize,
    /// Their order (empty: by score).
    pub sort: Vec<SortField>,
    /// The best, in order.
    pub hits: Vec<TopHit>,
}

/// One hit of `top_hits`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopHit {
    /// Global document number (valid on the searcher that found it).
    pub doc: DocId,
    /// Its score (0 when not scored).
    pub score: f32,
    /// Its sort values, one per sort key.
    pub sort: Vec<SortValue>,
    /// Its external id, once resolved.
    pub id: Option<String>,
    /// Its `_source` as the request filters it, once resolved.
    pub source: Option<Value>,
}

fn cmp_value(a: &SortValue, b: &SortValue, f: &SortField) -> Ordering {
    let o = match (a, b) {
        (SortValue::Missing, SortValue::Missing) => return Ordering::Equal,
        (SortValue::Missing, _) => {
            return if f.missing_first {
                Ordering::Less
            } else {
                Ordering::Greater
            }
        }
        (_, SortValue::Missing) => {
            return if f.missing_first {
                Ordering::Greater
            } else {
                Ordering::Less
            }
        }
        (SortValue::Long(x), SortValue::Long(y)) => x.cmp(y),
        (SortValue::Double(x), SortValue::Double(y)) => x.total_cmp(y),
        (SortValue::Keyword(x), SortValue::Keyword(y)) => x.cmp(y),
        _ => Ordering::Equal,
    };
    if f.descending {
        o.reverse()
    } else {
        o
    }
}

/// The order of two hits under `sort` (by score when empty), then by doc.
pub(crate) fn cmp_hits(a_sort: &[SortValue], a_score: f32, a_doc: DocId, b: &TopHit, sort: &[SortField]) -> Ordering {
    if sort.is_empty() {
        return b.score.total_cmp(&a_score).then(a_doc.cmp(&b.doc));
    }
    for (i, f) in sort.iter().enumerate() {
        let o = cmp_value(&a_sort[i], &b.sort[i], f);
        if o != Ordering::Equal {
            return o;
        }
    }
    a_doc.cmp(&b.doc)
}

impl TopHitsPartial {
    /// Sorts the hits and keeps the best `keep`.
    pub(crate) fn prune(&mut self) {
        let sort = &self.sort;
        self.hits.sort_by(|a, b| cmp_hits(&a.sort, a.score, a.doc, b, sort));
        self.hits.truncate(self.keep);
    }
}

/// Merges two lists sorted by key, combining equal keys with `f`.
fn merge_sorted<K: Ord, V>(a: Vec<(K, V)>, b: Vec<(K, V)>, f: impl Fn(&mut V, V)) -> Vec<(K, V)> {
    let mut out = Vec::with_capacity(a.len().max(b.len()));
    let mut a = a.into_iter().peekable();
    let mut b = b.into_iter().peekable();
    loop {
        let take_a = match (a.peek(), b.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(x), Some(y)) => match x.0.cmp(&y.0) {
                Ordering::Less => true,
                Ordering::Greater => false,
                Ordering::Equal => {
                    let (k, mut v) = a.next().expect("peeked");
                    f(&mut v, b.next().expect("peeked").1);
                    out.push((k, v));
                    continue;
                }
            },
        };
        out.push(if take_a { a.next() } else { b.next() }.expect("peeked"));
    }
    out
}

impl BucketPartial {
    fn merge(&mut self, o: BucketPartial) {
        self.doc_count += o.doc_count;
        self.aggs.merge(o.aggs);
    }
}

impl AggsPartial {
    /// The partial of no documents.
    pub fn empty(req: &Aggregations) -> AggsPartial {
        AggsPartial(
            req.aggs
                .iter()
                .map(|(_, a)| match &a.kind {
                    AggKind::Terms(_) => Partial::Terms(Vec::new()),
                    AggKind::Histogram(_) | AggKind::DateHistogram(_) => Partial::Histogram(Vec::new()),
                    AggKind::Range(r) => Partial::Ranges(vec![BucketPartial::empty(&a.subs); r.ranges.len()]),
                    AggKind::Metric(_) => Partial::Stats(StatsPartial::default()),
                    AggKind::Cardinality(c) => Partial::Cardinality(CardinalityPartial::new(c.precision_threshold)),
                    AggKind::Filter(_) => Partial::Filter(BucketPartial::empty(&a.subs)),
                    AggKind::Filters(f) => Partial::Filters(vec![
                        BucketPartial::empty(&a.subs);
                        f.filters.len() + usize::from(f.other.is_some())
                    ]),
                    AggKind::TopHits(t) => Partial::TopHits(TopHitsPartial {
                        total: 0,
                        keep: t.from + t.size,
                        sort: t.sort.clone(),
                        hits: Vec::new(),
                    }),
                })
                .collect(),
        )
    }

    /// Adds what `other` (a partial of the same request) holds. Merging is
    /// associative and commutative.
    pub fn merge(&mut self, other: AggsPartial) {
        if self.0.is_empty() {
            *self = other;
            return;
        }
        for (a, b) in self.0.iter_mut().zip(other.0) {
            match (a, b) {
                (Partial::Terms(x), Partial::Terms(y)) => {
                    *x = merge_sorted(std::mem::take(x), y, BucketPartial::merge);
                }
                (Partial::Histogram(x), Partial::Histogram(y)) => {
                    *x = merge_sorted(std::mem::take(x), y, BucketPartial::merge);
                }
                (Partial::Ranges(x), Partial::Ranges(y)) | (Partial::Filters(x), Partial::Filters(y)) => {
                    for (p, q) in x.iter_mut().zip(y) {
                        p.merge(q);
                    }
                }
                (Partial::Stats(x), Partial::Stats(y)) => x.merge(y),
                (Partial::Cardinality(x), Partial::Cardinality(y)) => x.merge(y),
                (Partial::Filter(x), Partial::Filter(y)) => x.merge(y),
                (Partial::TopHits(x), Partial::TopHits(y)) => {
                    x.total += y.total;
                    x.hits.extend(y.hits);
                    x.prune();
                }
                (a, b) => {
                    tracing::error!(?a, ?b, "merging partials of different aggregations");
                    debug_assert!(false, "merging partials of different aggregations");
                }
            }
        }
    }

    /// Fills in the id and `_source` of every `top_hits` hit from `fetch`
    /// (a shard does this before sending its partial away: document
    /// numbers mean nothing elsewhere).
    pub fn resolve(&mut self, req: &Aggregations, fetch: &mut dyn FnMut(DocId) -> Result<Document>) -> Result<()> {
        for ((_, agg), p) in req.aggs.iter().zip(self.0.iter_mut()) {
            let mut subs = |b: &mut BucketPartial| b.aggs.resolve(&agg.subs, fetch);
            match (p, &agg.kind) {
                (Partial::Terms(v), _) => v.iter_mut().try_for_each(|(_, b)| subs(b))?,
                (Partial::Histogram(v), _) => v.iter_mut().try_for_each(|(_, b)| subs(b))?,
                (Partial::Ranges(v), _) | (Partial::Filters(v), _) => v.iter_mut().try_for_each(subs)?,
                (Partial::Filter(b), _) => subs(b)?,
                (Partial::TopHits(t), AggKind::TopHits(spec)) => {
                    for h in &mut t.hits {
                        if h.id.is_none() {
                            let d = fetch(h.doc)?;
                            h.source = spec.source.apply(&d);
                            h.id = Some(d.id);
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

impl BucketPartial {
    /// A bucket of no documents.
    pub fn empty(subs: &Aggregations) -> BucketPartial {
        BucketPartial {
            doc_count: 0,
            aggs: AggsPartial::empty(subs),
        }
    }
}

fn mismatch(name: &str) -> Error {
    Error::Internal(format!(
        "aggregation [{name}]: the partial result does not match the request"
    ))
}

/// A double as Java shows it in range keys (`100.0`, `1.5`).
fn java_double(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{x:.1}")
    } else {
        format!("{x}")
    }
}

/// A terms key as Elasticsearch shows it: the key, and `key_as_string`
/// for dates and booleans.
fn term_key(field: &FieldRef, k: &Key) -> (Value, Option<String>) {
    match k {
        Key::Str(s) => (json!(s), None),
        Key::Code(c) => match field.kind {
            ColumnKind::Long => (json!(code_long(*c)), None),
            ColumnKind::Date => (json!(code_long(*c)), Some(format_iso(code_long(*c)))),
            ColumnKind::Double => (json!(code_double(*c)), None),
            ColumnKind::Boolean => (json!(*c), Some(if *c == 0 { "false" } else { "true" }.to_string())),
            ColumnKind::Keyword => (json!(c), None),
        },
    }
}

fn bucket_json(mut m: Map<String, Value>, b: &BucketPartial, subs: &Aggregations) -> Result<Value> {
    m.insert("doc_count".into(), json!(b.doc_count));
    for (k, v) in finalize_map(subs, &b.aggs)? {
        m.insert(k, v);
    }
    Ok(Value::Object(m))
}

fn keyed(key: Value, key_as_string: Option<String>) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("key".into(), key);
    if let Some(s) = key_as_string {
        m.insert("key_as_string".into(), json!(s));
    }
    m
}

/// Elasticsearch's response for `req` from its merged partial `p`: an
/// object from aggregation name to result. `top_hits` hits must have been
/// resolved ([`AggsPartial::resolve`]).
pub fn finalize(req: &Aggregations, p: &AggsPartial) -> Result<Value> {
    Ok(Value::Object(finalize_map(req, p)?))
}

fn finalize_map(req: &Aggregations, p: &AggsPartial) -> Result<Map<String, Value>> {
    let mut out = Map::new();
    if p.0.len() != req.aggs.len() {
        return Err(Error::Internal(
            "aggregation partial results do not match the request".into(),
        ));
    }
    for ((name, agg), part) in req.aggs.iter().zip(&p.0) {
        let subs = &agg.subs;
        let v = match (&agg.kind, part) {
            (AggKind::Terms(t), Partial::Terms(buckets)) => {
                let mut kept: Vec<&(Key, BucketPartial)> =
                    buckets.iter().filter(|(_, b)| b.doc_count >= t.min_doc_count).collect();
                kept.sort_by(|a, b| {
                    for &(by, desc) in &t.order {
                        let o = match by {
                            TermsOrder::Count => a.1.doc_count.cmp(&b.1.doc_count),
                            TermsOrder::Key => a.0.cmp(&b.0),
                        };
                        let o = if desc { o.reverse() } else { o };
                        if o != Ordering::Equal {
                            return o;
                        }
                    }
                    a.0.cmp(&b.0)
                });
                let other: u64 = kept.iter().skip(t.size).map(|(_, b)| b.doc_count).sum();
                let list = kept
                    .iter()
                    .take(t.size)
                    .map(|(k, b)| {
                        let (key, s) = term_key(&t.field, k);
                        bucket_json(keyed(key, s), b, subs)
                    })
                    .collect::<Result<Vec<_>>>()?;
                json!({"doc_count_error_upper_bound": 0, "sum_other_doc_count": other, "buckets": list})
            }
            (AggKind::Histogram(h), Partial::Histogram(buckets)) => {
                let idx = |v: f64| ((v - h.offset) / h.interval).floor() as i64;
                let (lo, hi) = fill_range(
                    buckets,
                    h.min_doc_count,
                    h.extended_bounds.map(|(a, b)| (idx(a), idx(b))),
                );
                let key = |i: i64| json!(i as f64 * h.interval + h.offset);
                let mut list = Vec::new();
                let empty = BucketPartial::empty(subs);
                let mut it = buckets.iter().peekable();
                if let (Some(lo), Some(hi)) = (lo, hi) {
                    if hi.checked_sub(lo).is_none_or(|n| n >= MAX_BUCKETS as i64) {
                        return Err(too_many(name));
                    }
                    for i in lo..=hi {
                        let b = match it.peek() {
                            Some((k, b)) if *k == i => {
                                it.next();
                                b
                            }
                            _ => &empty,
                        };
                        list.push(bucket_json(keyed(key(i), None), b, subs)?);
                    }
                } else {
                    for (i, b) in buckets.iter().filter(|(_, b)| b.doc_count >= h.min_doc_count.max(1)) {
                        list.push(bucket_json(keyed(key(*i), None), b, subs)?);
                    }
                }
                json!({ "buckets": list })
            }
            (AggKind::DateHistogram(d), Partial::Histogram(buckets)) => {
                let key = |t: i64| bucket_key(d.interval, t, d.zone_ms, d.offset_ms);
                let show = |k: i64| keyed(json!(k), Some(format_in_zone(k, d.zone_ms)));
                let mut list = Vec::new();
                if d.min_doc_count == 0 {
                    let ext = d.extended_bounds.map(|(a, b)| (key(a), key(b)));
                    let lo = buckets.first().map(|b| b.0).into_iter().chain(ext.map(|e| e.0)).min();
                    let hi = buckets.last().map(|b| b.0).into_iter().chain(ext.map(|e| e.1)).max();
                    if let (Some(lo), Some(hi)) = (lo, hi) {
                        let empty = BucketPartial::empty(subs);
                        let mut it = buckets.iter().peekable();
                        let mut k = lo;
                        while k <= hi {
                            if list.len() >= MAX_BUCKETS {
                                return Err(too_many(name));
                            }
                            let b = match it.peek() {
                                Some((x, b)) if *x == k => {
                                    it.next();
                                    b
                                }
                                _ => &empty,
                            };
                            list.push(bucket_json(show(k), b, subs)?);
                            k = next_key(d.interval, k, d.zone_ms, d.offset_ms);
                        }
                    }
                } else {
                    for (k, b) in buckets.iter().filter(|(_, b)| b.doc_count >= d.min_doc_count) {
                        list.push(bucket_json(show(*k), b, subs)?);
                    }
                }
                json!({ "buckets": list })
            }
            (AggKind::Range(r), Partial::Ranges(buckets)) if buckets.len() == r.ranges.len() => {
                let show = |x: f64| {
                    if r.dates {
                        format_iso(x as i64)
                    } else {
                        java_double(x)
                    }
                };
                let mut list = Vec::new();
                for (spec, b) in r.ranges.iter().zip(buckets) {
                    let key = spec.key.clone().unwrap_or_else(|| {
                        format!(
                            "{}-{}",
                            spec.from.map_or("*".to_string(), show),
                            spec.to.map_or("*".to_string(), show)
                        )
                    });
                    let mut m = keyed(json!(key), None);
                    if let Some(f) = spec.from {
                        m.insert("from".into(), json!(f));
                        if r.dates {
                            m.insert("from_as_string".into(), json!(show(f)));
                        }
                    }
                    if let Some(t) = spec.to {
                        m.insert("to".into(), json!(t));
                        if r.dates {
                            m.insert("to_as_string".into(), json!(show(t)));
                        }
                    }
                    list.push(bucket_json(m, b, subs)?);
                }
                json!({ "buckets": list })
            }
            (AggKind::Metric(m), Partial::Stats(s)) => {
                let date = m.field.kind == ColumnKind::Date;
                let with_string = |v: Option<f64>| {
                    let mut o = Map::new();
                    o.insert("value".into(), json!(v));
                    if let (true, Some(x)) = (date, v) {
                        o.insert("value_as_string".into(), json!(format_iso(x as i64)));
                    }
                    Value::Object(o)
                };
                let avg = (s.count > 0).then(|| s.sum / s.count as f64);
                match m.kind {
                    MetricKind::Stats => {
                        let mut o = json!({"count": s.count, "min": s.min, "max": s.max, "avg": avg, "sum": s.sum});
                        if let (true, Some(lo), Some(hi)) = (date, s.min, s.max) {
                            o["min_as_string"] = json!(format_iso(lo as i64));
                            o["max_as_string"] = json!(format_iso(hi as i64));
                        }
                        o
                    }
                    MetricKind::Min => with_string(s.min),
                    MetricKind::Max => with_string(s.max),
                    MetricKind::Avg => json!({ "value": avg }),
                    MetricKind::Sum => json!({ "value": s.sum }),
                    MetricKind::ValueCount => json!({ "value": s.count }),
                }
            }
            (AggKind::Cardinality(_), Partial::Cardinality(c)) => json!({ "value": c.estimate() }),
            (AggKind::Filter(_), Partial::Filter(b)) => bucket_json(Map::new(), b, subs)?,
            (AggKind::Filters(f), Partial::Filters(buckets))
                if buckets.len() == f.filters.len() + usize::from(f.other.is_some()) =>
            {
                let names = f
                    .filters
                    .iter()
                    .map(|(n, _)| n.clone())
                    .chain(f.other.iter().map(|o| Some(o.clone())));
                if f.keyed {
                    let mut m = Map::new();
                    for (n, b) in names.zip(buckets) {
                        m.insert(n.unwrap_or_default(), bucket_json(Map::new(), b, subs)?);
                    }
                    json!({ "buckets": m })
                } else {
                    let list = buckets
                        .iter()
                        .map(|b| bucket_json(Map::new(), b, subs))
                        .collect::<Result<Vec<_>>>()?;
                    json!({ "buckets": list })
                }
            }
            (AggKind::TopHits(t), Partial::TopHits(p)) => {
                let by_score = t.sort.is_empty();
                let hits: Vec<Value> = p
                    .hits
                    .iter()
                    .skip(t.from)
                    .take(t.size)
                    .map(|h| {
                        let mut m = Map::new();
                        m.insert("_id".into(), json!(h.id));
                        m.insert("_score".into(), if by_score { json!(h.score) } else { Value::Null });
                        if let Some(s) = &h.source {
                            m.insert("_source".into(), s.clone());
                        }
                        if !by_score {
                            m.insert("sort".into(), json!(h.sort));
                        }
                        Value::Object(m)
                    })
                    .collect();
                let max_score = if by_score {
                    p.hits.first().map(|h| json!(h.score))
                } else {
                    None
                };
                json!({"hits": {"total": {"value": p.total, "relation": "eq"}, "max_score": max_score, "hits": hits}})
            }
            _ => return Err(mismatch(name)),
        };
        out.insert(name.clone(), v);
    }
    Ok(out)
}

fn too_many(name: &str) -> Error {
    Error::InvalidArgument(format!(
        "aggregation [{name}] would return more than {MAX_BUCKETS} buckets: use a wider interval or narrower bounds"
    ))
}

/// The bucket numbers a histogram shows with gaps filled (`min_doc_count`
/// 0): from the first bucket or the lower bound to the last or the upper.
fn fill_range(
    buckets: &[(i64, BucketPartial)],
    min_doc_count: u64,
    ext: Option<(i64, i64)>,
) -> (Option<i64>, Option<i64>) {
    if min_doc_count > 0 {
        return (None, None);
    }
    let lo = buckets.first().map(|b| b.0).into_iter().chain(ext.map(|e| e.0)).min();
    let hi = buckets.last().map(|b| b.0).into_iter().chain(ext.map(|e| e.1)).max();
    (lo, hi)
}

/// The sort value of a score or document for `top_hits`.
pub(crate) fn special_value(f: &SortField, score: f32, doc: DocId) -> SortValue {
    match f.by {
        SortBy::Score => SortValue::Double(score as f64),
        SortBy::Doc => SortValue::Long(doc as i64),
        SortBy::Field(_) => SortValue::Missing,
    }
}
