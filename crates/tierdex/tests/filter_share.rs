//! How freely phrase queries choose filters (issue #25): as freely as the
//! positions they save when the index stays in memory (the `ram` tier, or
//! the page-cache tiers with room for the whole index), by the strict I/O
//! rule when it is read from the device (`direct`). Answers are the same
//! either way (`query_vs_oracle` runs every tier).

use tierdex::bloom::{MAX_FILTER_SHARE, RESIDENT_FILTER_SHARE};
use tierdex::indexing::{build_index, IndexOptions};
use tierdex::query::weight::filter_share;
use tierdex::storage::{memory, Tier, TierOptions};
use tierdex::{Document, Index, OpenOptions};

#[test]
fn filters_are_chosen_by_where_the_index_is_read_from() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("idx");
    let docs = (0..200).map(|i| {
        Ok(Document::title_body(
            format!("d{i}"),
            format!("title {i}"),
            format!("the quick brown fox {} jumps over the lazy dog", i % 7),
        ))
    });
    build_index(docs, &dir, &IndexOptions::default()).unwrap();
    let share = |tier| {
        let index = Index::open(
            &dir,
            OpenOptions {
                tier: TierOptions::on(tier),
                ..Default::default()
            },
        )
        .unwrap();
        filter_share(&index)
    };
    assert_eq!(share(Tier::Ram), RESIDENT_FILTER_SHARE);
    assert_eq!(share(Tier::Direct), MAX_FILTER_SHARE);
    // A few hundred KiB of index fit in any memory this test runs in.
    assert!(memory::available().is_some_and(|m| m > 64 << 20));
    assert_eq!(share(Tier::Mmap), RESIDENT_FILTER_SHARE);
    assert_eq!(share(Tier::Buffered), RESIDENT_FILTER_SHARE);
}
