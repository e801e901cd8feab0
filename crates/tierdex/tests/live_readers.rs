//! Read-only openers of an index a writer is changing (issue #20 item 17).
//! While one thread adds, replaces, deletes, flushes and compacts (every
//! strategy, the in-place ones included), another opens read-only searchers
//! over and over, on several tiers, and keeps each for a while: every open
//! succeeds, no query reports corruption, and every answer is that of a
//! committed state (batches are added and deleted whole, so a batch's
//! documents are all there or none). A reader also says when the log holds
//! acknowledged batches that the segments do not.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tierdex::index::OpenOptions;
use tierdex::search::{Mode, Searcher};
use tierdex::storage::{Tier, TierOptions};
use tierdex::update::{IndexWriter, Strategy, WriterOptions};
use tierdex::Document;

const BATCH: u64 = 10;

fn batch(b: u64) -> Vec<Document> {
    (0..BATCH)
        .map(|j| {
            Document::title_body(
                format!("b{b}-{j}"),
                format!("title b{b} j{j}"),
                format!(
                    "common batch{b} words {} and {} {}",
                    j % 3,
                    b % 7,
                    "long ".repeat((b % 5) as usize * 20)
                ),
            )
        })
        .collect()
}

fn ids(b: u64) -> Vec<String> {
    (0..BATCH).map(|j| format!("b{b}-{j}")).collect()
}

/// Checks one searcher against the invariants of a committed state; the
/// number of queries it answered.
fn check(s: &Searcher, written: u64, strategy: Strategy) -> u64 {
    let live = s.index().live_docs();
    assert_eq!(live % BATCH, 0, "{strategy}: {live} live documents: a batch in part");
    let all = s
        .search("common", Mode::Count, 0)
        .unwrap_or_else(|e| panic!("{strategy}: {e}"));
    assert_eq!(all.count, Some(live), "{strategy}");
    let mut n = 1;
    s.search("long", Mode::TopKAndCount, 5)
        .unwrap_or_else(|e| panic!("{strategy}: long: {e}"));
    for b in (0..written.max(1)).rev().take(20) {
        let r = s
            .search(&format!("batch{b}"), Mode::TopKAndCount, 3)
            .unwrap_or_else(|e| panic!("{strategy}: batch{b}: {e}"));
        let c = r.count.unwrap();
        assert!(c == 0 || c == BATCH, "{strategy}: batch{b} has {c} documents");
        for h in &r.hits {
            let d = s.doc(h.doc).unwrap_or_else(|e| panic!("{strategy}: {e}"));
            assert!(d.id.starts_with(&format!("b{b}-")), "{strategy}: {} for batch{b}", d.id);
        }
        let p = s
            .search(&format!("\"common batch{b}\""), Mode::Count, 0)
            .unwrap_or_else(|e| panic!("{strategy}: phrase: {e}"));
        assert_eq!(p.count, Some(c), "{strategy}");
        n += 2;
    }
    n
}

#[test]
fn read_only_opens_see_a_committed_state_while_a_writer_works() {
    for strategy in [
        Strategy::Logarithmic,
        Strategy::NoMerge,
        Strategy::InPlace,
        Strategy::InPlaceContiguous,
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("idx");
        let w = IndexWriter::create(
            &dir,
            Default::default(),
            Default::default(),
            strategy,
            WriterOptions {
                buffer_docs: 40,
                ..WriterOptions::default()
            },
        )
        .unwrap();
        w.add(batch(0)).unwrap();
        w.flush().unwrap();
        let written = AtomicU64::new(1);
        let stop = AtomicBool::new(false);
        let opened = AtomicU64::new(0);
        let (opens, queries, flushes) = std::thread::scope(|s| {
            let writer = s.spawn(|| {
                let mut flushes = 0;
                let started = Instant::now();
                let mut b = 1;
                // A second and a half, and enough of both sides however
                // slow the machine (within reason).
                while (started.elapsed() < Duration::from_millis(1500)
                    || flushes < 8
                    || opened.load(Ordering::Relaxed) < 6)
                    && started.elapsed() < Duration::from_secs(60)
                {
                    w.add(batch(b)).unwrap();
                    written.store(b + 1, Ordering::Relaxed);
                    // Replace an older batch whole, delete another whole.
                    if b % 2 == 0 {
                        w.add(batch(b / 2)).unwrap();
                    }
                    if b % 3 == 0 {
                        w.delete(ids(b - 2)).unwrap();
                    }
                    if b % 2 == 1 {
                        w.flush().unwrap();
                        flushes += 1;
                    }
                    if b % 25 == 0 {
                        w.compact().unwrap();
                    }
                    b += 1;
                }
                stop.store(true, Ordering::Relaxed);
                flushes
            });
            let reader = s.spawn(|| {
                let (mut opens, mut queries) = (0u64, 0u64);
                let tiers = [Tier::Mmap, Tier::Buffered, Tier::Ram];
                while !stop.load(Ordering::Relaxed) {
                    let options = OpenOptions {
                        tier: TierOptions::on(tiers[opens as usize % tiers.len()]),
                        ..OpenOptions::default()
                    };
                    let searcher = Searcher::open_with(&dir, options)
                        .unwrap_or_else(|e| panic!("{strategy}: read-only open {opens} failed: {e}"));
                    opens += 1;
                    opened.store(opens, Ordering::Relaxed);
                    // Every other one kept while the writer commits several
                    // more flushes (space they freed must not be reused
                    // under it), the others dropped soon (more opens race
                    // with the writer's file changes).
                    let hold = Duration::from_millis(if opens % 2 == 0 { 150 } else { 5 });
                    let held = Instant::now();
                    while held.elapsed() < hold {
                        queries += check(&searcher, written.load(Ordering::Relaxed), strategy);
                    }
                }
                (opens, queries)
            });
            let flushes = writer.join().unwrap();
            let (opens, queries) = reader.join().unwrap();
            (opens, queries, flushes)
        });
        eprintln!("{strategy}: {opens} read-only opens, {queries} queries, {flushes} writer flushes");
        assert!(
            opens >= 5 && flushes >= 5,
            "{strategy}: {opens} opens, {flushes} flushes"
        );
    }
}

#[test]
fn readers_say_when_the_log_holds_unapplied_batches() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("idx");
    let w = IndexWriter::create(
        &dir,
        Default::default(),
        Default::default(),
        Strategy::Logarithmic,
        WriterOptions::default(),
    )
    .unwrap();
    w.add(batch(0)).unwrap();
    w.flush().unwrap();
    for b in 1..4 {
        w.add(batch(b)).unwrap();
    }
    // A writer running (or one that stopped without flushing).
    let s = Searcher::open(&dir).unwrap();
    assert_eq!(s.unapplied_log_records(), 3);
    assert_eq!(s.index().live_docs(), BATCH);
    drop(w);
    assert_eq!(Searcher::open(&dir).unwrap().unapplied_log_records(), 3);
    // A writer applies them.
    let w = IndexWriter::open(&dir, WriterOptions::default()).unwrap();
    assert_eq!(w.searcher().unapplied_log_records(), 0);
    w.flush().unwrap();
    drop(w);
    let s = Searcher::open(&dir).unwrap();
    assert_eq!(s.unapplied_log_records(), 0);
    assert_eq!(s.index().live_docs(), 4 * BATCH);
}
