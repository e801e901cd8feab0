//! What a build syncs (issue #24): the segments its final merge replaces
//! are never synced (nothing is committed before the merge, and they are
//! removed once merged), while every file of the committed index is.
//! Syncs are counted by failing the n-th one ([`faults::inject`]).

use std::path::Path;

use tierdex::corpus::CorpusError;
use tierdex::indexing::reorder::BpParams;
use tierdex::indexing::{build_index, IndexOptions};
use tierdex::search::{Mode, Searcher};
use tierdex::storage::faults::{self, FaultOp};
use tierdex::{Document, ErrorKind};

fn docs(n: usize) -> impl Iterator<Item = Result<Document, CorpusError>> {
    (0..n).map(|i| {
        Ok(Document::title_body(
            format!("d{i}"),
            format!("title {i}"),
            format!("body words {} and {} of number {i}", i % 7, i % 3),
        ))
    })
}

/// How many file syncs a build of `n` documents makes: the least number of
/// syncs allowed before the next one fails with which the build succeeds.
/// Every failing build reports the injected error and leaves nothing.
fn syncs(root: &Path, n: usize, opts: &IndexOptions) -> u64 {
    for allowed in 0..500 {
        // The build is made aside (a sibling of `dir`): the fault covers both.
        let parent = root.join(format!("try{allowed}"));
        let dir = parent.join("idx");
        faults::inject(&parent, FaultOp::Sync, libc::EIO, allowed, 1);
        let built = build_index(docs(n), &dir, opts);
        faults::clear(&parent);
        match built {
            Ok(_) => {
                let s = Searcher::open(&dir).unwrap();
                assert_eq!(s.search("body", Mode::Count, 0).unwrap().count, Some(n as u64));
                return allowed;
            }
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::Io, "{e}");
                assert!(!dir.exists(), "a failed build leaves nothing: {}", dir.display());
            }
        }
    }
    panic!("no build succeeded");
}

#[test]
fn merged_segments_are_not_synced_and_the_committed_ones_are() {
    let root = tempfile::tempdir().unwrap();
    let always = Some(BpParams::default());
    // One segment, rewritten by the final merge (the reordering): the
    // merged segment's files are the build's syncs.
    let one = IndexOptions {
        segment_docs: 1000,
        threads: 1,
        merge: true,
        reorder: always,
        ..Default::default()
    };
    let one_merged = syncs(&root.path().join("one"), 40, &one);
    assert!(one_merged >= 5, "the merged segment's files are synced ({one_merged})");
    // Five segments merged into one: the same syncs, none for the five.
    let five = IndexOptions {
        segment_docs: 8,
        ..one.clone()
    };
    assert_eq!(syncs(&root.path().join("five"), 40, &five), one_merged);
    // One segment kept as written (nothing to merge, no reordering): its
    // files, written unsynced, are synced before the index is committed.
    let kept = IndexOptions {
        reorder: None,
        ..one.clone()
    };
    assert_eq!(syncs(&root.path().join("kept"), 40, &kept), one_merged);
    // Without a final merge every segment is synced as it is written.
    let unmerged = IndexOptions {
        merge: false,
        ..five.clone()
    };
    assert!(syncs(&root.path().join("unmerged"), 40, &unmerged) > 2 * one_merged);
}
