//! One query over several indices scored with their summed statistics
//! (`GlobalStats`, issue #23): on seeded random corpora split at random
//! into two or three indices, every query's matches and scores over the
//! parts equal those of one index holding every document, to the last bit.

mod support;

use std::collections::HashMap;
use std::sync::Arc;

use support::gen::{self, Rng};
use tierdex::indexing::build_index;
use tierdex::search::{Mode, Searcher};
use tierdex::Document;

fn scores(s: &Searcher, q: &tierdex::query::ast::Query) -> HashMap<String, f32> {
    let r = s.search_parsed(q, Mode::TopKAndCount, 100_000).unwrap();
    assert_eq!(r.count, Some(r.hits.len() as u64));
    r.hits.iter().map(|h| (s.doc_id(h.doc).unwrap(), h.score)).collect()
}

fn build(docs: &[Document], dir: &std::path::Path, opts: &tierdex::indexing::IndexOptions) -> Searcher {
    build_index(
        docs.iter().cloned().map(Ok::<Document, tierdex::corpus::CorpusError>),
        dir,
        opts,
    )
    .unwrap();
    Searcher::open(dir).unwrap()
}

#[test]
fn split_indices_score_as_one() {
    let mut checked = 0;
    for case in 0..16u64 {
        let seed = gen::mix(0x610b, case);
        let corpus = gen::corpus(seed, case);
        if corpus.docs.len() < 3 {
            continue;
        }
        let opts = gen::index_options(seed);
        let mut rng = Rng::new(seed ^ 0x5);
        let parts = rng.range(2, 3);
        let mut split: Vec<Vec<Document>> = vec![Vec::new(); parts];
        for (i, d) in corpus.docs.iter().enumerate() {
            // Every part gets a document; the rest land at random.
            let p = if i < parts { i } else { rng.range(0, parts - 1) };
            split[p].push(d.clone());
        }
        let tmp = tempfile::tempdir().unwrap();
        let whole = build(&corpus.docs, &tmp.path().join("whole"), &opts);
        let searchers: Vec<Searcher> = split
            .iter()
            .enumerate()
            .map(|(i, docs)| build(docs, &tmp.path().join(format!("part{i}")), &opts))
            .collect();
        for q in 0..30u64 {
            let query = gen::query_case(gen::mix(seed, q), &corpus.lexicon).query;
            let want = scores(&whole, &query);
            let refs: Vec<&Searcher> = searchers.iter().collect();
            let global = Arc::new(Searcher::gather_global_stats(&refs, &query).unwrap());
            let mut got = HashMap::new();
            for s in &searchers {
                got.extend(scores(&s.with_global_stats(global.clone()), &query));
            }
            let ctx = format!("case {case} ({}), query {q}: {query:?}", corpus.description);
            assert_eq!(got.len(), want.len(), "{ctx}: matches");
            for (id, w) in &want {
                let g = got.get(id).unwrap_or_else(|| panic!("{ctx}: {id} missing"));
                // To the last bit: every part plans the query as one index
                // does (terms only other parts hold included), so scores are
                // summed in the same order.
                assert_eq!(
                    g.to_bits(),
                    w.to_bits(),
                    "{ctx}: {id} scores {g} over the parts, {w} in one index"
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 200, "only {checked} queries checked");
}

#[test]
fn local_statistics_differ_from_global_ones() {
    let docs: Vec<Document> = (0..40)
        .map(|i| {
            let body = if i < 30 { "rare common" } else { "common common" };
            Document::title_body(format!("d{i}"), "t", body)
        })
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    let opts = tierdex::indexing::IndexOptions::default();
    let a = build(&docs[..20], &tmp.path().join("a"), &opts);
    let b = build(&docs[20..], &tmp.path().join("b"), &opts);
    let q = b.parse("rare").unwrap();
    let global = Arc::new(Searcher::gather_global_stats(&[&a, &b], &q).unwrap());
    let local = b.search_parsed(&q, Mode::TopK, 1).unwrap().hits[0].score;
    let shared = b
        .with_global_stats(global.clone())
        .search_parsed(&q, Mode::TopK, 1)
        .unwrap()
        .hits[0]
        .score;
    let in_a = a
        .with_global_stats(global)
        .search_parsed(&q, Mode::TopK, 1)
        .unwrap()
        .hits[0]
        .score;
    assert!((local - shared).abs() > 1e-3, "local {local}, global {shared}");
    assert_eq!(shared, in_a, "the same document scores the same in either part");
}
