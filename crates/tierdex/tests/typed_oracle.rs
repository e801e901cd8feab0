//! Typed queries, sorts and pages against a brute-force scan (issue #21):
//! random corpora with keyword, long, double, date and boolean fields
//! (multi-valued and missing values included) are indexed with varied
//! options, searched on every tier and through maintenance, and every
//! answer is compared with what a scan of the documents gives:
//!
//! * filters (terms, ranges, existence, match-all, exclusions) with and
//!   without text: the same count, and for sorted queries the same ids in
//!   the same order; for score-ordered queries with a filter, the hits of
//!   the same text query without it, filtered by the scan, in order;
//! * `from`/`size` pages and `search_after` chains walk the same order.
//!
//! Sorts end with a unique field, so the order never depends on document
//! numbers. `TIERDEX_TYPED_CASES` sets the number of queries (default 3,000).

mod support;

use std::collections::HashMap;
use std::ops::Bound;

use serde_json::{json, Value};
use support::gen::Rng;
use tierdex::indexing::{build_index, IndexOptions};
use tierdex::query::ast::{Clause, Occur, Query};
use tierdex::schema::value::{convert, values_at, Indexed};
use tierdex::schema::{Field, Schema};
use tierdex::search::{Mode, SearchRequest, SearchResults, Searcher, SortBy, SortField, SortValue};
use tierdex::storage::{Tier, TierOptions};
use tierdex::update::{IndexWriter, Strategy, WriterOptions};
use tierdex::Document;

const WORDS: [&str; 6] = ["apple", "pear", "plum", "fig", "kiwi", "lime"];
const TAGS: [&str; 5] = ["red", "Green", "blue", "green", "black"];

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
    let mut body: Vec<&str> = (0..rng.range(0, 6)).map(|_| *rng.pick(&WORDS)).collect();
    // A rare word: filters far broader than it confirm its few candidates
    // from doc values (the two-phase path).
    if rng.chance(0.04) {
        body.push("quince");
    }
    let mut v = json!({"id": format!("d{id}"), "uid": uid, "body": body.join(" ")});
    let tags: Vec<&str> = (0..rng.range(0, 3)).map(|_| *rng.pick(&TAGS)).collect();
    let n = rng.range(0, 40) as i64 - 20;
    let values: Vec<(&str, Value)> = vec![
        ("tags", json!(tags)),
        ("cat", json!(*rng.pick(&["Books", "music", "MUSIC", "games", "zz"]))),
        (
            "n",
            if rng.chance(0.25) {
                json!([n, n + rng.range(0, 9) as i64])
            } else {
                json!(n)
            },
        ),
        ("x", json!((rng.range(0, 2000) as f64 - 1000.0) / 8.0)),
        (
            "when",
            json!(format!(
                "201{}-0{}-1{}",
                rng.range(0, 9),
                rng.range(1, 9),
                rng.range(0, 9)
            )),
        ),
        ("ok", json!(rng.chance(0.5))),
    ];
    for (key, value) in values {
        if rng.chance(0.75) {
            v[key] = value;
        }
    }
    serde_json::from_value(v).unwrap()
}

/// A document's values per field, as the engine converts them.
struct Row {
    id: String,
    words: Vec<String>,
    codes: HashMap<Field, Vec<u64>>,
    keywords: HashMap<Field, Vec<String>>,
}

fn row(schema: &Schema, d: &Document) -> Row {
    let mut r = Row {
        id: d.id.clone(),
        words: d.text("body").split_whitespace().map(str::to_string).collect(),
        codes: HashMap::new(),
        keywords: HashMap::new(),
    };
    for f in schema.fields() {
        let e = schema.entry(f).unwrap();
        values_at(&d.fields, e.path(), &mut |v| match convert(e, v).unwrap() {
            Indexed::Code(c) => r.codes.entry(f).or_default().push(c),
            Indexed::Keyword(k) => r.keywords.entry(f).or_default().push(k.into_owned()),
            _ => {}
        });
    }
    r
}

/// A filter and its brute-force predicate.
struct Filter {
    query: Query,
    test: Box<dyn Fn(&Row) -> bool>,
}

fn filter(rng: &mut Rng, schema: &Schema) -> Filter {
    let f = |n: &str| schema.field(n).unwrap();
    match rng.range(0, 7) {
        0 => {
            let (field, v) = (f("tags"), rng.pick(&TAGS).to_string());
            let w = v.clone();
            Filter {
                query: Query::Term {
                    field: Some(field),
                    text: v,
                },
                test: Box::new(move |r| r.keywords.get(&field).is_some_and(|k| k.contains(&w))),
            }
        }
        1 => {
            let field = f("cat");
            let vals: Vec<String> = (0..rng.range(1, 3))
                .map(|_| rng.pick(&["BOOKS", "music", "none", "Zz"]).to_string())
                .collect();
            let low: Vec<String> = vals.iter().map(|v| v.to_lowercase()).collect();
            Filter {
                query: Query::Terms { field, values: vals },
                test: Box::new(move |r| {
                    r.keywords
                        .get(&field)
                        .is_some_and(|k| k.iter().any(|x| low.contains(x)))
                }),
            }
        }
        2 => {
            // A range on a number, date or keyword, with any kind of bound.
            let (name, lo, hi): (&str, String, String) = match rng.range(0, 3) {
                0 => (
                    "n",
                    format!("{}", rng.range(0, 40) as i64 - 22),
                    format!("{}", rng.range(0, 40) as i64 - 18),
                ),
                1 => (
                    "x",
                    format!("{}", rng.range(0, 2000) as f64 / 8.0 - 130.0),
                    format!("{}", rng.range(0, 2000) as f64 / 8.0 - 100.0),
                ),
                _ => (
                    "when",
                    format!("201{}-05-01", rng.range(0, 9)),
                    format!("201{}-03-15T12:00:00Z", rng.range(0, 9)),
                ),
            };
            let field = f(name);
            let bound = |rng: &mut Rng, v: String| match rng.range(0, 3) {
                0 => Bound::Included(v),
                1 => Bound::Excluded(v),
                _ => Bound::Unbounded,
            };
            let (lower, upper) = (bound(rng, lo), bound(rng, hi));
            let entry = schema.entry(field).unwrap().clone();
            let code = |s: &String| match convert(&entry, &Value::String(s.clone())).unwrap() {
                Indexed::Code(c) => c,
                _ => unreachable!(),
            };
            let (l, u) = (lower.as_ref().map(code), upper.as_ref().map(code));
            Filter {
                query: Query::Range { field, lower, upper },
                test: Box::new(move |r| {
                    r.codes.get(&field).is_some_and(|cs| {
                        cs.iter().any(|&c| {
                            (match l {
                                Bound::Included(x) => c >= x,
                                Bound::Excluded(x) => c > x,
                                Bound::Unbounded => true,
                            }) && (match u {
                                Bound::Included(x) => c <= x,
                                Bound::Excluded(x) => c < x,
                                Bound::Unbounded => true,
                            })
                        })
                    })
                }),
            }
        }
        3 => {
            let field = f("cat");
            let lo = rng.pick(&["a", "books", "c", "music"]).to_string();
            let hi = rng.pick(&["games", "music", "z", "zz"]).to_string();
            let (l2, h2) = (lo.clone(), hi.clone());
            Filter {
                query: Query::Range {
                    field,
                    lower: Bound::Included(lo),
                    upper: Bound::Excluded(hi),
                },
                test: Box::new(move |r| {
                    r.keywords
                        .get(&field)
                        .is_some_and(|k| k.iter().any(|x| *x >= l2 && *x < h2))
                }),
            }
        }
        4 => {
            let name = *rng.pick(&["tags", "n", "x", "when", "ok", "cat", "body"]);
            let field = f(name);
            Filter {
                query: Query::Exists { field },
                test: Box::new(move |r| {
                    if name == "body" {
                        !r.words.is_empty()
                    } else {
                        r.codes.get(&field).is_some_and(|v| !v.is_empty())
                            || r.keywords.get(&field).is_some_and(|v| !v.is_empty())
                    }
                }),
            }
        }
        5 => {
            let field = f("ok");
            let b = rng.chance(0.5);
            Filter {
                query: Query::Term {
                    field: Some(field),
                    text: b.to_string(),
                },
                test: Box::new(move |r| r.codes.get(&field).is_some_and(|c| c.contains(&(b as u64)))),
            }
        }
        _ => Filter {
            query: Query::MatchAll,
            test: Box::new(|_| true),
        },
    }
}

/// A sort ending with the unique `uid`, and its brute-force key.
fn sort(rng: &mut Rng, schema: &Schema) -> Vec<SortField> {
    let mut out = Vec::new();
    for _ in 0..rng.range(0, 2) {
        let name = *rng.pick(&["tags", "cat", "n", "x", "when", "ok"]);
        let mut s = if rng.chance(0.5) {
            SortField::asc(SortBy::Field(schema.field(name).unwrap()))
        } else {
            SortField::desc(SortBy::Field(schema.field(name).unwrap()))
        };
        s.missing_first = rng.chance(0.3);
        if rng.chance(0.2) {
            s.max = !s.max;
        }
        out.push(s);
    }
    let uid = SortBy::Field(schema.field("uid").unwrap());
    out.push(if rng.chance(0.5) {
        SortField::asc(uid)
    } else {
        SortField::desc(uid)
    });
    out
}

fn cmp_rows(a: &Row, b: &Row, spec: &[SortField]) -> std::cmp::Ordering {
    use std::cmp::Ordering::*;
    for f in spec {
        let SortBy::Field(field) = f.by else { unreachable!() };
        let pick = |r: &Row| -> Option<Value> {
            if let Some(k) = r.keywords.get(&field).filter(|k| !k.is_empty()) {
                let v = if f.max { k.iter().max() } else { k.iter().min() };
                return v.map(|s| Value::String(s.clone()));
            }
            let c = r.codes.get(&field).filter(|c| !c.is_empty())?;
            let v = if f.max { c.iter().max() } else { c.iter().min() };
            v.map(|&c| json!(c))
        };
        let o = match (pick(a), pick(b)) {
            (None, None) => Equal,
            (None, _) => return if f.missing_first { Less } else { Greater },
            (_, None) => return if f.missing_first { Greater } else { Less },
            (Some(Value::String(x)), Some(Value::String(y))) => x.cmp(&y),
            (Some(x), Some(y)) => x.as_u64().unwrap().cmp(&y.as_u64().unwrap()),
        };
        let o = if f.descending { o.reverse() } else { o };
        if o != Equal {
            return o;
        }
    }
    Equal
}

fn ids(s: &Searcher, r: &SearchResults) -> Vec<String> {
    r.hits.iter().map(|h| s.doc_id(h.doc).unwrap()).collect()
}

/// Checks `cases` random queries on `s` against `rows`.
fn check(s: &Searcher, rows: &[Row], rng: &mut Rng, cases: usize, context: &str) {
    let schema = s.index().schema().clone();
    for case in 0..cases {
        let filters: Vec<Filter> = (0..rng.range(1, 3)).map(|_| filter(rng, &schema)).collect();
        let exclude = rng.chance(0.2).then(|| filter(rng, &schema));
        let word = match rng.range(0, 3) {
            0 => None,
            1 => Some("quince".to_string()),
            _ => Some(rng.pick(&WORDS).to_string()),
        };
        let mut clauses: Vec<Clause> = filters
            .iter()
            .map(|f| Clause {
                occur: if rng.chance(0.5) { Occur::Filter } else { Occur::Must },
                query: f.query.clone(),
            })
            .collect();
        if let Some(w) = &word {
            clauses.push(Clause {
                occur: Occur::Must,
                query: Query::Term {
                    field: None,
                    text: w.clone(),
                },
            });
        }
        if let Some(x) = &exclude {
            clauses.push(Clause {
                occur: Occur::MustNot,
                query: x.query.clone(),
            });
        }
        let query = Query::Boolean(clauses);
        let matches = |r: &Row| {
            filters.iter().all(|f| (f.test)(r))
                && word.as_ref().is_none_or(|w| r.words.contains(w))
                && exclude.as_ref().is_none_or(|x| !(x.test)(r))
        };
        let mut want: Vec<&Row> = rows.iter().filter(|r| matches(r)).collect();
        let ctx = format!("{context}, case {case}: {query:?}");
        // Sorted by fields, in pages by from/size and by search_after.
        let spec = sort(rng, &schema);
        want.sort_by(|a, b| cmp_rows(a, b, &spec));
        let want_ids: Vec<String> = want.iter().map(|r| r.id.clone()).collect();
        let size = rng.range(1, 7);
        let from = rng.range(0, 5);
        let mut req = SearchRequest::new(&query, size);
        req.from = from;
        req.sort = spec.clone();
        let r = s.search_request(&req).unwrap_or_else(|e| panic!("{ctx}: {e}"));
        assert_eq!(r.count, Some(want.len() as u64), "{ctx}: count");
        let page: Vec<String> = want_ids.iter().skip(from).take(size).cloned().collect();
        assert_eq!(ids(s, &r), page, "{ctx}: page from {from} size {size}, sort {spec:?}");
        // The hits' sort values compare as the engine ordered them (what a
        // merge of several indices' pages relies on).
        let values = r.sort.as_ref().expect("sorted");
        for w in values.windows(2) {
            let ord = spec
                .iter()
                .enumerate()
                .map(|(i, f)| f.cmp_values(&w[0][i], &w[1][i]))
                .find(|o| o.is_ne())
                .unwrap_or(std::cmp::Ordering::Equal);
            assert_ne!(
                ord,
                std::cmp::Ordering::Greater,
                "{ctx}: {:?} before {:?}, sort {spec:?}",
                w[0],
                w[1]
            );
        }
        let mut after: Option<Vec<SortValue>> = None;
        let mut walked = Vec::new();
        for _ in 0..(want.len() / size + 2).min(12) {
            let mut req = SearchRequest::new(&query, size);
            req.mode = Mode::TopK;
            req.sort = spec.clone();
            req.search_after = after.clone();
            let r = s.search_request(&req).unwrap_or_else(|e| panic!("{ctx}: {e}"));
            walked.extend(ids(s, &r));
            match r.sort.as_ref().and_then(|v| v.last()) {
                // Sometimes without the trailing document number: the sort
                // ends with a unique field, so it is not needed.
                Some(v) => {
                    after = Some(if rng.chance(0.5) {
                        v[..v.len() - 1].to_vec()
                    } else {
                        v.clone()
                    })
                }
                None => break,
            }
        }
        let n = walked.len();
        assert_eq!(
            walked,
            want_ids[..n.min(want_ids.len())].to_vec(),
            "{ctx}: search_after chain, sort {spec:?}"
        );
        assert!(n >= want_ids.len().min(12 * size), "{ctx}: chain stopped early");
        // A trailing -1 instead of the document number: the hit itself
        // (every document with its values) comes after.
        if !want.is_empty() {
            let at = rng.range(0, want.len() - 1);
            let mut req = SearchRequest::new(&query, at + 1);
            req.mode = Mode::TopK;
            req.sort = spec.clone();
            let r = s.search_request(&req).unwrap_or_else(|e| panic!("{ctx}: {e}"));
            let mut v = r.sort.as_ref().expect("sorted")[at].clone();
            *v.last_mut().expect("the document number") = SortValue::Long(-1);
            let mut req = SearchRequest::new(&query, size);
            req.mode = Mode::TopK;
            req.sort = spec.clone();
            req.search_after = Some(v);
            let r = s.search_request(&req).unwrap_or_else(|e| panic!("{ctx}: {e}"));
            let tail: Vec<String> = want_ids.iter().skip(at).take(size).cloned().collect();
            assert_eq!(ids(s, &r), tail, "{ctx}: search_after with -1 at {at}, sort {spec:?}");
        }
        // Ordered by score without a text query: every match scores the
        // same, and a top-k without a count (which stops once its hits
        // cannot be beaten) is the head of the whole ranked list.
        if word.is_none() {
            let all = s.search_parsed(&query, Mode::TopKAndCount, 10_000).unwrap();
            let mut got_set = ids(s, &all);
            got_set.sort();
            let mut want_set = want_ids.clone();
            want_set.sort();
            assert_eq!(got_set, want_set, "{ctx}: constant-score matches");
            if let Some(first) = all.hits.first() {
                assert!(
                    all.hits.iter().all(|h| h.score == first.score),
                    "{ctx}: constant scores"
                );
            }
            let k = rng.range(1, 10);
            let top = s.search_parsed(&query, Mode::TopK, k).unwrap();
            let head: Vec<String> = ids(s, &all).into_iter().take(k).collect();
            assert_eq!(ids(s, &top), head, "{ctx}: constant-score top {k}");
        }
        // Ordered by score: the text query's own hits, filtered.
        if let Some(w) = &word {
            let text = Query::Term {
                field: None,
                text: w.clone(),
            };
            let all = s.search_parsed(&text, Mode::TopK, 10_000).unwrap();
            let by_id: HashMap<&str, &Row> = rows.iter().map(|r| (r.id.as_str(), r)).collect();
            let filtered: Vec<String> = ids(s, &all)
                .into_iter()
                .filter(|id| matches(by_id[id.as_str()]))
                .collect();
            let k = rng.range(1, 10);
            let got = s.search_parsed(&query, Mode::TopKAndCount, k).unwrap();
            assert_eq!(got.count, Some(filtered.len() as u64), "{ctx}: scored count");
            let scored_ids = ids(s, &got);
            // Equal scores may order either way only if their documents
            // tie; compare as (score, id) lists.
            assert_eq!(
                scored_ids,
                filtered[..k.min(filtered.len())].to_vec(),
                "{ctx}: scored top {k}"
            );
            let pruned = s.search_parsed(&query, Mode::TopK, k).unwrap();
            assert_eq!(ids(s, &pruned), scored_ids, "{ctx}: scored top {k} without a count");
        }
    }
}

fn cases() -> usize {
    std::env::var("TIERDEX_TYPED_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000)
}

fn tier(n: u64) -> TierOptions {
    let mut t = TierOptions::on([Tier::Ram, Tier::Mmap, Tier::Buffered, Tier::Direct][n as usize % 4]);
    t.pool_bytes = 64 << 10;
    t
}

#[test]
fn typed_queries_sorts_and_pages_match_a_scan() {
    let corpora = 12u64;
    let per = cases() / corpora as usize / 2;
    for c in 0..corpora {
        let mut rng = Rng::new(0x0_1d0c + c);
        let schema = mapping();
        let docs: Vec<Document> = (0..rng.range(0, 150))
            .map(|i| doc(&mut rng, i, i as i64 * 3 - 100))
            .collect();
        let rows: Vec<Row> = docs.iter().map(|d| row(&schema, d)).collect();
        let dir = tempfile::tempdir().unwrap();
        let opts = IndexOptions {
            schema: schema.clone(),
            segment_docs: [4, 17, 1000][c as usize % 3],
            merge: c % 2 == 0,
            // A merged corpus in two has its documents reordered.
            reorder: (c % 4 == 2).then_some(tierdex::indexing::reorder::BpParams {
                min_doc_freq: 2,
                min_partition: 2,
                ..Default::default()
            }),
            ..Default::default()
        };
        if docs.is_empty() {
            continue;
        }
        build_index(docs.into_iter().map(Ok), dir.path(), &opts).unwrap();
        let open = tierdex::index::OpenOptions {
            tier: tier(c),
            ..Default::default()
        };
        let s = Searcher::open_with(dir.path(), open).unwrap();
        check(&s, &rows, &mut rng, per, &format!("corpus {c} ({:?})", open.tier.tier));
    }
}

#[test]
fn typed_queries_match_a_scan_through_maintenance() {
    let strategies = [
        Strategy::Geometric,
        Strategy::InPlace,
        Strategy::NoMerge,
        Strategy::ImmediateMerge,
    ];
    let per = cases() / strategies.len() / 6 / 2;
    for (si, strategy) in strategies.into_iter().enumerate() {
        let mut rng = Rng::new(0x0_2d0c + si as u64);
        let schema = mapping();
        let dir = tempfile::tempdir().unwrap();
        let options = WriterOptions {
            buffer_docs: 11,
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
        for round in 0..6 {
            let batch: Vec<Document> = (0..rng.range(5, 40))
                .map(|_| {
                    uid += 1;
                    let id = rng.range(0, 80);
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
            match round % 3 {
                0 => {}
                1 => {
                    w.flush().unwrap();
                }
                _ => {
                    w.compact().unwrap();
                }
            }
            w.refresh().unwrap();
            let rows: Vec<Row> = live.values().map(|d| row(&schema, d)).collect();
            check(
                &w.searcher(),
                &rows,
                &mut rng,
                per,
                &format!("{strategy} round {round}"),
            );
        }
    }
}

#[test]
fn typed_queries_in_the_query_language() {
    let schema = mapping();
    let mut rng = Rng::new(0x0_3d0c);
    let docs: Vec<Document> = (0..200).map(|i| doc(&mut rng, i, i as i64)).collect();
    let rows: Vec<Row> = docs.iter().map(|d| row(&schema, d)).collect();
    let dir = tempfile::tempdir().unwrap();
    let opts = IndexOptions {
        schema: schema.clone(),
        ..Default::default()
    };
    build_index(docs.into_iter().map(Ok), dir.path(), &opts).unwrap();
    let s = Searcher::open(dir.path()).unwrap();
    let count = |q: &str| {
        s.search(q, Mode::Count, 0)
            .unwrap_or_else(|e| panic!("{q}: {e}"))
            .count
            .unwrap()
    };
    let scan = |p: &dyn Fn(&Row) -> bool| rows.iter().filter(|r| p(r)).count() as u64;
    let f = |n: &str| schema.field(n).unwrap();
    let (n, tags, cat, ok) = (f("n"), f("tags"), f("cat"), f("ok"));
    let codes = |r: &Row, fd: Field| r.codes.get(&fd).cloned().unwrap_or_default();
    let lc = tierdex::column::long_code;
    assert_eq!(count("*:*"), 200);
    assert_eq!(
        count("n:[-5 TO 5]"),
        scan(&|r| codes(r, n).iter().any(|&c| c >= lc(-5) && c <= lc(5)))
    );
    assert_eq!(
        count("n:{-5 TO 5}"),
        scan(&|r| codes(r, n).iter().any(|&c| c > lc(-5) && c < lc(5)))
    );
    assert_eq!(count("n:[* TO 0}"), scan(&|r| codes(r, n).iter().any(|&c| c < lc(0))));
    assert_eq!(count("n:>=3"), scan(&|r| codes(r, n).iter().any(|&c| c >= lc(3))));
    assert_eq!(count("n:<-3"), scan(&|r| codes(r, n).iter().any(|&c| c < lc(-3))));
    assert_eq!(
        count("n:>2.5"),
        count("n:>=3"),
        "fractional bounds of longs round inward"
    );
    assert_eq!(count("_exists_:tags"), scan(&|r| r.keywords.contains_key(&tags)));
    assert_eq!(
        count("tags:Green"),
        scan(&|r| r.keywords.get(&tags).is_some_and(|k| k.iter().any(|x| x == "Green")))
    );
    assert_eq!(
        count("cat:MUSIC"),
        scan(&|r| r.keywords.get(&cat).is_some_and(|k| k.iter().any(|x| x == "music")))
    );
    assert_eq!(
        count("cat:[books TO games]"),
        scan(&|r| r
            .keywords
            .get(&cat)
            .is_some_and(|k| k.iter().any(|x| x.as_str() >= "books" && x.as_str() <= "games")))
    );
    assert_eq!(
        count("+ok:true -tags:red"),
        scan(&|r| codes(r, ok).contains(&1) && !r.keywords.get(&tags).is_some_and(|k| k.iter().any(|x| x == "red")))
    );
    assert_eq!(count("when:[2012-01-01 TO 2014-01-01}"), {
        let w = f("when");
        let (a, b) = (lc(1_325_376_000_000), lc(1_388_534_400_000));
        scan(&|r| codes(r, w).iter().any(|&c| c >= a && c < b))
    });
    for (bad, says) in [
        ("n:[1 TO 5", "unclosed range"),
        ("n:[1 TO", "after `TO`"),
        ("n:[1 2]", "expected `TO`"),
        ("n:abc", "`abc` is not a number"),
        ("body:[a TO b]", "text field"),
        ("_exists_:nope", "unknown field"),
        ("n:>", "must be followed by a value"),
        ("when:[yesterday TO *]", "not a date"),
    ] {
        let e = s.search(bad, Mode::Count, 0).unwrap_err().to_string();
        assert!(e.contains(says), "{bad}: {e}");
    }
    // Sorting on text, or beyond the window, is refused clearly.
    let q = Query::MatchAll;
    let mut req = SearchRequest::new(&q, 10);
    req.sort = vec![SortField::asc(SortBy::Field(f("body")))];
    assert!(s.search_request(&req).unwrap_err().to_string().contains("text field"));
    let mut req = SearchRequest::new(&q, 10);
    req.from = 9_995;
    assert!(s.search_request(&req).unwrap_err().to_string().contains("search_after"));
}

/// Sorted top-k without a count of queries matching many documents: the
/// points, walked a chunk at a time in value order, lead the query (only
/// each chunk's documents are tested). The hits' sort values must equal a
/// scan's, every hit must match, and the hits must be the counted
/// search's (another path), ties in the same order; with deletes, several
/// segments and multi-valued and missing values.
#[test]
fn led_point_walks_match_a_scan() {
    for c in 0..4u64 {
        let mut rng = Rng::new(0x0_3d0c + c);
        let schema = mapping();
        let docs: Vec<Document> = (0..3000).map(|i| doc(&mut rng, i, (i as i64 * 7919) % 3001)).collect();
        let share = if c >= 2 { 0.2 } else { 0.0 };
        let (dir, live) = index_with_deletes(&docs, &schema, [700, 5000][c as usize % 2], share, &mut rng);
        let rows: Vec<Row> = live.values().map(|d| row(&schema, d)).collect();
        let by_id: HashMap<&str, &Row> = rows.iter().map(|r| (r.id.as_str(), r)).collect();
        let open = tierdex::index::OpenOptions {
            tier: tier(c),
            ..Default::default()
        };
        let s = Searcher::open_with(dir.path(), open).unwrap();
        for case in 0..120 {
            // Without words, a filter alone (a range on the sort field
            // included: its points are the matches).
            let words: Vec<String> = (0..rng.range(0, 3)).map(|_| rng.pick(&WORDS).to_string()).collect();
            let extra = (words.is_empty() || rng.chance(0.3)).then(|| filter(&mut rng, &schema));
            let mut clauses: Vec<Clause> = words
                .iter()
                .map(|w| Clause {
                    occur: Occur::Must,
                    query: Query::Term {
                        field: None,
                        text: w.clone(),
                    },
                })
                .collect();
            if let Some(f) = &extra {
                clauses.push(Clause {
                    occur: Occur::Filter,
                    query: f.query.clone(),
                });
            }
            let query = Query::Boolean(clauses);
            let matches =
                |r: &Row| words.iter().all(|w| r.words.contains(w)) && extra.as_ref().is_none_or(|f| (f.test)(r));
            let name = *rng.pick(&["uid", "n", "x", "when", "tags", "cat", "ok"]);
            let field = match extra.as_ref().map(|f| &f.query) {
                Some(Query::Range { field, .. }) if rng.chance(0.6) => SortBy::Field(*field),
                _ => SortBy::Field(schema.field(name).unwrap()),
            };
            // Ascending by the smallest value or descending by the largest:
            // the shape the points are walked for.
            let spec = vec![if rng.chance(0.5) {
                SortField::asc(field)
            } else {
                let mut f = SortField::desc(field);
                f.max = true;
                f
            }];
            let mut want: Vec<&Row> = rows.iter().filter(|r| matches(r)).collect();
            want.sort_by(|a, b| cmp_rows(a, b, &spec));
            let size = rng.range(1, 30);
            let ctx = format!("corpus {c}, case {case}: {query:?} sorted {spec:?}, size {size}");
            let mut req = SearchRequest::new(&query, size);
            req.sort = spec.clone();
            req.mode = Mode::TopK;
            let led = s.search_request(&req).unwrap_or_else(|e| panic!("{ctx}: {e}"));
            req.mode = Mode::TopKAndCount;
            let counted = s.search_request(&req).unwrap_or_else(|e| panic!("{ctx}: {e}"));
            assert_eq!(counted.count, Some(want.len() as u64), "{ctx}: count");
            let got = ids(&s, &led);
            assert_eq!(got, ids(&s, &counted), "{ctx}: the led walk against the counted search");
            assert_eq!(led.sort, counted.sort, "{ctx}: sort values");
            assert_eq!(got.len(), size.min(want.len()), "{ctx}: hits");
            for (i, id) in got.iter().enumerate() {
                let r = by_id[id.as_str()];
                assert!(matches(r), "{ctx}: {id} does not match");
                assert_eq!(
                    cmp_rows(r, want[i], &spec),
                    std::cmp::Ordering::Equal,
                    "{ctx}: hit {i} ({id}) against the scan's {}",
                    want[i].id
                );
            }
        }
    }
}

/// `ids` (issue #23): the live documents with those ids, alone (constant
/// score, any order) and as a filter beside text and a typed filter, over
/// several segments with deletes; absent and deleted ids match nothing.
#[test]
fn ids_queries_match_a_scan() {
    let mut rng = Rng::new(0x0_4d0c);
    let schema = mapping();
    let docs: Vec<Document> = (0..400).map(|i| doc(&mut rng, i, i as i64)).collect();
    let dir = tempfile::tempdir().unwrap();
    let opts = IndexOptions {
        schema: schema.clone(),
        segment_docs: 90,
        merge: false,
        ..Default::default()
    };
    build_index(docs.iter().cloned().map(Ok), dir.path(), &opts).unwrap();
    let w = IndexWriter::open(dir.path(), WriterOptions::default()).unwrap();
    let deleted: Vec<String> = (0..400).step_by(7).map(|i| format!("d{i}")).collect();
    w.delete(deleted.clone()).unwrap();
    w.flush().unwrap();
    drop(w);
    let rows: Vec<Row> = docs
        .iter()
        .filter(|d| !deleted.contains(&d.id))
        .map(|d| row(&schema, d))
        .collect();
    let s = Searcher::open(dir.path()).unwrap();
    for case in 0..200 {
        let wanted: Vec<String> = (0..rng.range(0, 12))
            .map(|_| format!("d{}", rng.range(0, 450)))
            .collect();
        let extra = rng.chance(0.4).then(|| filter(&mut rng, &schema));
        let word = rng.chance(0.4).then(|| rng.pick(&WORDS).to_string());
        let mut clauses = vec![Clause {
            occur: if extra.is_some() || word.is_some() {
                Occur::Filter
            } else {
                Occur::Must
            },
            query: Query::Ids(wanted.clone()),
        }];
        if let Some(f) = &extra {
            clauses.push(Clause {
                occur: Occur::Filter,
                query: f.query.clone(),
            });
        }
        if let Some(w) = &word {
            clauses.push(Clause {
                occur: Occur::Must,
                query: Query::Term {
                    field: None,
                    text: w.clone(),
                },
            });
        }
        let query = Query::Boolean(clauses);
        let mut want: Vec<String> = rows
            .iter()
            .filter(|r| {
                wanted.contains(&r.id)
                    && extra.as_ref().is_none_or(|f| (f.test)(r))
                    && word.as_ref().is_none_or(|w| r.words.contains(w))
            })
            .map(|r| r.id.clone())
            .collect();
        want.sort();
        let ctx = format!("case {case}: {query:?}");
        let got = s.search_parsed(&query, Mode::TopKAndCount, 1000).unwrap();
        assert_eq!(got.count, Some(want.len() as u64), "{ctx}: count");
        let mut got_ids = ids(&s, &got);
        got_ids.sort();
        assert_eq!(got_ids, want, "{ctx}: hits");
        let counted = s.search_parsed(&query, Mode::Count, 0).unwrap();
        assert_eq!(counted.count, Some(want.len() as u64), "{ctx}: count alone");
    }
}

/// `docs` indexed with `schema` in unmerged segments of `segment_docs`,
/// then each deleted with probability `share` (none drawn when 0): the
/// index's directory and the live documents by id.
fn index_with_deletes<'d>(
    docs: &'d [Document],
    schema: &Schema,
    segment_docs: usize,
    share: f64,
    rng: &mut Rng,
) -> (tempfile::TempDir, HashMap<String, &'d Document>) {
    let dir = tempfile::tempdir().unwrap();
    let opts = IndexOptions {
        schema: schema.clone(),
        segment_docs,
        merge: false,
        ..Default::default()
    };
    build_index(docs.iter().cloned().map(Ok), dir.path(), &opts).unwrap();
    let mut live: HashMap<String, &Document> = docs.iter().map(|d| (d.id.clone(), d)).collect();
    if share > 0.0 {
        let w = IndexWriter::open(dir.path(), WriterOptions::default()).unwrap();
        let victims: Vec<String> = live.keys().filter(|_| rng.chance(share)).cloned().collect();
        for v in &victims {
            live.remove(v);
        }
        w.delete(victims).unwrap();
        w.flush().unwrap();
    }
    (dir, live)
}

/// Score-ordered top-k of words (all required, or alternatives) with typed
/// filters (issue #21): the window-at-a-time disjunction and conjunction
/// take filters, bit sets ANDed into each window's candidates (or, when
/// sparse, tested at each posting before it is scored), broad ones over a
/// rare word as doc-value checks. The top-k (pruned) must equal the first hits
/// of the unfiltered query's every match filtered by the scan, ids and
/// score bits, and the counted search (the nested scorers); over several
/// segments, with deletes, on every tier.
#[test]
fn filtered_top_k_matches_the_unfiltered_ranking() {
    for c in 0..4u64 {
        let mut rng = Rng::new(0x0f17_7e4d + c);
        let schema = mapping();
        let docs: Vec<Document> = (0..3000).map(|i| doc(&mut rng, i, i as i64)).collect();
        let share = if c % 2 == 1 { 0.15 } else { 0.0 };
        let (dir, live) = index_with_deletes(&docs, &schema, [900, 5000][c as usize % 2], share, &mut rng);
        let rows: HashMap<String, Row> = live.values().map(|d| (d.id.clone(), row(&schema, d))).collect();
        let open = tierdex::index::OpenOptions {
            tier: tier(c),
            ..Default::default()
        };
        let s = Searcher::open_with(dir.path(), open).unwrap();
        let mut words: Vec<&str> = WORDS.to_vec();
        words.push("quince");
        for case in 0..200 {
            // Every fourth case, the words are alternatives (a disjunction).
            let or = case % 4 == 3;
            let n = 1 + rng.range(0, if or { 3 } else { 2 });
            let text: Vec<&str> = (0..n).map(|_| *rng.pick(&words)).collect();
            let filters: Vec<Filter> = (0..1 + rng.range(0, 2)).map(|_| filter(&mut rng, &schema)).collect();
            let word_clause = |w: &str| Clause {
                occur: if or { Occur::Should } else { Occur::Must },
                query: Query::Term {
                    field: None,
                    text: w.to_string(),
                },
            };
            let plain = Query::Boolean(text.iter().map(|w| word_clause(w)).collect());
            // Beside filters, alternatives must be one required clause (a
            // bool's should clauses are optional once it has a filter).
            let mut clauses: Vec<Clause> = match or {
                true => vec![Clause {
                    occur: Occur::Must,
                    query: plain.clone(),
                }],
                false => text.iter().map(|w| word_clause(w)).collect(),
            };
            clauses.extend(filters.iter().map(|f| Clause {
                occur: Occur::Filter,
                query: f.query.clone(),
            }));
            let query = Query::Boolean(clauses);
            let k = [1, 10, 40][case % 3];
            let ctx = format!("corpus {c}, case {case}: {query:?}, k {k}");
            let mut all = SearchRequest::new(&plain, 3000);
            all.mode = Mode::TopK;
            let all = s.search_request(&all).unwrap_or_else(|e| panic!("{ctx}: {e}"));
            let keep = |id: &String| filters.iter().all(|f| (f.test)(&rows[id]));
            let want: Vec<(String, u32)> = ids(&s, &all)
                .into_iter()
                .zip(&all.hits)
                .filter(|(id, _)| keep(id))
                .map(|(id, h)| (id, h.score.to_bits()))
                .collect();
            let mut req = SearchRequest::new(&query, k);
            for mode in [Mode::TopK, Mode::TopKAndCount] {
                req.mode = mode;
                let got = s.search_request(&req).unwrap_or_else(|e| panic!("{ctx}: {e}"));
                let got: Vec<(String, u32)> = ids(&s, &got)
                    .into_iter()
                    .zip(&got.hits)
                    .map(|(id, h)| (id, h.score.to_bits()))
                    .collect();
                assert_eq!(got, want[..k.min(want.len())], "{ctx}: {mode:?}");
            }
        }
    }
}
