//! Open files and mappings stay bounded under a long run of updates (issue
//! #20 item 10): a writer that replaces the same documents, flushes and
//! refreshes over and over, with searches on each snapshot, must not keep
//! more descriptors or memory mappings the longer it runs. Counted from
//! `/proc/self/fd` and `/proc/self/maps`, so this file holds one test (a
//! test binary's tests share the process).

use std::path::Path;

use tierdex::search::{Mode, Searcher};
use tierdex::storage::{Tier, TierOptions};
use tierdex::update::{IndexWriter, Strategy, WriterOptions};
use tierdex::Document;

fn fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

fn maps() -> usize {
    std::fs::read_to_string("/proc/self/maps").map_or(0, |m| m.lines().count())
}

fn doc(i: usize, round: usize) -> Document {
    Document::title_body(
        format!("d{i}"),
        format!("title {i} r{round}"),
        format!("common words {} and {} round{}", i % 13, i % 7, round % 5),
    )
}

/// Counts (fds, maps) after `cycles` update cycles on a writer of
/// `strategy` on `tier`, sampled after a warm-up and at the end.
fn run(dir: &Path, strategy: Strategy, tier: Tier, cycles: usize) -> ((usize, usize), (usize, usize)) {
    let w = IndexWriter::create(
        dir,
        Default::default(),
        Default::default(),
        strategy,
        WriterOptions {
            buffer_docs: 25,
            tier: TierOptions::on(tier),
            ..WriterOptions::default()
        },
    )
    .unwrap();
    let mut warm = (0, 0);
    for c in 0..cycles {
        let docs = (0..20).map(|i| doc((c * 7 + i) % 60, c)).collect();
        w.add(docs).unwrap();
        if c % 3 == 0 {
            w.delete(vec![format!("d{}", (c * 11) % 60)]).unwrap();
        }
        w.flush().unwrap();
        let s = w.refresh().unwrap();
        s.search("common", Mode::TopKAndCount, 5).unwrap();
        if c == cycles / 4 {
            warm = (fds(), maps());
        }
    }
    // A read-only searcher opened and dropped does not leak either.
    drop(Searcher::open(dir).unwrap());
    (warm, (fds(), maps()))
}

#[test]
fn open_files_and_mappings_stay_bounded() {
    // An in-place index's flushes each add a part with its own files: its
    // parts merge (O(log n) of them stay), where every file used to stay
    // open, mapped or not. The merge strategies merge segments.
    for (strategy, tier) in [
        (Strategy::InPlace, Tier::Mmap),
        (Strategy::InPlaceContiguous, Tier::Buffered),
        (Strategy::Geometric, Tier::Buffered),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let (warm, end) = run(&tmp.path().join("idx"), strategy, tier, 50);
        eprintln!(
            "{strategy} on {tier:?}: fds {} -> {}, maps {} -> {}",
            warm.0, end.0, warm.1, end.1
        );
        {
            assert!(
                end.0 <= warm.0 + 12,
                "{strategy} on {tier:?}: open descriptors grew from {} to {}",
                warm.0,
                end.0
            );
            assert!(
                end.1 <= warm.1 + 30,
                "{strategy} on {tier:?}: memory mappings grew from {} to {}",
                warm.1,
                end.1
            );
        }
    }
}
