//! Facets over the TED talks corpus (`../shared/corpora/tedtalks/talks.jsonl`,
//! issue #22): talks counted by `tags`, `event_name` and year of `date`
//! (a yearly `date_histogram`), over every talk and over a text query,
//! against counts taken from the file itself. Skipped, saying so, where
//! the corpus is not present.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use tierdex::aggs::Aggregations;
use tierdex::corpus::{Corpus, ReadOptions};
use tierdex::indexing::{build_index, IndexOptions};
use tierdex::query::limits::QueryLimits;
use tierdex::schema::value::civil_from_days;
use tierdex::schema::Schema;
use tierdex::search::{Mode, SearchRequest, Searcher};

fn corpus_path() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpora/tedtalks/talks.jsonl");
    p.exists().then_some(p)
}

/// Bucket key to doc count, of a response's `buckets` list.
fn counts(agg: &Value) -> BTreeMap<String, u64> {
    agg["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            let key = match &b["key"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (key, b["doc_count"].as_u64().unwrap())
        })
        .collect()
}

#[test]
fn ted_facets_by_tag_event_and_year_equal_a_count_of_the_file() {
    let Some(path) = corpus_path() else {
        eprintln!("tedtalks_aggs: skipped: ../shared/corpora/tedtalks/talks.jsonl is not present");
        return;
    };
    let records: Vec<Value> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mapping = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/tedtalks/mapping.json");
    let schema = Schema::from_json(&std::fs::read_to_string(mapping).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let corpus = Corpus::open(std::slice::from_ref(&path), ReadOptions::default())
        .unwrap()
        .with_schema(std::sync::Arc::new(schema.clone()))
        .with_id_field("objectID");
    let opts = IndexOptions {
        schema: schema.clone(),
        segment_docs: 700,
        merge: false,
        ..Default::default()
    };
    build_index(corpus, dir.path(), &opts).unwrap();
    let s = Searcher::open(dir.path()).unwrap();
    let aggs = Aggregations::parse(
        &schema,
        &QueryLimits::default(),
        &json!({
            "tags": {"terms": {"field": "tags", "size": 10000}},
            "events": {"terms": {"field": "event_name", "size": 10000}},
            "years": {"date_histogram": {"field": "date", "calendar_interval": "year", "min_doc_count": 1}}
        }),
    )
    .unwrap();
    let analyzer = s.index().analyzer(schema.field("description").unwrap());
    for word in [None, Some("brain"), Some("music")] {
        let stemmed = word.map(|w| {
            let mut t = String::new();
            analyzer.analyze(w, |x| t = x.term.to_string());
            t
        });
        let matching: Vec<&Value> = records
            .iter()
            .filter(|r| {
                stemmed.as_ref().is_none_or(|w| {
                    let mut has = false;
                    analyzer.analyze(r["description"].as_str().unwrap_or(""), |t| has |= t.term == *w);
                    has
                })
            })
            .collect();
        let mut tags: BTreeMap<String, u64> = BTreeMap::new();
        let mut events: BTreeMap<String, u64> = BTreeMap::new();
        let mut years: BTreeMap<String, u64> = BTreeMap::new();
        for r in &matching {
            let mut seen: Vec<&str> = r["tags"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_str().unwrap())
                .collect();
            seen.sort();
            seen.dedup();
            for t in seen {
                *tags.entry(t.to_string()).or_default() += 1;
            }
            if let Some(e) = r["event_name"].as_str() {
                *events.entry(e.to_string()).or_default() += 1;
            }
            let (y, _, _) = civil_from_days(r["date"].as_i64().unwrap().div_euclid(86_400));
            let start = tierdex::schema::value::days_from_civil(y, 1, 1) * 86_400_000;
            *years.entry(start.to_string()).or_default() += 1;
        }
        let query = match word {
            None => tierdex::query::ast::Query::MatchAll,
            Some(w) => s.parse(&format!("description:{w}")).unwrap(),
        };
        let mut req = SearchRequest::new(&query, 0);
        req.mode = Mode::Count;
        req.aggs = Some(&aggs);
        let r = s.search_request(&req).unwrap();
        assert_eq!(r.count, Some(matching.len() as u64), "{word:?}");
        let a = r.aggregations.unwrap();
        assert!(tags.len() > 10 && years.len() > 5, "{word:?}: a weak check");
        assert_eq!(counts(&a["tags"]), tags, "{word:?}: tags");
        assert_eq!(counts(&a["events"]), events, "{word:?}: event_name");
        assert_eq!(counts(&a["years"]), years, "{word:?}: years");
        assert_eq!(a["tags"]["sum_other_doc_count"], json!(0));
        // Sorted by count, most first.
        let order: Vec<u64> = a["tags"]["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["doc_count"].as_u64().unwrap())
            .collect();
        assert!(order.windows(2).all(|w| w[0] >= w[1]));
    }
}
