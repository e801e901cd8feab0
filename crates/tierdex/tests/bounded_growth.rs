//! Disk use stays bounded under updates (issue #20 item 10): replacing the
//! same documents over and over flushes on the log's size (the buffer's
//! live documents never reach their budget), and deleting most documents
//! compacts the segments that hold them without being asked.

use std::path::Path;

use tierdex::index::manifest::Manifest;
use tierdex::search::{Mode, Searcher};
use tierdex::update::{IndexWriter, Strategy, WriterOptions};
use tierdex::Document;

fn doc(i: usize, round: usize) -> Document {
    Document::title_body(
        format!("d{i}"),
        format!("title {i} round {round}"),
        format!(
            "common words {} and more words {} of round {round} {}",
            i % 13,
            i % 7,
            "pad ".repeat(i % 9)
        ),
    )
}

fn log_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("wal-"))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

fn index_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("seg"))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

fn count(s: &Searcher, q: &str) -> u64 {
    s.search(q, Mode::Count, 0).unwrap().count.unwrap()
}

#[test]
fn replacing_the_same_documents_flushes_on_the_log_size() {
    const BUDGET: usize = 256 << 10;
    for strategy in [Strategy::Logarithmic, Strategy::InPlace] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("idx");
        let w = IndexWriter::create(
            &dir,
            Default::default(),
            Default::default(),
            strategy,
            WriterOptions {
                max_log_bytes: Some(BUDGET),
                ..WriterOptions::default()
            },
        )
        .unwrap();
        let mut largest = 0;
        for round in 0..40 {
            for chunk in (0..300).collect::<Vec<_>>().chunks(100) {
                let docs = chunk.iter().map(|&i| doc(i, round)).collect();
                w.add(docs).unwrap();
                largest = largest.max(log_bytes(&dir));
            }
        }
        let stats = w.stats();
        assert!(stats.flushes > 0, "{strategy}: never flushed: {stats:?}");
        assert!(
            largest <= (BUDGET + (64 << 10)) as u64,
            "{strategy}: the log grew to {largest} bytes with a budget of {BUDGET}"
        );
        assert!(stats.buffered_docs <= 300, "{stats:?}");
        let s = w.refresh().unwrap();
        assert_eq!(s.index().live_docs(), 300);
        assert_eq!(count(&s, "\"round 39\""), 300);
    }
}

#[test]
fn deleting_most_documents_compacts_them_away() {
    for strategy in [Strategy::Logarithmic, Strategy::InPlace, Strategy::InPlaceContiguous] {
        for ratio in [WriterOptions::default().compact_deleted_ratio, 1.0] {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path().join("idx");
            let w = IndexWriter::create(
                &dir,
                Default::default(),
                Default::default(),
                strategy,
                WriterOptions {
                    compact_deleted_ratio: ratio,
                    ..WriterOptions::default()
                },
            )
            .unwrap();
            w.add((0..1000).map(|i| doc(i, 0)).collect()).unwrap();
            w.flush().unwrap();
            let full = index_bytes(&dir);
            w.delete((200..1000).map(|i| format!("d{i}")).collect()).unwrap();
            w.flush().unwrap();
            let after = index_bytes(&dir);
            let m = Manifest::load(&dir).unwrap();
            let deleted: u64 = m.num_docs() - m.live_docs();
            let s = w.refresh().unwrap();
            assert_eq!(count(&s, "common"), 200, "{strategy}");
            if ratio < 1.0 {
                assert_eq!(deleted, 0, "{strategy}: not compacted: {m:?}");
                assert!(after * 2 < full, "{strategy}: {full} bytes became {after}");
            } else {
                // Turned off: the deleted documents stay until `compact`.
                assert_eq!(deleted, 800, "{strategy}");
                w.compact().unwrap();
                assert!(index_bytes(&dir) * 2 < full, "{strategy}");
            }
            drop(w);
            let s = Searcher::open(&dir).unwrap();
            assert_eq!(count(&s, "common"), 200, "{strategy}");
        }
    }
}

/// A compaction rewrites its segment without holding the writer: writes
/// made meanwhile (deletions and replacements of the documents being
/// rewritten among them) are kept, and none comes back.
#[test]
fn writes_during_a_compaction_are_kept() {
    use std::collections::BTreeSet;
    for strategy in [Strategy::Logarithmic, Strategy::InPlace] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("idx");
        let w = IndexWriter::create(
            &dir,
            Default::default(),
            Default::default(),
            strategy,
            WriterOptions {
                compact_deleted_ratio: 1.0,
                ..WriterOptions::default()
            },
        )
        .unwrap();
        w.add((0..3000).map(|i| doc(i, 0)).collect()).unwrap();
        w.flush().unwrap();
        w.delete((0..3000).filter(|i| i % 3 != 0).map(|i| format!("d{i}")).collect())
            .unwrap();
        w.flush().unwrap();
        let mut live: BTreeSet<usize> = (0..3000).filter(|i| i % 3 == 0).collect();
        let mut replaced: BTreeSet<usize> = BTreeSet::new();
        std::thread::scope(|s| {
            let compaction = s.spawn(|| w.compact().unwrap());
            let ids: Vec<usize> = (0..3000).step_by(3).collect();
            for chunk in ids.chunks(20) {
                let (gone, again): (Vec<usize>, Vec<usize>) = chunk.iter().partition(|&&i| i % 2 == 0);
                w.delete(gone.iter().map(|i| format!("d{i}")).collect()).unwrap();
                w.add(again.iter().map(|&i| doc(i, 1)).collect()).unwrap();
                for i in gone {
                    live.remove(&i);
                }
                replaced.extend(again);
                if compaction.is_finished() && chunk[0] > 300 {
                    break;
                }
            }
            let r = compaction.join().unwrap();
            // Compacted, or merged with the flushed buffer (which drops the
            // deleted documents too) by the compaction's flush.
            assert!(r.segments_compacted >= 1 || r.segments_merged >= 2, "{strategy}: {r:?}");
        });
        w.flush().unwrap();
        let s = w.refresh().unwrap();
        let index = s.index();
        let got: BTreeSet<String> = (0..index.num_docs() as u32)
            .filter(|&d| !index.is_deleted(d))
            .map(|d| s.doc_id(d).unwrap())
            .collect();
        let want: BTreeSet<String> = live.iter().map(|i| format!("d{i}")).collect();
        assert_eq!(got, want, "{strategy}");
        assert_eq!(count(&s, "\"round 1\""), replaced.len() as u64, "{strategy}");
        assert_eq!(
            count(&s, "\"round 0\""),
            (live.len() - replaced.len()) as u64,
            "{strategy}"
        );
        drop(w);
        let s = Searcher::open(&dir).unwrap();
        assert_eq!(s.index().live_docs(), live.len() as u64, "{strategy}");
    }
}
