//! The whole write path under `kill -9` (DESIGN §5): a child process adds
//! and deletes documents from two threads through an [`IndexWriter`] with a
//! tiny buffer, so that flushes, merges (geometric strategy) or appends to
//! the chain file (in-place strategies) and compactions
//! run all the time (inline, and from a third thread as the server's
//! maintenance runs them, writing segments while the writers go on), and
//! prints every acknowledged change. The parent kills
//! it at a random moment, reopens the index (cleaning up and replaying the
//! log) and checks that it opens, that every acknowledged addition is
//! searchable, that every acknowledged deletion holds, and that the index
//! answers like a rebuild of its own documents. Repeated on one index, so
//! each round recovers from the previous kill.
//!
//! `TIERDEX_WRITER_CRASH_ROUNDS` sets the number of kills (default 10).

use std::collections::{BTreeSet, HashSet};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use tierdex::indexing::{build_index, IndexOptions};
use tierdex::search::{Mode, Searcher};
use tierdex::update::{IndexWriter, Strategy, WriterOptions};
use tierdex::Document;

const CHILD_DIR: &str = "TIERDEX_WRITER_CRASH_CHILD_DIR";
const CHILD_ROUND: &str = "TIERDEX_WRITER_CRASH_ROUND";
const CHILD_STRATEGY: &str = "TIERDEX_WRITER_CRASH_STRATEGY";

/// The writer's options in `round`: in-place rounds pack the short terms
/// (the default), none (every term in blocks and slots), or the shortest.
fn options(round: u64) -> WriterOptions {
    WriterOptions {
        buffer_docs: 40,
        pack_max: [tierdex::layout::chain::PACK_MAX, 0, 512][round as usize % 3],
        ..WriterOptions::default()
    }
}

fn doc(id: &str, i: u64) -> Document {
    Document::title_body(
        id.to_string(),
        format!("title {id} w{}", i % 13),
        format!(
            "w{} w{} {}",
            i % 7,
            i % 11,
            "filler words here ".repeat((i % 9) as usize)
        ),
    )
}

/// The child: updates until killed. Does nothing in a normal test run.
#[test]
fn child_writer() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return;
    };
    let round: u64 = std::env::var(CHILD_ROUND).unwrap().parse().unwrap();
    let path = Path::new(&dir);
    let w = if path.join("manifest.json").exists() {
        IndexWriter::open(path, options(round)).unwrap()
    } else {
        IndexWriter::create(
            path,
            Default::default(),
            Default::default(),
            std::env::var(CHILD_STRATEGY).unwrap().parse::<Strategy>().unwrap(),
            options(round),
        )
        .unwrap()
    };
    std::thread::scope(|s| {
        // Background flushes (as the server's maintenance thread runs them),
        // which write segments while the writers go on.
        s.spawn(|| loop {
            w.flush().unwrap();
            std::thread::sleep(std::time::Duration::from_millis(3));
        });
        for t in 0..2u64 {
            let w = &w;
            s.spawn(move || {
                for i in 0u64.. {
                    let ids: Vec<String> = (0..3).map(|j| format!("r{round}t{t}i{i}j{j}")).collect();
                    let docs = ids.iter().map(|id| doc(id, i)).collect();
                    w.add(docs).unwrap();
                    for id in &ids {
                        println!("added {id}");
                    }
                    if i % 5 == 4 {
                        let victim = format!("r{round}t{t}i{}j1", i - 2);
                        println!("deleting {victim}");
                        w.delete(vec![victim.clone()]).unwrap();
                        println!("deleted {victim}");
                    }
                    if t == 0 && i % 40 == 39 {
                        w.compact().unwrap();
                    }
                    if i % 3 == 0 {
                        w.refresh().unwrap();
                    }
                }
            });
        }
    });
}

fn live_ids(s: &Searcher) -> Vec<String> {
    let index = s.index();
    (0..index.num_docs() as u32)
        .filter(|&d| !index.is_deleted(d))
        .map(|d| s.doc_id(d).unwrap())
        .collect()
}

#[test]
fn acknowledged_changes_survive_kill_9() {
    kill_rounds(Strategy::Geometric);
}

#[test]
fn acknowledged_changes_survive_kill_9_in_place() {
    kill_rounds(Strategy::InPlace);
}

#[test]
fn acknowledged_changes_survive_kill_9_in_place_contiguous() {
    kill_rounds(Strategy::InPlaceContiguous);
}

fn kill_rounds(strategy: Strategy) {
    let rounds: u64 = std::env::var("TIERDEX_WRITER_CRASH_ROUNDS")
        .ok()
        .map(|v| v.parse().expect("a number"))
        .unwrap_or(10);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("idx");
    let exe = std::env::current_exe().unwrap();
    let mut added: BTreeSet<String> = BTreeSet::new();
    let mut deleted: HashSet<String> = HashSet::new();
    let mut in_doubt: HashSet<String> = HashSet::new();
    for round in 0..rounds {
        let mut child = Command::new(&exe)
            .args(["--exact", "child_writer", "--nocapture", "--test-threads=1"])
            .env(CHILD_DIR, &dir)
            .env(CHILD_ROUND, round.to_string())
            .env(CHILD_STRATEGY, strategy.name())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let child_pid = child.id();
        let out = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut lines = Vec::new();
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                lines.push(line);
            }
            lines
        });
        std::thread::sleep(Duration::from_millis(150 + (round * 173) % 600));
        child.kill().unwrap();
        child.wait().unwrap();
        for line in reader.join().unwrap() {
            if let Some(id) = line.strip_prefix("added ") {
                added.insert(id.to_string());
            } else if let Some(id) = line.strip_prefix("deleting ") {
                in_doubt.insert(id.to_string());
            } else if let Some(id) = line.strip_prefix("deleted ") {
                in_doubt.remove(id);
                deleted.insert(id.to_string());
            }
        }
        let w = IndexWriter::open(&dir, options(round))
            .unwrap_or_else(|e| panic!("round {round}: the index does not open: {e}"));
        assert_eq!(w.strategy(), strategy);
        // The killed child's in-memory buffer directory is cleaned up.
        if let Ok(entries) = std::fs::read_dir("/dev/shm") {
            let prefix = format!("tierdex-buffer-{child_pid}-");
            assert!(
                !entries
                    .flatten()
                    .any(|e| e.file_name().to_string_lossy().starts_with(&prefix)),
                "round {round}: the killed writer's buffer directory was left behind"
            );
        }
        let s = w.searcher();
        let live: HashSet<String> = live_ids(&s).into_iter().collect();
        for id in &added {
            if deleted.contains(id) {
                assert!(!live.contains(id), "round {round}: acknowledged deletion of {id} lost");
            } else if !in_doubt.contains(id) {
                assert!(live.contains(id), "round {round}: acknowledged document {id} lost");
            }
        }
        // The recovered index answers like a rebuild of its live documents.
        let index = s.index();
        let docs: Vec<Document> = (0..index.num_docs() as u32)
            .filter(|&d| !index.is_deleted(d))
            .map(|d| s.doc(d).unwrap())
            .collect();
        if !docs.is_empty() {
            let fresh = tmp.path().join(format!("fresh{round}"));
            build_index(docs.into_iter().map(Ok), &fresh, &IndexOptions::default()).unwrap();
            let f = Searcher::open(&fresh).unwrap();
            for q in ["w1", "w3 w5", "+w2 +w4", "\"filler words\"", "title:w7 -w0"] {
                for mode in [Mode::TopKAndCount, Mode::Count] {
                    let a = s.search(q, mode, 10).unwrap();
                    let b = f.search(q, mode, 10).unwrap();
                    assert_eq!(a.count, b.count, "round {round}: {q}");
                    let ha: Vec<_> = a
                        .hits
                        .iter()
                        .map(|h| (s.doc_id(h.doc).unwrap(), h.score.to_bits()))
                        .collect();
                    let hb: Vec<_> = b
                        .hits
                        .iter()
                        .map(|h| (f.doc_id(h.doc).unwrap(), h.score.to_bits()))
                        .collect();
                    assert_eq!(ha, hb, "round {round}: {q}");
                }
            }
        }
        eprintln!(
            "round {round}: {} acknowledged additions, {} acknowledged deletions, {} live, {} segments",
            added.len(),
            deleted.len(),
            live.len(),
            w.stats().segments
        );
    }
    assert!(
        added.len() > 100,
        "the child acknowledged only {} additions",
        added.len()
    );
    assert!(!deleted.is_empty());
}
