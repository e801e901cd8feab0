//! The phrase-filter test path allocates nothing (issue #5): a counting
//! global allocator watches every `TermCursor::filter_may_contain` call
//! over a term written with filters, on every layout and storage tier, once
//! the cursor's page windows have been filled. The one exception is the
//! direct tier's refill of a window (its io_uring submission lists), which
//! happens per block, not per test.

use std::alloc::{GlobalAlloc, Layout as AllocLayout, System};
use std::cell::Cell;

use tierdex::bloom::{self, BloomParams, Direction, Probe};
use tierdex::layout::writer::TermPostings;
use tierdex::layout::{Codec, Format, Layout, PostingsFiles, PostingsWriter};
use tierdex::schema::TERMINATED;
use tierdex::storage::{Storage, Tier, TierOptions};

struct Counting;

thread_local! {
    static WATCHING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator unchanged; the counters are
// thread-local cells (no allocation, no locking).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: AllocLayout) -> *mut u8 {
        if WATCHING.with(|w| w.get()) {
            ALLOCATIONS.with(|a| a.set(a.get() + 1));
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: AllocLayout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: AllocLayout, new_size: usize) -> *mut u8 {
        if WATCHING.with(|w| w.get()) {
            ALLOCATIONS.with(|a| a.set(a.get() + 1));
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn watched<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let before = ALLOCATIONS.with(|a| a.get());
    WATCHING.with(|w| w.set(true));
    let out = f();
    WATCHING.with(|w| w.set(false));
    (out, ALLOCATIONS.with(|a| a.get()) - before)
}

#[test]
fn filter_tests_allocate_nothing() {
    let params = BloomParams::default();
    let shape = params.shape().unwrap();
    let fb = shape.bytes as usize;
    // 1,000 documents; filters of every third one empty, the others
    // holding the term "next".
    let next = Probe::new(shape, b"\x01next");
    let other = Probe::new(shape, b"\x01other");
    let mut t = TermPostings::default();
    for d in 0..1000u32 {
        t.docs.push(d * 2);
        t.freqs.push(1);
        t.positions.push(3);
        t.starts.push(10);
        t.ends.push(14);
        for filters in [&mut t.after, &mut t.before] {
            let at = filters.len();
            filters.resize(at + fb, 0);
            if !d.is_multiple_of(3) {
                bloom::insert(&mut filters[at..], &next);
            }
        }
    }
    let norms = vec![9u8; 2000];
    for layout in [Layout::Grouped, Layout::Split] {
        let dir = tempfile::tempdir().unwrap();
        let format = Format {
            layout,
            codec: Codec::Compressed,
            bloom: Some(params),
            ..Format::default()
        };
        let mut w = PostingsWriter::create(dir.path(), "s", format).unwrap();
        w.add(b"\x01term", &t, &norms).unwrap();
        w.finish().unwrap();
        for tier in [Tier::Ram, Tier::Mmap, Tier::Buffered, Tier::Direct] {
            let storage = Storage::new(TierOptions::on(tier)).unwrap();
            let files = PostingsFiles::open(format, |e| storage.open(dir.path().join(format!("s.{e}")))).unwrap();
            let info = files.term_info(b"\x01term").unwrap().unwrap();
            // The first blocks fill the cursor's page windows (buffers of
            // the tiers that copy); from then on nothing may allocate.
            {
                let mut c = files.cursor(&info).unwrap();
                let (mut allocations, mut allocating_calls, mut calls) = (0, 0u64, 0u64);
                let mut d = 0u32;
                while c.doc() != TERMINATED {
                    let ((hit, miss, before), n) = watched(|| {
                        (
                            c.filter_may_contain(Direction::After, &next),
                            c.filter_may_contain(Direction::After, &other),
                            c.filter_may_contain(Direction::Before, &next),
                        )
                    });
                    if d >= 256 {
                        allocations += n;
                        allocating_calls += u64::from(n > 0);
                        calls += 1;
                    }
                    assert_eq!(hit, !d.is_multiple_of(3), "{layout:?} {tier:?} doc {d}");
                    assert_eq!(before, !d.is_multiple_of(3), "{layout:?} {tier:?} doc {d}");
                    // A false positive is possible, but not on most documents.
                    let _ = miss;
                    c.advance();
                    d += 1;
                }
                assert!(c.take_error().is_none());
                assert_eq!(d, 1000);
                if tier == Tier::Direct {
                    // Its io_uring read path allocates submission lists when
                    // a test needs pages outside the cursor's window (a new
                    // block's group): a few calls per block, never per test.
                    assert!(
                        allocating_calls * 10 < calls,
                        "{layout:?} {tier:?}: {allocating_calls} of {calls} filter tests allocated"
                    );
                } else {
                    assert_eq!(allocations, 0, "{layout:?} {tier:?}: the filter path allocated");
                }
            }
        }
    }
}
