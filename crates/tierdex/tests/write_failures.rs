//! The writer when the operating system refuses a write (issue #20 item
//! 9): a failed flush (a full disk, too many open files) is reported as an
//! I/O error, the writer goes on answering writes, and once the fault is
//! gone the next flush succeeds with every acknowledged change in it; a
//! batch whose log write or sync fails is reported failed and never
//! applied. Faults are injected per directory ([`faults::inject`]), at each
//! point of a flush in turn.

use std::collections::BTreeSet;
use std::path::Path;

use tierdex::error::{Error, ErrorKind};
use tierdex::search::Searcher;
use tierdex::storage::faults::{self, FaultOp};
use tierdex::update::{IndexWriter, Strategy, WriterOptions};
use tierdex::Document;

fn doc(id: &str, i: usize) -> Document {
    Document::title_body(
        id.to_string(),
        format!("title {id}"),
        format!("common words {} and {} {}", i % 11, i % 5, "pad ".repeat(i % 7)),
    )
}

fn live_ids(s: &Searcher) -> BTreeSet<String> {
    let index = s.index();
    (0..index.num_docs() as u32)
        .filter(|&d| !index.is_deleted(d))
        .map(|d| s.doc_id(d).unwrap())
        .collect()
}

fn os_error(e: &Error) -> Option<i32> {
    match e {
        Error::Io { source, .. } => source.raw_os_error(),
        _ => None,
    }
}

fn writer(dir: &Path, strategy: Strategy) -> IndexWriter {
    IndexWriter::create(
        dir,
        Default::default(),
        Default::default(),
        strategy,
        WriterOptions {
            // Flushes happen when the test asks for them.
            buffer_docs: 100_000,
            ..WriterOptions::default()
        },
    )
    .unwrap()
}

/// The files of `dir` that start with `seg`: segment files and tombstones.
fn segment_files(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("seg"))
        .collect()
}

/// Fails the `k`-th file creation, write or sync of a flush (points of the
/// flush in turn: segment files, tombstones, the manifest, the log's new
/// file) with `errno`, and checks that the writer recovers.
fn fail_each_step(strategy: Strategy, op: FaultOp, errno: i32) {
    fail_each_step_of(strategy, op, errno, false);
    // The index's first flush (an in-place one creates the chain).
    fail_each_step_of(strategy, op, errno, true);
}

fn fail_each_step_of(strategy: Strategy, op: FaultOp, errno: i32, first: bool) {
    let mut k = 0;
    loop {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("idx");
        let w = writer(&dir, strategy);
        let mut model: BTreeSet<String> = BTreeSet::new();
        let add = |model: &mut BTreeSet<String>, from: usize, n: usize| {
            let ids: Vec<String> = (from..from + n).map(|i| format!("d{i}")).collect();
            w.add(ids.iter().enumerate().map(|(j, id)| doc(id, from + j)).collect())
                .unwrap();
            model.extend(ids);
        };
        // A committed segment with documents to delete, then a buffer.
        add(&mut model, 0, 40);
        if !first {
            w.flush().unwrap();
        }
        add(&mut model, 40, 30);
        w.delete(vec!["d3".into(), "d45".into()]).unwrap();
        model.remove("d3");
        model.remove("d45");
        faults::inject(&dir, op, errno, k, 1);
        let failed = w.flush().err();
        let fired = !faults::pending(&dir);
        faults::clear(&dir);
        if let Some(e) = &failed {
            assert_eq!(e.kind(), ErrorKind::Io, "step {k}: {e}");
            assert_eq!(os_error(e), Some(errno), "step {k}: {e}");
        }
        // The writer answers: more additions and deletions, searchable.
        add(&mut model, 70, 10);
        w.delete(vec!["d5".into(), "d71".into()]).unwrap();
        model.remove("d5");
        model.remove("d71");
        assert_eq!(live_ids(&w.refresh().unwrap()), model, "{strategy} step {k}");
        // The next flush succeeds and keeps everything.
        w.flush()
            .unwrap_or_else(|e| panic!("{strategy} step {k}: the flush after the fault failed: {e}"));
        assert_eq!(live_ids(&w.searcher()), model, "{strategy} step {k}");
        drop(w);
        // Nothing is left over but what the manifest names, and a reopened
        // index (and a rebuilt one, read-only) holds every acknowledged change.
        let w = IndexWriter::open(&dir, WriterOptions::default()).unwrap();
        assert_eq!(live_ids(&w.searcher()), model, "{strategy} step {k}: after reopening");
        let named: BTreeSet<String> = tierdex::index::manifest::Manifest::load(&dir)
            .unwrap()
            .segments
            .iter()
            .flat_map(|s| s.all_file_names())
            .collect();
        assert_eq!(segment_files(&dir), named, "{strategy} step {k}: stray files");
        drop(w);
        assert_eq!(live_ids(&Searcher::open(&dir).unwrap()), model);
        if !fired {
            assert!(k > 2, "{strategy}: the fault never fired");
            break;
        }
        // Every creation and sync; writes (thousands) at spreading intervals.
        k += match op {
            FaultOp::Write => 1 + k / 3,
            _ => 1,
        };
    }
}

#[test]
fn a_full_disk_at_any_step_of_a_flush_loses_nothing() {
    for strategy in [Strategy::Logarithmic, Strategy::InPlace] {
        fail_each_step(strategy, FaultOp::Create, libc::ENOSPC);
        fail_each_step(strategy, FaultOp::Write, libc::ENOSPC);
    }
}

#[test]
fn too_many_open_files_is_an_io_error_and_passes() {
    fail_each_step(Strategy::Geometric, FaultOp::Create, libc::EMFILE);
    fail_each_step(Strategy::InPlaceContiguous, FaultOp::Sync, libc::EIO);
}

/// A batch whose log write or sync fails is an I/O error, is never applied,
/// and the next batches go on.
#[test]
fn a_batch_the_log_refuses_is_never_applied() {
    for (op, errno) in [(FaultOp::Write, libc::ENOSPC), (FaultOp::Sync, libc::EIO)] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("idx");
        let w = writer(&dir, Strategy::Logarithmic);
        w.add(vec![doc("kept", 1)]).unwrap();
        let log = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("wal-"))
            .unwrap();
        faults::inject(&log, op, errno, 0, 1);
        let e = w.add(vec![doc("refused", 2)]).unwrap_err();
        faults::clear(&log);
        assert_eq!(e.kind(), ErrorKind::Io, "{e}");
        assert_eq!(os_error(&e), Some(errno), "{e}");
        w.add(vec![doc("later", 3)]).unwrap();
        let want: BTreeSet<String> = ["kept", "later"].iter().map(|s| s.to_string()).collect();
        assert_eq!(live_ids(&w.refresh().unwrap()), want);
        drop(w);
        let w = IndexWriter::open(&dir, WriterOptions::default()).unwrap();
        assert_eq!(live_ids(&w.searcher()), want, "{op:?}");
    }
}
