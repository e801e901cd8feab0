//! Aggregations against a brute-force computation (issue #22): random typed
//! corpora (multi-valued and missing values, several segments and chained
//! parts, deletes) are indexed through the writer, and random queries with
//! random aggregation trees of every type, nested to depth 3, are answered
//! by the engine and by a scan of the live documents; the JSON answers must
//! be equal (cardinality: exact at or below its threshold, within three
//! standard errors of HyperLogLog above). The segments' partial results
//! must give the same answer merged in any order and grouping, and after a
//! JSON round trip.
//!
//! Doubles are multiples of 1/8 and small, so their sums are exact in any
//! order. `TIERDEX_AGGS_CASES` sets the number of queries (default 300).

mod support;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::{json, Map, Value};
use support::gen::Rng;
use tierdex::aggs::{finalize, Aggregations, AggsPartial};
use tierdex::column::{code_double, code_long};
use tierdex::query::limits::QueryLimits;
use tierdex::schema::value::{civil_from_days, convert, days_from_civil, format_iso, values_at, Indexed};
use tierdex::schema::Schema;
use tierdex::search::{Mode, SearchRequest, Searcher};
use tierdex::update::{IndexWriter, Strategy, WriterOptions};
use tierdex::Document;

const WORDS: [&str; 5] = ["apple", "pear", "plum", "fig", "kiwi"];
const TAGS: [&str; 6] = ["red", "Green", "blue", "green", "black", "white"];
const DAY: i64 = 86_400_000;

fn mapping() -> Schema {
    Schema::from_json(
        &json!({"dynamic": "strict", "properties": {
            "body": {"type": "text"},
            "uid": {"type": "long"},
            "tags": {"type": "keyword"},
            "cat": {"type": "keyword", "normalizer": "lowercase"},
            "n": {"type": "long"},
            "x": {"type": "double"},
            "when": {"type": "date"},
            "ok": {"type": "boolean"}
        }})
        .to_string(),
    )
    .unwrap()
}

fn doc(rng: &mut Rng, id: usize, uid: i64) -> Document {
    let body: Vec<&str> = (0..rng.range(0, 4)).map(|_| *rng.pick(&WORDS)).collect();
    let mut v = json!({"id": format!("d{id}"), "uid": uid, "body": body.join(" ")});
    let tags: Vec<&str> = (0..rng.range(0, 3)).map(|_| *rng.pick(&TAGS)).collect();
    let n = rng.range(0, 40) as i64 - 20;
    let stamp = |rng: &mut Rng| {
        format!(
            "20{:02}-{:02}-{:02}T{:02}:{:02}:00Z",
            rng.range(14, 17),
            rng.range(1, 12),
            rng.range(1, 28),
            rng.range(0, 23),
            rng.range(0, 59)
        )
    };
    let values: Vec<(&str, Value)> = vec![
        ("tags", json!(tags)),
        ("cat", json!(*rng.pick(&["Books", "music", "MUSIC", "games", "zz"]))),
        (
            "n",
            if rng.chance(0.25) {
                json!([n, n + rng.range(0, 9) as i64, n])
            } else {
                json!(n)
            },
        ),
        (
            "x",
            if rng.chance(0.2) {
                json!([
                    (rng.range(0, 800) as f64 - 400.0) / 8.0,
                    (rng.range(0, 800) as f64 - 400.0) / 8.0
                ])
            } else {
                json!((rng.range(0, 800) as f64 - 400.0) / 8.0)
            },
        ),
        (
            "when",
            if rng.chance(0.2) {
                json!([stamp(rng), stamp(rng)])
            } else {
                json!(stamp(rng))
            },
        ),
        ("ok", json!(rng.chance(0.5))),
    ];
    for (key, value) in values {
        if rng.chance(0.8) {
            v[key] = value;
        }
    }
    serde_json::from_value(v).unwrap()
}

/// A live document's values as the engine indexes them.
#[derive(Clone)]
struct Row {
    id: String,
    uid: i64,
    words: Vec<String>,
    /// Column codes of numbers, dates and booleans (all values).
    codes: HashMap<String, Vec<u64>>,
    /// Keywords (normalised).
    keywords: HashMap<String, Vec<String>>,
}

fn row(schema: &Schema, d: &Document) -> Row {
    let mut r = Row {
        id: d.id.clone(),
        uid: d.fields.get("uid").and_then(Value::as_i64).unwrap(),
        words: d.text("body").split_whitespace().map(str::to_string).collect(),
        codes: HashMap::new(),
        keywords: HashMap::new(),
    };
    for f in schema.fields() {
        let e = schema.entry(f).unwrap();
        values_at(&d.fields, e.path(), &mut |v| match convert(e, v).unwrap() {
            Indexed::Code(c) => r.codes.entry(e.name.clone()).or_default().push(c),
            Indexed::Keyword(k) => r.keywords.entry(e.name.clone()).or_default().push(k.into_owned()),
            _ => {}
        });
    }
    r
}

fn kind(field: &str) -> &'static str {
    match field {
        "tags" | "cat" => "keyword",
        "n" | "uid" => "long",
        "x" => "double",
        "when" => "date",
        "ok" => "boolean",
        _ => unreachable!(),
    }
}

/// A field's values as numbers (all of them, duplicates kept).
fn numbers(r: &Row, field: &str) -> Vec<f64> {
    r.codes
        .get(field)
        .map(|cs| {
            cs.iter()
                .map(|&c| match kind(field) {
                    "double" => code_double(c),
                    "boolean" => c as f64,
                    _ => code_long(c) as f64,
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A query of the DSL and its predicate.
struct Filter {
    json: Value,
    test: Box<dyn Fn(&Row) -> bool>,
}

fn filter(rng: &mut Rng) -> Filter {
    match rng.range(0, 5) {
        0 => {
            let t = rng.pick(&TAGS).to_string();
            let t2 = t.clone();
            Filter {
                json: json!({"term": {"tags": t}}),
                test: Box::new(move |r| r.keywords.get("tags").is_some_and(|k| k.contains(&t2))),
            }
        }
        1 => {
            let (lo, hi) = (rng.range(0, 30) as i64 - 20, rng.range(0, 30) as i64 - 10);
            Filter {
                json: json!({"range": {"n": {"gte": lo, "lt": hi}}}),
                test: Box::new(move |r| numbers(r, "n").iter().any(|&v| v >= lo as f64 && v < hi as f64)),
            }
        }
        2 => Filter {
            json: json!({"exists": {"field": "x"}}),
            test: Box::new(|r| r.codes.contains_key("x")),
        },
        3 => {
            let b = rng.chance(0.5);
            Filter {
                json: json!({"term": {"ok": b}}),
                test: Box::new(move |r| r.codes.get("ok").is_some_and(|c| c.contains(&(b as u64)))),
            }
        }
        _ => Filter {
            json: json!({"match_all": {}}),
            test: Box::new(|_| true),
        },
    }
}

/// A calendar unit or a fixed interval of a date histogram.
#[derive(Clone, Copy, Debug)]
enum Interval {
    Unit(&'static str),
    Fixed(i64, &'static str),
}

/// The start (local milliseconds) of the bucket holding local time `t`.
fn round_local(iv: Interval, t: i64) -> i64 {
    let day = t.div_euclid(DAY);
    let (y, m, _) = civil_from_days(day);
    match iv {
        Interval::Fixed(ms, _) => t - t.rem_euclid(ms),
        Interval::Unit("minute") => t - t.rem_euclid(60_000),
        Interval::Unit("hour") => t - t.rem_euclid(3_600_000),
        Interval::Unit("day") => day * DAY,
        Interval::Unit("week") => {
            // Back to a Monday (1970-01-05 was one).
            let mut d = day;
            while (d - 4).rem_euclid(7) != 0 {
                d -= 1;
            }
            d * DAY
        }
        Interval::Unit("month") => days_from_civil(y, m, 1) * DAY,
        Interval::Unit("quarter") => {
            days_from_civil(y, [1, 1, 1, 4, 4, 4, 7, 7, 7, 10, 10, 10][m as usize - 1], 1) * DAY
        }
        Interval::Unit("year") => days_from_civil(y, 1, 1) * DAY,
        _ => unreachable!(),
    }
}

/// The aggregation spec a test case asks for; renders its request and
/// computes its answer from the documents.
#[derive(Debug, Clone)]
enum Spec {
    Terms {
        field: &'static str,
        size: usize,
        order: Option<(&'static str, &'static str)>,
        min_doc_count: u64,
        missing: Option<Value>,
    },
    Histogram {
        field: &'static str,
        interval: f64,
        offset: f64,
        min_doc_count: u64,
        bounds: Option<(f64, f64)>,
    },
    DateHistogram {
        interval: Interval,
        zone: (&'static str, i64),
        min_doc_count: u64,
        bounds: Option<(i64, i64)>,
    },
    Range {
        field: &'static str,
        ranges: Vec<(Option<f64>, Option<f64>, Option<String>)>,
    },
    Metric {
        ty: &'static str,
        field: &'static str,
    },
    Cardinality {
        field: &'static str,
        threshold: u64,
    },
    Filter(usize),
    Filters {
        keyed: bool,
        filters: Vec<usize>,
        other: bool,
    },
    TopHits {
        size: usize,
        from: usize,
        desc: bool,
        by_cat: bool,
        source: bool,
    },
}

/// A tree of named specs.
#[derive(Debug, Clone)]
struct Node {
    name: String,
    spec: Spec,
    subs: Vec<Node>,
}

struct Gen {
    filters: Vec<Filter>,
}

impl Gen {
    fn spec(&mut self, rng: &mut Rng, bucket: bool) -> Spec {
        let pick = if bucket { rng.range(0, 6) } else { rng.range(7, 9) };
        match pick {
            0 => {
                let field = *rng.pick(&["tags", "cat", "n", "when", "ok", "x"]);
                let missing = rng.chance(0.3).then(|| match kind(field) {
                    "keyword" => json!(*rng.pick(&["none", "red"])),
                    "long" => json!(*rng.pick(&[-20, 999])),
                    "double" => json!(0.5),
                    "date" => json!("2015-01-01T00:00:00Z"),
                    _ => json!(true),
                });
                Spec::Terms {
                    field,
                    size: rng.range(1, 12),
                    order: rng
                        .chance(0.5)
                        .then(|| (*rng.pick(&["_count", "_key"]), *rng.pick(&["asc", "desc"]))),
                    min_doc_count: rng.range(1, 3) as u64,
                    missing,
                }
            }
            1 => {
                let field = *rng.pick(&["n", "x"]);
                let interval = *rng.pick(&[1.0, 2.5, 5.0, 7.0, 20.0]);
                Spec::Histogram {
                    field,
                    interval,
                    offset: *rng.pick(&[0.0, 0.0, 1.0, 1.5]),
                    min_doc_count: rng.range(0, 2) as u64,
                    bounds: rng.chance(0.3).then(|| (-50.0, rng.range(0, 60) as f64)),
                }
            }
            2 => {
                let interval = if rng.chance(0.7) {
                    let unit = *rng.pick(&["minute", "hour", "day", "week", "month", "quarter", "year"]);
                    Interval::Unit(unit)
                } else {
                    *rng.pick(&[
                        Interval::Fixed(30 * DAY, "30d"),
                        Interval::Fixed(12 * 3_600_000, "12h"),
                        Interval::Fixed(90 * 60_000, "90m"),
                    ])
                };
                let coarse = matches!(interval, Interval::Unit("month" | "quarter" | "year" | "week"))
                    || matches!(interval, Interval::Fixed(ms, _) if ms >= DAY);
                Spec::DateHistogram {
                    interval,
                    zone: *rng.pick(&[("UTC", 0), ("+01:00", 3_600_000), ("-05:30", -19_800_000)]),
                    // Fine intervals over years fill too many buckets.
                    min_doc_count: if coarse {
                        rng.range(0, 2) as u64
                    } else {
                        rng.range(1, 2) as u64
                    },
                    bounds: (coarse && rng.chance(0.3))
                        .then(|| (days_from_civil(2013, 6, 1) * DAY, days_from_civil(2018, 2, 1) * DAY)),
                }
            }
            3 => {
                let field = *rng.pick(&["n", "x", "when"]);
                let mut ranges = Vec::new();
                for _ in 0..rng.range(1, 4) {
                    let b = |rng: &mut Rng| -> Option<f64> {
                        if rng.chance(0.2) {
                            return None;
                        }
                        Some(match field {
                            "when" => {
                                (days_from_civil(rng.range(2014, 2018) as i64, rng.range(1, 12) as u32, 1) * DAY) as f64
                            }
                            "x" => (rng.range(0, 800) as f64 - 400.0) / 8.0,
                            _ => rng.range(0, 40) as f64 - 20.0,
                        })
                    };
                    let (from, to) = (b(rng), b(rng));
                    let key = rng.chance(0.3).then(|| format!("k{}", ranges.len()));
                    ranges.push((from, to, key));
                }
                Spec::Range { field, ranges }
            }
            4 => {
                self.filters.push(filter(rng));
                Spec::Filter(self.filters.len() - 1)
            }
            5 => {
                let mut filters = Vec::new();
                for _ in 0..rng.range(1, 3) {
                    self.filters.push(filter(rng));
                    filters.push(self.filters.len() - 1);
                }
                Spec::Filters {
                    keyed: rng.chance(0.5),
                    filters,
                    other: rng.chance(0.4),
                }
            }
            6 => Spec::TopHits {
                size: rng.range(0, 4),
                from: rng.range(0, 2),
                desc: rng.chance(0.5),
                by_cat: rng.chance(0.5),
                source: rng.chance(0.5),
            },
            7 => {
                let ty = *rng.pick(&["stats", "min", "max", "avg", "sum", "value_count"]);
                let field = *rng.pick(&["n", "x", "when", "ok"]);
                Spec::Metric { ty, field }
            }
            8 => {
                let field = *rng.pick(&["tags", "cat", "n", "x", "when", "uid"]);
                Spec::Cardinality {
                    field,
                    threshold: *rng.pick(&[3, 3000]),
                }
            }
            _ => {
                let field = *rng.pick(&["tags", "cat"]);
                Spec::Metric {
                    ty: "value_count",
                    field,
                }
            }
        }
    }

    fn tree(&mut self, rng: &mut Rng, depth: usize, n: usize) -> Vec<Node> {
        (0..n)
            .map(|i| {
                let bucket = depth < 3 && rng.chance(0.6);
                let spec = self.spec(rng, bucket);
                let subs = match &spec {
                    Spec::Metric { .. } | Spec::Cardinality { .. } | Spec::TopHits { .. } => Vec::new(),
                    _ => {
                        let k = rng.range(0, 2);
                        self.tree(rng, depth + 1, k)
                    }
                };
                Node {
                    name: format!("a{depth}_{i}"),
                    spec,
                    subs,
                }
            })
            .collect()
    }

    fn request(&self, nodes: &[Node]) -> Value {
        let mut m = Map::new();
        for n in nodes {
            let mut body = match &n.spec {
                Spec::Terms {
                    field,
                    size,
                    order,
                    min_doc_count,
                    missing,
                } => {
                    let mut t = json!({"field": field, "size": size, "min_doc_count": min_doc_count});
                    if let Some((by, dir)) = order {
                        t["order"] = json!({ *by: dir });
                    }
                    if let Some(mv) = missing {
                        t["missing"] = mv.clone();
                    }
                    json!({ "terms": t })
                }
                Spec::Histogram {
                    field,
                    interval,
                    offset,
                    min_doc_count,
                    bounds,
                } => {
                    let mut h =
                        json!({"field": field, "interval": interval, "offset": offset, "min_doc_count": min_doc_count});
                    if let Some((lo, hi)) = bounds {
                        h["extended_bounds"] = json!({"min": lo, "max": hi});
                    }
                    json!({ "histogram": h })
                }
                Spec::DateHistogram {
                    interval,
                    zone,
                    min_doc_count,
                    bounds,
                } => {
                    let mut h = json!({"field": "when", "time_zone": zone.0, "min_doc_count": min_doc_count});
                    match interval {
                        Interval::Unit(u) => h["calendar_interval"] = json!(u),
                        Interval::Fixed(_, s) => h["fixed_interval"] = json!(s),
                    }
                    if let Some((lo, hi)) = bounds {
                        h["extended_bounds"] = json!({"min": format_iso(*lo), "max": hi});
                    }
                    json!({ "date_histogram": h })
                }
                Spec::Range { field, ranges } => {
                    let list: Vec<Value> = ranges
                        .iter()
                        .map(|(f, t, k)| {
                            let mut r = json!({});
                            let show = |v: f64| {
                                if *field == "when" {
                                    json!(format_iso(v as i64))
                                } else {
                                    json!(v)
                                }
                            };
                            if let Some(f) = f {
                                r["from"] = show(*f);
                            }
                            if let Some(t) = t {
                                r["to"] = show(*t);
                            }
                            if let Some(k) = k {
                                r["key"] = json!(k);
                            }
                            r
                        })
                        .collect();
                    let ty = if *field == "when" { "date_range" } else { "range" };
                    json!({ ty: {"field": field, "ranges": list} })
                }
                Spec::Metric { ty, field } => json!({ *ty: {"field": field} }),
                Spec::Cardinality { field, threshold } => {
                    json!({"cardinality": {"field": field, "precision_threshold": threshold}})
                }
                Spec::Filter(f) => json!({"filter": self.filters[*f].json}),
                Spec::Filters { keyed, filters, other } => {
                    let fs = if *keyed {
                        Value::Object(
                            filters
                                .iter()
                                .map(|f| (format!("f{f}"), self.filters[*f].json.clone()))
                                .collect(),
                        )
                    } else {
                        Value::Array(filters.iter().map(|f| self.filters[*f].json.clone()).collect())
                    };
                    json!({"filters": {"filters": fs, "other_bucket": other}})
                }
                Spec::TopHits {
                    size,
                    from,
                    desc,
                    by_cat,
                    source,
                } => json!({"top_hits": {
                    "size": size, "from": from,
                    "sort": if *by_cat {
                        json!([{"cat": if *desc { "desc" } else { "asc" }}, {"uid": if *desc { "desc" } else { "asc" }}])
                    } else {
                        json!([{"uid": if *desc { "desc" } else { "asc" }}])
                    },
                    "_source": if *source { json!(["uid"]) } else { json!(false) }
                }}),
            };
            if !n.subs.is_empty() {
                body["aggs"] = self.request(&n.subs);
            }
            m.insert(n.name.clone(), body);
        }
        Value::Object(m)
    }

    /// What the aggregations of `nodes` answer over `docs`.
    fn expect(&self, nodes: &[Node], docs: &[&Row]) -> Value {
        let mut m = Map::new();
        for n in nodes {
            let with_subs = |mut b: Map<String, Value>, docs: &[&Row]| -> Value {
                b.insert("doc_count".into(), json!(docs.len()));
                if let Value::Object(s) = self.expect(&n.subs, docs) {
                    b.extend(s);
                }
                Value::Object(b)
            };
            let v = match &n.spec {
                Spec::Terms {
                    field,
                    size,
                    order,
                    min_doc_count,
                    missing,
                } => {
                    let k = kind(field);
                    // Keys as (sortable key, json key, key_as_string).
                    let mut groups: BTreeMap<KeyOf, Vec<&Row>> = BTreeMap::new();
                    let missing_key = missing.as_ref().map(|mv| key_of_json(field, mv));
                    for r in docs {
                        let keys: BTreeSet<KeyOf> = if k == "keyword" {
                            r.keywords
                                .get(*field)
                                .into_iter()
                                .flatten()
                                .map(|s| KeyOf::Str(s.clone()))
                                .collect()
                        } else {
                            r.codes
                                .get(*field)
                                .into_iter()
                                .flatten()
                                .map(|&c| KeyOf::Code(c))
                                .collect()
                        };
                        if keys.is_empty() {
                            if let Some(mk) = &missing_key {
                                groups.entry(mk.clone()).or_default().push(r);
                            }
                        }
                        for key in keys {
                            groups.entry(key).or_default().push(r);
                        }
                    }
                    let mut list: Vec<(KeyOf, Vec<&Row>)> = groups
                        .into_iter()
                        .filter(|(_, d)| d.len() as u64 >= *min_doc_count)
                        .collect();
                    let (by, dir) = order.unwrap_or(("_count", "desc"));
                    list.sort_by(|a, b| {
                        let o = if by == "_count" {
                            a.1.len().cmp(&b.1.len())
                        } else {
                            a.0.cmp(&b.0)
                        };
                        let o = if dir == "desc" { o.reverse() } else { o };
                        o.then(a.0.cmp(&b.0))
                    });
                    let other: usize = list.iter().skip(*size).map(|(_, d)| d.len()).sum();
                    let buckets: Vec<Value> = list
                        .iter()
                        .take(*size)
                        .map(|(key, d)| {
                            let mut b = Map::new();
                            match key {
                                KeyOf::Str(s) => {
                                    b.insert("key".into(), json!(s));
                                }
                                KeyOf::Code(c) => match k {
                                    "long" => {
                                        b.insert("key".into(), json!(code_long(*c)));
                                    }
                                    "double" => {
                                        b.insert("key".into(), json!(code_double(*c)));
                                    }
                                    "date" => {
                                        b.insert("key".into(), json!(code_long(*c)));
                                        b.insert("key_as_string".into(), json!(format_iso(code_long(*c))));
                                    }
                                    _ => {
                                        b.insert("key".into(), json!(*c));
                                        b.insert("key_as_string".into(), json!(if *c == 1 { "true" } else { "false" }));
                                    }
                                },
                            }
                            with_subs(b, d)
                        })
                        .collect();
                    json!({"doc_count_error_upper_bound": 0, "sum_other_doc_count": other, "buckets": buckets})
                }
                Spec::Histogram {
                    field,
                    interval,
                    offset,
                    min_doc_count,
                    bounds,
                } => {
                    let idx = |v: f64| ((v - offset) / interval).floor() as i64;
                    let mut groups: BTreeMap<i64, Vec<&Row>> = BTreeMap::new();
                    for r in docs {
                        let ks: BTreeSet<i64> = numbers(r, field).into_iter().map(idx).collect();
                        for k in ks {
                            groups.entry(k).or_default().push(r);
                        }
                    }
                    let mut keys: Vec<i64> = groups.keys().copied().collect();
                    if *min_doc_count == 0 {
                        let mut lo = groups.keys().next().copied();
                        let mut hi = groups.keys().last().copied();
                        if let Some((a, b)) = bounds {
                            lo = Some(lo.map_or(idx(*a), |l| l.min(idx(*a))));
                            hi = Some(hi.map_or(idx(*b), |h| h.max(idx(*b))));
                        }
                        keys = match (lo, hi) {
                            (Some(l), Some(h)) => (l..=h).collect(),
                            _ => Vec::new(),
                        };
                    }
                    let buckets: Vec<Value> = keys
                        .into_iter()
                        .filter(|k| groups.get(k).map_or(0, Vec::len) as u64 >= *min_doc_count)
                        .map(|k| {
                            let mut b = Map::new();
                            b.insert("key".into(), json!(k as f64 * interval + offset));
                            with_subs(b, groups.get(&k).map_or(&[][..], Vec::as_slice))
                        })
                        .collect();
                    json!({ "buckets": buckets })
                }
                Spec::DateHistogram {
                    interval,
                    zone,
                    min_doc_count,
                    bounds,
                } => {
                    let z = zone.1;
                    let key = |t: i64| round_local(*interval, t + z) - z;
                    let mut groups: BTreeMap<i64, Vec<&Row>> = BTreeMap::new();
                    for r in docs {
                        let ks: BTreeSet<i64> = r
                            .codes
                            .get("when")
                            .into_iter()
                            .flatten()
                            .map(|&c| key(code_long(c)))
                            .collect();
                        for k in ks {
                            groups.entry(k).or_default().push(r);
                        }
                    }
                    let mut keys: Vec<i64> = groups.keys().copied().collect();
                    if *min_doc_count == 0 {
                        let mut lo = groups.keys().next().copied();
                        let mut hi = groups.keys().last().copied();
                        if let Some((a, b)) = bounds {
                            lo = Some(lo.map_or(key(*a), |l| l.min(key(*a))));
                            hi = Some(hi.map_or(key(*b), |h| h.max(key(*b))));
                        }
                        keys.clear();
                        if let (Some(l), Some(h)) = (lo, hi) {
                            // Every bucket start between them: step through
                            // time and keep the distinct keys.
                            let mut t = l;
                            while t <= h {
                                let k = key(t);
                                if keys.last() != Some(&k) {
                                    keys.push(k);
                                }
                                t += match interval {
                                    Interval::Fixed(ms, _) => *ms,
                                    Interval::Unit("minute") => 60_000,
                                    Interval::Unit("hour") => 3_600_000,
                                    _ => DAY,
                                };
                            }
                        }
                    }
                    let show = |k: i64| {
                        let s = format_iso(k + z);
                        if z == 0 {
                            s
                        } else {
                            let sign = if z < 0 { '-' } else { '+' };
                            let m = z.abs() / 60_000;
                            format!("{}{sign}{:02}:{:02}", &s[..s.len() - 1], m / 60, m % 60)
                        }
                    };
                    let buckets: Vec<Value> = keys
                        .into_iter()
                        .filter(|k| groups.get(k).map_or(0, Vec::len) as u64 >= *min_doc_count)
                        .map(|k| {
                            let mut b = Map::new();
                            b.insert("key".into(), json!(k));
                            b.insert("key_as_string".into(), json!(show(k)));
                            with_subs(b, groups.get(&k).map_or(&[][..], Vec::as_slice))
                        })
                        .collect();
                    json!({ "buckets": buckets })
                }
                Spec::Range { field, ranges } => {
                    let dates = *field == "when";
                    let mut sorted = ranges.clone();
                    let lo = |r: &(Option<f64>, Option<f64>, Option<String>)| r.0.unwrap_or(f64::NEG_INFINITY);
                    let hi = |r: &(Option<f64>, Option<f64>, Option<String>)| r.1.unwrap_or(f64::INFINITY);
                    sorted.sort_by(|a, b| lo(a).total_cmp(&lo(b)).then(hi(a).total_cmp(&hi(b))));
                    let show = |v: f64| {
                        if dates {
                            format_iso(v as i64)
                        } else if v.fract() == 0.0 {
                            format!("{v:.1}")
                        } else {
                            format!("{v}")
                        }
                    };
                    let buckets: Vec<Value> = sorted
                        .iter()
                        .map(|(f, t, k)| {
                            let inside: Vec<&Row> = docs
                                .iter()
                                .copied()
                                .filter(|r| {
                                    numbers(r, field)
                                        .iter()
                                        .any(|&v| f.is_none_or(|f| v >= f) && t.is_none_or(|t| v < t))
                                })
                                .collect();
                            let mut b = Map::new();
                            let key = k.clone().unwrap_or_else(|| {
                                format!("{}-{}", f.map_or("*".into(), show), t.map_or("*".into(), show))
                            });
                            b.insert("key".into(), json!(key));
                            if let Some(f) = f {
                                b.insert("from".into(), json!(f));
                                if dates {
                                    b.insert("from_as_string".into(), json!(show(*f)));
                                }
                            }
                            if let Some(t) = t {
                                b.insert("to".into(), json!(t));
                                if dates {
                                    b.insert("to_as_string".into(), json!(show(*t)));
                                }
                            }
                            with_subs(b, &inside)
                        })
                        .collect();
                    json!({ "buckets": buckets })
                }
                Spec::Metric { ty, field } => {
                    let vals: Vec<f64> = docs.iter().flat_map(|r| numbers(r, field)).collect();
                    let count = if kind(field) == "keyword" {
                        docs.iter()
                            .map(|r| {
                                r.keywords
                                    .get(*field)
                                    .map_or(0, |k| k.iter().collect::<BTreeSet<_>>().len())
                            })
                            .sum()
                    } else {
                        vals.len()
                    };
                    let sum: f64 = vals.iter().sum();
                    let min = vals.iter().copied().reduce(f64::min);
                    let max = vals.iter().copied().reduce(f64::max);
                    let avg = (!vals.is_empty()).then(|| sum / vals.len() as f64);
                    let date = *field == "when";
                    let one = |v: Option<f64>| {
                        let mut o = json!({ "value": v });
                        if let (true, Some(x)) = (date, v) {
                            o["value_as_string"] = json!(format_iso(x as i64));
                        }
                        o
                    };
                    match *ty {
                        "stats" => {
                            let mut o = json!({"count": count, "min": min, "max": max, "avg": avg, "sum": sum});
                            if let (true, Some(a), Some(b)) = (date, min, max) {
                                o["min_as_string"] = json!(format_iso(a as i64));
                                o["max_as_string"] = json!(format_iso(b as i64));
                            }
                            o
                        }
                        "min" => one(min),
                        "max" => one(max),
                        "avg" => json!({ "value": avg }),
                        "sum" => json!({ "value": sum }),
                        _ => json!({ "value": count }),
                    }
                }
                Spec::Cardinality { field, .. } => {
                    let mut set: BTreeSet<String> = BTreeSet::new();
                    for r in docs {
                        for k in r.keywords.get(*field).into_iter().flatten() {
                            set.insert(k.clone());
                        }
                        for c in r.codes.get(*field).into_iter().flatten() {
                            set.insert(c.to_string());
                        }
                    }
                    json!({ "value": set.len() })
                }
                Spec::Filter(f) => {
                    let inside: Vec<&Row> = docs.iter().copied().filter(|r| (self.filters[*f].test)(r)).collect();
                    with_subs(Map::new(), &inside)
                }
                Spec::Filters { keyed, filters, other } => {
                    let mut named: Vec<(String, Vec<&Row>)> = filters
                        .iter()
                        .map(|f| {
                            (
                                format!("f{f}"),
                                docs.iter().copied().filter(|r| (self.filters[*f].test)(r)).collect(),
                            )
                        })
                        .collect();
                    if *keyed {
                        named.sort_by(|a, b| a.0.cmp(&b.0));
                    }
                    if *other {
                        let rest = docs
                            .iter()
                            .copied()
                            .filter(|r| !filters.iter().any(|f| (self.filters[*f].test)(r)))
                            .collect();
                        named.push(("_other_".into(), rest));
                    }
                    if *keyed {
                        let m: Map<String, Value> = named
                            .iter()
                            .map(|(k, d)| (k.clone(), with_subs(Map::new(), d)))
                            .collect();
                        json!({ "buckets": m })
                    } else {
                        let l: Vec<Value> = named.iter().map(|(_, d)| with_subs(Map::new(), d)).collect();
                        json!({ "buckets": l })
                    }
                }
                Spec::TopHits {
                    size,
                    from,
                    desc,
                    by_cat,
                    source,
                } => {
                    let cat = |r: &Row| r.keywords.get("cat").and_then(|k| k.first().cloned());
                    let mut sorted: Vec<&Row> = docs.to_vec();
                    sorted.sort_by(|a, b| {
                        let by_cat = match (by_cat, cat(a), cat(b)) {
                            (false, _, _) | (true, None, None) => std::cmp::Ordering::Equal,
                            (true, None, Some(_)) => std::cmp::Ordering::Greater,
                            (true, Some(_), None) => std::cmp::Ordering::Less,
                            (true, Some(x), Some(y)) if *desc => y.cmp(&x),
                            (true, Some(x), Some(y)) => x.cmp(&y),
                        };
                        let by_uid = if *desc { b.uid.cmp(&a.uid) } else { a.uid.cmp(&b.uid) };
                        by_cat.then(by_uid)
                    });
                    let hits: Vec<Value> = sorted
                        .iter()
                        .skip(*from)
                        .take(*size)
                        .map(|r| {
                            let sort = if *by_cat {
                                json!([cat(r), r.uid])
                            } else {
                                json!([r.uid])
                            };
                            let mut h = json!({"_id": r.id, "_score": null, "sort": sort});
                            if *source {
                                h["_source"] = json!({"uid": r.uid});
                            }
                            h
                        })
                        .collect();
                    json!({"hits": {"total": {"value": docs.len(), "relation": "eq"}, "max_score": null, "hits": hits}})
                }
            };
            m.insert(n.name.clone(), v);
        }
        Value::Object(m)
    }
}

/// A bucket key of the brute force: a code or a keyword.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum KeyOf {
    Code(u64),
    Str(String),
}

fn key_of_json(field: &str, v: &Value) -> KeyOf {
    match kind(field) {
        "keyword" => KeyOf::Str(v.as_str().unwrap().to_string()),
        "long" => KeyOf::Code(tierdex::column::long_code(v.as_i64().unwrap())),
        "double" => KeyOf::Code(tierdex::column::double_code(v.as_f64().unwrap())),
        "date" => KeyOf::Code(tierdex::column::long_code(
            tierdex::schema::value::parse_iso(v.as_str().unwrap()).unwrap(),
        )),
        _ => KeyOf::Code(v.as_bool().unwrap() as u64),
    }
}

/// Cardinality answers above their threshold are estimates: replaces both
/// sides' values by a marker when the engine's is within three standard
/// errors of the truth (exact answers must be equal).
fn relax_cardinality(nodes: &[Node], got: &mut Value, want: &mut Value) {
    let (Value::Object(g), Value::Object(w)) = (got, want) else {
        return;
    };
    for n in nodes {
        let (Some(gv), Some(wv)) = (g.get_mut(&n.name), w.get_mut(&n.name)) else {
            continue;
        };
        match &n.spec {
            Spec::Cardinality { threshold, .. } => {
                let truth = wv["value"].as_u64().unwrap();
                if truth > *threshold {
                    let est = gv["value"].as_u64().unwrap() as f64;
                    let bound = 3.0 * 1.04 / 128.0 * truth as f64 + 1.0;
                    if (est - truth as f64).abs() <= bound {
                        gv["value"] = json!("close");
                        wv["value"] = json!("close");
                    }
                }
            }
            _ if !n.subs.is_empty() => {
                let visit = |gb: &mut Value, wb: &mut Value| relax_cardinality(&n.subs, gb, wb);
                relax_buckets(gv, wv, visit);
            }
            _ => {}
        }
    }
}

fn relax_buckets(g: &mut Value, w: &mut Value, mut f: impl FnMut(&mut Value, &mut Value)) {
    match (g.get_mut("buckets"), w.get_mut("buckets")) {
        (Some(Value::Array(a)), Some(Value::Array(b))) => a.iter_mut().zip(b.iter_mut()).for_each(|(x, y)| f(x, y)),
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            for (k, x) in a.iter_mut() {
                if let Some(y) = b.get_mut(k) {
                    f(x, y);
                }
            }
        }
        _ => f(g, w),
    }
}

fn cases() -> usize {
    std::env::var("TIERDEX_AGGS_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300)
}

/// Checks `cases` random queries with random aggregation trees.
fn check(s: &Searcher, rows: &[Row], rng: &mut Rng, cases: usize, context: &str) {
    let schema = s.schema().clone();
    let limits = QueryLimits::default();
    for case in 0..cases {
        let mut gen = Gen { filters: Vec::new() };
        let word = rng.chance(0.5).then(|| rng.pick(&WORDS).to_string());
        let f = filter(rng);
        let mut must = vec![];
        if let Some(w) = &word {
            must.push(json!({"match": {"body": w}}));
        }
        let qjson = json!({"bool": {"must": must, "filter": [f.json]}});
        let query = tierdex::query::dsl::query(&schema, &limits, &qjson).unwrap();
        let matching: Vec<&Row> = rows
            .iter()
            .filter(|r| word.as_ref().is_none_or(|w| r.words.contains(w)) && (f.test)(r))
            .collect();
        let k = rng.range(1, 3);
        let nodes = gen.tree(rng, 1, k);
        let req = gen.request(&nodes);
        let aggs =
            Aggregations::parse(&schema, &limits, &req).unwrap_or_else(|e| panic!("{context} case {case}: {req}: {e}"));
        let mut sreq = SearchRequest::new(&query, rng.range(0, 5));
        sreq.aggs = Some(&aggs);
        if rng.chance(0.3) {
            sreq.mode = Mode::Count;
        }
        let r = s
            .search_request(&sreq)
            .unwrap_or_else(|e| panic!("{context} case {case}: {req}: {e}"));
        let what = format!("{context} case {case}: query {qjson}, aggs {req}");
        assert_eq!(r.count, Some(matching.len() as u64), "{what}");
        let mut got = r.aggregations.clone().unwrap();
        let mut want = gen.expect(&nodes, &matching);
        relax_cardinality(&nodes, &mut got, &mut want);
        if got != want {
            panic!(
                "{what}\n got: {}\nwant: {}",
                serde_json::to_string_pretty(&got).unwrap(),
                serde_json::to_string_pretty(&want).unwrap()
            );
        }
        // The partials merged in other orders and groupings, and after a
        // JSON round trip, give the same answer.
        if case % 3 == 0 {
            let parts = s.aggregate_parts(&query, &aggs).unwrap();
            let fin = |p: &AggsPartial| finalize(&aggs, p).unwrap();
            let expected = r.aggregations.clone().unwrap();
            let mut rev = AggsPartial::empty(&aggs);
            for p in parts.iter().rev() {
                rev.merge(p.clone());
            }
            assert_eq!(fin(&rev), expected, "{what}: reversed merge");
            let mut level: Vec<AggsPartial> = parts
                .iter()
                .map(|p| serde_json::from_str(&serde_json::to_string(p).unwrap()).unwrap())
                .collect();
            assert_eq!(&level, &parts, "{what}: serde round trip");
            while level.len() > 1 {
                let mut next = Vec::new();
                let mut it = level.into_iter();
                while let Some(a) = it.next() {
                    match it.next() {
                        Some(mut b) => {
                            b.merge(a);
                            next.push(b);
                        }
                        None => next.push(a),
                    }
                }
                level = next;
            }
            let tree = level.pop().unwrap_or_else(|| AggsPartial::empty(&aggs));
            let mut tree_full = AggsPartial::empty(&aggs);
            tree_full.merge(tree);
            assert_eq!(fin(&tree_full), expected, "{what}: pairwise merge");
        }
    }
}

#[test]
fn aggregations_match_a_scan_through_maintenance() {
    let strategies = [Strategy::InPlace, Strategy::NoMerge, Strategy::Geometric];
    let per = cases() / strategies.len() / 4;
    for (si, strategy) in strategies.into_iter().enumerate() {
        let mut rng = Rng::new(0x0a66 + si as u64);
        let schema = mapping();
        let dir = tempfile::tempdir().unwrap();
        let options = WriterOptions {
            buffer_docs: 13,
            ..Default::default()
        };
        let w = IndexWriter::create_with_schema(
            dir.path(),
            schema.clone(),
            Default::default(),
            Default::default(),
            strategy,
            options,
        )
        .unwrap();
        let mut live: HashMap<String, Document> = HashMap::new();
        let mut uid = 0i64;
        let (mut segments, mut parts, mut deleted) = (0, 0, false);
        for round in 0..4 {
            let batch: Vec<Document> = (0..rng.range(20, 70))
                .map(|_| {
                    uid += 1;
                    let id = rng.range(0, 120);
                    doc(&mut rng, id, uid)
                })
                .collect();
            for d in &batch {
                live.insert(d.id.clone(), d.clone());
            }
            w.add(batch).unwrap();
            let victims: Vec<String> = live.keys().filter(|_| rng.chance(0.1)).cloned().collect();
            for v in &victims {
                live.remove(v);
            }
            w.delete(victims).unwrap();
            if round > 0 {
                w.flush().unwrap();
            }
            w.refresh().unwrap();
            let rows: Vec<Row> = live.values().map(|d| row(&schema, d)).collect();
            let searcher = w.searcher();
            let index = searcher.index();
            segments = segments.max(index.segments().len());
            parts = parts.max(index.segments().iter().map(|s| s.parts().len()).max().unwrap_or(0));
            deleted |= (0..index.segments().len()).any(|i| index.deletes(i).is_some_and(|d| !d.bits().is_empty()));
            check(&searcher, &rows, &mut rng, per, &format!("{strategy} round {round}"));
        }
        // What the cases ran over: several segments (merged into one by the
        // geometric policy), chained parts where updates go in place, deletes.
        if strategy != Strategy::Geometric {
            assert!(segments > 1 || parts > 1, "{strategy}: one segment of one part");
        }
        assert!(deleted, "{strategy}: no deletes");
        if strategy == Strategy::InPlace {
            assert!(parts > 1, "in-place: no chained segment of several parts");
        }
        eprintln!("{strategy}: up to {segments} segments, {parts} parts in one");
    }
}

#[test]
fn top_hits_by_score_are_the_query_hits_and_cardinality_switches_to_a_sketch() {
    let schema = mapping();
    let mut rng = Rng::new(0x0a67);
    let docs: Vec<Document> = (0..3000).map(|i| doc(&mut rng, i, i as i64 * 7)).collect();
    let dir = tempfile::tempdir().unwrap();
    let opts = tierdex::indexing::IndexOptions {
        schema: schema.clone(),
        segment_docs: 700,
        ..Default::default()
    };
    tierdex::indexing::build_index(docs.into_iter().map(Ok), dir.path(), &opts).unwrap();
    let s = Searcher::open(dir.path()).unwrap();
    let limits = QueryLimits::default();
    let query = tierdex::query::dsl::query(&schema, &limits, &json!({"match": {"body": "plum"}})).unwrap();
    let aggs = Aggregations::parse(
        &schema,
        &limits,
        &json!({
            "top": {"top_hits": {"size": 5, "_source": false}},
            "approx": {"cardinality": {"field": "uid", "precision_threshold": 100}},
            "exact": {"cardinality": {"field": "uid", "precision_threshold": 40000}}
        }),
    )
    .unwrap();
    let mut req = SearchRequest::new(&query, 5);
    req.aggs = Some(&aggs);
    let r = s.search_request(&req).unwrap();
    let plain = s.search_request(&SearchRequest::new(&query, 5)).unwrap();
    assert_eq!(r.hits, plain.hits, "hits with aggregations are the hits without");
    assert_eq!(r.count, plain.count);
    let a = r.aggregations.unwrap();
    let ids: Vec<Value> = plain.hits.iter().map(|h| json!(s.doc_id(h.doc).unwrap())).collect();
    let got: Vec<Value> = a["top"]["hits"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["_id"].clone())
        .collect();
    assert_eq!(got, ids);
    let scores: Vec<f64> = a["top"]["hits"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["_score"].as_f64().unwrap())
        .collect();
    let want: Vec<f64> = plain.hits.iter().map(|h| h.score as f64).collect();
    assert_eq!(scores, want);
    let n = plain.count.unwrap();
    assert_eq!(a["exact"]["value"], json!(n));
    assert_eq!(a["top"]["hits"]["total"]["value"], json!(n));
    let est = a["approx"]["value"].as_u64().unwrap() as f64;
    assert!(
        (est - n as f64).abs() <= 3.0 * 1.04 / 128.0 * n as f64 + 1.0,
        "{est} vs {n}"
    );
    // Size 0 in count mode still aggregates, without hits.
    let mut req = SearchRequest::new(&query, 0);
    req.mode = Mode::Count;
    req.aggs = Some(&aggs);
    let r = s.search_request(&req).unwrap();
    assert!(r.hits.is_empty());
    assert_eq!(r.aggregations.unwrap()["exact"]["value"], json!(n));
}
