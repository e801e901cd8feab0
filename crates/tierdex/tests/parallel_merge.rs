//! A merge on several threads answers exactly like one on a single thread
//! (issue #24): random corpora built into several segments (replaced ids
//! leave tombstones), every layout, codec and phrase-filter setting, merged
//! serially and on 2 to 6 threads. Every term's postings (documents,
//! frequencies, positions, offsets, filters) and statistics, the documents'
//! files, and the answers to random queries in every mode must be equal,
//! and equal to those of the unmerged index.

mod support;

use support::gen::{self, Rng};
use support::merge::{merge_into, merge_into_with};
use tierdex::indexing::{build_index, IndexOptions};
use tierdex::schema::TERMINATED;
use tierdex::search::{Mode, Searcher};
use tierdex::{Document, Index, OpenOptions};

const SEED: u64 = 0x7061_7261_2026_1127;

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

/// Every term of `a` and `b` with its postings, compared.
fn same_postings(a: &Index, b: &Index, ctx: &str) -> usize {
    let (ra, rb) = (&a.segments()[0], &b.segments()[0]);
    let (fa, fb) = (ra.postings().unwrap(), rb.postings().unwrap());
    assert_eq!(ra.meta().num_terms, rb.meta().num_terms, "{ctx}: terms");
    assert_eq!(ra.meta().fields, rb.meta().fields, "{ctx}: field statistics");
    use fst::Streamer;
    let (mut sa, mut sb) = (fa.terms().fst().stream(), fb.terms().fst().stream());
    let mut terms = 0;
    let (mut pa, mut pb, mut oa, mut ob) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    loop {
        let (x, y) = (
            sa.next().map(|(k, v)| (k.to_vec(), v)),
            sb.next().map(|(k, v)| (k.to_vec(), v)),
        );
        let ((ka, va), (kb, vb)) = match (x, y) {
            (None, None) => break,
            (Some(x), Some(y)) => (x, y),
            (x, y) => panic!("{ctx}: dictionaries differ: {x:?} / {y:?}"),
        };
        assert_eq!(ka, kb, "{ctx}");
        let ia = fa.resolve(fa.terms().term_ref(va)).unwrap();
        let ib = fb.resolve(fb.terms().term_ref(vb)).unwrap();
        assert_eq!(ia.region.doc_freq, ib.region.doc_freq, "{ctx}: {ka:?}");
        assert_eq!(ia.region.total_term_freq, ib.region.total_term_freq, "{ctx}: {ka:?}");
        assert_eq!(fa.doc_freq(&ka).unwrap(), fb.doc_freq(&kb).unwrap(), "{ctx}: {ka:?}");
        let (mut ca, mut cb) = (ra.cursor(&ia).unwrap(), rb.cursor(&ib).unwrap());
        loop {
            assert_eq!(ca.doc(), cb.doc(), "{ctx}: {ka:?}");
            if ca.doc() == TERMINATED {
                break;
            }
            assert_eq!(ca.freq(), cb.freq(), "{ctx}: {ka:?}");
            ca.positions(&mut pa);
            cb.positions(&mut pb);
            assert_eq!(pa, pb, "{ctx}: {ka:?}");
            ca.offsets(&mut oa);
            cb.offsets(&mut ob);
            assert_eq!(oa, ob, "{ctx}: {ka:?}");
            for dir in [tierdex::bloom::Direction::After, tierdex::bloom::Direction::Before] {
                let (mut xa, mut xb) = (Vec::new(), Vec::new());
                assert_eq!(
                    ca.copy_filter(dir, &mut xa),
                    cb.copy_filter(dir, &mut xb),
                    "{ctx}: {ka:?}"
                );
                assert_eq!(xa, xb, "{ctx}: {ka:?} filters");
            }
            ca.advance();
            cb.advance();
        }
        terms += 1;
    }
    terms
}

/// `docs` and up to 4 more records, each a copy of one of them under the
/// id of another: the earlier record with that id becomes a tombstone a
/// merge leaves out.
fn with_replaced_ids(docs: &[Document], rng: &mut Rng) -> Vec<Document> {
    let mut docs = docs.to_vec();
    for _ in 0..rng.range(0, 5) {
        let i = rng.range(0, docs.len() - 1);
        let again = Document {
            id: docs[rng.range(0, docs.len() - 1)].id.clone(),
            ..docs[i].clone()
        };
        docs.push(again);
    }
    docs
}

#[test]
fn parallel_merges_answer_like_serial_ones() {
    let mut parallel_ranges = 0;
    let mut checked = 0;
    for case in 0..24u64 {
        let seed = gen::mix(SEED, case);
        let corpus = gen::corpus(seed, case);
        if corpus.docs.len() < 4 {
            continue;
        }
        let mut rng = Rng::new(gen::mix(seed, 1));
        let mut opts: IndexOptions = gen::index_options(seed);
        opts.merge = false;
        opts.segment_docs = (corpus.docs.len() / rng.range(2, 6)).max(1);
        opts.threads = 1;
        let docs = with_replaced_ids(&corpus.docs, &mut rng);
        let root = tempfile::tempdir().unwrap();
        let src_dir = root.path().join("src");
        build_index(docs.iter().cloned().map(Ok), &src_dir, &opts).unwrap();
        let src = Index::open(&src_dir, OpenOptions::default()).unwrap();
        let ctx = format!(
            "case {case} ({}, {} segments, {:?} {:?}, bloom {})",
            corpus.description,
            src.segments().len(),
            opts.layout,
            opts.codec,
            opts.bloom.is_some()
        );
        merge_into(&src, &root.path().join("serial"), 1);
        let threads = rng.range(2, 6);
        merge_into(&src, &root.path().join("parallel"), threads);
        let serial = Index::open(
            &root.path().join("serial"),
            OpenOptions {
                verify: true,
                ..Default::default()
            },
        )
        .unwrap();
        let parallel = Index::open(
            &root.path().join("parallel"),
            OpenOptions {
                verify: true,
                ..Default::default()
            },
        )
        .unwrap();
        let terms = same_postings(&serial, &parallel, &ctx);
        // The documents' side is written the same way whatever the threads.
        for e in ["nrm", "sto", "sti", "ids", "col"] {
            let read = |d: &str| std::fs::read(root.path().join(d).join(format!("seg000000.{e}"))).ok();
            assert_eq!(read("serial"), read("parallel"), "{ctx}: .{e}");
        }
        // The term space was indeed split.
        let files: Vec<_> = src.segments().iter().map(|r| r.postings().unwrap()).collect();
        let ranges = tierdex::indexing::merge::partition(&files, opts.layout, threads).unwrap();
        assert!(terms == 0 || !ranges.is_empty(), "{ctx}");
        if ranges.len() > 1 {
            parallel_ranges += 1;
        }
        let s_src = Searcher::open(&src_dir).unwrap();
        let s_serial = Searcher::open(&root.path().join("serial")).unwrap();
        let s_parallel = Searcher::open(&root.path().join("parallel")).unwrap();
        for _ in 0..25 {
            let q = gen::query(&mut rng, &corpus.lexicon);
            for (mode, k) in [
                (Mode::TopK, *rng.pick(&gen::KS)),
                (Mode::TopKAndCount, 10),
                (Mode::Count, 0),
            ] {
                let want = answer(&s_serial, &q, mode, k);
                assert_eq!(answer(&s_parallel, &q, mode, k), want, "{ctx}: {q:?} {mode:?} k={k}");
                assert_eq!(
                    answer(&s_src, &q, mode, k),
                    want,
                    "{ctx}: unmerged {q:?} {mode:?} k={k}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 1000, "only {checked} answers checked");
    assert!(parallel_ranges > 8, "too few cases with many terms ({parallel_ranges})");
}

/// A reordered merge (issue #25) writes the same segment whatever its
/// threads and however many passes its terms' held postings take: serial
/// with the default hold, and on 2 to 6 threads holding a few hundred bytes
/// at a time (most terms in several passes) must agree term by term and
/// file by file, and answer alike; both hold every live document of the
/// sources, with the same counts.
#[test]
fn reordered_merges_agree_whatever_threads_and_passes() {
    let mut reordered = 0;
    for case in 0..16u64 {
        let seed = gen::mix(SEED ^ 0xb1, case);
        let corpus = gen::corpus(seed, case);
        if corpus.docs.len() < 8 {
            continue;
        }
        let mut rng = Rng::new(gen::mix(seed, 2));
        let mut opts: IndexOptions = gen::index_options(seed);
        opts.merge = false;
        opts.segment_docs = (corpus.docs.len() / rng.range(2, 5)).max(1);
        opts.threads = 1;
        let docs = with_replaced_ids(&corpus.docs, &mut rng);
        let root = tempfile::tempdir().unwrap();
        let src_dir = root.path().join("src");
        build_index(docs.iter().cloned().map(Ok), &src_dir, &opts).unwrap();
        let src = Index::open(&src_dir, OpenOptions::default()).unwrap();
        let ctx = format!(
            "case {case} ({}, {} segments)",
            corpus.description,
            src.segments().len()
        );
        let bp = tierdex::indexing::reorder::BpParams {
            min_doc_freq: 2,
            min_partition: 2,
            ..Default::default()
        };
        let options = |threads, hold_bytes| tierdex::indexing::merge::MergeOptions {
            reorder: Some(bp),
            hold_bytes,
            ..tierdex::indexing::merge::MergeOptions::new(Default::default(), threads)
        };
        merge_into_with(&src, &root.path().join("serial"), options(1, 32 << 20));
        merge_into_with(&src, &root.path().join("passes"), options(rng.range(2, 6), 300));
        merge_into(&src, &root.path().join("plain"), 1);
        let open = |d: &str| {
            Index::open(
                &root.path().join(d),
                OpenOptions {
                    verify: true,
                    ..Default::default()
                },
            )
            .unwrap()
        };
        let (serial, passes) = (open("serial"), open("passes"));
        same_postings(&serial, &passes, &ctx);
        for e in ["nrm", "sto", "sti", "ids", "col"] {
            let read = |d: &str| std::fs::read(root.path().join(d).join(format!("seg000000.{e}"))).ok();
            assert_eq!(read("serial"), read("passes"), "{ctx}: .{e}");
        }
        let s_src = Searcher::open(&src_dir).unwrap();
        let s_serial = Searcher::open(&root.path().join("serial")).unwrap();
        let s_passes = Searcher::open(&root.path().join("passes")).unwrap();
        assert_eq!(s_serial.num_docs(), s_src.num_docs(), "{ctx}");
        let s_plain = Searcher::open(&root.path().join("plain")).unwrap();
        let in_order = (0..s_serial.num_docs() as u32)
            .map(|d| s_serial.doc_id(d).unwrap())
            .eq((0..s_plain.num_docs() as u32).map(|d| s_plain.doc_id(d).unwrap()));
        reordered += usize::from(!in_order);
        for _ in 0..20 {
            let q = gen::query(&mut rng, &corpus.lexicon);
            let want = answer(&s_serial, &q, Mode::TopKAndCount, 10);
            assert_eq!(answer(&s_passes, &q, Mode::TopKAndCount, 10), want, "{ctx}: {q:?}");
            assert_eq!(answer(&s_src, &q, Mode::Count, 0), (Vec::new(), want.1), "{ctx}: {q:?}");
        }
    }
    assert!(reordered > 4, "only {reordered} merges changed the order");
}

/// A build whose segments are too many for one merge (`merge_fan_in`, set
/// from the memory budget by default) merges them in groups of consecutive
/// segments, level by level: the index must be the one a single merge
/// makes (every term's postings and statistics, norms, columns and ids
/// byte for byte, the same answers), tombstones of replaced ids included.
#[test]
fn merges_in_levels_answer_like_one_merge() {
    let mut levelled = 0;
    for case in 0..12u64 {
        let seed = gen::mix(SEED ^ 0x1e7e15, case);
        let corpus = gen::corpus(seed, case);
        if corpus.docs.len() < 8 {
            continue;
        }
        let mut rng = Rng::new(gen::mix(seed, 2));
        let mut opts: IndexOptions = gen::index_options(seed);
        opts.merge = true;
        opts.segment_docs = (corpus.docs.len() / rng.range(5, 12)).max(1);
        opts.threads = 1;
        let docs = with_replaced_ids(&corpus.docs, &mut rng);
        let root = tempfile::tempdir().unwrap();
        let (one, levels) = (root.path().join("one"), root.path().join("levels"));
        build_index(docs.iter().cloned().map(Ok), &one, &opts).unwrap();
        let fan_in = rng.range(2, 4);
        let segments = docs.len().div_ceil(opts.segment_docs);
        levelled += usize::from(segments > fan_in);
        build_index(
            docs.iter().cloned().map(Ok),
            &levels,
            &IndexOptions {
                merge_fan_in: fan_in,
                merge_threads: rng.range(1, 3),
                ..opts.clone()
            },
        )
        .unwrap();
        let ctx = format!(
            "case {case} ({}, {segments} segments, fan-in {fan_in})",
            corpus.description
        );
        let open = |d: &std::path::Path| {
            Index::open(
                d,
                OpenOptions {
                    verify: true,
                    ..Default::default()
                },
            )
            .unwrap()
        };
        let (a, b) = (open(&one), open(&levels));
        assert_eq!(b.segments().len(), 1, "{ctx}");
        same_postings(&a, &b, &ctx);
        let file = |d: &std::path::Path, e: &str| {
            let name = &Index::open(d, OpenOptions::default()).unwrap().segments()[0]
                .meta()
                .name
                .clone();
            std::fs::read(d.join(format!("{name}.{e}"))).ok()
        };
        for e in ["nrm", "ids", "col"] {
            assert_eq!(file(&one, e), file(&levels, e), "{ctx}: .{e}");
        }
        // Nothing of the groups is left behind.
        let count = |d: &std::path::Path| std::fs::read_dir(d).unwrap().count();
        assert_eq!(count(&one), count(&levels), "{ctx}: files");
        let (sa, sb) = (Searcher::open(&one).unwrap(), Searcher::open(&levels).unwrap());
        for _ in 0..20 {
            let q = gen::query(&mut rng, &corpus.lexicon);
            for (mode, k) in [(Mode::TopKAndCount, 10), (Mode::Count, 0)] {
                assert_eq!(
                    answer(&sb, &q, mode, k),
                    answer(&sa, &q, mode, k),
                    "{ctx}: {q:?} {mode:?}"
                );
            }
        }
        for d in 0..sa.index().segments()[0].max_doc() {
            assert_eq!(sa.doc_id(d).unwrap(), sb.doc_id(d).unwrap(), "{ctx}: doc {d}");
        }
    }
    assert!(levelled >= 6, "too few cases merged in levels ({levelled})");
}

/// `--reorder auto` (issue #24): the final merge bisects a sample of the
/// documents first and reorders them only when that saves at least
/// [`AUTO_MIN_GAIN`] of the sample's log-gap cost. Documents drawn from
/// topics (each with its own words) are reordered; documents whose words
/// are drawn independently from one vocabulary keep the input's order.
/// Either way the index answers as one built in input order.
#[test]
fn auto_reordering_reorders_topics_and_keeps_independent_words() {
    use tierdex::indexing::reorder::{BpParams, AUTO_MIN_GAIN};
    for topical in [true, false] {
        let mut rng = Rng::new(gen::mix(SEED ^ 0xa070, u64::from(topical)));
        let docs: Vec<Document> = (0..6000)
            .map(|i| {
                let topic = rng.range(0, 12);
                let words: Vec<String> = (0..40)
                    .map(|_| match topical {
                        true => format!("t{topic}w{}", rng.range(0, 150)),
                        false => format!("w{}", rng.range(0, 1800)),
                    })
                    .collect();
                Document::title_body(i.to_string(), "", words.join(" "))
            })
            .collect();
        let root = tempfile::tempdir().unwrap();
        let opts = |min_gain: Option<f32>| IndexOptions {
            merge: true,
            segment_docs: 1500,
            threads: 2,
            reorder: min_gain.map(|min_gain| BpParams {
                min_doc_freq: 16,
                min_gain,
                ..BpParams::default()
            }),
            ..IndexOptions::default()
        };
        let (auto, plain) = (root.path().join("auto"), root.path().join("plain"));
        build_index(docs.iter().cloned().map(Ok), &auto, &opts(Some(AUTO_MIN_GAIN))).unwrap();
        build_index(docs.iter().cloned().map(Ok), &plain, &opts(None)).unwrap();
        let (a, p) = (Searcher::open(&auto).unwrap(), Searcher::open(&plain).unwrap());
        assert_eq!(a.num_docs(), docs.len() as u64);
        let in_order = (0..docs.len() as u32).all(|d| a.doc_id(d).unwrap() == d.to_string());
        assert_eq!(in_order, !topical, "topical: {topical}");
        let lexicon = [
            "t0w1",
            "t3w7 t3w9",
            "+t5w2 +t5w3",
            "w5",
            "w17 w99",
            "+w1 +w2",
            "\"t1w1 t1w2\"",
        ];
        for q in lexicon {
            let (ra, rp) = (
                a.search(q, Mode::Count, 0).unwrap(),
                p.search(q, Mode::Count, 0).unwrap(),
            );
            assert_eq!(ra.count, rp.count, "{q}");
            let top = |s: &Searcher| -> Vec<(String, u32)> {
                let mut hits: Vec<_> = s
                    .search(q, Mode::TopK, 2000)
                    .unwrap()
                    .hits
                    .iter()
                    .map(|h| (s.doc_id(h.doc).unwrap(), h.score.to_bits()))
                    .collect();
                hits.sort();
                hits
            };
            assert_eq!(top(&a), top(&p), "{q}");
        }
    }
}
