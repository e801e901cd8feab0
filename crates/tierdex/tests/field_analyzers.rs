//! Analyzers per text field (issue #21): a mapping gives one field the
//! `french` analyzer, another `whitespace`, another `simple`; documents are
//! indexed and queries analysed with each field's own analyzer, whether
//! the index was built in one go or through the writer.

use std::collections::BTreeSet;

use serde_json::json;
use tierdex::indexing::{build_index, IndexOptions};
use tierdex::schema::{mapping, Schema};
use tierdex::search::{Mode, Searcher};
use tierdex::update::{IndexWriter, Strategy, WriterOptions};
use tierdex::{AnalyzerConfig, Document};

fn schema() -> Schema {
    Schema::from_json(
        &json!({"dynamic": "strict", "properties": {
            "fr": {"type": "text", "analyzer": "french"},
            "ws": {"type": "text", "analyzer": "whitespace"},
            "plain": {"type": "text", "analyzer": "simple"},
            "en": {"type": "text"}
        }})
        .to_string(),
    )
    .unwrap()
}

fn docs() -> Vec<Document> {
    [
        json!({"id": "d1", "fr": "Les chevaux de la ferme", "ws": "Hello, World! C++", "plain": "don't 42x"}),
        json!({"id": "d2", "fr": "Un cheval blanc", "ws": "hello world c++", "en": "running horses"}),
        json!({"id": "d3", "fr": "le la les", "ws": "HELLO", "plain": "x42y", "en": "the cheval"}),
    ]
    .into_iter()
    .map(|v| serde_json::from_value(v).unwrap())
    .collect()
}

/// The ids of the documents `query` matches (and checks the count agrees).
fn ids(s: &Searcher, query: &str) -> BTreeSet<String> {
    let r = s
        .search(query, Mode::TopKAndCount, 10)
        .unwrap_or_else(|e| panic!("{query}: {e}"));
    let got: BTreeSet<String> = r.hits.iter().map(|h| s.doc_id(h.doc).unwrap()).collect();
    assert_eq!(r.count, Some(got.len() as u64), "{query}");
    got
}

fn check(s: &Searcher, context: &str) {
    let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    for (query, want) in [
        // French: stemmed, stop words dropped, in documents and queries.
        ("fr:chevaux", set(&["d1", "d2"])),
        ("fr:cheval", set(&["d1", "d2"])),
        ("fr:Chevaux", set(&["d1", "d2"])),
        ("fr:\"chevaux de la ferme\"", set(&["d1"])),
        ("fr:ferme", set(&["d1"])),
        ("fr:les", set(&[])),
        // Whitespace: case and punctuation kept.
        ("ws:\"Hello,\"", set(&["d1"])),
        ("ws:hello", set(&["d2"])),
        ("ws:HELLO", set(&["d3"])),
        ("ws:\"C++\"", set(&["d1"])),
        ("ws:\"c++\"", set(&["d2"])),
        ("ws:Hello", set(&[])),
        // Simple: letters only.
        ("plain:don", set(&["d1"])),
        ("plain:\"don't\"", set(&["d1"])),
        ("plain:x", set(&["d1", "d3"])),
        ("plain:y", set(&["d3"])),
        // The index's analyzer (standard) for a field without its own.
        ("en:running", set(&["d2"])),
        ("en:run", set(&[])),
        ("en:the", set(&["d3"])),
        // Unqualified: every text field, each with its analyzer.
        ("chevaux", set(&["d1", "d2"])),
        ("cheval", set(&["d1", "d2", "d3"])),
        ("hello", set(&["d2"])),
    ] {
        assert_eq!(ids(s, query), want, "{context}: {query}");
    }
    // The analyzers came back from the manifest.
    let schema = s.schema();
    let analyzer = |f: &str| s.index().analyzer(schema.field(f).unwrap()).config();
    assert_eq!(analyzer("fr").name(), Some("french"));
    assert_eq!(analyzer("ws").name(), Some("whitespace"));
    assert_eq!(analyzer("plain").name(), Some("simple"));
    assert_eq!(analyzer("en"), AnalyzerConfig::STANDARD);
    // And the mapping as written reads back to the same schema.
    let written = mapping::to_mapping(schema);
    assert_eq!(written["properties"]["fr"]["analyzer"], "french");
    assert_eq!(&mapping::from_mapping(&written).unwrap(), schema);
}

#[test]
fn fields_use_their_own_analyzers_in_a_built_index() {
    let dir = tempfile::tempdir().unwrap();
    let opts = IndexOptions {
        schema: schema(),
        ..Default::default()
    };
    build_index(docs().into_iter().map(Ok), dir.path(), &opts).unwrap();
    check(&Searcher::open(dir.path()).unwrap(), "build");
}

#[test]
fn fields_use_their_own_analyzers_through_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let w = IndexWriter::create_with_schema(
        dir.path(),
        schema(),
        Default::default(),
        Default::default(),
        Strategy::Geometric,
        WriterOptions::default(),
    )
    .unwrap();
    w.add(docs()).unwrap();
    w.flush().unwrap();
    check(&w.searcher(), "writer");
    check(&Searcher::open(dir.path()).unwrap(), "writer, reopened");
    // Deleting by id removes every field's terms, whatever its analyzer.
    w.delete(vec!["d1".into()]).unwrap();
    w.flush().unwrap();
    let s = w.searcher();
    assert_eq!(ids(&s, "fr:chevaux"), ["d2".to_string()].into());
    assert!(ids(&s, "ws:\"Hello,\"").is_empty());
}
