//! Which terms have phrase filters (issue #24): the terms of a segment in at
//! most `doc_ceiling` of its documents, in a merged segment as in one built
//! at once. A posting's filter depends on its document alone, so a merged
//! term's filters are the bytes a single build gives it, except for the
//! documents of a source that had none for the term (it was above that
//! source's ceiling): those hold every term. The merged index answers like
//! the unmerged one.

mod support;

use std::collections::BTreeMap;

use support::gen::{self, Rng};
use support::merge::merge_into;
use tierdex::bloom::{BloomParams, Direction};
use tierdex::indexing::{build_index, IndexOptions};
use tierdex::schema::TERMINATED;
use tierdex::search::{Mode, Searcher};
use tierdex::{Document, Index, OpenOptions};

const SEED: u64 = 0x6466_2d63_6569_6c21;

/// Per term of the first segment of `index`: its document count and, when
/// it has filters, its `after` and `before` filters, concatenated.
type Terms = BTreeMap<Vec<u8>, (u64, Option<Vec<u8>>)>;

fn segment_terms(index: &Index, seg: usize) -> Terms {
    let r = &index.segments()[seg];
    let f = r.postings().unwrap();
    let mut out = Terms::new();
    use fst::Streamer;
    let mut s = f.terms().fst().stream();
    while let Some((k, v)) = s.next() {
        let info = f.resolve(f.terms().term_ref(v)).unwrap();
        let mut c = r.cursor(&info).unwrap();
        let mut filters = Some(Vec::new());
        while c.doc() != TERMINATED {
            for dir in [Direction::After, Direction::Before] {
                let mut x = Vec::new();
                if !c.copy_filter(dir, &mut x) {
                    filters = None;
                }
                if let Some(all) = filters.as_mut() {
                    all.extend_from_slice(&x);
                }
            }
            c.advance();
        }
        assert_eq!(filters.is_some(), info.region.after_len > 0, "{k:?}");
        out.insert(k.to_vec(), (info.region.doc_freq as u64, filters));
    }
    out
}

#[test]
fn filters_go_to_the_terms_within_the_ceiling_and_merges_keep_them() {
    let (mut dropped, mut kept, mut filled) = (0, 0, 0);
    for case in 0..24u64 {
        let seed = gen::mix(SEED, case);
        let corpus = gen::corpus(seed, case);
        if corpus.docs.len() < 8 {
            continue;
        }
        let mut rng = Rng::new(gen::mix(seed, 1));
        let params = BloomParams {
            max_doc_share: *rng.pick(&[0.05, 0.2, 0.5]),
            min_doc_ceiling: rng.range(1, 8) as u64,
            ..BloomParams::default()
        };
        let mut opts: IndexOptions = gen::index_options(seed);
        opts.bloom = Some(params);
        opts.threads = 1;
        let root = tempfile::tempdir().unwrap();
        // One segment of everything (no merge follows: no slack).
        let mut single = opts.clone();
        single.merge = false;
        single.segment_docs = usize::MAX;
        let docs: Vec<Document> = corpus.docs.clone();
        build_index(docs.iter().cloned().map(Ok), &root.path().join("single"), &single).unwrap();
        // Several segments, then merged.
        let mut parts = opts.clone();
        parts.merge = false;
        parts.segment_docs = (docs.len() / rng.range(2, 5)).max(1);
        build_index(docs.iter().cloned().map(Ok), &root.path().join("parts"), &parts).unwrap();
        let single = Index::open(&root.path().join("single"), OpenOptions::default()).unwrap();
        let src = Index::open(&root.path().join("parts"), OpenOptions::default()).unwrap();
        merge_into(&src, &root.path().join("merged"), rng.range(1, 4));
        let merged = Index::open(
            &root.path().join("merged"),
            OpenOptions {
                verify: true,
                ..Default::default()
            },
        )
        .unwrap();
        let ctx = format!("case {case} ({}, {params:?})", corpus.description);
        let format = single.manifest().postings_format();
        assert_eq!(single.segments().len(), 1, "{ctx}");

        // The rule, in each source segment and in the single build.
        let sources: Vec<Terms> = (0..src.segments().len()).map(|i| segment_terms(&src, i)).collect();
        for (i, terms) in sources.iter().enumerate() {
            let ceiling = params.doc_ceiling(src.segments()[i].meta().max_doc as u64);
            for (k, (df, f)) in terms {
                let want = format.filtered_term(k) && *df <= ceiling;
                assert_eq!(f.is_some(), want, "{ctx}: segment {i} {k:?} df {df} ceiling {ceiling}");
            }
        }
        let one = segment_terms(&single, 0);
        let ceiling = params.doc_ceiling(docs.len() as u64);
        for (k, (df, f)) in &one {
            let want = format.filtered_term(k) && *df <= ceiling;
            assert_eq!(f.is_some(), want, "{ctx}: single {k:?} df {df} ceiling {ceiling}");
            if want {
                kept += 1;
            } else if format.filtered_term(k) {
                dropped += 1;
            }
        }

        // The merge: filters where the single build has them, with its
        // bytes, or all ones for a source's documents without them.
        let fb = params.shape().unwrap().bytes as usize;
        let all = segment_terms(&merged, 0);
        assert_eq!(all.len(), one.len(), "{ctx}");
        for (k, (df, f)) in &all {
            assert_eq!(f.is_some(), one[k].1.is_some(), "{ctx}: merged {k:?} df {df}");
            let (Some(f), Some(want)) = (f, &one[k].1) else {
                continue;
            };
            let in_sources = sources.iter().filter_map(|t| t.get(k)).all(|(_, sf)| sf.is_some());
            if in_sources {
                assert_eq!(f, want, "{ctx}: merged {k:?} filter bytes");
                continue;
            }
            filled += 1;
            assert_eq!(f.len(), want.len(), "{ctx}: merged {k:?}");
            for (a, b) in f.chunks(fb).zip(want.chunks(fb)) {
                assert!(
                    a == b || a.iter().all(|&x| x == 0xff),
                    "{ctx}: merged {k:?} filter {a:?} / {b:?}"
                );
            }
        }

        // Answers: phrases of the corpus's words, merged and unmerged.
        let s_src = Searcher::open(&root.path().join("parts")).unwrap();
        let s_merged = Searcher::open(&root.path().join("merged")).unwrap();
        let s_single = Searcher::open(&root.path().join("single")).unwrap();
        for _ in 0..20 {
            let q = gen::query(&mut rng, &corpus.lexicon);
            let ids = |s: &Searcher| {
                let r = s.search_parsed(&q, Mode::TopKAndCount, 1000).unwrap();
                let mut ids: Vec<String> = r.hits.iter().map(|h| s.doc_id(h.doc).unwrap()).collect();
                ids.sort();
                (ids, r.count)
            };
            let want = ids(&s_single);
            assert_eq!(ids(&s_src), want, "{ctx}: {q:?}");
            assert_eq!(ids(&s_merged), want, "{ctx}: {q:?}");
        }
    }
    // The cases cover both sides of the ceiling, and merges of a term a
    // source had no filters for.
    assert!(kept > 50 && dropped > 10, "kept {kept}, dropped {dropped}");
    assert!(filled > 0, "no merged term had a source without its filters");
}
