use serde_json::json;

use super::request::{AggKind, Aggregations, MetricKind, TermsOrder};
use crate::query::limits::QueryLimits;
use crate::schema::Schema;

fn schema() -> Schema {
    Schema::from_json(
        &json!({"properties": {
            "body": {"type": "text"},
            "tags": {"type": "keyword"},
            "hidden": {"type": "keyword", "doc_values": false},
            "n": {"type": "long"},
            "when": {"type": "date"}
        }})
        .to_string(),
    )
    .unwrap()
}

fn parse(v: serde_json::Value) -> crate::error::Result<Aggregations> {
    Aggregations::parse(&schema(), &QueryLimits::default(), &v)
}

fn err(v: serde_json::Value) -> String {
    parse(v.clone()).expect_err(&v.to_string()).to_string()
}

#[test]
fn a_full_request_reads_into_types() {
    let a = parse(json!({
        "by_tag": {"terms": {"field": "tags", "size": 3, "order": {"_key": "asc"}, "missing": "none"},
            "aggs": {"months": {"date_histogram": {"field": "when", "calendar_interval": "1M", "time_zone": "+01:00"},
                "aggs": {"s": {"stats": {"field": "n"}}}}}},
        "f": {"filter": {"term": {"tags": "a"}}},
        "fs": {"filters": {"filters": [{"match_all": {}}, {"term": {"n": 3}}]}},
        "top": {"top_hits": {"size": 2, "sort": [{"n": "desc"}]}}
    }))
    .unwrap();
    assert_eq!(a.aggs.len(), 4);
    assert_eq!(a.filter_queries().len(), 3);
    let AggKind::Terms(t) = &a.aggs[0].1.kind else { panic!() };
    assert_eq!((t.size, t.order.as_slice()), (3, &[(TermsOrder::Key, false)][..]));
    let AggKind::DateHistogram(d) = &a.aggs[0].1.subs.aggs[0].1.kind else {
        panic!()
    };
    assert_eq!(d.zone_ms, 3_600_000);
    let AggKind::Metric(m) = &a.aggs[0].1.subs.aggs[0].1.subs.aggs[0].1.kind else {
        panic!()
    };
    assert_eq!(m.kind, MetricKind::Stats);
    assert!(!a.needs_scores());
}

#[test]
fn what_is_not_understood_is_named() {
    for (req, says) in [
        (json!({"a": {"terms": {"field": "tags", "colour": 1}}}), "[colour]"),
        (json!({"a": {"terms": {"field": "body"}}}), "text field"),
        (json!({"a": {"terms": {"field": "hidden"}}}), "no doc values"),
        (json!({"a": {"terms": {"field": "nope"}}}), "unknown field [nope]"),
        (json!({"a": {"geohash_grid": {"field": "tags"}}}), "[geohash_grid]"),
        (
            json!({"a": {"terms": {"field": "tags"}, "max": {"field": "n"}}}),
            "two types",
        ),
        (
            json!({"a": {"max": {"field": "n"}, "aggs": {"b": {"min": {"field": "n"}}}}}),
            "cannot accept sub-aggregations",
        ),
        (json!({"a": {"sum": {"field": "tags"}}}), "is a keyword"),
        (
            json!({"a": {"date_histogram": {"field": "when", "calendar_interval": "2M"}}}),
            "calendar_interval",
        ),
        (
            json!({"a": {"date_histogram": {"field": "when", "fixed_interval": "1M"}}}),
            "fixed_interval",
        ),
        (
            json!({"a": {"date_histogram": {"field": "when", "interval": "1d"}}}),
            "deprecated",
        ),
        (
            json!({"a": {"date_histogram": {"field": "when", "calendar_interval": "day", "time_zone": "Europe/Paris"}}}),
            "Europe/Paris",
        ),
        (json!({"a": {"histogram": {"field": "n", "interval": 0}}}), "positive"),
        (
            json!({"a": {"range": {"field": "n", "ranges": [{"from": 1, "too": 2}]}}}),
            "[too]",
        ),
        (json!({"a": {"top_hits": {"size": 101}}}), "over the limit"),
        (
            json!({"a": {"terms": {"field": "tags", "order": {"_term": "asc"}}}}),
            "[_term]",
        ),
        (json!({"a": {"filter": {"match_everything": {}}}}), "match_everything"),
        (
            json!({"a": {"cardinality": {"field": "tags", "rehash": true}}}),
            "[rehash]",
        ),
        (
            json!({"a": {"terms": {"field": "tags", "min_doc_count": 0}}}),
            "min_doc_count",
        ),
        (
            json!({"a": {"terms": {"field": "tags"}, "aggs": {"b": {"avg": {}}}}}),
            "needs a [field]",
        ),
        (json!([]), "must be an object"),
    ] {
        let e = err(req.clone());
        assert!(e.contains(says), "{req}: {e}");
    }
}

#[test]
fn durations_and_zones() {
    use super::request::{parse_duration, parse_zone};
    assert_eq!(parse_duration("90m", false), Some(5_400_000));
    assert_eq!(parse_duration("1000ms", false), Some(1000));
    assert_eq!(parse_duration("-1d", true), Some(-86_400_000));
    assert_eq!(parse_duration("-1d", false), None);
    assert_eq!(parse_duration("1w", false), None);
    assert_eq!(parse_zone("-05:30").unwrap(), -19_800_000);
    assert_eq!(parse_zone("+0100").unwrap(), 3_600_000);
    assert_eq!(parse_zone("UTC").unwrap(), 0);
    assert!(parse_zone("+25:00").is_err());
}
