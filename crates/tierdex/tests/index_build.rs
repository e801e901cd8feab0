//! Building an index over another, and duplicate ids in one input (issue
//! #20, items 1 and 3).
//!
//! * A build takes the index's write lock: it is refused while a writer
//!   (a server, `add`) holds the index, and the writer's acknowledged
//!   documents survive.
//! * A build over an existing index (`overwrite`) is made aside and swapped
//!   in whole: a build that fails leaves the old index as it was, and no
//!   stray directories.
//! * A record whose id came earlier in the same input replaces the earlier
//!   one, as `add` does: the index answers exactly like one built from the
//!   input without the replaced records, merged or not, and deleting the
//!   id leaves nothing.

mod support;

use std::path::Path;

use support::gen::Rng;
use tierdex::corpus::CorpusError;
use tierdex::indexing::{build_index, IndexOptions};
use tierdex::search::{Mode, Searcher};
use tierdex::update::{IndexWriter, WriterOptions};
use tierdex::{Document, ErrorKind};

fn ok(docs: Vec<Document>) -> impl Iterator<Item = Result<Document, CorpusError>> {
    docs.into_iter().map(Ok)
}

fn docs(prefix: &str, n: usize) -> Vec<Document> {
    (0..n)
        .map(|i| {
            Document::title_body(
                format!("{prefix}{i}"),
                format!("{prefix} title {i}"),
                format!("body of {prefix} number {i}"),
            )
        })
        .collect()
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn count(dir: &Path, q: &str) -> u64 {
    Searcher::open(dir)
        .unwrap()
        .search(q, Mode::Count, 0)
        .unwrap()
        .count
        .unwrap()
}

#[test]
fn a_forced_build_is_refused_while_a_writer_holds_the_index() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("idx");
    build_index(ok(docs("old", 20)), &dir, &IndexOptions::default()).unwrap();
    let w = IndexWriter::open(&dir, WriterOptions::default()).unwrap();
    w.add(docs("acked", 5)).unwrap();
    let opts = IndexOptions {
        overwrite: true,
        ..Default::default()
    };
    let err = build_index(ok(docs("new", 3)), &dir, &opts).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    assert!(err.to_string().contains("open for writing"), "{err}");
    assert_eq!(entries(root.path()), vec!["idx"], "no build left aside");
    // The writer's acknowledged documents are intact, before and after it flushes.
    drop(w);
    assert_eq!(count(&dir, "acked"), 0, "only in the log until a writer applies it");
    let w = IndexWriter::open(&dir, WriterOptions::default()).unwrap();
    w.flush().unwrap();
    drop(w);
    assert_eq!(count(&dir, "acked"), 5);
    assert_eq!(count(&dir, "old"), 20);
    assert_eq!(count(&dir, "new"), 0);
    // Once the writer is gone, the forced build replaces the index.
    build_index(ok(docs("new", 3)), &dir, &opts).unwrap();
    assert_eq!(count(&dir, "new"), 3);
    assert_eq!(count(&dir, "old acked"), 0);
    assert!(!entries(&dir)
        .iter()
        .any(|f| f.starts_with("wal-") && f != "wal-00000000000000000001.log"));
}

#[test]
fn a_failed_forced_build_leaves_the_old_index_as_it_was() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("idx");
    build_index(ok(docs("old", 50)), &dir, &IndexOptions::default()).unwrap();
    let before = entries(&dir);
    let opts = IndexOptions {
        overwrite: true,
        segment_docs: 4,
        ..Default::default()
    };
    // Segments are written, then the input fails.
    let failing = docs("new", 30)
        .into_iter()
        .map(Ok)
        .chain(std::iter::once(Err(CorpusError::BadRecord {
            path: "input.jsonl".into(),
            line: 31,
            message: "not JSON".into(),
        })));
    let err = build_index(failing, &dir, &opts).unwrap_err();
    assert!(err.to_string().contains("input.jsonl:31"), "{err}");
    assert_eq!(entries(&dir), before, "the old index's files are untouched");
    assert_eq!(count(&dir, "old"), 50);
    assert_eq!(count(&dir, "new"), 0);
    assert_eq!(entries(root.path()), vec!["idx"], "no build left aside");
    // A failed first build leaves no directory behind either.
    let fresh = root.path().join("fresh");
    let err = build_index(std::iter::empty(), &fresh, &IndexOptions::default()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadInput, "{err}");
    assert_eq!(entries(root.path()), vec!["idx"]);
}

#[test]
fn an_existing_index_is_replaced_only_when_asked() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("idx");
    build_index(ok(docs("old", 10)), &dir, &IndexOptions::default()).unwrap();
    let err = build_index(ok(docs("new", 3)), &dir, &IndexOptions::default()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    assert!(err.to_string().contains("--force"), "{err}");
    let opts = IndexOptions {
        overwrite: true,
        ..Default::default()
    };
    build_index(ok(docs("new", 3)), &dir, &opts).unwrap();
    assert_eq!(count(&dir, "new"), 3);
    assert_eq!(count(&dir, "old"), 0);
    assert_eq!(entries(root.path()), vec!["idx"]);
    // An existing empty directory is built into in place.
    let empty = root.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    build_index(ok(docs("e", 4)), &empty, &IndexOptions::default()).unwrap();
    assert_eq!(count(&empty, "e"), 4);
}

/// `n` records over ids drawn from a pool smaller than `n`, so ids repeat;
/// and the records that survive (each id's last), in the order of their
/// last appearance.
fn with_duplicates(seed: u64, n: usize) -> (Vec<Document>, Vec<Document>) {
    let mut rng = Rng::new(seed);
    let vocabulary: Vec<String> = (0..30).map(|i| format!("w{i}")).collect();
    let words: Vec<&str> = vocabulary.iter().map(String::as_str).collect();
    let pool = (n / 2).max(1);
    let mut records = Vec::with_capacity(n);
    for _ in 0..n {
        let id = format!("id{}", rng.range(0, pool - 1));
        let len = rng.range(1, 12);
        let body: Vec<&str> = (0..len).map(|_| *rng.pick(&words)).collect();
        let title: Vec<&str> = (0..rng.range(0, 3)).map(|_| *rng.pick(&words)).collect();
        records.push(Document::title_body(id, title.join(" "), body.join(" ")));
    }
    let mut last = std::collections::HashMap::new();
    for (i, d) in records.iter().enumerate() {
        last.insert(d.id.clone(), i);
    }
    let live = records
        .iter()
        .enumerate()
        .filter(|(i, d)| last[&d.id] == *i)
        .map(|(_, d)| d.clone())
        .collect();
    (records, live)
}

#[test]
fn a_later_record_with_the_same_id_replaces_the_earlier_one() {
    for case in 0..12u64 {
        let seed = 0xd0b1e + case;
        let (records, live) = with_duplicates(seed, 40 + (case as usize * 17) % 90);
        let words: Vec<String> = live
            .iter()
            .flat_map(|d| d.text("body").split_whitespace().map(str::to_string))
            .take(30)
            .collect();
        let root = tempfile::tempdir().unwrap();
        let opts = IndexOptions {
            segment_docs: [1, 3, 7, 1000][case as usize % 4],
            merge: case % 3 == 0,
            threads: 1 + (case as usize % 2),
            ..Default::default()
        };
        let expected_dir = root.path().join("expected");
        build_index(ok(live.clone()), &expected_dir, &opts).unwrap();
        let dir = root.path().join("dups");
        let stats = build_index(ok(records.clone()), &dir, &opts).unwrap();
        let context = format!("case {case}: {} records, {} live, {opts:?}", records.len(), live.len());
        assert_eq!(stats.docs, live.len() as u64, "{context}");
        assert_eq!(stats.replaced, (records.len() - live.len()) as u64, "{context}");
        let (got, want) = (Searcher::open(&dir).unwrap(), Searcher::open(&expected_dir).unwrap());
        assert_eq!(got.num_docs(), live.len() as u64, "{context}");
        for w in words.iter().take(20) {
            for q in [w.clone(), format!("{w} {}", words[words.len() / 2])] {
                let (a, b) = (
                    got.search(&q, Mode::TopKAndCount, 10).unwrap(),
                    want.search(&q, Mode::TopKAndCount, 10).unwrap(),
                );
                assert_eq!(a.count, b.count, "{context}: {q}");
                let ids = |s: &Searcher, r: &tierdex::search::SearchResults| {
                    r.hits
                        .iter()
                        .map(|h| (s.doc_id(h.doc).unwrap(), (h.score * 1e4).round() as i64))
                        .collect::<Vec<_>>()
                };
                assert_eq!(ids(&got, &a), ids(&want, &b), "{context}: {q}");
            }
        }
        // Deleting a replaced id leaves no copy searchable.
        let victim = records[0].id.clone();
        let w = IndexWriter::open(&dir, WriterOptions::default()).unwrap();
        let a = w.delete(vec![victim.clone()]).unwrap();
        assert_eq!(a.deleted, 1, "{context}");
        assert_eq!(w.live_docs(), live.len() as u64 - 1, "{context}");
        assert!(!w.contains(&victim));
        w.flush().unwrap();
        let s = w.searcher();
        assert_eq!(s.num_docs(), live.len() as u64 - 1, "{context}");
        let kept = live.iter().find(|d| d.id == victim).unwrap();
        let word = kept.text("body").split_whitespace().next().unwrap().to_string();
        let r = s.search(&word, Mode::TopK, 1000).unwrap();
        assert!(
            r.hits.iter().all(|h| s.doc_id(h.doc).unwrap() != victim),
            "{context}: {victim} still found by {word}"
        );
    }
}
