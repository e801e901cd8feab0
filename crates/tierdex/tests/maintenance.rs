//! Online maintenance against a from-scratch rebuild (DESIGN §5): random
//! sequences of additions, replacements, deletions (of present and absent
//! ids), refreshes, flushes, compactions and reopenings (which replay the
//! log), under every strategy, with small buffers so that flushes and merges
//! happen often. After every refresh-like step every query (all types, all
//! modes) must answer exactly like an index built from scratch on the live
//! documents in insertion order: the same ids in the same order, the same
//! scores bit for bit, the same counts.
//!
//! `TIERDEX_MAINTENANCE_CASES` sets the number of sequences (default 24).

mod support;

use support::gen::{self, Rng};
use tierdex::bloom::FilterUse;
use tierdex::indexing::{build_index, IndexOptions};
use tierdex::search::{Mode, Searcher};
use tierdex::storage::{Tier, TierOptions};
use tierdex::update::{IndexWriter, Strategy, WriterOptions};
use tierdex::Document;

const SEED: u64 = 0x6d61_696e_2026_0006;

fn cases() -> u64 {
    std::env::var("TIERDEX_MAINTENANCE_CASES")
        .ok()
        .map(|v| v.parse().expect("TIERDEX_MAINTENANCE_CASES is a number"))
        .unwrap_or(24)
}

/// One answer as ids, score bits and count.
type Answer = (Vec<(String, u32)>, Option<u64>);

fn answer(s: &Searcher, q: &tierdex::query::ast::Query, mode: Mode, k: usize) -> Answer {
    let r = s.search_parsed(q, mode, k).unwrap();
    let hits = r
        .hits
        .iter()
        .map(|h| (s.doc_id(h.doc).unwrap(), h.score.to_bits()))
        .collect();
    (hits, r.count)
}

/// The live documents in insertion order.
#[derive(Default)]
struct Model {
    live: Vec<Document>,
}

impl Model {
    fn add(&mut self, d: Document) {
        self.live.retain(|x| x.id != d.id);
        self.live.push(d);
    }

    fn delete(&mut self, id: &str) {
        self.live.retain(|x| x.id != id);
    }
}

fn check(s: &Searcher, model: &Model, opts: &IndexOptions, rng: &mut Rng, lex: &gen::Lexicon, context: &str) -> usize {
    assert_eq!(s.num_docs(), model.live.len() as u64, "{context}: live documents");
    let dir = tempfile::tempdir().unwrap();
    let fresh = (!model.live.is_empty()).then(|| {
        build_index(model.live.iter().cloned().map(Ok), dir.path(), opts).unwrap();
        Searcher::open(dir.path()).unwrap()
    });
    let mut checked = 0;
    for _ in 0..10 {
        let q = gen::query(rng, lex);
        for (mode, k) in [
            (Mode::TopK, *rng.pick(&gen::KS)),
            (Mode::TopKAndCount, 10),
            (Mode::Count, 0),
        ] {
            let got = answer(s, &q, mode, k);
            let want = match &fresh {
                Some(f) => answer(f, &q, mode, k),
                None => (Vec::new(), (mode != Mode::TopK).then_some(0)),
            };
            assert_eq!(got, want, "{context}: {q:?} {mode:?} k={k}");
            checked += 1;
        }
    }
    checked
}

#[test]
fn updates_answer_like_a_rebuild_under_every_strategy() {
    let mut checked = 0;
    let mut flushes = 0;
    let mut merged = 0;
    let mut compacted = 0;
    let mut refresh_merged = 0;
    for case in 0..cases() {
        let seed = gen::mix(SEED, case);
        let corpus = gen::corpus(seed, case);
        if corpus.docs.is_empty() {
            continue;
        }
        let mut rng = Rng::new(gen::mix(seed, 1));
        let mut opts = gen::index_options(seed);
        opts.strategy = Strategy::ALL[case as usize % Strategy::ALL.len()];
        if opts.strategy.in_place() {
            // Chains hold grouped regions (other layouts are refused).
            opts.layout = tierdex::layout::Layout::Grouped;
        }
        let tiers = [Tier::Mmap, Tier::Ram, Tier::Buffered, Tier::Direct];
        let options = WriterOptions {
            buffer_docs: rng.range(2, 30),
            max_refresh_segments: rng.range(1, 4),
            // Chains are read in place (ram, mmap) or into memory (others).
            tier: TierOptions::on(tiers[(case as usize / Strategy::ALL.len()) % tiers.len()]),
            // In-place: every term packed, none (all in blocks and slots), or some.
            pack_max: [0, 64, 300, 2048, tierdex::layout::chain::PACK_MAX][rng.range(0, 4)],
            ..WriterOptions::default()
        };
        let context = format!(
            "case {case} ({}, {}, buffer {}, pack {})",
            corpus.description, opts.strategy, options.buffer_docs, options.pack_max
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("idx");
        let mut model = Model::default();
        let mut next_id = 0u64;
        let mut fresh_doc = |rng: &mut Rng, id: Option<String>| {
            let src = rng.pick(&corpus.docs);
            let id = id.unwrap_or_else(|| {
                next_id += 1;
                format!("n{next_id}")
            });
            Document { id, ..src.clone() }
        };
        // Start empty or from a built index.
        let mut writer = if rng.chance(0.5) {
            IndexWriter::create(&path, opts.analyzer, opts.format(), opts.strategy, options).unwrap()
        } else {
            let initial: Vec<Document> = (0..rng.range(1, 40)).map(|_| fresh_doc(&mut rng, None)).collect();
            build_index(initial.iter().cloned().map(Ok), &path, &opts).unwrap();
            initial.into_iter().for_each(|d| model.add(d));
            IndexWriter::open(&path, options).unwrap()
        };
        assert_eq!(writer.strategy(), opts.strategy);
        for step in 0..60 {
            let ctx = format!("{context} step {step}");
            match rng.weighted(&[10, 3, 4, 4, 3, 1, 1]) {
                0 => {
                    let n = rng.range(1, 8);
                    let batch: Vec<Document> = (0..n).map(|_| fresh_doc(&mut rng, None)).collect();
                    batch.iter().cloned().for_each(|d| model.add(d));
                    let a = writer.add(batch).unwrap();
                    assert_eq!(a.added, n as u64);
                }
                1 if !model.live.is_empty() => {
                    // Replace existing documents by id.
                    let ids: Vec<String> = (0..rng.range(1, 3)).map(|_| rng.pick(&model.live).id.clone()).collect();
                    let batch: Vec<Document> = ids.into_iter().map(|id| fresh_doc(&mut rng, Some(id))).collect();
                    batch.iter().cloned().for_each(|d| model.add(d));
                    writer.add(batch).unwrap();
                }
                2 if !model.live.is_empty() => {
                    let mut ids: Vec<String> = (0..rng.range(1, 6)).map(|_| rng.pick(&model.live).id.clone()).collect();
                    ids.push("never-added".into());
                    let present = {
                        let mut u = ids.clone();
                        u.sort();
                        u.dedup();
                        u.iter().filter(|id| model.live.iter().any(|d| &&d.id == id)).count()
                    };
                    ids.iter().for_each(|id| model.delete(id));
                    let a = writer.delete(ids).unwrap();
                    assert_eq!(a.deleted, present as u64, "{ctx}");
                }
                3 => {
                    writer.refresh().unwrap();
                    checked += check(&writer.searcher(), &model, &opts, &mut rng, &corpus.lexicon, &ctx);
                }
                4 => {
                    let r = writer.flush().unwrap();
                    flushes += 1;
                    merged += usize::from(r.segments_merged > 0);
                    checked += check(&writer.searcher(), &model, &opts, &mut rng, &corpus.lexicon, &ctx);
                }
                5 => {
                    let r = writer.compact().unwrap();
                    compacted += r.segments_compacted;
                    checked += check(&writer.searcher(), &model, &opts, &mut rng, &corpus.lexicon, &ctx);
                }
                6 => {
                    // Reopen: unflushed changes come back from the log.
                    drop(writer);
                    writer = IndexWriter::open(&path, options).unwrap();
                    checked += check(&writer.searcher(), &model, &opts, &mut rng, &corpus.lexicon, &ctx);
                }
                _ => {}
            }
        }
        writer.refresh().unwrap();
        checked += check(&writer.searcher(), &model, &opts, &mut rng, &corpus.lexicon, &context);
        refresh_merged += writer.stats().refresh_docs_merged;
        // A plain searcher on the flushed index sees the flushed state,
        // and its merged phrase filters reject no matching document.
        writer.flush().unwrap();
        drop(writer);
        let mut s = Searcher::open(&path).unwrap();
        assert_eq!(s.num_docs(), model.live.len() as u64, "{context}: after reopening");
        s.set_phrase_filters(FilterUse::Always);
        let context = format!("{context}, flushed, phrase filters always");
        checked += check(&s, &model, &opts, &mut rng, &corpus.lexicon, &context);
    }
    assert!(checked > 1000, "only {checked} answers checked");
    assert!(
        flushes > 20 && merged > 5 && compacted > 3 && refresh_merged > 20,
        "{flushes} flushes, {merged} merges, {compacted} compactions, {refresh_merged} documents of merged refresh segments"
    );
}

/// A writer on a new, empty index in `dir` with default analysis and layout.
fn empty(dir: &std::path::Path, strategy: Strategy, options: WriterOptions) -> IndexWriter {
    IndexWriter::create(dir, Default::default(), Default::default(), strategy, options).unwrap()
}

#[test]
fn a_second_writer_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let w = empty(dir.path(), Strategy::NoMerge, WriterOptions::default());
    let e = IndexWriter::open(dir.path(), WriterOptions::default()).err().unwrap();
    assert!(e.to_string().contains("open for writing"), "{e}");
    drop(w);
    IndexWriter::open(dir.path(), WriterOptions::default()).unwrap();
}

#[test]
fn bad_documents_are_refused_before_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let w = empty(dir.path(), Strategy::Logarithmic, WriterOptions::default());
    let e = w.add(vec![Document::title_body(String::new(), "t", "b")]).unwrap_err();
    assert!(e.to_string().contains("empty id"), "{e}");
    assert_eq!(w.stats().last_seq, 0);
}

#[test]
fn background_maintenance_refreshes_and_flushes() {
    let dir = tempfile::tempdir().unwrap();
    let w = std::sync::Arc::new(empty(
        dir.path(),
        Strategy::Logarithmic,
        WriterOptions {
            buffer_docs: 10,
            ..WriterOptions::default()
        },
    ));
    let m = w.maintain(std::time::Duration::from_millis(10));
    let docs: Vec<Document> = (0..35)
        .map(|i| Document::title_body(format!("m{i}"), format!("title {i}"), format!("body words w{}", i % 4)))
        .collect();
    for d in &docs {
        w.add(vec![d.clone()]).unwrap();
    }
    // Visible without an explicit refresh, and flushed in the background.
    let t = std::time::Instant::now();
    while w.searcher().num_docs() < 35 || w.stats().flushes < 2 {
        assert!(t.elapsed() < std::time::Duration::from_secs(10), "{:?}", w.stats());
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    drop(m);
    let fresh = tempfile::tempdir().unwrap();
    build_index(docs.iter().cloned().map(Ok), fresh.path(), &IndexOptions::default()).unwrap();
    let f = Searcher::open(fresh.path()).unwrap();
    let s = w.searcher();
    for q in ["w1", "title", "\"body words\""] {
        let q = tierdex::query::parse(q).unwrap();
        assert_eq!(
            answer(&s, &q, Mode::TopKAndCount, 10),
            answer(&f, &q, Mode::TopKAndCount, 10)
        );
    }
}

#[test]
fn a_long_log_replays_within_the_buffer_budget() {
    let dir = tempfile::tempdir().unwrap();
    let docs: Vec<Document> = (0..50)
        .map(|i| {
            Document::title_body(
                format!("r{i}"),
                format!("t{}", i % 3),
                format!("replayed w{} words", i % 6),
            )
        })
        .collect();
    {
        let w = empty(dir.path(), Strategy::Geometric, WriterOptions::default());
        for d in &docs {
            w.add(vec![d.clone()]).unwrap();
        }
        assert_eq!(w.stats().flushes, 0);
    }
    let small = WriterOptions {
        buffer_docs: 10,
        ..WriterOptions::default()
    };
    let w = IndexWriter::open(dir.path(), small).unwrap();
    assert!(w.stats().flushes >= 4, "{:?}", w.stats());
    assert!(w.stats().buffered_docs < 10);
    let fresh = tempfile::tempdir().unwrap();
    build_index(docs.iter().cloned().map(Ok), fresh.path(), &IndexOptions::default()).unwrap();
    let f = Searcher::open(fresh.path()).unwrap();
    for q in ["w2", "replayed", "\"w1 words\""] {
        let q = tierdex::query::parse(q).unwrap();
        assert_eq!(
            answer(&w.searcher(), &q, Mode::TopKAndCount, 10),
            answer(&f, &q, Mode::TopKAndCount, 10)
        );
    }
}

/// Flushes write their segments without holding the writer, so additions,
/// replacements and deletions land while a flush runs, in the part being
/// flushed too: none may be lost or undone, and no old version may come back.
#[test]
fn writes_during_background_flushes_are_kept() {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    let options = WriterOptions {
        buffer_docs: 1_000_000,
        ..WriterOptions::default()
    };
    for strategy in [Strategy::Geometric, Strategy::ImmediateMerge] {
        let path = dir.path().join(strategy.name());
        let w = Arc::new(empty(&path, strategy, options));
        let stop = Arc::new(AtomicBool::new(false));
        let flusher = {
            let (w, stop) = (w.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut flushes = 0;
                while !stop.load(Ordering::Relaxed) {
                    if w.flush().unwrap().docs_flushed > 0 {
                        flushes += 1;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                flushes
            })
        };
        let mut rng = Rng::new(7);
        // id -> version token of its live copy; every token ever written.
        let mut live: BTreeMap<String, String> = BTreeMap::new();
        let mut written: Vec<String> = Vec::new();
        for i in 0..4_000u32 {
            let id = format!("d{}", rng.range(0, 400));
            if rng.range(0, 4) == 0 {
                w.delete(vec![id.clone()]).unwrap();
                live.remove(&id);
            } else {
                let token = format!("v{i}");
                w.add(vec![Document::title_body(
                    id.clone(),
                    format!("{token} title"),
                    format!("body of {id} words {}", rng.range(0, 50)),
                )])
                .unwrap();
                live.insert(id, token.clone());
                written.push(token);
            }
        }
        stop.store(true, Ordering::Relaxed);
        let flushes = flusher.join().unwrap();
        assert!(flushes > 3, "{strategy}: only {flushes} flushes ran beside the writes");
        let check = |s: &Searcher, when: &str| {
            assert_eq!(s.num_docs(), live.len() as u64, "{strategy} {when}: live documents");
            let by_token: BTreeMap<&String, &String> = live.iter().map(|(id, t)| (t, id)).collect();
            for token in &written {
                let r = s.search(&format!("title:{token}"), Mode::TopKAndCount, 2).unwrap();
                match by_token.get(token) {
                    Some(id) => {
                        assert_eq!(r.count, Some(1), "{strategy} {when}: {token} of {id}");
                        assert_eq!(&&s.doc_id(r.hits[0].doc).unwrap(), id, "{strategy} {when}: {token}");
                    }
                    None => assert_eq!(r.count, Some(0), "{strategy} {when}: old version {token} is back"),
                }
            }
        };
        check(&w.refresh().unwrap(), "after the flushes");
        w.flush().unwrap();
        drop(w);
        check(&Searcher::open(&path).unwrap(), "after reopening");
    }
}
