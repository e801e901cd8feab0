//! A commit holds a prefix of the acknowledged writes: the tombstones it
//! writes are exactly those of the batches up to the log sequence number
//! its manifest records, whatever was deleted (and made searchable) since.
//! Commits that record an older sequence number than the writer's last
//! (the merge of an in-place chain's parts, compactions, a flush whose
//! segment was built while writes went on) once wrote every tombstone
//! materialised so far: a snapshot, which copies the commit without the
//! log, then held deletions of batches whose additions it did not hold.

use super::*;

fn docs(from: usize, to: usize) -> Vec<Document> {
    (from..to)
        .map(|i| Document::title_body(format!("d{i}"), format!("title {i}"), format!("body words {i}")))
        .collect()
}

fn writer(dir: &Path, strategy: Strategy) -> IndexWriter {
    let options = WriterOptions {
        buffer_docs: 1_000,
        compact_deleted_ratio: 1.0,
        ..WriterOptions::default()
    };
    IndexWriter::create(dir, Default::default(), Default::default(), strategy, options).unwrap()
}

fn flush_batch(w: &IndexWriter, from: usize, to: usize) {
    w.add(docs(from, to)).unwrap();
    let mut st = w.lock();
    w.flush_locked(&mut st).unwrap();
}

/// Which of `ids` the committed index (read without the log) holds.
fn committed(dir: &Path, ids: &[&str]) -> Vec<String> {
    let s = Searcher::open(dir).unwrap();
    ids.iter()
        .filter(|id| s.get(id).unwrap().is_some())
        .map(|id| id.to_string())
        .collect()
}

/// The deleted documents are in the committed index as long as no commit
/// holds their deletions' batch, and gone once the log is replayed.
fn check(dir: &Path, w: IndexWriter, deleted: &[&str]) {
    let applied = Manifest::load(dir).unwrap().applied_seq;
    assert!(
        applied < w.stats().last_seq,
        "the deletions must come after the last commit"
    );
    assert_eq!(
        committed(dir, deleted),
        deleted,
        "the commit holds deletions of batches after it"
    );
    drop(w);
    let w = IndexWriter::open(dir, WriterOptions::default()).unwrap();
    w.refresh().unwrap();
    for id in deleted {
        assert!(!w.contains(id), "{id}: its deletion was acknowledged");
    }
}

#[test]
fn merging_chain_parts_commits_no_later_deletion() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("idx");
    let w = writer(&dir, Strategy::InPlace);
    for b in 0..4 {
        flush_batch(&w, b * 4, b * 4 + 4);
    }
    let parts = |w: &IndexWriter| {
        let st = w.lock();
        st.durable[0].reader.meta().chain.as_ref().unwrap().parts.len()
    };
    let before = parts(&w);
    w.delete(vec!["d0".into(), "d13".into()]).unwrap();
    w.refresh().unwrap();
    {
        let mut st = w.lock();
        w.merge_chain_parts(&mut st).unwrap();
    }
    assert!(parts(&w) < before, "the chain's parts merged");
    check(&dir, w, &["d0", "d13"]);
}

#[test]
fn compaction_commits_no_later_deletion() {
    for strategy in [Strategy::NoMerge, Strategy::InPlace] {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("idx");
        let w = writer(&dir, strategy);
        flush_batch(&w, 0, 8);
        flush_batch(&w, 8, 12);
        w.delete(vec!["d1".into(), "d9".into()]).unwrap();
        w.refresh().unwrap();
        let mut report = FlushReport::default();
        w.compact_parts(0.0, &mut report).unwrap();
        check(&dir, w, &["d1", "d9"]);
    }
}

#[test]
fn a_segment_deleted_whole_after_the_commit_stays_in_it() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("idx");
    let w = writer(&dir, Strategy::NoMerge);
    flush_batch(&w, 0, 3);
    flush_batch(&w, 3, 6);
    w.delete(vec!["d0".into(), "d1".into(), "d2".into()]).unwrap();
    w.refresh().unwrap();
    let mut report = FlushReport::default();
    w.compact_parts(1.0, &mut report).unwrap();
    check(&dir, w, &["d0", "d1", "d2"]);
}

/// A batch's external-log mark is durable with the batch: kept in the
/// manifest by the flush that holds it, replayed from the log otherwise,
/// and never recorded by a commit older than its batch.
#[test]
fn source_marks_follow_the_commits_and_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path(), Strategy::default());
    assert_eq!(w.source_seq(), 0);
    let mut ops: Vec<Op> = docs(0, 10).into_iter().map(Op::Add).collect();
    ops.push(Op::Mark(5));
    w.apply(ops).unwrap();
    {
        let mut st = w.lock();
        w.flush_locked(&mut st).unwrap();
    }
    assert_eq!(Manifest::load(dir.path()).unwrap().source_seq, 5);
    w.apply(vec![Op::Delete("d3".into()), Op::Mark(9)]).unwrap();
    assert_eq!(w.source_seq(), 9);
    // A commit at the older log position (as a compaction's) keeps 5.
    {
        let mut st = w.lock();
        let before = st.manifest.segments.clone();
        let applied = st.manifest.applied_seq;
        w.commit_manifest(&mut st, &before, applied, &mut FlushReport::default())
            .unwrap();
    }
    assert_eq!(Manifest::load(dir.path()).unwrap().source_seq, 5);
    drop(w);
    let w = IndexWriter::open(dir.path(), WriterOptions::default()).unwrap();
    assert_eq!(w.source_seq(), 9, "the mark of a logged batch is replayed");
    assert!(!w.contains("d3"));
    w.apply(vec![Op::Mark(12)]).unwrap();
    w.flush().unwrap();
    assert_eq!(Manifest::load(dir.path()).unwrap().source_seq, 12);
    drop(w);
    let w = IndexWriter::open(dir.path(), WriterOptions::default()).unwrap();
    assert_eq!(w.source_seq(), 12);
    assert_eq!(w.live_docs(), 9);
}
