//! A merge streams each term's postings into the encoder (issue #24): it
//! never holds a term's decoded documents, positions and offsets whole. A
//! global allocator tracks the bytes live on the heap; merging segments in
//! which one term has 4,800,000 occurrences (58 MB as decoded positions and
//! offsets, about 1 MB encoded) must raise the peak by far less than
//! the decoded size, on every layout. The merged index must answer like
//! the unmerged one.

mod support;

use std::alloc::{GlobalAlloc, Layout as AllocLayout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use support::merge::merge_into;
use tierdex::indexing::{build_index, IndexOptions};
use tierdex::layout::Layout;
use tierdex::search::{Mode, Searcher};
use tierdex::{Document, Index, OpenOptions};

struct Tracking;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: forwards to the system allocator unchanged; the counters are
// atomics (no allocation, no locking).
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: AllocLayout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: AllocLayout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: AllocLayout, new_size: usize) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Tracking = Tracking;

/// Documents per segment, segments, and occurrences of the common term per
/// document.
const DOCS: usize = 2_000;
const SEGMENTS: usize = 4;
const REPEAT: usize = 600;

fn docs() -> Vec<Document> {
    let mut body = String::with_capacity(REPEAT * 4);
    for _ in 0..REPEAT {
        body.push_str("ann ");
    }
    (0..DOCS * SEGMENTS)
        .map(|i| {
            Document::new(format!("d{i}"))
                .with_text("title", format!("doc {} rare{}", i % 7, i % 101))
                .with_text("body", format!("{body} tail{}", i % 13))
        })
        .collect()
}

#[test]
fn merge_never_holds_a_terms_decoded_postings() {
    let docs = docs();
    let occurrences = DOCS * SEGMENTS * REPEAT;
    // Positions, starts and ends as u32: what holding the term decoded costs.
    let decoded = occurrences * 12;
    for layout in [Layout::Grouped, Layout::Split] {
        let tmp = tempfile::tempdir().unwrap();
        let (src_dir, out) = (tmp.path().join("src"), tmp.path().join("merged"));
        let opts = IndexOptions {
            layout,
            merge: false,
            segment_docs: DOCS,
            threads: 1,
            ..IndexOptions::default()
        };
        build_index(docs.iter().cloned().map(Ok), &src_dir, &opts).unwrap();
        let src = Index::open(&src_dir, OpenOptions::default()).unwrap();
        assert_eq!(src.segments().len(), SEGMENTS, "{layout:?}");

        let base = LIVE.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        merge_into(&src, &out, 1);
        let rise = PEAK.load(Ordering::Relaxed) - base;
        assert!(
            rise < decoded / 4,
            "{layout:?}: the merge's heap rose by {rise} bytes; the common term decoded is {decoded}"
        );

        let merged = Index::open(&out, OpenOptions::default()).unwrap();
        assert_eq!(merged.segments().len(), 1);
        drop((src, merged));
        let (a, b) = (Searcher::open(&src_dir).unwrap(), Searcher::open(&out).unwrap());
        for q in ["ann", "\"ann ann\"", "ann tail3", "rare17 doc", "\"ann tail5\""] {
            let (ra, rb) = (
                a.search(q, Mode::TopKAndCount, 10).unwrap(),
                b.search(q, Mode::TopKAndCount, 10).unwrap(),
            );
            assert_eq!(ra.count, rb.count, "{layout:?} {q}");
            let ids = |s: &Searcher, r: &tierdex::search::SearchResults| {
                r.hits.iter().map(|h| s.doc_id(h.doc).unwrap()).collect::<Vec<_>>()
            };
            assert_eq!(ids(&a, &ra), ids(&b, &rb), "{layout:?} {q}");
        }
        let total = a.search("ann", Mode::Count, 10).unwrap().count;
        assert_eq!(total, Some((DOCS * SEGMENTS) as u64), "{layout:?}");
    }
}
