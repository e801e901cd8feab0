//! Aggregation requests: Elasticsearch's `"aggs"` JSON read into typed
//! structs, checked against the schema. Every key that is not understood
//! is an error naming it.

use serde_json::{Map, Value};

use super::calendar::{CalendarUnit, DateInterval, MAX_TIME};
use crate::column::ColumnKind;
use crate::error::{Error, Result};
use crate::query::ast::Query;
use crate::query::dsl::{self, SourceFilter};
use crate::query::limits::QueryLimits;
use crate::query::sort::{SortBy, SortField};
use crate::schema::{value, Field, FieldType, Schema};

/// The most buckets one aggregation may return (Elasticsearch's
/// `search.max_buckets`).
pub const MAX_BUCKETS: usize = 65_536;

/// The most hits a `top_hits` aggregation may return.
pub const MAX_TOP_HITS: usize = 100;

/// `cardinality`'s default `precision_threshold`, and its largest.
pub const DEFAULT_PRECISION_THRESHOLD: u64 = 3000;
const MAX_PRECISION_THRESHOLD: u64 = 40_000;

fn bad(msg: impl Into<String>) -> Error {
    Error::InvalidArgument(msg.into())
}

/// A named list of aggregations (a request's `aggs`, or a bucket's
/// sub-aggregations), in request order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Aggregations {
    /// Name and aggregation.
    pub aggs: Vec<(String, Aggregation)>,
    /// Filter queries in the whole tree (only set on the root): their slots
    /// are indexes here.
    pub(crate) filters: Vec<Query>,
}

/// One aggregation and its sub-aggregations.
#[derive(Debug, Clone, PartialEq)]
pub struct Aggregation {
    /// What it computes.
    pub kind: AggKind,
    /// Sub-aggregations, computed per bucket (bucket aggregations only).
    pub subs: Aggregations,
}

/// The aggregation types.
#[derive(Debug, Clone, PartialEq)]
pub enum AggKind {
    /// `terms`: a bucket per distinct value.
    Terms(Terms),
    /// `histogram`: fixed-width numeric buckets.
    Histogram(Histogram),
    /// `date_histogram`: calendar or fixed-width time buckets.
    DateHistogram(DateHistogram),
    /// `range` and `date_range`: a bucket per `[from, to)` range.
    Range(Ranges),
    /// `stats`, `min`, `max`, `avg`, `sum`, `value_count`.
    Metric(Metric),
    /// `cardinality`: distinct values, approximately above a threshold.
    Cardinality(Cardinality),
    /// `filter`: one bucket of the documents matching a query.
    Filter(FilterAgg),
    /// `filters`: a bucket per query.
    Filters(Filters),
    /// `top_hits`: the best documents of the bucket.
    TopHits(TopHits),
}

/// A column field an aggregation reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRef {
    /// The field.
    pub field: Field,
    /// Its name, for messages.
    pub name: String,
    /// Its column kind.
    pub kind: ColumnKind,
}

/// A bucket key: a column code for numbers, dates and booleans (ordered as
/// the values), the string of a keyword.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
pub enum Key {
    /// A number, date or boolean as its column code.
    Code(u64),
    /// A keyword.
    Str(String),
}

/// `terms`.
#[derive(Debug, Clone, PartialEq)]
pub struct Terms {
    /// The field.
    pub field: FieldRef,
    /// Buckets returned.
    pub size: usize,
    /// Buckets a shard would return (accepted; every segment keeps all
    /// its terms, so the answer over one index is exact).
    pub shard_size: Option<usize>,
    /// Bucket order.
    pub order: Vec<(TermsOrder, bool)>,
    /// Buckets with fewer documents are left out (at least 1).
    pub min_doc_count: u64,
    /// The key documents without a value count under.
    pub missing: Option<Key>,
}

/// What terms buckets are ordered by (with `true` for descending).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TermsOrder {
    /// The document count.
    Count,
    /// The key.
    Key,
}

/// `histogram`.
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    /// The field.
    pub field: FieldRef,
    /// Bucket width (positive).
    pub interval: f64,
    /// Where bucket boundaries start, in `[0, interval)`.
    pub offset: f64,
    /// Buckets with fewer documents are left out (0: gaps are filled).
    pub min_doc_count: u64,
    /// With `min_doc_count` 0, buckets are filled at least over this range.
    pub extended_bounds: Option<(f64, f64)>,
}

/// `date_histogram`.
#[derive(Debug, Clone, PartialEq)]
pub struct DateHistogram {
    /// The field.
    pub field: FieldRef,
    /// Bucket width.
    pub interval: DateInterval,
    /// The time zone's fixed offset from UTC, in milliseconds.
    pub zone_ms: i64,
    /// Shift of the bucket boundaries, in milliseconds.
    pub offset_ms: i64,
    /// Buckets with fewer documents are left out (0: gaps are filled).
    pub min_doc_count: u64,
    /// With `min_doc_count` 0, buckets are filled at least over this range
    /// (milliseconds).
    pub extended_bounds: Option<(i64, i64)>,
}

/// `range` or `date_range`.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranges {
    /// The field.
    pub field: FieldRef,
    /// The ranges, in output order (by `from`, then `to`).
    pub ranges: Vec<RangeSpec>,
    /// `date_range` (keys and bounds shown as dates).
    pub dates: bool,
}

/// One range: `from` included, `to` excluded (values as numbers; dates in
/// milliseconds).
#[derive(Debug, Clone, PartialEq)]
pub struct RangeSpec {
    /// The bucket's key, if the request names it.
    pub key: Option<String>,
    /// Lower bound, included.
    pub from: Option<f64>,
    /// Upper bound, excluded.
    pub to: Option<f64>,
}

/// Which single-number metric (or all of `stats`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    /// count, min, max, avg, sum.
    Stats,
    /// The smallest value.
    Min,
    /// The largest value.
    Max,
    /// The mean of the values.
    Avg,
    /// The sum of the values.
    Sum,
    /// The number of values.
    ValueCount,
}

/// `stats`, `min`, `max`, `avg`, `sum`, `value_count`.
#[derive(Debug, Clone, PartialEq)]
pub struct Metric {
    /// The field.
    pub field: FieldRef,
    /// What is computed.
    pub kind: MetricKind,
}

/// `cardinality`.
#[derive(Debug, Clone, PartialEq)]
pub struct Cardinality {
    /// The field.
    pub field: FieldRef,
    /// Exact up to this many distinct values, HyperLogLog++ above.
    pub precision_threshold: u64,
}

/// `filter`.
#[derive(Debug, Clone, PartialEq)]
pub struct FilterAgg {
    /// The filter's slot in the root's filter list.
    pub slot: usize,
}

/// `filters`.
#[derive(Debug, Clone, PartialEq)]
pub struct Filters {
    /// Bucket names (`None`: anonymous filters, answered as a list) and
    /// filter slots, in output order.
    pub filters: Vec<(Option<String>, usize)>,
    /// Named filters (buckets answered as an object).
    pub keyed: bool,
    /// The key of a bucket of the documents matching none (`other_bucket`).
    pub other: Option<String>,
}

/// `top_hits`.
#[derive(Debug, Clone, PartialEq)]
pub struct TopHits {
    /// Hits skipped.
    pub from: usize,
    /// Hits returned (at most [`MAX_TOP_HITS`]).
    pub size: usize,
    /// The order (empty: by score, best first).
    pub sort: Vec<SortField>,
    /// Which parts of `_source` are shown.
    pub source: SourceFilter,
}

impl TopHits {
    /// Whether the order needs scores.
    pub fn needs_scores(&self) -> bool {
        self.sort.is_empty() || self.sort.iter().any(|f| f.by == SortBy::Score)
    }
}

impl Aggregations {
    /// Reads a request's `aggs` object against `schema`; filter queries are
    /// parsed within `limits`.
    pub fn parse(schema: &Schema, limits: &QueryLimits, v: &Value) -> Result<Aggregations> {
        let mut filters = Vec::new();
        let mut aggs = parse_list(schema, limits, v, &mut filters, "aggs")?;
        aggs.filters = filters;
        Ok(aggs)
    }

    /// The aggregations of a `_search` request body: its `aggs` or
    /// `aggregations` object (`None` when it has neither).
    pub fn from_body(schema: &Schema, limits: &QueryLimits, body: &Map<String, Value>) -> Result<Option<Aggregations>> {
        match (body.get("aggs"), body.get("aggregations")) {
            (Some(_), Some(_)) => Err(bad("a request has [aggs] or [aggregations], not both")),
            (Some(v), None) | (None, Some(v)) => Aggregations::parse(schema, limits, v).map(Some),
            (None, None) => Ok(None),
        }
    }

    /// Whether no aggregation is asked for.
    pub fn is_empty(&self) -> bool {
        self.aggs.is_empty()
    }

    /// Whether some `top_hits` orders by score.
    pub fn needs_scores(&self) -> bool {
        self.aggs
            .iter()
            .any(|(_, a)| matches!(&a.kind, AggKind::TopHits(t) if t.needs_scores()) || a.subs.needs_scores())
    }

    /// The filter queries of the tree, by slot.
    pub fn filter_queries(&self) -> &[Query] {
        &self.filters
    }
}

fn parse_list(
    schema: &Schema,
    limits: &QueryLimits,
    v: &Value,
    filters: &mut Vec<Query>,
    path: &str,
) -> Result<Aggregations> {
    let o = v
        .as_object()
        .ok_or_else(|| bad(format!("[{path}] must be an object of named aggregations, not {v}")))?;
    let mut aggs = Vec::with_capacity(o.len());
    for (name, body) in o {
        if name.is_empty() || name.contains(['[', ']', '>']) {
            return Err(bad(format!("invalid aggregation name [{name}]")));
        }
        aggs.push((name.clone(), parse_one(schema, limits, name, body, filters)?));
    }
    Ok(Aggregations {
        aggs,
        filters: Vec::new(),
    })
}

fn parse_one(
    schema: &Schema,
    limits: &QueryLimits,
    name: &str,
    v: &Value,
    filters: &mut Vec<Query>,
) -> Result<Aggregation> {
    let o = v
        .as_object()
        .ok_or_else(|| bad(format!("aggregation [{name}] must be an object, not {v}")))?;
    let mut kind_entry = None;
    let mut subs_v = None;
    for (k, body) in o {
        match k.as_str() {
            "aggs" | "aggregations" => {
                if subs_v.replace(body).is_some() {
                    return Err(bad(format!("aggregation [{name}] has both [aggs] and [aggregations]")));
                }
            }
            "meta" => return Err(bad(format!("aggregation [{name}]: [meta] is not supported"))),
            _ => {
                if let Some((first, _)) = kind_entry.replace((k.as_str(), body)) {
                    return Err(bad(format!("aggregation [{name}] has two types, [{first}] and [{k}]")));
                }
            }
        }
    }
    let (ty, body) = kind_entry.ok_or_else(|| bad(format!("aggregation [{name}] has no type")))?;
    let kind = match ty {
        "terms" => AggKind::Terms(terms(schema, name, body)?),
        "histogram" => AggKind::Histogram(histogram(schema, name, body)?),
        "date_histogram" => AggKind::DateHistogram(date_histogram(schema, name, body)?),
        "range" => AggKind::Range(ranges(schema, name, body, false)?),
        "date_range" => AggKind::Range(ranges(schema, name, body, true)?),
        "stats" => metric(schema, name, ty, body, MetricKind::Stats)?,
        "min" => metric(schema, name, ty, body, MetricKind::Min)?,
        "max" => metric(schema, name, ty, body, MetricKind::Max)?,
        "avg" => metric(schema, name, ty, body, MetricKind::Avg)?,
        "sum" => metric(schema, name, ty, body, MetricKind::Sum)?,
        "value_count" => metric(schema, name, ty, body, MetricKind::ValueCount)?,
        "cardinality" => AggKind::Cardinality(cardinality(schema, name, body)?),
        "filter" => {
            filters.push(dsl::query(schema, limits, body)?);
            AggKind::Filter(FilterAgg { slot: filters.len() - 1 })
        }
        "filters" => AggKind::Filters(filters_agg(schema, limits, name, body, filters)?),
        "top_hits" => AggKind::TopHits(top_hits(schema, name, body)?),
        other => {
            return Err(bad(format!(
                "aggregation [{name}]: unknown or unsupported aggregation type [{other}] (supported: terms, histogram, date_histogram, range, date_range, stats, min, max, avg, sum, value_count, cardinality, filter, filters, top_hits)"
            )))
        }
    };
    let subs = match subs_v {
        None => Aggregations::default(),
        Some(s) => {
            if matches!(kind, AggKind::Metric(_) | AggKind::Cardinality(_) | AggKind::TopHits(_)) {
                return Err(bad(format!(
                    "aggregator [{name}] of type [{ty}] cannot accept sub-aggregations"
                )));
            }
            parse_list(schema, limits, s, filters, name)?
        }
    };
    Ok(Aggregation { kind, subs })
}

/// The body's object, with only `allowed` keys.
fn object<'a>(name: &str, ty: &str, v: &'a Value, allowed: &[&str]) -> Result<&'a Map<String, Value>> {
    let o = v
        .as_object()
        .ok_or_else(|| bad(format!("[{ty}] aggregation [{name}] takes an object, not {v}")))?;
    if let Some(k) = o.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(bad(format!(
            "[{ty}] aggregation [{name}] does not support [{k}] (it takes: {})",
            allowed.join(", ")
        )));
    }
    Ok(o)
}

/// The column field the body's `field` names.
fn column(schema: &Schema, name: &str, ty: &str, o: &Map<String, Value>) -> Result<FieldRef> {
    let fname = o
        .get("field")
        .ok_or_else(|| bad(format!("[{ty}] aggregation [{name}] needs a [field]")))?
        .as_str()
        .ok_or_else(|| bad(format!("[{ty}] aggregation [{name}]: [field] must be a string")))?;
    let field = schema.field(fname).ok_or_else(|| {
        bad(format!(
            "[{ty}] aggregation [{name}]: unknown field [{fname}] (fields: {})",
            schema.names().join(", ")
        ))
    })?;
    let entry = schema.entry(field).expect("resolved field");
    let kind = entry.ty.column_kind().ok_or_else(|| {
        bad(format!(
            "[{ty}] aggregation [{name}]: field [{fname}] is a text field; text fields are not optimised for aggregations: use a keyword field"
        ))
    })?;
    if !entry.ty.doc_values() {
        return Err(bad(format!(
            "[{ty}] aggregation [{name}]: field [{fname}] has no doc values (doc_values: false)"
        )));
    }
    Ok(FieldRef {
        field,
        name: fname.to_string(),
        kind,
    })
}

fn uint(name: &str, ty: &str, key: &str, v: &Value) -> Result<u64> {
    v.as_u64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        .ok_or_else(|| {
            bad(format!(
                "[{ty}] aggregation [{name}]: [{key}] must be a non-negative integer, not {v}"
            ))
        })
}

fn number(name: &str, ty: &str, key: &str, v: &Value) -> Result<f64> {
    v.as_f64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        .filter(|x: &f64| x.is_finite())
        .ok_or_else(|| {
            bad(format!(
                "[{ty}] aggregation [{name}]: [{key}] must be a number, not {v}"
            ))
        })
}

/// The date format of a date field (epoch milliseconds for others).
fn date_format(schema: &Schema, f: &FieldRef) -> String {
    match &schema.entry(f.field).expect("resolved field").ty {
        FieldType::Date(o) => format!("{}||epoch_millis", o.format),
        _ => "epoch_millis".to_string(),
    }
}

fn date_ms(name: &str, ty: &str, key: &str, v: &Value, formats: &str) -> Result<i64> {
    match v {
        Value::Number(_) => v.as_i64().ok_or_else(|| {
            bad(format!(
                "[{ty}] aggregation [{name}]: [{key}] must be whole milliseconds, not {v}"
            ))
        }),
        _ => value::date(v, formats).map_err(|e| bad(format!("[{ty}] aggregation [{name}]: [{key}]: {e}"))),
    }
}

fn terms(schema: &Schema, name: &str, v: &Value) -> Result<Terms> {
    const TY: &str = "terms";
    let o = object(
        name,
        TY,
        v,
        &["field", "size", "shard_size", "order", "min_doc_count", "missing"],
    )?;
    let field = column(schema, name, TY, o)?;
    let size = o
        .get("size")
        .map(|v| uint(name, TY, "size", v))
        .transpose()?
        .unwrap_or(10) as usize;
    if size == 0 || size > MAX_BUCKETS {
        return Err(bad(format!(
            "[terms] aggregation [{name}]: [size] must be in 1..={MAX_BUCKETS}"
        )));
    }
    let shard_size = o
        .get("shard_size")
        .map(|v| uint(name, TY, "shard_size", v))
        .transpose()?
        .map(|s| s as usize);
    let min_doc_count = o
        .get("min_doc_count")
        .map(|v| uint(name, TY, "min_doc_count", v))
        .transpose()?
        .unwrap_or(1);
    if min_doc_count == 0 {
        return Err(bad(format!(
            "[terms] aggregation [{name}]: [min_doc_count] 0 (buckets of values no matching document has) is not supported"
        )));
    }
    let mut order = Vec::new();
    if let Some(ov) = o.get("order") {
        let items: Vec<&Value> = match ov {
            Value::Array(a) => a.iter().collect(),
            other => vec![other],
        };
        for item in items {
            let (k, dir) = item
                .as_object()
                .filter(|m| m.len() == 1)
                .and_then(|m| m.iter().next())
                .ok_or_else(|| bad(format!("[terms] aggregation [{name}]: [order] takes {{\"_count\"|\"_key\": \"asc\"|\"desc\"}}, not {item}")))?;
            let by = match k.as_str() {
                "_count" => TermsOrder::Count,
                "_key" => TermsOrder::Key,
                other => {
                    return Err(bad(format!(
                        "[terms] aggregation [{name}]: ordering by [{other}] is not supported (only _count and _key)"
                    )))
                }
            };
            let desc = match dir.as_str().map(str::to_ascii_lowercase).as_deref() {
                Some("asc") => false,
                Some("desc") => true,
                _ => {
                    return Err(bad(format!(
                        "[terms] aggregation [{name}]: unknown order direction {dir}"
                    )))
                }
            };
            order.push((by, desc));
        }
    }
    if order.is_empty() {
        order.push((TermsOrder::Count, true));
    }
    let missing = o
        .get("missing")
        .map(|m| missing_key(schema, &field, name, m))
        .transpose()?;
    Ok(Terms {
        field,
        size,
        shard_size,
        order,
        min_doc_count,
        missing,
    })
}

/// The bucket key of a `missing` value for `field`.
fn missing_key(schema: &Schema, field: &FieldRef, name: &str, v: &Value) -> Result<Key> {
    let entry = schema.entry(field.field).expect("resolved field");
    let wrong = |e: String| {
        bad(format!(
            "[terms] aggregation [{name}]: [missing] {v} does not fit field [{}]: {e}",
            field.name
        ))
    };
    if field.kind == ColumnKind::Keyword {
        return match value::scalar_text(v) {
            Some(s) => Ok(Key::Str(s.into_owned())),
            None => Err(wrong("not a string".into())),
        };
    }
    match value::convert(entry, v).map_err(wrong)? {
        value::Indexed::Code(c) => Ok(Key::Code(c)),
        _ => Err(wrong("not a value of the field".into())),
    }
}

fn numeric(field: &FieldRef, name: &str, ty: &str) -> Result<()> {
    if field.kind == ColumnKind::Keyword {
        return Err(bad(format!(
            "[{ty}] aggregation [{name}]: field [{}] is a keyword; [{ty}] needs a number, date or boolean field",
            field.name
        )));
    }
    Ok(())
}

fn histogram(schema: &Schema, name: &str, v: &Value) -> Result<Histogram> {
    const TY: &str = "histogram";
    let o = object(
        name,
        TY,
        v,
        &["field", "interval", "offset", "min_doc_count", "extended_bounds"],
    )?;
    let field = column(schema, name, TY, o)?;
    numeric(&field, name, TY)?;
    let interval = number(
        name,
        TY,
        "interval",
        o.get("interval")
            .ok_or_else(|| bad(format!("[histogram] aggregation [{name}] needs an [interval]")))?,
    )?;
    if interval <= 0.0 {
        return Err(bad(format!(
            "[histogram] aggregation [{name}]: [interval] must be positive"
        )));
    }
    let offset = o
        .get("offset")
        .map(|v| number(name, TY, "offset", v))
        .transpose()?
        .unwrap_or(0.0);
    let offset = offset.rem_euclid(interval);
    let min_doc_count = o
        .get("min_doc_count")
        .map(|v| uint(name, TY, "min_doc_count", v))
        .transpose()?
        .unwrap_or(0);
    let extended_bounds = match o.get("extended_bounds") {
        None => None,
        Some(b) => {
            let bo = object(name, "histogram.extended_bounds", b, &["min", "max"])?;
            let get = |k: &str| {
                bo.get(k).map(|v| number(name, TY, k, v)).transpose()?.ok_or_else(|| {
                    bad(format!(
                        "[histogram] aggregation [{name}]: [extended_bounds] needs [{k}]"
                    ))
                })
            };
            let (lo, hi) = (get("min")?, get("max")?);
            if lo > hi {
                return Err(bad(format!(
                    "[histogram] aggregation [{name}]: [extended_bounds] min is above max"
                )));
            }
            Some((lo, hi))
        }
    };
    Ok(Histogram {
        field,
        interval,
        offset,
        min_doc_count,
        extended_bounds,
    })
}

/// A fixed duration (`90m`, `12h`, `1000ms`, `30d`, `10s`; a sign allowed
/// with `signed`) in milliseconds.
pub fn parse_duration(s: &str, signed: bool) -> Option<i64> {
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') if signed => (true, &s[1..]),
        Some(b'+') if signed => (false, &s[1..]),
        _ => (false, s),
    };
    let split = body.find(|c: char| !c.is_ascii_digit())?;
    let (n, unit) = body.split_at(split);
    let n: i64 = n.parse().ok()?;
    let unit_ms = match unit {
        "ms" => 1,
        "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    let ms = n.checked_mul(unit_ms)?;
    Some(if neg { -ms } else { ms })
}

/// A time zone as a fixed offset from UTC in milliseconds: `UTC`, `Z`,
/// `+01:00`, `-05:30`, `+0100`.
pub fn parse_zone(s: &str) -> Result<i64> {
    match s {
        "UTC" | "utc" | "Z" | "GMT" | "Etc/UTC" | "+00:00" | "-00:00" => return Ok(0),
        _ => {}
    }
    let refuse = || {
        bad(format!(
            "time_zone [{s}] is not supported: use a fixed offset such as +01:00 or -05:30, or UTC (named time zones with daylight saving are not supported)"
        ))
    };
    let sign = match s.as_bytes().first() {
        Some(b'+') => 1,
        Some(b'-') => -1,
        _ => return Err(refuse()),
    };
    let digits: String = s[1..].chars().filter(|&c| c != ':').collect();
    if !digits.chars().all(|c| c.is_ascii_digit()) || !(digits.len() == 2 || digits.len() == 4) || s[1..].len() > 5 {
        return Err(refuse());
    }
    let h: i64 = digits[..2].parse().map_err(|_| refuse())?;
    let m: i64 = if digits.len() == 4 {
        digits[2..].parse().map_err(|_| refuse())?
    } else {
        0
    };
    if h > 18 || m > 59 {
        return Err(refuse());
    }
    Ok(sign * (h * 3_600_000 + m * 60_000))
}

fn date_histogram(schema: &Schema, name: &str, v: &Value) -> Result<DateHistogram> {
    const TY: &str = "date_histogram";
    let o = object(
        name,
        TY,
        v,
        &[
            "field",
            "calendar_interval",
            "fixed_interval",
            "interval",
            "time_zone",
            "offset",
            "min_doc_count",
            "extended_bounds",
            "format",
        ],
    )?;
    let field = column(schema, name, TY, o)?;
    if !matches!(field.kind, ColumnKind::Date | ColumnKind::Long) {
        return Err(bad(format!(
            "[date_histogram] aggregation [{name}]: field [{}] is not a date (or long) field",
            field.name
        )));
    }
    if o.contains_key("interval") {
        return Err(bad(format!(
            "[date_histogram] aggregation [{name}]: [interval] is deprecated: use [calendar_interval] or [fixed_interval]"
        )));
    }
    if let Some(f) = o.get("format") {
        if f.as_str() != Some("strict_date_optional_time") && f.as_str() != Some("date_optional_time") {
            return Err(bad(format!(
                "[date_histogram] aggregation [{name}]: [format] {f} is not supported (keys are shown as ISO-8601, strict_date_optional_time)"
            )));
        }
    }
    let interval = match (o.get("calendar_interval"), o.get("fixed_interval")) {
        (Some(_), Some(_)) => {
            return Err(bad(format!(
                "[date_histogram] aggregation [{name}] takes [calendar_interval] or [fixed_interval], not both"
            )))
        }
        (Some(c), None) => {
            let s = c.as_str().unwrap_or_default();
            let unit = CalendarUnit::parse(s).ok_or_else(|| {
                bad(format!(
                    "[date_histogram] aggregation [{name}]: unknown calendar_interval {c} (minute, hour, day, week, month, quarter, year, or 1m, 1h, 1d, 1w, 1M, 1q, 1y)"
                ))
            })?;
            DateInterval::Calendar(unit)
        }
        (None, Some(f)) => {
            let ms = f.as_str().and_then(|s| parse_duration(s, false)).filter(|&ms| ms > 0 && ms <= MAX_TIME).ok_or_else(|| {
                bad(format!(
                    "[date_histogram] aggregation [{name}]: [fixed_interval] {f} is not a duration such as 30d, 12h, 90m, 10s or 1000ms"
                ))
            })?;
            DateInterval::Fixed(ms)
        }
        (None, None) => {
            return Err(bad(format!(
                "[date_histogram] aggregation [{name}] needs [calendar_interval] or [fixed_interval]"
            )))
        }
    };
    let zone_ms = match o.get("time_zone") {
        None => 0,
        Some(z) => parse_zone(z.as_str().ok_or_else(|| {
            bad(format!(
                "[date_histogram] aggregation [{name}]: [time_zone] must be a string"
            ))
        })?)?,
    };
    let offset_ms = match o.get("offset") {
        None => 0,
        Some(Value::Number(n)) => n
            .as_i64()
            .ok_or_else(|| bad(format!("[date_histogram] aggregation [{name}]: bad [offset] {n}")))?,
        Some(Value::String(s)) => parse_duration(s, true).ok_or_else(|| {
            bad(format!(
                "[date_histogram] aggregation [{name}]: [offset] `{s}` is not a duration such as +6h or -1d"
            ))
        })?,
        Some(other) => {
            return Err(bad(format!(
                "[date_histogram] aggregation [{name}]: bad [offset] {other}"
            )))
        }
    };
    if offset_ms.abs() > MAX_TIME {
        return Err(bad(format!(
            "[date_histogram] aggregation [{name}]: [offset] out of range"
        )));
    }
    let min_doc_count = o
        .get("min_doc_count")
        .map(|v| uint(name, TY, "min_doc_count", v))
        .transpose()?
        .unwrap_or(0);
    let formats = date_format(schema, &field);
    let extended_bounds = match o.get("extended_bounds") {
        None => None,
        Some(b) => {
            let bo = object(name, "date_histogram.extended_bounds", b, &["min", "max"])?;
            let get = |k: &str| {
                bo.get(k)
                    .map(|v| date_ms(name, TY, k, v, &formats))
                    .transpose()?
                    .ok_or_else(|| {
                        bad(format!(
                            "[date_histogram] aggregation [{name}]: [extended_bounds] needs [{k}]"
                        ))
                    })
            };
            let (lo, hi) = (get("min")?, get("max")?);
            if lo > hi {
                return Err(bad(format!(
                    "[date_histogram] aggregation [{name}]: [extended_bounds] min is above max"
                )));
            }
            if lo < -MAX_TIME || hi > MAX_TIME {
                return Err(bad(format!(
                    "[date_histogram] aggregation [{name}]: [extended_bounds] out of range"
                )));
            }
            Some((lo, hi))
        }
    };
    Ok(DateHistogram {
        field,
        interval,
        zone_ms,
        offset_ms,
        min_doc_count,
        extended_bounds,
    })
}

fn ranges(schema: &Schema, name: &str, v: &Value, dates: bool) -> Result<Ranges> {
    let ty = if dates { "date_range" } else { "range" };
    let allowed: &[&str] = if dates {
        &["field", "ranges", "format", "time_zone"]
    } else {
        &["field", "ranges"]
    };
    let o = object(name, ty, v, allowed)?;
    if let Some(f) = o.get("format") {
        return Err(bad(format!(
            "[{ty}] aggregation [{name}]: [format] {f} is not supported"
        )));
    }
    if let Some(z) = o.get("time_zone") {
        if parse_zone(z.as_str().unwrap_or_default())? != 0 {
            return Err(bad(format!(
                "[{ty}] aggregation [{name}]: a [time_zone] other than UTC is not supported"
            )));
        }
    }
    let field = column(schema, name, ty, o)?;
    numeric(&field, name, ty)?;
    if dates && field.kind != ColumnKind::Date {
        return Err(bad(format!(
            "[date_range] aggregation [{name}]: field [{}] is not a date field",
            field.name
        )));
    }
    let formats = date_format(schema, &field);
    let list = o
        .get("ranges")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty())
        .ok_or_else(|| bad(format!("[{ty}] aggregation [{name}] needs a non-empty [ranges] list")))?;
    let mut out = Vec::with_capacity(list.len());
    for r in list {
        let ro = object(name, &format!("{ty}.ranges"), r, &["from", "to", "key"])?;
        let bound = |k: &str| -> Result<Option<f64>> {
            match ro.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(v) if dates => date_ms(name, ty, k, v, &formats).map(|ms| Some(ms as f64)),
                Some(v) => number(name, ty, k, v).map(Some),
            }
        };
        let key = match ro.get("key") {
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => {
                return Err(bad(format!(
                    "[{ty}] aggregation [{name}]: [key] must be a string, not {other}"
                )))
            }
        };
        out.push(RangeSpec {
            key,
            from: bound("from")?,
            to: bound("to")?,
        });
    }
    let lo = |r: &RangeSpec| r.from.unwrap_or(f64::NEG_INFINITY);
    let hi = |r: &RangeSpec| r.to.unwrap_or(f64::INFINITY);
    out.sort_by(|a, b| lo(a).total_cmp(&lo(b)).then(hi(a).total_cmp(&hi(b))));
    Ok(Ranges {
        field,
        ranges: out,
        dates,
    })
}

fn metric(schema: &Schema, name: &str, ty: &str, v: &Value, kind: MetricKind) -> Result<AggKind> {
    let o = object(name, ty, v, &["field"])?;
    let field = column(schema, name, ty, o)?;
    if kind != MetricKind::ValueCount {
        numeric(&field, name, ty)?;
    }
    Ok(AggKind::Metric(Metric { field, kind }))
}

fn cardinality(schema: &Schema, name: &str, v: &Value) -> Result<Cardinality> {
    const TY: &str = "cardinality";
    let o = object(name, TY, v, &["field", "precision_threshold"])?;
    let field = column(schema, name, TY, o)?;
    let precision_threshold = o
        .get("precision_threshold")
        .map(|v| uint(name, TY, "precision_threshold", v))
        .transpose()?
        .unwrap_or(DEFAULT_PRECISION_THRESHOLD)
        .min(MAX_PRECISION_THRESHOLD);
    Ok(Cardinality {
        field,
        precision_threshold,
    })
}

fn filters_agg(
    schema: &Schema,
    limits: &QueryLimits,
    name: &str,
    v: &Value,
    slots: &mut Vec<Query>,
) -> Result<Filters> {
    const TY: &str = "filters";
    let o = object(name, TY, v, &["filters", "other_bucket", "other_bucket_key"])?;
    let mut push = |q: &Value| -> Result<usize> {
        slots.push(dsl::query(schema, limits, q)?);
        Ok(slots.len() - 1)
    };
    let (filters, keyed) = match o.get("filters") {
        Some(Value::Object(m)) => {
            let mut named: Vec<(&String, &Value)> = m.iter().collect();
            named.sort_by(|a, b| a.0.cmp(b.0));
            let mut out = Vec::with_capacity(named.len());
            for (k, q) in named {
                out.push((Some(k.clone()), push(q)?));
            }
            (out, true)
        }
        Some(Value::Array(a)) => (
            a.iter().map(|q| Ok((None, push(q)?))).collect::<Result<Vec<_>>>()?,
            false,
        ),
        _ => {
            return Err(bad(format!(
                "[filters] aggregation [{name}] needs [filters]: an object of named queries or a list of queries"
            )))
        }
    };
    let other_key = match o.get("other_bucket_key") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            return Err(bad(format!(
                "[filters] aggregation [{name}]: [other_bucket_key] must be a string, not {other}"
            )))
        }
    };
    let other = match o.get("other_bucket") {
        None => other_key.map(Some),
        Some(Value::Bool(true)) => Some(other_key.or_else(|| Some("_other_".to_string()))),
        Some(Value::Bool(false)) => None,
        Some(x) => {
            return Err(bad(format!(
                "[filters] aggregation [{name}]: [other_bucket] must be a boolean, not {x}"
            )))
        }
    }
    .flatten();
    Ok(Filters { filters, keyed, other })
}

fn top_hits(schema: &Schema, name: &str, v: &Value) -> Result<TopHits> {
    const TY: &str = "top_hits";
    let o = object(name, TY, v, &["size", "from", "sort", "_source"])?;
    let size = o
        .get("size")
        .map(|v| uint(name, TY, "size", v))
        .transpose()?
        .unwrap_or(3) as usize;
    let from = o
        .get("from")
        .map(|v| uint(name, TY, "from", v))
        .transpose()?
        .unwrap_or(0) as usize;
    if from + size > MAX_TOP_HITS {
        return Err(bad(format!(
            "[top_hits] aggregation [{name}]: from + size is {}, over the limit of {MAX_TOP_HITS}",
            from + size
        )));
    }
    let sort = match o.get("sort") {
        None => Vec::new(),
        Some(s) => dsl::sort(schema, s)?,
    };
    let source = match o.get("_source") {
        None => SourceFilter::default(),
        Some(s) => SourceFilter::parse(s)?,
    };
    Ok(TopHits {
        from,
        size,
        sort,
        source,
    })
}
