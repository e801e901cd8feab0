//! Snapshots (issue #23): a snapshot restored into a new index answers
//! exactly like an index built from scratch on the documents that were
//! live at the snapshot's point, under every maintenance strategy, taken
//! between random writes or while another thread writes; the repository
//! shares files between snapshots, checks what it restores, and removes
//! what an interrupted snapshot left.

mod support;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use support::gen::{self, Rng};
use tierdex::indexing::{build_index, IndexOptions};
use tierdex::search::{Mode, Searcher};
use tierdex::snapshot::{Repository, SnapshotSource};
use tierdex::update::wal::Op;
use tierdex::update::{IndexWriter, Strategy, WriterOptions};
use tierdex::{Document, ErrorKind};

const SEED: u64 = 0x736e_6170_2026_1127;

/// One answer as ids, score bits and count.
type Answer = (Vec<(String, u32)>, Option<u64>);

fn answer(s: &Searcher, q: &tierdex::query::ast::Query, mode: Mode, k: usize) -> Answer {
    let r = s.search_parsed(q, mode, k).unwrap();
    let hits = r
        .hits
        .iter()
        .map(|h| (s.doc_id(h.doc).unwrap(), h.score.to_bits()))
        .collect();
    (hits, r.count)
}

/// Checks the index in `dir` against a rebuild of `live`; returns the
/// answers compared.
fn check_restored(
    dir: &Path,
    live: &[Document],
    opts: &IndexOptions,
    lex: &gen::Lexicon,
    rng: &mut Rng,
    ctx: &str,
) -> usize {
    let s = Searcher::open(dir).unwrap();
    assert_eq!(s.num_docs(), live.len() as u64, "{ctx}: live documents");
    let fresh_dir = tempfile::tempdir().unwrap();
    let fresh = (!live.is_empty()).then(|| {
        build_index(live.iter().cloned().map(Ok), fresh_dir.path(), opts).unwrap();
        Searcher::open(fresh_dir.path()).unwrap()
    });
    let mut checked = 0;
    for _ in 0..12 {
        let q = gen::query(rng, lex);
        for (mode, k) in [(Mode::TopK, 7), (Mode::TopKAndCount, 10), (Mode::Count, 0)] {
            let got = answer(&s, &q, mode, k);
            let want = match &fresh {
                Some(f) => answer(f, &q, mode, k),
                None => (Vec::new(), (mode != Mode::TopK).then_some(0)),
            };
            assert_eq!(got, want, "{ctx}: {q:?} {mode:?} k={k}");
            checked += 1;
        }
    }
    for d in live.iter().take(5) {
        let doc = s.get(&d.id).unwrap().expect("a live document is found by id");
        assert_eq!(doc.id, d.id, "{ctx}");
    }
    checked
}

/// The live documents in insertion order.
#[derive(Default, Clone)]
struct Model {
    live: Vec<Document>,
}

impl Model {
    fn add(&mut self, d: Document) {
        self.live.retain(|x| x.id != d.id);
        self.live.push(d);
    }

    fn delete(&mut self, id: &str) {
        self.live.retain(|x| x.id != id);
    }
}

fn no_progress(_: u64, _: u64) {}

#[test]
fn restored_snapshots_answer_like_a_rebuild_under_every_strategy() {
    let mut checked = 0;
    let mut shared = 0;
    for case in 0..12u64 {
        let seed = gen::mix(SEED, case);
        let corpus = gen::corpus(seed, case * 8 + 3);
        if corpus.docs.is_empty() {
            continue;
        }
        let mut rng = Rng::new(gen::mix(seed, 1));
        let mut opts = gen::index_options(seed);
        opts.strategy = Strategy::ALL[case as usize % Strategy::ALL.len()];
        if opts.strategy.in_place() {
            opts.layout = tierdex::layout::Layout::Grouped;
        }
        let options = WriterOptions {
            buffer_docs: rng.range(3, 20),
            ..WriterOptions::default()
        };
        let ctx = format!("case {case} ({}, {})", corpus.description, opts.strategy);
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("idx");
        let repo = Repository::create(&root.path().join("repo")).unwrap();
        let writer = IndexWriter::create(&path, opts.analyzer, opts.format(), opts.strategy, options).unwrap();
        let mut model = Model::default();
        let mut taken: Vec<(String, Model)> = Vec::new();
        let mut next = 0u64;
        for step in 0..50 {
            match rng.weighted(&[10, 3, 3, 2]) {
                0 => {
                    let batch: Vec<Document> = (0..rng.range(1, 8))
                        .map(|_| {
                            next += 1;
                            Document {
                                id: format!("n{next}"),
                                ..rng.pick(&corpus.docs).clone()
                            }
                        })
                        .collect();
                    batch.iter().cloned().for_each(|d| model.add(d));
                    writer.add(batch).unwrap();
                }
                1 if !model.live.is_empty() => {
                    let ids: Vec<String> = (0..rng.range(1, 4)).map(|_| rng.pick(&model.live).id.clone()).collect();
                    ids.iter().for_each(|id| model.delete(id));
                    writer.delete(ids).unwrap();
                }
                2 => {
                    let name = format!("s{step}");
                    let info = repo
                        .take(
                            &name,
                            &[SnapshotSource {
                                name: "idx".into(),
                                writer: &writer,
                                metadata: serde_json::json!({"step": step}),
                            }],
                            serde_json::Value::Null,
                            &mut no_progress,
                        )
                        .unwrap();
                    assert_eq!(
                        info.indices["idx"].live_docs(),
                        model.live.len() as u64,
                        "{ctx} step {step}"
                    );
                    assert_eq!(info.indices["idx"].metadata["step"], step, "{ctx}");
                    shared += usize::from(info.bytes_added < info.bytes());
                    taken.push((name, model.clone()));
                }
                3 => {
                    writer.compact().unwrap();
                }
                _ => {}
            }
        }
        drop(writer);
        let listed: Vec<String> = repo.snapshots().unwrap().into_iter().map(|s| s.name).collect();
        assert_eq!(
            listed,
            taken.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(),
            "{ctx}: listing"
        );
        // Delete every other snapshot first: the others keep their files.
        for (i, (name, _)) in taken.iter().enumerate() {
            if i % 2 == 1 {
                repo.delete(name).unwrap();
            }
        }
        for (i, (name, m)) in taken.iter().enumerate() {
            let dest = root.path().join(format!("restored-{name}"));
            if i % 2 == 1 {
                let e = repo.restore(name, "idx", &dest, &mut no_progress).unwrap_err();
                assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
                continue;
            }
            repo.restore(name, "idx", &dest, &mut no_progress).unwrap();
            checked += check_restored(
                &dest,
                &m.live,
                &opts,
                &corpus.lexicon,
                &mut rng,
                &format!("{ctx} {name}"),
            );
            // A restored index takes writes like any other.
            let w = IndexWriter::open(&dest, options).unwrap();
            w.add(vec![Document::title_body("after-restore", "t", "b")]).unwrap();
            w.flush().unwrap();
            assert_eq!(w.searcher().num_docs(), m.live.len() as u64 + 1, "{ctx} {name}");
        }
        // Only the blobs of the remaining snapshots are left.
        let mut wanted: Vec<String> = repo
            .snapshots()
            .unwrap()
            .iter()
            .flat_map(|s| s.indices.values().flat_map(|i| i.files.iter().map(|f| f.blob.clone())))
            .collect();
        wanted.sort();
        wanted.dedup();
        let mut blobs: Vec<String> = std::fs::read_dir(root.path().join("repo/blobs"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        blobs.sort();
        assert_eq!(blobs, wanted, "{ctx}: blobs after deletions");
        // No staging directory is left in the index.
        let left: Vec<String> = std::fs::read_dir(&path)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(tierdex::index::SNAPSHOT_STAGING))
            .collect();
        assert!(left.is_empty(), "{ctx}: {left:?}");
    }
    assert!(checked > 300, "only {checked} answers checked");
    assert!(
        shared > 5,
        "later snapshots shared no files with earlier ones ({shared})"
    );
}

#[test]
fn a_snapshot_taken_while_writes_go_on_holds_a_prefix_of_them() {
    for strategy in [Strategy::Geometric, Strategy::InPlace] {
        let corpus = gen::corpus(SEED, 11);
        let mut opts = gen::index_options(SEED);
        opts.strategy = strategy;
        opts.layout = tierdex::layout::Layout::Grouped;
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("idx");
        let repo = Repository::create(&root.path().join("repo")).unwrap();
        // Automatic flushes every 15 batches, so only the snapshot's own
        // flush puts the last batches in the commit it copies.
        let options = WriterOptions {
            buffer_docs: 60,
            buffer_bytes: 256 << 20,
            ..WriterOptions::default()
        };
        let writer = Arc::new(IndexWriter::create(&path, opts.analyzer, opts.format(), strategy, options).unwrap());
        // Batch i adds documents b{i}-0..3 and deletes b{i-3}-0.
        let docs = Arc::new(corpus.docs.clone());
        let batch = move |i: usize| -> (Vec<Document>, Vec<String>) {
            let docs = (0..4)
                .map(|j| Document {
                    id: format!("b{i}-{j}"),
                    ..docs[(i * 4 + j) % docs.len()].clone()
                })
                .collect();
            let dels = if i >= 3 { vec![format!("b{}-0", i - 3)] } else { vec![] };
            (docs, dels)
        };
        let model_after = |n: usize| -> Model {
            let mut m = Model::default();
            for i in 0..n {
                let (docs, dels) = batch(i);
                docs.into_iter().for_each(|d| m.add(d));
                dels.iter().for_each(|id| m.delete(id));
            }
            m
        };
        let acked = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let w2 = writer.clone();
        let (a2, s2) = (acked.clone(), stop.clone());
        let batch2 = batch.clone();
        let writes = std::thread::spawn(move || {
            let mut i = 0;
            while !s2.load(Ordering::Relaxed) && i < 3000 {
                let (docs, dels) = batch2(i);
                let ops = docs
                    .into_iter()
                    .map(Op::Add)
                    .chain(dels.into_iter().map(Op::Delete))
                    .collect();
                w2.apply(ops).unwrap();
                i += 1;
                a2.store(i, Ordering::SeqCst);
            }
        });
        let mut points = Vec::new();
        for n in 0..4 {
            while acked.load(Ordering::SeqCst) < 40 * (n + 1) {
                std::thread::yield_now();
            }
            let before = acked.load(Ordering::SeqCst);
            let name = format!("live-{n}");
            repo.take(
                &name,
                &[SnapshotSource {
                    name: "idx".into(),
                    writer: &writer,
                    metadata: serde_json::Value::Null,
                }],
                serde_json::Value::Null,
                &mut no_progress,
            )
            .unwrap();
            let after = acked.load(Ordering::SeqCst);
            points.push((name, before, after));
        }
        stop.store(true, Ordering::Relaxed);
        writes.join().unwrap();
        let mut rng = Rng::new(SEED);
        for (name, before, after) in points {
            let dest = root.path().join(&name);
            repo.restore(&name, "idx", &dest, &mut no_progress).unwrap();
            let s = Searcher::open(&dest).unwrap();
            // Each batch is one write, so the snapshot holds a prefix of
            // them: every batch acknowledged before it began, none begun
            // after it ended.
            let held = (0..=after + 1)
                .rev()
                .find(|&i| s.get(&format!("b{i}-1")).unwrap().is_some())
                .map_or(0, |i| i + 1);
            assert!(
                held >= before && held <= after + 1,
                "{strategy} {name}: holds {held} batches, {before} acknowledged before and {after} after"
            );
            let m = model_after(held);
            check_restored(
                &dest,
                &m.live,
                &opts,
                &corpus.lexicon,
                &mut rng,
                &format!("{strategy} {name}"),
            );
        }
    }
}

#[test]
fn the_repository_checks_what_it_restores_and_cleans_what_a_crash_left() {
    let root = tempfile::tempdir().unwrap();
    let path = root.path().join("idx");
    let writer = IndexWriter::create(
        &path,
        Default::default(),
        Default::default(),
        Strategy::NoMerge,
        WriterOptions::default(),
    )
    .unwrap();
    let docs: Vec<Document> = (0..200)
        .map(|i| {
            Document::title_body(
                format!("d{i}"),
                format!("title {i}"),
                format!("body words number {i} of many"),
            )
        })
        .collect();
    writer.add(docs).unwrap();
    let repo_dir = root.path().join("repo");
    let repo = Repository::create(&repo_dir).unwrap();
    let source = |w| SnapshotSource {
        name: "idx".into(),
        writer: w,
        metadata: serde_json::Value::Null,
    };
    // Names are checked; a name is taken once.
    for bad in ["", "Upper", "_x", "a/b", "a b"] {
        let e = repo
            .take(bad, &[source(&writer)], serde_json::Value::Null, &mut no_progress)
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BadInput, "{bad}: {e}");
    }
    let mut calls = Vec::new();
    let info = repo
        .take(
            "one",
            &[source(&writer)],
            serde_json::Value::Null,
            &mut |done, total| calls.push((done, total)),
        )
        .unwrap();
    assert_eq!(
        calls.last().map(|c| c.0),
        Some(info.bytes()),
        "progress ends at the total"
    );
    assert_eq!(info.bytes_added, info.bytes());
    let e = repo
        .take("one", &[source(&writer)], serde_json::Value::Null, &mut no_progress)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
    // A second snapshot of an unchanged index copies nothing.
    let two = repo
        .take("two", &[source(&writer)], serde_json::Value::Null, &mut no_progress)
        .unwrap();
    assert_eq!(two.bytes_added, 0);

    // What a snapshot killed half-way leaves: a temporary blob, a blob no
    // snapshot names, a temporary snapshot file, a staging directory.
    std::fs::write(repo_dir.join("blobs/.tmp-1-2-3"), b"half").unwrap();
    std::fs::write(repo_dir.join("blobs/seg000099.pst.10.00"), b"orphan").unwrap();
    std::fs::write(repo_dir.join("snapshots/.three.json.tmp-1"), b"{").unwrap();
    let staging = path.join(format!("{}1-2-3", tierdex::index::SNAPSHOT_STAGING));
    std::fs::create_dir(&staging).unwrap();
    assert_eq!(
        repo.snapshots().unwrap().len(),
        2,
        "an unfinished snapshot is not listed"
    );
    repo.take("three", &[source(&writer)], serde_json::Value::Null, &mut no_progress)
        .unwrap();
    let blobs: Vec<String> = std::fs::read_dir(repo_dir.join("blobs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !blobs.iter().any(|b| b.starts_with(".tmp") || b.contains("seg000099")),
        "{blobs:?}"
    );
    assert!(!repo_dir.join("snapshots/.three.json.tmp-1").exists());
    drop(writer);
    IndexWriter::open(&path, WriterOptions::default()).unwrap();
    assert!(
        !staging.exists(),
        "a writer opening the index removes a stale staging directory"
    );

    // Restoring: into a non-empty directory is refused; a damaged blob is
    // reported, naming it, and leaves nothing behind.
    let busy = root.path().join("busy");
    std::fs::create_dir(&busy).unwrap();
    std::fs::write(busy.join("x"), b"x").unwrap();
    let e = repo.restore("one", "idx", &busy, &mut no_progress).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
    let e = repo
        .restore("one", "other", &root.path().join("r0"), &mut no_progress)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    assert!(e.to_string().contains("idx"), "names what the snapshot holds: {e}");
    let info = repo.snapshot("one").unwrap();
    let biggest = info.indices["idx"].files.iter().max_by_key(|f| f.len).unwrap().clone();
    let blob = repo_dir.join("blobs").join(&biggest.blob);
    let mut bytes = std::fs::read(&blob).unwrap();
    bytes[10] ^= 0x40;
    std::fs::write(&blob, &bytes).unwrap();
    let dest = root.path().join("r1");
    let e = repo.restore("one", "idx", &dest, &mut no_progress).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
    assert!(e.to_string().contains(&biggest.name), "names the file: {e}");
    assert!(!dest.exists());
    let strays: Vec<_> = std::fs::read_dir(root.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("restore"))
        .collect();
    assert!(strays.is_empty(), "{strays:?}");
    // An edited snapshot file is reported, and garbage collection then
    // removes nothing.
    let file = repo_dir.join("snapshots/two.json");
    let text = std::fs::read_to_string(&file)
        .unwrap()
        .replacen("\"bytes_added\": 0", "\"bytes_added\": 1", 1);
    std::fs::write(&file, text).unwrap();
    let e = repo.snapshots().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
    let before = std::fs::read_dir(repo_dir.join("blobs")).unwrap().count();
    repo.delete("three").unwrap();
    assert_eq!(std::fs::read_dir(repo_dir.join("blobs")).unwrap().count(), before);
    // Not a repository; a non-empty directory is not made one.
    let e = Repository::open(root.path()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    let e = Repository::create(&busy).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
}
