//! The cache's bookkeeping with a fake evaluator (its answers against real
//! evaluation are tested in `tests/result_cache.rs`).

use super::*;
use crate::analysis::AnalyzerConfig;
use crate::indexing::{build_index, IndexOptions};
use crate::query::parse;
use crate::schema::Document;

/// Fake results: `n` hits whose docs encode the query's debug form length.
fn fake(q: &ast::Query, n: usize) -> SearchResults {
    let tag = format!("{q:?}").len() as u32;
    SearchResults {
        hits: (0..n as u32)
            .map(|i| Hit {
                doc: tag * 1000 + i,
                score: 1.0,
            })
            .collect(),
        count: Some(n as u64),
        sort: None,
        aggregations: None,
    }
}

struct Run {
    cache: ResultCache,
    /// An index holding every word the tests ask for, in both fields (keys
    /// come from plans on it).
    searcher: Searcher,
    _dir: tempfile::TempDir,
    evaluations: usize,
}

impl Run {
    fn new(config: CacheConfig) -> Run {
        let dir = tempfile::tempdir().unwrap();
        let words = "apple banana w0 w1 w2 w3 w4 w5 w6 huge rare common";
        let docs = (0..3).map(|i| Ok(Document::title_body(format!("d{i}"), words, words)));
        let opts = IndexOptions {
            analyzer: AnalyzerConfig::english(),
            ..Default::default()
        };
        build_index(docs, dir.path(), &opts).unwrap();
        Run {
            cache: ResultCache::new(config).unwrap(),
            searcher: Searcher::open(dir.path()).unwrap(),
            _dir: dir,
            evaluations: 0,
        }
    }

    fn ask(&mut self, snapshot: u64, text: &str, hits: usize) -> Outcome {
        let q = parse(text).unwrap();
        let canon = Canonical::new(&self.searcher, &q).unwrap();
        let evaluations = &mut self.evaluations;
        let (r, outcome) = self
            .cache
            .get_or_eval(snapshot, 0, &canon, &q, Mode::TopK, 10, |q| {
                *evaluations += 1;
                Ok(fake(q, hits))
            })
            .unwrap();
        assert_eq!(r.hits.len(), hits);
        for s in self.cache.stats().shards {
            assert!(s.bytes_used() <= s.capacity, "{s:?}");
        }
        outcome
    }
}

fn config(policy: PolicyKind, bytes: u64) -> CacheConfig {
    CacheConfig {
        policy,
        bytes,
        ..CacheConfig::default()
    }
}

#[test]
fn isomorphic_queries_share_an_entry() {
    let mut r = Run::new(config(PolicyKind::Lru, 1 << 20));
    assert_eq!(r.ask(1, "apple banana", 3), Outcome::Miss);
    assert_eq!(r.ask(1, "banana apple", 3), Outcome::Hit);
    assert_eq!(r.ask(1, "(BANANA) apple", 3), Outcome::Hit);
    assert_eq!(r.ask(1, "+banana +apple", 3), Outcome::Miss);
    assert_eq!(r.ask(1, "the", 0), Outcome::Bypass);
    assert_eq!(r.evaluations, 3);
}

#[test]
fn partial_matching_answers_words_from_disjunctions() {
    for sharding in [Sharding::Hashed(1), Sharding::Hashed(4)] {
        let mut r = Run::new(CacheConfig {
            matching: Matching::Partial,
            sharding,
            ..config(PolicyKind::Dlirs, 1 << 20)
        });
        assert_eq!(r.ask(1, "apple banana", 3), Outcome::Miss);
        // The disjunction and each of its words were evaluated.
        assert_eq!(r.evaluations, 3);
        assert_eq!(r.ask(1, "Banana", 3), Outcome::PartialHit);
        assert_eq!(r.ask(1, "title:banana", 3), Outcome::Miss);
        let st = r.cache.stats();
        assert_eq!((st.total.hits, st.total.partial_hits, st.total.misses), (0, 1, 2));
    }
    let mut r = Run::new(config(PolicyKind::Dlirs, 1 << 20));
    r.ask(1, "apple banana", 3);
    assert_eq!(r.ask(1, "banana", 3), Outcome::Miss, "isomorphic matching only");
}

#[test]
fn a_newer_snapshot_empties_the_cache_and_an_older_one_bypasses_it() {
    let mut r = Run::new(config(PolicyKind::Dlirs, 1 << 20));
    r.ask(5, "apple", 2);
    assert_eq!(r.ask(5, "apple", 2), Outcome::Hit);
    assert_eq!(r.ask(6, "apple", 2), Outcome::Miss);
    assert_eq!(r.cache.stats().total.invalidations, 1);
    assert_eq!(r.ask(5, "apple", 2), Outcome::Bypass);
    assert_eq!(r.ask(6, "apple", 2), Outcome::Hit);
}

#[test]
fn budget_holds_and_small_results_can_be_refused() {
    for policy in [PolicyKind::Lru, PolicyKind::Dlirs] {
        let mut r = Run::new(config(policy, 8192));
        for i in 0..200 {
            r.ask(1, &format!("w{} w{}", i % 7, i % 5), 40);
        }
        let st = r.cache.stats();
        assert!(st.total.evictions > 0 && st.total.hits > 0, "{st:?}");
        // A result larger than the whole budget is refused, not cached.
        r.ask(1, "huge", 2000);
        assert!(r.cache.stats().total.rejected > 0);
    }
    let mut r = Run::new(CacheConfig {
        min_hits: 2,
        ..config(PolicyKind::Lru, 1 << 20)
    });
    r.ask(1, "rare", 1);
    assert_eq!(r.ask(1, "rare", 1), Outcome::Miss);
    r.ask(1, "common", 5);
    assert_eq!(r.ask(1, "common", 5), Outcome::Hit);
}

#[test]
fn too_small_a_budget_is_an_error() {
    let e = ResultCache::new(CacheConfig {
        bytes: 10_000,
        sharding: Sharding::Hashed(8),
        ..CacheConfig::default()
    })
    .err()
    .unwrap();
    assert!(e.to_string().contains("per shard"), "{e}");
}
