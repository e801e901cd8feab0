//! Query size limits and deadlines (issue #20, items 6 and 11): huge queries
//! are refused as bad input before anything proportional to them is built
//! (a counting allocator watches the peak), whether typed or built in code,
//! and planning and scorer building stop at the deadline.

use std::alloc::{GlobalAlloc, Layout as AllocLayout, System};
use std::cell::Cell;
use std::path::Path;
use std::time::{Duration, Instant};

use tierdex::indexing::{build_index, IndexOptions};
use tierdex::query::ast::{Clause, Occur, Query};
use tierdex::query::collector::Cutoff;
use tierdex::query::weight::Build;
use tierdex::search::{Mode, QueryLimits, Searcher};
use tierdex::{Document, Error, ErrorKind};

struct Counting;

thread_local! {
    static WATCHING: Cell<bool> = const { Cell::new(false) };
    /// Bytes allocated minus bytes freed while watching, and its maximum.
    static LIVE: Cell<i64> = const { Cell::new(0) };
    static PEAK: Cell<i64> = const { Cell::new(0) };
}

fn grew(bytes: usize) {
    if WATCHING.with(|w| w.get()) {
        let live = LIVE.with(|l| {
            l.set(l.get() + bytes as i64);
            l.get()
        });
        PEAK.with(|p| p.set(p.get().max(live)));
    }
}

fn shrank(bytes: usize) {
    if WATCHING.with(|w| w.get()) {
        LIVE.with(|l| l.set(l.get() - bytes as i64));
    }
}

// SAFETY: forwards to the system allocator unchanged; the counters are
// thread-local cells (no allocation, no locking).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: AllocLayout) -> *mut u8 {
        grew(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: AllocLayout) {
        shrank(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: AllocLayout, new_size: usize) -> *mut u8 {
        grew(new_size);
        shrank(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f`, returning its result, the peak of the bytes it held allocated
/// (on this thread) and the time it took.
fn watched<T>(f: impl FnOnce() -> T) -> (T, i64, Duration) {
    LIVE.with(|l| l.set(0));
    PEAK.with(|p| p.set(0));
    let started = Instant::now();
    WATCHING.with(|w| w.set(true));
    let out = f();
    WATCHING.with(|w| w.set(false));
    (out, PEAK.with(|p| p.get()), started.elapsed())
}

/// An index of `n` documents over a vocabulary of `w0`..`w1999` and common
/// words, in segments of `segment_docs`.
fn build(dir: &Path, n: usize, segment_docs: usize) -> Searcher {
    let docs = (0..n).map(|i| {
        Ok(Document::title_body(
            format!("d{i}"),
            format!("title {}", i % 17),
            format!(
                "word w{} w{} w{} common text",
                i % 2000,
                (i * 7) % 2000,
                (i * 13) % 2000
            ),
        ))
    });
    let opts = IndexOptions {
        segment_docs,
        merge: false,
        ..IndexOptions::default()
    };
    build_index(docs, dir, &opts).unwrap();
    Searcher::open(dir).unwrap()
}

fn term(text: String) -> Query {
    Query::Term { field: None, text }
}

fn should(query: Query) -> Clause {
    Clause {
        occur: Occur::Should,
        query,
    }
}

fn assert_bad_input<T: std::fmt::Debug>(r: Result<T, Error>, what: &str) -> String {
    match r {
        Err(e) if e.kind() == ErrorKind::BadInput => e.to_string(),
        other => panic!("{what}: {other:?}"),
    }
}

/// Most bytes a refused query may have allocated: far less than it.
const SMALL: i64 = 256 * 1024;

#[test]
fn huge_query_texts_are_refused_before_they_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let s = build(dir.path(), 2000, 500);
    let texts = [
        "word ".repeat(2_000_000),                                             // 10 MB
        format!("\"{}\"", "common ".repeat(40_000)),                           // a 40,000-word phrase
        (0..1_000_000).map(|i| format!("w{} ", i % 1000)).collect::<String>(), // 1,000,000 terms
    ];
    for text in &texts {
        let (r, peak, took) = watched(|| s.search(text, Mode::TopKAndCount, 10));
        let message = assert_bad_input(r, "huge query");
        assert!(message.contains("max_bytes"), "{message}");
        assert!(peak < SMALL, "{peak} bytes allocated for a {}-byte query", text.len());
        assert!(took < Duration::from_secs(1), "{took:?}");
    }
    // Within the byte limit: 1,025 clauses; a phrase of 129 words.
    let many = "w1 ".repeat(1025);
    assert!(assert_bad_input(s.search(&many, Mode::TopK, 10), "clauses").contains("max_clauses"));
    let phrase = format!("\"{}\"", "common ".repeat(129));
    assert!(assert_bad_input(s.search(&phrase, Mode::TopK, 10), "phrase").contains("max_phrase_terms"));
    let phrase = format!("\"{}\"", "common ".repeat(128));
    s.search(&phrase, Mode::TopK, 10).unwrap();
    // One word of 2,049 tokens searches 4,098 terms (two default fields).
    let long = vec!["w1"; 2049].join("-");
    assert!(assert_bad_input(s.search(&long, Mode::TopK, 10), "terms").contains("max_terms"));
    s.search(&vec!["w1"; 2048].join("-"), Mode::TopK, 10).unwrap();
}

#[test]
fn huge_queries_built_in_code_are_refused_by_the_planner() {
    let dir = tempfile::tempdir().unwrap();
    let s = build(dir.path(), 2000, 500);
    // A 10 MB term, a 40,000-word phrase, 1,000,000 clauses.
    let big_term = Query::Boolean(vec![should(term("word ".repeat(2_000_000)))]);
    let big_phrase = Query::Phrase {
        field: None,
        text: "common ".repeat(40_000),
    };
    let wide = Query::Boolean((0..1_000_000).map(|i| should(term(format!("w{}", i % 1000)))).collect());
    for (q, limit) in [
        (&big_term, "max_bytes"),
        (&big_phrase, "max_bytes"),
        (&wide, "max_clauses"),
    ] {
        let (r, peak, took) = watched(|| s.search_parsed(q, Mode::TopKAndCount, 10));
        let message = assert_bad_input(r, limit);
        assert!(message.contains(limit), "{message}");
        assert!(peak < SMALL, "{peak} bytes allocated");
        assert!(took < Duration::from_secs(1), "{took:?}");
    }
    // Phrases and term counts are checked once analysed.
    let phrase = Query::Phrase {
        field: None,
        text: "common ".repeat(200),
    };
    let message = assert_bad_input(s.search_parsed(&phrase, Mode::TopK, 10), "phrase");
    assert!(message.contains("max_phrase_terms"), "{message}");
    // Nesting, without overflowing the stack (built and dropped on a
    // thread with room for the recursive drop).
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(move || {
            let mut deep = term("w1".into());
            for _ in 0..100_000 {
                deep = Query::Boolean(vec![should(deep)]);
            }
            let message = assert_bad_input(s.plan(&deep), "deep");
            assert!(message.contains("max_depth"), "{message}");
        })
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn limits_are_configurable_per_searcher() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = build(dir.path(), 200, 100);
    s.search("w1 w2 w3", Mode::TopK, 10).unwrap();
    s.set_query_limits(QueryLimits {
        max_clauses: 2,
        ..QueryLimits::default()
    })
    .unwrap();
    assert_eq!(s.query_limits().max_clauses, 2);
    // Refused by the parser, and by the planner for a query built in code.
    assert!(matches!(s.search("w1 w2 w3", Mode::TopK, 10), Err(Error::Query(_))));
    let q = Query::Boolean(vec![
        should(term("w1".into())),
        should(term("w2".into())),
        should(term("w3".into())),
    ]);
    assert_bad_input(s.search_parsed(&q, Mode::TopK, 10), "planner");
    let too_deep = QueryLimits {
        max_depth: QueryLimits::DEPTH_CEILING + 1,
        ..QueryLimits::default()
    };
    assert_bad_input(s.set_query_limits(too_deep), "ceiling");
}

/// 2,000 distinct words of the index's vocabulary in 1,000 clauses: 4,000
/// term lookups over the two default fields, just within the limits.
fn vocabulary_query() -> Query {
    Query::Boolean((0..1000).map(|i| should(term(format!("w{i} w{}", i + 1000)))).collect())
}

#[test]
fn planning_and_scorer_building_stop_at_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    // Many small segments: every term lookup visits each of them.
    let s = build(dir.path(), 6000, 25);
    assert!(s.index().segments().len() >= 200);
    let q = vocabulary_query();
    let started = Instant::now();
    let plan = s.plan(&q).unwrap();
    let full = started.elapsed();
    // A deadline a tenth of the way through planning: stopped long before
    // planning would have ended (before, planning ran to its end and the
    // deadline was first read between segments).
    let started = Instant::now();
    let r = s.search_until(&q, Mode::TopK, 10, Some(started + full / 10));
    let took = started.elapsed();
    assert!(matches!(r, Err(Error::TimedOut(_))), "{r:?}");
    assert!(took < full / 2, "stopped after {took:?}; planning takes {full:?}");
    // A passed deadline: opening cursors and counting with bitsets stop.
    let seg = &s.index().segments()[0];
    let ctx = tierdex::query::weight::ScoringContext::new(s.index());
    let mut b = Build::new(seg, &ctx);
    b.cutoff = Cutoff::new(Some(Instant::now()), Instant::now());
    assert!(matches!(plan.scorer(b).map(|s| s.is_some()), Err(Error::TimedOut(_))));
    assert!(matches!(plan.matches(seg, b.cutoff.as_ref()), Err(Error::TimedOut(_))));
    b.cutoff = Cutoff::new(Some(Instant::now() + Duration::from_secs(3600)), Instant::now());
    assert!(plan.scorer(b).unwrap().is_some());
    // The result cache canonicalises within the deadline too.
    let past = Some(Instant::now());
    let canon = tierdex::cache::key::Canonical::new_until(&s, &q, past);
    assert!(matches!(canon, Err(Error::TimedOut(_))), "{canon:?}");
}
