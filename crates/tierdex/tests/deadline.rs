//! Queries stop at their deadline: `Error::TimedOut` once it has passed,
//! identical answers when it is far.

use std::time::{Duration, Instant};

use tierdex::indexing::{build_index, IndexOptions};
use tierdex::search::{Mode, Searcher};
use tierdex::{Document, Error};

#[test]
fn a_passed_deadline_stops_every_mode_and_a_far_one_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let docs = (0..5000).map(|i| {
        Ok(Document::title_body(
            i.to_string(),
            format!("doc {}", i % 13),
            format!("common words w{} w{} common", i % 97, i % 31),
        ))
    });
    build_index(
        docs,
        dir.path(),
        &IndexOptions {
            segment_docs: 1500,
            merge: false,
            ..IndexOptions::default()
        },
    )
    .unwrap();
    let s = Searcher::open(dir.path()).unwrap();
    assert!(s.index().segments().len() > 1);
    for q in ["common", "common w1 w2", "+common +w5", "\"words w3\"", "common -w7"] {
        let q = tierdex::query::parse(q).unwrap();
        for (mode, k) in [(Mode::TopK, 10), (Mode::TopKAndCount, 10), (Mode::Count, 0)] {
            let want = s.search_parsed(&q, mode, k).unwrap();
            let far = s
                .search_until(&q, mode, k, Some(Instant::now() + Duration::from_secs(3600)))
                .unwrap();
            assert_eq!(want, far, "{q:?} {mode:?}");
            let past = s.search_until(&q, mode, k, Some(Instant::now()));
            assert!(matches!(past, Err(Error::TimedOut(_))), "{q:?} {mode:?}: {past:?}");
        }
    }
}
