//! The TED talks corpus (`../shared/corpora/tedtalks/talks.jsonl`: 2,356
//! real records with text, keyword arrays, dates and counts), indexed with
//! a dynamic mapping and with the example mapping
//! (`examples/tedtalks/mapping.json`), queried with text plus a tag filter
//! plus a date range, sorted by `viewed_count`, against a scan of the file
//! (issue #21). Skipped, saying so, where the corpus is not present.

use std::path::{Path, PathBuf};

use serde_json::Value;
use tierdex::analysis::Analyzer;
use tierdex::corpus::{Corpus, ReadOptions};
use tierdex::indexing::{build_index, IndexOptions};
use tierdex::schema::{Dynamic, Schema};
use tierdex::search::{Mode, SearchRequest, Searcher, SortBy, SortField};

fn corpus_path() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpora/tedtalks/talks.jsonl");
    p.exists().then_some(p)
}

fn records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn build(path: &Path, schema: Schema, dir: &Path) -> Searcher {
    let corpus = Corpus::open(&[path.to_path_buf()], ReadOptions::default())
        .unwrap()
        .with_schema(std::sync::Arc::new(schema.clone()))
        .with_id_field("objectID");
    let opts = IndexOptions {
        schema,
        segment_docs: 700,
        merge: false,
        ..Default::default()
    };
    let stats = build_index(corpus, dir, &opts).unwrap();
    assert_eq!(stats.docs, 2356);
    Searcher::open(dir).unwrap()
}

/// Talks whose description has `word`, tagged `tag`, dated in `from..to`
/// (epoch seconds), by `viewed_count` descending: their ids.
fn scan(records: &[Value], analyzer: &Analyzer, word: &str, tag: &str, from: i64, to: i64) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = records
        .iter()
        .filter(|r| {
            let mut has = false;
            analyzer.analyze(r["description"].as_str().unwrap_or(""), |t| has |= t.term == word);
            has && r["tags"].as_array().is_some_and(|t| t.iter().any(|x| x == tag))
                && (from..to).contains(&r["date"].as_i64().unwrap())
        })
        .map(|r| {
            (
                r["objectID"].as_str().unwrap().to_string(),
                r["viewed_count"].as_u64().unwrap(),
            )
        })
        .collect();
    out.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

fn check(s: &Searcher, records: &[Value], tag_field: &str, dates: &dyn Fn(i64) -> String) {
    for (word, tag, from, to) in [
        ("brain", "psychology", 1_262_304_000i64, 1_420_070_400i64),
        ("world", "technology", 1_100_000_000, 1_500_000_000),
        ("music", "music", 0, 2_000_000_000),
        ("climate", "climate change", 1_300_000_000, 1_400_000_000),
    ] {
        // The description as the index analyses it (the example mapping
        // stems English).
        let analyzer = s.index().analyzer(s.schema().field("description").unwrap());
        let mut stemmed = String::new();
        analyzer.analyze(word, |t| stemmed = t.term.to_string());
        let want = scan(records, analyzer, &stemmed, tag, from, to);
        let q = format!(
            "+description:{word} +{tag_field}:\"{tag}\" +date:[{} TO {}}}",
            dates(from),
            dates(to)
        );
        let parsed = s.parse(&q).unwrap_or_else(|e| panic!("{q}: {e}"));
        let mut req = SearchRequest::new(&parsed, 10);
        req.sort = vec![SortField::desc(SortBy::Field(
            s.schema().field("viewed_count").unwrap(),
        ))];
        let r = s.search_request(&req).unwrap();
        assert_eq!(r.count, Some(want.len() as u64), "{q}");
        let got: Vec<(String, u64)> = r
            .hits
            .iter()
            .zip(r.sort.as_ref().unwrap())
            .map(|(h, v)| {
                let views = match v[0] {
                    tierdex::search::SortValue::Long(n) => n as u64,
                    ref other => panic!("{other:?}"),
                };
                (s.doc_id(h.doc).unwrap(), views)
            })
            .collect();
        let views: Vec<u64> = got.iter().map(|g| g.1).collect();
        let want_views: Vec<u64> = want.iter().take(10).map(|w| w.1).collect();
        assert_eq!(views, want_views, "{q}");
        assert!(
            !want.is_empty() || word == "climate",
            "{q}: the scan found nothing, a weak check"
        );
        // Every hit is one the scan found, with its own view count.
        for g in &got {
            assert!(want.contains(g), "{q}: {g:?}");
        }
        assert_eq!(s.search(&q, Mode::Count, 0).unwrap().count, Some(want.len() as u64));
    }
}

#[test]
fn ted_talks_with_a_dynamic_and_an_explicit_mapping() {
    let Some(path) = corpus_path() else {
        eprintln!("tedtalks: skipped: ../shared/corpora/tedtalks/talks.jsonl is not present");
        return;
    };
    let records = records(&path);
    assert_eq!(records.len(), 2356);
    // Dynamic: `date` (epoch seconds) becomes a long; tags a text field
    // with a keyword sub-field.
    let dir = tempfile::tempdir().unwrap();
    let mut dynamic = Schema::dynamic();
    dynamic.set_dynamic(Dynamic::True);
    let s = build(&path, dynamic, dir.path());
    let schema = s.schema();
    assert_eq!(schema.entry(schema.field("date").unwrap()).unwrap().ty.name(), "long");
    assert_eq!(
        schema.entry(schema.field("tags.keyword").unwrap()).unwrap().ty.name(),
        "keyword"
    );
    check(&s, &records, "tags.keyword", &|t| t.to_string());
    // Explicit: the example mapping, dates as dates.
    let mapping = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/tedtalks/mapping.json");
    let schema = Schema::from_json(&std::fs::read_to_string(mapping).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let s = build(&path, schema, dir.path());
    let iso = |t: i64| tierdex::schema::value::format_iso(t * 1000);
    check(&s, &records, "tags", &|t| format!("\"{}\"", iso(t)));
    // A talk by id, with its source.
    let d = s.get("2652").unwrap().unwrap();
    assert_eq!(d.fields.get("name").unwrap(), "Are you a giver or a taker?");
}
