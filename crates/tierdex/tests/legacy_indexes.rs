//! Indexes written by an earlier release still open and answer exactly as
//! that release did (issue #19: every existing index stays readable).
//!
//! `tests/fixtures/release-v3` holds three small indexes built by the
//! release of format 3 (see its README), with that release's answers to a
//! list of queries in every mode. Each index is copied aside (opening for
//! writing takes a lock and may replay the log), opened on every tier, and
//! must give the same hits, scores, counts, stored titles and snippets.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use tierdex::index::OpenOptions;
use tierdex::search::{Mode, Searcher};
use tierdex::storage::{Tier, TierOptions};
use tierdex::update::{IndexWriter, WriterOptions};

const DIRS: [&str; 3] = ["grouped", "split", "inplace"];
const MODES: [(&str, Mode); 3] = [
    ("top_k", Mode::TopK),
    ("top_k_and_count", Mode::TopKAndCount),
    ("count", Mode::Count),
];

#[derive(Debug, Deserialize, PartialEq)]
struct Expected {
    query: String,
    count: Option<u64>,
    hits: Vec<ExpectedHit>,
}

#[derive(Debug, Deserialize, PartialEq)]
struct ExpectedHit {
    id: String,
    score: f32,
    title: String,
    snippet: Option<String>,
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/release-v3")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

fn expected(dir: &str, mode: &str) -> Vec<Expected> {
    let path = fixtures().join(format!("expected-{dir}-{mode}.jsonl"));
    let f = std::fs::File::open(&path).unwrap();
    std::io::BufReader::new(f)
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect()
}

fn answer(s: &Searcher, query: &str, mode: Mode) -> Expected {
    let parsed = tierdex::query::parse(query).unwrap();
    let plan = s.plan(&parsed).unwrap();
    let results = s.execute(&plan, mode, 7).unwrap();
    let hits = results
        .hits
        .iter()
        .map(|h| {
            let doc = s.doc(h.doc).unwrap();
            ExpectedHit {
                title: doc.title().to_string(),
                id: doc.id,
                score: h.score,
                snippet: Some(s.highlight(&plan, h.doc, 200).unwrap().body().render("<b>", "</b>")),
            }
        })
        .collect();
    Expected {
        query: query.to_string(),
        count: results.count,
        hits,
    }
}

fn check(s: &Searcher, dir: &str, what: &str) {
    for (mode_name, mode) in MODES {
        for want in expected(dir, mode_name) {
            let got = answer(s, &want.query, mode);
            assert_eq!(got, want, "{dir} ({what}), mode {mode_name}, query {:?}", want.query);
        }
    }
}

/// The corpus the fixtures were built from, by id.
fn corpus() -> std::collections::HashMap<String, tierdex::Document> {
    let f = std::fs::File::open(fixtures().join("corpus.jsonl.zst")).unwrap();
    let text = zstd::decode_all(f).unwrap();
    text.split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            let d: tierdex::Document = serde_json::from_slice(l).unwrap();
            (d.id.clone(), d)
        })
        .collect()
}

#[test]
fn release_v3_indexes_answer_as_that_release_did() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = corpus();
    for dir in DIRS {
        let path = tmp.path().join(dir);
        copy_dir(&fixtures().join(dir), &path);
        for tier in [Tier::Mmap, Tier::Ram, Tier::Buffered, Tier::Direct] {
            let options = OpenOptions {
                tier: TierOptions::on(tier),
                ..Default::default()
            };
            let s = Searcher::open_with(&path, options).unwrap();
            check(&s, dir, &format!("{tier:?} tier"));
            // Every live stored document is the record it was built from.
            let index = s.index();
            let mut live = 0;
            for doc in 0..index.num_docs() as u32 {
                if index.is_deleted(doc) {
                    continue;
                }
                live += 1;
                let stored = s.doc(doc).unwrap();
                assert_eq!(Some(&stored), corpus.get(&stored.id), "{dir}: stored document {doc}");
            }
            assert_eq!(live, s.num_docs(), "{dir}: live documents");
        }
    }
}

#[test]
fn release_v3_indexes_open_for_writing_and_keep_their_answers() {
    let tmp = tempfile::tempdir().unwrap();
    for dir in DIRS {
        let path = tmp.path().join(dir);
        copy_dir(&fixtures().join(dir), &path);
        let w = IndexWriter::open(&path, WriterOptions::default()).unwrap();
        check(&w.searcher(), dir, "writer snapshot");
        drop(w);
        let s = Searcher::open(&path).unwrap();
        check(&s, dir, "reopened after the writer");
    }
}
